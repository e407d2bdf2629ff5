//! Typed server configuration: command-line flags with `HOOKQ_*` environment equivalents,
//! parsed and validated once at start-up so the rest of the server trusts it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

use crate::dispatch::DispatchConfig;
use crate::dispatch::guard::AddressPolicy;
use crate::dispatch::retry;
use crate::http_server::Limits;
use crate::maintenance::MaintenanceConfig;
use crate::policy::Defaults;
use crate::store::StoreOptions;
use crate::store::sealing::{MasterKey, Sealing};
use crate::store::sqlite::Synchronous;

/// Flags of `hookq serve` (also the default command). Every flag has a `HOOKQ_*` variable.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on. Without an API key only loopback addresses are allowed.
    #[arg(long, env = "HOOKQ_LISTEN", default_value = "127.0.0.1:6363")]
    pub listen: SocketAddr,

    /// SQLite database file, created if missing, or a PostgreSQL URL
    /// (`postgres://user:pass@host/db`) for several nodes on one database
    /// [default: the OS data directory, e.g. ~/.local/share/hookq/hookq.db]
    #[arg(long, env = "HOOKQ_DB", hide_env_values = true)]
    pub db: Option<PathBuf>,

    /// With PostgreSQL: connections this node's pool opens at most (it also opens one for
    /// wake-ups and two for grouped completions).
    #[arg(long, env = "HOOKQ_PG_POOL_SIZE", default_value_t = 16)]
    pub pg_pool_size: usize,

    /// API key required on every route but /healthz, /readyz and /openapi.json (as
    /// `Authorization: Bearer <key>`, `X-API-Key: <key>` or an HS256 JWT signed with it).
    /// Without it the server is open and refuses to listen on a non-loopback address.
    #[arg(long, env = "HOOKQ_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Key for the /admin routes [default: the API key]. Accepted the same ways as the API key.
    #[arg(long, env = "HOOKQ_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,

    /// During a rotation of the API key: the former key, accepted like HOOKQ_API_KEY (also
    /// as the JWT signing key) until you remove it.
    #[arg(long, env = "HOOKQ_API_KEY_PREVIOUS", hide_env_values = true)]
    pub api_key_previous: Option<String>,

    /// Refuse JWTs valid for longer than this (`exp - iat`, or `exp - now` without `iat`),
    /// e.g. `1h`. Unset: any lifetime.
    #[arg(long, env = "HOOKQ_JWT_MAX_LIFETIME", value_parser = parse_duration)]
    pub jwt_max_lifetime: Option<Duration>,

    /// Encrypt queue secrets at rest with this key (ChaCha20-Poly1305): 32 bytes as 64 hex
    /// characters, e.g. from `openssl rand -hex 32`. Secrets stored before are sealed with
    /// it at start-up.
    #[arg(long, env = "HOOKQ_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,

    /// During a rotation: the former master key. Secrets sealed with it still open, and are
    /// re-sealed with HOOKQ_MASTER_KEY at start-up; drop it after one restart.
    #[arg(long, env = "HOOKQ_MASTER_KEY_PREVIOUS", hide_env_values = true)]
    pub master_key_previous: Option<String>,

    /// A job not delivered within this time is dead-lettered with reason `expired`.
    #[arg(long, env = "HOOKQ_JOB_TTL", default_value = "7d", value_parser = parse_duration)]
    pub job_ttl: Duration,

    /// How long an enqueue's `Idempotency-Key` keeps standing for its job: a second enqueue
    /// with the key within this time stores nothing and answers with the first job's id.
    #[arg(long, env = "HOOKQ_IDEMPOTENCY_TTL", default_value = "24h", value_parser = parse_duration)]
    pub idempotency_ttl: Duration,

    /// Replayed and acknowledged dead letters are deleted this long after their last change.
    /// Pending dead letters are never deleted automatically.
    #[arg(long, env = "HOOKQ_DLQ_RETENTION", default_value = "30d", value_parser = parse_duration)]
    pub dlq_retention: Duration,

    /// Audit-log entries (who replayed, acknowledged, paused, changed settings, closed a
    /// breaker, created or revoked a key, created or deleted queues, topics, subscriptions)
    /// are deleted this long after they were written.
    #[arg(long, env = "HOOKQ_AUDIT_RETENTION", default_value = "90d", value_parser = parse_duration)]
    pub audit_retention: Duration,

    /// Keep delivered jobs this long in the delivery log (status DELIVERED, with the answering
    /// status, latency and attempt history), for queues that set no `keepDelivered` of their
    /// own. `0s` keeps none: a delivered job is deleted at once.
    #[arg(long, env = "HOOKQ_KEEP_DELIVERED", default_value = "0s", value_parser = parse_duration)]
    pub keep_delivered: Duration,

    /// POST operational events (job.dead_lettered, queue.breaker_opened/closed, dlq.alert)
    /// to this URL, at least once, retried with backoff. Unset: no events.
    #[arg(long, env = "HOOKQ_EVENTS_TARGET", hide_env_values = true)]
    pub events_target: Option<String>,

    /// Sign the events with this secret (`X-HYPER-SIGNATURE`, as deliveries are signed).
    #[arg(long, env = "HOOKQ_EVENTS_SECRET", hide_env_values = true)]
    pub events_secret: Option<String>,

    /// How events are signed: `hyper` (`X-HYPER-SIGNATURE`), `standard` (Standard Webhooks:
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature`; the secret must then be
    /// `whsec_` + base64 of 24–64 bytes) or `both`.
    #[arg(long, env = "HOOKQ_EVENTS_SIGNATURE", default_value = "hyper")]
    pub events_signature: String,

    /// Log a warning (and raise the metric) when more dead letters than this are pending.
    #[arg(long, env = "HOOKQ_DLQ_ALERT_PENDING", default_value_t = 100)]
    pub dlq_alert_pending: u64,

    /// CIDRs that deliveries may reach even though they are not public addresses
    /// (comma-separated, e.g. `10.0.0.0/8,fd00::/8`). Only matters with an API key: an open
    /// loopback server may deliver anywhere.
    #[arg(long, env = "HOOKQ_TARGET_ALLOWLIST", value_delimiter = ',')]
    pub target_allowlist: Vec<ipnet::IpNet>,

    /// Host names (comma-separated) this server answers to besides loopback ones, when it
    /// has no API key; and whose `Origin` it accepts besides its own (e.g. the public name
    /// behind a reverse proxy that rewrites `Host`).
    #[arg(long, env = "HOOKQ_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// The URL operators and browsers reach this server at (`https://hookq.example.com`),
    /// when it differs from the listen address (a TLS-terminating proxy): the UI's session
    /// cookie is `Secure` when it is https, its host is an allowed host, and operational
    /// events link to it.
    #[arg(long, env = "HOOKQ_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Send every delivery and operational event through this http(s) proxy
    /// (`http://[user:pass@]host:port`). hookq still resolves and checks each target itself
    /// (SSRF guard) before handing it to the proxy; the proxy's own address is not judged.
    /// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are never used.
    #[arg(long, env = "HOOKQ_EGRESS_PROXY", hide_env_values = true)]
    pub egress_proxy: Option<String>,

    /// Refuse plain-http targets (at queue creation and at delivery).
    #[arg(long, env = "HOOKQ_HTTPS_ONLY", default_value = "off", value_name = "on|off", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub https_only: bool,

    /// Consecutive failed attempts (5xx, 408, 429, timeouts, connection errors) after which a
    /// queue's deliveries pause (circuit breaker); 0 turns the breaker off.
    #[arg(long, env = "HOOKQ_BREAKER_THRESHOLD", default_value_t = 10)]
    pub breaker_threshold: u32,

    /// How long an open breaker pauses a queue before one probe job is sent; doubles after
    /// each failed probe, up to 10 minutes.
    #[arg(long, env = "HOOKQ_BREAKER_COOLDOWN", default_value = "30s", value_parser = parse_duration)]
    pub breaker_cooldown: Duration,

    /// Delivery attempts before a job is dead-lettered (status ERROR).
    #[arg(long, env = "HOOKQ_MAX_ATTEMPTS", default_value_t = 5)]
    pub max_attempts: u32,

    /// Delay before retry n, comma-separated; the last one repeats.
    #[arg(long, env = "HOOKQ_BACKOFF", default_value = "1s,5s,15s,30s,60s")]
    pub backoff: String,

    /// How far each retry delay is spread either way, as a fraction of it (0.2 = ±20%), so
    /// that jobs which failed together do not all retry together. 0 turns it off; at most 0.5.
    #[arg(long, env = "HOOKQ_BACKOFF_JITTER", default_value_t = crate::dispatch::retry::DEFAULT_JITTER)]
    pub backoff_jitter: f64,

    /// Time allowed for one delivery attempt (connect, send, response).
    #[arg(long, env = "HOOKQ_DELIVERY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub delivery_timeout: Duration,

    /// How long a claimed job stays leased before it is considered interrupted and
    /// returns to READY. Must exceed the delivery timeout.
    #[arg(long, env = "HOOKQ_LEASE_TIMEOUT", default_value = "5m", value_parser = parse_duration)]
    pub lease_timeout: Duration,

    /// Concurrent deliveries across all queues.
    #[arg(long, env = "HOOKQ_MAX_IN_FLIGHT", default_value_t = 256)]
    pub max_in_flight: usize,

    /// Concurrent deliveries to one queue's target [default: the global bound].
    #[arg(long, env = "HOOKQ_MAX_IN_FLIGHT_PER_QUEUE")]
    pub max_in_flight_per_queue: Option<usize>,

    /// Largest accepted job body in bytes.
    #[arg(long, env = "HOOKQ_MAX_JOB_BYTES", default_value_t = 262_144)]
    pub max_job_bytes: usize,

    /// Largest accepted batch body (`POST /queue/{name}/_batch`) in bytes.
    #[arg(long, env = "HOOKQ_MAX_BATCH_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_batch_bytes: usize,

    /// `on` runs the dispatcher; `off` makes an enqueue-only node (jobs wait in the database).
    #[arg(long, env = "HOOKQ_DISPATCH", default_value = "on", value_name = "on|off", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub dispatch: bool,

    /// `on` serves the admin web UI under `/ui`; `off` leaves only the JSON API.
    #[arg(long, env = "HOOKQ_UI", default_value = "on", value_name = "on|off", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub ui: bool,

    /// SQLite `synchronous` setting: FULL survives power loss; NORMAL survives process
    /// crashes only, and is faster.
    #[arg(long, env = "HOOKQ_SYNCHRONOUS", default_value = "full", value_name = "full|normal", value_parser = parse_synchronous)]
    pub synchronous: Synchronous,

    /// Time in-flight deliveries get to finish on shutdown before their leases are left
    /// to expire (and the jobs are delivered again on restart).
    #[arg(long, env = "HOOKQ_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// A client must send its request headers within this time after connecting (or after
    /// its previous request), or the connection is closed (slow-loris clients).
    #[arg(long, env = "HOOKQ_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,

    /// A client must send a request's whole body within this time, or gets 408.
    #[arg(long, env = "HOOKQ_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub body_timeout: Duration,

    /// How often the dispatcher re-checks every queue without being woken (a safety net;
    /// enqueues, retries and freed slots wake it at once).
    #[arg(long, env = "HOOKQ_DISPATCH_SWEEP", default_value = "5s", value_parser = parse_duration, hide = true)]
    pub dispatch_sweep: Duration,

    /// Queues this server holds at most: creating one more is refused (422).
    #[arg(long, env = "HOOKQ_MAX_QUEUES", default_value_t = crate::store::Caps::DEFAULT_QUEUES)]
    pub max_queues: usize,

    /// Schedules one queue holds at most: creating one more is refused (422).
    #[arg(long, env = "HOOKQ_MAX_SCHEDULES_PER_QUEUE", default_value_t = crate::store::Caps::DEFAULT_SCHEDULES_PER_QUEUE)]
    pub max_schedules_per_queue: usize,

    /// Enqueues waiting for their commit at most; past it an enqueue answers 429 with
    /// Retry-After at once, while reads, health checks and deliveries go on.
    #[arg(long, env = "HOOKQ_MAX_PENDING_WRITES", default_value_t = crate::store::DEFAULT_MAX_PENDING_ENQUEUES)]
    pub max_pending_writes: usize,

    /// Lease requests of pull workers waiting for a job at once (`wait`); past it a waiting
    /// lease answers 429 with Retry-After. Each holds a connection while it waits.
    #[arg(long, env = "HOOKQ_MAX_LEASE_WAITERS", default_value_t = 256)]
    pub max_lease_waiters: usize,

    /// Whether Forq producers with a scoped producer key create the queue they name when it
    /// does not exist. Off: only the configured key and admin keys create queues by
    /// producing (creating a queue is admin-only on hookq's own API).
    #[arg(long, env = "HOOKQ_FORQ_PRODUCERS_CREATE_QUEUES", default_value = "off", value_name = "on|off", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub forq_producers_create_queues: bool,

    /// Open client connections served at once. At the cap the oldest idle kept-alive
    /// connection is closed to make room; when none is idle, further connections wait in the
    /// listen backlog until one closes. Keep it below the process's file-descriptor limit.
    #[arg(long, env = "HOOKQ_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,

    /// Open connections one client address (an IPv6 /64) may hold. Past it, a new one closes
    /// that address's oldest idle connection, or, with all of them busy, is answered 429.
    /// Behind a reverse proxy every connection comes from the proxy: raise it to
    /// HOOKQ_MAX_CONNECTIONS there [default: a quarter of HOOKQ_MAX_CONNECTIONS, at least 1]
    #[arg(long, env = "HOOKQ_MAX_CONNECTIONS_PER_PEER")]
    pub max_connections_per_peer: Option<usize>,

    /// A kept-alive connection with no request in flight for this long is closed. The
    /// header timeout runs in that wait too (hyper starts it as soon as a connection waits
    /// for its next request), so the shorter of the two applies; the default is the same.
    #[arg(long, env = "HOOKQ_IDLE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
}

