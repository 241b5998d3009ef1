//! `PinnedBuffer<T>`: `len` elements of `T` in page-locked host memory.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

use bytemuck::Pod;
use zkpipe_cuda::result::mem;
use zkpipe_cuda::Context;

use crate::{PinnedMemory, Result};

/// A raw allocation of pinned memory: the pool keeps these, typed views borrow them.
#[derive(Debug)]
pub(crate) struct RawPinned {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) bytes: usize,
    ctx: Arc<Context>,
}

// SAFETY: pinned host memory is ordinary memory, usable from any thread.
unsafe impl Send for RawPinned {}
// SAFETY: as above; access goes through `&`/`&mut` of the owner.
unsafe impl Sync for RawPinned {}

impl RawPinned {
    /// Allocates `bytes` (at least one page), zero-filled.
    pub(crate) fn new(ctx: &Arc<Context>, bytes: usize) -> Result<Self> {
        ctx.bind()?;
        let size = bytes.max(1);
        let ptr = mem::host_alloc(size, mem::HOST_ALLOC_PORTABLE)?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(zkpipe_cuda::Error::OutOfRange {
            what: "cuMemHostAlloc returned null",
            start: 0,
            end: size,
            len: 0,
        })?;
        // SAFETY: the driver gave us `size` writable bytes.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, size) };
        Ok(Self {
            ptr,
            bytes: size,
            ctx: Arc::clone(ctx),
        })
    }
}

impl Drop for RawPinned {
    fn drop(&mut self) {
        // The release is attempted even when the bind fails (the handle is never used
        // again, so not releasing it would leak it).
        let bound = self.ctx.bind();
        let released = {
            // SAFETY: allocated by cuMemHostAlloc; owners wait for copies before dropping.
            unsafe { mem::host_free(self.ptr.as_ptr().cast()) }
        };
        let r = bound.and(released);
        if let Err(e) = r {
            self.ctx.record_err(e);
        }
    }
}

/// `len` elements of `T` in pinned (page-locked, portable) host memory, zero-initialised.
#[derive(Debug)]
pub struct PinnedBuffer<T> {
    raw: RawPinned,
    len: usize,
    _elem: std::marker::PhantomData<T>,
}

impl<T: Pod> PinnedBuffer<T> {
    /// Allocates `len` zeroed elements. Costs about half a second per GiB: keep buffers (or use
    /// a [`crate::PinnedPool`]) rather than allocating per job.
    pub fn new(ctx: &Arc<Context>, len: usize) -> Result<Self> {
        let bytes = zkpipe_cuda::byte_len::<T>("pinned allocation", len)?;
        Ok(Self {
            raw: RawPinned::new(ctx, bytes)?,
            len,
            _elem: std::marker::PhantomData,
        })
    }

    /// Allocates and copies `src` in.
    pub fn from_slice(ctx: &Arc<Context>, src: &[T]) -> Result<Self> {
        let mut b = Self::new(ctx, src.len())?;
        b.copy_from_slice(src);
        Ok(b)
    }

    /// Size in bytes of the elements.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T: Pod> Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the allocation holds at least len * size_of::<T>() initialised bytes, is
        // page-aligned (so aligned for any Pod `T`), and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.raw.ptr.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Pod> DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.raw.ptr.as_ptr().cast::<T>(), self.len) }
    }
}

// SAFETY: the memory is pinned and owned by the buffer; moving the buffer does not move it.
unsafe impl<T: Pod + Send> PinnedMemory<T> for PinnedBuffer<T> {}
