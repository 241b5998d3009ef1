//! No wrong proof leaves the engine: a bit flipped after the MSMs makes a proof that the
//! engine's check refuses; the partition is proved once more, and a second refusal is a typed
//! error, never bytes. (Its own test binary: the injected fault is process-wide.)

mod common;

use common::{engine, params_dir, prover, scratch};
use filecoin_proofs_api::post;
use zkpipe_filecoin::gen::{self, SectorData};
use zkpipe_filecoin::{FilecoinError, Request};
use zkpipe_pipeline::{inject, ProveError};

#[test]
fn a_corrupted_proof_is_proved_again_or_refused_never_returned() {
    params_dir();
    let dir = scratch("check");
    let sealed = gen::seal_sector(&dir, 2048, SectorData::Random).expect("seals");
    let request = gen::winning_post(&sealed).expect("vanilla proofs");
    let replicas = gen::public_replicas(&sealed, request.registered_proof);
    let req = Request::WinningPoSt(request.clone());
    let p = prover();
    let key = p.key(&req).expect("key");
    let engine = engine(&key);

    // One corrupted proof: refused by the check, proved again, and the second proof verifies.
    inject::corrupt_next_proofs(1);
    let out = p.prove(&engine, &req).expect("the retry proves");
    assert_eq!(inject::corruptions_left(), 0, "the fault was met");
    assert!(out.partitions[0].retried, "the partition was proved again");
    let ok =
        post::verify_winning_post(&request.randomness, &out.bytes, &replicas, sealed.prover_id)
            .expect("the verifier runs");
    assert!(ok, "the retried proof verifies");

    // Both attempts corrupted: a typed error naming the partition and the check.
    inject::corrupt_next_proofs(2);
    let e = p.prove(&engine, &req).unwrap_err();
    assert!(
        matches!(
            e,
            FilecoinError::Prove {
                partition: 0,
                source: ProveError::ProofRejected { .. }
            }
        ),
        "{e}"
    );
    assert_eq!(
        engine.stats().rejected,
        3,
        "three proofs refused, none returned"
    );
    let _ = std::fs::remove_dir_all(dir);
}
