//! The H step on the GPU: from a, b, c (evaluations on the domain H) to h's coefficients, on
//! device-resident data or from pinned host memory with the uploads overlapped, in buffers
//! allocated per call or kept by the caller from one step to the next.
//!
//! Six transforms, not bellperson's seven: Z = g^n - 1 is constant on the coset g·H and c's
//! polynomial C has degree below n, so interpolating (a·b - c)/Z from the coset equals
//! interpolating a·b/Z from the coset minus C/Z, and c needs only its inverse transform. The
//! product by b, the scaling and the subtraction of C/Z ride in the first and last passes of
//! the final transform.

use blstrs::Scalar;
use ff::Field;
use zkpipe_cuda::DeviceBuffer;
use zkpipe_field::Fr;
use zkpipe_pinned::PinnedMemory;
use zkpipe_stream::{copy_scope, upload, upload_columns, InFlight, Pinned};

use crate::cuda::{pass_degrees, FirstPass};
use crate::domain::{coset_generator, vanishing_inverse_on_coset, Domain};
use crate::kernels::{Fused, PassShape, ScaleAt};
use crate::phases::{log_phases, phase_clock, PhaseClock};
use crate::{CudaNtt, Direction, NttError};

/// The device memory of one H step: a, b, c and a scratch vector, 2^k elements each (16 GiB
/// at 2^27), or a, b and the scratch vector alone for the three-vector step (c then comes from
/// pinned memory). After a step, [`HStepBuffers::h`] holds h; the buffers can serve the next
/// step as they are ([`CudaNtt::h_step_in`], [`CudaNtt::h_step_three_in`],
/// [`CudaNtt::h_step_pinned_into`]), which spares the allocations and frees and the slower
/// first writes to fresh memory. [`CudaNtt::h_step_buffers`] allocates them.
#[derive(Debug)]
pub struct HStepBuffers {
    a: DeviceBuffer<Fr>,
    b: DeviceBuffer<Fr>,
    c: Option<DeviceBuffer<Fr>>,
    scratch: DeviceBuffer<Fr>,
}

impl HStepBuffers {
    /// The length of each vector.
    pub fn len(&self) -> usize {
        self.a.len()
    }

    /// Always false: a step has at least 2 elements.
    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }

    /// h's coefficients after a step: the first n - 1 are h, the last is zero when a·b - c
    /// vanishes on H.
    pub fn h(&self) -> &DeviceBuffer<Fr> {
        &self.a
    }

    /// Keeps h and frees the other vectors.
    pub fn into_h(self) -> DeviceBuffer<Fr> {
        self.a
    }

    /// Where a step's inputs go before [`CudaNtt::h_step_in`]: a, b, and c when the buffers
    /// hold one.
    pub fn inputs_mut(&mut self) -> HStepInputs<'_> {
        HStepInputs {
            a: &mut self.a,
            b: &mut self.b,
            c: self.c.as_mut(),
        }
    }
}

/// The device vectors an H step's inputs are written into ([`HStepBuffers::inputs_mut`]).
#[derive(Debug)]
pub struct HStepInputs<'a> {
    pub a: &'a mut DeviceBuffer<Fr>,
    pub b: &'a mut DeviceBuffer<Fr>,
    /// None in three-vector buffers (c then comes from pinned memory).
    pub c: Option<&'a mut DeviceBuffer<Fr>>,
}

/// How many device vectors of n elements an H step's buffers hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HVectors {
    /// a, b, c and a scratch vector: every H step.
    Four,
    /// a, b and a scratch vector, for a card that cannot hold four: c comes from pinned
    /// memory into b's vector once b is read ([`CudaNtt::h_step_three_in`]).
    Three,
}

impl CudaNtt {
    /// Allocates the buffers of H steps of `n` elements (a power of two).
    pub fn h_step_buffers(&self, n: usize, vectors: HVectors) -> Result<HStepBuffers, NttError> {
        Domain::for_len(n)?;
        let alloc = || DeviceBuffer::<Fr>::alloc(&self.ctx, n);
        Ok(HStepBuffers {
            a: alloc()?,
            b: alloc()?,
            c: match vectors {
                HVectors::Four => Some(alloc()?),
                HVectors::Three => None,
            },
            scratch: alloc()?,
        })
    }

