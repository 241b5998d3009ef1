//! The G1 stage on a CUDA device, in four steps that read like the prover: admission (a plan
//! and a VRAM grant for it), staging outside the GPU lock (a, b, c and the split witness to the
//! device), the H step, and the MSMs, enqueued back to back and waited for once, their sums
//! combined after the lock is let go.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blstrs::{G1Affine, Scalar};
use bytemuck::Pod;
use rayon::prelude::*;
use zkpipe_cuda::{Context, DeviceBuffer, Stream};
use zkpipe_field::{cast, Fr};
use zkpipe_msm::{
    Bases, CudaMsm, DeviceBases, DeviceQuery, DeviceSplit, Multiples, SplitQuery, SplitScalars, G1,
    G2,
};
use zkpipe_ntt::{CudaNtt, HStepBuffers};
use zkpipe_pinned::{PinnableVec, PinnedPool, PooledBuffer};
use zkpipe_stream::{
    copy_scope, download, upload, GpuLock, InFlight, Pinned, VramBudget, VramGrant,
};

mod msms;
mod reclaim;

use msms::Batches;
use reclaim::{Active, Reclaim, ReclaimError};

use crate::clock::StageClock;
use crate::engine::G1Result;
use crate::plan::{choose, DeviceLoad, HStep, JobPlan, JobShape};
use crate::prover::{padded, Assignment, G1Query, WitnessQuery};
use crate::stats::{Counters, JobReport};
use crate::{ProveError, ProvingKey, Scalars};

const FR: usize = 32;
/// Scalars per staging copy (64 MiB): the memcpy of one overlaps the DMA of the previous.
const STAGE_CHUNK: usize = 1 << 21;
/// How long a staging copy waits for pinned memory from the pool.
const POOL_WAIT: Duration = Duration::from_secs(60);

/// A key's points on one device, uploaded once and reused by every job of that key.
#[derive(Debug)]
pub(crate) struct ResidentKey {
    /// h's points and one identity (h_step leaves n coefficients; the last meets the identity).
    h: DeviceBases<G1>,
    l: DeviceBases<G1>,
    a: DeviceBases<G1>,
    b_g1: DeviceBases<G1>,
    b_g2: Option<DeviceBases<G2>>,
    grant: VramGrant,
}

impl ResidentKey {
    fn g1(&self, q: G1Query) -> &DeviceBases<G1> {
        match q {
            G1Query::L => &self.l,
            G1Query::A => &self.a,
            G1Query::B1 => &self.b_g1,
        }
    }
}

/// What the workers of one device share.
#[derive(Debug)]
pub(crate) struct DeviceShared {
    pub ctx: Arc<Context>,
    pub lock: Arc<GpuLock>,
    pub budget: VramBudget,
    /// The device memory the MSM kernels are sized for (the cap, or all of it): the workers'
    /// MSMs load the same G2 bucket kernel that the margin was computed for.
    pub msm_memory: usize,
    pub pinned: PinnedPool,
    pub g2_on_gpu: bool,
    pub keep_resident: bool,
    /// Copies of multiples asked for with a resident key's H points.
    pub key_multiples: u32,
    pub workers: usize,
    baseline_used: usize,
    resident: Mutex<Option<(u64, Arc<ResidentKey>)>>,
    /// Job memory that no job uses now, kept for a next job of its shape, and the jobs
    /// running on the device.
    memory: Reclaim<Kept>,
    /// Why the device was quarantined, once it was.
    quarantine: Mutex<Option<String>>,
    /// Budget bytes of the workers' NTT tables.
    table_bytes: AtomicUsize,
}

/// How a device is set up for the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeviceSetup {
    pub margin: usize,
    pub cap: Option<usize>,
    pub g2_on_gpu: bool,
    pub keep_resident: bool,
    pub key_multiples: u32,
    pub pinned_bytes: usize,
    pub workers: usize,
}

/// Room the driver takes beside the budget's grants, on top of the local memory of the MSM
/// kernels: the context, the modules' code and constants, the streams.
const DRIVER_ROOM: usize = 512 << 20;

/// The VRAM the driver takes beside the budget's grants: the MSM kernels' local memory (which
/// it sets aside at their first launch, outside any grant) plus [`DRIVER_ROOM`].
fn driver_floor(ctx: &Arc<Context>, msm_memory: usize) -> Result<usize, zkpipe_msm::CudaError> {
    let local = zkpipe_msm::kernels::MsmKernels::for_memory(ctx, msm_memory)?.local_reservation();
    Ok(local + DRIVER_ROOM)
}

/// The budget of `ctx`'s device: its free memory less the margin, the margin never less than
/// the driver's floor ([`driver_floor`]); with a cap, no more than the cap less the same
/// margin, so that everything stays within the card the cap stands for. A cap below four
/// times the floor stands for a card too small for the kernels' local memory: it then bounds
/// the grants less the configured margin alone (a warning says so), which is what tests of
/// small plans want.
fn budget_for(
    ctx: &Arc<Context>,
    setup: &DeviceSetup,
    msm_memory: usize,
) -> Result<VramBudget, zkpipe_msm::CudaError> {
    let floor = driver_floor(ctx, msm_memory)?;
    let margin = setup.margin.max(floor);
    let cap = setup.cap.map(|c| match c >= 4 * floor {
        true => (c, margin),
        false => {
            tracing::warn!(
                cap = c,
                floor,
                margin = setup.margin,
                "VRAM cap below four times the driver's floor (the MSM kernels' local memory \
                 and the context): the cap bounds the grants less the configured margin, and \
                 the driver's memory lies outside it"
            );
            (c, setup.margin)
        }
    });
    tracing::debug!(margin = setup.margin, floor, ?cap, "VRAM margins");
    Ok(VramBudget::from_device_within(ctx, margin, cap)?)
}

