//! Faults at start and at a key's first job (zkpipe-cuda's `fault-injection` feature): kernel
//! images that do not load (as on a device no image fits) are an error at start naming the
//! load, and `Backend::Auto` falls back to the CPU and proves; a key that cannot be
//! page-locked proves from pageable memory. The armed fault is process-wide: the tests take
//! one lock.

use std::sync::Arc;

use blstrs::Scalar;
use zkpipe_cuda::fault::{self, Fault};
use zkpipe_cuda::testing::gpu_context;
use zkpipe_pipeline::testgen::{random_key, random_witness, Shape};
use zkpipe_pipeline::{Backend, Config, Engine, G2Placement, ProofCheck, Randomness, Witness};

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn small() -> (
    Arc<zkpipe_pipeline::ProvingKey>,
    Witness,
    Randomness,
    [u8; 192],
) {
    let sh = Shape {
        log_n: 10,
        inputs: 2,
        aux: 1000,
        a_every: 8,
        b_every: 4,
    };
    let key = Arc::new(random_key(&sh, 1).unwrap());
    let w = random_witness(&sh, 2);
    let fixed = Randomness::Fixed {
        r: Scalar::from(3u64),
        s: Scalar::from(5u64),
    };
    let cpu = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    let want = cpu.submit(&key, w.clone(), fixed).unwrap().wait().unwrap();
    (key, w, fixed, want.to_bytes())
}

#[test]
fn a_module_that_fails_to_load_is_an_error_at_start_and_auto_falls_back_to_the_cpu() {
    if gpu_context().is_none() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // CUDA_ERROR_NO_BINARY_FOR_GPU from every module load.
    fault::arm(Fault {
        mode: fault::Mode::Persistent,
        ..Fault::nth_call("cuModuleLoadData", 1, 209)
    });
    let gpu = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu),
    );
    let auto = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Auto),
    );
    fault::disarm();
    match gpu {
        Err(e) => assert!(e.to_string().contains("cuModuleLoadData"), "{e}"),
        Ok(_) => panic!("a GPU engine started without its kernels"),
    }
    let auto = auto.expect("Backend::Auto falls back to the CPU");
    assert!(!auto.on_gpu(), "{}", auto.backend());
    let (key, w, fixed, want) = small();
    let got = auto.submit(&key, w, fixed).unwrap().wait().unwrap();
    assert_eq!(got.to_bytes(), want);
}

#[test]
fn a_key_that_cannot_be_page_locked_proves_from_pageable_memory() {
    if gpu_context().is_none() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (key, w, fixed, want) = small();
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_g2(G2Placement::Gpu),
    )
    .unwrap();
    fault::arm(Fault {
        mode: fault::Mode::Persistent,
        ..Fault::nth_call("cuMemHostRegister_v2", 1, 2)
    });
    let explicit = engine.load_key(&key);
    let proofs: Vec<_> = (0..2)
        .map(|_| engine.submit(&key, w.clone(), fixed).and_then(|h| h.wait()))
        .collect();
    fault::disarm();
    assert!(explicit.is_err(), "load_key reports the failed page-lock");
    assert!(!key.is_pinned());
    for p in proofs {
        assert_eq!(p.unwrap().to_bytes(), want);
    }
}
