//! The binary's command line: `--help`, `--version`, and start-up validation.

use std::process::{Command, Output};

fn hookq(args: &[&str], env: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_hookq"))
        .args(args)
        .env("HOOKQ_DB", dir.path().join("hookq.db"))
        .env_remove("HOOKQ_API_KEY")
        .env_remove("HOOKQ_LISTEN")
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .output()
        .expect("run the hookq binary")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn help_documents_every_flag_and_its_environment_variable() {
    let output = hookq(&["--help"], &[]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--listen",
        "HOOKQ_LISTEN",
        "127.0.0.1:6363",
        "--db",
        "HOOKQ_DB",
        "--api-key",
        "HOOKQ_API_KEY",
        "HOOKQ_MAX_ATTEMPTS",
        "HOOKQ_BACKOFF",
        "1s,5s,15s,30s,60s",
        "HOOKQ_DELIVERY_TIMEOUT",
        "HOOKQ_LEASE_TIMEOUT",
        "HOOKQ_MAX_IN_FLIGHT",
        "HOOKQ_MAX_JOB_BYTES",
        "262144",
    ] {
        assert!(help.contains(flag), "--help mentions {flag}:\n{help}");
    }
}

#[test]
fn version_prints_the_version() {
    let output = hookq(&["--version"], &[]);
    assert!(output.status.success());
    let version = String::from_utf8_lossy(&output.stdout);
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");
}

#[test]
fn an_open_server_refuses_a_non_loopback_address() {
    let output = hookq(&["--listen", "0.0.0.0:0"], &[]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("without an API key"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn invalid_settings_are_refused_at_start_up_with_a_clear_message() {
    let output = hookq(
        &["--listen", "127.0.0.1:0"],
        &[
            ("HOOKQ_DELIVERY_TIMEOUT", "10s"),
            ("HOOKQ_LEASE_TIMEOUT", "5s"),
        ],
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("HOOKQ_LEASE_TIMEOUT"),
        "{}",
        stderr(&output)
    );

    let output = hookq(
        &["--listen", "127.0.0.1:0"],
        &[("HOOKQ_BACKOFF", "1s,soon")],
    );
    assert!(!output.status.success());
    assert!(stderr(&output).contains("soon"), "{}", stderr(&output));
}

#[test]
fn dispatch_can_be_turned_off_with_the_flag() {
    let output = hookq(&["--dispatch", "off", "--listen", "0.0.0.0:0"], &[]);
    // It gets past argument parsing to the (expected) non-loopback refusal.
    assert!(
        stderr(&output).contains("without an API key"),
        "{}",
        stderr(&output)
    );
}
