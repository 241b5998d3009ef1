// ---- zkpipe Fp2 arithmetic ----
// Fp2 = Fp[u] / (u^2 + 1) over zkpipe's branch-free Fp operations (arith.cu), with the Fp
// products out of line: ec-gpu-gen's Fp2 multiplication interleaves three inlined ones and
// spilled 420 bytes in G2's bucket loop. benches/NOTES.md has the figures of each choice.

// Double-width values, for a·b - c·d with two reductions (zk_fp2_mul_sub) and the norm.
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
// The double-width products and the reductions out of line.
__noinline__ DEVICE zk_fpw zk_fp_wide(FP a, FP b) {
  zk_fpw r;
  FP_(mult_v1)(a.val, b.val, r.v);
  return r;
}
__noinline__ DEVICE FP zk_fp_redc_call(zk_fpw t) { return zk_fp_redc(t.v); }
// An Fp product out of line: CIOS, for every Fp product of Fp2 but a·b - c·d's (G1's bucket
// additions call it too, as ZK_FPC_mul).
__noinline__ DEVICE FP zk_fp_mul_cios_call(FP a, FP b) { return zk_fp_mul_cios(a, b); }
// Karatsuba's three products, c0 = a0·b0 - a1·b1 and c1 = (a0 + a1)(b0 + b1) - a0·b0 - a1·b1,
// each a CIOS product: faster in G2's bucket additions than double-width products reduced
// twice (lazy reduction), whose schoolbook product and separate reduction take more
// instructions than CIOS's interleaved rows.
__noinline__ DEVICE FP2 zk_fp2_mul(FP2 a, FP2 b) {
  const FP t0 = zk_fp_mul_cios_call(a.c0, b.c0);
  const FP t1 = zk_fp_mul_cios_call(a.c1, b.c1);
  const FP t2 = zk_fp_mul_cios_call(zk_fp_add(a.c0, a.c1), zk_fp_add(b.c0, b.c1));
  FP2 r;
  r.c0 = zk_fp_sub(t0, t1);
  r.c1 = zk_fp_sub(zk_fp_sub(t2, t0), t1);
  return r;
}

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

// (a0 + a1·u)^2 = (a0 + a1)(a0 - a1) + 2·a0·a1·u.
DEVICE inline FP2 zk_fp2_sqr(FP2 a) {
  const FP ab = zk_fp_mul_cios_call(a.c0, a.c1);
  FP2 r;
  r.c0 = zk_fp_mul_cios_call(zk_fp_add(a.c0, a.c1), zk_fp_sub(a.c0, a.c1));
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
      r = zk_fp_mul_cios_call(r, r);
      if ((e >> bit) & 1u) r = zk_fp_mul_cios_call(r, a);
    }
  }
  return r;
}
// The norm a0^2 + a1^2 of a in Fp, and the conjugate of a times t: a^-1 is the conjugate
// times the norm's inverse. The norm takes both squares at double width and reduces their
// sum (below 2p^2 < p·2^384) once.
__noinline__ DEVICE FP zk_fp2_norm(FP2 a) {
  zk_fpw s, t;
  zk_fp_sqr_wide(a.c0, s.v);
  zk_fp_sqr_wide(a.c1, t.v);
  zk_fpw_add(s.v, t.v);
  return zk_fp_redc(s.v);
}
DEVICE inline FP2 zk_fp2_conjugate_times(FP2 a, FP t) {
  FP2 r;
  r.c0 = zk_fp_mul_cios_call(a.c0, t);
  r.c1 = zk_fp_mul_cios_call(zk_fp_sub(FP_(ZERO), a.c1), t);
  return r;
}
DEVICE inline FP2 zk_fp2_inverse(FP2 a) {
  return zk_fp2_conjugate_times(a, zk_fp_inverse(zk_fp2_norm(a)));
}

