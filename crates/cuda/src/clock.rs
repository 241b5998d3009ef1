//! The one stage clock: device time of named spans of work, from CUDA events. A clock records
//! a timed event on a stream when it starts and one where each stage ends; stage k runs from
//! mark k - 1 (or the start) to mark k. Work on several streams keeps a clock per stream (a
//! lane), and a job's span runs from the first clock's start to the last mark of any lane.
//!
//! The stage label is the caller's: the pipeline's `Stage`, the MSM's phases, the NTT's
//! phase names, a benchmark's `&str`. A clock made with [`Timing::Disabled`] records nothing
//! and reports no spans, so code can mark unconditionally and pay only when timing is wanted.

use std::sync::Arc;

use crate::{Context, Event, Result, Stream, Timing};

/// Events at stage boundaries, labelled by `S`.
#[derive(Debug)]
pub struct StageClock<S> {
    running: Option<Running<S>>,
}

#[derive(Debug)]
struct Running<S> {
    ctx: Arc<Context>,
    start: Event,
    marks: Vec<Mark<S>>,
}

#[derive(Debug)]
struct Mark<S> {
    stage: S,
    end: Event,
}

/// One stage's device time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span<S> {
    /// The stage.
    pub stage: S,
    /// Device milliseconds from the previous mark (or the clock's start) to this stage's end.
    pub ms: f64,
}

impl<S: Copy> StageClock<S> {
    /// A clock started on `stream` now; with [`Timing::Disabled`], one that records nothing.
    pub fn start(ctx: &Arc<Context>, stream: &Stream, timing: Timing) -> Result<Self> {
        let running = match timing {
            Timing::Disabled => None,
            Timing::Enabled => {
                let start = Event::timed(ctx)?;
                start.record(stream)?;
                Some(Running {
                    ctx: Arc::clone(ctx),
                    start,
                    marks: Vec::new(),
                })
            }
        };
        Ok(Self { running })
    }

    /// A clock that records nothing (for callers that time nothing).
    pub fn off() -> Self {
        Self { running: None }
    }

    /// Whether this clock records.
    pub fn is_on(&self) -> bool {
        self.running.is_some()
    }

    /// The event the clock started with (None when off): the origin other device times of
    /// the same work are measured from ([`crate::CopyLog::link_use`]).
    pub fn origin(&self) -> Option<&Event> {
        self.running.as_ref().map(|r| &r.start)
    }

    /// Marks the end of `stage` after the work enqueued so far on `stream`.
    pub fn mark(&mut self, stage: S, stream: &Stream) -> Result<()> {
        let Some(r) = &mut self.running else {
            return Ok(());
        };
        let end = Event::timed(&r.ctx)?;
        end.record(stream)?;
        r.marks.push(Mark { stage, end });
        Ok(())
    }

    /// Waits on the host for the last mark.
    pub fn synchronize(&self) -> Result<()> {
        match self.running.as_ref().and_then(|r| r.marks.last()) {
            Some(m) => m.end.synchronize(),
            None => Ok(()),
        }
    }

    /// Each stage's device time, in order (the work must be done; none when off).
    pub fn spans(&self) -> Result<Vec<Span<S>>> {
        let Some(r) = &self.running else {
            return Ok(Vec::new());
        };
        let mut prev = &r.start;
        let mut out = Vec::with_capacity(r.marks.len());
        for m in &r.marks {
            let ms = f64::from(prev.elapsed_ms(&m.end)?);
            out.push(Span { stage: m.stage, ms });
            prev = &m.end;
        }
        Ok(out)
    }

    /// Milliseconds from this clock's start to the last mark of `lanes` or its own: the
    /// device time of work spread over several streams (the work must be done; 0 when off).
    pub fn span_ms(&self, lanes: &[&StageClock<S>]) -> Result<f64> {
        let Some(r) = &self.running else {
            return Ok(0.0);
        };
        let mut span = 0f64;
        for c in std::iter::once(self).chain(lanes.iter().copied()) {
            if let Some(m) = c.running.as_ref().and_then(|l| l.marks.last()) {
                span = span.max(f64::from(r.start.elapsed_ms(&m.end)?));
            }
        }
        Ok(span)
    }

    /// Marks the end of `stage`, waits for it, and returns the milliseconds from the start:
    /// the whole of a timed piece of work (0 when off).
    pub fn stop(mut self, stage: S, stream: &Stream) -> Result<f64> {
        self.mark(stage, stream)?;
        self.synchronize()?;
        self.span_ms(&[])
    }
}
