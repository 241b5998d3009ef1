//! zkpipe-r1cs: a circuit's constraints recorded once, and each proof's A, B and C evaluations
//! computed from its witness alone.
//!
//! A Groth16 prover needs, at every constraint i, a_i = ⟨A_i, z⟩, b_i = ⟨B_i, z⟩ and
//! c_i = ⟨C_i, z⟩, where z = (inputs, aux) is the witness. Synthesis in bellperson's manner
//! builds every linear combination of every constraint again for each proof. A [`Recording`]
//! holds A, B and C once, as sparse rows over z whose coefficients are kept once in a small
//! table and referenced by index (almost every coefficient of a real circuit is ±1 or small),
//! so that a proof needs only its witness.
//!
//! - [`RecordingBuilder`]: the constraints in, as a constraint system produces them.
//! - [`Recording::evaluate`]: a, b and c from a witness, on every core;
//!   [`CudaEvaluator`]: the same on the device, from a [`DeviceRecording`] and the witness
//!   already uploaded, into the device buffers the H step reads.
//! - [`Recording::densities`]: the variables that the MSMs' queries take.
//! - [`file`](mod@file): a recording saved next to the parameters, with a versioned header and a
//!   checksum, and read back memory-mapped and checked (a damaged or foreign file is an error,
//!   never a wrong a, b or c).

mod array;
mod build;
mod device;
mod error;
mod eval;
pub mod file;
mod kernels;

use std::sync::Arc;

use blstrs::Scalar;
use zkpipe_cuda::Context;
use zkpipe_msm::Density;
use zkpipe_pinned::PinnableVec;

use crate::array::{Array, MappedArray};

pub use build::{RecordingBuilder, Variable};
pub use device::{
    CudaEvaluator, DeviceRecording, DeviceSplitZ, DeviceTailLookup, DeviceZ, StreamedRecording,
    TailLookup,
};
pub use error::RecordingError;
pub use eval::{Assignment, Evaluations, Part};

/// Names a circuit shape and its version: a recording is used only for the circuit it was
/// made from (for example `filecoin-porep-32GiB@<parameter file digest>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CircuitId(pub String);

impl std::fmt::Display for CircuitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How many variables and constraints a circuit has. Inputs count the constant one (input
/// 0), and constraints count the `input · 1 = 0` constraint each input gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    pub inputs: usize,
    pub aux: usize,
    pub constraints: usize,
}

impl Shape {
    /// The length of z = (inputs, aux).
    pub fn variables(&self) -> usize {
        self.inputs + self.aux
    }
}

/// One of the three matrices, row by row: row i's entries are `starts[i]..starts[i + 1]`,
/// each a column of z (inputs first, then aux) and an index into the coefficient table. The
/// arrays never change once made, and can be page-locked in place ([`Matrix::pin`]) so that
/// a device streaming them copies at the link's rate.
#[derive(Debug, Clone)]
pub struct Matrix {
    starts: Array,
    columns: Array,
    coefficients: Array,
}

impl PartialEq for Matrix {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Matrix {}

impl Default for Matrix {
    fn default() -> Self {
        Self::from_arrays(Vec::new(), Vec::new(), Vec::new())
    }
}

/// One row of a matrix: parallel slices of columns and coefficient indices.
#[derive(Debug, Clone, Copy)]
pub struct Row<'m> {
    pub columns: &'m [u32],
    pub coefficients: &'m [u32],
}

impl Matrix {
    /// A matrix from its arrays: row i's entries are `starts[i]..starts[i + 1]` of
    /// `columns` and `coefficients`. Checked when it joins a recording
    /// ([`Recording::from_parts`]).
    pub fn from_arrays(starts: Vec<u32>, columns: Vec<u32>, coefficients: Vec<u32>) -> Self {
        Self {
            starts: Array::Owned(PinnableVec::new(starts)),
            columns: Array::Owned(PinnableVec::new(columns)),
            coefficients: Array::Owned(PinnableVec::new(coefficients)),
        }
    }

    /// A matrix whose arrays lie in a mapped recording file.
    pub(crate) fn from_mapped(
        starts: MappedArray,
        columns: MappedArray,
        coefficients: MappedArray,
    ) -> Self {
        Self {
            starts: Array::Mapped(starts),
            columns: Array::Mapped(columns),
            coefficients: Array::Mapped(coefficients),
        }
    }

