//! Recording a circuit: constraints in, as a constraint system produces them.

use std::collections::HashMap;

use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::{CircuitId, Matrix, Recording, RecordingError, Shape};

/// A variable as a constraint system allocates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variable {
    /// A public input (input 0 is the constant one).
    Input(usize),
    /// A private (aux) variable.
    Aux(usize),
}

/// Aux columns carry this bit until the number of inputs is known (inputs and aux are
/// allocated interleaved); [`RecordingBuilder::finish`] moves them after the inputs.
const AUX: u32 = 1 << 31;

/// The most rows, entries or variables the 32-bit format indexes.
const MAX: usize = (AUX - 1) as usize;

/// A matrix being recorded.
#[derive(Debug)]
struct Rows {
    matrix: Arrays,
    name: &'static str,
}

/// A matrix's arrays as they grow (see [`Matrix`]).
#[derive(Debug)]
struct Arrays {
    starts: Vec<u32>,
    columns: Vec<u32>,
    coefficients: Vec<u32>,
}

impl Arrays {
    fn rows(&self) -> usize {
        self.starts.len() - 1
    }
}

impl Rows {
    fn new(name: &'static str) -> Self {
        Self {
            matrix: Arrays {
                starts: vec![0],
                columns: Vec::new(),
                coefficients: Vec::new(),
            },
            name,
        }
    }
}

/// Collects a circuit's variables and constraints into a [`Recording`].
#[derive(Debug)]
pub struct RecordingBuilder {
    inputs: usize,
    aux: usize,
    table: Vec<Scalar>,
    index: HashMap<[u8; 32], u32>,
    rows: [Rows; 3],
    /// One row's terms, merged by variable (reused between rows).
    scratch: Vec<(u32, Scalar)>,
}

impl Default for RecordingBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordingBuilder {
    /// An empty recording: no variables (the caller allocates the constant one as input 0),
    /// the coefficient table holding 1 and -1.
    pub fn new() -> Self {
        let mut b = Self {
            inputs: 0,
            aux: 0,
            table: Vec::new(),
            index: HashMap::new(),
            rows: [Rows::new("A"), Rows::new("B"), Rows::new("C")],
            scratch: Vec::new(),
        };
        b.coefficient(Scalar::ONE);
        b.coefficient(-Scalar::ONE);
        b
    }

    /// Allocates the next input; returns its index ([`Variable::Input`]).
    pub fn alloc_input(&mut self) -> usize {
        self.inputs += 1;
        self.inputs - 1
    }

    /// Allocates the next aux variable; returns its index ([`Variable::Aux`]).
    pub fn alloc_aux(&mut self) -> usize {
        self.aux += 1;
        self.aux - 1
    }

    /// The variables and constraints so far.
    pub fn shape(&self) -> Shape {
        Shape {
            inputs: self.inputs,
            aux: self.aux,
            constraints: self.rows[0].matrix.rows(),
        }
    }

    /// Records the constraint ⟨a, z⟩ · ⟨b, z⟩ = ⟨c, z⟩. Terms of one variable are added
    /// together, and terms whose coefficient is (or adds up to) zero are left out, as a
    /// prover evaluating the combinations would skip them.
    pub fn enforce<A, B, C>(&mut self, a: A, b: B, c: C) -> Result<(), RecordingError>
    where
        A: IntoIterator<Item = (Variable, Scalar)>,
        B: IntoIterator<Item = (Variable, Scalar)>,
        C: IntoIterator<Item = (Variable, Scalar)>,
    {
        if self.rows[0].matrix.rows() >= MAX {
            return Err(RecordingError::TooLarge {
                what: "constraints",
                count: self.rows[0].matrix.rows() + 1,
                max: MAX,
            });
        }
        self.push_row(0, a)?;
        self.push_row(1, b)?;
        self.push_row(2, c)
    }

    fn push_row(
        &mut self,
        m: usize,
        terms: impl IntoIterator<Item = (Variable, Scalar)>,
    ) -> Result<(), RecordingError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        for (v, coeff) in terms {
            scratch.push((self.column(v)?, coeff));
        }
        merge_terms(&mut scratch);
        let rows = &self.rows[m];
        let end = rows.matrix.columns.len() + scratch.len();
        if end > MAX {
            return Err(RecordingError::TooLarge {
                what: rows.name,
                count: end,
                max: MAX,
            });
        }
        for &(col, coeff) in &scratch {
            let k = self.coefficient(coeff);
            let matrix = &mut self.rows[m].matrix;
            matrix.columns.push(col);
            matrix.coefficients.push(k);
        }
        let matrix = &mut self.rows[m].matrix;
        matrix.starts.push(end as u32);
        self.scratch = scratch;
        Ok(())
    }

    /// The tagged column of `v`, checked against what has been allocated.
    fn column(&self, v: Variable) -> Result<u32, RecordingError> {
        let (kind, index, allocated, tag) = match v {
            Variable::Input(i) => ("input", i, self.inputs, 0),
            Variable::Aux(i) => ("aux", i, self.aux, AUX),
        };
        if index >= allocated {
            return Err(RecordingError::UnknownVariable {
                kind,
                index,
                allocated,
            });
        }
        if index >= MAX {
            return Err(RecordingError::TooLarge {
                what: kind,
                count: index + 1,
                max: MAX,
            });
        }
        Ok(tag | index as u32)
    }

    /// The table index of `c`, added when new. 1 and -1, almost every coefficient of a
    /// real circuit, are found without hashing.
    fn coefficient(&mut self, c: Scalar) -> u32 {
        if c == Scalar::ONE && !self.table.is_empty() {
            return crate::ONE;
        }
        if c == -Scalar::ONE && self.table.len() > 1 {
            return crate::MINUS_ONE;
        }
        let key = c.to_repr();
        if let Some(&k) = self.index.get(&key) {
            return k;
        }
        let k = self.table.len() as u32;
        self.table.push(c);
        self.index.insert(key, k);
        k
    }

    /// The recording, aux columns placed after the inputs.
    pub fn finish(self, id: CircuitId) -> Result<Recording, RecordingError> {
        let shape = self.shape();
        if shape.variables() > MAX {
            return Err(RecordingError::TooLarge {
                what: "variables",
                count: shape.variables(),
                max: MAX,
            });
        }
        let inputs = shape.inputs as u32;
        let [a, b, c] = self.rows.map(|r| {
            let mut m = r.matrix;
            for col in &mut m.columns {
                if *col & AUX != 0 {
                    *col = inputs + (*col & !AUX);
                }
            }
            Matrix::from_arrays(m.starts, m.columns, m.coefficients)
        });
        Ok(Recording::from_checked(id, shape, self.table, [a, b, c]))
    }
}

/// Adds the coefficients of repeated columns and drops zero sums, in column order.
fn merge_terms(terms: &mut Vec<(u32, Scalar)>) {
    terms.sort_unstable_by_key(|t| t.0);
    let mut out = 0;
    for i in 0..terms.len() {
        let (col, coeff) = terms[i];
        if out > 0 && terms[out - 1].0 == col {
            terms[out - 1].1 += coeff;
        } else {
            terms[out] = (col, coeff);
            out += 1;
        }
    }
    terms.truncate(out);
    terms.retain(|t| !bool::from(t.1.is_zero()));
}
