//! Tests of the logfile group: round trips across pages, files and laps of the ring,
//! full log (1501), buffer memory (1504), back-pressure, sticky fsync failures,
//! corruption, reopen (in memory and on real files), online ADD UNDOFILE, concurrency.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::disk::io::{Faults, MemFileSystem, OsFileSystem};

const PAGE: u64 = DISK_PAGE_SIZE as u64;

fn cfg(buffer_bytes: u64) -> LogfileGroupConfig {
    LogfileGroupConfig {
        name: "lg".into(),
        id: 7,
        node_id: 2,
        undo_buffer_size_bytes: buffer_bytes,
    }
}

fn mem() -> (MemFileSystem, Arc<dyn FileSystem>) {
    let m = MemFileSystem::new();
    m.create_dir_all(Path::new("/lg")).unwrap();
    (m.clone(), Arc::new(m))
}

fn path(name: &str) -> PathBuf {
    PathBuf::from("/lg").join(name)
}

/// A file of `pages` undo pages.
fn file(name: &str, pages: u64) -> (PathBuf, u64) {
    (path(name), (pages + 1) * PAGE)
}

fn rec(i: u64, before_bytes: usize) -> UndoRecord {
    UndoRecord::TupleUpdate {
        file_no: (i % 5) as u32,
        page_no: i as u32,
        slot: (i * 7) as u32,
        before: vec![(i % 251) as u8; before_bytes],
    }
}

fn read_all(g: &LogfileGroup) -> Vec<(Lsn, UndoRecord)> {
    match g.last_lsn() {
        None => Vec::new(),
        Some(l) => g
            .read_backwards(l, 0)
            .unwrap()
            .map(|r| r.unwrap())
            .collect(),
    }
}

fn memory() -> SharedGlobalMemory {
    SharedGlobalMemory::new(64 * 1024 * 1024)
}

#[test]
fn round_trip_across_pages_files_and_laps() {
    let (_m, fs) = mem();
    let mem = memory();
    let files = [file("u1.dat", 3), file("u2.dat", 3)];
    let g = LogfileGroup::create(fs.clone(), &mem, cfg(4 * PAGE), &files).unwrap();
    let mut live: Vec<(Lsn, UndoRecord)> = Vec::new();
    let mut history: BTreeMap<Lsn, UndoRecord> = BTreeMap::new();
    let mut prev = 0;
    for i in 0..400u64 {
        let r = rec(i, 1000 + (i as usize * 37) % 6000);
        let lsn = g.append(&r).unwrap();
        assert!(lsn > prev, "LSNs increase");
        prev = lsn;
        live.push((lsn, r.clone()));
        history.insert(lsn, r);
        if i % 7 == 0 {
            g.sync_to(lsn).unwrap();
            assert!(g.durable_lsn() > lsn);
        }
        while g.log_space().used_bytes > 3 * DATA {
            live.remove(0);
            g.release_to(live[0].0);
        }
        if i % 50 == 49 {
            let mut want = live.clone();
            want.reverse();
            assert_eq!(read_all(&g), want, "after {i} records");
        }
    }
    assert!(
        g.next_lsn() > 3 * 6 * DATA,
        "the log went around the ring 3 times"
    );
    // Partial read: from the newest down to a bound.
    let mid = live[live.len() / 2].0;
    let part: Vec<Lsn> = g
        .read_backwards(live.last().unwrap().0, mid)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    let want: Vec<Lsn> = live
        .iter()
        .rev()
        .map(|e| e.0)
        .filter(|&l| l >= mid)
        .collect();
    assert_eq!(part, want);

    // Reopen: every record found is the one written, the live ones all are found.
    g.sync_to(prev).unwrap();
    let last = g.last_lsn();
    drop(g);
    assert_eq!(mem.used_bytes(), 0, "buffer memory released");
    let paths: Vec<PathBuf> = files.iter().map(|f| f.0.clone()).collect();
    let g = LogfileGroup::open(fs.clone(), &mem, cfg(4 * PAGE), &paths).unwrap();
    assert_eq!(g.last_lsn(), last);
    let found = read_all(&g);
    for (lsn, r) in &found {
        assert_eq!(history.get(lsn), Some(r), "LSN {lsn}");
    }
    for e in &live {
        assert!(found.contains(e), "live record {} lost", e.0);
    }
    // It goes on from there.
    let lsn = g.append(&UndoRecord::LcpStart { lcp_id: 9 }).unwrap();
    assert!(lsn > prev);
    g.sync_to(lsn).unwrap();
    assert_eq!(read_all(&g)[0], (lsn, UndoRecord::LcpStart { lcp_id: 9 }));
}

