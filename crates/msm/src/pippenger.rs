//! The Pippenger pieces shared by the resident and the streamed MSM: the window plan, the
//! device workspace (reused chunk after chunk), the kernel sequence, and the host's final
//! reduction of segment results into one point.

use std::sync::Arc;

use group::Group;
use rayon::prelude::*;
use zkpipe_cuda::{Context, DeviceBuffer, Event, StageClock, Stream};
use zkpipe_field::Fr;

use crate::cuda::{CudaError, GpuCurve};
use crate::kernels::{
    scan_tiles, BucketWrite, Copies, DenseScalars, DensityMap, DigitsOut, MsmKernels, SortPass,
    SortedBuckets, TailScalars, TaskOrder, Tasks, WindowShape, MAX_BINS,
};

/// The window width for n points.
///
/// The digits split min(s, r − s) < 2^254 ([`windows`]). Only widths whose top window holds
/// many real bits of it (4, 8, 16, 17 and 20 leave 2, 6, 14, 16 and 14, and never carry out of
/// it): a top window of few bits crowds the points into few buckets. Wider windows mean fewer
/// bucket additions but more buckets to reduce and fewer points a bucket: 17 bits (15 windows
/// where 16 bits take 16) pay from 2^23 points on, 20 bits (13 windows) from 2^25
/// (benches/NOTES.md).
pub fn window_bits(n: usize) -> u32 {
    match n {
        0..1024 => 4,
        1024..16384 => 8,
        16384..MID => 16,
        MID..LARGE => 17,
        _ => 20,
    }
}

/// The window width for n points over bases with precomputed multiples: bucket sets shared
/// by several windows make wide windows pay from fewer points on.
pub fn window_bits_with_multiples(n: usize) -> u32 {
    match n {
        0..MID_WITH_MULTIPLES => window_bits(n),
        MID_WITH_MULTIPLES..LARGE_WITH_MULTIPLES => 20,
        _ => 22,
    }
}

/// From this many points on, 20-bit windows over bases with multiples.
const MID_WITH_MULTIPLES: usize = 1 << 24;

/// From this many points on, 22-bit windows over bases with multiples.
const LARGE_WITH_MULTIPLES: usize = 1 << 27;

/// From this many points on, 17-bit windows.
const MID: usize = 1 << 23;

/// From this many points on, 20-bit windows: 13 windows instead of 15, with buckets of
/// n / 2^19 points or more (benches/NOTES.md has the crossover).
const LARGE: usize = 1 << 25;

/// Bits the windows must cover: the digits split min(s, r − s), below r/2 < 2^254, and c-bit
/// windows that cover 255 bits leave the top one's bits below 2^(c−1), so that a carry into
/// it never carries out.
pub const DIGIT_BITS: u32 = 255;

/// The windows of c bits over a scalar.
pub fn windows(c: u32) -> u32 {
    DIGIT_BITS.div_ceil(c)
}

/// The window widths a caller may choose ([`crate::CudaMsm::with_window_bits`]): the digit
/// kernel reads at most 24 bits, and wider windows' bucket sums would take gigabytes.
pub const WINDOW_BITS: std::ops::RangeInclusive<u32> = 2..=22;

/// Buckets per segment of the window reduction, at least. Each segment is one thread's
/// running sum (2 additions a bucket) plus its offset times the segment's sum (about 1.5
/// additions a bit of the offset): shorter segments mean more threads and a shorter serial
/// chain (64 left 8192 threads at c = 16, too few: benches/NOTES.md), longer ones fewer
/// offsets to multiply.
const SEGMENT: u32 = 16;

/// Buckets per segment of the window reduction, at most.
const MAX_SEGMENT: u32 = 64;

/// Threads of the window reduction that fill the GPU: segments grow past [`SEGMENT`] only
/// while there are at least this many.
const SEGMENT_THREADS: u32 = 1 << 16;

