//! forgetfs: a FUSE filesystem that forgets what was not fsynced, for power-loss and
//! failing-disk tests. It passes through to a backing directory and, on command, loses
//! power (drops or tears unsynced writes, undoes unsynced directory changes), fails the
//! next fsync with `EIO` (fsyncgate semantics), or fails writes with `ENOSPC`.
//!
//! - [`pages`]: one file's unsynced pages and what a cut leaves of them (pure model).
//! - [`tree`]: inode numbers ↔ backing paths, and limbo for unlinked inodes.
//! - [`disk`]: every operation and fault over the backing directory, the power cut;
//!   testable without FUSE.
//! - [`fs`]: the FUSE glue (fuser) over a [`disk::Disk`].
//! - [`control`]: the [`Controller`] handle, the command language and its Unix socket.
//! - [`mount`]: [`Mount`], a mount in this process, unmounted on drop.
//! - [`scratch`]: [`ScratchMount`], one over temporary directories, and the skip rule of
//!   tests on machines that cannot mount.
//! - [`rng`], [`error`]: the seeded generator behind tears, the error type.

pub mod control;
pub mod disk;
pub mod error;
pub mod fs;
pub mod mount;
pub mod pages;
pub mod rng;
pub mod scratch;
pub mod tree;

pub use control::{Command, Controller};
pub use disk::{CutReport, Disk, Faults, Status};
pub use error::Error;
pub use mount::Mount;
pub use pages::Tear;
pub use scratch::ScratchMount;
