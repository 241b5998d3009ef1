//! Kernel modules loaded from embedded images (a cubin for the device, else PTX), functions,
//! and the checked launch.

use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use cuda_driver_sys::{CUfunction, CUmodule};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::result::module;
use crate::stream::Stream;

/// Bytes of an embedded image: zstd-compressed, as `cargo xtask ptx` writes them, or plain.
#[derive(Debug, Clone, Copy)]
pub enum ImageBytes {
    /// zstd-compressed.
    Zstd(&'static [u8]),
    /// As the driver takes them.
    Plain(&'static [u8]),
}

impl ImageBytes {
    /// The bytes as the driver takes them.
    fn unpack(&self, module: &'static str, what: &str) -> Result<Vec<u8>> {
        match self {
            ImageBytes::Plain(b) => Ok(b.to_vec()),
            ImageBytes::Zstd(b) => zstd::stream::decode_all(*b).map_err(|e| Error::BadImage {
                module,
                form: what.to_string(),
                reason: e.to_string(),
            }),
        }
    }
}

/// A compiled cubin for one architecture.
#[derive(Debug, Clone, Copy)]
pub struct Cubin {
    /// The `sm_XY` it was built for, as (X, Y).
    pub arch: (u32, u32),
    /// The image.
    pub image: ImageBytes,
}

/// PTX for a virtual architecture: the driver JIT-compiles it for a device of that
/// architecture or newer.
#[derive(Debug, Clone, Copy)]
pub struct Ptx {
    /// The `compute_XY` it was built for, as (X, Y).
    pub arch: (u32, u32),
    /// The text.
    pub text: ImageBytes,
}

/// A stage's kernels as embedded in its crate: cubins for known architectures, plus PTX.
#[derive(Debug, Clone, Copy)]
pub struct KernelImage {
    /// The module's name (the stage), for messages.
    pub name: &'static str,
    /// PTX; JIT-compiled by the driver when no cubin fits the device.
    pub ptx: Option<Ptx>,
    /// Prebuilt cubins.
    pub cubins: &'static [Cubin],
}

impl KernelImage {
    /// The forms to try on a device of compute capability `cc`, best first: the cubin of the
    /// highest architecture of the device's major version not above it (cubins run on later
    /// minor versions of their major), then the PTX when its architecture is not above the
    /// device's. With [`Prefer::Ptx`], the PTX alone.
    pub fn candidates(&self, cc: (u32, u32), prefer: Prefer) -> Vec<LoadedFrom> {
        let mut forms = Vec::new();
        if prefer == Prefer::Cubin {
            let mut cubins: Vec<(u32, u32)> = self
                .cubins
                .iter()
                .map(|c| c.arch)
                .filter(|a| a.0 == cc.0 && a.1 <= cc.1)
                .collect();
            cubins.sort_by(|a, b| b.cmp(a));
            forms.extend(cubins.into_iter().map(LoadedFrom::Cubin));
        }
        if let Some(p) = self.ptx.filter(|p| p.arch <= cc) {
            forms.push(LoadedFrom::Ptx(p.arch));
        }
        forms
    }

    /// The forms it carries, for messages: "cubins sm_75, sm_90; PTX compute_75".
    pub fn forms(&self) -> String {
        let cubins: Vec<String> = self
            .cubins
            .iter()
            .map(|c| format!("sm_{}{}", c.arch.0, c.arch.1))
            .collect();
        let ptx = self.ptx.map_or("no PTX".to_string(), |p| {
            LoadedFrom::Ptx(p.arch).to_string()
        });
        match cubins.is_empty() {
            true => format!("no cubins; {ptx}"),
            false => format!("cubins {}; {ptx}", cubins.join(", ")),
        }
    }

    /// The driver-ready bytes of `form`, NUL-terminated for PTX.
    fn bytes(&self, form: LoadedFrom) -> Result<Vec<u8>> {
        let missing = || Error::BadImage {
            module: self.name,
            form: form.to_string(),
            reason: "not in the image".to_string(),
        };
        match form {
            LoadedFrom::Cubin(arch) => self
                .cubins
                .iter()
                .find(|c| c.arch == arch)
                .ok_or_else(missing)?
                .image
                .unpack(self.name, &form.to_string()),
            LoadedFrom::Ptx(_) => {
                let mut text = self
                    .ptx
                    .ok_or_else(missing)?
                    .text
                    .unpack(self.name, &form.to_string())?;
                if text.contains(&0) {
                    return Err(Error::BadImage {
                        module: self.name,
                        form: form.to_string(),
                        reason: "the PTX holds a NUL byte".to_string(),
                    });
                }
                text.push(0);
                Ok(text)
            }
        }
    }
}

/// Which form of the image was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedFrom {
    /// A cubin for `sm_XY`, as (X, Y).
    Cubin((u32, u32)),
    /// The PTX for `compute_XY`, compiled by the driver.
    Ptx((u32, u32)),
}

impl std::fmt::Display for LoadedFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadedFrom::Cubin((x, y)) => write!(f, "cubin sm_{x}{y}"),
            LoadedFrom::Ptx((x, y)) => write!(f, "PTX compute_{x}{y}"),
        }
    }
}

