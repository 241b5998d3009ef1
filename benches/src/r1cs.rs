//! `zkpipe-bench r1cs`: the recorded path's evaluation of a, b and c, on the device (the
//! recording and the witness resident) and on the host's cores, for a synthetic recording of
//! a given shape. The default is a 32 GiB PoRep partition's: 130.3M constraints, 328 inputs,
//! 130.2M aux variables, A 309M, B 130M and C 283M nonzeros, coefficients 1 or -1 but for one
//! entry in 64 with a small one. Columns are drawn at random over all variables: a real
//! circuit's rows reach variables allocated near them, so this is the access pattern's worst
//! case.

use std::path::Path;

use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use zkpipe_cuda::{Context, DeviceBuffer, StageClock, Stream, Timing};
use zkpipe_field::{cast, Fr};
use zkpipe_r1cs::{
    Assignment, CircuitId, CudaEvaluator, DeviceRecording, DeviceZ, Evaluations, Matrix, Recording,
    Shape,
};

use crate::stats::median;
use crate::{BenchResult, Report};

/// The recording's shape and density.
#[derive(Debug, Clone, Copy)]
pub struct Synthetic {
    pub shape: Shape,
    /// Nonzeros of A, B and C.
    pub nonzeros: [usize; 3],
}

/// Distinct small coefficients besides 1 and -1.
const SMALL: u32 = 62;

/// Entries a generating task makes.
const ENTRIES_PER_TASK: usize = 1 << 16;

/// A matrix of `shape.constraints` rows holding `nnz` entries, spread as evenly as integers
/// allow, with random columns and coefficient indices.
fn matrix(shape: Shape, nnz: usize, seed: u64) -> Matrix {
    let rows = shape.constraints;
    let vars = shape.variables() as u32;
    // Row i ends at floor((i + 1) · nnz / rows).
    let starts: Vec<u32> = (0..=rows)
        .into_par_iter()
        .map(|i| ((i as u128 * nnz as u128) / rows.max(1) as u128) as u32)
        .collect();
    let mut columns = vec![0u32; nnz];
    let mut coefficients = vec![0u32; nnz];
    columns
        .par_chunks_mut(ENTRIES_PER_TASK)
        .zip(coefficients.par_chunks_mut(ENTRIES_PER_TASK))
        .enumerate()
        .for_each(|(task, (cols, ks))| {
            let mut r = ChaCha8Rng::seed_from_u64(seed ^ (task as u64).wrapping_mul(0x9e37));
            for (c, k) in cols.iter_mut().zip(ks.iter_mut()) {
                *c = r.gen_range(0..vars);
                *k = match r.gen_range(0..64u32) {
                    0 => 2 + r.gen_range(0..SMALL),
                    x => x & 1,
                };
            }
        });
    Matrix::from_arrays(starts, columns, coefficients)
}

fn recording(s: Synthetic) -> BenchResult<Recording> {
    let mut table = vec![Scalar::ONE, -Scalar::ONE];
    table.extend((2..2 + SMALL as u64).map(Scalar::from));
    let [a, b, c] = s.nonzeros;
    let matrices = [
        matrix(s.shape, a, 1),
        matrix(s.shape, b, 2),
        matrix(s.shape, c, 3),
    ];
    Ok(Recording::from_parts(
        CircuitId("synthetic".into()),
        s.shape,
        table,
        matrices,
    )?)
}

/// Rows of more than this many entries count as long: one thread a row makes its warp wait
/// for them.
const LONG_ROW: usize = 16;

/// How a matrix's entries fall into rows: what the kernel's balance depends on.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct RowProfile {
    /// Rows of more than [`LONG_ROW`] entries.
    long_rows: usize,
    /// The entries those rows hold.
    long_entries: usize,
    longest: usize,
}

impl RowProfile {
    fn of(m: &Matrix) -> Self {
        let lengths = m
            .parts()
            .starts
            .par_windows(2)
            .map(|w| (w[1] - w[0]) as usize);
        let long = lengths.clone().filter(|&l| l > LONG_ROW);
        Self {
            long_rows: long.clone().count(),
            long_entries: long.sum(),
            longest: lengths.max().unwrap_or(0),
        }
    }

