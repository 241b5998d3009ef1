//! Keys are checked where they enter the engine; witnesses are checked against the key; the
//! CPU prover is deterministic in r and s. The GPU cases are in engine/gpu.rs.

#[path = "engine/gpu.rs"]
mod gpu;

use blstrs::{Fp, G1Affine, G2Affine, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use zkpipe_msm::testgen::off_subgroup_g1;
use zkpipe_msm::MsmError;
use zkpipe_pipeline::testgen::{random_key_parts, random_witness, Shape, WitnessSource};
use zkpipe_pipeline::{
    Backend, Config, Engine, Lane, ProofCheck, ProveError, ProvingKey, Randomness, Scalars,
};

fn shape() -> Shape {
    Shape {
        log_n: 6,
        inputs: 2,
        aux: 50,
        a_every: 8,
        b_every: 3,
    }
}

/// A key point moved off the curve.
fn off_curve(p: G1Affine) -> G1Affine {
    G1Affine::from_raw_unchecked(p.x(), p.y() + Fp::ONE, false)
}

#[test]
fn points_off_the_curve_or_subgroup_are_refused() {
    let parts = random_key_parts(&shape(), 1);
    assert!(ProvingKey::new(parts.clone()).is_ok());

    let mut p = parts.clone();
    p.l[7] = off_curve(p.l[7]);
    let err = ProvingKey::new(p).unwrap_err();
    assert!(
        matches!(
            err,
            ProveError::Key {
                query: "l",
                source: MsmError::NotOnCurve { index: 7 }
            }
        ),
        "{err}"
    );

    let mut p = parts.clone();
    p.h[3] = off_subgroup_g1().unwrap();
    let err = ProvingKey::new(p).unwrap_err();
    assert!(
        matches!(
            err,
            ProveError::Key {
                query: "h",
                source: MsmError::NotInSubgroup { index: 3 }
            }
        ),
        "{err}"
    );

    let mut p = parts.clone();
    p.vk.delta_g2 = G2Affine::identity();
    assert!(matches!(
        ProvingKey::new(p).unwrap_err(),
        ProveError::DeltaIdentity
    ));

    let mut p = parts;
    p.b_g2.pop();
    let err = ProvingKey::new_unchecked(p).unwrap_err();
    assert!(matches!(err, ProveError::Shape { .. }), "{err}");
}

#[test]
fn witness_shapes_are_checked_and_proofs_are_deterministic() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 2)).unwrap());
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    let fixed = Randomness::Fixed {
        r: Scalar::from(3u64),
        s: Scalar::from(5u64),
    };
    let w = random_witness(&s, 9);
    let p1 = engine
        .submit(&key, w.clone(), fixed)
        .unwrap()
        .wait()
        .unwrap();
    let p2 = engine
        .submit(&key, w.clone(), fixed)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(p1.to_bytes(), p2.to_bytes());
    let other = Randomness::Fixed {
        r: Scalar::from(4u64),
        s: Scalar::from(5u64),
    };
    let p3 = engine
        .submit(&key, w.clone(), other)
        .unwrap()
        .wait()
        .unwrap();
    assert_ne!(p1, p3);

    let mut bad = w.clone();
    bad.b.pop();
    let err = engine.submit(&key, bad, fixed).unwrap_err();
    assert!(
        matches!(err, ProveError::Shape { expected, got, .. } if expected == got + 1),
        "{err}"
    );
    let mut bad = w;
    bad.b_aux_density = zkpipe_msm::Density::all(s.aux);
    let err = engine.submit(&key, bad, fixed).unwrap_err();
    assert!(err.to_string().contains("b query points"), "{err}");
    assert_eq!(engine.shutdown().done, 3);
}

#[test]
fn shutdown_finishes_every_accepted_job() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let engine = unchecked_cpu_engine(16);
    let handles: Vec<_> = (0..6)
        .map(|i| {
            engine
                .submit(&key, random_witness(&s, i), Randomness::Random)
                .unwrap()
        })
        .collect();
    // Shut down at once: the queue closes, and every job already accepted still completes.
    let st = engine.shutdown();
    assert_eq!((st.submitted, st.done, st.failed), (6, 6, 0));
    for h in handles {
        h.wait().unwrap();
    }
}

