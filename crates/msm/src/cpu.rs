//! The CPU reference: blst's multi-exponentiation, and a batch-addition path for scalars that
//! are all 0 or 1.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Group;
use rayon::prelude::*;

use crate::{Bases, Density, Msm, MsmError};

/// The CPU MSM (blst's Pippenger on the host's cores).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuMsm;

impl CpuMsm {
    /// The CPU implementation.
    pub fn new() -> Self {
        Self
    }
}

/// The scalars that go with the bases: all of them, or those the bitmap selects.
pub(crate) fn paired(
    bases: usize,
    scalars: &[Scalar],
    density: Option<&Density>,
) -> Result<Vec<Scalar>, MsmError> {
    match density {
        Some(d) => {
            d.check(scalars.len(), bases)?;
            Ok(d.select(scalars))
        }
        None if bases != scalars.len() => Err(MsmError::LengthMismatch {
            bases,
            scalars: scalars.len(),
        }),
        None => Ok(scalars.to_vec()),
    }
}

/// True when every scalar is 0 or 1 (most of a Filecoin witness).
fn is_boolean(scalars: &[Scalar]) -> bool {
    scalars
        .par_iter()
        .all(|s| bool::from(s.is_zero()) || *s == Scalar::ONE)
}

macro_rules! msm {
    ($name:ident, $aff:ty, $proj:ty) => {
        fn $name(bases: &Bases<$aff>, scalars: &[Scalar]) -> $proj {
            let points = bases.points();
            if is_boolean(scalars) {
                // Batch addition: the sum of the selected points, no windows.
                return points
                    .par_iter()
                    .zip(scalars.par_iter())
                    .filter(|(_, s)| !bool::from(s.is_zero()))
                    .map(|(p, _)| <$proj>::from(*p))
                    .reduce(<$proj>::identity, |a, b| a + b);
            }
            if points.is_empty() {
                return <$proj>::identity();
            }
            let proj: Vec<$proj> = points.par_iter().map(|p| <$proj>::from(*p)).collect();
            <$proj>::multi_exp(&proj, scalars)
        }
    };
}

msm!(g1_msm, G1Affine, G1Projective);
msm!(g2_msm, G2Affine, G2Projective);

impl Msm for CpuMsm {
    fn g1(
        &self,
        bases: &Bases<G1Affine>,
        scalars: &[Scalar],
        density: Option<&Density>,
    ) -> Result<G1Projective, MsmError> {
        let s = paired(bases.len(), scalars, density)?;
        Ok(g1_msm(bases, &s))
    }

    fn g2(
        &self,
        bases: &Bases<G2Affine>,
        scalars: &[Scalar],
        density: Option<&Density>,
    ) -> Result<G2Projective, MsmError> {
        let s = paired(bases.len(), scalars, density)?;
        Ok(g2_msm(bases, &s))
    }

    fn name(&self) -> String {
        "cpu".to_string()
    }
}
