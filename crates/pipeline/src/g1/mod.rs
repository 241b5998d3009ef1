//! The G1 stage of a job: the H step and the G1 MSMs (H, L, A, B1), and B2 when the GPU sums
//! it. A worker drives it through one trait, [`G1Backend`], with two sides: [`CpuBackend`]
//! (the prover's steps on the host's cores) and [`GpuBackend`] (a worker of one device, with
//! its admission, staging, kernels, and the engine's policy for a device that fails).

mod cpu;
mod gpu;

use std::sync::Arc;
use std::time::Instant;

use blstrs::G2Projective;
use zkpipe_r1cs::Recording;

pub(crate) use cpu::CpuBackend;
pub(crate) use gpu::GpuBackend;

use crate::prover::{Assignment, G1Parts};
use crate::stats::{Counters, JobReport};
use crate::{ProveError, ProvingKey, Scalars, Witness};

/// What a backend needs of the job it runs, and the engine's counters it reports to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobContext<'a> {
    pub id: u64,
    pub key: &'a ProvingKey,
    /// Waits for device and pinned memory end by it.
    pub deadline: Option<Instant>,
    pub stats: &'a Counters,
}

/// What a G1 stage gives.
#[derive(Debug)]
pub(crate) struct G1Output {
    /// The assignment, when the G2 stage sums B2 from it on the CPU.
    pub z: Option<Assignment>,
    /// H, L, A and B1.
    pub parts: G1Parts,
    /// B2, when the GPU summed it.
    pub b2: Option<G2Projective>,
    pub report: JobReport,
}

/// What a backend's G1 stage came to (one a job, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Ran {
    /// The stage ran (here, or on the CPU).
    Done(G1Output),
    /// The device failed the job and was quarantined; the witness is whole again and the job
    /// goes back to the queue for another device.
    Elsewhere,
}

/// Where a worker's G1 stages run.
pub(crate) trait G1Backend: Send {
    /// True once the backend's device was quarantined (never for the CPU): its worker then
    /// hands jobs to the other devices while any is usable.
    fn quarantined(&self) -> bool;

    /// The G1 stage of `job`. The witness's parts are moved out as the stage uses them, except
    /// when the stage comes to [`Ran::Elsewhere`], which leaves the witness whole.
    fn run(&self, job: &JobContext<'_>, witness: &mut Witness) -> Result<Ran, ProveError>;
}

/// Where a job's a, b and c come from (one a job, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Evaluations {
    /// Synthesis computed them.
    Given([Scalars; 3]),
    /// The stage evaluates them from the assignment and the circuit's recording.
    Recorded(Arc<Recording>),
}

impl Evaluations {
    /// Gives them back to the witness they were taken from.
    fn restore(self, w: &mut Witness) {
        match self {
            Evaluations::Given([a, b, c]) => [w.a, w.b, w.c] = [a, b, c],
            Evaluations::Recorded(rec) => w.recording = Some(rec),
        }
    }
}

/// a, b, c (or the recording they come from) and the assignment, moved out of a witness.
fn take_parts(w: &mut Witness) -> (Evaluations, Assignment) {
    let z = Assignment::take(w);
    let evaluations = match w.recording.take() {
        Some(rec) => Evaluations::Recorded(rec),
        None => Evaluations::Given([
            std::mem::take(&mut w.a),
            std::mem::take(&mut w.b),
            std::mem::take(&mut w.c),
        ]),
    };
    (evaluations, z)
}
