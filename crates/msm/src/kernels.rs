//! Typed launches of the MSM kernels (`kernels/msm.cu`): each wrapper checks lengths and holds
//! the one unsafe launch.

#![allow(unsafe_code)]

use std::sync::Arc;

use bytemuck::Pod;
use zkpipe_cuda::{
    Context, DeviceBuffer, Function, ImageBytes, KernelImage, KernelParam, LaunchConfig, Module,
    Stream,
};
use zkpipe_field::Fr;

use crate::cuda::CudaError;

/// The compiled MSM kernels.
pub const IMAGE: KernelImage = KernelImage {
    name: "msm",
    ptx: Some(zkpipe_cuda::Ptx {
        arch: (7, 5),
        text: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.compute_75.ptx.zst")),
    }),
    cubins: &[
        zkpipe_cuda::Cubin {
            arch: (7, 5),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.sm_75.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.sm_80.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 6),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.sm_86.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 9),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.sm_89.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (9, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.sm_90.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (10, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.sm_100.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (12, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/msm.sm_120.cubin.zst")),
        },
    ],
};

/// `preferred` threads a block, or fewer (whole warps) where the kernels allow at most `limit`
/// on this device.
fn fitting_block(preferred: u32, limit: u32) -> u32 {
    preferred.min(limit / 32 * 32).max(32)
}

/// The kernels of one curve.
#[derive(Debug)]
pub struct CurveKernels {
    /// Threads a block of the bucket-sum kernel.
    task_block: u32,
    sum_groups: Function,
    task_sums: Function,
    /// Runs a thread of the bucket-sum kernel steps side by side by batch-affine additions,
    /// or 1 for XYZZ additions, one task a thread.
    task_batch: u32,
    /// Threads that fill the device a few times over: the batch-affine kernel splits tasks
    /// into runs until it has this many.
    fill_threads: usize,
    /// The batch-affine kernel's split set by [`MsmTuning::g2_split`] or
    /// [`MsmKernels::set_g2_split`], if any.
    split_setting: Option<TaskSplit>,
    task_fold: Function,
    task_reduce: Function,
    segments: Function,
    boolean: Function,
    ones: Function,
    precompute: Function,
}

/// The MSM kernels of one device.
#[derive(Debug)]
pub struct MsmKernels {
    digits: Function,
    digits_tail: Function,
    histogram: Function,
    scan_tiles: Function,
    scan_top: Function,
    scan_add: Function,
    scatter: Function,
    bin_starts: Function,
    bin_scatter: Function,
    bucket_scatter: Function,
    task_counts: Function,
    task_keys: Function,
    /// G1 kernels.
    pub g1: CurveKernels,
    /// G2 kernels.
    pub g2: CurveKernels,
}

const BLOCK: u32 = 256;
/// Threads a block of the bucket kernels: their shared accumulators are sized for this many
/// (`MSM_BUCKET_BLOCK` in msm.cu).
const BUCKET_BLOCK: u32 = 128;

/// Entries per tile of the prefix-sum kernels.
pub const SCAN_TILE: usize = 8192;

/// Tiles of a prefix sum over `total` entries.
pub fn scan_tiles(total: usize) -> usize {
    total.div_ceil(SCAN_TILE)
}

pub(crate) fn need(what: &'static str, len: usize, needed: usize) -> Result<(), CudaError> {
    if len < needed {
        return Err(CudaError::BufferTooSmall { what, len, needed });
    }
    Ok(())
}

/// A density bitmap on the device: its words, and for each word the number of selected
/// variables before it (one entry more than the words).
#[derive(Debug, Clone, Copy)]
pub struct DensityMap<'a> {
    pub words: &'a DeviceBuffer<u32>,
    pub prefix: &'a DeviceBuffer<u32>,
}

impl DensityMap<'_> {
    /// A prefix entry for each word and one past the last.
    fn check(&self) -> Result<(), CudaError> {
        need("density prefix", self.prefix.len(), self.words.len() + 1)
    }
}

/// A split MSM query's two bitmaps: the variables its bases stand for (`density`), and of
/// those, the ones whose scalar is one (`ones`).
#[derive(Debug, Clone, Copy)]
pub struct SplitMaps<'a> {
    pub density: DensityMap<'a>,
    pub ones: DensityMap<'a>,
}

/// A Pippenger run's windows: `count` windows of `bits` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowShape {
    pub bits: u32,
    pub count: u32,
}

/// Where a run's digits go: each digit's key (its window's bucket) and value (its base).
#[derive(Debug)]
pub struct DigitsOut<'a> {
    pub keys: &'a mut DeviceBuffer<u32>,
    pub vals: &'a mut DeviceBuffer<u32>,
}

/// Scalars `lo..lo + n` of a dense MSM: scalar `lo + i` gets the value `v_lo + i`, the index
/// of its base in the buffer the bucket sums read, which holds `bases` points.
#[derive(Debug, Clone, Copy)]
pub struct DenseScalars<'a> {
    pub scalars: &'a DeviceBuffer<Fr>,
    pub lo: usize,
    pub n: usize,
    pub v_lo: usize,
    pub bases: usize,
}

/// Tail entries `lo..lo + n` of a split MSM: entry j is variable `index[j]` with scalar
/// `scalars[j]`; a variable outside `map`'s density gets no digit, a selected one the value
/// (its rank) - `b_lo`, which the caller keeps below the bases its buffer holds.
#[derive(Debug, Clone, Copy)]
pub struct TailScalars<'a> {
    pub scalars: &'a DeviceBuffer<Fr>,
    pub index: &'a DeviceBuffer<u32>,
    pub map: DensityMap<'a>,
    pub lo: usize,
    pub n: usize,
    pub b_lo: usize,
}

/// The tasks of the bucket sums: for each of `buckets` buckets, the index of its first task
/// and the number of its tasks, a task summing at most `size` of the bucket's points; no
/// bucket has more than `most` tasks.
#[derive(Debug, Clone, Copy)]
pub struct Tasks<'a> {
    pub offsets: &'a DeviceBuffer<u32>,
    pub counts: &'a DeviceBuffer<u32>,
    pub buckets: usize,
    pub size: u32,
    pub most: usize,
}

impl Tasks<'_> {
    /// Task tables of at least one bucket, beside its points' `counts`, and a task size of at
    /// least 1.
    fn check(&self, counts: &DeviceBuffer<u32>) -> Result<(), CudaError> {
        need("counts", counts.len(), self.buckets)?;
        need("task offsets", self.offsets.len(), self.buckets)?;
        need("tasks", self.counts.len(), self.buckets)?;
        if self.buckets == 0 || self.size == 0 {
            return Err(CudaError::BufferTooSmall {
                what: "buckets",
                len: self.buckets,
                needed: 1,
            });
        }
        Ok(())
    }

    /// The bucket count as the kernels take it.
    fn buckets32(&self) -> Result<u32, CudaError> {
        u32::try_from(self.buckets).map_err(|_| CudaError::TooLarge { n: self.buckets })
    }
}

