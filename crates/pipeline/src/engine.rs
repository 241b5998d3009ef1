//! The engine: jobs in, proofs out, through bounded channels between stages.
//!
//! ```text
//! submit ─► [jobs] ─► worker (per device × workers_per_device, or CPU workers):
//!                     stage uploads (VRAM grant, outside the lock) ─► [GPU lock] H step,
//!                     G1 MSMs (and B2 if G2 is on the GPU) ─► free, unlock
//!           ─► [g1 done] ─► G2 stage (B2 on the CPU, overlapping the next job's GPU work)
//!                           and assembly ─► JobHandle
//! ```
//! Channel capacities are the backpressure: `submit` blocks while the job queue is full.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use blstrs::{G2Projective, Scalar};
use crossbeam::channel::{bounded, Receiver, SendTimeoutError, Sender};
use ff::Field;
use zkpipe_msm::{CpuMsm, Msm};
use zkpipe_ntt::CpuNtt;

use crate::gpu::{DeviceSetup, DeviceShared, GpuWorker, JobRef, StageWitness};
use crate::prover::{self, Assignment, G1Parts};
use crate::stats::{Counters, JobReport};
use crate::witness::Room;
use crate::{
    EngineStats, LentWitness, PinnedScalars, Proof, ProveError, ProvingKey, Refused, Scalars,
    Witness,
};
use zkpipe_field::Fr;
use zkpipe_pinned::PinnedPool;

/// Where the stages run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The GPUs if the driver finds any, else the CPU (with a log line saying so). Default.
    #[default]
    Auto,
    /// Every stage on the CPU.
    Cpu,
    /// The GPUs; no device is an error at start.
    Gpu,
}

/// Where the G2 MSM runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum G2Placement {
    /// On the host's cores, overlapping the next job's GPU work. Default.
    #[default]
    Cpu,
    /// On the GPU, inside the job's lock.
    Gpu,
}

/// How the engine runs. [`Config::from_file`] reads one from TOML: each field by its name.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// Where the stages run.
    pub backend: Backend,
    /// Device ordinals (`None`: all); each at most once. `zkpipe_cuda::select_devices` turns
    /// UUIDs and PCI bus ids into ordinals.
    pub devices: Option<Vec<usize>>,
    /// Workers sharing each device. Default 2.
    pub workers_per_device: usize,
    /// Workers on the CPU backend. Default 1 (each uses all cores through rayon).
    pub cpu_workers: usize,
    /// Device memory left out of each device's VRAM budget, for what the driver allocates
    /// beside the budget's grants (taken off the cap too). Default 1 GiB; never less than the
    /// MSM kernels' local memory (which the driver sets aside at their first launch: the
    /// most local memory a thread of one of them uses, for every thread the device holds)
    /// plus 512 MiB, except against a cap below four times that, which stands for a card too
    /// small for the kernels: such a cap bounds the grants less this margin alone.
    #[serde(deserialize_with = "crate::config_file::de_bytes")]
    pub vram_margin: usize,
    /// The device memory to behave as if the card had no more (a 16 GiB card on a larger
    /// one): the budget is the lesser of this and the free memory, less the margin.
    #[serde(deserialize_with = "crate::config_file::de_opt_bytes")]
    pub vram_cap: Option<usize>,
    /// Pinned host memory per device for staging uploads. Default 1 GiB.
    #[serde(deserialize_with = "crate::config_file::de_bytes")]
    pub pinned_per_device: usize,
    /// Jobs waiting for a worker. Default 4.
    pub queue_capacity: usize,
    /// Jobs between the G1 and the G2 stage. Default 2.
    pub g2_capacity: usize,
    /// Threads of the G2 stage. Default 1.
    pub g2_threads: usize,
    /// Where the G2 MSM runs.
    pub g2: G2Placement,
    /// Page-locked host memory the engine lends for witnesses' a, b, c and aux values
    /// ([`Engine::lend_witness`], [`Engine::lend_evaluations`]), allocated as first needed and
    /// reused. Each vector lent takes 32 bytes per point of the key's domain: a 2^27
    /// partition's a, b and c take 12 GiB, its aux 4 GiB more; two or three such sets keep two
    /// workers busy. Default 0: none lent.
    #[serde(deserialize_with = "crate::config_file::de_bytes")]
    pub pinned_witness: usize,
    /// Keep a proving key's points on the device across jobs when the budget allows.
    pub keep_key_resident: bool,
    /// Copies of precomputed multiples kept with a resident key's H points
    /// ([`zkpipe_msm::Multiples`]: copy j holds 2^(c·j)·P): H's MSM then sums `copies`
    /// windows in one set of buckets, at `copies` times H's device memory. Where the key
    /// with them would give jobs a smaller plan than without (shorter MSM chunks, fewer jobs
    /// side by side), which costs more than they save, the engine keeps half as many, down
    /// to none, and logs it. 0 and 1: none. Default 1.
    pub key_multiples: usize,
    /// Page-lock a proving key's points in host memory when its first job is submitted to
    /// a GPU engine ([`ProvingKey::pin`]): uploads of them are then DMA at full speed.
    /// Default true.
    pub pin_key: bool,
    /// What becomes of the jobs of a device quarantined after a fault that leaves it
    /// unusable ([`Engine::quarantined`]). Default: they fail.
    pub on_device_failure: OnDeviceFailure,
    /// The check of every proof before it is returned. Default: [`ProofCheck::Pairing`].
    pub proof_check: ProofCheck,
}

