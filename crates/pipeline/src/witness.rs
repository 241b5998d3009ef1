//! A synthesized circuit: what a job proves.

use blstrs::Scalar;
use zkpipe_msm::Density;

use crate::{ProveError, ProvingKey};

/// The synthesized circuit of one proof (bellperson's `ProvingAssignment`): the evaluations
/// of the A, B and C polynomials at each constraint (input constraints included), the
/// assignment, and which variables occur in A and B.
#[derive(Debug, Clone, Default)]
pub struct Witness {
    /// A(x) at each constraint; padded with zeros to the key's domain size by the prover.
    pub a: Vec<Scalar>,
    /// B(x) at each constraint.
    pub b: Vec<Scalar>,
    /// C(x) at each constraint.
    pub c: Vec<Scalar>,
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
