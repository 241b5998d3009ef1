//! The engine on the GPU: a job larger than the VRAM budget can ever hold is an error naming
//! the bytes (not a crash, not a wait), and the engine goes on proving jobs that fit; a GPU
//! proof equals the CPU proof for the same r and s.

use std::sync::Arc;

use blstrs::Scalar;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_msm::{GpuCurve, G1, G2};
use zkpipe_pipeline::testgen::{random_key, random_witness, Shape, WitnessSource};
use zkpipe_pipeline::{
    Backend, Config, Engine, G2Placement, JobMemoryUse, JobReport, KeyPlacement, LinkReport,
    OnDeviceFailure, PlanReport, Proof, ProofCheck, ProveError, ProvingKey, Randomness, Scalars,
    StreamedPoints, Witness,
};

const MIB: usize = 1 << 20;

/// The CPU engine's proof of `witness` for `key`: what every GPU proof here must equal.
fn cpu_proof(key: &Arc<ProvingKey>, witness: Witness, randomness: Randomness) -> Proof {
    let cpu = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    cpu.submit(key, witness, randomness)
        .unwrap()
        .wait()
        .unwrap()
}

fn shape(log_n: u32) -> Shape {
    Shape {
        log_n,
        inputs: 2,
        aux: (1 << log_n) - 10,
        a_every: 8,
        b_every: 4,
    }
}

#[test]
fn a_job_too_large_for_the_budget_is_an_error_and_the_engine_goes_on() {
    if gpu_context().is_none() {
        return;
    }
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_vram_cap(Some(96 << 20))
            .with_vram_margin(0)
            .with_g2(G2Placement::Gpu),
    )
    .unwrap();
    let fixed = Randomness::Fixed {
        r: Scalar::from(7u64),
        s: Scalar::from(9u64),
    };
    let big = shape(20);
    let key = Arc::new(random_key(&big, 1).unwrap());
    let err = engine
        .submit(&key, random_witness(&big, 2), fixed)
        .unwrap()
        .wait()
        .unwrap_err();
    match &err {
        ProveError::TooLargeForDevice {
            needed, capacity, ..
        } => {
            assert!(*capacity <= 96 << 20, "{err}");
            assert!(needed > capacity);
            assert!(err.to_string().contains(&needed.to_string()), "{err}");
        }
        other => panic!("expected TooLargeForDevice, got {other}"),
    }
    // A small job still proves, and equals the CPU's proof.
    let small = shape(10);
    let key = Arc::new(random_key(&small, 3).unwrap());
    let w = random_witness(&small, 4);
    let gpu = engine
        .submit(&key, w.clone(), fixed)
        .unwrap()
        .wait()
        .unwrap();
    // Idle: what the budget still grants is all kept for a next job (tables, key, memory).
    let idle = engine.stats();
    assert!(idle.vram_kept > 0, "{idle:?}");
    assert_eq!(idle.vram_budget_in_use, idle.vram_kept, "{idle:?}");
    let st = engine.shutdown();
    assert_eq!((st.done, st.failed), (1, 1));
    assert!(st.vram_budget_high_water <= 96 << 20);
    let want = cpu_proof(&key, w, fixed);
    assert_eq!(gpu.to_bytes(), want.to_bytes());
}

#[test]
fn a_pinned_key_proves_resident_and_uploaded_per_msm_with_event_timed_stages() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(11u64),
        s: Scalar::from(13u64),
    };
    let sh = shape(12);
    let key = Arc::new(random_key(&sh, 5).unwrap());
    let w = random_witness(&sh, 6);
    let want = cpu_proof(&key, w.clone(), fixed);
    assert!(!key.is_pinned(), "the CPU engine does not lock memory");
    for resident in [true, false] {
        let engine = Engine::start(
            Config::default()
                .with_proof_check(ProofCheck::Off)
                .with_backend(Backend::Gpu)
                .with_keep_key_resident(resident)
                .with_g2(G2Placement::Gpu),
        )
        .unwrap();
        let t0 = std::time::Instant::now();
        let jobs = engine
            .submit_batch(&key, vec![w.clone(), w.clone()], fixed)
            .unwrap();
        for j in jobs {
            assert_eq!(
                j.wait().unwrap().to_bytes(),
                want.to_bytes(),
                "resident {resident}"
            );
        }
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        assert!(key.is_pinned());
        let st = engine.shutdown();
        // Only the first engine locks the key; the second finds it locked.
        let locked = if resident { key.bytes() as u64 } else { 0 };
        assert_eq!(st.key_pinned_bytes, locked, "resident {resident}");
        assert!(st.h_gpu_ms > 0.0 && st.msm_gpu_ms > 0.0, "{st:?}");
        // Event-timed device spans, each inside its job's wall time (the host's H-step time
        // is only the enqueue's: the GPU may run it later, behind other work).
        assert!(
            st.h_gpu_ms + st.msm_gpu_ms <= 2.0 * wall_ms,
            "{wall_ms} ms: {st:?}"
        );
    }
}

