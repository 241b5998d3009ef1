//! `PinnableVec<T>`: a read-only vector that can be page-locked in place later, through a
//! shared reference (a proving key's points, shared by jobs through `Arc`).

use std::ops::Deref;
use std::sync::Arc;

use zkpipe_cuda::Context;

use crate::registration::Registration;
use crate::Result;

/// A vector that never changes after construction and can be registered with the driver
/// (`cuMemHostRegister`, portable) on first request; it is unregistered when dropped.
///
/// Copies from a registered vector run at pinned speed (DMA straight from it) without a
/// staging copy. Usable without any GPU: until [`PinnableVec::pin`] is called it is a plain
/// vector.
#[derive(Debug)]
pub struct PinnableVec<T> {
    vec: Vec<T>,
    registration: Registration,
}

impl<T> PinnableVec<T> {
    /// Wraps `vec` (not registered yet).
    pub fn new(vec: Vec<T>) -> Self {
        Self {
            vec,
            registration: Registration::default(),
        }
    }

    /// Registers the memory with the driver unless it already is. Returns true when this call
    /// registered it. Costs about 60 ms per GiB, once. Registration is portable: copies on any
    /// context of the process see the memory as pinned.
    pub fn pin(&self, ctx: &Arc<Context>) -> Result<bool> {
        let bytes = std::mem::size_of_val(self.vec.as_slice());
        // SAFETY: the vector's buffer is mapped and `bytes` long; the vector is never grown,
        // shrunk or moved out of (no `&mut` access exists), and `Drop` releases the
        // registration before the buffer is freed.
        unsafe {
            self.registration
                .register(ctx, self.vec.as_ptr().cast(), bytes, 0)
        }
    }

    /// True once the memory is registered.
    pub fn is_pinned(&self) -> bool {
        self.registration.is_registered()
    }
}

impl<T> Deref for PinnableVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.vec
    }
}

impl<T: Clone> Clone for PinnableVec<T> {
    /// A copy of the elements, not registered.
    fn clone(&self) -> Self {
        Self::new(self.vec.clone())
    }
}

impl<T: PartialEq> PartialEq for PinnableVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.vec == other.vec
    }
}

impl<T: Eq> Eq for PinnableVec<T> {}

impl<T> Drop for PinnableVec<T> {
    fn drop(&mut self) {
        let ptr = self.vec.as_ptr().cast();
        // SAFETY: the range registered in `pin`; copies from it are synchronous or waited by
        // their owners, who borrow `self`, so none is in flight now.
        unsafe { self.registration.release(ptr) }
    }
}
