//! The pinned pool against a model of it (issue 14's fuzzing), on a GPU: any sequence of
//! requests, waits, returns (some after a copy's event) and shrinks answers as the model says,
//! counts what the model counts, and never hands out memory that another live buffer uses.
//! `ZKPIPE_FUZZ_CASES` sets the number of cases (256 by default).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use zkpipe_cuda::testing::gpu_context;
use zkpipe_cuda::{Context, Event, Stream};
use zkpipe_pinned::{Error, PinnedPool, PooledBuffer};

fn cases() -> u32 {
    std::env::var("ZKPIPE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// One context for every case (`None`, and the skip line once, without a GPU).
fn context() -> Option<Arc<Context>> {
    static CTX: OnceLock<Option<Arc<Context>>> = OnceLock::new();
    CTX.get_or_init(gpu_context).clone()
}

#[derive(Debug, Clone)]
enum Op {
    /// `try_acquire` of this many bytes.
    Take(usize),
    /// `acquire` of this many bytes with no time to wait.
    Wait(usize),
    /// Return the live buffer at this index (modulo the live ones).
    Return(usize),
    /// Return it after an event recorded on a stream (reused only once the event completes).
    ReturnAfterEvent(usize),
    /// Free every idle buffer.
    Shrink,
}

fn op(limit: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..limit * 2).prop_map(Op::Take),
        2 => (0..limit * 2).prop_map(Op::Wait),
        3 => any::<usize>().prop_map(Op::Return),
        2 => any::<usize>().prop_map(Op::ReturnAfterEvent),
        1 => Just(Op::Shrink),
    ]
}

/// The pool as documented: size classes (a power of two from 4 KiB below 64 MiB), idle buffers
/// reused by class, idle buffers of other classes (smallest first) freed when the bound would be
/// passed.
#[derive(Debug, Default)]
struct Model {
    limit: usize,
    held: usize,
    in_use: usize,
    high_water: usize,
    allocations: u64,
    reuses: u64,
    idle: BTreeMap<usize, usize>,
}

fn class(bytes: usize) -> usize {
    bytes.max(4096).next_power_of_two()
}

impl Model {
    /// The class handed out, `None` when the bound does not allow it now.
    fn take(&mut self, bytes: usize) -> Option<usize> {
        let c = class(bytes);
        if let Some(n) = self.idle.get_mut(&c).filter(|n| **n > 0) {
            *n -= 1;
            self.reuses += 1;
            return Some(self.count_out(c));
        }
        while self.held + c > self.limit {
            let (&other, n) = self.idle.iter_mut().find(|(_, n)| **n > 0)?;
            *n -= 1;
            self.held -= other;
        }
        self.allocations += 1;
        self.held += c;
        Some(self.count_out(c))
    }

    fn count_out(&mut self, c: usize) -> usize {
        self.in_use += c;
        self.high_water = self.high_water.max(self.in_use);
        c
    }

    fn give_back(&mut self, c: usize) {
        self.in_use -= c;
        *self.idle.entry(c).or_default() += 1;
    }

    fn shrink(&mut self) {
        for (c, n) in std::mem::take(&mut self.idle) {
            self.held -= c * n;
        }
    }
}

/// A live buffer and the byte it was filled with.
struct Live {
    buf: PooledBuffer<u8>,
    tag: u8,
}

impl Live {
    fn new(mut buf: PooledBuffer<u8>, tag: u8) -> Self {
        buf.fill(tag);
        Self { buf, tag }
    }

    /// No other buffer wrote into this one.
    fn intact(&self) -> bool {
        self.buf.iter().all(|&b| b == self.tag)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_pinned_pool_answers_as_a_model_of_it(
        (limit, ops) in (4096usize..4 << 20).prop_flat_map(|l| {
            (Just(l), proptest::collection::vec(op(l), 0..48))
        }),
    ) {
        let Some(ctx) = context() else { return Ok(()) };
        let stream = Stream::new(&ctx).unwrap();
        let pool = PinnedPool::new(&ctx, limit);
        let mut model = Model { limit, ..Model::default() };
        let mut live: Vec<Live> = Vec::new();
        let mut tag = 0u8;
        for o in ops {
            match o {
                Op::Take(bytes) | Op::Wait(bytes) => {
                    let got = match o {
                        Op::Take(_) => pool.try_acquire::<u8>(bytes),
                        _ => match pool.acquire::<u8>(bytes, Duration::ZERO) {
                            Err(Error::Timeout { requested, in_use, limit: l, .. }) => {
                                prop_assert_eq!(
                                    (requested, in_use, l),
                                    (class(bytes), model.in_use, limit)
                                );
                                Ok(None)
                            }
                            r => r.map(Some),
                        },
                    };
                    match got {
                        Err(Error::PoolTooSmall { requested, limit: l }) => {
                            prop_assert!(class(bytes) > limit);
                            prop_assert_eq!((requested, l), (bytes, limit));
                        }
                        Err(e) => prop_assert!(false, "unexpected error {e}"),
                        Ok(got) => {
                            prop_assert!(class(bytes) <= limit);
                            let expected = model.take(bytes);
                            prop_assert_eq!(got.as_ref().map(PooledBuffer::capacity_bytes), expected);
                            if let Some(buf) = got {
                                prop_assert_eq!(buf.len(), bytes);
                                tag = tag.wrapping_add(1);
                                live.push(Live::new(buf, tag));
                            }
                        }
                    }
                }
                Op::Return(i) | Op::ReturnAfterEvent(i) if !live.is_empty() => {
                    let n = live.len();
                    let l = live.swap_remove(i % n);
                    prop_assert!(l.intact(), "a live buffer was overwritten");
                    model.give_back(l.buf.capacity_bytes());
                    if let Op::ReturnAfterEvent(_) = o {
                        let ev = Event::new(&ctx, zkpipe_cuda::Timing::Disabled).unwrap();
                        ev.record(&stream).unwrap();
                        l.buf.release_after(ev);
                    }
                }
                Op::Shrink => {
                    prop_assert!(pool.shrink().is_ok());
                    model.shrink();
                }
                _ => {}
            }
            let s = pool.stats();
            prop_assert_eq!(
                (s.limit, s.bytes_in_use, s.bytes_held, s.high_water, s.allocations, s.reuses),
                (limit, model.in_use, model.held, model.high_water, model.allocations, model.reuses)
            );
            prop_assert!(s.bytes_held <= limit);
            prop_assert!(live.iter().all(Live::intact), "a live buffer was overwritten");
        }
        drop(live);
        prop_assert_eq!(pool.stats().bytes_in_use, 0);
        prop_assert!(pool.shrink().is_ok());
        prop_assert_eq!(pool.stats().bytes_held, 0);
    }
}
