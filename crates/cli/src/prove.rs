//! `zkpipe prove`: proves a generated circuit of 2^k constraints (or a parameter file's key, or
//! a witness directory's circuit) N times through the engine, with progress, verification
//! where the key is real, and per-stage times and throughput.

use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::generate_random_parameters;
use blstrs::{Bls12, Scalar};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde_json::json;
use zkpipe_bellperson::circuits::RandomR1cs;
use zkpipe_bellperson::{proving_key_unchecked, synthesize};
use zkpipe_pipeline::testgen::{random_key, recorded_witness, Shape, WitnessSource};
use zkpipe_pipeline::{read_params, read_params_unchecked};

use crate::exit::Failure;
use zkpipe_pipeline::{
    verify, Backend, Config, Engine, G2Placement, JobReport, PreparedVerifyingKey, ProofCheck,
    ProvingKey, Randomness, StreamedPoints, Witness,
};
use zkpipe_serve::ExportedWitness;

/// What `zkpipe prove` was asked for.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// log2 of the number of constraints.
    #[arg(long, default_value_t = 10)]
    pub k: u32,
    /// Proofs to make.
    #[arg(long, default_value_t = 4)]
    pub proofs: usize,
    /// Devices to use: comma-separated ordinals, UUIDs or PCI bus ids [default: every device].
    #[arg(long, env = "ZKPIPE_DEVICES", long_help = crate::devices::HELP)]
    pub devices: Option<String>,
    /// Workers per device [default: 2, or the --config file's].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Every stage on the CPU.
    #[arg(long)]
    pub cpu: bool,
    /// Where the G2 MSM runs [default: cpu, or the --config file's].
    #[arg(long, value_enum)]
    pub g2: Option<G2Arg>,
    /// Which of a streamed key's witness-query points cross the link [default: all, or the
    /// --config file's]: nonzero gathers only those of variables whose value is not 0.
    #[arg(long, value_enum)]
    pub streamed_points: Option<StreamedPointsArg>,
    /// Cap each device's VRAM budget at this many GiB.
    #[arg(long, conflicts_with = "vram_cap")]
    pub vram_cap_gib: Option<f64>,
    /// Cap each device's VRAM budget at this size: bytes, or "16GiB", "512 MiB", "15GB".
    #[arg(long, value_parser = zkpipe_pipeline::parse_bytes)]
    pub vram_cap: Option<usize>,
    /// The engine's configuration from a TOML file (each field of zkpipe_pipeline::Config
    /// by name; README shows one). The options above, where given, override it; the job queue
    /// holds one job whatever it says (witnesses are made as the engine takes them).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// Largest k with a real key (setup on the CPU) and verified proofs; above it, a key of
    /// random points and a Filecoin-shaped witness (proofs computed, not verifiable).
    #[arg(long, default_value_t = 16)]
    pub real_max: u32,
    /// Upload the key's points for every MSM instead of keeping them on the device.
    #[arg(long)]
    pub no_resident: bool,
    /// Copies of precomputed multiples kept with the resident key's H points (1: none; at
    /// most 16): H's MSM sums that many windows in one set of buckets, at that many times
    /// H's device memory. Fewer are kept where they would give jobs a smaller plan.
    #[arg(long)]
    pub key_multiples: Option<usize>,
    /// Leave the key's points in pageable host memory (they are page-locked by default).
    #[arg(long)]
    pub no_pin: bool,
    /// Print JSON instead of text at the end.
    #[arg(long)]
    pub json: bool,
    /// Write the engine's metrics (Prometheus text format) to this file at the end.
    #[arg(long)]
    pub metrics: Option<std::path::PathBuf>,
    /// Prove with fixed r and s (every proof of the run is then the same), and print the first
    /// proof's bytes: runs under different settings (a VRAM cap, a streamed key, the CPU) must
    /// print the same.
    #[arg(long)]
    pub fixed: bool,
    /// Prove with the key in this parameter file (bellperson's `Parameters::write` layout;
    /// every point checked as it is read) instead of a generated one, with witnesses shaped to
    /// it (computed as real proofs, not verifiable: the values are not the key's circuit's).
    /// Prints how long the file took to read and at what speed.
    #[arg(long, conflicts_with = "k")]
    pub params: Option<std::path::PathBuf>,
    /// Read --params without the curve and subgroup checks (as bellperson's
    /// `Parameters::read(.., false)`): for a file from a trusted source.
    #[arg(long, requires = "params")]
    pub params_unchecked: bool,
    /// Threads making witnesses beside the engine, as a service's synthesis would run.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub producers: u16,
    /// What a generated witness carries: a, b and c (evaluations), or the circuit's
    /// recording and the aux values alone, from which the engine evaluates a, b and c on the
    /// device (recorded; the circuit is testgen's recorded one, satisfied by the witness).
    #[arg(long, value_enum, default_value_t = WitnessArg::Evaluations, conflicts_with = "params")]
    pub witness: WitnessArg,
    /// Prove the witness in this directory (`zkpipe filecoin … --export-witness DIR`: its
    /// circuit's parameter file and recording, its public inputs and aux values) --proofs
    /// times, each proof checked by the engine and verified: the engine alone on the work that
    /// `zkpipe client bench --circuit NAME=DIR` sends a daemon. Where circuit.toml gives the
    /// parameter file's digest, the file is checked against it and its points are read
    /// unchecked, as the daemon does.
    #[arg(long, conflicts_with_all = ["k", "params", "witness"])]
    pub witness_dir: Option<std::path::PathBuf>,
}