    /// The H step on a, b, c already in `bufs` (four-vector buffers kept by the caller): when
    /// it returns, [`HStepBuffers::h`] holds h's coefficients, computed.
    pub fn h_step_in(&self, bufs: &mut HStepBuffers) -> Result<(), NttError> {
        let n = bufs.len();
        let c_len = bufs.c.as_ref().ok_or(NttError::NoDeviceC)?.len();
        crate::check_batch([n, bufs.b.len(), c_len, bufs.scratch.len()].into_iter())?;
        let d = Domain::for_len(n)?;
        let mut clock = phase_clock(&self.ctx, &self.stream)?;
        let ran = self
            .to_coset(&d, &mut bufs.a, &mut bufs.scratch, FirstPass::ToRun)
            .and_then(|()| clock.mark("a", &self.stream).map_err(NttError::from))
            .and_then(|()| self.to_coset(&d, &mut bufs.b, &mut bufs.scratch, FirstPass::ToRun))
            .and_then(|()| clock.mark("b", &self.stream).map_err(NttError::from))
            .and_then(|()| self.finish(&d, bufs, &mut clock));
        // On every path: nothing is handed back while a kernel may still use it.
        let waited = self.stream.synchronize();
        ran?;
        waited?;
        log_phases(&clock, "ntt.h_step_in")?;
        Ok(())
    }

    /// The H step in three device vectors instead of four, for a card that cannot hold four,
    /// on a and b already in `bufs` (a c vector they may hold is not used): a and b go to the
    /// coset; a·b is interpolated into a's buffer (b is read by the first pass only); then c
    /// is copied from pinned memory into b's buffer, interpolated over Z, and subtracted.
    /// When it returns, [`HStepBuffers::h`] holds h's coefficients, computed, equal to
    /// [`CudaNtt::h_step_in`]'s.
    pub fn h_step_three_in(
        &self,
        bufs: &mut HStepBuffers,
        c: Pinned<'_, Fr>,
    ) -> Result<(), NttError> {
        crate::check_batch([bufs.len(), c.len()].into_iter())?;
        copy_scope(|sc| {
            self.h_step_three_with(bufs, |stream, b| -> Result<(), NttError> {
                sc.upload(stream, c, b, 0)?;
                Ok(())
            })
        })?
    }

    /// As [`CudaNtt::h_step_three_in`], with c written into b's buffer by `c_into` (the
    /// NTT's stream and the buffer), once the pass that reads b is enqueued: whatever it
    /// enqueues on the stream runs after that pass and before c's transform (a, b and c
    /// evaluated on the device from a recording, say). When it returns, the stream's work is
    /// done, on every path.
    pub fn h_step_three_with<E: From<NttError>>(
        &self,
        bufs: &mut HStepBuffers,
        c_into: impl FnOnce(&zkpipe_cuda::Stream, &mut DeviceBuffer<Fr>) -> Result<(), E>,
    ) -> Result<(), E> {
        let n = bufs.len();
        crate::check_batch([n, bufs.b.len(), bufs.scratch.len()].into_iter())?;
        let d = Domain::for_len(n)?;
        let g = coset_generator();
        let scale = d.n_inv * vanishing_inverse_on_coset(&d, g);
        let g_inv = g.invert().unwrap_or(Scalar::ZERO);
        let over_z = self.shift_tables(&d, Scalar::ONE, scale)?;
        let from_coset = self.shift_tables(&d, g_inv, scale)?;
        let HStepBuffers { a, b, scratch, .. } = bufs;
        let ran = (|| -> Result<(), E> {
            self.to_coset(&d, a, scratch, FirstPass::ToRun)?;
            self.to_coset(&d, b, scratch, FirstPass::ToRun)?;
            // a·b on the coset, interpolated: times g^-e/(n·Z).
            let last = Fused {
                scale: Some(ScaleAt::Output(&from_coset)),
                input_times: Some(b),
                output_minus: None,
            };
            self.passes(&d, a, scratch, Direction::Inverse, last)?;
            // c into b's buffer, on the NTT stream: after the pass that read b.
            c_into(&self.stream, b)?;
            let c_over_z = Fused::scaled(ScaleAt::Output(&over_z));
            self.passes(&d, b, scratch, Direction::Inverse, c_over_z)?;
            Ok(self.k.sub(&self.stream, a, b)?)
        })();
        // On every path: nothing is handed back while a kernel may still use it.
        let waited = self.stream.synchronize();
        ran?;
        waited.map_err(NttError::from)?;
        Ok(())
    }

