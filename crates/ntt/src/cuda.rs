//! The CUDA implementation: transforms on device buffers, power tables kept per device, the
//! fused H step, and uploads from pinned memory that overlap the transforms.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use ff::Field;
use zkpipe_cuda::{Context, DeviceBuffer, Stream};
use zkpipe_field::{cast, Fr};
use zkpipe_pinned::PinnedMemory;
use zkpipe_stream::upload;

use crate::domain::{coset_generator, vanishing_inverse_on_coset, Domain};
use crate::kernels::{full_table_limit, NttKernels, PowerTables, ScaleAt, MAX_DEG};
use crate::marks::{mark, Marks};
use crate::{Direction, Ntt, NttConfig, NttError, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TableKey {
    /// Powers of the domain's root of unity (or of its inverse).
    Root { log_n: u32, inverse: bool },
    /// A constant times the powers of a coset shift (c · s^e), both as limbs.
    Shift {
        log_n: u32,
        base: [u32; 8],
        scale: [u32; 8],
    },
}

/// The NTT on one CUDA device. Work is enqueued on [`CudaNtt::stream`]; the `*_device`
/// methods do not wait for it, the host-slice methods of [`Ntt`] do.
#[derive(Debug)]
pub struct CudaNtt {
    ctx: Arc<Context>,
    stream: Arc<Stream>,
    copy: Stream,
    k: NttKernels,
    tables: Mutex<HashMap<TableKey, Arc<PowerTables>>>,
    /// Full root tables up to 2^full_max ([`full_table_limit`] of the device's memory).
    full_max: u32,
}

/// The radix exponents of the passes for 2^log_n: as few passes as MAX_DEG allows, balanced.
pub fn pass_degrees(log_n: u32) -> Vec<u32> {
    let passes = log_n.div_ceil(MAX_DEG).max(1);
    (0..passes)
        .map(|i| log_n / passes + u32::from(i < log_n % passes))
        .collect()
}

impl CudaNtt {
    /// The NTT on `ctx`'s device (loads the kernels).
    pub fn new(ctx: &Arc<Context>) -> Result<Self, NttError> {
        Ok(Self {
            ctx: Arc::clone(ctx),
            stream: Arc::new(Stream::new(ctx)?),
            copy: Stream::new(ctx)?,
            k: NttKernels::load(ctx)?,
            tables: Mutex::new(HashMap::new()),
            full_max: full_table_limit(ctx.info().total_memory),
        })
    }

    /// Device bytes this NTT keeps cached for transforms of 2^log_n (root tables of both
    /// directions and the H step's two scaled shift tables), allocated on first use and kept
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
        2 * (two_level + full) + 2 * two_level
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

    fn root_tables(&self, d: &Domain, inverse: bool) -> Result<Arc<PowerTables>, NttError> {
        let base = if inverse { d.omega_inv } else { d.omega };
        self.tables(
            TableKey::Root {
                log_n: d.log_n,
                inverse,
            },
            base,
            Scalar::ONE,
            d.log_n,
        )
    }

    /// Tables of c · s^e for the scaling fused into a pass.
    fn shift_tables(
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

    /// The radix passes: natural in, natural out; `scale` (x_e *= c · s^e, from
    /// [`CudaNtt::shift_tables`]) applied to the first pass's input or the last one's output.
    fn passes(
        &self,
        d: &Domain,
        data: &mut DeviceBuffer<Fr>,
        scratch: &mut DeviceBuffer<Fr>,
        inverse: bool,
        scale: Option<ScaleAt<'_>>,
    ) -> Result<(), NttError> {
        let w = self.root_tables(d, inverse)?;
        let degs = pass_degrees(d.log_n);
        let last = degs.len().saturating_sub(1);
        let mut lgp = 0;
        for (i, deg) in degs.into_iter().enumerate() {
            let sc = match scale {
                Some(ScaleAt::Input(_)) if i == 0 => scale,
                Some(ScaleAt::Output(_)) if i == last => scale,
                _ => None,
            };
            self.k
                .pass(&self.stream, data, scratch, &w, d.log_n, lgp, deg, sc)?;
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
                    self.passes(&d, data, scratch, false, Some(ScaleAt::Input(&t)))?;
                }
                None => self.passes(&d, data, scratch, false, None)?,
            },
            Direction::Inverse => {
                // 1/n, times s^-e on a coset: one multiplication a element in the last pass.
                let s_inv = match cfg.coset.shift() {
                    Some(s) => s.invert().unwrap_or(Scalar::ZERO),
                    None => Scalar::ONE,
                };
                let t = self.shift_tables(&d, s_inv, d.n_inv)?;
                self.passes(&d, data, scratch, true, Some(ScaleAt::Output(&t)))?;
            }
        }
        if matches!(cfg.ordering, Ordering::NR | Ordering::RR) {
            self.k.bit_reverse(&self.stream, data, scratch, d.log_n)?;
            std::mem::swap(data, scratch);
        }
        Ok(())
    }

    /// Evaluations on H to evaluations on the coset g·H, fused: inverse passes, one scaling by
    /// g^i / n, forward passes.
    fn to_coset(
        &self,
        d: &Domain,
        v: &mut DeviceBuffer<Fr>,
        scratch: &mut DeviceBuffer<Fr>,
    ) -> Result<(), NttError> {
        let g = self.shift_tables(d, coset_generator(), d.n_inv)?;
        self.passes(d, v, scratch, true, Some(ScaleAt::Output(&g)))?;
        self.passes(d, v, scratch, false, None)
    }

    /// Enqueues the H step on device-resident a, b, c (length n = 2^k): returns the buffer
    /// holding h's coefficients (the first n - 1 are h; the last is zero when a·b - c
    /// vanishes on H). b and c are freed as soon as they are consumed.
    pub fn h_step_device(
        &self,
        mut a: DeviceBuffer<Fr>,
        mut b: DeviceBuffer<Fr>,
        mut c: DeviceBuffer<Fr>,
    ) -> Result<DeviceBuffer<Fr>, NttError> {
        crate::check_batch([a.len(), b.len(), c.len()].into_iter())?;
        let d = Domain::for_len(a.len())?;
        let mut scratch = DeviceBuffer::<Fr>::alloc(&self.ctx, a.len())?;
        let mut marks = Marks::new(&self.ctx);
        mark(&mut marks, "start", &self.stream)?;
        for (v, name) in [(&mut a, "a"), (&mut b, "b"), (&mut c, "c")] {
            self.to_coset(&d, v, &mut scratch)?;
            mark(&mut marks, name, &self.stream)?;
        }
        let h = self.combine_and_interpolate(&d, a, b, c, scratch, &mut marks)?;
        if let Some(m) = marks {
            m.log("ntt.h_step_device")?;
        }
        Ok(h)
    }

    fn combine_and_interpolate(
        &self,
        d: &Domain,
        mut a: DeviceBuffer<Fr>,
        b: DeviceBuffer<Fr>,
        c: DeviceBuffer<Fr>,
        mut scratch: DeviceBuffer<Fr>,
        marks: &mut Option<Marks>,
    ) -> Result<DeviceBuffer<Fr>, NttError> {
        let z_inv = vanishing_inverse_on_coset(d, coset_generator());
        let combined = self
            .k
            .h_combine(&self.stream, &mut a, &b, &c, Fr::from(z_inv))
            .and_then(|()| mark(marks, "combined", &self.stream));
        // b and c are done: wait for the combination (on every path, so that they never go
        // while a kernel may still read them), then give their memory back. Waiting for the
        // combination alone and freeing while the last transform runs kept the GPU busy
        // through the frees but made the H step from pinned memory 18 ms slower on the H200
        // (its uploads took 267 ms instead of 250; measured twice, same machine), so it waits
        // for the stream.
        let waited = self.stream.synchronize();
        let t = std::time::Instant::now();
        drop(b);
        drop(c);
        let free_ms = t.elapsed().as_secs_f64() * 1e3;
        combined?;
        waited?;
        let g_inv = coset_generator().invert().unwrap_or(Scalar::ZERO);
        let t = self.shift_tables(d, g_inv, d.n_inv)?;
        let ran = mark(marks, "freed", &self.stream)
            .and_then(|()| self.passes(d, &mut a, &mut scratch, true, Some(ScaleAt::Output(&t))));
        if let Err(e) = ran {
            // a and the scratch buffer outlive the passes already enqueued.
            let _ = self.stream.synchronize();
            return Err(e);
        }
        mark(marks, "h", &self.stream)?;
        if marks.is_some() {
            tracing::debug!(free_ms, "ntt.h_step: b and c freed");
        }
        Ok(a)
    }

    /// The H step from pinned host memory: the uploads of b and c run on a copy stream while
    /// a and b are transformed. Returns h on the device (as [`CudaNtt::h_step_device`]) and the
    /// host buffers, once their uploads are done.
    pub fn h_step_pinned<H: PinnedMemory<Fr>>(
        &self,
        a: H,
        b: H,
        c: H,
    ) -> Result<(DeviceBuffer<Fr>, [H; 3]), NttError> {
        let n = crate::check_batch([a.len(), b.len(), c.len()].into_iter())?;
        let d = Domain::for_len(n)?;
        let t = std::time::Instant::now();
        let mut da = DeviceBuffer::<Fr>::alloc(&self.ctx, n)?;
        let mut db = DeviceBuffer::<Fr>::alloc(&self.ctx, n)?;
        let mut dc = DeviceBuffer::<Fr>::alloc(&self.ctx, n)?;
        let mut scratch = DeviceBuffer::<Fr>::alloc(&self.ctx, n)?;
        let alloc_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut marks = Marks::new(&self.ctx);
        mark(&mut marks, "start", &self.copy)?;
        let ups = [
            upload(&self.copy, a, &mut da, 0)?,
            upload(&self.copy, b, &mut db, 0)?,
            upload(&self.copy, c, &mut dc, 0)?,
        ];
        mark(&mut marks, "uploaded", &self.copy)?;
        let names = ["a", "b", "c"];
        for ((up, v), name) in ups.iter().zip([&mut da, &mut db, &mut dc]).zip(names) {
            if let Some(e) = up.event() {
                self.stream.wait(e)?;
            }
            self.to_coset(&d, v, &mut scratch)?;
            mark(&mut marks, name, &self.stream)?;
        }
        let h = self.combine_and_interpolate(&d, da, db, dc, scratch, &mut marks)?;
        let [ua, ub, uc] = ups;
        let hosts = [ua.wait()?, ub.wait()?, uc.wait()?];
        if let Some(m) = marks {
            tracing::debug!(alloc_ms, "ntt.h_step_pinned: device buffers allocated");
            m.log("ntt.h_step_pinned")?;
        }
        Ok((h, hosts))
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

    fn h_polynomial(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, NttError> {
        let n = crate::check_batch([a.len(), b.len(), c.len()].into_iter())?;
        Domain::for_len(n)?;
        let up = |v: &[Scalar]| DeviceBuffer::from_host(&self.ctx, cast::scalars_as_fr(v));
        let h = self.h_step_device(up(&a)?, up(&b)?, up(&c)?)?;
        self.stream.synchronize()?;
        let mut out: Vec<Scalar> = h.to_vec()?.into_iter().map(Into::into).collect();
        out.truncate(n - 1);
        Ok(out)
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
    fn pass(x: &[Scalar], y: &mut [Scalar], omega: Scalar, log_n: u32, lgp: u32, deg: u32) {
        let n = 1usize << log_n;
        let count = 1usize << deg;
        let counth = count / 2;
        let t = n >> deg;
        let p = 1usize << lgp;
        let pw = |e: usize| omega.pow_vartime([e as u64]);
        for index in 0..(n >> deg) {
            let k = index & (p - 1);
            let pq: Vec<Scalar> = (0..counth).map(|j| pw(j << (log_n - deg))).collect();
            let shift = log_n - lgp - deg;
            let mut u: Vec<Scalar> = (0..count)
                .map(|i| {
                    let v = x[index + i * t];
                    if k != 0 && i != 0 {
                        v * pw((k * i) << shift)
                    } else {
                        v
                    }
                })
                .collect();
            for rnd in 0..deg {
                let bit = counth >> rnd;
                for lid in 0..counth {
                    let di = lid & (bit - 1);
                    let i0 = (lid << 1) - di;
                    let i1 = i0 + bit;
                    let (a, b) = (u[i0], u[i1]);
                    u[i0] = a + b;
                    let mut d = a - b;
                    if di != 0 {
                        d *= pq[di << rnd];
                    }
                    u[i1] = d;
                }
            }
            let base = ((index - k) << deg) + k;
            for lid in 0..counth {
                y[base + lid * p] = u[bit_reverse(lid, deg)];
                y[base + (lid + counth) * p] = u[bit_reverse(lid + counth, deg)];
            }
        }
    }

    #[test]
    fn kernel_pass_schedule_computes_the_transform() {
        for log_n in 1..=11u32 {
            let n = 1usize << log_n;
            let d = Domain::new(log_n).unwrap();
            let x: Vec<Scalar> = (0..n as u64).map(|i| Scalar::from(i * i + 3)).collect();
            let mut a = x.clone();
            let mut b = vec![Scalar::ZERO; n];
            let mut lgp = 0;
            for deg in pass_degrees(log_n) {
                pass(&a, &mut b, d.omega, log_n, lgp, deg);
                std::mem::swap(&mut a, &mut b);
                lgp += deg;
            }
            let mut want = x;
            CpuNtt::new()
                .transform(&mut want, Direction::Forward, &NttConfig::default())
                .unwrap();
            assert_eq!(a, want, "2^{log_n}");
        }
    }

    #[test]
    fn passes_cover_every_size_in_balanced_steps() {
        for log_n in 1..=28 {
            let d = pass_degrees(log_n);
            assert_eq!(d.iter().sum::<u32>(), log_n);
            assert!(d
                .iter()
                .all(|&x| (1..=crate::kernels::MAX_DEG).contains(&x)));
            assert!(d.iter().max().unwrap() - d.iter().min().unwrap() <= 1);
        }
        assert_eq!(pass_degrees(27), vec![7, 7, 7, 6]);
        assert_eq!(pass_degrees(24), vec![8, 8, 8]);
    }
}
