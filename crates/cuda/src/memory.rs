//! Typed device memory: allocation (plain or stream-ordered), copies with length checks, free.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use cuda_driver_sys::CUdeviceptr;

use crate::context::Context;
use crate::error::{Error, Result, CUDA_ERROR_OUT_OF_MEMORY};
use crate::result::mem;
use crate::stream::Stream;

/// How a buffer was allocated, and so how it is freed.
#[derive(Debug)]
enum Origin {
    /// `cuMemAlloc`; freed with `cuMemFree`.
    Plain,
    /// `cuMemAllocAsync` on this stream; freed with `cuMemFreeAsync` on it, after its work.
    Pool(Arc<Stream>),
}

/// `len` elements of `T` in device memory.
///
/// A zero-length buffer allocates nothing. The buffer holds its context (and, when it came
/// from the stream-ordered pool, its stream), so those outlive it.
#[derive(Debug)]
pub struct DeviceBuffer<T> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Arc<Context>,
    origin: Origin,
    _elem: PhantomData<T>,
}

// SAFETY: a device pointer is an address in the device's memory, usable from any thread.
unsafe impl<T: Send> Send for DeviceBuffer<T> {}
// SAFETY: shared references only read the handle; device-side races are the kernels' concern.
unsafe impl<T: Sync> Sync for DeviceBuffer<T> {}

/// Bytes for `len` elements of `T`, checked.
pub fn byte_len<T>(what: &'static str, len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or(Error::SizeOverflow {
            what,
            count: len,
            size: std::mem::size_of::<T>(),
        })
}

fn check_len(what: &'static str, source_len: usize, destination_len: usize) -> Result<()> {
    if source_len != destination_len {
        return Err(Error::LengthMismatch {
            what,
            source_len,
            destination_len,
        });
    }
    Ok(())
}

