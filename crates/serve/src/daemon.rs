//! The daemon's jobs: queued by priority (first in, first out within a level), run by a fixed
//! number of worker threads on one prover and engine, kept after they end so that a caller
//! who lost its connection can still await them.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use zkpipe_filecoin::{FilecoinError, KeyName, LoadedKey, Prover, Request, Scheduling, Turn};
use zkpipe_pipeline::Engine;

use crate::circuits::{CircuitSummary, CircuitWitness, Circuits};
use crate::requests::RequestThreads;

pub use zkpipe_filecoin::Priority;

/// What a job proves.
#[derive(Debug)]
pub enum Work {
    /// One of Filecoin's proof kinds.
    Filecoin(Request),
    /// A registered circuit's witness ([`crate::circuits`]).
    Circuit(CircuitWitness),
}

impl Work {
    /// Its kind, in status and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Work::Filecoin(r) => r.kind(),
            Work::Circuit(_) => "circuit",
        }
    }

    /// The priority it runs at when the caller names none: a Filecoin kind's own, NORMAL
    /// for a circuit.
    pub fn default_priority(&self) -> Priority {
        match self {
            Work::Filecoin(r) => Priority::of(r),
            Work::Circuit(_) => Priority::Normal,
        }
    }
}

impl From<Request> for Work {
    fn from(r: Request) -> Self {
        Work::Filecoin(r)
    }
}

/// The queue of `p`'s level.
fn level(p: Priority) -> usize {
    p as usize
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Completed(Arc<Vec<u8>>),
    Failed(String),
    Cancelled(String),
    /// Not started by its deadline, so never run.
    Expired(String),
}

impl Phase {
    /// Its name in metrics and status.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Pending => "pending",
            Phase::Running => "running",
            Phase::Completed(_) => "completed",
            Phase::Failed(_) => "failed",
            Phase::Cancelled(_) => "cancelled",
            Phase::Expired(_) => "expired",
        }
    }

    /// True once the job has ended.
    pub fn is_final(&self) -> bool {
        !matches!(self, Phase::Pending | Phase::Running)
    }
}

/// A job as a caller sees it.
#[derive(Debug, Clone)]
pub struct JobView {
    pub id: String,
    pub kind: &'static str,
    pub partitions: usize,
    pub phase: Phase,
    pub queue_wait: Duration,
    pub run: Duration,
}

/// What evicting a key freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    pub host_bytes: usize,
    pub device_bytes: usize,
}

/// How a submission was taken.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub id: String,
    /// Jobs ahead of it in the queues when it was queued.
    pub ahead: usize,
    /// True when its request id named an earlier job of the same content.
    pub existing: bool,
}

/// Why a submission or a lookup was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DaemonError {
    #[error("request id {request_id:?} was used before for another request ({job})")]
    RequestIdReused { request_id: String, job: String },
    #[error("unknown job {0:?}")]
    UnknownJob(String),
    #[error("the queue is full: {limit} jobs wait already")]
    QueueFull { limit: usize },
    #[error("the daemon is shutting down and takes no new job")]
    ShuttingDown,
}

/// Which jobs a worker takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// Any, highest priority first.
    Any,
    /// HIGH and CRITICAL only: a worker kept for them, so that an urgent proof starts at once
    /// while every other worker runs a long one (its partitions then go ahead of theirs at
    /// the prover's gates).
    Urgent,
}

/// The daemon's limits and sizes.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Jobs of any priority run at once.
    pub workers: usize,
    /// Workers besides those that take only HIGH and CRITICAL jobs.
    pub urgent_workers: usize,
    /// Jobs that may wait in the queues at once.
    pub queue: usize,
    /// How long an ended job is kept for a late await.
    pub keep_finished: Duration,
    /// Host bytes the partitions synthesizing at once may take, by their estimates
    /// ([`zkpipe_filecoin::synthesis_bytes`]); None: no limit.
    pub synthesis_memory: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            workers: 2,
            urgent_workers: 1,
            queue: 10_000,
            keep_finished: Duration::from_secs(3600),
            synthesis_memory: None,
        }
    }
}

/// Totals since the start.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Counts {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub expired: u64,
}

