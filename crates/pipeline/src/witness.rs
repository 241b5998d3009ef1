//! A synthesized circuit: what a job proves.

use blstrs::Scalar;
use rayon::prelude::*;
use zkpipe_field::{cast, Fr};
use zkpipe_msm::Density;
use zkpipe_pinned::PooledBuffer;

use crate::{ProveError, ProvingKey};

/// Evaluations of one of the A, B, C polynomials at each constraint.
#[derive(Debug)]
pub enum Evaluations {
    /// In the caller's memory: staged through the engine's pinned pool.
    Pageable(Vec<Scalar>),
    /// In page-locked memory lent by the engine ([`crate::Engine::lend_evaluations`]):
    /// uploaded by DMA with no staging copy, and back in the engine's pool once uploaded.
    Pinned(PinnedEvaluations),
}

impl Default for Evaluations {
    fn default() -> Self {
        Evaluations::Pageable(Vec::new())
    }
}

impl From<Vec<Scalar>> for Evaluations {
    fn from(v: Vec<Scalar>) -> Self {
        Evaluations::Pageable(v)
    }
}

/// A copy is always pageable: lent memory is not duplicated.
impl Clone for Evaluations {
    fn clone(&self) -> Self {
        Evaluations::Pageable(self.to_vec())
    }
}

impl Evaluations {
    /// Number of evaluations.
    pub fn len(&self) -> usize {
        self.as_fr().len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The evaluations in the device layout.
    pub fn as_fr(&self) -> &[Fr] {
        match self {
            Evaluations::Pageable(v) => cast::scalars_as_fr(v),
            Evaluations::Pinned(p) => p.as_fr(),
        }
    }

    /// Appends one evaluation (an error when lent memory is full).
    pub fn push(&mut self, s: Scalar) -> Result<(), ProveError> {
        match self {
            Evaluations::Pageable(v) => {
                v.push(s);
                Ok(())
            }
            Evaluations::Pinned(p) => p.push(s),
        }
    }

    /// Appends evaluations (an error when lent memory is full).
    pub fn extend_from_slice(&mut self, s: &[Scalar]) -> Result<(), ProveError> {
        match self {
            Evaluations::Pageable(v) => {
                v.extend_from_slice(s);
                Ok(())
            }
            Evaluations::Pinned(p) => p.extend_from_slice(s),
        }
    }

    /// Removes the last evaluation.
    pub fn pop(&mut self) -> Option<Scalar> {
        match self {
            Evaluations::Pageable(v) => v.pop(),
            Evaluations::Pinned(p) => p.pop(),
        }
    }

    /// The evaluations as blstrs values (a copy).
    pub fn to_vec(&self) -> Vec<Scalar> {
        match self {
            Evaluations::Pageable(v) => v.clone(),
            Evaluations::Pinned(p) => p.as_fr().par_iter().map(|f| Scalar::from(*f)).collect(),
        }
    }

    /// The evaluations as a vector (lent memory is copied out and given back).
    pub fn into_vec(self) -> Vec<Scalar> {
        match self {
            Evaluations::Pageable(v) => v,
            Evaluations::Pinned(p) => Evaluations::Pinned(p).to_vec(),
        }
    }
}

/// Page-locked room for the evaluations of one polynomial, lent by the engine: up to the key's
/// domain size, filled by synthesis.
#[derive(Debug)]
pub struct PinnedEvaluations {
    buf: PooledBuffer<Fr>,
    len: usize,
}

impl PinnedEvaluations {
    pub(crate) fn new(buf: PooledBuffer<Fr>) -> Self {
        Self { buf, len: 0 }
    }

    /// Evaluations it can hold.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// The evaluations written so far.
    pub fn as_fr(&self) -> &[Fr] {
        &self.buf[..self.len]
    }

    /// Appends one evaluation; an error when full (more constraints than the domain holds).
    pub fn push(&mut self, s: Scalar) -> Result<(), ProveError> {
        self.extend_from_slice(std::slice::from_ref(&s))
    }

