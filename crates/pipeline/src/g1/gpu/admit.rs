//! Admission: the plan a job runs under on this device (from the VRAM budget, the resident
//! key and what the workers hold), one grant of every byte it needs, and the job's memory:
//! kept memory of its shape, memory made to be kept, or memory for the job alone. The key's
//! residency (and how many multiples of H's points it carries) is decided here too.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use blstrs::G1Affine;
use zkpipe_msm::{Bases, BasesAt, Multiples, G1, G2};
use zkpipe_ntt::{HStepBuffers, HVectors};
use zkpipe_r1cs::{DeviceRecording, DeviceSplitZ, Recording, StreamedRecording};
use zkpipe_stream::VramGrant;

use super::stage::{SplitWitness, STREAM_ENTRIES};
use super::{g1_bytes, g2_bytes, g2_chunk, split_chunk, GpuWorker};
use crate::device::memory::{
    Batches, JobMemory, Kept, MemoryShape, ResidentKey, ResidentRecording,
};
use crate::device::reclaim::Active;
use crate::g1::JobContext;
use crate::plan::{choose, DeviceLoad, HStep, JobPlan, JobShape};
use crate::{ProveError, ProvingKey};

/// Job memory to keep after the job: its shape and its grant.
pub(super) struct KeepAs {
    pub shape: MemoryShape,
    pub grant: VramGrant,
}

/// A job's device memory, and how it is kept for the worker's next job (`None`: freed after
/// the job).
pub(super) struct HeldMemory {
    pub mem: JobMemory,
    pub keep: Option<KeepAs>,
}

/// Where a job's device memory comes from.
#[derive(Debug)]
pub(super) enum JobMemorySource {
    /// Allocated for the job under its grant, freed before the lock is let go.
    PerJob(MemoryShape),
    /// Idle memory of the job's shape, kept again after the job.
    Reused(Box<Kept>),
    /// Made for the job under a grant of its own, kept after it.
    New(MemoryShape, VramGrant),
}

/// An admitted job: its plan, the resident key, where a recorded job's matrices are read from,
/// its grant (held while it runs) and memory.
pub(super) struct Admitted<'a> {
    pub plan: JobPlan,
    pub resident: Option<Arc<ResidentKey>>,
    pub matrices: Option<MatricesAt>,
    pub active: Active<'a>,
    pub memory: JobMemorySource,
}

/// Where a recorded job's matrices are read from.
pub(super) enum MatricesAt {
    /// The device's resident copy of the recording.
    Resident(Arc<ResidentRecording>),
    /// The recording on the host, streamed a chunk of rows at a time.
    Streamed(Arc<Recording>),
}

