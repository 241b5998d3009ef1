//! Faults injected into the arithmetic, for tests of the check every proof gets before it is
//! returned (feature `fault-injection`, for tests only). Process-wide: run such tests in
//! their own process (nextest) or one at a time.

use std::sync::atomic::{AtomicU64, Ordering};

use blstrs::{G1Affine, G1Projective};
use group::{Curve, Group};

use crate::prover::G1Parts;

/// Proofs still to corrupt.
static CORRUPT: AtomicU64 = AtomicU64::new(0);

/// Flips one bit of the H MSM's sum in each of the next `count` jobs, after the MSMs and
/// before the proof is assembled: the proof those jobs make is wrong.
pub fn corrupt_next_proofs(count: u64) {
    CORRUPT.store(count, Ordering::SeqCst);
}

/// Proofs still to be corrupted.
pub fn corruptions_left() -> u64 {
    CORRUPT.load(Ordering::SeqCst)
}

/// `g1` as it leaves the MSMs, with one bit of H's x coordinate flipped when a corruption is
/// armed.
pub(crate) fn after_msms(g1: &G1Parts) -> G1Parts {
    let mut out = *g1;
    let armed = CORRUPT
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if armed {
        let mut bytes = out.h.to_affine().to_uncompressed();
        // The lowest bit of x (big-endian, after the flag bits): x stays below p.
        bytes[47] ^= 1;
        out.h = match Option::<G1Affine>::from(G1Affine::from_uncompressed_unchecked(&bytes)) {
            Some(p) => G1Projective::from(p),
            // Not decodable: a wrong point all the same.
            None => out.h + G1Projective::generator(),
        };
    }
    out
}
