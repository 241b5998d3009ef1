//! The MSMs of a job on the GPU worker: H on one stream after the H step, the witness queries'
//! split MSMs on another beside it (from the H step's start when the job's memory is kept),
//! each stream's enqueued by its own thread in the job's batch memory, waited for once and
//! summed on the host after the GPU lock is let go.

use std::time::Duration;

use blstrs::{G1Projective, G2Projective};
use group::Group;
use zkpipe_cuda::{CopyLog, DeviceBuffer, StageClock, Timing};
use zkpipe_field::Fr;
use zkpipe_msm::{
    BaseSource, Bases, BatchMemory, CudaMsm, DeviceBases, DeviceQuery, DeviceSplit, Gathered,
    GpuCurve, MsmBatch, MsmResults, SplitQuery, Ticket, G1, G2,
};

use super::GpuWorker;
use crate::device::memory::{Batches, ResidentKey};
use crate::prover::{G1Parts, G1Query, WitnessQuery};
use crate::stats::Stage;
use crate::{DeviceFault, ProveError, ProvingKey};

/// The split witness on the device: its tail and the queries' bitmaps.
pub(super) struct StagedWitness {
    pub split: DeviceSplit,
    /// Bitmaps of L, A and B (B1 and B2 share B's): of the variables whose value is not
    /// zero when `whole` is there.
    pub queries: [DeviceQuery; 3],
    /// The whole queries, by which the key's points are numbered, when only the points of
    /// nonzero values are streamed ([`crate::StreamedPoints::Nonzero`]).
    pub whole: Option<[SplitQuery; 3]>,
}

impl StagedWitness {
    /// The bitmaps `q` sums over.
    pub fn query(&self, q: WitnessQuery) -> &DeviceQuery {
        &self.queries[Self::slot(q)]
    }

    /// The whole query `q`'s points are numbered by, when only nonzero values' are streamed.
    fn whole(&self, q: WitnessQuery) -> Option<&SplitQuery> {
        self.whole.as_ref().map(|w| &w[Self::slot(q)])
    }

    fn slot(q: WitnessQuery) -> usize {
        match q {
            WitnessQuery::L => 0,
            WitnessQuery::A => 1,
            WitnessQuery::B1 | WitnessQuery::B2 => 2,
        }
    }
}

/// One MSM's results in pinned memory and its ticket among them.
struct Pending<C: GpuCurve> {
    results: MsmResults<C>,
    ticket: Ticket,
}

/// The witness queries' G1 sums in pinned memory: the batch with L, A, B1's tickets.
struct WitnessSums {
    g1: MsmResults<G1>,
    tickets: Vec<Ticket>,
}

/// The side stream's sums (L, A, B1, and B2 where it went there), the batch memory they were
/// made in and its bases' copies.
struct SideDone {
    sums: WitnessSums,
    g1_mem: BatchMemory<G1>,
    b2: Option<B2Done>,
    copies: CopyLog,
    /// Host time spent gathering the points of nonzero values.
    gathering: Duration,
}

/// H's sum (none for a one-point domain) and B2's where it went on H's stream, the batch
/// memory they were made in and their bases' copies.
struct MainDone {
    h: Option<Pending<G1>>,
    mem: BatchMemory<G1>,
    b2: Option<B2Done>,
    copies: CopyLog,
    gathering: Duration,
}

/// B2's sum (G2) waited for, with its batch memory.
struct B2Done {
    sum: Pending<G2>,
    mem: BatchMemory<G2>,
}

/// When the side stream's MSMs start, which decides where B2's goes: the two streams' chains
/// are to end together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SideStart {
    /// Beside the H step (the job's memory was kept, so the side's batches are there before
    /// the step): L, A, B1 and B2 on the side are about as long as the H step and H's MSM.
    BesideHStep,
    /// Once the H step is done (memory per job: the side's batches are made from the step's
    /// vectors): B2 goes after H's MSM, which is shorter than L, A and B1.
    AfterHStep,
}

/// The MSMs of a job, enqueued and waited for; summed after the lock is let go.
pub(super) struct MsmSums {
    /// H's MSM (none for a one-point domain, whose h is empty).
    h: Option<Pending<G1>>,
    witness: WitnessSums,
    /// B2's sum when G2 runs on the GPU.
    b2: Option<Pending<G2>>,
    /// The copies of streamed key points, timed (none with a resident key).
    pub bases_copies: CopyLog,
    /// Host time spent gathering the points of nonzero values before their copies.
    pub gathering: Duration,
}

/// What the MSMs read besides h: the key (on the device when resident) and the staged
/// witness.
pub(super) struct MsmInputs<'a> {
    pub key: &'a ProvingKey,
    pub resident: Option<&'a ResidentKey>,
    pub witness: &'a StagedWitness,
}

