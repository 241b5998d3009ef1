//! The GPU layouts hold blstrs's bytes: conversions round-trip and views do not copy.

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zkpipe_field::{cast, layout, Exponent};

#[test]
fn sizes_match_blstrs() {
    use std::mem::size_of;
    assert_eq!(size_of::<layout::Fr>(), size_of::<Scalar>());
    assert_eq!(size_of::<layout::Fr>(), 32);
    assert_eq!(size_of::<layout::Fp>(), 48);
    assert_eq!(size_of::<layout::Fp2>(), 96);
    assert_eq!(size_of::<layout::G1Affine>(), size_of::<G1Affine>());
    assert_eq!(size_of::<layout::G1Affine>(), 96);
    assert_eq!(size_of::<layout::G2Affine>(), 192);
    assert_eq!(size_of::<layout::G1Projective>(), 144);
    assert_eq!(size_of::<layout::G2Projective>(), 288);
}

#[test]
fn conversions_round_trip() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for _ in 0..100 {
        let s = Scalar::random(&mut rng);
        assert_eq!(Scalar::from(layout::Fr::from(s)), s);
        let f = Fp::random(&mut rng);
        assert_eq!(Fp::from(layout::Fp::from(f)), f);
        let f2 = Fp2::random(&mut rng);
        assert_eq!(Fp2::from(layout::Fp2::from(f2)), f2);
        let p = G1Projective::random(&mut rng);
        assert_eq!(G1Projective::from(layout::G1Projective::from(p)), p);
        let a = p.to_affine();
        assert_eq!(G1Affine::from(layout::G1Affine::from(a)), a);
        let q = G2Projective::random(&mut rng);
        assert_eq!(G2Projective::from(layout::G2Projective::from(q)), q);
        let b = q.to_affine();
        assert_eq!(G2Affine::from(layout::G2Affine::from(b)), b);
    }
}

#[test]
fn montgomery_one_and_identity_bytes() {
    // Fr's one in Montgomery form is R mod r, not 1.
    let one = layout::Fr::from(Scalar::ONE);
    assert_ne!(one.0, [1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(layout::Fr::from(Scalar::ZERO).0, [0; 8]);
    // The affine identity is all zeros, as the kernels expect.
    assert_eq!(
        layout::G1Affine::from(G1Affine::identity()),
        layout::G1Affine::default()
    );
    assert_eq!(
        layout::G2Affine::from(G2Affine::identity()),
        layout::G2Affine::default()
    );
}

#[test]
fn exponents_are_canonical_little_endian() {
    assert_eq!(Exponent::from(Scalar::ONE).0, [1, 0, 0, 0, 0, 0, 0, 0]);
    let minus_one = -Scalar::ONE;
    let e = Exponent::from(minus_one);
    let repr = minus_one.to_repr();
    assert_eq!(bytemuck::cast::<_, [u8; 32]>(e.0), repr.as_ref()[..32]);
    assert_eq!(e.0[0], 0x0000_0000); // r - 1 = 0x73ed...ffff_0000_0000
}

#[test]
fn views_do_not_copy() {
    let v: Vec<Scalar> = (0..10u64).map(Scalar::from).collect();
    let view = cast::scalars_as_fr(&v);
    assert_eq!(view.as_ptr() as usize, v.as_ptr() as usize);
    assert_eq!(view[3], layout::Fr::from(Scalar::from(3u64)));
    let back = cast::fr_as_scalars(view).unwrap();
    assert_eq!(back, &v[..]);
    let pts: Vec<G1Affine> = (0..4)
        .map(|_| G1Projective::generator().to_affine())
        .collect();
    assert_eq!(
        cast::g1_affine_as_gpu(&pts)[2],
        layout::G1Affine::from(pts[2])
    );
}
