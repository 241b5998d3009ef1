//! MSMs enqueued back to back: an [`MsmBatch`] holds one Pippenger workspace (sized for a
//! chunk of points, so that its device memory does not grow with n) and enqueues dense MSMs
//! and split MSMs ([`crate::SplitScalars`]) on the MSM stream without waiting for any of them.
//! Bases are resident on the device or streamed from pinned host memory through two
//! alternating buffers. Each MSM's window and partial results are copied into pinned memory
//! behind it; [`MsmBatch::finish`] waits once, and [`MsmResults`] combines on the host, after
//! the caller has let the GPU go.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use group::Group;
use rayon::prelude::*;
use zkpipe_cuda::{CopyLog, DeviceBuffer, Event, StageClock, Stream, Timing};
use zkpipe_field::Fr;
use zkpipe_pinned::{PinnedBuffer, PinnedPool};
use zkpipe_stream::{copy_scope, download, upload, InFlight, Pinned};

use crate::cuda::{CudaError, CudaMsm, DeviceBases, GpuCurve, Multiples};
use crate::kernels::{BucketWrite, DensityMap, MsmKernels, SplitMaps};
use crate::pippenger::{combine, BucketRun, Capacity, Digits, Plan, Workspace};
use crate::split::SplitChunk;
use crate::{Bases, MsmError, SplitQuery, SplitScalars};

/// Groups the partial sums of the ones are folded into before they are read back.
const ONES_GROUPS: usize = 256;

/// Bytes of points gathered into one pinned buffer at a time: a chunk's points cross the link
/// in pieces of about this size, the host gathering the next while the link copies one.
const GATHER_PIECE_BYTES: usize = 64 << 20;

/// Where a batch's bases are while its kernels read them, for sizing its device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasesAt {
    /// Resident on the device: the batch holds no point buffers.
    Device,
    /// Streamed from host memory through the batch's two point buffers.
    Host,
}

