//! The power cut: what it takes away, and how it replays the undo record backwards.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::{Disk, Faults};
use crate::error::{Context, Error};
use crate::pages::{PAGE, Tear};
use crate::rng::Rng;
use crate::tree::{Kind, Place, Tree};

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

impl Disk {
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
