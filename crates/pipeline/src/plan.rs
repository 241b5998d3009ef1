//! The job plan: how a job uses a device, chosen at admission from the VRAM budget. A pure
//! function of the budget, what the device holds for good (a resident key, every worker's NTT
//! tables) and the job's sizes, so that it is tested without a GPU.
//!
//! A job uses the H step's vectors (a, b, c staged before the lock, and a scratch vector), the
//! MSM batches' memory, and the split witness. Plans, fastest first:
//! - kept: every worker keeps its vectors and batch memory from job to job (granted once), so
//!   that no job allocates or frees device memory; a job's grant covers its split witness;
//! - per job: the job allocates them under its grant and frees them before the lock is let go,
//!   two jobs side by side if they fit, else one at a time.
//!
//! Within each, the H step in four vectors before three (c copied in from pinned host
//! memory after a·b is interpolated), and MSMs in chunks as large as fit (a chunk bounds a
//! Pippenger's workspace, and the point buffers when bases are streamed).

/// Bytes of one field element on the device.
const FR: usize = 32;

/// The smallest MSM chunk a plan uses (points).
pub(crate) const MIN_CHUNK: usize = 1 << 10;

/// What a device holds besides jobs, and its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceLoad {
    /// The budget's capacity.
    pub capacity: usize,
    /// Bytes held resident: the key's (0 when bases are streamed) and a recording's.
    pub resident_key: usize,
    /// NTT table bytes of one worker for the job's domain; every worker may keep its own.
    pub tables: usize,
    /// Workers sharing the device.
    pub workers: usize,
}

impl DeviceLoad {
    /// Bytes that jobs can have, once everything held for good is counted.
    pub fn for_jobs(&self) -> usize {
        self.capacity
            .saturating_sub(self.resident_key)
            .saturating_sub(self.tables.saturating_mul(self.workers))
    }
}

/// How the H step uses the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HStep {
    /// a, b, c and a scratch vector.
    Four,
    /// a, b and a scratch vector; c is copied into b's vector from pinned memory later.
    Three,
}

impl HStep {
    fn vectors(self) -> usize {
        match self {
            HStep::Four => 4,
            HStep::Three => 3,
        }
    }
}

/// A job's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobShape {
    /// Domain size.
    pub n: usize,
    /// Device bytes of the split witness (tail and query bitmaps) and, for a recorded job,
    /// what its evaluation reads besides (z's lookup, a streamed recording's room).
    pub split: usize,
    /// The most points one MSM of the job sums (a chunk larger than this is never needed).
    pub largest_msm: usize,
}

/// A chosen plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobPlan {
    pub h_step: HStep,
    /// Points per MSM chunk.
    pub chunk: usize,
    /// Device bytes each worker keeps from job to job (0: the job allocates its memory).
    pub kept: usize,
    /// The job's grant: its most device bytes besides what its worker keeps.
    pub bytes: usize,
    /// Whether two such jobs fit side by side.
    pub side_by_side: bool,
}

impl JobPlan {
    /// Whether a job runs as fast under this plan as under `other`: the same H step and
    /// chunk, side by side alike, memory kept alike (what the bytes differ in costs nothing).
    pub fn as_fast_as(&self, other: &JobPlan) -> bool {
        (self.h_step, self.chunk, self.side_by_side, self.kept > 0)
            == (
                other.h_step,
                other.chunk,
                other.side_by_side,
                other.kept > 0,
            )
    }
}

/// No plan fits: the bytes of the smallest one and what jobs can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoPlan {
    pub needed: usize,
    pub available: usize,
}

/// The most device bytes of a job under (h_step, chunk) that allocates its own memory,
/// `msm_bytes(chunk)` being its MSM batches' bytes: the H step's vectors, then h (in a's
/// vector) beside the batches.
pub(crate) fn job_bytes(
    shape: &JobShape,
    h_step: HStep,
    chunk: usize,
    msm_bytes: &dyn Fn(usize) -> usize,
) -> usize {
    let vectors = h_step.vectors() * shape.n * FR;
    let msms = shape.n * FR + msm_bytes(chunk);
    vectors.max(msms) + shape.split
}

/// The device bytes a worker keeps under (h_step, chunk): the H step's vectors and the MSM
/// batches' memory, both at once.
pub(crate) fn kept_bytes(
    shape: &JobShape,
    h_step: HStep,
    chunk: usize,
    msm_bytes: &dyn Fn(usize) -> usize,
) -> usize {
    h_step.vectors() * shape.n * FR + msm_bytes(chunk)
}

/// Chunk sizes to try, largest first: powers of two from the largest MSM down to MIN_CHUNK.
fn chunks(shape: &JobShape) -> Vec<usize> {
    let top = shape.largest_msm.max(MIN_CHUNK).next_power_of_two();
    std::iter::successors(Some(top), |&c| (c > MIN_CHUNK).then_some(c / 2)).collect()
}

