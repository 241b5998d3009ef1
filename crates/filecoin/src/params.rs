//! Parameter files where operators keep them: found in a directory (`FIL_PROOFS_PARAMETER_CACHE`)
//! by the names filecoin-proofs gives them, read with zkpipe's reader, and kept resident per
//! file across proofs.
//!
//! A file filecoin-proofs publishes (its `parameters.json` manifest names it with a digest) is
//! read without the per-point checks once its digest matches; any other file (test
//! parameters generated here or by filecoin-proofs' `paramcache`) is read with every point
//! checked. For test sector sizes with no file, the parameters are generated as filecoin-proofs'
//! parameter cache does (random parameters for the compound proof's blank circuit) and written
//! there with their verifying key and metadata, so that a second run, and filecoin-proofs'
//! own verifiers, read them.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bellperson::groth16;
use blstrs::{Bls12, Scalar};
use fs2::FileExt;
use storage_proofs_core::parameter_cache::{
    get_parameter_data_from_id, CacheEntryMetadata, GROTH_PARAMETER_EXT, PARAMETER_METADATA_EXT,
    VERIFYING_KEY_EXT, VERSION,
};
use zkpipe_pipeline::ProvingKey;

use crate::FilecoinError;

/// The environment variable filecoin-proofs reads its parameter directory from.
pub const PARAMETER_CACHE_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// filecoin-proofs' directory when the variable is not set.
pub const DEFAULT_PARAMETER_CACHE: &str = "/var/tmp/filecoin-proof-parameters/";

/// Sector sizes whose parameters are test parameters: they may be generated where missing.
/// The production sizes (32 and 64 GiB) come only from the trusted setup's files.
const TEST_SECTOR_SIZES: [u64; 8] = [
    1 << 11,
    1 << 12,
    1 << 14,
    1 << 15,
    1 << 23,
    1 << 24,
    1 << 29,
    1 << 30,
];

/// How a parameter file's points were trusted when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Its digest matched the one filecoin-proofs publishes: points read unchecked.
    PublishedDigest,
    /// Every point checked on its curve and in the subgroup.
    Checked,
}

/// A proving key read from a parameter file, with what was done to read it.
#[derive(Debug, Clone)]
pub struct LoadedKey {
    /// The key (resident: later proofs of the same circuit share it).
    pub key: Arc<ProvingKey>,
    /// The file it came from.
    pub path: PathBuf,
    /// How its points were trusted.
    pub trust: Trust,
    /// Milliseconds generating it (0 when the file was there).
    pub generated_ms: f64,
    /// Milliseconds reading it (0 when it was resident already).
    pub read_ms: f64,
}

/// The parameter directory and the keys read from it.
#[derive(Debug)]
pub struct ParamsCache {
    dir: PathBuf,
    keys: Mutex<HashMap<String, LoadedKey>>,
}

impl ParamsCache {
    /// The parameters in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The directory filecoin-proofs uses: `FIL_PROOFS_PARAMETER_CACHE`, else its default.
    pub fn from_env() -> Self {
        Self::new(default_dir())
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of a file of the parameter set `id` (a compound proof's cache identifier).
    pub fn path(&self, id: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("v{VERSION}-{id}.{ext}"))
    }

    /// The proving key of the parameter set `id` (a compound proof's cache identifier) for a
    /// sector of `sector_size` bytes: resident, else read from its file, else (test sector
    /// sizes only) generated for `blank_circuit` and written first.
    pub fn key<C: bellperson::Circuit<Scalar>>(
        &self,
        id: String,
        sector_size: u64,
        blank_circuit: impl FnOnce() -> C,
    ) -> Result<LoadedKey, FilecoinError> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = keys.get(&id) {
            return Ok(LoadedKey {
                generated_ms: 0.0,
                read_ms: 0.0,
                ..k.clone()
            });
        }
        let path = self.path(&id, GROTH_PARAMETER_EXT);
        let mut generated_ms = 0.0;
        if !path.exists() {
            if !TEST_SECTOR_SIZES.contains(&sector_size) {
                return Err(FilecoinError::ParamsMissing {
                    path,
                    hint: "fetch the published parameters into this directory (paramfetch, or `curio fetch-params`); production sector sizes are never generated",
                });
            }
            let t = Instant::now();
            self.generate(&id, sector_size, blank_circuit)?;
            generated_ms = t.elapsed().as_secs_f64() * 1e3;
        }
        let t = Instant::now();
        let trust = published_trust(&path, sector_size)?;
        let read = match trust {
            Trust::PublishedDigest => zkpipe_pipeline::read_params_unchecked(&path),
            Trust::Checked => zkpipe_pipeline::read_params(&path),
        };
        let key = read.map_err(|source| FilecoinError::Params { source })?;
        let loaded = LoadedKey {
            key: Arc::new(key),
            path,
            trust,
            generated_ms,
            read_ms: t.elapsed().as_secs_f64() * 1e3,
        };
        tracing::info!(path = %loaded.path.display(), ?trust, read_ms = loaded.read_ms, "parameters read");
        keys.insert(id, loaded.clone());
        Ok(loaded)
    }