    /// The H step from pinned host memory into `bufs` (of the inputs' length): the uploads of
    /// b and c run on a copy stream while a and b are transformed, and a arrives in column
    /// blocks ([`upload_columns`]) so that the first pass of its inverse transform runs while
    /// the rest of it is on the way. When it returns h is in [`HStepBuffers::h`], computed,
    /// and the host buffers come back.
    pub fn h_step_pinned_into<H: PinnedMemory<Fr>>(
        &self,
        bufs: &mut HStepBuffers,
        a: H,
        b: H,
        c: H,
    ) -> Result<[H; 3], NttError> {
        let n = crate::check_batch([bufs.len(), a.len(), b.len(), c.len()].into_iter())?;
        let d = Domain::for_len(n)?;
        let mut clock = phase_clock(&self.ctx, &self.copy)?;
        let blocks = column_blocks(&d, self.h_columns);
        let width = n >> pass_degrees(d.log_n)[0];
        let up_a = match blocks {
            0 => upload(&self.copy, a, &mut bufs.a, 0)?,
            _ => upload_columns(&self.copy, a, &mut bufs.a, width, blocks)?,
        };
        clock.mark("a_up", &self.copy).map_err(NttError::from)?;
        let up_b = upload(&self.copy, b, &mut bufs.b, 0)?;
        clock.mark("b_up", &self.copy).map_err(NttError::from)?;
        let bufs_c = bufs.c.as_mut().ok_or(NttError::NoDeviceC)?;
        let ups = [up_a, up_b, upload(&self.copy, c, bufs_c, 0)?];
        let ran = clock
            .mark("uploaded", &self.copy)
            .map_err(NttError::from)
            .and_then(|()| self.first_pass_by_blocks(&d, bufs, &ups[0], blocks))
            .and_then(|()| wait(self, &ups[0]))
            .and_then(|()| {
                self.to_coset(
                    &d,
                    &mut bufs.a,
                    &mut bufs.scratch,
                    FirstPass::after_blocks(blocks),
                )
            })
            .and_then(|()| clock.mark("a", &self.stream).map_err(NttError::from))
            .and_then(|()| wait(self, &ups[1]))
            .and_then(|()| self.to_coset(&d, &mut bufs.b, &mut bufs.scratch, FirstPass::ToRun))
            .and_then(|()| clock.mark("b", &self.stream).map_err(NttError::from))
            .and_then(|()| wait(self, &ups[2]))
            .and_then(|()| self.finish(&d, bufs, &mut clock));
        // On every path: the copies and kernels end before anything can go.
        let copied = self.copy.synchronize();
        let waited = self.stream.synchronize();
        ran?;
        copied?;
        waited?;
        let [ua, ub, uc] = ups;
        let hosts = [ua.wait()?, ub.wait()?, uc.wait()?];
        if clock.is_on() {
            tracing::debug!(
                blocks,
                "ntt.h_step_pinned_into: a uploaded in column blocks"
            );
        }
        log_phases(&clock, "ntt.h_step_pinned_into")?;
        Ok(hosts)
    }

