//! The command line: `hookq [serve]` runs the server; the other subcommands are operator
//! tools, either talking to a running server over HTTP ([`remote`], through [`client`]) or
//! working on the database file directly ([`local`]), plus signature checking ([`verify`]).
//!
//! Exit codes: 0 success, 1 failure (an API error, an invalid signature, a failed check),
//! 2 usage error, 3 the server could not be reached.

pub mod client;
pub mod local;
pub mod remote;
pub mod table;
pub mod topics;
pub mod verify;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{Database, ServeArgs, parse_duration};

/// hookq: a webhook-dispatching job queue in one binary, on one SQLite file.
/// Compatible with the hyper Queue API.
#[derive(Debug, Parser)]
#[command(name = "hookq", version, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Running `hookq` without a subcommand is `hookq serve`.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default).
    Serve(Box<ServeArgs>),
    /// Create, list, show, change, pause, resume or delete queues on a running server.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Enqueue one job: JSON from the argument, or from stdin.
    Enqueue(EnqueueArgs),
    /// List a queue's READY, ERROR or (kept) DELIVERED jobs.
    Jobs(JobsArgs),
    /// Search every queue's jobs (waiting, in flight, dead letters, deliveries kept) by
    /// text, ordering key, id start, queue, status and creation time, newest first.
    Search(SearchArgs),
    /// Lease jobs of a pull queue (a worker's first step; then `ack` or `nack` each).
    Lease(LeaseArgs),
    /// Acknowledge a leased job: it is done.
    Ack(LeaseAnswerArgs),
    /// Report a leased job's attempt as failed: retried, or dead-lettered once its attempts
    /// are spent.
    Nack(NackArgs),
    /// Recurring jobs: set, list, pause, resume or delete a queue's cron schedules.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Dead letters: list, stats, replay, acknowledge.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Topics: create, list, show, delete, subscribe and unsubscribe queues, publish, replay.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Scoped API keys: create (the key is printed once), list, revoke. Admin only.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Check a delivery's signature (X-HYPER-SIGNATURE or Standard Webhooks) against a body
    /// and secret (no server needed).
    Verify(VerifyArgs),
    /// Create or upgrade a database file to this binary's schema (the server must be stopped).
    Migrate(DbArgs),
    /// Copy a database with SQLite's online backup API (safe while the server runs).
    Backup(BackupArgs),
    /// Check a database file's integrity and foreign keys (safe while the server runs).
    Check(DbArgs),
}

