//! Module load times: the cubin path (what a fresh machine pays) and, optionally, the PTX JIT.

use std::time::Instant;

use serde_json::json;
use zkpipe_cuda::{Context, Cubin, ImageBytes, KernelImage, Module, Prefer, Ptx};

use crate::{BenchResult, Report};

const FIELD: KernelImage = zkpipe_field::kernels::IMAGE;

/// ec-gpu-gen's own kernels (the baseline of later benchmarks).
pub const ECGPU: KernelImage = KernelImage {
    name: "ecgpu",
    ptx: Some(Ptx {
        arch: (7, 5),
        text: ImageBytes::Zstd(include_bytes!("../../ptx/ecgpu.compute_75.ptx.zst")),
    }),
    cubins: &[Cubin {
        arch: (9, 0),
        image: ImageBytes::Zstd(include_bytes!("../../ptx/ecgpu.sm_90.cubin.zst")),
    }],
};

pub fn run(ptx: bool) -> BenchResult<Report> {
    let t0 = Instant::now();
    let ctx = Context::new(0)?;
    let ctx_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut table = format!(
        "context creation: {ctx_ms:.1} ms\n| module | form | load ms |\n| --- | --- | --- |\n"
    );
    let mut rows = Vec::new();
    let images = [zkpipe_stream::kernels::IMAGE, FIELD, ECGPU];
    let mut forms = vec![Prefer::Cubin];
    if ptx {
        forms.push(Prefer::Ptx);
    }
    let mut total_cubin = 0.0;
    for prefer in forms {
        for image in &images {
            let m = Module::load_with(&ctx, image, prefer)?;
            let ms = m.load_ms();
            if prefer == Prefer::Cubin {
                total_cubin += ms;
            }
            table.push_str(&format!(
                "| {} | {} | {ms:.1} |\n",
                image.name,
                m.loaded_from()
            ));
            rows.push(
                json!({"module": image.name, "form": m.loaded_from().to_string(), "load_ms": ms}),
            );
        }
    }
    table.push_str(&format!("all modules from cubins: {total_cubin:.1} ms\n"));
    Ok(Report {
        table,
        json: json!({"context_ms": ctx_ms, "modules": rows, "cubin_total_ms": total_cubin}),
    })
}