#[test]
fn h_multiples_with_the_resident_key_give_the_same_proofs() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(17u64),
        s: Scalar::from(19u64),
    };
    let sh = shape(13);
    let key = Arc::new(random_key(&sh, 21).unwrap());
    let w = random_witness(&sh, 22);
    let want = cpu_proof(&key, w.clone(), fixed);
    for copies in [2, 4, 16] {
        let engine = Engine::start(
            Config::default()
                .with_proof_check(ProofCheck::Off)
                .with_backend(Backend::Gpu)
                .with_key_multiples(copies),
        )
        .unwrap();
        let jobs = engine
            .submit_batch(&key, vec![w.clone(), w.clone()], fixed)
            .unwrap();
        for j in jobs {
            let got = j.wait().unwrap();
            assert_eq!(got.to_bytes(), want.to_bytes(), "{copies} copies");
        }
        let st = engine.shutdown();
        assert_eq!((st.done, st.failed), (2, 0), "{copies} copies");
        assert_eq!(st.key_h_copies, copies, "{st:?}");
    }
    let err = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_key_multiples(17),
    )
    .unwrap_err();
    assert!(err.to_string().contains("key_multiples"), "{err}");
}

#[test]
fn an_unpinned_key_still_proves() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(2u64),
        s: Scalar::from(3u64),
    };
    let sh = shape(8);
    let key = Arc::new(random_key(&sh, 7).unwrap());
    let w = random_witness(&sh, 8);
    let gpu = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_pin_key(false)
            .with_keep_key_resident(false),
    )
    .unwrap();
    let got = gpu.submit(&key, w.clone(), fixed).unwrap().wait().unwrap();
    assert!(!key.is_pinned());
    assert_eq!(gpu.shutdown().key_pinned_bytes, 0);
    let want = cpu_proof(&key, w, fixed);
    assert_eq!(got.to_bytes(), want.to_bytes());
}

#[test]
fn proofs_are_byte_identical_across_backends_caps_and_residency() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(17u64),
        s: Scalar::from(19u64),
    };
    let sh = shape(20);
    let key = Arc::new(random_key(&sh, 21).unwrap());
    let w = random_witness(&sh, 22);
    let want = cpu_proof(&key, w.clone(), fixed);
    // No cap, a 16 GiB card, and budgets small enough for the three-vector H step and small
    // MSM chunks; each with the key resident (where it fits) and streamed.
    let caps = [
        None,
        Some(16 << 30),
        Some(400 * MIB),
        Some(160 * MIB),
        Some(128 * MIB),
        Some(112 * MIB),
    ];
    let every_stage = |what: &str, report: &zkpipe_pipeline::JobReport| {
        assert!(report.device_ms.len() >= 5, "{what}: {report:?}");
    };
    let plans = prove_under_caps(&key, &w, &want, fixed, &caps, &every_stage);
    assert!(
        plans
            .iter()
            .any(|p| p.h_vectors == 4 && p.bases == KeyPlacement::Resident),
        "{plans:?}"
    );
    assert!(plans.iter().any(|p| p.h_vectors == 3), "{plans:?}");
    assert!(
        plans.iter().any(|p| p.bases == KeyPlacement::Streamed),
        "{plans:?}"
    );
    assert_some_plan(&plans, |p| matches!(p.memory, JobMemoryUse::Kept { .. }));
    assert_some_plan(&plans, |p| matches!(p.memory, JobMemoryUse::PerJob { .. }));
}

