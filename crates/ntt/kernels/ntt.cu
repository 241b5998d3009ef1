// Kernels of zkpipe-ntt: Stockham radix-2^deg passes with shared-memory butterflies, twiddles
// from full or two-level tables, pointwise work (scalings, the H step's product and
// subtraction) fused into the first or last pass, and bit reversal. Arithmetic: zkpipe's
// branch-free Fr operations (the prelude's arith.cu), faster than ec-gpu-gen's here
// (benches/NOTES.md).
//
// A power w^e (e < 2^28) is lo[e mod 2^lo_bits] * hi[e >> lo_bits]: two small tables that stay
// in L2 instead of one of n entries, for one extra multiplication.

DEVICE inline uint zk_bitrev(uint i, uint bits) {
  return bits == 0 ? 0u : (__brev(i) >> (32u - bits));
}

// Global memory: one element as two 16-byte accesses (allocations are 256-byte aligned and
// elements 32 bytes, so every element is 16-byte aligned).
DEVICE inline FR zk_load(const FR* p) {
  const uint4* q = (const uint4*)p;
  const uint4 a = q[0];
  const uint4 b = q[1];
  FR r;
  r.val[0] = a.x; r.val[1] = a.y; r.val[2] = a.z; r.val[3] = a.w;
  r.val[4] = b.x; r.val[5] = b.y; r.val[6] = b.z; r.val[7] = b.w;
  return r;
}

DEVICE inline void zk_store(FR* p, const FR v) {
  uint4* q = (uint4*)p;
  q[0] = make_uint4(v.val[0], v.val[1], v.val[2], v.val[3]);
  q[1] = make_uint4(v.val[4], v.val[5], v.val[6], v.val[7]);
}

DEVICE inline FR zk_power(const FR* lo, const FR* hi, uint e, uint lo_bits) {
  const uint l = e & ((1u << lo_bits) - 1u);
  const uint h = e >> lo_bits;
  if (h == 0) return zk_load(lo + l);
  if (l == 0) return zk_load(hi + h);
  return zk_fr_mul(zk_load(lo + l), zk_load(hi + h));
}

// c * s^e from tables scaled by c: lo[l] = c * s^l, hi[h] = s^(h << lo_bits).
DEVICE inline FR zk_scaled(const FR* lo, const FR* hi, uint e, uint lo_bits) {
  const uint l = e & ((1u << lo_bits) - 1u);
  const uint h = e >> lo_bits;
  if (h == 0) return zk_load(lo + l);
  return zk_fr_mul(zk_load(lo + l), zk_load(hi + h));
}

// w^e from a full table of w^j for j < n/2 (w^(j + n/2) = -w^j): one load instead of two
// loads and a multiplication.
DEVICE inline FR zk_twiddle(const FR* full, uint e, uint half) {
  if (e < half) return zk_load(full + e);
  return zk_fr_sub(FR_(ZERO), zk_load(full + (e - half)));
}

// w^e from the full table when there is one, else from the two-level tables.
DEVICE inline FR zk_root(const FR* full, const FR* lo, const FR* hi, uint e, uint lo_bits,
                         uint half) {
  return full ? zk_twiddle(full, e, half) : zk_power(lo, hi, e, lo_bits);
}

// out[i] = w^i for i < count, from the two-level tables (builds a full table).
KERNEL void ntt_expand(const FR* __restrict__ lo, const FR* __restrict__ hi, uint lo_bits,
                       uint count, FR* __restrict__ out) {
  const uint i = GET_GLOBAL_ID();
  if (i >= count) return;
  zk_store(out + i, zk_power(lo, hi, i, lo_bits));
}

// Shared memory holds elements word-sliced (word j of element i at s[j * stride + i]), so that
// a warp touching consecutive elements touches 32 different banks. The words are addressed
// from s + i, so that j * stride is an offset the load or store carries (indexing s with
// j * stride + i, a 32-bit sum that may wrap, cost an address computation a word).
DEVICE inline FR zk_sget(const uint* s, uint stride, uint i) {
  const uint* e = s + i;
  FR r;
#pragma unroll
  for (int j = 0; j < 8; j++) r.val[j] = e[j * stride];
  return r;
}

