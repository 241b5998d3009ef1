//! Driver tests: a missing driver is an error; on a GPU, devices, memory, copies, streams,
//! events and modules behave, and bad input is an error that names the numbers.

use std::sync::Arc;

use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{
    sys, CopyLog, DeviceBuffer, Error, Event, ImageBytes, KernelImage, LaunchConfig, LoadedFrom,
    Module, Prefer, Ptx, StageClock, Stream, Timing,
};

/// Tests in this file run in threads of one process; the ones that allocate take this lock so
/// that free-memory readings are not moved by a neighbour.
static DEVICE_MEMORY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn memory_lock() -> std::sync::MutexGuard<'static, ()> {
    DEVICE_MEMORY.lock().unwrap_or_else(|p| p.into_inner())
}

const FILL: KernelImage = KernelImage {
    name: "fill",
    ptx: Some(Ptx {
        arch: (9, 0),
        text: ImageBytes::Plain(include_bytes!("fixtures/fill.ptx")),
    }),
    cubins: &[],
};

#[test]
fn missing_driver_is_an_error_listing_what_was_tried() {
    let err = sys::open(&["libcuda-missing-for-test.so.1", "/nonexistent/libcuda.so"]).unwrap_err();
    let Error::NoDriver { tried } = &err else {
        panic!("expected NoDriver, got {err}")
    };
    assert_eq!(tried.len(), 2);
    let text = err.to_string();
    assert!(text.contains("libcuda-missing-for-test.so.1"), "{text}");
    assert!(text.contains("/nonexistent/libcuda.so"), "{text}");
    assert!(err.is_no_gpu());
}

#[test]
fn device_info_is_plausible() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let info = ctx.info();
    assert!(!info.name.is_empty());
    assert!(info.sm_count > 0);
    assert!(info.compute_capability.0 >= 5);
    let mem = ctx.mem_info().unwrap();
    assert!(mem.free > 0 && mem.free <= mem.total);
    assert_eq!(mem.total, info.total_memory);
    let (major, _) = zkpipe_cuda::driver_version().unwrap();
    assert!(major >= 11);
    assert!(zkpipe_cuda::device_count().unwrap() >= 1);
    let past = zkpipe_cuda::device_count().unwrap();
    assert!(
        matches!(zkpipe_cuda::device_info(past), Err(Error::DeviceOutOfRange { ordinal, count }) if ordinal == past && count == past)
    );
}

#[test]
fn buffer_roundtrip_and_length_checks() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let data: Vec<u64> = (0..100_000u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let buf = DeviceBuffer::from_host(&ctx, &data).unwrap();
    assert_eq!(buf.len(), data.len());
    assert_eq!(buf.to_vec().unwrap(), data);

    let mut small = vec![0u64; 10];
    let err = buf.copy_to_host(&mut small).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LengthMismatch {
                source_len: 100_000,
                destination_len: 10,
                ..
            }
        ),
        "{err}"
    );
    let mut buf = buf;
    let err = buf
        .copy_from_host_at(99_995, &[1, 2, 3, 4, 5, 6])
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfRange {
                start: 99_995,
                end: 100_001,
                len: 100_000,
                ..
            }
        ),
        "{err}"
    );
    buf.copy_from_host_at(99_995, &[1, 2, 3, 4, 5]).unwrap();
    assert_eq!(&buf.to_vec().unwrap()[99_995..], &[1, 2, 3, 4, 5]);

    let empty = DeviceBuffer::<u32>::alloc(&ctx, 0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.to_vec().unwrap(), Vec::<u32>::new());
}

#[test]
fn too_large_allocation_names_needed_and_free_bytes() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let total = ctx.mem_info().unwrap().total;
    let err = DeviceBuffer::<u8>::alloc(&ctx, total * 2).unwrap_err();
    match err {
        Error::OutOfDeviceMemory { needed, free } => {
            assert_eq!(needed, total * 2);
            assert!(free < needed);
        }
        other => panic!("expected OutOfDeviceMemory, got {other}"),
    }
}

