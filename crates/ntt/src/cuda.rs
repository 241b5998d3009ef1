//! The CUDA implementation: transforms on device buffers, power tables kept per device, and
//! batches from pinned memory with the uploads overlapped (the H step is in `cuda_h`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use ff::Field;
use zkpipe_cuda::{Context, DeviceBuffer, Stream};
use zkpipe_field::{cast, Fr};
use zkpipe_pinned::PinnedMemory;
use zkpipe_stream::upload;

use crate::domain::Domain;
use crate::kernels::{
    full_table_limit, Fused, NttKernels, PassShape, PowerTables, ScaleAt, MAX_DEG,
};
use crate::{Direction, HVectors, Ntt, NttConfig, NttError, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TableKey {
    /// Powers of the domain's root of unity (or of its inverse).
    Root { log_n: u32, dir: Direction },
    /// A constant times the powers of a coset shift (c · s^e), both as limbs.
    Shift {
        log_n: u32,
        base: [u32; 8],
        scale: [u32; 8],
    },
}

/// Whether a transform's first radix pass is still to run, or was done beforehand (into the
/// scratch buffer, block by block as the input arrived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstPass {
    ToRun,
    Done,
}

impl FirstPass {
    /// [`FirstPass::Done`] where the input came in `blocks` column blocks (0: one plain copy).
    pub(crate) fn after_blocks(blocks: usize) -> Self {
        match blocks {
            0 => FirstPass::ToRun,
            _ => FirstPass::Done,
        }
    }
}

/// The NTT on one CUDA device. Work is enqueued on [`CudaNtt::stream`]; the `*_device`
/// methods do not wait for it, the host-slice methods of [`Ntt`] do.
#[derive(Debug)]
pub struct CudaNtt {
    pub(crate) ctx: Arc<Context>,
    pub(crate) stream: Arc<Stream>,
    pub(crate) copy: Stream,
    pub(crate) k: NttKernels,
    tables: Mutex<HashMap<TableKey, Arc<PowerTables>>>,
    /// Full root tables up to 2^full_max ([`full_table_limit`] of the device's memory).
    full_max: u32,
    /// The column blocks of a's upload in the H step ([`CudaNtt::with_h_columns`]).
    pub(crate) h_columns: usize,
}

/// The column blocks the H step cuts a's upload into by default (8 measured best at 2^27:
/// benches/NOTES.md).
pub const H_COLUMNS: usize = 8;

/// The radix exponents of the passes for 2^log_n: as few passes as MAX_DEG allows, balanced,
/// the smaller ones first: transforms that ended on a smaller pass measured slower at 2^26 and
/// 2^27 (benches/NOTES.md, session 14).
pub fn pass_degrees(log_n: u32) -> Vec<u32> {
    let passes = log_n.div_ceil(MAX_DEG).max(1);
    let larger = log_n % passes;
    (0..passes)
        .map(|i| log_n / passes + u32::from(i >= passes - larger))
        .collect()
}

impl CudaNtt {
    /// The NTT on `ctx`'s device (loads the kernels).
    pub fn new(ctx: &Arc<Context>) -> Result<Self, NttError> {
        Self::for_memory(ctx, ctx.info().total_memory)
    }

    /// As [`CudaNtt::new`], keeping full root tables only as a device of `memory` bytes would
    /// ([`full_table_limit`]): for an engine whose VRAM budget is capped below the device's.
    pub fn for_memory(ctx: &Arc<Context>, memory: usize) -> Result<Self, NttError> {
        Ok(Self {
            ctx: Arc::clone(ctx),
            stream: Arc::new(Stream::new(ctx)?),
            copy: Stream::new(ctx)?,
            k: NttKernels::load(ctx)?,
            tables: Mutex::new(HashMap::new()),
            full_max: full_table_limit(memory.min(ctx.info().total_memory)),
            h_columns: H_COLUMNS,
        })
    }

    /// This NTT cutting a's upload in the H step into `blocks` column blocks instead of
    /// [`H_COLUMNS`] (0: one plain copy), for comparisons; any number gives the same h.
    #[must_use]
    pub fn with_h_columns(mut self, blocks: usize) -> Self {
        self.h_columns = blocks;
        self
    }

