//! Typed launches of the NTT kernels (`kernels/ntt.cu`): each wrapper checks lengths and
//! holds the one unsafe launch.

use std::ops::Range;
use std::sync::Arc;

use zkpipe_cuda::{
    Context, DeviceBuffer, Function, ImageBytes, KernelImage, LaunchConfig, Module, Stream,
};
use zkpipe_field::Fr;

use crate::NttError;

/// The compiled NTT kernels.
pub const IMAGE: KernelImage = KernelImage {
    name: "ntt",
    ptx: Some(zkpipe_cuda::Ptx {
        arch: (7, 5),
        text: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.compute_75.ptx.zst")),
    }),
    cubins: &[
        zkpipe_cuda::Cubin {
            arch: (7, 5),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.sm_75.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.sm_80.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 6),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.sm_86.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (8, 9),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.sm_89.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (9, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.sm_90.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (10, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.sm_100.cubin.zst")),
        },
        zkpipe_cuda::Cubin {
            arch: (12, 0),
            image: ImageBytes::Zstd(include_bytes!("../../../ptx/ntt.sm_120.cubin.zst")),
        },
    ],
};

/// The largest radix exponent of one pass (2^8 elements per block). 9-bit passes (three for
/// 2^27 instead of four, with two or four elements a thread) and 7-bit ones measured slower
/// (benches/NOTES.md).
pub const MAX_DEG: u32 = 8;

/// Two-level power tables: w^e = lo[e mod 2^lo_bits] · hi\[e >> lo_bits\].
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
/// at 2^27 (faster than two-level tables above 2^24: benches/NOTES.md).
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

/// Pointwise work fused into a pass, so that it costs no pass over memory of its own. Input
/// operations belong to the first pass (lgp = 0), output ones to the last (lgp + deg = log_n);
/// on the input the scaling comes first, on the output the subtraction comes last.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fused<'a> {
    /// A scaling by the powers of a shift, on the input or the output.
    pub scale: Option<ScaleAt<'a>>,
    /// x_e *= v_e on the input.
    pub input_times: Option<&'a DeviceBuffer<Fr>>,
    /// y_e -= v_e on the output.
    pub output_minus: Option<&'a DeviceBuffer<Fr>>,
}

impl<'a> Fused<'a> {
    /// A scaling alone.
    pub fn scaled(at: ScaleAt<'a>) -> Self {
        Self {
            scale: Some(at),
            ..Self::default()
        }
    }

    /// The part of `self` that a pass at stride 2^lgp of 2^deg over 2^log_n performs.
    pub fn for_pass(&self, lgp: u32, deg: u32, log_n: u32) -> Self {
        let first = lgp == 0;
        let last = lgp + deg == log_n;
        Self {
            scale: match self.scale {
                Some(ScaleAt::Input(_)) if first => self.scale,
                Some(ScaleAt::Output(_)) if last => self.scale,
                _ => None,
            },
            input_times: self.input_times.filter(|_| first),
            output_minus: self.output_minus.filter(|_| last),
        }
    }
}

/// The NTT kernels of one device.
#[derive(Debug)]
pub struct NttKernels {
    pass: Function,
    pass_scaled: Function,
    pass_fused: Function,
    expand: Function,
    bit_reverse: Function,
    sub: Function,
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

/// A domain of 2^log_n within the limit, and `x` and `y` of at least 2^log_n elements:
/// returns n.
fn check_vectors(
    x: &DeviceBuffer<Fr>,
    y: &DeviceBuffer<Fr>,
    log_n: u32,
) -> Result<usize, NttError> {
    if log_n > crate::MAX_LOG_N {
        return Err(NttError::DomainSize {
            log_n,
            max: crate::MAX_LOG_N,
        });
    }
    let n = 1usize << log_n;
    check_len(x.len(), n)?;
    check_len(y.len(), n)?;
    Ok(n)
}

/// The checks of a pass of 2^deg at stride 2^lgp over 2^log_n from `x` to `y` with the root
/// tables `w`: returns n and the full table's pointer (0 when the pass uses the two-level
/// tables: a full table serves only the transform of its own size, its half being n/2).
fn check_pass(
    x: &DeviceBuffer<Fr>,
    y: &DeviceBuffer<Fr>,
    w: &PowerTables,
    pass: PassShape,
) -> Result<(usize, u64), NttError> {
    let PassShape { log_n, lgp, deg } = pass;
    let n = check_vectors(x, y, log_n)?;
    check_tables(w, log_n)?;
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
    Ok((n, full))
}

/// Where one radix-2^deg pass sits in a transform of 2^log_n: at stride 2^lgp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassShape {
    pub log_n: u32,
    pub lgp: u32,
    pub deg: u32,
}

