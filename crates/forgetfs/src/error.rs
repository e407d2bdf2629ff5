//! The one error type of forgetfs: what an operation on the volatile layer or the backing
//! directory can fail with, and the errno each failure answers the kernel with.

use std::io;

/// An operation's failure. `Os` carries an errno for the FUSE reply; the others are the
/// failures of the control surface (mounting, the control socket).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A failure the filesystem answers with this errno (`ENOENT`, `EIO` from an injected
    /// fsync failure, `ENOSPC` past the write budget, …).
    #[error("{what}: {source}")]
    Os {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// An inode number the kernel still holds from before a power cut, or never had.
    #[error("stale inode {0}")]
    StaleInode(u64),
    /// A file handle opened before a power cut (its process is "dead"), or never opened.
    #[error("stale file handle {0}")]
    StaleHandle(u64),
    /// Mounting or unmounting failed.
    #[error("{what} {mountpoint}: {source}")]
    Mount {
        what: &'static str,
        mountpoint: String,
        #[source]
        source: io::Error,
    },
    /// The control channel failed or was sent a line it does not understand.
    #[error("control: {0}")]
    Control(String),
}

impl Error {
    /// Wraps an I/O failure with the step that met it.
    pub fn os(what: &'static str, source: io::Error) -> Self {
        Self::Os { what, source }
    }

    /// A failure made of a bare errno.
    pub fn errno(what: &'static str, errno: i32) -> Self {
        Self::os(what, io::Error::from_raw_os_error(errno))
    }

    /// The errno the kernel is answered with.
    pub fn errno_code(&self) -> i32 {
        match self {
            Self::Os { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Self::StaleInode(_) => libc::ESTALE,
            Self::StaleHandle(_) => libc::EBADF,
            Self::Mount { .. } | Self::Control(_) => libc::EIO,
        }
    }
}

/// Attaches the step that failed to an `io::Result`.
pub trait Context<T> {
    fn during(self, what: &'static str) -> Result<T, Error>;
}

impl<T> Context<T> for io::Result<T> {
    fn during(self, what: &'static str) -> Result<T, Error> {
        self.map_err(|source| Error::os(what, source))
    }
}