/// Where the data lives: the one choice `--db` / `HOOKQ_DB` makes.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// One SQLite file, created if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL database several nodes may share: its `postgres://` URL.
    Postgres(String),
}

impl Database {
    /// The backend's name, as `hookq_build_info` and the UI's footer say it.
    pub fn backend(&self) -> &'static str {
        match self {
            Database::Sqlite(_) => "sqlite",
            Database::Postgres(_) => "postgres",
        }
    }

    /// What a `--db` value names: a `postgres://` or `postgresql://` URL (which must parse),
    /// a SQLite file (`sqlite:` and a path, or a plain path). Anything that looks like a
    /// database URL or a keyword DSN but is neither is refused, rather than becoming a
    /// SQLite file named after it (`postgres//db/hookq` would have made `./postgres/db/`,
    /// `host=db password=…` a file named with the password). The value is never repeated:
    /// it may hold a password.
    pub fn named(db: &Path) -> anyhow::Result<Self> {
        let Some(text) = db.to_str() else {
            return Ok(Self::Sqlite(db.to_owned()));
        };
        if let Some(path) = text
            .strip_prefix("sqlite://")
            .or_else(|| text.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                bail!("--db sqlite: needs a file path after it (sqlite:/var/lib/hookq/hookq.db)");
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            text.parse::<tokio_postgres::Config>().map_err(|e| {
                anyhow::anyhow!("--db is not a PostgreSQL URL that parses ({e}); the form is postgres://user:password@host:5432/database")
            })?;
            return Ok(Self::Postgres(text.to_owned()));
        }
        if lower.starts_with("postgres")
            && lower[8..].trim_start_matches("ql").starts_with([':', '/'])
        {
            bail!(
                "--db looks like a PostgreSQL URL but is not one: write postgres://host/database \
                 (or sqlite:PATH for a SQLite file of that name)"
            );
        }
        if text.contains("://") {
            bail!(
                "--db names a URL hookq does not serve: use postgres:// or postgresql:// for \
                 PostgreSQL, or a file path (or sqlite:PATH) for SQLite"
            );
        }
        if text.contains('=') {
            bail!(
                "--db looks like a keyword connection string (host=… dbname=…), which hookq \
                 does not take: write it as a URL, postgres://user:password@host:5432/database \
                 (or sqlite:PATH for a SQLite file whose name holds `=`)"
            );
        }
        Ok(Self::Sqlite(db.to_owned()))
    }

    /// `--db` as given, or, without it, the SQLite file in the OS data directory that
    /// `data_dir` finds (asked only then: a PostgreSQL node needs no data directory).
    fn resolve(
        db: Option<&Path>,
        data_dir: impl FnOnce() -> Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        match db {
            Some(db) => Self::named(db),
            None => {
                let dir = data_dir().context(
                    "cannot find the OS data directory (no HOME?); pass --db or set HOOKQ_DB",
                )?;
                Ok(Self::Sqlite(dir.join("hookq").join("hookq.db")))
            }
        }
    }
}

