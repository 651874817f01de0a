//! Tests of part ranges, the ALL-parts algorithm, the data file format (round trip,
//! corruption, failed and crashed writers), the control file, and the pacer. The
//! random chain and restore tests are in `tests_chain.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::disk::io::{FileSystem, IoOp, MemFileSystem, OsFileSystem};

fn header(lcp_id: u32, all_parts: PartRange) -> LcpFileHeader {
    LcpFileHeader {
        table_id: 7,
        fragment_id: 1,
        lcp_id,
        all_parts,
        max_gci: 1000 + lcp_id,
        schema_version: 0xABCD_0001,
    }
}

fn payload(row_id: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (row_id as usize * 31 + i) as u8).collect()
}

/// Records written by `write_sample`, owned.
#[derive(Debug, PartialEq, Eq, Clone)]
enum Rec {
    Row(u32, Vec<u8>),
    DelRow(u32),
    DelPage(u32),
}

fn sample_records(n: u32) -> Vec<Rec> {
    let mut v = Vec::new();
    for i in 0..n {
        match i % 7 {
            5 => v.push(Rec::DelRow(i * 3)),
            6 => v.push(Rec::DelPage(i)),
            _ => v.push(Rec::Row(i << 2, payload(i, (i as usize * 37) % 3000))),
        }
    }
    v
}

fn write_all(w: &mut LcpFileWriter, recs: &[Rec]) -> crate::Result<()> {
    for r in recs {
        match r {
            Rec::Row(id, p) => w.put_row(*id, p)?,
            Rec::DelRow(id) => w.delete_row(*id)?,
            Rec::DelPage(p) => w.delete_page(*p)?,
        }
    }
    Ok(())
}

fn read_all(fs: &dyn FileSystem, path: &Path) -> crate::Result<(LcpFileHeader, Vec<Rec>)> {
    let (h, mut r) = LcpFileReader::open(fs, path)?;
    let mut out = Vec::new();
    while let Some(rec) = r.next()? {
        out.push(match rec {
            LcpRecord::Row { row_id, payload } => Rec::Row(row_id, payload.to_vec()),
            LcpRecord::DeleteRow { row_id } => Rec::DelRow(row_id),
            LcpRecord::DeletePage { page_no } => Rec::DelPage(page_no),
        });
    }
    assert!(r.summary().is_some());
    Ok((h, out))
}

#[test]
fn part_range_wraps() {
    let r = PartRange::new(2040, 20);
    assert!(r.contains(2040) && r.contains(2047) && r.contains(0) && r.contains(11));
    assert!(!r.contains(12) && !r.contains(2039));
    assert_eq!(r.end(), 12);
    assert_eq!(r.parts().count(), 20);
    assert!(PartRange::ALL.contains(0) && PartRange::ALL.contains(2047));
    assert_eq!(PartRange::ALL.end(), 0);
    assert_eq!(part_of_row((2049 << 13) | 77), part_of_page(2049));
    // pages spread over the parts: 2048 consecutive pages hit most parts, and the
    // first 64 pages fall in 64 different parts
    let hit: std::collections::BTreeSet<u32> = (0..2048).map(part_of_page).collect();
    assert!(hit.len() > 1200, "{} parts hit", hit.len());
    let first: std::collections::BTreeSet<u32> = (0..64).map(part_of_page).collect();
    assert_eq!(first.len(), 64);
    assert!((0..100_000).all(|p| part_of_page(p) < LCP_PARTS));
    assert_eq!(next_all_range(None, 2048), PartRange::ALL);
    assert_eq!(next_all_range(Some(r), 5), PartRange::new(12, 5));
    let p = lcp_dir(Path::new("/d/ndb_2_fs"), 5, 3);
    assert_eq!(p, PathBuf::from("/d/ndb_2_fs/LCP/T5F3"));
    assert_eq!(
        data_file_path(&p, 9),
        PathBuf::from("/d/ndb_2_fs/LCP/T5F3/9.data")
    );
}