/// What the engine checks of each proof it made before returning it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProofCheck {
    /// A, B and C on their curves and in the subgroup, and the pairing equation against the
    /// job's verifying key and public inputs ([`crate::check`]); a proof that fails is
    /// [`ProveError::ProofRejected`]. Default.
    #[default]
    Pairing,
    /// None: for keys under which no proof can verify (random test keys), and benchmarks of
    /// the engine without its check.
    Off,
}

/// `with_<field>(value)`: the configuration with one field set, for building a `Config` from
/// [`Config::default`] outside this crate (`Config` is `#[non_exhaustive]`).
macro_rules! config_setters {
    ($($setter:ident => $field:ident: $ty:ty),* $(,)?) => {
        impl Config {
            $(
                #[doc = concat!("This configuration with [`Config::", stringify!($field), "`] set.")]
                #[must_use]
                pub fn $setter(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

config_setters! {
    with_backend => backend: Backend,
    with_devices => devices: Option<Vec<usize>>,
    with_workers_per_device => workers_per_device: usize,
    with_cpu_workers => cpu_workers: usize,
    with_vram_margin => vram_margin: usize,
    with_vram_cap => vram_cap: Option<usize>,
    with_pinned_per_device => pinned_per_device: usize,
    with_queue_capacity => queue_capacity: usize,
    with_g2_capacity => g2_capacity: usize,
    with_g2_threads => g2_threads: usize,
    with_g2 => g2: G2Placement,
    with_pinned_witness => pinned_witness: usize,
    with_keep_key_resident => keep_key_resident: bool,
    with_key_multiples => key_multiples: usize,
    with_pin_key => pin_key: bool,
    with_on_device_failure => on_device_failure: OnDeviceFailure,
    with_proof_check => proof_check: ProofCheck,
}

/// What becomes of the jobs of a quarantined device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDeviceFailure {
    /// They fail with [`ProveError::DeviceQuarantined`].
    #[default]
    Fail,
    /// They run on the CPU.
    Cpu,
}

/// A device the engine stopped using, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    /// The device's ordinal.
    pub device: usize,
    /// The fault that made it unusable.
    pub reason: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            backend: Backend::Auto,
            devices: None,
            workers_per_device: 2,
            cpu_workers: 1,
            vram_margin: 1 << 30,
            vram_cap: None,
            pinned_per_device: 1 << 30,
            queue_capacity: 4,
            g2_capacity: 2,
            g2_threads: 1,
            g2: G2Placement::Cpu,
            pinned_witness: 0,
            keep_key_resident: true,
            key_multiples: 1,
            pin_key: true,
            on_device_failure: OnDeviceFailure::Fail,
            proof_check: ProofCheck::Pairing,
        }
    }
}

/// The most a count of [`Config`] may be: channels and thread pools are allocated up front, so a
/// huge count would abort the process instead of starting the engine.
pub const CONFIG_MAX: [(&str, usize); 6] = [
    ("queue_capacity", 1 << 16),
    ("g2_capacity", 1 << 16),
    ("workers_per_device", 64),
    ("cpu_workers", 1024),
    ("g2_threads", 1024),
    ("key_multiples", 16),
];

impl Config {
    /// Checks the counts against [`CONFIG_MAX`]: an error names the field, its value and the
    /// most it may be.
    pub fn check(&self) -> Result<(), ProveError> {
        let values = [
            self.queue_capacity,
            self.g2_capacity,
            self.workers_per_device,
            self.cpu_workers,
            self.g2_threads,
            self.key_multiples,
        ];
        for ((field, max), value) in CONFIG_MAX.into_iter().zip(values) {
            if value > max {
                return Err(ProveError::Config { field, value, max });
            }
        }
        Ok(())
    }
}

/// The randomness of a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Randomness {
    /// Fresh r and s from the thread's RNG. Default.
    #[default]
    Random,
    /// Given r and s: the same inputs give the same proof, on any backend.
    Fixed { r: Scalar, s: Scalar },
}