/// The sorted buckets: each bucket's values (base indices) in `sorted`, from its offset, as
/// many as its count.
#[derive(Debug, Clone, Copy)]
pub struct SortedBuckets<'a> {
    pub sorted: &'a DeviceBuffer<u32>,
    pub offsets: &'a DeviceBuffer<u32>,
    pub counts: &'a DeviceBuffer<u32>,
}

/// How the task reduction writes the bucket sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketWrite {
    /// The sums replace what the buffer held.
    Overwrite,
    /// The sums are added to what the buffer held (a streamed MSM's later chunks).
    Add,
}

/// An index or count that the kernels take as a 32-bit integer.
fn index32(n: usize) -> Result<u32, CudaError> {
    u32::try_from(n).map_err(|_| CudaError::TooLarge { n })
}

/// The outputs of a digits kernel over n scalars.
fn check_digit_outputs(
    n: usize,
    window: WindowShape,
    out: &DigitsOut<'_>,
) -> Result<(), CudaError> {
    let WindowShape { bits: c, count: nw } = window;
    let m = n * nw as usize;
    need("keys", out.keys.len(), m)?;
    need("values", out.vals.len(), m)?;
    if !(2..=24).contains(&c) || nw * c < crate::pippenger::DIGIT_BITS {
        return Err(CudaError::Window { c, nw });
    }
    if n >= 1 << 31 {
        return Err(CudaError::TooLarge { n });
    }
    Ok(())
}

/// The most copies of precomputed multiples a base may have (the precomputation kernel keeps
/// a point's copies in one thread's local memory).
pub const MAX_COPIES: u32 = 16;

/// How the bases a digits kernel reads are laid out: `copies` copies of `stride` points each,
/// copy j holding 2^(c·j) times the points of copy 0 ([`Copies::ONE`] without multiples).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copies {
    /// Copies (1 to [`MAX_COPIES`]).
    pub copies: u32,
    /// Points a copy.
    pub stride: usize,
}

impl Copies {
    /// Bases without multiples.
    pub const ONE: Copies = Copies {
        copies: 1,
        stride: 0,
    };

    /// The bases a digit kernel reads for values below `values`: `values` for one copy, all
    /// copies otherwise; an error when a value would leave its copy or not fit 31 bits.
    fn reach(self, values: usize) -> Result<usize, CudaError> {
        let reach = match self.copies {
            1 => values,
            2..=MAX_COPIES if values <= self.stride => self.stride * self.copies as usize,
            2..=MAX_COPIES => {
                return Err(CudaError::BufferTooSmall {
                    what: "copy of the bases",
                    len: self.stride,
                    needed: values,
                })
            }
            copies => return Err(CudaError::Copies { copies }),
        };
        if reach >= 1 << 31 {
            return Err(CudaError::TooLarge { n: reach });
        }
        Ok(reach)
    }
}

fn grid(m: usize) -> Result<LaunchConfig, CudaError> {
    grid_of(m, BLOCK)
}

/// Small blocks for the window reduction: a few thousand long-running threads, spread over
/// every SM instead of packed onto a few.
const SMALL_BLOCK: u32 = 64;

fn grid_of(m: usize, block: u32) -> Result<LaunchConfig, CudaError> {
    let blocks = m.div_ceil(block as usize).max(1);
    let blocks = u32::try_from(blocks).map_err(|_| CudaError::TooLarge { n: m })?;
    Ok(LaunchConfig {
        grid: (blocks, 1, 1),
        block: (block, 1, 1),
        shared_bytes: 0,
    })
}

/// Settings of the MSM kernels for comparisons (benchmarks and tests); the default is what
/// the engine runs: G2's batch from the memory the work may use, its split from the task
/// counts ([`TaskSplit::filling`]). Any setting gives the same sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MsmTuning {
    /// The runs a thread of G2's bucket sums steps side by side: 1 for XYZZ additions one
    /// task a thread, or one of [`G2_AFFINE_BATCHES`]. G1's stay XYZZ: an Fp2 inversion is
    /// one Fp inversion and a few products, so against the products of an addition an
    /// inversion weighs about three times as much in G1 as in G2.
    pub g2_batch: Option<u32>,
    /// How G2's batch-affine bucket sums split their tasks into runs.
    pub g2_split: Option<TaskSplit>,
}

impl MsmTuning {
    /// The batch G2's bucket kernel is asked for, checked.
    fn g2_batch(&self) -> Result<Option<u32>, CudaError> {
        match self.g2_batch {
            None => Ok(None),
            Some(b) if b == 1 || G2_AFFINE_BATCHES.contains(&b) => Ok(Some(b)),
            Some(b) => Err(CudaError::Setting {
                name: "MsmTuning::g2_batch",
                value: b.to_string(),
                expected: "1, 16, 32 or 64",
            }),
        }
    }
}

/// How the batch-affine bucket sums share the tasks among threads: each task splits into
/// `parts` runs of nearly equal length, and a thread steps the runs of `per_thread` tasks side
/// by side, adding each task's run sums at its end (`parts · per_thread` runs, at most the
/// kernel's batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSplit {
    /// Runs a task splits into (a power of two).
    pub parts: u32,
    /// Tasks a thread takes.
    pub per_thread: u32,
}

/// Threads an SM the batch-affine bucket sums split tasks into runs to fill (a few waves: with
/// the longest tasks first, the last wave's short ones even out the SMs' ends; more waves
/// mean shorter runs, and more run sums a task adds at its end).
const FILL_PER_SM: usize = 1024;

/// Task sums a thread of the tree over a bucket's tasks adds at each level (the kernels'
/// `MSM_FOLD`).
const TASK_FOLD: usize = 16;

impl TaskSplit {
    /// Runs a thread steps side by side.
    pub fn runs(self) -> u32 {
        self.parts * self.per_thread
    }

    /// The split of `slots` tasks for a kernel stepping at most `batch` runs a thread that
    /// gives threads enough to fill `fill` threads' worth of runs: the fewest parts (a power
    /// of two up to the batch) with `slots · parts` runs at least `fill · batch`, and the
    /// batch's worth of runs a thread.
    pub fn filling(slots: usize, batch: u32, fill: usize) -> Self {
        let mut parts = 1;
        while parts < batch
            && slots.saturating_mul(parts as usize) < fill.saturating_mul(batch as usize)
        {
            parts *= 2;
        }
        Self {
            parts,
            per_thread: (batch / parts).max(1),
        }
    }