#[test]
fn all_parts_follows_ndb() {
    let base = ChangeStats {
        row_count: 1_000_000,
        memory_used_bytes: 100 << 20,
        ldm_memory_used_bytes: 1 << 30,
        page_count: 4000,
        ..ChangeStats::default()
    };
    // First LCP, empty fragment, disabled partial LCP: full.
    assert_eq!(
        all_parts(
            &ChangeStats {
                first_lcp: true,
                ..base
            },
            60,
            40
        ),
        2048
    );
    assert_eq!(
        all_parts(
            &ChangeStats {
                row_count: 0,
                ..base
            },
            60,
            40
        ),
        2048
    );
    let cfg = PartialLcpConfig {
        enable_partial_lcp: false,
        ..PartialLcpConfig::default()
    };
    assert_eq!(choose_all_parts(&base, &cfg), 2048);
    // 1% updated: y = 0.01, z = 0.01 * 100/1024, k = y + z/2; parts = 1 + 2048k/(k+0.6).
    let s = ChangeStats {
        rows_updated: 10_000,
        ..base
    };
    let y = 0.01f64;
    let k = y + y * (100.0 / 1024.0) / 2.0;
    assert_eq!(all_parts(&s, 60, 40), (1.0 + 2048.0 * k / (k + 0.6)) as u32);
    assert_eq!(all_parts(&s, 60, 40), 36);
    // z weighs the fragment's memory against its LDM's share of the node's: a
    // fragment that is half of it writes fewer parts, one twice as large more (NDB
    // does not bound z by y), and 0 (unknown) counts as the fragment's own memory.
    let share = |ldm: u64| {
        all_parts(
            &ChangeStats {
                ldm_memory_used_bytes: ldm,
                ..s
            },
            60,
            40,
        )
    };
    let k_of = |ratio: f64| y + y * ratio / 2.0;
    let parts_of = |k: f64| (1.0 + 2048.0 * k / (k + 0.6)) as u32;
    assert_eq!(share(200 << 20), parts_of(k_of(0.5)));
    assert_eq!(share(100 << 20), parts_of(k_of(1.0)));
    assert_eq!(share(50 << 20), parts_of(k_of(2.0)));
    assert_eq!(share(0), share(100 << 20));
    assert!(share(200 << 20) < share(100 << 20) && share(100 << 20) < share(50 << 20));
    // RecoveryWork lower => more parts; clamped to 25..=100.
    assert!(all_parts(&s, 25, 40) > all_parts(&s, 60, 40));
    assert_eq!(all_parts(&s, 10, 40), all_parts(&s, 25, 40));
    // Net inserts weigh InsertRecoveryWork, net deletes 120%.
    let ins = ChangeStats {
        rows_inserted: 10_000,
        ..base
    };
    let del = ChangeStats {
        rows_deleted: 10_000,
        ..base
    };
    assert_eq!(ins.weighted_change_count(40), 4000);
    assert_eq!(del.weighted_change_count(40), 12_000);
    assert!(all_parts(&ins, 60, 40) < all_parts(&s, 60, 40));
    assert!(all_parts(&del, 60, 40) > all_parts(&s, 60, 40));
    // Rule 2: more than 70% changed => full.
    assert_eq!(
        all_parts(
            &ChangeStats {
                rows_updated: 710_000,
                ..base
            },
            60,
            40
        ),
        2048
    );
    // Rule 3: at least 2048 / pages; one page => full.
    assert_eq!(
        all_parts(
            &ChangeStats {
                rows_updated: 1,
                page_count: 16,
                ..base
            },
            60,
            40
        ),
        128
    );
    assert_eq!(
        all_parts(
            &ChangeStats {
                rows_updated: 1,
                page_count: 1,
                ..base
            },
            60,
            40
        ),
        2048
    );
    // Rule 5 and bounds.
    let tiny = all_parts(
        &ChangeStats {
            rows_updated: 1,
            ..base
        },
        100,
        0,
    );
    assert!((1..=2048).contains(&tiny));
    assert!(!base.has_changes() && s.has_changes());
}

