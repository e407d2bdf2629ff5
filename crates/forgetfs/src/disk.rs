//! The filesystem's state machine over the backing directory, one method per FUSE
//! operation (taking inode numbers and handles) plus the faults: power cut, failing
//! fsync, full disk. It needs no FUSE, so its semantics are tested directly.
//!
//! Every change lands in the backing directory at once, so reads are plain passthrough
//! and the backing directory always shows the page cache's view. What makes it forget is
//! the undo record kept beside it: each file's pre-images since its last fsync
//! ([`FileLog`]), and each directory's changed names since its last fsync, with the inode
//! each name held on disk (`None`: absent). A power cut replays that record backwards,
//! which leaves exactly what a disk would hold after a reboot.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Context, Error};
use crate::pages::{FileLog, PAGE, Tear};
use crate::rng::Rng;
use crate::tree::{HIDDEN, Kind, Place, ROOT, Tree};

/// An inode's number and what the backing directory says of it.
#[derive(Debug)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub meta: Metadata,
}

/// The injected disk faults in force.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// The next file fsync (or fdatasync) fails with `EIO`.
    pub fail_next_fsync: bool,
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

/// What a power cut took away.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CutReport {
    /// Files whose unsynced pages or size were rolled back (in part, for a torn cut).
    pub files: usize,
    /// Pages put back to their pre-image.
    pub pages: usize,
    /// Directory entries put back as they were at their directory's last fsync.
    pub entries: usize,
    /// Handles that were open and are stale now.
    pub handles: usize,
}

impl fmt::Display for CutReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "files {} pages {} entries {} stale-handles {}",
            self.files, self.pages, self.entries, self.handles
        )
    }
}

#[derive(Debug)]
struct Handle {
    ino: u64,
    file: File,
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
        self.handles.insert(fh, Handle { ino, file });
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
    /// `EIO` once and drops the pages as Linux does (see [`FileLog::fsync_failed`]).
    pub fn fsync(&mut self, fh: u64) -> Result<(), Error> {
        let handle = self.handle(fh)?;
        let ino = handle.ino;
        let size = handle
            .file
            .metadata()
            .during("reading a file's size")?
            .len();
        let node = self.tree.get_mut(ino).ok_or(Error::StaleInode(ino))?;
        if self.faults.fail_next_fsync {
            self.faults.fail_next_fsync = false;
            if let Some(log) = &mut node.log {
                log.fsync_failed();
            }
            return Err(Error::errno("fsync (injected failure)", libc::EIO));
        }
        if let Some(log) = &mut node.log
            && log.fsync_ok(size)
        {
            node.log = None;
        }
        Ok(())
    }

    pub fn mkdir(&mut self, parent: u64, name: &OsStr, mode: u32) -> Result<Attr, Error> {
        Self::check_name(parent, name)?;
        if self.child(parent, name)?.is_some() {
            return Err(Error::errno("making a directory", libc::EEXIST));
        }
        self.note_entry(parent, name)?;
        DirBuilder::new()
            .mode(mode & 0o7777)
            .create(self.dir_path(parent)?.join(name))
            .during("making a directory")?;
        let ino = self.tree.insert(parent, name, Kind::Dir);
        self.getattr(ino)
    }

    pub fn unlink(&mut self, parent: u64, name: &OsStr) -> Result<(), Error> {
        self.remove_entry(parent, name, Kind::File)
    }

    pub fn rmdir(&mut self, parent: u64, name: &OsStr) -> Result<(), Error> {
        self.remove_entry(parent, name, Kind::Dir)
    }

    fn remove_entry(&mut self, parent: u64, name: &OsStr, expected: Kind) -> Result<(), Error> {
        Self::check_name(parent, name)?;
        let ino = self
            .child(parent, name)?
            .ok_or_else(|| Error::errno("removing a name", libc::ENOENT))?;
        match (expected, self.kind(ino)?) {
            (Kind::File, Kind::Dir) => return Err(Error::errno("unlink", libc::EISDIR)),
            (Kind::Dir, Kind::File) => return Err(Error::errno("rmdir", libc::ENOTDIR)),
            (Kind::Dir, Kind::Dir) => self.check_empty(ino)?,
            (Kind::File, Kind::File) => {}
        }
        self.note_entry(parent, name)?;
        self.send_to_limbo(ino)?;
        self.collect_limbo()
    }

