//! Keys of random points and witnesses shaped like Filecoin's, for benchmarks and the
//! `zkpipe prove` main job at sizes where a real setup would take too long. Proofs made with
//! them are computed exactly as real ones but do not verify (the key has no trapdoor).

use blstrs::Scalar;
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use zkpipe_msm::testgen::{g1_points, g2_points, scalars};
use zkpipe_msm::Density;

use crate::{KeyParts, LentWitness, ProveError, ProvingKey, Scalars, VerifyingKey, Witness};

/// The shape of a generated circuit.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// log2 of the domain size.
    pub log_n: u32,
    /// Public inputs (the constant one included).
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// One aux variable in `a_every` is left out of the A query (Filecoin: near 100% dense).
    pub a_every: usize,
    /// One aux variable in `b_every` is in the B queries (Filecoin: about 25%).
    pub b_every: usize,
}

impl Shape {
    /// Filecoin-like: 2^k domain, about as many aux variables as constraints.
    pub fn filecoin(log_n: u32) -> Self {
        let n = 1usize << log_n;
        Self {
            log_n,
            inputs: 2,
            aux: n - n / 16,
            a_every: 64,
            b_every: 4,
        }
    }

    /// The aux variables a key of this shape has A points for.
    pub fn a_density(&self) -> Density {
        Density::from_bools(
            (0..self.aux)
                .map(|i| i % self.a_every.max(1) != 1)
                .collect(),
        )
    }

    /// The aux variables a key of this shape has B points for.
    pub fn b_density(&self) -> Density {
        Density::from_bools(
            (0..self.aux)
                .map(|i| i % self.b_every.max(1) == 0)
                .collect(),
        )
    }
}

/// Distinct points a generated key draws from (repeated beyond that).
const POOL: usize = 1 << 22;

/// `len` values repeating `pool` from `offset` on, written in parallel (the allocation's
/// pages are first touched by many threads, not one).
fn cycle<P: Copy + Send + Sync + Default>(pool: &[P], offset: usize, len: usize) -> Vec<P> {
    if pool.is_empty() {
        return (0..len).into_par_iter().map(|_| P::default()).collect();
    }
    // The pools of large shapes have a power-of-two length: a mask, not a division, per value.
    let mask = pool.len().is_power_of_two().then(|| pool.len() - 1);
    (0..len)
        .into_par_iter()
        .map(|i| match mask {
            Some(m) => pool[(i + offset) & m],
            None => pool[(i + offset) % pool.len()],
        })
        .collect()
}

/// A key of random points for `shape` (no trapdoor: its proofs do not verify), unchecked.
pub fn random_key(shape: &Shape, seed: u64) -> Result<ProvingKey, ProveError> {
    ProvingKey::new_unchecked(random_key_parts(shape, seed))
}

/// The points of [`random_key`]. Points repeat from one pool of 2^22 so that large keys are
/// made in seconds (each query starts at another place in the pool).
pub fn random_key_parts(shape: &Shape, seed: u64) -> KeyParts {
    let n = 1usize << shape.log_n;
    let g1 = g1_points(n.max(shape.aux + shape.inputs).min(POOL), seed);
    let b_len = shape.inputs + shape.b_density().selected();
    let g2 = g2_points(b_len.clamp(1, 1 << 20), seed ^ 7);
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ 11);
    let p1 = |r: &mut ChaCha8Rng| blstrs::G1Projective::random(r).to_affine();
    let p2 = |r: &mut ChaCha8Rng| blstrs::G2Projective::random(r).to_affine();
    let vk = VerifyingKey {
        alpha_g1: p1(&mut r),
        beta_g1: p1(&mut r),
        beta_g2: p2(&mut r),
        gamma_g2: p2(&mut r),
        delta_g1: p1(&mut r),
        delta_g2: p2(&mut r),
        ic: (0..shape.inputs).map(|_| p1(&mut r)).collect(),
    };
    let a_len = shape.inputs + shape.a_density().selected();
    KeyParts {
        vk,
        h: cycle(&g1, 0, n - 1),
        l: cycle(&g1, 1, shape.aux),
        a: cycle(&g1, 2, a_len),
        b_g1: cycle(&g1, 3, b_len),
        b_g2: cycle(&g2, 0, b_len),
    }
}