/// Where an MSM's bases are.
#[derive(Debug)]
pub enum BaseSource<'a, C: GpuCurve> {
    /// On the device (a resident key).
    Resident(&'a DeviceBases<C>),
    /// In pinned host memory: streamed through the batch's two point buffers, chunk by chunk.
    Pinned(Pinned<'a, C::GpuAffine>),
    /// In pageable host memory: streamed the same way, at pageable speed.
    Pageable(&'a [C::GpuAffine]),
    /// In host memory, only the points whose scalar is not zero gathered chunk by chunk into
    /// pinned staging memory and streamed (split MSMs only).
    Gathered(Gathered<'a, C>),
}

/// A query's points in host memory, of which a split MSM streams only those of the
/// variables whose value is not zero: it sums over `needed` ([`SplitQuery::nonzero_only`] of
/// the query the points are numbered by), and each chunk's points are gathered into pinned
/// memory from `staging` before they cross the link.
#[derive(Debug)]
pub struct Gathered<'a, C: GpuCurve> {
    all: &'a [C::GpuAffine],
    whole: &'a SplitQuery,
    needed: &'a SplitQuery,
    staging: &'a PinnedPool,
    wait: Duration,
    /// Points gathered into one pinned buffer at a time.
    piece_points: usize,
}

impl<'a, C: GpuCurve> Gathered<'a, C> {
    /// The points `all` of the variables `whole` selects (by rank), to be summed over the
    /// variables of `needed` (which `whole` must cover), staged through `staging`, waiting at
    /// most `wait` for its memory.
    pub fn new(
        all: &'a [C::GpuAffine],
        whole: &'a SplitQuery,
        needed: &'a DeviceQuery,
        staging: &'a PinnedPool,
        wait: Duration,
    ) -> Result<Self, CudaError> {
        if all.len() != whole.selected() {
            let e = MsmError::DensityCount {
                selected: whole.selected(),
                bases: all.len(),
            };
            return Err(e.into());
        }
        if !whole.covers(needed.host()) {
            return Err(CudaError::Gather(
                "the variables summed over are not all among those the points are for",
            ));
        }
        Ok(Self {
            all,
            whole,
            needed: needed.host(),
            staging,
            wait,
            piece_points: GATHER_PIECE_BYTES / std::mem::size_of::<C::GpuAffine>().max(1),
        })
    }

    /// The same, gathering at most `points` points (at least 32) into a pinned buffer at a
    /// time (by default about 64 MiB of them).
    pub fn in_pieces_of(self, points: usize) -> Self {
        Self {
            piece_points: points.max(32),
            ..self
        }
    }
}

impl<'a, C: GpuCurve> BaseSource<'a, C> {
    /// Bases streamed from where they lie in page-locked host memory; `None` while they are
    /// not page-locked ([`Bases::pin`]).
    pub fn pinned(bases: &'a Bases<C::Affine>) -> Option<Self> {
        Pinned::of_pinnable(bases.pinnable(), C::view).map(BaseSource::Pinned)
    }

    /// Bases streamed from host memory: from where they are page-locked if they are
    /// ([`BaseSource::pinned`]), else from pageable memory.
    pub fn host(bases: &'a Bases<C::Affine>) -> Self {
        Self::pinned(bases).unwrap_or(BaseSource::Pageable(C::view(bases.points())))
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        match self {
            BaseSource::Resident(b) => b.len(),
            BaseSource::Pinned(p) => p.len(),
            BaseSource::Pageable(p) => p.len(),
            BaseSource::Gathered(g) => g.needed.selected(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A split assignment's tail on the device: scalars and variable indices.
#[derive(Debug)]
pub struct DeviceSplit {
    host: Arc<SplitScalars>,
    tail: DeviceBuffer<Fr>,
    index: DeviceBuffer<u32>,
}

impl DeviceSplit {
    /// From device copies of `host`'s tail scalars and indices (as the caller uploaded them,
    /// the copies complete before any MSM of the batch reads them).
    pub fn new(
        host: Arc<SplitScalars>,
        tail: DeviceBuffer<Fr>,
        index: DeviceBuffer<u32>,
    ) -> Result<Self, CudaError> {
        let len = host.tail().len();
        for (what, got) in [("tail scalars", tail.len()), ("tail indices", index.len())] {
            if got != len {
                return Err(CudaError::BufferTooSmall {
                    what,
                    len: got,
                    needed: len,
                });
            }
        }
        Ok(Self { host, tail, index })
    }

    /// The host split.
    pub fn host(&self) -> &SplitScalars {
        &self.host
    }

    /// The tail's scalars on the device.
    pub fn device_tail(&self) -> &DeviceBuffer<Fr> {
        &self.tail
    }
}

/// A query's bitmaps on the device ([`SplitQuery::bitmaps`]).
#[derive(Debug)]
pub struct DeviceQuery {
    host: SplitQuery,
    maps: [DeviceBuffer<u32>; 4],
}

impl DeviceQuery {
    /// From device copies of `host`'s four bitmaps, in [`SplitQuery::bitmaps`]' order.
    pub fn new(host: SplitQuery, maps: [DeviceBuffer<u32>; 4]) -> Result<Self, CudaError> {
        for (dev, h) in maps.iter().zip(host.bitmaps()) {
            if dev.len() != h.len() {
                return Err(CudaError::BufferTooSmall {
                    what: "query bitmap",
                    len: dev.len(),
                    needed: h.len(),
                });
            }
        }
        Ok(Self { host, maps })
    }

    /// The host query.
    pub fn host(&self) -> &SplitQuery {
        &self.host
    }
}

/// One enqueued MSM of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(usize);

/// Results of one MSM on their way to pinned memory.
#[derive(Debug)]
struct Pending<J: bytemuck::Pod> {
    /// The window results on their way to pinned memory.
    windows: Option<WindowSums<InFlight<PinnedBuffer<J>>>>,
    ones: Option<InFlight<PinnedBuffer<J>>>,
    /// Device buffers the kernels and copies still use.
    _device: Vec<DeviceBuffer<J>>,
}

/// The device memory of a batch: the Pippenger workspace for chunks of up to a number of
/// points, the two point buffers of streamed bases (allocated on first use) and the copy
/// stream. A caller can keep it from one batch to the next ([`CudaMsm::batch_in`],
/// [`MsmBatch::finish_keeping`]), sparing the allocations and frees of every batch.
pub struct BatchMemory<C: GpuCurve> {
    plan: Plan,
    ws: Workspace<C::Jacobian>,
    slots: Option<[DeviceBuffer<C::GpuAffine>; 2]>,
    copy: Stream,
}

impl<C: GpuCurve> std::fmt::Debug for BatchMemory<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchMemory")
            .field("chunk", &self.plan.n)
            .field("streams_bases", &self.slots.is_some())
            .finish()
    }
}

impl<C: GpuCurve> BatchMemory<C> {
    /// Points per chunk.
    pub fn chunk(&self) -> usize {
        self.plan.n
    }
}

/// MSMs of one curve enqueued back to back on the MSM stream (see the module's text).
#[derive(Debug)]
pub struct MsmBatch<'m, C: GpuCurve> {
    msm: &'m CudaMsm,
    plan: Plan,
    /// Always present until [`MsmBatch::finish_keeping`] hands it back.
    mem: Option<BatchMemory<C>>,
    used: [Option<Event>; 2],
    ones_threads: usize,
    pending: Vec<Pending<C::Jacobian>>,
    /// The streamed bases' copies (bytes always; times when asked for).
    copies: CopyLog,
    /// Host time spent gathering points ([`BaseSource::Gathered`]).
    gathering: Duration,
}

impl CudaMsm {
    /// The device memory of batches whose Pippenger runs over chunks of at most `chunk`
    /// points.
    pub fn batch_memory<C: GpuCurve>(&self, chunk: usize) -> Result<BatchMemory<C>, CudaError> {
        self.batch_memory_for(chunk, None)
    }

    /// As [`CudaMsm::batch_memory`], also holding the Pippenger of dense MSMs over resident
    /// bases that carry `multiples`.
    pub fn batch_memory_for<C: GpuCurve>(
        &self,
        chunk: usize,
        multiples: Option<Multiples>,
    ) -> Result<BatchMemory<C>, CudaError> {
        if chunk < 32 {
            return Err(CudaError::Chunk { chunk });
        }
        let plans = self.batch_plans(chunk, multiples);
        Ok(BatchMemory {
            ws: Workspace::alloc_for(self.context(), &plans)?,
            plan: plans[0],
            slots: None,
            copy: Stream::new(self.context())?,
        })
    }

    /// The plans a batch's workspace holds: its own, and the one of bases with `multiples`.
    fn batch_plans(&self, chunk: usize, multiples: Option<Multiples>) -> Vec<Plan> {
        let own = self.plan(chunk);
        let with =
            multiples.map(|m| Plan::with_bits(chunk, m.window_bits()).with_copies(m.copies()));
        std::iter::once(own).chain(with).collect()
    }

    /// A batch whose Pippenger runs over chunks of at most `chunk` points (each MSM's points
    /// in chunks of that size, accumulated into the same buckets).
    pub fn batch<C: GpuCurve>(&self, chunk: usize) -> Result<MsmBatch<'_, C>, CudaError> {
        Ok(self.batch_in(self.batch_memory(chunk)?))
    }

    /// A batch in memory kept from an earlier one ([`MsmBatch::finish_keeping`]).
    pub fn batch_in<C: GpuCurve>(&self, mem: BatchMemory<C>) -> MsmBatch<'_, C> {
        MsmBatch {
            msm: self,
            plan: mem.plan,
            mem: Some(mem),
            used: [None, None],
            ones_threads: ones_threads(self),
            pending: Vec::new(),
            copies: CopyLog::off(),
            gathering: Duration::ZERO,
        }
    }

    /// Device bytes of a batch of chunks of `chunk` points running `msms` MSMs: the
    /// workspace, each MSM's results, and the two point buffers when bases are streamed.
    pub fn batch_bytes<C: GpuCurve>(&self, chunk: usize, msms: usize, bases: BasesAt) -> usize {
        self.batch_bytes_for::<C>(chunk, msms, bases, None)
    }

    /// As [`CudaMsm::batch_bytes`], for memory from [`CudaMsm::batch_memory_for`].
    pub fn batch_bytes_for<C: GpuCurve>(
        &self,
        chunk: usize,
        msms: usize,
        bases: BasesAt,
        multiples: Option<Multiples>,
    ) -> usize {
        let jac = std::mem::size_of::<C::Jacobian>();
        let plans = self.batch_plans(chunk.max(32), multiples);
        let out_len = plans.iter().map(Plan::out_len).max().unwrap_or(0);
        let results = (out_len + ones_threads(self) + ONES_GROUPS) * jac;
        let slots = match bases {
            BasesAt::Host => 2 * plans[0].n * std::mem::size_of::<C::GpuAffine>(),
            BasesAt::Device => 0,
        };
        Capacity::of(&plans).bytes(jac) + msms * results + slots
    }

    /// Uploads a split's tail (synchronous copies, then a wait for the device: for tests and
    /// benchmarks; an engine stages it through pinned memory and calls [`DeviceSplit::new`]).
    pub fn upload_split(&self, split: Arc<SplitScalars>) -> Result<DeviceSplit, CudaError> {
        let ctx = self.context();
        let tail = DeviceBuffer::from_host(ctx, split.tail())?;
        let index = DeviceBuffer::from_host(ctx, split.tail_index())?;
        ctx.synchronize()?;
        DeviceSplit::new(split, tail, index)
    }

    /// Uploads a query's bitmaps (as [`CudaMsm::upload_split`]).
    pub fn upload_query(&self, query: SplitQuery) -> Result<DeviceQuery, CudaError> {
        let ctx = self.context();
        let [a, b, c, d] = query.bitmaps();
        let up = |v: &[u32]| DeviceBuffer::from_host(ctx, v);
        let maps = [up(a)?, up(b)?, up(c)?, up(d)?];
        ctx.synchronize()?;
        DeviceQuery::new(query, maps)
    }
}

/// Threads of the ones kernel (and so its partial sums).
fn ones_threads(msm: &CudaMsm) -> usize {
    msm.context().info().sm_count.max(1) as usize * 512
}

impl<C: GpuCurve> MsmBatch<'_, C> {
    /// Times the copies of streamed bases from here on with CUDA events
    /// ([`MsmBatch::take_copies`]); their bytes are counted either way.
    pub fn time_copies(&mut self) {
        let mut log = CopyLog::new(self.msm.context(), Timing::Enabled);
        log.append(std::mem::replace(&mut self.copies, CopyLog::off()));
        self.copies = log;
    }

    /// The copies of streamed bases enqueued so far (read their times once they are done).
    pub fn take_copies(&mut self) -> CopyLog {
        std::mem::replace(&mut self.copies, CopyLog::off())
    }

    /// The host time spent so far gathering points ([`BaseSource::Gathered`]), and none
    /// after.
    pub fn take_gathering(&mut self) -> Duration {
        std::mem::take(&mut self.gathering)
    }

    /// Enqueues the sum over i < n of `scalars[i] · bases[i]` (the scalars on the device, canonical,
    /// in Montgomery form; `scalars` may be longer than n, its rest unused).
    pub fn dense(
        &mut self,
        bases: BaseSource<'_, C>,
        scalars: &DeviceBuffer<Fr>,
        n: usize,
    ) -> Result<Ticket, CudaError> {
        if matches!(bases, BaseSource::Gathered(_)) {
            return Err(CudaError::Gather(
                "points gathered by a query's values are for split MSMs; a dense MSM reads every point",
            ));
        }
        if bases.len() != n || scalars.len() < n {
            let e = MsmError::LengthMismatch {
                bases: bases.len(),
                scalars: scalars.len().min(n),
            };
            return Err(e.into());
        }
        let step = self.plan.n;
        let chunks: Vec<(usize, usize)> = (0..n)
            .step_by(step)
            .map(|lo| (lo, (lo + step).min(n)))
            .collect();
        let multiples = match &bases {
            BaseSource::Resident(r) => r.multiples(),
            _ => None,
        };
        let run = match multiples {
            Some(m) => self.select_multiples(n.min(step), m)?,
            None => self.select(n.min(step))?,
        };
        let stride = bases.len();
        let mut write = BucketWrite::Overwrite;
        self.each_chunk(&bases, &chunks, &[], |ws, c| {
            let (lo, hi) = chunks[c.index];
            let v_lo = match c.at {
                BasesAt::Device => lo,
                BasesAt::Host => 0,
            };
            let run = BucketRun {
                bases: c.bases,
                digits: Digits::Dense {
                    scalars,
                    lo,
                    v_lo,
                    stride,
                },
                n: hi - lo,
                write: std::mem::replace(&mut write, BucketWrite::Add),
                points_ready: c.ready,
            };
            ws.buckets::<C>(c.kernels, c.stream, run, &mut StageClock::off())
        })?;
        let windows = (!chunks.is_empty()).then_some(run);
        self.results(windows, None)
    }

    /// Enqueues the split MSM of `query` over `split`: the sum of bases[rank(v)] over the
    /// selected variables v equal to one, plus a Pippenger over the selected tail.
    pub fn split(
        &mut self,
        bases: BaseSource<'_, C>,
        split: &DeviceSplit,
        query: &DeviceQuery,
    ) -> Result<Ticket, CudaError> {
        let q = query.host();
        if let BaseSource::Gathered(g) = &bases {
            if !std::ptr::eq(g.needed, q) {
                return Err(CudaError::Gather(
                    "the points were gathered for another query than the one summed",
                ));
            }
        }
        if bases.len() != q.selected() {
            let e = MsmError::DensityCount {
                selected: q.selected(),
                bases: bases.len(),
            };
            return Err(e.into());
        }
        if q.words() != split.host().len().div_ceil(32) {
            let e = MsmError::DensityLength {
                bitmap: q.words() * 32,
                scalars: split.host().len(),
            };
            return Err(e.into());
        }
        let max_bases = match bases {
            BaseSource::Resident(_) => usize::MAX,
            BaseSource::Pinned(_) | BaseSource::Pageable(_) | BaseSource::Gathered(_) => {
                self.plan.n
            }
        };
        let chunks: Vec<SplitChunk> = q.chunks(split.host(), max_bases, self.plan.n);
        let msm = self.msm;
        let ctx = msm.context();
        let mut partial = DeviceBuffer::<C::Jacobian>::alloc(ctx, self.ones_threads)?;
        partial.zero_async(msm.stream())?;
        let [words, prefix, selected, selected_prefix] = &query.maps;
        let maps = SplitMaps {
            density: DensityMap { words, prefix },
            ones: DensityMap {
                words: selected,
                prefix: selected_prefix,
            },
        };
        let longest_tail = chunks.iter().map(|c| c.tail.len()).max().unwrap_or(0);
        let run = self.select(longest_tail)?;
        let mut tail_write = BucketWrite::Overwrite;
        let chunk_ranges: Vec<(usize, usize)> = chunks
            .iter()
            .map(|c| (c.bases.start, c.bases.end))
            .collect();
        let chunk_words: Vec<Range<usize>> = chunks.iter().map(|c| c.words.clone()).collect();
        self.each_chunk(&bases, &chunk_ranges, &chunk_words, |ws, at| {
            let c = &chunks[at.index];
            let b_lo = match at.at {
                BasesAt::Device => 0,
                BasesAt::Host => c.bases.start,
            };
            if !c.tail.is_empty() {
                let run = BucketRun {
                    bases: at.bases,
                    digits: Digits::Tail {
                        scalars: &split.tail,
                        index: &split.index,
                        map: maps.density,
                        lo: c.tail.start,
                        b_lo,
                    },
                    n: c.tail.len(),
                    write: std::mem::replace(&mut tail_write, BucketWrite::Add),
                    points_ready: at.ready,
                };
                ws.buckets::<C>(at.kernels, at.stream, run, &mut StageClock::off())?;
            } else if let Some(e) = at.ready {
                at.stream.wait(e)?;
            }
            let ck = C::kernels(at.kernels);
            ck.ones(
                at.stream,
                at.bases,
                maps,
                c.words.clone(),
                b_lo,
                &mut partial,
            )
        })?;
        let windows = (tail_write == BucketWrite::Add).then_some(run);
        self.results(windows, Some(partial))
    }

    /// Runs `work` for each chunk `(lo, hi)` of the bases, with the device buffer holding
    /// them: the resident buffer, or one of the two point buffers after its copy (the kernels
    /// that read it wait for `ready`; the copy into a buffer waits for the kernels that read
    /// it two chunks before). Gathered bases are gathered from the bitmap words `words[i]`
    /// of chunk i. Returns once the copies are enqueued or done (the kernels may still run).
    fn each_chunk<W>(
        &mut self,
        bases: &BaseSource<'_, C>,
        chunks: &[(usize, usize)],
        words: &[Range<usize>],
        mut work: W,
    ) -> Result<(), CudaError>
    where
        W: FnMut(&mut Workspace<C::Jacobian>, ChunkOnDevice<'_, C>) -> Result<(), CudaError>,
    {
        let msm = self.msm;
        let (s, k) = (msm.stream(), msm.kernels());
        match bases {
            BaseSource::Resident(r) => {
                let buf = CudaMsm::bases_buffer(r);
                let ws = &mut memory(&mut self.mem)?.ws;
                for index in 0..chunks.len() {
                    let chunk = ChunkOnDevice {
                        index,
                        kernels: k,
                        stream: s,
                        bases: buf,
                        at: BasesAt::Device,
                        ready: None,
                    };
                    work(ws, chunk)?;
                }
                Ok(())
            }
            BaseSource::Gathered(g) => {
                if words.len() != chunks.len() {
                    return Err(CudaError::Gather(
                        "points gathered by a query's values are for split MSMs",
                    ));
                }
                let mem = memory(&mut self.mem)?;
                alloc_point_slots(mem, msm)?;
                let BatchMemory {
                    slots, copy, ws, ..
                } = mem;
                let slots = slots.as_mut().ok_or(CudaError::Chunk { chunk: 0 })?;
                let point = std::mem::size_of::<C::GpuAffine>();
                for (i, &(lo, hi)) in chunks.iter().enumerate() {
                    let slot = i % 2;
                    if let Some(e) = &self.used[slot] {
                        copy.wait(e)?;
                    }
                    // In pieces: the host gathers the next while the link copies this one.
                    let mut at = 0;
                    for piece in g.needed.pieces(words[i].clone(), g.piece_points) {
                        let mut host = g
                            .staging
                            .acquire::<C::GpuAffine>(piece.points, g.wait)
                            .map_err(CudaError::Pinned)?;
                        let t = std::time::Instant::now();
                        let got = g.needed.gather(g.whole, g.all, piece.words, &mut host)?;
                        self.gathering += t.elapsed();
                        if got != piece.points || lo + at + got > hi {
                            return Err(CudaError::BufferTooSmall {
                                what: "gathered points",
                                len: lo + at + got,
                                needed: hi,
                            });
                        }
                        let start = self.copies.start(copy)?;
                        upload(copy, host, &mut slots[slot], at)
                            .map_err(CudaError::Stream)?
                            .release();
                        self.copies.end(start, copy, (got * point) as u64)?;
                        at += got;
                    }
                    if lo + at != hi {
                        return Err(CudaError::BufferTooSmall {
                            what: "gathered points",
                            len: lo + at,
                            needed: hi,
                        });
                    }
                    let ready = copy.record()?;
                    work(ws, ChunkOnDevice::streamed(i, k, s, &slots[slot], &ready))?;
                    self.used[slot] = Some(s.record()?);
                }
                Ok(())
            }
            BaseSource::Pinned(_) | BaseSource::Pageable(_) => {
                let mem = memory(&mut self.mem)?;
                alloc_point_slots(mem, msm)?;
                let BatchMemory {
                    slots, copy, ws, ..
                } = mem;
                let used = &mut self.used;
                let log = &mut self.copies;
                let copy = &*copy;
                let slots = slots.as_mut().ok_or(CudaError::Chunk { chunk: 0 })?;
                let ran = copy_scope(|sc| -> Result<(), CudaError> {
                    for (i, &(lo, hi)) in chunks.iter().enumerate() {
                        let slot = i % 2;
                        if let Some(e) = &used[slot] {
                            copy.wait(e)?;
                        }
                        let short = CudaError::BufferTooSmall {
                            what: "bases",
                            len: bases.len(),
                            needed: hi,
                        };
                        let dst = &mut slots[slot];
                        let start = log.start(copy)?;
                        match bases {
                            BaseSource::Pinned(p) => {
                                sc.upload(copy, p.range(lo..hi).ok_or(short)?, dst, 0)?
                            }
                            BaseSource::Pageable(p) => {
                                sc.upload_slice(copy, p.get(lo..hi).ok_or(short)?, dst, 0)?
                            }
                            BaseSource::Resident(_) | BaseSource::Gathered(_) => return Err(short),
                        }
                        let bytes = (hi - lo) * std::mem::size_of::<C::GpuAffine>();
                        log.end(start, copy, bytes as u64)?;
                        let ready = copy.record()?;
                        work(ws, ChunkOnDevice::streamed(i, k, s, &slots[slot], &ready))?;
                        used[slot] = Some(s.record()?);
                    }
                    Ok(())
                });
                ran??;
                Ok(())
            }
        }
    }

    /// The Pippenger plan of an MSM whose runs sum at most `n` points each: the one its size
    /// calls for when the batch's workspace holds it, else the workspace's own.
    fn select(&mut self, n: usize) -> Result<Plan, CudaError> {
        let wanted = self.msm.plan(n.clamp(1, self.plan.n));
        Ok(memory(&mut self.mem)?.ws.select(wanted))
    }

    /// The Pippenger plan of an MSM whose runs sum at most `n` points each over bases with
    /// `multiples`: theirs when the workspace holds it ([`CudaMsm::batch_memory_for`]), else,
    /// with a warning, the workspace's own, which reads only the points themselves.
    fn select_multiples(&mut self, n: usize, multiples: Multiples) -> Result<Plan, CudaError> {
        let n = n.clamp(1, self.plan.n);
        let wanted = Plan::with_bits(n, multiples.window_bits()).with_copies(multiples.copies());
        let run = memory(&mut self.mem)?.ws.select(wanted);
        if run.copies != wanted.copies || run.c != wanted.c {
            tracing::warn!(
                window_bits = multiples.window_bits(),
                copies = multiples.copies(),
                "the batch's workspace does not hold the plan of the bases' multiples \
                 (make it with batch_memory_for): the MSM runs without them"
            );
        }
        Ok(run)
    }

    /// Enqueues the window reduction under `windows`' plan (when the MSM had a Pippenger
    /// part) and the fold of the ones' partial sums, and their copies into pinned memory.
    fn results(
        &mut self,
        windows: Option<Plan>,
        partial: Option<DeviceBuffer<C::Jacobian>>,
    ) -> Result<Ticket, CudaError> {
        let msm = self.msm;
        let ctx = msm.context();
        let (s, k) = (msm.stream(), msm.kernels());
        let mut device = Vec::new();
        let win = match windows {
            Some(plan) => {
                let mut out = DeviceBuffer::<C::Jacobian>::alloc(ctx, plan.out_len())?;
                memory(&mut self.mem)?
                    .ws
                    .windows::<C>(k, s, &mut out, &mut StageClock::off())?;
                let host = PinnedBuffer::new(ctx, out.len())?;
                let inflight = download(s, &out, 0, host)?;
                device.push(out);
                Some(WindowSums {
                    plan,
                    sums: inflight,
                })
            }
            None => None,
        };
        let ones = match partial {
            Some(p) => {
                let mut folded = DeviceBuffer::<C::Jacobian>::alloc(ctx, ONES_GROUPS)?;
                let per = (p.len() / ONES_GROUPS) as u32;
                C::kernels(k).sum_groups(s, &p, ONES_GROUPS, per, &mut folded)?;
                let host = PinnedBuffer::new(ctx, ONES_GROUPS)?;
                let inflight = download(s, &folded, 0, host)?;
                device.push(p);
                device.push(folded);
                Some(inflight)
            }
            None => None,
        };
        self.pending.push(Pending {
            windows: win,
            ones,
            _device: device,
        });
        Ok(Ticket(self.pending.len() - 1))
    }

    /// Waits for every MSM of the batch, frees its device memory, and returns the results
    /// to combine (on the host, after the GPU is let go).
    pub fn finish(self) -> Result<MsmResults<C>, CudaError> {
        self.finish_keeping().map(|(results, _)| results)
    }

    /// As [`MsmBatch::finish`], handing the batch's memory back for the next batch
    /// ([`CudaMsm::batch_in`]) instead of freeing it.
    pub fn finish_keeping(mut self) -> Result<(MsmResults<C>, BatchMemory<C>), CudaError> {
        let s = self.msm.stream().synchronize();
        let c = match &self.mem {
            Some(m) => m.copy.synchronize(),
            None => Ok(()),
        };
        let pending = std::mem::take(&mut self.pending);
        self.used = [None, None];
        s?;
        c?;
        let mut out = Vec::with_capacity(pending.len());
        for p in pending {
            let windows = match p.windows {
                Some(w) => Some(WindowSums {
                    plan: w.plan,
                    sums: w.sums.wait()?,
                }),
                None => None,
            };
            let ones = p.ones.map(|o| o.wait()).transpose()?;
            out.push(MsmParts { windows, ones });
        }
        let mem = self.mem.take().ok_or(CudaError::Chunk { chunk: 0 })?;
        Ok((MsmResults { parts: out }, mem))
    }
}

/// Allocates the two point buffers of streamed bases on first use.
fn alloc_point_slots<C: GpuCurve>(
    mem: &mut BatchMemory<C>,
    msm: &CudaMsm,
) -> Result<(), CudaError> {
    if mem.slots.is_none() {
        let (ctx, n) = (msm.context(), mem.plan.n);
        mem.slots = Some([DeviceBuffer::alloc(ctx, n)?, DeviceBuffer::alloc(ctx, n)?]);
    }
    Ok(())
}

/// The batch's memory (present until `finish_keeping` takes it).
fn memory<C: GpuCurve>(m: &mut Option<BatchMemory<C>>) -> Result<&mut BatchMemory<C>, CudaError> {
    m.as_mut().ok_or(CudaError::Chunk { chunk: 0 })
}

impl<C: GpuCurve> Drop for MsmBatch<'_, C> {
    fn drop(&mut self) {
        // Nothing goes while a kernel or a copy may still use it (an error path).
        if !self.pending.is_empty() || self.used.iter().any(Option::is_some) {
            let s = self.msm.stream().synchronize();
            let c = match &self.mem {
                Some(m) => m.copy.synchronize(),
                None => Ok(()),
            };
            if let Err(e) = s.and(c) {
                tracing::warn!(error = %e, "waiting for an MSM batch being dropped failed");
            }
        }
    }
}

