//! The PostgreSQL schema, versioned: `migrations/postgres/NNNN_name.sql`, compiled into the
//! binary and applied at start in one transaction (PostgreSQL's DDL is transactional: a
//! failed migration leaves nothing half done), recorded in `hookq_schema`.
//!
//! Several nodes may start at once: each takes the same transaction-scoped advisory lock
//! first, so one applies what is missing and the others, once it commits, find nothing to
//! do. A database migrated by a newer hookq (a version this binary does not know) is
//! refused rather than used with a schema it does not understand.

use anyhow::{Context, bail};

use super::PgPool;

/// The advisory lock every migrating node takes (`pg_advisory_xact_lock`): "hookq" in ASCII.
const MIGRATION_LOCK: i64 = 0x68_6f_6f_6b_71;

struct Migration {
    version: i32,
    name: &'static str,
    sql: &'static str,
}

/// Every version, in order, without gaps (a unit test checks).
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../../../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "shared limits",
        sql: include_str!("../../../migrations/postgres/0002_shared_limits.sql"),
    },
    Migration {
        version: 3,
        name: "queue activity",
        sql: include_str!("../../../migrations/postgres/0003_queue_activity.sql"),
    },
    Migration {
        version: 4,
        name: "batch keys",
        sql: include_str!("../../../migrations/postgres/0004_batch_keys.sql"),
    },
    Migration {
        version: 5,
        name: "api keys",
        sql: include_str!("../../../migrations/postgres/0005_api_keys.sql"),
    },
    Migration {
        version: 6,
        name: "signature schemes",
        sql: include_str!("../../../migrations/postgres/0006_signature_schemes.sql"),
    },
    Migration {
        version: 7,
        name: "idempotency fingerprints",
        sql: include_str!("../../../migrations/postgres/0007_idempotency_fingerprints.sql"),
    },
    Migration {
        version: 8,
        name: "trace context",
        sql: include_str!("../../../migrations/postgres/0008_trace_context.sql"),
    },
    Migration {
        version: 9,
        name: "activity minutes",
        sql: include_str!("../../../migrations/postgres/0009_activity_minutes.sql"),
    },
    Migration {
        version: 10,
        name: "pull leases",
        sql: include_str!("../../../migrations/postgres/0010_pull_leases.sql"),
    },
    Migration {
        version: 11,
        name: "dead letter leases",
        sql: include_str!("../../../migrations/postgres/0011_dead_letter_leases.sql"),
    },
    Migration {
        version: 12,
        name: "breaker closing",
        sql: include_str!("../../../migrations/postgres/0012_breaker_closing.sql"),
    },
    Migration {
        version: 13,
        name: "activity latency",
        sql: include_str!("../../../migrations/postgres/0013_activity_latency.sql"),
    },
    Migration {
        version: 14,
        name: "statement counts",
        sql: include_str!("../../../migrations/postgres/0014_statement_counts.sql"),
    },
    Migration {
        version: 15,
        name: "server keys",
        sql: include_str!("../../../migrations/postgres/0015_server_keys.sql"),
    },
    Migration {
        version: 16,
        name: "topics",
        sql: include_str!("../../../migrations/postgres/0016_topics.sql"),
    },
    Migration {
        version: 17,
        name: "counting on demand",
        sql: include_str!("../../../migrations/postgres/0017_counting_on_demand.sql"),
    },
    Migration {
        version: 18,
        name: "audit log",
        sql: include_str!("../../../migrations/postgres/0018_audit_log.sql"),
    },
    Migration {
        version: 19,
        name: "key use and expiry",
        sql: include_str!("../../../migrations/postgres/0019_key_use_and_expiry.sql"),
    },
    Migration {
        version: 20,
        name: "search by key",
        sql: include_str!("../../../migrations/postgres/0020_search_by_key.sql"),
    },
    Migration {
        version: 21,
        name: "activity hours",
        sql: include_str!("../../../migrations/postgres/0021_activity_hours.sql"),
    },
    Migration {
        version: 22,
        name: "lease holders",
        sql: include_str!("../../../migrations/postgres/0022_lease_holders.sql"),
    },
    Migration {
        version: 23,
        name: "worker answers",
        sql: include_str!("../../../migrations/postgres/0023_worker_answers.sql"),
    },
];

/// What [`migrate`] found and left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The schema version found (0: an empty database).
    pub from: i32,
    /// The version now.
    pub to: i32,
}

/// The schema version this binary writes.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Bring the database's schema to [`latest_version`].
pub async fn migrate(pool: &PgPool) -> anyhow::Result<Migrated> {
    let mut client = pool.get().await.context("connecting to migrate")?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .context("taking the migration lock")?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS hookq_schema (
             version    INTEGER PRIMARY KEY,
             name       TEXT NOT NULL,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await
    .context("creating hookq_schema")?;
    let from: i32 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM hookq_schema", &[])
        .await?
        .get(0);
    let latest = latest_version();
    if from > latest {
        bail!(
            "the database's hookq schema is version {from}, newer than this hookq knows \
             ({latest}): a newer hookq migrated it; run that version (or newer) here too"
        );
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > from) {
        tx.batch_execute(migration.sql).await.with_context(|| {
            format!(
                "applying PostgreSQL migration {:04}_{}",
                migration.version, migration.name
            )
        })?;
        tx.execute(
            "INSERT INTO hookq_schema (version, name) VALUES ($1, $2)",
            &[&migration.version, &migration.name],
        )
        .await?;
    }
    tx.commit().await.context("committing the migration")?;
    Ok(Migrated { from, to: latest })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_run_from_one_without_gaps() {
        for (i, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, i as i32 + 1, "{}", migration.name);
            assert!(!migration.sql.trim().is_empty());
        }
        assert_eq!(latest_version(), MIGRATIONS.len() as i32);
    }
}
