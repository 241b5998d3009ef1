//! `zkpipe serve`: the proving daemon; `zkpipe client`: its command-line client.

use std::path::PathBuf;
use std::sync::Arc;

use zkpipe_filecoin::{KeyKind, KeyName, ParamsCache, ProveOptions, Prover};
use zkpipe_pipeline::{Backend, Engine};
use zkpipe_serve::pb::{self, submit_request::Proof};
use zkpipe_serve::{Circuits, Daemon, ProverService, RequestThreads};

use crate::exit::Failure;

/// `zkpipe serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The configuration: a `[serve]` table (socket, tcp, token_file, tls_cert, tls_key, http,
    /// jobs, queue, keep_finished_s, max_message, params_dir, synthesis_threads,
    /// request_threads, …) beside the engine's fields. Every field has a default; without a
    /// file the daemon listens on zkpipe.sock.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Prove on the CPU whatever the configuration says.
    #[arg(long)]
    cpu: bool,
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Runtime::new()
        .map_err(|e| Failure::Other(format!("starting the async runtime: {e}").into()))
}

/// Resolves at the first SIGTERM or Ctrl-C, once the daemon has drained (running jobs
/// finished, queued ones answered); a second signal exits at once.
async fn drained_on_signal(daemon: Arc<Daemon>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        tracing::error!("SIGTERM cannot be caught: the daemon stops only when killed");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    crate::say!("draining: running jobs finish, queued ones are answered, new ones refused (signal again to stop at once)");
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        crate::say!("stopping at once");
        std::process::exit(130);
    });
    let _ = tokio::task::spawn_blocking(move || daemon.drain()).await;
}

