//! Circuits other than Filecoin's, registered by their files: a zk team's Groth16 circuit,
//! proved from its witness alone.
//!
//! A circuit is registered in the daemon's configuration by its parameter file
//! (bellperson's `Parameters::write` layout) and its recording (zkpipe-r1cs's file, written
//! by `zkpipe_r1cs::file::save` from `zkpipe_bellperson::record`). A request carries the
//! witness: the public inputs (without the constant one) and the aux values. The daemon
//! evaluates a, b and c from the recording itself (on the device on a GPU engine), so a
//! caller never synthesizes more than its witness.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;
use zkpipe_filecoin::{FilecoinError, LoadedKey, Prover, Turn};
use zkpipe_pipeline::{Engine, ProvingKey, Witness};
use zkpipe_r1cs::{Recording, RecordingError};

/// Bytes of one value of a witness: a scalar, canonical, little-endian.
pub const SCALAR_BYTES: usize = 32;
/// The longest circuit name.
pub const MAX_NAME: usize = 64;

/// How long a witness waits for the engine to lend memory for its values (lent rooms come
/// back as the engine's jobs finish), as the Filecoin kinds' partitions wait.
const LEND_WAIT: Duration = Duration::from_secs(3600);

/// One circuit in the configuration: `[serve.circuits.NAME]`.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CircuitConfig {
    /// The Groth16 parameter file (bellperson's `Parameters::write` layout). Its points are
    /// checked on their curves and in their subgroups when it is read.
    pub params: PathBuf,
    /// The circuit's recording (`zkpipe_r1cs::file::save`).
    pub recording: PathBuf,
}

/// A registered circuit: its name, parameter file and recording (mapped from its file).
#[derive(Debug)]
pub struct Circuit {
    name: String,
    params: PathBuf,
    recording_path: PathBuf,
    recording: Arc<Recording>,
}

/// A circuit as the status lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CircuitSummary {
    pub name: String,
    /// Public inputs a witness carries (the constant one not counted).
    pub inputs: usize,
    pub aux: usize,
    pub constraints: usize,
    pub params: PathBuf,
    pub recording: PathBuf,
}

/// The witness of one proof of a registered circuit, checked against it. Its values never
/// appear in a log: its `Debug` gives the counts alone.
pub struct CircuitWitness {
    circuit: Arc<Circuit>,
    /// The public inputs, the constant one first.
    input: Vec<Scalar>,
    aux: Vec<Scalar>,
}

impl std::fmt::Debug for CircuitWitness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitWitness")
            .field("circuit", &self.circuit.name)
            .field("inputs", &(self.input.len() - 1))
            .field("aux", &self.aux.len())
            .finish()
    }
}

