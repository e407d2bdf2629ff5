//! The inode table: which inode number names which backing path now, as the page cache
//! sees the namespace. Inodes that no name reaches any more (unlinked, replaced by a
//! rename) wait in limbo, a hidden folder of the backing directory, until nothing can
//! bring them back: an open handle, or a directory whose unsynced change still points at
//! them.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::pages::FileLog;

/// The root's inode number, as FUSE fixes it.
pub const ROOT: u64 = 1;

/// The hidden folder at the backing root that holds limbo; never shown through the mount.
pub const HIDDEN: &str = ".forgetfs";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// Where an inode's bytes live in the backing directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Root,
    Named { parent: u64, name: OsString },
    Limbo,
}

#[derive(Debug)]
pub struct Node {
    pub kind: Kind,
    pub place: Place,
    /// The file's unsynced pages; `None` while the file is clean.
    pub log: Option<FileLog>,
    /// Open handles on it.
    pub open: u32,
}

#[derive(Debug)]
pub struct Tree {
    nodes: HashMap<u64, Node>,
    names: HashMap<(u64, OsString), u64>,
    next: u64,
}

impl Default for Tree {
    fn default() -> Self {
        Self::new(ROOT + 1)
    }
}

impl Tree {
    /// A table holding only the root, numbering new inodes from `next` (never reusing a
    /// number the kernel may still hold from before a power cut).
    pub fn new(next: u64) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                kind: Kind::Dir,
                place: Place::Root,
                log: None,
                open: 0,
            },
        );
        Self {
            nodes,
            names: HashMap::new(),
            next,
        }
    }

    /// The next number this table would give: a fresh table after a cut starts there.
    pub fn next_number(&self) -> u64 {
        self.next
    }

    pub fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub fn get_mut(&mut self, ino: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&ino)
    }

    /// The inode a name in `parent` is known as, if the table has met it.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.names.get(&(parent, name.to_owned())).copied()
    }

    /// Gives a new inode number to a name that exists in the backing directory.
    pub fn insert(&mut self, parent: u64, name: &OsStr, kind: Kind) -> u64 {
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(
            ino,
            Node {
                kind,
                place: Place::Named {
                    parent,
                    name: name.to_owned(),
                },
                log: None,
                open: 0,
            },
        );
        self.names.insert((parent, name.to_owned()), ino);
        ino
    }

    /// Moves an inode to a new place (a name, or limbo), dropping its old name.
    pub fn set_place(&mut self, ino: u64, place: Place) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        if let Place::Named { parent, name } = &node.place {
            self.names.remove(&(*parent, name.clone()));
        }
        if let Place::Named { parent, name } = &place {
            self.names.insert((*parent, name.clone()), ino);
        }
        node.place = place;
    }

    /// Forgets an inode whose backing bytes are gone.
    pub fn remove(&mut self, ino: u64) {
        self.set_place(ino, Place::Limbo);
        self.nodes.remove(&ino);
    }

    /// Forgets a name whose backing entry turned out to be gone.
    pub fn forget_name(&mut self, parent: u64, name: &OsStr) {
        if let Some(ino) = self.names.remove(&(parent, name.to_owned())) {
            self.nodes.remove(&ino);
        }
    }

    /// The inode's backing path, relative to the backing root.
    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let mut parts = Vec::new();
        let mut at = ino;
        loop {
            match &self.nodes.get(&at)?.place {
                Place::Root => break,
                Place::Limbo => {
                    parts.push(OsString::from(at.to_string()));
                    parts.push(OsString::from("limbo"));
                    parts.push(OsString::from(HIDDEN));
                    break;
                }
                Place::Named { parent, name } => {
                    parts.push(name.clone());
                    at = *parent;
                }
            }
            if parts.len() > 4096 {
                return None;
            }
        }
        Some(parts.iter().rev().collect())
    }

    /// Every inode in limbo.
    pub fn limbo(&self) -> Vec<u64> {
        let mut inos: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, node)| node.place == Place::Limbo)
            .map(|(ino, _)| *ino)
            .collect();
        inos.sort_unstable();
        inos
    }

    /// Every file inode with unsynced pages or size, by number.
    pub fn dirty_files(&self) -> Vec<u64> {
        let mut inos: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, node)| node.log.is_some())
            .map(|(ino, _)| *ino)
            .collect();
        inos.sort_unstable();
        inos
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, Place, ROOT, Tree};
    use std::ffi::OsStr;
    use std::path::PathBuf;

    #[test]
    fn paths_follow_renames_of_a_parent_and_limbo() {
        let mut tree = Tree::default();
        let dir = tree.insert(ROOT, OsStr::new("d"), Kind::Dir);
        let file = tree.insert(dir, OsStr::new("f"), Kind::File);
        assert_eq!(tree.path(file), Some(PathBuf::from("d/f")));
        tree.set_place(
            dir,
            Place::Named {
                parent: ROOT,
                name: "e".into(),
            },
        );
        assert_eq!(tree.path(file), Some(PathBuf::from("e/f")));
        assert_eq!(tree.child(ROOT, OsStr::new("d")), None);
        tree.set_place(file, Place::Limbo);
        assert_eq!(
            tree.path(file),
            Some(PathBuf::from(format!(".forgetfs/limbo/{file}")))
        );
        assert_eq!(tree.limbo(), vec![file]);
    }
}
