//! A mounted forgetfs in this process: [`Mount::new`] starts the FUSE session on a
//! background thread of fuser's; dropping the [`Mount`] unmounts it.

use std::fs;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fuser::{BackgroundSession, Config, MountOption};

use crate::control::Controller;
use crate::disk::Disk;
use crate::error::Error;
use crate::fs::ForgetFs;

/// A forgetfs mounted over a backing directory. Derefs to its [`Controller`]:
/// `mount.power_cut(Tear::None)`, `mount.fail_next_fsync()`, ….
pub struct Mount {
    controller: Controller,
    mountpoint: PathBuf,
    session: Option<BackgroundSession>,
}

impl Mount {
    /// Mounts `backing` at `mountpoint` (created if missing). Needs `/dev/fuse` and the
    /// right to mount (root, or `fusermount3`).
    pub fn new(backing: impl AsRef<Path>, mountpoint: impl AsRef<Path>) -> Result<Self, Error> {
        let mountpoint = mountpoint.as_ref().to_path_buf();
        let failed = |source| Error::Mount {
            what: "cannot mount",
            mountpoint: mountpoint.display().to_string(),
            source,
        };
        fs::create_dir_all(&mountpoint).map_err(failed)?;
        let mountpoint = mountpoint.canonicalize().map_err(failed)?;
        let disk = Arc::new(Mutex::new(Disk::over(backing.as_ref())?));
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("forgetfs".into()),
            MountOption::Subtype("forgetfs".into()),
            MountOption::RW,
            MountOption::NoAtime,
        ];
        let session = fuser::spawn_mount(ForgetFs::new(Arc::clone(&disk)), &mountpoint, &config)
            .map_err(failed)?;
        Ok(Self {
            controller: Controller::new(disk),
            mountpoint,
            session: Some(session),
        })
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// A handle on the faults that outlives no mount: for a thread that cuts while another
    /// writes.
    pub fn controller(&self) -> Controller {
        self.controller.clone()
    }

    /// Whether the session still serves (an outside `fusermount3 -u` ends it).
    pub fn is_mounted(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|session| !session.guard.is_finished())
    }

    /// Unmounts, reporting a failure that dropping would swallow. An unmount is a clean
    /// shutdown: what is volatile stays in the backing directory, as a synced disk would.
    /// A mount still in use (a file open on it) is detached lazily instead: gone from
    /// the namespace at once, served until its last file closes.
    pub fn unmount(mut self) -> Result<(), Error> {
        self.end()
    }

    fn end(&mut self) -> Result<(), Error> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        // Unmounted from outside (`fusermount3 -u`): only the thread is left to join.
        if session.guard.is_finished() {
            return session
                .join()
                .map_err(|source| self.failed("cannot unmount", source));
        }
        match session.umount_and_join() {
            Ok(()) => Ok(()),
            // Busy (a file still open on it): detach it now, so it never stays behind
            // dangling once this process exits; the session thread ends with the last
            // file closed.
            Err(busy) if busy.raw_os_error() == Some(libc::EBUSY) => {
                nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH)
                    .map_err(|errno| self.failed("cannot detach", errno.into()))
            }
            Err(source) => Err(self.failed("cannot unmount", source)),
        }
    }

    fn failed(&self, what: &'static str, source: std::io::Error) -> Error {
        Error::Mount {
            what,
            mountpoint: self.mountpoint.display().to_string(),
            source,
        }
    }
}

impl Deref for Mount {
    type Target = Controller;

    fn deref(&self) -> &Controller {
        &self.controller
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.end() {
            eprintln!("forgetfs: {e}");
        }
    }
}