/// A witness for `shape`: random evaluations over 15/16 of the domain, aux values 0 or 1
/// but for one in 16 (random).
pub fn random_witness(shape: &Shape, seed: u64) -> Witness {
    WitnessSource::new(shape, seed).witness()
}

/// Makes witnesses for one shape fast, in fresh vectors filled in parallel from pools of 2^22
/// values (repeated beyond that): for benchmarks that need a new 16 GB witness per 2^27
/// partition without keeping a template of that size.
#[derive(Debug, Clone)]
pub struct WitnessSource {
    shape: Shape,
    evaluations: [Vec<Scalar>; 3],
    aux: Vec<Scalar>,
    input: Vec<Scalar>,
    a_density: Density,
    b_input_density: Density,
    b_density: Density,
}

impl WitnessSource {
    /// Pools of random evaluations a and b, c = a·b, and aux values (0 or 1 but one in 16
    /// random).
    pub fn new(shape: &Shape, seed: u64) -> Self {
        Self::with_densities(
            shape,
            shape.a_density(),
            Density::all(shape.inputs),
            shape.b_density(),
            seed,
        )
    }

    /// Witnesses shaped to `key` (for proving with a key read from a parameter file): its
    /// domain, inputs and aux variables, and densities that select as many variables as the
    /// key has A and B points for, spread evenly. The proofs are computed as real ones but do
    /// not verify: the values satisfy a·b = c at each constraint, not the key's circuit.
    pub fn for_key(key: &ProvingKey, seed: u64) -> Result<Self, ProveError> {
        let [_, _, a_len, b_len, _] = key.query_lens();
        let (inputs, aux) = (key.num_inputs(), key.num_aux());
        let short = |what, got| ProveError::Shape {
            what,
            expected: inputs,
            got,
        };
        let a_aux = a_len.checked_sub(inputs).ok_or(short("A points", a_len))?;
        let b_inputs = b_len.min(inputs);
        let b_aux = b_len - b_inputs;
        let too_many = |what, got| ProveError::Shape {
            what,
            expected: aux,
            got,
        };
        if a_aux > aux {
            return Err(too_many("A points for aux variables", a_aux));
        }
        if b_aux > aux {
            return Err(too_many("B points for aux variables", b_aux));
        }
        let shape = Shape {
            log_n: key.domain_size().trailing_zeros(),
            inputs,
            aux,
            a_every: 0,
            b_every: 0,
        };
        Ok(Self::with_densities(
            &shape,
            spread(aux, a_aux),
            spread(inputs, b_inputs),
            spread(aux, b_aux),
            seed,
        ))
    }

    fn with_densities(
        shape: &Shape,
        a_density: Density,
        b_input_density: Density,
        b_density: Density,
        seed: u64,
    ) -> Self {
        let n = 1usize << shape.log_n;
        let m = (n - n / 16).max(n / 2 + 1).min(n);
        let pool = m.min(POOL);
        let mut input = vec![Scalar::ONE];
        input.extend(scalars(shape.inputs.saturating_sub(1), seed ^ 9));
        let (a, b) = (scalars(pool, seed ^ 1), scalars(pool, seed ^ 2));
        // c = a·b constraint by constraint, as for a satisfied circuit: the H step's check
        // (a·b - c vanishes on the domain) passes, though the key is random.
        let c = a.par_iter().zip(&b).map(|(a, b)| a * b).collect();
        Self {
            shape: *shape,
            evaluations: [a, b, c],
            aux: zkpipe_msm::testgen::mixed(shape.aux.min(POOL), seed ^ 5),
            input,
            a_density,
            b_input_density,
            b_density,
        }
    }

