//! Turns at judging: how many calls judge node states the verdict cache lacks at once.
//!
//! A call whose verdicts are cached answers in microseconds; a call for a new pod shape
//! judges every node state it has not seen, on every core it may use. Without a bound,
//! a burst of new, heavy shapes (each judged for up to the work budget) takes every core,
//! and the ordinary calls the cache answers, and `/healthz`, wait behind them for the
//! CPU. With turns, at most [`Turns::for_cores`] calls (one fewer than the cores, at least
//! one) judge at once, in arrival order; the others wait for a turn within their own work
//! budget, and those still waiting when it runs out judge nothing (their node states pass
//! with a neutral score, as any node a budget leaves unjudged). A call in its turn still
//! spreads its states over several threads ([`crate::Decider`]), so one call alone is as
//! fast as before.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Turns at judging, handed out first come, first served.
#[derive(Debug)]
pub struct Turns {
    state: Mutex<Queue>,
    changed: Condvar,
}

#[derive(Debug)]
struct Queue {
    /// Turns not taken.
    free: usize,
    /// Callers waiting, by ticket, in arrival order.
    waiting: VecDeque<u64>,
    /// The next ticket.
    next: u64,
}

/// A turn: given back when dropped.
#[derive(Debug)]
pub struct Turn<'a>(&'a Turns);

impl Turns {
    /// `n` turns (at least one).
    pub fn new(n: usize) -> Self {
        Turns {
            state: Mutex::new(Queue {
                free: n.max(1),
                waiting: VecDeque::new(),
                next: 0,
            }),
            changed: Condvar::new(),
        }
    }

    /// One turn fewer than the cores this process may use (at least one), so that a
    /// core is left to the calls the cache answers.
    pub fn for_cores() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Turns::new(cores.saturating_sub(1))
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a turn, after the callers that came first, until `deadline` (`None`:
    /// for as long as it takes); `None` when the deadline passed first.
    pub fn take(&self, deadline: Option<Instant>) -> Option<Turn<'_>> {
        let mut q = self.lock();
        let ticket = q.next;
        q.next += 1;
        q.waiting.push_back(ticket);
        loop {
            if q.free > 0 && q.waiting.front() == Some(&ticket) {
                q.waiting.pop_front();
                q.free -= 1;
                // The next in line may find a turn free too.
                self.changed.notify_all();
                return Some(Turn(self));
            }
            q = match deadline {
                None => self.changed.wait(q).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        q.waiting.retain(|t| *t != ticket);
                        self.changed.notify_all();
                        return None;
                    }
                    self.changed
                        .wait_timeout(q, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// Turns not taken now.
    pub fn free(&self) -> usize {
        self.lock().free
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.lock().free += 1;
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn no_more_than_n_hold_a_turn_at_once() {
        let turns = Arc::new(Turns::new(2));
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (turns, now, most) = (turns.clone(), now.clone(), most.clone());
                std::thread::spawn(move || {
                    let _t = turns.take(None).unwrap();
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(turns.free(), 2, "every turn given back");
    }

    #[test]
    fn turns_go_in_arrival_order() {
        let turns = Arc::new(Turns::new(1));
        let first = turns.take(None).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for k in 0..4 {
            let (mine, order) = (turns.clone(), order.clone());
            waiting.push(std::thread::spawn(move || {
                let _t = mine.take(None).unwrap();
                order.lock().unwrap().push(k);
            }));
            // Each waiter queues before the next one starts.
            while turns.lock().waiting.len() < k + 1 {
                std::thread::yield_now();
            }
        }
        drop(first);
        for t in waiting {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_caller_past_its_deadline_leaves_the_line_without_a_turn() {
        let turns = Turns::new(1);
        let held = turns.take(None).unwrap();
        let t0 = Instant::now();
        assert!(turns.take(Some(t0 + Duration::from_millis(30))).is_none());
        assert!(t0.elapsed() >= Duration::from_millis(30));
        assert!(turns.lock().waiting.is_empty(), "it left the line");
        drop(held);
        assert!(
            turns.take(Some(Instant::now())).is_some(),
            "a free turn is taken at once"
        );
    }

    #[test]
    fn there_is_always_at_least_one_turn() {
        assert_eq!(Turns::new(0).free(), 1);
        assert!(Turns::for_cores().free() >= 1);
    }
}
