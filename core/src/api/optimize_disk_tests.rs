//! OPTIMIZE TABLE on disk-data tables: records move out of the least used extents and
//! those extents go back to the tablespace; every row keeps its disk columns, through
//! crashes before and after the checkpoint that follows the moves.

use super::disk_restart_tests::{
    LG, Model, TABLE, TS, contents, crash_and_restart, free_extents, payload, run, start,
};
use super::optimize::OptimizeOptions;
use super::optimize_tests::optimize;
use super::*;
use crate::disk::io::MemFileSystem;
use std::collections::BTreeMap;
use std::sync::Arc;

fn load(s: &mut crate::sql::Session, model: &mut Model, ids: std::ops::Range<i64>) {
    for chunk in ids.collect::<Vec<_>>().chunks(50) {
        let values: Vec<String> = chunk
            .iter()
            .map(|&id| format!("({id}, {id}, '{}')", payload(id, 0)))
            .collect();
        run(s, &format!("INSERT INTO t VALUES {}", values.join(",")));
        for &id in chunk {
            model.insert(id, (id, payload(id, 0)));
        }
    }
}

fn reclaimable_extents(c: &Cluster) -> u64 {
    let t = c.ndb("test").table("t").expect("t");
    t.all_cells()
        .map(|cell| u64::from(cell.state.lock().reclaimable().extents))
        .sum()
}

/// The disk-data tests' cluster and table, with an undo file of 16M instead of 4M: a
/// restart replays the redo since the last LCP, whose disk changes log undo again on
/// top of the undo the restart keeps, and these tests crash after ~2M of undo (the
/// load, the deletes' before-images, the moves).
fn start_with_table(fs: &MemFileSystem) -> (Cluster, crate::sql::Session) {
    let c = start(fs);
    let mut s = crate::sql::Session::new(c.ndb("test"));
    let lg = LG.replace("INITIAL_SIZE=4M", "INITIAL_SIZE=16M");
    assert!(lg.contains("INITIAL_SIZE=16M"), "{lg}");
    run(&mut s, &lg);
    run(&mut s, TS);
    run(&mut s, TABLE);
    (c, s)
}

/// A table of 1600 rows (~1.1 KB of disk columns each) with 60% deleted, scattered.
fn loaded_then_thinned(fs: &MemFileSystem) -> (Cluster, crate::sql::Session, Model) {
    let (c, mut s) = start_with_table(fs);
    let mut model = Model::new();
    load(&mut s, &mut model, 0..1600);
    run(&mut s, "DELETE FROM t WHERE id % 5 < 3");
    model.retain(|id, _| id % 5 >= 3);
    (c, s, model)
}

#[test]
fn optimize_gives_emptied_extents_back_to_the_tablespace() {
    let fs = MemFileSystem::new();
    let (c, mut s, model) = loaded_then_thinned(&fs);
    let free_before = free_extents(&c);
    assert_eq!(contents(&c), model);
    let promised = reclaimable_extents(&c);
    assert!(promised > 0, "nothing reclaimable after deleting 60%");
    let r = optimize(&c);
    assert!(r.stats.disk_records_moved > 0, "{r:?}");
    let freed = u64::from(r.stats.extents_before - r.stats.extents_after);
    assert!(
        freed >= promised,
        "{freed} extents freed, {promised} promised ({r:?})"
    );
    let free_after = free_extents(&c);
    let gained: u64 = free_after
        .iter()
        .zip(&free_before)
        .map(|(a, b)| a - b)
        .sum();
    assert_eq!(
        gained, freed,
        "tablespace {free_before:?} -> {free_after:?}"
    );
    assert!(
        free_after.iter().zip(&free_before).all(|(a, b)| a > b),
        "every node gets extents back: {free_before:?} -> {free_after:?}"
    );
    // contents() also checks every fragment (each record names its row, the allocator
    // agrees with the extent headers) and the tablespaces.
    assert_eq!(contents(&c), model);
    assert!(reclaimable_extents(&c) <= 2, "{}", reclaimable_extents(&c));
    // The returned extents serve another table.
    run(
        &mut s,
        "CREATE TABLE t2 (id INT PRIMARY KEY, d VARCHAR(2000)) TABLESPACE ts_1 STORAGE DISK ENGINE=NDB",
    );
    for id in 0..200 {
        run(
            &mut s,
            &format!("INSERT INTO t2 VALUES ({id}, '{}')", payload(id, 3)),
        );
    }
    // Updates after the moves (in place and moving) and a second OPTIMIZE.
    let mut model = model;
    for id in (0..1600i64).filter(|id| id % 5 >= 3).step_by(3) {
        let d = payload(id, 9);
        run(&mut s, &format!("UPDATE t SET d = '{d}' WHERE id = {id}"));
        model.insert(id, (id, d));
    }
    assert_eq!(contents(&c), model);
    optimize(&c);
    assert_eq!(contents(&c), model);
}

