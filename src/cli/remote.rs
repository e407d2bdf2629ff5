//! The subcommands that talk to a running server: `queue`, `enqueue`, `jobs`, `schedule`,
//! `dlq`, `key`.
//! Each prints a readable table, or the server's JSON with `--json`.

use std::io::{IsTerminal, Read};
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::client::{Client, DlqQuery, QueueSettings, QueueStats, ReplayResult, Reply, Selection};
use super::table::Table;
use super::{
    CliError, CliResult, Command, DlqCommand, DlqListArgs, EnqueueArgs, JobsArgs, KeyCommand,
    LeaseAnswerArgs, LeaseArgs, Outcome, QueueCommand, RemoteArgs, ScheduleCommand,
    ScheduleSetArgs, SearchArgs, SelectionArgs,
};
use crate::humanize::{age, relative, shorten, time};
use crate::store::DlqState;

/// The most ids the server takes in one replay or acknowledge request; more are sent in
/// batches of this size (with a progress bar).
const MAX_IDS_PER_REQUEST: usize = 1000;

/// The longest `--delay` the server accepts.
const MAX_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);

pub fn run(command: Command) -> CliResult<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run_async(command))
}

async fn run_async(command: Command) -> CliResult<Outcome> {
    match command {
        Command::Queue(QueueCommand::Create {
            name,
            target,
            secret,
            signature_scheme,
            remote,
        }) => {
            let client = Client::new(&remote)?;
            let reply = client
                .create_queue(
                    &name,
                    target.as_deref(),
                    secret.as_deref(),
                    signature_scheme.as_deref(),
                )
                .await?;
            print_or(&remote, &reply.json, || match &target {
                Some(target) => {
                    let signed = if secret.is_some() { " (signed)" } else { "" };
                    format!("created queue {name} -> {target}{signed}\n")
                }
                None => format!("created pull queue {name}: workers lease its jobs\n"),
            });
        }
        Command::Queue(QueueCommand::List { remote }) => {
            let reply = Client::new(&remote)?.list_queues().await?;
            print_or(&remote, &reply.json, || {
                if reply.data.queues.is_empty() {
                    return "no queues\n".into();
                }
                let mut table = Table::new(&["NAME"]);
                for name in &reply.data.queues {
                    table.row(vec![name.clone()]);
                }
                table.render()
            });
        }
        Command::Queue(QueueCommand::Show { name, remote }) => {
            let client = Client::new(&remote)?;
            let settings = client.queue_settings(&name).await?;
            let stats = client.queue_stats(&name).await?;
            let json = json!({ "ok": true, "settings": settings.json, "stats": stats.json });
            print_or(&remote, &json, || show_queue(&settings.data, &stats.data));
        }
        Command::Queue(QueueCommand::Set(args)) => {
            let body = args.patch_body().map_err(CliError::Usage)?;
            let reply = Client::new(&args.remote)?
                .update_queue(&args.name, &body)
                .await?;
            print_or(&args.remote, &reply.json, || {
                format!("queue {} changed\n", args.name)
            });
        }
        Command::Queue(QueueCommand::Pause { name, remote }) => {
            let reply = Client::new(&remote)?.set_paused(&name, true).await?;
            print_or(&remote, &reply.json, || {
                format!("queue {name} paused: it accepts jobs and delivers none\n")
            });
        }
        Command::Queue(QueueCommand::Resume { name, remote }) => {
            let reply = Client::new(&remote)?.set_paused(&name, false).await?;
            print_or(&remote, &reply.json, || format!("queue {name} resumed\n"));
        }
        Command::Queue(QueueCommand::CloseBreaker { name, remote }) => {
            let reply = Client::new(&remote)?.close_breaker(&name).await?;
            print_or(&remote, &reply.json, || {
                format!("queue {name}: breaker closed, deliveries resume now\n")
            });
        }
        Command::Queue(QueueCommand::Delete { name, yes, remote }) => {
            if !yes {
                return Err(CliError::Usage(format!(
                    "deleting queue {name} also deletes all its jobs and dead letters; \
                     pass --yes to confirm"
                )));
            }
            let reply = Client::new(&remote)?.delete_queue(&name).await?;
            print_or(&remote, &reply.json, || format!("deleted queue {name}\n"));
        }
        Command::Enqueue(args) => enqueue(args).await?,
        Command::Jobs(args) => jobs(args).await?,
        Command::Search(args) => search(args).await?,
        Command::Lease(args) => lease(args).await?,
        Command::Ack(args) => {
            answer_lease(&args, "ack", json!({ "leaseId": args.lease_id })).await?
        }
        Command::Nack(args) => {
            let mut body = json!({ "leaseId": args.lease.lease_id });
            if let Some(error) = &args.error {
                body["error"] = Value::from(error.as_str());
            }
            if let Some(delay) = &args.delay {
                body["delay"] = Value::from(delay.as_str());
            }
            answer_lease(&args.lease, "nack", body).await?
        }
        Command::Schedule(ScheduleCommand::Set(args)) => schedule_set(args).await?,
        Command::Schedule(ScheduleCommand::List { queue, remote }) => {
            schedule_list(&queue, &remote).await?
        }
        Command::Schedule(ScheduleCommand::Pause {
            queue,
            name,
            remote,
        }) => {
            let reply = Client::new(&remote)?
                .set_schedule_paused(&queue, &name, true)
                .await?;
            print_or(&remote, &reply.json, || {
                format!("schedule {queue}/{name} paused: it enqueues nothing\n")
            });
        }
        Command::Schedule(ScheduleCommand::Resume {
            queue,
            name,
            remote,
        }) => {
            let client = Client::new(&remote)?;
            let reply = client.set_schedule_paused(&queue, &name, false).await?;
            let next = client.get_schedule(&queue, &name).await?.data;
            print_or(&remote, &reply.json, || {
                format!(
                    "schedule {queue}/{name} resumed; next tick {}\n",
                    next_tick(next.next_run_at)
                )
            });
        }
        Command::Schedule(ScheduleCommand::Delete {
            queue,
            name,
            remote,
        }) => {
            let reply = Client::new(&remote)?.delete_schedule(&queue, &name).await?;
            print_or(&remote, &reply.json, || {
                format!("deleted schedule {queue}/{name}\n")
            });
        }
        Command::Topic(command) => super::topics::run(command).await?,
        Command::Dlq(DlqCommand::List(args)) => dlq_list(args).await?,
        Command::Dlq(DlqCommand::Stats { queue, remote }) => {
            dlq_stats(queue.as_deref(), &remote).await?
        }
        Command::Dlq(DlqCommand::Replay {
            selection,
            delay,
            remote,
        }) => return dlq_replay(&selection, delay, &remote).await,
        Command::Dlq(DlqCommand::Ack { selection, remote }) => dlq_ack(&selection, &remote).await?,
        Command::Key(KeyCommand::Create {
            name,
            name_flag,
            role,
            queues,
            expires,
            remote,
        }) => {
            let name = name
                .or(name_flag)
                .ok_or_else(|| CliError::Usage("name the key: hookq key create NAME".into()))?;
            let reply = Client::new(&remote)?
                .create_key(&name, &role, &queues, expires.as_deref())
                .await?;
            if let Some(warning) = &reply.data.warning {
                eprintln!("warning: {warning}");
            }
            print_or(&remote, &reply.json, || {
                let expiry = reply
                    .data
                    .expires_at
                    .map(|at| format!(", expires {}", time(at)))
                    .unwrap_or_default();
                format!(
                    "created key {} ({name}, {role}{expiry})\n{}\n(shown only now: store it safely)\n",
                    reply.data.id, reply.data.key
                )
            });
        }
        Command::Key(KeyCommand::List { remote }) => {
            let reply = Client::new(&remote)?.list_keys().await?;
            print_or(&remote, &reply.json, || {
                if reply.data.keys.is_empty() {
                    return "no keys\n".into();
                }
                let mut table = Table::new(&[
                    "ID", "NAME", "ROLE", "QUEUES", "CREATED", "EXPIRES", "REVOKED",
                ]);
                for key in &reply.data.keys {
                    table.row(vec![
                        key.id.clone(),
                        shorten(&key.name, 40),
                        key.role.to_string(),
                        key.queues.join(","),
                        time(key.created_at),
                        key.expires_at.map(time).unwrap_or_else(|| "never".into()),
                        key.revoked_at.map(time).unwrap_or_else(|| "-".into()),
                    ]);
                }
                table.render()
            });
        }
        Command::Key(KeyCommand::Revoke { id, remote }) => {
            let reply = Client::new(&remote)?.revoke_key(&id).await?;
            print_or(&remote, &reply.json, || format!("revoked key {id}\n"));
        }
        Command::Serve(_)
        | Command::Verify(_)
        | Command::Migrate(_)
        | Command::Backup(_)
        | Command::Check(_) => {
            return Err(CliError::Usage("not a server command".into()));
        }
    }
    Ok(Outcome::Ok)
}

