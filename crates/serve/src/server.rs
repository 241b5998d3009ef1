//! Where the daemon listens: a unix socket (mode 0600: only its user may connect) and, when
//! configured, TCP, where every call must carry the bearer token read from a file. Clients
//! for both, for the CLI and the tests.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use tonic::transport::{
    Certificate, Channel, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig,
};
use tonic::{Request, Status};
use zkpipe_pipeline::G2Placement;

use crate::pb::prover_client::ProverClient;
use crate::pb::prover_server::ProverServer;
use crate::service::ProverService;

/// The `[serve]` table of the daemon's configuration file.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// The unix socket to listen on. Default `zkpipe.sock` in the working directory.
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// A TCP address to listen on as well (say "0.0.0.0:7500"); needs `token_file`.
    #[serde(default)]
    pub tcp: Option<std::net::SocketAddr>,
    /// The bearer token TCP callers must send (`authorization: Bearer <token>`), read from
    /// this file (its first line).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// TCP serves TLS with this certificate chain (PEM) and `tls_key`; both or neither.
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `tls_cert`.
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// An address for HTTP `GET /metrics` (Prometheus text) and `GET /status` (JSON), say
    /// "127.0.0.1:9100". With a `token_file` every request must carry its bearer token;
    /// without one the address must be a loopback address.
    #[serde(default)]
    pub http: Option<std::net::SocketAddr>,
    /// Jobs of any priority proved at once. Default 2.
    #[serde(default = "default_jobs")]
    pub jobs: usize,
    /// Jobs besides those, of HIGH and CRITICAL priority only (WindowPoSt, WinningPoSt), so
    /// that one starts at once while long jobs run. Default 1.
    #[serde(default = "default_urgent_jobs")]
    pub urgent_jobs: usize,
    /// Jobs that may wait at once. Default 10000.
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// How long an ended job is kept for a late await, in seconds. Default 3600.
    #[serde(default = "default_keep")]
    pub keep_finished_s: u64,
    /// The largest request taken, in bytes (a 32 GiB PoRep's C1 output is about 50 MB).
    /// Default 128 MiB.
    #[serde(default = "default_message", deserialize_with = "de_bytes")]
    pub max_message: usize,
    /// Where the parameters are (and test parameters are generated). Default:
    /// `FIL_PROOFS_PARAMETER_CACHE`, else /var/tmp/filecoin-proof-parameters.
    #[serde(default)]
    pub params_dir: Option<PathBuf>,
    /// Host bytes the proving keys may take ("200GiB"): a key to be read that would pass it
    /// first evicts the least recently used keys no job holds. Default: no limit.
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub key_budget: Option<usize>,
    /// Seconds a job whose key finds `key_budget` held by keys in use waits for them to be let
    /// go before it fails (a key larger than the whole budget fails at once). Default 600.
    #[serde(default = "default_key_wait")]
    pub key_wait_s: u64,
    /// Parameter file bytes the keys let go of host memory may keep mapped in the page cache
    /// (the warm tier: read again without disk reads or a digest). Default: `key_budget`,
    /// else no limit; "0" keeps no key warm.
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub warm_key_budget: Option<usize>,
    /// Keys read (and page-locked on a GPU) at start, as KIND:SIZE ("winning-post:32GiB");
    /// one that cannot be read stops the start with its reason.
    #[serde(default)]
    pub preload: Vec<String>,
    /// Partitions synthesized at once across all jobs, each into a witness the engine lends;
    /// where there are two or more, one is kept for HIGH and CRITICAL jobs. Default 3.
    #[serde(default = "default_synthesis")]
    pub synthesis_threads: usize,
    /// Host bytes the partitions synthesizing at once may take together ("96GiB"), each by
    /// its estimate (a 32 GiB PoRep partition about 8 GiB): a partition waits until its
    /// working set fits, and one larger than the whole budget fails with the bytes. Default:
    /// no limit.
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub synthesis_memory: Option<usize>,
    /// Threads for the daemon's own work on requests' bytes (a request's digest, a witness's
    /// canonical check and its conversion into the engine's memory), apart from the engine's
    /// host threads. Default 0: rayon's global pool, a thread a core.
    #[serde(default)]
    pub request_threads: usize,
    /// How far below the daemon's priority those threads run when they are its own (their
    /// nice value this much above the daemon's, at most 19). Default 0, the same priority:
    /// taking in requests feeds the GPU, and threads that yield their cores to the engine's
    /// starve it (benches/NOTES.md, session 40).
    #[serde(default)]
    pub request_nice: u8,
    /// Circuits proved besides Filecoin's, by name: `[serve.circuits.NAME]` with `params`
    /// (the Groth16 parameter file) and `recording` (the circuit's recording). Each is read
    /// and checked at start; one that cannot be used stops the start with its reason.
    #[serde(default)]
    pub circuits: std::collections::BTreeMap<String, crate::CircuitConfig>,
}

