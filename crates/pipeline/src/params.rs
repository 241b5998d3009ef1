//! bellperson's parameter files (the layout `Parameters::write` produces) read straight into a
//! [`ProvingKey`]: each query's points go from a small read buffer into the key's own vectors,
//! which the engine later page-locks in place ([`crate::Engine::load_key`]), so a key never
//! needs a second copy of itself in memory.
//!
//! The layout: the verifying key (alpha_g1, beta_g1 uncompressed G1; beta_g2, gamma_g2 G2;
//! delta_g1 G1; delta_g2 G2; a big-endian u32 count, then that many ic points in G1), then h, l,
//! a and b_g1 (each a big-endian u32 count and that many uncompressed G1 points) and b_g2 (the
//! same in G2). As bellperson's reader does, no query point may be the identity.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use blstrs::{G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use group::UncompressedEncoding;
use rayon::prelude::*;

use crate::key::{check_verifying_key, KeyParts};
use crate::{ProveError, ProvingKey, VerifyingKey};

/// Points converted at a time: a read buffer of 6 MiB in G1, 12 MiB in G2.
const CHUNK_POINTS: usize = 1 << 16;

/// What is wrong with one point of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PointProblem {
    /// Not an uncompressed encoding: flag bits, or a coordinate not below p.
    Encoding,
    /// Its coordinates are not on the curve.
    NotOnCurve,
    /// On the curve, outside the prime-order subgroup.
    NotInSubgroup,
    /// The point at infinity, which no query holds.
    Identity,
}

impl std::fmt::Display for PointProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PointProblem::Encoding => "not an uncompressed point encoding",
            PointProblem::NotOnCurve => "not on the curve",
            PointProblem::NotInSubgroup => "not in the prime-order subgroup",
            PointProblem::Identity => "the point at infinity",
        })
    }
}

/// A parameter file that cannot be read into a key; each names the file and the byte offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsError {
    /// The file could not be opened or read.
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file ends inside a section.
    #[error("{path}: the file ends at byte {len}, inside {section} (which needs {needed} bytes from offset {offset}): truncated")]
    Truncated {
        path: PathBuf,
        section: &'static str,
        offset: u64,
        needed: u64,
        len: u64,
    },
    /// A count larger than what is left of the file.
    #[error("{path}: the count of {section} at offset {offset} says {count} points ({bytes} bytes), more than the {left} bytes after it")]
    Count {
        path: PathBuf,
        section: &'static str,
        offset: u64,
        count: u32,
        bytes: u64,
        left: u64,
    },
    /// A point that is not a valid point of its query.
    #[error("{path}: {section}[{index}] at offset {offset}: {problem}")]
    Point {
        path: PathBuf,
        section: &'static str,
        index: usize,
        offset: u64,
        problem: PointProblem,
    },
    /// Bytes after b_g2: a wrong count, or not a parameter file.
    #[error("{path}: {extra} bytes after the last section (from offset {offset}): a wrong count, or not a bellperson parameter file")]
    Trailing {
        path: PathBuf,
        offset: u64,
        extra: u64,
    },
    /// The points read make no proving key (a verifying key with delta at infinity, or
    /// queries whose lengths do not fit together).
    #[error("{path}: {source}")]
    Key {
        path: PathBuf,
        #[source]
        source: ProveError,
    },
}

/// Whether the points of the queries are checked as they are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// On the curve and in the subgroup (bellperson's `read(reader, true)`).
    Full,
    /// Only the encoding and the identity (bellperson's `read(reader, false)`): for files this
    /// process wrote or already checked.
    EncodingOnly,
}

/// Reads a parameter file, checking every point (on the curve, in the subgroup, not the
/// identity), as for a file from elsewhere.
pub fn read_params(path: impl AsRef<Path>) -> Result<ProvingKey, ParamsError> {
    read(path.as_ref(), Check::Full)
}

