//! Pod types with the exact bytes of blstrs's `Scalar`, `Fp`, `Fp2` and points, as the kernels
//! see them (ec-gpu-gen's 32-bit limbs, Montgomery form, little-endian).

use blst::{blst_fp, blst_fr};
use bytemuck::{Pod, Zeroable};

/// An element of the scalar field Fr, Montgomery form: the bytes of `blstrs::Scalar`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Fr(pub [u32; 8]);

/// An element of the base field Fp, Montgomery form: the bytes of `blstrs::Fp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Fp(pub [u32; 12]);

/// An element of Fp2 = Fp\[u\]/(u^2 + 1): the bytes of `blstrs::Fp2`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Fp2 {
    /// The real part.
    pub c0: Fp,
    /// The coefficient of u.
    pub c1: Fp,
}

/// A G1 point in affine coordinates: the bytes of `blstrs::G1Affine`. All zeros is the
/// identity.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct G1Affine {
    /// x coordinate.
    pub x: Fp,
    /// y coordinate.
    pub y: Fp,
}

/// A G2 point in affine coordinates: the bytes of `blstrs::G2Affine`. All zeros is the
/// identity.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct G2Affine {
    /// x coordinate.
    pub x: Fp2,
    /// y coordinate.
    pub y: Fp2,
}

/// A G1 point in Jacobian coordinates (x/z^2, y/z^3): the bytes of `blstrs::G1Projective` and
/// of ec-gpu-gen's `POINT_jacobian`. z = 0 is the identity.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct G1Projective {
    /// X.
    pub x: Fp,
    /// Y.
    pub y: Fp,
    /// Z.
    pub z: Fp,
}

/// A G2 point in Jacobian coordinates: the bytes of `blstrs::G2Projective`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct G2Projective {
    /// X.
    pub x: Fp2,
    /// Y.
    pub y: Fp2,
    /// Z.
    pub z: Fp2,
}

/// A scalar as a canonical (not Montgomery) 256-bit little-endian integer, the form kernels
/// read bits from.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Exponent(pub [u32; 8]);

impl From<blstrs::Scalar> for Fr {
    fn from(s: blstrs::Scalar) -> Self {
        Fr(bytemuck::cast(blst_fr::from(s).l))
    }
}

impl From<Fr> for blstrs::Scalar {
    /// Reinterprets the limbs; kernels keep elements reduced, so the value is canonical.
    fn from(f: Fr) -> Self {
        blstrs::Scalar::from(blst_fr {
            l: bytemuck::cast(f.0),
        })
    }
}

impl From<blstrs::Scalar> for Exponent {
    fn from(s: blstrs::Scalar) -> Self {
        Exponent(bytemuck::cast(s.to_bytes_le()))
    }
}

impl From<blstrs::Fp> for Fp {
    fn from(f: blstrs::Fp) -> Self {
        Fp(bytemuck::cast(blst_fp::from(f).l))
    }
}

impl From<Fp> for blstrs::Fp {
    fn from(f: Fp) -> Self {
        blstrs::Fp::from_raw_unchecked(bytemuck::cast(f.0))
    }
}

impl From<blstrs::Fp2> for Fp2 {
    fn from(f: blstrs::Fp2) -> Self {
        Fp2 {
            c0: f.c0().into(),
            c1: f.c1().into(),
        }
    }
}

impl From<Fp2> for blstrs::Fp2 {
    fn from(f: Fp2) -> Self {
        blstrs::Fp2::new(f.c0.into(), f.c1.into())
    }
}

impl From<blstrs::G1Affine> for G1Affine {
    fn from(p: blstrs::G1Affine) -> Self {
        G1Affine {
            x: p.x().into(),
            y: p.y().into(),
        }
    }
}

impl From<G1Affine> for blstrs::G1Affine {
    /// Reinterprets the coordinates without checking that the point is on the curve.
    fn from(p: G1Affine) -> Self {
        blstrs::G1Affine::from_raw_unchecked(p.x.into(), p.y.into(), false)
    }
}

impl From<blstrs::G2Affine> for G2Affine {
    fn from(p: blstrs::G2Affine) -> Self {
        G2Affine {
            x: p.x().into(),
            y: p.y().into(),
        }
    }
}

impl From<G2Affine> for blstrs::G2Affine {
    /// Reinterprets the coordinates without checking that the point is on the curve.
    fn from(p: G2Affine) -> Self {
        blstrs::G2Affine::from_raw_unchecked(p.x.into(), p.y.into(), false)
    }
}

impl From<blstrs::G1Projective> for G1Projective {
    fn from(p: blstrs::G1Projective) -> Self {
        G1Projective {
            x: p.x().into(),
            y: p.y().into(),
            z: p.z().into(),
        }
    }
}

impl From<G1Projective> for blstrs::G1Projective {
    /// Reinterprets the coordinates without checking that the point is on the curve.
    fn from(p: G1Projective) -> Self {
        blstrs::G1Projective::from_raw_unchecked(p.x.into(), p.y.into(), p.z.into())
    }
}

impl From<blstrs::G2Projective> for G2Projective {
    fn from(p: blstrs::G2Projective) -> Self {
        G2Projective {
            x: p.x().into(),
            y: p.y().into(),
            z: p.z().into(),
        }
    }
}

impl From<G2Projective> for blstrs::G2Projective {
    /// Reinterprets the coordinates without checking that the point is on the curve.
    fn from(p: G2Projective) -> Self {
        blstrs::G2Projective::from_raw_unchecked(p.x.into(), p.y.into(), p.z.into())
    }
}
