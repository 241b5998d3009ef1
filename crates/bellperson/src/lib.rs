//! zkpipe-bellperson: bellperson circuits and parameters in the zkpipe engine.
//!
//! - [`synthesize`]: any `bellperson::Circuit<Scalar>` into a [`Witness`], through
//!   bellperson's public `ConstraintSystem` trait, as bellperson's own prover does it (the
//!   constant-one input first, then the circuit, then one `input * 1 = 0` constraint per input).
//! - [`record`] and [`synthesize_recorded`]: the recorded path: the constraints recorded
//!   once per circuit shape (zkpipe-r1cs), then per proof the witness alone, a, b and c
//!   evaluated from the recording; the same witness as [`synthesize`]'s.
//! - [`proving_key`]: `bellperson::groth16::Parameters` into a [`ProvingKey`] (checked, or
//!   unchecked for trusted parameters).
//! - [`to_bellperson`] / [`verifying_key`]: our proofs and keys in bellperson's types, so that
//!   `bellperson::groth16::verify_proof` checks them.
//!
//! With the same r and s, a proof from the engine equals bellperson's `create_proof` byte for
//! byte (tests/interop.rs).

pub mod circuits;
mod recorded;

pub use recorded::{record, synthesize_recorded, synthesize_recorded_parts, RecordedError};
pub use zkpipe_r1cs::{CircuitId, Recording};

use std::sync::Arc;

use bellperson::groth16::{Parameters, Proof as BpProof};
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::{Bls12, Scalar};
use ff::Field;
use zkpipe_field::Fr;
use zkpipe_msm::Density;
use zkpipe_pipeline::{
    KeyParts, LentWitness, Proof, ProveError, ProvingKey, Scalars, VerifyingKey, Witness,
};

/// A `ConstraintSystem` that records what a Groth16 prover needs (bellperson's
/// `ProvingAssignment`, with plain flags for the densities).
#[derive(Debug, Default)]
struct Recorder {
    a_aux: Vec<bool>,
    b_input: Vec<bool>,
    b_aux: Vec<bool>,
    a: Scalars,
    b: Scalars,
    c: Scalars,
    input: Vec<Scalar>,
    aux: Scalars,
    /// Set when an evaluation did not fit the memory it was written into (`enforce` cannot
    /// fail; `synthesize_into` reports it at the end).
    overflow: bool,
    /// The first variable a constraint used that this system never allocated.
    foreign: Option<Foreign>,
}

/// A variable that this constraint system never allocated (one of another system's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Foreign {
    kind: &'static str,
    index: usize,
    allocated: usize,
}

/// Evaluates `lc`, marking in `inputs` / `aux` the variables that occur with a non-zero
/// coefficient; a variable beyond those allocated is an error, not an index panic.
fn eval(
    lc: &LinearCombination<Scalar>,
    mut inputs: Option<&mut Vec<bool>>,
    mut aux: Option<&mut Vec<bool>>,
    input_values: &[Scalar],
    aux_values: &[Fr],
) -> Result<Scalar, Foreign> {
    let mut acc = Scalar::ZERO;
    let input_values = zkpipe_field::cast::scalars_as_fr(input_values);
    let value = |kind, values: &[Fr], index: usize| {
        values.get(index).map(|&v| Scalar::from(v)).ok_or(Foreign {
            kind,
            index,
            allocated: values.len(),
        })
    };
    for (&i, coeff) in lc.iter_inputs() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += value("input", input_values, i)? * coeff;
        if let Some(d) = inputs.as_deref_mut() {
            d[i] = true;
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += value("aux", aux_values, i)? * coeff;
        if let Some(d) = aux.as_deref_mut() {
            d[i] = true;
        }
    }
    Ok(acc)
}

