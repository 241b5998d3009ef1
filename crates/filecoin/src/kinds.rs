//! Each proof kind's circuits, built as filecoin-proofs builds them: the public inputs and
//! public parameters from the request, one circuit a partition from its vanilla proof through
//! the compound proof's constructor, and the public inputs its verifier will check.

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{
    as_safe_commitment, parameters, partition_vanilla_proofs, single_partition_vanilla_proofs,
    DefaultPieceDomain, DefaultPieceHasher, FallbackPoStSectorProof, PoRepConfig, PoStConfig,
    PoStType, SectorUpdateConfig, TreeRHasher,
};
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{CacheableParameters, ParameterSetMetadata};
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};
use storage_proofs_update::{EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof};
use zkpipe_pipeline::Engine;
use zkpipe_r1cs::{CircuitId, Recording};

use crate::keys::{KeyKind, KeyName};
use crate::prover::{PartitionCircuit, PartitionWitness, ReferenceOutput};
use crate::request::{PoRepC2, SnapUpdate, WindowPoSt, WinningPoSt};
use crate::schedule::Turn;
use crate::Synthesis;
use crate::{catch, FilecoinError, LoadedKey, ProofOutput, Prover, Request};

/// How far a request goes.
#[derive(Clone, Copy)]
pub(crate) enum Step<'e> {
    /// Its key only (read or generated, then resident).
    Key,
    /// Its proof, on this engine, its partitions scheduled in this turn.
    Prove(&'e Engine, Turn<'e>),
    /// Its proof by bellperson's `create_proof` on the CPU, with these r and s.
    Reference {
        r: blstrs::Scalar,
        s: blstrs::Scalar,
    },
    /// One partition's witness, synthesized on the CPU, with its circuit's files.
    Witness { partition: usize },
}

/// What a request came to.
pub(crate) enum Done {
    Key(LoadedKey),
    Proof(Box<ProofOutput>),
    Reference(ReferenceOutput),
    Witness(Box<PartitionWitness>),
}

/// Runs `request` as far as `step`.
pub(crate) fn run(
    prover: &Prover,
    step: Step<'_>,
    request: &Request,
) -> Result<Done, FilecoinError> {
    match request {
        Request::PoRepC2(r) => {
            let size = u64::from(r.c1.registered_proof.sector_size());
            with_shape!(size, porep_c2, prover, step, r)
        }
        Request::WindowPoSt(r) => {
            let size = u64::from(r.registered_proof.sector_size());
            with_shape!(size, window_post, prover, step, r)
        }
        Request::WinningPoSt(r) => {
            let size = u64::from(r.registered_proof.sector_size());
            with_shape!(size, winning_post, prover, step, r)
        }
        Request::Snap(r) => {
            let size = u64::from(r.registered_proof.sector_size());
            with_shape!(size, snap, prover, step, r)
        }
    }
}

/// bellperson's proof of `request` with `r` and `s`.
pub(crate) fn reference(
    prover: &Prover,
    request: &Request,
    r: blstrs::Scalar,
    s: blstrs::Scalar,
) -> Result<ReferenceOutput, FilecoinError> {
    match run(prover, Step::Reference { r, s }, request)? {
        Done::Reference(out) => Ok(out),
        _ => Err(FilecoinError::Unsupported {
            what: "a reference proof request that stopped early".into(),
            why: "internal",
        }),
    }
}

/// The key of `request`.
pub(crate) fn key(prover: &Prover, request: &Request) -> Result<LoadedKey, FilecoinError> {
    match run(prover, Step::Key, request)? {
        Done::Key(k) => Ok(k),
        Done::Proof(p) => Ok(p.key),
        Done::Reference(_) | Done::Witness(_) => Err(FilecoinError::Unsupported {
            what: "a key request that ran further".into(),
            why: "internal",
        }),
    }
}

