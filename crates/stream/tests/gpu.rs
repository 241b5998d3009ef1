//! Streams, events, pinned transfers, overlap of a copy with a kernel, and the budget read
//! from a real device.

use std::sync::Arc;
use std::time::Duration;

use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::DeviceBuffer;
use zkpipe_cuda::{StageClock, Timing};
use zkpipe_pinned::{PinnedBuffer, PinnedPool, RegisteredVec};
use zkpipe_stream::kernels::Spin;
use zkpipe_stream::{download, upload, upload_columns, Stream, VramBudget};

#[test]
fn pinned_upload_and_download_round_trip() {
    let Some(ctx) = gpu_context() else { return };
    let stream = Stream::new(&ctx).unwrap();
    let n = 4 << 20;
    let mut src = PinnedBuffer::<u32>::new(&ctx, n).unwrap();
    src.iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = (i as u32).wrapping_mul(2_654_435_761));
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    let up = upload(&stream, src, &mut dev, 0).unwrap();
    assert_eq!(up.bytes(), n * 4);
    let src = up.wait().unwrap();
    let dst = PinnedBuffer::<u32>::new(&ctx, n).unwrap();
    let back = download(&stream, &dev, 0, dst).unwrap().wait().unwrap();
    assert_eq!(&back[..], &src[..]);

    // A download of a range past the end is an error naming the numbers.
    let small = PinnedBuffer::<u32>::new(&ctx, 16).unwrap();
    let err = download(&stream, &dev, n - 8, small).unwrap_err();
    assert!(err.to_string().contains(&format!("{}", n + 8)), "{err}");
}

#[test]
fn upload_in_column_blocks_lands_every_block() {
    let Some(ctx) = gpu_context() else { return };
    let stream = Stream::new(&ctx).unwrap();
    let (rows, pitch, blocks) = (128, 4096, 8);
    let n = rows * pitch;
    let mut src = PinnedBuffer::<u32>::new(&ctx, n).unwrap();
    src.iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = (i as u32).wrapping_mul(2_246_822_519) ^ 7);
    let mut dev = DeviceBuffer::<u32>::from_host(&ctx, &vec![0; n]).unwrap();
    let up = upload_columns(&stream, src, &mut dev, pitch, blocks).unwrap();
    assert_eq!(up.bytes(), n * 4);
    // Once block 0 has landed, its columns are there in every row.
    up.block_event(0).unwrap().synchronize().unwrap();
    let part = dev.to_vec().unwrap();
    let width = pitch / blocks;
    for r in [0, 1, rows / 2, rows - 1] {
        let row = r * pitch;
        assert_eq!(
            part[row..row + width],
            (row..row + width)
                .map(|i| (i as u32).wrapping_mul(2_246_822_519) ^ 7)
                .collect::<Vec<_>>()[..],
            "block 0, row {r}"
        );
    }
    assert!(up.block_event(blocks - 1).is_some());
    assert!(up.block_event(blocks).is_none());
    let src = up.wait().unwrap();
    assert_eq!(dev.to_vec().unwrap(), &src[..], "all blocks");

    // Blocks that do not divide the rows, rows that do not divide the buffer: errors.
    let err = upload_columns(&stream, src, &mut dev, pitch, 3).unwrap_err();
    assert!(err.to_string().contains("3 column blocks"), "{err}");
    let src = PinnedBuffer::<u32>::new(&ctx, n).unwrap();
    let err = upload_columns(&stream, src, &mut dev, 3000, 8).unwrap_err();
    assert!(err.to_string().contains("rows of 3000"), "{err}");
}

#[test]
fn pool_and_registered_memory_upload() {
    let Some(ctx) = gpu_context() else { return };
    let stream = Stream::new(&ctx).unwrap();
    let pool = PinnedPool::new(&ctx, 64 << 20);
    let mut buf = pool
        .acquire::<u64>(1 << 20, Duration::from_secs(1))
        .unwrap();
    buf.iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = i as u64 * 3);
    let mut dev = DeviceBuffer::<u64>::alloc(&ctx, 2 << 20).unwrap();
    upload(&stream, buf, &mut dev, 0).unwrap().release();
    let reg = RegisteredVec::new(&ctx, (0..1u64 << 20).map(|i| i * 5).collect()).unwrap();
    let reg = upload(&stream, reg, &mut dev, 1 << 20)
        .unwrap()
        .wait()
        .unwrap();
    let v = dev.to_vec().unwrap();
    assert!(v[..1 << 20]
        .iter()
        .enumerate()
        .all(|(i, &x)| x == i as u64 * 3));
    assert_eq!(&v[1 << 20..], &reg[..]);
    assert_eq!(
        pool.stats().bytes_in_use,
        0,
        "the released buffer went back to the pool"
    );
}