impl DeviceShared {
    pub fn new(ctx: Arc<Context>, setup: DeviceSetup) -> Result<Self, zkpipe_msm::CudaError> {
        let msm_memory = setup
            .cap
            .map_or(ctx.info().total_memory, |c| c.min(ctx.info().total_memory));
        let budget = budget_for(&ctx, &setup, msm_memory)?;
        let pinned = PinnedPool::new(&ctx, setup.pinned_bytes.max(2 * STAGE_CHUNK * FR));
        let m = ctx.mem_info()?;
        Ok(Self {
            lock: GpuLock::for_device(ctx.ordinal()),
            baseline_used: m.total - m.free,
            ctx,
            budget,
            msm_memory,
            pinned,
            g2_on_gpu: setup.g2_on_gpu,
            keep_resident: setup.keep_resident,
            key_multiples: setup.key_multiples,
            workers: setup.workers.max(1),
            resident: Mutex::new(None),
            memory: Reclaim::default(),
            quarantine: Mutex::new(None),
            table_bytes: AtomicUsize::new(0),
        })
    }

    /// Budget bytes held between jobs: the resident key, the workers' NTT tables and the idle
    /// job memory they keep.
    pub fn kept_bytes(&self) -> usize {
        let resident = self
            .resident
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |(_, key)| key.grant.bytes());
        resident
            + self.table_bytes.load(Ordering::SeqCst)
            + self.memory.idle_sum(|k| k.grant.bytes())
    }

    /// Why the device is quarantined, if it is.
    pub fn quarantined(&self) -> Option<String> {
        self.quarantine
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// After a failed job: quarantines the device when its context no longer works (a
    /// sticky error: a synchronize of the whole context fails). Idle job memory goes.
    pub fn quarantine_if_unusable(&self) {
        let Err(e) = self.ctx.synchronize() else {
            return;
        };
        let mut q = self.quarantine.lock().unwrap_or_else(|p| p.into_inner());
        if q.is_none() {
            tracing::error!(device = self.ctx.ordinal(), error = %e, "device quarantined: its context no longer works");
            *q = Some(e.to_string());
        }
        drop(q);
        while self.memory.take(|_| true).is_some() {}
    }

    /// A grant of `bytes`: at once, or after freeing idle job memory (shapes other than
    /// `shape` first), or after running jobs let theirs go, by `deadline` if there is one; an
    /// error when nothing that could free them runs.
    fn acquire(
        &self,
        bytes: usize,
        shape: Option<MemoryShape>,
        deadline: Option<Instant>,
    ) -> Result<VramGrant, ProveError> {
        let keep = |k: &Kept| Some(k.shape) == shape;
        self.memory
            .acquire(&self.budget, bytes, keep, deadline)
            .map_err(|e| match e {
                ReclaimError::Deadline { .. } => ProveError::DeadlineExceeded {
                    what: "waiting for device memory",
                },
                ReclaimError::Budget(b) => ProveError::Budget(b),
                ReclaimError::Held { needed, available } => ProveError::DeviceMemoryHeld {
                    device: self.ctx.ordinal(),
                    needed,
                    available,
                },
            })
    }

    pub fn sample(&self, stats: &Counters) {
        if let Ok(m) = self.ctx.mem_info() {
            stats.peak((m.total - m.free).saturating_sub(self.baseline_used));
        }
    }
}

fn g1_bytes(n: usize) -> usize {
    n * std::mem::size_of::<G1Affine>()
}

fn g2_bytes(n: usize) -> usize {
    n * std::mem::size_of::<blstrs::G2Affine>()
}

/// A job's witness as the G1 stage gets it (one a job, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum StageWitness<'w> {
    /// Given up: a, b and c go (lent memory back to the pool) as soon as they are uploaded, and
    /// the assignment once split (unless the CPU sums B2 from it).
    Given([Scalars; 3], Assignment),
    /// Kept by the caller, unchanged whatever happens, so that the job can run elsewhere if
    /// this device fails (c may gain zeros past its end, in lent memory).
    Kept(&'w mut [Scalars; 3], &'w Assignment),
}

/// a, b and c while staging: given up or kept by the caller (one a job).
#[allow(clippy::large_enum_variant)]
enum Abc<'w> {
    Given([Scalars; 3]),
    Kept(&'w mut [Scalars; 3]),
}

/// What staging leaves besides a, b (and c) in the H step's vectors: c on the host for the
/// three-vector step, and the split witness on the device.
struct Staged<'w> {
    c: Option<HostC<'w>>,
    split: DeviceSplit,
    /// Bitmaps of L, A and B (B1 and B2 share B's).
    queries: [DeviceQuery; 3],
    bytes: u64,
}

/// c of the three-vector step, page-locked on the host, padded to n.
enum HostC<'w> {
    /// A caller's vector (or a padded copy of a kept one), page-locked in place for the job.
    Registered(PinnableVec<Scalar>),
    /// Lent pinned memory.
    Lent(PooledBuffer<Fr>),
    /// Lent pinned memory the caller keeps.
    Kept(&'w PooledBuffer<Fr>),
}

