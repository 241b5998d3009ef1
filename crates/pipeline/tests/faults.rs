//! Driver faults injected into a small job on the GPU (zkpipe-cuda's `fault-injection`
//! feature): every call of the job is failed in turn, once, and then from it on for good (a
//! sticky error). Every outcome must be a typed error to that job's caller or a proof equal to
//! the CPU's; the next job must prove; and the device memory, the VRAM budget and the pinned
//! pools must come back to where they were. A watchdog aborts the test if a job hangs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use zkpipe_cuda::fault::{self, Fault};
use zkpipe_cuda::testing::gpu_context;
use zkpipe_pipeline::testgen::{random_key, random_witness, Shape};
use zkpipe_pipeline::{
    Backend, Config, Engine, G2Placement, OnDeviceFailure, ProofCheck, ProveError, ProvingKey,
    Randomness, Witness,
};

const MIB: usize = 1 << 20;

fn shape() -> Shape {
    Shape {
        log_n: 14,
        inputs: 2,
        aux: (1 << 14) - 10,
        a_every: 8,
        b_every: 4,
    }
}

fn fixed() -> Randomness {
    Randomness::Fixed {
        r: Scalar::from(3u64),
        s: Scalar::from(5u64),
    }
}

fn gpu_engine(on_device_failure: OnDeviceFailure) -> Engine {
    Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Gpu)
            .with_workers_per_device(1)
            .with_g2(G2Placement::Gpu)
            .with_vram_cap(Some(2048 * MIB))
            .with_on_device_failure(on_device_failure),
    )
    .unwrap()
}

/// Progress for the watchdog: it aborts the process when this stops moving for 120 s.
static PROGRESS: AtomicU64 = AtomicU64::new(0);

fn watchdog() {
    std::thread::spawn(|| {
        let mut last = (PROGRESS.load(Ordering::SeqCst), Instant::now());
        loop {
            std::thread::sleep(Duration::from_secs(5));
            let now = PROGRESS.load(Ordering::SeqCst);
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(120) {
                eprintln!("watchdog: no progress for 120 s at step {now}: a hang");
                std::process::abort();
            }
        }
    });
}

/// What one injected job ended in.
#[derive(Debug, Default)]
struct Outcomes {
    proofs: usize,
    errors: std::collections::BTreeMap<&'static str, usize>,
    quarantined: usize,
}

impl Outcomes {
    fn error(&mut self, e: &ProveError) {
        *self.errors.entry(e.kind()).or_default() += 1;
    }
}

struct Setup {
    key: Arc<ProvingKey>,
    witness: Witness,
    want: [u8; 192],
}

fn setup() -> Setup {
    let sh = shape();
    let key = Arc::new(random_key(&sh, 1).unwrap());
    let witness = random_witness(&sh, 2);
    let cpu = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    let want = cpu
        .submit(&key, witness.clone(), fixed())
        .unwrap()
        .wait()
        .unwrap()
        .to_bytes();
    Setup { key, witness, want }
}

/// One engine: a clean job, then `fault` armed for the next job, then a clean job again.
/// Checks the injected job's outcome, the clean one after it, and the budget and pools.
fn inject(s: &Setup, fault: Fault, on_failure: OnDeviceFailure, out: &mut Outcomes) {
    let engine = gpu_engine(on_failure);
    let baseline = {
        let p = engine.submit(&s.key, s.witness.clone(), fixed()).unwrap();
        assert_eq!(
            p.wait().unwrap().to_bytes(),
            s.want,
            "clean job before {fault:?}"
        );
        engine.stats()
    };
    let what = format!("{fault:?}");
    fault::arm(fault);
    let injected = engine
        .submit(&s.key, s.witness.clone(), fixed())
        .and_then(|h| h.wait());
    fault::disarm();
    PROGRESS.fetch_add(1, Ordering::SeqCst);
    match &injected {
        Ok(p) => {
            assert_eq!(p.to_bytes(), s.want, "{what}: a wrong proof");
            out.proofs += 1;
        }
        Err(e) => out.error(e),
    }
    // The next job proves: on the device, or (quarantined, failing over) on the CPU.
    let next = engine.submit(&s.key, s.witness.clone(), fixed()).unwrap();
    match next.wait() {
        Ok(p) => assert_eq!(p.to_bytes(), s.want, "{what}: the next job's proof"),
        Err(e) => panic!("{what}: the next job failed: {e} (first: {injected:?})"),
    }
    let st = engine.stats();
    out.quarantined += st.quarantined_devices;
    assert_eq!(st.pinned_in_use, 0, "{what}: pinned memory still out");
    // Idle job memory may be kept or freed; never more granted than after the clean job.
    assert!(
        st.vram_budget_in_use <= baseline.vram_budget_in_use,
        "{what}: budget {} in use, {} after the clean job",
        st.vram_budget_in_use,
        baseline.vram_budget_in_use
    );
    drop(engine);
}

