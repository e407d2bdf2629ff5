//! When each queue next has a job due, kept in memory so the dispatcher claims only from
//! queues with work and sleeps exactly until the next job is due. The database stays the
//! truth: a hint can only make the dispatcher look sooner, and a slow sweep re-checks all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::model::{QueueName, UnixMillis};

#[derive(Clone, Default)]
pub struct Wakeups {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    due: Mutex<HashMap<QueueName, UnixMillis>>,
    notify: Notify,
}

impl Wakeups {
    /// `queue` has a job due at `at` (or sooner). Wakes the dispatcher if that is now.
    pub fn mark_due(&self, queue: &QueueName, at: UnixMillis) {
        {
            let mut due = self.lock();
            due.entry(queue.clone())
                .and_modify(|t| *t = (*t).min(at))
                .or_insert(at);
        }
        // Wake even for a future time: it may be earlier than the dispatcher's timer.
        self.inner.notify.notify_one();
    }

    /// Wake the dispatcher without news of a queue (a delivery slot was freed).
    pub fn poke(&self) {
        self.inner.notify.notify_one();
    }

    /// Wait for a `mark_due` or `poke` (one that came since the last wait counts).
    pub async fn notified(&self) {
        self.inner.notify.notified().await;
    }

    /// Take the queues due at `now`: the caller claims from them and reports back with
    /// [`mark_due`](Self::mark_due) what remains. Taking before claiming means a job enqueued
    /// meanwhile is either seen by the claim or marks its queue again: never lost.
    pub fn take_due(&self, now: UnixMillis) -> Vec<QueueName> {
        let mut due = self.lock();
        let ready: Vec<QueueName> = due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(q, _)| q.clone())
            .collect();
        for queue in &ready {
            due.remove(queue);
        }
        ready
    }

    /// The earliest future due time, for the dispatcher's timer.
    pub fn next_due(&self) -> Option<UnixMillis> {
        self.lock().values().min().copied()
    }

    pub fn forget(&self, queue: &QueueName) {
        self.lock().remove(queue);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<QueueName, UnixMillis>> {
        self.inner.due.lock().unwrap_or_else(|e| e.into_inner())
    }
}