/// `zkpipe serve`: runs the daemon until a signal drains it.
pub fn serve(a: &ServeArgs) -> Result<(), Failure> {
    let (cfg, engine_cfg) = match &a.config {
        Some(path) => zkpipe_serve::read_config(path).map_err(|e| Failure::Usage(e.to_string()))?,
        None => (
            zkpipe_serve::ServeConfig::default(),
            zkpipe_serve::default_engine_config(),
        ),
    };
    let engine_cfg = match a.cpu {
        true => engine_cfg.with_backend(Backend::Cpu),
        false => engine_cfg,
    };
    let engine_cfg = with_witness_pool(engine_cfg, cfg.synthesis_threads);
    let dir = cfg
        .params_dir
        .clone()
        .unwrap_or_else(crate::filecoin::default_params_dir);
    // filecoin-proofs' verifiers (the check of each proof) read the same directory.
    std::env::set_var(zkpipe_filecoin::params::PARAMETER_CACHE_ENV, &dir);
    let preload = cfg
        .preload
        .iter()
        .map(|s| {
            s.parse::<KeyName>()
                .map_err(|e| Failure::Usage(format!("[serve] preload: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let params = match cfg.key_budget {
        Some(bytes) => ParamsCache::new(&dir)
            .with_key_budget(bytes)
            .with_key_wait(std::time::Duration::from_secs(cfg.key_wait_s)),
        None => ParamsCache::new(&dir),
    };
    let params =
        params.with_warm_budget(cfg.warm_key_budget.or(cfg.key_budget).unwrap_or(usize::MAX));
    let prover = Prover::new(
        params,
        ProveOptions {
            synthesis_threads: cfg.synthesis_threads.max(1),
            ..ProveOptions::default()
        },
    );
    let circuits = Circuits::register(&prover, &cfg.circuits)
        .map_err(|e| Failure::Usage(format!("[serve.circuits] {e}")))?;
    for c in circuits.summaries() {
        crate::say!(
            "circuit {}: {} inputs, {} aux, {} constraints ({})",
            c.name,
            c.inputs,
            c.aux,
            c.constraints,
            c.params.display()
        );
    }
    let engine = Engine::start(engine_cfg).map_err(Failure::start)?;
    crate::say!(
        "engine: {}; parameters: {}",
        engine.backend(),
        dir.display()
    );
    let request_threads = RequestThreads::new(cfg.request_threads, cfg.request_nice)
        .map_err(|e| Failure::Other(Box::new(e)))?;
    let daemon = Daemon::start(prover, engine, circuits, cfg.limits(), request_threads);
    for name in preload {
        let key = daemon
            .preload(name)
            .map_err(|e| Failure::Usage(format!("[serve] preload {name}: {e}")))?;
        crate::say!(
            "preloaded {name}: {} ({} bytes)",
            key.path.display(),
            key.key.bytes()
        );
    }
    let service = ProverService::new(Arc::clone(&daemon));
    runtime()?
        .block_on(zkpipe_serve::serve(
            service,
            &cfg,
            drained_on_signal(daemon),
        ))
        .map_err(|e| Failure::Other(Box::new(e)))
}

/// Page-locked memory a GPU daemon lends its partitions' witnesses when the configuration
/// names none: one 32 GiB PoRep partition's aux values (the recorded path's witness, the
/// largest of Filecoin's kinds) for each partition synthesizing or on the engine at once (the
/// engine's slots: its workers, one routine partition waiting, one kept for urgent work). It
/// is allocated as first needed, so smaller sectors take only what they use. Without a pool
/// a GPU engine lends nothing and every Filecoin proof would fail.
fn with_witness_pool(
    engine: zkpipe_pipeline::Config,
    synthesis_threads: usize,
) -> zkpipe_pipeline::Config {
    const PARTITION_AUX: usize = 32 << 27;
    if engine.backend == Backend::Cpu || engine.pinned_witness > 0 {
        return engine;
    }
    let partitions = synthesis_threads.max(1) + engine.workers_per_device.max(1) + 2;
    let bytes = partitions * PARTITION_AUX;
    crate::say!("pinned_witness not set: up to {bytes} bytes of page-locked memory for witnesses ({partitions} partitions' aux values)");
    engine.with_pinned_witness(bytes)
}

/// `zkpipe client`.
#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    /// The daemon's unix socket.
    #[arg(long, conflicts_with = "tcp", default_value = "zkpipe.sock")]
    socket: PathBuf,
    /// The daemon's TCP address (needs --token-file).
    #[arg(long, requires = "token_file")]
    tcp: Option<std::net::SocketAddr>,
    /// The file holding the daemon's bearer token (its first line).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Over TCP, speak TLS and trust the daemon's certificate when this certificate (PEM: the
    /// authority that signed it, or the daemon's own when self-signed) vouches for it.
    #[arg(long, requires = "tcp")]
    tls_ca: Option<PathBuf>,
    /// The name the daemon's certificate must carry (with --tls-ca).
    #[arg(long, requires = "tls_ca", default_value = "localhost")]
    tls_domain: String,
    #[command(subcommand)]
    command: ClientCommand,
}

/// What a submission carries.
#[derive(Debug, clap::Args)]
struct Submission {
    /// The idempotency key (default: the request's content digest).
    #[arg(long, global = true)]
    request_id: Option<String>,
    /// low, normal, high or critical (default: the kind's own).
    #[arg(long, value_enum, global = true)]
    priority: Option<PriorityArg>,
    /// Milliseconds within which the job must start; one still queued then ends EXPIRED
    /// without running (default: no deadline).
    #[arg(long, global = true)]
    deadline_ms: Option<u64>,
    #[command(subcommand)]
    proof: ProofArg,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PriorityArg {
    Low,
    Normal,
    High,
    Critical,
}

#[derive(Debug, clap::Subcommand)]
enum ProofArg {
    /// PoRep C2 from a C1 output (JSON).
    PorepC2 {
        #[arg(long)]
        c1: PathBuf,
        /// The storage provider's id: 64 hex digits.
        #[arg(long)]
        prover_id: String,
        #[arg(long)]
        sector_id: u64,
        /// For filecoin-proofs' own form of the C1 output: its registered proof's name.
        #[arg(long)]
        registered_proof: Option<String>,
    },
    /// WindowPoSt from a request file (as `zkpipe filecoin window-post` takes).
    WindowPost {
        #[arg(long)]
        request: PathBuf,
    },
    /// WinningPoSt from a request file.
    WinningPost {
        #[arg(long)]
        request: PathBuf,
    },
    /// SnapDeals from a request file.
    Snap {
        #[arg(long)]
        request: PathBuf,
    },
    /// A witness of a circuit registered in the daemon's configuration.
    Circuit {
        /// The circuit's name there.
        #[arg(long)]
        name: String,
        /// The public inputs without the constant one: 32 bytes each, canonical
        /// little-endian (none when the circuit has none).
        #[arg(long)]
        inputs: Option<PathBuf>,
        /// The aux values: 32 bytes each, canonical little-endian.
        #[arg(long)]
        aux: PathBuf,
    },
}

#[derive(Debug, clap::Subcommand)]
enum ClientCommand {
    /// Submit a proof and wait for it; the proof bytes go to --out.
    Prove {
        #[command(flatten)]
        submission: Submission,
        /// Where the proof bytes go (required).
        #[arg(long, global = true)]
        out: Option<PathBuf>,
    },
    /// Submit a proof; print its job id.
    Submit {
        #[command(flatten)]
        submission: Submission,
    },
    /// Wait for a job (at most --timeout-ms; 0: until it ends); the proof bytes go to --out.
    Await {
        job_id: String,
        #[arg(long, default_value_t = 0)]
        timeout_ms: u64,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Cancel a job: a queued one now, a running one at its next partition.
    Cancel { job_id: String },
    /// Read a proving key into the daemon (and page-lock it on a GPU) before its first proof.
    Preload(KeyArgs),
    /// Let go of a proving key no job holds.
    Evict(KeyArgs),
    /// The daemon's status, as JSON.
    Status,
    /// The daemon's and the engine's figures, in the Prometheus text format.
    Metrics,
    /// A mix of proof kinds at given rates for a given time: proofs per hour and latency
    /// percentiles per kind (a table on standard error, JSON on standard output).
    Bench(crate::serve_bench::BenchArgs),
}

/// A proving key by what it proves.
#[derive(Debug, clap::Args)]
struct KeyArgs {
    /// porep-c2, window-post, winning-post or snap.
    #[arg(long, value_parser = |s: &str| s.parse::<KeyKind>().map_err(|e| e.to_string()))]
    kind: KeyKind,
    /// 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long, value_parser = crate::filecoin::parse_sector_size)]
    sector_size: u64,
}

impl KeyArgs {
    fn pb_kind(&self) -> i32 {
        let kind = match self.kind {
            KeyKind::PorepC2 => pb::KeyKind::PorepC2,
            KeyKind::WindowPost => pb::KeyKind::WindowPost,
            KeyKind::WinningPost => pb::KeyKind::WinningPost,
            KeyKind::Snap => pb::KeyKind::Snap,
        };
        kind.into()
    }
}

fn read(path: &PathBuf) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::Usage(format!("reading {}: {e}", path.display())))
}

impl Submission {
    fn request(&self) -> Result<pb::SubmitRequest, Failure> {
        let proof = match &self.proof {
            ProofArg::PorepC2 {
                c1,
                prover_id,
                sector_id,
                registered_proof,
            } => Proof::PorepC2(pb::PoRepC2 {
                c1_json: read(c1)?,
                prover_id: zkpipe_filecoin::request::parse_hex32("--prover-id", prover_id)
                    .map_err(|e| Failure::Usage(e.to_string()))?
                    .to_vec(),
                sector_id: *sector_id,
                registered_proof: registered_proof.clone().unwrap_or_default(),
            }),
            ProofArg::WindowPost { request } => Proof::WindowPostJson(read(request)?),
            ProofArg::WinningPost { request } => Proof::WinningPostJson(read(request)?),
            ProofArg::Snap { request } => Proof::SnapJson(read(request)?),
            ProofArg::Circuit { name, inputs, aux } => Proof::CircuitWitness(pb::CircuitWitness {
                circuit: name.clone(),
                inputs: inputs
                    .as_ref()
                    .map(read)
                    .transpose()?
                    .unwrap_or_default()
                    .into(),
                aux: read(aux)?.into(),
            }),
        };
        let priority = match self.priority {
            None => pb::Priority::Unspecified,
            Some(PriorityArg::Low) => pb::Priority::Low,
            Some(PriorityArg::Normal) => pb::Priority::Normal,
            Some(PriorityArg::High) => pb::Priority::High,
            Some(PriorityArg::Critical) => pb::Priority::Critical,
        };
        let mut req = pb::SubmitRequest {
            request_id: self.request_id.clone().unwrap_or_default(),
            priority: priority.into(),
            deadline_ms: self.deadline_ms.unwrap_or(0),
            proof: Some(proof),
        };
        if req.request_id.is_empty() {
            use prost::Message;
            req.request_id = blake3::hash(&req.encode_to_vec()).to_hex().to_string();
        }
        Ok(req)
    }
}

/// The answer of an await: the proof written to `out`, a line on standard output, or the
/// job's failure.
fn finish(answer: pb::AwaitResponse, out: Option<&PathBuf>) -> Result<(), Failure> {
    let state = answer.state();
    println!(
        "{}",
        serde_json::json!({
            "job_id": answer.job_id, "state": state.as_str_name(), "kind": answer.kind,
            "partitions": answer.partitions, "proof_bytes": answer.proof.len(),
            "queue_wait_ms": answer.queue_wait_ms, "run_ms": answer.run_ms, "error": answer.error,
        })
    );
    match state {
        pb::JobState::Completed => match out {
            Some(path) => std::fs::write(path, &answer.proof)
                .map_err(|e| Failure::Other(format!("writing {}: {e}", path.display()).into())),
            None => Ok(()),
        },
        pb::JobState::Pending | pb::JobState::Running => Ok(()),
        _ => Err(Failure::Jobs(format!(
            "job {} {}: {}",
            answer.job_id,
            state.as_str_name(),
            answer.error
        ))),
    }
}

/// A client's Prove as the bench calls it.
macro_rules! prove_call {
    ($client:expr) => {{
        let client = $client;
        let call: crate::serve_bench::ProveCall = Arc::new(move |req| {
            let mut c = client.clone();
            Box::pin(async move { c.prove(req).await.map(|r| r.into_inner()) })
        });
        call
    }};
}

/// One command on `$client`; `$connect` opens another connection (the bench's).
macro_rules! call {
    ($client:expr, $a:expr, $connect:expr) => {{
        let mut c = $client;
        let status = |e: tonic::Status| {
            Failure::Other(format!("the daemon refused: {:?}: {}", e.code(), e.message()).into())
        };
        match &$a.command {
            ClientCommand::Prove { submission, out } => {
                let out = out
                    .as_ref()
                    .ok_or_else(|| Failure::Usage("prove needs --out FILE for the proof".into()))?;
                let answer = c
                    .prove(submission.request()?)
                    .await
                    .map_err(status)?
                    .into_inner();
                finish(answer, Some(out))
            }
            ClientCommand::Submit { submission } => {
                let s = c
                    .submit(submission.request()?)
                    .await
                    .map_err(status)?
                    .into_inner();
                println!(
                    "{}",
                    serde_json::json!({"job_id": s.job_id, "queue_position": s.queue_position, "existing": s.existing})
                );
                Ok(())
            }
            ClientCommand::Await {
                job_id,
                timeout_ms,
                out,
            } => {
                let answer = c
                    .r#await(pb::AwaitRequest {
                        job_id: job_id.clone(),
                        timeout_ms: *timeout_ms,
                    })
                    .await
                    .map_err(status)?
                    .into_inner();
                finish(answer, out.as_ref())
            }
            ClientCommand::Cancel { job_id } => {
                let r = c
                    .cancel(pb::CancelRequest {
                        job_id: job_id.clone(),
                    })
                    .await
                    .map_err(status)?
                    .into_inner();
                println!("{}", serde_json::json!({"job_id": job_id, "state": r.state().as_str_name()}));
                Ok(())
            }
            ClientCommand::Status => {
                let s = c
                    .get_status(pb::StatusRequest {})
                    .await
                    .map_err(status)?
                    .into_inner();
                let name = |p: pb::Priority| p.as_str_name().to_lowercase();
                let queues: serde_json::Map<String, serde_json::Value> = s
                    .queues
                    .iter()
                    .filter(|q| q.kind.is_empty())
                    .map(|q| (name(q.priority()), q.pending.into()))
                    .collect();
                let by_kind: Vec<serde_json::Value> = s
                    .queues
                    .iter()
                    .filter(|q| !q.kind.is_empty())
                    .map(|q| serde_json::json!({"priority": name(q.priority()), "kind": q.kind, "pending": q.pending}))
                    .collect();
                let jobs: Vec<serde_json::Value> = s
                    .jobs
                    .iter()
                    .map(|j| serde_json::json!({
                        "job_id": j.job_id, "kind": j.kind, "priority": name(j.priority()),
                        "state": j.state().as_str_name(), "age_ms": j.age_ms,
                    }))
                    .collect();
                println!(
                    "{}",
                    serde_json::json!({
                        "uptime_s": s.uptime_s, "backend": s.backend, "workers": s.workers,
                        "pending": queues, "pending_by_kind": by_kind, "running": s.running,
                        "completed": s.completed, "failed": s.failed, "cancelled": s.cancelled,
                        "expired": s.expired, "draining": s.draining, "jobs": jobs,
                        "vram_budget_in_use": s.vram_budget_in_use, "vram_kept": s.vram_kept,
                        "vram_high_water": s.vram_high_water, "pinned_in_use": s.pinned_in_use,
                        "pinned_high_water": s.pinned_high_water,
                        "key_pinned_bytes": s.key_pinned_bytes,
                        "resident_uploads": s.resident_uploads,
                        "resident_evictions": s.resident_evictions,
                        "quarantined_devices": s.quarantined_devices,
                        "keys": s.keys.iter().map(|k| serde_json::json!({
                            "id": k.id, "path": k.path, "tier": k.tier, "bytes": k.bytes,
                            "pinned": k.pinned, "trust": k.trust, "references": k.references,
                        })).collect::<Vec<_>>(),
                        "circuits": s.circuits.iter().map(|c| serde_json::json!({
                            "name": c.name, "inputs": c.inputs, "aux": c.aux,
                            "constraints": c.constraints, "params": c.params,
                            "recording": c.recording,
                        })).collect::<Vec<_>>(),
                        "synthesis_memory": {
                            "in_use": s.synthesis_memory_in_use,
                            "budget": (s.synthesis_memory_budget > 0).then_some(s.synthesis_memory_budget),
                        },
                    })
                );
                Ok(())
            }
            ClientCommand::Bench(args) => {
                let first = prove_call!(c.clone());
                let mut rest = Vec::new();
                for _ in 1..args.connections {
                    rest.push(prove_call!($connect.await?));
                }
                let metrics: crate::serve_bench::MetricsCall = Arc::new(move || {
                    let mut c = c.clone();
                    Box::pin(async move {
                        c.get_metrics(pb::MetricsRequest {})
                            .await
                            .map(|r| r.into_inner().text)
                    })
                });
                crate::serve_bench::run(args, crate::serve_bench::in_turn(first, rest), metrics)
                    .await
            }
            ClientCommand::Preload(k) => {
                let r = c
                    .preload_key(pb::PreloadKeyRequest {
                        kind: k.pb_kind(),
                        sector_size: k.sector_size,
                    })
                    .await
                    .map_err(status)?
                    .into_inner();
                let key = r.key.unwrap_or_default();
                println!(
                    "{}",
                    serde_json::json!({
                        "id": key.id, "path": key.path, "bytes": key.bytes, "pinned": key.pinned,
                        "trust": key.trust, "read_ms": r.read_ms, "generated_ms": r.generated_ms,
                    })
                );
                Ok(())
            }
            ClientCommand::Evict(k) => {
                let r = c
                    .evict_key(pb::EvictKeyRequest {
                        kind: k.pb_kind(),
                        sector_size: k.sector_size,
                    })
                    .await
                    .map_err(status)?
                    .into_inner();
                println!(
                    "{}",
                    serde_json::json!({
                        "evicted": r.evicted, "host_bytes": r.host_bytes, "device_bytes": r.device_bytes,
                    })
                );
                Ok(())
            }
            ClientCommand::Metrics => {
                let m = c
                    .get_metrics(pb::MetricsRequest {})
                    .await
                    .map_err(status)?
                    .into_inner();
                print!("{}", m.text);
                Ok(())
            }
        }
    }};
}

/// `zkpipe client`: one call to the daemon.
pub fn client(a: &ClientArgs) -> Result<(), Failure> {
    let unreachable = |e: Box<dyn std::error::Error + Send + Sync>| {
        Failure::Other(format!("connecting to the daemon: {e}").into())
    };
    runtime()?.block_on(async {
        match a.tcp {
            Some(addr) => {
                let token_file = a
                    .token_file
                    .as_ref()
                    .ok_or_else(|| Failure::Usage("--tcp needs --token-file".into()))?;
                let token = zkpipe_serve::read_token(token_file)
                    .map_err(|e| Failure::Usage(e.to_string()))?;
                let tls = match &a.tls_ca {
                    Some(path) => Some(zkpipe_serve::ClientTls {
                        ca_pem: read(path)?,
                        domain: a.tls_domain.clone(),
                    }),
                    None => None,
                };
                let connect = || async {
                    zkpipe_serve::connect_tcp(addr, &token, tls.as_ref())
                        .await
                        .map_err(unreachable)
                };
                call!(connect().await?, a, connect())
            }
            None => {
                let connect = || async {
                    zkpipe_serve::connect_unix(&a.socket)
                        .await
                        .map_err(|e| unreachable(Box::new(e)))
                };
                call!(connect().await?, a, connect())
            }
        }
    })
}