/// One chunk of a batch's bases on the device, as the kernels over it see it.
struct ChunkOnDevice<'a, C: GpuCurve> {
    /// Which chunk.
    index: usize,
    kernels: &'a MsmKernels,
    stream: &'a Stream,
    /// The points: the resident buffer (indices global) or a point buffer holding the chunk
    /// (indices from the chunk's start).
    bases: &'a DeviceBuffer<C::GpuAffine>,
    at: BasesAt,
    /// Recorded when the chunk's copy is done (streamed bases only).
    ready: Option<&'a Event>,
}

impl<'a, C: GpuCurve> ChunkOnDevice<'a, C> {
    /// Chunk `index` in one of the two point buffers, its copy done at `ready`.
    fn streamed(
        index: usize,
        kernels: &'a MsmKernels,
        stream: &'a Stream,
        bases: &'a DeviceBuffer<C::GpuAffine>,
        ready: &'a Event,
    ) -> Self {
        Self {
            index,
            kernels,
            stream,
            bases,
            at: BasesAt::Host,
            ready: Some(ready),
        }
    }
}

/// Window results of one MSM (in pinned memory, or on their way there), with the plan that
/// reduces them.
#[derive(Debug)]
struct WindowSums<B> {
    plan: Plan,
    sums: B,
}

/// What one MSM left in pinned memory: its window sums and the folded partial sums of its
/// ones (split MSMs).
#[derive(Debug)]
struct MsmParts<J> {
    windows: Option<WindowSums<PinnedBuffer<J>>>,
    ones: Option<PinnedBuffer<J>>,
}

/// A finished batch's results in pinned memory.
#[derive(Debug)]
pub struct MsmResults<C: GpuCurve> {
    parts: Vec<MsmParts<C::Jacobian>>,
}

impl<C: GpuCurve> MsmResults<C> {
    /// The sum of MSM `t`.
    pub fn sum(&self, t: Ticket) -> Result<C::Projective, CudaError> {
        let MsmParts { windows, ones } = self.parts.get(t.0).ok_or(CudaError::BufferTooSmall {
            what: "batch results (a ticket of another batch)",
            len: self.parts.len(),
            needed: t.0 + 1,
        })?;
        let mut acc = match windows {
            Some(w) => combine::<C>(&w.plan, &w.sums),
            None => C::Projective::identity(),
        };
        if let Some(o) = ones {
            acc += o
                .par_iter()
                .map(|p| C::Projective::from(*p))
                .reduce(C::Projective::identity, |a, b| a + b);
        }
        Ok(acc)
    }
}
