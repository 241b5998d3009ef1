//! filecoin-proofs' own verifiers on a request and its proof bytes: the judges of this crate's
//! output. They read the verifying key (`.vk`) from `FIL_PROOFS_PARAMETER_CACHE`, which must
//! name the directory the proof's parameters came from.

use std::collections::BTreeMap;

use filecoin_proofs::FallbackPoStSectorProof;
use filecoin_proofs_api::{post, seal, update, PublicReplicaInfo, RegisteredPoStProof, SectorId};
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::{catch, FilecoinError, Request};

/// Whether filecoin-proofs' verifier of `request`'s kind accepts `proof`. One partition's
/// WindowPoSt proof is verified by merging it with its siblings first, so it is refused here.
pub fn with_filecoin_proofs(request: &Request, proof: &[u8]) -> Result<bool, FilecoinError> {
    let verified = match request {
        Request::PoRepC2(r) => catch("verify_seal", None, || {
            let c1 = &r.c1;
            seal::verify_seal(
                c1.registered_proof,
                c1.comm_r,
                c1.comm_d,
                r.prover_id,
                SectorId::from(r.sector_id),
                c1.ticket,
                c1.seed,
                proof,
            )
        })?,
        Request::WindowPoSt(r) => {
            if r.partition.is_some() {
                return Err(FilecoinError::Unsupported {
                    what: "verifying one partition's WindowPoSt proof alone".into(),
                    why: "filecoin-proofs verifies a WindowPoSt proof once its partitions are merged (merge_window_post_partition_proofs)",
                });
            }
            let replicas = post_replicas(r.registered_proof, &r.vanilla_proofs)?;
            catch("verify_window_post", None, || {
                post::verify_window_post(
                    &r.randomness,
                    &[(r.registered_proof, proof)],
                    &replicas,
                    r.prover_id,
                )
            })?
        }
        Request::WinningPoSt(r) => {
            let replicas = post_replicas(r.registered_proof, &r.vanilla_proofs)?;
            catch("verify_winning_post", None, || {
                post::verify_winning_post(&r.randomness, proof, &replicas, r.prover_id)
            })?
        }
        Request::Snap(r) => catch("verify_empty_sector_update_proof", None, || {
            update::verify_empty_sector_update_proof(
                r.registered_proof,
                proof,
                r.comm_r_old,
                r.comm_r_new,
                r.comm_d_new,
            )
        })?,
    };
    verified.map_err(FilecoinError::filecoin("filecoin-proofs' verifier"))
}

/// The sectors a PoSt's vanilla proofs prove (their ids and comm_r), as its verifier takes
/// them.
fn post_replicas(
    registered: RegisteredPoStProof,
    vanilla_proofs: &[Vec<u8>],
) -> Result<BTreeMap<SectorId, PublicReplicaInfo>, FilecoinError> {
    fn sectors<Tree: 'static + MerkleTreeTrait>(
        registered: RegisteredPoStProof,
        bytes: &[Vec<u8>],
    ) -> Result<BTreeMap<SectorId, PublicReplicaInfo>, FilecoinError> {
        bytes
            .iter()
            .enumerate()
            .map(|(index, b)| {
                let p: FallbackPoStSectorProof<Tree> =
                    bincode::deserialize(b).map_err(|source| FilecoinError::Vanilla {
                        index,
                        what: "FallbackPoStSectorProof of this sector size",
                        source,
                    })?;
                let mut comm_r = [0u8; 32];
                comm_r.copy_from_slice(AsRef::<[u8]>::as_ref(&p.comm_r));
                Ok((p.sector_id, PublicReplicaInfo::new(registered, comm_r)))
            })
            .collect()
    }
    with_shape!(
        u64::from(registered.sector_size()),
        sectors,
        registered,
        vanilla_proofs
    )
}
