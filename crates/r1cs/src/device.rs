//! A recording on the device, and a, b, c evaluated there from a witness already uploaded, so
//! that they never exist on the host or cross PCIe. The matrices are either resident
//! ([`DeviceRecording`]) or streamed a chunk of rows at a time from the host
//! ([`StreamedRecording`]) when the device cannot keep them.

use std::sync::Arc;

use zkpipe_cuda::{Context, DeviceBuffer, Stream};
use zkpipe_field::{cast, Fr};

use crate::error::same;
use crate::kernels::{DeviceRows, RowKernel, RowRange};
pub use crate::kernels::{DeviceSplitZ, DeviceTailLookup, DeviceZ, TailLookup};
use crate::{Matrix, Part, Recording, RecordingError, Shape};

/// A recording's matrices and coefficient table in device memory.
#[derive(Debug)]
pub struct DeviceRecording {
    shape: Shape,
    table: DeviceBuffer<Fr>,
    rows: [DeviceRows; 3],
}

impl DeviceRecording {
    /// Uploads `rec` to `ctx`'s device (synchronously).
    pub fn upload(ctx: &Arc<Context>, rec: &Recording) -> Result<Self, RecordingError> {
        let up = |m: &Matrix| -> Result<DeviceRows, zkpipe_cuda::Error> {
            let p = m.parts();
            Ok(DeviceRows {
                starts: DeviceBuffer::from_host(ctx, p.starts)?,
                columns: DeviceBuffer::from_host(ctx, p.columns)?,
                coefficients: DeviceBuffer::from_host(ctx, p.coefficients)?,
            })
        };
        let [a, b, c] = rec.matrices();
        Ok(Self {
            shape: rec.shape(),
            table: DeviceBuffer::from_host(ctx, cast::scalars_as_fr(rec.table()))?,
            rows: [up(a)?, up(b)?, up(c)?],
        })
    }

    /// The shape of the recording it holds.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Device bytes held: [`Recording::bytes`] of the recording it holds.
    pub fn bytes(&self) -> usize {
        let rows: usize = self
            .rows
            .iter()
            .map(|r| 4 * (r.starts.len() + r.columns.len() + r.coefficients.len()))
            .sum();
        rows + 32 * self.table.len()
    }
}

/// Device room for evaluating a recording that stays on the host: its coefficient table, and
/// one chunk of rows at a time, copied in before the chunk is evaluated.
#[derive(Debug)]
pub struct StreamedRecording {
    rec: Arc<Recording>,
    table: DeviceBuffer<Fr>,
    chunk: DeviceRows,
}

impl StreamedRecording {
    /// Room on `ctx`'s device for `rec` in chunks of up to `entries` entries (or the
    /// longest row's, when longer).
    pub fn new(
        ctx: &Arc<Context>,
        rec: Arc<Recording>,
        entries: usize,
    ) -> Result<Self, RecordingError> {
        let entries = Self::chunk_entries(&rec, entries);
        Ok(Self {
            table: DeviceBuffer::from_host(ctx, cast::scalars_as_fr(rec.table()))?,
            chunk: DeviceRows {
                starts: DeviceBuffer::alloc(ctx, entries + 1)?,
                columns: DeviceBuffer::alloc(ctx, entries)?,
                coefficients: DeviceBuffer::alloc(ctx, entries)?,
            },
            rec,
        })
    }

    /// The entries a chunk holds when `entries` are asked for.
    fn chunk_entries(rec: &Recording, entries: usize) -> usize {
        entries.max(rec.longest_row()).max(1)
    }

    /// Device bytes [`StreamedRecording::new`] takes for `rec` with `entries`.
    pub fn bytes_for(rec: &Recording, entries: usize) -> usize {
        let entries = Self::chunk_entries(rec, entries);
        4 * (3 * entries + 1) + 32 * rec.table().len()
    }

    /// The recording it evaluates.
    pub fn recording(&self) -> &Arc<Recording> {
        &self.rec
    }

    /// The next chunk of `m`'s rows from row `first` on: as many as its room holds.
    fn next_chunk(&self, m: &Matrix, first: usize) -> RowRange {
        let starts = m.parts().starts;
        let room = self.chunk.columns.len();
        let base = starts[first] as usize;
        // Rows whose entries all fit: the last row end at most room past the base, and no more
        // rows than the offsets' room.
        let limit = first + room.min(m.rows() - first);
        let end = first + starts[first + 1..=limit].partition_point(|&s| s as usize - base <= room);
        RowRange {
            first,
            rows: end - first,
            entry_base: base,
            entries: starts[end] as usize - base,
        }
    }
}

