//! The partitions of one proof as jobs of the engine: each partition's circuit synthesized into
//! lent witness memory and submitted while the next ones synthesize, each proof checked by the
//! engine before it comes back (and proved once more if the check refuses it), the proofs
//! joined in partition order into filecoin-proofs' bytes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::Circuit;
use blstrs::Scalar;
use crossbeam::channel;
use zkpipe_pipeline::{
    Backend, Config, Engine, JobHandle, JobReport, Proof, ProveError, ProvingKey, Randomness,
    Witness,
};

use zkpipe_bellperson::RecordedError;
use zkpipe_r1cs::Recording;

use crate::schedule::{Gates, Permit, Scheduling, Turn};
use crate::{catch, FilecoinError, LoadedKey, ParamsCache, Request};

/// How long a synthesizing thread waits for the engine to lend witness memory.
const LEND_WAIT: Duration = Duration::from_secs(3600);

/// How a [`Prover`] runs.
#[derive(Debug, Clone, Copy)]
pub struct ProveOptions {
    /// Partitions synthesized at once (each holds one lent witness: 32 bytes per point of the
    /// domain for each of a, b and c, and 32 per aux variable). Default 2.
    pub synthesis_threads: usize,
    /// The randomness of every partition's proof. Default: random.
    pub randomness: Randomness,
    /// Where a partition whose proof the engine's check refused is proved once more.
    pub retry: Retry,
    /// How each partition's witness is made.
    pub synthesis: Synthesis,
}

/// How a partition's witness is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synthesis {
    /// The circuit's constraints recorded once per parameter set (a file beside the
    /// parameters), then per partition the witness alone; the engine evaluates a, b and c
    /// from the recording (on the device, into the H step's vectors). The same witness as
    /// full synthesis. Default.
    #[default]
    Recorded,
    /// bellperson's way: every constraint's linear combinations built and evaluated again for
    /// each partition.
    Full,
}

/// Where a partition whose proof failed the engine's check is proved again (once; a second
/// refusal is the partition's error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retry {
    /// The same engine: the next free worker, on another device where the engine has several.
    /// Default.
    #[default]
    Engine,
    /// An engine of the CPU's own, started for the retry (minutes for a 2^27 partition, but no
    /// device in it).
    Cpu,
}

impl Default for ProveOptions {
    fn default() -> Self {
        Self {
            synthesis_threads: 2,
            randomness: Randomness::Random,
            retry: Retry::Engine,
            synthesis: Synthesis::Recorded,
        }
    }
}

/// What one partition took.
#[derive(Debug, Clone)]
pub struct PartitionReport {
    /// Its index.
    pub partition: usize,
    /// Its circuit's constraints (with bellperson's one per public input).
    pub constraints: usize,
    /// Milliseconds building and synthesizing its circuit.
    pub synthesis_ms: f64,
    /// The engine's report of its job (device milliseconds, plan, check).
    pub job: JobReport,
    /// Milliseconds from the start of its synthesis to its checked proof.
    pub wall_ms: f64,
    /// Whether its first proof was refused by the check and it was proved again.
    pub retried: bool,
}

/// A proof: filecoin-proofs' bytes and what each partition took.
#[derive(Debug, Clone)]
pub struct ProofOutput {
    /// The partition proofs, 192 bytes each, in partition order (as filecoin-proofs writes
    /// them).
    pub bytes: Vec<u8>,
    /// The partition proofs.
    pub proofs: Vec<Proof>,
    /// Each partition's figures.
    pub partitions: Vec<PartitionReport>,
    /// Milliseconds for the whole proof (after its key was loaded).
    pub wall_ms: f64,
    /// The key's file and how it was read.
    pub key: LoadedKey,
}

/// bellperson's proof of a request (the reference zkpipe's proofs are compared with).
#[derive(Debug, Clone, Default)]
pub struct ReferenceOutput {
    /// The partition proofs, 192 bytes each, in partition order.
    pub bytes: Vec<u8>,
    /// Milliseconds of each partition (circuit, synthesis and proof).
    pub partition_ms: Vec<f64>,
}