/// Where the data lives, as a log or a person may see it: the file's path, or the URL
/// without its password.
impl std::fmt::Display for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => f.write_str(&crate::redact::url(url)),
        }
    }
}

/// A URL's password never prints.
impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres(url) => f
                .debug_tuple("Postgres")
                .field(&crate::redact::url(url))
                .finish(),
        }
    }
}

/// The validated configuration the server runs with. The settings of each part of the
/// server come grouped as that part takes them ([`Self::delivery`], [`Self::maintenance`],
/// [`Self::connections`]), so the server hands each its group whole.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Where the data lives.
    pub database: Database,
    /// With PostgreSQL: connections this node opens at most.
    pub pg_pool_size: usize,
    /// With SQLite: what a commit waits for.
    pub synchronous: Synchronous,
    pub api_key: Option<ApiKey>,
    pub admin_key: Option<ApiKey>,
    /// The former API key during a rotation: accepted wherever the API key is.
    pub api_key_previous: Option<ApiKey>,
    /// The longest validity a JWT may claim, if limited.
    pub jwt_max_lifetime: Option<Duration>,
    /// Seals queue secrets at rest; see [`Config::sealing`].
    pub master_key: Option<MasterKey>,
    /// Opens secrets sealed before a rotation.
    pub master_key_previous: Option<MasterKey>,
    /// Whether this node delivers (`HOOKQ_DISPATCH`); off, it only stores jobs.
    pub dispatch: bool,
    /// The dispatcher's settings, with what queues that set no policy of their own follow
    /// (`delivery.defaults`: attempts, backoff, attempt timeout, per-queue concurrency,
    /// delivery log).
    pub delivery: DispatchConfig,
    /// The sweeps' settings: TTLs, retention, the dead-letter alert.
    pub maintenance: MaintenanceConfig,
    /// The accept loop's limits: open connections, the request-head timeout.
    pub connections: Limits,
    /// Where operational events go, if anywhere.
    pub events: Option<crate::events::EventsTarget>,
    pub target_allowlist: Vec<ipnet::IpNet>,
    /// Hosts answered besides loopback ones (open server) and origins accepted besides the
    /// server's own, lower case, without ports.
    pub allowed_hosts: Vec<String>,
    /// Where operators reach the server, if set (`HOOKQ_PUBLIC_URL`).
    pub public_url: Option<reqwest::Url>,
    /// Deliveries and events go through this proxy; never one from the environment.
    pub egress_proxy: Option<reqwest::Url>,
    pub https_only: bool,
    pub max_job_bytes: usize,
    pub max_batch_bytes: usize,
    pub ui: bool,
    pub body_timeout: Duration,
    pub max_pending_writes: usize,
    /// Pull lease requests waiting for a job at once.
    pub max_lease_waiters: usize,
    /// Scoped producer keys create queues by producing to them on Forq's API.
    pub forq_producers_create_queues: bool,
    /// What clients may create at most (queues, schedules per queue).
    pub caps: crate::store::Caps,
}