/// Partition `partition`'s witness of `request`.
pub(crate) fn witness(
    prover: &Prover,
    request: &Request,
    partition: usize,
) -> Result<PartitionWitness, FilecoinError> {
    match run(prover, Step::Witness { partition }, request)? {
        Done::Witness(w) => Ok(*w),
        _ => Err(FilecoinError::Unsupported {
            what: "a witness request that stopped elsewhere".into(),
            why: "internal",
        }),
    }
}

/// The proof of `request`.
pub(crate) fn prove(
    prover: &Prover,
    engine: &Engine,
    request: &Request,
    turn: Turn<'_>,
) -> Result<ProofOutput, FilecoinError> {
    match run(prover, Step::Prove(engine, turn), request)? {
        Done::Proof(p) => Ok(*p),
        _ => Err(FilecoinError::Unsupported {
            what: "a proof request that stopped elsewhere".into(),
            why: "internal",
        }),
    }
}

/// Runs a step of filecoin-proofs' code: its error keeps anyhow's type, a panic is caught;
/// either names the step.
fn run_step<T>(
    what: &'static str,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> Result<T, FilecoinError> {
    catch(what, None, f)?.map_err(FilecoinError::filecoin(what))
}

/// The key (read through the prover's parameter cache), then for [`Step::Prove`] the proof
/// of `count` partitions, `make(k)` building partition k's circuit.
fn finish<C, F>(
    prover: &Prover,
    step: Step<'_>,
    key: Result<LoadedKey, FilecoinError>,
    count: usize,
    make: F,
) -> Result<Done, FilecoinError>
where
    C: bellperson::Circuit<blstrs::Scalar> + Send,
    F: Fn(usize) -> Result<PartitionCircuit<C>, FilecoinError> + Sync,
{
    let key = key?;
    match step {
        Step::Key => Ok(Done::Key(key)),
        Step::Prove(engine, turn) => prover
            .run_partitions(engine, turn, key, count, make)
            .map(|p| Done::Proof(Box::new(p))),
        Step::Reference { r, s } => bellperson_proofs(&key, count, make, r, s).map(Done::Reference),
        Step::Witness { partition } => prover
            .export_partition(&key, count, partition, make)
            .map(|w| Done::Witness(Box::new(w))),
    }
}

