//! On the GPU backend: the same circuits as on the CPU, with one and two workers per device
//! and G2 on either side, give byte-identical proofs to the CPU backend's; 64 jobs submitted
//! at once all complete and verify.

use std::sync::Arc;

use crate::common::{cube, params, random_r1cs, rs, sha, Case};
use bellperson::Circuit;
use blstrs::Scalar;
use zkpipe_bellperson::{proving_key, synthesize, synthesize_into, synthesize_lent};
use zkpipe_cuda::testing::gpu_context;
use zkpipe_pipeline::{
    verify, Backend, Config, Engine, G2Placement, PreparedVerifyingKey, Proof, ProveError,
    Randomness, Scalars,
};

fn engine(backend: Backend, workers: usize, g2: G2Placement) -> Engine {
    Engine::start(
        Config::default()
            .with_backend(backend)
            .with_workers_per_device(workers)
            .with_g2(g2)
            .with_queue_capacity(64),
    )
    .unwrap()
}

fn prove<C: Circuit<Scalar> + Clone>(e: &Engine, case: &Case<C>, seed: u64) -> Proof {
    let p = params(case.setup.clone(), seed);
    let key = Arc::new(proving_key(&p).unwrap());
    let (r, s) = rs(seed ^ 1);
    let w = synthesize(case.circuit.clone()).unwrap();
    let proof = e
        .submit(&key, w, Randomness::Fixed { r, s })
        .unwrap()
        .wait()
        .unwrap();
    let pvk = PreparedVerifyingKey::new(key.vk()).unwrap();
    assert!(verify(&pvk, &proof, &case.inputs).unwrap(), "{}", case.name);
    proof
}

fn all(e: &Engine) -> Vec<[u8; 192]> {
    vec![
        prove(e, &cube(3), 1).to_bytes(),
        prove(e, &random_r1cs(3000, 5), 2).to_bytes(),
        prove(e, &sha(2, 7), 3).to_bytes(),
    ]
}

#[test]
fn gpu_proofs_equal_cpu_proofs() {
    if gpu_context().is_none() {
        return;
    }
    let want = all(&engine(Backend::Cpu, 1, G2Placement::Cpu));
    for (workers, g2) in [
        (1, G2Placement::Cpu),
        (2, G2Placement::Cpu),
        (2, G2Placement::Gpu),
    ] {
        let e = engine(Backend::Gpu, workers, g2);
        assert!(e.on_gpu());
        assert_eq!(all(&e), want, "{workers} workers, G2 on {g2:?}");
        let st = e.shutdown();
        assert_eq!((st.done, st.failed), (3, 0));
        println!("{workers} workers, {g2:?}: {st:?}");
    }
}

#[test]
fn sixty_four_jobs_at_once_all_verify() {
    if gpu_context().is_none() {
        return;
    }
    let e = engine(Backend::Gpu, 2, G2Placement::Gpu);
    let case = random_r1cs(2000, 8);
    let p = params(case.setup, 4);
    let key = Arc::new(proving_key(&p).unwrap());
    let w = synthesize(case.circuit).unwrap();
    let handles = e
        .submit_batch(&key, vec![w; 64], Randomness::Random)
        .unwrap();
    let pvk = PreparedVerifyingKey::new(key.vk()).unwrap();
    let proofs: Vec<Proof> = handles.into_iter().map(|h| h.wait().unwrap()).collect();
    for p in &proofs {
        assert!(verify(&pvk, p, &case.inputs).unwrap());
    }
    let st = e.shutdown();
    assert_eq!((st.done, st.failed), (64, 0));
    println!("64 jobs: {st:?}");
}

/// A proof of `case` synthesized into evaluations lent by `e`.
/// What synthesis writes into lent memory.
#[derive(Debug, Clone, Copy)]
enum Lend {
    /// a, b, c ([`Engine::lend_evaluations`]).
    Evaluations,
    /// a, b, c and the aux values ([`Engine::lend_witness`]).
    Whole,
}

fn prove_lent<C: Circuit<Scalar> + Clone>(
    e: &Engine,
    no_pool: &Engine,
    case: &Case<C>,
    seed: u64,
    lend: Lend,
) -> [u8; 192] {
    let wait = std::time::Duration::from_secs(30);
    let p = params(case.setup.clone(), seed);
    let key = Arc::new(proving_key(&p).unwrap());
    // No pool on a GPU engine: an error that says how to get one.
    assert!(matches!(
        no_pool.lend_evaluations(&key, wait),
        Err(ProveError::NoWitnessPool)
    ));
    let w = match lend {
        Lend::Evaluations => {
            let abc = e.lend_evaluations(&key, wait).unwrap();
            assert!(abc.iter().all(|x| matches!(x, Scalars::Pinned(_))));
            synthesize_into(case.circuit.clone(), abc).unwrap()
        }
        Lend::Whole => {
            let room = e.lend_witness(&key, wait).unwrap();
            assert!(matches!(room.aux, Scalars::Pinned(_)));
            synthesize_lent(case.circuit.clone(), room).unwrap()
        }
    };
    let (r, s) = rs(seed ^ 1);
    let proof = e
        .submit(&key, w, Randomness::Fixed { r, s })
        .unwrap()
        .wait()
        .unwrap();
    let pvk = PreparedVerifyingKey::new(key.vk()).unwrap();
    assert!(verify(&pvk, &proof, &case.inputs).unwrap(), "{}", case.name);
    proof.to_bytes()
}

#[test]
fn circuits_synthesized_into_lent_pinned_memory_prove_the_same() {
    if gpu_context().is_none() {
        return;
    }
    let want = all(&engine(Backend::Cpu, 1, G2Placement::Cpu));
    let e = Engine::start(
        Config::default()
            .with_backend(Backend::Gpu)
            .with_pinned_witness(256 << 20),
    )
    .unwrap();
    let no_pool = engine(Backend::Gpu, 1, G2Placement::Cpu);
    for lend in [Lend::Evaluations, Lend::Whole] {
        let got = vec![
            prove_lent(&e, &no_pool, &cube(3), 1, lend),
            prove_lent(&e, &no_pool, &sha(2, 7), 3, lend),
        ];
        assert_eq!(got, vec![want[0], want[2]], "{lend:?}");
    }
    // More constraints than the lent memory holds: an error, not a wrong proof.
    let small = params(cube(3).setup, 1);
    let key = Arc::new(proving_key(&small).unwrap());
    let abc = e
        .lend_evaluations(&key, std::time::Duration::from_secs(30))
        .unwrap();
    assert!(matches!(
        synthesize_into(sha(2, 7).circuit, abc),
        Err(bellperson::SynthesisError::PolynomialDegreeTooLarge)
    ));
    // More aux variables than the key has, written into lent memory: an error naming them.
    let room = e
        .lend_witness(&key, std::time::Duration::from_secs(30))
        .unwrap();
    match synthesize_lent(sha(2, 7).circuit, room) {
        Err(bellperson::SynthesisError::IncompatibleLengthVector(m)) => {
            assert!(m.contains("aux values"), "{m}")
        }
        other => panic!("expected an aux overflow, got {other:?}"),
    }
}
