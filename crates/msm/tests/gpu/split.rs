//! Batches on the GPU: split MSMs (ones summed, the tail through Pippenger, densities applied
//! on the device) and chunked dense MSMs, with resident and streamed bases, against blst.

use std::sync::Arc;

use blstrs::{G1Affine, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkpipe_cuda::{DeviceBuffer, Event};
use zkpipe_field::cast;
use zkpipe_msm::testgen::{g1_points, g2_points, mixed, scalars};
use zkpipe_msm::{
    BaseSource, Bases, CpuMsm, CudaError, CudaMsm, Density, Gathered, Msm, MsmError, SplitQuery,
    SplitScalars, G1, G2,
};
use zkpipe_pinned::{PinnedBuffer, PinnedPool};
use zkpipe_stream::Pinned;

use super::setup;

fn density(n: usize, every: u32, seed: u64) -> Density {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    Density::from_bools((0..n).map(|_| r.next_u32() % every != 0).collect())
}

/// z with the values the split must tell apart: zeros, ones, random, p - 1, and 2.
fn witness(n: usize, seed: u64) -> Vec<Scalar> {
    let mut z = mixed(n, seed);
    for (i, v) in [(3, -Scalar::ONE), (5, Scalar::from(2u64)), (7, Scalar::ONE)] {
        if i < n {
            z[i] = v;
        }
    }
    z
}

fn queries(gpu: &CudaMsm, split: &Arc<SplitScalars>, d: &Density) -> zkpipe_msm::DeviceQuery {
    gpu.upload_query(SplitQuery::new(split, d).unwrap())
        .unwrap()
}

#[test]
fn split_g1_matches_blst_resident_and_streamed() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    for n in [1usize, 31, 33, 1000, 5000, 1 << 16] {
        let z = witness(n, seed ^ n as u64);
        let d = density(n, 4, seed ^ 3);
        let mut points = g1_points(d.selected(), seed ^ 5);
        if points.len() > 2 {
            points[1] = G1Affine::identity();
        }
        let bases = Bases::new(points).unwrap();
        let want = cpu.g1(&bases, &z, Some(&d)).unwrap();
        let split = Arc::new(SplitScalars::of(&z).unwrap());
        let dev_split = gpu.upload_split(Arc::clone(&split)).unwrap();
        let q = queries(&gpu, &split, &d);
        let whole = SplitQuery::new(&split, &d).unwrap();
        let nonzero = gpu
            .upload_query(whole.nonzero_only(&split).unwrap())
            .unwrap();
        let staging = PinnedPool::new(&ctx, 64 << 20);
        let resident = gpu.upload_bases::<G1>(&bases).unwrap();
        let host = PinnedBuffer::from_slice(&ctx, cast::g1_affine_as_gpu(bases.points())).unwrap();
        // Chunks smaller than the tail and the bases, and one holding everything.
        for chunk in [64usize, 1000, 1 << 17] {
            let mut batch = gpu.batch::<G1>(chunk).unwrap();
            let origin = Event::timed(&ctx).unwrap();
            origin.record(gpu.stream()).unwrap();
            let r = batch
                .split(BaseSource::Resident(&resident), &dev_split, &q)
                .unwrap();
            assert_eq!(
                batch.take_copies().bytes(),
                0,
                "resident bases move nothing"
            );
            batch.time_copies();
            let p = batch
                .split(BaseSource::Pinned(Pinned::new(&host)), &dev_split, &q)
                .unwrap();
            let copies = batch.take_copies();
            // Only the points whose scalar is not zero, gathered from pageable memory.
            let wait = std::time::Duration::from_secs(10);
            let all = cast::g1_affine_as_gpu(bases.points());
            // In pieces of 100 points at most: several a chunk but for the smallest.
            let gathered = Gathered::new(all, &whole, &nonzero, &staging, wait)
                .unwrap()
                .in_pieces_of(100);
            let g = batch
                .split(BaseSource::Gathered(gathered), &dev_split, &nonzero)
                .unwrap();
            let gathered_copies = batch.take_copies();
            let out = batch.finish().unwrap();
            assert_eq!(
                out.sum(g).unwrap(),
                want,
                "gathered, n = {n}, chunk {chunk}"
            );
            let point = std::mem::size_of::<<G1 as zkpipe_msm::GpuCurve>::GpuAffine>() as u64;
            assert_eq!(
                gathered_copies.bytes(),
                whole.nonzero() as u64 * point,
                "n = {n}"
            );
            // Every selected base crossed the link, in the time the copies were timed.
            let moved = copies.link_use(Some(&origin)).unwrap();
            assert_eq!(moved.bytes, d.selected() as u64 * point, "n = {n}");
            assert!(moved.busy_ms > 0.0, "n = {n}: {moved:?}");
            assert_eq!(
                out.sum(r).unwrap(),
                want,
                "resident, n = {n}, chunk {chunk}"
            );
            assert_eq!(
                out.sum(p).unwrap(),
                want,
                "streamed, n = {n}, chunk {chunk}"
            );
        }
    }
}

