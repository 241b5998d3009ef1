//! What a job on the device did: its plan in words, its stage times added to the engine's
//! counters, its span and the log.

use crate::plan::{HStep, JobPlan};
use crate::stats::{Counters, JobReport};

/// Adds a job's device times to the engine's counters, its span and the log.
pub(super) fn record(stats: &Counters, r: &JobReport) {
    let h_ms = r
        .device_ms
        .iter()
        .filter(|s| s.0 == "h_step")
        .fold(0.0, |acc, s| acc + s.1);
    // The MSMs' device time: from the H step's end to the last MSM's (they overlap).
    let msm_ms = r.device_span_ms - h_ms;
    Counters::add_ms(&stats.h_gpu_ns, h_ms);
    Counters::add_ms(&stats.msm_gpu_ns, msm_ms);
    stats.stages.observe(&r.device_ms, r.device_span_ms);
    let span = tracing::Span::current();
    span.record("upload_bytes", r.uploaded_bytes);
    span.record("h_gpu_ms", h_ms);
    span.record("msm_gpu_ms", msm_ms);
    tracing::info!(
        job = r.job,
        plan = %r.plan,
        upload_bytes = r.uploaded_bytes,
        device_ms = ?r.device_ms,
        device_span_ms = r.device_span_ms,
        staging_ms = r.staging_ms,
        lock_ms = r.lock_ms,
        "g1 stage done"
    );
}

/// The plan in words, for reports and logs.
pub(super) fn describe(plan: &JobPlan, resident: bool) -> String {
    format!(
        "H step in {} vectors, MSMs in chunks of 2^{} points, bases {}{}",
        match plan.h_step {
            HStep::Four => 4,
            HStep::Three => 3,
        },
        plan.chunk.trailing_zeros(),
        if resident {
            "resident"
        } else {
            "streamed from the page-locked key"
        },
        match (plan.kept, plan.side_by_side) {
            (0, true) => ", memory per job, two jobs side by side".to_string(),
            (0, false) => ", memory per job, one job at a time".to_string(),
            (kept, _) => format!(
                ", memory kept by each worker ({:.2} GiB)",
                kept as f64 / (1u64 << 30) as f64
            ),
        }
    )
}