    /// True when its arrays lie in a mapped recording file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.starts, Array::Mapped(_))
    }

    /// Page-locks the arrays in place, once (about 60 ms a GiB); true when this call did.
    pub fn pin(&self, ctx: &Arc<Context>) -> Result<bool, zkpipe_pinned::Error> {
        let mut pinned = false;
        for v in [&self.starts, &self.columns, &self.coefficients] {
            pinned |= v.pin(ctx)?;
        }
        Ok(pinned)
    }

    /// True once every array is page-locked (an empty one needs not be).
    pub fn is_pinned(&self) -> bool {
        [&self.starts, &self.columns, &self.coefficients]
            .iter()
            .all(|v| v.is_empty() || v.is_pinned())
    }

    /// The number of rows (constraints).
    pub fn rows(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// The number of stored entries (no entry has a zero coefficient).
    pub fn nonzeros(&self) -> usize {
        self.columns.len()
    }

    /// Row `i` (which must be below [`Matrix::rows`]).
    pub fn row(&self, i: usize) -> Row<'_> {
        let (lo, hi) = (self.starts[i] as usize, self.starts[i + 1] as usize);
        Row {
            columns: &self.columns[lo..hi],
            coefficients: &self.coefficients[lo..hi],
        }
    }

    /// The most entries a row has.
    pub fn longest_row(&self) -> usize {
        use rayon::prelude::*;
        self.starts
            .par_windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// The row offsets, the columns and the coefficient indices, for a device upload.
    pub fn parts(&self) -> MatrixParts<'_> {
        MatrixParts {
            starts: &self.starts,
            columns: &self.columns,
            coefficients: &self.coefficients,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        4 * (self.starts.len() + self.columns.len() + self.coefficients.len())
    }
}

/// A matrix's arrays as they are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixParts<'m> {
    pub starts: &'m [u32],
    pub columns: &'m [u32],
    pub coefficients: &'m [u32],
}

/// Which variables the MSM queries take: those that occur in some A (aux) or B (inputs and
/// aux) combination with a non-zero coefficient, as a prover in bellperson's manner finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Densities {
    pub a_aux: Density,
    pub b_input: Density,
    pub b_aux: Density,
}

/// A circuit's A, B and C recorded once.
#[derive(Debug, Clone)]
pub struct Recording {
    id: CircuitId,
    shape: Shape,
    table: Vec<Scalar>,
    a: Matrix,
    b: Matrix,
    c: Matrix,
    densities: Densities,
    longest_row: usize,
    /// The BLAKE3 digest of its file form ([`file`]), made once when first asked for (known
    /// when read from a file: the file's checksum).
    digest: std::sync::OnceLock<Digest>,
}

/// A recording's content digest: equal digests, equal recordings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Indices of the coefficients every table starts with: evaluation adds or subtracts where
/// it finds them instead of multiplying.
pub const ONE: u32 = 0;
pub const MINUS_ONE: u32 = 1;

impl Recording {
    /// The circuit it was made from.
    pub fn id(&self) -> &CircuitId {
        &self.id
    }

    /// Its variables and constraints.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The distinct coefficients, [`ONE`] and [`MINUS_ONE`] first.
    pub fn table(&self) -> &[Scalar] {
        &self.table
    }

    /// A, B and C.
    pub fn matrices(&self) -> [&Matrix; 3] {
        [&self.a, &self.b, &self.c]
    }

    /// The variables the MSMs take.
    pub fn densities(&self) -> &Densities {
        &self.densities
    }

    /// The most entries a row of any matrix has.
    pub fn longest_row(&self) -> usize {
        self.longest_row
    }

    /// Page-locks the matrices in place, once, for devices that stream them; true when this
    /// call did.
    pub fn pin(&self, ctx: &Arc<Context>) -> Result<bool, RecordingError> {
        let mut pinned = false;
        for m in self.matrices() {
            pinned |= m.pin(ctx).map_err(RecordingError::Pin)?;
        }
        Ok(pinned)
    }

    /// True once every matrix is page-locked.
    pub fn is_pinned(&self) -> bool {
        self.matrices().iter().all(|m| m.is_pinned())
    }

    /// True when the matrices lie in a mapped recording file ([`file::read`]): their bytes are
    /// the page cache's, not this process's own.
    pub fn is_mapped(&self) -> bool {
        self.a.is_mapped()
    }

    /// Bytes held by the matrices and the table (the densities aside).
    pub fn bytes(&self) -> usize {
        self.a.bytes() + self.b.bytes() + self.c.bytes() + 32 * self.table.len()
    }

