//! Tests of the REDO log, restart side: torn tails and corruption at and before
//! `durable_end`, record checksums, reopen after recovery, restart cuts voiding what
//! was written after the cut (with GCIs reused), replay from inside the log, and one
//! run on real files (`OsFileSystem`).

use std::path::PathBuf;
use std::sync::Arc;

use super::tests::{Rec, append_all, cfg, dir, mem, merged, payload_lsn, rec, replay_all};
use super::*;
use crate::disk::io::{MemFileSystem, OsFileSystem};

/// File and byte offset of log block `block_no` of `part`.
fn block_at(c: &RedoConfig, part: u32, block_no: u64) -> (PathBuf, u64) {
    let geo = c.geometry().unwrap();
    let (file_no, page_no) = geo.location(block_no);
    (
        file_path(&dir(), part, file_no),
        u64::from(page_no) * BLOCK_BYTES as u64,
    )
}

/// Two gcis synced, a third written but not covered by durable_end.
fn three_gcis(c: &RedoConfig) -> (MemFileSystem, Vec<Rec>, Vec<Lsn>, Vec<Lsn>) {
    let (m, fs) = mem();
    let log = RedoLog::create(fs, &dir(), c.clone()).unwrap();
    let mut recs = Vec::new();
    let mut durable = Vec::new();
    for gci in 1..=3u64 {
        let batch: Vec<Rec> = (0..5).map(|i| rec(gci, 1, i, 700)).collect();
        append_all(&log, 0, &batch);
        recs.extend(batch);
        let d = log.seal_and_sync().unwrap();
        if gci == 2 {
            durable = d;
        }
    }
    let heads = log.head();
    drop(log);
    (m, recs, durable, heads)
}

#[test]
fn torn_tail_after_durable_end_stops_the_part_there() {
    let c = cfg(1, 2, 16, 8);
    let (m, recs, durable, heads) = three_gcis(&c);
    assert!(heads[0] > durable[0]);
    // Damage the first block after durable_end (the third gci's).
    let (path, off) = block_at(&c, 0, durable[0] / payload_lsn());
    assert!(m.corrupt_byte(&path, off + 300));
    let (got, stats) = replay_all(&m, &c, &[0], &durable, 10).unwrap();
    assert_eq!(got, recs[..10].to_vec(), "gcis 1 and 2 intact, 3 lost");
    assert_eq!(stats.parts[0].end, durable[0]);
    assert_eq!(stats.parts[0].stop_lsn, durable[0]);
    assert!(
        stats.parts[0].stop_reason.contains("checksum"),
        "{}",
        stats.parts[0].stop_reason
    );
    // Undamaged, the third gci is written but was never declared durable: replay
    // never applies anything at or after durable_end.
    let (m2, recs2, durable2, heads2) = three_gcis(&c);
    assert!(heads2[0] > durable2[0]);
    let (got2, stats2) = replay_all(&m2, &c, &[0], &durable2, 10).unwrap();
    assert_eq!(got2, recs2[..10].to_vec());
    assert_eq!(stats2.parts[0].end, durable2[0]);
}

#[test]
fn damage_before_durable_end_is_corruption_naming_part_file_and_offset() {
    let c = cfg(1, 2, 16, 8);
    let (m, _recs, durable, _) = three_gcis(&c);
    // A byte of record data in block 1 (synced by gci 1 or 2).
    let (path, off) = block_at(&c, 0, 1);
    assert!(m.corrupt_byte(&path, off + 1000));
    let e = replay_all(&m, &c, &[0], &durable, 10).unwrap_err();
    assert_eq!(e.code, 896);
    assert!(
        e.message.contains("part 0") && e.message.contains("D8/DBLQH/S0.FragLog"),
        "{e}"
    );
    assert!(e.message.contains(&format!("offset {off}")), "{e}");
    // A damaged file header is corruption too.
    let (m, _, durable, _) = three_gcis(&c);
    assert!(m.corrupt_byte(&file_path(&dir(), 0, 1), 20));
    let e = replay_all(&m, &c, &[0], &durable, 10).unwrap_err();
    assert_eq!(e.code, 896);
    assert!(e.message.contains("S1.FragLog"), "{e}");
}

