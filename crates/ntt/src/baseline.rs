//! ec-gpu-gen's radix FFT (bellperson's GPU path), for the benchmarks to compare with: built
//! only with the `ec-gpu-gen` feature, which zkpipe-bench turns on.

use std::sync::Arc;

use zkpipe_cuda::{Context, DeviceBuffer, Function, KernelImage, LaunchConfig, Module, Stream};
use zkpipe_field::Fr;

use crate::NttError;

/// ec-gpu-gen's largest radix exponent (its `MAX_LOG2_RADIX`).
const EC_GPU_GEN_MAX_DEG: u32 = 8;

/// ec-gpu-gen's radix FFT kernel (bellperson's GPU path), driven as ec-gpu-gen drives it, for
/// benchmarks to compare with. The image (ec-gpu-gen's kernels, `ptx/ecgpu.*`) is passed in.
#[derive(Debug)]
pub struct EcGpuGenFft {
    radix: Function,
    ctx: Arc<Context>,
}

impl EcGpuGenFft {
    /// Loads `blstrs__scalar__Scalar_radix_fft` from `image`.
    pub fn load(ctx: &Arc<Context>, image: &KernelImage) -> Result<Self, NttError> {
        let radix = Module::load(ctx, image)?.function("blstrs__scalar__Scalar_radix_fft")?;
        radix.set_max_dynamic_shared(
            (1u32 << EC_GPU_GEN_MAX_DEG) * std::mem::size_of::<Fr>() as u32,
        )?;
        Ok(Self {
            radix,
            ctx: Arc::clone(ctx),
        })
    }

    /// Enqueues a forward transform of `data` (natural order) as ec-gpu-gen's `radix_fft`
    /// does; the result ends in `data` (the buffers may be swapped).
    pub fn forward(
        &self,
        s: &Stream,
        data: &mut DeviceBuffer<Fr>,
        scratch: &mut DeviceBuffer<Fr>,
    ) -> Result<(), NttError> {
        use blstrs::Scalar;
        use ff::Field;
        let d = crate::Domain::for_len(data.len())?;
        if scratch.len() != data.len() {
            return Err(NttError::BatchLengths {
                first: data.len(),
                other: scratch.len(),
            });
        }
        let log_n = d.log_n;
        let n = 1u32 << log_n;
        let max_deg = EC_GPU_GEN_MAX_DEG.min(log_n);
        let twiddle = d.omega.pow_vartime([u64::from(n >> max_deg)]);
        let mut pq = vec![Scalar::ONE; 1 << max_deg >> 1];
        for i in 1..pq.len() {
            pq[i] = pq[i - 1] * twiddle;
        }
        let mut omegas = vec![d.omega; 32];
        for i in 1..32 {
            omegas[i] = omegas[i - 1].square();
        }
        let pq = DeviceBuffer::from_host(&self.ctx, zkpipe_field::cast::scalars_as_fr(&pq))?;
        let omegas =
            DeviceBuffer::from_host(&self.ctx, zkpipe_field::cast::scalars_as_fr(&omegas))?;
        let mut lgp = 0u32;
        while lgp < log_n {
            let deg = max_deg.min(log_n - lgp);
            let cfg = LaunchConfig {
                grid: (n >> deg, 1, 1),
                block: (1 << (deg - 1).min(7), 1, 1),
                shared_bytes: (1u32 << deg) * std::mem::size_of::<Fr>() as u32,
            };
            let unused_local = 0u64;
            // SAFETY: as ec-gpu-gen launches it: n >> deg groups over buffers of n elements,
            // pq of 2^(max_deg - 1) and omegas of 32 elements, 2^deg elements of shared memory;
            // the OpenCL local-buffer parameter is unused under CUDA. The tables live until
            // the stream is synchronised below.
            unsafe {
                self.radix.launch(
                    s,
                    cfg,
                    &[
                        &*data,
                        &*scratch,
                        &pq,
                        &omegas,
                        &unused_local,
                        &n,
                        &lgp,
                        &deg,
                        &max_deg,
                    ],
                )
            }?;
            std::mem::swap(data, scratch);
            lgp += deg;
        }
        s.synchronize()?;
        Ok(())
    }
}
