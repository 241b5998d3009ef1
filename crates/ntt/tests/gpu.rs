//! The CUDA NTT against the CPU NTT on random inputs at every size from 2^1 to 2^20 and at
//! 2^24: forward, inverse, cosets, orderings, the H step (device and pinned), special inputs,
//! and bad input.

use std::sync::Arc;

use blstrs::Scalar;
use ff::Field;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{Context, DeviceBuffer};
use zkpipe_field::{cast, Fr};
use zkpipe_ntt::kernels::{Fused, NttKernels, PassShape, PowerTables, ScaleAt};
use zkpipe_ntt::{Coset, CpuNtt, CudaNtt, Direction, HVectors, Ntt, NttConfig, NttError, Ordering};
use zkpipe_pinned::PinnedBuffer;
use zkpipe_stream::Pinned;

fn random(n: usize, rng: &mut ChaCha8Rng) -> Vec<Scalar> {
    let seeds: Vec<u64> = (0..n.div_ceil(4096)).map(|_| rng.next_u64()).collect();
    seeds
        .par_iter()
        .flat_map_iter(|&s| {
            let mut r = ChaCha8Rng::seed_from_u64(s);
            (0..4096).map(move |_| Scalar::random(&mut r))
        })
        .take_any(n)
        .collect::<Vec<_>>()
        .into_iter()
        .take(n)
        .collect()
}

fn shape(log_n: u32, lgp: u32, deg: u32) -> PassShape {
    PassShape { log_n, lgp, deg }
}

fn setup() -> Option<(Arc<Context>, CudaNtt, ChaCha8Rng)> {
    let ctx = gpu_context()?;
    let ntt = CudaNtt::new(&ctx).unwrap();
    let seed = rand::thread_rng().next_u64();
    println!("seed {seed}");
    Some((ctx, ntt, ChaCha8Rng::seed_from_u64(seed)))
}

fn check(gpu: &CudaNtt, x: &[Scalar], dir: Direction, cfg: NttConfig, what: &str) {
    let mut g = x.to_vec();
    gpu.transform(&mut g, dir, &cfg).unwrap();
    let mut c = x.to_vec();
    CpuNtt::new().transform(&mut c, dir, &cfg).unwrap();
    let bad = g.iter().zip(&c).filter(|(a, b)| a != b).count();
    assert_eq!(bad, 0, "{what}, n = {}: {bad} elements differ", x.len());
}

#[test]
fn gpu_matches_cpu_at_every_size() {
    let Some((_ctx, gpu, mut rng)) = setup() else {
        return;
    };
    for log_n in (1..=20).chain([24]) {
        let x = random(1 << log_n, &mut rng);
        check(
            &gpu,
            &x,
            Direction::Forward,
            NttConfig::default(),
            "forward",
        );
        check(
            &gpu,
            &x,
            Direction::Inverse,
            NttConfig::default(),
            "inverse",
        );
        check(
            &gpu,
            &x,
            Direction::Forward,
            NttConfig::coset(),
            "coset forward",
        );
        check(
            &gpu,
            &x,
            Direction::Inverse,
            NttConfig::coset(),
            "coset inverse",
        );
    }
}

#[test]
fn gpu_orderings_and_shifts_match_cpu() {
    let Some((_ctx, gpu, mut rng)) = setup() else {
        return;
    };
    for log_n in [1u32, 5, 11, 16] {
        let x = random(1 << log_n, &mut rng);
        for ordering in [Ordering::NR, Ordering::RN, Ordering::RR] {
            for dir in [Direction::Forward, Direction::Inverse] {
                check(
                    &gpu,
                    &x,
                    dir,
                    NttConfig {
                        ordering,
                        coset: Coset::None,
                    },
                    "ordering",
                );
            }
        }
        let s = random(1, &mut rng)[0];
        check(
            &gpu,
            &x,
            Direction::Forward,
            NttConfig {
                ordering: Ordering::NN,
                coset: Coset::Shift(s),
            },
            "shift",
        );
        check(
            &gpu,
            &x,
            Direction::Inverse,
            NttConfig {
                ordering: Ordering::RR,
                coset: Coset::Shift(s),
            },
            "shift rr",
        );
    }
}

#[test]
fn gpu_special_inputs() {
    let Some((_ctx, gpu, _)) = setup() else {
        return;
    };
    let n = 1 << 12;
    let mut spike = vec![Scalar::ZERO; n];
    spike[0] = Scalar::ONE;
    for x in [
        vec![Scalar::ZERO; n],
        vec![Scalar::ONE; n],
        spike,
        vec![-Scalar::ONE; n],
    ] {
        check(
            &gpu,
            &x,
            Direction::Forward,
            NttConfig::default(),
            "special",
        );
        check(
            &gpu,
            &x,
            Direction::Inverse,
            NttConfig::coset(),
            "special coset",
        );
    }
}

