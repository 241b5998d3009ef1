//! The G1 stage on a CUDA device: uploads staged outside the GPU lock under a VRAM grant, the
//! H step and the MSMs under the lock, every big buffer freed before the lock is let go.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Projective, Scalar};
use group::Group;
use rayon::prelude::*;
use zkpipe_cuda::{Context, DeviceBuffer, Event, Stream};
use zkpipe_field::{cast, Fr};
use zkpipe_msm::{Bases, CudaMsm, DeviceBases, GpuCurve, ScalarKind, G1, G2};
use zkpipe_ntt::CudaNtt;
use zkpipe_pinned::PinnedPool;
use zkpipe_stream::{upload, GpuLock, VramBudget, VramGrant};

use crate::prover::{Assignment, G1Parts};
use crate::stats::Counters;
use crate::{ProveError, ProvingKey};

const FR: usize = 32;
const SLACK: usize = 64 << 20;
/// Scalars per staging copy (64 MiB): the memcpy of one overlaps the DMA of the previous.
const STAGE_CHUNK: usize = 1 << 21;

/// A key's points on one device, uploaded once and reused by every job of that key.
#[derive(Debug)]
pub(crate) struct ResidentKey {
    /// h's points and one identity (h_step leaves n coefficients; the last meets the identity).
    h: DeviceBases<G1>,
    l: DeviceBases<G1>,
    a: DeviceBases<G1>,
    b_g1: DeviceBases<G1>,
    b_g2: Option<DeviceBases<G2>>,
    _grant: VramGrant,
}

/// What the workers of one device share.
#[derive(Debug)]
pub(crate) struct DeviceShared {
    pub ctx: Arc<Context>,
    pub lock: Arc<GpuLock>,
    pub budget: VramBudget,
    pub pinned: PinnedPool,
    pub g2_on_gpu: bool,
    pub keep_resident: bool,
    baseline_used: usize,
    resident: Mutex<Option<(u64, Arc<ResidentKey>)>>,
    /// Bytes of NTT tables granted to this device's workers: kept for the workers' lifetime,
    /// so no job can ever use them.
    tables_held: AtomicUsize,
}

impl DeviceShared {
    pub fn new(
        ctx: Arc<Context>,
        margin: usize,
        cap: Option<usize>,
        g2_on_gpu: bool,
        keep_resident: bool,
        pinned_bytes: usize,
    ) -> Result<Self, zkpipe_cuda::Error> {
        let budget = VramBudget::from_device(&ctx, margin, cap)?;
        let pinned = PinnedPool::new(&ctx, pinned_bytes.max(2 * STAGE_CHUNK * FR));
        let m = ctx.mem_info()?;
        Ok(Self {
            lock: GpuLock::for_device(ctx.ordinal()),
            baseline_used: m.total - m.free,
            ctx,
            budget,
            pinned,
            g2_on_gpu,
            keep_resident,
            resident: Mutex::new(None),
            tables_held: AtomicUsize::new(0),
        })
    }

    pub fn sample(&self, stats: &Counters) {
        if let Ok(m) = self.ctx.mem_info() {
            stats.peak((m.total - m.free).saturating_sub(self.baseline_used));
        }
    }
}

/// Timing events around the H step (0..1) and the MSMs (2..3), read once they completed.
struct Marks([Event; 4]);

impl Marks {
    fn new(ctx: &Arc<Context>) -> Result<Self, zkpipe_cuda::Error> {
        let e = || Event::timed(ctx);
        Ok(Self([e()?, e()?, e()?, e()?]))
    }

    fn record(&self, i: usize, stream: &Stream) -> Result<(), zkpipe_cuda::Error> {
        self.0[i].record(stream)
    }

    /// Milliseconds on the device from mark `a` to mark `b`.
    fn ms(&self, a: usize, b: usize) -> Result<f64, zkpipe_cuda::Error> {
        Ok(f64::from(self.0[a].elapsed_ms(&self.0[b])?))
    }
}

fn g1_bytes(n: usize) -> usize {
    n * std::mem::size_of::<G1Affine>()
}

fn g2_bytes(n: usize) -> usize {
    n * std::mem::size_of::<blstrs::G2Affine>()
}

