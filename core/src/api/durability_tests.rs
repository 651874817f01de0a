//! System restarts of the embedded cluster on a data directory: what a graceful
//! shutdown and a crash (a cluster dropped without shutdown) keep.

use super::*;
use crate::config::ClusterConfig;
use crate::schema::{Column, ColumnType, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub(super) fn config() -> ClusterConfig {
    let mut c = ClusterConfig::embedded(2, 2).expect("config");
    for (k, v) in [
        ("TimeBetweenGlobalCheckpoints", "20"),
        ("TimeBetweenEpochs", "3"),
        ("DataMemory", "16M"),
        ("NoOfFragmentLogFiles", "3"),
        ("FragmentLogFileSize", "4M"),
        ("RedoBuffer", "4M"),
    ] {
        c.set_data_node_param(k, v).expect(k);
    }
    c
}

pub(super) fn spec() -> TableSpec {
    TableSpec::new(
        "t",
        vec![
            Column::new(
                "id",
                ColumnType::Int {
                    bytes: 4,
                    unsigned: true,
                },
            )
            .primary_key(),
            Column::new(
                "v",
                ColumnType::Int {
                    bytes: 8,
                    unsigned: false,
                },
            ),
        ],
    )
}

fn write(c: &Cluster, rows: impl Iterator<Item = (u64, i64)>) -> u64 {
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    let mut tx = ndb.start_transaction().expect("tx");
    for (k, v) in rows {
        tx.define(
            &t,
            OpKind::Write,
            &[("id", Value::UInt(k))],
            &[("v", Value::Int(v))],
            None,
        )
        .expect("define");
    }
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("commit");
    tx.gci().expect("gci")
}

fn delete(c: &Cluster, key: u64) -> u64 {
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(&t, OpKind::Delete, &[("id", Value::UInt(key))], &[], None)
        .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("commit");
    tx.gci().expect("gci")
}

pub(super) fn contents(c: &Cluster) -> BTreeMap<u64, i64> {
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    let mut tx = ndb.start_transaction().expect("tx");
    let mut s = tx.scan(ScanSpec::table(t.clone())).expect("scan");
    let mut out = BTreeMap::new();
    while let Some(r) = tx.scan_next(&mut s).expect("next") {
        if let [Value::UInt(k), Value::Int(v)] = &r[..] {
            out.insert(*k, *v);
        }
    }
    for cell in t.all_cells() {
        cell.state.lock().check().expect("fragment invariants");
    }
    out
}

fn start(dir: &Path) -> Cluster {
    Cluster::embedded_in(config(), dir.to_path_buf()).expect("start")
}

#[test]
fn graceful_restarts_keep_every_commit_across_lives() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let mut c = start(dir);
    c.ndb("test").create_table(spec()).expect("create");
    for life in 0..4i64 {
        for i in 0..20u64 {
            let rows: Vec<(u64, i64)> = (0..5)
                .map(|j| ((i * 7 + j * 13) % 50, life * 1000 + i as i64))
                .collect();
            write(&c, rows.iter().copied());
            model.extend(rows);
        }
        c.shutdown();
        drop(c);
        let c2 = start(dir);
        assert_eq!(contents(&c2), model, "after life {life}");
        c = c2;
    }
}

/// Committed transactions of a life: (rows written, commit GCI).
pub(super) type Committed = Vec<(Vec<(u64, i64)>, u64)>;

/// A seeded xorshift generator for the power-loss tests' lives.
pub(super) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

