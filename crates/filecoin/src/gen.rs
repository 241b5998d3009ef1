//! Real inputs for every proof kind, made with filecoin-proofs on the CPU: a sector sealed from
//! random data (or zeros, the sector key of an update), then its C1 output, WindowPoSt and
//! WinningPoSt vanilla proofs, and a SnapDeals update's partition proofs. For trying each kind
//! without a Filecoin node, and for the tests.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Cursor, Seek};
use std::path::{Path, PathBuf};

use filecoin_proofs_api::seal::{self, SealPreCommitPhase2Output};
use filecoin_proofs_api::{post, update};
use filecoin_proofs_api::{
    PaddedBytesAmount, PieceInfo, PrivateReplicaInfo, PublicReplicaInfo, RegisteredPoStProof,
    RegisteredSealProof, RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};
use rand::RngCore;

use crate::request::{PoRepC2, SnapUpdate, WindowPoSt, WinningPoSt};
use crate::FilecoinError;

/// What a sealed sector holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectorData {
    /// Random bytes (a sector with a deal).
    Random,
    /// Zeros (a committed-capacity sector: the sector key of a SnapDeals update).
    Zeros,
}

/// The registered proofs of one sector size.
#[derive(Debug, Clone, Copy)]
pub struct Registered {
    pub seal: RegisteredSealProof,
    pub window: RegisteredPoStProof,
    pub winning: RegisteredPoStProof,
    pub update: RegisteredUpdateProof,
}

impl Registered {
    /// The current registered proofs of `sector_size` bytes (2 KiB, 8 MiB, 512 MiB, 32 GiB or
    /// 64 GiB).
    pub fn for_size(sector_size: u64) -> Result<Self, FilecoinError> {
        use RegisteredPoStProof as P;
        use RegisteredSealProof as S;
        use RegisteredUpdateProof as U;
        let r = |seal, window, winning, update| Registered {
            seal,
            window,
            winning,
            update,
        };
        Ok(match sector_size {
            0x800 => r(
                S::StackedDrg2KiBV1_1,
                P::StackedDrgWindow2KiBV1_2,
                P::StackedDrgWinning2KiBV1,
                U::StackedDrg2KiBV1,
            ),
            0x80_0000 => r(
                S::StackedDrg8MiBV1_1,
                P::StackedDrgWindow8MiBV1_2,
                P::StackedDrgWinning8MiBV1,
                U::StackedDrg8MiBV1,
            ),
            0x2000_0000 => r(
                S::StackedDrg512MiBV1_1,
                P::StackedDrgWindow512MiBV1_2,
                P::StackedDrgWinning512MiBV1,
                U::StackedDrg512MiBV1,
            ),
            0x8_0000_0000 => r(
                S::StackedDrg32GiBV1_1,
                P::StackedDrgWindow32GiBV1_2,
                P::StackedDrgWinning32GiBV1,
                U::StackedDrg32GiBV1,
            ),
            0x10_0000_0000 => r(
                S::StackedDrg64GiBV1_1,
                P::StackedDrgWindow64GiBV1_2,
                P::StackedDrgWinning64GiBV1,
                U::StackedDrg64GiBV1,
            ),
            other => {
                return Err(FilecoinError::Unsupported {
                    what: format!("sector size {other}"),
                    why: "filecoin-proofs seals 2 KiB, 8 MiB, 512 MiB, 32 GiB and 64 GiB sectors",
                })
            }
        })
    }
}

/// A sector sealed on disk, with what its proofs need.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub registered: Registered,
    pub sector_size: u64,
    pub cache_dir: PathBuf,
    pub replica: PathBuf,
    pub prover_id: [u8; 32],
    pub sector_id: u64,
    pub ticket: [u8; 32],
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub pieces: Vec<PieceInfo>,
    pre_commit: SealPreCommitPhase2Output,
}

/// 32 random bytes that are a field element (the top byte zero).
fn random_fr_bytes() -> [u8; 32] {
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    b[31] = 0;
    b
}

fn step(what: &'static str) -> impl FnOnce(anyhow::Error) -> FilecoinError {
    FilecoinError::filecoin(what)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FilecoinError + '_ {
    move |source| FilecoinError::Read {
        path: path.to_path_buf(),
        source,
    }
}

