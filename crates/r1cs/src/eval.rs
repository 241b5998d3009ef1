//! a = A·z, b = B·z, c = C·z on the host, row by row on every core.

use blstrs::Scalar;
use rayon::prelude::*;
use zkpipe_field::Fr;

use crate::error::same;
use crate::{Matrix, Recording, RecordingError, Row, MINUS_ONE, ONE};

/// A witness: z = (inputs, aux), the constant one first among the inputs.
#[derive(Debug, Clone, Copy)]
pub struct Assignment<'w> {
    pub inputs: &'w [Scalar],
    pub aux: &'w [Fr],
}

impl Assignment<'_> {
    /// z at `col`.
    fn at(&self, col: u32) -> Scalar {
        let col = col as usize;
        match col.checked_sub(self.inputs.len()) {
            None => self.inputs[col],
            Some(aux) => Scalar::from(self.aux[aux]),
        }
    }
}

/// Where a, b and c go: one value a constraint each.
#[derive(Debug)]
pub struct Evaluations<'o> {
    pub a: &'o mut [Fr],
    pub b: &'o mut [Fr],
    pub c: &'o mut [Fr],
}

/// One of the three matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    A,
    B,
    C,
}

impl Part {
    /// Its place in [`Recording::matrices`].
    pub(crate) fn index(self) -> usize {
        match self {
            Part::A => 0,
            Part::B => 1,
            Part::C => 2,
        }
    }
}

/// Rows a task evaluates.
const ROWS_PER_TASK: usize = 1 << 12;

impl Recording {
    /// Evaluates A, B and C at the witness `z` into `out`. Every length must be the
    /// recording's; the error names what differs.
    pub fn evaluate(&self, z: Assignment<'_>, out: Evaluations<'_>) -> Result<(), RecordingError> {
        for (part, v) in [(Part::A, out.a), (Part::B, out.b), (Part::C, out.c)] {
            self.evaluate_part(part, z, v)?;
        }
        Ok(())
    }

    /// Evaluates one matrix at the witness `z` into `out` (one value a constraint).
    pub fn evaluate_part(
        &self,
        part: Part,
        z: Assignment<'_>,
        out: &mut [Fr],
    ) -> Result<(), RecordingError> {
        let shape = self.shape;
        same("inputs", shape.inputs, z.inputs.len())?;
        same("aux variables", shape.aux, z.aux.len())?;
        same("evaluations", shape.constraints, out.len())?;
        evaluate_matrix(self.matrices()[part.index()], &self.table, z, out);
        Ok(())
    }
}

/// ⟨row i, z⟩ into `out[i]` for every row.
fn evaluate_matrix(m: &Matrix, table: &[Scalar], z: Assignment<'_>, out: &mut [Fr]) {
    out.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| {
            let first = task * ROWS_PER_TASK;
            for (i, o) in chunk.iter_mut().enumerate() {
                *o = Fr::from(row_value(m.row(first + i), table, z));
            }
        });
}

/// One row's value: ±1 coefficients added or subtracted, others multiplied.
fn row_value(row: Row<'_>, table: &[Scalar], z: Assignment<'_>) -> Scalar {
    let mut acc = Scalar::from(0u64);
    for (&col, &k) in row.columns.iter().zip(row.coefficients) {
        let v = z.at(col);
        match k {
            ONE => acc += v,
            MINUS_ONE => acc -= v,
            _ => acc += v * table[k as usize],
        }
    }
    acc
}
