//! `zkpipe client bench`: a mix of proof kinds sent to a running daemon at given rates for a
//! given time, as a storage provider's load would; prints proofs per hour and latency
//! percentiles per kind (submission to proof, through Prove).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkpipe_serve::pb::{self, submit_request::Proof};
use zkpipe_serve::ExportedWitness;

use crate::exit::Failure;

/// `zkpipe client bench`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// How long to send requests, in seconds; requests in flight then are awaited.
    #[arg(long, default_value_t = 60.0)]
    duration_s: f64,
    /// A WinningPoSt request file (as `zkpipe filecoin winning-post --request` takes), sent
    /// every --winning-every-s seconds.
    #[arg(long, requires = "winning_every_s")]
    winning: Option<std::path::PathBuf>,
    #[arg(long)]
    winning_every_s: Option<f64>,
    /// A WindowPoSt request file, sent every --window-every-s seconds.
    #[arg(long, requires = "window_every_s")]
    window: Option<std::path::PathBuf>,
    #[arg(long)]
    window_every_s: Option<f64>,
    /// A SnapDeals request file, sent every --snap-every-s seconds.
    #[arg(long, requires = "snap_every_s")]
    snap: Option<std::path::PathBuf>,
    #[arg(long)]
    snap_every_s: Option<f64>,
    /// A C1 output (JSON) proved as PoRep C2 by --porep-in-flight callers at once, each
    /// sending the next as soon as its last is proved: enough to keep the GPU busy.
    #[arg(long, requires_all = ["prover_id", "sector_id"])]
    porep_c1: Option<std::path::PathBuf>,
    /// The storage provider's id for --porep-c1: 64 hex digits.
    #[arg(long)]
    prover_id: Option<String>,
    /// The sector's number for --porep-c1.
    #[arg(long)]
    sector_id: Option<u64>,
    #[arg(long, default_value_t = 2)]
    porep_in_flight: usize,
    /// A circuit registered in the daemon's [serve.circuits.NAME] and a witness of it in a
    /// directory (`zkpipe filecoin … --export-witness DIR`), as NAME=DIR: proved by
    /// --circuit-in-flight callers at once, each sending the next as soon as its last is
    /// proved. With a PoRep partition's witness, this keeps the GPU busy with PoRep's circuit
    /// where the host's cores could not synthesize fast enough.
    #[arg(long, value_parser = parse_circuit_load)]
    circuit: Option<CircuitLoad>,
    #[arg(long, default_value_t = 2)]
    circuit_in_flight: usize,
    /// Connections to the daemon, the calls taking them in turn: one connection carries its
    /// calls' bytes one frame at a time, which bounds large witnesses' rate.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub connections: u16,
}

/// `--circuit NAME=DIR`.
#[derive(Debug, Clone)]
struct CircuitLoad {
    name: String,
    dir: std::path::PathBuf,
}

fn parse_circuit_load(s: &str) -> Result<CircuitLoad, String> {
    match s.split_once('=') {
        Some((name, dir)) if !name.is_empty() && !dir.is_empty() => Ok(CircuitLoad {
            name: name.to_string(),
            dir: dir.into(),
        }),
        _ => Err(format!(
            "{s:?}: give the circuit's name in the daemon and a witness directory, as NAME=DIR"
        )),
    }
}

/// One call of Prove on whichever connection the client has.
pub type ProveCall = Arc<
    dyn Fn(
            pb::SubmitRequest,
        )
            -> Pin<Box<dyn Future<Output = Result<pb::AwaitResponse, tonic::Status>> + Send>>
        + Send
        + Sync,
>;

/// One call of GetMetrics: the daemon's metrics as Prometheus text.
pub type MetricsCall = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<String, tonic::Status>> + Send>> + Send + Sync,
>;