/// The system restart on a life's disk image, checked against the model: it restored at
/// least `durable`, and exactly the transactions of `txns` up to the GCI it restored
/// (added to `model`). Returns the cluster and that GCI, or what is wrong.
pub(super) fn restart_and_check(
    image: &crate::disk::io::MemFileSystem,
    txns: &Committed,
    durable: u32,
    model: &mut BTreeMap<u64, i64>,
) -> std::result::Result<(Cluster, u32), String> {
    let c = Cluster::embedded_on(config(), "/data".into(), Arc::new(image.clone()))
        .map_err(|e| format!("restart: {e}"))?;
    let restored = c.inner().restart.lock().as_ref().map(|s| s.restored_gci);
    let restored = restored.ok_or("not a system restart")?;
    if restored < durable {
        return Err(format!("restored {restored} < durable {durable}"));
    }
    for (rows, gci) in txns {
        if (gci >> 32) as u32 <= restored {
            model.extend(rows.iter().copied());
        }
    }
    let got = if c.ndb("test").table("t").is_ok() {
        contents(&c)
    } else {
        BTreeMap::new()
    };
    if got != *model {
        return Err(format!("restored GCI {restored}: {got:?} != {model:?}"));
    }
    Ok((c, restored))
}

/// One life of the simulated crash test: writes transactions, makes some durable, and
/// loses power at a seeded moment. Returns the committed transactions (rows, gci) and
/// the highest GCI confirmed durable.
fn crash_life(
    fs: &crate::disk::io::MemFileSystem,
    seed: u64,
    life: u64,
) -> (Committed, u32, crate::disk::io::MemFileSystem) {
    let c = Cluster::embedded_on(config(), "/data".into(), Arc::new(fs.clone())).expect("start");
    if c.ndb("test").table("t").is_err() {
        c.ndb("test").create_table(spec()).expect("create");
    }
    let mut next = xorshift(seed);
    let mut txns = Vec::new();
    let mut durable = 0;
    let n = 5 + next() % 40;
    let crash_at = next() % n;
    let mut image = None;
    for i in 0..n {
        if i == crash_at {
            image = Some(fs.crash_image(next()));
        }
        let rows: Vec<(u64, i64)> = (0..1 + next() % 4)
            .map(|_| (next() % 60, (life * 10_000 + i) as i64))
            .collect();
        let gci = write(&c, rows.iter().copied());
        txns.push((rows, gci));
        if next().is_multiple_of(7) {
            c.inner().run_lcp().expect("lcp");
        }
        if next().is_multiple_of(5) {
            c.wait_durable(gci, std::time::Duration::from_secs(10))
                .expect("durable");
            if image.is_none() {
                durable = (gci >> 32) as u32;
            }
        }
    }
    let image = image.unwrap_or_else(|| fs.crash_image(next()));
    drop(c);
    (txns, durable, image)
}

#[test]
fn power_loss_keeps_exactly_the_restorable_gcis() {
    for seed in 1..=12u64 {
        let mut fs = crate::disk::io::MemFileSystem::new();
        let mut model: BTreeMap<u64, i64> = BTreeMap::new();
        for life in 0..3u64 {
            let (txns, durable, image) = crash_life(&fs, seed * 100 + life, life);
            let (c, _) = restart_and_check(&image, &txns, durable, &mut model)
                .unwrap_or_else(|e| panic!("seed {seed} life {life}: {e}"));
            c.shutdown();
            drop(c);
            fs = image;
            if seed % 2 == 0 {
                // A life that writes nothing (the crash test's checking parent).
                let c = Cluster::embedded_on(config(), "/data".into(), Arc::new(fs.clone()))
                    .expect("restart");
                c.shutdown();
            }
        }
    }
}

