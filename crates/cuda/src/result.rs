//! Thin wrappers that turn each driver call into a `Result`, grouped by driver area.
//!
//! These are the raw layer: they take and return driver handles and do not manage lifetimes.
//! The RAII types of this crate are built on them; other zkpipe crates use the RAII types.

use std::ffi::{c_char, c_int, c_void, CStr};

use cuda_driver_sys::{
    CUcontext, CUdevice, CUdevice_attribute, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream,
};

use crate::census;
use crate::error::{Error, Result};
use crate::sys::{api, CUmemoryPool};

/// Turns a driver status into a `Result`.
pub(crate) fn check(call: &'static str, code: u32) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    match api() {
        Ok(api) => Err(Error::from_code_with(api, call, code)),
        Err(e) => Err(e),
    }
}

/// The status of one driver call `name`, made by `call` (with the `fault-injection` feature,
/// counted and perhaps failed instead: [`crate::fault`]).
#[inline(always)]
pub(crate) fn status(name: &'static str, call: impl FnOnce() -> u32) -> u32 {
    #[cfg(feature = "fault-injection")]
    match crate::fault::intercept(name) {
        crate::fault::Verdict::Call => {}
        crate::fault::Verdict::Fail(code) => return code,
        crate::fault::Verdict::CallThenFail(code) => {
            call();
            return code;
        }
    }
    #[cfg(not(feature = "fault-injection"))]
    let _ = name;
    call()
}

/// Calls a required driver function and checks its status.
macro_rules! drv {
    ($name:ident ( $($arg:expr),* )) => {{
        let api = $crate::sys::api()?;
        let code = $crate::result::status(stringify!($name), || (api.$name)($($arg),*));
        $crate::result::check(stringify!($name), code)
    }};
}

/// Calls an optional driver function, failing with [`Error::Unsupported`] when it is absent.
macro_rules! drv_opt {
    ($name:ident ( $($arg:expr),* )) => {{
        let api = $crate::sys::api()?;
        let f = api.$name.ok_or(Error::Unsupported { symbol: stringify!($name) })?;
        let code = $crate::result::status(stringify!($name), || f($($arg),*));
        $crate::result::check(stringify!($name), code)
    }};
}

/// Driver-wide queries.
pub mod driver {
    use super::*;

    /// The driver's CUDA version, e.g. 13000 for 13.0.
    pub fn version() -> Result<i32> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        unsafe { drv!(cuDriverGetVersion(&mut v)) }?;
        Ok(v)
    }
}

/// Devices and their attributes.
pub mod device {
    use super::*;

    /// The number of devices the driver sees.
    pub fn count() -> Result<usize> {
        let mut n: c_int = 0;
        // SAFETY: writes one int.
        unsafe { drv!(cuDeviceGetCount(&mut n)) }?;
        Ok(n.max(0) as usize)
    }

    /// The handle of device `ordinal`.
    pub fn get(ordinal: usize) -> Result<CUdevice> {
        let mut dev: CUdevice = 0;
        // SAFETY: writes one handle; a bad ordinal is reported by the driver.
        unsafe { drv!(cuDeviceGet(&mut dev, ordinal as c_int)) }?;
        Ok(dev)
    }

