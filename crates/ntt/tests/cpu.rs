//! The CPU NTT against a naive O(n^2) DFT and against ec-gpu-gen's CPU FFT; properties; the H
//! step end to end; bad input.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zkpipe_ntt::{
    bit_reverse, Coset, CpuNtt, Direction, Domain, Ntt, NttConfig, NttError, Ordering,
};

fn random(n: usize, seed: u64) -> Vec<Scalar> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| Scalar::random(&mut rng)).collect()
}

fn naive_dft(x: &[Scalar], omega: Scalar) -> Vec<Scalar> {
    (0..x.len())
        .map(|k| {
            x.iter().enumerate().fold(Scalar::ZERO, |acc, (j, v)| {
                acc + *v * omega.pow_vartime([(j * k) as u64])
            })
        })
        .collect()
}

#[test]
fn matches_naive_dft_forward_inverse_and_coset() {
    let ntt = CpuNtt::new();
    for log_n in 1..=6 {
        let n = 1 << log_n;
        let d = Domain::new(log_n).unwrap();
        let x = random(n, log_n as u64);
        let mut y = x.clone();
        ntt.transform(&mut y, Direction::Forward, &NttConfig::default())
            .unwrap();
        assert_eq!(y, naive_dft(&x, d.omega), "forward 2^{log_n}");

        let mut z = x.clone();
        ntt.transform(&mut z, Direction::Inverse, &NttConfig::default())
            .unwrap();
        let expect: Vec<Scalar> = naive_dft(&x, d.omega_inv)
            .into_iter()
            .map(|v| v * d.n_inv)
            .collect();
        assert_eq!(z, expect, "inverse 2^{log_n}");

        let s = Scalar::from(5u64);
        let mut c = x.clone();
        ntt.transform(
            &mut c,
            Direction::Forward,
            &NttConfig {
                coset: Coset::Shift(s),
                ..Default::default()
            },
        )
        .unwrap();
        let scaled: Vec<Scalar> = x
            .iter()
            .enumerate()
            .map(|(i, v)| *v * s.pow_vartime([i as u64]))
            .collect();
        assert_eq!(c, naive_dft(&scaled, d.omega), "coset 2^{log_n}");
    }
}

#[test]
fn orderings_are_bit_reversals_of_natural() {
    let ntt = CpuNtt::new();
    let n = 64;
    let x = random(n, 9);
    let mut nn = x.clone();
    ntt.transform(&mut nn, Direction::Forward, &NttConfig::default())
        .unwrap();
    let rev = |v: &[Scalar]| (0..n).map(|i| v[bit_reverse(i, 6)]).collect::<Vec<_>>();
    let run = |input: Vec<Scalar>, ordering| {
        let mut v = input;
        ntt.transform(
            &mut v,
            Direction::Forward,
            &NttConfig {
                ordering,
                ..Default::default()
            },
        )
        .unwrap();
        v
    };
    assert_eq!(run(x.clone(), Ordering::NR), rev(&nn));
    assert_eq!(run(rev(&x), Ordering::RN), nn);
    assert_eq!(run(rev(&x), Ordering::RR), rev(&nn));
}

#[test]
fn matches_ec_gpu_gen_cpu_fft() {
    let ntt = CpuNtt::new();
    for log_n in [10u32, 14] {
        let d = Domain::new(log_n).unwrap();
        let x = random(1 << log_n, 100 + log_n as u64);
        let mut ours = x.clone();
        ntt.transform(&mut ours, Direction::Forward, &NttConfig::default())
            .unwrap();
        let mut theirs = x;
        ec_gpu_gen::fft_cpu::serial_fft(&mut theirs, &d.omega, log_n);
        assert_eq!(ours, theirs, "2^{log_n}");
    }
}

#[test]
fn special_inputs() {
    let ntt = CpuNtt::new();
    let n = 256;
    let mut zeros = vec![Scalar::ZERO; n];
    ntt.transform(&mut zeros, Direction::Forward, &NttConfig::default())
        .unwrap();
    assert!(zeros.iter().all(|v| bool::from(v.is_zero())));
    // All ones transform to a spike of n at 0; a spike at 0 transforms to all ones.
    let mut ones = vec![Scalar::ONE; n];
    ntt.transform(&mut ones, Direction::Forward, &NttConfig::default())
        .unwrap();
    assert_eq!(ones[0], Scalar::from(n as u64));
    assert!(ones[1..].iter().all(|v| bool::from(v.is_zero())));
    let mut spike = vec![Scalar::ZERO; n];
    spike[0] = Scalar::ONE;
    ntt.transform(&mut spike, Direction::Forward, &NttConfig::default())
        .unwrap();
    assert!(spike.iter().all(|v| *v == Scalar::ONE));
}

