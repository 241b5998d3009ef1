//! The daemon's protocol without proving anything (CPU backend): TLS on TCP, server
//! reflection, ten thousand fuzzed requests and a thousand concurrent ones from 32 clients,
//! each answered with its status while the daemon goes on serving.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prost::bytes::{Buf, BufMut};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Code;
use zkpipe_filecoin::{ParamsCache, ProveOptions, Prover};
use zkpipe_pipeline::{Backend, Config, Engine};
use zkpipe_serve::pb::{self, submit_request::Proof};
use zkpipe_serve::{
    connect_tcp, connect_unix, serve, unix_channel, ClientTls, Daemon, Limits, ProverService,
    ServeConfig,
};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("serve-protocol")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn free_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address")
}

/// A daemon that never gets a valid job here: its parameter directory is empty.
fn daemon(dir: &std::path::Path) -> Arc<Daemon> {
    let prover = Prover::new(
        ParamsCache::new(dir.join("params")),
        ProveOptions::default(),
    );
    let engine = Engine::start(Config::default().with_backend(Backend::Cpu)).expect("engine");
    Daemon::start(
        prover,
        engine,
        zkpipe_serve::Circuits::default(),
        Limits::default(),
        zkpipe_serve::RequestThreads::Global,
    )
}

/// Serves `config` on a runtime of its own thread until the returned sender is dropped or
/// used; waits until the socket is there.
struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), zkpipe_serve::ServeError>>>,
    daemon: Arc<Daemon>,
}

impl Running {
    fn start(config: &ServeConfig, dir: &std::path::Path) -> Self {
        let d = daemon(dir);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let service = ProverService::new(Arc::clone(&d));
        let cfg = config.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().expect("runtime");
            rt.block_on(serve(service, &cfg, async {
                let _ = stopped.await;
            }))
        });
        for _ in 0..200 {
            if config.socket.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert!(config.socket.exists(), "the daemon listens");
        Self {
            stop: Some(stop),
            thread: Some(thread),
            daemon: d,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let served = t.join().expect("the server thread");
            if !std::thread::panicking() {
                served.expect("the server stops cleanly");
            }
        }
        self.daemon.drain();
    }
}

/// A daemon serving on a unix socket alone, in a scratch directory named `name`.
fn on_a_socket(name: &str) -> (ServeConfig, Running) {
    let dir = scratch(name);
    let config = ServeConfig {
        socket: dir.join("zkpipe.sock"),
        ..ServeConfig::default()
    };
    let running = Running::start(&config, &dir);
    (config, running)
}

/// GetStatus over TCP with the right token: an error when the connection or the call fails.
async fn status_over_tcp(
    addr: std::net::SocketAddr,
    tls: Option<&ClientTls>,
) -> Result<(), tonic::Status> {
    match connect_tcp(addr, "tls-token", tls).await {
        Ok(mut c) => c.get_status(pb::StatusRequest {}).await.map(|_| ()),
        Err(e) => Err(tonic::Status::unavailable(e.to_string())),
    }
}

