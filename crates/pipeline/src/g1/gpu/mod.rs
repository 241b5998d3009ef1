//! The G1 stage on a CUDA device, in four steps that read like the prover: admission
//! ([`admit`]: a plan and a VRAM grant for it), staging outside the GPU lock ([`stage`]: a, b,
//! c and the split witness to the device), the H step, and the MSMs ([`msms`]), enqueued back
//! to back and waited for once, their sums combined after the lock is let go; [`report`] says
//! what the job did.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blstrs::Scalar;
use zkpipe_cuda::{DeviceBuffer, StageClock, Stream, Timing};
use zkpipe_field::Fr;
use zkpipe_msm::CudaMsm;
use zkpipe_ntt::{CudaNtt, HStepBuffers};
use zkpipe_pinned::PooledBuffer;
use zkpipe_r1cs::{CudaEvaluator, Recording};
use zkpipe_stream::{InFlight, VramGrant};

mod admit;
mod backend;
mod msms;
mod report;
mod stage;

pub(crate) use backend::GpuBackend;

use admit::{Admitted, MatricesAt};
use msms::{MsmClocks, MsmInputs, MsmSums, SideStart, StagedWitness};
use stage::{Abc, HostC, SplitWitness, Staged, StagedEvaluation};

use super::{Evaluations, G1Output, JobContext};
use crate::device::memory::{JobMemory, MemoryShape};
use crate::device::DeviceShared;
use crate::prover::{check_satisfied, Assignment};
use crate::stats::{Counters, KeyPlacement, MatricesPlacement, Stage};
use crate::{DeviceFault, ProveError};

/// How long a staging copy waits for pinned memory from the pool.
const POOL_WAIT: Duration = Duration::from_secs(60);

/// A job's witness as the G1 stage gets it (one a job, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum StageWitness<'w> {
    /// Given up: a, b and c go (lent memory back to the pool) as soon as they are uploaded, and
    /// the assignment once split (unless the CPU sums B2 from it).
    Given(Evaluations, Assignment),
    /// Kept by the caller, unchanged whatever happens, so that the job can run elsewhere if
    /// this device fails (c may gain zeros past its end, in lent memory).
    Kept(&'w mut Evaluations, &'w Assignment),
}

/// a, b and c as the stage gets them, before admission places a recording's matrices (one a
/// job, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Source<'w> {
    Staged(Abc<'w>),
    Recorded(Arc<Recording>),
}

impl<'w> Source<'w> {
    fn given(e: Evaluations) -> Self {
        match e {
            Evaluations::Given(abc) => Source::Staged(Abc::Given(abc)),
            Evaluations::Recorded(rec) => Source::Recorded(rec),
        }
    }

    fn kept(e: &'w mut Evaluations) -> Self {
        match e {
            Evaluations::Given(abc) => Source::Staged(Abc::Kept(abc)),
            Evaluations::Recorded(rec) => Source::Recorded(Arc::clone(rec)),
        }
    }

    fn recording(&self) -> Option<&Arc<Recording>> {
        match self {
            Source::Staged(_) => None,
            Source::Recorded(rec) => Some(rec),
        }
    }

    /// The staging of a, b and c, the recording's matrices where admission placed them.
    fn placed(self, matrices: Option<MatricesAt>) -> Abc<'w> {
        match (self, matrices) {
            (Source::Staged(abc), _) => abc,
            (Source::Recorded(_), Some(at)) => Abc::Recorded(at),
            // Admission places every recording it is given; streamed is always possible.
            (Source::Recorded(rec), None) => Abc::Recorded(MatricesAt::Streamed(rec)),
        }
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
    /// a, b and c of recorded jobs.
    r1cs: CudaEvaluator,
    /// Budget grants for the NTT's cached tables, one per domain size this worker has seen:
    /// they stay allocated after the job, so they stay granted.
    tables: Mutex<HashMap<u32, VramGrant>>,
    /// The engine's threads for its GPU workers' host work (the witness split, a, b and c
    /// padded and copied into page-locked memory, the sums combined): the caller's own
    /// parallel work (a daemon decoding requests, a prover synthesizing) in rayon's global pool
    /// cannot queue ahead of a job's staging. Only work that never blocks runs here.
    host: Arc<rayon::ThreadPool>,
}