/// Whether to use a matching cubin, or always the PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    /// A cubin when one runs on the device (same major, minor not above the device's).
    Cubin,
    /// The PTX (to measure or test the JIT path).
    Ptx,
}

/// The form [`Module::load`] prefers in this process: set once by the program (the CLI and
/// the test helpers set [`Prefer::Ptx`] for `ZKPIPE_FORCE_PTX=1`), [`Prefer::Cubin`] unless
/// set.
static PREFER_PTX: AtomicBool = AtomicBool::new(false);

impl Prefer {
    /// Makes `self` the form every later [`Module::load`] of this process prefers.
    pub fn set_for_process(self) {
        PREFER_PTX.store(self == Prefer::Ptx, Ordering::Relaxed);
    }

    /// The form [`Module::load`] prefers now ([`Prefer::set_for_process`]).
    pub fn for_process() -> Self {
        match PREFER_PTX.load(Ordering::Relaxed) {
            true => Prefer::Ptx,
            false => Prefer::Cubin,
        }
    }
}

/// Driver errors that say a form does not fit this device or driver (the next form may).
const DOES_NOT_FIT: &[u32] = &[
    200, // CUDA_ERROR_INVALID_IMAGE
    209, // CUDA_ERROR_NO_BINARY_FOR_GPU
    218, // CUDA_ERROR_INVALID_PTX
    221, // CUDA_ERROR_JIT_COMPILER_NOT_FOUND
    222, // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    223, // CUDA_ERROR_JIT_COMPILATION_DISABLED
];

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
    /// Loads `image` into `ctx`: the best cubin for the device, else its PTX (the PTX first
    /// where the process prefers it: [`Prefer::set_for_process`]).
    pub fn load(ctx: &Arc<Context>, image: &KernelImage) -> Result<Arc<Self>> {
        Self::load_with(ctx, image, Prefer::for_process())
    }

    /// Loads `image`, trying its forms in [`KernelImage::candidates`]' order: a form the
    /// device or driver refuses is logged and the next tried; none left is
    /// [`Error::NoKernelImage`], naming the device's architecture and the driver.
    pub fn load_with(ctx: &Arc<Context>, image: &KernelImage, prefer: Prefer) -> Result<Arc<Self>> {
        ctx.bind()?;
        let cc = ctx.info().compute_capability;
        let mut refused = Vec::new();
        for form in image.candidates(cc, prefer) {
            let bytes = image.bytes(form)?;
            let start = Instant::now();
            // SAFETY: a cubin or NUL-terminated PTX built by `cargo xtask ptx` (or a test's
            // fixture); the context is current.
            match unsafe { module::load_data(bytes.as_ptr().cast::<c_void>()) } {
                Ok(raw) => {
                    let load_ms = start.elapsed().as_secs_f64() * 1e3;
                    tracing::debug!(module = image.name, %form, load_ms, "module loaded");
                    return Ok(Arc::new(Self {
                        ctx: Arc::clone(ctx),
                        raw,
                        name: image.name,
                        from: form,
                        load_ms,
                    }));
                }
                Err(e) if e.code().is_some_and(|c| DOES_NOT_FIT.contains(&c)) => {
                    tracing::warn!(module = image.name, %form, reason = %e, "kernel image refused; trying the next");
                    refused.push(format!("{form}: {e}"));
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::NoKernelImage(Box::new(
            crate::error::NoKernelImage {
                module: image.name,
                arch: cc,
                driver: crate::context::driver_version().ok(),
                carried: image.forms(),
                refused,
            },
        )))
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
        // SAFETY: as above.
        let max_threads =
            unsafe { module::get_attribute(raw, module::ATTR_MAX_THREADS_PER_BLOCK) }?;
        // SAFETY: as above.
        let registers = unsafe { module::get_attribute(raw, module::ATTR_NUM_REGS) }?;
        // SAFETY: as above.
        let local_bytes = unsafe { module::get_attribute(raw, module::ATTR_LOCAL_SIZE_BYTES) }?;
        Ok(Function {
            module: Arc::clone(self),
            raw,
            name: name.to_string(),
            params,
            max_threads: max_threads.max(1) as u32,
            registers: registers.max(0) as u32,
            local_bytes: local_bytes.max(0) as usize,
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
    /// The most threads a block may have on this device, as the driver says for this
    /// compiled form (its registers a thread decide).
    max_threads: u32,
    /// Registers a thread.
    registers: u32,
    /// Local memory a thread, in bytes.
    local_bytes: usize,
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

    /// The most threads a block of this kernel may have on this device.
    pub fn max_threads_per_block(&self) -> u32 {
        self.max_threads
    }

    /// Registers a thread of this kernel uses, as compiled for this device.
    pub fn registers(&self) -> u32 {
        self.registers
    }

    /// Local memory a thread of this kernel uses (its stack frame), as compiled for this
    /// device.
    pub fn local_bytes(&self) -> usize {
        self.local_bytes
    }

    /// Device memory the driver sets aside for this kernel's local memory when it runs: its
    /// bytes a thread for every thread the device can hold at once, an upper bound of what
    /// the driver reserves (and keeps for the context) at its first launch.
    pub fn local_reservation(&self) -> usize {
        let info = self.module.ctx.info();
        self.local_bytes * info.max_threads_per_sm as usize * info.sm_count as usize
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
        let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
        if gx == 0 || gy == 0 || gz == 0 || threads == 0 || threads > u64::from(self.max_threads) {
            return Err(Error::InvalidLaunch {
                function: self.name.clone(),
                reason: format!(
                    "grid {:?} block {:?} (each at least 1; at most {} threads a block for this kernel on this device, at {} registers a thread)",
                    cfg.grid, cfg.block, self.max_threads, self.registers
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

#[cfg(test)]
mod tests {
    use super::*;

    const NO_BYTES: ImageBytes = ImageBytes::Plain(b"");

    fn image(cubins: &'static [Cubin]) -> KernelImage {
        KernelImage {
            name: "t",
            ptx: Some(Ptx {
                arch: (7, 5),
                text: NO_BYTES,
            }),
            cubins,
        }
    }

    const ENGINE: &[Cubin] = &[
        Cubin {
            arch: (7, 5),
            image: NO_BYTES,
        },
        Cubin {
            arch: (8, 0),
            image: NO_BYTES,
        },
        Cubin {
            arch: (8, 6),
            image: NO_BYTES,
        },
        Cubin {
            arch: (8, 9),
            image: NO_BYTES,
        },
        Cubin {
            arch: (9, 0),
            image: NO_BYTES,
        },
        Cubin {
            arch: (10, 0),
            image: NO_BYTES,
        },
        Cubin {
            arch: (12, 0),
            image: NO_BYTES,
        },
    ];

    #[test]
    fn the_best_cubin_of_the_devices_major_comes_first_then_the_ptx() {
        let i = image(ENGINE);
        let cubin = |x, y| LoadedFrom::Cubin((x, y));
        let ptx = LoadedFrom::Ptx((7, 5));
        assert_eq!(i.candidates((9, 0), Prefer::Cubin), vec![cubin(9, 0), ptx]);
        assert_eq!(
            i.candidates((8, 6), Prefer::Cubin),
            vec![cubin(8, 6), cubin(8, 0), ptx]
        );
        // Orin (8.7) runs the 8.6 cubin; 8.9 and 9.0 are not for it.
        assert_eq!(
            i.candidates((8, 7), Prefer::Cubin),
            vec![cubin(8, 6), cubin(8, 0), ptx]
        );
        assert_eq!(
            i.candidates((12, 1), Prefer::Cubin),
            vec![cubin(12, 0), ptx]
        );
        // An architecture no cubin is built for: the PTX alone.
        assert_eq!(i.candidates((11, 0), Prefer::Cubin), vec![ptx]);
        // Older than the PTX: nothing.
        assert_eq!(i.candidates((7, 0), Prefer::Cubin), vec![]);
        // Forced PTX.
        assert_eq!(i.candidates((9, 0), Prefer::Ptx), vec![ptx]);
        assert_eq!(
            i.forms(),
            "cubins sm_75, sm_80, sm_86, sm_89, sm_90, sm_100, sm_120; PTX compute_75"
        );
    }

    #[test]
    fn a_corrupt_compressed_image_is_an_error_naming_the_module() {
        let i = KernelImage {
            name: "t",
            ptx: Some(Ptx {
                arch: (7, 5),
                text: ImageBytes::Zstd(b"not zstd"),
            }),
            cubins: &[],
        };
        let err = i.bytes(LoadedFrom::Ptx((7, 5))).unwrap_err();
        assert!(matches!(err, Error::BadImage { module: "t", .. }), "{err}");
    }
}
