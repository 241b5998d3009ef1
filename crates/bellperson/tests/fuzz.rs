//! Fuzzing on the CPU, by property tests (issue 14): generated bellperson circuits, satisfied
//! or not, through `synthesize` and the engine. Synthesis never panics; a proof the engine
//! returns equals bellperson's for the same r and s, byte for byte; a satisfied circuit
//! always proves; a circuit with exactly one broken constraint never does (the H step's check).
//! `ZKPIPE_FUZZ_CASES` sets the number of cases (32 by default, as CI runs them).

mod common;

use std::sync::Arc;

use bellperson::groth16::create_proof;
use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::{Bls12, Scalar};
use common::rs;
use proptest::prelude::*;
use zkpipe_bellperson::{proving_key, synthesize};
use zkpipe_pipeline::{Backend, Config, Engine, ProveError, Randomness};

fn cases() -> u32 {
    std::env::var("ZKPIPE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

/// One step of a generated circuit. Indices pick among the variables so far (the constant one
/// first), modulo their number.
#[derive(Debug, Clone)]
enum Op {
    /// A private variable of this value.
    Aux(u64),
    /// A public input of this value.
    Input(u64),
    /// A new private variable x·y, and the constraint x·y = it (always satisfied).
    Product(usize, usize),
    /// The constraint a·b = c for sums of (coefficient, variable): satisfied or not.
    Enforce([Vec<(u64, usize)>; 3]),
}

fn op() -> impl Strategy<Value = Op> {
    let lc = || proptest::collection::vec((0u64..5, any::<usize>()), 0..4);
    // Free constraints are rare, so that about half the circuits hold.
    prop_oneof![
        3 => (0u64..4).prop_map(Op::Aux),
        2 => any::<u64>().prop_map(Op::Aux),
        2 => (0u64..4).prop_map(Op::Input),
        6 => (any::<usize>(), any::<usize>()).prop_map(|(x, y)| Op::Product(x, y)),
        1 => [lc(), lc(), lc()].prop_map(Op::Enforce),
    ]
}

/// A circuit of generated steps; `values` off gives the setup's circuit (no assignment).
#[derive(Debug, Clone)]
struct Generated {
    ops: Vec<Op>,
    values: bool,
}

impl Generated {
    /// Whether every constraint holds for the generated values; and how many do not.
    fn broken(&self) -> usize {
        let mut vals = vec![Scalar::from(1u64)];
        let mut broken = 0;
        let lc = |terms: &[(u64, usize)], vals: &[Scalar]| {
            terms.iter().fold(Scalar::from(0u64), |acc, &(c, i)| {
                acc + Scalar::from(c) * vals[i % vals.len()]
            })
        };
        for op in &self.ops {
            match op {
                Op::Aux(v) | Op::Input(v) => vals.push(Scalar::from(*v)),
                Op::Product(x, y) => {
                    let p = vals[x % vals.len()] * vals[y % vals.len()];
                    vals.push(p);
                }
                Op::Enforce([a, b, c]) => {
                    if lc(a, &vals) * lc(b, &vals) != lc(c, &vals) {
                        broken += 1;
                    }
                }
            }
        }
        broken
    }
}

impl Circuit<Scalar> for Generated {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut vars: Vec<(Variable, Scalar)> = vec![(CS::one(), Scalar::from(1u64))];
        let value = |v: Scalar| match self.values {
            true => Ok(v),
            false => Err(SynthesisError::AssignmentMissing),
        };
        let lc = |terms: &[(u64, usize)], vars: &[(Variable, Scalar)]| {
            terms
                .iter()
                .fold(LinearCombination::zero(), |acc, &(c, i)| {
                    acc + (Scalar::from(c), vars[i % vars.len()].0)
                })
        };
        for (k, op) in self.ops.iter().enumerate() {
            match op {
                Op::Aux(v) => {
                    // Constrained (v·1 = v), as bellperson's setup wants every variable to be.
                    let v = Scalar::from(*v);
                    let x = cs.alloc(|| format!("aux {k}"), || value(v))?;
                    cs.enforce(|| format!("a {k}"), |l| l + x, |l| l + CS::one(), |l| l + x);
                    vars.push((x, v));
                }
                Op::Input(v) => {
                    let v = Scalar::from(*v);
                    vars.push((cs.alloc_input(|| format!("in {k}"), || value(v))?, v));
                }
                Op::Product(x, y) => {
                    let (a, b) = (vars[x % vars.len()], vars[y % vars.len()]);
                    let p = a.1 * b.1;
                    let v = cs.alloc(|| format!("prod {k}"), || value(p))?;
                    cs.enforce(|| format!("c {k}"), |l| l + a.0, |l| l + b.0, |l| l + v);
                    vars.push((v, p));
                }
                Op::Enforce([a, b, c]) => {
                    let (a, b, c) = (lc(a, &vars), lc(b, &vars), lc(c, &vars));
                    cs.enforce(|| format!("e {k}"), |_| a, |_| b, |_| c);
                }
            }
        }
        Ok(())
    }
}

fn engine() -> &'static Engine {
    static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| {
        Engine::start(Config::default().with_backend(Backend::Cpu)).expect("a CPU engine starts")
    })
}

