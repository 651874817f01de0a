//! System restarts of clusters with disk-data tables: the undo pass brings the disk
//! pages back to the checkpoint's start, restored rows are linked to their records,
//! the redo replay rewrites the rest; checked against a model of the committed rows,
//! with the fragments' invariants (every row's record names it, the allocator agrees
//! with the extent headers) and the tablespace's free extents.

use super::*;
use crate::disk::io::{IoOp, MemFileSystem};
use crate::schema::Value;
use crate::sql::{Session, SqlResult, render_error};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) const LG: &str = "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=4M UNDO_BUFFER_SIZE=1M ENGINE=NDB";
pub(super) const TS: &str = "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=8M EXTENT_SIZE=256K ENGINE=NDB";
pub(super) const TABLE: &str = "CREATE TABLE t (id INT PRIMARY KEY, a INT, d VARCHAR(2000)) TABLESPACE ts_1 STORAGE DISK ENGINE=NDB";

pub(super) type Model = BTreeMap<i64, (i64, String)>;

fn config() -> crate::config::ClusterConfig {
    let mut cfg = crate::config::small_disk_test_config(2, 2, "16M");
    for (k, v) in [
        ("TimeBetweenGlobalCheckpoints", "20"),
        ("TimeBetweenEpochs", "3"),
        ("NoOfFragmentLogFiles", "3"),
        ("FragmentLogFileSize", "4M"),
        ("RedoBuffer", "4M"),
        // Only the LCPs the tests run.
        ("TimeBetweenLocalCheckpoints", "31"),
    ] {
        cfg.set_data_node_param(k, v).expect(k);
    }
    cfg
}

pub(super) fn start(fs: &MemFileSystem) -> Cluster {
    Cluster::embedded_on(config(), "/data".into(), Arc::new(fs.clone())).expect("start")
}

/// A cluster on `fs` with the logfile group, the tablespace and table `t`.
pub(super) fn start_with_table(fs: &MemFileSystem) -> (Cluster, Session) {
    let c = start(fs);
    let mut s = Session::new(c.ndb("test"));
    run(&mut s, LG);
    run(&mut s, TS);
    run(&mut s, TABLE);
    (c, s)
}

pub(super) fn run(s: &mut Session, sql: &str) {
    if let Err(e) = s.execute(sql) {
        panic!("{sql}: {}", render_error(&e));
    }
}

pub(super) fn payload(id: i64, version: i64) -> String {
    // Lengths vary with the version so that updates move records between pages.
    let len = 300 + ((id * 37 + version * 101) % 1600) as usize;
    let c = (b'a' + ((id + version) % 26) as u8) as char;
    std::iter::repeat_n(c, len).collect()
}

pub(super) fn contents(c: &Cluster) -> Model {
    let mut s = Session::new(c.ndb("test"));
    let r = s
        .execute("SELECT id, a, d FROM t")
        .unwrap_or_else(|e| panic!("select: {}", render_error(&e)));
    let mut out = Model::new();
    let Some(SqlResult::Rows { rows, .. }) = r.into_iter().next() else {
        panic!("no rows result");
    };
    for row in rows {
        match &row[..] {
            [Value::Int(id), Value::Int(a), Value::Str(d)] => {
                out.insert(*id, (*a, d.clone()));
            }
            other => panic!("{other:?}"),
        }
    }
    let t = c.ndb("test").table("t").expect("t");
    for cell in t.all_cells() {
        cell.state.lock().check().expect("fragment invariants");
    }
    for n in &c.inner().data_nodes {
        n.disk.tsman.check().expect("tablespace invariants");
    }
    out
}

/// Applies `ops` (insert/update/delete chosen by a simple generator) through SQL and to
/// the model.
fn churn(s: &mut Session, model: &mut Model, seed: u64, ops: usize, version: i64) {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    for _ in 0..ops {
        let id = (next() % 400) as i64;
        match (model.contains_key(&id), next() % 3) {
            (false, _) => {
                let d = payload(id, version);
                run(s, &format!("INSERT INTO t VALUES ({id}, {version}, '{d}')"));
                model.insert(id, (version, d));
            }
            (true, 0) => {
                run(s, &format!("DELETE FROM t WHERE id = {id}"));
                model.remove(&id);
            }
            (true, 1) => {
                // memory column only
                run(s, &format!("UPDATE t SET a = a + 1 WHERE id = {id}"));
                if let Some(r) = model.get_mut(&id) {
                    r.0 += 1;
                }
            }
            (true, _) => {
                let d = payload(id, version + 7);
                run(s, &format!("UPDATE t SET d = '{d}' WHERE id = {id}"));
                if let Some(r) = model.get_mut(&id) {
                    r.1 = d;
                }
            }
        }
    }
}

