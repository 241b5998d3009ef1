//! `zkpipe filecoin`: Filecoin's proofs from their real inputs (`porep-c2`, `window-post`,
//! `winning-post`, `snap`), and `gen`, which makes such inputs with filecoin-proofs on the CPU.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use serde_json::json;
use zkpipe_filecoin::gen::{self, SectorData};
use zkpipe_filecoin::request::{self, parse_hex32};
use zkpipe_filecoin::{
    witness_bytes, FilecoinError, ParamsCache, PoRepC2, ProofOutput, ProveOptions, Prover, Request,
    Retry, Synthesis,
};
use zkpipe_pipeline::{Backend, Config, Engine, G2Placement, Randomness};

use zkpipe_serve::{CircuitConfig, ExportedWitness};

use crate::exit::Failure;

/// `zkpipe filecoin …`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// PoRep C2: a C1 output (seal_commit_phase1's JSON, as Lotus and Curio store it) to the
    /// proof bytes of SealCommitPhase2Output.
    PorepC2 {
        /// The C1 output: filecoin-proofs-api's JSON, or filecoin-proofs' own with
        /// --registered-proof.
        #[arg(long)]
        c1: PathBuf,
        /// The storage provider's id: 64 hex digits.
        #[arg(long)]
        prover_id: String,
        /// The sector's number.
        #[arg(long)]
        sector_id: u64,
        /// The registered proof (e.g. StackedDrg32GiBV1_1), for a C1 output without one.
        #[arg(long)]
        registered_proof: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// WindowPoSt from a request file (registered proof, randomness, prover id, vanilla
    /// proofs; `zkpipe filecoin gen window-post` writes one).
    WindowPost {
        /// The request (JSON).
        #[arg(long)]
        request: PathBuf,
        /// Prove only this partition (its sectors' vanilla proofs in the request).
        #[arg(long)]
        partition: Option<usize>,
        #[command(flatten)]
        common: Common,
    },
    /// WinningPoSt from a request file.
    WinningPost {
        /// The request (JSON).
        #[arg(long)]
        request: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// SnapDeals (an empty sector update's proof) from a request file.
    Snap {
        /// The request (JSON).
        #[arg(long)]
        request: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Makes real inputs with filecoin-proofs on the CPU: seals a sector of random data (zeros
    /// for snap's sector key) under --dir and writes the C1 output or request file there.
    Gen {
        /// porep-c2, window-post, winning-post or snap.
        #[arg(value_enum)]
        kind: GenKind,
        /// 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
        #[arg(long, value_parser = parse_sector_size)]
        sector_size: u64,
        /// Where the sector and the inputs go.
        #[arg(long)]
        dir: PathBuf,
    },
}

/// The kinds `gen` makes inputs for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GenKind {
    PorepC2,
    WindowPost,
    WinningPost,
    Snap,
}

/// Options every proving command takes.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// Where the proof bytes go.
    #[arg(long, required_unless_present = "export_witness")]
    out: Option<PathBuf>,
    /// Prove nothing: write one partition's witness (synthesized on the CPU, checked against
    /// the verifier's public inputs) into this directory with its circuit's entry (the
    /// parameter file and the recording, made beside it where missing), as the daemon's
    /// generic kind takes it: `[serve.circuits.NAME]` from circuit.toml, then `zkpipe client
    /// bench --circuit NAME=DIR` or `zkpipe prove --witness-dir DIR`.
    #[arg(long, conflicts_with_all = ["compare_bellperson", "verify"])]
    export_witness: Option<PathBuf>,
    /// The partition --export-witness writes.
    #[arg(long, default_value_t = 0, requires = "export_witness")]
    export_partition: usize,
    /// The parameter directory [default: FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters].
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// Every stage on the CPU.
    #[arg(long)]
    cpu: bool,
    /// Workers per device.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Partitions synthesized at once.
    #[arg(long, default_value_t = 2)]
    synthesis: usize,
    /// Fixed r and s (the same inputs then give the same bytes).
    #[arg(long)]
    fixed: bool,
    /// Prove with bellperson's create_proof on the CPU too (same circuits, parameters, r and
    /// s; implies --fixed), print its time and fail unless the bytes are equal.
    #[arg(long)]
    compare_bellperson: bool,
    /// Check the bytes with filecoin-proofs' own verifier too (reads the .vk from the
    /// parameter directory).
    #[arg(long)]
    verify: bool,
    /// Where a partition whose proof failed the engine's check is proved again: engine (the
    /// next free worker or device) or cpu (an engine of the CPU's own).
    #[arg(long, value_enum, default_value_t = RetryOn::Engine)]
    retry: RetryOn,
    /// How each partition's witness is made: recorded (the circuit recorded once into a
    /// file beside the parameters, then per partition the witness alone) or full
    /// (bellperson's synthesis of every constraint).
    #[arg(long, value_enum, default_value_t = SynthesisArg::Recorded)]
    witness: SynthesisArg,
    /// Print JSON instead of text at the end.
    #[arg(long)]
    json: bool,
}

/// `--witness`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SynthesisArg {
    Recorded,
    Full,
}