#[test]
fn bad_input_is_an_error_naming_the_numbers() {
    let ntt = CpuNtt::new();
    let mut v = vec![Scalar::ONE; 12];
    let err = ntt
        .transform(&mut v, Direction::Forward, &NttConfig::default())
        .unwrap_err();
    assert!(matches!(err, NttError::NotPowerOfTwo { len: 12 }), "{err}");
    let mut one = vec![Scalar::ONE; 1];
    assert!(matches!(
        ntt.transform(&mut one, Direction::Forward, &NttConfig::default()),
        Err(NttError::NotPowerOfTwo { len: 1 })
    ));
    let err = Domain::new(29).unwrap_err();
    assert!(
        matches!(err, NttError::DomainSize { log_n: 29, max: 28 }),
        "{err}"
    );
    assert!(err.to_string().contains("2^28"));
    let (mut a, mut b) = (vec![Scalar::ONE; 8], vec![Scalar::ONE; 16]);
    let err = ntt
        .transform_batch(
            &mut [&mut a, &mut b],
            Direction::Forward,
            &NttConfig::default(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            NttError::BatchLengths {
                first: 8,
                other: 16
            }
        ),
        "{err}"
    );
    let err = ntt
        .h_polynomial(
            vec![Scalar::ONE; 8],
            vec![Scalar::ONE; 8],
            vec![Scalar::ONE; 4],
        )
        .unwrap_err();
    assert!(
        matches!(err, NttError::BatchLengths { first: 8, other: 4 }),
        "{err}"
    );
}

/// Evaluates the polynomial with coefficients `c` at `x`.
fn eval(c: &[Scalar], x: Scalar) -> Scalar {
    c.iter().rev().fold(Scalar::ZERO, |acc, v| acc * x + v)
}

