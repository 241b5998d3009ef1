//! Properties of the field layouts (CPU) and of the GPU field kernels against blstrs.

use blstrs::Scalar;
use proptest::prelude::*;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{DeviceBuffer, KernelImage, Stream};
use zkpipe_field::kernels::FieldTestKernels;
use zkpipe_field::{cast, layout};
use zkpipe_proptests::scalar;

const FIELD: KernelImage = zkpipe_field::kernels::IMAGE;

proptest! {
    #[test]
    fn fr_layout_round_trips(s in scalar()) {
        prop_assert_eq!(Scalar::from(layout::Fr::from(s)), s);
        prop_assert_eq!(cast::scalars_as_fr(&[s])[0], layout::Fr::from(s));
    }
}

#[test]
fn gpu_fr_ops_match_blstrs_on_generated_vectors() {
    let Some(ctx) = gpu_context() else { return };
    let k = FieldTestKernels::load(&ctx, &FIELD).unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let mut runner = proptest::test_runner::TestRunner::default();
    let strategy = proptest::collection::vec((scalar(), scalar()), 1..2000);
    runner
        .run(&strategy, |pairs| {
            let a: Vec<Scalar> = pairs.iter().map(|p| p.0).collect();
            let b: Vec<Scalar> = pairs.iter().map(|p| p.1).collect();
            let n = a.len();
            let da = DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&a)).unwrap();
            let db = DeviceBuffer::from_host(&ctx, cast::scalars_as_fr(&b)).unwrap();
            let mut out = DeviceBuffer::<layout::Fr>::alloc(&ctx, 4 * n).unwrap();
            k.fr_ops(&stream, &da, &db, &mut out).unwrap();
            stream.synchronize().unwrap();
            let got: Vec<Scalar> = out.to_vec().unwrap().into_iter().map(Into::into).collect();
            for i in 0..n {
                prop_assert_eq!(got[i], a[i] + b[i]);
                prop_assert_eq!(got[n + i], a[i] - b[i]);
                prop_assert_eq!(got[2 * n + i], a[i] * b[i]);
                prop_assert_eq!(got[3 * n + i], a[i] * a[i]);
            }
            Ok(())
        })
        .unwrap();
}
