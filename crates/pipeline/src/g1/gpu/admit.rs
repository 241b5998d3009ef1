//! Admission: the plan a job runs under on this device (from the VRAM budget, the resident
//! key and what the workers hold), one grant of every byte it needs, and the job's memory:
//! kept memory of its shape, memory made to be kept, or memory for the job alone. The key's
//! and the recording's residency (and how many multiples of H's points the key carries) are
//! decided here too, and which other jobs' keys and recordings stay beside them.

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
use crate::device::residents::{Own, Residents};
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

/// Where a job's key points are read from, decided before anything is uploaded.
enum KeyPlace {
    /// Kept on the device already.
    Kept(Arc<ResidentKey>),
    /// Uploaded for this job and later ones, H's points with these multiples.
    Upload(Option<Multiples>),
    /// Streamed from the host.
    Host,
}

impl KeyPlace {
    fn multiples(&self) -> Option<Multiples> {
        match self {
            KeyPlace::Kept(k) => k.h.multiples(),
            KeyPlace::Upload(m) => *m,
            KeyPlace::Host => None,
        }
    }

    fn bases_at(&self) -> BasesAt {
        match self {
            KeyPlace::Kept(_) | KeyPlace::Upload(_) => BasesAt::Device,
            KeyPlace::Host => BasesAt::Host,
        }
    }
}

/// Where a recorded job's matrices are read from, decided before anything is uploaded.
enum MatricesPlace {
    /// Kept on the device already.
    Kept(Arc<ResidentRecording>),
    /// Uploaded for this job and later ones of the same content.
    Upload,
    /// Streamed from the host.
    Streamed,
}

/// A job's own residents' bytes: what stays on the device while it runs, and what is there at
/// most while they are uploaded (H's points beside their multiples while those are made).
#[derive(Debug, Clone, Copy)]
struct OwnBytes {
    kept: usize,
    uploading: usize,
}

impl GpuWorker {
    /// Admission: the plan for this job on this device, the resident key if it is kept, and
    /// one grant of every byte the job needs: the plan's, and under a plan that keeps memory,
    /// the kept memory's unless idle memory of the job's shape is there to take. The job's key
    /// and recording are placed as if the device held nothing else; other jobs' keys and
    /// recordings stay beside them while the job's plan is as fast as without them, the least
    /// recently used given up first. A plan that can never fit is an error naming its bytes and
    /// what the budget leaves for jobs.
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
        let own = Own {
            key: key.id(),
            recording: recording.map(|r| r.digest()),
        };
        let mut residents = self.dev.residents.lock();
        let key_place = self.key_place(&mut residents, job, &shape, tail);
        let multiples = key_place.multiples();
        let key_bytes = match key_place {
            KeyPlace::Host => 0,
            _ => self.key_bytes(key, multiples),
        };
        let bases_at = key_place.bases_at();
        let msm_bytes = |chunk| self.msm_bytes(chunk, tail, bases_at, multiples);
        let matrices_place = recording
            .map(|rec| self.matrices_place(&mut residents, rec, &mut shape, key_bytes, &msm_bytes));
        let recording_bytes = match (&matrices_place, recording) {
            (Some(MatricesPlace::Kept(r)), _) => r.grant.bytes(),
            (Some(MatricesPlace::Upload), Some(rec)) => rec.bytes(),
            _ => 0,
        };
        let own_bytes = OwnBytes {
            kept: key_bytes + recording_bytes,
            uploading: match key_place {
                KeyPlace::Upload(m) => self.h_points_beside(key, m),
                _ => 0,
            },
        };
        self.make_room(job, &mut residents, &own, own_bytes, &shape, &msm_bytes);
        let resident = self.place_key(&mut residents, job, key_place)?;
        let matrices = match (recording, matrices_place) {
            (Some(rec), Some(place)) => {
                Some(self.place_matrices(&mut residents, job, rec, place)?)
            }
            _ => None,
        };
        let others = residents.others_bytes(&own);
        drop(residents);
        let load = self.load(log_n, own_bytes.kept + others);
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

