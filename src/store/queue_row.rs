//! A queue as a database row holds it, whatever the database: plain columns, the secret
//! sealed, durations in milliseconds, the backoff as comma-separated milliseconds. Each
//! backend maps its own row type to and from this one; turning it into a [`Queue`] (and
//! back) is written once, here.

use std::time::Duration;

use crate::model::{QueueName, Secret, SignatureScheme, Target};
use crate::policy::{QueuePolicy, Rate};
use crate::store::error::StoreResult;
use crate::store::records::{PreviousSecret, Queue};
use crate::store::sealing::{self, MasterKey, Sealing};

/// A queue's row, its secret sealed (or in clear without a master key).
pub struct QueueRow {
    pub name: String,
    pub target: String,
    pub secret: Option<String>,
    pub created_at: i64,
    pub max_attempts: Option<u32>,
    pub backoff_ms: Option<String>,
    pub timeout_ms: Option<i64>,
    pub concurrency: Option<u32>,
    pub rate_per_second: Option<f64>,
    pub burst: Option<u32>,
    pub max_queued: Option<i64>,
    pub paused: bool,
    pub keep_delivered_ms: Option<i64>,
    /// `hyper`, `standard` or `both`.
    pub signature_scheme: String,
    /// Sealed like `secret`.
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<i64>,
}

impl QueueRow {
    /// The row of `queue`, its secret sealed by `sealing`.
    pub fn of(queue: &Queue, sealing: &Sealing) -> Self {
        let policy = &queue.policy;
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self {
            name: queue.name.as_str().to_owned(),
            // A pull queue's target is stored empty (the column predates pull queues and
            // is NOT NULL; dead letters copy it).
            target: queue.target.as_ref().map_or("", Target::as_str).to_owned(),
            secret: queue
                .secret
                .as_ref()
                .map(|s| sealing.to_stored(s.expose(), queue.name.as_str())),
            created_at: queue.created_at,
            max_attempts: policy.max_attempts,
            backoff_ms: policy.backoff.as_ref().map(|steps| {
                steps
                    .iter()
                    .map(|d| d.as_millis().to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            timeout_ms: policy.timeout.map(millis),
            concurrency: policy.concurrency,
            rate_per_second: policy.rate.map(|r| r.per_second),
            burst: policy.rate.and_then(|r| r.burst),
            max_queued: policy
                .max_queued
                .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
            paused: queue.paused,
            keep_delivered_ms: policy.keep_delivered.map(millis),
            signature_scheme: queue.signature_scheme.as_str().to_owned(),
            previous_secret: queue
                .previous_secret
                .as_ref()
                .map(|p| sealing.to_stored(p.secret.expose(), queue.name.as_str())),
            previous_secret_expires_at: queue.previous_secret.as_ref().map(|p| p.expires_at),
        }
    }

    /// The queue, with its secret opened by one of `keys`.
    pub fn open(self, keys: &[&MasterKey]) -> StoreResult<Queue> {
        let name = self.name;
        let target =
            match self.target.as_str() {
                "" => None,
                stored => Some(Target::from_stored(stored).map_err(|e| {
                    anyhow::anyhow!("stored target of queue {name} is invalid: {e}")
                })?),
            };
        let open_secret = |stored: String| -> StoreResult<Secret> {
            let plain = sealing::open(keys, &stored, &name)
                .map_err(|e| anyhow::anyhow!("cannot read the secret of queue {name}: {e}"))?;
            Ok(Secret::parse(&plain)
                .map_err(|e| anyhow::anyhow!("stored secret of queue {name} is invalid: {e}"))?)
        };
        let secret = self.secret.map(open_secret).transpose()?;
        let previous_secret = match (self.previous_secret, self.previous_secret_expires_at) {
            (Some(stored), Some(expires_at)) => Some(PreviousSecret {
                secret: open_secret(stored)?,
                expires_at,
            }),
            _ => None,
        };
        let signature_scheme = SignatureScheme::parse(&self.signature_scheme).map_err(|e| {
            anyhow::anyhow!("stored signature scheme of queue {name} is invalid: {e}")
        })?;
        let backoff = self
            .backoff_ms
            .map(|text| {
                text.split(',')
                    .map(|step| step.parse::<u64>().map(Duration::from_millis))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| anyhow::anyhow!("stored backoff of queue {name} is invalid: {e}"))
            })
            .transpose()?;
        let policy = QueuePolicy {
            max_attempts: self.max_attempts,
            backoff,
            timeout: self
                .timeout_ms
                .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
            concurrency: self.concurrency,
            rate: self.rate_per_second.map(|per_second| Rate {
                per_second,
                burst: self.burst,
            }),
            max_queued: self.max_queued.map(|n| u64::try_from(n).unwrap_or(0)),
            keep_delivered: self
                .keep_delivered_ms
                .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        };
        Ok(Queue {
            name: QueueName::from_stored(name),
            target,
            secret,
            created_at: self.created_at,
            policy,
            paused: self.paused,
            signature_scheme,
            previous_secret,
        })
    }
}