/// The stage clocks the MSMs mark: H's stream's, and the side stream's, started here.
pub(super) struct MsmClocks<'c> {
    pub h: &'c mut StageClock<Stage>,
    pub side: &'c mut Option<StageClock<Stage>>,
}

impl GpuWorker {
    /// The MSMs: H's on one stream after `h_step` (which gives h, once its step is enqueued or
    /// done, and marks its clock), and L, A, B1 on another, started at once by a thread of their
    /// own; B2 (when G2 runs on the GPU) after H's or after B1 as `start` says. Each stream's
    /// MSMs are enqueued back to back (enqueueing streamed bases waits for their copies) in the
    /// job's batch memory, marked on the stream's clock, and waited for once. The batch memory
    /// comes back with the sums.
    pub(super) fn msms<'h>(
        &self,
        inputs: &MsmInputs<'_>,
        mem: Batches,
        clocks: MsmClocks<'_>,
        start: SideStart,
        h_step: impl FnOnce(&mut StageClock<Stage>) -> Result<Option<&'h DeviceBuffer<Fr>>, ProveError>,
    ) -> Result<(MsmSums, Batches), ProveError> {
        let Batches { h, side, g2 } = mem;
        let MsmClocks {
            h: h_clock,
            side: side_clock,
        } = clocks;
        let (side_g2, main_g2) = match start {
            SideStart::BesideHStep => (g2, None),
            SideStart::AfterHStep => (None, g2),
        };
        let (main_part, side_part) = std::thread::scope(|sc| {
            let side = sc.spawn(|| self.witness_msms(inputs, side, side_g2, side_clock));
            let main = match h_step(&mut *h_clock) {
                Ok(hv) => self.main_msms(inputs, hv, h, main_g2, h_clock),
                Err(e) => Err(e),
            };
            let side = side.join().unwrap_or_else(|_| {
                let what = "the split MSMs";
                Err(self.err(DeviceFault::Panicked { what }))
            });
            (main, side)
        });
        let side = side_part?;
        let main = main_part?;
        let mut bases_copies = main.copies;
        bases_copies.append(side.copies);
        let (b2, g2) = match main.b2.or(side.b2) {
            Some(B2Done { sum, mem }) => (Some(sum), Some(mem)),
            None => (None, None),
        };
        let sums = MsmSums {
            h: main.h,
            witness: side.sums,
            b2,
            bases_copies,
            gathering: main.gathering + side.gathering,
        };
        let mem = Batches {
            h: main.mem,
            side: side.g1_mem,
            g2,
        };
        Ok((sums, mem))
    }

    /// H's MSM on its stream (none for a one-point domain, whose h is empty), then B2's when
    /// `g2` is given.
    fn main_msms(
        &self,
        inputs: &MsmInputs<'_>,
        h: Option<&DeviceBuffer<Fr>>,
        mem: BatchMemory<G1>,
        g2: Option<BatchMemory<G2>>,
        clock: &mut StageClock<Stage>,
    ) -> Result<MainDone, ProveError> {
        let mut batch = self.msm.batch_in(mem);
        batch.time_copies();
        let ticket = match h {
            Some(h) => {
                let bases = source::<G1>(inputs.resident.map(|k| &k.h), &inputs.key.h);
                let n = bases.len();
                let ticket = batch.dense(bases, h, n).map_err(msm_err("h"))?;
                clock
                    .mark(Stage::MsmH, self.msm.stream())
                    .map_err(|e| self.err(e))?;
                Some(ticket)
            }
            None => None,
        };
        let b2 = g2
            .map(|mem| self.b2_msm(&self.msm, inputs, mem, clock))
            .transpose()?;
        let mut copies = batch.take_copies();
        let (results, mem) = batch.finish_keeping().map_err(msm_err("h"))?;
        let mut gathering = Duration::ZERO;
        let b2 = b2
            .map(|b| finish_b2(b, &mut copies, &mut gathering))
            .transpose()?;
        Ok(MainDone {
            h: ticket.map(|ticket| Pending { results, ticket }),
            mem,
            b2,
            copies,
            gathering,
        })
    }

    /// The split MSMs of the witness queries on the side stream, on a clock of their own:
    /// L, A, B1, then B2's when `g2_mem` is given.
    fn witness_msms(
        &self,
        inputs: &MsmInputs<'_>,
        g1_mem: BatchMemory<G1>,
        g2_mem: Option<BatchMemory<G2>>,
        lane: &mut Option<StageClock<Stage>>,
    ) -> Result<SideDone, ProveError> {
        let MsmInputs {
            key,
            resident,
            witness,
        } = *inputs;
        let s = self.side.stream();
        let clock = lane
            .insert(StageClock::start(&self.dev.ctx, s, Timing::Enabled).map_err(|e| self.err(e))?);
        let mut g1 = self.side.batch_in(g1_mem);
        g1.time_copies();
        let mut tickets = Vec::with_capacity(3);
        for q in G1Query::ALL {
            let name = q.query().name();
            let host = key.g1_query(q);
            let bases = match self.gathered::<G1>(witness, q.query(), host) {
                Some(g) => g.map_err(msm_err(name))?,
                None => source::<G1>(resident.map(|k| k.g1(q)), host),
            };
            let t = g1
                .split(bases, &witness.split, witness.query(q.query()))
                .map_err(msm_err(name))?;
            tickets.push(t);
            clock
                .mark(stage_of(q.query()), s)
                .map_err(|e| self.err(e))?;
        }
        let b2 = g2_mem
            .map(|mem| self.b2_msm(&self.side, inputs, mem, clock))
            .transpose()?;
        let mut copies = g1.take_copies();
        let mut gathering = g1.take_gathering();
        let (g1, g1_mem) = g1.finish_keeping().map_err(msm_err("l, a, b_g1"))?;
        let b2 = b2
            .map(|b| finish_b2(b, &mut copies, &mut gathering))
            .transpose()?;
        Ok(SideDone {
            sums: WitnessSums { g1, tickets },
            g1_mem,
            b2,
            copies,
            gathering,
        })
    }

    /// B2's split MSM (G2) enqueued on `on`'s stream in `mem`, marked on `clock`.
    fn b2_msm<'m>(
        &self,
        on: &'m CudaMsm,
        inputs: &MsmInputs<'_>,
        mem: BatchMemory<G2>,
        clock: &mut StageClock<Stage>,
    ) -> Result<(MsmBatch<'m, G2>, Ticket), ProveError> {
        let MsmInputs {
            key,
            resident,
            witness,
        } = *inputs;
        let q = WitnessQuery::B2;
        let mut batch = on.batch_in(mem);
        batch.time_copies();
        let bases = match self.gathered::<G2>(witness, q, &key.b_g2) {
            Some(g) => g.map_err(msm_err(q.name()))?,
            None => source::<G2>(resident.and_then(|k| k.b_g2.as_ref()), &key.b_g2),
        };
        let ticket = batch
            .split(bases, &witness.split, witness.query(q))
            .map_err(msm_err(q.name()))?;
        clock
            .mark(stage_of(q), on.stream())
            .map_err(|e| self.err(e))?;
        Ok((batch, ticket))
    }
}

