//! Standard Webhooks per queue (`signatureScheme`): the 422s, `_settings`, the headers of
//! real deliveries, rotation, the operational events, and real deliveries checked by the
//! official `standardwebhooks` verifiers of npm and PyPI (a first delivery, a retry, a
//! replay with the same `webhook-id`, and a rotation during which both secrets verify).
//!
//! The official verifiers are installed by `.ci/run` into `compat/standard-webhooks`
//! (`npm ci` there; `pip install --target compat/standard-webhooks/python -r
//! compat/standard-webhooks/requirements.txt`). Without them the test that needs them
//! prints "skipped" and passes, unless `CI` is set: then it fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use hookq::events::{EVENT_ID_HEADER, EventsTarget};
use hookq::model::{Secret, SignatureScheme, Target, now_millis};

use crate::helpers::{Received, Reply, TestReceiver, assert_signed, eventually, spawn_app};

/// `whsec_` + base64 of 24 and of 32 bytes.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub const NEW_SECRET: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// Check the Standard Webhooks headers of `delivery` the way a worker would, with nothing of
/// hookq's: `webhook-id`, a recent `webhook-timestamp`, and a `v1` signature for every
/// secret of `secrets` (in that order), over `id.timestamp.body`, keyed with the decoded
/// bytes.
#[track_caller]
pub fn assert_standard_signed(delivery: &Received, id: &str, secrets: &[&str]) {
    assert_eq!(delivery.header("webhook-id"), Some(id));
    let timestamp = delivery
        .header("webhook-timestamp")
        .expect("a standard delivery carries webhook-timestamp");
    let seconds: i64 = timestamp
        .parse()
        .expect("webhook-timestamp is unix seconds");
    let now = now_millis() / 1000;
    assert!(
        (now - 60..=now).contains(&seconds),
        "webhook-timestamp {seconds} is a recent unix time in seconds (now {now})"
    );
    let header = delivery
        .header("webhook-signature")
        .expect("a standard delivery with a secret carries webhook-signature");
    let expected: Vec<String> = secrets
        .iter()
        .map(|secret| {
            let key = BASE64
                .decode(secret.strip_prefix("whsec_").unwrap())
                .unwrap();
            let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).unwrap();
            mac.update(format!("{id}.{timestamp}.").as_bytes());
            mac.update(&delivery.body);
            format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
        })
        .collect();
    assert_eq!(header, expected.join(" "));
}

async fn settings(app: &crate::helpers::TestApp, queue: &str) -> Value {
    app.get(&format!("/queue/{queue}/_settings"))
        .await
        .expect(200)
}

#[tokio::test]
async fn a_standard_queue_takes_only_whsec_secrets_of_24_to_64_bytes() {
    let app = spawn_app(|_| {}).await;
    let target = "http://127.0.0.1:9/hook";
    let put = |secret: &str, scheme: &str| json!({ "target": target, "secret": secret, "signatureScheme": scheme });
    for (secret, scheme) in [
        ("s3cret", "standard"),
        ("s3cret", "both"),
        ("whsec_c2hvcnQ=", "standard"),
        ("whsec_not base64!", "both"),
        // Base64 without its padding: npm's verifier cannot decode it.
        (
            "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
            "standard",
        ),
    ] {
        let msg = app
            .put_queue("q", &put(secret, scheme))
            .await
            .expect_error(422);
        assert!(msg.contains("whsec_"), "{msg}");
        assert!(
            !msg.contains(secret),
            "the message never repeats the secret: {msg}"
        );
    }
    let msg = app
        .put_queue("q", &put(SECRET, "svix"))
        .await
        .expect_error(422);
    assert!(
        msg.contains("signatureScheme") || msg.contains("hyper"),
        "{msg}"
    );

    // hyper keeps taking any secret; the default scheme is hyper.
    app.put_queue("plain", &json!({ "target": target, "secret": "s3cret" }))
        .await
        .expect(201);
    assert_eq!(settings(&app, "plain").await["signatureScheme"], "hyper");
    let msg = app
        .patch_queue("plain", &json!({ "signatureScheme": "standard" }))
        .await
        .expect_error(422);
    assert!(msg.contains("whsec_"), "{msg}");
    app.patch_queue(
        "plain",
        &json!({ "signatureScheme": "standard", "secret": SECRET }),
    )
    .await
    .expect(200);
    let shown = settings(&app, "plain").await;
    assert_eq!(shown["signatureScheme"], "standard");
    assert_eq!(shown["hasSecret"], true);
    assert_eq!(shown["previousSecretExpiresAt"], Value::Null);
    let msg = app
        .patch_queue("plain", &json!({ "secret": "s3cret" }))
        .await
        .expect_error(422);
    assert!(msg.contains("whsec_"), "{msg}");
    // A standard queue without a secret is allowed (deliveries unsigned); null is hyper.
    app.patch_queue("plain", &json!({ "secret": null }))
        .await
        .expect(200);
    app.patch_queue("plain", &json!({ "signatureScheme": null }))
        .await
        .expect(200);
    assert_eq!(settings(&app, "plain").await["signatureScheme"], "hyper");
}