/// A job's device memory: the H step's vectors (none for a one-point domain) and the MSM
/// batches' memory, kept by the worker from job to job or allocated for the job (then the
/// batches only once the H step has freed all its vectors but h's, as the plan counts them).
#[derive(Debug)]
struct JobMemory {
    h_step: Option<HStepBuffers>,
    batches: Option<Batches>,
}

/// What memory of a worker serves: domain size, H step, H's chunk, the split MSMs' chunk,
/// and the multiples of the resident H points that H's workspace holds the plan of.
type MemoryShape = (usize, HStep, usize, usize, Option<Multiples>);

/// Job memory kept from job to job, and its grant.
#[derive(Debug)]
struct Kept {
    shape: MemoryShape,
    mem: JobMemory,
    grant: VramGrant,
}

/// The job a worker runs: its number, key and deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobRef<'a> {
    pub id: u64,
    pub key: &'a ProvingKey,
    /// Waits for memory end by it.
    pub deadline: Option<Instant>,
}

/// Where a job's device memory comes from.
#[derive(Debug)]
enum JobMemorySource {
    /// Allocated for the job under its grant, freed before the lock is let go.
    PerJob(MemoryShape),
    /// Idle memory of the job's shape, kept again after the job.
    Reused(Box<Kept>),
    /// Made for the job under a grant of its own, kept after it.
    New(MemoryShape, VramGrant),
}

/// An admitted job: its plan, the resident key, its grant (held while it runs) and memory.
struct Admitted<'a> {
    plan: JobPlan,
    resident: Option<Arc<ResidentKey>>,
    active: Active<'a>,
    memory: JobMemorySource,
}

/// The split witness on the host, before staging.
struct SplitWitness {
    split: Arc<SplitScalars>,
    queries: [SplitQuery; 3],
}

impl SplitWitness {
    fn of(z: &Assignment) -> Result<Self, ProveError> {
        let msm = |source| ProveError::Msm { query: "z", source };
        let split = Arc::new(SplitScalars::of_parts(&z.parts()).map_err(msm)?);
        let q = |w: WitnessQuery| SplitQuery::new(&split, &z.density(w)).map_err(msm);
        let queries = [
            q(WitnessQuery::L)?,
            q(WitnessQuery::A)?,
            q(WitnessQuery::B1)?,
        ];
        Ok(Self { split, queries })
    }

    fn device_bytes(&self) -> usize {
        let tail = self.split.tail().len() * (FR + 4);
        tail + self
            .queries
            .iter()
            .map(SplitQuery::device_bytes)
            .sum::<usize>()
    }
}

/// One worker's stage implementations on a device.
#[derive(Debug)]
pub(crate) struct GpuWorker {
    pub dev: Arc<DeviceShared>,
    copy: Stream,
    ntt: CudaNtt,
    /// The H MSM's stream.
    msm: CudaMsm,
    /// The witness queries' split MSMs, on their own stream beside the H MSM (with a streamed
    /// key they wait on PCIe while the H MSM computes).
    side: CudaMsm,
    /// Budget grants for the NTT's cached tables, one per domain size this worker has seen:
    /// they stay allocated after the job, so they stay granted.
    tables: Mutex<HashMap<u32, VramGrant>>,
    /// The deadline of the job being run: waits for memory end by it.
    deadline: Mutex<Option<Instant>>,
}

impl Drop for GpuWorker {
    fn drop(&mut self) {
        let tables = self.tables.get_mut().unwrap_or_else(|p| p.into_inner());
        let bytes: usize = tables.values().map(VramGrant::bytes).sum();
        self.dev.table_bytes.fetch_sub(bytes, Ordering::SeqCst);
    }
}

impl GpuWorker {
    pub fn new(dev: Arc<DeviceShared>) -> Result<Self, ProveError> {
        let d = dev.ctx.ordinal();
        let memory = dev.budget.capacity();
        Ok(Self {
            copy: Stream::new(&dev.ctx).map_err(|e| ProveError::device(d, e))?,
            ntt: CudaNtt::for_memory(&dev.ctx, memory).map_err(|e| ProveError::device(d, e))?,
            msm: CudaMsm::for_memory(&dev.ctx, dev.msm_memory)
                .map_err(|e| ProveError::device(d, e))?,
            side: CudaMsm::for_memory(&dev.ctx, dev.msm_memory)
                .map_err(|e| ProveError::device(d, e))?,
            tables: Mutex::new(HashMap::new()),
            deadline: Mutex::new(None),
            dev,
        })
    }

    fn ordinal(&self) -> usize {
        self.dev.ctx.ordinal()
    }

    /// The deadline of the job this worker runs, if it has one.
    fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a wait for pinned staging memory may last: [`POOL_WAIT`], or less when the
    /// job's deadline comes sooner.
    fn pool_wait(&self) -> Duration {
        match self.deadline() {
            Some(d) => POOL_WAIT.min(d.saturating_duration_since(Instant::now())),
            None => POOL_WAIT,
        }
    }

    /// A pinned-pool error: the deadline's when it has passed, else the device's.
    fn pool_err(&self, e: zkpipe_pinned::Error) -> ProveError {
        match self.deadline() {
            Some(d) if Instant::now() >= d => ProveError::DeadlineExceeded {
                what: "waiting for pinned memory",
            },
            _ => self.err(e),
        }
    }

