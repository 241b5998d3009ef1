//! Why `zkpipe` failed, and the exit status that says so to a script: 2 for usage (as clap's
//! own), 3 for a device that cannot run the job, 4 for a proof that does not verify, 5 for a
//! failed job, 1 for anything else.

use zkpipe_pipeline::ProveError;

/// A failure of a `zkpipe` command.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The command line asks for what cannot run.
    #[error("{0}")]
    Usage(String),
    /// The engine could not start on the device, or the job does not fit it.
    #[error("device: {0}")]
    Device(#[source] ProveError),
    /// A device asked for is not there (or no driver to ask).
    #[error("device: {0}")]
    NoDevice(#[source] zkpipe_cuda::Error),
    /// A proof the engine returned does not verify.
    #[error("proof {proof} does not verify")]
    Unverified { proof: usize },
    /// A job ended with an error.
    #[error("job failed: {0}")]
    Job(#[source] ProveError),
    /// Some jobs failed (a soak or a batch), each reported as it happened.
    #[error("{0}")]
    Jobs(String),
    /// A Filecoin proof failed: its input or parameters (2), its device (3), a proof refused
    /// by the check (4), the job (5), else 1.
    #[error(transparent)]
    Filecoin(Box<zkpipe_filecoin::FilecoinError>),
    /// Anything else.
    #[error(transparent)]
    Other(#[from] Box<dyn std::error::Error>),
}

impl From<ProveError> for Failure {
    fn from(e: ProveError) -> Self {
        Failure::Other(Box::new(e))
    }
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Other(e.into())
    }
}

/// The exit status of a Filecoin proof's failure.
fn filecoin_code(e: &zkpipe_filecoin::FilecoinError) -> u8 {
    use zkpipe_filecoin::FilecoinError as F;
    match e {
        e if e.is_bad_input() => 2,
        F::Prove {
            source: ProveError::TooLargeForDevice { .. } | ProveError::DeviceQuarantined { .. },
            ..
        } => 3,
        F::Prove {
            source: ProveError::ProofRejected { .. },
            ..
        } => 4,
        F::Prove { .. } => 5,
        _ => 1,
    }
}

impl Failure {
    /// The process's exit status for this failure.
    pub fn code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Device(_) | Failure::NoDevice(_) => 3,
            Failure::Unverified { .. } => 4,
            Failure::Job(_) | Failure::Jobs(_) => 5,
            Failure::Filecoin(e) => filecoin_code(e),
            Failure::Other(_) => 1,
        }
    }

    /// An engine that would not start: the device's fault when a device refused.
    pub fn start(e: ProveError) -> Self {
        match e {
            ProveError::Device { .. }
            | ProveError::TooLargeForDevice { .. }
            | ProveError::DeviceQuarantined { .. } => Failure::Device(e),
            ProveError::Config { .. } => Failure::Usage(e.to_string()),
            other => Failure::Other(Box::new(other)),
        }
    }

    /// A job's error: the device's when the job cannot fit it, else the job's.
    pub fn job(e: ProveError) -> Self {
        match e {
            ProveError::TooLargeForDevice { .. } | ProveError::DeviceQuarantined { .. } => {
                Failure::Device(e)
            }
            other => Failure::Job(other),
        }
    }
}
