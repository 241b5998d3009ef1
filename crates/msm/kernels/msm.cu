// Kernels of zkpipe-msm: a Pippenger MSM with signed-digit windows. Scalars become
// (bucket, point) pairs, which are counted, scanned and sorted in two passes so that each
// bucket's points are contiguous; buckets are then summed in parallel, and each window's buckets are reduced in
// segments. The host adds the segment results and the windows.

#define MSM_NO_KEY 0xffffffffu

// Bits [pos, pos + c) of a canonical 256-bit little-endian integer (c <= 24).
DEVICE inline uint msm_bits(const FR* e, uint pos, uint c) {
  const uint limb = pos >> 5;
  const uint off = pos & 31u;
  unsigned long long v = e->val[limb];
  if (limb + 1 < 8) v |= ((unsigned long long)e->val[limb + 1]) << 32;
  return (uint)(v >> off) & ((1u << c) - 1u);
}

// A scalar s and r - s have the same digits up to sign, s·P being (r - s)·(-P): e becomes the
// smaller of the two, below r/2 < 2^254, and the result says whether it is r - s (1) or s (0).
// Windows of c bits then hold it when nw·c >= 255, one fewer than 256 bits need at c = 15
// and c = 17.
DEVICE inline uint msm_fold_sign(FR* e) {
  const FR t = zk_fr_sub(FR_(ZERO), *e);  // r - e, and 0 for e = 0
  zk_sub_cc(t.val[0], e->val[0]);
#pragma unroll
  for (int i = 1; i < 8; i++) zk_subc_cc(t.val[i], e->val[i]);
  if (!zk_subc(0, 0)) return 0;  // no borrow: r - e >= e
  *e = t;
  return 1;
}

// The signed digits of scalar s, written for entry i of n: window w gives key
// set * buckets + (|digit| - 1) and value (`value` + copy * stride) | (negative << 31) at
// w * n + i, or MSM_NO_KEY for a zero digit. The digits are those of e = min(s, r - s)
// (msm_fold_sign), negated when e = r - s. They lie in [-2^(c-1), 2^(c-1)]; e < 2^254 and
// nw * c >= 255, so the top window's bits are below 2^(c-1) and it never carries. With
// precomputed multiples (copy j of the bases holding 2^(c·j)·P, `stride` points apart),
// window w = set * copies + copy sums its digit times copy `copy` into bucket set `set`:
// 2^(c·w)·P = 2^(c·copies·set)·(2^(c·copy)·P). Without them, copies = 1 and every window is
// a set of its own.
DEVICE inline void msm_digits_of(FR e, uint i, uint n, uint c, uint nw, uint copies,
                                 uint stride, uint value, uint* __restrict__ keys,
                                 uint* __restrict__ vals) {
  const uint flip = msm_fold_sign(&e);
  const uint half = 1u << (c - 1);
  uint carry = 0;
  for (uint w = 0; w < nw; w++) {
    const uint pos = w * c;
    uint v = (pos < 256 ? msm_bits(&e, pos, min(c, 256u - pos)) : 0u) + carry;
    uint neg = 0;
    uint mag = v;
    carry = 0;
    if (v > half) {
      mag = (1u << c) - v;
      neg = 1;
      carry = 1;
    }
    const size_t at = (size_t)w * n + i;
    if (mag == 0) {
      keys[at] = MSM_NO_KEY;
      if (v != 0) carry = 1;  // v == 2^c: digit 0, carry 1
    } else {
      const uint set = w / copies;
      keys[at] = set * half + (mag - 1);
      vals[at] = (value + (w - set * copies) * stride) | ((neg ^ flip) << 31);
    }
  }
}

// One thread per scalar of scalars[lo, lo + n): its digits, with value i + v_lo (the index of
// its base in the buffer the bucket sums read: v_lo = lo for resident bases, 0 for a chunk),
// over `copies` copies of the bases `stride` points apart (1 and 0 without multiples).
KERNEL void msm_digits(const FR* __restrict__ scalars, uint lo, uint n, uint v_lo, uint c, uint nw,
                       uint copies, uint stride, uint* __restrict__ keys, uint* __restrict__ vals) {
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  msm_digits_of(FR_(unmont)(scalars[lo + i]), i, n, c, nw, copies, stride, i + v_lo, keys, vals);
}

// The rank of variable v among the variables a density bitmap selects: prefix[w] counts the
// selected variables of the words before w.
DEVICE inline uint msm_rank(const uint* __restrict__ density, const uint* __restrict__ prefix, uint v) {
  const uint w = v >> 5;
  return prefix[w] + __popc(density[w] & ((1u << (v & 31u)) - 1u));
}

// The tail of a split MSM (scalars other than 0 and 1), entries [lo, lo + n): entry j is
// variable index[j] with scalar tail[j]. A variable the density leaves out gets no key; a
// selected one gets its digits with value (its rank) - b_lo, the base's place in the buffer
// holding bases [b_lo, ...).
KERNEL void msm_digits_tail(const FR* __restrict__ tail, const uint* __restrict__ index,
                            const uint* __restrict__ density, const uint* __restrict__ prefix,
                            uint lo, uint n, uint b_lo, uint c, uint nw,
                            uint* __restrict__ keys, uint* __restrict__ vals) {
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  const uint v = index[lo + i];
  if (((density[v >> 5] >> (v & 31u)) & 1u) == 0u) {
    for (uint w = 0; w < nw; w++) keys[(size_t)w * n + i] = MSM_NO_KEY;
    return;
  }
  const uint base = msm_rank(density, prefix, v) - b_lo;
  msm_digits_of(FR_(unmont)(tail[lo + i]), i, n, c, nw, 1u, 0u, base, keys, vals);
}

// counts[key] += 1 for every valid key.
KERNEL void msm_histogram(const uint* __restrict__ keys, unsigned long long m, uint* counts) {
  const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m) return;
  const uint k = keys[i];
  if (k != MSM_NO_KEY) atomicAdd(&counts[k], 1u);
}

// Exclusive prefix sums in three launches, so that millions of buckets scan in parallel:
// msm_scan_tiles scans tiles of MSM_SCAN_TILE entries (1024 threads, 8 consecutive entries
// each) and writes each tile's total; msm_scan_top scans the tile totals in place (one block,
// up to MSM_SCAN_TILE tiles); msm_scan_add adds each tile's offset.
#define MSM_SCAN_PER 8u
#define MSM_SCAN_TILE (1024u * MSM_SCAN_PER)

