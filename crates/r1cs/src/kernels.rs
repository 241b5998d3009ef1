//! The typed launch of the evaluation kernel (`kernels/r1cs.cu`): it checks every length
//! and holds the one unsafe launch.

use std::sync::Arc;

use zkpipe_cuda::{
    Context, DeviceBuffer, Function, ImageBytes, KernelImage, LaunchConfig, Module, Stream,
};
use zkpipe_field::Fr;

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
pub struct DeviceZ<'a> {
    pub inputs: &'a DeviceBuffer<Fr>,
    pub aux: &'a DeviceBuffer<Fr>,
}

/// The evaluation kernel of one device.
#[derive(Debug)]
pub(crate) struct RowKernel {
    rows: Function,
}

impl RowKernel {
    /// Loads the kernel on `ctx`'s device.
    pub fn load(ctx: &Arc<Context>) -> Result<Self, zkpipe_cuda::Error> {
        let module = Module::load(ctx, &IMAGE)?;
        Ok(Self {
            rows: module.function("r1cs_rows")?,
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
        let n_inputs = u32::try_from(z.inputs.len()).map_err(|_| RecordingError::TooLarge {
            what: "inputs",
            count: z.inputs.len(),
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
        // recording's checks keep within their length; each column indexes inputs or aux
        // within z's lengths and each coefficient index the table (the same checks, against the
        // shape the caller matched z to); it writes out[i], i < rows = out's length. Every
        // buffer outlives the stream's work: the caller synchronizes before dropping them.
        unsafe {
            self.rows.launch(
                stream,
                cfg,
                &[
                    &m.starts,
                    &m.columns,
                    &m.coefficients,
                    table,
                    z.inputs,
                    &n_inputs,
                    z.aux,
                    &rows_u32,
                    out,
                ],
            )
        }?;
        Ok(())
    }
}

/// An error naming both lengths unless they are equal.
fn same(what: &'static str, expected: usize, got: usize) -> Result<(), RecordingError> {
    if expected == got {
        return Ok(());
    }
    Err(RecordingError::WitnessShape {
        what,
        expected,
        got,
    })
}
