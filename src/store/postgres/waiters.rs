//! The lease requests waiting on each node, shared through `lease_waiters` for every node's
//! view of pull workers (`GET /admin/leases`): each node rewrites its own rows, readers
//! take the other nodes' fresh ones. A node that stopped writing drops out of the view
//! after [`FRESH_MS`].

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::model::{QueueName, UnixMillis};
use crate::store::error::StoreResult;

/// How long a node's published counts stand without being written again. Nodes with
/// waiters write every second (`cluster::QUEUE_REFRESH`), so a few missed writes are
/// tolerated before a node is taken for gone.
pub const FRESH_MS: UnixMillis = 5_000;

/// Replace `node`'s rows with `waiting` (queue, requests), written at `now`, and delete
/// every node's rows gone stale, in one transaction.
pub async fn publish(
    client: &mut deadpool_postgres::Object,
    node: Uuid,
    now: UnixMillis,
    waiting: &[(QueueName, usize)],
) -> StoreResult<()> {
    let tx = client.transaction().await?;
    tx.execute(
        "DELETE FROM lease_waiters WHERE node = $1 OR at <= $2",
        &[&node, &(now - FRESH_MS)],
    )
    .await?;
    if !waiting.is_empty() {
        let queues: Vec<&str> = waiting.iter().map(|(q, _)| q.as_str()).collect();
        let counts: Vec<i32> = waiting
            .iter()
            .map(|(_, n)| i32::try_from(*n).unwrap_or(i32::MAX))
            .collect();
        tx.execute(
            "INSERT INTO lease_waiters (node, queue, requests, at)
             SELECT $1, q, n, $2 FROM unnest($3::text[], $4::int[]) AS w(q, n)",
            &[&node, &now, &queues, &counts],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The waiting lease requests of every node but `node` written since `now - FRESH_MS`:
/// (node, queue, requests), by node then queue.
pub async fn of_other_nodes(
    client: &impl GenericClient,
    node: Uuid,
    now: UnixMillis,
) -> StoreResult<Vec<(String, QueueName, usize)>> {
    let rows = client
        .query(
            "SELECT node, queue, requests FROM lease_waiters
             WHERE node <> $1 AND at > $2 AND requests > 0 ORDER BY node, queue",
            &[&node, &(now - FRESH_MS)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            (
                row.get::<_, Uuid>(0).to_string(),
                QueueName::from_stored(row.get(1)),
                usize::try_from(row.get::<_, i32>(2)).unwrap_or(0),
            )
        })
        .collect())
}