/// bellperson's `create_proof` on each partition's circuit, from the same parameter file
/// (mapped, as filecoin-proofs reads it).
fn bellperson_proofs<C, F>(
    key: &LoadedKey,
    count: usize,
    make: F,
    r: blstrs::Scalar,
    s: blstrs::Scalar,
) -> Result<ReferenceOutput, FilecoinError>
where
    C: bellperson::Circuit<blstrs::Scalar> + Send,
    F: Fn(usize) -> Result<PartitionCircuit<C>, FilecoinError>,
{
    let params = bellperson::groth16::Parameters::<blstrs::Bls12>::build_mapped_parameters(
        key.path.clone(),
        false,
    )
    .map_err(|source| FilecoinError::ParamsIo {
        path: key.path.clone(),
        source,
    })?;
    let mut out = ReferenceOutput::default();
    for k in 0..count {
        let t = std::time::Instant::now();
        let part = catch("building the partition's circuit", Some(k), || make(k))??;
        let proof = catch("bellperson's prover", Some(k), || {
            bellperson::groth16::create_proof::<blstrs::Bls12, _, _>(part.circuit, &params, r, s)
        })?
        .map_err(|source| FilecoinError::Synthesis {
            partition: k,
            source,
        })?;
        proof
            .write(&mut out.bytes)
            .map_err(|source| FilecoinError::ParamsIo {
                path: key.path.clone(),
                source,
            })?;
        out.partition_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}

/// The key of the parameter set `id` for `sector_size`, `blank` the circuit to generate test
/// parameters for.
fn load_key<C: bellperson::Circuit<blstrs::Scalar>>(
    prover: &Prover,
    id: String,
    sector_size: u64,
    blank: impl FnOnce() -> C,
) -> Result<LoadedKey, FilecoinError> {
    catch("reading the parameters", None, || {
        prover.params.key(id, sector_size, blank)
    })?
}

fn porep_c2<Tree: 'static + MerkleTreeTrait>(
    prover: &Prover,
    step: Step<'_>,
    r: &PoRepC2,
) -> Result<Done, FilecoinError> {
    let c1 = &r.c1;
    let registered = c1.registered_proof;
    let config: PoRepConfig = registered.as_v1_config();
    if config.feature_enabled(ApiFeature::NonInteractivePoRep) {
        return Err(FilecoinError::Unsupported {
            what: format!("{registered:?}"),
            why: "non-interactive PoRep's C2 is an aggregate of its proofs; this prover makes interactive PoRep's C2",
        });
    }
    for (what, v) in [
        ("comm_d", &c1.comm_d),
        ("comm_r", &c1.comm_r),
        ("seed", &c1.seed),
    ] {
        if *v == [0; 32] {
            return Err(FilecoinError::Mismatch {
                what,
                expected: "a non-zero value".into(),
                got: "all zeros".into(),
            });
        }
    }
    let vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> = c1
        .vanilla_proofs
        .clone()
        .try_into()
        .map_err(|_| FilecoinError::Mismatch {
            what: "the C1 output's vanilla proofs",
            expected: format!("proofs of {registered:?}'s sector shape"),
            got: "proofs of another sector size".into(),
        })?;
    let partitions = usize::from(config.partitions);
    if vanilla.len() != partitions || vanilla.iter().any(|p| p.is_empty()) {
        return Err(FilecoinError::Mismatch {
            what: "the C1 output's partitions of vanilla proofs",
            expected: format!("{partitions}, none empty"),
            got: format!(
                "{:?} proofs a partition",
                vanilla.iter().map(Vec::len).collect::<Vec<_>>()
            ),
        });
    }
    let replica_id: <Tree::Hasher as Hasher>::Domain =
        <Tree::Hasher as Hasher>::Domain::try_from_bytes(&c1.replica_id.into_bytes())
            .map_err(FilecoinError::filecoin("the C1 output's replica id"))?;
    let expected_replica = stacked::generate_replica_id::<Tree::Hasher, _>(
        &r.prover_id,
        r.sector_id,
        &c1.ticket,
        c1.comm_d,
        &config.porep_id,
    );
    if expected_replica != replica_id {
        return Err(FilecoinError::Mismatch {
            what: "the C1 output's replica id (from the prover id, sector id, ticket, comm_d and proof type)",
            expected: format!("{expected_replica:?} for sector {} of this prover", r.sector_id),
            got: format!("{replica_id:?}: the C1 output is of another sector or prover"),
        });
    }
    let pub_in = stacked::PublicInputs::<<Tree::Hasher as Hasher>::Domain, DefaultPieceDomain> {
        replica_id,
        tau: Some(stacked::Tau {
            comm_d: DefaultPieceDomain::try_from_bytes(&c1.comm_d)
                .map_err(FilecoinError::filecoin("comm_d"))?,
            comm_r: as_safe_commitment(&c1.comm_r, "comm_r")
                .map_err(FilecoinError::filecoin("comm_r"))?,
        }),
        k: None,
        seed: Some(c1.seed),
    };
    type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
    let pub_params = porep_public_params::<Tree>(&config, partitions)?;
    let vp = &pub_params.vanilla_params;
    let key = porep_key::<Tree, _>(Load(prover), vp);
    finish(prover, step, key, partitions, |k| {
        let circuit = <Compound<Tree> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::circuit(&pub_in, (), &vanilla[k], vp, Some(k))
        .map_err(FilecoinError::filecoin("building the PoRep circuit"))?;
        let inputs = <Compound<Tree> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::generate_public_inputs(&pub_in, vp, Some(k))
        .map_err(FilecoinError::filecoin("the PoRep public inputs"))?;
        // The recorded path synthesizes the partition's challenges on all cores: a circuit a
        // challenge, each with the prologue (replica id, commitments) that they share.
        let challenges = &vanilla[k];
        let parts = match (prover.options.synthesis, challenges.len()) {
            (Synthesis::Recorded, 2..) => (0..challenges.len())
                .map(|i| {
                    <Compound<Tree> as CompoundProof<
                        StackedDrg<'_, Tree, DefaultPieceHasher>,
                        _,
                    >>::circuit(&pub_in, (), &vec![challenges[i].clone()], vp, Some(k))
                    .map_err(FilecoinError::filecoin("building a PoRep challenge's circuit"))
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        Ok(PartitionCircuit {
            circuit,
            expected_inputs: Some(inputs),
            parts,
        })
    })
}

/// PoSt vanilla proofs from their bincode bytes.
fn post_vanilla<Tree: 'static + MerkleTreeTrait>(
    bytes: &[Vec<u8>],
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, FilecoinError> {
    if bytes.is_empty() {
        return Err(FilecoinError::Mismatch {
            what: "the vanilla proofs",
            expected: "at least one".into(),
            got: "none".into(),
        });
    }
    bytes
        .iter()
        .enumerate()
        .map(|(index, b)| {
            bincode::deserialize(b).map_err(|source| FilecoinError::Vanilla {
                index,
                what: "FallbackPoStSectorProof of this sector size",
                source,
            })
        })
        .collect()
}

/// WindowPoSt's vanilla proofs in the order its verifier takes the sectors (ascending sector
/// id: `verify_window_post` reads them from a map), whatever order the request gave: a proof
/// made in another order is refused on chain. The same sector twice is an error.
fn in_verifier_order<Tree: 'static + MerkleTreeTrait>(
    mut vanilla: Vec<FallbackPoStSectorProof<Tree>>,
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, FilecoinError> {
    vanilla.sort_by_key(|p| u64::from(p.sector_id));
    if let Some(twice) = vanilla
        .windows(2)
        .find(|w| w[0].sector_id == w[1].sector_id)
    {
        return Err(FilecoinError::Mismatch {
            what: "WindowPoSt's vanilla proofs",
            expected: "one a sector".into(),
            got: format!("two of sector {}", u64::from(twice[0].sector_id)),
        });
    }
    Ok(vanilla)
}

/// The PoSt's public inputs: its randomness, the prover and each proven sector.
fn post_inputs<Tree: 'static + MerkleTreeTrait>(
    randomness: &[u8; 32],
    prover_id: &[u8; 32],
    vanilla: &[FallbackPoStSectorProof<Tree>],
    k: Option<usize>,
) -> Result<fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>, FilecoinError> {
    Ok(fallback::PublicInputs {
        randomness: as_safe_commitment(randomness, "randomness")
            .map_err(FilecoinError::filecoin("randomness"))?,
        prover_id: as_safe_commitment(prover_id, "prover_id")
            .map_err(FilecoinError::filecoin("prover id"))?,
        sectors: vanilla
            .iter()
            .map(|p| PublicSector {
                id: p.sector_id,
                comm_r: p.comm_r,
            })
            .collect(),
        k,
    })
}

/// The proof of `vanilla` (one set a partition) under FallbackPoSt's compound proof.
fn post_partitions<'a, Tree: 'static + MerkleTreeTrait>(
    prover: &Prover,
    step: Step<'_>,
    pub_params: &compound_proof::PublicParams<'a, FallbackPoSt<'a, Tree>>,
    pub_in: &fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    vanilla: &[fallback::Proof<<Tree as MerkleTreeTrait>::Proof>],
    verifier_in: Option<&fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>>,
) -> Result<Done, FilecoinError> {
    let vp = &pub_params.vanilla_params;
    let key = post_key::<Tree, _>(Load(prover), vp);
    finish(prover, step, key, vanilla.len(), |k| {
        let circuit = FallbackPoStCompound::<Tree>::circuit(
            pub_in,
            Default::default(),
            &vanilla[k],
            vp,
            Some(k),
        )
        .map_err(FilecoinError::filecoin("building the PoSt circuit"))?;
        let expected_inputs = match verifier_in {
            Some(v) => Some(
                FallbackPoStCompound::<Tree>::generate_public_inputs(v, vp, Some(k))
                    .map_err(FilecoinError::filecoin("the PoSt public inputs"))?,
            ),
            None => None,
        };
        Ok(PartitionCircuit {
            circuit,
            expected_inputs,
            parts: Vec::new(),
        })
    })
}

fn post_config(
    registered: filecoin_proofs_api::RegisteredPoStProof,
    typ: PoStType,
) -> Result<PoStConfig, FilecoinError> {
    let config = registered.as_v1_config();
    if config.typ != typ {
        return Err(FilecoinError::Mismatch {
            what: "the registered PoSt proof",
            expected: format!("a {typ:?} PoSt proof"),
            got: format!("{registered:?}"),
        });
    }
    Ok(config)
}

fn window_post<Tree: 'static + MerkleTreeTrait>(
    prover: &Prover,
    step: Step<'_>,
    r: &WindowPoSt,
) -> Result<Done, FilecoinError> {
    let config = post_config(r.registered_proof, PoStType::Window)?;
    let vanilla = in_verifier_order(post_vanilla::<Tree>(&r.vanilla_proofs)?)?;
    let sectors_a_partition = config.sector_count;
    let partitions = vanilla.len().div_ceil(sectors_a_partition);
    let setup = compound_proof::SetupParams {
        vanilla_params: parameters::window_post_setup_params(&config),
        partitions: (partitions > 1).then_some(partitions),
        priority: config.priority,
    };
    let pub_params = FallbackPoStCompound::<Tree>::setup(&setup)
        .map_err(FilecoinError::filecoin("WindowPoSt public parameters"))?;
    let pub_in = post_inputs(&r.randomness, &r.prover_id, &vanilla, r.partition)?;
    let vp = &pub_params.vanilla_params;
    let (partitioned, verifier_in) = match r.partition {
        None => (
            run_step("partitioning the vanilla proofs", || {
                partition_vanilla_proofs(&config, vp, &pub_in, partitions, &vanilla)
            })?,
            Some(&pub_in),
        ),
        // One partition's proof: its public inputs depend on where the partition stands among
        // all sectors, which the request does not hold; the engine's check still verifies it.
        Some(_) => (
            vec![run_step("the partition's vanilla proofs", || {
                single_partition_vanilla_proofs(&config, vp, &pub_in, &vanilla)
            })?],
            None,
        ),
    };
    post_partitions(
        prover,
        step,
        &pub_params,
        &pub_in,
        &partitioned,
        verifier_in,
    )
}

fn winning_post<Tree: 'static + MerkleTreeTrait>(
    prover: &Prover,
    step: Step<'_>,
    r: &WinningPoSt,
) -> Result<Done, FilecoinError> {
    let config = post_config(r.registered_proof, PoStType::Winning)?;
    let vanilla = post_vanilla::<Tree>(&r.vanilla_proofs)?;
    if vanilla.len() != config.sector_count {
        return Err(FilecoinError::Mismatch {
            what: "WinningPoSt's vanilla proofs",
            expected: format!("{} (one a challenged sector)", config.sector_count),
            got: vanilla.len().to_string(),
        });
    }
    let setup = compound_proof::SetupParams {
        vanilla_params: parameters::winning_post_setup_params(&config)
            .map_err(FilecoinError::filecoin("WinningPoSt setup parameters"))?,
        partitions: None,
        priority: config.priority,
    };
    let pub_params = FallbackPoStCompound::<Tree>::setup(&setup)
        .map_err(FilecoinError::filecoin("WinningPoSt public parameters"))?;
    let pub_in = post_inputs(&r.randomness, &r.prover_id, &vanilla, None)?;
    let partitioned = run_step("partitioning the vanilla proofs", || {
        partition_vanilla_proofs(&config, &pub_params.vanilla_params, &pub_in, 1, &vanilla)
    })?;
    // The verifier's public inputs name the challenged sectors once for each of the circuit's
    // sector slots.
    let slots = pub_params.vanilla_params.sector_count;
    let verifier_in = fallback::PublicInputs {
        sectors: (0..slots)
            .flat_map(|_| pub_in.sectors.iter().cloned())
            .collect(),
        ..pub_in.clone()
    };
    post_partitions(
        prover,
        step,
        &pub_params,
        &pub_in,
        &partitioned,
        Some(&verifier_in),
    )
}

