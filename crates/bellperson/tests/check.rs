//! The check every proof gets before the engine returns it: a bit flipped after the MSMs is
//! refused with `ProveError::ProofRejected`, never returned; with the check off the same fault
//! gives a proof that does not verify, so the check is what stops it. (Its own test binary:
//! the injected fault is process-wide.)

mod common;

use std::sync::Arc;

use common::{cube, params, rs};
use zkpipe_bellperson::{proving_key, synthesize};
use zkpipe_pipeline::{
    inject, verify, Backend, Config, Engine, PreparedVerifyingKey, ProofCheck, ProveError,
    Randomness,
};

#[test]
fn a_bit_flipped_after_the_msms_is_refused_not_returned() {
    let case = cube(3);
    let p = params(case.setup, 3);
    let key = Arc::new(proving_key(&p).unwrap());
    let (r, s) = rs(5);
    let prove = |engine: &Engine| {
        let w = synthesize(case.circuit).unwrap();
        engine
            .submit(&key, w, Randomness::Fixed { r, s })
            .unwrap()
            .wait_report()
    };

    let engine = Engine::start(Config::default().with_backend(Backend::Cpu)).unwrap();
    let (good, report) = prove(&engine).expect("an unfaulted proof passes its check");
    assert!(report.check_ms > 0.0, "the check ran");
    inject::corrupt_next_proofs(1);
    match prove(&engine) {
        Err(ProveError::ProofRejected { fault, .. }) => println!("refused: {fault}"),
        other => panic!("a corrupted proof must be refused, got {other:?}"),
    }
    assert_eq!(engine.stats().rejected, 1);
    let (again, _) = prove(&engine).expect("the next proof is whole again");
    assert_eq!(again, good);

    let unchecked = Engine::start(
        Config::default()
            .with_backend(Backend::Cpu)
            .with_proof_check(ProofCheck::Off),
    )
    .unwrap();
    inject::corrupt_next_proofs(1);
    let (bad, report) = prove(&unchecked).expect("unchecked, the proof comes back");
    assert_eq!(report.check_ms, 0.0);
    assert_ne!(bad, good);
    let pvk = PreparedVerifyingKey::new(key.vk()).unwrap();
    assert!(
        !verify(&pvk, &bad, &case.inputs).unwrap_or(false),
        "the corrupted proof does not verify"
    );
}
