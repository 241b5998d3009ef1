//! The typed launch of the evaluation kernel (`kernels/r1cs.cu`): it checks every length
//! and holds the one unsafe launch.

use std::sync::Arc;

use zkpipe_cuda::{
    Context, DeviceBuffer, Function, ImageBytes, KernelImage, LaunchConfig, Module, Stream,
};
use zkpipe_field::Fr;
use zkpipe_msm::SplitScalars;

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

/// Threads a block of the row kernel: whole warps, as the kernel's warp-wide sums of long rows
/// need every lane of a warp present.
const BLOCK: u32 = 256;
const _: () = assert!(
    BLOCK.is_multiple_of(32),
    "the row kernel's blocks are whole warps"
);

/// Rows of one recorded matrix on the device: the whole matrix (resident), or a chunk of
/// consecutive rows (streamed).
#[derive(Debug)]
pub(crate) struct DeviceRows {
    /// Offsets of the rows' entries into the whole matrix's: one more than the rows.
    pub starts: DeviceBuffer<u32>,
    /// The entries from `entry_base` on: at least those of the rows.
    pub columns: DeviceBuffer<u32>,
    pub coefficients: DeviceBuffer<u32>,
}

/// Which rows a launch evaluates, and where their entries lie.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowRange {
    /// The first row, and the first value of the output written.
    pub first: usize,
    /// The rows, at most the buffers' starts less one.
    pub rows: usize,
    /// The whole matrix's index of the first entry held in the buffers.
    pub entry_base: usize,
    /// The entries the rows hold.
    pub entries: usize,
}

/// The witness z = (inputs, aux) on the device.
#[derive(Debug, Clone, Copy)]
pub enum DeviceZ<'a> {
    /// The inputs and the aux values in buffers of their own.
    Parts {
        inputs: &'a DeviceBuffer<Fr>,
        aux: &'a DeviceBuffer<Fr>,
    },
    /// z in the split form the MSMs upload anyway: no copy of z is made.
    Split(DeviceSplitZ<'a>),
}

impl DeviceZ<'_> {
    /// The number of inputs and of aux values it holds, for a recording with `inputs`
    /// inputs (a split z's partition into inputs and aux is the recording's).
    pub(crate) fn lengths(&self, inputs: usize) -> (usize, usize) {
        match self {
            DeviceZ::Parts { inputs, aux } => (inputs.len(), aux.len()),
            DeviceZ::Split(z) => (inputs.min(z.len), z.len.saturating_sub(inputs)),
        }
    }
}

/// The bitmap of z's tail (the variables neither 0 nor 1, whose values the split form keeps in
/// increasing order) with the tail's rank at each 32-variable word: z's value at any variable
/// is then found in the tail without a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailLookup {
    len: usize,
    bits: Vec<u32>,
    prefix: Vec<u32>,
    count: usize,
}

impl TailLookup {
    /// The lookup of `split`'s tail.
    pub fn of(split: &SplitScalars) -> Self {
        let words = split.len().div_ceil(32);
        let mut bits = vec![0u32; words];
        for &i in split.tail_index() {
            bits[i as usize / 32] |= 1 << (i % 32);
        }
        let prefix = bits
            .iter()
            .scan(0u32, |acc, w| {
                let before = *acc;
                *acc += w.count_ones();
                Some(before)
            })
            .collect();
        Self {
            len: split.len(),
            bits,
            prefix,
            count: split.tail().len(),
        }
    }

    /// Device bytes of its upload.
    pub fn device_bytes(&self) -> usize {
        4 * (self.bits.len() + self.prefix.len())
    }
}

/// A [`TailLookup`] on the device.
#[derive(Debug)]
pub struct DeviceTailLookup {
    len: usize,
    bits: DeviceBuffer<u32>,
    prefix: DeviceBuffer<u32>,
    count: usize,
}

impl DeviceTailLookup {
    /// Uploads `lookup` to `ctx`'s device (synchronously).
    pub fn upload(ctx: &Arc<Context>, lookup: &TailLookup) -> Result<Self, RecordingError> {
        Ok(Self {
            len: lookup.len,
            bits: DeviceBuffer::from_host(ctx, &lookup.bits)?,
            prefix: DeviceBuffer::from_host(ctx, &lookup.prefix)?,
            count: lookup.count,
        })
    }
}

/// The split form of z on the device: the bitmap of the variables equal to one, the tail
/// (zkpipe-msm's `SplitScalars`, uploaded) and its lookup. Made only from parts of one
/// split ([`DeviceSplitZ::new`] checks their lengths), so that every read stays in bounds.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSplitZ<'a> {
    len: usize,
    ones: &'a DeviceBuffer<u32>,
    lookup: &'a DeviceTailLookup,
    tail: &'a DeviceBuffer<Fr>,
}

