//! zkpipe-filecoin: Filecoin's proof kinds from what a storage provider holds, proved by the
//! zkpipe engine on filecoin-proofs' own circuits.
//!
//! - [`Request`]: a PoRep C2 (a C1 output, prover id, sector id), a WindowPoSt (whole, or one
//!   partition), a WinningPoSt or a SnapDeals update proof, with the inputs filecoin-proofs'
//!   `…_with_vanilla` functions take ([`request`]).
//! - [`Prover`]: builds each partition's circuit from the vanilla proofs through storage-proofs'
//!   compound-proof constructors, synthesizes it into the engine's lent (page-locked) witness
//!   memory and submits it as a job of the engine, so that the next partitions synthesize
//!   beside this one's GPU work ([`ProveOptions::synthesis_threads`] at once). Every partition
//!   proof is checked by the engine before it is returned and its public inputs are compared
//!   with the ones filecoin-proofs' verifier will use; a proof that fails its check is proved
//!   once more, then refused. The bytes are filecoin-proofs' (192 bytes a partition).
//! - [`ParamsCache`]: parameter files found where filecoin-proofs keeps them
//!   (`FIL_PROOFS_PARAMETER_CACHE`), resident per file, generated for test sector sizes.
//! - [`gen`]: real inputs made with filecoin-proofs on the CPU (a sector sealed from random
//!   data, then its C1 output, PoSt vanilla proofs and a SnapDeals update's partition proofs).

#![forbid(unsafe_code)]

/// Calls `$f::<Tree>(args)` with the sector shape of `$size` bytes.
macro_rules! with_shape {
    ($size:expr, $f:ident, $($arg:expr),* $(,)?) => {
        match $size {
            0x800 => $f::<filecoin_proofs::SectorShape2KiB>($($arg),*),
            0x80_0000 => $f::<filecoin_proofs::SectorShape8MiB>($($arg),*),
            0x2000_0000 => $f::<filecoin_proofs::SectorShape512MiB>($($arg),*),
            0x8_0000_0000 => $f::<filecoin_proofs::SectorShape32GiB>($($arg),*),
            0x10_0000_0000 => $f::<filecoin_proofs::SectorShape64GiB>($($arg),*),
            other => Err($crate::FilecoinError::Unsupported {
                what: format!("sector size {other}"),
                why: "filecoin-proofs proves 2 KiB, 8 MiB, 512 MiB, 32 GiB and 64 GiB sectors",
            }),
        }
    };
}

pub mod gen;
pub mod keys;
mod kinds;
pub mod params;
mod prover;
pub mod request;
pub mod schedule;
pub mod shaped;
pub mod verify;

use std::path::PathBuf;

pub use keys::{KeyKind, KeyName};
pub use kinds::{porep_blank_id, record_porep_blank};
pub use params::{EvictedKey, KeyTier, LoadedKey, ParamsCache, ResidentKey, Trust, CIRCUIT_SOURCE};
pub use prover::{
    synthesis_bytes, witness_bytes, PartitionReport, PartitionWitness, ProofOutput, ProveOptions,
    Prover, ReferenceOutput, Retry, Synthesis, SynthesisMemory,
};
pub use request::{PoRepC2, Request, SnapUpdate, WindowPoSt, WinningPoSt};
pub use schedule::{Priority, Scheduling, Turn};

