//! The daemon over its unix socket and over TCP with a token, on the CPU backend at 2 KiB:
//! proofs filecoin-proofs' verifier accepts, and every bad request refused with its status
//! while the daemon goes on serving.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tonic::Code;
use zkpipe_filecoin::gen::{self, SectorData};
use zkpipe_filecoin::{KeyKind, KeyName, ParamsCache, ProveOptions, Prover, Request};
use zkpipe_pipeline::{Backend, Config, Engine};
use zkpipe_serve::pb::{self, submit_request::Proof};
use zkpipe_serve::{
    connect_tcp, connect_unix, serve, Daemon, Limits, ProverService, RequestThreads, ServeConfig,
};

const KIB2: u64 = 2048;
/// The 2 KiB sectors' PoSt keys, as a preload or an eviction names them.
const WINNING_2KIB: KeyName = KeyName {
    kind: KeyKind::WinningPost,
    sector_size: KIB2,
};
const WINDOW_2KIB: KeyName = KeyName {
    kind: KeyKind::WindowPost,
    sector_size: KIB2,
};

/// The Filecoin tests' parameter directory (generated test parameters, shared).
fn params_dir() -> PathBuf {
    zkpipe_filecoin::params::dir_from_env_or(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-proof-parameters"),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("serve")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// A daemon on the CPU backend with `workers` workers.
fn daemon(workers: usize) -> Arc<Daemon> {
    daemon_within(Limits {
        workers,
        ..Limits::default()
    })
}

/// A daemon on the CPU backend under `limits`.
fn daemon_within(limits: Limits) -> Arc<Daemon> {
    let prover = Prover::new(ParamsCache::new(params_dir()), ProveOptions::default());
    let engine = Engine::start(Config::default().with_backend(Backend::Cpu)).expect("engine");
    Daemon::start(
        prover,
        engine,
        zkpipe_serve::Circuits::default(),
        limits,
        RequestThreads::Global,
    )
}

/// A free TCP port on the loopback (bound, then released for the daemon).
fn free_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address")
}

/// One HTTP/1.1 GET of `path` at `addr`: the status code and the body.
fn http_get(addr: std::net::SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connects over HTTP");
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("an HTTP answer");
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// A daemon served under a configuration on a runtime of its own, until [`Served::stop`].
struct Served {
    rt: tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), zkpipe_serve::ServeError>>,
}

impl Served {
    /// Serves `d` under `config`; returns once its socket is there.
    fn start(d: &Arc<Daemon>, config: &ServeConfig) -> Self {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = rt.spawn({
            let service = ProverService::new(Arc::clone(d));
            let config = config.clone();
            async move {
                serve(service, &config, async {
                    let _ = stopped.await;
                })
                .await
            }
        });
        for _ in 0..100 {
            if config.socket.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { rt, stop, server }
    }

    /// Stops serving; the server must stop cleanly.
    fn stop(self) {
        let _ = self.stop.send(());
        self.rt
            .block_on(self.server)
            .unwrap()
            .expect("the server stops cleanly");
    }
}

fn submit(request_id: &str, proof: Proof) -> pb::SubmitRequest {
    pb::SubmitRequest {
        request_id: request_id.into(),
        priority: 0,
        deadline_ms: 0,
        proof: Some(proof),
    }
}

#[test]
fn proofs_over_the_socket_and_tcp_are_accepted_and_bad_requests_refused() {
    params_dir();
    let dir = scratch("daemon");
    let sealed = gen::seal_sector(&dir.join("sector"), KIB2, SectorData::Random).expect("seals");
    let winning = gen::winning_post(&sealed).expect("vanilla proofs");
    let winning_json = serde_json::to_vec(&winning).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let config = ServeConfig {
        socket: dir.join("zkpipe.sock"),
        tcp: Some(free_port()),
        token_file: Some(token_file),
        http: Some(free_port()),
        max_message: 1 << 20,
        ..ServeConfig::default()
    };
    let d = daemon(1);
    let served = Served::start(&d, &config);
    served.rt.block_on(async {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&config.socket)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "only the daemon's user may connect");
        let mut c = connect_unix(&config.socket).await.expect("connects");

        // A WinningPoSt proved over the socket, accepted by filecoin-proofs.
        let answer = c
            .prove(submit(
                "winning-1",
                Proof::WinningPostJson(winning_json.clone()),
            ))
            .await
            .expect("proves")
            .into_inner();
        assert_eq!(answer.state(), pb::JobState::Completed, "{}", answer.error);
        assert_eq!(answer.kind, "winning-post");
        let request = Request::WinningPoSt(winning.clone());
        assert!(
            zkpipe_filecoin::verify::with_filecoin_proofs(&request, &answer.proof).unwrap(),
            "filecoin-proofs accepts the daemon's proof"
        );
        // The same request id and content: the same job, answered again.
        let again = c
            .submit(submit(
                "winning-1",
                Proof::WinningPostJson(winning_json.clone()),
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(again.existing);
        assert_eq!(again.job_id, answer.job_id);
        let late = c
            .r#await(pb::AwaitRequest {
                job_id: again.job_id.clone(),
                timeout_ms: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            late.proof, answer.proof,
            "an ended job is kept for a late await"
        );

        // Bad requests: each its status, naming what was wrong.
        let refused =
            |r: Result<tonic::Response<pb::SubmitResponse>, tonic::Status>| r.expect_err("refused");
        let e = refused(
            c.submit(submit("", Proof::WinningPostJson(winning_json.clone())))
                .await,
        );
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("request_id"), "{e}");
        let e = refused(
            c.submit(pb::SubmitRequest {
                request_id: "none".into(),
                priority: 0,
                deadline_ms: 0,
                proof: None,
            })
            .await,
        );
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = refused(
            c.submit(submit(
                "junk",
                Proof::WinningPostJson(b"{\"not\": 1}".to_vec()),
            ))
            .await,
        );
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("winning_post_json"), "{e}");
        let e = refused(
            c.submit(submit(
                "porep",
                Proof::PorepC2(pb::PoRepC2 {
                    c1_json: b"{}".to_vec(),
                    prover_id: vec![1; 31],
                    sector_id: 1,
                    registered_proof: String::new(),
                }),
            ))
            .await,
        );
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("prover_id: 31 bytes"), "{e}");
        let e = refused(
            c.submit(pb::SubmitRequest {
                priority: 9,
                ..submit("prio", Proof::WinningPostJson(winning_json.clone()))
            })
            .await,
        );
        assert_eq!(e.code(), Code::InvalidArgument);
        let mut other = winning.clone();
        other.randomness[0] ^= 1;
        let e = refused(
            c.submit(submit(
                "winning-1",
                Proof::WinningPostJson(serde_json::to_vec(&other).unwrap()),
            ))
            .await,
        );
        assert_eq!(e.code(), Code::AlreadyExists, "{e}");
        let e = c
            .r#await(pb::AwaitRequest {
                job_id: "no-such-job".into(),
                timeout_ms: 1,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        assert!(e.message().contains("unknown job"), "{e}");
        // Over the message limit: refused, the daemon unharmed.
        let e = refused(
            c.submit(submit("huge", Proof::SnapJson(vec![b' '; 2 << 20])))
                .await,
        );
        assert!(e.code() == Code::ResourceExhausted, "{e}");

        // A job that fails (vanilla proofs cut short): FAILED with the reason; others go on.
        let mut cut = winning.clone();
        cut.vanilla_proofs[0].truncate(10);
        let failed = c
            .prove(submit(
                "cut",
                Proof::WinningPostJson(serde_json::to_vec(&cut).unwrap()),
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(failed.state(), pb::JobState::Failed);
        assert!(!failed.error.is_empty());

        // TCP: no token and a wrong one refused; the right one served.
        let addr = config.tcp.unwrap();
        let mut wrong = connect_tcp(addr, "not-the-token", None)
            .await
            .expect("connects");
        let e = wrong.get_status(pb::StatusRequest {}).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e}");
        let mut plain = pb::prover_client::ProverClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let e = plain.get_status(pb::StatusRequest {}).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e}");
        let mut tcp = connect_tcp(addr, "s3cret-token", None)
            .await
            .expect("connects");
        let status = tcp
            .get_status(pb::StatusRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status.completed, 1);
        assert_eq!(status.failed, 1);
        assert_eq!(status.queues.len(), 4);
        let again = tcp
            .prove(submit(
                "winning-2",
                Proof::WinningPostJson(winning_json.clone()),
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(again.state(), pb::JobState::Completed, "{}", again.error);
        assert!(zkpipe_filecoin::verify::with_filecoin_proofs(&request, &again.proof).unwrap());

        // The figures: over the RPC, and over HTTP with the token (the daemon has one).
        let metrics = tcp
            .get_metrics(pb::MetricsRequest {})
            .await
            .unwrap()
            .into_inner()
            .text;
        for line in [
            "zkpipe_serve_jobs_ended_total{kind=\"winning-post\",outcome=\"completed\"} 2",
            "zkpipe_serve_jobs_ended_total{kind=\"winning-post\",outcome=\"failed\"} 1",
            "zkpipe_serve_job_latency_seconds_count{kind=\"winning-post\"} 2",
            "zkpipe_serve_job_latency_seconds_bucket{kind=\"winning-post\",le=\"+Inf\"} 2",
            "zkpipe_serve_jobs_pending{priority=\"critical\"} 0",
            "# TYPE zkpipe_jobs_total counter",
            "zkpipe_serve_keys{tier=\"hot\"} 1",
        ] {
            assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
        }
        let http = config.http.unwrap();
        let (code, _) = tokio::task::spawn_blocking(move || http_get(http, "/metrics", None))
            .await
            .unwrap();
        assert_eq!(code, 401, "no token, no figures");
        let (code, _) =
            tokio::task::spawn_blocking(move || http_get(http, "/metrics", Some("not-the-token")))
                .await
                .unwrap();
        assert_eq!(code, 401);
        let (code, text) =
            tokio::task::spawn_blocking(move || http_get(http, "/metrics", Some("s3cret-token")))
                .await
                .unwrap();
        assert_eq!(code, 200);
        assert!(
            text.contains("zkpipe_serve_job_latency_seconds_sum{kind=\"winning-post\"}"),
            "{text}"
        );
        let (code, json) =
            tokio::task::spawn_blocking(move || http_get(http, "/status", Some("s3cret-token")))
                .await
                .unwrap();
        assert_eq!(code, 200, "{json}");
        let status: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(status["counts"]["completed"], 2, "{status}");
        assert_eq!(
            status["kinds"]["winning-post"]["counts"]["failed"], 1,
            "{status}"
        );
        assert!(status["engine"]["backend"].is_string(), "{status}");
        // The WinningPoSt key, read once and held for later proofs.
        let keys = status["keys"].as_array().expect("keys");
        assert_eq!(keys.len(), 1, "{status}");
        assert!(keys[0]["bytes"].as_u64().unwrap() > 0, "{status}");
        assert!(
            keys[0]["id"]
                .as_str()
                .unwrap()
                .contains("proof-of-spacetime"),
            "{status}"
        );
        let (code, _) =
            tokio::task::spawn_blocking(move || http_get(http, "/nothing", Some("s3cret-token")))
                .await
                .unwrap();
        assert_eq!(code, 404);

        // A caller that goes away while awaiting loses nothing: the job runs on, a resubmit
        // under the same request id finds it, and a later await on a new connection gets
        // its proof.
        let submitted = c
            .submit(submit(
                "winning-3",
                Proof::WinningPostJson(winning_json.clone()),
            ))
            .await
            .unwrap()
            .into_inner();
        let gone = tokio::spawn({
            let socket = config.socket.clone();
            let job_id = submitted.job_id.clone();
            async move {
                let mut c = connect_unix(&socket).await.unwrap();
                c.r#await(pb::AwaitRequest {
                    job_id,
                    timeout_ms: 0,
                })
                .await
            }
        });
        // A proof takes far longer than this on any machine: the await is cut mid-way.
        tokio::time::sleep(Duration::from_millis(10)).await;
        gone.abort();
        assert!(gone.await.is_err(), "the first caller went away mid-await");
        let again = c
            .submit(submit(
                "winning-3",
                Proof::WinningPostJson(winning_json.clone()),
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(again.existing, "the resubmit names the job already there");
        assert_eq!(again.job_id, submitted.job_id);
        let mut later = connect_unix(&config.socket).await.unwrap();
        let answer = later
            .r#await(pb::AwaitRequest {
                job_id: submitted.job_id.clone(),
                timeout_ms: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.state(), pb::JobState::Completed, "{}", answer.error);
        assert!(zkpipe_filecoin::verify::with_filecoin_proofs(&request, &answer.proof).unwrap());
    });
    served.stop();
    assert!(!config.socket.exists(), "the socket is removed");
    d.drain();
}

