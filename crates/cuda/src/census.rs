//! Counts of what this process holds from the driver through zkpipe-cuda: device and pinned
//! allocations, registrations, modules, streams and events. A leak check compares two
//! [`live`] snapshots (device-wide free memory also moves with other processes' work).

use std::sync::atomic::{AtomicI64, Ordering};

/// Live driver resources of this process, made through zkpipe-cuda.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Live {
    /// Device allocations (`cuMemAlloc`, `cuMemAllocAsync`) not yet freed.
    pub device_allocations: i64,
    /// Page-locked host allocations (`cuMemHostAlloc`) not yet freed.
    pub host_allocations: i64,
    /// Host ranges registered (`cuMemHostRegister`) and not yet unregistered.
    pub registrations: i64,
    /// Modules loaded and not yet unloaded.
    pub modules: i64,
    /// Streams created and not yet destroyed.
    pub streams: i64,
    /// Events created and not yet destroyed.
    pub events: i64,
}

pub(crate) static DEVICE: AtomicI64 = AtomicI64::new(0);
pub(crate) static HOST: AtomicI64 = AtomicI64::new(0);
pub(crate) static REGISTERED: AtomicI64 = AtomicI64::new(0);
pub(crate) static MODULES: AtomicI64 = AtomicI64::new(0);
pub(crate) static STREAMS: AtomicI64 = AtomicI64::new(0);
pub(crate) static EVENTS: AtomicI64 = AtomicI64::new(0);

/// A resource made: counted when `made` succeeded.
pub(crate) fn made<T, E>(counter: &AtomicI64, made: Result<T, E>) -> Result<T, E> {
    if made.is_ok() {
        counter.fetch_add(1, Ordering::SeqCst);
    }
    made
}

/// A resource released: it is gone whatever the driver answered (it is never released again).
pub(crate) fn released<E>(counter: &AtomicI64, answer: Result<(), E>) -> Result<(), E> {
    counter.fetch_sub(1, Ordering::SeqCst);
    answer
}

/// What this process holds now.
pub fn live() -> Live {
    let n = |c: &AtomicI64| c.load(Ordering::SeqCst);
    Live {
        device_allocations: n(&DEVICE),
        host_allocations: n(&HOST),
        registrations: n(&REGISTERED),
        modules: n(&MODULES),
        streams: n(&STREAMS),
        events: n(&EVENTS),
    }
}
