//! Split MSMs of witness-valued queries (Groth16's L, A, B1, B2): most scalars of a
//! Filecoin witness are 0 or 1, so the sum splits into the bases whose scalar is one, added
//! up without any multiplication, and a Pippenger over the few others (the tail); zeros cost
//! nothing. This file holds the host side: [`SplitScalars`], built from the values themselves
//! (so a bitmap can never disagree with them), and [`SplitQuery`], one query's density over
//! the same variables with what the kernels need to number its bases and ones.

use std::ops::Range;

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;
use zkpipe_field::{cast, Fr};

use crate::{Density, MsmError};

/// Variables per block of the parallel classification (a multiple of 32).
const BLOCK: usize = 1 << 16;

/// An assignment z split by value: a bitmap of the variables equal to one, and the
/// variables of any other nonzero value (the tail) with their scalars, in increasing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitScalars {
    len: usize,
    ones: Vec<u32>,
    ones_count: usize,
    tail_index: Vec<u32>,
    tail: Vec<Fr>,
}

/// One block's share of a [`SplitScalars`].
struct BlockSplit {
    /// Bitmap of the block's variables equal to one.
    ones: Vec<u32>,
    /// The tail: the other nonzero variables' indices, and their values.
    index: Vec<u32>,
    tail: Vec<Fr>,
}

/// Splits one block of z, the variables from `first` on, given as consecutive pieces (its
/// limbs compared as they are: blstrs keeps scalars reduced, so one value has one encoding).
fn split_block<'a>(first: usize, len: usize, pieces: impl Iterator<Item = &'a [Fr]>) -> BlockSplit {
    let one = cast::scalars_as_fr(&[Scalar::ONE])[0];
    let zero = Fr::default();
    let mut ones = vec![0u32; len.div_ceil(32)];
    let mut index = Vec::new();
    let mut tail = Vec::new();
    for (i, s) in pieces.flatten().enumerate() {
        if *s == one {
            ones[i / 32] |= 1 << (i % 32);
        } else if *s != zero {
            // `of_parts` refuses assignments of 2^32 variables or more, so this fits.
            index.push((first + i) as u32);
            tail.push(*s);
        }
    }
    BlockSplit { ones, index, tail }
}

/// The pieces of `parts` (read as one sequence) that cover `range`, in order.
fn pieces<'a>(parts: &'a [&'a [Fr]], range: Range<usize>) -> impl Iterator<Item = &'a [Fr]> {
    let starts = parts.iter().scan(0, |at, p| {
        let start = *at;
        *at += p.len();
        Some(start)
    });
    parts.iter().zip(starts).filter_map(move |(p, start)| {
        let from = range.start.max(start);
        let to = range.end.min(start + p.len());
        (from < to).then(|| &p[from - start..to - start])
    })
}

impl SplitScalars {
    /// Splits `z` by value (in parallel).
    pub fn of(z: &[Scalar]) -> Result<Self, MsmError> {
        Self::of_parts(&[cast::scalars_as_fr(z)])
    }

    /// Splits z given as consecutive parts in the device layout (Groth16's inputs, then aux)
    /// without joining them.
    pub fn of_parts(parts: &[&[Fr]]) -> Result<Self, MsmError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if u32::try_from(len).is_err() {
            return Err(MsmError::TooManyVariables { len });
        }
        let blocks: Vec<BlockSplit> = (0..len.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                let range = b * BLOCK..len.min((b + 1) * BLOCK);
                split_block(range.start, range.len(), pieces(parts, range))
            })
            .collect();
        let tail_len = blocks.iter().map(|b| b.tail.len()).sum();
        let mut out = Self {
            len,
            ones: Vec::with_capacity(len.div_ceil(32)),
            ones_count: 0,
            tail_index: Vec::with_capacity(tail_len),
            tail: Vec::with_capacity(tail_len),
        };
        for block in blocks {
            out.ones.extend_from_slice(&block.ones);
            out.tail_index.extend_from_slice(&block.index);
            out.tail.extend_from_slice(&block.tail);
        }
        out.ones_count = out.ones.iter().map(|w| w.count_ones() as usize).sum();
        Ok(out)
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no variables.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Variables equal to one.
    pub fn ones_count(&self) -> usize {
        self.ones_count
    }

    /// One bit per variable, set where it equals one (32 variables a word).
    pub fn ones(&self) -> &[u32] {
        &self.ones
    }

    /// The variables of the tail (neither 0 nor 1), increasing.
    pub fn tail_index(&self) -> &[u32] {
        &self.tail_index
    }

    /// The tail's scalars (Montgomery form, as blstrs holds them).
    pub fn tail(&self) -> &[Fr] {
        &self.tail
    }
}