/// What a generated witness carries (`--witness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WitnessArg {
    /// a, b and c, uploaded by the engine.
    Evaluations,
    /// The recording and the aux values: a, b and c evaluated on the device.
    Recorded,
}

type Error = Box<dyn std::error::Error>;

/// Where each proof's witness comes from (one per run: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Witnesses {
    /// Copies of one synthesized witness (a real key).
    Copies(Witness),
    /// Generated, Filecoin-shaped.
    Generated(WitnessSource),
    /// Copies of one generated witness of the recorded path (its aux values copied into lent
    /// memory, its recording shared).
    Recorded(Witness),
}

impl Witnesses {
    /// The next witness: a generated one written into pinned memory lent by the engine (a, b,
    /// c and the aux values) when it lends any, else into fresh vectors.
    fn next(
        &self,
        engine: &Engine,
        key: &ProvingKey,
        memory: WitnessMemory,
    ) -> Result<Witness, String> {
        match self {
            Witnesses::Copies(w) => Ok(w.clone()),
            Witnesses::Generated(g) if memory == WitnessMemory::Lent => {
                let room = engine
                    .lend_witness(key, LEND_WAIT)
                    .map_err(|e| e.to_string())?;
                g.witness_in_lent(room).map_err(|e| e.to_string())
            }
            Witnesses::Generated(g) => Ok(g.witness()),
            Witnesses::Recorded(w) if memory == WitnessMemory::Lent => {
                let mut aux = engine.lend_aux(key, LEND_WAIT).map_err(|e| e.to_string())?;
                let values = w.aux.as_fr();
                aux.append_slots(values.len())
                    .map_err(|e| e.to_string())?
                    .par_chunks_mut(1 << 16)
                    .zip(values.par_chunks(1 << 16))
                    .for_each(|(d, s)| d.copy_from_slice(s));
                Ok(Witness {
                    aux,
                    ..recorded_shell(w)
                })
            }
            Witnesses::Recorded(w) => Ok(w.clone()),
        }
    }

    /// Pinned bytes for `sets` witnesses' a, b, c and aux (none for copies of a real one):
    /// a generated witness has fewer aux variables than its domain, and the engine lends aux
    /// room of the domain's size class.
    fn pinned_bytes(&self, log_n: u32, sets: usize) -> usize {
        match self {
            Witnesses::Copies(_) => 0,
            Witnesses::Generated(_) => sets * 4 * (32usize << log_n),
            Witnesses::Recorded(_) => sets * (32usize << log_n),
        }
    }
}

/// `w` without its aux values (a copy of the rest: inputs, densities, the recording shared).
fn recorded_shell(w: &Witness) -> Witness {
    Witness {
        input: w.input.clone(),
        a_aux_density: w.a_aux_density.clone(),
        b_input_density: w.b_input_density.clone(),
        b_aux_density: w.b_aux_density.clone(),
        recording: w.recording.clone(),
        ..Witness::default()
    }
}

/// How long the producer waits for lent memory to come back.
const LEND_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// A key, its witnesses, and public inputs when the key is real.
struct Job {
    key: ProvingKey,
    witnesses: Witnesses,
    inputs: Option<Vec<Scalar>>,
}

/// How a parameter file's points are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PointCheck {
    /// On the curve and in the subgroup, every point.
    Every,
    /// Only their encodings (trusted parameters: `--params-unchecked`).
    EncodingOnly,
}

/// Where generated witnesses are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WitnessMemory {
    /// Into pinned memory the engine lends.
    Lent,
    /// Into fresh vectors.
    Owned,
}

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
        let key = proving_key_unchecked(&params)?;
        let w = synthesize(circuit)?;
        let inputs = w.input[1..].to_vec();
        crate::say!(
            "real key for 2^{} constraints ({} constraints, {} aux): setup in {:.1} s",
            a.k,
            w.constraints(),
            w.aux.len(),
            t.elapsed().as_secs_f64()
        );
        Ok(Job {
            key,
            witnesses: Witnesses::Copies(w),
            inputs: Some(inputs),
        })
    } else {
        let shape = Shape::filecoin(a.k);
        let t = Instant::now();
        let key = random_key(&shape, 1)?;
        let witnesses = match a.witness {
            WitnessArg::Evaluations => Witnesses::Generated(WitnessSource::new(&shape, 2)),
            WitnessArg::Recorded => Witnesses::Recorded(recorded_witness(&shape, 2)?),
        };
        crate::say!(
            "key of random points for 2^{} ({:.1} GiB; Filecoin-shaped witness, {} aux; proofs will not verify): made in {:.1} s",
            a.k,
            key.bytes() as f64 / GIB,
            shape.aux,
            t.elapsed().as_secs_f64()
        );
        if let Witnesses::Recorded(w) = &witnesses {
            if let Some(rec) = &w.recording {
                let nnz = rec.matrices().map(|m| m.nonzeros());
                crate::say!(
                    "recorded witness: a recording of {:.2} GiB ({} constraints, nonzeros A {} B {} C {}); a, b and c evaluated on the device",
                    rec.bytes() as f64 / GIB,
                    rec.shape().constraints,
                    nnz[0],
                    nnz[1],
                    nnz[2]
                );
            }
        }
        Ok(Job {
            key,
            witnesses,
            inputs: None,
        })
    }
}

