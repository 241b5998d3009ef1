//! Proving and verifying keys, checked where they enter the engine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use blstrs::{G1Affine, G2Affine, G2Prepared};
use group::prime::PrimeCurveAffine;
use zkpipe_cuda::Context;
use zkpipe_msm::{Bases, MsmError, Point};

use crate::ProveError;

/// The verifying key (bellperson's layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyingKey {
    pub alpha_g1: G1Affine,
    pub beta_g1: G1Affine,
    pub beta_g2: G2Affine,
    pub gamma_g2: G2Affine,
    pub delta_g1: G1Affine,
    pub delta_g2: G2Affine,
    /// One point per public input, the constant one first.
    pub ic: Vec<G1Affine>,
}

/// The points of a proving key, before checking.
#[derive(Debug, Clone)]
pub struct KeyParts {
    pub vk: VerifyingKey,
    /// n - 1 points, n the domain size.
    pub h: Vec<G1Affine>,
    /// One per aux variable.
    pub l: Vec<G1Affine>,
    /// One per input, then one per aux variable selected by the A density.
    pub a: Vec<G1Affine>,
    /// One per input and aux variable selected by the B densities.
    pub b_g1: Vec<G1Affine>,
    /// As `b_g1`, in G2.
    pub b_g2: Vec<G2Affine>,
}

/// A Groth16 proving key, shared by jobs through `Arc`.
#[derive(Debug)]
pub struct ProvingKey {
    id: u64,
    pub(crate) vk: VerifyingKey,
    pub(crate) h: Bases<G1Affine>,
    pub(crate) l: Bases<G1Affine>,
    pub(crate) a: Bases<G1Affine>,
    pub(crate) b_g1: Bases<G1Affine>,
    pub(crate) b_g2: Bases<G2Affine>,
    /// The verifying key prepared for the check of every proof, made at its first use.
    prepared: OnceLock<PreparedVerifyingKey>,
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

fn check_one<P: Point>(what: &'static str, p: &P) -> Result<(), ProveError> {
    if !p.on_curve() {
        return Err(ProveError::Key {
            query: what,
            source: MsmError::NotOnCurve { index: 0 },
        });
    }
    if !p.in_subgroup() {
        return Err(ProveError::Key {
            query: what,
            source: MsmError::NotInSubgroup { index: 0 },
        });
    }
    Ok(())
}

/// Delta and gamma are not the identity: either would let anyone forge proofs.
fn check_not_identity(vk: &VerifyingKey) -> Result<(), ProveError> {
    if bool::from(vk.delta_g1.is_identity()) || bool::from(vk.delta_g2.is_identity()) {
        return Err(ProveError::DeltaIdentity);
    }
    if bool::from(vk.gamma_g2.is_identity()) {
        return Err(ProveError::GammaIdentity);
    }
    Ok(())
}

/// Every point of a verifying key on the curve and in the subgroup, and delta and gamma not
/// the identity.
pub(crate) fn check_verifying_key(vk: &VerifyingKey) -> Result<(), ProveError> {
    check_one("alpha_g1", &vk.alpha_g1)?;
    check_one("beta_g1", &vk.beta_g1)?;
    check_one("beta_g2", &vk.beta_g2)?;
    check_one("gamma_g2", &vk.gamma_g2)?;
    check_one("delta_g1", &vk.delta_g1)?;
    check_one("delta_g2", &vk.delta_g2)?;
    for (index, p) in vk.ic.iter().enumerate() {
        check_one("ic", p).map_err(|e| match e {
            ProveError::Key { query, source } => ProveError::Key {
                query,
                source: match source {
                    MsmError::NotOnCurve { .. } => MsmError::NotOnCurve { index },
                    MsmError::NotInSubgroup { .. } => MsmError::NotInSubgroup { index },
                    other => other,
                },
            },
            other => other,
        })?;
    }
    check_not_identity(vk)
}

fn checked<P: Point>(what: &'static str, v: Vec<P>) -> Result<Bases<P>, ProveError> {
    Bases::new(v).map_err(|source| ProveError::Key {
        query: what,
        source,
    })
}

impl ProvingKey {
    /// Checks every point (on the curve and in the subgroup) and that delta is not the
    /// identity (which would let anyone forge proofs).
    pub fn new(parts: KeyParts) -> Result<Self, ProveError> {
        let vk = parts.vk;
        check_verifying_key(&vk)?;
        let key = Self {
            id: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            h: checked("h", parts.h)?,
            l: checked("l", parts.l)?,
            a: checked("a", parts.a)?,
            b_g1: checked("b_g1", parts.b_g1)?,
            b_g2: checked("b_g2", parts.b_g2)?,
            vk,
            prepared: OnceLock::new(),
        };
        key.check_shape()?;
        Ok(key)
    }

