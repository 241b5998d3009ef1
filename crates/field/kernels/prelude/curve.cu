// ---- zkpipe curve arithmetic ----
// XYZZ coordinates for G1 and G2 over the field operations the bucket additions measured
// fastest with (benches/NOTES.md):
// - G1 (ZK_FPC): zkpipe's CIOS multiplication (zk_fp_mul_cios) called rather than inlined
//   (inlined, it spilled more), zkpipe's dedicated squaring, a·b - c·d with one reduction
//   (zk_fp_mul_sub_call), and ec-gpu-gen's inlined Fp additions, which measured faster there
//   than the branch-free ones.
// - G2 (ZK_FP2Z): zkpipe's Fp2 (fp2.cu), a·b - c·d with two reductions (zk_fp2_mul_sub).
// An op set names: ZERO, ONE, eq, add, sub, double, mul, sqr, mul_sub (a·b - c·d), inverse,
// inverse_vartime (for values that are not secret); Fp2's also norm (into Fp) and
// conjugate_times (the conjugate times an Fp element).
__noinline__ DEVICE FP zk_fp_sqr_call(FP a) { return zk_fp_sqr(a); }
// a·b - c·d with one Montgomery reduction: both products at double width, their difference
// (plus p·2^384 when negative, still below p·2^384) reduced once.
__noinline__ DEVICE FP zk_fp_mul_sub_call(FP a, FP b, FP c, FP d) {
  zk_fpw w0, w1;
  FP_(mult_v1)(a.val, b.val, w0.v);
  FP_(mult_v1)(c.val, d.val, w1.v);
  if (zk_fpw_sub(w0.v, w1.v)) zk_fpw_add_p_high(w0.v);
  return zk_fp_redc(w0.v);
}
#define ZK_FPC_ZERO FP_(ZERO)
#define ZK_FPC_ONE FP_(ONE)
#define ZK_FPC_eq FP_(eq)
#define ZK_FPC_add FP_(add)
#define ZK_FPC_sub FP_(sub)
#define ZK_FPC_double FP_(double)
#define ZK_FPC_mul zk_fp_mul_cios_call
#define ZK_FPC_sqr zk_fp_sqr_call
#define ZK_FPC_mul_sub zk_fp_mul_sub_call
#define ZK_FPC_inverse zk_fp_inverse
#define ZK_FPC_inverse_vartime zk_fp_inverse_vartime
#define ZK_FPC(f) ZK_FPC_##f

#define ZK_FP2Z_ZERO FP2_(ZERO)
#define ZK_FP2Z_ONE FP2_(ONE)
#define ZK_FP2Z_eq FP2_(eq)
#define ZK_FP2Z_add zk_fp2_add
#define ZK_FP2Z_sub zk_fp2_sub
#define ZK_FP2Z_double zk_fp2_double
#define ZK_FP2Z_mul zk_fp2_mul
#define ZK_FP2Z_sqr zk_fp2_sqr
#define ZK_FP2Z_mul_sub zk_fp2_mul_sub
#define ZK_FP2Z_inverse zk_fp2_inverse
#define ZK_FP2Z_inverse_vartime zk_fp2_inverse_vartime
#define ZK_FP2Z_norm zk_fp2_norm
#define ZK_FP2Z_conjugate_times zk_fp2_conjugate_times
#define ZK_FP2Z(f) ZK_FP2Z_##f

