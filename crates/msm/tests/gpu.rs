//! The CUDA MSM against blst on the GPU: sizes 0 to 2^20 in G1 and to 2^18 in G2, dense and
//! boolean scalars, density bitmaps, edge cases, resident bases reused, bad input.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::RngCore;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::Context;
use zkpipe_msm::kernels::TaskSplit;
use zkpipe_msm::testgen::{booleans, g1_points, g2_points, scalars};
use zkpipe_msm::{Bases, CpuMsm, CudaError, CudaMsm, Density, Msm, MsmError, ScalarKind, G1, G2};

#[path = "gpu/multiples.rs"]
mod multiples;
#[path = "gpu/split.rs"]
mod split;
#[path = "gpu/streamed.rs"]
mod streamed;

fn setup() -> Option<(Arc<Context>, CudaMsm, u64)> {
    let ctx = gpu_context()?;
    let msm = CudaMsm::new(&ctx).unwrap();
    let seed = rand::thread_rng().next_u64();
    println!("seed {seed}");
    Some((ctx, msm, seed))
}

#[test]
fn a_kept_workspace_serves_later_calls_of_either_curve_and_other_sizes() {
    let Some((ctx, _, seed)) = setup() else {
        return;
    };
    let gpu = CudaMsm::new(&ctx).unwrap().keeping_workspace();
    let cpu = CpuMsm::new();
    // 2^16 makes the buffers; 1000 points (4-bit windows) run in them; G2 and then 2^17
    // need others; after the release the next call makes its own again.
    for (i, n) in [1usize << 16, 1000, 1 << 16, 1 << 17, 1000]
        .into_iter()
        .enumerate()
    {
        let points = g1_points(n, seed ^ i as u64);
        let s = scalars(n, seed.rotate_left(9) ^ i as u64);
        let bases = Bases::new(points).unwrap();
        let dev = gpu.upload_bases::<G1>(&bases).unwrap();
        let want = cpu.g1(&bases, &s, None).unwrap();
        let got = gpu.msm::<G1>(&dev, &s, ScalarKind::Dense).unwrap();
        assert_eq!(got, want, "call {i}, n = {n}");
        if i == 1 {
            let m = 1 << 10;
            let bases = Bases::new(g2_points(m, seed ^ 77)).unwrap();
            let s = scalars(m, seed ^ 78);
            let dev = gpu.upload_bases::<G2>(&bases).unwrap();
            let want = cpu.g2(&bases, &s, None).unwrap();
            assert_eq!(gpu.msm::<G2>(&dev, &s, ScalarKind::Dense).unwrap(), want);
        }
        if i == 3 {
            gpu.release_workspace();
        }
    }
}

/// The edge cases, where there are at least 8 points: the identity, a zero scalar, r - 1, the
/// same point and digit twice (an addition that must double), a point and its negation, and
/// scalars either side of r/2 (where the digits switch from s to r − s, the point negated).
fn plant_edge_cases<A: Copy>(
    points: &mut [A],
    s: &mut [Scalar],
    identity: A,
    neg: impl Fn(A) -> A,
) {
    if points.len() < 8 {
        return;
    }
    points[0] = identity;
    s[1] = Scalar::ZERO;
    s[2] = -Scalar::ONE;
    points[4] = points[3];
    s[4] = s[3];
    points[6] = neg(points[5]);
    s[6] = s[5];
    let half = -Scalar::ONE * Scalar::from(2u64).invert().unwrap(); // (r - 1)/2
    s[7] = half;
    if let Some(x) = s.get_mut(8) {
        *x = half + Scalar::ONE;
    }
}

/// n random G2 points and scalars with the edge cases planted, and blst's sum of them.
fn g2_case_with_edges(n: usize, seed: u64) -> (Bases<G2Affine>, Vec<Scalar>, G2Projective) {
    let mut points = g2_points(n, seed);
    let mut s = scalars(n, seed.rotate_left(11));
    plant_edge_cases(&mut points, &mut s, G2Affine::identity(), |p| {
        (-G2Projective::from(p)).to_affine()
    });
    let bases = Bases::new(points).unwrap();
    let expect = CpuMsm::new().g2(&bases, &s, None).unwrap();
    (bases, s, expect)
}

#[test]
fn g1_matches_blst_at_many_sizes_with_edge_cases() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    for n in [0usize, 1, 2, 3, 255, 256, 1000, 1 << 16, 1 << 20] {
        let mut points = g1_points(n, seed ^ n as u64);
        let mut s = scalars(n, seed.rotate_left(7) ^ n as u64);
        plant_edge_cases(&mut points, &mut s, G1Affine::identity(), |p| {
            (-G1Projective::from(p)).to_affine()
        });
        let bases = Bases::new(points).unwrap();
        let dev = gpu.upload_bases::<G1>(&bases).unwrap();
        let want = cpu.g1(&bases, &s, None).unwrap();
        assert_eq!(
            gpu.msm::<G1>(&dev, &s, ScalarKind::Dense).unwrap(),
            want,
            "n = {n}"
        );
        assert_eq!(
            gpu.msm::<G1>(&dev, &s, ScalarKind::Auto).unwrap(),
            want,
            "auto, n = {n}"
        );
    }
}

