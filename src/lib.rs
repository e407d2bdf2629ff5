//! hookq: a single-binary, webhook-dispatching job queue, compatible with the hyper Queue API,
//! on embedded SQLite or on PostgreSQL shared by several nodes.
//!
//! The path of one job, module by module:
//! - [`http_server`]: accepts connections under the caps the [`connections`] table keeps
//!   (idle kept-alive ones make room, oldest first) and serves them over HTTP/1.1.
//! - [`request_id`], [`origin_guard`] then [`api`]: every request gets an id (its
//!   `x-request-id` and its log span); a request from a foreign page (its `Origin`, or a rebound
//!   `Host`) is refused first; then HTTP routes (hyper Queue API), auth and scoped keys
//!   ([`access`]), JSON errors. An enqueue canonicalizes the body ([`json`]), stores it
//!   through the [`store`] and wakes the dispatcher.
//! - [`store`]: the storage port, behind which the rest cannot tell the backends apart:
//!   SQLite in WAL mode (one writer thread with group commit, a read-only pool), or
//!   PostgreSQL for several nodes on one database.
//! - [`dispatch`]: claims due jobs, POSTs them to the queue's target signed with
//!   [`signature`], records delivered / retry / dead-letter outcomes.
//! - [`pull`]: a pull queue's jobs leased to workers over HTTP, and their ack, nack and
//!   extend (the same lease machine as a push delivery).
//! - [`scheduler`]: fires the ticks of recurring jobs (cron schedules, [`cron`]) as
//!   ordinary jobs.
//! - [`maintenance`]: periodic sweeps (stale leases, `PRAGMA optimize`).
//! - [`cluster`]: on a database several nodes share, following the others (their wake-ups,
//!   queue changes and open breakers) through the store's cluster capability.
//! - [`ui`]: the admin web UI under `/ui`, a client of the API in the same process.
//! - [`config`] and [`model`]: validated configuration and domain types parsed at the edge.
//! - [`cli`]: the command line, with the operator subcommands (HTTP client, backup, check).
//!
//! [`Server::build`] opens everything on a bound listener; [`Server::run`] serves until the
//! shutdown token fires, then drains deliveries and flushes the writer.
#![forbid(unsafe_code)]

pub mod access;
pub mod api;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod cron;
pub mod dispatch;
pub mod event;
pub mod events;
pub mod http_server;
pub mod humanize;
pub mod json;
pub mod latency;
pub mod maintenance;
pub mod model;
pub mod origin_guard;
pub mod otel;
pub mod pattern;
pub mod policy;
pub mod pull;
pub mod redact;
pub mod request_id;
pub mod scheduler;
pub mod signing;
pub mod store;
pub mod telemetry;
pub mod trace_context;
pub mod ui;

/// `X-HYPER-SIGNATURE` signing and verification: the `hookq-signature` crate, which Rust
/// workers use on its own.
pub use hookq_signature as signature;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use api::AppState;
use config::Config;
use dispatch::{Claimer, DeliveryPool, Wakeups, WebhookClient};
use events::{EventSender, Events};
use maintenance::Maintenance;
use scheduler::{ScheduleChanges, Scheduler};
use store::{Store, StoreDone};

/// A hookq server, opened and bound but not yet serving.
pub struct Server {
    listener: TcpListener,
    store: Store,
    store_done: StoreDone,
    config: Arc<Config>,
    wakeups: Wakeups,
    pool: Option<DeliveryPool>,
    events: Events,
}