/// The fastest plan that fits: memory kept by every worker if it fits for all of them beside
/// their jobs' split witnesses; else per job, two side by side if any plan allows, else one;
/// the H step in four vectors before three; the largest chunk. None fits: the smallest
/// per-job plan's bytes.
pub(crate) fn choose(
    load: &DeviceLoad,
    shape: &JobShape,
    msm_bytes: &dyn Fn(usize) -> usize,
) -> Result<JobPlan, NoPlan> {
    let available = load.for_jobs();
    let plans: Vec<(HStep, usize)> = [HStep::Four, HStep::Three]
        .into_iter()
        .flat_map(|h| chunks(shape).into_iter().map(move |c| (h, c)))
        .collect();
    let workers = load.workers.max(1);
    let kept = plans.iter().find_map(|&(h_step, chunk)| {
        let kept = kept_bytes(shape, h_step, chunk, msm_bytes);
        let all = kept.saturating_add(shape.split).saturating_mul(workers);
        (all <= available).then_some(JobPlan {
            h_step,
            chunk,
            kept,
            bytes: shape.split,
            side_by_side: true,
        })
    });
    if let Some(p) = kept {
        return Ok(p);
    }
    let with_bytes: Vec<(HStep, usize, usize)> = plans
        .iter()
        .map(|&(h, c)| (h, c, job_bytes(shape, h, c, msm_bytes)))
        .collect();
    let pick = |fits: &dyn Fn(usize) -> bool| {
        with_bytes
            .iter()
            .find(|(_, _, b)| fits(*b))
            .map(|&(h_step, chunk, bytes)| JobPlan {
                h_step,
                chunk,
                kept: 0,
                bytes,
                side_by_side: bytes.saturating_mul(2) <= available,
            })
    };
    pick(&|b| b.saturating_mul(2) <= available)
        .or_else(|| pick(&|b| b <= available))
        .ok_or_else(|| NoPlan {
            needed: with_bytes.iter().map(|p| p.2).min().unwrap_or(0),
            available,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A Pippenger's bytes grow with its chunk, as the MSM crate's do.
    fn msm(chunk: usize) -> usize {
        chunk * 300 + (64 << 20)
    }

    const GIB: usize = 1 << 30;

    #[test]
    fn a_filecoin_partition_fits_a_16_gib_card_with_three_vectors() {
        let shape = JobShape {
            n: 1 << 27,
            split: 600 << 20,
            largest_msm: 1 << 27,
        };
        let load = DeviceLoad {
            capacity: 15 * GIB,
            resident_key: 0,
            tables: 8 << 20,
            workers: 2,
        };
        let p = choose(&load, &shape, &msm).unwrap();
        assert_eq!(p.h_step, HStep::Three);
        assert!(p.bytes <= load.for_jobs());
        assert!(!p.side_by_side);
        assert_eq!(
            p.kept, 0,
            "two workers cannot both keep 12 GiB on a 16 GiB card"
        );
        // With 139 GiB, four vectors kept by each worker.
        let big = DeviceLoad {
            capacity: 138 * GIB,
            resident_key: 43 * GIB,
            ..load
        };
        let p = choose(&big, &shape, &msm).unwrap();
        assert_eq!(p.h_step, HStep::Four);
        assert!(p.kept > 0 && p.side_by_side);
        assert!(2 * (p.kept + p.bytes) <= big.for_jobs());
    }

    #[test]
    fn a_job_that_never_fits_is_refused_with_the_smallest_plan() {
        let shape = JobShape {
            n: 1 << 27,
            split: 0,
            largest_msm: 1 << 27,
        };
        let load = DeviceLoad {
            capacity: 8 * GIB,
            resident_key: 0,
            tables: 0,
            workers: 1,
        };
        let e = choose(&load, &shape, &msm).unwrap_err();
        assert_eq!(e.available, 8 * GIB);
        assert_eq!(e.needed, 3 * (1 << 27) * FR);
    }

    proptest! {
        /// Admission never waits forever: a chosen plan always fits beside everything held for
        /// good, so once other jobs finish an equal job is admitted again; a refused job has no
        /// plan within the budget.
        #[test]
        fn a_chosen_plan_fits_beside_what_is_held(
            log_n in 10u32..28,
            split in 0usize..(1 << 30),
            capacity in (1usize << 28)..(200usize << 30),
            key in 0usize..(64usize << 30),
            tables in 0usize..(1 << 30),
            workers in 1usize..4,
        ) {
            let n = 1usize << log_n;
            let shape = JobShape { n, split, largest_msm: n };
            let load = DeviceLoad { capacity, resident_key: key, tables, workers };
            match choose(&load, &shape, &msm) {
                Ok(p) if p.kept > 0 => {
                    // Every worker keeps its memory and holds a job's grant beside it.
                    prop_assert!(key + workers * (tables + p.kept + p.bytes) <= capacity);
                    prop_assert_eq!(p.kept, kept_bytes(&shape, p.h_step, p.chunk, &msm));
                    prop_assert!(p.chunk >= MIN_CHUNK);
                }
                Ok(p) => {
                    prop_assert!(key + tables * workers + p.bytes <= capacity);
                    prop_assert_eq!(p.bytes, job_bytes(&shape, p.h_step, p.chunk, &msm));
                    prop_assert!(p.chunk >= MIN_CHUNK);
                }
                Err(e) => {
                    prop_assert!(e.needed > e.available);
                    prop_assert_eq!(e.available, load.for_jobs());
                }
            }
        }
    }
}
