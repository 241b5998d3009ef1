//! Base points, checked where they enter the engine, and canonical scalars.

use blstrs::Scalar;
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;
use std::sync::Arc;
use zkpipe_cuda::Context;
use zkpipe_pinned::PinnableVec;

use crate::MsmError;

/// An affine point type the MSM stage takes: G1 or G2.
pub trait Point: PrimeCurveAffine<Scalar = Scalar> + Send + Sync + Copy {
    /// On the curve (the identity counts as on it).
    fn on_curve(&self) -> bool;
    /// In the prime-order subgroup.
    fn in_subgroup(&self) -> bool;
}

impl Point for blstrs::G1Affine {
    fn on_curve(&self) -> bool {
        bool::from(self.is_identity()) || bool::from(self.is_on_curve())
    }
    fn in_subgroup(&self) -> bool {
        bool::from(self.is_identity()) || bool::from(self.is_torsion_free())
    }
}

impl Point for blstrs::G2Affine {
    fn on_curve(&self) -> bool {
        bool::from(self.is_identity()) || bool::from(self.is_on_curve())
    }
    fn in_subgroup(&self) -> bool {
        bool::from(self.is_identity()) || bool::from(self.is_torsion_free())
    }
}

/// The bases of an MSM (a proving key's points), shared read-only by every call. They can be
/// page-locked in place ([`Bases::pin`]) so that uploads read them at pinned speed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bases<P> {
    points: PinnableVec<P>,
}

impl<P: Point> Bases<P> {
    /// Checks every point (on the curve, in the subgroup; in parallel) and keeps them.
    pub fn new(points: Vec<P>) -> Result<Self, MsmError> {
        if let Some(index) = points.par_iter().position_first(|p| !p.on_curve()) {
            return Err(MsmError::NotOnCurve { index });
        }
        if let Some(index) = points.par_iter().position_first(|p| !p.in_subgroup()) {
            return Err(MsmError::NotInSubgroup { index });
        }
        Ok(Self {
            points: PinnableVec::new(points),
        })
    }

    /// Keeps the points without checking them: for keys that were checked before (a key
    /// loaded from a trusted file). Points off the curve give wrong results, not errors.
    pub fn new_unchecked(points: Vec<P>) -> Self {
        Self {
            points: PinnableVec::new(points),
        }
    }

    /// Page-locks the points in place (once; later calls return `Ok(false)`), so that every
    /// upload of them is a DMA from this memory. About 60 ms per GiB.
    pub fn pin(&self, ctx: &Arc<Context>) -> Result<bool, zkpipe_pinned::Error> {
        self.points.pin(ctx)
    }

    /// True once [`Bases::pin`] has page-locked the points.
    pub fn is_pinned(&self) -> bool {
        self.points.is_pinned()
    }

    /// The points.
    pub fn points(&self) -> &[P] {
        &self.points
    }

    /// The points' vector, page-locked or not.
    pub(crate) fn pinnable(&self) -> &PinnableVec<P> {
        &self.points
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// Scalars from 32-byte little-endian canonical encodings; an encoding of a value >= r is an
/// error naming its index.
pub fn scalars_from_le_bytes(bytes: &[[u8; 32]]) -> Result<Vec<Scalar>, MsmError> {
    bytes
        .par_iter()
        .enumerate()
        .map(|(index, b)| {
            Option::from(Scalar::from_bytes_le(b)).ok_or(MsmError::NonCanonical { index })
        })
        .collect()
}
