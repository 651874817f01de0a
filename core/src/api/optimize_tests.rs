//! OPTIMIZE TABLE: pages really come back, every row and index entry survives the moves,
//! the seed's full-memory problem goes away, and checkpoints, restarts and node-restart
//! copies after (or during) it see the same rows.

use super::optimize::{OptimizeOptions, OptimizeReport};
use super::*;
use crate::config::ClusterConfig;
use crate::schema::Value;
use crate::sql::{Session, SqlResult};
use crate::storage::PageKind;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn config(data_memory: &str) -> ClusterConfig {
    let mut cfg = ClusterConfig::embedded(2, 2).expect("config");
    cfg.set_data_node_param("DataMemory", data_memory)
        .expect("DataMemory");
    cfg.set_data_node_param("TransactionDeadlockDetectionTimeout", "2000")
        .expect("timeout");
    cfg
}

fn sql(s: &mut Session, q: &str) -> Vec<SqlResult> {
    s.execute(q).unwrap_or_else(|e| panic!("{q}: {e}"))
}

fn rows(s: &mut Session, q: &str) -> Vec<Vec<Value>> {
    match sql(s, q).pop() {
        Some(SqlResult::Rows { rows, .. }) => rows,
        other => panic!("{q}: {other:?}"),
    }
}

const SCHEMA: &str = "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(200), \
    INDEX ix_a (a)) ENGINE=ndbcluster";

/// The value of `b` for row `id` (lengths 0..199, so var parts differ in size).
fn b_of(id: i64, round: i64) -> String {
    let len = ((id * 37 + round * 11) % 200) as usize;
    "x".repeat(len)
}

fn load(s: &mut Session, n: i64) -> BTreeMap<i64, (i64, String)> {
    let mut model = BTreeMap::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|&i| format!("({i}, {}, '{}')", i % 97, b_of(i, 0)))
            .collect();
        sql(s, &format!("INSERT INTO t VALUES {}", values.join(",")));
        for &i in chunk {
            model.insert(i, (i % 97, b_of(i, 0)));
        }
    }
    model
}

/// Deletes the rows `keep` says no to, in statements of at most 1000 keys.
fn delete_where(
    s: &mut Session,
    model: &mut BTreeMap<i64, (i64, String)>,
    keep: impl Fn(i64) -> bool,
) {
    let gone: Vec<i64> = model.keys().copied().filter(|&k| !keep(k)).collect();
    for chunk in gone.chunks(1000) {
        let list: Vec<String> = chunk.iter().map(|k| k.to_string()).collect();
        sql(
            s,
            &format!("DELETE FROM t WHERE id IN ({})", list.join(",")),
        );
        for k in chunk {
            model.remove(k);
        }
    }
}

/// Every row through a full scan, through the primary key and through the ordered
/// index, compared with the model; every replica's invariants (hash and ordered
/// index structure included).
fn assert_matches(c: &Cluster, s: &mut Session, model: &BTreeMap<i64, (i64, String)>) {
    let got = rows(s, "SELECT id, a, b FROM t ORDER BY id");
    let want: Vec<Vec<Value>> = model
        .iter()
        .map(|(&k, (a, b))| vec![Value::Int(k), Value::Int(*a), Value::Str(b.clone())])
        .collect();
    assert_eq!(got.len(), want.len(), "row count");
    assert!(got == want, "scan differs from the model");
    for (&k, (a, b)) in model.iter().step_by(97) {
        let r = rows(s, &format!("SELECT a, b FROM t WHERE id = {k}"));
        assert_eq!(
            r,
            vec![vec![Value::Int(*a), Value::Str(b.clone())]],
            "key {k}"
        );
    }
    for a in [0i64, 13, 96] {
        let n = rows(s, &format!("SELECT COUNT(*) FROM t WHERE a = {a}"));
        let want = model.values().filter(|(x, _)| *x == a).count() as i64;
        assert_eq!(n, vec![vec![Value::Int(want)]], "index ix_a, a = {a}");
    }
    let t = c.ndb("test").table("t").expect("t");
    for cell in t.all_cells() {
        cell.state.lock().check().expect("fragment invariants");
    }
}

