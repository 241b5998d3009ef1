//! bellperson's parameter files (written by `Parameters::write`) read by zkpipe: keys that prove
//! byte-identical to bellperson's proofs, and bad files refused with the offset and the reason.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use bellperson::groth16::{create_proof, Parameters};
use bellperson::Circuit;
use blstrs::{Bls12, Fp, G1Affine, Scalar};
use common::{cube, params, rs, sha, Case};
use ff::Field;
use group::prime::PrimeCurveAffine;
use zkpipe_bellperson::synthesize;
use zkpipe_msm::testgen::off_subgroup_g1;
use zkpipe_pipeline::{
    read_params, read_params_unchecked, Backend, Config, Engine, ParamsError, PointProblem,
    ProvingKey, Randomness,
};

/// The bytes of the verifying key before ic's count: three G1 and three G2 points.
const VK_FIXED: usize = 3 * 96 + 3 * 192;

/// A file of its own for each test and case, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path =
            std::env::temp_dir().join(format!("zkpipe-params-{}-{name}.bin", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

fn bytes_of(p: &Parameters<Bls12>) -> Vec<u8> {
    let mut out = Vec::new();
    p.write(&mut out).unwrap();
    out
}

/// Where h's count and first point lie in a file of these parameters.
fn h_offset(p: &Parameters<Bls12>) -> usize {
    VK_FIXED + 4 + 96 * p.vk.ic.len()
}

fn proves_as_bellperson<C: Circuit<Scalar> + Clone + Send>(
    engine: &Engine,
    case: Case<C>,
    seed: u64,
) {
    let p = params(case.setup.clone(), seed);
    let file = TempFile::new(case.name, &bytes_of(&p));
    let (r, s) = rs(seed);
    let theirs = {
        let proof = create_proof::<Bls12, _, _>(case.circuit.clone(), &p, r, s).unwrap();
        let mut b = Vec::new();
        proof.write(&mut b).unwrap();
        b
    };
    let read: [(&str, ProvingKey); 2] = [
        ("checked", read_params(&file.0).unwrap()),
        ("unchecked", read_params_unchecked(&file.0).unwrap()),
    ];
    for (how, key) in read {
        let key = Arc::new(key);
        let w = synthesize(case.circuit.clone()).unwrap();
        let ours = engine
            .submit(&key, w, Randomness::Fixed { r, s })
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(ours.to_bytes().to_vec(), theirs, "{} ({how})", case.name);
    }
}

#[test]
fn parameter_files_read_into_keys_that_prove_as_bellperson_does() {
    let engine = Engine::start(Config::default().with_backend(Backend::Cpu)).unwrap();
    proves_as_bellperson(&engine, cube(3), 1);
    proves_as_bellperson(&engine, sha(1, 7), 2);
}

#[test]
fn truncated_files_say_where_they_end() {
    let p = params(cube(3).setup, 3);
    let bytes = bytes_of(&p);
    let h = h_offset(&p);
    let cases = [
        (0, "vk.alpha_g1"),
        (50, "vk.alpha_g1"),
        (96 + 10, "vk.beta_g1"),
        (VK_FIXED + 2, "vk.ic"),
        (h + 2, "h"),
        (h + 4 + 95, "h"),
        (bytes.len() - 1, "b_g2"),
    ];
    for (cut, section) in cases {
        let file = TempFile::new(&format!("cut{cut}"), &bytes[..cut]);
        let Err(err) = read_params(&file.0) else {
            panic!("cut at {cut}: read")
        };
        match &err {
            ParamsError::Truncated {
                section: s, len, ..
            } => {
                assert_eq!((*s, *len), (section, cut as u64), "{err}");
            }
            ParamsError::Count { section: s, .. } => assert_eq!(*s, section, "{err}"),
            other => panic!("cut at {cut}: expected a truncation, got {other}"),
        }
        assert!(err.to_string().contains(section), "{err}");
    }
    // A whole file with bytes after it.
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0u8; 7]);
    let file = TempFile::new("longer", &longer);
    let err = read_params(&file.0).unwrap_err();
    assert!(
        matches!(err, ParamsError::Trailing { extra: 7, offset, .. } if offset == bytes.len() as u64),
        "{err}"
    );
}

