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

/// Why the request threads could not be started.
#[derive(Debug, thiserror::Error)]
#[error("starting {threads} request threads (`request_threads`): {source}")]
pub struct RequestThreadsError {
    pub threads: usize,
    pub source: rayon::ThreadPoolBuildError,
}

impl RequestThreads {
    /// `threads` threads of its own; 0: rayon's global pool.
    pub fn new(threads: usize) -> Result<Self, RequestThreadsError> {
        match threads {
            0 => Ok(Self::Global),
            n => rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("zkpipe-request-{i}"))
                .build()
                .map(|pool| Self::Own(Arc::new(pool)))
                .map_err(|source| RequestThreadsError { threads, source }),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The work's parallel parts run on the pool's threads, as many as it was given, and none
    /// on the global pool.
    #[test]
    fn work_runs_on_the_threads_of_its_own_pool() {
        let own = RequestThreads::new(2).expect("a pool");
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
        assert!(matches!(RequestThreads::new(0), Ok(RequestThreads::Global)));
    }
}