#[test]
fn partial_checkpoints_restore_with_the_redo_after_them() {
    let fs = crate::disk::io::MemFileSystem::new();
    // Only the LCPs this test runs (none triggered by the redo written).
    let mut cfg = config();
    cfg.set_data_node_param("TimeBetweenLocalCheckpoints", "31")
        .expect("param");
    let c = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone())).expect("start");
    c.ndb("test").create_table(spec()).expect("create");
    let mut model = BTreeMap::new();
    let n = 100_000u64;
    let t = c.ndb("test").table("t").expect("t");
    let batch: Vec<Vec<Value>> = (0..n)
        .map(|i| vec![Value::UInt(i), Value::Int(i as i64)])
        .collect();
    c.ndb("test")
        .insert_batch(&t, &[0, 1], batch)
        .expect("load");
    model.extend((0..n).map(|i| (i, i as i64)));
    let full = c.inner().run_lcp().expect("first lcp");
    // every row of both replicas, in full
    assert_eq!(full.rows, 2 * n, "{full:?}");
    // 1% changed: the LCP writes the changed rows and the pages of its ALL parts
    // (at least 2048 / pages of them, so that every page is written in full now and
    // then), not the whole fragment.
    let rows: Vec<(u64, i64)> = (0..n / 100).map(|i| (i * 97 % n, -1)).collect();
    for chunk in rows.chunks(100) {
        write(&c, chunk.iter().copied());
    }
    model.extend(rows);
    let partial = c.inner().run_lcp().expect("partial lcp");
    // (in a changed 128-byte region only the rows changed since the previous LCP: a
    // row's GCI tells)
    assert!(
        partial.rows * 10 < full.rows && partial.rows >= 2 * n / 100,
        "partial LCP wrote {partial:?} after a full one of {full:?}"
    );
    assert!(partial.bytes * 10 < full.bytes);
    // nothing changed: nothing written
    let idle = c.inner().run_lcp().expect("idle lcp");
    assert_eq!((idle.rows, idle.fragments), (0, 0), "{idle:?}");
    // changes after the last LCP come from the redo log
    write(&c, [(5, 555), (99_999, 1999)].into_iter());
    model.insert(5, 555);
    model.insert(99_999, 1999);
    let gci = write(&c, [(3000, 1)].into_iter());
    model.insert(3000, 1);
    c.wait_durable(gci, std::time::Duration::from_secs(10))
        .expect("durable");
    let image = fs.crash_image(7);
    drop(c);
    let c = Cluster::embedded_on(cfg, "/data".into(), Arc::new(image)).expect("restart");
    assert_eq!(contents(&c), model);
    let stats = c.inner().restart.lock().clone().expect("restart stats");
    let restored: u64 = stats.nodes.iter().map(|n| n.restored_rows).sum();
    let replayed: u64 = stats.nodes.iter().map(|n| n.redo_records).sum();
    assert!(restored >= 2 * n, "rows from the checkpoints: {stats:?}");
    assert!(
        replayed < 2 * 10,
        "only the redo after the keep position: {stats:?}"
    );
}

#[test]
fn an_lcp_closes_a_checkpoint_only_when_it_saw_an_undurable_change() {
    let fs = crate::disk::io::MemFileSystem::new();
    let mut cfg = config();
    cfg.set_data_node_param("TimeBetweenLocalCheckpoints", "31")
        .expect("param");
    // No regular checkpoint closes the delete's GCI before the LCP does.
    cfg.set_data_node_param("TimeBetweenGlobalCheckpoints", "30000")
        .expect("param");
    let c = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone())).expect("start");
    c.ndb("test").create_table(spec()).expect("create");
    let mut model = BTreeMap::new();
    let rows: Vec<(u64, i64)> = (0..2000u64).map(|i| (i, i as i64)).collect();
    write(&c, rows.iter().copied());
    model.extend(rows);
    c.inner().force_gcp().expect("gcp");
    // Everything loaded is durable: the first LCP needs no checkpoint of its own.
    let durable = c.inner().gcp.durable_hi();
    let full = c.inner().run_lcp().expect("full lcp");
    assert!(full.rows > 0 && !full.gcp_forced, "{full:?}");
    assert_eq!(c.inner().gcp.durable_hi(), durable);
    // A delete in the open checkpoint: absent from the LCP's ALL parts, a delete
    // marker elsewhere; the LCP closes the checkpoint it is in.
    let gci = delete(&c, 7);
    model.remove(&7);
    let partial = c.inner().run_lcp().expect("partial lcp");
    assert!(partial.gcp_forced, "{partial:?}");
    assert!(u64::from(c.inner().gcp.durable_hi()) >= crate::log::gcp::gci_hi(gci) as u64);
    // A power loss right after the LCP, without any later checkpoint, keeps it.
    write(&c, [(8, -8)].into_iter());
    model.insert(8, -8);
    c.inner().force_gcp().expect("gcp");
    let quiet = c.inner().run_lcp().expect("lcp after a durable change");
    assert!(quiet.fragments > 0 && !quiet.gcp_forced, "{quiet:?}");
    let image = fs.crash_image(11);
    drop(c);
    let c = Cluster::embedded_on(cfg, "/data".into(), Arc::new(image)).expect("restart");
    assert_eq!(contents(&c), model);
}

