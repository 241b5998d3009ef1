//! `zkpipe-bench msm`: our GPU MSM (bases and scalars resident on the device), ec-gpu-gen's
//! multiexp kernel (G1) and blst on the host's cores, side by side.

use std::time::Instant;

use rayon::prelude::*;
use serde_json::json;
use zkpipe_cuda::{Context, DeviceBuffer};
use zkpipe_field::{cast, Exponent};
use zkpipe_msm::baseline::EcGpuGenMultiexp;
use zkpipe_msm::testgen::{booleans, g1_points, g2_points, scalars};
use zkpipe_msm::{
    BaseSource, Bases, CpuMsm, CudaMsm, Density, GpuCurve, Msm, Multiples, ScalarKind, SplitQuery,
    SplitScalars, StreamOptions, G1, G2,
};
use zkpipe_pinned::PinnedBuffer;
use zkpipe_stream::Pinned;

use crate::load::ECGPU;
use crate::stats::median;
use crate::{BenchResult, Report};

fn time<T>(runs: usize, mut f: impl FnMut() -> BenchResult<T>) -> BenchResult<(f64, T)> {
    let mut last = f()?;
    let mut v = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        last = f()?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(v), last))
}

/// What `zkpipe-bench msm` was asked for.
#[derive(Debug)]
pub struct Args {
    pub curve: String,
    pub sizes: Vec<u32>,
    pub runs: usize,
    pub boolean: bool,
    pub mixed: bool,
    pub cpu_max: u32,
    pub ec_windows: Vec<u32>,
    /// Also time the streamed mode, with chunks of this many points.
    pub streamed_chunk: Option<usize>,
    /// Also time the resident MSM with each of these window widths.
    pub window_bits: Vec<u32>,
    /// With each width, bases carrying this many copies of precomputed multiples (1: none).
    pub copies: Vec<u32>,
    /// Resident MSMs keep their workspace between calls.
    pub keep_workspace: bool,
    /// The MSM kernels' settings.
    pub tuning: zkpipe_msm::MsmTuning,
}

/// The resident MSM on `ctx`, keeping its workspace between calls when `a` asks.
fn resident(ctx: &std::sync::Arc<Context>, a: &Args) -> BenchResult<CudaMsm> {
    let gpu = CudaMsm::tuned(ctx, ctx.info().total_memory, &a.tuning)?;
    Ok(match a.keep_workspace {
        true => gpu.keeping_workspace(),
        false => gpu,
    })
}

/// The resident MSM with each fixed window width (`--window-bits`) and each number of copies
/// of precomputed multiples (`--copies`), keeping its workspace when `a` asks: "c=16: 524.5,
/// c=20 t=4: 380.2 (51.54 GB, made in 410 ms)" (median ms; the device bytes of the bases with
/// their multiples), and whether every result equals `expect`.
fn windows<C: GpuCurve>(
    ctx: &std::sync::Arc<Context>,
    a: &Args,
    bases: &zkpipe_msm::DeviceBases<C>,
    scalars: &DeviceBuffer<zkpipe_field::Fr>,
    kind: ScalarKind,
    expect: &C::Projective,
) -> BenchResult<(String, bool)> {
    let mut figures = Vec::new();
    let mut equal = true;
    let runs = a.runs;
    let copies = if a.copies.is_empty() {
        &[1][..]
    } else {
        &a.copies[..]
    };
    for &c in &a.window_bits {
        let gpu = resident(ctx, a)?.with_window_bits(c)?;
        for &t in copies {
            if t <= 1 {
                let (ms, r) = time(runs, || Ok(gpu.msm_device::<C>(bases, scalars, kind)?))?;
                equal &= r == *expect;
                figures.push(format!("c={c}: {ms:.1}"));
                continue;
            }
            let made = Instant::now();
            let pre = gpu.with_multiples(bases, Multiples::new(c, t)?)?;
            let made_ms = made.elapsed().as_secs_f64() * 1e3;
            let (ms, r) = time(runs, || Ok(gpu.msm_device::<C>(&pre, scalars, kind)?))?;
            equal &= r == *expect;
            let gb = pre.bytes() as f64 / 1e9;
            figures.push(format!(
                "c={c} t={t}: {ms:.1} ({gb:.2} GB, made in {made_ms:.0} ms)"
            ));
        }
    }
    Ok((figures.join(", "), equal))
}

/// The streamed MSM from pinned copies of `b` and `s`: (median ms, result).
fn streamed<C: GpuCurve>(
    gpu: &CudaMsm,
    ctx: &std::sync::Arc<Context>,
    bases: &[C::GpuAffine],
    s: &[blstrs::Scalar],
    opts: &StreamOptions,
    runs: usize,
) -> BenchResult<(f64, C::Projective)> {
    let hb = PinnedBuffer::from_slice(ctx, bases)?;
    let hs = PinnedBuffer::from_slice(ctx, cast::scalars_as_fr(s))?;
    time(runs, || {
        Ok(gpu.msm_streamed::<C>(Pinned::new(&hb), Pinned::new(&hs), opts)?)
    })
}