#[test]
fn split_g2_matches_blst() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let n = 3000;
    let z = witness(n, seed);
    let d = density(n, 3, seed ^ 1);
    let bases = Bases::new(g2_points(d.selected(), seed ^ 2)).unwrap();
    let want = CpuMsm::new().g2(&bases, &z, Some(&d)).unwrap();
    let split = Arc::new(SplitScalars::of(&z).unwrap());
    let dev_split = gpu.upload_split(Arc::clone(&split)).unwrap();
    let q = queries(&gpu, &split, &d);
    let resident = gpu.upload_bases::<G2>(&bases).unwrap();
    let host = PinnedBuffer::from_slice(&ctx, cast::g2_affine_as_gpu(bases.points())).unwrap();
    let whole = SplitQuery::new(&split, &d).unwrap();
    let nonzero = gpu
        .upload_query(whole.nonzero_only(&split).unwrap())
        .unwrap();
    let staging = PinnedPool::new(&ctx, 16 << 20);
    let wait = std::time::Duration::from_secs(10);
    let all = cast::g2_affine_as_gpu(bases.points());
    let mut batch = gpu.batch::<G2>(256).unwrap();
    let r = batch
        .split(BaseSource::Resident(&resident), &dev_split, &q)
        .unwrap();
    let p = batch
        .split(BaseSource::Pinned(Pinned::new(&host)), &dev_split, &q)
        .unwrap();
    let gathered = Gathered::new(all, &whole, &nonzero, &staging, wait).unwrap();
    let g = batch
        .split(BaseSource::Gathered(gathered), &dev_split, &nonzero)
        .unwrap();
    let out = batch.finish().unwrap();
    assert_eq!(out.sum(r).unwrap(), want);
    assert_eq!(out.sum(p).unwrap(), want);
    assert_eq!(out.sum(g).unwrap(), want, "gathered");
}

#[test]
fn split_edge_cases_all_zero_all_one_nothing_selected() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    let n = 2000;
    let staging = PinnedPool::new(&ctx, 16 << 20);
    let cases: [(&str, Vec<Scalar>, Density); 4] = [
        ("all zero", vec![Scalar::ZERO; n], Density::all(n)),
        ("all one", vec![Scalar::ONE; n], density(n, 2, seed)),
        ("all random", scalars(n, seed), density(n, 5, seed ^ 1)),
        (
            "nothing selected",
            witness(n, seed),
            Density::from_bools(vec![false; n]),
        ),
    ];
    for (what, z, d) in cases {
        let bases = Bases::new(g1_points(d.selected(), seed ^ 9)).unwrap();
        let want = cpu.g1(&bases, &z, Some(&d)).unwrap();
        let split = Arc::new(SplitScalars::of(&z).unwrap());
        let dev_split = gpu.upload_split(Arc::clone(&split)).unwrap();
        let q = queries(&gpu, &split, &d);
        let resident = gpu.upload_bases::<G1>(&bases).unwrap();
        let whole = SplitQuery::new(&split, &d).unwrap();
        let nonzero = gpu
            .upload_query(whole.nonzero_only(&split).unwrap())
            .unwrap();
        let all = cast::g1_affine_as_gpu(bases.points());
        let wait = std::time::Duration::from_secs(10);
        let gathered = Gathered::new(all, &whole, &nonzero, &staging, wait).unwrap();
        let mut batch = gpu.batch::<G1>(512).unwrap();
        let t = batch
            .split(BaseSource::Resident(&resident), &dev_split, &q)
            .unwrap();
        let g = batch
            .split(BaseSource::Gathered(gathered), &dev_split, &nonzero)
            .unwrap();
        let out = batch.finish().unwrap();
        assert_eq!(out.sum(t).unwrap(), want, "{what}");
        assert_eq!(out.sum(g).unwrap(), want, "{what}, gathered");
    }
}