    /// Keeps the points without checking them (a key checked before, from a trusted file).
    /// Shapes, delta and gamma are still checked: they cost nothing.
    pub fn new_unchecked(parts: KeyParts) -> Result<Self, ProveError> {
        let key = Self {
            id: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            h: Bases::new_unchecked(parts.h),
            l: Bases::new_unchecked(parts.l),
            a: Bases::new_unchecked(parts.a),
            b_g1: Bases::new_unchecked(parts.b_g1),
            b_g2: Bases::new_unchecked(parts.b_g2),
            vk: parts.vk,
            prepared: OnceLock::new(),
        };
        key.check_shape()?;
        Ok(key)
    }

    fn check_shape(&self) -> Result<(), ProveError> {
        check_not_identity(&self.vk)?;
        let n = self.h.len() + 1;
        if !n.is_power_of_two() {
            return Err(ProveError::Shape {
                what: "h query (domain size - 1)",
                expected: n.next_power_of_two() - 1,
                got: self.h.len(),
            });
        }
        if self.b_g1.len() != self.b_g2.len() {
            return Err(ProveError::Shape {
                what: "b_g2 query (as long as b_g1)",
                expected: self.b_g1.len(),
                got: self.b_g2.len(),
            });
        }
        if self.a.len() < self.vk.ic.len() {
            return Err(ProveError::Shape {
                what: "a query (at least one point per input)",
                expected: self.vk.ic.len(),
                got: self.a.len(),
            });
        }
        Ok(())
    }

    /// A number unique to this key in this process (caches of device copies use it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The verifying key prepared for pairings (made once, at the first proof checked). Its
    /// points were checked with the key's ([`ProvingKey::new`]) or are trusted with it.
    pub fn prepared_vk(&self) -> &PreparedVerifyingKey {
        self.prepared
            .get_or_init(|| PreparedVerifyingKey::new_unchecked(&self.vk))
    }

    /// The verifying key.
    pub fn vk(&self) -> &VerifyingKey {
        &self.vk
    }

    /// The NTT domain size n (a power of two).
    pub fn domain_size(&self) -> usize {
        self.h.len() + 1
    }

    /// Public inputs, the constant one included.
    pub fn num_inputs(&self) -> usize {
        self.vk.ic.len()
    }

    /// Aux (private) variables.
    pub fn num_aux(&self) -> usize {
        self.l.len()
    }

    /// The bases of a G1 witness query.
    pub(crate) fn g1_query(&self, q: G1Query) -> &Bases<G1Affine> {
        match q {
            G1Query::L => &self.l,
            G1Query::A => &self.a,
            G1Query::B1 => &self.b_g1,
        }
    }

    /// Point counts of the queries: h, l, a, b_g1, b_g2.
    pub fn query_lens(&self) -> [usize; 5] {
        [
            self.h.len(),
            self.l.len(),
            self.a.len(),
            self.b_g1.len(),
            self.b_g2.len(),
        ]
    }