#[test]
fn full_log_is_1501_then_release_frees_space() {
    let (_m, fs) = mem();
    let g = LogfileGroup::create(fs, &memory(), cfg(2 * PAGE), &[file("u.dat", 4)]).unwrap();
    let mut lsns = Vec::new();
    let err = loop {
        match g.append(&rec(lsns.len() as u64, 3000)) {
            Ok(l) => lsns.push(l),
            Err(e) => break e,
        }
        assert!(lsns.len() < 100, "the log never filled");
    };
    assert_eq!(err.code, 1501);
    assert!(err.is_temporary());
    let before = (g.next_lsn(), g.log_space(), g.counters().records);
    assert_eq!(g.append(&rec(0, 3000)).unwrap_err().code, 1501);
    assert_eq!((g.next_lsn(), g.log_space(), g.counters().records), before);
    assert_eq!(g.counters().out_of_space, 2);
    // Three of the four pages used, the last one is kept for checkpoint records.
    assert!(g.log_space().used_bytes > 2 * DATA && g.log_space().used_bytes <= 3 * DATA);
    let lcp = g.append(&UndoRecord::LcpStart { lcp_id: 1 }).unwrap();
    g.sync_to(lcp).unwrap();
    let all = read_all(&g);
    assert_eq!(all.len(), lsns.len() + 1, "nothing lost or damaged");
    assert_eq!(all[0].1, UndoRecord::LcpStart { lcp_id: 1 });
    // A checkpoint completes: the log before its start is released.
    g.release_to(lcp);
    for i in 0..20 {
        g.append(&rec(1000 + i, 3000)).unwrap();
    }
    let all = read_all(&g);
    assert_eq!(all.len(), 21);
    assert_eq!(all.last().unwrap().0, lcp);
}

#[test]
fn undo_buffer_beyond_shared_global_memory_is_1504() {
    let (m, fs) = mem();
    let sgm = SharedGlobalMemory::new(1024 * 1024);
    let e = LogfileGroup::create(fs.clone(), &sgm, cfg(2 * 1024 * 1024), &[file("u.dat", 4)])
        .err()
        .unwrap();
    assert_eq!(e.code, 1504);
    assert!(m.paths().is_empty(), "no file created");
    assert_eq!(sgm.used_bytes(), 0);
    let g = LogfileGroup::create(fs, &sgm, cfg(1024 * 1024), &[file("u.dat", 4)]).unwrap();
    assert_eq!(sgm.used_bytes(), 1024 * 1024);
    assert_eq!(g.log_buffer().total_bytes, 1024 * 1024);
    let e = LogfileGroup::open(Arc::new(m), &sgm, cfg(64 * 1024), &g.paths())
        .err()
        .unwrap();
    assert_eq!(e.code, 1504, "the memory is taken while the group exists");
    drop(g);
    assert_eq!(sgm.used_bytes(), 0);
    let e = LogfileGroup::create(mem().1, &sgm, cfg(PAGE), &[file("u.dat", 4)])
        .err()
        .unwrap();
    assert_eq!(e.code, 779, "a buffer of one page is too small");
}

