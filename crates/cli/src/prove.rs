//! `zkpipe prove`: proves a generated circuit of 2^k constraints N times through the engine,
//! with progress, verification where the key is real, and per-stage times and throughput.

use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::generate_random_parameters;
use blstrs::{Bls12, Scalar};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use zkpipe_bellperson::circuits::RandomR1cs;
use zkpipe_bellperson::{proving_key, synthesize};
use zkpipe_pipeline::testgen::{random_key, random_witness, Shape};
use zkpipe_pipeline::{
    verify, Backend, Config, Engine, G2Placement, PreparedVerifyingKey, ProvingKey, Randomness,
    Witness,
};

/// What `zkpipe prove` was asked for.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// log2 of the number of constraints.
    #[arg(long, default_value_t = 10)]
    pub k: u32,
    /// Proofs to make.
    #[arg(long, default_value_t = 4)]
    pub proofs: usize,
    /// Workers per device.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Every stage on the CPU.
    #[arg(long)]
    pub cpu: bool,
    /// Where the G2 MSM runs: cpu or gpu.
    #[arg(long, default_value = "cpu")]
    pub g2: String,
    /// Cap each device's VRAM budget at this many GiB.
    #[arg(long)]
    pub vram_cap_gib: Option<f64>,
    /// Largest k with a real key (setup on the CPU) and verified proofs; above it, a key of
    /// random points and a Filecoin-shaped witness (proofs computed, not verifiable).
    #[arg(long, default_value_t = 16)]
    pub real_max: u32,
    /// Upload the key's points for every MSM instead of keeping them on the device.
    #[arg(long)]
    pub no_resident: bool,
    /// Leave the key's points in pageable host memory (they are page-locked by default).
    #[arg(long)]
    pub no_pin: bool,
    /// Print JSON instead of text at the end.
    #[arg(long)]
    pub json: bool,
}

type Error = Box<dyn std::error::Error>;

/// A key, a witness per proof, and public inputs when the key is real.
type Job = (ProvingKey, Vec<Witness>, Option<Vec<Scalar>>);

fn job(a: &Args) -> Result<Job, Error> {
    let n = 1usize << a.k;
    if a.k <= a.real_max {
        // A random R1CS filling the domain: n - inputs - a few constraints of its own.
        let circuit = RandomR1cs {
            constraints: n - n / 8,
            inputs: 3,
            seed: 1,
        };
        let t = Instant::now();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let params = generate_random_parameters::<Bls12, _, _>(circuit, &mut rng)?;
        let key = proving_key(&params, false)?;
        let w = synthesize(circuit)?;
        let inputs = w.input[1..].to_vec();
        eprintln!(
            "real key for 2^{} constraints ({} constraints, {} aux): setup in {:.1} s",
            a.k,
            w.constraints(),
            w.aux.len(),
            t.elapsed().as_secs_f64()
        );
        Ok((key, vec![w; a.proofs], Some(inputs)))
    } else {
        let shape = Shape::filecoin(a.k);
        let t = Instant::now();
        let key = random_key(&shape, 1)?;
        let w = random_witness(&shape, 2);
        eprintln!(
            "key of random points for 2^{} (Filecoin-shaped witness, {} aux; proofs will not verify): made in {:.1} s",
            a.k,
            shape.aux,
            t.elapsed().as_secs_f64()
        );
        Ok((key, vec![w; a.proofs], None))
    }
}

