//! Partitions as work items: each partition of a proof passes three gates on its way, its
//! synthesis (the CPU and a lent witness), the host memory its synthesis works in, and its job
//! on the engine. The gates let waiters through highest priority first and in order of
//! arrival within a priority, and the synthesis and engine gates keep room that only urgent
//! work (HIGH and CRITICAL) may take, so that a WinningPoSt arriving while a PoRep proof's
//! partitions stream through never waits behind those not yet started: it takes the next free
//! synthesis slot and the next free engine worker (kernels already running are not
//! preempted). The memory gate counts bytes: a partition waits until its working set fits
//! the budget, and one that could never fit is refused with the bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use zkpipe_pipeline::Lane;

use crate::Request;

/// How urgent a proof is. Higher levels go first at every gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low,
    Normal,
    High,
    Critical,
}

impl Priority {
    /// Every level, highest first.
    pub const ALL: [Priority; 4] = [
        Priority::Critical,
        Priority::High,
        Priority::Normal,
        Priority::Low,
    ];

    /// A kind's own priority: WinningPoSt must be done within its epoch, WindowPoSt within
    /// its deadline's window; sealing can wait.
    pub fn of(request: &Request) -> Self {
        match request {
            Request::WinningPoSt(_) => Priority::Critical,
            Request::WindowPoSt(_) => Priority::High,
            Request::PoRepC2(_) | Request::Snap(_) => Priority::Normal,
        }
    }

    /// Its name in metrics, status and logs.
    pub fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }

    /// HIGH and CRITICAL: work that has a chain deadline.
    pub fn is_urgent(self) -> bool {
        self >= Priority::High
    }

    /// The engine's lane for a partition of this priority: urgent work is taken before
    /// routine jobs queued in the engine ahead of it.
    pub fn lane(self) -> Lane {
        match self.is_urgent() {
            true => Lane::Urgent,
            false => Lane::Routine,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a [`crate::Prover`] shares its synthesis and its engine among the proofs it runs at
/// once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduling {
    /// Partitions synthesized at once across all proofs (each holds a lent witness from the
    /// start of its synthesis until its job is on the engine).
    pub synthesis_slots: usize,
    /// Partitions on the engine at once (queued there or running) across all proofs: one for
    /// each of the engine's workers, one more routine partition waiting in the engine so
    /// that a worker that frees takes it at once rather than waiting while the next is made,
    /// and one kept for urgent work (which the engine takes before queued routine jobs: its
    /// urgent lane).
    pub engine_slots: usize,
    /// Host bytes the partitions synthesizing at once may take together, each by its
    /// estimate ([`crate::prover::synthesis_bytes`]).
    pub synthesis_bytes: usize,
}

impl Scheduling {
    /// No limit: each proof synthesizes with its own threads and queues its partitions on the
    /// engine as they are made, in order (the CLI's one proof at a time).
    pub const UNLIMITED: Scheduling = Scheduling {
        synthesis_slots: usize::MAX,
        engine_slots: usize::MAX,
        synthesis_bytes: usize::MAX,
    };

    /// For an engine of `workers` workers and `synthesis_slots` partitions synthesized at
    /// once, with no limit on their memory.
    pub fn for_engine(workers: usize, synthesis_slots: usize) -> Self {
        Self {
            synthesis_slots: synthesis_slots.max(1),
            engine_slots: workers.max(1) + 2,
            synthesis_bytes: usize::MAX,
        }
    }

    /// The same, the partitions synthesizing at once taking at most `bytes` of host memory
    /// (None: no limit).
    pub fn with_synthesis_memory(self, bytes: Option<usize>) -> Self {
        Self {
            synthesis_bytes: bytes.unwrap_or(usize::MAX),
            ..self
        }
    }
}

/// What a partition is waiting for at a gate, for logs and errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Synthesis,
    Memory,
    Engine,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Synthesis => "synthesis",
            Stage::Memory => "host memory for synthesis",
            Stage::Engine => "the engine",
        })
    }
}

/// A proof's place in the scheduling: its priority, and the flag its caller sets to cancel
/// it (its partitions not yet started then never start, and waits at the gates end).
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    pub priority: Priority,
    pub cancel: Option<&'a AtomicBool>,
}

impl Turn<'_> {
    /// A NORMAL proof nobody cancels.
    pub const NORMAL: Turn<'static> = Turn {
        priority: Priority::Normal,
        cancel: None,
    };

    /// True once the caller cancelled the proof.
    pub fn cancelled(&self) -> bool {
        self.cancel.is_some_and(|c| c.load(Ordering::SeqCst))
    }
}

