//! The device evaluation against the host's, on random recordings and edge rows; a witness
//! of the wrong length is an error before any launch.

mod common;

use blstrs::Scalar;
use common::{random_with, witness};
use ff::Field;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{DeviceBuffer, Stream};
use zkpipe_field::{cast, Fr};
use zkpipe_r1cs::{
    Assignment, CircuitId, CudaEvaluator, DeviceRecording, DeviceZ, Evaluations, Recording,
    RecordingBuilder, RecordingError, Variable,
};

fn host(rec: &Recording, inputs: &[Scalar], aux: &[Fr]) -> [Vec<Fr>; 3] {
    let n = rec.shape().constraints;
    let mut out = [
        vec![Fr::default(); n],
        vec![Fr::default(); n],
        vec![Fr::default(); n],
    ];
    let [a, b, c] = &mut out;
    rec.evaluate(Assignment { inputs, aux }, Evaluations { a, b, c })
        .unwrap();
    out
}

#[test]
fn the_device_evaluates_as_the_host_does() {
    let Some(ctx) = gpu_context() else { return };
    let stream = Stream::new(&ctx).unwrap();
    let gpu = CudaEvaluator::new(&ctx).unwrap();
    // Rows from none to 2^16, few variables (repeated columns) and many (spread columns).
    for (n, inputs, aux, seed) in [(1, 1, 1, 1), (1000, 3, 20, 2), (1 << 16, 40, 1 << 16, 3)] {
        let t = random_with(n, inputs, aux, seed);
        let (zi, za) = witness(inputs, aux, seed);
        let want = host(&t.rec, &zi, &za);
        let dev = DeviceRecording::upload(&ctx, &t.rec).unwrap();
        let d_inputs = DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&zi)).unwrap();
        let d_aux = DeviceBuffer::from_host(&ctx, &za).unwrap();
        let z = DeviceZ::Parts {
            inputs: &d_inputs,
            aux: &d_aux,
        };
        let mut out: Vec<DeviceBuffer<Fr>> = (0..3)
            .map(|_| DeviceBuffer::alloc(&ctx, n).unwrap())
            .collect();
        let [a, b, c] = &mut out[..] else {
            unreachable!()
        };
        gpu.evaluate(&stream, &dev, z, [a, b, c]).unwrap();
        stream.synchronize().unwrap();
        for (m, (d, w)) in out.iter().zip(&want).enumerate() {
            let got = d.to_vec().unwrap();
            let first = got.iter().zip(w).position(|(g, w)| g != w);
            assert_eq!(first, None, "matrix {m}, {n} rows: first row that differs");
        }
    }
}

#[test]
fn edge_rows_and_wrong_lengths_on_the_device() {
    let Some(ctx) = gpu_context() else { return };
    let stream = Stream::new(&ctx).unwrap();
    let gpu = CudaEvaluator::new(&ctx).unwrap();
    let mut b = RecordingBuilder::new();
    let one = Variable::Input(b.alloc_input());
    let x = Variable::Aux(b.alloc_aux());
    let y = Variable::Aux(b.alloc_aux());
    let big = -Scalar::from(7u64).pow_vartime([40]);
    // An empty row; ±1 only; a large coefficient; terms that cancel; the constant alone.
    b.enforce([], [], []).unwrap();
    b.enforce(
        [(x, Scalar::ONE), (y, -Scalar::ONE)],
        [(one, -Scalar::ONE)],
        [(y, Scalar::ONE)],
    )
    .unwrap();
    b.enforce(
        [(x, big)],
        [(y, big), (y, -big)],
        [(one, big), (x, Scalar::from(3u64))],
    )
    .unwrap();
    b.enforce([(one, Scalar::from(5u64))], [(one, Scalar::ONE)], [])
        .unwrap();
    let rec = b.finish(CircuitId("edges".into())).unwrap();
    let zi = [Scalar::ONE];
    let za = [Fr::from(Scalar::from(11u64)), Fr::from(-Scalar::from(4u64))];
    let want = host(&rec, &zi, &za);
    let dev = DeviceRecording::upload(&ctx, &rec).unwrap();
    let d_inputs = DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&zi)).unwrap();
    let d_aux = DeviceBuffer::from_host(&ctx, &za).unwrap();
    let z = DeviceZ::Parts {
        inputs: &d_inputs,
        aux: &d_aux,
    };
    let mut outs: Vec<DeviceBuffer<Fr>> = (0..3)
        .map(|_| DeviceBuffer::alloc(&ctx, 4).unwrap())
        .collect();
    let [a, bb, c] = &mut outs[..] else {
        unreachable!()
    };
    gpu.evaluate(&stream, &dev, z, [a, bb, c]).unwrap();
    stream.synchronize().unwrap();
    for (m, (d, w)) in outs.iter().zip(&want).enumerate() {
        assert_eq!(&d.to_vec().unwrap(), w, "matrix {m}");
    }
    assert_eq!(
        Scalar::from(want[0][0]),
        Scalar::ZERO,
        "the empty row is zero"
    );

    // z of the wrong length, and an output of the wrong length: errors, nothing launched.
    let short = DeviceBuffer::<Fr>::alloc(&ctx, 1).unwrap();
    let bad = DeviceZ::Parts {
        inputs: &d_inputs,
        aux: &short,
    };
    let err = gpu
        .evaluate_part(&stream, &dev, zkpipe_r1cs::Part::A, bad, &mut outs[0])
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                what: "aux variables",
                expected: 2,
                got: 1
            }
        ),
        "{err}"
    );
    let mut wrong = DeviceBuffer::<Fr>::alloc(&ctx, 5).unwrap();
    let err = gpu
        .evaluate_part(&stream, &dev, zkpipe_r1cs::Part::B, z, &mut wrong)
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                what: "evaluations",
                expected: 4,
                got: 5
            }
        ),
        "{err}"
    );
}

