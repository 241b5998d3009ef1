//! zkpipe-proptests: strategies shared by the property tests in `tests/`.

#![forbid(unsafe_code)]

use blstrs::Scalar;
use ff::Field;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Any scalar: uniform (from a generated seed), or one of the edge values 0,
/// 1, 2 and p - 1.
pub fn scalar() -> impl Strategy<Value = Scalar> {
    prop_oneof![
        4 => any::<u64>().prop_map(|seed| Scalar::random(ChaCha8Rng::seed_from_u64(seed))),
        1 => Just(Scalar::ZERO),
        1 => Just(Scalar::ONE),
        1 => Just(Scalar::ONE.double()),
        1 => Just(-Scalar::ONE),
    ]
}