type Reply = Sender<Result<(Proof, JobReport), ProveError>>;

struct Job {
    id: u64,
    /// The job must start by then, and its waits for memory end by then.
    deadline: Option<Instant>,
    /// Set when the caller no longer wants the proof: the job is dropped unrun.
    cancelled: Arc<AtomicBool>,
    key: Arc<ProvingKey>,
    witness: Witness,
    r: Scalar,
    s: Scalar,
    reply: Reply,
}

struct G1Done {
    id: u64,
    key: Arc<ProvingKey>,
    /// The assignment, for B2 on the CPU (none once B2 ran on the GPU).
    z: Option<Assignment>,
    g1: G1Parts,
    b2: Option<G2Projective>,
    /// The public inputs without the constant one, for the proof's check.
    inputs: Vec<Scalar>,
    report: JobReport,
    r: Scalar,
    s: Scalar,
    reply: Reply,
}

/// How long a submit may wait for room in the queue, and the job's deadline.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    queue_wait: Option<Duration>,
    deadline: Option<Instant>,
}

/// A submitted job: wait for its proof. Dropping the handle cancels the job if it has not
/// started.
#[derive(Debug)]
pub struct JobHandle {
    id: u64,
    rx: Receiver<Result<(Proof, JobReport), ProveError>>,
    cancelled: Arc<AtomicBool>,
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

enum WorkerKind {
    Cpu,
    Gpu(Box<GpuWorker>),
}

/// The proving engine. Dropping it shuts it down (finishing the accepted jobs).
pub struct Engine {
    /// The job queue's sender (None once shut down), shared with the workers, which put back
    /// the jobs a quarantined device can no longer run while another device can.
    jobs: Arc<Mutex<Option<Sender<Job>>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stats: Arc<Counters>,
    devices: Vec<Arc<DeviceShared>>,
    next_id: AtomicU64,
    stop_sampler: Arc<AtomicBool>,
    description: String,
    pin_key: bool,
    /// The pool [`Engine::lend_evaluations`] lends from, and a lock so that lenders take
    /// their three buffers one at a time (two lenders holding part of a set each could
    /// otherwise wait for each other).
    witness_pool: Option<(PinnedPool, Mutex<()>)>,
    /// Keys that could not be page-locked (proved from pageable memory).
    unpinnable: Mutex<std::collections::HashSet<u64>>,
    /// Set by [`Engine::shutdown_now`]: queued jobs are dropped unrun.
    abandon: Arc<AtomicBool>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.description)
            .finish()
    }
}

fn start_devices(cfg: &Config) -> Result<Vec<Arc<DeviceShared>>, ProveError> {
    let ordinals = match &cfg.devices {
        Some(d) => d.clone(),
        None => (0..zkpipe_cuda::device_count().map_err(|e| ProveError::device(0, e))?).collect(),
    };
    for (i, &o) in ordinals.iter().enumerate() {
        if ordinals[..i].contains(&o) {
            let e = zkpipe_cuda::Error::DeviceListedTwice {
                ordinal: o,
                first: o.to_string(),
                second: o.to_string(),
            };
            return Err(ProveError::device(o, e));
        }
    }
    ordinals
        .into_iter()
        .map(|o| {
            let ctx = zkpipe_cuda::Context::new(o).map_err(|e| ProveError::device(o, e))?;
            let setup = DeviceSetup {
                margin: cfg.vram_margin,
                cap: cfg.vram_cap,
                g2_on_gpu: cfg.g2 == G2Placement::Gpu,
                keep_resident: cfg.keep_key_resident,
                key_multiples: cfg.key_multiples.max(1) as u32,
                pinned_bytes: cfg.pinned_per_device,
                workers: cfg.workers_per_device.max(1),
            };
            DeviceShared::new(ctx, setup)
                .map(Arc::new)
                .map_err(|e| ProveError::device(o, e))
        })
        .collect()
}