#[test]
fn tcp_serves_tls_with_the_token_and_refuses_plain_text() {
    let dir = scratch("tls");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a cert");
    let cert_pem = cert.cert.pem();
    std::fs::write(dir.join("cert.pem"), &cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("token"), "tls-token\n").unwrap();
    let config = ServeConfig {
        socket: dir.join("zkpipe.sock"),
        tcp: Some(free_port()),
        token_file: Some(dir.join("token")),
        tls_cert: Some(dir.join("cert.pem")),
        tls_key: Some(dir.join("key.pem")),
        ..ServeConfig::default()
    };
    let _running = Running::start(&config, &dir);
    let addr = config.tcp.unwrap();
    let tls = ClientTls {
        ca_pem: cert_pem.into_bytes(),
        domain: "localhost".into(),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = connect_tcp(addr, "tls-token", Some(&tls))
            .await
            .expect("connects over TLS");
        let status = c.get_status(pb::StatusRequest {}).await.expect("served");
        assert_eq!(
            status.into_inner().workers,
            3,
            "two workers and one for urgent jobs"
        );
        let mut wrong = connect_tcp(addr, "other", Some(&tls)).await.unwrap();
        let e = wrong.get_status(pb::StatusRequest {}).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e}");
        // Plain text to a TLS port: no call gets through.
        let plain = status_over_tcp(addr, None).await;
        assert!(
            plain.is_err(),
            "a plain-text call to the TLS port was served"
        );
        // A certificate for another name is not trusted.
        let other = ClientTls {
            domain: "example.org".into(),
            ..tls.clone()
        };
        let mismatched = status_over_tcp(addr, Some(&other)).await;
        assert!(
            mismatched.is_err(),
            "a certificate for another name was taken"
        );
    });
    // Half a TLS configuration stops the start with its reason.
    let half = ServeConfig {
        socket: dir.join("half.sock"),
        tcp: Some(free_port()),
        token_file: Some(dir.join("token")),
        tls_cert: Some(dir.join("cert.pem")),
        ..ServeConfig::default()
    };
    let d = daemon(&dir);
    let e = rt
        .block_on(serve(
            ProverService::new(Arc::clone(&d)),
            &half,
            std::future::pending(),
        ))
        .unwrap_err();
    assert!(e.to_string().contains("tls_key"), "{e}");
    d.drain();
}

#[test]
fn reflection_names_the_service() {
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };
    let dir = scratch("reflection");
    let config = ServeConfig {
        socket: dir.join("zkpipe.sock"),
        ..ServeConfig::default()
    };
    let _running = Running::start(&config, &dir);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let channel = unix_channel(&config.socket).await.unwrap();
        let mut c = ServerReflectionClient::new(channel);
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut answers = c
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .expect("reflection is served")
            .into_inner();
        let answer = answers.message().await.unwrap().expect("an answer");
        let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
            panic!("a list of services: {answer:?}");
        };
        let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
        assert!(names.iter().any(|n| n == "zkpipe.v1.Prover"), "{names:?}");
    });
}

/// A codec that sends a body's bytes as they are and takes the answer's bytes whole: for
/// request bodies no stub would write.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

struct RawEncoder;
struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Self::Error> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

/// xorshift64*: the fuzzer's numbers, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// JSON-looking bytes: a valid request's skeleton with fields dropped, renamed or given
/// random values, or cut short.
fn jsonish(r: &mut Rng) -> Vec<u8> {
    let skeletons = [
        r#"{"registered_proof":"StackedDrgWinning2KiBV1","randomness":[0,1],"prover_id":[1,2],"replicas":[],"vanilla_proofs":[[]]}"#,
        r#"{"registered_proof":"StackedDrgWindow2KiBV1_2","randomness":"00","prover_id":"11","replicas":[{"sector_id":1}],"vanilla_proofs":[]}"#,
        r#"{"registered_proof":"StackedDrg2KiBV1_1","vanilla_proofs":{"StackedDrg2KiBV1":[]},"comm_r":[],"comm_d":[],"replica_id":[],"seed":[],"ticket":[]}"#,
        r#"{"update_proof":"StackedDrg2KiBV1_1","comm_r_old":[],"comm_r_new":[],"comm_d_new":[],"vanilla_proofs":[]}"#,
        "[]",
        "null",
        "{}",
    ];
    let mut text = skeletons[r.below(skeletons.len() as u64) as usize]
        .as_bytes()
        .to_vec();
    match r.below(4) {
        0 => {
            let at = r.below(text.len() as u64) as usize;
            text.truncate(at);
        }
        1 => {
            for _ in 0..r.below(8) + 1 {
                let at = r.below(text.len() as u64) as usize;
                text[at] = r.next() as u8;
            }
        }
        2 => {
            let at = r.below(text.len() as u64) as usize;
            let junk = r.bytes(64);
            text.splice(at..at, junk);
        }
        _ => {}
    }
    text
}