/// Buckets per segment for `sets` sets of `buckets` buckets (a power of two dividing
/// `buckets`).
fn segment(buckets: u32, sets: u32) -> u32 {
    let mut seg = SEGMENT;
    while seg < MAX_SEGMENT
        && u64::from(buckets / (2 * seg)) * u64::from(sets) >= u64::from(SEGMENT_THREADS)
    {
        seg *= 2;
    }
    buckets.min(seg)
}

/// A bin of the bucket sort holds 2^BIN_BITS consecutive buckets, at most: its buckets'
/// places, which the sort's second pass writes at random, span a few megabytes.
const BIN_BITS: u32 = 11;

/// Entries a pass of the bucket sort stages, at least, where the sets are small enough to
/// share a pass: fewer launches for small MSMs and many windows.
const STAGE: usize = 1 << 24;

/// Segment results a thread adds into one read-back entry (the host adds the rest).
const FOLD: u32 = 16;

/// Window layout of a Pippenger over up to `n` points.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Points this plan's buffers hold.
    pub n: usize,
    /// Window bits.
    pub c: u32,
    /// Windows.
    pub nw: u32,
    /// Windows a bucket set sums (copies of precomputed multiples of the bases; 1 without).
    pub copies: u32,
    /// Buckets per window (signed digits: 2^(c-1)).
    pub buckets: u32,
    /// Buckets per segment of the window reduction.
    pub seg: u32,
    /// Points per bucket task (about sqrt(n)): a bucket of c points is summed by
    /// ceil(c / t) threads.
    pub t: u32,
}

impl Plan {
    /// The plan for `n` points with `c`-bit windows (`c` within [`WINDOW_BITS`]).
    pub fn with_bits(n: usize, c: u32) -> Self {
        let buckets = 1u32 << (c - 1);
        Self {
            n,
            c,
            nw: windows(c),
            copies: 1,
            buckets,
            seg: segment(buckets, windows(c)),
            t: ((n.max(1) as f64).sqrt().ceil() as u32)
                .next_power_of_two()
                .max(32),
        }
    }

    /// This plan over bases carrying `copies` precomputed multiples: `copies` windows share
    /// a set of buckets, so there are fewer sets to reduce.
    pub fn with_copies(self, copies: u32) -> Self {
        let copies = copies.clamp(1, self.nw);
        Self {
            copies,
            seg: segment(self.buckets, self.nw.div_ceil(copies)),
            ..self
        }
    }

    /// Sets of buckets: one for each `copies` windows.
    pub fn sets(&self) -> u32 {
        self.nw.div_ceil(self.copies)
    }

    /// An upper bound on the tasks of n points: sum of ceil(c_b / t) <= m / t + buckets.
    pub fn max_tasks(&self) -> usize {
        self.n * self.nw as usize / self.t as usize + self.total() + 1
    }

    /// The most tasks a bucket of n points can have: a set's bucket holds at most one entry
    /// of each point in each of the set's windows.
    pub fn bucket_tasks_at_most(&self, n: usize) -> usize {
        (n * self.copies as usize).div_ceil(self.t as usize).max(1)
    }

    /// All buckets of all sets.
    pub fn total(&self) -> usize {
        (self.sets() * self.buckets) as usize
    }

    /// Segments per window.
    pub fn segs(&self) -> u32 {
        self.buckets / self.seg
    }

    /// Segment results folded into one read-back entry.
    pub fn fold(&self) -> u32 {
        self.segs().min(FOLD)
    }

    /// Entries per set that the host reads back.
    pub fn per_set(&self) -> u32 {
        self.segs() / self.fold()
    }

    /// Entries per run that the host reads back.
    pub fn out_len(&self) -> usize {
        (self.sets() * self.per_set()) as usize
    }

    /// The bucket sort's bins hold 2^bin_shift buckets: at most 2^[`BIN_BITS`], and few
    /// enough that a set has at most [`MAX_BINS`].
    pub fn bin_shift(&self) -> u32 {
        let bits = self.c - 1;
        bits.min(BIN_BITS)
            .max(bits.saturating_sub(MAX_BINS.ilog2()))
    }