DEVICE inline void msm_scan_tile(const uint* in, uint* out, uint n, uint base, uint* total_out) {
  __shared__ uint sums[1024];
  const uint t = threadIdx.x;
  const uint first = base + t * MSM_SCAN_PER;
  uint v[MSM_SCAN_PER];
  uint s = 0;
  for (uint j = 0; j < MSM_SCAN_PER; j++) {
    v[j] = first + j < n ? in[first + j] : 0u;
    s += v[j];
  }
  sums[t] = s;
  __syncthreads();
  for (uint d = 1; d < 1024; d <<= 1) {
    const uint x = t >= d ? sums[t - d] : 0u;
    __syncthreads();
    sums[t] += x;
    __syncthreads();
  }
  uint run = sums[t] - s;
  for (uint j = 0; j < MSM_SCAN_PER; j++) {
    if (first + j < n) out[first + j] = run;
    run += v[j];
  }
  if (t == 1023 && total_out) *total_out = sums[1023];
}

KERNEL void msm_scan_tiles(const uint* __restrict__ counts, uint* __restrict__ offsets, uint total,
                           uint* __restrict__ tile_sums) {
  msm_scan_tile(counts, offsets, total, blockIdx.x * MSM_SCAN_TILE, &tile_sums[blockIdx.x]);
}

KERNEL void msm_scan_top(uint* tile_sums, uint tiles) {
  msm_scan_tile(tile_sums, tile_sums, tiles, 0, (uint*)0);
}

KERNEL void msm_scan_add(uint* __restrict__ offsets, uint total, const uint* __restrict__ tile_sums) {
  const uint i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) offsets[i] += tile_sums[i / MSM_SCAN_TILE];
}

// Places each valid (key, value) at the next free slot of its bucket.
KERNEL void msm_scatter(const uint* __restrict__ keys, const uint* __restrict__ vals, unsigned long long m,
                        uint* cursor, uint* __restrict__ sorted) {
  const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m) return;
  const uint k = keys[i];
  if (k == MSM_NO_KEY) return;
  const uint pos = atomicAdd(&cursor[k], 1u);
  sorted[pos] = vals[i];
}

// The bucket sort in two passes, so that its stores land in L2 and few of its atomics leave
// the SM (one store a key scattered over gigabytes of DRAM costs a read and a write of a whole
// sector; an atomic a key on the bucket cursors is bound by L2's atomic units). Buckets are
// grouped in bins of 2^shift consecutive buckets, and the sets of buckets in passes of one set
// or a few. Pass A copies a pass's (key, value) pairs into a staging buffer bin by bin. Pass B
// reads the staging buffer in order and places each value in its bucket: the blocks in flight
// read a few bins, whose buckets' places span a few megabytes.

#define MSM_BIN_THREADS 256u
#define MSM_BIN_ITEMS 8u
#define MSM_MAX_BINS 1024u

// bin_cursor[b] = where bin b starts in its pass's staging buffer: the offset of its first
// bucket less the offset of its pass's first bucket (passes of `pass_buckets` buckets).
KERNEL void msm_bin_starts(const uint* __restrict__ offsets, uint bins, uint shift,
                           uint pass_buckets, uint* __restrict__ bin_cursor) {
  const uint b = GET_GLOBAL_ID();
  if (b >= bins) return;
  const uint first = b << shift;
  bin_cursor[b] = offsets[first] - offsets[first / pass_buckets * pass_buckets];
}

// The exclusive prefix sums of count[0..bins) into start, by one block of MSM_BIN_THREADS
// threads (bins <= MSM_MAX_BINS): each thread scans a run of bins, then the runs' totals.
DEVICE inline void msm_block_scan(const uint* count, uint bins, uint* start) {
  __shared__ uint sums[MSM_BIN_THREADS];
  const uint per = (bins + MSM_BIN_THREADS - 1u) / MSM_BIN_THREADS;
  const uint lo = min(threadIdx.x * per, bins);
  const uint hi = min(lo + per, bins);
  uint run = 0;
  for (uint b = lo; b < hi; b++) run += count[b];
  sums[threadIdx.x] = run;
  __syncthreads();
  for (uint d = 1; d < MSM_BIN_THREADS; d <<= 1) {
    const uint x = threadIdx.x >= d ? sums[threadIdx.x - d] : 0u;
    __syncthreads();
    sums[threadIdx.x] += x;
    __syncthreads();
  }
  run = sums[threadIdx.x] - run;
  for (uint b = lo; b < hi; b++) {
    start[b] = run;
    run += count[b];
  }
}

// Pass A over entries [lo, lo + len) of keys and vals, whose valid keys fall in bins
// [bin0, bin0 + bins), bins <= MSM_MAX_BINS: each valid pair goes to its bin's next place in
// the staging buffer (stage_keys, stage_vals). A block ranks MSM_BIN_ITEMS keys a thread by
// bin in shared memory, reserves a run of each bin with one atomic, orders its tile by bin in
// shared memory and writes it out, so that neighbouring threads write neighbouring places.
KERNEL void __launch_bounds__(MSM_BIN_THREADS)
msm_bin_scatter(const uint* __restrict__ keys, const uint* __restrict__ vals,
                unsigned long long lo, uint len, uint shift, uint bin0, uint bins,
                uint* __restrict__ bin_cursor, uint* __restrict__ stage_keys,
                uint* __restrict__ stage_vals) {
  __shared__ uint count[MSM_MAX_BINS];
  __shared__ uint start[MSM_MAX_BINS];
  __shared__ uint base[MSM_MAX_BINS];
  __shared__ uint tile_keys[MSM_BIN_THREADS * MSM_BIN_ITEMS];
  __shared__ uint tile_vals[MSM_BIN_THREADS * MSM_BIN_ITEMS];
  for (uint b = threadIdx.x; b < bins; b += MSM_BIN_THREADS) count[b] = 0;
  __syncthreads();
  const uint first = blockIdx.x * (MSM_BIN_THREADS * MSM_BIN_ITEMS) + threadIdx.x;
  uint key[MSM_BIN_ITEMS], val[MSM_BIN_ITEMS], rank[MSM_BIN_ITEMS];
#pragma unroll
  for (uint j = 0; j < MSM_BIN_ITEMS; j++) {
    const uint i = first + j * MSM_BIN_THREADS;
    key[j] = i < len ? keys[lo + i] : MSM_NO_KEY;
    if (key[j] != MSM_NO_KEY) {
      val[j] = vals[lo + i];
      rank[j] = atomicAdd(&count[(key[j] >> shift) - bin0], 1u);
    }
  }
  __syncthreads();
  msm_block_scan(count, bins, start);
  for (uint b = threadIdx.x; b < bins; b += MSM_BIN_THREADS) {
    if (count[b] != 0u) base[b] = atomicAdd(&bin_cursor[bin0 + b], count[b]);
  }
  __syncthreads();
#pragma unroll
  for (uint j = 0; j < MSM_BIN_ITEMS; j++) {
    if (key[j] == MSM_NO_KEY) continue;
    const uint slot = start[(key[j] >> shift) - bin0] + rank[j];
    tile_keys[slot] = key[j];
    tile_vals[slot] = val[j];
  }
  __syncthreads();
  const uint valid = start[bins - 1u] + count[bins - 1u];
  for (uint slot = threadIdx.x; slot < valid; slot += MSM_BIN_THREADS) {
    const uint k = tile_keys[slot];
    const uint b = (k >> shift) - bin0;
    const uint at = base[b] + slot - start[b];
    stage_keys[at] = k;
    stage_vals[at] = tile_vals[slot];
  }
}

