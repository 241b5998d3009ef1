//! Recordings built, evaluated, saved and read back; every damaged or foreign file and every
//! witness of the wrong length is a typed error.

mod common;

use std::path::{Path, PathBuf};

use blstrs::Scalar;
use common::{random, random_shaped, witness, Lengths};
use ff::Field;
use zkpipe_field::Fr;
use zkpipe_r1cs::{
    file, Assignment, CircuitId, Evaluations, Recording, RecordingBuilder, RecordingError, Variable,
};

fn evaluate(rec: &Recording, inputs: &[Scalar], aux: &[Fr]) -> [Vec<Fr>; 3] {
    let n = rec.shape().constraints;
    let (mut a, mut b, mut c) = (
        vec![Fr::default(); n],
        vec![Fr::default(); n],
        vec![Fr::default(); n],
    );
    rec.evaluate(
        Assignment { inputs, aux },
        Evaluations {
            a: &mut a,
            b: &mut b,
            c: &mut c,
        },
    )
    .unwrap();
    [a, b, c]
}

#[test]
fn evaluation_equals_the_sum_of_each_rows_terms() {
    for (n, lengths, seed) in [
        (0, Lengths::Short, 1),
        (1, Lengths::Short, 2),
        (100, Lengths::Short, 3),
        (10_000, Lengths::Short, 4),
        (2_000, Lengths::WithLong, 5),
    ] {
        let t = random_shaped(n, 3, 20, lengths, seed);
        let (inputs, aux) = witness(t.inputs, t.aux, seed);
        let got = evaluate(&t.rec, &inputs, &aux);
        let value = |v: Variable| match v {
            Variable::Input(i) => inputs[i],
            Variable::Aux(i) => Scalar::from(aux[i]),
        };
        for (i, row) in t.rows.iter().enumerate() {
            for m in 0..3 {
                let want: Scalar = row[m].iter().map(|&(v, c)| value(v) * c).sum();
                assert_eq!(
                    Scalar::from(got[m][i]),
                    want,
                    "row {i} of matrix {m}, {n} rows"
                );
            }
        }
        // The table holds each coefficient once, 1 and -1 first.
        let table = t.rec.table();
        assert_eq!(&table[..2], &[Scalar::ONE, -Scalar::ONE]);
        let mut reprs: Vec<_> = table.iter().map(ff::PrimeField::to_repr).collect();
        reprs.sort();
        reprs.dedup();
        assert_eq!(reprs.len(), table.len(), "duplicates in the table");
    }
}

#[test]
fn a_witness_or_output_of_the_wrong_length_is_an_error_with_both_numbers() {
    let t = random(50, 5);
    let (inputs, aux) = witness(t.inputs, t.aux, 5);
    let n = 50;
    let mut out = [
        vec![Fr::default(); n],
        vec![Fr::default(); n],
        vec![Fr::default(); n - 1],
    ];
    let [a, b, c] = &mut out;
    let err = t
        .rec
        .evaluate(
            Assignment {
                inputs: &inputs,
                aux: &aux,
            },
            Evaluations { a, b, c },
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                expected: 50,
                got: 49,
                ..
            }
        ),
        "{err}"
    );
    let [a, b, c] = &mut [
        vec![Fr::default(); n],
        vec![Fr::default(); n],
        vec![Fr::default(); n],
    ];
    let err = t
        .rec
        .evaluate(
            Assignment {
                inputs: &inputs,
                aux: &aux[1..],
            },
            Evaluations { a, b, c },
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::WitnessShape {
                what: "aux variables",
                expected: 20,
                got: 19
            }
        ),
        "{err}"
    );
}

#[test]
fn a_constraint_on_a_variable_never_allocated_is_an_error() {
    let mut b = RecordingBuilder::new();
    b.alloc_input();
    b.alloc_aux();
    let err = b
        .enforce([(Variable::Aux(1), Scalar::ONE)], [], [])
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecordingError::UnknownVariable {
                kind: "aux",
                index: 1,
                allocated: 1
            }
        ),
        "{err}"
    );
}

