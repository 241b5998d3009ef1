//! zkpipe-ntt: number-theoretic transforms over BLS12-381's scalar field.
//!
//! One trait, [`Ntt`], with a CPU implementation ([`CpuNtt`], blstrs arithmetic on all
//! cores) and a CUDA one ([`CudaNtt`]). Domains of size 2^k for 1 <= k <= 28, forward and
//! inverse (scaled by 1/n) transforms, natural or bit-reversed order on either side, cosets with
//! Fr's multiplicative generator or any shift, batches, and the H-polynomial step of Groth16.
//!
//! ```
//! use blstrs::Scalar;
//! use zkpipe_ntt::{CpuNtt, Direction, Ntt, NttConfig};
//! let mut v: Vec<Scalar> = (0..8u64).map(Scalar::from).collect();
//! let original = v.clone();
//! let ntt = CpuNtt::new();
//! ntt.transform(&mut v, Direction::Forward, &NttConfig::default())?;
//! ntt.transform(&mut v, Direction::Inverse, &NttConfig::default())?;
//! assert_eq!(v, original);
//! # Ok::<(), zkpipe_ntt::NttError>(())
//! ```
//!
//! The H step on the GPU runs in device buffers kept from one step to the next (nothing
//! allocated or freed per step), from where its inputs are: a, b and c already on the device
//! ([`CudaNtt::h_step_in`]), c in pinned memory for three-vector buffers
//! ([`CudaNtt::h_step_three_in`]), or all three in pinned memory, the uploads overlapped with
//! the transforms ([`CudaNtt::h_step_pinned_into`]):
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let ctx = zkpipe_cuda::Context::new(0)?;
//! # let n = 1usize << 20;
//! # let pin = || zkpipe_pinned::PinnedBuffer::<zkpipe_field::Fr>::new(&ctx, n);
//! # let (mut a, mut b, mut c) = (pin()?, pin()?, pin()?);
//! let ntt = zkpipe_ntt::CudaNtt::new(&ctx)?;
//! let mut bufs = ntt.h_step_buffers(n, zkpipe_ntt::HVectors::Four)?; // four vectors of n
//! for _proof in 0..3 {
//!     // ... a, b, c: this proof's evaluations on the domain, in pinned memory
//!     [a, b, c] = ntt.h_step_pinned_into(&mut bufs, a, b, c)?;
//!     let h = bufs.h(); // h's n - 1 coefficients (and a zero), on the device
//!     # let _ = h;
//! }
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "ec-gpu-gen")]
pub mod baseline;
mod cpu;
mod cuda;
mod cuda_h;
mod domain;
mod h;
pub mod kernels;
mod phases;

use blstrs::Scalar;

pub use cpu::CpuNtt;
pub use cuda::{CudaNtt, H_COLUMNS};
pub use cuda_h::{HStepBuffers, HStepInputs, HVectors};
pub use domain::{coset_generator, vanishing_inverse_on_coset, Domain, MAX_LOG_N};
pub use h::h_polynomial_cpu;

/// Which way the transform goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Coefficients to evaluations: X_k = sum_j x_j w^(jk).
    Forward,
    /// Evaluations to coefficients, scaled by 1/n.
    Inverse,
}

/// Input and output order: N natural, R bit-reversed (input first, then output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ordering {
    /// Natural in, natural out. Default value.
    #[default]
    NN,
    /// Natural in, bit-reversed out.
    NR,
    /// Bit-reversed in, natural out.
    RN,
    /// Bit-reversed in, bit-reversed out.
    RR,
}

/// A coset shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Coset {
    /// The plain domain. Default value.
    #[default]
    None,
    /// The coset g·H with g Fr's multiplicative generator (bellperson's convention).
    Generator,
    /// The coset s·H.
    Shift(Scalar),
}

impl Coset {
    /// The shift, if any.
    pub fn shift(&self) -> Option<Scalar> {
        match self {
            Coset::None => None,
            Coset::Generator => Some(coset_generator()),
            Coset::Shift(s) => Some(*s),
        }
    }
}

/// How to transform. Forward on a coset scales coefficient i by s^i, then transforms; inverse
/// on a coset transforms back, then scales by s^-i.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NttConfig {
    /// Orders. Default value: [`Ordering::NN`].
    pub ordering: Ordering,
    /// Coset. Default value: [`Coset::None`].
    pub coset: Coset,
}

impl NttConfig {
    /// Natural order on the coset g·H.
    pub fn coset() -> Self {
        Self {
            ordering: Ordering::NN,
            coset: Coset::Generator,
        }
    }
}

