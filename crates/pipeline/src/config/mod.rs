//! How the engine runs: [`Config`] and the choices it names, read from TOML by [`file`].

use crate::ProveError;

pub(crate) mod file;

/// Where the stages run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The GPUs if the driver finds any, else the CPU (with a log line saying so). Default.
    #[default]
    Auto,
    /// Every stage on the CPU.
    Cpu,
    /// The GPUs; no device is an error at start.
    Gpu,
}

/// Where the G2 MSM runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum G2Placement {
    /// On the host's cores, overlapping the next job's GPU work. Default.
    #[default]
    Cpu,
    /// On the GPU, inside the job's lock.
    Gpu,
}

/// Which of a streamed key's points of the witness queries (L, A, B) a job copies to the
/// device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamedPoints {
    /// Every point of each query, in whole chunks straight from the key's memory. Default.
    #[default]
    All,
    /// Only the points of the variables whose value is not zero (the others' scalar is 0
    /// and adds nothing), gathered chunk by chunk on the host into the device's pinned
    /// staging memory ([`Config::pinned_per_device`]) and copied from there.
    Nonzero,
}

/// How the engine runs. [`Config::from_file`] reads one from TOML: each field by its name.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// Where the stages run.
    pub backend: Backend,
    /// Device ordinals (`None`: all); each at most once. `zkpipe_cuda::select_devices` turns
    /// UUIDs and PCI bus ids into ordinals.
    pub devices: Option<Vec<usize>>,
    /// Workers sharing each device. Default 2.
    pub workers_per_device: usize,
    /// Workers on the CPU backend. Default 1 (each uses all cores through rayon).
    pub cpu_workers: usize,
    /// Device memory left out of each device's VRAM budget, for what the driver allocates
    /// beside the budget's grants (taken off the cap too). Default 1 GiB; never less than the
    /// MSM kernels' local memory (which the driver sets aside at their first launch: the
    /// most local memory a thread of one of them uses, for every thread the device holds)
    /// plus 512 MiB, except against a cap below four times that, which stands for a card too
    /// small for the kernels: such a cap bounds the grants less this margin alone.
    #[serde(deserialize_with = "crate::config::file::de_bytes")]
    pub vram_margin: usize,
    /// The device memory to behave as if the card had no more (a 16 GiB card on a larger
    /// one): the budget is the lesser of this and the free memory, less the margin.
    #[serde(deserialize_with = "crate::config::file::de_opt_bytes")]
    pub vram_cap: Option<usize>,
    /// Pinned host memory per device for staging uploads. Default 1 GiB.
    #[serde(deserialize_with = "crate::config::file::de_bytes")]
    pub pinned_per_device: usize,
    /// Jobs waiting for a worker, in each of the queue's two lanes (routine and urgent).
    /// Default 4.
    pub queue_capacity: usize,
    /// Jobs between the G1 and the G2 stage. Default 2.
    pub g2_capacity: usize,
    /// Threads of the G2 stage. Default 1.
    pub g2_threads: usize,
    /// Where the G2 MSM runs.
    pub g2: G2Placement,
    /// Which points of the witness queries a job whose key is not resident copies to the
    /// device.
    pub streamed_points: StreamedPoints,
    /// Page-locked host memory the engine lends for witnesses' a, b, c and aux values
    /// ([`crate::Engine::lend_witness`], [`crate::Engine::lend_evaluations`]), allocated as first needed and
    /// reused. Each vector lent takes 32 bytes per point of the key's domain: a 2^27
    /// partition's a, b and c take 12 GiB, its aux 4 GiB more; two or three such sets keep two
    /// workers busy. Default 0: none lent.
    #[serde(deserialize_with = "crate::config::file::de_bytes")]
    pub pinned_witness: usize,
    /// Keep a proving key's points on the device across jobs when the budget allows.
    pub keep_key_resident: bool,
    /// Copies of precomputed multiples kept with a resident key's H points
    /// ([`zkpipe_msm::Multiples`]: copy j holds 2^(c·j)·P): H's MSM then sums `copies`
    /// windows in one set of buckets, at `copies` times H's device memory. Where the key
    /// with them would give jobs a smaller plan than without (shorter MSM chunks, fewer jobs
    /// side by side), which costs more than they save, the engine keeps half as many, down
    /// to none, and logs it. 0 and 1: none. Default 1.
    pub key_multiples: usize,
    /// Page-lock a proving key's points in host memory when its first job is submitted to
    /// a GPU engine ([`crate::ProvingKey::pin`]): uploads of them are then DMA at full speed.
    /// Default true.
    pub pin_key: bool,
    /// What becomes of the jobs of a device quarantined after a fault that leaves it
    /// unusable ([`crate::Engine::quarantined`]). Default: they fail.
    pub on_device_failure: OnDeviceFailure,
    /// The check of every proof before it is returned. Default: [`ProofCheck::Pairing`].
    pub proof_check: ProofCheck,
}

