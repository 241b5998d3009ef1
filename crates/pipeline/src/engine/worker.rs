//! The worker loop: a worker takes jobs from the queue and runs each one's G1 stage on its
//! backend ([`G1Backend`]), then hands the sums to the G2 stage. It knows nothing of where the
//! backend runs: a backend whose device was quarantined says so, and the job goes back to the
//! queue while another device is usable.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam::channel::Sender;

use super::finish::{panic_text, G1Done};
use super::job::Job;
use super::queue::{Laned, Queue, Taker};
use crate::device::DeviceShared;
use crate::g1::{G1Backend, JobContext, Ran};
use crate::stats::Counters;
use crate::ProveError;

/// A worker thread's setup.
pub(super) struct Worker {
    pub backend: Box<dyn G1Backend>,
    /// The engine's [`super::Engine::shutdown_now`] flag.
    pub abandon: Arc<AtomicBool>,
    /// Every device of the engine (this worker's among them, if it has one).
    pub devices: Vec<Arc<DeviceShared>>,
    /// The job queue, for jobs this worker hands back.
    pub requeue: Arc<Mutex<Option<Queue<Job>>>>,
}

/// What a worker does with a job it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Run it here (a CPU worker, or a usable device).
    Here,
    /// Put it back in the queue and stop: this device is quarantined and another is usable.
    Elsewhere,
    /// Its device is quarantined and no other is usable: the engine's policy decides (the
    /// backend applies it).
    Policy,
}

/// Whether a worker's own backend can still run jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    Usable,
    Quarantined,
}

/// Where a job goes, given this worker's backend and how many of the engine's devices are
/// usable.
fn placement(own: Own, usable: usize) -> Placement {
    match own {
        Own::Usable => Placement::Here,
        Own::Quarantined if usable > 0 => Placement::Elsewhere,
        Own::Quarantined => Placement::Policy,
    }
}

/// Puts `job` back in the queue; gives it back when the engine no longer takes jobs.
fn put_back<T: Laned>(queue: &Mutex<Option<Queue<T>>>, job: T) -> Result<(), T> {
    let tx = queue.lock().unwrap_or_else(|p| p.into_inner()).clone();
    match tx {
        Some(tx) => tx.send(job),
        None => Err(job),
    }
}

/// What became of a job the worker took (one a job, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Taken {
    /// It runs here.
    Run(Job),
    /// It was answered (cancelled, or its deadline passed).
    Answered,
    /// It went back to the queue: this worker's device is gone and it stops.
    Stop,
}

/// The worker loop, until the queue closes or this worker's device is gone.
pub(super) fn run(w: Worker, jobs: Taker<Job>, out: Sender<G1Done>, stats: Arc<Counters>) {
    for job in jobs {
        let job = match take(&w, job, &stats) {
            Taken::Run(job) => job,
            Taken::Answered => continue,
            Taken::Stop => break,
        };
        if let Some(job) = run_job(&w, job, &out, &stats) {
            match put_back(&w.requeue, job) {
                Ok(()) => {
                    // Taken again by another device's worker; this one's device is gone.
                    stats.taken.fetch_sub(1, Ordering::Relaxed);
                    stats.moved.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Err(job) => {
                    let e = ProveError::Lost {
                        job: job.id,
                        reason: "its device was quarantined and the engine is shutting down".into(),
                    };
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    job.answer(Err(e));
                }
            }
        }
    }
}

/// A job taken from the queue: run here, put back for another device, or answered at once
/// (cancelled, or past its deadline).
fn take(w: &Worker, job: Job, stats: &Counters) -> Taken {
    let own = match w.backend.quarantined() {
        true => Own::Quarantined,
        false => Own::Usable,
    };
    let usable = w
        .devices
        .iter()
        .filter(|d| d.quarantined().is_none())
        .count();
    let job = match placement(own, usable) {
        Placement::Here | Placement::Policy => job,
        Placement::Elsewhere => match put_back(&w.requeue, job) {
            Ok(()) => {
                // Its device is quarantined: the other devices' workers take the queue.
                stats.moved.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    usable,
                    "a worker of a quarantined device stops; its job goes to another device"
                );
                return Taken::Stop;
            }
            Err(job) => job,
        },
    };
    stats.taken.fetch_add(1, Ordering::Relaxed);
    if job.cancelled.load(Ordering::SeqCst) || w.abandon.load(Ordering::SeqCst) {
        stats.cancelled.fetch_add(1, Ordering::Relaxed);
        let id = job.id;
        job.answer(Err(ProveError::Cancelled { job: id }));
        return Taken::Answered;
    }
    if job.deadline.is_some_and(|d| Instant::now() >= d) {
        stats.failed.fetch_add(1, Ordering::Relaxed);
        let what = "before it started";
        job.answer(Err(ProveError::DeadlineExceeded { what }));
        return Taken::Answered;
    }
    Taken::Run(job)
}

