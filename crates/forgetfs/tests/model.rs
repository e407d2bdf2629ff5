//! Random operation sequences on [`Disk`] against a reference model of a disk with a page
//! cache: inodes with a volatile and a durable content, a directory with volatile and
//! durable entries. After each cut the backing directory must hold exactly the model's
//! durable state. Seeded, so a failure names the sequence that replays it.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;

use forgetfs::rng::Rng;
use forgetfs::tree::ROOT;
use forgetfs::{Disk, Tear};

#[derive(Default, Clone)]
struct Inode {
    volatile: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Default)]
struct Model {
    inodes: Vec<Inode>,
    volatile: BTreeMap<String, usize>,
    durable: BTreeMap<String, usize>,
}

impl Model {
    fn cut(&mut self) {
        self.volatile = self.durable.clone();
        for inode in &mut self.inodes {
            inode.volatile = inode.durable.clone();
        }
    }

    fn expected(&self) -> BTreeMap<String, Vec<u8>> {
        self.durable
            .iter()
            .map(|(name, id)| (name.clone(), self.inodes[*id].durable.clone()))
            .collect()
    }
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

fn pick(rng: &mut Rng, max: u64) -> u64 {
    rng.up_to(max)
}

fn open(disk: &mut Disk, name: &str) -> u64 {
    let ino = disk.lookup(ROOT, OsStr::new(name)).expect("lookup").ino;
    disk.open(ino, false).expect("open")
}

fn run(seed: u64) {
    let backing = tempfile::tempdir().expect("a temporary directory");
    let mut disk = Disk::over(backing.path()).expect("the disk");
    let mut model = Model::default();
    let mut rng = Rng::new(seed);
    for step in 0..60 {
        let name = NAMES[pick(&mut rng, 3) as usize];
        let exists = model.volatile.get(name).copied();
        match (pick(&mut rng, 8), exists) {
            (0, None) => {
                let (_, fh) = disk
                    .create(ROOT, OsStr::new(name), 0o644, true, false)
                    .expect("create");
                disk.release(fh).expect("release");
                model.inodes.push(Inode::default());
                model.volatile.insert(name.into(), model.inodes.len() - 1);
            }
            (1 | 2, Some(id)) => {
                let offset = pick(&mut rng, 12_000) as usize;
                let len = pick(&mut rng, 9_000) as usize + 1;
                let byte = pick(&mut rng, 250) as u8 + 1;
                let fh = open(&mut disk, name);
                disk.write(fh, offset as u64, &vec![byte; len])
                    .expect("write");
                disk.release(fh).expect("release");
                let data = &mut model.inodes[id].volatile;
                if data.len() < offset + len {
                    data.resize(offset + len, 0);
                }
                data[offset..offset + len].fill(byte);
            }
            (3, Some(id)) => {
                let size = pick(&mut rng, 14_000);
                let ino = disk.lookup(ROOT, OsStr::new(name)).expect("lookup").ino;
                disk.setattr(ino, None, Some(size), None).expect("truncate");
                model.inodes[id].volatile.resize(size as usize, 0);
            }
            (4, Some(id)) => {
                let fh = open(&mut disk, name);
                disk.fsync(fh).expect("fsync");
                disk.release(fh).expect("release");
                let inode = &mut model.inodes[id];
                inode.durable = inode.volatile.clone();
            }
            (5, _) => {
                disk.fsyncdir(ROOT).expect("fsyncdir");
                model.durable = model.volatile.clone();
            }
            (6, Some(id)) => {
                let to = NAMES[pick(&mut rng, 3) as usize];
                disk.rename(ROOT, OsStr::new(name), ROOT, OsStr::new(to), false)
                    .expect("rename");
                model.volatile.remove(name);
                model.volatile.insert(to.into(), id);
            }
            (7, Some(_)) => {
                disk.unlink(ROOT, OsStr::new(name)).expect("unlink");
                model.volatile.remove(name);
            }
            (8, _) => {
                disk.power_cut(Tear::None).expect("cut");
                model.cut();
                check(backing.path(), &model, seed, step);
            }
            _ => {}
        }
    }
    disk.power_cut(Tear::None).expect("cut");
    model.cut();
    check(backing.path(), &model, seed, 60);
}

fn check(backing: &std::path::Path, model: &Model, seed: u64, step: usize) {
    let found: BTreeMap<String, Vec<u8>> = fs::read_dir(backing)
        .expect("list the backing directory")
        .map(|entry| entry.expect("an entry"))
        .filter(|entry| entry.file_name() != ".forgetfs")
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, fs::read(entry.path()).expect("read"))
        })
        .collect();
    let expected = model.expected();
    let summary = |m: &BTreeMap<String, Vec<u8>>| -> Vec<(String, usize)> {
        m.iter().map(|(n, d)| (n.clone(), d.len())).collect()
    };
    assert!(
        found == expected,
        "seed {seed}, step {step}: found {:?}, expected {:?}",
        summary(&found),
        summary(&expected)
    );
}

#[test]
fn random_sequences_leave_exactly_the_durable_state_after_each_cut() {
    for seed in 0..300 {
        run(seed);
    }
}
