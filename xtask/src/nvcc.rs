//! Finding and running nvcc: `$NVCC`, then `PATH`, then the PyPI install of `../shared/GPU.md`.

use std::path::{Path, PathBuf};
use std::process::Command;

const INSTALL: &str = "install nvcc 13.0 from PyPI:
    venv=\"${XDG_CACHE_HOME:-$HOME/.cache}/zkpipe-nvcc\"
    python3 -m venv \"$venv\"
    \"$venv/bin/pip\" install nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 \\
        nvidia-cuda-crt==13.0.88 'nvidia-cuda-runtime==13.0.*'
or set NVCC to an nvcc 13.0 binary";

/// The venv that `.ci/run` and the README install into.
fn venv() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("zkpipe-nvcc"))
}

fn in_venv(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .find_map(|e| {
            let p = e.path().join("site-packages/nvidia/cu13/bin/nvcc");
            p.is_file().then_some(p)
        })
}

/// Finds nvcc, or says how to install one.
pub fn find() -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os("NVCC") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(format!("$NVCC={}", p.display()));
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(p) = std::env::split_paths(&path)
            .map(|d| d.join("nvcc"))
            .find(|p| p.is_file())
        {
            return Ok(p);
        }
        tried.push("nvcc on PATH".to_string());
    }
    if let Some(v) = venv() {
        if let Some(p) = in_venv(&v) {
            return Ok(p);
        }
        tried.push(format!("{}", v.display()));
    }
    Err(format!(
        "no nvcc found (tried {}); {INSTALL}",
        tried.join(", ")
    ))
}

/// Runs `nvcc <mode> -arch=sm_90 <src> -o <out>`.
pub fn compile(nvcc: &Path, src: &Path, mode: &str, out: &Path) -> Result<(), String> {
    let status = Command::new(nvcc)
        .arg(mode)
        .arg(format!("-arch={}", crate::ARCH))
        // ec-gpu-gen passes shared memory as an OpenCL-style parameter; nvcc warns and ignores it.
        .arg("-diag-suppress=1835")
        .arg(src)
        .arg("-o")
        .arg(out)
        .status()
        .map_err(|e| format!("running {}: {e}", nvcc.display()))?;
    if !status.success() {
        return Err(format!(
            "{} {mode} {} failed ({status})",
            nvcc.display(),
            src.display()
        ));
    }
    Ok(())
}

/// Writes `src` to `cu`, then builds the PTX from it and the cubin from the PTX (ptxas only,
/// which skips a second front-end run). `cu` is written last of all, so that an interrupted
/// build is never taken for a finished one.
pub fn compile_source(
    nvcc: &Path,
    src: &str,
    cu: &Path,
    ptx: &Path,
    cubin: &Path,
) -> Result<(), String> {
    let tmp = cu.with_extension("cu.tmp");
    std::fs::write(&tmp, src).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    let tmp_cu = cu.with_extension("tmp.cu");
    std::fs::rename(&tmp, &tmp_cu).map_err(|e| e.to_string())?;
    compile(nvcc, &tmp_cu, "-ptx", ptx)?;
    compile(nvcc, ptx, "-cubin", cubin)?;
    std::fs::rename(&tmp_cu, cu).map_err(|e| e.to_string())
}
