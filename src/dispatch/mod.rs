//! Dispatch: from a stored job to a recorded outcome. Four parts, each in its own module:
//!
//! - [`claimer`]: the claim loop. Claims due jobs from the store in fair shares between the
//!   due queues, as many as there are free slots, and hands each to the pool. No polling on
//!   the hot path: an enqueue marks its queue due and wakes it at once ([`wakeups`]); a timer
//!   wakes it when the next retry is due; a slow sweep re-checks every queue as a safety net.
//! - [`pool`]: the delivery pool. The delivery slots (global and per queue), the circuit
//!   [`breaker`]s, the direct hand-off (while no job waits to be claimed, an enqueue skips
//!   the claim loop and its job goes straight to a slot), and the tasks running attempts.
//! - [`attempt`]: one delivery attempt, from POST to recorded outcome (delivered, retry at
//!   the [`retry`] schedule's next time, or dead-lettered).
//! - [`webhook`]: the HTTP client that POSTs a job to its target, signed, behind the SSRF
//!   [`guard`], and classifies the answer.

pub mod activity;
pub mod adaptive;
pub mod answer;
pub mod attempt;
pub mod breaker;
pub mod claimer;
pub mod guard;
pub mod per_queue;
pub mod pool;
pub mod rate;
pub mod retry;
pub mod wakeups;
pub mod webhook;

use std::time::Duration;

use crate::policy::Defaults;

pub use activity::{Activity, LastMinute};
pub use attempt::outcome_of;
pub use breaker::{BreakerState, Breakers, Permit};
pub use claimer::{Claimer, RoundReport};
pub use pool::{DeliveryPool, Handoff, Slot};
pub use retry::RetryPolicy;
pub use wakeups::Wakeups;
pub use webhook::{AttemptResult, Egress, WebhookClient};

/// The dispatch settings, from the server's configuration.
#[derive(Debug, Clone)]
pub struct DispatchConfig {
    /// Consecutive failed attempts that open a queue's circuit breaker (0: never).
    pub breaker_threshold: u32,
    pub breaker_cooldown: Duration,
    pub max_in_flight: usize,
    /// What a queue's own policy falls back to (attempts, backoff, timeout, concurrency).
    pub defaults: Defaults,
    /// Spread of every retry delay (see [`retry`]).
    pub jitter: f64,
    /// How long a claim leases a job when its queue keeps the server's attempt timeout;
    /// a queue with a longer timeout gets a lease longer by as much.
    pub lease_timeout: Duration,
    pub shutdown_grace: Duration,
    /// How often the claim loop re-checks every queue without being woken.
    pub sweep_interval: Duration,
}

impl DispatchConfig {
    /// The server's retry schedule (a queue may set its own: [`RetryPolicy::for_queue`]).
    pub fn retry(&self) -> RetryPolicy {
        RetryPolicy::new(
            self.defaults.max_attempts,
            self.defaults.backoff.clone(),
            self.jitter,
        )
    }
}
