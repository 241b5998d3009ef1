//! `zkpipe-bench pcie`: copy bandwidth by memory kind and size, and copy/kernel overlap.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use zkpipe_cuda::{Context, DeviceBuffer};
use zkpipe_cuda::{StageClock, Timing};
use zkpipe_pinned::{PinnedMemory, PinnedPool, RegisteredVec};
use zkpipe_stream::kernels::Spin;
use zkpipe_stream::{download, upload, Stream};

use crate::stats::{gbps, median, size_label};
use crate::{BenchResult, Report};

/// Median milliseconds of `runs` timed calls after one warm-up call.
fn time_ms(runs: usize, mut f: impl FnMut() -> BenchResult<f64>) -> BenchResult<f64> {
    f()?;
    let mut v = Vec::with_capacity(runs);
    for _ in 0..runs {
        v.push(f()?);
    }
    Ok(median(v))
}

/// Upload then download of a pinned host buffer; returns (h2d ms, d2h ms).
fn pinned_pair<H: PinnedMemory<u8>>(
    ctx: &Arc<Context>,
    stream: &Stream,
    dev: &mut DeviceBuffer<u8>,
    host: H,
    runs: usize,
) -> BenchResult<(f64, f64, H)> {
    let mut slot = Some(host);
    let h2d = time_ms(runs, || {
        let t = StageClock::start(ctx, stream, Timing::Enabled)?;
        let h = slot.take().ok_or("host buffer lost")?;
        slot = Some(upload(stream, h, dev, 0)?.wait()?);
        Ok(t.stop("upload", stream)?)
    })?;
    let d2h = time_ms(runs, || {
        let t = StageClock::start(ctx, stream, Timing::Enabled)?;
        let h = slot.take().ok_or("host buffer lost")?;
        slot = Some(download(stream, dev, 0, h)?.wait()?);
        Ok(t.stop("download", stream)?)
    })?;
    Ok((h2d, d2h, slot.ok_or("host buffer lost")?))
}

pub fn run(sizes_mib: &[usize], runs: usize) -> BenchResult<Report> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let info = ctx.info().clone();
    let sizes: Vec<usize> = sizes_mib.iter().map(|m| m << 20).collect();
    let total: usize = sizes.iter().sum();
    let pool = PinnedPool::new(&ctx, total + (64 << 20));
    let mut table = format!(
        "PCIe on {} ({}), median of {runs} runs\n| size | memory | host-to-device GB/s | device-to-host GB/s | note |\n| --- | --- | --- | --- | --- |\n",
        info.name, info.pci_bus_id
    );
    let mut rows = Vec::new();
    for &bytes in &sizes {
        let mut dev = DeviceBuffer::<u8>::alloc(&ctx, bytes)?;
        let label = size_label(bytes);

        // Pageable: synchronous copies from and to an ordinary, touched Vec (host-timed).
        let mut host = vec![1u8; bytes];
        let h2d = time_ms(runs, || {
            let t = Instant::now();
            dev.copy_from_host(&host)?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        })?;
        let d2h = time_ms(runs, || {
            let t = Instant::now();
            dev.copy_to_host(&mut host)?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        })?;
        let mut push = |memory: &str, h2d: f64, d2h: f64, note: String| {
            table.push_str(&format!(
                "| {label} | {memory} | {:.1} | {:.1} | {note} |\n",
                gbps(bytes, h2d),
                gbps(bytes, d2h)
            ));
            rows.push(
                json!({"bytes": bytes, "memory": memory, "h2d_ms": h2d, "d2h_ms": d2h,
                "h2d_gbps": gbps(bytes, h2d), "d2h_gbps": gbps(bytes, d2h), "note": note}),
            );
        };
        push(
            "pageable",
            h2d,
            d2h,
            "host-timed synchronous copies".to_string(),
        );

        // Pinned, from the pool (allocated once, outside the timing).
        let t = Instant::now();
        let buf = pool.acquire::<u8>(bytes, Duration::from_secs(60))?;
        let alloc_ms = t.elapsed().as_secs_f64() * 1e3;
        let (h2d, d2h, _buf) = pinned_pair(&ctx, &stream, &mut dev, buf, runs)?;
        push(
            "pinned (pool)",
            h2d,
            d2h,
            format!("event-timed; first acquire {alloc_ms:.0} ms"),
        );

        // Registered: the pageable Vec page-locked in place.
        let t = Instant::now();
        let reg = RegisteredVec::new(&ctx, std::mem::take(&mut host))?;
        let reg_ms = t.elapsed().as_secs_f64() * 1e3;
        let (h2d, d2h, reg) = pinned_pair(&ctx, &stream, &mut dev, reg, runs)?;
        let t = Instant::now();
        drop(reg.into_inner()?);
        let unreg_ms = t.elapsed().as_secs_f64() * 1e3;
        push(
            "registered",
            h2d,
            d2h,
            format!("event-timed; register {reg_ms:.0} ms, unregister {unreg_ms:.0} ms"),
        );
    }
    let overlap = overlap(&ctx, &pool, runs)?;
    table.push_str(&overlap.0);
    Ok(Report {
        table,
        json: json!({"device": info.name, "runs": runs, "copies": rows, "overlap": overlap.1}),
    })
}

