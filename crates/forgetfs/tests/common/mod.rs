//! What the FUSE tests share: a forgetfs mounted over private temporary directories, or a
//! skip where this machine cannot mount one (a failure instead when `CI=true`).
#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::fs::File;
use std::path::Path;

use forgetfs::ScratchMount;

/// A mounted forgetfs over private temporary directories, or `None` after printing why
/// the test is skipped (a failure instead under `CI=true`).
pub fn mount() -> Option<ScratchMount> {
    ScratchMount::for_test()
}

/// fsyncs a directory, as a program must after creating, renaming or removing in it.
pub fn sync_dir(path: &Path) {
    File::open(path)
        .and_then(|dir| dir.sync_all())
        .expect("fsync of a directory");
}