fn snap<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    prover: &Prover,
    step: Step<'_>,
    r: &SnapUpdate,
) -> Result<Done, FilecoinError> {
    let porep_config = r.registered_proof.as_v1_config();
    let config = SectorUpdateConfig::from_porep_config(&porep_config);
    let partitions = usize::from(config.update_partitions);
    let vanilla = r
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(index, b)| {
            bincode::deserialize::<PartitionProof<Tree>>(b).map_err(|source| {
                FilecoinError::Vanilla {
                    index,
                    what: "SnapDeals PartitionProof of this sector size",
                    source,
                }
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if vanilla.len() != partitions {
        return Err(FilecoinError::Mismatch {
            what: "SnapDeals' partition proofs",
            expected: partitions.to_string(),
            got: vanilla.len().to_string(),
        });
    }
    let domain = |what, v: &[u8; 32]| {
        <TreeRHasher as Hasher>::Domain::try_from_bytes(v).map_err(FilecoinError::filecoin(what))
    };
    let pub_in = storage_proofs_update::PublicInputs {
        k: partitions,
        comm_r_old: domain("comm_r_old", &r.comm_r_old)?,
        comm_d_new: DefaultPieceDomain::try_from_bytes(&r.comm_d_new)
            .map_err(FilecoinError::filecoin("comm_d_new"))?,
        comm_r_new: domain("comm_r_new", &r.comm_r_new)?,
        h: config.h,
    };
    let pub_params = snap_public_params::<Tree>(&config)?;
    let vp = &pub_params.vanilla_params;
    let key = snap_key::<Tree, _>(Load(prover), vp);
    finish(prover, step, key, partitions, |k| {
        let circuit =
            EmptySectorUpdateCompound::<Tree>::circuit(&pub_in, (), &vanilla[k], vp, Some(k))
                .map_err(FilecoinError::filecoin("building the SnapDeals circuit"))?;
        let inputs =
            EmptySectorUpdateCompound::<Tree>::generate_public_inputs(&pub_in, vp, Some(k))
                .map_err(FilecoinError::filecoin("the SnapDeals public inputs"))?;
        Ok(PartitionCircuit {
            circuit,
            expected_inputs: Some(inputs),
            parts: Vec::new(),
        })
    })
}

/// What is done with a parameter set once it is named: its id and the blank circuit its
/// parameters are generated from (test sizes).
trait UseKey {
    type Out;
    fn key<C: bellperson::Circuit<blstrs::Scalar>>(
        self,
        id: String,
        sector_size: u64,
        blank: impl FnOnce() -> C,
    ) -> Self::Out;
}

/// Reads (or generates) the key through the prover's cache.
struct Load<'p>(&'p Prover);

impl UseKey for Load<'_> {
    type Out = Result<LoadedKey, FilecoinError>;
    fn key<C: bellperson::Circuit<blstrs::Scalar>>(
        self,
        id: String,
        sector_size: u64,
        blank: impl FnOnce() -> C,
    ) -> Self::Out {
        load_key(self.0, id, sector_size, blank)
    }
}

/// The parameter set's id alone.
struct Id;

impl UseKey for Id {
    type Out = String;
    fn key<C: bellperson::Circuit<blstrs::Scalar>>(
        self,
        id: String,
        _: u64,
        _: impl FnOnce() -> C,
    ) -> Self::Out {
        id
    }
}

fn porep_key<Tree: 'static + MerkleTreeTrait, U: UseKey>(
    u: U,
    vp: &stacked::PublicParams<Tree>,
) -> U::Out {
    type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
    u.key(
        <Compound<Tree> as CacheableParameters<StackedCircuit<Tree, DefaultPieceHasher>, _>>::cache_identifier(vp),
        vp.sector_size(),
        || <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::blank_circuit(vp),
    )
}

