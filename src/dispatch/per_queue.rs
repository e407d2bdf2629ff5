//! State kept per queue in memory (breakers, adaptive concurrency, rate schedules, the last
//! minute's attempts): one map behind one lock, forgotten when the queue goes.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::model::QueueName;

/// Each queue's `T`, behind one lock.
#[derive(Debug)]
pub struct PerQueue<T> {
    states: Mutex<HashMap<QueueName, T>>,
}

impl<T> Default for PerQueue<T> {
    fn default() -> Self {
        Self {
            states: Mutex::default(),
        }
    }
}

impl<T> PerQueue<T> {
    /// The map, locked. A panic while it was held cannot have left half a change (every
    /// user updates a queue's state in one step), so a poisoned lock is taken over.
    pub fn lock(&self) -> MutexGuard<'_, HashMap<QueueName, T>> {
        self.states.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `queue` is gone: drop its state.
    pub fn forget(&self, queue: &QueueName) {
        self.lock().remove(queue);
    }
}
