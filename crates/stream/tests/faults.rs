//! Issue 14's defects 2 and 3 under injected driver faults (zkpipe-cuda's `fault-injection`
//! feature; the armed fault is process-wide, so the tests take one lock):
//! - a copy whose completion event cannot be recorded keeps its host buffer until the copy is
//!   done, so a pool buffer lent again at once cannot change what lands on the device;
//! - a pool buffer whose last copy's event fails is counted out of the pool, so that failures
//!   never exhaust it (before, each leaked its bytes and the pool then waited 60 s).

use std::time::{Duration, Instant};

use zkpipe_cuda::fault::{self, Fault};
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::DeviceBuffer;
use zkpipe_pinned::PinnedPool;
use zkpipe_stream::{upload, Stream};

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_failed_record_after_an_upload_keeps_the_host_buffer_until_the_copy_lands() {
    let Some(ctx) = gpu_context() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let stream = Stream::new(&ctx).unwrap();
    let n = 64 << 20; // 256 MiB: a DMA of milliseconds, long enough to race
    let pool = PinnedPool::new(&ctx, 512 << 20);
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    for round in 0..3u32 {
        let mut host = pool.acquire::<u32>(n, Duration::from_secs(5)).unwrap();
        host.fill(round + 1);
        fault::arm(Fault::nth_call("cuEventRecord", 1, 1));
        let r = upload(&stream, host, &mut dev, 0);
        fault::disarm();
        assert!(r.is_err(), "round {round}: the record was made to fail");
        assert_eq!(
            pool.stats().bytes_in_use,
            0,
            "round {round}: the buffer is back"
        );
        // Lent again at once, and overwritten: the device must still get round + 1.
        let mut again = pool.acquire::<u32>(n, Duration::from_secs(5)).unwrap();
        again.fill(0xdead_beef);
        drop(again);
        let back = dev.to_vec().unwrap();
        assert!(
            back.iter().all(|&x| x == round + 1),
            "round {round}: the device got data written after the copy's buffer went back"
        );
    }
}

#[test]
fn event_failures_on_reuse_never_exhaust_the_pool() {
    let Some(ctx) = gpu_context() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let stream = Stream::new(&ctx).unwrap();
    let n = 1 << 20; // 4 MiB buffers in a 16 MiB pool
    let pool = PinnedPool::new(&ctx, 16 << 20);
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, n).unwrap();
    for round in 0..20 {
        let host = pool.acquire::<u32>(n, Duration::from_secs(5)).unwrap();
        // Back to the pool with the copy's event pending, so reuse waits on it.
        upload(&stream, host, &mut dev, 0).unwrap().release();
        fault::arm(Fault::nth_call("cuEventSynchronize", 1, 1));
        let t = Instant::now();
        let reuse = pool.acquire::<u32>(n, Duration::from_secs(5));
        fault::disarm();
        assert!(
            reuse.is_err(),
            "round {round}: the event wait was made to fail"
        );
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "round {round}: waited {:?}",
            t.elapsed()
        );
        let st = pool.stats();
        assert_eq!(
            (st.bytes_in_use, st.bytes_held),
            (0, 0),
            "round {round}: {st:?}"
        );
    }
    // The pool still lends.
    let ok = pool.acquire::<u32>(n, Duration::from_secs(1)).unwrap();
    assert_eq!(ok.len(), n);
}