fn post_key<Tree: 'static + MerkleTreeTrait, U: UseKey>(
    u: U,
    vp: &fallback::PublicParams,
) -> U::Out {
    u.key(
        <FallbackPoStCompound<Tree> as CacheableParameters<FallbackPoStCircuit<Tree>, _>>::cache_identifier(vp),
        vp.sector_size(),
        || FallbackPoStCompound::<Tree>::blank_circuit(vp),
    )
}

fn snap_key<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, U: UseKey>(
    u: U,
    vp: &storage_proofs_update::PublicParams,
) -> U::Out {
    u.key(
        <EmptySectorUpdateCompound<Tree> as CacheableParameters<
            EmptySectorUpdateCircuit<Tree>,
            _,
        >>::cache_identifier(vp),
        vp.sector_size(),
        || EmptySectorUpdateCompound::<Tree>::blank_circuit(vp),
    )
}

fn snap_public_params<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    config: &SectorUpdateConfig,
) -> Result<
    compound_proof::PublicParams<'static, storage_proofs_update::EmptySectorUpdate<Tree>>,
    FilecoinError,
> {
    let setup = compound_proof::SetupParams {
        vanilla_params: storage_proofs_update::SetupParams {
            sector_bytes: u64::from(config.sector_size),
        },
        partitions: Some(usize::from(config.update_partitions)),
        priority: false,
    };
    EmptySectorUpdateCompound::<Tree>::setup(&setup)
        .map_err(FilecoinError::filecoin("SnapDeals public parameters"))
}

