//! The recorded path against full synthesis: for every circuit of the suite and for edge
//! cases, the witness from a recording (a, b, c, inputs, aux and densities) equals
//! `synthesize`'s, and so do the proof bytes with the same r and s; a recording is refused for
//! a circuit of another shape, and survives a trip through a file.

mod common;

use std::sync::Arc;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use common::{cube, params, random_r1cs, rs, sha, Case};
use ff::Field;
use zkpipe_bellperson::{
    proving_key_unchecked, record, synthesize, synthesize_recorded, CircuitId, RecordedError,
};
use zkpipe_pipeline::{Backend, Config, Engine, Randomness, Witness};
use zkpipe_r1cs::RecordingError;

fn id(name: &str) -> CircuitId {
    CircuitId(name.to_string())
}

/// Every part of two witnesses equal: a recorded witness's a, b and c evaluated on the host
/// from its recording.
fn assert_same(got: &Witness, want: &Witness, what: &str) {
    let got = &got.clone().evaluated().unwrap();
    assert!(got.recording.is_none(), "{what}: evaluated");
    assert_eq!(got.a.to_vec(), want.a.to_vec(), "{what}: a");
    assert_eq!(got.b.to_vec(), want.b.to_vec(), "{what}: b");
    assert_eq!(got.c.to_vec(), want.c.to_vec(), "{what}: c");
    assert_eq!(got.input, want.input, "{what}: inputs");
    assert_eq!(got.aux.to_vec(), want.aux.to_vec(), "{what}: aux");
    assert_eq!(
        got.a_aux_density, want.a_aux_density,
        "{what}: A's aux density"
    );
    assert_eq!(
        got.b_input_density, want.b_input_density,
        "{what}: B's input density"
    );
    assert_eq!(
        got.b_aux_density, want.b_aux_density,
        "{what}: B's aux density"
    );
}

/// Records `circuit` (from its setup shape, values absent), then checks the recorded
/// witness against full synthesis.
fn check<C: Circuit<Scalar> + Clone>(setup: C, circuit: C, what: &str) {
    let rec = Arc::new(record(setup, id(what)).unwrap());
    let want = synthesize(circuit.clone()).unwrap();
    let got = synthesize_recorded(circuit, &rec, Default::default()).unwrap();
    assert_eq!(rec.shape().constraints, want.a.len(), "{what}: constraints");
    assert_same(&got, &want, what);
}

#[test]
fn the_suites_circuits_give_the_witness_of_full_synthesis() {
    let c = cube(3);
    check(c.setup, c.circuit, "cube");
    for blocks in [1, 2] {
        let s = sha(blocks, 7);
        check(s.setup, s.circuit, "sha256");
    }
    for (n, seed) in [(1, 1), (10, 2), (1000, 3), (5000, 4)] {
        let r = random_r1cs(n, seed);
        check(r.setup, r.circuit, "random r1cs");
    }
}

/// Constraints at the edges: one with no terms at all, an input used only in C, a variable
/// whose terms cancel, coefficients of every size, a constant-only row.
#[derive(Debug, Clone, Copy)]
struct Edges {
    x: Option<Scalar>,
}

impl Circuit<Scalar> for Edges {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = self.x;
        let val = |f: fn(Scalar) -> Scalar| x_val.map(f).ok_or(SynthesisError::AssignmentMissing);
        let x = cs.alloc(|| "x", || val(|x| x))?;
        let big = -Scalar::from(12345u64).square().square();
        let y = cs.alloc(|| "y", || val(|x| x * x))?;
        let only_c = cs.alloc_input(|| "only in C", || val(|x| x * x))?;
        // 0 · 0 = 0: no terms anywhere.
        cs.enforce(|| "empty", |lc| lc, |lc| lc, |lc| lc);
        // x · x = y, and the input appears only in C: x · x = only_c.
        cs.enforce(|| "square", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        cs.enforce(|| "input in C", |lc| lc + x, |lc| lc + x, |lc| lc + only_c);
        // (x + y - y + big·1 - big·1) · 1 = x: terms that cancel are not there.
        cs.enforce(
            || "cancel",
            |lc| lc + x + y - y + (big, CS::one()) - (big, CS::one()),
            |lc| lc + CS::one(),
            |lc| lc + x,
        );
        // Coefficients 2, -1, a large one and its negation in one row, repeated terms added.
        let two = Scalar::from(2u64);
        cs.enforce(
            || "sizes",
            |lc| lc + (two, x) + (big, y) - (big, y) + (Scalar::ONE, x) - (Scalar::ONE, x),
            |lc| lc + (big, CS::one()),
            |lc| lc + (two * big, x),
        );
        Ok(())
    }
}

