//! `zkpipe-bench`: GPU benchmarks. Each prints a table and, with `--json`, JSON.
//!
//! - `pcie`: host-to-device and device-to-host GB/s for pageable, pinned (pool) and registered
//!   memory, and an overlap check of a copy against a kernel on another stream.
//! - `load`: how long loading each kernel module takes (cubin, and PTX with `--ptx`).
//! - `msm`: zkpipe's MSM against ec-gpu-gen's multiexp and blst.
//! - `ntt`: zkpipe's NTT against ec-gpu-gen's kernel and the CPU, and the H step.
//! - `r1cs`: the recorded path's evaluation of a, b and c on the device and the host.
//! - `synthesis`: a circuit's witness in full against the recorded path (CPU only).
//! - `params`: reading a parameter file, zkpipe's reader against bellperson's (CPU only).

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod gather;
mod load;
mod memory;
mod msm;
mod ntt;
mod params;
mod pcie;
mod r1cs;
mod stats;
mod synthesis;

#[derive(Debug, Parser)]
#[command(about = "zkpipe GPU benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print JSON instead of the table.
    #[arg(long, global = true)]
    json: bool,
    /// Also write the JSON to this file.
    #[arg(long, global = true)]
    json_out: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The check of a proof before the engine returns it, by number of public inputs, against a
    /// partition's proving time.
    Check {
        /// Public inputs (a 32 GiB PoRep partition has 328).
        #[arg(long, value_delimiter = ',', default_values_t = vec![1, 40, 328])]
        inputs: Vec<usize>,
        /// Timed runs per figure (the median is reported).
        #[arg(long, default_value_t = 21)]
        runs: usize,
        /// The partition's proving time the check is compared with (ms).
        #[arg(long, default_value_t = 1260.0)]
        partition_ms: f64,
    },
    /// The host's gather of the key points whose scalar is not zero (`--streamed-points
    /// nonzero`), by size, against the link it feeds.
    Gather {
        /// log2 of the numbers of points.
        #[arg(long, value_delimiter = ',', default_values_t = vec![20, 22, 24])]
        sizes: Vec<u32>,
        /// Timed runs per figure (the median is reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// PCIe bandwidth by memory kind and size, and copy/kernel overlap.
    Pcie {
        /// Sizes in MiB.
        #[arg(long, value_delimiter = ',', default_values_t = vec![64, 256, 1024, 4096])]
        sizes_mib: Vec<usize>,
        /// Timed runs per figure (the median is reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// NTT: zkpipe's GPU transform, ec-gpu-gen's and the CPU's, then the H step.
    Ntt {
        /// log2 of the sizes.
        #[arg(long, value_delimiter = ',', default_values_t = vec![16, 20, 24, 26, 27])]
        sizes: Vec<u32>,
        /// Timed runs per figure (the median is reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Largest size the CPU implementation runs at.
        #[arg(long, default_value_t = 24)]
        cpu_max: u32,
        /// log2 of the H step's size (0: skip it).
        #[arg(long, default_value_t = 27)]
        h: u32,
        /// Column blocks of the H step's transposed layout (0: one plain copy); any number
        /// gives the same h. Default: the engine's (`zkpipe_ntt::H_COLUMNS`).
        #[arg(long, default_value_t = zkpipe_ntt::H_COLUMNS)]
        h_columns: usize,
    },
    /// MSM: zkpipe's GPU Pippenger, ec-gpu-gen's multiexp (G1) and blst on the CPU.
    Msm {
        /// g1 or g2.
        #[arg(long, default_value = "g1")]
        curve: String,
        /// log2 of the sizes.
        #[arg(long, value_delimiter = ',', default_values_t = vec![20, 22, 24, 26])]
        sizes: Vec<u32>,
        /// random, boolean (0/1, half set), or mixed (Filecoin-like: 0/1 but for one in 16
        /// random, which makes a few buckets hold most points).
        #[arg(long, default_value = "random")]
        scalars: String,
        /// Timed runs per figure (the median is reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Largest size blst runs at.
        #[arg(long, default_value_t = 22)]
        cpu_max: u32,
        /// ec-gpu-gen window sizes to try (the best is reported); 0 skips ec-gpu-gen.
        #[arg(long, value_delimiter = ',', default_values_t = vec![8, 10, 12])]
        ec_windows: Vec<u32>,
        /// resident (bases uploaded once, scalars on the device) or streamed (both in pinned
        /// host memory, streamed in chunks, uploads timed; the resident figure is shown beside).
        #[arg(long, default_value = "resident")]
        mode: String,
        /// log2 of the streamed chunk in points.
        #[arg(long, default_value_t = 22)]
        chunk: u32,
        /// Also time zkpipe's resident MSM with each of these window widths (bits) instead
        /// of its own choice, side by side.
        #[arg(long, value_delimiter = ',')]
        window_bits: Vec<u32>,
        /// With each --window-bits width, also bases carrying this many copies of
        /// precomputed multiples (2^(c·j)·P; 1 is none): speed against device memory.
        #[arg(long, value_delimiter = ',')]
        copies: Vec<u32>,
        /// The resident MSM (the zkpipe column) keeps its workspace on the device between
        /// calls (`CudaMsm::keeping_workspace`) instead of allocating and freeing it in each.
        #[arg(long)]
        keep_workspace: bool,
        /// G2's bucket sums with this batch: 1 for the XYZZ kernel, or 16, 32 or 64 points
        /// added side by side (batch affine). Default: the largest whose local memory fits.
        #[arg(long)]
        g2_batch: Option<u32>,
        /// How G2's batch-affine bucket sums split tasks into runs, as PARTSxPER_THREAD (such
        /// as 16x3). Default: from the task counts.
        #[arg(long, value_parser = parse_task_split)]
        g2_split: Option<zkpipe_msm::TaskSplit>,
    },
    /// Reading bellperson's parameter file for 2^k constraints (written first if missing):
    /// zkpipe's reader against bellperson's `Parameters::read`, checked and unchecked, each
    /// read in a process of its own: seconds, GB/s and peak resident memory.
    Params {
        /// log2 of the constraints of the generated key.
        #[arg(long, default_value_t = 20)]
        k: u32,
        /// The parameter file (written here when it does not exist).
        #[arg(long)]
        file: std::path::PathBuf,
        /// Reads per reader (the median is reported; the peak memory is the largest).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Readers to time: zkpipe, zkpipe-unchecked, bellperson, bellperson-unchecked.
        #[arg(long, value_delimiter = ',', default_values_t = params::READERS.map(String::from))]
        readers: Vec<String>,
    },
    /// One read of a parameter file in this process (what `params` runs in its children).
    #[command(hide = true)]
    ParamsRead {
        /// zkpipe, zkpipe-unchecked, bellperson or bellperson-unchecked.
        #[arg(long)]
        reader: String,
        #[arg(long)]
        file: std::path::PathBuf,
    },
    /// The recorded path: a, b and c evaluated from a synthetic recording of a 32 GiB PoRep
    /// partition's shape (by default) on the device, checked against the host's evaluation.
    R1cs {
        /// Constraints (rows of each matrix).
        #[arg(long, default_value_t = 130_278_869)]
        constraints: usize,
        /// Public inputs, the constant one included.
        #[arg(long, default_value_t = 328)]
        inputs: usize,
        /// Aux variables.
        #[arg(long, default_value_t = 130_188_302)]
        aux: usize,
        /// Nonzeros of A, B and C.
        #[arg(long, value_delimiter = ',', default_values_t = vec![309_000_000, 130_000_000, 283_000_000])]
        nonzeros: Vec<usize>,
        /// Timed device runs (the median is reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Also time the host's evaluation (it always runs once, to check the device's).
        #[arg(long)]
        cpu: bool,
        /// Record Filecoin's PoRep C2 circuit for sectors of this many bytes (34359738368 for
        /// 32 GiB) from its blank form instead of making a synthetic recording: the real
        /// matrices, recorded here (the time and size are reported), evaluated at a made-up
        /// witness of their shape.
        #[arg(long, conflicts_with_all = ["constraints", "inputs", "aux", "nonzeros"])]
        porep_sector_size: Option<u64>,
        /// Read the recording from this file when it holds the one the other flags ask for
        /// (checked: another circuit or shape is an error); otherwise make it and save it
        /// there, for the next run.
        #[arg(long)]
        recording_file: Option<std::path::PathBuf>,
    },
    /// A circuit's witness made in full (bellperson's way) against the recorded path (the
    /// witness alone, then a, b and c evaluated from a recording), on the host's cores.
    Synthesis {
        /// sha256 (size: blocks), random (size: constraints) or porep (size: sector bytes).
        #[arg(long, value_enum, default_value_t = synthesis::Kind::Sha256)]
        circuit: synthesis::Kind,
        /// Blocks, constraints or sector bytes.
        #[arg(long, default_value_t = 16)]
        size: usize,
        /// Timed runs of each way (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Module load times.
    Load {
        /// Also load each module from its PTX (the driver's JIT; slow on a fresh machine).
        #[arg(long)]
        ptx: bool,
    },
}

/// `r1cs`: the shape from the flags, on device 0.
fn porep_r1cs_bench(
    sector_size: u64,
    runs: usize,
    cpu: bool,
    file: Option<&std::path::Path>,
) -> BenchResult<Report> {
    let ctx = zkpipe_cuda::Context::new(0)?;
    r1cs::run(&ctx, r1cs::Source::PoRep { sector_size }, runs, cpu, file)
}

/// The synthetic recording's shape and the runs, from `r1cs`'s flags.
struct SyntheticR1cs<'a> {
    constraints: usize,
    inputs: usize,
    aux: usize,
    nonzeros: &'a [usize],
    runs: usize,
    cpu: bool,
    file: Option<&'a std::path::Path>,
}

fn r1cs_bench(
    SyntheticR1cs {
        constraints,
        inputs,
        aux,
        nonzeros,
        runs,
        cpu,
        file,
    }: SyntheticR1cs<'_>,
) -> BenchResult<Report> {
    let [a, b, c] = nonzeros else {
        return Err(format!(
            "--nonzeros takes three numbers (A, B, C), not {}",
            nonzeros.len()
        )
        .into());
    };
    let ctx = zkpipe_cuda::Context::new(0)?;
    let synthetic = r1cs::Synthetic {
        shape: zkpipe_r1cs::Shape {
            inputs,
            aux,
            constraints,
        },
        nonzeros: [*a, *b, *c],
    };
    r1cs::run(&ctx, r1cs::Source::Synthetic(synthetic), runs, cpu, file)
}

/// `--g2-split PARTSxPER_THREAD`.
fn parse_task_split(s: &str) -> Result<zkpipe_msm::TaskSplit, String> {
    let expected = || format!("{s:?}: expected PARTSxPER_THREAD, such as 16x3");
    let (parts, per_thread) = s.split_once('x').ok_or_else(expected)?;
    Ok(zkpipe_msm::TaskSplit {
        parts: parts.parse().map_err(|_| expected())?,
        per_thread: per_thread.parse().map_err(|_| expected())?,
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    zkpipe_cuda::testing::prefer_from_env();
    let result = match cli.command {
        Command::Pcie { sizes_mib, runs } => pcie::run(&sizes_mib, runs),
        Command::Check {
            inputs,
            runs,
            partition_ms,
        } => check::run(&inputs, runs, partition_ms),
        Command::Load { ptx } => load::run(ptx),
        Command::Gather { sizes, runs } => gather::run(&sizes, runs),
        Command::Synthesis {
            circuit,
            size,
            runs,
        } => synthesis::run(circuit, size, runs),
        Command::R1cs {
            constraints,
            inputs,
            aux,
            nonzeros,
            runs,
            cpu,
            porep_sector_size,
            recording_file,
        } => match porep_sector_size {
            Some(size) => porep_r1cs_bench(size, runs, cpu, recording_file.as_deref()),
            None => r1cs_bench(SyntheticR1cs {
                constraints,
                inputs,
                aux,
                nonzeros: &nonzeros,
                runs,
                cpu,
                file: recording_file.as_deref(),
            }),
        },
        Command::Params {
            k,
            file,
            runs,
            readers,
        } => params::run(k, &file, runs, &readers),
        Command::ParamsRead { reader, file } => params::read_once(&reader, &file),
        Command::Msm {
            curve,
            sizes,
            scalars,
            runs,
            cpu_max,
            ec_windows,
            mode,
            chunk,
            window_bits,
            copies,
            keep_workspace,
            g2_batch,
            g2_split,
        } => {
            if !matches!(curve.as_str(), "g1" | "g2")
                || !matches!(scalars.as_str(), "random" | "boolean" | "mixed")
                || !matches!(mode.as_str(), "resident" | "streamed")
            {
                eprintln!("error: --curve takes g1 or g2, --scalars random, boolean or mixed, --mode resident or streamed");
                return ExitCode::FAILURE;
            }
            msm::run(&msm::Args {
                curve,
                sizes,
                runs,
                boolean: scalars == "boolean",
                mixed: scalars == "mixed",
                cpu_max,
                ec_windows,
                streamed_chunk: (mode == "streamed").then_some(1usize << chunk.min(31)),
                window_bits,
                copies,
                keep_workspace,
                tuning: zkpipe_msm::MsmTuning { g2_batch, g2_split },
            })
        }
        Command::Ntt {
            sizes,
            runs,
            cpu_max,
            h,
            h_columns,
        } => ntt::run(&sizes, runs, cpu_max, (h > 0).then_some(h), h_columns),
    };
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let json = serde_json::to_string_pretty(&report.json).unwrap_or_default();
    if let Some(path) = &cli.json_out {
        if let Err(e) = std::fs::write(path, &json) {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if cli.json {
        println!("{json}");
    } else {
        print!("{}", report.table);
    }
    ExitCode::SUCCESS
}

/// What a benchmark returns: a table for people, JSON for tools.
#[derive(Debug)]
pub struct Report {
    /// The table, ready to print.
    pub table: String,
    /// The same figures as JSON.
    pub json: serde_json::Value,
}

/// Errors of the benchmarks.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;
