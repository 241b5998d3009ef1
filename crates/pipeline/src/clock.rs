//! Device time of a job's stages: one timed event recorded on a stream where each stage ends,
//! read once the work is done. The one timing facility of the GPU worker. Work on two streams
//! at once keeps a clock per stream (a lane); the job's device span runs from the first
//! clock's start to the last mark of any lane.

use std::sync::Arc;

use zkpipe_cuda::{Context, Event, Stream};

use crate::stats::{Stage, StageTime};

/// Events at stage boundaries; stage k runs from mark k - 1 (or the start) to mark k.
#[derive(Debug)]
pub(crate) struct StageClock {
    ctx: Arc<Context>,
    start: Event,
    marks: Vec<(Stage, Event)>,
}

impl StageClock {
    /// A clock started on `stream` now.
    pub fn start(ctx: &Arc<Context>, stream: &Stream) -> Result<Self, zkpipe_cuda::Error> {
        let start = Event::timed(ctx)?;
        start.record(stream)?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            start,
            marks: Vec::new(),
        })
    }

    /// Marks the end of `stage` after the work enqueued so far on `stream`.
    pub fn mark(&mut self, stage: Stage, stream: &Stream) -> Result<(), zkpipe_cuda::Error> {
        let e = Event::timed(&self.ctx)?;
        e.record(stream)?;
        self.marks.push((stage, e));
        Ok(())
    }

    /// Milliseconds from this clock's start to the last mark of `lanes` (and its own): the
    /// device time of work spread over several streams (the work must be done).
    pub fn span_ms(&self, lanes: &[&StageClock]) -> Result<f64, zkpipe_cuda::Error> {
        let mut span = 0f64;
        for c in std::iter::once(self).chain(lanes.iter().copied()) {
            if let Some((_, end)) = c.marks.last() {
                span = span.max(f64::from(self.start.elapsed_ms(end)?));
            }
        }
        Ok(span)
    }

    /// Each stage's device milliseconds, in order (the work must be done).
    pub fn stages(&self) -> Result<Vec<StageTime>, zkpipe_cuda::Error> {
        let mut prev = &self.start;
        let mut out = Vec::with_capacity(self.marks.len());
        for (stage, e) in &self.marks {
            let ms = f64::from(prev.elapsed_ms(e)?);
            out.push(StageTime { stage: *stage, ms });
            prev = e;
        }
        Ok(out)
    }
}
