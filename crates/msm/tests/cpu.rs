//! The CPU MSM against a naive sum, on the edge cases that a GPU MSM must also pass; density
//! bitmaps; checked bases; bad input.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zkpipe_msm::{scalars_from_le_bytes, Bases, CpuMsm, Density, Msm, MsmError};

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn naive_g1(points: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    points
        .iter()
        .zip(scalars)
        .fold(G1Projective::identity(), |acc, (p, s)| {
            acc + G1Projective::from(*p) * s
        })
}

fn points_g1(n: usize, r: &mut ChaCha8Rng) -> Vec<G1Affine> {
    let proj: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut *r)).collect();
    let mut out = vec![G1Affine::identity(); n];
    G1Projective::batch_normalize(&proj, &mut out);
    out
}

#[test]
fn g1_matches_naive_sum_on_sizes_and_edge_cases() {
    let msm = CpuMsm::new();
    let mut r = rng(1);
    for n in [0usize, 1, 2, 3, 255, 256, 1000] {
        let mut points = points_g1(n, &mut r);
        let mut scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
        if n >= 3 {
            points[0] = G1Affine::identity(); // identity base
            scalars[1] = Scalar::ZERO; // zero scalar
            scalars[2] = -Scalar::ONE; // p - 1
        }
        let bases = Bases::new(points.clone()).unwrap();
        assert_eq!(
            msm.g1(&bases, &scalars, None).unwrap(),
            naive_g1(&points, &scalars),
            "n = {n}"
        );
    }
}

#[test]
fn repeated_points_and_opposites() {
    let msm = CpuMsm::new();
    let mut r = rng(2);
    let p = points_g1(1, &mut r)[0];
    let same = vec![p; 300];
    let ones = vec![Scalar::ONE; 300];
    let bases = Bases::new(same.clone()).unwrap();
    assert_eq!(
        msm.g1(&bases, &ones, None).unwrap(),
        G1Projective::from(p) * Scalar::from(300u64)
    );
    let random: Vec<Scalar> = (0..300).map(|_| Scalar::random(&mut r)).collect();
    assert_eq!(
        msm.g1(&bases, &random, None).unwrap(),
        naive_g1(&same, &random)
    );
    let neg = (-G1Projective::from(p)).to_affine();
    let pair = Bases::new(vec![p, neg]).unwrap();
    assert!(bool::from(
        msm.g1(&pair, &[Scalar::ONE, Scalar::ONE], None)
            .unwrap()
            .is_identity()
    ));
}

#[test]
fn boolean_scalars_and_density_bitmaps() {
    let msm = CpuMsm::new();
    let mut r = rng(3);
    let n = 2000;
    let flags: Vec<bool> = (0..n).map(|i| i % 3 != 0).collect();
    let density = Density::from_bools(flags.clone());
    let points = points_g1(density.selected(), &mut r);
    let bases = Bases::new(points.clone()).unwrap();
    let bools: Vec<Scalar> = (0..n)
        .map(|i| if i % 5 < 2 { Scalar::ONE } else { Scalar::ZERO })
        .collect();
    let selected = density.select(&bools);
    assert_eq!(
        msm.g1(&bases, &bools, Some(&density)).unwrap(),
        naive_g1(&points, &selected)
    );
    let dense: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
    assert_eq!(
        msm.g1(&bases, &dense, Some(&density)).unwrap(),
        naive_g1(&points, &density.select(&dense))
    );
    let batch = msm
        .g1_batch(&bases, &[&bools, &dense], Some(&density))
        .unwrap();
    assert_eq!(batch[0], naive_g1(&points, &selected));
}

#[test]
fn g2_matches_naive_sum() {
    let msm = CpuMsm::new();
    let mut r = rng(4);
    for n in [0usize, 1, 3, 256] {
        let proj: Vec<G2Projective> = (0..n).map(|_| G2Projective::random(&mut r)).collect();
        let points: Vec<G2Affine> = proj.iter().map(|p| p.to_affine()).collect();
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
        let want = proj
            .iter()
            .zip(&scalars)
            .fold(G2Projective::identity(), |acc, (p, s)| acc + p * s);
        assert_eq!(
            msm.g2(&Bases::new(points).unwrap(), &scalars, None)
                .unwrap(),
            want,
            "n = {n}"
        );
    }
}

