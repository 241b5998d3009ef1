//! Proofs, their bellperson encoding, and verification.

use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Prepared, Scalar};
use group::{Curve, Group};
use pairing::{MillerLoopResult, MultiMillerLoop};

use crate::error::{ProofFault, ProveError};
use crate::key::PreparedVerifyingKey;

/// A Groth16 proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proof {
    pub a: G1Affine,
    pub b: G2Affine,
    pub c: G1Affine,
}

/// Bytes of an encoded proof: A (48), B (96), C (48), compressed, as bellperson writes them.
pub const PROOF_BYTES: usize = 192;

impl Proof {
    /// bellperson's encoding.
    pub fn to_bytes(&self) -> [u8; PROOF_BYTES] {
        let mut out = [0u8; PROOF_BYTES];
        out[..48].copy_from_slice(&self.a.to_compressed());
        out[48..144].copy_from_slice(&self.b.to_compressed());
        out[144..].copy_from_slice(&self.c.to_compressed());
        out
    }

    /// Decodes bellperson's encoding, checking that each point is on the curve and in the
    /// subgroup.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ProveError> {
        if bytes.len() != PROOF_BYTES {
            return Err(ProveError::Shape {
                what: "encoded proof bytes",
                expected: PROOF_BYTES,
                got: bytes.len(),
            });
        }
        let bad = |part: &'static str| ProveError::BadProof { part };
        let mut a = [0u8; 48];
        let mut b = [0u8; 96];
        let mut c = [0u8; 48];
        a.copy_from_slice(&bytes[..48]);
        b.copy_from_slice(&bytes[48..144]);
        c.copy_from_slice(&bytes[144..]);
        Ok(Self {
            a: Option::from(G1Affine::from_compressed(&a)).ok_or_else(|| bad("A"))?,
            b: Option::from(G2Affine::from_compressed(&b)).ok_or_else(|| bad("B"))?,
            c: Option::from(G1Affine::from_compressed(&c)).ok_or_else(|| bad("C"))?,
        })
    }
}

/// Checks e(A, B) = e(alpha, beta) · e(sum x_i · IC_i, gamma) · e(C, delta). `inputs` are the
/// public inputs without the constant one.
pub fn verify(
    pvk: &PreparedVerifyingKey,
    proof: &Proof,
    inputs: &[Scalar],
) -> Result<bool, ProveError> {
    let ic = &pvk.vk.ic;
    if inputs.len() + 1 != ic.len() {
        return Err(ProveError::Shape {
            what: "public inputs to verify (without the constant one)",
            expected: ic.len().saturating_sub(1),
            got: inputs.len(),
        });
    }
    let acc = (G1Projective::from(ic[0]) + input_sum(&ic[1..], inputs)).to_affine();
    let b = G2Prepared::from(proof.b);
    let ml = Bls12::multi_miller_loop(&[
        (&proof.a, &b),
        (&acc, &pvk.neg_gamma),
        (&proof.c, &pvk.neg_delta),
    ]);
    Ok(ml.final_exponentiation() == pvk.alpha_beta)
}

/// Σ x_i · IC_i, by blst's multi-exponentiation (which takes no empty input).
fn input_sum(ic: &[G1Affine], inputs: &[Scalar]) -> G1Projective {
    if inputs.is_empty() {
        return G1Projective::identity();
    }
    let bases: Vec<G1Projective> = ic.iter().map(G1Projective::from).collect();
    G1Projective::multi_exp(&bases, inputs)
}

/// The check the engine runs on every proof it made before returning it: A, B and C on their
/// curves and in the subgroup, then [`verify`] against the job's key and public inputs
/// (without the constant one).
pub fn check(
    pvk: &PreparedVerifyingKey,
    proof: &Proof,
    inputs: &[Scalar],
) -> Result<Result<(), ProofFault>, ProveError> {
    let g1 = [("A", &proof.a), ("C", &proof.c)];
    for (part, p) in g1 {
        if !bool::from(p.is_on_curve()) {
            return Ok(Err(ProofFault::NotOnCurve { part }));
        }
        if !bool::from(p.is_torsion_free()) {
            return Ok(Err(ProofFault::NotInSubgroup { part }));
        }
    }
    if !bool::from(proof.b.is_on_curve()) {
        return Ok(Err(ProofFault::NotOnCurve { part: "B" }));
    }
    if !bool::from(proof.b.is_torsion_free()) {
        return Ok(Err(ProofFault::NotInSubgroup { part: "B" }));
    }
    Ok(match verify(pvk, proof, inputs)? {
        true => Ok(()),
        false => Err(ProofFault::Pairing),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VerifyingKey;
    use blstrs::G2Projective;

    #[test]
    fn a_key_without_public_inputs_checks_without_panicking() {
        let g1 = G1Projective::generator().to_affine();
        let g2 = G2Projective::generator().to_affine();
        let vk = VerifyingKey {
            alpha_g1: g1,
            beta_g1: g1,
            beta_g2: g2,
            gamma_g2: g2,
            delta_g1: g1,
            delta_g2: g2,
            ic: vec![g1],
        };
        let pvk = PreparedVerifyingKey::new(&vk).unwrap();
        let proof = Proof {
            a: g1,
            b: g2,
            c: g1,
        };
        // e(g, g) = e(g, g) · e(g, -g) · e(g, -g) does not hold: a pairing fault, not a panic.
        assert_eq!(check(&pvk, &proof, &[]).unwrap(), Err(ProofFault::Pairing));
        // A wrong number of inputs is a shape error.
        assert!(check(&pvk, &proof, &[Scalar::from(1u64)]).is_err());
    }
}