#[test]
fn dropped_tables_leave_no_checkpoint_files() {
    let fs = crate::disk::io::MemFileSystem::new();
    let mut cfg = config();
    cfg.set_data_node_param("TimeBetweenLocalCheckpoints", "31")
        .expect("param");
    let lcp_files = |fs: &crate::disk::io::MemFileSystem, t: u32| {
        fs.paths()
            .iter()
            .filter(|p| p.to_string_lossy().contains(&format!("/LCP/T{t}F")))
            .count()
    };
    let c = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone())).expect("start");
    let ndb = c.ndb("test");
    let mut spec2 = spec();
    spec2.name = "t2".into();
    let t2 = ndb.create_table(spec2).expect("t2").def.id;
    let mut spec3 = spec();
    spec3.name = "t3".into();
    let t3 = ndb.create_table(spec3).expect("t3").def.id;
    for name in ["t2", "t3"] {
        let t = ndb.table(name).expect("table");
        let rows: Vec<Vec<Value>> = (0..100u64)
            .map(|i| vec![Value::UInt(i), Value::Int(1)])
            .collect();
        ndb.insert_batch(&t, &[0, 1], rows).expect("rows");
    }
    c.inner().run_lcp().expect("lcp");
    assert!(lcp_files(&fs, t2) > 0 && lcp_files(&fs, t3) > 0);
    // removed by the next LCP round
    ndb.drop_table("t2", false).expect("drop");
    c.inner().run_lcp().expect("lcp");
    assert_eq!(lcp_files(&fs, t2), 0);
    // dropped, then a crash before any LCP: the restart removes them
    ndb.drop_table("t3", false).expect("drop");
    assert!(lcp_files(&fs, t3) > 0);
    let image = fs.crash_image(3);
    drop(c);
    let c = Cluster::embedded_on(cfg, "/data".into(), Arc::new(image.clone())).expect("restart");
    assert!(c.ndb("test").table("t3").is_err());
    assert_eq!(lcp_files(&image, t3), 0);
}

#[test]
fn ndbinfo_shows_the_redo_log_parts() {
    let fs = crate::disk::io::MemFileSystem::new();
    let c = Cluster::embedded_on(config(), "/data".into(), Arc::new(fs)).expect("start");
    c.ndb("test").create_table(spec()).expect("create");
    write(&c, (0..50u64).map(|i| (i, 1)));
    let (cols, rows) = crate::ndbinfo::lookup(c.inner(), "ndbinfo", "logspaces")
        .expect("table")
        .expect("rows");
    assert_eq!(cols[1], "log_type");
    let redo: Vec<_> = rows
        .iter()
        .filter(|r| r[1] == Value::Str("REDO".into()))
        .collect();
    // NoOfFragmentLogParts (4) rows per data node
    assert_eq!(redo.len(), 2 * 4, "{rows:?}");
    let used: u64 = redo
        .iter()
        .map(|r| match r[5] {
            Value::UInt(u) => u,
            _ => 0,
        })
        .sum();
    assert!(used > 0, "the writes are in the redo log: {rows:?}");
    let (_, bufs) = crate::ndbinfo::lookup(c.inner(), "ndbinfo", "logbuffers")
        .expect("table")
        .expect("rows");
    assert_eq!(
        bufs.iter()
            .filter(|r| r[1] == Value::Str("REDO".into()))
            .count(),
        8
    );
}

