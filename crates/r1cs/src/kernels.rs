//! The typed launch of the evaluation kernel (`kernels/r1cs.cu`): it checks every length
//! and holds the one unsafe launch.

use std::sync::Arc;

use zkpipe_cuda::{
    Context, DeviceBuffer, Function, ImageBytes, KernelImage, LaunchConfig, Module, Stream,
};
use zkpipe_field::Fr;

use crate::error::same;
use crate::RecordingError;

/// The compiled evaluation kernel.
pub const IMAGE: KernelImage = KernelImage {
    name: "r1cs",
    ptx: Some(zkpipe_cuda::Ptx {
        arch: (7, 5),
        text: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.compute_75.ptx.zst")),
    }),
    cubins: &[
        zkpipe_cuda::Cubin {
            arch: (7, 5),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.sm_75.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.sm_80.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 6),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.sm_86.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 9),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.sm_89.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (9, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.sm_90.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (10, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.sm_100.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (12, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/r1cs.sm_120.cubin.zst")),
        },
    ],
};

/// Threads a block of the row kernel.
const BLOCK: u32 = 256;

/// One recorded matrix on the device.
#[derive(Debug)]
pub(crate) struct DeviceRows {
    pub starts: DeviceBuffer<u32>,
    pub columns: DeviceBuffer<u32>,
    pub coefficients: DeviceBuffer<u32>,
}

/// The witness z = (inputs, aux) on the device.
#[derive(Debug, Clone, Copy)]
pub enum DeviceZ<'a> {
    /// The inputs and the aux values in buffers of their own.
    Parts {
        inputs: &'a DeviceBuffer<Fr>,
        aux: &'a DeviceBuffer<Fr>,
    },
    /// z in one buffer, inputs first ([`crate::CudaEvaluator::expand_split`] makes it).
    Whole(&'a DeviceBuffer<Fr>),
}

impl DeviceZ<'_> {
    /// The number of inputs and of aux values it holds, for a recording with `inputs`
    /// inputs (a whole z's split is the recording's).
    pub(crate) fn lengths(&self, inputs: usize) -> (usize, usize) {
        match self {
            DeviceZ::Parts { inputs, aux } => (inputs.len(), aux.len()),
            DeviceZ::Whole(z) => (inputs.min(z.len()), z.len().saturating_sub(inputs)),
        }
    }
}

/// The split form of z on the device: the bitmap of the variables equal to one, and the other
/// nonzero values with their indices (zkpipe-msm's `SplitScalars`, uploaded).
#[derive(Debug, Clone, Copy)]
pub struct DeviceSplitZ<'a> {
    /// One bit a variable, 32 a word.
    pub ones: &'a DeviceBuffer<u32>,
    pub tail_index: &'a DeviceBuffer<u32>,
    pub tail: &'a DeviceBuffer<Fr>,
}

/// The evaluation kernel of one device.
#[derive(Debug)]
pub(crate) struct RowKernel {
    rows: Function,
    z_ones: Function,
    z_tail: Function,
}

impl RowKernel {
    /// Loads the kernel on `ctx`'s device.
    pub fn load(ctx: &Arc<Context>) -> Result<Self, zkpipe_cuda::Error> {
        let module = Module::load(ctx, &IMAGE)?;
        Ok(Self {
            rows: module.function("r1cs_rows")?,
            z_ones: module.function("r1cs_z_ones")?,
            z_tail: module.function("r1cs_z_tail")?,
        })
    }

    /// Enqueues out[i] = ⟨row i of `m`, z⟩ for every row of `m` on `stream`. The rows'
    /// columns and coefficient indices must be in range for z and `table` (a recording read
    /// from a file is checked when read; [`crate::RecordingBuilder`] makes only such rows).
    pub(crate) fn launch(
        &self,
        stream: &Stream,
        m: &DeviceRows,
        table: &DeviceBuffer<Fr>,
        z: DeviceZ<'_>,
        out: &mut DeviceBuffer<Fr>,
    ) -> Result<(), RecordingError> {
        let rows = m.starts.len().saturating_sub(1);
        same("evaluations", rows, out.len())?;
        same("column entries", m.columns.len(), m.coefficients.len())?;
        // A whole z is passed as inputs covering every variable: each column reads z itself.
        let (inputs, aux) = match z {
            DeviceZ::Parts { inputs, aux } => (inputs, aux),
            DeviceZ::Whole(z) => (z, z),
        };
        let n_inputs = u32::try_from(inputs.len()).map_err(|_| RecordingError::TooLarge {
            what: "inputs",
            count: inputs.len(),
            max: u32::MAX as usize,
        })?;
        let rows_u32 = u32::try_from(rows).map_err(|_| RecordingError::TooLarge {
            what: "constraints",
            count: rows,
            max: u32::MAX as usize,
        })?;
        if rows == 0 {
            return Ok(());
        }
        let cfg = LaunchConfig::for_elements(rows, BLOCK);
        // SAFETY: thread i < rows reads starts[i] and starts[i + 1] (starts has rows + 1
        // entries) and entries starts[i]..starts[i + 1] of columns and coefficients, which the
        // recording's checks keep within their length; each column indexes inputs (below
        // n_inputs, its length) or aux (below the variables, which the caller matched to
        // n_inputs + aux's length) and each coefficient index the table (the same checks); it
        // writes out[i], i < rows = out's length. Every buffer outlives the stream's work: the
        // caller synchronizes before dropping them.
        unsafe {
            self.rows.launch(
                stream,
                cfg,
                &[
                    &m.starts,
                    &m.columns,
                    &m.coefficients,
                    table,
                    inputs,
                    &n_inputs,
                    aux,
                    &rows_u32,
                    out,
                ],
            )
        }?;
        Ok(())
    }
}

impl RowKernel {
    /// Enqueues z (`z.len()` variables) from its split form on `stream`.
    pub(crate) fn expand(
        &self,
        stream: &Stream,
        split: DeviceSplitZ<'_>,
        z: &mut DeviceBuffer<Fr>,
    ) -> Result<(), RecordingError> {
        let len = z.len();
        same("bitmap words", len.div_ceil(32), split.ones.len())?;
        same("tail values", split.tail_index.len(), split.tail.len())?;
        let big = |what, count| RecordingError::TooLarge {
            what,
            count,
            max: u32::MAX as usize,
        };
        let len_u32 = u32::try_from(len).map_err(|_| big("variables", len))?;
        let count = split.tail.len();
        let count_u32 = u32::try_from(count).map_err(|_| big("tail values", count))?;
        if len > 0 {
            let cfg = LaunchConfig::for_elements(len, BLOCK);
            // SAFETY: thread i < len reads word i / 32 of ones (which has ceil(len / 32)
            // words, checked above) and writes z[i], i < len = z's length.
            unsafe { self.z_ones.launch(stream, cfg, &[split.ones, &len_u32, z]) }?;
        }
        if count > 0 {
            let cfg = LaunchConfig::for_elements(count, BLOCK);
            // SAFETY: thread k < count reads index[k] and tail[k] (both of count entries,
            // checked above) and writes z[index[k]] only when index[k] < len, z's length.
            unsafe {
                self.z_tail.launch(
                    stream,
                    cfg,
                    &[split.tail_index, split.tail, &count_u32, &len_u32, z],
                )
            }?;
        }
        Ok(())
    }
}