    /// This split, if a kernel stepping at most `batch` runs a thread can take it.
    pub fn check(self, batch: u32) -> Result<Self, CudaError> {
        let fits = batch > 1
            && self.parts.is_power_of_two()
            && self.per_thread >= 1
            && u64::from(self.parts) * u64::from(self.per_thread) <= u64::from(batch);
        match fits {
            true => Ok(self),
            false => Err(CudaError::Split {
                parts: self.parts,
                per_thread: self.per_thread,
                batch,
            }),
        }
    }
}

/// The runs a thread of `curve`'s bucket sums steps side by side as `tuning` asks (G2
/// only; G1's are XYZZ, 1), `None` where the memory picks.
fn batch_setting(curve: &str, tuning: &MsmTuning) -> Result<Option<u32>, CudaError> {
    match curve {
        "g2" => tuning.g2_batch(),
        _ => Ok(Some(1)),
    }
}

/// G2's batch-affine bucket kernels, largest batch first: the more runs a thread steps side
/// by side, the fewer inversions an addition, and the more local memory a thread, which the
/// driver sets aside for every thread the device can hold.
pub const G2_AFFINE_BATCHES: [u32; 3] = [64, 32, 16];

/// The share of the memory a device's work may use that the bucket kernel's local memory may
/// take: one eighth.
const LOCAL_SHARE: usize = 8;

/// The bucket-sum kernel for `name` and its batch: the batch `setting` names, else (G2) the
/// largest of [`G2_AFFINE_BATCHES`] whose local memory fits in 1/[`LOCAL_SHARE`] of `memory`,
/// else XYZZ additions.
fn bucket_kernel(
    m: &Arc<Module>,
    name: &str,
    setting: Option<u32>,
    memory: usize,
) -> Result<(Function, u32), CudaError> {
    let affine = |b: u32| m.function(&format!("msm_task_sums_affine{b}_{name}"));
    match setting {
        Some(1) => return Ok((m.function(&format!("msm_task_sums_{name}"))?, 1)),
        Some(b) => return Ok((affine(b)?, b)),
        None => {}
    }
    for b in G2_AFFINE_BATCHES {
        let f = affine(b)?;
        if f.local_reservation() <= memory / LOCAL_SHARE {
            return Ok((f, b));
        }
    }
    Ok((m.function(&format!("msm_task_sums_{name}"))?, 1))
}

impl CurveKernels {
    /// The most local memory the driver sets aside for any of these kernels.
    fn local_reservation(&self) -> usize {
        [
            &self.sum_groups,
            &self.task_sums,
            &self.task_fold,
            &self.task_reduce,
            &self.segments,
            &self.boolean,
            &self.ones,
            &self.precompute,
        ]
        .iter()
        .map(|f| f.local_reservation())
        .max()
        .unwrap_or(0)
    }
}

impl MsmKernels {
    /// The device memory the driver sets aside, at their first launch, for the local memory
    /// of the largest of these kernels (the G2 bucket sums' runs, the precomputed multiples'
    /// copies): it lies outside any allocation, and a VRAM budget must leave room for it.
    pub fn local_reservation(&self) -> usize {
        self.g1.local_reservation().max(self.g2.local_reservation())
    }

    /// The runs a thread of G2's bucket sums steps side by side (1: XYZZ additions).
    pub fn g2_batch(&self) -> u32 {
        self.g2.task_batch
    }

    /// Splits G2's batch-affine bucket sums as `split` says from now on.
    pub fn set_g2_split(&mut self, split: TaskSplit) -> Result<(), CudaError> {
        self.g2.split_setting = Some(split.check(self.g2.task_batch)?);
        Ok(())
    }

    /// Loads the kernels on `ctx`'s device, sized for all of its memory.
    pub fn load(ctx: &Arc<Context>) -> Result<Self, CudaError> {
        Self::for_memory(ctx, ctx.info().total_memory)
    }

    /// Loads the kernels on `ctx`'s device for work that may use `memory` bytes of it (a VRAM
    /// cap): G2's bucket kernel is the one whose local memory fits (`bucket_kernel`).
    pub fn for_memory(ctx: &Arc<Context>, memory: usize) -> Result<Self, CudaError> {
        Self::tuned(ctx, memory, &MsmTuning::default())
    }

    /// As [`MsmKernels::for_memory`], with the settings of `tuning` in place of the defaults.
    pub fn tuned(ctx: &Arc<Context>, memory: usize, tuning: &MsmTuning) -> Result<Self, CudaError> {
        let m = Module::load(ctx, &IMAGE)?;
        let curve = |name: &str| -> Result<CurveKernels, CudaError> {
            // The bucket kernels keep an accumulator a thread in shared memory, sized for
            // BUCKET_BLOCK threads (their launch bounds), and never take more threads than the
            // device's registers allow them (the driver's limit for this image).
            let preferred = BUCKET_BLOCK;
            let (task_sums, task_batch) =
                bucket_kernel(&m, name, batch_setting(name, tuning)?, memory)?;
            let ones = m.function(&format!("msm_ones_{name}"))?;
            let limit = task_sums
                .max_threads_per_block()
                .min(ones.max_threads_per_block());
            let task_block = fitting_block(preferred, limit);
            Ok(CurveKernels {
                task_block,
                task_batch,
                fill_threads: ctx.info().sm_count.max(1) as usize * FILL_PER_SM,
                split_setting: match (name, task_batch, tuning.g2_split) {
                    ("g2", batch @ 2.., Some(split)) => Some(split.check(batch)?),
                    _ => None,
                },
                sum_groups: m.function(&format!("msm_sum_groups_{name}"))?,
                task_sums,
                task_fold: m.function(&format!("msm_task_fold_{name}"))?,
                task_reduce: m.function(&format!("msm_task_reduce_{name}"))?,
                segments: m.function(&format!("msm_segments_{name}"))?,
                boolean: m.function(&format!("msm_boolean_{name}"))?,
                ones,
                precompute: m.function(&format!("msm_precompute_{name}"))?,
            })
        };
        Ok(Self {
            digits: m.function("msm_digits")?,
            digits_tail: m.function("msm_digits_tail")?,
            histogram: m.function("msm_histogram")?,
            scan_tiles: m.function("msm_scan_tiles")?,
            scan_top: m.function("msm_scan_top")?,
            scan_add: m.function("msm_scan_add")?,
            scatter: m.function("msm_scatter")?,
            bin_starts: m.function("msm_bin_starts")?,
            bin_scatter: m.function("msm_bin_scatter")?,
            bucket_scatter: m.function("msm_bucket_scatter")?,
            task_counts: m.function("msm_task_counts")?,
            task_keys: m.function("msm_task_keys")?,
            g1: curve("g1")?,
            g2: curve("g2")?,
        })
    }

