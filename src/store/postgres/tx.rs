//! PostgreSQL's side of the contract: [`PgTx`], one transaction as the decisions see it.
//! Each table module implements its area of [`Tx`](crate::store::dialect::Tx) for it in
//! that table's SQL (`jobs.rs`: [`JobRows`](crate::store::dialect::JobRows), …); this file
//! holds the savepoints. Safe with any number of nodes at once: claims and sweeps lock what
//! they take (`FOR UPDATE SKIP LOCKED`), outcomes are fenced by the lease, keys are claimed
//! by inserting their row.

use deadpool_postgres::Transaction;
use uuid::Uuid;

use crate::store::dialect::Savepoints;
use crate::store::error::StoreResult;

/// One PostgreSQL transaction of node `node` (what its leases carry), as the decisions
/// see it.
#[derive(Clone, Copy)]
pub struct PgTx<'t> {
    pub tx: &'t Transaction<'t>,
    pub node: Uuid,
}

impl Savepoints for PgTx<'_> {
    async fn savepoint(&self, name: &'static str) -> StoreResult<()> {
        Ok(self.tx.batch_execute(&format!("SAVEPOINT {name}")).await?)
    }

    async fn release(&self, name: &'static str) -> StoreResult<()> {
        Ok(self
            .tx
            .batch_execute(&format!("RELEASE SAVEPOINT {name}"))
            .await?)
    }

    async fn roll_back_to(&self, name: &'static str) -> StoreResult<()> {
        Ok(self
            .tx
            .batch_execute(&format!(
                "ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}"
            ))
            .await?)
    }
}