#[test]
fn queued_jobs_are_cancelled_or_expire_and_a_draining_daemon_takes_none() {
    params_dir();
    let dir = scratch("cancel");
    let sealed = gen::seal_sector(&dir.join("sector"), KIB2, SectorData::Random).expect("seals");
    let winning = gen::winning_post(&sealed).expect("vanilla proofs");
    let request = Request::WinningPoSt(winning);
    let d = daemon(1);
    let digest = |i: u8| blake3::hash(&[i]);
    // One worker: the first job runs, the others wait.
    let first = d
        .submit(
            "a",
            digest(1),
            request.clone(),
            zkpipe_serve::Priority::Low,
            None,
        )
        .unwrap();
    let second = d
        .submit(
            "b",
            digest(2),
            request.clone(),
            zkpipe_serve::Priority::Low,
            None,
        )
        .unwrap();
    let third = d
        .submit(
            "c",
            digest(3),
            request.clone(),
            zkpipe_serve::Priority::Low,
            None,
        )
        .unwrap();
    use zkpipe_serve::daemon::Phase;
    while d.view(&first.id).unwrap().phase == Phase::Pending {
        std::thread::sleep(Duration::from_millis(10));
    }
    let phase = d.cancel(&second.id).unwrap();
    assert!(matches!(phase, Phase::Cancelled(_)), "{phase:?}");
    // A job that must start within a millisecond, behind the running one: it expires while
    // the only worker that takes LOW jobs is busy, and its waiter hears at once, without
    // running it.
    let late = d
        .submit(
            "e",
            digest(5),
            request.clone(),
            zkpipe_serve::Priority::Low,
            Some(Duration::from_millis(1)),
        )
        .unwrap();
    let mut rx = d.watch(&late.id).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(Phase::is_final))
            .await
            .expect("the deadline ends the job")
            .expect("the job is there");
    });
    match d.view(&late.id).unwrap() {
        v @ zkpipe_serve::daemon::JobView {
            phase: Phase::Expired(_),
            ..
        } => assert_eq!(v.run, Duration::ZERO, "an expired job never runs"),
        other => panic!("the late job expired: {other:?}"),
    }
    assert_eq!(
        d.view(&first.id).unwrap().phase,
        Phase::Running,
        "the running job is not stopped by another's deadline"
    );
    // Draining: no new job; the queued one is answered; the running one finishes.
    let drained = std::thread::spawn({
        let d = Arc::clone(&d);
        move || d.drain()
    });
    drained.join().unwrap();
    let err = d
        .submit(
            "d",
            digest(4),
            request,
            zkpipe_serve::Priority::Critical,
            None,
        )
        .unwrap_err();
    assert_eq!(err, zkpipe_serve::daemon::DaemonError::ShuttingDown);
    let ended = |id: &str| d.view(id).unwrap().phase;
    assert!(
        matches!(ended(&first.id), Phase::Completed(_)),
        "the running job finished"
    );
    match ended(&third.id) {
        Phase::Cancelled(why) => assert!(why.contains("shut down"), "{why}"),
        other => panic!("the queued job was answered: {other:?}"),
    }
    // Cancelling an ended job leaves it as it was.
    assert!(matches!(d.cancel(&first.id).unwrap(), Phase::Completed(_)));
    let status = d.status();
    assert!(status.draining);
    assert_eq!(status.running, 0);
    assert_eq!(status.counts.completed + status.counts.cancelled, 3);
    assert_eq!(status.counts.expired, 1);
}

