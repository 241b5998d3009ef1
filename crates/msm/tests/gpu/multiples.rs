//! Precomputed multiples of fixed bases on the GPU: the copies themselves against blst, and
//! MSMs over them against blst for many window widths, copy counts, sizes and edge cases.

use blstrs::{G1Affine, G1Projective, G2Affine, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::Curve;
use zkpipe_field::cast;
use zkpipe_msm::testgen::{g1_points, g2_points, scalars};
use zkpipe_msm::{
    BaseSource, Bases, BasesAt, CpuMsm, CudaError, CudaMsm, Msm, Multiples, ScalarKind, G1, G2,
};

use super::setup;

/// Points and scalars with the edge cases of the resident tests: the identity, a zero scalar,
/// r - 1, a point twice with one digit (an addition that must double), a point and its
/// negation with one digit (a sum that cancels).
fn with_edge_cases(n: usize, seed: u64) -> (Vec<G1Affine>, Vec<Scalar>) {
    let mut points = g1_points(n, seed);
    let mut s = scalars(n, seed ^ 0x5eed);
    if n >= 8 {
        points[0] = G1Affine::identity();
        s[1] = Scalar::ZERO;
        s[2] = -Scalar::ONE;
        (points[4], s[4]) = (points[3], s[3]);
        points[6] = (-G1Projective::from(points[5])).to_affine();
        s[6] = s[5];
    }
    (points, s)
}

#[test]
fn copies_are_the_points_times_powers_of_two() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let n = 777;
    let (points, _) = with_edge_cases(n, seed);
    let bases = Bases::new(points.clone()).unwrap();
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    for (c, copies) in [(13u32, 5u32), (2, 16), (22, 3)] {
        let m = Multiples::new(c, copies).unwrap();
        let pre = gpu.with_multiples(&dev, m).unwrap();
        assert_eq!(pre.len(), n);
        assert_eq!(pre.bytes(), m.bytes::<G1>(n));
        let got = CudaMsm::bases_buffer(&pre).to_vec().unwrap();
        let got = cast::gpu_as_g1_affine(&got).expect("an aligned vector");
        for j in 0..copies as usize {
            let factor = Scalar::from(2u64).pow_vartime([(c as u64) * j as u64]);
            for (i, p) in points.iter().enumerate() {
                let want = (G1Projective::from(*p) * factor).to_affine();
                assert_eq!(got[j * n + i], want, "c = {c}, copy {j}, point {i}");
            }
        }
    }
}

#[test]
fn g1_msms_over_multiples_match_blst() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    for n in [1usize, 3, 8, 1000, 1 << 14] {
        let (points, s) = with_edge_cases(n, seed ^ n as u64);
        let bases = Bases::new(points).unwrap();
        let want = cpu.g1(&bases, &s, None).unwrap();
        let dev = gpu.upload_bases::<G1>(&bases).unwrap();
        for (c, copies) in [
            (16u32, 1u32),
            (16, 2),
            (16, 4),
            (13, 3),
            (8, 16),
            (5, 7),
            (20, 13),
        ] {
            let pre = gpu
                .with_multiples(&dev, Multiples::new(c, copies).unwrap())
                .unwrap();
            for kind in [ScalarKind::Dense, ScalarKind::Auto] {
                let got = gpu.msm::<G1>(&pre, &s, kind).unwrap();
                assert_eq!(got, want, "n = {n}, c = {c}, copies = {copies}, {kind:?}");
            }
        }
    }
}