/// Upper bounds (seconds) of the latency histograms' buckets.
pub const LATENCY_BUCKETS_S: [f64; 12] = [
    0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

/// A histogram of seconds: counts per bucket of [`LATENCY_BUCKETS_S`] (not cumulative; the
/// last counts those above every bound), their sum and count.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Histogram {
    pub buckets: [u64; LATENCY_BUCKETS_S.len() + 1],
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        let i = LATENCY_BUCKETS_S
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        self.buckets[i] += 1;
        self.sum += seconds;
        self.count += 1;
    }
}

/// One kind's jobs since the start: how they ended and how long those proved took.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KindFigures {
    pub counts: Counts,
    /// Submission to proof, of the jobs completed.
    pub latency_s: Histogram,
    /// Submission to start, of the jobs that started.
    pub queue_wait_s: Histogram,
}

/// Jobs waiting at one priority for one kind.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueueCount {
    pub priority: Priority,
    pub kind: &'static str,
    pub jobs: usize,
}

/// A job not yet ended, as the status lists it (never its content).
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobSummary {
    pub id: String,
    pub kind: &'static str,
    pub priority: Priority,
    pub state: &'static str,
    /// Since its submission.
    pub age_ms: u64,
}

/// The engine's memory and devices, as the status reports them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineFigures {
    pub backend: String,
    pub vram_budget_in_use: usize,
    pub vram_kept: usize,
    pub vram_high_water: usize,
    pub pinned_in_use: usize,
    pub pinned_high_water: usize,
    pub key_pinned_bytes: u64,
    /// Keys and recordings uploaded to stay resident on a device, and those given up for
    /// another key's job.
    pub resident_uploads: u64,
    pub resident_evictions: u64,
    pub quarantined_devices: usize,
}

/// What the daemon is doing.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Status {
    pub uptime_s: f64,
    pub workers: usize,
    /// Jobs waiting, by priority (every level, highest first).
    pub pending: [(Priority, usize); 4],
    /// Jobs waiting, by priority and kind (only those with jobs).
    pub queues: Vec<QueueCount>,
    pub running: usize,
    pub counts: Counts,
    pub draining: bool,
    /// The jobs not yet ended, oldest first.
    pub jobs: Vec<JobSummary>,
    /// Each kind's figures since the start.
    pub kinds: std::collections::BTreeMap<&'static str, KindFigures>,
    pub engine: EngineFigures,
    /// The proving keys held in host memory.
    pub keys: Vec<zkpipe_filecoin::ResidentKey>,
    /// The circuits registered besides Filecoin's.
    pub circuits: Vec<CircuitSummary>,
    /// Host memory the partitions synthesizing now hold (by their estimates), and its
    /// budget (None: no limit).
    pub synthesis_memory: SynthesisMemoryFigures,
}

/// Host memory of synthesis working sets, as the status reports it.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SynthesisMemoryFigures {
    pub in_use: usize,
    pub budget: Option<usize>,
}

struct Job {
    kind: &'static str,
    partitions: usize,
    /// Taken by the worker that runs it (or dropped when it ends unrun).
    work: Option<Work>,
    digest: blake3::Hash,
    priority: Priority,
    submitted: Instant,
    /// When it must have started by, if ever.
    deadline: Option<Instant>,
    started: Option<Instant>,
    ended: Option<Instant>,
    phase: watch::Sender<Phase>,
    /// Set to cancel the job while it runs: its partitions not yet started never start.
    cancel: Arc<AtomicBool>,
}

impl Job {
    fn view(&self, id: &str) -> JobView {
        let now = Instant::now();
        let started = self.started.unwrap_or(self.ended.unwrap_or(now));
        JobView {
            id: id.to_string(),
            kind: self.kind,
            partitions: self.partitions,
            phase: self.phase.borrow().clone(),
            queue_wait: started.saturating_duration_since(self.submitted),
            run: self
                .started
                .map(|s| self.ended.unwrap_or(now).saturating_duration_since(s))
                .unwrap_or_default(),
        }
    }
}

#[derive(Default)]
struct State {
    queues: [VecDeque<String>; 4],
    jobs: HashMap<String, Job>,
    /// Request id → job id.
    requests: HashMap<String, String>,
    next: u64,
    running: usize,
    counts: Counts,
    kinds: std::collections::BTreeMap<&'static str, KindFigures>,
    draining: bool,
}

