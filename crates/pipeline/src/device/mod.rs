//! A device as the engine's workers share it: its context and GPU lock, the VRAM budget and
//! the driver's floor beneath it, the pinned staging pool, quarantine, the keys and recordings
//! kept resident ([`residents`]) and the job memory that idle workers keep ([`memory`], granted
//! through [`reclaim`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use zkpipe_cuda::Context;
use zkpipe_pinned::PinnedPool;
use zkpipe_stream::{GpuLock, VramBudget, VramGrant};

pub(crate) mod memory;
pub(crate) mod reclaim;
pub(crate) mod residents;

use memory::{Kept, MemoryShape};
use reclaim::{Reclaim, ReclaimError};
use residents::ResidentSet;

use crate::config::{Config, G2Placement, StreamedPoints};
use crate::stats::Counters;
use crate::ProveError;

/// Bytes of one scalar.
const FR: usize = 32;
/// Scalars per staging copy (64 MiB): the memcpy of one overlaps the DMA of the previous.
pub(crate) const STAGE_CHUNK: usize = 1 << 21;

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
    pub streamed_points: StreamedPoints,
    pub keep_resident: bool,
    /// Copies of multiples asked for with a resident key's H points.
    pub key_multiples: u32,
    pub workers: usize,
    baseline_used: usize,
    /// The keys and recordings kept on the device.
    pub residents: ResidentSet,
    /// The last recording found too large to keep beside a job's plan: said once, not for
    /// every job.
    pub streamed_said: Mutex<Option<zkpipe_r1cs::Digest>>,
    /// Job memory that no job uses now, kept for a next job of its shape, and the jobs
    /// running on the device.
    pub memory: Reclaim<Kept>,
    /// Why the device was quarantined, once it was.
    quarantine: Mutex<Option<String>>,
    /// Budget bytes of the workers' NTT tables.
    pub table_bytes: AtomicUsize,
}

/// How a device is set up for the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeviceSetup {
    pub margin: usize,
    pub cap: Option<usize>,
    pub g2_on_gpu: bool,
    pub streamed_points: StreamedPoints,
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
            streamed_points: setup.streamed_points,
            keep_resident: setup.keep_resident,
            key_multiples: setup.key_multiples,
            workers: setup.workers.max(1),
            residents: ResidentSet::default(),
            streamed_said: Mutex::new(None),
            memory: Reclaim::default(),
            quarantine: Mutex::new(None),
            table_bytes: AtomicUsize::new(0),
        })
    }

    /// Budget bytes held between jobs: the resident keys and recordings, the workers' NTT
    /// tables and the idle job memory they keep.
    pub fn kept_bytes(&self) -> usize {
        self.residents.bytes()
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

    /// After a job failed with `error`: quarantines the device when its context no longer
    /// works. A sticky driver status in the error says so ([`zkpipe_cuda::Error::is_sticky`]);
    /// another fault on the device (a status not known to be sticky, a panicked thread) is
    /// checked with a synchronize of the whole context; an error that is not the device's (the
    /// input, a deadline, the budget) leaves it be. Idle job memory goes with the device.
    pub fn quarantine_if_unusable(&self, error: &ProveError) {
        let reason = match (error.driver_error(), error) {
            (Some(e), _) if e.is_sticky() => e.to_string(),
            (Some(_), _) | (None, ProveError::Device { .. }) => match self.ctx.synchronize() {
                Err(e) => e.to_string(),
                Ok(()) => return,
            },
            (None, _) => return,
        };
        let mut q = self.quarantine.lock().unwrap_or_else(|p| p.into_inner());
        if q.is_none() {
            tracing::error!(device = self.ctx.ordinal(), error = %reason, "device quarantined: its context no longer works");
            *q = Some(reason);
        }
        drop(q);
        while self.memory.take(|_| true).is_some() {}
    }

    /// A grant of `bytes`: at once, or after freeing idle job memory (shapes other than
    /// `shape` first), or after running jobs let theirs go, by `deadline` if there is one; an
    /// error when nothing that could free them runs.
    pub fn acquire(
        &self,
        bytes: usize,
        shape: Option<MemoryShape>,
        deadline: Option<Instant>,
    ) -> Result<VramGrant, ProveError> {
        let keep = |k: &Kept| Some(k.shape) == shape;
        self.memory
            .acquire(&self.budget, bytes, keep, deadline)
            .map_err(|e| self.reclaim_error(e))
    }

    /// As [`DeviceShared::acquire`], for a job: the grant comes counted as running (see
    /// [`Reclaim::acquire_job`]).
    pub fn acquire_job(
        &self,
        bytes: usize,
        shape: Option<MemoryShape>,
        deadline: Option<Instant>,
    ) -> Result<reclaim::Active<'_>, ProveError> {
        let keep = |k: &Kept| Some(k.shape) == shape;
        self.memory
            .acquire_job(&self.budget, bytes, keep, deadline)
            .map_err(|e| self.reclaim_error(e))
    }

    fn reclaim_error(&self, e: ReclaimError) -> ProveError {
        match e {
            ReclaimError::Deadline { .. } => ProveError::DeadlineExceeded {
                what: "waiting for device memory",
            },
            ReclaimError::Budget(b) => ProveError::Budget(b),
            ReclaimError::Held { needed, available } => ProveError::DeviceMemoryHeld {
                device: self.ctx.ordinal(),
                needed,
                available,
            },
        }
    }

    pub fn sample(&self, stats: &Counters) {
        if let Ok(m) = self.ctx.mem_info() {
            stats.peak((m.total - m.free).saturating_sub(self.baseline_used));
        }
    }
}

/// The devices `cfg` names (all, when it names none), each set up for the engine.
/// A device listed twice is an error.
pub(crate) fn start_devices(cfg: &Config) -> Result<Vec<Arc<DeviceShared>>, ProveError> {
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
                streamed_points: cfg.streamed_points,
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