    /// Bins of the bucket sort a set holds.
    pub fn bins_per_set(&self) -> u32 {
        self.buckets >> self.bin_shift()
    }

    /// Sets one pass of the bucket sort covers: one set of a large MSM, more while they
    /// stage fewer than [`STAGE`] entries and hold at most [`MAX_BINS`] bins.
    pub fn sets_per_pass(&self) -> u32 {
        let per_set = self.n.max(1) * self.copies as usize;
        let by_stage = u32::try_from(STAGE / per_set).unwrap_or(u32::MAX);
        let by_bins = MAX_BINS / self.bins_per_set();
        by_stage.min(by_bins).clamp(1, self.sets())
    }

    /// Entries of a pass's staging buffers.
    pub fn stage(&self) -> usize {
        (self.sets_per_pass() * self.copies).min(self.nw) as usize * self.n
    }

    /// Bins of the bucket sort over all sets.
    pub fn bins(&self) -> usize {
        self.total() >> self.bin_shift()
    }

    /// The passes of the bucket sort over `n` points' digits.
    pub fn sort_passes(&self, n: usize) -> impl Iterator<Item = SortPass> {
        let p = *self;
        let spp = p.sets_per_pass();
        (0..p.sets()).step_by(spp as usize).map(move |set| {
            let end = (set + spp).min(p.sets());
            let w0 = set * p.copies;
            let w1 = (end * p.copies).min(p.nw);
            SortPass {
                entries: (w0 as usize * n, (w1 - w0) as usize * n),
                bins: (set * p.bins_per_set(), (end - set) * p.bins_per_set()),
                buckets: (set * p.buckets, end * p.buckets),
                shift: p.bin_shift(),
            }
        })
    }

    /// Device bytes of a workspace for this plan, bucket sums of `jac` bytes each.
    pub fn workspace_bytes(&self, jac: usize) -> usize {
        Capacity::of(&[*self]).bytes(jac)
    }
}

/// What a workspace's buffers hold: the largest of each dimension over the plans it was made
/// for, the first of them being the one it runs when asked for a plan it cannot hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Capacity {
    default: Plan,
    n: usize,
    /// Digits (points times windows).
    m: usize,
    /// Entries of the sort's staging buffers.
    stage: usize,
    /// Bins of the sort.
    bins: usize,
    total: usize,
    max_tasks: usize,
    t: usize,
    segments: usize,
}

impl Capacity {
    /// The capacity for each of `plans` (at least one).
    pub fn of(plans: &[Plan]) -> Self {
        let max = |f: &dyn Fn(&Plan) -> usize| plans.iter().map(f).max().unwrap_or(0);
        Self {
            default: plans[0],
            n: max(&|p| p.n),
            m: max(&|p| p.n * p.nw as usize),
            stage: max(&|p| p.stage()),
            bins: max(&|p| p.bins()),
            total: max(&|p| p.total()),
            max_tasks: max(&|p| p.max_tasks()),
            t: max(&|p| p.t as usize),
            segments: max(&|p| (p.sets() * p.segs()) as usize),
        }
    }

    fn holds(&self, p: &Plan) -> bool {
        p.n <= self.n
            && p.n * p.nw as usize <= self.m
            && p.stage() <= self.stage
            && p.bins() <= self.bins
            && p.total() <= self.total
            && p.max_tasks() <= self.max_tasks
            && p.t as usize <= self.t
            && (p.sets() * p.segs()) as usize <= self.segments
    }

    /// Device bytes of a workspace of this capacity, bucket sums of `jac` bytes each.
    pub fn bytes(&self, jac: usize) -> usize {
        let order = 4 * 4 * self.max_tasks + 3 * 4 * self.t;
        2 * 4 * self.m
            + 2 * 4 * self.stage
            + 4 * self.bins
            + 5 * 4 * self.total
            + order
            + jac * (self.total + self.max_tasks + self.segments)
    }
}

