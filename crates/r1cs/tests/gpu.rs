//! The device evaluation against the host's, on random recordings and edge rows; a witness
//! of the wrong length is an error before any launch.

mod common;

use blstrs::Scalar;
use common::{random_shaped, random_with, witness, Lengths};
use ff::Field;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{DeviceBuffer, Stream};
use zkpipe_field::{cast, Fr};
use zkpipe_r1cs::{
    Assignment, CircuitId, CudaEvaluator, DeviceRecording, DeviceSplitZ, DeviceTailLookup, DeviceZ,
    Evaluations, Part, Recording, RecordingBuilder, RecordingError, StreamedRecording, TailLookup,
    Variable,
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
    // Rows from none to 2^16, few variables (repeated columns) and many (spread columns);
    // short rows only, and long ones among them (alone in their warp, several in one, the
    // last rows of a partial warp).
    for (n, inputs, aux, lengths, seed) in [
        (1, 1, 1, Lengths::Short, 1),
        (1000, 3, 20, Lengths::Short, 2),
        (1 << 16, 40, 1 << 16, Lengths::Short, 3),
        (1, 1, 5, Lengths::WithLong, 4),
        (45, 2, 100, Lengths::WithLong, 5),
        (5000, 3, 20, Lengths::WithLong, 6),
        (20_011, 40, 1 << 16, Lengths::WithLong, 7),
    ] {
        let t = random_shaped(n, inputs, aux, lengths, seed);
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
        .evaluate_part(&stream, &dev, Part::A, bad, &mut outs[0])
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
    let mut short_out = DeviceBuffer::<Fr>::alloc(&ctx, 3).unwrap();
    let err = gpu
        .evaluate_part(&stream, &dev, Part::B, z, &mut short_out)
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                what: "evaluations",
                expected: 4,
                got: 3
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

/// Evaluates `rec` at the split z on the device: resident, and streamed in chunks of
/// `chunk` entries; both must equal `want`.
fn evaluate_split_both_ways(
    ctx: &std::sync::Arc<zkpipe_cuda::Context>,
    rec: &std::sync::Arc<Recording>,
    z: DeviceZ<'_>,
    chunk: usize,
    want: &[Vec<Fr>; 3],
) {
    let stream = Stream::new(ctx).unwrap();
    let gpu = CudaEvaluator::new(ctx).unwrap();
    let n = rec.shape().constraints;
    let dev = DeviceRecording::upload(ctx, rec).unwrap();
    let mut room = StreamedRecording::new(ctx, std::sync::Arc::clone(rec), chunk).unwrap();
    // Outputs longer than the constraints, holding garbage: padded with zeros.
    let pad = 37;
    let garbage = vec![Fr::from(Scalar::from(5u64)); n + pad];
    let mut want = want.clone();
    for w in &mut want {
        w.resize(n + pad, Fr::default());
    }
    for (m, part) in [Part::A, Part::B, Part::C].into_iter().enumerate() {
        let mut resident = DeviceBuffer::from_host(ctx, &garbage).unwrap();
        gpu.evaluate_part(&stream, &dev, part, z, &mut resident)
            .unwrap();
        let mut streamed = DeviceBuffer::from_host(ctx, &garbage).unwrap();
        gpu.evaluate_part_streamed(&stream, &mut room, part, z, &mut streamed)
            .unwrap();
        stream.synchronize().unwrap();
        let first = |d: &DeviceBuffer<Fr>| {
            let got = d.to_vec().unwrap();
            got.iter().zip(&want[m]).position(|(g, w)| g != w)
        };
        assert_eq!(
            first(&resident),
            None,
            "matrix {m} resident: first row that differs"
        );
        assert_eq!(
            first(&streamed),
            None,
            "matrix {m} in chunks of {chunk}: first row that differs"
        );
    }
}

#[test]
fn the_split_witness_evaluates_as_its_values_resident_and_streamed() {
    let Some(ctx) = gpu_context() else { return };
    // z of one variable, of a word and one, and across many words; chunks from the longest
    // row (1, then 1000 with long rows: that recording read mapped from a file) to more than
    // the matrix.
    for (n, inputs, rows, lengths, chunk, seed) in [
        (2, 1, 1, Lengths::Short, 1, 1),
        (33, 2, 300, Lengths::Short, 1, 2),
        (1000, 3, 300, Lengths::Short, 17, 3),
        (70_001, 5, 5000, Lengths::Short, 4096, 4),
        (70_001, 5, 5000, Lengths::Short, 1 << 20, 5),
        (70_001, 5, 5000, Lengths::WithLong, 1000, 6),
        (70_001, 5, 5000, Lengths::WithLong, 1 << 20, 7),
    ] {
        let z = mixed_z(n, seed);
        let split = zkpipe_msm::SplitScalars::of(&z).unwrap();
        let lookup = TailLookup::of(&split);
        let ones = DeviceBuffer::from_host(&ctx, split.ones()).unwrap();
        let tail = DeviceBuffer::from_host(&ctx, split.tail()).unwrap();
        let d_lookup = DeviceTailLookup::upload(&ctx, &lookup).unwrap();
        let dz = DeviceZ::Split(DeviceSplitZ::new(&ones, &d_lookup, &tail).unwrap());
        let t = random_shaped(rows, inputs, n - inputs, lengths, seed);
        let (zi, za) = z.split_at(inputs);
        let za: Vec<Fr> = cast::scalars_as_fr(za).to_vec();
        let want = host(&t.rec, zi, &za);
        let rec = match chunk {
            // Read back from a file: the matrices in the mapped file, streamed from it once it
            // is page-locked in place (read-only).
            1000 => {
                let path = std::env::temp_dir().join(format!(
                    "zkpipe-r1cs-gpu-{}-{seed}.r1cs",
                    std::process::id()
                ));
                zkpipe_r1cs::file::save(&t.rec, &path).unwrap();
                let mapped = zkpipe_r1cs::file::read(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
                assert!(mapped.is_mapped());
                assert!(mapped.pin(&ctx).unwrap() && mapped.is_pinned());
                std::sync::Arc::new(mapped)
            }
            _ => std::sync::Arc::new(t.rec),
        };
        if chunk == 4096 {
            // Streamed from page-locked arrays (locked once).
            assert!(rec.pin(&ctx).unwrap() && rec.is_pinned());
            assert!(!rec.pin(&ctx).unwrap());
        }
        evaluate_split_both_ways(&ctx, &rec, dz, chunk, &want);
    }
}

#[test]
fn split_parts_of_other_lengths_are_refused_before_any_launch() {
    let Some(ctx) = gpu_context() else { return };
    let z = mixed_z(64, 9);
    let split = zkpipe_msm::SplitScalars::of(&z).unwrap();
    let d_lookup = DeviceTailLookup::upload(&ctx, &TailLookup::of(&split)).unwrap();
    let tail = DeviceBuffer::from_host(&ctx, split.tail()).unwrap();
    let short_ones = DeviceBuffer::<u32>::alloc(&ctx, 1).unwrap();
    let err = DeviceSplitZ::new(&short_ones, &d_lookup, &tail).unwrap_err();
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
    let ones = DeviceBuffer::from_host(&ctx, split.ones()).unwrap();
    let short_tail = DeviceBuffer::<Fr>::alloc(&ctx, split.tail().len() - 1).unwrap();
    let err = DeviceSplitZ::new(&ones, &d_lookup, &short_tail).unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                what: "tail values",
                ..
            }
        ),
        "{err}"
    );
    // z of 64 variables against a recording of 65: refused with both numbers.
    let dz = DeviceZ::Split(DeviceSplitZ::new(&ones, &d_lookup, &tail).unwrap());
    let t = random_with(10, 2, 63, 9);
    let stream = Stream::new(&ctx).unwrap();
    let gpu = CudaEvaluator::new(&ctx).unwrap();
    let dev = DeviceRecording::upload(&ctx, &t.rec).unwrap();
    let mut out = DeviceBuffer::<Fr>::alloc(&ctx, 10).unwrap();
    let err = gpu
        .evaluate_part(&stream, &dev, Part::C, dz, &mut out)
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                what: "variables",
                expected: 65,
                got: 64
            }
        ),
        "{err}"
    );
}
