//! The CUDA MSM: bases resident on the device (uploaded once), a Pippenger with signed-digit
//! windows and bucket sorting by counting, and a batch-addition path for 0/1 scalars.

use std::sync::Arc;

use blstrs::{G1Projective, G2Projective, Scalar};
use bytemuck::Pod;
use group::Group;
use rayon::prelude::*;
use zkpipe_cuda::{Context, DeviceBuffer, StageClock, Stream, Timing};
use zkpipe_field::{cast, layout};

use crate::kernels::{BucketWrite, CurveKernels, MsmKernels};
use crate::pippenger::{combine, BucketRun, Digits, Plan, Workspace};
use crate::{Bases, Density, Msm, MsmError};

/// Errors of the CUDA MSM.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// The input was refused (lengths, density, points).
    #[error(transparent)]
    Msm(#[from] MsmError),
    /// A driver call failed.
    #[error(transparent)]
    Cuda(zkpipe_cuda::Error),
    /// Not enough device memory.
    #[error("MSM needs {needed} bytes of device memory, {free} free")]
    OutOfDeviceMemory { needed: usize, free: usize },
    /// A buffer shorter than the launch needs.
    #[error("MSM: {what} buffer of {len} elements, {needed} needed")]
    BufferTooSmall {
        what: &'static str,
        len: usize,
        needed: usize,
    },
    /// More points than one launch can index.
    #[error("MSM of {n} points is larger than this implementation handles (2^31 - 1)")]
    TooLarge { n: usize },
    /// A copy between host and device failed outside the driver (its bookkeeping).
    #[error("MSM host staging: {0}")]
    Stream(zkpipe_stream::Error),
    /// Page-locked host memory could not be had (the pool's limit or timeout).
    #[error("MSM host staging: {0}")]
    Pinned(zkpipe_pinned::Error),
    /// Points gathered for one query's variables used where they do not belong.
    #[error("MSM: {0}")]
    Gather(&'static str),
    /// A streamed MSM with an unusable chunk size.
    #[error("streamed MSM: a chunk of {chunk} points is not usable (must be at least 1)")]
    Chunk { chunk: usize },
    /// The VRAM budget refused the call's device memory.
    #[error("MSM: {0}")]
    Budget(#[from] zkpipe_stream::BudgetError),
    /// More digits than the sort's 32-bit bucket offsets count.
    #[error("MSM of {n} points in {windows} windows has more digits than the bucket sort counts (2^32 - 1); split it")]
    TooManyDigits { n: usize, windows: u32 },
    /// A pass of the bucket sort that its kernels cannot run (a plan's bug, not the input's).
    #[error("MSM bucket sort: {0}")]
    SortPass(&'static str),
    /// An unusable window configuration.
    #[error("MSM: {nw} windows of {c} bits do not cover the scalars' 255 digit bits")]
    Window { c: u32, nw: u32 },
    /// Precomputed multiples in an unusable number of copies.
    #[error(
        "MSM: {copies} copies of precomputed multiples were asked for; from 1 to {} are supported",
        crate::kernels::MAX_COPIES
    )]
    Copies { copies: u32 },
    /// A window width outside [`crate::WINDOW_BITS`].
    #[error("MSM: a window of {c} bits was asked for; widths from {} to {} bits are supported", crate::WINDOW_BITS.start(), crate::WINDOW_BITS.end())]
    WindowBits { c: u32 },
    /// A split of G2's batch-affine bucket sums that its kernel cannot take.
    #[error("MSM: G2's bucket sums cannot split tasks into {parts} runs and take {per_thread} tasks a thread: parts must be a power of two and parts times tasks at most the kernel's batch, {batch} runs (1: XYZZ additions, no runs)")]
    Split {
        parts: u32,
        per_thread: u32,
        batch: u32,
    },
    /// A tuning setting with a value it cannot take.
    #[error("{name} = {value}: expected {expected}")]
    Setting {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
}

impl From<zkpipe_cuda::Error> for CudaError {
    fn from(e: zkpipe_cuda::Error) -> Self {
        match e {
            zkpipe_cuda::Error::OutOfDeviceMemory { needed, free } => {
                CudaError::OutOfDeviceMemory { needed, free }
            }
            other => CudaError::Cuda(other),
        }
    }
}

impl From<zkpipe_stream::Error> for CudaError {
    fn from(e: zkpipe_stream::Error) -> Self {
        match e {
            zkpipe_stream::Error::Cuda(c) => c.into(),
            zkpipe_stream::Error::Budget(b) => CudaError::Budget(b),
            other => CudaError::Stream(other),
        }
    }
}

impl From<zkpipe_pinned::Error> for CudaError {
    fn from(e: zkpipe_pinned::Error) -> Self {
        match e {
            zkpipe_pinned::Error::Cuda(c) => c.into(),
            other => CudaError::Pinned(other),
        }
    }
}

impl CudaError {
    /// The failed driver call behind the error, if one is.
    pub fn driver_error(&self) -> Option<&zkpipe_cuda::Error> {
        match self {
            CudaError::Cuda(e) => Some(e),
            CudaError::Msm(m) => m.driver_error(),
            CudaError::Stream(e) => e.driver_error(),
            CudaError::Pinned(e) => e.driver_error(),
            _ => None,
        }
    }
}

/// What the caller knows about the scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScalarKind {
    /// Detect 0/1 scalars on the device and use batch addition for them. Default value.
    #[default]
    Auto,
    /// Only 0 and 1 (an error if another value is found).
    Boolean,
    /// Any values: go straight to Pippenger.
    Dense,
}

/// A curve the CUDA MSM runs on.
pub trait GpuCurve {
    /// blstrs's affine type.
    type Affine: crate::Point;
    /// blstrs's projective type.
    type Projective: Group + Send + Sync + From<Self::Jacobian>;
    /// The device's affine layout.
    type GpuAffine: Pod + Send + Sync;
    /// The device's Jacobian layout.
    type Jacobian: Pod + Send + Sync;
    /// The curve's kernels.
    fn kernels(k: &MsmKernels) -> &CurveKernels;
    /// A view of blstrs points in the device layout.
    fn view(points: &[Self::Affine]) -> &[Self::GpuAffine];
}

/// G1.
#[derive(Debug)]
pub struct G1;
/// G2.
#[derive(Debug)]
pub struct G2;

impl GpuCurve for G1 {
    type Affine = blstrs::G1Affine;
    type Projective = G1Projective;
    type GpuAffine = layout::G1Affine;
    type Jacobian = layout::G1Projective;
    fn kernels(k: &MsmKernels) -> &CurveKernels {
        &k.g1
    }
    fn view(points: &[Self::Affine]) -> &[Self::GpuAffine] {
        cast::g1_affine_as_gpu(points)
    }
}

impl GpuCurve for G2 {
    type Affine = blstrs::G2Affine;
    type Projective = G2Projective;
    type GpuAffine = layout::G2Affine;
    type Jacobian = layout::G2Projective;
    fn kernels(k: &MsmKernels) -> &CurveKernels {
        &k.g2
    }
    fn view(points: &[Self::Affine]) -> &[Self::GpuAffine] {
        cast::g2_affine_as_gpu(points)
    }
}

/// Bases uploaded once and kept on the device (a proving key's points), with precomputed
/// multiples or without.
#[derive(Debug)]
pub struct DeviceBases<C: GpuCurve> {
    /// The points, then (with multiples) copy j of them times 2^(c·j) for each j below
    /// `multiples.copies`.
    buf: DeviceBuffer<C::GpuAffine>,
    /// Points (a copy).
    n: usize,
    multiples: Option<Multiples>,
}

/// Precomputed multiples of fixed bases: `copies` copies of the points, copy j holding
/// 2^(window_bits·j)·P, so that a Pippenger on `window_bits`-bit windows sums `copies` windows
/// in one set of buckets. They trade device memory (`copies` times the points') for fewer
/// bucket sets to reduce, which lets wider windows (fewer bucket additions) pay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Multiples {
    window_bits: u32,
    copies: u32,
}

