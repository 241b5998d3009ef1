//! ec-gpu-gen's G1 multiexp (bellperson's GPU path), for the benchmarks to compare with: built
//! only with the `ec-gpu-gen` feature, which zkpipe-bench turns on.
#![allow(unsafe_code)]

use std::sync::Arc;

use zkpipe_cuda::{Context, DeviceBuffer, Function, KernelImage, LaunchConfig, Module, Stream};

use crate::cuda::CudaError;
use crate::kernels::need;

/// ec-gpu-gen's G1 multiexp kernel (bellperson's GPU path), driven as ec-gpu-gen drives it, for
/// benchmarks to compare with. The image (`ptx/ecgpu.*`) is passed in.
#[derive(Debug)]
pub struct EcGpuGenMultiexp {
    kernel: Function,
    ctx: Arc<Context>,
    stream: Stream,
}

impl EcGpuGenMultiexp {
    /// Loads `blstrs__g1__G1Affine_multiexp` from `image`.
    pub fn load(ctx: &Arc<Context>, image: &KernelImage) -> Result<Self, CudaError> {
        let kernel = Module::load(ctx, image)?.function("blstrs__g1__G1Affine_multiexp")?;
        Ok(Self {
            kernel,
            ctx: Arc::clone(ctx),
            stream: Stream::new(ctx)?,
        })
    }

    /// sum exps\[i\] · bases\[i\] with `window` bits per window; `exps` are canonical integers.
    /// ec-gpu-gen's layout: 2 × (SMs × 128) threads, each summing one window of one group of
    /// points into its own buckets; the host adds the thread results and the windows.
    pub fn multiexp(
        &self,
        bases: &DeviceBuffer<zkpipe_field::G1Affine>,
        exps: &DeviceBuffer<zkpipe_field::Exponent>,
        window: u32,
    ) -> Result<blstrs::G1Projective, CudaError> {
        use group::Group;
        let n = exps.len();
        need("bases", bases.len(), n)?;
        let n32 = u32::try_from(n).map_err(|_| CudaError::TooLarge { n })?;
        let cores = self.ctx.info().sm_count * 128;
        let num_windows = 256u32.div_ceil(window);
        let num_groups = (2 * cores / num_windows).max(1);
        let threads = (num_windows * num_groups) as usize;
        let bucket_len = (1usize << window) - 1;
        let buckets =
            DeviceBuffer::<zkpipe_field::G1Projective>::alloc(&self.ctx, threads * bucket_len)?;
        let results = DeviceBuffer::<zkpipe_field::G1Projective>::alloc(&self.ctx, threads)?;
        let cfg = LaunchConfig::for_elements(threads, 128);
        // SAFETY: as ec-gpu-gen launches it: num_windows * num_groups threads, each using its
        // own bucket_len buckets and writing results[gid]; bases and exps hold n elements.
        unsafe {
            self.kernel.launch(
                &self.stream,
                cfg,
                &[
                    bases,
                    &buckets,
                    &results,
                    exps,
                    &n32,
                    &num_groups,
                    &num_windows,
                    &window,
                ],
            )
        }?;
        self.stream.synchronize()?;
        let res = results.to_vec()?;
        // ec-gpu-gen reads window bits from the most significant end of a 256-bit integer:
        // window 0 holds the top bits, so the host doubles before adding each window in turn.
        let mut acc = blstrs::G1Projective::identity();
        let mut bits = 0u32;
        for w in 0..num_windows as usize {
            let width = window.min(256 - bits);
            for _ in 0..width {
                acc = acc.double();
            }
            for g in 0..num_groups as usize {
                acc += blstrs::G1Projective::from(res[g * num_windows as usize + w]);
            }
            bits += width;
        }
        Ok(acc)
    }
}
