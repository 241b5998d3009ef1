//! zkpipe-field: BLS12-381 as the kernels see it.
//!
//! - [`layout`]: Pod types with blstrs's bytes ([`Fr`], [`Fp`], [`Fp2`], [`G1Affine`],
//!   [`G2Affine`], [`G1Projective`], [`G2Projective`], [`Exponent`]) and conversions.
//! - [`cast`]: zero-copy views of blstrs slices in those layouts.
//! - [`cuda_prelude`]: ec-gpu-gen's field and curve arithmetic as CUDA source, followed by
//!   zkpipe's branch-free Fr and Fp operations (`zk_fr_*`, `zk_fp_*`: the final subtraction
//!   of p selected by the borrow instead of branched on), which `cargo xtask ptx` prepends to
//!   every stage's kernels.
//! - [`kernels`]: typed launches of the field and point test kernels.

pub mod cast;
pub mod kernels;
pub mod layout;
mod source;

pub use layout::{Exponent, Fp, Fp2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
pub use source::{cuda_prelude, ec_gpu_gen_kernels};
