//! Typed launches of the NTT kernels (`kernels/ntt.cu`): each wrapper checks lengths and
//! holds the one unsafe launch.

use std::sync::Arc;

use zkpipe_cuda::{
    Context, Cubin, DeviceBuffer, Function, KernelImage, LaunchConfig, Module, Stream,
};
use zkpipe_field::Fr;

use crate::NttError;

/// The compiled NTT kernels.
pub const IMAGE: KernelImage = KernelImage {
    name: "ntt",
    ptx: include_str!("../../../ptx/ntt.ptx"),
    cubins: &[Cubin {
        arch: (9, 0),
        image: include_bytes!("../../../ptx/ntt.sm_90.cubin"),
    }],
};

/// The largest radix exponent of one pass (2^8 elements per block). 9-bit passes (three for
/// 2^27 instead of four) were slower on the H200: 2^27 in 65.8 ms instead of 51.0, 2^26 29.5
/// instead of 24.6; 7-bit passes made 2^22 slower (1.99 ms instead of 1.31).
pub const MAX_DEG: u32 = 8;

/// ec-gpu-gen's largest radix exponent (its `MAX_LOG2_RADIX`).
const EC_GPU_GEN_MAX_DEG: u32 = 8;

/// Two-level power tables: w^e = lo[e mod 2^lo_bits] · hi[e >> lo_bits].
#[derive(Debug)]
pub struct PowerTables {
    /// w^j for j < 2^lo_bits.
    pub lo: DeviceBuffer<Fr>,
    /// w^(j·2^lo_bits) for j < 2^(log_n - lo_bits).
    pub hi: DeviceBuffer<Fr>,
    /// Bits of the exponent that index `lo`.
    pub lo_bits: u32,
    /// Exponents must stay below 2^log_n.
    pub log_n: u32,
    /// w^j for j < 2^(log_n - 1), when w is a primitive 2^log_n-th root of unity and the
    /// domain is small enough ([`full_table_limit`]): the passes then take each twiddle
    /// with one load instead of two loads and a multiplication.
    pub full: Option<DeviceBuffer<Fr>>,
}

/// The largest domain whose root tables are kept in full: 2^26 entries, 2 GiB a direction,
/// at 2^27 (2^27 in 51.0 ms instead of 57.2 with two-level tables above 2^24, on the H200).
/// Above it the two-level tables alone (4 GiB a direction at 2^28).
pub const FULL_TABLE_MAX_LOG_N: u32 = 27;

/// The largest domain whose full root tables, both directions (2^log_n · 32 bytes), take at
/// most a sixteenth of a device's `total_memory`, capped at [`FULL_TABLE_MAX_LOG_N`]: 2^27 on
/// cards of 64 GiB and more, 2^25 on 24 GiB, 2^24 on 8 GiB (0: none).
pub fn full_table_limit(total_memory: usize) -> u32 {
    (1..=FULL_TABLE_MAX_LOG_N)
        .rev()
        .find(|&k| (32usize << k) <= total_memory / 16)
        .unwrap_or(0)
}