    /// Appends evaluations (copied by many threads when there are many).
    pub fn extend_from_slice(&mut self, s: &[Scalar]) -> Result<(), ProveError> {
        let end = self.len + s.len();
        if end > self.capacity() {
            return Err(ProveError::Constraints {
                constraints: end,
                domain: self.capacity(),
            });
        }
        self.buf[self.len..end]
            .par_chunks_mut(1 << 16)
            .zip(cast::scalars_as_fr(s).par_chunks(1 << 16))
            .for_each(|(d, s)| d.copy_from_slice(s));
        self.len = end;
        Ok(())
    }

    /// Removes the last evaluation.
    pub fn pop(&mut self) -> Option<Scalar> {
        let last = self.as_fr().last().copied()?;
        self.len -= 1;
        Some(Scalar::from(last))
    }

    /// The whole buffer, padded with zeros from the evaluations' end: the H step's input.
    pub(crate) fn padded(mut self) -> PooledBuffer<Fr> {
        let len = self.len;
        self.buf[len..]
            .par_chunks_mut(1 << 16)
            .for_each(|c| c.fill(Fr::default()));
        self.buf
    }
}

/// The synthesized circuit of one proof (bellperson's `ProvingAssignment`): the evaluations
/// of the A, B and C polynomials at each constraint (input constraints included), the
/// assignment, and which variables occur in A and B.
#[derive(Debug, Clone, Default)]
pub struct Witness {
    /// A(x) at each constraint; padded with zeros to the key's domain size by the prover.
    pub a: Evaluations,
    /// B(x) at each constraint.
    pub b: Evaluations,
    /// C(x) at each constraint.
    pub c: Evaluations,
    /// Public inputs, the constant one first.
    pub input: Vec<Scalar>,
    /// Private (aux) variables.
    pub aux: Vec<Scalar>,
    /// Aux variables that occur in some A combination.
    pub a_aux_density: Density,
    /// Inputs that occur in some B combination.
    pub b_input_density: Density,
    /// Aux variables that occur in some B combination.
    pub b_aux_density: Density,
}

fn shape(what: &'static str, expected: usize, got: usize) -> Result<(), ProveError> {
    if expected != got {
        return Err(ProveError::Shape {
            what,
            expected,
            got,
        });
    }
    Ok(())
}

impl Witness {
    /// Checks every length against the key; the error names what differs and by how much.
    pub fn check(&self, key: &ProvingKey) -> Result<(), ProveError> {
        let n = key.domain_size();
        shape("b evaluations (as many as a)", self.a.len(), self.b.len())?;
        shape("c evaluations (as many as a)", self.a.len(), self.c.len())?;
        if self.a.len() > n || (n > 1 && self.a.len() <= n / 2) {
            return Err(ProveError::Constraints {
                constraints: self.a.len(),
                domain: n,
            });
        }
        shape("public inputs", key.num_inputs(), self.input.len())?;
        shape("aux variables", key.num_aux(), self.aux.len())?;
        shape(
            "A aux density bitmap",
            self.aux.len(),
            self.a_aux_density.len(),
        )?;
        shape(
            "B input density bitmap",
            self.input.len(),
            self.b_input_density.len(),
        )?;
        shape(
            "B aux density bitmap",
            self.aux.len(),
            self.b_aux_density.len(),
        )?;
        let [_, _, a, b1, _] = key.query_lens();
        shape(
            "a query points (inputs + A-selected aux)",
            self.input.len() + self.a_aux_density.selected(),
            a,
        )?;
        shape(
            "b query points (B-selected inputs + aux)",
            self.b_input_density.selected() + self.b_aux_density.selected(),
            b1,
        )?;
        Ok(())
    }

    /// Number of constraints (input constraints included).
    pub fn constraints(&self) -> usize {
        self.a.len()
    }
}
