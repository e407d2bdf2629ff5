//! SQL for the `server_keys` table on SQLite: keys the server makes for itself.

use rusqlite::params;

use super::SqliteStore;
use crate::store::error::StoreResult;
use crate::store::server_keys::{ServerKey, key_of};

impl SqliteStore {
    /// Key `name`, storing `fresh` first if there is none.
    pub async fn server_key(&self, name: &'static str, fresh: ServerKey) -> StoreResult<ServerKey> {
        self.writer
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO server_keys (name, key) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                )?
                .execute(params![name, &fresh[..]])?;
                let raw: Vec<u8> = conn
                    .prepare_cached("SELECT key FROM server_keys WHERE name = ?1")?
                    .query_row(params![name], |row| row.get(0))?;
                key_of(name, &raw)
            })
            .await
    }
}