/// One worker's stage implementations on a device.
#[derive(Debug)]
pub(crate) struct GpuWorker {
    pub dev: Arc<DeviceShared>,
    copy: Stream,
    ntt: CudaNtt,
    msm: CudaMsm,
    /// Budget grants for the NTT's cached tables, one per domain size this worker has seen:
    /// they stay allocated after the job, so they stay granted.
    tables: Mutex<HashMap<u32, VramGrant>>,
}

impl GpuWorker {
    pub fn new(dev: Arc<DeviceShared>) -> Result<Self, ProveError> {
        let d = dev.ctx.ordinal();
        Ok(Self {
            copy: Stream::new(&dev.ctx).map_err(|e| ProveError::device(d, e))?,
            ntt: CudaNtt::new(&dev.ctx).map_err(|e| ProveError::device(d, e))?,
            msm: CudaMsm::new(&dev.ctx).map_err(|e| ProveError::device(d, e))?,
            tables: Mutex::new(HashMap::new()),
            dev,
        })
    }

    fn ordinal(&self) -> usize {
        self.dev.ctx.ordinal()
    }

    fn err(&self, e: impl std::fmt::Display) -> ProveError {
        ProveError::device(self.ordinal(), e)
    }

    /// Device bytes of a key's points.
    fn key_bytes(&self, key: &ProvingKey) -> usize {
        let [h, l, a, b1, b2] = key.query_lens();
        let g2 = if self.dev.g2_on_gpu { g2_bytes(b2) } else { 0 };
        g1_bytes(h + 1 + l + a + b1) + g2
    }

    /// Peak device bytes of one job, besides the key's points (`+ bases` when not resident).
    fn job_bytes(&self, key: &ProvingKey, resident: bool) -> usize {
        let n = key.domain_size();
        let [_, l, a, b1, b2] = key.query_lens();
        let scalars = (l + a + b1) * FR;
        let largest = n.max(l).max(a).max(b1);
        let mut work = self.msm.resident_bytes::<G1>(largest);
        if self.dev.g2_on_gpu {
            work = work.max(self.msm.resident_bytes::<G2>(b2));
        }
        let bases = if resident {
            0
        } else {
            g1_bytes(largest).max(if self.dev.g2_on_gpu { g2_bytes(b2) } else { 0 })
        };
        scalars + (4 * n * FR).max(n * FR + work + bases) + SLACK
    }

    /// The key on this device, uploading it the first time; `None` when the budget cannot
    /// hold it beside a job (then each MSM uploads its bases, inside the lock).
    fn resident(&self, key: &ProvingKey) -> Result<Option<Arc<ResidentKey>>, ProveError> {
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
        let bytes = self.key_bytes(key);
        let log_n = key.domain_size().trailing_zeros();
        let mine = match self.tables.lock().map(|t| t.contains_key(&log_n)) {
            Ok(true) => 0,
            _ => self.ntt.table_bytes(log_n),
        };
        let tables = self.dev.tables_held.load(Ordering::Relaxed) + mine;
        if bytes + tables + self.job_bytes(key, true) > self.dev.budget.capacity() {
            tracing::warn!(
                device = self.ordinal(),
                key_bytes = bytes,
                capacity = self.dev.budget.capacity(),
                "the proving key does not fit beside a job: bases are uploaded for every MSM"
            );
            return Ok(None);
        }
        let grant = self.dev.budget.acquire(bytes, None)?;
        let t = Instant::now();
        let up = |b: &Bases<G1Affine>| self.msm.upload_bases::<G1>(b).map_err(|e| self.err(e));
        let k = Arc::new(ResidentKey {
            h: self
                .msm
                .upload_bases_padded::<G1>(&key.h, 1)
                .map_err(|e| self.err(e))?,
            l: up(&key.l)?,
            a: up(&key.a)?,
            b_g1: up(&key.b_g1)?,
            b_g2: if self.dev.g2_on_gpu {
                Some(
                    self.msm
                        .upload_bases::<G2>(&key.b_g2)
                        .map_err(|e| self.err(e))?,
                )
            } else {
                None
            },
            _grant: grant,
        });
        tracing::info!(
            device = self.ordinal(),
            key = key.id(),
            bytes,
            pinned = key.is_pinned(),
            ms = t.elapsed().as_secs_f64() * 1e3,
            "proving key resident on the device"
        );
        *slot = Some((key.id(), Arc::clone(&k)));
        Ok(Some(k))
    }