/// How often a waiter looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// Room for `capacity` units at once (partitions, or bytes), let through by priority.
#[derive(Debug)]
pub(crate) struct Gate {
    stage: Stage,
    capacity: usize,
    /// Room only urgent work may take (one slot where a gate of slots has two or more).
    reserved: usize,
    state: Mutex<GateState>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// Units taken.
    in_use: usize,
    /// Of those, held by LOW and NORMAL work.
    in_use_routine: usize,
    /// Tickets waiting, per priority, in order of arrival.
    waiting: [VecDeque<u64>; 4],
    next_ticket: u64,
}

/// Room taken at a gate; dropping it frees the room.
#[derive(Debug)]
pub(crate) struct Permit<'g> {
    gate: &'g Gate,
    priority: Priority,
    units: usize,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut st = self.gate.lock();
        st.in_use -= self.units;
        if !self.priority.is_urgent() {
            st.in_use_routine -= self.units;
        }
        drop(st);
        self.gate.turn.notify_all();
    }
}

impl Gate {
    /// A gate of `capacity` slots, one kept for urgent work where there are two or more.
    pub(crate) fn new(stage: Stage, capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            stage,
            capacity,
            reserved: usize::from(capacity >= 2 && capacity != usize::MAX),
            state: Mutex::new(GateState::default()),
            turn: Condvar::new(),
        }
    }

    /// A gate of `capacity` bytes, none kept for urgent work (an urgent partition is first in
    /// line when bytes free, and its working set is small beside a PoRep partition's).
    pub(crate) fn of_bytes(stage: Stage, capacity: usize) -> Self {
        Self {
            stage,
            capacity: capacity.max(1),
            reserved: 0,
            state: Mutex::new(GateState::default()),
            turn: Condvar::new(),
        }
    }

    /// Units it lets through at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Units taken now.
    pub(crate) fn in_use(&self) -> usize {
        self.lock().in_use
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a slot for work of `turn`'s priority: the oldest waiter of the highest level
    /// waiting goes first, and LOW and NORMAL work leaves the reserved room free. None once
    /// the turn is cancelled.
    pub(crate) fn enter(&self, turn: Turn<'_>) -> Option<Permit<'_>> {
        self.enter_with(turn, 1)
    }

    /// As [`Gate::enter`] for `units` at once (taken as the whole capacity where they are
    /// more, so that a waiter never waits for room the gate cannot have: callers refuse such
    /// work before they wait).
    pub(crate) fn enter_with(&self, turn: Turn<'_>, units: usize) -> Option<Permit<'_>> {
        let units = units.min(self.capacity);
        let p = turn.priority;
        let arrived = std::time::Instant::now();
        let mut st = self.lock();
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.waiting[p.index()].push_back(ticket);
        loop {
            if turn.cancelled() {
                st.waiting[p.index()].retain(|&t| t != ticket);
                drop(st);
                self.turn.notify_all();
                return None;
            }
            if self.admits(&st, p, ticket, units) {
                st.waiting[p.index()].pop_front();
                st.in_use += units;
                if !p.is_urgent() {
                    st.in_use_routine += units;
                }
                drop(st);
                // Another waiter may be next now that this one left the line.
                self.turn.notify_all();
                let waited = arrived.elapsed();
                if waited > CANCEL_POLL {
                    tracing::debug!(stage = %self.stage, priority = p.name(), waited_ms = waited.as_millis() as u64, "a partition waited its turn");
                }
                return Some(Permit {
                    gate: self,
                    priority: p,
                    units,
                });
            }
            st = self
                .turn
                .wait_timeout(st, CANCEL_POLL)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// True when the waiter `ticket` at level `p` may take `units` now.
    fn admits(&self, st: &GateState, p: Priority, ticket: u64, units: usize) -> bool {
        let first_of_its_level = st.waiting[p.index()].front() == Some(&ticket);
        let none_above = Priority::ALL
            .iter()
            .filter(|&&q| q > p)
            .all(|q| st.waiting[q.index()].is_empty());
        let room = st.in_use + units <= self.capacity;
        let routine_room =
            p.is_urgent() || st.in_use_routine + units <= self.capacity - self.reserved;
        first_of_its_level && none_above && room && routine_room
    }
}

/// The gates of a prover.
#[derive(Debug)]
pub(crate) struct Gates {
    pub synthesis: Gate,
    pub memory: Gate,
    pub engine: Gate,
}

impl Gates {
    pub(crate) fn new(s: Scheduling) -> Self {
        Self {
            synthesis: Gate::new(Stage::Synthesis, s.synthesis_slots),
            memory: Gate::of_bytes(Stage::Memory, s.synthesis_bytes),
            engine: Gate::new(Stage::Engine, s.engine_slots),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Starts a waiter of `priority` at `gate` that pushes `name` to `order` once it enters,
    /// holds its slot until `release` is set, and returns.
    fn waiter(
        gate: &Arc<Gate>,
        order: &Arc<Mutex<Vec<&'static str>>>,
        release: &Arc<AtomicBool>,
        name: &'static str,
        priority: Priority,
    ) -> std::thread::JoinHandle<bool> {
        let (gate, order, release) = (Arc::clone(gate), Arc::clone(order), Arc::clone(release));
        std::thread::spawn(move || {
            let turn = Turn {
                priority,
                cancel: None,
            };
            let Some(_permit) = gate.enter(turn) else {
                return false;
            };
            order.lock().unwrap().push(name);
            while !release.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            true
        })
    }

    fn waiting(gate: &Gate) -> usize {
        gate.lock().waiting.iter().map(VecDeque::len).sum()
    }

    fn wait_until(what: impl Fn() -> bool) {
        let t = std::time::Instant::now();
        while !what() {
            assert!(t.elapsed() < Duration::from_secs(10), "timed out");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn the_highest_level_goes_first_and_each_level_in_order() {
        // One slot, held: the waiters queue, then go one at a time as each frees it.
        let gate = Arc::new(Gate::new(Stage::Engine, 1));
        let held = gate.enter(Turn::NORMAL).expect("a free slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(AtomicBool::new(true));
        let queued = [
            ("n1", Priority::Normal),
            ("l1", Priority::Low),
            ("c1", Priority::Critical),
            ("n2", Priority::Normal),
            ("h1", Priority::High),
            ("c2", Priority::Critical),
        ];
        let mut threads = Vec::new();
        for (i, (name, p)) in queued.into_iter().enumerate() {
            threads.push(waiter(&gate, &order, &release, name, p));
            wait_until(|| waiting(&gate) == i + 1);
        }
        drop(held);
        for t in threads {
            assert!(t.join().unwrap());
        }
        assert_eq!(*order.lock().unwrap(), ["c1", "c2", "h1", "n1", "n2", "l1"]);
    }

    #[test]
    fn an_engine_of_two_workers_takes_three_routine_partitions_and_keeps_one_for_urgent_work() {
        let gates = Gates::new(Scheduling::for_engine(2, 3));
        assert_eq!(
            gates.engine.capacity(),
            4,
            "two workers, one waiting, one kept"
        );
        let routine: Vec<_> = (0..3)
            .map(|_| gates.engine.enter(Turn::NORMAL).expect("room"))
            .collect();
        assert_eq!(gates.engine.in_use(), 3);
        let cancel = AtomicBool::new(false);
        std::thread::scope(|s| {
            let fourth = s.spawn(|| {
                let turn = Turn {
                    priority: Priority::Normal,
                    cancel: Some(&cancel),
                };
                gates.engine.enter(turn).is_some()
            });
            wait_until(|| waiting(&gates.engine) == 1);
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(gates.engine.in_use(), 3, "a fourth routine partition waits");
            let urgent = Turn {
                priority: Priority::Critical,
                cancel: None,
            };
            let critical = gates.engine.enter(urgent).expect("the kept slot");
            assert_eq!(gates.engine.in_use(), 4);
            cancel.store(true, Ordering::SeqCst);
            assert!(!fourth.join().unwrap(), "the fourth entered");
            drop(critical);
        });
        drop(routine);
        assert_eq!(gates.engine.in_use(), 0);
        // Urgent partitions go to the engine's urgent lane, routine ones to its routine lane.
        assert_eq!(Priority::Critical.lane(), Lane::Urgent);
        assert_eq!(Priority::High.lane(), Lane::Urgent);
        assert_eq!(Priority::Normal.lane(), Lane::Routine);
        assert_eq!(Priority::Low.lane(), Lane::Routine);
    }

    #[test]
    fn routine_work_leaves_the_reserved_slot_to_urgent_work() {
        let gate = Arc::new(Gate::new(Stage::Engine, 3));
        let order = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(AtomicBool::new(false));
        // Three NORMAL partitions: two enter, the third waits although a slot is free.
        let normal: Vec<_> = ["n1", "n2", "n3"]
            .into_iter()
            .map(|n| waiter(&gate, &order, &release, n, Priority::Normal))
            .collect();
        wait_until(|| order.lock().unwrap().len() == 2 && waiting(&gate) == 1);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            order.lock().unwrap().len(),
            2,
            "the reserved slot stays free"
        );
        // A CRITICAL one takes it at once.
        let critical = waiter(&gate, &order, &release, "c1", Priority::Critical);
        wait_until(|| order.lock().unwrap().len() == 3);
        assert_eq!(order.lock().unwrap()[2], "c1");
        release.store(true, Ordering::SeqCst);
        for t in normal.into_iter().chain([critical]) {
            assert!(t.join().unwrap());
        }
        assert_eq!(order.lock().unwrap().len(), 4);
        let st = gate.lock();
        assert_eq!((st.in_use, st.in_use_routine), (0, 0));
    }

    #[test]
    fn a_cancelled_waiter_leaves_the_line_and_the_next_goes() {
        let gate = Arc::new(Gate::new(Stage::Synthesis, 1));
        let held = gate.enter(Turn::NORMAL).expect("a free slot");
        let cancel = Arc::new(AtomicBool::new(false));
        let cancelled = std::thread::spawn({
            let (gate, cancel) = (Arc::clone(&gate), Arc::clone(&cancel));
            move || {
                let turn = Turn {
                    priority: Priority::Critical,
                    cancel: Some(&cancel),
                };
                gate.enter(turn).is_some()
            }
        });
        wait_until(|| waiting(&gate) == 1);
        let order = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(AtomicBool::new(true));
        let next = waiter(&gate, &order, &release, "n1", Priority::Normal);
        wait_until(|| waiting(&gate) == 2);
        cancel.store(true, Ordering::SeqCst);
        assert!(
            !cancelled.join().unwrap(),
            "the cancelled waiter got no slot"
        );
        assert_eq!(waiting(&gate), 1);
        drop(held);
        assert!(next.join().unwrap());
        assert_eq!(*order.lock().unwrap(), ["n1"]);
    }

    #[test]
    fn a_gate_of_bytes_lets_through_what_fits_in_priority_order() {
        let gate = Arc::new(Gate::of_bytes(Stage::Memory, 100));
        let held = gate.enter_with(Turn::NORMAL, 70).expect("fits");
        assert_eq!(gate.in_use(), 70);
        let order = Arc::new(Mutex::new(Vec::new()));
        // 60 more do not fit beside 70: both waiters of 60 wait, the CRITICAL one first in
        // line although it came second; 30 would fit beside 70, but its waiter is behind them.
        // The CRITICAL one then holds 60 while it records itself, so that no other 60 fits
        // beside it and the first name recorded is its own.
        let weighed = |name: &'static str, p: Priority, units: usize| {
            let (gate, order) = (Arc::clone(&gate), Arc::clone(&order));
            std::thread::spawn(move || {
                let turn = Turn {
                    priority: p,
                    cancel: None,
                };
                let permit = gate.enter_with(turn, units).expect("room");
                order.lock().unwrap().push(name);
                std::thread::sleep(Duration::from_millis(20));
                drop(permit);
            })
        };
        let n60 = weighed("n60", Priority::Normal, 60);
        wait_until(|| waiting(&gate) == 1);
        let c60 = weighed("c60", Priority::Critical, 60);
        wait_until(|| waiting(&gate) == 2);
        let n30 = weighed("n30", Priority::Normal, 30);
        wait_until(|| waiting(&gate) == 3);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            order.lock().unwrap().is_empty(),
            "none passes the first in line"
        );
        drop(held);
        for t in [n60, c60, n30] {
            t.join().unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order.len(), 3);
        assert_eq!(order[0], "c60");
        assert_eq!(gate.in_use(), 0);
        // Units beyond the capacity are taken as the whole of it, never waited for forever.
        let all = gate.enter_with(Turn::NORMAL, 1000).expect("the whole gate");
        assert_eq!(gate.in_use(), 100);
        drop(all);
    }

    #[test]
    fn an_unlimited_gate_never_waits_and_reserves_nothing() {
        let gates = Gates::new(Scheduling::UNLIMITED);
        let permits: Vec<_> = (0..100)
            .map(|_| gates.engine.enter(Turn::NORMAL).expect("room"))
            .collect();
        assert_eq!(gates.engine.reserved, 0);
        assert_eq!(gates.engine.lock().in_use, 100);
        drop(permits);
        assert_eq!(gates.engine.lock().in_use, 0);
        assert_eq!(gates.synthesis.stage, Stage::Synthesis);
    }
}