/// A 1 GiB pinned upload on one stream and a kernel of about the same length on another:
/// each alone, then both at once.
fn overlap(
    ctx: &Arc<Context>,
    pool: &PinnedPool,
    runs: usize,
) -> BenchResult<(String, serde_json::Value)> {
    let bytes = 1usize << 30;
    let spin = Spin::load(ctx)?;
    let sms = ctx.info().sm_count;
    let copy_stream = Stream::new(ctx)?;
    let kernel_stream = Stream::new(ctx)?;
    let mut dev = DeviceBuffer::<u8>::alloc(ctx, bytes)?;
    let mut slot = Some(pool.acquire::<u8>(bytes, Duration::from_secs(60))?);

    let copy_ms = time_ms(runs, || {
        let t = StageClock::start(ctx, &copy_stream, Timing::Enabled)?;
        let h = slot.take().ok_or("host buffer lost")?;
        slot = Some(upload(&copy_stream, h, &mut dev, 0)?.wait()?);
        Ok(t.stop("copy", &copy_stream)?)
    })?;
    // Calibrate the kernel to about the copy's length.
    let probe_cycles = 10_000_000u64;
    let t = StageClock::start(ctx, &kernel_stream, Timing::Enabled)?;
    spin.launch(&kernel_stream, sms, probe_cycles)?;
    let probe_ms = t.stop("kernel", &kernel_stream)?;
    let cycles = (probe_cycles as f64 * copy_ms / probe_ms.max(1e-3)) as u64;
    let kernel_ms = time_ms(runs, || {
        let t = StageClock::start(ctx, &kernel_stream, Timing::Enabled)?;
        spin.launch(&kernel_stream, sms, cycles)?;
        Ok(t.stop("kernel", &kernel_stream)?)
    })?;
    let both_ms = time_ms(runs, || {
        let t = StageClock::start(ctx, &kernel_stream, Timing::Enabled)?;
        copy_stream.wait(&kernel_stream.record()?)?;
        spin.launch(&kernel_stream, sms, cycles)?;
        let h = slot.take().ok_or("host buffer lost")?;
        let inflight = upload(&copy_stream, h, &mut dev, 0)?;
        if let Some(e) = inflight.event() {
            kernel_stream.wait(e)?;
        }
        let ms = t.stop("copy beside kernel", &kernel_stream)?;
        slot = Some(inflight.wait()?);
        Ok(ms)
    })?;
    let ratio = both_ms / (copy_ms + kernel_ms);
    let table = format!(
        "\nOverlap, 1 GiB pinned upload beside a kernel on another stream (median of {runs}):\n| copy alone ms | kernel alone ms | together ms | together / sum |\n| --- | --- | --- | --- |\n| {copy_ms:.2} | {kernel_ms:.2} | {both_ms:.2} | {ratio:.2} |\n"
    );
    Ok((
        table,
        json!({"bytes": bytes, "copy_ms": copy_ms, "kernel_ms": kernel_ms, "together_ms": both_ms, "ratio": ratio}),
    ))
}
