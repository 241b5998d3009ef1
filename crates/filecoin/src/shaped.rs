//! PoRep C2 partitions of a sector size's real shape, built from vanilla proofs of made-up
//! values: every Merkle path, column and label has the length the sector size's public
//! parameters give it, and holds random field elements. Such proofs prove nothing (no
//! verifier accepts them), but synthesis does not check them: their circuit has the real
//! circuit's constraints and its witness costs what a sealed sector's does. For synthesis
//! benchmarks at sizes no test host can seal.

use blstrs::Scalar;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, PoRepConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_porep::stacked::{
    self, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, StackedCircuit,
    StackedCompound, StackedDrg,
};
use typenum::Unsigned;

use crate::FilecoinError;

/// One PoRep C2 partition's circuits.
#[derive(Debug)]
pub struct ShapedPartition<C> {
    /// The partition's circuit, as the full path synthesizes it.
    pub circuit: C,
    /// One circuit a challenge, each with the prologue they share (replica id and
    /// commitments), as the recorded path synthesizes them on all cores.
    pub challenges: Vec<C>,
}

/// What is done with a shaped partition, whose circuit type depends on the sector shape.
pub trait UsePartition {
    type Output;
    fn partition<C: bellperson::Circuit<Scalar> + Clone + Send>(
        self,
        partition: ShapedPartition<C>,
    ) -> Self::Output;
}

/// Builds partition 0 of a PoRep C2 proof for `sector_size`-byte sectors from made-up vanilla
/// proofs (random values drawn from `seed`) and hands it to `using`.
pub fn porep_partition<U: UsePartition>(
    sector_size: u64,
    seed: u64,
    using: U,
) -> Result<U::Output, FilecoinError> {
    use filecoin_proofs::{
        SectorShape2KiB, SectorShape32GiB, SectorShape512MiB, SectorShape64GiB, SectorShape8MiB,
    };
    match sector_size {
        0x800 => porep_shaped::<SectorShape2KiB, U>(sector_size, seed, using),
        0x80_0000 => porep_shaped::<SectorShape8MiB, U>(sector_size, seed, using),
        0x2000_0000 => porep_shaped::<SectorShape512MiB, U>(sector_size, seed, using),
        0x8_0000_0000 => porep_shaped::<SectorShape32GiB, U>(sector_size, seed, using),
        0x10_0000_0000 => porep_shaped::<SectorShape64GiB, U>(sector_size, seed, using),
        other => Err(FilecoinError::Unsupported {
            what: format!("sector size {other}"),
            why: "filecoin-proofs proves 2 KiB, 8 MiB, 512 MiB, 32 GiB and 64 GiB sectors",
        }),
    }
}

type Vanilla<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;
type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// The sizes a vanilla proof's parts take, from the public parameters.
#[derive(Debug, Clone, Copy)]
struct ProofShape {
    nodes: usize,
    layers: usize,
    drg_parents: usize,
    exp_parents: usize,
}

/// Made-up vanilla proofs of one shape, from one random stream. The tree roots are drawn once:
/// a partition's challenges must agree on comm_c and comm_r_last.
struct Maker<Tree: MerkleTreeTrait> {
    shape: ProofShape,
    rng: ChaCha8Rng,
    root_d: DefaultPieceDomain,
    root_c: <Tree::Hasher as Hasher>::Domain,
    root_r: <Tree::Hasher as Hasher>::Domain,
}