impl Drop for GpuWorker {
    fn drop(&mut self) {
        let tables = self.tables.get_mut().unwrap_or_else(|p| p.into_inner());
        let bytes: usize = tables.values().map(VramGrant::bytes).sum();
        self.dev.table_bytes.fetch_sub(bytes, Ordering::SeqCst);
    }
}

/// What the H step of a job reads besides its vectors: c from the host in the three-vector
/// step, or the recording's evaluation of a, b and c.
struct HStepWork<'w> {
    c: Option<HostC<'w>>,
    evaluation: Option<StagedEvaluation>,
}

/// What the GPU lock covers of a job: the H step and the MSMs enqueued and waited for.
struct Locked {
    sums: MsmSums,
    /// h's last coefficient on its way back, for the satisfaction check.
    top: Option<InFlight<PooledBuffer<Fr>>>,
    /// The H step's clock and the side stream's.
    clock: StageClock<Stage>,
    lane: Option<StageClock<Stage>>,
    lock_ms: f64,
}

impl GpuWorker {
    pub fn new(dev: Arc<DeviceShared>, host: Arc<rayon::ThreadPool>) -> Result<Self, ProveError> {
        let d = dev.ctx.ordinal();
        let memory = dev.budget.capacity();
        Ok(Self {
            copy: Stream::new(&dev.ctx).map_err(|e| ProveError::device(d, e))?,
            ntt: CudaNtt::for_memory(&dev.ctx, memory).map_err(|e| ProveError::device(d, e))?,
            msm: CudaMsm::for_memory(&dev.ctx, dev.msm_memory)
                .map_err(|e| ProveError::device(d, e))?,
            side: CudaMsm::for_memory(&dev.ctx, dev.msm_memory)
                .map_err(|e| ProveError::device(d, e))?,
            r1cs: CudaEvaluator::new(&dev.ctx).map_err(|e| ProveError::device(d, e))?,
            tables: Mutex::new(HashMap::new()),
            host,
            dev,
        })
    }

    fn ordinal(&self) -> usize {
        self.dev.ctx.ordinal()
    }

    /// How long a wait for pinned staging memory may last: [`POOL_WAIT`], or less when the
    /// job's deadline comes sooner.
    fn pool_wait(&self, job: &JobContext<'_>) -> Duration {
        match job.deadline {
            Some(d) => POOL_WAIT.min(d.saturating_duration_since(Instant::now())),
            None => POOL_WAIT,
        }
    }

    /// A pinned-pool error: the deadline's when it has passed, else the device's.
    fn pool_err(&self, job: &JobContext<'_>, e: zkpipe_pinned::Error) -> ProveError {
        match job.deadline {
            Some(d) if Instant::now() >= d => ProveError::DeadlineExceeded {
                what: "waiting for pinned memory",
            },
            _ => self.err(e),
        }
    }

    fn err(&self, e: impl Into<DeviceFault>) -> ProveError {
        ProveError::device(self.ordinal(), e)
    }