/// Fixed and var pages of every node.
fn row_pages(c: &Cluster) -> u64 {
    c.inner()
        .data_nodes
        .iter()
        .map(|n| n.pool.used_pages_of(PageKind::Fixed) + n.pool.used_pages_of(PageKind::Var))
        .sum()
}

/// Row pages and ordered index pages (DataMemory but the hash index) of every node.
fn data_pages(c: &Cluster) -> u64 {
    c.inner()
        .data_nodes
        .iter()
        .map(|n| {
            n.pool.used_pages_of(PageKind::Fixed)
                + n.pool.used_pages_of(PageKind::Var)
                + n.pool.used_pages_of(PageKind::OrderedIndex)
        })
        .sum()
}

/// OPTIMIZE TABLE t without pauses.
pub(super) fn optimize(c: &Cluster) -> OptimizeReport {
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    ndb.optimize_table(
        &t,
        OptimizeOptions {
            delay_ms: 0,
            ..OptimizeOptions::default()
        },
    )
    .expect("optimize")
}

#[test]
fn optimize_gives_back_fixed_and_var_pages_and_keeps_every_row() {
    let c = Cluster::embedded(config("64M")).expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    let mut model = load(&mut s, 30_000);
    let loaded = row_pages(&c);
    // 60% deleted, scattered: every page keeps rows, none empties by itself.
    delete_where(&mut s, &mut model, |k| (k * 7919) % 10 < 4);
    assert!(
        row_pages(&c) * 10 > loaded * 9,
        "deletes alone free few pages ({loaded} -> {})",
        row_pages(&c)
    );
    let deleted = data_pages(&c);
    let t = c.ndb("test").table("t").expect("t");
    let reclaimable: u64 = t
        .all_cells()
        .map(|cell| u64::from(cell.state.lock().reclaimable().pages()))
        .sum();
    assert!(
        reclaimable > deleted / 2,
        "{reclaimable} of {deleted} reclaimable"
    );
    let r = optimize(&c);
    let after = data_pages(&c);
    assert_eq!(r.replicas, 2 * t.fragments.len() as u32);
    assert!(
        r.stats.rows_moved > 0 && r.stats.var_parts_moved > 0 && r.stats.index_leaves_freed > 0,
        "{r:?}"
    );
    // Indexes this small keep their pages (the node stock keeps a page and a quarter
    // free); `index::ordered_tests` and the seed benchmark show the pages coming back.
    assert!(
        r.stats.ordered_pages_after <= r.stats.ordered_pages_before,
        "{r:?}"
    );
    assert_eq!(r.pages_freed(), deleted - after, "{r:?}");
    assert!(
        r.pages_freed() * 100 >= reclaimable * 95,
        "freed {} of the {reclaimable} pages the estimate promised ({r:?})",
        r.pages_freed()
    );
    // What is left is what the rows need: nothing more to reclaim.
    for cell in t.all_cells() {
        let f = cell.state.lock();
        let m = f.memory();
        let spp = u64::from(
            ((crate::storage::PAGE_SIZE as u32 - 64) / m.fixed_slot_size)
                .min(crate::storage::row_id::MAX_SLOTS_PER_PAGE - 1),
        );
        assert_eq!(
            u64::from(m.fixed_pages),
            m.fixed_rows.div_ceil(spp),
            "{m:?}"
        );
        assert!(f.reclaimable().pages() <= 1, "{:?}", f.reclaimable());
    }
    assert_matches(&c, &mut s, &model);
    // The table goes on working: updates (var parts grow and shrink), inserts into
    // the holes, deletes, and a second OPTIMIZE with nothing to do.
    for k in (0..30_000i64).step_by(7) {
        if let Some(v) = model.get_mut(&k) {
            v.1 = b_of(k, 1);
            sql(
                &mut s,
                &format!("UPDATE t SET b = '{}' WHERE id = {k}", v.1),
            );
        }
    }
    let extra: Vec<String> = (30_000..31_000i64)
        .map(|i| format!("({i}, {}, '{}')", i % 97, b_of(i, 0)))
        .collect();
    sql(&mut s, &format!("INSERT INTO t VALUES {}", extra.join(",")));
    model.extend((30_000..31_000i64).map(|i| (i, (i % 97, b_of(i, 0)))));
    assert_matches(&c, &mut s, &model);
    let again = optimize(&c);
    assert!(again.stats.rows_moved < 2_000, "{again:?}");
    assert_matches(&c, &mut s, &model);
}