/// With `--json` the server's JSON (one line), else the readable text.
pub(super) fn print_or(remote: &RemoteArgs, json: &Value, readable: impl FnOnce() -> String) {
    if remote.json {
        println!("{json}");
    } else {
        print!("{}", readable());
    }
}

/// A job given as an argument, or read from stdin when it is `-` or absent.
pub(super) fn job_argument(job: Option<&str>) -> CliResult<Vec<u8>> {
    match job {
        Some(job) if job != "-" => Ok(job.as_bytes().to_vec()),
        _ => {
            let mut stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Err(CliError::Usage(
                    "give the job as an argument ('{\"to\":\"ada\"}') or pipe it on stdin".into(),
                ));
            }
            let mut job = Vec::new();
            stdin
                .read_to_end(&mut job)
                .context("cannot read the job from stdin")?;
            Ok(job)
        }
    }
}

async fn lease(args: LeaseArgs) -> CliResult<()> {
    let mut body = json!({ "max": args.max, "wait": args.wait });
    if let Some(visibility) = &args.visibility {
        body["visibility"] = Value::from(visibility.as_str());
    }
    let reply = Client::new(&args.remote)?.lease(&args.queue, &body).await?;
    print_or(&args.remote, &reply.json, || {
        if reply.data.jobs.is_empty() {
            return "no job due\n".into();
        }
        let mut table = Table::new(&["ID", "ATTEMPT", "LEASE ID", "EXPIRES", "JOB"]);
        for job in &reply.data.jobs {
            table.row(vec![
                job.id.clone(),
                job.attempt.to_string(),
                job.lease_id.clone(),
                time(job.lease_expires_at),
                job.job.get().to_owned(),
            ]);
        }
        table.render()
    });
    Ok(())
}

