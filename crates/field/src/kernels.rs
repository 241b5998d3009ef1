//! Typed launches of the field test kernels (`kernels/field_test.cu`): each wrapper checks
//! the lengths and holds the one unsafe launch.
//!
//! The compiled image ([`IMAGE`], `ptx/field.*.zst`) is embedded only with the `image` feature
//! (on by default): `cargo xtask ptx` builds that image from this crate's source, so it uses
//! the crate without the feature.

use std::sync::Arc;

use bytemuck::Pod;
use zkpipe_cuda::{Context, DeviceBuffer, Function, KernelImage, LaunchConfig, Module, Stream};

use crate::layout::{Fp, Fp2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};

/// The compiled field test kernels.
#[cfg(feature = "image")]
pub const IMAGE: KernelImage = KernelImage {
    name: "field",
    ptx: Some(zkpipe_cuda::Ptx {
        arch: (7, 5),
        text: zkpipe_cuda::ImageBytes::Zstd(include_bytes!(
            "../../../ptx/field.compute_75.ptx.zst"
        )),
    }),
    cubins: &[zkpipe_cuda::Cubin {
        arch: (9, 0),
        image: zkpipe_cuda::ImageBytes::Zstd(include_bytes!("../../../ptx/field.sm_90.cubin.zst")),
    }],
};

/// Errors of the test-kernel launches.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// A driver call failed.
    #[error(transparent)]
    Cuda(#[from] zkpipe_cuda::Error),
    /// Buffers whose lengths do not fit together.
    #[error(
        "{kernel}: inputs of {a} and {b} elements need an output of {expected} elements, got {out}"
    )]
    Lengths {
        kernel: &'static str,
        a: usize,
        b: usize,
        expected: usize,
        out: usize,
    },
    /// More elements than one launch can index.
    #[error("{kernel}: {n} elements exceed the u32 index range")]
    TooMany { kernel: &'static str, n: usize },
}

/// The field and point test kernels of one device.
#[derive(Debug)]
pub struct FieldTestKernels {
    fr: Function,
    fp: Function,
    fp2: Function,
    zk_fr: Function,
    zk_fp: Function,
    zk_frc: Function,
    zk_fpc: Function,
    zk_fp2: Function,
    zk_fp_mul_sub: Function,
    zk_fp2_mul_sub: Function,
    zk_fp_inverse: Function,
    zk_fp2_inverse: Function,
    g1: Function,
    g2: Function,
}

const BLOCK: u32 = 256;

fn launch<A: Pod, B: Pod, O: Pod>(
    f: &Function,
    kernel: &'static str,
    outputs: usize,
    stream: &Stream,
    a: &DeviceBuffer<A>,
    b: &DeviceBuffer<B>,
    out: &mut DeviceBuffer<O>,
) -> Result<(), KernelError> {
    let n = a.len();
    let expected = n * outputs;
    if b.len() != n || out.len() != expected {
        return Err(KernelError::Lengths {
            kernel,
            a: n,
            b: b.len(),
            expected,
            out: out.len(),
        });
    }
    let n32 =
        u32::try_from(expected).map_err(|_| KernelError::TooMany { kernel, n })? / outputs as u32;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::for_elements(n, BLOCK);
    // SAFETY: the kernel reads a[i], b[i] and writes out[k * n + i] for i < n and k < outputs,
    // and the lengths were checked above; the buffers are borrowed until the caller
    // synchronises (the borrow of `out` is exclusive).
    unsafe { f.launch(stream, cfg, &[a, b, &*out, &n32]) }?;
    Ok(())
}

impl FieldTestKernels {
    /// Loads the test kernels from `image` (built from this crate's `kernels/` by xtask).
    pub fn load(ctx: &Arc<Context>, image: &KernelImage) -> Result<Self, KernelError> {
        let m = Module::load(ctx, image)?;
        Ok(Self {
            fr: m.function("fr_ops")?,
            fp: m.function("fp_ops")?,
            fp2: m.function("fp2_ops")?,
            zk_fr: m.function("zk_fr_ops")?,
            zk_fp: m.function("zk_fp_ops")?,
            zk_frc: m.function("zk_frc_ops")?,
            zk_fpc: m.function("zk_fpc_ops")?,
            zk_fp2: m.function("zk_fp2_ops")?,
            zk_fp_mul_sub: m.function("zk_fp_mul_sub_ops")?,
            zk_fp2_mul_sub: m.function("zk_fp2_mul_sub_ops")?,
            zk_fp_inverse: m.function("zk_fp_inverse_ops")?,
            zk_fp2_inverse: m.function("zk_fp2_inverse_ops")?,
            g1: m.function("g1_ops")?,
            g2: m.function("g2_ops")?,
        })
    }
}