    /// Signed-digit keys and values of the windows of `window` for each scalar of `input`,
    /// plus `copy · stride` in the value of a window read from copy `copy` of bases with
    /// precomputed multiples.
    pub fn digits(
        &self,
        s: &Stream,
        input: DenseScalars<'_>,
        window: WindowShape,
        copies: Copies,
        out: DigitsOut<'_>,
    ) -> Result<(), CudaError> {
        let DenseScalars {
            scalars,
            lo,
            n,
            v_lo,
            bases,
        } = input;
        need("scalars", scalars.len(), lo + n)?;
        check_digit_outputs(n, window, &out)?;
        let WindowShape { bits: c, count: nw } = window;
        let DigitsOut { keys, vals } = out;
        let reach = copies.reach(v_lo + n)?;
        need("bases", bases, reach)?;
        let lo32 = index32(lo + n).map(|_| lo as u32)?;
        let n32 = index32(n)?;
        let v32 = index32(v_lo + n).map(|_| v_lo as u32)?;
        let stride = index32(copies.stride)?;
        let copies = copies.copies;
        // SAFETY: one thread per scalar; thread i reads scalars[lo + i] < scalars.len() and
        // writes keys/vals at w * n + i < nw * n (checked); values stay below `reach` <=
        // `bases` < 2^31 (checked), so the sign bit stays free.
        unsafe {
            self.digits.launch(
                s,
                grid(n)?,
                &[
                    scalars, &lo32, &n32, &v32, &c, &nw, &copies, &stride, &*keys, &*vals,
                ],
            )
        }?;
        Ok(())
    }

    /// The digits of a split MSM's tail entries (`input`, a split query's chunk).
    pub fn digits_tail(
        &self,
        s: &Stream,
        input: TailScalars<'_>,
        window: WindowShape,
        out: DigitsOut<'_>,
    ) -> Result<(), CudaError> {
        let TailScalars {
            scalars,
            index,
            map,
            lo,
            n,
            b_lo,
        } = input;
        need("tail scalars", scalars.len(), lo + n)?;
        need("tail indices", index.len(), lo + n)?;
        check_digit_outputs(n, window, &out)?;
        map.check()?;
        let DensityMap {
            words: density,
            prefix,
        } = map;
        let WindowShape { bits: c, count: nw } = window;
        let DigitsOut { keys, vals } = out;
        let lo32 = index32(lo + n).map(|_| lo as u32)?;
        let n32 = index32(n)?;
        let b32 = index32(b_lo)?;
        // SAFETY: thread i < n reads tail entry lo + i (checked); the entry's variable lies in
        // the density's words (the split was made over the same variables, as `SplitQuery`
        // checks), and prefix holds one entry more than density. Writes stay below nw * n.
        unsafe {
            self.digits_tail.launch(
                s,
                grid(n)?,
                &[
                    scalars, index, density, prefix, &lo32, &n32, &b32, &c, &nw, &*keys, &*vals,
                ],
            )
        }?;
        Ok(())
    }

    /// counts\[key\] += 1 over the first m keys.
    pub fn histogram(
        &self,
        s: &Stream,
        keys: &DeviceBuffer<u32>,
        m: usize,
        counts: &mut DeviceBuffer<u32>,
        total: usize,
    ) -> Result<(), CudaError> {
        need("keys", keys.len(), m)?;
        need("counts", counts.len(), total)?;
        let m64 = m as u64;
        // SAFETY: keys are below `total` (windows * buckets, as `digits` makes them) or the
        // no-key marker; counts holds `total` entries.
        unsafe { self.histogram.launch(s, grid(m)?, &[keys, &m64, &*counts]) }?;
        Ok(())
    }

    /// offsets = exclusive prefix sum of counts[0..total), in tiles of [`SCAN_TILE`];
    /// `tiles` holds at least [`scan_tiles`]`(total)` entries.
    pub fn scan(
        &self,
        s: &Stream,
        counts: &DeviceBuffer<u32>,
        offsets: &mut DeviceBuffer<u32>,
        total: usize,
        tiles: &mut DeviceBuffer<u32>,
    ) -> Result<(), CudaError> {
        need("counts", counts.len(), total)?;
        need("offsets", offsets.len(), total)?;
        let nt = scan_tiles(total);
        need("scan tiles", tiles.len(), nt)?;
        if nt > SCAN_TILE {
            return Err(CudaError::TooLarge { n: total });
        }
        if total == 0 {
            return Ok(());
        }
        let t32 = u32::try_from(total).map_err(|_| CudaError::TooLarge { n: total })?;
        let nt32 = nt as u32;
        let block = |grid: u32| LaunchConfig {
            grid: (grid, 1, 1),
            block: (1024, 1, 1),
            shared_bytes: 0,
        };
        // SAFETY: block b reads counts and writes offsets in [b·SCAN_TILE, (b+1)·SCAN_TILE)
        // below total, and writes tiles[b], b < nt <= tiles.len().
        unsafe {
            self.scan_tiles
                .launch(s, block(nt32), &[counts, &*offsets, &t32, &*tiles])
        }?;
        // SAFETY: one block scans tiles[0..nt) in place, nt <= SCAN_TILE (checked).
        unsafe { self.scan_top.launch(s, block(1), &[&*tiles, &nt32]) }?;
        // SAFETY: thread i < total reads tiles[i / SCAN_TILE] < nt and updates offsets[i].
        unsafe {
            self.scan_add
                .launch(s, grid(total)?, &[&*offsets, &t32, &*tiles])
        }?;
        Ok(())
    }

    /// Scatters the values of valid keys into `sorted`, bucket by bucket.
    pub fn scatter(
        &self,
        s: &Stream,
        keys: &DeviceBuffer<u32>,
        vals: &DeviceBuffer<u32>,
        m: usize,
        cursor: &mut DeviceBuffer<u32>,
        sorted: &mut DeviceBuffer<u32>,
    ) -> Result<(), CudaError> {
        need("keys", keys.len(), m)?;
        need("values", vals.len(), m)?;
        need("sorted", sorted.len(), m)?;
        let m64 = m as u64;
        // SAFETY: cursor starts at the exclusive prefix sums of the key counts, so positions
        // stay below the number of valid keys <= m <= sorted.len().
        unsafe {
            self.scatter
                .launch(s, grid(m)?, &[keys, vals, &m64, &*cursor, &*sorted])
        }?;
        Ok(())
    }
}

/// Threads a block of the sort's first pass (`MSM_BIN_THREADS` in msm.cu).
const BIN_THREADS: u32 = 256;

/// Keys a block of the sort's first pass ranks (`MSM_BIN_THREADS · MSM_BIN_ITEMS` in msm.cu).
const BIN_TILE: usize = 2048;

