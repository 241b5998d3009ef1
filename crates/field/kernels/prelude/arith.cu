// ---- zkpipe field arithmetic ----
// Branch-free modular addition, subtraction and Montgomery multiplication: the final
// conditional subtraction of p is computed always and selected by the borrow, where
// ec-gpu-gen's compares limb by limb and branches. zk_<n>_mul_sos multiplies with
// ec-gpu-gen's product and reduction; zk_<n>_mul_cios is our own (below). The NTT measured
// faster with the branch-free operations (benches/NOTES.md).
//
// Carries pass between separate asm statements, as in ec-gpu-gen's chains: each is volatile,
// so the compiler keeps them in order with nothing between them.
DEVICE inline uint32_t zk_sub_cc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
DEVICE inline uint32_t zk_subc_cc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
DEVICE inline uint32_t zk_subc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// The operations of a field T of L limbs (ec-gpu-gen's names through F), modulus below 2^(32L - 1),
// so that a + b and the unreduced Montgomery product (< 2p) fit in L limbs:
// zk_<n>_reduce_once (r mod p for r < 2p), zk_<n>_add, zk_<n>_sub, zk_<n>_mul_sos.
#define ZK_FIELD_OPS(n, T, F, L)                                                   \
  DEVICE inline T zk_##n##_reduce_once(T r) {                                      \
    T d;                                                                           \
    d.val[0] = zk_sub_cc(r.val[0], F(P).val[0]);                                   \
    _Pragma("unroll") for (int i = 1; i < L; i++)                                  \
        d.val[i] = zk_subc_cc(r.val[i], F(P).val[i]);                              \
    const uint32_t borrow = zk_subc(0, 0);                                         \
    _Pragma("unroll") for (int i = 0; i < L; i++)                                  \
        r.val[i] = borrow ? r.val[i] : d.val[i];                                   \
    return r;                                                                      \
  }                                                                                \
  DEVICE inline T zk_##n##_add(T a, T b) {                                         \
    T r;                                                                           \
    r.val[0] = add_cc(a.val[0], b.val[0]);                                         \
    _Pragma("unroll") for (int i = 1; i < L - 1; i++)                              \
        r.val[i] = addc_cc(a.val[i], b.val[i]);                                    \
    r.val[L - 1] = addc(a.val[L - 1], b.val[L - 1]);                               \
    return zk_##n##_reduce_once(r);                                                \
  }                                                                                \
  DEVICE inline T zk_##n##_sub(T a, T b) {                                         \
    T r, t;                                                                        \
    r.val[0] = zk_sub_cc(a.val[0], b.val[0]);                                      \
    _Pragma("unroll") for (int i = 1; i < L; i++)                                  \
        r.val[i] = zk_subc_cc(a.val[i], b.val[i]);                                 \
    const uint32_t borrow = zk_subc(0, 0);                                         \
    t.val[0] = add_cc(r.val[0], F(P).val[0]);                                      \
    _Pragma("unroll") for (int i = 1; i < L - 1; i++)                              \
        t.val[i] = addc_cc(r.val[i], F(P).val[i]);                                 \
    t.val[L - 1] = addc(r.val[L - 1], F(P).val[L - 1]);                            \
    _Pragma("unroll") for (int i = 0; i < L; i++)                                  \
        r.val[i] = borrow ? t.val[i] : r.val[i];                                   \
    return r;                                                                      \
  }                                                                                \
  /* The Montgomery reduction of a double-width t < p·2^(32L): t / 2^(32L) mod p. */ \
  DEVICE inline T zk_##n##_redc(const uint32_t* t) {                               \
    uint32_t io[L];                                                                \
    _Pragma("unroll") for (int i = 0; i < L; i++) io[i] = t[i];                    \
    F(reduce)(io, F(INV), F(P).val);                                               \
    T r;                                                                           \
    r.val[0] = add_cc(t[L], io[0]);                                                \
    _Pragma("unroll") for (int i = 1; i < L - 1; i++)                              \
        r.val[i] = addc_cc(t[L + i], io[i]);                                       \
    r.val[L - 1] = addc(t[2 * L - 1], io[L - 1]);                                  \
    return zk_##n##_reduce_once(r);                                                \
  }                                                                                \
  /* Montgomery product: ec-gpu-gen's full product, then zk_<n>_redc. */            \
  DEVICE inline T zk_##n##_mul_sos(T a, T b) {                                     \
    uint32_t ab[2 * L];                                                            \
    F(mult_v1)(a.val, b.val, ab);                                                  \
    return zk_##n##_redc(ab);                                                      \
  }