fn post_public_params<Tree: 'static + MerkleTreeTrait>(
    registered: filecoin_proofs_api::RegisteredPoStProof,
    typ: PoStType,
) -> Result<compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>, FilecoinError> {
    let winning = typ == PoStType::Winning;
    let config = post_config(registered, typ)?;
    let vanilla_params = match winning {
        false => parameters::window_post_setup_params(&config),
        true => parameters::winning_post_setup_params(&config)
            .map_err(FilecoinError::filecoin("WinningPoSt setup parameters"))?,
    };
    let setup = compound_proof::SetupParams {
        vanilla_params,
        partitions: None,
        priority: config.priority,
    };
    FallbackPoStCompound::<Tree>::setup(&setup)
        .map_err(FilecoinError::filecoin("PoSt public parameters"))
}

/// Does `u` with the key `name` names (the current registered proof of its kind and size).
fn named_key<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, U: UseKey>(
    u: U,
    name: KeyName,
) -> Result<U::Out, FilecoinError> {
    let registered = crate::gen::Registered::for_size(name.sector_size)?;
    Ok(match name.kind {
        KeyKind::PorepC2 => {
            let config: PoRepConfig = registered.seal.as_v1_config();
            let pp = porep_public_params::<Tree>(&config, usize::from(config.partitions))?;
            porep_key::<Tree, U>(u, &pp.vanilla_params)
        }
        KeyKind::WindowPost => {
            let pp = post_public_params::<Tree>(registered.window, PoStType::Window)?;
            post_key::<Tree, U>(u, &pp.vanilla_params)
        }
        KeyKind::WinningPost => {
            let pp = post_public_params::<Tree>(registered.winning, PoStType::Winning)?;
            post_key::<Tree, U>(u, &pp.vanilla_params)
        }
        KeyKind::Snap => {
            let config = SectorUpdateConfig::from_porep_config(&registered.seal.as_v1_config());
            let pp = snap_public_params::<Tree>(&config)?;
            snap_key::<Tree, U>(u, &pp.vanilla_params)
        }
    })
}