// Pass B over the staging buffer of the pass holding buckets [first, end): each value goes to
// the next free place of its bucket in `sorted`. A block of MSM_RANK_THREADS threads takes
// MSM_BIN_ITEMS entries a thread, ranks them by bucket in shared memory and reserves each
// bucket's run with one atomic, so that a bucket holding k of the tile's entries costs one
// atomic on its cursor instead of k. The tile's buckets lie within two bins (the staging
// buffer is ordered by bin, and a bin of a large MSM holds more than a tile), counted from the
// start of its first entry's bin; an entry further than MSM_RANK_WINDOW buckets from there (a
// small MSM's tile spans more bins) takes an atomic of its own.
#define MSM_RANK_THREADS 1024u
#define MSM_RANK_WINDOW 4096u
KERNEL void __launch_bounds__(MSM_RANK_THREADS)
msm_bucket_scatter(const uint* __restrict__ stage_keys, const uint* __restrict__ stage_vals,
                        const uint* __restrict__ offsets, const uint* __restrict__ counts,
                        uint first, uint end, uint shift, uint* cursor,
                        uint* __restrict__ sorted) {
  __shared__ uint count[MSM_RANK_WINDOW];
  __shared__ uint base[MSM_RANK_WINDOW];
  const uint len = offsets[end - 1] + counts[end - 1] - offsets[first];
  const uint tile = blockIdx.x * (MSM_RANK_THREADS * MSM_BIN_ITEMS);
  if (tile >= len) return;
  for (uint d = threadIdx.x; d < MSM_RANK_WINDOW; d += MSM_RANK_THREADS) count[d] = 0;
  __syncthreads();
  const uint w0 = (stage_keys[tile] >> shift) << shift;
  uint key[MSM_BIN_ITEMS], val[MSM_BIN_ITEMS], rank[MSM_BIN_ITEMS];
#pragma unroll
  for (uint j = 0; j < MSM_BIN_ITEMS; j++) {
    const uint i = tile + j * MSM_RANK_THREADS + threadIdx.x;
    if (i < len) {
      key[j] = stage_keys[i];
      val[j] = stage_vals[i];
      const uint d = key[j] - w0;
      rank[j] = d < MSM_RANK_WINDOW ? atomicAdd(&count[d], 1u) : atomicAdd(&cursor[key[j]], 1u);
    }
  }
  __syncthreads();
  for (uint d = threadIdx.x; d < MSM_RANK_WINDOW; d += MSM_RANK_THREADS) {
    if (count[d] != 0u) base[d] = atomicAdd(&cursor[w0 + d], count[d]);
  }
  __syncthreads();
#pragma unroll
  for (uint j = 0; j < MSM_BIN_ITEMS; j++) {
    const uint i = tile + j * MSM_RANK_THREADS + threadIdx.x;
    if (i < len) {
      const uint d = key[j] - w0;
      sorted[d < MSM_RANK_WINDOW ? base[d] + rank[j] : rank[j]] = val[j];
    }
  }
}

// tasks[b] = the number of tasks of at most t points that bucket b splits into.
KERNEL void msm_task_counts(const uint* __restrict__ counts, uint total, uint t, uint* __restrict__ tasks) {
  const uint b = GET_GLOBAL_ID();
  if (b >= total) return;
  tasks[b] = (counts[b] + t - 1u) / t;
}

// The bucket of task g: the last bucket whose first task is at or before g.
DEVICE inline uint msm_task_bucket(const uint* task_offsets, uint total, uint g) {
  uint lo = 0, hi = total;
  while (hi - lo > 1) {
    const uint mid = (lo + hi) / 2;
    if (task_offsets[mid] <= g) lo = mid; else hi = mid;
  }
  return lo;
}

// One thread per task slot g < slots: the task's bucket, and a key t - length that a counting
// sort turns into an order of tasks by decreasing length. Bucket sizes vary (Poisson around
// n / 2^(c-1)), and a warp runs as long as its longest task: in bucket order a warp of 128-point
// buckets waits for one of about 150. Slots past the task count get no key.
KERNEL void msm_task_keys(const uint* __restrict__ counts, const uint* __restrict__ task_offsets,
                          const uint* __restrict__ tasks, uint total, uint t, uint slots,
                          uint* __restrict__ keys, uint* __restrict__ vals,
                          uint* __restrict__ bucket_of) {
  const uint g = GET_GLOBAL_ID();
  if (g >= slots) return;
  if (g >= task_offsets[total - 1] + tasks[total - 1]) {
    keys[g] = MSM_NO_KEY;
    return;
  }
  const uint b = msm_task_bucket(task_offsets, total, g);
  const uint len = min(t, counts[b] - (g - task_offsets[b]) * t);
  keys[g] = t - len;
  vals[g] = g;
  bucket_of[g] = b;
}

// ---- The curve kernels, written once over a curve type ----
// Each kernel's body is a function template over a curve (MsmG1 or MsmG2 below); the kernels
// are thin extern "C" wrappers (one per curve) that the loader finds by name.