/// One partition's witness, with the files of its circuit: what a caller of the daemon's
/// generic kind sends (`zkpipe filecoin … --export-witness`), so that the same circuit can be
/// proved from a witness made elsewhere. Its `Debug` gives the counts, never a value.
pub struct PartitionWitness {
    pub partition: usize,
    /// The circuit's parameter file.
    pub params: PathBuf,
    /// The circuit's recording (zkpipe-r1cs), beside the parameter file.
    pub recording: PathBuf,
    /// The public inputs, the constant one left out.
    pub inputs: Vec<Scalar>,
    pub aux: Vec<Scalar>,
}

impl std::fmt::Debug for PartitionWitness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionWitness")
            .field("partition", &self.partition)
            .field("params", &self.params)
            .field("recording", &self.recording)
            .field("inputs", &self.inputs.len())
            .field("aux", &self.aux.len())
            .finish()
    }
}

/// One partition's circuit and the public inputs filecoin-proofs' verifier will use for it
/// (none where the verifier's are not derivable from the request alone).
pub(crate) struct PartitionCircuit<C> {
    pub circuit: C,
    pub expected_inputs: Option<Vec<Scalar>>,
    /// The circuit again as sub-circuits of its prologue and one independent part each (PoRep:
    /// a challenge each), for the recorded path to synthesize on all cores
    /// ([`zkpipe_bellperson::synthesize_recorded_parts`]); empty where the circuit is not so
    /// made or the path is full synthesis.
    pub parts: Vec<C>,
}

/// Filecoin proofs through a zkpipe engine.
#[derive(Debug)]
pub struct Prover {
    pub(crate) params: ParamsCache,
    pub(crate) options: ProveOptions,
    /// Where the partitions of the proofs run at once wait their turn.
    gates: Gates,
}

/// A partition submitted to the engine, holding its slot there until its proof is back.
struct Submitted<'g> {
    partition: usize,
    handle: JobHandle,
    constraints: usize,
    synthesis_ms: f64,
    started: Instant,
    _on_engine: Permit<'g>,
}

impl Prover {
    /// A prover reading (and for test sizes generating) parameters through `params`.
    pub fn new(params: ParamsCache, options: ProveOptions) -> Self {
        Self {
            params,
            options,
            gates: Gates::new(Scheduling::UNLIMITED),
        }
    }

    /// The same prover with its partitions scheduled under `scheduling`: for a daemon that
    /// runs proofs of several priorities at once ([`Prover::prove_in_turn`]).
    pub fn with_scheduling(self, scheduling: Scheduling) -> Self {
        Self {
            gates: Gates::new(scheduling),
            ..self
        }
    }

    /// How it runs.
    pub fn options(&self) -> &ProveOptions {
        &self.options
    }

    /// The parameter files.
    pub fn params(&self) -> &ParamsCache {
        &self.params
    }

    /// Host memory its synthesizing partitions hold now, under its budget.
    pub fn synthesis_memory(&self) -> SynthesisMemory {
        SynthesisMemory {
            in_use: self.gates.memory.in_use(),
            budget: self.gates.memory.capacity(),
        }
    }

    /// Proves `request` on `engine`: filecoin-proofs' bytes for it, each partition proof
    /// checked before it was returned.
    pub fn prove(&self, engine: &Engine, request: &Request) -> Result<ProofOutput, FilecoinError> {
        crate::kinds::prove(self, engine, request, Turn::NORMAL)
    }

    /// As [`Prover::prove`], each partition waiting for its synthesis and its engine slot in
    /// `turn` (highest priority first; see [`crate::schedule`]). Once `turn.cancel` is set,
    /// no partition starts and the proof ends [`FilecoinError::Cancelled`] when those on the
    /// engine are back.
    pub fn prove_in_turn(
        &self,
        engine: &Engine,
        request: &Request,
        turn: Turn<'_>,
    ) -> Result<ProofOutput, FilecoinError> {
        crate::kinds::prove(self, engine, request, turn)
    }

