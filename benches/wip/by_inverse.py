"""A model of the variable-time inversion that G2's batch-affine bucket sums use (zk_fp_inverse_vartime, prelude fp2.cu; benches/NOTES.md, sessions 15 and 16):
Bernstein-Yang divsteps in variable time (the points are public), in batches of N steps that
read only the low N bits of f and g, each batch's 2x2 transition matrix then applied to the full
f, g (an exact division by 2^N) and to the coefficients d, e mod p. Checks a^-1 against pow(a, p-2, p)
and counts the batches and the multiply-adds a GPU kernel with 32-bit limbs would spend.
Run: python3 benches/wip/by_inverse.py"""
import random
import statistics

P = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
N = 30  # divsteps a batch: matrix entries stay below 2^N in magnitude, one 32-bit limb with sign


def batch(delta, f, g):
    """N divsteps on the low N bits of f and g: (delta, matrix (u, v, q, r)) with
    (f', g') = (u f + v g, q f + r g) / 2^N."""
    u, v, q, r = 1, 0, 0, 1
    for _ in range(N):
        if delta > 0 and g & 1:
            delta, f, g = 1 - delta, g, (g - f) >> 1
            u, v, q, r = 2 * q, 2 * r, q - u, r - v
        elif g & 1:
            delta, g = 1 + delta, (g + f) >> 1
            u, v, q, r = 2 * u, 2 * v, q + u, r + v
        else:
            delta, g = 1 + delta, g >> 1
            u, v, q, r = 2 * u, 2 * v, q, r
    return delta, (u, v, q, r)


def inverse(a):
    """a^-1 mod P for 0 < a < P, and the number of batches."""
    delta, f, g, d, e = 1, P, a, 0, 1
    inv2n = pow(2, -N, P)
    batches = 0
    while g != 0:
        mask = (1 << N) - 1
        delta, (u, v, q, r) = batch(delta, f & mask, g & mask)
        f, g = (u * f + v * g) >> N, (q * f + r * g) >> N  # exact divisions
        d, e = (u * d + v * e) * inv2n % P, (q * d + r * e) * inv2n % P
        batches += 1
    # f = ±1 here (gcd 1), and d·a = f mod P.
    return (d * f) % P, batches


def main():
    rng = random.Random(15)
    counts = []
    for a in [1, 2, P - 1, P - 2, (1 << 380) + 1] + [rng.randrange(1, P) for _ in range(2000)]:
        x, b = inverse(a)
        assert x == pow(a, P - 2, P), a
        counts.append(b)
    mean = statistics.mean(counts)
    # Per batch, with 12 32-bit limbs: f, g updated by 4 products of 12 limbs by one limb (48
    # multiply-adds), d, e the same plus a Montgomery-style division by 2^N (2 x 12).
    per_batch = 48 + 48 + 24
    print(f"batches of {N}: mean {mean:.1f}, max {max(counts)}; about {mean * per_batch:.0f} "
          f"multiply-adds of 32x32 bits beside {mean * N:.0f} divsteps on one word, against "
          f"about {381 + 60} Fp products (each 144 + 144) for Fermat")


if __name__ == "__main__":
    main()