/// Where a Pippenger's digits come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Digits<'a> {
    /// Scalars `lo..lo + n` of a buffer; scalar `lo + i` reads base `v_lo + i` (of each copy
    /// of the bases, copies `stride` points apart, when the plan has precomputed multiples).
    Dense {
        scalars: &'a DeviceBuffer<Fr>,
        lo: usize,
        v_lo: usize,
        stride: usize,
    },
    /// Tail entries `lo..lo + n` of a split MSM (scalars, variable indices), through a query's
    /// density; an entry reads the base of its variable's rank, minus `b_lo`.
    Tail {
        scalars: &'a DeviceBuffer<Fr>,
        index: &'a DeviceBuffer<u32>,
        map: DensityMap<'a>,
        lo: usize,
        b_lo: usize,
    },
}

impl<'a> Digits<'a> {
    /// The first scalars of `scalars`, one a base.
    pub(crate) fn dense(scalars: &'a DeviceBuffer<Fr>, n: usize) -> Self {
        Digits::Dense {
            scalars,
            lo: 0,
            v_lo: 0,
            stride: n,
        }
    }
}

/// One bucket phase: `n` digits from `digits` over the points of `bases` (which the bucket
/// sums wait for `points_ready` to read, when given), written into the bucket sums as `write`
/// says.
#[derive(Debug)]
pub(crate) struct BucketRun<'a, A> {
    pub bases: &'a DeviceBuffer<A>,
    pub digits: Digits<'a>,
    pub n: usize,
    pub write: BucketWrite,
    pub points_ready: Option<&'a Event>,
}

/// Device buffers of one Pippenger run, reusable for any n up to the plan's.
#[derive(Debug)]
pub(crate) struct Workspace<J> {
    /// What the buffers hold.
    capacity: Capacity,
    /// The plan of the runs being enqueued ([`Workspace::select`]).
    plan: Plan,
    /// The digits' keys, then (sorted in place of the keys it no longer needs) each bucket's
    /// values, bucket by bucket.
    keys: DeviceBuffer<u32>,
    vals: DeviceBuffer<u32>,
    stage_keys: DeviceBuffer<u32>,
    stage_vals: DeviceBuffer<u32>,
    bin_cursor: DeviceBuffer<u32>,
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    cursor: DeviceBuffer<u32>,
    tasks: DeviceBuffer<u32>,
    task_offsets: DeviceBuffer<u32>,
    tiles: DeviceBuffer<u32>,
    order: TaskSort,
    partial: DeviceBuffer<J>,
    sums: DeviceBuffer<J>,
    segments: DeviceBuffer<J>,
}

impl<J: bytemuck::Pod> Workspace<J> {
    pub fn alloc(ctx: &Arc<Context>, plan: Plan) -> Result<Self, CudaError> {
        Self::alloc_for(ctx, &[plan])
    }

    /// A workspace that holds each of `plans` (at least one; the first is the default).
    pub fn alloc_for(ctx: &Arc<Context>, plans: &[Plan]) -> Result<Self, CudaError> {
        let cap = Capacity::of(plans);
        let total = cap.total;
        Ok(Self {
            capacity: cap,
            plan: cap.default,
            keys: DeviceBuffer::alloc(ctx, cap.m)?,
            vals: DeviceBuffer::alloc(ctx, cap.m)?,
            stage_keys: DeviceBuffer::alloc(ctx, cap.stage)?,
            stage_vals: DeviceBuffer::alloc(ctx, cap.stage)?,
            bin_cursor: DeviceBuffer::alloc(ctx, cap.bins.max(1))?,
            counts: DeviceBuffer::alloc(ctx, total)?,
            offsets: DeviceBuffer::alloc(ctx, total)?,
            cursor: DeviceBuffer::alloc(ctx, total)?,
            tasks: DeviceBuffer::alloc(ctx, total)?,
            task_offsets: DeviceBuffer::alloc(ctx, total)?,
            tiles: DeviceBuffer::alloc(ctx, scan_tiles(total).max(1))?,
            order: TaskSort::alloc(ctx, &cap)?,
            partial: DeviceBuffer::alloc(ctx, cap.max_tasks)?,
            segments: DeviceBuffer::alloc(ctx, cap.segments)?,
            sums: DeviceBuffer::alloc(ctx, total)?,
        })
    }