    fn text(&self, nonzeros: usize) -> String {
        format!(
            "{} ({:.0}% of entries, longest {})",
            self.long_rows,
            100.0 * self.long_entries as f64 / nonzeros.max(1) as f64,
            self.longest
        )
    }
}

/// Where the benchmark's recording comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// Made up, of a given shape, columns at random.
    Synthetic(Synthetic),
    /// Filecoin's PoRep C2 circuit for sectors of `sector_size` bytes, recorded from its
    /// blank form.
    PoRep { sector_size: u64 },
}

impl Source {
    /// The recording, and what it is in words.
    fn make(self) -> BenchResult<(Recording, String)> {
        match self {
            Source::Synthetic(s) => Ok((recording(s)?, "synthetic recording".into())),
            Source::PoRep { sector_size } => {
                let rec = zkpipe_filecoin::record_porep_blank(sector_size)?;
                let name = format!(
                    "PoRep C2 circuit of {sector_size}-byte sectors ({})",
                    rec.id()
                );
                Ok((rec, name))
            }
        }
    }

    /// Checks that `rec`, read from a file, is the one [`Source::make`] would make.
    fn check(self, rec: &Recording) -> BenchResult<()> {
        match self {
            Source::Synthetic(s) => {
                rec.check_id(&CircuitId("synthetic".into()))?;
                let nonzeros = rec.matrices().map(|m| m.nonzeros());
                if rec.shape() != s.shape || nonzeros != s.nonzeros {
                    return Err(format!(
                        "the saved synthetic recording is of shape {:?} with nonzeros {nonzeros:?}, not the {:?} with {:?} asked for",
                        rec.shape(),
                        s.shape,
                        s.nonzeros
                    )
                    .into());
                }
            }
            Source::PoRep { sector_size } => {
                rec.check_id(&zkpipe_filecoin::porep_blank_id(sector_size)?)?
            }
        }
        Ok(())
    }

    /// The recording, from `file` when it holds this source's (checked), else made (and
    /// saved to `file` when one is named); with what it is and how it was had, in words.
    fn recording(self, file: Option<&Path>) -> BenchResult<(Recording, String, String)> {
        let t = std::time::Instant::now();
        if let Some(path) = file.filter(|p| p.exists()) {
            let rec = zkpipe_r1cs::file::read(path)?;
            self.check(&rec)?;
            let name = format!("recording {} from {}", rec.id(), path.display());
            let how = format!("read in {:.1} s", t.elapsed().as_secs_f64());
            return Ok((rec, name, how));
        }
        let (rec, name) = self.make()?;
        let mut how = format!("made in {:.1} s", t.elapsed().as_secs_f64());
        if let Some(path) = file {
            let t = std::time::Instant::now();
            zkpipe_r1cs::file::save(&rec, path)?;
            how += &format!(
                ", saved to {} in {:.1} s",
                path.display(),
                t.elapsed().as_secs_f64()
            );
        }
        Ok((rec, name, how))
    }
}

