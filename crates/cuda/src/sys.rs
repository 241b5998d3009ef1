//! The driver's entry points, resolved once from `libcuda` into one table of function pointers.
//!
//! Every driver call returns a raw `u32` status (not cuda-driver-sys's `CUresult` enum): a newer
//! driver may return codes that enum does not list, and turning those into the enum would be
//! undefined behaviour. [`crate::result`] turns the status into a `Result`.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use cuda_driver_sys::{
    CUcontext, CUdevice, CUdevice_attribute, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream,
    CUDA_MEMCPY2D,
};

use crate::error::Error;

/// A stream-ordered memory pool (`CUmemoryPool`, absent from cuda-driver-sys 0.3).
pub type CUmemoryPool = *mut c_void;

/// Library names tried, in order, when the driver is opened.
pub const LIBRARY_NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

macro_rules! driver_api {
    (
        required { $($name:ident : fn($($arg:ty),*);)* }
        optional { $($oname:ident : fn($($oarg:ty),*);)* }
    ) => {
        /// Function pointers into the driver. Optional entries are `None` on drivers too old
        /// to have them.
        #[allow(non_snake_case)]
        pub struct Api {
            $(pub $name: unsafe extern "C" fn($($arg),*) -> u32,)*
            $(pub $oname: Option<unsafe extern "C" fn($($oarg),*) -> u32>,)*
            /// Keeps the library mapped for as long as the pointers are used (for ever).
            _lib: libloading::Library,
        }

        impl std::fmt::Debug for Api {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("Api").finish_non_exhaustive()
            }
        }

        impl Api {
            #[allow(non_snake_case)]
            fn resolve(lib: libloading::Library, path: &str) -> Result<Self, Error> {
                $(
                    // SAFETY: the symbol is the driver's documented entry point, and the
                    // pointer type matches its C prototype in cuda.h.
                    let $name = unsafe {
                        lib.get::<unsafe extern "C" fn($($arg),*) -> u32>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                    }
                    .map(|s| *s)
                    .map_err(|e| Error::MissingSymbol {
                        library: path.to_string(),
                        symbol: stringify!($name),
                        reason: e.to_string(),
                    })?;
                )*
                $(
                    // SAFETY: as above; a missing optional symbol gives `None`.
                    let $oname = unsafe {
                        lib.get::<unsafe extern "C" fn($($oarg),*) -> u32>(
                            concat!(stringify!($oname), "\0").as_bytes(),
                        )
                    }
                    .ok()
                    .map(|s| *s);
                )*
                Ok(Self { $($name,)* $($oname,)* _lib: lib })
            }
        }
    };
}