    /// A new witness.
    pub fn witness(&self) -> Witness {
        let [a, b, c] = &self.evaluations;
        let m = self.constraints();
        let abc = [
            cycle(a, 0, m).into(),
            cycle(b, 0, m).into(),
            cycle(c, 0, m).into(),
        ];
        self.witness_with(abc, self.aux().into())
    }

    /// A new witness whose a, b, c are written into `abc` (say, pinned memory lent by the
    /// engine, [`crate::Engine::lend_evaluations`]); an error when they cannot hold them.
    pub fn witness_into(&self, mut abc: [Scalars; 3]) -> Result<Witness, ProveError> {
        let m = self.constraints();
        for (e, pool) in abc.iter_mut().zip(&self.evaluations) {
            fill(e, pool, m)?;
        }
        Ok(self.witness_with(abc, self.aux().into()))
    }

    /// A new witness's aux values (made apart, say before waiting for lent memory).
    pub fn aux(&self) -> Vec<Scalar> {
        cycle(&self.aux, 0, self.shape.aux)
    }

    /// A new witness written into room lent by the engine ([`crate::Engine::lend_witness`]):
    /// a, b, c and the aux values; an error when the room cannot hold them.
    pub fn witness_in_lent(&self, room: LentWitness) -> Result<Witness, ProveError> {
        let LentWitness { a, b, c, mut aux } = room;
        let mut abc = [a, b, c];
        let m = self.constraints();
        for (e, pool) in abc.iter_mut().zip(&self.evaluations) {
            fill(e, pool, m)?;
        }
        fill(&mut aux, &self.aux, self.shape.aux)?;
        Ok(self.witness_with(abc, aux))
    }

    /// Constraints of the shape: 15/16 of the domain.
    fn constraints(&self) -> usize {
        let n = 1usize << self.shape.log_n;
        (n - n / 16).max(n / 2 + 1).min(n)
    }

    fn witness_with(&self, [a, b, c]: [Scalars; 3], aux: Scalars) -> Witness {
        Witness {
            a,
            b,
            c,
            input: self.input.clone(),
            aux,
            a_aux_density: self.a_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_density.clone(),
            recording: None,
        }
    }
}

/// Appends copies of `pool` (the last one cut short) until `v` holds `len` values.
fn fill(v: &mut Scalars, pool: &[Scalar], len: usize) -> Result<(), ProveError> {
    while v.len() < len {
        if pool.is_empty() {
            return v.extend_from_slice(&vec![Scalar::ZERO; len - v.len()]);
        }
        let take = pool.len().min(len - v.len());
        v.extend_from_slice(&pool[..take])?;
    }
    Ok(())
}

/// `selected` of `len` flags set, spread evenly (flag i is set when the count of selected
/// flags up to it grows).
fn spread(len: usize, selected: usize) -> Density {
    let upto = |i: usize| (i as u128 * selected as u128 / len.max(1) as u128) as usize;
    Density::from_bools((0..len).map(|i| upto(i + 1) > upto(i)).collect())
}

