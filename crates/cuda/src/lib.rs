//! zkpipe-cuda: the CUDA driver, opened at run time with libloading.
//!
//! Three layers, as in cudarc: [`sys`] resolves the driver's entry points once; [`result`]
//! turns each call into a `Result`; the RAII types ([`Context`], [`Stream`], [`Event`],
//! [`DeviceBuffer`], [`Module`], [`Function`]) manage lifetimes. [`StageClock`] is the one way
//! device time is measured: named spans between timed events. Nothing here needs CUDA at
//! build time; with no driver, every entry point returns [`Error::NoDriver`] listing what was
//! tried.
//!
//! ```no_run
//! use zkpipe_cuda::{Context, DeviceBuffer};
//! let ctx = Context::new(0)?;
//! let buf = DeviceBuffer::from_host(&ctx, &[1u32, 2, 3])?;
//! assert_eq!(buf.to_vec()?, vec![1, 2, 3]);
//! # Ok::<(), zkpipe_cuda::Error>(())
//! ```

pub mod census;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod result;
pub mod sys;

mod clock;
mod context;
mod error;
mod link;
mod memory;
mod module;
mod stream;
pub mod testing;

pub use clock::{Span, StageClock};
pub use context::{
    device_count, device_info, devices, driver_version, select_devices, Context, DeviceInfo,
    MemInfo,
};
pub use error::{
    Error, NoKernelImage, Result, CUDA_ERROR_NO_DEVICE, CUDA_ERROR_OUT_OF_MEMORY, STICKY_CODES,
};
pub use link::{covered_ms, CopyLog, CopyStart, Interval, LinkUse};
pub use memory::{byte_len, DeviceBuffer};
pub use module::{
    Cubin, Function, ImageBytes, KernelImage, KernelParam, LaunchConfig, LoadedFrom, Module,
    Prefer, Ptx,
};
pub use stream::{Event, Stream, Timing};
