//! Per-queue circuit breakers: a target that keeps failing is given a rest instead of being
//! hammered with every due job, and its jobs keep their attempts while it rests.
//!
//! `closed` → (N consecutive failed attempts) → `open` for a cool-down → `half-open`: one
//! probe job is sent; its success closes the breaker, its failure opens it again for twice
//! the previous cool-down (capped). While open, the dispatcher claims nothing from the queue:
//! the jobs stay READY, their attempts untouched.

use std::sync::Arc;
use std::time::Duration;

use super::per_queue::PerQueue;
use crate::model::{QueueName, UnixMillis};
use crate::telemetry;

/// The longest a breaker stays open between probes.
pub const MAX_COOLDOWN: Duration = Duration::from_secs(600);

/// What the dispatcher may claim from a queue right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Closed: as many as there is room for.
    Any,
    /// Half-open: one probe.
    Probe,
    /// Open until this time: nothing.
    Wait(UnixMillis),
}

/// A change of a breaker's state, as [`Breakers::record`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Closed → open: the target failed `threshold` attempts in a row; its deliveries pause
    /// for `cooldown_ms`.
    Opened { cooldown_ms: i64 },
    /// The probe failed: open again, for `cooldown_ms` (twice the last, capped).
    Reopened { cooldown_ms: i64 },
    /// Open or half-open → closed: the target answers again.
    Closed,
}

/// Where a queue's breaker stands, as its stats show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Deliveries flow.
    Closed,
    /// Resting after repeated failures (a probe goes out when the pause is over).
    Open,
    /// One probe is out or about to be; its outcome closes or reopens the breaker.
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half-open",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until: UnixMillis, cooldown_ms: i64 },
    HalfOpen { probing: bool, cooldown_ms: i64 },
}

#[derive(Clone)]
pub struct Breakers {
    /// Consecutive failures that open a breaker; 0 turns breakers off.
    threshold: u32,
    cooldown: Duration,
    states: Arc<PerQueue<State>>,
}

