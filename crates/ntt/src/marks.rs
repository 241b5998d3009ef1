//! Event marks between the phases of a long call, taken only when debug logging is on
//! (`RUST_LOG=zkpipe_ntt=debug`): each phase's end, in milliseconds from the first mark.

use std::sync::Arc;

use zkpipe_cuda::{Context, Event, Stream};

use crate::NttError;

#[derive(Debug)]
pub(crate) struct Marks {
    ctx: Arc<Context>,
    marks: Vec<(&'static str, Event)>,
}

impl Marks {
    /// Marks for this call, or `None` when debug logging is off.
    pub fn new(ctx: &Arc<Context>) -> Option<Self> {
        tracing::enabled!(tracing::Level::DEBUG).then(|| Self {
            ctx: Arc::clone(ctx),
            marks: Vec::new(),
        })
    }

    /// Records `name` at the current end of `stream`'s work.
    pub fn mark(&mut self, name: &'static str, stream: &Stream) -> Result<(), NttError> {
        let e = Event::timed(&self.ctx)?;
        e.record(stream)?;
        self.marks.push((name, e));
        Ok(())
    }

    /// Waits for every mark, then logs each one's time from the first.
    pub fn log(self, what: &'static str) -> Result<(), NttError> {
        let Some((_, first)) = self.marks.first() else {
            return Ok(());
        };
        let mut line = String::new();
        for (name, e) in &self.marks {
            e.synchronize()?;
            line.push_str(&format!(" {name}={:.1}", first.elapsed_ms(e)?));
        }
        tracing::debug!("{what} ms from start:{line}");
        Ok(())
    }
}

/// Records a mark when marks are on.
pub(crate) fn mark(
    marks: &mut Option<Marks>,
    name: &'static str,
    stream: &Stream,
) -> Result<(), NttError> {
    match marks {
        Some(m) => m.mark(name, stream),
        None => Ok(()),
    }
}
