//! Node stop and restart of the embedded cluster: the partitions go on with the other
//! replicas, a restarted node gets every row copied (while transactions run), and its
//! replicas then equal their peers' — checked by stopping the peer and reading
//! everything from the restarted node alone.

use super::node_restart::NodeRunState;
use super::*;
use crate::config::ClusterConfig;
use crate::schema::Value;
use crate::sql::{Session, SqlResult};
use crate::storage::RowId;
use crate::txn::Step;
use crate::txn::lock::LockMode;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn cluster(data_nodes: u32, replicas: u32) -> Cluster {
    let mut cfg = ClusterConfig::embedded(data_nodes, replicas).expect("config");
    cfg.set_data_node_param("DataMemory", "64M")
        .expect("DataMemory");
    cfg.set_data_node_param("TransactionDeadlockDetectionTimeout", "2000")
        .expect("timeout");
    Cluster::embedded(cfg).expect("start")
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

fn mgm(c: &Cluster, cmd: &str) -> String {
    crate::mgm::execute(c.inner(), cmd).unwrap_or_else(|e| panic!("{cmd}: {}", e.message))
}

fn wait_started(c: &Cluster, id: u32) {
    let n = c.inner().node(id).expect("node").clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    while n.run_state() != NodeRunState::Started {
        assert_ne!(
            n.run_state(),
            NodeRunState::Stopped,
            "node {id} failed to start"
        );
        assert!(Instant::now() < deadline, "node {id} did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every committed row of one fragment replica (all columns), sorted.
fn replica_rows(cell: &crate::txn::FragmentCell) -> Vec<Vec<Value>> {
    let mut f = cell.state.lock();
    let cols: Vec<usize> = (0..f.table.columns.len()).collect();
    let mut out = Vec::new();
    let mut from = Some(RowId(0));
    while let Some(r) = from {
        let mut batch = Vec::new();
        from = match f
            .scan_batch(0, LockMode::CommittedRead, r, 1024, &cols, &mut batch)
            .expect("scan")
        {
            Step::Done(n) => n,
            Step::Blocked => panic!("committed read blocked"),
        };
        out.extend(batch.into_iter().map(|(_, v)| v));
    }
    out.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    out
}

/// Every replica of every table (hidden ones too) equal to its partition's peers.
fn assert_replicas_equal(c: &Cluster) {
    for t in c.inner().dict.read().all() {
        for (p, reps) in t.fragments.iter().enumerate() {
            let first = replica_rows(&reps[0]);
            for r in &reps[1..] {
                let other = replica_rows(r);
                if other != first {
                    let only_first: Vec<_> = first
                        .iter()
                        .filter(|x| !other.contains(x))
                        .take(5)
                        .collect();
                    let only_other: Vec<_> = other
                        .iter()
                        .filter(|x| !first.contains(x))
                        .take(5)
                        .collect();
                    panic!(
                        "table {} partition {p}: node {} ({} rows) differs from node {} ({} rows): only on node {}: {only_first:?}; only on node {}: {only_other:?}",
                        t.def.name,
                        r.node_id,
                        other.len(),
                        reps[0].node_id,
                        first.len(),
                        reps[0].node_id,
                        r.node_id
                    );
                }
            }
            for r in reps {
                r.state.lock().check().expect("fragment invariants");
            }
        }
    }
}

const SCHEMA: &str = "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40), \
    u INT, txt TEXT, INDEX ix_a (a), UNIQUE KEY uk (u)) ENGINE=ndbcluster";

/// Every row of `t`, the TEXT column by its length.
const ALL_ROWS: &str = "SELECT id, a, b, u, LENGTH(txt) FROM t ORDER BY id";

/// A cluster with `t` created and `n` rows loaded, and a session on it.
fn loaded(data_nodes: u32, replicas: u32, n: i64) -> (Cluster, Session) {
    let c = cluster(data_nodes, replicas);
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, SCHEMA);
    load(&mut s, n);
    (c, s)
}

fn load(s: &mut Session, n: i64) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| {
                format!(
                    "({i}, {}, 'row {i}', {}, '{}')",
                    i % 17,
                    i + 1000,
                    "x".repeat((*i % 5) as usize * 300)
                )
            })
            .collect();
        sql(
            s,
            &format!(
                "INSERT INTO t (id, a, b, u, txt) VALUES {}",
                values.join(",")
            ),
        );
    }
}

