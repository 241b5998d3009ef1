//! Device memory that idle workers keep, and grants that can always be had or refused: a
//! grant comes at once when the budget has the bytes; else after memory kept by idle workers
//! is freed (memory of other shapes first); else after a running job lets its memory go. When
//! nothing is kept and no job runs, nothing can free the bytes, and the request is refused
//! instead of waiting for ever.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use zkpipe_stream::{BudgetError, VramBudget, VramGrant};

/// How long a request waits for a running job before it looks at the idle memory again.
const STEP: Duration = Duration::from_millis(50);

/// Why a grant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReclaimError {
    /// The budget refused (more than its capacity).
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// Nothing idle is left to free and no job runs: what holds the memory stays.
    #[error("{needed} bytes of device memory needed, {available} free; no running job or idle worker holds more")]
    Held { needed: usize, available: usize },
    /// The deadline passed while running jobs still held the memory.
    #[error("{needed} bytes of device memory needed, {available} free when the deadline passed")]
    Deadline { needed: usize, available: usize },
}

/// Memory of type `T` that no job uses, kept for a next job, and a count of the jobs that
/// hold device memory.
#[derive(Debug)]
pub(crate) struct Reclaim<T> {
    idle: Mutex<VecDeque<T>>,
    active: AtomicUsize,
    /// Held while a request looks at the running jobs and the budget, and while a job's grant
    /// is made and counted: a request never sees a job's bytes taken but the job not counted.
    granting: Mutex<()>,
}

impl<T> Default for Reclaim<T> {
    fn default() -> Self {
        Self {
            idle: Mutex::new(VecDeque::new()),
            active: AtomicUsize::new(0),
            granting: Mutex::new(()),
        }
    }
}

/// Whether a grant is a job's (counted as running while it lives) or held for good (tables,
/// a resident key or recording).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Job,
    ForGood,
}

/// A job holding device memory: counted as running until dropped, which releases its grant
/// first.
#[derive(Debug)]
pub(crate) struct Active<'a> {
    grant: VramGrant,
    count: &'a AtomicUsize,
}

