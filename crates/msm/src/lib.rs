//! zkpipe-msm: multi-scalar multiplication for G1 and G2.
//!
//! This first part holds what every implementation shares: the [`Msm`] trait, [`Bases`]
//! (checked where points enter the engine: on the curve and in the subgroup, with an unchecked
//! twin for trusted keys), [`Density`] bitmaps with bellperson's `DensityTracker` semantics,
//! canonical-scalar checks, and [`CpuMsm`], the blst reference with a batch-addition path for
//! scalars that are only 0 or 1; and [`CudaMsm`], a GPU Pippenger (signed-digit windows, buckets
//! sorted by counting, parallel bucket sums in XYZZ coordinates with the longest tasks first,
//! G2's over an Fp2 multiplication with lazy reduction, segmented window reduction) with bases
//! resident on the device or streamed from pinned memory, and a batch-addition path for 0/1
//! scalars.
//!
//! For Groth16's witness-valued queries, whose scalars are mostly 0 or 1, [`SplitScalars`]
//! splits an assignment by value on the host (a bitmap of the ones, and the tail of other
//! values with their variables). [`SplitQuery`] numbers one query's density over it. An
//! [`MsmBatch`] then sums a query's ones without multiplications, in equal shares per thread,
//! and runs a Pippenger over its tail. It applies the density on the device, by rank, and
//! makes no host copies of selected scalars. The batch enqueues dense and split MSMs back to
//! back on one stream, in memory a caller can keep ([`BatchMemory`]), and reads their results
//! into pinned memory, with one wait at the end.

#![deny(unsafe_code)]

#[cfg(feature = "ec-gpu-gen")]
pub mod baseline;
mod bases;
mod batch;
mod cpu;
mod cuda;
mod density;
pub mod kernels;
mod pippenger;
mod split;
mod streamed;
pub mod testgen;

pub use bases::{scalars_from_le_bytes, Bases, Point};
pub use batch::{
    BaseSource, BasesAt, BatchMemory, DeviceQuery, DeviceSplit, Gathered, MsmBatch, MsmResults,
    Ticket,
};
pub use cpu::CpuMsm;
pub use cuda::{CudaError, CudaMsm, DeviceBases, GpuCurve, Multiples, ScalarKind, G1, G2};
pub use density::Density;
pub use kernels::{MsmTuning, TaskSplit};
pub use pippenger::{window_bits, windows, DIGIT_BITS, WINDOW_BITS};
pub use split::{SplitQuery, SplitScalars, WordPiece};
pub use streamed::StreamOptions;

use blstrs::Scalar;

/// Errors of the MSM stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MsmError {
    /// Bases and scalars of different lengths (without a density bitmap).
    #[error("MSM: {bases} bases but {scalars} scalars")]
    LengthMismatch { bases: usize, scalars: usize },
    /// A density bitmap whose length differs from the scalars'.
    #[error("MSM: density bitmap covers {bitmap} variables but {scalars} scalars were given")]
    DensityLength { bitmap: usize, scalars: usize },
    /// A density bitmap selecting a different number of variables than there are bases.
    #[error("MSM: density bitmap selects {selected} variables but there are {bases} bases")]
    DensityCount { selected: usize, bases: usize },
    /// A scalar encoding of a value >= r.
    #[error("MSM: scalar {index} is not canonical (not below the group order r)")]
    NonCanonical { index: usize },
    /// A base point that is not on the curve.
    #[error("MSM: base {index} is not on the curve")]
    NotOnCurve { index: usize },
    /// A scalar other than 0 or 1 where only those were promised.
    #[error("MSM: scalar {index} is neither 0 nor 1, but the scalars were declared boolean")]
    NotBoolean { index: usize },
    /// The device failed.
    #[error("MSM on the device: {0}")]
    Device(Box<CudaError>),
    /// An assignment too long for 32-bit variable indices.
    #[error("MSM: {len} variables; a split MSM numbers them with 32 bits (at most 2^32 - 1)")]
    TooManyVariables { len: usize },
    /// Points gathered for a query that do not fit where they go ([`SplitQuery::gather`]).
    #[error("MSM gather: {what} {got}, where there is room for {room}")]
    Gather {
        what: &'static str,
        got: usize,
        room: usize,
    },
    /// A base point outside the prime-order subgroup.
    #[error("MSM: base {index} is not in the prime-order subgroup")]
    NotInSubgroup { index: usize },
}

impl MsmError {
    /// Wraps a device error for the [`Msm`] trait, keeping input errors as they are.
    pub fn device(e: CudaError) -> Self {
        match e {
            CudaError::Msm(m) => m,
            other => MsmError::Device(Box::new(other)),
        }
    }

    /// The failed driver call behind the error, if one is.
    pub fn driver_error(&self) -> Option<&zkpipe_cuda::Error> {
        match self {
            MsmError::Device(e) => e.driver_error(),
            _ => None,
        }
    }
}

/// The MSM stage: sum of scalars\[i\] · bases\[i\], optionally over the variables that a density
/// bitmap selects (then bases hold only the selected variables, in order).
pub trait Msm: Send + Sync {
    /// An MSM in G1.
    fn g1(
        &self,
        bases: &Bases<blstrs::G1Affine>,
        scalars: &[Scalar],
        density: Option<&Density>,
    ) -> Result<blstrs::G1Projective, MsmError>;

    /// An MSM in G2.
    fn g2(
        &self,
        bases: &Bases<blstrs::G2Affine>,
        scalars: &[Scalar],
        density: Option<&Density>,
    ) -> Result<blstrs::G2Projective, MsmError>;

    /// Several MSMs over the same G1 bases (many circuits of one key).
    fn g1_batch(
        &self,
        bases: &Bases<blstrs::G1Affine>,
        scalar_sets: &[&[Scalar]],
        density: Option<&Density>,
    ) -> Result<Vec<blstrs::G1Projective>, MsmError> {
        scalar_sets
            .iter()
            .map(|s| self.g1(bases, s, density))
            .collect()
    }

    /// A name for logs.
    fn name(&self) -> String;
}