#[tokio::test]
async fn rotate_needs_a_new_secret_on_a_standard_queue_and_a_sane_duration() {
    let app = spawn_app(|_| {}).await;
    let target = "http://127.0.0.1:9/hook";
    app.put_queue("hy", &json!({ "target": target, "secret": "s3cret" }))
        .await
        .expect(201);
    app.put_queue(
        "sw",
        &json!({ "target": target, "secret": SECRET, "signatureScheme": "standard" }),
    )
    .await
    .expect(201);
    app.put_queue(
        "none",
        &json!({ "target": target, "signatureScheme": "both" }),
    )
    .await
    .expect(201);
    for (queue, body, needle) in [
        ("sw", json!({ "rotate": "24h" }), "new secret"),
        (
            "sw",
            json!({ "secret": null, "rotate": "24h" }),
            "new secret",
        ),
        (
            "sw",
            json!({ "secret": NEW_SECRET, "rotate": "forever" }),
            "duration",
        ),
        (
            "sw",
            json!({ "secret": NEW_SECRET, "rotate": "31d" }),
            "30d",
        ),
        ("sw", json!({ "secret": NEW_SECRET, "rotate": "0s" }), "1s"),
        ("hy", json!({ "secret": "other", "rotate": "24h" }), "hyper"),
        (
            "none",
            json!({ "secret": NEW_SECRET, "rotate": "24h" }),
            "has none",
        ),
    ] {
        let msg = app.patch_queue(queue, &body).await.expect_error(422);
        assert!(msg.contains(needle), "{queue} {body}: {msg}");
    }
    assert_eq!(
        settings(&app, "sw").await["previousSecretExpiresAt"],
        Value::Null
    );

    let before = now_millis();
    app.patch_queue("sw", &json!({ "secret": NEW_SECRET, "rotate": "24h" }))
        .await
        .expect(200);
    let expires = settings(&app, "sw").await["previousSecretExpiresAt"]
        .as_i64()
        .expect("a rotation shows when the previous secret expires");
    let day = 24 * 3600 * 1000;
    assert!((before + day..=now_millis() + day).contains(&expires));
    // A plain change of secret ends the rotation at once.
    app.patch_queue("sw", &json!({ "secret": SECRET }))
        .await
        .expect(200);
    assert_eq!(
        settings(&app, "sw").await["previousSecretExpiresAt"],
        Value::Null
    );
}

#[tokio::test]
async fn each_scheme_signs_its_own_headers() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    for (queue, scheme) in [("hy", "hyper"), ("sw", "standard"), ("both", "both")] {
        let url = format!("{}?queue={queue}", receiver.url);
        app.put_queue(
            queue,
            &json!({ "target": url, "secret": SECRET, "signatureScheme": scheme }),
        )
        .await
        .expect(201);
    }
    app.put_queue(
        "unsigned",
        &json!({ "target": format!("{}?queue=unsigned", receiver.url), "signatureScheme": "standard" }),
    )
    .await
    .expect(201);
    let mut ids = Vec::new();
    for queue in ["hy", "sw", "both", "unsigned"] {
        ids.push((queue, app.enqueue_ok(queue, &json!({ "to": queue })).await));
    }
    let received = receiver.wait_for(4).await;
    for (queue, id) in ids {
        let delivery = received
            .iter()
            .find(|r| r.uri.query() == Some(&format!("queue={queue}")))
            .expect("every queue got its job");
        assert_eq!(delivery.job_id(), id);
        match queue {
            "hy" => {
                assert_signed(delivery, SECRET);
                assert!(delivery.header("webhook-id").is_none());
                assert!(delivery.header("webhook-signature").is_none());
            }
            "sw" => {
                assert_standard_signed(delivery, &id, &[SECRET]);
                assert!(delivery.header("x-hyper-signature").is_none());
            }
            "both" => {
                assert_standard_signed(delivery, &id, &[SECRET]);
                // hyper's header is keyed with the secret's text, as before.
                assert_signed(delivery, SECRET);
            }
            _ => {
                assert_eq!(delivery.header("webhook-id"), Some(id.as_str()));
                assert!(delivery.header("webhook-timestamp").is_some());
                assert!(delivery.header("webhook-signature").is_none());
            }
        }
    }
}