/// Why a circuit could not be registered, or a witness was refused.
#[derive(Debug, thiserror::Error)]
pub enum CircuitError {
    #[error(
        "circuit name {0:?}: use ASCII letters, digits, '-', '_' and '.', 1 to {MAX_NAME} of them"
    )]
    BadName(String),
    #[error("circuit {name}: the recording {path}: {source}")]
    Recording {
        name: String,
        path: PathBuf,
        source: Box<RecordingError>,
    },
    #[error("circuit {name}: {source}")]
    Key {
        name: String,
        source: Box<FilecoinError>,
    },
    #[error("circuit {name}: the recording {recording} and the parameters {params} are not of one circuit: {what}: {recorded} in the recording, {key} in the parameters")]
    Mismatch {
        name: String,
        recording: PathBuf,
        params: PathBuf,
        what: &'static str,
        recorded: usize,
        key: usize,
    },
    #[error("unknown circuit {name:?}: the daemon has {known:?}")]
    Unknown { name: String, known: Vec<String> },
    #[error("{what}: {len} bytes, not a whole number of {SCALAR_BYTES}-byte values")]
    Ragged { what: &'static str, len: usize },
    #[error("{what}: {got} values, circuit {circuit} has {expected}")]
    Count {
        what: &'static str,
        circuit: String,
        got: usize,
        expected: usize,
    },
    #[error("{what}[{index}]: not a canonical scalar (32 bytes, little-endian, below the field's modulus)")]
    NonCanonical { what: &'static str, index: usize },
}

impl Circuit {
    /// Its key's id in the parameter cache (and in the status's keys).
    pub fn key_id(&self) -> String {
        format!("circuit:{}", self.name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn summary(&self) -> CircuitSummary {
        let s = self.recording.shape();
        CircuitSummary {
            name: self.name.clone(),
            inputs: s.inputs - 1,
            aux: s.aux,
            constraints: s.constraints,
            params: self.params.clone(),
            recording: self.recording_path.clone(),
        }
    }

    /// Its proving key, from the prover's cache (read again if it was evicted).
    fn key(&self, prover: &Prover) -> Result<LoadedKey, FilecoinError> {
        prover.params().key_file(&self.key_id(), &self.params)
    }

    /// Proves `w` on `engine` in `turn`: the proof's 192 bytes (bellperson's `Proof::write`).
    pub fn prove(
        &self,
        prover: &Prover,
        engine: &Engine,
        w: CircuitWitness,
        turn: Turn<'_>,
    ) -> Result<Vec<u8>, FilecoinError> {
        let key = self.key(prover)?;
        let witness = || self.lent_witness(engine, &key.key, w);
        let (proof, _) = prover.prove_circuit(engine, &key, witness, turn)?;
        Ok(proof.to_bytes().to_vec())
    }

    /// `w` as the engine proves it: its aux values copied into memory the engine lends, as a
    /// witness the engine's own producers make, rather than staged by the engine from a
    /// vector; a, b and c left to the engine to evaluate from the recording.
    fn lent_witness(
        &self,
        engine: &Engine,
        key: &ProvingKey,
        w: CircuitWitness,
    ) -> Result<Witness, FilecoinError> {
        let lent = |source| FilecoinError::Circuit { source };
        let mut aux = engine.lend_aux(key, LEND_WAIT).map_err(lent)?;
        aux.extend_from_slice(&w.aux).map_err(lent)?;
        let densities = self.recording.densities().clone();
        Ok(Witness {
            input: w.input,
            aux,
            a_aux_density: densities.a_aux,
            b_input_density: densities.b_input,
            b_aux_density: densities.b_aux,
            recording: Some(Arc::clone(&self.recording)),
            ..Witness::default()
        })
    }

    /// Checks that the recording and the key are of one circuit: the numbers of inputs, aux
    /// variables and the points of the queries the recording's densities select.
    fn check_key(&self, key: &ProvingKey) -> Result<(), CircuitError> {
        let shape = self.recording.shape();
        let d = self.recording.densities();
        let [_, _, a, b1, _] = key.query_lens();
        let pairs = [
            (
                "public inputs (the constant one counted)",
                shape.inputs,
                key.num_inputs(),
            ),
            ("aux variables", shape.aux, key.num_aux()),
            (
                "A query points (inputs and the aux variables in A)",
                shape.inputs + d.a_aux.selected(),
                a,
            ),
            (
                "B query points (the inputs and aux variables in B)",
                d.b_input.selected() + d.b_aux.selected(),
                b1,
            ),
        ];
        for (what, recorded, key_has) in pairs {
            if recorded != key_has {
                return Err(self.mismatch(what, recorded, key_has));
            }
        }
        let n = key.domain_size();
        if shape.constraints > n || (n > 1 && shape.constraints <= n / 2) {
            return Err(self.mismatch(
                "constraints (the key's domain is the next power of two)",
                shape.constraints,
                n,
            ));
        }
        Ok(())
    }

    fn mismatch(&self, what: &'static str, recorded: usize, key: usize) -> CircuitError {
        CircuitError::Mismatch {
            name: self.name.clone(),
            recording: self.recording_path.clone(),
            params: self.params.clone(),
            what,
            recorded,
            key,
        }
    }
}

/// The circuits a daemon proves besides Filecoin's, by name.
#[derive(Debug, Default)]
pub struct Circuits {
    by_name: BTreeMap<String, Arc<Circuit>>,
}

impl Circuits {
    /// Registers the configured circuits: each recording read and checked, each key read
    /// into `prover`'s cache (so it is ready for the first proof) and matched with its
    /// recording. The first that cannot be used is the error.
    pub fn register(
        prover: &Prover,
        configs: &BTreeMap<String, CircuitConfig>,
    ) -> Result<Self, CircuitError> {
        let mut by_name = BTreeMap::new();
        for (name, cfg) in configs {
            let circuit = Circuit::read(name, cfg)?;
            let key = circuit.key(prover).map_err(|source| CircuitError::Key {
                name: name.clone(),
                source: Box::new(source),
            })?;
            circuit.check_key(&key.key)?;
            tracing::info!(circuit = %name, inputs = circuit.recording.shape().inputs - 1, aux = circuit.recording.shape().aux, constraints = circuit.recording.shape().constraints, "circuit registered");
            by_name.insert(name.clone(), Arc::new(circuit));
        }
        Ok(Self { by_name })
    }

    /// The registered circuits.
    pub fn summaries(&self) -> Vec<CircuitSummary> {
        self.by_name.values().map(|c| c.summary()).collect()
    }

    /// The witness of a proof of `name` from its bytes: `inputs` the public inputs without
    /// the constant one, `aux` the aux values, 32 bytes each, canonical little-endian.
    pub fn witness(
        &self,
        name: &str,
        inputs: &[u8],
        aux: &[u8],
    ) -> Result<CircuitWitness, CircuitError> {
        let circuit = self
            .by_name
            .get(name)
            .ok_or_else(|| CircuitError::Unknown {
                name: name.to_string(),
                known: self.by_name.keys().cloned().collect(),
            })?;
        let shape = circuit.recording.shape();
        let mut input = Vec::with_capacity(shape.inputs);
        input.push(Scalar::ONE);
        input.extend(scalars("inputs", inputs, shape.inputs - 1, name)?);
        let aux = scalars("aux", aux, shape.aux, name)?;
        Ok(CircuitWitness {
            circuit: Arc::clone(circuit),
            input,
            aux,
        })
    }
}

impl Circuit {
    fn read(name: &str, cfg: &CircuitConfig) -> Result<Self, CircuitError> {
        let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(fine) {
            return Err(CircuitError::BadName(name.to_string()));
        }
        let recording =
            zkpipe_r1cs::file::read(&cfg.recording).map_err(|source| CircuitError::Recording {
                name: name.to_string(),
                path: cfg.recording.clone(),
                source: Box::new(source),
            })?;
        Ok(Self {
            name: name.to_string(),
            params: cfg.params.clone(),
            recording_path: cfg.recording.clone(),
            recording: Arc::new(recording),
        })
    }
}

impl CircuitWitness {
    /// The circuit it is of.
    pub fn circuit(&self) -> &Arc<Circuit> {
        &self.circuit
    }
}

/// `expected` scalars from `bytes`, each checked canonical.
fn scalars(
    what: &'static str,
    bytes: &[u8],
    expected: usize,
    circuit: &str,
) -> Result<Vec<Scalar>, CircuitError> {
    let got = bytes.len() / SCALAR_BYTES;
    if bytes.len().is_multiple_of(SCALAR_BYTES) && got != expected {
        // Refused before a value is decoded.
        return Err(CircuitError::Count {
            what,
            circuit: circuit.to_string(),
            got,
            expected,
        });
    }
    from_bytes(what, bytes)
}

/// A witness's values from the bytes a request carries them in ([`to_bytes`]): refused when
/// not a whole number of values or when a value is not canonical.
pub fn from_bytes(what: &'static str, bytes: &[u8]) -> Result<Vec<Scalar>, CircuitError> {
    if !bytes.chunks_exact(SCALAR_BYTES).remainder().is_empty() {
        return Err(CircuitError::Ragged {
            what,
            len: bytes.len(),
        });
    }
    let decode = |chunk: &[u8]| -> Option<Scalar> {
        let mut le = [0u8; SCALAR_BYTES];
        le.copy_from_slice(chunk);
        Scalar::from_bytes_le(&le).into()
    };
    // Decoded on all cores; the first value out of the field found again in order, so that
    // the error names the first.
    let decoded: Option<Vec<Scalar>> = bytes.par_chunks_exact(SCALAR_BYTES).map(decode).collect();
    decoded.ok_or_else(|| {
        let index = bytes
            .chunks_exact(SCALAR_BYTES)
            .position(|chunk| decode(chunk).is_none())
            .unwrap_or_default();
        CircuitError::NonCanonical { what, index }
    })
}

/// A witness's values as a request carries them: 32 bytes each, little-endian.
pub fn to_bytes(values: &[Scalar]) -> Vec<u8> {
    values.iter().flat_map(Scalar::to_bytes_le).collect()
}
