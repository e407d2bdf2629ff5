//! Connecting to PostgreSQL: the URL parsed once, a `deadpool` pool of `tokio-postgres`
//! clients, TLS by rustls with the Mozilla root certificates (`sslmode=require` in the URL;
//! `prefer`, the default, uses TLS when the server offers it; either checks the certificate
//! and host name as libpq's `verify-full` does, and tokio-postgres' URL parser knows no
//! `verify-ca`/`verify-full`).

use std::str::FromStr;
use std::sync::Arc;

use anyhow::Context;
use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres_rustls::MakeRustlsConnect;

/// A pool of connections to one database.
pub type PgPool = Pool;

/// The connection settings a `postgres://` URL names.
pub fn parse_url(url: &str) -> anyhow::Result<tokio_postgres::Config> {
    tokio_postgres::Config::from_str(url)
        .with_context(|| format!("{}: not a PostgreSQL URL", redacted(url)))
}

/// Run on every new connection: a `201` means the job is durably committed, so a role or
/// database whose default is `synchronous_commit = off` gets `on` for this session. (`local`
/// and the `remote_*` levels flush locally too and are kept.) The relaxed transactions
/// (claims, outcomes) still set `off` for themselves with `SET LOCAL`.
const DURABLE_COMMITS: &str = "SELECT set_config('synchronous_commit', 'on', false)
     WHERE current_setting('synchronous_commit') = 'off'";

/// Run on every connection of the completers' pool ([`Sessions::Completions`]). Commits
/// do not wait for the WAL flush: a grouped completion lost in a database crash only means
/// a delivery again, and the statement needs no transaction around it to say so with
/// `SET LOCAL`. Plans find their rows through indexes, never by reading a whole table or
/// hashing it: the completion's lookups by id are the one plan these sessions need. The
/// completion is planned for each group, knowing the table's size; these settings keep
/// its plan the lookups should the table's statistics or size mislead the planner (a plan
/// made while `jobs` held a few rows was a hash join over a sequential scan of every job,
/// kept as the backlog grew: 7 700 pages read for a group of 2 jobs).
const COMPLETION_SESSION: &str = "SET synchronous_commit = off; SET enable_seqscan = off;
     SET enable_hashjoin = off; SET enable_mergejoin = off";

/// What a pool's sessions are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sessions {
    /// Everything but grouped completions, committing durably (see [`DURABLE_COMMITS`]):
    /// every pool that stores what a `201` answers for.
    Durable,
    /// Grouped completions (see [`COMPLETION_SESSION`]).
    Completions,
}

/// A pool of at most `size` connections to the database at `url`, its sessions committing
/// durably ([`Sessions::Durable`]). Connections are opened when first needed; this checks that one can be, so a
/// wrong URL fails at start.
pub async fn connect(url: &str, size: usize) -> anyhow::Result<PgPool> {
    connect_with(url, size, Sessions::Durable).await
}

/// [`connect`], its sessions set up for what `sessions` says.
pub async fn connect_with(url: &str, size: usize, sessions: Sessions) -> anyhow::Result<PgPool> {
    let config = parse_url(url)?;
    let manager = Manager::from_config(
        config,
        MakeRustlsConnect::new(tls_config()?),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(size.max(1))
        .post_create(Hook::async_fn(move |client, _| {
            let setting = match sessions {
                Sessions::Durable => DURABLE_COMMITS,
                Sessions::Completions => COMPLETION_SESSION,
            };
            Box::pin(async move {
                client
                    .batch_execute(setting)
                    .await
                    .map_err(HookError::Backend)
            })
        }))
        .build()
        .context("building the PostgreSQL connection pool")?;
    let first = pool
        .get()
        .await
        .with_context(|| format!("connecting to {}", redacted(url)))?;
    drop(first); // back to the pool
    Ok(pool)
}

/// TLS for connections that use it: the Mozilla roots, rustls's safe defaults, the
/// aws-lc-rs provider (the one reqwest's rustls already uses).
pub(super) fn tls_config() -> anyhow::Result<rustls::ClientConfig> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// `url` without its password (userinfo or `password=`), for messages and logs.
pub fn redacted(url: &str) -> String {
    crate::redact::url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        assert!(!redacted("postgres://u@db/hookq?password=s3cret").contains("s3cret"));
    }
}