fn named_key_loaded<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    prover: &Prover,
    name: KeyName,
) -> Result<LoadedKey, FilecoinError> {
    named_key::<Tree, _>(Load(prover), name)?
}

fn named_key_id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    name: KeyName,
) -> Result<String, FilecoinError> {
    named_key::<Tree, _>(Id, name)
}

/// The key `name` names, read (or for test sizes generated) and then resident.
pub(crate) fn load_named(prover: &Prover, name: KeyName) -> Result<LoadedKey, FilecoinError> {
    with_shape!(name.sector_size, named_key_loaded, prover, name)
}

/// The parameter set id of the key `name` names (nothing read).
pub(crate) fn named_id(name: KeyName) -> Result<String, FilecoinError> {
    with_shape!(name.sector_size, named_key_id, name)
}

/// PoRep's public parameters for `config` in `partitions` partitions, as filecoin-proofs sets
/// them up.
pub(crate) fn porep_public_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    partitions: usize,
) -> Result<
    compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>,
    FilecoinError,
> {
    let setup = compound_proof::SetupParams {
        vanilla_params: parameters::setup_params(config)
            .map_err(FilecoinError::filecoin("PoRep setup parameters"))?,
        partitions: Some(partitions),
        priority: false,
    };
    <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::setup(&setup)
    .map_err(FilecoinError::filecoin("PoRep public parameters"))
}