fn default_socket() -> PathBuf {
    PathBuf::from("zkpipe.sock")
}
fn default_jobs() -> usize {
    2
}
fn default_synthesis() -> usize {
    3
}
fn default_urgent_jobs() -> usize {
    1
}
fn default_queue() -> usize {
    10_000
}
fn default_keep() -> u64 {
    3600
}
fn default_key_wait() -> u64 {
    600
}
fn default_message() -> usize {
    128 << 20
}

fn de_opt_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    de_bytes(d).map(Some)
}

fn de_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Size {
        Count(u64),
        Text(String),
    }
    match <Size as serde::Deserialize>::deserialize(d)? {
        Size::Count(n) => usize::try_from(n).map_err(serde::de::Error::custom),
        Size::Text(t) => zkpipe_pipeline::parse_bytes(&t).map_err(serde::de::Error::custom),
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            socket: default_socket(),
            tcp: None,
            token_file: None,
            tls_cert: None,
            tls_key: None,
            http: None,
            jobs: default_jobs(),
            urgent_jobs: default_urgent_jobs(),
            queue: default_queue(),
            keep_finished_s: default_keep(),
            max_message: default_message(),
            params_dir: None,
            key_budget: None,
            key_wait_s: default_key_wait(),
            warm_key_budget: None,
            preload: Vec::new(),
            synthesis_threads: default_synthesis(),
            synthesis_memory: None,
            request_threads: 0,
            request_nice: 0,
            circuits: Default::default(),
        }
    }
}

impl ServeConfig {
    /// The daemon's limits from the configuration.
    pub fn limits(&self) -> crate::Limits {
        crate::Limits {
            workers: self.jobs.max(1),
            urgent_workers: self.urgent_jobs,
            queue: self.queue,
            keep_finished: std::time::Duration::from_secs(self.keep_finished_s),
            synthesis_memory: self.synthesis_memory,
        }
    }
}

/// Why a configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Toml {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{path}: the engine's fields: {source}")]
    Engine {
        path: PathBuf,
        source: Box<zkpipe_pipeline::ProveError>,
    },
}