impl Multiples {
    /// Multiples for `window_bits`-bit windows (within [`crate::WINDOW_BITS`]) in `copies`
    /// copies (1 to 16; more than the windows gain nothing).
    pub fn new(window_bits: u32, copies: u32) -> Result<Self, CudaError> {
        if !crate::WINDOW_BITS.contains(&window_bits) {
            return Err(CudaError::WindowBits { c: window_bits });
        }
        if !(1..=crate::kernels::MAX_COPIES).contains(&copies) {
            return Err(CudaError::Copies { copies });
        }
        Ok(Self {
            window_bits,
            copies,
        })
    }

    /// Multiples in `copies` copies (clamped to 1..=16) for MSMs over `n` points, on the
    /// window width that pays best with them (benches/NOTES.md): wider than without, as
    /// fewer bucket sets leave less to reduce.
    pub fn for_points(n: usize, copies: u32) -> Self {
        let copies = copies.clamp(1, crate::kernels::MAX_COPIES);
        let window_bits = match copies {
            1 => crate::window_bits(n),
            _ => crate::pippenger::window_bits_with_multiples(n),
        };
        Self {
            window_bits,
            copies,
        }
    }

    /// The window width the multiples serve.
    pub fn window_bits(&self) -> u32 {
        self.window_bits
    }