/// Reads a parameter file whose points are trusted (written by this host, or checked
/// before): only encodings and identities are checked, as bellperson's unchecked read does.
/// The verifying key is checked either way.
pub fn read_params_unchecked(path: impl AsRef<Path>) -> Result<ProvingKey, ParamsError> {
    read(path.as_ref(), Check::EncodingOnly)
}

/// A point type as the file holds it.
trait FilePoint: Copy + Send + Sync + PrimeCurveAffine + UncompressedEncoding {
    const BYTES: usize;
    fn on_curve(&self) -> bool;
    fn in_subgroup(&self) -> bool;
}

impl FilePoint for G1Affine {
    const BYTES: usize = 96;
    fn on_curve(&self) -> bool {
        self.is_on_curve().into()
    }
    fn in_subgroup(&self) -> bool {
        self.is_torsion_free().into()
    }
}

impl FilePoint for G2Affine {
    const BYTES: usize = 192;
    fn on_curve(&self) -> bool {
        self.is_on_curve().into()
    }
    fn in_subgroup(&self) -> bool {
        self.is_torsion_free().into()
    }
}

/// Decodes one point's bytes, as `check` asks.
fn decode<P: FilePoint>(bytes: &[u8], check: Check) -> Result<P, PointProblem> {
    // blst would read a set compression flag as a compressed point in the first half.
    if bytes[0] & 0x80 != 0 {
        return Err(PointProblem::Encoding);
    }
    let mut repr = P::Uncompressed::default();
    repr.as_mut().copy_from_slice(bytes);
    let p: P = Option::from(P::from_uncompressed_unchecked(&repr)).ok_or_else(|| refused(bytes))?;
    if bool::from(p.is_identity()) {
        return Err(PointProblem::Identity);
    }
    if check == Check::Full {
        if !p.on_curve() {
            return Err(PointProblem::NotOnCurve);
        }
        if !p.in_subgroup() {
            return Err(PointProblem::NotInSubgroup);
        }
    }
    Ok(p)
}

/// Why blst refused to decode a point (it checks the curve equation even unchecked): a
/// well-formed encoding (flag bits of an uncompressed point, every coordinate below p) is off
/// the curve; anything else is not an encoding.
fn refused(bytes: &[u8]) -> PointProblem {
    let flags = bytes[0] & 0xe0;
    let mut body = bytes.to_vec();
    body[0] &= 0x1f;
    let canonical = body.chunks(48).all(|c| {
        let c: [u8; 48] = c.try_into().unwrap_or([0xff; 48]);
        bool::from(blstrs::Fp::from_bytes_be(&c).is_some())
    });
    match (flags, canonical) {
        (0, true) => PointProblem::NotOnCurve,
        _ => PointProblem::Encoding,
    }
}

/// The file, read front to back with the offset and length at hand for messages.
struct Reader {
    path: PathBuf,
    file: File,
    offset: u64,
    len: u64,
}

