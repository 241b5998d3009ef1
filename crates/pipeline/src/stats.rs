//! Counters the engine keeps, readable while it runs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Live counters (shared by the engine's threads).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub submitted: AtomicU64,
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub cancelled: AtomicU64,
    /// Jobs whose proof failed its check (counted in `failed` too).
    pub rejected: AtomicU64,
    /// Jobs workers have taken from the queue (run, cancelled or expired).
    pub taken: AtomicU64,
    /// Jobs a worker of a quarantined device put back for another device.
    pub moved: AtomicU64,
    /// Each stage's device milliseconds, job by job.
    pub stages: StageHistograms,
    pub h_ns: AtomicU64,
    pub g1_ns: AtomicU64,
    pub g2_ns: AtomicU64,
    pub stage_ns: AtomicU64,
    pub lock_ns: AtomicU64,
    pub upload_bytes: AtomicU64,
    pub upload_ns: AtomicU64,
    pub bases_bytes: AtomicU64,
    pub link_busy_ns: AtomicU64,
    pub vram_peak: AtomicUsize,
    pub key_pinned_bytes: AtomicU64,
    pub key_h_copies: AtomicUsize,
    pub resident_uploads: AtomicU64,
    pub resident_evictions: AtomicU64,
    pub h_gpu_ns: AtomicU64,
    pub msm_gpu_ns: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, d: Duration) {
        c.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn add_ms(c: &AtomicU64, ms: f64) {
        c.fetch_add((ms * 1e6) as u64, Ordering::Relaxed);
    }

    pub fn peak(&self, bytes: usize) {
        self.vram_peak.fetch_max(bytes, Ordering::Relaxed);
    }

    pub fn snapshot(&self, budget_high_water: usize) -> EngineStats {
        let ms = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 / 1e6;
        let bytes = self.upload_bytes.load(Ordering::Relaxed);
        let up_ms = ms(&self.upload_ns);
        EngineStats {
            submitted: self.submitted.load(Ordering::Relaxed),
            done: self.done.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            h_ms: ms(&self.h_ns),
            g1_msm_ms: ms(&self.g1_ns),
            g2_msm_ms: ms(&self.g2_ns),
            h_gpu_ms: ms(&self.h_gpu_ns),
            msm_gpu_ms: ms(&self.msm_gpu_ns),
            staging_ms: ms(&self.stage_ns),
            gpu_lock_ms: ms(&self.lock_ns),
            uploaded_bytes: bytes,
            bases_streamed_bytes: self.bases_bytes.load(Ordering::Relaxed),
            link_busy_ms: ms(&self.link_busy_ns),
            upload_gbps: if up_ms > 0.0 {
                bytes as f64 / up_ms / 1e6
            } else {
                0.0
            },
            vram_high_water: self.vram_peak.load(Ordering::Relaxed),
            vram_budget_high_water: budget_high_water,
            pinned_high_water: 0,
            key_pinned_bytes: self.key_pinned_bytes.load(Ordering::Relaxed),
            key_h_copies: self.key_h_copies.load(Ordering::Relaxed),
            resident_uploads: self.resident_uploads.load(Ordering::Relaxed),
            resident_evictions: self.resident_evictions.load(Ordering::Relaxed),
            quarantined_devices: 0,
            moved_off_quarantined: self.moved.load(Ordering::Relaxed),
            vram_budget_in_use: 0,
            vram_kept: 0,
            pinned_in_use: 0,
        }
    }
}

/// What one job did ([`crate::JobHandle::wait_report`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobReport {
    /// The job's number.
    pub job: u64,
    /// The ordinal of the device the job ran on (None on the CPU).
    pub device: Option<usize>,
    /// How the job used the device (None on the CPU backend).
    pub plan: Option<PlanReport>,
    /// Device milliseconds of each stage, measured with CUDA events: the H step, H's MSM, and
    /// on the second stream beside it L's, A's, B's in G1 (and in G2 when G2 runs on the GPU).
    /// Empty on the CPU backend.
    pub device_ms: Vec<StageTime>,
    /// Device milliseconds from the H step's start to the end of the job's last MSM: the
    /// GPU time of the job (its MSMs run on two streams at once, so the stages overlap and
    /// their sum is more). 0 on the CPU backend.
    pub device_span_ms: f64,
    /// Host milliseconds staging the job's uploads, outside the GPU lock.
    pub staging_ms: f64,
    /// Host milliseconds the job held the GPU lock.
    pub lock_ms: f64,
    /// Host milliseconds of the G2 MSM on the CPU (0 when it ran on the GPU).
    pub g2_cpu_ms: f64,
    /// Bytes of the witness the job staged on the device (a, b and c or what their
    /// evaluation reads, the split witness and the queries' bitmaps; the key's points
    /// streamed during the MSMs are in `link`).
    pub uploaded_bytes: u64,
    /// The key's points the job streamed over the host-to-device link (none on the CPU
    /// backend or with a resident key).
    pub link: LinkReport,
    /// Host milliseconds of the proof's check before it was returned (0 when the engine
    /// checks none: [`crate::Config::proof_check`]).
    pub check_ms: f64,
}

