//! What a device keeps between jobs: a resident key's points, a resident recording's
//! matrices, and job memory that idle
//! workers hold for a next job of its shape.

use zkpipe_msm::{BatchMemory, DeviceBases, Multiples, G1, G2};
use zkpipe_ntt::HStepBuffers;
use zkpipe_r1cs::DeviceRecording;
use zkpipe_stream::VramGrant;

use crate::plan::HStep;
use crate::prover::G1Query;

/// A key's points on one device, uploaded once and reused by every job of that key.
#[derive(Debug)]
pub(crate) struct ResidentKey {
    /// The key's [`crate::ProvingKey::id`].
    pub key: u64,
    /// h's points and one identity (h_step leaves n coefficients; the last meets the identity).
    pub h: DeviceBases<G1>,
    pub l: DeviceBases<G1>,
    pub a: DeviceBases<G1>,
    pub b_g1: DeviceBases<G1>,
    pub b_g2: Option<DeviceBases<G2>>,
    pub grant: VramGrant,
}

impl ResidentKey {
    /// The points of a witness query in G1.
    pub fn g1(&self, q: G1Query) -> &DeviceBases<G1> {
        match q {
            G1Query::L => &self.l,
            G1Query::A => &self.a,
            G1Query::B1 => &self.b_g1,
        }
    }
}

/// A recording's matrices on one device, uploaded once and read by every job of its circuit.
#[derive(Debug)]
pub(crate) struct ResidentRecording {
    /// The content's digest: a recording is resident for jobs only of that very content.
    pub digest: zkpipe_r1cs::Digest,
    pub matrices: DeviceRecording,
    pub grant: VramGrant,
}

/// The MSM batches' memory of a job: H's, the G1 split MSMs' (L, A, B1) beside it, and B2's
/// when G2 runs on the GPU.
#[derive(Debug)]
pub(crate) struct Batches {
    pub h: BatchMemory<G1>,
    pub side: BatchMemory<G1>,
    pub g2: Option<BatchMemory<G2>>,
}

/// A job's device memory: the H step's vectors (none for a one-point domain) and the MSM
/// batches' memory, kept by the worker from job to job or allocated for the job (then the
/// batches only once the H step has freed all its vectors but h's, as the plan counts them).
#[derive(Debug)]
pub(crate) struct JobMemory {
    pub h_step: Option<HStepBuffers>,
    pub batches: Option<Batches>,
}

/// What job memory serves: a job of this shape can use it as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryShape {
    /// The domain size.
    pub n: usize,
    pub h_step: HStep,
    /// H's MSM chunk, in points.
    pub chunk: usize,
    /// The split MSMs' chunk, in points.
    pub side_chunk: usize,
    /// The multiples of the resident H points that H's workspace holds the plan of.
    pub multiples: Option<Multiples>,
}

/// Job memory kept from job to job, and its grant.
#[derive(Debug)]
pub(crate) struct Kept {
    pub shape: MemoryShape,
    pub mem: JobMemory,
    pub grant: VramGrant,
}