#[test]
fn a_kept_witness_proves_as_a_given_one_in_every_plan() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(43u64),
        s: Scalar::from(47u64),
    };
    let sh = shape(20);
    let key = Arc::new(random_key(&sh, 48).unwrap());
    let source = WitnessSource::new(&sh, 49);
    let want = cpu_proof(&key, source.witness(), fixed).to_bytes();
    let wait = std::time::Duration::from_secs(60);
    let mut plans = Vec::new();
    // The CPU as the policy: the engine keeps each witness until its job is done (to run it
    // again on the CPU should the device fail). Caps down to the three-vector H step, pageable
    // and lent witnesses, B2 on the GPU and on the CPU, a streamed key's points all streamed
    // or only those of nonzero values (the two alternating over the caps).
    let caps = [
        None,
        Some(400 * MIB),
        Some(160 * MIB),
        Some(128 * MIB),
        Some(112 * MIB),
    ];
    for (i, cap) in caps.into_iter().enumerate() {
        for (j, g2) in [G2Placement::Gpu, G2Placement::Cpu].into_iter().enumerate() {
            let points = match (i + j) % 2 {
                0 => StreamedPoints::All,
                _ => StreamedPoints::Nonzero,
            };
            let engine = Engine::start(
                Config::default()
                    .with_proof_check(ProofCheck::Off)
                    .with_backend(Backend::Gpu)
                    .with_vram_cap(cap)
                    .with_vram_margin(0)
                    .with_g2(g2)
                    .with_streamed_points(points)
                    .with_pinned_witness(2 * 4 * (32 << 20))
                    .with_on_device_failure(OnDeviceFailure::Cpu),
            )
            .unwrap();
            let what = format!("cap {cap:?}, G2 on {g2:?}, {points:?} points streamed");
            let lent = source
                .witness_in_lent(engine.lend_witness(&key, wait).unwrap())
                .unwrap();
            for w in [source.witness(), lent] {
                match engine.submit(&key, w, fixed).unwrap().wait_report() {
                    Ok((proof, report)) => {
                        assert_eq!(proof.to_bytes(), want, "{what}: {:?}", report.plan);
                        assert_eq!(report.device, Some(0), "{what}");
                        check_link(&report, &key, g2, points, &what);
                        plans.extend(report.plan);
                    }
                    Err(ProveError::TooLargeForDevice { .. }) => assert!(cap.is_some(), "{what}"),
                    Err(e) => panic!("{what}: {e}"),
                }
            }
            let st = engine.shutdown();
            assert_eq!(st.pinned_in_use, 0, "{what}: lent memory not back");
            assert_eq!(st.quarantined_devices, 0, "{what}");
        }
    }
    println!("plans: {plans:#?}");
    assert!(plans.iter().any(|p| p.h_vectors == 4), "{plans:?}");
    assert!(plans.iter().any(|p| p.h_vectors == 3), "{plans:?}");
}

/// A streamed key's job reports every point of its queries crossing the link (B2's when G2
/// runs on the GPU), or only those with a nonzero scalar when that is what it streams, in
/// timed copies; a resident key's, none.
fn check_link(
    report: &JobReport,
    key: &ProvingKey,
    g2: G2Placement,
    points: StreamedPoints,
    what: &str,
) {
    let link = &report.link;
    let streamed = report.plan.map(|p| p.bases) == Some(KeyPlacement::Streamed);
    if !streamed {
        assert_eq!(*link, LinkReport::default(), "{what}");
        return;
    }
    let g1 = std::mem::size_of::<<G1 as GpuCurve>::GpuAffine>();
    let g2_point = std::mem::size_of::<<G2 as GpuCurve>::GpuAffine>();
    let [h, l, a, b1, b2] = key.query_lens();
    let b2 = if g2 == G2Placement::Gpu { b2 } else { 0 };
    let all = ((h + l + a + b1) * g1 + b2 * g2_point) as u64;
    let moved = match points {
        StreamedPoints::All => all,
        StreamedPoints::Nonzero => link.bases_needed_bytes,
    };
    assert_eq!(link.bases_bytes, moved, "{what}");
    // The host gathers only when it streams the points of nonzero values.
    assert_eq!(
        link.gather_ms > 0.0,
        points == StreamedPoints::Nonzero,
        "{what}: {link:?}"
    );
    // The witness's aux values are 0 about half the time: their points need not move.
    assert!(
        link.bases_needed_bytes < all && link.bases_needed_bytes > (h * g1) as u64,
        "{what}: {link:?}"
    );
    assert!(link.bases_busy_ms > 0.0, "{what}: {link:?}");
}

