//! The Pippenger pieces shared by the resident and the streamed MSM: the window plan, the
//! device workspace (reused chunk after chunk), the kernel sequence, and the host's final
//! reduction of segment results into one point.

use std::sync::Arc;

use group::Group;
use rayon::prelude::*;
use zkpipe_cuda::{Context, DeviceBuffer, Event, Stream};
use zkpipe_field::Fr;

use crate::cuda::{CudaError, GpuCurve};
use crate::kernels::{scan_tiles, DensityMap, MsmKernels};

/// The window width for n points.
///
/// Only widths whose top window holds many real bits of a 255-bit scalar (4, 8, 16 and 20
/// leave 3, 7, 15 and 15 there, and never carry out of it): a top window of few bits crowds
/// the points into few buckets. Wider windows mean fewer bucket additions but more buckets to
/// reduce and fewer points a bucket; 20 bits pay from 2^25 points on (benches/NOTES.md).
pub fn window_bits(n: usize) -> u32 {
    match n {
        0..1024 => 4,
        1024..16384 => 8,
        16384..LARGE => 16,
        _ => 20,
    }
}

/// From this many points on, 20-bit windows: 13 windows instead of 16, a fifth fewer bucket
/// additions, with buckets of n / 2^19 points or more (benches/NOTES.md has the crossover).
const LARGE: usize = 1 << 25;

/// The window widths a caller may choose ([`crate::CudaMsm::with_window_bits`]): the digit
/// kernel reads at most 24 bits, and wider windows' bucket sums would take gigabytes.
pub const WINDOW_BITS: std::ops::RangeInclusive<u32> = 2..=22;

/// Buckets per segment of the window reduction. Each segment is one thread's running sum
/// (2 additions a bucket) plus its offset times the segment's sum: shorter segments mean
/// more threads and a shorter serial chain. 64 left 8192 threads at c = 16 (6.5 ms of a
/// 2^22 G1 MSM, 17.5 ms in G2, on the H200).
const SEGMENT: u32 = 16;

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
            nw: 256u32.div_ceil(c),
            buckets,
            seg: buckets.min(SEGMENT),
            t: ((n.max(1) as f64).sqrt().ceil() as u32)
                .next_power_of_two()
                .max(32),
        }
    }

    /// An upper bound on the tasks of n points: sum of ceil(c_b / t) <= m / t + buckets.
    pub fn max_tasks(&self) -> usize {
        self.n * self.nw as usize / self.t as usize + self.total() + 1
    }

    /// All buckets of all windows.
    pub fn total(&self) -> usize {
        (self.nw * self.buckets) as usize
    }

    /// Segments per window.
    pub fn segs(&self) -> u32 {
        self.buckets / self.seg
    }

    /// Segment results folded into one read-back entry.
    pub fn fold(&self) -> u32 {
        self.segs().min(FOLD)
    }

    /// Entries per window that the host reads back.
    pub fn per_window(&self) -> u32 {
        self.segs() / self.fold()
    }

    /// Entries per run that the host reads back.
    pub fn out_len(&self) -> usize {
        (self.nw * self.per_window()) as usize
    }

    /// Device bytes of a workspace for this plan, bucket sums of `jac` bytes each.
    pub fn workspace_bytes(&self, jac: usize) -> usize {
        let m = self.n * self.nw as usize;
        let segments = (self.nw * self.segs()) as usize;
        let order = 4 * 4 * self.max_tasks() + 3 * 4 * self.t as usize;
        3 * 4 * m
            + 5 * 4 * self.total()
            + order
            + jac * (self.total() + self.max_tasks() + segments)
    }
}

/// Where a Pippenger's digits come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Digits<'a> {
    /// Scalars `lo..lo + n` of a buffer; scalar `lo + i` reads base `v_lo + i`.
    Dense {
        scalars: &'a DeviceBuffer<Fr>,
        lo: usize,
        v_lo: usize,
    },
    /// Tail entries `lo..lo + n` of a split MSM (scalars, variable indices), through a query's
    /// density; an entry reads the base of its variable's rank, minus `b_lo`.
    Tail {
        tail: (&'a DeviceBuffer<Fr>, &'a DeviceBuffer<u32>),
        map: DensityMap<'a>,
        lo: usize,
        b_lo: usize,
    },
}