    /// Device bytes this NTT keeps cached for transforms of 2^log_n (root tables of both
    /// directions and the H step's three scaled shift tables), allocated on first use and kept
    /// until the NTT is dropped.
    pub fn table_bytes(&self, log_n: u32) -> usize {
        Self::table_bytes_with(log_n, self.full_max)
    }

    /// The largest domain this NTT keeps full root tables for (see [`full_table_limit`]).
    pub fn full_table_max_log_n(&self) -> u32 {
        self.full_max
    }

    /// [`CudaNtt::table_bytes`] for a device keeping full root tables up to 2^full_max.
    pub fn table_bytes_with(log_n: u32, full_max: u32) -> usize {
        let fr = std::mem::size_of::<Fr>();
        let lo_bits = log_n.div_ceil(2);
        let two_level = ((1usize << lo_bits) + (1usize << (log_n - lo_bits))) * fr;
        let full = if log_n <= full_max && log_n > 0 {
            (1usize << (log_n - 1)) * fr
        } else {
            0
        };
        2 * (two_level + full) + 3 * two_level
    }

    /// The stream the transforms run on.
    pub fn stream(&self) -> &Arc<Stream> {
        &self.stream
    }

    /// The device context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Waits for all enqueued work.
    pub fn synchronize(&self) -> Result<(), NttError> {
        Ok(self.stream.synchronize()?)
    }

    fn tables(
        &self,
        key: TableKey,
        base: Scalar,
        scale: Scalar,
        log_n: u32,
    ) -> Result<Arc<PowerTables>, NttError> {
        let mut map = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(&key) {
            return Ok(Arc::clone(t));
        }
        let lo_bits = log_n.div_ceil(2);
        let powers = |b: Scalar, count: usize| {
            let mut v = Vec::with_capacity(count);
            let mut w = Scalar::ONE;
            for _ in 0..count {
                v.push(w);
                w *= b;
            }
            v
        };
        // c · s^e = (c · s^l) · s^(h·2^lo_bits): the constant rides in the low table.
        let lo: Vec<Scalar> = powers(base, 1 << lo_bits)
            .into_iter()
            .map(|x| x * scale)
            .collect();
        let hi = powers(base.pow_vartime([1u64 << lo_bits]), 1 << (log_n - lo_bits));
        let mut t = PowerTables {
            lo: DeviceBuffer::from_host(&self.ctx, cast::scalars_as_fr(&lo))?,
            hi: DeviceBuffer::from_host(&self.ctx, cast::scalars_as_fr(&hi))?,
            lo_bits,
            log_n,
            full: None,
        };
        if matches!(key, TableKey::Root { .. }) && log_n <= self.full_max && log_n > 0 {
            let mut full = DeviceBuffer::<Fr>::alloc(&self.ctx, 1 << (log_n - 1))?;
            self.k.expand(&self.stream, &t, &mut full)?;
            self.stream.synchronize()?;
            t.full = Some(full);
        }
        let t = Arc::new(t);
        map.insert(key, Arc::clone(&t));
        Ok(t)
    }

    pub(crate) fn root_tables(
        &self,
        d: &Domain,
        dir: Direction,
    ) -> Result<Arc<PowerTables>, NttError> {
        let base = match dir {
            Direction::Forward => d.omega,
            Direction::Inverse => d.omega_inv,
        };
        self.tables(
            TableKey::Root {
                log_n: d.log_n,
                dir,
            },
            base,
            Scalar::ONE,
            d.log_n,
        )
    }

    /// Tables of c · s^e for the scaling fused into a pass.
    pub(crate) fn shift_tables(
        &self,
        d: &Domain,
        shift: Scalar,
        scale: Scalar,
    ) -> Result<Arc<PowerTables>, NttError> {
        let key = TableKey::Shift {
            log_n: d.log_n,
            base: Fr::from(shift).0,
            scale: Fr::from(scale).0,
        };
        self.tables(key, shift, scale, d.log_n)
    }

