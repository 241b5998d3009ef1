// Kernels of zkpipe-ntt: Stockham radix-2^deg passes with shared-memory butterflies, powers
// from two-level tables, scaling, the H step's pointwise combination, and bit reversal.
//
// A power w^e (e < 2^28) is lo[e mod 2^lo_bits] * hi[e >> lo_bits]: two small tables that stay
// in L2 instead of one of n entries, for one extra multiplication.

DEVICE inline FR zk_power(const FR* lo, const FR* hi, uint e, uint lo_bits) {
  const uint l = e & ((1u << lo_bits) - 1u);
  const uint h = e >> lo_bits;
  if (h == 0) return lo[l];
  if (l == 0) return hi[h];
  return FR_(mul)(lo[l], hi[h]);
}

DEVICE inline uint zk_bitrev(uint i, uint bits) {
  return bits == 0 ? 0u : (__brev(i) >> (32u - bits));
}

// One pass over n = 2^lgn elements: the groups of stride p = 2^lgp, 2^deg elements each, are
// twiddled, transformed with deg radix-2 rounds in shared memory, and written in place for the
// next pass (natural order after the last). After ec-gpu-gen's radix_fft (itself after
// bealto.com's GPU FFT), with table twiddles instead of per-thread powers.
// Grid: n >> deg blocks of 2^(deg-1) threads; dynamic shared memory: 3 * 2^(deg-1) elements.
KERNEL void ntt_pass(const FR* __restrict__ x, FR* __restrict__ y, const FR* __restrict__ lo,
                     const FR* __restrict__ hi, uint lo_bits, uint lgn, uint lgp, uint deg) {
  extern __shared__ FR zk_smem[];
  const uint count = 1u << deg;
  const uint counth = count >> 1;
  FR* u = zk_smem;
  FR* pq = zk_smem + count;
  const uint lid = threadIdx.x;
  const uint index = blockIdx.x;
  const size_t t = (size_t)1 << (lgn - deg);
  const size_t p = (size_t)1 << lgp;
  const uint k = index & ((1u << lgp) - 1u);
  x += index;
  y += (((size_t)(index - k)) << deg) + k;

  pq[lid] = zk_power(lo, hi, lid << (lgn - deg), lo_bits);
  const uint shift = lgn - lgp - deg;
  for (uint i = lid; i < count; i += counth) {
    FR v = x[i * t];
    if (k != 0 && i != 0) v = FR_(mul)(v, zk_power(lo, hi, (k * i) << shift, lo_bits));
    u[i] = v;
  }
  __syncthreads();

  for (uint rnd = 0; rnd < deg; rnd++) {
    const uint bit = counth >> rnd;
    const uint di = lid & (bit - 1u);
    const uint i0 = (lid << 1) - di;
    const uint i1 = i0 + bit;
    const FR a = u[i0];
    const FR b = u[i1];
    u[i0] = FR_(add)(a, b);
    FR d = FR_(sub)(a, b);
    if (di != 0) d = FR_(mul)(pq[di << rnd], d);
    u[i1] = d;
    __syncthreads();
  }

  y[lid * p] = u[zk_bitrev(lid, deg)];
  y[(lid + counth) * p] = u[zk_bitrev(lid + counth, deg)];
}

// x[i] *= c * s^i, with s^i from the two-level tables of s.
KERNEL void ntt_scale_powers(FR* x, uint n, const FR* __restrict__ lo, const FR* __restrict__ hi,
                             uint lo_bits, FR c) {
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  x[i] = FR_(mul)(FR_(mul)(x[i], zk_power(lo, hi, i, lo_bits)), c);
}

// x[i] *= c.
KERNEL void ntt_scale(FR* x, uint n, FR c) {
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  x[i] = FR_(mul)(x[i], c);
}

// The H step's pointwise part on the coset: a[i] = (a[i] * b[i] - c[i]) * z_inv.
KERNEL void ntt_h_combine(FR* a, const FR* __restrict__ b, const FR* __restrict__ c, uint n, FR z_inv) {
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  a[i] = FR_(mul)(FR_(sub)(FR_(mul)(a[i], b[i]), c[i]), z_inv);
}

// y[bitrev(i)] = x[i] over n = 2^lgn elements.
KERNEL void ntt_bit_reverse(const FR* __restrict__ x, FR* __restrict__ y, uint lgn) {
  const uint i = GET_GLOBAL_ID();
  if (i >= (1u << lgn)) return;
  y[zk_bitrev(i, lgn)] = x[i];
}
