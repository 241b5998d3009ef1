//! Properties of the MSM stage on generated cases: the CPU MSM against a naive sum of scalar
//! multiplications, the CPU boolean path against the dense one, and, with a device, the GPU
//! (resident and streamed, dense and boolean, with density bitmaps) against the CPU.

use blstrs::{G1Affine, G1Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use proptest::prelude::*;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_field::cast;
use zkpipe_msm::testgen::g1_points;
use zkpipe_msm::{Bases, CpuMsm, CudaMsm, Density, Msm, ScalarKind, StreamOptions, G1};
use zkpipe_pinned::PinnedBuffer;
use zkpipe_proptests::scalar;
use zkpipe_stream::Pinned;

/// A case: points (some the identity, some repeated or negated) and scalars (random, edge or
/// boolean), from a seed and a shape.
#[derive(Debug, Clone)]
struct Case {
    points: Vec<G1Affine>,
    scalars: Vec<Scalar>,
}

fn case(max: usize) -> impl Strategy<Value = Case> {
    (0..=max, any::<u64>(), any::<bool>()).prop_flat_map(|(n, seed, boolean)| {
        let s = if boolean {
            proptest::collection::vec(prop_oneof![Just(Scalar::ZERO), Just(Scalar::ONE)], n).boxed()
        } else {
            proptest::collection::vec(scalar(), n).boxed()
        };
        let edits = proptest::collection::vec((0..n.max(1), 0u8..3), 0..4);
        (s, edits).prop_map(move |(scalars, edits)| {
            let mut points = g1_points(n, seed);
            for (i, what) in edits {
                if i >= n {
                    continue;
                }
                match what {
                    0 => points[i] = G1Affine::identity(),
                    1 => points[i] = points[0],
                    _ => points[i] = (-G1Projective::from(points[0])).to_affine(),
                }
            }
            Case { points, scalars }
        })
    })
}

fn naive(c: &Case) -> G1Projective {
    c.points
        .iter()
        .zip(&c.scalars)
        .map(|(p, s)| G1Projective::from(p) * s)
        .fold(G1Projective::identity(), |a, b| a + b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn cpu_msm_is_the_naive_sum(c in case(40)) {
        let bases = Bases::new(c.points.clone()).unwrap();
        prop_assert_eq!(CpuMsm::new().g1(&bases, &c.scalars, None).unwrap(), naive(&c));
    }

    #[test]
    fn cpu_density_selects_the_variables(c in case(40), mask in any::<u64>()) {
        // Variables whose bit is set in `mask` are selected; bases hold only those.
        let n = c.scalars.len();
        let bits: Vec<bool> = (0..n).map(|i| mask >> (i % 64) & 1 == 1).collect();
        let density = Density::from_bools(bits.clone());
        let picked: Vec<G1Affine> = (0..n).filter(|&i| bits[i]).map(|i| c.points[i]).collect();
        let sub = Case {
            points: picked.clone(),
            scalars: (0..n).filter(|&i| bits[i]).map(|i| c.scalars[i]).collect(),
        };
        let bases = Bases::new(picked).unwrap();
        prop_assert_eq!(
            CpuMsm::new().g1(&bases, &c.scalars, Some(&density)).unwrap(),
            naive(&sub)
        );
    }
}

#[test]
fn gpu_resident_and_streamed_equal_cpu() {
    let Some(ctx) = gpu_context() else { return };
    let gpu = CudaMsm::new(&ctx).unwrap();
    let cpu = CpuMsm::new();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(48));
    runner
        .run(&(case(3000), 1usize..2000), |(c, chunk)| {
            let bases = Bases::new(c.points.clone()).unwrap();
            let want = cpu.g1(&bases, &c.scalars, None).unwrap();
            let dev = gpu.upload_bases::<G1>(&bases).unwrap();
            for kind in [ScalarKind::Auto, ScalarKind::Dense] {
                let got = gpu.msm::<G1>(&dev, &c.scalars, kind).unwrap();
                prop_assert_eq!(got, want, "resident {:?}", kind);
            }
            if !c.points.is_empty() {
                let hp = PinnedBuffer::from_slice(&ctx, cast::g1_affine_as_gpu(&c.points)).unwrap();
                let hs = PinnedBuffer::from_slice(&ctx, cast::scalars_as_fr(&c.scalars)).unwrap();
                let opts = StreamOptions {
                    chunk,
                    ..StreamOptions::default()
                };
                let got = gpu
                    .msm_streamed::<G1>(Pinned::new(&hp), Pinned::new(&hs), &opts)
                    .unwrap();
                prop_assert_eq!(got, want, "streamed, chunk {}", chunk);
            }
            Ok(())
        })
        .unwrap();
}