    /// The device's marketing name.
    pub fn name(dev: CUdevice) -> Result<String> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most `buf.len()` bytes including the NUL.
        unsafe { drv!(cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, dev)) }?;
        // SAFETY: the driver NUL-terminated the buffer.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// One integer attribute.
    pub fn attribute(dev: CUdevice, attr: CUdevice_attribute) -> Result<i32> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        unsafe { drv!(cuDeviceGetAttribute(&mut v, attr, dev)) }?;
        Ok(v)
    }

    /// Total memory in bytes.
    pub fn total_mem(dev: CUdevice) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: writes one size_t.
        unsafe { drv!(cuDeviceTotalMem_v2(&mut v, dev)) }?;
        Ok(v)
    }

    /// The device's UUID, as `nvidia-smi -L` prints it (`GPU-` and 32 hex digits in groups).
    pub fn uuid(dev: CUdevice) -> Result<String> {
        let mut b = [0u8; 16];
        // SAFETY: the driver writes 16 bytes (a CUuuid).
        unsafe { drv_opt!(cuDeviceGetUuid(&mut b, dev)) }?;
        let hex =
            |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
        Ok(format!(
            "GPU-{}-{}-{}-{}-{}",
            hex(0..4),
            hex(4..6),
            hex(6..8),
            hex(8..10),
            hex(10..16)
        ))
    }

    /// The PCI bus id, e.g. `0000:1B:00.0`.
    pub fn pci_bus_id(dev: CUdevice) -> Result<String> {
        let mut buf = [0 as c_char; 64];
        // SAFETY: the driver writes at most `buf.len()` bytes including the NUL.
        unsafe {
            drv!(cuDeviceGetPCIBusId(
                buf.as_mut_ptr(),
                buf.len() as c_int,
                dev
            ))
        }?;
        // SAFETY: the driver NUL-terminated the buffer.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }
}

/// Primary contexts.
pub mod ctx {
    use super::*;

    /// Retains the device's primary context.
    pub fn primary_retain(dev: CUdevice) -> Result<CUcontext> {
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle.
        unsafe { drv!(cuDevicePrimaryCtxRetain(&mut ctx, dev)) }?;
        Ok(ctx)
    }

    /// Releases one retain of the device's primary context.
    ///
    /// # Safety
    /// Must pair with one successful [`primary_retain`].
    pub unsafe fn primary_release(dev: CUdevice) -> Result<()> {
        // SAFETY: the caller pairs this with a retain.
        unsafe { drv!(cuDevicePrimaryCtxRelease_v2(dev)) }
    }

    /// Makes `ctx` current on the calling thread.
    ///
    /// # Safety
    /// `ctx` must be a live context.
    pub unsafe fn set_current(ctx: CUcontext) -> Result<()> {
        // SAFETY: the caller keeps `ctx` alive.
        unsafe { drv!(cuCtxSetCurrent(ctx)) }
    }

    /// Waits for all work in the current context.
    pub fn synchronize() -> Result<()> {
        // SAFETY: no arguments; fails cleanly without a current context.
        unsafe { drv!(cuCtxSynchronize()) }
    }
}

/// Device and host memory.
pub mod mem {
    use super::*;