/// The server's API key. Does not print.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: String) -> Self {
        Self(key)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl Config {
    /// Which addresses deliveries may reach: everything on an open loopback server (local
    /// development), only public addresses and the allowlist once an API key is set.
    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy {
            block_private: self.api_key.is_some(),
            allowlist: self.target_allowlist.clone(),
        }
    }

    /// How deliveries leave: the SSRF guard, the https rule and the egress proxy.
    pub fn egress(&self) -> crate::dispatch::Egress {
        crate::dispatch::Egress {
            policy: self.address_policy(),
            https_only: self.https_only,
            proxy: self.egress_proxy.clone(),
        }
    }

    /// Whether the UI's session cookie is `Secure`: browsers reach the server over https,
    /// as a non-loopback listener must be (behind TLS) or as `HOOKQ_PUBLIC_URL` says (a TLS
    /// proxy on loopback).
    pub fn cookies_secure(&self) -> bool {
        !self.listen.ip().is_loopback()
            || self
                .public_url
                .as_ref()
                .is_some_and(|url| url.scheme() == "https")
    }

    /// The key the /admin routes require, if any: the admin key, else the API key.
    pub fn admin_key(&self) -> Option<&ApiKey> {
        self.admin_key.as_ref().or(self.api_key.as_ref())
    }

    /// Where the store keeps its data, and how it commits.
    pub fn store_options(&self) -> StoreOptions {
        match &self.database {
            Database::Postgres(url) => StoreOptions::Postgres {
                url: url.clone(),
                pool_size: self.pg_pool_size.max(1),
            },
            Database::Sqlite(path) => StoreOptions::Sqlite {
                path: path.clone(),
                synchronous: self.synchronous,
            },
        }
    }

    /// The master keys the store seals and opens queue secrets with.
    pub fn sealing(&self) -> Sealing {
        match &self.master_key {
            Some(current) => Sealing::new(current.clone(), self.master_key_previous.clone()),
            None => Sealing::none(),
        }
    }

    /// Defaults for everything but the database path: handy for tests and embedding. The
    /// defaults are the flags' own (declared once, on [`ServeArgs`]); the environment is
    /// not read.
    pub fn with_db(db_path: PathBuf) -> Self {
        use clap::{Args, FromArgMatches};
        let command =
            ServeArgs::augment_args(clap::Command::new("hookq")).mut_args(|arg| arg.env(None));
        let parsed = command
            .try_get_matches_from(["hookq"])
            .and_then(|matches| ServeArgs::from_arg_matches(&matches));
        let mut args = parsed.expect("the flags' defaults parse (checked by a unit test)");
        args.db = Some(db_path);
        Self::from_args(args).expect("the flags' defaults are valid (checked by a unit test)")
    }

    /// Check the flags and turn them into a configuration, with messages that say what to fix.
    pub fn from_args(args: ServeArgs) -> anyhow::Result<Self> {
        Self::from_args_in(args, dirs::data_dir)
    }

    /// [`Self::from_args`], finding the OS data directory (for the default SQLite file) with
    /// `data_dir`.
    fn from_args_in(
        args: ServeArgs,
        data_dir: impl FnOnce() -> Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        let max_in_flight_per_queue = args.max_in_flight_per_queue.unwrap_or(args.max_in_flight);
        let config = Self {
            listen: args.listen,
            database: Database::resolve(args.db.as_deref(), data_dir)?,
            pg_pool_size: args.pg_pool_size,
            synchronous: args.synchronous,
            api_key: args.api_key.map(ApiKey::new),
            admin_key: args.admin_key.map(ApiKey::new),
            api_key_previous: args.api_key_previous.map(ApiKey::new),
            jwt_max_lifetime: args.jwt_max_lifetime,
            master_key: parse_master_key(
                args.master_key.as_deref(),
                "HOOKQ_MASTER_KEY / --master-key",
            )?,
            master_key_previous: parse_master_key(
                args.master_key_previous.as_deref(),
                "HOOKQ_MASTER_KEY_PREVIOUS / --master-key-previous",
            )?,
            dispatch: args.dispatch,
            delivery: DispatchConfig {
                breaker_threshold: args.breaker_threshold,
                breaker_cooldown: args.breaker_cooldown,
                max_in_flight: args.max_in_flight,
                defaults: Defaults {
                    max_attempts: args.max_attempts,
                    backoff: parse_backoff(&args.backoff)
                        .context("invalid HOOKQ_BACKOFF / --backoff")?,
                    timeout: args.delivery_timeout,
                    concurrency: u32::try_from(max_in_flight_per_queue).unwrap_or(u32::MAX),
                    keep_delivered: args.keep_delivered,
                },
                jitter: args.backoff_jitter,
                lease_timeout: args.lease_timeout,
                shutdown_grace: args.shutdown_grace,
                sweep_interval: args.dispatch_sweep,
            },
            maintenance: MaintenanceConfig {
                job_ttl: args.job_ttl,
                idempotency_ttl: args.idempotency_ttl,
                dlq_retention: args.dlq_retention,
                audit_retention: args.audit_retention,
                dlq_alert_pending: args.dlq_alert_pending,
            },
            connections: Limits {
                max_connections: args.max_connections,
                max_connections_per_peer: args.max_connections_per_peer,
                header_timeout: args.header_timeout,
                idle_timeout: args.idle_timeout,
            },
            events: parse_events_target(
                args.events_target.as_deref(),
                args.events_secret.as_deref(),
                &args.events_signature,
            )?,
            target_allowlist: args.target_allowlist,
            egress_proxy: parse_egress_proxy(args.egress_proxy.as_deref())?,
            allowed_hosts: args
                .allowed_hosts
                .iter()
                .map(|host| host.trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|host| !host.is_empty())
                .collect(),
            public_url: parse_public_url(args.public_url.as_deref())?,
            https_only: args.https_only,
            max_job_bytes: args.max_job_bytes,
            max_batch_bytes: args.max_batch_bytes,
            ui: args.ui,
            body_timeout: args.body_timeout,
            max_pending_writes: args.max_pending_writes,
            max_lease_waiters: args.max_lease_waiters,
            forq_producers_create_queues: args.forq_producers_create_queues,
            caps: crate::store::Caps {
                queues: args.max_queues,
                schedules_per_queue: args.max_schedules_per_queue,
            },
        };
        config.validate()?;
        Ok(config)
    }

    /// Cross-field rules. Called by `from_args`; call it yourself after building a `Config` by hand.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(key) = &self.api_key {
            if key.expose().trim().is_empty() {
                bail!("HOOKQ_API_KEY / --api-key must not be empty");
            }
        } else if !self.listen.ip().is_loopback() {
            bail!(
                "refusing to listen on {} without an API key: set HOOKQ_API_KEY / --api-key, \
                 or listen on a loopback address such as 127.0.0.1",
                self.listen
            );
        }
        if self
            .admin_key
            .as_ref()
            .is_some_and(|k| k.expose().trim().is_empty())
        {
            bail!("HOOKQ_ADMIN_KEY / --admin-key must not be empty");
        }
        if let Some(previous) = &self.api_key_previous
            && (previous.expose().trim().is_empty() || self.api_key.is_none())
        {
            bail!(
                "HOOKQ_API_KEY_PREVIOUS must be a non-empty former key, set together with \
                 HOOKQ_API_KEY (the new key)"
            );
        }
        if self.jwt_max_lifetime.is_some_and(|d| d.is_zero()) {
            bail!("HOOKQ_JWT_MAX_LIFETIME / --jwt-max-lifetime must be greater than zero");
        }
        if self.admin_key.is_some() && self.api_key.is_none() && !self.listen.ip().is_loopback() {
            bail!(
                "refusing to listen on {} with only an admin key: the queue API would be open; \
                 set HOOKQ_API_KEY too",
                self.listen
            );
        }
        if self.master_key_previous.is_some() && self.master_key.is_none() {
            bail!(
                "HOOKQ_MASTER_KEY_PREVIOUS is set without HOOKQ_MASTER_KEY: to rotate, set \
                 HOOKQ_MASTER_KEY to the new key and HOOKQ_MASTER_KEY_PREVIOUS to the old one"
            );
        }
        let sweeps = &self.maintenance;
        if sweeps.job_ttl.is_zero()
            || sweeps.dlq_retention.is_zero()
            || sweeps.audit_retention.is_zero()
            || sweeps.idempotency_ttl.is_zero()
        {
            bail!(
                "HOOKQ_JOB_TTL, HOOKQ_DLQ_RETENTION, HOOKQ_AUDIT_RETENTION and HOOKQ_IDEMPOTENCY_TTL must be greater than zero"
            );
        }
        let delivery = &self.delivery;
        if !crate::policy::KEEP_DELIVERED.contains(&delivery.defaults.keep_delivered) {
            bail!("HOOKQ_KEEP_DELIVERED / --keep-delivered must be from 0s (not kept) to 365d");
        }
        if delivery.defaults.max_attempts == 0 {
            bail!("HOOKQ_MAX_ATTEMPTS / --max-attempts must be at least 1");
        }
        if delivery.defaults.backoff.is_empty() {
            bail!("HOOKQ_BACKOFF / --backoff must list at least one delay");
        }
        if !(0.0..=retry::MAX_JITTER).contains(&delivery.jitter) {
            bail!(
                "HOOKQ_BACKOFF_JITTER / --backoff-jitter must be a fraction from 0 to {}, e.g. 0.2",
                retry::MAX_JITTER
            );
        }
        if delivery.defaults.timeout.is_zero() {
            bail!("HOOKQ_DELIVERY_TIMEOUT / --delivery-timeout must be greater than zero");
        }
        if delivery.lease_timeout <= delivery.defaults.timeout {
            bail!(
                "HOOKQ_LEASE_TIMEOUT ({}) must exceed HOOKQ_DELIVERY_TIMEOUT ({}), \
                 or jobs still being delivered would be handed out again",
                humantime::format_duration(delivery.lease_timeout),
                humantime::format_duration(delivery.defaults.timeout)
            );
        }
        if delivery.max_in_flight == 0 || delivery.defaults.concurrency == 0 {
            bail!("HOOKQ_MAX_IN_FLIGHT and HOOKQ_MAX_IN_FLIGHT_PER_QUEUE must be at least 1");
        }
        if self.connections.header_timeout.is_zero() || self.body_timeout.is_zero() {
            bail!("HOOKQ_HEADER_TIMEOUT and HOOKQ_BODY_TIMEOUT must be greater than zero");
        }
        let connections = &self.connections;
        if connections.max_connections == 0 {
            bail!("HOOKQ_MAX_CONNECTIONS / --max-connections must be at least 1");
        }
        if !(1..=connections.max_connections).contains(&connections.per_peer()) {
            bail!(
                "HOOKQ_MAX_CONNECTIONS_PER_PEER / --max-connections-per-peer must be from 1 to \
                 HOOKQ_MAX_CONNECTIONS ({})",
                connections.max_connections
            );
        }
        if connections.idle_timeout.is_zero() {
            bail!("HOOKQ_IDLE_TIMEOUT / --idle-timeout must be greater than zero");
        }
        if self.caps.queues == 0 || self.caps.schedules_per_queue == 0 {
            bail!("HOOKQ_MAX_QUEUES and HOOKQ_MAX_SCHEDULES_PER_QUEUE must be at least 1");
        }
        if self.max_pending_writes == 0 {
            bail!("HOOKQ_MAX_PENDING_WRITES / --max-pending-writes must be at least 1");
        }
        if self.max_job_bytes < 2 {
            bail!("HOOKQ_MAX_JOB_BYTES / --max-job-bytes must be at least 2 (the body `{{}}`)");
        }
        Ok(())
    }
}