    /// One proof of any circuit on `engine`: the witness `witness` makes under `key`, once
    /// the proof has its engine slot in `turn` beside the Filecoin partitions (so that a
    /// circuit of a registered kind takes its turn by priority like theirs, and memory it
    /// borrows from the engine is held by no more proofs than the engine has slots). The
    /// engine checks the proof before it is returned. Once `turn.cancel` is set before its
    /// turn comes, it ends [`FilecoinError::Cancelled`] unrun.
    pub fn prove_circuit(
        &self,
        engine: &Engine,
        key: &LoadedKey,
        witness: impl FnOnce() -> Result<Witness, FilecoinError>,
        turn: Turn<'_>,
    ) -> Result<(Proof, JobReport), FilecoinError> {
        let _on_engine = self
            .gates
            .engine
            .enter(turn)
            .ok_or(FilecoinError::Cancelled {
                proved: 0,
                partitions: 1,
            })?;
        let witness = witness()?;
        engine
            .submit_in(
                &key.key,
                witness,
                self.options.randomness,
                turn.priority.lane(),
            )
            .and_then(JobHandle::wait_report)
            .map_err(|source| FilecoinError::Circuit { source })
    }

    /// `request` proved by bellperson's `create_proof` on the CPU with `r` and `s`, on the same
    /// circuits and parameter file: what [`Prover::prove`] with `Randomness::Fixed { r, s }`
    /// must equal byte for byte.
    pub fn prove_with_bellperson(
        &self,
        request: &Request,
        r: Scalar,
        s: Scalar,
    ) -> Result<ReferenceOutput, FilecoinError> {
        crate::kinds::reference(self, request, r, s)
    }

    /// Partition `partition`'s witness of `request`, synthesized on the CPU (bellperson's
    /// synthesis of every constraint) and checked against the public inputs filecoin-proofs'
    /// verifier derives, with its circuit's parameter file and recording (the recording made
    /// and written beside the parameters where it is not there yet).
    pub fn partition_witness(
        &self,
        request: &Request,
        partition: usize,
    ) -> Result<PartitionWitness, FilecoinError> {
        crate::kinds::witness(self, request, partition)
    }

    /// See [`Prover::partition_witness`]: partition `k` of `count`, `make` building each
    /// partition's circuit.
    pub(crate) fn export_partition<C, F>(
        &self,
        key: &LoadedKey,
        count: usize,
        k: usize,
        make: F,
    ) -> Result<PartitionWitness, FilecoinError>
    where
        C: Circuit<Scalar> + Send,
        F: Fn(usize) -> Result<PartitionCircuit<C>, FilecoinError>,
    {
        if k >= count {
            return Err(FilecoinError::Mismatch {
                what: "the partition to export",
                expected: format!("one of the proof's {count} (0 to {})", count - 1),
                got: k.to_string(),
            });
        }
        let recording = ParamsCache::recording_file(key);
        self.params.recording(key, || make(0).map(|p| p.circuit))?;
        if !recording.is_file() {
            return Err(FilecoinError::Unsupported {
                what: format!("the recording at {}", recording.display()),
                why: "it could not be written beside the parameter file (see the log)",
            });
        }
        let part = catch("building the partition's circuit", Some(k), || make(k))??;
        let witness = catch("synthesis", Some(k), || {
            zkpipe_bellperson::synthesize(part.circuit)
        })?
        .map_err(|source| synthesis_error(key, k, source))?;
        let inputs = witness.input.get(1..).unwrap_or_default().to_vec();
        if let Some(expected) = &part.expected_inputs {
            if let Some(index) = first_difference(expected, &inputs) {
                return Err(FilecoinError::PublicInputs {
                    partition: k,
                    index,
                    count: expected.len(),
                });
            }
        }
        Ok(PartitionWitness {
            partition: k,
            params: key.path.clone(),
            recording,
            inputs,
            aux: witness.aux.to_vec(),
        })
    }

    /// The proving key of `request`'s circuit, read (or generated) once and then resident: to
    /// load it before the engine starts (whose witness memory is sized from its domain), or
    /// before the first proof's latency counts.
    pub fn key(&self, request: &Request) -> Result<LoadedKey, FilecoinError> {
        crate::kinds::key(self, request)
    }

    /// The key `name` names, read (or for test sizes generated) and then resident: a preload.
    pub fn load_key_named(&self, name: crate::KeyName) -> Result<LoadedKey, FilecoinError> {
        crate::kinds::load_named(self, name)
    }

    /// Lets go of the key `name` names (see [`ParamsCache::evict`]).
    pub fn evict_key_named(
        &self,
        name: crate::KeyName,
    ) -> Result<Option<crate::EvictedKey>, FilecoinError> {
        self.params.evict(&crate::kinds::named_id(name)?)
    }