#[test]
fn a_stopped_node_is_left_out_and_a_restart_copies_it_back() {
    let (c, mut s) = loaded(2, 2, 2_000);
    let before = rows(&mut s, ALL_ROWS);

    assert_eq!(
        mgm(&c, "3 STOP"),
        "Node 3: Node shutdown initiated\nNode 3 has shutdown."
    );
    let status = mgm(&c, "ALL STATUS");
    assert!(status.contains("Node 3: not connected"), "{status}");
    let mem = mgm(&c, "ALL REPORT MEMORYUSAGE");
    assert!(mem.contains("Node 3: not connected"), "{mem}");
    let node3 = c.inner().node(3).expect("node 3").clone();
    assert_eq!(
        node3.pool.used_pages(),
        0,
        "a stopped node's memory is free"
    );
    // Reads, writes and scans go on with node 2 alone.
    assert_eq!(rows(&mut s, ALL_ROWS), before);
    sql(&mut s, "UPDATE t SET a = a + 100 WHERE id < 100");
    sql(&mut s, "DELETE FROM t WHERE id >= 1900");
    sql(
        &mut s,
        "INSERT INTO t (id, a, b, u, txt) VALUES (5000, 1, 'new', 6000, 'tt')",
    );
    // The last live node of the group cannot stop.
    let e = crate::mgm::execute(c.inner(), "2 STOP").expect_err("refused");
    assert!(
        e.message.contains("Node shutdown would cause system crash"),
        "{}",
        e.message
    );
    let e = crate::mgm::execute(c.inner(), "3 STOP").expect_err("already stopped");
    assert!(e.message.contains("already stopped"), "{}", e.message);

    assert_eq!(mgm(&c, "3 START"), "Database node 3 is being started.");
    wait_started(&c, 3);
    assert!(mgm(&c, "ALL STATUS").contains("Node 3: started"));
    assert_replicas_equal(&c);
    let expected = rows(&mut s, ALL_ROWS);
    // Node 2 stops: node 3 alone serves what both held.
    mgm(&c, "2 STOP");
    assert_eq!(rows(&mut s, ALL_ROWS), expected);
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM t WHERE a >= 100"),
        vec![vec![Value::Int(100)]]
    );
    assert_eq!(
        rows(&mut s, "SELECT id FROM t WHERE u = 6000"),
        vec![vec![Value::Int(5000)]],
        "the unique index's hidden table was copied too"
    );
    let log = c.inner().mgm.log.lines(Some(3)).join("\n");
    assert!(
        log.contains("Start phase 5 completed (node restart)"),
        "{log}"
    );
    c.shutdown();
}