#[test]
fn record_damage_inside_a_valid_block_is_caught_by_the_record_checksum() {
    let c = cfg(1, 2, 16, 8);
    let (m, _recs, durable, _) = three_gcis(&c);
    // Re-seal block 0 after damaging a record byte: only the record checksum can tell.
    let (path, off) = block_at(&c, 0, 0);
    let mut b =
        m.read_all(&path).unwrap().unwrap()[off as usize..off as usize + BLOCK_BYTES].to_vec();
    b[format::BLOCK_HEADER_BYTES + 100] ^= 0x40;
    let crc = crc32c::crc32c(&b[4..]);
    b[0..4].copy_from_slice(&crc.to_le_bytes());
    let f = m.open(&path).unwrap();
    f.write_at(&b, off).unwrap();
    let e = replay_all(&m, &c, &[0], &durable, 10).unwrap_err();
    assert_eq!(e.code, 896);
    assert!(e.message.contains("record checksum"), "{e}");
}

#[test]
fn open_continues_after_head_and_replay_sees_old_and_new_records() {
    let (m, fs) = mem();
    let c = cfg(2, 3, 12, 8);
    let log = RedoLog::create(fs.clone(), &dir(), c.clone()).unwrap();
    let mut per_part: Vec<Vec<Rec>> = vec![Vec::new(); 2];
    for gci in 1..=3u64 {
        for part in 0..2u32 {
            let recs: Vec<Rec> = (0..3)
                .map(|i| rec(gci, part, i, 900 * (i as usize + 1)))
                .collect();
            append_all(&log, part, &recs);
            per_part[part as usize].extend(recs);
        }
        log.seal_and_sync().unwrap();
    }
    let durable = log.durable();
    drop(log);
    let (got, stats) = replay_all(&m, &c, &[0, 0], &durable, 3).unwrap();
    assert_eq!(got, merged(&per_part));
    let end = stats.end();
    assert_eq!(end, durable);
    let log = RedoLog::open(fs.clone(), &dir(), c.clone(), &[0, 0], &end).unwrap();
    assert_eq!(log.head(), end, "appending continues at the end");
    for gci in 4..=5u64 {
        for part in 0..2u32 {
            let recs: Vec<Rec> = (0..2).map(|i| rec(gci, part + 5, i, 2500)).collect();
            append_all(&log, part, &recs);
            per_part[part as usize].extend(recs);
        }
        log.seal_and_sync().unwrap();
    }
    let durable = log.durable();
    drop(log);
    let (got, stats) = replay_all(&m, &c, &[0, 0], &durable, 5).unwrap();
    assert_eq!(got, merged(&per_part));
    assert!(stats.parts.iter().all(|p| p.records_abandoned == 0));
    // Open with mismatching arguments or geometry is refused.
    let e = RedoLog::open(fs.clone(), &dir(), c.clone(), &[0], &[0])
        .err()
        .unwrap();
    assert_eq!(e.code, 4118);
    let mut c2 = c.clone();
    c2.file_size_bytes *= 2;
    let e = RedoLog::open(fs, &dir(), c2, &[0, 0], &[0, 0])
        .err()
        .unwrap();
    assert_eq!(e.code, 896, "{e}");
    assert!(e.message.contains("initial restart"), "{e}");
}

