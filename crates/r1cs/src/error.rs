//! What can go wrong with a recording.

use std::path::PathBuf;

use crate::CircuitId;

/// Why a recording could not be made, read or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// A constraint used a variable the circuit had not allocated.
    #[error("a constraint uses {kind} variable {index}; the circuit allocated {allocated}")]
    UnknownVariable {
        kind: &'static str,
        index: usize,
        allocated: usize,
    },
    /// More than the format's 32-bit indices can hold.
    #[error("{what}: {count} is more than a recording holds ({max})")]
    TooLarge {
        what: &'static str,
        count: usize,
        max: usize,
    },
    /// A witness or an output whose length is not the recording's.
    #[error("{what}: the recording has {expected}, the witness {got}")]
    WitnessShape {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A recording of another circuit (or another version of it).
    #[error("the recording is of circuit {found}, not {expected}")]
    OtherCircuit {
        expected: CircuitId,
        found: CircuitId,
    },
    /// A circuit whose synthesis does not have the recording's shape.
    #[error(
        "the circuit does not match its recording ({id}): {what} {got}, the recording {expected}"
    )]
    ShapeMismatch {
        id: CircuitId,
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// Parts that do not make a recording ([`crate::Recording::from_parts`]).
    #[error("inconsistent recording: {what}")]
    Inconsistent { what: String },
    /// A file that cannot be read or written.
    #[error("recording {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file that is not a recording.
    #[error("recording {path}: not a zkpipe recording (its first bytes are not the magic)")]
    NotARecording { path: PathBuf },
    /// A recording in a format version this build does not read.
    #[error("recording {path}: format version {found}; this build reads version {supported}")]
    Version {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A file shorter than its header says.
    #[error("recording {path}: truncated: {needed} bytes needed, {got} present")]
    Truncated {
        path: PathBuf,
        needed: u64,
        got: u64,
    },
    /// A file whose checksum does not match its contents.
    #[error("recording {path}: checksum mismatch (the file is damaged)")]
    Checksum { path: PathBuf },
    /// The device failed (an allocation, a copy, the kernel's load or launch).
    #[error("device: {0}")]
    Device(#[from] zkpipe_cuda::Error),
    /// The recording's memory could not be page-locked.
    #[error("page-locking the recording: {0}")]
    Pin(zkpipe_pinned::Error),
    /// A file whose checksum holds but whose contents are inconsistent.
    #[error("recording {path}: corrupt: {what}")]
    Corrupt { path: PathBuf, what: String },
}

/// An error naming both lengths unless they are equal.
pub(crate) fn same(what: &'static str, expected: usize, got: usize) -> Result<(), RecordingError> {
    if expected == got {
        return Ok(());
    }
    Err(RecordingError::WitnessShape {
        what,
        expected,
        got,
    })
}