    /// The G1 stage of one job (and B2 when G2 runs on the GPU): admission and staging outside
    /// the lock, the H step and the MSMs under it, the sums combined after it. Gives the
    /// assignment back when it was given and the CPU sums B2 from it.
    pub fn g1_stage(
        &self,
        job: &JobContext<'_>,
        witness: StageWitness<'_>,
    ) -> Result<G1Output, ProveError> {
        let t = Instant::now();
        let (source, z, witness) = match witness {
            StageWitness::Given(e, z) => {
                let split = self.host.install(|| SplitWitness::of(&z))?;
                // The CPU's B2 reads z after this stage; otherwise its memory (lent, say) goes
                // now.
                (Source::given(e), (!self.dev.g2_on_gpu).then_some(z), split)
            }
            StageWitness::Kept(e, z) => {
                let split = self.host.install(|| SplitWitness::of(z))?;
                (Source::kept(e), None, split)
            }
        };
        let admitted = self.admit(job, &witness, source.recording())?;
        if let Some(k) = &admitted.resident {
            let copies = k.h.multiples().map_or(1, |m| m.copies() as usize);
            job.stats.key_h_copies.store(copies, Ordering::Relaxed);
        }
        let Admitted {
            plan,
            resident,
            matrices,
            active,
            memory,
        } = admitted;
        let matrices_at = matrices.as_ref().map(|m| match m {
            MatricesAt::Resident(_) => MatricesPlacement::Resident,
            MatricesAt::Streamed(_) => MatricesPlacement::Streamed,
        });
        let abc = source.placed(matrices);
        let mut held = self.job_memory(memory)?;
        let points = match resident {
            Some(_) => crate::StreamedPoints::All,
            None => self.dev.streamed_points,
        };
        let staged = self.stage(job, &plan, abc, witness, points, &mut held.mem)?;
        let staging_ms = t.elapsed().as_secs_f64() * 1e3;
        Counters::add(&job.stats.stage_ns, t.elapsed());
        self.dev.sample(job.stats);

        let bytes = staged.bytes;
        let needed = match resident {
            Some(_) => 0,
            None => report::needed_bases_bytes(job.key, &staged.witness, self.dev.g2_on_gpu),
        };
        let locked = self.under_lock(job, &plan, resident.as_deref(), staged, held)?;
        // A replaced key's memory goes (if this job held it last) before the job stops counting.
        let bases = match resident {
            Some(_) => KeyPlacement::Resident,
            None => KeyPlacement::Streamed,
        };
        let plan_report = report::plan_report(&plan, bases, matrices_at);
        drop(resident);
        drop(active);

        let Locked {
            sums,
            top,
            clock,
            lane,
            lock_ms,
        } = locked;
        let lanes: Vec<&StageClock<Stage>> = lane.iter().collect();
        let mut device_ms = clock.spans().map_err(|e| self.err(e))?;
        for l in &lanes {
            device_ms.extend(l.spans().map_err(|e| self.err(e))?);
        }
        let device_span_ms = clock.span_ms(&lanes).map_err(|e| self.err(e))?;
        let moved = sums
            .bases_copies
            .link_use(clock.origin())
            .map_err(|e| self.err(e))?;
        let link = crate::stats::LinkReport {
            bases_bytes: moved.bytes,
            bases_needed_bytes: needed,
            bases_busy_ms: moved.busy_ms,
            gather_ms: sums.gathering.as_secs_f64() * 1e3,
        };
        if let Some(top) = top {
            let top = top.wait().map_err(|e| self.err(e))?;
            check_satisfied(top.first().map(|&t| Scalar::from(t)))?;
        }
        let (parts, b2) = self
            .host
            .install(|| sums.combine())
            .map_err(|e| self.err(e))?;
        let report = crate::stats::JobReport {
            job: job.id,
            device: Some(self.ordinal()),
            plan: Some(plan_report),
            device_ms,
            device_span_ms,
            staging_ms,
            lock_ms,
            g2_cpu_ms: 0.0,
            uploaded_bytes: bytes,
            link,
            check_ms: 0.0,
        };
        report::record(job.stats, &report);
        Ok(G1Output {
            z,
            parts,
            b2,
            report,
        })
    }

