// Test kernels of zkpipe-field: each field's add, sub, mul and square, the bucket additions'
// a·b - c·d, and G1/G2 double, mixed add and add, element by element, for the tests that
// check them against blstrs.

#define FIELD_OPS(NAME, T, OP)                                                   \
  KERNEL void NAME(const T* a, const T* b, T* out, uint n) {                     \
    const uint i = GET_GLOBAL_ID();                                              \
    if (i >= n) return;                                                          \
    const T x = a[i];                                                            \
    const T y = b[i];                                                            \
    out[i] = OP(add)(x, y);                                                      \
    out[n + i] = OP(sub)(x, y);                                                  \
    out[2 * n + i] = OP(mul)(x, y);                                              \
    out[3 * n + i] = OP(sqr)(x);                                                 \
  }

FIELD_OPS(fr_ops, FR, FR_)
FIELD_OPS(fp_ops, FP, FP_)
FIELD_OPS(fp2_ops, FP2, FP2_)

// zkpipe's branch-free operations (the prelude's arith.cu), square as a product.
#define ZK_FR(f) ZK_FR_##f
#define ZK_FR_add zk_fr_add
#define ZK_FR_sub zk_fr_sub
#define ZK_FR_mul zk_fr_mul
#define ZK_FR_sqr(x) zk_fr_mul(x, x)
#define ZK_FP(f) ZK_FP_##f
#define ZK_FP_add zk_fp_add
#define ZK_FP_sub zk_fp_sub
#define ZK_FP_mul zk_fp_mul
#define ZK_FP_sqr(x) zk_fp_mul(x, x)
FIELD_OPS(zk_fr_ops, FR, ZK_FR)
FIELD_OPS(zk_fp_ops, FP, ZK_FP)

// The CIOS multiplications and the dedicated squarings.
#define ZK_FRC(f) ZK_FRC_##f
#define ZK_FRC_add zk_fr_add
#define ZK_FRC_sub zk_fr_sub
#define ZK_FRC_mul zk_fr_mul_cios
#define ZK_FRC_sqr zk_fr_sqr
#define ZK_FPC(f) ZK_FPC_##f
#define ZK_FPC_add zk_fp_add
#define ZK_FPC_sub zk_fp_sub
#define ZK_FPC_mul zk_fp_mul_cios
#define ZK_FPC_sqr zk_fp_sqr
FIELD_OPS(zk_frc_ops, FR, ZK_FRC)
FIELD_OPS(zk_fpc_ops, FP, ZK_FPC)

// zkpipe's Fp2 (the prelude's fp2.cu): the lazy multiplication and the squaring.
#define ZK_FP2T(f) ZK_FP2T_##f
#define ZK_FP2T_add zk_fp2_add
#define ZK_FP2T_sub zk_fp2_sub
#define ZK_FP2T_mul zk_fp2_mul
#define ZK_FP2T_sqr zk_fp2_sqr
FIELD_OPS(zk_fp2_ops, FP2, ZK_FP2T)

// The bucket additions' a·b - c·d with one reduction (curve.cu, fp2.cu): out[i] = a_i·b_i -
// a_j·b_j for j = n - 1 - i, and out[n + i] = a_i·b_i - b_i·a_i, which is 0.
#define MUL_SUB_OPS(NAME, T, MUL_SUB)                                            \
  KERNEL void NAME(const T* a, const T* b, T* out, uint n) {                     \
    const uint i = GET_GLOBAL_ID();                                              \
    if (i >= n) return;                                                          \
    const uint j = n - 1 - i;                                                    \
    out[i] = MUL_SUB(a[i], b[i], a[j], b[j]);                                    \
    out[n + i] = MUL_SUB(a[i], b[i], b[i], a[i]);                                \
  }

MUL_SUB_OPS(zk_fp_mul_sub_ops, FP, zk_fp_mul_sub_call)
MUL_SUB_OPS(zk_fp2_mul_sub_ops, FP2, zk_fp2_mul_sub)

// The inverses: out[i] = 1 / a_i in variable time (Bernstein-Yang divsteps), out[n + i] by
// Fermat's a^(p - 2); 0 for 0. b is not read.
#define INVERSE_OPS(NAME, T, VARTIME, FERMAT)                                    \
  KERNEL void NAME(const T* a, const T* b, T* out, uint n) {                     \
    const uint i = GET_GLOBAL_ID();                                              \
    if (i >= n) return;                                                          \
    out[i] = VARTIME(a[i]);                                                      \
    out[n + i] = FERMAT(a[i]);                                                   \
  }

INVERSE_OPS(zk_fp_inverse_ops, FP, zk_fp_inverse_vartime, zk_fp_inverse)
INVERSE_OPS(zk_fp2_inverse_ops, FP2, zk_fp2_inverse_vartime, zk_fp2_inverse)

// out[i] = 2p, out[n + i] = p + q (mixed), out[2n + i] = p + q (both Jacobian, q with z = 1).
#define POINT_OPS(NAME, JAC, AFF, OP, ONE)                                       \
  KERNEL void NAME(const JAC* p, const AFF* q, JAC* out, uint n) {               \
    const uint i = GET_GLOBAL_ID();                                              \
    if (i >= n) return;                                                          \
    const JAC a = p[i];                                                          \
    const AFF b = q[i];                                                          \
    JAC bj;                                                                      \
    bj.x = b.x;                                                                  \
    bj.y = b.y;                                                                  \
    bj.z = ONE;                                                                  \
    out[i] = OP(double)(a);                                                      \
    out[n + i] = OP(add_mixed)(a, b);                                            \
    out[2 * n + i] = OP(add)(a, bj);                                             \
  }

POINT_OPS(g1_ops, G1_JACOBIAN, G1_AFFINE, G1_, FP_(ONE))
POINT_OPS(g2_ops, G2_JACOBIAN, G2_AFFINE, G2_, FP2_(ONE))