#[test]
fn a_failed_checkpoint_is_written_in_full_by_the_next() {
    let fs = crate::disk::io::MemFileSystem::new();
    let mut cfg = config();
    cfg.set_data_node_param("TimeBetweenLocalCheckpoints", "31")
        .expect("param");
    let c = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone())).expect("start");
    let ndb = c.ndb("test");
    ndb.create_table(spec()).expect("create");
    let t = ndb.table("t").expect("t");
    let n = 50_000u64;
    let rows: Vec<Vec<Value>> = (0..n)
        .map(|i| vec![Value::UInt(i), Value::Int(0)])
        .collect();
    ndb.insert_batch(&t, &[0, 1], rows).expect("load");
    let mut model: BTreeMap<u64, i64> = (0..n).map(|i| (i, 0)).collect();
    c.inner().run_lcp().expect("first lcp");
    // changes, then an LCP that fails writing its data files: its scan took the
    // change maps, but its files never become part of a chain
    let changed: Vec<(u64, i64)> = (0..200).map(|i| (i * 211 % n, 7)).collect();
    write(&c, changed.iter().copied());
    model.extend(changed);
    // LCP files fail their fdatasync: the data file of a scanned fragment never
    // becomes complete (the redo log and system files work)
    fs.set_faults(crate::disk::io::Faults {
        fail_syncs: true,
        only_paths_containing: Some("/LCP/".into()),
        ..Default::default()
    });
    assert!(c.inner().run_lcp().is_err());
    fs.set_faults(crate::disk::io::Faults::default());
    let full: Vec<u64> = t
        .all_cells()
        .map(|cell| cell.state.lock())
        .filter(|f| f.lcp_needs_full())
        .map(|f| f.rows())
        .collect();
    assert!(!full.is_empty(), "the failed LCP scanned a fragment");
    // the next LCP writes those fragments in full, and the keep moves past the changes
    let next = c.inner().run_lcp().expect("lcp after the failure");
    assert!(next.rows >= full.iter().sum::<u64>(), "{next:?} {full:?}");
    assert!(
        t.all_cells()
            .all(|cell| !cell.state.lock().lcp_needs_full())
    );
    c.inner().force_gcp().expect("gcp");
    let image = fs.crash_image(11);
    drop(c);
    let c = Cluster::embedded_on(cfg, "/data".into(), Arc::new(image)).expect("restart");
    assert_eq!(contents(&c), model);
}

/// Regression (found by the simulated crash test): redo replay inserts the stored row
/// image as it is; decoding a BLOB column's head and encoding it again made a new BLOB
/// of the head's length ("BLOB column 'body' has 794 of 264 bytes" on every read).
#[test]
fn redo_replay_keeps_blob_values() {
    let fs = crate::disk::io::MemFileSystem::new();
    let c = Cluster::embedded_on(
        super::sim_crash_tests::config(),
        "/data".into(),
        Arc::new(fs.clone()),
    )
    .expect("start");
    let ndb = c.ndb("test");
    let t = ndb
        .create_table(super::sim_crash_model::spec(0))
        .expect("create");
    let row = super::sim_crash_model::Row {
        grp: 1,
        u: Some(3),
        val: 5,
        data_txn: 5,
        pad_len: 10,
        body_len: Some(794),
    };
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[("id", Value::UInt(7))],
        &row.columns(7),
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("commit");
    c.inner().force_gcp().expect("gcp");
    let image = fs.crash_image(1);
    c.inner().shutdown_now();
    // restored from the redo log alone (no LCP ran)
    let c = Cluster::embedded_on(
        super::sim_crash_tests::config(),
        "/data".into(),
        Arc::new(image),
    )
    .expect("restart");
    let got = super::sim_crash_model::read_db(&c).expect("read");
    assert_eq!(
        got[0],
        super::sim_crash_model::render(&Some([(7, row)].into_iter().collect()))
    );
}