    /// True when the buffers hold `plan`.
    pub fn holds(&self, plan: &Plan) -> bool {
        self.capacity.holds(plan)
    }

    /// Makes `plan` the plan of the next runs when the buffers hold it, else the default
    /// plan they were made for (any window width gives the same sums, if the bases carry no
    /// multiples the plan would need); returns the one in use.
    pub fn select(&mut self, plan: Plan) -> Plan {
        self.plan = if self.capacity.holds(&plan) {
            plan
        } else {
            self.capacity.default
        };
        self.plan
    }

    /// Enqueues the bucket phase of `run` on `s`: digits, the counting sort, and the bucket
    /// sums (the first kernel to read the bases), each phase's end marked on `clock`.
    pub fn buckets<C: GpuCurve<Jacobian = J>>(
        &mut self,
        k: &MsmKernels,
        s: &Stream,
        run: BucketRun<'_, C::GpuAffine>,
        clock: &mut StageClock<Phase>,
    ) -> Result<(), CudaError> {
        let BucketRun {
            bases,
            digits,
            n,
            write,
            points_ready,
        } = run;
        let p = self.plan;
        if n > p.n {
            return Err(CudaError::BufferTooSmall {
                what: "Pippenger workspace",
                len: p.n,
                needed: n,
            });
        }
        let m = n * p.nw as usize;
        if u32::try_from(m).is_err() {
            return Err(CudaError::TooManyDigits { n, windows: p.nw });
        }
        let total = p.total();
        self.counts.zero_async(s)?;
        let window = WindowShape {
            bits: p.c,
            count: p.nw,
        };
        let out = DigitsOut {
            keys: &mut self.keys,
            vals: &mut self.vals,
        };
        match digits {
            Digits::Dense {
                scalars,
                lo,
                v_lo,
                stride,
            } => {
                let copies = match p.copies {
                    1 => Copies::ONE,
                    copies => Copies { copies, stride },
                };
                let input = DenseScalars {
                    scalars,
                    lo,
                    n,
                    v_lo,
                    bases: bases.len(),
                };
                k.digits(s, input, window, copies, out)?
            }
            Digits::Tail {
                scalars,
                index,
                map,
                lo,
                b_lo,
            } => {
                let input = TailScalars {
                    scalars,
                    index,
                    map,
                    lo,
                    n,
                    b_lo,
                };
                k.digits_tail(s, input, window, out)?
            }
        }
        clock.mark(Phase::Digits, s)?;
        k.histogram(s, &self.keys, m, &mut self.counts, total)?;
        k.scan(s, &self.counts, &mut self.offsets, total, &mut self.tiles)?;
        self.sort(k, s, n)?;
        clock.mark(Phase::Sort, s)?;
        k.task_counts(s, &self.counts, total, p.t, &mut self.tasks)?;
        k.scan(
            s,
            &self.tasks,
            &mut self.task_offsets,
            total,
            &mut self.tiles,
        )?;
        let tasks = Tasks {
            offsets: &self.task_offsets,
            counts: &self.tasks,
            buckets: total,
            size: p.t,
            most: p.bucket_tasks_at_most(n),
        };
        self.order.sort(k, s, &self.counts, tasks)?;
        let order = TaskOrder {
            order: &self.order.order,
            bucket_of: &self.order.bucket_of,
        };
        if let Some(e) = points_ready {
            s.wait(e)?;
        }
        let ck = C::kernels(k);
        let buckets = SortedBuckets {
            sorted: &self.keys,
            offsets: &self.offsets,
            counts: &self.counts,
        };
        ck.task_sums(s, bases, buckets, tasks, order, &mut self.partial)?;
        let bucket_of = &self.order.bucket_of;
        ck.task_reduce(
            s,
            &mut self.partial,
            tasks,
            bucket_of,
            write,
            &mut self.sums,
        )?;
        Ok(clock.mark(Phase::Buckets, s)?)
    }