impl Server {
    /// Open (or create) the database and prepare to serve on `listener`.
    pub async fn build(config: Config, listener: TcpListener) -> anyhow::Result<Self> {
        config.validate()?;
        let options = config.store_options();
        let sealing = config.sealing();
        telemetry::handle();
        telemetry::started(config.database.backend());
        let (store, store_done) = Store::connect(options, sealing, model::now_millis(), |batch| {
            telemetry::writer_batch(
                batch.ops,
                std::time::Duration::from_micros(batch.commit_micros),
            );
        })
        .await?;
        let store = store
            .with_max_pending_enqueues(config.max_pending_writes)
            .with_caps(config.caps)
            .with_dead_letter_events(config.events.is_some());
        let events = match &config.events {
            Some(_) => Events::new(store.clone()),
            None => Events::off(),
        };
        tracing::info!(db = %store.location(), "database open");
        let wakeups = Wakeups::default();
        let pool = if config.dispatch {
            let webhook = WebhookClient::new(config.delivery.defaults.timeout, config.egress())?;
            Some(DeliveryPool::new(
                store.clone(),
                webhook,
                &config.delivery,
                wakeups.clone(),
                events.clone(),
            ))
        } else {
            None
        };
        Ok(Self {
            listener,
            store,
            store_done,
            config: Arc::new(config),
            wakeups,
            pool,
            events,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle to the server's store (for embedding, and tests that look behind the API).
    pub fn store(&self) -> Store {
        self.store.clone()
    }

    /// Serve until `shutdown` fires: stop accepting, let in-flight requests and deliveries
    /// finish (within the grace period), commit the last writes and close the database.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let Self {
            listener,
            store,
            store_done,
            config,
            wakeups,
            pool,
            events,
        } = self;
        let background = CancellationToken::new();

        let claimer = if let Some(pool) = &pool {
            Some(tokio::spawn(
                Claimer::new(pool.clone()).run(background.clone()),
            ))
        } else {
            tracing::info!("dispatch is off: jobs are stored but not delivered by this node");
            None
        };
        let maintenance = tokio::spawn(
            Maintenance {
                store: store.clone(),
                wakeups: wakeups.clone(),
                config: config.maintenance.clone(),
                lease_timeout: config.delivery.lease_timeout,
                defaults: config.delivery.defaults.clone(),
                alerts: Arc::default(),
                events: events.clone(),
                pool: pool.clone(),
            }
            .run(background.clone()),
        );

        let schedule_changes = ScheduleChanges::default();
        let scheduler = tokio::spawn(
            Scheduler {
                store: store.clone(),
                wakeups: wakeups.clone(),
                changes: schedule_changes.clone(),
            }
            .run(background.clone()),
        );
        let leases = pull::Leases::new(
            store.clone(),
            wakeups.clone(),
            events.clone(),
            pool.clone(),
            pull::PullConfig {
                defaults: config.delivery.defaults.clone(),
                retry: config.delivery.retry(),
                max_waiting: config.max_lease_waiters,
                signer: pull::LeaseSigner::new(
                    store
                        .server_key(store::server_keys::LEASE_KEY)
                        .await
                        .context("cannot read or make the lease key")?,
                ),
            },
        );
        let expiry_watch = tokio::spawn(leases.clone().watch_expiries(background.clone()));
        let metrics_upkeep = tokio::spawn(telemetry::run_upkeep(background.clone()));
        let following = cluster::follow(&store, &wakeups, pool.as_ref(), &leases, &background);
        let event_sender = match &config.events {
            Some(target) => {
                tracing::info!(target = %redact::endpoint(target.url.url()), "operational events on");
                let sender = EventSender::new(
                    store.clone(),
                    events.clone(),
                    target.clone(),
                    config.egress_proxy.as_ref(),
                )?
                .with_public_url(config.public_url.clone());
                Some(tokio::spawn(sender.run(background.clone())))
            }
            None => None,
        };

        let listening = listener.local_addr()?;
        tracing::info!(addr = %listening, "hookq listening");
        if let Some(url) = ui::address(&config, listening) {
            tracing::info!(%url, "admin UI");
        }
        let limits = config.connections;
        // `/readyz` turns 503 on the same token that stops the accept loop.
        let state = AppState::new(api::Shared {
            store,
            config,
            wakeups,
            pool,
            leases,
            schedule_changes,
            events: events.clone(),
            shutdown: shutdown.clone(),
            key_use: api::auth::KeyUse::default(),
        });
        let app = request_id::RequestIds::new(origin_guard::Guarded::new(
            ui::with_ui(api::router(state.clone()), &state.config),
            &state.config,
        ));
        http_server::serve(listener, app, limits, shutdown).await;

        tracing::info!("shutting down: no new jobs accepted, finishing deliveries");
        background.cancel();
        if let Some(claimer) = claimer {
            claimer.await.context("claim loop task failed")?;
        }
        maintenance.await.context("maintenance task failed")?;
        scheduler.await.context("scheduler task failed")?;
        expiry_watch.await.context("lease expiry watch failed")?;
        if let Some(sender) = event_sender {
            sender.await.context("event sender task failed")?;
        }
        metrics_upkeep.await.context("metrics upkeep task failed")?;
        if let Some(following) = following {
            following.finished().await?;
        }
        // Every handle on the store goes before it can close (events hold one too).
        drop(state);
        drop(events);
        tokio::task::spawn_blocking(move || store_done.wait())
            .await
            .context("waiting for the store to close failed")?;
        tracing::info!("database closed; bye");
        Ok(())
    }
}
