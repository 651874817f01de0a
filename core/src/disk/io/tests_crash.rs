//! MemFileSystem's crash model: what `crash_image` keeps, drops and tears, over many
//! seeds, and that a failed sync never becomes durable.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use super::*;

const SECTOR: usize = SECTOR_BYTES as usize;

fn fs_with_file(path: &str, len: u64) -> (MemFileSystem, Arc<dyn DiskFile>) {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    let f = fs.create(Path::new(path), len).unwrap();
    (fs, f)
}

fn content(fs: &MemFileSystem, path: &str) -> Vec<u8> {
    fs.read_all(Path::new(path)).unwrap().unwrap()
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Outcome {
    Dropped,
    Applied,
    Torn,
}

/// Classify an image of a range that held `old` durably and `new` unsynced; every
/// sector must be wholly old or wholly new.
fn classify(image: &[u8], old: &[u8], new: &[u8]) -> Outcome {
    let mut olds = 0;
    let mut news = 0;
    for ((i, o), n) in image
        .chunks(SECTOR)
        .zip(old.chunks(SECTOR))
        .zip(new.chunks(SECTOR))
    {
        if i == o {
            olds += 1;
        } else if i == n {
            news += 1;
        } else {
            panic!("a sector is neither old nor new");
        }
    }
    match (olds, news) {
        (_, 0) => Outcome::Dropped,
        (0, _) => Outcome::Applied,
        _ => Outcome::Torn,
    }
}

#[test]
fn synced_data_survives_every_crash() {
    let (fs, f) = fs_with_file("/d/f", 64 * 1024);
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 253) as u8).collect();
    f.write_at(&data, 1000).unwrap();
    f.sync_data().unwrap();
    fs.write_atomic(Path::new("/d/ctl"), b"control").unwrap();
    fs.create(Path::new("/d/g"), 512).unwrap();
    fs.rename(Path::new("/d/g"), Path::new("/d/h")).unwrap();
    for seed in 0..50 {
        let img = fs.crash_image(seed);
        assert_eq!(&content(&img, "/d/f")[1000..41_000], &data[..]);
        assert_eq!(content(&img, "/d/ctl"), b"control");
        assert_eq!(
            img.list_dir(Path::new("/d")).unwrap(),
            [Path::new("/d/ctl"), Path::new("/d/f"), Path::new("/d/h")]
        );
        assert_eq!(img.unsynced_writes(), 0);
    }
}

/// One unsynced write of 8 sectors over synced content: over many seeds it is dropped,
/// applied and torn, only ever in whole sectors; the same seed gives the same image.
#[test]
fn unsynced_write_is_dropped_applied_or_torn_by_seed() {
    let (fs, f) = fs_with_file("/d/f", 16 * 1024);
    let old = vec![0xAAu8; 8 * SECTOR];
    let new = vec![0x55u8; 8 * SECTOR];
    f.write_at(&old, 4096).unwrap();
    f.sync_data().unwrap();
    f.write_at(&new, 4096).unwrap();
    let mut seen = BTreeSet::new();
    for seed in 0..300 {
        let img = content(&fs.crash_image(seed), "/d/f");
        assert_eq!(img.len(), 16 * 1024);
        assert_eq!(
            img[..4096],
            [0u8; 4096],
            "bytes outside the write untouched"
        );
        seen.insert(classify(&img[4096..4096 + 8 * SECTOR], &old, &new));
        assert_eq!(img, content(&fs.crash_image(seed), "/d/f"), "seed {seed}");
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [Outcome::Dropped, Outcome::Applied, Outcome::Torn]
    );
    // The original still reads the new data and can still make it durable.
    f.sync_data().unwrap();
    assert_eq!(
        &content(&fs.crash_image(7), "/d/f")[4096..4096 + new.len()],
        &new[..]
    );
}

/// A write that starts and ends inside sectors tears at sector boundaries of the file:
/// each sector's part of the write is wholly applied or not, bytes outside it never
/// change.
#[test]
fn torn_writes_change_only_whole_sectors() {
    let (fs, f) = fs_with_file("/d/f", 8 * SECTOR as u64);
    let start = 700usize;
    let new: Vec<u8> = (0..2000u32).map(|i| (i % 200) as u8 + 1).collect();
    f.write_at(&new, start as u64).unwrap();
    let mut torn = 0;
    for seed in 0..200 {
        let img = content(&fs.crash_image(seed), "/d/f");
        let mut mixed = (false, false);
        for s in 0..8 {
            let (lo, hi) = (s * SECTOR, (s + 1) * SECTOR);
            let (wlo, whi) = (lo.max(start), hi.min(start + new.len()));
            assert!(img[lo..wlo.max(lo)].iter().all(|&b| b == 0));
            assert!(img[whi.max(lo).min(hi)..hi].iter().all(|&b| b == 0));
            if wlo >= whi {
                continue;
            }
            let part = &img[wlo..whi];
            if part == &new[wlo - start..whi - start] {
                mixed.0 = true;
            } else {
                assert!(part.iter().all(|&b| b == 0), "seed {seed} sector {s}");
                mixed.1 = true;
            }
        }
        torn += usize::from(mixed == (true, true));
    }
    assert!(torn > 20, "torn images: {torn}");
}