#[test]
fn a_witness_in_lent_pinned_memory_proves_as_a_pageable_one() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(23u64),
        s: Scalar::from(29u64),
    };
    let sh = shape(16);
    let key = Arc::new(random_key(&sh, 31).unwrap());
    let source = WitnessSource::new(&sh, 32);
    // Room for two whole witnesses (a, b, c, aux): a third lend waits for a job to give its
    // memory back.
    let sets = 2 * 4 * (32usize << 16);
    let wait = std::time::Duration::from_secs(60);
    // B2 on the GPU (the aux room goes back once split) and on the CPU (it is read there).
    for g2 in [G2Placement::Gpu, G2Placement::Cpu] {
        let engine = Engine::start(
            Config::default()
                .with_proof_check(ProofCheck::Off)
                .with_backend(Backend::Gpu)
                .with_pinned_witness(sets)
                .with_g2(g2),
        )
        .unwrap();
        let want = engine
            .submit(&key, source.witness(), fixed)
            .unwrap()
            .wait()
            .unwrap();
        for i in 0..6 {
            let w = match i % 2 {
                0 => source.witness_into(engine.lend_evaluations(&key, wait).unwrap()),
                _ => {
                    let room = engine.lend_witness(&key, wait).unwrap();
                    assert!(matches!(room.aux, Scalars::Pinned(_)));
                    source.witness_in_lent(room)
                }
            };
            let got = engine
                .submit(&key, w.unwrap(), fixed)
                .unwrap()
                .wait()
                .unwrap();
            assert_eq!(got.to_bytes(), want.to_bytes(), "{g2:?}, proof {i}");
        }
        // Two witnesses' room at once, then a third lend while both are out: a timeout.
        let held = [
            engine.lend_witness(&key, wait).unwrap(),
            engine.lend_witness(&key, wait).unwrap(),
        ];
        let short = std::time::Duration::from_millis(50);
        match engine.lend_witness(&key, short) {
            Err(ProveError::Pinned { .. }) => {}
            other => panic!("expected a pinned-memory timeout, got {other:?}"),
        }
        drop(held);
        // Each proof was waited for before the next lend: at most one set was out at once
        // until the two held above.
        let st = engine.shutdown();
        assert!(st.pinned_high_water >= sets, "{st:?}");
    }
    // Aux room holds the key's aux variables, no more: an error naming the numbers.
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_pinned_witness(sets),
    )
    .unwrap();
    let mut room = engine.lend_witness(&key, wait).unwrap();
    assert_eq!(room.aux.len(), 0);
    let too_many = vec![Scalar::from(3u64); sh.aux + 1];
    match room.aux.extend_from_slice(&too_many) {
        Err(ProveError::Shape { expected, got, .. }) => {
            assert_eq!((expected, got), (sh.aux, sh.aux + 1))
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert_eq!(room.aux.len(), 0, "nothing was written");
    // A lend larger than the pool is an error at once, not a wait.
    let small = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_pinned_witness(1 << 20),
    )
    .unwrap();
    match small.lend_witness(&key, wait) {
        Err(ProveError::Pinned { .. }) => {}
        other => panic!("expected a pinned-memory error, got {other:?}"),
    }
}

