//! Each Filecoin proof kind at 2 KiB, from inputs filecoin-proofs made: proved through the
//! engine, accepted by filecoin-proofs' own verifier, and equal byte for byte to bellperson's
//! `create_proof` on the same circuits with the same r and s. Bad inputs beside each.

mod common;

use blstrs::Scalar;
use common::{engine, fixed, params_dir, prover, scratch};
use filecoin_proofs_api::{post, seal, update, SectorId};
use zkpipe_filecoin::gen::{self, SectorData};
use zkpipe_filecoin::{
    FilecoinError, ParamsCache, PoRepC2, ProveOptions, Prover, Request, WindowPoSt,
};
use zkpipe_pipeline::{Randomness, Witness};

const KIB2: u64 = 2048;

/// Proves `request` through the engine and through bellperson; the bytes must be equal.
fn prove_both(request: &Request) -> Vec<u8> {
    let prover = prover();
    let key = prover.key(request).expect("the key loads");
    let engine = engine(&key);
    let out = prover.prove(&engine, request).expect("the engine proves");
    for p in &out.partitions {
        assert!(
            p.constraints > 0,
            "partition {} has constraints",
            p.partition
        );
        assert!(!p.retried, "no proof was refused by the check");
    }
    let (r, s) = fixed();
    let reference = prover
        .prove_with_bellperson(request, r, s)
        .expect("bellperson proves");
    assert_eq!(out.bytes.len(), 192 * out.partitions.len());
    assert_eq!(
        out.bytes, reference.bytes,
        "the proof equals bellperson's create_proof"
    );
    out.bytes
}

/// The first hash (an array of 32 byte values) under `v`, with one bit flipped.
fn flip_first_hash(v: &mut serde_json::Value) -> bool {
    match v {
        serde_json::Value::Array(a)
            if a.len() == 32 && a.iter().all(|x| x.as_u64().is_some_and(|b| b < 256)) =>
        {
            let b = a[3].as_u64().unwrap_or(0) ^ 1;
            a[3] = serde_json::Value::from(b);
            true
        }
        serde_json::Value::Array(a) => a.iter_mut().any(flip_first_hash),
        serde_json::Value::Object(o) => o.values_mut().any(flip_first_hash),
        _ => false,
    }
}