    /// The radix passes: natural in, natural out, with the pointwise work `fused` on the first
    /// pass's input and the last one's output.
    pub(crate) fn passes(
        &self,
        d: &Domain,
        data: &mut DeviceBuffer<Fr>,
        scratch: &mut DeviceBuffer<Fr>,
        dir: Direction,
        fused: Fused<'_>,
    ) -> Result<(), NttError> {
        self.passes_from(d, data, scratch, dir, fused, FirstPass::ToRun)
    }

    /// [`CudaNtt::passes`], or with [`FirstPass::Done`] the passes after the first, whose
    /// output (of `data`, unscaled) is already in `scratch` ([`NttKernels::first_pass_columns`]).
    pub(crate) fn passes_from(
        &self,
        d: &Domain,
        data: &mut DeviceBuffer<Fr>,
        scratch: &mut DeviceBuffer<Fr>,
        dir: Direction,
        fused: Fused<'_>,
        first: FirstPass,
    ) -> Result<(), NttError> {
        let w = self.root_tables(d, dir)?;
        let mut lgp = 0;
        for (i, deg) in pass_degrees(d.log_n).into_iter().enumerate() {
            let f = fused.for_pass(lgp, deg, d.log_n);
            if i > 0 || first == FirstPass::ToRun {
                let shape = PassShape {
                    log_n: d.log_n,
                    lgp,
                    deg,
                };
                self.k.pass(&self.stream, data, scratch, &w, shape, &f)?;
            } else if f.scale.is_some() || f.input_times.is_some() || f.output_minus.is_some() {
                return Err(NttError::ScalePlacement {
                    what: "input work of a first pass done beforehand",
                    lgp,
                    deg,
                    log_n: d.log_n,
                });
            }
            std::mem::swap(data, scratch);
            lgp += deg;
        }
        Ok(())
    }

    fn check_buffers(
        data: &DeviceBuffer<Fr>,
        scratch: &DeviceBuffer<Fr>,
    ) -> Result<Domain, NttError> {
        let d = Domain::for_len(data.len())?;
        if scratch.len() != data.len() {
            return Err(NttError::BatchLengths {
                first: data.len(),
                other: scratch.len(),
            });
        }
        Ok(d)
    }

    /// Enqueues a transform of `data` (length 2^k) using `scratch` (same length). The two
    /// buffers may be swapped: the result is in `data` either way.
    pub fn transform_device(
        &self,
        data: &mut DeviceBuffer<Fr>,
        scratch: &mut DeviceBuffer<Fr>,
        dir: Direction,
        cfg: &NttConfig,
    ) -> Result<(), NttError> {
        let d = Self::check_buffers(data, scratch)?;
        if matches!(cfg.ordering, Ordering::RN | Ordering::RR) {
            self.k.bit_reverse(&self.stream, data, scratch, d.log_n)?;
            std::mem::swap(data, scratch);
        }
        match dir {
            Direction::Forward => match cfg.coset.shift() {
                Some(s) => {
                    let t = self.shift_tables(&d, s, Scalar::ONE)?;
                    self.passes(
                        &d,
                        data,
                        scratch,
                        Direction::Forward,
                        Fused::scaled(ScaleAt::Input(&t)),
                    )?;
                }
                None => self.passes(&d, data, scratch, Direction::Forward, Fused::default())?,
            },
            Direction::Inverse => {
                // 1/n, times s^-e on a coset: one multiplication a element in the last pass.
                let s_inv = match cfg.coset.shift() {
                    Some(s) => s.invert().unwrap_or(Scalar::ZERO),
                    None => Scalar::ONE,
                };
                let t = self.shift_tables(&d, s_inv, d.n_inv)?;
                self.passes(
                    &d,
                    data,
                    scratch,
                    Direction::Inverse,
                    Fused::scaled(ScaleAt::Output(&t)),
                )?;
            }
        }
        if matches!(cfg.ordering, Ordering::NR | Ordering::RR) {
            self.k.bit_reverse(&self.stream, data, scratch, d.log_n)?;
            std::mem::swap(data, scratch);
        }
        Ok(())
    }
}