/// Several unsynced writes get independent choices; later writes win where applied.
#[test]
fn every_unsynced_write_gets_its_own_choice() {
    let (fs, f) = fs_with_file("/d/f", 4 * SECTOR as u64);
    f.write_at(&[1u8; SECTOR], 0).unwrap();
    f.write_at(&[2u8; SECTOR], SECTOR as u64).unwrap();
    f.write_at(&[3u8; SECTOR], 0).unwrap();
    let mut combos = BTreeSet::new();
    for seed in 0..300 {
        let img = content(&fs.crash_image(seed), "/d/f");
        combos.insert((img[0], img[SECTOR]));
        assert_eq!(img[2 * SECTOR..], [0u8; 2 * SECTOR]);
    }
    let want: BTreeSet<(u8, u8)> = [(0, 0), (0, 2), (1, 0), (1, 2), (3, 0), (3, 2)].into();
    assert_eq!(combos, want);
}

#[test]
fn growth_by_unsynced_writes_is_kept_or_lost() {
    let (fs, f) = fs_with_file("/d/f", 1024);
    f.write_at(&[9u8; 512], 4096).unwrap();
    assert_eq!(f.len_bytes().unwrap(), 4608);
    let mut lens = BTreeSet::new();
    for seed in 0..100 {
        let img = content(&fs.crash_image(seed), "/d/f");
        lens.insert(img.len());
        assert!(img[..1024].iter().all(|&b| b == 0));
        if img.len() == 4608 {
            assert!(img[1024..4096].iter().all(|&b| b == 0));
        }
    }
    assert_eq!(lens.into_iter().collect::<Vec<_>>(), [1024, 4608]);
    // extend_to is durable at once.
    f.extend_to(8192).unwrap();
    f.sync_data().unwrap();
    assert_eq!(content(&fs.crash_image(1), "/d/f").len(), 8192);
}

/// Linux marks pages clean after a failed writeback: those writes never reach the disk,
/// even after a later successful sync, while reads still return them.
#[test]
fn a_failed_sync_never_becomes_durable() {
    let (fs, f) = fs_with_file("/d/f", 4096);
    f.write_at(b"lost", 0).unwrap();
    fs.fail_nth(IoOp::Sync, 1);
    assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
    assert_eq!(fs.stats().lost_writes, 1);
    let mut b = [0u8; 4];
    f.read_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"lost", "the page cache still holds it");
    f.write_at(b"kept", 100).unwrap();
    f.sync_data().unwrap();
    for seed in 0..100 {
        let img = content(&fs.crash_image(seed), "/d/f");
        assert_eq!(&img[..4], &[0u8; 4], "seed {seed}");
        assert_eq!(&img[100..104], b"kept");
    }
}

/// Beyond the cap of unsynced writes per file the oldest are written back (durable).
#[test]
fn the_unsynced_cap_writes_back_the_oldest() {
    let n = MAX_UNSYNCED_WRITES + 10;
    let (fs, f) = fs_with_file("/d/f", (n * 8) as u64);
    for i in 0..n {
        f.write_at(&(i as u64 + 1).to_le_bytes(), (i * 8) as u64)
            .unwrap();
    }
    // Rewriting the same range as the last write coalesces.
    f.write_at(&u64::MAX.to_le_bytes(), ((n - 1) * 8) as u64)
        .unwrap();
    assert_eq!(fs.unsynced_writes(), MAX_UNSYNCED_WRITES as u64);
    assert_eq!(fs.stats().written_back, 10);
    let img = content(&fs.crash_image(3), "/d/f");
    for i in 0..10 {
        assert_eq!(img[i * 8..i * 8 + 8], (i as u64 + 1).to_le_bytes());
    }
}

