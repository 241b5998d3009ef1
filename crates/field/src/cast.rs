//! Zero-copy views of blstrs slices as GPU layouts, so that a caller's `Vec<Scalar>` or
//! proving-key points upload without a conversion pass.
//!
//! blstrs's types are `#[repr(transparent)]` over blst's `#[repr(C)]` structs of `u64` limbs;
//! ours are `#[repr(C)]` structs of `u32` limbs with the same size, and a smaller alignment.
//! Views from blstrs to ours are therefore always valid; the other direction checks alignment.

use crate::layout::{Fp, Fp2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};

macro_rules! views {
    ($($from:ty => $to:ty, $name:ident, $back:ident;)*) => {$(
        const _: () = assert!(std::mem::size_of::<$from>() == std::mem::size_of::<$to>());
        const _: () = assert!(std::mem::align_of::<$from>() >= std::mem::align_of::<$to>());

        /// Views the slice in the GPU layout (no copy).
        pub fn $name(s: &[$from]) -> &[$to] {
            // SAFETY: same size (checked above), alignment of the source at least that of the
            // target, and every bit pattern of the source is a valid `Pod` target value.
            unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<$to>(), s.len()) }
        }

        /// Views GPU-layout values as blstrs values (no copy), or `None` when the slice is not
        /// aligned for the blstrs type. The values are taken as they are: points are not
        /// checked to be on the curve.
        pub fn $back(s: &[$to]) -> Option<&[$from]> {
            if (s.as_ptr() as usize) % std::mem::align_of::<$from>() != 0 {
                return None;
            }
            // SAFETY: same size, alignment checked just above; the blstrs types are plain
            // limbs for which every bit pattern is a value (unreduced values are the caller's
            // to avoid, as with blstrs's own unchecked constructors).
            Some(unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<$from>(), s.len()) })
        }
    )*};
}

views! {
    blstrs::Scalar => Fr, scalars_as_fr, fr_as_scalars;
    blstrs::Fp => Fp, fps_as_gpu, gpu_as_fps;
    blstrs::Fp2 => Fp2, fp2s_as_gpu, gpu_as_fp2s;
    blstrs::G1Affine => G1Affine, g1_affine_as_gpu, gpu_as_g1_affine;
    blstrs::G2Affine => G2Affine, g2_affine_as_gpu, gpu_as_g2_affine;
    blstrs::G1Projective => G1Projective, g1_projective_as_gpu, gpu_as_g1_projective;
    blstrs::G2Projective => G2Projective, g2_projective_as_gpu, gpu_as_g2_projective;
}

/// Views scalars in the GPU layout for writing (no copy): what is written through the view
/// is the scalars' own bytes. Values written should be canonical (`Fr::from(Scalar)` gives
/// them); others are taken as they are, as with [`fr_as_scalars`].
pub fn scalars_as_fr_mut(s: &mut [blstrs::Scalar]) -> &mut [Fr] {
    // SAFETY: as for `scalars_as_fr` (same size, alignment at least the target's, every bit
    // pattern a valid value of both types); the view borrows `s` mutably for its lifetime.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<Fr>(), s.len()) }
}