/// `--retry`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RetryOn {
    Engine,
    Cpu,
}

/// A sector size as Filecoin names them (2KiB … 64GiB) or in bytes.
pub(crate) fn parse_sector_size(s: &str) -> Result<u64, String> {
    zkpipe_filecoin::keys::parse_sector_size(s).map_err(|e| e.to_string())
}

fn failure(e: FilecoinError) -> Failure {
    Failure::Filecoin(Box::new(e))
}

pub fn run(command: &Command) -> Result<(), Failure> {
    let (request, common) = match command {
        Command::Gen {
            kind,
            sector_size,
            dir,
        } => return generate(*kind, *sector_size, dir).map_err(failure),
        Command::PorepC2 {
            c1,
            prover_id,
            sector_id,
            registered_proof,
            common,
        } => {
            let registered = registered_proof
                .as_deref()
                .map(|r| serde_json::from_value(json!(r)))
                .transpose()
                .map_err(|e| Failure::Usage(format!("--registered-proof: {e}")))?;
            let prover_id = parse_hex32("--prover-id", prover_id).map_err(failure)?;
            let r =
                PoRepC2::from_c1_file(c1, registered, prover_id, *sector_id).map_err(failure)?;
            (Request::PoRepC2(Box::new(r)), common)
        }
        Command::WindowPost {
            request,
            partition,
            common,
        } => {
            let mut r: zkpipe_filecoin::WindowPoSt =
                request::from_file(request, "the WindowPoSt request").map_err(failure)?;
            r.partition = partition.or(r.partition);
            (Request::WindowPoSt(r), common)
        }
        Command::WinningPost { request, common } => (
            Request::WinningPoSt(
                request::from_file(request, "the WinningPoSt request").map_err(failure)?,
            ),
            common,
        ),
        Command::Snap { request, common } => (
            Request::Snap(request::from_file(request, "the SnapDeals request").map_err(failure)?),
            common,
        ),
    };
    prove(&request, common)
}