impl PassShape {
    /// The first pass (stride 1) of 2^deg over 2^log_n.
    pub fn first(log_n: u32, deg: u32) -> Self {
        Self { log_n, lgp: 0, deg }
    }
}

impl NttKernels {
    /// Loads the kernels on `ctx`'s device.
    pub fn load(ctx: &Arc<Context>) -> Result<Self, NttError> {
        let m = Module::load(ctx, &IMAGE)?;
        let pass = m.function("ntt_pass")?;
        let shared = 3 * (1u32 << (MAX_DEG - 1)) * std::mem::size_of::<Fr>() as u32;
        pass.set_max_dynamic_shared(shared)?;
        let pass_scaled = m.function("ntt_pass_scaled")?;
        pass_scaled.set_max_dynamic_shared(shared)?;
        let pass_fused = m.function("ntt_pass_fused")?;
        pass_fused.set_max_dynamic_shared(shared)?;
        Ok(Self {
            pass,
            pass_scaled,
            pass_fused,
            expand: m.function("ntt_expand")?,
            bit_reverse: m.function("ntt_bit_reverse")?,
            sub: m.function("ntt_sub")?,
        })
    }

    /// One radix-2^deg pass from `x` to `y` over 2^log_n elements with stride 2^lgp, using the
    /// tables of the transform's root of unity, with the pointwise work `fused` (which must
    /// belong to this pass: see [`Fused::for_pass`]).
    pub fn pass(
        &self,
        s: &Stream,
        x: &DeviceBuffer<Fr>,
        y: &mut DeviceBuffer<Fr>,
        w: &PowerTables,
        pass: PassShape,
        fused: &Fused<'_>,
    ) -> Result<(), NttError> {
        let (n, full) = check_pass(x, y, w, pass)?;
        let PassShape { log_n, lgp, deg } = pass;
        let misplaced = |what| NttError::ScalePlacement {
            what,
            lgp,
            deg,
            log_n,
        };
        let (first, last) = (lgp == 0, lgp + deg == log_n);
        // Unscaled passes hand the root tables over as the (unread) scaling tables.
        let (st, mut bits) = match fused.scale {
            None => (w, 0u32),
            Some(ScaleAt::Input(t)) if first => (t, 1u32),
            Some(ScaleAt::Output(t)) if last => (t, 2u32),
            Some(ScaleAt::Input(_)) => return Err(misplaced("input scaling")),
            Some(ScaleAt::Output(_)) => return Err(misplaced("output scaling")),
        };
        check_tables(st, log_n)?;
        // Vectors too: the kernel reads them at every index below n. A null pointer is never
        // read (its bit is clear).
        let mut vector = |v: Option<&DeviceBuffer<Fr>>, bit: u32, allowed: bool, what| match v {
            None => Ok(0u64),
            Some(_) if !allowed => Err(misplaced(what)),
            Some(v) => {
                check_len(v.len(), n)?;
                bits |= bit;
                Ok(v.device_ptr())
            }
        };
        let times = vector(fused.input_times, 4, first, "input product")?;
        let minus = vector(fused.output_minus, 8, last, "output subtraction")?;
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
        // scaling tables (read only when bit 1 or 2 is set) cover exponents below 2^log_n;
        // the vectors (read only when bit 4 or 8 is set) hold at least n elements. The
        // buffers outlive the launch: the caller synchronises the stream before dropping them.
        unsafe {
            if bits == 0 {
                self.pass.launch(
                    s,
                    cfg,
                    &[x, &*y, &w.lo, &w.hi, &w.lo_bits, &full, &log_n, &lgp, &deg],
                )
            } else if bits < 4 {
                self.pass_scaled.launch(
                    s,
                    cfg,
                    &[
                        x, &*y, &w.lo, &w.hi, &w.lo_bits, &full, &log_n, &lgp, &deg, slo, shi,
                        &s_lo_bits, &bits,
                    ],
                )
            } else {
                self.pass_fused.launch(
                    s,
                    cfg,
                    &[
                        x, &*y, &w.lo, &w.hi, &w.lo_bits, &full, &log_n, &lgp, &deg, slo, shi,
                        &s_lo_bits, &bits, &times, &minus,
                    ],
                )
            }
        }?;
        Ok(())
    }