    /// The first inverse pass of a, block by block as its columns arrive (none when `blocks`
    /// is 0), into the scratch buffer.
    fn first_pass_by_blocks<H>(
        &self,
        d: &Domain,
        bufs: &mut HStepBuffers,
        up: &InFlight<H>,
        blocks: usize,
    ) -> Result<(), NttError> {
        if blocks == 0 {
            return Ok(());
        }
        let w = self.root_tables(d, Direction::Inverse)?;
        let deg = pass_degrees(d.log_n)[0];
        let cols = (d.size() >> deg) / blocks;
        for i in 0..blocks {
            let e = up
                .block_event(i)
                .ok_or(zkpipe_stream::Error::AlreadyTaken)?;
            self.stream.wait(e)?;
            let (x, y) = (&bufs.a, &mut bufs.scratch);
            let shape = PassShape::first(d.log_n, deg);
            let columns = i * cols..(i + 1) * cols;
            self.k
                .first_pass_columns(&self.stream, x, y, &w, shape, columns)?;
        }
        Ok(())
    }

    /// Evaluations on H to evaluations on the coset g·H, fused: inverse passes, one scaling by
    /// g^i / n, forward passes. With [`FirstPass::Done`], the inverse's first pass is already
    /// in `scratch`.
    fn to_coset(
        &self,
        d: &Domain,
        v: &mut DeviceBuffer<Fr>,
        scratch: &mut DeviceBuffer<Fr>,
        first: FirstPass,
    ) -> Result<(), NttError> {
        let g = self.shift_tables(d, coset_generator(), d.n_inv)?;
        let scaled = Fused::scaled(ScaleAt::Output(&g));
        self.passes_from(d, v, scratch, Direction::Inverse, scaled, first)?;
        self.passes(d, v, scratch, Direction::Forward, Fused::default())
    }

    /// The H step once a and b are on the coset: c's inverse transform, over Z, then the final
    /// transform (enqueued, not waited for).
    fn finish(
        &self,
        d: &Domain,
        bufs: &mut HStepBuffers,
        clock: &mut PhaseClock,
    ) -> Result<(), NttError> {
        let g = coset_generator();
        let scale = d.n_inv * vanishing_inverse_on_coset(d, g);
        let g_inv = g.invert().unwrap_or(Scalar::ZERO);
        let over_z = self.shift_tables(d, Scalar::ONE, scale)?;
        let from_coset = self.shift_tables(d, g_inv, scale)?;
        // C/Z: c's coefficients, each times 1/(n·Z).
        let c_over_z = Fused::scaled(ScaleAt::Output(&over_z));
        let c = bufs.c.as_mut().ok_or(NttError::NoDeviceC)?;
        self.passes(d, c, &mut bufs.scratch, Direction::Inverse, c_over_z)?;
        clock.mark("c", &self.stream)?;
        // h = (a·b on the coset, interpolated: times g^-e/(n·Z)) - C/Z.
        let last = Fused {
            scale: Some(ScaleAt::Output(&from_coset)),
            input_times: Some(&bufs.b),
            output_minus: bufs.c.as_ref(),
        };
        self.passes(d, &mut bufs.a, &mut bufs.scratch, Direction::Inverse, last)?;
        Ok(clock.mark("h", &self.stream)?)
    }
}

/// Makes the NTT stream wait for a copy.
fn wait<H>(ntt: &CudaNtt, up: &InFlight<H>) -> Result<(), NttError> {
    let e = up.event().ok_or(zkpipe_stream::Error::AlreadyTaken)?;
    Ok(ntt.stream.wait(e)?)
}

/// The column blocks a's upload is cut into by [`CudaNtt::h_step_pinned_into`], so that the
/// first pass of its inverse transform runs block by block while the rest arrives: `blocks`
/// ([`CudaNtt::with_h_columns`]; 0: one plain copy); none when the transform has a single
/// pass (whose output is scaled) or its rows are not a multiple of the blocks.
fn column_blocks(d: &Domain, blocks: usize) -> usize {
    let degs = pass_degrees(d.log_n);
    let width = d.size() >> degs[0];
    if degs.len() < 2 || blocks == 0 || !width.is_multiple_of(blocks) {
        return 0;
    }
    blocks
}
