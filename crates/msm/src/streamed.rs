//! The streamed MSM: bases and scalars stay in pinned host memory and go to the device in
//! chunks. Two point (and scalar) buffers alternate, so the copy of chunk k + 1 runs while the
//! GPU works on chunk k. Dense scalars add every chunk into the same bucket sums on the
//! device, reduced once at the end; 0/1 scalars leave each chunk's partial sums in one of two
//! result buffers that a third stream reads back behind an event, while the GPU goes on. The
//! host enqueues everything and waits once, at the end.

use std::time::Duration;

use blstrs::Scalar;
use group::Group;
use rayon::prelude::*;
use zkpipe_cuda::{DeviceBuffer, Event, StageClock, Stream};
use zkpipe_field::{cast, Fr};
use zkpipe_pinned::PinnedBuffer;
use zkpipe_stream::{copy_scope, Pinned, PinnedMut, VramBudget};

use crate::cuda::{CudaError, CudaMsm, GpuCurve, ScalarKind};
use crate::kernels::BucketWrite;
use crate::pippenger::{combine, BucketRun, Digits, Workspace};
use crate::MsmError;

/// How a streamed MSM runs.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Points per chunk (default 2^22: 384 MiB of G1 points and 128 MiB of scalars per buffer).
    pub chunk: usize,
    /// What the caller knows about the scalars. `Auto` checks them on the host (in parallel,
    /// stopping at the first scalar other than 0 or 1) before the first copy.
    pub kind: ScalarKind,
    /// Device memory admission: the call's bytes ([`CudaMsm::streamed_bytes`]) are taken from
    /// this budget for its duration. A chunk too large for the whole budget is an error.
    pub budget: Option<VramBudget>,
    /// How long to wait for the budget (`None`: as long as it takes).
    pub budget_wait: Option<Duration>,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            chunk: 1 << 22,
            kind: ScalarKind::Auto,
            budget: None,
            budget_wait: None,
        }
    }
}

/// Chunk boundaries: a first chunk of a quarter, whose copy is the only one with nothing to
/// hide behind, then full chunks, the last one shorter. A chunk's points take about a quarter
/// of the time to copy that a G1 chunk takes to compute, so the copy of a full second chunk
/// still fits behind the short first one (the figures with and without it are in
/// benches/NOTES.md).
pub(crate) fn schedule(n: usize, chunk: usize) -> Vec<(usize, usize)> {
    let chunk = chunk.max(1);
    let first = (chunk / 4).max(1);
    let mut out = Vec::new();
    let mut lo = 0;
    while lo < n {
        let len = if lo == 0 { first } else { chunk };
        let hi = (lo + len).min(n);
        out.push((lo, hi));
        lo = hi;
    }
    out
}

/// Partial sums per chunk of the boolean kernel: one per thread.
fn boolean_threads(msm: &CudaMsm) -> usize {
    msm.context().info().sm_count.max(1) as usize * 256
}

fn is_boolean(scalars: &[Fr]) -> bool {
    let one = cast::scalars_as_fr(&[Scalar::from(1u64)])[0];
    let zero = cast::scalars_as_fr(&[Scalar::from(0u64)])[0];
    let (one, zero) = (bytemuck::bytes_of(&one), bytemuck::bytes_of(&zero));
    scalars.par_iter().all(|s| {
        let b = bytemuck::bytes_of(s);
        b == one || b == zero
    })
}

/// The device side of one streamed call: alternating buffers and the three streams.
struct Slots<C: GpuCurve> {
    points: [DeviceBuffer<C::GpuAffine>; 2],
    scalars: [DeviceBuffer<Fr>; 2],
    results: [DeviceBuffer<C::Jacobian>; 2],
    copy: Stream,
    back: Stream,
}

impl CudaMsm {
    /// Device bytes of the work buffers of a resident MSM of `n` points (bases and scalars
    /// not counted), the most it allocates during a call.
    pub fn resident_bytes<C: GpuCurve>(&self, n: usize) -> usize {
        let jac = std::mem::size_of::<C::Jacobian>();
        let plan = self.plan(n.max(1));
        let dense = plan.workspace_bytes(jac) + plan.out_len() * jac;
        dense.max(boolean_threads(self) * jac + 4)
    }