async fn answer_lease(args: &LeaseAnswerArgs, verb: &str, body: Value) -> CliResult<()> {
    let reply = Client::new(&args.remote)?
        .answer_lease(&args.queue, &args.id, verb, &body)
        .await?;
    print_or(&args.remote, &reply.json, || {
        format!("{verb}: job {} of {}\n", args.id, args.queue)
    });
    Ok(())
}

async fn enqueue(args: EnqueueArgs) -> CliResult<()> {
    let job = job_argument(args.job.as_deref())?;
    let reply = Client::new(&args.remote)?.enqueue(&args.queue, job).await?;
    print_or(&args.remote, &reply.json, || format!("{}\n", reply.data.id));
    Ok(())
}

/// The body of `PUT …/_schedules/{name}`: the job embedded as given (not re-encoded, so its
/// numbers and key order reach the server untouched).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ScheduleBody<'a> {
    cron: &'a str,
    job: &'a serde_json::value::RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<&'a str>,
    paused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ordering_key: Option<&'a str>,
}

async fn schedule_set(args: ScheduleSetArgs) -> CliResult<()> {
    let job = job_argument(args.job.as_deref())?;
    let job: &serde_json::value::RawValue = serde_json::from_slice(&job)
        .map_err(|e| CliError::Usage(format!("the job is not JSON: {e}")))?;
    let body = serde_json::to_vec(&ScheduleBody {
        cron: &args.cron,
        job,
        timezone: args.timezone.as_deref(),
        paused: args.paused,
        priority: args.priority,
        ordering_key: args.ordering_key.as_deref(),
    })
    .context("cannot encode the schedule")?;
    let client = Client::new(&args.remote)?;
    let reply = client.put_schedule(&args.queue, &args.name, body).await?;
    let saved = client.get_schedule(&args.queue, &args.name).await?.data;
    print_or(&args.remote, &reply.json, || {
        let state = if saved.paused {
            "paused".to_owned()
        } else {
            format!("next tick {}", next_tick(saved.next_run_at))
        };
        format!(
            "schedule {}/{} set: {} ({}); {state}\n",
            args.queue, args.name, saved.cron, saved.timezone
        )
    });
    Ok(())
}

