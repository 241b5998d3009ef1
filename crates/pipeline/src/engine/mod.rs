//! The engine: jobs in, proofs out, through bounded channels between stages.
//!
//! ```text
//! submit ─► [jobs] ─► worker (per device × workers_per_device, or CPU workers), each
//!                     driving one G1 backend (crate::g1): the H step and the G1 MSMs
//!                     (and B2 if G2 is on the GPU)
//!           ─► [g1 done] ─► G2 stage (B2 on the CPU, overlapping the next job's GPU work),
//!                           assembly and the proof's check ─► JobHandle
//! ```
//! Channel capacities are the backpressure: `submit` blocks while the job queue is full.
//! The job queue has two lanes ([`queue`]): a worker takes urgent jobs before routine ones.
//! [`job`] holds the job and its handle, [`submit`] how jobs and lent witness memory come in,
//! [`worker`] the worker loop, [`finish`] the G2 stage.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::bounded;
use zkpipe_pinned::PinnedPool;

mod finish;
mod job;
mod queue;
mod submit;
mod worker;

pub use job::{JobHandle, Randomness, Refused};
pub use queue::Lane;

use finish::G1Done;
use job::Job;
use queue::Queue;
use worker::Worker;

use crate::config::{Backend, Config, G2Placement};
use crate::device::{start_devices, DeviceShared};
use crate::g1::{CpuBackend, G1Backend, GpuBackend};
use crate::stats::Counters;
use crate::{EngineStats, ProveError, ProvingKey};

/// A device the engine stopped using, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    /// The device's ordinal.
    pub device: usize,
    /// The fault that made it unusable.
    pub reason: String,
}
/// The proving engine. Dropping it shuts it down (finishing the accepted jobs).
pub struct Engine {
    /// The job queue's sending side (None once shut down), shared with the workers, which put
    /// back the jobs a quarantined device can no longer run while another device can.
    jobs: Arc<Mutex<Option<Queue<Job>>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stats: Arc<Counters>,
    devices: Vec<Arc<DeviceShared>>,
    next_id: AtomicU64,
    stop_sampler: Arc<AtomicBool>,
    description: String,
    /// Jobs the engine runs at once: its GPU workers, or its CPU workers.
    workers: usize,
    pin_key: bool,
    /// The pool [`Engine::lend_evaluations`] lends from, and a lock so that lenders take
    /// their three buffers one at a time (two lenders holding part of a set each could
    /// otherwise wait for each other).
    witness_pool: Option<WitnessPool>,
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

impl Engine {
    /// Starts the workers (after checking `cfg`: [`Config::check`]).
    pub fn start(cfg: Config) -> Result<Self, ProveError> {
        cfg.check()?;
        let Backends { devices, workers } = backends(&cfg)?;
        let description = describe(&cfg, &devices, workers.len());
        let worker_count = workers.len();
        tracing::info!(backend = %description, "engine started");
        let stats = Arc::new(Counters::default());
        let (jobs_tx, jobs_rx) = queue::queue::<Job>(cfg.queue_capacity);
        let (g1_tx, g1_rx) = bounded::<G1Done>(cfg.g2_capacity.max(1));
        let abandon = Arc::new(AtomicBool::new(false));
        let jobs = Arc::new(Mutex::new(Some(jobs_tx)));
        let mut threads = Vec::new();
        for (i, backend) in workers.into_iter().enumerate() {
            let w = Worker {
                backend,
                abandon: Arc::clone(&abandon),
                devices: devices.clone(),
                requeue: Arc::clone(&jobs),
            };
            let (rx, tx, st) = (jobs_rx.clone(), g1_tx.clone(), Arc::clone(&stats));
            threads.push(spawn(format!("zkpipe-worker-{i}"), move || {
                worker::run(w, rx, tx, st)
            })?);
        }
        drop(g1_tx);
        for i in 0..cfg.g2_threads.max(1) {
            let (rx, st, check) = (g1_rx.clone(), Arc::clone(&stats), cfg.proof_check);
            threads.push(spawn(format!("zkpipe-g2-{i}"), move || {
                finish::g2_stage(rx, st, check)
            })?);
        }
        let witness_pool =
            devices
                .first()
                .filter(|_| cfg.pinned_witness > 0)
                .map(|d| WitnessPool {
                    pool: PinnedPool::new(&d.ctx, cfg.pinned_witness),
                    one_at_a_time: Mutex::new(()),
                });
        let stop_sampler = Arc::new(AtomicBool::new(false));
        for dev in &devices {
            threads.push(sampler(dev, &stats, &stop_sampler));
        }
        Ok(Self {
            jobs,
            threads: Mutex::new(threads),
            stats,
            devices,
            next_id: AtomicU64::new(1),
            stop_sampler,
            description,
            workers: worker_count,
            pin_key: cfg.pin_key,
            witness_pool,
            unpinnable: Mutex::new(std::collections::HashSet::new()),
            abandon,
        })
    }

