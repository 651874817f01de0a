//! Tests of the tablespace manager and the fragment allocator (in-memory files with
//! injected faults; one round trip on real files).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::alloc::FragmentDiskAlloc;
use super::*;
use crate::disk::io::{Faults, MemFileSystem, OsFileSystem};
use crate::disk::rowpage::{self, EMPTY_PAGE_FREE_BYTES};
use crate::disk::{Lsn, NoWal};

const PAGE: u64 = DISK_PAGE_SIZE as u64;
/// 4-page extents keep the files small.
const EXTENT: u64 = 4 * PAGE;
const EMPTY: u64 = EMPTY_PAGE_FREE_BYTES as u64;

fn spec(name: &str, autoextend: u64, max: u64) -> TablespaceSpec {
    TablespaceSpec {
        name: name.into(),
        logfile_group: "lg_1".into(),
        extent_size_bytes: EXTENT,
        autoextend_size_bytes: autoextend,
        max_size_bytes: max,
    }
}

/// Bytes for a file of `extents` extents (zero page + one header page).
fn file_of(extents: u64) -> u64 {
    2 * PAGE + extents * EXTENT
}

fn mem() -> (MemFileSystem, TablespaceManager) {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/fs")).unwrap();
    let ts = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    (fs, ts)
}

fn owner(table_id: u32, fragment_id: u32) -> ExtentOwner {
    ExtentOwner {
        table_id,
        fragment_id,
    }
}

fn info(m: &TablespaceManager, file_no: u32) -> DataFileInfo {
    m.files_info()
        .into_iter()
        .find(|i| i.file_no == file_no)
        .unwrap()
}

#[test]
fn create_open_round_trip_and_files_info() {
    let (fs, m) = mem();
    let ts = m.create_tablespace(spec("ts_1", 0, 0)).unwrap();
    assert_eq!(m.lookup("ts_1"), Some(ts));
    let f = m
        .add_datafile(ts, "data_1.dat", file_of(5) + 1000, 42, 1)
        .unwrap();
    let i = info(&m, f);
    assert_eq!(i.path, PathBuf::from("/fs/data_1.dat"));
    assert_eq!((i.free_extents, i.total_extents), (5, 5));
    assert_eq!(i.size_bytes, file_of(5));
    assert_eq!(i.initial_size_bytes, file_of(5));
    assert_eq!(i.maximum_size_bytes, file_of(5));
    assert_eq!(i.extent_size_bytes, EXTENT);
    assert_eq!(i.logfile_group_name, "lg_1");
    assert_eq!(i.free_bytes_in_allocated_extents, 0);
    assert_eq!(fs.used_bytes(), file_of(5));

    let a = m.alloc_extent(ts, owner(7, 0), "t7", 2).unwrap();
    let b = m.alloc_extent(ts, owner(8, 1), "t8", 3).unwrap();
    assert_eq!((a.extent_no, b.extent_no), (0, 1));
    let i = info(&m, f);
    assert_eq!(i.free_extents, 3);
    assert_eq!(i.free_bytes_in_allocated_extents, 8 * EMPTY);
    let p = m.extent_page(b, 2).unwrap();
    assert_eq!(p.page_no, 2 + 4 + 2);
    assert_eq!(PageAddr::from_key(p.key()), p);
    assert_eq!(p.key(), (f as u64) << 32 | 8);
    let all = m.extent_pages_of(b).unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(all[2], p);
    assert!(
        m.extent_pages_of(ExtentId {
            file_no: f,
            extent_no: 5
        })
        .is_err()
    );
    assert_eq!(m.locate(p).unwrap(), (b, 2));
    m.set_page_free_bytes(p, 1000, 4).unwrap();
    assert_eq!(
        info(&m, f).free_bytes_in_allocated_extents,
        7 * EMPTY + 1000
    );
    m.flush().unwrap();

    // A new manager (restart) opens the file and sees the same extents.
    let m2 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    let ts2 = m2.create_tablespace(spec("ts_1", 0, 0)).unwrap();
    m2.open_datafile(ts2, "data_1.dat", f).unwrap();
    assert_eq!(m2.extent_owner(a).unwrap(), Some(owner(7, 0)));
    assert_eq!(m2.extent_owner(b).unwrap(), Some(owner(8, 1)));
    let i2 = info(&m2, f);
    assert_eq!((i2.free_extents, i2.total_extents), (3, 5));
    // The partly used page comes back as its class's lower bound.
    let est = datafile::class_min_free_bytes(datafile::free_class(1000)) as u64;
    assert!(est <= 1000);
    assert_eq!(i2.free_bytes_in_allocated_extents, 7 * EMPTY + est);
    // The next file gets a new number; next extent is the lowest free one.
    assert_eq!(
        m2.alloc_extent(ts2, owner(9, 0), "t9", 5)
            .unwrap()
            .extent_no,
        2
    );
    assert_eq!(
        m2.add_datafile(ts2, "data_2.dat", file_of(1), 0, 6)
            .unwrap(),
        f + 1
    );
    m.check().unwrap();
    m2.check().unwrap();
}