async fn schedule_list(queue: &str, remote: &RemoteArgs) -> CliResult<()> {
    let reply = Client::new(remote)?.list_schedules(queue).await?;
    print_or(remote, &reply.json, || {
        if reply.data.schedules.is_empty() {
            return format!("no schedules on {queue}\n");
        }
        let mut table = Table::new(&[
            "NAME", "CRON", "TIMEZONE", "STATE", "NEXT", "LAST", "LAST JOB",
        ]);
        for schedule in &reply.data.schedules {
            table.row(vec![
                schedule.name.clone(),
                schedule.cron.clone(),
                schedule.timezone.clone(),
                if schedule.paused { "paused" } else { "active" }.to_owned(),
                schedule.next_run_at.map(time).unwrap_or_default(),
                schedule.last_run_at.map(time).unwrap_or_default(),
                schedule.last_job_id.clone().unwrap_or_default(),
            ]);
        }
        table.render()
    });
    Ok(())
}

/// A next tick for humans: `2026-11-24T03:00:00Z (in 17h)`, or `none`.
fn next_tick(at: Option<i64>) -> String {
    at.map_or_else(
        || "none".into(),
        |at| format!("{} ({})", time(at), relative(at)),
    )
}

async fn jobs(args: JobsArgs) -> CliResult<()> {
    let client = Client::new(&args.remote)?;
    let status = args.status.to_ascii_uppercase();
    let mut cursor = args.cursor.clone();
    let mut jobs = Vec::new();
    let mut raw_jobs = Vec::new();
    let mut last_json;
    loop {
        let reply = client
            .list_jobs(
                &args.queue,
                &status,
                args.limit,
                cursor.as_deref(),
                &args.filter,
            )
            .await?;
        if let Some(page) = reply.json.get("jobs").and_then(Value::as_array) {
            raw_jobs.extend(page.iter().cloned());
        }
        jobs.extend(reply.data.jobs);
        cursor = reply.data.next;
        last_json = reply.json;
        if !args.all || cursor.is_none() {
            break;
        }
    }
    // One page: the server's JSON as sent; every page: the jobs of all of them, one object.
    let json = if args.all {
        json!({ "ok": true, "jobs": raw_jobs })
    } else {
        last_json
    };
    print_or(&args.remote, &json, || {
        if jobs.is_empty() {
            return format!("no {status} jobs in {}\n", args.queue);
        }
        let mut table = Table::new(&[
            "ID", "STATUS", "ATTEMPTS", "CREATED", "NEXT", "LAST", "ERROR",
        ]);
        for job in &jobs {
            let next = if job.in_flight {
                "in flight".to_owned()
            } else if let Some(at) = job.delivered_at {
                format!("delivered {}", time(at))
            } else {
                job.next_attempt_at.map(relative).unwrap_or_default()
            };
            table.row(vec![
                job.id.clone(),
                job.status.as_str().to_owned(),
                job.attempts.to_string(),
                time(job.created_at),
                next,
                job.last_status.map(|s| s.to_string()).unwrap_or_default(),
                job.error
                    .as_deref()
                    .map(|e| shorten(e, 60))
                    .unwrap_or_default(),
            ]);
        }
        table.render()
    });
    if let (Some(next), false) = (&cursor, args.remote.json) {
        eprintln!("more jobs: --cursor {next} for the next page, or --all");
    }
    Ok(())
}

