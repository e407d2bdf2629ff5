//! A forgetfs mounted over two private temporary directories (the disk and the
//! mountpoint), for tests and crash harnesses; and the rule for tests on machines that
//! cannot mount one: skip with a notice, except under `CI=true`, where they must run.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::mount::Mount;

/// A mounted forgetfs over temporary directories; unmounted before they are removed.
pub struct ScratchMount {
    // Fields drop in order: the mount first, then its directories.
    mount: Mount,
    point: tempfile::TempDir,
    _backing: tempfile::TempDir,
}

impl ScratchMount {
    /// Mounts one, or says why this machine cannot (no `/dev/fuse`, not root and no
    /// `fusermount3`, …).
    pub fn new() -> Result<Self, Error> {
        let scratch = |source| Error::Os {
            what: "creating a temporary directory",
            source,
        };
        if !Path::new("/dev/fuse").exists() {
            return Err(Error::Os {
                what: "opening /dev/fuse",
                source: std::io::ErrorKind::NotFound.into(),
            });
        }
        let backing = tempfile::tempdir().map_err(scratch)?;
        let point = tempfile::tempdir().map_err(scratch)?;
        let mount = Mount::new(backing.path(), point.path())?;
        Ok(Self {
            mount,
            point,
            _backing: backing,
        })
    }

    /// For a test: the mount, or `None` after printing "skipped" and why. With `CI=true`
    /// a machine that cannot mount one fails the test instead (CI runs as root with
    /// `/dev/fuse`: there these tests must run).
    pub fn for_test() -> Option<Self> {
        let reason = match Self::new() {
            Ok(mounted) => return Some(mounted),
            Err(reason) => reason,
        };
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!("CI=true, and forgetfs cannot be mounted here: {reason}");
        }
        // Straight to the stream: libtest would swallow a passing test's `println!`.
        eprintln!("skipped: cannot mount forgetfs: {reason}");
        None
    }

    /// The mountpoint.
    pub fn point(&self) -> &Path {
        self.point.path()
    }

    /// A path under the mountpoint.
    pub fn at(&self, relative: &str) -> PathBuf {
        self.point.path().join(relative)
    }
}

impl Deref for ScratchMount {
    type Target = Mount;

    fn deref(&self) -> &Mount {
        &self.mount
    }
}
