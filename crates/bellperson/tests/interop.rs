//! On the CPU backend: circuits synthesized through bellperson's ConstraintSystem, proved by
//! the engine, verified by bellperson and by zkpipe, and equal to bellperson's own proofs
//! byte for byte with the same r and s.

mod common;
#[path = "interop/gpu.rs"]
mod gpu;

use std::sync::Arc;

use bellperson::groth16::{create_proof, prepare_verifying_key, verify_proof};
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use common::{cube, params, random_r1cs, rs, sha, Case};
use zkpipe_bellperson::{proving_key, proving_key_unchecked, synthesize, to_bellperson};
use zkpipe_pipeline::{
    verify, Backend, Config, Engine, PreparedVerifyingKey, ProveError, Randomness,
};

fn cpu_engine() -> Engine {
    Engine::start(Config::default().with_backend(Backend::Cpu)).unwrap()
}

fn check_case<C: Circuit<Scalar> + Clone + Send>(engine: &Engine, case: Case<C>, seed: u64) {
    let p = params(case.setup.clone(), seed);
    let key = Arc::new(proving_key(&p).unwrap());
    let (r, s) = rs(seed ^ 1);
    let w = synthesize(case.circuit.clone()).unwrap();
    let ours = engine
        .submit(&key, w, Randomness::Fixed { r, s })
        .unwrap()
        .wait()
        .unwrap();
    let theirs = create_proof::<Bls12, _, _>(case.circuit, &p, r, s).unwrap();
    let mut their_bytes = Vec::new();
    theirs.write(&mut their_bytes).unwrap();
    assert_eq!(
        ours.to_bytes().to_vec(),
        their_bytes,
        "{}: bytes differ",
        case.name
    );
    let pvk = prepare_verifying_key(&p.vk);
    assert!(
        verify_proof(&pvk, &to_bellperson(&ours), &case.inputs).unwrap(),
        "{}: bellperson rejects our proof",
        case.name
    );
    let ours_pvk = PreparedVerifyingKey::new(key.vk()).unwrap();
    assert!(
        verify(&ours_pvk, &ours, &case.inputs).unwrap(),
        "{}",
        case.name
    );
    // A wrong public input must fail.
    let mut wrong = case.inputs.clone();
    wrong[0] += Scalar::from(1u64);
    assert!(!verify(&ours_pvk, &ours, &wrong).unwrap(), "{}", case.name);
}

#[test]
fn cpu_proofs_equal_bellperson_and_verify() {
    let engine = cpu_engine();
    check_case(&engine, cube(3), 1);
    check_case(&engine, random_r1cs(700, 5), 2);
    check_case(&engine, sha(2, 7), 3);
    let stats = engine.shutdown();
    assert_eq!((stats.done, stats.failed), (3, 0));
}

#[test]
fn random_proofs_verify_and_differ() {
    let engine = cpu_engine();
    let case = cube(11);
    let p = params(case.setup, 9);
    let key = Arc::new(proving_key_unchecked(&p).unwrap());
    let handles = engine
        .submit_batch(
            &key,
            (0..4).map(|_| synthesize(case.circuit).unwrap()).collect(),
            Randomness::Random,
        )
        .unwrap();
    let proofs: Vec<_> = handles.into_iter().map(|h| h.wait().unwrap()).collect();
    let pvk = PreparedVerifyingKey::new(key.vk()).unwrap();
    for p in &proofs {
        assert!(verify(&pvk, p, &case.inputs).unwrap());
    }
    assert_ne!(proofs[0], proofs[1], "fresh r and s give different proofs");
}

#[test]
fn bad_input_is_an_error() {
    let engine = cpu_engine();
    let case = random_r1cs(100, 3);
    let p = params(case.setup, 4);
    let key = Arc::new(proving_key(&p).unwrap());
    // A witness with an aux variable missing.
    let mut w = synthesize(case.circuit).unwrap();
    w.aux.pop();
    let err = engine.submit(&key, w, Randomness::Random).unwrap_err();
    assert!(
        matches!(
            err,
            ProveError::Shape {
                what: "aux variables",
                ..
            }
        ),
        "{err}"
    );
    // A witness of another circuit (more constraints than the key's domain).
    let big = synthesize(random_r1cs(1000, 3).circuit).unwrap();
    let err = engine.submit(&key, big, Randomness::Random).unwrap_err();
    assert!(matches!(err, ProveError::Constraints { .. }), "{err}");
    assert!(err.to_string().contains("constraints"), "{err}");
    // After shutdown, nothing is accepted.
    engine.shutdown();
    let w = synthesize(case.circuit).unwrap();
    let err = engine.submit(&key, w, Randomness::Random).unwrap_err();
    assert!(matches!(err, ProveError::ShutDown), "{err}");
}

/// A circuit that enforces a constraint on a variable it never allocated (one made by another
/// constraint system).
#[derive(Clone)]
struct Foreign;

impl Circuit<Scalar> for Foreign {
    fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
        let stray = bellperson::Variable::new_unchecked(bellperson::Index::Aux(1000));
        cs.enforce(
            || "x * stray = x",
            |lc| lc + x,
            |lc| lc + stray,
            |lc| lc + x,
        );
        Ok(())
    }
}

#[test]
fn a_variable_of_another_constraint_system_is_an_error_not_a_panic() {
    match synthesize(Foreign) {
        Err(bellperson::SynthesisError::IncompatibleLengthVector(msg)) => {
            assert!(
                msg.contains("aux variable 1000") && msg.contains("allocated 1"),
                "{msg}"
            );
        }
        other => panic!("expected an error naming the variable, got {other:?}"),
    }
}