/// Evaluates recordings on one device.
#[derive(Debug)]
pub struct CudaEvaluator {
    kernel: RowKernel,
}

/// The lengths of z and of the output against the recording's shape: an output holds at
/// least one value a constraint.
fn check_lengths(
    shape: Shape,
    z: DeviceZ<'_>,
    out: &DeviceBuffer<Fr>,
) -> Result<(), RecordingError> {
    let (inputs, aux) = z.lengths(shape.inputs);
    if let DeviceZ::Split(split) = z {
        same("variables", shape.variables(), split.len())?;
    }
    same("inputs", shape.inputs, inputs)?;
    same("aux variables", shape.aux, aux)?;
    if out.len() < shape.constraints {
        same("evaluations", shape.constraints, out.len())?;
    }
    Ok(())
}

impl CudaEvaluator {
    /// Loads the evaluation kernels on `ctx`'s device.
    pub fn new(ctx: &Arc<Context>) -> Result<Self, RecordingError> {
        Ok(Self {
            kernel: RowKernel::load(ctx)?,
        })
    }

    /// Enqueues one matrix's evaluation at z into `out` on `stream`: one value a constraint,
    /// then zeros to `out`'s end (the H step's padding to its domain). z's lengths must be the
    /// recording's. The caller keeps every buffer until the stream is synchronized.
    pub fn evaluate_part(
        &self,
        stream: &Stream,
        rec: &DeviceRecording,
        part: Part,
        z: DeviceZ<'_>,
        out: &mut DeviceBuffer<Fr>,
    ) -> Result<(), RecordingError> {
        check_lengths(rec.shape, z, out)?;
        let rows = &rec.rows[part.index()];
        let range = RowRange {
            first: 0,
            rows: rec.shape.constraints,
            entry_base: 0,
            entries: rows.columns.len(),
        };
        self.kernel
            .launch(stream, rows, range, &rec.table, z, out)?;
        Ok(out.zero_from_async(rec.shape.constraints, stream)?)
    }

    /// As [`CudaEvaluator::evaluate_part`] for a recording on the host: each chunk of rows is
    /// copied into `room` and evaluated, all on `stream` (a chunk's copy waits for the launch
    /// before it that read the room). The copies run at the link's rate when the recording is
    /// page-locked ([`Recording::pin`]), through the driver's staging otherwise. The caller keeps
    /// `room` (which holds the recording) and `out` until the stream is synchronized.
    pub fn evaluate_part_streamed(
        &self,
        stream: &Stream,
        room: &mut StreamedRecording,
        part: Part,
        z: DeviceZ<'_>,
        out: &mut DeviceBuffer<Fr>,
    ) -> Result<(), RecordingError> {
        let rec = Arc::clone(&room.rec);
        check_lengths(rec.shape(), z, out)?;
        let m = rec.matrices()[part.index()];
        let p = m.parts();
        let mut first = 0;
        while first < m.rows() {
            let range = room.next_chunk(m, first);
            let entries = range.entry_base..range.entry_base + range.entries;
            let chunk = &mut room.chunk;
            // SAFETY: the host arrays belong to the recording, which never changes and which
            // `room` keeps alive (its Arc) until the caller synchronizes the stream, after
            // these copies complete.
            unsafe {
                let starts = &p.starts[first..=first + range.rows];
                chunk.starts.copy_from_host_async_at(0, starts, stream)?;
                let columns = &p.columns[entries.clone()];
                chunk.columns.copy_from_host_async_at(0, columns, stream)?;
                let coefficients = &p.coefficients[entries];
                chunk
                    .coefficients
                    .copy_from_host_async_at(0, coefficients, stream)?;
            }
            self.kernel
                .launch(stream, &room.chunk, range, &room.table, z, out)?;
            first += range.rows;
        }
        Ok(out.zero_from_async(m.rows(), stream)?)
    }

    /// Enqueues a, b and c at z into `out` on `stream` (see [`CudaEvaluator::evaluate_part`]).
    pub fn evaluate(
        &self,
        stream: &Stream,
        rec: &DeviceRecording,
        z: DeviceZ<'_>,
        [a, b, c]: [&mut DeviceBuffer<Fr>; 3],
    ) -> Result<(), RecordingError> {
        for (part, out) in [(Part::A, a), (Part::B, b), (Part::C, c)] {
            self.evaluate_part(stream, rec, part, z, out)?;
        }
        Ok(())
    }
}
