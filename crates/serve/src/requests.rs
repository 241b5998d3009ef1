//! Where the daemon's own work on requests' bytes runs: the digest that tells a reused request
//! id apart, the canonical check of a witness's values, and their conversion into the memory
//! the engine lends. That work is parallel (rayon) and, left on rayon's global pool, shares
//! the host's cores with the engine's host pool, whose staging of the next job is on the GPU's
//! path. A pool of its own bounds the threads it takes.

use std::sync::Arc;

/// The threads the daemon's work on requests' bytes runs on.
#[derive(Debug, Clone, Default)]
pub enum RequestThreads {
    /// Rayon's global pool (a thread a core), shared with whatever else the process runs there.
    #[default]
    Global,
    /// A pool of its own, of a fixed number of threads (`zkpipe-request-N`).
    Own(Arc<rayon::ThreadPool>),
}

/// The largest nice value; the kernel keeps a thread's nice value within -20 to 19.
pub const MAX_NICE: u8 = 19;

/// Why the request threads could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RequestThreadsError {
    #[error("starting {threads} request threads (`request_threads`): {source}")]
    Pool {
        threads: usize,
        source: rayon::ThreadPoolBuildError,
    },
    #[error("`request_nice` = {nice}: at most {MAX_NICE}")]
    NiceOutOfRange { nice: u8 },
    #[error("lowering the request threads' priority by {nice} (`request_nice`): {source}")]
    Nice { nice: u8, source: std::io::Error },
}

impl RequestThreads {
    /// `threads` threads of its own, their nice value `nice` above the daemon's (0: the
    /// same); 0 threads: rayon's global pool, whose threads keep the daemon's priority.
    pub fn new(threads: usize, nice: u8) -> Result<Self, RequestThreadsError> {
        if nice > MAX_NICE {
            return Err(RequestThreadsError::NiceOutOfRange { nice });
        }
        if threads == 0 {
            return Ok(Self::Global);
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("zkpipe-request-{i}"))
            .build()
            .map_err(|source| RequestThreadsError::Pool { threads, source })?;
        // Every thread of the pool lowers its own priority (Linux keeps one a thread).
        if nice > 0 {
            for lowered in pool.broadcast(|_| lower_this_thread(nice)) {
                lowered.map_err(|source| RequestThreadsError::Nice { nice, source })?;
            }
        }
        Ok(Self::Own(Arc::new(pool)))
    }

    /// Runs `work` with its parallel parts on these threads; the calling thread waits for it.
    pub fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        match self {
            Self::Global => work(),
            Self::Own(pool) => pool.install(work),
        }
    }

    /// The number of threads the work may use.
    pub fn threads(&self) -> usize {
        match self {
            Self::Global => rayon::current_num_threads(),
            Self::Own(pool) => pool.current_num_threads(),
        }
    }
}

/// Raises the calling thread's nice value by `by`, up to [`MAX_NICE`]: a lower priority,
/// which needs no privilege.
fn lower_this_thread(by: u8) -> Result<(), std::io::Error> {
    use rustix::process::{getpriority_process, setpriority_process};
    let me = Some(rustix::thread::gettid());
    let now = getpriority_process(me)?;
    setpriority_process(me, (now + i32::from(by)).min(i32::from(MAX_NICE)))?;
    Ok(())
}

/// The calling thread's nice value.
#[cfg(test)]
fn this_threads_nice() -> i32 {
    rustix::process::getpriority_process(Some(rustix::thread::gettid())).expect("getpriority")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The work's parallel parts run on the pool's threads, as many as it was given, and none
    /// on the global pool.
    #[test]
    fn work_runs_on_the_threads_of_its_own_pool() {
        let own = RequestThreads::new(2, 0).expect("a pool");
        assert_eq!(own.threads(), 2);
        let names: std::collections::BTreeSet<String> = own.run(|| {
            use rayon::prelude::*;
            (0..64)
                .into_par_iter()
                .map(|_| {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    std::thread::current()
                        .name()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        });
        assert!(!names.is_empty());
        assert!(
            names.iter().all(|n| n.starts_with("zkpipe-request-")),
            "{names:?}"
        );
        assert!(names.len() <= 2, "{names:?}");
        assert!(matches!(
            RequestThreads::new(0, 0),
            Ok(RequestThreads::Global)
        ));
    }

    /// The pool's threads run at the nice value the caller asked above the daemon's (up to
    /// the kernel's largest); the calling thread's is left as it was; and a nice value the
    /// kernel cannot give is refused by name.
    #[test]
    fn request_threads_run_below_the_daemons_priority() {
        let daemon = this_threads_nice();
        let own = RequestThreads::new(3, 7).expect("a pool");
        let nice: std::collections::BTreeSet<i32> = match &own {
            RequestThreads::Own(pool) => pool
                .broadcast(|_| this_threads_nice())
                .into_iter()
                .collect(),
            RequestThreads::Global => panic!("3 threads make a pool of their own"),
        };
        let expected = (daemon + 7).min(i32::from(MAX_NICE));
        assert_eq!(nice, std::collections::BTreeSet::from([expected]));
        assert_eq!(
            own.run(this_threads_nice),
            expected,
            "run() works on the pool"
        );
        assert_eq!(this_threads_nice(), daemon);
        let same = RequestThreads::new(2, 0).expect("a pool");
        assert_eq!(same.run(this_threads_nice), daemon);
        assert!(matches!(
            RequestThreads::new(2, 20),
            Err(RequestThreadsError::NiceOutOfRange { nice: 20 })
        ));
    }
}