/// `hookq search`: one page, or with `--all` every answer's jobs until the whole range is
/// searched (a walking search may take several answers, some of them empty).
async fn search(args: SearchArgs) -> CliResult<()> {
    let client = Client::new(&args.remote)?;
    let mut query: Vec<(&str, String)> = vec![("limit", args.limit.to_string())];
    for (name, value) in [
        ("text", &args.text),
        ("key", &args.key),
        ("id", &args.id),
        ("queue", &args.queue),
        ("status", &args.status),
        ("since", &args.since),
        ("until", &args.until),
    ] {
        if let Some(value) = value {
            query.push((name, value.clone()));
        }
    }
    let mut cursor = args.cursor.clone();
    let (mut jobs, mut raw_jobs, mut read) = (Vec::new(), Vec::new(), 0_u64);
    let mut last;
    loop {
        let mut page_query = query.clone();
        if let Some(cursor) = &cursor {
            page_query.push(("cursor", cursor.clone()));
        }
        let reply = client.search(&page_query).await?;
        if let Some(page) = reply.json.get("jobs").and_then(Value::as_array) {
            raw_jobs.extend(page.iter().cloned());
        }
        read += reply.data.read;
        jobs.extend(reply.data.jobs);
        cursor = reply.data.next_cursor;
        last = (reply.json, reply.data.walked, reply.data.searched_back_to);
        if !args.all || cursor.is_none() {
            break;
        }
    }
    let (last_json, walked, back_to) = last;
    let json = if args.all {
        json!({ "ok": true, "jobs": raw_jobs, "read": read, "walked": walked })
    } else {
        last_json
    };
    print_or(&args.remote, &json, || {
        if jobs.is_empty() {
            return "no job found\n".to_owned();
        }
        let mut table = Table::new(&[
            "ID", "QUEUE", "STATUS", "STATE", "CREATED", "KEY", "LAST", "ERROR",
        ]);
        for job in &jobs {
            table.row(vec![
                job.id.clone(),
                job.queue.clone(),
                job.status.as_str().to_owned(),
                job.state.clone(),
                time(job.created_at),
                job.ordering_key.clone().unwrap_or_default(),
                job.last_status.map(|s| s.to_string()).unwrap_or_default(),
                job.last_error
                    .as_deref()
                    .map(|e| shorten(e, 50))
                    .unwrap_or_default(),
            ]);
        }
        table.render()
    });
    if let (Some(next), false) = (&cursor, args.remote.json) {
        match back_to.filter(|_| walked) {
            Some(at) => eprintln!(
                "searched every job created since {}; older ones: --cursor {next}, or --all",
                time(at)
            ),
            None => eprintln!("more jobs: --cursor {next} for the next page, or --all"),
        }
    }
    Ok(())
}

async fn dlq_list(args: DlqListArgs) -> CliResult<()> {
    let client = Client::new(&args.remote)?;
    let reply = client
        .dlq_list(&DlqQuery {
            queue: args.queue_arg.clone().or_else(|| args.queue.clone()),
            status: args.status.to_ascii_lowercase(),
            limit: args.limit,
            cursor: args.cursor.clone(),
            filter: args.filter.clone(),
        })
        .await?;
    let page = &reply.data;
    print_or(&args.remote, &reply.json, || {
        if page.messages.is_empty() {
            return match args.status.as_str() {
                "all" => "no dead letters\n".into(),
                status => format!("no {status} dead letters\n"),
            };
        }
        let mut table = Table::new(&[
            "ID", "QUEUE", "FAILED", "ATTEMPTS", "REASON", "STATUS", "REPLAYS", "LAST", "ERROR",
        ]);
        for letter in &page.messages {
            table.row(vec![
                letter.id.clone(),
                letter.queue.clone(),
                time(letter.failed_at),
                letter.attempts.to_string(),
                letter.failure_reason.as_str().to_owned(),
                letter.status.as_str().to_owned(),
                letter.replay_count.to_string(),
                letter
                    .last_status
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                letter
                    .last_error
                    .as_deref()
                    .map(|e| shorten(e, 50))
                    .unwrap_or_default(),
            ]);
        }
        format!(
            "{}{} of {} shown\n",
            table.render(),
            page.messages.len(),
            page.total_count
        )
    });
    if let (Some(next), false) = (&page.next_cursor, args.remote.json) {
        eprintln!("more dead letters: --cursor {next}");
    }
    Ok(())
}