#[test]
fn every_window_width_gives_blst_sum() {
    let Some((ctx, _gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    let n = 3000;
    let mut points = g1_points(n, seed);
    let mut s = scalars(n, seed ^ 1);
    points[0] = G1Affine::identity();
    s[1] = Scalar::ZERO;
    s[2] = -Scalar::ONE;
    (points[4], s[4]) = (points[3], s[3]);
    // Either side of r/2, where the digits switch from s to r − s.
    let half = -Scalar::ONE * Scalar::from(2u64).invert().unwrap();
    (s[5], s[6]) = (half, half + Scalar::ONE);
    let bases = Bases::new(points).unwrap();
    let want = cpu.g1(&bases, &s, None).unwrap();
    let g2_bases = Bases::new(g2_points(500, seed ^ 2)).unwrap();
    let g2_want = cpu.g2(&g2_bases, &s[..500], None).unwrap();
    for c in [2u32, 3, 5, 7, 8, 11, 13, 15, 16, 17, 18, 19, 20, 21, 22] {
        let gpu = CudaMsm::new(&ctx).unwrap().with_window_bits(c).unwrap();
        let dev = gpu.upload_bases::<G1>(&bases).unwrap();
        let got = gpu.msm::<G1>(&dev, &s, ScalarKind::Dense).unwrap();
        assert_eq!(got, want, "G1, {c}-bit windows");
        if matches!(c, 13 | 15 | 16 | 17 | 20) {
            let dev = gpu.upload_bases::<G2>(&g2_bases).unwrap();
            let got = gpu.msm::<G2>(&dev, &s[..500], ScalarKind::Dense).unwrap();
            assert_eq!(got, g2_want, "G2, {c}-bit windows");
        }
    }
    for c in [0u32, 1, 23, 64] {
        let e = CudaMsm::new(&ctx).unwrap().with_window_bits(c).unwrap_err();
        assert!(
            matches!(e, CudaError::WindowBits { c: got } if got == c),
            "{e}"
        );
    }
}

#[test]
fn many_equal_points_and_scalars() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let p = g1_points(1, seed)[0];
    let n = 5000;
    let bases = Bases::new(vec![p; n]).unwrap();
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    let k = scalars(1, seed ^ 1)[0];
    let s = vec![k; n];
    assert_eq!(
        gpu.msm::<G1>(&dev, &s, ScalarKind::Dense).unwrap(),
        G1Projective::from(p) * (k * Scalar::from(n as u64))
    );
}

#[test]
fn g2_matches_blst() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    for n in [0usize, 1, 3, 256, 1 << 12, 1 << 18] {
        let mut points = g2_points(n, seed ^ n as u64);
        let mut s = scalars(n, seed.rotate_left(9) ^ n as u64);
        plant_edge_cases(&mut points, &mut s, G2Affine::identity(), |p| {
            (-G2Projective::from(p)).to_affine()
        });
        let bases = Bases::new(points).unwrap();
        let dev = gpu.upload_bases::<G2>(&bases).unwrap();
        assert_eq!(
            gpu.msm::<G2>(&dev, &s, ScalarKind::Dense).unwrap(),
            cpu.g2(&bases, &s, None).unwrap(),
            "n = {n}"
        );
    }
    // One bucket a window holding nearly every point, split into many tasks; a point and its
    // negation, and a point twice, meet inside one task.
    let n = 5000;
    let mut points = g2_points(n, seed ^ 0xb0c);
    let mut s = vec![scalars(1, seed ^ 0xb0d)[0]; n];
    s[7] = Scalar::ONE;
    points[20] = (-G2Projective::from(points[21])).to_affine();
    points[31] = points[30];
    points[40] = G2Affine::identity();
    let bases = Bases::new(points).unwrap();
    let dev = gpu.upload_bases::<G2>(&bases).unwrap();
    assert_eq!(
        gpu.msm::<G2>(&dev, &s, ScalarKind::Dense).unwrap(),
        cpu.g2(&bases, &s, None).unwrap(),
        "one bucket holding most points"
    );
    let b = Bases::new(g2_points(100, seed)).unwrap();
    let ones = booleans(100, 2, seed);
    assert_eq!(
        Msm::g2(&gpu, &b, &ones, None).unwrap(),
        cpu.g2(&b, &ones, None).unwrap()
    );
    assert!(bool::from(
        Msm::g2(&gpu, &b, &vec![Scalar::ZERO; 100], None)
            .unwrap()
            .is_identity()
    ));
    let _ = G2Projective::identity();
}