/// A CPU engine (one worker) that skips the check of each proof, its queue holding
/// `queue_capacity` jobs a lane.
fn unchecked_cpu_engine(queue_capacity: usize) -> Engine {
    Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu)
            .with_queue_capacity(queue_capacity),
    )
    .unwrap()
}

/// A key and witnesses whose CPU proof takes long enough (seconds on two cores) for jobs
/// behind it to stay queued.
fn slow_job() -> (std::sync::Arc<ProvingKey>, zkpipe_pipeline::Witness) {
    let s = Shape {
        log_n: 14,
        inputs: 2,
        aux: (1 << 14) - 10,
        a_every: 8,
        b_every: 3,
    };
    let key = ProvingKey::new_unchecked(random_key_parts(&s, 1)).unwrap();
    (std::sync::Arc::new(key), random_witness(&s, 2))
}

#[test]
fn queued_jobs_are_cancelled_by_cancel_or_a_dropped_handle_and_a_full_queue_gives_the_witness_back()
{
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let (slow_key, slow) = slow_job();
    let engine = unchecked_cpu_engine(2);
    let first = engine.submit(&slow_key, slow, Randomness::Random).unwrap();
    // Whether or not the worker has taken it yet, the queue (two jobs) is full after the next
    // two submits: the second waits for the worker if need be.
    let cancelled = engine
        .submit(&key, random_witness(&s, 1), Randomness::Random)
        .unwrap();
    let dropped = engine
        .submit(&key, random_witness(&s, 2), Randomness::Random)
        .unwrap();
    assert!(first
        .wait_timeout(std::time::Duration::from_millis(1))
        .is_none());
    cancelled.cancel();
    drop(dropped);
    // The queue is full (two jobs): a submit with a timeout comes back with its witness.
    let w = random_witness(&s, 3);
    let refused = engine
        .submit_timeout(
            &key,
            w.clone(),
            Randomness::Random,
            std::time::Duration::from_millis(20),
        )
        .unwrap_err();
    assert!(
        matches!(refused.error, ProveError::QueueFull { waited_ms } if waited_ms >= 20),
        "{refused}"
    );
    assert_eq!(
        refused.witness.aux.as_fr(),
        w.aux.as_fr(),
        "the witness comes back unchanged"
    );
    first.wait().unwrap();
    assert!(matches!(
        cancelled.wait(),
        Err(ProveError::Cancelled { .. })
    ));
    let st = engine.shutdown();
    assert_eq!((st.done, st.cancelled, st.failed), (1, 2, 0), "{st:?}");
}

/// A witness that breaks one constraint: c[i] is no longer a[i]·b[i].
fn unsatisfied(w: &zkpipe_pipeline::Witness, i: usize) -> zkpipe_pipeline::Witness {
    let mut c = w.c.to_vec();
    c[i] += Scalar::ONE;
    zkpipe_pipeline::Witness {
        c: c.into(),
        ..w.clone()
    }
}

#[test]
fn a_witness_that_does_not_satisfy_the_circuit_is_an_error_not_a_proof() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let good = random_witness(&s, 6);
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    engine
        .submit(&key, good.clone(), Randomness::Random)
        .unwrap()
        .wait()
        .expect("generated witnesses satisfy the H step's check (c = a·b)");
    for i in [0, 1, 17, good.c.len() - 1] {
        let e = engine
            .submit(&key, unsatisfied(&good, i), Randomness::Random)
            .unwrap()
            .wait()
            .unwrap_err();
        assert!(matches!(e, ProveError::Unsatisfied), "constraint {i}: {e}");
    }
    let st = engine.shutdown();
    assert_eq!((st.done, st.failed), (1, 4));
}