    /// Copies `v` to a new device buffer through pinned staging buffers from the device's
    /// pool, chunk by chunk on this worker's copy stream (the memcpy of a chunk overlaps the
    /// DMA of the one before); returns once the copies are done. `pad` zeros follow `v`.
    fn upload(
        &self,
        v: &[Scalar],
        pad: usize,
        stats: &Counters,
    ) -> Result<DeviceBuffer<Fr>, ProveError> {
        let t = Instant::now();
        let src = cast::scalars_as_fr(v);
        let mut dev =
            DeviceBuffer::<Fr>::alloc(&self.dev.ctx, src.len() + pad).map_err(|e| self.err(e))?;
        if pad > 0 {
            dev.zero_async(&self.copy).map_err(|e| self.err(e))?;
        }
        for (i, chunk) in src.chunks(STAGE_CHUNK).enumerate() {
            let mut host = self
                .dev
                .pinned
                .acquire::<Fr>(chunk.len(), std::time::Duration::from_secs(60))
                .map_err(|e| self.err(e))?;
            host.par_chunks_mut(1 << 14)
                .zip(chunk.par_chunks(1 << 14))
                .for_each(|(d, s)| d.copy_from_slice(s));
            upload(&self.copy, host, &mut dev, i * STAGE_CHUNK)
                .map_err(|e| self.err(e))?
                .release();
        }
        self.copy.synchronize().map_err(|e| self.err(e))?;
        Counters::add(&stats.upload_ns, t.elapsed());
        stats.upload_bytes.fetch_add(
            std::mem::size_of_val(v) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(dev)
    }

    /// One query's MSM: with its resident points, or with its points uploaded now (from the
    /// page-locked key, `pad` identities after them) and freed after it.
    #[allow(clippy::too_many_arguments)]
    fn query_msm<C: GpuCurve>(
        &self,
        resident: Option<&DeviceBases<C>>,
        host: &Bases<C::Affine>,
        pad: usize,
        scalars: &DeviceBuffer<Fr>,
        kind: ScalarKind,
        query: &'static str,
    ) -> Result<C::Projective, ProveError> {
        let e = |e: zkpipe_msm::CudaError| ProveError::Msm {
            query,
            source: zkpipe_msm::MsmError::device(e),
        };
        match resident {
            Some(b) => self.msm.msm_device::<C>(b, scalars, kind).map_err(e),
            None => {
                let b = self.msm.upload_bases_padded::<C>(host, pad).map_err(e)?;
                self.msm.msm_device::<C>(&b, scalars, kind).map_err(e)
            }
        }
    }

    /// The H step and the G1 MSMs (and B2 when G2 runs on the GPU) of one job.
    pub fn g1_stage(
        &self,
        job: u64,
        key: &ProvingKey,
        abc: [Vec<Scalar>; 3],
        z: &Assignment,
        stats: &Counters,
    ) -> Result<(G1Parts, Option<G2Projective>), ProveError> {
        let n = key.domain_size();
        let resident = self.resident(key)?;
        let needed = self.job_bytes(key, resident.is_some());
        let log_n = n.trailing_zeros();
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        let table_bytes = match tables.contains_key(&log_n) {
            true => 0,
            false => self.ntt.table_bytes(log_n),
        };
        // Tables stay granted, to this worker and to the others: a job must fit beside all.
        let capacity = self.dev.budget.capacity();
        let held = self.dev.tables_held.load(Ordering::Relaxed);
        if needed + table_bytes + held > capacity {
            return Err(ProveError::TooLargeForDevice {
                device: self.ordinal(),
                needed: needed + table_bytes + held,
                capacity,
            });
        }
        if table_bytes > 0 {
            tables.insert(log_n, self.dev.budget.acquire(table_bytes, None)?);
            self.dev
                .tables_held
                .fetch_add(table_bytes, Ordering::Relaxed);
        }
        drop(tables);
        let grant = self.dev.budget.acquire(needed, None)?;
        // Staging, outside the lock: a, b, c and the MSM scalars go to the device.
        let t = Instant::now();
        let [a, b, c] = abc;
        let abc_dev = if n > 1 {
            let m = a.len();
            Some([
                self.upload(&a, n - m, stats)?,
                self.upload(&b, n - m, stats)?,
                self.upload(&c, n - m, stats)?,
            ])
        } else {
            None
        };
        // The MSM scalars go up now too; the bases are resident, or uploaded per MSM inside
        // the lock (straight from the page-locked key).
        let scalars = [
            self.upload(z.aux(), 0, stats)?,
            self.upload(&z.a_density.select(&z.z), 0, stats)?,
            self.upload(&z.b_density.select(&z.z), 0, stats)?,
        ];
        let staged_bytes = FR
            * (abc_dev.as_ref().map_or(0, |_| 3 * a.len())
                + z.aux().len()
                + z.a_density.selected()
                + z.b_density.selected());
        Counters::add(&stats.stage_ns, t.elapsed());
        self.dev.sample(stats);
        tracing::debug!(job, n, bytes = needed, "staged");

        let guard = self.dev.lock.lock();
        let t = Instant::now();
        let marks = Marks::new(&self.dev.ctx).map_err(|e| self.err(e))?;
        marks
            .record(0, self.ntt.stream())
            .map_err(|e| self.err(e))?;
        let h_dev = match abc_dev {
            Some([a, b, c]) => {
                let h = self.ntt.h_step_device(a, b, c)?;
                Some(h)
            }
            None => None,
        };
        marks
            .record(1, self.ntt.stream())
            .map_err(|e| self.err(e))?;
        self.ntt.synchronize()?;
        Counters::add(&stats.h_ns, t.elapsed());
        self.dev.sample(stats);
        let t = Instant::now();
        marks
            .record(2, self.msm.stream())
            .map_err(|e| self.err(e))?;
        let [l_s, a_s, b_s] = scalars;
        let k = resident.as_deref();
        let h = match &h_dev {
            Some(h) => {
                self.query_msm::<G1>(k.map(|k| &k.h), &key.h, 1, h, ScalarKind::Dense, "h")?
            }
            None => G1Projective::identity(),
        };
        drop(h_dev);
        let auto = ScalarKind::Auto;
        let parts = G1Parts {
            h,
            l: self.query_msm::<G1>(k.map(|k| &k.l), &key.l, 0, &l_s, auto, "l")?,
            a: self.query_msm::<G1>(k.map(|k| &k.a), &key.a, 0, &a_s, auto, "a")?,
            b1: self.query_msm::<G1>(k.map(|k| &k.b_g1), &key.b_g1, 0, &b_s, auto, "b_g1")?,
        };
        drop((l_s, a_s));
        let b2 = if self.dev.g2_on_gpu {
            let res = k.and_then(|k| k.b_g2.as_ref());
            Some(self.query_msm::<G2>(res, &key.b_g2, 0, &b_s, auto, "b_g2")?)
        } else {
            None
        };
        drop(b_s);
        marks
            .record(3, self.msm.stream())
            .map_err(|e| self.err(e))?;
        Counters::add(&stats.g1_ns, t.elapsed());
        self.dev.sample(stats);
        self.dev.ctx.synchronize().map_err(|e| self.err(e))?;
        let lock_ms = guard.held_for().as_secs_f64() * 1e3;
        Counters::add(&stats.lock_ns, guard.held_for());
        drop(guard);
        drop(grant);
        let h_gpu_ms = marks.ms(0, 1).map_err(|e| self.err(e))?;
        let msm_gpu_ms = marks.ms(2, 3).map_err(|e| self.err(e))?;
        Counters::add_ms(&stats.h_gpu_ns, h_gpu_ms);
        Counters::add_ms(&stats.msm_gpu_ns, msm_gpu_ms);
        let span = tracing::Span::current();
        span.record("upload_bytes", staged_bytes);
        span.record("h_gpu_ms", h_gpu_ms);
        span.record("msm_gpu_ms", msm_gpu_ms);
        tracing::info!(
            job,
            n,
            upload_bytes = staged_bytes,
            h_gpu_ms,
            msm_gpu_ms,
            lock_ms,
            "g1 stage done"
        );
        Ok((parts, b2))
    }
}
