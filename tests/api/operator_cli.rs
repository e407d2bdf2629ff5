//! The operator subcommands, run as the real binary: against a live server (queues, jobs,
//! dead letters, keys, exit codes), on the database file (migrate, backup, check) and
//! signature verification.

use std::path::Path;
use std::process::Stdio;

use hookq::config::ApiKey;
use hookq::model::now_millis;
use hookq::signature;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use hookq::store::testing::Stored;

use crate::dlq_support::{count_stored, dlq_list, make_dead_letters, message_ids, sqlite_file};
use crate::helpers::{Reply, TestApp, TestReceiver, payload, refused_url, spawn_app};

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    #[track_caller]
    fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "the command succeeds: {self:?}");
        &self.stdout
    }

    #[track_caller]
    fn json(&self) -> Value {
        serde_json::from_str(self.ok()).unwrap_or_else(|e| panic!("stdout is JSON ({e}): {self:?}"))
    }

    #[track_caller]
    fn fails_with(&self, code: i32, needle: &str) {
        assert_eq!(self.code, code, "exit code {code}: {self:?}");
        assert!(
            self.stderr.contains(needle),
            "stderr mentions {needle:?}: {self:?}"
        );
    }
}

/// Run `hookq args…` with a clean environment plus `env`, feeding `stdin` if given.
async fn hookq(args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookq"));
    command.args(args).env("NO_COLOR", "1");
    for var in [
        "HOOKQ_URL",
        "HOOKQ_API_KEY",
        "HOOKQ_ADMIN_KEY",
        "HOOKQ_DB",
        "HOOKQ_SECRET",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        command.env_remove(var);
    }
    command
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("start the hookq binary");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(input).await.expect("write stdin");
        drop(pipe);
    }
    let output = tokio::time::timeout(crate::helpers::DEADLINE, child.wait_with_output())
        .await
        .expect("the command finishes within the deadline")
        .expect("wait for the command");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `hookq args…` against `app`.
async fn at(app: &TestApp, args: &[&str]) -> Run {
    hookq(args, &[("HOOKQ_URL", &app.base)], None).await
}

