//! The process's resident memory as Linux's /proc reports it: now, and its peak since the
//! last reset, so that a stage's own peak can be measured in a process that did more before.

use std::io;

/// Resident bytes now and at the peak since the last [`reset_peak`].
#[derive(Debug, Clone, Copy)]
pub struct Resident {
    pub now: u64,
    pub peak: u64,
}

/// Sets the peak to the resident bytes now (writing 5 to /proc/self/clear_refs).
pub fn reset_peak() -> io::Result<()> {
    std::fs::write("/proc/self/clear_refs", "5")
}

/// The resident bytes now and at the peak (VmRSS and VmHWM of /proc/self/status).
pub fn resident() -> io::Result<Resident> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> io::Result<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("/proc/self/status has no {name} in kB"),
                )
            })
    };
    Ok(Resident {
        now: field("VmRSS:")?,
        peak: field("VmHWM:")?,
    })
}

/// The peak resident bytes `f` added above those resident when it began.
pub fn peak_added<T>(f: impl FnOnce() -> T) -> io::Result<(u64, T)> {
    reset_peak()?;
    let before = resident()?.now;
    let out = f();
    Ok((resident()?.peak.saturating_sub(before), out))
}