// A field's operations, as the bucket kernels use them: MsmFp over Fp (G1's coordinates) and
// MsmFp2 over Fp2 (G2's), from the prelude's op sets (curve.cu: ZK_FPC, ZK_FP2Z).
struct MsmFp {
  typedef FP T;
  static DEVICE __forceinline__ T zero() { return ZK_FPC(ZERO); }
  static DEVICE __forceinline__ T one() { return ZK_FPC(ONE); }
  static DEVICE __forceinline__ bool eq(T a, T b) { return ZK_FPC(eq)(a, b); }
  static DEVICE __forceinline__ T add(T a, T b) { return ZK_FPC(add)(a, b); }
  static DEVICE __forceinline__ T sub(T a, T b) { return ZK_FPC(sub)(a, b); }
  static DEVICE __forceinline__ T twice(T a) { return ZK_FPC(double)(a); }
  static DEVICE __forceinline__ T mul(T a, T b) { return ZK_FPC(mul)(a, b); }
  static DEVICE __forceinline__ T sqr(T a) { return ZK_FPC(sqr)(a); }
  static DEVICE __forceinline__ T inverse(T a) { return ZK_FPC(inverse)(a); }
  static DEVICE __forceinline__ T inverse_vartime(T a) { return ZK_FPC(inverse_vartime)(a); }
};

struct MsmFp2 {
  typedef FP2 T;
  // The base field, which norms land in.
  typedef MsmFp Base;
  static DEVICE __forceinline__ T zero() { return ZK_FP2Z(ZERO); }
  static DEVICE __forceinline__ T one() { return ZK_FP2Z(ONE); }
  static DEVICE __forceinline__ bool eq(T a, T b) { return ZK_FP2Z(eq)(a, b); }
  static DEVICE __forceinline__ T add(T a, T b) { return ZK_FP2Z(add)(a, b); }
  static DEVICE __forceinline__ T sub(T a, T b) { return ZK_FP2Z(sub)(a, b); }
  static DEVICE __forceinline__ T twice(T a) { return ZK_FP2Z(double)(a); }
  static DEVICE __forceinline__ T mul(T a, T b) { return ZK_FP2Z(mul)(a, b); }
  static DEVICE __forceinline__ T sqr(T a) { return ZK_FP2Z(sqr)(a); }
  static DEVICE __forceinline__ T inverse(T a) { return ZK_FP2Z(inverse)(a); }
  static DEVICE __forceinline__ T inverse_vartime(T a) { return ZK_FP2Z(inverse_vartime)(a); }
  // N(a) = a · conj(a), in the base field.
  static DEVICE __forceinline__ FP norm(T a) { return ZK_FP2Z(norm)(a); }
  // conj(a) · s for s in the base field.
  static DEVICE __forceinline__ T conjugate_times(T a, FP s) {
    return ZK_FP2Z(conjugate_times)(a, s);
  }
};

// A curve: its point types, its coordinates' field, Jacobian additions (ec-gpu-gen's) and
// XYZZ accumulators (the prelude's, curve.cu), in which the bucket loops add: faster than
// Jacobian mixed additions for both curves (ec-gpu-gen's Jacobian madd inlined in G2's loop
// was slower still). The Jacobian operations are not inlined: each kernel calls them in
// several places, and inlining ec-gpu-gen's G2 formulas everywhere made an 18 MB module.
struct MsmG1 {
  typedef G1_AFFINE Affine;
  typedef G1_JACOBIAN Jacobian;
  typedef MsmFp F;
  typedef zk_xyzz_g1 Xyzz;
  static DEVICE __forceinline__ Jacobian zero() { return G1_(ZERO); }
  static __noinline__ DEVICE Jacobian add(Jacobian a, Jacobian b) { return G1_(add)(a, b); }
  static __noinline__ DEVICE Jacobian madd(Jacobian a, Affine b) { return G1_(add_mixed)(a, b); }
  static __noinline__ DEVICE Jacobian dbl(Jacobian a) { return G1_(double)(a); }
  static DEVICE __forceinline__ Xyzz xyzz_zero() { return zk_xyzz_zero_g1(); }
  static DEVICE __forceinline__ void xyzz_madd(Xyzz* a, Affine b) { zk_xyzz_madd_g1(a, b); }
  static DEVICE __forceinline__ Jacobian xyzz_to_jac(Xyzz a) { return zk_xyzz_to_jac_g1(a); }
};

struct MsmG2 {
  typedef G2_AFFINE Affine;
  typedef G2_JACOBIAN Jacobian;
  typedef MsmFp2 F;
  typedef zk_xyzz_g2 Xyzz;
  static DEVICE __forceinline__ Jacobian zero() { return G2_(ZERO); }
  static __noinline__ DEVICE Jacobian add(Jacobian a, Jacobian b) { return G2_(add)(a, b); }
  static __noinline__ DEVICE Jacobian madd(Jacobian a, Affine b) { return G2_(add_mixed)(a, b); }
  static __noinline__ DEVICE Jacobian dbl(Jacobian a) { return G2_(double)(a); }
  static DEVICE __forceinline__ Xyzz xyzz_zero() { return zk_xyzz_zero_g2(); }
  static DEVICE __forceinline__ void xyzz_madd(Xyzz* a, Affine b) { zk_xyzz_madd_g2(a, b); }
  static DEVICE __forceinline__ Jacobian xyzz_to_jac(Xyzz a) { return zk_xyzz_to_jac_g2(a); }
};

// Whether an affine point is the identity (ec-gpu-gen stores it as (0, 0)).
template <class C>
DEVICE __forceinline__ bool msm_is_identity(const typename C::Affine& p) {
  typedef typename C::F F;
  const typename F::T zero = F::zero();
  return F::eq(p.x, zero) && F::eq(p.y, zero);
}

// The bucket kernels' accumulators: one XYZZ point a thread in shared memory, which
// xyzz_madd reads and writes a coordinate at a time. Held in registers, they were spilled
// around the field calls (benches/NOTES.md). A block has at most MSM_BUCKET_BLOCK threads
// (the kernels' launch bounds, which the driver enforces).
#define MSM_BUCKET_BLOCK 128
template <class C>
DEVICE __forceinline__ typename C::Xyzz* msm_shared_acc() {
  __shared__ typename C::Xyzz accs[MSM_BUCKET_BLOCK];
  typename C::Xyzz* const acc = &accs[threadIdx.x];
  *acc = C::xyzz_zero();
  return acc;
}