/// Partition 0's witness of `request`, exported with its circuit's files, proved from the
/// recording (as the daemon's generic kind proves it) with the same r and s: the same bytes as
/// the request's first partition proof. A partition the proof does not have is refused.
fn the_exported_witness_proves_the_same(request: &Request, proof: &[u8]) {
    let prover = prover();
    let exported = prover
        .partition_witness(request, 0)
        .expect("partition 0's witness");
    let key = prover.key(request).expect("the key");
    assert_eq!(exported.params, key.path);
    let recording = zkpipe_r1cs::file::read(&exported.recording).expect("the recording's file");
    let shape = recording.shape();
    assert_eq!(
        (shape.inputs, shape.aux),
        (exported.inputs.len() + 1, exported.aux.len())
    );
    let densities = recording.densities().clone();
    let witness = Witness {
        input: std::iter::once(Scalar::from(1u64))
            .chain(exported.inputs.iter().copied())
            .collect(),
        aux: exported.aux.clone().into(),
        a_aux_density: densities.a_aux,
        b_input_density: densities.b_input,
        b_aux_density: densities.b_aux,
        recording: Some(std::sync::Arc::new(recording)),
        ..Witness::default()
    };
    let (r, s) = fixed();
    let engine = engine(&key);
    let again = engine
        .submit(&key.key, witness, Randomness::Fixed { r, s })
        .and_then(|h| h.wait())
        .expect("the exported witness proves");
    assert_eq!(again.to_bytes().as_slice(), &proof[..192]);

    let e = prover.partition_witness(request, 1).unwrap_err();
    assert!(
        matches!(
            e,
            FilecoinError::Mismatch {
                what: "the partition to export",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn porep_c2_2kib_is_accepted_by_verify_seal_and_equals_bellperson() {
    params_dir();
    let dir = scratch("porep");
    let sealed = gen::seal_sector(&dir, KIB2, SectorData::Random).expect("seals");
    let inputs = gen::porep_c2(&sealed).expect("C1");
    let c1 = &inputs.request.c1;

    // The C1 output as Lotus and Curio store it, read back in both forms.
    let json = serde_json::to_vec(c1).expect("C1 to JSON");
    let api = PoRepC2::from_c1_json(&json, None, sealed.prover_id, sealed.sector_id)
        .expect("the API form");
    let mut raw: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
    let obj = raw.as_object_mut().expect("an object");
    obj.remove("registered_proof");
    let vanilla = obj["vanilla_proofs"]["StackedDrg2KiBV1"].take();
    obj.insert("vanilla_proofs".into(), vanilla);
    let raw_bytes = serde_json::to_vec(&raw).expect("raw form");
    let from_raw = PoRepC2::from_c1_json(
        &raw_bytes,
        Some(c1.registered_proof),
        sealed.prover_id,
        sealed.sector_id,
    )
    .expect("filecoin-proofs' own form, its registered proof given");
    assert_eq!(
        serde_json::to_string(&api.c1).unwrap(),
        serde_json::to_string(&from_raw.c1).unwrap(),
        "both forms read to the same C1 output"
    );
    let no_registered = PoRepC2::from_c1_json(&raw_bytes, None, sealed.prover_id, sealed.sector_id);
    assert!(
        matches!(no_registered, Err(FilecoinError::Mismatch { .. })),
        "{no_registered:?}"
    );

    let request = Request::PoRepC2(Box::new(api));
    let proof = prove_both(&request);
    assert_eq!(proof.len(), 192, "2 KiB PoRep has one partition");
    let ok = seal::verify_seal(
        c1.registered_proof,
        sealed.comm_r,
        sealed.comm_d,
        sealed.prover_id,
        SectorId::from(sealed.sector_id),
        sealed.ticket,
        inputs.seed,
        &proof,
    )
    .expect("verify_seal runs");
    assert!(ok, "filecoin-proofs' verify_seal accepts the proof");

    // Bad inputs: each a typed error, never a proof.
    let p = prover();
    let key = p.key(&request).expect("key");
    let engine = engine(&key);
    let truncated = PoRepC2::from_c1_json(
        &json[..json.len() / 2],
        None,
        sealed.prover_id,
        sealed.sector_id,
    );
    assert!(
        matches!(truncated, Err(FilecoinError::Json { .. })),
        "{truncated:?}"
    );

    let other_sector =
        PoRepC2::from_c1_json(&json, None, sealed.prover_id, sealed.sector_id + 1).unwrap();
    let e = p
        .prove(&engine, &Request::PoRepC2(Box::new(other_sector)))
        .unwrap_err();
    assert!(
        matches!(e, FilecoinError::Mismatch { .. }),
        "another sector id: {e}"
    );
    assert!(e.is_bad_input());

    let mut other_size: serde_json::Value = serde_json::from_slice(&json).unwrap();
    other_size["registered_proof"] = serde_json::json!("StackedDrg8MiBV1_1");
    let other_size = PoRepC2::from_c1_json(
        &serde_json::to_vec(&other_size).unwrap(),
        None,
        sealed.prover_id,
        sealed.sector_id,
    )
    .unwrap();
    let e = p
        .prove(&engine, &Request::PoRepC2(Box::new(other_size)))
        .unwrap_err();
    assert!(
        matches!(e, FilecoinError::Mismatch { .. }),
        "a C1 output of another sector size: {e}"
    );

    let mut flipped: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert!(
        flip_first_hash(&mut flipped["vanilla_proofs"]),
        "a hash to flip in the vanilla proofs"
    );
    let flipped = PoRepC2::from_c1_json(
        &serde_json::to_vec(&flipped).unwrap(),
        None,
        sealed.prover_id,
        sealed.sector_id,
    );
    match flipped {
        Err(e) => assert!(e.is_bad_input(), "{e}"),
        Ok(req) => {
            let e = p
                .prove(&engine, &Request::PoRepC2(Box::new(req)))
                .unwrap_err();
            println!("a flipped byte in a Merkle path: {e}");
            assert!(e.is_bad_input(), "{e}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn window_post_2kib_whole_and_one_partition_are_accepted_and_equal_bellperson() {
    params_dir();
    let dir = scratch("window");
    let sealed = gen::seal_sector(&dir, KIB2, SectorData::Random).expect("seals");
    let request = gen::window_post(&sealed).expect("vanilla proofs");
    let replicas = gen::public_replicas(&sealed, request.registered_proof);

    let whole = prove_both(&Request::WindowPoSt(request.clone()));
    let ok = post::verify_window_post(
        &request.randomness,
        &[(request.registered_proof, &whole)],
        &replicas,
        sealed.prover_id,
    )
    .expect("verify_window_post runs");
    assert!(ok, "filecoin-proofs' verify_window_post accepts the proof");

    let single = WindowPoSt {
        partition: Some(0),
        ..request.clone()
    };
    let part = prove_both(&Request::WindowPoSt(single));
    let merged = post::merge_window_post_partition_proofs(
        request.registered_proof,
        vec![filecoin_proofs_api::PartitionSnarkProof(part)],
    )
    .expect("merges");
    let ok = post::verify_window_post(
        &request.randomness,
        &[(request.registered_proof, &merged)],
        &replicas,
        sealed.prover_id,
    )
    .expect("verify_window_post runs");
    assert!(ok, "the single partition's proof verifies once merged");

    // Vanilla proofs of other randomness: refused, never a proof.
    let mut other = request.clone();
    other.randomness[0] ^= 1;
    let p = prover();
    let key = p.key(&Request::WindowPoSt(request.clone())).expect("key");
    let e = p
        .prove(&engine(&key), &Request::WindowPoSt(other))
        .unwrap_err();
    println!("vanilla proofs of other randomness: {e}");
    assert!(e.is_bad_input(), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn winning_post_2kib_is_accepted_and_equals_bellperson() {
    params_dir();
    let dir = scratch("winning");
    let sealed = gen::seal_sector(&dir, KIB2, SectorData::Random).expect("seals");
    let request = gen::winning_post(&sealed).expect("vanilla proofs");
    let proof = prove_both(&Request::WinningPoSt(request.clone()));
    let replicas = gen::public_replicas(&sealed, request.registered_proof);
    let ok = post::verify_winning_post(&request.randomness, &proof, &replicas, sealed.prover_id)
        .expect("verify_winning_post runs");
    assert!(ok, "filecoin-proofs' verify_winning_post accepts the proof");
    the_exported_witness_proves_the_same(&Request::WinningPoSt(request.clone()), &proof);

    // A truncated vanilla proof: a decoding error naming it.
    let mut bad = request.clone();
    let n = bad.vanilla_proofs[0].len();
    bad.vanilla_proofs[0].truncate(n / 2);
    let p = prover();
    let key = p.key(&Request::WinningPoSt(request.clone())).expect("key");
    let engine = engine(&key);
    let e = p.prove(&engine, &Request::WinningPoSt(bad)).unwrap_err();
    assert!(matches!(e, FilecoinError::Vanilla { index: 0, .. }), "{e}");

    // A parameter file of another circuit under this circuit's name: refused, naming the file.
    let foreign = scratch("foreign-params");
    let name = key.path.file_name().unwrap().to_str().unwrap();
    let id = name["v28-".len()..name.len() - ".params".len()].to_string();
    ParamsCache::new(&foreign)
        .key(id, KIB2, || zkpipe_bellperson::circuits::Cube { x: None })
        .expect("a cube's parameters under the WinningPoSt name");
    let other = Prover::new(ParamsCache::new(&foreign), ProveOptions::default());
    let e = other
        .prove(&engine, &Request::WinningPoSt(request))
        .unwrap_err();
    assert!(
        matches!(e, FilecoinError::ParamsOfOtherCircuit { .. }),
        "{e}"
    );
    assert!(e.is_bad_input());
    let _ = std::fs::remove_dir_all(foreign);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn snap_2kib_is_accepted_by_verify_empty_sector_update_proof_and_equals_bellperson() {
    params_dir();
    let dir = scratch("snap");
    let sector_key = gen::seal_sector(&dir, KIB2, SectorData::Zeros).expect("seals a CC sector");
    let request = gen::snap(&dir, &sector_key).expect("partition proofs");
    let proof = prove_both(&Request::Snap(request.clone()));
    let ok = update::verify_empty_sector_update_proof(
        request.registered_proof,
        &proof,
        request.comm_r_old,
        request.comm_r_new,
        request.comm_d_new,
    )
    .expect("the verifier runs");
    assert!(
        ok,
        "filecoin-proofs' verify_empty_sector_update_proof accepts the proof"
    );

    // The vanilla proofs of another update (comm_r_new changed): refused.
    let mut other = request.clone();
    other.comm_r_new[0] ^= 1;
    let p = prover();
    let key = p.key(&Request::Snap(request)).expect("key");
    let e = p.prove(&engine(&key), &Request::Snap(other)).unwrap_err();
    println!("another update's commitments: {e}");
    assert!(e.is_bad_input(), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}
