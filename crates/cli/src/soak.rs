//! `zkpipe soak`: the engine under a service's load for a while. Several threads submit jobs
//! of keys of different sizes in turn, a share of the handles is dropped at once (those jobs
//! are cancelled), and every proof of a key small enough is compared with the CPU's proof for
//! the same r and s. Every few jobs a line: proofs a second, latency percentiles, failures by
//! kind, VRAM budget and pinned memory in use, live driver allocations, RSS. Leaks are checked
//! after 1, 10 and 1000 jobs and after the engine is dropped: after warm-up (1000 jobs) the
//! budget in use and the live device allocations must not grow, RSS not by more than a tenth,
//! and the engine must leave nothing behind. Any failure, wrong proof or leak makes the exit
//! status non-zero.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use zkpipe_pipeline::testgen::{random_key, random_witness, Shape};
use zkpipe_pipeline::{
    Backend, Config, Engine, G2Placement, JobHandle, ProofCheck, ProveError, ProvingKey,
    Randomness, Witness,
};

use crate::exit::Failure;
use crate::prove::rss_bytes;

type Error = Box<dyn std::error::Error>;

/// What `zkpipe soak` was asked for.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long to run, in minutes.
    #[arg(long, default_value_t = 60.0)]
    pub minutes: f64,
    /// log2 sizes of the keys that take turns (one key each).
    #[arg(long, value_delimiter = ',', default_values_t = vec![10, 16, 22])]
    pub sizes: Vec<u32>,
    /// Threads submitting jobs.
    #[arg(long, default_value_t = 3)]
    pub threads: usize,
    /// One handle in this many is dropped right after its submit (the job is cancelled).
    #[arg(long, default_value_t = 10)]
    pub drop_every: u64,
    /// Proofs of keys up to this log2 size are compared with the CPU's.
    #[arg(long, default_value_t = 16)]
    pub check_max: u32,
    /// A line every this many finished jobs.
    #[arg(long, default_value_t = 100)]
    pub report_every: u64,
    /// Devices to use: comma-separated ordinals, UUIDs or PCI bus ids [default: every device].
    #[arg(long, env = "ZKPIPE_DEVICES", long_help = crate::devices::HELP)]
    pub devices: Option<String>,
    /// Workers per device.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Cap each device's VRAM budget at this many GiB.
    #[arg(long)]
    pub vram_cap_gib: Option<f64>,
}

/// One key of the soak: the key, a witness, and the CPU's proof for fixed r and s when
/// checked.
struct Case {
    log_n: u32,
    key: Arc<ProvingKey>,
    witness: Witness,
    want: Option<[u8; 192]>,
}

fn fixed() -> Randomness {
    Randomness::Fixed {
        r: Scalar::from(13u64),
        s: Scalar::from(17u64),
    }
}

fn cases(a: &Args) -> Result<Vec<Case>, Error> {
    let cpu = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Cpu),
    )?;
    let mut out = Vec::new();
    for (i, &log_n) in a.sizes.iter().enumerate() {
        if !(2..=26).contains(&log_n) {
            let e = format!("--sizes: 2^{log_n} is outside 2^2..2^26");
            return Err(Failure::Usage(e).into());
        }
        let n = 1usize << log_n;
        let shape = Shape {
            log_n,
            inputs: 2,
            aux: n - n / 16,
            a_every: 8,
            b_every: 4,
        };
        let t = Instant::now();
        let key = Arc::new(random_key(&shape, 100 + i as u64)?);
        let witness = random_witness(&shape, 200 + i as u64);
        let want = match log_n <= a.check_max {
            true => Some(
                cpu.submit(&key, witness.clone(), fixed())?
                    .wait()?
                    .to_bytes(),
            ),
            false => None,
        };
        crate::say!(
            "key 2^{log_n}: made{} in {:.1} s",
            if want.is_some() {
                ", CPU proof for the check"
            } else {
                ""
            },
            t.elapsed().as_secs_f64()
        );
        out.push(Case {
            log_n,
            key,
            witness,
            want,
        });
    }
    Ok(out)
}

/// A submitted job waiting for the collector.
struct Pending {
    case: usize,
    handle: JobHandle,
    submitted: Instant,
}

/// What the collector has seen.
#[derive(Default)]
struct Tally {
    done: u64,
    wrong: u64,
    failures: BTreeMap<&'static str, u64>,
    latencies_ms: Vec<f64>,
}

/// The collectors' shared view: the tally, the report window, the leak checkpoints.
struct Seen {
    tally: Tally,
    window: (Instant, u64),
    checkpoints: Vec<Held>,
}

impl Tally {
    fn finished(&self) -> u64 {
        self.done + self.wrong + self.failures.values().sum::<u64>()
    }

    fn fail(&mut self, e: &ProveError) {
        *self.failures.entry(e.kind()).or_default() += 1;
    }
}