    fn check_empty(&self, ino: u64) -> Result<(), Error> {
        let mut entries = fs::read_dir(self.full(ino)?).during("listing a directory")?;
        match entries.next() {
            None => Ok(()),
            Some(_) => Err(Error::errno("removing a directory", libc::ENOTEMPTY)),
        }
    }

    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<(), Error> {
        Self::check_name(parent, name)?;
        Self::check_name(new_parent, new_name)?;
        let ino = self
            .child(parent, name)?
            .ok_or_else(|| Error::errno("renaming", libc::ENOENT))?;
        let replaced = self.child(new_parent, new_name)?;
        if replaced == Some(ino) {
            return Ok(());
        }
        if let Some(old) = replaced {
            if no_replace {
                return Err(Error::errno("renaming without replacing", libc::EEXIST));
            }
            match (self.kind(ino)?, self.kind(old)?) {
                (Kind::File, Kind::Dir) => return Err(Error::errno("rename", libc::EISDIR)),
                (Kind::Dir, Kind::File) => return Err(Error::errno("rename", libc::ENOTDIR)),
                (Kind::Dir, Kind::Dir) => self.check_empty(old)?,
                (Kind::File, Kind::File) => {}
            }
        }
        let to = self.dir_path(new_parent)?.join(new_name);
        self.note_entry(parent, name)?;
        self.note_entry(new_parent, new_name)?;
        if let Some(old) = replaced {
            self.send_to_limbo(old)?;
        }
        fs::rename(self.full(ino)?, &to).during("renaming")?;
        self.tree.set_place(
            ino,
            Place::Named {
                parent: new_parent,
                name: new_name.to_owned(),
            },
        );
        self.collect_limbo()
    }