impl State {
    /// Counts a job of `kind` that ended in `phase`, in the totals and in its kind's.
    fn count(&mut self, kind: &'static str, phase: &Phase) {
        let per_kind = &mut self.kinds.entry(kind).or_default().counts;
        for counts in [&mut self.counts, per_kind] {
            match phase {
                Phase::Completed(_) => counts.completed += 1,
                Phase::Failed(_) => counts.failed += 1,
                Phase::Cancelled(_) => counts.cancelled += 1,
                Phase::Expired(_) => counts.expired += 1,
                Phase::Pending | Phase::Running => {}
            }
        }
    }

    /// Ends the job `id` in `phase` and counts it.
    fn end_job(&mut self, id: &str, phase: Phase) {
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        let kind = job.kind;
        let figures = self.kinds.entry(kind).or_default();
        if let Phase::Completed(_) = &phase {
            figures
                .latency_s
                .observe(job.submitted.elapsed().as_secs_f64());
        }
        end(job, phase.clone());
        self.count(kind, &phase);
    }

    fn pending(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// The next job a worker of `lane` runs: the oldest of the highest level it takes that
    /// has one.
    fn pop(&mut self, lane: Lane) -> Option<String> {
        Priority::ALL
            .into_iter()
            .filter(|p| lane == Lane::Any || p.is_urgent())
            .find_map(|p| self.queues[level(p)].pop_front())
    }

    /// Ends every queued job whose deadline has passed (EXPIRED, never run); gives the
    /// nearest deadline of those left.
    fn expire(&mut self, now: Instant) -> Option<Instant> {
        let mut nearest: Option<Instant> = None;
        let mut expired = Vec::new();
        let jobs = &self.jobs;
        for queue in &mut self.queues {
            queue.retain(|id| match jobs.get(id).and_then(|j| j.deadline) {
                Some(d) if d <= now => {
                    expired.push(id.clone());
                    false
                }
                Some(d) => {
                    nearest = Some(nearest.map_or(d, |n| n.min(d)));
                    true
                }
                None => jobs.contains_key(id),
            });
        }
        for id in expired {
            let waited = self
                .jobs
                .get(&id)
                .map(|j| now.saturating_duration_since(j.submitted))
                .unwrap_or_default();
            let why = format!(
                "not started within its deadline ({} ms after submission)",
                waited.as_millis()
            );
            self.end_job(&id, Phase::Expired(why));
        }
        nearest
    }

    /// The jobs not yet ended, oldest first, and the queued ones by priority and kind.
    fn in_flight(&self) -> (Vec<JobSummary>, Vec<QueueCount>) {
        let mut jobs: Vec<(Instant, JobSummary)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.ended.is_none())
            .map(|(id, j)| {
                let summary = JobSummary {
                    id: id.clone(),
                    kind: j.kind,
                    priority: j.priority,
                    state: j.phase.borrow().name(),
                    age_ms: j.submitted.elapsed().as_millis() as u64,
                };
                (j.submitted, summary)
            })
            .collect();
        jobs.sort_by_key(|(submitted, _)| *submitted);
        let mut queues: std::collections::BTreeMap<
            (std::cmp::Reverse<Priority>, &'static str),
            usize,
        > = Default::default();
        for p in Priority::ALL {
            for id in &self.queues[level(p)] {
                if let Some(j) = self.jobs.get(id) {
                    *queues.entry((std::cmp::Reverse(p), j.kind)).or_default() += 1;
                }
            }
        }
        let queues = queues
            .into_iter()
            .map(|((std::cmp::Reverse(priority), kind), jobs)| QueueCount {
                priority,
                kind,
                jobs,
            })
            .collect();
        (jobs.into_iter().map(|(_, j)| j).collect(), queues)
    }

    /// Forgets jobs that ended more than `keep` ago.
    fn sweep(&mut self, keep: Duration) {
        let now = Instant::now();
        let old: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.ended.is_some_and(|e| now.duration_since(e) > keep))
            .map(|(id, _)| id.clone())
            .collect();
        for id in old {
            self.jobs.remove(&id);
        }
        let jobs = &self.jobs;
        self.requests.retain(|_, job| jobs.contains_key(job));
    }
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the workers: a job was queued, or the daemon drains.
    work: Condvar,
    /// Wakes the deadline thread: a job with a deadline was queued, or the daemon drains.
    deadlines: Condvar,
    prover: Prover,
    engine: Engine,
    circuits: Circuits,
    limits: Limits,
    /// Where the work on requests' bytes runs (their digest, checks and conversion).
    request_threads: RequestThreads,
    started: Instant,
    /// Makes job ids of this run unlike those of an earlier one.
    run_tag: u32,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The jobs and the workers that run them.
pub struct Daemon {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("limits", &self.shared.limits)
            .finish_non_exhaustive()
    }
}

