//! Tests of the REDO log: round trips across blocks, files and laps, merge order,
//! torn tails and corruption, back-pressure (410 / 1221), fill hook, part assignment,
//! reopen after recovery, I/O faults, and one run on real files.

use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::disk::io::MemFileSystem;

type Rec = (RecordHeader, Vec<u8>);

fn cfg(parts: u32, files: u32, blocks_per_file: u64, buffer_blocks: u64) -> RedoConfig {
    RedoConfig {
        parts,
        files_per_part: files,
        file_size_bytes: (blocks_per_file + 1) * BLOCK_BYTES as u64,
        buffer_bytes: u64::from(parts) * buffer_blocks * BLOCK_BYTES as u64,
        init_full: false,
        overload_limit_ms: 30,
    }
}

fn dir() -> PathBuf {
    PathBuf::from("/fs/ndb_2_fs")
}

fn mem() -> (MemFileSystem, Arc<dyn FileSystem>) {
    let m = MemFileSystem::new();
    let fs: Arc<dyn FileSystem> = Arc::new(m.clone());
    (m, fs)
}

/// A record whose payload is derived from its identity (so a mix-up shows).
fn rec(gci: u64, table_id: u32, fragment_id: u32, len: usize) -> Rec {
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

fn append_all(log: &RedoLog, part: u32, recs: &[Rec]) -> Lsn {
    let mut b = EncodedRecords::new();
    for (h, p) in recs {
        b.push(h, p);
    }
    log.wait_for_room(part, b.bytes()).unwrap();
    log.append(part, &b)
}

fn replay_all(
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
fn merged(per_part: &[Vec<Rec>]) -> Vec<Rec> {
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
    let sizes = [0usize, 10, 100, 3000, 4040, 9000, 17];
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
        assert!(s.end <= durable[p] && s.end + PAYLOAD_BYTES as u64 > durable[p]);
    }
}