/// Times the device evaluation `runs` times after a warm-up (CUDA events, per matrix and in
/// all), and the host's once after a warm-up when `cpu` is set.
pub fn run(
    ctx: &std::sync::Arc<Context>,
    source: Source,
    runs: usize,
    cpu: bool,
    file: Option<&Path>,
) -> BenchResult<Report> {
    let (rec, name, how) = source.recording(file)?;
    let shape = rec.shape();
    let mut r = ChaCha8Rng::seed_from_u64(9);
    let inputs: Vec<Scalar> = (0..shape.inputs).map(|_| Scalar::random(&mut r)).collect();
    let aux: Vec<Fr> = (0..shape.aux)
        .into_par_iter()
        .map(|i| Fr::from(Scalar::from(i as u64 * 0x9e37_79b9 + 1).square()))
        .collect();

    let stream = Stream::new(ctx)?;
    let gpu = CudaEvaluator::new(ctx)?;
    let t = std::time::Instant::now();
    let dev = DeviceRecording::upload(ctx, &rec)?;
    let upload_s = t.elapsed().as_secs_f64();
    let d_inputs = DeviceBuffer::from_host(ctx, cast::scalars_as_fr(&inputs))?;
    let d_aux = DeviceBuffer::from_host(ctx, &aux)?;
    let z = DeviceZ::Parts {
        inputs: &d_inputs,
        aux: &d_aux,
    };
    let n = shape.constraints;
    let mut out: Vec<DeviceBuffer<Fr>> = (0..3)
        .map(|_| DeviceBuffer::alloc(ctx, n))
        .collect::<Result<_, _>>()?;
    let mut per_matrix = [Vec::new(), Vec::new(), Vec::new()];
    let mut totals = Vec::new();
    for i in 0..=runs {
        let mut clock = StageClock::start(ctx, &stream, Timing::Enabled)?;
        for (m, (part, o)) in [
            zkpipe_r1cs::Part::A,
            zkpipe_r1cs::Part::B,
            zkpipe_r1cs::Part::C,
        ]
        .into_iter()
        .zip(out.iter_mut())
        .enumerate()
        {
            gpu.evaluate_part(&stream, &dev, part, z, o)?;
            clock.mark(m, &stream)?;
        }
        clock.synchronize()?;
        if i > 0 {
            for sp in clock.spans()? {
                per_matrix[sp.stage].push(sp.ms);
            }
            totals.push(clock.span_ms(&[])?);
        }
    }
    let [a_ms, b_ms, c_ms] = per_matrix.map(median);
    let device_ms = median(totals);

    // The device's a, b and c against the host's, and the host's time.
    let mut host = [
        vec![Fr::default(); n],
        vec![Fr::default(); n],
        vec![Fr::default(); n],
    ];
    let cpu_ms = {
        let mut time = || -> BenchResult<f64> {
            let [a, b, c] = &mut host;
            let t = std::time::Instant::now();
            rec.evaluate(
                Assignment {
                    inputs: &inputs,
                    aux: &aux,
                },
                Evaluations { a, b, c },
            )?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        };
        time()?;
        if cpu {
            Some(time()?)
        } else {
            None
        }
    };
    for (m, (d, h)) in out.iter().zip(&host).enumerate() {
        if d.to_vec()? != *h {
            return Err(format!("matrix {m}: the device's values differ from the host's").into());
        }
    }
    let bytes = rec.bytes();
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let gbps = bytes as f64 / (device_ms * 1e6);
    let [na, nb, nc] = rec.matrices().map(|m| m.nonzeros());
    let cpu_text = cpu_ms.map_or("-".to_string(), |ms| format!("{ms:.0}"));
    let profiles = rec.matrices().map(RowProfile::of);
    let [pa, pb, pc] = &profiles;
    let table = format!(
        "\nRecorded evaluation, {name}: {n} constraints, {} inputs, {} aux, nonzeros A {na} B {nb} C {nc}, rows of more than {LONG_ROW} entries A {} B {} C {} ({how}, uploaded in {upload_s:.1} s); device median of {runs} after a warm-up, equal to the host's:\n| recording GiB | A ms | B ms | C ms | device ms | matrix GB/s | host ms ({} threads) |\n| --- | --- | --- | --- | --- | --- | --- |\n| {gib:.2} | {a_ms:.1} | {b_ms:.1} | {c_ms:.1} | {device_ms:.1} | {gbps:.0} | {cpu_text} |\n",
        shape.inputs,
        shape.aux,
        pa.text(na),
        pb.text(nb),
        pc.text(nc),
        rayon::current_num_threads(),
    );
    Ok(Report {
        table,
        json: serde_json::json!({
            "recording": name, "constraints": n, "inputs": shape.inputs, "aux": shape.aux,
            "nonzeros": [na, nb, nc], "table": rec.table().len(),
            "recording_bytes": bytes, "a_ms": a_ms, "b_ms": b_ms, "c_ms": c_ms,
            "device_ms": device_ms, "host_ms": cpu_ms, "recording_source": how, "upload_s": upload_s,
            "row_profiles": profiles,
        }),
    })
}
