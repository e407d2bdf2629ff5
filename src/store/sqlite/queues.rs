//! SQL for the `queues` table. Secrets are sealed on the way in and opened on the way out
//! (`store::sealing`).

use rusqlite::{Connection, OptionalExtension, params};

use crate::model::{QueueName, Secret, Target};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::Queue;
use crate::store::sealing::{self, Sealing};

/// Store a new queue; its secret is sealed when `sealing` has a master key.
pub fn insert(conn: &Connection, queue: &Queue, sealing: &Sealing) -> StoreResult<()> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO queues(name, target, secret, created_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(name) DO NOTHING",
        )?
        .execute(params![
            queue.name.as_str(),
            queue.target.as_str(),
            queue
                .secret
                .as_ref()
                .map(|s| sealing.to_stored(s.expose(), queue.name.as_str())),
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

/// Every queue, with its secret opened (sealed with the current or the previous master key,
/// or stored in clear). A secret that cannot be read is an error naming its queue, never a
/// queue without its secret.
pub fn load_all(conn: &Connection, sealing: &Sealing) -> StoreResult<Vec<Queue>> {
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
    let keys = sealing.keys();
    let mut queues = Vec::new();
    for row in rows {
        let (name, target, secret, created_at) = row?;
        let target = Target::from_stored(&target)
            .map_err(|e| anyhow::anyhow!("stored target of queue {name} is invalid: {e}"))?;
        let secret = secret
            .map(|stored| {
                let plain = sealing::open(&keys, &stored, &name)
                    .map_err(|e| anyhow::anyhow!("cannot read the secret of queue {name}: {e}"))?;
                Secret::parse(&plain)
                    .map_err(|e| anyhow::anyhow!("stored secret of queue {name} is invalid: {e}"))
            })
            .transpose()?;
        queues.push(Queue {
            name: QueueName::from_stored(name),
            target,
            secret,
            created_at,
        });
    }
    Ok(queues)
}

/// Rotation: re-seal with the current master key every secret stored in clear or sealed
/// with another (the previous) key. Returns the queues rewritten. Without a master key,
/// does nothing. Run it inside the start-up transaction, before [`load_all`].
pub fn reseal_all(conn: &Connection, sealing: &Sealing) -> StoreResult<Vec<QueueName>> {
    if sealing.current().is_none() {
        return Ok(Vec::new());
    }
    let stale = {
        let mut stmt =
            conn.prepare("SELECT name, secret FROM queues WHERE secret IS NOT NULL ORDER BY name")?;
        let rows = stmt.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut stale = Vec::new();
        for row in rows {
            let (name, stored) = row?;
            if sealing.needs_reseal(&stored) {
                stale.push((name, stored));
            }
        }
        stale
    };
    let keys = sealing.keys();
    let mut update = conn.prepare("UPDATE queues SET secret = ?2 WHERE name = ?1")?;
    let mut resealed = Vec::with_capacity(stale.len());
    for (name, stored) in stale {
        let plain = sealing::open(&keys, &stored, &name)
            .map_err(|e| anyhow::anyhow!("cannot read the secret of queue {name}: {e}"))?;
        update.execute(params![name, sealing.to_stored(&plain, &name)])?;
        resealed.push(QueueName::from_stored(name));
    }
    Ok(resealed)
}

pub fn exists(conn: &Connection, name: &QueueName) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM queues WHERE name = ?1")?
        .query_row([name.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}