impl Active<'_> {
    /// Splits `bytes` off the job's grant, into a grant of their own (memory kept after the
    /// job).
    pub fn split_off(&mut self, bytes: usize) -> VramGrant {
        self.grant.split_off(bytes)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        // The bytes go back before the job stops counting: a request that then finds no job
        // running has already seen them free.
        let bytes = self.grant.bytes();
        drop(self.grant.split_off(bytes));
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<T> Reclaim<T> {
    /// Keeps `t`, which no job uses now, for a next job.
    pub fn put(&self, t: T) {
        self.lock().push_back(t);
    }

    /// Takes kept memory that `fits` accepts.
    pub fn take(&self, fits: impl Fn(&T) -> bool) -> Option<T> {
        let mut idle = self.lock();
        let at = idle.iter().position(fits)?;
        idle.remove(at)
    }

    /// The sum of `size` over the idle entries kept now.
    pub fn idle_sum(&self, size: impl Fn(&T) -> usize) -> usize {
        self.lock().iter().map(size).sum()
    }

    /// Idle memory entries kept now.
    #[cfg(test)]
    pub fn idle_len(&self) -> usize {
        self.lock().len()
    }

    /// Counts a job holding `grant` as running until the returned guard drops.
    #[cfg(test)]
    pub fn enter(&self, grant: VramGrant) -> Active<'_> {
        self.active.fetch_add(1, Ordering::SeqCst);
        Active {
            grant,
            count: &self.active,
        }
    }

    /// A grant of `bytes` from `budget` held for good (not a job's): at once if free; else
    /// after freeing idle memory, entries that `keep` refuses first; else after a running job's
    /// memory goes, by `deadline` if there is one. Refused when the budget can never hold
    /// `bytes`, when nothing idle is left and no job runs, or when the deadline passes.
    pub fn acquire(
        &self,
        budget: &VramBudget,
        bytes: usize,
        keep: impl Fn(&T) -> bool,
        deadline: Option<Instant>,
    ) -> Result<VramGrant, ReclaimError> {
        self.acquire_for(Holder::ForGood, budget, bytes, keep, deadline)
    }

    /// As [`Reclaim::acquire`], for a job: the grant comes counted as running (until the
    /// returned guard drops), in one step with its making, so that no other request finds the
    /// bytes taken and no job running.
    pub fn acquire_job(
        &self,
        budget: &VramBudget,
        bytes: usize,
        keep: impl Fn(&T) -> bool,
        deadline: Option<Instant>,
    ) -> Result<Active<'_>, ReclaimError> {
        let grant = self.acquire_for(Holder::Job, budget, bytes, keep, deadline)?;
        Ok(Active {
            grant,
            count: &self.active,
        })
    }

    /// The grant, counted as running when `holder` is a job (the count is the caller's to
    /// give back, through [`Active`]).
    fn acquire_for(
        &self,
        holder: Holder,
        budget: &VramBudget,
        bytes: usize,
        keep: impl Fn(&T) -> bool,
        deadline: Option<Instant>,
    ) -> Result<VramGrant, ReclaimError> {
        loop {
            {
                let _turn = self.granting.lock().unwrap_or_else(|p| p.into_inner());
                // Read before looking at the budget: a job that stops running has given its
                // bytes back by then (Active's drop), so they are seen below.
                let running = self.active.load(Ordering::SeqCst);
                if let Some(g) = budget.try_acquire(bytes)? {
                    if holder == Holder::Job {
                        self.active.fetch_add(1, Ordering::SeqCst);
                    }
                    return Ok(g);
                }
                if let Some(victim) = self.evict(&keep) {
                    drop(victim);
                    continue;
                }
                let s = budget.stats();
                let available = s.capacity - s.in_use.min(s.capacity);
                if running == 0 {
                    return Err(ReclaimError::Held {
                        needed: bytes,
                        available,
                    });
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(ReclaimError::Deadline {
                        needed: bytes,
                        available,
                    });
                }
            }
            // Wait (outside the turn) for a running job to give bytes back, then try again
            // under the turn.
            let step = deadline.map_or(STEP, |d| {
                d.saturating_duration_since(Instant::now()).min(STEP)
            });
            match budget.acquire(bytes, Some(step)) {
                Ok(g) => drop(g),
                Err(BudgetError::Timeout { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Removes one idle entry, one that `keep` refuses when there is one.
    fn evict(&self, keep: &impl Fn(&T) -> bool) -> Option<T> {
        let mut idle = self.lock();
        let at = idle.iter().position(|t| !keep(t)).unwrap_or(0);
        idle.remove(at)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    /// Kept memory of a shape, holding its grant.
    #[derive(Debug)]
    struct Kept {
        shape: u32,
        _grant: VramGrant,
    }

    fn kept(budget: &VramBudget, shape: u32, bytes: usize) -> Kept {
        Kept {
            shape,
            _grant: budget.try_acquire(bytes).unwrap().unwrap(),
        }
    }

    #[test]
    fn idle_memory_of_other_shapes_goes_first() {
        let budget = VramBudget::with_capacity(100);
        let r = Reclaim::default();
        r.put(kept(&budget, 1, 40));
        r.put(kept(&budget, 2, 40));
        let g = r
            .acquire(&budget, 30, |k: &Kept| k.shape == 1, None)
            .unwrap();
        assert_eq!((r.idle_len(), budget.stats().in_use), (1, 70));
        assert_eq!(r.take(|k| k.shape == 1).map(|k| k.shape), Some(1));
        drop(g);
    }

    #[test]
    fn the_job_shape_is_evicted_too_when_nothing_else_frees_enough() {
        let budget = VramBudget::with_capacity(100);
        let r = Reclaim::default();
        r.put(kept(&budget, 1, 60));
        r.put(kept(&budget, 2, 30));
        let g = r
            .acquire(&budget, 90, |k: &Kept| k.shape == 1, None)
            .unwrap();
        assert_eq!((r.idle_len(), budget.stats().in_use), (0, 90));
        drop(g);
    }

    #[test]
    fn memory_held_by_nothing_that_runs_is_refused_at_once() {
        let budget = VramBudget::with_capacity(100);
        let r: Reclaim<Kept> = Reclaim::default();
        let _tables = budget.try_acquire(70).unwrap().unwrap();
        let t = Instant::now();
        let e = r.acquire(&budget, 50, |_| true, None).unwrap_err();
        assert_eq!(
            e,
            ReclaimError::Held {
                needed: 50,
                available: 30
            }
        );
        assert!(t.elapsed() < Duration::from_secs(1));
        let e = r.acquire(&budget, 101, |_| true, None).unwrap_err();
        assert!(matches!(
            e,
            ReclaimError::Budget(BudgetError::NeverFits { .. })
        ));
    }

    #[test]
    fn a_running_job_is_waited_for() {
        let budget = VramBudget::with_capacity(100);
        let r = Arc::new(Reclaim::<Kept>::default());
        let job = r.enter(budget.try_acquire(80).unwrap().unwrap());
        std::thread::scope(|s| {
            let waiter = s.spawn(|| r.acquire(&budget, 50, |_| true, None));
            std::thread::sleep(Duration::from_millis(120));
            assert!(
                !waiter.is_finished(),
                "granted while the job held 80 of 100"
            );
            drop(job);
            let g = waiter.join().unwrap().unwrap();
            assert_eq!(g.bytes(), 50);
        });
    }

    #[test]
    fn memory_kept_after_a_job_is_reclaimed_by_a_waiting_request() {
        // Worker A runs a job, then keeps its memory idle; worker B's request waits for A's
        // job and then frees A's idle memory instead of waiting for ever.
        let budget = VramBudget::with_capacity(100);
        let r = Arc::new(Reclaim::default());
        let job = r.enter(budget.try_acquire(20).unwrap().unwrap());
        let a_memory = kept(&budget, 7, 60);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| r.acquire(&budget, 50, |k: &Kept| k.shape == 3, None));
            std::thread::sleep(Duration::from_millis(80));
            r.put(a_memory);
            drop(job);
            let g = waiter.join().unwrap().unwrap();
            assert_eq!((g.bytes(), r.idle_len()), (50, 0));
        });
    }

    #[test]
    fn a_wait_for_a_running_job_ends_at_the_deadline() {
        let budget = VramBudget::with_capacity(100);
        let r = Reclaim::<Kept>::default();
        let _job = r.enter(budget.try_acquire(80).unwrap().unwrap());
        let t = Instant::now();
        let deadline = Some(t + Duration::from_millis(120));
        let e = r.acquire(&budget, 50, |_| true, deadline).unwrap_err();
        assert_eq!(
            e,
            ReclaimError::Deadline {
                needed: 50,
                available: 20
            }
        );
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(120) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }

    /// Two jobs asking at once for more than half the budget: the second waits for the first
    /// and is never told that nothing runs (its grant made and counted in one step).
    #[test]
    fn jobs_asking_together_wait_for_each_other_never_refused() {
        let budget = VramBudget::with_capacity(100);
        let r: Reclaim<Kept> = Reclaim::default();
        for round in 0..300 {
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                let ask = || {
                    start.wait();
                    let job = r.acquire_job(&budget, 60, |_| false, None);
                    let job = job.unwrap_or_else(|e| panic!("round {round}: {e}"));
                    std::thread::yield_now();
                    drop(job);
                };
                s.spawn(ask);
                ask();
            });
        }
        assert_eq!(budget.stats().in_use, 0);
        assert_eq!(r.active.load(Ordering::SeqCst), 0);
    }
}
