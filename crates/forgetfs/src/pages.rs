//! The volatile layer of one file: which pages changed since its last successful fsync,
//! what the disk holds under each (its pre-image), and what a power cut leaves of them.
//!
//! Pure bookkeeping, no I/O: the caller reads pre-images from the backing file and applies
//! a [`CutPlan`]. The backing file always holds the page-cache view (every write lands
//! there at once); this log is the undo record that turns it back into the disk's view.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use crate::rng::Rng;

/// The unit of tearing and of write-back, as in the Linux page cache.
pub const PAGE: u64 = 4096;

/// One page changed since the last successful fsync.
#[derive(Debug, Clone)]
struct Page {
    /// The page's durable bytes (shorter than a page where the durable file ends inside it,
    /// empty past the durable end).
    pre: Vec<u8>,
    /// An fsync covering this page failed: Linux marked it clean without writing it, so
    /// no later fsync writes it either, and the disk keeps `pre` (fsyncgate). Writing to
    /// the page again dirties it again.
    lost: bool,
}

/// The unsynced state of one file.
#[derive(Debug, Clone)]
pub struct FileLog {
    durable_size: u64,
    pages: BTreeMap<u64, Page>,
    /// Dirty (not lost) pages in the order they were first written since the last fsync:
    /// a torn cut keeps a prefix of this order.
    order: Vec<u64>,
}

/// What a power cut leaves of one file: its size, and the pages to put back to their
/// pre-image (each written at `page * PAGE`, then zero-filled to the page's end or the
/// file's end).
#[derive(Debug, PartialEq, Eq)]
pub struct CutPlan {
    pub final_size: u64,
    pub restore: Vec<(u64, Vec<u8>)>,
}

/// How much of the unsynced data a power cut keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tear {
    /// Every unsynced write is lost.
    None,
    /// Each file keeps a random prefix (in write order) of its unsynced pages, whole pages
    /// only; the seed makes the choice repeatable.
    Random { seed: u64 },
}

