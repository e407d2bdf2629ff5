//! The forgetfs semantics through a real FUSE mount and ordinary system calls: what a
//! program sees before and after a power cut, an injected fsync failure, a full disk.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;

use forgetfs::Tear;
use forgetfs::pages::PAGE;

fn write_file(path: &std::path::Path, data: &[u8], sync: bool) {
    let mut file = File::create(path).expect("create");
    file.write_all(data).expect("write");
    if sync {
        file.sync_all().expect("fsync");
    }
}

#[test]
fn a_synced_write_survives_a_cut_and_an_unsynced_one_does_not() {
    let Some(m) = common::mount() else { return };
    write_file(&m.at("synced"), b"synced", true);
    write_file(&m.at("unsynced"), b"unsynced", false);
    common::sync_dir(m.point());
    let file = OpenOptions::new()
        .write(true)
        .open(m.at("synced"))
        .expect("open");
    file.write_all_at(b"SYN", 0).expect("overwrite");
    drop(file);
    assert_eq!(fs::read(m.at("synced")).expect("read"), b"SYNced");
    m.power_cut(Tear::None).expect("cut");
    assert_eq!(fs::read(m.at("synced")).expect("read"), b"synced");
    assert_eq!(fs::read(m.at("unsynced")).expect("read"), b"");
}

#[test]
fn a_created_file_without_a_directory_fsync_vanishes_after_a_cut() {
    let Some(m) = common::mount() else { return };
    fs::create_dir(m.at("d")).expect("mkdir");
    common::sync_dir(m.point());
    write_file(&m.at("d/f"), b"data, synced", true);
    assert!(m.at("d/f").exists());
    m.power_cut(Tear::None).expect("cut");
    assert!(m.at("d").exists(), "the directory was synced into the root");
    assert!(!m.at("d/f").exists(), "its new entry was not");
}

#[test]
fn a_rename_without_a_directory_fsync_is_undone_by_a_cut() {
    let Some(m) = common::mount() else { return };
    write_file(&m.at("target"), b"old", true);
    write_file(&m.at("tmp"), b"new", true);
    common::sync_dir(m.point());
    fs::rename(m.at("tmp"), m.at("target")).expect("rename");
    assert_eq!(fs::read(m.at("target")).expect("read"), b"new");
    m.power_cut(Tear::None).expect("cut");
    assert_eq!(fs::read(m.at("target")).expect("read"), b"old");
    assert_eq!(fs::read(m.at("tmp")).expect("read"), b"new");
}

#[test]
fn a_failed_fsync_reports_eio_once_and_loses_the_data_it_covered() {
    let Some(m) = common::mount() else { return };
    write_file(&m.at("f"), b"durable!", true);
    common::sync_dir(m.point());
    let file = OpenOptions::new()
        .write(true)
        .open(m.at("f"))
        .expect("open");
    file.write_all_at(b"COVERED!", 0).expect("write");
    m.fail_next_fsync();
    let error = file.sync_all().expect_err("the injected failure");
    assert_eq!(error.raw_os_error(), Some(libc::EIO));
    file.sync_all().expect("not reported a second time");
    assert_eq!(
        fs::read(m.at("f")).expect("read"),
        b"COVERED!",
        "still in the cache"
    );
    drop(file);
    m.power_cut(Tear::None).expect("cut");
    assert_eq!(fs::read(m.at("f")).expect("read"), b"durable!");
}

#[test]
fn writes_fail_with_enospc_after_the_byte_budget() {
    let Some(m) = common::mount() else { return };
    m.fail_writes_after(3 * PAGE);
    let mut file = File::create(m.at("f")).expect("create");
    file.write_all(&vec![7; 3 * PAGE as usize])
        .expect("within the budget");
    let error = file
        .write_all(b"one byte too many")
        .expect_err("past the budget");
    assert_eq!(error.raw_os_error(), Some(libc::ENOSPC));
    m.heal();
    file.write_all(b"healed").expect("after heal");
}

#[test]
fn a_torn_cut_keeps_a_prefix_of_whole_pages() {
    let Some(m) = common::mount() else { return };
    let page = PAGE as usize;
    write_file(&m.at("f"), &vec![b'o'; 6 * page], true);
    common::sync_dir(m.point());
    let order = [4, 1, 5, 0];
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..6 {
        let file = OpenOptions::new()
            .write(true)
            .open(m.at("f"))
            .expect("open");
        for index in order {
            file.write_all_at(&vec![b'n'; page], (index * page) as u64)
                .expect("write");
        }
        drop(file);
        m.power_cut(Tear::Random { seed }).expect("cut");
        let bytes = fs::read(m.at("f")).expect("read");
        let pages: Vec<u8> = bytes
            .chunks(page)
            .map(|chunk| {
                assert!(chunk.iter().all(|b| *b == chunk[0]), "a page was split");
                chunk[0]
            })
            .collect();
        let survived: Vec<bool> = order.iter().map(|i| pages[*i] == b'n').collect();
        let kept = survived.iter().take_while(|n| **n).count();
        assert!(
            survived[kept..].iter().all(|n| !n),
            "not a prefix: {survived:?}"
        );
        seen.insert(kept);
        // Back to all old pages for the next round.
        write_file(&m.at("f"), &vec![b'o'; 6 * page], true);
    }
    assert!(seen.len() > 1, "different seeds tear differently: {seen:?}");
}

#[test]
fn dropping_a_busy_mount_detaches_it_instead_of_leaving_it_dangling() {
    let Some(m) = common::mount() else { return };
    let point = m.point().canonicalize().expect("the mountpoint");
    let busy = File::create(m.at("open")).expect("create");
    drop(m);
    let mounts = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let listed = mounts
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(&*point.to_string_lossy()));
    assert!(!listed, "{} is still mounted", point.display());
    drop(busy);
}
