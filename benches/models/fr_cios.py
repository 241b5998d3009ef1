# A model of zkpipe's Fr CIOS product (crates/field/kernels/prelude/arith.cu: zk_fr_cios_first,
# zk_fr_cios_row, zk_fr_cios_last, zk_fr_cios_reduce, reduce_once) at the 32-bit limb level,
# with PTX carry semantics. It checks a·b·2^-256 mod r for a < r and b < 2r: a second operand
# below 2r (an unreduced difference a - b + r) is safe. Session 12's NTT used that; since its
# twiddles ride in the rounds (session 13) the product comes before the difference and both
# operands are reduced. Run: python3 benches/models/fr_cios.py
import random
r = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
M = (1 << 32) - 1
L = 8
R = 1 << 256
P = [(r >> (32 * i)) & M for i in range(L)]
class CC:
    def __init__(s): s.c = 0
def add_cc(cc, a, b): t = a + b; cc.c = t >> 32; return t & M
def addc_cc(cc, a, b): t = a + b + cc.c; cc.c = t >> 32; return t & M
def addc(cc, a, b): t = a + b + cc.c; return t & M
def madlo_cc(cc, a, b, c): t = ((a * b) & M) + c; cc.c = t >> 32; return t & M
def madloc_cc(cc, a, b, c): t = ((a * b) & M) + c + cc.c; cc.c = t >> 32; return t & M
def madhic_cc(cc, a, b, c): t = ((a * b) >> 32) + c + cc.c; cc.c = t >> 32; return t & M
def madhic(cc, a, b, c): t = ((a * b) >> 32) + c + cc.c; return t & M
def reduce(lo, hi):
    cc = CC()
    l = lo[0]; m = (l * M) & M; m_r1_hi = (m * M) >> 32
    hi[0] = add_cc(cc, hi[0], l); hi[1] = addc_cc(cc, hi[1], m_r1_hi)
    for j in range(2, L, 2):
        hi[j] = madloc_cc(cc, m, P[j + 1], hi[j]); hi[j + 1] = madhic_cc(cc, m, P[j + 1], hi[j + 1])
    lo[0] = add_cc(cc, lo[0], m); lo[1] = addc_cc(cc, lo[1], 0)
    for j in range(2, L, 2):
        lo[j] = madloc_cc(cc, m, P[j], lo[j]); lo[j + 1] = madhic_cc(cc, m, P[j], lo[j + 1])
    hi[L - 1] = addc(cc, hi[L - 1], 0)
def row(lo, hi, a, bi):
    cc = CC()
    lo[0] = add_cc(cc, lo[0], hi[1])
    for j in range(0, L - 2, 2):
        hi[j] = madloc_cc(cc, a[j + 1], bi, hi[j + 2]); hi[j + 1] = madhic_cc(cc, a[j + 1], bi, hi[j + 3])
    hi[L - 2] = madloc_cc(cc, a[L - 1], bi, 0); hi[L - 1] = madhic(cc, a[L - 1], bi, 0)
    lo[0] = madlo_cc(cc, a[0], bi, lo[0]); lo[1] = madhic_cc(cc, a[0], bi, lo[1])
    for j in range(2, L, 2):
        lo[j] = madloc_cc(cc, a[j], bi, lo[j]); lo[j + 1] = madhic_cc(cc, a[j], bi, lo[j + 1])
    hi[L - 1] = addc(cc, hi[L - 1], 0)
    reduce(lo, hi)
def first(x, y, a, b0):
    for j in range(0, L, 2):
        x[j] = (a[j] * b0) & M; x[j + 1] = (a[j] * b0) >> 32
        y[j] = (a[j + 1] * b0) & M; y[j + 1] = (a[j + 1] * b0) >> 32
    reduce(x, y)
def last(x, y):
    cc = CC(); rr = [0] * L
    rr[0] = add_cc(cc, x[0], y[1])
    for j in range(1, L - 1): rr[j] = addc_cc(cc, x[j], y[j + 1])
    rr[L - 1] = addc(cc, x[L - 1], 0)
    v = sum(rr[i] << (32 * i) for i in range(L))
    return v - r if v >= r else v
def limbs(v): return [(v >> (32 * i)) & M for i in range(L)]
def mul(a, b):
    A, B = limbs(a), limbs(b); x = [0] * L; y = [0] * L
    first(x, y, A, B[0])
    for i in range(1, L):
        if i & 1: row(y, x, A, B[i])
        else: row(x, y, A, B[i])
    return last(x, y)
Rinv = pow(R, -1, r)
rng = random.Random(12)
edges_a = [0, 1, r - 1, R % r, (R * R) % r]
edges_b = [0, 1, r - 1, r, r + 1, 2 * r - 1, 2 * r - 2, r + (1 << 32), 2 * r - (1 << 224)]
cases = [(a, b) for a in edges_a for b in edges_b]
cases += [(rng.randrange(r), rng.randrange(2 * r)) for _ in range(40000)]
cases += [(rng.randrange(r), r + rng.randrange(r)) for _ in range(20000)]
cases += [(r - 1 - rng.randrange(1 << 64), 2 * r - 1 - rng.randrange(1 << 64)) for _ in range(5000)]
for a, b in cases:
    got = mul(a, b); want = a * b * Rinv % r
    assert got == want, (hex(a), hex(b), hex(got), hex(want))
# and a - b + r for a, b < r lies in (0, 2r) and fits 256 bits
assert 2 * r < R
print("ok", len(cases), "products (a < r, b < 2r) equal to a*b/R mod r")
