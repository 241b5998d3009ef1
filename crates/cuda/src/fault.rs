//! Fault injection for tests (cargo feature `fault-injection`; absent, and free, otherwise):
//! every driver call this crate makes passes [`intercept`] first, which counts it and, when a
//! [`Fault`] is armed for it, makes it fail with a chosen status instead of calling the
//! driver.
//!
//! Counting is process-wide. A test that arms faults runs one engine at a time. A fault can
//! target one device ([`Fault::on_device`]): it then counts and fails only the calls made
//! while that device's context is bound on the calling thread ([`crate::Context::bind`], which
//! every driver-calling method of this crate runs first), as a kernel fault poisons only its
//! own device's context.
//!
//! ```no_run
//! use zkpipe_cuda::fault::{self, Fault};
//! fault::arm(Fault::nth_call(fault::ANY, 120, 2)); // the 120th call runs out of memory
//! // ... run a job, expect a typed error ...
//! fault::disarm();
//! ```

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// A [`Fault::call`] matching every driver function.
pub const ANY: &str = "*";

/// `CUDA_ERROR_ILLEGAL_ADDRESS`: a sticky error, after which the context is unusable.
pub const STICKY: u32 = 700;

/// Driver functions that release something. Under a sticky fault they still run (and then
/// report the fault), so that a test's process does not leak what the dead context held.
const RELEASES: &[&str] = &[
    "cuMemFree_v2",
    "cuMemFreeAsync",
    "cuMemFreeHost",
    "cuMemHostUnregister",
    "cuModuleUnload",
    "cuStreamDestroy_v2",
    "cuEventDestroy_v2",
    "cuDevicePrimaryCtxRelease_v2",
];

/// What to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The driver function to fail (its symbol, e.g. `cuMemAlloc_v2`), or [`ANY`].
    pub call: String,
    /// Fail its n-th call from now (1 is the next).
    pub nth: u64,
    /// The status it returns.
    pub code: u32,
    /// Once: the one call fails. Sticky: it and every later call fail, as after a kernel fault.
    pub mode: Mode,
    /// Sleep this long before failing (a hang the caller must survive, bounded for tests).
    pub delay: Duration,
    /// Only calls made with this device's context bound (None: every call).
    pub device: Option<usize>,
}

/// How long a fault lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One failed call.
    Once,
    /// Every call of any function from the n-th on fails, until [`disarm`].
    Sticky,
    /// Every call of the fault's function from the n-th on fails, until [`disarm`].
    Persistent,
}

impl Fault {
    /// The n-th call of `call` (or of any function, [`ANY`]) fails once with `code`.
    pub fn nth_call(call: &str, nth: u64, code: u32) -> Self {
        Self {
            call: call.to_string(),
            nth,
            code,
            mode: Mode::Once,
            delay: Duration::ZERO,
            device: None,
        }
    }

    /// From the n-th call of `call` on, every driver call fails with [`STICKY`].
    pub fn sticky_from(call: &str, nth: u64) -> Self {
        Self {
            mode: Mode::Sticky,
            ..Self::nth_call(call, nth, STICKY)
        }
    }

    /// The same fault, after a sleep of `delay` in the failing call.
    pub fn after(self, delay: Duration) -> Self {
        Self { delay, ..self }
    }

    /// The same fault, counting and failing only calls made on device `ordinal` (its context
    /// bound on the calling thread); calls on other devices reach the driver.
    pub fn on_device(self, ordinal: usize) -> Self {
        Self {
            device: Some(ordinal),
            ..self
        }
    }
}

thread_local! {
    /// The device whose context this thread bound last ([`crate::Context::bind`]).
    static BOUND: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Records that device `ordinal`'s context is now current on this thread.
pub(crate) fn bound(ordinal: usize) {
    BOUND.with(|b| b.set(Some(ordinal)));
}

/// The device whose context this thread bound last, if any.
fn bound_device() -> Option<usize> {
    BOUND.with(Cell::get)
}

struct Armed {
    fault: Fault,
    /// Calls of the fault's function seen since it was armed.
    seen: u64,
    /// A sticky fault that has fired.
    fired: bool,
}

static ARMED: Mutex<Option<Armed>> = Mutex::new(None);
static CALLS: AtomicU64 = AtomicU64::new(0);
static INJECTED: AtomicU64 = AtomicU64::new(0);

fn armed() -> std::sync::MutexGuard<'static, Option<Armed>> {
    ARMED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Arms `fault` (replacing any armed one).
pub fn arm(fault: Fault) {
    *armed() = Some(Armed {
        fault,
        seen: 0,
        fired: false,
    });
}

/// Disarms: every call reaches the driver again.
pub fn disarm() {
    *armed() = None;
}

/// Driver calls made since the process started (all functions).
pub fn calls() -> u64 {
    CALLS.load(Ordering::SeqCst)
}

/// Calls failed by injection since the process started.
pub fn injected() -> u64 {
    INJECTED.load(Ordering::SeqCst)
}

/// Whether a sticky fault has fired and is still armed.
pub fn sticky_fired() -> bool {
    armed().as_ref().is_some_and(|a| a.fired)
}

/// What happens to one call of `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Call the driver.
    Call,
    /// Do not call it; return this status.
    Fail(u32),
    /// Call it (it releases something), then return this status.
    CallThenFail(u32),
}

