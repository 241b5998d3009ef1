//! Devices and their primary contexts.

use std::sync::{Arc, Mutex};

use cuda_driver_sys::{CUcontext, CUdevice, CUdevice_attribute as Attr};

use crate::error::{Error, Result};
use crate::result::{ctx, device, driver, mem};

/// What the driver says about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device ordinal.
    pub ordinal: usize,
    /// The marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Compute capability, major and minor (9, 0 for Hopper).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// The most threads a multiprocessor holds at once.
    pub max_threads_per_sm: u32,
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// The PCI bus id.
    pub pci_bus_id: String,
    /// The UUID (`GPU-…`, as `nvidia-smi -L` shows it); `None` from a driver without
    /// `cuDeviceGetUuid`.
    pub uuid: Option<String>,
}

/// The driver's CUDA version as (major, minor), e.g. (13, 0).
pub fn driver_version() -> Result<(u32, u32)> {
    let v = driver::version()?;
    Ok(((v / 1000) as u32, ((v % 1000) / 10) as u32))
}

/// The number of devices; an error when the driver is missing.
pub fn device_count() -> Result<usize> {
    match device::count() {
        Err(e) if e.code() == Some(crate::error::CUDA_ERROR_NO_DEVICE) => Ok(0),
        other => other,
    }
}

/// Describes device `ordinal`.
pub fn device_info(ordinal: usize) -> Result<DeviceInfo> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(Error::DeviceOutOfRange { ordinal, count });
    }
    let dev = device::get(ordinal)?;
    let attr = |a| device::attribute(dev, a).map(|v| v.max(0) as u32);
    Ok(DeviceInfo {
        ordinal,
        name: device::name(dev)?,
        compute_capability: (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        total_memory: device::total_mem(dev)?,
        pci_bus_id: device::pci_bus_id(dev)?,
        uuid: device::uuid(dev).ok(),
    })
}

/// Every device the driver sees.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    (0..device_count()?).map(device_info).collect()
}

/// The devices a list names, in its order: comma-separated ordinals (`0,1`), UUIDs
/// (`GPU-8a1c…`, the `GPU-` optional, any unique prefix of at least 8 hex digits) or PCI bus
/// ids (`0000:1b:00.0`, case ignored), as `--devices` and `ZKPIPE_DEVICES` take them. An error
/// names an entry that matches no device (or more than one), or a device listed twice.
pub fn select_devices(list: &str) -> Result<Vec<usize>> {
    select_from(&devices()?, list)
}

fn select_from(all: &[DeviceInfo], list: &str) -> Result<Vec<usize>> {
    let mut chosen: Vec<(usize, String)> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let ordinal = match name.parse::<usize>() {
            Ok(o) if o < all.len() => o,
            Ok(o) => {
                return Err(Error::DeviceOutOfRange {
                    ordinal: o,
                    count: all.len(),
                })
            }
            Err(_) => match_named(all, name)?,
        };
        if let Some((_, first)) = chosen.iter().find(|(o, _)| *o == ordinal) {
            return Err(Error::DeviceListedTwice {
                ordinal,
                first: first.clone(),
                second: name.to_string(),
            });
        }
        chosen.push((ordinal, name.to_string()));
    }
    Ok(chosen.into_iter().map(|(o, _)| o).collect())
}

/// The one device whose UUID (by a prefix of 8 hex digits or more) or PCI bus id is `name`.
fn match_named(all: &[DeviceInfo], name: &str) -> Result<usize> {
    let wanted = name.to_ascii_lowercase();
    let bare = |s: &str| s.trim_start_matches("gpu-").replace('-', "");
    let prefix = bare(&wanted);
    let matches: Vec<usize> = all
        .iter()
        .filter(|d| {
            let by_pci = d.pci_bus_id.to_ascii_lowercase() == wanted;
            let by_uuid = d.uuid.as_deref().is_some_and(|u| {
                prefix.len() >= 8 && bare(&u.to_ascii_lowercase()).starts_with(&prefix)
            });
            by_pci || by_uuid
        })
        .map(|d| d.ordinal)
        .collect();
    match matches[..] {
        [one] => Ok(one),
        _ => Err(Error::NoSuchDevice {
            name: name.to_string(),
            known: known_devices(all),
        }),
    }
}

