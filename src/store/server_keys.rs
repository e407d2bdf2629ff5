//! Keys the server makes for itself, kept in the database (`server_keys`) so every node and
//! every restart uses the same: made by the first node to ask, read by the others.

use super::error::StoreResult;
use super::{Backend, Store};

/// A key of 32 random bytes, by name.
pub type ServerKey = [u8; 32];

/// The name of the key that signs the leases handed to pull workers (`pull::LeaseId`).
pub const LEASE_KEY: &str = "lease";

/// 32 bytes from the operating system's random source.
pub(crate) fn new_key() -> ServerKey {
    use chacha20poly1305::aead::Generate;
    chacha20poly1305::Key::generate().into()
}

/// The stored key back to its bytes; a row of another length (written by hand) is refused.
pub(crate) fn key_of(name: &str, raw: &[u8]) -> StoreResult<ServerKey> {
    ServerKey::try_from(raw).map_err(|_| {
        anyhow::anyhow!(
            "server key {name:?} in the database is {} bytes, not 32",
            raw.len()
        )
        .into()
    })
}

impl Store {
    /// Key `name`: the stored one, or a new one stored now if there is none (when several
    /// nodes race, the first stored wins and every node reads that one).
    pub async fn server_key(&self, name: &'static str) -> StoreResult<ServerKey> {
        let fresh = new_key();
        match &self.backend {
            Backend::Sqlite(db) => db.server_key(name, fresh).await,
            Backend::Postgres(db) => db.server_key(name, fresh).await,
        }
    }
}