// Bucket sums in two steps, so that a bucket holding most of the points (0/1 scalars put half
// of them into bucket 1 of window 0) is summed by many threads: each task adds up to t
// consecutive points of one bucket; then one thread per bucket adds its tasks.
template <class C>
DEVICE __forceinline__ void msm_task_sums(
    const typename C::Affine* __restrict__ bases, const uint* __restrict__ sorted,
    const uint* __restrict__ offsets, const uint* __restrict__ counts,
    const uint* __restrict__ task_offsets, const uint* __restrict__ tasks, uint total, uint t,
    const uint* __restrict__ order, const uint* __restrict__ bucket_of,
    typename C::Jacobian* __restrict__ partial) {
  typedef typename C::F F;
  const uint slot = GET_GLOBAL_ID();
  if (slot >= task_offsets[total - 1] + tasks[total - 1]) return;
  // Slot to task: longest tasks first (msm_task_keys and a counting sort).
  const uint g = order[slot];
  const uint lo = bucket_of[g];
  const uint start = offsets[lo] + (g - task_offsets[lo]) * t;
  const uint end = min(start + t, offsets[lo] + counts[lo]);
  const typename F::T zero = F::zero();
  typename C::Xyzz* const acc = msm_shared_acc<C>();
  for (uint j = start; j < end; j++) {
    const uint v = sorted[j];
    typename C::Affine p = bases[v & 0x7fffffffu];
    if (msm_is_identity<C>(p)) continue;
    if (v >> 31) p.y = F::sub(zero, p.y);
    C::xyzz_madd(acc, p);
  }
  partial[g] = C::xyzz_to_jac(*acc);
}

// Tasks a thread of msm_task_fold adds up at each level.
#define MSM_FOLD 16

// One thread per task slot: a level of a tree over each bucket's tasks. The task at index i of
// its bucket, i a multiple of MSM_FOLD * step, takes the sums of the tasks i + j·step
// (0 < j < MSM_FOLD) of that bucket: after L levels, task i · MSM_FOLD^L holds the sum of the
// next MSM_FOLD^L tasks, so that a bucket holding most of the points is added up in parallel
// rather than by one thread.
template <class C>
DEVICE __forceinline__ void msm_task_fold(typename C::Jacobian* __restrict__ partial,
                                          const uint* __restrict__ task_offsets,
                                          const uint* __restrict__ tasks,
                                          const uint* __restrict__ bucket_of, uint total,
                                          uint step) {
  const uint g = GET_GLOBAL_ID();
  if (g >= task_offsets[total - 1] + tasks[total - 1]) return;
  const uint b = bucket_of[g];
  const uint i = g - task_offsets[b];
  if (i % (MSM_FOLD * step) != 0 || i + step >= tasks[b]) return;
  typename C::Jacobian acc = partial[g];
  for (uint j = 1; j < MSM_FOLD && i + j * step < tasks[b]; j++)
    acc = C::add(acc, partial[g + j * step]);
  partial[g] = acc;
}

// One thread per bucket: the sum of its tasks k0 + j·step (the folded ones), added to the
// previous sum when accumulate is set (the streamed mode's later chunks).
template <class C>
DEVICE __forceinline__ void msm_task_reduce(const typename C::Jacobian* __restrict__ partial,
                                            const uint* __restrict__ task_offsets,
                                            const uint* __restrict__ tasks, uint total,
                                            uint step, uint accumulate,
                                            typename C::Jacobian* __restrict__ sums) {
  const uint b = GET_GLOBAL_ID();
  if (b >= total) return;
  typename C::Jacobian acc = accumulate ? sums[b] : C::zero();
  const uint k0 = task_offsets[b];
  for (uint k = k0; k < k0 + tasks[b]; k += step) acc = C::add(acc, partial[k]);
  sums[b] = acc;
}

// One thread per segment of seg buckets of a window: sum over the segment of multiplier times
// bucket sum, multipliers being bucket index + 1 within the window.
template <class C>
DEVICE __forceinline__ void msm_segments(const typename C::Jacobian* __restrict__ sums,
                                         uint buckets, uint nw, uint seg,
                                         typename C::Jacobian* __restrict__ out) {
  typedef typename C::Jacobian J;
  const uint segs = buckets / seg;
  const uint g = GET_GLOBAL_ID();
  if (g >= nw * segs) return;
  const uint w = g / segs;
  const uint lo = (g % segs) * seg;
  const J* s = sums + (size_t)w * buckets;
  J acc = C::zero();
  J tot = C::zero();
  for (uint b = lo + seg; b > lo; b--) {
    acc = C::add(acc, s[b - 1]);
    tot = C::add(tot, acc);
  }
  // tot = sum (b - lo + 1) s[b]; add lo * acc, acc being the segment's plain sum.
  J extra = C::zero();
  for (int bit = 31 - __clz(lo); bit >= 0; bit--) {  // lo == 0: no iteration
    extra = C::dbl(extra);
    if ((lo >> bit) & 1u) extra = C::add(extra, acc);
  }
  out[g] = C::add(tot, extra);
}

// out[g] = in[g·k] + ... + in[g·k + k - 1]: folds segment results before the read-back.
template <class C>
DEVICE __forceinline__ void msm_sum_groups(const typename C::Jacobian* __restrict__ in,
                                           uint groups, uint k,
                                           typename C::Jacobian* __restrict__ out) {
  const uint g = GET_GLOBAL_ID();
  if (g >= groups) return;
  typename C::Jacobian acc = C::zero();
  for (uint i = 0; i < k; i++) acc = C::add(acc, in[(size_t)g * k + i]);
  out[g] = acc;
}

// Scalars that are 0 or 1: each thread adds the selected points of a strided share.
template <class C>
DEVICE __forceinline__ void msm_boolean(const typename C::Affine* __restrict__ bases,
                                        const FR* __restrict__ scalars, uint n,
                                        typename C::Jacobian* __restrict__ out,
                                        uint* __restrict__ not_boolean) {
  const uint t = GET_GLOBAL_ID();
  const uint stride = gridDim.x * blockDim.x;
  const FR one = FR_(ONE);
  const FR fzero = FR_(ZERO);
  typename C::Jacobian acc = C::zero();
  for (uint i = t; i < n; i += stride) {
    const FR s = scalars[i];
    if (FR_(eq)(s, fzero)) continue;
    if (!FR_(eq)(s, one)) {
      *not_boolean = 1u;
      continue;
    }
    const typename C::Affine p = bases[i];
    if (msm_is_identity<C>(p)) continue;
    acc = C::madd(acc, p);
  }
  out[t] = acc;
}

