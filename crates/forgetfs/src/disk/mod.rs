//! The filesystem's state machine over the backing directory, one method per FUSE
//! operation (taking inode numbers and handles) plus the faults: power cut, failing
//! fsync, full disk. It needs no FUSE, so its semantics are tested directly. Files here;
//! directory entries and limbo in `names`; the power cut in `cut`.
//!
//! Every change lands in the backing directory at once, so reads are plain passthrough
//! and the backing directory always shows the page cache's view. What makes it forget is
//! the undo record kept beside it: each file's pre-images since its last fsync
//! ([`FileLog`]), and each directory's changed names since its last fsync, with the inode
//! each name held on disk (`None`: absent). A power cut replays that record backwards,
//! which leaves exactly what a disk would hold after a reboot.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Context, Error};
use crate::pages::{FileLog, PAGE};
use crate::tree::{HIDDEN, Kind, ROOT, Tree};

mod cut;
mod names;

pub use cut::CutReport;

#[derive(Debug)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub meta: Metadata,
}

/// The injected disk faults in force.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// This many of the next file fsyncs (or fdatasyncs) fail with `EIO`.
    pub failing_fsyncs: u32,
    /// Bytes that may still be written before writes fail with `ENOSPC`.
    pub write_budget: Option<u64>,
}

/// How much is volatile now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub dirty_files: usize,
    pub dirty_pages: usize,
    pub lost_pages: usize,
    pub dirty_dirs: usize,
    pub open_handles: usize,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dirty-files {} dirty-pages {} lost-pages {} dirty-dirs {} open-handles {}",
            self.dirty_files, self.dirty_pages, self.lost_pages, self.dirty_dirs, self.open_handles
        )
    }
}

#[derive(Debug)]
struct Handle {
    ino: u64,
    file: File,
    /// An fsync through another handle of this file failed since this handle's last fsync:
    /// its next fsync reports it (Linux's `errseq_t`, since 4.13: a write-back error reaches
    /// every file description open on the file at the time, once each).
    unseen_error: bool,
}

/// The backing directory and its volatile layer.
#[derive(Debug)]
pub struct Disk {
    root: PathBuf,
    tree: Tree,
    /// For each directory changed since its last fsync: each changed name's inode on disk.
    dirs: HashMap<u64, BTreeMap<OsString, Option<u64>>>,
    handles: HashMap<u64, Handle>,
    next_handle: u64,
    faults: Faults,
}

