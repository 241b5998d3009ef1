//! `zkpipe-bench ntt`: our GPU transform, ec-gpu-gen's GPU FFT and the CPU implementation
//! side by side (data resident on the device for the GPU), then the H step at the largest size
//! from pinned host memory.

use std::time::Instant;

use blstrs::Scalar;
use ff::Field;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde_json::json;
use zkpipe_cuda::{Context, DeviceBuffer, StageClock, Timing};
use zkpipe_field::{cast, Fr};
use zkpipe_ntt::baseline::EcGpuGenFft;
use zkpipe_ntt::{CpuNtt, CudaNtt, Direction, HStepBuffers, HVectors, Ntt, NttConfig};
use zkpipe_pinned::PinnedBuffer;

use crate::load::ECGPU;
use crate::stats::median;
use crate::{BenchResult, Report};

/// `n` random scalars, generated on all cores.
pub fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 14;
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| {
        let mut r =
            ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        c.iter_mut().for_each(|x| *x = Scalar::random(&mut r));
    });
    v
}

pub fn run(
    sizes: &[u32],
    runs: usize,
    cpu_max: u32,
    h_log: Option<u32>,
    h_columns: usize,
) -> BenchResult<Report> {
    let ctx = Context::new(0)?;
    let ours = CudaNtt::new(&ctx)?.with_h_columns(h_columns);
    let theirs = EcGpuGenFft::load(&ctx, &ECGPU)?;
    let stream = ours.stream();
    let seed = rand::thread_rng().next_u64();
    let mut table = format!(
        "NTT on {}, forward, natural order, data on the device; median of {runs} runs (CUDA events)\n| size | zkpipe ms | ec-gpu-gen ms | ec-gpu-gen / zkpipe | CPU ms ({} threads) | results equal |\n| --- | --- | --- | --- | --- | --- |\n",
        ctx.info().name,
        rayon::current_num_threads()
    );
    let mut rows = Vec::new();
    for &k in sizes {
        let n = 1usize << k;
        let x = random_scalars(n, seed ^ u64::from(k));
        let src = DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&x))?;
        let mut data = DeviceBuffer::<Fr>::alloc(&ctx, n)?;
        let mut scratch = DeviceBuffer::<Fr>::alloc(&ctx, n)?;
        let ours_ms = time_device(
            &ctx,
            stream,
            &src,
            &mut data,
            &mut scratch,
            runs,
            &mut |d, s| {
                Ok(ours.transform_device(d, s, Direction::Forward, &NttConfig::default())?)
            },
        )?;
        let ours_out = data.to_vec()?;
        let theirs_ms = time_device(
            &ctx,
            stream,
            &src,
            &mut data,
            &mut scratch,
            runs,
            &mut |d, s| Ok(theirs.forward(stream, d, s)?),
        )?;
        let equal = data.to_vec()? == ours_out;
        let cpu_ms = if k <= cpu_max {
            let mut v = x.clone();
            let t = Instant::now();
            CpuNtt::new().transform(&mut v, Direction::Forward, &NttConfig::default())?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let agrees = v.iter().zip(&ours_out).all(|(a, b)| Fr::from(*a) == *b);
            if !agrees {
                return Err(format!("2^{k}: the GPU result differs from the CPU's").into());
            }
            Some(ms)
        } else {
            None
        };
        let cpu = cpu_ms.map_or("-".to_string(), |m| format!("{m:.1}"));
        table.push_str(&format!(
            "| 2^{k} | {ours_ms:.3} | {theirs_ms:.3} | {:.2} | {cpu} | {equal} |\n",
            theirs_ms / ours_ms
        ));
        rows.push(json!({"log_n": k, "zkpipe_ms": ours_ms, "ec_gpu_gen_ms": theirs_ms, "cpu_ms": cpu_ms, "equal": equal}));
    }
    let mut json = json!({"device": ctx.info().name, "runs": runs, "ntt": rows});
    if let Some(k) = h_log {
        let (t, j) = h_step(&ctx, &ours, k, seed)?;
        table.push_str(&t);
        json["h_step"] = j;
    }
    Ok(Report { table, json })
}

type DeviceOp<'a> = dyn FnMut(&mut DeviceBuffer<Fr>, &mut DeviceBuffer<Fr>) -> BenchResult<()> + 'a;

