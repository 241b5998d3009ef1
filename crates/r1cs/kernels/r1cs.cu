// Kernels of zkpipe-r1cs: a, b and c evaluated from a recording and the witness on the device.

// One thread a row of a recorded matrix: out[i] = sum over row i's entries k of
// table[coefficients[k]] · z[columns[k]], where z = (inputs, aux) lies in two buffers.
// Coefficient indices 0 and 1 are 1 and -1 (the table's first two entries): added or
// subtracted without a product.
KERNEL void r1cs_rows(const uint* __restrict__ starts, const uint* __restrict__ columns,
                      const uint* __restrict__ coefficients, const FR* __restrict__ table,
                      const FR* __restrict__ inputs, uint n_inputs, const FR* __restrict__ aux,
                      uint rows, FR* __restrict__ out) {
  const uint i = GET_GLOBAL_ID();
  if (i >= rows) return;
  FR acc = FR_(ZERO);
  const uint end = starts[i + 1];
  for (uint k = starts[i]; k < end; k++) {
    const uint col = columns[k];
    const FR v = col < n_inputs ? inputs[col] : aux[col - n_inputs];
    const uint c = coefficients[k];
    if (c == 0u) {
      acc = zk_fr_add(acc, v);
    } else if (c == 1u) {
      acc = zk_fr_sub(acc, v);
    } else {
      acc = zk_fr_add(acc, zk_fr_mul(v, table[c]));
    }
  }
  out[i] = acc;
}

// z from its split form (zkpipe-msm's SplitScalars, which the MSMs upload anyway): z[i] is 1
// where bit i of `ones` is set and 0 elsewhere; r1cs_z_tail then writes the other values.
KERNEL void r1cs_z_ones(const uint* __restrict__ ones, uint len, FR* __restrict__ z) {
  const uint i = GET_GLOBAL_ID();
  if (i >= len) return;
  z[i] = ((ones[i >> 5] >> (i & 31u)) & 1u) ? FR_(ONE) : FR_(ZERO);
}

// z[index[k]] = tail[k] for k < count (indices at or past len are skipped).
KERNEL void r1cs_z_tail(const uint* __restrict__ index, const FR* __restrict__ tail, uint count,
                        uint len, FR* __restrict__ z) {
  const uint k = GET_GLOBAL_ID();
  if (k >= count) return;
  const uint i = index[k];
  if (i < len) z[i] = tail[k];
}
