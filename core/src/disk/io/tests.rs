//! Both implementations behave alike (run on OsFileSystem in a tempdir and on
//! MemFileSystem), and MemFileSystem's fault injection (switches, budget, countdowns,
//! seeded plans) works and reproduces.

use std::path::Path;

use super::*;

fn roundtrip(fs: &dyn FileSystem, dir: &Path) {
    fs.create_dir_all(dir).unwrap();
    let p = dir.join("a.dat");
    let f = fs.create(&p, 8192).unwrap();
    assert!(fs.create(&p, 10).is_err(), "create must not overwrite");
    assert_eq!(f.len_bytes().unwrap(), 8192);
    f.write_at(b"hello", 100).unwrap();
    let mut b = [0u8; 5];
    f.read_at(&mut b, 100).unwrap();
    assert_eq!(&b, b"hello");
    assert!(f.read_at(&mut b, 8190).is_err(), "short read is an error");
    f.extend_to(16384).unwrap();
    assert_eq!(f.len_bytes().unwrap(), 16384);
    f.write_at(&[], 100_000).unwrap();
    f.read_at(&mut [], 100_000).unwrap();
    assert_eq!(
        f.len_bytes().unwrap(),
        16384,
        "an empty write extends nothing"
    );
    f.sync_data().unwrap();
    let g = fs.open(&p).unwrap();
    g.read_at(&mut b, 100).unwrap();
    assert_eq!(&b, b"hello");
    fs.remove(&p).unwrap();
    assert!(!fs.exists(&p));
}

