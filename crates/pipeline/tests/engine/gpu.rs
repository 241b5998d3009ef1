//! The engine on the GPU: a job larger than the VRAM budget can ever hold is an error naming
//! the bytes (not a crash, not a wait), and the engine goes on proving jobs that fit; a GPU
//! proof equals the CPU proof for the same r and s.

use std::sync::Arc;

use blstrs::Scalar;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_pipeline::testgen::{random_key, random_witness, Shape};
use zkpipe_pipeline::{Backend, Config, Engine, G2Placement, ProveError, Randomness};

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
    let engine = Engine::start(Config {
        backend: Backend::Gpu,
        vram_cap: Some(96 << 20),
        g2: G2Placement::Gpu,
        ..Config::default()
    })
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
            assert_eq!(*capacity, 96 << 20);
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
    let st = engine.shutdown();
    assert_eq!((st.done, st.failed), (1, 1));
    assert!(st.vram_budget_high_water <= 96 << 20);
    let cpu = Engine::start(Config {
        backend: Backend::Cpu,
        ..Config::default()
    })
    .unwrap();
    let want = cpu.submit(&key, w, fixed).unwrap().wait().unwrap();
    assert_eq!(gpu.to_bytes(), want.to_bytes());
}
