//! What a device keeps resident between jobs: proving keys' points and recordings' matrices,
//! several at once under the VRAM budget. A job's own key and recording are placed as if the
//! device held nothing else; the others stay only while the job's plan beside them is as fast
//! as without them, and the least recently used go first ([`Residents::evict_other`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use zkpipe_r1cs::Digest;

use super::memory::{ResidentKey, ResidentRecording};

/// Something kept resident on a device: what names it, and the budget bytes it holds.
pub(crate) trait Resident {
    type Id: Copy + PartialEq + std::fmt::Display;
    fn id(&self) -> Self::Id;
    fn bytes(&self) -> usize;
}

impl Resident for ResidentKey {
    /// The key's [`crate::ProvingKey::id`].
    type Id = u64;
    fn id(&self) -> u64 {
        self.key
    }
    fn bytes(&self) -> usize {
        self.grant.bytes()
    }
}

impl Resident for ResidentRecording {
    /// The recording's content: one copy serves every circuit of the same content.
    type Id = Digest;
    fn id(&self) -> Digest {
        self.digest
    }
    fn bytes(&self) -> usize {
        self.grant.bytes()
    }
}

/// What a job keeps for itself: its key, and its recording if it is a recorded job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Own<K: Resident, R: Resident> {
    pub key: K::Id,
    pub recording: Option<R::Id>,
}

/// One thing kept, and when it was last used (a count of uses of the set).
#[derive(Debug)]
enum Entry<K, R> {
    Key(Arc<K>, u64),
    Recording(Arc<R>, u64),
}

impl<K: Resident, R: Resident> Entry<K, R> {
    fn bytes(&self) -> usize {
        match self {
            Entry::Key(k, _) => k.bytes(),
            Entry::Recording(r, _) => r.bytes(),
        }
    }

    fn used(&self) -> u64 {
        match self {
            Entry::Key(_, t) | Entry::Recording(_, t) => *t,
        }
    }

    fn is_own(&self, own: &Own<K, R>) -> bool {
        match self {
            Entry::Key(k, _) => k.id() == own.key,
            Entry::Recording(r, _) => Some(r.id()) == own.recording,
        }
    }
}

/// Something given up: what it was, and its bytes (back in the budget once no running job
/// holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evicted<K: Resident, R: Resident> {
    Key { id: K::Id, bytes: usize },
    Recording { id: R::Id, bytes: usize },
}

impl<K: Resident, R: Resident> std::fmt::Display for Evicted<K, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Evicted::Key { id, bytes } => write!(f, "key {id} ({bytes} bytes)"),
            Evicted::Recording { id, bytes } => write!(f, "recording {id} ({bytes} bytes)"),
        }
    }
}

/// The keys and recordings a device keeps, each held by an `Arc` that running jobs share:
/// one given up while a job uses it stays on the device until that job ends.
#[derive(Debug)]
pub(crate) struct Residents<K = ResidentKey, R = ResidentRecording> {
    entries: Vec<Entry<K, R>>,
    uses: u64,
}

impl<K, R> Default for Residents<K, R> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            uses: 0,
        }
    }
}

impl<K: Resident, R: Resident> Residents<K, R> {
    fn tick(&mut self) -> u64 {
        self.uses += 1;
        self.uses
    }

    /// The key `id` if it is kept, marked as used now.
    pub fn key(&mut self, id: K::Id) -> Option<Arc<K>> {
        let now = self.tick();
        self.entries.iter_mut().find_map(|e| match e {
            Entry::Key(k, used) if k.id() == id => {
                *used = now;
                Some(Arc::clone(k))
            }
            _ => None,
        })
    }

    /// The recording of content `id` if it is kept, marked as used now.
    pub fn recording(&mut self, id: R::Id) -> Option<Arc<R>> {
        let now = self.tick();
        self.entries.iter_mut().find_map(|e| match e {
            Entry::Recording(r, used) if r.id() == id => {
                *used = now;
                Some(Arc::clone(r))
            }
            _ => None,
        })
    }

    /// Keeps `key` (in place of a copy of the same key, if one is kept).
    pub fn add_key(&mut self, key: Arc<K>) {
        let id = key.id();
        self.entries
            .retain(|e| !matches!(e, Entry::Key(k, _) if k.id() == id));
        let now = self.tick();
        self.entries.push(Entry::Key(key, now));
    }

    /// Keeps `recording` (in place of a copy of the same content, if one is kept).
    pub fn add_recording(&mut self, recording: Arc<R>) {
        let id = recording.id();
        self.entries
            .retain(|e| !matches!(e, Entry::Recording(r, _) if r.id() == id));
        let now = self.tick();
        self.entries.push(Entry::Recording(recording, now));
    }