#[test]
fn crash_image_is_independent_and_unfaulted() {
    let (fs, f) = fs_with_file("/d/f", 4096);
    f.write_at(b"abc", 0).unwrap();
    f.sync_data().unwrap();
    fs.set_faults(Faults {
        fail_reads: true,
        fail_writes: true,
        fail_syncs: true,
        capacity_bytes: Some(0),
        only_paths_containing: None,
    });
    fs.set_fault_plan(Some(FaultPlan {
        seed: 1,
        read_eio_per_million: 1_000_000,
        ..FaultPlan::default()
    }));
    let img = fs.crash_image(5);
    assert_eq!(img.stats(), MemStats::default());
    assert_eq!(img.fault_plan(), None);
    let g = img.open(Path::new("/d/f")).unwrap();
    let mut b = [0u8; 3];
    g.read_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"abc");
    g.write_at(b"xyz", 0).unwrap();
    g.sync_data().unwrap();
    img.create(Path::new("/d/new"), 100).unwrap();
    assert!(!fs.exists(Path::new("/d/new")), "images share nothing");
    assert!(
        f.read_at(&mut b, 0).is_err(),
        "the original keeps its faults"
    );
}

/// Thousands of crash images of a small multi-file disk stay fast (the crash tests
/// run this loop) and are deterministic per seed.
#[test]
fn many_seeds_are_cheap_and_deterministic() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    let files: Vec<_> = (0..4)
        .map(|i| {
            fs.create_sparse(Path::new(&format!("/d/redo.{i}")), 16 << 20)
                .unwrap()
        })
        .collect();
    for (i, f) in files.iter().enumerate() {
        for k in 0..64u64 {
            f.write_at(&[i as u8 + 1; 4096], k * 4096).unwrap();
            if k % 16 == 15 {
                f.sync_data().unwrap();
            }
        }
        f.write_at(&[0xEE; 4096], 64 * 4096).unwrap();
    }
    let mut applied = 0;
    for seed in 0..2000 {
        let img = fs.crash_image(seed);
        let g = img.open(Path::new("/d/redo.2")).unwrap();
        let mut b = [0u8; 4096];
        g.read_at(&mut b, 63 * 4096).unwrap();
        assert_eq!(b, [3u8; 4096], "synced");
        g.read_at(&mut b, 64 * 4096).unwrap();
        applied += usize::from(b == [0xEE; 4096]);
    }
    assert!((400..=1000).contains(&applied), "applied {applied} of 2000");
}

/// `crash_at` captures the image just before the armed operation (the same image as
/// `crash_image` at that instant) and then refuses every operation.
#[test]
fn crash_at_captures_the_disk_before_the_nth_sync_and_powers_off() {
    let run = |arm: bool| {
        let (fs, f) = fs_with_file("/d/f", 4096);
        if arm {
            fs.crash_at(IoOp::Sync, 2, 9);
        }
        f.write_at(b"one", 0).unwrap();
        f.sync_data().unwrap();
        for k in 0..20u64 {
            f.write_at(&[k as u8 + 1; SECTOR], 512 + k * 16).unwrap();
        }
        (fs, f)
    };
    let (twin, _) = run(false);
    let want = content(&twin.crash_image(9), "/d/f");
    let (fs, f) = run(true);
    assert!(!fs.powered_off());
    assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
    assert!(fs.powered_off());
    assert!(f.write_at(b"x", 0).is_err());
    assert!(fs.remove(Path::new("/d/f")).is_err());
    assert!(fs.create(Path::new("/d/g"), 1).is_err());
    let img = fs.take_crash_image().unwrap();
    assert!(fs.take_crash_image().is_none(), "taken once");
    let got = content(&img, "/d/f");
    assert_eq!(&got[..3], b"one");
    assert_eq!(got, want, "the same image as crash_image at that instant");
    let s = fs.stats();
    assert_eq!((s.after_power_loss, s.injected_failures), (4, 0));
    assert!(!img.powered_off(), "the image is a fresh disk");
}

#[test]
fn switches_can_be_scoped_to_paths() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/d/LCP")).unwrap();
    let lcp = fs.create(Path::new("/d/LCP/1.data"), 4096).unwrap();
    let redo = fs.create(Path::new("/d/redo"), 4096).unwrap();
    fs.set_faults(Faults {
        fail_syncs: true,
        fail_writes: true,
        only_paths_containing: Some("/LCP/".into()),
        ..Faults::default()
    });
    assert!(lcp.sync_data().is_err());
    assert!(lcp.write_at(b"x", 0).is_err());
    assert!(fs.write_atomic(Path::new("/d/LCP/ctl0"), b"c").is_err());
    redo.write_at(b"x", 0).unwrap();
    redo.sync_data().unwrap();
    fs.write_atomic(Path::new("/d/other"), b"o").unwrap();
}