// XYZZ accumulators (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; ZZ = 0 is the identity): a mixed
// addition costs 8 multiplications and 2 squarings (madd-2008-s) where Jacobian coordinates'
// madd-2007-bl costs 7 and 4, with fewer additions. A sum is converted to Jacobian
// coordinates (ec-gpu-gen's, JAC) once, at the end. P: the curve's ec-gpu-gen prefix (its
// ZERO), F: its field's operations, FT: the field's type.
#define ZK_XYZZ(NAME, AFF, JAC, P, F, FT)                                                      \
  typedef struct { FT x; FT y; FT zz; FT zzz; } zk_xyzz_##NAME;                               \
  DEVICE inline zk_xyzz_##NAME zk_xyzz_zero_##NAME() {                                        \
    zk_xyzz_##NAME r;                                                                          \
    r.x = F(ONE); r.y = F(ONE); r.zz = F(ZERO); r.zzz = F(ZERO);                               \
    return r;                                                                                  \
  }                                                                                            \
  /* 2b for an affine b (mdbl-2008-s-1, a = 0): the rare case of adding a point to itself. */  \
  __noinline__ DEVICE zk_xyzz_##NAME zk_xyzz_dbl_##NAME(AFF b) {                               \
    const FT u = F(double)(b.y);                                                               \
    const FT v = F(sqr)(u);                                                                    \
    const FT w = F(mul)(u, v);                                                                 \
    const FT s = F(mul)(b.x, v);                                                               \
    const FT x2 = F(sqr)(b.x);                                                                 \
    const FT m = F(add)(F(double)(x2), x2);                                                    \
    zk_xyzz_##NAME r;                                                                          \
    r.x = F(sub)(F(sqr)(m), F(double)(s));                                                     \
    r.y = F(sub)(F(mul)(m, F(sub)(s, r.x)), F(mul)(w, b.y));                                   \
    r.zz = v;                                                                                  \
    r.zzz = w;                                                                                 \
    return r;                                                                                  \
  }                                                                                            \
  /* a += b in place, for an accumulator in memory (the bucket kernels keep theirs in shared */ \
  /* memory): each coordinate read where it is needed and written once it is known. */         \
  DEVICE inline void zk_xyzz_madd_##NAME(zk_xyzz_##NAME* a, AFF b) {                           \
    const FT zero = F(ZERO);                                                                   \
    if (F(eq)(a->zz, zero)) {                                                                  \
      a->x = b.x; a->y = b.y; a->zz = F(ONE); a->zzz = F(ONE);                                 \
      return;                                                                                  \
    }                                                                                          \
    const FT p = F(sub)(F(mul)(b.x, a->zz), a->x);                                             \
    const FT r = F(sub)(F(mul)(b.y, a->zzz), a->y);                                            \
    if (F(eq)(p, zero) && F(eq)(r, zero)) {                                                    \
      *a = zk_xyzz_dbl_##NAME(b);                                                              \
      return;                                                                                  \
    }                                                                                          \
    /* p = 0, r != 0: a = -b, and zz becomes 0, the identity. */                               \
    const FT pp = F(sqr)(p);                                                                   \
    const FT ppp = F(mul)(p, pp);                                                              \
    a->zz = F(mul)(a->zz, pp);                                                                 \
    a->zzz = F(mul)(a->zzz, ppp);                                                              \
    const FT q = F(mul)(a->x, pp);                                                             \
    const FT x = F(sub)(F(sub)(F(sqr)(r), ppp), F(double)(q));                                 \
    a->y = F(mul_sub)(r, F(sub)(q, x), a->y, ppp);                                             \
    a->x = x;                                                                                  \
  }                                                                                            \
  /* Jacobian with Z = ZZ * ZZZ: X = x * ZZ * ZZZ^2, Y = y * ZZZ^4 (ZZ^3 = ZZZ^2). */          \
  DEVICE inline JAC zk_xyzz_to_jac_##NAME(zk_xyzz_##NAME a) {                                  \
    if (F(eq)(a.zz, F(ZERO))) return P(ZERO);                                                  \
    const FT zzz2 = F(sqr)(a.zzz);                                                             \
    JAC r;                                                                                     \
    r.x = F(mul)(F(mul)(a.x, a.zz), zzz2);                                                     \
    r.y = F(mul)(a.y, F(sqr)(zzz2));                                                           \
    r.z = F(mul)(a.zz, a.zzz);                                                                 \
    return r;                                                                                  \
  }
ZK_XYZZ(g1, G1_AFFINE, G1_JACOBIAN, G1_, ZK_FPC, FP)
ZK_XYZZ(g2, G2_AFFINE, G2_JACOBIAN, G2_, ZK_FP2Z, FP2)
