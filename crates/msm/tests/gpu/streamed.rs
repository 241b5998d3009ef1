//! The streamed MSM on the GPU: the same point as the resident MSM and as blst, over chunk
//! sizes that divide n, do not, and exceed it; dense and boolean scalars; budget refusals.

use std::sync::Arc;

use blstrs::{G1Affine, G2Affine, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use zkpipe_cuda::Context;
use zkpipe_field::{cast, layout};
use zkpipe_msm::testgen::{booleans, g1_points, g2_points, scalars};
use zkpipe_msm::{Bases, CpuMsm, CudaError, Msm, MsmError, ScalarKind, StreamOptions, G1, G2};
use zkpipe_pinned::PinnedBuffer;
use zkpipe_stream::{BudgetError, Pinned, VramBudget};

use super::setup;

fn pinned_g1(ctx: &Arc<Context>, p: &[G1Affine]) -> PinnedBuffer<layout::G1Affine> {
    PinnedBuffer::from_slice(ctx, cast::g1_affine_as_gpu(p)).unwrap()
}

fn pinned_fr(ctx: &Arc<Context>, s: &[Scalar]) -> PinnedBuffer<layout::Fr> {
    PinnedBuffer::from_slice(ctx, cast::scalars_as_fr(s)).unwrap()
}

fn opts(chunk: usize, kind: ScalarKind) -> StreamOptions {
    StreamOptions {
        chunk,
        kind,
        ..StreamOptions::default()
    }
}

#[test]
fn streamed_g1_equals_resident_and_blst() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    for n in [1usize, 1000, 1 << 16, 100_000] {
        let mut points = g1_points(n, seed ^ n as u64);
        let mut s = scalars(n, seed.rotate_left(9) ^ n as u64);
        if n > 8 {
            points[0] = G1Affine::identity();
            s[1] = Scalar::ZERO;
            s[2] = -Scalar::ONE;
        }
        let bases = Bases::new(points.clone()).unwrap();
        let want = cpu.g1(&bases, &s, None).unwrap();
        let dev = gpu.upload_bases::<G1>(&bases).unwrap();
        assert_eq!(gpu.msm::<G1>(&dev, &s, ScalarKind::Dense).unwrap(), want);
        let hp = pinned_g1(&ctx, &points);
        let hs = pinned_fr(&ctx, &s);
        for chunk in [1000usize, 1 << 14, 30_000, 1 << 20] {
            let got = gpu
                .msm_streamed::<G1>(
                    Pinned::new(&hp),
                    Pinned::new(&hs),
                    &opts(chunk, ScalarKind::Dense),
                )
                .unwrap();
            assert_eq!(got, want, "n = {n}, chunk = {chunk}");
        }
        let auto = gpu
            .msm_streamed::<G1>(
                Pinned::new(&hp),
                Pinned::new(&hs),
                &opts(4096, ScalarKind::Auto),
            )
            .unwrap();
        assert_eq!(auto, want, "auto, n = {n}");
    }
}

#[test]
fn streamed_boolean_and_g2() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    let n = 50_000;
    let points = g1_points(n, seed);
    let bits = booleans(n, 2, seed ^ 3);
    let bases = Bases::new(points.clone()).unwrap();
    let want = cpu.g1(&bases, &bits, None).unwrap();
    let (hp, hb) = (pinned_g1(&ctx, &points), pinned_fr(&ctx, &bits));
    for kind in [ScalarKind::Auto, ScalarKind::Boolean, ScalarKind::Dense] {
        let got = gpu
            .msm_streamed::<G1>(Pinned::new(&hp), Pinned::new(&hb), &opts(7000, kind))
            .unwrap();
        assert_eq!(got, want, "{kind:?}");
    }
    // Declared boolean but not: an error naming the first offending scalar.
    let mut bad = bits.clone();
    bad[12_345] = Scalar::from(2u64);
    let hbad = pinned_fr(&ctx, &bad);
    let err = gpu
        .msm_streamed::<G1>(
            Pinned::new(&hp),
            Pinned::new(&hbad),
            &opts(7000, ScalarKind::Boolean),
        )
        .unwrap_err();
    assert!(
        matches!(err, CudaError::Msm(MsmError::NotBoolean { index: 12_345 })),
        "{err}"
    );

    let m = 20_000;
    let p2: Vec<G2Affine> = g2_points(m, seed ^ 5);
    let s2 = scalars(m, seed ^ 6);
    let want2 = cpu.g2(&Bases::new(p2.clone()).unwrap(), &s2, None).unwrap();
    let hp2 = PinnedBuffer::from_slice(&ctx, cast::g2_affine_as_gpu(&p2)).unwrap();
    let hs2 = pinned_fr(&ctx, &s2);
    let got2 = gpu
        .msm_streamed::<G2>(
            Pinned::new(&hp2),
            Pinned::new(&hs2),
            &opts(6000, ScalarKind::Dense),
        )
        .unwrap();
    assert_eq!(got2, want2);
}

#[test]
fn streamed_bad_input_names_the_numbers() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let points = g1_points(100, seed);
    let s = scalars(99, seed ^ 1);
    let (hp, hs) = (pinned_g1(&ctx, &points), pinned_fr(&ctx, &s));
    let err = gpu
        .msm_streamed::<G1>(
            Pinned::new(&hp),
            Pinned::new(&hs),
            &opts(10, ScalarKind::Dense),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        CudaError::Msm(MsmError::LengthMismatch {
            bases: 100,
            scalars: 99
        })
    ));
    let s = scalars(100, seed ^ 2);
    let hs = pinned_fr(&ctx, &s);
    let err = gpu
        .msm_streamed::<G1>(
            Pinned::new(&hp),
            Pinned::new(&hs),
            &opts(0, ScalarKind::Dense),
        )
        .unwrap_err();
    assert!(matches!(err, CudaError::Chunk { chunk: 0 }), "{err}");
    // A chunk that the budget can never admit: an error with the bytes, not a wait.
    let budget = VramBudget::with_capacity(64 << 10);
    let o = StreamOptions {
        budget: Some(budget.clone()),
        ..opts(100, ScalarKind::Dense)
    };
    let needed = gpu.streamed_bytes::<G1>(100, 100, ScalarKind::Dense);
    assert!(needed > 64 << 10, "the workspace alone exceeds 64 KiB");
    let err = gpu
        .msm_streamed::<G1>(Pinned::new(&hp), Pinned::new(&hs), &o)
        .unwrap_err();
    match &err {
        CudaError::Budget(BudgetError::NeverFits {
            needed: n,
            capacity,
        }) => {
            assert_eq!((*n, *capacity), (needed, 64 << 10));
            assert!(err.to_string().contains(&needed.to_string()), "{err}");
        }
        other => panic!("expected a budget error, got {other}"),
    }
    assert_eq!(budget.stats().in_use, 0);
}