#[test]
fn real_files_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = Arc::new(OsFileSystem);
    let m = TablespaceManager::new(fs.clone(), tmp.path(), Arc::new(NoWal), 1);
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    let f = m.add_datafile(ts, "d.dat", file_of(2), 0, 1).unwrap();
    let e = m.alloc_extent(ts, owner(1, 2), "t", 2).unwrap();
    m.flush().unwrap();
    assert_eq!(
        std::fs::metadata(tmp.path().join("d.dat")).unwrap().len(),
        file_of(2)
    );
    let m2 = TablespaceManager::new(fs, tmp.path(), Arc::new(NoWal), 1);
    let ts2 = m2.create_tablespace(spec("ts", 0, 0)).unwrap();
    m2.open_datafile(ts2, "d.dat", f).unwrap();
    assert_eq!(m2.extent_owner(e).unwrap(), Some(owner(1, 2)));
    assert_eq!(
        m2.remove_all_files().unwrap(),
        vec![tmp.path().join("d.dat")]
    );
    assert!(!tmp.path().join("d.dat").exists());
}

#[test]
fn full_tablespace_gives_1601_and_new_file_makes_room_at_once() {
    let (_fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    assert_eq!(
        m.alloc_extent(ts, owner(1, 0), "t1", 1).unwrap_err().code,
        1602
    );
    let f1 = m.add_datafile(ts, "a.dat", file_of(2), 0, 1).unwrap();
    m.alloc_extent(ts, owner(1, 0), "t1", 2).unwrap();
    m.alloc_extent(ts, owner(1, 0), "t1", 3).unwrap();
    let before = m.files_info();
    let e = m.alloc_extent(ts, owner(1, 0), "t1", 4).unwrap_err();
    assert_eq!((e.code, e.mysql_code), (1601, 1114));
    assert!(e.message.contains("t1"), "{}", e.message);
    assert_eq!(
        m.files_info(),
        before,
        "a failed allocation changes nothing"
    );
    let f2 = m.add_datafile(ts, "b.dat", file_of(1), 0, 5).unwrap();
    let got = m.alloc_extent(ts, owner(1, 0), "t1", 6).unwrap();
    assert_eq!(
        got,
        ExtentId {
            file_no: f2,
            extent_no: 0
        }
    );
    assert_eq!(info(&m, f1).free_extents, 0);
    assert_eq!(info(&m, f2).free_extents, 0);
    m.check().unwrap();
}

#[test]
fn autoextend_up_to_max_size_then_1601() {
    let (fs, m) = mem();
    // Grow by 2 extents at a time, files at most 7 extents (+ 2 header pages).
    let ts = m
        .create_tablespace(spec("ts", 2 * EXTENT, file_of(7)))
        .unwrap();
    let f = m.add_datafile(ts, "a.dat", file_of(2), 0, 1).unwrap();
    assert_eq!(info(&m, f).maximum_size_bytes, file_of(7));
    let mut sizes = Vec::new();
    for k in 0..7 {
        let e = m.alloc_extent(ts, owner(1, 0), "t1", 2 + k).unwrap();
        assert_eq!(e.extent_no as u64, k);
        sizes.push(info(&m, f).total_extents);
    }
    assert_eq!(sizes, vec![2, 2, 4, 4, 6, 6, 7]);
    assert_eq!(fs.used_bytes(), file_of(7));
    assert_eq!(
        m.alloc_extent(ts, owner(1, 0), "t1", 9).unwrap_err().code,
        1601
    );
    // The grown file reopens with its new size.
    m.flush().unwrap();
    let m2 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    let ts2 = m2
        .create_tablespace(spec("ts", 2 * EXTENT, file_of(7)))
        .unwrap();
    m2.open_datafile(ts2, "a.dat", f).unwrap();
    assert_eq!(
        (info(&m2, f).total_extents, info(&m2, f).free_extents),
        (7, 0)
    );
    m.check().unwrap();
    m2.check().unwrap();
}

#[test]
fn unbounded_autoextend_reserves_16x() {
    let (_fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 1, 0)).unwrap();
    let f = m.add_datafile(ts, "a.dat", file_of(1), 0, 1).unwrap();
    assert_eq!(info(&m, f).maximum_size_bytes, file_of(16));
    for k in 0..16 {
        m.alloc_extent(ts, owner(1, 0), "t", k).unwrap();
    }
    assert_eq!(info(&m, f).total_extents, 16);
    assert_eq!(
        m.alloc_extent(ts, owner(1, 0), "t", 99).unwrap_err().code,
        1601
    );
}