/// Threads a block of the sort's second pass (`MSM_RANK_THREADS` in msm.cu).
const RANK_THREADS: u32 = 1024;

/// Entries a block of the sort's second pass ranks (`MSM_RANK_THREADS · MSM_BIN_ITEMS`).
const RANK_TILE: usize = 8192;

/// Bins one pass of the sort may hold (`MSM_MAX_BINS` in msm.cu: shared-memory counters).
pub const MAX_BINS: u32 = 1024;

/// One pass of the two-pass bucket sort: the entries of the keys and values it takes, the bins
/// and the buckets its keys fall in (those of whole sets), and the bins' size.
#[derive(Debug, Clone, Copy)]
pub struct SortPass {
    /// First entry and number of entries.
    pub entries: (usize, usize),
    /// First bin and number of bins.
    pub bins: (u32, u32),
    /// First bucket and the bucket past the last.
    pub buckets: (u32, u32),
    /// A bin holds 2^shift consecutive buckets.
    pub shift: u32,
}

impl MsmKernels {
    /// Where each of the first `total >> shift` bins (2^shift buckets each) starts in its
    /// pass's staging buffer, passes holding `pass_buckets` buckets.
    pub fn bin_starts(
        &self,
        s: &Stream,
        offsets: &DeviceBuffer<u32>,
        total: usize,
        (shift, pass_buckets): (u32, u32),
        bin_cursor: &mut DeviceBuffer<u32>,
    ) -> Result<(), CudaError> {
        let bins = total >> shift;
        need("bucket offsets", offsets.len(), total)?;
        need("bin cursors", bin_cursor.len(), bins)?;
        if shift >= 32 || pass_buckets == 0 || pass_buckets % (1 << shift) != 0 {
            return Err(CudaError::SortPass(
                "a pass does not hold whole bins of 2^shift buckets",
            ));
        }
        let bins32 = index32(bins)?;
        // SAFETY: thread b < bins reads offsets at b << shift and at the start of its pass,
        // both below total (bins << shift <= total), and writes bin_cursor[b].
        unsafe {
            self.bin_starts.launch(
                s,
                grid(bins)?,
                &[offsets, &bins32, &shift, &pass_buckets, &*bin_cursor],
            )
        }?;
        Ok(())
    }

    /// The sort's first pass: the valid (key, value) pairs of `pass`'s entries, bin by bin,
    /// into the staging buffers, at the places `bin_cursor` reserves ([`Self::bin_starts`]).
    pub fn bin_scatter(
        &self,
        s: &Stream,
        (keys, vals): (&DeviceBuffer<u32>, &DeviceBuffer<u32>),
        pass: &SortPass,
        bin_cursor: &mut DeviceBuffer<u32>,
        (stage_keys, stage_vals): (&mut DeviceBuffer<u32>, &mut DeviceBuffer<u32>),
    ) -> Result<(), CudaError> {
        let (lo, len) = pass.entries;
        let (bin0, bins) = pass.bins;
        need("keys", keys.len(), lo + len)?;
        need("values", vals.len(), lo + len)?;
        need("staging keys", stage_keys.len(), len)?;
        need("staging values", stage_vals.len(), len)?;
        need("bin cursors", bin_cursor.len(), (bin0 + bins) as usize)?;
        if bins > MAX_BINS {
            return Err(CudaError::SortPass(
                "a pass holds more bins than the shared-memory counters",
            ));
        }
        let lo64 = lo as u64;
        let len32 = index32(len)?;
        let blocks = u32::try_from(len.div_ceil(BIN_TILE).max(1))
            .map_err(|_| CudaError::TooLarge { n: len })?;
        let config = LaunchConfig {
            grid: (blocks, 1, 1),
            block: (BIN_THREADS, 1, 1),
            shared_bytes: 0,
        };
        // SAFETY: block b reads entries lo + [b·BIN_TILE, (b+1)·BIN_TILE) below lo + len
        // (checked); the valid keys there fall in bins [bin0, bin0 + bins) (the digits of the
        // pass's sets), bins <= MAX_BINS shared counters; the places reserved from
        // bin_cursor (the pass's exclusive prefix sums of its bins' counts) stay below the
        // pass's valid keys <= len <= the staging buffers' lengths.
        unsafe {
            self.bin_scatter.launch(
                s,
                config,
                &[
                    keys,
                    vals,
                    &lo64,
                    &len32,
                    &pass.shift,
                    &bin0,
                    &bins,
                    &*bin_cursor,
                    &*stage_keys,
                    &*stage_vals,
                ],
            )
        }?;
        Ok(())
    }

    /// The sort's second pass: each staged value of `pass` at the next place of its bucket in
    /// `sorted`, `cursor` starting at the bucket offsets.
    pub fn bucket_scatter(
        &self,
        s: &Stream,
        (stage_keys, stage_vals): (&DeviceBuffer<u32>, &DeviceBuffer<u32>),
        (offsets, counts): (&DeviceBuffer<u32>, &DeviceBuffer<u32>),
        pass: &SortPass,
        cursor: &mut DeviceBuffer<u32>,
        sorted: &mut DeviceBuffer<u32>,
    ) -> Result<(), CudaError> {
        let (lo, len) = pass.entries;
        let (first, end) = pass.buckets;
        if first >= end {
            return Err(CudaError::SortPass("a pass holds no bucket"));
        }
        need("staging keys", stage_keys.len(), len)?;
        need("staging values", stage_vals.len(), len)?;
        need("bucket offsets", offsets.len(), end as usize)?;
        need("bucket counts", counts.len(), end as usize)?;
        need("bucket cursors", cursor.len(), end as usize)?;
        need("sorted", sorted.len(), lo + len)?;
        let blocks = u32::try_from(len.div_ceil(RANK_TILE).max(1))
            .map_err(|_| CudaError::TooLarge { n: len })?;
        let config = LaunchConfig {
            grid: (blocks, 1, 1),
            block: (RANK_THREADS, 1, 1),
            shared_bytes: 0,
        };
        // SAFETY: block b reads staged entries [b·RANK_TILE, (b+1)·RANK_TILE) below the pass's
        // valid keys <= len (checked), whose keys (pass A's) are buckets in [first, end), below
        // the lengths of offsets, counts and cursor (checked); its shared counters take the
        // buckets within MSM_RANK_WINDOW of its first entry's bin and the others go to the
        // cursors directly. Places stay below offsets[end - 1] + counts[end - 1], the valid keys
        // of the entries up to the pass's end <= lo + len <= sorted.len().
        unsafe {
            self.bucket_scatter.launch(
                s,
                config,
                &[
                    stage_keys,
                    stage_vals,
                    offsets,
                    counts,
                    &first,
                    &end,
                    &pass.shift,
                    &*cursor,
                    &*sorted,
                ],
            )
        }?;
        Ok(())
    }
}