/// The seconds the daemon's jobs have held their devices' GPU locks, from its metrics text
/// (`zkpipe_gpu_lock_seconds_total`); None when the text has no such sample.
fn gpu_lock_seconds(metrics: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix("zkpipe_gpu_lock_seconds_total ")?;
        value.trim().parse().ok()
    })
}

/// The GPU locks' held seconds now, or why they cannot be read (said once, not fatal: the
/// bench's proofs are its result).
async fn gpu_lock_now(metrics: &MetricsCall) -> Option<f64> {
    match metrics().await {
        Ok(text) => {
            let seconds = gpu_lock_seconds(&text);
            if seconds.is_none() {
                crate::say!("bench: the daemon's metrics carry no zkpipe_gpu_lock_seconds_total; the GPU's busy share is not reported");
            }
            seconds
        }
        Err(e) => {
            crate::say!("bench: the daemon's metrics could not be read ({:?}: {}); the GPU's busy share is not reported", e.code(), e.message());
            None
        }
    }
}

/// How long the GPU locks were held over a run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
struct GpuLockShare {
    /// Seconds held, devices added up.
    held_s: f64,
    /// Of the run's time (devices added up: 1.0 a device kept busy throughout).
    share: f64,
}

/// The GPU locks' share of a run of `elapsed` from their held seconds `before` and `after`
/// it; None where either is unknown.
fn gpu_lock_over(
    before: Option<f64>,
    after: Option<f64>,
    elapsed: Duration,
) -> Option<GpuLockShare> {
    match (before, after) {
        (Some(b), Some(a)) if elapsed > Duration::ZERO => Some(GpuLockShare {
            held_s: a - b,
            share: (a - b) / elapsed.as_secs_f64(),
        }),
        _ => None,
    }
}

/// The calls `first` and `rest` make, taken in turn (`first` alone when `rest` is empty).
pub fn in_turn(first: ProveCall, rest: Vec<ProveCall>) -> ProveCall {
    let calls: Vec<ProveCall> = std::iter::once(first).chain(rest).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    Arc::new(move |req| {
        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        calls[n % calls.len()](req)
    })
}

/// How one kind's requests are sent.
#[derive(Debug, Clone, Copy)]
enum Pace {
    /// One every so often, whether the last has ended or not.
    Every(Duration),
    /// This many callers, each sending again when its last ends.
    InFlight(usize),
}

/// One kind of the mix.
#[derive(Debug, Clone)]
struct Load {
    kind: &'static str,
    proof: Proof,
    pace: Pace,
}

/// What one request came to.
#[derive(Debug, Clone)]
struct Outcome {
    kind: &'static str,
    latency: Duration,
    /// The daemon's account of a proved request: its wait in the queue and its run (zero
    /// when it was not proved). What the latency holds besides them is outside the queue
    /// and the workers: the request's transfer and checks and the answer's way back.
    queue_wait: Duration,
    run: Duration,
    /// None when proved; else the state or the refusal.
    error: Option<String>,
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::Usage(format!("reading {}: {e}", path.display())))
}

fn every(what: &str, seconds: Option<f64>) -> Result<Pace, Failure> {
    match seconds {
        Some(s) if s.is_finite() && s > 0.0 => Ok(Pace::Every(Duration::from_secs_f64(s))),
        other => Err(Failure::Usage(format!(
            "--{what}-every-s must be a positive number of seconds, not {other:?}"
        ))),
    }
}

