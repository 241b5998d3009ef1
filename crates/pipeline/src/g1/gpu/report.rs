//! What a job on the device did: its plan, its stage times added to the engine's
//! counters, its span and the log.

use zkpipe_msm::{GpuCurve, G1, G2};

use super::msms::StagedWitness;
use crate::plan::{HStep, JobPlan};
use crate::prover::WitnessQuery;
use crate::stats::{
    Counters, JobMemoryUse, JobReport, KeyPlacement, MatricesPlacement, PlanReport, Stage,
};
use crate::ProvingKey;

/// Adds a job's device times to the engine's counters, its span and the log.
pub(super) fn record(stats: &Counters, r: &JobReport) {
    // A recorded job's evaluation counts with the H step (it writes the step's vectors).
    let h_ms = r.stage_ms(Stage::Evaluate) + r.stage_ms(Stage::HStep);
    // The MSMs' device time: from the H step's end to the last MSM's (they overlap).
    let msm_ms = r.device_span_ms - h_ms;
    Counters::add_ms(&stats.h_gpu_ns, h_ms);
    Counters::add_ms(&stats.msm_gpu_ns, msm_ms);
    stats
        .bases_bytes
        .fetch_add(r.link.bases_bytes, std::sync::atomic::Ordering::Relaxed);
    Counters::add_ms(&stats.link_busy_ns, r.link.bases_busy_ms);
    stats.stages.observe(&r.device_ms, r.device_span_ms);
    let span = tracing::Span::current();
    span.record("upload_bytes", r.uploaded_bytes);
    span.record("bases_bytes", r.link.bases_bytes);
    span.record("h_gpu_ms", h_ms);
    span.record("msm_gpu_ms", msm_ms);
    tracing::info!(
        job = r.job,
        plan = %r.plan.map_or(String::new(), |p| p.to_string()),
        upload_bytes = r.uploaded_bytes,
        bases_bytes = r.link.bases_bytes,
        bases_needed_bytes = r.link.bases_needed_bytes,
        bases_busy_ms = r.link.bases_busy_ms,
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

/// Bytes of the key's points a streamed job's MSMs read with a nonzero scalar: all of H's
/// (h is dense), and of L, A, B1 (and B2 when G2 runs on the GPU) those of the variables
/// whose value is not 0, in the layout that crosses the link.
pub(super) fn needed_bases_bytes(key: &ProvingKey, w: &StagedWitness, g2_on_gpu: bool) -> u64 {
    let g1 = std::mem::size_of::<<G1 as GpuCurve>::GpuAffine>();
    let g2 = std::mem::size_of::<<G2 as GpuCurve>::GpuAffine>();
    let [h, ..] = key.query_lens();
    let nonzero = |q: WitnessQuery| w.query(q).host().nonzero();
    let g1_points =
        h + nonzero(WitnessQuery::L) + nonzero(WitnessQuery::A) + nonzero(WitnessQuery::B1);
    let g2_points = if g2_on_gpu {
        nonzero(WitnessQuery::B2)
    } else {
        0
    };
    (g1_points * g1 + g2_points * g2) as u64
}