/// Runs a job's G1 stage on the worker's backend and hands the result on (to the G2 stage, or
/// the error to the caller). A job whose device was quarantined comes back, whole, to be
/// queued again.
fn run_job(w: &Worker, mut job: Job, out: &Sender<G1Done>, stats: &Counters) -> Option<Job> {
    let span = tracing::info_span!(
        "g1",
        job = job.id,
        n = job.key.domain_size(),
        upload_bytes = tracing::field::Empty,
        bases_bytes = tracing::field::Empty,
        h_gpu_ms = tracing::field::Empty,
        msm_gpu_ms = tracing::field::Empty,
    );
    let _e = span.enter();
    let inputs = job.witness.input.get(1..).unwrap_or_default().to_vec();
    let ctx = JobContext {
        id: job.id,
        key: &job.key,
        deadline: job.deadline,
        stats,
    };
    let witness = &mut job.witness;
    let ran = catch_unwind(AssertUnwindSafe(|| w.backend.run(&ctx, witness)));
    let ran = ran.unwrap_or_else(|p| {
        Err(ProveError::Lost {
            job: job.id,
            reason: format!("worker panicked: {}", panic_text(&p)),
        })
    });
    match ran {
        Ok(Ran::Done(g1)) => {
            let done = G1Done {
                id: job.id,
                key: job.key,
                g1,
                inputs,
                r: job.r,
                s: job.s,
                reply: job.reply,
            };
            if let Err(e) = out.send(done) {
                let job = e.0.id;
                e.0.answer(Err(ProveError::Lost {
                    job,
                    reason: "the G2 stage stopped".into(),
                }));
            }
            None
        }
        Ok(Ran::Elsewhere) => Some(job),
        Err(e) => {
            tracing::warn!(job = job.id, error = %e, "job failed");
            stats.failed.fetch_add(1, Ordering::Relaxed);
            job.answer(Err(e));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::queue::{queue, Lane};

    #[test]
    fn a_quarantined_device_hands_its_jobs_to_a_usable_one() {
        // CPU workers and usable devices run what they take.
        assert_eq!(placement(Own::Usable, 0), Placement::Here);
        assert_eq!(placement(Own::Usable, 2), Placement::Here);
        // A quarantined device's worker puts the job back while another device is usable.
        assert_eq!(placement(Own::Quarantined, 1), Placement::Elsewhere);
        // None left: the engine's policy (fail, or the CPU) decides.
        assert_eq!(placement(Own::Quarantined, 0), Placement::Policy);
    }

    #[derive(Debug, PartialEq, Eq)]
    struct Routine(u64);

    impl Laned for Routine {
        fn lane(&self) -> Lane {
            Lane::Routine
        }
    }

    #[test]
    fn a_job_put_back_after_shutdown_comes_back() {
        let (tx, mut rx) = queue::<Routine>(1);
        let queue = Mutex::new(Some(tx));
        assert_eq!(put_back(&queue, Routine(7)), Ok(()));
        assert_eq!(rx.next(), Some(Routine(7)));
        // Shut down: the engine's sender is gone, and the job comes back to its worker.
        queue.lock().unwrap().take();
        assert_eq!(put_back(&queue, Routine(8)), Err(Routine(8)));
    }
}