/// create_sparse, list_dir, rename and write_atomic, asserting the same outcomes.
fn namespace_ops(fs: &dyn FileSystem, dir: &Path) {
    assert_eq!(
        fs.list_dir(dir).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    fs.create_dir_all(&dir.join("sub")).unwrap();
    assert!(
        fs.list_dir(dir).unwrap().is_empty(),
        "subdirectories are not listed"
    );

    let sparse = dir.join("redo.0");
    let f = fs.create_sparse(&sparse, 1 << 20).unwrap();
    assert_eq!(f.len_bytes().unwrap(), 1 << 20);
    let mut b = [7u8; 64];
    f.read_at(&mut b, (1 << 20) - 64).unwrap();
    assert_eq!(b, [0u8; 64], "a sparse file reads zeros");
    assert_eq!(
        fs.create_sparse(&sparse, 10).err().unwrap().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    f.write_at(b"page", 4096).unwrap();
    f.sync_data().unwrap();

    fs.create(&dir.join("b.dat"), 100).unwrap();
    fs.write_atomic(&dir.join("a.ctl"), b"v1").unwrap();
    let names = |fs: &dyn FileSystem| -> Vec<String> {
        fs.list_dir(dir)
            .unwrap()
            .iter()
            .map(|p| {
                assert_eq!(p.parent(), Some(dir));
                p.file_name().unwrap().to_string_lossy().into_owned()
            })
            .collect()
    };
    assert_eq!(names(fs), ["a.ctl", "b.dat", "redo.0"]);

    // Rename replaces atomically; an open handle keeps working on the moved file.
    fs.rename(&sparse, &dir.join("b.dat")).unwrap();
    assert_eq!(names(fs), ["a.ctl", "b.dat"]);
    assert_eq!(
        fs.open(&dir.join("b.dat")).unwrap().len_bytes().unwrap(),
        1 << 20
    );
    let mut p4 = [0u8; 4];
    fs.open(&dir.join("b.dat"))
        .unwrap()
        .read_at(&mut p4, 4096)
        .unwrap();
    assert_eq!(&p4, b"page");
    f.write_at(b"more", 0).unwrap();
    fs.open(&dir.join("b.dat"))
        .unwrap()
        .read_at(&mut p4, 0)
        .unwrap();
    assert_eq!(&p4, b"more");
    assert_eq!(
        fs.rename(&sparse, &dir.join("c")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    assert!(fs.rename(&dir.join("a.ctl"), &dir.join("no/such")).is_err());

    fs.write_atomic(&dir.join("a.ctl"), b"version 2").unwrap();
    assert_eq!(
        fs.read_all(&dir.join("a.ctl")).unwrap().unwrap(),
        b"version 2"
    );
    assert!(fs.write_atomic(&dir.join("no/such"), b"x").is_err());
    assert_eq!(fs.read_all(&dir.join("nothing")).unwrap(), None);

    // remove_dir_all: the tree under it, not a sibling whose name it prefixes
    let tree = dir.join("tree");
    fs.create_dir_all(&tree.join("T1F0")).unwrap();
    fs.create(&tree.join("T1F0").join("1.data"), 0).unwrap();
    fs.create(&tree.join("top"), 0).unwrap();
    let sibling = dir.join("tree2");
    fs.create_dir_all(&sibling).unwrap();
    fs.create(&sibling.join("keep"), 0).unwrap();
    fs.remove_dir_all(&tree).unwrap();
    assert!(!fs.exists(&tree) && !fs.exists(&tree.join("T1F0").join("1.data")));
    assert_eq!(
        fs.list_dir(&tree).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    assert!(fs.exists(&sibling.join("keep")));
    assert_eq!(
        fs.remove_dir_all(&tree).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
}

#[test]
fn os_and_mem_behave_alike() {
    let tmp = tempfile::tempdir().unwrap();
    roundtrip(&OsFileSystem, &tmp.path().join("x"));
    roundtrip(&MemFileSystem::new(), Path::new("/m/x"));
    namespace_ops(&OsFileSystem, &tmp.path().join("y"));
    namespace_ops(&MemFileSystem::new(), Path::new("/m/y"));
}

#[test]
fn a_removed_tree_stays_removed_after_a_power_loss() {
    let fs = MemFileSystem::new();
    let dir = Path::new("/m/LCP/T1F0");
    fs.create_dir_all(dir).unwrap();
    let f = fs.create(&dir.join("1.data"), 0).unwrap();
    f.write_at(b"unsynced", 0).unwrap();
    fs.remove_dir_all(Path::new("/m/LCP")).unwrap();
    for seed in 0..8 {
        let image = fs.crash_image(seed);
        assert!(image.paths().is_empty(), "seed {seed}: {:?}", image.paths());
        assert!(!image.exists(dir));
    }
}

#[test]
fn mem_injects_enospc_and_eio() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    fs.set_faults(Faults {
        capacity_bytes: Some(10_000),
        ..Faults::default()
    });
    let f = fs.create(Path::new("/d/a"), 8_000).unwrap();
    let e = fs.create(Path::new("/d/b"), 8_000).err().unwrap();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(
        f.extend_to(12_000).err().unwrap().raw_os_error(),
        Some(libc::ENOSPC)
    );
    fs.set_faults(Faults {
        fail_syncs: true,
        ..Faults::default()
    });
    assert_eq!(f.sync_data().err().unwrap().raw_os_error(), Some(libc::EIO));
    let s = fs.stats();
    assert_eq!(s.injected_failures, 3);
    assert_eq!((s.injected_enospc, s.injected_sync_eio), (2, 1));
}

#[test]
fn sparse_files_count_only_written_chunks() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    fs.set_faults(Faults {
        capacity_bytes: Some(3 * CHUNK_BYTES as u64),
        ..Faults::default()
    });
    let f = fs.create_sparse(Path::new("/d/redo"), 1 << 30).unwrap();
    assert_eq!(fs.used_bytes(), 0);
    f.write_at(&[1u8; 100], 0).unwrap();
    f.write_at(&[1u8; 100], 200).unwrap();
    assert_eq!(fs.used_bytes(), CHUNK_BYTES as u64, "one chunk written");
    f.write_at(&[1u8; 100], 5 * CHUNK_BYTES as u64).unwrap();
    f.write_at(&[1u8; 100], 9 * CHUNK_BYTES as u64).unwrap();
    let e = f
        .write_at(&[1u8; 100], 20 * CHUNK_BYTES as u64)
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    let e = fs.create(Path::new("/d/full"), 1).err().unwrap();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
}

#[test]
fn fail_nth_fails_exactly_that_operation_once() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    let f = fs.create(Path::new("/d/a"), 4096).unwrap();
    fs.fail_nth(IoOp::Write, 3);
    let results: Vec<bool> = (0..5).map(|i| f.write_at(b"x", i).is_ok()).collect();
    assert_eq!(results, [true, true, false, true, true]);
    fs.fail_nth(IoOp::Sync, 1);
    assert!(f.sync_data().is_err());
    assert!(f.sync_data().is_ok());
    fs.fail_nth(IoOp::Read, 2);
    fs.fail_nth(IoOp::Read, 0); // disarmed
    let mut b = [0u8; 1];
    assert!((0..4).all(|_| f.read_at(&mut b, 0).is_ok()));
    let s = fs.stats();
    assert_eq!((s.injected_write_eio, s.injected_sync_eio), (1, 1));
    assert_eq!(s.injected_read_eio, 0);
}

/// The same plan and call sequence give the same failures; another seed differs.
#[test]
fn fault_plans_reproduce_for_the_same_seed() {
    fn run(seed: u64) -> (Vec<u8>, MemStats) {
        let fs = MemFileSystem::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let f = fs.create(Path::new("/d/a"), 1 << 16).unwrap();
        fs.set_fault_plan(Some(FaultPlan {
            seed,
            read_eio_per_million: 100_000,
            write_eio_per_million: 100_000,
            sync_eio_per_million: 200_000,
            enospc_per_million: 300_000,
        }));
        let mut outcome = Vec::new();
        let mut b = [0u8; 8];
        for i in 0..3000u64 {
            let r = match i % 4 {
                0 => f.write_at(&i.to_le_bytes(), (i * 8) % (1 << 16)),
                1 => f.read_at(&mut b, (i * 8) % (1 << 16)),
                2 => f.sync_data(),
                // Growing writes allocate: these may also get ENOSPC.
                _ => f.write_at(&i.to_le_bytes(), (1 << 16) + i * 8),
            };
            outcome.push(match r {
                Ok(()) => 0,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => 2,
                Err(_) => 1,
            });
        }
        (outcome, fs.stats())
    }
    let (a, sa) = run(42);
    let (b, sb) = run(42);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    let (c, _) = run(43);
    assert_ne!(a, c, "another seed gives other faults");
    // Rates are honoured roughly: 750 reads at 10 %, 750 syncs at 20 %.
    assert!((40..=110).contains(&sa.injected_read_eio), "{sa:?}");
    assert!((100..=200).contains(&sa.injected_sync_eio), "{sa:?}");
    assert!(sa.injected_enospc > 100, "{sa:?}");
    assert_eq!(
        sa.injected_failures,
        sa.injected_read_eio + sa.injected_write_eio + sa.injected_sync_eio + sa.injected_enospc
    );
    assert!(sa.lost_writes > 0, "failed syncs lose their writes: {sa:?}");
}

/// A plan's decisions for one file do not depend on how the operations on other files
/// (other threads: the redo writer, parallel fdatasyncs) interleave with them, nor on
/// the order of writes to different offsets; every failure is in the fault log.
#[test]
fn fault_plan_decisions_do_not_depend_on_interleaving() {
    // Outcome per (file, op) in a canonical order, for one order of the calls.
    fn run(interleave: bool) -> (Vec<(usize, u64, bool)>, Vec<String>) {
        let fs = MemFileSystem::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let files = [
            fs.create(Path::new("/d/a"), 1 << 16).unwrap(),
            fs.create(Path::new("/d/b"), 1 << 16).unwrap(),
        ];
        fs.set_fault_plan(Some(FaultPlan {
            seed: 7,
            write_eio_per_million: 200_000,
            sync_eio_per_million: 200_000,
            ..FaultPlan::default()
        }));
        // Per file: 64 writes at distinct offsets (in reverse order on the second
        // run), then 16 syncs.
        let mut calls: Vec<(usize, u64)> = Vec::new();
        for k in 0..64u64 {
            for f in 0..2 {
                calls.push((f, if interleave { 63 - k } else { k }));
            }
        }
        if interleave {
            calls.sort_by_key(|c| std::cmp::Reverse(c.0));
        }
        for _ in 0..16 {
            calls.push((1, u64::MAX));
            calls.push((0, u64::MAX));
        }
        let mut out: Vec<(usize, u64, bool)> = Vec::new();
        let mut syncs = [0u64; 2];
        for (f, k) in calls {
            let (key, r) = if k == u64::MAX {
                syncs[f] += 1;
                (1000 + syncs[f], files[f].sync_data())
            } else {
                (k, files[f].write_at(&[1; 8], k * 512))
            };
            out.push((f, key, r.is_err()));
        }
        out.sort();
        (out, fs.fault_log())
    }
    let (a, log_a) = run(false);
    let (b, log_b) = run(true);
    assert_eq!(a, b);
    let failed = a.iter().filter(|o| o.2).count();
    assert!((10..=60).contains(&failed), "{failed} of 160 failed");
    assert_eq!(log_a.len(), failed);
    assert_eq!(log_b.len(), failed);
    assert!(
        log_a
            .iter()
            .any(|l| l.starts_with("Write EIO /d/") && l.contains(" @")),
        "{log_a:?}"
    );
    assert!(
        log_a.iter().any(|l| l.starts_with("Sync EIO /d/")),
        "{log_a:?}"
    );
}
