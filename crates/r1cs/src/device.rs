//! A recording on the device, and a, b, c evaluated there from a witness already uploaded, so
//! that they never exist on the host or cross PCIe.

use std::sync::Arc;

use zkpipe_cuda::{Context, DeviceBuffer, Stream};
use zkpipe_field::{cast, Fr};

use crate::error::same;
use crate::kernels::{DeviceRows, RowKernel};
pub use crate::kernels::{DeviceSplitZ, DeviceZ};
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

    /// Device bytes held.
    pub fn bytes(&self) -> usize {
        let rows: usize = self
            .rows
            .iter()
            .map(|r| 4 * (r.starts.len() + r.columns.len() + r.coefficients.len()))
            .sum();
        rows + 32 * self.table.len()
    }
}

/// Evaluates recordings on one device.
#[derive(Debug)]
pub struct CudaEvaluator {
    kernel: RowKernel,
}

impl CudaEvaluator {
    /// Loads the evaluation kernel on `ctx`'s device.
    pub fn new(ctx: &Arc<Context>) -> Result<Self, RecordingError> {
        Ok(Self {
            kernel: RowKernel::load(ctx)?,
        })
    }

    /// Enqueues one matrix's evaluation at z into `out` on `stream` (one value a
    /// constraint); z's lengths must be the recording's. The caller keeps every buffer
    /// until the stream is synchronized.
    pub fn evaluate_part(
        &self,
        stream: &Stream,
        rec: &DeviceRecording,
        part: Part,
        z: DeviceZ<'_>,
        out: &mut DeviceBuffer<Fr>,
    ) -> Result<(), RecordingError> {
        let shape = rec.shape;
        if let DeviceZ::Whole(whole) = z {
            same("variables", shape.variables(), whole.len())?;
        }
        let (inputs, aux) = z.lengths(shape.inputs);
        same("inputs", shape.inputs, inputs)?;
        same("aux variables", shape.aux, aux)?;
        same("evaluations", shape.constraints, out.len())?;
        let rows = match part {
            Part::A => &rec.rows[0],
            Part::B => &rec.rows[1],
            Part::C => &rec.rows[2],
        };
        self.kernel.launch(stream, rows, &rec.table, z, out)
    }

    /// Enqueues z (inputs then aux, `z.len()` variables) from its split form, so that the
    /// witness the MSMs take crosses PCIe once: the evaluation then reads
    /// [`DeviceZ::Whole`]`(z)`.
    pub fn expand_split(
        &self,
        stream: &Stream,
        split: DeviceSplitZ<'_>,
        z: &mut DeviceBuffer<Fr>,
    ) -> Result<(), RecordingError> {
        self.kernel.expand(stream, split, z)
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