impl MsmKernels {
    /// tasks\[b\] = ceil(counts\[b\] / t).
    pub fn task_counts(
        &self,
        s: &Stream,
        counts: &DeviceBuffer<u32>,
        total: usize,
        t: u32,
        tasks: &mut DeviceBuffer<u32>,
    ) -> Result<(), CudaError> {
        need("counts", counts.len(), total)?;
        need("tasks", tasks.len(), total)?;
        if t == 0 {
            return Err(CudaError::BufferTooSmall {
                what: "task size",
                len: 0,
                needed: 1,
            });
        }
        let t32 = u32::try_from(total).map_err(|_| CudaError::TooLarge { n: total })?;
        // SAFETY: thread b < total reads counts[b] and writes tasks[b].
        unsafe {
            self.task_counts
                .launch(s, grid(total)?, &[counts, &t32, &t, &*tasks])
        }?;
        Ok(())
    }
}

/// The steps of the tree's levels over buckets of at most `most` tasks (1, 16, 256, ...,
/// while more than [`TASK_FOLD`] would be left a bucket), and the step between the task sums
/// left for the last addition.
fn fold_steps(most: usize) -> Result<(Vec<u32>, u32), CudaError> {
    let mut folds = Vec::new();
    let mut step = 1usize;
    while most.div_ceil(step) > TASK_FOLD {
        folds.push(step);
        step *= TASK_FOLD;
    }
    let too_many = |_| CudaError::TooLarge { n: most };
    let folds = folds
        .into_iter()
        .map(|f| u32::try_from(f).map_err(too_many))
        .collect::<Result<_, _>>()?;
    Ok((folds, u32::try_from(step).map_err(too_many)?))
}

impl MsmKernels {
    /// For each task slot g < slots: keys\[g\] = t - (task g's length), vals\[g\] = g and
    /// bucket_of\[g\] = its bucket; slots past the task count get the no-key marker. Sorted by
    /// key, the tasks come longest first.
    pub fn task_keys(
        &self,
        s: &Stream,
        counts: &DeviceBuffer<u32>,
        tasks: Tasks<'_>,
        out: DigitsOut<'_>,
        bucket_of: &mut DeviceBuffer<u32>,
    ) -> Result<(), CudaError> {
        tasks.check(counts)?;
        let DigitsOut { keys, vals } = out;
        let slots = keys.len();
        need("task values", vals.len(), slots)?;
        need("task buckets", bucket_of.len(), slots)?;
        let t32 = tasks.buckets32()?;
        let (task_offsets, task_counts, t) = (tasks.offsets, tasks.counts, tasks.size);
        let s32 = u32::try_from(slots).map_err(|_| CudaError::TooLarge { n: slots })?;
        // SAFETY: thread g < slots writes keys/vals/bucket_of[g] (all hold slots entries) and
        // reads the task tables below total (checked).
        unsafe {
            self.task_keys.launch(
                s,
                grid(slots)?,
                &[
                    counts,
                    task_offsets,
                    task_counts,
                    &t32,
                    &t,
                    &s32,
                    &*keys,
                    &*vals,
                    &*bucket_of,
                ],
            )
        }?;
        Ok(())
    }
}

/// An order of the task slots (a permutation of the tasks) and each task's bucket, from
/// [`MsmKernels::task_keys`] and a counting sort.
#[derive(Debug, Clone, Copy)]
pub struct TaskOrder<'a> {
    pub order: &'a DeviceBuffer<u32>,
    pub bucket_of: &'a DeviceBuffer<u32>,
}

impl CurveKernels {
    /// `out[j·n + i]` = 2^(c·j) · `bases[i]` for i < n and j < `copies`.
    pub fn precompute<A: Pod>(
        &self,
        s: &Stream,
        (bases, n): (&DeviceBuffer<A>, usize),
        c: u32,
        copies: u32,
        out: &mut DeviceBuffer<A>,
    ) -> Result<(), CudaError> {
        need("bases", bases.len(), n)?;
        if !(1..=MAX_COPIES).contains(&copies) {
            return Err(CudaError::Copies { copies });
        }
        let total = n * copies as usize;
        need("precomputed bases", out.len(), total)?;
        index32(total)?;
        let n32 = index32(n)?;
        // SAFETY: thread i < n reads bases[i] and writes out[j·n + i] for j < copies, below
        // copies·n <= out.len() < 2^32 (checked); copies <= MAX_COPIES, the kernel's local
        // arrays.
        unsafe {
            self.precompute
                .launch(s, grid(n)?, &[bases, &n32, &c, &copies, &*out])
        }?;
        Ok(())
    }

    /// partial\[k\] = the sum of task k's points: task j of bucket b covers its points
    /// [j·t, (j + 1)·t). `partial` holds at least the number of tasks.
    pub fn task_sums<A: Pod, J: Pod>(
        &self,
        s: &Stream,
        bases: &DeviceBuffer<A>,
        buckets: SortedBuckets<'_>,
        tasks: Tasks<'_>,
        order: TaskOrder<'_>,
        partial: &mut DeviceBuffer<J>,
    ) -> Result<(), CudaError> {
        let SortedBuckets {
            sorted,
            offsets,
            counts,
        } = buckets;
        let TaskOrder { order, bucket_of } = order;
        need("task order", order.len(), partial.len())?;
        need("task buckets", bucket_of.len(), partial.len())?;
        need("offsets", offsets.len(), tasks.buckets)?;
        tasks.check(counts)?;
        let t32 = tasks.buckets32()?;
        let (task_offsets, task_counts, t) = (tasks.offsets, tasks.counts, tasks.size);
        // The batch-affine kernel takes split.per_thread task slots a thread, each split
        // into split.parts runs; the XYZZ kernel one slot a thread.
        let split = self.task_split(partial.len());
        let threads = partial.len().div_ceil(split.per_thread as usize);
        let mut args: Vec<&dyn KernelParam> = vec![
            bases,
            sorted,
            offsets,
            counts,
            task_offsets,
            task_counts,
            &t32,
            &t,
            order,
            bucket_of,
        ];
        if self.task_batch > 1 {
            split.check(self.task_batch)?;
            args.push(&split.parts);
            args.push(&split.per_thread);
        }
        args.push(&*partial);
        // SAFETY: values index bases below n (made by `digits` from scalar indices); threads
        // beyond the device-side task count return; the host sized `partial` for every task
        // (total + m / t bounds the sum of ceil(count / t)). `order` is a permutation of the
        // tasks and `bucket_of` their buckets (task_keys and a counting sort), both holding
        // partial.len() entries (checked). A thread takes split.per_thread slots, so the grid
        // covers every slot, and at most task_batch runs (checked).
        unsafe {
            self.task_sums
                .launch(s, grid_of(threads, self.task_block)?, &args)
        }?;
        Ok(())
    }