    fn err(&self, e: impl std::fmt::Display) -> ProveError {
        ProveError::device(self.ordinal(), e)
    }

    /// The G1 stage of one job (and B2 when G2 runs on the GPU): admission, staging, the H
    /// step and the MSMs. Returns the sums and the job's report, with the assignment when it
    /// was given and the CPU sums B2 from it.
    pub fn g1_stage(
        &self,
        job: &JobRef<'_>,
        witness: StageWitness<'_>,
        stats: &Counters,
    ) -> Result<G1Result, ProveError> {
        let JobRef {
            id: job,
            key,
            deadline,
        } = *job;
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = deadline;
        let t = Instant::now();
        let (abc, z, witness) = match witness {
            StageWitness::Given(abc, z) => {
                let split = SplitWitness::of(&z)?;
                // The CPU's B2 reads z after this stage; otherwise its memory (lent, say) goes
                // now.
                (Abc::Given(abc), (!self.dev.g2_on_gpu).then_some(z), split)
            }
            StageWitness::Kept(abc, z) => (Abc::Kept(abc), None, SplitWitness::of(z)?),
        };
        let Admitted {
            plan,
            resident,
            active,
            memory,
        } = self.admit(key, &witness)?;
        if let Some(k) = &resident {
            let copies = k.h.multiples().map_or(1, |m| m.copies() as usize);
            stats.key_h_copies.store(copies, Ordering::Relaxed);
        }
        let n = key.domain_size();
        let (mut mem, kept) = self.job_memory(memory)?;
        let staged = self.stage(&plan, n, abc, witness, &mut mem, stats)?;
        let staging_ms = t.elapsed().as_secs_f64() * 1e3;
        Counters::add(&stats.stage_ns, t.elapsed());
        self.dev.sample(stats);

        let guard = self.dev.lock.lock();
        // The host's H step time brackets the device's: the clock starts inside it.
        let t = Instant::now();
        let mut clock =
            StageClock::start(&self.dev.ctx, self.ntt.stream()).map_err(|e| self.err(e))?;
        let Staged {
            c,
            split,
            queries,
            bytes,
        } = staged;
        let JobMemory {
            mut h_step,
            batches,
        } = mem;
        if let Some(bufs) = h_step.as_mut() {
            self.h_step(bufs, c)?;
        }
        // Memory per job: h stays, the other vectors go before the batches are made.
        let (h_step, h_alone, batches) = match batches {
            Some(b) => (h_step, None, b),
            None => {
                let h = h_step.map(HStepBuffers::into_h);
                let tail = split.host().tail().len();
                let side = split_chunk(plan.chunk, tail);
                let multiples = resident.as_ref().and_then(|k| k.h.multiples());
                let shape = (n, plan.h_step, plan.chunk, side, multiples);
                (None, h, self.alloc_batches(shape)?)
            }
        };
        clock
            .mark("h_step", self.ntt.stream())
            .map_err(|e| self.err(e))?;
        Counters::add(&stats.h_ns, t.elapsed());
        self.dev.sample(stats);
        let t = Instant::now();
        let staged_split = (split, queries);
        let mut lane = None;
        let h = h_step.as_ref().map(HStepBuffers::h).or(h_alone.as_ref());
        let top = h.map(|h| self.read_top(h)).transpose()?;
        let sums = self.msms(
            key,
            resident.as_deref(),
            h,
            &staged_split,
            batches,
            &mut clock,
            &mut lane,
        );
        self.dev.sample(stats);
        drop(staged_split);
        let (sums, batches) = sums?;
        let mem = JobMemory {
            h_step,
            batches: Some(batches),
        };
        // Kept for the worker's next job, or freed before the lock is let go.
        match kept {
            Some((shape, grant)) => self.keep(shape, mem, grant),
            None => drop((mem, h_alone)),
        }
        Counters::add(&stats.g1_ns, t.elapsed());
        let lock_ms = guard.held_for().as_secs_f64() * 1e3;
        Counters::add(&stats.lock_ns, guard.held_for());
        drop(guard);
        // A replaced key's memory goes (if this job held it last) before the job stops counting.
        let plan_text = describe(&plan, resident.is_some());
        drop(resident);
        drop(active);

        let lanes: Vec<&StageClock> = lane.iter().collect();
        let mut device_ms = clock.stages().map_err(|e| self.err(e))?;
        for l in &lanes {
            device_ms.extend(l.stages().map_err(|e| self.err(e))?);
        }
        let device_span_ms = clock.span_ms(&lanes).map_err(|e| self.err(e))?;
        if let Some(top) = top {
            let top = top.wait().map_err(|e| self.err(e))?;
            crate::prover::check_satisfied(top.first().map(|&t| Scalar::from(t)))?;
        }
        let (parts, b2) = sums.combine().map_err(|e| self.err(e))?;
        let report = JobReport {
            job,
            device: Some(self.dev.ctx.ordinal()),
            plan: plan_text,
            device_ms,
            device_span_ms,
            staging_ms,
            lock_ms,
            g2_cpu_ms: 0.0,
            uploaded_bytes: bytes,
            check_ms: 0.0,
        };
        self.record(stats, &report);
        Ok((z, parts, b2, report))
    }

