//! Fuzzing on the CPU, by property tests (issue 14): proof bytes of any length and content into
//! `Proof::from_bytes` and `verify`, and the VRAM budget against a model, under any sequence of
//! grants and releases. Never a panic; every answer as the model says. `ZKPIPE_FUZZ_CASES`
//! sets the number of cases (256 by default, as CI runs them).

use blstrs::Scalar;
use proptest::prelude::*;
use zkpipe_pipeline::testgen::{random_key_parts, Shape};
use zkpipe_pipeline::{verify, PreparedVerifyingKey, Proof, ProveError, PROOF_BYTES};
use zkpipe_stream::{BudgetError, VramBudget, VramGrant};

fn cases() -> u32 {
    std::env::var("ZKPIPE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn pvk() -> &'static PreparedVerifyingKey {
    static PVK: std::sync::OnceLock<PreparedVerifyingKey> = std::sync::OnceLock::new();
    PVK.get_or_init(|| PreparedVerifyingKey::new(&key_parts().vk).expect("a generated key checks"))
}

/// A valid proof's bytes (points from the given scalars), with one byte changed when `flip`
/// is some: (index, xor).
fn valid_proof(a: u64, b: u64, c: u64, flip: Option<(usize, u8)>) -> Vec<u8> {
    use group::{Curve, Group};
    let g1 = |k: u64| (blstrs::G1Projective::generator() * Scalar::from(k)).to_affine();
    let g2 = (blstrs::G2Projective::generator() * Scalar::from(b)).to_affine();
    let mut bytes = Proof {
        a: g1(a),
        b: g2,
        c: g1(c),
    }
    .to_bytes()
    .to_vec();
    if let Some((i, x)) = flip {
        bytes[i % PROOF_BYTES] ^= x;
    }
    bytes
}

/// Bytes of any length, most of them a proof's length: random, or a valid proof, as it is or
/// with one byte changed.
fn proof_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => proptest::collection::vec(any::<u8>(), PROOF_BYTES),
        1 => proptest::collection::vec(any::<u8>(), 0..2 * PROOF_BYTES),
        2 => (any::<u64>(), any::<u64>(), any::<u64>(), proptest::option::of((any::<usize>(), 1u8..)))
            .prop_map(|(a, b, c, flip)| valid_proof(a, b, c, flip)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn proof_bytes_decode_or_are_refused_and_verify_never_panics(
        bytes in proof_bytes(),
        inputs in proptest::collection::vec(any::<u64>(), 0..5),
    ) {
        match Proof::from_bytes(&bytes) {
            Ok(proof) => {
                prop_assert_eq!(&proof.to_bytes()[..], &bytes[..], "a decoded proof encodes back");
                let inputs: Vec<Scalar> = inputs.iter().map(|&x| Scalar::from(x)).collect();
                match verify(pvk(), &proof, &inputs) {
                    Ok(_) => prop_assert_eq!(inputs.len(), 2),
                    Err(ProveError::Shape { expected, got, .. }) => {
                        prop_assert_eq!((expected, got), (2, inputs.len()));
                    }
                    Err(e) => prop_assert!(false, "unexpected error {e}"),
                }
            }
            Err(ProveError::Shape { expected, got, .. }) => {
                prop_assert_eq!((expected, got), (PROOF_BYTES, bytes.len()));
            }
            Err(ProveError::BadProof { part }) => {
                prop_assert!(["A", "B", "C"].contains(&part));
                prop_assert_eq!(bytes.len(), PROOF_BYTES);
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

/// An operation on the budget.
#[derive(Debug, Clone)]
enum Op {
    /// `try_acquire` this many bytes.
    Acquire(usize),
    /// Release part of the grant at this index (modulo the live grants).
    Release(usize, usize),
    /// Drop the grant at this index.
    Drop(usize),
}

fn op(capacity: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..capacity * 2).prop_map(Op::Acquire),
        2 => (any::<usize>(), 0..capacity + 1).prop_map(|(i, b)| Op::Release(i, b)),
        2 => any::<usize>().prop_map(Op::Drop),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_vram_budget_answers_as_a_model_of_it(
        (capacity, ops) in (1usize..1 << 20).prop_flat_map(|c| {
            (Just(c), proptest::collection::vec(op(c), 0..64))
        }),
    ) {
        let budget = VramBudget::with_capacity(capacity);
        let mut grants: Vec<VramGrant> = Vec::new();
        let mut high = 0usize;
        for o in ops {
            let held: usize = grants.iter().map(VramGrant::bytes).sum();
            match o {
                Op::Acquire(bytes) => match budget.try_acquire(bytes) {
                    Err(BudgetError::NeverFits { needed, capacity: c }) => {
                        prop_assert!(bytes > capacity);
                        prop_assert_eq!((needed, c), (bytes, capacity));
                    }
                    Ok(None) => prop_assert!(bytes <= capacity && held + bytes > capacity),
                    Ok(Some(g)) => {
                        prop_assert!(held + bytes <= capacity);
                        prop_assert_eq!(g.bytes(), bytes);
                        grants.push(g);
                    }
                    Err(e) => prop_assert!(false, "unexpected error {e}"),
                },
                Op::Release(i, bytes) if !grants.is_empty() => {
                    let n = grants.len();
                    let g = &mut grants[i % n];
                    let before = g.bytes();
                    g.release(bytes);
                    prop_assert_eq!(g.bytes(), before - bytes.min(before));
                }
                Op::Drop(i) if !grants.is_empty() => {
                    let n = grants.len();
                    drop(grants.swap_remove(i % n));
                }
                _ => {}
            }
            let held: usize = grants.iter().map(VramGrant::bytes).sum();
            high = high.max(held);
            let st = budget.stats();
            prop_assert_eq!(st.in_use, held);
            prop_assert!(st.in_use <= st.capacity);
            prop_assert_eq!(st.high_water, high);
        }
        drop(grants);
        prop_assert_eq!(budget.stats().in_use, 0);
    }
}

/// The parts of a small generated key, made once.
fn key_parts() -> &'static zkpipe_pipeline::KeyParts {
    static PARTS: std::sync::OnceLock<zkpipe_pipeline::KeyParts> = std::sync::OnceLock::new();
    PARTS.get_or_init(|| random_key_parts(&key_shape(), 2))
}

/// The small key's shape: domain 16, 3 inputs, 10 aux.
fn key_shape() -> Shape {
    Shape {
        log_n: 4,
        inputs: 3,
        aux: 10,
        a_every: 4,
        b_every: 2,
    }
}

/// A density: mostly the key's, else any bits.
fn density(key: zkpipe_msm::Density, max: usize) -> impl Strategy<Value = zkpipe_msm::Density> {
    prop_oneof![
        6 => Just(key),
        1 => proptest::collection::vec(any::<bool>(), 0..max).prop_map(zkpipe_msm::Density::from_bools),
    ]
}

/// A G1 point from 96 bytes read as an uncompressed encoding without checks: on the curve or
/// not, in the subgroup or not, the identity or not.
fn raw_g1(bytes: &[u8]) -> Option<blstrs::G1Affine> {
    let arr: [u8; 96] = bytes.try_into().ok()?;
    Option::from(blstrs::G1Affine::from_uncompressed_unchecked(&arr))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Key parts with points from arbitrary bytes: `ProvingKey::new` answers with a key or an
    /// error naming the query; a key it accepts has only points on the curve and in the
    /// subgroup.
    #[test]
    fn key_parts_from_any_point_bytes_are_checked(
        at in 0usize..4,
        index in 0usize..10,
        bytes in proptest::collection::vec(any::<u8>(), 96),
        use_generator_bytes in any::<bool>(),
    ) {
        let mut parts = key_parts().clone();
        let point = match use_generator_bytes {
            // A valid encoding with one coordinate's low byte changed.
            true => {
                use group::prime::PrimeCurveAffine;
                let mut g = blstrs::G1Affine::generator().to_uncompressed();
                g[95] ^= bytes[0] | 1;
                raw_g1(&g)
            }
            false => raw_g1(&bytes),
        };
        let Some(point) = point else {
            return Ok(()); // not even a field element: blstrs refuses it before we see it
        };
        let query = match at {
            0 => &mut parts.h,
            1 => &mut parts.l,
            2 => &mut parts.a,
            _ => &mut parts.b_g1,
        };
        let i = index % query.len();
        query[i] = point;
        let fine = bool::from(point.is_on_curve()) && bool::from(point.is_torsion_free());
        match zkpipe_pipeline::ProvingKey::new(parts) {
            Ok(_) => prop_assert!(fine, "a key with a bad point was accepted"),
            Err(ProveError::Key { query, .. }) => {
                prop_assert!(!fine);
                prop_assert!(["h", "l", "a", "b_g1"].contains(&query));
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

/// A length: mostly `exact`, else anything up to `max`.
fn len(exact: usize, max: usize) -> impl Strategy<Value = usize> {
    prop_oneof![6 => Just(exact), 1 => 0..max]
}

/// A witness for the small key (domain 16, 3 inputs, 10 aux) with every length and value
/// drawn: mostly the key's shapes, sometimes anything; c either a·b (the H step's check then
/// passes) or drawn too.
fn any_witness() -> impl Strategy<Value = zkpipe_pipeline::Witness> {
    let values = |n: usize| proptest::collection::vec(any::<u64>(), n);
    let k = key_shape();
    (
        (len(16, 21), len(16, 21), len(16, 21), any::<bool>()),
        (len(3, 6), len(10, 15)),
        (
            density(k.a_density(), 15),
            density(k.b_density(), 15),
            density(zkpipe_msm::Density::all(3), 6),
        ),
    )
        .prop_flat_map(move |((na, nb, nc, product), (ni, nx), densities)| {
            (
                (values(na), values(nb), values(nc), Just(product)),
                (values(ni), values(nx)),
                Just(densities),
            )
        })
        .prop_map(|((a, b, c, product), (input, aux), (da, db, dbi))| {
            let s = |v: &[u64]| v.iter().map(|&x| Scalar::from(x)).collect::<Vec<_>>();
            let (a, b) = (s(&a), s(&b));
            let c = match product {
                true => a.iter().zip(&b).map(|(x, y)| x * y).collect(),
                false => s(&c),
            };
            zkpipe_pipeline::Witness {
                a: a.into(),
                b: b.into(),
                c: c.into(),
                input: s(&input),
                aux: s(&aux).into(),
                a_aux_density: da,
                b_input_density: dbi,
                b_aux_density: db,
                recording: None,
            }
        })
}

fn cpu_engine() -> &'static zkpipe_pipeline::Engine {
    static ENGINE: std::sync::OnceLock<zkpipe_pipeline::Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| {
        zkpipe_pipeline::Engine::start(
            zkpipe_pipeline::Config::default()
                .with_proof_check(zkpipe_pipeline::ProofCheck::Off)
                .with_backend(zkpipe_pipeline::Backend::Cpu),
        )
        .expect("a CPU engine starts")
    })
}

fn small_key() -> &'static std::sync::Arc<zkpipe_pipeline::ProvingKey> {
    static KEY: std::sync::OnceLock<std::sync::Arc<zkpipe_pipeline::ProvingKey>> =
        std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let key = zkpipe_pipeline::ProvingKey::new(key_parts().clone()).expect("the key checks");
        std::sync::Arc::new(key)
    })
}

/// One witness through the CPU prover: a proof only for a well-shaped witness (and the same
/// bytes again), `Unsatisfied` only for a well-shaped one, a shape error only for a misshapen
/// one. Returns which of the three it was.
fn prove_any(w: zkpipe_pipeline::Witness) -> Result<usize, TestCaseError> {
    let lengths_agree = w.a.len() == w.b.len() && w.b.len() == w.c.len();
    // Shaped as the key wants: lengths, density bitmaps as long as the variables, and as many
    // selected variables as the key has query points. The key holds points, not bitmaps, so a
    // bitmap that moves a selection from the inputs to the aux variables (or back) while
    // keeping the count is a different circuit for the same key, and proves.
    let k = key_shape();
    let a_points = k.inputs + k.a_density().selected();
    let b_points = k.inputs + k.b_density().selected();
    let shaped = w.a.len() <= 16
        && w.a.len() > 8
        && lengths_agree
        && w.input.len() == k.inputs
        && w.aux.len() == k.aux
        && w.a_aux_density.len() == k.aux
        && w.b_aux_density.len() == k.aux
        && w.b_input_density.len() == k.inputs
        && w.input.len() + w.a_aux_density.selected() == a_points
        && w.b_input_density.selected() + w.b_aux_density.selected() == b_points;
    let fixed = zkpipe_pipeline::Randomness::Fixed {
        r: Scalar::from(3u64),
        s: Scalar::from(5u64),
    };
    let result = cpu_engine()
        .submit(small_key(), w.clone(), fixed)
        .and_then(|h| h.wait());
    match result {
        Ok(proof) => {
            prop_assert!(shaped, "a proof for a misshapen witness");
            let again = cpu_engine()
                .submit(small_key(), w, fixed)
                .and_then(|h| h.wait());
            prop_assert_eq!(again.map(|p| p.to_bytes()).ok(), Some(proof.to_bytes()));
            Ok(0)
        }
        Err(ProveError::Unsatisfied) => {
            prop_assert!(shaped, "Unsatisfied for a misshapen witness");
            Ok(1)
        }
        Err(
            e
            @ (ProveError::Shape { .. } | ProveError::Constraints { .. } | ProveError::Msm { .. }),
        ) => {
            prop_assert!(!shaped, "a well-shaped witness refused: {}", e);
            Ok(2)
        }
        Err(e) => {
            prop_assert!(false, "unexpected error {e}");
            Ok(3)
        }
    }
}

#[test]
fn witnesses_of_any_shape_prove_or_are_refused_by_the_cpu_prover() {
    let seen = std::sync::Mutex::new([0u64; 3]);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases()));
    let result = runner.run(&any_witness(), |w| {
        let k = prove_any(w)?;
        seen.lock().unwrap_or_else(|p| p.into_inner())[k] += 1;
        Ok(())
    });
    let [proofs, unsatisfied, refused] = seen.into_inner().unwrap_or_else(|p| p.into_inner());
    println!(
        "{} cases: {proofs} proofs, {unsatisfied} unsatisfied, {refused} misshapen",
        cases()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        proofs > 0 && unsatisfied > 0 && refused > 0,
        "an outcome never reached"
    );
}