    /// Bytes of everything kept.
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(Entry::bytes).sum()
    }

    /// Bytes of what is kept besides `own`.
    pub fn others_bytes(&self, own: &Own<K, R>) -> usize {
        self.entries
            .iter()
            .filter(|e| !e.is_own(own))
            .map(Entry::bytes)
            .sum()
    }

    /// Gives up the least recently used of what is kept besides `own`; `None` when nothing
    /// else is kept.
    pub fn evict_other(&mut self, own: &Own<K, R>) -> Option<Evicted<K, R>> {
        let at = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.is_own(own))
            .min_by_key(|(_, e)| e.used())
            .map(|(i, _)| i)?;
        Some(match self.entries.remove(at) {
            Entry::Key(k, _) => Evicted::Key {
                id: k.id(),
                bytes: k.bytes(),
            },
            Entry::Recording(r, _) => Evicted::Recording {
                id: r.id(),
                bytes: r.bytes(),
            },
        })
    }

    /// Gives up what is kept besides `own`, the least recently used first, until
    /// `fast_beside(bytes of what stays)` holds or nothing else is kept; what was given up.
    pub fn evict_until(
        &mut self,
        own: &Own<K, R>,
        fast_beside: impl Fn(usize) -> bool,
    ) -> Vec<Evicted<K, R>> {
        let mut gone = Vec::new();
        loop {
            let others = self.others_bytes(own);
            if others == 0 || fast_beside(others) {
                return gone;
            }
            match self.evict_other(own) {
                Some(e) => gone.push(e),
                None => return gone,
            }
        }
    }

    /// Gives up the key `id` if no job uses it; its bytes (0 when it is not kept or in use).
    pub fn release_key(&mut self, id: K::Id) -> usize {
        let at = self.entries.iter().position(
            |e| matches!(e, Entry::Key(k, _) if k.id() == id && Arc::strong_count(k) == 1),
        );
        at.map_or(0, |at| self.entries.remove(at).bytes())
    }

    /// Gives up the recording of content `id` if no job uses it; its bytes (0 when it is not
    /// kept or in use).
    pub fn release_recording(&mut self, id: R::Id) -> usize {
        let at = self.entries.iter().position(
            |e| matches!(e, Entry::Recording(r, _) if r.id() == id && Arc::strong_count(r) == 1),
        );
        at.map_or(0, |at| self.entries.remove(at).bytes())
    }
}

/// [`Residents`] behind a lock, with their bytes readable without it (a status never waits
/// for an upload).
#[derive(Debug)]
pub(crate) struct ResidentSet<K = ResidentKey, R = ResidentRecording> {
    residents: Mutex<Residents<K, R>>,
    bytes: AtomicUsize,
}

impl<K, R> Default for ResidentSet<K, R> {
    fn default() -> Self {
        Self {
            residents: Mutex::new(Residents::default()),
            bytes: AtomicUsize::new(0),
        }
    }
}

/// The locked set; its bytes are published again when the lock goes.
pub(crate) struct ResidentsGuard<'a, K: Resident = ResidentKey, R: Resident = ResidentRecording> {
    guard: MutexGuard<'a, Residents<K, R>>,
    bytes: &'a AtomicUsize,
}

impl<K: Resident, R: Resident> ResidentSet<K, R> {
    pub fn lock(&self) -> ResidentsGuard<'_, K, R> {
        ResidentsGuard {
            guard: self.residents.lock().unwrap_or_else(|p| p.into_inner()),
            bytes: &self.bytes,
        }
    }

    /// Budget bytes of what is kept, as of the last time the set was unlocked.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::SeqCst)
    }
}

impl<K: Resident, R: Resident> std::ops::Deref for ResidentsGuard<'_, K, R> {
    type Target = Residents<K, R>;
    fn deref(&self) -> &Residents<K, R> {
        &self.guard
    }
}

impl<K: Resident, R: Resident> std::ops::DerefMut for ResidentsGuard<'_, K, R> {
    fn deref_mut(&mut self) -> &mut Residents<K, R> {
        &mut self.guard
    }
}