/// A leak checkpoint: what the engine and the process held after some jobs.
#[derive(Debug, Clone, Copy)]
struct Held {
    jobs: u64,
    budget: usize,
    /// Of `budget`, what is kept between jobs (resident keys, workers' job memory).
    kept: usize,
    pinned: usize,
    live: zkpipe_cuda::census::Live,
    rss: u64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn run(a: &Args) -> Result<(), Failure> {
    if a.sizes.is_empty() || a.threads == 0 || a.drop_every == 0 || a.report_every == 0 {
        let e = "--sizes, --threads, --drop-every and --report-every must be non-zero";
        return Err(Failure::Usage(e.into()));
    }
    let cases = cases(a).map_err(|e| match e.downcast::<Failure>() {
        Ok(f) => *f,
        Err(other) => Failure::Other(other),
    })?;
    let live_before = zkpipe_cuda::census::live();
    let engine = Engine::start(
        Config::default()
            .with_proof_check(ProofCheck::Off)
            .with_backend(Backend::Auto)
            .with_devices(crate::devices::select(a.devices.as_deref())?)
            .with_workers_per_device(a.workers)
            .with_g2(G2Placement::Gpu)
            .with_vram_cap(a.vram_cap_gib.map(|g| (g * (1u64 << 30) as f64) as usize))
            .with_queue_capacity(8),
    )
    .map_err(Failure::start)?;
    crate::say!(
        "soak: {} for {} min, keys 2^{:?}, {} submitting threads, one handle in {} dropped",
        engine.backend(),
        a.minutes,
        a.sizes,
        a.threads,
        a.drop_every
    );
    let deadline = Instant::now() + Duration::from_secs_f64(a.minutes * 60.0);
    let stop = AtomicBool::new(false);
    let next = AtomicU64::new(0);
    let dropped = AtomicU64::new(0);
    let (tx, rx) = crossbeam::channel::bounded::<Pending>(64);
    let t0 = Instant::now();
    let seen = std::sync::Mutex::new(Seen {
        tally: Tally::default(),
        window: (Instant::now(), 0),
        checkpoints: Vec::new(),
    });
    std::thread::scope(|scope| -> Result<(), Error> {
        for _ in 0..a.threads {
            let tx = tx.clone();
            let (cases, engine, stop, next, dropped) = (&cases, &engine, &stop, &next, &dropped);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let case = (i % cases.len() as u64) as usize;
                    let c = &cases[case];
                    let submitted = Instant::now();
                    let Ok(handle) = engine.submit(&c.key, c.witness.clone(), fixed()) else {
                        break;
                    };
                    if i % a.drop_every == a.drop_every - 1 {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        continue; // the handle drops: the job is cancelled if still queued
                    }
                    let p = Pending {
                        case,
                        handle,
                        submitted,
                    };
                    if tx.send(p).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Collectors wait for the handles, several at once, so that a large job does not hold
        // up the latency of the small ones behind it.
        for _ in 0..4 {
            let (rx, cases, engine, stop, seen, dropped) =
                (rx.clone(), &cases, &engine, &stop, &seen, &dropped);
            scope.spawn(move || {
                for p in rx.iter() {
                    let result = p.handle.wait();
                    let latency_ms = p.submitted.elapsed().as_secs_f64() * 1e3;
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    let Seen {
                        tally,
                        window,
                        checkpoints,
                    } = &mut *s;
                    tally.latencies_ms.push(latency_ms);
                    let log_n = cases[p.case].log_n;
                    match result {
                        Ok(proof) => match cases[p.case].want {
                            Some(want) if proof.to_bytes() != want => {
                                tally.wrong += 1;
                                crate::say!("WRONG PROOF for key 2^{log_n}");
                                stop.store(true, Ordering::Relaxed);
                            }
                            _ => tally.done += 1,
                        },
                        Err(e) => {
                            crate::say!("job failed (key 2^{log_n}): {e}");
                            tally.fail(&e);
                        }
                    }
                    let finished = tally.finished();
                    if matches!(finished, 1 | 10 | 1000) {
                        checkpoints.push(held(engine, finished));
                    }
                    if finished % a.report_every == 0 {
                        report(engine, tally, window, finished, t0, dropped);
                    }
                }
            });
        }
        Ok(())
    })?;
    let Seen {
        tally,
        mut window,
        checkpoints,
    } = seen.into_inner().unwrap_or_else(|p| p.into_inner());
    let finished = tally.finished();
    // Idle (the jobs of dropped handles may still run): what is still held then is what the
    // engine keeps between jobs.
    let mut problems = Vec::new();
    if let Err(running) = wait_idle(&engine, Duration::from_secs(60)) {
        problems.push(format!(
            "{running} jobs still running 60 s after the last was waited for"
        ));
    }
    let end = held(&engine, finished);
    report(&engine, &tally, &mut window, finished, t0, &dropped);
    let st = engine.shutdown();
    drop(engine);
    let live_after = zkpipe_cuda::census::live();
    for c in &checkpoints {
        crate::say!(
            "after {:>5} jobs: budget in use {} B ({} B kept), pinned in use {} B, live {:?}, RSS {:.2} GiB",
            c.jobs,
            c.budget,
            c.kept,
            c.pinned,
            c.live,
            c.rss as f64 / (1u64 << 30) as f64
        );
    }
    crate::say!(
        "at the end ({} jobs): budget in use {} B ({} B kept), pinned in use {} B, live {:?}, RSS {:.2} GiB",
        end.jobs,
        end.budget,
        end.kept,
        end.pinned,
        end.live,
        end.rss as f64 / (1u64 << 30) as f64
    );
    // Idle at the end: every byte still granted is kept for a next job, by its worker or as
    // a resident key. Kept memory grows as workers meet new shapes, up to one set per worker
    // and shape; growth of anything else is a leak.
    if end.budget != end.kept {
        problems.push(format!(
            "{} B of the VRAM budget held by no job while idle ({} B in use, {} B kept)",
            end.budget.saturating_sub(end.kept),
            end.budget,
            end.kept
        ));
    }
    // Warm-up ends after 1000 jobs (10 in a run too short for that).
    let warm = checkpoints
        .iter()
        .rev()
        .find(|c| c.jobs == 1000 || c.jobs == 10);
    if let Some(first) = warm {
        // Device allocations are comparable while the kept memory is the same set.
        if end.kept != first.kept {
            crate::say!(
                "kept memory went from {} to {} B after {} jobs (workers met new shapes): driver allocation counts not compared",
                first.kept,
                end.kept,
                first.jobs
            );
        } else if end.live.device_allocations > first.live.device_allocations {
            problems.push(format!(
                "driver allocations grew: {:?} then {:?}",
                first.live, end.live
            ));
        }
        if end.rss as f64 > first.rss as f64 * 1.10 + (256u64 << 20) as f64 {
            problems.push(format!("RSS grew from {} to {} B", first.rss, end.rss));
        }
    }
    if end.pinned != 0 {
        problems.push(format!("{} B of pinned memory still out", end.pinned));
    }
    // The keys stay page-locked after the engine (they are the caller's).
    let keep = |l: zkpipe_cuda::census::Live| zkpipe_cuda::census::Live {
        registrations: 0,
        ..l
    };
    if keep(live_after) != keep(live_before) {
        problems.push(format!(
            "after the engine was dropped: {live_after:?}, before it started: {live_before:?}"
        ));
    }
    if tally.wrong > 0 || !tally.failures.is_empty() {
        problems.push(format!(
            "{} wrong proofs, failures {:?}",
            tally.wrong, tally.failures
        ));
    }
    println!(
        "soak: {} jobs finished in {:.1} min ({} proofs checked or unchecked ok, {} cancelled by dropped handles), engine: done {} failed {} cancelled {}",
        finished,
        t0.elapsed().as_secs_f64() / 60.0,
        tally.done,
        dropped.load(Ordering::Relaxed),
        st.done,
        st.failed,
        st.cancelled
    );
    match problems.is_empty() {
        true => {
            println!("soak: no failed or wrong proof, no leak");
            Ok(())
        }
        false => Err(Failure::Jobs(problems.join("; "))),
    }
}

/// Waits until every submitted job is done, failed or cancelled; else the count still running.
fn wait_idle(engine: &Engine, limit: Duration) -> Result<(), u64> {
    let until = Instant::now() + limit;
    loop {
        let st = engine.stats();
        let running = st.submitted - (st.done + st.failed + st.cancelled).min(st.submitted);
        if running == 0 {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(running);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn held(engine: &Engine, jobs: u64) -> Held {
    let st = engine.stats();
    Held {
        jobs,
        budget: st.vram_budget_in_use,
        kept: st.vram_kept,
        pinned: st.pinned_in_use,
        live: zkpipe_cuda::census::live(),
        rss: rss_bytes().unwrap_or(0),
    }
}

fn report(
    engine: &Engine,
    tally: &Tally,
    window: &mut (Instant, u64),
    finished: u64,
    t0: Instant,
    dropped: &AtomicU64,
) {
    let st = engine.stats();
    let secs = window.0.elapsed().as_secs_f64().max(1e-9);
    let rate = (finished - window.1) as f64 / secs;
    *window = (Instant::now(), finished);
    let lat = &tally.latencies_ms;
    let mut recent = lat[lat.len().saturating_sub(1000)..].to_vec();
    recent.sort_by(f64::total_cmp);
    println!(
        "{:>7.1} s: {finished} jobs ({} dropped), {rate:.2} proofs/s, latency p50 {:.0} ms p99 {:.0} ms (last 1000), failures {:?}, wrong {}, budget in use {:.2} GiB, pinned in use {:.2} GiB, live device allocations {}, RSS {:.2} GiB",
        t0.elapsed().as_secs_f64(),
        dropped.load(Ordering::Relaxed),
        percentile(&recent, 0.5),
        percentile(&recent, 0.99),
        tally.failures,
        tally.wrong,
        st.vram_budget_in_use as f64 / (1u64 << 30) as f64,
        st.pinned_in_use as f64 / (1u64 << 30) as f64,
        zkpipe_cuda::census::live().device_allocations,
        rss_bytes().unwrap_or(0) as f64 / (1u64 << 30) as f64,
    );
}