#[test]
fn stream_ordered_memory_returns_to_the_device_after_trim() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let stream = Arc::new(Stream::new(&ctx).unwrap());
    // Keep freed memory in the pool, as an engine does for fast reallocation.
    ctx.set_async_pool_release_threshold(u64::MAX).unwrap();
    ctx.trim_async_pool(0).unwrap();
    let before = ctx.mem_info().unwrap().free;
    let bytes = 1usize << 30;
    let mut buf = DeviceBuffer::<u8>::alloc_async(&stream, bytes).unwrap();
    buf.zero_async(&stream).unwrap();
    stream.synchronize().unwrap();
    let during = ctx.mem_info().unwrap().free;
    assert!(
        before - during >= bytes,
        "1 GiB allocated: free went from {before} to {during}"
    );
    drop(buf);
    stream.synchronize().unwrap();
    // The freed memory sits in the pool: the free-memory reading does not see it yet.
    let pooled = ctx.mem_info().unwrap().free;
    assert!(
        before - pooled >= bytes,
        "before trim, the pool keeps the memory: {before} vs {pooled}"
    );
    ctx.trim_async_pool(0).unwrap();
    let after = ctx.mem_info().unwrap().free;
    ctx.set_async_pool_release_threshold(0).unwrap();
    assert!(
        before.abs_diff(after) < 64 << 20,
        "after trim: {before} vs {after}"
    );
}

#[test]
fn async_copies_and_events_order_work() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let s1 = Stream::new(&ctx).unwrap();
    let s2 = Stream::new(&ctx).unwrap();
    let n = 1 << 20;
    let src: Vec<u32> = (0..n as u32).collect();
    let mut a = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let mut b = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let start = Event::timed(&ctx).unwrap();
    let end = Event::timed(&ctx).unwrap();
    start.record(&s1).unwrap();
    // SAFETY: `src` outlives the synchronize below.
    unsafe { a.copy_from_host_async_at(0, &src, &s1) }.unwrap();
    end.record(&s1).unwrap();
    s2.wait(&end).unwrap();
    b.copy_from_device_async_at(0, &a, &s2).unwrap();
    let mut out = vec![0u32; n];
    // SAFETY: `out` is not touched until the synchronize below.
    unsafe { b.copy_to_host_async_at(0, &mut out, &s2) }.unwrap();
    s2.synchronize().unwrap();
    assert_eq!(out, src);
    assert!(end.is_complete().unwrap());
    let ms = start.elapsed_ms(&end).unwrap();
    assert!(ms > 0.0 && ms < 1000.0, "{ms}");
    assert!(s1.is_idle().unwrap());
}

/// Stages of the clock test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Upload,
    Copy,
    Download,
}

#[test]
fn a_stage_clock_times_each_stage_and_lanes_extend_its_span() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let (s1, s2) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let n = 1 << 22;
    let src: Vec<u32> = (0..n as u32).collect();
    let mut a = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let mut b = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let mut out = vec![0u32; n];

    let mut clock = StageClock::start(&ctx, &s1, Timing::Enabled).unwrap();
    // SAFETY: `src` outlives the synchronize below.
    unsafe { a.copy_from_host_async_at(0, &src, &s1) }.unwrap();
    clock.mark(Step::Upload, &s1).unwrap();
    b.copy_from_device_async_at(0, &a, &s1).unwrap();
    clock.mark(Step::Copy, &s1).unwrap();
    // The download on a second stream, on a lane of its own, after the copy.
    s2.wait(&s1.record().unwrap()).unwrap();
    let mut lane = StageClock::start(&ctx, &s2, Timing::Enabled).unwrap();
    // SAFETY: `out` is not touched until the synchronize below.
    unsafe { b.copy_to_host_async_at(0, &mut out, &s2) }.unwrap();
    lane.mark(Step::Download, &s2).unwrap();
    s2.synchronize().unwrap();
    clock.synchronize().unwrap();
    assert_eq!(out, src);

    let spans = clock.spans().unwrap();
    let stages: Vec<Step> = spans.iter().map(|s| s.stage).collect();
    assert_eq!(stages, [Step::Upload, Step::Copy]);
    assert!(
        spans.iter().all(|s| s.ms > 0.0 && s.ms < 1000.0),
        "{spans:?}"
    );
    let own = clock.span_ms(&[]).unwrap();
    let sum: f64 = spans.iter().map(|s| s.ms).sum();
    assert!((own - sum).abs() < 1e-3 * own.max(1.0), "{own} vs {sum}");
    let download = lane.spans().unwrap()[0].ms;
    let whole = clock.span_ms(&[&lane]).unwrap();
    assert!(
        whole >= own + 0.9 * download,
        "{whole} < {own} + {download}"
    );

    // Off, it records nothing, reports nothing, and stop gives 0.
    let mut off = StageClock::start(&ctx, &s1, Timing::Disabled).unwrap();
    off.mark(Step::Upload, &s1).unwrap();
    assert!(!off.is_on());
    assert!(off.spans().unwrap().is_empty());
    assert_eq!(off.stop(Step::Copy, &s1).unwrap(), 0.0);
    let timed = StageClock::start(&ctx, &s1, Timing::Enabled).unwrap();
    b.copy_from_device_async_at(0, &a, &s1).unwrap();
    assert!(timed.stop(Step::Copy, &s1).unwrap() > 0.0);
}

