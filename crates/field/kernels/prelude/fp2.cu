// ---- zkpipe Fp2 arithmetic ----
// Fp2 = Fp[u] / (u^2 + 1) over zkpipe's branch-free Fp operations (arith.cu), with the Fp
// products out of line: ec-gpu-gen's Fp2 multiplication interleaves three inlined ones and
// spilled 420 bytes in G2's bucket loop. benches/NOTES.md has the figures of each choice.

// Multiplication with lazy reduction: Karatsuba's three products kept at double width, and
// two Montgomery reductions instead of three (c0 = a0·b0 - a1·b1, c1 = (a0 + a1)(b0 + b1) -
// a0·b0 - a1·b1, each reduced once). Both stay below p·2^384, which the reduction needs: c0
// gets p·2^384 added when negative, and c1 is a0·b1 + a1·b0 < 2p^2 exactly, the sums a0 + a1
// and b0 + b1 being taken without reduction (< 2p < 2^382).
#define ZK_FP_WIDE (2 * FP_(LIMBS))
typedef struct { uint32_t v[ZK_FP_WIDE]; } zk_fpw;
// a -= b over ZK_FP_WIDE limbs; returns the borrow out (0 or 0xffffffff).
DEVICE inline uint32_t zk_fpw_sub(uint32_t* a, const uint32_t* b) {
  a[0] = zk_sub_cc(a[0], b[0]);
#pragma unroll
  for (int i = 1; i < ZK_FP_WIDE; i++) a[i] = zk_subc_cc(a[i], b[i]);
  return zk_subc(0, 0);
}
// a += b over ZK_FP_WIDE limbs, the sum known to fit.
DEVICE inline void zk_fpw_add(uint32_t* a, const uint32_t* b) {
  a[0] = add_cc(a[0], b[0]);
#pragma unroll
  for (int i = 1; i < ZK_FP_WIDE - 1; i++) a[i] = addc_cc(a[i], b[i]);
  a[ZK_FP_WIDE - 1] = addc(a[ZK_FP_WIDE - 1], b[ZK_FP_WIDE - 1]);
}
// a += p·2^384: what a difference of double-width values that came out negative (a borrow
// from zk_fpw_sub) needs to be a value in [0, p·2^384) again, for the reduction.
DEVICE inline void zk_fpw_add_p_high(uint32_t* a) {
  a[FP_(LIMBS)] = add_cc(a[FP_(LIMBS)], FP_(P).val[0]);
#pragma unroll
  for (int i = 1; i < FP_(LIMBS) - 1; i++) a[FP_(LIMBS) + i] = addc_cc(a[FP_(LIMBS) + i], FP_(P).val[i]);
  a[ZK_FP_WIDE - 1] = addc(a[ZK_FP_WIDE - 1], FP_(P).val[FP_(LIMBS) - 1]);
}
// The double-width products and the reductions out of line, the subtractions inline, and the
// whole multiplication called (zk_fp2_mul): the fastest arrangement measured for G2 (three
// Montgomery multiplications; lazy with everything out of line, which spilled in the bucket
// loop; lazy and inlined).
__noinline__ DEVICE zk_fpw zk_fp_wide(FP a, FP b) {
  zk_fpw r;
  FP_(mult_v1)(a.val, b.val, r.v);
  return r;
}
__noinline__ DEVICE FP zk_fp_redc_call(zk_fpw t) { return zk_fp_redc(t.v); }
DEVICE inline FP2 zk_fp2_mul_lazy(FP2 a, FP2 b) {
  zk_fpw w0 = zk_fp_wide(a.c0, b.c0);
  zk_fpw w1 = zk_fp_wide(a.c1, b.c1);
  zk_fpw s = zk_fp_wide(FP_(add_)(a.c0, a.c1), FP_(add_)(b.c0, b.c1));
  zk_fpw_sub(s.v, w0.v);
  zk_fpw_sub(s.v, w1.v);
  if (zk_fpw_sub(w0.v, w1.v)) zk_fpw_add_p_high(w0.v);  // a0·b0 < a1·b1
  FP2 r;
  r.c0 = zk_fp_redc_call(w0);
  r.c1 = zk_fp_redc_call(s);
  return r;
}
__noinline__ DEVICE FP2 zk_fp2_mul(FP2 a, FP2 b) { return zk_fp2_mul_lazy(a, b); }

