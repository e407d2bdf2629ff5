//! SQL for the `queues` table, and the in-memory registry that mirrors it for the hot path.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use rusqlite::{Connection, OptionalExtension, params};

use super::error::{StoreError, StoreResult};
use crate::model::{QueueName, Secret, Target, UnixMillis};

/// A queue as the dispatcher needs it.
#[derive(Debug, Clone)]
pub struct Queue {
    pub name: QueueName,
    pub target: Target,
    pub secret: Option<Secret>,
    pub created_at: UnixMillis,
}

pub fn insert(conn: &Connection, queue: &Queue) -> StoreResult<()> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO queues(name, target, secret, created_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(name) DO NOTHING",
        )?
        .execute(params![
            queue.name.as_str(),
            queue.target.as_str(),
            queue.secret.as_ref().map(Secret::expose),
            queue.created_at
        ])?;
    if inserted == 0 {
        return Err(StoreError::QueueExists);
    }
    Ok(())
}

/// Delete a queue; its jobs go with it (foreign key `ON DELETE CASCADE`).
pub fn delete(conn: &Connection, name: &QueueName) -> StoreResult<()> {
    let deleted = conn
        .prepare_cached("DELETE FROM queues WHERE name = ?1")?
        .execute([name.as_str()])?;
    if deleted == 0 {
        return Err(StoreError::QueueNotFound);
    }
    Ok(())
}

pub fn load_all(conn: &Connection) -> StoreResult<Vec<Queue>> {
    let mut stmt =
        conn.prepare("SELECT name, target, secret, created_at FROM queues ORDER BY name")?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, Option<String>>(2)?,
            row.get::<_, i64>(3)?,
        ))
    })?;
    let mut queues = Vec::new();
    for row in rows {
        let (name, target, secret, created_at) = row?;
        let target = Target::from_stored(&target)
            .map_err(|e| anyhow::anyhow!("stored target of queue {name} is invalid: {e}"))?;
        let secret = secret
            .map(|s| Secret::parse(&s))
            .transpose()
            .map_err(|e| anyhow::anyhow!("stored secret of queue {name} is invalid: {e}"))?;
        queues.push(Queue {
            name: QueueName::from_stored(name),
            target,
            secret,
            created_at,
        });
    }
    Ok(queues)
}

pub fn exists(conn: &Connection, name: &QueueName) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM queues WHERE name = ?1")?
        .query_row([name.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}

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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<QueueName, Arc<Queue>>> {
        // A panic while holding the lock cannot leave the map half-updated (each update is
        // one insert or remove), so a poisoned lock is still safe to use.
        self.queues.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<QueueName, Arc<Queue>>> {
        self.queues.write().unwrap_or_else(|e| e.into_inner())
    }
}