/// Where a pass applies a scaling x_e *= c · s^e (e: the element's natural index), from
/// tables of s whose low table is multiplied by c.
#[derive(Debug, Clone, Copy)]
pub enum ScaleAt<'a> {
    /// To the input of the first pass (lgp = 0).
    Input(&'a PowerTables),
    /// To the output of the last pass (lgp + deg = log_n).
    Output(&'a PowerTables),
}

/// The NTT kernels of one device.
#[derive(Debug)]
pub struct NttKernels {
    pass: Function,
    pass_scaled: Function,
    expand: Function,
    h_combine: Function,
    bit_reverse: Function,
}

fn check_len(len: usize, needed: usize) -> Result<(), NttError> {
    if len < needed {
        return Err(NttError::BufferTooSmall { len, needed });
    }
    Ok(())
}

fn check_tables(t: &PowerTables, log_n: u32) -> Result<(), NttError> {
    check_len(t.lo.len(), 1 << t.lo_bits)?;
    check_len(t.hi.len(), 1 << t.log_n.saturating_sub(t.lo_bits))?;
    if t.log_n < log_n {
        return Err(NttError::DomainSize {
            log_n,
            max: t.log_n,
        });
    }
    Ok(())
}

const BLOCK: u32 = 256;

impl NttKernels {
    /// Loads the kernels on `ctx`'s device.
    pub fn load(ctx: &Arc<Context>) -> Result<Self, NttError> {
        let m = Module::load(ctx, &IMAGE)?;
        let pass = m.function("ntt_pass")?;
        let shared = 3 * (1u32 << (MAX_DEG - 1)) * std::mem::size_of::<Fr>() as u32;
        pass.set_max_dynamic_shared(shared)?;
        let pass_scaled = m.function("ntt_pass_scaled")?;
        pass_scaled.set_max_dynamic_shared(shared)?;
        Ok(Self {
            pass,
            pass_scaled,
            expand: m.function("ntt_expand")?,
            h_combine: m.function("ntt_h_combine")?,
            bit_reverse: m.function("ntt_bit_reverse")?,
        })
    }

    /// One radix-2^deg pass from `x` to `y` over 2^log_n elements with stride 2^lgp, using the
    /// tables of the transform's root of unity.
    #[allow(clippy::too_many_arguments)]
    pub fn pass(
        &self,
        s: &Stream,
        x: &DeviceBuffer<Fr>,
        y: &mut DeviceBuffer<Fr>,
        w: &PowerTables,
        log_n: u32,
        lgp: u32,
        deg: u32,
        scale: Option<ScaleAt<'_>>,
    ) -> Result<(), NttError> {
        if log_n > crate::MAX_LOG_N {
            return Err(NttError::DomainSize {
                log_n,
                max: crate::MAX_LOG_N,
            });
        }
        let n = 1usize << log_n;
        check_len(x.len(), n)?;
        check_len(y.len(), n)?;
        check_tables(w, log_n)?;
        // A full table serves only the transform of its own size (its half is n/2).
        let full = match &w.full {
            Some(f) if w.log_n == log_n => {
                check_len(f.len(), n / 2)?;
                f.device_ptr()
            }
            _ => 0,
        };
        if deg == 0 || deg > MAX_DEG || lgp + deg > log_n {
            return Err(NttError::DomainSize {
                log_n: lgp + deg,
                max: log_n,
            });
        }
        // Unscaled passes hand the root tables over as the (unread) scaling tables.
        let (st, scale_at) = match scale {
            None => (w, 0u32),
            Some(ScaleAt::Input(t)) if lgp == 0 => (t, 1u32),
            Some(ScaleAt::Output(t)) if lgp + deg == log_n => (t, 2u32),
            Some(at) => {
                return Err(NttError::ScalePlacement {
                    what: match at {
                        ScaleAt::Input(_) => "input",
                        ScaleAt::Output(_) => "output",
                    },
                    lgp,
                    deg,
                    log_n,
                })
            }
        };
        check_tables(st, log_n)?;
        let (slo, shi, s_lo_bits) = (&st.lo, &st.hi, st.lo_bits);
        let counth = 1u32 << (deg - 1);
        let cfg = LaunchConfig {
            grid: ((n >> deg) as u32, 1, 1),
            block: (counth, 1, 1),
            shared_bytes: 3 * counth * std::mem::size_of::<Fr>() as u32,
        };
        // SAFETY: x and y hold at least n elements and the tables cover exponents below
        // 2^log_n (checked above; `full`, when not null, holds n/2 entries); the kernel reads
        // x[0..n), writes y[0..n) and reads the tables at exponents below 2^log_n. The
        // buffers outlive the launch: the caller synchronises the stream before dropping them.
        // The scaling tables (read only when scale_at != 0) cover exponents below 2^log_n.
        unsafe {
            if scale_at == 0 {
                self.pass.launch(
                    s,
                    cfg,
                    &[x, &*y, &w.lo, &w.hi, &w.lo_bits, &full, &log_n, &lgp, &deg],
                )
            } else {
                self.pass_scaled.launch(
                    s,
                    cfg,
                    &[
                        x, &*y, &w.lo, &w.hi, &w.lo_bits, &full, &log_n, &lgp, &deg, slo, shi,
                        &s_lo_bits, &scale_at,
                    ],
                )
            }
        }?;
        Ok(())
    }

    /// out[i] = w^i for i < out.len() (at most 2^tables.log_n), from the two-level tables.
    pub fn expand(
        &self,
        s: &Stream,
        w: &PowerTables,
        out: &mut DeviceBuffer<Fr>,
    ) -> Result<(), NttError> {
        let n = out.len();
        if n == 0 {
            return Ok(());
        }
        check_tables(w, n.next_power_of_two().trailing_zeros())?;
        let n32 = n as u32; // n <= 2^log_n <= 2^28 (checked by check_tables)
                            // SAFETY: one thread per element of out; exponents stay below 2^tables.log_n.
        unsafe {
            self.expand.launch(
                s,
                LaunchConfig::for_elements(n, BLOCK),
                &[&w.lo, &w.hi, &w.lo_bits, &n32, &*out],
            )
        }?;
        Ok(())
    }

    /// a[i] = (a[i]·b[i] - c[i])·z_inv.
    pub fn h_combine(
        &self,
        s: &Stream,
        a: &mut DeviceBuffer<Fr>,
        b: &DeviceBuffer<Fr>,
        c: &DeviceBuffer<Fr>,
        z_inv: Fr,
    ) -> Result<(), NttError> {
        let n = a.len();
        crate::check_batch([n, b.len(), c.len()].into_iter())?;
        if n == 0 {
            return Ok(());
        }
        let n32 = u32::try_from(n).map_err(|_| NttError::DomainSize {
            log_n: 32,
            max: crate::MAX_LOG_N,
        })?;
        // SAFETY: all three buffers have n elements (checked); one thread per element.
        unsafe {
            self.h_combine.launch(
                s,
                LaunchConfig::for_elements(n, BLOCK),
                &[&*a, b, c, &n32, &z_inv],
            )
        }?;
        Ok(())
    }

    /// y[bitrev(i)] = x[i] over 2^log_n elements.
    pub fn bit_reverse(
        &self,
        s: &Stream,
        x: &DeviceBuffer<Fr>,
        y: &mut DeviceBuffer<Fr>,
        log_n: u32,
    ) -> Result<(), NttError> {
        if log_n > crate::MAX_LOG_N {
            return Err(NttError::DomainSize {
                log_n,
                max: crate::MAX_LOG_N,
            });
        }
        let n = 1usize << log_n;
        check_len(x.len(), n)?;
        check_len(y.len(), n)?;
        // SAFETY: both buffers hold n elements; one thread per element.
        unsafe {
            self.bit_reverse
                .launch(s, LaunchConfig::for_elements(n, BLOCK), &[x, &*y, &log_n])
        }?;
        Ok(())
    }
}

/// ec-gpu-gen's radix FFT kernel (bellperson's GPU path), driven as ec-gpu-gen drives it, for
/// benchmarks to compare with. The image (ec-gpu-gen's kernels, `ptx/ecgpu.ptx`) is passed in.
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
