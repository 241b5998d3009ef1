//! The MSMs of a job on the GPU worker: H on one stream, the witness queries' split MSMs on
//! another beside it, each enqueued by its own thread in the job's batch memory, waited for once
//! and summed on the host after the GPU lock is let go.

use blstrs::{G1Projective, G2Projective};
use group::Group;
use zkpipe_cuda::DeviceBuffer;
use zkpipe_field::Fr;
use zkpipe_msm::{
    BaseSource, Bases, BatchMemory, DeviceBases, DeviceQuery, DeviceSplit, GpuCurve, MsmResults,
    Ticket, G1, G2,
};

use super::{GpuWorker, ResidentKey};
use crate::clock::StageClock;
use crate::prover::{G1Parts, G1Query, WitnessQuery};
use crate::{ProveError, ProvingKey};

/// The MSMs of a job, enqueued and waited for; summed after the lock is let go.
pub(super) struct MsmSums {
    /// H's MSM (none for a one-point domain, whose h is empty).
    h: Option<(MsmResults<G1>, Ticket)>,
    /// L, A, B1's batch and tickets.
    g1: MsmResults<G1>,
    tickets: Vec<Ticket>,
    g2: Option<(MsmResults<G2>, Ticket)>,
}

impl GpuWorker {
    /// The MSMs: H on one stream, and beside it L, A, B1 (and B2 when G2 runs on the GPU) on
    /// another, each enqueued back to back by its own thread (enqueueing streamed bases waits
    /// for their copies) in the job's batch memory, marked on the clocks, and waited for once.
    /// The batch memory comes back with the sums.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn msms(
        &self,
        key: &ProvingKey,
        resident: Option<&ResidentKey>,
        h: Option<&DeviceBuffer<Fr>>,
        staged: &(DeviceSplit, [DeviceQuery; 3]),
        (h_mem, side_mem, g2_mem): Batches,
        clock: &mut StageClock,
        lane: &mut Option<StageClock>,
    ) -> Result<(MsmSums, Batches), ProveError> {
        let (h_part, side_part) = std::thread::scope(|sc| {
            let side =
                sc.spawn(|| self.witness_msms(key, resident, staged, (side_mem, g2_mem), lane));
            let h_part = self.h_msm(key, resident, h, h_mem, clock);
            let side = side
                .join()
                .unwrap_or_else(|_| Err(self.err("the thread enqueueing the split MSMs panicked")));
            (h_part, side)
        });
        let ((g1, tickets, g2), (side_mem, g2_mem)) = side_part?;
        let (h, h_mem) = h_part?;
        let sums = MsmSums { h, g1, tickets, g2 };
        Ok((sums, (h_mem, side_mem, g2_mem)))
    }

    /// H's MSM on the main MSM stream (none for a one-point domain).
    #[allow(clippy::type_complexity)]
    fn h_msm(
        &self,
        key: &ProvingKey,
        resident: Option<&ResidentKey>,
        h: Option<&DeviceBuffer<Fr>>,
        mem: BatchMemory<G1>,
        clock: &mut StageClock,
    ) -> Result<(Option<(MsmResults<G1>, Ticket)>, BatchMemory<G1>), ProveError> {
        let Some(h) = h else { return Ok((None, mem)) };
        let mut batch = self.msm.batch_in(mem);
        let bases = source::<G1>(resident.map(|k| &k.h), &key.h);
        let n = bases.len();
        let t = batch.dense(bases, h, n).map_err(msm_err("h"))?;
        clock
            .mark("msm_h", self.msm.stream())
            .map_err(|e| self.err(e))?;
        let (results, mem) = batch.finish_keeping().map_err(msm_err("h"))?;
        Ok((Some((results, t)), mem))
    }

    /// The split MSMs of the witness queries on the side stream, on a clock of their own.
    #[allow(clippy::type_complexity)]
    fn witness_msms(
        &self,
        key: &ProvingKey,
        resident: Option<&ResidentKey>,
        (split, queries): &(DeviceSplit, [DeviceQuery; 3]),
        (g1_mem, g2_mem): (BatchMemory<G1>, Option<BatchMemory<G2>>),
        lane: &mut Option<StageClock>,
    ) -> Result<(WitnessSums, (BatchMemory<G1>, Option<BatchMemory<G2>>)), ProveError> {
        let staged = |q: WitnessQuery| match q {
            WitnessQuery::L => &queries[0],
            WitnessQuery::A => &queries[1],
            WitnessQuery::B1 | WitnessQuery::B2 => &queries[2],
        };
        let s = self.side.stream();
        let clock = lane.insert(StageClock::start(&self.dev.ctx, s).map_err(|e| self.err(e))?);
        let mut g1 = self.side.batch_in(g1_mem);
        let mut tickets = Vec::with_capacity(3);
        for q in G1Query::ALL {
            let name = q.query().name();
            let bases = source::<G1>(resident.map(|k| k.g1(q)), key.g1_query(q));
            let t = g1
                .split(bases, split, staged(q.query()))
                .map_err(msm_err(name))?;
            tickets.push(t);
            clock
                .mark(stage_name(q.query()), s)
                .map_err(|e| self.err(e))?;
        }
        let g2 = match g2_mem {
            Some(mem) => {
                let q = WitnessQuery::B2;
                let mut batch = self.side.batch_in(mem);
                let bases = source::<G2>(resident.and_then(|k| k.b_g2.as_ref()), &key.b_g2);
                let t = batch
                    .split(bases, split, staged(q))
                    .map_err(msm_err(q.name()))?;
                clock.mark(stage_name(q), s).map_err(|e| self.err(e))?;
                Some((batch, t))
            }
            None => None,
        };
        let (g1, g1_mem) = g1.finish_keeping().map_err(msm_err("l, a, b_g1"))?;
        let (g2, g2_mem) = match g2 {
            Some((batch, t)) => {
                let (r, mem) = batch.finish_keeping().map_err(msm_err("b_g2"))?;
                (Some((r, t)), Some(mem))
            }
            None => (None, None),
        };
        Ok(((g1, tickets, g2), (g1_mem, g2_mem)))
    }
}

