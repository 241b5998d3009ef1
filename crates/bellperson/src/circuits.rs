//! Circuits for tests and the `zkpipe prove` main job: a small arithmetic circuit,
//! bellperson's SHA-256 gadget over whole blocks, and a random R1CS.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256::sha256};
use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// x³ + x + 5 = out, with `out` public.
#[derive(Debug, Clone, Copy)]
pub struct Cube {
    /// The secret x (`None` when only the shape is needed, for a setup).
    pub x: Option<Scalar>,
}

impl Cube {
    /// The public output for x.
    pub fn output(x: Scalar) -> Scalar {
        x * x * x + x + Scalar::from(5u64)
    }
}

impl Circuit<Scalar> for Cube {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let val = |f: fn(Scalar) -> Scalar| self.x.map(f).ok_or(SynthesisError::AssignmentMissing);
        let x = cs.alloc(|| "x", || val(|x| x))?;
        let x2 = cs.alloc(|| "x2", || val(|x| x * x))?;
        cs.enforce(|| "x2 = x * x", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
        let x3 = cs.alloc(|| "x3", || val(|x| x * x * x))?;
        cs.enforce(|| "x3 = x2 * x", |lc| lc + x2, |lc| lc + x, |lc| lc + x3);
        let out = cs.alloc_input(|| "out", || val(Cube::output))?;
        cs.enforce(
            || "out = x3 + x + 5",
            |lc| lc + x3 + x + (Scalar::from(5u64), CS::one()),
            |lc| lc + CS::one(),
            |lc| lc + out,
        );
        Ok(())
    }
}

/// SHA-256 of a preimage of `blocks` × 64 - 9 bytes (so the padded message is exactly
/// `blocks` blocks), with the digest packed into public inputs.
#[derive(Debug, Clone)]
pub struct Sha256Blocks {
    /// The preimage (`None` for a setup); its length fixes the shape.
    pub preimage: Option<Vec<u8>>,
    /// Blocks of the padded message.
    pub blocks: usize,
}

impl Sha256Blocks {
    /// Preimage bytes for `blocks` blocks.
    pub fn preimage_len(blocks: usize) -> usize {
        (blocks * 64).saturating_sub(9)
    }

    /// The public inputs (packed digest bits) of a preimage.
    pub fn public_inputs(preimage: &[u8]) -> Vec<Scalar> {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(preimage);
        multipack::compute_multipacking(&multipack::bytes_to_bits(&digest))
    }
}

impl Circuit<Scalar> for Sha256Blocks {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let len = Self::preimage_len(self.blocks);
        let bits: Vec<Option<bool>> = match &self.preimage {
            Some(p) if p.len() == len => {
                multipack::bytes_to_bits(p).into_iter().map(Some).collect()
            }
            Some(_) => return Err(SynthesisError::Unsatisfiable),
            None => vec![None; len * 8],
        };
        let input = bits
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), b).map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let digest = sha256(cs.namespace(|| "sha256"), &input)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

/// A random satisfied R1CS: each constraint multiplies two random combinations of earlier
/// variables into a new one; a few public inputs take part.
#[derive(Debug, Clone, Copy)]
pub struct RandomR1cs {
    pub constraints: usize,
    pub inputs: usize,
    pub seed: u64,
}

impl Circuit<Scalar> for RandomR1cs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut r = ChaCha8Rng::seed_from_u64(self.seed);
        let mut vars: Vec<(Variable, Scalar)> = vec![(CS::one(), Scalar::ONE)];
        for i in 0..self.inputs {
            let v = Scalar::random(&mut r);
            vars.push((cs.alloc_input(|| format!("in {i}"), || Ok(v))?, v));
        }
        for i in 0..4 {
            let v = if i % 2 == 0 {
                Scalar::ONE
            } else {
                Scalar::random(&mut r)
            };
            vars.push((cs.alloc(|| format!("seed {i}"), || Ok(v))?, v));
        }
        for i in 0..self.constraints {
            let pick = |r: &mut ChaCha8Rng| {
                let mut lc = LinearCombination::zero();
                let mut val = Scalar::ZERO;
                for _ in 0..r.gen_range(1..4) {
                    let (v, x) = vars[r.gen_range(0..vars.len())];
                    let c = if r.gen_bool(0.5) {
                        Scalar::ONE
                    } else {
                        Scalar::random(&mut *r)
                    };
                    lc = lc + (c, v);
                    val += c * x;
                }
                (lc, val)
            };
            let (a, va) = pick(&mut r);
            let (b, vb) = pick(&mut r);
            let vc = va * vb;
            let c = cs.alloc(|| format!("c {i}"), || Ok(vc))?;
            cs.enforce(|| format!("constraint {i}"), |_| a, |_| b, |lc| lc + c);
            vars.push((c, vc));
        }
        Ok(())
    }
}