/// Appends an aux value; more aux variables than lent memory holds (the key's) mean a
/// witness of another circuit, an error naming the numbers.
fn push_aux(aux: &mut Scalars, value: Scalar) -> Result<Variable, SynthesisError> {
    aux.push(value)
        .map_err(|e| SynthesisError::IncompatibleLengthVector(e.to_string()))?;
    Ok(Variable::new_unchecked(Index::Aux(aux.len() - 1)))
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = push_aux(&mut self.aux, f()?)?;
        self.a_aux.push(false);
        self.b_aux.push(false);
        Ok(v)
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input.push(false);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        // Inputs are fully dense in A (every input gets an `input * 1 = 0` constraint).
        let aux = self.aux.as_fr();
        let va = eval(&a, None, Some(&mut self.a_aux), &self.input, aux);
        let vb = eval(
            &b,
            Some(&mut self.b_input),
            Some(&mut self.b_aux),
            &self.input,
            aux,
        );
        let vc = eval(&c, None, None, &self.input, aux);
        for (e, v) in [(&mut self.a, va), (&mut self.b, vb), (&mut self.c, vc)] {
            match v {
                Ok(v) => self.overflow |= e.push(v).is_err(),
                Err(f) => {
                    self.foreign.get_or_insert(f);
                    // Keep the three vectors of one length: the witness is refused anyway.
                    self.overflow |= e.push(Scalar::ZERO).is_err();
                }
            }
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

/// Synthesizes `circuit` into a witness, as bellperson's prover does.
pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<Witness, SynthesisError> {
    synthesize_into(circuit, Default::default())
}

/// As [`synthesize`], writing the A, B, C evaluations into `abc`: pinned memory lent by the
/// engine ([`zkpipe_pipeline::Engine::lend_evaluations`]), so that the witness goes to the GPU by
/// DMA with no staging copy. More constraints than `abc` holds (the key's domain) is
/// `SynthesisError::PolynomialDegreeTooLarge`.
pub fn synthesize_into<C: Circuit<Scalar>>(
    circuit: C,
    [a, b, c]: [Scalars; 3],
) -> Result<Witness, SynthesisError> {
    let aux = Scalars::default();
    synthesize_lent(circuit, LentWitness { a, b, c, aux })
}

/// As [`synthesize_into`], writing the aux values into lent memory too
/// ([`zkpipe_pipeline::Engine::lend_witness`]): no vector grows while the circuit allocates,
/// and the memory goes back to the engine once the job has read it. More aux variables than
/// the key has is `SynthesisError::IncompatibleLengthVector` naming the numbers.
pub fn synthesize_lent<C: Circuit<Scalar>>(
    circuit: C,
    room: LentWitness,
) -> Result<Witness, SynthesisError> {
    let LentWitness { a, b, c, aux } = room;
    let mut cs = Recorder {
        a,
        b,
        c,
        aux,
        ..Recorder::default()
    };
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.input.len() {
        cs.enforce(
            || "input constraint",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    if let Some(f) = cs.foreign {
        return Err(SynthesisError::IncompatibleLengthVector(format!(
            "a constraint uses {} variable {} of another constraint system; this one allocated {}",
            f.kind, f.index, f.allocated
        )));
    }
    if cs.overflow {
        return Err(SynthesisError::PolynomialDegreeTooLarge);
    }
    Ok(Witness {
        a: cs.a,
        b: cs.b,
        c: cs.c,
        input: cs.input,
        aux: cs.aux,
        a_aux_density: Density::from_bools(cs.a_aux),
        b_input_density: Density::from_bools(cs.b_input),
        b_aux_density: Density::from_bools(cs.b_aux),
        recording: None,
    })
}

/// Our verifying key from bellperson's.
pub fn verifying_key(vk: &bellperson::groth16::VerifyingKey<Bls12>) -> VerifyingKey {
    VerifyingKey {
        alpha_g1: vk.alpha_g1,
        beta_g1: vk.beta_g1,
        beta_g2: vk.beta_g2,
        gamma_g2: vk.gamma_g2,
        delta_g1: vk.delta_g1,
        delta_g2: vk.delta_g2,
        ic: vk.ic.clone(),
    }
}

/// A proving key from bellperson's parameters, every point checked (on the curve, in the
/// subgroup, not the identity where that is refused), as for parameters from a file.
pub fn proving_key(params: &Parameters<Bls12>) -> Result<ProvingKey, ProveError> {
    ProvingKey::new(key_parts(params))
}

/// A proving key from parameters made in this process (bellperson's setup), whose points are
/// known to be good: the points are not checked again.
pub fn proving_key_unchecked(params: &Parameters<Bls12>) -> Result<ProvingKey, ProveError> {
    ProvingKey::new_unchecked(key_parts(params))
}

/// As [`proving_key_unchecked`], taking the parameters: their points move into the key
/// rather than being copied (a key made by bellperson's setup in this process, such as test
/// parameters just generated and written to a file).
pub fn into_proving_key_unchecked(params: Parameters<Bls12>) -> Result<ProvingKey, ProveError> {
    let take = |v: Arc<Vec<_>>| Arc::try_unwrap(v).unwrap_or_else(|shared| shared.to_vec());
    ProvingKey::new_unchecked(KeyParts {
        vk: verifying_key(&params.vk),
        h: take(params.h),
        l: take(params.l),
        a: take(params.a),
        b_g1: take(params.b_g1),
        b_g2: Arc::try_unwrap(params.b_g2).unwrap_or_else(|shared| shared.to_vec()),
    })
}

fn key_parts(params: &Parameters<Bls12>) -> KeyParts {
    KeyParts {
        vk: verifying_key(&params.vk),
        h: params.h.to_vec(),
        l: params.l.to_vec(),
        a: params.a.to_vec(),
        b_g1: params.b_g1.to_vec(),
        b_g2: params.b_g2.to_vec(),
    }
}

/// bellperson's parameters holding `parts` (say, a generated key, to be written to a file with
/// `Parameters::write`): the inverse of reading them with [`proving_key`].
pub fn to_bellperson_parameters(parts: KeyParts) -> Parameters<Bls12> {
    let vk = parts.vk;
    Parameters {
        vk: bellperson::groth16::VerifyingKey {
            alpha_g1: vk.alpha_g1,
            beta_g1: vk.beta_g1,
            beta_g2: vk.beta_g2,
            gamma_g2: vk.gamma_g2,
            delta_g1: vk.delta_g1,
            delta_g2: vk.delta_g2,
            ic: vk.ic,
        },
        h: Arc::new(parts.h),
        l: Arc::new(parts.l),
        a: Arc::new(parts.a),
        b_g1: Arc::new(parts.b_g1),
        b_g2: Arc::new(parts.b_g2),
    }
}

/// Our proof as bellperson's.
pub fn to_bellperson(p: &Proof) -> BpProof<Bls12> {
    BpProof {
        a: p.a,
        b: p.b,
        c: p.c,
    }
}
