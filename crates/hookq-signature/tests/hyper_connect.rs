//! Differential test against the live `createHyperVerify` of npm `hyper-connect`: headers
//! signed here must be accepted there (and forged ones refused), and headers signed the
//! way hyper's queue signs, in Node, must be accepted here.
//!
//! Needs `node` and hyper-connect installed in `compat/hyper-connect/node_modules` of the
//! workspace (`npm ci --no-audit --no-fund` in `compat/hyper-connect`), or in
//! `$HYPER_CONNECT_DIR/node_modules`. This test never installs anything. When either is
//! missing it prints "skipping …" and passes, unless `CI` is set: then it fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hookq_signature::{SignatureHeader, header_value, verify};
use serde_json::{Value, json};

const FIVE_MIN: Duration = Duration::from_secs(5 * 60);

const SECRETS: [&str; 2] = ["s3cret", "sécret-🔑-秘密"];

/// Canonical JSON, as hookq sends it: each is exactly `JSON.stringify(JSON.parse(body))`
/// (checked in Node below). Integer-like keys come first in JavaScript's key order, so
/// `{"1":…,"b":…,"a":…}` already is in that order.
const BODIES: [&str; 4] = [
    r#"{"hello":"world"}"#,
    r#"{"1":true,"b":[1,2.5,1e+21,null],"a":"é 😀 \"\n"}"#,
    "[]",
    r#""just a string""#,
];

/// For each case: createHyperVerify's verdict on the header signed in Rust, whether the
/// body is canonical, and a header for the same secret and body signed in Node the way
/// hyper's queue signs (`t = Date.now()`, HMAC over `JSON.stringify` of the parsed body).
const SCRIPT: &str = r#"
const { createHmac } = require("crypto");
const { createHyperVerify } = require("hyper-connect");
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const results = cases.map(({ secret, header, body }) => {
    const payload = JSON.parse(body);
    let ok, detail;
    try {
        const result = createHyperVerify(secret, "5m")(header, payload);
        ok = result.ok === true;
        detail = result;
    } catch (e) {
        ok = false;
        detail = { threw: String(e) };
    }
    const t = Date.now();
    const sig = createHmac("sha256", secret).update(`${t}.${JSON.stringify(payload)}`).digest("hex");
    return {
        ok,
        detail,
        canonical: JSON.stringify(payload) === body,
        nodeHeader: `t=${t},sig=${sig}`,
    };
});
process.stdout.write(JSON.stringify(results));
"#;

/// The directory whose `node_modules` holds hyper-connect.
fn hyper_connect_dir() -> PathBuf {
    match std::env::var_os("HYPER_CONNECT_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../compat/hyper-connect"),
    }
}

/// Skips the test, or fails it when `CI` is set (CI must run it).
fn unavailable(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set, so the hyper-connect differential test must run, but {why}. \
         `.ci/run` installs hyper-connect (`npm ci --no-audit --no-fund` in \
         compat/hyper-connect); run that first."
    );
    eprintln!("skipping hyper-connect differential test: {why}");
}

#[test]
fn differential_against_hyper_connect() {
    let dir = hyper_connect_dir();
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => return unavailable(&format!("`node --version` failed: {}", out.status)),
        Err(e) => return unavailable(&format!("node cannot be run: {e}")),
    }
    let package = dir.join("node_modules/hyper-connect/package.json");
    let Ok(package) = std::fs::read_to_string(&package) else {
        return unavailable(&format!(
            "hyper-connect is not installed ({} is missing)",
            package.display()
        ));
    };
    let version: Value = serde_json::from_str(&package).expect("hyper-connect's package.json");
    eprintln!(
        "hyper-connect {} from {}",
        version["version"],
        dir.display()
    );

    let now = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_millis(),
    )
    .expect("milliseconds fit a u64");

    let mut cases = Vec::new();
    for secret in SECRETS {
        for (i, body) in BODIES.iter().enumerate() {
            let good = header_value(secret.as_bytes(), now, body.as_bytes());
            let wrong_secret = header_value(b"wrong", now, body.as_bytes());
            let other_body = BODIES[(i + 1) % BODIES.len()];
            let wrong_body = header_value(secret.as_bytes(), now, other_body.as_bytes());
            for (header, expect) in [(good, true), (wrong_secret, false), (wrong_body, false)] {
                cases.push(json!({
                    "secret": secret,
                    "body": body,
                    "header": header,
                    "expect": expect,
                }));
            }
        }
    }

    let mut child = Command::new("node")
        .args(["--input-type=commonjs", "-e", SCRIPT])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node ran a moment ago");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(Value::Array(cases.clone()).to_string().as_bytes())
        .expect("write the cases to node");
    let out = child.wait_with_output().expect("wait for node");
    assert!(
        out.status.success(),
        "node failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).expect("node's JSON answer");
    assert_eq!(results.len(), cases.len());

    for (case, result) in cases.iter().zip(&results) {
        let secret = case["secret"].as_str().expect("secret").as_bytes();
        let body = case["body"].as_str().expect("body").as_bytes();
        assert_eq!(result["canonical"], true, "body is not canonical: {case}");

        // Rust signs, hyper-connect verifies.
        assert_eq!(
            result["ok"], case["expect"],
            "createHyperVerify on {case}: {}",
            result["detail"]
        );

        // Node signs as hyper's queue does, Rust verifies a minute later.
        let node_header = result["nodeHeader"].as_str().expect("nodeHeader");
        let later = now + 60_000;
        assert_eq!(
            verify(secret, node_header, body, later, FIVE_MIN),
            Ok(()),
            "{node_header} for {case}"
        );
        let t = SignatureHeader::parse(node_header)
            .expect("Node's header parses")
            .timestamp_ms;
        assert_eq!(header_value(secret, t, body), node_header, "{case}");
    }
}