impl Daemon {
    /// Starts `limits.workers` workers (and `limits.urgent_workers` for HIGH and CRITICAL
    /// jobs) proving on `engine` with `prover`, whose partitions are the work items: each
    /// waits for one of the prover's synthesis slots and for one of the engine's workers in
    /// its job's priority ([`zkpipe_filecoin::schedule`]). Besides Filecoin's kinds it proves
    /// `circuits` (registered with `prover`, whose cache holds their keys). Its work on
    /// requests' bytes runs on `request_threads`.
    pub fn start(
        prover: Prover,
        engine: Engine,
        circuits: Circuits,
        limits: Limits,
        request_threads: RequestThreads,
    ) -> Arc<Self> {
        let slots = Scheduling::for_engine(engine.workers(), prover.options().synthesis_threads)
            .with_synthesis_memory(limits.synthesis_memory);
        let prover = prover.with_scheduling(slots);
        let started = Instant::now();
        let run_tag = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ d.as_secs() as u32)
            .unwrap_or_default();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            deadlines: Condvar::new(),
            prover,
            engine,
            circuits,
            limits,
            request_threads,
            started,
            run_tag,
        });
        let lanes = std::iter::repeat_n(Lane::Any, limits.workers.max(1))
            .chain(std::iter::repeat_n(Lane::Urgent, limits.urgent_workers));
        let workers = lanes
            .enumerate()
            .map(|(i, lane)| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("zkpipe-serve-{i}"))
                    .spawn(move || work(&shared, lane))
            })
            .filter_map(|spawned| match spawned {
                Ok(handle) => Some(handle),
                Err(e) => {
                    tracing::error!(error = %e, "a worker thread could not be started");
                    None
                }
            })
            .collect::<Vec<_>>();
        let mut threads = workers;
        let reaper = Arc::clone(&shared);
        match std::thread::Builder::new()
            .name("zkpipe-serve-deadlines".into())
            .spawn(move || reap(&reaper))
        {
            Ok(handle) => threads.push(handle),
            Err(e) => tracing::error!(error = %e, "the deadline thread could not be started"),
        }
        Arc::new(Self {
            shared,
            workers: Mutex::new(threads),
        })
    }

    /// Queues `work` under `request_id` at `priority`; a job not started within
    /// `deadline` of now ends EXPIRED without running. `digest` is the request's content
    /// digest: the same request id with the same digest is the earlier job.
    pub fn submit(
        &self,
        request_id: &str,
        digest: blake3::Hash,
        work: impl Into<Work>,
        priority: Priority,
        deadline: Option<Duration>,
    ) -> Result<Submitted, DaemonError> {
        let work = work.into();
        let mut st = self.shared.lock();
        st.sweep(self.shared.limits.keep_finished);
        if let Some(job_id) = st.requests.get(request_id) {
            let same = st.jobs.get(job_id).is_some_and(|j| j.digest == digest);
            return match same {
                true => Ok(Submitted {
                    id: job_id.clone(),
                    ahead: 0,
                    existing: true,
                }),
                false => Err(DaemonError::RequestIdReused {
                    request_id: request_id.to_string(),
                    job: job_id.clone(),
                }),
            };
        }
        if st.draining {
            return Err(DaemonError::ShuttingDown);
        }
        let ahead = st.pending();
        if ahead >= self.shared.limits.queue {
            return Err(DaemonError::QueueFull {
                limit: self.shared.limits.queue,
            });
        }
        st.next += 1;
        let id = format!("{:08x}-{}", self.shared.run_tag, st.next);
        let partitions = partitions(&work);
        let (phase, _) = watch::channel(Phase::Pending);
        let submitted = Instant::now();
        st.jobs.insert(
            id.clone(),
            Job {
                kind: work.kind(),
                partitions,
                work: Some(work),
                digest,
                priority,
                submitted,
                deadline: deadline.map(|d| submitted + d),
                started: None,
                ended: None,
                phase,
                cancel: Arc::new(AtomicBool::new(false)),
            },
        );
        st.requests.insert(request_id.to_string(), id.clone());
        st.queues[level(priority)].push_back(id.clone());
        drop(st);
        // Every worker: one of the urgent lane would not take a routine job.
        self.shared.work.notify_all();
        if deadline.is_some() {
            self.shared.deadlines.notify_one();
        }
        Ok(Submitted {
            id,
            ahead,
            existing: false,
        })
    }

    /// The job `id` now.
    pub fn view(&self, id: &str) -> Result<JobView, DaemonError> {
        let st = self.shared.lock();
        st.jobs
            .get(id)
            .map(|j| j.view(id))
            .ok_or_else(|| DaemonError::UnknownJob(id.to_string()))
    }

    /// A receiver of the job's phase, to wait on.
    pub fn watch(&self, id: &str) -> Result<watch::Receiver<Phase>, DaemonError> {
        let st = self.shared.lock();
        st.jobs
            .get(id)
            .map(|j| j.phase.subscribe())
            .ok_or_else(|| DaemonError::UnknownJob(id.to_string()))
    }

    /// Cancels the job `id`: a queued job ends CANCELLED now; a running one stops starting
    /// partitions and ends CANCELLED once those on the engine are back (kernels are not
    /// stopped); an ended job is left as it is. Gives the job's phase after the call.
    pub fn cancel(&self, id: &str) -> Result<Phase, DaemonError> {
        let mut st = self.shared.lock();
        let job = st
            .jobs
            .get(id)
            .ok_or_else(|| DaemonError::UnknownJob(id.to_string()))?;
        let phase = job.phase.borrow().clone();
        match phase {
            Phase::Pending => {
                let priority = job.priority;
                st.queues[level(priority)].retain(|q| q != id);
                st.end_job(id, Phase::Cancelled("cancelled by the caller".into()));
            }
            Phase::Running => job.cancel.store(true, Ordering::SeqCst),
            _ => {}
        }
        let phase = st
            .jobs
            .get(id)
            .map(|j| j.phase.borrow().clone())
            .ok_or_else(|| DaemonError::UnknownJob(id.to_string()))?;
        Ok(phase)
    }

    /// Reads the key `name` names into the prover's cache (under its budget) and page-locks
    /// it on a GPU engine (a key that cannot be locked is kept pageable, with a warning).
    pub fn preload(&self, name: KeyName) -> Result<LoadedKey, FilecoinError> {
        let key = self.shared.prover.load_key_named(name)?;
        if let Err(e) = self.shared.engine.load_key(&key.key) {
            tracing::warn!(key = %name, error = %e, "the preloaded key could not be page-locked: its uploads run from pageable memory");
        }
        tracing::info!(key = %name, path = %key.path.display(), bytes = key.key.bytes(), read_ms = key.read_ms, "key preloaded");
        Ok(key)
    }

    /// Lets go of the key `name` names if no job holds it, with its circuit's recording and
    /// the device copies of both that no job uses: None when it was not held.
    pub fn evict(&self, name: KeyName) -> Result<Option<Evicted>, FilecoinError> {
        let Some(evicted) = self.shared.prover.evict_key_named(name)? else {
            return Ok(None);
        };
        let engine = &self.shared.engine;
        let recording_bytes = evicted
            .recording
            .map_or(0, |r| engine.release_recording(r.digest()));
        Ok(Some(Evicted {
            host_bytes: evicted.key.key.bytes(),
            device_bytes: engine.release_key(evicted.key.key.id()) + recording_bytes,
        }))
    }

    /// The circuits it proves besides Filecoin's.
    pub fn circuits(&self) -> &Circuits {
        &self.shared.circuits
    }

    /// Where its work on requests' bytes runs.
    pub fn request_threads(&self) -> &RequestThreads {
        &self.shared.request_threads
    }

    /// The daemon now.
    pub fn status(&self) -> Status {
        let e = self.shared.engine.stats();
        let engine = EngineFigures {
            backend: self.shared.engine.backend().to_string(),
            vram_budget_in_use: e.vram_budget_in_use,
            vram_kept: e.vram_kept,
            vram_high_water: e.vram_high_water,
            pinned_in_use: e.pinned_in_use,
            pinned_high_water: e.pinned_high_water,
            key_pinned_bytes: e.key_pinned_bytes,
            resident_uploads: e.resident_uploads,
            resident_evictions: e.resident_evictions,
            quarantined_devices: e.quarantined_devices,
        };
        let keys = self.shared.prover.params().resident_keys();
        let memory = self.shared.prover.synthesis_memory();
        let st = self.shared.lock();
        let (jobs, queues) = st.in_flight();
        Status {
            uptime_s: self.shared.started.elapsed().as_secs_f64(),
            workers: self.shared.limits.workers.max(1) + self.shared.limits.urgent_workers,
            pending: Priority::ALL.map(|p| (p, st.queues[level(p)].len())),
            queues,
            running: st.running,
            counts: st.counts,
            draining: st.draining,
            jobs,
            kinds: st.kinds.clone(),
            engine,
            keys,
            circuits: self.shared.circuits.summaries(),
            synthesis_memory: SynthesisMemoryFigures {
                in_use: memory.in_use,
                budget: (memory.budget != usize::MAX).then_some(memory.budget),
            },
        }
    }

    /// The daemon's figures and the engine's in the Prometheus text format.
    pub fn metrics(&self) -> String {
        crate::metrics::render(&self.status()) + &self.shared.engine.metrics()
    }

    /// Stops taking jobs: new submissions are refused, queued jobs end cancelled ("the daemon
    /// shut down"), running ones finish; returns when the workers have stopped.
    pub fn drain(&self) {
        {
            let mut st = self.shared.lock();
            st.draining = true;
            while let Some(id) = st.pop(Lane::Any) {
                st.end_job(
                    &id,
                    Phase::Cancelled("the daemon shut down before it ran".into()),
                );
            }
        }
        self.shared.work.notify_all();
        self.shared.deadlines.notify_all();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|p| p.into_inner()));
        for w in workers {
            if w.join().is_err() {
                tracing::error!("a worker thread panicked");
            }
        }
    }
}