/// One query of a split MSM: which variables it has bases for (its density over all of z),
/// numbered so that each kernel finds a variable's base (its rank among the selected ones) and
/// shares the ones among its threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitQuery {
    density: Vec<u32>,
    prefix: Vec<u32>,
    sel: Vec<u32>,
    sel_prefix: Vec<u32>,
    /// Selected variables of the tail (neither 0 nor 1).
    tail_selected: usize,
}

/// Exclusive prefix counts of the set bits of `words` (one entry more than the words).
fn prefix_counts(words: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(words.len() + 1);
    let mut acc = 0u32;
    out.push(0);
    for w in words {
        acc += w.count_ones();
        out.push(acc);
    }
    out
}

/// A run of bitmap words and the number of variables a query selects in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordPiece {
    pub words: Range<usize>,
    pub points: usize,
}

/// What one chunk of a split MSM covers: words of the bitmaps, the ranks of their selected
/// variables (the bases), and their tail entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitChunk {
    pub words: Range<usize>,
    pub bases: Range<usize>,
    pub tail: Range<usize>,
}

impl SplitQuery {
    /// The query of `density` (one flag per variable of z) over `split`.
    pub fn new(split: &SplitScalars, density: &Density) -> Result<Self, MsmError> {
        if density.len() != split.len() {
            return Err(MsmError::DensityLength {
                bitmap: density.len(),
                scalars: split.len(),
            });
        }
        let mut words = vec![0u32; split.len().div_ceil(32)];
        words
            .par_iter_mut()
            .zip(density.bits().par_chunks(32))
            .for_each(|(w, bits)| {
                *w = bits
                    .iter()
                    .enumerate()
                    .fold(0, |acc, (i, &b)| acc | (u32::from(b) << i));
            });
        Ok(Self::of_words(split, words))
    }

    /// The same sum over only the selected variables whose value is not zero: its bases are
    /// the points that must reach the device ([`SplitQuery::gather`] picks them out of the
    /// whole query's points); the others' scalar is 0, so the sum is the same.
    pub fn nonzero_only(&self, split: &SplitScalars) -> Result<Self, MsmError> {
        if self.words() != split.len().div_ceil(32) {
            return Err(MsmError::DensityLength {
                bitmap: self.words() * 32,
                scalars: split.len(),
            });
        }
        let mut nonzero = split.ones.clone();
        for &v in &split.tail_index {
            nonzero[v as usize / 32] |= 1 << (v % 32);
        }
        let words = self
            .density
            .par_iter()
            .zip(&nonzero)
            .map(|(d, n)| d & n)
            .collect();
        Ok(Self::of_words(split, words))
    }

    /// The query selecting the variables whose bit is set in `words` (one word per 32
    /// variables of `split`).
    fn of_words(split: &SplitScalars, words: Vec<u32>) -> Self {
        let sel: Vec<u32> = words.iter().zip(&split.ones).map(|(d, o)| d & o).collect();
        let tail_selected = split
            .tail_index
            .par_iter()
            .filter(|&&v| words[v as usize / 32] >> (v % 32) & 1 == 1)
            .count();
        Self {
            prefix: prefix_counts(&words),
            sel_prefix: prefix_counts(&sel),
            density: words,
            sel,
            tail_selected,
        }
    }

    /// True when every variable `other` selects, this query selects too.
    pub fn covers(&self, other: &SplitQuery) -> bool {
        self.words() == other.words()
            && self
                .density
                .par_iter()
                .zip(&other.density)
                .all(|(mine, theirs)| theirs & !mine == 0)
    }