/// Device buffers of one Pippenger run, reusable for any n up to the plan's.
#[derive(Debug)]
pub(crate) struct Workspace<J> {
    /// The plan the buffers were sized for.
    capacity: Plan,
    /// The plan of the runs being enqueued ([`Workspace::select`]).
    plan: Plan,
    keys: DeviceBuffer<u32>,
    vals: DeviceBuffer<u32>,
    sorted: DeviceBuffer<u32>,
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
        let m = plan.n * plan.nw as usize;
        let total = plan.total();
        Ok(Self {
            capacity: plan,
            plan,
            keys: DeviceBuffer::alloc(ctx, m)?,
            vals: DeviceBuffer::alloc(ctx, m)?,
            sorted: DeviceBuffer::alloc(ctx, m)?,
            counts: DeviceBuffer::alloc(ctx, total)?,
            offsets: DeviceBuffer::alloc(ctx, total)?,
            cursor: DeviceBuffer::alloc(ctx, total)?,
            tasks: DeviceBuffer::alloc(ctx, total)?,
            task_offsets: DeviceBuffer::alloc(ctx, total)?,
            tiles: DeviceBuffer::alloc(ctx, scan_tiles(total).max(1))?,
            order: TaskSort::alloc(ctx, &plan)?,
            partial: DeviceBuffer::alloc(ctx, plan.max_tasks())?,
            segments: DeviceBuffer::alloc(ctx, (plan.nw * plan.segs()) as usize)?,
            sums: DeviceBuffer::alloc(ctx, total)?,
        })
    }

    /// Makes `plan` the plan of the next runs when the buffers hold it, else the plan they
    /// were sized for (any window width gives the same sums); returns the one in use.
    pub fn select(&mut self, plan: Plan) -> Plan {
        let (p, cap) = (&plan, &self.capacity);
        let fits = p.n <= cap.n
            && p.n * p.nw as usize <= cap.n * cap.nw as usize
            && p.total() <= cap.total()
            && p.max_tasks() <= cap.max_tasks()
            && p.t <= cap.t
            && p.nw * p.segs() <= cap.nw * cap.segs();
        self.plan = if fits { plan } else { self.capacity };
        self.plan
    }

    /// Enqueues the bucket phase for the first `n` bases and scalars on `s`: digits, the
    /// counting sort, and the bucket sums, added to the previous sums when `accumulate` (the
    /// streamed mode's later chunks). The bucket sums, the first kernel to read `bases`,
    /// wait for `points_ready` when given (the digits and the sort need only the scalars).
    /// `marks[0..3]` are recorded between the phases.
    #[allow(clippy::too_many_arguments)]
    pub fn buckets<C: GpuCurve<Jacobian = J>>(
        &mut self,
        k: &MsmKernels,
        s: &Stream,
        bases: &DeviceBuffer<C::GpuAffine>,
        scalars: &DeviceBuffer<Fr>,
        n: usize,
        accumulate: bool,
        points_ready: Option<&Event>,
        marks: Option<&[Event; 5]>,
    ) -> Result<(), CudaError> {
        let digits = Digits::Dense {
            scalars,
            lo: 0,
            v_lo: 0,
        };
        self.buckets_of::<C>(k, s, bases, digits, n, accumulate, points_ready, marks)
    }

    /// As [`Workspace::buckets`], for `n` digits from `digits`.
    #[allow(clippy::too_many_arguments)]
    pub fn buckets_of<C: GpuCurve<Jacobian = J>>(
        &mut self,
        k: &MsmKernels,
        s: &Stream,
        bases: &DeviceBuffer<C::GpuAffine>,
        digits: Digits<'_>,
        n: usize,
        accumulate: bool,
        points_ready: Option<&Event>,
        marks: Option<&[Event; 5]>,
    ) -> Result<(), CudaError> {
        let p = self.plan;
        if n > p.n {
            return Err(CudaError::BufferTooSmall {
                what: "Pippenger workspace",
                len: p.n,
                needed: n,
            });
        }
        let m = n * p.nw as usize;
        let total = p.total();
        mark(marks, 0, s)?;
        self.counts.zero_async(s)?;
        let window = (p.c, p.nw);
        let (keys, vals) = (&mut self.keys, &mut self.vals);
        match digits {
            Digits::Dense { scalars, lo, v_lo } => {
                let v = (v_lo, bases.len());
                k.digits(s, scalars, (lo, n), v, window, keys, vals)?
            }
            Digits::Tail {
                tail,
                map,
                lo,
                b_lo,
            } => k.digits_tail(s, tail, map, (lo, n), b_lo, window, keys, vals)?,
        }
        mark(marks, 1, s)?;
        k.histogram(s, &self.keys, m, &mut self.counts, total)?;
        k.scan(s, &self.counts, &mut self.offsets, total, &mut self.tiles)?;
        self.cursor.copy_from_device_async_at(0, &self.offsets, s)?;
        k.scatter(
            s,
            &self.keys,
            &self.vals,
            m,
            &mut self.cursor,
            &mut self.sorted,
        )?;
        mark(marks, 2, s)?;
        k.task_counts(s, &self.counts, total, p.t, &mut self.tasks)?;
        k.scan(
            s,
            &self.tasks,
            &mut self.task_offsets,
            total,
            &mut self.tiles,
        )?;
        let tasks = (&self.task_offsets, &self.tasks);
        self.order.sort(k, s, &self.counts, tasks, total, p.t)?;
        let order = (&self.order.order, &self.order.bucket_of);
        if let Some(e) = points_ready {
            s.wait(e)?;
        }
        let ck = C::kernels(k);
        ck.task_sums(
            s,
            bases,
            bases.len(),
            &self.sorted,
            &self.offsets,
            &self.counts,
            tasks,
            total,
            p.t,
            order,
            &mut self.partial,
        )?;
        ck.task_reduce(s, &self.partial, tasks, total, accumulate, &mut self.sums)?;
        mark(marks, 3, s)
    }

    /// Enqueues the window reduction of the bucket sums into `out` (`plan.out_len()`
    /// entries); records `marks[4]` after it.
    pub fn windows<C: GpuCurve<Jacobian = J>>(
        &mut self,
        k: &MsmKernels,
        s: &Stream,
        out: &mut DeviceBuffer<J>,
        marks: Option<&[Event; 5]>,
    ) -> Result<(), CudaError> {
        let p = self.plan;
        let ck = C::kernels(k);
        ck.segments(s, &self.sums, p.buckets, p.nw, p.seg, &mut self.segments)?;
        ck.sum_groups(s, &self.segments, p.out_len(), p.fold(), out)?;
        mark(marks, 4, s)
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
    fn alloc(ctx: &Arc<Context>, plan: &Plan) -> Result<Self, CudaError> {
        let slots = plan.max_tasks();
        let t = plan.t as usize;
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
        tasks: (&DeviceBuffer<u32>, &DeviceBuffer<u32>),
        total: usize,
        t: u32,
    ) -> Result<(), CudaError> {
        let slots = self.keys.len();
        let lengths = t as usize;
        k.task_keys(
            s,
            counts,
            tasks,
            total,
            t,
            &mut self.keys,
            &mut self.vals,
            &mut self.bucket_of,
        )?;
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

fn mark(marks: Option<&[Event; 5]>, i: usize, s: &Stream) -> Result<(), CudaError> {
    if let Some(m) = marks {
        m[i].record(s)?;
    }
    Ok(())
}

/// The MSM from segment results: `parts` holds one or more runs of `plan.out_len()` entries
/// (one per chunk), laid out window by window. Windows are summed across runs, then combined
/// by doubling.
pub(crate) fn combine<C: GpuCurve>(plan: &Plan, parts: &[C::Jacobian]) -> C::Projective {
    let len = plan.out_len();
    let segs = plan.per_window() as usize;
    let runs = parts.len() / len.max(1);
    let windows: Vec<C::Projective> = (0..plan.nw as usize)
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
    for w in windows.iter().rev() {
        for _ in 0..plan.c {
            acc = acc.double();
        }
        acc += w;
    }
    acc
}
