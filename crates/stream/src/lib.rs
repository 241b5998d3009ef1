//! zkpipe-stream: ordering work on a device, and sharing a device between workers.
//!
//! - [`Stream`] and [`Event`] (from zkpipe-cuda, re-exported); device time is measured with
//!   zkpipe-cuda's `StageClock`.
//! - [`upload`] and [`download`]: asynchronous copies between pinned host memory and the
//!   device. The copy takes ownership of the host buffer and hands it back through
//!   [`InFlight::wait`], so the buffer can be neither freed nor touched while the copy runs.
//! - [`copy_scope`]: copies from and into borrowed [`Pinned`] ranges (chunks of one big
//!   buffer), all completed before the scope returns.
//! - [`GpuLock`]: the per-device lock that serialises kernel phases while uploads proceed
//!   outside it.
//! - [`VramBudget`]: admission by bytes, so workers sharing a device never ask it for more
//!   memory than it has.

mod budget;
pub mod kernels;
mod lock;
mod scope;
mod transfer;

pub use budget::{BudgetError, BudgetStats, VramBudget, VramGrant};
pub use lock::{GpuGuard, GpuLock};
pub use scope::{copy_scope, CopyScope, Pinned, PinnedMut};
pub use transfer::{download, upload, upload_columns, InFlight};
pub use zkpipe_cuda::{Event, Stream};

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A driver call failed.
    #[error(transparent)]
    Cuda(#[from] zkpipe_cuda::Error),
    /// The VRAM budget refused a request.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// A copy's host buffer was already handed back.
    #[error("the copy's host buffer was already taken")]
    AlreadyTaken,
    /// A copy in column blocks whose blocks do not divide its rows.
    #[error("{blocks} column blocks do not divide rows of {pitch} elements")]
    ColumnBlocks { pitch: usize, blocks: usize },
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