/// A key read from a parameter file, with witnesses shaped to it. A file that cannot be read
/// as one is a usage error naming what was wrong where.
fn params_job(path: &std::path::Path, check: PointCheck) -> Result<Job, Failure> {
    let bad =
        |e: &dyn std::fmt::Display| Failure::Usage(format!("--params {}: {e}", path.display()));
    let file_bytes = std::fs::metadata(path).map_err(|e| bad(&e))?.len();
    let t = Instant::now();
    let key = match check {
        PointCheck::EncodingOnly => read_params_unchecked(path),
        PointCheck::Every => read_params(path),
    }
    .map_err(|e| bad(&e))?;
    let secs = t.elapsed().as_secs_f64();
    let witnesses = WitnessSource::for_key(&key, 2).map_err(|e| bad(&e))?;
    let n = key.domain_size();
    crate::say!(
        "parameters: {} ({:.2} GiB, domain 2^{}, {} inputs, {} aux) read in {secs:.2} s, {:.2} GB/s, {}; witnesses shaped to the key (proofs will not verify)",
        path.display(),
        file_bytes as f64 / GIB,
        n.trailing_zeros(),
        key.num_inputs(),
        key.num_aux(),
        file_bytes as f64 / secs.max(1e-9) / 1e9,
        match check {
            PointCheck::EncodingOnly => "encodings checked (--params-unchecked)",
            PointCheck::Every => "every point checked",
        }
    );
    Ok(Job {
        key,
        witnesses: Witnesses::Generated(witnesses),
        inputs: None,
    })
}

/// The key, recording and witness of a witness directory: every proof of the run from that
/// witness (its aux values copied into lent memory, its recording shared), checked and
/// verified. What cannot be read is a usage error naming the file and what was wrong.
fn witness_dir_job(dir: &std::path::Path, check: PointCheck) -> Result<Job, Failure> {
    let bad = |e: &dyn std::fmt::Display| Failure::Usage(format!("--witness-dir: {e}"));
    let exported = ExportedWitness::read(dir).map_err(|e| bad(&e))?;
    let values = exported.values(dir).map_err(|e| bad(&e))?;
    let circuit = &exported.circuit;
    let t = Instant::now();
    // A digest in circuit.toml stands for the points' checks, as in the daemon.
    let check = match (&circuit.params_digest, check) {
        (Some(digest), PointCheck::Every) => {
            zkpipe_filecoin::params::check_file_digest(&circuit.params, digest)
                .map_err(|e| bad(&e))?;
            PointCheck::EncodingOnly
        }
        (_, check) => check,
    };
    let key = match check {
        PointCheck::EncodingOnly => read_params_unchecked(&circuit.params),
        PointCheck::Every => read_params(&circuit.params),
    }
    .map_err(|e| bad(&format!("{}: {e}", circuit.params.display())))?;
    let recording = zkpipe_r1cs::file::read(&circuit.recording)
        .map_err(|e| bad(&format!("{}: {e}", circuit.recording.display())))?;
    let shape = recording.shape();
    if shape.inputs != values.inputs.len() + 1 || shape.aux != values.aux.len() {
        return Err(bad(&format!(
            "{} inputs and {} aux values, where the recording {} has {} and {}",
            values.inputs.len(),
            values.aux.len(),
            circuit.recording.display(),
            shape.inputs - 1,
            shape.aux
        )));
    }
    crate::say!(
        "witness: {} ({} constraints, {} inputs, {} aux; parameters {}, domain 2^{}) read in {:.1} s",
        dir.display(),
        shape.constraints,
        values.inputs.len(),
        values.aux.len(),
        circuit.params.display(),
        key.domain_size().trailing_zeros(),
        t.elapsed().as_secs_f64()
    );
    let densities = recording.densities().clone();
    let mut input = Vec::with_capacity(values.inputs.len() + 1);
    input.push(Scalar::from(1u64));
    input.extend_from_slice(&values.inputs);
    let witness = Witness {
        input,
        aux: values.aux.into(),
        a_aux_density: densities.a_aux,
        b_input_density: densities.b_input,
        b_aux_density: densities.b_aux,
        recording: Some(Arc::new(recording)),
        ..Witness::default()
    };
    Ok(Job {
        key,
        witnesses: Witnesses::Recorded(witness),
        inputs: Some(values.inputs),
    })
}