/// Waits until job `id` has ended, up to `limit`.
fn ended(d: &Daemon, id: &str, limit: Duration) -> zkpipe_serve::daemon::Phase {
    use zkpipe_serve::daemon::Phase;
    let mut rx = d.watch(id).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(limit, rx.wait_for(Phase::is_final))
            .await
            .expect("the job ends in time")
            .expect("the job is there")
            .clone()
    })
}

/// Waits until job `id` runs.
fn running(d: &Daemon, id: &str) {
    use zkpipe_serve::daemon::Phase;
    let t = std::time::Instant::now();
    while d.view(id).unwrap().phase == Phase::Pending {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "job {id} did not start: {:?}",
            d.status()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn partitions_are_the_work_items_an_urgent_proof_goes_ahead_and_cancel_stops_a_running_one() {
    use zkpipe_serve::daemon::Phase;
    use zkpipe_serve::Priority;
    params_dir();
    let dir = scratch("partitions");
    // Eight sectors of one provider: a WindowPoSt of four 2 KiB partitions (two sectors
    // each), run as a NORMAL job; one sector's WindowPoSt as the CRITICAL one.
    let prover_id = {
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&std::process::id().to_le_bytes().repeat(2));
        id
    };
    let sealed: Vec<_> = (0..8)
        .map(|i| {
            gen::seal_sector_of(
                &dir.join(format!("sector-{i}")),
                KIB2,
                SectorData::Random,
                prover_id,
            )
            .expect("seals")
        })
        .collect();
    let long = Request::WindowPoSt(gen::window_post_over(&sealed).expect("vanilla proofs"));
    let urgent = Request::WindowPoSt(gen::window_post_over(&sealed[..1]).expect("vanilla proofs"));
    // One worker for any job and one for urgent ones, on a one-worker CPU engine: without
    // partitions as work items the urgent proof would queue behind the long one's partitions.
    let d = daemon(1);
    let digest = |i: u8| blake3::hash(&[i]);
    let first = d
        .submit("long", digest(1), long.clone(), Priority::Normal, None)
        .unwrap();
    running(&d, &first.id);
    let second = d
        .submit(
            "urgent",
            digest(2),
            urgent.clone(),
            Priority::Critical,
            None,
        )
        .unwrap();
    let limit = Duration::from_secs(600);
    let urgent_phase = ended(&d, &second.id, limit);
    let long_when_urgent_ended = d.view(&first.id).unwrap().phase;
    let Phase::Completed(urgent_proof) = urgent_phase else {
        panic!("the urgent proof: {urgent_phase:?}");
    };
    assert_eq!(
        long_when_urgent_ended,
        Phase::Running,
        "the urgent proof ended while the long one still had partitions to prove"
    );
    let Phase::Completed(long_proof) = ended(&d, &first.id, limit) else {
        panic!("the long proof ended");
    };
    assert_eq!(long_proof.len(), 4 * 192, "four partitions");
    assert!(zkpipe_filecoin::verify::with_filecoin_proofs(&long, &long_proof).unwrap());
    assert!(zkpipe_filecoin::verify::with_filecoin_proofs(&urgent, &urgent_proof).unwrap());
    // Cancelling a running job: its partitions not started never start, and it ends
    // CANCELLED, saying how far it went.
    let third = d
        .submit("cancelled", digest(3), long, Priority::Normal, None)
        .unwrap();
    running(&d, &third.id);
    assert_eq!(d.cancel(&third.id).unwrap(), Phase::Running);
    match ended(&d, &third.id, limit) {
        Phase::Cancelled(why) => {
            assert!(why.contains("while it ran"), "{why}");
            assert!(!why.contains("4 of 4"), "it stopped early: {why}");
        }
        other => panic!("the cancelled job: {other:?}"),
    }
    let status = d.status();
    assert_eq!((status.counts.completed, status.counts.cancelled), (2, 1));
    // The daemon goes on: a job after the cancel is proved.
    let fourth = d
        .submit("after", digest(4), urgent, Priority::Low, None)
        .unwrap();
    assert!(matches!(ended(&d, &fourth.id, limit), Phase::Completed(_)));
}

#[test]
fn synthesis_stays_within_its_memory_budget_and_a_partition_larger_than_it_fails_with_the_bytes() {
    use zkpipe_filecoin::Synthesis;
    use zkpipe_serve::daemon::Phase;
    use zkpipe_serve::Priority;
    params_dir();
    let dir = scratch("memory");
    let sealed: Vec<_> = (0..4)
        .map(|i| {
            gen::seal_sector_of(
                &dir.join(format!("sector-{i}")),
                KIB2,
                SectorData::Random,
                [7; 32],
            )
            .expect("seals")
        })
        .collect();
    let two = Request::WindowPoSt(gen::window_post_over(&sealed).expect("vanilla proofs"));
    let window = WINDOW_2KIB;
    let probe = Prover::new(ParamsCache::new(params_dir()), ProveOptions::default());
    let key = probe.load_key_named(window).expect("the key");
    let one = zkpipe_filecoin::synthesis_bytes(&key.key, Synthesis::Recorded);
    drop((key, probe));

    // Room for one partition's working set, not two: the proof is whole, and the bytes held
    // never pass the budget (the gate's own tests show the waits in order).
    let budget = one + one / 2;
    let d = daemon_within(Limits {
        synthesis_memory: Some(budget),
        ..Limits::default()
    });
    let job = d
        .submit(
            "two",
            blake3::hash(b"two"),
            two.clone(),
            Priority::Normal,
            None,
        )
        .unwrap();
    let limit = Duration::from_secs(600);
    let t = std::time::Instant::now();
    let mut most = 0;
    while !d.view(&job.id).unwrap().phase.is_final() && t.elapsed() < limit {
        most = most.max(d.status().synthesis_memory.in_use);
        std::thread::sleep(Duration::from_millis(1));
    }
    let Phase::Completed(proof) = ended(&d, &job.id, limit) else {
        panic!("the proof within the budget");
    };
    assert_eq!(proof.len(), 2 * 192, "two partitions");
    assert!(zkpipe_filecoin::verify::with_filecoin_proofs(&two, &proof).unwrap());
    assert!(
        most <= budget,
        "{most} bytes held under a budget of {budget}"
    );
    let status = d.status();
    assert_eq!(status.synthesis_memory.in_use, 0, "all given back");
    assert_eq!(status.synthesis_memory.budget, Some(budget));
    assert!(d
        .metrics()
        .lines()
        .any(|l| l == format!("zkpipe_serve_synthesis_memory_budget_bytes {budget}")));
    d.drain();

    // A budget below one partition's working set: the job fails at once, naming the bytes.
    let d = daemon_within(Limits {
        synthesis_memory: Some(one - 1),
        ..Limits::default()
    });
    let job = d
        .submit("small", blake3::hash(b"small"), two, Priority::Normal, None)
        .unwrap();
    match ended(&d, &job.id, limit) {
        Phase::Failed(why) => {
            assert!(why.contains(&format!("about {one} bytes")), "{why}");
            assert!(why.contains(&format!("budget of {}", one - 1)), "{why}");
        }
        other => panic!("a partition larger than the budget: {other:?}"),
    }
    d.drain();
}

#[test]
fn keys_are_preloaded_evicted_unless_in_use_and_kept_under_their_budget() {
    use zkpipe_filecoin::FilecoinError;
    params_dir();
    let winning = WINNING_2KIB;
    let window = WINDOW_2KIB;
    // Preload, then evict: a key held besides the cache is in use; once let go, it goes.
    let d = daemon(1);
    let key = d.preload(winning).expect("preloads");
    let held: Vec<_> = d.status().keys.into_iter().map(|k| k.path).collect();
    assert_eq!(held, std::slice::from_ref(&key.path));
    match d.evict(winning) {
        Err(FilecoinError::KeyInUse { references, .. }) => assert_eq!(references, 1),
        other => panic!("a key in use is not evicted: {other:?}"),
    }
    drop(key);
    let freed = d.evict(winning).expect("evicts").expect("it was held");
    assert!(freed.host_bytes > 0);
    assert!(d.status().keys.is_empty());
    assert_eq!(d.evict(winning).unwrap(), None, "a key not held");
    // A budget with room for the first key and not the second besides it.
    let unlimited = Prover::new(ParamsCache::new(params_dir()), ProveOptions::default());
    let host_a = unlimited.load_key_named(winning).unwrap().key.bytes();
    let b_path = unlimited.load_key_named(window).unwrap().path;
    let file_b = std::fs::metadata(&b_path).unwrap().len() as usize;
    let budget = host_a + file_b - 1;
    let p = Prover::new(
        ParamsCache::new(params_dir()).with_key_budget(budget),
        ProveOptions::default(),
    );
    let a = p.load_key_named(winning).expect("fits alone");
    // The first key is in use (held here): no room is made, and the refusal names the bytes.
    match p.load_key_named(window) {
        Err(FilecoinError::KeyBudget {
            needed,
            budget: b,
            held,
            ..
        }) => assert_eq!((needed, b, held), (file_b, budget, host_a)),
        other => panic!("the budget refuses: {other:?}"),
    }
    drop(a);
    // Let go: the least recently used key makes room.
    let b = p.load_key_named(window).expect("room made");
    let held: Vec<_> = p
        .params()
        .resident_keys()
        .into_iter()
        .map(|k| k.path)
        .collect();
    assert_eq!(held, std::slice::from_ref(&b.path));
    drop(b);

    // With a key wait: a key that finds the budget held by a key in use waits for it to be
    // let go, then is read; one larger than the whole budget is refused at once.
    let p = Arc::new(Prover::new(
        ParamsCache::new(params_dir())
            .with_key_budget(budget)
            .with_key_wait(Duration::from_secs(600)),
        ProveOptions::default(),
    ));
    let a = p.load_key_named(winning).expect("fits alone");
    let waiting = std::thread::spawn({
        let p = Arc::clone(&p);
        move || p.load_key_named(window).map(|k| k.path)
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !waiting.is_finished(),
        "it waits while the first key is in use"
    );
    drop(a);
    assert_eq!(
        waiting.join().unwrap().expect("read once room was made"),
        b_path
    );
    let tiny = Prover::new(
        ParamsCache::new(params_dir())
            .with_key_budget(file_b - 1)
            .with_key_wait(Duration::from_secs(600)),
        ProveOptions::default(),
    );
    let t = std::time::Instant::now();
    assert!(matches!(
        tiny.load_key_named(window),
        Err(FilecoinError::KeyBudget { .. })
    ));
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "refused without a wait"
    );
}

#[test]
fn a_key_let_go_stays_warm_until_its_file_changes_or_the_warm_budget_has_no_room() {
    use zkpipe_filecoin::{KeyTier, Trust};
    let winning = WINNING_2KIB;
    let window = WINDOW_2KIB;
    // Both parameter sets copied where this test may change them.
    let shared = Prover::new(ParamsCache::new(params_dir()), ProveOptions::default());
    let dir = scratch("warm");
    let mut file_bytes = Vec::new();
    let mut copies = Vec::new();
    for name in [winning, window] {
        let params = shared.load_key_named(name).expect("key").path;
        let stem = params.file_stem().unwrap().to_string_lossy().to_string();
        for entry in std::fs::read_dir(params_dir()).unwrap() {
            let from = entry.unwrap().path();
            let file = from.file_name().unwrap().to_string_lossy().to_string();
            if file.starts_with(&format!("{stem}.")) && !file.ends_with(".lock") {
                std::fs::copy(&from, dir.join(&file)).unwrap();
            }
        }
        file_bytes.push(std::fs::metadata(&params).unwrap().len() as usize);
        copies.push(dir.join(params.file_name().unwrap()));
    }
    let tiers = |p: &Prover| -> Vec<(KeyName, KeyTier)> {
        p.params()
            .resident_keys()
            .into_iter()
            .map(|k| {
                let name = match k.path == copies[0] {
                    true => winning,
                    false => window,
                };
                (name, k.tier)
            })
            .collect()
    };
    // Room warm for the larger file alone.
    let p = Prover::new(
        ParamsCache::new(&dir).with_warm_budget(file_bytes[0].max(file_bytes[1])),
        ProveOptions::default(),
    );
    drop(p.load_key_named(winning).expect("read cold"));
    assert!(p.evict_key_named(winning).unwrap().is_some());
    assert_eq!(tiers(&p), vec![(winning, KeyTier::Warm)]);
    let warm = p.params().resident_keys();
    assert_eq!(
        warm[0].bytes, file_bytes[0],
        "a warm key's bytes are its file's"
    );
    let again = p.load_key_named(winning).expect("read warm");
    assert_eq!(again.trust, Trust::RecordedDigest, "its trust remembered");
    assert_eq!(tiers(&p), vec![(winning, KeyTier::Hot)]);
    drop(again);
    // Both let go: the one let go last stays warm, the other goes cold.
    drop(p.load_key_named(window).expect("read cold"));
    p.evict_key_named(winning).unwrap();
    p.evict_key_named(window).unwrap();
    assert_eq!(tiers(&p), vec![(window, KeyTier::Warm)]);
    // Evicting a warm key sends it cold.
    assert!(p.evict_key_named(window).unwrap().is_none());
    assert_eq!(tiers(&p), vec![]);

    // A warm key whose file is replaced is trusted afresh: the same bytes renamed into place,
    // with the digest recorded beside them gone, are read with every point checked, where the
    // warm key's remembered trust would have read them unchecked.
    drop(p.load_key_named(window).expect("read cold"));
    let path = p.evict_key_named(window).unwrap().expect("held").key.path;
    assert_eq!(tiers(&p), vec![(window, KeyTier::Warm)]);
    let replacement = path.with_extension("replacement");
    std::fs::copy(&path, &replacement).unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    std::fs::remove_file(path.with_extension("zkpipe-digest")).unwrap();
    let fresh = p.load_key_named(window).expect("read");
    assert_eq!(fresh.trust, Trust::Checked, "trusted afresh");
    drop(fresh);

    // No warm budget: a key let go goes cold.
    let cold = Prover::new(ParamsCache::new(&dir), ProveOptions::default());
    drop(cold.load_key_named(winning).expect("read"));
    cold.evict_key_named(winning).unwrap();
    assert_eq!(tiers(&cold), vec![]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_circuits_parameters_are_trusted_by_their_configured_digest_and_refused_with_another() {
    use zkpipe_bellperson::circuits::RandomR1cs;
    use zkpipe_filecoin::{FilecoinError, Trust};
    let dir = scratch("digest");
    let circuit = RandomR1cs {
        constraints: 300,
        inputs: 2,
        seed: 9,
    };
    let config = circuit_files(&dir, "digested", circuit);
    let digest = zkpipe_filecoin::params::file_digest(&config.params).unwrap();
    let checked = ParamsCache::new(&dir)
        .key_file("circuit:digested", &config.params)
        .unwrap();
    assert_eq!(checked.trust, Trust::Checked);
    // The right digest (in either case): the same key, its points read unchecked.
    let trusted = ParamsCache::new(&dir)
        .key_file_with_digest("circuit:digested", &config.params, &digest.to_uppercase())
        .expect("the file's own digest");
    assert_eq!(trusted.trust, Trust::ConfiguredDigest);
    assert_eq!(trusted.key.vk(), checked.key.vk(), "the same verifying key");
    assert_eq!(trusted.key.query_lens(), checked.key.query_lens());
    // Another digest: refused, naming both.
    let wrong = "0".repeat(32);
    match ParamsCache::new(&dir).key_file_with_digest("circuit:digested", &config.params, &wrong) {
        Err(e @ FilecoinError::ParamsDamaged { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&digest) && text.contains(&wrong), "{text}");
        }
        other => panic!("a file of another digest was taken: {other:?}"),
    }
    // Registration with the wrong digest is refused with that reason; with the right one, the
    // circuit registers.
    let prover = || Prover::new(ParamsCache::new(&dir), ProveOptions::default());
    let with = |digest: &str| zkpipe_serve::CircuitConfig {
        params_digest: Some(digest.to_string()),
        ..config.clone()
    };
    let e =
        zkpipe_serve::Circuits::register(&prover(), &[("digested".into(), with(&wrong))].into())
            .unwrap_err();
    assert!(
        matches!(&e, zkpipe_serve::CircuitError::Key { source, .. } if matches!(**source, FilecoinError::ParamsDamaged { .. })),
        "{e}"
    );
    let circuits =
        zkpipe_serve::Circuits::register(&prover(), &[("digested".into(), with(&digest))].into())
            .expect("registers");
    assert_eq!(circuits.summaries().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recording_counts_under_the_key_budget_with_its_key() {
    use zkpipe_bellperson::circuits::RandomR1cs;
    use zkpipe_filecoin::FilecoinError;
    let dir = scratch("recording-budget");
    let circuit = RandomR1cs {
        constraints: 500,
        inputs: 2,
        seed: 5,
    };
    let config = circuit_files(&dir, "budgeted", circuit);
    // Recorded once through a cache, so that the file beside the key is the cache's own.
    let unlimited = ParamsCache::new(&dir);
    let key = unlimited
        .key_file("circuit:budgeted", &config.params)
        .unwrap();
    unlimited.recording(&key, || Ok(circuit)).expect("recorded");
    let key_bytes = key.key.bytes();
    let params_file = std::fs::metadata(&config.params).unwrap().len() as usize;
    let recording_file = std::fs::metadata(&config.recording).unwrap().len() as usize;
    drop(key);
    let budget = key_bytes + recording_file - 1;
    assert!(budget >= params_file, "room for the key alone");

    // The key in use leaves no room for its recording: refused, naming the bytes.
    let cache = ParamsCache::new(&dir).with_key_budget(budget);
    let key = cache.key_file("circuit:budgeted", &config.params).unwrap();
    match cache.recording(&key, || Ok(circuit)) {
        Err(FilecoinError::KeyBudget { needed, held, .. }) => {
            assert_eq!((needed, held), (recording_file, key_bytes))
        }
        other => panic!("the recording does not fit beside its key: {other:?}"),
    }
    drop(key);

    // One byte more: it fits, and counts until its key is let go.
    let cache = ParamsCache::new(&dir).with_key_budget(budget + 1);
    let key = cache.key_file("circuit:budgeted", &config.params).unwrap();
    let recording = cache.recording(&key, || Ok(circuit)).expect("fits");
    drop((key, recording));
    let other = circuit_files(
        &dir,
        "other",
        RandomR1cs {
            constraints: 400,
            inputs: 2,
            seed: 6,
        },
    );
    // The other key needs the first key's and its recording's room: both go.
    let other_key = cache
        .key_file("circuit:other", &other.params)
        .expect("room made");
    let held: Vec<_> = cache.resident_keys().into_iter().map(|k| k.id).collect();
    assert_eq!(held, vec!["circuit:other".to_string()]);
    drop(other_key);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A registered circuit's files: `RandomR1cs` of `constraints` constraints, its parameters
/// (bellperson's setup) and its recording, written into `dir`.
fn circuit_files(
    dir: &std::path::Path,
    name: &str,
    circuit: zkpipe_bellperson::circuits::RandomR1cs,
) -> zkpipe_serve::CircuitConfig {
    use rand_core::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(circuit.seed);
    let params =
        bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(circuit, &mut rng)
            .expect("setup");
    let config = zkpipe_serve::CircuitConfig {
        params: dir.join(format!("{name}.params")),
        recording: dir.join(format!("{name}.zkpipe-r1cs")),
        params_digest: None,
    };
    let mut file = std::fs::File::create(&config.params).unwrap();
    params.write(&mut file).unwrap();
    let id = zkpipe_r1cs::CircuitId(name.to_string());
    let recording = zkpipe_bellperson::record(circuit, id).expect("records");
    zkpipe_r1cs::file::save(&recording, &config.recording).expect("saves");
    config
}

fn circuit_witness(circuit: &str, inputs: &[blstrs::Scalar], aux: &[blstrs::Scalar]) -> Proof {
    Proof::CircuitWitness(pb::CircuitWitness {
        circuit: circuit.into(),
        inputs: zkpipe_serve::circuits::to_bytes(inputs).into(),
        aux: zkpipe_serve::circuits::to_bytes(aux).into(),
    })
}

#[test]
fn a_registered_circuit_is_proved_from_its_witness_over_the_socket_and_tcp() {
    use zkpipe_bellperson::circuits::RandomR1cs;
    let dir = scratch("circuits");
    let random = RandomR1cs {
        constraints: 700,
        inputs: 3,
        seed: 11,
    };
    let config = circuit_files(&dir, "random", random);
    let other = circuit_files(
        &dir,
        "other",
        RandomR1cs {
            constraints: 300,
            ..random
        },
    );
    let params = bellperson::groth16::Parameters::<blstrs::Bls12>::read(
        std::fs::File::open(&config.params).unwrap(),
        false,
    )
    .unwrap();
    let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
    let witness = zkpipe_bellperson::synthesize(random).expect("synthesizes");
    let inputs = witness.input[1..].to_vec();
    let aux = witness.aux.to_vec();
    let accepted = |proof: &[u8]| {
        let proof = bellperson::groth16::Proof::<blstrs::Bls12>::read(proof).expect("192 bytes");
        bellperson::groth16::verify_proof(&pvk, &proof, &inputs).expect("verifies")
    };

    // Registration refuses files that are not of one circuit, a damaged recording and a bad
    // name, each with its reason.
    let prover = || Prover::new(ParamsCache::new(params_dir()), ProveOptions::default());
    let register = |name: &str, c: zkpipe_serve::CircuitConfig| {
        zkpipe_serve::Circuits::register(&prover(), &[(name.to_string(), c)].into())
    };
    let mixed = zkpipe_serve::CircuitConfig {
        recording: other.recording.clone(),
        ..config.clone()
    };
    let e = register("mixed", mixed).unwrap_err();
    assert!(
        matches!(e, zkpipe_serve::CircuitError::Mismatch { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("not of one circuit"), "{e}");
    let damaged = dir.join("damaged.zkpipe-r1cs");
    let mut bytes = std::fs::read(&config.recording).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&damaged, bytes).unwrap();
    let e = register(
        "damaged",
        zkpipe_serve::CircuitConfig {
            recording: damaged,
            ..config.clone()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, zkpipe_serve::CircuitError::Recording { .. }),
        "{e}"
    );
    let e = register("a b", config.clone()).unwrap_err();
    assert!(matches!(e, zkpipe_serve::CircuitError::BadName(_)), "{e}");

    let prover = prover();
    let configs = [("random".to_string(), config.clone())].into();
    let circuits = zkpipe_serve::Circuits::register(&prover, &configs).expect("registers");
    let engine = Engine::start(Config::default().with_backend(Backend::Cpu)).expect("engine");
    // Its requests' digests, checks and conversions on two threads of their own.
    let threads = RequestThreads::new(2, 10).expect("request threads");
    let d = Daemon::start(prover, engine, circuits, Limits::default(), threads);
    let token_file = dir.join("token");
    std::fs::write(&token_file, "circuit-token\n").unwrap();
    let serve_config = ServeConfig {
        socket: dir.join("zkpipe.sock"),
        tcp: Some(free_port()),
        token_file: Some(token_file),
        ..ServeConfig::default()
    };
    let served = Served::start(&d, &serve_config);
    served.rt.block_on(async {
        let mut c = connect_unix(&serve_config.socket).await.expect("connects");
        let status = c
            .get_status(pb::StatusRequest {})
            .await
            .unwrap()
            .into_inner();
        let listed = &status.circuits[0];
        assert_eq!(
            (listed.name.as_str(), listed.inputs, listed.aux),
            ("random", 3, aux.len() as u64)
        );
        assert!(status.keys.iter().any(|k| k.id == "circuit:random"));

        let answer = c
            .prove(submit(
                "circuit-1",
                circuit_witness("random", &inputs, &aux),
            ))
            .await
            .expect("proves")
            .into_inner();
        assert_eq!(answer.state(), pb::JobState::Completed, "{}", answer.error);
        assert_eq!((answer.kind.as_str(), answer.partitions), ("circuit", 1));
        assert!(accepted(&answer.proof), "bellperson accepts the proof");

        let mut tcp = connect_tcp(serve_config.tcp.unwrap(), "circuit-token", None)
            .await
            .expect("connects");
        let again = tcp
            .prove(submit(
                "circuit-2",
                circuit_witness("random", &inputs, &aux),
            ))
            .await
            .expect("proves")
            .into_inner();
        assert_eq!(again.state(), pb::JobState::Completed, "{}", again.error);
        assert!(accepted(&again.proof), "over TCP too");
        assert_ne!(again.proof, answer.proof, "each proof its own randomness");

        // Bad witnesses: refused at the boundary with what was wrong.
        let refused = |r: Result<tonic::Response<pb::SubmitResponse>, tonic::Status>| {
            let e = r.expect_err("refused");
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
            e.message().to_string()
        };
        let e = refused(
            c.submit(submit("unknown", circuit_witness("nope", &inputs, &aux)))
                .await,
        );
        assert!(e.contains("unknown circuit") && e.contains("random"), "{e}");
        let e = refused(
            c.submit(submit(
                "short",
                circuit_witness("random", &inputs, &aux[1..]),
            ))
            .await,
        );
        assert!(e.contains(&format!("{} values", aux.len() - 1)), "{e}");
        let mut ragged = circuit_witness("random", &inputs, &aux);
        if let Proof::CircuitWitness(w) = &mut ragged {
            w.aux.truncate(w.aux.len() - 1);
        }
        let e = refused(c.submit(submit("ragged", ragged)).await);
        assert!(e.contains("not a whole number"), "{e}");
        let mut high = circuit_witness("random", &inputs, &aux);
        if let Proof::CircuitWitness(w) = &mut high {
            let mut inputs = w.inputs.to_vec();
            inputs[32..64].fill(0xff);
            w.inputs = inputs.into();
        }
        let e = refused(c.submit(submit("high", high)).await);
        assert!(e.contains("inputs[1]: not a canonical scalar"), "{e}");

        // A witness that does not satisfy the circuit: FAILED, never a wrong proof.
        let mut wrong = aux.clone();
        let last = wrong.len() - 1;
        wrong[last] += blstrs::Scalar::from(1u64);
        let failed = c
            .prove(submit("wrong", circuit_witness("random", &inputs, &wrong)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(failed.state(), pb::JobState::Failed);
        assert!(failed.proof.is_empty());
        assert!(
            failed.error.contains("does not satisfy the circuit"),
            "{}",
            failed.error
        );
    });
    served.stop();
    d.drain();
}

/// A daemon whose proofs take fixed r and s on `engine`, proving `circuits`' too.
fn fixed_daemon(
    engine: Engine,
    circuits: impl FnOnce(&Prover) -> zkpipe_serve::Circuits,
) -> Arc<Daemon> {
    let options = ProveOptions {
        randomness: zkpipe_pipeline::Randomness::Fixed {
            r: blstrs::Scalar::from(0x1234_5678u64),
            s: blstrs::Scalar::from(0x9abc_def0u64),
        },
        ..ProveOptions::default()
    };
    let prover = Prover::new(ParamsCache::new(params_dir()), options);
    let circuits = circuits(&prover);
    Daemon::start(
        prover,
        engine,
        circuits,
        Limits::default(),
        RequestThreads::Global,
    )
}

/// The daemon on a GPU engine: a registered circuit's proof (its a, b and c evaluated on the
/// device from the recording) and a WindowPoSt's, each byte for byte the CPU engine's with
/// the same r and s and accepted by its verifier; then the WindowPoSt key, kept resident on
/// the device after its job beside the circuit's, evicted with its device copies.
#[test]
fn on_the_gpu_proofs_equal_the_cpus_and_an_evicted_key_leaves_the_device() {
    use zkpipe_bellperson::circuits::RandomR1cs;
    use zkpipe_serve::daemon::Phase;
    use zkpipe_serve::{Priority, Work};
    if zkpipe_cuda::testing::gpu_context().is_none() {
        return;
    }
    params_dir();
    let dir = scratch("gpu");
    let random = RandomR1cs {
        constraints: 20_000,
        inputs: 5,
        seed: 5,
    };
    let config = circuit_files(&dir, "random", random);
    let configs = [("random".to_string(), config.clone())].into();
    let witness = zkpipe_bellperson::synthesize(random).expect("synthesizes");
    let (inputs, aux) = (
        zkpipe_serve::circuits::to_bytes(&witness.input[1..]),
        zkpipe_serve::circuits::to_bytes(&witness.aux.to_vec()),
    );
    let sealed = gen::seal_sector(&dir.join("sector"), KIB2, SectorData::Random).expect("seals");
    let post = Request::WindowPoSt(gen::window_post_over(std::slice::from_ref(&sealed)).unwrap());
    let limit = Duration::from_secs(600);
    let prove_both = |d: &Daemon| {
        let w = d
            .circuits()
            .witness("random", &inputs, aux.clone().into())
            .expect("a witness");
        let circuit = d
            .submit(
                "circuit",
                blake3::hash(b"c"),
                Work::Circuit(w),
                Priority::Normal,
                None,
            )
            .unwrap();
        let window = d
            .submit(
                "post",
                blake3::hash(b"p"),
                post.clone(),
                Priority::High,
                None,
            )
            .unwrap();
        [circuit, window].map(|s| match ended(d, &s.id, limit) {
            Phase::Completed(bytes) => bytes.to_vec(),
            other => panic!("{}: {other:?}", s.id),
        })
    };
    let register = |p: &Prover| zkpipe_serve::Circuits::register(p, &configs).expect("registers");
    let cpu = fixed_daemon(
        Engine::start(Config::default().with_backend(Backend::Cpu)).unwrap(),
        register,
    );
    let on_cpu = prove_both(&cpu);
    cpu.drain();
    let gpu = fixed_daemon(
        Engine::start(
            Config::default()
                .with_backend(Backend::Gpu)
                .with_pinned_witness(256 << 20),
        )
        .expect("a GPU engine"),
        register,
    );
    assert!(
        gpu.status().engine.backend.starts_with("cuda"),
        "{:?}",
        gpu.status().engine
    );
    let on_gpu = prove_both(&gpu);
    assert_eq!(on_gpu[0], on_cpu[0], "the circuit's proof, GPU against CPU");
    assert_eq!(
        on_gpu[1], on_cpu[1],
        "the WindowPoSt's proof, GPU against CPU"
    );
    let params = bellperson::groth16::Parameters::<blstrs::Bls12>::read(
        std::fs::File::open(&config.params).unwrap(),
        false,
    )
    .unwrap();
    let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
    let proof = bellperson::groth16::Proof::<blstrs::Bls12>::read(&on_gpu[0][..]).unwrap();
    assert!(bellperson::groth16::verify_proof(&pvk, &proof, &witness.input[1..]).unwrap());
    assert!(zkpipe_filecoin::verify::with_filecoin_proofs(&post, &on_gpu[1]).unwrap());
    // The key of the last job stays resident on the device; evicting it frees that copy.
    let last = gpu
        .submit(
            "last",
            blake3::hash(b"l"),
            post.clone(),
            Priority::High,
            None,
        )
        .unwrap();
    assert!(matches!(ended(&gpu, &last.id, limit), Phase::Completed(_)));
    let window = WINDOW_2KIB;
    let kept = gpu.status().engine.vram_kept;
    let evicted = gpu.evict(window).expect("evicts").expect("it was held");
    assert!(evicted.host_bytes > 0);
    assert!(evicted.device_bytes > 0, "{evicted:?}");
    // Its device copies (the key's, and the recording's where it had one) leave the budget;
    // the circuit's key and recording, resident beside them, stay.
    let engine = gpu.status().engine;
    assert_eq!(engine.vram_kept, kept - evicted.device_bytes, "{engine:?}");
    assert!(engine.vram_kept > 0, "{engine:?}");
    assert!(gpu
        .status()
        .keys
        .iter()
        .all(|k| !k.id.contains("proof-of-spacetime")));
    gpu.drain();
}