pub fn run(a: &Args) -> Result<(), Error> {
    if !matches!(a.g2.as_str(), "cpu" | "gpu") {
        return Err("--g2 takes cpu or gpu".into());
    }
    let (key, witnesses, inputs) = job(a)?;
    let key = Arc::new(key);
    let engine = Engine::start(Config {
        backend: if a.cpu { Backend::Cpu } else { Backend::Auto },
        workers_per_device: a.workers,
        g2: if a.g2 == "gpu" {
            G2Placement::Gpu
        } else {
            G2Placement::Cpu
        },
        vram_cap: a.vram_cap_gib.map(|g| (g * (1u64 << 30) as f64) as usize),
        queue_capacity: a.proofs.max(1),
        keep_key_resident: !a.no_resident,
        pin_key: !a.no_pin,
        ..Config::default()
    })?;
    eprintln!("engine: {}", engine.backend());
    if engine.on_gpu() && !a.no_pin {
        let t = Instant::now();
        engine.load_key(&key)?;
        eprintln!(
            "key: {:.2} GiB page-locked in {:.2} s",
            key.bytes() as f64 / (1u64 << 30) as f64,
            t.elapsed().as_secs_f64()
        );
    }
    let bar = ProgressBar::new(a.proofs as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} proofs, {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let t = Instant::now();
    let handles = engine.submit_batch(&key, witnesses, Randomness::Random)?;
    let pvk = PreparedVerifyingKey::new(key.vk());
    let mut verified = 0;
    for h in handles {
        let proof = h.wait()?;
        if let Some(inputs) = &inputs {
            if !verify(&pvk, &proof, inputs)? {
                return Err(format!("proof {} does not verify", verified + 1).into());
            }
            verified += 1;
        }
        bar.inc(1);
    }
    let wall = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let st = engine.shutdown();
    let per = |ms: f64| ms / a.proofs.max(1) as f64;
    if a.json {
        println!(
            "{}",
            json!({
                "k": a.k, "proofs": a.proofs, "workers": a.workers, "backend": engine.backend(),
                "wall_s": wall, "proofs_per_s": a.proofs as f64 / wall, "verified": verified,
                "h_ms_per_proof": per(st.h_ms), "g1_msm_ms_per_proof": per(st.g1_msm_ms),
                "g2_msm_ms_per_proof": per(st.g2_msm_ms), "staging_ms_per_proof": per(st.staging_ms),
                "gpu_lock_ms_per_proof": per(st.gpu_lock_ms), "upload_gbps": st.upload_gbps,
                "h_gpu_ms_per_proof": per(st.h_gpu_ms), "msm_gpu_ms_per_proof": per(st.msm_gpu_ms),
                "key_pinned_bytes": st.key_pinned_bytes, "key_resident": !a.no_resident,
                "vram_high_water_bytes": st.vram_high_water,
                "vram_budget_high_water_bytes": st.vram_budget_high_water,
                "pinned_high_water_bytes": st.pinned_high_water,
                "done": st.done, "failed": st.failed,
            })
        );
    } else {
        println!(
            "{} proofs of 2^{} on {} in {wall:.2} s: {:.2} proofs/s; {verified} verified",
            a.proofs,
            a.k,
            engine.backend(),
            a.proofs as f64 / wall
        );
        let g2 = if a.g2 == "gpu" && engine.on_gpu() {
            "G2 MSM inside the GPU MSMs".to_string()
        } else {
            format!("G2 MSM on the CPU {:.1} ms", per(st.g2_msm_ms))
        };
        println!(
            "per proof (summed over workers): H step {:.1} ms, G1 MSMs {:.1} ms, {g2}, staging {:.1} ms, GPU lock held {:.1} ms",
            per(st.h_ms),
            per(st.g1_msm_ms),
            per(st.staging_ms),
            per(st.gpu_lock_ms)
        );
        if engine.on_gpu() {
            println!(
                "device time per proof (CUDA events): H step {:.1} ms, MSMs {:.1} ms; key {}, {}",
                per(st.h_gpu_ms),
                per(st.msm_gpu_ms),
                if st.key_pinned_bytes > 0 {
                    "page-locked"
                } else {
                    "pageable"
                },
                if a.no_resident {
                    "uploaded per MSM"
                } else {
                    "resident when it fits"
                }
            );
            println!(
                "uploads {:.2} GB at {:.1} GB/s through {:.2} GiB of pinned staging; VRAM high-water {:.2} GiB measured, {:.2} GiB granted by the budget",
                st.uploaded_bytes as f64 / 1e9,
                st.upload_gbps,
                st.pinned_high_water as f64 / (1u64 << 30) as f64,
                st.vram_high_water as f64 / (1u64 << 30) as f64,
                st.vram_budget_high_water as f64 / (1u64 << 30) as f64
            );
        }
    }
    if st.failed > 0 {
        return Err(format!("{} jobs failed", st.failed).into());
    }
    Ok(())
}
