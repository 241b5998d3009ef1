//! A circuit's witness in files, made once and sent many times: what `zkpipe filecoin …
//! --export-witness DIR` writes and `zkpipe client bench --circuit` and `zkpipe prove
//! --witness-dir` read. A directory holds
//! - `circuit.toml`: the circuit's entry for the daemon's `[serve.circuits.NAME]` table (its
//!   parameter file and recording);
//! - `inputs.bin`: the public inputs, the constant one left out;
//! - `aux.bin`: the aux values;
//!
//! each value 32 bytes, canonical, little-endian (as a request carries them).

use std::path::{Path, PathBuf};

use blstrs::Scalar;

use crate::circuits::{from_bytes, to_bytes, CircuitConfig, CircuitError};

/// The circuit's entry in a witness directory.
pub const CIRCUIT_FILE: &str = "circuit.toml";
/// The public inputs in a witness directory.
pub const INPUTS_FILE: &str = "inputs.bin";
/// The aux values in a witness directory.
pub const AUX_FILE: &str = "aux.bin";

/// Why a witness directory could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ExportedError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a circuit's entry (params, recording): {source}")]
    Entry {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{path}: {source}")]
    Values {
        path: PathBuf,
        source: Box<CircuitError>,
    },
}

/// A witness directory's contents, its values as the files hold them (what a request
/// carries).
pub struct ExportedWitness {
    pub circuit: CircuitConfig,
    /// The public inputs without the constant one, 32 bytes each.
    pub inputs: Vec<u8>,
    /// The aux values, 32 bytes each.
    pub aux: Vec<u8>,
}

impl std::fmt::Debug for ExportedWitness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportedWitness")
            .field("circuit", &self.circuit)
            .field("input_bytes", &self.inputs.len())
            .field("aux_bytes", &self.aux.len())
            .finish()
    }
}

/// A witness's values, decoded and checked. Its `Debug` gives the counts, never a value.
pub struct WitnessValues {
    /// The public inputs without the constant one.
    pub inputs: Vec<Scalar>,
    pub aux: Vec<Scalar>,
}

impl std::fmt::Debug for WitnessValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WitnessValues")
            .field("inputs", &self.inputs.len())
            .field("aux", &self.aux.len())
            .finish()
    }
}

impl ExportedWitness {
    /// The witness of `circuit` with these values.
    pub fn new(circuit: CircuitConfig, inputs: &[Scalar], aux: &[Scalar]) -> Self {
        Self {
            circuit,
            inputs: to_bytes(inputs),
            aux: to_bytes(aux),
        }
    }