    /// The batch-affine bucket sums' split of `slots` tasks (at most): the set one, else
    /// [`TaskSplit::filling`] the device's fill; one task a thread for the XYZZ kernel.
    fn task_split(&self, slots: usize) -> TaskSplit {
        if self.task_batch == 1 {
            return TaskSplit {
                parts: 1,
                per_thread: 1,
            };
        }
        let split = self
            .split_setting
            .unwrap_or_else(|| TaskSplit::filling(slots, self.task_batch, self.fill_threads));
        tracing::debug!(
            slots,
            parts = split.parts,
            per_thread = split.per_thread,
            "msm.task_split"
        );
        split
    }

    /// sums\[b\] = the sum of bucket b's task sums (`+=` with [`BucketWrite::Add`]): first levels of a
    /// tree over each bucket's tasks, each adding `TASK_FOLD` task sums into one, then one
    /// thread a bucket adding what the levels left. `tasks.most`, a bound on any bucket's
    /// tasks, sets the levels so that at most `TASK_FOLD` are left; the sum is right for any count,
    /// a bucket beyond the bound only leaving its thread more to add.
    pub fn task_reduce<J: Pod>(
        &self,
        s: &Stream,
        partial: &mut DeviceBuffer<J>,
        tasks: Tasks<'_>,
        bucket_of: &DeviceBuffer<u32>,
        write: BucketWrite,
        sums: &mut DeviceBuffer<J>,
    ) -> Result<(), CudaError> {
        let (task_offsets, task_counts, total) = (tasks.offsets, tasks.counts, tasks.buckets);
        need("task offsets", task_offsets.len(), total)?;
        need("tasks", task_counts.len(), total)?;
        need("task buckets", bucket_of.len(), partial.len())?;
        need("bucket sums", sums.len(), total)?;
        let t32 = tasks.buckets32()?;
        let add = u32::from(write == BucketWrite::Add);
        let most = tasks.most;
        let (folds, step) = fold_steps(most)?;
        for step in folds {
            // SAFETY: thread g below the device-side task count (at most partial.len(), which
            // the host sized for every task) reads bucket_of[g] and the task tables of its
            // bucket, and reads and writes partial entries of its own bucket's tasks only:
            // g + j·step for j < TASK_FOLD, whose own index is not a multiple of
            // TASK_FOLD·step, so that no thread of this level writes what another reads.
            unsafe {
                self.task_fold.launch(
                    s,
                    grid(partial.len())?,
                    &[&*partial, task_offsets, task_counts, bucket_of, &t32, &step],
                )
            }?;
        }
        // SAFETY: thread b < total reads partial[task_offsets[b] + j·step] within the
        // bucket's tasks, all written by task_sums (and the folds) within partial's length,
        // and writes sums[b].
        unsafe {
            self.task_reduce.launch(
                s,
                grid(total)?,
                &[
                    &*partial,
                    task_offsets,
                    task_counts,
                    &t32,
                    &step,
                    &add,
                    &*sums,
                ],
            )
        }?;
        Ok(())
    }

    /// out[w * segs + j] = sum over segment j of window w of (index + 1) · bucket sum.
    pub fn segments<J: Pod>(
        &self,
        s: &Stream,
        sums: &DeviceBuffer<J>,
        buckets: u32,
        nw: u32,
        seg: u32,
        out: &mut DeviceBuffer<J>,
    ) -> Result<(), CudaError> {
        if seg == 0 || !buckets.is_multiple_of(seg) {
            return Err(CudaError::Window {
                c: buckets,
                nw: seg,
            });
        }
        let groups = (nw * (buckets / seg)) as usize;
        need("bucket sums", sums.len(), (nw * buckets) as usize)?;
        need("segment results", out.len(), groups)?;
        // SAFETY: thread g < nw * segs reads sums[w * buckets + lo .. + seg) and writes out[g].
        unsafe {
            self.segments.launch(
                s,
                grid_of(groups, SMALL_BLOCK)?,
                &[sums, &buckets, &nw, &seg, &*out],
            )
        }?;
        Ok(())
    }

    /// out\[g\] = the sum of input[g·k .. (g + 1)·k) for g < groups.
    pub fn sum_groups<J: Pod>(
        &self,
        s: &Stream,
        input: &DeviceBuffer<J>,
        groups: usize,
        k: u32,
        out: &mut DeviceBuffer<J>,
    ) -> Result<(), CudaError> {
        need("group inputs", input.len(), groups * k as usize)?;
        need("group sums", out.len(), groups)?;
        let g32 = u32::try_from(groups).map_err(|_| CudaError::TooLarge { n: groups })?;
        // SAFETY: thread g < groups reads input[g·k .. (g + 1)·k) (checked) and writes out[g].
        unsafe {
            self.sum_groups
                .launch(s, grid_of(groups, SMALL_BLOCK)?, &[input, &g32, &k, &*out])
        }?;
        Ok(())
    }

    /// out\[t\] = the sum of the first n points whose scalar is one, over a strided share per thread;
    /// `flag` becomes nonzero if a scalar is neither zero nor one.
    pub fn boolean<A: Pod, J: Pod>(
        &self,
        s: &Stream,
        bases: &DeviceBuffer<A>,
        scalars: &DeviceBuffer<Fr>,
        n: usize,
        out: &mut DeviceBuffer<J>,
        flag: &mut DeviceBuffer<u32>,
    ) -> Result<(), CudaError> {
        need("scalars", scalars.len(), n)?;
        need("bases", bases.len(), n)?;
        need("flag", flag.len(), 1)?;
        let threads = out.len();
        if threads == 0 || !threads.is_multiple_of(BLOCK as usize) {
            return Err(CudaError::BufferTooSmall {
                what: "boolean partials",
                len: threads,
                needed: BLOCK as usize,
            });
        }
        let n32 = u32::try_from(n).map_err(|_| CudaError::TooLarge { n })?;
        // SAFETY: exactly out.len() threads, each writing out[t]; reads of bases and scalars
        // stay below n (checked).
        unsafe {
            self.boolean
                .launch(s, grid(threads)?, &[bases, scalars, &n32, &*out, &*flag])
        }?;
        Ok(())
    }
}