impl JobReport {
    /// The stages' device milliseconds added up (more than [`JobReport::device_span_ms`]
    /// where stages overlap).
    pub fn device_total_ms(&self) -> f64 {
        self.device_ms.iter().fold(0.0, |acc, t| acc + t.ms)
    }

    /// The device milliseconds of `stage` (0 when the job had no such stage).
    pub fn stage_ms(&self, stage: Stage) -> f64 {
        self.device_ms
            .iter()
            .filter(|t| t.stage == stage)
            .fold(0.0, |acc, t| acc + t.ms)
    }
}

/// The key's points a job streamed to the device during its MSMs, against which its device
/// time is judged: at the link's rate, their bytes are a floor under the MSMs' time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkReport {
    /// Bytes of points copied host to device (0 with a resident key).
    pub bases_bytes: u64,
    /// Of those, the bytes of the points whose scalar is not zero (all of H's; of the
    /// witness queries', those of the variables whose value is not 0): what the sums read.
    pub bases_needed_bytes: u64,
    /// Device milliseconds, within the job's span, during which a copy of its points ran
    /// (copies on both MSM streams at once count once).
    pub bases_busy_ms: f64,
    /// Host milliseconds spent gathering the points of nonzero values into pinned memory
    /// before their copies ([`crate::StreamedPoints::Nonzero`]; 0 otherwise).
    pub gather_ms: f64,
}

impl LinkReport {
    /// The share of `span_ms` of device time the link was busy with the job's points.
    pub fn busy_share(&self, span_ms: f64) -> f64 {
        if span_ms > 0.0 {
            self.bases_busy_ms / span_ms
        } else {
            0.0
        }
    }

    /// GB/s while the link was busy with the job's points (None when nothing was timed).
    pub fn busy_gbps(&self) -> Option<f64> {
        (self.bases_busy_ms > 0.0).then(|| self.bases_bytes as f64 / self.bases_busy_ms / 1e6)
    }
}

/// A job's stage on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum Stage {
    /// a, b and c evaluated from the circuit's recording (a recorded job; in the three-vector
    /// H step, c's evaluation counts in the H step).
    Evaluate,
    /// The H polynomial (its NTTs and pointwise steps).
    HStep,
    /// H's MSM.
    MsmH,
    /// L's MSM.
    MsmL,
    /// A's MSM.
    MsmA,
    /// B's MSM in G1.
    #[strum(serialize = "msm_b_g1")]
    MsmBG1,
    /// B's MSM in G2.
    #[strum(serialize = "msm_b_g2")]
    MsmBG2,
}

impl Stage {
    /// The stage's name in logs, metrics and JSON.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One stage's device milliseconds (a span of zkpipe-cuda's stage clock).
pub type StageTime = zkpipe_cuda::Span<Stage>;

/// How a job used its device: the plan admission chose for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanReport {
    /// Device vectors of the H step: 4 (a, b, c and a scratch vector) or 3 (c copied into
    /// b's vector from pinned memory later).
    pub h_vectors: usize,
    /// Points per MSM chunk.
    pub chunk: usize,
    pub bases: KeyPlacement,
    pub memory: JobMemoryUse,
    /// Where a recorded job's matrices were read from; `None` when a, b and c came with the
    /// witness.
    pub matrices: Option<MatricesPlacement>,
}

/// Where a recorded job's matrices were read from ([`crate::Witness::recording`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatricesPlacement {
    /// Resident on the device.
    Resident,
    /// Copied from the host a chunk of rows at a time.
    Streamed,
}

/// Where a job's key points were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlacement {
    /// Resident on the device.
    Resident,
    /// Streamed from the page-locked key in host memory.
    Streamed,
}

/// How a job had its device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobMemoryUse {
    /// Kept by each worker from job to job: `bytes` a worker.
    Kept { bytes: usize },
    /// Allocated by each job, with `jobs_at_once` such jobs fitting side by side.
    PerJob { jobs_at_once: usize },
}

