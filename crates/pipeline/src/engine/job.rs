//! A job as the engine holds it, and the handle its caller waits on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use crossbeam::channel::{Receiver, Sender};

use super::queue::{Lane, Laned};
use crate::{JobReport, Proof, ProveError, ProvingKey, Witness};

/// The randomness of a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Randomness {
    /// Fresh r and s from the thread's RNG. Default.
    #[default]
    Random,
    /// Given r and s: the same inputs give the same proof, on any backend.
    Fixed { r: Scalar, s: Scalar },
}

/// A job's answer: its proof and report, or why there is none.
pub(super) type Answer = Result<(Proof, JobReport), ProveError>;

/// Where a job's answer goes.
pub(super) type Reply = Sender<Answer>;

/// A submitted job, waiting for a worker.
pub(super) struct Job {
    pub(super) id: u64,
    /// The job must start by then, and its waits for memory end by then.
    pub(super) deadline: Option<Instant>,
    /// Set when the caller no longer wants the proof: the job is dropped unrun.
    pub(super) cancelled: Arc<AtomicBool>,
    pub(super) key: Arc<ProvingKey>,
    pub(super) witness: Witness,
    pub(super) r: Scalar,
    pub(super) s: Scalar,
    pub(super) reply: Reply,
    pub(super) lane: Lane,
}

impl Job {
    /// Answers the job's caller, having first let go of what the job held (its key, its
    /// witness): a caller holding its answer finds the key free to evict.
    pub(super) fn answer(self, answer: Answer) {
        let Job {
            key,
            witness,
            reply,
            ..
        } = self;
        drop((key, witness));
        let _ = reply.send(answer);
    }
}

impl Laned for Job {
    fn lane(&self) -> Lane {
        self.lane
    }
}

/// How long a submit may wait for room in the queue, the job's deadline, and its lane.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Limits {
    pub(super) queue_wait: Option<Duration>,
    pub(super) deadline: Option<Instant>,
    pub(super) lane: Lane,
}

/// A submitted job: wait for its proof. Dropping the handle cancels the job if it has not
/// started.
#[derive(Debug)]
pub struct JobHandle {
    pub(super) id: u64,
    pub(super) rx: Receiver<Result<(Proof, JobReport), ProveError>>,
    pub(super) cancelled: Arc<AtomicBool>,
}

impl Drop for JobHandle {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl JobHandle {
    /// The job's number.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Cancels the job if it has not started: a worker then drops it unrun, and a wait gives
    /// [`ProveError::Cancelled`]. A job already running finishes.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Blocks until the proof (or the job's error) is ready.
    pub fn wait(self) -> Result<Proof, ProveError> {
        self.wait_report().map(|(proof, _)| proof)
    }

    /// As [`JobHandle::wait`], with what the job did: its plan, each stage's device
    /// milliseconds, staging and lock times, bytes uploaded.
    pub fn wait_report(self) -> Result<(Proof, JobReport), ProveError> {
        self.rx.recv().unwrap_or(Err(self.lost()))
    }

    /// Waits up to `timeout` for the proof: `None` when it is not ready by then (the handle
    /// can be waited on again).
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<Proof, ProveError>> {
        self.wait_report_timeout(timeout)
            .map(|r| r.map(|(proof, _)| proof))
    }

    /// As [`JobHandle::wait_timeout`], with the job's report.
    pub fn wait_report_timeout(
        &self,
        timeout: Duration,
    ) -> Option<Result<(Proof, JobReport), ProveError>> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => Some(r),
            Err(crossbeam::channel::RecvTimeoutError::Timeout) => None,
            Err(crossbeam::channel::RecvTimeoutError::Disconnected) => Some(Err(self.lost())),
        }
    }

    fn lost(&self) -> ProveError {
        ProveError::Lost {
            job: self.id,
            reason: "the engine stopped before answering".into(),
        }
    }
}

/// A job [`crate::Engine::submit_timeout`] did not accept, with its witness handed back.
#[derive(Debug)]
pub struct Refused {
    /// Why.
    pub error: ProveError,
    /// The witness, unused.
    pub witness: Box<crate::Witness>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Refused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
