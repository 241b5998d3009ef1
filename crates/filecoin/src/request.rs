//! What a storage provider asks to prove, with the inputs filecoin-proofs' API takes.
//!
//! - [`PoRepC2`]: a C1 output as JSON, the way Lotus and Curio store `seal_commit_phase1`'s
//!   result: filecoin-proofs-api's form (with `registered_proof`, the vanilla proofs keyed by
//!   the proof's name), or filecoin-proofs' own form (the same data without that wrapper, the
//!   registered proof given beside it).
//! - [`WindowPoSt`], [`WinningPoSt`], [`SnapUpdate`]: JSON request files (written by
//!   [`crate::gen`]) holding the registered proof, the 32-byte values as 64 hex digits, and the
//!   vanilla proofs as hex strings of their bincode bytes (filecoin-proofs-api's
//!   `VanillaProofBytes` and `PartitionProofBytes`).

use std::path::Path;

use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use serde::{Deserialize, Serialize};

use crate::FilecoinError;

/// A proof to make.
#[derive(Debug, Clone)]
pub enum Request {
    /// PoRep C2: a sealed sector's proof of replication.
    PoRepC2(Box<PoRepC2>),
    /// WindowPoSt: the whole proof, or one partition's.
    WindowPoSt(WindowPoSt),
    /// WinningPoSt.
    WinningPoSt(WinningPoSt),
    /// SnapDeals: an empty sector update's proof.
    Snap(SnapUpdate),
}

impl Request {
    /// The kind, for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::PoRepC2(_) => "porep-c2",
            Request::WindowPoSt(_) => "window-post",
            Request::WinningPoSt(_) => "winning-post",
            Request::Snap(_) => "snap",
        }
    }
}

/// PoRep C2's inputs.
#[derive(Debug, Clone)]
pub struct PoRepC2 {
    /// The C1 output (filecoin-proofs-api's form).
    pub c1: SealCommitPhase1Output,
    /// The storage provider's id.
    pub prover_id: [u8; 32],
    /// The sector's number.
    pub sector_id: u64,
}

impl PoRepC2 {
    /// From a C1 output's JSON: filecoin-proofs-api's form, or filecoin-proofs' own form with
    /// `registered` naming its registered proof (which that form does not carry).
    pub fn from_c1_json(
        json: &[u8],
        registered: Option<RegisteredSealProof>,
        prover_id: [u8; 32],
        sector_id: u64,
    ) -> Result<Self, FilecoinError> {
        let what = "the C1 output (seal_commit_phase1's JSON)";
        let json_err = |source| FilecoinError::Json { what, source };
        let mut value: serde_json::Value = serde_json::from_slice(json).map_err(json_err)?;
        let api_form = value.get("registered_proof").is_some();
        if !api_form {
            let Some(registered) = registered else {
                return Err(FilecoinError::Mismatch {
                    what: "a C1 output without `registered_proof` (filecoin-proofs' own form)",
                    expected: "the registered proof given beside it (--registered-proof)".into(),
                    got: "none".into(),
                });
            };
            wrap_raw_c1(&mut value, registered)?;
        }
        let c1: SealCommitPhase1Output = serde_json::from_value(value).map_err(json_err)?;
        if let Some(given) = registered.filter(|&r| api_form && r != c1.registered_proof) {
            return Err(FilecoinError::Mismatch {
                what: "the C1 output's registered proof",
                expected: format!("{given:?} (as given)"),
                got: format!("{:?}", c1.registered_proof),
            });
        }
        Ok(Self {
            c1,
            prover_id,
            sector_id,
        })
    }

    /// As [`PoRepC2::from_c1_json`], from a file.
    pub fn from_c1_file(
        path: &Path,
        registered: Option<RegisteredSealProof>,
        prover_id: [u8; 32],
        sector_id: u64,
    ) -> Result<Self, FilecoinError> {
        Self::from_c1_json(&read(path)?, registered, prover_id, sector_id)
    }
}