#[test]
fn sql_optimize_reports_what_it_gave_back() {
    let c = Cluster::embedded(config("32M")).expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    let mut model = load(&mut s, 5_000);
    delete_where(&mut s, &mut model, |k| k % 2 == 0);
    sql(&mut s, "SET ndb_optimization_delay = 0");
    let r = rows(&mut s, "OPTIMIZE TABLE t, nosuch");
    assert_eq!(r.len(), 4, "{r:?}");
    assert_eq!(r[0][0], Value::Str("test.t".into()));
    assert_eq!(r[0][2], Value::Str("note".into()));
    let Value::Str(note) = &r[0][3] else {
        panic!("{r:?}")
    };
    assert!(note.contains("DataMemory pages given back"), "{note}");
    assert_eq!(
        r[1][2..],
        [Value::Str("status".into()), Value::Str("OK".into())]
    );
    assert_eq!(r[2][2], Value::Str("Error".into()));
    assert_eq!(r[3][3], Value::Str("Operation failed".into()));
    assert_matches(&c, &mut s, &model);
}

/// Seed 001: "I filled up 100% of my DataMemory, then deleted 40% and I cannot create
/// a new table!!" — here OPTIMIZE TABLE gives the pages back and t2 gets them.
#[test]
fn the_seed_problem_full_memory_delete_optimize_then_a_new_table_fits() {
    let c = Cluster::embedded(config("8M")).expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(
        &mut s,
        "CREATE TABLE t1 (id INT PRIMARY KEY, pad CHAR(200), v VARCHAR(100)) ENGINE=ndbcluster",
    );
    let mut n = 0i64;
    loop {
        let values: Vec<String> = (n..n + 200)
            .map(|i| format!("({i}, 'p{i}', '{}')", "v".repeat((i % 100) as usize)))
            .collect();
        match s.execute(&format!("INSERT INTO t1 VALUES {}", values.join(","))) {
            Ok(_) => n += 200,
            Err(e) => {
                assert_eq!(e.code, 827, "{e}");
                break;
            }
        }
    }
    assert!(n > 5_000, "{n} rows filled 8M");
    // 40% deleted, spread over every page.
    for chunk in (0..n)
        .filter(|k| k % 5 < 2)
        .collect::<Vec<_>>()
        .chunks(1000)
    {
        let list: Vec<String> = chunk.iter().map(|k| k.to_string()).collect();
        sql(
            &mut s,
            &format!("DELETE FROM t1 WHERE id IN ({})", list.join(",")),
        );
    }
    let t2 = "CREATE TABLE t2 (id INT PRIMARY KEY, pad CHAR(200)) ENGINE=ndbcluster";
    sql(&mut s, t2);
    let fill_t2 = |s: &mut Session| -> crate::Result<i64> {
        let mut done = 0i64;
        while done < n / 4 {
            let values: Vec<String> = (done..done + 100)
                .map(|i| format!("({i}, 'q{i}')"))
                .collect();
            s.execute(&format!("INSERT INTO t2 VALUES {}", values.join(",")))?;
            done += 100;
        }
        Ok(done)
    };
    let before = fill_t2(&mut s);
    // 827 (data) or 902 (its PRIMARY ordered index): no page for the new table.
    let code = before.map_err(|e| e.code);
    assert!(
        matches!(code, Err(827) | Err(902)),
        "t2 found no free page before OPTIMIZE (as in NDB): {code:?}"
    );
    sql(&mut s, "DELETE FROM t2");
    sql(&mut s, "SET ndb_optimization_delay = 0");
    let r = rows(&mut s, "OPTIMIZE TABLE t1");
    assert_eq!(
        r.last().map(|r| r[3].clone()),
        Some(Value::Str("OK".into())),
        "{r:?}"
    );
    let after = fill_t2(&mut s).expect("t2 fits after OPTIMIZE TABLE t1");
    assert!(after >= n / 4);
    let left = rows(&mut s, "SELECT COUNT(*) FROM t1");
    assert_eq!(
        left,
        vec![vec![Value::Int(
            n - (0..n).filter(|k| k % 5 < 2).count() as i64
        )]]
    );
}

