//! Adaptive concurrency (AIMD): when a queue's target says it is overloaded (`429`, `503`,
//! or an attempt that timed out), the deliveries the queue may have in flight are halved;
//! every delivered job then adds `1 / effective`, so the limit grows back by one per
//! window of that many successes, up to the queue's `concurrency`. A target that buckles
//! under load gets less of it at once, and gets it back as it copes. Halving happens at
//! most once a second: the failures of deliveries already in flight when the target
//! faltered are the same signal, not new ones.

use std::time::{Duration, Instant};

use super::per_queue::PerQueue;
use crate::model::QueueName;

/// The least time between two halvings of one queue's limit.
pub const DECREASE_INTERVAL: Duration = Duration::from_secs(1);

/// What an attempt says about its target's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// Delivered: the target copes.
    Coping,
    /// `429`, `503` or a timeout: the target is struggling.
    Overloaded,
    /// Any other failure: says nothing about load.
    Unrelated,
}

#[derive(Default)]
pub struct AdaptiveConcurrency {
    /// Queues below their limit; a queue at its limit has no entry.
    states: PerQueue<State>,
}

struct State {
    effective: f64,
    last_decrease: Instant,
}

impl AdaptiveConcurrency {
    /// Deliveries `queue` may have in flight now, its limit being `limit`.
    pub fn effective(&self, queue: &QueueName, limit: usize) -> usize {
        match self.states.lock().get(queue) {
            Some(state) => (state.effective.floor() as usize).clamp(1, limit.max(1)),
            None => limit,
        }
    }

    /// Take one attempt's word on the target's load.
    pub fn record(&self, queue: &QueueName, load: Load, limit: usize, now: Instant) {
        let limit = limit.max(1) as f64;
        let mut states = self.states.lock();
        match load {
            Load::Unrelated => {}
            Load::Overloaded => match states.get_mut(queue) {
                Some(state)
                    if now.saturating_duration_since(state.last_decrease) < DECREASE_INTERVAL => {}
                Some(state) => {
                    state.effective = (state.effective.min(limit) / 2.0).max(1.0);
                    state.last_decrease = now;
                }
                None => {
                    states.insert(
                        queue.clone(),
                        State {
                            effective: (limit / 2.0).max(1.0),
                            last_decrease: now,
                        },
                    );
                }
            },
            Load::Coping => {
                if let Some(state) = states.get_mut(queue) {
                    state.effective += 1.0 / state.effective;
                    if state.effective >= limit {
                        states.remove(queue);
                    }
                }
            }
        }
    }

    /// `queue` is gone.
    pub fn forget(&self, queue: &QueueName) {
        self.states.forget(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_halves_the_limit_and_successes_win_it_back() {
        let adaptive = AdaptiveConcurrency::default();
        let q = QueueName::parse("q").unwrap();
        let t0 = Instant::now();
        assert_eq!(adaptive.effective(&q, 16), 16);
        adaptive.record(&q, Load::Overloaded, 16, t0);
        assert_eq!(adaptive.effective(&q, 16), 8);
        // The failures of deliveries already in flight are the same signal.
        adaptive.record(&q, Load::Overloaded, 16, t0 + Duration::from_millis(500));
        assert_eq!(adaptive.effective(&q, 16), 8);
        adaptive.record(&q, Load::Overloaded, 16, t0 + Duration::from_secs(1));
        assert_eq!(adaptive.effective(&q, 16), 4);
        adaptive.record(&q, Load::Unrelated, 16, t0 + Duration::from_secs(1));
        assert_eq!(adaptive.effective(&q, 16), 4);
        // Never below one.
        for s in 2..10 {
            adaptive.record(&q, Load::Overloaded, 16, t0 + Duration::from_secs(s));
        }
        assert_eq!(adaptive.effective(&q, 16), 1);
        // Additive increase: one more per `effective` successes, back up to the limit.
        let mut successes = 0;
        while adaptive.effective(&q, 16) < 16 {
            adaptive.record(&q, Load::Coping, 16, t0 + Duration::from_secs(20));
            successes += 1;
            assert!(successes < 200, "it recovers");
        }
        assert!(successes > 15, "{successes}: not at once");
        assert!(adaptive.states.lock().is_empty(), "at its limit: no state");
    }
}