/// filecoin-proofs' own C1 form turned into the API's: the registered proof added and the
/// vanilla proofs keyed by the name of their sector shape.
fn wrap_raw_c1(
    value: &mut serde_json::Value,
    registered: RegisteredSealProof,
) -> Result<(), FilecoinError> {
    let shape = match u64::from(registered.sector_size()) {
        2048 => "StackedDrg2KiBV1",
        0x80_0000 => "StackedDrg8MiBV1",
        0x2000_0000 => "StackedDrg512MiBV1",
        0x8_0000_0000 => "StackedDrg32GiBV1",
        0x10_0000_0000 => "StackedDrg64GiBV1",
        other => {
            return Err(FilecoinError::Unsupported {
                what: format!("sector size {other}"),
                why: "filecoin-proofs has no PoRep of that size",
            })
        }
    };
    let Some(obj) = value.as_object_mut() else {
        return Err(FilecoinError::Mismatch {
            what: "the C1 output",
            expected: "a JSON object".into(),
            got: "another JSON value".into(),
        });
    };
    let vanilla = obj.remove("vanilla_proofs").unwrap_or_default();
    obj.insert(
        "vanilla_proofs".into(),
        serde_json::json!({ shape: vanilla }),
    );
    obj.insert(
        "registered_proof".into(),
        serde_json::to_value(registered).map_err(|source| FilecoinError::Json {
            what: "the registered proof",
            source,
        })?,
    );
    Ok(())
}

/// WindowPoSt's inputs (`generate_window_post_with_vanilla`, or
/// `generate_single_window_post_with_vanilla` when `partition` is set).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowPoSt {
    /// A `StackedDrgWindow…` proof.
    pub registered_proof: RegisteredPoStProof,
    /// The challenge randomness.
    #[serde(with = "hex32")]
    pub randomness: [u8; 32],
    /// The storage provider's id.
    #[serde(with = "hex32")]
    pub prover_id: [u8; 32],
    /// One vanilla proof a sector: bincode of `FallbackPoStSectorProof`.
    #[serde(with = "hex_list")]
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// Prove this partition only (its sectors' vanilla proofs given).
    #[serde(default)]
    pub partition: Option<usize>,
}

/// WinningPoSt's inputs (`generate_winning_post_with_vanilla`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WinningPoSt {
    /// A `StackedDrgWinning…` proof.
    pub registered_proof: RegisteredPoStProof,
    /// The challenge randomness.
    #[serde(with = "hex32")]
    pub randomness: [u8; 32],
    /// The storage provider's id.
    #[serde(with = "hex32")]
    pub prover_id: [u8; 32],
    /// One vanilla proof a challenged sector: bincode of `FallbackPoStSectorProof`.
    #[serde(with = "hex_list")]
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// SnapDeals' inputs (`generate_empty_sector_update_proof_with_vanilla`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapUpdate {
    /// The update proof.
    pub registered_proof: RegisteredUpdateProof,
    /// The sector key's comm_r.
    #[serde(with = "hex32")]
    pub comm_r_old: [u8; 32],
    /// The updated replica's comm_r.
    #[serde(with = "hex32")]
    pub comm_r_new: [u8; 32],
    /// The new data's comm_d.
    #[serde(with = "hex32")]
    pub comm_d_new: [u8; 32],
    /// One vanilla proof a partition: bincode of `PartitionProof`.
    #[serde(with = "hex_list")]
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// Reads a JSON request file of type `T`.
pub fn from_file<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<T, FilecoinError> {
    serde_json::from_slice(&read(path)?).map_err(|source| FilecoinError::Json { what, source })
}

fn read(path: &Path) -> Result<Vec<u8>, FilecoinError> {
    std::fs::read(path).map_err(|source| FilecoinError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// 32 bytes from 64 hex digits.
pub fn parse_hex32(what: &'static str, s: &str) -> Result<[u8; 32], FilecoinError> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    let bytes = hex::decode(s).map_err(|e| FilecoinError::Hex {
        what,
        reason: e.to_string(),
    })?;
    bytes.try_into().map_err(|b: Vec<u8>| FilecoinError::Hex {
        what,
        reason: format!("{} bytes; 32 expected (64 hex digits)", b.len()),
    })
}

mod hex32 {
    pub fn serialize<S: serde::Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(v))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        super::parse_hex32("a 32-byte value", &s).map_err(serde::de::Error::custom)
    }
}

mod hex_list {
    pub fn serialize<S: serde::Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(hex::encode))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let v: Vec<String> = serde::Deserialize::deserialize(d)?;
        v.iter()
            .enumerate()
            .map(|(i, s)| {
                hex::decode(s)
                    .map_err(|e| serde::de::Error::custom(format!("vanilla proof {i}: {e}")))
            })
            .collect()
    }
}