#[test]
fn gpu_h_step_matches_cpu() {
    let Some((ctx, gpu, mut rng)) = setup() else {
        return;
    };
    for log_n in [1u32, 2, 10, 16, 20] {
        let n = 1 << log_n;
        let a = random(n, &mut rng);
        let b = random(n, &mut rng);
        let c: Vec<Scalar> = a.par_iter().zip(&b).map(|(x, y)| *x * y).collect();
        let want = CpuNtt::new()
            .h_polynomial(a.clone(), b.clone(), c.clone())
            .unwrap();
        let got = gpu.h_polynomial(a.clone(), b.clone(), c.clone()).unwrap();
        assert_eq!(got, want, "h, 2^{log_n}");

        // From pinned host memory, with the uploads overlapped, in fresh buffers.
        let pin = |v: &[Scalar]| PinnedBuffer::from_slice(&ctx, cast::scalars_as_fr(v)).unwrap();
        let mut fresh = gpu.h_step_buffers(n, HVectors::Four).unwrap();
        let [pa, _, _] = gpu
            .h_step_pinned_into(&mut fresh, pin(&a), pin(&b), pin(&c))
            .unwrap();
        let h = fresh.into_h();
        gpu.synchronize().unwrap();
        let h: Vec<Scalar> = h.to_vec().unwrap().into_iter().map(Into::into).collect();
        assert_eq!(&h[..n - 1], &want[..], "pinned h, 2^{log_n}");
        assert!(
            bool::from(h[n - 1].is_zero()),
            "the top coefficient of h is zero"
        );
        assert_eq!(
            &pa[..],
            cast::scalars_as_fr(&a),
            "the host buffer comes back intact"
        );

        // Any c, a·b - c divisible or not: the same n - 1 values as the CPU.
        let c2 = random(n, &mut rng);
        let want2 = CpuNtt::new()
            .h_polynomial(a.clone(), b.clone(), c2.clone())
            .unwrap();
        let got = gpu.h_polynomial(a.clone(), b.clone(), c2.clone()).unwrap();
        assert_eq!(got, want2, "h of a random c, 2^{log_n}");

        // Two steps in one set of buffers, kept by the caller.
        let mut bufs = gpu.h_step_buffers(n, HVectors::Four).unwrap();
        for (c, want, what) in [(&c2, &want2, "random c"), (&c, &want, "c = a·b")] {
            let hosts = gpu
                .h_step_pinned_into(&mut bufs, pin(&a), pin(&b), pin(c))
                .unwrap();
            assert_eq!(&hosts[2][..], cast::scalars_as_fr(c));
            let h: Vec<Scalar> = bufs
                .h()
                .to_vec()
                .unwrap()
                .into_iter()
                .map(Into::into)
                .collect();
            assert_eq!(&h[..n - 1], &want[..], "reused buffers, {what}, 2^{log_n}");
        }
        // Kept buffers, inputs copied in by the caller: four vectors, then three (c from
        // pinned memory), each used for two steps.
        let mut four = gpu.h_step_buffers(n, HVectors::Four).unwrap();
        let mut three = gpu.h_step_buffers(n, HVectors::Three).unwrap();
        for (c, want, what) in [(&c2, &want2, "random c"), (&c, &want, "c = a·b")] {
            let inputs = four.inputs_mut();
            inputs.a.copy_from_host(cast::scalars_as_fr(&a)).unwrap();
            inputs.b.copy_from_host(cast::scalars_as_fr(&b)).unwrap();
            let dc = inputs.c.unwrap();
            dc.copy_from_host(cast::scalars_as_fr(c)).unwrap();
            ctx.synchronize().unwrap();
            gpu.h_step_in(&mut four).unwrap();
            let inputs = three.inputs_mut();
            assert!(inputs.c.is_none());
            inputs.a.copy_from_host(cast::scalars_as_fr(&a)).unwrap();
            inputs.b.copy_from_host(cast::scalars_as_fr(&b)).unwrap();
            ctx.synchronize().unwrap();
            let host_c = pin(c);
            gpu.h_step_three_in(&mut three, Pinned::new(&host_c))
                .unwrap();
            assert_eq!(&host_c[..], cast::scalars_as_fr(c), "c is left as it was");
            for (bufs, kind) in [(&four, "four"), (&three, "three")] {
                let h: Vec<Scalar> = bufs
                    .h()
                    .to_vec()
                    .unwrap()
                    .into_iter()
                    .map(Into::into)
                    .collect();
                assert_eq!(
                    &h[..n - 1],
                    &want[..],
                    "kept {kind} vectors, {what}, 2^{log_n}"
                );
            }
        }
        assert!(matches!(
            gpu.h_step_in(&mut three),
            Err(NttError::NoDeviceC)
        ));
        // Inputs of another length than the buffers: an error naming both.
        let long = random(2 * n, &mut rng);
        let err = gpu
            .h_step_pinned_into(&mut bufs, pin(&long), pin(&long), pin(&long))
            .unwrap_err();
        assert!(
            matches!(err, NttError::BatchLengths { first, other } if first == n && other == 2 * n),
            "{err}"
        );
    }
}