/// The daemon's configuration file: a `[serve]` table ([`ServeConfig`]) beside the engine's
/// fields (`zkpipe_pipeline::Config`'s, as `zkpipe prove --config` takes them).
pub fn read_config(path: &Path) -> Result<(ServeConfig, zkpipe_pipeline::Config), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let toml_err = |source| ConfigError::Toml {
        path: path.to_path_buf(),
        source: Box::new(source),
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(toml_err)?;
    let serve = match table.remove("serve") {
        Some(v) => v.try_into().map_err(toml_err)?,
        None => ServeConfig::default(),
    };
    let g2_named = table.contains_key("g2");
    let engine_text = toml::to_string(&table).unwrap_or_default();
    let engine =
        zkpipe_pipeline::Config::from_toml(&engine_text).map_err(|source| ConfigError::Engine {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
    let engine = match g2_named {
        true => engine,
        false => engine.with_g2(G2Placement::Gpu),
    };
    Ok((serve, engine))
}

/// The engine's configuration for a daemon given no file: the engine's defaults but the G2
/// MSM on the GPU, as [`read_config`] has it where a file does not name `g2`. With several
/// partitions synthesizing at once the host's cores are the synthesis's, and the G2 MSM
/// there (the engine's own default) held a daemon's PoRep throughput to a quarter of the
/// GPU placement's (benches/NOTES.md, session 30).
pub fn default_engine_config() -> zkpipe_pipeline::Config {
    zkpipe_pipeline::Config::default().with_g2(G2Placement::Gpu)
}

/// Why the daemon could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the token file {0} is empty")]
    EmptyToken(PathBuf),
    #[error("TCP ({0}) needs a token_file: a daemon on the network takes no call without one")]
    TcpWithoutToken(std::net::SocketAddr),
    #[error("HTTP on {0}, not a loopback address, needs a token_file")]
    HttpWithoutToken(std::net::SocketAddr),
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS needs both tls_cert and tls_key; only {given} is set")]
    TlsHalf { given: &'static str },
    #[error("TLS: {0}")]
    Tls(tonic::transport::Error),
    #[error("server reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("serving: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Reads a bearer token: the file's first line, trimmed.
pub fn read_token(path: &Path) -> Result<String, ServeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServeError::Io {
        what: "reading the token file",
        path: path.to_path_buf(),
        source,
    })?;
    let token = text.lines().next().unwrap_or_default().trim().to_string();
    match token.is_empty() {
        true => Err(ServeError::EmptyToken(path.to_path_buf())),
        false => Ok(token),
    }
}

/// Checks the bearer token of every call, in constant time.
#[derive(Clone)]
struct BearerCheck {
    expected: Arc<str>,
}

impl tonic::service::Interceptor for BearerCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let given = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        match bearer_matches(given, &self.expected) {
            true => Ok(request),
            false => Err(Status::unauthenticated(
                "a bearer token is required (authorization: Bearer <token>), and this one is not the daemon's",
            )),
        }
    }
}

/// True when `authorization` (a header's value) is `Bearer <expected>`, compared in constant
/// time.
pub(crate) fn bearer_matches(authorization: Option<&str>, expected: &str) -> bool {
    let given = authorization
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |d, (a, b)| d | (a ^ b))
            == 0
}

/// tonic's own refusals of a request, as the daemon's contract states them: a message over
/// the limit (tonic: OUT_OF_RANGE) is RESOURCE_EXHAUSTED, gRPC's convention for a size limit;
/// a body that is not a valid protobuf message of the call's type (tonic: INTERNAL, as if the
/// daemon had failed) is INVALID_ARGUMENT. The service itself never answers INTERNAL.
fn refusals_as_the_contract_states<B>(
    mut response: tonic::codegen::http::Response<B>,
) -> tonic::codegen::http::Response<B> {
    let headers = response.headers();
    let code = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or_default();
    let says = |text: &str| message.contains(text) || message.contains(&text.replace(' ', "%20"));
    let mapped = match code {
        "11" if says("too large") => Some("8"),
        "13" if says("failed to decode Protobuf message") => Some("3"),
        _ => None,
    };
    if let Some(to) = mapped {
        response.headers_mut().insert(
            "grpc-status",
            tonic::codegen::http::HeaderValue::from_static(to),
        );
    }
    response
}

/// What the daemon listens on, checked and bound before anything is served: a missing
/// token or a taken port stops the start rather than leaving a daemon half up.
struct Listeners {
    unix: tokio::net::UnixListener,
    /// TCP, with the token every call must carry, and TLS when configured.
    tcp: Option<(tokio::net::TcpListener, Arc<str>, Option<ServerTlsConfig>)>,
    /// HTTP, with the token when the daemon has one.
    http: Option<(tokio::net::TcpListener, Option<Arc<str>>)>,
}

async fn bind_tcp(addr: std::net::SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Listen { addr, source })
}