/// Partitions a request proves (one 192-byte proof each), as far as it is known before the
/// run (the vanilla proofs' count; PoRep's is the C1 output's).
fn partitions(work: &Work) -> usize {
    let Work::Filecoin(request) = work else {
        return 1;
    };
    match request {
        Request::PoRepC2(r) => match &r.c1.vanilla_proofs {
            filecoin_proofs_api::seal::VanillaSealProof::StackedDrg2KiBV1(v) => v.len(),
            filecoin_proofs_api::seal::VanillaSealProof::StackedDrg8MiBV1(v) => v.len(),
            filecoin_proofs_api::seal::VanillaSealProof::StackedDrg512MiBV1(v) => v.len(),
            filecoin_proofs_api::seal::VanillaSealProof::StackedDrg32GiBV1(v) => v.len(),
            filecoin_proofs_api::seal::VanillaSealProof::StackedDrg64GiBV1(v) => v.len(),
        },
        Request::WindowPoSt(_) | Request::WinningPoSt(_) | Request::Snap(_) => 0,
    }
}

/// The deadline thread: ends queued jobs whose deadline passes while every worker is busy, so
/// that their callers hear at once; returns once the daemon drains.
fn reap(shared: &Shared) {
    let mut st = shared.lock();
    loop {
        if st.draining {
            return;
        }
        let now = Instant::now();
        let wait = match st.expire(now) {
            Some(next) => next.saturating_duration_since(now),
            None => Duration::from_secs(3600),
        };
        st = shared
            .deadlines
            .wait_timeout(st, wait)
            .map(|(guard, _)| guard)
            .unwrap_or_else(|p| p.into_inner().0);
    }
}

