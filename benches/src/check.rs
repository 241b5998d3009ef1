//! The check every proof gets before the engine returns it (`zkpipe_pipeline::check`: points on
//! their curves and in the subgroup, then the pairing equation), timed on the host's cores for
//! a number of public inputs, against a partition's proving time.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zkpipe_pipeline::{check, PreparedVerifyingKey, Proof, VerifyingKey};

use crate::stats::median;
use crate::{BenchResult, Report};

/// Times the check of one proof under a key of `inputs` public inputs, `runs` times after a
/// warm-up; the share is of `partition_ms`.
pub fn run(inputs: &[usize], runs: usize, partition_ms: f64) -> BenchResult<Report> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let g1 = |rng: &mut ChaCha8Rng| G1Projective::random(rng).to_affine();
    let g2 = |rng: &mut ChaCha8Rng| G2Projective::random(rng).to_affine();
    let mut table = String::from("inputs | check ms (median) | share of a partition\n");
    let mut rows = Vec::new();
    for &n in inputs {
        let vk = VerifyingKey {
            alpha_g1: g1(&mut rng),
            beta_g1: g1(&mut rng),
            beta_g2: g2(&mut rng),
            gamma_g2: g2(&mut rng),
            delta_g1: g1(&mut rng),
            delta_g2: g2(&mut rng),
            ic: (0..=n).map(|_| g1(&mut rng)).collect::<Vec<G1Affine>>(),
        };
        let pvk = PreparedVerifyingKey::new(&vk)?;
        let proof = Proof {
            a: g1(&mut rng),
            b: g2(&mut rng) as G2Affine,
            c: g1(&mut rng),
        };
        let x: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let _ = check(&pvk, &proof, &x)?;
        let times: Vec<f64> = (0..runs.max(1))
            .map(|_| {
                let t = std::time::Instant::now();
                let _ = check(&pvk, &proof, &x);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let ms = median(times);
        let share = 100.0 * ms / partition_ms;
        table.push_str(&format!(
            "{n:>6} | {ms:>16.2} | {share:.2}% of {partition_ms} ms\n"
        ));
        rows.push(serde_json::json!({"inputs": n, "check_ms": ms, "share_percent": share}));
    }
    Ok(Report {
        table,
        json: serde_json::json!({"check": rows, "partition_ms": partition_ms}),
    })
}
