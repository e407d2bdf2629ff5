//! The volatile layer's semantics through [`Disk`] alone, without FUSE: every test runs
//! anywhere, in a private temporary backing directory.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use forgetfs::pages::PAGE;
use forgetfs::tree::ROOT;
use forgetfs::{Disk, Tear};

fn disk() -> (tempfile::TempDir, Disk) {
    let backing = tempfile::tempdir().expect("a temporary directory");
    let disk = Disk::over(backing.path()).expect("the backing directory opens");
    (backing, disk)
}

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// Creates `name` in the root with `data`, fsyncing the file if `sync_file` and the root
/// if `sync_dir`; closes it.
fn create(disk: &mut Disk, file: &str, data: &[u8], sync_file: bool, sync_dir: bool) {
    let (_, fh) = disk
        .create(ROOT, name(file), 0o644, true, false)
        .expect("create");
    disk.write(fh, 0, data).expect("write");
    if sync_file {
        disk.fsync(fh).expect("fsync");
    }
    disk.release(fh).expect("release");
    if sync_dir {
        disk.fsyncdir(ROOT).expect("fsyncdir");
    }
}

fn overwrite(disk: &mut Disk, file: &str, offset: u64, data: &[u8], sync: bool) {
    let ino = disk.lookup(ROOT, name(file)).expect("lookup").ino;
    let fh = disk.open(ino, false).expect("open");
    disk.write(fh, offset, data).expect("write");
    if sync {
        disk.fsync(fh).expect("fsync");
    }
    disk.release(fh).expect("release");
}

fn read(backing: &Path, file: &str) -> Option<Vec<u8>> {
    fs::read(backing.join(file)).ok()
}

#[test]
fn a_synced_write_survives_a_cut() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", b"kept", true, true);
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(read(backing.path(), "f").as_deref(), Some(&b"kept"[..]));
}

#[test]
fn an_unsynced_write_does_not_survive_a_cut() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", b"durable", true, true);
    overwrite(&mut disk, "f", 0, b"VOLATILE and longer", false);
    assert_eq!(
        read(backing.path(), "f").as_deref(),
        Some(&b"VOLATILE and longer"[..]),
        "before the cut, reads see the page cache"
    );
    let report = disk.power_cut(Tear::None).expect("cut");
    assert_eq!(report.files, 1);
    assert_eq!(read(backing.path(), "f").as_deref(), Some(&b"durable"[..]));
}

#[test]
fn a_created_file_without_a_directory_fsync_vanishes() {
    let (backing, mut disk) = disk();
    create(&mut disk, "synced-data-only", b"data", true, false);
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(read(backing.path(), "synced-data-only"), None);
}

#[test]
fn a_created_file_with_a_directory_fsync_keeps_its_synced_data() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", b"data", true, true);
    create(&mut disk, "g", b"unsynced data", false, true);
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(read(backing.path(), "f").as_deref(), Some(&b"data"[..]));
    assert_eq!(read(backing.path(), "g").as_deref(), Some(&b""[..]));
}

#[test]
fn a_rename_without_a_directory_fsync_is_undone() {
    let (backing, mut disk) = disk();
    create(&mut disk, "old", b"old file", true, true);
    create(&mut disk, "new", b"new file", true, true);
    disk.rename(ROOT, name("new"), ROOT, name("old"), false)
        .expect("rename");
    assert_eq!(
        read(backing.path(), "old").as_deref(),
        Some(&b"new file"[..])
    );
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(
        read(backing.path(), "old").as_deref(),
        Some(&b"old file"[..])
    );
    assert_eq!(
        read(backing.path(), "new").as_deref(),
        Some(&b"new file"[..])
    );
}

#[test]
fn a_rename_followed_by_a_directory_fsync_is_kept() {
    let (backing, mut disk) = disk();
    create(&mut disk, "old", b"old file", true, true);
    create(&mut disk, "new", b"new file", true, true);
    disk.rename(ROOT, name("new"), ROOT, name("old"), false)
        .expect("rename");
    disk.fsyncdir(ROOT).expect("fsyncdir");
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(
        read(backing.path(), "old").as_deref(),
        Some(&b"new file"[..])
    );
    assert_eq!(read(backing.path(), "new"), None);
}

#[test]
fn an_unlink_without_a_directory_fsync_is_undone_with_the_durable_data() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", b"durable", true, true);
    overwrite(&mut disk, "f", 0, b"VOLATILE", false);
    disk.unlink(ROOT, name("f")).expect("unlink");
    assert_eq!(read(backing.path(), "f"), None);
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(read(backing.path(), "f").as_deref(), Some(&b"durable"[..]));
}

#[test]
fn an_unsynced_directory_vanishes_with_everything_in_it() {
    let (backing, mut disk) = disk();
    let dir = disk.mkdir(ROOT, name("d"), 0o755).expect("mkdir").ino;
    let (_, fh) = disk
        .create(dir, name("f"), 0o644, true, false)
        .expect("create");
    disk.write(fh, 0, b"data").expect("write");
    disk.fsync(fh).expect("fsync");
    disk.fsyncdir(dir).expect("fsyncdir d");
    disk.release(fh).expect("release");
    disk.power_cut(Tear::None).expect("cut");
    assert!(!backing.path().join("d").exists());
}