    /// Writes the directory `dir` (made where missing; its three files replaced).
    pub fn write(&self, dir: &Path) -> Result<(), ExportedError> {
        let io = |path: PathBuf| move |source| ExportedError::Io { path, source };
        std::fs::create_dir_all(dir).map_err(io(dir.to_path_buf()))?;
        let entry = toml::to_string(&self.circuit).map_err(|e| ExportedError::Io {
            path: dir.join(CIRCUIT_FILE),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        for (name, bytes) in [
            (CIRCUIT_FILE, entry.as_bytes()),
            (INPUTS_FILE, &self.inputs),
            (AUX_FILE, &self.aux),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(io(path.clone()))?;
        }
        Ok(())
    }

    /// Reads the directory `dir`; the values are checked whole (a whole number of 32-byte
    /// values), not decoded ([`ExportedWitness::values`] decodes them).
    pub fn read(dir: &Path) -> Result<Self, ExportedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| ExportedError::Io { path, source })
        };
        let entry_path = dir.join(CIRCUIT_FILE);
        let entry = String::from_utf8_lossy(&read(CIRCUIT_FILE)?).into_owned();
        let circuit = toml::from_str(&entry).map_err(|source| ExportedError::Entry {
            path: entry_path,
            source: Box::new(source),
        })?;
        let out = Self {
            circuit,
            inputs: read(INPUTS_FILE)?,
            aux: read(AUX_FILE)?,
        };
        for (name, bytes) in [(INPUTS_FILE, &out.inputs), (AUX_FILE, &out.aux)] {
            if !bytes.len().is_multiple_of(crate::circuits::SCALAR_BYTES) {
                return Err(ExportedError::Values {
                    path: dir.join(name),
                    source: Box::new(CircuitError::Ragged {
                        what: if name == INPUTS_FILE { "inputs" } else { "aux" },
                        len: bytes.len(),
                    }),
                });
            }
        }
        Ok(out)
    }

    /// The values, each checked canonical.
    pub fn values(&self, dir: &Path) -> Result<WitnessValues, ExportedError> {
        let decode = |what, name: &str, bytes: &[u8]| {
            from_bytes(what, bytes).map_err(|source| ExportedError::Values {
                path: dir.join(name),
                source: Box::new(source),
            })
        };
        Ok(WitnessValues {
            inputs: decode("inputs", INPUTS_FILE, &self.inputs)?,
            aux: decode("aux", AUX_FILE, &self.aux)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("zkpipe-exported-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Self(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn circuit() -> CircuitConfig {
        CircuitConfig {
            params: PathBuf::from("/params/v28-x.params"),
            recording: PathBuf::from("/params/v28-x.zkpipe-r1cs"),
            params_digest: Some("0123456789abcdef0123456789abcdef".into()),
        }
    }

    #[test]
    fn a_witness_directory_reads_back_what_was_written() {
        let dir = Scratch::new("round-trip");
        let inputs: Vec<Scalar> = (1..4u64).map(Scalar::from).collect();
        let aux: Vec<Scalar> = (0..100u64).map(|i| Scalar::from(i * i + 7)).collect();
        ExportedWitness::new(circuit(), &inputs, &aux)
            .write(dir.path())
            .expect("written");
        let back = ExportedWitness::read(dir.path()).expect("read");
        assert_eq!(back.circuit, circuit());
        let values = back.values(dir.path()).expect("decoded");
        assert_eq!(values.inputs, inputs);
        assert_eq!(values.aux, aux);
    }

    #[test]
    fn a_damaged_witness_directory_is_refused_naming_the_file() {
        let dir = Scratch::new("damaged");
        let aux = [Scalar::from(5u64), Scalar::from(6u64)];
        ExportedWitness::new(circuit(), &[Scalar::from(1u64)], &aux)
            .write(dir.path())
            .expect("written");

        let aux_path = dir.path().join(AUX_FILE);
        let mut bytes = std::fs::read(&aux_path).expect("read");
        bytes.pop();
        std::fs::write(&aux_path, &bytes).expect("truncated");
        let err = ExportedWitness::read(dir.path()).expect_err("a truncated value");
        match &err {
            ExportedError::Values { path, source } => {
                assert_eq!(*path, aux_path);
                assert!(
                    matches!(**source, CircuitError::Ragged { len: 63, .. }),
                    "{err}"
                );
            }
            other => panic!("expected a ragged file, got {other}"),
        }

        let mut high = to_bytes(&aux[..1]);
        high.extend([0xff; 32]);
        std::fs::write(&aux_path, &high).expect("a value above the modulus");
        let read = ExportedWitness::read(dir.path()).expect("whole values");
        let err = read.values(dir.path()).expect_err("not canonical");
        match &err {
            ExportedError::Values { source, .. } => assert!(
                matches!(
                    **source,
                    CircuitError::NonCanonical {
                        what: "aux",
                        index: 1
                    }
                ),
                "{err}"
            ),
            other => panic!("expected a value that is not canonical, got {other}"),
        }

        std::fs::write(dir.path().join(CIRCUIT_FILE), "params = 3\n").expect("written");
        let err = ExportedWitness::read(dir.path()).expect_err("a bad entry");
        assert!(matches!(err, ExportedError::Entry { .. }), "{err}");

        std::fs::remove_file(dir.path().join(INPUTS_FILE)).expect("removed");
        std::fs::write(
            dir.path().join(CIRCUIT_FILE),
            toml::to_string(&circuit()).unwrap(),
        )
        .expect("written");
        let err = ExportedWitness::read(dir.path()).expect_err("no inputs");
        assert!(
            matches!(&err, ExportedError::Io { path, .. } if path.ends_with(INPUTS_FILE)),
            "{err}"
        );
    }
}
