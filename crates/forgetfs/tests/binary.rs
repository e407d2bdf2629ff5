//! The `forgetfs` binary as a chaos harness drives it: `mount` with a control socket in
//! one process, `ctl` commands from another.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_forgetfs");

fn ctl(socket: &Path, command: &[&str]) -> Result<String, String> {
    let out = Command::new(BIN)
        .arg("ctl")
        .arg(socket)
        .args(command)
        .output()
        .expect("forgetfs ctl runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_owned();
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        Err(text(&out.stderr))
    }
}

/// Waits for the control socket, which appears once the mount is up.
fn wait_for(socket: &Path, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("forgetfs mount exited: {status}"));
        }
        if Instant::now() > deadline {
            return Err("no control socket after 10 s".into());
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

#[test]
fn the_binary_cuts_and_unmounts_on_command() {
    // Only to learn whether this machine can mount; the binary mounts elsewhere.
    let Some(probe) = common::mount() else { return };
    drop(probe);
    let dirs = tempfile::tempdir().expect("a temporary directory");
    let (backing, point, socket) = (
        dirs.path().join("backing"),
        dirs.path().join("mnt"),
        dirs.path().join("control.sock"),
    );
    fs::create_dir_all(&backing).expect("backing directory");
    let mut child = Command::new(BIN)
        .arg("mount")
        .args([&backing, &point])
        .arg("--control")
        .arg(&socket)
        .spawn()
        .expect("forgetfs mount starts");
    if let Err(e) = wait_for(&socket, &mut child) {
        let _ = child.kill();
        panic!("{e}");
    }
    fs::write(point.join("unsynced"), b"gone at the cut").expect("write");
    let status = ctl(&socket, &["status"]).expect("status");
    assert!(status.contains("dirty-dirs 1"), "{status}");
    assert!(ctl(&socket, &["explode"]).is_err());
    let report = ctl(&socket, &["cut-torn", "9"]).expect("cut");
    assert!(report.starts_with("files "), "{report}");
    assert!(!point.join("unsynced").exists());
    ctl(&socket, &["unmount"]).expect("unmount");
    let exit = child.wait().expect("forgetfs mount exits");
    assert!(exit.success(), "{exit}");
}