fn prove(request: &Request, c: &Common) -> Result<(), Failure> {
    let dir = c.params_dir.clone().unwrap_or_else(default_params_dir);
    // filecoin-proofs' verifier reads the .vk from this variable: the same directory.
    std::env::set_var(zkpipe_filecoin::params::PARAMETER_CACHE_ENV, &dir);
    let fixed = (c.fixed || c.compare_bellperson).then(|| {
        (
            blstrs::Scalar::from(0x5eed_0001u64),
            blstrs::Scalar::from(0x5eed_0002u64),
        )
    });
    let options = ProveOptions {
        synthesis_threads: c.synthesis.max(1),
        randomness: match fixed {
            Some((r, s)) => Randomness::Fixed { r, s },
            None => Randomness::Random,
        },
        retry: match c.retry {
            RetryOn::Engine => Retry::Engine,
            RetryOn::Cpu => Retry::Cpu,
        },
        synthesis: match c.witness {
            SynthesisArg::Recorded => Synthesis::Recorded,
            SynthesisArg::Full => Synthesis::Full,
        },
    };
    let prover = Prover::new(ParamsCache::new(&dir), options);
    crate::say!(
        "{}: reading the parameters from {}",
        request.kind(),
        dir.display()
    );
    if let Some(dir) = &c.export_witness {
        return export_witness(&prover, request, c.export_partition, dir);
    }
    let Some(out_path) = &c.out else {
        return Err(Failure::Usage("--out is required to prove".into()));
    };
    let key = prover.key(request).map_err(failure)?;
    crate::say!(
        "parameters: {} ({:?}; read in {:.0} ms{})",
        key.path.display(),
        key.trust,
        key.read_ms,
        if key.generated_ms > 0.0 {
            format!(", generated in {:.0} ms", key.generated_ms)
        } else {
            String::new()
        }
    );
    let workers = c.workers.max(1);
    let cfg = match c.cpu {
        true => Config::default().with_backend(Backend::Cpu),
        false => Config::default()
            .with_workers_per_device(workers)
            .with_g2(G2Placement::Gpu)
            .with_pinned_witness(
                (options.synthesis_threads + workers + 1)
                    * witness_bytes(&key.key, options.synthesis),
            ),
    };
    let engine = Engine::start(cfg).map_err(Failure::start)?;
    crate::say!("engine: {}", engine.backend());
    let out = prover.prove(&engine, request).map_err(failure)?;
    std::fs::write(out_path, &out.bytes)
        .map_err(|e| Failure::Other(format!("writing {}: {e}", out_path.display()).into()))?;
    report(request, &out, crate::Output::json_if(c.json));
    if let Some((r, s)) = fixed.filter(|_| c.compare_bellperson) {
        let reference = prover
            .prove_with_bellperson(request, r, s)
            .map_err(failure)?;
        let total: f64 = reference.partition_ms.iter().sum();
        crate::say!(
            "bellperson create_proof on the CPU: {:.0} ms ({:?} ms a partition); bytes {}",
            total,
            reference
                .partition_ms
                .iter()
                .map(|m| m.round())
                .collect::<Vec<_>>(),
            if reference.bytes == out.bytes {
                "equal"
            } else {
                "DIFFERENT"
            }
        );
        if reference.bytes != out.bytes {
            return Err(Failure::Unverified { proof: 0 });
        }
    }
    if c.verify {
        let ok =
            zkpipe_filecoin::verify::with_filecoin_proofs(request, &out.bytes).map_err(failure)?;
        crate::say!(
            "filecoin-proofs' verifier: {}",
            if ok { "accepts" } else { "REFUSES" }
        );
        if !ok {
            return Err(Failure::Unverified { proof: 0 });
        }
    }
    Ok(())
}

/// `--export-witness DIR`: partition `partition`'s witness of `request` into `dir`.
fn export_witness(
    prover: &Prover,
    request: &Request,
    partition: usize,
    dir: &Path,
) -> Result<(), Failure> {
    let t = std::time::Instant::now();
    let w = prover
        .partition_witness(request, partition)
        .map_err(failure)?;
    let digest = zkpipe_filecoin::params::file_digest(&w.params).map_err(failure)?;
    let circuit = CircuitConfig {
        params: w.params.clone(),
        recording: w.recording.clone(),
        params_digest: Some(digest),
    };
    ExportedWitness::new(circuit, &w.inputs, &w.aux)
        .write(dir)
        .map_err(|e| Failure::Other(Box::new(e)))?;
    crate::say!(
        "{} partition {partition}: witness of {} inputs and {} aux values written to {} in {:.1} s (parameters {}, recording {})",
        request.kind(),
        w.inputs.len(),
        w.aux.len(),
        dir.display(),
        t.elapsed().as_secs_f64(),
        w.params.display(),
        w.recording.display()
    );
    Ok(())
}

