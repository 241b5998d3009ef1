//! `VramBudget`: admission of device allocations by bytes.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use zkpipe_cuda::Context;

/// Why the budget refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// More than the budget can ever give.
    #[error("VRAM budget: {needed} bytes needed, but the budget is {capacity} bytes in all")]
    NeverFits { needed: usize, capacity: usize },
    /// Not enough came free in time.
    #[error("VRAM budget: {needed} bytes needed, {available} of {capacity} free after waiting {waited_ms} ms")]
    Timeout {
        needed: usize,
        available: usize,
        capacity: usize,
        waited_ms: u128,
    },
}

/// Counters of a budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// Bytes the budget admits in all.
    pub capacity: usize,
    /// Bytes granted and not yet released.
    pub in_use: usize,
    /// The most bytes granted at once.
    pub high_water: usize,
    /// Grants made.
    pub grants: u64,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<BudgetStats>,
    freed: Condvar,
}

/// Device memory admission by bytes.
///
/// A worker asks for the bytes it is about to allocate and gets a [`VramGrant`], released when
/// dropped (or partly, with [`VramGrant::release`], as big buffers are freed). Requests larger
/// than the whole budget fail at once with [`BudgetError::NeverFits`]; others wait. Workers
/// that allocate only under grants can together never exceed the budget. Cloning shares it.
#[derive(Debug, Clone)]
pub struct VramBudget {
    inner: Arc<Inner>,
}

impl VramBudget {
    /// A budget of `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        let stats = BudgetStats {
            capacity,
            ..BudgetStats::default()
        };
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(stats),
                freed: Condvar::new(),
            }),
        }
    }

    /// A budget from the device's free memory (after trimming the stream-ordered pool, so the
    /// reading is true), capped at `cap` bytes when given (to behave as a smaller card), minus
    /// `margin` bytes in both cases: the margin is room for what the driver allocates beside
    /// the grants (kernel images, local memory, allocation granularity), so that with a cap
    /// everything allocated after this reading stays under the cap.
    pub fn from_device(
        ctx: &Arc<Context>,
        margin: usize,
        cap: Option<usize>,
    ) -> zkpipe_cuda::Result<Self> {
        Self::from_device_within(ctx, margin, cap.map(|c| (c, margin)))
    }

    /// A budget of the device's free memory less `margin`, and, when `cap` = (bytes, cap
    /// margin) is given, of no more than bytes less the cap margin: the device's margin keeps
    /// the grants and what the driver allocates beside them within the real device, the cap's
    /// keeps them within the card the cap stands for.
    pub fn from_device_within(
        ctx: &Arc<Context>,
        margin: usize,
        cap: Option<(usize, usize)>,
    ) -> zkpipe_cuda::Result<Self> {
        // A driver without stream-ordered pools has nothing to trim.
        let _ = ctx.trim_async_pool(0);
        let free = ctx.mem_info()?.free;
        let on_device = free.saturating_sub(margin);
        let capacity = cap.map_or(on_device, |(c, m)| c.saturating_sub(m).min(on_device));
        tracing::info!(
            device = ctx.ordinal(),
            capacity,
            margin,
            ?cap,
            "VRAM budget"
        );
        Ok(Self::with_capacity(capacity))
    }

    fn lock(&self) -> MutexGuard<'_, BudgetStats> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Current counters.
    pub fn stats(&self) -> BudgetStats {
        *self.lock()
    }

    /// Bytes the budget admits in all.
    pub fn capacity(&self) -> usize {
        self.lock().capacity
    }

    /// Waits until `bytes` are free, up to `timeout` (`None`: for as long as it takes).
    pub fn acquire(
        &self,
        bytes: usize,
        timeout: Option<Duration>,
    ) -> Result<VramGrant, BudgetError> {
        let start = Instant::now();
        let mut s = self.lock();
        if bytes > s.capacity {
            return Err(BudgetError::NeverFits {
                needed: bytes,
                capacity: s.capacity,
            });
        }
        while s.capacity - s.in_use < bytes {
            s = match timeout {
                None => self.inner.freed.wait(s).unwrap_or_else(|p| p.into_inner()),
                Some(t) => {
                    let waited = start.elapsed();
                    if waited >= t {
                        return Err(BudgetError::Timeout {
                            needed: bytes,
                            available: s.capacity - s.in_use,
                            capacity: s.capacity,
                            waited_ms: waited.as_millis(),
                        });
                    }
                    self.inner
                        .freed
                        .wait_timeout(s, t - waited)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0)
                }
            };
        }
        Ok(self.grant(&mut s, bytes))
    }

    /// A grant of `bytes` if they are free now.
    pub fn try_acquire(&self, bytes: usize) -> Result<Option<VramGrant>, BudgetError> {
        let mut s = self.lock();
        if bytes > s.capacity {
            return Err(BudgetError::NeverFits {
                needed: bytes,
                capacity: s.capacity,
            });
        }
        if s.capacity - s.in_use < bytes {
            return Ok(None);
        }
        Ok(Some(self.grant(&mut s, bytes)))
    }

    fn grant(&self, s: &mut BudgetStats, bytes: usize) -> VramGrant {
        s.in_use += bytes;
        s.high_water = s.high_water.max(s.in_use);
        s.grants += 1;
        VramGrant {
            bytes,
            budget: self.clone(),
        }
    }

    fn give_back(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let mut s = self.lock();
        s.in_use -= bytes.min(s.in_use);
        drop(s);
        self.inner.freed.notify_all();
    }
}

/// Bytes admitted by a [`VramBudget`]; released on drop.
#[derive(Debug)]
#[must_use = "dropping a grant releases its bytes at once"]
pub struct VramGrant {
    bytes: usize,
    budget: VramBudget,
}

impl VramGrant {
    /// Bytes still held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Moves `bytes` of this grant (at most all of it) into a grant of their own.
    pub fn split_off(&mut self, bytes: usize) -> VramGrant {
        let b = bytes.min(self.bytes);
        self.bytes -= b;
        VramGrant {
            bytes: b,
            budget: self.budget.clone(),
        }
    }

    /// Releases `bytes` of the grant early (after freeing a buffer), keeping the rest.
    pub fn release(&mut self, bytes: usize) {
        let b = bytes.min(self.bytes);
        self.bytes -= b;
        self.budget.give_back(b);
    }
}

impl Drop for VramGrant {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}
