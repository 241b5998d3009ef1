//! The CPU implementation: iterative radix-2 transforms with blstrs arithmetic on all cores.

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::domain::Domain;
use crate::{bit_reverse, Direction, Ntt, NttConfig, NttError, Ordering};

/// The CPU NTT (rayon, all cores). The reference that the GPU is checked against.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuNtt;

impl CpuNtt {
    /// The CPU implementation.
    pub fn new() -> Self {
        Self
    }
}

/// Permutes `a` into bit-reversed order (an involution).
pub(crate) fn bit_reverse_permute(a: &mut [Scalar]) {
    let bits = a.len().trailing_zeros();
    for i in 0..a.len() {
        let j = bit_reverse(i, bits);
        if i < j {
            a.swap(i, j);
        }
    }
}

/// Multiplies a[i] by `c · s^i`.
pub(crate) fn scale_by_powers(a: &mut [Scalar], s: Scalar, c: Scalar) {
    const CHUNK: usize = 1 << 12;
    a.par_chunks_mut(CHUNK).enumerate().for_each(|(k, chunk)| {
        let mut w = c * s.pow_vartime([(k * CHUNK) as u64]);
        for x in chunk {
            *x *= w;
            w *= s;
        }
    });
}

/// Natural in, natural out: X_k = sum_j x_j w^(jk), with w a primitive n-th root of unity.
fn ntt_natural(a: &mut [Scalar], omega: Scalar) {
    let n = a.len();
    if n < 2 {
        return;
    }
    bit_reverse_permute(a);
    // powers[j] = omega^j for j < n/2.
    let mut powers = vec![Scalar::ONE; n / 2];
    const CHUNK: usize = 1 << 12;
    powers
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut w = omega.pow_vartime([(k * CHUNK) as u64]);
            for p in chunk {
                *p = w;
                w *= omega;
            }
        });
    let mut half = 1;
    while half < n {
        let m = 2 * half;
        let stride = n / m;
        let butterfly = |(j, (lo, hi)): (usize, (&mut Scalar, &mut Scalar))| {
            let t = *hi * powers[j * stride];
            *hi = *lo - t;
            *lo += t;
        };
        if n / m >= 64 {
            a.par_chunks_mut(m).for_each(|block| {
                let (lo, hi) = block.split_at_mut(half);
                lo.iter_mut()
                    .zip(hi.iter_mut())
                    .enumerate()
                    .for_each(butterfly);
            });
        } else {
            for block in a.chunks_mut(m) {
                let (lo, hi) = block.split_at_mut(half);
                lo.par_iter_mut()
                    .zip(hi.par_iter_mut())
                    .enumerate()
                    .for_each(butterfly);
            }
        }
        half = m;
    }
}

impl Ntt for CpuNtt {
    fn transform(
        &self,
        data: &mut [Scalar],
        dir: Direction,
        cfg: &NttConfig,
    ) -> Result<(), NttError> {
        let d = Domain::for_len(data.len())?;
        if matches!(cfg.ordering, Ordering::RN | Ordering::RR) {
            bit_reverse_permute(data);
        }
        match dir {
            Direction::Forward => {
                if let Some(s) = cfg.coset.shift() {
                    scale_by_powers(data, s, Scalar::ONE);
                }
                ntt_natural(data, d.omega);
            }
            Direction::Inverse => {
                ntt_natural(data, d.omega_inv);
                let s_inv = cfg
                    .coset
                    .shift()
                    .map(|s| s.invert().unwrap_or(Scalar::ZERO));
                match s_inv {
                    Some(si) => scale_by_powers(data, si, d.n_inv),
                    None => data.par_iter_mut().for_each(|x| *x *= d.n_inv),
                }
            }
        }
        if matches!(cfg.ordering, Ordering::NR | Ordering::RR) {
            bit_reverse_permute(data);
        }
        Ok(())
    }

    fn h_quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, NttError> {
        crate::h::h_quotient_cpu(self, a, b, c)
    }

    fn name(&self) -> String {
        "cpu".to_string()
    }
}