#[test]
fn keys_of_two_domain_sizes_alternate_on_two_workers_without_a_wait_for_ever() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(37u64),
        s: Scalar::from(41u64),
    };
    let (small, big) = (shape(12), shape(18));
    let keys = [
        Arc::new(random_key(&small, 43).unwrap()),
        Arc::new(random_key(&big, 44).unwrap()),
    ];
    let witnesses = [random_witness(&small, 45), random_witness(&big, 46)];
    let want: Vec<[u8; 192]> = (0..2)
        .map(|i| cpu_proof(&keys[i], witnesses[i].clone(), fixed).to_bytes())
        .collect();
    // Budgets where the small key's memory is kept by each worker while the big key's jobs
    // need memory of their own: before, an idle worker's kept memory of one size made a job
    // of the other size wait for ever. Each engine runs in a thread watched for a hang.
    let mut plans = Vec::new();
    for cap_mib in [48usize, 64, 80, 96, 112, 128, 160, 192, 256] {
        for resident in [false, true] {
            let what = format!("cap {cap_mib} MiB, resident {resident}");
            let (tx, rx) = std::sync::mpsc::channel();
            let (keys, witnesses, want) = (keys.clone(), witnesses.clone(), want.clone());
            let what_in = what.clone();
            std::thread::spawn(move || {
                let engine = Engine::start(
                    Config::default()
                        .with_proof_check(ProofCheck::Off)
                        .with_backend(Backend::Gpu)
                        .with_vram_cap(Some(cap_mib * MIB))
                        .with_vram_margin(0)
                        .with_keep_key_resident(resident)
                        .with_workers_per_device(2)
                        .with_g2(G2Placement::Gpu),
                )
                .unwrap();
                let mut plans = Vec::new();
                // Small, small, big, big, then alternating, two in flight at a time.
                for order in [[0usize, 0], [1, 1], [0, 1], [1, 0], [0, 1]] {
                    let jobs: Vec<_> = order
                        .iter()
                        .map(|&i| (i, engine.submit(&keys[i], witnesses[i].clone(), fixed)))
                        .collect();
                    for (i, job) in jobs {
                        match job.unwrap().wait_report() {
                            Ok((proof, report)) => {
                                assert_eq!(
                                    proof.to_bytes(),
                                    want[i],
                                    "{what_in}: {:?}",
                                    report.plan
                                );
                                plans.extend(report.plan);
                            }
                            Err(
                                ProveError::TooLargeForDevice { .. }
                                | ProveError::DeviceMemoryHeld { .. },
                            ) => {}
                            Err(e) => panic!("{what_in}: {e}"),
                        }
                    }
                }
                let st = engine.shutdown();
                assert!(
                    st.vram_budget_high_water <= cap_mib * MIB,
                    "{what_in}: {st:?}"
                );
                tx.send(plans).unwrap();
            });
            let got = rx
                .recv_timeout(std::time::Duration::from_secs(180))
                .unwrap_or_else(|_| panic!("{what}: the engine hung or its thread panicked"));
            plans.extend(got);
        }
    }
    println!("plans: {plans:#?}");
    assert_some_plan(&plans, |p| matches!(p.memory, JobMemoryUse::Kept { .. }));
    assert_some_plan(&plans, |p| matches!(p.memory, JobMemoryUse::PerJob { .. }));
}

