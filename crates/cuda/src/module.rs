//! Kernel modules loaded from embedded images (a cubin for the device, else PTX), functions,
//! and the checked launch.

use std::ffi::{c_void, CString};
use std::sync::Arc;
use std::time::Instant;

use cuda_driver_sys::{CUfunction, CUmodule};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::result::module;
use crate::stream::Stream;

/// A compiled cubin for one architecture.
#[derive(Debug, Clone, Copy)]
pub struct Cubin {
    /// The `sm_XY` it was built for, as (X, Y).
    pub arch: (u32, u32),
    /// The image bytes.
    pub image: &'static [u8],
}

/// A stage's kernels as embedded in its crate: PTX, plus cubins for known architectures.
#[derive(Debug, Clone, Copy)]
pub struct KernelImage {
    /// The module's name (the stage), for messages.
    pub name: &'static str,
    /// PTX text; JIT-compiled by the driver when no cubin fits the device.
    pub ptx: &'static str,
    /// Prebuilt cubins.
    pub cubins: &'static [Cubin],
}

/// Which form of the image was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedFrom {
    /// A cubin for (X, Y).
    Cubin((u32, u32)),
    /// The PTX, compiled by the driver.
    Ptx,
}

/// Whether to use a matching cubin, or always the PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    /// A cubin when one runs on the device (same major, minor not above the device's).
    Cubin,
    /// The PTX (to measure or test the JIT path).
    Ptx,
}

/// A loaded module.
#[derive(Debug)]
pub struct Module {
    ctx: Arc<Context>,
    raw: CUmodule,
    name: &'static str,
    from: LoadedFrom,
    load_ms: f64,
}

// SAFETY: module handles may be used from any thread.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

impl Module {
    /// Loads `image` into `ctx`: a cubin that runs on the device when there is one, else PTX.
    pub fn load(ctx: &Arc<Context>, image: &KernelImage) -> Result<Arc<Self>> {
        Self::load_with(ctx, image, Prefer::Cubin)
    }

    /// Loads `image`, choosing the form as `prefer` says.
    pub fn load_with(ctx: &Arc<Context>, image: &KernelImage, prefer: Prefer) -> Result<Arc<Self>> {
        ctx.bind()?;
        let (cc_major, cc_minor) = ctx.info().compute_capability;
        let cubin = image
            .cubins
            .iter()
            .filter(|c| c.arch.0 == cc_major && c.arch.1 <= cc_minor)
            .max_by_key(|c| c.arch.1)
            .filter(|_| prefer == Prefer::Cubin);
        let start = Instant::now();
        let (raw, from) = match cubin {
            // SAFETY: a cubin image built by `cargo xtask ptx`; the context is current.
            Some(c) => (
                unsafe { module::load_data(c.image.as_ptr().cast()) }?,
                LoadedFrom::Cubin(c.arch),
            ),
            None => {
                let text = CString::new(image.ptx.as_bytes().to_vec()).map_err(|_| {
                    Error::InvalidLaunch {
                        function: image.name.to_string(),
                        reason: "the PTX holds a NUL byte".to_string(),
                    }
                })?;
                // SAFETY: NUL-terminated PTX text; the context is current.
                (
                    unsafe { module::load_data(text.as_ptr().cast::<c_void>()) }?,
                    LoadedFrom::Ptx,
                )
            }
        };
        let load_ms = start.elapsed().as_secs_f64() * 1e3;
        tracing::debug!(module = image.name, ?from, load_ms, "module loaded");
        Ok(Arc::new(Self {
            ctx: Arc::clone(ctx),
            raw,
            name: image.name,
            from,
            load_ms,
        }))
    }

    /// Which form was loaded.
    pub fn loaded_from(&self) -> LoadedFrom {
        self.from
    }

    /// Milliseconds the driver took to load the module.
    pub fn load_ms(&self) -> f64 {
        self.load_ms
    }

