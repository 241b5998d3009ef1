//! `zkpipe info`: the driver version and every device, or a plain statement that there is none.

use serde::Serialize;
use zkpipe_cuda::{Context, Error, Module};

#[derive(Debug, Serialize)]
struct Device {
    ordinal: usize,
    name: String,
    compute_capability: String,
    sm_count: u32,
    total_memory_bytes: usize,
    free_memory_bytes: Option<usize>,
    pci_bus_id: String,
    uuid: Option<String>,
    /// The largest NTT domain (log2) whose full root tables the device keeps.
    ntt_full_tables_max_log_n: u32,
    /// The engine's kernel modules as loaded on the device.
    kernels: Vec<Kernel>,
}

/// One kernel module loaded on a device: the form chosen, or why none loaded.
#[derive(Debug, Serialize)]
struct Kernel {
    module: &'static str,
    /// "cubin sm_90", "PTX compute_75", …
    form: Option<String>,
    load_ms: Option<f64>,
    error: Option<String>,
}

/// Loads the engine's modules as the engine does (`ZKPIPE_FORCE_PTX=1` forces the PTX).
fn kernels(ctx: Result<std::sync::Arc<Context>, Error>) -> Vec<Kernel> {
    let images = [
        zkpipe_stream::kernels::IMAGE,
        zkpipe_ntt::kernels::IMAGE,
        zkpipe_msm::kernels::IMAGE,
    ];
    images
        .iter()
        .map(|image| {
            match ctx
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|c| Module::load(c, image))
            {
                Ok(m) => Kernel {
                    module: image.name,
                    form: Some(m.loaded_from().to_string()),
                    load_ms: Some(m.load_ms()),
                    error: None,
                },
                Err(e) => Kernel {
                    module: image.name,
                    form: None,
                    load_ms: None,
                    error: Some(e.to_string()),
                },
            }
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct Report {
    driver_version: Option<String>,
    devices: Vec<Device>,
    no_gpu_reason: Option<String>,
}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

fn collect() -> Result<Report, Error> {
    let version = match zkpipe_cuda::driver_version() {
        Ok((major, minor)) => format!("{major}.{minor}"),
        Err(e) if e.is_no_gpu() => {
            return Ok(Report {
                driver_version: None,
                devices: vec![],
                no_gpu_reason: Some(e.to_string()),
            })
        }
        Err(e) => return Err(e),
    };
    let mut devices = Vec::new();
    for info in zkpipe_cuda::devices()? {
        let ctx = Context::new(info.ordinal);
        let free = ctx
            .as_ref()
            .ok()
            .and_then(|c| c.mem_info().ok())
            .map(|m| m.free);
        devices.push(Device {
            ordinal: info.ordinal,
            name: info.name,
            compute_capability: format!(
                "{}.{}",
                info.compute_capability.0, info.compute_capability.1
            ),
            sm_count: info.sm_count,
            total_memory_bytes: info.total_memory,
            free_memory_bytes: free,
            pci_bus_id: info.pci_bus_id,
            uuid: info.uuid,
            ntt_full_tables_max_log_n: zkpipe_ntt::kernels::full_table_limit(info.total_memory),
            kernels: kernels(ctx),
        });
    }
    let no_gpu_reason = devices
        .is_empty()
        .then(|| "the driver sees no CUDA device".to_string());
    Ok(Report {
        driver_version: Some(version),
        devices,
        no_gpu_reason,
    })
}

/// Prints the report; a machine with no GPU is not an error.
pub fn run(output: crate::Output) -> Result<(), Box<dyn std::error::Error>> {
    let report = collect()?;
    if output == crate::Output::Json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    match &report.driver_version {
        Some(v) => println!("CUDA driver {v}"),
        None => println!("no CUDA driver"),
    }
    if let Some(reason) = &report.no_gpu_reason {
        println!("no GPU: {reason}");
        println!("GPU stages are unavailable here; their CPU implementations (e.g. the NTT's CpuNtt) still run.");
    }
    for d in &report.devices {
        let free = d
            .free_memory_bytes
            .map_or("?".to_string(), |f| format!("{:.1}", gib(f)));
        println!(
            "device {}: {} (sm_{}), {} SMs, {:.1} GiB total, {} GiB free, PCI {}, {}; NTT root tables in full up to 2^{}",
            d.ordinal,
            d.name,
            d.compute_capability.replace('.', ""),
            d.sm_count,
            gib(d.total_memory_bytes),
            free,
            d.pci_bus_id,
            d.uuid.as_deref().unwrap_or("no UUID"),
            d.ntt_full_tables_max_log_n
        );
        for k in &d.kernels {
            match (&k.form, k.load_ms, &k.error) {
                (Some(form), Some(ms), _) => {
                    println!("  kernels {}: {form} (loaded in {ms:.0} ms)", k.module)
                }
                (_, _, Some(e)) => println!("  kernels {}: not loaded: {e}", k.module),
                _ => {}
            }
        }
    }
    Ok(())
}
