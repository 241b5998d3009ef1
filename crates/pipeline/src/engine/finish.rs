//! The G2 stage: B2 on the CPU when the GPU did not sum it, the proof assembled and checked
//! against the key and the job's public inputs before it goes out.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use blstrs::Scalar;
use crossbeam::channel::Receiver;
use zkpipe_msm::{CpuMsm, Msm};

use super::job::{Answer, Reply};
use crate::config::ProofCheck;
use crate::g1::G1Output;
use crate::prover;
use crate::stats::Counters;
use crate::{JobReport, Proof, ProveError, ProvingKey};

/// A job whose G1 stage is done, on its way to the G2 stage.
pub(super) struct G1Done {
    pub id: u64,
    pub key: Arc<ProvingKey>,
    /// What the G1 stage gave: its sums, B2 or the assignment to sum it from, its report.
    pub g1: G1Output,
    /// The public inputs without the constant one, for the proof's check.
    pub inputs: Vec<Scalar>,
    pub r: Scalar,
    pub s: Scalar,
    pub reply: Reply,
}

/// The G2 stage's loop: each job finished and answered.
pub(super) fn g2_stage(rx: Receiver<G1Done>, stats: Arc<Counters>, check: ProofCheck) {
    for d in rx {
        let span = tracing::info_span!("g2", job = d.id);
        let _e = span.enter();
        let run = catch_unwind(AssertUnwindSafe(|| finish(&d, &stats, check)));
        let result = run.unwrap_or_else(|p| {
            Err(ProveError::Lost {
                job: d.id,
                reason: format!("G2 stage panicked: {}", panic_text(&p)),
            })
        });
        match &result {
            Ok(_) => stats.done.fetch_add(1, Ordering::Relaxed),
            Err(ProveError::ProofRejected { .. }) => {
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                stats.failed.fetch_add(1, Ordering::Relaxed)
            }
            Err(_) => stats.failed.fetch_add(1, Ordering::Relaxed),
        };
        if let Err(e) = &result {
            tracing::warn!(job = d.id, error = %e, "job failed");
        }
        d.answer(result);
    }
}

impl G1Done {
    /// Answers the job's caller, having first let go of what the job held (its key, the G1
    /// stage's output): a caller holding its answer finds the key free to evict.
    pub(super) fn answer(self, answer: Answer) {
        let G1Done {
            key,
            g1,
            inputs,
            reply,
            ..
        } = self;
        drop((key, g1, inputs));
        let _ = reply.send(answer);
    }
}

/// A job's last steps: B2 on the CPU when the GPU did not sum it, the proof assembled, and
/// the proof checked against the key and the job's public inputs before it goes out.
fn finish(
    d: &G1Done,
    stats: &Counters,
    check: ProofCheck,
) -> Result<(Proof, JobReport), ProveError> {
    let mut report = d.g1.report.clone();
    let b2 = match (d.g1.b2, &d.g1.z) {
        (Some(b2), _) => b2,
        (None, None) => {
            return Err(ProveError::Lost {
                job: d.id,
                reason: "neither B2 nor the assignment reached the G2 stage".into(),
            })
        }
        (None, Some(z)) => {
            let t = Instant::now();
            let b2 = prover::g2_msm(&CpuMsm::new() as &dyn Msm, &d.key, z)?;
            Counters::add(&stats.g2_ns, t.elapsed());
            report.g2_cpu_ms = t.elapsed().as_secs_f64() * 1e3;
            b2
        }
    };
    #[cfg(feature = "fault-injection")]
    let g1 = &crate::inject::after_msms(&d.g1.parts);
    #[cfg(not(feature = "fault-injection"))]
    let g1 = &d.g1.parts;
    let proof = prover::assemble(&d.key, g1, b2, d.r, d.s);
    if check == ProofCheck::Pairing {
        let t = Instant::now();
        let checked = crate::proof::check(d.key.prepared_vk(), &proof, &d.inputs)?;
        report.check_ms = t.elapsed().as_secs_f64() * 1e3;
        if let Err(fault) = checked {
            return Err(ProveError::ProofRejected { job: d.id, fault });
        }
    }
    Ok((proof, report))
}

pub(super) fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