/// What the engine checks of each proof it made before returning it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProofCheck {
    /// A, B and C on their curves and in the subgroup, and the pairing equation against the
    /// job's verifying key and public inputs ([`crate::check`]); a proof that fails is
    /// [`ProveError::ProofRejected`]. Default.
    #[default]
    Pairing,
    /// None: for keys under which no proof can verify (random test keys), and benchmarks of
    /// the engine without its check.
    Off,
}

/// `with_<field>(value)`: the configuration with one field set, for building a `Config` from
/// [`Config::default`] outside this crate (`Config` is `#[non_exhaustive]`).
macro_rules! config_setters {
    ($($setter:ident => $field:ident: $ty:ty),* $(,)?) => {
        impl Config {
            $(
                #[doc = concat!("This configuration with [`Config::", stringify!($field), "`] set.")]
                #[must_use]
                pub fn $setter(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

config_setters! {
    with_backend => backend: Backend,
    with_devices => devices: Option<Vec<usize>>,
    with_workers_per_device => workers_per_device: usize,
    with_cpu_workers => cpu_workers: usize,
    with_vram_margin => vram_margin: usize,
    with_vram_cap => vram_cap: Option<usize>,
    with_pinned_per_device => pinned_per_device: usize,
    with_queue_capacity => queue_capacity: usize,
    with_g2_capacity => g2_capacity: usize,
    with_g2_threads => g2_threads: usize,
    with_g2 => g2: G2Placement,
    with_streamed_points => streamed_points: StreamedPoints,
    with_pinned_witness => pinned_witness: usize,
    with_keep_key_resident => keep_key_resident: bool,
    with_key_multiples => key_multiples: usize,
    with_pin_key => pin_key: bool,
    with_on_device_failure => on_device_failure: OnDeviceFailure,
    with_proof_check => proof_check: ProofCheck,
}

/// What becomes of the jobs of a quarantined device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDeviceFailure {
    /// They fail with [`ProveError::DeviceQuarantined`].
    #[default]
    Fail,
    /// They run on the CPU.
    Cpu,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            backend: Backend::Auto,
            devices: None,
            workers_per_device: 2,
            cpu_workers: 1,
            vram_margin: 1 << 30,
            vram_cap: None,
            pinned_per_device: 1 << 30,
            queue_capacity: 4,
            g2_capacity: 2,
            g2_threads: 1,
            g2: G2Placement::Cpu,
            streamed_points: StreamedPoints::All,
            pinned_witness: 0,
            keep_key_resident: true,
            key_multiples: 1,
            pin_key: true,
            on_device_failure: OnDeviceFailure::Fail,
            proof_check: ProofCheck::Pairing,
        }
    }
}

/// The most a count of [`Config`] may be: channels and thread pools are allocated up front, so a
/// huge count would abort the process instead of starting the engine.
pub const CONFIG_MAX: [(&str, usize); 6] = [
    ("queue_capacity", 1 << 16),
    ("g2_capacity", 1 << 16),
    ("workers_per_device", 64),
    ("cpu_workers", 1024),
    ("g2_threads", 1024),
    ("key_multiples", 16),
];

impl Config {
    /// Checks the counts against [`CONFIG_MAX`]: an error names the field, its value and the
    /// most it may be.
    pub fn check(&self) -> Result<(), ProveError> {
        let values = [
            self.queue_capacity,
            self.g2_capacity,
            self.workers_per_device,
            self.cpu_workers,
            self.g2_threads,
            self.key_multiples,
        ];
        for ((field, max), value) in CONFIG_MAX.into_iter().zip(values) {
            if value > max {
                return Err(ProveError::Config { field, value, max });
            }
        }
        Ok(())
    }
}