/// z of `n` variables: zeros, ones and random values in runs that cross bitmap words.
fn mixed_z(n: usize, seed: u64) -> Vec<Scalar> {
    let (_, rand) = witness(0, n, seed);
    (0..n)
        .map(|i| match (i / 7) % 3 {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            _ => Scalar::from(rand[i]),
        })
        .collect()
}

#[test]
fn z_expanded_from_its_split_form_is_z_and_evaluates_as_its_parts() {
    let Some(ctx) = gpu_context() else { return };
    let stream = Stream::new(&ctx).unwrap();
    let gpu = CudaEvaluator::new(&ctx).unwrap();
    for (n, inputs, seed) in [(1, 1, 1), (33, 2, 2), (1000, 3, 3), (70_001, 5, 4)] {
        let z = mixed_z(n, seed);
        let split = zkpipe_msm::SplitScalars::of(&z).unwrap();
        let ones = DeviceBuffer::from_host(&ctx, split.ones()).unwrap();
        let index = DeviceBuffer::from_host(&ctx, split.tail_index()).unwrap();
        let tail = DeviceBuffer::from_host(&ctx, split.tail()).unwrap();
        let mut dz = DeviceBuffer::<Fr>::alloc(&ctx, n).unwrap();
        let parts = zkpipe_r1cs::DeviceSplitZ {
            ones: &ones,
            tail_index: &index,
            tail: &tail,
        };
        gpu.expand_split(&stream, parts, &mut dz).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(dz.to_vec().unwrap(), cast::scalars_as_fr(&z), "z of {n}");

        // The recording evaluated on the whole z equals the host's on its parts.
        if n <= inputs {
            continue;
        }
        let t = random_with(300, inputs, n - inputs, seed);
        let (zi, za) = z.split_at(inputs);
        let za: Vec<Fr> = cast::scalars_as_fr(za).to_vec();
        let want = host(&t.rec, zi, &za);
        let dev = DeviceRecording::upload(&ctx, &t.rec).unwrap();
        let mut outs: Vec<DeviceBuffer<Fr>> = (0..3)
            .map(|_| DeviceBuffer::alloc(&ctx, 300).unwrap())
            .collect();
        let [a, b, c] = &mut outs[..] else {
            unreachable!()
        };
        gpu.evaluate(&stream, &dev, DeviceZ::Whole(&dz), [a, b, c])
            .unwrap();
        stream.synchronize().unwrap();
        for (m, (d, w)) in outs.iter().zip(&want).enumerate() {
            assert_eq!(&d.to_vec().unwrap(), w, "matrix {m}, z of {n}");
        }
    }
    // A bitmap of the wrong length is an error before any launch.
    let ones = DeviceBuffer::<u32>::alloc(&ctx, 1).unwrap();
    let none = DeviceBuffer::<u32>::alloc(&ctx, 0).unwrap();
    let no_tail = DeviceBuffer::<Fr>::alloc(&ctx, 0).unwrap();
    let mut z = DeviceBuffer::<Fr>::alloc(&ctx, 64).unwrap();
    let split = zkpipe_r1cs::DeviceSplitZ {
        ones: &ones,
        tail_index: &none,
        tail: &no_tail,
    };
    let err = gpu.expand_split(&stream, split, &mut z).unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                what: "bitmap words",
                expected: 2,
                got: 1
            }
        ),
        "{err}"
    );
}
