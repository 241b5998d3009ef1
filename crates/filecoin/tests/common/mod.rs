//! What the Filecoin tests share: the parameter directory, the engine, fixed randomness.

#![allow(dead_code)]

use std::path::PathBuf;

use blstrs::Scalar;
use zkpipe_filecoin::{witness_bytes, LoadedKey, ParamsCache, ProveOptions, Prover, Synthesis};
use zkpipe_pipeline::{Backend, Config, Engine, Randomness};

/// The parameter directory of the tests: `FIL_PROOFS_PARAMETER_CACHE` when set (the GPU host
/// sets it), else a directory under the build's tmp dir, exported so that filecoin-proofs'
/// verifiers read the same files. Test parameters are generated there once and kept.
pub fn params_dir() -> PathBuf {
    zkpipe_filecoin::params::dir_from_env_or(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-proof-parameters"),
    )
}

/// Fixed r and s.
pub fn fixed() -> (Scalar, Scalar) {
    (Scalar::from(0x1234_5678u64), Scalar::from(0x9abc_def0u64))
}

/// A prover over the tests' parameter directory with fixed r and s.
pub fn prover() -> Prover {
    let (r, s) = fixed();
    let options = ProveOptions {
        randomness: Randomness::Fixed { r, s },
        ..ProveOptions::default()
    };
    Prover::new(ParamsCache::new(params_dir()), options)
}

/// Whether the tests must run on a GPU (`ZKPIPE_REQUIRE_GPU=1`, on the GPU host); else they
/// run on the CPU backend.
pub fn on_gpu() -> bool {
    std::env::var("ZKPIPE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The engine for `key`'s proofs: the GPU under `ZKPIPE_REQUIRE_GPU=1`, else the CPU.
pub fn engine(key: &LoadedKey) -> Engine {
    let cfg = match on_gpu() {
        true => Config::default()
            .with_backend(Backend::Gpu)
            .with_pinned_witness(4 * witness_bytes(&key.key, Synthesis::Full)),
        false => Config::default().with_backend(Backend::Cpu),
    };
    Engine::start(cfg).expect("the engine starts")
}

/// A scratch directory under the build's tmp dir, fresh for `name`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("filecoin-sectors")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}