async fn dlq_stats(queue: Option<&str>, remote: &RemoteArgs) -> CliResult<()> {
    let reply = Client::new(remote)?.dlq_stats(queue).await?;
    let stats = &reply.data;
    print_or(remote, &reply.json, || {
        let mut by_status = Table::new(&["STATUS", "COUNT"]);
        for state in DlqState::ALL {
            let count = stats.by_status.get(state.as_str()).copied().unwrap_or(0);
            by_status.row(vec![state.as_str().into(), count.to_string()]);
        }
        let mut out = by_status.render();
        if !stats.by_queue.is_empty() {
            let mut by_queue = Table::new(&["QUEUE", "PENDING"]);
            for (queue, count) in &stats.by_queue {
                by_queue.row(vec![queue.clone(), count.to_string()]);
            }
            out.push('\n');
            out.push_str(&by_queue.render());
        }
        if !stats.top_status_codes.is_empty() {
            let mut codes = Table::new(&["LAST STATUS", "PENDING"]);
            for code in &stats.top_status_codes {
                let key = code
                    .key
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "transport error".into());
                codes.row(vec![key, code.count.to_string()]);
            }
            out.push('\n');
            out.push_str(&codes.render());
        }
        out.push('\n');
        if let (Some(at), Some(age_ms)) =
            (stats.oldest_pending_failed_at, stats.oldest_pending_age_ms)
        {
            let age_ms = u64::try_from(age_ms).unwrap_or(0);
            out.push_str(&format!(
                "oldest pending: {} ({} ago)\n",
                time(at),
                age(age_ms)
            ));
        }
        out.push_str(&format!(
            "replayed more than twice and failed again: {}\n",
            stats.repeat_failures
        ));
        out.push_str(&format!(
            "last 24h: {} new failures, {} replayed, {} acknowledged\n",
            stats.last_24h.new_failures, stats.last_24h.replayed, stats.last_24h.acknowledged
        ));
        out
    });
    Ok(())
}