    fn record(&self, stats: &Counters, r: &JobReport) {
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

    /// Admission: the plan for this job on this device, the resident key if it is kept, and
    /// one grant of every byte the job needs: the plan's, and under a plan that keeps memory,
    /// the kept memory's unless idle memory of the job's shape is there to take. A plan that
    /// can never fit is an error naming its bytes and what the budget leaves for jobs.
    fn admit(&self, key: &ProvingKey, witness: &SplitWitness) -> Result<Admitted<'_>, ProveError> {
        let n = key.domain_size();
        let log_n = n.trailing_zeros();
        self.grant_tables(log_n)?;
        let shape = JobShape {
            n,
            split: witness.device_bytes(),
            largest_msm: key.query_lens().into_iter().max().unwrap_or(0).max(n),
        };
        let tail = witness.split.tail().len();
        let resident = self.resident(key, &shape, tail)?;
        let multiples = resident.as_ref().and_then(|k| k.h.multiples());
        let key_bytes = resident.as_ref().map(|_| self.key_bytes(key, multiples));
        let load = self.load(log_n, key_bytes);
        let streamed = resident.is_none();
        let msm_bytes = |chunk| self.msm_bytes(chunk, tail, streamed, multiples);
        let plan =
            choose(&load, &shape, &msm_bytes).map_err(|e| ProveError::TooLargeForDevice {
                device: self.ordinal(),
                needed: e.needed,
                capacity: e.available,
            })?;
        let side = split_chunk(plan.chunk, tail);
        let shape = (n, plan.h_step, plan.chunk, side, multiples);
        let reused = match plan.kept {
            0 => None,
            _ => self.dev.memory.take(|k| k.shape == shape),
        };
        let new_kept = match (plan.kept, &reused) {
            (0, _) | (_, Some(_)) => 0,
            (kept, None) => kept,
        };
        let mut grant = self
            .dev
            .acquire(plan.bytes + new_kept, Some(shape), self.deadline())?;
        let memory = match (plan.kept, reused) {
            (0, _) => JobMemorySource::PerJob(shape),
            (_, Some(k)) => JobMemorySource::Reused(Box::new(k)),
            (_, None) => JobMemorySource::New(shape, grant.split_off(new_kept)),
        };
        Ok(Admitted {
            plan,
            resident,
            active: self.dev.memory.enter(grant),
            memory,
        })
    }

    /// What the device holds for good: a resident key of `key_bytes`, every worker's tables.
    fn load(&self, log_n: u32, key_bytes: Option<usize>) -> DeviceLoad {
        DeviceLoad {
            capacity: self.dev.budget.capacity(),
            resident_key: key_bytes.unwrap_or(0),
            tables: self.ntt.table_bytes(log_n),
            workers: self.dev.workers,
        }
    }

    /// Device bytes of a job's MSM batches at `chunk` points: H's, the G1 split MSMs' (L, A,
    /// B1, [`split_chunk`]) beside it and, when G2 runs on the GPU, B2's ([`g2_chunk`]);
    /// `tail` is the split witness's tail.
    fn msm_bytes(
        &self,
        chunk: usize,
        tail: usize,
        streamed: bool,
        multiples: Option<Multiples>,
    ) -> usize {
        let g1 = self
            .msm
            .batch_bytes_for::<G1>(chunk, 1, streamed, multiples)
            + self
                .side
                .batch_bytes::<G1>(split_chunk(chunk, tail), 3, streamed);
        let g2 = match self.dev.g2_on_gpu {
            true => self
                .msm
                .batch_bytes::<G2>(g2_chunk(chunk, tail), 1, streamed),
            false => 0,
        };
        g1 + g2
    }

    /// Grants this worker's NTT tables for 2^log_n once; they stay for the worker's life.
    fn grant_tables(&self, log_n: u32) -> Result<(), ProveError> {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if tables.contains_key(&log_n) {
            return Ok(());
        }
        let grant = self
            .dev
            .acquire(self.ntt.table_bytes(log_n), None, self.deadline())?;
        self.dev
            .table_bytes
            .fetch_add(grant.bytes(), Ordering::SeqCst);
        tables.insert(log_n, grant);
        Ok(())
    }

    /// Device bytes of a key's points, H's with `multiples`.
    fn key_bytes(&self, key: &ProvingKey, multiples: Option<Multiples>) -> usize {
        let [h, l, a, b1, b2] = key.query_lens();
        let g2 = if self.dev.g2_on_gpu { g2_bytes(b2) } else { 0 };
        let h_copies = multiples.map_or(1, |m| m.copies() as usize);
        g1_bytes((h + 1) * h_copies + l + a + b1) + g2
    }

    /// The multiples a resident key's H points would carry with `copies` copies (none for
    /// one copy).
    fn h_multiples(&self, key: &ProvingKey, copies: u32) -> Option<Multiples> {
        let n = key.query_lens()[0] + 1;
        (copies > 1).then(|| Multiples::for_points(n, copies))
    }

