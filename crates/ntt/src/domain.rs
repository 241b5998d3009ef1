//! Evaluation domains of size 2^k in Fr: roots of unity, their inverses, 1/n, and the coset
//! shift (bellperson's convention: Fr's multiplicative generator, 7).

use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::NttError;

/// The largest supported domain, 2^28 (Fr's two-adicity is 32; 2^28 elements are 8 GiB).
pub const MAX_LOG_N: u32 = 28;

/// A domain of `n = 2^log_n` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Domain {
    /// log2 of the size.
    pub log_n: u32,
    /// A primitive n-th root of unity.
    pub omega: Scalar,
    /// Its inverse.
    pub omega_inv: Scalar,
    /// 1/n.
    pub n_inv: Scalar,
}

impl Domain {
    /// The domain of size `2^log_n`, for 1 <= log_n <= [`MAX_LOG_N`].
    pub fn new(log_n: u32) -> Result<Self, NttError> {
        if log_n == 0 || log_n > MAX_LOG_N {
            return Err(NttError::DomainSize {
                log_n,
                max: MAX_LOG_N,
            });
        }
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        let omega_inv = omega.invert().unwrap_or(Scalar::ONE);
        let n_inv = Scalar::from(1u64 << log_n).invert().unwrap_or(Scalar::ONE);
        Ok(Self {
            log_n,
            omega,
            omega_inv,
            n_inv,
        })
    }

    /// The domain whose size is `len`, which must be a power of two within the limit.
    pub fn for_len(len: usize) -> Result<Self, NttError> {
        if !len.is_power_of_two() || len < 2 {
            return Err(NttError::NotPowerOfTwo { len });
        }
        Self::new(len.trailing_zeros())
    }

    /// The size n.
    pub fn size(&self) -> usize {
        1 << self.log_n
    }
}

/// The shift of the coset used by the H step: Fr's multiplicative generator.
pub fn coset_generator() -> Scalar {
    Scalar::MULTIPLICATIVE_GENERATOR
}

/// (g^n - 1)^-1, the inverse of the vanishing polynomial Z(x) = x^n - 1 on the coset g·H.
pub fn vanishing_inverse_on_coset(domain: &Domain, g: Scalar) -> Scalar {
    let z = g.pow_vartime([domain.size() as u64]) - Scalar::ONE;
    z.invert().unwrap_or(Scalar::ZERO)
}
