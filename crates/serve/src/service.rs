//! The gRPC service: requests checked at the boundary and turned into the daemon's jobs.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request as GrpcRequest, Response, Status};
use zkpipe_filecoin::{request as fil, FilecoinError, KeyKind, KeyName, PoRepC2, Request};

use crate::circuits::{CircuitError, Circuits};
use crate::daemon::{Daemon, DaemonError, JobView, Phase, Priority, Work};
use crate::pb;

/// The longest request id taken.
pub const MAX_REQUEST_ID: usize = 128;

/// The service over one daemon.
#[derive(Debug, Clone)]
pub struct ProverService {
    daemon: Arc<Daemon>,
}

impl ProverService {
    pub fn new(daemon: Arc<Daemon>) -> Self {
        Self { daemon }
    }

    /// The daemon it serves.
    pub fn daemon(&self) -> &Arc<Daemon> {
        &self.daemon
    }
}

impl From<DaemonError> for Status {
    fn from(e: DaemonError) -> Self {
        let text = e.to_string();
        match e {
            DaemonError::RequestIdReused { .. } => Status::already_exists(text),
            DaemonError::UnknownJob(_) => Status::not_found(text),
            DaemonError::QueueFull { .. } => Status::resource_exhausted(text),
            DaemonError::ShuttingDown => Status::unavailable(text),
        }
    }
}

fn invalid(what: impl std::fmt::Display) -> Status {
    Status::invalid_argument(what.to_string())
}

/// The proof a submission asks for, checked and parsed: a Filecoin kind, or a witness of one
/// of `circuits`.
fn parse(proof: Option<pb::submit_request::Proof>, circuits: &Circuits) -> Result<Work, Status> {
    use pb::submit_request::Proof;
    match proof {
        Some(Proof::CircuitWitness(w)) => circuits
            .witness(&w.circuit, &w.inputs, w.aux)
            .map(Work::Circuit)
            .map_err(|e: CircuitError| invalid(format!("circuit_witness: {e}"))),
        other => parse_filecoin(other).map(Work::Filecoin),
    }
}

/// A Filecoin kind's request, checked and parsed.
fn parse_filecoin(proof: Option<pb::submit_request::Proof>) -> Result<Request, Status> {
    use pb::submit_request::Proof;
    let json = |what: &'static str, bytes: &[u8]| -> Result<(), Status> {
        match bytes.is_empty() {
            true => Err(invalid(format!("{what}: empty"))),
            false => Ok(()),
        }
    };
    match proof {
        None => Err(invalid(
            "no proof: set one of porep_c2, window_post_json, winning_post_json, snap_json, circuit_witness",
        )),
        Some(Proof::PorepC2(p)) => {
            json("porep_c2.c1_json", &p.c1_json)?;
            let prover_id: [u8; 32] = p.prover_id.as_slice().try_into().map_err(|_| {
                invalid(format!(
                    "porep_c2.prover_id: {} bytes, expected 32",
                    p.prover_id.len()
                ))
            })?;
            let registered = match p.registered_proof.as_str() {
                "" => None,
                name => Some(
                    serde_json::from_value(serde_json::Value::String(name.into()))
                        .map_err(|e| invalid(format!("porep_c2.registered_proof {name:?}: {e}")))?,
                ),
            };
            let r = PoRepC2::from_c1_json(&p.c1_json, registered, prover_id, p.sector_id)
                .map_err(|e| invalid(format!("porep_c2: {e}")))?;
            Ok(Request::PoRepC2(Box::new(r)))
        }
        Some(Proof::WindowPostJson(bytes)) => {
            json("window_post_json", &bytes)?;
            serde_json::from_slice(&bytes)
                .map(Request::WindowPoSt)
                .map_err(|e| invalid(format!("window_post_json: {e}")))
        }
        Some(Proof::WinningPostJson(bytes)) => {
            json("winning_post_json", &bytes)?;
            serde_json::from_slice(&bytes)
                .map(Request::WinningPoSt)
                .map_err(|e| invalid(format!("winning_post_json: {e}")))
        }
        Some(Proof::SnapJson(bytes)) => {
            json("snap_json", &bytes)?;
            serde_json::from_slice::<fil::SnapUpdate>(&bytes)
                .map(Request::Snap)
                .map_err(|e| invalid(format!("snap_json: {e}")))
        }
        Some(Proof::CircuitWitness(_)) => Err(invalid("circuit_witness: not a Filecoin kind")),
    }
}