/// `hookq queue show`: settings (a mark on those the queue sets itself), then figures.
fn show_queue(settings: &QueueSettings, stats: &QueueStats) -> String {
    let own = |field: &str| {
        if settings.overrides.iter().any(|o| o == field) {
            " (queue)"
        } else {
            ""
        }
    };
    let optional = |value: Option<String>| value.unwrap_or_else(|| "none".into());
    let mut table = Table::new(&["SETTING", "VALUE"]);
    for (name, value) in [
        (
            "target",
            settings
                .target
                .clone()
                .unwrap_or_else(|| "none (a pull queue: workers lease its jobs)".into()),
        ),
        (
            "signed",
            if settings.has_secret { "yes" } else { "no" }.into(),
        ),
        (
            "signature scheme",
            settings.signature_scheme.as_str().into(),
        ),
        (
            "previous secret until",
            optional(settings.previous_secret_expires_at.map(time)),
        ),
        ("paused", if settings.paused { "yes" } else { "no" }.into()),
        (
            "max attempts",
            format!("{}{}", settings.max_attempts, own("maxAttempts")),
        ),
        (
            "backoff",
            format!("{}{}", settings.backoff.join(", "), own("backoff")),
        ),
        ("timeout", format!("{}{}", settings.timeout, own("timeout"))),
        (
            "concurrency",
            format!("{}{}", settings.concurrency, own("concurrency")),
        ),
        (
            "rate per second",
            optional(
                settings
                    .rate_per_second
                    .map(|r| format!("{r} (burst {})", settings.burst.unwrap_or(1))),
            ),
        ),
        (
            "max queued",
            optional(settings.max_queued.map(|n| n.to_string())),
        ),
        (
            "keep delivered",
            format!("{}{}", settings.keep_delivered, own("keepDelivered")),
        ),
    ] {
        table.row(vec![name.into(), value]);
    }
    let mut out = table.render();
    let mut figures = Table::new(&[
        "READY",
        "SCHEDULED",
        "BLOCKED",
        "IN FLIGHT",
        "DEAD",
        "LAG",
        "OK/MIN",
        "FAILED/MIN",
        "BREAKER",
    ]);
    figures.row(vec![
        stats.ready.to_string(),
        stats.scheduled.to_string(),
        stats.blocked.to_string(),
        stats.in_flight.to_string(),
        stats.dead.to_string(),
        stats
            .oldest_ready_age_ms
            .map(|ms| age(u64::try_from(ms).unwrap_or(0)))
            .unwrap_or_else(|| "-".into()),
        stats.delivered_last_minute.to_string(),
        stats.failed_last_minute.to_string(),
        stats.breaker.clone(),
    ]);
    out.push('\n');
    out.push_str(&figures.render());
    out
}

fn selection(args: &SelectionArgs) -> CliResult<Selection> {
    // `dlq replay ID…` and `--ids ID,ID` are one list (clap lets only one of them through).
    let given: Vec<&String> = args.listed.iter().chain(&args.ids).collect();
    if let Some(text) = &args.search {
        return match (args.all, given.is_empty()) {
            (true, true) => Ok(Selection::Matching {
                queue: args.queue.clone(),
                text: text.clone(),
            }),
            _ => Err(CliError::Usage(
                "act on what a search finds with --all --search text [--queue q]".into(),
            )),
        };
    }
    match (&args.queue, args.all, given.is_empty()) {
        (Some(queue), true, true) => Ok(Selection::Queue(queue.clone())),
        (None, false, false) => {
            let mut ids: Vec<String> = given
                .into_iter()
                .map(|id| id.trim().to_owned())
                .filter(|id| !id.is_empty())
                .collect();
            ids.dedup();
            if ids.is_empty() {
                return Err(CliError::Usage("--ids lists no ids".into()));
            }
            Ok(Selection::Ids(ids))
        }
        _ => Err(CliError::Usage(
            "select dead letters by id (ID… or --ids a,b), with --queue q --all, or with --all --search text"
                .into(),
        )),
    }
}

/// The requests one selection takes: a whole queue is one; ids go in batches.
fn batches(selection: Selection) -> Vec<Selection> {
    match selection {
        Selection::Ids(ids) if ids.len() > MAX_IDS_PER_REQUEST => ids
            .chunks(MAX_IDS_PER_REQUEST)
            .map(|chunk| Selection::Ids(chunk.to_vec()))
            .collect(),
        other => vec![other],
    }
}

/// A spinner (whole queue) or bar (several batches of ids) on stderr, only if stderr is a
/// terminal: one quick request needs neither.
fn progress(selection: &Selection, verb: &str, total_ids: usize) -> Option<ProgressBar> {
    let one_batch = matches!(selection, Selection::Ids(_)) && total_ids <= MAX_IDS_PER_REQUEST;
    if one_batch || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match selection {
        Selection::Queue(_) | Selection::Matching { .. } => {
            let which = match selection {
                Selection::Queue(queue) => format!("the dead letters of {queue}"),
                _ => "the dead letters found".to_owned(),
            };
            let spinner = ProgressBar::new_spinner();
            spinner.set_message(format!("{verb} {which}…"));
            spinner.enable_steady_tick(Duration::from_millis(100));
            spinner
        }
        Selection::Ids(_) => {
            let bar = ProgressBar::new(total_ids as u64);
            if let Ok(style) =
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(verb.to_owned());
            bar
        }
    };
    Some(bar)
}

