//! SQL for the `server_keys` table on PostgreSQL: keys the server makes for itself, shared
//! by every node of the database.

use super::PgStore;
use crate::store::error::StoreResult;
use crate::store::server_keys::{ServerKey, key_of};

impl PgStore {
    /// Key `name`, storing `fresh` first if there is none (the first node to store one wins).
    pub async fn server_key(&self, name: &'static str, fresh: ServerKey) -> StoreResult<ServerKey> {
        let client = self.runner.pool.get().await?;
        client
            .execute(
                "INSERT INTO server_keys (name, key) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&name, &&fresh[..]],
            )
            .await?;
        let row = client
            .query_one("SELECT key FROM server_keys WHERE name = $1", &[&name])
            .await?;
        key_of(name, row.get::<_, &[u8]>(0))
    }
}
