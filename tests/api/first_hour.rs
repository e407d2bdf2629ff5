//! The first hour of a new user, as the README walks it: the example workers take the
//! flags the README gives them and print what it says they print; the start-up log says
//! where the UI is; `--help` says which routes need no key.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStdout, Command};

use crate::helpers::{BinaryApp, spawn_app};

const DEADLINE: Duration = Duration::from_secs(30);

const PYTHON_WORKER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/python_worker.py");
const PULL_WORKER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/pull_worker.py");

/// `python3`, or `None` after saying the test is skipped (a failure under `CI=true`).
fn python3() -> Option<&'static str> {
    match std::process::Command::new("python3")
        .arg("--version")
        .output()
    {
        Ok(out) if out.status.success() => Some("python3"),
        _ if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            panic!("CI=true, and python3 is missing")
        }
        _ => {
            eprintln!("skipped: no python3");
            crate::skipped::record("python3");
            None
        }
    }
}

/// The next line of `lines` that contains `needle` (the worker's stdout).
async fn line_with(lines: &mut Lines<BufReader<ChildStdout>>, needle: &str) -> String {
    let found = async {
        while let Some(line) = lines.next_line().await.expect("read the worker's output") {
            if line.contains(needle) {
                return line;
            }
        }
        panic!("the worker exited before printing {needle:?}")
    };
    tokio::time::timeout(DEADLINE, found)
        .await
        .unwrap_or_else(|_| panic!("the worker printed no {needle:?} within {DEADLINE:?}"))
}

/// The README's Python worker: `--listen` and `--secret` as for the Rust one; it verifies
/// the delivery and prints the job with its id, attempt and the signature it verified.
#[tokio::test]
async fn the_python_worker_takes_the_readmes_flags_and_prints_the_verified_signature() {
    let Some(python) = python3() else { return };
    let mut worker = Command::new(python)
        .arg(PYTHON_WORKER)
        .args(["--listen", "127.0.0.1:0", "--secret", "s3cret"])
        .env_remove("WORKER_SECRET")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python worker");
    let mut lines = BufReader::new(worker.stdout.take().expect("piped")).lines();
    let listening = line_with(&mut lines, "worker listening on ").await;
    let url = listening
        .split_whitespace()
        .last()
        .expect("an address")
        .to_owned();

    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("emails", &format!("{url}jobs"), Some("s3cret"))
        .await;
    let id = app
        .enqueue_ok("emails", &json!({ "to": "ada@example.com" }))
        .await;
    let printed = line_with(&mut lines, &id).await;
    assert!(
        printed.contains("attempt 1") && printed.contains("signature verified t="),
        "{printed}"
    );
    assert!(printed.contains("ada@example.com"), "{printed}");
    app.wait_until_gone("emails", &id).await;
}

/// The README's pull worker: it leases the queue's job, prints it and acknowledges it.
#[tokio::test]
async fn the_python_pull_worker_leases_prints_and_acks_a_job() {
    let Some(python) = python3() else { return };
    let app = spawn_app(|_| {}).await;
    app.put_queue("thumbnails", &json!({})).await.expect(201);
    let mut worker = Command::new(python)
        .arg(PULL_WORKER)
        .args(["--queue", "thumbnails", "--url", &app.base, "--wait", "5s"])
        .env_remove("HOOKQ_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python pull worker");
    let mut lines = BufReader::new(worker.stdout.take().expect("piped")).lines();
    line_with(&mut lines, "leasing from ").await;
    let id = app
        .enqueue_ok("thumbnails", &json!({ "image": "cat.png" }))
        .await;
    let printed = line_with(&mut lines, &id).await;
    assert!(
        printed.contains("attempt 1") && printed.contains("cat.png"),
        "{printed}"
    );
    app.wait_until_gone("thumbnails", &id).await;
}

/// Without a secret the Python worker refuses to start, saying how to give one.
#[test]
fn the_python_worker_asks_for_its_secret() {
    let Some(python) = python3() else { return };
    let out = std::process::Command::new(python)
        .arg(PYTHON_WORKER)
        .env_remove("WORKER_SECRET")
        .output()
        .expect("run the Python worker");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("--secret") && said.contains("WORKER_SECRET"),
        "{said}"
    );
}

/// The start-up log says where the admin UI is, and that address serves it.
#[tokio::test]
async fn the_start_up_log_names_the_ui_address() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = BinaryApp::start(&dir.path().join("hookq.db"), &[]).await;
    let line = app.wait_for_log("admin UI").await;
    let url = line
        .split_whitespace()
        .find_map(|word| word.strip_prefix("url="))
        .unwrap_or_else(|| panic!("no url= in {line:?}"));
    let port = app
        .url("/")
        .split(':')
        .nth(2)
        .map(|rest| rest.trim_end_matches('/').to_owned());
    assert_eq!(
        url,
        format!("http://127.0.0.1:{}/ui", port.expect("a port")),
        "{line}"
    );
    let page = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .expect("GET the UI");
    assert!(page.status().is_success(), "{}", page.status());
    app.terminate();
    app.wait_for_exit().await;
}

/// `--help` says which routes answer without the key.
#[test]
fn help_says_which_routes_need_no_key() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookq"))
        .arg("--help")
        .env("NO_COLOR", "1")
        .output()
        .expect("run hookq --help");
    let help = String::from_utf8_lossy(&out.stdout);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("every route but /healthz, /readyz and /openapi.json"),
        "{help}"
    );
}