// The 0/1 part of a split MSM, for one curve: the sum of the bases of the variables in words
// [w_lo, w_hi) that are selected (density) and equal to one. sel = ones & density, and
// sel_prefix[w] counts sel's bits before word w, so the ones are numbered and each thread
// takes an equal run of them: partial[t] += the sum of its run. Bases hold [b_lo, ...).
template <class C>
DEVICE __forceinline__ void msm_ones(const typename C::Affine* __restrict__ bases,
                                     const uint* __restrict__ density,
                                     const uint* __restrict__ prefix,
                                     const uint* __restrict__ sel,
                                     const uint* __restrict__ sel_prefix, uint w_lo, uint w_hi,
                                     uint b_lo, typename C::Jacobian* __restrict__ partial,
                                     uint threads) {
  const uint t = GET_GLOBAL_ID();
  if (t >= threads) return;
  const uint first = sel_prefix[w_lo];
  const uint total = sel_prefix[w_hi] - first;
  const uint per = (total + threads - 1u) / threads;
  uint k = first + t * per;
  const uint end = min(k + per, first + total);
  if (per == 0u || k >= end) return;
  // The word holding one number k: the last w with sel_prefix[w] <= k.
  uint lo = w_lo, hi = w_hi;
  while (hi - lo > 1u) {
    const uint mid = (lo + hi) / 2u;
    if (sel_prefix[mid] <= k)
      lo = mid;
    else
      hi = mid;
  }
  uint w = lo;
  uint bits = sel[w];
  for (uint skip = k - sel_prefix[w]; skip > 0u; skip--) bits &= bits - 1u;
  typename C::Xyzz* const acc = msm_shared_acc<C>();
  while (k < end) {
    while (bits == 0u) bits = sel[++w];
    const uint b = __ffs(bits) - 1u;
    bits &= bits - 1u;
    const uint idx = prefix[w] + __popc(density[w] & ((1u << b) - 1u)) - b_lo;
    const typename C::Affine p = bases[idx];
    k++;
    if (msm_is_identity<C>(p)) continue;
    C::xyzz_madd(acc, p);
  }
  partial[t] = C::add(partial[t], C::xyzz_to_jac(*acc));
}

// Precomputed multiples of fixed bases: copy j of a point P is 2^(c·j)·P, j < copies, so that
// a Pippenger with c-bit windows sums `copies` windows in one set of buckets (msm_digits_of).
// One thread a point: c doublings a copy in Jacobian coordinates, then one inversion for all
// of the point's copies (Montgomery's trick) back to affine.
#define MSM_MAX_COPIES 16
template <class C>
DEVICE __forceinline__ void msm_precompute(const typename C::Affine* __restrict__ bases, uint n,
                                           uint c, uint copies,
                                           typename C::Affine* __restrict__ out) {
  typedef typename C::F F;
  typedef typename F::T FT;
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  const typename C::Affine p = bases[i];
  out[i] = p;
  if (msm_is_identity<C>(p)) {  // the identity, and all its multiples
    for (uint j = 1; j < copies; j++) out[(size_t)j * n + i] = p;
    return;
  }
  typename C::Jacobian q[MSM_MAX_COPIES];
  FT prefix[MSM_MAX_COPIES];  // prefix[j] = q[1].z ... q[j].z
  typename C::Jacobian acc;
  acc.x = p.x;
  acc.y = p.y;
  acc.z = F::one();
  FT run = F::one();
  for (uint j = 1; j < copies; j++) {
    for (uint d = 0; d < c; d++) acc = C::dbl(acc);
    q[j] = acc;
    run = F::mul(run, acc.z);
    prefix[j] = run;
  }
  FT inv = F::inverse(run);  // 1 / (q[1].z ... q[copies - 1].z)
  for (uint j = copies - 1; j >= 1; j--) {
    const FT zinv = j > 1 ? F::mul(inv, prefix[j - 1]) : inv;
    inv = F::mul(inv, q[j].z);
    const FT zinv2 = F::sqr(zinv);
    typename C::Affine r;
    r.x = F::mul(q[j].x, zinv2);
    r.y = F::mul(q[j].y, F::mul(zinv2, zinv));
    out[(size_t)j * n + i] = r;
  }
}

// The sum of the affine points ax[k], ay[k] for k in [lo, hi) whose bit in held is set.
template <class C>
__noinline__ DEVICE typename C::Jacobian msm_affine_sum(const typename C::F::T* ax,
                                                        const typename C::F::T* ay,
                                                        unsigned long long held, uint lo,
                                                        uint hi) {
  typename C::Xyzz acc = C::xyzz_zero();
  for (uint k = lo; k < hi; k++) {
    if (!((held >> k) & 1ull)) continue;
    typename C::Affine a;
    a.x = ax[k];
    a.y = ay[k];
    C::xyzz_madd(&acc, a);
  }
  return C::xyzz_to_jac(acc);
}

