//! `PinnedPool`: a bounded amount of pinned memory, allocated once and reused by size class.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytemuck::Pod;
use zkpipe_cuda::{Context, Event};

use crate::buffer::RawPinned;
use crate::{Error, PinnedMemory, Result};

/// What a pool has done, for counters and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// The bound on bytes held (in use plus idle).
    pub limit: usize,
    /// Bytes handed out and not yet returned.
    pub bytes_in_use: usize,
    /// Bytes allocated from the driver and still held (in use plus idle).
    pub bytes_held: usize,
    /// The most bytes ever in use at once.
    pub high_water: usize,
    /// Allocations made from the driver.
    pub allocations: u64,
    /// Requests served by reusing an idle buffer.
    pub reuses: u64,
}

/// An idle buffer, with the event of the last copy that used it (waited for before reuse).
#[derive(Debug)]
struct Idle {
    raw: RawPinned,
    pending: Option<Event>,
}

#[derive(Debug, Default)]
struct State {
    idle: BTreeMap<usize, Vec<Idle>>,
    stats: PoolStats,
}

#[derive(Debug)]
struct Shared {
    ctx: Arc<Context>,
    state: Mutex<State>,
    returned: Condvar,
}

/// A bounded pool of pinned host memory.
///
/// Requests are rounded up to a size class (a power of two below 64 MiB, a multiple of 64 MiB
/// above) and served from an idle buffer of that class when there is one. When the bound
/// would be passed, idle buffers of other classes are freed first; if that is not enough,
/// [`PinnedPool::acquire`] waits for buffers to come back and [`PinnedPool::try_acquire`]
/// returns `None`. Cloning the pool shares it.
#[derive(Debug, Clone)]
pub struct PinnedPool {
    shared: Arc<Shared>,
}

const LARGE_CLASS: usize = 64 << 20;

/// The size class of a request of `bytes`.
pub(crate) fn size_class(bytes: usize) -> usize {
    let bytes = bytes.max(4096);
    if bytes < LARGE_CLASS {
        bytes.next_power_of_two()
    } else {
        bytes.div_ceil(LARGE_CLASS) * LARGE_CLASS
    }
}

impl PinnedPool {
    /// A pool that holds at most `limit` bytes of pinned memory.
    pub fn new(ctx: &Arc<Context>, limit: usize) -> Self {
        let state = State {
            stats: PoolStats {
                limit,
                ..PoolStats::default()
            },
            ..State::default()
        };
        Self {
            shared: Arc::new(Shared {
                ctx: Arc::clone(ctx),
                state: Mutex::new(state),
                returned: Condvar::new(),
            }),
        }
    }