    /// Runs `count` partitions as jobs of `engine` under `key`, `make(k)` giving partition
    /// k's circuit.
    pub(crate) fn run_partitions<C, F>(
        &self,
        engine: &Engine,
        turn: Turn<'_>,
        key: LoadedKey,
        count: usize,
        make: F,
    ) -> Result<ProofOutput, FilecoinError>
    where
        C: Circuit<Scalar> + Send,
        F: Fn(usize) -> Result<PartitionCircuit<C>, FilecoinError> + Sync,
    {
        let t = Instant::now();
        let recording = match self.options.synthesis {
            Synthesis::Recorded => {
                Some(self.params.recording(&key, || make(0).map(|p| p.circuit))?)
            }
            Synthesis::Full => None,
        };
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let threads = self.options.synthesis_threads.clamp(1, count.max(1));
        let (tx, rx) = channel::unbounded::<Result<Submitted<'_>, FilecoinError>>();
        let mut done: Vec<Option<(Proof, PartitionReport)>> = (0..count).map(|_| None).collect();
        let mut first_error = None;
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let tx = tx.clone();
                let (next, stop, key, make) = (&next, &stop, &key, &make);
                let recording = recording.as_ref();
                scope.spawn(move || loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    if k >= count || stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let submitted = self.submit(engine, turn, key, recording, k, make);
                    let failed = submitted.is_err();
                    if tx.send(submitted).is_err() || failed {
                        break;
                    }
                });
            }
            drop(tx);
            for submitted in rx {
                if first_error.is_some() {
                    // Failed or cancelled: a partition still queued on the engine is dropped
                    // with its handle; one running there finishes unawaited.
                    continue;
                }
                let outcome = submitted.and_then(|s| {
                    self.wait_checked(engine, turn, &key, recording.as_ref(), s, &make)
                });
                match outcome {
                    Ok((proof, report)) => {
                        let k = report.partition;
                        tracing::info!(
                            partition = k,
                            constraints = report.constraints,
                            synthesis_ms = report.synthesis_ms,
                            device_ms = report.job.device_span_ms,
                            wall_ms = report.wall_ms,
                            "partition proved"
                        );
                        done[k] = Some((proof, report));
                    }
                    Err(e) => {
                        // Stop the synthesizers; jobs already queued are cancelled when their
                        // handles drop.
                        stop.store(true, Ordering::SeqCst);
                        first_error.get_or_insert(e);
                    }
                }
            }
        });
        if let Some(e) = first_error {
            return Err(match e {
                FilecoinError::Cancelled { .. } => FilecoinError::Cancelled {
                    proved: done.iter().filter(|d| d.is_some()).count(),
                    partitions: count,
                },
                other => other,
            });
        }
        let mut proofs = Vec::with_capacity(count);
        let mut partitions = Vec::with_capacity(count);
        for (k, slot) in done.into_iter().enumerate() {
            let (proof, report) = slot.ok_or_else(|| FilecoinError::Prove {
                partition: k,
                source: ProveError::Lost {
                    job: 0,
                    reason: "the partition was never proved".into(),
                },
            })?;
            proofs.push(proof);
            partitions.push(report);
        }
        let bytes = proofs.iter().flat_map(|p| p.to_bytes()).collect();
        Ok(ProofOutput {
            bytes,
            proofs,
            partitions,
            wall_ms: t.elapsed().as_secs_f64() * 1e3,
            key,
        })
    }

    /// In `turn`: builds partition `k`'s circuit, synthesizes it into witness memory the
    /// engine lends, checks its public inputs against the verifier's, and submits it (each
    /// step once the partition's turn at its gate comes).
    fn submit<C, F>(
        &self,
        engine: &Engine,
        turn: Turn<'_>,
        key: &LoadedKey,
        recording: Option<&Arc<Recording>>,
        k: usize,
        make: &F,
    ) -> Result<Submitted<'_>, FilecoinError>
    where
        C: Circuit<Scalar> + Send,
        F: Fn(usize) -> Result<PartitionCircuit<C>, FilecoinError> + Sync,
    {
        let started = Instant::now();
        let prove_err = |source| FilecoinError::Prove {
            partition: k,
            source,
        };
        let cancelled = || FilecoinError::Cancelled {
            proved: 0,
            partitions: 0,
        };
        let synthesizing = self.gates.synthesis.enter(turn).ok_or_else(cancelled)?;
        let synthesis = match recording {
            Some(_) => Synthesis::Recorded,
            None => Synthesis::Full,
        };
        let needed = synthesis_bytes(&key.key, synthesis);
        let budget = self.gates.memory.capacity();
        if needed > budget {
            return Err(FilecoinError::SynthesisMemory {
                path: key.path.clone(),
                needed,
                budget,
            });
        }
        let _working_set = self
            .gates
            .memory
            .enter_with(turn, needed)
            .ok_or_else(cancelled)?;
        let part = catch("building the partition's circuit", Some(k), || make(k))??;
        let witness = match recording {
            None => {
                let room = engine
                    .lend_witness(&key.key, LEND_WAIT)
                    .map_err(prove_err)?;
                catch("synthesis", Some(k), || {
                    zkpipe_bellperson::synthesize_lent(part.circuit, room)
                })?
                .map_err(|source| synthesis_error(key, k, source))?
            }
            Some(rec) => {
                let aux = engine.lend_aux(&key.key, LEND_WAIT).map_err(prove_err)?;
                let PartitionCircuit { circuit, parts, .. } = part;
                catch("synthesis", Some(k), || match parts.is_empty() {
                    true => zkpipe_bellperson::synthesize_recorded(circuit, rec, aux),
                    false => zkpipe_bellperson::synthesize_recorded_parts(parts, rec, aux),
                })?
                .map_err(|source| recorded_error(key, k, source))?
            }
        };
        if let Some(expected) = &part.expected_inputs {
            let got = witness.input.get(1..).unwrap_or_default();
            if let Some(index) = first_difference(expected, got) {
                return Err(FilecoinError::PublicInputs {
                    partition: k,
                    index,
                    count: expected.len(),
                });
            }
        }
        let constraints = witness.constraints();
        let synthesis_ms = started.elapsed().as_secs_f64() * 1e3;
        let on_engine = self.gates.engine.enter(turn).ok_or_else(cancelled)?;
        let handle = engine
            .submit_in(
                &key.key,
                witness,
                self.options.randomness,
                turn.priority.lane(),
            )
            .map_err(|e| job_error(key, k, e))?;
        drop(synthesizing);
        Ok(Submitted {
            partition: k,
            handle,
            constraints,
            synthesis_ms,
            started,
            _on_engine: on_engine,
        })
    }

    /// Waits for a partition's proof; a proof the engine's check refused is proved once more
    /// (synthesized again and resubmitted, so that it may run on another device or worker).
    fn wait_checked<C, F>(
        &self,
        engine: &Engine,
        turn: Turn<'_>,
        key: &LoadedKey,
        recording: Option<&Arc<Recording>>,
        s: Submitted<'_>,
        make: &F,
    ) -> Result<(Proof, PartitionReport), FilecoinError>
    where
        C: Circuit<Scalar> + Send,
        F: Fn(usize) -> Result<PartitionCircuit<C>, FilecoinError> + Sync,
    {
        let Submitted {
            partition: k,
            handle,
            constraints,
            mut synthesis_ms,
            started,
            _on_engine,
        } = s;
        let result = handle.wait_report();
        // The partition's engine slot is free once its job is back; a retry waits its turn
        // again.
        drop(_on_engine);
        let (result, retried) = match result {
            Err(e @ ProveError::ProofRejected { .. }) => {
                tracing::warn!(partition = k, error = %e, retry = ?self.options.retry, "a partition proof failed its check: proving it again");
                let cpu;
                let retry_engine = match self.options.retry {
                    Retry::Engine => engine,
                    Retry::Cpu => {
                        cpu = Engine::start(Config::default().with_backend(Backend::Cpu)).map_err(
                            |source| FilecoinError::Prove {
                                partition: k,
                                source,
                            },
                        )?;
                        &cpu
                    }
                };
                let again = self.submit(retry_engine, turn, key, recording, k, make)?;
                synthesis_ms += again.synthesis_ms;
                (again.handle.wait_report(), true)
            }
            other => (other, false),
        };
        let (proof, job) = result.map_err(|e| job_error(key, k, e))?;
        let report = PartitionReport {
            partition: k,
            constraints,
            synthesis_ms,
            job,
            wall_ms: started.elapsed().as_secs_f64() * 1e3,
            retried,
        };
        Ok((proof, report))
    }
}

