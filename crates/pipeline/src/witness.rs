//! A synthesized circuit: what a job proves.

use blstrs::Scalar;
use rayon::prelude::*;
use zkpipe_field::{cast, Fr};
use zkpipe_msm::Density;
use zkpipe_pinned::PooledBuffer;

use std::sync::Arc;

use zkpipe_r1cs::Recording;

use crate::{ProveError, ProvingKey};

/// One vector of a witness: the evaluations of one of the A, B, C polynomials at each
/// constraint, or the aux assignment.
#[derive(Debug)]
pub enum Scalars {
    /// In the caller's memory: staged through the engine's pinned pool.
    Pageable(Vec<Scalar>),
    /// In page-locked memory lent by the engine ([`crate::Engine::lend_witness`],
    /// [`crate::Engine::lend_evaluations`]): evaluations are uploaded by DMA with no staging
    /// copy; the memory goes back to the engine's pool once the job no longer reads it.
    Pinned(PinnedScalars),
}

impl Default for Scalars {
    fn default() -> Self {
        Scalars::Pageable(Vec::new())
    }
}

impl From<Vec<Scalar>> for Scalars {
    fn from(v: Vec<Scalar>) -> Self {
        Scalars::Pageable(v)
    }
}

/// A copy is always pageable: lent memory is not duplicated.
impl Clone for Scalars {
    fn clone(&self) -> Self {
        Scalars::Pageable(self.to_vec())
    }
}

impl Scalars {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.as_fr().len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values in the device layout.
    pub fn as_fr(&self) -> &[Fr] {
        match self {
            Scalars::Pageable(v) => cast::scalars_as_fr(v),
            Scalars::Pinned(p) => p.as_fr(),
        }
    }

    /// Appends one value (an error when lent memory is full).
    pub fn push(&mut self, s: Scalar) -> Result<(), ProveError> {
        match self {
            Scalars::Pageable(v) => {
                v.push(s);
                Ok(())
            }
            Scalars::Pinned(p) => p.push(s),
        }
    }

    /// Appends values (an error when lent memory is full).
    pub fn extend_from_slice(&mut self, s: &[Scalar]) -> Result<(), ProveError> {
        match self {
            Scalars::Pageable(v) => {
                v.extend_from_slice(s);
                Ok(())
            }
            Scalars::Pinned(p) => p.extend_from_slice(s),
        }
    }

    /// Removes the last value.
    pub fn pop(&mut self) -> Option<Scalar> {
        match self {
            Scalars::Pageable(v) => v.pop(),
            Scalars::Pinned(p) => p.pop(),
        }
    }

    /// Room for `n` more values, for the caller to write in place (into lent memory with no
    /// copy): what they hold until written is unspecified. An error when lent memory cannot
    /// hold them.
    pub fn append_slots(&mut self, n: usize) -> Result<&mut [Fr], ProveError> {
        match self {
            Scalars::Pageable(v) => {
                let start = v.len();
                v.resize(start + n, Scalar::from(0u64));
                Ok(&mut cast::scalars_as_fr_mut(v)[start..])
            }
            Scalars::Pinned(p) => p.append_slots(n),
        }
    }

    /// The values in blstrs form (a copy).
    pub fn to_vec(&self) -> Vec<Scalar> {
        match self {
            Scalars::Pageable(v) => v.clone(),
            Scalars::Pinned(p) => p.as_fr().par_iter().map(|f| Scalar::from(*f)).collect(),
        }
    }

    /// The values as a vector (lent memory is copied out and given back).
    pub fn into_vec(self) -> Vec<Scalar> {
        match self {
            Scalars::Pageable(v) => v,
            Scalars::Pinned(p) => Scalars::Pinned(p).to_vec(),
        }
    }
}

/// Values a thread copies at a time; fewer are copied on the calling thread.
const PARALLEL_COPY: usize = 1 << 16;

/// What a lent vector is for: it names the vector when it overflows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// The evaluations of A, B or C: as many as the key's domain.
    Evaluations,
    /// The aux assignment: as many as the key's aux variables.
    Aux,
}