fn report(request: &Request, out: &ProofOutput, output: crate::Output) {
    if output == crate::Output::Json {
        let parts: Vec<_> = out
            .partitions
            .iter()
            .map(|p| {
                json!({
                    "partition": p.partition,
                    "constraints": p.constraints,
                    "synthesis_ms": p.synthesis_ms,
                    "device_ms": p.job.device_span_ms,
                    "check_ms": p.job.check_ms,
                    "wall_ms": p.wall_ms,
                    "retried": p.retried,
                })
            })
            .collect();
        println!(
            "{}",
            json!({"kind": request.kind(), "bytes": out.bytes.len(), "wall_ms": out.wall_ms, "partitions": parts})
        );
        return;
    }
    for p in &out.partitions {
        println!(
            "partition {:>2}: {:>10} constraints  synthesis {:>8.1} ms  device {:>8.1} ms  check {:>5.1} ms  wall {:>8.1} ms{}",
            p.partition,
            p.constraints,
            p.synthesis_ms,
            p.job.device_span_ms,
            p.job.check_ms,
            p.wall_ms,
            if p.retried { "  (proved again after a refused proof)" } else { "" }
        );
    }
    println!(
        "{}: {} bytes, {} partitions, {:.1} ms",
        request.kind(),
        out.bytes.len(),
        out.partitions.len(),
        out.wall_ms
    );
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), FilecoinError> {
    let bytes = serde_json::to_vec(value).map_err(|source| FilecoinError::Json {
        what: "the generated input",
        source,
    })?;
    std::fs::write(path, bytes).map_err(|source| FilecoinError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn generate(kind: GenKind, sector_size: u64, dir: &Path) -> Result<(), FilecoinError> {
    std::fs::create_dir_all(dir).map_err(|source| FilecoinError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let data = match kind {
        GenKind::Snap => SectorData::Zeros,
        _ => SectorData::Random,
    };
    crate::say!(
        "sealing a {sector_size}-byte sector under {}",
        dir.display()
    );
    let sealed = gen::seal_sector(dir, sector_size, data)?;
    let (path, args) = match kind {
        GenKind::PorepC2 => {
            let inputs = gen::porep_c2(&sealed)?;
            let path = dir.join("c1.json");
            write_json(&path, &inputs.request.c1)?;
            let args = format!(
                "--c1 {} --prover-id {} --sector-id {}",
                path.display(),
                hex::encode(sealed.prover_id),
                sealed.sector_id
            );
            (path, args)
        }
        GenKind::WindowPost => {
            let path = dir.join("window-post.json");
            write_json(&path, &gen::window_post(&sealed)?)?;
            (path.clone(), format!("--request {}", path.display()))
        }
        GenKind::WinningPost => {
            let path = dir.join("winning-post.json");
            write_json(&path, &gen::winning_post(&sealed)?)?;
            (path.clone(), format!("--request {}", path.display()))
        }
        GenKind::Snap => {
            let path = dir.join("snap.json");
            write_json(&path, &gen::snap(dir, &sealed)?)?;
            (path.clone(), format!("--request {}", path.display()))
        }
    };
    // The proving command's input arguments, for scripts.
    let args_path = dir.join("args");
    std::fs::write(&args_path, &args).map_err(|source| FilecoinError::Read {
        path: args_path,
        source,
    })?;
    let name = kind
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let next = format!(
        "zkpipe filecoin {name} {args} --out {}",
        dir.join(format!("{name}.proof")).display()
    );
    crate::say!("wrote {}; prove it with:\n  {next}", path.display());
    Ok(())
}

/// The directory filecoin-proofs reads parameters from: `FIL_PROOFS_PARAMETER_CACHE`, else its
/// default.
pub(crate) fn default_params_dir() -> PathBuf {
    std::env::var_os(zkpipe_filecoin::params::PARAMETER_CACHE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(zkpipe_filecoin::params::DEFAULT_PARAMETER_CACHE))
}
