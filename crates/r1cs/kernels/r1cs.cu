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