    /// Copies of the points, the points themselves included.
    pub fn copies(&self) -> u32 {
        self.copies
    }

    /// Device bytes of `n` points of curve `C` with these multiples.
    pub fn bytes<C: GpuCurve>(&self, n: usize) -> usize {
        n * self.copies as usize * std::mem::size_of::<C::GpuAffine>()
    }
}

impl<C: GpuCurve> DeviceBases<C> {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.n
    }

    /// The precomputed multiples these bases carry, if any.
    pub fn multiples(&self) -> Option<Multiples> {
        self.multiples
    }

    /// Device bytes they take, multiples included.
    pub fn bytes(&self) -> usize {
        self.buf.len() * std::mem::size_of::<C::GpuAffine>()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The MSM on one CUDA device.
#[derive(Debug)]
pub struct CudaMsm {
    ctx: Arc<Context>,
    stream: Stream,
    k: MsmKernels,
    /// Window bits every Pippenger uses; none: [`crate::window_bits`] of its size.
    window: Option<u32>,
    /// The last Pippenger's workspace, when this MSM keeps it ([`CudaMsm::keeping_workspace`]).
    kept: Option<std::sync::Mutex<KeptWorkspace>>,
}

/// A Pippenger workspace kept between calls, of either curve.
#[derive(Default)]
struct KeptWorkspace(Option<Box<dyn std::any::Any + Send>>);

impl std::fmt::Debug for KeptWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = if self.0.is_some() { "held" } else { "none" };
        f.debug_tuple("KeptWorkspace").field(&held).finish()
    }
}

impl CudaMsm {
    /// The MSM on `ctx`'s device (loads the kernels, sized for all of its memory).
    pub fn new(ctx: &Arc<Context>) -> Result<Self, CudaError> {
        Self::for_memory(ctx, ctx.info().total_memory)
    }

    /// The MSM on `ctx`'s device for work that may use `memory` bytes of it (a VRAM cap):
    /// G2's bucket kernel is the largest batch whose local memory fits
    /// ([`MsmKernels::for_memory`]).
    pub fn for_memory(ctx: &Arc<Context>, memory: usize) -> Result<Self, CudaError> {
        Self::tuned(ctx, memory, &crate::kernels::MsmTuning::default())
    }

    /// As [`CudaMsm::for_memory`], with the kernels' settings of `tuning` (for comparisons).
    pub fn tuned(
        ctx: &Arc<Context>,
        memory: usize,
        tuning: &crate::kernels::MsmTuning,
    ) -> Result<Self, CudaError> {
        Ok(Self {
            ctx: Arc::clone(ctx),
            stream: Stream::new(ctx)?,
            k: MsmKernels::tuned(ctx, memory, tuning)?,
            window: None,
            kept: None,
        })
    }

    /// This MSM keeping its Pippenger workspace on the device between calls: a call whose
    /// plan the kept buffers hold (the same curve, and no more points, digits, buckets or
    /// tasks than they were made for, whatever the window width) skips their allocation and
    /// free, which for large MSMs cost milliseconds (benches/NOTES.md). The price is the
    /// device memory they hold until [`CudaMsm::release_workspace`], a call that needs other
    /// buffers, or the drop: about 15 GB for G1 at 2^27 points. A call that fails drops them.
    pub fn keeping_workspace(mut self) -> Self {
        self.kept = Some(std::sync::Mutex::new(KeptWorkspace::default()));
        self
    }