pub(super) fn free_extents(c: &Cluster) -> Vec<u64> {
    c.inner()
        .data_nodes
        .iter()
        .map(|n| {
            n.disk
                .tsman
                .files_info()
                .iter()
                .map(|f| f.free_extents)
                .sum()
        })
        .collect()
}

/// Crash (unsynced writes lost as `seed` decides) and restart on what survived.
pub(super) fn crash_and_restart(
    c: Cluster,
    fs: &MemFileSystem,
    seed: u64,
) -> (Cluster, MemFileSystem) {
    c.inner().force_gcp().expect("gcp");
    let image = fs.crash_image(seed);
    c.inner().shutdown_now();
    drop(c);
    let c = start(&image);
    (c, image)
}

#[test]
fn disk_tables_survive_crashes_with_checkpoints_between() {
    for (seed, lcp_points) in [
        (1u64, vec![0usize]),
        (2, vec![1]),
        (3, vec![0, 2]),
        (4, vec![]),
    ] {
        let fs = MemFileSystem::new();
        let (c, mut s) = start_with_table(&fs);
        let mut model = Model::new();
        for round in 0..3usize {
            churn(
                &mut s,
                &mut model,
                seed * 10 + round as u64,
                250,
                round as i64 * 1000,
            );
            if lcp_points.contains(&round) {
                c.inner().run_lcp().expect("lcp");
            }
        }
        drop(s);
        let (c, fs) = crash_and_restart(c, &fs, seed);
        assert_eq!(
            contents(&c),
            model,
            "seed {seed}, LCPs after rounds {lcp_points:?}"
        );
        // A second life on top of the first: more changes, an LCP, more, a crash.
        let mut s = Session::new(c.ndb("test"));
        churn(&mut s, &mut model, seed * 10 + 7, 200, 5000);
        c.inner().run_lcp().expect("lcp");
        churn(&mut s, &mut model, seed * 10 + 8, 200, 6000);
        drop(s);
        let (c, _fs) = crash_and_restart(c, &fs, seed + 100);
        assert_eq!(contents(&c), model, "seed {seed}, second life");
        let info = c.inner().restart.lock().clone().expect("restart stats");
        assert!(
            info.nodes.iter().all(|n| n.secs_undo_disk_data > 0.0),
            "{info:?}"
        );
    }
}

#[test]
fn extents_emptied_after_the_checkpoint_come_back_to_their_fragment() {
    let fs = MemFileSystem::new();
    let (c, mut s) = start_with_table(&fs);
    let mut model = Model::new();
    for id in 0..800i64 {
        let d = payload(id, 0);
        run(&mut s, &format!("INSERT INTO t VALUES ({id}, 0, '{d}')"));
        model.insert(id, (0, d));
    }
    c.inner().run_lcp().expect("lcp");
    let at_lcp = free_extents(&c);
    // Deleting most rows gives extents back after the checkpoint...
    for id in 0..780i64 {
        run(&mut s, &format!("DELETE FROM t WHERE id = {id}"));
        model.remove(&id);
    }
    assert!(
        free_extents(&c).iter().zip(&at_lcp).all(|(a, b)| a > b),
        "extents returned: {:?} -> {:?}",
        at_lcp,
        free_extents(&c)
    );
    let after_deletes = free_extents(&c);
    drop(s);
    // ...the restart undoes that (pages and owners at the LCP's start) and the redo
    // deletes again: the same rows, and the extents free again.
    let (c, _fs) = crash_and_restart(c, &fs, 9);
    assert_eq!(contents(&c), model);
    assert_eq!(free_extents(&c), after_deletes);
}

