//! The FUSE glue: translates each kernel request into a [`Disk`] call and its answer into
//! a reply. No semantics live here. Entry and attribute TTLs are zero so the kernel asks
//! again after a power cut instead of trusting what it cached; files are opened without
//! `direct_io` (SQLite's `-shm` needs shared `mmap`) and without `keep_cache`, so each
//! open drops the kernel's cached pages.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::disk::{Attr, Disk};
use crate::error::Error;
use crate::pages::PAGE;
use crate::tree::Kind;

const TTL: Duration = Duration::ZERO;

/// The filesystem the FUSE session runs; shares its [`Disk`] with the controller.
pub struct ForgetFs {
    disk: Arc<Mutex<Disk>>,
}

impl ForgetFs {
    pub fn new(disk: Arc<Mutex<Disk>>) -> Self {
        Self { disk }
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        // A panic while holding the lock leaves the model as it was at the panic; serving
        // on is better than taking the mount down with it.
        self.disk
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The errno for a failure; with `FORGETFS_TRACE` set, each failure is also printed.
fn errno(error: &Error) -> Errno {
    if std::env::var_os("FORGETFS_TRACE").is_some() {
        eprintln!("forgetfs: answering {}: {error}", error.errno_code());
    }
    Errno::from_i32(error.errno_code())
}

fn kind(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
    }
}

fn time(seconds: i64, nanos: i64) -> SystemTime {
    let nanos = u32::try_from(nanos).unwrap_or(0);
    match u64::try_from(seconds) {
        Ok(s) => UNIX_EPOCH + Duration::new(s, nanos),
        Err(_) => UNIX_EPOCH,
    }
}

fn file_attr(attr: &Attr) -> FileAttr {
    let meta = &attr.meta;
    FileAttr {
        ino: INodeNo(attr.ino),
        size: meta.size(),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: kind(attr.kind),
        perm: u16::try_from(meta.mode() & 0o7777).unwrap_or(0o600),
        nlink: match attr.kind {
            Kind::File => 1,
            Kind::Dir => 2,
        },
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: 0,
        blksize: PAGE as u32,
        flags: 0,
    }
}

fn reply_entry(result: Result<Attr, Error>, reply: ReplyEntry) {
    match result {
        Ok(attr) => reply.entry(&TTL, &file_attr(&attr), Generation(0)),
        Err(e) => reply.error(errno(&e)),
    }
}

fn reply_attr(result: Result<Attr, Error>, reply: ReplyAttr) {
    match result {
        Ok(attr) => reply.attr(&TTL, &file_attr(&attr)),
        Err(e) => reply.error(errno(&e)),
    }
}

fn reply_empty(result: Result<(), Error>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

impl Filesystem for ForgetFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        reply_entry(self.disk().lookup(parent.0, name), reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply_attr(self.disk().getattr(ino.0), reply);
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = self.disk().setattr(ino.0, fh.map(|fh| fh.0), size, mode);
        reply_attr(result, reply);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        reply_entry(self.disk().mkdir(parent.0, name, mode & !umask), reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(self.disk().unlink(parent.0, name), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(self.disk().rmdir(parent.0, name), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            reply.error(Errno::EINVAL);
            return;
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let result = self
            .disk()
            .rename(parent.0, name, newparent.0, newname, no_replace);
        reply_empty(result, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let truncate = flags.0 & libc::O_TRUNC != 0;
        match self.disk().open(ino.0, truncate) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.disk().read(fh.0, offset, size) {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.disk().write(fh.0, offset, data) {
            Ok(written) => reply.written(written),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply_empty(self.disk().flush(fh.0), reply);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // A handle from before a power cut is already gone: releasing it is no error.
        match self.disk().release(fh.0) {
            Ok(()) | Err(Error::StaleHandle(_)) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(self.disk().fsync(fh.0), reply);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.disk().readdir(ino.0) {
            Ok(entries) => entries,
            Err(e) => {
                reply.error(errno(&e));
                return;
            }
        };
        let dots = [
            (ino.0, FileType::Directory, OsStr::new(".")),
            (ino.0, FileType::Directory, OsStr::new("..")),
        ];
        let all = dots.into_iter().chain(
            entries
                .iter()
                .map(|(child, k, name)| (*child, kind(*k), name.as_os_str())),
        );
        for (index, (child, file_type, name)) in all.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), index as u64 + 1, file_type, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(self.disk().fsyncdir(ino.0), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // A fixed 64 GiB disk, or what the write budget leaves of it.
        let total: u64 = 1 << 24;
        let free = self
            .disk()
            .faults()
            .write_budget
            .map_or(total, |left| (left / PAGE).min(total));
        reply.statfs(
            total,
            free,
            free,
            1 << 20,
            1 << 20,
            PAGE as u32,
            255,
            PAGE as u32,
        );
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let exclusive = flags & libc::O_EXCL != 0;
        let truncate = flags & libc::O_TRUNC != 0;
        let result = self
            .disk()
            .create(parent.0, name, mode & !umask, exclusive, truncate);
        match result {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &file_attr(&attr),
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }
}
