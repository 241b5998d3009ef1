//! zkpipe-serve: the proving daemon behind `zkpipe serve`. Filecoin proofs (PoRep C2,
//! WindowPoSt, WinningPoSt, SnapDeals) are requested over gRPC ([`pb`], from
//! `proto/zkpipe/v1/prover.proto`, which documents every call and status), on a unix socket
//! and, with a bearer token, on TCP ([`server`]); they are queued by priority and proved by a
//! fixed number of workers on one engine ([`daemon`]).

pub mod circuits;
pub mod daemon;
pub mod exported;
mod http;
mod metrics;
pub mod requests;
pub mod server;
pub mod service;

/// The encoded descriptors of `proto/zkpipe/v1/prover.proto`, which server reflection serves.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/zkpipe_v1_descriptor.bin"));

/// The gRPC messages, service and client, generated from `proto/zkpipe/v1/prover.proto`.
#[allow(missing_debug_implementations, clippy::all)]
pub mod pb {
    tonic::include_proto!("zkpipe.v1");
}

pub use circuits::{CircuitConfig, CircuitError, Circuits};
pub use daemon::{Daemon, Limits, Priority, Work};
pub use exported::{ExportedError, ExportedWitness, WitnessValues};
pub use requests::{RequestThreads, RequestThreadsError};
pub use server::{
    connect_tcp, connect_unix, default_engine_config, read_config, read_token, serve, unix_channel,
    ClientTls, ConfigError, ServeConfig, ServeError,
};
pub use service::ProverService;