    /// The key on this device, uploading it the first time; `None` when it is not kept
    /// resident or no plan of a job of `shape` fits beside it (then bases are streamed from the
    /// host: from where the key is page-locked, else, slowly, from pageable memory).
    fn resident(
        &self,
        key: &ProvingKey,
        shape: &JobShape,
        tail: usize,
    ) -> Result<Option<Arc<ResidentKey>>, ProveError> {
        if !self.dev.keep_resident {
            return Ok(None);
        }
        let mut slot = self.dev.resident.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((id, k)) = slot.as_ref() {
            if *id == key.id() {
                return Ok(Some(Arc::clone(k)));
            }
        }
        // One key at a time: a new key replaces the old one (jobs still using it keep it alive).
        *slot = None;
        // The most multiples of H asked for that leave a job the plan it has without them,
        // halving down to none: a smaller plan (shorter chunks, one job at a time) costs more
        // than the multiples save.
        // H's points alone are on the device too while their multiples are made: the plan
        // must fit beside that as well.
        let made_from = |multiples: Option<Multiples>| {
            multiples.map_or(0, |_| g1_bytes(key.query_lens()[0] + 1))
        };
        let plan_with = |multiples: Option<Multiples>| {
            let bytes = self.key_bytes(key, multiples) + made_from(multiples);
            let load = self.load(shape.n.trailing_zeros(), Some(bytes));
            let msm_bytes = |chunk| self.msm_bytes(chunk, tail, false, multiples);
            choose(&load, shape, &msm_bytes).ok()
        };
        let plain = plan_with(None);
        let as_good = |p: &JobPlan| {
            plain.as_ref().is_some_and(|q| {
                (p.h_step, p.chunk, p.side_by_side, p.kept > 0)
                    == (q.h_step, q.chunk, q.side_by_side, q.kept > 0)
            })
        };
        let asked = self.dev.key_multiples;
        let copies =
            std::iter::successors(Some(asked), |&c| (c > 1).then_some(c / 2)).find(|&c| match c {
                1 => plain.is_some(),
                _ => plan_with(self.h_multiples(key, c)).is_some_and(|p| as_good(&p)),
            });
        let Some(copies) = copies else {
            tracing::warn!(
                device = self.ordinal(),
                key_bytes = self.key_bytes(key, None),
                capacity = self.dev.budget.capacity(),
                "the proving key does not fit beside a job: bases are streamed from the page-locked key"
            );
            return Ok(None);
        };
        if copies < asked {
            tracing::warn!(
                device = self.ordinal(),
                asked,
                copies,
                "the key with H's multiples in the copies asked for would shrink the jobs' plan: fewer kept"
            );
        }
        let multiples = self.h_multiples(key, copies);
        let bytes = self.key_bytes(key, multiples);
        let made_from = made_from(multiples);
        let mut grant = self.dev.acquire(bytes + made_from, None, self.deadline())?;
        let t = Instant::now();
        let up = |b: &Bases<G1Affine>| self.msm.upload_bases::<G1>(b).map_err(|e| self.err(e));
        let points = self
            .msm
            .upload_bases_padded::<G1>(&key.h, 1)
            .map_err(|e| self.err(e))?;
        let h = match multiples {
            Some(m) => {
                let with = self.msm.with_multiples(&points, m);
                drop(points);
                with.map_err(|e| self.err(e))?
            }
            None => points,
        };
        grant.release(made_from);
        let k = Arc::new(ResidentKey {
            h,
            l: up(&key.l)?,
            a: up(&key.a)?,
            b_g1: up(&key.b_g1)?,
            b_g2: match self.dev.g2_on_gpu {
                true => Some(
                    self.msm
                        .upload_bases::<G2>(&key.b_g2)
                        .map_err(|e| self.err(e))?,
                ),
                false => None,
            },
            grant,
        });
        tracing::info!(
            device = self.ordinal(),
            key = key.id(),
            bytes,
            h_copies = copies,
            pinned = key.is_pinned(),
            ms = t.elapsed().as_secs_f64() * 1e3,
            "proving key resident on the device"
        );
        *slot = Some((key.id(), Arc::clone(&k)));
        Ok(Some(k))
    }

    /// The job's device memory: kept memory taken at admission, or made anew to be kept
    /// (under its own grant), with its shape and grant to keep it again; else the H step's
    /// vectors allocated for the job under the job's grant.
    #[allow(clippy::type_complexity)]
    fn job_memory(
        &self,
        source: JobMemorySource,
    ) -> Result<(JobMemory, Option<(MemoryShape, VramGrant)>), ProveError> {
        match source {
            JobMemorySource::PerJob(shape) => {
                let mem = JobMemory {
                    h_step: self.alloc_h_step(shape)?,
                    batches: None,
                };
                Ok((mem, None))
            }
            JobMemorySource::Reused(k) => Ok((k.mem, Some((k.shape, k.grant)))),
            JobMemorySource::New(shape, grant) => {
                let mem = JobMemory {
                    h_step: self.alloc_h_step(shape)?,
                    batches: Some(self.alloc_batches(shape)?),
                };
                Ok((mem, Some((shape, grant))))
            }
        }
    }

    /// The H step's vectors for `shape` (none for a one-point domain).
    fn alloc_h_step(
        &self,
        (n, h_step, _, _, _): MemoryShape,
    ) -> Result<Option<HStepBuffers>, ProveError> {
        Ok(match (n, h_step) {
            (0 | 1, _) => None,
            (_, HStep::Four) => Some(self.ntt.h_step_buffers(n)?),
            (_, HStep::Three) => Some(self.ntt.h_step_buffers_three(n)?),
        })
    }

    /// The MSM batches' memory for `shape`.
    fn alloc_batches(
        &self,
        (_, _, chunk, side, multiples): MemoryShape,
    ) -> Result<Batches, ProveError> {
        let e = |e| self.err(e);
        let g2 = match self.dev.g2_on_gpu {
            true => Some(
                self.side
                    .batch_memory::<G2>(g2_chunk(chunk, side))
                    .map_err(e)?,
            ),
            false => None,
        };
        Ok((
            self.msm
                .batch_memory_for::<G1>(chunk, multiples)
                .map_err(e)?,
            self.side.batch_memory::<G1>(side).map_err(e)?,
            g2,
        ))
    }