#[test]
fn enospc_on_create_and_autoextend_leaves_state_unchanged() {
    let (fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", EXTENT, 0)).unwrap();
    fs.set_faults(Faults {
        capacity_bytes: Some(file_of(2)),
        ..Faults::default()
    });
    let e = m.add_datafile(ts, "big.dat", file_of(3), 0, 1).unwrap_err();
    assert_eq!(e.code, 1509);
    assert!(e.message.contains("big.dat"), "{}", e.message);
    assert!(
        e.message.contains("os error 28"),
        "OS reason: {}",
        e.message
    );
    assert!(!fs.exists(Path::new("/fs/big.dat")));
    assert!(m.files_info().is_empty());
    let f = m.add_datafile(ts, "a.dat", file_of(2), 0, 2).unwrap();
    m.alloc_extent(ts, owner(1, 0), "t", 3).unwrap();
    m.alloc_extent(ts, owner(1, 0), "t", 4).unwrap();
    let before = m.files_info();
    let e = m.alloc_extent(ts, owner(1, 0), "t", 5).unwrap_err();
    // The disk full under an autoextending file is the tablespace full, with the reason.
    assert_eq!(e.code, 1601, "{e:?}");
    assert!(e.message.contains("no space left on device"), "{e:?}");
    assert_eq!(m.files_info(), before);
    // Space back: the autoextension succeeds.
    fs.set_faults(Faults::default());
    assert_eq!(
        m.alloc_extent(ts, owner(1, 0), "t", 6).unwrap().extent_no,
        2
    );
    assert_eq!(info(&m, f).total_extents, 3);
    m.check().unwrap();
}

#[test]
fn eio_on_header_write_leaves_state_unchanged() {
    let (fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    let f = m.add_datafile(ts, "a.dat", file_of(2), 0, 1).unwrap();
    let a = m.alloc_extent(ts, owner(1, 0), "t", 2).unwrap();
    fs.set_faults(Faults {
        fail_writes: true,
        ..Faults::default()
    });
    let before = m.files_info();
    assert_eq!(
        m.alloc_extent(ts, owner(2, 0), "t", 3).unwrap_err().code,
        1509
    );
    assert_eq!(m.free_extent(a, 4).unwrap_err().code, 1509);
    assert_eq!(m.files_info(), before);
    assert_eq!(m.extent_owner(a).unwrap(), Some(owner(1, 0)));
    // A lazy class change survives a failed flush and is written by the next one.
    m.set_page_free_bytes(m.extent_page(a, 0).unwrap(), 0, 5)
        .unwrap();
    assert_eq!(m.flush().unwrap_err().code, 1509);
    fs.set_faults(Faults::default());
    m.flush().unwrap();
    let m2 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    let ts2 = m2.create_tablespace(spec("ts", 0, 0)).unwrap();
    m2.open_datafile(ts2, "a.dat", f).unwrap();
    assert_eq!(info(&m2, f).free_bytes_in_allocated_extents, 3 * EMPTY);
    m.check().unwrap();
}

#[test]
fn corrupt_extent_header_detected_on_open() {
    let (fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    let f = m.add_datafile(ts, "a.dat", file_of(2), 0, 1).unwrap();
    m.alloc_extent(ts, owner(1, 0), "t", 2).unwrap();
    m.flush().unwrap();
    let path = Path::new("/fs/a.dat");
    for offset in [PAGE + 40, 100] {
        assert!(fs.corrupt_byte(path, offset));
        let m2 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
        let ts2 = m2.create_tablespace(spec("ts", 0, 0)).unwrap();
        let e = m2.open_datafile(ts2, "a.dat", f).unwrap_err();
        assert_eq!(e.code, 896, "{e:?}");
        assert!(m2.files_info().is_empty());
        assert!(fs.corrupt_byte(path, offset)); // flip back
    }
    // A file shorter than its zero page says: refused.
    let short = fs.open(path).unwrap();
    let len = short.len_bytes().unwrap();
    let copy = Path::new("/fs/short.dat");
    let c = fs.create(copy, len - PAGE).unwrap();
    let mut buf = vec![0u8; (len - PAGE) as usize];
    short.read_at(&mut buf, 0).unwrap();
    c.write_at(&buf, 0).unwrap();
    let m1 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    let ts1 = m1.create_tablespace(spec("ts", 0, 0)).unwrap();
    assert_eq!(m1.open_datafile(ts1, "short.dat", f).unwrap_err().code, 896);
    // A missing file: 1509 naming it.
    let e = m1.open_datafile(ts1, "gone.dat", f).unwrap_err();
    assert_eq!(e.code, 1509);
    assert!(e.message.contains("gone.dat"));
    // Opened under the wrong file number or tablespace: refused.
    let m3 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    let ts3 = m3.create_tablespace(spec("other", 0, 0)).unwrap();
    assert_eq!(m3.open_datafile(ts3, "a.dat", f + 1).unwrap_err().code, 896);
    let ts4 = m3.create_tablespace(spec("ts", 0, 0)).unwrap();
    assert_ne!(ts4, ts3);
    // The file belongs to tablespace id 1 (= ts3 here), not ts4.
    assert_eq!(m3.open_datafile(ts4, "a.dat", f).unwrap_err().code, 896);
    m3.open_datafile(ts3, "a.dat", f).unwrap();
}

#[test]
fn creation_errors() {
    let (fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    assert_eq!(m.create_tablespace(spec("ts", 0, 0)).unwrap_err().code, 721);
    let mut zero = spec("z", 0, 0);
    zero.extent_size_bytes = 0;
    assert_eq!(m.create_tablespace(zero).unwrap_err().code, 764);
    // Rounded up to 32 KB.
    let mut odd = spec("odd", 0, 0);
    odd.extent_size_bytes = 3 * PAGE + 1;
    let t_odd = m.create_tablespace(odd).unwrap();
    assert_eq!(m.extent_pages(t_odd).unwrap(), 4);
    // Extent larger than the file: 764; no extent after the header pages: 1516.
    assert_eq!(
        m.add_datafile(ts, "x.dat", EXTENT - 1, 0, 1)
            .unwrap_err()
            .code,
        764
    );
    assert_eq!(
        m.add_datafile(ts, "x.dat", EXTENT + PAGE, 0, 1)
            .unwrap_err()
            .code,
        1516
    );
    assert!(fs.paths().is_empty());
    m.add_datafile(ts, "x.dat", file_of(1), 0, 1).unwrap();
    assert_eq!(
        m.add_datafile(ts, "x.dat", file_of(1), 0, 1)
            .unwrap_err()
            .code,
        760
    );
    // The path exists on disk though unknown to this manager: 760 too.
    let m2 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    let ts2 = m2.create_tablespace(spec("ts", 0, 0)).unwrap();
    assert_eq!(
        m2.add_datafile(ts2, "x.dat", file_of(1), 0, 1)
            .unwrap_err()
            .code,
        760
    );
    // Missing directory: 1509 with the OS reason.
    let e = m
        .add_datafile(ts, "/nodir/y.dat", file_of(1), 0, 1)
        .unwrap_err();
    assert_eq!(e.code, 1509);
    assert!(e.message.contains("/nodir/y.dat"), "{}", e.message);
}

#[test]
fn drop_rules() {
    let (fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    m.add_datafile(ts, "a.dat", file_of(1), 0, 1).unwrap();
    m.add_table_user(ts).unwrap();
    let e = m.alloc_extent(ts, owner(1, 0), "t", 2).unwrap();
    assert_eq!(m.drop_datafile(ts, "nope.dat").unwrap_err().code, 766);
    assert_eq!(m.drop_datafile(ts, "a.dat").unwrap_err().code, 770);
    assert_eq!(m.drop_tablespace("ts").unwrap_err().code, 768);
    assert_eq!(m.drop_tablespace("nope").unwrap_err().code, 767);
    m.free_extent(e, 3).unwrap();
    m.drop_datafile(ts, "a.dat").unwrap();
    assert!(!fs.exists(Path::new("/fs/a.dat")));
    assert_eq!(
        m.alloc_extent(ts, owner(1, 0), "t", 4).unwrap_err().code,
        1602
    );
    assert_eq!(
        m.drop_tablespace("ts").unwrap_err().code,
        768,
        "table still uses it"
    );
    m.remove_table_user(ts).unwrap();
    m.drop_tablespace("ts").unwrap();
    assert_eq!(m.lookup("ts"), None);
}

#[test]
fn restart_restores_tablespace_ids() {
    let (fs, m) = mem();
    let t1 = m.create_tablespace(spec("t1", 0, 0)).unwrap();
    let t2 = m.create_tablespace(spec("t2", 0, 0)).unwrap();
    m.drop_tablespace("t1").unwrap();
    let f = m.add_datafile(t2, "b.dat", file_of(1), 0, 1).unwrap();
    let e = m.alloc_extent(t2, owner(4, 0), "t", 2).unwrap();
    let m2 = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(NoWal), 3);
    m2.restore_tablespace(t2, spec("t2", 0, 0)).unwrap();
    assert_eq!(
        m2.restore_tablespace(t2, spec("t9", 0, 0))
            .unwrap_err()
            .code,
        721
    );
    m2.open_datafile(t2, "b.dat", f).unwrap();
    assert_eq!(m2.extent_owner(e).unwrap(), Some(owner(4, 0)));
    // New ids and file numbers continue after the restored ones.
    let t3 = m2.create_tablespace(spec("t3", 0, 0)).unwrap();
    assert!(t3 > t2 && t2 > t1);
    assert_eq!(
        m2.add_datafile(t3, "c.dat", file_of(1), 0, 3).unwrap(),
        f + 1
    );
    m2.check().unwrap();
}

#[test]
fn remove_all_files_for_initial_start() {
    let (fs, m) = mem();
    let t1 = m.create_tablespace(spec("t1", 0, 0)).unwrap();
    let t2 = m.create_tablespace(spec("t2", 0, 0)).unwrap();
    m.add_datafile(t1, "a.dat", file_of(1), 0, 1).unwrap();
    m.add_datafile(t2, "/fs/b.dat", file_of(1), 0, 1).unwrap();
    m.add_datafile(t1, "c.dat", file_of(1), 0, 1).unwrap();
    let removed = m.remove_all_files().unwrap();
    let want: Vec<PathBuf> = ["/fs/a.dat", "/fs/b.dat", "/fs/c.dat"]
        .iter()
        .map(PathBuf::from)
        .collect();
    assert_eq!(removed, want);
    assert!(fs.paths().is_empty());
    assert!(m.files_info().is_empty());
    assert_eq!(m.lookup("t1"), None);
}

/// Records the LSNs synced and the write count at each sync.
struct RecordingWal {
    fs: MemFileSystem,
    log: Mutex<Vec<(Lsn, u64)>>,
}

impl WalSync for RecordingWal {
    fn sync_to(&self, lsn: Lsn) -> Result<()> {
        self.log.lock().push((lsn, self.fs.stats().writes));
        Ok(())
    }
}

#[test]
fn wal_synced_before_header_writes() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/fs")).unwrap();
    let wal = Arc::new(RecordingWal {
        fs: fs.clone(),
        log: Mutex::new(Vec::new()),
    });
    let m = TablespaceManager::new(Arc::new(fs.clone()), "/fs", wal.clone(), 3);
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    m.add_datafile(ts, "a.dat", file_of(2), 0, 10).unwrap();
    let w0 = fs.stats().writes;
    let e = m.alloc_extent(ts, owner(1, 0), "t", 77).unwrap();
    assert_eq!(wal.log.lock().last(), Some(&(77, w0)));
    assert_eq!(fs.stats().writes, w0 + 1);
    m.set_page_free_bytes(m.extent_page(e, 1).unwrap(), 5, 90)
        .unwrap();
    assert_eq!(fs.stats().writes, w0 + 1, "class changes are lazy");
    m.flush().unwrap();
    assert_eq!(wal.log.lock().last(), Some(&(90, w0 + 1)));
    assert_eq!(fs.stats().writes, w0 + 2);
}

#[test]
fn fragment_alloc_prefers_fullest_page_and_returns_empty_extents() {
    let (_fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    let f = m.add_datafile(ts, "a.dat", file_of(3), 0, 1).unwrap();
    let mut frag = FragmentDiskAlloc::new(owner(5, 1));
    // Fill one page with a big record, another with a small one.
    let rec = rowpage::space_needed(20_000);
    let p0 = frag.alloc(&m, ts, rec, "t5", 2).unwrap();
    assert_eq!(frag.extents().len(), 1);
    assert_eq!(
        frag.page_free_bytes(p0),
        Some((EMPTY as usize - rec) as u32)
    );
    frag.page_free_changed(&m, p0, (EMPTY as usize - rec) as u32, 3)
        .unwrap();
    let p1 = frag.alloc(&m, ts, 20_000, "t5", 4).unwrap();
    assert_ne!(p1, p0, "does not fit the first page");
    // A small row goes to the fullest page that fits: p0 (12.7K free) over p1.
    frag.page_free_changed(&m, p1, 1_000, 5).unwrap();
    let small = frag.alloc_page(&m, ts, 2_000, "t5", 6).unwrap();
    assert_eq!(small.page, p0);
    assert!(!small.was_empty);
    frag.check(&m).unwrap();
    assert_eq!(
        info(&m, f).free_bytes_in_allocated_extents,
        (EMPTY as usize - rec) as u64 + 1_000 + 2 * EMPTY
    );
    // Rows bigger than a page: refused.
    assert!(frag.alloc(&m, ts, EMPTY as usize + 1, "t5", 7).is_err());

    // Fill the rest of the extent (4 pages) so the next allocation takes extent 1.
    let mut pages = vec![p0, p1];
    while frag.extents().len() == 1 {
        let p = frag.alloc(&m, ts, EMPTY as usize, "t5", 8).unwrap();
        frag.page_free_changed(&m, p, 0, 8).unwrap();
        pages.push(p);
    }
    assert_eq!(frag.extents().len(), 2);
    let last = *pages.last().unwrap();
    assert_eq!(m.locate(last).unwrap().0.extent_no, 1);
    assert_eq!(info(&m, f).free_extents, 1);
    // Empty every page of extent 0: it is offered back, then returned.
    let mut offered = None;
    for &p in &pages[..pages.len() - 1] {
        offered = frag.page_free_changed(&m, p, EMPTY as u32, 9).unwrap();
    }
    let e0 = offered.expect("empty extent offered back");
    assert_eq!(e0.extent_no, 0);
    frag.return_extent(&m, e0, 10).unwrap();
    frag.check(&m).unwrap();
    assert_eq!(info(&m, f).free_extents, 2);
    assert_eq!(m.extent_owner(e0).unwrap(), None);
    // Another fragment reuses it (lowest free extent first).
    let mut other = FragmentDiskAlloc::new(owner(6, 0));
    let q = other.alloc_page(&m, ts, 100, "t6", 11).unwrap();
    assert_eq!(m.locate(q.page).unwrap().0, e0);
    assert!(q.was_empty, "a reused page must be formatted again");
    // The last extent of a fragment is kept when it empties...
    assert_eq!(
        frag.page_free_changed(&m, last, EMPTY as u32, 12).unwrap(),
        None
    );
    // ...until DROP TABLE.
    let released = frag.release_all(&m, 13).unwrap();
    assert_eq!(released.len(), 1);
    assert!(frag.extents().is_empty());
    assert_eq!(info(&m, f).free_extents, 2);
    // Rebuild after a restart from the headers.
    let rebuilt = FragmentDiskAlloc::from_tablespace(&m, owner(6, 0)).unwrap();
    assert_eq!(rebuilt.extents(), vec![e0]);
    rebuilt.check(&m).unwrap();
    m.check().unwrap();
}

#[test]
fn fragment_alloc_1601_changes_nothing() {
    let (_fs, m) = mem();
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    m.add_datafile(ts, "a.dat", file_of(1), 0, 1).unwrap();
    let mut a = FragmentDiskAlloc::new(owner(1, 0));
    for _ in 0..4 {
        let p = a.alloc(&m, ts, EMPTY as usize, "t1", 2).unwrap();
        a.page_free_changed(&m, p, 0, 2).unwrap();
    }
    let before = a.free_bytes();
    let e = a.alloc(&m, ts, 10, "t1", 3).unwrap_err();
    assert_eq!(e.code, 1601);
    assert!(e.message.contains("t1"));
    assert_eq!(a.free_bytes(), before);
    assert_eq!(a.extents().len(), 1);
}

mod model {
    //! Random inserts, deletes and drops by three fragments against a model of the
    //! bytes used per page: the allocator never overbooks a page, empty extents go
    //! back, and `files_info` stays exact at every step.
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(usize, u32),
        Delete(usize, usize),
        Drop(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0usize..3, prop_oneof![1u32..200, 1u32..(EMPTY as u32)])
                .prop_map(|(f, n)| Op::Insert(f, n)),
            4 => (0usize..3, any::<usize>()).prop_map(|(f, k)| Op::Delete(f, k)),
            1 => (0usize..3).prop_map(Op::Drop),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn allocator_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
            let (_fs, m) = mem();
            let ts = m.create_tablespace(spec("ts", EXTENT, file_of(6))).unwrap();
            let f = m.add_datafile(ts, "a.dat", file_of(2), 0, 1).unwrap();
            let mut frags: Vec<FragmentDiskAlloc> =
                (0..3).map(|i| FragmentDiskAlloc::new(owner(10 + i, 0))).collect();
            let mut rows: Vec<Vec<(PageAddr, u32)>> = vec![Vec::new(); 3];
            let mut used: BTreeMap<PageAddr, u32> = BTreeMap::new();
            let mut lsn = 1;
            for o in ops {
                lsn += 1;
                match o {
                    Op::Insert(i, n) => match frags[i].alloc(&m, ts, n as usize, "t", lsn) {
                        Ok(p) => {
                            let u = used.entry(p).or_insert(0);
                            *u += n;
                            prop_assert!(*u <= EMPTY as u32, "page {:?} overbooked", p);
                            let free = EMPTY as u32 - *u;
                            prop_assert_eq!(frags[i].page_free_changed(&m, p, free, lsn).unwrap(), None);
                            rows[i].push((p, n));
                        }
                        Err(e) => prop_assert_eq!(e.code, 1601),
                    },
                    Op::Delete(i, k) => {
                        if rows[i].is_empty() { continue; }
                        let at = k % rows[i].len();
                        let (p, n) = rows[i].swap_remove(at);
                        let u = used.get_mut(&p).unwrap();
                        *u -= n;
                        let free = EMPTY as u32 - *u;
                        if let Some(e) = frags[i].page_free_changed(&m, p, free, lsn).unwrap() {
                            frags[i].return_extent(&m, e, lsn).unwrap();
                            for q in 0..4 {
                                used.remove(&m.extent_page(e, q).unwrap());
                            }
                        }
                    }
                    Op::Drop(i) => {
                        for e in frags[i].release_all(&m, lsn).unwrap() {
                            for q in 0..4 {
                                used.remove(&m.extent_page(e, q).unwrap());
                            }
                        }
                        rows[i].clear();
                    }
                }
                m.check().unwrap();
                let owned: usize = frags.iter().map(|a| a.extents().len()).sum();
                for a in &frags {
                    a.check(&m).unwrap();
                }
                let i = info(&m, f);
                prop_assert_eq!(i.total_extents - i.free_extents, owned as u64);
                let model_free = owned as u64 * 4 * EMPTY - used.values().map(|&u| u as u64).sum::<u64>();
                prop_assert_eq!(i.free_bytes_in_allocated_extents, model_free);
                let frag_free: u64 = frags.iter().map(|a| a.free_bytes()).sum();
                prop_assert_eq!(frag_free, model_free);
            }
        }
    }
}

#[test]
fn shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<TablespaceManager>();
    send_sync::<FragmentDiskAlloc>();
}

/// A WAL that cannot sync (LGMAN's undo file failed).
struct BrokenWal;

impl WalSync for BrokenWal {
    fn sync_to(&self, _lsn: Lsn) -> Result<()> {
        Err(codes::file_system_error("undo file sync failed"))
    }
}

#[test]
fn failed_formatting_removes_the_new_file() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/fs")).unwrap();
    let m = TablespaceManager::new(Arc::new(fs.clone()), "/fs", Arc::new(BrokenWal), 3);
    let ts = m.create_tablespace(spec("ts", 0, 0)).unwrap();
    let e = m.add_datafile(ts, "a.dat", file_of(1), 0, 1).unwrap_err();
    assert!(e.message.contains("undo file sync failed"), "{e:?}");
    assert!(fs.paths().is_empty(), "half-created file left behind");
    assert!(m.files_info().is_empty());
}