#[test]
fn data_file_round_trip_on_mem() {
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/fs/LCP/T7F1/3.data");
    let h = header(3, PartRange::new(100, 50));
    let recs = sample_records(3000);
    let mut w = LcpFileWriter::create(&fs, &path, &h).unwrap();
    write_all(&mut w, &recs).unwrap();
    // A big row (the largest allowed) still fits a block.
    let big = payload(1, MAX_ROW_PAYLOAD_BYTES);
    w.put_row(5, &big).unwrap();
    assert!(
        w.put_row(6, &payload(1, MAX_ROW_PAYLOAD_BYTES + 1))
            .is_err()
    );
    let sum = w.finish().unwrap();
    let rows = recs.iter().filter(|r| matches!(r, Rec::Row(..))).count() as u64 + 1;
    assert_eq!(sum.records, recs.len() as u64 + 1);
    assert_eq!(sum.rows, rows);
    assert_eq!(sum.bytes, fs.open(&path).unwrap().len_bytes().unwrap());
    assert!(sum.bytes > BLOCK_BYTES as u64, "several blocks expected");
    let (h2, got) = read_all(&fs, &path).unwrap();
    assert_eq!(h2, h);
    assert_eq!(&got[..recs.len()], &recs[..]);
    assert_eq!(got[recs.len()], Rec::Row(5, big));
    assert_eq!(verify_file(&fs, &path).unwrap(), (h, sum));
    // Creating it again fails (a leftover is never overwritten).
    let e = LcpFileWriter::create(&fs, &path, &h).err().unwrap();
    assert_eq!(e.code, 760);
}

#[test]
fn periodic_sync_makes_blocks_durable_early() {
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/x/8.data");
    let mut w = LcpFileWriter::create(&fs, &path, &header(8, PartRange::ALL)).unwrap();
    w.set_sync_every_bytes(512 << 10);
    write_all(&mut w, &sample_records(2000)).unwrap();
    let syncs = fs.stats().syncs;
    assert!(syncs >= 2, "{syncs} syncs for ~2 MB");
    w.finish().unwrap();
    assert!(fs.stats().syncs > syncs);
    assert_eq!(fs.unsynced_writes(), 0);
}

#[test]
fn empty_data_file_is_complete() {
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/x/1.data");
    let sum = LcpFileWriter::create(&fs, &path, &header(1, PartRange::ALL))
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!((sum.records, sum.rows, sum.bytes), (0, 0, 64 + 48));
    let (_, got) = read_all(&fs, &path).unwrap();
    assert!(got.is_empty());
}

#[test]
fn every_flipped_byte_is_detected() {
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/x/2.data");
    let mut w = LcpFileWriter::create(&fs, &path, &header(2, PartRange::new(0, 9))).unwrap();
    write_all(&mut w, &sample_records(40)).unwrap();
    let sum = w.finish().unwrap();
    for off in (0..sum.bytes).step_by(7).chain([sum.bytes - 1, 60, 64, 68]) {
        let img = fs.crash_image(0);
        assert!(img.corrupt_byte(&path, off));
        let e = verify_file(&img, &path).expect_err("flipped byte accepted");
        assert!(e.message.contains("2.data"), "{e}");
    }
}

#[test]
fn truncated_files_are_incomplete() {
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/x/3.data");
    let mut w = LcpFileWriter::create(&fs, &path, &header(3, PartRange::ALL)).unwrap();
    let recs = sample_records(2500);
    write_all(&mut w, &recs).unwrap();
    let sum = w.finish().unwrap();
    let bytes = fs.read_all(&path).unwrap().unwrap();
    for cut in [
        0,
        10,
        64,
        100,
        BLOCK_BYTES as u64,
        sum.bytes - 48,
        sum.bytes - 1,
    ] {
        let t = MemFileSystem::new();
        t.create_dir_all(Path::new("/x")).unwrap();
        t.write_atomic(&path, &bytes[..cut as usize]).unwrap();
        let e = verify_file(&t, &path).expect_err("truncated file accepted");
        assert!(e.message.contains("3.data"), "{e}");
    }
    // Trailing bytes after the footer are refused too.
    let t = MemFileSystem::new();
    t.create_dir_all(Path::new("/x")).unwrap();
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 16]);
    t.write_atomic(&path, &longer).unwrap();
    assert!(verify_file(&t, &path).is_err());
}

#[test]
fn failed_write_poisons_the_writer() {
    for nth in 1..6 {
        let fs = MemFileSystem::new();
        let path = PathBuf::from("/x/4.data");
        let mut w = LcpFileWriter::create(&fs, &path, &header(4, PartRange::ALL)).unwrap();
        fs.fail_nth(IoOp::Write, nth);
        let recs = sample_records(2000);
        let r = write_all(&mut w, &recs).and_then(|()| w.finish().map(|_| ()));
        assert!(r.is_err(), "write {nth} failed but the file finished");
        assert!(verify_file(&fs, &path).is_err());
        assert!(verify_file(&fs.crash_image(nth), &path).is_err());
    }
    // A failed fdatasync: finish fails; the crash image never holds a complete file
    // that the reader accepts with other content than written.
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/x/5.data");
    let mut w = LcpFileWriter::create(&fs, &path, &header(5, PartRange::ALL)).unwrap();
    write_all(&mut w, &sample_records(100)).unwrap();
    fs.fail_nth(IoOp::Sync, 1);
    assert!(w.finish().is_err());
    assert!(verify_file(&fs.crash_image(3), &path).is_err());
}