ZK_FIELD_OPS(fr, FR, FR_, 8)
ZK_FIELD_OPS(fp, FP, FP_, 12)

// One reduction step of the CIOS product below (zk_<n>_mul_cios): m = lo[0]·INV, chosen so
// that adding m·p clears limb 0, and m·p added into both accumulators.
#define ZK_CIOS_REDUCE(n, T, F, L)                                                 \
  DEVICE inline void zk_##n##_cios_reduce(uint32_t* lo, uint32_t* hi) {           \
    const uint32_t m = lo[0] * F(INV);                                             \
    hi[0] = madlo_cc(m, F(P).val[1], hi[0]);                                       \
    hi[1] = madhic_cc(m, F(P).val[1], hi[1]);                                      \
    _Pragma("unroll") for (int j = 2; j < L; j += 2) {                             \
      hi[j] = madloc_cc(m, F(P).val[j + 1], hi[j]);                                \
      hi[j + 1] = madhic_cc(m, F(P).val[j + 1], hi[j + 1]);                        \
    }                                                                              \
    lo[0] = madlo_cc(m, F(P).val[0], lo[0]);                                       \
    lo[1] = madhic_cc(m, F(P).val[0], lo[1]);                                      \
    _Pragma("unroll") for (int j = 2; j < L; j += 2) {                             \
      lo[j] = madloc_cc(m, F(P).val[j], lo[j]);                                    \
      lo[j + 1] = madhic_cc(m, F(P).val[j], lo[j + 1]);                            \
    }                                                                              \
    hi[L - 1] = addc(hi[L - 1], 0);                                                \
  }

// Fr's INV, 2^32 - 1, as a value in constant memory that the compiler multiplies by rather
// than a negation it can see: given m = -l, ptxas folds the negation into the step's products
// m·r_j and issues each as two instructions (IMAD.X and IMAD.HI.U32.X); given l·INV, each is
// one IMAD.WIDE.U32.X (the counts are in benches/NOTES.md).
CONSTANT uint32_t zk_fr_inv = 0xffffffffu;

// Fr's step, from the shape of r's low limbs: r_0 = 1 and r_1 = 2^32 - 1, so INV = -1 and, with
// l = lo[0]: m = -l, m·r_0 = m (which clears limb 0, carrying 1 unless l = 0), and the low half
// of m·r_1 = m·2^32 - m is l. Four of the step's seventeen multiplications become additions and
// one a lone high half; the modulus lives in constant memory, so the compiler could not fold
// them itself.
DEVICE inline void zk_fr_cios_reduce(uint32_t* lo, uint32_t* hi) {
  const uint32_t l = lo[0];
  const uint32_t m = l * zk_fr_inv;  // -l
  const uint32_t m_r1_hi = __umulhi(m, 0xffffffffu);
  hi[0] = add_cc(hi[0], l);
  hi[1] = addc_cc(hi[1], m_r1_hi);
#pragma unroll
  for (int j = 2; j < 8; j += 2) {
    hi[j] = madloc_cc(m, FR_(P).val[j + 1], hi[j]);
    hi[j + 1] = madhic_cc(m, FR_(P).val[j + 1], hi[j + 1]);
  }
  lo[0] = add_cc(lo[0], m);
  lo[1] = addc_cc(lo[1], 0u);
#pragma unroll
  for (int j = 2; j < 8; j += 2) {
    lo[j] = madloc_cc(m, FR_(P).val[j], lo[j]);
    lo[j + 1] = madhic_cc(m, FR_(P).val[j], lo[j + 1]);
  }
  hi[7] = addc(hi[7], 0u);
}
ZK_CIOS_REDUCE(fp, FP, FP_, 12)

