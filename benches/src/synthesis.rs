//! `zkpipe-bench synthesis`: a circuit's witness made in full (bellperson's way: every linear
//! combination built and evaluated) against the recorded path (the constraints recorded once;
//! per proof the witness alone, then a, b and c evaluated from the recording on the host's
//! cores), the two witnesses compared. For PoRep C2 the recorded path also makes the witness a
//! challenge at a time on all cores, as the prover does. CPU only.

use std::time::Instant;

use bellperson::Circuit;
use blstrs::Scalar;
use zkpipe_bellperson::circuits::{RandomR1cs, Sha256Blocks};
use zkpipe_bellperson::{
    record, synthesize, synthesize_recorded, synthesize_recorded_parts, CircuitId,
};
use zkpipe_field::Fr;
use zkpipe_filecoin::shaped::{porep_partition, ShapedPartition, UsePartition};
use zkpipe_r1cs::{Assignment, Evaluations};

use crate::stats::median;
use crate::{BenchResult, Report};

/// The circuits the bench can make.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Kind {
    /// bellperson's SHA-256 gadget over `size` blocks.
    Sha256,
    /// A random R1CS of `size` constraints.
    Random,
    /// Partition 0 of PoRep C2 for sectors of `size` bytes (34359738368 for 32 GiB), from
    /// made-up vanilla proofs of that size's shape.
    Porep,
}

/// Of each witness query's points (L, A, B), how many there are and how many have a nonzero
/// scalar: what a job with a streamed key moves with `--streamed-points nonzero` against all.
#[derive(Debug, Clone, Copy, Default)]
struct NonzeroPoints {
    points: [usize; 3],
    nonzero: [usize; 3],
}

impl NonzeroPoints {
    const QUERIES: [&'static str; 3] = ["L", "A", "B"];

    fn of(w: &zkpipe_pipeline::Witness) -> Self {
        use rayon::prelude::*;
        let aux = w.aux.as_fr();
        let zero = Fr::default();
        let inputs_nonzero = |d: Option<&zkpipe_msm::Density>| {
            w.input
                .iter()
                .enumerate()
                .filter(|&(i, v)| {
                    d.is_none_or(|d| d.is_selected(i)) && !bool::from(ff::Field::is_zero(v))
                })
                .count()
        };
        let count = |d: Option<&zkpipe_msm::Density>| {
            aux.par_iter()
                .enumerate()
                .filter(|&(i, _)| d.is_none_or(|d| d.is_selected(i)))
                .map(|(_, v)| (1usize, usize::from(*v != zero)))
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let (l, l_nz) = count(None);
        let (a, a_nz) = count(Some(&w.a_aux_density));
        let (b, b_nz) = count(Some(&w.b_aux_density));
        let b_inputs = w.b_input_density.selected();
        Self {
            points: [l, w.input.len() + a, b_inputs + b],
            nonzero: [
                l_nz,
                inputs_nonzero(None) + a_nz,
                inputs_nonzero(Some(&w.b_input_density)) + b_nz,
            ],
        }
    }

    fn words(&self) -> String {
        let each: Vec<String> = (0..3)
            .map(|q| {
                format!(
                    "{} {} of {} ({:.1}%)",
                    Self::QUERIES[q],
                    self.nonzero[q],
                    self.points[q],
                    100.0 * self.nonzero[q] as f64 / self.points[q].max(1) as f64
                )
            })
            .collect();
        each.join(", ")
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({ "points": self.points, "nonzero": self.nonzero })
    }
}

fn seconds<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let out = f();
    (t.elapsed().as_secs_f64() * 1e3, out)
}

/// Times each way `runs` times (medians), after one untimed run of each.
pub fn run(kind: Kind, size: usize, runs: usize) -> BenchResult<Report> {
    match kind {
        Kind::Sha256 => {
            let pre: Vec<u8> = (0..Sha256Blocks::preimage_len(size))
                .map(|i| i as u8)
                .collect();
            let circuit = Sha256Blocks {
                preimage: Some(pre),
                blocks: size,
            };
            compare(
                &format!("SHA-256, {size} blocks"),
                circuit,
                Vec::new(),
                runs,
            )
        }
        Kind::Random => {
            let circuit = RandomR1cs {
                constraints: size,
                inputs: 3,
                seed: 1,
            };
            compare(
                &format!("random R1CS, {size} constraints"),
                circuit,
                Vec::new(),
                runs,
            )
        }
        Kind::Porep => porep_partition(size as u64, 1, PoRep { size, runs })?,
    }
}

/// The comparison on a PoRep partition of made-up vanilla proofs.
struct PoRep {
    size: usize,
    runs: usize,
}

impl UsePartition for PoRep {
    type Output = BenchResult<Report>;