    /// Under the GPU lock: the H step in the job's vectors and the MSMs enqueued and waited
    /// for (the witness queries' beside the H step when the job's memory was kept, else after
    /// it), and the job's memory kept for the worker's next job or freed before the lock goes.
    fn under_lock(
        &self,
        job: &JobContext<'_>,
        plan: &crate::plan::JobPlan,
        resident: Option<&crate::device::memory::ResidentKey>,
        staged: Staged<'_>,
        held: admit::HeldMemory,
    ) -> Result<Locked, ProveError> {
        let stats = job.stats;
        let guard = self.dev.lock.lock();
        // The host's H step time brackets the device's: the clock starts inside it.
        let t = Instant::now();
        let mut clock = StageClock::start(&self.dev.ctx, self.ntt.stream(), Timing::Enabled)
            .map_err(|e| self.err(e))?;
        let Staged {
            c,
            witness,
            evaluation,
            ..
        } = staged;
        let JobMemory {
            mut h_step,
            batches,
        } = held.mem;
        let mut step = Some(HStepWork { c, evaluation });
        // Memory per job: the H step runs first, then h stays and the other vectors go before
        // the batches are made.
        let (start, h_alone, batches) = match batches {
            Some(b) => (SideStart::BesideHStep, None, b),
            None => {
                if let (Some(bufs), Some(work)) = (h_step.as_mut(), step.take()) {
                    self.job_h_step(bufs, work, &witness, &mut clock)?;
                }
                let h = h_step.take().map(HStepBuffers::into_h);
                let shape = MemoryShape {
                    n: job.key.domain_size(),
                    h_step: plan.h_step,
                    chunk: plan.chunk,
                    side_chunk: split_chunk(plan.chunk, witness.split.host().tail().len()),
                    multiples: resident.and_then(|k| k.h.multiples()),
                };
                let batches = self.alloc_batches(shape)?;
                clock
                    .mark(Stage::HStep, self.ntt.stream())
                    .map_err(|e| self.err(e))?;
                Counters::add(&stats.h_ns, t.elapsed());
                (SideStart::AfterHStep, h, batches)
            }
        };
        self.dev.sample(stats);
        let mut lane = None;
        let mut top = None;
        let inputs = MsmInputs {
            key: job.key,
            resident,
            witness: &witness,
        };
        let clocks = MsmClocks {
            h: &mut clock,
            side: &mut lane,
        };
        let (steps, h_alone_ref, top_ref) = (&mut h_step, &h_alone, &mut top);
        let staged_witness = &witness;
        // The MSMs' host time, from their start (with the H step's where they start beside it).
        let msms_started = Instant::now();
        let sums = self.msms(&inputs, batches, clocks, start, move |clock| {
            if let (Some(bufs), Some(work)) = (steps.as_mut(), step.take()) {
                self.job_h_step(bufs, work, staged_witness, clock)?;
                clock
                    .mark(Stage::HStep, self.ntt.stream())
                    .map_err(|e| self.err(e))?;
                Counters::add(&stats.h_ns, t.elapsed());
            }
            let steps: &Option<HStepBuffers> = { steps };
            let h = steps.as_ref().map(HStepBuffers::h).or(h_alone_ref.as_ref());
            *top_ref = h.map(|h| self.read_top(job, h)).transpose()?;
            Ok(h)
        });
        self.dev.sample(stats);
        drop(witness);
        let (sums, batches) = sums?;
        let mem = JobMemory {
            h_step,
            batches: Some(batches),
        };
        // Kept for the worker's next job, or freed before the lock is let go.
        match held.keep {
            Some(k) => self.keep(k.shape, mem, k.grant),
            None => drop((mem, h_alone)),
        }
        Counters::add(&stats.g1_ns, msms_started.elapsed());
        let lock_ms = guard.held_for().as_secs_f64() * 1e3;
        Counters::add(&stats.lock_ns, guard.held_for());
        drop(guard);
        Ok(Locked {
            sums,
            top,
            clock,
            lane,
            lock_ms,
        })
    }

    /// The H step of a job in its vectors: from a, b and c staged, or from the recording's
    /// evaluation of them on the device.
    fn job_h_step(
        &self,
        bufs: &mut HStepBuffers,
        work: HStepWork<'_>,
        witness: &StagedWitness,
        clock: &mut StageClock<Stage>,
    ) -> Result<(), ProveError> {
        match work.evaluation {
            Some(mut e) => self.recorded_h_step(bufs, &mut e, witness, clock),
            None => self.h_step(bufs, work.c),
        }
    }

    /// Enqueues the read-back of h's last coefficient (h holds n, the last zero for a witness
    /// that satisfies the circuit) on the H step's stream, into pinned memory: checked once the
    /// MSMs are waited for, so that the check costs the GPU no wait.
    fn read_top(
        &self,
        job: &JobContext<'_>,
        h: &DeviceBuffer<Fr>,
    ) -> Result<InFlight<PooledBuffer<Fr>>, ProveError> {
        let host = self
            .dev
            .pinned
            .acquire::<Fr>(1, self.pool_wait(job))
            .map_err(|e| self.pool_err(job, e))?;
        zkpipe_stream::download(self.ntt.stream(), h, h.len().saturating_sub(1), host)
            .map_err(|e| self.err(e))
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

/// Bytes of `n` G1 points.
fn g1_bytes(n: usize) -> usize {
    n * std::mem::size_of::<blstrs::G1Affine>()
}

/// Bytes of `n` G2 points.
fn g2_bytes(n: usize) -> usize {
    n * std::mem::size_of::<blstrs::G2Affine>()
}
