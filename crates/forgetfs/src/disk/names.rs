//! Directory entries: mkdir, unlink, rmdir, rename, listing and directory fsync; the
//! record of each changed name's durable inode; limbo and its collection.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::DirBuilderExt;

use super::{Attr, Disk};
use crate::error::{Context, Error};
use crate::tree::{Kind, Place};

impl Disk {
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

    /// Records `name`'s durable inode in `parent` before its first change since the
    /// directory's last fsync.
    pub(super) fn note_entry(&mut self, parent: u64, name: &OsStr) -> Result<(), Error> {
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

    pub(super) fn send_to_limbo(&mut self, ino: u64) -> Result<(), Error> {
        let from = self.full(ino)?;
        fs::rename(&from, self.limbo_dir().join(ino.to_string())).during("moving to limbo")?;
        self.tree.set_place(ino, Place::Limbo);
        Ok(())
    }

    /// Deletes the inodes in limbo that nothing can bring back: no open handle, and no
    /// directory whose unsynced change would restore them.
    pub(super) fn collect_limbo(&mut self) -> Result<(), Error> {
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
}
