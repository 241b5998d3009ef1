//! Staging, outside the GPU lock: a, b (and c) into the H step's vectors, the split witness
//! and the queries' bitmaps to the device, through the device's pinned pool or straight from
//! lent page-locked memory by DMA.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use blstrs::Scalar;
use bytemuck::Pod;
use rayon::prelude::*;
use zkpipe_cuda::{DeviceBuffer, StageClock};
use zkpipe_field::{cast, Fr};
use zkpipe_msm::{DeviceQuery, DeviceSplit, SplitQuery, SplitScalars};
use zkpipe_ntt::{HStepBuffers, HStepInputs};
use zkpipe_pinned::{PinnableVec, PooledBuffer};
use zkpipe_r1cs::{DeviceSplitZ, DeviceTailLookup, DeviceZ, Part, StreamedRecording, TailLookup};
use zkpipe_stream::{copy_scope, upload, Pinned};

use super::admit::MatricesAt;
use super::msms::StagedWitness;
use super::GpuWorker;
use crate::device::memory::{JobMemory, ResidentRecording};
use crate::device::STAGE_CHUNK;
use crate::g1::JobContext;
use crate::plan::{HStep, JobPlan};
use crate::prover::{padded, Assignment, WitnessQuery};
use crate::stats::{Counters, Stage};
use crate::{DeviceFault, ProveError, Scalars, StreamedPoints};

/// Bytes of one scalar.
const FR: usize = 32;

/// Entries of a streamed recording's chunk (128 MiB of columns and coefficients).
pub(super) const STREAM_ENTRIES: usize = 1 << 24;

/// a, b and c while staging: given up or kept by the caller, or evaluated on the device from
/// the circuit's recording (one a job).
#[allow(clippy::large_enum_variant)]
pub(super) enum Abc<'w> {
    Given([Scalars; 3]),
    Kept(&'w mut [Scalars; 3]),
    Recorded(MatricesAt),
}

/// What staging leaves besides a, b (and c) in the H step's vectors: c on the host for the
/// three-vector step, the split witness on the device, and what a recorded job's evaluation
/// reads.
pub(super) struct Staged<'w> {
    pub c: Option<HostC<'w>>,
    pub witness: StagedWitness,
    pub evaluation: Option<StagedEvaluation>,
    /// Bytes copied to the device.
    pub bytes: u64,
}

/// Where a recorded job's matrices are read from on the device.
pub(super) enum Matrices {
    /// The device's resident copy of the recording.
    Resident(Arc<ResidentRecording>),
    /// The recording on the host, copied a chunk of rows at a time into the job's room.
    Streamed(StreamedRecording),
}

/// What a recorded job's evaluation reads besides the split witness: z's ones bitmap and its
/// tail's lookup, and the matrices.
pub(super) struct StagedEvaluation {
    pub ones: DeviceBuffer<u32>,
    pub lookup: DeviceTailLookup,
    pub matrices: Matrices,
}

/// c of the three-vector step, page-locked on the host, padded to n.
pub(super) enum HostC<'w> {
    /// A caller's vector (or a padded copy of a kept one), page-locked in place for the job.
    Registered(PinnableVec<Scalar>),
    /// Lent pinned memory.
    Lent(PooledBuffer<Fr>),
    /// Lent pinned memory the caller keeps.
    Kept(&'w PooledBuffer<Fr>),
}

/// The split witness on the host, before staging.
pub(super) struct SplitWitness {
    pub split: Arc<SplitScalars>,
    pub queries: [SplitQuery; 3],
}