#[test]
fn parts_that_do_not_make_a_recording_are_refused() {
    let shape = zkpipe_r1cs::Shape {
        inputs: 1,
        aux: 1,
        constraints: 1,
    };
    let table = vec![Scalar::ONE, -Scalar::ONE];
    let row = |cols: Vec<u32>, ks: Vec<u32>| {
        zkpipe_r1cs::Matrix::from_arrays(vec![0, cols.len() as u32], cols, ks)
    };
    let ok = || {
        [
            row(vec![0], vec![0]),
            row(vec![1], vec![1]),
            row(vec![], vec![]),
        ]
    };
    let id = || CircuitId("parts".into());
    assert!(Recording::from_parts(id(), shape, table.clone(), ok()).is_ok());
    let cases = [
        (
            [row(vec![2], vec![0]), ok()[1].clone(), ok()[2].clone()],
            "column 2",
        ),
        (
            [row(vec![0], vec![2]), ok()[1].clone(), ok()[2].clone()],
            "coefficient index 2",
        ),
        (
            [
                zkpipe_r1cs::Matrix::from_arrays(vec![0, 2, 1], vec![0, 1], vec![0, 0]),
                ok()[1].clone(),
                ok()[2].clone(),
            ],
            "rows",
        ),
    ];
    for (m, what) in cases {
        let err = Recording::from_parts(id(), shape, table.clone(), m).unwrap_err();
        assert!(
            matches!(&err, RecordingError::Inconsistent { what: w } if w.contains(what)),
            "{what}: {err}"
        );
    }
    let err = Recording::from_parts(id(), shape, vec![Scalar::ONE], ok()).unwrap_err();
    assert!(matches!(err, RecordingError::Inconsistent { .. }), "{err}");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("zkpipe-r1cs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Writes `bytes` with a fresh checksum (as a file damaged and then "repaired" would be).
fn rehash(path: &Path, mut bytes: Vec<u8>) {
    let body = bytes.len() - 32;
    let digest = blake3::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(digest.as_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_saved_recording_reads_back_equal_and_evaluates_the_same() {
    let t = random(3000, 6);
    let path = scratch("roundtrip.r1cs");
    file::save(&t.rec, &path).unwrap();
    let back = file::load(&path, t.rec.id()).unwrap();
    assert_eq!(back.shape(), t.rec.shape());
    assert_eq!(back.table(), t.rec.table());
    assert_eq!(back.matrices(), t.rec.matrices());
    assert_eq!(back.densities(), t.rec.densities());
    let (inputs, aux) = witness(t.inputs, t.aux, 6);
    assert_eq!(
        evaluate(&back, &inputs, &aux),
        evaluate(&t.rec, &inputs, &aux)
    );
    assert!(!Path::new(&format!("{}.tmp", path.display())).exists());
    // The file's checksum is the digest of the recording it holds; another recording under
    // the same id has another digest.
    assert_eq!(back.digest(), t.rec.digest());
    let [a, b, c] = t.rec.matrices().map(Clone::clone);
    let swapped = Recording::from_parts(
        t.rec.id().clone(),
        t.rec.shape(),
        t.rec.table().to_vec(),
        [b, a, c],
    )
    .unwrap();
    assert_ne!(swapped.digest(), t.rec.digest());
    // Read in place from the mapped file, not copied; made in memory otherwise.
    assert!(back.is_mapped() && !t.rec.is_mapped());
    // A clone shares the mapping and evaluates the same.
    let clone = back.clone();
    assert!(clone.is_mapped());
    assert_eq!(clone.matrices(), t.rec.matrices());

    // Another recording saved over the file (renamed over it, as every save is) leaves the
    // one mapped before intact; reading again gives the new one.
    let other = random(1000, 16);
    file::save(&other.rec, &path).unwrap();
    assert_eq!(back.matrices(), t.rec.matrices());
    assert_eq!(
        evaluate(&back, &inputs, &aux),
        evaluate(&t.rec, &inputs, &aux)
    );
    let again = file::read(&path).unwrap();
    assert_eq!(again.matrices(), other.rec.matrices());
    assert_eq!(again.id(), other.rec.id());
}

#[test]
fn damaged_foreign_or_truncated_files_are_typed_errors() {
    let t = random(500, 7);
    let path = scratch("damaged.r1cs");
    file::save(&t.rec, &path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let id = t.rec.id().clone();
    let load = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        file::load(&path, &id).unwrap_err()
    };

    // Another circuit's recording.
    std::fs::write(&path, &good).unwrap();
    let err = file::load(&path, &CircuitId("other".into())).unwrap_err();
    assert!(matches!(err, RecordingError::OtherCircuit { .. }), "{err}");
    // Not a recording.
    let err =
        load(b"a text file, long enough to hold a header of a recording, and more bytes than that");
    assert!(matches!(err, RecordingError::NotARecording { .. }), "{err}");
    // Another format version.
    let mut v = good.clone();
    v[8] = 9;
    assert!(matches!(
        load(&v),
        RecordingError::Version {
            found: 9,
            supported: 1,
            ..
        }
    ));
    // Truncated: in the header, and in the body.
    assert!(matches!(
        load(&good[..20]),
        RecordingError::Truncated { .. }
    ));
    let err = load(&good[..good.len() - 100]);
    assert!(
        matches!(err, RecordingError::Truncated { needed, got, .. } if needed == good.len() as u64 && got + 100 == needed),
        "{err}"
    );
    // A flipped bit anywhere after the header: the checksum.
    for at in [100, good.len() / 2, good.len() - 40, good.len() - 1] {
        let mut v = good.clone();
        v[at] ^= 0x10;
        let err = load(&v);
        assert!(
            matches!(err, RecordingError::Checksum { .. }),
            "byte {at}: {err}"
        );
    }
    // Inconsistent contents under a valid checksum: a column beyond the variables, a
    // non-canonical coefficient.
    let header = 72 + t.rec.id().0.len().div_ceil(8) * 8;
    let table = header + 32 * t.rec.table().len();
    let first_column = table + 4 * (t.rec.shape().constraints + 1);
    let mut v = good.clone();
    v[first_column..first_column + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    rehash(&path, v);
    let err = file::load(&path, &id).unwrap_err();
    assert!(
        matches!(&err, RecordingError::Corrupt { what, .. } if what.contains("column")),
        "{err}"
    );
    let mut v = good.clone();
    v[header..header + 32].fill(0xff);
    rehash(&path, v);
    let err = file::load(&path, &id).unwrap_err();
    assert!(
        matches!(&err, RecordingError::Corrupt { what, .. } if what.contains("canonical")),
        "{err}"
    );
    // A table whose first entry is not 1 (which evaluation adds without a product).
    let mut v = good.clone();
    v[header..header + 32].copy_from_slice(&ff::PrimeField::to_repr(&Scalar::from(2u64)));
    rehash(&path, v);
    let err = file::load(&path, &id).unwrap_err();
    assert!(
        matches!(&err, RecordingError::Corrupt { what, .. } if what.contains("1 and -1")),
        "{err}"
    );
    // A missing file.
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        file::load(&path, &id),
        Err(RecordingError::Io { .. })
    ));
}