    /// The first pass (lgp = 0, unscaled) of a transform of 2^log_n, on the columns
    /// `columns` only: with `x` read as 2^deg rows of 2^(log_n - deg) elements, those
    /// columns are all this part of the pass reads, so it can start once they are on the
    /// device. Over every column, the same as [`NttKernels::pass`] with lgp = 0.
    pub fn first_pass_columns(
        &self,
        s: &Stream,
        x: &DeviceBuffer<Fr>,
        y: &mut DeviceBuffer<Fr>,
        w: &PowerTables,
        pass: PassShape,
        columns: Range<usize>,
    ) -> Result<(), NttError> {
        if pass.lgp != 0 {
            return Err(NttError::NotFirstPass { lgp: pass.lgp });
        }
        let (n, full) = check_pass(x, y, w, pass)?;
        let PassShape { log_n, lgp, deg } = pass;
        let (col, cols) = (columns.start, columns.len());
        let width = n >> deg;
        if col.checked_add(cols).is_none_or(|end| end > width) {
            return Err(NttError::BufferTooSmall {
                len: width,
                needed: col.saturating_add(cols),
            });
        }
        if cols == 0 {
            return Ok(());
        }
        let fr = std::mem::size_of::<Fr>() as u64;
        // Block b of the pass reads x[b + i·width] and (lgp = 0) writes y[(b << deg) + j]:
        // starting both buffers at column `col` makes block b' do block col + b'.
        let xc = x.device_ptr() + col as u64 * fr;
        let yc = y.device_ptr() + ((col as u64) << deg) * fr;
        let counth = 1u32 << (deg - 1);
        let cfg = LaunchConfig {
            grid: (cols as u32, 1, 1),
            block: (counth, 1, 1),
            shared_bytes: 3 * counth * std::mem::size_of::<Fr>() as u32,
        };
        // SAFETY: blocks col..col + cols of the first pass (col + cols <= n >> deg, checked)
        // read x at indices below n and write y at (col + cols) << deg <= n; both buffers hold
        // n elements, the tables cover exponents below 2^log_n (checked). The launch's
        // blocks see the offset pointers and the full-size n, as that part of the whole pass.
        unsafe {
            self.pass.launch(
                s,
                cfg,
                &[
                    &xc, &yc, &w.lo, &w.hi, &w.lo_bits, &full, &log_n, &lgp, &deg,
                ],
            )
        }?;
        Ok(())
    }

    /// out\[i\] = w^i for i < out.len() (at most 2^tables.log_n), from the two-level tables.
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

    /// x\[i\] -= y\[i\] over all of x (y at least as long).
    pub fn sub(
        &self,
        s: &Stream,
        x: &mut DeviceBuffer<Fr>,
        y: &DeviceBuffer<Fr>,
    ) -> Result<(), NttError> {
        let n = x.len();
        check_len(y.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let n32 = u32::try_from(n).map_err(|_| NttError::BufferTooSmall {
            len: n,
            needed: u32::MAX as usize,
        })?;
        // SAFETY: one thread per element of x, reading y at the same index (y is no shorter).
        unsafe {
            self.sub
                .launch(s, LaunchConfig::for_elements(n, BLOCK), &[&*x, y, &n32])
        }?;
        Ok(())
    }

    /// y[bitrev(i)] = x\[i\] over 2^log_n elements.
    pub fn bit_reverse(
        &self,
        s: &Stream,
        x: &DeviceBuffer<Fr>,
        y: &mut DeviceBuffer<Fr>,
        log_n: u32,
    ) -> Result<(), NttError> {
        let n = check_vectors(x, y, log_n)?;
        // SAFETY: both buffers hold n elements; one thread per element.
        unsafe {
            self.bit_reverse
                .launch(s, LaunchConfig::for_elements(n, BLOCK), &[x, &*y, &log_n])
        }?;
        Ok(())
    }
}