    /// Jobs the engine runs at once (its workers): a scheduler that keeps no more than this
    /// on the engine keeps its queue empty.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// What the engine runs on, for logs.
    pub fn backend(&self) -> &str {
        &self.description
    }

    /// True when the stages run on GPUs.
    pub fn on_gpu(&self) -> bool {
        !self.devices.is_empty()
    }

    /// Frees the device copies of the key `key_id` ([`ProvingKey::id`]) that no job is
    /// using (a device keeps the keys of recent jobs resident while they leave later jobs
    /// the plans they would have without them); gives the device bytes freed. For a daemon
    /// that evicts a key: its host memory goes with the last reference.
    pub fn release_key(&self, key_id: u64) -> usize {
        self.devices
            .iter()
            .map(|dev| dev.residents.lock().release_key(key_id))
            .sum()
    }

    /// Frees the device copies of the recording of content `digest`
    /// ([`zkpipe_r1cs::Recording::digest`]) that no job is using; gives the device bytes freed.
    pub fn release_recording(&self, digest: zkpipe_r1cs::Digest) -> usize {
        self.devices
            .iter()
            .map(|dev| dev.residents.lock().release_recording(digest))
            .sum()
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
    pub(super) fn pin_or_warn(&self, key: &ProvingKey) {
        let mut unpinnable = self.unpinnable.lock().unwrap_or_else(|p| p.into_inner());
        if unpinnable.contains(&key.id()) {
            return;
        }
        if let Err(e) = self.load_key(key) {
            tracing::warn!(key = key.id(), error = %e, "the proving key could not be page-locked: its points are uploaded from pageable memory, more slowly");
            unpinnable.insert(key.id());
        }
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
            .map_or(0, |w| w.pool.stats().high_water);
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
                .map_or(0, |w| w.pool.stats().bytes_in_use);
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

/// The pinned pool [`Engine::lend_evaluations`] lends from, and a lock so that lenders take
/// their buffers one set at a time (two lenders holding part of a set each could otherwise
/// wait for each other).
struct WitnessPool {
    pool: PinnedPool,
    one_at_a_time: Mutex<()>,
}

/// The devices the engine runs on (none on the CPU) and a G1 backend per worker.
struct Backends {
    devices: Vec<Arc<DeviceShared>>,
    workers: Vec<Box<dyn G1Backend>>,
}

/// The devices and workers `cfg` asks for: `workers_per_device` GPU backends on each device,
/// or `cpu_workers` CPU backends when there is none (`Backend::Auto` falls back to the CPU
/// with a log line saying why).
fn backends(cfg: &Config) -> Result<Backends, ProveError> {
    let devices = match cfg.backend {
        Backend::Cpu => Vec::new(),
        Backend::Gpu => {
            let d = start_devices(cfg)?;
            if d.is_empty() {
                return Err(ProveError::NoDevice);
            }
            d
        }
        Backend::Auto => match start_devices(cfg) {
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
    let gpu = GpuBackend::on_devices(&devices, cfg.workers_per_device, cfg.on_device_failure);
    match gpu {
        Ok(workers) if !workers.is_empty() => return Ok(Backends { devices, workers }),
        Ok(_) => {}
        Err(e) if cfg.backend == Backend::Auto => {
            tracing::warn!(reason = %e, "the GPU workers could not start (no usable kernel image?): every stage runs on the CPU");
        }
        Err(e) => return Err(e),
    }
    let workers = (0..cfg.cpu_workers.max(1))
        .map(|_| Box::new(CpuBackend) as Box<dyn G1Backend>)
        .collect();
    Ok(Backends {
        devices: Vec::new(),
        workers,
    })
}

/// What the engine runs on, for logs.
fn describe(cfg: &Config, devices: &[Arc<DeviceShared>], workers: usize) -> String {
    if devices.is_empty() {
        return format!("cpu ({workers} workers)");
    }
    format!(
        "cuda {:?} ({} workers per device, G2 on the {})",
        devices.iter().map(|d| d.ctx.ordinal()).collect::<Vec<_>>(),
        cfg.workers_per_device.max(1),
        match cfg.g2 {
            G2Placement::Gpu => "GPU",
            G2Placement::Cpu => "CPU",
        }
    )
}

/// A named engine thread.
fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, ProveError> {
    std::thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|source| ProveError::Thread { source })
}

/// A thread sampling `dev`'s memory in use (for the high-water mark) until `stop`.
fn sampler(
    dev: &Arc<DeviceShared>,
    stats: &Arc<Counters>,
    stop: &Arc<AtomicBool>,
) -> JoinHandle<()> {
    let (dev, st, stop) = (Arc::clone(dev), Arc::clone(stats), Arc::clone(stop));
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            dev.sample(&st);
            std::thread::sleep(Duration::from_millis(2));
        }
    })
}