    /// Gives up other jobs' keys and recordings, the least recently used first, until the
    /// job's plan beside what stays is as fast as beside its own alone. A job that fits no
    /// plan even alone leaves them be (it is refused).
    fn make_room(
        &self,
        job: &JobContext<'_>,
        residents: &mut Residents,
        own: &Own<ResidentKey, ResidentRecording>,
        own_bytes: OwnBytes,
        shape: &JobShape,
        msm_bytes: &dyn Fn(usize) -> usize,
    ) {
        let log_n = shape.n.trailing_zeros();
        let own_most = own_bytes.kept + own_bytes.uploading;
        let Ok(alone) = choose(&self.load(log_n, own_most), shape, msm_bytes) else {
            return;
        };
        let fast_beside = |others: usize| {
            choose(&self.load(log_n, own_most + others), shape, msm_bytes)
                .is_ok_and(|p| p.as_fast_as(&alone))
        };
        for gone in residents.evict_until(own, fast_beside) {
            job.stats.resident_evictions.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                device = self.ordinal(),
                evicted = %gone,
                key = own.key,
                "resident key or recording given up: the job's plan beside it would be slower"
            );
        }
    }

    /// Where a recorded job reads its matrices: the device's resident copy of its recording
    /// (uploaded the first time, when the job's plan beside it is as fast as with the matrices
    /// streamed), else the host's, a chunk at a time. `shape` gains what the evaluation needs
    /// on the device besides: z's bitmaps and ranks, and a streamed recording's room.
    fn matrices_place(
        &self,
        residents: &mut Residents,
        rec: &Arc<Recording>,
        shape: &mut JobShape,
        key_bytes: usize,
        msm_bytes: &dyn Fn(usize) -> usize,
    ) -> MatricesPlace {
        shape.split += DeviceSplitZ::lookup_bytes(rec.shape().variables());
        let streamed = JobShape {
            split: shape.split + StreamedRecording::bytes_for(rec, STREAM_ENTRIES),
            ..*shape
        };
        if !self.dev.keep_resident {
            *shape = streamed;
            return MatricesPlace::Streamed;
        }
        // The same content, not only the same name: a circuit changed without a new id
        // gets matrices of its own.
        if let Some(r) = residents.recording(rec.digest()) {
            return MatricesPlace::Kept(r);
        }
        let log_n = shape.n.trailing_zeros();
        let without = choose(&self.load(log_n, key_bytes), &streamed, msm_bytes).ok();
        let load = self.load(log_n, key_bytes + rec.bytes());
        let beside = choose(&load, shape, msm_bytes).ok();
        let as_fast = match (&beside, &without) {
            (Some(p), Some(q)) => p.as_fast_as(q),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if as_fast {
            return MatricesPlace::Upload;
        }
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
        MatricesPlace::Streamed
    }

    /// The job's matrices where [`GpuWorker::matrices_place`] put them: the resident copy,
    /// uploaded now and kept for later jobs if it is not there yet, or the host's.
    fn place_matrices(
        &self,
        residents: &mut Residents,
        job: &JobContext<'_>,
        rec: &Arc<Recording>,
        place: MatricesPlace,
    ) -> Result<MatricesAt, ProveError> {
        match place {
            MatricesPlace::Kept(r) => Ok(MatricesAt::Resident(r)),
            MatricesPlace::Streamed => self.streamed(rec),
            MatricesPlace::Upload => {
                let t = Instant::now();
                let grant = self.dev.acquire(rec.bytes(), None, job.deadline)?;
                let matrices =
                    DeviceRecording::upload(&self.dev.ctx, rec).map_err(|e| self.err(e))?;
                let r = Arc::new(ResidentRecording {
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
                residents.add_recording(Arc::clone(&r));
                job.stats.resident_uploads.fetch_add(1, Ordering::Relaxed);
                Ok(MatricesAt::Resident(r))
            }
        }
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

    /// What the device holds for good: resident keys and recordings of `resident` bytes,
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

    /// Device bytes of H's points alone, on the device beside their `multiples` while those
    /// are made (none without multiples).
    fn h_points_beside(&self, key: &ProvingKey, multiples: Option<Multiples>) -> usize {
        multiples.map_or(0, |_| g1_bytes(key.query_lens()[0] + 1))
    }

    /// The multiples a resident key's H points would carry with `copies` copies (none for
    /// one copy).
    fn h_multiples(&self, key: &ProvingKey, copies: u32) -> Option<Multiples> {
        let n = key.query_lens()[0] + 1;
        (copies > 1).then(|| Multiples::for_points(n, copies))
    }

    /// Where the job's key is read from: the device's copy if it is kept; else uploaded, with
    /// the most multiples of H asked for that leave a job of `shape` the plan it has without
    /// them; else (not kept resident, or no plan fits beside it) streamed from the host: from
    /// where the key is page-locked, else, slowly, from pageable memory.
    fn key_place(
        &self,
        residents: &mut Residents,
        job: &JobContext<'_>,
        shape: &JobShape,
        tail: usize,
    ) -> KeyPlace {
        if !self.dev.keep_resident {
            return KeyPlace::Host;
        }
        let key = job.key;
        if let Some(k) = residents.key(key.id()) {
            return KeyPlace::Kept(k);
        }
        // The most multiples of H asked for that leave a job the plan it has without them,
        // halving down to none: a smaller plan (shorter chunks, one job at a time) costs more
        // than the multiples save. H's points alone are on the device too while their
        // multiples are made: the plan must fit beside that as well.
        let plan_with = |multiples: Option<Multiples>| {
            let bytes = self.key_bytes(key, multiples) + self.h_points_beside(key, multiples);
            let load = self.load(shape.n.trailing_zeros(), bytes);
            let msm_bytes = |chunk| self.msm_bytes(chunk, tail, BasesAt::Device, multiples);
            choose(&load, shape, &msm_bytes).ok()
        };
        let plain = plan_with(None);
        let asked = self.dev.key_multiples;
        let copies =
            std::iter::successors(Some(asked), |&c| (c > 1).then_some(c / 2)).find(|&c| match c {
                1 => plain.is_some(),
                _ => plan_with(self.h_multiples(key, c))
                    .is_some_and(|p| plain.as_ref().is_some_and(|q| p.as_fast_as(q))),
            });
        let Some(copies) = copies else {
            tracing::warn!(
                device = self.ordinal(),
                key_bytes = self.key_bytes(key, None),
                capacity = self.dev.budget.capacity(),
                "the proving key does not fit beside a job: bases are streamed from the page-locked key"
            );
            return KeyPlace::Host;
        };
        if copies < asked {
            tracing::warn!(
                device = self.ordinal(),
                asked,
                copies,
                "the key with H's multiples in the copies asked for would shrink the jobs' plan: fewer kept"
            );
        }
        KeyPlace::Upload(self.h_multiples(key, copies))
    }

    /// The job's key where [`GpuWorker::key_place`] put it: the resident copy, uploaded now
    /// and kept for later jobs if it is not there yet; `None` when bases are streamed.
    fn place_key(
        &self,
        residents: &mut Residents,
        job: &JobContext<'_>,
        place: KeyPlace,
    ) -> Result<Option<Arc<ResidentKey>>, ProveError> {
        let multiples = match place {
            KeyPlace::Kept(k) => return Ok(Some(k)),
            KeyPlace::Host => return Ok(None),
            KeyPlace::Upload(multiples) => multiples,
        };
        let key = job.key;
        let bytes = self.key_bytes(key, multiples);
        let made_from = self.h_points_beside(key, multiples);
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
            h_copies = multiples.map_or(1, |m| m.copies()),
            pinned = key.is_pinned(),
            ms = t.elapsed().as_secs_f64() * 1e3,
            "proving key resident on the device"
        );
        residents.add_key(Arc::clone(&k));
        job.stats.resident_uploads.fetch_add(1, Ordering::Relaxed);
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