#[test]
fn full_buffer_is_written_out_by_append() {
    let (m, fs) = mem();
    let g = LogfileGroup::create(fs, &memory(), cfg(2 * PAGE), &[file("u.dat", 64)]).unwrap();
    let mut lsns = Vec::new();
    for i in 0..300 {
        lsns.push(g.append(&rec(i, 1500)).unwrap());
        assert!(g.log_buffer().used_bytes <= 2 * PAGE);
    }
    let c = g.counters();
    assert!(c.buffer_waits > 0, "{c:?}");
    assert!(c.pages_written >= 10, "{c:?}");
    assert_eq!(c.syncs, 0, "back-pressure writes, it does not sync");
    assert_eq!(m.stats().syncs, 1, "only the zero page was synced");
    assert_eq!(g.log_buffer().high_bytes, 2 * PAGE);
    g.sync_to(*lsns.last().unwrap()).unwrap();
    assert_eq!(g.log_buffer().used_bytes, 0);
    let all = read_all(&g);
    assert_eq!(all.len(), 300);
    for (i, (lsn, r)) in all.iter().rev().enumerate() {
        assert_eq!((*lsn, r), (lsns[i], &rec(i as u64, 1500)));
    }
}

#[test]
fn fsync_failure_is_sticky() {
    let (m, fs) = mem();
    let g = LogfileGroup::create(fs, &memory(), cfg(2 * PAGE), &[file("u.dat", 8)]).unwrap();
    let a = g.append(&rec(1, 100)).unwrap();
    g.sync_to(a).unwrap();
    let b = g.append(&rec(2, 100)).unwrap();
    m.set_faults(Faults {
        fail_syncs: true,
        ..Faults::default()
    });
    let e = g.sync_to(b).unwrap_err();
    assert_eq!(e.code, 1509);
    assert!(g.durable_lsn() <= b, "not durable after a failed sync");
    m.set_faults(Faults::default());
    assert_eq!(
        g.sync_to(b).unwrap_err().code,
        1509,
        "no retry that pretends"
    );
    assert_eq!(g.append(&rec(3, 100)).unwrap_err().code, 1509);
    assert_eq!(g.sync_to(a).unwrap_err().code, 1509);
}

#[test]
fn write_failure_during_back_pressure_is_sticky() {
    let (m, fs) = mem();
    let g = LogfileGroup::create(fs, &memory(), cfg(2 * PAGE), &[file("u.dat", 16)]).unwrap();
    m.set_faults(Faults {
        fail_writes: true,
        ..Faults::default()
    });
    let e = (0..100)
        .map(|i| g.append(&rec(i, 2000)))
        .find_map(|r| r.err())
        .unwrap();
    assert_eq!(e.code, 1509);
    m.set_faults(Faults::default());
    assert_eq!(g.append(&rec(0, 10)).unwrap_err().code, 1509);
}

#[test]
fn corruption_is_detected_by_open_and_read_backwards() {
    let (m, fs) = mem();
    let files = [file("u.dat", 8)];
    let g = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &files).unwrap();
    for i in 0..40 {
        g.append(&rec(i, 3000)).unwrap();
    }
    g.sync_to(g.last_lsn().unwrap()).unwrap();
    // A later batch: its pages record that the first one was durable.
    for i in 40..45 {
        g.append(&rec(i, 3000)).unwrap();
    }
    g.sync_to(g.last_lsn().unwrap()).unwrap();
    assert_eq!(read_all(&g).len(), 45);
    // A byte of record data in undo page 2.
    assert!(m.corrupt_byte(&files[0].0, 2 * PAGE + 5000));
    let e = g
        .read_backwards(g.last_lsn().unwrap(), 0)
        .unwrap()
        .find_map(|r| r.err())
        .unwrap();
    assert_eq!(e.code, 896);
    let paths = vec![files[0].0.clone()];
    let e = LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &paths)
        .err()
        .unwrap();
    assert_eq!(e.code, 896);
    // A damaged zero page too.
    assert!(m.corrupt_byte(&files[0].0, 2 * PAGE + 5000));
    assert!(m.corrupt_byte(&files[0].0, 40));
    let e = LogfileGroup::open(fs, &memory(), cfg(2 * PAGE), &paths)
        .err()
        .unwrap();
    assert_eq!(e.code, 896);
}

