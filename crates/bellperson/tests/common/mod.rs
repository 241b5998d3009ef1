//! Shared by the interop tests: circuits with their bellperson parameters and public inputs.

#![allow(dead_code)]

use bellperson::groth16::{generate_random_parameters, Parameters};
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zkpipe_bellperson::circuits::{Cube, RandomR1cs, Sha256Blocks};

#[derive(Debug)]
/// A circuit instance: its setup shape, its witness-carrying value and its public inputs.
pub struct Case<C> {
    pub name: &'static str,
    pub setup: C,
    pub circuit: C,
    pub inputs: Vec<Scalar>,
}

pub fn params<C: Circuit<Scalar>>(setup: C, seed: u64) -> Parameters<Bls12> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    generate_random_parameters::<Bls12, _, _>(setup, &mut rng).expect("setup")
}

pub fn cube(x: u64) -> Case<Cube> {
    let x = Scalar::from(x);
    Case {
        name: "cube",
        setup: Cube { x: None },
        circuit: Cube { x: Some(x) },
        inputs: vec![Cube::output(x)],
    }
}

pub fn sha(blocks: usize, seed: u8) -> Case<Sha256Blocks> {
    let pre: Vec<u8> = (0..Sha256Blocks::preimage_len(blocks))
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    Case {
        name: "sha256",
        setup: Sha256Blocks {
            preimage: None,
            blocks,
        },
        inputs: Sha256Blocks::public_inputs(&pre),
        circuit: Sha256Blocks {
            preimage: Some(pre),
            blocks,
        },
    }
}

pub fn random_r1cs(constraints: usize, seed: u64) -> Case<RandomR1cs> {
    let c = RandomR1cs {
        constraints,
        inputs: 3,
        seed,
    };
    // The inputs are the first random values the circuit draws.
    let inputs = {
        use rand::SeedableRng;
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        (0..3).map(|_| Scalar::random(&mut r)).collect()
    };
    Case {
        name: "random r1cs",
        setup: c,
        circuit: c,
        inputs,
    }
}

pub fn rs(seed: u64) -> (Scalar, Scalar) {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (Scalar::random(&mut r), Scalar::random(&mut r))
}
