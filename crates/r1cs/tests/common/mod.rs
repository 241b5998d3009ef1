//! Shared by the tests: random recordings with their rows kept by hand, and witnesses.

#![allow(dead_code)]

use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkpipe_field::Fr;
use zkpipe_r1cs::{CircuitId, Recording, RecordingBuilder, Variable};

/// A random recording with `n` constraints over a few inputs and aux variables, with its
/// rows kept as plain lists of terms to evaluate by hand.
pub struct Random {
    pub rec: Recording,
    pub rows: Vec<[Vec<(Variable, Scalar)>; 3]>,
    pub inputs: usize,
    pub aux: usize,
}

/// `n` random constraints over 3 inputs and 20 aux variables.
pub fn random(n: usize, seed: u64) -> Random {
    random_with(n, 3, 20, seed)
}

/// How many terms the random combinations hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lengths {
    /// Up to 4 terms.
    Short,
    /// Up to 4 terms, but one combination in 8 of a length drawn from [`LONG`]: the bit
    /// packings and multi-operand additions of real circuits.
    WithLong,
}

/// The lengths of the long combinations: around the warp's threshold and size, and far past.
pub const LONG: [usize; 9] = [15, 16, 17, 31, 32, 33, 64, 255, 1000];

/// `n` random constraints of up to 4 terms a combination over `inputs` and `aux` variables,
/// coefficients 1, -1, small or random.
pub fn random_with(n: usize, inputs: usize, aux: usize, seed: u64) -> Random {
    random_shaped(n, inputs, aux, Lengths::Short, seed)
}

/// `n` random constraints over `inputs` and `aux` variables with combinations of `lengths`,
/// coefficients 1, -1, small or random.
pub fn random_shaped(n: usize, inputs: usize, aux: usize, lengths: Lengths, seed: u64) -> Random {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let mut b = RecordingBuilder::new();
    for _ in 0..inputs {
        b.alloc_input();
    }
    for _ in 0..aux {
        b.alloc_aux();
    }
    let mut rows = Vec::new();
    for _ in 0..n {
        let lc = |r: &mut ChaCha8Rng| -> Vec<(Variable, Scalar)> {
            let len = match lengths {
                Lengths::WithLong if r.gen_range(0..8) == 0 => LONG[r.gen_range(0..LONG.len())],
                _ => r.gen_range(0..5),
            };
            (0..len)
                .map(|_| {
                    let v = match r.gen_bool(0.3) {
                        true => Variable::Input(r.gen_range(0..inputs)),
                        false => Variable::Aux(r.gen_range(0..aux)),
                    };
                    let c = match r.gen_range(0..4) {
                        0 => Scalar::ONE,
                        1 => -Scalar::ONE,
                        2 => Scalar::from(r.gen_range(2..100u64)),
                        _ => Scalar::random(&mut *r),
                    };
                    (v, c)
                })
                .collect()
        };
        let row = [lc(&mut r), lc(&mut r), lc(&mut r)];
        b.enforce(row[0].clone(), row[1].clone(), row[2].clone())
            .unwrap();
        rows.push(row);
    }
    let rec = b.finish(CircuitId(format!("random-{n}-{seed}"))).unwrap();
    Random {
        rec,
        rows,
        inputs,
        aux,
    }
}

pub fn witness(inputs: usize, aux: usize, seed: u64) -> (Vec<Scalar>, Vec<Fr>) {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let i = (0..inputs).map(|_| Scalar::random(&mut r)).collect();
    let a = (0..aux).map(|_| Fr::from(Scalar::random(&mut r))).collect();
    (i, a)
}