#[test]
fn open_skips_pages_that_never_became_durable() {
    let (_m, fs) = mem();
    let files = [file("u.dat", 16)];
    let g = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &files).unwrap();
    let mut durable = Vec::new();
    for i in 0..20 {
        durable.push((g.append(&rec(i, 2000)).unwrap(), rec(i, 2000)));
    }
    g.sync_to(durable.last().unwrap().0).unwrap();
    // More pages written by back-pressure, never synced; one of them is lost.
    for i in 20..120 {
        g.append(&rec(i, 2000)).unwrap();
    }
    let written = g.counters().pages_written;
    assert!(written >= 5);
    let durable_pages = (g.durable_lsn() - 1) / DATA;
    let lost_page_no = durable_pages + 2; // log page 1 is undo page 1
    let f = fs.open(&files[0].0).unwrap();
    f.write_at(&vec![0u8; DISK_PAGE_SIZE], lost_page_no * PAGE)
        .unwrap();
    drop(g);
    let g =
        LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &[files[0].0.clone()]).unwrap();
    let mut found = read_all(&g);
    found.reverse();
    assert!(found.len() >= durable.len());
    assert_eq!(&found[..durable.len()], &durable[..]);
    assert!(
        g.last_lsn().unwrap() < lost_page_no * DATA,
        "nothing after the lost page"
    );
    // The log goes on after the lost part; read backwards across the seam, now and
    // after another restart.
    let seam = g.last_lsn().unwrap();
    let mut after = Vec::new();
    for i in 0..5 {
        after.push((g.append(&rec(500 + i, 2000)).unwrap(), rec(500 + i, 2000)));
    }
    assert!(after[0].0 > seam);
    g.sync_to(after[4].0).unwrap();
    let mut want = found.clone();
    want.extend(after.iter().cloned());
    want.reverse();
    assert_eq!(read_all(&g), want);
    drop(g);
    let g = LogfileGroup::open(fs, &memory(), cfg(2 * PAGE), &[files[0].0.clone()]).unwrap();
    assert_eq!(read_all(&g), want);
}

#[test]
fn real_files_in_a_tempdir() {
    let tmp = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(OsFileSystem);
    let files = [
        (tmp.path().join("undo1.dat"), 5 * PAGE),
        (tmp.path().join("undo2.dat"), 4 * PAGE),
    ];
    let g = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &files).unwrap();
    let mut want = Vec::new();
    for i in 0..60 {
        want.push((g.append(&rec(i, 2500)).unwrap(), rec(i, 2500)));
    }
    g.sync_to(want.last().unwrap().0).unwrap();
    assert_eq!(
        std::fs::metadata(&files[1].0).unwrap().len(),
        4 * PAGE,
        "preallocated"
    );
    drop(g);
    let paths: Vec<PathBuf> = files.iter().map(|f| f.0.clone()).collect();
    let g = LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &paths).unwrap();
    want.reverse();
    assert_eq!(read_all(&g), want);
    let e = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &files)
        .err()
        .unwrap();
    assert_eq!(e.code, 760);
    let removed = g.drop_group().unwrap();
    assert_eq!(removed, paths);
    assert!(!files[0].0.exists() && !files[1].0.exists());
}

#[test]
fn create_errors() {
    let (m, fs) = mem();
    let sgm = memory();
    let e = LogfileGroup::create(fs.clone(), &sgm, cfg(2 * PAGE), &[(path("u"), 2 * PAGE)])
        .err()
        .unwrap();
    assert_eq!(e.code, 1516);
    let e = LogfileGroup::create(
        fs.clone(),
        &sgm,
        cfg(2 * PAGE),
        &[(PathBuf::from("/nodir/u"), 8 * PAGE)],
    )
    .err()
    .unwrap();
    assert_eq!(e.code, 1509);
    m.set_faults(Faults {
        capacity_bytes: Some(10 * PAGE),
        ..Faults::default()
    });
    let e = LogfileGroup::create(
        fs.clone(),
        &sgm,
        cfg(2 * PAGE),
        &[file("a", 4), file("b", 8)],
    )
    .err()
    .unwrap();
    assert_eq!(e.code, 1509);
    assert!(e.message.contains("No space"), "{e}");
    assert!(m.paths().is_empty(), "the first file is removed again");
    assert_eq!(sgm.used_bytes(), 0);
    m.set_faults(Faults::default());
    // Size rounded down to whole pages.
    let g = LogfileGroup::create(fs, &sgm, cfg(2 * PAGE), &[(path("u"), 5 * PAGE + 100)]).unwrap();
    let info = g.files_info();
    assert_eq!(info[0].undo_pages, 4);
    assert_eq!(info[0].initial_size_bytes, 5 * PAGE + 100);
    assert_eq!(m.used_bytes(), 5 * PAGE);
}

