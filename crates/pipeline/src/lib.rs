//! zkpipe-pipeline: the Groth16 prover over BLS12-381 and the engine that runs it.
//!
//! - [`ProvingKey`] (checked points, shared through `Arc`), [`Witness`] (a synthesized
//!   circuit), [`Proof`] (bellperson's 192-byte encoding) and [`verify`].
//! - The Groth16 steps (H polynomial, G1 MSMs, G2 MSM, assembly) over any [`zkpipe_ntt::Ntt`]
//!   and [`zkpipe_msm::Msm`], run by the engine's CPU backend and G2 stage; the GPU backend
//!   runs its own kernels for the first two and shares the assembly.
//! - [`Engine`]: jobs in, proofs out; workers per device share a GPU lock and a VRAM budget,
//!   the G2 MSM and the assembly run in their own stage, and with no GPU every stage runs on
//!   the CPU. The same r and s give byte-identical proofs on either backend. On a GPU engine
//!   a key's points are page-locked in place on first use ([`Engine::load_key`]), so that
//!   every upload of them is DMA at full speed; each job's `g1` span records its uploaded
//!   bytes and the CUDA-event device milliseconds of its H step and MSMs.
//! - A GPU job runs under a plan chosen at admission from the VRAM budget. Every worker either
//!   keeps its memory from job to job, or each job allocates its own. The H step uses four
//!   vectors, or three. The MSM chunk size is set, and the key is resident or streamed. A job
//!   that fits no plan is an error naming the smallest plan's bytes.
//! - Every proof is checked before it is returned ([`Config::proof_check`], on by default): its
//!   points on their curves and in the subgroup, then the pairing equation against the job's
//!   key and public inputs. A proof that fails is [`ProveError::ProofRejected`], never bytes.
//! - Witnesses can be synthesized straight into page-locked memory the engine lends
//!   ([`Engine::lend_witness`] for a, b, c and the aux values, [`Engine::lend_evaluations`] for
//!   a, b, c; [`Scalars`]); [`JobHandle::wait_report`] tells what a job did.
//!
//! ```no_run
//! use std::sync::Arc;
//! use zkpipe_pipeline::{Config, Engine, Randomness};
//! # fn demo(key: zkpipe_pipeline::ProvingKey, witness: zkpipe_pipeline::Witness) -> Result<(), zkpipe_pipeline::ProveError> {
//! let engine = Engine::start(Config::default())?;
//! let key = Arc::new(key);
//! let proof = engine.submit(&key, witness, Randomness::Random)?.wait()?;
//! let bytes = proof.to_bytes();
//! # let _ = bytes; Ok(()) }
//! ```

mod config;
mod device;
mod engine;
mod error;
mod g1;
mod key;
mod metrics;
mod params;
mod plan;
mod proof;
mod prover;
mod stats;
pub mod testgen;
mod witness;

pub use config::file::parse_bytes;
pub use config::{
    Backend, Config, G2Placement, OnDeviceFailure, ProofCheck, StreamedPoints, CONFIG_MAX,
};
pub use engine::{Engine, JobHandle, Lane, Quarantine, Randomness, Refused};
pub use error::{DeviceFault, ProofFault, ProveError};
pub use key::{KeyParts, PreparedVerifyingKey, ProvingKey, VerifyingKey};
pub use params::{read_params, read_params_unchecked, ParamsError, PointProblem};
pub use proof::{check, verify, Proof, PROOF_BYTES};
#[cfg(feature = "fault-injection")]
pub mod inject;
pub use stats::{
    EngineStats, JobMemoryUse, JobReport, KeyPlacement, LinkReport, MatricesPlacement, PlanReport,
    Stage, StageTime,
};
pub use witness::{LentWitness, PinnedScalars, Scalars, Witness};