const GIB: f64 = (1u64 << 30) as f64;

/// Resident set size of this process (Linux), in bytes.
/// The process's resident memory (Linux), if it can be read.
pub(crate) fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// One partition's line: its report, when it finished, and the process's memory then.
#[derive(Debug)]
struct Partition {
    report: JobReport,
    done_s: f64,
    rss: Option<u64>,
    vram_high_water: usize,
}

impl Partition {
    fn line(&self, i: usize, of: usize, prev_s: f64) -> String {
        let stages: Vec<String> = self
            .report
            .device_ms
            .iter()
            .map(|t| format!("{} {:.1}", t.stage, t.ms))
            .collect();
        let g2 = match self.report.g2_cpu_ms {
            ms if ms > 0.0 => format!(", G2 on the CPU {ms:.0} ms"),
            _ => String::new(),
        };
        let rss = self
            .rss
            .map_or("-".to_string(), |b| format!("{:.2} GiB", b as f64 / GIB));
        let done = format!(
            "done at {:.2} s (+{:.2} s); RSS {rss}",
            self.done_s,
            self.done_s - prev_s
        );
        if stages.is_empty() {
            return format!("partition {}/{of}: on the CPU{g2}; {done}", i + 1);
        }
        format!(
            "partition {}/{of}: device {:.1} ms ({}){g2}; staging {:.0} ms, lock {:.0} ms; {}; {done}; VRAM high-water {:.2} GiB",
            i + 1,
            self.report.device_span_ms,
            stages.join(", "),
            self.report.staging_ms,
            self.report.lock_ms,
            self.link_words(),
            self.vram_high_water as f64 / GIB,
        )
    }

    /// What the partition moved host to device, in words.
    fn link_words(&self) -> String {
        let r = &self.report;
        let witness = format!("witness {:.2} GB staged", r.uploaded_bytes as f64 / 1e9);
        let l = &r.link;
        if l.bases_bytes == 0 {
            return format!("{witness}, key resident");
        }
        let gathered = match l.gather_ms {
            ms if ms > 0.0 => format!(", gathered on the host in {ms:.0} ms"),
            _ => String::new(),
        };
        format!(
            "{witness}, key points {:.2} GB streamed ({:.2} GB with a nonzero scalar{gathered}), the link busy {:.0} ms of them ({:.0}% of the device time)",
            l.bases_bytes as f64 / 1e9,
            l.bases_needed_bytes as f64 / 1e9,
            l.bases_busy_ms,
            100.0 * l.busy_share(r.device_span_ms),
        )
    }

    fn json(&self) -> serde_json::Value {
        let stages: serde_json::Map<String, serde_json::Value> = self
            .report
            .device_ms
            .iter()
            .map(|t| (t.stage.name().to_string(), json!(t.ms)))
            .collect();
        json!({
            "job": self.report.job, "plan": self.report.plan.map(|p| p.to_string()), "device_ms": self.report.device_span_ms,
            "stages_ms": stages, "staging_ms": self.report.staging_ms, "lock_ms": self.report.lock_ms,
            "g2_cpu_ms": self.report.g2_cpu_ms, "uploaded_bytes": self.report.uploaded_bytes,
            "bases_bytes": self.report.link.bases_bytes,
            "bases_needed_bytes": self.report.link.bases_needed_bytes,
            "bases_busy_ms": self.report.link.bases_busy_ms,
            "bases_busy_share": self.report.link.busy_share(self.report.device_span_ms),
            "gather_ms": self.report.link.gather_ms,
            "done_s": self.done_s, "rss_bytes": self.rss, "vram_high_water_bytes": self.vram_high_water,
        })
    }
}

/// What the partitions moved over the link, against their device time (medians): the floor
/// the link puts under a partition at the rate it gave while busy.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LinkFloor {
    /// Bytes of key points streamed, and of those with a nonzero scalar.
    bases: f64,
    needed: f64,
    /// Bytes of witness staged.
    witness: f64,
    /// The link's rate while busy with key points (GB/s).
    gbps: f64,
    /// The device time of a partition (ms) and the share of it the link was busy.
    device_ms: f64,
    busy_share: f64,
    /// Host milliseconds gathering the points of nonzero values (0 when all are streamed).
    gather_ms: f64,
}

impl LinkFloor {
    /// None when no partition streamed key points with timed copies.
    fn of(parts: &[Partition]) -> Option<Self> {
        let streamed: Vec<&JobReport> = parts
            .iter()
            .map(|p| &p.report)
            .filter(|r| r.link.busy_gbps().is_some())
            .collect();
        if streamed.is_empty() {
            return None;
        }
        let med = |f: &dyn Fn(&JobReport) -> f64| median(streamed.iter().map(|r| f(r)).collect());
        Some(Self {
            bases: med(&|r| r.link.bases_bytes as f64),
            needed: med(&|r| r.link.bases_needed_bytes as f64),
            witness: med(&|r| r.uploaded_bytes as f64),
            gbps: med(&|r| r.link.busy_gbps().unwrap_or(0.0)),
            device_ms: med(&|r| r.device_span_ms),
            busy_share: med(&|r| r.link.busy_share(r.device_span_ms)),
            gather_ms: med(&|r| r.link.gather_ms),
        })
    }