#[test]
fn edge_constraints_give_the_witness_of_full_synthesis() {
    let x = Scalar::from(9u64);
    check(Edges { x: None }, Edges { x: Some(x) }, "edges");
    let rec = Arc::new(record(Edges { x: None }, id("edges")).unwrap());
    let [a, b, c] = rec.matrices();
    // The empty row and the cancelled terms are not stored; the input is in C only.
    assert_eq!(
        a.row(0).columns.len() + b.row(0).columns.len() + c.row(0).columns.len(),
        0
    );
    assert_eq!(a.row(3).columns.len(), 1, "x alone in the cancelling row");
    assert!(
        !rec.densities().b_input.is_selected(1),
        "the input occurs in C only"
    );
}

/// The bytes of `w`'s proof under `key` with fixed r and s.
fn proof_bytes(
    engine: &Engine,
    key: &Arc<zkpipe_pipeline::ProvingKey>,
    w: Witness,
    r: Scalar,
    s: Scalar,
) -> Vec<u8> {
    engine
        .submit(key, w, Randomness::Fixed { r, s })
        .unwrap()
        .wait()
        .unwrap()
        .to_bytes()
        .to_vec()
}

#[test]
fn proofs_from_the_recorded_path_are_byte_identical() {
    let engine = Engine::start(Config::default().with_backend(Backend::Cpu)).unwrap();
    let cases: Vec<Case<_>> = vec![random_r1cs(300, 9), random_r1cs(2000, 10)];
    for (i, case) in cases.into_iter().enumerate() {
        let key = Arc::new(proving_key_unchecked(&params(case.setup, 20 + i as u64)).unwrap());
        let (r, s) = rs(30 + i as u64);
        let rec = Arc::new(record(case.setup, id("random r1cs")).unwrap());
        let full = synthesize(case.circuit).unwrap();
        let recorded = synthesize_recorded(case.circuit, &rec, Default::default()).unwrap();
        let prove = |w| proof_bytes(&engine, &key, w, r, s);
        assert_eq!(prove(recorded), prove(full), "case {i}: proof bytes");
    }
    let sha = sha(1, 3);
    let key = Arc::new(proving_key_unchecked(&params(sha.setup.clone(), 40)).unwrap());
    let (r, s) = rs(41);
    let rec = Arc::new(record(sha.setup, id("sha256")).unwrap());
    let full = synthesize(sha.circuit.clone()).unwrap();
    let recorded = synthesize_recorded(sha.circuit, &rec, Default::default()).unwrap();
    let proof = |w| proof_bytes(&engine, &key, w, r, s);
    assert_eq!(proof(recorded), proof(full), "sha256: proof bytes");
}

#[test]
fn a_circuit_of_another_shape_is_refused_with_the_numbers() {
    let rec = Arc::new(record(random_r1cs(100, 1).setup, id("r1cs-100")).unwrap());
    let other = random_r1cs(101, 1).circuit;
    let err = synthesize_recorded(other, &rec, Default::default()).unwrap_err();
    match err {
        RecordedError::Recording(RecordingError::ShapeMismatch {
            what,
            expected,
            got,
            ..
        }) => {
            assert_eq!(what, "aux variables");
            assert_eq!((expected, got), (104, 105));
        }
        e => panic!("expected a shape mismatch, got {e}"),
    }
    // A circuit that fails its own synthesis (a missing value) keeps that error.
    let c = cube(2);
    let rec = Arc::new(record(c.setup, id("cube")).unwrap());
    let err = synthesize_recorded(c.setup, &rec, Default::default()).unwrap_err();
    assert!(
        matches!(
            err,
            RecordedError::Synthesis(SynthesisError::AssignmentMissing)
        ),
        "{err}"
    );
}