    /// Enqueues the bucket sort of the first `n` points' digits, counted and scanned: each
    /// bucket's values, bucket by bucket, in place of the keys. Pass by pass (a few sets each),
    /// the keys and values go bin by bin into the staging buffers, then from there to their
    /// buckets' places. A pass's places lie before its sets' last window's keys end, so they
    /// overwrite only keys that this pass or an earlier one has staged.
    fn sort(&mut self, k: &MsmKernels, s: &Stream, n: usize) -> Result<(), CudaError> {
        let p = self.plan;
        self.cursor.copy_from_device_async_at(0, &self.offsets, s)?;
        let pass_buckets = p.sets_per_pass() * p.buckets;
        let bins = (p.bin_shift(), pass_buckets);
        k.bin_starts(s, &self.offsets, p.total(), bins, &mut self.bin_cursor)?;
        for pass in p.sort_passes(n) {
            let stage = (&mut self.stage_keys, &mut self.stage_vals);
            let digits = (&self.keys, &self.vals);
            k.bin_scatter(s, digits, &pass, &mut self.bin_cursor, stage)?;
            k.bucket_scatter(
                s,
                (&self.stage_keys, &self.stage_vals),
                (&self.offsets, &self.counts),
                &pass,
                &mut self.cursor,
                &mut self.keys,
            )?;
        }
        Ok(())
    }

    /// Enqueues the window reduction of the bucket sums into `out` (`plan.out_len()`
    /// entries), its end marked on `clock`.
    pub fn windows<C: GpuCurve<Jacobian = J>>(
        &mut self,
        k: &MsmKernels,
        s: &Stream,
        out: &mut DeviceBuffer<J>,
        clock: &mut StageClock<Phase>,
    ) -> Result<(), CudaError> {
        let p = self.plan;
        let ck = C::kernels(k);
        ck.segments(
            s,
            &self.sums,
            p.buckets,
            p.sets(),
            p.seg,
            &mut self.segments,
        )?;
        ck.sum_groups(s, &self.segments, p.out_len(), p.fold(), out)?;
        Ok(clock.mark(Phase::Windows, s)?)
    }
}

/// Buffers of the counting sort that orders the bucket tasks by decreasing length.
#[derive(Debug)]
struct TaskSort {
    keys: DeviceBuffer<u32>,
    vals: DeviceBuffer<u32>,
    order: DeviceBuffer<u32>,
    bucket_of: DeviceBuffer<u32>,
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    cursor: DeviceBuffer<u32>,
    tiles: DeviceBuffer<u32>,
}

impl TaskSort {
    fn alloc(ctx: &Arc<Context>, cap: &Capacity) -> Result<Self, CudaError> {
        let slots = cap.max_tasks;
        let t = cap.t;
        Ok(Self {
            keys: DeviceBuffer::alloc(ctx, slots)?,
            vals: DeviceBuffer::alloc(ctx, slots)?,
            order: DeviceBuffer::alloc(ctx, slots)?,
            bucket_of: DeviceBuffer::alloc(ctx, slots)?,
            counts: DeviceBuffer::alloc(ctx, t)?,
            offsets: DeviceBuffer::alloc(ctx, t)?,
            cursor: DeviceBuffer::alloc(ctx, t)?,
            tiles: DeviceBuffer::alloc(ctx, scan_tiles(t).max(1))?,
        })
    }