#[test]
fn a_copy_log_counts_bytes_and_the_time_any_copy_ran() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let (s1, s2) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let n = 1 << 22;
    let src: Vec<u32> = (0..n as u32).collect();
    let mut a = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let mut b = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let clock = StageClock::<Step>::start(&ctx, &s1, Timing::Enabled).unwrap();
    // One copy on each stream (the second log appended to the first), then one more on the
    // first after both.
    let mut log = CopyLog::new(&ctx, Timing::Enabled);
    let mut other = CopyLog::new(&ctx, Timing::Enabled);
    let bytes = (n * 4) as u64;
    let start = log.start(&s1).unwrap();
    // SAFETY: `src` outlives the synchronizes below.
    unsafe { a.copy_from_host_async_at(0, &src, &s1) }.unwrap();
    log.end(start, &s1, bytes).unwrap();
    let start = other.start(&s2).unwrap();
    // SAFETY: as above.
    unsafe { b.copy_from_host_async_at(0, &src, &s2) }.unwrap();
    other.end(start, &s2, bytes).unwrap();
    s1.wait(&s2.record().unwrap()).unwrap();
    let start = log.start(&s1).unwrap();
    // SAFETY: as above.
    unsafe { a.copy_from_host_async_at(0, &src, &s1) }.unwrap();
    log.end(start, &s1, bytes).unwrap();
    log.append(other);
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
    let used = log.link_use(clock.origin()).unwrap();
    assert_eq!(used.bytes, 3 * bytes);
    // The link was busy for some time, never more than the span from the clock's start to
    // the last copy's end.
    assert!(used.busy_ms > 0.0, "{used:?}");
    let after = Event::timed(&ctx).unwrap();
    after.record(&s1).unwrap();
    after.synchronize().unwrap();
    let span = f64::from(clock.origin().unwrap().elapsed_ms(&after).unwrap());
    assert!(used.busy_ms <= span + 1e-3, "{used:?} beyond {span} ms");
    // Untimed, the bytes still count.
    let mut off = CopyLog::new(&ctx, Timing::Disabled);
    let start = off.start(&s1).unwrap();
    off.end(start, &s1, 7).unwrap();
    assert_eq!(off.link_use(clock.origin()).unwrap().busy_ms, 0.0);
    assert_eq!(off.bytes(), 7);
}

/// A cubin claimed for the device's architecture that the driver refuses; the PTX is fine.
const BROKEN_CUBIN: &[u8] = b"not a cubin";

