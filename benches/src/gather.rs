//! `zkpipe-bench gather`: the host's gather of the key points whose scalar is not zero
//! (`--streamed-points nonzero`), on the host's cores, against the link it feeds: each size's
//! points (G1's 96 bytes) gathered in the engine's pieces of about 64 MiB, half the
//! variables 0 as in a Filecoin witness.

use std::time::Instant;

use blstrs::Scalar;
use ff::Field;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkpipe_msm::{Density, SplitQuery, SplitScalars};

use crate::stats::median;
use crate::{BenchResult, Report};

/// A G1 point as the device reads it: 96 bytes.
type Point = [u64; 12];

/// Points gathered into one pinned buffer at a time by the engine (64 MiB of G1 points).
const PIECE_POINTS: usize = (64 << 20) / std::mem::size_of::<Point>();

/// Gathers each size's nonzero points `runs` times after a warm-up; medians.
pub fn run(sizes: &[u32], runs: usize) -> BenchResult<Report> {
    let mut table = format!(
        "Gather of the points whose scalar is not zero, on {} threads, in pieces of {PIECE_POINTS} points:\n| points | gathered | ms (median) | GB/s written | GB/s read and written |\n| --- | --- | --- | --- | --- |\n",
        rayon::current_num_threads()
    );
    let mut rows = Vec::new();
    for &k in sizes {
        let n = 1usize << k;
        let mut r = ChaCha8Rng::seed_from_u64(u64::from(k));
        // Half 0, the rest 1 but one in eight random-ish (2): the split's shape, cheaply.
        let z: Vec<Scalar> = (0..n)
            .map(|_| match r.next_u32() % 16 {
                0..=7 => Scalar::ZERO,
                8 => Scalar::from(2u64),
                _ => Scalar::ONE,
            })
            .collect();
        let split = SplitScalars::of(&z)?;
        drop(z);
        let whole = SplitQuery::new(&split, &Density::all(n))?;
        let needed = whole.nonzero_only(&split)?;
        let all: Vec<Point> = (0..n as u64).map(|i| [i; 12]).collect();
        let mut room = vec![[0u64; 12]; PIECE_POINTS.min(n)];
        let pieces = needed.pieces(0..needed.words(), PIECE_POINTS);
        let mut once = || -> BenchResult<f64> {
            let t = Instant::now();
            for p in &pieces {
                needed.gather(&whole, &all, p.words.clone(), &mut room)?;
            }
            Ok(t.elapsed().as_secs_f64() * 1e3)
        };
        once()?;
        let ms = median(
            (0..runs.max(1))
                .map(|_| once())
                .collect::<BenchResult<_>>()?,
        );
        let bytes = (needed.selected() * std::mem::size_of::<Point>()) as f64;
        let (written, moved) = (bytes / ms / 1e6, 2.0 * bytes / ms / 1e6);
        table.push_str(&format!(
            "| 2^{k} | {} | {ms:.1} | {written:.1} | {moved:.1} |\n",
            needed.selected()
        ));
        rows.push(serde_json::json!({
            "log_n": k, "gathered": needed.selected(), "ms": ms,
            "written_gbps": written, "read_written_gbps": moved,
        }));
    }
    Ok(Report {
        table,
        json: serde_json::json!({ "gather": rows, "threads": rayon::current_num_threads() }),
    })
}
