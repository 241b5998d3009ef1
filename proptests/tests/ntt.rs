//! Properties of the NTT stage on generated inputs: on the CPU always, and on the GPU against
//! the CPU when a device is present. Inverse after forward is the identity, the transform is
//! linear, the coset transform equals scaling then transforming, and the GPU gives the CPU's
//! result for every ordering and coset, including all-zero, all-one and single-spike inputs.

use blstrs::Scalar;
use ff::Field;
use proptest::prelude::*;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_ntt::{Coset, CpuNtt, CudaNtt, Direction, Ntt, NttConfig, Ordering};
use zkpipe_proptests::scalar;

/// A vector of 2^k scalars, k in 1..=10: random, all zero, all one, or one spike.
fn vector() -> impl Strategy<Value = Vec<Scalar>> {
    (1u32..=10).prop_flat_map(|k| {
        let n = 1usize << k;
        prop_oneof![
            4 => proptest::collection::vec(scalar(), n),
            1 => Just(vec![Scalar::ZERO; n]),
            1 => Just(vec![Scalar::ONE; n]),
            1 => (0..n, scalar()).prop_map(move |(i, v)| {
                let mut x = vec![Scalar::ZERO; n];
                x[i] = v;
                x
            }),
        ]
    })
}

fn config() -> impl Strategy<Value = NttConfig> {
    let ordering = prop_oneof![
        Just(Ordering::NN),
        Just(Ordering::NR),
        Just(Ordering::RN),
        Just(Ordering::RR)
    ];
    let coset = prop_oneof![
        Just(Coset::None),
        Just(Coset::Generator),
        scalar()
            .prop_filter("a shift must be invertible", |s| !bool::from(s.is_zero()))
            .prop_map(Coset::Shift),
    ];
    (ordering, coset).prop_map(|(ordering, coset)| NttConfig { ordering, coset })
}

fn forward(ntt: &dyn Ntt, mut x: Vec<Scalar>, cfg: &NttConfig) -> Vec<Scalar> {
    ntt.transform(&mut x, Direction::Forward, cfg).unwrap();
    x
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn cpu_inverse_after_forward_is_identity(x in vector(), cfg in config()) {
        let cpu = CpuNtt::new();
        let mut y = forward(&cpu, x.clone(), &cfg);
        // The inverse takes the forward's output order as its input order.
        let back = NttConfig {
            ordering: match cfg.ordering {
                Ordering::NN => Ordering::NN,
                Ordering::NR => Ordering::RN,
                Ordering::RN => Ordering::NR,
                Ordering::RR => Ordering::RR,
            },
            coset: cfg.coset,
        };
        cpu.transform(&mut y, Direction::Inverse, &back).unwrap();
        // NR then RN, or RN then NR, hands back the input in its own order.
        prop_assert_eq!(y, x);
    }

    #[test]
    fn cpu_transform_is_linear(x in vector(), a in scalar(), seed in any::<u64>()) {
        let cpu = CpuNtt::new();
        let y: Vec<Scalar> = zkpipe_msm::testgen::scalars(x.len(), seed);
        let cfg = NttConfig::default();
        let lhs: Vec<Scalar> = x.iter().zip(&y).map(|(u, v)| a * u + v).collect();
        let fx = forward(&cpu, x, &cfg);
        let fy = forward(&cpu, y, &cfg);
        let rhs: Vec<Scalar> = fx.iter().zip(&fy).map(|(u, v)| a * u + v).collect();
        prop_assert_eq!(forward(&cpu, lhs, &cfg), rhs);
    }

    #[test]
    fn cpu_coset_is_scale_then_transform(x in vector(), s in scalar()) {
        prop_assume!(!bool::from(s.is_zero()));
        let cpu = CpuNtt::new();
        let mut scaled = x.clone();
        let mut p = Scalar::ONE;
        for v in scaled.iter_mut() {
            *v *= p;
            p *= s;
        }
        let coset = NttConfig { ordering: Ordering::NN, coset: Coset::Shift(s) };
        prop_assert_eq!(
            forward(&cpu, x, &coset),
            forward(&cpu, scaled, &NttConfig::default())
        );
    }
}

#[test]
fn gpu_equals_cpu_on_generated_vectors() {
    let Some(ctx) = gpu_context() else { return };
    let gpu = CudaNtt::new(&ctx).unwrap();
    let cpu = CpuNtt::new();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(96));
    let dir = prop_oneof![Just(Direction::Forward), Just(Direction::Inverse)];
    runner
        .run(&(vector(), config(), dir), |(x, cfg, dir)| {
            let (mut g, mut c) = (x.clone(), x);
            gpu.transform(&mut g, dir, &cfg).unwrap();
            cpu.transform(&mut c, dir, &cfg).unwrap();
            prop_assert_eq!(g, c, "{:?} {:?}", dir, cfg);
            Ok(())
        })
        .unwrap();
}
