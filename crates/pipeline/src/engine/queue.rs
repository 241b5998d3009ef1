//! The job queue in two lanes: a worker that frees takes the urgent lane's next job before
//! any routine one, so that a caller may keep routine jobs waiting in the engine (a worker
//! never idles while the next one is made) without making urgent work wait behind them.

use std::time::Duration;

use crossbeam::channel::{bounded, Receiver, SendTimeoutError, Sender};

/// The lane a job waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lane {
    /// In order of submission, after every urgent job. Default.
    #[default]
    Routine,
    /// Taken before every routine job (work with a chain deadline: a WinningPoSt).
    Urgent,
}

/// What waits in a lane.
pub(super) trait Laned {
    fn lane(&self) -> Lane;
}

/// The sending side: each item goes to its own lane.
#[derive(Debug)]
pub(super) struct Queue<T> {
    routine: Sender<T>,
    urgent: Sender<T>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            routine: self.routine.clone(),
            urgent: self.urgent.clone(),
        }
    }
}

/// The taking side, shared by the workers: an iterator of items, urgent ones first, that
/// ends once both lanes are closed and empty.
#[derive(Debug)]
pub(super) struct Taker<T> {
    routine: Receiver<T>,
    urgent: Receiver<T>,
}

impl<T> Clone for Taker<T> {
    fn clone(&self) -> Self {
        Self {
            routine: self.routine.clone(),
            urgent: self.urgent.clone(),
        }
    }
}

/// A queue of `capacity` items a lane.
pub(super) fn queue<T>(capacity: usize) -> (Queue<T>, Taker<T>) {
    let (routine, routine_rx) = bounded(capacity.max(1));
    let (urgent, urgent_rx) = bounded(capacity.max(1));
    (
        Queue { routine, urgent },
        Taker {
            routine: routine_rx,
            urgent: urgent_rx,
        },
    )
}

impl<T: Laned> Queue<T> {
    fn lane(&self, item: &T) -> &Sender<T> {
        match item.lane() {
            Lane::Routine => &self.routine,
            Lane::Urgent => &self.urgent,
        }
    }

    /// Sends `item` to its lane, waiting while the lane is full; gives it back once the
    /// takers are gone.
    pub fn send(&self, item: T) -> Result<(), T> {
        self.lane(&item).send(item).map_err(|e| e.0)
    }

    /// As [`Queue::send`], waiting at most `wait`.
    pub fn send_timeout(&self, item: T, wait: Duration) -> Result<(), SendTimeoutError<T>> {
        self.lane(&item).send_timeout(item, wait)
    }
}

impl<T> Iterator for Taker<T> {
    type Item = T;

    /// The urgent lane's next item if one is there, else the first to come in either lane;
    /// `None` once both lanes are closed and empty (both close together: the engine drops
    /// its [`Queue`] at once).
    fn next(&mut self) -> Option<T> {
        if let Ok(item) = self.urgent.try_recv() {
            return Some(item);
        }
        crossbeam::channel::select_biased! {
            recv(self.urgent) -> item => item.ok().or_else(|| self.routine.recv().ok()),
            recv(self.routine) -> item => item.ok().or_else(|| self.urgent.recv().ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    struct Item(Lane, u32);

    impl Laned for Item {
        fn lane(&self) -> Lane {
            self.0
        }
    }

    #[test]
    fn an_urgent_item_is_taken_before_routine_ones_queued_earlier() {
        let (q, mut take) = queue::<Item>(4);
        for i in 0..3 {
            q.send(Item(Lane::Routine, i)).unwrap();
        }
        q.send(Item(Lane::Urgent, 10)).unwrap();
        assert_eq!(take.next(), Some(Item(Lane::Urgent, 10)));
        // Routine items in the order they came.
        assert_eq!(take.next(), Some(Item(Lane::Routine, 0)));
        q.send(Item(Lane::Urgent, 11)).unwrap();
        assert_eq!(take.next(), Some(Item(Lane::Urgent, 11)));
        assert_eq!(take.next(), Some(Item(Lane::Routine, 1)));
        assert_eq!(take.next(), Some(Item(Lane::Routine, 2)));
    }

    #[test]
    fn a_closed_queue_is_drained_in_both_lanes_then_ends() {
        let (q, take) = queue::<Item>(4);
        q.send(Item(Lane::Routine, 1)).unwrap();
        q.send(Item(Lane::Urgent, 2)).unwrap();
        q.send(Item(Lane::Routine, 3)).unwrap();
        drop(q);
        let got: Vec<u32> = take.map(|i| i.1).collect();
        assert_eq!(got, [2, 1, 3]);
    }

    #[test]
    fn a_waiting_taker_gets_an_item_sent_to_either_lane() {
        for lane in [Lane::Routine, Lane::Urgent] {
            let (q, mut take) = queue::<Item>(1);
            let taker = std::thread::spawn(move || take.next());
            std::thread::sleep(Duration::from_millis(20));
            q.send(Item(lane, 5)).unwrap();
            assert_eq!(taker.join().unwrap(), Some(Item(lane, 5)));
        }
    }

    #[test]
    fn a_full_lane_does_not_hold_up_the_other() {
        let (q, _take) = queue::<Item>(1);
        q.send(Item(Lane::Routine, 1)).unwrap();
        let wait = Duration::from_millis(10);
        assert!(matches!(
            q.send_timeout(Item(Lane::Routine, 2), wait),
            Err(SendTimeoutError::Timeout(Item(Lane::Routine, 2)))
        ));
        assert_eq!(q.send_timeout(Item(Lane::Urgent, 3), wait).ok(), Some(()));
    }

    #[test]
    fn items_sent_after_the_takers_are_gone_come_back() {
        let (q, take) = queue::<Item>(1);
        drop(take);
        assert_eq!(q.send(Item(Lane::Urgent, 4)), Err(Item(Lane::Urgent, 4)));
    }
}