#[test]
fn crash_at_any_point_never_yields_a_half_file() {
    let recs = sample_records(2000);
    let mut outcomes = [0u32; 2];
    for seed in 0..60u64 {
        let fs = MemFileSystem::new();
        let path = PathBuf::from("/x/6.data");
        let op = if seed % 5 == 0 {
            IoOp::Sync
        } else {
            IoOp::Write
        };
        let n = if op == IoOp::Sync { 1 } else { 1 + seed % 12 };
        fs.crash_at(op, n, seed);
        let finished = LcpFileWriter::create(&fs, &path, &header(6, PartRange::ALL))
            .and_then(|mut w| write_all(&mut w, &recs).and_then(|()| w.finish()))
            .is_ok();
        let img = fs.take_crash_image().expect("the crash point was reached");
        assert!(!finished, "seed {seed}: finished after the power loss");
        match read_all(&img, &path) {
            Ok((_, got)) => {
                // Accepted only if every write happened to reach the disk.
                assert_eq!(got, recs, "seed {seed}: a half file was accepted");
                outcomes[1] += 1;
            }
            Err(_) => outcomes[0] += 1,
        }
    }
    assert!(outcomes[0] > 30, "rejected/accepted: {outcomes:?}");
}

#[test]
fn data_file_on_os_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let fs = OsFileSystem;
    let ldir = lcp_dir(dir.path(), 3, 0);
    let path = data_file_path(&ldir, 1);
    let h = LcpFileHeader {
        table_id: 3,
        fragment_id: 0,
        ..header(1, PartRange::ALL)
    };
    let recs = sample_records(2000);
    let mut w = LcpFileWriter::create(&fs, &path, &h).unwrap();
    write_all(&mut w, &recs).unwrap();
    let sum = w.finish().unwrap();
    assert_eq!(read_all(&fs, &path).unwrap(), (h, recs));
    let (ctl, dropped) = FragControl::new(3, 0)
        .after_lcp(DataFileRef::new(&h, &sum), 1001)
        .unwrap();
    assert!(dropped.is_empty());
    ctl.store(&fs, &ldir).unwrap();
    assert_eq!(FragControl::load(&fs, &ldir).unwrap(), Some(ctl.clone()));
    // An orphan from an LCP that never completed is removed, the chain is kept.
    std::fs::write(data_file_path(&ldir, 2), b"half").unwrap();
    let removed = remove_orphans(&fs, &ldir, Some(&ctl)).unwrap();
    assert_eq!(removed, vec![data_file_path(&ldir, 2)]);
    assert!(fs.exists(&path));
}

#[test]
fn control_file_codec_and_checks() {
    let fs = MemFileSystem::new();
    let dir = PathBuf::from("/n/LCP/T1F2");
    assert_eq!(FragControl::load(&fs, &dir).unwrap(), None);
    let c0 = FragControl::new(1, 2);
    let full = DataFileRef {
        lcp_id: 5,
        all_parts: PartRange::ALL,
        records: 10,
        bytes: 500,
    };
    // The first LCP must be full.
    let part = DataFileRef {
        all_parts: PartRange::new(0, 100),
        ..full
    };
    assert!(c0.after_lcp(part, 9).is_err());
    assert!(c0.after_idle_lcp(6, 9).is_err());
    let (c1, d1) = c0.after_lcp(full, 9).unwrap();
    assert!(d1.is_empty());
    assert!(c1.after_lcp(DataFileRef { lcp_id: 5, ..part }, 9).is_err());
    let (c2, d2) = c1.after_lcp(DataFileRef { lcp_id: 6, ..part }, 12).unwrap();
    assert!(d2.is_empty());
    assert_eq!(c2.files.len(), 2);
    let c3 = c2.after_idle_lcp(7, 13).unwrap();
    assert_eq!((c3.lcp_id, c3.max_gci, c3.files.len()), (7, 13, 2));
    // A full LCP drops the whole older chain.
    let (c4, d4) = c3.after_lcp(DataFileRef { lcp_id: 8, ..full }, 14).unwrap();
    assert_eq!(d4, vec![5, 6]);
    assert_eq!(c4.files.len(), 1);
    c3.store(&fs, &dir).unwrap();
    assert_eq!(FragControl::load(&fs, &dir).unwrap(), Some(c3.clone()));
    let bytes = c3.encode();
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert!(
            FragControl::decode(&b, "t").is_err(),
            "flip at {i} accepted"
        );
    }
    assert!(FragControl::decode(&bytes[..bytes.len() - 1], "t").is_err());
}

