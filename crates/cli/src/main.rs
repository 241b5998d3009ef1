//! `zkpipe`: the command-line tool. `zkpipe info` shows the driver and devices; `zkpipe prove`
//! runs the main job.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Parser, Subcommand};

mod devices;
mod exit;
mod filecoin;
mod info;
mod prove;
mod serve;
mod serve_bench;
mod soak;

/// zkpipe: a GPU proving engine for Groth16 over BLS12-381.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines (on standard error) are written: text, or json (one object a line, for a
    /// log collector). RUST_LOG filters them (default: info).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// How a command prints its result on standard output (the `--json` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Lines for a person.
    Text,
    /// One JSON document, for a program.
    Json,
}

impl Output {
    /// JSON when the command's `--json` flag is set.
    pub(crate) fn json_if(flag: bool) -> Self {
        match flag {
            true => Output::Json,
            false => Output::Text,
        }
    }
}

/// Set with `--log-format json`: progress lines go out as log records, and no progress bar.
static JSON_LOGS: AtomicBool = AtomicBool::new(false);

/// True when log lines are JSON.
pub(crate) fn json_logs() -> bool {
    JSON_LOGS.load(Ordering::Relaxed)
}

/// A progress line on standard error: as it is, or as a JSON log record under
/// `--log-format json`.
pub(crate) fn say_line(line: &str) {
    if json_logs() {
        tracing::info!(target: "zkpipe", "{line}");
    } else {
        eprintln!("{line}");
    }
}

/// `eprintln!` for progress lines, in the log format asked for.
macro_rules! say {
    ($($t:tt)*) => {
        $crate::say_line(&format!($($t)*))
    };
}
pub(crate) use say;

/// Log lines to standard error, filtered by RUST_LOG, in the format asked for.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => {
            JSON_LOGS.store(true, Ordering::Relaxed);
            logs.json().init()
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the CUDA driver and each device with its memory (says so plainly when there is
    /// no GPU, and exits 0).
    Info {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Prove a generated circuit of 2^k constraints N times through the engine (GPU when
    /// there is one, else the CPU; `--cpu` forces it), verifying where the key is real.
    Prove(prove::Args),
    /// Run the engine under a service's load for a while (several submitting threads, keys of
    /// several sizes in turn, dropped handles), checking proofs against the CPU and memory
    /// for leaks; a failure, a wrong proof or a leak makes the exit status non-zero.
    Soak(soak::Args),
    /// Filecoin's proofs from their real inputs: PoRep C2 from a C1 output, WindowPoSt,
    /// WinningPoSt and SnapDeals from their vanilla proofs; `gen` makes such inputs. Exit
    /// status 2 for bad input or parameters.
    #[command(subcommand)]
    Filecoin(filecoin::Command),
    /// The proving daemon: Filecoin proofs requested over gRPC on a unix socket (and TCP with
    /// a bearer token), queued by priority; SIGTERM drains it.
    Serve(serve::ServeArgs),
    /// One call to a running daemon: prove, submit, await, cancel or status.
    Client(serve::ClientArgs),
}

/// `ZKPIPE_FORCE_PTX=1` makes every module load its PTX (the JIT path) rather than a cubin.
fn prefer_ptx_from_env() {
    if std::env::var("ZKPIPE_FORCE_PTX").is_ok_and(|v| v == "1") {
        zkpipe_cuda::Prefer::Ptx.set_for_process();
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    prefer_ptx_from_env();
    let result = match cli.command {
        Command::Info { json } => info::run(Output::json_if(json)).map_err(exit::Failure::Other),
        Command::Prove(a) => prove::run(&a),
        Command::Soak(a) => soak::run(&a),
        Command::Filecoin(c) => filecoin::run(&c),
        Command::Serve(a) => serve::serve(&a),
        Command::Client(a) => serve::client(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if json_logs() {
                tracing::error!(target: "zkpipe", exit_code = e.code(), "{e}");
            } else {
                eprintln!("error: {e}");
            }
            ExitCode::from(e.code())
        }
    }
}