/// A server that stores jobs but does not deliver them: listings stay put.
async fn storing_app() -> TestApp {
    let app = spawn_app(|config| config.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    app
}

/// The lines of a table that contain `needle`.
fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

// ---------------------------------------------------------------------------------------
// Queues and jobs
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn queue_create_list_and_delete_work_against_a_running_server() {
    let app = spawn_app(|_| {}).await;
    let out = at(
        &app,
        &[
            "queue",
            "create",
            "emails",
            "--target",
            "https://worker.example.com/jobs",
            "--secret",
            "s3cret",
        ],
    )
    .await;
    assert!(out.ok().contains("created queue emails"), "{out:?}");
    at(
        &app,
        &[
            "queue",
            "create",
            "invoices",
            "--target",
            "http://127.0.0.1:9/x",
        ],
    )
    .await
    .ok();
    assert_eq!(app.queues().await, ["emails", "invoices"]);

    let table = at(&app, &["queue", "list"]).await;
    assert_eq!(table.ok(), "NAME\nemails\ninvoices\n");
    let json = at(&app, &["queue", "list", "--json"]).await.json();
    assert_eq!(json, app.get("/queue").await.expect(200));

    at(
        &app,
        &["queue", "create", "emails", "--target", "https://x.example"],
    )
    .await
    .fails_with(1, "error: queue already exists (HTTP 409)");
    at(
        &app,
        &[
            "queue",
            "create",
            "Bad Name",
            "--target",
            "https://x.example",
        ],
    )
    .await
    .fails_with(1, "(HTTP 422)");

    // Destructive: refused without --yes, and nothing happens.
    at(&app, &["queue", "delete", "emails"])
        .await
        .fails_with(2, "--yes");
    assert_eq!(app.queues().await, ["emails", "invoices"]);
    let out = at(&app, &["queue", "delete", "emails", "--yes"]).await;
    assert_eq!(out.ok(), "deleted queue emails\n");
    assert_eq!(app.queues().await, ["invoices"]);
    at(&app, &["queue", "delete", "emails", "--yes"])
        .await
        .fails_with(1, "error: queue not found (HTTP 404)");
}

#[tokio::test]
async fn queue_set_show_pause_and_resume_work_against_a_running_server() {
    let app = storing_app().await;
    let out = at(
        &app,
        &[
            "queue",
            "set",
            "q",
            "--max-attempts",
            "9",
            "--backoff",
            "500ms,5s",
            "--concurrency",
            "4",
        ],
    )
    .await;
    assert_eq!(out.ok(), "queue q changed\n");
    let settings = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(settings["maxAttempts"], 9);
    assert_eq!(settings["backoff"], json!(["500ms", "5s"]));
    assert_eq!(settings["concurrency"], 4);

    at(
        &app,
        &["queue", "set", "q", "--reset", "max-attempts,backoff"],
    )
    .await
    .ok();
    let settings = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(settings["maxAttempts"], 3, "the server's again");
    assert_eq!(settings["overrides"], json!(["concurrency"]));

    at(&app, &["queue", "set", "q"])
        .await
        .fails_with(2, "nothing to change");
    at(
        &app,
        &["queue", "set", "q", "--timeout", "5s", "--reset", "timeout"],
    )
    .await
    .fails_with(2, "both set and reset");
    at(&app, &["queue", "set", "q", "--max-attempts", "0"])
        .await
        .fails_with(1, "maxAttempts must be 1 to 100 (HTTP 422)");

    let out = at(&app, &["queue", "close-breaker", "q"]).await;
    assert!(out.ok().contains("breaker closed"), "{out:?}");
    at(&app, &["queue", "close-breaker", "nope"])
        .await
        .fails_with(1, "HTTP 404");
    let out = at(&app, &["queue", "pause", "q"]).await;
    assert!(out.ok().contains("queue q paused"), "{out:?}");
    let show = at(&app, &["queue", "show", "q"]).await;
    let text = show.ok();
    assert_eq!(lines_with(text, "paused").len(), 1, "{text}");
    assert!(lines_with(text, "paused")[0].contains("yes"), "{text}");
    assert!(
        lines_with(text, "concurrency")[0].contains("4 (queue)"),
        "{text}"
    );
    assert!(text.contains("READY"), "{text}");
    let json = at(&app, &["queue", "show", "q", "--json"]).await.json();
    assert_eq!(
        json["settings"],
        app.get("/queue/q/_settings").await.expect(200)
    );
    assert_eq!(json["stats"]["paused"], true);

    at(&app, &["queue", "resume", "q"]).await.ok();
    assert_eq!(
        app.get("/queue/q/_settings").await.expect(200)["paused"],
        false
    );
    at(&app, &["queue", "show", "nope"])
        .await
        .fails_with(1, "queue not found (HTTP 404)");
}

#[tokio::test]
async fn enqueue_takes_the_job_from_the_argument_or_stdin_and_prints_its_id() {
    let app = storing_app().await;
    let env = [("HOOKQ_URL", app.base.as_str())];
    let from_arg = hookq(&["enqueue", "q", r#"{"n":1}"#], &env, None).await;
    let from_dash = hookq(&["enqueue", "q", "-"], &env, Some(br#"{"n":2}"#)).await;
    let from_pipe = hookq(&["enqueue", "q"], &env, Some(b"{\"n\": 3}\n")).await;
    let ids: Vec<String> = [from_arg, from_dash, from_pipe]
        .iter()
        .map(|run| run.ok().trim().to_owned())
        .collect();
    let listed = app.list("q", "READY").await;
    let listed_ids: Vec<&str> = listed.iter().map(|j| j["id"].as_str().unwrap()).collect();
    assert_eq!(listed_ids, ids);
    assert_eq!(listed[2]["job"], json!({ "n": 3 }));

    let json = hookq(&["enqueue", "q", "{}", "--json"], &env, None)
        .await
        .json();
    assert_eq!(json["ok"], true);
    assert!(json["id"].is_string(), "{json}");

    hookq(&["enqueue", "q", "{not json"], &env, None)
        .await
        .fails_with(1, "(HTTP 400)");
    hookq(&["enqueue", "nope", "{}"], &env, None)
        .await
        .fails_with(1, "queue not found (HTTP 404)");
}

#[tokio::test]
async fn a_pull_worker_leases_acks_and_nacks_from_the_command_line() {
    let app = spawn_app(|config| config.dispatch = false).await;
    let created = at(&app, &["queue", "create", "work"]).await;
    assert!(
        created.ok().contains("created pull queue work"),
        "{created:?}"
    );
    let first = at(&app, &["enqueue", "work", r#"{"n":1}"#])
        .await
        .ok()
        .trim()
        .to_owned();
    let second = at(&app, &["enqueue", "work", r#"{"n":2}"#])
        .await
        .ok()
        .trim()
        .to_owned();

    let table = at(&app, &["lease", "work"]).await;
    let line = lines_with(table.ok(), &first);
    assert_eq!(line.len(), 1, "{table:?}");
    assert!(line[0].contains(r#"{"n":1}"#), "{table:?}");
    let leased = at(&app, &["lease", "work", "--max", "5", "--json"])
        .await
        .json();
    let job = &leased["jobs"][0];
    assert_eq!(job["id"], second.as_str());
    let lease_id = job["leaseId"].as_str().expect("leaseId");
    at(
        &app,
        &[
            "nack",
            "work",
            &second,
            lease_id,
            "--error",
            "disk full",
            "--delay",
            "1h",
        ],
    )
    .await
    .ok();
    let stored = app.get_job("work", &second).await.expect(200);
    assert!(
        stored["history"].to_string().contains("disk full"),
        "{stored}"
    );
    // That lease is spent now.
    at(&app, &["ack", "work", &second, lease_id])
        .await
        .fails_with(1, "lease lost (HTTP 409)");
    assert!(
        at(&app, &["lease", "work"])
            .await
            .ok()
            .contains("no job due")
    );
}

#[tokio::test]
async fn schedule_set_list_pause_resume_and_delete_drive_the_schedules_api() {
    let app = storing_app().await;
    let env = [("HOOKQ_URL", app.base.as_str())];
    let set = hookq(
        &[
            "schedule",
            "set",
            "q",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--timezone",
            "Europe/Paris",
            "--priority",
            "-5",
            r#"{"report":"sales","n":1.50}"#,
        ],
        &env,
        None,
    )
    .await;
    let said = set.ok();
    assert!(
        said.contains("schedule q/nightly set: 0 3 * * * (Europe/Paris); next tick"),
        "{said}"
    );
    let stored = app.get("/queue/q/_schedules/nightly").await.expect(200);
    assert_eq!(stored["priority"], -5);
    // The job reaches the server as given: canonical JSON, as an enqueue would store it.
    assert_eq!(stored["job"], json!({ "report": "sales", "n": 1.5 }));
    // From stdin, paused.
    hookq(
        &[
            "schedule", "set", "q", "hourly", "--cron", "@hourly", "--paused",
        ],
        &env,
        Some(b"{\"every\":\"hour\"}"),
    )
    .await
    .ok();

    let list = hookq(&["schedule", "list", "q"], &env, None).await;
    let table = list.ok();
    assert_eq!(lines_with(table, "nightly").len(), 1, "{table}");
    assert!(lines_with(table, "hourly")[0].contains("paused"), "{table}");
    let json = hookq(&["schedule", "list", "q", "--json"], &env, None)
        .await
        .json();
    assert_eq!(json["schedules"].as_array().map(Vec::len), Some(2));

    hookq(&["schedule", "pause", "q", "nightly"], &env, None)
        .await
        .ok();
    assert_eq!(
        app.get("/queue/q/_schedules/nightly").await.expect(200)["paused"],
        true
    );
    let resumed = hookq(&["schedule", "resume", "q", "nightly"], &env, None).await;
    assert!(resumed.ok().contains("resumed; next tick"), "{resumed:?}");
    hookq(&["schedule", "delete", "q", "hourly"], &env, None)
        .await
        .ok();
    app.get("/queue/q/_schedules/hourly")
        .await
        .expect_error(404);

    hookq(
        &["schedule", "set", "q", "bad", "--cron", "61 * * * *", "{}"],
        &env,
        None,
    )
    .await
    .fails_with(1, "(HTTP 422)");
    hookq(
        &[
            "schedule",
            "set",
            "q",
            "bad",
            "--cron",
            "@daily",
            "{not json",
        ],
        &env,
        None,
    )
    .await
    .fails_with(2, "the job is not JSON");
    hookq(&["schedule", "delete", "q", "nope"], &env, None)
        .await
        .fails_with(1, "schedule not found (HTTP 404)");
}

#[tokio::test]
async fn jobs_lists_the_delivery_log_with_when_each_job_was_delivered() {
    let worker = TestReceiver::always(Reply::status(204)).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({"target": worker.url, "keepDelivered": "1h"}))
        .await
        .expect(201);
    let id = app.enqueue_ok("q", &payload(1)).await;
    app.wait_until_delivered("q", &id).await;
    let table = at(&app, &["jobs", "q", "--status", "delivered"]).await;
    let rows = lines_with(table.ok(), &id);
    assert_eq!(rows.len(), 1, "{table:?}");
    assert!(
        rows[0].contains("DELIVERED") && rows[0].contains("delivered 20"),
        "{}",
        rows[0]
    );
    assert!(rows[0].contains("204"), "the answering status: {}", rows[0]);
}

#[tokio::test]
async fn jobs_prints_a_table_or_the_servers_json_and_follows_cursors_with_all() {
    let app = storing_app().await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(app.enqueue_ok("q", &payload(n)).await);
    }

    let table = at(&app, &["jobs", "q"]).await;
    let text = table.ok();
    let header = text.lines().next().unwrap();
    for column in ["ID", "STATUS", "ATTEMPTS", "CREATED", "NEXT", "ERROR"] {
        assert!(header.contains(column), "{header}");
    }
    for id in &ids {
        let rows = lines_with(text, id);
        assert_eq!(rows.len(), 1, "{text}");
        assert!(rows[0].contains("READY"), "{text}");
    }

    let json = at(&app, &["jobs", "q", "--json", "--status", "ready"])
        .await
        .json();
    assert_eq!(json, app.list_raw("q", "status=READY").await.expect(200));

    // One page of two, with a hint about the rest.
    let page = at(&app, &["jobs", "q", "--limit", "2"]).await;
    assert_eq!(page.ok().lines().count(), 3, "{page:?}");
    assert!(page.stderr.contains("--cursor"), "{page:?}");

    // Every page, as one JSON object.
    let all = at(&app, &["jobs", "q", "--limit", "2", "--all", "--json"])
        .await
        .json();
    let all_ids: Vec<&str> = all["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(all_ids, ids);
    let all_table = at(&app, &["jobs", "q", "--limit", "2", "--all"]).await;
    assert_eq!(all_table.ok().lines().count(), 6, "{all_table:?}");

    let none = at(&app, &["jobs", "q", "--status", "ERROR"]).await;
    assert_eq!(none.ok(), "no ERROR jobs in q\n");
    at(&app, &["jobs", "q", "--status", "DONE"])
        .await
        .fails_with(2, "DONE");
}

// ---------------------------------------------------------------------------------------
// Dead letters
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn dlq_list_stats_replay_and_ack_drive_the_admin_api() {
    let receiver = TestReceiver::always(Reply::with_body(500, "nope")).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let ids = make_dead_letters(&app, "q", 3).await;

    let list = at(&app, &["dlq", "list", "--queue", "q"]).await;
    let text = list.ok();
    for id in &ids {
        let rows = lines_with(text, id);
        assert_eq!(rows.len(), 1, "{text}");
        assert!(rows[0].contains("max_attempts_reached"), "{text}");
        assert!(rows[0].contains("pending"), "{text}");
        assert!(rows[0].contains("nope"), "{text}");
    }
    assert!(text.contains("3 of 3 shown"), "{text}");
    let json = at(&app, &["dlq", "list", "--queue", "q", "--json"])
        .await
        .json();
    assert_eq!(json["total_count"], 3);
    let mut listed = message_ids(&json);
    listed.reverse();
    assert_eq!(listed, ids, "newest failure first");

    let stats = at(&app, &["dlq", "stats"]).await;
    let pending = lines_with(stats.ok(), "pending");
    assert!(
        pending[0].split_whitespace().eq(["pending", "3"]),
        "{stats:?}"
    );
    let stats_json = at(&app, &["dlq", "stats", "--json"]).await.json();
    assert_eq!(stats_json["by_status"]["pending"], 3);
    // One queue's figures (issue 44, defect 7); an unknown queue fails with the API's 404.
    let of_q = at(&app, &["dlq", "stats", "--queue", "q", "--json"])
        .await
        .json();
    assert_eq!(of_q["by_queue"], json!({ "q": 3 }));
    let unknown = at(&app, &["dlq", "stats", "--queue", "nope"]).await;
    assert_ne!(unknown.code, 0, "{unknown:?}");
    assert!(unknown.stderr.contains("queue"), "{unknown:?}");

    // The worker recovers; replay one by id, then acknowledge the rest of the queue.
    receiver.set_default(Reply::ok());
    let replayed = at(&app, &["dlq", "replay", "--ids", &ids[0]]).await;
    assert_eq!(
        replayed.ok(),
        "replayed 1 of 1 requested (claimed 1, failed 0)\n"
    );
    app.wait_until_gone("q", &ids[0]).await;
    let acked = at(&app, &["dlq", "ack", "--queue", "q", "--all"]).await;
    assert_eq!(acked.ok(), "acknowledged 2\n");
    let body = dlq_list(&app, "queue=q&status=acknowledged").await;
    assert_eq!(body["total_count"], 2);

    // Nothing pending is left: a whole-queue replay claims nothing.
    let json = at(
        &app,
        &[
            "dlq", "replay", "--queue", "q", "--all", "--delay", "30s", "--json",
        ],
    )
    .await
    .json();
    assert_eq!(
        json,
        json!({"ok": true, "requested": 0, "claimed": 0, "replayed": 0, "failed": 0,
               "replayed_ids": []})
    );

    // Selections are checked before anything is sent.
    at(&app, &["dlq", "replay", "--queue", "q"])
        .await
        .fails_with(2, "--all");
    at(&app, &["dlq", "ack"]).await.fails_with(2, "--ids");
    at(&app, &["dlq", "replay", "--ids", "not-an-id"])
        .await
        .fails_with(1, "(HTTP 422)");
}

/// `hookq search` finds a customer's jobs across queues and states, newest first; a table
/// for people (the status and the dead letter's state), the server's JSON with `--json`,
/// and `--all` follows the cursor to the end; a bad status is refused by clap.
#[tokio::test]
async fn search_finds_jobs_across_queues_from_the_command_line() {
    let receiver = TestReceiver::always(Reply::with_body(500, "card declined")).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("payments", &receiver.url, None).await;
    app.create_queue_ok("invoices", "http://127.0.0.1:9/invoices", None)
        .await;
    app.call(reqwest::Method::POST, "/queue/invoices/_pause", None)
        .await
        .expect(200);
    let waiting = app
        .enqueue_ok("invoices", &json!({"customer": "cus_77"}))
        .await;
    let dead = make_dead_letters(&app, "payments", 1).await.remove(0);
    app.enqueue_ok("invoices", &json!({"customer": "cus_88"}))
        .await;

    let table = at(&app, &["search", "declined"]).await;
    let text = table.ok();
    assert!(
        text.contains(&dead) && text.contains("ERROR") && text.contains("pending"),
        "{text}"
    );
    assert!(!text.contains(&waiting), "{text}");
    let found = at(&app, &["search", "cus_77", "--json"]).await.json();
    assert_eq!(found["jobs"][0]["id"], waiting.as_str(), "{found}");
    assert_eq!(found["jobs"][0]["status"], "READY");
    assert_eq!(found["walked"], true);
    let every = at(
        &app,
        &[
            "search", "--queue", "invoices", "--limit", "1", "--all", "--json",
        ],
    )
    .await
    .json();
    assert_eq!(every["jobs"].as_array().map(Vec::len), Some(2), "{every}");
    at(&app, &["search", "--status", "SIDEWAYS"])
        .await
        .fails_with(2, "--status");
}

/// Issue 27, "finding things" from the command line: `jobs` and `dlq list` take `--search`
/// and `--order`, and `dlq replay|ack --all --search` act on every pending letter a search
/// finds.
#[tokio::test]
async fn jobs_and_dlq_find_text_turn_around_and_act_on_what_a_search_finds() {
    let receiver = TestReceiver::always(Reply::with_body(500, "card declined")).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let declined = make_dead_letters(&app, "q", 2).await;
    receiver.set_default(Reply::with_body(500, "nope"));
    let other = make_dead_letters(&app, "q", 1).await.remove(0);

    let jobs = at(
        &app,
        &[
            "jobs", "q", "--status", "ERROR", "--search", "DECLINED", "--order", "newest", "--json",
        ],
    )
    .await
    .json();
    let listed: Vec<&str> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [declined[1].as_str(), declined[0].as_str()]);
    let letters = at(&app, &["dlq", "list", "--search", "nope", "--json"])
        .await
        .json();
    assert_eq!(message_ids(&letters), [other.as_str()]);
    at(&app, &["jobs", "q", "--order", "sideways"])
        .await
        .fails_with(2, "--order");

    let acked = at(&app, &["dlq", "ack", "--all", "--search", "declined"]).await;
    assert_eq!(acked.ok(), "acknowledged 2\n");
    receiver.set_default(Reply::ok());
    let replayed = at(
        &app,
        &["dlq", "replay", "--queue", "q", "--all", "--search", "nope"],
    )
    .await;
    assert_eq!(
        replayed.ok(),
        "replayed 1 of 1 requested (claimed 1, failed 0)\n"
    );
    app.wait_until_gone("q", &other).await;
    at(&app, &["dlq", "ack", "--search", "x"])
        .await
        .fails_with(2, "--all");
}

#[tokio::test]
async fn admin_commands_use_the_admin_key_and_queue_commands_the_api_key() {
    let api_key = "k".repeat(32);
    let admin_key = "a".repeat(32);
    let app = spawn_app(|config| {
        config.api_key = Some(ApiKey::new(api_key.clone()));
        config.admin_key = Some(ApiKey::new(admin_key.clone()));
    })
    .await;
    let base = app.base.as_str();
    hookq(&["queue", "list"], &[("HOOKQ_URL", base)], None)
        .await
        .fails_with(1, "error: not authorized (HTTP 401)");
    let with_key = [("HOOKQ_URL", base), ("HOOKQ_API_KEY", api_key.as_str())];
    hookq(&["queue", "list"], &with_key, None).await.ok();
    hookq(&["dlq", "stats"], &with_key, None)
        .await
        .fails_with(1, "(HTTP 401)");
    hookq(
        &["dlq", "stats", "--admin-key", &admin_key],
        &with_key,
        None,
    )
    .await
    .ok();
    let admin_env = [
        ("HOOKQ_URL", base),
        ("HOOKQ_API_KEY", api_key.as_str()),
        ("HOOKQ_ADMIN_KEY", admin_key.as_str()),
    ];
    hookq(&["dlq", "list"], &admin_env, None).await.ok();
}

#[tokio::test]
async fn an_unreachable_server_exits_3_and_a_bad_url_2() {
    let url = refused_url();
    let out = hookq(&["queue", "list", "--url", &url], &[], None).await;
    out.fails_with(3, "error: cannot reach the server");
    hookq(&["queue", "list", "--url", "not a url"], &[], None)
        .await
        .fails_with(2, "is not an http(s) URL");
}

// ---------------------------------------------------------------------------------------
// Signatures
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn verify_accepts_a_good_signature_and_explains_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let body = br#"{"to":"ada@example.com","n":1.5}"#;
    let body_file = dir.path().join("body.json");
    std::fs::write(&body_file, body).unwrap();
    let body_path = body_file.to_str().unwrap();
    let now = u64::try_from(now_millis()).unwrap();
    let header = signature::header_value(b"s3cret", now, body);

    let good = hookq(
        &[
            "verify",
            "--secret",
            "s3cret",
            "--header",
            &header,
            "--body-file",
            body_path,
        ],
        &[],
        None,
    )
    .await;
    assert!(good.ok().starts_with("valid"), "{good:?}");
    let line = format!("X-HYPER-SIGNATURE: {header}");
    hookq(
        &["verify", "--secret", "s3cret", "--header", &line],
        &[],
        Some(body),
    )
    .await
    .ok();

    hookq(
        &[
            "verify",
            "--secret",
            "other",
            "--header",
            &header,
            "--body-file",
            body_path,
        ],
        &[],
        None,
    )
    .await
    .fails_with(
        1,
        "invalid: X-HYPER-SIGNATURE signature does not match the body",
    );

    let mut with_newline = body.to_vec();
    with_newline.push(b'\n');
    let out = hookq(
        &["verify", "--secret", "s3cret", "--header", &header],
        &[],
        Some(&with_newline),
    )
    .await;
    out.fails_with(1, "does not match");
    assert!(out.stderr.contains("final newline"), "{out:?}");

    let old = signature::header_value(b"s3cret", now - 3_600_000, body);
    let args = [
        "verify",
        "--secret",
        "s3cret",
        "--header",
        &old,
        "--body-file",
        body_path,
    ];
    hookq(&args, &[], None).await.fails_with(1, "outside the");
    let mut lenient = args.to_vec();
    lenient.extend(["--tolerance", "2h"]);
    hookq(&lenient, &[], None).await.ok();

    hookq(
        &[
            "verify",
            "--secret",
            "s3cret",
            "--header",
            "sig=abc",
            "--body-file",
            body_path,
        ],
        &[],
        None,
    )
    .await
    .fails_with(1, "malformed");
}

#[tokio::test]
async fn verify_checks_a_standard_webhooks_signature_and_its_rotation() {
    use signature::standard::{self, Secret};
    let new = Secret::parse("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap();
    let old = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let body = br#"{"n":1}"#;
    let now_s = u64::try_from(now_millis() / 1000).unwrap();
    let timestamp = now_s.to_string();
    let signatures = standard::signature_header([&new, &old], "job-1", now_s, body);
    let args = |secret: &Secret, id: &'static str| {
        vec![
            "verify".to_owned(),
            "--secret".to_owned(),
            secret.to_whsec(),
            "--webhook-id".to_owned(),
            id.to_owned(),
            "--webhook-timestamp".to_owned(),
            timestamp.clone(),
            "--webhook-signature".to_owned(),
            format!("webhook-signature: {signatures}"),
        ]
    };
    for secret in [&new, &old] {
        let args = args(secret, "job-1");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = hookq(&args, &[], Some(body)).await;
        assert!(out.ok().starts_with("valid"), "{out:?}");
    }
    let args = args(&new, "job-2");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    hookq(&args, &[], Some(body))
        .await
        .fails_with(1, "no webhook-signature signature matches");
    hookq(
        &[
            "verify",
            "--secret",
            "s3cret",
            "--webhook-id",
            "job-1",
            "--webhook-timestamp",
            &timestamp,
            "--webhook-signature",
            &signatures,
        ],
        &[],
        Some(body),
    )
    .await
    .fails_with(2, "whsec_");
}

// ---------------------------------------------------------------------------------------
// The database file
// ---------------------------------------------------------------------------------------

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

#[tokio::test]
async fn backup_copies_a_live_database_and_never_overwrites() {
    if crate::helpers::skipped_on_postgres("`hookq backup` is about SQLite's file") {
        return;
    }
    let app = storing_app().await;
    for n in 0..3 {
        app.enqueue_ok("q", &payload(n)).await;
    }
    let out_dir = tempfile::tempdir().unwrap();
    let dest = out_dir.path().join("backup.db");
    let db = path_str(&app.db_path);

    let out = hookq(&["backup", "--db", db, path_str(&dest)], &[], None).await;
    assert!(out.ok().contains("backed up"), "{out:?}");
    // The server keeps working, and the copy holds what was committed.
    app.enqueue_ok("q", &payload(3)).await;
    assert_eq!(count_stored(&sqlite_file(&dest), Stored::Jobs).await, 3);
    assert_eq!(count_stored(&sqlite_file(&dest), Stored::Queues).await, 1);
    assert!(
        !Path::new(&format!("{}-wal", dest.display())).exists(),
        "the copy is one self-contained file"
    );
    let check = hookq(&["check", "--db", path_str(&dest)], &[], None).await;
    assert!(check.ok().contains(": ok"), "{check:?}");

    let before = std::fs::read(&dest).unwrap();
    hookq(&["backup", "--db", db, path_str(&dest)], &[], None)
        .await
        .fails_with(1, "refusing to overwrite");
    assert_eq!(std::fs::read(&dest).unwrap(), before);

    let missing = out_dir.path().join("missing.db");
    let other = out_dir.path().join("other.db");
    hookq(
        &["backup", "--db", path_str(&missing), path_str(&other)],
        &[],
        None,
    )
    .await
    .fails_with(1, "no database at");
    assert!(!other.exists());
}

#[tokio::test]
async fn check_passes_a_live_database_and_fails_a_corrupted_copy() {
    if crate::helpers::skipped_on_postgres("`hookq check` is about SQLite's file") {
        return;
    }
    let app = storing_app().await;
    for n in 0..50 {
        app.enqueue_ok("q", &json!({ "n": n, "pad": "x".repeat(500) }))
            .await;
    }
    let out = hookq(&["check", "--db", path_str(&app.db_path)], &[], None).await;
    assert!(out.ok().contains("integrity_check ok"), "{out:?}");

    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.db");
    hookq(
        &["backup", "--db", path_str(&app.db_path), path_str(&copy)],
        &[],
        None,
    )
    .await
    .ok();
    // Scribble over everything after the first two pages (the header stays intact).
    let mut bytes = std::fs::read(&copy).unwrap();
    let page_size = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    assert!(bytes.len() > 4 * page_size, "the copy has several pages");
    for (i, byte) in bytes.iter_mut().enumerate().skip(2 * page_size) {
        *byte = (i % 251) as u8;
    }
    std::fs::write(&copy, &bytes).unwrap();
    let out = hookq(&["check", "--db", path_str(&copy)], &[], None).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("problems found"), "{out:?}");
}

#[tokio::test]
async fn migrate_refuses_a_database_a_server_holds_and_prepares_a_new_one() {
    if crate::helpers::skipped_on_postgres("`hookq migrate` on a file is about SQLite's file") {
        return;
    }
    let app = storing_app().await;
    hookq(&["migrate", "--db", path_str(&app.db_path)], &[], None)
        .await
        .fails_with(1, "in use by another hookq process");

    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("sub").join("fresh.db");
    let out = hookq(&["migrate", "--db", path_str(&fresh)], &[], None).await;
    let created = format!(
        "schema version {} (created)",
        hookq::store::sqlite::SCHEMA_VERSION
    );
    assert!(out.ok().contains(&created), "{out:?}");
    let out = hookq(&["migrate"], &[("HOOKQ_DB", path_str(&fresh))], None).await;
    assert!(out.ok().contains("(up to date)"), "{out:?}");
    assert_eq!(count_stored(&sqlite_file(&fresh), Stored::Queues).await, 0);

    let notes = dir.path().join("notes.db");
    std::fs::write(&notes, b"not a database at all ".repeat(100)).unwrap();
    hookq(&["migrate", "--db", path_str(&notes)], &[], None)
        .await
        .fails_with(1, "refusing to touch it");
    assert_eq!(
        std::fs::read(&notes).unwrap(),
        b"not a database at all ".repeat(100)
    );
}

// ---------------------------------------------------------------------------------------
// Scoped API keys
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn key_create_list_and_revoke_work_against_a_running_server() {
    const KEY: &str = "the-configured-api-key-for-the-cli";
    let app = spawn_app(|config| config.api_key = Some(ApiKey::new(KEY.into()))).await;
    app.create_queue_ok("billing-eu", "https://worker.example.com/jobs", None)
        .await;
    let env = [("HOOKQ_URL", app.base.as_str()), ("HOOKQ_API_KEY", KEY)];
    let created = hookq(
        &[
            "key",
            "create",
            "--name",
            "billing",
            "--role",
            "producer",
            "--queues",
            "billing-*,emails",
            "--json",
        ],
        &env,
        None,
    )
    .await
    .json();
    let (id, key) = (
        created["id"].as_str().unwrap().to_owned(),
        created["key"].as_str().unwrap().to_owned(),
    );
    // The new key enqueues on its queues, and nothing more.
    let mut producer = app.api.clone();
    producer.api_key = Some(key.clone());
    producer
        .enqueue("billing-eu", &json!({"a": 1}))
        .await
        .expect(201);
    producer
        .get("/queue/billing-eu/_stats")
        .await
        .expect_error(403);

    let table = hookq(&["key", "list"], &env, None).await;
    let row = lines_with(table.ok(), &id);
    assert_eq!(row.len(), 1, "{table:?}");
    assert!(
        row[0].contains("billing")
            && row[0].contains("producer")
            && row[0].contains("billing-*,emails"),
        "{table:?}"
    );
    assert!(!table.stdout.contains(&key), "the key is never listed");
    // A scoped key without the admin role cannot list keys.
    hookq(
        &["key", "list"],
        &[("HOOKQ_URL", app.base.as_str()), ("HOOKQ_API_KEY", &key)],
        None,
    )
    .await
    .fails_with(1, "admin only (HTTP 403)");
    hookq(
        &[
            "key", "create", "--name", "x", "--role", "owner", "--queues", "*",
        ],
        &env,
        None,
    )
    .await
    .fails_with(1, "role must be one of");

    assert!(
        hookq(&["key", "revoke", &id], &env, None)
            .await
            .ok()
            .contains("revoked key")
    );
    producer
        .enqueue("billing-eu", &json!({"a": 2}))
        .await
        .expect_error(401);
    hookq(&["key", "revoke", &id], &env, None)
        .await
        .fails_with(1, "(HTTP 404)");
}

/// `key create --expires` takes what `POST /admin/keys` takes as `expiresAt`: a duration
/// from now, an RFC 3339 time; the key then stops working at that time, and `key list`
/// says when.
#[tokio::test]
async fn key_create_expires_sets_when_the_key_stops_working() {
    const KEY: &str = "the-configured-api-key-for-the-cli";
    let app = spawn_app(|config| config.api_key = Some(ApiKey::new(KEY.into()))).await;
    let env = [("HOOKQ_URL", app.base.as_str()), ("HOOKQ_API_KEY", KEY)];
    let before = hookq::model::now_millis();
    let created = hookq(
        &[
            "key",
            "create",
            "ops",
            "--role",
            "admin",
            "--expires",
            "90d",
            "--json",
        ],
        &env,
        None,
    )
    .await
    .json();
    let after = hookq::model::now_millis();
    let ninety_days = 90 * 24 * 3600 * 1000;
    let expires = created["expiresAt"].as_i64().expect("an expiry");
    assert!(
        (before + ninety_days..=after + ninety_days).contains(&expires),
        "{created}"
    );

    let readable = hookq(
        &[
            "key",
            "create",
            "reader",
            "--role",
            "reader",
            "--queues",
            "*",
            "--expires",
            "2035-01-02T03:04:05Z",
        ],
        &env,
        None,
    )
    .await;
    assert!(
        readable
            .ok()
            .contains("(reader, reader, expires 2035-01-02T03:04:05"),
        "{readable:?}"
    );
    let listed = app.get("/admin/keys").await.expect(200);
    let reader = listed["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|key| key["name"] == "reader")
        .expect("the reader key")
        .clone();
    assert_eq!(reader["expiresAt"], json!(2_051_319_845_000_i64));
    let table = hookq(&["key", "list"], &env, None).await;
    assert!(table.ok().contains("EXPIRES"), "{table:?}");
    let row = lines_with(table.ok(), reader["id"].as_str().unwrap());
    assert!(row[0].contains("2035-01-02T03:04:05"), "{table:?}");
    let ops_row = lines_with(table.ok(), created["id"].as_str().unwrap());
    assert!(!ops_row[0].contains("never"), "{table:?}");

    // Refused as the API refuses it: nothing created.
    hookq(
        &[
            "key",
            "create",
            "late",
            "--role",
            "admin",
            "--expires",
            "2001-01-01T00:00:00Z",
        ],
        &env,
        None,
    )
    .await
    .fails_with(1, "expiresAt: it is not in the future");
    hookq(
        &[
            "key",
            "create",
            "odd",
            "--role",
            "admin",
            "--expires",
            "soon",
        ],
        &env,
        None,
    )
    .await
    .fails_with(1, "expiresAt: not a time");
    let listed = app.get("/admin/keys").await.expect(200);
    assert_eq!(
        listed["keys"].as_array().expect("keys").len(),
        2,
        "{listed}"
    );
}

#[tokio::test]
async fn a_key_created_on_an_open_server_says_it_does_nothing_yet() {
    let app = spawn_app(|_| {}).await;
    // The API's answer carries the warning...
    let created = app
        .call(
            axum::http::Method::POST,
            "/admin/keys",
            Some(br#"{"name":"x","role":"producer","queues":["q"]}"#),
        )
        .await
        .expect(201);
    let warning = created["warning"].as_str().expect("a warning");
    assert!(warning.contains("no API key"), "{warning}");
    // ...and the CLI says it on stderr, keeping stdout the key alone.
    let run = at(
        &app,
        &[
            "key", "create", "--name", "y", "--role", "reader", "--queues", "q",
        ],
    )
    .await;
    assert!(
        run.stderr.contains("warning: this server has no API key"),
        "{run:?}"
    );
    assert!(run.ok().contains("hq_"), "{run:?}");
    // With an API key, no warning.
    const KEY: &str = "the-configured-api-key-for-the-cli";
    let keyed = spawn_app(|config| config.api_key = Some(ApiKey::new(KEY.into()))).await;
    let created = keyed
        .call(
            axum::http::Method::POST,
            "/admin/keys",
            Some(br#"{"name":"x","role":"producer","queues":["q"]}"#),
        )
        .await
        .expect(201);
    assert!(created.get("warning").is_none(), "{created}");
    // `--help` says so before anyone tries.
    let help = hookq(&["key", "create", "--help"], &[], None).await;
    assert!(
        help.ok()
            .contains("Scoped keys are enforced once the server has an API key"),
        "{help:?}"
    );
}

/// The forms a newcomer tries first work beside the flags: `key create NAME`,
/// `dlq list QUEUE`, `dlq replay ID…` and `dlq ack ID…`.
#[tokio::test]
async fn names_queues_and_ids_are_taken_by_position_as_well_as_by_flag() {
    let receiver = TestReceiver::always(Reply::with_body(500, "nope")).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let ids = make_dead_letters(&app, "q", 3).await;

    let by_position = at(&app, &["dlq", "list", "q", "--json"]).await.json();
    assert_eq!(by_position["total_count"], 3);
    at(&app, &["dlq", "list", "q", "--queue", "q"])
        .await
        .fails_with(2, "cannot be used with");

    receiver.set_default(Reply::ok());
    let replayed = at(&app, &["dlq", "replay", &ids[0], &ids[1]]).await;
    assert_eq!(
        replayed.ok(),
        "replayed 2 of 2 requested (claimed 2, failed 0)\n"
    );
    let acked = at(&app, &["dlq", "ack", &ids[2]]).await;
    assert_eq!(acked.ok(), "acknowledged 1\n");
    at(&app, &["dlq", "replay", &ids[0], "--ids", &ids[1]])
        .await
        .fails_with(2, "cannot be used with");

    let created = at(
        &app,
        &[
            "key", "create", "billing", "--role", "producer", "--queues", "q", "--json",
        ],
    )
    .await
    .json();
    assert!(
        created["key"]
            .as_str()
            .is_some_and(|k| k.starts_with("hq_"))
    );
    at(
        &app,
        &["key", "create", "--role", "producer", "--queues", "q"],
    )
    .await
    .fails_with(2, "NAME");
}

// ---------------------------------------------------------------------------------------
// Topics
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn topic_commands_create_subscribe_publish_show_replay_and_delete() {
    let app = storing_app().await;
    at(&app, &["topic", "create", "orders", "--retain", "1h"])
        .await
        .ok();
    let out = at(
        &app,
        &[
            "topic",
            "subscribe",
            "orders",
            "q",
            "--filter",
            r#"{"type":["paid"]}"#,
        ],
    )
    .await;
    assert!(out.ok().contains("queue q subscribes to orders"), "{out:?}");
    let bad = at(
        &app,
        &["topic", "subscribe", "orders", "q", "--filter", "{nope"],
    )
    .await;
    bad.fails_with(2, "--filter is not JSON");
    let out = at(&app, &["topic", "publish", "orders", r#"{"type":"paid"}"#]).await;
    assert!(out.ok().contains("→ 1 queue(s)"), "{out:?}");
    let out = at(
        &app,
        &[
            "topic",
            "publish",
            "orders",
            r#"{"type":"other"}"#,
            "--json",
        ],
    )
    .await;
    assert_eq!(out.json()["queues"], 0);
    let shown = at(&app, &["topic", "show", "orders"]).await;
    let text = shown.ok();
    assert!(text.contains("retain 1h"), "{text}");
    assert_eq!(lines_with(text, r#"{"type":["paid"]}"#).len(), 1, "{text}");
    let listed = at(&app, &["topic", "list"]).await;
    assert_eq!(lines_with(listed.ok(), "orders").len(), 1);
    let replayed = at(&app, &["topic", "replay", "orders", "q", "--since", "1h"]).await;
    assert!(
        replayed.ok().contains("replayed 1 message(s)"),
        "{replayed:?}"
    );
    at(&app, &["topic", "unsubscribe", "orders", "q"])
        .await
        .ok();
    at(&app, &["topic", "delete", "orders"]).await.ok();
    at(&app, &["topic", "show", "orders"])
        .await
        .fails_with(1, "topic not found");
}