/// Errors of the NTT stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NttError {
    /// A length that is not a power of two (or is below 2).
    #[error("NTT length {len} is not a power of two of at least 2")]
    NotPowerOfTwo { len: usize },
    /// A domain larger than supported.
    #[error("NTT domain 2^{log_n} is not supported: sizes run from 2^1 to 2^{max}")]
    DomainSize { log_n: u32, max: u32 },
    /// Vectors of one batch (or of the H step) of different lengths.
    #[error("batch vectors differ in length: {first} and {other}")]
    BatchLengths { first: usize, other: usize },
    /// H-step buffers of the three-vector kind (no c on the device) given to the four-vector
    /// step.
    #[error("H step: the buffers hold no vector for c (three-vector buffers need c from pinned memory: h_step_three_in)")]
    NoDeviceC,
    /// A device buffer too small for the transform.
    #[error("device buffer of {len} elements is too small for {needed}")]
    BufferTooSmall { len: usize, needed: usize },
    /// A pass asked to work on its input (a scaling, a product) without being the first pass
    /// (lgp = 0), or on its output (a scaling, a subtraction) without being the last
    /// (lgp + deg = log_n).
    #[error("a pass of 2^{deg} at stride 2^{lgp} over 2^{log_n} cannot apply the {what}: only the first pass works on its input, only the last on its output")]
    ScalePlacement {
        what: &'static str,
        lgp: u32,
        deg: u32,
        log_n: u32,
    },
    /// A pass other than the first asked to run by columns.
    #[error("only the first pass runs by columns, not the pass at stride 2^{lgp}")]
    NotFirstPass { lgp: u32 },
    /// Not enough device memory.
    #[error("NTT needs {needed} bytes of device memory, {free} free")]
    OutOfDeviceMemory { needed: usize, free: usize },
    /// A driver call failed.
    #[error(transparent)]
    Cuda(zkpipe_cuda::Error),
    /// A stream operation failed.
    #[error(transparent)]
    Stream(#[from] zkpipe_stream::Error),
}

impl NttError {
    /// The failed driver call behind the error, if one is.
    pub fn driver_error(&self) -> Option<&zkpipe_cuda::Error> {
        match self {
            NttError::Cuda(e) => Some(e),
            NttError::Stream(e) => e.driver_error(),
            _ => None,
        }
    }
}

impl From<zkpipe_cuda::Error> for NttError {
    fn from(e: zkpipe_cuda::Error) -> Self {
        match e {
            zkpipe_cuda::Error::OutOfDeviceMemory { needed, free } => {
                NttError::OutOfDeviceMemory { needed, free }
            }
            other => NttError::Cuda(other),
        }
    }
}

/// The NTT stage, on host data. Implemented on the CPU and on the GPU, so that callers and
/// tests can swap them.
pub trait Ntt: Send + Sync {
    /// Transforms `data` in place.
    fn transform(
        &self,
        data: &mut [Scalar],
        dir: Direction,
        cfg: &NttConfig,
    ) -> Result<(), NttError>;

    /// Transforms several vectors of one length.
    fn transform_batch(
        &self,
        batch: &mut [&mut [Scalar]],
        dir: Direction,
        cfg: &NttConfig,
    ) -> Result<(), NttError> {
        check_batch(batch.iter().map(|v| v.len()))?;
        for v in batch.iter_mut() {
            self.transform(v, dir, cfg)?;
        }
        Ok(())
    }

    /// The H polynomial of Groth16 from the evaluations a, b, c on the domain (all of length
    /// n = 2^k): the n - 1 coefficients of (a·b - c) / Z.
    fn h_polynomial(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, NttError> {
        let mut h = self.h_quotient(a, b, c)?;
        h.truncate(h.len().saturating_sub(1));
        Ok(h)
    }

    /// As [`Ntt::h_polynomial`], with the n-th coefficient kept: the n coefficients
    /// interpolated from the coset. When a·b - c vanishes on the domain (the witness satisfies
    /// the circuit), the quotient has degree at most n - 2 and the last is zero.
    fn h_quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, NttError>;

    /// A name for logs ("cpu", "cuda:0").
    fn name(&self) -> String;
}

/// Checks that all lengths are equal, and returns the common one.
pub(crate) fn check_batch(mut lens: impl Iterator<Item = usize>) -> Result<usize, NttError> {
    let Some(first) = lens.next() else {
        return Ok(0);
    };
    for other in lens {
        if other != first {
            return Err(NttError::BatchLengths { first, other });
        }
    }
    Ok(first)
}

/// Reverses the low `bits` bits of `i`.
pub fn bit_reverse(i: usize, bits: u32) -> usize {
    if bits == 0 {
        return 0;
    }
    i.reverse_bits() >> (usize::BITS - bits)
}
