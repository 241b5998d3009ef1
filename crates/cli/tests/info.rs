//! `zkpipe info` exits 0 with or without a GPU, and says which; `zkpipe prove` proves and
//! verifies on the CPU and refuses bad options with a message.

use std::process::Command;

/// The CLI binary: nextest names it at run time when tests run from an archive on another
/// machine; cargo at build time otherwise.
fn zkpipe() -> Command {
    let path = std::env::var("NEXTEST_BIN_EXE_zkpipe")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_zkpipe").to_string());
    Command::new(path)
}

#[test]
fn info_reports_the_driver_or_its_absence_and_exits_zero() {
    let out = zkpipe().arg("info").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CUDA driver") || text.contains("no GPU"),
        "{text}"
    );
    if text.contains("no GPU") {
        assert!(
            text.contains("libcuda.so.1"),
            "the message names what was tried: {text}"
        );
    } else {
        assert!(text.contains("device 0:"), "{text}");
    }
}

#[test]
fn info_json_is_valid_json() {
    let out = zkpipe().args(["info", "--json"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("devices").is_some_and(|d| d.is_array()));
}

#[test]
fn prove_on_the_cpu_verifies_every_proof() {
    let out = zkpipe()
        .args(["prove", "--k", "8", "--proofs", "3", "--cpu", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], 3, "{v}");
    assert_eq!(v["done"], 3, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("every stage runs on the CPU") || log.contains("engine: cpu"),
        "{log}"
    );
}

#[test]
fn prove_rejects_a_bad_option_with_a_message() {
    let out = zkpipe()
        .args(["prove", "--k", "4", "--g2", "tpu", "--cpu"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--g2 takes cpu or gpu"));
}