impl BenchArgs {
    fn loads(&self) -> Result<Vec<Load>, Failure> {
        let mut loads = Vec::new();
        if let Some(path) = &self.winning {
            loads.push(Load {
                kind: "winning-post",
                proof: Proof::WinningPostJson(read(path)?),
                pace: every("winning", self.winning_every_s)?,
            });
        }
        if let Some(path) = &self.window {
            loads.push(Load {
                kind: "window-post",
                proof: Proof::WindowPostJson(read(path)?),
                pace: every("window", self.window_every_s)?,
            });
        }
        if let Some(path) = &self.snap {
            loads.push(Load {
                kind: "snap",
                proof: Proof::SnapJson(read(path)?),
                pace: every("snap", self.snap_every_s)?,
            });
        }
        if let Some(path) = &self.porep_c1 {
            let prover_id = self.prover_id.as_deref().unwrap_or_default();
            let prover_id = zkpipe_filecoin::request::parse_hex32("--prover-id", prover_id)
                .map_err(|e| Failure::Usage(e.to_string()))?;
            if self.porep_in_flight == 0 {
                return Err(Failure::Usage(
                    "--porep-in-flight must be at least 1".into(),
                ));
            }
            loads.push(Load {
                kind: "porep-c2",
                proof: Proof::PorepC2(pb::PoRepC2 {
                    c1_json: read(path)?,
                    prover_id: prover_id.to_vec(),
                    sector_id: self.sector_id.unwrap_or_default(),
                    registered_proof: String::new(),
                }),
                pace: Pace::InFlight(self.porep_in_flight),
            });
        }
        if let Some(c) = &self.circuit {
            if self.circuit_in_flight == 0 {
                return Err(Failure::Usage(
                    "--circuit-in-flight must be at least 1".into(),
                ));
            }
            let w = ExportedWitness::read(&c.dir)
                .map_err(|e| Failure::Usage(format!("--circuit {}: {e}", c.name)))?;
            loads.push(Load {
                kind: "circuit",
                proof: Proof::CircuitWitness(pb::CircuitWitness {
                    circuit: c.name.clone(),
                    inputs: w.inputs.into(),
                    aux: w.aux.into(),
                }),
                pace: Pace::InFlight(self.circuit_in_flight),
            });
        }
        if loads.is_empty() {
            return Err(Failure::Usage(
                "bench needs at least one of --winning, --window, --snap, --porep-c1, --circuit"
                    .into(),
            ));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(Failure::Usage(format!(
                "--duration-s must be positive, not {}",
                self.duration_s
            )));
        }
        Ok(loads)
    }
}

/// One Prove of `load`'s proof under a request id of its own.
async fn prove_once(call: &ProveCall, load: &Load, run: &str, n: usize) -> Outcome {
    let request = pb::SubmitRequest {
        request_id: format!("bench-{run}-{}-{n}", load.kind),
        priority: 0,
        deadline_ms: 0,
        proof: Some(load.proof.clone()),
    };
    let t = Instant::now();
    let answer = call(request).await;
    let latency = t.elapsed();
    let (error, queue_wait, run) = match answer {
        Ok(a) if a.state() == pb::JobState::Completed => (
            None,
            Duration::from_millis(a.queue_wait_ms),
            Duration::from_millis(a.run_ms),
        ),
        Ok(a) => (
            Some(format!("{}: {}", a.state().as_str_name(), a.error)),
            Duration::ZERO,
            Duration::ZERO,
        ),
        Err(e) => (
            Some(format!("{:?}: {}", e.code(), e.message())),
            Duration::ZERO,
            Duration::ZERO,
        ),
    };
    Outcome {
        kind: load.kind,
        latency,
        queue_wait,
        run,
        error,
    }
}

