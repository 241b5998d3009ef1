//! Asynchronous copies from and into *borrowed* pinned memory, all waited for before the scope
//! that enqueued them returns (as `std::thread::scope` does for threads).
//!
//! [`upload`](crate::upload) and [`download`](crate::download) take ownership of the host
//! buffer; a stage that streams chunks out of one big pinned buffer (a proving key's points)
//! needs to copy sub-ranges of memory it only borrows. [`copy_scope`] hands out a
//! [`CopyScope`] whose copies may read or write borrowed [`Pinned`] / [`PinnedMut`] ranges,
//! and does not return until every one of them has completed, so the borrows outlive the
//! copies. The host waits once, at the end; ordering between copies and kernels is the
//! caller's, through events and streams.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Mutex;

use bytemuck::Pod;
use zkpipe_cuda::{DeviceBuffer, Event, Stream};
use zkpipe_pinned::{PinnableVec, PinnedMemory};

use crate::Result;

/// A borrowed range of page-locked host memory to copy from.
#[derive(Debug, Clone, Copy)]
pub struct Pinned<'a, T> {
    slice: &'a [T],
}

impl<'a, T> Pinned<'a, T> {
    /// All of a pinned buffer.
    pub fn new<H: PinnedMemory<T>>(host: &'a H) -> Self {
        Self { slice: host }
    }

    /// A slice the caller knows to be page-locked.
    ///
    /// # Safety
    /// `slice` must lie in pinned or registered host memory for all of `'a`.
    pub unsafe fn assume_pinned(slice: &'a [T]) -> Self {
        Self { slice }
    }

    /// A view of a page-locked [`PinnableVec`] (`None` while it is not locked), through `view`,
    /// which must return the vector's own memory seen as `T` (a layout cast such as
    /// `zkpipe_field::cast::g1_affine_as_gpu`); any other slice gives `None`.
    pub fn of_pinnable<U>(v: &'a PinnableVec<U>, view: fn(&'a [U]) -> &'a [T]) -> Option<Self> {
        if !v.is_pinned() {
            return None;
        }
        let all: &'a [U] = v;
        let seen = view(all);
        let same_start = seen.as_ptr().cast::<u8>() == all.as_ptr().cast::<u8>();
        if !same_start || std::mem::size_of_val(seen) != std::mem::size_of_val(all) {
            return None;
        }
        // SAFETY: `seen` covers exactly the bytes of `v`, which is page-locked (checked above)
        // and stays locked while borrowed: a PinnableVec unlocks only when dropped.
        Some(unsafe { Self::assume_pinned(seen) })
    }

    /// The elements in `range`, or `None` when it reaches past the end.
    pub fn range(&self, range: Range<usize>) -> Option<Self> {
        self.slice.get(range).map(|slice| Self { slice })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.slice.is_empty()
    }

    /// The elements, for the host to read.
    pub fn as_slice(&self) -> &'a [T] {
        self.slice
    }
}

/// A borrowed range of page-locked host memory to copy into.
#[derive(Debug)]
pub struct PinnedMut<'a, T> {
    slice: &'a mut [T],
}

impl<'a, T> PinnedMut<'a, T> {
    /// All of a pinned buffer.
    pub fn new<H: PinnedMemory<T>>(host: &'a mut H) -> Self {
        Self { slice: host }
    }

    /// Splits into consecutive ranges of `len` elements (the last may be shorter).
    pub fn chunks(self, len: usize) -> Vec<PinnedMut<'a, T>> {
        self.slice
            .chunks_mut(len.max(1))
            .map(|slice| PinnedMut { slice })
            .collect()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.slice.is_empty()
    }
}

/// Copies enqueued within one [`copy_scope`] call. Not `Clone`; the invariant lifetime ties
/// every borrowed range to the scope's caller.
#[derive(Debug)]
pub struct CopyScope<'h> {
    events: Mutex<Vec<Event>>,
    _borrows: PhantomData<&'h mut &'h ()>,
}

impl<'h> CopyScope<'h> {
    /// Enqueues a copy of `src` into `dst[offset..]` on `stream`. `dst` must stay allocated
    /// until work ordered after the copy has used it (as for any kernel argument).
    pub fn upload<T: Pod>(
        &self,
        stream: &Stream,
        src: Pinned<'h, T>,
        dst: &mut DeviceBuffer<T>,
        offset: usize,
    ) -> Result<()> {
        // SAFETY: `src` is pinned and borrowed for 'h, which outlives the copy_scope call;
        // copy_scope waits for the event recorded below before it returns (or unwinds).
        unsafe { dst.copy_from_host_async_at(offset, src.slice, stream) }?;
        self.track(stream)
    }

    /// As [`CopyScope::upload`] from memory that may be pageable: the copy is stream-ordered
    /// all the same (the driver stages pageable memory before the call returns), at pageable
    /// speed (about a sixth of pinned on the H200).
    pub fn upload_slice<T: Pod>(
        &self,
        stream: &Stream,
        src: &'h [T],
        dst: &mut DeviceBuffer<T>,
        offset: usize,
    ) -> Result<()> {
        // SAFETY: `src` is borrowed for 'h, which outlives the copy_scope call; copy_scope
        // waits for the event recorded below before it returns (or unwinds).
        unsafe { dst.copy_from_host_async_at(offset, src, stream) }?;
        self.track(stream)
    }

    /// Enqueues a copy of `src[offset..offset + dst.len()]` into `dst` on `stream`.
    pub fn download<T: Pod>(
        &self,
        stream: &Stream,
        src: &DeviceBuffer<T>,
        offset: usize,
        dst: PinnedMut<'h, T>,
    ) -> Result<()> {
        // SAFETY: `dst` is an exclusive borrow for 'h, so nothing else touches it until
        // copy_scope has waited for the event recorded below.
        unsafe { src.copy_to_host_async_at(offset, dst.slice, stream) }?;
        self.track(stream)
    }

    fn track(&self, stream: &Stream) -> Result<()> {
        // Untracked, the copy would not be waited for: on failure, wait for the stream now.
        let event = crate::transfer::settled(stream, stream.record())?;
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
        Ok(())
    }

    fn wait_all(&self) -> Result<()> {
        let events = std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()));
        let mut first = Ok(());
        for e in events {
            if let Err(err) = e.synchronize() {
                if first.is_ok() {
                    first = Err(err.into());
                }
            }
        }
        first
    }
}

/// Waits for the scope's copies if `f` unwinds.
struct WaitOnUnwind<'s, 'h>(&'s CopyScope<'h>);

impl Drop for WaitOnUnwind<'_, '_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.wait_all() {
            tracing::warn!(error = %e, "waiting for scoped copies while unwinding failed");
        }
    }
}

/// Runs `f` with a [`CopyScope`]; returns once every copy it enqueued has completed.
///
/// The result of `f` comes back with the first error of waiting, if any.
pub fn copy_scope<'h, R>(f: impl FnOnce(&CopyScope<'h>) -> R) -> Result<R> {
    let scope = CopyScope {
        events: Mutex::new(Vec::new()),
        _borrows: PhantomData,
    };
    let guard = WaitOnUnwind(&scope);
    let r = f(&scope);
    std::mem::forget(guard);
    scope.wait_all()?;
    Ok(r)
}