    /// Enqueues the task keys and their counting sort: `order` becomes the task slots,
    /// longest task first, and `bucket_of` each task's bucket.
    fn sort(
        &mut self,
        k: &MsmKernels,
        s: &Stream,
        counts: &DeviceBuffer<u32>,
        tasks: Tasks<'_>,
    ) -> Result<(), CudaError> {
        let slots = self.keys.len();
        let lengths = tasks.size as usize;
        let out = DigitsOut {
            keys: &mut self.keys,
            vals: &mut self.vals,
        };
        k.task_keys(s, counts, tasks, out, &mut self.bucket_of)?;
        self.counts.zero_async(s)?;
        k.histogram(s, &self.keys, slots, &mut self.counts, lengths)?;
        k.scan(s, &self.counts, &mut self.offsets, lengths, &mut self.tiles)?;
        self.cursor.copy_from_device_async_at(0, &self.offsets, s)?;
        k.scatter(
            s,
            &self.keys,
            &self.vals,
            slots,
            &mut self.cursor,
            &mut self.order,
        )
    }
}

/// The phases of one Pippenger run, as a stage clock names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum Phase {
    /// Each scalar's window digits.
    Digits,
    /// The counting sort of the digits into buckets.
    Sort,
    /// The bucket sums (the bases are read here).
    Buckets,
    /// The window reduction of the bucket sums.
    Windows,
}