impl SplitWitness {
    pub fn of(z: &Assignment) -> Result<Self, ProveError> {
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

    pub fn device_bytes(&self) -> usize {
        let tail = self.split.tail().len() * (FR + 4);
        tail + self
            .queries
            .iter()
            .map(SplitQuery::device_bytes)
            .sum::<usize>()
    }
}

impl GpuWorker {
    /// Staging, outside the lock: a, b (and c, unless the plan copies it in later from
    /// page-locked memory) go into the H step's vectors, and the split witness to the device.
    /// With [`StreamedPoints::Nonzero`], the queries staged are their
    /// [`SplitQuery::nonzero_only`], and the whole ones stay on the host to gather the key's
    /// points by.
    pub(super) fn stage<'w>(
        &self,
        job: &JobContext<'_>,
        plan: &JobPlan,
        abc: Abc<'w>,
        witness: SplitWitness,
        points: StreamedPoints,
        mem: &mut JobMemory,
    ) -> Result<Staged<'w>, ProveError> {
        let n = job.key.domain_size();
        let mut bytes = 0u64;
        let mut host_c = None;
        let (abc, placed) = match abc {
            Abc::Recorded(placed) => (None, Some(placed)),
            abc => (Some(abc), None),
        };
        if let (Some(bufs), Some(abc)) = (mem.h_step.as_mut(), abc) {
            bytes += 3 * (n * FR) as u64;
            let HStepInputs {
                a: da,
                b: db,
                c: dc,
            } = bufs.inputs_mut();
            let four = match (plan.h_step, dc) {
                (HStep::Four, Some(dc)) => Some(dc),
                _ => None,
            };
            host_c = match abc {
                Abc::Given([mut a, mut b, c]) => {
                    self.upload_evaluations(&mut a, da, job)?;
                    drop(a);
                    self.upload_evaluations(&mut b, db, job)?;
                    drop(b);
                    self.stage_c(c, four, n, job)?
                }
                Abc::Kept([a, b, c]) => {
                    self.upload_evaluations(a, da, job)?;
                    self.upload_evaluations(b, db, job)?;
                    self.stage_kept_c(c, four, n, job)?
                }
                Abc::Recorded(_) => None,
            };
        }
        let mut up = |v: &[Fr], pad: usize| -> Result<DeviceBuffer<Fr>, ProveError> {
            bytes += std::mem::size_of_val(v) as u64;
            self.upload(job, v, pad)
        };
        let s = &witness.split;
        let tail = up(s.tail(), 0)?;
        let index = self.upload(job, s.tail_index(), 0)?;
        bytes += std::mem::size_of_val(s.tail_index()) as u64;
        let split = DeviceSplit::new(Arc::clone(s), tail, index).map_err(|e| self.err(e))?;
        let (staged_queries, whole) = match points {
            StreamedPoints::All => (witness.queries, None),
            StreamedPoints::Nonzero => {
                let nonzero = |q: &SplitQuery| {
                    q.nonzero_only(s)
                        .map_err(|source| ProveError::Msm { query: "z", source })
                };
                let [l, a, b] = &witness.queries;
                let staged = [nonzero(l)?, nonzero(a)?, nonzero(b)?];
                (staged, Some(witness.queries))
            }
        };
        let [l, qa, qb] = staged_queries;
        let mut query = |q: SplitQuery| -> Result<DeviceQuery, ProveError> {
            let [d, p, s, sp] = q.bitmaps();
            bytes += [d, p, s, sp]
                .iter()
                .map(|m| std::mem::size_of_val(*m) as u64)
                .sum::<u64>();
            let maps = [
                self.upload(job, d, 0)?,
                self.upload(job, p, 0)?,
                self.upload(job, s, 0)?,
                self.upload(job, sp, 0)?,
            ];
            DeviceQuery::new(q, maps).map_err(|e| self.err(e))
        };
        let queries = [query(l)?, query(qa)?, query(qb)?];
        let evaluation = match placed {
            Some(placed) => {
                let (e, up) = self.stage_evaluation(job, &witness.split, placed)?;
                bytes += up;
                Some(e)
            }
            None => None,
        };
        Ok(Staged {
            c: host_c,
            witness: StagedWitness {
                split,
                queries,
                whole,
            },
            evaluation,
            bytes,
        })
    }

    /// What a recorded job's evaluation reads besides the split witness: z's ones bitmap and
    /// its tail's lookup uploaded, and the matrices where admission placed them (a streamed
    /// recording's room allocated). Gives the bytes copied too.
    fn stage_evaluation(
        &self,
        job: &JobContext<'_>,
        split: &SplitScalars,
        placed: MatricesAt,
    ) -> Result<(StagedEvaluation, u64), ProveError> {
        let lookup = TailLookup::of(split);
        let ones = self.upload(job, split.ones(), 0)?;
        let t = Instant::now();
        let lookup_up =
            DeviceTailLookup::upload(&self.dev.ctx, &lookup).map_err(|e| self.err(e))?;
        Counters::add(&job.stats.upload_ns, t.elapsed());
        let bytes = (std::mem::size_of_val(split.ones()) + lookup.device_bytes()) as u64;
        let matrices = match placed {
            MatricesAt::Resident(r) => Matrices::Resident(r),
            MatricesAt::Streamed(rec) => Matrices::Streamed(
                StreamedRecording::new(&self.dev.ctx, rec, STREAM_ENTRIES)
                    .map_err(|e| self.err(e))?,
            ),
        };
        let staged = StagedEvaluation {
            ones,
            lookup: lookup_up,
            matrices,
        };
        Ok((staged, bytes))
    }

    /// c of a given witness: uploaded into the H step's fourth vector, or kept on the host,
    /// page-locked and padded, for the three-vector step.
    fn stage_c(
        &self,
        c: Scalars,
        four: Option<&mut DeviceBuffer<Fr>>,
        n: usize,
        job: &JobContext<'_>,
    ) -> Result<Option<HostC<'static>>, ProveError> {
        match (four, c) {
            (Some(dc), mut c) => {
                self.upload_evaluations(&mut c, dc, job)?;
                Ok(None)
            }
            (None, Scalars::Pinned(c)) => Ok(Some(HostC::Lent(self.host.install(|| c.padded())))),
            (None, Scalars::Pageable(c)) => {
                let c = self.host.install(|| padded(c, n));
                Ok(Some(self.registered(c)?))
            }
        }
    }

    /// As [`GpuWorker::stage_c`] for a kept witness: lent memory is used where it is (zeros
    /// written past c's end), a caller's vector is copied.
    fn stage_kept_c<'w>(
        &self,
        c: &'w mut Scalars,
        four: Option<&mut DeviceBuffer<Fr>>,
        n: usize,
        job: &JobContext<'_>,
    ) -> Result<Option<HostC<'w>>, ProveError> {
        match (four, c) {
            (Some(dc), c) => {
                self.upload_evaluations(c, dc, job)?;
                Ok(None)
            }
            (None, Scalars::Pinned(c)) => {
                Ok(Some(HostC::Kept(self.host.install(|| c.padded_in_place()))))
            }
            (None, Scalars::Pageable(c)) => {
                let c = self.host.install(|| padded(c.clone(), n));
                Ok(Some(self.registered(c)?))
            }
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
        job: &JobContext<'_>,
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
                return self.upload_into(dst, cast::scalars_as_fr(v), job);
            }
            Scalars::Pinned(p) => self.host.install(|| p.padded_in_place()),
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
        Counters::add(&job.stats.upload_ns, t.elapsed());
        job.stats
            .upload_bytes
            .fetch_add((n * FR) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Copies `v` to a new device buffer through pinned staging buffers: see
    /// [`GpuWorker::upload_into`]. `pad` zeros follow `v`.
    fn upload<T: Pod + Send + Sync>(
        &self,
        job: &JobContext<'_>,
        v: &[T],
        pad: usize,
    ) -> Result<DeviceBuffer<T>, ProveError> {
        let mut dev =
            DeviceBuffer::<T>::alloc(&self.dev.ctx, v.len() + pad).map_err(|e| self.err(e))?;
        self.upload_into(&mut dev, v, job)?;
        Ok(dev)
    }

    /// Copies `v` to the start of `dev`, zeros after it, through pinned staging buffers from
    /// the device's pool, chunk by chunk on this worker's copy stream (the memcpy of a chunk
    /// overlaps the DMA of the one before); returns once the copies are done.
    fn upload_into<T: Pod + Send + Sync>(
        &self,
        dev: &mut DeviceBuffer<T>,
        v: &[T],
        job: &JobContext<'_>,
    ) -> Result<(), ProveError> {
        let t = Instant::now();
        if v.len() > dev.len() {
            return Err(self.err(DeviceFault::StagingOverflow {
                elements: v.len(),
                capacity: dev.len(),
            }));
        }
        if v.len() < dev.len() {
            dev.zero_async(&self.copy).map_err(|e| self.err(e))?;
        }
        let per = (STAGE_CHUNK * FR / std::mem::size_of::<T>().max(1)).max(1);
        for (i, chunk) in v.chunks(per).enumerate() {
            let mut host = self
                .dev
                .pinned
                .acquire::<T>(chunk.len(), self.pool_wait(job))
                .map_err(|e| self.pool_err(job, e))?;
            self.host.install(|| {
                host.par_chunks_mut(1 << 14)
                    .zip(chunk.par_chunks(1 << 14))
                    .for_each(|(d, s)| d.copy_from_slice(s))
            });
            upload(&self.copy, host, dev, i * per)
                .map_err(|e| self.err(e))?
                .release();
        }
        self.copy.synchronize().map_err(|e| self.err(e))?;
        Counters::add(&job.stats.upload_ns, t.elapsed());
        job.stats
            .upload_bytes
            .fetch_add(std::mem::size_of_val(v) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The H step of a recorded job in its vectors: a and b evaluated into them, c into the
    /// fourth (or, in the three-vector step, into b's once b is read), on the H step's stream;
    /// the clock marks the evaluation that precedes the step.
    pub(super) fn recorded_h_step(
        &self,
        bufs: &mut HStepBuffers,
        e: &mut StagedEvaluation,
        witness: &StagedWitness,
        clock: &mut StageClock<Stage>,
    ) -> Result<(), ProveError> {
        let split = DeviceSplitZ::new(&e.ones, &e.lookup, witness.split.device_tail())
            .map_err(|x| self.err(x))?;
        let z = DeviceZ::Split(split);
        let stream = self.ntt.stream();
        let HStepInputs { a, b, c } = bufs.inputs_mut();
        let four = c.is_some();
        let evaluated = self
            .evaluate_into(stream, &mut e.matrices, Part::A, z, a)
            .and_then(|()| self.evaluate_into(stream, &mut e.matrices, Part::B, z, b))
            .and_then(|()| match c {
                Some(c) => self.evaluate_into(stream, &mut e.matrices, Part::C, z, c),
                None => Ok(()),
            })
            .and_then(|()| clock.mark(Stage::Evaluate, stream).map_err(|x| self.err(x)));
        if let Err(err) = evaluated {
            // Nothing the evaluation reads (a streamed recording's host arrays) may go while
            // a copy or kernel can still use it; the device error is the one to report.
            let _ = stream.synchronize();
            return Err(err);
        }
        // The H step synchronizes its stream on every path.
        match four {
            true => Ok(self.ntt.h_step_in(bufs)?),
            false => self.ntt.h_step_three_with(bufs, |stream, b| {
                self.evaluate_into(stream, &mut e.matrices, Part::C, z, b)
            }),
        }
    }

    /// One matrix evaluated at z into `out` on `stream`.
    fn evaluate_into(
        &self,
        stream: &zkpipe_cuda::Stream,
        matrices: &mut Matrices,
        part: Part,
        z: DeviceZ<'_>,
        out: &mut DeviceBuffer<Fr>,
    ) -> Result<(), ProveError> {
        let ran = match matrices {
            Matrices::Resident(r) => self.r1cs.evaluate_part(stream, &r.matrices, part, z, out),
            Matrices::Streamed(room) => {
                self.r1cs.evaluate_part_streamed(stream, room, part, z, out)
            }
        };
        ran.map_err(|e| self.err(e))
    }

    /// The H step in the job's vectors: h's n coefficients (the last is zero and meets no
    /// base) in [`HStepBuffers::h`]; c from page-locked host memory in the three-vector step.
    pub(super) fn h_step(
        &self,
        bufs: &mut HStepBuffers,
        c: Option<HostC<'_>>,
    ) -> Result<(), ProveError> {
        match c {
            None => Ok(self.ntt.h_step_in(bufs)?),
            Some(HostC::Registered(c)) => {
                let view = Pinned::of_pinnable(&c, cast::scalars_as_fr)
                    .ok_or_else(|| self.err(DeviceFault::NotPageLocked { what: "c" }))?;
                Ok(self.ntt.h_step_three_in(bufs, view)?)
            }
            Some(HostC::Lent(c)) => Ok(self.ntt.h_step_three_in(bufs, Pinned::new(&c))?),
            Some(HostC::Kept(c)) => Ok(self.ntt.h_step_three_in(bufs, Pinned::new(c))?),
        }
    }
}