#[test]
fn records_after_the_restart_cut_are_voided_even_when_gcis_are_reused() {
    let (m, fs) = mem();
    let c = cfg(1, 3, 16, 8);
    let log = RedoLog::create(fs.clone(), &dir(), c.clone()).unwrap();
    let old12: Vec<Rec> = (1..=2u64)
        .flat_map(|g| (0..3).map(move |i| rec(g, 1, i, 1000)))
        .collect();
    append_all(&log, 0, &old12[..3]);
    log.seal_and_sync().unwrap();
    append_all(&log, 0, &old12[3..]);
    // gci 3 was written and synced on this node but never became restorable.
    let old3: Vec<Rec> = (0..6)
        .map(|i| rec(3, 1, i, if i == 0 { 100 } else { 3000 }))
        .collect();
    append_all(&log, 0, &old3);
    let durable = log.seal_and_sync().unwrap();
    drop(log);
    // Restart to gci 2: gci 3 is cut.
    let (got, stats) = replay_all(&m, &c, &[0], &durable, 2).unwrap();
    assert_eq!(got, old12);
    assert_eq!(stats.parts[0].records_after_cut, 6);
    let cut = stats.end();
    assert!(cut[0] < durable[0] && cut[0] % payload_lsn() != 0);
    // Crash during the restart, before anything new: the same again.
    drop(RedoLog::open(fs.clone(), &dir(), c.clone(), &[0], &cut).unwrap());
    let (got, stats) = replay_all(&m, &c, &[0], &durable, 2).unwrap();
    assert_eq!(got, old12);
    assert_eq!(stats.end(), durable, "the void range is skipped");
    // In the cut's block: one void record, one cut off by the skipped blocks.
    assert_eq!(
        (
            stats.parts[0].records_voided,
            stats.parts[0].records_abandoned
        ),
        (1, 1)
    );
    assert_eq!(
        stats.parts[0].blocks_read, 2,
        "blocks inside the cut are not read"
    );
    // The restarted node reuses gci 3 (and 4) for new, smaller transactions.
    let log = RedoLog::open(fs.clone(), &dir(), c.clone(), &[0], &stats.end()).unwrap();
    let new34: Vec<Rec> = (3..=4u64).map(|g| rec(g, 9, 9, 200)).collect();
    append_all(&log, 0, &new34[..1]);
    log.seal_and_sync().unwrap();
    append_all(&log, 0, &new34[1..]);
    let durable2 = log.seal_and_sync().unwrap();
    drop(log);
    let (got, stats) = replay_all(&m, &c, &[0], &durable2, 4).unwrap();
    let mut want = old12.clone();
    want.extend(new34);
    assert_eq!(got, want, "old gci 3 records are void");
    assert_eq!(
        (
            stats.parts[0].records_voided,
            stats.parts[0].records_abandoned
        ),
        (1, 1)
    );
    assert_eq!(stats.parts[0].records_out_of_order, 0);
}

#[test]
fn replay_from_inside_the_log_skips_earlier_records() {
    let (m, fs) = mem();
    let c = cfg(1, 2, 16, 8);
    let log = RedoLog::create(fs, &dir(), c.clone()).unwrap();
    let a: Vec<Rec> = (0..7).map(|i| rec(1, 1, i, 1700)).collect();
    let b: Vec<Rec> = (0..7).map(|i| rec(2, 1, i, 1700)).collect();
    append_all(&log, 0, &a);
    // An LCP starts here: its tail is the head at that moment (mid-block).
    let from = log.head()[0];
    assert_ne!(from % payload_lsn(), 0);
    append_all(&log, 0, &b);
    let durable = log.seal_and_sync().unwrap();
    log.release_before(0, from);
    drop(log);
    let (got, stats) = replay_all(&m, &c, &[from], &durable, 2).unwrap();
    assert_eq!(got, b);
    assert!(stats.parts[0].records_before_from >= 1);
}

