//! A recording on disk, beside the parameters it belongs to:
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | magic `ZKR1CS\0\0` |
//! | 4, 4 | format version, length of the circuit id |
//! | 7 × 8 | inputs, aux, constraints, table length, nonzeros of A, B, C |
//! | id, padded to 8 | the circuit id (UTF-8) |
//! | 32 × table | the coefficients, canonical little-endian |
//! | per matrix | row starts (u32 × (constraints + 1)), columns (u32 × nonzeros), coefficient indices (u32 × nonzeros) |
//! | 32 | BLAKE3 of everything before |
//!
//! Numbers are little-endian. A file is written to a temporary name and renamed, so a path
//! never holds half a recording. Reading maps the file read-only (the matrices are used where
//! they lie in the page cache) and checks, in order: the magic, the version, the
//! length the header implies, the checksum, then every value (canonical coefficients, rows
//! in order, columns and coefficient indices in range), so that a recording read is one
//! that evaluates without a bound error; then the circuit id the caller expects.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blstrs::Scalar;
use ff::PrimeField;
use rayon::prelude::*;

use zkpipe_pinned::PinnableMap;

use crate::array::MappedArray;
use crate::{CircuitId, Digest, Matrix, Recording, RecordingError, Shape};

#[cfg(target_endian = "big")]
compile_error!("recordings are read and written as little-endian memory");

/// The first bytes of every recording.
pub const MAGIC: [u8; 8] = *b"ZKR1CS\0\0";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// Header fields after the magic, the version and the id length.
const COUNTS: usize = 7;
const HEADER: usize = 8 + 4 + 4 + 8 * COUNTS;
/// The longest circuit id a file may carry.
const MAX_ID: usize = 4096;