    /// Device bytes a streamed MSM of `n` points in chunks of `chunk` takes, for scalars of
    /// `kind` (with [`ScalarKind::Auto`], the larger of the two ways).
    pub fn streamed_bytes<C: GpuCurve>(&self, n: usize, chunk: usize, kind: ScalarKind) -> usize {
        let chunk = chunk.min(n).max(1);
        let per_point = std::mem::size_of::<C::GpuAffine>() + std::mem::size_of::<Fr>();
        let jac = std::mem::size_of::<C::Jacobian>();
        let boolean = 2 * boolean_threads(self) * jac;
        let plan = self.plan(chunk);
        let dense = plan.workspace_bytes(jac) + plan.out_len() * jac;
        let work = match kind {
            ScalarKind::Boolean => boolean,
            ScalarKind::Dense => dense,
            ScalarKind::Auto => boolean.max(dense),
        };
        2 * chunk * per_point + work
    }

    /// sum scalars\[i\] · bases\[i\] with both in pinned host memory, streamed in chunks.
    ///
    /// Gives the same point as [`CudaMsm::msm`] on the same inputs. Scalars are in Montgomery
    /// form, as blstrs holds them ([`zkpipe_field::cast::scalars_as_fr`]).
    pub fn msm_streamed<C: GpuCurve>(
        &self,
        bases: Pinned<'_, C::GpuAffine>,
        scalars: Pinned<'_, Fr>,
        opts: &StreamOptions,
    ) -> Result<C::Projective, CudaError> {
        let n = bases.len();
        if scalars.len() != n {
            let e = MsmError::LengthMismatch {
                bases: n,
                scalars: scalars.len(),
            };
            return Err(e.into());
        }
        if opts.chunk == 0 {
            return Err(CudaError::Chunk { chunk: 0 });
        }
        if n == 0 {
            return Ok(C::Projective::identity());
        }
        if n >= 1 << 31 {
            return Err(CudaError::TooLarge { n });
        }
        let kind = match opts.kind {
            ScalarKind::Auto if is_boolean(scalars.as_slice()) => ScalarKind::Boolean,
            ScalarKind::Auto => ScalarKind::Dense,
            known => known,
        };
        let bytes = self.streamed_bytes::<C>(n, opts.chunk, kind);
        let _grant = match &opts.budget {
            Some(b) => Some(b.acquire(bytes, opts.budget_wait)?),
            None => None,
        };
        let chunk = opts.chunk.min(n);
        match kind {
            ScalarKind::Boolean => self.streamed_boolean::<C>(bases, scalars, chunk),
            ScalarKind::Dense | ScalarKind::Auto => self.streamed_dense::<C>(bases, scalars, chunk),
        }
    }

    fn slots<C: GpuCurve>(&self, chunk: usize, out: usize) -> Result<Slots<C>, CudaError> {
        let ctx = self.context();
        let two = |len| -> Result<[DeviceBuffer<_>; 2], CudaError> {
            Ok([
                DeviceBuffer::alloc(ctx, len)?,
                DeviceBuffer::alloc(ctx, len)?,
            ])
        };
        Ok(Slots {
            points: [
                DeviceBuffer::alloc(ctx, chunk)?,
                DeviceBuffer::alloc(ctx, chunk)?,
            ],
            scalars: two(chunk)?,
            results: [
                DeviceBuffer::alloc(ctx, out)?,
                DeviceBuffer::alloc(ctx, out)?,
            ],
            copy: Stream::new(ctx)?,
            back: Stream::new(ctx)?,
        })
    }