#[test]
fn a_stream_waits_for_another_streams_event() {
    let Some(ctx) = gpu_context() else { return };
    let spin = Spin::load(&ctx).unwrap();
    let busy = Stream::new(&ctx).unwrap();
    let other = Stream::new(&ctx).unwrap();
    spin.launch(&busy, 1, 20_000_000).unwrap(); // about 10 ms
    let done = busy.record().unwrap();
    other.wait(&done).unwrap();
    let after = other.record().unwrap();
    after.synchronize().unwrap();
    assert!(
        done.is_complete().unwrap(),
        "the waiting stream finished only after the event"
    );
}

#[test]
fn copy_overlaps_kernel_on_another_stream() {
    let Some(ctx) = gpu_context() else { return };
    let spin = Spin::load(&ctx).unwrap();
    let copy_stream = Stream::new(&ctx).unwrap();
    let kernel_stream = Stream::new(&ctx).unwrap();
    let n = 256 << 20;
    let src = PinnedBuffer::<u8>::new(&ctx, n).unwrap();
    let mut dev = DeviceBuffer::<u8>::alloc(&ctx, n).unwrap();
    let sms = ctx.info().sm_count;
    // Warm up.
    let mut src = upload(&copy_stream, src, &mut dev, 0)
        .unwrap()
        .wait()
        .unwrap();
    spin.launch(&kernel_stream, sms, 1000).unwrap();
    kernel_stream.synchronize().unwrap();

    // Other tests share the GPU and its PCIe link and can only hide an overlap, never make
    // one: the copy and the kernel must overlap in one of three tries.
    let mut tries = Vec::new();
    for _ in 0..3 {
        let t = StageClock::start(&ctx, &copy_stream, Timing::Enabled).unwrap();
        src = upload(&copy_stream, src, &mut dev, 0)
            .unwrap()
            .wait()
            .unwrap();
        let copy_ms = t.stop("copy", &copy_stream).unwrap();
        let cycles = (copy_ms * 1.5e6) as u64; // about as long as the copy at 1.5 GHz
        let t = StageClock::start(&ctx, &kernel_stream, Timing::Enabled).unwrap();
        spin.launch(&kernel_stream, sms, cycles).unwrap();
        let kernel_ms = t.stop("kernel", &kernel_stream).unwrap();

        let t = StageClock::start(&ctx, &kernel_stream, Timing::Enabled).unwrap();
        copy_stream.wait(&kernel_stream.record().unwrap()).unwrap();
        spin.launch(&kernel_stream, sms, cycles).unwrap();
        let inflight = upload(&copy_stream, src, &mut dev, 0).unwrap();
        kernel_stream.wait(inflight.event().unwrap()).unwrap();
        let both_ms = t.stop("copy beside kernel", &kernel_stream).unwrap();
        src = inflight.wait().unwrap();
        println!("copy {copy_ms:.2} ms, kernel {kernel_ms:.2} ms, together {both_ms:.2} ms");
        if both_ms < 0.8 * (copy_ms + kernel_ms) {
            return;
        }
        tries.push((copy_ms, kernel_ms, both_ms));
    }
    panic!("no overlap in three tries (copy, kernel, together ms): {tries:?}");
}

#[test]
fn budget_from_device_respects_margin_and_cap() {
    let Some(ctx) = gpu_context() else { return };
    let _ = ctx.trim_async_pool(0);
    let free = ctx.mem_info().unwrap().free;
    let b = VramBudget::from_device(&ctx, 1 << 30, None).unwrap();
    // Other processes may allocate or free between the two readings: allow 1 GiB of drift.
    assert!(
        b.capacity().abs_diff(free - (1 << 30)) <= 1 << 30,
        "{} vs {}",
        b.capacity(),
        free
    );
    let capped = VramBudget::from_device(&ctx, 1 << 30, Some(16 << 30)).unwrap();
    assert_eq!(
        capped.capacity(),
        (16usize << 30) - (1 << 30),
        "a 141 GB card capped to 16 GiB behaves as 16 GiB, the margin off it"
    );
    // Two margins: the cap's (here small) and the device's (here large); the lesser bound wins.
    let both = VramBudget::from_device_within(&ctx, 1 << 30, Some((64 << 20, 0))).unwrap();
    assert_eq!(
        both.capacity(),
        64 << 20,
        "a small cap less its own margin of 0"
    );
    let device_bound =
        VramBudget::from_device_within(&ctx, free - (32 << 20), Some((64 << 20, 0))).unwrap();
    assert!(
        device_bound.capacity() < 64 << 20,
        "the device's margin leaves less than the cap: {}",
        device_bound.capacity()
    );
    let _ = Arc::new(capped);
}