#[test]
fn every_driver_call_of_a_job_fails_in_turn_and_the_engine_survives() {
    if gpu_context().is_none() {
        return;
    }
    watchdog();
    let s = setup();
    // Calls of one job, counted on a warm engine.
    let engine = gpu_engine(OnDeviceFailure::Fail);
    engine
        .submit(&s.key, s.witness.clone(), fixed())
        .unwrap()
        .wait()
        .unwrap();
    let before = fault::calls();
    engine
        .submit(&s.key, s.witness.clone(), fixed())
        .unwrap()
        .wait()
        .unwrap();
    let per_job = fault::calls() - before;
    drop(engine);
    let live_before = zkpipe_cuda::census::live();
    println!("driver calls in one 2^14 job: {per_job}");
    assert!(per_job > 50, "{per_job} calls: the count is not counting");

    let limit: u64 = std::env::var("ZKPIPE_FAULT_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let stride = per_job.div_ceil(limit).max(1);
    let t = Instant::now();
    let mut once = Outcomes::default();
    for n in (1..=per_job).step_by(stride as usize) {
        let f = Fault::nth_call(fault::ANY, n, zkpipe_cuda::CUDA_ERROR_OUT_OF_MEMORY);
        inject(&s, f, OnDeviceFailure::Fail, &mut once);
    }
    println!(
        "once, every {stride}th call of {per_job}: {once:?} in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(
        once.quarantined, 0,
        "a one-off error quarantined the device"
    );
    let mut leaks = Vec::new();
    let mut phase_leaks = |phase: &str| {
        let now = zkpipe_cuda::census::live();
        println!("live driver resources after {phase}: {now:?}");
        if now != live_before {
            leaks.push(format!("{phase}: {now:?}, {live_before:?} before"));
        }
    };
    phase_leaks("the one-off faults");

    let t = Instant::now();
    let mut sticky = Outcomes::default();
    for n in (1..=per_job).step_by((stride * 4) as usize) {
        inject(
            &s,
            Fault::sticky_from(fault::ANY, n),
            OnDeviceFailure::Cpu,
            &mut sticky,
        );
    }
    println!(
        "sticky from every {}th call: {sticky:?} in {:.1} s",
        stride * 4,
        t.elapsed().as_secs_f64()
    );
    assert!(
        sticky.quarantined > 0,
        "no sticky fault quarantined the device"
    );
    phase_leaks("the sticky faults");

    // Targeted kinds: out of memory in device, pinned and registered allocations; a copy, an
    // event record, a launch out of resources (701: a launch fault the context survives; 719,
    // a kernel's failure, is sticky and quarantines the device from its status alone); a
    // synchronize that hangs for 3 s and then fails.
    let mut targeted = Outcomes::default();
    for (call, code) in [
        ("cuMemAlloc_v2", 2),
        ("cuMemHostAlloc", 2),
        ("cuMemHostRegister_v2", 2),
        ("cuMemcpyHtoDAsync_v2", 1),
        ("cuEventRecord", 1),
        ("cuLaunchKernel", 701),
    ] {
        for n in [1, 2, 3, 5, 8, 13] {
            inject(
                &s,
                Fault::nth_call(call, n, code),
                OnDeviceFailure::Fail,
                &mut targeted,
            );
        }
    }
    let hang = Fault::nth_call("cuStreamSynchronize", 2, 999).after(Duration::from_secs(3));
    inject(&s, hang, OnDeviceFailure::Fail, &mut targeted);
    println!("targeted: {targeted:?}");
    // A kernel's failure (719) once: sticky by its status, so the device is quarantined from
    // the error alone (the context itself still works here: the fault was injected), and the
    // job is proved again on the CPU.
    let mut launch_failed = Outcomes::default();
    let f = Fault::nth_call("cuLaunchKernel", 1, 719);
    inject(&s, f, OnDeviceFailure::Cpu, &mut launch_failed);
    println!("a launch failure once: {launch_failed:?}");
    assert_eq!(launch_failed.quarantined, 1, "{launch_failed:?}");
    phase_leaks("the targeted faults");

    // A sticky fault aimed at another device (Fault::on_device): this engine's device (0)
    // never sees it. Aimed at device 0, it fails the job and quarantines the device.
    for (device, hits) in [(1, false), (0, true)] {
        let engine = gpu_engine(OnDeviceFailure::Fail);
        let injected = fault::injected();
        fault::arm(Fault::sticky_from(fault::ANY, 1).on_device(device));
        let job = engine
            .submit(&s.key, s.witness.clone(), fixed())
            .and_then(|h| h.wait());
        fault::disarm();
        PROGRESS.fetch_add(1, Ordering::SeqCst);
        let st = engine.stats();
        match hits {
            false => {
                assert_eq!(job.unwrap().to_bytes(), s.want, "fault on device {device}");
                assert_eq!(fault::injected(), injected, "no call failed");
                assert_eq!(st.quarantined_devices, 0);
            }
            true => {
                assert!(
                    job.is_err(),
                    "a sticky fault on device 0 from its first call"
                );
                assert!(fault::injected() > injected);
                assert_eq!(st.quarantined_devices, 1, "{:?}", engine.quarantined());
            }
        }
        drop(engine);
    }
    phase_leaks("the device-targeted faults");

    // With the CPU as the policy, the engine keeps each job's witness until the job is done:
    // a job whose device fails for good mid-job is proved again on the CPU, not lost.
    for n in [3, per_job / 2, per_job - 5] {
        let engine = gpu_engine(OnDeviceFailure::Cpu);
        fault::arm(Fault::sticky_from(fault::ANY, n).on_device(0));
        let job = engine
            .submit(&s.key, s.witness.clone(), fixed())
            .and_then(|h| h.wait());
        fault::disarm();
        PROGRESS.fetch_add(1, Ordering::SeqCst);
        let proof = job.unwrap_or_else(|e| panic!("sticky from call {n}: the job was lost: {e}"));
        assert_eq!(proof.to_bytes(), s.want, "sticky from call {n}");
        let st = engine.stats();
        assert_eq!(st.quarantined_devices, 1, "sticky from call {n}");
        assert_eq!(
            st.pinned_in_use, 0,
            "sticky from call {n}: pinned memory still out"
        );
        drop(engine);
    }
    phase_leaks("the faults retried on the CPU");

    // Once every engine is gone, the process holds what it held before the sweep: device and
    // pinned allocations, registrations (the key's stay), modules, streams, events. (Free
    // device memory is no measure here: other tests' processes share the device.)
    assert!(leaks.is_empty(), "driver resources leaked: {leaks:#?}");
}
