//! The GPU side of [`G1Backend`]: one worker of a device, and the engine's policy for a job
//! whose device fails it ([`OnDeviceFailure`]).

use std::sync::Arc;

use super::{GpuWorker, StageWitness};
use crate::config::OnDeviceFailure;
use crate::device::DeviceShared;
use crate::g1::{take_parts, CpuBackend, G1Backend, JobContext, Ran};
use crate::{ProveError, Witness};

/// A worker of one device.
#[derive(Debug)]
pub(crate) struct GpuBackend {
    stage: GpuWorker,
    /// Every device of the engine (this one's among them): a job whose device fails runs
    /// again on another while any is usable.
    devices: Vec<Arc<DeviceShared>>,
    on_failure: OnDeviceFailure,
}

impl GpuBackend {
    /// `per_device` workers on each of `devices` (loading the kernels for each).
    pub fn on_devices(
        devices: &[Arc<DeviceShared>],
        per_device: usize,
        on_failure: OnDeviceFailure,
    ) -> Result<Vec<Box<dyn G1Backend>>, ProveError> {
        let mut workers: Vec<Box<dyn G1Backend>> = Vec::new();
        if devices.is_empty() {
            return Ok(workers);
        }
        let host = Arc::new(host_pool()?);
        for dev in devices {
            for _ in 0..per_device.max(1) {
                workers.push(Box::new(GpuBackend {
                    stage: GpuWorker::new(Arc::clone(dev), Arc::clone(&host))?,
                    devices: devices.to_vec(),
                    on_failure,
                }));
            }
        }
        Ok(workers)
    }

    fn dev(&self) -> &DeviceShared {
        &self.stage.dev
    }

    /// Whether the worker keeps each job's witness until the job is done, so that a job whose
    /// device fails runs again elsewhere: on another device when the engine has several, or on
    /// the CPU when that is the policy. A single device that fails its jobs gives each vector
    /// back to the pool as soon as it is uploaded instead.
    fn keeps_witness(&self) -> bool {
        self.devices.len() > 1 || self.on_failure == OnDeviceFailure::Cpu
    }

    /// The G1 stage on the device, the witness given up as it is uploaded.
    fn run_given(&self, job: &JobContext<'_>, witness: &mut Witness) -> Result<Ran, ProveError> {
        let (abc, z) = take_parts(witness);
        let run = self.stage.g1_stage(job, StageWitness::Given(abc, z));
        if let Err(e) = &run {
            self.dev().quarantine_if_unusable(e);
        }
        run.map(Ran::Done)
    }

    /// The G1 stage on the device, the witness kept: when the job fails and the device is then
    /// quarantined, it runs again on another device (the witness restored, [`Ran::Elsewhere`])
    /// or on the CPU (the policy [`OnDeviceFailure::Cpu`]). Any other failure is the job's.
    fn run_kept(&self, job: &JobContext<'_>, witness: &mut Witness) -> Result<Ran, ProveError> {
        let (mut abc, z) = take_parts(witness);
        let error = match self.stage.g1_stage(job, StageWitness::Kept(&mut abc, &z)) {
            Ok(mut out) => {
                if out.b2.is_none() {
                    out.z = Some(z);
                }
                return Ok(Ran::Done(out));
            }
            Err(e) => e,
        };
        self.dev().quarantine_if_unusable(&error);
        if self.dev().quarantined().is_none() {
            return Err(error);
        }
        let device = self.dev().ctx.ordinal();
        if self.devices.iter().any(|d| d.quarantined().is_none()) {
            tracing::warn!(job = job.id, device, error = %error, "the job's device was quarantined: the job goes to another device");
            z.restore(witness);
            abc.restore(witness);
            return Ok(Ran::Elsewhere);
        }
        match self.on_failure {
            OnDeviceFailure::Cpu => {
                tracing::warn!(job = job.id, device, error = %error, "the job's device was quarantined: the job runs again on the CPU");
                CpuBackend.g1(job, abc, z).map(Ran::Done)
            }
            OnDeviceFailure::Fail => Err(error),
        }
    }
}

/// The GPU workers' host threads, one a core: apart from rayon's global pool, so that a
/// caller's parallel work there never stands between a job and its staging.
fn host_pool() -> Result<rayon::ThreadPool, ProveError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("zkpipe-host-{i}"))
        .build()
        .map_err(|source| ProveError::HostPool { source })
}

impl G1Backend for GpuBackend {
    fn quarantined(&self) -> bool {
        self.dev().quarantined().is_some()
    }

    fn run(&self, job: &JobContext<'_>, witness: &mut Witness) -> Result<Ran, ProveError> {
        match (self.dev().quarantined(), self.on_failure) {
            (None, _) => match self.keeps_witness() {
                true => self.run_kept(job, witness),
                false => self.run_given(job, witness),
            },
            (Some(_), OnDeviceFailure::Cpu) => CpuBackend.run(job, witness),
            (Some(reason), OnDeviceFailure::Fail) => Err(ProveError::DeviceQuarantined {
                device: self.dev().ctx.ordinal(),
                reason,
            }),
        }
    }
}