/// Page-locked room for one vector of a witness, lent by the engine: up to the key's domain
/// size of evaluations, or its number of aux variables; filled by synthesis.
#[derive(Debug)]
pub struct PinnedScalars {
    buf: PooledBuffer<Fr>,
    len: usize,
    capacity: usize,
    room: Room,
}

impl PinnedScalars {
    /// Room for `capacity` values (at most the buffer's length).
    pub(crate) fn new(buf: PooledBuffer<Fr>, capacity: usize, room: Room) -> Self {
        let capacity = capacity.min(buf.len());
        Self {
            buf,
            len: 0,
            capacity,
            room,
        }
    }

    /// Values it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// An error naming the room when `end` values do not fit.
    fn check_room(&self, end: usize) -> Result<(), ProveError> {
        if end <= self.capacity() {
            return Ok(());
        }
        Err(match self.room {
            Room::Evaluations => ProveError::Constraints {
                constraints: end,
                domain: self.capacity(),
            },
            Room::Aux => ProveError::Shape {
                what: "aux values written into lent memory (the key's aux variables)",
                expected: self.capacity(),
                got: end,
            },
        })
    }

    /// The values written so far.
    pub fn as_fr(&self) -> &[Fr] {
        &self.buf[..self.len]
    }

    /// Appends one value; an error when full (more constraints than the domain holds, or more
    /// aux variables than the key has).
    pub fn push(&mut self, s: Scalar) -> Result<(), ProveError> {
        self.extend_from_slice(std::slice::from_ref(&s))
    }

    /// Appends values (copied by many threads when there are many).
    pub fn extend_from_slice(&mut self, s: &[Scalar]) -> Result<(), ProveError> {
        let end = self.len + s.len();
        self.check_room(end)?;
        let (dst, src) = (&mut self.buf[self.len..end], cast::scalars_as_fr(s));
        // One value at a time (a circuit's allocations) is copied in place: a parallel copy's
        // setup costs more than the copy.
        if s.len() <= PARALLEL_COPY {
            dst.copy_from_slice(src);
        } else {
            dst.par_chunks_mut(PARALLEL_COPY)
                .zip(src.par_chunks(PARALLEL_COPY))
                .for_each(|(d, s)| d.copy_from_slice(s));
        }
        self.len = end;
        Ok(())
    }

    /// Room for `n` more values, written by the caller (see [`Scalars::append_slots`]).
    pub fn append_slots(&mut self, n: usize) -> Result<&mut [Fr], ProveError> {
        let start = self.len;
        self.check_room(start + n)?;
        self.len = start + n;
        Ok(&mut self.buf[start..start + n])
    }

    /// Removes the last value.
    pub fn pop(&mut self) -> Option<Scalar> {
        let last = self.as_fr().last().copied()?;
        self.len -= 1;
        Some(Scalar::from(last))
    }

    /// The whole buffer, padded with zeros from the evaluations' end: the H step's input.
    pub(crate) fn padded(mut self) -> PooledBuffer<Fr> {
        self.padded_in_place();
        self.buf
    }

    /// As [`PinnedScalars::padded`], leaving the values as they are (only the room past
    /// their end is written).
    pub(crate) fn padded_in_place(&mut self) -> &PooledBuffer<Fr> {
        let len = self.len;
        self.buf[len..]
            .par_chunks_mut(1 << 16)
            .for_each(|c| c.fill(Fr::default()));
        &self.buf
    }
}

/// Page-locked room for one witness, lent by the engine ([`crate::Engine::lend_witness`]):
/// synthesis writes a, b, c and the aux values into it and moves them into a [`Witness`].
/// The default is no lent memory: vectors in the caller's memory.
#[derive(Debug, Default)]
pub struct LentWitness {
    /// Room for A's evaluations (the key's domain size).
    pub a: Scalars,
    /// Room for B's evaluations.
    pub b: Scalars,
    /// Room for C's evaluations.
    pub c: Scalars,
    /// Room for the aux values (the key's aux variables).
    pub aux: Scalars,
}

