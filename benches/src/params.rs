//! Parameter files: zkpipe's reader against bellperson's `Parameters::read` on the same file,
//! each read in a process of its own so that its peak resident memory (VmHWM) is its own.
//! The file is written once from a key of random points shaped like a Filecoin circuit and
//! read from the page cache by every reader.

use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use bellperson::groth16::Parameters;
use blstrs::Bls12;
use serde_json::json;
use zkpipe_bellperson::to_bellperson_parameters;
use zkpipe_pipeline::testgen::{random_key_parts, Shape};

use crate::stats::median;
use crate::{BenchResult, Report};

/// The readers compared, by the name `params-read --reader` takes.
pub const READERS: [&str; 4] = [
    "zkpipe",
    "zkpipe-unchecked",
    "bellperson",
    "bellperson-unchecked",
];

/// Writes bellperson's parameter file for a Filecoin-shaped key of 2^k constraints.
fn write_file(k: u32, path: &Path) -> BenchResult<()> {
    let params = to_bellperson_parameters(random_key_parts(&Shape::filecoin(k), 1));
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    params.write(&mut out)?;
    out.flush()?;
    Ok(())
}

/// A field of /proc/self/status in bytes (Linux).
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// One read of `path` by `reader` in this process: seconds, the resident memory before and
/// the peak after.
pub fn read_once(reader: &str, path: &Path) -> BenchResult<Report> {
    let before = status_bytes("VmRSS:");
    let t = Instant::now();
    let points = match reader {
        "zkpipe" => zkpipe_pipeline::read_params(path)?
            .query_lens()
            .iter()
            .sum(),
        "zkpipe-unchecked" => zkpipe_pipeline::read_params_unchecked(path)?
            .query_lens()
            .iter()
            .sum(),
        "bellperson" | "bellperson-unchecked" => {
            let file = BufReader::new(std::fs::File::open(path)?);
            let p = Parameters::<Bls12>::read(file, reader == "bellperson")?;
            p.h.len() + p.l.len() + p.a.len() + p.b_g1.len() + p.b_g2.len()
        }
        other => return Err(format!("no reader named {other}: {}", READERS.join(", ")).into()),
    };
    let secs = t.elapsed().as_secs_f64();
    let v = json!({
        "reader": reader, "secs": secs, "points": points,
        "rss_before_bytes": before, "peak_rss_bytes": status_bytes("VmHWM:"),
    });
    Ok(Report {
        table: format!("{v}\n"),
        json: v,
    })
}

/// Writes the file if it is not there, then reads it `runs` times with each of `readers`, each
/// read in a child process.
pub fn run(k: u32, path: &Path, runs: usize, readers: &[String]) -> BenchResult<Report> {
    if let Some(r) = readers.iter().find(|r| !READERS.contains(&r.as_str())) {
        return Err(format!("no reader named {r}: {}", READERS.join(", ")).into());
    }
    if !path.exists() {
        let t = Instant::now();
        write_file(k, path)?;
        eprintln!(
            "wrote {} in {:.1} s",
            path.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let file_bytes = std::fs::metadata(path)?.len();
    let me = std::env::current_exe()?;
    let mut table = format!(
        "{} ({:.1} MiB), {runs} reads a reader, each in its own process\n\
         | reader | median s | GB/s | peak RSS MiB | peak RSS / file size | RSS before MiB |\n\
         | --- | --- | --- | --- | --- | --- |\n",
        path.display(),
        file_bytes as f64 / (1 << 20) as f64
    );
    let mut rows = Vec::new();
    for reader in readers {
        let mut secs = Vec::new();
        let (mut peak, mut before) = (0u64, 0u64);
        for _ in 0..runs {
            let out = Command::new(&me)
                .args(["--json", "params-read", "--reader", reader, "--file"])
                .arg(path)
                .output()?;
            if !out.status.success() {
                return Err(
                    format!("{reader}: {}", String::from_utf8_lossy(&out.stderr).trim()).into(),
                );
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            secs.push(v["secs"].as_f64().ok_or("no secs")?);
            peak = peak.max(v["peak_rss_bytes"].as_u64().ok_or("no VmHWM")?);
            before = before.max(v["rss_before_bytes"].as_u64().unwrap_or(0));
        }
        let s = median(secs);
        let gbps = file_bytes as f64 / s / 1e9;
        let ratio = peak as f64 / file_bytes as f64;
        table.push_str(&format!(
            "| {reader} | {s:.3} | {gbps:.3} | {:.1} | {ratio:.3} | {:.1} |\n",
            peak as f64 / (1 << 20) as f64,
            before as f64 / (1 << 20) as f64
        ));
        rows.push(json!({
            "reader": reader, "median_s": s, "gbps": gbps, "peak_rss_bytes": peak,
            "peak_rss_over_file": ratio, "rss_before_bytes": before,
        }));
    }
    Ok(Report {
        table,
        json: json!({"file": path, "file_bytes": file_bytes, "k": k, "runs": runs, "readers": rows}),
    })
}