/// Send `selection` (in batches if it is a long list of ids) through `send`, with a
/// progress indicator on a terminal. Returns every reply.
async fn in_batches<T>(
    selection: Selection,
    verb: &str,
    mut send: impl AsyncFnMut(&Selection) -> CliResult<Reply<T>>,
) -> CliResult<Vec<Reply<T>>> {
    let total_ids = match &selection {
        Selection::Ids(ids) => ids.len(),
        Selection::Queue(_) | Selection::Matching { .. } => 0,
    };
    let bar = progress(&selection, verb, total_ids);
    let mut replies = Vec::new();
    for batch in batches(selection) {
        match send(&batch).await {
            Ok(reply) => replies.push(reply),
            Err(err) => {
                if let Some(bar) = &bar {
                    bar.abandon();
                }
                return Err(err);
            }
        }
        if let (Some(bar), Selection::Ids(ids)) = (&bar, &batch) {
            bar.inc(ids.len() as u64);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(replies)
}

/// One reply: the server's JSON as sent; several batches: `combined`.
fn one_or_combined<T>(replies: Vec<Reply<T>>, combined: Value) -> Value {
    match <[Reply<T>; 1]>::try_from(replies) {
        Ok([one]) => one.json,
        Err(_) => combined,
    }
}

async fn dlq_replay(
    args: &SelectionArgs,
    delay: Option<Duration>,
    remote: &RemoteArgs,
) -> CliResult<Outcome> {
    let selection = selection(args)?;
    let delay_seconds = match delay {
        Some(delay) if delay > MAX_DELAY => {
            return Err(CliError::Usage("--delay may be at most 7 days".into()));
        }
        // Whole seconds on the wire: round up, so a delay is never shorter than asked.
        Some(delay) => Some(delay.as_secs() + u64::from(delay.subsec_nanos() > 0)),
        None => None,
    };
    let client = Client::new(remote)?;
    let replies = in_batches(selection, "replaying", async |batch| {
        client.dlq_replay(batch, delay_seconds).await
    })
    .await?;
    let mut total = ReplayResult {
        ok: true,
        requested: 0,
        claimed: 0,
        replayed: 0,
        failed: 0,
        replayed_ids: Vec::new(),
    };
    for reply in &replies {
        total.requested += reply.data.requested;
        total.claimed += reply.data.claimed;
        total.replayed += reply.data.replayed;
        total.failed += reply.data.failed;
        total
            .replayed_ids
            .extend(reply.data.replayed_ids.iter().cloned());
    }
    let json = one_or_combined(
        replies,
        json!({
            "ok": true,
            "requested": total.requested,
            "claimed": total.claimed,
            "replayed": total.replayed,
            "failed": total.failed,
            "replayed_ids": total.replayed_ids,
        }),
    );
    print_or(remote, &json, || {
        let when = match delay_seconds {
            Some(secs) if secs > 0 => format!(", due in {}", age(secs * 1000)),
            _ => String::new(),
        };
        format!(
            "replayed {} of {} requested (claimed {}, failed {}){when}\n",
            total.replayed, total.requested, total.claimed, total.failed
        )
    });
    if total.failed > 0 {
        eprintln!(
            "error: {} dead letter(s) could not be put back on their queue and stay pending",
            total.failed
        );
        return Ok(Outcome::Failed);
    }
    Ok(Outcome::Ok)
}

async fn dlq_ack(args: &SelectionArgs, remote: &RemoteArgs) -> CliResult<()> {
    let selection = selection(args)?;
    let client = Client::new(remote)?;
    let replies = in_batches(selection, "acknowledging", async |batch| {
        client.dlq_acknowledge(batch).await
    })
    .await?;
    let acknowledged: usize = replies.iter().map(|r| r.data.acknowledged).sum();
    let json = one_or_combined(replies, json!({ "ok": true, "acknowledged": acknowledged }));
    print_or(remote, &json, || format!("acknowledged {acknowledged}\n"));
    Ok(())
}