/// The key a preload or evict names, checked.
fn key_name(kind: i32, sector_size: u64) -> Result<KeyName, Status> {
    let kind = match pb::KeyKind::try_from(kind) {
        Ok(pb::KeyKind::PorepC2) => KeyKind::PorepC2,
        Ok(pb::KeyKind::WindowPost) => KeyKind::WindowPost,
        Ok(pb::KeyKind::WinningPost) => KeyKind::WinningPost,
        Ok(pb::KeyKind::Snap) => KeyKind::Snap,
        Ok(pb::KeyKind::Unspecified) => return Err(invalid("kind: unspecified")),
        Err(_) => return Err(invalid(format!("kind {kind}: not one of 1 to 4"))),
    };
    const SIZES: [u64; 5] = [2 << 10, 8 << 20, 512 << 20, 32 << 30, 64 << 30];
    if !SIZES.contains(&sector_size) {
        return Err(invalid(format!(
            "sector_size {sector_size}: not one of {SIZES:?}"
        )));
    }
    Ok(KeyName { kind, sector_size })
}

/// A key's preload or eviction refused: its status.
fn key_status(e: FilecoinError) -> Status {
    let text = e.to_string();
    match e {
        FilecoinError::KeyInUse { .. } => Status::failed_precondition(text),
        FilecoinError::KeyBudget { .. } => Status::resource_exhausted(text),
        FilecoinError::ParamsMissing { .. } => Status::failed_precondition(text),
        e if e.is_bad_input() => Status::failed_precondition(text),
        _ => Status::internal(text),
    }
}

/// What decides whether a reused request id names the same job: the request's content, all
/// but the id. Each field enters with its length, so that no bytes moved from one field to
/// the next give the same digest; large fields are hashed on all cores.
fn content_digest(req: &pb::SubmitRequest) -> blake3::Hash {
    use pb::submit_request::Proof;
    let pb::SubmitRequest {
        request_id: _,
        priority,
        deadline_ms,
        proof,
    } = req;
    let mut h = blake3::Hasher::new();
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        match bytes.len() >= PARALLEL_HASH {
            true => h.update_rayon(bytes),
            false => h.update(bytes),
        };
    };
    field(&priority.to_le_bytes());
    field(&deadline_ms.to_le_bytes());
    match proof {
        None => field(b"none"),
        Some(Proof::PorepC2(pb::PoRepC2 {
            c1_json,
            prover_id,
            sector_id,
            registered_proof,
        })) => {
            field(b"porep_c2");
            field(c1_json);
            field(prover_id);
            field(&sector_id.to_le_bytes());
            field(registered_proof.as_bytes());
        }
        Some(Proof::WindowPostJson(json)) => {
            field(b"window_post_json");
            field(json);
        }
        Some(Proof::WinningPostJson(json)) => {
            field(b"winning_post_json");
            field(json);
        }
        Some(Proof::SnapJson(json)) => {
            field(b"snap_json");
            field(json);
        }
        Some(Proof::CircuitWitness(pb::CircuitWitness {
            circuit,
            inputs,
            aux,
        })) => {
            field(b"circuit_witness");
            field(circuit.as_bytes());
            field(inputs);
            field(aux);
        }
    }
    h.finalize()
}

/// Bytes from which a field is hashed on all cores (below, one core is faster).
const PARALLEL_HASH: usize = 1 << 20;