/// Writes `rec` to `path` (through a temporary file beside it, renamed when complete).
pub fn save(rec: &Recording, path: &Path) -> Result<(), RecordingError> {
    let io = |source| RecordingError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = temporary(path);
    let file = File::create(&tmp).map_err(io)?;
    let mut w = Hashed::new(BufWriter::with_capacity(1 << 22, file));
    let write = (|| -> std::io::Result<()> {
        for_each_part(rec, |bytes| w.put(bytes))?;
        let (mut inner, digest) = w.finish();
        inner.write_all(digest.as_bytes())?;
        inner.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    if let Err(e) = write {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    std::fs::rename(&tmp, path).map_err(io)
}

/// Hands `f` the file form of `rec` but its checksum, part by part, in order.
fn for_each_part(
    rec: &Recording,
    mut f: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let id = rec.id.0.as_bytes();
    f(&MAGIC)?;
    f(&VERSION.to_le_bytes())?;
    f(&(id.len() as u32).to_le_bytes())?;
    let shape = rec.shape;
    let counts = [
        shape.inputs,
        shape.aux,
        shape.constraints,
        rec.table.len(),
        rec.a.nonzeros(),
        rec.b.nonzeros(),
        rec.c.nonzeros(),
    ];
    for c in counts {
        f(&(c as u64).to_le_bytes())?;
    }
    f(id)?;
    f(&[0u8; 8][..padding(id.len())])?;
    for c in &rec.table {
        f(&c.to_repr())?;
    }
    for m in [&rec.a, &rec.b, &rec.c] {
        for part in [&m.starts, &m.columns, &m.coefficients] {
            f(bytemuck::cast_slice(part))?;
        }
    }
    Ok(())
}

/// The checksum a file of `rec` carries (BLAKE3 of all before it), on all cores.
pub(crate) fn digest(rec: &Recording) -> Digest {
    let mut hasher = blake3::Hasher::new();
    let hashed = for_each_part(rec, |bytes| {
        hasher.update_rayon(bytes);
        Ok(())
    });
    debug_assert!(hashed.is_ok(), "hashing into memory cannot fail");
    Digest(*hasher.finalize().as_bytes())
}

/// Reads the recording at `path`, every part checked, and refuses it unless it was made
/// from the circuit `expected`.
pub fn load(path: &Path, expected: &CircuitId) -> Result<Recording, RecordingError> {
    let rec = read(path)?;
    rec.check_id(expected)?;
    Ok(rec)
}

/// Reads the recording at `path`, every part checked, whatever circuit it is of. The file is
/// mapped read-only: the matrices are read where they lie in the page cache (shared with
/// every process reading the same file, and no copy of this process's own), after the
/// checksum and every value were checked.
pub fn read(path: &Path) -> Result<Recording, RecordingError> {
    let p = || path.to_path_buf();
    let io = |source| RecordingError::Io { path: p(), source };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let truncated = |needed: u64| RecordingError::Truncated {
        path: p(),
        needed,
        got: len,
    };
    if len < HEADER as u64 {
        return Err(match len >= 8 && !starts_with_magic(path) {
            true => RecordingError::NotARecording { path: p() },
            false => truncated(HEADER as u64),
        });
    }
    let map = Arc::new(PinnableMap::open(&file).map_err(io)?);
    let bytes = map.bytes();
    if bytes.len() as u64 != len {
        return Err(io(std::io::Error::other(
            "the file changed length while mapped",
        )));
    }
    let head = &bytes[..HEADER];
    if head[..8] != MAGIC {
        return Err(RecordingError::NotARecording { path: p() });
    }
    let word = |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let version = word(8);
    if version != VERSION {
        return Err(RecordingError::Version {
            path: p(),
            found: version,
            supported: VERSION,
        });
    }
    let id_len = word(12) as usize;
    let mut counts = [0u64; COUNTS];
    for (i, c) in counts.iter_mut().enumerate() {
        let at = 16 + 8 * i;
        *c = u64::from_le_bytes(head[at..at + 8].try_into().unwrap_or_default());
    }
    let [inputs, aux, constraints, table_len, nnz_a, nnz_b, nnz_c] = counts;
    let corrupt = |what: String| RecordingError::Corrupt { path: p(), what };
    if id_len > MAX_ID {
        return Err(corrupt(format!("a circuit id of {id_len} bytes")));
    }
    let needed = expected_len(id_len, counts)
        .ok_or_else(|| corrupt(format!("the header's counts overflow: {counts:?}")))?;
    if len != needed {
        return Err(match len < needed {
            true => truncated(needed),
            false => corrupt(format!("{len} bytes where the header implies {needed}")),
        });
    }
    // The length is the header's: every offset below lies within the file.
    let body = bytes.len() - 32;
    let mut hasher = blake3::Hasher::new();
    hasher.update_rayon(&bytes[..body]);
    let checksum = *hasher.finalize().as_bytes();
    if checksum[..] != bytes[body..] {
        return Err(RecordingError::Checksum { path: p() });
    }
    let mut at = HEADER;
    let id = String::from_utf8(bytes[at..at + id_len].to_vec())
        .map_err(|_| corrupt("a circuit id that is not UTF-8".into()))?;
    at += id_len + padding(id_len);
    let table = bytes[at..at + 32 * table_len as usize]
        .par_chunks_exact(32)
        .map(|r| {
            let repr: [u8; 32] = r.try_into().unwrap_or_default();
            Option::<Scalar>::from(Scalar::from_repr(repr))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| corrupt("a coefficient that is not a canonical scalar".into()))?;
    at += 32 * table_len as usize;
    let mut array = |n: u64| -> Result<MappedArray, RecordingError> {
        let a = MappedArray::new(&map, at, n as usize)
            .ok_or_else(|| corrupt(format!("an array of {n} values at byte {at}")))?;
        at += 4 * n as usize;
        Ok(a)
    };
    let mut matrices = Vec::with_capacity(3);
    for nnz in [nnz_a, nnz_b, nnz_c] {
        let (starts, columns) = (array(constraints + 1)?, array(nnz)?);
        matrices.push(Matrix::from_mapped(starts, columns, array(nnz)?));
    }
    let shape = Shape {
        inputs: inputs as usize,
        aux: aux as usize,
        constraints: constraints as usize,
    };
    let matrices: [Matrix; 3] = matrices
        .try_into()
        .map_err(|_| corrupt("not three matrices".into()))?;
    Recording::from_parts(CircuitId(id), shape, table, matrices)
        .map(|rec| rec.with_digest(Digest(checksum)))
        .map_err(|e| match e {
            RecordingError::Inconsistent { what } => corrupt(what),
            e => e,
        })
}

/// The file length a header implies, or `None` when it overflows.
fn expected_len(id_len: usize, counts: [u64; COUNTS]) -> Option<u64> {
    let [_, _, constraints, table, a, b, c] = counts;
    let mut n = (HEADER + id_len + padding(id_len)) as u64;
    n = n.checked_add(table.checked_mul(32)?)?;
    for nnz in [a, b, c] {
        let words = constraints
            .checked_add(1)?
            .checked_add(nnz.checked_mul(2)?)?;
        n = n.checked_add(words.checked_mul(4)?)?;
    }
    n.checked_add(32)
}

/// Zero bytes after an id of `len` bytes, so that what follows starts 8-aligned.
fn padding(len: usize) -> usize {
    (8 - len % 8) % 8
}

fn starts_with_magic(path: &Path) -> bool {
    let mut m = [0u8; 8];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut m))
        .is_ok_and(|()| m == MAGIC)
}

/// `path` with `.tmp` added.
fn temporary(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// A writer that hashes what passes through it.
struct Hashed<T> {
    inner: T,
    hasher: blake3::Hasher,
}

impl<T> Hashed<T> {
    fn new(inner: T) -> Self {
        Self {
            inner,
            hasher: blake3::Hasher::new(),
        }
    }

    fn finish(self) -> (T, blake3::Hash) {
        (self.inner, self.hasher.finalize())
    }
}

impl<W: Write> Hashed<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hasher.update(bytes);
        self.inner.write_all(bytes)
    }
}