    /// Free and total bytes of the current context's device.
    pub fn info() -> Result<(usize, usize)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two size_t.
        unsafe { drv!(cuMemGetInfo_v2(&mut free, &mut total)) }?;
        Ok((free, total))
    }

    /// `cuMemAlloc`.
    pub fn alloc(bytes: usize) -> Result<CUdeviceptr> {
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: writes one device pointer.
        census::made(&census::DEVICE, unsafe {
            drv!(cuMemAlloc_v2(&mut ptr, bytes))
        })?;
        Ok(ptr)
    }

    /// `cuMemFree`.
    ///
    /// # Safety
    /// `ptr` came from [`alloc`] and is not used afterwards.
    pub unsafe fn free(ptr: CUdeviceptr) -> Result<()> {
        // SAFETY: as the caller promises.
        census::released(&census::DEVICE, unsafe { drv!(cuMemFree_v2(ptr)) })
    }

    /// `cuMemAllocAsync`: stream-ordered allocation from the device's default pool.
    ///
    /// # Safety
    /// `stream` must be a live stream of the current context.
    pub unsafe fn alloc_async(bytes: usize, stream: CUstream) -> Result<CUdeviceptr> {
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: writes one device pointer; the caller keeps the stream alive.
        let made = unsafe { drv_opt!(cuMemAllocAsync(&mut ptr, bytes, stream)) };
        census::made(&census::DEVICE, made)?;
        Ok(ptr)
    }

    /// `cuMemFreeAsync`.
    ///
    /// # Safety
    /// `ptr` came from [`alloc_async`]; no work enqueued after this uses it.
    pub unsafe fn free_async(ptr: CUdeviceptr, stream: CUstream) -> Result<()> {
        // SAFETY: as the caller promises.
        census::released(&census::DEVICE, unsafe {
            drv_opt!(cuMemFreeAsync(ptr, stream))
        })
    }

    /// Returns the default pool's unused memory above `keep` bytes to the device.
    pub fn trim_default_pool(dev: CUdevice, keep: usize) -> Result<()> {
        let mut pool: CUmemoryPool = std::ptr::null_mut();
        // SAFETY: writes one pool handle.
        unsafe { drv_opt!(cuDeviceGetDefaultMemPool(&mut pool, dev)) }?;
        // SAFETY: `pool` is the device's default pool, which lives as long as the device.
        unsafe { drv_opt!(cuMemPoolTrimTo(pool, keep)) }
    }

    /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`.
    const POOL_ATTR_RELEASE_THRESHOLD: c_int = 4;

    /// Sets how many unused bytes the default pool keeps at a synchronisation instead of
    /// returning them to the device (the driver's default is 0).
    pub fn set_default_pool_release_threshold(dev: CUdevice, bytes: u64) -> Result<()> {
        let mut pool: CUmemoryPool = std::ptr::null_mut();
        // SAFETY: writes one pool handle.
        unsafe { drv_opt!(cuDeviceGetDefaultMemPool(&mut pool, dev)) }?;
        let mut value = bytes;
        // SAFETY: the attribute takes a pointer to a cuuint64_t, read during the call.
        unsafe {
            drv_opt!(cuMemPoolSetAttribute(
                pool,
                POOL_ATTR_RELEASE_THRESHOLD,
                (&mut value as *mut u64).cast()
            ))
        }
    }

    /// Host-to-device copy that has completed when it returns.
    ///
    /// `cuMemcpyHtoD` from pageable memory may return once the data is staged, before the
    /// DMA lands, and non-blocking streams do not wait for it; so the copy goes on the legacy
    /// stream, which is then synchronised.
    ///
    /// # Safety
    /// `dst` has `bytes` bytes of device memory; `src` has `bytes` readable bytes.
    pub unsafe fn htod(dst: CUdeviceptr, src: *const c_void, bytes: usize) -> Result<()> {
        let legacy: CUstream = std::ptr::null_mut();
        // SAFETY: as the caller promises; the legacy stream always exists in a context.
        unsafe { drv!(cuMemcpyHtoDAsync_v2(dst, src, bytes, legacy)) }?;
        // SAFETY: the legacy stream handle (null) is valid in every context.
        unsafe { drv!(cuStreamSynchronize(legacy)) }
    }

    /// Synchronous device-to-host copy.
    ///
    /// # Safety
    /// `src` has `bytes` bytes of device memory; `dst` has `bytes` writable bytes.
    pub unsafe fn dtoh(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuMemcpyDtoH_v2(dst, src, bytes)) }
    }

    /// Asynchronous host-to-device copy on `stream`.
    ///
    /// # Safety
    /// As [`htod`], and `src` stays valid and unchanged until the copy completes.
    pub unsafe fn htod_async(
        dst: CUdeviceptr,
        src: *const c_void,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuMemcpyHtoDAsync_v2(dst, src, bytes, stream)) }
    }

    /// Asynchronous host-to-device copy of `height` rows of `width` bytes on `stream`, row r
    /// from `src + r·pitch` to `dst + r·pitch`.
    ///
    /// # Safety
    /// `src` and `dst` each have (height - 1)·pitch + width bytes, `width <= pitch`, and `src`
    /// stays valid and unchanged until the copy completes.
    pub unsafe fn htod_2d_async(
        dst: CUdeviceptr,
        src: *const c_void,
        pitch: usize,
        width: usize,
        height: usize,
        stream: CUstream,
    ) -> Result<()> {
        let copy = cuda_driver_sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: cuda_driver_sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            srcHost: src,
            srcDevice: 0,
            srcArray: std::ptr::null_mut(),
            srcPitch: pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: cuda_driver_sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: dst,
            dstArray: std::ptr::null_mut(),
            dstPitch: pitch,
            WidthInBytes: width,
            Height: height,
        };
        // SAFETY: as the caller promises; the descriptor is read during the call only.
        unsafe { drv!(cuMemcpy2DAsync_v2(&copy, stream)) }
    }

    /// Asynchronous device-to-host copy on `stream`.
    ///
    /// # Safety
    /// As [`dtoh`], and `dst` stays valid and untouched until the copy completes.
    pub unsafe fn dtoh_async(
        dst: *mut c_void,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuMemcpyDtoHAsync_v2(dst, src, bytes, stream)) }
    }

    /// Asynchronous device-to-device copy on `stream`.
    ///
    /// # Safety
    /// Both ranges are `bytes` bytes of live device memory.
    pub unsafe fn dtod_async(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuMemcpyDtoDAsync_v2(dst, src, bytes, stream)) }
    }

    /// Asynchronous byte fill on `stream`.
    ///
    /// # Safety
    /// `dst` has `bytes` bytes of live device memory.
    pub unsafe fn memset_async(
        dst: CUdeviceptr,
        value: u8,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuMemsetD8Async(dst, value, bytes, stream)) }
    }

    /// `CU_MEMHOSTALLOC_PORTABLE`: pinned memory usable from every context.
    pub const HOST_ALLOC_PORTABLE: u32 = 0x01;
    /// `CU_MEMHOSTREGISTER_PORTABLE`.
    pub const HOST_REGISTER_PORTABLE: u32 = 0x01;
    /// `CU_MEMHOSTREGISTER_READ_ONLY`: the device only reads the memory (needed for pages
    /// mapped read-only, such as a file's).
    pub const HOST_REGISTER_READ_ONLY: u32 = 0x08;

    /// `cuMemHostAlloc`: page-locked host memory.
    pub fn host_alloc(bytes: usize, flags: u32) -> Result<*mut c_void> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one host pointer.
        census::made(&census::HOST, unsafe {
            drv!(cuMemHostAlloc(&mut ptr, bytes, flags))
        })?;
        Ok(ptr)
    }

    /// `cuMemFreeHost`.
    ///
    /// # Safety
    /// `ptr` came from [`host_alloc`], no copy still reads or writes it, and it is not used
    /// afterwards.
    pub unsafe fn host_free(ptr: *mut c_void) -> Result<()> {
        // SAFETY: as the caller promises.
        census::released(&census::HOST, unsafe { drv!(cuMemFreeHost(ptr)) })
    }

    /// `cuMemHostRegister`: page-locks caller-owned memory.
    ///
    /// # Safety
    /// `ptr..ptr + bytes` is mapped host memory that outlives the registration.
    pub unsafe fn host_register(ptr: *mut c_void, bytes: usize, flags: u32) -> Result<()> {
        // SAFETY: as the caller promises.
        let made = unsafe { drv!(cuMemHostRegister_v2(ptr, bytes, flags)) };
        census::made(&census::REGISTERED, made)
    }

    /// `cuMemHostUnregister`.
    ///
    /// # Safety
    /// `ptr` was registered with [`host_register`] and no copy still uses it.
    pub unsafe fn host_unregister(ptr: *mut c_void) -> Result<()> {
        // SAFETY: as the caller promises.
        census::released(&census::REGISTERED, unsafe {
            drv!(cuMemHostUnregister(ptr))
        })
    }
}

/// Modules and functions.
pub mod module {
    use super::*;

    /// Loads a module from a NUL-terminated PTX text or a cubin image.
    ///
    /// # Safety
    /// `image` points to a valid image (PTX ends in a NUL byte); a context is current.
    pub unsafe fn load_data(image: *const c_void) -> Result<CUmodule> {
        let mut m: CUmodule = std::ptr::null_mut();
        // SAFETY: as the caller promises.
        census::made(&census::MODULES, unsafe {
            drv!(cuModuleLoadData(&mut m, image))
        })?;
        Ok(m)
    }

    /// Unloads a module.
    ///
    /// # Safety
    /// No function of the module is used afterwards.
    pub unsafe fn unload(m: CUmodule) -> Result<()> {
        // SAFETY: as the caller promises.
        census::released(&census::MODULES, unsafe { drv!(cuModuleUnload(m)) })
    }

    /// Looks up a function; `Ok(None)` when the module has none of that name.
    ///
    /// # Safety
    /// `m` is a live module.
    pub unsafe fn get_function(m: CUmodule, name: &CStr) -> Result<Option<CUfunction>> {
        let mut f: CUfunction = std::ptr::null_mut();
        // SAFETY: as the caller promises.
        match unsafe { drv!(cuModuleGetFunction(&mut f, m, name.as_ptr())) } {
            Ok(()) => Ok(Some(f)),
            Err(e) if e.code() == Some(crate::error::CUDA_ERROR_NOT_FOUND) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sizes of the function's parameters, when the driver can tell (CUDA 12.4 or later).
    ///
    /// # Safety
    /// `f` is a live function.
    pub unsafe fn param_sizes(f: CUfunction) -> Result<Option<Vec<usize>>> {
        let api = crate::sys::api()?;
        let Some(get) = api.cuFuncGetParamInfo else {
            return Ok(None);
        };
        let mut sizes = Vec::new();
        loop {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: `f` is live; an index past the last parameter returns an error code.
            let code = unsafe { get(f, sizes.len(), &mut offset, &mut size) };
            if code != 0 {
                return Ok(Some(sizes));
            }
            sizes.push(size);
        }
    }

    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: the most threads a block of this function
    /// may have on this device (its registers decide).
    pub const ATTR_MAX_THREADS_PER_BLOCK: c_int = 0;
    /// `CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`: local memory a thread of this function uses.
    pub const ATTR_LOCAL_SIZE_BYTES: c_int = 3;
    /// `CU_FUNC_ATTRIBUTE_NUM_REGS`.
    pub const ATTR_NUM_REGS: c_int = 4;

    /// Reads one function attribute.
    ///
    /// # Safety
    /// `f` is a live function.
    pub unsafe fn get_attribute(f: CUfunction, attr: c_int) -> Result<c_int> {
        let mut v: c_int = 0;
        // SAFETY: a valid out-pointer; `f` is live as the caller promises.
        unsafe { drv!(cuFuncGetAttribute(&mut v, attr, f)) }?;
        Ok(v)
    }

    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub const ATTR_MAX_DYNAMIC_SHARED: c_int = 8;

    /// Sets one function attribute.
    ///
    /// # Safety
    /// `f` is a live function.
    pub unsafe fn set_attribute(f: CUfunction, attr: c_int, value: c_int) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuFuncSetAttribute(f, attr, value)) }
    }

    /// Launches `f`.
    ///
    /// # Safety
    /// `params` holds one pointer per kernel parameter, each to a value of the parameter's
    /// type, and the kernel's memory accesses stay inside the buffers it is given.
    pub unsafe fn launch(
        f: CUfunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
        stream: CUstream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe {
            drv!(cuLaunchKernel(
                f,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                shared_bytes,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut()
            ))
        }
    }
}

/// Streams.
pub mod stream {
    use super::*;

    /// `CU_STREAM_NON_BLOCKING`: no implicit synchronisation with the legacy default stream.
    pub const NON_BLOCKING: u32 = 0x1;

    /// Creates a stream in the current context.
    pub fn create(flags: u32) -> Result<CUstream> {
        let mut s: CUstream = std::ptr::null_mut();
        // SAFETY: writes one handle.
        census::made(&census::STREAMS, unsafe {
            drv!(cuStreamCreate(&mut s, flags))
        })?;
        Ok(s)
    }

    /// Destroys a stream (pending work still completes).
    ///
    /// # Safety
    /// `s` is live and not used afterwards.
    pub unsafe fn destroy(s: CUstream) -> Result<()> {
        // SAFETY: as the caller promises.
        census::released(&census::STREAMS, unsafe { drv!(cuStreamDestroy_v2(s)) })
    }

    /// Waits for all work on `s`.
    ///
    /// # Safety
    /// `s` is live.
    pub unsafe fn synchronize(s: CUstream) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuStreamSynchronize(s)) }
    }

    /// Makes future work on `s` wait for `e`.
    ///
    /// # Safety
    /// Both are live.
    pub unsafe fn wait_event(s: CUstream, e: CUevent) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuStreamWaitEvent(s, e, 0)) }
    }

    /// True when all work on `s` has completed.
    ///
    /// # Safety
    /// `s` is live.
    pub unsafe fn is_idle(s: CUstream) -> Result<bool> {
        let api = crate::sys::api()?;
        // SAFETY: as the caller promises.
        let code = status("cuStreamQuery", || unsafe { (api.cuStreamQuery)(s) });
        not_ready_or(code, "cuStreamQuery")
    }
}

/// Events.
pub mod event {
    use super::*;

    /// `CU_EVENT_DISABLE_TIMING`.
    pub const DISABLE_TIMING: u32 = 0x2;

    /// Creates an event.
    pub fn create(flags: u32) -> Result<CUevent> {
        let mut e: CUevent = std::ptr::null_mut();
        // SAFETY: writes one handle.
        census::made(&census::EVENTS, unsafe {
            drv!(cuEventCreate(&mut e, flags))
        })?;
        Ok(e)
    }

    /// Destroys an event.
    ///
    /// # Safety
    /// `e` is live and not used afterwards.
    pub unsafe fn destroy(e: CUevent) -> Result<()> {
        // SAFETY: as the caller promises.
        census::released(&census::EVENTS, unsafe { drv!(cuEventDestroy_v2(e)) })
    }

    /// Records `e` on `s`.
    ///
    /// # Safety
    /// Both are live and of one context.
    pub unsafe fn record(e: CUevent, s: CUstream) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuEventRecord(e, s)) }
    }

    /// Waits on the host for `e`.
    ///
    /// # Safety
    /// `e` is live.
    pub unsafe fn synchronize(e: CUevent) -> Result<()> {
        // SAFETY: as the caller promises.
        unsafe { drv!(cuEventSynchronize(e)) }
    }

    /// True when `e` has completed (or was never recorded).
    ///
    /// # Safety
    /// `e` is live.
    pub unsafe fn is_complete(e: CUevent) -> Result<bool> {
        let api = crate::sys::api()?;
        // SAFETY: as the caller promises.
        let code = status("cuEventQuery", || unsafe { (api.cuEventQuery)(e) });
        not_ready_or(code, "cuEventQuery")
    }

    /// Milliseconds between two completed events.
    ///
    /// # Safety
    /// Both are live timing events.
    pub unsafe fn elapsed_ms(start: CUevent, end: CUevent) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: as the caller promises.
        unsafe { drv!(cuEventElapsedTime(&mut ms, start, end)) }?;
        Ok(ms)
    }
}

/// `CUDA_ERROR_NOT_READY` means "not yet", not failure.
fn not_ready_or(code: u32, call: &'static str) -> Result<bool> {
    const NOT_READY: u32 = 600;
    match code {
        0 => Ok(true),
        NOT_READY => Ok(false),
        c => check(call, c).map(|_| false),
    }
}
