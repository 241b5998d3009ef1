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
fn prove_writes_its_metrics_and_soak_runs_clean_on_the_cpu() {
    let dir = std::env::temp_dir().join(format!("zkpipe-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("metrics.prom");
    let out = zkpipe()
        .args(["prove", "--k", "8", "--proofs", "2", "--cpu", "--metrics"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.lines()
            .any(|l| l == "zkpipe_jobs_total{state=\"done\"} 2"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    // A few seconds of soak with small keys: it checks proofs and leaks, exit 0 when clean.
    let out = zkpipe()
        .args([
            "soak",
            "--minutes",
            "0.05",
            "--sizes",
            "6,8",
            "--check-max",
            "8",
        ])
        .args(["--report-every", "10"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("no failed or wrong proof, no leak"), "{text}");
}

#[test]
fn prove_rejects_a_bad_option_with_a_message() {
    let out = zkpipe()
        .args(["prove", "--k", "4", "--g2", "tpu", "--cpu"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "usage errors exit 2: {out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--g2 takes cpu or gpu"));
}

#[test]
fn prove_refuses_sizes_it_cannot_run_with_a_message() {
    for (k, says) in [
        ("64", "out of range"),
        ("0", "out of range"),
        ("29", "out of range"),
    ] {
        let out = zkpipe()
            .args(["prove", "--k", k, "--cpu"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--k {k}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "--k {k}: {err}"
        );
    }
    // 2^28 needs more host memory than a test machine has: refused with the bytes, at once.
    let out = zkpipe()
        .args(["prove", "--k", "28", "--cpu"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        assert!(err.contains("bytes of host memory"), "{err}");
    }
}

#[test]
fn prove_with_a_huge_proof_count_starts_without_allocating_for_it() {
    // A billion proofs of 2^4: the run is cut short by a timeout, but must not abort at start
    // (no channel or vector sized by the count).
    let mut child = zkpipe()
        .args(["prove", "--k", "4", "--proofs", "1000000000", "--cpu"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(
        still_running,
        "it stopped: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
