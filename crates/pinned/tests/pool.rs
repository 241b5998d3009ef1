//! Pinned buffers, the bounded pool and registration, on a GPU.

use std::time::{Duration, Instant};

use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{DeviceBuffer, Stream};
use zkpipe_pinned::{Error, PinnableVec, PinnedBuffer, PinnedPool, RegisteredVec};

#[test]
fn pinned_buffer_is_zeroed_and_writable() {
    let Some(ctx) = gpu_context() else { return };
    let mut b = PinnedBuffer::<u64>::new(&ctx, 1000).unwrap();
    assert!(b.iter().all(|&x| x == 0));
    b[999] = 42;
    assert_eq!(b.bytes(), 8000);
    let d = DeviceBuffer::from_host(&ctx, &b).unwrap();
    assert_eq!(d.to_vec().unwrap()[999], 42);
}

#[test]
fn pool_reuses_by_size_class_and_counts() {
    let Some(ctx) = gpu_context() else { return };
    let pool = PinnedPool::new(&ctx, 64 << 20);
    let a = pool
        .acquire::<u32>(1 << 20, Duration::from_secs(1))
        .unwrap(); // 4 MiB class
    assert_eq!(a.capacity_bytes(), 4 << 20);
    let s = pool.stats();
    assert_eq!((s.allocations, s.reuses, s.bytes_in_use), (1, 0, 4 << 20));
    drop(a);
    let b = pool.acquire::<u8>(3 << 20, Duration::from_secs(1)).unwrap(); // same class
    let s = pool.stats();
    assert_eq!(
        (s.allocations, s.reuses, s.bytes_in_use, s.high_water),
        (1, 1, 4 << 20, 4 << 20)
    );
    assert_eq!(b.len(), 3 << 20);
}

#[test]
fn pool_bound_is_enforced() {
    let Some(ctx) = gpu_context() else { return };
    let pool = PinnedPool::new(&ctx, 16 << 20);
    let err = pool
        .acquire::<u8>(32 << 20, Duration::from_millis(10))
        .unwrap_err();
    assert!(
        matches!(err, Error::PoolTooSmall { requested, limit } if requested == 32 << 20 && limit == 16 << 20),
        "{err}"
    );

    let held = pool.acquire::<u8>(8 << 20, Duration::from_secs(1)).unwrap();
    let held2 = pool.acquire::<u8>(8 << 20, Duration::from_secs(1)).unwrap();
    assert!(pool.try_acquire::<u8>(4 << 20).unwrap().is_none());
    let start = Instant::now();
    let err = pool
        .acquire::<u8>(4 << 20, Duration::from_millis(200))
        .unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert!(
        matches!(err, Error::Timeout { in_use, limit, .. } if in_use == 16 << 20 && limit == 16 << 20),
        "{err}"
    );
    assert!(pool.stats().bytes_held <= 16 << 20);

    // A buffer returned from another thread wakes a waiting acquire; the idle 8 MiB buffer
    // is freed to make room for a 4 MiB one.
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(held);
    });
    let small = pool.acquire::<u8>(4 << 20, Duration::from_secs(5)).unwrap();
    t.join().unwrap();
    assert_eq!(small.len(), 4 << 20);
    let s = pool.stats();
    assert!(s.bytes_held <= 16 << 20, "{s:?}");
    assert_eq!(s.high_water, 16 << 20);
    drop(held2);
}

#[test]
fn pool_waits_for_pending_copy_before_reuse() {
    let Some(ctx) = gpu_context() else { return };
    let pool = PinnedPool::new(&ctx, 1 << 30);
    let stream = Stream::new(&ctx).unwrap();
    let n = 64 << 20;
    let mut src = pool.acquire::<u8>(n, Duration::from_secs(1)).unwrap();
    src.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
    let mut dev = DeviceBuffer::<u8>::alloc(&ctx, n).unwrap();
    // SAFETY: the buffer goes back to the pool with the copy's event, and the pool waits for
    // the event before lending it again, so the memory is unchanged until the copy is done.
    unsafe { dev.copy_from_host_async_at(0, &src, &stream) }.unwrap();
    let ev = stream.record().unwrap();
    src.release_after(ev);
    let mut again = pool.acquire::<u8>(n, Duration::from_secs(5)).unwrap();
    assert_eq!(pool.stats().reuses, 1);
    again.iter_mut().for_each(|x| *x = 0xff);
    let back = dev.to_vec().unwrap();
    assert!(
        back.iter().enumerate().all(|(i, &x)| x == i as u8),
        "the copy saw the reused buffer's new contents"
    );
}

#[test]
fn registered_vec_uploads_and_returns_the_vector() {
    let Some(ctx) = gpu_context() else { return };
    let v: Vec<u32> = (0..1_000_000).collect();
    let reg = RegisteredVec::new(&ctx, v).unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, reg.len()).unwrap();
    // SAFETY: `reg` lives until after the synchronize.
    unsafe { dev.copy_from_host_async_at(0, &reg, &stream) }.unwrap();
    stream.synchronize().unwrap();
    let v = reg.into_inner().unwrap();
    assert_eq!(dev.to_vec().unwrap(), v);
    let empty = RegisteredVec::<u32>::new(&ctx, Vec::new()).unwrap();
    assert!(empty.into_inner().unwrap().is_empty());
}

#[test]
fn pinnable_vec_pins_once_in_place_and_unpins_on_drop() {
    let Some(ctx) = gpu_context() else { return };
    let v = PinnableVec::new((0..1_000_000u32).collect::<Vec<_>>());
    let before = v.as_ptr();
    assert!(!v.is_pinned());
    assert!(v.pin(&ctx).unwrap(), "the first pin registers");
    // A second registration of the same range would be a driver error; pin must skip it.
    assert!(!v.pin(&ctx).unwrap());
    assert!(v.is_pinned());
    assert_eq!(v.as_ptr(), before, "pinned in place, not copied");
    let copy = v.clone();
    assert!(!copy.is_pinned(), "a clone is a new, unpinned vector");
    assert_eq!(copy, v);
    let stream = Stream::new(&ctx).unwrap();
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, v.len()).unwrap();
    // SAFETY: `v` lives until after the synchronize.
    unsafe { dev.copy_from_host_async_at(0, &v, &stream) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(dev.to_vec().unwrap(), *v);
    drop(v);
    ctx.check_err().expect("unregistering on drop failed");
    let empty = PinnableVec::<u32>::new(Vec::new());
    assert!(!empty.pin(&ctx).unwrap(), "nothing to register");
}