#[test]
fn one_point_many_times_over_multiples() {
    // Every digit of every window in one bucket set: the largest buckets there are.
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let p = g1_points(1, seed)[0];
    let n = 5000;
    let bases = Bases::new(vec![p; n]).unwrap();
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    let k = scalars(1, seed ^ 1)[0];
    let s = vec![k; n];
    let want = G1Projective::from(p) * (k * Scalar::from(n as u64));
    for copies in [2u32, 4, 16] {
        let pre = gpu
            .with_multiples(&dev, Multiples::new(16, copies).unwrap())
            .unwrap();
        assert_eq!(
            gpu.msm::<G1>(&pre, &s, ScalarKind::Dense).unwrap(),
            want,
            "copies = {copies}"
        );
    }
    let ones = vec![Scalar::ONE; n];
    let pre = gpu
        .with_multiples(&dev, Multiples::new(16, 4).unwrap())
        .unwrap();
    assert_eq!(
        gpu.msm::<G1>(&pre, &ones, ScalarKind::Auto).unwrap(),
        G1Projective::from(p) * Scalar::from(n as u64)
    );
}

#[test]
fn g2_msms_over_multiples_match_blst() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let n = 600;
    let mut points = g2_points(n, seed);
    points[0] = G2Affine::identity();
    let mut s = scalars(n, seed ^ 3);
    s[1] = -Scalar::ONE;
    let bases = Bases::new(points).unwrap();
    let want = CpuMsm::new().g2(&bases, &s, None).unwrap();
    let dev = gpu.upload_bases::<G2>(&bases).unwrap();
    for (c, copies) in [(13u32, 2u32), (16, 4), (8, 16)] {
        let pre = gpu
            .with_multiples(&dev, Multiples::new(c, copies).unwrap())
            .unwrap();
        let got = gpu.msm::<G2>(&pre, &s, ScalarKind::Dense).unwrap();
        assert_eq!(got, want, "G2, c = {c}, copies = {copies}");
    }
}

#[test]
fn unusable_multiples_are_errors_naming_them() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    for (c, copies) in [(1u32, 2u32), (23, 2), (16, 0), (16, 17)] {
        let e = Multiples::new(c, copies).unwrap_err();
        let named = match e {
            CudaError::WindowBits { c: got } => got == c,
            CudaError::Copies { copies: got } => got == copies,
            _ => false,
        };
        assert!(named, "c = {c}, copies = {copies}: {e}");
    }
    let bases = Bases::new(g1_points(10, seed)).unwrap();
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    let pre = gpu
        .with_multiples(&dev, Multiples::new(16, 4).unwrap())
        .unwrap();
    let err = gpu
        .msm::<G1>(&pre, &scalars(9, seed), ScalarKind::Dense)
        .unwrap_err();
    assert!(err.to_string().contains("10 bases but 9 scalars"), "{err}");
}

#[test]
fn batched_msms_over_multiples_match_blst_in_chunks() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let n = 5000;
    let (points, s) = with_edge_cases(n, seed);
    let bases = Bases::new(points).unwrap();
    let want = CpuMsm::new().g1(&bases, &s, None).unwrap();
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    let scalars = zkpipe_cuda::DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&s)).unwrap();
    let m = Multiples::new(13, 4).unwrap();
    let pre = gpu.with_multiples(&dev, m).unwrap();
    // Chunks of all n points, of a part (the digits of chunk k read copy j at j·n + lo + i),
    // and memory made without the multiples' plan (the MSM then reads copy 0 only).
    for (chunk, with) in [(n, Some(m)), (1024, Some(m)), (777, None)] {
        let mem = gpu.batch_memory_for::<G1>(chunk, with).unwrap();
        let mut batch = gpu.batch_in(mem);
        let t1 = batch
            .dense(BaseSource::Resident(&pre), &scalars, n)
            .unwrap();
        let t2 = batch
            .dense(BaseSource::Resident(&dev), &scalars, n)
            .unwrap();
        let results = batch.finish().unwrap();
        let label = format!("chunk {chunk}, multiples in the plan: {}", with.is_some());
        assert_eq!(results.sum(t1).unwrap(), want, "{label}");
        assert_eq!(results.sum(t2).unwrap(), want, "without multiples, {label}");
    }
    let bytes = gpu.batch_bytes_for::<G1>(1 << 16, 1, BasesAt::Device, Some(m));
    assert!(bytes >= gpu.batch_bytes::<G1>(1 << 16, 1, BasesAt::Device));
}