    /// The directory's entries (without `.` and `..`), by name.
    pub fn readdir(&mut self, ino: u64) -> Result<Vec<(u64, Kind, OsString)>, Error> {
        let path = self.dir_path(ino)?;
        let mut names: Vec<OsString> = fs::read_dir(&path)
            .during("listing a directory")?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect::<io::Result<_>>()
            .during("listing a directory")?;
        names.sort();
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            if let Some(child) = self.child(ino, &name)? {
                entries.push((child, self.kind(child)?, name));
            }
        }
        Ok(entries)
    }

    /// Makes the directory's entries durable as they are now.
    pub fn fsyncdir(&mut self, ino: u64) -> Result<(), Error> {
        self.kind(ino)?;
        self.dirs.remove(&ino);
        self.collect_limbo()
    }

    pub fn faults(&self) -> Faults {
        self.faults
    }

    pub fn fail_next_fsync(&mut self) {
        self.faults.fail_next_fsync = true;
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

    /// Records `name`'s durable inode in `parent` before its first change since the
    /// directory's last fsync.
    fn note_entry(&mut self, parent: u64, name: &OsStr) -> Result<(), Error> {
        let known = self
            .dirs
            .get(&parent)
            .is_some_and(|names| names.contains_key(name));
        if !known {
            let durable = self.child(parent, name)?;
            self.dirs
                .entry(parent)
                .or_default()
                .insert(name.to_owned(), durable);
        }
        Ok(())
    }

    fn send_to_limbo(&mut self, ino: u64) -> Result<(), Error> {
        let from = self.full(ino)?;
        fs::rename(&from, self.limbo_dir().join(ino.to_string())).during("moving to limbo")?;
        self.tree.set_place(ino, Place::Limbo);
        Ok(())
    }

    /// Deletes the inodes in limbo that nothing can bring back: no open handle, and no
    /// directory whose unsynced change would restore them.
    fn collect_limbo(&mut self) -> Result<(), Error> {
        let wanted: HashSet<u64> = self
            .dirs
            .values()
            .flat_map(|names| names.values().flatten().copied())
            .collect();
        for ino in self.tree.limbo() {
            let Some(node) = self.tree.get(ino) else {
                continue;
            };
            if node.open > 0 || wanted.contains(&ino) {
                continue;
            }
            let path = self.full(ino)?;
            match node.kind {
                Kind::File => fs::remove_file(&path),
                Kind::Dir => fs::remove_dir_all(&path),
            }
            .during("deleting from limbo")?;
            self.tree.remove(ino);
            self.dirs.remove(&ino);
        }
        Ok(())
    }

    /// Loses power: rolls every file back to its durable pages (keeping a seeded prefix
    /// of the unsynced ones for a torn cut), every changed directory back to its entries
    /// at its last fsync, and forgets every inode number and handle the kernel holds.
    /// The processes using the mount must be dead already. Also heals the faults: the
    /// machine reboots with a working disk.
    pub fn power_cut(&mut self, tear: Tear) -> Result<CutReport, Error> {
        let mut rng = match tear {
            Tear::None => None,
            Tear::Random { seed } => Some(Rng::new(seed)),
        };
        let mut report = CutReport {
            handles: self.handles.len(),
            ..CutReport::default()
        };
        self.handles.clear();

        // Files, in path order: a seed tears the same way however inodes were numbered.
        let mut files: Vec<(PathBuf, u64)> = self
            .tree
            .dirty_files()
            .into_iter()
            .filter_map(|ino| Some((self.tree.path(ino)?, ino)))
            .collect();
        files.sort();
        for (relative, ino) in files {
            let Some(log) = self.tree.get(ino).and_then(|node| node.log.as_ref()) else {
                continue;
            };
            let file = OpenOptions::new()
                .write(true)
                .open(self.root.join(relative))
                .during("opening a file to roll back")?;
            let size = file.metadata().during("reading a file's size")?.len();
            let plan = log.plan_cut(rng.as_mut(), size);
            file.set_len(plan.final_size)
                .during("rolling back a size")?;
            report.files += 1;
            report.pages += plan.restore.len();
            for (page, mut bytes) in plan.restore {
                let start = page * PAGE;
                let end = (start + PAGE).min(plan.final_size);
                bytes.resize(usize::try_from(end - start).unwrap_or(0), 0);
                file.write_all_at(&bytes, start)
                    .during("rolling back a page")?;
            }
        }

        // Directories: first every changed name is emptied, then each gets back its
        // durable inode; whatever is left in limbo had no durable name.
        let mut changes: Vec<(u64, OsString, Option<u64>)> = std::mem::take(&mut self.dirs)
            .into_iter()
            .flat_map(|(dir, names)| names.into_iter().map(move |(n, ino)| (dir, n, ino)))
            .collect();
        changes.sort();
        report.entries = changes.len();
        for (dir, name, _) in &changes {
            if self.tree.get(*dir).is_none() {
                continue;
            }
            if let Some(now) = self.child(*dir, name)? {
                self.send_to_limbo(now)?;
            }
        }
        for (dir, name, durable) in &changes {
            let Some(ino) = durable else {
                continue;
            };
            let (Some(node), Ok(dir_path)) = (self.tree.get(*ino), self.full(*dir)) else {
                continue;
            };
            let (kind, in_limbo) = (node.kind, node.place == Place::Limbo);
            let from = self.full(*ino)?;
            let to = dir_path.join(name);
            if kind == Kind::File && !in_limbo {
                // Renamed into another directory that was synced, out of one that was
                // not: on disk both names hold it.
                fs::hard_link(&from, &to).during("restoring a second name")?;
            } else {
                fs::rename(&from, &to).during("restoring a name")?;
                let place = Place::Named {
                    parent: *dir,
                    name: name.clone(),
                };
                self.tree.set_place(*ino, place);
            }
        }
        self.empty_limbo()?;
        self.tree = Tree::new(self.tree.next_number());
        self.faults = Faults::default();
        Ok(report)
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
