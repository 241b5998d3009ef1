//! The H-polynomial step of Groth16 on the host, through any [`Ntt`].

use blstrs::Scalar;
use rayon::prelude::*;

use crate::domain::{coset_generator, vanishing_inverse_on_coset, Domain};
use crate::{check_batch, Direction, Ntt, NttConfig};

/// h = (a·b - c) / Z from the evaluations a, b, c on the domain: each is interpolated
/// (inverse NTT) and evaluated on the coset g·H, where Z = g^n - 1 is constant; the quotient
/// is interpolated back from the coset. Returns the n - 1 coefficients of h.
pub fn h_polynomial_cpu(
    ntt: &dyn Ntt,
    mut a: Vec<Scalar>,
    mut b: Vec<Scalar>,
    mut c: Vec<Scalar>,
) -> Result<Vec<Scalar>, crate::NttError> {
    let n = check_batch([a.len(), b.len(), c.len()].into_iter())?;
    let d = Domain::for_len(n)?;
    let plain = NttConfig::default();
    let coset = NttConfig::coset();
    {
        let mut batch = [a.as_mut_slice(), b.as_mut_slice(), c.as_mut_slice()];
        ntt.transform_batch(&mut batch, Direction::Inverse, &plain)?;
        ntt.transform_batch(&mut batch, Direction::Forward, &coset)?;
    }
    b.par_iter()
        .zip(c.par_iter())
        .zip(a.par_iter_mut())
        .for_each(|((b, c), a)| *a = *a * b - c);
    drop(b);
    drop(c);
    let z_inv = vanishing_inverse_on_coset(&d, coset_generator());
    a.par_iter_mut().for_each(|x| *x *= z_inv);
    ntt.transform(&mut a, Direction::Inverse, &coset)?;
    a.truncate(n - 1);
    Ok(a)
}