/// Two keys' jobs in turn on one worker: with room for both beside a job, each key is
/// uploaded once and stays; under budgets where the other key would slow a job's plan, it
/// is given up (and uploaded again when its turn comes). Every proof is the CPU's.
#[test]
fn two_keys_stay_resident_side_by_side_while_the_budget_leaves_jobs_their_plans() {
    if gpu_context().is_none() {
        return;
    }
    let fixed = Randomness::Fixed {
        r: Scalar::from(53u64),
        s: Scalar::from(59u64),
    };
    let sh = shape(18);
    let keys = [
        Arc::new(random_key(&sh, 61).unwrap()),
        Arc::new(random_key(&sh, 62).unwrap()),
    ];
    let witnesses = [random_witness(&sh, 63), random_witness(&sh, 64)];
    let want: Vec<[u8; 192]> = (0..2)
        .map(|i| cpu_proof(&keys[i], witnesses[i].clone(), fixed).to_bytes())
        .collect();
    let turns = [0usize, 1, 0, 1, 0, 1];
    let mut outcomes = Vec::new();
    for cap_mib in [
        None,
        Some(512usize),
        Some(320),
        Some(256),
        Some(224),
        Some(192),
        Some(160),
    ] {
        let what = format!("cap {cap_mib:?} MiB");
        let engine = Engine::start(
            Config::default()
                .with_proof_check(ProofCheck::Off)
                .with_backend(Backend::Gpu)
                .with_vram_cap(cap_mib.map(|c| c * MIB))
                .with_vram_margin(0)
                .with_keep_key_resident(true)
                .with_workers_per_device(1)
                .with_g2(G2Placement::Gpu),
        )
        .unwrap();
        let mut resident_jobs = 0;
        for &i in &turns {
            let job = engine
                .submit(&keys[i], witnesses[i].clone(), fixed)
                .unwrap();
            match job.wait_report() {
                Ok((proof, report)) => {
                    assert_eq!(proof.to_bytes(), want[i], "{what}: {:?}", report.plan);
                    if report
                        .plan
                        .is_some_and(|p| p.bases == KeyPlacement::Resident)
                    {
                        resident_jobs += 1;
                    }
                }
                Err(ProveError::TooLargeForDevice { .. }) => {}
                Err(e) => panic!("{what}: {e}"),
            }
        }
        let st = engine.shutdown();
        if let Some(c) = cap_mib {
            assert!(st.vram_budget_high_water <= c * MIB, "{what}: {st:?}");
        }
        println!(
            "{what}: {resident_jobs} jobs resident, {} uploads, {} evictions",
            st.resident_uploads, st.resident_evictions
        );
        if resident_jobs == turns.len() {
            // Every job's key was resident: each upload past the first two followed an
            // eviction, and one key's job never evicts its own key.
            assert!(st.resident_uploads >= 2, "{what}: {st:?}");
            assert!(
                st.resident_uploads <= 2 + st.resident_evictions,
                "{what}: {st:?}"
            );
            outcomes.push((st.resident_uploads, st.resident_evictions));
        }
    }
    assert!(
        outcomes.contains(&(2, 0)),
        "with room for both, each key uploaded once and kept: {outcomes:?}"
    );
    assert!(
        outcomes.iter().any(|&(_, evictions)| evictions > 0),
        "some budget makes the other key give way: {outcomes:?}"
    );
}

#[test]
fn a_witness_that_does_not_satisfy_the_circuit_is_an_error_on_the_gpu() {
    if gpu_context().is_none() {
        return;
    }
    let sh = shape(14);
    let key = Arc::new(random_key(&sh, 51).unwrap());
    let good = random_witness(&sh, 52);
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_g2(G2Placement::Gpu),
    )
    .unwrap();
    let fixed = Randomness::Fixed {
        r: Scalar::from(53u64),
        s: Scalar::from(59u64),
    };
    engine
        .submit(&key, good.clone(), fixed)
        .unwrap()
        .wait()
        .expect("generated witnesses satisfy the H step's check (c = a·b)");
    for i in [0, 5, good.c.len() - 1] {
        let mut c = good.c.to_vec();
        c[i] += Scalar::from(1u64);
        let bad = zkpipe_pipeline::Witness {
            c: c.into(),
            ..good.clone()
        };
        match engine.submit(&key, bad, fixed).unwrap().wait() {
            Err(ProveError::Unsatisfied) => {}
            other => panic!("constraint {i}: expected Unsatisfied, got {other:?}"),
        }
    }
    // The engine goes on.
    engine.submit(&key, good, fixed).unwrap().wait().unwrap();
}

/// Asserts that some job ran under a plan with the property `has`.
#[track_caller]
fn assert_some_plan(plans: &[PlanReport], has: impl Fn(&PlanReport) -> bool) {
    assert!(plans.iter().any(has), "no such plan among {plans:#?}");
}

/// What [`prove_under_caps`] checks of each job's report besides its proof bytes.
type ReportCheck<'a> = &'a dyn Fn(&str, &zkpipe_pipeline::JobReport);