#[test]
fn chunked_dense_matches_blst_and_mixes_with_split_in_one_batch() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let cpu = CpuMsm::new();
    let n = 10_000;
    let bases = Bases::new(g1_points(n, seed)).unwrap();
    // The scalars are one longer than the bases (as h is to its query): the last is unused.
    let s = scalars(n + 1, seed ^ 1);
    let want = cpu.g1(&bases, &s[..n], None).unwrap();
    let dev_s = DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&s)).unwrap();
    let resident = gpu.upload_bases::<G1>(&bases).unwrap();
    let host = PinnedBuffer::from_slice(&ctx, cast::g1_affine_as_gpu(bases.points())).unwrap();
    let z = witness(n, seed ^ 2);
    let d = Density::all(n);
    let split_want = cpu.g1(&bases, &z, Some(&d)).unwrap();
    let split = Arc::new(SplitScalars::of(&z).unwrap());
    let dev_split = gpu.upload_split(Arc::clone(&split)).unwrap();
    let q = queries(&gpu, &split, &d);
    ctx.synchronize().unwrap();
    for chunk in [100usize, 4096, 1 << 14] {
        let mut batch = gpu.batch::<G1>(chunk).unwrap();
        let a = batch
            .dense(BaseSource::Resident(&resident), &dev_s, n)
            .unwrap();
        let b = batch
            .split(BaseSource::Resident(&resident), &dev_split, &q)
            .unwrap();
        let c = batch
            .dense(BaseSource::Pinned(Pinned::new(&host)), &dev_s, n)
            .unwrap();
        let out = batch.finish().unwrap();
        assert_eq!(out.sum(a).unwrap(), want, "resident, chunk {chunk}");
        assert_eq!(out.sum(b).unwrap(), split_want, "split, chunk {chunk}");
        assert_eq!(out.sum(c).unwrap(), want, "streamed, chunk {chunk}");
    }
    // One batch's memory kept for the next ones.
    let mut mem = gpu.batch_memory::<G1>(4096).unwrap();
    for round in 0..3 {
        let mut batch = gpu.batch_in(mem);
        let a = batch
            .dense(BaseSource::Pinned(Pinned::new(&host)), &dev_s, n)
            .unwrap();
        let b = batch
            .split(BaseSource::Resident(&resident), &dev_split, &q)
            .unwrap();
        let (out, kept) = batch.finish_keeping().unwrap();
        assert_eq!(kept.chunk(), 4096);
        mem = kept;
        assert_eq!(out.sum(a).unwrap(), want, "kept memory, round {round}");
        assert_eq!(
            out.sum(b).unwrap(),
            split_want,
            "kept memory, round {round}"
        );
    }
}

#[test]
fn batch_refuses_mismatched_bases_and_bitmaps() {
    let Some((ctx, gpu, seed)) = setup() else {
        return;
    };
    let n = 100;
    let z = witness(n, seed);
    let d = density(n, 2, seed);
    let split = Arc::new(SplitScalars::of(&z).unwrap());
    let dev_split = gpu.upload_split(Arc::clone(&split)).unwrap();
    let q = queries(&gpu, &split, &d);
    let wrong = Bases::new(g1_points(d.selected() + 1, seed)).unwrap();
    let dev = gpu.upload_bases::<G1>(&wrong).unwrap();
    let mut batch = gpu.batch::<G1>(64).unwrap();
    match batch.split(BaseSource::Resident(&dev), &dev_split, &q) {
        Err(CudaError::Msm(MsmError::DensityCount { selected, bases })) => {
            assert_eq!((selected, bases), (d.selected(), d.selected() + 1));
        }
        other => panic!("expected a density count error, got {other:?}"),
    }
    let other = Arc::new(SplitScalars::of(&witness(n + 64, seed)).unwrap());
    let other_split = gpu.upload_split(other).unwrap();
    let bases = Bases::new(g1_points(d.selected(), seed)).unwrap();
    let dev = gpu.upload_bases::<G1>(&bases).unwrap();
    assert!(matches!(
        batch.split(BaseSource::Resident(&dev), &other_split, &q),
        Err(CudaError::Msm(MsmError::DensityLength { .. }))
    ));
    assert!(matches!(
        gpu.batch::<G1>(8),
        Err(CudaError::Chunk { chunk: 8 })
    ));
    // Gathered points: for the query they were gathered for, in split MSMs only, from a
    // query that covers it.
    let whole = SplitQuery::new(&split, &d).unwrap();
    let nonzero = gpu
        .upload_query(whole.nonzero_only(&split).unwrap())
        .unwrap();
    let staging = PinnedPool::new(&ctx, 1 << 20);
    let wait = std::time::Duration::from_secs(1);
    let all = zkpipe_field::cast::g1_affine_as_gpu(bases.points());
    let gathered = || Gathered::new(all, &whole, &nonzero, &staging, wait).unwrap();
    assert!(matches!(
        batch.split(BaseSource::Gathered(gathered()), &dev_split, &q),
        Err(CudaError::Gather(_))
    ));
    let dev_s = DeviceBuffer::from_host(&ctx, &vec![zkpipe_field::Fr::default(); n]).unwrap();
    let points = d.selected();
    assert!(matches!(
        batch.dense(BaseSource::Gathered(gathered()), &dev_s, points),
        Err(CudaError::Gather(_))
    ));
    let nothing = SplitQuery::new(&split, &Density::from_bools(vec![false; n])).unwrap();
    assert!(matches!(
        Gathered::<G1>::new(&[], &nothing, &nonzero, &staging, wait),
        Err(CudaError::Gather(_))
    ));
    // Nothing was enqueued by the refused calls: the batch still finishes.
    batch.finish().unwrap();
}