fn known_devices(all: &[DeviceInfo]) -> String {
    if all.is_empty() {
        return "no devices".to_string();
    }
    all.iter()
        .map(|d| {
            format!(
                "{} ({}, PCI {})",
                d.ordinal,
                d.uuid.as_deref().unwrap_or("no UUID"),
                d.pci_bus_id
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Free and total device memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// Bytes `cuMemAlloc` could still get.
    pub free: usize,
    /// Bytes on the device.
    pub total: usize,
}

/// A device's primary context, retained for as long as this value lives.
///
/// Every RAII type of zkpipe holds an `Arc<Context>`, so the context outlives what uses it.
/// Errors that happen in `Drop` (which cannot return them) are recorded here and returned by
/// the next [`Context::check_err`].
#[derive(Debug)]
pub struct Context {
    dev: CUdevice,
    raw: CUcontext,
    info: DeviceInfo,
    deferred: Mutex<Option<Error>>,
}

// SAFETY: a CUDA context handle may be used from any thread (the driver API is thread-safe);
// the deferred-error slot is behind a mutex.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    /// Retains device `ordinal`'s primary context and makes it current on this thread.
    pub fn new(ordinal: usize) -> Result<Arc<Self>> {
        let count = device_count()?;
        if count == 0 {
            return Err(Error::NoDevice { count });
        }
        // The calls that make the context count as this device's (a fault may target it).
        #[cfg(feature = "fault-injection")]
        crate::fault::bound(ordinal);
        let info = device_info(ordinal)?;
        let dev = device::get(ordinal)?;
        let raw = ctx::primary_retain(dev)?;
        let ctx = Arc::new(Self {
            dev,
            raw,
            info,
            deferred: Mutex::new(None),
        });
        ctx.bind()?;
        Ok(ctx)
    }

    /// Makes this context current on the calling thread. Every method that calls the driver
    /// does this first, so threads need not.
    pub fn bind(&self) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        crate::fault::bound(self.info.ordinal);
        // SAFETY: `raw` is retained for as long as `self` lives.
        unsafe { ctx::set_current(self.raw) }
    }

    /// The device this context belongs to.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.info.ordinal
    }

    /// The raw device handle.
    pub fn device(&self) -> CUdevice {
        self.dev
    }

    /// Free and total device memory, as `cuMemGetInfo` reports it.
    pub fn mem_info(&self) -> Result<MemInfo> {
        self.bind()?;
        let (free, total) = mem::info()?;
        Ok(MemInfo { free, total })
    }

    /// Returns unused memory of the stream-ordered pool to the device, keeping at most `keep`
    /// bytes, so that [`Context::mem_info`] tells what `cuMemAlloc` could get.
    pub fn trim_async_pool(&self, keep: usize) -> Result<()> {
        self.bind()?;
        mem::trim_default_pool(self.dev, keep)
    }

    /// Lets the stream-ordered pool keep up to `bytes` of freed memory across synchronisations
    /// (the driver's default, 0, returns it at every synchronisation). Keeping it makes
    /// `cuMemAllocAsync` cheap, at the price of free-memory readings that lie until
    /// [`Context::trim_async_pool`].
    pub fn set_async_pool_release_threshold(&self, bytes: u64) -> Result<()> {
        self.bind()?;
        mem::set_default_pool_release_threshold(self.dev, bytes)
    }

    /// Waits for all work on the device. Errors recorded by `Drop`s are not returned here (they
    /// may be another job's): [`Context::check_err`] returns them.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        ctx::synchronize()
    }

    /// Records an error that happened where it could not be returned (in `Drop`): logged now,
    /// and kept for [`Context::check_err`]. A fault that breaks the context fails the next
    /// driver call by itself.
    pub fn record_err(&self, e: Error) {
        tracing::warn!(error = %e, "deferred CUDA error");
        if let Ok(mut slot) = self.deferred.lock() {
            slot.get_or_insert(e);
        }
    }

    /// Returns (and clears) the first error recorded by [`Context::record_err`].
    pub fn check_err(&self) -> Result<()> {
        match self.deferred.lock().map(|mut s| s.take()) {
            Ok(Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// The raw context handle.
    pub fn raw(&self) -> CUcontext {
        self.raw
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: pairs with the retain in `new`.
        if let Err(e) = unsafe { ctx::primary_release(self.dev) } {
            tracing::warn!(error = %e, "releasing the primary context failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(ordinal: usize, uuid: &str, pci: &str) -> DeviceInfo {
        DeviceInfo {
            ordinal,
            name: "test".into(),
            compute_capability: (9, 0),
            sm_count: 1,
            max_threads_per_sm: 1,
            total_memory: 1,
            pci_bus_id: pci.into(),
            uuid: Some(uuid.into()),
        }
    }

    fn two() -> Vec<DeviceInfo> {
        vec![
            fake(
                0,
                "GPU-8a1c2d3e-0000-1111-2222-333344445555",
                "00000000:1B:00.0",
            ),
            fake(
                1,
                "GPU-8a1c9999-aaaa-bbbb-cccc-ddddeeeeffff",
                "00000000:2C:00.0",
            ),
        ]
    }

    #[test]
    fn devices_are_named_by_ordinal_uuid_or_pci_bus_id() {
        let all = two();
        assert_eq!(select_from(&all, "1,0").unwrap(), vec![1, 0]);
        assert_eq!(select_from(&all, " 1 ").unwrap(), vec![1]);
        assert_eq!(select_from(&all, "GPU-8a1c9999").unwrap(), vec![1]);
        assert_eq!(select_from(&all, "8A1C2D3E-0000").unwrap(), vec![0]);
        assert_eq!(select_from(&all, "00000000:2c:00.0,0").unwrap(), vec![1, 0]);
        assert_eq!(select_from(&all, "").unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn unknown_ambiguous_or_repeated_devices_are_errors() {
        let all = two();
        let unknown = select_from(&all, "GPU-ffffffff").unwrap_err();
        assert!(matches!(unknown, Error::NoSuchDevice { .. }), "{unknown}");
        assert!(
            unknown.to_string().contains("PCI 00000000:1B:00.0"),
            "{unknown}"
        );
        // A prefix both UUIDs share, and one too short to mean anything.
        assert!(matches!(
            select_from(&all, "GPU-8a1c"),
            Err(Error::NoSuchDevice { .. })
        ));
        assert!(matches!(
            select_from(&all, "2"),
            Err(Error::DeviceOutOfRange {
                ordinal: 2,
                count: 2
            })
        ));
        let twice = select_from(&all, "0,GPU-8a1c2d3e").unwrap_err();
        assert!(
            matches!(twice, Error::DeviceListedTwice { ordinal: 0, .. }),
            "{twice}"
        );
    }
}