/// bellperson's H step, seven transforms: a, b, c each interpolated and evaluated on the
/// coset g·H, (a·b - c)/Z pointwise there, interpolated back from the coset.
fn h_seven_transforms(ntt: &CpuNtt, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Vec<Scalar> {
    let n = a.len();
    let to_coset = |v: &[Scalar]| {
        let mut v = v.to_vec();
        ntt.transform(&mut v, Direction::Inverse, &NttConfig::default())
            .unwrap();
        ntt.transform(&mut v, Direction::Forward, &NttConfig::coset())
            .unwrap();
        v
    };
    let (a, b, c) = (to_coset(a), to_coset(b), to_coset(c));
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let z_inv = (g.pow_vartime([n as u64]) - Scalar::ONE).invert().unwrap();
    let mut q: Vec<Scalar> = (0..n).map(|i| (a[i] * b[i] - c[i]) * z_inv).collect();
    ntt.transform(&mut q, Direction::Inverse, &NttConfig::coset())
        .unwrap();
    q.truncate(n - 1);
    q
}

#[test]
fn h_step_equals_the_seven_transform_way() {
    // Any a, b, c: the six-transform H step and bellperson's seven give the same values,
    // whether or not a·b - c vanishes on the domain.
    let ntt = CpuNtt::new();
    for log_n in [1u32, 2, 5, 9, 13] {
        let n = 1 << log_n;
        let a = random(n, 3000 + log_n as u64);
        let b = random(n, 4000 + log_n as u64);
        let c = random(n, 5000 + log_n as u64);
        let want = h_seven_transforms(&ntt, &a, &b, &c);
        let got = ntt.h_polynomial(a, b, c).unwrap();
        assert_eq!(got, want, "random c, 2^{log_n}");
    }
}

#[test]
fn h_times_vanishing_equals_ab_minus_c() {
    let ntt = CpuNtt::new();
    for log_n in [1u32, 3, 8, 12] {
        let n = 1 << log_n;
        let a = random(n, 1000 + log_n as u64);
        let b = random(n, 2000 + log_n as u64);
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
        let h = ntt.h_polynomial(a.clone(), b.clone(), c.clone()).unwrap();
        assert_eq!(h.len(), n - 1);
        let coeffs = |mut v: Vec<Scalar>| {
            ntt.transform(&mut v, Direction::Inverse, &NttConfig::default())
                .unwrap();
            v
        };
        let (pa, pb, pc) = (coeffs(a), coeffs(b), coeffs(c));
        let x = Scalar::from_str_vartime("123456789123456789").unwrap();
        let z = x.pow_vartime([n as u64]) - Scalar::ONE;
        assert_eq!(
            eval(&h, x) * z,
            eval(&pa, x) * eval(&pb, x) - eval(&pc, x),
            "2^{log_n}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn inverse_after_forward_is_identity(log_n in 1u32..10, seed in any::<u64>(), coset in any::<bool>()) {
        let ntt = CpuNtt::new();
        let x = random(1 << log_n, seed);
        let cfg = if coset { NttConfig::coset() } else { NttConfig::default() };
        let mut v = x.clone();
        ntt.transform(&mut v, Direction::Forward, &cfg).unwrap();
        ntt.transform(&mut v, Direction::Inverse, &cfg).unwrap();
        prop_assert_eq!(v, x);
    }

    #[test]
    fn transform_is_linear(log_n in 1u32..9, seed in any::<u64>()) {
        let ntt = CpuNtt::new();
        let n = 1 << log_n;
        let (x, y) = (random(n, seed), random(n, seed ^ 0xabcdef));
        let k = random(1, seed ^ 7)[0];
        let mut sum: Vec<Scalar> = x.iter().zip(&y).map(|(a, b)| *a * k + b).collect();
        let (mut fx, mut fy) = (x, y);
        for v in [&mut sum, &mut fx, &mut fy] {
            ntt.transform(v, Direction::Forward, &NttConfig::default()).unwrap();
        }
        let expect: Vec<Scalar> = fx.iter().zip(&fy).map(|(a, b)| *a * k + b).collect();
        prop_assert_eq!(sum, expect);
    }

    #[test]
    fn coset_transform_is_scaling_then_transform(log_n in 1u32..9, seed in any::<u64>()) {
        let ntt = CpuNtt::new();
        let x = random(1 << log_n, seed);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let mut coset = x.clone();
        ntt.transform(&mut coset, Direction::Forward, &NttConfig::coset()).unwrap();
        let mut scaled: Vec<Scalar> = x.iter().enumerate().map(|(i, v)| *v * g.pow_vartime([i as u64])).collect();
        ntt.transform(&mut scaled, Direction::Forward, &NttConfig::default()).unwrap();
        prop_assert_eq!(coset, scaled);
    }
}

#[test]
fn cached_table_bytes_follow_the_full_table_limit() {
    use zkpipe_ntt::kernels::full_table_limit;
    use zkpipe_ntt::CudaNtt;
    let fr = 32;
    let gib = 1usize << 30;
    let two_level = |log_n: u32| ((1usize << log_n.div_ceil(2)) + (1 << (log_n / 2))) * fr;
    // Full tables of both directions take at most a sixteenth of the device, up to 2^27.
    assert_eq!(full_table_limit(141 * gib), 27);
    assert_eq!(full_table_limit(80 * gib), 27);
    assert_eq!(full_table_limit(24 * gib), 25);
    assert_eq!(full_table_limit(8 * gib), 24);
    assert_eq!(full_table_limit(0), 0);
    // Up to the limit, full root tables (n/2 entries a direction) beside the two-level ones.
    for log_n in [24, 27] {
        assert_eq!(
            CudaNtt::table_bytes_with(log_n, 27),
            2 * (two_level(log_n) + (1 << (log_n - 1)) * fr) + 3 * two_level(log_n)
        );
    }
    // Above it only the two-level tables: a few MiB, not GiB.
    assert_eq!(CudaNtt::table_bytes_with(27, 25), 5 * two_level(27));
    assert_eq!(CudaNtt::table_bytes_with(28, 27), 5 * two_level(28));
    assert!(CudaNtt::table_bytes_with(28, 27) < CudaNtt::table_bytes_with(24, 27));
}
