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
use prost::bytes::Bytes;
use rayon::prelude::*;
use zkpipe_field::Fr;
use zkpipe_filecoin::{FilecoinError, LoadedKey, Prover, Turn};
use zkpipe_pipeline::{Engine, ProvingKey, Witness};
use zkpipe_r1cs::{Recording, RecordingError};

use crate::requests::RequestThreads;

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
    /// checked on their curves and in their subgroups when it is read, unless
    /// `params_digest` is given.
    pub params: PathBuf,
    /// The circuit's recording (`zkpipe_r1cs::file::save`).
    pub recording: PathBuf,
    /// The parameter file's digest (filecoin-proofs' BLAKE2b, its first 32 hex digits, as
    /// `zkpipe filecoin … --export-witness` writes it): the file is checked against it and
    /// its points are read unchecked, which takes seconds where checking every point takes
    /// minutes; a file of another digest is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_digest: Option<String>,
}

/// A registered circuit: its name, parameter file and recording (mapped from its file).
#[derive(Debug)]
pub struct Circuit {
    name: String,
    params: PathBuf,
    params_digest: Option<String>,
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
    aux: CheckedValues,
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
    #[error("{what}: {values} values for room for {room}")]
    Room {
        what: &'static str,
        values: usize,
        room: usize,
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

    /// Its proving key, from the prover's cache (read again if it was evicted): its file
    /// checked against its digest where the configuration gives one, else every point.
    fn key(&self, prover: &Prover) -> Result<LoadedKey, FilecoinError> {
        let cache = prover.params();
        match &self.params_digest {
            Some(digest) => cache.key_file_with_digest(&self.key_id(), &self.params, digest),
            None => cache.key_file(&self.key_id(), &self.params),
        }
    }

    /// Proves `w` on `engine` in `turn`: the proof's 192 bytes (bellperson's `Proof::write`).
    /// Its values are converted on `threads`.
    pub fn prove(
        &self,
        prover: &Prover,
        engine: &Engine,
        threads: &RequestThreads,
        w: CircuitWitness,
        turn: Turn<'_>,
    ) -> Result<Vec<u8>, FilecoinError> {
        let key = self.key(prover)?;
        let witness = || self.lent_witness(engine, threads, &key.key, w);
        let (proof, _) = prover.prove_circuit(engine, &key, witness, turn)?;
        Ok(proof.to_bytes().to_vec())
    }

    /// `w` as the engine proves it: its aux values copied into memory the engine lends, as a
    /// witness the engine's own producers make, rather than staged by the engine from a
    /// vector; a, b and c left to the engine to evaluate from the recording.
    fn lent_witness(
        &self,
        engine: &Engine,
        threads: &RequestThreads,
        key: &ProvingKey,
        w: CircuitWitness,
    ) -> Result<Witness, FilecoinError> {
        let lent = |source| FilecoinError::Circuit { source };
        let mut aux = engine.lend_aux(key, LEND_WAIT).map_err(lent)?;
        let slots = aux.append_slots(w.aux.len()).map_err(lent)?;
        threads
            .run(|| w.aux.write_into(slots))
            .map_err(|e| FilecoinError::Witness {
                source: Box::new(e),
            })?;
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
        aux: Bytes,
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
        expect_count("inputs", inputs, shape.inputs - 1, name)?;
        input.extend(from_bytes("inputs", inputs)?);
        expect_count("aux", &aux, shape.aux, name)?;
        let aux = CheckedValues::check("aux", aux)?;
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
            params_digest: cfg.params_digest.clone(),
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

/// Refuses whole values of `bytes` that are not `expected` of them, before a value is read
/// (bytes that are not whole values are refused as such when they are read).
fn expect_count(
    what: &'static str,
    bytes: &[u8],
    expected: usize,
    circuit: &str,
) -> Result<(), CircuitError> {
    let got = bytes.len() / SCALAR_BYTES;
    match bytes.len().is_multiple_of(SCALAR_BYTES) && got != expected {
        true => Err(CircuitError::Count {
            what,
            circuit: circuit.to_string(),
            got,
            expected,
        }),
        false => Ok(()),
    }
}

/// A witness's values as a request carried them ([`to_bytes`]), each checked canonical when
/// the request came and converted into the engine's form only when written where the engine
/// reads them: a queued witness holds its request's bytes and no second copy of its values.
pub struct CheckedValues {
    what: &'static str,
    bytes: Bytes,
}

/// The counts alone: a witness's values never appear in a log.
impl std::fmt::Debug for CheckedValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedValues")
            .field("what", &self.what)
            .field("len", &self.len())
            .finish()
    }
}

impl CheckedValues {
    /// `bytes` as values: refused when not a whole number of values or when a value is not
    /// canonical (the error names the first).
    pub fn check(what: &'static str, bytes: Bytes) -> Result<Self, CircuitError> {
        check_whole(what, &bytes)?;
        let first_bad = bytes
            .par_chunks_exact(SCALAR_BYTES)
            .position_first(|v| !is_canonical(v));
        match first_bad {
            Some(index) => Err(CircuitError::NonCanonical { what, index }),
            None => Ok(Self { what, bytes }),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.bytes.len() / SCALAR_BYTES
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes the values into `out` (one place for each), in the engine's form, on all cores.
    pub fn write_into(&self, out: &mut [Fr]) -> Result<(), CircuitError> {
        if out.len() != self.len() {
            return Err(CircuitError::Room {
                what: self.what,
                values: self.len(),
                room: out.len(),
            });
        }
        const VALUES: usize = 1 << 14;
        let first_bad = out
            .par_chunks_mut(VALUES)
            .zip(self.bytes.par_chunks(VALUES * SCALAR_BYTES))
            .enumerate()
            .find_map_first(|(chunk, (dst, src))| {
                let bad = dst
                    .iter_mut()
                    .zip(src.chunks_exact(SCALAR_BYTES))
                    .position(|(d, v)| match decode(v) {
                        Some(s) => {
                            *d = Fr::from(s);
                            false
                        }
                        None => true,
                    });
                bad.map(|i| chunk * VALUES + i)
            });
        match first_bad {
            Some(index) => Err(CircuitError::NonCanonical {
                what: self.what,
                index,
            }),
            None => Ok(()),
        }
    }
}

/// The field's modulus r as little-endian 64-bit limbs.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

/// Whether a value's 32 little-endian bytes are below the modulus: a comparison, with no
/// conversion into Montgomery form.
fn is_canonical(value: &[u8]) -> bool {
    let limb = |i: usize| {
        let mut le = [0u8; 8];
        le.copy_from_slice(&value[i * 8..i * 8 + 8]);
        u64::from_le_bytes(le)
    };
    for i in (0..4).rev() {
        let (v, r) = (limb(i), MODULUS[i]);
        if v != r {
            return v < r;
        }
    }
    false
}

/// One value from its 32 bytes (none when it is not canonical).
fn decode(value: &[u8]) -> Option<Scalar> {
    let mut le = [0u8; SCALAR_BYTES];
    le.copy_from_slice(value);
    Scalar::from_bytes_le(&le).into()
}

/// Refuses bytes that are not a whole number of values.
fn check_whole(what: &'static str, bytes: &[u8]) -> Result<(), CircuitError> {
    match bytes.chunks_exact(SCALAR_BYTES).remainder().is_empty() {
        true => Ok(()),
        false => Err(CircuitError::Ragged {
            what,
            len: bytes.len(),
        }),
    }
}

/// A witness's values from the bytes a request carries them in ([`to_bytes`]): refused when
/// not a whole number of values or when a value is not canonical.
pub fn from_bytes(what: &'static str, bytes: &[u8]) -> Result<Vec<Scalar>, CircuitError> {
    check_whole(what, bytes)?;
    // Decoded on all cores; the first value out of the field found again in order, so that
    // the error names the first.
    let decoded: Option<Vec<Scalar>> = bytes.par_chunks_exact(SCALAR_BYTES).map(decode).collect();
    decoded.ok_or_else(|| {
        let index = bytes
            .chunks_exact(SCALAR_BYTES)
            .position(|v| decode(v).is_none())
            .unwrap_or_default();
        CircuitError::NonCanonical { what, index }
    })
}

/// A witness's values as a request carries them: 32 bytes each, little-endian.
pub fn to_bytes(values: &[Scalar]) -> Vec<u8> {
    values.iter().flat_map(Scalar::to_bytes_le).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::PrimeField;

    /// r - 1, r and r + 1, 2^256 - 1 and small values, little-endian.
    fn edges() -> Vec<[u8; 32]> {
        let limbs = |l: [u64; 4]| {
            let mut le = [0u8; 32];
            for (i, v) in l.iter().enumerate() {
                le[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
            }
            le
        };
        let r = MODULUS;
        vec![
            [0; 32],
            limbs([1, 0, 0, 0]),
            limbs([r[0] - 1, r[1], r[2], r[3]]),
            limbs(r),
            limbs([r[0] + 1, r[1], r[2], r[3]]),
            limbs([0, 0, 0, r[3]]),
            limbs([u64::MAX, u64::MAX, u64::MAX, r[3] - 1]),
            limbs([0, 0, r[2] + 1, r[3]]),
            [0xff; 32],
        ]
    }

    #[test]
    fn the_modulus_is_the_fields() {
        let hex: String = MODULUS.iter().rev().map(|l| format!("{l:016x}")).collect();
        assert_eq!(format!("0x{hex}"), Scalar::MODULUS);
    }

    #[test]
    fn the_comparison_agrees_with_blstrs_on_edges_and_random_values() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = || {
            let mut le = [0u8; 32];
            for b in le.iter_mut() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *b = (state >> 56) as u8;
            }
            // Half of them below 2^255, where most are canonical.
            le[31] &= 0x7f | (le[0] & 0x80);
            le
        };
        let values: Vec<[u8; 32]> = edges()
            .into_iter()
            .chain((0..2000).map(|_| random()))
            .collect();
        let (mut canonical, mut not) = (0, 0);
        for v in &values {
            let blst = Option::<Scalar>::from(Scalar::from_bytes_le(v)).is_some();
            assert_eq!(is_canonical(v), blst, "{v:02x?}");
            match blst {
                true => canonical += 1,
                false => not += 1,
            }
        }
        assert!(
            canonical > 100 && not > 100,
            "{canonical} canonical, {not} not"
        );
    }

    #[test]
    fn checked_values_are_written_as_the_engine_reads_them() {
        let values: Vec<Scalar> = (0..40_000u64)
            .map(|i| Scalar::from(i * i + 3).invert().unwrap())
            .collect();
        let checked = CheckedValues::check("aux", Bytes::from(to_bytes(&values))).unwrap();
        assert_eq!(checked.len(), values.len());
        let mut out = vec![Fr::default(); values.len()];
        checked.write_into(&mut out).unwrap();
        let expected: Vec<Fr> = values.iter().map(|&s| Fr::from(s)).collect();
        assert!(out == expected);
        let mut short = vec![Fr::default(); values.len() - 1];
        assert!(matches!(
            checked.write_into(&mut short),
            Err(CircuitError::Room {
                values: 40_000,
                room: 39_999,
                ..
            })
        ));
    }

    #[test]
    fn the_first_value_out_of_the_field_is_named() {
        let mut bytes = to_bytes(&vec![Scalar::ONE; 50_000]);
        for index in [40_000, 30_001] {
            bytes[index * SCALAR_BYTES..(index + 1) * SCALAR_BYTES].copy_from_slice(&edges()[3]);
        }
        let e = CheckedValues::check("aux", Bytes::from(bytes.clone())).unwrap_err();
        assert!(
            matches!(
                e,
                CircuitError::NonCanonical {
                    what: "aux",
                    index: 30_001
                }
            ),
            "{e}"
        );
        let e = from_bytes("aux", &bytes).unwrap_err();
        assert!(
            matches!(e, CircuitError::NonCanonical { index: 30_001, .. }),
            "{e}"
        );
        bytes.pop();
        let e = CheckedValues::check("aux", Bytes::from(bytes)).unwrap_err();
        assert!(matches!(e, CircuitError::Ragged { len, .. } if len == 50_000 * 32 - 1));
    }
}
