//! zkpipe-pinned: page-locked host memory, the source and destination of full-speed copies.
//!
//! - [`PinnedBuffer`]: `cuMemHostAlloc` (portable) memory holding `len` elements of `T`.
//! - [`PinnedPool`]: a bounded number of bytes of pinned memory, reused by size class, because
//!   allocating pinned memory costs seconds per few GiB.
//! - [`RegisteredVec`]: a caller's `Vec<T>` page-locked in place (`cuMemHostRegister`), so it
//!   uploads at pinned speed without a copy.
//! - [`PinnableVec`]: a read-only vector page-locked in place on first request, through a
//!   shared reference (a proving key's points).

mod buffer;
mod mapped;
mod pinnable;
mod pool;
mod register;
mod registration;

pub use buffer::PinnedBuffer;
pub use mapped::PinnableMap;
pub use pinnable::PinnableVec;
pub use pool::{PinnedPool, PoolStats, PooledBuffer};
pub use register::RegisteredVec;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A driver call failed.
    #[error(transparent)]
    Cuda(#[from] zkpipe_cuda::Error),
    /// A request larger than the pool can ever hold.
    #[error("pinned pool: {requested} bytes requested, the pool is bounded to {limit} bytes")]
    PoolTooSmall { requested: usize, limit: usize },
    /// No buffer became free in time.
    #[error("pinned pool: no {requested} bytes free within {waited_ms} ms ({in_use} of {limit} bytes in use)")]
    Timeout {
        requested: usize,
        waited_ms: u128,
        in_use: usize,
        limit: usize,
    },
}

impl Error {
    /// The failed driver call behind the error, if one is.
    pub fn driver_error(&self) -> Option<&zkpipe_cuda::Error> {
        match self {
            Error::Cuda(e) => Some(e),
            _ => None,
        }
    }
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Something in page-locked host memory that copies may read from or write to.
///
/// # Safety
/// The slice that `deref` returns is page-locked (pinned or registered) memory that stays
/// valid and at the same address for as long as the value lives, even when the value moves.
pub unsafe trait PinnedMemory<T>:
    std::ops::Deref<Target = [T]> + std::ops::DerefMut + Send
{
}