#[test]
fn bad_input_is_an_error_naming_the_numbers() {
    let msm = CpuMsm::new();
    let mut r = rng(5);
    let bases = Bases::new(points_g1(4, &mut r)).unwrap();
    let err = msm.g1(&bases, &[Scalar::ONE; 3], None).unwrap_err();
    assert!(
        matches!(
            err,
            MsmError::LengthMismatch {
                bases: 4,
                scalars: 3
            }
        ),
        "{err}"
    );
    let d = Density::from_bools(vec![true, false, true]);
    let err = msm.g1(&bases, &[Scalar::ONE; 5], Some(&d)).unwrap_err();
    assert!(
        matches!(
            err,
            MsmError::DensityLength {
                bitmap: 3,
                scalars: 5
            }
        ),
        "{err}"
    );
    let err = msm.g1(&bases, &[Scalar::ONE; 3], Some(&d)).unwrap_err();
    assert!(
        matches!(
            err,
            MsmError::DensityCount {
                selected: 2,
                bases: 4
            }
        ),
        "{err}"
    );

    // r - 1 is canonical; r is not.
    let r_minus_1 = (-Scalar::ONE).to_bytes_le();
    let mut r_bytes = r_minus_1;
    r_bytes[0] += 1;
    assert_eq!(
        scalars_from_le_bytes(&[r_minus_1]).unwrap(),
        vec![-Scalar::ONE]
    );
    let err = scalars_from_le_bytes(&[r_minus_1, r_bytes]).unwrap_err();
    assert!(matches!(err, MsmError::NonCanonical { index: 1 }), "{err}");

    // A point off the curve is refused where bases enter; the unchecked twin takes it.
    let good = points_g1(3, &mut r);
    let off = G1Affine::from_raw_unchecked(good[1].x(), good[1].y() + blstrs::Fp::ONE, false);
    let mut pts = good.clone();
    pts[2] = off;
    let err = Bases::new(pts.clone()).unwrap_err();
    assert!(matches!(err, MsmError::NotOnCurve { index: 2 }), "{err}");
    assert_eq!(Bases::new_unchecked(pts).len(), 3);
}

#[test]
fn window_widths_keep_the_top_window_balanced() {
    // The digits split min(s, r − s), below 2^254.
    for n in [
        0usize,
        1,
        1000,
        1024,
        1 << 14,
        1 << 20,
        1 << 23,
        1 << 24,
        1 << 26,
    ] {
        let c = zkpipe_msm::window_bits(n);
        let nw = zkpipe_msm::windows(c);
        let top_bits = 254 - (nw - 1) * c;
        assert!(
            top_bits >= c / 2 || c == 4,
            "n = {n}: c = {c} leaves {top_bits} bits in the top window"
        );
        assert!(top_bits < c, "the top window must not carry out");
    }
}

/// The bit length of a little-endian integer.
fn bit_length(le: &[u8]) -> u32 {
    le.iter()
        .rposition(|&b| b != 0)
        .map_or(0, |i| 8 * i as u32 + 8 - le[i].leading_zeros())
}

#[test]
fn windows_cover_the_folded_scalars() {
    // r/2 < 2^254: each width's windows hold 254 bits with the top one below 2^(c−1).
    let half = -Scalar::ONE * Scalar::from(2u64).invert().unwrap(); // (r − 1)/2
    let bits = bit_length(half.to_repr().as_ref());
    assert_eq!(bits, 254, "(r − 1)/2 has 254 bits");
    for c in zkpipe_msm::WINDOW_BITS {
        let nw = zkpipe_msm::windows(c);
        assert!(nw * c >= zkpipe_msm::DIGIT_BITS, "c = {c}");
        let top_bits = bits.saturating_sub((nw - 1) * c);
        assert!(top_bits < c, "c = {c}: the top window could carry out");
    }
    assert_eq!((zkpipe_msm::windows(16), zkpipe_msm::windows(17)), (16, 15));
}