#[test]
fn a_table_dropped_before_the_crash_gives_its_extents_back() {
    let fs = MemFileSystem::new();
    let c = start(&fs);
    let mut s = Session::new(c.ndb("test"));
    run(&mut s, LG);
    run(&mut s, TS);
    let empty = free_extents(&c);
    run(&mut s, TABLE);
    run(
        &mut s,
        "CREATE TABLE gone (id INT PRIMARY KEY, d VARCHAR(2000)) TABLESPACE ts_1 STORAGE DISK ENGINE=NDB",
    );
    let mut model = Model::new();
    for id in 0..100i64 {
        let d = payload(id, 0);
        run(&mut s, &format!("INSERT INTO t VALUES ({id}, 0, '{d}')"));
        run(&mut s, &format!("INSERT INTO gone VALUES ({id}, '{d}')"));
        model.insert(id, (0, d));
    }
    c.inner().run_lcp().expect("lcp");
    let with_t = {
        run(&mut s, "DROP TABLE gone");
        free_extents(&c)
    };
    assert!(with_t.iter().zip(&empty).all(|(a, b)| a < b));
    drop(s);
    let (c, _fs) = crash_and_restart(c, &fs, 4);
    assert_eq!(contents(&c), model);
    assert_eq!(free_extents(&c), with_t, "only t's extents are in use");
}

/// A power loss during the restart (in the undo pass, the relink or the redo replay):
/// the next restart still gets every committed row, its disk columns included.
#[test]
fn a_crash_during_the_restart_is_recovered_by_the_next() {
    let fs = MemFileSystem::new();
    let (c, mut s) = start_with_table(&fs);
    let mut model = Model::new();
    churn(&mut s, &mut model, 21, 250, 0);
    c.inner().run_lcp().expect("lcp");
    churn(&mut s, &mut model, 22, 250, 1000);
    drop(s);
    c.inner().force_gcp().expect("gcp");
    let image = fs.crash_image(5);
    c.inner().shutdown_now();
    drop(c);
    let mut crashed_restarts = 0;
    for (op, n) in [
        (IoOp::Write, 3),
        (IoOp::Write, 12),
        (IoOp::Sync, 2),
        (IoOp::Sync, 6),
        (IoOp::Sync, 15),
        (IoOp::Write, 30),
    ] {
        let fs = image.crash_image(0);
        fs.crash_at(op, n, n);
        let first = Cluster::embedded_on(config(), "/data".into(), Arc::new(fs.clone()));
        // Disarm before asking: a restart that finished short of the n-th operation must
        // not lose power later in a background checkpoint or in the GCP below. A power
        // loss that came after the restart finished (before the disarm) still leaves a
        // crash image the next restart must recover from.
        fs.crash_at(op, 0, 0);
        let image2 = match fs.take_crash_image() {
            Some(i) => {
                crashed_restarts += 1;
                i
            }
            None => {
                let c = first.expect("a restart without a power loss");
                c.inner().force_gcp().expect("gcp");
                let i = fs.crash_image(n);
                c.inner().shutdown_now();
                i
            }
        };
        let c = start(&image2);
        assert_eq!(
            contents(&c),
            model,
            "power loss at {op:?} #{n} of the restart"
        );
        c.inner().shutdown_now();
    }
    assert!(
        crashed_restarts >= 4,
        "{crashed_restarts} restarts were cut short"
    );
}

/// A power loss at every write of CREATE TABLESPACE (its data file's pages, the schema
/// file): after the restart the statement either happened or did not — never a data
/// file left behind that makes it fail again (760) — and it can be run (again).
#[test]
fn a_create_cut_by_a_crash_happened_or_did_not() {
    let mut cut = 0;
    for n in 1..40u64 {
        let fs = MemFileSystem::new();
        let c = start(&fs);
        let mut s = Session::new(c.ndb("test"));
        run(&mut s, LG);
        fs.crash_at(IoOp::Write, n, n);
        let done = s.execute(TS).is_ok() && !fs.powered_off();
        let image = fs.take_crash_image();
        drop(s);
        c.inner().shutdown_now();
        drop(c);
        let Some(image) = image else {
            assert!(done, "write {n}: no power loss and no tablespace");
            break; // the statement needs fewer writes
        };
        cut += 1;
        let c = start(&image);
        let mut s = Session::new(c.ndb("test"));
        if c.inner().disk_dict.lock().tablespace("ts_1").is_none() {
            run(&mut s, TS);
        }
        run(&mut s, TABLE);
        run(&mut s, "INSERT INTO t VALUES (1, 2, 'three')");
        assert_eq!(contents(&c).len(), 1, "power loss at write {n}");
        c.inner().shutdown_now();
    }
    assert!(cut >= 3, "{cut} statements cut");
}