/// G2's bucket kernel follows the memory the work may use: XYZZ additions for a few MiB, the
/// largest batch for a terabyte, never a smaller batch for more memory; each kernel chosen sums
/// as blst does, edge cases included.
#[test]
fn g2_batch_follows_the_memory_given() {
    let Some((ctx, _, seed)) = setup() else {
        return;
    };
    let batches: Vec<(usize, u32)> = (26..=40)
        .map(|shift| {
            let memory = 1usize << shift;
            (
                memory,
                CudaMsm::for_memory(&ctx, memory).unwrap().g2_batch(),
            )
        })
        .collect();
    println!("(memory, batch): {batches:?}");
    assert!(batches.windows(2).all(|w| w[0].1 <= w[1].1), "{batches:?}");
    assert_eq!(batches.first().map(|b| b.1), Some(1));
    assert_eq!(batches.last().map(|b| b.1), Some(64));
    let (bases, s, expect) = g2_case_with_edges(3000, seed ^ 0xba7c);
    let mut seen = Vec::new();
    for (memory, batch) in batches {
        if seen.contains(&batch) {
            continue;
        }
        seen.push(batch);
        let gpu = CudaMsm::for_memory(&ctx, memory).unwrap();
        let dev = gpu.upload_bases::<G2>(&bases).unwrap();
        assert_eq!(
            gpu.msm::<G2>(&dev, &s, ScalarKind::Dense).unwrap(),
            expect,
            "batch {batch}"
        );
    }
}

/// Every way of sharing G2's tasks among the batch-affine kernel's threads sums as blst does:
/// tasks in one run or many, a thread taking one task or a number of them that is not a power
/// of two, all runs of a thread in use or some idle; a split the kernel cannot take is refused
/// with an error naming it.
#[test]
fn every_g2_split_gives_blst_sum() {
    let Some((ctx, _, seed)) = setup() else {
        return;
    };
    let gpu = CudaMsm::new(&ctx).unwrap();
    let batch = gpu.g2_batch();
    if batch == 1 {
        println!("G2's bucket kernel adds in XYZZ coordinates here: no split to check");
        return;
    }
    let (bases, s, expect) = g2_case_with_edges(20000, seed ^ 0x5b11);
    let splits = [
        (1, 1),
        (1, batch),
        (2, 3),
        (4, batch / 4 - 1),
        (batch / 4, 3),
        (batch / 4, 4),
        (8, batch / 8 - 1),
        (batch, 1),
    ];
    for (parts, per_thread) in splits {
        let split = TaskSplit { parts, per_thread };
        let gpu = CudaMsm::new(&ctx).unwrap().with_g2_split(split).unwrap();
        let dev = gpu.upload_bases::<G2>(&bases).unwrap();
        assert_eq!(
            gpu.msm::<G2>(&dev, &s, ScalarKind::Dense).unwrap(),
            expect,
            "{split:?}"
        );
    }
    for (parts, per_thread) in [(3, 1), (batch, 2), (2, 0)] {
        let err = CudaMsm::new(&ctx)
            .unwrap()
            .with_g2_split(TaskSplit { parts, per_thread })
            .unwrap_err();
        assert!(
            matches!(err, CudaError::Split { parts: p, per_thread: t, batch: b }
                if p == parts && t == per_thread && b == batch),
            "{err}"
        );
        println!("{err}");
    }
}

#[test]
fn boolean_scalars_density_and_resident_reuse() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    let n = 1 << 16;
    let flags: Vec<bool> = booleans(n, 4, seed)
        .iter()
        .map(|s| *s == Scalar::ZERO)
        .collect();
    let density = Density::from_bools(flags);
    let bases = Bases::new(g1_points(density.selected(), seed)).unwrap();
    for s in [booleans(n, 2, seed ^ 1), scalars(n, seed ^ 2)] {
        assert_eq!(
            Msm::g1(&gpu, &bases, &s, Some(&density)).unwrap(),
            cpu.g1(&bases, &s, Some(&density)).unwrap()
        );
    }
    // Resident bases, several scalar sets.
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    for (i, s) in [
        booleans(density.selected(), 3, seed ^ 3),
        scalars(density.selected(), seed ^ 4),
    ]
    .iter()
    .enumerate()
    {
        let want = cpu.g1(&bases, s, None).unwrap();
        assert_eq!(
            gpu.msm::<G1>(&dev, s, ScalarKind::Auto).unwrap(),
            want,
            "set {i}"
        );
    }
    let bools = booleans(density.selected(), 3, seed ^ 5);
    assert_eq!(
        gpu.msm::<G1>(&dev, &bools, ScalarKind::Boolean).unwrap(),
        cpu.g1(&bases, &bools, None).unwrap()
    );
    let mut not_bool = bools.clone();
    not_bool[77] = Scalar::from(2u64);
    let err = gpu
        .msm::<G1>(&dev, &not_bool, ScalarKind::Boolean)
        .unwrap_err();
    assert!(
        matches!(err, CudaError::Msm(MsmError::NotBoolean { index: 77 })),
        "{err}"
    );
}