    /// Frees a kept workspace now (nothing when none is kept).
    pub fn release_workspace(&self) {
        if let Some(kept) = &self.kept {
            let mut kept = kept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            kept.0 = None;
        }
    }

    /// The workspace for `plan`: the kept one when it holds the plan, else a new one (the
    /// kept one, if any, freed first to make room).
    fn workspace<C: GpuCurve>(&self, plan: Plan) -> Result<Workspace<C::Jacobian>, CudaError> {
        if let Some(kept) = &self.kept {
            let mut kept = kept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(any) = kept.0.take() {
                if let Ok(ws) = any.downcast::<Workspace<C::Jacobian>>() {
                    let mut ws = *ws;
                    if ws.holds(&plan) {
                        ws.select(plan);
                        return Ok(ws);
                    }
                }
            }
        }
        Workspace::alloc(&self.ctx, plan)
    }

    /// Keeps `ws` for the next call when this MSM keeps its workspace, else frees it.
    fn done_with<C: GpuCurve>(&self, ws: Workspace<C::Jacobian>) {
        if let Some(kept) = &self.kept {
            let mut kept = kept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            kept.0 = Some(Box::new(ws));
        }
    }

    /// This MSM with every Pippenger on `c`-bit windows instead of [`crate::window_bits`]'s
    /// choice (for benchmarks and tuning; any width within [`crate::WINDOW_BITS`] gives the
    /// same sums).
    pub fn with_window_bits(mut self, c: u32) -> Result<Self, CudaError> {
        if !crate::WINDOW_BITS.contains(&c) {
            return Err(CudaError::WindowBits { c });
        }
        self.window = Some(c);
        Ok(self)
    }

    /// This MSM with G2's batch-affine bucket sums split as `split` says instead of
    /// [`crate::kernels::TaskSplit::filling`]'s choice (for benchmarks and tests; any split the
    /// kernel takes gives the same sums).
    pub fn with_g2_split(mut self, split: crate::kernels::TaskSplit) -> Result<Self, CudaError> {
        self.k.set_g2_split(split)?;
        Ok(self)
    }

    /// The Pippenger plan for chunks of `n` points.
    pub(crate) fn plan(&self, n: usize) -> Plan {
        Plan::with_bits(n, self.window.unwrap_or_else(|| crate::window_bits(n)))
    }

    /// Uploads bases (already checked by [`Bases::new`]) to keep them on the device.
    pub fn upload_bases<C: GpuCurve>(
        &self,
        bases: &Bases<C::Affine>,
    ) -> Result<DeviceBases<C>, CudaError> {
        let buf = DeviceBuffer::from_host(&self.ctx, C::view(bases.points()))?;
        Ok(DeviceBases {
            n: buf.len(),
            buf,
            multiples: None,
        })
    }