/// Sends `load` until `until`, giving every outcome. A paced load stops at `until`, not at
/// its first tick after it (which would stretch the run, and lower every kind's rate, by up
/// to a period).
async fn drive(call: ProveCall, load: Load, run: String, until: Instant) -> Vec<Outcome> {
    let load = Arc::new(load);
    let mut tasks = tokio::task::JoinSet::new();
    match load.pace {
        Pace::Every(period) => {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let deadline = tokio::time::Instant::from_std(until);
            let mut n = 0;
            loop {
                if tokio::time::timeout_at(deadline, ticks.tick())
                    .await
                    .is_err()
                    || Instant::now() >= until
                {
                    break;
                }
                let (call, load, run) = (Arc::clone(&call), Arc::clone(&load), run.clone());
                tasks.spawn(async move { vec![prove_once(&call, &load, &run, n).await] });
                n += 1;
            }
        }
        Pace::InFlight(callers) => {
            for caller in 0..callers {
                let (call, load, run) = (Arc::clone(&call), Arc::clone(&load), run.clone());
                tasks.spawn(async move {
                    let mut outcomes = Vec::new();
                    let mut n = caller;
                    while Instant::now() < until {
                        outcomes.push(prove_once(&call, &load, &run, n).await);
                        n += callers;
                    }
                    outcomes
                });
            }
        }
    }
    let mut outcomes = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(o) => outcomes.extend(o),
            Err(e) => outcomes.push(Outcome {
                kind: load.kind,
                latency: Duration::ZERO,
                queue_wait: Duration::ZERO,
                run: Duration::ZERO,
                error: Some(format!("the caller's task ended: {e}")),
            }),
        }
    }
    outcomes
}

/// The value below which `p` of the sorted `ms` lie (nearest rank).
fn percentile(sorted_ms: &[f64], p: f64) -> f64 {
    if sorted_ms.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted_ms.len() as f64).ceil() as usize;
    sorted_ms[rank.clamp(1, sorted_ms.len()) - 1]
}

/// The median, 90th and 99th percentiles and the maximum of `ms`, in milliseconds.
fn spread(mut ms: Vec<f64>) -> serde_json::Value {
    ms.sort_by(f64::total_cmp);
    serde_json::json!({
        "p50": percentile(&ms, 50.0), "p90": percentile(&ms, 90.0),
        "p99": percentile(&ms, 99.0), "max": ms.last().copied().unwrap_or(f64::NAN),
    })
}

/// Per kind: proofs, failures, proofs an hour, percentiles of the latency and of its parts
/// (queue, run, outside).
fn report(outcomes: &[Outcome], elapsed: Duration) -> serde_json::Value {
    let mut by_kind: BTreeMap<&str, Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        by_kind.entry(o.kind).or_default().push(o);
    }
    let hours = elapsed.as_secs_f64() / 3600.0;
    let kinds: serde_json::Map<String, serde_json::Value> = by_kind
        .into_iter()
        .map(|(kind, os)| {
            let proved: Vec<&&Outcome> = os.iter().filter(|o| o.error.is_none()).collect();
            let ms = |part: fn(&Outcome) -> Duration| -> Vec<f64> {
                proved.iter().map(|o| part(o).as_secs_f64() * 1e3).collect()
            };
            let mut errors: BTreeMap<String, usize> = BTreeMap::new();
            for e in os.iter().filter_map(|o| o.error.as_ref()) {
                *errors.entry(e.clone()).or_default() += 1;
            }
            let value = serde_json::json!({
                "proved": proved.len(),
                "failed": os.len() - proved.len(),
                "proofs_per_hour": proved.len() as f64 / hours,
                "latency_ms": spread(ms(|o| o.latency)),
                "queue_wait_ms": spread(ms(|o| o.queue_wait)),
                "run_ms": spread(ms(|o| o.run)),
                "outside_ms": spread(ms(|o| o.latency.saturating_sub(o.queue_wait + o.run))),
                "errors": errors,
            });
            (kind.to_string(), value)
        })
        .collect();
    serde_json::json!({ "elapsed_s": elapsed.as_secs_f64(), "kinds": kinds })
}