/// The batch memories of a job: H's, the G1 split MSMs', B2's.
pub(super) type Batches = (BatchMemory<G1>, BatchMemory<G1>, Option<BatchMemory<G2>>);

/// The witness queries' sums in pinned memory: G1's batch with L, A, B1's tickets, and B2's.
type WitnessSums = (
    MsmResults<G1>,
    Vec<Ticket>,
    Option<(MsmResults<G2>, Ticket)>,
);

/// An MSM error of `query`.
fn msm_err(query: &'static str) -> impl Fn(zkpipe_msm::CudaError) -> ProveError {
    move |e| ProveError::Msm {
        query,
        source: zkpipe_msm::MsmError::device(e),
    }
}

impl MsmSums {
    /// The sums, on the host.
    pub(super) fn combine(self) -> Result<(G1Parts, Option<G2Projective>), zkpipe_msm::CudaError> {
        let h = match &self.h {
            Some((r, t)) => r.sum(*t)?,
            None => G1Projective::identity(),
        };
        let mut sums = [G1Projective::identity(); 3];
        for (sum, t) in sums.iter_mut().zip(&self.tickets) {
            *sum = self.g1.sum(*t)?;
        }
        let parts = G1Parts::new(h, sums);
        let b2 = match &self.g2 {
            Some((r, t)) => Some(r.sum(*t)?),
            None => None,
        };
        Ok((parts, b2))
    }
}

/// Bases on the device when the key is resident, else streamed from the host.
fn source<'a, C: GpuCurve>(
    resident: Option<&'a DeviceBases<C>>,
    host: &'a Bases<C::Affine>,
) -> BaseSource<'a, C> {
    match resident {
        Some(r) => BaseSource::Resident(r),
        None => BaseSource::host(host),
    }
}

fn stage_name(q: WitnessQuery) -> &'static str {
    match q {
        WitnessQuery::L => "msm_l",
        WitnessQuery::A => "msm_a",
        WitnessQuery::B1 => "msm_b_g1",
        WitnessQuery::B2 => "msm_b_g2",
    }
}