impl CudaNtt {
    /// Transforms a batch of vectors held in pinned host memory, in place, through two device
    /// buffers that alternate: the upload of vector i + 1 and the download of vector i - 1 run
    /// on a copy stream while vector i is transformed. Returns the buffers, transformed.
    pub fn transform_batch_pinned<H: PinnedMemory<Fr>>(
        &self,
        batch: Vec<H>,
        dir: Direction,
        cfg: &NttConfig,
    ) -> Result<Vec<H>, NttError> {
        let n = crate::check_batch(batch.iter().map(|h| h.len()))?;
        if batch.is_empty() {
            return Ok(batch);
        }
        Domain::for_len(n)?;
        let m = batch.len();
        let mut bufs = [
            DeviceBuffer::<Fr>::alloc(&self.ctx, n)?,
            DeviceBuffer::<Fr>::alloc(&self.ctx, n)?,
        ];
        let mut scratch = DeviceBuffer::<Fr>::alloc(&self.ctx, n)?;
        let mut pending: std::collections::VecDeque<H> = batch.into();
        let mut ups = std::collections::VecDeque::new();
        for slot in bufs.iter_mut().take(m) {
            let h = pending
                .pop_front()
                .ok_or(NttError::BatchLengths { first: m, other: 0 })?;
            ups.push_back(upload(&self.copy, h, slot, 0)?);
        }
        let mut downs = Vec::with_capacity(m);
        for i in 0..m {
            let up = ups
                .pop_front()
                .ok_or(NttError::BatchLengths { first: m, other: i })?;
            if let Some(e) = up.event() {
                self.stream.wait(e)?;
            }
            self.transform_device(&mut bufs[i % 2], &mut scratch, dir, cfg)?;
            let done = self.stream.record()?;
            let host = up.wait()?;
            self.copy.wait(&done)?;
            downs.push(zkpipe_stream::download(&self.copy, &bufs[i % 2], 0, host)?);
            if let Some(next) = pending.pop_front() {
                ups.push_back(upload(&self.copy, next, &mut bufs[i % 2], 0)?);
            }
        }
        downs.into_iter().map(|d| Ok(d.wait()?)).collect()
    }
}

impl Ntt for CudaNtt {
    fn transform(
        &self,
        data: &mut [Scalar],
        dir: Direction,
        cfg: &NttConfig,
    ) -> Result<(), NttError> {
        Domain::for_len(data.len())?;
        let mut dev = DeviceBuffer::from_host(&self.ctx, cast::scalars_as_fr(data))?;
        let mut scratch = DeviceBuffer::<Fr>::alloc(&self.ctx, data.len())?;
        self.transform_device(&mut dev, &mut scratch, dir, cfg)?;
        self.stream.synchronize()?;
        let out = dev.to_vec()?;
        for (x, y) in data.iter_mut().zip(out) {
            *x = y.into();
        }
        Ok(())
    }

    fn h_quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, NttError> {
        let n = crate::check_batch([a.len(), b.len(), c.len()].into_iter())?;
        Domain::for_len(n)?;
        let mut bufs = self.h_step_buffers(n, HVectors::Four)?;
        let inputs = bufs.inputs_mut();
        inputs.a.copy_from_host(cast::scalars_as_fr(&a))?;
        inputs.b.copy_from_host(cast::scalars_as_fr(&b))?;
        inputs
            .c
            .ok_or(NttError::NoDeviceC)?
            .copy_from_host(cast::scalars_as_fr(&c))?;
        self.h_step_in(&mut bufs)?;
        Ok(bufs.h().to_vec()?.into_iter().map(Into::into).collect())
    }

    fn name(&self) -> String {
        format!("cuda:{}", self.ctx.ordinal())
    }
}

#[cfg(test)]
mod tests {
    use super::pass_degrees;
    use crate::{bit_reverse, CpuNtt, Direction, Domain, Ntt, NttConfig};
    use blstrs::Scalar;
    use ff::Field;

