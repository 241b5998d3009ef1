//! The recorded path: a circuit's constraints recorded once ([`record`]), then for each proof
//! its witness alone ([`synthesize_recorded`]): `enforce` does nothing, `alloc` runs the
//! closures, and the engine evaluates a, b and c from the recording.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use std::sync::Arc;

use rayon::prelude::*;
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

/// As [`synthesize_recorded`] for a circuit made of a prologue and independent parts of one
/// shape, given as `parts`: sub-circuits that each hold the prologue and one part, in the
/// whole circuit's order (a PoRep partition's challenges, one each). They are synthesized on
/// all cores at once and their witnesses joined: the prologue's variables once, then each
/// part's, into `aux`. The result is the whole circuit's witness when the circuit is so made;
/// sub-circuits whose prologues differ, or whose parts are of other sizes than the recording
/// allows, are refused with the numbers. Each sub-circuit's own witness is held until the
/// join: about one more copy of the aux values.
pub fn synthesize_recorded_parts<C: Circuit<Scalar> + Send>(
    parts: Vec<C>,
    recording: &Arc<Recording>,
    mut aux: Scalars,
) -> Result<Witness, RecordedError> {
    let mismatch = |what, expected, got| RecordingError::ShapeMismatch {
        id: recording.id().clone(),
        what,
        expected,
        got,
    };
    let subs: Vec<WitnessSystem> = parts
        .into_par_iter()
        .map(|c| -> Result<WitnessSystem, RecordedError> {
            let mut cs = WitnessSystem {
                input: Vec::new(),
                aux: Scalars::default(),
                constraints: 0,
            };
            cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
            c.synthesize(&mut cs)?;
            Ok(cs)
        })
        .collect::<Result<_, _>>()?;
    let Some(first) = subs.first() else {
        return Err(mismatch("parts", 1, 0).into());
    };
    let want = recording.shape();
    let split = PartSplit::of(first, subs.len(), want)
        .map_err(|(what, expected, got)| mismatch(what, expected, got))?;
    let (head_inputs, head_aux) = (first.input.len(), first.aux.len());
    for sub in &subs[1..] {
        if sub.input.len() != head_inputs {
            return Err(mismatch(
                "inputs of a part's sub-circuit",
                head_inputs,
                sub.input.len(),
            )
            .into());
        }
        if sub.aux.len() != head_aux {
            return Err(mismatch(
                "aux variables of a part's sub-circuit",
                head_aux,
                sub.aux.len(),
            )
            .into());
        }
        let same_prologue = sub.input[..split.prologue_inputs]
            == first.input[..split.prologue_inputs]
            && sub.aux.as_fr()[..split.prologue_aux] == first.aux.as_fr()[..split.prologue_aux];
        if !same_prologue {
            return Err(
                mismatch("sub-circuits with the first one's prologue", subs.len(), 0).into(),
            );
        }
    }
    let mut input = first.input.clone();
    for sub in &subs[1..] {
        input.extend_from_slice(&sub.input[split.prologue_inputs..]);
    }
    let room = aux.append_slots(want.aux)?;
    let (head, rest) = room.split_at_mut(head_aux);
    head.copy_from_slice(first.aux.as_fr());
    if split.part_aux > 0 {
        rest.par_chunks_mut(split.part_aux)
            .zip(subs[1..].par_iter())
            .for_each(|(dst, sub)| dst.copy_from_slice(&sub.aux.as_fr()[split.prologue_aux..]));
    }
    let densities = recording.densities().clone();
    Ok(Witness {
        input,
        aux,
        a_aux_density: densities.a_aux,
        b_input_density: densities.b_input,
        b_aux_density: densities.b_aux,
        recording: Some(Arc::clone(recording)),
        ..Witness::default()
    })
}

/// How the recording's variables split into a prologue and `parts` parts, given the first
/// sub-circuit's (the prologue and one part).
struct PartSplit {
    prologue_inputs: usize,
    prologue_aux: usize,
    part_aux: usize,
}

impl PartSplit {
    /// The split, or what does not add up: (what, expected, got).
    fn of(
        first: &WitnessSystem,
        parts: usize,
        whole: Shape,
    ) -> Result<Self, (&'static str, usize, usize)> {
        let per_part =
            |what, one: usize, all: usize| -> Result<usize, (&'static str, usize, usize)> {
                let Some(more) = all.checked_sub(one) else {
                    return Err((what, all, one));
                };
                match parts {
                    1 if more == 0 => Ok(0),
                    1 => Err((what, all, one)),
                    _ if more % (parts - 1) == 0 => Ok(more / (parts - 1)),
                    _ => Err((what, all, one + (more / (parts - 1)) * (parts - 1))),
                }
            };
        let part_inputs = per_part("inputs", first.input.len(), whole.inputs)?;
        let part_aux = per_part("aux variables", first.aux.len(), whole.aux)?;
        let prologue_inputs = first.input.len().checked_sub(part_inputs).ok_or((
            "inputs of a part",
            first.input.len(),
            part_inputs,
        ))?;
        let prologue_aux = first.aux.len().checked_sub(part_aux).ok_or((
            "aux variables of a part",
            first.aux.len(),
            part_aux,
        ))?;
        // The prologue holds the constant one at least.
        if prologue_inputs == 0 {
            return Err(("inputs of the prologue", 1, 0));
        }
        Ok(Self {
            prologue_inputs,
            prologue_aux,
            part_aux,
        })
    }
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