// Montgomery product, operand scanning with the reduction interleaved (CIOS), in two
// accumulators: `lo` holds limbs at even offsets from the current position, `hi` at odd ones,
// so that every row of products a_j·b_i adds into one of them in a single carry chain (the
// low and high halves of a_j·b_i for even j land on limbs j and j + 1 of `lo`, for odd j on
// limbs j - 1 and j of `hi`, one place up). After each row and its reduction (m·p, m chosen
// to clear limb 0) the value is divided by 2^32: `hi` becomes the low accumulator as it is,
// and the old low one, two limbs down (its limb 1 folded into the new limb 0), the high one;
// the shift costs nothing, as the next row's chain reads limb j + 2 and writes limb j.
// With the top limb of p below 2^31 no carry leaves the top of either accumulator (each
// top limb collects at most two high halves of products by a top limb of a or p, and a few
// carries), and the result is below 2p. Checked against Python's integers on 3·10^5 inputs
// (and Fp's, 12 limbs, on 1.5·10^5) before it was written here, and against blstrs by the
// field tests; Fr's own reduction step likewise (3.3·10^4 inputs, with zero low limbs).
#define ZK_MUL_CIOS(n, T, F, L)                                                    \
  /* One row after the first: (lo, hi) = the accumulators with their roles already */ \
  /* swapped (hi: the previous low one, its limb 0 cleared). */                    \
  DEVICE inline void zk_##n##_cios_row(uint32_t* lo, uint32_t* hi, const uint32_t* a, \
                                       uint32_t bi) {                              \
    lo[0] = add_cc(lo[0], hi[1]);                                                  \
    _Pragma("unroll") for (int j = 0; j < L - 2; j += 2) {                         \
      hi[j] = madloc_cc(a[j + 1], bi, hi[j + 2]);                                  \
      hi[j + 1] = madhic_cc(a[j + 1], bi, hi[j + 3]);                              \
    }                                                                              \
    hi[L - 2] = madloc_cc(a[L - 1], bi, 0);                                        \
    hi[L - 1] = madhic(a[L - 1], bi, 0);                                           \
    lo[0] = madlo_cc(a[0], bi, lo[0]);                                             \
    lo[1] = madhic_cc(a[0], bi, lo[1]);                                            \
    _Pragma("unroll") for (int j = 2; j < L; j += 2) {                             \
      lo[j] = madloc_cc(a[j], bi, lo[j]);                                          \
      lo[j + 1] = madhic_cc(a[j], bi, lo[j + 1]);                                  \
    }                                                                              \
    hi[L - 1] = addc(hi[L - 1], 0);                                                \
    zk_##n##_cios_reduce(lo, hi);                                                  \
  }                                                                                \
  /* Row 0: a·b0 into the accumulators, and its reduction. */                     \
  DEVICE inline void zk_##n##_cios_first(uint32_t* x, uint32_t* y, const uint32_t* a, \
                                         uint32_t b0) {                            \
    _Pragma("unroll") for (int j = 0; j < L; j += 2) {                             \
      x[j] = a[j] * b0;                                                            \
      x[j + 1] = __umulhi(a[j], b0);                                               \
      y[j] = a[j + 1] * b0;                                                        \
      y[j + 1] = __umulhi(a[j + 1], b0);                                           \
    }                                                                              \
    zk_##n##_cios_reduce(x, y);                                                    \
  }                                                                                \
  /* After the last (odd) row: x + y / 2^32, y's limb 0 being cleared. */          \
  DEVICE inline T zk_##n##_cios_last(const uint32_t* x, const uint32_t* y) {      \
    T r;                                                                           \
    r.val[0] = add_cc(x[0], y[1]);                                                 \
    _Pragma("unroll") for (int j = 1; j < L - 1; j++)                              \
        r.val[j] = addc_cc(x[j], y[j + 1]);                                        \
    r.val[L - 1] = addc(x[L - 1], 0);                                              \
    return zk_##n##_reduce_once(r);                                                \
  }                                                                                \
  DEVICE inline T zk_##n##_mul_cios(T a, T b) {                                    \
    uint32_t x[L], y[L];                                                           \
    zk_##n##_cios_first(x, y, a.val, b.val[0]);                                    \
    _Pragma("unroll") for (int i = 1; i < L; i++) {                                \
      if (i & 1)                                                                   \
        zk_##n##_cios_row(y, x, a.val, b.val[i]);                                  \
      else                                                                         \
        zk_##n##_cios_row(x, y, a.val, b.val[i]);                                  \
    }                                                                              \
    return zk_##n##_cios_last(x, y);                                               \
  }

ZK_MUL_CIOS(fr, FR, FR_, 8)
ZK_MUL_CIOS(fp, FP, FP_, 12)