#[test]
fn pacer_curve_and_delay() {
    let mut p = DiskWritePacer::new(10 << 20, 20 << 20);
    assert_eq!(p.target_rate(0), 10 << 20);
    assert_eq!(p.target_rate(25), 10 << 20);
    assert_eq!(p.target_rate(60), 20 << 20);
    assert_eq!(p.target_rate(200), 20 << 20);
    let mid = p.target_rate(42);
    assert!(mid > 10 << 20 && mid < 20 << 20);
    let mut last = 0;
    for f in 0..=100 {
        let r = p.target_rate(f);
        assert!(r >= last, "not monotonic at {f}");
        last = r;
    }
    assert_eq!(p.current_rate(), 10 << 20);
    // 10 MB at 10 MB/s: due at 1 s; 0.25 s elapsed => wait 0.75 s; behind => 0.
    assert_eq!(
        p.delay_for(10 << 20, Duration::from_millis(250)),
        Duration::from_millis(750)
    );
    assert_eq!(p.delay_for(1 << 20, Duration::from_secs(1)), Duration::ZERO);
    assert_eq!(p.set_redo_fill_percent(80), 20 << 20);
    assert_eq!(
        p.delay_for(10 << 20, Duration::ZERO),
        Duration::from_millis(500)
    );
    // Degenerate configuration.
    let q = DiskWritePacer::new(0, 0);
    assert_eq!((q.min_bytes_per_sec(), q.max_bytes_per_sec()), (1, 1));
    assert_eq!(
        q.delay_for(u64::MAX, Duration::ZERO),
        Duration::from_nanos(u64::MAX)
    );
}

#[test]
#[ignore = "throughput measurement, run by hand"]
fn throughput_smoke() {
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/x/9.data");
    let rows = 1_000_000u32;
    let p = payload(3, 100);
    let t = std::time::Instant::now();
    let mut w = LcpFileWriter::create(&fs, &path, &header(9, PartRange::ALL)).unwrap();
    for i in 0..rows {
        w.put_row(i, &p).unwrap();
    }
    let sum = w.finish().unwrap();
    let wt = t.elapsed();
    let t = std::time::Instant::now();
    let (_, mut r) = LcpFileReader::open(&fs, &path).unwrap();
    let mut n = 0u64;
    while let Some(rec) = r.next().unwrap() {
        if let LcpRecord::Row { payload, .. } = rec {
            n += payload.len() as u64;
        }
    }
    let rt = t.elapsed();
    assert_eq!(n, u64::from(rows) * 100);
    eprintln!(
        "{rows} rows, {} bytes: write {wt:?}, read {rt:?}",
        sum.bytes
    );
}

#[test]
fn max_gci_set_at_the_end_is_covered_by_the_footer() {
    let fs = MemFileSystem::new();
    let recs = sample_records(50);
    let h = header(10, PartRange::ALL);
    let mut files = Vec::new();
    for (name, gci) in [("/x/a.data", None), ("/x/b.data", Some(77_777))] {
        let path = PathBuf::from(name);
        let mut w = LcpFileWriter::create(&fs, &path, &h).unwrap();
        write_all(&mut w, &recs).unwrap();
        if let Some(g) = gci {
            w.set_max_gci(g);
            assert_eq!(w.header().max_gci, g);
        }
        w.finish().unwrap();
        files.push(fs.read_all(&path).unwrap().unwrap());
    }
    let b = PathBuf::from("/x/b.data");
    assert_eq!(verify_file(&fs, &b).unwrap().0.max_gci, 77_777);
    // The old header (valid by itself) with the new footer: not complete.
    let mut mixed = files[1].clone();
    mixed[..64].copy_from_slice(&files[0][..64]);
    fs.write_atomic(&b, &mixed).unwrap();
    let e = verify_file(&fs, &b).expect_err("old header accepted");
    assert!(e.message.contains("footer"), "{e}");
}