impl Breakers {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold,
            cooldown,
            states: Arc::default(),
        }
    }

    /// Whether jobs of `queue` may be claimed at `now`. A half-open breaker hands out its
    /// single probe here.
    pub fn permit(&self, queue: &QueueName, now: UnixMillis) -> Permit {
        let mut states = self.states.lock();
        let Some(state) = states.get_mut(queue) else {
            return Permit::Any;
        };
        match *state {
            State::Closed { .. } => Permit::Any,
            State::Open { until, cooldown_ms } if now >= until => {
                *state = State::HalfOpen {
                    probing: true,
                    cooldown_ms,
                };
                telemetry::breaker_state(queue, telemetry::BREAKER_HALF_OPEN);
                Permit::Probe
            }
            State::Open { until, .. } => Permit::Wait(until),
            State::HalfOpen {
                probing: false,
                cooldown_ms,
            } => {
                *state = State::HalfOpen {
                    probing: true,
                    cooldown_ms,
                };
                Permit::Probe
            }
            // The probe is out: wait for its outcome (which reports back here).
            State::HalfOpen { probing: true, .. } => Permit::Wait(now + 1000),
        }
    }

    /// Whether `queue`'s breaker is closed. Unlike [`permit`](Self::permit), it changes
    /// nothing: an open breaker whose pause is over stays for the claim loop to probe.
    pub fn is_closed(&self, queue: &QueueName) -> bool {
        matches!(
            self.states.lock().get(queue),
            None | Some(State::Closed { .. })
        )
    }

    /// Where `queue`'s breaker stands, for its stats. Changes nothing.
    pub fn state(&self, queue: &QueueName) -> BreakerState {
        match self.states.lock().get(queue) {
            None | Some(State::Closed { .. }) => BreakerState::Closed,
            Some(State::Open { .. }) => BreakerState::Open,
            Some(State::HalfOpen { .. }) => BreakerState::HalfOpen,
        }
    }

    /// When `queue`'s open breaker lets its next probe through; `None` unless it is open.
    /// Changes nothing.
    pub fn probe_at(&self, queue: &QueueName) -> Option<UnixMillis> {
        match self.states.lock().get(queue) {
            Some(State::Open { until, .. }) => Some(*until),
            _ => None,
        }
    }

    /// A claimed probe found no job to send: hand the probe back.
    pub fn probe_unused(&self, queue: &QueueName) {
        if let Some(State::HalfOpen { probing, .. }) = self.states.lock().get_mut(queue) {
            *probing = false;
        }
    }

    /// Record an attempt's result; returns the change of state it made, if any.
    pub fn record(&self, queue: &QueueName, success: bool, now: UnixMillis) -> Option<Transition> {
        if self.threshold == 0 {
            return None;
        }
        let base_ms = self.cooldown.as_millis() as i64;
        let max_ms = MAX_COOLDOWN.as_millis() as i64;
        let mut states = self.states.lock();
        let state = states
            .entry(queue.clone())
            .or_insert(State::Closed { failures: 0 });
        let (next, transition) = match (*state, success) {
            (State::HalfOpen { .. }, true) => {
                (State::Closed { failures: 0 }, Some(Transition::Closed))
            }
            (State::Closed { .. }, true) => (State::Closed { failures: 0 }, None),
            (State::Closed { failures }, false) if failures + 1 >= self.threshold => (
                State::Open {
                    until: now + base_ms,
                    cooldown_ms: base_ms,
                },
                Some(Transition::Opened {
                    cooldown_ms: base_ms,
                }),
            ),
            (State::Closed { failures }, false) => (
                State::Closed {
                    failures: failures + 1,
                },
                None,
            ),
            (State::HalfOpen { cooldown_ms, .. }, false) => {
                let cooldown_ms = (cooldown_ms * 2).min(max_ms);
                (
                    State::Open {
                        until: now + cooldown_ms,
                        cooldown_ms,
                    },
                    Some(Transition::Reopened { cooldown_ms }),
                )
            }
            // Outcomes of jobs sent before the breaker opened: nothing new to learn.
            (open @ State::Open { .. }, _) => (open, None),
        };
        *state = next;
        match transition {
            Some(Transition::Closed) => {
                telemetry::breaker_state(queue, telemetry::BREAKER_CLOSED);
                tracing::info!(queue = %queue, "circuit closed: the target answers again");
            }
            Some(Transition::Opened { cooldown_ms } | Transition::Reopened { cooldown_ms }) => {
                telemetry::breaker_state(queue, telemetry::BREAKER_OPEN);
                tracing::warn!(
                    queue = %queue,
                    pause_ms = cooldown_ms,
                    "circuit open: the target keeps failing; pausing its deliveries"
                );
            }
            None => {}
        }
        transition
    }

    /// Another node sharing the database opened `queue`'s breaker until `until`: rest the
    /// target here too, until then. A breaker open here for longer already, or half-open
    /// with its probe, stays as it is; a closed one opens without counting failures of its
    /// own. After `until` this node sends its own probe.
    pub fn opened_elsewhere(&self, queue: &QueueName, until: UnixMillis, now: UnixMillis) {
        if self.threshold == 0 || until <= now {
            return;
        }
        let base_ms = self.cooldown.as_millis() as i64;
        let mut states = self.states.lock();
        let state = states
            .entry(queue.clone())
            .or_insert(State::Closed { failures: 0 });
        match *state {
            State::Closed { .. } => {
                *state = State::Open {
                    until,
                    cooldown_ms: (until - now).max(base_ms),
                };
                telemetry::breaker_state(queue, telemetry::BREAKER_OPEN);
                tracing::warn!(
                    queue = %queue,
                    pause_ms = until - now,
                    "circuit open on another node: pausing this node's deliveries too"
                );
            }
            State::Open {
                until: here,
                cooldown_ms,
            } if here < until => {
                *state = State::Open { until, cooldown_ms };
            }
            State::Open { .. } | State::HalfOpen { .. } => {}
        }
    }

    /// An operator closed `queue`'s breaker: deliveries flow again at once, failures are
    /// counted from zero. Whether it was open or half-open.
    pub fn close(&self, queue: &QueueName) -> bool {
        let mut states = self.states.lock();
        let Some(state) = states.get_mut(queue) else {
            return false;
        };
        let was_open = !matches!(state, State::Closed { .. });
        *state = State::Closed { failures: 0 };
        if was_open {
            telemetry::breaker_state(queue, telemetry::BREAKER_CLOSED);
            tracing::info!(queue = %queue, "circuit closed by an operator");
        }
        was_open
    }

    /// An operator closed `queue`'s breaker on another node at `at`: close it here too,
    /// unless it opened here after that (failures since are this node's own news). Whether
    /// it closed.
    pub fn closed_elsewhere(&self, queue: &QueueName, at: UnixMillis) -> bool {
        let opened_before = match self.states.lock().get(queue) {
            Some(State::Open { until, cooldown_ms }) => until - cooldown_ms <= at,
            Some(State::HalfOpen { .. }) => true,
            None | Some(State::Closed { .. }) => false,
        };
        opened_before && self.close(queue)
    }

    /// Consecutive failed attempts that open a breaker (0: breakers off).
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    pub fn forget(&self, queue: &QueueName) {
        self.states.forget(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q() -> QueueName {
        QueueName::parse("breaker-unit").unwrap()
    }

    #[test]
    fn a_breaker_opened_elsewhere_rests_here_until_then_and_only_extends() {
        let b = Breakers::new(3, Duration::from_secs(10));
        assert_eq!(b.probe_at(&q()), None);
        b.opened_elsewhere(&q(), 60_000, 1_000);
        assert_eq!(b.state(&q()), BreakerState::Open);
        assert_eq!(b.probe_at(&q()), Some(60_000));
        assert_eq!(b.permit(&q(), 2_000), Permit::Wait(60_000));
        // An earlier end changes nothing; a later one extends the rest.
        b.opened_elsewhere(&q(), 30_000, 2_000);
        assert_eq!(b.permit(&q(), 2_000), Permit::Wait(60_000));
        b.opened_elsewhere(&q(), 90_000, 2_000);
        assert_eq!(b.permit(&q(), 2_000), Permit::Wait(90_000));
        // Past it, this node probes on its own; a probe out is left alone.
        assert_eq!(b.permit(&q(), 90_000), Permit::Probe);
        b.opened_elsewhere(&q(), 200_000, 90_001);
        assert_eq!(b.state(&q()), BreakerState::HalfOpen);
        // An end already past, or breakers off, open nothing.
        let other = QueueName::parse("breaker-unit-2").unwrap();
        b.opened_elsewhere(&other, 5, 10);
        assert_eq!(b.state(&other), BreakerState::Closed);
        let off = Breakers::new(0, Duration::from_secs(10));
        off.opened_elsewhere(&q(), 60_000, 1_000);
        assert_eq!(off.state(&q()), BreakerState::Closed);
    }

    #[test]
    fn a_closed_breaker_counts_failures_from_zero_and_a_close_elsewhere_is_followed_once() {
        let b = Breakers::new(2, Duration::from_secs(10));
        assert!(!b.close(&q()), "nothing to close");
        b.record(&q(), false, 0);
        b.record(&q(), false, 0);
        assert_eq!(b.state(&q()), BreakerState::Open);
        assert!(b.close(&q()));
        assert_eq!(b.permit(&q(), 1), Permit::Any);
        // One failure after the close does not reopen it: the count starts again.
        assert_eq!(b.record(&q(), false, 2), None);
        assert_eq!(b.state(&q()), BreakerState::Closed);

        // Opened at 10 000 (for 10 s): a close on another node before that is old news, one
        // after it closes the breaker here.
        b.record(&q(), false, 10_000);
        assert_eq!(b.state(&q()), BreakerState::Open);
        assert!(!b.closed_elsewhere(&q(), 9_999));
        assert_eq!(b.state(&q()), BreakerState::Open);
        assert!(b.closed_elsewhere(&q(), 10_000));
        assert_eq!(b.state(&q()), BreakerState::Closed);
        assert!(!b.closed_elsewhere(&q(), 20_000), "closed already");
    }

    #[test]
    fn consecutive_failures_open_the_breaker_and_a_success_resets_the_count() {
        let b = Breakers::new(3, Duration::from_secs(10));
        assert_eq!(b.record(&q(), false, 0), None);
        assert_eq!(b.record(&q(), false, 0), None);
        assert_eq!(b.record(&q(), true, 0), None, "a success resets the count");
        assert_eq!(b.record(&q(), false, 0), None);
        assert_eq!(b.record(&q(), false, 0), None);
        assert_eq!(b.permit(&q(), 0), Permit::Any);
        assert_eq!(
            b.record(&q(), false, 1_000),
            Some(Transition::Opened {
                cooldown_ms: 10_000
            }),
            "the third in a row opens it"
        );
        assert_eq!(b.permit(&q(), 5_000), Permit::Wait(11_000));
    }

    #[test]
    fn is_closed_only_while_closed_and_changes_nothing() {
        let b = Breakers::new(1, Duration::from_secs(10));
        assert!(b.is_closed(&q()), "never failed");
        b.record(&q(), false, 0);
        assert!(!b.is_closed(&q()));
        assert!(
            !b.is_closed(&q()),
            "asking again after the pause takes no probe"
        );
        assert_eq!(b.permit(&q(), 10_000), Permit::Probe);
        b.record(&q(), true, 10_001);
        assert!(b.is_closed(&q()));
    }

    #[test]
    fn after_the_cooldown_one_probe_decides() {
        let b = Breakers::new(1, Duration::from_secs(10));
        b.record(&q(), false, 0);
        assert_eq!(b.permit(&q(), 10_000), Permit::Probe);
        assert!(
            matches!(b.permit(&q(), 10_001), Permit::Wait(_)),
            "one probe at a time"
        );
        // The probe fails: open again, for twice as long.
        assert_eq!(
            b.record(&q(), false, 10_500),
            Some(Transition::Reopened {
                cooldown_ms: 20_000
            })
        );
        assert_eq!(b.permit(&q(), 20_000), Permit::Wait(30_500));
        assert_eq!(b.permit(&q(), 30_500), Permit::Probe);
        // The probe succeeds: closed.
        assert_eq!(b.record(&q(), true, 31_000), Some(Transition::Closed));
        assert_eq!(b.permit(&q(), 31_000), Permit::Any);
    }

    #[test]
    fn an_unused_probe_is_handed_back_and_threshold_zero_turns_breakers_off() {
        let b = Breakers::new(1, Duration::from_secs(1));
        b.record(&q(), false, 0);
        assert_eq!(b.permit(&q(), 1_000), Permit::Probe);
        b.probe_unused(&q());
        assert_eq!(b.permit(&q(), 1_001), Permit::Probe);

        let off = Breakers::new(0, Duration::from_secs(1));
        for _ in 0..100 {
            assert_eq!(off.record(&q(), false, 0), None);
        }
        assert_eq!(off.permit(&q(), 0), Permit::Any);
    }

    #[test]
    fn the_cooldown_doubles_up_to_its_cap() {
        let b = Breakers::new(1, Duration::from_secs(400));
        b.record(&q(), false, 0);
        let mut now = 400_000;
        assert_eq!(b.permit(&q(), now), Permit::Probe);
        b.record(&q(), false, now);
        now += MAX_COOLDOWN.as_millis() as i64;
        assert_eq!(
            b.permit(&q(), now - 1),
            Permit::Wait(now),
            "800 s capped at 600 s"
        );
    }
}
