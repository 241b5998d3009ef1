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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid value 'tpu' for '--g2") && err.contains("cpu, gpu"),
        "{err}"
    );
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

/// A scratch file of this test process, written with `text`.
fn scratch(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("zkpipe-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn prove_reads_the_engine_config_from_a_toml_file() {
    let good = scratch(
        "engine.toml",
        "backend = \"cpu\"\ncpu_workers = 2\nvram_cap = \"16GiB\"\n",
    );
    let out = zkpipe()
        .args(["prove", "--k", "6", "--proofs", "2", "--json", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], 2, "{v}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("cpu (2 workers)"), "the file's workers: {log}");

    // An unknown key and a malformed size: usage errors (2) naming the file and the key.
    for (text, names) in [
        ("backend = \"cpu\"\nworkers = 2\n", "workers"),
        ("vram_cap = \"16 parsecs\"\n", "16 parsecs"),
    ] {
        let bad = scratch("bad.toml", text);
        let out = zkpipe()
            .args(["prove", "--k", "6", "--proofs", "1", "--config"])
            .arg(&bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("bad.toml") && err.contains(names), "{err}");
    }
    let missing = zkpipe()
        .args(["prove", "--k", "6", "--config", "/no/such/engine.toml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
}

#[test]
fn log_format_json_writes_one_json_object_a_line() {
    let out = zkpipe()
        .args([
            "prove",
            "--k",
            "6",
            "--proofs",
            "2",
            "--cpu",
            "--log-format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    let mut messages = Vec::new();
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{v}");
        messages.push(v["fields"]["message"].as_str().unwrap_or("").to_string());
    }
    assert!(
        messages.iter().any(|m| m.starts_with("partition 2/2")),
        "{messages:?}"
    );

    // An error, too, is a JSON record, with the exit status.
    let out = zkpipe()
        .args(["prove", "--k", "6", "--config", "/nonexistent/zkpipe.toml"])
        .args(["--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["level"], "ERROR", "{v}");
    assert_eq!(v["fields"]["exit_code"], 2, "{v}");

    let out = zkpipe()
        .args(["info", "--log-format", "yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses other formats");
}

/// Device 0's UUID and PCI bus id from `zkpipe info --json`; `None` (with the skip line)
/// without a GPU.
fn first_device() -> Option<(String, String)> {
    let out = zkpipe().args(["info", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let Some(d) = v["devices"].get(0) else {
        assert!(
            std::env::var("ZKPIPE_REQUIRE_GPU").as_deref() != Ok("1"),
            "a GPU is required (ZKPIPE_REQUIRE_GPU=1): {v}"
        );
        eprintln!("skipped: no CUDA device");
        return None;
    };
    let uuid = d["uuid"].as_str().expect("info shows a UUID").to_string();
    assert!(uuid.starts_with("GPU-") && uuid.len() == 40, "{uuid}");
    Some((uuid, d["pci_bus_id"].as_str().unwrap().to_string()))
}

#[test]
fn devices_are_chosen_by_ordinal_uuid_or_pci_bus_id() {
    let run = |devices: &str, env: bool| {
        let mut c = zkpipe();
        c.args(["prove", "--k", "8", "--proofs", "1", "--json"]);
        if env {
            c.env("ZKPIPE_DEVICES", devices);
        } else {
            c.args(["--devices", devices]);
        }
        c.output().unwrap()
    };
    let Some((uuid, pci)) = first_device() else {
        // No driver: naming a device is a device error (3), not a silent CPU run.
        let out = run("0", false);
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        return;
    };
    for (devices, env) in [("0", false), (uuid.as_str(), false), (pci.as_str(), true)] {
        let out = run(devices, env);
        assert!(out.status.success(), "{devices}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["verified"], 1, "{v}");
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains("cuda [0]"),
            "{devices}: ran on device 0: {log}"
        );
    }
    for (devices, says) in [
        ("0,0", "listed twice"),
        ("GPU-ffffffff-0000", "no device matches"),
        ("99", "does not exist"),
    ] {
        let out = run(devices, false);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{devices}: {err}");
        assert!(err.contains(says), "{devices}: {err}");
    }
}