    /// Refuses a recording of another circuit, naming both.
    pub fn check_id(&self, expected: &CircuitId) -> Result<(), RecordingError> {
        if &self.id != expected {
            return Err(RecordingError::OtherCircuit {
                expected: expected.clone(),
                found: self.id.clone(),
            });
        }
        Ok(())
    }

    /// A recording from its parts (another tool's, or a synthetic shape for a benchmark),
    /// checked as a file's are: the table canonical with 1 and -1 first, every matrix with
    /// one row a constraint, its rows in order, its columns and coefficient indices in range.
    pub fn from_parts(
        id: CircuitId,
        shape: Shape,
        table: Vec<Scalar>,
        matrices: [Matrix; 3],
    ) -> Result<Self, RecordingError> {
        check_parts(shape, &table, &matrices)
            .map_err(|what| RecordingError::Inconsistent { what })?;
        Ok(Self::from_checked(id, shape, table, matrices))
    }

    /// Assembles a recording from parts that have been checked ([`build`] and [`file`]).
    fn from_checked(
        id: CircuitId,
        shape: Shape,
        table: Vec<Scalar>,
        [a, b, c]: [Matrix; 3],
    ) -> Self {
        let densities = densities(shape, &a, &b);
        let longest_row = [&a, &b, &c]
            .iter()
            .map(|m| m.longest_row())
            .max()
            .unwrap_or(0);
        Self {
            id,
            shape,
            table,
            a,
            b,
            c,
            densities,
            longest_row,
            digest: std::sync::OnceLock::new(),
        }
    }

    /// The BLAKE3 digest of the recording's file form (all of it: id, shape, coefficients and
    /// matrices), which a file read stores as its checksum. Made on all cores the first time
    /// (about 1 s for a 32 GiB PoRep's 6.84 GiB), then kept. Two recordings with one id may
    /// differ (a circuit changed without a new name); two with one digest do not.
    pub fn digest(&self) -> Digest {
        *self.digest.get_or_init(|| file::digest(self))
    }

    /// Sets the digest a file read has checked.
    fn with_digest(self, digest: Digest) -> Self {
        let _ = self.digest.set(digest);
        self
    }
}

/// Why the parts of a recording do not make one, or `Ok`.
fn check_parts(shape: Shape, table: &[Scalar], matrices: &[Matrix; 3]) -> Result<(), String> {
    use ff::Field;
    use rayon::prelude::*;
    if table.get(ONE as usize) != Some(&Scalar::ONE)
        || table.get(MINUS_ONE as usize) != Some(&-Scalar::ONE)
    {
        return Err("the coefficient table does not start with 1 and -1".into());
    }
    let vars = shape.variables();
    for (m, name) in matrices.iter().zip(["A", "B", "C"]) {
        let nnz = m.columns.len();
        let bad = |what: String| Err(format!("{name}: {what}"));
        if m.rows() != shape.constraints || m.coefficients.len() != nnz {
            return bad(format!(
                "{} rows and {} coefficients for {} constraints and {nnz} columns",
                m.rows(),
                m.coefficients.len(),
                shape.constraints
            ));
        }
        if m.starts.first() != Some(&0) || m.starts.last().map(|&s| s as usize) != Some(nnz) {
            return bad(format!("row starts do not run from 0 to its {nnz} entries"));
        }
        if m.starts.par_windows(2).any(|w| w[0] > w[1]) {
            return bad("row starts out of order".into());
        }
        if let Some(c) = m.columns.par_iter().find_any(|&&c| c as usize >= vars) {
            return bad(format!("column {c} of {vars} variables"));
        }
        let n = table.len();
        if let Some(k) = m.coefficients.par_iter().find_any(|&&k| k as usize >= n) {
            return bad(format!("coefficient index {k} of a table of {n}"));
        }
    }
    Ok(())
}

/// The densities of A (aux) and B (inputs and aux).
fn densities(shape: Shape, a: &Matrix, b: &Matrix) -> Densities {
    let inputs = shape.inputs as u32;
    let mut a_aux = vec![false; shape.aux];
    for &col in a.columns.iter() {
        if col >= inputs {
            a_aux[(col - inputs) as usize] = true;
        }
    }
    let mut b_input = vec![false; shape.inputs];
    let mut b_aux = vec![false; shape.aux];
    for &col in b.columns.iter() {
        match col.checked_sub(inputs) {
            Some(aux) => b_aux[aux as usize] = true,
            None => b_input[col as usize] = true,
        }
    }
    Densities {
        a_aux: Density::from_bools(a_aux),
        b_input: Density::from_bools(b_input),
        b_aux: Density::from_bools(b_aux),
    }
}