/// The split MSM (ones summed, the tail through Pippenger) of `s` over resident bases, as an
/// engine runs it: the host split (timed apart), the upload of the tail and bitmaps, then a
/// batch of one MSM. Returns (median ms on the GPU side, host split ms, result).
fn split<C: GpuCurve>(
    gpu: &CudaMsm,
    bases: &zkpipe_msm::DeviceBases<C>,
    s: &[blstrs::Scalar],
    runs: usize,
) -> BenchResult<(f64, f64, C::Projective)> {
    let t = Instant::now();
    let split = std::sync::Arc::new(SplitScalars::of(s)?);
    let split_ms = t.elapsed().as_secs_f64() * 1e3;
    let query = SplitQuery::new(&split, &Density::all(s.len()))?;
    let chunk = split.tail().len().max(32);
    let dev_split = gpu.upload_split(split)?;
    let dev_query = gpu.upload_query(query)?;
    let (ms, r) = time(runs, || {
        let mut batch = gpu.batch::<C>(chunk)?;
        let t = batch.split(BaseSource::Resident(bases), &dev_split, &dev_query)?;
        Ok(batch.finish()?.sum(t)?)
    })?;
    Ok((ms, split_ms, r))
}

pub fn run(a: &Args) -> BenchResult<Report> {
    let ctx = Context::new(0)?;
    let gpu = resident(&ctx, a)?;
    let theirs = EcGpuGenMultiexp::load(&ctx, &ECGPU)?;
    let (curve, runs, boolean) = (a.curve.as_str(), a.runs, a.boolean);
    let kind = if boolean {
        ScalarKind::Boolean
    } else {
        ScalarKind::Dense
    };
    let sopts = a.streamed_chunk.map(|chunk| StreamOptions {
        chunk,
        kind,
        ..StreamOptions::default()
    });
    let mode = match a.streamed_chunk {
        Some(c) => format!("streamed from pinned memory in chunks of {c} points (uploads included) beside resident (bases and scalars on the device)"),
        None if a.keep_workspace => {
            "bases, scalars and the workspace (kept between calls) on the device".to_string()
        }
        None => "bases and scalars on the device".to_string(),
    };
    let mode = match (curve, gpu.g2_batch()) {
        ("g2", 1) => format!("{mode}; G2 bucket sums by XYZZ additions"),
        ("g2", b) => format!("{mode}; G2 bucket sums batch-affine, {b} runs a thread"),
        _ => mode,
    };
    let mut table = format!(
        "MSM {curve} on {}, {} scalars, {mode}; median of {runs} runs (host-timed, synchronous)\n| size | zkpipe ms | zkpipe, fixed windows ms | split MSM ms (mixed only) | streamed ms | streamed / resident | ec-gpu-gen ms (best window) | ec-gpu-gen / zkpipe | blst CPU ms ({} threads) | all equal |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        ctx.info().name,
        if boolean {
            "0/1 (half set)"
        } else if a.mixed {
            "mixed (0/1, one in 16 random)"
        } else {
            "random"
        },
        rayon::current_num_threads()
    );
    let mut rows = Vec::new();
    for &k in &a.sizes {
        let n = 1usize << k;
        let t = Instant::now();
        let s = if boolean {
            booleans(n, 2, u64::from(k))
        } else if a.mixed {
            mixed(n, u64::from(k))
        } else {
            scalars(n, u64::from(k))
        };
        let ds = DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&s))?;
        let (ours_ms, fixed, streamed_ms, theirs_best, cpu, equal, split_ms) = if curve == "g2" {
            let b = Bases::new_unchecked(g2_points(n, u64::from(k) ^ 99));
            eprintln!("2^{k}: inputs in {:.1} s", t.elapsed().as_secs_f64());
            let db = gpu.upload_bases::<G2>(&b)?;
            let (ms, r) = time(runs, || Ok(gpu.msm_device::<G2>(&db, &ds, kind)?))?;
            let (fixed, mut equal) = windows::<G2>(&ctx, a, &db, &ds, kind, &r)?;
            let sp = match a.mixed {
                true => {
                    let (t, host_ms, sr) = split::<G2>(&gpu, &db, &s, runs)?;
                    equal &= sr == r;
                    Some((t, host_ms))
                }
                false => None,
            };
            drop(db);
            let st = match &sopts {
                Some(o) => {
                    let view = cast::g2_affine_as_gpu(b.points());
                    let (t, sr) = streamed::<G2>(&gpu, &ctx, view, &s, o, runs)?;
                    equal &= sr == r;
                    Some(t)
                }
                None => None,
            };
            let cpu = cpu_time(k <= a.cpu_max, || CpuMsm::new().g2(&b, &s, None))?;
            equal &= cpu.as_ref().is_none_or(|(_, c)| *c == r);
            (ms, fixed, st, None, cpu.map(|c| c.0), equal, sp)
        } else {
            let b = Bases::new_unchecked(g1_points(n, u64::from(k) ^ 99));
            eprintln!("2^{k}: inputs in {:.1} s", t.elapsed().as_secs_f64());
            let db = gpu.upload_bases::<G1>(&b)?;
            let (ms, r) = time(runs, || Ok(gpu.msm_device::<G1>(&db, &ds, kind)?))?;
            let (fixed, mut equal) = windows::<G1>(&ctx, a, &db, &ds, kind, &r)?;
            let sp = match a.mixed {
                true => {
                    let (t, host_ms, sr) = split::<G1>(&gpu, &db, &s, runs)?;
                    equal &= sr == r;
                    Some((t, host_ms))
                }
                false => None,
            };
            let exps: Vec<Exponent> = s.par_iter().map(|x| Exponent::from(*x)).collect();
            let de = DeviceBuffer::from_host(&ctx, &exps)?;
            let mut best: Option<(f64, u32)> = None;
            for &w in a.ec_windows.iter().filter(|&&w| w > 0) {
                let (t_ms, their) = time(runs.min(3), || {
                    Ok(theirs.multiexp(CudaMsm::bases_buffer::<G1>(&db), &de, w)?)
                })?;
                equal &= their == r;
                if best.is_none_or(|(b, _)| t_ms < b) {
                    best = Some((t_ms, w));
                }
            }
            drop((db, de));
            let st = match &sopts {
                Some(o) => {
                    let view = cast::g1_affine_as_gpu(b.points());
                    let (t, sr) = streamed::<G1>(&gpu, &ctx, view, &s, o, runs)?;
                    equal &= sr == r;
                    Some(t)
                }
                None => None,
            };
            let cpu = cpu_time(k <= a.cpu_max, || CpuMsm::new().g1(&b, &s, None))?;
            equal &= cpu.as_ref().is_none_or(|(_, c)| *c == r);
            (ms, fixed, st, best, cpu.map(|c| c.0), equal, sp)
        };
        let their = theirs_best.map_or("-".to_string(), |(t, w)| format!("{t:.1} (w={w})"));
        let ratio = theirs_best.map_or("-".to_string(), |(t, _)| format!("{:.2}", t / ours_ms));
        let cpu_s = cpu.map_or("-".to_string(), |c| format!("{c:.1}"));
        let st_s = streamed_ms.map_or("-".to_string(), |t| format!("{t:.1}"));
        let st_r = streamed_ms.map_or("-".to_string(), |t| format!("{:.2}", t / ours_ms));
        let sp_s = split_ms.map_or("-".to_string(), |(t, h)| {
            format!("{t:.1} (host split {h:.0})")
        });
        table.push_str(&format!(
            "| 2^{k} | {ours_ms:.1} | {fixed} | {sp_s} | {st_s} | {st_r} | {their} | {ratio} | {cpu_s} | {equal} |\n"
        ));
        rows.push(json!({"log_n": k, "zkpipe_ms": ours_ms, "fixed_windows": fixed, "split_ms": split_ms.map(|s| s.0), "host_split_ms": split_ms.map(|s| s.1), "streamed_ms": streamed_ms, "streamed_chunk": a.streamed_chunk, "ec_gpu_gen_ms": theirs_best.map(|b| b.0), "ec_gpu_gen_window": theirs_best.map(|b| b.1), "cpu_ms": cpu, "equal": equal}));
        if !equal {
            return Err(format!("2^{k}: results differ between implementations").into());
        }
    }
    Ok(Report {
        table,
        json: json!({"device": ctx.info().name, "curve": curve, "boolean": boolean, "runs": runs, "msm": rows}),
    })
}

/// Filecoin-like scalars: 0 or 1, but one in 16 random.
fn mixed(n: usize, seed: u64) -> Vec<blstrs::Scalar> {
    let r = scalars(n, seed);
    let b = booleans(n, 2, seed ^ 1);
    r.into_par_iter()
        .zip(b)
        .enumerate()
        .map(|(i, (r, b))| if i % 16 == 7 { r } else { b })
        .collect()
}

fn cpu_time<T>(
    run: bool,
    f: impl Fn() -> Result<T, zkpipe_msm::MsmError>,
) -> BenchResult<Option<(f64, T)>> {
    if !run {
        return Ok(None);
    }
    let t = Instant::now();
    let r = f()?;
    Ok(Some((t.elapsed().as_secs_f64() * 1e3, r)))
}