DEVICE inline void zk_sput(uint* s, uint stride, uint i, const FR v) {
  uint* e = s + i;
#pragma unroll
  for (int j = 0; j < 8; j++) e[j * stride] = v.val[j];
}

// Where a pass keeps element i of its 2^deg (its bank is slot mod 32): i with its low five bits
// XORed by 31·i_5 + i_6 + 2·i_7, a permutation within each run of 32. The 32 elements a warp
// reads or writes at once differ in five bits: in a middle round, those of i_0..i_5 but the
// round's own (i_0..i_4 when the round's bit is above i_5); in the last round, which reads 2m
// and 2m + 1 with m = bitrev(lid), i_1..i_5 (degree 6), i_2..i_6 (7) or i_3..i_7 (8). With the
// XOR each such set lands in 32 banks; unswizzled (bank i mod 32) they were 2-, 4- or 8-way
// conflicts.
DEVICE inline uint zk_slot(uint i) {
  const uint q = i >> 5;
  return i ^ ((q & 1u) * 31u) ^ ((q >> 1) & 1u) ^ ((q >> 1) & 2u);
}

// One pass over n = 2^lgn elements: the groups of stride p = 2^lgp, 2^deg elements each, are
// transformed with deg radix-2 rounds in shared memory, the twiddles between passes folded
// into the rounds' factors, and written for the next pass (natural order after the last).
// After ec-gpu-gen's radix_fft (itself after bealto.com's GPU FFT), with table twiddles
// instead of per-thread powers and word-sliced shared memory.
// Grid: n >> deg blocks of 2^(deg-1) threads; dynamic shared memory: 3 * 2^(deg-1) elements.
// `full` (may be null): w^j for j < n/2, used instead of the two-level tables.
// Pointwise work fused into the pass, so that it costs no pass over memory of its own, chosen
// by the bits of `fuse` (e: the element's natural index): 1 (first pass only) multiplies input
// element e by c * s^e, from the scaled tables slo/shi (zk_scaled), 4 (first pass only) by
// times[e]; 2 (last pass only) multiplies output element e by c * s^e, then 8 (last pass only)
// subtracts minus[e]. The H step's last transform uses 4 | 2 | 8.
// The pass for a degree known at compile time (zk_pass dispatches on it): the shared-memory
// words' offsets j * 2^deg become immediates instead of per-access address arithmetic.
template <uint DEG>
DEVICE inline void zk_pass_deg(const FR* __restrict__ x, FR* __restrict__ y,
                               const FR* __restrict__ lo, const FR* __restrict__ hi, uint lo_bits,
                               const FR* __restrict__ full, uint lgn, uint lgp,
                               const FR* __restrict__ slo, const FR* __restrict__ shi,
                               uint s_lo_bits, uint fuse, const FR* __restrict__ times,
                               const FR* __restrict__ minus) {
  const uint deg = DEG;
  extern __shared__ uint zk_words[];
  const uint count = 1u << deg;
  const uint counth = count >> 1;
  uint* u = zk_words;
  uint* pq = zk_words + 8 * count;
  const uint lid = threadIdx.x;
  const uint index = blockIdx.x;
  const size_t t = (size_t)1 << (lgn - deg);
  const size_t p = (size_t)1 << lgp;
  const uint k = index & ((1u << lgp) - 1u);
  x += index;
  y += (((size_t)(index - k)) << deg) + k;

  const uint half = 1u << (lgn - 1);
  const uint shift = lgn - lgp - deg;
  // This thread's two elements, lid and lid + counth: exactly the pair of the first round.
  FR v[2];
#pragma unroll
  for (uint h = 0; h < 2; h++) {
    const uint i = lid + h * counth;
    v[h] = zk_load(x + i * t);
    if (fuse & 1u) v[h] = zk_fr_mul(v[h], zk_scaled(slo, shi, index + (uint)(i * t), s_lo_bits));
    if (fuse & 4u) v[h] = zk_fr_mul(v[h], zk_load(times + index + i * t));
  }
  // The pass computes y_j = sum_i x_i (T w^j)^i for j < 2^deg, T = w_N^(k << shift) the
  // twiddle between passes and w the 2^deg-th root (w = w_N^(p << shift)). Round r splits
  // each sub-transform of base B (the first: T) into its even outputs, base B, and its odd
  // ones, base B w^(2^r), by butterflies (a, b) -> (a + B^m b, a - B^m b), m = 2^(deg-1-r)
  // its half-length. Sub-transform s of round r (its elements s·2^(deg-r) on) has base
  // T w^bitrev_r(s), so its factor is w_N^((k + bitrev_r(s)·p) << (shift + deg - 1 - r)),
  // an exponent below N/2: T's powers ride in the butterflies' products instead of taking
  // one product an element before them.
  const uint pu = 1u << lgp;
  FR o0, o1;
  {
    // First round in registers: one factor for the whole block, none when k = 0.
    const FR b =
        k == 0 ? v[1] : zk_fr_mul(zk_root(full, lo, hi, k << (shift + deg - 1), lo_bits, half), v[1]);
    o0 = zk_fr_add(v[0], b);
    o1 = zk_fr_sub(v[0], b);
  }
  if (deg > 1) {
    // The middle rounds' factors: entry 2^r + s of pq is sub-transform s's in round r.
    if (lid != 0 && deg > 2) {
      const uint r = 31u - __clz(lid);
      const uint s = lid - (1u << r);
      const uint e = (k + zk_bitrev(s, r) * pu) << (shift + deg - 1u - r);
      zk_sput(pq, counth, lid, zk_root(full, lo, hi, e, lo_bits, half));
    }
    zk_sput(u, count, zk_slot(lid), o0);
    zk_sput(u, count, zk_slot(lid + counth), o1);
    __syncthreads();
    for (uint rnd = 1; rnd + 1 < deg; rnd++) {
      const uint bit = counth >> rnd;
      const uint di = lid & (bit - 1u);
      const uint i0 = zk_slot((lid << 1) - di);
      const uint i1 = zk_slot((lid << 1) - di + bit);
      const FR a = zk_sget(u, count, i0);
      const FR b = zk_fr_mul(zk_sget(pq, counth, (1u << rnd) + (lid >> (deg - 1u - rnd))),
                             zk_sget(u, count, i1));
      zk_sput(u, count, i0, zk_fr_add(a, b));
      zk_sput(u, count, i1, zk_fr_sub(a, b));
      __syncthreads();
    }
    // Last round in registers: outputs lid and lid + counth sit at 2m and 2m + 1
    // (m = bitrev(lid) over deg - 1 bits), sub-transform m, whose factor is w_N^((k + lid·p)
    // << shift).
    const uint m = zk_bitrev(lid, deg - 1);
    const FR a = zk_sget(u, count, zk_slot(2 * m));
    const FR last = zk_root(full, lo, hi, (k + lid * pu) << shift, lo_bits, half);
    const FR b = zk_fr_mul(last, zk_sget(u, count, zk_slot(2 * m + 1)));
    o0 = zk_fr_add(a, b);
    o1 = zk_fr_sub(a, b);
  }
  const uint base = ((index - k) << deg) + k;  // y's offset from the output's start
  if (fuse & 2u) {
    o0 = zk_fr_mul(o0, zk_scaled(slo, shi, base + (uint)(lid * p), s_lo_bits));
    o1 = zk_fr_mul(o1, zk_scaled(slo, shi, base + (uint)((lid + counth) * p), s_lo_bits));
  }
  if (fuse & 8u) {
    o0 = zk_fr_sub(o0, zk_load(minus + base + lid * p));
    o1 = zk_fr_sub(o1, zk_load(minus + base + (lid + counth) * p));
  }
  zk_store(y + lid * p, o0);
  zk_store(y + (lid + counth) * p, o1);
}