#[test]
fn metrics_count_jobs_by_state_in_the_prometheus_text_format() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    for i in 0..2 {
        let w = random_witness(&s, i);
        engine
            .submit(&key, w, Randomness::Random)
            .unwrap()
            .wait()
            .unwrap();
    }
    let bad = {
        let w = random_witness(&s, 9);
        let mut c = w.c.to_vec();
        c[0] += Scalar::ONE;
        zkpipe_pipeline::Witness { c: c.into(), ..w }
    };
    assert!(engine
        .submit(&key, bad, Randomness::Random)
        .unwrap()
        .wait()
        .is_err());
    let text = engine.metrics();
    for line in [
        "zkpipe_jobs_total{state=\"submitted\"} 3",
        "zkpipe_jobs_total{state=\"done\"} 2",
        "zkpipe_jobs_total{state=\"failed\"} 1",
        "zkpipe_queue_depth 0",
        "# TYPE zkpipe_stage_device_ms histogram",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from:\n{text}"
        );
    }
}

#[test]
fn a_job_has_let_go_of_its_key_when_its_answer_comes() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let good = random_witness(&s, 6);
    let engine = unchecked_cpu_engine(4);
    for i in 0..40 {
        let witness = match i % 2 {
            0 => good.clone(),
            _ => unsatisfied(&good, i),
        };
        let answer = engine
            .submit(&key, witness, Randomness::Random)
            .unwrap()
            .wait();
        assert_eq!(answer.is_ok(), i % 2 == 0, "job {i}: {answer:?}");
        assert_eq!(
            std::sync::Arc::strong_count(&key),
            1,
            "job {i}: the engine still holds the key after answering"
        );
    }
    let (slow_key, slow) = slow_job();
    let first = engine.submit(&slow_key, slow, Randomness::Random).unwrap();
    let soon = std::time::Instant::now() + std::time::Duration::from_millis(1);
    let late = engine
        .submit_before(&key, good.clone(), Randomness::Random, soon)
        .unwrap();
    assert!(matches!(
        late.wait(),
        Err(ProveError::DeadlineExceeded { .. })
    ));
    assert_eq!(
        std::sync::Arc::strong_count(&key),
        1,
        "a job dropped unrun still holds the key after answering"
    );
    first.wait().unwrap();
    engine.shutdown();
}

#[test]
fn a_job_whose_deadline_passes_in_the_queue_is_dropped_unrun() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let (slow_key, slow) = slow_job();
    let engine = unchecked_cpu_engine(4);
    let first = engine.submit(&slow_key, slow, Randomness::Random).unwrap();
    let soon = std::time::Instant::now() + std::time::Duration::from_millis(30);
    let late = engine
        .submit_before(&key, random_witness(&s, 1), Randomness::Random, soon)
        .unwrap();
    let far = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let in_time = engine
        .submit_before(&key, random_witness(&s, 2), Randomness::Random, far)
        .unwrap();
    first.wait().unwrap();
    match late.wait() {
        Err(ProveError::DeadlineExceeded { what }) => assert_eq!(what, "before it started"),
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    in_time.wait().unwrap();
    let st = engine.shutdown();
    assert_eq!((st.done, st.failed), (2, 1), "{st:?}");
}

#[test]
fn an_urgent_job_is_taken_before_routine_jobs_queued_ahead_of_it() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let (slow_key, slow) = slow_job();
    let routine_shape = Shape {
        log_n: 12,
        aux: (1 << 12) - 10,
        ..s
    };
    let routine_key = std::sync::Arc::new(
        ProvingKey::new_unchecked(random_key_parts(&routine_shape, 3)).unwrap(),
    );
    let engine = unchecked_cpu_engine(4);
    // The one worker is busy with the slow job while the others queue behind it.
    let first = engine.submit(&slow_key, slow, Randomness::Random).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let routine = engine
        .submit(
            &routine_key,
            random_witness(&routine_shape, 4),
            Randomness::Random,
        )
        .unwrap();
    let urgent = engine
        .submit_in(
            &key,
            random_witness(&s, 5),
            Randomness::Random,
            Lane::Urgent,
        )
        .unwrap();
    urgent.wait().unwrap();
    assert!(
        routine
            .wait_timeout(std::time::Duration::from_millis(0))
            .is_none(),
        "the routine job queued first ran before the urgent one"
    );
    first.wait().unwrap();
    routine.wait().unwrap();
    let st = engine.shutdown();
    assert_eq!((st.done, st.failed), (3, 0), "{st:?}");
}