#[test]
fn add_undofile_online_gives_space() {
    let (m, fs) = mem();
    let g = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &[file("u1", 3)]).unwrap();
    let mut n = 0;
    while g.append(&rec(n, 4000)).is_ok() {
        n += 1;
    }
    let info = g.add_undofile(&path("u2"), 5 * PAGE).unwrap();
    assert_eq!(info.file_no, 1);
    assert!(
        info.in_ring,
        "the log does not cross the ring's end: joins at once"
    );
    assert_eq!(info.extra, format!("UNDO_BUFFER_SIZE={}", 2 * PAGE));
    assert_eq!(g.log_space().total_bytes, 7 * DATA);
    for i in 0..20 {
        g.append(&rec(n + i, 4000)).unwrap();
    }
    n += 20;
    g.sync_to(g.last_lsn().unwrap()).unwrap();
    assert_eq!(read_all(&g).len() as u64, n);
    assert_eq!(g.add_undofile(&path("u2"), 5 * PAGE).unwrap_err().code, 760);
    // Wrap around, then add a file while the live log crosses the ring's end: it waits.
    g.release_to(g.last_lsn().unwrap());
    let mut live = 0;
    while g.next_lsn() < 9 * DATA {
        g.append(&rec(n, 4000)).unwrap();
        n += 1;
        live += 1;
        if g.log_space().used_bytes > 4 * DATA {
            g.release_to(g.next_lsn() - 2 * DATA);
        }
    }
    let info = g.add_undofile(&path("u3"), 3 * PAGE).unwrap();
    assert!(!info.in_ring, "joins when the head reaches the ring's end");
    for _ in 0..40 {
        g.append(&rec(n, 4000)).unwrap();
        n += 1;
        g.release_to(g.next_lsn().saturating_sub(2 * DATA));
    }
    assert!(g.files_info()[2].in_ring);
    assert!(live > 0);
    g.sync_to(g.last_lsn().unwrap()).unwrap();
    let before = read_all(&g);
    drop(g);
    let g = LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &m.paths()).unwrap();
    let after = read_all(&g);
    assert!(after.len() >= before.len());
    assert_eq!(&after[..before.len()], &before[..]);
    let removed = LogfileGroup::remove_files(&*fs, &g.paths()).unwrap();
    assert_eq!(removed.len(), 3);
    assert!(m.paths().is_empty());
}

#[test]
fn monitoring_figures() {
    let (_m, fs) = mem();
    let g = LogfileGroup::create(fs, &memory(), cfg(4 * PAGE), &[file("u", 10)]).unwrap();
    assert_eq!(
        g.log_space(),
        LogUsage {
            total_bytes: 10 * DATA,
            used_bytes: 0,
            high_bytes: 0
        }
    );
    let a = g.append(&rec(1, 968)).unwrap();
    let r = rec(1, 968).encoded_len() as u64;
    assert_eq!(r, 1000);
    let b = g.append(&rec(2, 968)).unwrap();
    assert_eq!(b - a, 1000);
    assert_eq!(g.log_space().used_bytes, 2000);
    assert_eq!(g.log_buffer().used_bytes, PAGE);
    g.sync_to(b).unwrap();
    assert_eq!(g.log_buffer().used_bytes, 0);
    assert_eq!(g.log_buffer().high_bytes, PAGE);
    assert_eq!(g.log_space().used_bytes, DATA, "the synced page is closed");
    g.release_to(g.next_lsn());
    assert_eq!(g.log_space().used_bytes, 0);
    assert_eq!(g.log_space().high_bytes, 2000);
    let c = g.counters();
    assert_eq!(
        (c.records, c.bytes, c.syncs, c.pages_written),
        (2, 2000, 1, 1)
    );
    // A second sync with nothing new does no I/O.
    g.sync_to(b).unwrap();
    assert_eq!(g.counters().syncs, 1);
}