    /// `words` cut into consecutive runs of whole words, each selecting at most `max_points`
    /// variables (at least 32: a word's worth); runs that select nothing are left out.
    pub fn pieces(&self, words: Range<usize>, max_points: usize) -> Vec<WordPiece> {
        let max = max_points.max(32) as u32;
        let mut out = Vec::new();
        let mut lo = words.start;
        while lo < words.end {
            // The furthest word end such that the run from lo selects at most max.
            let limit = self.prefix[lo].saturating_add(max);
            let upto = self.prefix[lo + 1..=words.end].partition_point(|&p| p <= limit);
            let hi = lo + upto.max(1);
            let points = (self.prefix[hi] - self.prefix[lo]) as usize;
            if points > 0 {
                out.push(WordPiece {
                    words: lo..hi,
                    points,
                });
            }
            lo = hi;
        }
        out
    }

    /// Copies into `out` the points of the variables `self` selects in bitmap words `words`,
    /// in order, out of `all`: the points of the variables `whole` selects, numbered by their
    /// rank in it (`whole` covers `self`, as a query covers its [`SplitQuery::nonzero_only`]).
    /// Returns the number of points written; an error, with `out` partly written, when the
    /// queries, `all`, `words` or `out` do not fit together.
    pub fn gather<P: Copy + Send + Sync>(
        &self,
        whole: &SplitQuery,
        all: &[P],
        words: Range<usize>,
        out: &mut [P],
    ) -> Result<usize, MsmError> {
        /// Words a thread gathers at a time.
        const BLOCK_WORDS: usize = 1 << 10;
        if whole.words() != self.words() {
            return Err(MsmError::DensityLength {
                bitmap: self.words() * 32,
                scalars: whole.words() * 32,
            });
        }
        if all.len() != whole.selected() {
            return Err(MsmError::DensityCount {
                selected: whole.selected(),
                bases: all.len(),
            });
        }
        if words.start > words.end || words.end > self.words() {
            return Err(MsmError::Gather {
                what: "bitmap words",
                got: words.end,
                room: self.words(),
            });
        }
        let first = self.prefix[words.start] as usize;
        let count = self.prefix[words.end] as usize - first;
        if out.len() < count {
            return Err(MsmError::Gather {
                what: "points to gather",
                got: count,
                room: out.len(),
            });
        }
        let mut rest = &mut out[..count];
        let mut pieces = Vec::with_capacity(words.len().div_ceil(BLOCK_WORDS));
        for lo in words.clone().step_by(BLOCK_WORDS) {
            let hi = (lo + BLOCK_WORDS).min(words.end);
            let n = (self.prefix[hi] - self.prefix[lo]) as usize;
            let (piece, tail) = rest.split_at_mut(n);
            pieces.push((lo..hi, piece));
            rest = tail;
        }
        pieces.into_par_iter().try_for_each(|(block, piece)| {
            let mut at = 0;
            for w in block {
                let (mut bits, theirs) = (self.density[w], whole.density[w]);
                if bits & !theirs != 0 {
                    return Err(MsmError::Gather {
                        what: "variables the whole query does not select, in word",
                        got: w,
                        room: whole.words(),
                    });
                }
                let from = whole.prefix[w] as usize;
                while bits != 0 {
                    let below = (1u32 << bits.trailing_zeros()) - 1;
                    piece[at] = all[from + (theirs & below).count_ones() as usize];
                    at += 1;
                    bits &= bits - 1;
                }
            }
            Ok(())
        })?;
        Ok(count)
    }

    /// Number of selected variables whose value is not zero: the bases the sum reads (the
    /// others' scalar is 0, so their bases contribute nothing).
    pub fn nonzero(&self) -> usize {
        self.ones() + self.tail_selected
    }

    /// Number of selected variables: the bases the query needs.
    pub fn selected(&self) -> usize {
        self.prefix.last().copied().unwrap_or(0) as usize
    }

    /// Number of selected variables equal to one.
    pub fn ones(&self) -> usize {
        self.sel_prefix.last().copied().unwrap_or(0) as usize
    }

    /// Number of bitmap words.
    pub fn words(&self) -> usize {
        self.density.len()
    }

    /// The bitmaps the kernels read: density, its prefix counts, selected ones, theirs.
    pub fn bitmaps(&self) -> [&[u32]; 4] {
        [&self.density, &self.prefix, &self.sel, &self.sel_prefix]
    }

    /// Host bytes the kernels' bitmaps take on the device.
    pub fn device_bytes(&self) -> usize {
        4 * (2 * self.density.len() + 2 * self.prefix.len())
    }

