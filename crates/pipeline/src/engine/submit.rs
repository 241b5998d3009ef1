//! How work comes in: jobs (checked, with their randomness, limits and handle) and the
//! page-locked witness memory the engine lends to synthesis.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use crossbeam::channel::{bounded, SendTimeoutError};
use ff::Field;
use zkpipe_field::Fr;

use super::job::{Job, JobHandle, Limits, Randomness, Refused};
use super::queue::Lane;
use super::{Engine, WitnessPool};
use crate::witness::Room;
use crate::{LentWitness, PinnedScalars, ProveError, ProvingKey, Scalars, Witness};

impl Engine {
    /// Page-locked room for one witness's a, b and c (the key's domain size each), lent from
    /// the engine's pool ([`crate::Config::pinned_witness`]): synthesis writes into it
    /// ([`Scalars::push`], [`crate::PinnedScalars::extend_from_slice`]), the engine
    /// uploads it by DMA with no staging copy, and it goes back to the pool once uploaded.
    /// Waits up to `timeout` while the pool's memory is lent. An engine without GPUs lends
    /// plain vectors (there is nothing to page-lock for); a GPU engine with no pool is an error.
    pub fn lend_evaluations(
        &self,
        key: &ProvingKey,
        timeout: Duration,
    ) -> Result<[Scalars; 3], ProveError> {
        let [a, b, c, _] = self.lend(key, timeout, Lend::Evaluations)?;
        Ok([a, b, c])
    }

    /// As [`Engine::lend_evaluations`], with room for the aux assignment too (the key's aux
    /// variables): synthesis writes it in place, with no vector to grow and no fresh memory to
    /// fault in for each witness, and it goes back to the pool once the job has split it
    /// into ones and others (or once the CPU has summed B2 from it).
    pub fn lend_witness(
        &self,
        key: &ProvingKey,
        timeout: Duration,
    ) -> Result<LentWitness, ProveError> {
        let [a, b, c, aux] = self.lend(key, timeout, Lend::Witness)?;
        Ok(LentWitness { a, b, c, aux })
    }

    /// Room for the aux assignment alone (the key's aux variables), for a witness of the
    /// recorded path ([`Witness::recording`]), whose a, b and c the engine evaluates.
    pub fn lend_aux(&self, key: &ProvingKey, timeout: Duration) -> Result<Scalars, ProveError> {
        let [_, _, _, aux] = self.lend(key, timeout, Lend::Aux)?;
        Ok(aux)
    }

    /// a, b, c and aux as `what` asks, lent together; the rest empty.
    fn lend(
        &self,
        key: &ProvingKey,
        timeout: Duration,
        what: Lend,
    ) -> Result<[Scalars; 4], ProveError> {
        let (n, aux) = (key.domain_size(), key.num_aux());
        let lent = match what {
            Lend::Evaluations => [true, true, true, false],
            Lend::Witness => [true; 4],
            Lend::Aux => [false, false, false, true],
        };
        let rooms = [(n, Room::Evaluations); 3]
            .into_iter()
            .chain([(aux, Room::Aux)])
            .zip(lent);
        let Some(WitnessPool {
            pool,
            one_at_a_time,
        }) = &self.witness_pool
        else {
            if self.devices.is_empty() {
                let mut out = std::array::from_fn(|_| Scalars::default());
                for (slot, ((len, _), lent)) in out.iter_mut().zip(rooms) {
                    if lent {
                        *slot = Vec::with_capacity(len).into();
                    }
                }
                return Ok(out);
            }
            return Err(ProveError::NoWitnessPool);
        };
        let _turn = one_at_a_time.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = std::array::from_fn(|_| Scalars::default());
        for (slot, ((len, room), _)) in out.iter_mut().zip(rooms).filter(|(_, (_, lent))| *lent) {
            // Buffers of at least the domain's size: aux rooms share the evaluations' size
            // class, so the pool reuses any idle buffer for either.
            let buf = pool
                .acquire::<Fr>(len.max(n), timeout)
                .map_err(|source| ProveError::Pinned { source })?;
            *slot = Scalars::Pinned(PinnedScalars::new(buf, len, room));
        }
        Ok(out)
    }

    /// Submits a job. The witness is checked against the key here; a bad one is an error
    /// now, not a failed job later. The key's first job page-locks it ([`Engine::load_key`]).
    /// Blocks while the job queue is full.
    pub fn submit(
        &self,
        key: &Arc<ProvingKey>,
        witness: Witness,
        randomness: Randomness,
    ) -> Result<JobHandle, ProveError> {
        self.submit_in(key, witness, randomness, Lane::Routine)
    }