    /// Current statistics.
    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counters (no code here panics
        // between updates), so a poisoned lock is still usable.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `len` elements, waiting up to `timeout` for memory to come back.
    pub fn acquire<T: Pod>(&self, len: usize, timeout: Duration) -> Result<PooledBuffer<T>> {
        let bytes = zkpipe_cuda::byte_len::<T>("pinned pool request", len)?;
        let class = self.check(bytes)?;
        let start = Instant::now();
        let mut state = self.lock();
        loop {
            if let Some(raw) = self.take(&mut state, class)? {
                return Ok(self.hand_out(raw, len));
            }
            let waited = start.elapsed();
            if waited >= timeout {
                let s = state.stats;
                return Err(Error::Timeout {
                    requested: class,
                    waited_ms: waited.as_millis(),
                    in_use: s.bytes_in_use,
                    limit: s.limit,
                });
            }
            state = self
                .shared
                .returned
                .wait_timeout(state, timeout - waited)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// A buffer of `len` elements if one can be had now, else `None`.
    pub fn try_acquire<T: Pod>(&self, len: usize) -> Result<Option<PooledBuffer<T>>> {
        let bytes = zkpipe_cuda::byte_len::<T>("pinned pool request", len)?;
        let class = self.check(bytes)?;
        let mut state = self.lock();
        Ok(self
            .take(&mut state, class)?
            .map(|raw| self.hand_out(raw, len)))
    }

    fn check(&self, bytes: usize) -> Result<usize> {
        let class = size_class(bytes);
        let limit = self.lock().stats.limit;
        if class > limit {
            return Err(Error::PoolTooSmall {
                requested: bytes,
                limit,
            });
        }
        Ok(class)
    }

    /// An idle buffer of `class`, or a new one if the bound allows (after freeing idle buffers
    /// of other classes), or `None`.
    fn take(&self, state: &mut State, class: usize) -> Result<Option<RawPinned>> {
        if let Some(idle) = state.idle.get_mut(&class).and_then(Vec::pop) {
            if let Some(ev) = &idle.pending {
                if let Err(e) = ev.settle() {
                    // The buffer is freed (as it goes out of scope): count it out of the pool.
                    state.stats.bytes_held -= idle.raw.bytes;
                    return Err(e.into());
                }
            }
            state.stats.reuses += 1;
            self.count_out(state, class);
            return Ok(Some(idle.raw));
        }
        while state.stats.bytes_held + class > state.stats.limit {
            let Some((&other, _)) = state.idle.iter().find(|(_, v)| !v.is_empty()) else {
                return Ok(None);
            };
            if let Some(idle) = state.idle.get_mut(&other).and_then(Vec::pop) {
                // Freed either way: counted out of the pool before an error returns.
                state.stats.bytes_held -= idle.raw.bytes;
                if let Some(ev) = &idle.pending {
                    ev.settle()?;
                }
                drop(idle);
            }
        }
        let raw = RawPinned::new(&self.shared.ctx, class)?;
        state.stats.allocations += 1;
        state.stats.bytes_held += class;
        self.count_out(state, class);
        tracing::debug!(
            bytes = class,
            held = state.stats.bytes_held,
            "pinned pool allocation"
        );
        Ok(Some(raw))
    }

    fn count_out(&self, state: &mut State, class: usize) {
        state.stats.bytes_in_use += class;
        state.stats.high_water = state.stats.high_water.max(state.stats.bytes_in_use);
    }

    fn hand_out<T: Pod>(&self, raw: RawPinned, len: usize) -> PooledBuffer<T> {
        PooledBuffer {
            raw: Some(raw),
            len,
            pending: None,
            pool: self.clone(),
            _elem: PhantomData,
        }
    }

    fn give_back(&self, raw: RawPinned, pending: Option<Event>) {
        let mut state = self.lock();
        state.stats.bytes_in_use -= raw.bytes;
        state
            .idle
            .entry(raw.bytes)
            .or_default()
            .push(Idle { raw, pending });
        drop(state);
        self.shared.returned.notify_all();
    }

    /// Frees every idle buffer (waiting for their last copies).
    pub fn shrink(&self) -> Result<()> {
        let mut state = self.lock();
        let idle = std::mem::take(&mut state.idle);
        let mut first = Ok(());
        for buf in idle.into_values().flatten() {
            // Every buffer is freed and counted out, the first error reported after.
            state.stats.bytes_held -= buf.raw.bytes;
            if let Some(ev) = &buf.pending {
                if let Err(e) = ev.settle() {
                    first = first.and(Err(e.into()));
                }
            }
        }
        first
    }
}

/// A buffer lent by a [`PinnedPool`]; it goes back to the pool when dropped.
#[derive(Debug)]
pub struct PooledBuffer<T> {
    raw: Option<RawPinned>,
    len: usize,
    pending: Option<Event>,
    pool: PinnedPool,
    _elem: PhantomData<T>,
}

impl<T: Pod> PooledBuffer<T> {
    /// Marks the buffer as still used by the copy that `event` follows: when the buffer goes
    /// back to the pool, it is not lent again before the event completes. Dropping the buffer
    /// then returns it without blocking.
    pub fn release_after(mut self, event: Event) {
        self.pending = Some(event);
    }

    /// Size in bytes of the elements (the size class may be larger).
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Bytes of the underlying size class.
    pub fn capacity_bytes(&self) -> usize {
        self.raw.as_ref().map_or(0, |r| r.bytes)
    }
}

impl<T: Pod> Deref for PooledBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let Some(raw) = &self.raw else { return &[] };
        // SAFETY: the class holds at least len * size_of::<T>() bytes, zero-initialised when
        // allocated and only ever written as Pod values since; page-aligned.
        unsafe { std::slice::from_raw_parts(raw.ptr.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Pod> DerefMut for PooledBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let Some(raw) = &self.raw else { return &mut [] };
        // SAFETY: as in `deref`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(raw.ptr.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T> Drop for PooledBuffer<T> {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.pool.give_back(raw, self.pending.take());
        }
    }
}

// SAFETY: the memory is pinned and owned by the buffer until it drops; moving the buffer does
// not move the memory.
unsafe impl<T: Pod + Send> PinnedMemory<T> for PooledBuffer<T> {}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_round_up() {
        assert_eq!(size_class(0), 4096);
        assert_eq!(size_class(4097), 8192);
        assert_eq!(size_class(3 << 20), 4 << 20);
        assert_eq!(size_class(64 << 20), 64 << 20);
        assert_eq!(size_class((64 << 20) + 1), 128 << 20);
        assert_eq!(size_class((1 << 30) + (1 << 20)), (1 << 30) + (64 << 20));
    }
}
