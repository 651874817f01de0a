//! Tests of the REDO log, writing side: round trips across blocks, files, parts and
//! laps, merge order, back-pressure (410 / 1221 / 1220), sticky I/O errors, create
//! failures, fill hook, part assignment, concurrent committers. Replay, restart and
//! real files: `tests_replay.rs`; randomized crashes: `tests_crash.rs`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

use super::*;
use crate::disk::io::{Faults, MemFileSystem};

pub(super) type Rec = (RecordHeader, Vec<u8>);

pub(super) fn cfg(parts: u32, files: u32, blocks_per_file: u64, buffer_blocks: u64) -> RedoConfig {
    RedoConfig {
        parts,
        files_per_part: files,
        file_size_bytes: (blocks_per_file + 1) * BLOCK_BYTES as u64,
        buffer_bytes: u64::from(parts) * buffer_blocks * BLOCK_BYTES as u64,
        init_full: false,
        // Generous: a loaded machine may keep the writer thread from a core for a
        // while; the tests of the overload errors set a short limit themselves.
        overload_limit_ms: 10_000,
    }
}

pub(super) fn dir() -> PathBuf {
    PathBuf::from("/fs/ndb_2_fs")
}

pub(super) fn mem() -> (MemFileSystem, Arc<dyn FileSystem>) {
    let m = MemFileSystem::new();
    let fs: Arc<dyn FileSystem> = Arc::new(m.clone());
    (m, fs)
}

/// A record whose payload is derived from its identity (so a mix-up shows).
pub(super) fn rec(gci: u64, table_id: u32, fragment_id: u32, len: usize) -> Rec {
    let h = RecordHeader {
        gci,
        table_id,
        fragment_id,
        kind: (len % 3) as u8,
    };
    let seed = gci as u32 ^ table_id.rotate_left(8) ^ fragment_id.rotate_left(16);
    let p = (0..len).map(|i| (seed as usize + i * 7) as u8).collect();
    (h, p)
}

pub(super) fn append_all(log: &RedoLog, part: u32, recs: &[Rec]) -> Lsn {
    let mut b = EncodedRecords::new();
    for (h, p) in recs {
        b.push(h, p);
    }
    log.wait_for_room(part, b.bytes()).unwrap();
    log.append(part, &b)
}

pub(super) fn replay_all(
    fs: &dyn FileSystem,
    cfg: &RedoConfig,
    from: &[Lsn],
    durable: &[Lsn],
    max_gci: u64,
) -> Result<(Vec<Rec>, ReplayStats)> {
    let mut got = Vec::new();
    let stats = replay(fs, &dir(), cfg, from, durable, max_gci, &mut |h, p| {
        got.push((*h, p.to_vec()));
        Ok(())
    })?;
    Ok((got, stats))
}

/// The order replay must produce: by gci, equal gcis by part, then log order.
pub(super) fn merged(per_part: &[Vec<Rec>]) -> Vec<Rec> {
    let mut all: Vec<(u64, usize, usize, Rec)> = Vec::new();
    for (p, recs) in per_part.iter().enumerate() {
        for (i, r) in recs.iter().enumerate() {
            all.push((r.0.gci, p, i, r.clone()));
        }
    }
    all.sort_by_key(|a| (a.0, a.1, a.2));
    all.into_iter().map(|a| a.3).collect()
}