#[test]
fn moved_records_survive_crashes_around_the_next_checkpoint() {
    // 0: crash with no LCP since the moves; 1: an LCP after the moves, then a crash;
    // 2: an LCP before OPTIMIZE, changes, OPTIMIZE, a crash; 3: an LCP, OPTIMIZE, a
    // partial LCP (the moves alone changed the rows: it must write their new
    // references), a crash.
    for case in 0..4u64 {
        let fs = MemFileSystem::new();
        let (c, mut s, mut model) = loaded_then_thinned(&fs);
        if case >= 2 {
            c.inner().run_lcp().expect("lcp");
        }
        if case == 2 {
            for id in (0..1600i64).filter(|id| id % 5 == 4).step_by(2) {
                let d = payload(id, 5);
                run(&mut s, &format!("UPDATE t SET d = '{d}' WHERE id = {id}"));
                model.insert(id, (id, d));
            }
        }
        let r = optimize(&c);
        assert!(r.stats.disk_records_moved > 0, "case {case}: {r:?}");
        if case == 1 || case == 3 {
            c.inner().run_lcp().expect("lcp");
        }
        // A change after the moves, so redo has something on top of them.
        run(&mut s, "UPDATE t SET a = a + 1 WHERE id % 5 = 3");
        for (id, v) in model.iter_mut() {
            if id % 5 == 3 {
                v.0 += 1;
            }
        }
        drop(s);
        let (c, _fs) = crash_and_restart(c, &fs, case + 11);
        assert_eq!(contents(&c), model, "case {case}");
        let (c, _fs) = crash_and_restart(c, &_fs, case + 21);
        assert_eq!(contents(&c), model, "case {case}, second restart");
    }
}

#[test]
fn sql_optimize_of_a_disk_table_names_the_extents_it_gave_back() {
    let fs = MemFileSystem::new();
    let (c, mut s, model) = loaded_then_thinned(&fs);
    let r = s.execute("OPTIMIZE TABLE t").expect("optimize");
    let Some(crate::sql::SqlResult::Rows { rows, .. }) = r.into_iter().next() else {
        panic!("no rows");
    };
    let note = format!("{:?}", rows[0][3]);
    assert!(
        note.contains("extents given back to the tablespace (16 -> 8)"),
        "{note}"
    );
    assert_eq!(rows[1][3], crate::schema::Value::Str("OK".into()));
    assert_eq!(contents(&c), model);
}