#[tokio::test]
async fn a_rotation_signs_with_both_secrets_until_it_expires() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "q",
        &json!({ "target": receiver.url, "secret": SECRET, "signatureScheme": "both" }),
    )
    .await
    .expect(201);
    app.patch_queue("q", &json!({ "secret": NEW_SECRET, "rotate": "1s" }))
        .await
        .expect(200);
    let during = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    let delivery = receiver.wait_for(1).await.remove(0);
    // The new secret first; hyper's header carries the new one only.
    assert_standard_signed(&delivery, &during, &[NEW_SECRET, SECRET]);
    assert_signed(&delivery, NEW_SECRET);

    eventually("the previous secret to expire", || async {
        settings(&app, "q").await["previousSecretExpiresAt"]
            .is_null()
            .then_some(())
    })
    .await;
    let after = app.enqueue_ok("q", &json!({ "n": 2 })).await;
    let delivery = receiver.wait_for(2).await.remove(1);
    assert_standard_signed(&delivery, &after, &[NEW_SECRET]);
}

#[tokio::test]
async fn events_can_be_signed_the_standard_way() {
    let events = TestReceiver::always(Reply::ok()).await;
    let worker = TestReceiver::always(Reply::with_body(410, "gone")).await;
    let target = EventsTarget {
        url: Target::parse(&events.url).unwrap(),
        secret: Some(Secret::parse(SECRET).unwrap()),
        scheme: SignatureScheme::Standard,
    };
    let app = spawn_app(move |c| c.events = Some(target)).await;
    app.create_queue_ok("q", &worker.url, None).await;
    let id = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &id).await;

    let event = events.wait_for(1).await.remove(0);
    let event_id = event
        .header(EVENT_ID_HEADER)
        .expect("an event id")
        .to_owned();
    assert_standard_signed(&event, &event_id, &[SECRET]);
    assert!(event.header("x-hyper-signature").is_none());
}

#[test]
fn the_events_scheme_is_checked_at_start_up() {
    use clap::{Args, FromArgMatches};
    let parse = |flags: &[&str]| {
        let mut argv = vec![
            "hookq",
            "--db",
            "/nonexistent/hookq.db",
            "--events-target",
            "http://127.0.0.1:9/events",
        ];
        argv.extend_from_slice(flags);
        let command = hookq::config::ServeArgs::augment_args(clap::Command::new("hookq"))
            .mut_args(|arg| arg.env(None));
        let args = command
            .try_get_matches_from(argv)
            .and_then(|matches| hookq::config::ServeArgs::from_arg_matches(&matches))
            .expect("the flags parse");
        hookq::config::Config::from_args(args).map_err(|e| format!("{e:#}"))
    };
    let err = parse(&[
        "--events-secret",
        "s3cret",
        "--events-signature",
        "standard",
    ])
    .expect_err("a plain secret cannot sign Standard Webhooks events");
    assert!(err.contains("whsec_"), "{err}");
    let err = parse(&["--events-signature", "svix"]).expect_err("no such scheme");
    assert!(err.contains("HOOKQ_EVENTS_SIGNATURE"), "{err}");
    let config = parse(&["--events-secret", SECRET, "--events-signature", "both"]).unwrap();
    assert_eq!(config.events.unwrap().scheme, SignatureScheme::Both);
}

// ---------------------------------------------------------------------------------------
// The official verifiers
// ---------------------------------------------------------------------------------------

/// Where `.ci/run` installs the official packages.
fn compat_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/standard-webhooks")
}