/// Median event-timed milliseconds of `f` on a fresh copy of `src`, after one warm-up run.
fn time_device(
    ctx: &std::sync::Arc<Context>,
    stream: &zkpipe_stream::Stream,
    src: &DeviceBuffer<Fr>,
    data: &mut DeviceBuffer<Fr>,
    scratch: &mut DeviceBuffer<Fr>,
    runs: usize,
    f: &mut DeviceOp<'_>,
) -> BenchResult<f64> {
    let mut v = Vec::new();
    for i in 0..=runs {
        data.copy_from_device_async_at(0, src, stream)?;
        stream.synchronize()?;
        let t = StageClock::start(ctx, stream, Timing::Enabled)?;
        f(data, scratch)?;
        let ms = t.stop("ntt", stream)?;
        if i > 0 {
            v.push(ms);
        }
    }
    Ok(median(v))
}

/// The H step at 2^k: device-resident (in buffers allocated per call, and in kept ones), then
/// from pinned host memory with overlapped uploads.
/// Copies a, b and c into the H step's kept device vectors.
fn copy_inputs(bufs: &mut HStepBuffers, [a, b, c]: [&[Fr]; 3]) -> BenchResult<()> {
    let inputs = bufs.inputs_mut();
    inputs.a.copy_from_host(a)?;
    inputs.b.copy_from_host(b)?;
    inputs
        .c
        .ok_or("the H step's buffers hold no c")?
        .copy_from_host(c)?;
    Ok(())
}