#[test]
fn shutdown_now_cancels_the_queued_jobs_and_finishes_the_running_one() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 5)).unwrap());
    let (slow_key, slow) = slow_job();
    let engine = unchecked_cpu_engine(8);
    let first = engine.submit(&slow_key, slow, Randomness::Random).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let queued: Vec<_> = (0..3)
        .map(|i| {
            engine
                .submit(&key, random_witness(&s, i), Randomness::Random)
                .unwrap()
        })
        .collect();
    let st = engine.shutdown_now();
    first.wait().unwrap();
    for h in queued {
        assert!(matches!(h.wait(), Err(ProveError::Cancelled { .. })));
    }
    assert_eq!((st.done, st.cancelled), (1, 3), "{st:?}");
    assert!(matches!(
        engine.submit(&key, random_witness(&s, 9), Randomness::Random),
        Err(ProveError::ShutDown)
    ));
}

#[test]
fn a_cpu_engine_leaves_the_key_pageable_and_reports_no_device_time() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new(random_key_parts(&s, 8)).unwrap());
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    engine.load_key(&key).unwrap();
    engine
        .submit(&key, random_witness(&s, 9), Randomness::Random)
        .unwrap()
        .wait()
        .unwrap();
    let st = engine.shutdown();
    assert!(!key.is_pinned(), "no driver, nothing to lock");
    assert_eq!(st.key_pinned_bytes, 0);
    assert_eq!((st.h_gpu_ms, st.msm_gpu_ms), (0.0, 0.0));
    assert!(st.h_ms > 0.0 && st.g1_msm_ms > 0.0, "{st:?}");
}

#[test]
fn a_gpu_backend_without_a_device_is_an_error_at_start() {
    let cfg = Config::default()
        .with_proof_check(ProofCheck::Off)
        .with_backend(Backend::Gpu);
    match zkpipe_cuda::testing::gpu_context() {
        Some(_) => assert!(Engine::start(cfg).unwrap().on_gpu()),
        None => {
            let err = Engine::start(cfg).unwrap_err();
            assert!(matches!(err, ProveError::Device { .. }), "{err}");
            assert!(
                err.to_string().contains("libcuda"),
                "names what was tried: {err}"
            );
        }
    }
}

#[test]
fn a_cpu_engine_lends_plain_vectors_that_prove_as_any_witness() {
    let s = shape();
    let key = std::sync::Arc::new(ProvingKey::new_unchecked(random_key_parts(&s, 3)).unwrap());
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    let abc = engine
        .lend_evaluations(&key, std::time::Duration::from_secs(1))
        .unwrap();
    assert!(abc.iter().all(|e| matches!(e, Scalars::Pageable(_))));
    let source = WitnessSource::new(&s, 4);
    let fixed = Randomness::Fixed {
        r: Scalar::from(3u64),
        s: Scalar::from(5u64),
    };
    let lent = source.witness_into(abc).unwrap();
    let room = engine
        .lend_witness(&key, std::time::Duration::from_secs(1))
        .unwrap();
    assert!(matches!(room.aux, Scalars::Pageable(_)));
    let whole = source.witness_in_lent(room).unwrap();
    let plain = source.witness();
    assert_eq!(whole.aux.as_fr(), plain.aux.as_fr());
    let p1 = engine.submit(&key, lent, fixed).unwrap().wait().unwrap();
    let p2 = engine.submit(&key, plain, fixed).unwrap().wait().unwrap();
    let p3 = engine.submit(&key, whole, fixed).unwrap().wait().unwrap();
    assert_eq!(p1.to_bytes(), p2.to_bytes());
    assert_eq!(p3.to_bytes(), p2.to_bytes());
}