impl Reader {
    fn io(&self, source: std::io::Error) -> ParamsError {
        ParamsError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Fills `buf` from the file, or says which section the file ends in.
    fn exact(&mut self, section: &'static str, buf: &mut [u8]) -> Result<(), ParamsError> {
        let needed = buf.len() as u64;
        if self.len - self.offset < needed {
            return Err(ParamsError::Truncated {
                path: self.path.clone(),
                section,
                offset: self.offset,
                needed,
                len: self.len,
            });
        }
        self.file.read_exact(buf).map_err(|e| self.io(e))?;
        self.offset += needed;
        Ok(())
    }

    /// One vk point (always fully checked, as bellperson's verifying-key reader does; the
    /// identity is left to the key's own checks).
    fn vk_point<P: FilePoint>(&mut self, section: &'static str) -> Result<P, ParamsError> {
        let offset = self.offset;
        let mut bytes = vec![0u8; P::BYTES];
        self.exact(section, &mut bytes)?;
        match decode::<P>(&bytes, Check::Full) {
            Ok(p) => Ok(p),
            Err(PointProblem::Identity) => Ok(P::identity()),
            Err(problem) => Err(ParamsError::Point {
                path: self.path.clone(),
                section,
                index: 0,
                offset,
                problem,
            }),
        }
    }

    /// A count, checked against what is left of the file before anything is allocated.
    fn count(&mut self, section: &'static str, point_bytes: usize) -> Result<usize, ParamsError> {
        let offset = self.offset;
        let mut raw = [0u8; 4];
        self.exact(section, &mut raw)?;
        let count = u32::from_be_bytes(raw);
        let bytes = u64::from(count) * point_bytes as u64;
        let left = self.len - self.offset;
        if bytes > left {
            return Err(ParamsError::Count {
                path: self.path.clone(),
                section,
                offset,
                count,
                bytes,
                left,
            });
        }
        Ok(count as usize)
    }

    /// A query: its count, then its points, converted a chunk at a time straight into the
    /// vector the key keeps.
    fn query<P: FilePoint>(
        &mut self,
        section: &'static str,
        check: Check,
    ) -> Result<Vec<P>, ParamsError> {
        let n = self.count(section, P::BYTES)?;
        let mut out = vec![P::identity(); n];
        let mut buf = vec![0u8; CHUNK_POINTS.min(n.max(1)) * P::BYTES];
        for (c, dst) in out.chunks_mut(CHUNK_POINTS).enumerate() {
            let start = self.offset;
            let bytes = &mut buf[..dst.len() * P::BYTES];
            self.exact(section, bytes)?;
            let first_bad = dst
                .par_iter_mut()
                .zip(bytes.par_chunks(P::BYTES))
                .enumerate()
                .filter_map(|(i, (d, b))| match decode::<P>(b, check) {
                    Ok(p) => {
                        *d = p;
                        None
                    }
                    Err(problem) => Some((i, problem)),
                })
                .min_by_key(|(i, _)| *i);
            if let Some((i, problem)) = first_bad {
                return Err(ParamsError::Point {
                    path: self.path.clone(),
                    section,
                    index: c * CHUNK_POINTS + i,
                    offset: start + (i * P::BYTES) as u64,
                    problem,
                });
            }
        }
        Ok(out)
    }
}

fn read(path: &Path, check: Check) -> Result<ProvingKey, ParamsError> {
    let io = |source| ParamsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut r = Reader {
        path: path.to_path_buf(),
        file,
        offset: 0,
        len,
    };
    let alpha_g1 = r.vk_point::<G1Affine>("vk.alpha_g1")?;
    let beta_g1 = r.vk_point::<G1Affine>("vk.beta_g1")?;
    let beta_g2 = r.vk_point::<G2Affine>("vk.beta_g2")?;
    let gamma_g2 = r.vk_point::<G2Affine>("vk.gamma_g2")?;
    let delta_g1 = r.vk_point::<G1Affine>("vk.delta_g1")?;
    let delta_g2 = r.vk_point::<G2Affine>("vk.delta_g2")?;
    // bellperson checks ic fully whatever it is asked.
    let ic = r.query::<G1Affine>("vk.ic", Check::Full)?;
    let vk = VerifyingKey {
        alpha_g1,
        beta_g1,
        beta_g2,
        gamma_g2,
        delta_g1,
        delta_g2,
        ic,
    };
    let key_err = |source| ParamsError::Key {
        path: path.to_path_buf(),
        source,
    };
    check_verifying_key(&vk).map_err(key_err)?;
    let h = r.query::<G1Affine>("h", check)?;
    let l = r.query::<G1Affine>("l", check)?;
    let a = r.query::<G1Affine>("a", check)?;
    let b_g1 = r.query::<G1Affine>("b_g1", check)?;
    let b_g2 = r.query::<G2Affine>("b_g2", check)?;
    if r.offset != r.len {
        return Err(ParamsError::Trailing {
            path: path.to_path_buf(),
            offset: r.offset,
            extra: r.len - r.offset,
        });
    }
    // Every point was checked above as `check` asked; the key checks the shapes.
    ProvingKey::new_unchecked(KeyParts {
        vk,
        h,
        l,
        a,
        b_g1,
        b_g2,
    })
    .map_err(key_err)
}