    /// Milliseconds `bytes` take at the link's rate.
    fn ms(&self, bytes: f64) -> f64 {
        bytes / (self.gbps * 1e6)
    }

    fn line(&self) -> String {
        let gathered = match self.gather_ms {
            ms if ms > 0.0 => format!(" (gathered on the host in {ms:.0} ms)"),
            _ => String::new(),
        };
        format!(
            "link per partition (medians): key points {:.2} GB streamed{gathered} at {:.1} GB/s while busy, the link busy {:.0}% of the {:.1} ms of device time; witness {:.2} GB staged; floor at that rate {:.0} ms (points and witness), {:.0} ms moving only the points with a nonzero scalar ({:.2} GB)",
            self.bases / 1e9,
            self.gbps,
            100.0 * self.busy_share,
            self.device_ms,
            self.witness / 1e9,
            self.ms(self.bases + self.witness),
            self.ms(self.needed + self.witness),
            self.needed / 1e9,
        )
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "bases_bytes": self.bases, "bases_needed_bytes": self.needed,
            "witness_bytes": self.witness, "busy_gbps": self.gbps,
            "busy_share": self.busy_share, "device_ms": self.device_ms,
            "floor_ms": self.ms(self.bases + self.witness),
            "floor_needed_ms": self.ms(self.needed + self.witness),
            "gather_ms": self.gather_ms,
        })
    }
}

/// What one device did in a run.
#[derive(Debug, Clone, PartialEq)]
struct DeviceShare {
    device: usize,
    partitions: usize,
    median_ms: f64,
    total_ms: f64,
}

impl DeviceShare {
    fn line(&self) -> String {
        format!(
            "device {}: {} partitions, device {:.1} ms a partition (median), {:.2} s in all",
            self.device,
            self.partitions,
            self.median_ms,
            self.total_ms / 1e3
        )
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "device": self.device, "partitions": self.partitions,
            "device_ms_median": self.median_ms, "device_ms_total": self.total_ms,
        })
    }
}

/// The partitions each device ran and their device time, by device ordinal.
fn device_shares(parts: &[Partition]) -> Vec<DeviceShare> {
    let mut by: std::collections::BTreeMap<usize, Vec<f64>> = Default::default();
    for p in parts {
        if let Some(d) = p.report.device {
            by.entry(d).or_default().push(p.report.device_span_ms);
        }
    }
    by.into_iter()
        .map(|(device, ms)| DeviceShare {
            device,
            partitions: ms.len(),
            total_ms: ms.iter().sum(),
            median_ms: median(ms),
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n => v[n / 2],
    }
}

/// Host bytes a run of 2^k needs, roughly: the generated key's points and the lent witness
/// sets (three, each a, b, c and aux).
fn host_bytes(k: u32) -> u128 {
    let n = 1u128 << k;
    let aux = n - n / 16;
    let key = (n + aux + aux + aux / 4) * 96 + (aux / 4) * 192;
    let witnesses = 3 * 4 * n * 32;
    key + witnesses
}

/// Memory the kernel says is available (Linux), in bytes.
fn available_bytes() -> Option<u128> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Refuses what cannot run: a domain beyond the NTT's, or a generated job larger than the
/// host's memory (with the bytes it needs).
fn check_size(a: &Args) -> Result<(), Failure> {
    let max = zkpipe_ntt::MAX_LOG_N;
    if a.k == 0 || a.k > max {
        return Err(Failure::Usage(format!(
            "--k {} is out of range: domains run from 2^1 to 2^{max}",
            a.k
        )));
    }
    if a.k > a.real_max {
        let needed = host_bytes(a.k);
        if let Some(free) = available_bytes().filter(|&f| f < needed) {
            return Err(Failure::Usage(format!(
                "--k {} needs about {needed} bytes of host memory (a generated key and witnesses in flight); {free} are available",
                a.k
            )));
        }
    }
    Ok(())
}

/// Where the G2 MSM runs ([`G2Placement`] on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum G2Arg {
    /// On the host's cores, overlapping the next job's GPU work.
    Cpu,
    /// On the GPU, inside the job's lock.
    Gpu,
}

/// Which streamed points cross the link ([`StreamedPoints`] on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamedPointsArg {
    /// Every point of each query.
    All,
    /// Only those of variables whose value is not zero, gathered on the host.
    Nonzero,
}