impl Phase {
    /// The phase's name in logs.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// The MSM from segment results: `parts` holds one or more runs of `plan.out_len()` entries
/// (one per chunk), laid out set by set. Sets are summed across runs, then combined by
/// doubling, c bits for each window a set spans.
pub(crate) fn combine<C: GpuCurve>(plan: &Plan, parts: &[C::Jacobian]) -> C::Projective {
    let len = plan.out_len();
    let segs = plan.per_set() as usize;
    let runs = parts.len() / len.max(1);
    let sets: Vec<C::Projective> = (0..plan.sets() as usize)
        .into_par_iter()
        .map(|w| {
            let mut acc = C::Projective::identity();
            for r in 0..runs {
                let at = r * len + w * segs;
                for p in &parts[at..at + segs] {
                    acc += C::Projective::from(*p);
                }
            }
            acc
        })
        .collect();
    let mut acc = C::Projective::identity();
    for set in sets.iter().rev() {
        for _ in 0..plan.c * plan.copies {
            acc = acc.double();
        }
        acc += set;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::G1;
    use blstrs::{G1Projective, Scalar};
    use ff::Field;
    use zkpipe_field::cast;

    #[test]
    fn sets_cover_the_windows_and_a_capacity_holds_each_plan() {
        let plain = Plan::with_bits(1 << 16, 16);
        assert_eq!((plain.nw, plain.sets()), (16, 16));
        for (copies, sets) in [(2, 8), (3, 6), (4, 4), (16, 1), (40, 1)] {
            let p = plain.with_copies(copies);
            assert_eq!(p.sets(), sets, "{copies} copies");
            assert_eq!(p.total(), (sets * p.buckets) as usize);
            assert_eq!(p.out_len(), (sets * p.per_set()) as usize);
        }
        let wide = Plan::with_bits(1 << 16, 20).with_copies(4);
        let cap = Capacity::of(&[plain, wide]);
        assert!(cap.holds(&plain) && cap.holds(&wide));
        assert!(
            !cap.holds(&Plan::with_bits(1 << 16, 20)),
            "13 sets of 2^19 buckets"
        );
        assert!(!cap.holds(&Plan::with_bits(1 << 17, 16)), "more points");
        assert!(cap.bytes(144) >= plain.workspace_bytes(144).max(wide.workspace_bytes(144)));
    }

    #[test]
    fn segments_grow_only_while_the_window_reduction_fills_the_gpu() {
        // 16 sets of 2^15 buckets: 32768 segments of 16; 13 sets of 2^19: 106496 of 64.
        assert_eq!(Plan::with_bits(1 << 24, 16).seg, 16);
        assert_eq!(Plan::with_bits(1 << 26, 20).seg, 64);
        assert_eq!(Plan::with_bits(1 << 26, 22).seg, 64);
        // 2 sets of 2^19 buckets: 32768 segments of 16, not 16384 of 32.
        assert_eq!(Plan::with_bits(1 << 26, 20).with_copies(8).seg, 16);
        assert_eq!(Plan::with_bits(1 << 26, 22).with_copies(8).seg, 64);
        assert_eq!(Plan::with_bits(64, 2).seg, 2);
        for c in 2..=22 {
            for copies in [1, 2, 4, 8] {
                let p = Plan::with_bits(1 << 20, c).with_copies(copies);
                assert!(
                    p.seg.is_power_of_two() && p.buckets.is_multiple_of(p.seg),
                    "c = {c}"
                );
                assert!(p.seg == p.buckets || p.seg >= SEGMENT, "c = {c}");
                assert!(p.seg <= MAX_SEGMENT, "c = {c}");
            }
        }
    }

    #[test]
    fn sort_passes_cover_each_window_once_within_the_staging_buffers() {
        for c in 2..=22 {
            for copies in [1, 2, 3, 8] {
                for n in [1, 1000, 1 << 16, 1 << 20, 1 << 27] {
                    let p = Plan::with_bits(n, c).with_copies(copies);
                    let case = format!("c = {c}, {copies} copies, n = {n}");
                    let shift = p.bin_shift();
                    assert!(shift <= BIN_BITS && p.bins_per_set() <= MAX_BINS, "{case}");
                    assert_eq!(p.bins_per_set() << shift, p.buckets, "{case}");
                    for len in [n, n / 2] {
                        let passes: Vec<SortPass> = p.sort_passes(len).collect();
                        let (mut entry, mut bin, mut bucket) = (0, 0, 0);
                        for pass in &passes {
                            assert_eq!(pass.entries.0, entry, "{case}");
                            assert_eq!((pass.bins.0, pass.buckets.0), (bin, bucket), "{case}");
                            assert!(pass.entries.1 <= p.stage(), "{case}");
                            assert!(pass.bins.1 <= MAX_BINS, "{case}");
                            assert_eq!(pass.shift, shift, "{case}");
                            let pass_buckets = p.sets_per_pass() * p.buckets;
                            assert_eq!(pass.buckets.0 % pass_buckets, 0, "{case}");
                            assert_eq!(pass.bins.1 << shift, pass.buckets.1 - pass.buckets.0);
                            // A pass's places lie before the keys of its last window end.
                            let last_set = pass.buckets.1 / p.buckets;
                            let windows = (last_set * p.copies).min(p.nw) as usize;
                            assert_eq!(pass.entries.0 + pass.entries.1, windows * len, "{case}");
                            entry += pass.entries.1;
                            bin += pass.bins.1;
                            bucket = pass.buckets.1;
                        }
                        assert_eq!(entry, p.nw as usize * len, "{case}");
                        assert_eq!((bin as usize, bucket as usize), (p.bins(), p.total()));
                    }
                }
            }
        }
        // One set a pass from 2^24 points on; every set in one pass for small MSMs.
        assert_eq!(
            Plan::with_bits(1 << 27, 20).sort_passes(1 << 27).count(),
            13
        );
        assert_eq!(
            Plan::with_bits(1 << 24, 16).sort_passes(1 << 24).count(),
            16
        );
        assert_eq!(Plan::with_bits(1 << 16, 16).sort_passes(1 << 16).count(), 1);
        assert_eq!(Plan::with_bits(1 << 27, 20).stage(), 1 << 27);
    }

    #[test]
    fn sets_combine_with_c_bits_of_doubling_for_each_window_they_span() {
        let (c, copies) = (5, 3);
        let plan = Plan::with_bits(64, c).with_copies(copies);
        let per = plan.per_set() as usize;
        let mut parts = vec![G1Projective::identity(); plan.out_len()];
        let g = G1Projective::generator();
        let mut want = G1Projective::identity();
        for set in 0..plan.sets() as usize {
            let p = g * Scalar::from(set as u64 + 7);
            parts[set * per] = p;
            let shift = Scalar::from(2u64).pow_vartime([u64::from(c * copies) * set as u64]);
            want += p * shift;
        }
        let gpu = cast::g1_projective_as_gpu(&parts);
        assert_eq!(combine::<G1>(&plan, gpu), want);
    }
}