fn priority(p: i32, work: &Work) -> Result<Priority, Status> {
    match pb::Priority::try_from(p) {
        Ok(pb::Priority::Unspecified) => Ok(work.default_priority()),
        Ok(pb::Priority::Low) => Ok(Priority::Low),
        Ok(pb::Priority::Normal) => Ok(Priority::Normal),
        Ok(pb::Priority::High) => Ok(Priority::High),
        Ok(pb::Priority::Critical) => Ok(Priority::Critical),
        Err(_) => Err(invalid(format!("priority {p}: not one of 0 to 4"))),
    }
}

fn to_pb_priority(p: Priority) -> pb::Priority {
    match p {
        Priority::Low => pb::Priority::Low,
        Priority::Normal => pb::Priority::Normal,
        Priority::High => pb::Priority::High,
        Priority::Critical => pb::Priority::Critical,
    }
}

impl ProverService {
    fn submit_checked(&self, req: pb::SubmitRequest) -> Result<pb::SubmitResponse, Status> {
        if req.request_id.is_empty() {
            return Err(invalid(
                "request_id: empty (a caller-chosen idempotency key)",
            ));
        }
        if req.request_id.len() > MAX_REQUEST_ID {
            return Err(invalid(format!(
                "request_id: {} bytes, at most {MAX_REQUEST_ID}",
                req.request_id.len()
            )));
        }
        let digest = content_digest(&req);
        let work = parse(req.proof, self.daemon.circuits())?;
        let priority = priority(req.priority, &work)?;
        let deadline = (req.deadline_ms > 0).then(|| Duration::from_millis(req.deadline_ms));
        let s = self
            .daemon
            .submit(&req.request_id, digest, work, priority, deadline)?;
        Ok(pb::SubmitResponse {
            job_id: s.id,
            queue_position: u32::try_from(s.ahead).unwrap_or(u32::MAX),
            existing: s.existing,
        })
    }

    /// [`Self::submit_checked`] on a thread for blocking work: hashing and decoding a request
    /// of many MB would hold up the runtime's threads, which carry every other call's bytes.
    /// Its parallel parts run on the daemon's request threads.
    async fn submit_off_runtime(
        &self,
        req: pb::SubmitRequest,
    ) -> Result<pb::SubmitResponse, Status> {
        let service = self.clone();
        tokio::task::spawn_blocking(move || {
            let threads = service.daemon.request_threads().clone();
            threads.run(|| service.submit_checked(req))
        })
        .await
        .map_err(|e| Status::internal(format!("checking the request: {e}")))?
    }

    async fn await_job(
        &self,
        id: &str,
        timeout: Option<Duration>,
    ) -> Result<pb::AwaitResponse, Status> {
        let mut rx = self.daemon.watch(id)?;
        let ended = rx.wait_for(Phase::is_final);
        match timeout {
            Some(t) => {
                // Timing out leaves the job as it is: the answer says where it is.
                let _ = tokio::time::timeout(t, ended).await;
            }
            None => {
                let _ = ended.await;
            }
        }
        Ok(answer(&self.daemon.view(id)?))
    }
}

fn answer(v: &JobView) -> pb::AwaitResponse {
    let (state, proof, error) = match &v.phase {
        Phase::Pending => (pb::JobState::Pending, Vec::new(), String::new()),
        Phase::Running => (pb::JobState::Running, Vec::new(), String::new()),
        Phase::Completed(bytes) => (pb::JobState::Completed, bytes.to_vec(), String::new()),
        Phase::Failed(e) => (pb::JobState::Failed, Vec::new(), e.clone()),
        Phase::Cancelled(why) => (pb::JobState::Cancelled, Vec::new(), why.clone()),
        Phase::Expired(why) => (pb::JobState::Expired, Vec::new(), why.clone()),
    };
    pb::AwaitResponse {
        job_id: v.id.clone(),
        state: state.into(),
        proof,
        error,
        kind: v.kind.to_string(),
        partitions: u32::try_from(v.partitions).unwrap_or(u32::MAX),
        queue_wait_ms: v.queue_wait.as_millis() as u64,
        run_ms: v.run.as_millis() as u64,
    }
}