// Bucket sums by batch-affine additions over a quadratic extension (G2): each thread steps B
// runs of points side by side, adding one point to each run's affine sum a step, and the
// step's B slopes share one inversion in the base field (Montgomery's trick over the
// denominators' norms, d^-1 = conj(d) / N(d)): 2 extension products, a squaring, two norms and
// 5 base-field products an addition, and 1/B of an inversion, where an XYZZ addition costs 8
// extension products and 2 squarings. A thread takes per_thread tasks (per_thread · parts <=
// B), each split into `parts` runs of nearly equal length (so that there are threads enough
// to fill the GPU when tasks are few and long), and adds each task's run sums at the end.
// Thread x of a block of w threads takes the task slots x + j·w of the block's run of
// w·per_thread slots: tasks of nearly equal lengths (longest first). A step adds P to A by
// the slope (y_P - y_A) / (x_P - x_A); P = A doubles by 3x_A^2 / 2y_A; P = -A leaves the
// identity; a sum that is the identity takes P as it is.
template <class C, uint B>
DEVICE __forceinline__ void msm_task_sums_affine(
    const typename C::Affine* __restrict__ bases, const uint* __restrict__ sorted,
    const uint* __restrict__ offsets, const uint* __restrict__ counts,
    const uint* __restrict__ task_offsets, const uint* __restrict__ tasks, uint total, uint t,
    const uint* __restrict__ order, const uint* __restrict__ bucket_of, uint parts,
    uint per_thread, typename C::Jacobian* __restrict__ partial) {
  typedef typename C::F F;
  typedef typename F::T FT;
  typedef typename F::Base BF;
  typedef typename BF::T BT;
  const uint slots = task_offsets[total - 1] + tasks[total - 1];
  const uint runs = per_thread * parts;  // at most B
  const uint first = blockIdx.x * blockDim.x * per_thread + threadIdx.x;
  const FT zero = F::zero();
  FT ax[B], ay[B];
  BT pre[B], nrm[B];
  uint pos[B], end[B];
  unsigned long long held = 0;  // bit k: run k's sum is a point, not the identity
#pragma unroll 1
  for (uint k = 0; k < runs; k++) {
    const uint slot = first + (k / parts) * blockDim.x;
    pos[k] = end[k] = 0;
    if (slot >= slots) continue;
    const uint g = order[slot];
    const uint lo = bucket_of[g];
    const uint start = offsets[lo] + (g - task_offsets[lo]) * t;
    const uint len = min(t, offsets[lo] + counts[lo] - start);
    const uint share = (len + parts - 1) / parts;
    pos[k] = min(start + (k % parts) * share, start + len);
    end[k] = min(pos[k] + share, start + len);
  }
  uint vals[B];  // the step's entry of each run, their loads all in flight at once
  for (;;) {
    uint active = 0;
#pragma unroll 1
    for (uint k = 0; k < runs; k++) {
      if (pos[k] >= end[k]) continue;
      active = 1;
      vals[k] = sorted[pos[k]];
    }
    if (!active) break;
    // Forward: each run's denominator d, its norm nrm[k], and pre[k] = the product of the
    // norms before it.
    unsigned long long adding = 0, doubling = 0;
    int lowest = -1;
    BT run = BF::one();
#pragma unroll 1
    for (uint k = 0; k < runs; k++) {
      if (pos[k] >= end[k]) continue;
      const uint v = vals[k];
      // x alone; y only where it is needed: a first point, x_P = x_A, or x_P = 0.
      const typename C::Affine* b = &bases[v & 0x7fffffffu];
      const FT px = b->x;
      if (F::eq(px, zero) && F::eq(b->y, zero)) {  // the identity
        pos[k]++;
        continue;
      }
      if (!((held >> k) & 1ull)) {
        ax[k] = px;
        ay[k] = (v >> 31) ? F::sub(zero, b->y) : b->y;
        held |= 1ull << k;
        pos[k]++;
        continue;
      }
      FT den = F::sub(px, ax[k]);
      if (F::eq(den, zero)) {
        const FT py = (v >> 31) ? F::sub(zero, b->y) : b->y;
        if (!F::eq(py, ay[k])) {  // P = -A
          held &= ~(1ull << k);
          pos[k]++;
          continue;
        }
        den = F::twice(ay[k]);
        doubling |= 1ull << k;
      } else {
        adding |= 1ull << k;
      }
      const BT norm = F::norm(den);
      nrm[k] = norm;
      if (lowest < 0) {
        lowest = k;
        run = norm;
      } else {
        pre[k] = run;
        run = BF::mul(run, norm);
      }
    }
    if (lowest < 0) continue;
    // Backward: inv = 1 / (the norms of runs <= k), peeled one run at a time.
    BT inv = BF::inverse_vartime(run);
#pragma unroll 1
    for (int k = (int)runs - 1; k >= lowest; k--) {
      const unsigned long long bit = 1ull << k;
      if (!((adding | doubling) & bit)) continue;
      const uint v = vals[k];
      typename C::Affine p = bases[v & 0x7fffffffu];
      if (v >> 31) p.y = F::sub(zero, p.y);
      FT num, den;
      if (doubling & bit) {
        const FT x2 = F::sqr(ax[k]);
        num = F::add(F::twice(x2), x2);
        den = F::twice(ay[k]);
      } else {
        num = F::sub(p.y, ay[k]);
        den = F::sub(p.x, ax[k]);
      }
      BT norm_inv = inv;
      if (k != lowest) {
        norm_inv = BF::mul(inv, pre[k]);
        inv = BF::mul(inv, nrm[k]);
      }
      const FT lambda = F::mul(num, F::conjugate_times(den, norm_inv));
      const FT x = F::sub(F::sub(F::sqr(lambda), ax[k]), (doubling & bit) ? ax[k] : p.x);
      ay[k] = F::sub(F::mul(lambda, F::sub(ax[k], x)), ay[k]);
      ax[k] = x;
      pos[k]++;
    }
  }
  // Each task's sum: its runs' sums added (out of line: it is run once).
#pragma unroll 1
  for (uint j = 0; j < per_thread; j++) {
    const uint slot = first + j * blockDim.x;
    if (slot >= slots) continue;
    partial[order[slot]] = msm_affine_sum<C>(ax, ay, held, j * parts, (j + 1) * parts);
  }
}

// ---- The kernels, by curve ----
// G1's bucket kernels held to 128 registers, four 128-thread blocks an SM (it used 158):
// faster despite a few spills (benches/NOTES.md). G2's need their 255 registers.
#define MSM_LAUNCH_G1 __launch_bounds__(MSM_BUCKET_BLOCK, 4)
#define MSM_LAUNCH_G2 __launch_bounds__(MSM_BUCKET_BLOCK)

KERNEL void MSM_LAUNCH_G1 msm_task_sums_g1(
    const G1_AFFINE* __restrict__ bases, const uint* __restrict__ sorted,
    const uint* __restrict__ offsets, const uint* __restrict__ counts,
    const uint* __restrict__ task_offsets, const uint* __restrict__ tasks, uint total, uint t,
    const uint* __restrict__ order, const uint* __restrict__ bucket_of,
    G1_JACOBIAN* __restrict__ partial) {
  msm_task_sums<MsmG1>(bases, sorted, offsets, counts, task_offsets, tasks, total, t, order,
                       bucket_of, partial);
}
KERNEL void MSM_LAUNCH_G2 msm_task_sums_g2(
    const G2_AFFINE* __restrict__ bases, const uint* __restrict__ sorted,
    const uint* __restrict__ offsets, const uint* __restrict__ counts,
    const uint* __restrict__ task_offsets, const uint* __restrict__ tasks, uint total, uint t,
    const uint* __restrict__ order, const uint* __restrict__ bucket_of,
    G2_JACOBIAN* __restrict__ partial) {
  msm_task_sums<MsmG2>(bases, sorted, offsets, counts, task_offsets, tasks, total, t, order,
                       bucket_of, partial);
}

KERNEL void msm_task_fold_g1(G1_JACOBIAN* __restrict__ partial,
                             const uint* __restrict__ task_offsets,
                             const uint* __restrict__ tasks, const uint* __restrict__ bucket_of,
                             uint total, uint step) {
  msm_task_fold<MsmG1>(partial, task_offsets, tasks, bucket_of, total, step);
}
KERNEL void msm_task_fold_g2(G2_JACOBIAN* __restrict__ partial,
                             const uint* __restrict__ task_offsets,
                             const uint* __restrict__ tasks, const uint* __restrict__ bucket_of,
                             uint total, uint step) {
  msm_task_fold<MsmG2>(partial, task_offsets, tasks, bucket_of, total, step);
}

