//! The Groth16 prover's steps over any NTT and MSM implementation: the H polynomial, the G1
//! MSMs, the G2 MSM and the assembly (DESIGN.md, "The Groth16 steps"). The G1 stage's CPU
//! backend and the G2 stage run them; the GPU backend runs its own kernels for the first two
//! and shares the assembly.

use blstrs::{G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rayon::prelude::*;
use zkpipe_msm::{Density, Msm};
use zkpipe_ntt::Ntt;

use zkpipe_field::{cast, Fr};

pub(crate) use crate::key::{G1Query, WitnessQuery};
use crate::{Proof, ProveError, ProvingKey, Scalars, Witness};

/// The scalars and bitmaps of the MSMs, taken from a witness: z = inputs then aux, as
/// bellperson's queries are laid out. The two parts stay apart (a 2^27 witness's aux holds
/// 4 GB): the GPU splits z without ever concatenating it, and backends that sum z as one
/// slice make it with [`Assignment::z`].
#[derive(Debug, Clone)]
pub struct Assignment {
    /// Public inputs, the constant one first.
    pub input: Vec<Scalar>,
    /// Aux variables (in lent memory when synthesis wrote them there).
    pub aux: Scalars,
    /// Which variables of z the A query has points for (every input, then A-dense aux).
    pub a_density: Density,
    /// Which variables of z the B queries have points for.
    pub b_density: Density,
}

impl Assignment {
    /// Moves the assignment out of a witness (whose a, b, c stay).
    pub fn take(w: &mut Witness) -> Self {
        let input = std::mem::take(&mut w.input);
        let a_density = Density::all(input.len()).concat(&w.a_aux_density);
        let b_density = w.b_input_density.concat(&w.b_aux_density);
        Self {
            input,
            aux: std::mem::take(&mut w.aux),
            a_density,
            b_density,
        }
    }

    /// Gives the inputs and aux values back to the witness they were taken from.
    pub fn restore(self, w: &mut Witness) {
        w.input = self.input;
        w.aux = self.aux;
    }

    /// Number of variables in z.
    pub fn len(&self) -> usize {
        self.input.len() + self.aux.len()
    }

    /// z as one vector (written by many threads).
    pub fn z(&self) -> Vec<Scalar> {
        let mut z = Vec::with_capacity(self.len());
        z.extend_from_slice(&self.input);
        z.par_extend(self.aux.as_fr().par_iter().map(|&f| Scalar::from(f)));
        z
    }

    /// z's two parts in order, in the device layout, as
    /// [`zkpipe_msm::SplitScalars::of_parts`] takes them.
    pub fn parts(&self) -> [&[Fr]; 2] {
        [cast::scalars_as_fr(&self.input), self.aux.as_fr()]
    }

    /// Which variables of z `query` has bases for: L every aux variable, A and B their
    /// density bitmaps. Every backend sums `query`'s bases against z through this bitmap.
    pub fn density(&self, query: WitnessQuery) -> Density {
        match query {
            WitnessQuery::L => Density::from_bools(vec![false; self.input.len()])
                .concat(&Density::all(self.aux.len())),
            WitnessQuery::A => self.a_density.clone(),
            WitnessQuery::B1 | WitnessQuery::B2 => self.b_density.clone(),
        }
    }
}

/// The G1 results of a job.
#[derive(Debug, Clone, Copy)]
pub struct G1Parts {
    pub h: G1Projective,
    pub l: G1Projective,
    pub a: G1Projective,
    pub b1: G1Projective,
}

impl G1Parts {
    /// H's sum and the witness queries' sums, in [`G1Query::ALL`]'s order.
    pub fn new(h: G1Projective, [l, a, b1]: [G1Projective; 3]) -> Self {
        Self { h, l, a, b1 }
    }
}

/// a, b, c padded with zeros to the domain size n (copied by many threads when the vector
/// must grow).
pub fn padded(mut w: Vec<Scalar>, n: usize) -> Vec<Scalar> {
    if w.capacity() >= n {
        w.resize(n, Scalar::ZERO);
        return w;
    }
    let zeros = n.saturating_sub(w.len());
    let mut out = Vec::with_capacity(n);
    out.par_extend(w.par_iter().copied());
    drop(w);
    out.par_extend(rayon::iter::repeat_n(Scalar::ZERO, zeros));
    out
}

/// The n - 1 coefficients of h from a, b, c (any length up to n; padded here); an error when
/// the witness does not satisfy the circuit (the quotient's n-th coefficient is not zero).
pub fn h_coefficients(
    ntt: &dyn Ntt,
    n: usize,
    a: Vec<Scalar>,
    b: Vec<Scalar>,
    c: Vec<Scalar>,
) -> Result<Vec<Scalar>, ProveError> {
    if n == 1 {
        // A one-point domain: h has no coefficients.
        return Ok(Vec::new());
    }
    let mut h = ntt.h_quotient(padded(a, n), padded(b, n), padded(c, n))?;
    check_satisfied(h.get(n - 1).copied())?;
    h.truncate(n - 1);
    Ok(h)
}

/// a·b - c vanishes on the domain exactly when (a·b - c) / Z is a polynomial, of degree at most
/// n - 2: the quotient interpolated from the coset then has a zero n-th coefficient. A witness
/// whose top coefficient is anything else does not satisfy the circuit, and its proof would
/// not verify.
pub(crate) fn check_satisfied(top: Option<Scalar>) -> Result<(), ProveError> {
    match top {
        Some(t) if t != Scalar::ZERO => Err(ProveError::Unsatisfied),
        _ => Ok(()),
    }
}

/// The G1 MSMs: H, L, A and B1.
pub fn g1_msms(
    msm: &dyn Msm,
    key: &ProvingKey,
    h: &[Scalar],
    z: &Assignment,
) -> Result<G1Parts, ProveError> {
    let h = msm
        .g1(&key.h, h, None)
        .map_err(|source| ProveError::Msm { query: "h", source })?;
    let values = z.z();
    let mut sums = [G1Projective::identity(); 3];
    for (sum, q) in sums.iter_mut().zip(G1Query::ALL) {
        *sum = msm
            .g1(key.g1_query(q), &values, Some(&z.density(q.query())))
            .map_err(|source| ProveError::Msm {
                query: q.query().name(),
                source,
            })?;
    }
    Ok(G1Parts::new(h, sums))
}

/// The G2 MSM: B2.
pub fn g2_msm(msm: &dyn Msm, key: &ProvingKey, z: &Assignment) -> Result<G2Projective, ProveError> {
    let q = WitnessQuery::B2;
    msm.g2(&key.b_g2, &z.z(), Some(&z.density(q)))
        .map_err(|source| ProveError::Msm {
            query: q.name(),
            source,
        })
}

/// A = alpha + A' + r·delta; B = beta + B2 + s·delta; C = H + L + s·A' + r·B1 + r·s·delta +
/// s·alpha + r·beta (bellperson's assembly, equal to s·A + r·B1 - r·s·delta with A, B1 the
/// full sums).
pub fn assemble(key: &ProvingKey, g1: &G1Parts, b2: G2Projective, r: Scalar, s: Scalar) -> Proof {
    let vk = &key.vk;
    let a = G1Projective::from(vk.alpha_g1) + g1.a + vk.delta_g1 * r;
    let b = G2Projective::from(vk.beta_g2) + b2 + vk.delta_g2 * s;
    let c = g1.h
        + g1.l
        + g1.a * s
        + g1.b1 * r
        + vk.delta_g1 * (r * s)
        + vk.alpha_g1 * s
        + vk.beta_g1 * r;
    Proof {
        a: a.to_affine(),
        b: b.to_affine(),
        c: c.to_affine(),
    }
}