impl<K: Resident, R: Resident> Drop for ResidentsGuard<'_, K, R> {
    fn drop(&mut self) {
        self.bytes.store(self.guard.bytes(), Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Thing {
        id: u32,
        bytes: usize,
    }

    impl Resident for Thing {
        type Id = u32;
        fn id(&self) -> u32 {
            self.id
        }
        fn bytes(&self) -> usize {
            self.bytes
        }
    }

    fn thing(id: u32, bytes: usize) -> Arc<Thing> {
        Arc::new(Thing { id, bytes })
    }

    type Set = Residents<Thing, Thing>;

    fn own(key: u32, recording: Option<u32>) -> Own<Thing, Thing> {
        Own { key, recording }
    }

    #[test]
    fn the_least_recently_used_other_goes_first_and_a_jobs_own_never() {
        let mut set = Set::default();
        set.add_key(thing(1, 100));
        set.add_key(thing(2, 10));
        set.add_recording(thing(7, 1000));
        // Key 1 used after the others were added: key 2 is now the oldest.
        assert!(set.key(1).is_some());
        let job = own(1, Some(7));
        assert_eq!(set.others_bytes(&job), 10);
        assert_eq!(
            set.evict_other(&job),
            Some(Evicted::Key { id: 2, bytes: 10 })
        );
        assert_eq!(
            set.evict_other(&job),
            None,
            "a job's own key and recording stay"
        );
        assert_eq!(set.bytes(), 1100);
        // Another job's view: the recording is older than key 1.
        let other = own(3, None);
        assert_eq!(
            set.evict_other(&other),
            Some(Evicted::Recording { id: 7, bytes: 1000 })
        );
        assert_eq!(
            set.evict_other(&other),
            Some(Evicted::Key { id: 1, bytes: 100 })
        );
        assert_eq!(set.bytes(), 0);
        assert_eq!(
            Evicted::<Thing, Thing>::Key { id: 1, bytes: 100 }.to_string(),
            "key 1 (100 bytes)"
        );
    }

    #[test]
    fn others_go_until_the_jobs_plan_beside_them_is_as_fast_as_alone() {
        use crate::plan::{choose, DeviceLoad, JobShape};
        const MIB: usize = 1 << 20;
        let shape = JobShape {
            n: 1 << 20,
            split: 64 * MIB,
            largest_msm: 1 << 20,
        };
        let msm_bytes = |chunk: usize| chunk * 200;
        let plan = |resident: usize| {
            let load = DeviceLoad {
                capacity: 1200 * MIB,
                resident_key: resident,
                tables: 16 * MIB,
                workers: 2,
            };
            choose(&load, &shape, &msm_bytes)
        };
        let own_bytes = 300 * MIB;
        let alone = plan(own_bytes).expect("the job fits alone");
        let mut set = Set::default();
        set.add_key(thing(1, 700 * MIB));
        set.add_key(thing(2, 40 * MIB));
        set.add_key(thing(3, own_bytes));
        set.add_recording(thing(9, 30 * MIB));
        let job = own(3, None);
        let fast = |others: usize| plan(own_bytes + others).is_ok_and(|p| p.as_fast_as(&alone));
        assert!(
            !fast(set.others_bytes(&job)),
            "all of them together slow the job"
        );
        let gone = set.evict_until(&job, fast);
        assert_eq!(
            gone,
            vec![Evicted::Key {
                id: 1,
                bytes: 700 * MIB
            }]
        );
        assert!(
            set.key(2).is_some() && set.recording(9).is_some(),
            "the small ones stay"
        );
        assert!(fast(set.others_bytes(&job)));
        assert!(set.evict_until(&job, fast).is_empty(), "nothing more goes");
    }

    #[test]
    fn a_key_and_a_recording_are_found_by_their_own_ids_only() {
        let mut set = Set::default();
        set.add_key(thing(5, 1));
        assert!(set.recording(5).is_none(), "a key is not a recording");
        assert!(set.key(5).is_some());
        set.add_key(thing(5, 2));
        assert_eq!(set.bytes(), 2, "a key added again replaces its copy");
    }

    #[test]
    fn a_key_or_recording_in_use_is_not_released() {
        let mut set = Set::default();
        set.add_key(thing(1, 100));
        let held = set.key(1).expect("kept");
        assert_eq!(set.release_key(1), 0);
        drop(held);
        assert_eq!(set.release_recording(1), 0, "a key is not a recording");
        assert_eq!(set.release_key(1), 100);
        assert_eq!(set.release_key(1), 0, "released once");
        set.add_recording(thing(4, 40));
        let held = set.recording(4).expect("kept");
        assert_eq!(set.release_recording(4), 0);
        drop(held);
        assert_eq!(set.release_recording(4), 40);
    }

    #[test]
    fn the_bytes_are_published_when_the_lock_goes() {
        let set = ResidentSet::<Thing, Thing>::default();
        let mut guard = set.lock();
        guard.add_key(thing(1, 100));
        guard.add_recording(thing(2, 20));
        assert_eq!(set.bytes(), 0, "not while the lock is held");
        drop(guard);
        assert_eq!(set.bytes(), 120);
        let mut guard = set.lock();
        guard.evict_other(&own(1, None));
        drop(guard);
        assert_eq!(set.bytes(), 100);
    }
}