#[test]
fn real_files_round_trip_reopen_and_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("ndb_2_fs");
    let fs: Arc<dyn FileSystem> = Arc::new(OsFileSystem);
    let c = cfg(2, 3, 8, 4);
    let log = RedoLog::create(fs.clone(), &d, c.clone()).unwrap();
    assert!(d.join("D8/DBLQH/S0.FragLog").exists() && d.join("D9/DBLQH/S2.FragLog").exists());
    let mut per_part: Vec<Vec<Rec>> = vec![Vec::new(); 2];
    for gci in 1..=4u64 {
        let part = log.assign_part();
        let recs: Vec<Rec> = (0..5).map(|i| rec(gci, part, i, 1200)).collect();
        append_all(&log, part, &recs);
        per_part[part as usize].extend(recs);
        log.seal_and_sync().unwrap();
    }
    let durable = log.durable();
    drop(log);
    let mut got = Vec::new();
    let stats = replay(&*fs, &d, &c, &[0, 0], &durable, 4, &mut |h, p| {
        got.push((*h, p.to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(got, merged(&per_part));
    let log = RedoLog::open(fs.clone(), &d, c.clone(), &[0, 0], &stats.end()).unwrap();
    let r = rec(5, 3, 3, 5000);
    append_all(&log, 1, std::slice::from_ref(&r));
    per_part[1].push(r);
    let durable = log.seal_and_sync().unwrap();
    drop(log);
    let mut got = Vec::new();
    replay(&*fs, &d, &c, &[0, 0], &durable, 5, &mut |h, p| {
        got.push((*h, p.to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(got, merged(&per_part));
}

#[test]
fn initial_start_removes_every_log_file() {
    let (m, fs) = mem();
    assert!(!RedoLog::exists(&*fs, &dir()));
    let c = cfg(2, 3, 8, 4);
    let log = RedoLog::create(fs.clone(), &dir(), c.clone()).unwrap();
    append_all(&log, 0, &[rec(1, 1, 1, 10)]);
    let end = log.seal_and_sync().unwrap();
    drop(log);
    drop(RedoLog::open(fs.clone(), &dir(), c.clone(), &[0, 0], &end).unwrap());
    assert!(RedoLog::exists(&*fs, &dir()));
    let removed = RedoLog::remove_files(&*fs, &dir()).unwrap();
    assert_eq!(removed.len(), 6 + 2, "six log files and two restart files");
    assert!(m.paths().is_empty());
    assert!(!RedoLog::exists(&*fs, &dir()));
    RedoLog::create(fs, &dir(), c).unwrap();
}

#[test]
fn restart_inside_a_block_that_never_reached_the_disk() {
    let (m, fs) = mem();
    let c = cfg(1, 3, 8, 8);
    let log = RedoLog::create(fs.clone(), &dir(), c.clone()).unwrap();
    append_all(&log, 0, &[rec(1, 1, 1, 300)]);
    let durable = log.seal_and_sync().unwrap();
    append_all(&log, 0, &[rec(2, 1, 1, 300)]);
    // A checkpoint's tail inside the open block, then a crash before any write.
    let from = log.head();
    assert_ne!(from[0] % payload_lsn(), 0);
    std::mem::forget(log);
    let (got, stats) = replay_all(&m, &c, &from, &durable, 5).unwrap();
    assert!(got.is_empty());
    assert_eq!(stats.end(), from);
    let log = RedoLog::open(fs.clone(), &dir(), c.clone(), &from, &from).unwrap();
    assert_eq!(
        log.head()[0],
        from[0].div_ceil(payload_lsn()) * payload_lsn()
    );
    let r3 = rec(2, 7, 7, 5000);
    append_all(&log, 0, std::slice::from_ref(&r3));
    let durable = log.seal_and_sync().unwrap();
    drop(log);
    let (got, _) = replay_all(&m, &c, &from, &durable, 5).unwrap();
    assert_eq!(got, vec![r3]);
}

#[test]
fn create_refuses_a_stale_restarts_file() {
    let (_m, fs) = mem();
    fs.create_dir_all(&part_dir(&dir(), 1)).unwrap();
    fs.write_atomic(&part_dir(&dir(), 1).join("RedoRestarts"), b"old")
        .unwrap();
    let e = RedoLog::create(fs.clone(), &dir(), cfg(2, 3, 8, 4))
        .err()
        .unwrap();
    assert_eq!(e.code, 760, "{e}");
    assert_eq!(RedoLog::remove_files(&*fs, &dir()).unwrap().len(), 1);
    RedoLog::create(fs, &dir(), cfg(2, 3, 8, 4)).unwrap();
}

#[test]
fn records_split_anywhere_including_inside_their_length_field() {
    let (m, fs) = mem();
    let c = cfg(1, 2, 128, 16);
    let log = RedoLog::create(fs, &dir(), c.clone()).unwrap();
    let mut all = Vec::new();
    // Each gci starts on a fresh block (sealed before): a filler record leaves k bytes
    // of the block, so the next record's header (and its 4-byte length) is split.
    for k in 1..=30usize {
        let gci = k as u64;
        let recs = vec![
            rec(gci, 1, 0, PAYLOAD_BYTES - k - 28),
            rec(gci, 2, 0, k * 13),
            rec(gci, 3, 0, 5),
        ];
        append_all(&log, 0, &recs);
        all.extend(recs);
        log.seal_and_sync().unwrap();
    }
    let durable = log.durable();
    drop(log);
    let (got, stats) = replay_all(&m, &c, &[0], &durable, 30).unwrap();
    assert_eq!(got, all);
    assert_eq!(stats.parts[0].records_abandoned, 0);
}