/// The typed launches, one a kernel: `name(stream, a, b, out)` checks the lengths (out holds
/// `outputs` results an element) and launches.
macro_rules! launches {
    ($($(#[$doc:meta])* $name:ident($f:ident: $a:ty, $b:ty => $o:ty, $outputs:expr);)*) => {
        impl FieldTestKernels {
            $(
                $(#[$doc])*
                pub fn $name(
                    &self,
                    s: &Stream,
                    a: &DeviceBuffer<$a>,
                    b: &DeviceBuffer<$b>,
                    out: &mut DeviceBuffer<$o>,
                ) -> Result<(), KernelError> {
                    launch(&self.$f, stringify!($name), $outputs, s, a, b, out)
                }
            )*
        }
    };
}

launches! {
    /// out = [a + b, a - b, a * b, a^2] in Fr (4n elements).
    fr_ops(fr: Fr, Fr => Fr, 4);
    /// out = [a + b, a - b, a * b, a^2] in Fp (4n elements).
    fp_ops(fp: Fp, Fp => Fp, 4);
    /// out = [a + b, a - b, a * b, a^2] in Fp2 (4n elements).
    fp2_ops(fp2: Fp2, Fp2 => Fp2, 4);
    /// As [`FieldTestKernels::fr_ops`], with zkpipe's branch-free operations.
    zk_fr_ops(zk_fr: Fr, Fr => Fr, 4);
    /// As [`FieldTestKernels::fp_ops`], with zkpipe's branch-free operations.
    zk_fp_ops(zk_fp: Fp, Fp => Fp, 4);
    /// As [`FieldTestKernels::fr_ops`], with zkpipe's CIOS multiplication and dedicated
    /// squaring.
    zk_frc_ops(zk_frc: Fr, Fr => Fr, 4);
    /// As [`FieldTestKernels::fp_ops`], with zkpipe's CIOS multiplication and dedicated
    /// squaring.
    zk_fpc_ops(zk_fpc: Fp, Fp => Fp, 4);
    /// As [`FieldTestKernels::fp2_ops`], with zkpipe's Fp2 (lazy multiplication, squaring by
    /// two products).
    zk_fp2_ops(zk_fp2: Fp2, Fp2 => Fp2, 4);
    /// out = [a_i·b_i - a_j·b_j, a_i·b_i - b_i·a_i] in Fp for j = n - 1 - i (2n elements), by
    /// the one-reduction a·b - c·d of G1's bucket additions.
    zk_fp_mul_sub_ops(zk_fp_mul_sub: Fp, Fp => Fp, 2);
    /// As [`FieldTestKernels::zk_fp_mul_sub_ops`] in Fp2, by the two-reduction a·b - c·d of
    /// G2's bucket additions.
    zk_fp2_mul_sub_ops(zk_fp2_mul_sub: Fp2, Fp2 => Fp2, 2);
    /// out = [1 / a in variable time (Bernstein-Yang), 1 / a by Fermat] in Fp (2n elements,
    /// 0 for 0); `b` is not read.
    zk_fp_inverse_ops(zk_fp_inverse: Fp, Fp => Fp, 2);
    /// As [`FieldTestKernels::zk_fp_inverse_ops`] in Fp2.
    zk_fp2_inverse_ops(zk_fp2_inverse: Fp2, Fp2 => Fp2, 2);
    /// out = [2p, p + q (mixed), p + q (Jacobian)] in G1 (3n elements), for p in `a` and q in `b`.
    g1_ops(g1: G1Projective, G1Affine => G1Projective, 3);
    /// out = [2p, p + q (mixed), p + q (Jacobian)] in G2 (3n elements), for p in `a` and q in `b`.
    g2_ops(g2: G2Projective, G2Affine => G2Projective, 3);
}