impl GpuWorker {
    /// Admission: the plan for this job on this device, the resident key if it is kept, and
    /// one grant of every byte the job needs: the plan's, and under a plan that keeps memory,
    /// the kept memory's unless idle memory of the job's shape is there to take. A plan that
    /// can never fit is an error naming its bytes and what the budget leaves for jobs.
    pub(super) fn admit(
        &self,
        job: &JobContext<'_>,
        witness: &SplitWitness,
        recording: Option<&Arc<Recording>>,
    ) -> Result<Admitted<'_>, ProveError> {
        let key = job.key;
        let n = key.domain_size();
        let log_n = n.trailing_zeros();
        self.grant_tables(job, log_n)?;
        let mut shape = JobShape {
            n,
            split: witness.device_bytes(),
            largest_msm: key.query_lens().into_iter().max().unwrap_or(0).max(n),
        };
        let tail = witness.split.tail().len();
        let resident = self.resident(job, &shape, tail)?;
        let multiples = resident.as_ref().and_then(|k| k.h.multiples());
        let key_bytes = resident
            .as_ref()
            .map_or(0, |_| self.key_bytes(key, multiples));
        let bases_at = match resident {
            Some(_) => BasesAt::Device,
            None => BasesAt::Host,
        };
        let msm_bytes = |chunk| self.msm_bytes(chunk, tail, bases_at, multiples);
        let matrices = recording
            .map(|rec| self.place_matrices(job, rec, &mut shape, key_bytes, &msm_bytes))
            .transpose()?;
        let recording_bytes = match &matrices {
            Some(MatricesAt::Resident(r)) => r.grant.bytes(),
            _ => 0,
        };
        let load = self.load(log_n, key_bytes + recording_bytes);
        let plan =
            choose(&load, &shape, &msm_bytes).map_err(|e| ProveError::TooLargeForDevice {
                device: self.ordinal(),
                needed: e.needed,
                capacity: e.available,
            })?;
        let shape = MemoryShape {
            n,
            h_step: plan.h_step,
            chunk: plan.chunk,
            side_chunk: split_chunk(plan.chunk, tail),
            multiples,
        };
        let reused = match plan.kept {
            0 => None,
            _ => self.dev.memory.take(|k| k.shape == shape),
        };
        let new_kept = match (plan.kept, &reused) {
            (0, _) | (_, Some(_)) => 0,
            (kept, None) => kept,
        };
        let mut active = self
            .dev
            .acquire_job(plan.bytes + new_kept, Some(shape), job.deadline)?;
        let memory = match (plan.kept, reused) {
            (0, _) => JobMemorySource::PerJob(shape),
            (_, Some(k)) => JobMemorySource::Reused(Box::new(k)),
            (_, None) => JobMemorySource::New(shape, active.split_off(new_kept)),
        };
        Ok(Admitted {
            plan,
            resident,
            matrices,
            active,
            memory,
        })
    }

    /// Where a recorded job reads its matrices: the device's resident copy of its recording
    /// (uploaded the first time, when the job's plan beside it is as good as with the matrices
    /// streamed), else the host's, a chunk at a time. `shape` gains what the evaluation needs
    /// on the device besides: z's bitmaps and ranks, and a streamed recording's room.
    fn place_matrices(
        &self,
        job: &JobContext<'_>,
        rec: &Arc<Recording>,
        shape: &mut JobShape,
        resident_bytes: usize,
        msm_bytes: &dyn Fn(usize) -> usize,
    ) -> Result<MatricesAt, ProveError> {
        shape.split += DeviceSplitZ::lookup_bytes(rec.shape().variables());
        let streamed = JobShape {
            split: shape.split + StreamedRecording::bytes_for(rec, STREAM_ENTRIES),
            ..*shape
        };
        if !self.dev.keep_resident {
            *shape = streamed;
            return self.streamed(rec);
        }
        let mut slot = self.dev.recording.lock().unwrap_or_else(|p| p.into_inner());
        // The same content, not only the same name: a circuit changed without a new id
        // gets matrices of its own.
        if let Some(r) = slot
            .as_ref()
            .filter(|r| &r.id == rec.id() && r.digest == rec.digest())
        {
            return Ok(MatricesAt::Resident(Arc::clone(r)));
        }
        let log_n = shape.n.trailing_zeros();
        let without = choose(&self.load(log_n, resident_bytes), &streamed, msm_bytes).ok();
        let load = self.load(log_n, resident_bytes + rec.bytes());
        let beside = choose(&load, shape, msm_bytes).ok();
        let as_good = match (&beside, &without) {
            (Some(p), Some(q)) => {
                (p.h_step, p.chunk, p.side_by_side) == (q.h_step, q.chunk, q.side_by_side)
            }
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !as_good {
            let mut said = self
                .dev
                .streamed_said
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if said.replace(rec.digest()) != Some(rec.digest()) {
                tracing::warn!(
                    device = self.ordinal(),
                    circuit = %rec.id(),
                    bytes = rec.bytes(),
                    capacity = self.dev.budget.capacity(),
                    "the recording does not fit beside a job's plan: its matrices are streamed from the host (said once; each job's report names the placement)"
                );
            }
            *shape = streamed;
            return self.streamed(rec);
        }
        // One recording at a time: a new one replaces the old (jobs still using it keep it).
        *slot = None;
        let t = Instant::now();
        let grant = self.dev.acquire(rec.bytes(), None, job.deadline)?;
        let matrices = DeviceRecording::upload(&self.dev.ctx, rec).map_err(|e| self.err(e))?;
        let r = Arc::new(ResidentRecording {
            id: rec.id().clone(),
            digest: rec.digest(),
            matrices,
            grant,
        });
        tracing::info!(
            device = self.ordinal(),
            circuit = %rec.id(),
            bytes = rec.bytes(),
            ms = t.elapsed().as_secs_f64() * 1e3,
            "recording resident on the device"
        );
        *slot = Some(Arc::clone(&r));
        Ok(MatricesAt::Resident(r))
    }

    /// A recording whose matrices are streamed: page-locked in place the first time, so that
    /// its chunks cross the link at full rate.
    fn streamed(&self, rec: &Arc<Recording>) -> Result<MatricesAt, ProveError> {
        let t = Instant::now();
        if rec.pin(&self.dev.ctx).map_err(|e| self.err(e))? {
            tracing::info!(
                device = self.ordinal(),
                circuit = %rec.id(),
                bytes = rec.bytes(),
                ms = t.elapsed().as_secs_f64() * 1e3,
                "recording page-locked in host memory for streaming"
            );
        }
        Ok(MatricesAt::Streamed(Arc::clone(rec)))
    }

    /// What the device holds for good: a resident key and recording of `resident` bytes,
    /// every worker's tables.
    fn load(&self, log_n: u32, resident: usize) -> DeviceLoad {
        DeviceLoad {
            capacity: self.dev.budget.capacity(),
            resident_key: resident,
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
        bases_at: BasesAt,
        multiples: Option<Multiples>,
    ) -> usize {
        let g1 = self
            .msm
            .batch_bytes_for::<G1>(chunk, 1, bases_at, multiples)
            + self
                .side
                .batch_bytes::<G1>(split_chunk(chunk, tail), 3, bases_at);
        let g2 = match self.dev.g2_on_gpu {
            true => self
                .msm
                .batch_bytes::<G2>(g2_chunk(chunk, tail), 1, bases_at),
            false => 0,
        };
        g1 + g2
    }

    /// Grants this worker's NTT tables for 2^log_n once; they stay for the worker's life.
    fn grant_tables(&self, job: &JobContext<'_>, log_n: u32) -> Result<(), ProveError> {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if tables.contains_key(&log_n) {
            return Ok(());
        }
        let grant = self
            .dev
            .acquire(self.ntt.table_bytes(log_n), None, job.deadline)?;
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
        job: &JobContext<'_>,
        shape: &JobShape,
        tail: usize,
    ) -> Result<Option<Arc<ResidentKey>>, ProveError> {
        if !self.dev.keep_resident {
            return Ok(None);
        }
        let key = job.key;
        let mut slot = self.dev.resident.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = slot.as_ref().filter(|k| k.key == key.id()) {
            return Ok(Some(Arc::clone(k)));
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
            let load = self.load(shape.n.trailing_zeros(), bytes);
            let msm_bytes = |chunk| self.msm_bytes(chunk, tail, BasesAt::Device, multiples);
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
        let mut grant = self.dev.acquire(bytes + made_from, None, job.deadline)?;
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
            key: key.id(),
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
        *slot = Some(Arc::clone(&k));
        Ok(Some(k))
    }

    /// The job's device memory: kept memory taken at admission, or made anew to be kept
    /// (under its own grant), with its shape and grant to keep it again; else the H step's
    /// vectors allocated for the job under the job's grant.
    pub(super) fn job_memory(&self, source: JobMemorySource) -> Result<HeldMemory, ProveError> {
        match source {
            JobMemorySource::PerJob(shape) => {
                let mem = JobMemory {
                    h_step: self.alloc_h_step(shape)?,
                    batches: None,
                };
                Ok(HeldMemory { mem, keep: None })
            }
            JobMemorySource::Reused(k) => {
                let keep = KeepAs {
                    shape: k.shape,
                    grant: k.grant,
                };
                Ok(HeldMemory {
                    mem: k.mem,
                    keep: Some(keep),
                })
            }
            JobMemorySource::New(shape, grant) => {
                let mem = JobMemory {
                    h_step: self.alloc_h_step(shape)?,
                    batches: Some(self.alloc_batches(shape)?),
                };
                let keep = Some(KeepAs { shape, grant });
                Ok(HeldMemory { mem, keep })
            }
        }
    }

    /// The H step's vectors for `shape` (none for a one-point domain).
    fn alloc_h_step(&self, shape: MemoryShape) -> Result<Option<HStepBuffers>, ProveError> {
        let n = shape.n;
        Ok(match (n, shape.h_step) {
            (0 | 1, _) => None,
            (_, HStep::Four) => Some(self.ntt.h_step_buffers(n, HVectors::Four)?),
            (_, HStep::Three) => Some(self.ntt.h_step_buffers(n, HVectors::Three)?),
        })
    }

    /// The MSM batches' memory for `shape`.
    pub(super) fn alloc_batches(&self, shape: MemoryShape) -> Result<Batches, ProveError> {
        let e = |e| self.err(e);
        let g2 = match self.dev.g2_on_gpu {
            true => Some(
                self.side
                    .batch_memory::<G2>(g2_chunk(shape.chunk, shape.side_chunk))
                    .map_err(e)?,
            ),
            false => None,
        };
        Ok(Batches {
            h: self
                .msm
                .batch_memory_for::<G1>(shape.chunk, shape.multiples)
                .map_err(e)?,
            side: self.side.batch_memory::<G1>(shape.side_chunk).map_err(e)?,
            g2,
        })
    }

    /// Keeps `mem` for the device's next job of its shape.
    pub(super) fn keep(&self, shape: MemoryShape, mem: JobMemory, grant: VramGrant) {
        self.dev.memory.put(Kept { shape, mem, grant });
    }
}