/// What went wrong with a Filecoin proof: the input, the parameters, or the proving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilecoinError {
    /// An input file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A JSON input that does not parse as what it should be.
    #[error("{what} is not valid: {source}")]
    Json {
        what: &'static str,
        source: serde_json::Error,
    },
    /// A vanilla proof that does not decode (bincode, as filecoin-proofs-api passes them).
    #[error("vanilla proof {index}: not a {what} (bincode): {source}")]
    Vanilla {
        index: usize,
        what: &'static str,
        source: bincode::Error,
    },
    /// A hex string of the wrong length or with a non-hex digit.
    #[error("{what}: {reason}")]
    Hex { what: &'static str, reason: String },
    /// Parts of the input that do not belong together.
    #[error("{what}: expected {expected}, got {got}")]
    Mismatch {
        what: &'static str,
        expected: String,
        got: String,
    },
    /// Input that is well-formed but outside what this prover does.
    #[error("{what} is not supported: {why}")]
    Unsupported { what: String, why: &'static str },
    /// filecoin-proofs or storage-proofs refused the input.
    #[error("{step}: {source:#}")]
    Filecoin {
        step: &'static str,
        source: anyhow::Error,
    },
    /// filecoin-proofs or storage-proofs panicked on the input (caught at this crate's
    /// boundary).
    #[error("{step} panicked on this input (partition {partition:?}): {message}")]
    Panicked {
        step: &'static str,
        partition: Option<usize>,
        message: String,
    },
    /// The circuit of a partition could not be synthesized.
    #[error("partition {partition}: synthesis failed: {source}")]
    Synthesis {
        partition: usize,
        source: bellperson::SynthesisError,
    },
    /// A partition's circuit does not have the shape of the recording of its parameter set's
    /// circuit (the recording is used only for the circuit it was made from).
    #[error("partition {partition}: {source}")]
    RecordingMismatch {
        partition: usize,
        source: zkpipe_r1cs::RecordingError,
    },
    /// The recording of a circuit could not be made.
    #[error("recording the circuit of {path}: {source}")]
    Recording {
        path: std::path::PathBuf,
        source: Box<zkpipe_bellperson::RecordedError>,
    },
    /// A partition's circuit allocated other public inputs than filecoin-proofs' verifier
    /// derives from the request: the vanilla proofs do not match the request's commitments,
    /// randomness or sectors.
    #[error("partition {partition}: the circuit's public input {index} differs from the verifier's (of {count}): the vanilla proofs do not match the request")]
    PublicInputs {
        partition: usize,
        index: usize,
        count: usize,
    },
    /// A partition's witness does not satisfy its circuit: the vanilla proofs do not match the
    /// request (its randomness, sectors or commitments) or are damaged.
    #[error("partition {partition}: the vanilla proofs do not satisfy the circuit (they do not match the request's randomness, sectors or commitments, or are damaged); no proof was made")]
    Unsatisfied { partition: usize },
    /// A parameter file that is not there (and is not generated: production sizes).
    #[error("no parameter file {path}: {hint}")]
    ParamsMissing { path: PathBuf, hint: &'static str },
    /// A parameter file whose digest is not the one published for it, or given for it.
    #[error("parameter file {path} is damaged or not the one expected: its digest is {got}, {by} {expected}")]
    ParamsDamaged {
        path: PathBuf,
        expected: String,
        got: String,
        /// Who gives the expected digest.
        by: &'static str,
    },
    /// A parameter file that zkpipe's reader refused (truncated, a bad point, …).
    #[error(transparent)]
    Params {
        source: Box<zkpipe_pipeline::ParamsError>,
    },
    /// A parameter file that holds the parameters of another circuit.
    #[error("parameter file {path} is not of this circuit (partition {partition}): {source}")]
    ParamsOfOtherCircuit {
        path: PathBuf,
        partition: usize,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Parameters generated in this process that do not make a key (a shape error).
    #[error("generated parameters: {source}")]
    GeneratedKey { source: zkpipe_pipeline::ProveError },
    /// Writing generated parameters failed.
    #[error("parameter file {path}: {source}")]
    ParamsIo {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Generating test parameters failed.
    #[error("generating parameters {id}: {source}")]
    ParamsGenerate {
        id: String,
        source: bellperson::SynthesisError,
    },
    /// The engine failed a partition's job (after one retry when its proof was refused by
    /// the check before return).
    #[error("partition {partition}: {source}")]
    Prove {
        partition: usize,
        source: zkpipe_pipeline::ProveError,
    },
    /// Reading a key would pass the keys' host memory budget, and the keys held are in use.
    #[error("the proving keys' budget of {budget} bytes has no room for {path} ({needed} bytes): {held} bytes are held by keys in use")]
    KeyBudget {
        path: PathBuf,
        needed: usize,
        budget: usize,
        held: usize,
    },
    /// A key that a job (or anything besides the cache) holds cannot be evicted.
    #[error("key {id} is in use ({references} references besides the cache's)")]
    KeyInUse { id: String, references: usize },
    /// The witness of a proof of a circuit other than Filecoin's ([`Prover::prove_circuit`])
    /// could not be made by its caller's closure.
    #[error("the witness: {source}")]
    Witness {
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A proof of a circuit other than Filecoin's ([`Prover::prove_circuit`]) failed on the
    /// engine, or its witness was refused there.
    #[error("{source}")]
    Circuit { source: zkpipe_pipeline::ProveError },
    /// One partition's synthesis would need more host memory than the whole budget for
    /// synthesis working sets.
    #[error("a partition of {path} synthesizes in about {needed} bytes of host memory, more than the budget of {budget} bytes for synthesis (synthesis_memory)")]
    SynthesisMemory {
        path: PathBuf,
        needed: usize,
        budget: usize,
    },
    /// The caller cancelled the proof: its partitions not yet started were never started.
    #[error(
        "cancelled with {proved} of {partitions} partitions proved; those not started never ran"
    )]
    Cancelled { proved: usize, partitions: usize },
}

impl FilecoinError {
    /// True for errors of the input or the parameter files (the CLI's exit status 2), false
    /// for failures of the engine.
    pub fn is_bad_input(&self) -> bool {
        !matches!(
            self,
            FilecoinError::Prove { .. }
                | FilecoinError::Circuit { .. }
                | FilecoinError::ParamsIo { .. }
                | FilecoinError::Cancelled { .. }
                | FilecoinError::KeyBudget { .. }
                | FilecoinError::SynthesisMemory { .. }
                | FilecoinError::KeyInUse { .. }
        )
    }

    pub(crate) fn filecoin(step: &'static str) -> impl FnOnce(anyhow::Error) -> Self {
        move |source| FilecoinError::Filecoin { step, source }
    }
}

/// Runs `f`, turning a panic of filecoin-proofs' code into [`FilecoinError::Panicked`].
pub(crate) fn catch<T>(
    step: &'static str,
    partition: Option<usize>,
    f: impl FnOnce() -> T,
) -> Result<T, FilecoinError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        FilecoinError::Panicked {
            step,
            partition,
            message,
        }
    })
}