/// The first index where `got` differs from `expected` (a shorter or longer `got` differs at
/// the end of the shorter).
fn first_difference(expected: &[Scalar], got: &[Scalar]) -> Option<usize> {
    let differs = expected.iter().zip(got).position(|(a, b)| a != b);
    differs.or((expected.len() != got.len()).then(|| expected.len().min(got.len())))
}

/// A synthesis error: the lent memory did not fit the circuit when the key is of another
/// circuit, else the circuit's own error.
fn synthesis_error(key: &LoadedKey, k: usize, source: bellperson::SynthesisError) -> FilecoinError {
    match source {
        bellperson::SynthesisError::IncompatibleLengthVector(_)
        | bellperson::SynthesisError::PolynomialDegreeTooLarge => {
            FilecoinError::ParamsOfOtherCircuit {
                path: key.path.clone(),
                partition: k,
                source: Box::new(source),
            }
        }
        source => FilecoinError::Synthesis {
            partition: k,
            source,
        },
    }
}

/// A recorded synthesis error of partition `k`, as a full synthesis's or the engine's.
fn recorded_error(key: &LoadedKey, k: usize, source: RecordedError) -> FilecoinError {
    match source {
        RecordedError::Synthesis(e) => synthesis_error(key, k, e),
        RecordedError::Witness(e) => job_error(key, k, e),
        RecordedError::Recording(source) => FilecoinError::RecordingMismatch {
            partition: k,
            source,
        },
        e => FilecoinError::Recording {
            path: key.path.clone(),
            source: Box::new(e),
        },
    }
}

