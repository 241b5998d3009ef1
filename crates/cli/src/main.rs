//! `zkpipe`: the command-line tool. `zkpipe info` shows the driver and devices; `zkpipe prove`
//! runs the main job.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod exit;
mod info;
mod prove;
mod soak;

/// zkpipe: a GPU proving engine for Groth16 over BLS12-381.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { json } => info::run(json).map_err(exit::Failure::Other),
        Command::Prove(a) => prove::run(&a),
        Command::Soak(a) => soak::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code())
        }
    }
}
