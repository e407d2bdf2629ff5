//! SQLite's heap: the bundled SQLite allocates from mimalloc, the allocator the rest of
//! hookq uses, instead of the C library's `malloc`, and keeps no process-wide count of its
//! memory.
//!
//! SQLite allocates and frees small blocks on every write: a savepoint or a multi-row
//! statement copies each page it changes into an in-memory journal made of 1 KB chunks
//! (`temp_store=MEMORY`), freed again when it ends. Under glibc's `malloc` (an arena lock,
//! chunk coalescing) that was 5–8 % of a topic publish's server CPU; mimalloc's
//! thread-local free lists make it a rounding error (figures in `docs/benchmarks.md`).
//! SQLite also counts every allocation under one process-wide mutex
//! (`SQLITE_CONFIG_MEMSTATUS`, on by default) for `sqlite3_memory_used()` and the soft heap
//! limit, neither of which hookq uses: off, as SQLite's own performance advice says.
//!
//! SQLite takes its allocator once, before it initializes: [`install`] must run before the
//! process opens its first connection. If something opened one earlier, SQLite refuses the
//! change and keeps its own allocator (only slower): every block is always freed by the
//! allocator that gave it.
//!
//! This is the workspace's only unsafe code, kept in a crate of its own so that the others
//! keep `#![forbid(unsafe_code)]`.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use libmimalloc_sys as mi;
use rusqlite::ffi;

// The methods below are called by SQLite only, with the arguments its contract promises
// (https://sqlite.org/c3ref/mem_methods.html): sizes above zero, blocks it got from
// `malloc`/`realloc` here, never null for `free`/`size`/`realloc`.

unsafe extern "C" fn malloc(size: c_int) -> *mut c_void {
    // SAFETY: any size is valid for mi_malloc; a failure returns null, as SQLite expects.
    unsafe { mi::mi_malloc(to_usize(size)) }
}

unsafe extern "C" fn free(block: *mut c_void) {
    // SAFETY: `block` came from mi_malloc/mi_realloc (SQLite's contract).
    unsafe { mi::mi_free(block) }
}

unsafe extern "C" fn realloc(block: *mut c_void, size: c_int) -> *mut c_void {
    // SAFETY: `block` came from mi_malloc/mi_realloc; on failure it is left as it was.
    unsafe { mi::mi_realloc(block, to_usize(size)) }
}

unsafe extern "C" fn size(block: *mut c_void) -> c_int {
    // SAFETY: `block` came from mi_malloc/mi_realloc and is live.
    let usable = unsafe { mi::mi_usable_size(block) };
    c_int::try_from(usable).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn roundup(size: c_int) -> c_int {
    // SAFETY: a pure function of its argument.
    let good = unsafe { mi::mi_good_size(to_usize(size)) };
    c_int::try_from(good).unwrap_or(size)
}

unsafe extern "C" fn init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn shutdown(_: *mut c_void) {}

/// SQLite's sizes as mimalloc's: at least one byte (SQLite never asks for less).
fn to_usize(size: c_int) -> usize {
    usize::try_from(size).unwrap_or(0).max(1)
}

/// Whether SQLite allocates from mimalloc, decided by the first call of [`install`].
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Give SQLite mimalloc as its heap, without memory accounting, once per process; call it
/// before any SQLite connection is opened. True if SQLite allocates from mimalloc (now or
/// since an earlier call); false if SQLite had already initialized and kept the C
/// library's `malloc` and its accounting.
pub fn install() -> bool {
    *INSTALLED.get_or_init(|| {
        // SAFETY: `SQLITE_CONFIG_MEMSTATUS` takes one int; refused (changing nothing) once
        // SQLite has initialized, like the call below.
        let counting = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) };
        if counting != ffi::SQLITE_OK {
            return false;
        }
        let methods = ffi::sqlite3_mem_methods {
            xMalloc: Some(malloc),
            xFree: Some(free),
            xRealloc: Some(realloc),
            xSize: Some(size),
            xRoundup: Some(roundup),
            xInit: Some(init),
            xShutdown: Some(shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: `SQLITE_CONFIG_MALLOC` takes a pointer to a `sqlite3_mem_methods`, which
        // SQLite copies before returning. Once SQLite has initialized it refuses
        // (`SQLITE_MISUSE`) and changes nothing, so no block is ever freed by another
        // allocator than the one that allocated it.
        let rc = unsafe {
            ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_MALLOC,
                &methods as *const ffi::sqlite3_mem_methods,
            )
        };
        rc == ffi::SQLITE_OK
    })
}

#[cfg(test)]
mod tests {
    // The only test of this crate: SQLite is configured once per process, and nothing may
    // open a connection before `install` does its work.
    #[test]
    fn sqlite_allocates_from_mimalloc_once_installed() {
        assert!(super::install(), "SQLite refused the allocator");
        assert!(super::install(), "a second call says the same");
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let total: i64 = conn
            .query_row(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
                 SELECT sum(length(printf('%.500c', 'x'))) FROM n",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(total, 5_000_000);
        // SAFETY: a block from sqlite3_malloc, freed once with sqlite3_free.
        unsafe {
            let block = rusqlite::ffi::sqlite3_malloc(100);
            assert!(!block.is_null());
            assert!(
                super::mi::mi_is_in_heap_region(block),
                "SQLite allocated outside mimalloc's heap"
            );
            assert!(rusqlite::ffi::sqlite3_msize(block) >= 100);
            let grown = rusqlite::ffi::sqlite3_realloc(block, 100_000);
            assert!(super::mi::mi_is_in_heap_region(grown));
            assert_eq!(
                rusqlite::ffi::sqlite3_memory_used(),
                0,
                "SQLite still counts its memory"
            );
            rusqlite::ffi::sqlite3_free(grown);
        }
    }
}
