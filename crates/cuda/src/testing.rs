//! Helpers for GPU tests: skip with a printed line when there is no GPU, fail instead when
//! `ZKPIPE_REQUIRE_GPU=1`, so that a GPU run can never pass by skipping.

use std::io::Write;
use std::sync::Arc;

use crate::context::Context;

/// The variable that turns a skipped GPU test into a failure.
pub const REQUIRE_GPU_VAR: &str = "ZKPIPE_REQUIRE_GPU";

/// True when `ZKPIPE_REQUIRE_GPU` is set to `1`.
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU_VAR)
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// The variable that makes a GPU test run load every module's PTX (the JIT path).
pub const FORCE_PTX_VAR: &str = "ZKPIPE_FORCE_PTX";

/// Makes every later module load of this test process prefer the PTX when `ZKPIPE_FORCE_PTX=1`
/// ([`crate::Prefer::set_for_process`]).
pub fn prefer_from_env() {
    if std::env::var(FORCE_PTX_VAR).is_ok_and(|v| v == "1") {
        crate::Prefer::Ptx.set_for_process();
    }
}

/// Device 0's context for a GPU test, or `None` (after writing `skipped: no CUDA device` to stderr) when
/// there is no GPU.
///
/// # Panics
/// When there is no GPU and `ZKPIPE_REQUIRE_GPU=1`, or when the driver fails in another way:
/// this is for tests, where a panic is the failure.
pub fn gpu_context() -> Option<Arc<Context>> {
    prefer_from_env();
    match Context::new(0) {
        Ok(ctx) => Some(ctx),
        Err(e) if e.is_no_gpu() && !gpu_required() => {
            // Written to stderr directly: the test harness captures `println!`, and this line
            // must show in a plain `cargo test` run.
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({e})");
            None
        }
        Err(e) => panic!("a GPU is required ({REQUIRE_GPU_VAR}=1) but none is usable: {e}"),
    }
}
