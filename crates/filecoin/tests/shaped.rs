//! PoRep partitions from made-up vanilla proofs have the real circuit's shape: their
//! recording equals the blank circuit's, and their witness made in full equals the one made
//! a challenge at a time on the recorded path.

use std::sync::Arc;

use blstrs::Scalar;
use zkpipe_bellperson::{record, synthesize, synthesize_recorded_parts, CircuitId};
use zkpipe_filecoin::shaped::{porep_partition, ShapedPartition, UsePartition};
use zkpipe_filecoin::{record_porep_blank, FilecoinError};
use zkpipe_r1cs::Recording;

const KIB2: u64 = 2048;

/// Records a partition's circuit, and checks that its two witnesses agree under it.
struct RecordAndCompare;

impl UsePartition for RecordAndCompare {
    type Output = (Recording, usize);

    fn partition<C: bellperson::Circuit<Scalar> + Clone + Send>(
        self,
        p: ShapedPartition<C>,
    ) -> Self::Output {
        let rec = Arc::new(record(p.circuit.clone(), CircuitId("shaped".into())).unwrap());
        let full = synthesize(p.circuit).unwrap();
        let parted = synthesize_recorded_parts(p.challenges.clone(), &rec, Default::default())
            .unwrap()
            .evaluated()
            .unwrap();
        assert_eq!(parted.input, full.input, "inputs");
        assert_eq!(parted.aux.as_fr(), full.aux.as_fr(), "aux values");
        assert_eq!(parted.a.as_fr(), full.a.as_fr(), "a");
        assert_eq!(parted.b.as_fr(), full.b.as_fr(), "b");
        assert_eq!(parted.c.as_fr(), full.c.as_fr(), "c");
        let rec = Arc::try_unwrap(rec).unwrap_or_else(|shared| (*shared).clone());
        (rec, p.challenges.len())
    }
}

#[test]
fn made_up_proofs_make_the_real_circuit_and_one_witness_both_ways() {
    let (shaped, challenges) = porep_partition(KIB2, 7, RecordAndCompare).unwrap();
    assert_eq!(challenges, 2, "a 2 KiB partition has 2 challenges");
    let blank = record_porep_blank(KIB2).unwrap();
    assert_eq!(shaped.shape(), blank.shape());
    assert_eq!(shaped.table(), blank.table());
    for (m, (s, b)) in shaped.matrices().iter().zip(blank.matrices()).enumerate() {
        assert!(**s == *b, "matrix {m} differs from the blank circuit's");
    }
    // Another seed: other values, the same witness length.
    let (other, _) = porep_partition(KIB2, 8, RecordAndCompare).unwrap();
    assert_eq!(other.shape(), blank.shape());
}

#[test]
fn a_sector_size_filecoin_does_not_prove_is_refused() {
    let err = porep_partition(4096, 1, RecordAndCompare).unwrap_err();
    assert!(matches!(err, FilecoinError::Unsupported { .. }), "{err}");
}