#[test]
fn a_failed_fsync_answers_eio_once_and_its_data_is_lost_at_the_next_cut() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", b"durable!", true, true);
    let ino = disk.lookup(ROOT, name("f")).expect("lookup").ino;
    let fh = disk.open(ino, false).expect("open");
    disk.write(fh, 0, b"COVERED!").expect("write");
    disk.fail_next_fsync();
    let failed = disk.fsync(fh).expect_err("the armed fsync fails");
    assert_eq!(failed.errno_code(), libc::EIO);
    disk.fsync(fh)
        .expect("the next fsync does not report the error again");
    assert_eq!(disk.status().lost_pages, 1);
    disk.release(fh).expect("release");
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(read(backing.path(), "f").as_deref(), Some(&b"durable!"[..]));
}

#[test]
fn a_failed_fsync_is_reported_once_to_every_other_handle_open_on_the_file() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", b"durable!", true, true);
    let ino = disk.lookup(ROOT, name("f")).expect("lookup").ino;
    let failing = disk.open(ino, false).expect("open");
    let other = disk.open(ino, false).expect("open");
    disk.write(failing, 0, b"COVERED!").expect("write");
    disk.fail_next_fsync();
    disk.fsync(failing).expect_err("the armed fsync fails");
    let opened_after = disk.open(ino, false).expect("open");
    disk.fsync(opened_after)
        .expect("a handle opened after the failure does not see it");
    disk.write(other, PAGE, b"LATER").expect("write");
    let seen = disk
        .fsync(other)
        .expect_err("the other handle sees the failure");
    assert_eq!(seen.errno_code(), libc::EIO);
    disk.fsync(other).expect("only once");
    for fh in [failing, other, opened_after] {
        disk.release(fh).expect("release");
    }
    disk.power_cut(Tear::None).expect("cut");
    let after = read(backing.path(), "f").expect("the file survives");
    assert_eq!(&after[..8], b"durable!", "the failed page stays lost");
    assert_eq!(
        &after[PAGE as usize..],
        b"LATER",
        "the fsync that reported the error still synced the later write"
    );
}

#[test]
fn a_page_written_again_after_a_failed_fsync_can_be_synced() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", b"durable!", true, true);
    let ino = disk.lookup(ROOT, name("f")).expect("lookup").ino;
    let fh = disk.open(ino, false).expect("open");
    disk.write(fh, 0, b"COVERED!").expect("write");
    disk.fail_next_fsync();
    disk.fsync(fh).expect_err("the armed fsync fails");
    disk.write(fh, 0, b"REWRITE!").expect("write again");
    disk.fsync(fh).expect("fsync");
    disk.release(fh).expect("release");
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(read(backing.path(), "f").as_deref(), Some(&b"REWRITE!"[..]));
}

#[test]
fn writes_fail_with_enospc_past_the_byte_budget() {
    let (backing, mut disk) = disk();
    disk.fail_writes_after(10);
    let (_, fh) = disk
        .create(ROOT, name("f"), 0o644, true, false)
        .expect("create");
    assert_eq!(disk.write(fh, 0, b"123456").expect("fits"), 6);
    assert_eq!(disk.write(fh, 6, b"789abc").expect("short write"), 4);
    let full = disk.write(fh, 10, b"x").expect_err("no room left");
    assert_eq!(full.errno_code(), libc::ENOSPC);
    disk.heal();
    assert_eq!(disk.write(fh, 10, b"x").expect("healed"), 1);
    disk.release(fh).expect("release");
    assert_eq!(
        read(backing.path(), "f").as_deref(),
        Some(&b"123456789ax"[..])
    );
}

#[test]
fn a_torn_cut_keeps_whole_pages_and_repeats_for_a_seed() {
    let page = PAGE as usize;
    let mut results = Vec::new();
    for _ in 0..2 {
        let (backing, mut disk) = disk();
        create(&mut disk, "f", &vec![b'o'; 8 * page], true, true);
        for index in [5, 1, 7, 0, 3] {
            overwrite(
                &mut disk,
                "f",
                (index * page) as u64,
                &vec![b'n'; page],
                false,
            );
        }
        disk.power_cut(Tear::Random { seed: 3 }).expect("cut");
        let bytes = read(backing.path(), "f").expect("the file is durable");
        assert_eq!(bytes.len(), 8 * page);
        let pages: Vec<u8> = bytes
            .chunks(page)
            .map(|chunk| {
                assert!(chunk.iter().all(|b| *b == chunk[0]), "a page was split");
                chunk[0]
            })
            .collect();
        let order: Vec<bool> = [5, 1, 7, 0, 3].iter().map(|i| pages[*i] == b'n').collect();
        let kept = order.iter().take_while(|n| **n).count();
        assert!(order[kept..].iter().all(|n| !n), "not a prefix: {order:?}");
        results.push(pages);
    }
    assert_eq!(results[0], results[1], "the same seed tears the same way");
}

#[test]
fn handles_from_before_a_cut_are_stale() {
    let (_backing, mut disk) = disk();
    let (attr, fh) = disk
        .create(ROOT, name("f"), 0o644, true, false)
        .expect("create");
    disk.power_cut(Tear::None).expect("cut");
    assert!(disk.write(fh, 0, b"x").is_err());
    assert!(disk.getattr(attr.ino).is_err());
}

#[test]
fn a_truncation_without_a_handle_is_undone_by_a_cut() {
    let (backing, mut disk) = disk();
    create(&mut disk, "f", &vec![b'd'; 3 * PAGE as usize], true, true);
    let ino = disk.lookup(ROOT, name("f")).expect("lookup").ino;
    let attr = disk.setattr(ino, None, Some(10), None).expect("truncate");
    assert_eq!(attr.meta.len(), 10);
    disk.power_cut(Tear::None).expect("cut");
    assert_eq!(
        read(backing.path(), "f"),
        Some(vec![b'd'; 3 * PAGE as usize])
    );
}