/// One piece filling a sector of `sector_size` bytes, written (padded) into `staged`.
fn stage_piece(
    registered: RegisteredSealProof,
    sector_size: u64,
    data: SectorData,
    staged: &Path,
) -> Result<PieceInfo, FilecoinError> {
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(sector_size));
    let mut bytes = vec![0u8; u64::from(unpadded) as usize];
    if data == SectorData::Random {
        rand::thread_rng().fill_bytes(&mut bytes);
    }
    let mut target = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(staged)
        .map_err(io(staged))?;
    let (piece, _) = seal::add_piece(registered, Cursor::new(bytes), &mut target, unpadded, &[])
        .map_err(step("staging the piece"))?;
    target.rewind().map_err(io(staged))?;
    Ok(piece)
}

/// Seals a sector of `sector_size` bytes holding `data` under `dir` (pre-commit phases 1 and
/// 2), for a random prover id, sector number and ticket.
pub fn seal_sector(
    dir: &Path,
    sector_size: u64,
    data: SectorData,
) -> Result<Sealed, FilecoinError> {
    seal_sector_of(dir, sector_size, data, random_fr_bytes())
}

/// As [`seal_sector`], for the storage provider `prover_id` (the sectors of one WindowPoSt
/// share theirs).
pub fn seal_sector_of(
    dir: &Path,
    sector_size: u64,
    data: SectorData,
    prover_id: [u8; 32],
) -> Result<Sealed, FilecoinError> {
    let registered = Registered::for_size(sector_size)?;
    let cache_dir = dir.join("cache");
    std::fs::create_dir_all(&cache_dir).map_err(io(&cache_dir))?;
    let staged = dir.join("staged");
    let replica = dir.join("sealed");
    let piece = stage_piece(registered.seal, sector_size, data, &staged)?;
    File::create(&replica).map_err(io(&replica))?;
    let sector_id = rand::thread_rng().next_u64() >> 1;
    let ticket = random_fr_bytes();
    let pieces = vec![piece];
    let p1 = seal::seal_pre_commit_phase1(
        registered.seal,
        &cache_dir,
        &staged,
        &replica,
        prover_id,
        SectorId::from(sector_id),
        ticket,
        &pieces,
    )
    .map_err(step("sealing: pre-commit phase 1"))?;
    let pre_commit = seal::seal_pre_commit_phase2(p1, &cache_dir, &replica)
        .map_err(step("sealing: pre-commit phase 2"))?;
    Ok(Sealed {
        registered,
        sector_size,
        comm_r: pre_commit.comm_r,
        comm_d: pre_commit.comm_d,
        cache_dir,
        replica,
        prover_id,
        sector_id,
        ticket,
        pieces,
        pre_commit,
    })
}

/// The seed of a C1 output made by [`porep_c2`] (the verifier needs it with the ticket).
#[derive(Debug, Clone)]
pub struct PoRepInputs {
    pub request: PoRepC2,
    pub seed: [u8; 32],
}

/// The C1 output of `sealed` for a random seed (seal_commit_phase1).
pub fn porep_c2(sealed: &Sealed) -> Result<PoRepInputs, FilecoinError> {
    let seed = random_fr_bytes();
    let c1 = seal::seal_commit_phase1(
        &sealed.cache_dir,
        &sealed.replica,
        sealed.prover_id,
        SectorId::from(sealed.sector_id),
        sealed.ticket,
        seed,
        sealed.pre_commit.clone(),
        &sealed.pieces,
    )
    .map_err(step("seal_commit_phase1"))?;
    Ok(PoRepInputs {
        request: PoRepC2 {
            c1,
            prover_id: sealed.prover_id,
            sector_id: sealed.sector_id,
        },
        seed,
    })
}

fn replica_info(sealed: &Sealed, registered: RegisteredPoStProof) -> PrivateReplicaInfo {
    PrivateReplicaInfo::new(
        registered,
        sealed.comm_r,
        sealed.cache_dir.clone(),
        sealed.replica.clone(),
    )
}

/// One vanilla proof of `sealed` for `registered` and `randomness`.
fn post_vanilla(
    sealed: &Sealed,
    registered: RegisteredPoStProof,
    randomness: &[u8; 32],
) -> Result<Vec<u8>, FilecoinError> {
    let id = SectorId::from(sealed.sector_id);
    let challenges =
        post::generate_fallback_sector_challenges(registered, randomness, &[id], sealed.prover_id)
            .map_err(step("the PoSt's sector challenges"))?;
    let challenges = challenges.get(&id).ok_or_else(|| FilecoinError::Mismatch {
        what: "the PoSt's sector challenges",
        expected: format!("challenges of sector {}", sealed.sector_id),
        got: "none".into(),
    })?;
    post::generate_single_vanilla_proof(
        registered,
        id,
        &replica_info(sealed, registered),
        challenges,
    )
    .map_err(step("the PoSt vanilla proof"))
}