    /// Looks up a function by name.
    pub fn function(self: &Arc<Self>, name: &str) -> Result<Function> {
        let not_found = || Error::FunctionNotFound {
            module: self.name.to_string(),
            function: name.to_string(),
        };
        let cname = CString::new(name).map_err(|_| not_found())?;
        self.ctx.bind()?;
        // SAFETY: the module is alive for as long as `self`.
        let raw = unsafe { module::get_function(self.raw, &cname) }?.ok_or_else(not_found)?;
        // SAFETY: `raw` was just looked up in a live module.
        let params = unsafe { module::param_sizes(raw) }?;
        Ok(Function {
            module: Arc::clone(self),
            raw,
            name: name.to_string(),
            params,
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // The release is attempted even when the bind fails (the handle is never used
        // again, so not releasing it would leak it).
        let bound = self.ctx.bind();
        let released = {
            // SAFETY: functions hold an `Arc<Module>`, so none is alive now.
            unsafe { module::unload(self.raw) }
        };
        let r = bound.and(released);
        if let Err(e) = r {
            self.ctx.record_err(e);
        }
    }
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// One thread per element, `block` threads per block, enough blocks to cover `n`.
    pub fn for_elements(n: usize, block: u32) -> Self {
        let blocks = n.div_ceil(block as usize).max(1);
        Self {
            grid: (blocks as u32, 1, 1),
            block: (block, 1, 1),
            shared_bytes: 0,
        }
    }
}

/// A value that can be passed to a kernel parameter.
///
/// # Safety
/// `param_ptr` points to `param_size()` bytes that hold the value exactly as the kernel's
/// parameter expects it, and stay valid while `self` is borrowed.
pub unsafe trait KernelParam {
    /// Pointer to the bytes of the value.
    fn param_ptr(&self) -> *mut c_void;
    /// Size of the value in bytes.
    fn param_size(&self) -> usize;
}

// SAFETY: a Pod value is its own bytes.
unsafe impl<T: bytemuck::Pod> KernelParam for T {
    fn param_ptr(&self) -> *mut c_void {
        (self as *const T).cast_mut().cast()
    }
    fn param_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
}

// SAFETY: a buffer is passed as its device address, a 64-bit pointer, stored in the struct.
unsafe impl<T: bytemuck::Pod> KernelParam for DeviceBuffer<T> {
    fn param_ptr(&self) -> *mut c_void {
        self.ptr_field().cast_mut().cast()
    }
    fn param_size(&self) -> usize {
        std::mem::size_of::<u64>()
    }
}

/// A kernel of a loaded module.
#[derive(Debug, Clone)]
pub struct Function {
    module: Arc<Module>,
    raw: CUfunction,
    name: String,
    params: Option<Vec<usize>>,
}

// SAFETY: function handles may be used from any thread.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Parameter sizes in bytes, when the driver can tell (CUDA 12.4+).
    pub fn param_sizes(&self) -> Option<&[usize]> {
        self.params.as_deref()
    }

    /// Allows up to `bytes` of dynamic shared memory per block (above the 48 KiB default).
    pub fn set_max_dynamic_shared(&self, bytes: u32) -> Result<()> {
        self.module.ctx.bind()?;
        // SAFETY: the function's module is alive.
        unsafe { module::set_attribute(self.raw, module::ATTR_MAX_DYNAMIC_SHARED, bytes as i32) }
    }

    /// Checks `args` against the kernel's parameters (count and sizes).
    pub fn check_args(&self, args: &[&dyn KernelParam]) -> Result<()> {
        let Some(params) = &self.params else {
            return Ok(());
        };
        if params.len() != args.len() {
            return Err(Error::ArgumentCount {
                function: self.name.clone(),
                expected: params.len(),
                given: args.len(),
            });
        }
        for (index, (&expected, a)) in params.iter().zip(args).enumerate() {
            if a.param_size() != expected {
                return Err(Error::ArgumentSize {
                    function: self.name.clone(),
                    index,
                    expected,
                    given: a.param_size(),
                });
            }
        }
        Ok(())
    }

    /// Launches the kernel on `stream` after checking the argument count and sizes.
    ///
    /// # Safety
    /// The arguments must be what the kernel expects beyond their sizes (a buffer where it
    /// reads a buffer, of enough elements for the launch), and buffers must stay alive until
    /// the kernel completes. Each stage's `kernels.rs` wraps this with those checks.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: &[&dyn KernelParam],
    ) -> Result<()> {
        self.check_args(args)?;
        let (gx, gy, gz) = cfg.grid;
        let (bx, by, bz) = cfg.block;
        if gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx * by * bz > 1024 {
            return Err(Error::InvalidLaunch {
                function: self.name.clone(),
                reason: format!(
                    "grid {:?} block {:?} (each at least 1, at most 1024 threads per block)",
                    cfg.grid, cfg.block
                ),
            });
        }
        let mut ptrs: Vec<*mut c_void> = args.iter().map(|a| a.param_ptr()).collect();
        self.module.ctx.bind()?;
        // SAFETY: one pointer per parameter, of the checked sizes; the caller guarantees the
        // rest (see `# Safety`).
        unsafe {
            module::launch(
                self.raw,
                cfg.grid,
                cfg.block,
                cfg.shared_bytes,
                stream.raw(),
                &mut ptrs,
            )
        }
    }
}