/// Proves `w` twice on the GPU under each cap of `caps`, with the key resident (where it
/// fits) and streamed: every proof must be `want`'s bytes (a job too large for a cap must say
/// so with the bytes), every report pass `check`, and the VRAM high-water stay under the cap.
/// Gives the plans the jobs ran under.
fn prove_under_caps(
    key: &Arc<zkpipe_pipeline::ProvingKey>,
    w: &zkpipe_pipeline::Witness,
    want: &Proof,
    fixed: Randomness,
    caps: &[Option<usize>],
    check: ReportCheck<'_>,
) -> Vec<PlanReport> {
    let mut plans = Vec::new();
    for &cap in caps {
        for resident in [true, false] {
            let engine = Engine::start(
                Config::default()
                    .with_proof_check(ProofCheck::Off)
                    .with_backend(Backend::Gpu)
                    .with_vram_cap(cap)
                    .with_vram_margin(0)
                    .with_keep_key_resident(resident)
                    .with_g2(G2Placement::Gpu),
            )
            .unwrap();
            let what = format!("cap {cap:?}, resident {resident}");
            let jobs = engine
                .submit_batch(key, vec![w.clone(), w.clone()], fixed)
                .unwrap();
            for j in jobs {
                match j.wait_report() {
                    Ok((proof, report)) => {
                        assert_eq!(
                            proof.to_bytes(),
                            want.to_bytes(),
                            "{what}: {:?}",
                            report.plan
                        );
                        check(&what, &report);
                        plans.extend(report.plan);
                    }
                    Err(ProveError::TooLargeForDevice {
                        needed, capacity, ..
                    }) => {
                        assert!(cap.is_some() && needed > capacity, "{what}");
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
            }
            let st = engine.shutdown();
            if let Some(c) = cap {
                assert!(st.vram_budget_high_water <= c, "{what}: {st:?}");
            }
        }
    }
    println!("plans: {plans:#?}");
    plans
}

/// The recorded path on the device: a, b and c evaluated from the recording into the H
/// step's vectors give the proof the CPU makes from the evaluated witness, in the
/// four-vector and the three-vector H step, with the matrices resident and streamed, the key
/// resident and streamed; the VRAM high-water stays under the cap.
#[test]
fn recorded_witnesses_prove_on_the_device_as_evaluated_ones_on_the_cpu() {
    if gpu_context().is_none() {
        return;
    }
    use zkpipe_pipeline::testgen::recorded_witness;
    use zkpipe_pipeline::MatricesPlacement;
    let fixed = Randomness::Fixed {
        r: Scalar::from(23u64),
        s: Scalar::from(29u64),
    };
    let sh = shape(20);
    let key = Arc::new(random_key(&sh, 31).unwrap());
    let w = recorded_witness(&sh, 32).unwrap();
    let evaluated = w.clone().evaluated().unwrap();
    let want = cpu_proof(&key, evaluated, fixed);
    let evaluated_on_device = |what: &str, report: &zkpipe_pipeline::JobReport| {
        let evaluate = report
            .device_ms
            .iter()
            .find(|t| t.stage == zkpipe_pipeline::Stage::Evaluate);
        assert!(evaluate.is_some(), "{what}: {report:?}");
    };
    let caps = [None, Some(400 * MIB), Some(160 * MIB), Some(128 * MIB)];
    let plans = prove_under_caps(&key, &w, &want, fixed, &caps, &evaluated_on_device);
    let recorded = |m| move |p: &PlanReport| p.matrices == Some(m);
    assert_some_plan(&plans, recorded(MatricesPlacement::Resident));
    assert_some_plan(&plans, recorded(MatricesPlacement::Streamed));
    assert_some_plan(&plans, |p| p.h_vectors == 3 && p.matrices.is_some());
    assert_some_plan(&plans, |p| p.h_vectors == 4 && p.matrices.is_some());
    assert_some_plan(&plans, |p| p.bases == KeyPlacement::Streamed);
}

/// A recording resident on the device serves only jobs of its very content: a recording of
/// the same id with another coefficient (a circuit changed without a new name) gets its own
/// matrices, and its proof is the CPU's.
#[test]
fn a_changed_recording_under_the_same_id_is_not_taken_for_the_resident_one() {
    if gpu_context().is_none() {
        return;
    }
    use zkpipe_pipeline::testgen::recorded_witness;
    use zkpipe_r1cs::Recording;
    let fixed = Randomness::Fixed {
        r: Scalar::from(37u64),
        s: Scalar::from(41u64),
    };
    let sh = shape(16);
    let key = Arc::new(random_key(&sh, 43).unwrap());
    let first = recorded_witness(&sh, 44).unwrap();
    let rec = first.recording.clone().unwrap();
    let mut table = rec.table().to_vec();
    table[2] = Scalar::from(3u64);
    let changed = Recording::from_parts(
        rec.id().clone(),
        rec.shape(),
        table,
        rec.matrices().map(Clone::clone),
    )
    .unwrap();
    assert_ne!(changed.digest(), rec.digest());
    let second = zkpipe_pipeline::Witness {
        recording: Some(Arc::new(changed)),
        ..first.clone()
    };
    let want: Vec<_> = [&first, &second]
        .into_iter()
        .map(|w| cpu_proof(&key, w.clone().evaluated().unwrap(), fixed))
        .collect();
    assert_ne!(want[0].to_bytes(), want[1].to_bytes());
    let gpu = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_keep_key_resident(true),
    )
    .unwrap();
    for (i, w) in [&first, &second, &first].into_iter().enumerate() {
        let (proof, report) = gpu
            .submit(&key, w.clone(), fixed)
            .unwrap()
            .wait_report()
            .unwrap();
        assert_eq!(
            proof.to_bytes(),
            want[i % 2].to_bytes(),
            "job {i}: {:?}",
            report.plan
        );
    }
}

/// The GPU workers' host work (the witness split, a, b and c padded and copied into
/// page-locked memory, the sums combined) runs on the engine's own threads: jobs whose key is
/// resident, one with its witness in the caller's vectors and one in lent memory, are proved
/// while every thread of rayon's global pool is held by the caller's own work, as a daemon's
/// request decoding or a prover's synthesis holds it.
#[test]
fn jobs_are_proved_while_the_callers_rayon_pool_is_busy() {
    if gpu_context().is_none() {
        return;
    }
    use crossbeam::channel::{bounded, unbounded};
    use std::time::Duration;
    let fixed = Randomness::Fixed {
        r: Scalar::from(67u64),
        s: Scalar::from(71u64),
    };
    let sh = shape(16);
    let key = Arc::new(random_key(&sh, 73).unwrap());
    let source = WitnessSource::new(&sh, 74);
    let want = cpu_proof(&key, source.witness(), fixed).to_bytes();
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_keep_key_resident(true)
            .with_pinned_witness(4 * (32 << 20))
            .with_g2(G2Placement::Gpu),
    )
    .unwrap();
    // The first job makes the key resident (its upload is not what this test is about).
    let first = engine.submit(&key, source.witness(), fixed).unwrap();
    assert_eq!(first.wait().unwrap().to_bytes(), want);
    let wait = Duration::from_secs(60);
    let witnesses = [
        source.witness(),
        source
            .witness_in_lent(engine.lend_witness(&key, wait).unwrap())
            .unwrap(),
    ];

    let threads = rayon::current_num_threads();
    let (release, released) = bounded::<()>(0);
    let (held, holding) = unbounded::<()>();
    for _ in 0..threads {
        let (released, held) = (released.clone(), held.clone());
        rayon::spawn(move || {
            let _ = held.send(());
            let _ = released.recv();
        });
    }
    for _ in 0..threads {
        holding
            .recv_timeout(Duration::from_secs(30))
            .expect("every thread of the global pool held");
    }
    let jobs: Vec<_> = witnesses
        .into_iter()
        .map(|w| engine.submit(&key, w, fixed).unwrap())
        .collect();
    let (done, proved) = bounded(1);
    std::thread::spawn(move || {
        let proofs: Vec<_> = jobs.into_iter().map(|job| job.wait()).collect();
        let _ = done.send(proofs);
    });
    let outcome = proved.recv_timeout(wait);
    drop(release);
    let proofs =
        outcome.expect("a job waited for rayon's global pool, which the caller's work holds");
    for proof in proofs {
        assert_eq!(proof.unwrap().to_bytes(), want);
    }
    let st = engine.shutdown();
    assert_eq!(st.pinned_in_use, 0, "lent memory not back");
}