/// Skips the test, or fails it when `CI` is set (CI must run it).
fn unavailable(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set, so the Standard Webhooks verifier test must run, but {why}. `.ci/run` \
         installs them (`npm ci` in compat/standard-webhooks and `pip install --target \
         compat/standard-webhooks/python -r compat/standard-webhooks/requirements.txt`)."
    );
    eprintln!("skipped: the official Standard Webhooks verifiers test: {why}");
    crate::skipped::record(
        "the official Standard Webhooks verifiers (npm ci and pip install in \
         compat/standard-webhooks, as .ci/run does)",
    );
}

/// Each case: a delivery's headers and body, a secret, and whether it must verify.
/// Answers one verdict per case: `{"ok": bool, "error": …}`.
const NODE_SCRIPT: &str = r#"
const { Webhook } = require("standardwebhooks");
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(cases.map(({ secret, headers, body }) => {
    try {
        new Webhook(secret).verify(body, headers);
        return { ok: true };
    } catch (e) {
        return { ok: false, error: String(e) };
    }
})));
"#;

const PYTHON_SCRIPT: &str = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
out = []
for case in json.load(sys.stdin):
    try:
        Webhook(case["secret"]).verify(case["body"].encode(), case["headers"])
        out.append({"ok": True})
    except Exception as e:
        out.append({"ok": False, "error": repr(e)})
sys.stdout.write(json.dumps(out))
"#;