/// Turns an allocation failure for lack of memory into [`Error::OutOfDeviceMemory`].
fn oom(e: Error, needed: usize) -> Error {
    if e.code() == Some(CUDA_ERROR_OUT_OF_MEMORY) {
        let free = mem::info().map(|(f, _)| f).unwrap_or(0);
        return Error::OutOfDeviceMemory { needed, free };
    }
    e
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates `len` elements with `cuMemAlloc` (contents undefined).
    pub fn alloc(ctx: &Arc<Context>, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>("device allocation", len)?;
        ctx.bind()?;
        let ptr = if bytes == 0 {
            0
        } else {
            mem::alloc(bytes).map_err(|e| oom(e, bytes))?
        };
        Ok(Self {
            ptr,
            len,
            ctx: Arc::clone(ctx),
            origin: Origin::Plain,
            _elem: PhantomData,
        })
    }

    /// Allocates `len` elements from the stream-ordered pool on `stream` (contents undefined).
    /// The memory is usable by work enqueued on `stream` after this call, and is returned to
    /// the pool (not to the device) when the buffer drops: see [`Context::trim_async_pool`].
    pub fn alloc_async(stream: &Arc<Stream>, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>("device allocation", len)?;
        let ctx = stream.context();
        ctx.bind()?;
        let ptr = if bytes == 0 {
            0
        } else {
            // SAFETY: the stream is alive (we hold it) and belongs to `ctx`.
            unsafe { mem::alloc_async(bytes, stream.raw()) }.map_err(|e| oom(e, bytes))?
        };
        Ok(Self {
            ptr,
            len,
            ctx: Arc::clone(ctx),
            origin: Origin::Pool(Arc::clone(stream)),
            _elem: PhantomData,
        })
    }

    /// Allocates and fills from `src` (synchronously).
    pub fn from_host(ctx: &Arc<Context>, src: &[T]) -> Result<Self> {
        let mut buf = Self::alloc(ctx, src.len())?;
        buf.copy_from_host(src)?;
        Ok(buf)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The device address.
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The address of the field holding the device pointer (for kernel parameters).
    pub(crate) fn ptr_field(&self) -> *const CUdeviceptr {
        &self.ptr
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Address and byte count of `offset..offset + count`, checked against the buffer.
    fn range(
        &self,
        what: &'static str,
        offset: usize,
        count: usize,
    ) -> Result<(CUdeviceptr, usize)> {
        let end = offset.checked_add(count).filter(|&e| e <= self.len);
        let Some(_) = end else {
            return Err(Error::OutOfRange {
                what,
                start: offset,
                end: offset.saturating_add(count),
                len: self.len,
            });
        };
        let size = std::mem::size_of::<T>();
        Ok((self.ptr + (offset * size) as u64, count * size))
    }

    /// Makes earlier stream-ordered work on this buffer visible to synchronous copies.
    fn settle(&self) -> Result<()> {
        self.ctx.bind()?;
        if let Origin::Pool(s) = &self.origin {
            s.synchronize()?;
        }
        Ok(())
    }

    /// Copies all of `src` into the buffer, synchronously; lengths must match.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        check_len("host-to-device copy", src.len(), self.len)?;
        self.copy_from_host_at(0, src)
    }

    /// Copies `src` into `self[offset..offset + src.len()]`, synchronously.
    pub fn copy_from_host_at(&mut self, offset: usize, src: &[T]) -> Result<()> {
        let (dst, bytes) = self.range("host-to-device copy", offset, src.len())?;
        if bytes == 0 {
            return Ok(());
        }
        self.settle()?;
        // SAFETY: the range was checked against both buffers; the copy completes before return.
        unsafe { mem::htod(dst, src.as_ptr().cast(), bytes) }
    }

    /// Copies the whole buffer into `dst`, synchronously; lengths must match.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        check_len("device-to-host copy", self.len, dst.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.settle()?;
        // SAFETY: lengths checked; the copy completes before return.
        unsafe { mem::dtoh(dst.as_mut_ptr().cast(), self.ptr, self.bytes()) }
    }

    /// Reads the buffer back into a new vector.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Enqueues a copy of `src` into `self[offset..]` on `stream`.
    ///
    /// # Safety
    /// `src` must stay alive and unchanged until the copy completes (wait for an event
    /// recorded after it). zkpipe-stream wraps this safely for pinned buffers.
    pub unsafe fn copy_from_host_async_at(
        &mut self,
        offset: usize,
        src: &[T],
        stream: &Stream,
    ) -> Result<()> {
        let (dst, bytes) = self.range("host-to-device copy", offset, src.len())?;
        if bytes == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the range is checked; the caller keeps `src` valid until completion.
        unsafe { mem::htod_async(dst, src.as_ptr().cast::<c_void>(), bytes, stream.raw()) }
    }

    /// Enqueues a copy of a block of columns: with `src` and `self` read as rows of `pitch`
    /// elements, columns `col..col + width` of every row go from `src` to the same place in
    /// `self` (one 2D copy), on `stream`.
    ///
    /// # Safety
    /// `src` must stay valid, and must not be written, until the copy completes.
    pub unsafe fn copy_columns_from_host_async(
        &mut self,
        src: &[T],
        pitch: usize,
        col: usize,
        width: usize,
        stream: &Stream,
    ) -> Result<()> {
        check_len("host-to-device column copy", src.len(), self.len)?;
        let fits =
            pitch > 0 && self.len.is_multiple_of(pitch) && col <= pitch && width <= pitch - col;
        if !fits {
            return Err(Error::ColumnBlock {
                len: self.len,
                pitch,
                col,
                width,
            });
        }
        let rows = self.len / pitch;
        if width == 0 || rows == 0 {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        let (dst, _) = self.range("host-to-device column copy", col, width)?;
        self.ctx.bind()?;
        // SAFETY: both sides hold rows·pitch elements and the block's last row ends at
        // (rows - 1)·pitch + col + width <= rows·pitch (checked above); the caller keeps `src`
        // valid until completion.
        unsafe {
            mem::htod_2d_async(
                dst,
                src.as_ptr().add(col).cast::<c_void>(),
                pitch * size,
                width * size,
                rows,
                stream.raw(),
            )
        }
    }

    /// Enqueues a copy of `self[offset..offset + dst.len()]` into `dst` on `stream`.
    ///
    /// # Safety
    /// `dst` must stay alive, and must not be read or written, until the copy completes.
    pub unsafe fn copy_to_host_async_at(
        &self,
        offset: usize,
        dst: &mut [T],
        stream: &Stream,
    ) -> Result<()> {
        let (src, bytes) = self.range("device-to-host copy", offset, dst.len())?;
        if bytes == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the range is checked; the caller keeps `dst` valid until completion.
        unsafe { mem::dtoh_async(dst.as_mut_ptr().cast::<c_void>(), src, bytes, stream.raw()) }
    }

    /// Enqueues a device-to-device copy of all of `src` into `self[offset..]`.
    pub fn copy_from_device_async_at(
        &mut self,
        offset: usize,
        src: &DeviceBuffer<T>,
        stream: &Stream,
    ) -> Result<()> {
        let (dst, bytes) = self.range("device-to-device copy", offset, src.len)?;
        if bytes == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both ranges are live device memory of the checked size.
        unsafe { mem::dtod_async(dst, src.ptr, bytes, stream.raw()) }
    }

    /// Enqueues a fill of the elements from `offset` to the end with zero bytes.
    pub fn zero_from_async(&mut self, offset: usize, stream: &Stream) -> Result<()> {
        let count = self.len.saturating_sub(offset);
        let (dst, bytes) = self.range("zero fill", offset, count)?;
        if bytes == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the checked range of live device memory.
        unsafe { mem::memset_async(dst, 0, bytes, stream.raw()) }
    }

    /// Enqueues a fill of the whole buffer with zero bytes.
    pub fn zero_async(&mut self, stream: &Stream) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the whole allocation, of `bytes()` bytes.
        unsafe { mem::memset_async(self.ptr, 0, self.bytes(), stream.raw()) }
    }
}

impl<T> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        // The free is attempted even when the bind fails (the buffer is never used again, so
        // not freeing it would leak it).
        let bound = self.ctx.bind();
        let freed = match &self.origin {
            // SAFETY: allocated by cuMemAlloc and not used after this.
            Origin::Plain => unsafe { mem::free(self.ptr) },
            // SAFETY: allocated from the pool on this stream; freeing on it orders the free
            // after all work this buffer was used in on that stream.
            Origin::Pool(s) => unsafe { mem::free_async(self.ptr, s.raw()) },
        };
        let r = bound.and(freed);
        if let Err(e) = r {
            self.ctx.record_err(e);
        }
    }
}
