//! The H step's phases on zkpipe-cuda's stage clock, timed only when debug logging is on
//! (`RUST_LOG=zkpipe_ntt=debug`): each phase's device milliseconds, logged once the work is
//! done.

use std::sync::Arc;

use zkpipe_cuda::{Context, StageClock, Stream, Timing};

use crate::NttError;

/// A clock over the H step's phases, named by `&'static str`.
pub(crate) type PhaseClock = StageClock<&'static str>;

/// A clock started on `stream`, recording only when debug logging is on.
pub(crate) fn phase_clock(ctx: &Arc<Context>, stream: &Stream) -> Result<PhaseClock, NttError> {
    let timing = match tracing::enabled!(tracing::Level::DEBUG) {
        true => Timing::Enabled,
        false => Timing::Disabled,
    };
    Ok(StageClock::start(ctx, stream, timing)?)
}

/// Logs each phase's device time (the work on every marked stream must be done).
pub(crate) fn log_phases(clock: &PhaseClock, what: &'static str) -> Result<(), NttError> {
    if !clock.is_on() {
        return Ok(());
    }
    let line: String = clock
        .spans()?
        .iter()
        .map(|s| format!(" {}={:.1}", s.stage, s.ms))
        .collect();
    tracing::debug!("{what} device ms by phase:{line}");
    Ok(())
}