// Inverses in variable time, for values that are not secret (the batch-affine bucket sums'
// denominators): Bernstein and Yang's divsteps, ZK_BY_STEPS at a time on the low words of f
// and g, each batch's transition matrix (u v; q r), |u| + |v| and |q| + |r| at most
// 2^ZK_BY_STEPS, then applied to the whole f and g (13 limbs, signed, an exact division by
// 2^ZK_BY_STEPS) and to the coefficients d and e mod p (a Montgomery-style division: m·p
// added so that the low ZK_BY_STEPS bits are zero). From f = p, g = a, d = 0, e = 1 it keeps
// d·a = f mod p, and stops when g = 0 with f = ±1. benches/wip/by_inverse.py models it.
#define ZK_BY_STEPS 30
#define ZK_BY_LIMBS (FP_(LIMBS) + 1)
// The divsteps on the low words f and g (f odd): the new delta, and the matrix in m. A step
// with g odd swaps (f, g) = (g, -f) when delta > 0 and then halves g + f; a step with g even
// halves g, and a run of them is taken at once (variable time).
DEVICE inline int zk_by_divsteps(int delta, uint32_t f, uint32_t g, int32_t m[4]) {
  int32_t u = 1, v = 0, q = 0, r = 1;
  int i = 0;
  for (;;) {
    const int z = __ffs(g | (1u << (ZK_BY_STEPS - i))) - 1;
    g >>= z;
    u = (int32_t)((uint32_t)u << z);
    v = (int32_t)((uint32_t)v << z);
    delta += z;
    i += z;
    if (i == ZK_BY_STEPS) break;
    if (delta > 0) {
      delta = -delta;
      const uint32_t t = f;
      f = g;
      g = 0u - t;
      const int32_t tu = u, tv = v;
      u = q;
      v = r;
      q = -tu;
      r = -tv;
    }
    delta += 1;
    g += f;
    q += u;
    r += v;
    g >>= 1;
    u *= 2;
    v *= 2;
    i += 1;
    if (i == ZK_BY_STEPS) break;
  }
  m[0] = u;
  m[1] = v;
  m[2] = q;
  m[3] = r;
  return delta;
}
// Limb i of a 13-limb signed value: the top limb carries the sign.
DEVICE inline long long zk_by_limb(const uint32_t* x, int i) {
  return i < ZK_BY_LIMBS - 1 ? (long long)x[i] : (long long)(int32_t)x[i];
}
// (x, y) = (a·x + b·y, c·x + d·y) / 2^ZK_BY_STEPS for 13-limb signed x, y, the divisions exact.
DEVICE inline void zk_by_update_fg(uint32_t* x, uint32_t* y, const int32_t* m) {
  uint32_t nx[ZK_BY_LIMBS], ny[ZK_BY_LIMBS];
  long long cx = 0, cy = 0;
#pragma unroll
  for (int i = 0; i < ZK_BY_LIMBS; i++) {
    const long long xi = zk_by_limb(x, i), yi = zk_by_limb(y, i);
    cx += (long long)m[0] * xi + (long long)m[1] * yi;
    cy += (long long)m[2] * xi + (long long)m[3] * yi;
    nx[i] = (uint32_t)cx;
    ny[i] = (uint32_t)cy;
    cx >>= 32;
    cy >>= 32;
  }
#pragma unroll
  for (int i = 0; i < ZK_BY_LIMBS - 1; i++) {
    x[i] = (nx[i] >> ZK_BY_STEPS) | (nx[i + 1] << (32 - ZK_BY_STEPS));
    y[i] = (ny[i] >> ZK_BY_STEPS) | (ny[i + 1] << (32 - ZK_BY_STEPS));
  }
  x[ZK_BY_LIMBS - 1] = (uint32_t)((int32_t)nx[ZK_BY_LIMBS - 1] >> ZK_BY_STEPS);
  y[ZK_BY_LIMBS - 1] = (uint32_t)((int32_t)ny[ZK_BY_LIMBS - 1] >> ZK_BY_STEPS);
}
// (a·x + b·y) / 2^ZK_BY_STEPS mod p, in [0, p), for x, y in [0, p) and |a| + |b| <= 2^ZK_BY_STEPS:
// the sum plus k·p, k < 2^ZK_BY_STEPS chosen so that the low bits vanish, lies in
// (-2^ZK_BY_STEPS·p, 2^(ZK_BY_STEPS + 1)·p), its quotient in (-p, 2p).
DEVICE inline FP zk_by_combine(const FP x, const FP y, int32_t a, int32_t b) {
  const uint32_t mask = (1u << ZK_BY_STEPS) - 1u;
  const uint32_t low = (uint32_t)((long long)a * x.val[0] + (long long)b * y.val[0]);
  const long long k = (long long)((low * FP_(INV)) & mask);
  uint32_t s[ZK_BY_LIMBS];
  long long c = 0;
#pragma unroll
  for (int i = 0; i < FP_(LIMBS); i++) {
    c += (long long)a * x.val[i] + (long long)b * y.val[i] + k * FP_(P).val[i];
    s[i] = (uint32_t)c;
    c >>= 32;
  }
  s[FP_(LIMBS)] = (uint32_t)c;
  FP r;
#pragma unroll
  for (int i = 0; i < FP_(LIMBS); i++)
    r.val[i] = (s[i] >> ZK_BY_STEPS) | (s[i + 1] << (32 - ZK_BY_STEPS));
  if ((int32_t)s[FP_(LIMBS)] < 0) return FP_(add_)(r, FP_(P));  // (-p, 0): wraps to [0, p)
  return zk_fp_reduce_once(r);                                   // [0, 2p)
}
// R^3 mod p (R = 2^384): the Montgomery form of the inverse of a Montgomery form a·R is
// (a·R)^-1 times R^3, reduced once.
CONSTANT FP zk_fp_r3 = {{3645678048u, 3980962923u, 61320696u, 828343070u, 1633561053u,
                         2589144362u, 2451445601u, 885018206u, 1701988136u, 621990965u,
                         2440387917u, 178664544u}};