impl CurveKernels {
    /// `partial[t] +=` the sum of thread t's equal share of the bases whose variables, in
    /// words `words` of the bitmaps, are both selected and equal to one (`sel` = ones and
    /// density, `sel_prefix` its bits before each word). Bases hold the selected variables
    /// from rank `b_lo` on; the caller keeps every rank in the words below `b_lo` +
    /// `bases.len()` (a split query's chunks).
    pub fn ones<A: Pod, J: Pod>(
        &self,
        s: &Stream,
        bases: &DeviceBuffer<A>,
        maps: SplitMaps<'_>,
        words: std::ops::Range<usize>,
        b_lo: usize,
        partial: &mut DeviceBuffer<J>,
    ) -> Result<(), CudaError> {
        maps.density.check()?;
        let DensityMap {
            words: density,
            prefix,
        } = maps.density;
        let DensityMap {
            words: sel,
            prefix: sel_prefix,
        } = maps.ones;
        need("selection", sel.len(), density.len())?;
        need("selection prefix", sel_prefix.len(), density.len() + 1)?;
        need("density words", density.len(), words.end)?;
        if words.start >= words.end {
            return Ok(());
        }
        let threads = partial.len();
        if threads == 0 {
            return Err(CudaError::BufferTooSmall {
                what: "ones partials",
                len: 0,
                needed: 1,
            });
        }
        let (lo, hi) = (index32(words.start)?, index32(words.end)?);
        let (b32, t32) = (index32(b_lo)?, index32(threads)?);
        // SAFETY: thread t < threads writes partial[t] only; it walks the set bits of sel in
        // words [lo, hi), which sel_prefix numbers (both made on the host from the same
        // bitmaps), so it reads words below hi <= density.len() and prefix entries below
        // density.len() + 1 (checked); the ranks it reads bases at are the caller's to keep
        // in range (see above).
        unsafe {
            self.ones.launch(
                s,
                grid_of(threads, self.task_block)?,
                &[
                    bases, density, prefix, sel, sel_prefix, &lo, &hi, &b32, &*partial, &t32,
                ],
            )
        }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{
        fitting_block, fold_steps, Copies, CudaError, TaskSplit, FILL_PER_SM, G2_AFFINE_BATCHES,
        MAX_COPIES, TASK_FOLD,
    };

    #[test]
    fn filling_splits_fit_their_batch() {
        for batch in G2_AFFINE_BATCHES {
            for slots in [0, 1, 100, 5000, 983_040, 4_000_000] {
                for fill in [1, 135_168, 1 << 20] {
                    let split = TaskSplit::filling(slots, batch, fill);
                    assert!(
                        split.check(batch).is_ok() && split.runs() == batch,
                        "{split:?} for {slots} slots, batch {batch}, fill {fill}"
                    );
                }
            }
        }
    }

    /// G2 at 2^24 points on an H200 (about 2^20 task slots, 132 SMs filled 1024 threads
    /// each): the fewest parts whose runs fill that, 16 of 4 tasks a thread; tasks too few to
    /// fill the device split as finely as the batch allows, one a thread.
    #[test]
    fn filling_splits_take_the_fewest_parts_that_fill_the_device() {
        let fill = 132 * FILL_PER_SM;
        let at_2_pow_24 = TaskSplit::filling(1_044_481, 64, fill);
        assert_eq!(
            at_2_pow_24,
            TaskSplit {
                parts: 16,
                per_thread: 4
            }
        );
        assert!(1_044_481 * 8 < fill * 64 && 1_044_481 * 16 >= fill * 64);
        assert_eq!(
            TaskSplit::filling(1000, 64, fill),
            TaskSplit {
                parts: 64,
                per_thread: 1
            }
        );
    }

    #[test]
    fn the_tree_folds_until_at_most_sixteen_sums_are_left_a_bucket() {
        assert_eq!(fold_steps(1).unwrap(), (vec![], 1));
        assert_eq!(fold_steps(16).unwrap(), (vec![], 1));
        assert_eq!(fold_steps(17).unwrap(), (vec![1], 16));
        assert_eq!(fold_steps(256).unwrap(), (vec![1], 16));
        // 2^18 points in tasks of 512 with the edge cases: two levels, two sums left.
        assert_eq!(fold_steps(489).unwrap(), (vec![1, 16], 256));
        assert_eq!(
            fold_steps(1 << 20).unwrap(),
            (vec![1, 16, 256, 4096], 65536)
        );
        for most in [
            1usize,
            15,
            16,
            17,
            255,
            256,
            257,
            4097,
            1 << 20,
            (1 << 20) + 1,
        ] {
            let (folds, step) = fold_steps(most).unwrap();
            assert!(most.div_ceil(step as usize) <= TASK_FOLD, "most = {most}");
            assert!(
                folds.is_empty() || most.div_ceil(step as usize / TASK_FOLD) > TASK_FOLD,
                "most = {most}: a level too many"
            );
        }
    }

    #[test]
    fn splits_the_kernel_cannot_take_are_refused() {
        let ok = TaskSplit {
            parts: 16,
            per_thread: 3,
        };
        assert_eq!(ok.check(64).unwrap(), ok);
        for (parts, per_thread, batch) in [(3, 1, 64), (64, 2, 64), (2, 0, 64), (1, 1, 1)] {
            let split = TaskSplit { parts, per_thread };
            let err = split.check(batch).unwrap_err();
            assert!(
                matches!(err, CudaError::Split { parts: p, per_thread: t, batch: b }
                    if p == parts && t == per_thread && b == batch),
                "{err}"
            );
        }
    }

    #[test]
    fn digit_values_stay_inside_their_copy_and_31_bits() {
        assert_eq!(Copies::ONE.reach(1000).unwrap(), 1000);
        let four = Copies {
            copies: 4,
            stride: 1000,
        };
        assert_eq!(four.reach(1000).unwrap(), 4000);
        assert_eq!(four.reach(10).unwrap(), 4000);
        assert!(matches!(
            four.reach(1001),
            Err(CudaError::BufferTooSmall {
                len: 1000,
                needed: 1001,
                ..
            })
        ));
        let many = Copies {
            copies: MAX_COPIES + 1,
            stride: 10,
        };
        assert!(
            matches!(many.reach(10), Err(CudaError::Copies { copies }) if copies == MAX_COPIES + 1)
        );
        let wide = Copies {
            copies: 2,
            stride: 1 << 30,
        };
        assert!(matches!(wide.reach(1), Err(CudaError::TooLarge { .. })));
    }

    #[test]
    fn blocks_shrink_to_whole_warps_within_the_kernels_limit() {
        assert_eq!(fitting_block(256, 1024), 256);
        assert_eq!(fitting_block(256, 256), 256);
        assert_eq!(fitting_block(256, 200), 192);
        assert_eq!(fitting_block(128, 96), 96);
        assert_eq!(
            fitting_block(256, 20),
            32,
            "never below a warp: the launch check reports it"
        );
    }
}