    /// Generates random parameters for `P`'s blank circuit, as filecoin-proofs' parameter
    /// cache does for test sizes, and writes the parameters, the verifying key and the
    /// metadata under their published names. A lock file keeps two processes from writing
    /// different parameters for one circuit.
    fn generate<C: bellperson::Circuit<Scalar>>(
        &self,
        id: &str,
        sector_size: u64,
        blank_circuit: impl FnOnce() -> C,
    ) -> Result<(), FilecoinError> {
        let io = |path: &Path, source| FilecoinError::ParamsIo {
            path: path.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let lock_path = self.path(id, "lock");
        let lock = File::create(&lock_path).map_err(|e| io(&lock_path, e))?;
        lock.lock_exclusive().map_err(|e| io(&lock_path, e))?;
        let params_path = self.path(id, GROTH_PARAMETER_EXT);
        if params_path.exists() {
            // Another process wrote them while this one waited for the lock.
            return Ok(());
        }
        tracing::warn!(path = %params_path.display(), "no parameter file: generating test parameters (not the trusted setup's)");
        let mut rng = rand::rngs::OsRng;
        let params = groth16::generate_random_parameters::<Bls12, _, _>(blank_circuit(), &mut rng)
        .map_err(|source| FilecoinError::ParamsGenerate {
            id: id.to_string(),
            source,
        })?;
        let vk_path = self.path(id, VERIFYING_KEY_EXT);
        write_atomically(&vk_path, |w| params.vk.write(w)).map_err(|e| io(&vk_path, e))?;
        let meta_path = self.path(id, PARAMETER_METADATA_EXT);
        let meta = CacheEntryMetadata { sector_size };
        write_atomically(&meta_path, |w| {
            serde_json::to_writer(&mut *w, &meta).map_err(std::io::Error::other)
        })
        .map_err(|e| io(&meta_path, e))?;
        // The parameters last: their presence says the set is complete.
        write_atomically(&params_path, |w| params.write(w)).map_err(|e| io(&params_path, e))?;
        // The lock is released when `lock` is dropped.
        drop(lock);
        Ok(())
    }
}

/// `FIL_PROOFS_PARAMETER_CACHE`, else filecoin-proofs' default directory.
pub fn default_dir() -> PathBuf {
    std::env::var_os(PARAMETER_CACHE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PARAMETER_CACHE))
}

/// Writes `path` through a temporary file renamed into place, so that no reader sees half a
/// file.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut w = BufWriter::new(File::create(&tmp)?);
    write(&mut w)?;
    w.flush()?;
    w.get_ref().sync_all()?;
    drop(w);
    std::fs::rename(&tmp, path)
}

/// How to trust the file at `path`: a file whose digest is the one the manifest publishes for
/// its name is read unchecked. Any other file is read with every point checked, except that a
/// production-size file (32 or 64 GiB sectors, never generated) must match its published
/// digest: a mismatch there is a damaged file.
fn published_trust(path: &Path, sector_size: u64) -> Result<Trust, FilecoinError> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(Trust::Checked);
    };
    let Some(published) = get_parameter_data_from_id(name) else {
        return Ok(Trust::Checked);
    };
    let digest = file_digest(path)?;
    if digest != published.digest && TEST_SECTOR_SIZES.contains(&sector_size) {
        tracing::info!(path = %path.display(), "test parameters other than the published ones: every point is checked");
        return Ok(Trust::Checked);
    }
    if digest != published.digest {
        return Err(FilecoinError::ParamsDamaged {
            path: path.to_path_buf(),
            expected: published.digest.clone(),
            got: digest,
        });
    }
    Ok(Trust::PublishedDigest)
}

/// filecoin-proofs' digest of a parameter file: BLAKE2b of its bytes, the first 32 hex digits.
pub fn file_digest(path: &Path) -> Result<String, FilecoinError> {
    let io = |source| FilecoinError::ParamsIo {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut state = blake2b_simd::Params::new().to_state();
    std::io::copy(&mut file, &mut state).map_err(io)?;
    Ok(state.finalize().to_hex()[..32].to_string())
}