/// A SubmitRequest no valid job can come of, with every field's edge cases.
fn fuzzed_submit(r: &mut Rng) -> pb::SubmitRequest {
    let request_id = match r.below(8) {
        0 => String::new(),
        1 => "x".repeat(129 + r.below(200) as usize),
        _ => format!("fuzz-{}", r.below(1 << 20)),
    };
    let priority = match r.below(6) {
        0 => -(r.below(1000) as i32) - 1,
        1 => 5 + r.below(1000) as i32,
        _ => r.below(5) as i32,
    };
    let body = |r: &mut Rng| match r.below(3) {
        0 => Vec::new(),
        1 => r.bytes(2048),
        _ => jsonish(r),
    };
    let proof = match r.below(6) {
        0 => None,
        1 => Some(Proof::PorepC2(pb::PoRepC2 {
            c1_json: body(r),
            prover_id: r.bytes(40),
            sector_id: r.next(),
            registered_proof: match r.below(3) {
                0 => String::new(),
                1 => "StackedDrg2KiBV1_1".into(),
                _ => String::from_utf8_lossy(&r.bytes(20)).into_owned(),
            },
        })),
        2 => Some(Proof::WindowPostJson(body(r))),
        3 => Some(Proof::WinningPostJson(body(r))),
        _ => Some(Proof::SnapJson(body(r))),
    };
    pb::SubmitRequest {
        request_id,
        priority,
        deadline_ms: r.next() % 3,
        proof,
    }
}

/// The statuses a fuzzed or unknown request may get: each names what was wrong.
fn expected_refusal(code: Code) -> bool {
    matches!(
        code,
        Code::InvalidArgument | Code::NotFound | Code::ResourceExhausted | Code::AlreadyExists
    )
}

#[test]
fn ten_thousand_fuzzed_requests_are_refused_and_the_daemon_serves_on() {
    let dir = scratch("fuzz");
    let config = ServeConfig {
        socket: dir.join("zkpipe.sock"),
        max_message: 1 << 16,
        ..ServeConfig::default()
    };
    let _running = Running::start(&config, &dir);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = connect_unix(&config.socket).await.unwrap();
        let channel = unix_channel(&config.socket).await.unwrap();
        let mut raw = tonic::client::Grpc::new(channel);
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut codes = std::collections::BTreeMap::<String, usize>::new();
        const REQUESTS: usize = 10_000;
        for i in 0..REQUESTS {
            let outcome: Result<(), tonic::Status> = match i % 4 {
                // Typed requests with fuzzed fields.
                0 | 1 => c.submit(fuzzed_submit(&mut r)).await.map(|_| ()),
                // Raw bodies to every call: random bytes, or a fuzzed request's encoding
                // with bytes flipped, or one over the message limit.
                _ => {
                    let method = [
                        "/zkpipe.v1.Prover/Submit",
                        "/zkpipe.v1.Prover/Prove",
                        "/zkpipe.v1.Prover/Await",
                        "/zkpipe.v1.Prover/Cancel",
                    ][r.below(4) as usize];
                    let body = match r.below(8) {
                        0 => vec![b'{'; (1 << 16) + 1],
                        1..=3 => r.bytes(512),
                        _ => {
                            let mut b = fuzzed_submit(&mut r).encode_to_vec();
                            for _ in 0..r.below(4) {
                                if !b.is_empty() {
                                    let at = r.below(b.len() as u64) as usize;
                                    b[at] = r.next() as u8;
                                }
                            }
                            b
                        }
                    };
                    raw.ready().await.expect("the connection is ready");
                    raw.unary(
                        tonic::Request::new(body),
                        tonic::codegen::http::uri::PathAndQuery::from_static(method),
                        RawCodec,
                    )
                    .await
                    .map(|_| ())
                }
            };
            let code = match outcome {
                Ok(()) => Code::Ok,
                Err(e) => {
                    assert!(
                        expected_refusal(e.code()),
                        "request {i}: {:?}: {}",
                        e.code(),
                        e.message()
                    );
                    e.code()
                }
            };
            *codes.entry(format!("{code:?}")).or_default() += 1;
        }
        // Nothing fuzzed became a job, and the daemon still answers.
        let status = c
            .get_status(pb::StatusRequest {})
            .await
            .unwrap()
            .into_inner();
        let pending: u32 = status
            .queues
            .iter()
            .filter(|q| q.kind.is_empty())
            .map(|q| q.pending)
            .sum();
        assert_eq!(pending + status.running, 0, "{codes:?}");
        assert_eq!(codes.values().sum::<usize>(), REQUESTS);
        assert!(codes.contains_key("InvalidArgument"), "{codes:?}");
        assert!(codes.contains_key("ResourceExhausted"), "{codes:?}");
        eprintln!("{REQUESTS} fuzzed requests: {codes:?}");
    });
}