// One pass of degree deg, 1 to 8 (MAX_DEG, the passes' largest: pass_degrees in cuda.rs); the
// host checks deg before every launch (check_pass in kernels.rs).
DEVICE inline void zk_pass(const FR* __restrict__ x, FR* __restrict__ y, const FR* __restrict__ lo,
                           const FR* __restrict__ hi, uint lo_bits, const FR* __restrict__ full,
                           uint lgn, uint lgp, uint deg, const FR* __restrict__ slo,
                           const FR* __restrict__ shi, uint s_lo_bits, uint fuse,
                           const FR* __restrict__ times, const FR* __restrict__ minus) {
#define ZK_PASS_DEG(d)                                                                   \
  case d:                                                                                \
    zk_pass_deg<d>(x, y, lo, hi, lo_bits, full, lgn, lgp, slo, shi, s_lo_bits, fuse, times, \
                   minus);                                                               \
    break;
  switch (deg) {
    ZK_PASS_DEG(8) ZK_PASS_DEG(7) ZK_PASS_DEG(6) ZK_PASS_DEG(5)
    ZK_PASS_DEG(4) ZK_PASS_DEG(3) ZK_PASS_DEG(2) ZK_PASS_DEG(1)
  }
#undef ZK_PASS_DEG
}

// The unscaled pass has its own entry: the scaling's registers cost the 8-bit passes a block
// per SM (benches/NOTES.md).
KERNEL void ntt_pass(const FR* __restrict__ x, FR* __restrict__ y, const FR* __restrict__ lo,
                     const FR* __restrict__ hi, uint lo_bits, const FR* __restrict__ full,
                     uint lgn, uint lgp, uint deg) {
  zk_pass(x, y, lo, hi, lo_bits, full, lgn, lgp, deg, lo, hi, lo_bits, 0u, nullptr, nullptr);
}

