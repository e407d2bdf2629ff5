//! When each queue next has a job due, kept in memory so the dispatcher claims only from
//! queues with work and sleeps exactly until the next job is due. The database stays the
//! truth: a hint can only make the dispatcher look sooner, and a slow sweep re-checks all.
//!
//! It also knows whether anything *waits*: a queue with a job due now, or one whose claim
//! round is in progress or unfinished (more due than it took, or no free slot). Only while
//! nothing waits may an enqueue hand its job straight to a delivery
//! ([`Deliveries`](super::Deliveries)): it then overtakes no older job of its queue, and
//! takes no slot another queue's backlog is owed by the dispatcher's fair shares.
//!
//! A pull queue's jobs are leased by workers, not claimed by the dispatcher: a job falling
//! due there wakes the lease requests waiting on it ([`Wakeups::lease_waiters`]) — at once
//! for a job due now, through the dispatcher's timer for a job due later.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::model::{QueueName, UnixMillis};

#[derive(Clone, Default)]
pub struct Wakeups {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    notify: Notify,
    /// Per pull queue, what its waiting lease requests listen to.
    lease_waiters: Mutex<HashMap<QueueName, Arc<Notify>>>,
}

impl Inner {
    fn waiters(&self) -> std::sync::MutexGuard<'_, HashMap<QueueName, Arc<Notify>>> {
        self.lease_waiters.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A lease request's ear on its queue's wake-ups ([`Wakeups::lease_waiters`]); the last
/// one of a queue to go takes the queue's entry with it.
pub struct LeaseWaiters {
    notify: Arc<Notify>,
    queue: QueueName,
    owner: Arc<Inner>,
}

impl std::ops::Deref for LeaseWaiters {
    type Target = Notify;

