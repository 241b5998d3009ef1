//! Streams and events: the RAII handles that order work on a device.

use std::sync::Arc;

use cuda_driver_sys::{CUevent, CUstream};

use crate::context::Context;
use crate::error::Result;
use crate::result::{event, stream};

/// A non-blocking stream: it does not synchronise with the legacy default stream.
#[derive(Debug)]
pub struct Stream {
    ctx: Arc<Context>,
    raw: CUstream,
}

// SAFETY: stream handles may be used from any thread of the process.
unsafe impl Send for Stream {}
// SAFETY: as above; the driver serialises work submitted to one stream.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a non-blocking stream in `ctx`.
    pub fn new(ctx: &Arc<Context>) -> Result<Self> {
        ctx.bind()?;
        let raw = stream::create(stream::NON_BLOCKING)?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            raw,
        })
    }

    /// The context the stream belongs to.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Waits on the host until all work on this stream has completed. Errors recorded by
    /// other values' `Drop` are not this stream's: they stay for [`Context::check_err`].
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `raw` lives as long as `self`.
        unsafe { stream::synchronize(self.raw) }
    }

    /// Makes work enqueued on this stream from now on wait until `event` completes.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: both handles live as long as their owners, borrowed here.
        unsafe { stream::wait_event(self.raw, event.raw) }
    }

    /// True when all work on the stream has completed.
    pub fn is_idle(&self) -> Result<bool> {
        self.ctx.bind()?;
        // SAFETY: `raw` lives as long as `self`.
        unsafe { stream::is_idle(self.raw) }
    }

    /// Records a new event (without timing) on this stream and returns it.
    pub fn record(&self) -> Result<Event> {
        let e = Event::new(&self.ctx, Timing::Disabled)?;
        e.record(self)?;
        Ok(e)
    }

    /// The raw handle, for launches and copies.
    pub fn raw(&self) -> CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // The release is attempted even when the bind fails (the handle is never used
        // again, so not releasing it would leak it).
        let bound = self.ctx.bind();
        let released = {
            // SAFETY: the handle is not used after this; pending work still completes.
            unsafe { stream::destroy(self.raw) }
        };
        let r = bound.and(released);
        if let Err(e) = r {
            self.ctx.record_err(e);
        }
    }
}

/// A point in a stream's work that the host or other streams can wait for.
#[derive(Debug)]
pub struct Event {
    ctx: Arc<Context>,
    raw: CUevent,
    timing: Timing,
}

/// Whether an event records times ([`Event::elapsed_ms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Timed: at a small cost per record.
    Enabled,
    /// Only for ordering (waits between streams, completion).
    Disabled,
}

// SAFETY: event handles may be used from any thread of the process.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// Creates an event, timed or not.
    pub fn new(ctx: &Arc<Context>, timing: Timing) -> Result<Self> {
        ctx.bind()?;
        let flags = match timing {
            Timing::Enabled => 0,
            Timing::Disabled => event::DISABLE_TIMING,
        };
        let raw = event::create(flags)?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            raw,
            timing,
        })
    }

    /// Creates a timing event.
    pub fn timed(ctx: &Arc<Context>) -> Result<Self> {
        Self::new(ctx, Timing::Enabled)
    }

    /// Records the event at the current end of `stream`'s work.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: both handles are alive and of the same context.
        unsafe { event::record(self.raw, stream.raw) }
    }

    /// Waits on the host until the event completes (errors recorded by `Drop`s stay for
    /// [`Context::check_err`]).
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `raw` lives as long as `self`.
        unsafe { event::synchronize(self.raw) }
    }

    /// Waits for the event before memory that the work it follows uses is freed: when the
    /// wait fails, waits for the whole context instead, and returns the event's error.
    pub fn settle(&self) -> Result<()> {
        self.synchronize().inspect_err(|_| {
            if let Err(e) = self.ctx.synchronize() {
                tracing::warn!(error = %e, "waiting for the context after an event wait failed");
            }
        })
    }

    /// True when the recorded work has completed (or nothing was recorded).
    pub fn is_complete(&self) -> Result<bool> {
        self.ctx.bind()?;
        // SAFETY: `raw` lives as long as `self`.
        unsafe { event::is_complete(self.raw) }
    }

    /// Whether the event was created with timing.
    pub fn is_timed(&self) -> bool {
        self.timing == Timing::Enabled
    }

    /// Milliseconds from this event to `end`; both must be timing events that completed.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.ctx.bind()?;
        // SAFETY: both handles are alive.
        unsafe { event::elapsed_ms(self.raw, end.raw) }
    }

    /// The raw handle.
    pub fn raw(&self) -> CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // The release is attempted even when the bind fails (the handle is never used
        // again, so not releasing it would leak it).
        let bound = self.ctx.bind();
        let released = {
            // SAFETY: not used after this.
            unsafe { event::destroy(self.raw) }
        };
        let r = bound.and(released);
        if let Err(e) = r {
            self.ctx.record_err(e);
        }
    }
}