/// A witness of the recorded path ([`Witness::recording`]) for `shape`, whose densities are
/// the shape's (so that [`random_key`] fits it), with z as [`random_witness`]'s (inputs
/// random, aux values 0 or 1 but one in 16 random) and a circuit it satisfies, every
/// coefficient 1 or 2 as in Filecoin's circuits (mostly ±1):
/// - seven rows in eight: (sum of A-dense aux variables) · 1 = (the same sum), the A-dense
///   variables spread over them;
/// - the others: 0 · (2 · B-dense aux variables + inputs) = 0;
/// - then `input · 1 = 0` for each input, as synthesis lays it out.
///
/// The matrices are built directly, row by row: seconds at 2^27 constraints.
pub fn recorded_witness(shape: &Shape, seed: u64) -> Result<Witness, zkpipe_r1cs::RecordingError> {
    use zkpipe_r1cs::{CircuitId, Matrix, Recording, Shape as R1csShape, ONE};
    const TWO: u32 = 2;
    let n = 1usize << shape.log_n;
    let constraints = (n - n / 16).max(n / 2 + 1).min(n);
    let (k, aux) = (shape.inputs, shape.aux);
    let rows = constraints.saturating_sub(k);
    let r2 = (rows / 8).max(1).min(rows);
    let r1 = rows - r2;
    let (a_dense, b_dense) = (shape.a_density(), shape.b_density());
    let col = |j: usize| (k + j) as u32;
    let mut m = [0; 3].map(|_| CsrBuilder::default());
    // (sum of A-dense aux) · 1 = (the same sum).
    for r in 0..r1 {
        let terms = (r..aux)
            .step_by(r1.max(1))
            .filter(|&j| a_dense.is_selected(j));
        for j in terms {
            m[0].push(col(j), ONE);
            m[2].push(col(j), ONE);
        }
        m[1].push(0, ONE);
        m.iter_mut().for_each(CsrBuilder::end_row);
    }
    // 0 · (2 · B-dense aux + inputs) = 0.
    for r in 0..r2 {
        for i in (r..k).step_by(r2).filter(|&i| i > 0 || r1 == 0) {
            m[1].push(i as u32, ONE);
        }
        for j in (r..aux).step_by(r2).filter(|&j| b_dense.is_selected(j)) {
            m[1].push(col(j), TWO);
        }
        m.iter_mut().for_each(CsrBuilder::end_row);
    }
    // input · 1 = 0.
    for i in 0..k {
        m[0].push(i as u32, ONE);
        m.iter_mut().for_each(CsrBuilder::end_row);
    }
    let table = vec![Scalar::ONE, -Scalar::ONE, Scalar::from(2u64)];
    let id = CircuitId(format!("testgen-{}-{k}-{aux}", shape.log_n));
    let r1cs_shape = R1csShape {
        inputs: k,
        aux,
        constraints: rows + k,
    };
    let rec = Recording::from_parts(id, r1cs_shape, table, m.map(CsrBuilder::finish))?;
    let rec = std::sync::Arc::new(rec);
    let mut input = vec![Scalar::ONE];
    input.extend(scalars(k.saturating_sub(1), seed ^ 9));
    let d = rec.densities().clone();
    return Ok(Witness {
        input,
        aux: zkpipe_msm::testgen::mixed(aux, seed ^ 5).into(),
        a_aux_density: d.a_aux,
        b_input_density: d.b_input,
        b_aux_density: d.b_aux,
        recording: Some(rec),
        ..Witness::default()
    });

    /// A matrix's arrays, row by row.
    #[derive(Default)]
    struct CsrBuilder {
        starts: Vec<u32>,
        columns: Vec<u32>,
        coefficients: Vec<u32>,
    }

    impl CsrBuilder {
        fn push(&mut self, column: u32, coefficient: u32) {
            if self.starts.is_empty() {
                self.starts.push(0);
            }
            self.columns.push(column);
            self.coefficients.push(coefficient);
        }

        fn end_row(&mut self) {
            if self.starts.is_empty() {
                self.starts.push(0);
            }
            self.starts.push(self.columns.len() as u32);
        }

        fn finish(self) -> Matrix {
            Matrix::from_arrays(self.starts, self.columns, self.coefficients)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_selects_exactly_as_many_as_asked() {
        for (len, selected) in [
            (0, 0),
            (1, 0),
            (1, 1),
            (7, 3),
            (100, 25),
            (1000, 999),
            (64, 64),
        ] {
            let d = spread(len, selected);
            assert_eq!(
                (d.len(), d.selected()),
                (len, selected),
                "spread({len}, {selected})"
            );
        }
        let quarter = spread(16, 4);
        let picked: Vec<usize> = (0..16).filter(|&i| quarter.is_selected(i)).collect();
        assert_eq!(picked, [3, 7, 11, 15]);
    }
}