#[test]
fn round_trip_across_blocks_files_and_parts_merged_by_gci() {
    let (_m, fs) = mem();
    let c = cfg(3, 3, 20, 8);
    let log = RedoLog::create(fs.clone(), &dir(), c.clone()).unwrap();
    assert_eq!(log.parts(), 3);
    let mut per_part: Vec<Vec<Rec>> = vec![Vec::new(); 3];
    let mut durable = Vec::new();
    let sizes = [
        0usize,
        10,
        100,
        3000,
        PAYLOAD_BYTES - 28,
        PAYLOAD_BYTES - 27,
        9000,
        17,
    ];
    let mut n = 0usize;
    for gci in 1..=6u64 {
        for part in 0..3u32 {
            // Part 1 skips odd gcis, so merge order is exercised.
            if part == 1 && gci % 2 == 1 {
                continue;
            }
            let recs: Vec<Rec> = (0..4)
                .map(|i| {
                    n += 1;
                    rec(gci, part * 10 + i, i, sizes[n % sizes.len()])
                })
                .collect();
            let end = append_all(&log, part, &recs);
            assert_eq!(end, log.head()[part as usize]);
            per_part[part as usize].extend(recs);
        }
        durable = log.seal_and_sync().unwrap();
        assert_eq!(durable, log.durable());
    }
    let heads = log.head();
    assert_eq!(
        durable, heads,
        "a sync leaves every part on a block boundary"
    );
    drop(log);
    let (got, stats) = replay_all(&*fs, &c, &[0, 0, 0], &durable, 6).unwrap();
    assert_eq!(got.len(), per_part.iter().map(Vec::len).sum::<usize>());
    assert_eq!(got, merged(&per_part));
    assert_eq!(stats.records_applied, got.len() as u64);
    for (p, s) in stats.parts.iter().enumerate() {
        assert_eq!(s.records_abandoned, 0);
        assert_eq!(s.max_gci_seen, 6);
        assert_eq!(s.end, durable[p], "replay ends after the last block");
    }
}

pub(super) fn payload_lsn() -> u64 {
    PAYLOAD_BYTES as u64
}

#[test]
fn ring_wraps_after_release_before_and_replays_the_live_part() {
    let (_m, fs) = mem();
    // One part of 3 files x 4 blocks: 12 blocks, 2 kept in reserve.
    let c = cfg(1, 3, 4, 4);
    let log = RedoLog::create(fs.clone(), &dir(), c.clone()).unwrap();
    let capacity = log.usage()[0].total_file_bytes;
    assert_eq!(capacity, 12 * payload_lsn());
    let mut written: Vec<(Lsn, Rec)> = Vec::new();
    let mut durable = vec![0];
    for gci in 1..=40u64 {
        let start = log.head()[0];
        let recs: Vec<Rec> = (0..3)
            .map(|i| rec(gci, 7, i, 500 + (gci as usize * 97) % 1000))
            .collect();
        append_all(&log, 0, &recs);
        for r in recs {
            written.push((start, r));
        }
        durable = log.seal_and_sync().unwrap();
        // The checkpoint keeps the last 3 gcis: release what is older.
        if gci > 3 {
            let keep_from = written.iter().find(|(_, r)| r.0.gci == gci - 2).unwrap().0;
            log.release_before(0, keep_from);
        }
    }
    let tail = log.tail();
    assert!(
        log.head()[0] > 3 * capacity,
        "the ring wrapped several times"
    );
    assert!(log.usage()[0].high_file_bytes <= capacity);
    drop(log);
    let (got, stats) = replay_all(&*fs, &c, &tail, &durable, u64::MAX).unwrap();
    let want: Vec<Rec> = written
        .iter()
        .filter(|(lsn, _)| *lsn >= tail[0])
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(want.iter().map(|r| r.0.gci).min(), Some(38));
    assert_eq!(got, want);
    assert_eq!(stats.parts[0].end, durable[0]);
    assert_eq!(stats.parts[0].records_before_from, 0);
    let reason = &stats.parts[0].stop_reason;
    assert!(
        reason.contains("another lap"),
        "stopped at an older lap block: {reason}"
    );
}

#[test]
fn wait_for_room_gives_410_when_the_files_are_full_until_released() {
    let (_m, fs) = mem();
    let mut c = cfg(1, 3, 4, 8);
    c.overload_limit_ms = 30;
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    let batch_of = |gci| {
        let mut b = EncodedRecords::new();
        let (h, p) = rec(gci, 1, 1, 3000);
        b.push(&h, &p);
        b
    };
    let mut gci = 1;
    let err = loop {
        let b = batch_of(gci);
        match log.wait_for_room(0, b.bytes()) {
            Ok(()) => {
                log.append(0, &b);
                log.seal_and_sync().unwrap();
                gci += 1;
            }
            Err(e) => break e,
        }
        assert!(gci < 100, "the log never filled");
    };
    assert_eq!(err.code, 410);
    assert!(err.is_temporary());
    let k = log.counters();
    assert_eq!(
        (k.file_waits, k.file_overloads, k.buffer_overloads),
        (1, 1, 0)
    );
    // Ten blocks usable (two reserved): ten single-block gcis fit.
    assert_eq!(gci, 11);
    // A checkpoint frees the space: the same commit now goes through at once.
    log.release_before(0, log.head()[0]);
    let b = batch_of(gci);
    log.wait_for_room(0, b.bytes()).unwrap();
    log.append(0, &b);
    log.seal_and_sync().unwrap();
    // Larger than the whole part can ever hold: 1220 at once.
    let e = log.wait_for_room(0, 20 * PAYLOAD_BYTES).unwrap_err();
    assert_eq!(e.code, 1220);
}

