//! The PostgreSQL backend, for several hookq nodes on one database (in progress: the
//! connection and the schema so far; the store operations come next, behind the same port
//! as SQLite's, and the server accepts a `postgres://` database only once all of them are
//! there).
//!
//! - [`connect`]: a pool of connections from a `postgres://` / `postgresql://` URL, TLS
//!   through rustls as the URL's `sslmode` asks.
//! - [`migrate`]: the versioned schema (`migrations/postgres/`), applied at start under an
//!   advisory lock, so nodes starting at once apply it once.

pub mod connect;
pub mod migrate;

pub use connect::{PgPool, connect, is_postgres_url};
pub use migrate::{Migrated, migrate};