driver_api! {
    required {
        cuInit: fn(c_uint);
        cuDriverGetVersion: fn(*mut c_int);
        cuGetErrorName: fn(u32, *mut *const c_char);
        cuGetErrorString: fn(u32, *mut *const c_char);
        cuDeviceGetCount: fn(*mut c_int);
        cuDeviceGet: fn(*mut CUdevice, c_int);
        cuDeviceGetName: fn(*mut c_char, c_int, CUdevice);
        cuDeviceGetAttribute: fn(*mut c_int, CUdevice_attribute, CUdevice);
        cuDeviceTotalMem_v2: fn(*mut usize, CUdevice);
        cuDeviceGetPCIBusId: fn(*mut c_char, c_int, CUdevice);
        cuDevicePrimaryCtxRetain: fn(*mut CUcontext, CUdevice);
        cuDevicePrimaryCtxRelease_v2: fn(CUdevice);
        cuCtxSetCurrent: fn(CUcontext);
        cuCtxSynchronize: fn();
        cuMemGetInfo_v2: fn(*mut usize, *mut usize);
        cuMemAlloc_v2: fn(*mut CUdeviceptr, usize);
        cuMemFree_v2: fn(CUdeviceptr);
        cuMemcpyHtoD_v2: fn(CUdeviceptr, *const c_void, usize);
        cuMemcpyDtoH_v2: fn(*mut c_void, CUdeviceptr, usize);
        cuMemcpyHtoDAsync_v2: fn(CUdeviceptr, *const c_void, usize, CUstream);
        cuMemcpy2DAsync_v2: fn(*const CUDA_MEMCPY2D, CUstream);
        cuMemcpyDtoHAsync_v2: fn(*mut c_void, CUdeviceptr, usize, CUstream);
        cuMemcpyDtoDAsync_v2: fn(CUdeviceptr, CUdeviceptr, usize, CUstream);
        cuMemsetD8Async: fn(CUdeviceptr, u8, usize, CUstream);
        cuMemHostAlloc: fn(*mut *mut c_void, usize, c_uint);
        cuMemFreeHost: fn(*mut c_void);
        cuMemHostRegister_v2: fn(*mut c_void, usize, c_uint);
        cuMemHostUnregister: fn(*mut c_void);
        cuModuleLoadData: fn(*mut CUmodule, *const c_void);
        cuModuleUnload: fn(CUmodule);
        cuModuleGetFunction: fn(*mut CUfunction, CUmodule, *const c_char);
        cuFuncSetAttribute: fn(CUfunction, c_int, c_int);
        cuFuncGetAttribute: fn(*mut c_int, c_int, CUfunction);
        cuLaunchKernel: fn(
            CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream,
            *mut *mut c_void, *mut *mut c_void
        );
        cuStreamCreate: fn(*mut CUstream, c_uint);
        cuStreamDestroy_v2: fn(CUstream);
        cuStreamSynchronize: fn(CUstream);
        cuStreamWaitEvent: fn(CUstream, CUevent, c_uint);
        cuStreamQuery: fn(CUstream);
        cuEventCreate: fn(*mut CUevent, c_uint);
        cuEventDestroy_v2: fn(CUevent);
        cuEventRecord: fn(CUevent, CUstream);
        cuEventSynchronize: fn(CUevent);
        cuEventQuery: fn(CUevent);
        cuEventElapsedTime: fn(*mut f32, CUevent, CUevent);
    }
    optional {
        cuMemAllocAsync: fn(*mut CUdeviceptr, usize, CUstream);
        cuMemFreeAsync: fn(CUdeviceptr, CUstream);
        cuDeviceGetDefaultMemPool: fn(*mut CUmemoryPool, CUdevice);
        cuMemPoolTrimTo: fn(CUmemoryPool, usize);
        cuMemPoolSetAttribute: fn(CUmemoryPool, c_int, *mut c_void);
        cuFuncGetParamInfo: fn(CUfunction, usize, *mut usize, *mut usize);
        cuDeviceGetUuid: fn(*mut [u8; 16], CUdevice);
    }
}

static API: OnceLock<Result<Api, Error>> = OnceLock::new();

/// The driver table, opened and initialised (`cuInit(0)`) on first use.
pub fn api() -> Result<&'static Api, Error> {
    API.get_or_init(|| open(LIBRARY_NAMES))
        .as_ref()
        .map_err(Clone::clone)
}

/// Opens the first library of `names` that loads and resolves, then calls `cuInit`.
pub fn open(names: &[&str]) -> Result<Api, Error> {
    let mut tried = Vec::new();
    for name in names {
        // SAFETY: loading the CUDA driver runs its initialisers, which have no preconditions.
        match unsafe { libloading::Library::new(*name) } {
            Ok(lib) => {
                let api = Api::resolve(lib, name)?;
                // SAFETY: cuInit takes a flags word that must be 0.
                let code = unsafe { (api.cuInit)(0) };
                if code != 0 {
                    return Err(Error::from_code_with(&api, "cuInit", code));
                }
                return Ok(api);
            }
            Err(e) => {
                let cause = std::error::Error::source(&e)
                    .map(|c| format!(": {c}"))
                    .unwrap_or_default();
                tried.push(format!("{name} ({e}{cause})"));
            }
        }
    }
    Err(Error::NoDriver { tried })
}