/// The synthesized circuit of one proof (bellperson's `ProvingAssignment`): the evaluations
/// of the A, B and C polynomials at each constraint (input constraints included), the
/// assignment, and which variables occur in A and B.
///
/// With a [`Recording`] of the circuit (the recorded path), a, b and c stay empty: the engine
/// evaluates them from the assignment, on the device into the H step's vectors (they never
/// exist on the host or cross PCIe), or on the host's cores for the CPU backend.
#[derive(Debug, Clone, Default)]
pub struct Witness {
    /// A(x) at each constraint; padded with zeros to the key's domain size by the prover.
    pub a: Scalars,
    /// B(x) at each constraint.
    pub b: Scalars,
    /// C(x) at each constraint.
    pub c: Scalars,
    /// Public inputs, the constant one first.
    pub input: Vec<Scalar>,
    /// Private (aux) variables.
    pub aux: Scalars,
    /// Aux variables that occur in some A combination.
    pub a_aux_density: Density,
    /// Inputs that occur in some B combination.
    pub b_input_density: Density,
    /// Aux variables that occur in some B combination.
    pub b_aux_density: Density,
    /// The circuit's recording, when the engine evaluates a, b and c (which are then empty).
    pub recording: Option<Arc<Recording>>,
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
    /// With a recording: a, b and c must be empty, and the inputs, aux values and densities
    /// those of the recording's circuit.
    pub fn check(&self, key: &ProvingKey) -> Result<(), ProveError> {
        let n = key.domain_size();
        match &self.recording {
            None => {
                shape("b evaluations (as many as a)", self.a.len(), self.b.len())?;
                shape("c evaluations (as many as a)", self.a.len(), self.c.len())?;
            }
            Some(rec) => self.check_recorded(rec)?,
        }
        let constraints = self.constraints();
        if constraints > n || (n > 1 && constraints <= n / 2) {
            return Err(ProveError::Constraints {
                constraints,
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
        match &self.recording {
            Some(rec) => rec.shape().constraints,
            None => self.a.len(),
        }
    }

    /// The witness with a, b and c evaluated on the host's cores from its recording (the form
    /// full synthesis gives; the recording is dropped); a witness without one is returned as
    /// it is.
    pub fn evaluated(mut self) -> Result<Self, ProveError> {
        if let Some(rec) = self.recording.take() {
            let [a, b, c] = evaluate_recording(&rec, &self.input, self.aux.as_fr())?;
            [self.a, self.b, self.c] = [a.into(), b.into(), c.into()];
        }
        Ok(self)
    }

    /// A witness of the recorded path: no a, b or c beside the recording (the engine would
    /// not know which to use), the recording's inputs and aux variables, and its densities
    /// (which the MSMs take).
    fn check_recorded(&self, rec: &Recording) -> Result<(), ProveError> {
        for (what, v) in [
            ("a evaluations beside a recording", &self.a),
            ("b evaluations beside a recording", &self.b),
            ("c evaluations beside a recording", &self.c),
        ] {
            shape(what, 0, v.len())?;
        }
        let s = rec.shape();
        shape(
            "public inputs (the recording's)",
            s.inputs,
            self.input.len(),
        )?;
        shape("aux variables (the recording's)", s.aux, self.aux.len())?;
        let d = rec.densities();
        for (what, ours, theirs) in [
            ("A aux density", &self.a_aux_density, &d.a_aux),
            ("B input density", &self.b_input_density, &d.b_input),
            ("B aux density", &self.b_aux_density, &d.b_aux),
        ] {
            if ours != theirs {
                return Err(ProveError::NotTheRecording {
                    circuit: rec.id().to_string(),
                    what,
                });
            }
        }
        Ok(())
    }
}

/// a, b and c from `rec` at z = (inputs, aux), on every core.
pub(crate) fn evaluate_recording(
    rec: &Recording,
    inputs: &[Scalar],
    aux: &[Fr],
) -> Result<[Vec<Scalar>; 3], ProveError> {
    let n = rec.shape().constraints;
    let mut out = [0; 3].map(|_| vec![Scalar::from(0u64); n]);
    let [a, b, c] = &mut out;
    let into = zkpipe_r1cs::Evaluations {
        a: cast::scalars_as_fr_mut(a),
        b: cast::scalars_as_fr_mut(b),
        c: cast::scalars_as_fr_mut(c),
    };
    rec.evaluate(zkpipe_r1cs::Assignment { inputs, aux }, into)
        .map_err(|source| ProveError::Evaluation { source })?;
    Ok(out)
}