#[test]
fn a_refused_cubin_falls_back_to_the_ptx_and_no_fitting_form_is_an_error() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let cc = ctx.info().compute_capability;
    let cubins = Box::leak(Box::new([zkpipe_cuda::Cubin {
        arch: cc,
        image: ImageBytes::Plain(BROKEN_CUBIN),
    }]));
    let image = KernelImage {
        cubins: &cubins[..],
        ..FILL
    };
    assert_eq!(
        image.candidates(cc, Prefer::Cubin),
        vec![LoadedFrom::Cubin(cc), LoadedFrom::Ptx((9, 0))]
    );
    let m = Module::load_with(&ctx, &image, Prefer::Cubin).unwrap();
    assert_eq!(m.loaded_from(), LoadedFrom::Ptx((9, 0)));
    // No PTX, and only the broken cubin: an error naming the architecture and the driver.
    let image = KernelImage { ptx: None, ..image };
    let err = Module::load_with(&ctx, &image, Prefer::Cubin).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::NoKernelImage(_)), "{text}");
    assert!(text.contains(&format!("sm_{}{}", cc.0, cc.1)), "{text}");
    assert!(
        text.contains("driver") && text.contains("refused"),
        "{text}"
    );
    // Nothing for this architecture at all.
    let elsewhere = Box::leak(Box::new([zkpipe_cuda::Cubin {
        arch: (cc.0 + 1, 0),
        image: ImageBytes::Plain(BROKEN_CUBIN),
    }]));
    let image = KernelImage {
        cubins: &elsewhere[..],
        ..image
    };
    let err = Module::load_with(&ctx, &image, Prefer::Cubin).unwrap_err();
    assert!(err.to_string().contains("carries cubins"), "{err}");
}

#[test]
fn modules_load_and_launches_check_arguments() {
    let Some(ctx) = gpu_context() else { return };
    let _mem = memory_lock();
    let module = Module::load_with(&ctx, &FILL, Prefer::Ptx).unwrap();
    assert_eq!(module.loaded_from(), LoadedFrom::Ptx((9, 0)));
    let err = module.function("no_such_kernel").unwrap_err();
    assert!(
        matches!(&err, Error::FunctionNotFound { function, .. } if function == "no_such_kernel"),
        "{err}"
    );

    let fill = module.function("fill_u32").unwrap();
    assert_eq!(fill.param_sizes(), Some(&[8usize, 4, 4][..]));
    let stream = Stream::new(&ctx).unwrap();
    let n = 5000usize;
    let out = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let cfg = LaunchConfig::for_elements(n, 256);
    // SAFETY: `out` has n elements and the kernel writes only indices below n.
    let err = unsafe { fill.launch(&stream, cfg, &[&out, &7u32]) }.unwrap_err();
    assert!(
        matches!(
            err,
            Error::ArgumentCount {
                expected: 3,
                given: 2,
                ..
            }
        ),
        "{err}"
    );
    // SAFETY: as above.
    let err = unsafe { fill.launch(&stream, cfg, &[&out, &7u64, &(n as u32)]) }.unwrap_err();
    assert!(
        matches!(
            err,
            Error::ArgumentSize {
                index: 1,
                expected: 4,
                given: 8,
                ..
            }
        ),
        "{err}"
    );
    // SAFETY: as above, with the right arguments.
    unsafe { fill.launch(&stream, cfg, &[&out, &7u32, &(n as u32)]) }.unwrap();
    stream.synchronize().unwrap();
    let v = out.to_vec().unwrap();
    assert!(v.iter().enumerate().all(|(i, &x)| x == 7 + i as u32));
}

#[test]
fn an_error_recorded_by_a_drop_does_not_fail_anothers_synchronize() {
    let Some(ctx) = gpu_context() else { return };
    let s = Stream::new(&ctx).unwrap();
    let e = Event::new(&ctx, zkpipe_cuda::Timing::Disabled).unwrap();
    ctx.record_err(Error::NoDevice { count: 0 });
    // Another value's cleanup failed: this stream's and this event's work did not.
    s.synchronize().unwrap();
    e.record(&s).unwrap();
    e.synchronize().unwrap();
    ctx.synchronize().unwrap();
    // The error is kept for whoever asks for it, once.
    assert!(matches!(ctx.check_err(), Err(Error::NoDevice { count: 0 })));
    assert!(ctx.check_err().is_ok());
}