/// `500ms`, `5s`, `2m`, `1h` (and combinations such as `1m30s`).
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    crate::policy::read_duration(raw)
}

fn parse_synchronous(raw: &str) -> Result<Synchronous, String> {
    raw.parse()
}

fn parse_on_off(raw: &str) -> Result<bool, String> {
    match raw.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{raw}` is neither on nor off")),
    }
}

/// A comma-separated list of durations, e.g. `1s,5s,15s`.
pub fn parse_backoff(raw: &str) -> anyhow::Result<Vec<Duration>> {
    raw.split(',')
        .map(|part| parse_duration(part).map_err(anyhow::Error::msg))
        .collect()
}

/// `HOOKQ_EVENTS_TARGET` and `HOOKQ_EVENTS_SECRET`: a secret without a target is a mistake.
fn parse_events_target(
    target: Option<&str>,
    secret: Option<&str>,
    scheme: &str,
) -> anyhow::Result<Option<crate::events::EventsTarget>> {
    let scheme = crate::model::SignatureScheme::parse(scheme)
        .map_err(|e| anyhow::anyhow!("invalid HOOKQ_EVENTS_SIGNATURE / --events-signature: {e}"))?;
    let Some(target) = target.filter(|t| !t.trim().is_empty()) else {
        if secret.is_some() {
            bail!("HOOKQ_EVENTS_SECRET is set without HOOKQ_EVENTS_TARGET");
        }
        return Ok(None);
    };
    let url = crate::model::Target::parse(target)
        .map_err(|e| anyhow::anyhow!("invalid HOOKQ_EVENTS_TARGET / --events-target: {}", e.0))?;
    let secret = secret
        .map(crate::model::Secret::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("invalid HOOKQ_EVENTS_SECRET / --events-secret: {}", e.0))?;
    if let Some(secret) = &secret {
        scheme.check_secret(secret).map_err(|e| {
            anyhow::anyhow!("invalid HOOKQ_EVENTS_SECRET for HOOKQ_EVENTS_SIGNATURE: {e}")
        })?;
    }
    Ok(Some(crate::events::EventsTarget {
        url,
        secret,
        scheme,
    }))
}

/// `HOOKQ_EGRESS_PROXY`: an http or https URL. The error never repeats the value (it may
/// carry a password).
fn parse_egress_proxy(raw: Option<&str>) -> anyhow::Result<Option<reqwest::Url>> {
    let Some(raw) = raw.map(str::trim).filter(|raw| !raw.is_empty()) else {
        return Ok(None);
    };
    let url = reqwest::Url::parse(raw)
        .map_err(|e| anyhow::anyhow!("HOOKQ_EGRESS_PROXY / --egress-proxy is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        bail!(
            "HOOKQ_EGRESS_PROXY / --egress-proxy must be an http:// or https:// proxy URL with a host"
        );
    }
    Ok(Some(url))
}

/// `HOOKQ_PUBLIC_URL`: an absolute http(s) URL with a host.
fn parse_public_url(raw: Option<&str>) -> anyhow::Result<Option<reqwest::Url>> {
    let Some(raw) = raw.map(str::trim).filter(|raw| !raw.is_empty()) else {
        return Ok(None);
    };
    match reqwest::Url::parse(raw) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {
            Ok(Some(url))
        }
        _ => bail!(
            "HOOKQ_PUBLIC_URL / --public-url must be an absolute http(s) URL such as \
             https://hookq.example.com, not {raw:?}"
        ),
    }
}

/// An optional master key, 64 hex characters; the error names the setting, never the value.
fn parse_master_key(raw: Option<&str>, setting: &str) -> anyhow::Result<Option<MasterKey>> {
    raw.map(|raw| MasterKey::parse_hex(raw).map_err(|e| anyhow::anyhow!("{setting} {e}")))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::with_db(PathBuf::from("unused.db"))
    }

    #[test]
    fn durations_accept_the_documented_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn a_space_separated_duration_list_is_refused_with_the_comma_form() {
        let refused = parse_backoff("1s 5s").unwrap_err().to_string();
        assert!(refused.contains("`1s,5s`"), "{refused}");
        assert!(
            parse_duration("1m 30s").is_err(),
            "one duration is written without spaces"
        );
        assert_eq!(parse_duration(" 1m30s ").unwrap(), Duration::from_secs(90));
    }

    #[test]
    fn backoff_is_a_list_of_durations() {
        let schedule = parse_backoff("1s, 5s,15s").unwrap();
        assert_eq!(schedule.len(), 3);
        assert_eq!(schedule[1], Duration::from_secs(5));
        assert!(parse_backoff("1s,,2s").is_err());
    }

    #[test]
    fn defaults_are_valid() {
        config().validate().unwrap();
    }

    #[test]
    fn an_open_server_refuses_a_public_address() {
        let mut c = config();
        c.listen = "0.0.0.0:6363".parse().unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("without an API key"), "{err}");
        c.api_key = Some(ApiKey::new("k".repeat(32)));
        c.validate().unwrap();
    }

    #[test]
    fn flags_and_environment_parse_into_a_config() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let cli = Cli::try_parse_from([
            "hookq",
            "--db",
            "x.db",
            "--dispatch",
            "off",
            "--ui",
            "off",
            "--backoff",
            "500ms,2s",
            "--synchronous",
            "NORMAL",
        ])
        .unwrap();
        let config = Config::from_args(cli.serve).unwrap();
        assert!(!config.dispatch);
        assert!(!config.ui);
        assert_eq!(
            config.delivery.defaults.backoff,
            vec![Duration::from_millis(500), Duration::from_secs(2)]
        );
        assert_eq!(config.synchronous, Synchronous::Normal);
        assert_eq!(
            config.maintenance.job_ttl,
            Duration::from_secs(7 * 24 * 3600)
        );
        assert_eq!(config.delivery.defaults.concurrency, 256);
        assert_eq!(config.database, Database::Sqlite(PathBuf::from("x.db")));
    }

    #[test]
    fn master_keys_are_validated_at_start() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let parse = |args: &[&str]| {
            let mut argv = vec!["hookq", "--db", "x.db"];
            argv.extend_from_slice(args);
            Config::from_args(Cli::try_parse_from(argv).unwrap().serve)
        };
        let (old, new) = ("11".repeat(32), "22".repeat(32));
        let config = parse(&["--master-key", &new, "--master-key-previous", &old]).unwrap();
        let sealing = config.sealing();
        assert_eq!(sealing.keys().len(), 2);
        assert!(!format!("{config:?}").contains(&new));
        let err = parse(&["--master-key", "0123"]).unwrap_err().to_string();
        assert!(
            err.contains("HOOKQ_MASTER_KEY") && err.contains("64 hex characters"),
            "{err}"
        );
        let err = parse(&["--master-key-previous", &old])
            .unwrap_err()
            .to_string();
        assert!(err.contains("without HOOKQ_MASTER_KEY"), "{err}");
        assert!(parse(&[]).unwrap().sealing().keys().is_empty());
    }

    #[test]
    fn jitter_is_a_fraction_of_at_most_a_half() {
        let mut c = config();
        c.delivery.jitter = 0.5;
        c.validate().unwrap();
        for bad in [0.6, 1.0, -0.1, f64::NAN] {
            c.delivery.jitter = bad;
            assert!(c.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_per_peer_connection_cap_is_within_the_global_one() {
        let c = Config::from_args(args(&["--db", "x.db"])).unwrap();
        assert_eq!(c.connections.per_peer(), 256, "a quarter by default");
        assert_eq!(c.connections.idle_timeout, Duration::from_secs(10));
        let c = Config::from_args(args(&["--db", "x.db", "--max-connections", "2"])).unwrap();
        assert_eq!(c.connections.per_peer(), 1, "at least one");
        let behind_a_proxy = [
            "--db",
            "x.db",
            "--max-connections",
            "64",
            "--max-connections-per-peer",
            "64",
        ];
        assert_eq!(
            Config::from_args(args(&behind_a_proxy))
                .unwrap()
                .connections
                .per_peer(),
            64
        );
        for bad in ["0", "65"] {
            let err = Config::from_args(args(&[
                "--db",
                "x.db",
                "--max-connections",
                "64",
                "--max-connections-per-peer",
                bad,
            ]))
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("HOOKQ_MAX_CONNECTIONS_PER_PEER"),
                "{bad}: {err}"
            );
        }
        let err = Config::from_args(args(&["--db", "x.db", "--idle-timeout", "0s"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("HOOKQ_IDLE_TIMEOUT"), "{err}");
    }

    #[test]
    fn the_lease_must_outlast_a_delivery() {
        let mut c = config();
        c.delivery.lease_timeout = c.delivery.defaults.timeout;
        assert!(c.validate().is_err());
    }

    /// `ServeArgs` from a command line, as `hookq serve` parses it (the environment aside).
    fn args(argv: &[&str]) -> ServeArgs {
        use clap::{Args, FromArgMatches};
        let command =
            ServeArgs::augment_args(clap::Command::new("hookq")).mut_args(|arg| arg.env(None));
        let mut full = vec!["hookq"];
        full.extend_from_slice(argv);
        let matches = command.try_get_matches_from(full).unwrap();
        ServeArgs::from_arg_matches(&matches).unwrap()
    }

    #[test]
    fn postgresql_urls_are_told_from_file_paths() {
        for url in ["postgres://u:p@db/hookq", "postgresql://db/hookq"] {
            assert_eq!(
                Database::named(Path::new(url)).unwrap(),
                Database::Postgres(url.to_owned())
            );
        }
        for file in [
            "/var/lib/hookq/hookq.db",
            "postgres.db",
            "./postgres:/x.db",
            "a b.db",
        ] {
            assert_eq!(
                Database::named(Path::new(file)).unwrap(),
                Database::Sqlite(PathBuf::from(file))
            );
        }
        for (given, file) in [
            ("sqlite:jobs.db", "jobs.db"),
            ("sqlite:///data/a=b.db", "/data/a=b.db"),
        ] {
            assert_eq!(
                Database::named(Path::new(given)).unwrap(),
                Database::Sqlite(PathBuf::from(file))
            );
        }
    }

    #[test]
    fn a_mistyped_database_url_or_a_keyword_dsn_is_refused_without_repeating_it() {
        for (given, says) in [
            ("postgres//db/hookq", "looks like a PostgreSQL URL"),
            ("postgresql:/db/hookq", "looks like a PostgreSQL URL"),
            ("postgres://db:notaport/hookq", "URL that parses"),
            ("mysql://db/hookq", "URL hookq does not serve"),
            (
                "host=db dbname=hookq password=s3cret",
                "keyword connection string",
            ),
            ("sqlite:", "needs a file path"),
        ] {
            let refused = Database::named(Path::new(given)).unwrap_err().to_string();
            assert!(refused.contains(says), "{given}: {refused}");
            assert!(!refused.contains("s3cret"), "{refused}");
        }
    }

    #[test]
    fn a_database_shows_its_path_or_its_url_without_the_password() {
        let file = Database::named(Path::new("/var/lib/hookq/hookq.db")).unwrap();
        assert_eq!(file.to_string(), "/var/lib/hookq/hookq.db");
        let url = Database::named(Path::new("postgres://hookq:s3cret@db.example/hookq")).unwrap();
        let shown = url.to_string();
        assert!(shown.starts_with("postgres://hookq:"), "{shown}");
        assert!(shown.ends_with("@db.example/hookq"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn a_postgresql_url_needs_no_data_directory() {
        let no_data_dir = || -> Option<PathBuf> { panic!("no data directory is looked for") };
        let url = "postgres://hookq:s3cret@db.example/hookq";
        let config = Config::from_args_in(args(&["--db", url]), no_data_dir).unwrap();
        assert_eq!(config.database, Database::Postgres(url.to_owned()));
        assert!(matches!(
            config.store_options(),
            StoreOptions::Postgres { ref url, pool_size: 16 } if url.ends_with("/hookq")
        ));
        let config = Config::from_args_in(
            args(&["--db", "postgresql://db.example/hookq"]),
            no_data_dir,
        )
        .unwrap();
        assert!(matches!(config.database, Database::Postgres(_)));
        // Its password does not print.
        assert!(!format!("{config:?}").contains("s3cret"));
        assert!(!format!("{:?}", Database::named(Path::new(url)).unwrap()).contains("s3cret"));
    }

    #[test]
    fn without_a_db_the_sqlite_file_goes_in_the_data_directory_or_nowhere() {
        let config = Config::from_args_in(args(&[]), || Some(PathBuf::from("/data"))).unwrap();
        assert_eq!(
            config.database,
            Database::Sqlite(PathBuf::from("/data/hookq/hookq.db"))
        );
        let err = Config::from_args_in(args(&[]), || None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("HOOKQ_DB"), "{err}");
        // A file named on the command line needs no data directory either.
        let config = Config::from_args_in(args(&["--db", "jobs.db"]), || None).unwrap();
        assert_eq!(config.database, Database::Sqlite(PathBuf::from("jobs.db")));
    }
}
