//! What the FUSE tests share: a forgetfs mounted over private temporary directories, or a
//! skip where this machine cannot mount one (a failure instead when `CI=true`).
#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use forgetfs::Mount;

/// A mounted forgetfs; the mount is dropped (unmounted) before its directories.
pub struct Mounted {
    pub mount: Mount,
    pub point: tempfile::TempDir,
    /// Held for its lifetime: the disk under the mount.
    pub _backing: tempfile::TempDir,
}

impl Mounted {
    /// A path under the mountpoint.
    pub fn at(&self, relative: &str) -> PathBuf {
        self.point.path().join(relative)
    }
}

/// Mounts a forgetfs, or answers `None` after printing why it is skipped. With `CI=true`
/// a machine that cannot mount fails the test instead: CI runs as root with `/dev/fuse`.
pub fn mount() -> Option<Mounted> {
    let reason = match try_mount() {
        Ok(mounted) => return Some(mounted),
        Err(reason) => reason,
    };
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("CI=true, and forgetfs cannot be mounted here: {reason}");
    }
    // Straight to the stream: libtest would swallow a passing test's `println!`.
    let _ = writeln!(
        std::io::stderr(),
        "skipped: cannot mount forgetfs: {reason}"
    );
    None
}

fn try_mount() -> Result<Mounted, String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("no /dev/fuse".into());
    }
    let backing = tempfile::tempdir().map_err(|e| e.to_string())?;
    let point = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mount = Mount::new(backing.path(), point.path()).map_err(|e| e.to_string())?;
    Ok(Mounted {
        mount,
        point,
        _backing: backing,
    })
}

/// fsyncs a directory, as a program must after creating, renaming or removing in it.
pub fn sync_dir(path: &Path) {
    File::open(path)
        .and_then(|dir| dir.sync_all())
        .expect("fsync of a directory");
}