#[test]
fn gpu_bad_input_is_an_error() {
    let Some((ctx, gpu, _)) = setup() else { return };
    let mut v = vec![Scalar::ONE; 24];
    assert!(matches!(
        gpu.transform(&mut v, Direction::Forward, &NttConfig::default()),
        Err(NttError::NotPowerOfTwo { len: 24 })
    ));
    let mut data = DeviceBuffer::<Fr>::alloc(&ctx, 1024).unwrap();
    let mut scratch = DeviceBuffer::<Fr>::alloc(&ctx, 512).unwrap();
    let err = gpu
        .transform_device(
            &mut data,
            &mut scratch,
            Direction::Forward,
            &NttConfig::default(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            NttError::BatchLengths {
                first: 1024,
                other: 512
            }
        ),
        "{err}"
    );
    // H step buffers of a length that is no domain's, and a three-vector step with a c of
    // another length: errors naming the lengths.
    let err = gpu.h_step_buffers(1000, HVectors::Four).unwrap_err();
    assert!(
        matches!(err, NttError::NotPowerOfTwo { len: 1000 }),
        "{err}"
    );
    let mut three = gpu.h_step_buffers(1024, HVectors::Three).unwrap();
    let c = PinnedBuffer::<Fr>::new(&ctx, 2048).unwrap();
    let err = gpu
        .h_step_three_in(&mut three, Pinned::new(&c))
        .unwrap_err();
    assert!(
        matches!(
            err,
            NttError::BatchLengths {
                first: 1024,
                other: 2048
            }
        ),
        "{err}"
    );
    // More than the device holds: an error naming needed and free bytes.
    let total = ctx.mem_info().unwrap().total;
    let huge = total / std::mem::size_of::<Fr>() + 1;
    let err = DeviceBuffer::<Fr>::alloc(&ctx, huge)
        .map_err(NttError::from)
        .unwrap_err();
    assert!(
        matches!(err, NttError::OutOfDeviceMemory { needed, free } if needed > free),
        "{err}"
    );
    // A scaling fused into a pass other than the first (input) or the last (output).
    let k = NttKernels::load(&ctx).unwrap();
    let s = zkpipe_cuda::Stream::new(&ctx).unwrap();
    let w = PowerTables {
        lo: DeviceBuffer::alloc(&ctx, 32).unwrap(),
        hi: DeviceBuffer::alloc(&ctx, 32).unwrap(),
        lo_bits: 5,
        log_n: 10,
        full: None,
    };
    let x = DeviceBuffer::<Fr>::alloc(&ctx, 1024).unwrap();
    let mut y = DeviceBuffer::<Fr>::alloc(&ctx, 1024).unwrap();
    for (lgp, at, what) in [
        (5, ScaleAt::Input(&w), "input scaling"),
        (0, ScaleAt::Output(&w), "output scaling"),
    ] {
        let err = k
            .pass(&s, &x, &mut y, &w, shape(10, lgp, 5), &Fused::scaled(at))
            .unwrap_err();
        assert!(
            matches!(err, NttError::ScalePlacement { what: wh, lgp: l, deg: 5, log_n: 10 } if wh == what && l == lgp),
            "{err}"
        );
    }
    // The vectors likewise, and a vector shorter than the transform.
    let v = DeviceBuffer::<Fr>::alloc(&ctx, 1024).unwrap();
    let short = DeviceBuffer::<Fr>::alloc(&ctx, 1000).unwrap();
    let times = |v| Fused {
        input_times: Some(v),
        ..Fused::default()
    };
    let minus = |v| Fused {
        output_minus: Some(v),
        ..Fused::default()
    };
    for (lgp, f, what) in [
        (5, times(&v), "input product"),
        (0, minus(&v), "output subtraction"),
    ] {
        let err = k
            .pass(&s, &x, &mut y, &w, shape(10, lgp, 5), &f)
            .unwrap_err();
        assert!(
            matches!(err, NttError::ScalePlacement { what: wh, lgp: l, deg: 5, log_n: 10 } if wh == what && l == lgp),
            "{err}"
        );
    }
    for f in [times(&short), minus(&short)] {
        let lgp = if f.input_times.is_some() { 0 } else { 5 };
        let err = k
            .pass(&s, &x, &mut y, &w, shape(10, lgp, 5), &f)
            .unwrap_err();
        assert!(
            matches!(
                err,
                NttError::BufferTooSmall {
                    len: 1000,
                    needed: 1024
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn gpu_batch_from_pinned_memory_matches_cpu() {
    let Some((ctx, gpu, mut rng)) = setup() else {
        return;
    };
    let n = 1 << 16;
    let vectors: Vec<Vec<Scalar>> = (0..5).map(|_| random(n, &mut rng)).collect();
    let pinned: Vec<PinnedBuffer<Fr>> = vectors
        .iter()
        .map(|v| PinnedBuffer::from_slice(&ctx, cast::scalars_as_fr(v)).unwrap())
        .collect();
    for (dir, cfg) in [
        (Direction::Forward, NttConfig::default()),
        (Direction::Inverse, NttConfig::coset()),
    ] {
        let out = gpu
            .transform_batch_pinned(
                pinned
                    .iter()
                    .map(|p| PinnedBuffer::from_slice(&ctx, p).unwrap())
                    .collect(),
                dir,
                &cfg,
            )
            .unwrap();
        assert_eq!(out.len(), 5);
        for (got, v) in out.iter().zip(&vectors) {
            let mut want = v.clone();
            CpuNtt::new().transform(&mut want, dir, &cfg).unwrap();
            assert_eq!(&got[..], cast::scalars_as_fr(&want));
        }
    }
    let mixed = vec![
        PinnedBuffer::<Fr>::new(&ctx, 8).unwrap(),
        PinnedBuffer::<Fr>::new(&ctx, 16).unwrap(),
    ];
    let err = gpu
        .transform_batch_pinned(mixed, Direction::Forward, &NttConfig::default())
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
}

#[test]
fn first_pass_in_column_blocks_equals_the_whole_pass() {
    let Some((ctx, _, mut rng)) = setup() else {
        return;
    };
    let k = NttKernels::load(&ctx).unwrap();
    let s = zkpipe_cuda::Stream::new(&ctx).unwrap();
    let (log_n, deg) = (16u32, 8u32);
    let n = 1usize << log_n;
    let up = |v: &[Scalar]| DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(v)).unwrap();
    let w = PowerTables {
        lo: up(&random(256, &mut rng)),
        hi: up(&random(256, &mut rng)),
        lo_bits: 8,
        log_n,
        full: None,
    };
    let x = up(&random(n, &mut rng));
    let mut whole = DeviceBuffer::<Fr>::alloc(&ctx, n).unwrap();
    k.pass(
        &s,
        &x,
        &mut whole,
        &w,
        PassShape::first(log_n, deg),
        &Fused::default(),
    )
    .unwrap();
    // The 256 columns in uneven blocks, out of order.
    let mut parts = DeviceBuffer::<Fr>::alloc(&ctx, n).unwrap();
    for (col, cols) in [(101, 155), (0, 100), (100, 1)] {
        k.first_pass_columns(
            &s,
            &x,
            &mut parts,
            &w,
            PassShape::first(log_n, deg),
            col..col + cols,
        )
        .unwrap();
    }
    s.synchronize().unwrap();
    let (parts, whole) = (parts.to_vec().unwrap(), whole.to_vec().unwrap());
    let bad = parts.iter().zip(&whole).filter(|(a, b)| a != b).count();
    assert_eq!(bad, 0, "{bad} of {n} elements differ");
    // Columns past the rows: an error naming the numbers.
    let mut y = DeviceBuffer::<Fr>::alloc(&ctx, n).unwrap();
    let err = k
        .first_pass_columns(&s, &x, &mut y, &w, PassShape::first(log_n, deg), 200..257)
        .unwrap_err();
    assert!(
        matches!(
            err,
            NttError::BufferTooSmall {
                len: 256,
                needed: 257
            }
        ),
        "{err}"
    ); // Only the first pass runs by columns.
    let err = k
        .first_pass_columns(&s, &x, &mut y, &w, shape(log_n, deg, deg), 0..1)
        .unwrap_err();
    assert!(
        matches!(err, NttError::NotFirstPass { lgp } if lgp == deg),
        "{err}"
    );
}
