//! The recorded path: a circuit's constraints recorded once ([`record`]), then for each proof
//! its witness alone ([`synthesize_recorded`]): `enforce` does nothing, `alloc` runs the
//! closures, and the engine evaluates a, b and c from the recording.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use std::sync::Arc;

use zkpipe_pipeline::{ProveError, Scalars, Witness};
use zkpipe_r1cs::{
    CircuitId, Recording, RecordingBuilder, RecordingError, Shape, Variable as R1csVariable,
};

/// Why the recorded path failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordedError {
    /// The circuit's own synthesis failed (a missing value, say).
    #[error("synthesis: {0}")]
    Synthesis(#[from] SynthesisError),
    /// The recording could not be made, or does not fit the circuit or the witness.
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// The witness does not fit the memory lent for it.
    #[error(transparent)]
    Witness(#[from] ProveError),
}

/// Records `circuit`'s constraints as [`crate::synthesize`] lays them out: the constant one
/// as input 0, the circuit, then `input · 1 = 0` for each input. The closures that compute
/// values are not run, so a circuit without values (as for a setup) records the same.
pub fn record<C: Circuit<Scalar>>(circuit: C, id: CircuitId) -> Result<Recording, RecordedError> {
    let mut cs = RecordingSystem::default();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.builder.shape().inputs {
        cs.enforce(
            || "input constraint",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    if let Some(e) = cs.error {
        return Err(e.into());
    }
    Ok(cs.builder.finish(id)?)
}

/// Synthesizes `circuit`'s witness alone, into `aux` (memory lent by the engine,
/// [`zkpipe_pipeline::Engine::lend_aux`], or an empty vector): the witness carries
/// `recording`, from which the engine evaluates a, b and c (on the device, into the H step's
/// vectors). Its inputs and aux values equal [`crate::synthesize_lent`]'s, and
/// [`Witness::evaluated`] gives its a, b and c on the host. A circuit whose numbers of inputs,
/// aux variables or constraints differ from the recording's is refused with both numbers.
pub fn synthesize_recorded<C: Circuit<Scalar>>(
    circuit: C,
    recording: &Arc<Recording>,
    aux: Scalars,
) -> Result<Witness, RecordedError> {
    let mut cs = WitnessSystem {
        input: Vec::new(),
        aux,
        constraints: 0,
    };
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    let got = Shape {
        inputs: cs.input.len(),
        aux: cs.aux.len(),
        // Each input's `input · 1 = 0`.
        constraints: cs.constraints + cs.input.len(),
    };
    check_shape(recording, got)?;
    let densities = recording.densities().clone();
    Ok(Witness {
        input: cs.input,
        aux: cs.aux,
        a_aux_density: densities.a_aux,
        b_input_density: densities.b_input,
        b_aux_density: densities.b_aux,
        recording: Some(Arc::clone(recording)),
        ..Witness::default()
    })
}

/// Refuses a circuit whose synthesis does not have the recording's shape.
fn check_shape(recording: &Recording, got: Shape) -> Result<(), RecordingError> {
    let want = recording.shape();
    for (what, expected, got) in [
        ("inputs", want.inputs, got.inputs),
        ("aux variables", want.aux, got.aux),
        ("constraints", want.constraints, got.constraints),
    ] {
        if expected != got {
            return Err(RecordingError::ShapeMismatch {
                id: recording.id().clone(),
                what,
                expected,
                got,
            });
        }
    }
    Ok(())
}

/// A constraint system that records the constraints and never runs a value closure.
#[derive(Debug, Default)]
struct RecordingSystem {
    builder: RecordingBuilder,
    /// The first error (`enforce` cannot fail; [`record`] reports it at the end).
    error: Option<RecordingError>,
}

/// The terms of `lc` as the recording's variables.
fn terms(lc: &LinearCombination<Scalar>) -> impl Iterator<Item = (R1csVariable, Scalar)> + '_ {
    let inputs = lc.iter_inputs().map(|(&i, c)| (R1csVariable::Input(i), *c));
    let aux = lc.iter_aux().map(|(&i, c)| (R1csVariable::Aux(i), *c));
    inputs.chain(aux)
}

impl ConstraintSystem<Scalar> for RecordingSystem {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(Variable::new_unchecked(Index::Aux(
            self.builder.alloc_aux(),
        )))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(Variable::new_unchecked(Index::Input(
            self.builder.alloc_input(),
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        if self.error.is_some() {
            return;
        }
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        if let Err(e) = self.builder.enforce(terms(&a), terms(&b), terms(&c)) {
            self.error = Some(e);
        }
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// A constraint system that computes the witness alone: `alloc` runs the closures into the
/// lent aux memory; `enforce` only counts.
#[derive(Debug)]
struct WitnessSystem {
    input: Vec<Scalar>,
    aux: Scalars,
    constraints: usize,
}

impl ConstraintSystem<Scalar> for WitnessSystem {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        crate::push_aux(&mut self.aux, f()?)
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