#[test]
fn a_restart_under_concurrent_writes_ends_with_identical_replicas() {
    let c = cluster(2, 2);
    let mut s = Session::new(c.ndb("test"));
    sql(
        &mut s,
        "CREATE TABLE kv (k INT PRIMARY KEY, v INT NOT NULL, INDEX ix_v (v)) ENGINE=ndbcluster",
    );
    let ndb = c.ndb("test");
    let t = ndb.table("kv").expect("table");
    for chunk in (0..20_000i64).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, {i})")).collect();
        sql(
            &mut s,
            &format!("INSERT INTO kv VALUES {}", values.join(",")),
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let temporary = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let ndb = c.ndb("test");
            let t = t.clone();
            let stop = stop.clone();
            let temporary = temporary.clone();
            std::thread::spawn(move || {
                // Each writer owns the keys k % 2 == w: a model per writer.
                let mut model: BTreeMap<i64, Option<i64>> = BTreeMap::new();
                let mut x = 12345u64 + w;
                let mut n = 0i64;
                while !stop.load(Ordering::Relaxed) || n < 2_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = ((x % 12_000) * 2 + w) as i64;
                    let op = x % 3;
                    let mut tx = ndb.start_transaction().expect("tx");
                    let key = vec![(0usize, Value::Int(k))];
                    let r = match op {
                        0 => {
                            tx.define_by_pos(&t, OpKind::Write, key, vec![(1, Value::Int(n))], None)
                        }
                        1 => tx.define_by_pos(&t, OpKind::Delete, key, vec![], None),
                        _ => tx.define_by_pos(
                            &t,
                            OpKind::Write,
                            key,
                            vec![(1, Value::Int(-n))],
                            None,
                        ),
                    };
                    r.expect("define");
                    match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
                        Ok(()) => {
                            model.insert(
                                k,
                                if op == 1 {
                                    None
                                } else if op == 0 {
                                    Some(n)
                                } else {
                                    Some(-n)
                                },
                            );
                        }
                        Err(e) if e.code == 626 && op == 1 => {
                            model.insert(k, None);
                        }
                        Err(e) if e.is_temporary() => {
                            temporary.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("writer {w}: {e}"),
                    }
                    tx.close();
                    n += 1;
                }
                model
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    c.inner().stop_node(3).expect("stop");
    std::thread::sleep(Duration::from_millis(100));
    c.inner().start_node(3).expect("start");
    wait_started(&c, 3);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let models: Vec<BTreeMap<i64, Option<i64>>> = writers
        .into_iter()
        .map(|h| h.join().expect("writer"))
        .collect();
    assert_replicas_equal(&c);
    // Node 2 goes: node 3 alone holds exactly what the writers committed.
    c.inner().stop_node(2).expect("stop 2");
    let mut expected: BTreeMap<i64, i64> = (0..20_000).map(|i| (i, i)).collect();
    for m in &models {
        for (&k, &v) in m {
            match v {
                Some(v) => expected.insert(k, v),
                None => expected.remove(&k),
            };
        }
    }
    let got: BTreeMap<i64, i64> = rows(&mut s, "SELECT k, v FROM kv")
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int(k), Value::Int(v)) => (*k, *v),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM kv WHERE v < 0").pop(),
        Some(vec![Value::Int(
            expected.values().filter(|v| **v < 0).count() as i64
        )]),
        "the ordered index agrees"
    );
    c.shutdown();
}

#[test]
fn a_rolling_restart_restarts_every_node_while_the_cluster_serves() {
    let (c, mut s) = loaded(4, 2, 1_000);
    let before = rows(&mut s, ALL_ROWS);
    let out = mgm(&c, "ROLLING RESTART");
    for id in 2..=5 {
        assert!(out.contains(&format!("Node {id}: restarted in")), "{out}");
    }
    assert!(out.ends_with("Rolling restart completed."), "{out}");
    assert_replicas_equal(&c);
    assert_eq!(rows(&mut s, ALL_ROWS), before);
    // A table created while a node is stopped gets its replica at the restart.
    mgm(&c, "4 STOP");
    sql(
        &mut s,
        "CREATE TABLE t2 (id INT PRIMARY KEY, v INT) ENGINE=ndbcluster",
    );
    sql(&mut s, "INSERT INTO t2 VALUES (1, 1), (2, 2), (3, 3)");
    mgm(&c, "4 START");
    wait_started(&c, 4);
    assert_replicas_equal(&c);
    assert_eq!(
        mgm(&c, "4 RESTART"),
        "Node 4: Node shutdown initiated\nNode 4 is being restarted"
    );
    wait_started(&c, 4);
    assert_eq!(
        mgm(&c, "5 RESTART -n"),
        "Node 5: Node shutdown initiated\nNode 5 is being restarted; it waits for START (-n)"
    );
    assert!(mgm(&c, "5 STATUS").contains("Node 5: not connected"));
    mgm(&c, "5 START");
    wait_started(&c, 5);
    assert_replicas_equal(&c);
    assert_eq!(rows(&mut s, "SELECT id, v FROM t2 ORDER BY id").len(), 3);
    c.shutdown();
}

