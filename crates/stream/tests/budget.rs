//! The VRAM budget and the GPU lock: pure bookkeeping, tested without a GPU.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zkpipe_stream::{BudgetError, GpuLock, VramBudget};

#[test]
fn budget_refuses_what_it_can_never_give() {
    let b = VramBudget::with_capacity(1000);
    let err = b.acquire(1001, None).unwrap_err();
    assert_eq!(
        err,
        BudgetError::NeverFits {
            needed: 1001,
            capacity: 1000
        }
    );
    assert!(err.to_string().contains("1001") && err.to_string().contains("1000"));
    assert_eq!(
        b.try_acquire(5000).unwrap_err(),
        BudgetError::NeverFits {
            needed: 5000,
            capacity: 1000
        }
    );
}

#[test]
fn budget_grants_release_on_drop_and_partially() {
    let b = VramBudget::with_capacity(1000);
    let mut g = b.acquire(600, None).unwrap();
    assert!(b.try_acquire(500).unwrap().is_none());
    let err = b.acquire(500, Some(Duration::from_millis(50))).unwrap_err();
    assert!(
        matches!(
            err,
            BudgetError::Timeout {
                needed: 500,
                available: 400,
                capacity: 1000,
                ..
            }
        ),
        "{err}"
    );
    g.release(200);
    assert_eq!(g.bytes(), 400);
    let g2 = b
        .try_acquire(500)
        .unwrap()
        .expect("600 free after the partial release");
    let s = b.stats();
    assert_eq!((s.in_use, s.high_water, s.grants), (900, 900, 2));
    drop(g);
    drop(g2);
    assert_eq!(b.stats().in_use, 0);
}

#[test]
fn a_grant_splits_and_each_part_releases_its_own_bytes() {
    let b = VramBudget::with_capacity(1000);
    let mut g = b.acquire(700, None).unwrap();
    let part = g.split_off(300);
    assert_eq!((g.bytes(), part.bytes()), (400, 300));
    assert_eq!(b.stats().in_use, 700, "splitting releases nothing");
    drop(part);
    assert_eq!(b.stats().in_use, 400);
    let rest = g.split_off(5000);
    assert_eq!(
        (g.bytes(), rest.bytes()),
        (0, 400),
        "at most the whole grant moves"
    );
    drop(g);
    assert_eq!(b.stats().in_use, 400);
    drop(rest);
    assert_eq!(b.stats().in_use, 0);
}

#[test]
fn workers_never_exceed_the_budget_together() {
    let b = VramBudget::with_capacity(10_000);
    let live = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|w| {
            let (b, live, peak) = (b.clone(), Arc::clone(&live), Arc::clone(&peak));
            std::thread::spawn(move || {
                for i in 0..50 {
                    let bytes = 1000 + ((w * 37 + i * 101) % 5000);
                    let g = b.acquire(bytes, Some(Duration::from_secs(10))).unwrap();
                    let now = live.fetch_add(bytes, Ordering::SeqCst) + bytes;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                    live.fetch_sub(bytes, Ordering::SeqCst);
                    drop(g);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = b.stats();
    assert!(
        peak.load(Ordering::SeqCst) <= 10_000,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
    assert!(s.high_water <= 10_000);
    assert_eq!(s.in_use, 0);
    assert_eq!(s.grants, 400);
}

#[test]
fn gpu_lock_is_shared_per_device_and_exclusive() {
    let a = GpuLock::for_device(7);
    let b = GpuLock::for_device(7);
    assert!(Arc::ptr_eq(&a, &b));
    assert!(!Arc::ptr_eq(&a, &GpuLock::for_device(8)));
    let guard = a.lock();
    assert!(b.try_lock().is_none());
    let inside = Arc::new(AtomicUsize::new(0));
    let t = {
        let (b, inside) = (Arc::clone(&b), Arc::clone(&inside));
        std::thread::spawn(move || {
            let _g = b.lock();
            inside.store(1, Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        inside.load(Ordering::SeqCst),
        0,
        "the second worker waits for the lock"
    );
    drop(guard);
    t.join().unwrap();
    assert_eq!(inside.load(Ordering::SeqCst), 1);
    assert!(a.stats().acquisitions >= 2);
}