#[test]
fn blob_updates_survive_restarts_with_and_without_a_checkpoint() {
    use crate::schema::BlobKind;
    for lcp_at in [None, Some(0), Some(1), Some(2)] {
        let fs = crate::disk::io::MemFileSystem::new();
        let c =
            Cluster::embedded_on(config(), "/data".into(), Arc::new(fs.clone())).expect("start");
        let ndb = c.ndb("test");
        let t = ndb
            .create_table(TableSpec::new(
                "b",
                vec![
                    Column::new(
                        "id",
                        ColumnType::Int {
                            bytes: 4,
                            unsigned: true,
                        },
                    )
                    .primary_key(),
                    Column::new(
                        "body",
                        ColumnType::Blob {
                            kind: BlobKind::Regular,
                            charset: None,
                        },
                    ),
                ],
            ))
            .expect("create");
        let mut gci = 0;
        for (step, len) in [2300usize, 5000, 264].into_iter().enumerate() {
            if lcp_at == Some(step) {
                c.inner().run_lcp().expect("lcp");
            }
            let mut tx = ndb.start_transaction().expect("tx");
            tx.define(
                &t,
                OpKind::Write,
                &[("id", Value::UInt(1))],
                &[("body", Value::Bytes(vec![step as u8; len]))],
                None,
            )
            .expect("define");
            tx.execute(ExecType::Commit, AbortOption::AbortOnError)
                .expect("commit");
            gci = tx.gci().expect("gci");
        }
        c.wait_durable(gci, std::time::Duration::from_secs(10))
            .expect("durable");
        let image = fs.crash_image(5);
        drop(c);
        let c = Cluster::embedded_on(config(), "/data".into(), Arc::new(image)).expect("restart");
        let ndb = c.ndb("test");
        let t = ndb.table("b").expect("b");
        let mut tx = ndb.start_transaction().expect("tx");
        let op = tx
            .define(
                &t,
                OpKind::Read(crate::txn::LockMode::CommittedRead),
                &[("id", Value::UInt(1))],
                &[],
                None,
            )
            .expect("define");
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)
            .unwrap_or_else(|e| panic!("lcp at {lcp_at:?}: {e}"));
        match tx.outcome(op) {
            Some(OpOutcome::Row(r)) => {
                assert_eq!(r[1], Value::Bytes(vec![2; 264]), "lcp at {lcp_at:?}")
            }
            other => panic!("lcp at {lcp_at:?}: {other:?}"),
        }
    }
}

/// A power loss at every write of a first start (redo files, system files, schema
/// file): the next start works — before, a crash between two nodes' first system
/// files left one node without one, and every later start was refused.
#[test]
fn a_first_start_cut_by_a_crash_starts_again() {
    let mut cut = 0;
    for n in 1..60u64 {
        let fs = crate::disk::io::MemFileSystem::new();
        fs.crash_at(crate::disk::io::IoOp::Write, n, n);
        let first = Cluster::embedded_on(config(), "/data".into(), Arc::new(fs.clone()));
        let Some(image) = fs.take_crash_image() else {
            first.expect("a start without a power loss");
            break;
        };
        drop(first);
        cut += 1;
        let c = Cluster::embedded_on(config(), "/data".into(), Arc::new(image))
            .unwrap_or_else(|e| panic!("power loss at write {n} of the first start: {e}"));
        c.ndb("test").create_table(spec()).expect("create");
        let gci = write(&c, (0..10).map(|k| (k, k as i64)));
        c.wait_durable(gci, std::time::Duration::from_secs(10))
            .expect("durable");
        assert_eq!(contents(&c).len(), 10);
        c.inner().shutdown_now();
    }
    assert!(cut >= 2, "{cut} starts cut");
}