/// The TLS identity from `tls_cert` and `tls_key`, when both are set.
fn server_tls(config: &ServeConfig) -> Result<Option<ServerTlsConfig>, ServeError> {
    let read = |what, path: &PathBuf| {
        std::fs::read(path).map_err(|source| ServeError::Io {
            what,
            path: path.clone(),
            source,
        })
    };
    match (&config.tls_cert, &config.tls_key) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(ServeError::TlsHalf { given: "tls_cert" }),
        (None, Some(_)) => Err(ServeError::TlsHalf { given: "tls_key" }),
        (Some(cert), Some(key)) => {
            let identity = Identity::from_pem(
                read("reading the TLS certificate", cert)?,
                read("reading the TLS key", key)?,
            );
            Ok(Some(ServerTlsConfig::new().identity(identity)))
        }
    }
}

impl Listeners {
    async fn bind(config: &ServeConfig) -> Result<Self, ServeError> {
        let token = match &config.token_file {
            Some(file) => Some(Arc::<str>::from(read_token(file)?)),
            None => None,
        };
        let tcp = match config.tcp {
            None => None,
            Some(addr) => {
                let token = token.clone().ok_or(ServeError::TcpWithoutToken(addr))?;
                let tls = server_tls(config)?;
                Some((bind_tcp(addr).await?, token, tls))
            }
        };
        let http = match config.http {
            None => None,
            Some(addr) if token.is_none() && !addr.ip().is_loopback() => {
                return Err(ServeError::HttpWithoutToken(addr));
            }
            Some(addr) => Some((bind_tcp(addr).await?, token.clone())),
        };
        let socket = &config.socket;
        let io = |what, source| ServeError::Io {
            what,
            path: socket.clone(),
            source,
        };
        // A socket file left by a daemon that did not stop cleanly is replaced.
        if socket.exists() {
            std::fs::remove_file(socket).map_err(|e| io("removing the old socket", e))?;
        }
        let unix =
            tokio::net::UnixListener::bind(socket).map_err(|e| io("listening on the socket", e))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| io("setting the socket's mode", e))?;
        }
        Ok(Self { unix, tcp, http })
    }
}

/// HTTP/2 flow control for requests of tens to hundreds of MB, on either end: with the
/// defaults (windows of 64 KiB to 1 MiB, frames of 16 KiB) a witness crosses a connection in
/// thousands of window updates, and the calls that share it wait behind them.
mod flow {
    /// Bytes a call may send before its receiver grants more.
    pub const STREAM_WINDOW: u32 = 32 << 20;
    /// Bytes all calls of a connection may send before their receiver grants more.
    pub const CONNECTION_WINDOW: u32 = 128 << 20;
    /// The largest frame a receiver accepts.
    pub const MAX_FRAME: u32 = 1 << 20;
}

/// A server builder with [`flow`]'s windows and frames.
fn http2_server() -> Server {
    Server::builder()
        .initial_stream_window_size(flow::STREAM_WINDOW)
        .initial_connection_window_size(flow::CONNECTION_WINDOW)
        .max_frame_size(flow::MAX_FRAME)
}

/// A client endpoint with [`flow`]'s windows and frames.
fn http2_client(endpoint: Endpoint) -> Endpoint {
    endpoint
        .initial_stream_window_size(flow::STREAM_WINDOW)
        .initial_connection_window_size(flow::CONNECTION_WINDOW)
        .max_frame_size(flow::MAX_FRAME)
}