    /// The same bases with precomputed `multiples` ([`Multiples`]), made on the device from
    /// the points of `bases` (which stay as they are; drop them if only these are needed).
    /// Their MSMs run on the multiples' window width.
    pub fn with_multiples<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        multiples: Multiples,
    ) -> Result<DeviceBases<C>, CudaError> {
        let n = bases.n;
        let len = n
            .checked_mul(multiples.copies as usize)
            .ok_or(CudaError::TooLarge { n })?;
        let mut buf = DeviceBuffer::<C::GpuAffine>::alloc(&self.ctx, len)?;
        let (c, copies) = (multiples.window_bits, multiples.copies);
        let points = (&bases.buf, n);
        C::kernels(&self.k).precompute(&self.stream, points, c, copies, &mut buf)?;
        self.stream.synchronize()?;
        Ok(DeviceBases {
            buf,
            n,
            multiples: Some(multiples),
        })
    }

    /// As [`CudaMsm::upload_bases`], followed by `extra` identity points (all zeros) on the
    /// device: for a query one point shorter than its scalars (a proving key's h). The copy
    /// reads `bases` in place (at pinned speed when they are pinned).
    pub fn upload_bases_padded<C: GpuCurve>(
        &self,
        bases: &Bases<C::Affine>,
        extra: usize,
    ) -> Result<DeviceBases<C>, CudaError> {
        let n = bases.len();
        let len = n.checked_add(extra).ok_or(CudaError::TooLarge { n })?;
        let mut buf = DeviceBuffer::<C::GpuAffine>::alloc(&self.ctx, len)?;
        if extra > 0 {
            buf.zero_async(&self.stream)?;
            self.stream.synchronize()?;
        }
        buf.copy_from_host_at(0, C::view(bases.points()))?;
        Ok(DeviceBases {
            buf,
            n: len,
            multiples: None,
        })
    }

    /// sum scalars\[i\] · bases\[i\] with the bases on the device.
    pub fn msm<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        scalars: &[Scalar],
        kind: ScalarKind,
    ) -> Result<C::Projective, CudaError> {
        // Checked before the upload, so that a mismatch costs no copy; msm_device checks the rest.
        if bases.len() != scalars.len() {
            let e = MsmError::LengthMismatch {
                bases: bases.len(),
                scalars: scalars.len(),
            };
            return Err(e.into());
        }
        let dev_scalars = DeviceBuffer::from_host(&self.ctx, cast::scalars_as_fr(scalars))?;
        match self.msm_device(bases, &dev_scalars, kind) {
            Err(CudaError::Msm(MsmError::NotBoolean { .. })) => {
                let index = scalars
                    .iter()
                    .position(|s| *s != Scalar::from(0u64) && *s != Scalar::from(1u64))
                    .unwrap_or(0);
                Err(MsmError::NotBoolean { index }.into())
            }
            other => other,
        }
    }

    /// As [`CudaMsm::msm`], with the scalars already on the device (Montgomery form, as
    /// blstrs holds them). Scalars must be canonical; [`crate::scalars_from_le_bytes`] checks
    /// encodings from outside.
    pub fn msm_device<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        scalars: &DeviceBuffer<Fr>,
        kind: ScalarKind,
    ) -> Result<C::Projective, CudaError> {
        let n = scalars.len();
        if bases.len() != n {
            return Err(MsmError::LengthMismatch {
                bases: bases.len(),
                scalars: n,
            }
            .into());
        }
        if n == 0 {
            return Ok(C::Projective::identity());
        }
        if n >= 1 << 31 {
            return Err(CudaError::TooLarge { n });
        }
        if kind != ScalarKind::Dense {
            if let Some(sum) = self.boolean::<C>(bases, scalars)? {
                return Ok(sum);
            }
            if kind == ScalarKind::Boolean {
                return Err(MsmError::NotBoolean { index: 0 }.into());
            }
        }
        self.pippenger::<C>(bases, scalars)
    }

    /// The bases' device buffer (for benchmarks that feed other kernels the same points).
    pub fn bases_buffer<C: GpuCurve>(bases: &DeviceBases<C>) -> &DeviceBuffer<C::GpuAffine> {
        &bases.buf
    }

    /// The batch-addition path; `None` when a scalar is neither 0 nor 1.
    fn boolean<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        scalars: &DeviceBuffer<Fr>,
    ) -> Result<Option<C::Projective>, CudaError> {
        let threads = self.ctx.info().sm_count.max(1) as usize * 256;
        let mut partial = DeviceBuffer::<C::Jacobian>::alloc(&self.ctx, threads)?;
        let mut flag = DeviceBuffer::<u32>::from_host(&self.ctx, &[0])?;
        C::kernels(&self.k).boolean(
            &self.stream,
            &bases.buf,
            scalars,
            scalars.len(),
            &mut partial,
            &mut flag,
        )?;
        self.stream.synchronize()?;
        if flag.to_vec()?[0] != 0 {
            return Ok(None);
        }
        let parts = partial.to_vec()?;
        Ok(Some(
            parts
                .into_par_iter()
                .map(C::Projective::from)
                .reduce(C::Projective::identity, |a, b| a + b),
        ))
    }

    fn pippenger<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        scalars: &DeviceBuffer<Fr>,
    ) -> Result<C::Projective, CudaError> {
        let n = scalars.len();
        let plan = match bases.multiples {
            Some(m) => Plan::with_bits(n, m.window_bits).with_copies(m.copies),
            None => self.plan(n),
        };
        let t = std::time::Instant::now();
        let mut ws = self.workspace::<C>(plan)?;
        let mut out = DeviceBuffer::<C::Jacobian>::alloc(&self.ctx, plan.out_len())?;
        let alloc_ms = t.elapsed().as_secs_f64() * 1e3;
        let timing = match tracing::enabled!(tracing::Level::DEBUG) {
            true => Timing::Enabled,
            false => Timing::Disabled,
        };
        let (k, st) = (&self.k, &self.stream);
        let mut clock = StageClock::start(&self.ctx, st, timing)?;
        let run = BucketRun {
            bases: &bases.buf,
            digits: Digits::dense(scalars, n),
            n,
            write: BucketWrite::Overwrite,
            points_ready: None,
        };
        ws.buckets::<C>(k, st, run, &mut clock)?;
        ws.windows::<C>(k, st, &mut out, &mut clock)?;
        self.stream.synchronize()?;
        let t = std::time::Instant::now();
        self.done_with::<C>(ws);
        let free_ms = t.elapsed().as_secs_f64() * 1e3;
        let parts = out.to_vec()?;
        let t = std::time::Instant::now();
        let sum = combine::<C>(&plan, &parts);
        let combine_ms = t.elapsed().as_secs_f64() * 1e3;
        if clock.is_on() {
            let phases: String = clock
                .spans()?
                .iter()
                .map(|p| format!(" {}={:.2}", p.stage.name(), p.ms))
                .collect();
            tracing::debug!(
                n,
                c = plan.c,
                device_ms = phases,
                alloc_ms,
                free_ms,
                read_back = parts.len(),
                combine_ms,
                "msm.pippenger"
            );
        }
        Ok(sum)
    }

    /// The runs a thread of G2's bucket sums steps side by side (1: XYZZ additions).
    pub fn g2_batch(&self) -> u32 {
        self.k.g2_batch()
    }

    pub(crate) fn kernels(&self) -> &MsmKernels {
        &self.k
    }

    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The stream the MSM kernels run on (to record events around them).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
}