/// How to reach the server: shared by every HTTP subcommand.
#[derive(Debug, Clone, Args)]
pub struct RemoteArgs {
    /// Base URL of the hookq server.
    #[arg(
        long,
        env = "HOOKQ_URL",
        hide_env_values = true,
        default_value = "http://127.0.0.1:6363"
    )]
    pub url: String,
    /// API key, sent as `Authorization: Bearer <key>`.
    #[arg(long, env = "HOOKQ_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Key for the /admin routes (dead letters) [default: the API key].
    #[arg(long, env = "HOOKQ_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,
    /// Print the server's JSON instead of a table (for scripts).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Create a queue delivering to a target URL, or without one a pull queue (workers
    /// lease its jobs: `hookq lease`).
    Create {
        name: String,
        /// Absolute http(s) URL the jobs are POSTed to; without it, a pull queue.
        #[arg(long)]
        target: Option<String>,
        /// Sign every delivery with this secret.
        #[arg(long)]
        secret: Option<String>,
        /// How deliveries are signed: hyper (X-HYPER-SIGNATURE), standard (Standard
        /// Webhooks; the secret must be whsec_<base64>) or both [server default: hyper].
        #[arg(long, value_parser = ["hyper", "standard", "both"])]
        signature_scheme: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// List the queues.
    List {
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// A queue's settings (effective values) and figures.
    Show {
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Change a queue's settings; `--reset` puts settings back on the server's default.
    Set(QueueSetArgs),
    /// Pause a queue: it accepts jobs and delivers none.
    Pause {
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Resume a paused queue.
    Resume {
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Close a queue's circuit breaker: its due jobs go to the target at once.
    CloseBreaker {
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Delete a queue with all its jobs and dead letters (needs --yes).
    Delete {
        name: String,
        /// Confirm: the queue's jobs and dead letters are deleted too.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        remote: RemoteArgs,
    },
}

/// `hookq queue set NAME …`: only what is given changes.
#[derive(Debug, Args)]
pub struct QueueSetArgs {
    pub name: String,
    /// A new target URL.
    #[arg(long)]
    pub target: Option<String>,
    /// A new signing secret (`--reset secret` stops signing).
    #[arg(long)]
    pub secret: Option<String>,
    /// With --secret: keep the current secret signing Standard Webhooks deliveries beside
    /// the new one this long (e.g. `24h`).
    #[arg(long, requires = "secret")]
    pub rotate: Option<String>,
    /// How deliveries are signed: hyper, standard (Standard Webhooks) or both.
    #[arg(long, value_parser = ["hyper", "standard", "both"])]
    pub signature_scheme: Option<String>,
    /// Attempts before a job is dead-lettered (1-100).
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Delays before retry n, comma-separated (e.g. `500ms,5s,1m`); the last repeats.
    #[arg(long, value_delimiter = ',')]
    pub backoff: Vec<String>,
    /// One attempt's time limit (100ms-15m).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Deliveries in flight at once (1-10000).
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// Deliveries started per second (fractions allowed).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Deliveries that may start at once (with a rate).
    #[arg(long)]
    pub burst: Option<u32>,
    /// A cap on READY jobs.
    #[arg(long)]
    pub max_queued: Option<u64>,
    /// Keep delivered jobs this long in the delivery log (e.g. `7d`; `0s`: not kept).
    #[arg(long)]
    pub keep_delivered: Option<String>,
    /// Settings to put back on the server's default, comma-separated: max-attempts,
    /// backoff, timeout, concurrency, rate, burst, max-queued, keep-delivered, secret,
    /// signature-scheme.
    #[arg(long, value_delimiter = ',', value_parser = [
        "max-attempts", "backoff", "timeout", "concurrency", "rate", "burst", "max-queued",
        "keep-delivered", "secret", "signature-scheme",
    ])]
    pub reset: Vec<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

impl QueueSetArgs {
    /// The PATCH body: the given settings, and `null` for each one reset.
    pub fn patch_body(&self) -> Result<serde_json::Value, String> {
        use serde_json::{Value, json};
        let mut body = serde_json::Map::new();
        let mut put = |field: &str, value: Option<Value>| {
            if let Some(value) = value {
                body.insert(field.to_owned(), value);
            }
        };
        put("target", self.target.clone().map(Value::from));
        put("secret", self.secret.clone().map(Value::from));
        put("rotate", self.rotate.clone().map(Value::from));
        put(
            "signatureScheme",
            self.signature_scheme.clone().map(Value::from),
        );
        put("maxAttempts", self.max_attempts.map(Value::from));
        put(
            "backoff",
            (!self.backoff.is_empty()).then(|| json!(self.backoff)),
        );
        put("timeout", self.timeout.clone().map(Value::from));
        put("concurrency", self.concurrency.map(Value::from));
        put("ratePerSecond", self.rate.map(Value::from));
        put("burst", self.burst.map(Value::from));
        put("maxQueued", self.max_queued.map(Value::from));
        put(
            "keepDelivered",
            self.keep_delivered.clone().map(Value::from),
        );
        for reset in &self.reset {
            let field = match reset.as_str() {
                "max-attempts" => "maxAttempts",
                "rate" => "ratePerSecond",
                "max-queued" => "maxQueued",
                "keep-delivered" => "keepDelivered",
                "signature-scheme" => "signatureScheme",
                other => other,
            };
            if body.contains_key(field) {
                return Err(format!("--{reset} is both set and reset"));
            }
            body.insert(field.to_owned(), Value::Null);
        }
        if body.is_empty() {
            return Err(
                "nothing to change: give a setting (e.g. --max-attempts 10) or --reset".into(),
            );
        }
        Ok(Value::Object(body))
    }
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    pub queue: String,
    /// The job, a JSON object; `-` or nothing reads it from stdin.
    pub job: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct LeaseArgs {
    pub queue: String,
    /// Jobs to lease at most (1–100).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max: u32,
    /// Wait this long for a job when none is due (up to 30s).
    #[arg(long, default_value = "0s")]
    pub wait: String,
    /// How long the lease lasts [default: the queue's timeout].
    #[arg(long)]
    pub visibility: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct LeaseAnswerArgs {
    pub queue: String,
    /// The job's id.
    pub id: String,
    /// The lease id `hookq lease` printed with the job.
    pub lease_id: String,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct NackArgs {
    #[command(flatten)]
    pub lease: LeaseAnswerArgs,
    /// Why it failed (kept as the job's last error).
    #[arg(long)]
    pub error: Option<String>,
    /// Retry after this long instead of the queue's backoff.
    #[arg(long)]
    pub delay: Option<String>,
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    pub queue: String,
    /// READY (waiting or in flight), ERROR (dead-lettered) or DELIVERED (the delivery log,
    /// newest first, for queues that keep deliveries).
    #[arg(long, default_value = "READY", ignore_case = true, value_parser = ["READY", "ERROR", "DELIVERED"])]
    pub status: String,
    /// Jobs per page (the server caps it at 1000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Start after this cursor (the `next` of a previous page).
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<String>,
    /// Follow `next` cursors and list every job.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub filter: ListFilter,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Text in the payload or last error (letters compared without case).
    pub text: Option<String>,
    /// Exactly this ordering key.
    #[arg(long)]
    pub key: Option<String>,
    /// A job id or its first hex digits (at least 8).
    #[arg(long)]
    pub id: Option<String>,
    /// One queue's jobs only.
    #[arg(long)]
    pub queue: Option<String>,
    /// READY, IN_FLIGHT, ERROR (a dead letter) or DELIVERED.
    #[arg(long, ignore_case = true, value_parser = ["READY", "IN_FLIGHT", "ERROR", "DELIVERED"])]
    pub status: Option<String>,
    /// Created at or after: a duration back (`1h`), an RFC 3339 time or unix ms.
    #[arg(long)]
    pub since: Option<String>,
    /// Created at or before, as `--since`.
    #[arg(long)]
    pub until: Option<String>,
    /// Jobs per page (1–200).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=200))]
    pub limit: u32,
    /// Start from this cursor (the `next_cursor` of a previous page).
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<String>,
    /// Follow `next_cursor` to the end: search every job, however many answers it takes.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// What a listing finds, and which way it reads.
#[derive(Debug, Clone, Default, Args)]
pub struct ListFilter {
    /// Only those whose payload or last error contains this text (letters compared without
    /// case).
    #[arg(long)]
    pub search: Option<String>,
    /// newest or oldest first (default: the listing's own order).
    #[arg(long, value_parser = ["newest", "oldest"])]
    pub order: Option<String>,
}

impl ListFilter {
    /// The query parameters it adds to a listing.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(search) = &self.search {
            query.push(("search", search.clone()));
        }
        if let Some(order) = &self.order {
            query.push(("order", order.clone()));
        }
        query
    }
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Create or replace a schedule: at each tick of --cron, enqueue the job on the queue.
    Set(ScheduleSetArgs),
    /// List a queue's schedules with their next and last ticks.
    List {
        queue: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Pause a schedule: it enqueues nothing until resumed.
    Pause {
        queue: String,
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Resume a schedule from its next tick (missed ticks are not made up).
    Resume {
        queue: String,
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Delete a schedule (the jobs it enqueued stay).
    Delete {
        queue: String,
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
}

/// `hookq schedule set QUEUE NAME --cron EXPR [JOB]`.
#[derive(Debug, Args)]
pub struct ScheduleSetArgs {
    pub queue: String,
    /// The schedule's name (the queue-name rules).
    pub name: String,
    /// 5 fields (minute hour day month weekday), 6 with leading seconds, or @hourly,
    /// @daily, @weekly, @monthly, @yearly.
    #[arg(long)]
    pub cron: String,
    /// The job each tick enqueues, a JSON object; `-` or nothing reads it from stdin.
    pub job: Option<String>,
    /// IANA time zone the fields are read in [server default: UTC].
    #[arg(long)]
    pub timezone: Option<String>,
    /// Create it paused.
    #[arg(long)]
    pub paused: bool,
    /// Priority of its jobs (-100 to 100).
    #[arg(long, allow_hyphen_values = true)]
    pub priority: Option<i32>,
    /// Ordering key of its jobs: a tick's job waits for the previous one (no overlap).
    #[arg(long)]
    pub ordering_key: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        name: String,
        /// Keep each published message this long for replays (0s–30d) [default: 0s].
        #[arg(long)]
        retain: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// List topics with their retention and publish counts.
    List {
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Show a topic: retention, figures, subscriptions and their filters.
    Show {
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Delete a topic and its subscriptions (jobs already in queues stay).
    Delete {
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Subscribe a queue to a topic, with an optional content filter.
    Subscribe {
        topic: String,
        queue: String,
        /// An EventBridge-style pattern (JSON), e.g. '{"type":["order.paid"]}'.
        #[arg(long)]
        filter: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Remove a queue's subscription to a topic.
    Unsubscribe {
        topic: String,
        queue: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Publish one message: JSON from the argument, or from stdin.
    Publish {
        topic: String,
        /// The message, a JSON object; `-` or nothing reads it from stdin.
        message: Option<String>,
        /// An Idempotency-Key: the same message again with it stores nothing.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// An ordering key: each subscriber delivers the key's messages in order.
        #[arg(long)]
        ordering_key: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Enqueue a topic's retained messages into one subscriber, in publish order.
    Replay {
        topic: String,
        queue: String,
        /// From: an RFC 3339 time, unix ms, or a duration back from now (1h).
        #[arg(long)]
        since: String,
        /// Until (same forms) [default: now].
        #[arg(long)]
        until: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List dead letters, newest failure first.
    List(DlqListArgs),
    /// Dead-letter counts by status and queue, oldest pending, top failures.
    Stats {
        /// Only this queue's dead letters.
        #[arg(long)]
        queue: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Put dead letters back on their queues with fresh attempts.
    Replay {
        #[command(flatten)]
        selection: SelectionArgs,
        /// Deliver no earlier than this from now (e.g. 30s, 5m; at most 7 days).
        #[arg(long, value_parser = parse_duration)]
        delay: Option<Duration>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Acknowledge dead letters: mark them handled without delivering them.
    Ack {
        #[command(flatten)]
        selection: SelectionArgs,
        #[command(flatten)]
        remote: RemoteArgs,
    },
}

#[derive(Debug, Args)]
pub struct DlqListArgs {
    /// Only this queue's dead letters (also as `--queue`).
    #[arg(value_name = "QUEUE", conflicts_with = "queue")]
    pub queue_arg: Option<String>,
    /// Only this queue's dead letters.
    #[arg(long)]
    pub queue: Option<String>,
    /// pending, replaying, replayed, acknowledged or all.
    #[arg(long, default_value = "pending")]
    pub status: String,
    /// Dead letters per page (the server caps it at 100).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Start after this cursor (the `next_cursor` of a previous page).
    #[arg(long)]
    pub cursor: Option<String>,
    #[command(flatten)]
    pub filter: ListFilter,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create a key with a role and its queues; prints the key, shown only this once.
    ///
    /// Scoped keys are enforced once the server has an API key (HOOKQ_API_KEY): an open
    /// server (no API key, loopback only) allows every request, with or without a scoped
    /// key, and says so when a key is created there.
    Create {
        /// A name for people (what the key is for).
        #[arg(value_name = "NAME", required_unless_present = "name_flag")]
        name: Option<String>,
        /// The name, as a flag (the same as NAME).
        #[arg(long = "name", value_name = "NAME", conflicts_with = "name")]
        name_flag: Option<String>,
        /// producer, consumer, reader or admin.
        #[arg(long)]
        role: String,
        /// Queue names and prefix* patterns, comma-separated (`*`: every queue). Not for admin.
        #[arg(long, value_delimiter = ',')]
        queues: Vec<String>,
        /// When the key stops working (401 from then on): a duration from now (`90d`,
        /// `12h`), an RFC 3339 time or unix milliseconds; at most 10 years ahead. Without
        /// it the key never expires.
        #[arg(long, value_name = "WHEN")]
        expires: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// List the keys (never the keys themselves).
    List {
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Revoke a key by id: refused at once, on every node.
    Revoke {
        /// The key's id (from `hookq key list`).
        id: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
}

/// Which dead letters: `--ids a,b`, `--queue q --all`, or `--all --search text` (with or
/// without `--queue`).
#[derive(Debug, Args)]
pub struct SelectionArgs {
    /// Dead-letter (job) ids, as arguments (the same as `--ids`).
    #[arg(value_name = "ID", conflicts_with_all = ["ids", "queue", "all", "search"])]
    pub listed: Vec<String>,
    /// Dead-letter (job) ids, comma-separated.
    #[arg(long, value_delimiter = ',', num_args = 1.., required_unless_present_any = ["queue", "search", "listed"], conflicts_with_all = ["queue", "all", "search"])]
    pub ids: Vec<String>,
    /// Every pending dead letter of this queue (needs --all).
    #[arg(long, requires = "all")]
    pub queue: Option<String>,
    /// Confirm acting on every pending letter of the queue, or that the search finds.
    #[arg(long)]
    pub all: bool,
    /// Every pending dead letter whose payload or last error contains this text, as
    /// `hookq dlq list --search` lists them (of --queue, or of every queue; needs --all).
    #[arg(long, requires = "all")]
    pub search: Option<String>,
}

/// Either `--header` (X-HYPER-SIGNATURE) or the three Standard Webhooks headers.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The queue's secret (`whsec_…` for Standard Webhooks).
    #[arg(long, env = "HOOKQ_SECRET", hide_env_values = true)]
    pub secret: String,
    /// The X-HYPER-SIGNATURE value, `t=<ms>,sig=<hex>` (a leading `X-HYPER-SIGNATURE:` is ignored).
    #[arg(long, required_unless_present = "webhook_signature", conflicts_with_all = ["webhook_signature", "webhook_id", "webhook_timestamp"])]
    pub header: Option<String>,
    /// Standard Webhooks: the `webhook-signature` value (`v1,<base64>`, several
    /// space-separated).
    #[arg(long, requires_all = ["webhook_id", "webhook_timestamp"])]
    pub webhook_signature: Option<String>,
    /// Standard Webhooks: the `webhook-id` value.
    #[arg(long, requires = "webhook_signature")]
    pub webhook_id: Option<String>,
    /// Standard Webhooks: the `webhook-timestamp` value (unix seconds).
    #[arg(long, requires = "webhook_signature")]
    pub webhook_timestamp: Option<String>,
    /// The exact body bytes received [default: read stdin].
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// Accept timestamps this far from now, either way.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub tolerance: Duration,
}

#[derive(Debug, Args)]
pub struct DbArgs {
    /// The SQLite database file (`migrate` also takes a PostgreSQL URL).
    #[arg(long, env = "HOOKQ_DB", hide_env_values = true)]
    pub db: PathBuf,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The SQLite database file to copy.
    #[arg(long, env = "HOOKQ_DB", hide_env_values = true)]
    pub db: PathBuf,
    /// Where to write the copy; must not exist yet.
    pub dest: PathBuf,
}

/// Why an operator command failed; each kind has its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server answered with an error.
    #[error("{msg} (HTTP {status})")]
    Api { status: u16, msg: String },
    /// The command line asks for something that cannot be done as asked.
    #[error("{0}")]
    Usage(String),
    /// The server could not be reached (refused, timed out, DNS…).
    #[error("cannot reach the server at {url}: {cause}")]
    Connection { url: String, cause: String },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Api { .. } | Self::Other(_) => 1,
            Self::Usage(_) => 2,
            Self::Connection { .. } => 3,
        }
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// What a command that ran to the end reports: success, or a negative answer (an invalid
/// signature, a database with problems) that it has already explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
}

/// Run an operator subcommand (anything but `serve`) and turn its result into an exit code,
/// printing `error: …` on failure.
pub fn run(command: Command) -> ExitCode {
    match dispatch(command) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Err(err) => {
            eprintln!("error: {}", crate::humanize::error_chain(&err));
            ExitCode::from(err.exit_code())
        }
    }
}

fn dispatch(command: Command) -> CliResult<Outcome> {
    match command {
        Command::Serve(_) => Err(CliError::Usage(
            "`serve` runs the server, not an operator command".into(),
        )),
        Command::Verify(args) => verify::run(&args),
        Command::Migrate(args) => match database(&args.db)? {
            Database::Postgres(url) => local::migrate_postgres(&url),
            Database::Sqlite(path) => local::migrate(&path),
        },
        Command::Backup(args) if is_postgres(&args.db)? => Err(CliError::Usage(
            "`hookq backup` copies a SQLite file; back a PostgreSQL database up with \
             PostgreSQL's own tools (pg_dump, or base backups with WAL archiving: see \
             docs/operations.md)"
                .into(),
        )),
        Command::Backup(args) => local::backup(&args.db, &args.dest),
        Command::Check(args) if is_postgres(&args.db)? => Err(CliError::Usage(
            "`hookq check` checks a SQLite file; PostgreSQL checks its own data (checksums, \
             amcheck), and `hookq migrate --db postgres://…` says which hookq schema it holds"
                .into(),
        )),
        Command::Check(args) => local::check(&args.db),
        remote_command => remote::run(remote_command),
    }
}

/// What a `--db` value names; a usage error when it names nothing hookq opens.
fn database(db: &std::path::Path) -> CliResult<Database> {
    Database::named(db).map_err(|e| CliError::Usage(e.to_string()))
}

/// Whether a `--db` value names a PostgreSQL database (the file commands refuse one).
fn is_postgres(db: &std::path::Path) -> CliResult<bool> {
    Ok(matches!(database(db)?, Database::Postgres(_)))
}