impl Disk {
    /// Takes `root` as the disk. Whatever it holds counts as durable; a limbo left by an
    /// earlier run that ended without a cut is emptied (its inodes had no name).
    pub fn over(root: &Path) -> Result<Self, Error> {
        let root = root
            .canonicalize()
            .during("resolving the backing directory")?;
        let disk = Self {
            root,
            tree: Tree::default(),
            dirs: HashMap::new(),
            handles: HashMap::new(),
            next_handle: 1,
            faults: Faults::default(),
        };
        disk.empty_limbo()?;
        Ok(disk)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn limbo_dir(&self) -> PathBuf {
        self.root.join(HIDDEN).join("limbo")
    }

    fn empty_limbo(&self) -> Result<(), Error> {
        let limbo = self.limbo_dir();
        match fs::remove_dir_all(&limbo) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::os("emptying limbo", e)),
        }
        fs::create_dir_all(&limbo).during("creating limbo")
    }

    fn full(&self, ino: u64) -> Result<PathBuf, Error> {
        let relative = self.tree.path(ino).ok_or(Error::StaleInode(ino))?;
        Ok(self.root.join(relative))
    }

    fn kind(&self, ino: u64) -> Result<Kind, Error> {
        Ok(self.tree.get(ino).ok_or(Error::StaleInode(ino))?.kind)
    }

    fn handle(&self, fh: u64) -> Result<&Handle, Error> {
        self.handles.get(&fh).ok_or(Error::StaleHandle(fh))
    }

    fn dir_path(&self, parent: u64) -> Result<PathBuf, Error> {
        match self.kind(parent)? {
            Kind::Dir => self.full(parent),
            Kind::File => Err(Error::errno("a path through a file", libc::ENOTDIR)),
        }
    }

    fn check_name(parent: u64, name: &OsStr) -> Result<(), Error> {
        if parent == ROOT && name == HIDDEN {
            return Err(Error::errno(
                "the name of forgetfs's own folder",
                libc::EPERM,
            ));
        }
        Ok(())
    }

    /// The inode `name` in `parent` names now, if any; meets it in the table on the way.
    pub fn child(&mut self, parent: u64, name: &OsStr) -> Result<Option<u64>, Error> {
        if parent == ROOT && name == HIDDEN {
            return Ok(None);
        }
        let path = self.dir_path(parent)?.join(name);
        match fs::symlink_metadata(&path) {
            Ok(meta) => {
                if let Some(ino) = self.tree.child(parent, name) {
                    return Ok(Some(ino));
                }
                let kind = if meta.is_dir() { Kind::Dir } else { Kind::File };
                Ok(Some(self.tree.insert(parent, name, kind)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.tree.forget_name(parent, name);
                Ok(None)
            }
            Err(e) => Err(Error::os("looking up a name", e)),
        }
    }

    pub fn lookup(&mut self, parent: u64, name: &OsStr) -> Result<Attr, Error> {
        match self.child(parent, name)? {
            Some(ino) => self.getattr(ino),
            None => Err(Error::errno("looking up a name", libc::ENOENT)),
        }
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr, Error> {
        let kind = self.kind(ino)?;
        let meta = fs::symlink_metadata(self.full(ino)?).during("reading attributes")?;
        Ok(Attr { ino, kind, meta })
    }

    /// Changes size and permissions; other attributes (owner, times) are left to the
    /// backing directory as they are, and are not modelled as volatile.
    pub fn setattr(
        &mut self,
        ino: u64,
        fh: Option<u64>,
        size: Option<u64>,
        mode: Option<u32>,
    ) -> Result<Attr, Error> {
        if let Some(size) = size {
            self.truncate(ino, fh, size)?;
        }
        if let Some(mode) = mode {
            fs::set_permissions(self.full(ino)?, Permissions::from_mode(mode & 0o7777))
                .during("changing permissions")?;
        }
        self.getattr(ino)
    }

    fn truncate(&mut self, ino: u64, fh: Option<u64>, size: u64) -> Result<(), Error> {
        if self.kind(ino)? == Kind::Dir {
            return Err(Error::errno("truncating a directory", libc::EISDIR));
        }
        let opened;
        let file = match fh.and_then(|fh| self.handles.get(&fh)) {
            Some(handle) if handle.ino == ino => &handle.file,
            _ => {
                opened = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(self.full(ino)?)
                    .during("opening a file to truncate")?;
                &opened
            }
        };
        let current = file.metadata().during("reading a file's size")?.len();
        let node = self.tree.get_mut(ino).ok_or(Error::StaleInode(ino))?;
        let log = node.log.get_or_insert_with(|| FileLog::new(current));
        if size < current {
            log.touch(size, current - size, |page| read_page(file, page))
                .during("saving pages a truncation drops")?;
        }
        file.set_len(size).during("truncating")
    }

    pub fn open(&mut self, ino: u64, truncate: bool) -> Result<u64, Error> {
        if self.kind(ino)? == Kind::Dir {
            return Err(Error::errno("opening a directory as a file", libc::EISDIR));
        }
        let path = self.full(ino)?;
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(_) => File::open(&path).during("opening a file")?,
        };
        let fh = self.add_handle(ino, file);
        if truncate {
            self.truncate(ino, Some(fh), 0)?;
        }
        Ok(fh)
    }

    fn add_handle(&mut self, ino: u64, file: File) -> u64 {
        let fh = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(
            fh,
            Handle {
                ino,
                file,
                unseen_error: false,
            },
        );
        if let Some(node) = self.tree.get_mut(ino) {
            node.open += 1;
        }
        fh
    }

    /// Creates and opens a file; an existing one is opened (and truncated if asked) unless
    /// `exclusive`.
    pub fn create(
        &mut self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        exclusive: bool,
        truncate: bool,
    ) -> Result<(Attr, u64), Error> {
        Self::check_name(parent, name)?;
        if let Some(ino) = self.child(parent, name)? {
            if exclusive {
                return Err(Error::errno("creating a file", libc::EEXIST));
            }
            let fh = self.open(ino, truncate)?;
            return Ok((self.getattr(ino)?, fh));
        }
        self.note_entry(parent, name)?;
        let path = self.dir_path(parent)?.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode & 0o7777)
            .open(&path)
            .during("creating a file")?;
        let ino = self.tree.insert(parent, name, Kind::File);
        let fh = self.add_handle(ino, file);
        Ok((self.getattr(ino)?, fh))
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Error> {
        let handle = self.handle(fh)?;
        let mut buf = vec![0; size as usize];
        let mut filled = 0;
        while filled < buf.len() {
            let n = handle
                .file
                .read_at(&mut buf[filled..], offset + filled as u64)
                .during("reading")?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        buf.truncate(filled);
        Ok(buf)
    }

    /// Writes through to the backing file, saving each touched page's pre-image first.
    /// Past the write budget the write is cut short, and fails with `ENOSPC` once nothing
    /// of it fits.
    pub fn write(&mut self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Error> {
        let wanted = data.len() as u64;
        let allowed = self
            .faults
            .write_budget
            .map_or(wanted, |left| left.min(wanted));
        if allowed == 0 && wanted > 0 {
            return Err(Error::errno("writing past the byte budget", libc::ENOSPC));
        }
        let handle = self.handles.get(&fh).ok_or(Error::StaleHandle(fh))?;
        let current = handle
            .file
            .metadata()
            .during("reading a file's size")?
            .len();
        let node = self
            .tree
            .get_mut(handle.ino)
            .ok_or(Error::StaleInode(handle.ino))?;
        let log = node.log.get_or_insert_with(|| FileLog::new(current));
        log.touch(offset, allowed, |page| read_page(&handle.file, page))
            .during("saving pages a write changes")?;
        let bytes = data.get(..allowed as usize).unwrap_or(data);
        handle.file.write_all_at(bytes, offset).during("writing")?;
        if let Some(left) = &mut self.faults.write_budget {
            *left -= allowed;
        }
        u32::try_from(allowed).map_err(|_| Error::errno("a write over 4 GiB", libc::EINVAL))
    }

    pub fn flush(&self, fh: u64) -> Result<(), Error> {
        self.handle(fh).map(|_| ())
    }

    pub fn release(&mut self, fh: u64) -> Result<(), Error> {
        let handle = self.handles.remove(&fh).ok_or(Error::StaleHandle(fh))?;
        if let Some(node) = self.tree.get_mut(handle.ino) {
            node.open = node.open.saturating_sub(1);
        }
        self.collect_limbo()
    }

    /// Makes the file's pages and size durable, or, when a failure is armed, answers
    /// `EIO` once and drops the pages as Linux does (see [`FileLog::fsync_failed`]). The
    /// other handles open on the file then answer `EIO` once each at their next fsync,
    /// which still syncs what was written since.
    pub fn fsync(&mut self, fh: u64) -> Result<(), Error> {
        let handle = self.handle(fh)?;
        let ino = handle.ino;
        let size = handle
            .file
            .metadata()
            .during("reading a file's size")?
            .len();
        let node = self.tree.get_mut(ino).ok_or(Error::StaleInode(ino))?;
        if self.faults.failing_fsyncs > 0 {
            self.faults.failing_fsyncs -= 1;
            if let Some(log) = &mut node.log {
                log.fsync_failed();
            }
            for (other, handle) in &mut self.handles {
                handle.unseen_error |= handle.ino == ino && *other != fh;
            }
            return Err(Error::errno("fsync (injected failure)", libc::EIO));
        }
        if let Some(log) = &mut node.log
            && log.fsync_ok(size)
        {
            node.log = None;
        }
        let handle = self.handles.get_mut(&fh).ok_or(Error::StaleHandle(fh))?;
        if std::mem::take(&mut handle.unseen_error) {
            return Err(Error::errno(
                "fsync (an earlier failure through another handle)",
                libc::EIO,
            ));
        }
        Ok(())
    }

    pub fn faults(&self) -> Faults {
        self.faults
    }

    pub fn fail_next_fsync(&mut self) {
        self.fail_fsyncs(1);
    }

    /// The next `count` file fsyncs fail (added to those already armed): a disk failing for
    /// a while.
    pub fn fail_fsyncs(&mut self, count: u32) {
        self.faults.failing_fsyncs = self.faults.failing_fsyncs.saturating_add(count);
    }

    pub fn fail_writes_after(&mut self, bytes: u64) {
        self.faults.write_budget = Some(bytes);
    }

    pub fn heal(&mut self) {
        self.faults = Faults::default();
    }

    pub fn status(&self) -> Status {
        let logs = || {
            self.tree
                .dirty_files()
                .into_iter()
                .filter_map(|ino| self.tree.get(ino)?.log.as_ref())
        };
        Status {
            dirty_files: logs().count(),
            dirty_pages: logs().map(FileLog::dirty_pages).sum(),
            lost_pages: logs().map(FileLog::lost_pages).sum(),
            dirty_dirs: self.dirs.len(),
            open_handles: self.handles.len(),
        }
    }
}

/// The backing file's bytes in one page (short at its end).
fn read_page(file: &File, page: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; PAGE as usize];
    let mut filled = 0;
    while filled < buf.len() {
        let n = file.read_at(&mut buf[filled..], page * PAGE + filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    buf.truncate(filled);
    Ok(buf)
}
