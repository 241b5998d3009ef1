//! Parameter files where operators keep them: a missing production file is named (never
//! generated), a published file with another digest is refused as damaged, a test file is
//! generated once and then read by its recorded digest, and a damaged or truncated test file is
//! an error naming it, never a key.

mod common;

use std::path::PathBuf;

use storage_proofs_core::parameter_cache::PARAMETERS;
use zkpipe_bellperson::circuits::Cube;
use zkpipe_filecoin::{FilecoinError, ParamsCache, Trust};

const GIB32: u64 = 32 << 30;

fn dir(name: &str) -> PathBuf {
    common::scratch(&format!("params-{name}"))
}

/// The circuit id of a published 32 GiB parameter file (its name without `v28-` and `.params`).
fn published_32gib_id() -> String {
    let name = PARAMETERS
        .iter()
        .find(|(name, d)| d.sector_size == GIB32 && name.ends_with(".params"))
        .map(|(name, _)| name.clone())
        .expect("filecoin-proofs publishes 32 GiB parameters");
    name["v28-".len()..name.len() - ".params".len()].to_string()
}

#[test]
fn a_missing_production_file_is_named_and_never_generated() {
    let d = dir("missing");
    let cache = ParamsCache::new(&d);
    let id = published_32gib_id();
    let e = cache
        .key(id.clone(), GIB32, || Cube { x: None })
        .unwrap_err();
    match &e {
        FilecoinError::ParamsMissing { path, .. } => {
            assert!(path.ends_with(format!("v28-{id}.params")), "{e}")
        }
        other => panic!("expected ParamsMissing, got {other}"),
    }
    assert!(e.is_bad_input());
    assert!(
        !d.join(format!("v28-{id}.params")).exists(),
        "nothing generated"
    );
}

#[test]
fn a_published_file_with_another_digest_is_refused_as_damaged() {
    let d = dir("damaged");
    let id = published_32gib_id();
    std::fs::write(d.join(format!("v28-{id}.params")), b"not the trusted setup").unwrap();
    let e = ParamsCache::new(&d)
        .key(id, GIB32, || Cube { x: None })
        .unwrap_err();
    assert!(matches!(e, FilecoinError::ParamsDamaged { .. }), "{e}");
}

#[test]
fn test_parameters_are_generated_once_then_read_by_their_digest_and_damage_is_caught() {
    let d = dir("generated");
    let id = "zkpipe-test-cube".to_string();
    let first = ParamsCache::new(&d)
        .key(id.clone(), 2048, || Cube { x: None })
        .expect("generated");
    assert_eq!(first.trust, Trust::GeneratedHere);
    assert!(first.generated_ms > 0.0);
    for ext in ["params", "vk", "meta", "zkpipe-digest"] {
        assert!(d.join(format!("v28-{id}.{ext}")).exists(), "{ext} written");
    }

    // A second process (a new cache) reads the file by its recorded digest.
    let second = ParamsCache::new(&d)
        .key(id.clone(), 2048, || Cube { x: None })
        .expect("read");
    assert_eq!(second.trust, Trust::RecordedDigest);
    assert_eq!(second.generated_ms, 0.0);
    assert_eq!(second.key.vk(), first.key.vk(), "the same parameters");

    // Resident: the same cache gives the same key without reading it again.
    let cache = ParamsCache::new(&d);
    let a = cache.key(id.clone(), 2048, || Cube { x: None }).unwrap();
    let b = cache.key(id.clone(), 2048, || Cube { x: None }).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a.key, &b.key));
    assert_eq!(b.read_ms, 0.0);

    // Truncated: the digest no longer matches, every point is read checked, and the reader
    // names the file and where it ends short.
    let path = d.join(format!("v28-{id}.params"));
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 100).unwrap();
    let e = ParamsCache::new(&d)
        .key(id, 2048, || Cube { x: None })
        .unwrap_err();
    assert!(matches!(e, FilecoinError::Params { .. }), "{e}");
    assert!(e.to_string().contains("v28-zkpipe-test-cube.params"), "{e}");
}