KERNEL void ntt_pass_scaled(const FR* __restrict__ x, FR* __restrict__ y,
                            const FR* __restrict__ lo, const FR* __restrict__ hi, uint lo_bits,
                            const FR* __restrict__ full, uint lgn, uint lgp, uint deg,
                            const FR* __restrict__ slo, const FR* __restrict__ shi,
                            uint s_lo_bits, uint scale_at) {
  // Only the table scalings (bits 1 and 2): the vector operations' code is not compiled in.
  zk_pass(x, y, lo, hi, lo_bits, full, lgn, lgp, deg, slo, shi, s_lo_bits, scale_at & 3u,
          nullptr, nullptr);
}

// Every fused operation, the vectors' included (`fuse` as in zk_pass).
KERNEL void ntt_pass_fused(const FR* __restrict__ x, FR* __restrict__ y,
                           const FR* __restrict__ lo, const FR* __restrict__ hi, uint lo_bits,
                           const FR* __restrict__ full, uint lgn, uint lgp, uint deg,
                           const FR* __restrict__ slo, const FR* __restrict__ shi,
                           uint s_lo_bits, uint fuse, const FR* __restrict__ times,
                           const FR* __restrict__ minus) {
  zk_pass(x, y, lo, hi, lo_bits, full, lgn, lgp, deg, slo, shi, s_lo_bits, fuse, times, minus);
}

// y[bitrev(i)] = x[i] over n = 2^lgn elements.
KERNEL void ntt_bit_reverse(const FR* __restrict__ x, FR* __restrict__ y, uint lgn) {
  const uint i = GET_GLOBAL_ID();
  if (i >= (1u << lgn)) return;
  y[zk_bitrev(i, lgn)] = x[i];
}

// x[i] -= y[i] for i < n: the lean H step's last subtraction of C/Z.
KERNEL void ntt_sub(FR* __restrict__ x, const FR* __restrict__ y, uint n) {
  const uint i = GET_GLOBAL_ID();
  if (i < n) x[i] = zk_fr_sub(x[i], y[i]);
}