#[test]
fn concurrent_appends_get_unique_increasing_lsns() {
    let (_m, fs) = mem();
    let g = Arc::new(
        LogfileGroup::create(
            fs,
            &memory(),
            cfg(3 * PAGE),
            &[file("a", 40), file("b", 40)],
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..150u64 {
                    let r = rec(t * 1000 + i, 200 + (i as usize % 9) * 100);
                    let lsn = g.append(&r).unwrap();
                    if i % 10 == t {
                        g.sync_to(lsn).unwrap();
                        assert!(g.durable_lsn() > lsn);
                    }
                    mine.push((lsn, r));
                }
                mine
            })
        })
        .collect();
    let mut all = BTreeMap::new();
    for t in threads {
        let mine = t.join().unwrap();
        assert!(
            mine.windows(2).all(|w| w[0].0 < w[1].0),
            "increasing per thread"
        );
        for (l, r) in mine {
            assert!(all.insert(l, r).is_none(), "LSN {l} given twice");
        }
    }
    assert_eq!(all.len(), 600);
    let found: BTreeMap<Lsn, UndoRecord> = read_all(&g).into_iter().collect();
    assert_eq!(found, all);
}

#[test]
fn headers_and_trailers_split_across_pages() {
    let (m, fs) = mem();
    let g = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &[file("u", 8)]).unwrap();
    let big = |n: usize| UndoRecord::TupleFree {
        file_no: 1,
        page_no: 2,
        slot: 3,
        before: vec![9; n - 32],
    };
    let d = UNDO_DATA_BYTES;
    // The End record's trailer straddles pages 1 and 2.
    let mut want = vec![big(d - 10), UndoRecord::End];
    // Fill page 2 up to 2 bytes before its end: the next header straddles pages 2 and 3.
    want.push(big(d - 6 - 2));
    want.push(UndoRecord::LcpStart { lcp_id: 5 });
    want.push(big(d));
    let mut lsns = Vec::new();
    for r in &want {
        lsns.push(g.append(r).unwrap());
    }
    assert_eq!(lsns[1] % DATA, DATA - 10);
    assert_eq!(lsns[3] % DATA, DATA - 2);
    assert!(
        g.append(&big(d + 1)).is_err(),
        "a record larger than a page is refused"
    );
    let syncs = m.stats().syncs;
    g.sync_to(lsns[4]).unwrap();
    assert_eq!(
        m.stats().syncs,
        syncs + 1,
        "one fdatasync for all the records"
    );
    let check = |g: &LogfileGroup| {
        let got = read_all(g);
        let exp: Vec<(Lsn, UndoRecord)> = lsns
            .iter()
            .cloned()
            .zip(want.iter().cloned())
            .rev()
            .collect();
        assert_eq!(got, exp);
    };
    check(&g);
    drop(g);
    let g = LogfileGroup::open(fs, &memory(), cfg(2 * PAGE), &m.paths()).unwrap();
    check(&g);
    assert!(g.read_backwards(lsns[0] - 1, 0).is_err(), "before the tail");
    assert!(g.read_backwards(g.next_lsn(), 0).is_err(), "after the head");
}

#[test]
fn pending_file_stays_pending_across_a_restart() {
    let (m, fs) = mem();
    let g = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &[file("u1", 4)]).unwrap();
    // Go around once so that the live log crosses the ring's end.
    let mut last = 0;
    while g.next_lsn() < 5 * DATA + 4000 {
        last = g.append(&rec(1, 3000)).unwrap();
        g.release_to(g.next_lsn().saturating_sub(DATA));
    }
    g.sync_to(last).unwrap();
    assert!(!g.add_undofile(&path("u2"), 4 * PAGE).unwrap().in_ring);
    let before = read_all(&g);
    drop(g);
    let g = LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &m.paths()).unwrap();
    let info = g.files_info();
    assert_eq!(info.len(), 2);
    assert!(info[0].in_ring && !info[1].in_ring);
    let after = read_all(&g);
    assert_eq!(
        &after[..before.len().min(after.len())],
        &before[..before.len().min(after.len())]
    );
    assert!(!after.is_empty() && after[0] == before[0]);
    // The head reaches the ring's end: the file joins, the log runs through it.
    g.release_to(g.next_lsn());
    let mut n = 0;
    while !g.files_info()[1].in_ring || n < 30 {
        g.append(&rec(n, 3000)).unwrap();
        g.release_to(g.next_lsn().saturating_sub(DATA));
        n += 1;
        assert!(n < 200);
    }
    assert_eq!(g.log_space().total_bytes, 7 * DATA);
    g.sync_to(g.last_lsn().unwrap()).unwrap();
    let before = read_all(&g);
    drop(g);
    let g = LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &m.paths()).unwrap();
    assert!(g.files_info()[1].in_ring);
    let after = read_all(&g);
    assert!(after.len() >= before.len() && !before.is_empty());
    assert_eq!(&after[..before.len()], &before[..]);
}