#[test]
fn a_recording_read_back_from_a_file_gives_the_same_witness() {
    let dir = std::env::temp_dir().join(format!("zkpipe-recorded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sha.r1cs");
    let s = sha(1, 5);
    let rec = Arc::new(record(s.setup.clone(), id("sha256-1")).unwrap());
    zkpipe_r1cs::file::save(&rec, &path).unwrap();
    let back = Arc::new(zkpipe_r1cs::file::load(&path, &id("sha256-1")).unwrap());
    let want = synthesize(s.circuit.clone()).unwrap();
    let got = synthesize_recorded(s.circuit, &back, Default::default()).unwrap();
    assert_same(&got, &want, "sha256 from a file");
    let err = zkpipe_r1cs::file::load(&path, &id("sha256-2")).unwrap_err();
    assert!(matches!(err, RecordingError::OtherCircuit { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A prologue (x, an input) and parts that each allocate x·(k + 2) and make it an input: a
/// circuit of independent parts of one shape, as a PoRep partition's challenges are.
#[derive(Debug, Clone)]
struct Parted {
    x: Option<Scalar>,
    parts: Vec<u64>,
}

impl Circuit<Scalar> for Parted {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = self.x;
        let x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        let x2 = cs.alloc(
            || "x2",
            || {
                x_val
                    .map(|x| x.square())
                    .ok_or(SynthesisError::AssignmentMissing)
            },
        )?;
        cs.enforce(|| "x2", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
        for k in self.parts {
            let m = Scalar::from(k + 2);
            let value = || {
                x_val
                    .map(|x| x * m)
                    .ok_or(SynthesisError::AssignmentMissing)
            };
            let y = cs.alloc(|| "y", value)?;
            let input = cs.alloc_input(|| "y input", value)?;
            cs.enforce(|| "y", |lc| lc + (m, x), |lc| lc + CS::one(), |lc| lc + y);
            cs.enforce(
                || "input",
                |lc| lc + y,
                |lc| lc + CS::one(),
                |lc| lc + input,
            );
        }
        Ok(())
    }
}

#[test]
fn a_circuit_of_independent_parts_is_synthesized_part_by_part_into_the_same_witness() {
    use zkpipe_bellperson::synthesize_recorded_parts;
    let x = Some(Scalar::from(7u64));
    let whole = |parts: Vec<u64>| Parted { x, parts };
    for n in [1u64, 2, 5] {
        let blank = Parted {
            x: None,
            parts: (0..n).collect(),
        };
        let rec = Arc::new(record(blank, id("parted")).unwrap());
        let want = synthesize(whole((0..n).collect())).unwrap();
        let subs = (0..n).map(|k| whole(vec![k])).collect();
        let got = synthesize_recorded_parts(subs, &rec, Default::default()).unwrap();
        assert_same(&got, &want, &format!("{n} parts"));
    }
    // Parts that do not add up to the recording, and prologues that differ: refused.
    let rec = Arc::new(
        record(
            Parted {
                x: None,
                parts: vec![0, 1, 2],
            },
            id("parted"),
        )
        .unwrap(),
    );
    for n in [2, 4] {
        let subs = (0..n).map(|k| whole(vec![k])).collect();
        let err = synthesize_recorded_parts(subs, &rec, Default::default()).unwrap_err();
        assert!(
            matches!(
                err,
                RecordedError::Recording(RecordingError::ShapeMismatch { .. })
            ),
            "{n} parts: {err}"
        );
    }
    let other = Parted {
        x: Some(Scalar::from(8u64)),
        parts: vec![1],
    };
    let subs = vec![whole(vec![0]), other, whole(vec![2])];
    let err = synthesize_recorded_parts(subs, &rec, Default::default()).unwrap_err();
    assert!(err.to_string().contains("prologue"), "{err}");
}