/// PoRep C2's circuit for `sector_size`-byte sectors, recorded from its blank form (no
/// vanilla proof needed: every partition of that size has these matrices), named as
/// [`crate::ParamsCache::recording`] names it: for benchmarks and for recording ahead of the
/// first proof.
pub fn record_porep_blank(sector_size: u64) -> Result<Recording, FilecoinError> {
    with_shape!(sector_size, porep_blank, sector_size)
}

/// The id [`record_porep_blank`] gives its recording for `sector_size`-byte sectors: a
/// recording saved earlier is taken for that size's circuit only when it carries this id.
pub fn porep_blank_id(sector_size: u64) -> Result<CircuitId, FilecoinError> {
    with_shape!(sector_size, porep_blank_id_of, sector_size)
}

fn porep_blank_id_of<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
) -> Result<CircuitId, FilecoinError> {
    porep_blank_named::<Tree>(sector_size).map(|blank| blank.id)
}

/// PoRep C2's blank circuit for one sector shape, with the id its recording carries.
struct PoRepBlank<Tree: 'static + MerkleTreeTrait> {
    circuit: StackedCircuit<Tree, DefaultPieceHasher>,
    id: CircuitId,
    /// The name the recording's file takes in the parameter cache.
    file: std::path::PathBuf,
}

fn porep_blank_named<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
) -> Result<PoRepBlank<Tree>, FilecoinError> {
    let config: PoRepConfig = crate::gen::Registered::for_size(sector_size)?
        .seal
        .as_v1_config();
    type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
    let pub_params = porep_public_params::<Tree>(&config, usize::from(config.partitions))?;
    let vp = &pub_params.vanilla_params;
    let stem = format!(
        "v{}-{}",
        storage_proofs_core::parameter_cache::VERSION,
        <Compound<Tree> as CacheableParameters<StackedCircuit<Tree, DefaultPieceHasher>, _>>::cache_identifier(vp)
    );
    let circuit =
        <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::blank_circuit(vp);
    Ok(PoRepBlank {
        circuit,
        id: CircuitId(format!("{stem}@{}", crate::CIRCUIT_SOURCE)),
        file: std::path::PathBuf::from(format!("{stem}.zkpipe-r1cs")),
    })
}

fn porep_blank<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
) -> Result<Recording, FilecoinError> {
    let blank = porep_blank_named::<Tree>(sector_size)?;
    zkpipe_bellperson::record(blank.circuit, blank.id).map_err(|source| FilecoinError::Recording {
        path: blank.file,
        source: Box::new(source),
    })
}