    /// Keeps `mem` for the device's next job of its shape.
    fn keep(&self, shape: MemoryShape, mem: JobMemory, grant: VramGrant) {
        self.dev.memory.put(Kept { shape, mem, grant });
    }

    /// Staging, outside the lock: a, b (and c, unless the plan copies it in later from
    /// page-locked memory) go into the H step's vectors, and the split witness to the device.
    fn stage<'w>(
        &self,
        plan: &JobPlan,
        n: usize,
        abc: Abc<'w>,
        witness: SplitWitness,
        mem: &mut JobMemory,
        stats: &Counters,
    ) -> Result<Staged<'w>, ProveError> {
        let mut bytes = 0u64;
        let mut host_c = None;
        if let Some(bufs) = mem.h_step.as_mut() {
            bytes += 3 * (n * FR) as u64;
            let (da, db, dc) = bufs.inputs_mut();
            let four = match (plan.h_step, dc) {
                (HStep::Four, Some(dc)) => Some(dc),
                _ => None,
            };
            host_c = match abc {
                Abc::Given([mut a, mut b, c]) => {
                    self.upload_evaluations(&mut a, da, stats)?;
                    drop(a);
                    self.upload_evaluations(&mut b, db, stats)?;
                    drop(b);
                    self.stage_c(c, four, n, stats)?
                }
                Abc::Kept([a, b, c]) => {
                    self.upload_evaluations(a, da, stats)?;
                    self.upload_evaluations(b, db, stats)?;
                    self.stage_kept_c(c, four, n, stats)?
                }
            };
        }
        let mut up = |v: &[Fr], pad: usize| -> Result<DeviceBuffer<Fr>, ProveError> {
            bytes += std::mem::size_of_val(v) as u64;
            self.upload(v, pad, stats)
        };
        let s = &witness.split;
        let tail = up(s.tail(), 0)?;
        let index = self.upload(s.tail_index(), 0, stats)?;
        bytes += std::mem::size_of_val(s.tail_index()) as u64;
        let split = DeviceSplit::new(Arc::clone(s), tail, index).map_err(|e| self.err(e))?;
        let [l, qa, qb] = witness.queries;
        let mut query = |q: SplitQuery| -> Result<DeviceQuery, ProveError> {
            let [d, p, s, sp] = q.bitmaps();
            let mut maps = Vec::with_capacity(4);
            for m in [d, p, s, sp] {
                bytes += std::mem::size_of_val(m) as u64;
                maps.push(self.upload(m, 0, stats)?);
            }
            let maps: [DeviceBuffer<u32>; 4] = maps
                .try_into()
                .map_err(|_| self.err("query bitmaps: four expected"))?;
            DeviceQuery::new(q, maps).map_err(|e| self.err(e))
        };
        let queries = [query(l)?, query(qa)?, query(qb)?];
        Ok(Staged {
            c: host_c,
            split,
            queries,
            bytes,
        })
    }

    /// Enqueues the read-back of h's last coefficient (h holds n, the last zero for a witness
    /// that satisfies the circuit) on the H step's stream, into pinned memory: checked once the
    /// MSMs are waited for, so that the check costs the GPU no wait.
    fn read_top(&self, h: &DeviceBuffer<Fr>) -> Result<InFlight<PooledBuffer<Fr>>, ProveError> {
        let host = self
            .dev
            .pinned
            .acquire::<Fr>(1, self.pool_wait())
            .map_err(|e| self.pool_err(e))?;
        download(self.ntt.stream(), h, h.len().saturating_sub(1), host).map_err(|e| self.err(e))
    }

    /// c of a given witness: uploaded into the H step's fourth vector, or kept on the host,
    /// page-locked and padded, for the three-vector step.
    fn stage_c(
        &self,
        c: Scalars,
        four: Option<&mut DeviceBuffer<Fr>>,
        n: usize,
        stats: &Counters,
    ) -> Result<Option<HostC<'static>>, ProveError> {
        match (four, c) {
            (Some(dc), mut c) => {
                self.upload_evaluations(&mut c, dc, stats)?;
                Ok(None)
            }
            (None, Scalars::Pinned(c)) => Ok(Some(HostC::Lent(c.padded()))),
            (None, Scalars::Pageable(c)) => Ok(Some(self.registered(padded(c, n))?)),
        }
    }

    /// As [`GpuWorker::stage_c`] for a kept witness: lent memory is used where it is (zeros
    /// written past c's end), a caller's vector is copied.
    fn stage_kept_c<'w>(
        &self,
        c: &'w mut Scalars,
        four: Option<&mut DeviceBuffer<Fr>>,
        n: usize,
        stats: &Counters,
    ) -> Result<Option<HostC<'w>>, ProveError> {
        match (four, c) {
            (Some(dc), c) => {
                self.upload_evaluations(c, dc, stats)?;
                Ok(None)
            }
            (None, Scalars::Pinned(c)) => Ok(Some(HostC::Kept(c.padded_in_place()))),
            (None, Scalars::Pageable(c)) => Ok(Some(self.registered(padded(c.clone(), n))?)),
        }
    }

    /// `v` page-locked in place for the job.
    fn registered(&self, v: Vec<Scalar>) -> Result<HostC<'static>, ProveError> {
        let v = PinnableVec::new(v);
        v.pin(&self.dev.ctx).map_err(|e| self.err(e))?;
        Ok(HostC::Registered(v))
    }

    /// One of a, b, c into `dst`, padded with zeros to its length n: lent pinned memory goes
    /// up by DMA as it is (zeros written past its end), a vector through the staging pool.
    /// The caller keeps it (a given witness drops it right after, back to the pool).
    fn upload_evaluations(
        &self,
        e: &mut Scalars,
        dst: &mut DeviceBuffer<Fr>,
        stats: &Counters,
    ) -> Result<(), ProveError> {
        let n = dst.len();
        if e.len() > n {
            return Err(ProveError::Constraints {
                constraints: e.len(),
                domain: n,
            });
        }
        let host = match e {
            Scalars::Pageable(v) => {
                return self.upload_into(dst, cast::scalars_as_fr(v), stats);
            }
            Scalars::Pinned(p) => p.padded_in_place(),
        };
        if host.len() != n {
            return Err(ProveError::Shape {
                what: "lent evaluation buffer (the key's domain size)",
                expected: n,
                got: host.len(),
            });
        }
        let t = Instant::now();
        copy_scope(|scope| scope.upload(&self.copy, Pinned::new(host), dst, 0))
            .and_then(|copied| copied)
            .map_err(|e| self.err(e))?;
        Counters::add(&stats.upload_ns, t.elapsed());
        stats
            .upload_bytes
            .fetch_add((n * FR) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Copies `v` to a new device buffer through pinned staging buffers: see
    /// [`GpuWorker::upload_into`]. `pad` zeros follow `v`.
    fn upload<T: Pod + Send + Sync>(
        &self,
        v: &[T],
        pad: usize,
        stats: &Counters,
    ) -> Result<DeviceBuffer<T>, ProveError> {
        let mut dev =
            DeviceBuffer::<T>::alloc(&self.dev.ctx, v.len() + pad).map_err(|e| self.err(e))?;
        self.upload_into(&mut dev, v, stats)?;
        Ok(dev)
    }

    /// Copies `v` to the start of `dev`, zeros after it, through pinned staging buffers from
    /// the device's pool, chunk by chunk on this worker's copy stream (the memcpy of a chunk
    /// overlaps the DMA of the one before); returns once the copies are done.
    fn upload_into<T: Pod + Send + Sync>(
        &self,
        dev: &mut DeviceBuffer<T>,
        v: &[T],
        stats: &Counters,
    ) -> Result<(), ProveError> {
        let t = Instant::now();
        if v.len() > dev.len() {
            return Err(self.err(format!(
                "staging {} elements into a device buffer of {}",
                v.len(),
                dev.len()
            )));
        }
        if v.len() < dev.len() {
            dev.zero_async(&self.copy).map_err(|e| self.err(e))?;
        }
        let per = (STAGE_CHUNK * FR / std::mem::size_of::<T>().max(1)).max(1);
        for (i, chunk) in v.chunks(per).enumerate() {
            let mut host = self
                .dev
                .pinned
                .acquire::<T>(chunk.len(), self.pool_wait())
                .map_err(|e| self.pool_err(e))?;
            host.par_chunks_mut(1 << 14)
                .zip(chunk.par_chunks(1 << 14))
                .for_each(|(d, s)| d.copy_from_slice(s));
            upload(&self.copy, host, dev, i * per)
                .map_err(|e| self.err(e))?
                .release();
        }
        self.copy.synchronize().map_err(|e| self.err(e))?;
        Counters::add(&stats.upload_ns, t.elapsed());
        stats
            .upload_bytes
            .fetch_add(std::mem::size_of_val(v) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The H step in the job's vectors: h's n coefficients (the last is zero and meets no
    /// base) in [`HStepBuffers::h`]; c from page-locked host memory in the three-vector step.
    fn h_step(&self, bufs: &mut HStepBuffers, c: Option<HostC<'_>>) -> Result<(), ProveError> {
        match c {
            None => Ok(self.ntt.h_step_in(bufs)?),
            Some(HostC::Registered(c)) => {
                let view = Pinned::of_pinnable(&c, cast::scalars_as_fr)
                    .ok_or_else(|| self.err("c is not page-locked"))?;
                Ok(self.ntt.h_step_three_in(bufs, view)?)
            }
            Some(HostC::Lent(c)) => Ok(self.ntt.h_step_three_in(bufs, Pinned::new(&c))?),
            Some(HostC::Kept(c)) => Ok(self.ntt.h_step_three_in(bufs, Pinned::new(c))?),
        }
    }
}

/// The G1 split MSMs' chunk: no more than H's, nor than the tail needs (their Pippenger sums
/// tail entries only; with a streamed key the chunk also bounds the bases per copy).
fn split_chunk(chunk: usize, tail: usize) -> usize {
    let tail = tail.max(crate::plan::MIN_CHUNK).next_power_of_two();
    chunk.clamp(crate::plan::MIN_CHUNK, tail)
}

/// The G2 batch's chunk: half the G1 chunk's points (each twice the size), and no more than
/// the tail needs (B2 is a split MSM: its Pippenger sums tail entries only).
fn g2_chunk(chunk: usize, tail: usize) -> usize {
    let tail = tail.max(crate::plan::MIN_CHUNK).next_power_of_two();
    (chunk / 2).clamp(crate::plan::MIN_CHUNK, tail)
}

fn describe(plan: &JobPlan, resident: bool) -> String {
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