/// Serves `service` on the configured socket (and TCP, and HTTP) until `shutdown` resolves.
/// Every listener is checked and bound first; should one fail while serving, all stop.
pub async fn serve(
    service: ProverService,
    config: &ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let Listeners { unix, tcp, http } = Listeners::bind(config).await?;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let limit = config.max_message;
    let grpc = || {
        ProverServer::new(service.clone())
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit)
    };
    let socket = &config.socket;
    tracing::info!(socket = %socket.display(), "serving on the unix socket");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|&s| s).await;
    };
    let resized = || tower::util::MapResponseLayer::new(refusals_as_the_contract_states);
    let unix = async {
        http2_server()
            .layer(resized())
            .add_service(grpc())
            .add_service(reflection.clone())
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(unix),
                stopped(stop_rx.clone()),
            )
            .await
            .map_err(ServeError::from)
    };
    let tcp = async {
        let Some((listener, token, tls)) = tcp else {
            return Ok(());
        };
        let addr = listener.local_addr().ok();
        tracing::info!(
            ?addr,
            tls = tls.is_some(),
            "serving on TCP (bearer token required)"
        );
        let check = BearerCheck { expected: token };
        let svc = tonic::service::interceptor::InterceptedService::new(grpc(), check.clone());
        let reflection =
            tonic::service::interceptor::InterceptedService::new(reflection.clone(), check);
        let mut builder = http2_server();
        if let Some(tls) = tls {
            builder = builder.tls_config(tls).map_err(ServeError::Tls)?;
        }
        builder
            .layer(resized())
            .add_service(svc)
            .add_service(reflection)
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                stopped(stop_rx.clone()),
            )
            .await
            .map_err(ServeError::from)
    };
    let http = async {
        let Some((listener, token)) = http else {
            return Ok(());
        };
        crate::http::serve(
            listener,
            Arc::clone(service.daemon()),
            token,
            stopped(stop_rx.clone()),
        )
        .await
    };
    let served = tokio::try_join!(unix, tcp, http).map(|_| ());
    let _ = std::fs::remove_file(socket);
    served
}

/// A gRPC channel to the daemon's unix socket at `path`, for any service it serves (the
/// prover, server reflection).
pub async fn unix_channel(path: &Path) -> Result<Channel, tonic::transport::Error> {
    let path = path.to_path_buf();
    // The URI is not used: every connection goes to the socket.
    http2_client(Endpoint::from_static("http://localhost"))
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        }))
        .await
}

/// A client of the daemon on the unix socket at `path`.
pub async fn connect_unix(path: &Path) -> Result<ProverClient<Channel>, tonic::transport::Error> {
    Ok(ProverClient::new(unix_channel(path).await?)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX))
}

/// A client's calls over TCP, each with the bearer token.
pub type TcpClient =
    ProverClient<tonic::service::interceptor::InterceptedService<Channel, BearerToken>>;

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct BearerToken(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// How a TCP client checks the daemon's TLS certificate.
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// The certificate (PEM) of the authority that signed the daemon's, or the daemon's own
    /// when it is self-signed.
    pub ca_pem: Vec<u8>,
    /// The name the daemon's certificate must carry.
    pub domain: String,
}

