//! The host-to-device link's share of a span of device work: copies timed with CUDA events
//! on whatever streams they ran, their bytes, and the union of their intervals measured from
//! an origin event (a stage clock's start), so that copies on two streams at once count once.

use std::sync::Arc;

use crate::{Context, Event, Result, Stream, Timing};

/// Copies timed on their streams (nothing recorded when made with [`Timing::Disabled`]).
#[derive(Debug)]
pub struct CopyLog {
    ctx: Option<Arc<Context>>,
    copies: Vec<TimedCopy>,
    bytes: u64,
}

#[derive(Debug)]
struct TimedCopy {
    start: Event,
    end: Event,
}

/// A copy's start, recorded on its stream before the copy is enqueued.
#[derive(Debug)]
pub struct CopyStart(Option<Event>);

/// What a [`CopyLog`] measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkUse {
    /// Bytes copied.
    pub bytes: u64,
    /// Device milliseconds during which at least one of the copies ran.
    pub busy_ms: f64,
}

impl CopyLog {
    /// A log of copies in `ctx`; with [`Timing::Disabled`], one that counts bytes only.
    pub fn new(ctx: &Arc<Context>, timing: Timing) -> Self {
        Self {
            ctx: (timing == Timing::Enabled).then(|| Arc::clone(ctx)),
            copies: Vec::new(),
            bytes: 0,
        }
    }

    /// A log that records nothing but bytes.
    pub fn off() -> Self {
        Self {
            ctx: None,
            copies: Vec::new(),
            bytes: 0,
        }
    }

    /// Records the start of a copy about to be enqueued on `stream`.
    pub fn start(&self, stream: &Stream) -> Result<CopyStart> {
        let Some(ctx) = &self.ctx else {
            return Ok(CopyStart(None));
        };
        let e = Event::timed(ctx)?;
        e.record(stream)?;
        Ok(CopyStart(Some(e)))
    }

    /// Records the end of the copy of `bytes` begun at `start`, after the work enqueued so far
    /// on `stream`.
    pub fn end(&mut self, start: CopyStart, stream: &Stream, bytes: u64) -> Result<()> {
        self.bytes += bytes;
        let (Some(ctx), Some(start)) = (&self.ctx, start.0) else {
            return Ok(());
        };
        let end = Event::timed(ctx)?;
        end.record(stream)?;
        self.copies.push(TimedCopy { start, end });
        Ok(())
    }

    /// Adds `other`'s copies to this log's.
    pub fn append(&mut self, other: CopyLog) {
        self.bytes += other.bytes;
        if self.ctx.is_none() {
            self.ctx = other.ctx;
        }
        self.copies.extend(other.copies);
    }

    /// Bytes logged so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The bytes and the milliseconds any copy ran, measured from `origin` (the copies must
    /// be done; no busy time when the log or `origin` is untimed).
    pub fn link_use(&self, origin: Option<&Event>) -> Result<LinkUse> {
        let Some(origin) = origin.filter(|o| o.is_timed()) else {
            return Ok(LinkUse {
                bytes: self.bytes,
                busy_ms: 0.0,
            });
        };
        let mut intervals = Vec::with_capacity(self.copies.len());
        for c in &self.copies {
            let from = f64::from(origin.elapsed_ms(&c.start)?);
            let to = f64::from(origin.elapsed_ms(&c.end)?);
            intervals.push(Interval { from, to });
        }
        Ok(LinkUse {
            bytes: self.bytes,
            busy_ms: covered_ms(&mut intervals),
        })
    }
}

/// Milliseconds from an origin to a copy's start and end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub from: f64,
    pub to: f64,
}

/// The length of the union of `intervals` (sorted in place; empty or reversed ones count
/// nothing).
pub fn covered_ms(intervals: &mut [Interval]) -> f64 {
    intervals.sort_by(|a, b| a.from.total_cmp(&b.from));
    let mut covered = 0.0;
    let mut run: Option<Interval> = None;
    for &i in intervals.iter().filter(|i| i.to > i.from) {
        run = match run {
            Some(r) if i.from <= r.to => Some(Interval {
                from: r.from,
                to: r.to.max(i.to),
            }),
            Some(r) => {
                covered += r.to - r.from;
                Some(i)
            }
            None => Some(i),
        };
    }
    covered + run.map_or(0.0, |r| r.to - r.from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(from: f64, to: f64) -> Interval {
        Interval { from, to }
    }

    #[test]
    fn overlapping_copies_count_once_and_gaps_not_at_all() {
        assert_eq!(covered_ms(&mut []), 0.0);
        assert_eq!(covered_ms(&mut [iv(1.0, 3.0)]), 2.0);
        // Two streams copying at once, out of order, one inside another, one after a gap.
        let mut v = [
            iv(5.0, 9.0),
            iv(0.0, 2.0),
            iv(1.0, 4.0),
            iv(6.0, 7.0),
            iv(12.0, 13.5),
        ];
        assert_eq!(covered_ms(&mut v), 4.0 + 4.0 + 1.5);
        // Touching intervals join; empty and reversed ones add nothing.
        let mut w = [iv(0.0, 1.0), iv(1.0, 2.0), iv(3.0, 3.0), iv(5.0, 4.0)];
        assert_eq!(covered_ms(&mut w), 2.0);
        // Copies begun before the origin (negative times) count from where they began.
        assert_eq!(covered_ms(&mut [iv(-2.0, 1.0), iv(0.5, 2.0)]), 4.0);
    }
}
