//! `--devices` (and `ZKPIPE_DEVICES`): the devices a command uses, by ordinal, UUID or PCI
//! bus id.

use crate::exit::Failure;

/// The help shared by the commands that take `--devices`.
pub const HELP: &str = "Devices to use: comma-separated ordinals (0,1), UUIDs (GPU-8a1c…, as `zkpipe info` shows them; a unique prefix of 8 or more hex digits will do) or PCI bus ids [default: every device]";

/// The ordinals `list` names (`None`: every device); a name that matches no device, or a
/// device named twice, fails with the devices the driver reports.
pub fn select(list: Option<&str>) -> Result<Option<Vec<usize>>, Failure> {
    let Some(list) = list else { return Ok(None) };
    let ordinals = zkpipe_cuda::select_devices(list).map_err(Failure::NoDevice)?;
    if ordinals.is_empty() {
        return Err(Failure::Usage(format!(
            "--devices {list:?} names no device"
        )));
    }
    Ok(Some(ordinals))
}
