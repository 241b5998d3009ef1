//! `zkpipe prove --params FILE`: a key read from bellperson's parameter file proves witnesses
//! shaped to it, and a damaged file is refused with what was wrong and where.

use std::path::PathBuf;
use std::process::Command;

use bellperson::groth16::generate_random_parameters;
use blstrs::Bls12;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zkpipe_bellperson::circuits::RandomR1cs;

fn zkpipe() -> Command {
    let path = std::env::var("NEXTEST_BIN_EXE_zkpipe")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_zkpipe").to_string());
    Command::new(path)
}

/// A file of this test's own, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path =
            std::env::temp_dir().join(format!("zkpipe-cli-{}-{name}.params", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// bellperson's parameters for 200 constraints (a domain of 2^8), as its file holds them.
fn parameter_file() -> Vec<u8> {
    let circuit = RandomR1cs {
        constraints: 200,
        inputs: 3,
        seed: 5,
    };
    let params =
        generate_random_parameters::<Bls12, _, _>(circuit, &mut ChaCha8Rng::seed_from_u64(6))
            .unwrap();
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    bytes
}

#[test]
fn prove_with_a_parameter_file_reports_the_read_and_proves_with_its_key() {
    let bytes = parameter_file();
    for (name, unchecked) in [("checked", false), ("unchecked", true)] {
        let file = TempFile::new(name, &bytes);
        let mut cmd = zkpipe();
        cmd.args(["prove", "--proofs", "2", "--cpu", "--json", "--params"])
            .arg(&file.0);
        if unchecked {
            cmd.arg("--params-unchecked");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (v["done"].as_u64(), v["failed"].as_u64()),
            (Some(2), Some(0)),
            "{v}"
        );
        assert_eq!(v["k"], 8, "the domain is the key's: {v}");
        assert_eq!(
            v["verified"], 0,
            "witnesses shaped to a key do not verify: {v}"
        );
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(log.contains("GB/s") && log.contains("read in"), "{log}");
        let check = if unchecked {
            "encodings checked"
        } else {
            "every point checked"
        };
        assert!(log.contains(check), "{name}: {log}");
    }
}

#[test]
fn prove_refuses_a_damaged_parameter_file_naming_the_offset() {
    let bytes = parameter_file();
    let file = TempFile::new("truncated", &bytes[..bytes.len() - 100]);
    let out = zkpipe()
        .args(["prove", "--cpu", "--params"])
        .arg(&file.0)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad file is bad input: {out:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--params") && err.contains("offset") && !err.contains("panicked"),
        "{err}"
    );
    let missing = zkpipe()
        .args(["prove", "--cpu", "--params", "/nonexistent/zkpipe.params"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/zkpipe.params"));
}