/// B2's batch waited for; its copies and gathering time added to the stream's.
fn finish_b2(
    (mut batch, ticket): (MsmBatch<'_, G2>, Ticket),
    copies: &mut CopyLog,
    gathering: &mut Duration,
) -> Result<B2Done, ProveError> {
    copies.append(batch.take_copies());
    *gathering += batch.take_gathering();
    let (results, mem) = batch.finish_keeping().map_err(msm_err("b_g2"))?;
    Ok(B2Done {
        sum: Pending { results, ticket },
        mem,
    })
}

impl GpuWorker {
    /// Query `q`'s points `host`, of which only those of nonzero values are to be gathered
    /// and streamed, when the witness was staged for that
    /// ([`crate::StreamedPoints::Nonzero`]).
    fn gathered<'a, C: GpuCurve>(
        &'a self,
        witness: &'a StagedWitness,
        q: WitnessQuery,
        host: &'a Bases<C::Affine>,
    ) -> Option<Result<BaseSource<'a, C>, zkpipe_msm::CudaError>> {
        let whole = witness.whole(q)?;
        let needed = witness.query(q);
        let g = Gathered::new(
            C::view(host.points()),
            whole,
            needed,
            &self.dev.pinned,
            super::POOL_WAIT,
        );
        Some(g.map(BaseSource::Gathered))
    }
}

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
            Some(p) => p.results.sum(p.ticket)?,
            None => G1Projective::identity(),
        };
        let w = &self.witness;
        let mut sums = [G1Projective::identity(); 3];
        for (sum, t) in sums.iter_mut().zip(&w.tickets) {
            *sum = w.g1.sum(*t)?;
        }
        let parts = G1Parts::new(h, sums);
        let b2 = match &self.b2 {
            Some(p) => Some(p.results.sum(p.ticket)?),
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

fn stage_of(q: WitnessQuery) -> Stage {
    match q {
        WitnessQuery::L => Stage::MsmL,
        WitnessQuery::A => Stage::MsmA,
        WitnessQuery::B1 => Stage::MsmBG1,
        WitnessQuery::B2 => Stage::MsmBG2,
    }
}