    /// Chunks of whole words, each with at most `max_bases` bases (usize::MAX when the bases
    /// are resident) and `max_tail` tail entries (the Pippenger workspace's points); limits
    /// below 32 count as 32.
    pub(crate) fn chunks(
        &self,
        split: &SplitScalars,
        max_bases: usize,
        max_tail: usize,
    ) -> Vec<SplitChunk> {
        let (max_bases, max_tail) = (max_bases.max(32), max_tail.max(32));
        let words = self.density.len();
        let index = &split.tail_index;
        let mut out = Vec::new();
        let (mut lo, mut tail_lo) = (0, 0);
        while lo < words {
            let (mut hi, mut tail_hi) = (lo, tail_lo);
            while hi < words {
                let bases = (self.prefix[hi + 1] - self.prefix[lo]) as usize;
                let end = (hi + 1) * 32;
                let mut t = tail_hi;
                while t < index.len() && (index[t] as usize) < end {
                    t += 1;
                }
                if bases > max_bases || t - tail_lo > max_tail {
                    break;
                }
                (hi, tail_hi) = (hi + 1, t);
            }
            out.push(SplitChunk {
                bases: self.prefix[lo] as usize..self.prefix[hi] as usize,
                words: lo..hi,
                tail: tail_lo..tail_hi,
            });
            (lo, tail_lo) = (hi, tail_hi);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(values: &[u64]) -> Vec<Scalar> {
        values.iter().map(|&v| Scalar::from(v)).collect()
    }

    #[test]
    fn the_split_follows_the_values() {
        let s = SplitScalars::of(&z(&[0, 1, 5, 1, 0, 7])).unwrap();
        assert_eq!(s.ones(), &[0b1010]);
        assert_eq!(s.ones_count(), 2);
        assert_eq!(s.tail_index(), &[2, 5]);
        assert_eq!(s.tail().len(), 2);
    }

    #[test]
    fn parts_split_as_their_concatenation() {
        let values: Vec<u64> = (0..(2 * BLOCK + 40) as u64)
            .map(|i| [0, 1, 1, 0, 1, i + 2][(i * 7 % 6) as usize])
            .collect();
        let whole = z(&values);
        let want = SplitScalars::of(&whole).unwrap();
        for cuts in [
            vec![0, 1],
            vec![3],
            vec![BLOCK - 1, BLOCK],
            vec![0, 0, BLOCK, BLOCK + 33],
            vec![whole.len()],
        ] {
            let mut parts = Vec::new();
            let mut at = 0;
            for c in cuts.iter().chain([&whole.len()]) {
                parts.push(cast::scalars_as_fr(&whole[at..*c]));
                at = *c;
            }
            let got = SplitScalars::of_parts(&parts).unwrap();
            assert_eq!(got, want, "cut at {cuts:?}");
        }
        assert_ne!(want.ones_count(), 0);
        assert_ne!(want.tail().len(), 0);
    }

    #[test]
    fn a_query_numbers_its_bases_and_ones() {
        let s = SplitScalars::of(&z(&[0, 1, 5, 1, 0, 7])).unwrap();
        let d = Density::from_bools(vec![true, true, false, true, true, true]);
        let q = SplitQuery::new(&s, &d).unwrap();
        assert_eq!(q.selected(), 5);
        assert_eq!(q.ones(), 2);
        // Selected: 0 (zero), 1 (one), 3 (one), 4 (zero), 5 (seven); 2 (five) is not.
        assert_eq!(q.nonzero(), 3);
        let bad = Density::from_bools(vec![true; 5]);
        let err = SplitQuery::new(&s, &bad).unwrap_err();
        assert!(
            matches!(
                err,
                MsmError::DensityLength {
                    bitmap: 5,
                    scalars: 6
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn chunks_cover_every_word_within_their_bounds() {
        let values: Vec<u64> = (0..5000u64)
            .map(|i| [0, 1, 1, i + 2][i as usize % 4])
            .collect();
        let s = SplitScalars::of(&z(&values)).unwrap();
        let d = Density::from_bools((0..5000).map(|i| i % 3 != 0).collect());
        let q = SplitQuery::new(&s, &d).unwrap();
        for (max, max_tail) in [(32, 32), (100, 40), (1000, 1000), (usize::MAX, 64)] {
            let c = q.chunks(&s, max, max_tail);
            assert_eq!(c[0].words.start, 0);
            assert_eq!(c.last().unwrap().words.end, q.words());
            assert_eq!(c.last().unwrap().tail.end, s.tail_index().len());
            for w in c.windows(2) {
                assert_eq!(w[0].words.end, w[1].words.start);
                assert_eq!(w[0].bases.end, w[1].bases.start);
                assert_eq!(w[0].tail.end, w[1].tail.start);
            }
            assert!(c
                .iter()
                .all(|k| k.bases.len() <= max && k.tail.len() <= max_tail));
        }
        let nonzero = (0..5000)
            .filter(|&i| d.is_selected(i) && values[i] != 0)
            .count();
        assert_eq!(q.nonzero(), nonzero);
    }

    #[test]
    fn the_nonzero_query_gathers_the_points_whose_scalar_is_not_zero() {
        // Long enough for several blocks of words; every fourth value 0, and runs of zeros.
        let n = 70_000;
        let values: Vec<u64> = (0..n as u64)
            .map(|i| match i {
                1000..=1300 => 0,
                _ => [0, 1, 1, i + 2][i as usize % 4],
            })
            .collect();
        let s = SplitScalars::of(&z(&values)).unwrap();
        let d = Density::from_bools((0..n).map(|i| i % 3 != 0).collect());
        let q = SplitQuery::new(&s, &d).unwrap();
        let nz = q.nonzero_only(&s).unwrap();
        assert!(q.covers(&nz) && !nz.covers(&q));
        assert_eq!(nz.selected(), q.nonzero());
        assert_eq!((nz.ones(), nz.nonzero()), (q.ones(), q.nonzero()));
        // A query's points, numbered by rank: point k is the k-th selected variable's index.
        let all: Vec<usize> = (0..n).filter(|&i| d.is_selected(i)).collect();
        let want: Vec<usize> = all.iter().copied().filter(|&i| values[i] != 0).collect();
        let mut out = vec![usize::MAX; want.len()];
        assert_eq!(
            nz.gather(&q, &all, 0..q.words(), &mut out).unwrap(),
            want.len()
        );
        assert_eq!(out, want);
        // Chunk by chunk and piece by piece, as a batch streams them: each one's share, in
        // order, the pieces within their bound.
        let mut joined = Vec::new();
        for c in nz.chunks(&s, 1000, 1000) {
            let pieces = nz.pieces(c.words.clone(), 100);
            assert!(pieces.iter().all(|p| p.points <= 100 && p.points > 0));
            assert_eq!(
                pieces.iter().map(|p| p.points).sum::<usize>(),
                c.bases.len()
            );
            for p in pieces {
                let mut piece = vec![usize::MAX; p.points];
                assert_eq!(nz.gather(&q, &all, p.words, &mut piece).unwrap(), p.points);
                joined.extend(piece);
            }
        }
        assert_eq!(joined, want);
        // A bound below a word's worth counts as 32; runs selecting nothing have no piece
        // (variables 1000 to 1300 are all 0).
        assert!(nz.pieces(0..q.words(), 1).iter().all(|p| p.points <= 32));
        assert!(nz.pieces(32..40, 1000).is_empty());
        // A split of another length is refused; so are points, words, room or a query that
        // do not fit together, with nothing read out of bounds.
        let short = SplitScalars::of(&z(&values[..100])).unwrap();
        assert!(q.nonzero_only(&short).is_err());
        let mut room = vec![0usize; want.len()];
        let words = 0..q.words();
        assert!(matches!(
            nz.gather(&q, &all[1..], words.clone(), &mut room),
            Err(MsmError::DensityCount { .. })
        ));
        assert!(matches!(
            nz.gather(&q, &all, 0..q.words() + 1, &mut room),
            Err(MsmError::Gather { .. })
        ));
        assert!(matches!(
            nz.gather(&q, &all, words.clone(), &mut room[1..]),
            Err(MsmError::Gather { .. })
        ));
        // The whole query the other way round: it selects variables the nonzero one lacks.
        let nz_all: Vec<usize> = all.iter().copied().filter(|&i| values[i] != 0).collect();
        assert!(matches!(
            q.gather(&nz, &nz_all, words, &mut vec![0; all.len()]),
            Err(MsmError::Gather { .. })
        ));
    }
}