KERNEL void msm_task_reduce_g1(const G1_JACOBIAN* __restrict__ partial,
                               const uint* __restrict__ task_offsets,
                               const uint* __restrict__ tasks, uint total, uint step,
                               uint accumulate, G1_JACOBIAN* __restrict__ sums) {
  msm_task_reduce<MsmG1>(partial, task_offsets, tasks, total, step, accumulate, sums);
}
KERNEL void msm_task_reduce_g2(const G2_JACOBIAN* __restrict__ partial,
                               const uint* __restrict__ task_offsets,
                               const uint* __restrict__ tasks, uint total, uint step,
                               uint accumulate, G2_JACOBIAN* __restrict__ sums) {
  msm_task_reduce<MsmG2>(partial, task_offsets, tasks, total, step, accumulate, sums);
}

KERNEL void msm_segments_g1(const G1_JACOBIAN* __restrict__ sums, uint buckets, uint nw,
                            uint seg, G1_JACOBIAN* __restrict__ out) {
  msm_segments<MsmG1>(sums, buckets, nw, seg, out);
}
KERNEL void msm_segments_g2(const G2_JACOBIAN* __restrict__ sums, uint buckets, uint nw,
                            uint seg, G2_JACOBIAN* __restrict__ out) {
  msm_segments<MsmG2>(sums, buckets, nw, seg, out);
}

KERNEL void msm_sum_groups_g1(const G1_JACOBIAN* __restrict__ in, uint groups, uint k,
                              G1_JACOBIAN* __restrict__ out) {
  msm_sum_groups<MsmG1>(in, groups, k, out);
}
KERNEL void msm_sum_groups_g2(const G2_JACOBIAN* __restrict__ in, uint groups, uint k,
                              G2_JACOBIAN* __restrict__ out) {
  msm_sum_groups<MsmG2>(in, groups, k, out);
}

KERNEL void msm_boolean_g1(const G1_AFFINE* __restrict__ bases, const FR* __restrict__ scalars,
                           uint n, G1_JACOBIAN* __restrict__ out,
                           uint* __restrict__ not_boolean) {
  msm_boolean<MsmG1>(bases, scalars, n, out, not_boolean);
}
KERNEL void msm_boolean_g2(const G2_AFFINE* __restrict__ bases, const FR* __restrict__ scalars,
                           uint n, G2_JACOBIAN* __restrict__ out,
                           uint* __restrict__ not_boolean) {
  msm_boolean<MsmG2>(bases, scalars, n, out, not_boolean);
}

KERNEL void MSM_LAUNCH_G1 msm_ones_g1(const G1_AFFINE* __restrict__ bases,
                                      const uint* __restrict__ density,
                                      const uint* __restrict__ prefix,
                                      const uint* __restrict__ sel,
                                      const uint* __restrict__ sel_prefix, uint w_lo, uint w_hi,
                                      uint b_lo, G1_JACOBIAN* __restrict__ partial,
                                      uint threads) {
  msm_ones<MsmG1>(bases, density, prefix, sel, sel_prefix, w_lo, w_hi, b_lo, partial, threads);
}
KERNEL void MSM_LAUNCH_G2 msm_ones_g2(const G2_AFFINE* __restrict__ bases,
                                      const uint* __restrict__ density,
                                      const uint* __restrict__ prefix,
                                      const uint* __restrict__ sel,
                                      const uint* __restrict__ sel_prefix, uint w_lo, uint w_hi,
                                      uint b_lo, G2_JACOBIAN* __restrict__ partial,
                                      uint threads) {
  msm_ones<MsmG2>(bases, density, prefix, sel, sel_prefix, w_lo, w_hi, b_lo, partial, threads);
}

KERNEL void msm_precompute_g1(const G1_AFFINE* __restrict__ bases, uint n, uint c, uint copies,
                              G1_AFFINE* __restrict__ out) {
  msm_precompute<MsmG1>(bases, n, c, copies, out);
}
KERNEL void msm_precompute_g2(const G2_AFFINE* __restrict__ bases, uint n, uint c, uint copies,
                              G2_AFFINE* __restrict__ out) {
  msm_precompute<MsmG2>(bases, n, c, copies, out);
}

// G2's batch-affine bucket sums, 16, 32 or 64 runs a thread (kernels.rs picks one).
KERNEL void MSM_LAUNCH_G2 msm_task_sums_affine16_g2(
    const G2_AFFINE* __restrict__ bases, const uint* __restrict__ sorted,
    const uint* __restrict__ offsets, const uint* __restrict__ counts,
    const uint* __restrict__ task_offsets, const uint* __restrict__ tasks, uint total, uint t,
    const uint* __restrict__ order, const uint* __restrict__ bucket_of, uint parts,
    uint per_thread, G2_JACOBIAN* __restrict__ partial) {
  msm_task_sums_affine<MsmG2, 16>(bases, sorted, offsets, counts, task_offsets, tasks, total, t,
                                  order, bucket_of, parts, per_thread, partial);
}
KERNEL void MSM_LAUNCH_G2 msm_task_sums_affine32_g2(
    const G2_AFFINE* __restrict__ bases, const uint* __restrict__ sorted,
    const uint* __restrict__ offsets, const uint* __restrict__ counts,
    const uint* __restrict__ task_offsets, const uint* __restrict__ tasks, uint total, uint t,
    const uint* __restrict__ order, const uint* __restrict__ bucket_of, uint parts,
    uint per_thread, G2_JACOBIAN* __restrict__ partial) {
  msm_task_sums_affine<MsmG2, 32>(bases, sorted, offsets, counts, task_offsets, tasks, total, t,
                                  order, bucket_of, parts, per_thread, partial);
}
KERNEL void MSM_LAUNCH_G2 msm_task_sums_affine64_g2(
    const G2_AFFINE* __restrict__ bases, const uint* __restrict__ sorted,
    const uint* __restrict__ offsets, const uint* __restrict__ counts,
    const uint* __restrict__ task_offsets, const uint* __restrict__ tasks, uint total, uint t,
    const uint* __restrict__ order, const uint* __restrict__ bucket_of, uint parts,
    uint per_thread, G2_JACOBIAN* __restrict__ partial) {
  msm_task_sums_affine<MsmG2, 64>(bases, sorted, offsets, counts, task_offsets, tasks, total, t,
                                  order, bucket_of, parts, per_thread, partial);
}