#[test]
fn a_circuit_is_recorded_once_beside_its_parameters_and_a_damaged_recording_is_replaced() {
    use zkpipe_bellperson::{synthesize, synthesize_recorded};
    let d = dir("recording");
    let id = "zkpipe-test-cube-recorded".to_string();
    let cube = || Cube {
        x: Some(blstrs::Scalar::from(3u64)),
    };
    let cache = ParamsCache::new(&d);
    let key = cache.key(id.clone(), 2048, || Cube { x: None }).unwrap();
    let path = d.join(format!("v28-{id}.zkpipe-r1cs"));
    assert!(!path.exists());
    let first = cache.recording(&key, || Ok(cube())).unwrap();
    assert!(
        path.exists(),
        "the recording is written beside the parameters"
    );
    assert_eq!(
        first.id().0,
        format!("v28-{id}@{}", zkpipe_filecoin::CIRCUIT_SOURCE),
        "named by the parameter file and the circuit code"
    );
    let again = cache
        .recording(&key, || -> Result<Cube, FilecoinError> {
            panic!("recorded again")
        })
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &again), "resident");

    // A new cache reads the file; the witness is full synthesis's.
    let read = ParamsCache::new(&d)
        .recording(&key, || -> Result<Cube, FilecoinError> {
            panic!("recorded again")
        })
        .unwrap();
    let want = synthesize(cube()).unwrap();
    let got = synthesize_recorded(cube(), &read, Default::default())
        .unwrap()
        .evaluated()
        .unwrap();
    assert_eq!(got.a.to_vec(), want.a.to_vec());
    assert_eq!(got.c.to_vec(), want.c.to_vec());

    // Used where it lies in the file written, not from this process's copy.
    assert!(first.is_mapped() && read.is_mapped());

    // A damaged file: recorded again (never used), and the file replaced. The damage comes
    // in a new file renamed over the old, as files under a running prover must be replaced:
    // the recordings mapped above keep the old one.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    let damaged = d.join("damaged.tmp");
    std::fs::write(&damaged, &bytes).unwrap();
    std::fs::rename(&damaged, &path).unwrap();
    let recorded = std::sync::atomic::AtomicBool::new(false);
    let fresh = ParamsCache::new(&d)
        .recording(&key, || {
            recorded.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(cube())
        })
        .unwrap();
    assert!(
        recorded.load(std::sync::atomic::Ordering::SeqCst),
        "recorded again"
    );
    assert_eq!(fresh.matrices(), first.matrices());
    zkpipe_r1cs::file::load(&path, first.id()).expect("the file was replaced");

    // A recording of other circuit code under the same file name: not used, recorded again.
    let other = zkpipe_r1cs::Recording::from_parts(
        zkpipe_r1cs::CircuitId(format!("v28-{id}@storage-proofs-0.0.0")),
        first.shape(),
        first.table().to_vec(),
        first.matrices().map(Clone::clone),
    )
    .unwrap();
    zkpipe_r1cs::file::save(&other, &path).unwrap();
    let recorded = std::sync::atomic::AtomicBool::new(false);
    ParamsCache::new(&d)
        .recording(&key, || {
            recorded.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(cube())
        })
        .unwrap();
    assert!(
        recorded.load(std::sync::atomic::Ordering::SeqCst),
        "another circuit's recording is not used"
    );
    zkpipe_r1cs::file::load(&path, first.id()).expect("the file was replaced again");
}

/// PoRep C2's circuit recorded from its blank form (no sealed sector): named as the
/// parameter cache names recordings, of the shape every partition of the size has; a sector
/// size filecoin-proofs does not prove is an error naming it.
#[test]
fn porep_recorded_from_its_blank_circuit() {
    let rec = zkpipe_filecoin::record_porep_blank(2048).unwrap();
    let id = rec.id().to_string();
    assert!(
        id.starts_with("v28-stacked-proof-of-replication")
            && id.ends_with(&format!("@{}", zkpipe_filecoin::CIRCUIT_SOURCE)),
        "{id}"
    );
    let shape = rec.shape();
    assert!(shape.constraints > 100_000 && shape.inputs > 1, "{shape:?}");
    let nonzeros = rec.matrices().map(|m| m.nonzeros());
    assert!(nonzeros.iter().all(|&n| n > 0), "{nonzeros:?}");
    let err = zkpipe_filecoin::record_porep_blank(4096).unwrap_err();
    assert!(err.to_string().contains("4096"), "{err}");
}