impl std::fmt::Display for PlanReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bases = match self.bases {
            KeyPlacement::Resident => "resident",
            KeyPlacement::Streamed => "streamed from the page-locked key",
        };
        write!(
            f,
            "H step in {} vectors, MSMs in chunks of 2^{} points, bases {bases}",
            self.h_vectors,
            self.chunk.trailing_zeros(),
        )?;
        match self.memory {
            JobMemoryUse::Kept { bytes } => write!(
                f,
                ", memory kept by each worker ({:.2} GiB)",
                bytes as f64 / (1u64 << 30) as f64
            ),
            JobMemoryUse::PerJob { jobs_at_once: 1 } => {
                f.write_str(", memory per job, one job at a time")
            }
            JobMemoryUse::PerJob { jobs_at_once } => {
                write!(f, ", memory per job, {jobs_at_once} jobs side by side")
            }
        }?;
        match self.matrices {
            None => Ok(()),
            Some(MatricesPlacement::Resident) => {
                f.write_str(", a, b, c evaluated from the resident recording")
            }
            Some(MatricesPlacement::Streamed) => {
                f.write_str(", a, b, c evaluated from the recording streamed from the host")
            }
        }
    }
}

/// What the engine has done so far. Times add up over jobs and workers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct EngineStats {
    /// Jobs accepted.
    pub submitted: u64,
    /// Jobs that produced a proof.
    pub done: u64,
    /// Jobs that ended with an error.
    pub failed: u64,
    /// Jobs cancelled before they ran.
    pub cancelled: u64,
    /// Jobs whose proof failed the check before return ([`crate::ProveError::ProofRejected`];
    /// counted in `failed` too).
    pub rejected: u64,
    /// Time in the H step (ms).
    pub h_ms: f64,
    /// Time in the G1 MSMs (ms).
    pub g1_msm_ms: f64,
    /// Time in the G2 MSM on the CPU (ms).
    pub g2_msm_ms: f64,
    /// Device time of the H step, measured with CUDA events (ms; 0 on the CPU backend).
    pub h_gpu_ms: f64,
    /// Device time of a job's MSMs (G1, and B2 when it runs on the GPU; they run on two
    /// streams at once, so this is the span from the H step's end to the last MSM's),
    /// measured with CUDA events (ms; 0 on the CPU backend).
    pub msm_gpu_ms: f64,
    /// Time staging uploads outside the GPU lock (ms).
    pub staging_ms: f64,
    /// Time the GPU lock was held (ms).
    pub gpu_lock_ms: f64,
    /// Bytes of witness staged on the devices for jobs (streamed key points are in
    /// `bases_streamed_bytes`).
    pub uploaded_bytes: u64,
    /// Host-to-device rate of those copies (GB/s).
    pub upload_gbps: f64,
    /// Bytes of key points streamed to the devices during MSMs ([`JobReport::link`]).
    pub bases_streamed_bytes: u64,
    /// Device milliseconds during which copies of those points ran (jobs added up).
    pub link_busy_ms: f64,
    /// The most device memory seen in use by the engine (bytes above what was in use when it
    /// started), measured with cuMemGetInfo while jobs held their buffers.
    pub vram_high_water: usize,
    /// The most bytes the VRAM budgets granted at once (summed over devices).
    pub vram_budget_high_water: usize,
    /// The most pinned staging memory in use at once (summed over devices).
    pub pinned_high_water: usize,
    /// Bytes of proving-key points the engine page-locked in host memory.
    pub key_pinned_bytes: u64,
    /// Copies of H's points on the device in the last job with a resident key: 1 without
    /// precomputed multiples ([`crate::Config::key_multiples`]), 0 when no job had one.
    pub key_h_copies: usize,
    /// Keys and recordings uploaded to stay resident on a device (each once per device while
    /// it stays).
    pub resident_uploads: u64,
    /// Resident keys and recordings given up to leave a job of another key the plan it has
    /// alone (the least recently used first).
    pub resident_evictions: u64,
    /// Devices quarantined after a fault ([`crate::Engine::quarantined`] says which and why).
    pub quarantined_devices: usize,
    /// Jobs that a quarantined device's workers put back in the queue for the other devices
    /// (each such worker hands back one job and stops).
    pub moved_off_quarantined: u64,
    /// Bytes the VRAM budgets grant now (summed over devices): NTT tables, resident keys and
    /// recordings, idle job memory, running jobs.
    pub vram_budget_in_use: usize,
    /// Of `vram_budget_in_use`, the bytes held between jobs: resident keys and recordings, the
    /// workers' NTT tables and the idle job memory each worker keeps for a next job of its
    /// shape.
    pub vram_kept: usize,
    /// Pinned staging and lent witness memory handed out now (summed over devices).
    pub pinned_in_use: usize,
}