    /// Runs the chunk loop: `work(points, scalars, len, result, points_ready)` enqueues one
    /// chunk's kernels on the compute stream, which has waited for the chunk's scalars; the
    /// kernels that read points must wait for `points_ready`. Returns every chunk's results,
    /// `out` entries each, in chunk order, read back behind events through two alternating
    /// result buffers; `None` when `out` = 0 (no per-chunk results: the work accumulates on
    /// the device, and no pinned memory is allocated for nothing).
    fn stream_chunks<C, W>(
        &self,
        bases: Pinned<'_, C::GpuAffine>,
        scalars: Pinned<'_, Fr>,
        chunk: usize,
        out: usize,
        mut work: W,
    ) -> Result<Option<PinnedBuffer<C::Jacobian>>, CudaError>
    where
        C: GpuCurve,
        W: FnMut(
            &DeviceBuffer<C::GpuAffine>,
            &DeviceBuffer<Fr>,
            usize,
            &mut DeviceBuffer<C::Jacobian>,
            &Event,
        ) -> Result<(), CudaError>,
    {
        let n = bases.len();
        let plan = schedule(n, chunk);
        let chunks = plan.len();
        let t = std::time::Instant::now();
        let mut sl = self.slots::<C>(chunk, out)?;
        let mut host = match out {
            0 => None,
            _ => Some(PinnedBuffer::<C::Jacobian>::new(
                self.context(),
                chunks * out,
            )?),
        };
        let alloc_ms = t.elapsed().as_secs_f64() * 1e3;
        let compute = self.stream();
        let ran = copy_scope(|sc| -> Result<(), CudaError> {
            let mut dst = host
                .as_mut()
                .map(|h| PinnedMut::new(h).chunks(out).into_iter());
            let mut used: [Option<Event>; 2] = [None, None];
            let mut read: [Option<Event>; 2] = [None, None];
            for (k, &(lo, hi)) in plan.iter().enumerate() {
                let slot = k % 2;
                // The copy into a slot waits for the kernels that read it two chunks ago.
                if let Some(e) = &used[slot] {
                    sl.copy.wait(e)?;
                }
                let range = |what: &'static str| CudaError::BufferTooSmall {
                    what,
                    len: n,
                    needed: hi,
                };
                let b = bases.range(lo..hi).ok_or_else(|| range("bases"))?;
                let s = scalars.range(lo..hi).ok_or_else(|| range("scalars"))?;
                // Scalars first: the digits and the sort of a chunk need only them, and
                // run while its points (three times the bytes in G1) are still copying.
                sc.upload(&sl.copy, s, &mut sl.scalars[slot], 0)?;
                compute.wait(&sl.copy.record()?)?;
                sc.upload(&sl.copy, b, &mut sl.points[slot], 0)?;
                let points = sl.copy.record()?;
                // The kernels writing a result slot wait for its previous read-back.
                if let Some(e) = &read[slot] {
                    compute.wait(e)?;
                }
                work(
                    &sl.points[slot],
                    &sl.scalars[slot],
                    hi - lo,
                    &mut sl.results[slot],
                    &points,
                )?;
                let done = compute.record()?;
                if out > 0 {
                    sl.back.wait(&done)?;
                    let host_part = dst
                        .as_mut()
                        .and_then(|d| d.next())
                        .ok_or(CudaError::Chunk { chunk })?;
                    sc.download(&sl.back, &sl.results[slot], 0, host_part)?;
                    read[slot] = Some(sl.back.record()?);
                }
                used[slot] = Some(done);
            }
            Ok(())
        });
        // Kernels may still run after an error; the buffers must outlive them.
        let settled = compute.synchronize();
        ran??;
        settled?;
        tracing::debug!(
            n,
            chunks,
            alloc_ms,
            loop_ms = t.elapsed().as_secs_f64() * 1e3 - alloc_ms,
            "msm.streamed chunks"
        );
        Ok(host)
    }

    fn streamed_dense<C: GpuCurve>(
        &self,
        bases: Pinned<'_, C::GpuAffine>,
        scalars: Pinned<'_, Fr>,
        chunk: usize,
    ) -> Result<C::Projective, CudaError> {
        // Every chunk adds into the same bucket sums, so the window reduction and the one
        // read-back happen once, after the last chunk (a reduction per chunk cost more than
        // the copies hide: benches/NOTES.md).
        let plan = self.plan(chunk);
        let (k, s) = (self.kernels(), self.stream());
        // The workspace is allocated in the first chunk's call, after that chunk's copies are
        // enqueued, so that the allocation (about a millisecond) runs during the first copy.
        // It is declared out here so that it outlives the kernels, which stream_chunks waits
        // for even when it fails.
        let mut slot: Option<Workspace<C::Jacobian>> = None;
        let mut ws_ms = 0.0;
        self.stream_chunks::<C, _>(bases, scalars, chunk, 0, |p, x, len, _, ready| {
            let (ws, write) = match &mut slot {
                Some(ws) => (ws, BucketWrite::Add),
                None => {
                    let t = std::time::Instant::now();
                    let ws = slot.insert(Workspace::alloc(self.context(), plan)?);
                    ws_ms = t.elapsed().as_secs_f64() * 1e3;
                    (ws, BucketWrite::Overwrite)
                }
            };
            let run = BucketRun {
                bases: p,
                digits: Digits::dense(x, len),
                n: len,
                write,
                points_ready: Some(ready),
            };
            ws.buckets::<C>(k, s, run, &mut StageClock::off())
        })?;
        let mut ws = slot.ok_or(CudaError::Chunk { chunk })?;
        let mut out = DeviceBuffer::<C::Jacobian>::alloc(self.context(), plan.out_len())?;
        let t = std::time::Instant::now();
        ws.windows::<C>(k, s, &mut out, &mut StageClock::off())?;
        s.synchronize()?;
        drop(ws);
        let sum = combine::<C>(&plan, &out.to_vec()?);
        tracing::debug!(
            workspace_ms = ws_ms,
            windows_ms = t.elapsed().as_secs_f64() * 1e3,
            "msm.streamed dense"
        );
        Ok(sum)
    }

    fn streamed_boolean<C: GpuCurve>(
        &self,
        bases: Pinned<'_, C::GpuAffine>,
        scalars: Pinned<'_, Fr>,
        chunk: usize,
    ) -> Result<C::Projective, CudaError> {
        let threads = boolean_threads(self);
        let mut flag = DeviceBuffer::<u32>::from_host(self.context(), &[0])?;
        let (ck, s) = (C::kernels(self.kernels()), self.stream());
        let host = self
            .stream_chunks::<C, _>(bases, scalars, chunk, threads, |p, x, len, r, ready| {
                s.wait(ready)?;
                ck.boolean(s, p, x, len, r, &mut flag)
            })?
            .ok_or(CudaError::Chunk { chunk })?;
        if flag.to_vec()?[0] != 0 {
            let one = Scalar::from(1u64);
            let zero = Scalar::from(0u64);
            let index = cast::fr_as_scalars(scalars.as_slice())
                .and_then(|s| s.iter().position(|v| *v != zero && *v != one))
                .unwrap_or(0);
            return Err(MsmError::NotBoolean { index }.into());
        }
        Ok(host
            .par_iter()
            .map(|p| C::Projective::from(*p))
            .reduce(C::Projective::identity, |a, b| a + b))
    }
}

#[cfg(test)]
mod tests {
    use super::schedule;

    #[test]
    fn the_schedule_covers_every_point_once() {
        assert_eq!(schedule(10, 4), vec![(0, 1), (1, 5), (5, 9), (9, 10)]);
        assert_eq!(schedule(3, 1), vec![(0, 1), (1, 2), (2, 3)]);
        assert_eq!(schedule(5, 64), vec![(0, 5)]);
        assert_eq!(schedule(40, 64), vec![(0, 16), (16, 40)]);
        assert!(schedule(0, 8).is_empty());
        for (n, c) in [(1 << 20, 1 << 18), (12345, 1000), (7, 3)] {
            let s = schedule(n, c);
            assert_eq!(s[0].0, 0);
            assert_eq!(s.last().unwrap().1, n);
            assert!(s.windows(2).all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1));
            assert!(s.iter().all(|(lo, hi)| hi - lo <= c));
        }
    }
}