impl<'a> DeviceSplitZ<'a> {
    /// z from the device copies of its ones bitmap, its tail's lookup and its tail values.
    pub fn new(
        ones: &'a DeviceBuffer<u32>,
        lookup: &'a DeviceTailLookup,
        tail: &'a DeviceBuffer<Fr>,
    ) -> Result<Self, RecordingError> {
        let words = lookup.len.div_ceil(32);
        same("bitmap words", words, ones.len())?;
        same("tail bitmap words", words, lookup.bits.len())?;
        same("tail ranks", words, lookup.prefix.len())?;
        same("tail values", lookup.count, tail.len())?;
        Ok(Self {
            len: lookup.len,
            ones,
            lookup,
            tail,
        })
    }

    /// Device bytes a z of `variables` needs besides its tail values: the ones bitmap, the
    /// tail's bitmap and its ranks.
    pub fn lookup_bytes(variables: usize) -> usize {
        3 * 4 * variables.div_ceil(32)
    }

    /// The number of variables.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when z has no variables.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The evaluation kernels of one device.
#[derive(Debug)]
pub(crate) struct RowKernel {
    rows: Function,
    rows_split: Function,
}

/// A count as the kernels' 32-bit parameter.
fn as_u32(what: &'static str, count: usize) -> Result<u32, RecordingError> {
    u32::try_from(count).map_err(|_| RecordingError::TooLarge {
        what,
        count,
        max: u32::MAX as usize,
    })
}

impl RowKernel {
    /// Loads the kernels on `ctx`'s device.
    pub fn load(ctx: &Arc<Context>) -> Result<Self, zkpipe_cuda::Error> {
        let module = Module::load(ctx, &IMAGE)?;
        Ok(Self {
            rows: module.function("r1cs_rows")?,
            rows_split: module.function("r1cs_rows_split")?,
        })
    }

    /// Enqueues out[r] = ⟨row r of the matrix, z⟩ for the rows `range` names, on `stream`.
    /// The rows' columns and coefficient indices must be in range for z and `table` (a
    /// recording read from a file is checked when read; [`crate::RecordingBuilder`] makes
    /// only such rows), and `range` must be the one `m` was filled for.
    pub(crate) fn launch(
        &self,
        stream: &Stream,
        m: &DeviceRows,
        range: RowRange,
        table: &DeviceBuffer<Fr>,
        z: DeviceZ<'_>,
        out: &mut DeviceBuffer<Fr>,
    ) -> Result<(), RecordingError> {
        if range.rows + 1 > m.starts.len() {
            same("row offsets", range.rows + 1, m.starts.len())?;
        }
        if range.entries > m.columns.len() || m.columns.len() != m.coefficients.len() {
            same("column entries", range.entries, m.columns.len())?;
            same("coefficient entries", m.columns.len(), m.coefficients.len())?;
        }
        if range.first + range.rows > out.len() {
            same("evaluations", range.first + range.rows, out.len())?;
        }
        let rows = as_u32("constraints", range.rows)?;
        let first = as_u32("constraints", range.first)?;
        let base = as_u32("entries", range.entry_base)?;
        if range.rows == 0 {
            return Ok(());
        }
        let cfg = LaunchConfig::for_elements(range.rows, BLOCK);
        match z {
            DeviceZ::Parts { inputs, aux } => {
                let n_inputs = as_u32("inputs", inputs.len())?;
                // SAFETY: thread i < rows reads starts[i] and starts[i + 1] (starts has at
                // least rows + 1 entries, checked above) and entries starts[i] - base up to
                // starts[i + 1] - base of columns and coefficients, which the recording's
                // checks keep within the range's entries, at most their length (checked
                // above); each column indexes inputs (below n_inputs, its length) or aux
                // (below the variables, which the caller matched to n_inputs + aux's length)
                // and each coefficient index the table (the same checks); it writes
                // out[first + i], below out's length (checked above). Every buffer outlives
                // the stream's work: the caller synchronizes before dropping them.
                unsafe {
                    self.rows.launch(
                        stream,
                        cfg,
                        &[
                            &m.starts,
                            &base,
                            &m.columns,
                            &m.coefficients,
                            table,
                            inputs,
                            &n_inputs,
                            aux,
                            &rows,
                            &first,
                            out,
                        ],
                    )
                }?;
            }
            DeviceZ::Split(z) => {
                // SAFETY: as above for the rows, the entries, the table and out; each column
                // is below the variables, z.len (the caller matched them), so its word is below
                // the ones bitmap's, the tail bitmap's and the ranks' length (DeviceSplitZ::new
                // checked all three), and a tail read's rank is below the tail bits, whose count
                // is the tail's length (the same check). The buffers outlive the stream's work
                // as above.
                unsafe {
                    self.rows_split.launch(
                        stream,
                        cfg,
                        &[
                            &m.starts,
                            &base,
                            &m.columns,
                            &m.coefficients,
                            table,
                            z.ones,
                            &z.lookup.bits,
                            &z.lookup.prefix,
                            z.tail,
                            &rows,
                            &first,
                            out,
                        ],
                    )
                }?;
            }
        }
        Ok(())
    }
}