/// Counts a call of `name` and says whether it reaches the driver.
pub fn intercept(name: &str) -> Verdict {
    CALLS.fetch_add(1, Ordering::SeqCst);
    let mut g = armed();
    let Some(a) = g.as_mut() else {
        return Verdict::Call;
    };
    if a.fault.device.is_some_and(|d| bound_device() != Some(d)) {
        return Verdict::Call;
    }
    let releases = RELEASES.contains(&name);
    if a.fired {
        INJECTED.fetch_add(1, Ordering::SeqCst);
        return match releases {
            true => Verdict::CallThenFail(a.fault.code),
            false => Verdict::Fail(a.fault.code),
        };
    }
    if a.fault.call != ANY && a.fault.call != name {
        return Verdict::Call;
    }
    a.seen += 1;
    let persistent = a.fault.mode == Mode::Persistent && a.seen > a.fault.nth;
    if a.seen != a.fault.nth && !persistent {
        return Verdict::Call;
    }
    let (code, delay) = (a.fault.code, a.fault.delay);
    match a.fault.mode {
        Mode::Once => *g = None,
        Mode::Sticky => a.fired = true,
        Mode::Persistent => {}
    }
    drop(g);
    INJECTED.fetch_add(1, Ordering::SeqCst);
    if !delay.is_zero() {
        std::thread::sleep(delay);
    }
    match releases {
        true => Verdict::CallThenFail(code),
        false => Verdict::Fail(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the armed fault is process-wide.
    #[test]
    fn faults_fire_on_the_nth_call_once_or_for_good() {
        arm(Fault::nth_call("cuMemAlloc_v2", 2, 2));
        assert_eq!(intercept("cuLaunchKernel"), Verdict::Call);
        assert_eq!(intercept("cuMemAlloc_v2"), Verdict::Call);
        assert_eq!(intercept("cuMemAlloc_v2"), Verdict::Fail(2));
        assert_eq!(intercept("cuMemAlloc_v2"), Verdict::Call, "once: disarmed");
        arm(Fault::sticky_from(ANY, 3));
        assert_eq!(intercept("cuEventRecord"), Verdict::Call);
        assert_eq!(intercept("cuLaunchKernel"), Verdict::Call);
        assert_eq!(intercept("cuLaunchKernel"), Verdict::Fail(STICKY));
        assert!(sticky_fired());
        assert_eq!(intercept("cuStreamSynchronize"), Verdict::Fail(STICKY));
        assert_eq!(
            intercept("cuMemFree_v2"),
            Verdict::CallThenFail(STICKY),
            "releases still run"
        );
        arm(Fault {
            mode: Mode::Persistent,
            ..Fault::nth_call("cuModuleLoadData", 2, 209)
        });
        assert_eq!(intercept("cuModuleLoadData"), Verdict::Call);
        assert_eq!(intercept("cuModuleLoadData"), Verdict::Fail(209));
        assert_eq!(
            intercept("cuLaunchKernel"),
            Verdict::Call,
            "other functions run"
        );
        assert_eq!(intercept("cuModuleLoadData"), Verdict::Fail(209));
        // A sticky fault on device 1: calls with device 0 bound, or none, still run.
        arm(Fault::sticky_from(ANY, 2).on_device(1));
        BOUND.with(|b| b.set(None));
        assert_eq!(intercept("cuLaunchKernel"), Verdict::Call);
        bound(0);
        assert_eq!(intercept("cuLaunchKernel"), Verdict::Call);
        assert_eq!(
            intercept("cuLaunchKernel"),
            Verdict::Call,
            "device 0 is not counted"
        );
        bound(1);
        assert_eq!(
            intercept("cuLaunchKernel"),
            Verdict::Call,
            "device 1's first call"
        );
        assert_eq!(intercept("cuLaunchKernel"), Verdict::Fail(STICKY));
        assert_eq!(intercept("cuMemAlloc_v2"), Verdict::Fail(STICKY));
        bound(0);
        assert_eq!(
            intercept("cuMemAlloc_v2"),
            Verdict::Call,
            "device 0 unharmed"
        );
        // Another thread has bound nothing: its calls run too.
        let other = std::thread::spawn(|| intercept("cuLaunchKernel"))
            .join()
            .unwrap();
        assert_eq!(other, Verdict::Call);
        disarm();
        assert!(!sticky_fired());
        assert_eq!(intercept("cuLaunchKernel"), Verdict::Call);
        assert!(calls() >= 9 && injected() >= 6);
    }
}
