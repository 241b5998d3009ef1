//! The H-polynomial step of Groth16 on the host, through any [`Ntt`].

use blstrs::Scalar;
use rayon::prelude::*;

use crate::domain::{coset_generator, vanishing_inverse_on_coset, Domain};
use crate::{check_batch, Direction, Ntt, NttConfig};

/// h = (a·b - c) / Z from the evaluations a, b, c on the domain H. Returns the n - 1
/// coefficients of h.
///
/// bellperson's way takes seven transforms: a, b and c interpolated and evaluated on the coset
/// g·H, where Z = g^n - 1 is constant, and the quotient interpolated back. This takes six:
/// interpolation from the coset is linear and gives back any polynomial of degree below n, so
/// interpolating (a·b - c)/Z equals interpolating a·b/Z minus C/Z, where C is c's polynomial
/// (its inverse transform); c never visits the coset. Both ways give the same n values for any
/// inputs, divisible or not (the tests check this against the seven-transform way).
pub fn h_polynomial_cpu(
    ntt: &dyn Ntt,
    a: Vec<Scalar>,
    b: Vec<Scalar>,
    c: Vec<Scalar>,
) -> Result<Vec<Scalar>, crate::NttError> {
    let mut h = h_quotient_cpu(ntt, a, b, c)?;
    h.truncate(h.len().saturating_sub(1));
    Ok(h)
}

/// As [`h_polynomial_cpu`], with the n-th coefficient kept (zero when a·b - c vanishes on
/// the domain).
pub fn h_quotient_cpu(
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
    }
    {
        let mut batch = [a.as_mut_slice(), b.as_mut_slice()];
        ntt.transform_batch(&mut batch, Direction::Forward, &coset)?;
    }
    let z_inv = vanishing_inverse_on_coset(&d, coset_generator());
    a.par_iter_mut()
        .zip(b.par_iter())
        .for_each(|(a, b)| *a = *a * b * z_inv);
    drop(b);
    ntt.transform(&mut a, Direction::Inverse, &coset)?;
    a.par_iter_mut()
        .zip(c.par_iter())
        .for_each(|(a, c)| *a -= *c * z_inv);
    Ok(a)
}