#[test]
fn bad_input_is_an_error() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let bases = Bases::new(g1_points(10, seed)).unwrap();
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    let err = gpu
        .msm::<G1>(&dev, &scalars(9, seed), ScalarKind::Auto)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CudaError::Msm(MsmError::LengthMismatch {
                bases: 10,
                scalars: 9
            })
        ),
        "{err}"
    );
    let d = Density::from_bools(vec![true; 11]);
    assert!(matches!(
        Msm::g1(&gpu, &bases, &scalars(11, seed), Some(&d)),
        Err(MsmError::DensityCount {
            selected: 11,
            bases: 10
        })
    ));
    let _ = Scalar::random(rand::thread_rng());
}

#[test]
fn skewed_buckets_mostly_zero_one_scalars() {
    // 0/1 scalars with one in 16 random (a Filecoin witness): bucket 1 of window 0 gets
    // about half of the points, which the task split must sum correctly (and in parallel).
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    for n in [5000usize, 1 << 18] {
        let points = g1_points(n, seed ^ 77);
        let r = scalars(n, seed ^ 78);
        let b = booleans(n, 2, seed ^ 79);
        let s: Vec<Scalar> = (0..n)
            .map(|i| if i % 16 == 7 { r[i] } else { b[i] })
            .collect();
        let bases = Bases::new(points).unwrap();
        let dev = gpu.upload_bases::<G1>(&bases).unwrap();
        let want = cpu.g1(&bases, &s, None).unwrap();
        for kind in [ScalarKind::Auto, ScalarKind::Dense] {
            assert_eq!(
                gpu.msm::<G1>(&dev, &s, kind).unwrap(),
                want,
                "n = {n}, {kind:?}"
            );
        }
        let ones = vec![Scalar::ONE; n];
        let want = cpu.g1(&bases, &ones, None).unwrap();
        assert_eq!(
            gpu.msm::<G1>(&dev, &ones, ScalarKind::Dense).unwrap(),
            want,
            "all ones"
        );
    }
}

/// One scalar for nearly every point (the edge cases planted besides): each window's bucket
/// holds about all of them, 489 tasks of 512 points, whose sums two levels of the tree fold
/// (16 into one, twice) before one thread a bucket adds the last two; groups are left
/// partial at either level.
#[test]
fn a_bucket_of_hundreds_of_tasks_is_folded_to_blst_sum() {
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    let n = 250_000;
    let mut s = vec![scalars(1, seed ^ 0xf01d)[0]; n];
    let mut p1 = g1_points(n, seed ^ 0xf01e);
    plant_edge_cases(&mut p1, &mut s, G1Affine::identity(), |p| {
        (-G1Projective::from(p)).to_affine()
    });
    let b1 = Bases::new(p1).unwrap();
    let dev = gpu.upload_bases::<G1>(&b1).unwrap();
    let want = cpu.g1(&b1, &s, None).unwrap();
    assert_eq!(gpu.msm::<G1>(&dev, &s, ScalarKind::Dense).unwrap(), want);
    let mut p2 = g2_points(n, seed ^ 0xf01f);
    plant_edge_cases(&mut p2, &mut s, G2Affine::identity(), |p| {
        (-G2Projective::from(p)).to_affine()
    });
    let b2 = Bases::new(p2).unwrap();
    let dev = gpu.upload_bases::<G2>(&b2).unwrap();
    let want = cpu.g2(&b2, &s, None).unwrap();
    assert_eq!(gpu.msm::<G2>(&dev, &s, ScalarKind::Dense).unwrap(), want);
}

#[test]
fn a_2_pow_24_msm_matches_blst() {
    // The benchmark's largest dense size, with the multi-tile prefix sums and the folded
    // window results.
    let Some((_ctx, gpu, seed)) = setup() else {
        return;
    };
    let n = 1 << 24;
    let bases = Bases::new_unchecked(g1_points(n, seed ^ 91));
    let mut s = scalars(n, seed ^ 92);
    s[5] = -Scalar::ONE;
    s[6] = Scalar::ZERO;
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    let want = CpuMsm::new().g1(&bases, &s, None).unwrap();
    assert_eq!(gpu.msm::<G1>(&dev, &s, ScalarKind::Dense).unwrap(), want);
}