fn state_of(phase: &Phase) -> pb::JobState {
    match phase {
        Phase::Pending => pb::JobState::Pending,
        Phase::Running => pb::JobState::Running,
        Phase::Completed(_) => pb::JobState::Completed,
        Phase::Failed(_) => pb::JobState::Failed,
        Phase::Cancelled(_) => pb::JobState::Cancelled,
        Phase::Expired(_) => pb::JobState::Expired,
    }
}

#[tonic::async_trait]
impl pb::prover_server::Prover for ProverService {
    async fn submit(
        &self,
        request: GrpcRequest<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        self.submit_off_runtime(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn r#await(
        &self,
        request: GrpcRequest<pb::AwaitRequest>,
    ) -> Result<Response<pb::AwaitResponse>, Status> {
        let r = request.into_inner();
        let timeout = (r.timeout_ms > 0).then(|| Duration::from_millis(r.timeout_ms));
        self.await_job(&r.job_id, timeout).await.map(Response::new)
    }

    async fn prove(
        &self,
        request: GrpcRequest<pb::SubmitRequest>,
    ) -> Result<Response<pb::AwaitResponse>, Status> {
        let submitted = self.submit_off_runtime(request.into_inner()).await?;
        self.await_job(&submitted.job_id, None)
            .await
            .map(Response::new)
    }

    async fn cancel(
        &self,
        request: GrpcRequest<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        let phase = self.daemon.cancel(&request.into_inner().job_id)?;
        Ok(Response::new(pb::CancelResponse {
            state: state_of(&phase).into(),
        }))
    }

    async fn get_status(
        &self,
        _: GrpcRequest<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        Ok(Response::new(status_response(&self.daemon.status())))
    }

    async fn preload_key(
        &self,
        request: GrpcRequest<pb::PreloadKeyRequest>,
    ) -> Result<Response<pb::PreloadKeyResponse>, Status> {
        let r = request.into_inner();
        let name = key_name(r.kind, r.sector_size)?;
        let daemon = Arc::clone(&self.daemon);
        // Reading a 32 GiB PoRep key takes seconds: off the runtime's threads.
        let key = tokio::task::spawn_blocking(move || daemon.preload(name))
            .await
            .map_err(|e| Status::internal(format!("the preload stopped: {e}")))?
            .map_err(key_status)?;
        let held = self.daemon.status().keys;
        let status = held
            .iter()
            .find(|k| k.path == key.path)
            .map(key_to_pb)
            .ok_or_else(|| Status::internal("the preloaded key is not held"))?;
        Ok(Response::new(pb::PreloadKeyResponse {
            key: Some(status),
            read_ms: key.read_ms,
            generated_ms: key.generated_ms,
        }))
    }

    async fn evict_key(
        &self,
        request: GrpcRequest<pb::EvictKeyRequest>,
    ) -> Result<Response<pb::EvictKeyResponse>, Status> {
        let r = request.into_inner();
        let name = key_name(r.kind, r.sector_size)?;
        let evicted = self.daemon.evict(name).map_err(key_status)?;
        Ok(Response::new(pb::EvictKeyResponse {
            evicted: evicted.is_some(),
            host_bytes: evicted.map_or(0, |e| e.host_bytes as u64),
            device_bytes: evicted.map_or(0, |e| e.device_bytes as u64),
        }))
    }

    async fn get_metrics(
        &self,
        _: GrpcRequest<pb::MetricsRequest>,
    ) -> Result<Response<pb::MetricsResponse>, Status> {
        Ok(Response::new(pb::MetricsResponse {
            text: self.daemon.metrics(),
        }))
    }
}

fn state_named(name: &str) -> pb::JobState {
    match name {
        "pending" => pb::JobState::Pending,
        "running" => pb::JobState::Running,
        _ => pb::JobState::Unspecified,
    }
}

/// The daemon's status as the RPC answers it.
fn status_response(s: &crate::daemon::Status) -> pb::StatusResponse {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let totals = s.pending.iter().map(|&(p, n)| pb::QueueStatus {
        priority: to_pb_priority(p).into(),
        pending: count(n),
        kind: String::new(),
    });
    let by_kind = s.queues.iter().map(|q| pb::QueueStatus {
        priority: to_pb_priority(q.priority).into(),
        pending: count(q.jobs),
        kind: q.kind.to_string(),
    });
    pb::StatusResponse {
        uptime_s: s.uptime_s as u64,
        backend: s.engine.backend.clone(),
        workers: count(s.workers),
        queues: totals.chain(by_kind).collect(),
        running: count(s.running),
        completed: s.counts.completed,
        failed: s.counts.failed,
        cancelled: s.counts.cancelled,
        draining: s.draining,
        expired: s.counts.expired,
        jobs: s
            .jobs
            .iter()
            .map(|j| pb::JobSummary {
                job_id: j.id.clone(),
                kind: j.kind.to_string(),
                priority: to_pb_priority(j.priority).into(),
                state: state_named(j.state).into(),
                age_ms: j.age_ms,
            })
            .collect(),
        vram_budget_in_use: s.engine.vram_budget_in_use as u64,
        vram_kept: s.engine.vram_kept as u64,
        vram_high_water: s.engine.vram_high_water as u64,
        pinned_in_use: s.engine.pinned_in_use as u64,
        pinned_high_water: s.engine.pinned_high_water as u64,
        key_pinned_bytes: s.engine.key_pinned_bytes,
        resident_uploads: s.engine.resident_uploads,
        resident_evictions: s.engine.resident_evictions,
        quarantined_devices: count(s.engine.quarantined_devices),
        keys: s.keys.iter().map(key_to_pb).collect(),
        synthesis_memory_in_use: s.synthesis_memory.in_use as u64,
        synthesis_memory_budget: s.synthesis_memory.budget.unwrap_or(0) as u64,
        circuits: s
            .circuits
            .iter()
            .map(|c| pb::CircuitStatus {
                name: c.name.clone(),
                inputs: c.inputs as u64,
                aux: c.aux as u64,
                constraints: c.constraints as u64,
                params: c.params.display().to_string(),
                recording: c.recording.display().to_string(),
            })
            .collect(),
    }
}

fn key_to_pb(k: &zkpipe_filecoin::ResidentKey) -> pb::KeyStatus {
    pb::KeyStatus {
        id: k.id.clone(),
        path: k.path.display().to_string(),
        bytes: k.bytes as u64,
        pinned: k.pinned,
        trust: k.trust.to_string(),
        references: u32::try_from(k.references).unwrap_or(u32::MAX),
        tier: k.tier.name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn witness(circuit: &str, inputs: &[u8], aux: &[u8]) -> pb::SubmitRequest {
        pb::SubmitRequest {
            request_id: "a".into(),
            priority: 0,
            deadline_ms: 0,
            proof: Some(pb::submit_request::Proof::CircuitWitness(
                pb::CircuitWitness {
                    circuit: circuit.into(),
                    inputs: inputs.to_vec().into(),
                    aux: aux.to_vec().into(),
                },
            )),
        }
    }

    #[test]
    fn a_request_digest_is_of_its_content_not_its_id() {
        let big = vec![7u8; 3 << 20];
        let one = witness("c", &[1; 32], &big);
        let renamed = pb::SubmitRequest {
            request_id: "b".into(),
            ..one.clone()
        };
        assert_eq!(content_digest(&one), content_digest(&renamed));
        let mut changed = big.clone();
        changed[2 << 20] = 8;
        let others = [
            witness("c", &[1; 32], &changed),
            pb::SubmitRequest {
                priority: 2,
                ..one.clone()
            },
            pb::SubmitRequest {
                deadline_ms: 1,
                ..one.clone()
            },
            // The same bytes split between the fields otherwise.
            witness("c", &[[1; 32], [7; 32]].concat(), &big[32..]),
            witness("c1", &[], &big),
        ];
        for other in &others {
            assert_ne!(content_digest(&one), content_digest(other));
        }
    }
}