// Montgomery squaring: the full square first, each cross product a_i·a_j (i < j) computed
// once and the sum doubled, the squares a_i^2 added on the diagonal, then zk_<n>_redc. That is
// L(L - 1)/2 + L limb products where a multiplication takes L^2 (66 + 12 instead of 144 for
// Fp), the reduction being the same. The cross products go in the even/odd form of the CIOS
// product, so that each one's low and high halves sit next to each other in one carry chain
// (one IMAD.WIDE on sm_90 rather than two multiplications): products with i + j odd into t,
// one limb down (limbs i + j - 1 and i + j), those with i + j even into u (limbs i + j and
// i + j + 1). Row i of either is one chain over j = first, first + 2, ..., its carry added
// into the limb above, which holds at most the previous row's carry. The cross sum is below
// a^2 / 2, so u + t·2^32 doubled fits 2L limbs, and a^2 < p^2 < p·2^(32L) is what
// zk_<n>_redc takes. Checked against Python's integers (Fp and Fr, 2.4·10^4 inputs each,
// with zero and all-ones limbs) before it was written here, and against blstrs by the field
// tests.
#define ZK_SQR(n, T, F, L)                                                         \
  /* Row i: a_i·a_j for j = first, first + 2, ... < L into acc, at limb i + j - down. */ \
  DEVICE inline void zk_##n##_sqr_row(uint32_t* acc, const uint32_t* a, int i, int first, \
                                      int down) {                                 \
    acc[i + first - down] = madlo_cc(a[i], a[first], acc[i + first - down]);      \
    acc[i + first - down + 1] = madhic_cc(a[i], a[first], acc[i + first - down + 1]); \
    int j = first + 2;                                                             \
    _Pragma("unroll") for (; j < L; j += 2) {                                      \
      acc[i + j - down] = madloc_cc(a[i], a[j], acc[i + j - down]);               \
      acc[i + j - down + 1] = madhic_cc(a[i], a[j], acc[i + j - down + 1]);       \
    }                                                                              \
    acc[i + j - down] = addc(acc[i + j - down], 0);                                \
  }                                                                                \
  /* a^2 at double width, into u[0..2L). */                                       \
  DEVICE inline void zk_##n##_sqr_wide(T a, uint32_t* u) {                         \
    uint32_t t[2 * L];                                                             \
    _Pragma("unroll") for (int k = 0; k < 2 * L; k++) {                            \
      t[k] = 0;                                                                    \
      u[k] = 0;                                                                    \
    }                                                                              \
    _Pragma("unroll") for (int i = 0; i < L - 1; i++) zk_##n##_sqr_row(t, a.val, i, i + 1, 1); \
    _Pragma("unroll") for (int i = 0; i < L - 2; i++) zk_##n##_sqr_row(u, a.val, i, i + 2, 0); \
    /* u += t·2^32 (t's top limb is 0), then doubled. */                           \
    u[1] = add_cc(u[1], t[0]);                                                     \
    _Pragma("unroll") for (int k = 2; k < 2 * L - 1; k++) u[k] = addc_cc(u[k], t[k - 1]); \
    u[2 * L - 1] = addc(u[2 * L - 1], t[2 * L - 2]);                               \
    u[0] = add_cc(u[0], u[0]);                                                     \
    _Pragma("unroll") for (int k = 1; k < 2 * L - 1; k++) u[k] = addc_cc(u[k], u[k]); \
    u[2 * L - 1] = addc(u[2 * L - 1], u[2 * L - 1]);                               \
    u[0] = madlo_cc(a.val[0], a.val[0], u[0]);                                     \
    u[1] = madhic_cc(a.val[0], a.val[0], u[1]);                                    \
    _Pragma("unroll") for (int i = 1; i < L - 1; i++) {                            \
      u[2 * i] = madloc_cc(a.val[i], a.val[i], u[2 * i]);                          \
      u[2 * i + 1] = madhic_cc(a.val[i], a.val[i], u[2 * i + 1]);                  \
    }                                                                              \
    u[2 * L - 2] = madloc_cc(a.val[L - 1], a.val[L - 1], u[2 * L - 2]);            \
    u[2 * L - 1] = madhic(a.val[L - 1], a.val[L - 1], u[2 * L - 1]);               \
  }                                                                                \
  DEVICE inline T zk_##n##_sqr(T a) {                                              \
    uint32_t u[2 * L];                                                             \
    zk_##n##_sqr_wide(a, u);                                                       \
    return zk_##n##_redc(u);                                                       \
  }

ZK_SQR(fr, FR, FR_, 8)
ZK_SQR(fp, FP, FP_, 12)

// Fr multiplies by CIOS (the faster for the NTT: benches/NOTES.md). zk_fp_mul keeps the
// product-then-reduction form, which G2's bucket additions were tuned on; G1's call
// zk_fp_mul_cios (msm.cu).
DEVICE inline FR zk_fr_mul(FR a, FR b) { return zk_fr_mul_cios(a, b); }
DEVICE inline FP zk_fp_mul(FP a, FP b) { return zk_fp_mul_sos(a, b); }