    /// `ntt_pass` of kernels/ntt.cu, step by step on the host: the index arithmetic of the
    /// kernel checked against the CPU transform without a GPU.
    /// `powers` holds w^e for e < n/2, the full root table the kernel reads its factors from.
    fn pass(x: &[Scalar], y: &mut [Scalar], powers: &[Scalar], log_n: u32, lgp: u32, deg: u32) {
        let n = 1usize << log_n;
        let count = 1usize << deg;
        let counth = count / 2;
        let t = n >> deg;
        let p = 1usize << lgp;
        // An exponent at or above n/2 would index past the table (the kernel reads it directly).
        let pw = |e: usize| powers[e];
        for index in 0..(n >> deg) {
            let k = index & (p - 1);
            let shift = log_n - lgp - deg;
            let mut u: Vec<Scalar> = (0..count).map(|i| x[index + i * t]).collect();
            for rnd in 0..deg {
                let bit = counth >> rnd;
                for lid in 0..counth {
                    let di = lid & (bit - 1);
                    let i0 = (lid << 1) - di;
                    let i1 = i0 + bit;
                    // Sub-transform s of the round, base T·w^bitrev(s): its factor.
                    let s = lid >> (deg - 1 - rnd);
                    let e = (k + bit_reverse(s, rnd) * p) << (shift + deg - 1 - rnd);
                    let (a, b) = (u[i0], u[i1] * pw(e));
                    u[i0] = a + b;
                    u[i1] = a - b;
                }
            }
            let base = ((index - k) << deg) + k;
            for lid in 0..counth {
                y[base + lid * p] = u[bit_reverse(lid, deg)];
                y[base + (lid + counth) * p] = u[bit_reverse(lid + counth, deg)];
            }
        }
    }

    /// The transform of `x` (length 2^log_n) by the kernel's passes of the given degrees,
    /// compared with the CPU transform.
    fn check_passes(x: &[Scalar], log_n: u32, degrees: &[u32]) {
        let n = 1usize << log_n;
        let d = Domain::new(log_n).unwrap();
        let mut powers = vec![Scalar::ONE; (n / 2).max(1)];
        for e in 1..powers.len() {
            powers[e] = powers[e - 1] * d.omega;
        }
        let mut a = x.to_vec();
        let mut b = vec![Scalar::ZERO; n];
        let mut lgp = 0;
        for &deg in degrees {
            pass(&a, &mut b, &powers, log_n, lgp, deg);
            std::mem::swap(&mut a, &mut b);
            lgp += deg;
        }
        assert_eq!(lgp, log_n, "the degrees cover 2^{log_n}");
        let mut want = x.to_vec();
        CpuNtt::new()
            .transform(&mut want, Direction::Forward, &NttConfig::default())
            .unwrap();
        assert_eq!(a, want, "2^{log_n} in passes {degrees:?}");
    }

    fn inputs(n: usize) -> Vec<Scalar> {
        (0..n as u64).map(|i| Scalar::from(i * i + 3)).collect()
    }

    #[test]
    fn kernel_pass_schedule_computes_the_transform() {
        for log_n in 1..=11u32 {
            check_passes(&inputs(1 << log_n), log_n, &pass_degrees(log_n));
        }
    }

    /// Every degree the kernel is instantiated for (1 to MAX_DEG), first, in the middle and
    /// last, after strides small and large.
    #[test]
    fn kernel_pass_is_right_at_every_degree() {
        let x = inputs(1 << 12);
        for degrees in [
            [8, 4].as_slice(),
            &[4, 8],
            &[7, 5],
            &[5, 7],
            &[6, 6],
            &[1, 8, 3],
            &[3, 1, 8],
            &[2, 2, 8],
            &[8, 2, 1, 1],
        ] {
            check_passes(&x, 12, degrees);
        }
    }

    #[test]
    fn passes_cover_every_size_in_balanced_ascending_steps() {
        for log_n in 1..=28 {
            let d = pass_degrees(log_n);
            assert_eq!(d.iter().sum::<u32>(), log_n);
            assert!(d
                .iter()
                .all(|&x| (1..=crate::kernels::MAX_DEG).contains(&x)));
            assert!(d.iter().max().unwrap() - d.iter().min().unwrap() <= 1);
            assert!(d.windows(2).all(|w| w[0] <= w[1]), "{d:?} is not ascending");
        }
        assert_eq!(pass_degrees(27), vec![6, 7, 7, 7]);
        assert_eq!(pass_degrees(26), vec![6, 6, 7, 7]);
        assert_eq!(pass_degrees(24), vec![8, 8, 8]);
        assert_eq!(pass_degrees(10), vec![5, 5]);
    }
}