#[test]
fn data_memory_changes_by_rolling_restart() {
    let (c, mut s) = loaded(2, 2, 2_000);
    let before = rows(&mut s, ALL_ROWS);
    let pages = |id: u32| c.inner().pool_of(id).total_pages();
    assert_eq!((pages(2), pages(3)), (2048, 2048), "64M");
    let out = mgm(&c, "SET DataMemory=96M");
    assert!(
        out.contains("each data node takes it when it restarts"),
        "{out}"
    );
    assert_eq!((pages(2), pages(3)), (2048, 2048), "not before the restart");
    let out = mgm(&c, "ROLLING RESTART");
    assert!(out.ends_with("Rolling restart completed."), "{out}");
    assert_eq!((pages(2), pages(3)), (3072, 3072));
    assert!(
        mgm(&c, "ALL REPORT MEMORYUSAGE").contains("32K pages of total 3072)"),
        "{}",
        mgm(&c, "ALL REPORT MEMORYUSAGE")
    );
    assert_replicas_equal(&c);
    assert_eq!(rows(&mut s, ALL_ROWS), before);
    // Too small for the data: the copy fails with DataMemory full, the node stays
    // stopped and the rolling restart stops there; the other node serves throughout.
    let used = c.inner().pool_of(2).used_pages();
    assert!(used > 40, "{used} pages");
    mgm(&c, "SET DataMemory=1M");
    let e = crate::mgm::execute(c.inner(), "ROLLING RESTART").expect_err("too small");
    assert!(
        e.message
            .contains("Rolling restart stopped: node 2 failed to start again (Out of memory in Ndb Kernel, table data (increase DataMemory))"),
        "{}",
        e.message
    );
    assert_eq!(pages(2), 32);
    assert_eq!(
        c.inner().node(2).expect("node").run_state(),
        NodeRunState::Stopped
    );
    assert!(
        c.inner()
            .mgm
            .log
            .lines(None)
            .iter()
            .any(|l| l.contains("Node restart failed")),
        "cluster log"
    );
    assert_eq!(rows(&mut s, ALL_ROWS), before);
    // A table created while the node is stopped takes none of its pages.
    sql(
        &mut s,
        "CREATE TABLE t3 (id INT PRIMARY KEY, v INT) ENGINE=ndbcluster",
    );
    sql(&mut s, "INSERT INTO t3 VALUES (1, 1)");
    mgm(&c, "SET DataMemory=96M");
    mgm(&c, "2 START");
    wait_started(&c, 2);
    assert_eq!(pages(2), 3072);
    assert_replicas_equal(&c);
    c.shutdown();
}