impl FileLog {
    /// A log for a file whose disk size is `durable_size` and whose pages are all clean.
    pub fn new(durable_size: u64) -> Self {
        Self {
            durable_size,
            pages: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    pub fn durable_size(&self) -> u64 {
        self.durable_size
    }

    /// Pages written since the last fsync and not yet written back.
    pub fn dirty_pages(&self) -> usize {
        self.order.len()
    }

    /// Pages a failed fsync dropped: clean in the cache, old on disk.
    pub fn lost_pages(&self) -> usize {
        self.pages.values().filter(|p| p.lost).count()
    }

    /// Records that the bytes `[offset, offset + len)` are about to change (a write, or a
    /// truncation over them). `read_pre` reads the backing file's current page, which is
    /// still the durable page when the log has no record of it.
    pub fn touch(
        &mut self,
        offset: u64,
        len: u64,
        mut read_pre: impl FnMut(u64) -> io::Result<Vec<u8>>,
    ) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let first = offset / PAGE;
        let last = (offset + len - 1) / PAGE;
        for page in first..=last {
            match self.pages.get_mut(&page) {
                Some(known) if known.lost => {
                    known.lost = false;
                    self.order.push(page);
                }
                Some(_) => {}
                None => {
                    let durable_here = self.durable_size.saturating_sub(page * PAGE).min(PAGE);
                    let mut pre = if durable_here == 0 {
                        Vec::new()
                    } else {
                        read_pre(page)?
                    };
                    pre.truncate(usize::try_from(durable_here).unwrap_or(usize::MAX));
                    self.pages.insert(page, Page { pre, lost: false });
                    self.order.push(page);
                }
            }
        }
        Ok(())
    }

    /// An fsync succeeded with the file at `current_size`: dirty pages and the size are
    /// on disk now; lost pages stay lost. Returns whether the log is empty (the file is
    /// fully clean).
    pub fn fsync_ok(&mut self, current_size: u64) -> bool {
        self.pages.retain(|_, page| page.lost);
        self.order.clear();
        self.durable_size = current_size;
        self.pages.is_empty()
    }

    /// An fsync failed: as Linux does after a write-back error, the dirty pages are
    /// marked clean without reaching the disk, and the size stays as it was.
    pub fn fsync_failed(&mut self) {
        for page in self.pages.values_mut() {
            page.lost = true;
        }
        self.order.clear();
    }

    /// What a power cut leaves of this file, whose page-cache size is `current_size`.
    pub fn plan_cut(&self, tear: Option<&mut Rng>, current_size: u64) -> CutPlan {
        let dirty = self.order.len() as u64;
        let kept_count = match tear {
            Some(rng) => usize::try_from(rng.up_to(dirty)).unwrap_or(usize::MAX),
            None => 0,
        };
        let kept: BTreeSet<u64> = self.order.iter().take(kept_count).copied().collect();
        let everything_kept = dirty > 0 && kept.len() == self.order.len() && self.lost_pages() == 0;
        let final_size = if everything_kept {
            current_size
        } else {
            let kept_end = kept
                .last()
                .map_or(0, |page| ((page + 1) * PAGE).min(current_size));
            self.durable_size.max(kept_end)
        };
        let restore = self
            .pages
            .iter()
            .filter(|(page, _)| !kept.contains(page) && **page * PAGE < final_size)
            .map(|(page, p)| (*page, p.pre.clone()))
            .collect();
        CutPlan {
            final_size,
            restore,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CutPlan, FileLog, PAGE};
    use crate::rng::Rng;

    /// A file in memory: the backing bytes a test writes through, as the filesystem does.
    struct Model {
        bytes: Vec<u8>,
        log: FileLog,
    }

    impl Model {
        fn new(durable: &[u8]) -> Self {
            Self {
                bytes: durable.to_vec(),
                log: FileLog::new(durable.len() as u64),
            }
        }

        fn write(&mut self, offset: usize, data: &[u8]) {
            let bytes = self.bytes.clone();
            self.log
                .touch(offset as u64, data.len() as u64, |page| {
                    let start = (page * PAGE) as usize;
                    let end = (start + PAGE as usize).min(bytes.len());
                    Ok(bytes.get(start..end).unwrap_or_default().to_vec())
                })
                .expect("reading from memory cannot fail");
            if self.bytes.len() < offset + data.len() {
                self.bytes.resize(offset + data.len(), 0);
            }
            self.bytes[offset..offset + data.len()].copy_from_slice(data);
        }

        fn cut(&mut self, rng: Option<&mut Rng>) -> Vec<u8> {
            let CutPlan {
                final_size,
                restore,
            } = self.log.plan_cut(rng, self.bytes.len() as u64);
            let mut disk = self.bytes.clone();
            disk.resize(final_size as usize, 0);
            for (page, pre) in restore {
                let start = (page * PAGE) as usize;
                let end = (start + PAGE as usize).min(disk.len());
                disk[start..end].fill(0);
                disk[start..start + pre.len()].copy_from_slice(&pre);
            }
            disk
        }
    }

    #[test]
    fn an_unsynced_write_is_undone_and_a_synced_one_kept() {
        let mut file = Model::new(b"durable");
        file.write(0, b"DURABLE and more");
        assert_eq!(file.cut(None), b"durable");
        let size = file.bytes.len() as u64;
        assert!(file.log.fsync_ok(size));
        assert_eq!(file.cut(None), b"DURABLE and more");
    }

    #[test]
    fn a_torn_cut_keeps_a_prefix_of_whole_pages_in_write_order() {
        let page = PAGE as usize;
        let written = [2, 0, 3, 1];
        let mut kept_counts = std::collections::BTreeSet::new();
        for seed in 0..32 {
            let mut file = Model::new(&vec![b'o'; 4 * page]);
            for index in written {
                file.write(index * page + 10, &[b'n'; 100]);
            }
            let disk = file.cut(Some(&mut Rng::new(seed)));
            let old = vec![b'o'; page];
            let mut new = old.clone();
            new[10..110].fill(b'n');
            let survived: Vec<bool> = written
                .iter()
                .map(|index| {
                    let chunk = &disk[index * page..(index + 1) * page];
                    assert!(
                        chunk == old || chunk == new,
                        "seed {seed}: a page was split"
                    );
                    chunk == new
                })
                .collect();
            let kept = survived.iter().take_while(|n| **n).count();
            assert!(
                survived[kept..].iter().all(|n| !n),
                "seed {seed}: {survived:?}"
            );
            kept_counts.insert(kept);
        }
        assert!(kept_counts.len() > 2, "the seeds tear at different places");
    }

    #[test]
    fn a_failed_fsync_loses_its_pages_for_good_until_they_are_written_again() {
        let mut file = Model::new(&vec![b'o'; 2 * PAGE as usize]);
        file.write(0, b"first");
        file.write(PAGE as usize, b"second");
        file.log.fsync_failed();
        let size = file.bytes.len() as u64;
        assert!(!file.log.fsync_ok(size), "lost pages stay recorded");
        file.write(PAGE as usize, b"SECOND");
        assert!(!file.log.fsync_ok(size));
        let disk = file.cut(None);
        assert_eq!(
            &disk[..5],
            b"ooooo",
            "the page the failed fsync covered is lost"
        );
        assert_eq!(&disk[PAGE as usize..PAGE as usize + 6], b"SECOND");
    }

    #[test]
    fn growth_past_the_durable_end_is_cut_back() {
        let mut file = Model::new(b"abc");
        file.write(3 * PAGE as usize, b"far away");
        assert_eq!(file.cut(None), b"abc");
    }
}
