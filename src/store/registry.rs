//! The queues, mirrored in memory so enqueue and dispatch never read the database. Every
//! backend keeps it in step with what it committed, in commit order.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::records::Queue;
use crate::model::QueueName;

/// The queues, kept in memory so enqueue and dispatch never read the table. The writer
/// thread updates it right after each commit, so it follows the database in commit order.
#[derive(Clone, Default)]
pub struct Registry {
    queues: Arc<RwLock<BTreeMap<QueueName, Arc<Queue>>>>,
}

impl Registry {
    pub fn new(queues: Vec<Queue>) -> Self {
        let map = queues
            .into_iter()
            .map(|q| (q.name.clone(), Arc::new(q)))
            .collect();
        Self {
            queues: Arc::new(RwLock::new(map)),
        }
    }

    pub fn get(&self, name: &QueueName) -> Option<Arc<Queue>> {
        self.read().get(name).cloned()
    }

    pub fn contains(&self, name: &QueueName) -> bool {
        self.read().contains_key(name)
    }

    /// Every queue, in name order.
    pub fn all(&self) -> Vec<Arc<Queue>> {
        self.read().values().cloned().collect()
    }

    pub(crate) fn insert(&self, queue: Queue) {
        self.write().insert(queue.name.clone(), Arc::new(queue));
    }

    pub(crate) fn remove(&self, name: &QueueName) {
        self.write().remove(name);
    }

    /// Replace every queue at once (a backend shared by several nodes reloads them).
    pub(crate) fn replace_all(&self, queues: Vec<Queue>) {
        *self.write() = queues
            .into_iter()
            .map(|q| (q.name.clone(), Arc::new(q)))
            .collect();
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<QueueName, Arc<Queue>>> {
        // A panic while holding the lock cannot leave the map half-updated (each update is
        // one insert or remove), so a poisoned lock is still safe to use.
        self.queues.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<QueueName, Arc<Queue>>> {
        self.queues.write().unwrap_or_else(|e| e.into_inner())
    }
}