// The bound on batches: 1102 divsteps suffice for any 381-bit input (Bernstein and Yang,
// theorem 11.2), 37 batches; the loop ends at g = 0, sooner for most.
#define ZK_BY_MAX_BATCHES 38
__noinline__ DEVICE FP zk_fp_inverse_vartime(FP a) {
  uint32_t f[ZK_BY_LIMBS], g[ZK_BY_LIMBS];
#pragma unroll
  for (int i = 0; i < FP_(LIMBS); i++) {
    f[i] = FP_(P).val[i];
    g[i] = a.val[i];
  }
  f[ZK_BY_LIMBS - 1] = 0;
  g[ZK_BY_LIMBS - 1] = 0;
  FP d = FP_(ZERO), e = FP_(ZERO);
  e.val[0] = 1;
  int delta = 1;
  for (int batch = 0; batch < ZK_BY_MAX_BATCHES; batch++) {
    uint32_t any = 0;
#pragma unroll
    for (int i = 0; i < ZK_BY_LIMBS; i++) any |= g[i];
    if (any == 0) break;
    int32_t m[4];
    delta = zk_by_divsteps(delta, f[0], g[0], m);
    zk_by_update_fg(f, g, m);
    const FP nd = zk_by_combine(d, e, m[0], m[1]);
    e = zk_by_combine(d, e, m[2], m[3]);
    d = nd;
  }
  // f = ±1 for a != 0 (d = 0 for a = 0, whose inverse comes out 0).
  if ((int32_t)f[ZK_BY_LIMBS - 1] < 0) d = zk_fp_sub(FP_(ZERO), d);
  return zk_fp_mul_cios_call(d, zk_fp_r3);
}
DEVICE inline FP2 zk_fp2_inverse_vartime(FP2 a) {
  return zk_fp2_conjugate_times(a, zk_fp_inverse_vartime(zk_fp2_norm(a)));
}
