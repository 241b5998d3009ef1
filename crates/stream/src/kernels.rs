//! Typed launch of this crate's one kernel, `spin`, which keeps the GPU busy for a given number
//! of cycles: the benchmark uses it to check that copies overlap kernels.

use std::sync::Arc;

use zkpipe_cuda::{
    Context, DeviceBuffer, Function, ImageBytes, KernelImage, LaunchConfig, Module, Stream,
};

/// The compiled kernels of `kernels/stream.cu`.
pub const IMAGE: KernelImage = KernelImage {
    name: "stream",
    ptx: Some(zkpipe_cuda::Ptx {
        arch: (7, 5),
        text: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.compute_75.ptx.zst")),
    }),
    cubins: &[
        zkpipe_cuda::Cubin {
            arch: (7, 5),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.sm_75.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.sm_80.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 6),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.sm_86.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 9),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.sm_89.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (9, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.sm_90.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (10, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.sm_100.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (12, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/stream.sm_120.cubin.zst")),
        },
    ],
};

/// The busy kernel, with the one-word buffer it writes its marker to.
#[derive(Debug)]
pub struct Spin {
    f: Function,
    sink: DeviceBuffer<u32>,
}

impl Spin {
    /// Loads the kernel on `ctx`'s device.
    pub fn load(ctx: &Arc<Context>) -> zkpipe_cuda::Result<Self> {
        let f = Module::load(ctx, &IMAGE)?.function("spin")?;
        let sink = DeviceBuffer::alloc(ctx, 1)?;
        Ok(Self { f, sink })
    }

    /// Enqueues `blocks` blocks of 128 threads that each spin for `cycles` clock cycles.
    pub fn launch(&self, stream: &Stream, blocks: u32, cycles: u64) -> zkpipe_cuda::Result<()> {
        let cfg = LaunchConfig {
            grid: (blocks.max(1), 1, 1),
            block: (128, 1, 1),
            shared_bytes: 0,
        };
        // SAFETY: the kernel writes only sink[0], and `sink` has one element and lives as long
        // as `self`, which the caller keeps until the stream is synchronised.
        unsafe { self.f.launch(stream, cfg, &[&cycles, &self.sink]) }
    }
}