impl<Tree: 'static + MerkleTreeTrait> Maker<Tree> {
    fn new(shape: ProofShape, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Self {
            shape,
            root_d: Domain::random(&mut rng),
            root_c: Domain::random(&mut rng),
            root_r: Domain::random(&mut rng),
            rng,
        }
    }

    fn values<D: Domain>(&mut self, n: usize) -> Vec<D> {
        (0..n).map(|_| D::random(&mut self.rng)).collect()
    }

    /// A path to `node` in a tree of arities base, sub and top (0: none) over the sector's
    /// nodes: a digit of the node's index and arity - 1 siblings a level, leaves first.
    fn path<D: Domain>(&mut self, node: usize, arities: [usize; 3]) -> Vec<(Vec<D>, usize)> {
        let [base, sub, top] = arities;
        let upper = [sub, top].into_iter().filter(|&a| a != 0);
        let upper_bits: u32 = upper.clone().map(usize::trailing_zeros).sum();
        let base_levels = (self.shape.nodes.trailing_zeros() - upper_bits) / base.trailing_zeros();
        let levels = std::iter::repeat_n(base, base_levels as usize).chain(upper);
        let mut rest = node;
        levels
            .map(|arity| {
                let index = rest % arity;
                rest /= arity;
                (self.values(arity - 1), index)
            })
            .collect()
    }

    fn tree_proof(
        &mut self,
        node: usize,
        root: <Tree::Hasher as Hasher>::Domain,
    ) -> TreeProof<Tree> {
        let arities = [
            Tree::Arity::to_usize(),
            Tree::SubTreeArity::to_usize(),
            Tree::TopTreeArity::to_usize(),
        ];
        let leaf = Domain::random(&mut self.rng);
        let path = self.path(node, arities);
        MerkleProof::from_parts(leaf, root, path)
    }

    fn column_proof(&mut self, node: usize) -> Result<ColumnProof<TreeProof<Tree>>, FilecoinError> {
        let rows = self.values(self.shape.layers);
        let column =
            Column::new(node as u32, rows).map_err(FilecoinError::filecoin("a made-up column"))?;
        let inclusion = self.tree_proof(node, self.root_c);
        ColumnProof::from_column(column, inclusion)
            .map_err(FilecoinError::filecoin("a made-up column proof"))
    }

    fn node(&mut self) -> usize {
        self.rng.gen_range(0..self.shape.nodes)
    }

    /// One challenge's vanilla proof, of a random node and random parents.
    fn challenge(&mut self) -> Result<Vanilla<Tree>, FilecoinError> {
        let shape = self.shape;
        let node = self.node();
        let leaf_d = Domain::random(&mut self.rng);
        let path_d = self.path(node, [2, 0, 0]);
        let comm_d_proofs = MerkleProof::from_parts(leaf_d, self.root_d, path_d);
        let comm_r_last_proof = self.tree_proof(node, self.root_r);
        let c_x = self.column_proof(node)?;
        let drg_parents = (0..shape.drg_parents)
            .map(|_| {
                let parent = self.node();
                self.column_proof(parent)
            })
            .collect::<Result<_, _>>()?;
        let exp_parents = (0..shape.exp_parents)
            .map(|_| {
                let parent = self.node();
                self.column_proof(parent)
            })
            .collect::<Result<_, _>>()?;
        // Layer 1 hashes the base parents only; the others the expander parents too.
        let labeling_proofs = (1..=shape.layers)
            .map(|layer| {
                let parents = match layer {
                    1 => shape.drg_parents,
                    _ => shape.drg_parents + shape.exp_parents,
                };
                LabelingProof::new(layer as u32, node as u64, self.values(parents))
            })
            .collect();
        let encoding_proof = EncodingProof::new(
            shape.layers as u32,
            node as u64,
            self.values(shape.drg_parents + shape.exp_parents),
        );
        Ok(Vanilla::<Tree> {
            comm_d_proofs,
            comm_r_last_proof,
            replica_column_proofs: ReplicaColumnProof {
                c_x,
                drg_parents,
                exp_parents,
            },
            labeling_proofs,
            encoding_proof,
        })
    }
}

fn porep_shaped<Tree: 'static + MerkleTreeTrait, U: UsePartition>(
    sector_size: u64,
    seed: u64,
    using: U,
) -> Result<U::Output, FilecoinError> {
    let config: PoRepConfig = crate::gen::Registered::for_size(sector_size)?
        .seal
        .as_v1_config();
    let partitions = usize::from(config.partitions);
    let pub_params = crate::kinds::porep_public_params::<Tree>(&config, partitions)?;
    let vp = &pub_params.vanilla_params;
    let shape = ProofShape {
        nodes: vp.graph.size(),
        layers: vp.num_layers,
        drg_parents: vp.graph.base_graph().degree(),
        exp_parents: vp.graph.expansion_degree(),
    };
    let mut maker = Maker::<Tree>::new(shape, seed);
    let vanilla = (0..vp.challenges.num_challenges_per_partition())
        .map(|_| maker.challenge())
        .collect::<Result<Vec<_>, _>>()?;
    let pub_in = stacked::PublicInputs::<<Tree::Hasher as Hasher>::Domain, DefaultPieceDomain> {
        replica_id: Domain::random(&mut maker.rng),
        tau: Some(stacked::Tau {
            comm_d: maker.root_d,
            comm_r: Domain::random(&mut maker.rng),
        }),
        k: Some(0),
        seed: Some(maker.rng.gen()),
    };
    type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
    let circuit_of = |proofs: &Vec<Vanilla<Tree>>| -> Result<StackedCircuit<Tree, DefaultPieceHasher>, FilecoinError> {
        <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::circuit(
            &pub_in,
            (),
            proofs,
            vp,
            Some(0),
        )
        .map_err(FilecoinError::filecoin("building the PoRep circuit"))
    };
    let circuit = circuit_of(&vanilla)?;
    let challenges = vanilla
        .iter()
        .map(|one| circuit_of(&vec![one.clone()]))
        .collect::<Result<_, _>>()?;
    Ok(using.partition(ShapedPartition {
        circuit,
        challenges,
    }))
}
