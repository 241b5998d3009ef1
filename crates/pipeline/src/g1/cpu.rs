//! The G1 stage on the host's cores: the prover's H step and G1 MSMs over the CPU NTT and MSM.

use std::time::Instant;

use zkpipe_msm::CpuMsm;
use zkpipe_ntt::CpuNtt;

use super::{take_parts, Evaluations, G1Backend, G1Output, JobContext, Ran};
use crate::prover::{self, Assignment};
use crate::stats::{Counters, JobReport};
use crate::witness::evaluate_recording;
use crate::{ProveError, Witness};

/// The CPU side of [`G1Backend`]: every stage with all cores (rayon).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuBackend;

impl G1Backend for CpuBackend {
    fn quarantined(&self) -> bool {
        false
    }

    fn run(&self, job: &JobContext<'_>, witness: &mut Witness) -> Result<Ran, ProveError> {
        let (abc, z) = take_parts(witness);
        self.g1(job, abc, z).map(Ran::Done)
    }
}

impl CpuBackend {
    /// The G1 stage of `job` from its parts: h's coefficients from a, b and c (evaluated
    /// here from a recording), then H, L, A and B1; the assignment goes on to the G2 stage for
    /// B2.
    pub fn g1(
        &self,
        job: &JobContext<'_>,
        evaluations: Evaluations,
        z: Assignment,
    ) -> Result<G1Output, ProveError> {
        let t = Instant::now();
        let [a, b, c] = match evaluations {
            Evaluations::Given([a, b, c]) => [a.into_vec(), b.into_vec(), c.into_vec()],
            Evaluations::Recorded(rec) => evaluate_recording(&rec, &z.input, z.aux.as_fr())?,
        };
        let h = prover::h_coefficients(&CpuNtt::new(), job.key.domain_size(), a, b, c)?;
        Counters::add(&job.stats.h_ns, t.elapsed());
        let t = Instant::now();
        let parts = prover::g1_msms(&CpuMsm::new(), job.key, &h, &z)?;
        Counters::add(&job.stats.g1_ns, t.elapsed());
        Ok(G1Output {
            z: Some(z),
            parts,
            b2: None,
            report: JobReport {
                job: job.id,
                ..JobReport::default()
            },
        })
    }
}