    fn partition<C: Circuit<Scalar> + Clone + Send>(self, p: ShapedPartition<C>) -> Self::Output {
        let name = format!(
            "PoRep C2 partition of {}-byte sectors ({} challenges, made-up vanilla proofs)",
            self.size,
            p.challenges.len()
        );
        compare(&name, p.circuit, p.challenges, self.runs)
    }
}

/// Times each way on `circuit`, and when `parts` are given (the circuit's challenges, each
/// with the prologue they share), the recorded witness made from them on all cores.
fn compare<C: Circuit<Scalar> + Clone + Send>(
    name: &str,
    circuit: C,
    parts: Vec<C>,
    runs: usize,
) -> BenchResult<Report> {
    let (record_ms, rec) = seconds(|| record(circuit.clone(), CircuitId(name.into())));
    let rec = std::sync::Arc::new(rec?);
    eprintln!("{name}: recorded in {record_ms:.0} ms");
    let mut full = Vec::new();
    let mut recorded = Vec::new();
    let mut evaluation = Vec::new();
    let mut parted = Vec::new();
    // The most resident memory making a witness by challenge added (its aux values included).
    let mut parted_peak = 0u64;
    let mut nonzero = NonzeroPoints::default();
    for i in 0..=runs {
        let (f_ms, want) = seconds(|| synthesize(circuit.clone()));
        let want = want?;
        if i == 0 {
            nonzero = NonzeroPoints::of(&want);
            eprintln!(
                "{name}: points of the witness queries with a nonzero scalar: {}",
                nonzero.words()
            );
        }
        let (r_ms, got) =
            seconds(|| synthesize_recorded(circuit.clone(), &rec, Default::default()));
        let got = got?;
        let both = got.clone().evaluated()?;
        if both.a.as_fr() != want.a.as_fr()
            || both.b.as_fr() != want.b.as_fr()
            || both.c.as_fr() != want.c.as_fr()
            || got.aux.as_fr() != want.aux.as_fr()
        {
            return Err(format!("{name}: the recorded witness differs from full synthesis").into());
        }
        // A 32 GiB partition's witnesses take tens of GB: only the recorded one is kept.
        drop((both, want));
        // The evaluation alone, again on the same witness.
        let n = rec.shape().constraints;
        let mut out = [
            vec![Fr::default(); n],
            vec![Fr::default(); n],
            vec![Fr::default(); n],
        ];
        let [a, b, c] = &mut out;
        let (e_ms, evaluated) = seconds(|| {
            rec.evaluate(
                Assignment {
                    inputs: &got.input,
                    aux: got.aux.as_fr(),
                },
                Evaluations { a, b, c },
            )
        });
        evaluated?;
        drop(out);
        let p_ms = match parts.is_empty() {
            true => None,
            false => {
                let (added, (p_ms, by_parts)) = crate::memory::peak_added(|| {
                    seconds(|| synthesize_recorded_parts(parts.clone(), &rec, Default::default()))
                })?;
                let by_parts = by_parts?;
                parted_peak = parted_peak.max(added);
                if by_parts.aux.as_fr() != got.aux.as_fr() || by_parts.input != got.input {
                    return Err(format!(
                        "{name}: the witness made a challenge at a time differs from the whole's"
                    )
                    .into());
                }
                Some(p_ms)
            }
        };
        let label = match i {
            0 => "warm-up".to_string(),
            i => format!("run {i} of {runs}"),
        };
        let parts_text = p_ms.map_or(String::new(), |ms| format!(", witness by parts {ms:.0} ms"));
        eprintln!(
            "{name}: {label}: full {f_ms:.0} ms, witness alone {r_ms:.0} ms{parts_text}, host evaluation {e_ms:.0} ms"
        );
        if i > 0 {
            full.push(f_ms);
            recorded.push(r_ms);
            evaluation.push(e_ms);
            parted.extend(p_ms);
        }
    }
    let (full_ms, witness_ms, eval_ms) = (median(full), median(recorded), median(evaluation));
    let parted_ms = (!parted.is_empty()).then(|| median(parted));
    let recorded_ms = parted_ms.unwrap_or(witness_ms) + eval_ms;
    let parted_text = parted_ms.map_or("-".to_string(), |ms| format!("{ms:.0}"));
    let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
    let peak_text = match parted_ms {
        Some(_) => format!(
            "; a witness made by challenge raised resident memory by at most {:.2} GiB (its {} aux values {:.2} GiB included), the recording besides",
            gib(parted_peak),
            rec.shape().aux,
            gib(32 * rec.shape().aux as u64),
        ),
        None => String::new(),
    };
    let shape = rec.shape();
    let nnz: usize = rec.matrices().iter().map(|m| m.nonzeros()).sum();
    let table = format!(
        "\nSynthesis of {name}: {} constraints, {} aux, {nnz} nonzeros, {} distinct coefficients; recorded once in {record_ms:.0} ms ({:.1} MiB); points of the witness queries with a nonzero scalar: {}; median of {runs} on {} threads, witnesses equal (the recorded path: the witness alone, then a, b, c evaluated on the host; the engine evaluates them on the device instead){peak_text}:\n| full ms | witness alone ms | witness by parts, all cores ms | host evaluation ms | full / (fastest witness + evaluation) | full / fastest witness |\n| --- | --- | --- | --- | --- | --- |\n| {full_ms:.0} | {witness_ms:.0} | {parted_text} | {eval_ms:.0} | {:.2}x | {:.2}x |\n",
        shape.constraints,
        shape.aux,
        rec.table().len(),
        rec.bytes() as f64 / (1u64 << 20) as f64,
        nonzero.words(),
        rayon::current_num_threads(),
        full_ms / recorded_ms,
        full_ms / parted_ms.unwrap_or(witness_ms),
    );
    Ok(Report {
        table,
        json: serde_json::json!({
            "circuit": name, "constraints": shape.constraints, "aux": shape.aux, "nonzeros": nnz,
            "record_ms": record_ms, "full_ms": full_ms, "witness_ms": witness_ms, "recorded_ms": recorded_ms,
            "evaluation_ms": eval_ms, "recording_bytes": rec.bytes(), "witness_by_parts_ms": parted_ms,
            "witness_by_parts_peak_added_bytes": parted_ms.map(|_| parted_peak),
            "nonzero_points": nonzero.json(),
        }),
    })
}