/// Runs the mix against the daemon `call` reaches; prints the report (a table on standard
/// error, JSON on standard output); fails when any request failed.
pub async fn run(args: &BenchArgs, call: ProveCall, metrics: MetricsCall) -> Result<(), Failure> {
    let loads = args.loads()?;
    let run = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    );
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(args.duration_s);
    crate::say!(
        "bench: {} for {:.0} s, then the requests in flight are awaited",
        loads
            .iter()
            .map(|l| match l.pace {
                Pace::Every(p) => format!("{} every {:.1} s", l.kind, p.as_secs_f64()),
                Pace::InFlight(k) => format!("{} with {k} in flight", l.kind),
            })
            .collect::<Vec<_>>()
            .join(", "),
        args.duration_s
    );
    let locks_before = gpu_lock_now(&metrics).await;
    let drivers: Vec<_> = loads
        .into_iter()
        .map(|l| tokio::spawn(drive(Arc::clone(&call), l, run.clone(), until)))
        .collect();
    let mut outcomes = Vec::new();
    for d in drivers {
        outcomes.extend(
            d.await
                .map_err(|e| Failure::Other(format!("a load's driver ended: {e}").into()))?,
        );
    }
    let elapsed = start.elapsed();
    let locks_after = gpu_lock_now(&metrics).await;
    let gpu_lock = gpu_lock_over(locks_before, locks_after, elapsed);
    let mut r = report(&outcomes, elapsed);
    r["gpu_lock"] = serde_json::json!(gpu_lock);
    if let Some(kinds) = r["kinds"].as_object() {
        crate::say!("| kind | proved | failed | proofs/hour | p50 ms | p90 ms | p99 ms | max ms | queue p50 | run p50 | outside p50 |");
        crate::say!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        for (kind, k) in kinds {
            let l = &k["latency_ms"];
            let f = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.0}"));
            crate::say!(
                "| {kind} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                k["proved"],
                k["failed"],
                f(&k["proofs_per_hour"]),
                f(&l["p50"]),
                f(&l["p90"]),
                f(&l["p99"]),
                f(&l["max"]),
                f(&k["queue_wait_ms"]["p50"]),
                f(&k["run_ms"]["p50"]),
                f(&k["outside_ms"]["p50"])
            );
        }
    }
    if let Some(lock) = gpu_lock {
        crate::say!(
            "GPU locks held {:.1} s of the run's {:.1} s: {:.1}% (devices added up: 100% a device kept busy throughout)",
            lock.held_s,
            elapsed.as_secs_f64(),
            lock.share * 100.0
        );
    }
    println!("{r}");
    let failed = outcomes.iter().filter(|o| o.error.is_some()).count();
    match failed {
        0 => Ok(()),
        n => Err(Failure::Jobs(format!(
            "{n} of {} requests did not give a proof",
            outcomes.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_circuit_load_is_a_name_and_a_directory() {
        let l = parse_circuit_load("porep-8mib=/tmp/w").expect("parsed");
        assert_eq!(l.name, "porep-8mib");
        assert_eq!(l.dir, std::path::PathBuf::from("/tmp/w"));
        for bad in ["porep", "=/tmp/w", "porep=", ""] {
            assert!(parse_circuit_load(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn calls_in_turn_take_each_connection_once_a_round() {
        let answering = |job: &'static str| -> ProveCall {
            Arc::new(move |_| {
                Box::pin(async move {
                    Ok(pb::AwaitResponse {
                        job_id: job.into(),
                        ..Default::default()
                    })
                })
            })
        };
        let call = in_turn(answering("a"), vec![answering("b"), answering("c")]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let jobs: Vec<String> = (0..7)
            .map(|_| {
                let answer = rt.block_on(call(pb::SubmitRequest::default()));
                answer.expect("answered").job_id
            })
            .collect();
        assert_eq!(jobs, ["a", "b", "c", "a", "b", "c", "a"]);
    }

    /// A load sent every 10 s in a run of 1.5 s: one request at the start, and the driver
    /// ends at the run's end rather than at the next tick, 8.5 s after it.
    #[test]
    fn a_paced_load_stops_at_the_end_of_the_run() {
        let answered: ProveCall = Arc::new(|_| {
            Box::pin(async {
                Ok(pb::AwaitResponse {
                    state: pb::JobState::Completed.into(),
                    ..Default::default()
                })
            })
        });
        let load = Load {
            kind: "winning-post",
            proof: Proof::CircuitWitness(pb::CircuitWitness::default()),
            pace: Pace::Every(Duration::from_secs(10)),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        let start = Instant::now();
        let outcomes = rt.block_on(drive(
            answered,
            load,
            "t".into(),
            start + Duration::from_millis(1500),
        ));
        let took = start.elapsed();
        assert_eq!(outcomes.len(), 1);
        assert!(outcomes[0].error.is_none(), "{:?}", outcomes[0].error);
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
            "the driver took {took:?}"
        );
    }

    #[test]
    fn the_gpu_locks_held_time_is_read_from_the_metrics_and_taken_over_the_run() {
        let text = "# HELP zkpipe_gpu_lock_seconds_total Seconds.\n\
                    # TYPE zkpipe_gpu_lock_seconds_total counter\n\
                    zkpipe_gpu_lock_seconds_total_other 5\n\
                    zkpipe_gpu_lock_seconds_total 93.25\n\
                    zkpipe_staging_seconds_total 12.5\n";
        assert_eq!(gpu_lock_seconds(text), Some(93.25));
        assert_eq!(gpu_lock_seconds("zkpipe_jobs_total 3\n"), None);
        assert_eq!(
            gpu_lock_seconds("zkpipe_gpu_lock_seconds_total NaN-ish\n"),
            None
        );
        let over = gpu_lock_over(Some(10.0), Some(55.0), Duration::from_secs(50)).unwrap();
        assert_eq!(over.held_s, 45.0);
        assert_eq!(over.share, 0.9);
        assert_eq!(
            serde_json::json!(over),
            serde_json::json!({"held_s": 45.0, "share": 0.9})
        );
        // Two devices kept busy throughout come to 2.0.
        let two = gpu_lock_over(Some(0.0), Some(100.0), Duration::from_secs(50)).unwrap();
        assert_eq!(two.share, 2.0);
        for unknown in [
            gpu_lock_over(None, Some(1.0), Duration::from_secs(1)),
            gpu_lock_over(Some(1.0), None, Duration::from_secs(1)),
            gpu_lock_over(Some(1.0), Some(2.0), Duration::ZERO),
        ] {
            assert_eq!(unknown, None);
        }
        assert!(serde_json::json!(None::<GpuLockShare>).is_null());
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let ms: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&ms, 50.0), 50.0);
        assert_eq!(percentile(&ms, 99.0), 99.0);
        assert_eq!(percentile(&ms, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn the_report_counts_each_kind_apart() {
        let o = |kind, ms, error: Option<&str>| Outcome {
            kind,
            latency: Duration::from_millis(ms),
            queue_wait: Duration::from_millis(ms / 10),
            run: Duration::from_millis(ms / 2),
            error: error.map(String::from),
        };
        let r = report(
            &[
                o("winning-post", 100, None),
                o("winning-post", 300, None),
                o("porep-c2", 5000, None),
                o("porep-c2", 1, Some("FAILED: x")),
            ],
            Duration::from_secs(3600),
        );
        assert_eq!(r["kinds"]["winning-post"]["proved"], 2);
        assert_eq!(r["kinds"]["winning-post"]["latency_ms"]["p99"], 300.0);
        assert_eq!(r["kinds"]["porep-c2"]["failed"], 1);
        assert_eq!(r["kinds"]["porep-c2"]["proofs_per_hour"], 1.0);
        assert_eq!(r["kinds"]["porep-c2"]["errors"]["FAILED: x"], 1);
        // The parts of a proved request's latency: its queue, its run, the rest outside.
        assert_eq!(r["kinds"]["porep-c2"]["queue_wait_ms"]["p50"], 500.0);
        assert_eq!(r["kinds"]["porep-c2"]["run_ms"]["max"], 2500.0);
        assert_eq!(r["kinds"]["porep-c2"]["outside_ms"]["p50"], 2000.0);
        assert_eq!(r["kinds"]["winning-post"]["outside_ms"]["p99"], 120.0);
    }
}