/// The engine's configuration: the --config file's (else the defaults), with the options
/// given on the command line over it.
fn engine_config(a: &Args) -> Result<Config, Failure> {
    let base = match &a.config {
        Some(path) => Config::from_file(path).map_err(|e| Failure::Usage(e.to_string()))?,
        None => Config::default(),
    };
    let g2 = match a.g2 {
        None => base.g2,
        Some(G2Arg::Cpu) => G2Placement::Cpu,
        Some(G2Arg::Gpu) => G2Placement::Gpu,
    };
    let streamed_points = match a.streamed_points {
        None => base.streamed_points,
        Some(StreamedPointsArg::All) => StreamedPoints::All,
        Some(StreamedPointsArg::Nonzero) => StreamedPoints::Nonzero,
    };
    let vram_cap = a
        .vram_cap
        .or(a.vram_cap_gib.map(|g| (g * GIB) as usize))
        .or(base.vram_cap);
    let devices = match crate::devices::select(a.devices.as_deref().filter(|_| !a.cpu))? {
        Some(d) => Some(d),
        None => base.devices.clone(),
    };
    // One job waiting: witnesses are made as the engine takes them, so that memory in flight
    // is bounded (a 2^27 witness holds 16 GB).
    let keep_key_resident = base.keep_key_resident && !a.no_resident;
    let pin_key = base.pin_key && !a.no_pin;
    let backend = if a.cpu { Backend::Cpu } else { base.backend };
    let workers = a.workers.unwrap_or(base.workers_per_device);
    let key_multiples = a.key_multiples.unwrap_or(base.key_multiples);
    Ok(base
        .with_backend(backend)
        .with_devices(devices)
        .with_workers_per_device(workers)
        .with_g2(g2)
        .with_streamed_points(streamed_points)
        .with_vram_cap(vram_cap)
        .with_queue_capacity(1)
        .with_keep_key_resident(keep_key_resident)
        .with_key_multiples(key_multiples)
        .with_pin_key(pin_key))
}