    /// As [`Engine::submit`], in `lane`: a worker that frees takes the urgent lane's jobs
    /// before any routine one, so that routine jobs queued ahead of an urgent one do not
    /// delay it (a job already running is not preempted).
    pub fn submit_in(
        &self,
        key: &Arc<ProvingKey>,
        witness: Witness,
        randomness: Randomness,
        lane: Lane,
    ) -> Result<JobHandle, ProveError> {
        let limits = Limits {
            lane,
            ..Limits::default()
        };
        self.submit_within(key, witness, randomness, limits)
            .map_err(|r| r.error)
    }

    /// As [`Engine::submit`], for a job that must be done by `deadline`: the wait for room in
    /// the queue ends then (the witness comes back), a job still queued then is dropped unrun,
    /// and its waits for device and pinned memory end then, with
    /// [`ProveError::DeadlineExceeded`]. Work already on the GPU finishes.
    pub fn submit_before(
        &self,
        key: &Arc<ProvingKey>,
        witness: Witness,
        randomness: Randomness,
        deadline: Instant,
    ) -> Result<JobHandle, Refused> {
        let limits = Limits {
            queue_wait: Some(deadline.saturating_duration_since(Instant::now())),
            deadline: Some(deadline),
            lane: Lane::Routine,
        };
        self.submit_within(key, witness, randomness, limits)
    }

    /// As [`Engine::submit`], waiting at most `timeout` for room in the queue. A job not
    /// accepted comes back with its witness.
    pub fn submit_timeout(
        &self,
        key: &Arc<ProvingKey>,
        witness: Witness,
        randomness: Randomness,
        timeout: Duration,
    ) -> Result<JobHandle, Refused> {
        let limits = Limits {
            queue_wait: Some(timeout),
            deadline: None,
            lane: Lane::Routine,
        };
        self.submit_within(key, witness, randomness, limits)
    }

    fn submit_within(
        &self,
        key: &Arc<ProvingKey>,
        witness: Witness,
        randomness: Randomness,
        limits: Limits,
    ) -> Result<JobHandle, Refused> {
        let refuse = |error, witness| Refused {
            error,
            witness: Box::new(witness),
        };
        if let Err(e) = witness.check(key) {
            return Err(refuse(e, witness));
        }
        self.pin_or_warn(key);
        let (r, s) = match randomness {
            Randomness::Fixed { r, s } => (r, s),
            Randomness::Random => {
                let mut rng = rand::thread_rng();
                (Scalar::random(&mut rng), Scalar::random(&mut rng))
            }
        };
        let tx = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(tx) = tx else {
            return Err(refuse(ProveError::ShutDown, witness));
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = bounded(1);
        let cancelled = Arc::new(AtomicBool::new(false));
        let job = Job {
            id,
            deadline: limits.deadline,
            cancelled: Arc::clone(&cancelled),
            key: Arc::clone(key),
            witness,
            r,
            s,
            reply,
            lane: limits.lane,
        };
        let t = Instant::now();
        let sent = match limits.queue_wait {
            None => tx.send(job).map_err(|job| (ProveError::ShutDown, job)),
            Some(d) => tx.send_timeout(job, d).map_err(|e| match e {
                SendTimeoutError::Timeout(job) => {
                    let waited_ms = t.elapsed().as_millis();
                    (ProveError::QueueFull { waited_ms }, job)
                }
                SendTimeoutError::Disconnected(job) => (ProveError::ShutDown, job),
            }),
        };
        if let Err((error, job)) = sent {
            return Err(refuse(error, job.witness));
        }
        self.stats.submitted.fetch_add(1, Ordering::Relaxed);
        Ok(JobHandle { id, rx, cancelled })
    }

    /// Submits many circuits of one key (the first bad witness stops the batch with its error;
    /// the jobs before it run).
    pub fn submit_batch(
        &self,
        key: &Arc<ProvingKey>,
        witnesses: Vec<Witness>,
        randomness: Randomness,
    ) -> Result<Vec<JobHandle>, ProveError> {
        witnesses
            .into_iter()
            .map(|w| self.submit(key, w, randomness))
            .collect()
    }
}

/// Which of a witness's vectors [`Engine::lend`] lends.
#[derive(Debug, Clone, Copy)]
enum Lend {
    /// a, b and c.
    Evaluations,
    /// a, b, c and aux.
    Witness,
    /// aux alone (the recorded path).
    Aux,
}