/// An engine error of partition `k`: a witness that does not satisfy its circuit means bad
/// vanilla proofs, one whose shape the key refuses a parameter file of another circuit.
fn job_error(key: &LoadedKey, k: usize, e: ProveError) -> FilecoinError {
    match e {
        ProveError::Unsatisfied => FilecoinError::Unsatisfied { partition: k },
        ProveError::Shape { .. } | ProveError::Constraints { .. } => {
            FilecoinError::ParamsOfOtherCircuit {
                path: key.path.clone(),
                partition: k,
                source: Box::new(e),
            }
        }
        source => FilecoinError::Prove {
            partition: k,
            source,
        },
    }
}

/// Host bytes one partition of `key` works in while it synthesizes, estimated: its witness
/// ([`witness_bytes`]) and about one more copy of the aux values (bellperson's constraint
/// system's own, or the parts' witnesses until they are joined). What the synthesis memory
/// budget ([`Scheduling::synthesis_bytes`]) counts.
pub fn synthesis_bytes(key: &ProvingKey, synthesis: Synthesis) -> usize {
    witness_bytes(key, synthesis) + 32 * key.num_aux()
}

/// Host bytes the partitions synthesizing at once hold now, by their estimates, and the
/// budget ([`usize::MAX`]: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SynthesisMemory {
    pub in_use: usize,
    pub budget: usize,
}

/// Bytes of witness memory one partition of `key` holds while it synthesizes and until the
/// engine has read it, 32 bytes a value: the aux values (in a buffer of at least the domain's
/// size class), and a, b and c unless the engine evaluates them from the recording. For
/// `Config::pinned_witness`.
pub fn witness_bytes(key: &ProvingKey, synthesis: Synthesis) -> usize {
    let aux = key.num_aux().max(key.domain_size());
    match synthesis {
        Synthesis::Recorded => 32 * aux,
        Synthesis::Full => 32 * (3 * key.domain_size() + aux),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_difference_names_the_index_or_the_shorter_end() {
        let v = |xs: &[u64]| xs.iter().map(|&x| Scalar::from(x)).collect::<Vec<_>>();
        assert_eq!(first_difference(&v(&[1, 2, 3]), &v(&[1, 2, 3])), None);
        assert_eq!(first_difference(&v(&[1, 2, 3]), &v(&[1, 5, 3])), Some(1));
        assert_eq!(first_difference(&v(&[1, 2, 3]), &v(&[1, 2])), Some(2));
        assert_eq!(first_difference(&v(&[1]), &v(&[1, 2])), Some(1));
        assert_eq!(first_difference(&[], &[]), None);
    }
}