/// Upper bounds (ms) of the device-time histograms' buckets.
pub(crate) const BUCKETS_MS: [f64; 12] = [
    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
];

/// One histogram: counts per bucket (cumulative when written), the sum and the count.
#[derive(Debug, Default, Clone)]
pub(crate) struct Histogram {
    pub buckets: [u64; BUCKETS_MS.len()],
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    fn observe(&mut self, ms: f64) {
        if let Some(i) = BUCKETS_MS.iter().position(|&b| ms <= b) {
            self.buckets[i] += 1;
        }
        self.sum += ms;
        self.count += 1;
    }
}

/// Device milliseconds per stage, observed job by job.
#[derive(Debug, Default)]
pub(crate) struct StageHistograms {
    stages: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl StageHistograms {
    /// Adds a job's stages (and its whole device span, as stage `job`).
    pub fn observe(&self, device_ms: &[StageTime], span_ms: f64) {
        let mut s = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        for t in device_ms {
            s.entry(t.stage.name()).or_default().observe(t.ms);
        }
        if span_ms > 0.0 {
            s.entry("job").or_default().observe(span_ms);
        }
    }

    pub fn snapshot(&self) -> BTreeMap<&'static str, Histogram> {
        self.stages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_as_words_and_stages_by_name() {
        let plan = |bases, memory| PlanReport {
            h_vectors: 3,
            chunk: 1 << 23,
            bases,
            memory,
            matrices: None,
        };
        let kept = plan(
            KeyPlacement::Resident,
            JobMemoryUse::Kept { bytes: 3 << 29 },
        );
        assert_eq!(
            kept.to_string(),
            "H step in 3 vectors, MSMs in chunks of 2^23 points, bases resident, memory kept by each worker (1.50 GiB)"
        );
        let alone = plan(
            KeyPlacement::Streamed,
            JobMemoryUse::PerJob { jobs_at_once: 1 },
        );
        assert!(alone.to_string().ends_with(
            "bases streamed from the page-locked key, memory per job, one job at a time"
        ));
        let two = plan(
            KeyPlacement::Streamed,
            JobMemoryUse::PerJob { jobs_at_once: 2 },
        );
        assert!(two.to_string().ends_with("2 jobs side by side"), "{two}");
        let report = JobReport {
            device_ms: vec![
                StageTime {
                    stage: Stage::HStep,
                    ms: 2.0,
                },
                StageTime {
                    stage: Stage::MsmL,
                    ms: 3.0,
                },
                StageTime {
                    stage: Stage::HStep,
                    ms: 0.5,
                },
            ],
            ..JobReport::default()
        };
        assert_eq!(report.stage_ms(Stage::HStep), 2.5);
        assert_eq!(report.stage_ms(Stage::MsmBG2), 0.0);
        assert_eq!(report.device_total_ms(), 5.5);
        assert_eq!(Stage::MsmBG1.to_string(), "msm_b_g1");
    }

    #[test]
    fn a_link_report_gives_its_share_of_the_span_and_its_rate() {
        let link = LinkReport {
            bases_bytes: 11_000_000_000,
            bases_needed_bytes: 6_000_000_000,
            bases_busy_ms: 200.0,
            gather_ms: 0.0,
        };
        assert_eq!(link.busy_share(800.0), 0.25);
        assert_eq!(link.busy_gbps(), Some(55.0));
        let none = LinkReport::default();
        assert_eq!(none.busy_share(0.0), 0.0);
        assert_eq!(none.busy_gbps(), None);
    }

    /// The names logs, metrics and JSON reports have always used.
    #[test]
    fn stage_names_are_the_reports_names() {
        let names = [
            (Stage::Evaluate, "evaluate"),
            (Stage::HStep, "h_step"),
            (Stage::MsmH, "msm_h"),
            (Stage::MsmL, "msm_l"),
            (Stage::MsmA, "msm_a"),
            (Stage::MsmBG1, "msm_b_g1"),
            (Stage::MsmBG2, "msm_b_g2"),
        ];
        for (stage, name) in names {
            assert_eq!(stage.name(), name);
        }
        let queries = [
            (crate::key::WitnessQuery::L, "l"),
            (crate::key::WitnessQuery::A, "a"),
            (crate::key::WitnessQuery::B1, "b_g1"),
            (crate::key::WitnessQuery::B2, "b_g2"),
        ];
        for (query, name) in queries {
            assert_eq!(query.name(), name);
        }
    }
}
