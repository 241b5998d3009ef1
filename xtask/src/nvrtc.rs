//! NVRTC 12.9 (`libnvrtc.so.12`): `$NVRTC`, then the PyPI install of `../shared/GPU.md`.
//! It compiles a module's CUDA source to a cubin for one architecture or to PTX.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

/// The NVRTC release the committed images are built with.
pub const VERSION: (i32, i32) = (12, 9);

const INSTALL: &str = "install NVRTC 12.9 from PyPI:
    venv=\"${XDG_CACHE_HOME:-$HOME/.cache}/zkpipe-nvrtc12\"
    python3 -m venv \"$venv\"
    \"$venv/bin/pip\" install nvidia-cuda-nvrtc-cu12==12.9.86
or set NVRTC to a libnvrtc.so.12 of CUDA 12.9";

type Program = *mut c_void;
type Create = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type Compile = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type Size = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type Get = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type Destroy = unsafe extern "C" fn(*mut Program) -> c_int;
type Version = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;

/// What to build from a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// A cubin for `sm_XY`.
    Cubin(u32),
    /// PTX for `compute_XY`.
    Ptx(u32),
}

impl Output {
    /// The `--gpu-architecture` value.
    pub fn arch(self) -> String {
        match self {
            Output::Cubin(a) => format!("sm_{a}"),
            Output::Ptx(a) => format!("compute_{a}"),
        }
    }

    /// The file name of the output for module `name`, compressed.
    pub fn file_name(self, name: &str) -> String {
        match self {
            Output::Cubin(a) => format!("{name}.sm_{a}.cubin.zst"),
            Output::Ptx(a) => format!("{name}.compute_{a}.ptx.zst"),
        }
    }
}

/// A loaded libnvrtc.
#[derive(Debug)]
pub struct Nvrtc {
    lib: libloading::Library,
    path: PathBuf,
}

fn venv() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("zkpipe-nvrtc12"))
}

fn in_venv(venv: &Path) -> Option<PathBuf> {
    std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(|e| e.ok())
        .find_map(|e| {
            let p = e
                .path()
                .join("site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
            p.is_file().then_some(p)
        })
}

impl Nvrtc {
    /// Finds and loads libnvrtc 12.9, or says how to install it.
    pub fn find() -> Result<Self, String> {
        let mut tried = Vec::new();
        let mut candidates = Vec::new();
        if let Some(p) = std::env::var_os("NVRTC") {
            candidates.push(PathBuf::from(p));
        }
        if let Some(v) = venv() {
            match in_venv(&v) {
                Some(p) => candidates.push(p),
                None => tried.push(v.display().to_string()),
            }
        }
        for p in candidates {
            // SAFETY: loading libnvrtc runs its initialisers, which have no preconditions.
            match unsafe { libloading::Library::new(&p) } {
                Ok(lib) => {
                    let nvrtc = Self { lib, path: p };
                    let v = nvrtc.version()?;
                    if v != VERSION {
                        return Err(format!(
                            "{} is NVRTC {}.{}, the images are built with {}.{}; {INSTALL}",
                            nvrtc.path.display(),
                            v.0,
                            v.1,
                            VERSION.0,
                            VERSION.1
                        ));
                    }
                    return Ok(nvrtc);
                }
                Err(e) => tried.push(format!("{} ({e})", p.display())),
            }
        }
        Err(format!(
            "no libnvrtc.so.12 found (tried {}); {INSTALL}",
            tried.join(", ")
        ))
    }

    fn sym<T: Copy>(&self, name: &str) -> Result<T, String> {
        // SAFETY: each caller names an NVRTC function with the signature of T.
        unsafe { self.lib.get::<T>(name.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| format!("{}: {name}: {e}", self.path.display()))
    }

    /// NVRTC's (major, minor).
    pub fn version(&self) -> Result<(i32, i32), String> {
        let f: Version = self.sym("nvrtcVersion")?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out-pointers.
        let r = unsafe { f(&mut major, &mut minor) };
        check(r, "nvrtcVersion")?;
        Ok((major, minor))
    }

    /// Compiles `src` (named `name` in messages) to `out`.
    pub fn compile(&self, name: &str, src: &str, out: Output) -> Result<Vec<u8>, String> {
        let create: Create = self.sym("nvrtcCreateProgram")?;
        let compile: Compile = self.sym("nvrtcCompileProgram")?;
        let log_size: Size = self.sym("nvrtcGetProgramLogSize")?;
        let log: Get = self.sym("nvrtcGetProgramLog")?;
        let destroy: Destroy = self.sym("nvrtcDestroyProgram")?;
        let (size, get): (Size, Get) = match out {
            Output::Cubin(_) => (self.sym("nvrtcGetCUBINSize")?, self.sym("nvrtcGetCUBIN")?),
            Output::Ptx(_) => (self.sym("nvrtcGetPTXSize")?, self.sym("nvrtcGetPTX")?),
        };
        let c_src = CString::new(src).map_err(|_| format!("{name}: a NUL byte in the source"))?;
        let c_name = CString::new(format!("{name}.cu")).map_err(|e| e.to_string())?;
        let options: Vec<CString> = [
            format!("--gpu-architecture={}", out.arch()),
            // ec-gpu-gen passes shared memory as an OpenCL-style parameter; NVRTC warns.
            "--diag-suppress=1835".to_string(),
        ]
        .into_iter()
        .map(|o| CString::new(o).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
        let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated source and name; no headers.
        let r = unsafe {
            create(
                &mut prog,
                c_src.as_ptr(),
                c_name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        check(r, "nvrtcCreateProgram")?;
        let result = (|| {
            // SAFETY: a live program and `option_ptrs.len()` NUL-terminated options.
            let r = unsafe { compile(prog, option_ptrs.len() as c_int, option_ptrs.as_ptr()) };
            if r != 0 {
                let text = read(prog, log_size, log).unwrap_or_default();
                let text = String::from_utf8_lossy(&text);
                return Err(format!(
                    "NVRTC could not compile {name} for {} (nvrtcResult {r}):\n{}",
                    out.arch(),
                    text.trim_end_matches('\0')
                ));
            }
            let mut bytes = read(prog, size, get)?;
            if let Output::Ptx(_) = out {
                // The PTX size counts its terminating NUL.
                while bytes.last() == Some(&0) {
                    bytes.pop();
                }
            }
            Ok(bytes)
        })();
        // SAFETY: the program created above, destroyed once.
        unsafe { destroy(&mut prog) };
        result
    }
}

/// Reads one of a program's outputs through its size and copy functions.
fn read(prog: Program, size: Size, get: Get) -> Result<Vec<u8>, String> {
    let mut n = 0usize;
    // SAFETY: a live program and a valid out-pointer.
    check(unsafe { size(prog, &mut n) }, "the output's size")?;
    let mut buf = vec![0u8; n];
    // SAFETY: `buf` holds the `n` bytes NVRTC said it will write.
    check(unsafe { get(prog, buf.as_mut_ptr().cast()) }, "the output")?;
    Ok(buf)
}

fn check(r: c_int, what: &str) -> Result<(), String> {
    match r {
        0 => Ok(()),
        r => Err(format!("NVRTC failed reading {what} (nvrtcResult {r})")),
    }
}
