//! Errors of the prover and the engine.

use zkpipe_msm::MsmError;
use zkpipe_ntt::NttError;
use zkpipe_stream::BudgetError;

/// Why a job or a key was refused, or a proof failed. [`ProveError::kind`] is the variant's
/// name (derived with strum).
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum ProveError {
    /// A length that does not match the key (or the other parts of the witness).
    #[error("{what}: expected {expected}, got {got}")]
    Shape {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A number of constraints whose domain is not the key's.
    #[error("{constraints} constraints need a domain of {}, but the key's domain is {domain}", .constraints.next_power_of_two())]
    Constraints { constraints: usize, domain: usize },
    /// A point of the key off the curve or outside the subgroup.
    #[error("proving key, {query} query: {source}")]
    Key {
        query: &'static str,
        source: MsmError,
    },
    /// delta is the identity: proofs under such a key can be forged.
    #[error("proving key: delta is the identity (a subverted key)")]
    DeltaIdentity,
    /// gamma is the identity: proofs under such a key can be forged.
    #[error("verifying key: gamma is the identity (a subverted key)")]
    GammaIdentity,
    /// An encoded proof with a bad point.
    #[error("encoded proof: {part} is not a valid compressed point in the subgroup")]
    BadProof { part: &'static str },
    /// The H step failed.
    #[error("H step: {0}")]
    Ntt(#[from] NttError),
    /// An MSM failed.
    #[error("{query} MSM: {source}")]
    Msm {
        query: &'static str,
        source: MsmError,
    },
    /// The device failed.
    #[error("device {device}: {source}")]
    Device {
        device: usize,
        source: Box<DeviceFault>,
    },
    /// A GPU engine (`Backend::Gpu`) found no CUDA device.
    #[error(
        "no CUDA device found (Backend::Gpu needs one; Backend::Auto runs on the CPU without)"
    )]
    NoDevice,
    /// An engine thread could not be started.
    #[error("an engine thread could not be started: {source}")]
    Thread { source: std::io::Error },
    /// The GPU workers' host thread pool could not be started.
    #[error("the engine's host thread pool could not be started: {source}")]
    HostPool { source: rayon::ThreadPoolBuildError },
    /// A job that the device's VRAM budget can never hold, even in its smallest plan.
    #[error("job needs {needed} bytes of device memory in its smallest plan; device {device} leaves {capacity} bytes of its VRAM budget to jobs (the rest holds a resident key and the workers' NTT tables)")]
    TooLargeForDevice {
        device: usize,
        needed: usize,
        capacity: usize,
    },
    /// Device memory that a job needs is held by what no running job or idle worker will
    /// free (NTT tables of other domain sizes, a resident key).
    #[error("device {device}: the job needs {needed} bytes of device memory, {available} are free, and no running job or idle worker holds more (the rest holds a resident key and NTT tables)")]
    DeviceMemoryHeld {
        device: usize,
        needed: usize,
        available: usize,
    },
    /// The device was quarantined after a fault that left it unusable, and the engine's
    /// [`crate::OnDeviceFailure`] is to fail its jobs.
    #[error(
        "device {device} is quarantined ({reason}); its jobs fail (Config::on_device_failure)"
    )]
    DeviceQuarantined { device: usize, reason: String },
    /// The VRAM budget refused (timeout).
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// Page-locked host memory could not be had (the pool's limit, a timeout, the driver).
    #[error("pinned host memory: {source}")]
    Pinned { source: zkpipe_pinned::Error },
    /// Witness memory asked of a GPU engine that lends no pinned memory.
    #[error("the engine lends no pinned memory for witnesses: set Config::pinned_witness (bytes; the key's domain size times 32 for each of a, b, c and the aux values lent, per witness)")]
    NoWitnessPool,
    /// A configuration count beyond what the engine allocates up front.
    #[error("Config::{field} is {value}; at most {max}")]
    Config {
        field: &'static str,
        value: usize,
        max: usize,
    },
    /// A job submitted after shutdown began.
    #[error("the engine is shut down; job not accepted")]
    ShutDown,
    /// The engine stopped before the job finished (a worker died).
    #[error("job {job} was lost: {reason}")]
    Lost { job: u64, reason: String },
    /// The witness does not satisfy the circuit: a·b - c does not vanish on the domain.
    #[error("the witness does not satisfy the circuit: a·b - c is not divisible by the domain's vanishing polynomial (the H step's top coefficient is not zero); no proof was made")]
    Unsatisfied,
    /// The job's deadline ([`crate::Engine::submit_before`]) passed.
    #[error("the job's deadline passed {what}")]
    DeadlineExceeded { what: &'static str },
    /// A configuration file that does not parse, or names what `Config` has not.
    #[error("engine configuration {path}: {source}")]
    ConfigFile {
        path: String,
        source: Box<toml::de::Error>,
    },
    /// A configuration file that cannot be read.
    #[error("engine configuration {path}: {source}")]
    ConfigRead {
        path: String,
        source: std::io::Error,
    },
    /// The job was cancelled before it ran ([`crate::JobHandle::cancel`], a dropped handle,
    /// or [`crate::Engine::shutdown_now`]).
    #[error("job {job} was cancelled before it ran")]
    Cancelled { job: u64 },
    /// The proof the job made failed the check every proof gets before it is returned
    /// ([`crate::Config::proof_check`]): the bytes are withheld.
    #[error("job {job}: the proof failed its check against the key and the public inputs ({fault}); it was not returned")]
    ProofRejected { job: u64, fault: ProofFault },
    /// A witness of the recorded path whose part is not its recording's (see
    /// [`crate::Witness::recording`]).
    #[error("the witness's {what} is not that of its recording (circuit {circuit})")]
    NotTheRecording { circuit: String, what: &'static str },
    /// a, b and c could not be evaluated from the recording on the host.
    #[error("evaluating a, b and c from the recording: {source}")]
    Evaluation { source: zkpipe_r1cs::RecordingError },
    /// The job queue stayed full for the whole wait of [`crate::Engine::submit_timeout`].
    #[error("the job queue stayed full for {waited_ms} ms; job not accepted")]
    QueueFull { waited_ms: u128 },
}

/// Why a proof the engine made failed its check before it was returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofFault {
    /// A point of the proof off its curve.
    #[error("{part} is not on the curve")]
    NotOnCurve { part: &'static str },
    /// A point of the proof on its curve, outside the prime-order subgroup.
    #[error("{part} is not in the prime-order subgroup")]
    NotInSubgroup { part: &'static str },
    /// The points are sound and the pairing equation does not hold.
    #[error("the pairing check e(A, B) = e(alpha, beta) · e(IC(x), gamma) · e(C, delta) fails")]
    Pairing,
}

impl ProveError {
    /// The variant's name, for counting failures by kind (metrics, soak runs, fault sweeps).
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    pub(crate) fn device(device: usize, e: impl Into<DeviceFault>) -> Self {
        ProveError::Device {
            device,
            source: Box::new(e.into()),
        }
    }

    /// The failed driver call behind the error, if one is.
    pub fn driver_error(&self) -> Option<&zkpipe_cuda::Error> {
        match self {
            ProveError::Device { source, .. } => source.driver_error(),
            ProveError::Ntt(e) => e.driver_error(),
            ProveError::Pinned { source } => source.driver_error(),
            ProveError::Msm { source, .. } | ProveError::Key { source, .. } => {
                source.driver_error()
            }
            _ => None,
        }
    }
}

/// What failed on a device, with the failing layer's own error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceFault {
    /// A driver call.
    #[error(transparent)]
    Driver(zkpipe_cuda::Error),
    /// The MSM.
    #[error(transparent)]
    Msm(zkpipe_msm::CudaError),
    /// The NTT or the H step.
    #[error(transparent)]
    Ntt(NttError),
    /// A copy between host and device.
    #[error(transparent)]
    Stream(zkpipe_stream::Error),
    /// a, b and c evaluated from a recording.
    #[error(transparent)]
    Evaluation(zkpipe_r1cs::RecordingError),
    /// Page-locked host memory.
    #[error(transparent)]
    Pinned(zkpipe_pinned::Error),
    /// A vector meant to be copied from page-locked memory is not page-locked.
    #[error("{what} is not page-locked")]
    NotPageLocked { what: &'static str },
    /// More elements staged than the device buffer holds (a plan's bug, not the input's).
    #[error("staging {elements} elements into a device buffer of {capacity}")]
    StagingOverflow { elements: usize, capacity: usize },
    /// A thread that enqueues work on the device panicked.
    #[error("the thread enqueueing {what} panicked")]
    Panicked { what: &'static str },
}

impl DeviceFault {
    /// The failed driver call behind the fault, if one is.
    pub fn driver_error(&self) -> Option<&zkpipe_cuda::Error> {
        match self {
            DeviceFault::Driver(e) => Some(e),
            DeviceFault::Msm(e) => e.driver_error(),
            DeviceFault::Ntt(e) => e.driver_error(),
            DeviceFault::Stream(e) => e.driver_error(),
            DeviceFault::Pinned(e) => e.driver_error(),
            DeviceFault::Evaluation(zkpipe_r1cs::RecordingError::Device(e)) => Some(e),
            _ => None,
        }
    }

    /// True when the fault left the device's context unusable
    /// ([`zkpipe_cuda::Error::is_sticky`]).
    pub fn is_sticky(&self) -> bool {
        self.driver_error()
            .is_some_and(zkpipe_cuda::Error::is_sticky)
    }
}

impl From<zkpipe_cuda::Error> for DeviceFault {
    fn from(e: zkpipe_cuda::Error) -> Self {
        DeviceFault::Driver(e)
    }
}

impl From<zkpipe_r1cs::RecordingError> for DeviceFault {
    fn from(e: zkpipe_r1cs::RecordingError) -> Self {
        DeviceFault::Evaluation(e)
    }
}

impl From<zkpipe_msm::CudaError> for DeviceFault {
    fn from(e: zkpipe_msm::CudaError) -> Self {
        DeviceFault::Msm(e)
    }
}

impl From<NttError> for DeviceFault {
    fn from(e: NttError) -> Self {
        DeviceFault::Ntt(e)
    }
}

impl From<zkpipe_stream::Error> for DeviceFault {
    fn from(e: zkpipe_stream::Error) -> Self {
        DeviceFault::Stream(e)
    }
}

impl From<zkpipe_pinned::Error> for DeviceFault {
    fn from(e: zkpipe_pinned::Error) -> Self {
        DeviceFault::Pinned(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(code: u32) -> zkpipe_cuda::Error {
        zkpipe_cuda::Error::Driver {
            call: "cuLaunchKernel",
            code,
            name: "CUDA_ERROR_TEST".into(),
            message: "test".into(),
        }
    }

    /// An error's kind is its variant's name, whatever it carries.
    #[test]
    fn kinds_are_variant_names() {
        assert_eq!(ProveError::NoDevice.kind(), "NoDevice");
        assert_eq!(ProveError::QueueFull { waited_ms: 5 }.kind(), "QueueFull");
        assert_eq!(ProveError::device(0, driver(700)).kind(), "Device");
        let shape = ProveError::Shape {
            what: "aux",
            expected: 1,
            got: 2,
        };
        assert_eq!(shape.kind(), "Shape");
    }

    /// The driver status survives every layer it is wrapped in on its way up, so quarantine
    /// can decide from it.
    #[test]
    fn the_driver_status_is_found_through_every_layer() {
        let msm_device =
            |code| MsmError::Device(Box::new(zkpipe_msm::CudaError::from(driver(code))));
        let wrapped = |code: u32| -> Vec<ProveError> {
            vec![
                ProveError::device(0, driver(code)),
                ProveError::device(0, zkpipe_msm::CudaError::from(driver(code))),
                ProveError::device(0, NttError::from(driver(code))),
                ProveError::device(0, zkpipe_stream::Error::Cuda(driver(code))),
                ProveError::device(0, zkpipe_pinned::Error::Cuda(driver(code))),
                ProveError::Ntt(NttError::Stream(zkpipe_stream::Error::Cuda(driver(code)))),
                ProveError::Msm {
                    query: "L",
                    source: msm_device(code),
                },
                ProveError::Pinned {
                    source: zkpipe_pinned::Error::Cuda(driver(code)),
                },
            ]
        };
        for e in wrapped(700) {
            let d = e.driver_error().unwrap_or_else(|| panic!("lost: {e}"));
            assert!(d.is_sticky(), "{e}");
            assert!(e.to_string().contains("CUDA_ERROR_TEST"), "{e}");
        }
        for e in wrapped(1) {
            assert_eq!(e.driver_error().and_then(|d| d.code()), Some(1), "{e}");
            assert!(!e.driver_error().is_some_and(|d| d.is_sticky()), "{e}");
        }
        let panicked = ProveError::device(3, DeviceFault::Panicked { what: "the MSMs" });
        assert!(panicked.driver_error().is_none());
        assert_eq!(
            panicked.to_string(),
            "device 3: the thread enqueueing the MSMs panicked"
        );
        assert!(ProveError::Unsatisfied.driver_error().is_none());
    }
}