/// Four writers with multi-row transactions (each on its own keys, so its model is
/// exact) and a thread holding exclusive locks on random keys for a moment (so writers
/// wait for locks), while the two nodes of the group are restarted in turn,
/// `RNDB_NR_CYCLES` times (default 3): a transaction either commits everywhere or
/// fails with a temporary error, and at the end each replica, read alone, holds what
/// the models say.
#[test]
fn restart_cycles_under_contended_multi_row_writes() {
    let cycles: usize = std::env::var("RNDB_NR_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let c = cluster(2, 2);
    let mut s = Session::new(c.ndb("test"));
    sql(
        &mut s,
        "CREATE TABLE kv (k INT PRIMARY KEY, v INT NOT NULL, INDEX ix_v (v)) ENGINE=ndbcluster",
    );
    let t = c.ndb("test").table("kv").expect("table");
    let stop = Arc::new(AtomicBool::new(false));
    let temporary = Arc::new(AtomicU64::new(0));
    let committed = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let ndb = c.ndb("test");
            let (t, stop) = (t.clone(), stop.clone());
            let (temporary, committed) = (temporary.clone(), committed.clone());
            std::thread::spawn(move || {
                let mut model = BTreeMap::<i64, i64>::new();
                let mut x = 777u64 * (w + 1);
                let mut n = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let mut tx = ndb.start_transaction().expect("tx");
                    let mut planned = Vec::new();
                    for _ in 0..3 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let k = ((x % 200) * 4 + w) as i64;
                        let v = (w as i64) * 1_000_000 + n;
                        let kind = if x.is_multiple_of(4) {
                            OpKind::Delete
                        } else {
                            OpKind::Write
                        };
                        let values = if kind == OpKind::Delete {
                            vec![]
                        } else {
                            vec![(1, Value::Int(v))]
                        };
                        tx.define_by_pos(&t, kind, vec![(0usize, Value::Int(k))], values, None)
                            .expect("define");
                        planned.push((k, (kind != OpKind::Delete).then_some(v)));
                    }
                    match tx.execute(ExecType::Commit, AbortOption::IgnoreError) {
                        Ok(()) => {
                            for (k, v) in planned {
                                match v {
                                    Some(v) => model.insert(k, v),
                                    None => model.remove(&k),
                                };
                            }
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.is_temporary() => {
                            temporary.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!(
                            "writer {w} (txn {n}): {e}; keys {:?}",
                            planned.iter().map(|p| p.0).collect::<Vec<_>>()
                        ),
                    }
                    tx.close();
                }
                model
            })
        })
        .collect();
    let blocker = {
        let ndb = c.ndb("test");
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut x = 99u64;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut tx = ndb.start_transaction().expect("tx");
                let k = (x % 800) as i64;
                let _ = tx.define_by_pos(
                    &t,
                    OpKind::Read(LockMode::Exclusive),
                    vec![(0usize, Value::Int(k))],
                    vec![],
                    Some(vec![1]),
                );
                let _ = tx.execute(ExecType::NoCommit, AbortOption::IgnoreError);
                std::thread::sleep(Duration::from_micros(500));
                tx.close();
            }
        })
    };
    for _ in 0..cycles {
        for id in [3u32, 2] {
            std::thread::sleep(Duration::from_millis(30));
            c.inner().stop_node(id).expect("stop");
            std::thread::sleep(Duration::from_millis(30));
            c.inner().start_node(id).expect("start");
            wait_started(&c, id);
        }
    }
    std::thread::sleep(Duration::from_millis(30));
    stop.store(true, Ordering::Relaxed);
    let models: Vec<BTreeMap<i64, i64>> = writers
        .into_iter()
        .map(|h| h.join().expect("writer"))
        .collect();
    blocker.join().expect("blocker");
    assert!(
        committed.load(Ordering::Relaxed) > 100,
        "the writers got through"
    );
    assert_replicas_equal(&c);
    let mut expected = BTreeMap::new();
    for m in models {
        expected.extend(m);
    }
    for (alone, other) in [(2u32, 3u32), (3, 2)] {
        c.inner().stop_node(other).expect("stop the other");
        let got: BTreeMap<i64, i64> = rows(&mut s, "SELECT k, v FROM kv")
            .into_iter()
            .map(|r| match (&r[0], &r[1]) {
                (Value::Int(k), Value::Int(v)) => (*k, *v),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, expected, "node {alone} alone");
        c.inner().start_node(other).expect("start");
        wait_started(&c, other);
    }
    c.shutdown();
}

/// Runs `f(0)` and `f(1)` on two threads released together; their results.
fn at_once(f: impl Fn(usize) -> bool + Sync) -> [bool; 2] {
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let hs = [0, 1].map(|i| {
            let (f, barrier) = (&f, &barrier);
            scope.spawn(move || {
                barrier.wait();
                f(i)
            })
        });
        hs.map(|h| h.join().expect("join"))
    })
}

/// Two stops of the two nodes of a group at the same moment: exactly one succeeds (the
/// other is the group's last live node), every time; the same for two starts of one
/// node.
#[test]
fn concurrent_stops_of_one_group_leave_a_live_node() {
    let c = cluster(2, 2);
    let mut s = Session::new(c.ndb("test"));
    sql(
        &mut s,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=ndbcluster",
    );
    sql(&mut s, "INSERT INTO t VALUES (1, 1), (2, 2)");
    for round in 0..20 {
        let results = at_once(|i| c.inner().stop_node([2, 3][i]).is_ok());
        assert_eq!(
            results.iter().filter(|ok| **ok).count(),
            1,
            "round {round}: {results:?}"
        );
        let stopped = if results[0] { 2 } else { 3 };
        let starts = at_once(|_| c.inner().start_node(stopped).is_ok());
        assert_eq!(
            starts.iter().filter(|ok| **ok).count(),
            1,
            "round {round}: {starts:?}"
        );
        wait_started(&c, stopped);
    }
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM t"),
        vec![vec![Value::Int(2)]]
    );
    c.shutdown();
}