/// A one-part log with 8 of its 10 usable blocks written and synced (a commit of 4
/// blocks must wait for a checkpoint), waits bounded at 5 s.
fn nearly_full_log() -> Arc<RedoLog> {
    let (_m, fs) = mem();
    let mut c = cfg(1, 3, 4, 8);
    c.overload_limit_ms = 5_000;
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    let mut b = EncodedRecords::new();
    let (h, p) = rec(1, 1, 1, 3000);
    b.push(&h, &p);
    while log.head()[0] < 8 * payload_lsn() {
        log.append(0, &b);
        log.seal_and_sync().unwrap();
    }
    log
}

#[test]
fn waiting_committer_proceeds_when_a_checkpoint_releases_space() {
    let log = nearly_full_log();
    let fired = Arc::new(AtomicU32::new(0));
    let f2 = fired.clone();
    let log2 = log.clone();
    log.set_fill_hook(Box::new(move |part, _pct| {
        // The checkpoint side: release everything, from another thread.
        f2.fetch_add(1, Ordering::SeqCst);
        let l = log2.clone();
        std::thread::spawn(move || l.release_before(part, l.head()[part as usize]));
    }));
    log.wait_for_room(0, 4 * PAYLOAD_BYTES).unwrap();
    assert!(
        fired.load(Ordering::SeqCst) >= 1,
        "the hook started a checkpoint"
    );
    assert_eq!(log.usage()[0].used_file_bytes, 0);
    log.set_fill_hook(Box::new(|_, _| {}));
}

