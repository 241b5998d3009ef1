// Kernels of zkpipe-r1cs: a, b and c evaluated from a recording and the witness on the device.

// z = (inputs, aux) in two buffers of values.
struct ZParts {
  const FR* __restrict__ inputs;
  uint n_inputs;
  const FR* __restrict__ aux;
  DEVICE __forceinline__ FR at(uint col) const {
    return col < n_inputs ? inputs[col] : aux[col - n_inputs];
  }
};

// z in the split form the MSMs take (zkpipe-msm's SplitScalars): z[col] is 1 where bit col of
// `ones` is set, the tail's next value where bit col of `tail_bits` is set (the tail holds the
// other nonzero values in increasing order of their variable; tail_prefix[w] counts the tail
// bits of the words before w), and 0 elsewhere.
struct ZSplit {
  const uint* __restrict__ ones;
  const uint* __restrict__ tail_bits;
  const uint* __restrict__ tail_prefix;
  const FR* __restrict__ tail;
  DEVICE __forceinline__ FR at(uint col) const {
    const uint w = col >> 5;
    const uint bit = 1u << (col & 31u);
    if (ones[w] & bit) return FR_(ONE);
    const uint t = tail_bits[w];
    if (!(t & bit)) return FR_(ZERO);
    return tail[tail_prefix[w] + __popc(t & (bit - 1u))];
  }
};

// Rows with more entries than this are summed by their whole warp; shorter ones by the thread
// that owns the row.
#define R1CS_LONG_ROW 16u
#define R1CS_FULL_WARP 0xffffffffu

// acc + table[coefficients[k]] · z[columns[k]]. Coefficient indices 0 and 1 are 1 and -1 (the
// table's first two entries): added or subtracted without a product.
template <class Z>
DEVICE __forceinline__ FR r1cs_term(FR acc, uint k, const uint* __restrict__ columns,
                                    const uint* __restrict__ coefficients,
                                    const FR* __restrict__ table, const Z& z) {
  const FR v = z.at(columns[k]);
  const uint c = coefficients[k];
  if (c == 0u) return zk_fr_add(acc, v);
  if (c == 1u) return zk_fr_sub(acc, v);
  return zk_fr_add(acc, zk_fr_mul(v, table[c]));
}

// The sum of x over the warp's 32 lanes, in every lane (a butterfly of shuffles).
DEVICE __forceinline__ FR r1cs_warp_sum(FR x) {
  for (uint offset = 16u; offset > 0u; offset >>= 1) {
    FR other;
#pragma unroll
    for (int j = 0; j < 8; j++) other.val[j] = __shfl_xor_sync(R1CS_FULL_WARP, x.val[j], offset);
    x = zk_fr_add(x, other);
  }
  return x;
}

// One thread a row of a recorded matrix, for `rows` rows from `first_row` on:
// out[first_row + i] = sum over row i's entries k of table[coefficients[k]] · z[columns[k]].
// `starts` holds the rows' rows + 1 offsets into the whole matrix's entries, of which
// `columns` and `coefficients` hold those from `entry_base` on (the whole matrix when it is
// resident, one chunk of rows when it is streamed). A row longer than R1CS_LONG_ROW is summed
// by the 32 lanes of its warp together, one such row after another, so that a few long rows
// do not hold their warps for their whole length. Every lane of a warp reaches the shuffles
// (none returns early): the block's size is a multiple of 32.
template <class Z>
DEVICE __forceinline__ void r1cs_row(const uint* __restrict__ starts, uint entry_base,
                                     const uint* __restrict__ columns,
                                     const uint* __restrict__ coefficients,
                                     const FR* __restrict__ table, const Z& z, uint rows,
                                     uint first_row, FR* __restrict__ out) {
  const uint i = GET_GLOBAL_ID();
  const bool owned = i < rows;
  const uint begin = owned ? starts[i] - entry_base : 0u;
  const uint end = owned ? starts[i + 1] - entry_base : 0u;
  const bool long_row = end - begin > R1CS_LONG_ROW;
  FR acc = FR_(ZERO);
  if (!long_row) {
    for (uint k = begin; k < end; k++) acc = r1cs_term(acc, k, columns, coefficients, table, z);
  }
  const uint lane = threadIdx.x & 31u;
  for (uint pending = __ballot_sync(R1CS_FULL_WARP, long_row); pending != 0u;
       pending &= pending - 1u) {
    const uint owner = __ffs(pending) - 1u;
    const uint row_begin = __shfl_sync(R1CS_FULL_WARP, begin, owner);
    const uint row_end = __shfl_sync(R1CS_FULL_WARP, end, owner);
    FR part = FR_(ZERO);
    for (uint k = row_begin + lane; k < row_end; k += 32u) {
      part = r1cs_term(part, k, columns, coefficients, table, z);
    }
    const FR total = r1cs_warp_sum(part);
    if (lane == owner) acc = total;
  }
  if (owned) out[first_row + i] = acc;
}

KERNEL void r1cs_rows(const uint* __restrict__ starts, uint entry_base,
                      const uint* __restrict__ columns, const uint* __restrict__ coefficients,
                      const FR* __restrict__ table, const FR* __restrict__ inputs, uint n_inputs,
                      const FR* __restrict__ aux, uint rows, uint first_row,
                      FR* __restrict__ out) {
  const ZParts z = {inputs, n_inputs, aux};
  r1cs_row(starts, entry_base, columns, coefficients, table, z, rows, first_row, out);
}

KERNEL void r1cs_rows_split(const uint* __restrict__ starts, uint entry_base,
                            const uint* __restrict__ columns,
                            const uint* __restrict__ coefficients, const FR* __restrict__ table,
                            const uint* __restrict__ ones, const uint* __restrict__ tail_bits,
                            const uint* __restrict__ tail_prefix, const FR* __restrict__ tail,
                            uint rows, uint first_row, FR* __restrict__ out) {
  const ZSplit z = {ones, tail_bits, tail_prefix, tail};
  r1cs_row(starts, entry_base, columns, coefficients, table, z, rows, first_row, out);
}