#[test]
fn open_checks_the_files() {
    let (m, fs) = mem();
    let g = LogfileGroup::create(fs.clone(), &memory(), cfg(2 * PAGE), &[file("u", 4)]).unwrap();
    let l = g.append(&UndoRecord::End).unwrap();
    g.sync_to(l).unwrap();
    drop(g);
    let mut other = cfg(2 * PAGE);
    other.id = 8;
    let e = LogfileGroup::open(fs.clone(), &memory(), other, &m.paths())
        .err()
        .unwrap();
    assert_eq!(e.code, 896, "{e}");
    let e = LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &[path("missing")])
        .err()
        .unwrap();
    assert_eq!(e.code, 1509);
    assert!(LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &[]).is_err());
    // A file that is not an undo file.
    let f = fs.create(&path("junk"), 4 * PAGE).unwrap();
    f.write_at(&[1u8; 100], 0).unwrap();
    let e = LogfileGroup::open(fs.clone(), &memory(), cfg(2 * PAGE), &[path("junk")])
        .err()
        .unwrap();
    assert_eq!(e.code, 896);
    let g = LogfileGroup::open(fs, &memory(), cfg(2 * PAGE), &[path("u")]).unwrap();
    assert_eq!(read_all(&g), vec![(l, UndoRecord::End)]);
}

/// A power loss while the head pages are written tears them (sector by sector): open
/// takes them as never written and keeps every record synced before.
#[test]
fn a_torn_head_page_is_not_part_of_the_log() {
    let mut torn_seen = 0;
    for seed in 0..40u64 {
        let (m, fs) = mem();
        let files = [file("u.dat", 16)];
        let g = LogfileGroup::create(fs.clone(), &memory(), cfg(4 * PAGE), &files).unwrap();
        let mut durable = Vec::new();
        for i in 0..12 {
            durable.push((g.append(&rec(i, 2500)).unwrap(), rec(i, 2500)));
        }
        g.sync_to(durable.last().unwrap().0).unwrap();
        for i in 12..30 {
            g.append(&rec(i, 2500)).unwrap();
        }
        m.crash_at(crate::disk::io::IoOp::Sync, 1, seed);
        assert!(g.sync_to(g.last_lsn().unwrap()).is_err(), "the power went");
        let image = m.take_crash_image().expect("image");
        let paths = vec![files[0].0.clone()];
        let img_fs: Arc<dyn FileSystem> = Arc::new(image.clone());
        let before = (1..=16u32)
            .filter(|&p| {
                let f = img_fs.open(&paths[0]).unwrap();
                let mut b = vec![0u8; DISK_PAGE_SIZE];
                f.read_at(&mut b, p as u64 * PAGE).unwrap();
                crate::disk::page::verify(&b, 0, p).is_err()
            })
            .count();
        torn_seen += before;
        let g2 = LogfileGroup::open(img_fs, &memory(), cfg(4 * PAGE), &paths)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let got = read_all(&g2);
        assert!(
            got.len() >= durable.len(),
            "seed {seed}: {} records",
            got.len()
        );
        let mut oldest_first: Vec<_> = got.into_iter().rev().collect();
        oldest_first.truncate(durable.len());
        assert_eq!(oldest_first, durable, "seed {seed}");
    }
    assert!(torn_seen > 0, "no seed tore a page");
}