/// Run `program args…` with `cases` on stdin, in `dir`, with `env`; its JSON answer.
fn run_verifier(
    program: &str,
    args: &[&str],
    env: &[(&str, PathBuf)],
    cases: &Value,
) -> Vec<Value> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(compat_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("the verifier starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(cases.to_string().as_bytes())
        .expect("write the cases");
    let out = child.wait_with_output().expect("wait for the verifier");
    assert!(
        out.status.success(),
        "{program} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the verifier's JSON answer")
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

fn case(delivery: &Received, secret: &str, expect: bool, what: &str) -> Value {
    let header = |name: &str| delivery.header(name).unwrap_or_default().to_owned();
    json!({
        "what": what,
        "secret": secret,
        "expect": expect,
        "body": delivery.body_text(),
        "headers": {
            "webhook-id": header("webhook-id"),
            "webhook-timestamp": header("webhook-timestamp"),
            "webhook-signature": header("webhook-signature"),
        },
    })
}

#[tokio::test]
async fn the_official_verifiers_accept_a_delivery_a_retry_a_replay_and_a_rotation() {
    let node_package = compat_dir().join("node_modules/standardwebhooks/package.json");
    let python_package = compat_dir().join("python/standardwebhooks/webhooks.py");
    if !runs("node") {
        return unavailable("node cannot be run");
    }
    if !runs("python3") {
        return unavailable("python3 cannot be run");
    }
    if !node_package.exists() {
        return unavailable(&format!("{} is missing", node_package.display()));
    }
    if !python_package.exists() {
        return unavailable(&format!("{} is missing", python_package.display()));
    }

    // First attempt 500, then 2xx: a retry. Then a 410 and a replay of that dead letter.
    let receiver = TestReceiver::scripted(vec![Reply::status(500)], Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "q",
        &json!({ "target": receiver.url, "secret": SECRET, "signatureScheme": "standard" }),
    )
    .await
    .expect(201);
    let retried = app
        .enqueue_ok("q", &json!({ "é": "ü 😀", "n": 1.5e21 }))
        .await;
    receiver.wait_for(2).await;
    app.wait_until_gone("q", &retried).await;

    receiver.set_default(Reply::status(410));
    let replayed = app.enqueue_ok("q", &json!({ "n": 2 })).await;
    app.wait_until_error("q", &replayed).await;
    receiver.set_default(Reply::ok());
    app.retry("q", &replayed).await.expect(201);
    receiver.wait_for(4).await;
    app.wait_until_gone("q", &replayed).await;

    app.patch_queue("q", &json!({ "secret": NEW_SECRET, "rotate": "24h" }))
        .await
        .expect(200);
    let rotated = app.enqueue_ok("q", &json!({ "n": 3 })).await;
    let received = receiver.wait_for(5).await;

    let ids: Vec<&str> = received.iter().map(Received::job_id).collect();
    assert_eq!(ids, [&retried, &retried, &replayed, &replayed, &rotated]);
    // The same webhook-id on every attempt and on the replay.
    for delivery in &received {
        assert_eq!(delivery.header("webhook-id"), Some(delivery.job_id()));
    }
    let stranger = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let mut cases = Vec::new();
    for (i, delivery) in received[..4].iter().enumerate() {
        let what = ["first delivery", "retry", "dead-lettered by 410", "replay"][i];
        cases.push(case(delivery, SECRET, true, what));
        cases.push(case(delivery, NEW_SECRET, false, what));
        cases.push(case(delivery, stranger, false, what));
    }
    let during = &received[4];
    cases.push(case(during, NEW_SECRET, true, "rotation, new secret"));
    cases.push(case(during, SECRET, true, "rotation, old secret"));
    cases.push(case(during, stranger, false, "rotation, another secret"));
    // A tampered body or id fails.
    let mut tampered = case(during, NEW_SECRET, false, "rotation, body changed");
    tampered["body"] = json!(r#"{"n":4}"#);
    cases.push(tampered);
    let mut other_id = case(during, NEW_SECRET, false, "rotation, id changed");
    other_id["headers"]["webhook-id"] = json!(retried);
    cases.push(other_id);
    let cases = Value::Array(cases);

    let node = run_verifier("node", &["-e", NODE_SCRIPT], &[], &cases);
    let python = run_verifier(
        "python3",
        &["-c", PYTHON_SCRIPT],
        &[("PYTHONPATH", compat_dir().join("python"))],
        &cases,
    );
    let cases = cases.as_array().expect("an array");
    for (verifier, verdicts) in [
        ("npm standardwebhooks", node),
        ("PyPI standardwebhooks", python),
    ] {
        assert_eq!(verdicts.len(), cases.len());
        for (case, verdict) in cases.iter().zip(&verdicts) {
            assert_eq!(
                verdict["ok"], case["expect"],
                "{verifier} on {}: {verdict}",
                case["what"]
            );
        }
    }
}

/// Issue 27, "a job's whole story": the job shows the request headers its latest attempt
/// was sent with, built by the webhook client's own rule, its signatures masked: the same
/// names the worker received, the same values but for the signatures.
#[tokio::test]
async fn a_job_shows_the_headers_its_attempt_was_sent_with_signatures_masked() {
    let receiver = TestReceiver::always(Reply::with_body(500, "no")).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.put_queue(
        "q",
        &json!({ "target": receiver.url, "secret": SECRET, "signatureScheme": "both" }),
    )
    .await
    .expect(201);
    let id = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &id).await;
    let received = receiver.wait_for(1).await.remove(0);

    let job = app.get(&format!("/queue/q/{id}")).await.expect(200);
    let sent = &job["requestHeaders"];
    assert_eq!(sent["attempt"], 1, "{job}");
    let headers: Vec<(String, String)> = sent["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_owned(),
                pair[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (name, value) in &headers {
        let got = received
            .header(name)
            .unwrap_or_else(|| panic!("{name} was not sent"));
        match name.as_str() {
            "X-HYPER-SIGNATURE" | "webhook-signature" => {
                assert_eq!(value, "(signature, masked)");
                assert!(!job.to_string().contains(got), "no signature leaks");
            }
            // The time the page shows is when the attempt ended: within a second.
            "webhook-timestamp" => {
                let (shown, sent): (i64, i64) = (value.parse().unwrap(), got.parse().unwrap());
                assert!((shown - sent).abs() <= 1, "{shown} vs {sent}");
            }
            _ => assert_eq!(value, got, "{name}"),
        }
    }
    let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "X-Hookq-Job-Id",
        "X-Hookq-Attempt",
        "X-HYPER-SIGNATURE",
        "webhook-id",
        "webhook-signature",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }

    let mut visitor = crate::ui::UiVisitor::new(&app);
    let page = visitor.get(&format!("/ui/queue/q/job/{id}")).await.body;
    assert!(page.contains("Request headers of attempt 1"), "{page}");
    assert!(page.contains(r#"id="request-headers""#), "{page}");
    assert!(page.contains("(signature, masked)"), "{page}");

    // A pull queue's job was never sent with headers.
    app.put_queue("pulled", &json!({})).await.expect(201);
    let pulled = app.enqueue_ok("pulled", &json!({ "n": 2 })).await;
    let job = app
        .get(&format!("/queue/pulled/{pulled}"))
        .await
        .expect(200);
    assert!(job.get("requestHeaders").is_none(), "{job}");
}
