//! Inputs for tests and benchmarks: many random-looking points and scalars, made in seconds.

use blstrs::{Fp, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

const CHUNK: usize = 1 << 12;

macro_rules! points {
    ($name:ident, $aff:ty, $proj:ty) => {
        /// `n` points: each chunk starts at a random point and walks by random steps (one
        /// addition per point instead of a scalar multiplication), in parallel.
        pub fn $name(n: usize, seed: u64) -> Vec<$aff> {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            let steps: Vec<$proj> = (0..64).map(|_| <$proj>::random(&mut r)).collect();
            let starts: Vec<u64> = (0..n.div_ceil(CHUNK)).map(|_| r.next_u64()).collect();
            let mut out = vec![<$aff>::default(); n];
            out.par_chunks_mut(CHUNK)
                .zip(starts.par_iter())
                .for_each(|(chunk, &s)| {
                    let mut r = ChaCha8Rng::seed_from_u64(s);
                    let mut p = <$proj>::random(&mut r);
                    let proj: Vec<$proj> = (0..chunk.len())
                        .map(|_| {
                            p += steps[(r.next_u32() & 63) as usize];
                            p
                        })
                        .collect();
                    <$proj>::batch_normalize(&proj, chunk);
                });
            out
        }
    };
}

points!(g1_points, G1Affine, G1Projective);
points!(g2_points, G2Affine, G2Projective);

/// `n` uniformly random scalars, in parallel.
pub fn scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| {
        let mut r =
            ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        c.iter_mut().for_each(|x| *x = Scalar::random(&mut r));
    });
    v
}

/// `n` scalars that are 0 or 1, one in `every` being 1.
pub fn booleans(n: usize, every: usize, seed: u64) -> Vec<Scalar> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            if (r.next_u32() as usize).is_multiple_of(every.max(1)) {
                Scalar::ONE
            } else {
                Scalar::ZERO
            }
        })
        .collect()
}

/// `n` scalars shaped like a Filecoin witness: one in 16 random, 7 in 16 one, the rest zero.
pub fn mixed(n: usize, seed: u64) -> Vec<Scalar> {
    let rand = scalars(n, seed ^ 0x5a5a);
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    rand.into_iter()
        .map(|x| match r.next_u32() % 16 {
            0 => x,
            1..=7 => Scalar::ONE,
            _ => Scalar::ZERO,
        })
        .collect()
}

/// A point on G1's curve (y² = x³ + 4) that is not in the prime-order subgroup: what a checked
/// key or parameter file must refuse. The one with the smallest x (found within a few tries).
pub fn off_subgroup_g1() -> Option<G1Affine> {
    (1u64..)
        .filter_map(|k| {
            let x = Fp::from(k);
            let y = Option::<Fp>::from((x.square() * x + Fp::from(4u64)).sqrt())?;
            let p = G1Affine::from_raw_unchecked(x, y, false);
            (bool::from(p.is_on_curve()) && !bool::from(p.is_torsion_free())).then_some(p)
        })
        .next()
}
