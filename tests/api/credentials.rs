//! Operators' credentials never reach what others read: `--help` shows no secret-bearing
//! setting's value, and the log lines and errors of the real binary show a database URL
//! without its password and the events target without its userinfo and query.

use std::path::Path;
use std::process::Command;

use crate::helpers::{BinaryApp, payload, refused_url};
use crate::postgres::TestDatabase;

const PASSWORD: &str = "pw-s3cret-do-not-print";
const TOKEN: &str = "tok-s3cret-do-not-print";

fn assert_no_secret(text: &str, what: &str) {
    for secret in [PASSWORD, TOKEN] {
        assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
    }
}

#[test]
fn help_shows_no_secret_bearing_settings_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("postgres://hookq:{PASSWORD}@db.internal/hookq?password={PASSWORD}");
    let events = format!("https://ops.example/in?token={TOKEN}");
    let proxy = format!("http://squid:{PASSWORD}@squid.internal:3128");
    for args in [
        &["--help"][..],
        &["serve", "--help"][..],
        &["migrate", "--help"][..],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_hookq"))
            .args(args)
            .env("HOOKQ_DB", &db)
            .env("HOOKQ_EVENTS_TARGET", &events)
            .env("HOOKQ_EVENTS_SECRET", TOKEN)
            .env("HOOKQ_EGRESS_PROXY", &proxy)
            .env("HOOKQ_API_KEY", TOKEN)
            .env("HOOKQ_ADMIN_KEY", TOKEN)
            .env("HOOKQ_URL", format!("http://u:{PASSWORD}@127.0.0.1:1"))
            .env("HOME", dir.path())
            .output()
            .expect("run hookq --help");
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && help.contains("HOOKQ_"),
            "{args:?}: {help}"
        );
        assert_no_secret(&help, &format!("hookq {}", args.join(" ")));
    }
}

#[test]
fn a_database_url_password_never_appears_in_a_start_up_error() {
    for url in [
        format!("postgres://hookq:{PASSWORD}@127.0.0.1:1/hookq"),
        format!("postgres://hookq@127.0.0.1:1/hookq?connect_timeout=2&password={PASSWORD}"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_hookq"))
            .args(["--db", &url, "--listen", "127.0.0.1:0"])
            .env("NO_COLOR", "1")
            .env_remove("HOOKQ_API_KEY")
            .output()
            .expect("run hookq");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "nothing listens on port 1");
        assert!(
            stderr.contains("127.0.0.1:1"),
            "the error names the database: {stderr}"
        );
        assert_no_secret(&stderr, "the start-up error");
        let output = Command::new(env!("CARGO_BIN_EXE_hookq"))
            .args(["migrate", "--db", &url])
            .env("NO_COLOR", "1")
            .output()
            .expect("run hookq migrate");
        assert!(!output.status.success());
        assert_no_secret(&String::from_utf8_lossy(&output.stderr), "hookq migrate");
    }
}

#[tokio::test]
async fn the_database_open_line_shows_the_url_without_its_password() {
    let Some(db) = TestDatabase::create("the_database_open_line_…").await else {
        return;
    };
    // The test cluster trusts local connections: the password is accepted and ignored.
    let separator = if db.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}password={PASSWORD}", db.url);
    let mut node = BinaryApp::start(Path::new(&url), &[]).await;
    let line = node.wait_for_log("database open").await;
    assert!(line.contains("password=***"), "{line}");
    node.terminate();
    node.wait_for_exit().await;
    assert_no_secret(&node.log_text(), "the log");
    db.drop_database().await;
}

#[tokio::test]
async fn the_events_target_is_logged_and_its_failures_stored_without_userinfo_or_query() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hookq.db");
    // An events target nothing listens on: every send fails, and says why.
    let events = refused_url().replace("/hook", &format!("/ops?token={TOKEN}"));
    let mut server = BinaryApp::start(
        &db,
        &[
            ("HOOKQ_EVENTS_TARGET", &events),
            ("HOOKQ_MAX_ATTEMPTS", "1"),
        ],
    )
    .await;
    let on = server.wait_for_log("operational events on").await;
    assert!(on.contains("/ops"), "{on}");
    // A dead letter makes an event; its send fails.
    server.create_queue_ok("q", &refused_url(), None).await;
    let id = server.enqueue_ok("q", &payload(1)).await;
    server.wait_until_error("q", &id).await;
    let failed = server.wait_for_log("events target failed").await;
    assert!(failed.contains("connect"), "the error says why: {failed}");
    server.terminate();
    server.wait_for_exit().await;
    assert_no_secret(&server.log_text(), "the log");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: String = conn
        .query_row(
            "SELECT group_concat(last_error, ' | ') FROM event_outbox",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(!stored.is_empty());
    assert_no_secret(&stored, "the outbox row");
}