    fn deref(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for LeaseWaiters {
    fn drop(&mut self) {
        let mut waiters = self.owner.waiters();
        // Only the map's reference and ours left: nobody else listens to this entry.
        if let Some(entry) = waiters.get(&self.queue)
            && Arc::ptr_eq(entry, &self.notify)
            && Arc::strong_count(&self.notify) == 2
        {
            waiters.remove(&self.queue);
        }
    }
}

#[derive(Default)]
struct State {
    due: HashMap<QueueName, UnixMillis>,
    /// Taken by the dispatcher ([`Wakeups::take_due`]) and not yet caught up with
    /// ([`Wakeups::settle`]): it may still hold jobs waiting to be claimed.
    claiming: HashSet<QueueName>,
}

impl Wakeups {
    /// `queue` has a job due at `at` (or sooner). Wakes the dispatcher if that is now.
    pub fn mark_due(&self, queue: &QueueName, at: UnixMillis) {
        {
            let mut state = self.lock();
            state
                .due
                .entry(queue.clone())
                .and_modify(|t| *t = (*t).min(at))
                .or_insert(at);
        }
        // Wake even for a future time: it may be earlier than the dispatcher's timer.
        self.inner.notify.notify_one();
        if at <= crate::model::now_millis() {
            self.wake_lease_waiters(queue);
        }
    }

    /// What lease requests waiting on pull queue `queue` listen to: notified whenever a job
    /// of it may have fallen due. Enable the `Notified` before looking for jobs, so a job
    /// arriving between the look and the wait still wakes it. The queue's entry lives as
    /// long as a [`LeaseWaiters`] of it does, so names probed and left cost nothing.
    pub fn lease_waiters(&self, queue: &QueueName) -> LeaseWaiters {
        let notify = self
            .waiters()
            .entry(queue.clone())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        LeaseWaiters {
            notify,
            queue: queue.clone(),
            owner: self.inner.clone(),
        }
    }

    /// Queues with lease requests listening right now.
    #[cfg(test)]
    fn queues_with_lease_waiters(&self) -> usize {
        self.waiters().len()
    }

    /// Wake every lease request waiting on `queue` (each looks for jobs again).
    pub fn wake_lease_waiters(&self, queue: &QueueName) {
        if let Some(waiters) = self.waiters().get(queue) {
            waiters.notify_waiters();
        }
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, HashMap<QueueName, Arc<Notify>>> {
        self.inner.waiters()
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
    /// [`mark_due`](Self::mark_due) what remains, or [`settle`](Self::settle) once it has
    /// claimed everything due. Taking before claiming means a job enqueued meanwhile is
    /// either seen by the claim or marks its queue again: never lost.
    pub fn take_due(&self, now: UnixMillis) -> Vec<QueueName> {
        let mut state = self.lock();
        let ready: Vec<QueueName> = state
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(q, _)| q.clone())
            .collect();
        for queue in &ready {
            state.due.remove(queue);
            state.claiming.insert(queue.clone());
        }
        ready
    }

    /// The dispatcher's claim found fewer due jobs of `queue` than it asked for: it has
    /// caught up. Anything enqueued since marked the queue due again, so it stays busy.
    pub fn settle(&self, queue: &QueueName) {
        self.lock().claiming.remove(queue);
    }

    /// Whether no queue has a job due at `now` or waiting in an unfinished claim round.
    pub fn nothing_waiting(&self, now: UnixMillis) -> bool {
        let state = self.lock();
        state.claiming.is_empty() && state.due.values().all(|at| *at > now)
    }

    /// The earliest future due time, for the dispatcher's timer.
    pub fn next_due(&self) -> Option<UnixMillis> {
        self.lock().due.values().min().copied()
    }

    /// `queue` is gone.
    pub fn forget(&self, queue: &QueueName) {
        let mut state = self.lock();
        state.due.remove(queue);
        state.claiming.remove(queue);
        drop(state);
        // Its waiting lease requests look again and find the queue gone.
        if let Some(waiters) = self.waiters().remove(queue) {
            waiters.notify_waiters();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str) -> QueueName {
        QueueName::parse(name).unwrap()
    }

    #[test]
    fn a_queues_lease_waiters_entry_goes_with_its_last_listener() {
        let wakeups = Wakeups::default();
        let first = wakeups.lease_waiters(&queue("a"));
        let second = wakeups.lease_waiters(&queue("a"));
        let other = wakeups.lease_waiters(&queue("b"));
        assert_eq!(wakeups.queues_with_lease_waiters(), 2);
        drop(first);
        assert_eq!(
            wakeups.queues_with_lease_waiters(),
            2,
            "a still has a listener"
        );
        drop(second);
        drop(other);
        assert_eq!(wakeups.queues_with_lease_waiters(), 0);
        // A queue forgotten while listened to: a new listener gets a fresh entry, which the
        // old listener's going does not remove.
        let old = wakeups.lease_waiters(&queue("c"));
        wakeups.forget(&queue("c"));
        let new = wakeups.lease_waiters(&queue("c"));
        drop(old);
        assert_eq!(wakeups.queues_with_lease_waiters(), 1);
        drop(new);
        assert_eq!(wakeups.queues_with_lease_waiters(), 0);
    }

    #[test]
    fn something_waits_from_a_due_job_until_a_claim_caught_up() {
        let (wakeups, q) = (Wakeups::default(), queue("q"));
        assert!(wakeups.nothing_waiting(100));
        wakeups.mark_due(&q, 100);
        assert!(!wakeups.nothing_waiting(100), "a job is due");
        assert_eq!(wakeups.take_due(100), vec![q.clone()]);
        assert!(!wakeups.nothing_waiting(100), "a claim round is under way");
        wakeups.settle(&q);
        assert!(wakeups.nothing_waiting(100));
    }

    #[test]
    fn a_job_due_later_waits_only_from_then() {
        let (wakeups, q) = (Wakeups::default(), queue("q"));
        wakeups.mark_due(&q, 200);
        assert!(wakeups.nothing_waiting(100));
        assert!(!wakeups.nothing_waiting(200));
    }

    #[test]
    fn a_job_enqueued_during_a_claim_still_waits_after_it_settles() {
        let (wakeups, q) = (Wakeups::default(), queue("q"));
        wakeups.mark_due(&q, 100);
        wakeups.take_due(100);
        wakeups.mark_due(&q, 100); // committed after the claim's snapshot
        wakeups.settle(&q);
        assert!(!wakeups.nothing_waiting(100));
        assert_eq!(wakeups.take_due(100), vec![q]);
    }

    #[test]
    fn a_queue_taken_but_not_caught_up_waits_for_every_queue() {
        // More due than the round could take, or no room (parked): another queue's new job
        // must not take a slot ahead of it.
        let (wakeups, busy) = (Wakeups::default(), queue("busy"));
        wakeups.mark_due(&busy, 100);
        wakeups.take_due(100);
        assert!(!wakeups.nothing_waiting(150));
        wakeups.forget(&busy);
        assert!(
            wakeups.nothing_waiting(150),
            "a deleted queue holds nothing"
        );
    }
}