/// Rows move only when no scan holds a position in the replica: a scan left open
/// keeps OPTIMIZE waiting (its rows come back complete and once each); once it
/// closes, the rows move.
#[test]
fn an_open_scan_keeps_rows_in_place_and_sees_each_row_once() {
    let c = Cluster::embedded(config("32M")).expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    let mut model = load(&mut s, 8_000);
    delete_where(&mut s, &mut model, |k| k % 3 == 0);
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    let mut tx = ndb.start_transaction().expect("tx");
    let mut spec = ScanSpec::table(t.clone());
    spec.batch_size = 64;
    let mut scan = tx.scan(spec).expect("scan");
    let mut seen = Vec::new();
    for _ in 0..100 {
        if let Some(r) = tx.scan_next(&mut scan).expect("next") {
            seen.push(r[0].clone());
        }
    }
    let busy = ndb
        .optimize_table(
            &t,
            OptimizeOptions {
                delay_ms: 1,
                busy_timeout_ms: 200,
            },
        )
        .expect("optimize");
    assert!(busy.replicas_busy >= 1, "{busy:?}");
    assert!(
        busy.stats.var_parts_moved > 0,
        "var parts move anyway: {busy:?}"
    );
    while let Some(r) = tx.scan_next(&mut scan).expect("next") {
        seen.push(r[0].clone());
    }
    drop(scan);
    tx.close();
    let mut ids: Vec<i64> = seen
        .iter()
        .map(|v| match v {
            Value::Int(i) => *i,
            other => panic!("{other:?}"),
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        model.keys().copied().collect::<Vec<_>>(),
        "each row once"
    );
    let r = optimize(&c);
    assert!(r.stats.rows_moved > 0 && r.replicas_busy == 0, "{r:?}");
    assert_matches(&c, &mut s, &model);
}

/// OPTIMIZE runs while other sessions insert, update, delete and scan; afterwards the
/// table is exactly the model, on both replicas.
#[test]
fn optimize_under_concurrent_writes_and_scans() {
    let c = Cluster::embedded(config("64M")).expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    let mut model = load(&mut s, 20_000);
    delete_where(&mut s, &mut model, |k| k % 5 < 2);
    let model = Arc::new(parking_lot::Mutex::new(model));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2i64 {
        let (c2, model, stop) = (c.clone(), model.clone(), stop.clone());
        writers.push(std::thread::spawn(move || {
            let mut s = Session::new(c2.ndb("test"));
            let mut i = 0i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let k = (i * 7 + w) % 25_000;
                let b = b_of(k, i);
                // One writer per key residue class: the model's order is the commit order.
                if k % 2 != w {
                    i += 1;
                    continue;
                }
                if i % 3 == 0 {
                    sql(&mut s, &format!("DELETE FROM t WHERE id = {k}"));
                    model.lock().remove(&k);
                } else {
                    sql(
                        &mut s,
                        &format!("REPLACE INTO t VALUES ({k}, {}, '{b}')", k % 97),
                    );
                    model.lock().insert(k, (k % 97, b));
                }
                i += 1;
            }
        }));
    }
    let scanner = {
        let (c2, stop) = (c.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut s = Session::new(c2.ndb("test"));
            let mut scans = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = rows(&mut s, "SELECT COUNT(*) FROM t WHERE a < 50");
                assert_eq!(r.len(), 1);
                scans += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
            scans
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    let r = ndb
        .optimize_table(
            &t,
            OptimizeOptions {
                delay_ms: 1,
                ..OptimizeOptions::default()
            },
        )
        .expect("optimize");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    assert!(scanner.join().expect("scanner") > 0);
    assert!(r.stats.rows_moved > 0, "{r:?}");
    let model = model.lock().clone();
    assert_matches(&c, &mut s, &model);
}

fn durable_config() -> ClusterConfig {
    let mut cfg = config("32M");
    for (k, v) in [
        ("TimeBetweenGlobalCheckpoints", "20"),
        ("TimeBetweenEpochs", "3"),
        // Only the LCPs the test runs.
        ("TimeBetweenLocalCheckpoints", "31"),
        ("NoOfFragmentLogFiles", "3"),
        ("FragmentLogFileSize", "4M"),
        ("RedoBuffer", "4M"),
    ] {
        cfg.set_data_node_param(k, v).expect(k);
    }
    cfg
}

/// Writes a marker row (its commit GCI covers every move made before), makes it
/// durable, takes a crash image (unsynced writes dropped or torn by `seed`) and starts a
/// cluster on it.
fn crash_and_restart(
    c: Cluster,
    s: &mut Session,
    model: &mut BTreeMap<i64, (i64, String)>,
    fs: &crate::disk::io::MemFileSystem,
    seed: u64,
) -> (Cluster, crate::disk::io::MemFileSystem) {
    sql(s, "REPLACE INTO t VALUES (-1, 0, 'marker')");
    model.insert(-1, (0, "marker".into()));
    let gci = c.inner().current_gci();
    c.wait_durable(gci, Duration::from_secs(10))
        .expect("durable");
    let image = fs.crash_image(seed);
    drop(c);
    let c = Cluster::embedded_on(durable_config(), "/data".into(), Arc::new(image.clone()))
        .expect("restart");
    (c, image)
}

/// Row moves meet checkpoints: OPTIMIZE between two partial LCPs, after the last one
/// (the redo log and the older checkpoint chain must give the same rows), and again
/// after a restart; every restart shows exactly the model.
#[test]
fn checkpoints_and_crashes_around_optimize_keep_every_row() {
    let fs = crate::disk::io::MemFileSystem::new();
    let c = Cluster::embedded_on(durable_config(), "/data".into(), Arc::new(fs.clone()))
        .expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    let mut model = load(&mut s, 12_000);
    c.inner().run_lcp().expect("full lcp");
    delete_where(&mut s, &mut model, |k| k % 5 < 2);
    c.inner().run_lcp().expect("partial lcp after the deletes");
    // 1. Moves after the last LCP: the restart restores the pre-move chain and
    //    replays the redo (which has no record of the moves).
    let r = optimize(&c);
    assert!(r.stats.rows_moved > 1000, "{r:?}");
    for k in (1..12_000i64).step_by(11) {
        let b = b_of(k, 2);
        sql(
            &mut s,
            &format!("REPLACE INTO t VALUES ({k}, {}, '{b}')", k % 97),
        );
        model.insert(k, (k % 97, b));
    }
    let (c, fs) = crash_and_restart(c, &mut s, &mut model, &fs, 1);
    let mut s = Session::new(c.ndb("test"));
    assert_matches(&c, &mut s, &model);
    // 2. Moves, then a partial LCP holding them (delete markers at the old row ids,
    //    rows at the new ones), then more changes from the redo log.
    delete_where(&mut s, &mut model, |k| k % 3 != 0);
    let r = optimize(&c);
    assert!(r.stats.rows_moved > 100, "{r:?}");
    let lcp = c.inner().run_lcp().expect("lcp after optimize");
    assert!(lcp.rows > 0, "{lcp:?}");
    for k in (0..3_000i64).step_by(7) {
        let b = b_of(k, 3);
        sql(
            &mut s,
            &format!("REPLACE INTO t VALUES ({k}, {}, '{b}')", k % 97),
        );
        model.insert(k, (k % 97, b));
    }
    let (c, fs) = crash_and_restart(c, &mut s, &mut model, &fs, 2);
    let mut s = Session::new(c.ndb("test"));
    assert_matches(&c, &mut s, &model);
    // 3. Once more on the restarted cluster, with an LCP in the middle of the writes.
    let r = optimize(&c);
    c.inner().run_lcp().expect("lcp");
    sql(&mut s, "DELETE FROM t WHERE id < 500");
    model.retain(|&k, _| k >= 500);
    let (c, _fs) = crash_and_restart(c, &mut s, &mut model, &fs, 3);
    let mut s = Session::new(c.ndb("test"));
    assert_matches(&c, &mut s, &model);
    let _ = r;
}

/// A node restart right after OPTIMIZE (the copy reads the moved rows by row id), and
/// OPTIMIZE while a node restart copies: the replicas end identical.
#[test]
fn node_restarts_after_and_during_optimize_end_with_identical_replicas() {
    let c = Cluster::embedded(config("64M")).expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    let mut model = load(&mut s, 20_000);
    delete_where(&mut s, &mut model, |k| k % 2 == 0);
    let r = optimize(&c);
    assert!(r.stats.rows_moved > 0, "{r:?}");
    let mgm = |cmd: &str| {
        crate::mgm::execute(c.inner(), cmd).unwrap_or_else(|e| panic!("{cmd}: {}", e.message))
    };
    mgm("2 RESTART");
    wait_started(&c, 2);
    assert_matches(&c, &mut s, &model);
    assert_replicas_equal(&c);
    // OPTIMIZE while node 3 restarts: its copy holds a position in every source
    // replica, so rows there stay until the copy ends (or the busy timeout).
    delete_where(&mut s, &mut model, |k| k % 3 != 0);
    mgm("3 RESTART");
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    ndb.optimize_table(
        &t,
        OptimizeOptions {
            delay_ms: 1,
            busy_timeout_ms: 30_000,
        },
    )
    .expect("optimize during the restart");
    wait_started(&c, 3);
    assert_matches(&c, &mut s, &model);
    assert_replicas_equal(&c);
}

fn wait_started(c: &Cluster, id: u32) {
    use crate::api::node_restart::NodeRunState;
    let n = c.inner().node(id).expect("node").clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while n.run_state() != NodeRunState::Started {
        assert_ne!(
            n.run_state(),
            NodeRunState::Stopped,
            "node {id} failed to start"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "node {id} did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Each partition's replicas hold the same rows.
fn assert_replicas_equal(c: &Cluster) {
    let t = c.ndb("test").table("t").expect("t");
    for (p, reps) in t.fragments.iter().enumerate() {
        let rows_of = |cell: &crate::txn::FragmentCell| {
            let mut f = cell.state.lock();
            let cols: Vec<usize> = (0..f.table.columns.len()).collect();
            let mut out = Vec::new();
            let mut from = Some(crate::storage::RowId(0));
            while let Some(r) = from {
                let mut batch = Vec::new();
                from = match f
                    .scan_batch(
                        0,
                        crate::txn::LockMode::CommittedRead,
                        r,
                        1024,
                        &cols,
                        &mut batch,
                    )
                    .expect("scan")
                {
                    crate::txn::fragment::Step::Done(n) => n,
                    crate::txn::fragment::Step::Blocked => panic!("committed read blocked"),
                };
                out.extend(batch.into_iter().map(|(_, v)| format!("{v:?}")));
            }
            out.sort();
            out
        };
        let first = rows_of(&reps[0]);
        for r in &reps[1..] {
            assert!(
                rows_of(r) == first,
                "partition {p}: node {} differs",
                r.node_id
            );
        }
    }
}

/// A few moves in a large table: the next LCP is partial, so the moved rows reach it
/// only through the change marks at their new row ids and the delete marks at the old
/// ones (a full LCP would hide a missing mark).
#[test]
fn a_partial_checkpoint_after_a_few_moves_restores_them() {
    let fs = crate::disk::io::MemFileSystem::new();
    let c = Cluster::embedded_on(durable_config(), "/data".into(), Arc::new(fs.clone()))
        .expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    let mut model = load(&mut s, 40_000);
    c.inner().run_lcp().expect("full lcp");
    // Rows 0..6000 fill the first pages of each fragment; a third of them go.
    delete_where(&mut s, &mut model, |k| k >= 6_000 || k % 3 != 0);
    c.inner().run_lcp().expect("partial lcp after the deletes");
    let r = optimize(&c);
    assert!(r.stats.rows_moved > 100, "{r:?}");
    let lcp = c.inner().run_lcp().expect("lcp after optimize");
    assert!(
        lcp.rows > 0 && lcp.rows * 2 < 2 * model.len() as u64,
        "a partial LCP: {lcp:?}"
    );
    let (c, _fs) = crash_and_restart(c, &mut s, &mut model, &fs, 4);
    let mut s = Session::new(c.ndb("test"));
    assert_matches(&c, &mut s, &model);
}