#[test]
fn a_spare_is_written_as_a_new_file_would_be() {
    let fs = MemFileSystem::new();
    let path = PathBuf::from("/fs/LCP/T7F1/4.data");
    let h = header(4, PartRange::new(9, 30));
    let recs = sample_records(800);
    // made ahead: empty, and its name durable
    assert!(create_spare(&fs, &path).unwrap());
    assert!(
        !create_spare(&fs, &path).unwrap(),
        "a second time: left as it is"
    );
    assert_eq!(
        fs.crash_image(1).open(&path).unwrap().len_bytes().unwrap(),
        0
    );
    let mut w = LcpFileWriter::start(&fs, &path, &h).unwrap();
    write_all(&mut w, &recs).unwrap();
    // a power loss before `finish` leaves a file the reader rejects (or the spare)
    for seed in 0..20 {
        let image = fs.crash_image(seed);
        assert!(verify_file(&image, &path).is_err(), "seed {seed}");
    }
    let sum = w.finish().unwrap();
    for seed in 0..20 {
        let image = fs.crash_image(seed);
        assert_eq!(verify_file(&image, &path).unwrap(), (h, sum), "seed {seed}");
    }
    let (_, got) = read_all(&fs, &path).unwrap();
    assert_eq!(got, recs);
    // a file that is not empty is a leftover, never written into
    let e = LcpFileWriter::start(&fs, &path, &h).err().unwrap();
    assert_eq!(e.code, 760);
    // without a spare, `start` creates the file
    let other = PathBuf::from("/fs/LCP/T7F1/5.data");
    let sum5 = LcpFileWriter::start(&fs, &other, &header(5, PartRange::ALL))
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(verify_file(&fs, &other).unwrap().1, sum5);
}

/// A store never overwrites the copy holding the newest control, whatever the parity
/// of its LCP id: a fragment idle for a round skips an id, and a torn overwrite of the
/// newest copy would leave only an older chain whose files the newest one dropped.
#[test]
fn a_store_after_a_skipped_lcp_id_keeps_the_newest_copy() {
    let fs = MemFileSystem::new();
    let dir = PathBuf::from("/n/LCP/T4F0");
    let full = |lcp_id| DataFileRef {
        lcp_id,
        all_parts: PartRange::ALL,
        records: 10,
        bytes: 500,
    };
    let copy = |i: usize| {
        let bytes = fs
            .read_all(&ctl_paths(&dir)[i])
            .unwrap()
            .expect("copy exists");
        let n = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
        FragControl::decode(&bytes[4..4 + n], "copy")
            .unwrap()
            .lcp_id
    };
    let (c1, _) = FragControl::new(4, 0).after_lcp(full(1), 5).unwrap();
    c1.store(&fs, &dir).unwrap();
    // LCP 2 is full: the chain of LCP 1 is dropped (its file would be removed).
    let (c2, dropped) = c1.after_lcp(full(2), 6).unwrap();
    assert_eq!(dropped, vec![1]);
    c2.store(&fs, &dir).unwrap();
    let newest = if copy(0) == 2 { 0 } else { 1 };
    assert_eq!(copy(1 - newest), 1);
    // LCP 3 found the fragment idle (nothing stored); LCP 4 has LCP 2's parity.
    let (c4, _) = c2.after_lcp(full(4), 8).unwrap();
    c4.store(&fs, &dir).unwrap();
    assert_eq!(copy(newest), 2, "the newest copy was overwritten");
    assert_eq!(copy(1 - newest), 4);
    assert_eq!(FragControl::load(&fs, &dir).unwrap(), Some(c4.clone()));
    // A copy that does not verify is the one written next, the valid one stays.
    let bad = &ctl_paths(&dir)[newest];
    fs.open(bad).unwrap().write_at(&[0xFF; 8], 4).unwrap();
    let (c5, _) = c4.after_lcp(full(5), 9).unwrap();
    c5.store(&fs, &dir).unwrap();
    assert_eq!((copy(newest), copy(1 - newest)), (5, 4));
}