pub fn run(a: &Args) -> Result<(), Failure> {
    let cfg = engine_config(a)?;
    check_size(a)?;
    let check = match a.params_unchecked {
        true => PointCheck::EncodingOnly,
        false => PointCheck::Every,
    };
    let Job {
        key,
        witnesses,
        inputs,
    } = match (&a.params, &a.witness_dir) {
        (Some(path), _) => params_job(path, check)?,
        (None, Some(dir)) => witness_dir_job(dir, check)?,
        (None, None) => job(a)?,
    };
    // Under a generated key no proof can verify: the engine's check before return is off, and
    // the proofs are compared with the CPU's instead (where that is done).
    let cfg = match (&witnesses, &inputs) {
        (Witnesses::Generated(_) | Witnesses::Recorded(_), None) => {
            cfg.with_proof_check(ProofCheck::Off)
        }
        _ => cfg,
    };
    let key = Arc::new(key);
    let log_n = key.domain_size().trailing_zeros();
    let pin = cfg.pin_key;
    let (workers, g2_on_gpu) = (cfg.workers_per_device, cfg.g2 == G2Placement::Gpu);
    let resident = cfg.keep_key_resident;
    // Generated witnesses go into pinned memory lent by the engine: three sets (one being
    // written, one queued, one uploading) reused from job to job.
    let pinned_witness = if a.cpu || !pin {
        cfg.pinned_witness
    } else {
        cfg.pinned_witness.max(witnesses.pinned_bytes(log_n, 3))
    };
    let engine = Engine::start(cfg.with_pinned_witness(pinned_witness)).map_err(Failure::start)?;
    let lend = engine.on_gpu()
        && pin
        && !a.cpu
        && matches!(witnesses, Witnesses::Generated(_) | Witnesses::Recorded(_));
    let witness_memory = match lend {
        true => WitnessMemory::Lent,
        false => WitnessMemory::Owned,
    };
    crate::say!("engine: {}", engine.backend());
    if engine.on_gpu() && pin {
        let t = Instant::now();
        engine.load_key(&key)?;
        crate::say!(
            "key: {:.2} GiB page-locked in {:.2} s",
            key.bytes() as f64 / GIB,
            t.elapsed().as_secs_f64()
        );
    }
    if lend {
        // The lent sets are page-locked once, before the clock starts, as a service does at
        // start-up (a fresh pinned allocation costs about 0.5 s per GiB on the H200).
        let t = Instant::now();
        match witnesses {
            Witnesses::Recorded(_) => {
                let sets: Vec<_> = (0..3)
                    .map(|_| engine.lend_aux(&key, LEND_WAIT))
                    .collect::<Result<_, _>>()?;
                drop(sets);
            }
            _ => {
                let sets: Vec<_> = (0..3)
                    .map(|_| engine.lend_witness(&key, LEND_WAIT))
                    .collect::<Result<_, _>>()?;
                drop(sets);
            }
        }
        crate::say!(
            "witness memory: {:.2} GiB page-locked in {:.2} s",
            witnesses.pinned_bytes(log_n, 3) as f64 / GIB,
            t.elapsed().as_secs_f64()
        );
    }
    let bar = if crate::json_logs() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(a.proofs as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} proofs, {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let t = Instant::now();
    let pvk = PreparedVerifyingKey::new(key.vk())?;
    let mut verified = 0;
    let mut parts = Vec::new();
    let mut first_proof = None;
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| -> Result<(), Failure> {
        // Witnesses are made as the engine takes them (submit blocks while the queue is
        // full), by `--producers` threads as a service's synthesis would run beside the
        // engine: one witness takes about as long to write as a 2^27 partition takes on the GPU.
        // Handles wait here in order; the channel's slots are allocated up front, so it holds
        // a few (the producers wait for the engine anyway).
        let (tx, rx) = crossbeam::channel::bounded(a.proofs.clamp(1, 64));
        let producers: Vec<_> = (0..a.producers)
            .map(|_| {
                let tx = tx.clone();
                let (next, witnesses, engine, key) = (&next, &witnesses, &engine, &key);
                scope.spawn(move || -> Result<(), String> {
                    while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < a.proofs {
                        let w = witnesses.next(engine, key, witness_memory)?;
                        let randomness = match a.fixed {
                            true => Randomness::Fixed {
                                r: Scalar::from(7u64),
                                s: Scalar::from(11u64),
                            },
                            false => Randomness::Random,
                        };
                        let h = engine
                            .submit(key, w, randomness)
                            .map_err(|e| e.to_string())?;
                        if tx.send(h).is_err() {
                            break;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        drop(tx);
        let mut prev = 0.0;
        for (i, h) in rx.iter().enumerate() {
            let (proof, report) = h.wait_report().map_err(Failure::job)?;
            first_proof.get_or_insert_with(|| proof.to_bytes());
            if let Some(inputs) = &inputs {
                if !verify(&pvk, &proof, inputs)? {
                    return Err(Failure::Unverified { proof: i + 1 });
                }
                verified += 1;
            }
            let part = Partition {
                report,
                done_s: t.elapsed().as_secs_f64(),
                rss: rss_bytes(),
                vram_high_water: engine.stats().vram_high_water,
            };
            bar.suspend(|| crate::say_line(&part.line(i, a.proofs, prev)));
            prev = part.done_s;
            parts.push(part);
            bar.inc(1);
        }
        for p in producers {
            p.join()
                .map_err(|_| "a witness producer panicked".to_string())??;
        }
        Ok(())
    })?;
    let wall = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    if let Some(path) = &a.metrics {
        std::fs::write(path, engine.metrics())
            .map_err(|e| format!("--metrics {}: {e}", path.display()))?;
    }
    let st = engine.shutdown();
    let per = |ms: f64| ms / a.proofs.max(1) as f64;
    let device = median(parts.iter().map(|p| p.report.device_span_ms).collect());
    // Steady state: the time between completions over the second half of the run (the
    // pipeline filled, the pinned witness sets allocated).
    let steady = match parts.len() {
        0 | 1 => wall * 1e3,
        k => {
            let from = (k / 2).min(k - 2);
            (parts[k - 1].done_s - parts[from].done_s) * 1e3 / (k - 1 - from) as f64
        }
    };
    let per_device = device_shares(&parts);
    let link = LinkFloor::of(&parts);
    // One device GPU-bound proves a partition per median device time: the rate this run's
    // steady state reached, against that.
    let scaling = match (device > 0.0, steady > 0.0) {
        (true, true) => Some(device / steady),
        _ => None,
    };
    let quarantined = engine.quarantined();
    if a.json {
        println!(
            "{}",
            json!({
                "per_device": per_device.iter().map(DeviceShare::json).collect::<Vec<_>>(),
                "scaling_vs_one_device": scaling,
                "quarantined": quarantined.iter().map(|q| json!({"device": q.device, "reason": q.reason})).collect::<Vec<_>>(),
                "moved_off_quarantined": st.moved_off_quarantined,
                "k": log_n, "proofs": a.proofs, "workers": workers, "backend": engine.backend(),
                "wall_s": wall, "proofs_per_s": a.proofs as f64 / wall, "verified": verified,
                "device_ms_per_partition_median": device, "steady_wall_ms_per_partition": steady,
                "partitions": parts.iter().map(Partition::json).collect::<Vec<_>>(),
                "link_per_partition": link.map(|l| l.json()),
                "h_ms_per_proof": per(st.h_ms), "g1_msm_ms_per_proof": per(st.g1_msm_ms),
                "g2_msm_ms_per_proof": per(st.g2_msm_ms), "staging_ms_per_proof": per(st.staging_ms),
                "gpu_lock_ms_per_proof": per(st.gpu_lock_ms), "upload_gbps": st.upload_gbps,
                "h_gpu_ms_per_proof": per(st.h_gpu_ms), "msm_gpu_ms_per_proof": per(st.msm_gpu_ms),
                "key_pinned_bytes": st.key_pinned_bytes, "key_resident": resident,
                "key_h_copies": st.key_h_copies,
                "vram_high_water_bytes": st.vram_high_water,
                "vram_budget_high_water_bytes": st.vram_budget_high_water,
                "pinned_high_water_bytes": st.pinned_high_water,
                "done": st.done, "failed": st.failed,
                "first_proof_hex": first_proof.map(|p| hex(&p)),
            })
        );
    } else {
        println!(
            "{} proofs of 2^{} on {} in {wall:.2} s: {:.2} proofs/s; {verified} verified",
            a.proofs,
            log_n,
            engine.backend(),
            a.proofs as f64 / wall
        );
        if let Some(plan) = parts.first().and_then(|p| p.report.plan) {
            println!("plan: {plan}");
        }
        if let (true, Some(p)) = (a.fixed, &first_proof) {
            println!("first proof (fixed r, s): {}", hex(p));
        }
        if device > 0.0 {
            println!(
                "per partition: device {device:.1} ms (median, CUDA events); wall {steady:.1} ms between completions in steady state (second half of the run; {:.2}x the device time)",
                steady / device
            );
        }
        if let Some(l) = &link {
            println!("{}", l.line());
        }
        if let Some(x) = scaling.filter(|_| !per_device.is_empty()) {
            for d in &per_device {
                println!("{}", d.line());
            }
            println!(
                "throughput {:.2} partitions/s in steady state: {x:.2}x one device's GPU-bound rate (1 / the median device time)",
                1e3 / steady
            );
        }
        for q in &quarantined {
            println!("device {} quarantined: {}", q.device, q.reason);
        }
        if st.moved_off_quarantined > 0 {
            println!(
                "{} jobs moved off quarantined devices to the others",
                st.moved_off_quarantined
            );
        }
        let g2 = if g2_on_gpu && engine.on_gpu() {
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
                "witness staged {:.2} GB at {:.1} GB/s through {:.2} GiB of pinned staging; VRAM high-water {:.2} GiB measured, {:.2} GiB granted by the budget; key {}{}",
                st.uploaded_bytes as f64 / 1e9,
                st.upload_gbps,
                st.pinned_high_water as f64 / GIB,
                st.vram_high_water as f64 / GIB,
                st.vram_budget_high_water as f64 / GIB,
                if st.key_pinned_bytes > 0 {
                    "page-locked"
                } else {
                    "pageable"
                },
                match st.key_h_copies {
                    0 => String::new(),
                    1 => ", resident".to_string(),
                    c => format!(", resident with H in {c} copies (precomputed multiples)"),
                },
            );
        }
    }
    if st.failed > 0 {
        return Err(Failure::Jobs(format!("{} jobs failed", st.failed)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(device: Option<usize>, ms: f64) -> Partition {
        Partition {
            report: JobReport {
                device,
                device_span_ms: ms,
                ..JobReport::default()
            },
            done_s: 0.0,
            rss: None,
            vram_high_water: 0,
        }
    }

    #[test]
    fn the_link_floor_is_the_median_partitions_bytes_at_the_busy_rate() {
        let streamed = |bytes: u64, busy_ms: f64| {
            let mut p = part(Some(0), 1000.0);
            p.report.uploaded_bytes = 10_000_000_000;
            p.report.link = zkpipe_pipeline::LinkReport {
                bases_bytes: bytes,
                bases_needed_bytes: bytes / 2,
                bases_busy_ms: busy_ms,
                gather_ms: 0.0,
            };
            p
        };
        assert_eq!(LinkFloor::of(&[part(Some(0), 5.0)]), None, "a resident key");
        let parts = [
            streamed(40_000_000_000, 800.0),
            streamed(50_000_000_000, 1000.0),
            streamed(60_000_000_000, 1200.0),
        ];
        let f = LinkFloor::of(&parts).unwrap();
        assert_eq!(f.gbps, 50.0);
        assert_eq!(f.busy_share, 1.0);
        // 50 GB of points and 10 of witness at 50 GB/s; half the points with 10 of witness.
        assert_eq!(f.ms(f.bases + f.witness), 1200.0);
        assert_eq!(f.ms(f.needed + f.witness), 700.0);
        assert!(
            f.line().contains("floor at that rate 1200 ms"),
            "{}",
            f.line()
        );
        assert_eq!(f.json()["floor_needed_ms"], 700.0);
    }

    #[test]
    fn device_shares_group_partitions_by_device() {
        let parts = [
            part(Some(1), 10.0),
            part(Some(0), 30.0),
            part(Some(1), 14.0),
            part(None, 99.0),
            part(Some(1), 12.0),
        ];
        let shares = device_shares(&parts);
        assert_eq!(
            shares,
            vec![
                DeviceShare {
                    device: 0,
                    partitions: 1,
                    median_ms: 30.0,
                    total_ms: 30.0
                },
                DeviceShare {
                    device: 1,
                    partitions: 3,
                    median_ms: 12.0,
                    total_ms: 36.0
                },
            ]
        );
        assert!(shares[1].line().starts_with("device 1: 3 partitions"));
        assert!(device_shares(&[part(None, 5.0)]).is_empty(), "CPU jobs");
    }
}