#[test]
fn huge_counts_in_the_config_are_an_error_not_an_abort() {
    for (field, max) in zkpipe_pipeline::CONFIG_MAX {
        let mut cfg = Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu);
        let value = usize::MAX;
        match field {
            "queue_capacity" => cfg.queue_capacity = value,
            "g2_capacity" => cfg.g2_capacity = value,
            "workers_per_device" => cfg.workers_per_device = value,
            "cpu_workers" => cfg.cpu_workers = value,
            "g2_threads" => cfg.g2_threads = value,
            "key_multiples" => cfg.key_multiples = value,
            other => panic!("CONFIG_MAX names {other}, which this test does not set"),
        }
        match Engine::start(cfg) {
            Err(ProveError::Config {
                field: f,
                value: v,
                max: m,
            }) => {
                assert_eq!((f, v, m), (field, value, max));
            }
            other => panic!("{field}: expected a config error, got {other:?}"),
        }
    }
}

#[test]
fn gamma_at_infinity_and_bad_verifying_key_points_are_refused() {
    let parts = random_key_parts(&shape(), 12);
    let mut p = parts.clone();
    p.vk.gamma_g2 = G2Affine::identity();
    for err in [
        ProvingKey::new(p.clone()).unwrap_err(),
        ProvingKey::new_unchecked(p.clone()).unwrap_err(),
        zkpipe_pipeline::PreparedVerifyingKey::new(&p.vk).unwrap_err(),
    ] {
        assert!(matches!(err, ProveError::GammaIdentity), "{err}");
    }
    // A verifying key with an input point off the curve, or outside the subgroup.
    let mut vk = parts.vk.clone();
    vk.ic[1] = off_curve(vk.ic[1]);
    let err = zkpipe_pipeline::PreparedVerifyingKey::new(&vk).unwrap_err();
    assert!(
        matches!(
            err,
            ProveError::Key {
                query: "ic",
                source: MsmError::NotOnCurve { index: 1 }
            }
        ),
        "{err}"
    );
    let mut vk = parts.vk.clone();
    vk.alpha_g1 = off_subgroup_g1().unwrap();
    let err = zkpipe_pipeline::PreparedVerifyingKey::new(&vk).unwrap_err();
    assert!(
        matches!(
            err,
            ProveError::Key {
                query: "alpha_g1",
                source: MsmError::NotInSubgroup { .. }
            }
        ),
        "{err}"
    );
    assert!(zkpipe_pipeline::PreparedVerifyingKey::new(&parts.vk).is_ok());
}

/// The recorded path on the CPU: a witness carrying its recording proves as the same witness
/// with a, b and c evaluated beforehand; a witness whose parts are not its recording's is
/// refused at submission, naming the part.
#[test]
fn a_recorded_witness_proves_as_its_evaluated_form_and_bad_ones_are_refused() {
    use zkpipe_pipeline::testgen::recorded_witness;
    let sh = Shape {
        log_n: 8,
        inputs: 3,
        aux: 240,
        a_every: 8,
        b_every: 3,
    };
    let key = std::sync::Arc::new(zkpipe_pipeline::testgen::random_key(&sh, 3).unwrap());
    let w = recorded_witness(&sh, 4).unwrap();
    let engine = Engine::start(
        Config::default()
            .with_backend(Backend::Cpu)
            .with_proof_check(ProofCheck::Off),
    )
    .unwrap();
    let fixed = Randomness::Fixed {
        r: Scalar::from(5u64),
        s: Scalar::from(6u64),
    };
    let prove = |w| engine.submit(&key, w, fixed).unwrap().wait().unwrap();
    let evaluated = w.clone().evaluated().unwrap();
    assert!(evaluated.recording.is_none() && evaluated.a.len() == w.constraints());
    assert_eq!(
        prove(w.clone()).to_bytes(),
        prove(evaluated.clone()).to_bytes()
    );

    let refused = |w, what: &str| {
        let err = engine.submit(&key, w, fixed).unwrap_err();
        assert!(err.to_string().contains(what), "{what}: {err}");
    };
    let mut both = w.clone();
    both.a = evaluated.a.clone();
    refused(both, "a evaluations beside a recording");
    let mut density = w.clone();
    density.b_aux_density = density.a_aux_density.clone();
    refused(density, "B aux density");
    let mut short = w.clone();
    short.aux.pop();
    refused(short, "aux variables");
}