impl Engine {
    /// Starts the workers (after checking `cfg`: [`Config::check`]).
    pub fn start(cfg: Config) -> Result<Self, ProveError> {
        cfg.check()?;
        let devices = match cfg.backend {
            Backend::Cpu => Vec::new(),
            Backend::Gpu => {
                let d = start_devices(&cfg)?;
                if d.is_empty() {
                    return Err(ProveError::device(0, "no CUDA device found"));
                }
                d
            }
            Backend::Auto => match start_devices(&cfg) {
                Ok(d) if !d.is_empty() => d,
                Ok(_) => {
                    tracing::info!("no CUDA device: every stage runs on the CPU");
                    Vec::new()
                }
                Err(e) => {
                    tracing::info!(reason = %e, "no usable CUDA device: every stage runs on the CPU");
                    Vec::new()
                }
            },
        };
        let stats = Arc::new(Counters::default());
        let (jobs_tx, jobs_rx) = bounded::<Job>(cfg.queue_capacity.max(1));
        let (g1_tx, g1_rx) = bounded::<G1Done>(cfg.g2_capacity.max(1));
        let mut threads = Vec::new();
        let mut kinds = Vec::new();
        let devices = match gpu_workers(&devices, cfg.workers_per_device) {
            Ok(workers) => {
                kinds = workers;
                devices
            }
            Err(e) if cfg.backend == Backend::Auto => {
                tracing::warn!(reason = %e, "the GPU workers could not start (no usable kernel image?): every stage runs on the CPU");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        if devices.is_empty() {
            for _ in 0..cfg.cpu_workers.max(1) {
                kinds.push(WorkerKind::Cpu);
            }
        }
        let description = if devices.is_empty() {
            format!("cpu ({} workers)", kinds.len())
        } else {
            format!(
                "cuda {:?} ({} workers per device, G2 on the {})",
                devices.iter().map(|d| d.ctx.ordinal()).collect::<Vec<_>>(),
                cfg.workers_per_device.max(1),
                if cfg.g2 == G2Placement::Gpu {
                    "GPU"
                } else {
                    "CPU"
                }
            )
        };
        tracing::info!(backend = %description, "engine started");
        let abandon = Arc::new(AtomicBool::new(false));
        let jobs = Arc::new(Mutex::new(Some(jobs_tx)));
        for (i, kind) in kinds.into_iter().enumerate() {
            let (rx, tx, st) = (jobs_rx.clone(), g1_tx.clone(), Arc::clone(&stats));
            let on_failure = cfg.on_device_failure;
            let abandon = Arc::clone(&abandon);
            let w = Worker {
                kind,
                on_failure,
                abandon,
                devices: devices.clone(),
                requeue: Arc::clone(&jobs),
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("zkpipe-worker-{i}"))
                    .spawn(move || worker(w, rx, tx, st))
                    .map_err(|e| ProveError::device(0, e))?,
            );
        }
        drop(g1_tx);
        for i in 0..cfg.g2_threads.max(1) {
            let (rx, st, check) = (g1_rx.clone(), Arc::clone(&stats), cfg.proof_check);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("zkpipe-g2-{i}"))
                    .spawn(move || g2_stage(rx, st, check))
                    .map_err(|e| ProveError::device(0, e))?,
            );
        }
        let witness_pool = devices
            .first()
            .filter(|_| cfg.pinned_witness > 0)
            .map(|d| (PinnedPool::new(&d.ctx, cfg.pinned_witness), Mutex::new(())));
        let stop_sampler = Arc::new(AtomicBool::new(false));
        for dev in &devices {
            let (dev, st, stop) = (
                Arc::clone(dev),
                Arc::clone(&stats),
                Arc::clone(&stop_sampler),
            );
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    dev.sample(&st);
                    std::thread::sleep(Duration::from_millis(2));
                }
            }));
        }
        Ok(Self {
            jobs,
            threads: Mutex::new(threads),
            stats,
            devices,
            next_id: AtomicU64::new(1),
            stop_sampler,
            description,
            pin_key: cfg.pin_key,
            witness_pool,
            unpinnable: Mutex::new(std::collections::HashSet::new()),
            abandon,
        })
    }

    /// What the engine runs on, for logs.
    pub fn backend(&self) -> &str {
        &self.description
    }

    /// True when the stages run on GPUs.
    pub fn on_gpu(&self) -> bool {
        !self.devices.is_empty()
    }

    /// Page-locks `key`'s points in host memory (on a GPU engine with `pin_key`; once per
    /// key). [`Engine::submit`] does this for a key's first job; call it earlier to keep the
    /// cost (about 60 ms per GiB) out of the first job's latency. A key that cannot be locked
    /// is an error naming why; the engine can still prove with it (`pin_key: false`).
    pub fn load_key(&self, key: &ProvingKey) -> Result<(), ProveError> {
        let Some(dev) = self.devices.first() else {
            return Ok(());
        };
        if !self.pin_key || key.is_pinned() {
            return Ok(());
        }
        let t = Instant::now();
        let bytes = key.pin(&dev.ctx)?;
        if bytes > 0 {
            self.stats
                .key_pinned_bytes
                .fetch_add(bytes as u64, Ordering::Relaxed);
            tracing::info!(
                key = key.id(),
                bytes,
                ms = t.elapsed().as_secs_f64() * 1e3,
                "proving key page-locked in host memory"
            );
        }
        Ok(())
    }

    /// Page-locks `key` for its first job; a key that cannot be locked is proved from
    /// pageable memory (slower uploads), with a warning, once per key.
    fn pin_or_warn(&self, key: &ProvingKey) {
        let mut unpinnable = self.unpinnable.lock().unwrap_or_else(|p| p.into_inner());
        if unpinnable.contains(&key.id()) {
            return;
        }
        if let Err(e) = self.load_key(key) {
            tracing::warn!(key = key.id(), error = %e, "the proving key could not be page-locked: its points are uploaded from pageable memory, more slowly");
            unpinnable.insert(key.id());
        }
    }

    /// Page-locked room for one witness's a, b and c (the key's domain size each), lent from
    /// the engine's pool ([`Config::pinned_witness`]): synthesis writes into it
    /// ([`Scalars::push`], [`crate::PinnedScalars::extend_from_slice`]), the engine
    /// uploads it by DMA with no staging copy, and it goes back to the pool once uploaded.
    /// Waits up to `timeout` while the pool's memory is lent. An engine without GPUs lends
    /// plain vectors (there is nothing to page-lock for); a GPU engine with no pool is an error.
    pub fn lend_evaluations(
        &self,
        key: &ProvingKey,
        timeout: Duration,
    ) -> Result<[Scalars; 3], ProveError> {
        let [a, b, c, _] = self.lend(key, timeout, 3)?;
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
        let [a, b, c, aux] = self.lend(key, timeout, 4)?;
        Ok(LentWitness { a, b, c, aux })
    }

    /// The first `count` of a, b, c and aux, lent together; the rest empty.
    fn lend(
        &self,
        key: &ProvingKey,
        timeout: Duration,
        count: usize,
    ) -> Result<[Scalars; 4], ProveError> {
        let (n, aux) = (key.domain_size(), key.num_aux());
        let rooms = [(n, Room::Evaluations); 3]
            .into_iter()
            .chain([(aux, Room::Aux)]);
        let Some((pool, one_at_a_time)) = &self.witness_pool else {
            if self.devices.is_empty() {
                let mut out = std::array::from_fn(|_| Scalars::default());
                for (slot, (len, _)) in out.iter_mut().zip(rooms).take(count) {
                    *slot = Vec::with_capacity(len).into();
                }
                return Ok(out);
            }
            return Err(ProveError::NoWitnessPool);
        };
        let _turn = one_at_a_time.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = std::array::from_fn(|_| Scalars::default());
        for (slot, (len, room)) in out.iter_mut().zip(rooms).take(count) {
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
        self.submit_within(key, witness, randomness, Limits::default())
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
        };
        let t = Instant::now();
        let sent = match limits.queue_wait {
            None => tx.send(job).map_err(|e| (ProveError::ShutDown, e.0)),
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

    /// The devices the engine stopped using after a fault that left them unusable (a
    /// sticky error: every later call on the context fails), and why.
    pub fn quarantined(&self) -> Vec<Quarantine> {
        self.devices
            .iter()
            .filter_map(|d| {
                d.quarantined().map(|reason| Quarantine {
                    device: d.ctx.ordinal(),
                    reason,
                })
            })
            .collect()
    }

    /// The engine's figures in the Prometheus text format (for a `/metrics` endpoint): jobs
    /// by state (`zkpipe_jobs_total`), the queue's depth, a histogram of each stage's device
    /// milliseconds (`zkpipe_stage_device_ms`), upload bytes and GB/s, VRAM budget and
    /// pinned memory in use and at their high-water marks, quarantined devices.
    pub fn metrics(&self) -> String {
        let st = self.stats();
        let taken = self.stats.taken.load(Ordering::Relaxed);
        let queued = st.submitted.saturating_sub(taken);
        crate::metrics::render(&st, queued, &self.stats.stages)
    }

    /// Counters so far.
    pub fn stats(&self) -> EngineStats {
        let budget = self
            .devices
            .iter()
            .map(|d| d.budget.stats().high_water)
            .sum();
        let lent = self
            .witness_pool
            .as_ref()
            .map_or(0, |(p, _)| p.stats().high_water);
        let pinned = self
            .devices
            .iter()
            .map(|d| d.pinned.stats().high_water)
            .sum::<usize>()
            + lent;
        let mut st = self.stats.snapshot(budget);
        st.pinned_high_water = pinned;
        st.quarantined_devices = self.quarantined().len();
        st.vram_budget_in_use = self.devices.iter().map(|d| d.budget.stats().in_use).sum();
        st.vram_kept = self.devices.iter().map(|d| d.kept_bytes()).sum();
        st.pinned_in_use = self
            .devices
            .iter()
            .map(|d| d.pinned.stats().bytes_in_use)
            .sum::<usize>()
            + self
                .witness_pool
                .as_ref()
                .map_or(0, |(p, _)| p.stats().bytes_in_use);
        st
    }

    /// Stops accepting jobs, cancels every queued one (their waits give
    /// [`ProveError::Cancelled`]), finishes the running ones, and stops the threads.
    pub fn shutdown_now(&self) -> EngineStats {
        self.abandon.store(true, Ordering::SeqCst);
        self.shutdown()
    }

    /// Stops accepting jobs, finishes every accepted one, and stops the threads.
    pub fn shutdown(&self) -> EngineStats {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        let (samplers, stages): (Vec<_>, Vec<_>) = threads
            .into_iter()
            .partition(|t| t.thread().name().is_none());
        for t in stages {
            let _ = t.join();
        }
        self.stop_sampler.store(true, Ordering::Relaxed);
        for t in samplers {
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A worker thread's setup.
struct Worker {
    kind: WorkerKind,
    on_failure: OnDeviceFailure,
    /// The engine's [`Engine::shutdown_now`] flag.
    abandon: Arc<AtomicBool>,
    /// Every device of the engine (this worker's among them).
    devices: Vec<Arc<DeviceShared>>,
    /// The job queue, for jobs this worker hands back.
    requeue: Arc<Mutex<Option<Sender<Job>>>>,
}

/// What a worker does with a job it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Run it here (a CPU worker, or a usable device).
    Here,
    /// Put it back in the queue and stop: this device is quarantined and another is usable.
    Elsewhere,
    /// Its device is quarantined and no other is usable: the engine's policy decides.
    Policy,
}

/// Where a job goes: `own` is this worker's device quarantined (None for a CPU worker),
/// `usable` how many of the engine's devices are not.
fn placement(own_quarantined: Option<bool>, usable: usize) -> Placement {
    match own_quarantined {
        None | Some(false) => Placement::Here,
        Some(true) if usable > 0 => Placement::Elsewhere,
        Some(true) => Placement::Policy,
    }
}

/// Puts `job` back in the queue; gives it back when the engine no longer takes jobs.
fn put_back<T>(queue: &Mutex<Option<Sender<T>>>, job: T) -> Result<(), T> {
    let tx = queue.lock().unwrap_or_else(|p| p.into_inner()).clone();
    match tx {
        Some(tx) => tx.send(job).map_err(|e| e.0),
        None => Err(job),
    }
}

fn worker(w: Worker, jobs: Receiver<Job>, out: Sender<G1Done>, stats: Arc<Counters>) {
    let Worker {
        kind,
        on_failure,
        abandon,
        devices,
        requeue,
    } = w;
    for job in jobs {
        let own = match &kind {
            WorkerKind::Cpu => None,
            WorkerKind::Gpu(w) => Some(w.dev.quarantined().is_some()),
        };
        let usable = devices.iter().filter(|d| d.quarantined().is_none()).count();
        let job = match placement(own, usable) {
            Placement::Here | Placement::Policy => job,
            Placement::Elsewhere => match put_back(&requeue, job) {
                Ok(()) => {
                    // Its device is quarantined: the other devices' workers take the queue.
                    stats.moved.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        usable,
                        "a worker of a quarantined device stops; its job goes to another device"
                    );
                    break;
                }
                Err(job) => job,
            },
        };
        stats.taken.fetch_add(1, Ordering::Relaxed);
        if job.cancelled.load(Ordering::SeqCst) || abandon.load(Ordering::SeqCst) {
            stats.cancelled.fetch_add(1, Ordering::Relaxed);
            let _ = job.reply.send(Err(ProveError::Cancelled { job: job.id }));
            continue;
        }
        if job.deadline.is_some_and(|d| Instant::now() >= d) {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            let what = "before it started";
            let _ = job.reply.send(Err(ProveError::DeadlineExceeded { what }));
            continue;
        }
        let Job {
            id,
            deadline,
            cancelled,
            key,
            mut witness,
            r,
            s,
            reply,
        } = job;
        let span = tracing::info_span!(
            "g1",
            job = id,
            n = key.domain_size(),
            upload_bytes = tracing::field::Empty,
            h_gpu_ms = tracing::field::Empty,
            msm_gpu_ms = tracing::field::Empty,
        );
        let _e = span.enter();
        let inputs = witness.input.get(1..).unwrap_or_default().to_vec();
        let run = catch_unwind(AssertUnwindSafe(|| -> Result<Ran, ProveError> {
            let WorkerKind::Gpu(w) = &kind else {
                let (abc, z) = take_parts(&mut witness);
                return cpu_g1(id, &key, abc, z, &stats).map(Ran::Done);
            };
            match (w.dev.quarantined(), on_failure) {
                (None, _) => {
                    let job = JobRef {
                        id,
                        key: &key,
                        deadline,
                    };
                    match keeps_witness(devices.len(), on_failure) {
                        true => gpu_g1_kept(w, &job, &mut witness, &devices, on_failure, &stats),
                        false => {
                            let (abc, z) = take_parts(&mut witness);
                            let run = w.g1_stage(&job, StageWitness::Given(abc, z), &stats);
                            if run.is_err() {
                                w.dev.quarantine_if_unusable();
                            }
                            run.map(Ran::Done)
                        }
                    }
                }
                (Some(_), OnDeviceFailure::Cpu) => {
                    let (abc, z) = take_parts(&mut witness);
                    cpu_g1(id, &key, abc, z, &stats).map(Ran::Done)
                }
                (Some(reason), OnDeviceFailure::Fail) => Err(ProveError::DeviceQuarantined {
                    device: w.dev.ctx.ordinal(),
                    reason,
                }),
            }
        }));
        let result = run.unwrap_or_else(|p| {
            Err(ProveError::Lost {
                job: id,
                reason: format!("worker panicked: {}", panic_text(&p)),
            })
        });
        match result {
            Ok(Ran::Done((z, g1, b2, report))) => {
                let done = G1Done {
                    id,
                    key,
                    z,
                    g1,
                    b2,
                    inputs,
                    report,
                    r,
                    s,
                    reply,
                };
                if let Err(e) = out.send(done) {
                    let _ = e.0.reply.send(Err(ProveError::Lost {
                        job: id,
                        reason: "the G2 stage stopped".into(),
                    }));
                }
            }
            Ok(Ran::Elsewhere) => {
                let job = Job {
                    id,
                    deadline,
                    cancelled,
                    key,
                    witness,
                    r,
                    s,
                    reply,
                };
                match put_back(&requeue, job) {
                    Ok(()) => {
                        // Taken again by another device's worker; this one's device is gone.
                        stats.taken.fetch_sub(1, Ordering::Relaxed);
                        stats.moved.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Err(job) => {
                        let e = ProveError::Lost {
                            job: id,
                            reason: "its device was quarantined and the engine is shutting down"
                                .into(),
                        };
                        stats.failed.fetch_add(1, Ordering::Relaxed);
                        let _ = job.reply.send(Err(e));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(job = id, error = %e, "job failed");
                stats.failed.fetch_add(1, Ordering::Relaxed);
                let _ = reply.send(Err(e));
            }
        }
    }
}

/// What a worker's G1 stage came to (one a job, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Ran {
    /// The stage ran (here, or on the CPU).
    Done(G1Result),
    /// The device failed the job and was quarantined; the witness is whole again and the job
    /// goes back to the queue for another device.
    Elsewhere,
}

/// a, b, c and the assignment, moved out of a witness.
fn take_parts(w: &mut Witness) -> ([Scalars; 3], Assignment) {
    let z = Assignment::take(w);
    let abc = [
        std::mem::take(&mut w.a),
        std::mem::take(&mut w.b),
        std::mem::take(&mut w.c),
    ];
    (abc, z)
}

/// Whether a GPU worker keeps each job's witness until the job is done, so that a job whose
/// device fails runs again elsewhere: on another device when the engine has several, or on
/// the CPU when that is the policy. A single device that fails its jobs gives each vector back
/// to the pool as soon as it is uploaded instead.
fn keeps_witness(devices: usize, on_failure: OnDeviceFailure) -> bool {
    devices > 1 || on_failure == OnDeviceFailure::Cpu
}

/// The G1 stage on a device, the witness kept: when the job fails and the device is then
/// quarantined, it runs again on another device (the witness restored, [`Ran::Elsewhere`]) or
/// on the CPU (the policy [`OnDeviceFailure::Cpu`]). Any other failure is the job's.
fn gpu_g1_kept(
    w: &GpuWorker,
    job: &JobRef<'_>,
    witness: &mut Witness,
    devices: &[Arc<DeviceShared>],
    on_failure: OnDeviceFailure,
    stats: &Counters,
) -> Result<Ran, ProveError> {
    let (mut abc, z) = take_parts(witness);
    let error = match w.g1_stage(job, StageWitness::Kept(&mut abc, &z), stats) {
        Ok((_, g1, b2, report)) => {
            return Ok(Ran::Done((b2.is_none().then_some(z), g1, b2, report)))
        }
        Err(e) => e,
    };
    w.dev.quarantine_if_unusable();
    if w.dev.quarantined().is_none() {
        return Err(error);
    }
    let device = w.dev.ctx.ordinal();
    if devices.iter().any(|d| d.quarantined().is_none()) {
        tracing::warn!(job = job.id, device, error = %error, "the job's device was quarantined: the job goes to another device");
        z.restore(witness);
        [witness.a, witness.b, witness.c] = abc;
        return Ok(Ran::Elsewhere);
    }
    match on_failure {
        OnDeviceFailure::Cpu => {
            tracing::warn!(job = job.id, device, error = %error, "the job's device was quarantined: the job runs again on the CPU");
            cpu_g1(job.id, job.key, abc, z, stats).map(Ran::Done)
        }
        OnDeviceFailure::Fail => Err(error),
    }
}

/// `per_device` GPU workers on each device (loading the kernels).
fn gpu_workers(
    devices: &[Arc<DeviceShared>],
    per_device: usize,
) -> Result<Vec<WorkerKind>, ProveError> {
    let mut kinds = Vec::new();
    for dev in devices {
        for _ in 0..per_device.max(1) {
            kinds.push(WorkerKind::Gpu(Box::new(GpuWorker::new(Arc::clone(dev))?)));
        }
    }
    Ok(kinds)
}

/// What a worker's G1 stage gives: the assignment when the CPU sums B2 from it, G1's parts, B2
/// when it ran on the GPU, and the job's report.
pub(crate) type G1Result = (Option<Assignment>, G1Parts, Option<G2Projective>, JobReport);

/// The G1 stage of job `id` on the CPU.
fn cpu_g1(
    id: u64,
    key: &ProvingKey,
    [a, b, c]: [Scalars; 3],
    z: Assignment,
    stats: &Counters,
) -> Result<G1Result, ProveError> {
    let t = Instant::now();
    let [a, b, c] = [a.into_vec(), b.into_vec(), c.into_vec()];
    let h = prover::h_coefficients(&CpuNtt::new(), key.domain_size(), a, b, c)?;
    Counters::add(&stats.h_ns, t.elapsed());
    let t = Instant::now();
    let g1 = prover::g1_msms(&CpuMsm::new(), key, &h, &z)?;
    Counters::add(&stats.g1_ns, t.elapsed());
    let report = JobReport {
        job: id,
        ..JobReport::default()
    };
    Ok((Some(z), g1, None, report))
}

fn g2_stage(rx: Receiver<G1Done>, stats: Arc<Counters>, check: ProofCheck) {
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
        let _ = d.reply.send(result);
    }
}

/// A job's last steps: B2 on the CPU when the GPU did not sum it, the proof assembled, and
/// the proof checked against the key and the job's public inputs before it goes out.
fn finish(
    d: &G1Done,
    stats: &Counters,
    check: ProofCheck,
) -> Result<(Proof, JobReport), ProveError> {
    let mut report = d.report.clone();
    let b2 = match (d.b2, &d.z) {
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
    let g1 = &crate::inject::after_msms(&d.g1);
    #[cfg(not(feature = "fault-injection"))]
    let g1 = &d.g1;
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

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarantined_device_hands_its_jobs_to_a_usable_one() {
        // CPU workers and usable devices run what they take.
        assert_eq!(placement(None, 0), Placement::Here);
        assert_eq!(placement(Some(false), 2), Placement::Here);
        // A quarantined device's worker puts the job back while another device is usable.
        assert_eq!(placement(Some(true), 1), Placement::Elsewhere);
        // None left: the engine's policy (fail, or the CPU) decides.
        assert_eq!(placement(Some(true), 0), Placement::Policy);
    }

    #[test]
    fn a_job_put_back_after_shutdown_comes_back() {
        let (tx, rx) = bounded::<u64>(1);
        let queue = Mutex::new(Some(tx));
        assert_eq!(put_back(&queue, 7), Ok(()));
        assert_eq!(rx.recv().unwrap(), 7);
        // Shut down: the engine's sender is gone, and the job comes back to its worker.
        queue.lock().unwrap().take();
        assert_eq!(put_back(&queue, 8), Err(8));
    }
}