/// A client of the daemon at `addr` over TCP (TLS when `tls` is given), sending `token` with
/// every call.
pub async fn connect_tcp(
    addr: std::net::SocketAddr,
    token: &str,
    tls: Option<&ClientTls>,
) -> Result<TcpClient, Box<dyn std::error::Error + Send + Sync>> {
    let value = format!("Bearer {token}").parse()?;
    let endpoint = match tls {
        None => Endpoint::from_shared(format!("http://{addr}"))?,
        Some(tls) => Endpoint::from_shared(format!("https://{addr}"))?.tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&tls.ca_pem))
                .domain_name(tls.domain.clone()),
        )?,
    };
    let channel = http2_client(endpoint).connect().await?;
    Ok(ProverClient::with_interceptor(channel, BearerToken(value))
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("zkpipe-serve-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_serve_table_and_the_engine_fields_are_read_apart() {
        let path = config_file(
            "both.toml",
            r#"
backend = "cpu"
cpu_workers = 3
vram_cap = "16GiB"
g2 = "cpu"

[serve]
socket = "/run/zkpipe/zkpipe.sock"
tcp = "0.0.0.0:7500"
token_file = "/etc/zkpipe/token"
http = "127.0.0.1:9100"
jobs = 4
queue = 50
keep_finished_s = 60
max_message = "64MiB"
synthesis_threads = 8
request_threads = 4
request_nice = 5
urgent_jobs = 2
key_budget = "200GiB"
preload = ["winning-post:32GiB", "porep-c2:32GiB"]
"#,
        );
        let (serve, engine) = read_config(&path).expect("reads");
        assert_eq!(serve.socket, PathBuf::from("/run/zkpipe/zkpipe.sock"));
        assert_eq!(serve.tcp, Some("0.0.0.0:7500".parse().unwrap()));
        assert_eq!(serve.token_file, Some(PathBuf::from("/etc/zkpipe/token")));
        assert_eq!(serve.http, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(serve.max_message, 64 << 20);
        let limits = serve.limits();
        assert_eq!((limits.workers, limits.queue), (4, 50));
        assert_eq!(limits.keep_finished, std::time::Duration::from_secs(60));
        assert_eq!(serve.synthesis_threads, 8);
        assert_eq!(serve.request_threads, 4);
        assert_eq!(serve.request_nice, 5);
        assert_eq!(limits.urgent_workers, 2);
        assert_eq!(serve.key_budget, Some(200 << 30));
        let preload: Vec<zkpipe_filecoin::KeyName> =
            serve.preload.iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(preload[0].to_string(), "winning-post:34359738368");
        assert_eq!(preload[1].kind, zkpipe_filecoin::KeyKind::PorepC2);
        assert_eq!(engine.backend, zkpipe_pipeline::Backend::Cpu);
        assert_eq!(engine.cpu_workers, 3);
        assert_eq!(engine.vram_cap, Some(16 << 30));
        assert_eq!(engine.g2, G2Placement::Cpu, "as named");
    }

    #[test]
    fn a_file_without_a_serve_table_takes_the_defaults() {
        let path = config_file("engine-only.toml", "workers_per_device = 1\n");
        let (serve, engine) = read_config(&path).expect("reads");
        assert_eq!(serve.socket, PathBuf::from("zkpipe.sock"));
        assert_eq!((serve.tcp, serve.http), (None, None));
        assert_eq!(serve.limits().workers, 2);
        assert_eq!((serve.key_budget, serve.preload.len()), (None, 0));
        assert_eq!(engine.workers_per_device, 1);
        assert_eq!(
            engine.g2,
            G2Placement::Gpu,
            "a daemon's G2 MSM on the GPU unless named"
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let unknown = config_file("unknown.toml", "[serve]\nsockett = \"x\"\n");
        let e = read_config(&unknown).unwrap_err().to_string();
        assert!(e.contains("sockett") && e.contains("unknown.toml"), "{e}");
        let engine = config_file("engine.toml", "workers_per_devise = 2\n");
        let e = read_config(&engine).unwrap_err().to_string();
        assert!(e.contains("workers_per_devise"), "{e}");
        let size = config_file("size.toml", "[serve]\nmax_message = \"lots\"\n");
        let e = read_config(&size).unwrap_err().to_string();
        assert!(e.contains("lots"), "{e}");
        let missing = read_config(Path::new("/nonexistent/zkpipe.toml")).unwrap_err();
        assert!(matches!(missing, ConfigError::Read { .. }), "{missing}");
    }

    #[test]
    fn http_off_the_loopback_needs_a_token() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let dir = std::env::temp_dir().join(format!("zkpipe-serve-http-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = ServeConfig {
            socket: dir.join("s.sock"),
            http: Some("0.0.0.0:0".parse().unwrap()),
            ..ServeConfig::default()
        };
        let prover = zkpipe_filecoin::Prover::new(
            zkpipe_filecoin::ParamsCache::new(&dir),
            Default::default(),
        );
        let engine = zkpipe_pipeline::Engine::start(
            zkpipe_pipeline::Config::default().with_backend(zkpipe_pipeline::Backend::Cpu),
        )
        .unwrap();
        let daemon = crate::Daemon::start(
            prover,
            engine,
            crate::Circuits::default(),
            crate::Limits::default(),
            crate::RequestThreads::Global,
        );
        let e = rt
            .block_on(serve(
                ProverService::new(Arc::clone(&daemon)),
                &config,
                std::future::pending(),
            ))
            .unwrap_err();
        assert!(matches!(e, ServeError::HttpWithoutToken(_)), "{e}");
        daemon.drain();
    }
}