/// The public replica information of `sealed`, for the PoSt verifiers.
pub fn public_replicas(
    sealed: &Sealed,
    registered: RegisteredPoStProof,
) -> BTreeMap<SectorId, PublicReplicaInfo> {
    BTreeMap::from([(
        SectorId::from(sealed.sector_id),
        PublicReplicaInfo::new(registered, sealed.comm_r),
    )])
}

/// WindowPoSt's inputs over `sealed` for random randomness.
pub fn window_post(sealed: &Sealed) -> Result<WindowPoSt, FilecoinError> {
    let registered = sealed.registered.window;
    let randomness = random_fr_bytes();
    Ok(WindowPoSt {
        registered_proof: registered,
        randomness,
        prover_id: sealed.prover_id,
        vanilla_proofs: vec![post_vanilla(sealed, registered, &randomness)?],
        partition: None,
    })
}

/// WindowPoSt's inputs over the sectors `sealed` (of one prover and size; as many
/// partitions as their count needs) for random randomness.
pub fn window_post_over(sealed: &[Sealed]) -> Result<WindowPoSt, FilecoinError> {
    let first = sealed.first().ok_or_else(|| FilecoinError::Mismatch {
        what: "the sectors of a WindowPoSt",
        expected: "one or more".into(),
        got: "none".into(),
    })?;
    if let Some(other) = sealed.iter().find(|s| s.prover_id != first.prover_id) {
        return Err(FilecoinError::Mismatch {
            what: "the sectors of a WindowPoSt",
            expected: format!("prover {}", hex::encode(first.prover_id)),
            got: format!(
                "sector {} of prover {}",
                other.sector_id,
                hex::encode(other.prover_id)
            ),
        });
    }
    let registered = first.registered.window;
    let randomness = random_fr_bytes();
    let vanilla_proofs = sealed
        .iter()
        .map(|s| post_vanilla(s, registered, &randomness))
        .collect::<Result<_, _>>()?;
    Ok(WindowPoSt {
        registered_proof: registered,
        randomness,
        prover_id: first.prover_id,
        vanilla_proofs,
        partition: None,
    })
}

/// WinningPoSt's inputs over `sealed` (the only sector, so the one challenged) for random
/// randomness.
pub fn winning_post(sealed: &Sealed) -> Result<WinningPoSt, FilecoinError> {
    let registered = sealed.registered.winning;
    let randomness = random_fr_bytes();
    let chosen =
        post::generate_winning_post_sector_challenge(registered, &randomness, 1, sealed.prover_id)
            .map_err(step("the WinningPoSt sector challenge"))?;
    if chosen != [0] {
        return Err(FilecoinError::Mismatch {
            what: "the WinningPoSt sector challenge over one sector",
            expected: "[0]".into(),
            got: format!("{chosen:?}"),
        });
    }
    Ok(WinningPoSt {
        registered_proof: registered,
        randomness,
        prover_id: sealed.prover_id,
        vanilla_proofs: vec![post_vanilla(sealed, registered, &randomness)?],
    })
}

/// A SnapDeals update of `sector_key` (sealed with [`SectorData::Zeros`]) with random data
/// under `dir`: its partition proofs.
pub fn snap(dir: &Path, sector_key: &Sealed) -> Result<SnapUpdate, FilecoinError> {
    let registered = sector_key.registered.update;
    let cache = dir.join("update-cache");
    std::fs::create_dir_all(&cache).map_err(io(&cache))?;
    let staged = dir.join("update-staged");
    let replica = dir.join("update-replica");
    let piece = stage_piece(
        sector_key.registered.seal,
        sector_key.sector_size,
        SectorData::Random,
        &staged,
    )?;
    // The new replica has the sector key's size before it is encoded into.
    File::create(&replica)
        .and_then(|f| f.set_len(sector_key.sector_size))
        .map_err(io(&replica))?;
    let encoded = update::empty_sector_update_encode_into(
        registered,
        &replica,
        &cache,
        &sector_key.replica,
        &sector_key.cache_dir,
        &staged,
        &[piece],
    )
    .map_err(step("SnapDeals: encoding the new data"))?;
    let proofs = update::generate_partition_proofs(
        registered,
        sector_key.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sector_key.replica,
        &sector_key.cache_dir,
        &replica,
        &cache,
    )
    .map_err(step("SnapDeals: the partition proofs"))?;
    Ok(SnapUpdate {
        registered_proof: registered,
        comm_r_old: sector_key.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
        vanilla_proofs: proofs.into_iter().map(|p| p.0).collect(),
    })
}