/// What the cases ended in: proofs equal to bellperson's, refusals of unsatisfied circuits,
/// proofs of unsatisfied circuits (two or more broken constraints can cancel in the H step's
/// check; they still equal bellperson's), circuits bellperson's setup refused.
#[derive(Debug, Default)]
struct Tally {
    proofs: u64,
    refused: u64,
    unsatisfied_proofs: u64,
    no_setup: u64,
}

/// One case; records its outcome.
fn case(ops: Vec<Op>, seed: u64, tally: &std::sync::Mutex<Tally>) -> Result<(), TestCaseError> {
    let setup = Generated {
        ops: ops.clone(),
        values: false,
    };
    let circuit = Generated { ops, values: true };
    let broken = circuit.broken();
    let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
    // bellperson's setup refuses some circuits: those have no parameters to prove with.
    let p = {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        bellperson::groth16::generate_random_parameters::<Bls12, _, _>(setup, &mut rng)
    };
    let Ok(p) = p else {
        t.no_setup += 1;
        return Ok(());
    };
    let key = Arc::new(proving_key(&p).expect("bellperson's parameters convert"));
    let w = synthesize(circuit.clone()).expect("synthesis of a generated circuit");
    let (r, s) = rs(seed ^ 1);
    let ours = engine()
        .submit(&key, w, Randomness::Fixed { r, s })
        .and_then(|h| h.wait());
    match ours {
        Ok(proof) => {
            prop_assert!(
                broken != 1,
                "a proof for a circuit with one broken constraint"
            );
            let theirs = create_proof::<Bls12, _, _>(circuit, &p, r, s).expect("bellperson proves");
            let mut bytes = Vec::new();
            theirs.write(&mut bytes).expect("a proof writes");
            prop_assert_eq!(proof.to_bytes().to_vec(), bytes);
            match broken {
                0 => t.proofs += 1,
                _ => t.unsatisfied_proofs += 1,
            }
        }
        Err(ProveError::Unsatisfied) => {
            prop_assert!(broken > 0, "a satisfied circuit refused");
            t.refused += 1;
        }
        Err(e) => prop_assert!(false, "unexpected error: {}", e),
    }
    Ok(())
}

#[test]
fn generated_circuits_prove_as_bellperson_does() {
    let tally = std::sync::Mutex::new(Tally::default());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases()));
    let strategy = (proptest::collection::vec(op(), 0..24), any::<u64>());
    let result = runner.run(&strategy, |(ops, seed)| case(ops, seed, &tally));
    let t = tally.into_inner().unwrap_or_else(|p| p.into_inner());
    println!("{} cases: {t:?}", cases());
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        t.proofs > 0 && t.refused > 0,
        "the cases reached neither outcome: {t:?}"
    );
}