use zkpipe_field::Fr;

impl Msm for CudaMsm {
    fn g1(
        &self,
        bases: &Bases<blstrs::G1Affine>,
        scalars: &[Scalar],
        density: Option<&Density>,
    ) -> Result<G1Projective, MsmError> {
        let s = crate::cpu::paired(bases.len(), scalars, density)?;
        let dev = self.upload_bases::<G1>(bases).map_err(MsmError::device)?;
        self.msm::<G1>(&dev, &s, ScalarKind::Auto)
            .map_err(MsmError::device)
    }

    fn g2(
        &self,
        bases: &Bases<blstrs::G2Affine>,
        scalars: &[Scalar],
        density: Option<&Density>,
    ) -> Result<G2Projective, MsmError> {
        let s = crate::cpu::paired(bases.len(), scalars, density)?;
        let dev = self.upload_bases::<G2>(bases).map_err(MsmError::device)?;
        self.msm::<G2>(&dev, &s, ScalarKind::Auto)
            .map_err(MsmError::device)
    }

    fn g1_batch(
        &self,
        bases: &Bases<blstrs::G1Affine>,
        scalar_sets: &[&[Scalar]],
        density: Option<&Density>,
    ) -> Result<Vec<G1Projective>, MsmError> {
        // Check every set before the upload, then upload the bases once for all of them.
        let sets = scalar_sets
            .iter()
            .map(|s| crate::cpu::paired(bases.len(), s, density))
            .collect::<Result<Vec<_>, _>>()?;
        let dev = self.upload_bases::<G1>(bases).map_err(MsmError::device)?;
        sets.iter()
            .map(|s| {
                self.msm::<G1>(&dev, s, ScalarKind::Auto)
                    .map_err(MsmError::device)
            })
            .collect()
    }

    fn name(&self) -> String {
        format!("cuda:{}", self.ctx.ordinal())
    }
}
