//! Field and point arithmetic of ec-gpu-gen's kernels, and zkpipe's own branch-free field
//! operations, checked against blstrs on the GPU, on 2^20 random inputs each plus edge cases
//! (zero, one, p - 1, a zero low limb in Montgomery form, equal and opposite points, the
//! identity).

use blstrs::{Fp, Fp2, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{DeviceBuffer, KernelImage, Stream};
use zkpipe_field::kernels::{FieldTestKernels, KernelError};
use zkpipe_field::{cast, layout};

const FIELD: KernelImage = zkpipe_field::kernels::IMAGE;

const N: usize = 1 << 20;

fn rng() -> ChaCha8Rng {
    let seed = rand::thread_rng().next_u64();
    println!("seed {seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

/// Random field elements, with the edge cases first.
fn elements<F: Field>(n: usize, rng: &mut ChaCha8Rng) -> Vec<F> {
    let mut v = vec![F::ZERO, F::ONE, -F::ONE, F::ZERO, -F::ONE, F::ONE];
    v.extend((v.len()..n).map(|_| F::random(&mut *rng)));
    v.truncate(n);
    v
}

/// The element whose Montgomery form has limbs 0, 1, 0, ... (2^32): a zero low limb.
fn low_zero_limb<G: bytemuck::Pod>() -> G {
    let mut x: G = bytemuck::Zeroable::zeroed();
    bytemuck::bytes_of_mut(&mut x)[4] = 1;
    x
}

/// A field-test kernel: `(kernels, stream, a, b, out)`.
type Launch<G> = fn(
    &FieldTestKernels,
    &Stream,
    &DeviceBuffer<G>,
    &DeviceBuffer<G>,
    &mut DeviceBuffer<G>,
) -> Result<(), KernelError>;

/// The test kernels on the first device, and a stream.
struct Gpu {
    kernels: FieldTestKernels,
    stream: Stream,
    ctx: std::sync::Arc<zkpipe_cuda::Context>,
}

impl Gpu {
    fn new() -> Option<Self> {
        let ctx = gpu_context()?;
        Some(Self {
            kernels: FieldTestKernels::load(&ctx, &FIELD).unwrap(),
            stream: Stream::new(&ctx).unwrap(),
            ctx,
        })
    }

    /// `launch` over a and b into an output of `out_len` elements, read back as `B`.
    fn run<G: bytemuck::Pod + Into<B>, B>(
        &self,
        launch: Launch<G>,
        a: &[G],
        b: &[G],
        out_len: usize,
    ) -> Result<Vec<B>, KernelError> {
        let da = DeviceBuffer::from_host(&self.ctx, a).unwrap();
        let db = DeviceBuffer::from_host(&self.ctx, b).unwrap();
        let mut out = DeviceBuffer::<G>::alloc(&self.ctx, out_len).unwrap();
        launch(&self.kernels, &self.stream, &da, &db, &mut out)?;
        self.stream.synchronize().unwrap();
        Ok(out.to_vec().unwrap().into_iter().map(Into::into).collect())
    }
}

macro_rules! field_test {
    ($name:ident, $blst:ty, $gpu:ty, $view:path, $kernel:ident) => {
        #[test]
        fn $name() {
            let Some(gpu) = Gpu::new() else { return };
            let mut rng = rng();
            let mut a: Vec<$blst> = elements(N, &mut rng);
            let mut b: Vec<$blst> = elements(N, &mut rng);
            b[..6].copy_from_slice(&[
                <$blst>::ONE,
                <$blst>::ZERO,
                <$blst>::ONE,
                -<$blst>::ONE,
                -<$blst>::ONE,
                <$blst>::ONE,
            ]);
            // An element whose Montgomery form has a zero low limb, where a reduction step's
            // multiplier m is 0: squared, and times a random one.
            let low_zero: $blst = low_zero_limb::<$gpu>().into();
            a[6..8].copy_from_slice(&[low_zero, low_zero]);
            b[6] = low_zero;
            let kernel: Launch<$gpu> = FieldTestKernels::$kernel;
            let got: Vec<$blst> = gpu.run(kernel, $view(&a), $view(&b), 4 * N).unwrap();
            let bad = (0..N)
                .into_par_iter()
                .filter(|&i| {
                    let (x, y) = (a[i], b[i]);
                    got[i] != x + y
                        || got[N + i] != x - y
                        || got[2 * N + i] != x * y
                        || got[3 * N + i] != x.square()
                })
                .count();
            assert_eq!(bad, 0, "{bad} of {N} elements differ from blstrs");
            // Bad lengths are an error, not a launch.
            let err = gpu
                .run::<$gpu, $blst>(kernel, $view(&a), $view(&b), N)
                .unwrap_err();
            assert!(err.to_string().contains(&format!("{}", 4 * N)), "{err}");
        }
    };
}

field_test!(
    fr_arithmetic_matches_blstrs,
    Scalar,
    layout::Fr,
    cast::scalars_as_fr,
    fr_ops
);
field_test!(
    fp_arithmetic_matches_blstrs,
    Fp,
    layout::Fp,
    cast::fps_as_gpu,
    fp_ops
);
field_test!(
    fp2_arithmetic_matches_blstrs,
    Fp2,
    layout::Fp2,
    cast::fp2s_as_gpu,
    fp2_ops
);

field_test!(
    zk_fr_arithmetic_matches_blstrs,
    Scalar,
    layout::Fr,
    cast::scalars_as_fr,
    zk_fr_ops
);
field_test!(
    zk_fp_arithmetic_matches_blstrs,
    Fp,
    layout::Fp,
    cast::fps_as_gpu,
    zk_fp_ops
);
field_test!(
    zk_cios_and_squaring_in_fr_match_blstrs,
    Scalar,
    layout::Fr,
    cast::scalars_as_fr,
    zk_frc_ops
);
field_test!(
    zk_cios_and_squaring_in_fp_match_blstrs,
    Fp,
    layout::Fp,
    cast::fps_as_gpu,
    zk_fpc_ops
);
field_test!(
    zk_fp2_arithmetic_matches_blstrs,
    Fp2,
    layout::Fp2,
    cast::fp2s_as_gpu,
    zk_fp2_ops
);

macro_rules! mul_sub_test {
    ($name:ident, $blst:ty, $gpu:ty, $view:path, $kernel:ident) => {
        #[test]
        fn $name() {
            let Some(gpu) = Gpu::new() else { return };
            let mut rng = rng();
            // The edge cases of `elements` meet random ones at the other end (j = N - 1 - i),
            // so that a·b - c·d comes out both negative and positive before the reduction.
            let a: Vec<$blst> = elements(N, &mut rng);
            let b: Vec<$blst> = elements(N, &mut rng);
            let kernel: Launch<$gpu> = FieldTestKernels::$kernel;
            let got: Vec<$blst> = gpu.run(kernel, $view(&a), $view(&b), 2 * N).unwrap();
            let bad = (0..N)
                .into_par_iter()
                .filter(|&i| {
                    let j = N - 1 - i;
                    got[i] != a[i] * b[i] - a[j] * b[j] || got[N + i] != <$blst>::ZERO
                })
                .count();
            assert_eq!(bad, 0, "{bad} of {N} elements differ from blstrs");
        }
    };
}

mul_sub_test!(
    zk_fp_mul_sub_matches_blstrs,
    Fp,
    layout::Fp,
    cast::fps_as_gpu,
    zk_fp_mul_sub_ops
);
mul_sub_test!(
    zk_fp2_mul_sub_matches_blstrs,
    Fp2,
    layout::Fp2,
    cast::fp2s_as_gpu,
    zk_fp2_mul_sub_ops
);

macro_rules! inverse_test {
    ($name:ident, $blst:ty, $gpu:ty, $view:path, $kernel:ident) => {
        #[test]
        fn $name() {
            let Some(gpu) = Gpu::new() else { return };
            let mut rng = rng();
            // Zero, one and -1 first (`elements`), then a zero low limb in Montgomery form, a
            // small value, and random ones.
            let mut a: Vec<$blst> = elements(N, &mut rng);
            a[6] = low_zero_limb::<$gpu>().into();
            a[7] = <$blst>::from(2u64);
            let kernel: Launch<$gpu> = FieldTestKernels::$kernel;
            let got: Vec<$blst> = gpu.run(kernel, $view(&a), $view(&a), 2 * N).unwrap();
            let bad = (0..N)
                .into_par_iter()
                .filter(|&i| {
                    let want = a[i].invert().unwrap_or(<$blst>::ZERO);
                    got[i] != want || got[N + i] != want
                })
                .count();
            assert_eq!(bad, 0, "{bad} of {N} inverses differ from blstrs");
        }
    };
}

inverse_test!(
    zk_fp_inverses_match_blstrs,
    Fp,
    layout::Fp,
    cast::fps_as_gpu,
    zk_fp_inverse_ops
);
inverse_test!(
    zk_fp2_inverses_match_blstrs,
    Fp2,
    layout::Fp2,
    cast::fp2s_as_gpu,
    zk_fp2_inverse_ops
);

macro_rules! point_test {
    ($name:ident, $proj:ty, $aff_gpu:ty, $proj_gpu:ty, $kernel:ident) => {
        #[test]
        fn $name() {
            let Some(ctx) = gpu_context() else { return };
            let k = FieldTestKernels::load(&ctx, &FIELD).unwrap();
            let stream = Stream::new(&ctx).unwrap();
            let mut rng = rng();
            let bases: Vec<$proj> = (0..1024).map(|_| <$proj>::random(&mut rng)).collect();
            let picks: Vec<(usize, usize, usize)> = (0..N)
                .map(|_| {
                    let r = rng.next_u64() as usize;
                    (r & 1023, (r >> 10) & 1023, (r >> 20) & 1023)
                })
                .collect();
            // p: a sum of two bases, so z is not 1; q: a third base, affine.
            let mut p: Vec<$proj> = picks
                .par_iter()
                .map(|&(i, j, _)| bases[i] + bases[j])
                .collect();
            let mut q_proj: Vec<$proj> = picks.par_iter().map(|&(_, _, l)| bases[l]).collect();
            // Edge cases: p = identity; q = p (addition becomes doubling); q = -p (sum is the
            // identity); p = a point plus its own double.
            p[0] = <$proj>::identity();
            q_proj[1] = p[1];
            q_proj[2] = -p[2];
            p[3] = q_proj[3].double() + q_proj[3];
            let mut q = vec![Default::default(); N];
            <$proj>::batch_normalize(&q_proj, &mut q);
            let p_gpu: Vec<$proj_gpu> = p.iter().map(|&x| x.into()).collect();
            let q_gpu: Vec<$aff_gpu> = q.iter().map(|&x| x.into()).collect();
            let dp = DeviceBuffer::from_host(&ctx, &p_gpu).unwrap();
            let dq = DeviceBuffer::from_host(&ctx, &q_gpu).unwrap();
            let mut out = DeviceBuffer::<$proj_gpu>::alloc(&ctx, 3 * N).unwrap();
            k.$kernel(&stream, &dp, &dq, &mut out).unwrap();
            stream.synchronize().unwrap();
            let got: Vec<$proj> = out.to_vec().unwrap().into_iter().map(Into::into).collect();
            let bad: Vec<usize> = (0..N)
                .into_par_iter()
                .filter(|&i| {
                    let sum = p[i] + q_proj[i];
                    got[i] != p[i].double() || got[N + i] != sum || got[2 * N + i] != sum
                })
                .collect();
            assert!(
                bad.is_empty(),
                "{} of {N} differ from blstrs, first at {:?}",
                bad.len(),
                &bad[..bad.len().min(8)]
            );
            assert!(
                bool::from(got[N + 2].is_identity()),
                "p + (-p) is the identity"
            );
            assert!(bool::from(got[N + 2].to_affine().is_on_curve()));
        }
    };
}

point_test!(
    g1_double_and_add_match_blstrs,
    G1Projective,
    layout::G1Affine,
    layout::G1Projective,
    g1_ops
);
point_test!(
    g2_double_and_add_match_blstrs,
    G2Projective,
    layout::G2Affine,
    layout::G2Projective,
    g2_ops
);
