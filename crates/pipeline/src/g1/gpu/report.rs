//! What a job on the device did: its plan, its stage times added to the engine's
//! counters, its span and the log.

use crate::plan::{HStep, JobPlan};
use crate::stats::{
    Counters, JobMemoryUse, JobReport, KeyPlacement, MatricesPlacement, PlanReport, Stage,
};

/// Adds a job's device times to the engine's counters, its span and the log.
pub(super) fn record(stats: &Counters, r: &JobReport) {
    // A recorded job's evaluation counts with the H step (it writes the step's vectors).
    let h_ms = r.stage_ms(Stage::Evaluate) + r.stage_ms(Stage::HStep);
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
        plan = %r.plan.map_or(String::new(), |p| p.to_string()),
        upload_bytes = r.uploaded_bytes,
        device_ms = ?r.device_ms,
        device_span_ms = r.device_span_ms,
        staging_ms = r.staging_ms,
        lock_ms = r.lock_ms,
        "g1 stage done"
    );
}

/// The plan as the job's report gives it.
pub(super) fn plan_report(
    plan: &JobPlan,
    bases: KeyPlacement,
    matrices: Option<MatricesPlacement>,
) -> PlanReport {
    PlanReport {
        h_vectors: match plan.h_step {
            HStep::Four => 4,
            HStep::Three => 3,
        },
        chunk: plan.chunk,
        bases,
        memory: match (plan.kept, plan.side_by_side) {
            (0, true) => JobMemoryUse::PerJob { jobs_at_once: 2 },
            (0, false) => JobMemoryUse::PerJob { jobs_at_once: 1 },
            (bytes, _) => JobMemoryUse::Kept { bytes },
        },
        matrices,
    }
}