// a·b - c·d with two Montgomery reductions where two products and a difference take four:
// all six double-width products first, c0 = (a0·b0 + c1·d1) - (a1·b1 + c0·d0) and
// c1 = (a0·b1 + a1·b0) - (c0·d1 + c1·d0), each side of either difference below 2p^2 <
// p·2^384, and p·2^384 added to a negative difference, so that both lie in [0, p·2^384).
__noinline__ DEVICE FP2 zk_fp2_mul_sub(FP2 a, FP2 b, FP2 c, FP2 d) {
  zk_fpw ab0 = zk_fp_wide(a.c0, b.c0);
  zk_fpw ab1 = zk_fp_wide(a.c1, b.c1);
  zk_fpw ab_cross = zk_fp_wide(FP_(add_)(a.c0, a.c1), FP_(add_)(b.c0, b.c1));
  zk_fpw_sub(ab_cross.v, ab0.v);
  zk_fpw_sub(ab_cross.v, ab1.v);
  const zk_fpw cd0 = zk_fp_wide(c.c0, d.c0);
  const zk_fpw cd1 = zk_fp_wide(c.c1, d.c1);
  zk_fpw cd_cross = zk_fp_wide(FP_(add_)(c.c0, c.c1), FP_(add_)(d.c0, d.c1));
  zk_fpw_sub(cd_cross.v, cd0.v);
  zk_fpw_sub(cd_cross.v, cd1.v);
  zk_fpw_add(ab0.v, cd1.v);
  zk_fpw_add(ab1.v, cd0.v);
  if (zk_fpw_sub(ab0.v, ab1.v)) zk_fpw_add_p_high(ab0.v);
  if (zk_fpw_sub(ab_cross.v, cd_cross.v)) zk_fpw_add_p_high(ab_cross.v);
  FP2 r;
  r.c0 = zk_fp_redc_call(ab0);
  r.c1 = zk_fp_redc_call(ab_cross);
  return r;
}

// An Fp product out of line, for the squaring and the inverses.
__noinline__ DEVICE FP zk_fp_mul_call(FP a, FP b) { return zk_fp_mul(a, b); }
// (a0 + a1·u)^2 = (a0 + a1)(a0 - a1) + 2·a0·a1·u.
DEVICE inline FP2 zk_fp2_sqr(FP2 a) {
  const FP ab = zk_fp_mul_call(a.c0, a.c1);
  FP2 r;
  r.c0 = zk_fp_mul_call(zk_fp_add(a.c0, a.c1), zk_fp_sub(a.c0, a.c1));
  r.c1 = zk_fp_add(ab, ab);
  return r;
}
DEVICE inline FP2 zk_fp2_add(FP2 a, FP2 b) {
  FP2 r;
  r.c0 = zk_fp_add(a.c0, b.c0);
  r.c1 = zk_fp_add(a.c1, b.c1);
  return r;
}
DEVICE inline FP2 zk_fp2_sub(FP2 a, FP2 b) {
  FP2 r;
  r.c0 = zk_fp_sub(a.c0, b.c0);
  r.c1 = zk_fp_sub(a.c1, b.c1);
  return r;
}
DEVICE inline FP2 zk_fp2_double(FP2 a) { return zk_fp2_add(a, a); }

// Inverses, for work done a few times a point (the precomputed multiples): Fermat's a^(p-2)
// in Fp; in Fp2, the conjugate over the norm a0^2 + a1^2. The inverse of 0 comes out 0.
__noinline__ DEVICE FP zk_fp_inverse(FP a) {
  FP r = FP_(ONE);
  for (int limb = FP_(LIMBS) - 1; limb >= 0; limb--) {
    const uint e = FP_(P).val[limb] - (limb == 0 ? 2u : 0u);  // p is odd: no borrow
    for (int bit = 31; bit >= 0; bit--) {
      r = zk_fp_mul_call(r, r);
      if ((e >> bit) & 1u) r = zk_fp_mul_call(r, a);
    }
  }
  return r;
}
DEVICE inline FP2 zk_fp2_inverse(FP2 a) {
  const FP t =
      zk_fp_inverse(zk_fp_add(zk_fp_mul_call(a.c0, a.c0), zk_fp_mul_call(a.c1, a.c1)));
  FP2 r;
  r.c0 = zk_fp_mul_call(a.c0, t);
  r.c1 = zk_fp_mul_call(zk_fp_sub(FP_(ZERO), a.c1), t);
  return r;
}