/// A commit waiting for file space is visible to the checkpoint side (which then writes
/// unpaced) until a release lets it through.
#[test]
fn commits_waiting_for_file_space_are_visible() {
    let log = nearly_full_log();
    assert!(!log.commits_wait_for_files());
    let log2 = log.clone();
    let committer = std::thread::spawn(move || log2.wait_for_room(0, 4 * PAYLOAD_BYTES));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !log.commits_wait_for_files() {
        assert!(
            std::time::Instant::now() < deadline,
            "the committer never waited"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    log.release_before(0, log.head()[0]);
    committer.join().unwrap().unwrap();
    assert!(!log.commits_wait_for_files());
}

#[test]
fn buffer_that_cannot_drain_gives_1221_and_write_errors_are_sticky() {
    let (m, fs) = mem();
    let mut c = cfg(1, 3, 32, 4);
    c.overload_limit_ms = 30;
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    m.set_faults(Faults {
        fail_writes: true,
        ..Faults::default()
    });
    let mut b = EncodedRecords::new();
    let (h, p) = rec(1, 1, 1, 1000);
    b.push(&h, &p);
    let err = loop {
        match log.wait_for_room(0, b.bytes()) {
            Ok(()) => {
                log.append(0, &b);
            }
            Err(e) => break e,
        }
        assert!(
            log.head()[0] < 20 * payload_lsn(),
            "the buffer never filled"
        );
    };
    assert_eq!(err.code, 1221, "{err}");
    assert!(err.is_temporary());
    let k = log.counters();
    assert_eq!((k.buffer_overloads, k.file_overloads), (1, 0));
    assert!(k.buffer_waits >= 1);
    let u = log.usage()[0];
    assert!(u.buffer_used_bytes + b.bytes() as u64 > u.buffer_capacity_bytes / 2);
    // The group commit reports the write error, and keeps reporting it.
    let e = log.seal_and_sync().unwrap_err();
    assert_eq!(e.code, 1509);
    m.set_faults(Faults::default());
    assert_eq!(log.seal_and_sync().unwrap_err(), e);
}

#[test]
fn a_blocked_writer_holds_committers_back_and_they_resume_when_it_drains() {
    let (_m, fs) = mem();
    let mut c = cfg(1, 3, 32, 4);
    c.overload_limit_ms = 5_000;
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    let mut b = EncodedRecords::new();
    let (h, p) = rec(1, 1, 1, 1000);
    b.push(&h, &p);
    // Hold the part's io lock: the writer cannot write, the buffer fills.
    let io = log.inner.parts[0].io.lock();
    let log2 = log.clone();
    let b2 = b.clone();
    let committer = std::thread::spawn(move || {
        for _ in 0..40 {
            log2.wait_for_room(0, b2.bytes()).unwrap();
            log2.append(0, &b2);
        }
    });
    let cap = log.usage()[0].buffer_capacity_bytes;
    let mut waited = false;
    for _ in 0..200 {
        std::thread::sleep(std::time::Duration::from_millis(2));
        let st = log.inner.parts[0].state.lock();
        if st.waiters > 0 {
            waited = true;
            assert!(
                st.buffer_used_bytes() <= cap,
                "no overshoot with one committer"
            );
            break;
        }
    }
    assert!(waited, "the committer never waited for the buffer");
    drop(io);
    committer.join().unwrap();
    assert_eq!(
        log.head()[0],
        40 * b.bytes() as u64,
        "LSNs are contiguous across blocks"
    );
    let u = log.usage()[0];
    assert!(u.buffer_high_bytes <= cap);
    log.seal_and_sync().unwrap();
}

#[test]
fn fdatasync_failure_is_returned_and_never_retried() {
    let (m, fs) = mem();
    let c = cfg(2, 3, 8, 4);
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    append_all(&log, 1, &[rec(1, 1, 1, 100)]);
    m.set_faults(Faults {
        fail_syncs: true,
        ..Faults::default()
    });
    let e = log.seal_and_sync().unwrap_err();
    assert_eq!(e.code, 1509);
    assert!(
        e.message.contains("fdatasync") && e.message.contains("D9/DBLQH"),
        "{e}"
    );
    m.set_faults(Faults::default());
    let syncs = m.stats().syncs;
    assert_eq!(log.seal_and_sync().unwrap_err(), e, "sticky");
    assert_eq!(m.stats().syncs, syncs, "no second fdatasync");
}

#[test]
fn create_refuses_existing_files_and_cleans_up_after_enospc() {
    let (m, fs) = mem();
    // InitFragmentLogFiles=full allocates at create: a full disk shows now (sparse
    // files would meet it at their first write).
    let mut c = cfg(2, 3, 8, 4);
    c.init_full = true;
    m.set_faults(Faults {
        capacity_bytes: Some(4 * 9 * BLOCK_BYTES as u64),
        ..Faults::default()
    });
    let e = RedoLog::create(fs.clone(), &dir(), c.clone())
        .err()
        .unwrap();
    assert_eq!(e.code, 1509);
    assert!(
        e.message.contains("No space") || e.message.contains("os error 28"),
        "{e}"
    );
    assert!(m.paths().is_empty(), "files removed: {:?}", m.paths());
    m.set_faults(Faults::default());
    let log = RedoLog::create(fs.clone(), &dir(), c.clone()).unwrap();
    assert_eq!(m.paths().len(), 6);
    assert!(m.paths().contains(&dir().join("D9/DBLQH/S2.FragLog")));
    drop(log);
    let e = RedoLog::create(fs, &dir(), c).err().unwrap();
    assert_eq!(e.code, 760);
}

#[test]
fn fill_hook_fires_at_each_step_and_rearms_after_release() {
    let (_m, fs) = mem();
    let c = cfg(2, 2, 25, 8);
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    log.set_fill_hook(Box::new(move |part, pct| s2.lock().push((part, pct))));
    // 50 blocks; about 22 of them filled in part 1.
    for gci in 1..=22 {
        append_all(&log, 1, &[rec(gci, 1, 1, PAYLOAD_BYTES - 28)]);
    }
    let steps: Vec<(u32, u32)> = seen.lock().clone();
    assert_eq!(
        steps.iter().map(|s| s.1 / 10).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert!(steps.iter().all(|s| s.0 == 1));
    seen.lock().clear();
    log.release_before(1, log.head()[1]);
    for gci in 23..=28 {
        append_all(&log, 1, &[rec(gci, 1, 1, PAYLOAD_BYTES - 28)]);
    }
    assert_eq!(
        seen.lock().iter().map(|s| s.1 / 10).collect::<Vec<_>>(),
        vec![1]
    );
}

#[test]
fn assign_part_spreads_fragments_and_avoids_loaded_parts() {
    let (_m, fs) = mem();
    let c = cfg(4, 2, 25, 8);
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    let first: Vec<u32> = (0..4).map(|_| log.assign_part()).collect();
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 1, 2, 3], "one fragment per part first");
    for _ in 0..4 {
        log.assign_part();
    }
    assert!(log.usage().iter().all(|u| u.fragments == 2));
    // Part 2 carries a hot fragment: a third of its files in use.
    for gci in 1..=17 {
        append_all(&log, 2, &[rec(gci, 1, 1, PAYLOAD_BYTES - 28)]);
    }
    let next: Vec<u32> = (0..6).map(|_| log.assign_part()).collect();
    assert!(!next.contains(&2), "{next:?}");
    assert!(
        log.usage()
            .iter()
            .enumerate()
            .all(|(p, u)| u.fragments == if p == 2 { 2 } else { 4 })
    );
    // Once a checkpoint frees part 2, it gets the next fragments again.
    log.release_before(2, log.head()[2]);
    assert_eq!(log.assign_part(), 2);
}

#[test]
fn concurrent_committers_and_group_commits_lose_nothing() {
    use std::sync::atomic::AtomicU64;
    let (m, fs) = mem();
    let c = cfg(4, 4, 128, 8);
    let log = RedoLog::create(fs, &dir(), c.clone()).unwrap();
    let gci = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sealer = {
        let (log, gci, stop) = (log.clone(), gci.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                log.seal_and_sync().unwrap();
                gci.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let workers: Vec<_> = (0..4u32)
        .map(|t| {
            let (log, gci) = (log.clone(), gci.clone());
            std::thread::spawn(move || {
                let part = log.assign_part();
                let mut mine = Vec::new();
                let mut b = EncodedRecords::new();
                for seq in 0..300u32 {
                    b.clear();
                    let n = 1 + seq % 3;
                    for k in 0..n {
                        let g = gci.load(Ordering::SeqCst);
                        let r = rec(
                            g,
                            t,
                            seq * 4 + k,
                            100 + ((seq * 37 + k * 11) % 1900) as usize,
                        );
                        b.push(&r.0, &r.1);
                        mine.push(r);
                    }
                    log.wait_for_room(part, b.bytes()).unwrap();
                    log.append(part, &b);
                }
                (part, mine)
            })
        })
        .collect();
    let mut per_part: Vec<Vec<Rec>> = vec![Vec::new(); 4];
    for w in workers {
        let (part, mine) = w.join().unwrap();
        per_part[part as usize].extend(mine);
    }
    stop.store(true, Ordering::SeqCst);
    sealer.join().unwrap();
    let durable = log.seal_and_sync().unwrap();
    assert!(log.usage().iter().all(|u| u.fragments == 1));
    drop(log);
    let (got, stats) = replay_all(&m, &c, &[0; 4], &durable, u64::MAX).unwrap();
    assert_eq!(got.len(), per_part.iter().map(Vec::len).sum::<usize>());
    assert_eq!(got, merged(&per_part));
    assert!(
        stats
            .parts
            .iter()
            .all(|p| p.records_abandoned == 0 && p.records_out_of_order == 0)
    );
}

#[test]
fn config_from_the_data_node_section() {
    use crate::config::ClusterConfig;
    let defaults =
        ClusterConfig::parse("[ndbd default]\nNoOfReplicas=1\n[ndbd]\n", "config.ini").unwrap();
    let c = RedoConfig::from_node(&defaults.data_nodes[0]);
    assert_eq!(
        c,
        RedoConfig {
            parts: 4,
            files_per_part: 16,
            file_size_bytes: 16 << 20,
            buffer_bytes: 32 << 20,
            init_full: false,
            overload_limit_ms: 20_000,
        }
    );
    let geo = c.geometry().unwrap();
    assert_eq!(geo.buffer_blocks, (8 << 20) / BLOCK_BYTES);
    assert_eq!(geo.ring_blocks, 16 * 4095);
    let text = "[ndbd default]\nNoOfReplicas=1\nNoOfFragmentLogParts=8\nNoOfFragmentLogFiles=3\n\
                FragmentLogFileSize=4M\nRedoBuffer=8M\nInitFragmentLogFiles=full\nRedoOverCommitLimit=5\n[ndbd]\n";
    let set = ClusterConfig::parse(text, "config.ini").unwrap();
    let c = RedoConfig::from_node(&set.data_nodes[0]);
    assert_eq!(
        (
            c.parts,
            c.files_per_part,
            c.file_size_bytes,
            c.buffer_bytes,
            c.init_full,
            c.overload_limit_ms
        ),
        (8, 3, 4 << 20, 8 << 20, true, 5_000)
    );
    let mut bad = c.clone();
    bad.parts = 33;
    assert_eq!(bad.geometry().unwrap_err().code, 5000);
}

#[test]
fn background_writer_drains_full_blocks_between_group_commits() {
    let (m, fs) = mem();
    let c = cfg(1, 3, 64, 64);
    let log = RedoLog::create(fs, &dir(), c).unwrap();
    let (writes_before, syncs_before) = (m.stats().writes, m.stats().syncs);
    // 40 full blocks, no seal_and_sync.
    for gci in 1..=40 {
        append_all(&log, 0, &[rec(gci, 1, 1, PAYLOAD_BYTES - 28)]);
    }
    let mut drained = false;
    for _ in 0..500 {
        if log.usage()[0].buffer_used_bytes < 16 * payload_lsn() {
            drained = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(
        drained,
        "buffer still holds {} bytes",
        log.usage()[0].buffer_used_bytes
    );
    let s = m.stats();
    assert!(s.writes > writes_before, "the writer wrote");
    assert_eq!(s.syncs, syncs_before, "the writer never fdatasyncs");
    assert_eq!(
        log.durable(),
        vec![0],
        "nothing is durable before a group commit"
    );
    assert_eq!(log.seal_and_sync().unwrap(), log.head());
}

#[test]
fn group_commit_with_nothing_new_does_no_io() {
    let (m, fs) = mem();
    let log = RedoLog::create(fs, &dir(), cfg(2, 3, 8, 4)).unwrap();
    append_all(&log, 0, &[rec(1, 1, 1, 100)]);
    let d = log.seal_and_sync().unwrap();
    let s = m.stats();
    assert_eq!(log.seal_and_sync().unwrap(), d);
    assert_eq!((m.stats().writes, m.stats().syncs), (s.writes, s.syncs));
    // One record in part 1 only: one write and one fdatasync, part 0 untouched.
    append_all(&log, 1, &[rec(2, 1, 1, 100)]);
    let d2 = log.seal_and_sync().unwrap();
    assert_eq!(d2[0], d[0]);
    assert_eq!(d2[1], d[1] + payload_lsn());
    assert_eq!(
        (m.stats().writes, m.stats().syncs),
        (s.writes + 1, s.syncs + 1)
    );
}

#[test]
fn group_commit_syncs_every_part_once_in_parallel() {
    let (m, fs) = mem();
    let log = RedoLog::create(fs, &dir(), cfg(4, 3, 8, 4)).unwrap();
    for part in 0..4 {
        append_all(&log, part, &[rec(1, part, 1, 3000)]);
    }
    let syncs = m.stats().syncs;
    let d = log.seal_and_sync().unwrap();
    assert_eq!(m.stats().syncs, syncs + 4, "one fdatasync per file written");
    assert_eq!(d, vec![payload_lsn(); 4]);
    let k = log.counters();
    assert_eq!((k.group_commits, k.fdatasyncs, k.blocks_written), (1, 4, 4));
    assert_eq!(
        (k.records, k.record_bytes),
        (4, 4 * encoded_len(3000) as u64)
    );
    assert_eq!(
        k.padding_bytes,
        4 * (payload_lsn() - encoded_len(3000) as u64)
    );
    // Every file's fdatasync fails: each was attempted once, one error comes back.
    for part in 0..4 {
        append_all(&log, part, &[rec(2, part, 1, 3000)]);
    }
    m.set_faults(Faults {
        fail_syncs: true,
        ..Faults::default()
    });
    let failures = m.stats().injected_failures;
    assert_eq!(log.seal_and_sync().unwrap_err().code, 1509);
    assert_eq!(m.stats().injected_failures, failures + 4);
}
