//! Asynchronous copies between pinned host memory and the device.

use bytemuck::Pod;
use zkpipe_cuda::{DeviceBuffer, Event, Stream};
use zkpipe_pinned::{PinnedMemory, PooledBuffer};

use crate::Result;

/// A copy in flight: it owns the host buffer until the copy completes.
///
/// [`InFlight::wait`] blocks until the copy is done and returns the buffer. Dropping an
/// `InFlight` also waits (a copy must never outlive its host memory); for pool buffers,
/// [`InFlight::release`] returns the buffer to its pool without blocking.
#[derive(Debug)]
#[must_use = "a copy's host buffer comes back through wait() or release()"]
pub struct InFlight<H> {
    parts: Option<(H, Event)>,
    bytes: usize,
    /// For a copy in column blocks ([`upload_columns`]): each block's completion.
    blocks: Vec<Event>,
}

impl<H> InFlight<H> {
    /// Waits for the copy and returns the host buffer.
    pub fn wait(mut self) -> Result<H> {
        let (host, event) = self.parts.take().ok_or(crate::Error::AlreadyTaken)?;
        event.settle()?;
        Ok(host)
    }

    /// The event that completes with the copy (for other streams to wait on).
    pub fn event(&self) -> Option<&Event> {
        self.parts.as_ref().map(|(_, e)| e)
    }

    /// The event that completes with column block `i` of a copy made by [`upload_columns`]
    /// (`None` past the last block, or for other copies).
    pub fn block_event(&self, i: usize) -> Option<&Event> {
        self.blocks.get(i)
    }

    /// True once the copy has completed.
    pub fn is_done(&self) -> Result<bool> {
        match &self.parts {
            Some((_, e)) => Ok(e.is_complete()?),
            None => Ok(true),
        }
    }

    /// Bytes the copy moves.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl<T: Pod + Send> InFlight<PooledBuffer<T>> {
    /// Returns the buffer to its pool without waiting: the pool waits for the copy before it
    /// lends the buffer again.
    pub fn release(mut self) {
        if let Some((host, event)) = self.parts.take() {
            host.release_after(event);
        }
    }
}

impl<H> Drop for InFlight<H> {
    fn drop(&mut self) {
        if let Some((_, event)) = &self.parts {
            if let Err(e) = event.settle() {
                tracing::warn!(error = %e, "waiting for a copy in drop failed");
            }
        }
    }
}

/// The event recorded after a copy, or, when it could not be recorded, the error once the
/// stream has drained: the copy's host buffer is about to be dropped and must not be in use.
pub(crate) fn settled(stream: &Stream, recorded: zkpipe_cuda::Result<Event>) -> Result<Event> {
    recorded.map_err(|e| {
        if let Err(sync) = stream.synchronize() {
            tracing::warn!(error = %sync, "waiting for a copy whose event failed");
        }
        e.into()
    })
}

/// Enqueues a copy of all of `src` into `dst[offset..]` on `stream`.
pub fn upload<T, H>(
    stream: &Stream,
    src: H,
    dst: &mut DeviceBuffer<T>,
    offset: usize,
) -> Result<InFlight<H>>
where
    T: Pod,
    H: PinnedMemory<T>,
{
    let bytes = std::mem::size_of_val(&*src);
    // SAFETY: `src` is pinned memory that the returned `InFlight` owns until the event after
    // the copy completes (`wait`, `release` or `Drop`), so it stays valid and unchanged; if
    // the event cannot be recorded, `settled` waits for the copy before `src` goes.
    unsafe { dst.copy_from_host_async_at(offset, &src, stream) }?;
    let event = settled(stream, stream.record())?;
    Ok(InFlight {
        parts: Some((src, event)),
        bytes,
        blocks: Vec::new(),
    })
}

/// Enqueues a copy of all of `src` into `dst` (of the same length) in `blocks` blocks of
/// columns, reading both as rows of `pitch` elements: block i holds columns
/// `i·pitch/blocks..(i + 1)·pitch/blocks` of every row (one 2D copy each), and
/// [`InFlight::block_event`] tells when it has arrived, so that work on those columns can start
/// before the rest. `pitch` must divide the length and `blocks` must divide `pitch`.
pub fn upload_columns<T, H>(
    stream: &Stream,
    src: H,
    dst: &mut DeviceBuffer<T>,
    pitch: usize,
    blocks: usize,
) -> Result<InFlight<H>>
where
    T: Pod,
    H: PinnedMemory<T>,
{
    let bytes = std::mem::size_of_val(&*src);
    if blocks == 0 || !pitch.is_multiple_of(blocks) {
        return Err(crate::Error::ColumnBlocks { pitch, blocks });
    }
    let width = pitch / blocks;
    let mut events = Vec::with_capacity(blocks);
    for i in 0..blocks {
        // SAFETY: `src` is pinned memory that the returned `InFlight` owns until the event
        // after the last block completes, so it stays valid and unchanged. On an error the
        // blocks already enqueued are waited for (below) before `src` goes.
        let queued =
            unsafe { dst.copy_columns_from_host_async(&src, pitch, i * width, width, stream) }
                .map_err(crate::Error::from)
                .and_then(|()| Ok(stream.record()?));
        match queued {
            Ok(e) => events.push(e),
            Err(e) => {
                let _ = stream.synchronize();
                return Err(e);
            }
        }
    }
    let event = settled(stream, stream.record())?;
    Ok(InFlight {
        parts: Some((src, event)),
        bytes,
        blocks: events,
    })
}

/// Enqueues a copy of `src[offset..offset + dst.len()]` into `dst` on `stream`.
pub fn download<T, H>(
    stream: &Stream,
    src: &DeviceBuffer<T>,
    offset: usize,
    mut dst: H,
) -> Result<InFlight<H>>
where
    T: Pod,
    H: PinnedMemory<T>,
{
    let bytes = std::mem::size_of_val(&*dst);
    // SAFETY: `dst` is pinned memory owned by the returned `InFlight` until the copy's event
    // completes; nothing else can read or write it meanwhile; if the event cannot be
    // recorded, `settled` waits for the copy before `dst` goes.
    unsafe { src.copy_to_host_async_at(offset, &mut dst, stream) }?;
    let event = settled(stream, stream.record())?;
    Ok(InFlight {
        parts: Some((dst, event)),
        bytes,
        blocks: Vec::new(),
    })
}