/// Ends `job` in `phase`.
fn end(job: &mut Job, phase: Phase) {
    job.ended = Some(Instant::now());
    job.work = None;
    job.phase.send_replace(phase);
}

/// Proves `work` in `turn`: the proof's bytes, 192 a partition.
fn prove(shared: &Shared, work: Work, turn: Turn<'_>) -> Result<Vec<u8>, FilecoinError> {
    match work {
        Work::Filecoin(request) => shared
            .prover
            .prove_in_turn(&shared.engine, &request, turn)
            .map(|out| out.bytes),
        Work::Circuit(witness) => {
            let circuit = Arc::clone(witness.circuit());
            circuit.prove(
                &shared.prover,
                &shared.engine,
                &shared.request_threads,
                witness,
                turn,
            )
        }
    }
}

/// A worker of `lane`: takes the next job, proves it, records the outcome; returns once the
/// daemon drains and nothing is queued.
fn work(shared: &Shared, lane: Lane) {
    loop {
        let (id, work, priority, cancel) = {
            let mut st = shared.lock();
            let next = loop {
                st.expire(Instant::now());
                if let Some(id) = st.pop(lane) {
                    break id;
                }
                if st.draining {
                    return;
                }
                st = shared.work.wait(st).unwrap_or_else(|p| p.into_inner());
            };
            let Some(job) = st.jobs.get_mut(&next) else {
                continue;
            };
            let Some(work) = job.work.take() else {
                continue;
            };
            let started = Instant::now();
            job.started = Some(started);
            job.phase.send_replace(Phase::Running);
            let (kind, waited) = (job.kind, started.duration_since(job.submitted));
            let (priority, cancel) = (job.priority, Arc::clone(&job.cancel));
            st.kinds
                .entry(kind)
                .or_default()
                .queue_wait_s
                .observe(waited.as_secs_f64());
            st.running += 1;
            (next, work, priority, cancel)
        };
        let kind = work.kind();
        tracing::info!(job = %id, kind, priority = priority.name(), "job started");
        let turn = Turn {
            priority,
            cancel: Some(&cancel),
        };
        let outcome = prove(shared, work, turn);
        let mut st = shared.lock();
        st.running -= 1;
        let phase = match outcome {
            Ok(bytes) => {
                tracing::info!(job = %id, kind, partitions = bytes.len() / 192, "job completed");
                Phase::Completed(Arc::new(bytes))
            }
            Err(e @ FilecoinError::Cancelled { .. }) => {
                tracing::info!(job = %id, kind, outcome = %e, "job cancelled");
                Phase::Cancelled(format!("cancelled by the caller while it ran: {e}"))
            }
            Err(e) => {
                tracing::warn!(job = %id, kind, error = %e, "job failed");
                Phase::Failed(e.to_string())
            }
        };
        if let (Some(job), Phase::Completed(bytes)) = (st.jobs.get_mut(&id), &phase) {
            job.partitions = bytes.len() / 192;
        }
        st.end_job(&id, phase);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_level_goes_first_and_each_level_in_order() {
        let mut st = State::default();
        let queued = [
            ("n1", Priority::Normal),
            ("l1", Priority::Low),
            ("c1", Priority::Critical),
            ("n2", Priority::Normal),
            ("h1", Priority::High),
            ("c2", Priority::Critical),
        ];
        for (id, p) in queued {
            st.queues[level(p)].push_back(id.to_string());
        }
        assert_eq!(st.pending(), 6);
        let urgent: Vec<String> = std::iter::from_fn(|| st.pop(Lane::Urgent)).collect();
        assert_eq!(
            urgent,
            ["c1", "c2", "h1"],
            "the urgent lane takes only its levels"
        );
        let order: Vec<String> = std::iter::from_fn(|| st.pop(Lane::Any)).collect();
        assert_eq!(order, ["n1", "n2", "l1"]);
        for (id, p) in queued {
            st.queues[level(p)].push_back(id.to_string());
        }
        let order: Vec<String> = std::iter::from_fn(|| st.pop(Lane::Any)).collect();
        assert_eq!(order, ["c1", "c2", "h1", "n1", "n2", "l1"]);
    }
}