#[test]
fn wrong_counts_are_errors_before_anything_is_allocated() {
    let p = params(cube(3).setup, 4);
    let bytes = bytes_of(&p);
    let h = h_offset(&p);
    let mut huge = bytes.clone();
    huge[h..h + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    let file = TempFile::new("huge", &huge);
    let err = read_params(&file.0).unwrap_err();
    assert!(
        matches!(&err, ParamsError::Count { section: "h", offset, count: u32::MAX, .. } if *offset == h as u64),
        "{err}"
    );
    // One point fewer: what follows is read out of step, and refused.
    let n = u32::from_be_bytes(bytes[h..h + 4].try_into().unwrap());
    let mut fewer = bytes.clone();
    fewer[h..h + 4].copy_from_slice(&(n - 1).to_be_bytes());
    let file = TempFile::new("fewer", &fewer);
    assert!(read_params(&file.0).is_err());
    assert!(read_params_unchecked(&file.0).is_err());
}

#[test]
fn bad_points_are_refused_with_their_query_index_and_offset() {
    let p = params(sha(1, 3).setup, 5);
    let bytes = bytes_of(&p);
    let at = h_offset(&p) + 4 + 96; // h[1]
    let good = p.h[1];
    let off_curve = G1Affine::from_raw_unchecked(good.x(), good.y() + Fp::ONE, false);
    let mut flagged = good.to_uncompressed();
    flagged[0] |= 0x80; // the compression flag, in an uncompressed encoding
    let cases = [
        (
            "off-curve",
            off_curve.to_uncompressed(),
            PointProblem::NotOnCurve,
            true,
        ),
        (
            "off-subgroup",
            off_subgroup_g1().unwrap().to_uncompressed(),
            PointProblem::NotInSubgroup,
            false,
        ),
        (
            "identity",
            G1Affine::identity().to_uncompressed(),
            PointProblem::Identity,
            true,
        ),
        ("flagged", flagged, PointProblem::Encoding, true),
    ];
    for (name, point, problem, unchecked_refuses) in cases {
        let mut b = bytes.clone();
        b[at..at + 96].copy_from_slice(&point);
        let file = TempFile::new(name, &b);
        let Err(err) = read_params(&file.0) else {
            panic!("{name}: the checked read took it")
        };
        match &err {
            ParamsError::Point {
                section,
                index,
                offset,
                problem: got,
                ..
            } => assert_eq!(
                (*section, *index, *offset, *got),
                ("h", 1, at as u64, problem),
                "{name}: {err}"
            ),
            other => panic!("{name}: expected a point error, got {other}"),
        }
        assert!(err.to_string().contains(&format!("offset {at}")), "{err}");
        // The unchecked read skips the subgroup check, as bellperson's does (blst checks the
        // curve equation whenever it decodes).
        assert_eq!(
            read_params_unchecked(&file.0).is_err(),
            unchecked_refuses,
            "{name}"
        );
    }
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let err = read_params("/nonexistent/zkpipe.params").unwrap_err();
    assert!(matches!(err, ParamsError::Io { .. }), "{err}");
    assert!(
        err.to_string().contains("/nonexistent/zkpipe.params"),
        "{err}"
    );
}

#[test]
fn generated_keys_go_to_files_and_come_back_point_for_point() {
    use zkpipe_bellperson::to_bellperson_parameters;
    use zkpipe_pipeline::testgen::{random_key_parts, Shape};
    let parts = random_key_parts(&Shape::filecoin(8), 3);
    let params = to_bellperson_parameters(parts.clone());
    let file = TempFile::new("generated", &bytes_of(&params));
    let key = read_params(&file.0).unwrap();
    assert_eq!(key.vk(), &parts.vk);
    assert_eq!(
        key.query_lens(),
        [
            parts.h.len(),
            parts.l.len(),
            parts.a.len(),
            parts.b_g1.len(),
            parts.b_g2.len()
        ]
    );
    let back = Parameters::<Bls12>::read(&bytes_of(&params)[..], true).unwrap();
    assert_eq!(
        (&*back.h, &*back.l, &*back.a, &*back.b_g1, &*back.b_g2),
        (&parts.h, &parts.l, &parts.a, &parts.b_g1, &parts.b_g2)
    );
}
