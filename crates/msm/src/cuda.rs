//! The CUDA MSM: bases resident on the device (uploaded once), a Pippenger with signed-digit
//! windows and bucket sorting by counting, and a batch-addition path for 0/1 scalars.

use std::sync::Arc;

use blstrs::{G1Projective, G2Projective, Scalar};
use bytemuck::Pod;
use group::Group;
use rayon::prelude::*;
use zkpipe_cuda::{Context, DeviceBuffer, Event, Stream};
use zkpipe_field::{cast, layout};

use crate::kernels::{CurveKernels, MsmKernels};
use crate::{Bases, Density, Msm, MsmError};

/// Errors of the CUDA MSM.
#[derive(Debug, thiserror::Error)]
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
    /// An unusable window configuration.
    #[error("MSM: window of {c} bits with {nw} windows does not cover 256 bits")]
    Window { c: u32, nw: u32 },
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

/// Bases uploaded once and kept on the device (a proving key's points).
#[derive(Debug)]
pub struct DeviceBases<C: GpuCurve> {
    buf: DeviceBuffer<C::GpuAffine>,
}

impl<C: GpuCurve> DeviceBases<C> {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The window width for n points.
///
/// Only widths whose top window holds many real bits of a 255-bit scalar: with c = 13 the top
/// window held 8 bits, with c = 15 none but the carry, and the few buckets of that window then
/// got n/256 to n/2 points each, summed by one thread (24 s instead of 0.2 s at 2^22, measured
/// on the H200). 4, 8 and 16 leave 3, 7 and 15 real bits there, and never carry out of it.
pub fn window_bits(n: usize) -> u32 {
    match n {
        0..1024 => 4,
        1024..16384 => 8,
        _ => 16,
    }
}

/// The MSM on one CUDA device.
#[derive(Debug)]
pub struct CudaMsm {
    ctx: Arc<Context>,
    stream: Stream,
    k: MsmKernels,
}

impl CudaMsm {
    /// The MSM on `ctx`'s device (loads the kernels).
    pub fn new(ctx: &Arc<Context>) -> Result<Self, CudaError> {
        Ok(Self {
            ctx: Arc::clone(ctx),
            stream: Stream::new(ctx)?,
            k: MsmKernels::load(ctx)?,
        })
    }

    /// Uploads bases (already checked by [`Bases::new`]) to keep them on the device.
    pub fn upload_bases<C: GpuCurve>(
        &self,
        bases: &Bases<C::Affine>,
    ) -> Result<DeviceBases<C>, CudaError> {
        Ok(DeviceBases {
            buf: DeviceBuffer::from_host(&self.ctx, C::view(bases.points()))?,
        })
    }

    /// sum scalars[i] · bases[i] with the bases on the device.
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
        C::kernels(&self.k).boolean(&self.stream, &bases.buf, scalars, &mut partial, &mut flag)?;
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
        let c = window_bits(n);
        let nw = 256u32.div_ceil(c);
        let buckets = 1u32 << (c - 1);
        let total = (nw * buckets) as usize;
        let m = n * nw as usize;
        let s = &self.stream;
        let mut keys = DeviceBuffer::<u32>::alloc(&self.ctx, m)?;
        let mut vals = DeviceBuffer::<u32>::alloc(&self.ctx, m)?;
        let mut sorted = DeviceBuffer::<u32>::alloc(&self.ctx, m)?;
        let mut counts = DeviceBuffer::<u32>::alloc(&self.ctx, total)?;
        let mut offsets = DeviceBuffer::<u32>::alloc(&self.ctx, total)?;
        let mut cursor = DeviceBuffer::<u32>::alloc(&self.ctx, total)?;
        let marks: Vec<Event> = (0..5)
            .map(|_| Event::timed(&self.ctx))
            .collect::<Result<_, _>>()?;
        marks[0].record(s)?;
        counts.zero_async(s)?;
        self.k.digits(s, scalars, c, nw, &mut keys, &mut vals)?;
        marks[1].record(s)?;
        self.k.histogram(s, &keys, m, &mut counts, total)?;
        self.k.scan(s, &counts, &mut offsets, total)?;
        cursor.copy_from_device_async_at(0, &offsets, s)?;
        self.k
            .scatter(s, &keys, &vals, m, &mut cursor, &mut sorted)?;
        let mut sums = DeviceBuffer::<C::Jacobian>::alloc(&self.ctx, total)?;
        let ck = C::kernels(&self.k);
        marks[2].record(s)?;
        ck.bucket_sums(
            s, &bases.buf, n, &sorted, &offsets, &counts, total, &mut sums,
        )?;
        marks[3].record(s)?;
        let seg = buckets.min(64);
        let segs = buckets / seg;
        let mut out = DeviceBuffer::<C::Jacobian>::alloc(&self.ctx, (nw * segs) as usize)?;
        ck.segments(s, &sums, buckets, nw, seg, &mut out)?;
        marks[4].record(s)?;
        s.synchronize()?;
        let ms = |a: usize, b: usize| marks[a].elapsed_ms(&marks[b]).unwrap_or(f32::NAN);
        tracing::debug!(
            n,
            c,
            nw,
            digits_ms = ms(0, 1),
            sort_ms = ms(1, 2),
            buckets_ms = ms(2, 3),
            windows_ms = ms(3, 4),
            "msm.pippenger"
        );
        drop((keys, vals, sorted, sums));
        let parts: Vec<C::Projective> = out
            .to_vec()?
            .into_par_iter()
            .map(C::Projective::from)
            .collect();
        let windows: Vec<C::Projective> = parts
            .par_chunks(segs as usize)
            .map(|w| w.iter().fold(C::Projective::identity(), |a, b| a + b))
            .collect();
        let mut acc = C::Projective::identity();
        for w in windows.iter().rev() {
            for _ in 0..c {
                acc = acc.double();
            }
            acc += w;
        }
        Ok(acc)
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

    fn name(&self) -> String {
        format!("cuda:{}", self.ctx.ordinal())
    }
}