fn h_step(
    ctx: &std::sync::Arc<Context>,
    ntt: &CudaNtt,
    k: u32,
    seed: u64,
) -> BenchResult<(String, serde_json::Value)> {
    let n = 1usize << k;
    let stream = ntt.stream();
    let t = Instant::now();
    let mut host = Vec::new();
    for i in 0..3u64 {
        let v = random_scalars(n, seed ^ (0xa5a5 + i));
        host.push(PinnedBuffer::from_slice(ctx, cast::scalars_as_fr(&v))?);
    }
    let prep_s = t.elapsed().as_secs_f64();
    let mut c = host.pop().ok_or("no host buffer")?;
    let b = host.pop().ok_or("no host buffer")?;
    let a = host.pop().ok_or("no host buffer")?;
    // c = a·b, so that a·b - c vanishes on the domain (as in a real witness).
    c.par_iter_mut()
        .zip(a.par_iter().zip(b.par_iter()))
        .for_each(|(c, (a, b))| {
            *c = Fr::from(Scalar::from(*a) * Scalar::from(*b));
        });

    // Upload alone (one 4 GiB vector), event-timed.
    let mut dev = DeviceBuffer::<Fr>::alloc(ctx, n)?;
    let copy = zkpipe_stream::Stream::new(ctx)?;
    let t = StageClock::start(ctx, &copy, Timing::Enabled)?;
    let a = zkpipe_stream::upload(&copy, a, &mut dev, 0)?.wait()?;
    let upload_one_ms = t.stop("upload", &copy)?;
    drop(dev);

    // From pinned memory into buffers kept from one step to the next, as a service would run
    // it: three steps back to back, nothing freed in between. The pause first lets the
    // driver's work after the frees above end (the probe below shows what it costs a copy).
    let mut reused_ms = Vec::new();
    let mut bufs = ntt.h_step_buffers(n, HVectors::Four)?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (mut a, mut b, mut c) = (a, b, c);
    for i in 0..3 {
        let t = Instant::now();
        [a, b, c] = ntt.h_step_pinned_into(&mut bufs, a, b, c)?;
        if i > 0 {
            reused_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    // Device-resident in the same kept buffers: the inputs copied in (not timed), then the
    // step alone, event-timed. This is the step as the engine runs it: without the
    // allocations, the first writes to fresh memory and the frees of the per-call runs below.
    let mut kept_ms = Vec::new();
    for i in 0..3 {
        copy_inputs(&mut bufs, [&a, &b, &c])?;
        let t = StageClock::start(ctx, stream, Timing::Enabled)?;
        ntt.h_step_in(&mut bufs)?;
        let ms = t.stop("ntt", stream)?;
        if i > 0 {
            kept_ms.push(ms);
        }
    }
    drop(bufs);

    let mut device_ms = Vec::new();
    let mut pinned_ms = Vec::new();
    for i in 0..3 {
        // Device-resident in fresh buffers: uploads excluded; the step and the frees of b, c
        // and the scratch vector timed.
        let mut fresh = ntt.h_step_buffers(n, HVectors::Four)?;
        copy_inputs(&mut fresh, [&a, &b, &c])?;
        let t = StageClock::start(ctx, stream, Timing::Enabled)?;
        ntt.h_step_in(&mut fresh)?;
        let h = fresh.into_h();
        let ms = t.stop("ntt", stream)?;
        drop(h);
        // From pinned memory into fresh buffers, uploads overlapped (host-timed, from the
        // allocations to h, the other vectors freed).
        let t = Instant::now();
        let mut fresh = ntt.h_step_buffers(n, HVectors::Four)?;
        let [ra, rb, rc] = ntt.h_step_pinned_into(&mut fresh, a, b, c)?;
        let h = fresh.into_h();
        ntt.synchronize()?;
        let pms = t.elapsed().as_secs_f64() * 1e3;
        drop(h);
        (a, b, c) = (ra, rb, rc);
        if i > 0 {
            device_ms.push(ms);
            pinned_ms.push(pms);
        }
    }
    let (probe_table, probe) = upload_probe(ctx, a)?;
    let (dev_ms, pin_ms) = (median(device_ms), median(pinned_ms));
    let reuse_ms = median(reused_ms);
    let dev_kept_ms = median(kept_ms);
    let upload_ms = 3.0 * upload_one_ms;
    let hidden = (upload_ms + dev_ms - pin_ms).max(0.0);
    let hidden_reused = (upload_ms + dev_ms - reuse_ms).max(0.0);
    let table = format!(
        "\nH step at 2^{k} (3 x {} MiB inputs; inputs prepared in {prep_s:.1} s), median of 2 after a warm-up; from pinned memory into buffers allocated per call (each step after the previous one's frees), and into buffers kept from step to step (steps back to back, nothing freed); device-resident in buffers allocated per step (h_step_in on fresh buffers, b, c and scratch freed) and in kept buffers (h_step_in):\n| device-resident ms | device-resident, buffers kept ms | from pinned ms | from pinned, buffers kept ms | uploads alone ms | upload hidden ms (kept) | hidden share (kept) |\n| --- | --- | --- | --- | --- | --- | --- |\n| {dev_ms:.1} | {dev_kept_ms:.1} | {pin_ms:.1} | {reuse_ms:.1} | {upload_ms:.1} | {hidden:.1} ({hidden_reused:.1}) | {:.0}% ({:.0}%) |\n",
        (n * 32) >> 20,
        100.0 * hidden / upload_ms,
        100.0 * hidden_reused / upload_ms
    ) + &probe_table;
    Ok((
        table,
        json!({"log_n": k, "device_ms": dev_ms, "device_kept_buffers_ms": dev_kept_ms, "pinned_ms": pin_ms, "pinned_kept_buffers_ms": reuse_ms, "upload_ms": upload_ms, "hidden_ms": hidden, "hidden_kept_ms": hidden_reused, "upload_probe": probe}),
    ))
}

/// One vector's upload (event-timed) into device memory allocated right after 16 GiB were
/// freed, the same after a pause, and into memory already written once: whether a fresh
/// allocation's first writes, or the driver's work after a large free, slow a copy.
fn upload_probe(
    ctx: &std::sync::Arc<Context>,
    host: PinnedBuffer<Fr>,
) -> BenchResult<(String, serde_json::Value)> {
    let n = host.len();
    let copy = zkpipe_stream::Stream::new(ctx)?;
    let mut host = Some(host);
    let mut timed = |dev: &mut DeviceBuffer<Fr>| -> BenchResult<f64> {
        let t = StageClock::start(ctx, &copy, Timing::Enabled)?;
        let h = host.take().ok_or("no host buffer")?;
        host = Some(zkpipe_stream::upload(&copy, h, dev, 0)?.wait()?);
        Ok(t.stop("upload", &copy)?)
    };
    let mut rows = Vec::new();
    for pause_ms in [0u64, 500] {
        let big: Vec<DeviceBuffer<Fr>> = (0..4)
            .map(|_| DeviceBuffer::<Fr>::alloc(ctx, n))
            .collect::<Result<_, _>>()?;
        drop(big);
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        let mut dev = DeviceBuffer::<Fr>::alloc(ctx, n)?;
        let fresh = timed(&mut dev)?;
        let again = timed(&mut dev)?;
        rows.push((pause_ms, fresh, again));
    }
    let mut table = String::from(
        "\nOne upload after 16 GiB were allocated and freed:\n| pause ms | into a fresh allocation ms | again, same memory ms |\n| --- | --- | --- |\n",
    );
    for (p, f, a) in &rows {
        table += &format!("| {p} | {f:.1} | {a:.1} |\n");
    }
    let json = rows
        .iter()
        .map(|(p, f, a)| json!({"pause_ms": p, "fresh_ms": f, "again_ms": a}))
        .collect::<Vec<_>>();
    Ok((table, json!(json)))
}