    /// Page-locks the key's query points in host memory, in place (once per key; later calls
    /// return 0). Every upload of them is then a DMA straight from this memory: a resident
    /// key's first upload, and each MSM's bases when the key is not resident. Costs about
    /// 60 ms per GiB; the memory stays locked until the key is dropped. Returns the bytes
    /// this call locked.
    pub fn pin(&self, ctx: &Arc<Context>) -> Result<usize, ProveError> {
        let err = |e: zkpipe_pinned::Error| ProveError::device(ctx.ordinal(), e);
        let mut bytes = 0;
        let g1 = std::mem::size_of::<G1Affine>();
        for q in [&self.h, &self.l, &self.a, &self.b_g1] {
            if q.pin(ctx).map_err(err)? {
                bytes += q.len() * g1;
            }
        }
        if self.b_g2.pin(ctx).map_err(err)? {
            bytes += self.b_g2.len() * std::mem::size_of::<G2Affine>();
        }
        Ok(bytes)
    }

    /// True once every query of the key is page-locked ([`ProvingKey::pin`]).
    pub fn is_pinned(&self) -> bool {
        [&self.h, &self.l, &self.a, &self.b_g1]
            .iter()
            .all(|q| q.is_empty() || q.is_pinned())
            && (self.b_g2.is_empty() || self.b_g2.is_pinned())
    }

    /// Host bytes of the key's points.
    pub fn bytes(&self) -> usize {
        let g1 = std::mem::size_of::<G1Affine>();
        let g2 = std::mem::size_of::<G2Affine>();
        (self.h.len() + self.l.len() + self.a.len() + self.b_g1.len()) * g1 + self.b_g2.len() * g2
    }
}

/// A verifying key with its G2 points prepared for the Miller loop.
#[derive(Debug)]
pub struct PreparedVerifyingKey {
    pub(crate) vk: VerifyingKey,
    pub(crate) neg_gamma: G2Prepared,
    pub(crate) neg_delta: G2Prepared,
    pub(crate) alpha_beta: blstrs::Gt,
}

impl PreparedVerifyingKey {
    /// Prepares `vk` after checking it: every point on the curve and in the subgroup, and
    /// delta and gamma not the identity (either would let anyone forge proofs).
    pub fn new(vk: &VerifyingKey) -> Result<Self, ProveError> {
        check_verifying_key(vk)?;
        Ok(Self::new_unchecked(vk))
    }

    /// Prepares `vk` as it is (a key checked before).
    pub fn new_unchecked(vk: &VerifyingKey) -> Self {
        Self {
            neg_gamma: G2Prepared::from(-vk.gamma_g2),
            neg_delta: G2Prepared::from(-vk.delta_g2),
            alpha_beta: blstrs::pairing(&vk.alpha_g1, &vk.beta_g2),
            vk: vk.clone(),
        }
    }
}

/// The queries whose scalars are the assignment z (the H query's are h's coefficients).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
pub enum WitnessQuery {
    /// aux · l (G1).
    #[strum(serialize = "l")]
    L,
    /// z · a over A's density (G1).
    #[strum(serialize = "a")]
    A,
    /// z · b_g1 over B's density (G1).
    #[strum(serialize = "b_g1")]
    B1,
    /// z · b_g2 over B's density (G2).
    #[strum(serialize = "b_g2")]
    B2,
}

/// The witness queries in G1, in the order the prover sums them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum G1Query {
    L,
    A,
    B1,
}

impl G1Query {
    /// All three.
    pub const ALL: [G1Query; 3] = [G1Query::L, G1Query::A, G1Query::B1];

    /// The query among all witness queries.
    pub fn query(self) -> WitnessQuery {
        match self {
            G1Query::L => WitnessQuery::L,
            G1Query::A => WitnessQuery::A,
            G1Query::B1 => WitnessQuery::B1,
        }
    }
}

impl WitnessQuery {
    /// The query's name in errors and logs.
    pub fn name(self) -> &'static str {
        self.into()
    }
}