/// Rows of `td` by id: (a, d), read through SQL (the disk column from its record,
/// which names the row), with every fragment's invariants checked.
fn td_contents(c: &Cluster) -> BTreeMap<i64, (i64, String)> {
    let mut s = crate::sql::Session::new(c.ndb("test"));
    let r = s.execute("SELECT id, a, d FROM td").expect("select td");
    let Some(crate::sql::SqlResult::Rows { rows, .. }) = r.into_iter().next() else {
        panic!("no rows");
    };
    let t = c.ndb("test").table("td").expect("td");
    for cell in t.all_cells() {
        cell.state.lock().check().expect("fragment invariants");
    }
    rows.into_iter()
        .map(|row| match &row[..] {
            [
                crate::schema::Value::Int(id),
                crate::schema::Value::Int(a),
                crate::schema::Value::Str(d),
            ] => (*id, (*a, d.clone())),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Table `td` (small disk parts, many rows: several fixed pages per replica) loaded with
/// 9000 rows, three of four deleted; returns the model of what is left.
fn load_td(s: &mut crate::sql::Session) -> BTreeMap<i64, (i64, String)> {
    run(
        s,
        "CREATE TABLE td (id INT PRIMARY KEY, a INT, d VARCHAR(24) STORAGE DISK) TABLESPACE ts_1 STORAGE DISK ENGINE=NDB",
    );
    let mut model = BTreeMap::new();
    for chunk in (0..9000i64).collect::<Vec<_>>().chunks(500) {
        let v: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, {}, 'disk-{i}')", i * 7))
            .collect();
        run(s, &format!("INSERT INTO td VALUES {}", v.join(",")));
        model.extend(chunk.iter().map(|&i| (i, (i * 7, format!("disk-{i}")))));
    }
    for lo in (0..9000).step_by(1000) {
        run(
            s,
            &format!(
                "DELETE FROM td WHERE id % 4 <> 0 AND id >= {lo} AND id < {}",
                lo + 1000
            ),
        );
    }
    model.retain(|id, _| id % 4 == 0);
    model
}

#[test]
fn fixed_parts_of_a_disk_table_move_and_their_records_follow_through_crashes() {
    // Small disk parts, many rows: several fixed pages per replica, thinned out.
    // Cases: 0 LCP, OPTIMIZE, crash; 1 LCP, OPTIMIZE, LCP, crash; 2 OPTIMIZE while LCPs
    // run on another thread (the LCP holds the disk-data replicas' rows in place from
    // its LcpStart record on), then crash.
    for case in 0..3u32 {
        let fs = MemFileSystem::new();
        let (c, mut s) = start_with_table(&fs);
        let mut model = load_td(&mut s);
        c.inner().run_lcp().expect("lcp");
        let ndb = c.ndb("test");
        let t = ndb.table("td").expect("td");
        let opts = OptimizeOptions {
            delay_ms: 0,
            ..OptimizeOptions::default()
        };
        let r = if case == 2 {
            let c2 = c.clone();
            let lcps = std::thread::spawn(move || {
                for _ in 0..3 {
                    c2.inner().run_lcp().expect("lcp");
                }
            });
            let r = ndb.optimize_table(&t, opts).expect("optimize");
            lcps.join().expect("lcp thread");
            r
        } else {
            ndb.optimize_table(&t, opts).expect("optimize")
        };
        assert!(
            r.stats.rows_moved > 0 && r.stats.fixed_pages_after < r.stats.fixed_pages_before,
            "case {case}: {r:?}"
        );
        assert_eq!(td_contents(&c), model, "case {case}, after OPTIMIZE");
        if case == 1 {
            c.inner().run_lcp().expect("lcp");
        }
        run(&mut s, "UPDATE td SET a = a + 1 WHERE id % 8 = 0");
        for (id, v) in model.iter_mut() {
            if id % 8 == 0 {
                v.0 += 1;
            }
        }
        drop(s);
        let (c, fs2) = crash_and_restart(c, &fs, 40 + u64::from(case));
        assert_eq!(td_contents(&c), model, "case {case}, after the crash");
        let (c, _) = crash_and_restart(c, &fs2, 50 + u64::from(case));
        assert_eq!(td_contents(&c), model, "case {case}, after a second crash");
    }
}

#[test]
fn while_an_lcp_holds_a_disk_table_its_rows_stay_and_the_rest_compacts() {
    // What an LCP round holds from before its LcpStart record to its end: every
    // disk-data replica of its node, and no memory table's.
    let fs = MemFileSystem::new();
    let (c, mut s) = start_with_table(&fs);
    let model = load_td(&mut s);
    run(
        &mut s,
        "CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=NDB",
    );
    let node = c.inner().data_nodes[0].clone();
    let holds = ClusterInner::hold_disk_replicas(&c.inner().lcp_fragments(&node));
    let ndb = c.ndb("test");
    let (t, m) = (ndb.table("td").expect("td"), ndb.table("m").expect("m"));
    let on_node = |t: &Arc<TableRuntime>| -> Vec<Arc<crate::txn::FragmentCell>> {
        t.all_cells()
            .filter(|cell| cell.node_id == node.node_id)
            .cloned()
            .collect()
    };
    // td and the disk table `t` of the setup.
    let other_disk = ndb.table("t").expect("t");
    assert_eq!(holds.len(), on_node(&t).len() + on_node(&other_disk).len());
    assert!(on_node(&t).iter().all(|cell| !cell.no_open_cursors()));
    assert!(on_node(&m).iter().all(|cell| cell.no_open_cursors()));
    // OPTIMIZE meanwhile: the held replicas keep their rows, the others move theirs.
    let fixed_pages = |cells: &[Arc<crate::txn::FragmentCell>]| -> u32 {
        cells
            .iter()
            .map(|cell| cell.state.lock().memory().fixed_pages)
            .sum()
    };
    let held_pages_before = fixed_pages(&on_node(&t));
    let r = ndb
        .optimize_table(
            &t,
            OptimizeOptions {
                delay_ms: 0,
                busy_timeout_ms: 50,
            },
        )
        .expect("optimize");
    assert_eq!(r.replicas_busy as usize, on_node(&t).len(), "{r:?}");
    assert_eq!(fixed_pages(&on_node(&t)), held_pages_before, "{r:?}");
    drop(holds);
    assert!(on_node(&t).iter().all(|cell| cell.no_open_cursors()));
    assert!(
        r.stats.rows_moved > 0,
        "the other node's replicas moved rows: {r:?}"
    );
    assert_eq!(td_contents(&c), model);
}