#[test]
fn a_thousand_concurrent_requests_from_32_clients_are_all_answered() {
    let (config, _running) = on_a_socket("concurrent");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    const CLIENTS: usize = 32;
    const EACH: usize = 32;
    let answered = rt.block_on(async {
        let mut tasks = Vec::new();
        for client in 0..CLIENTS {
            let socket = config.socket.clone();
            tasks.push(tokio::spawn(async move {
                let c = connect_unix(&socket).await.expect("connects");
                let calls = (0..EACH).map(|i| {
                    let mut c = c.clone();
                    async move {
                        match i % 4 {
                            0 => {
                                let s = c.get_status(pb::StatusRequest {}).await?;
                                assert!(s.into_inner().workers > 0);
                                Ok(())
                            }
                            1 => {
                                let e = c
                                    .r#await(pb::AwaitRequest {
                                        job_id: format!("none-{client}-{i}"),
                                        timeout_ms: 1,
                                    })
                                    .await
                                    .unwrap_err();
                                assert_eq!(e.code(), Code::NotFound);
                                Ok(())
                            }
                            2 => {
                                let e = c
                                    .submit(pb::SubmitRequest {
                                        request_id: format!("c{client}-{i}"),
                                        priority: 0,
                                        deadline_ms: 0,
                                        proof: Some(Proof::WinningPostJson(b"{".to_vec())),
                                    })
                                    .await
                                    .unwrap_err();
                                assert_eq!(e.code(), Code::InvalidArgument);
                                Ok(())
                            }
                            _ => {
                                let m = c.get_metrics(pb::MetricsRequest {}).await?;
                                assert!(m.into_inner().text.contains("zkpipe_serve_workers"));
                                Ok::<(), tonic::Status>(())
                            }
                        }
                    }
                });
                let results = futures_join_all(calls).await;
                results.into_iter().filter(|r| r.is_ok()).count()
            }));
        }
        let mut answered = 0;
        for t in tasks {
            answered += tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .expect("every client is answered in time")
                .expect("the client task");
        }
        answered
    });
    assert_eq!(answered, CLIENTS * EACH);
}

/// Runs the futures at once and gives their outputs in order.
async fn futures_join_all<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("a call's task"));
    }
    out
}

#[test]
fn keys_are_named_by_kind_and_size_and_refusals_say_why() {
    let (config, _running) = on_a_socket("keys");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = connect_unix(&config.socket).await.expect("connects");
        let winning = pb::KeyKind::WinningPost as i32;
        let preload = |kind, sector_size| pb::PreloadKeyRequest { kind, sector_size };
        for (kind, size) in [(0, 2048), (9, 2048), (winning, 4096)] {
            let e = c.preload_key(preload(kind, size)).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        }
        // A production size's parameters are never generated: the missing file is named.
        let e = c.preload_key(preload(winning, 32 << 30)).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
        assert!(e.message().contains("no parameter file"), "{e}");
        let r = c
            .evict_key(pb::EvictKeyRequest {
                kind: pb::KeyKind::PorepC2 as i32,
                sector_size: 32 << 30,
            })
            .await
            .expect("answered")
            .into_inner();
        assert!(!r.evicted, "a key not held is not evicted");
        let e = c
            .evict_key(pb::EvictKeyRequest {
                kind: 0,
                sector_size: 2048,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    });
}
