//! `GpuLock`: one lock per device that serialises kernel phases.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;

/// The per-device lock. Workers prepare their data (uploads on their own streams) without it,
/// and hold it only while their kernels run, so one worker's uploads overlap another's
/// kernels. [`GpuLock::for_device`] gives every caller in the process the same lock for a
/// device.
#[derive(Debug, Default)]
pub struct GpuLock {
    inner: Mutex<LockStats>,
}

/// How the lock has been used.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LockStats {
    /// Times the lock was taken.
    pub acquisitions: u64,
    /// Total time spent waiting for it, in milliseconds.
    pub waited_ms: f64,
}

/// Holding this means holding the device's kernel phase; dropping it lets the next worker in.
#[derive(Debug)]
pub struct GpuGuard<'a> {
    _guard: MutexGuard<'a, LockStats>,
    since: Instant,
}

impl GpuGuard<'_> {
    /// How long the lock has been held.
    pub fn held_for(&self) -> Duration {
        self.since.elapsed()
    }
}

static LOCKS: Lazy<Mutex<HashMap<usize, Arc<GpuLock>>>> = Lazy::new(Default::default);

impl GpuLock {
    /// A new, unshared lock.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide lock of device `ordinal`.
    pub fn for_device(ordinal: usize) -> Arc<GpuLock> {
        let mut map = LOCKS.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(map.entry(ordinal).or_default())
    }

    /// Waits for the lock.
    pub fn lock(&self) -> GpuGuard<'_> {
        let start = Instant::now();
        // A worker that panicked while holding the lock left no state behind to repair.
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.acquisitions += 1;
        guard.waited_ms += start.elapsed().as_secs_f64() * 1e3;
        GpuGuard {
            _guard: guard,
            since: Instant::now(),
        }
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self) -> Option<GpuGuard<'_>> {
        let mut guard = match self.inner.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        guard.acquisitions += 1;
        Some(GpuGuard {
            _guard: guard,
            since: Instant::now(),
        })
    }

    /// Statistics, read while taking the lock briefly.
    pub fn stats(&self) -> LockStats {
        *self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}
