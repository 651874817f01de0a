//! The data path over TCP on loopback, in this process: a management server, data
//! nodes (`DataNodeProcess`) and an API connection (`RemoteCluster`). DDL reaches every
//! node, writes reach every replica before they are acknowledged, transactions are
//! atomic, errors come back with NDB's codes, and a data node's failure under a write
//! load loses no acknowledged write.

use super::datapath::DataPath;
use super::mgmd::MgmServer;
use super::ndbd::DataNodeProcess;
use super::process_tests::{config, data_node, mgm, wait_until};
use super::remote::RemoteCluster;
use crate::schema::Value;
use crate::transport::NodeState;
use crate::transport::data::{KeyOp, OpType};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(super) const DB: &str = "test";

fn started(nodes: &[&DataNodeProcess]) -> bool {
    nodes.iter().all(|n| n.status().state == NodeState::Started)
}

pub(super) fn cluster(
    n: u32,
    replicas: u32,
) -> (MgmServer, Vec<DataNodeProcess>, Arc<RemoteCluster>) {
    let cfg = config(n, replicas);
    let m = mgm(&cfg);
    let nodes: Vec<DataNodeProcess> = (0..n).map(|i| data_node(&m, i + 2, false)).collect();
    wait_until("data nodes started", 20, || {
        started(&nodes.iter().collect::<Vec<_>>())
    });
    let api = std::sync::Arc::new(
        RemoteCluster::connect(&m.connectstring(), Duration::from_secs(10)).expect("api"),
    );
    // Connected, and in the newest view the client holds (a node's first report may
    // come from a view that is being replaced while the last node joins).
    wait_until("every data node usable by the client", 20, || {
        api.connected_nodes().len() == n as usize
    });
    (m, nodes, api)
}

fn op(t: OpType, id: i64, v: Option<&str>) -> KeyOp {
    KeyOp {
        op: t,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(id)],
        values: v
            .map(|v| vec![(1, Value::Str(v.to_string()))])
            .unwrap_or_default(),
        columns: Vec::new(),
    }
}

fn local_rows(dp: &DataPath) -> u64 {
    dp.engine
        .inner()
        .table(DB, "kv")
        .map(|t| t.row_count())
        .unwrap_or(0)
}

pub(super) fn create_kv(api: &Arc<RemoteCluster>) {
    api.sql(
        DB,
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=NDB",
    )
    .expect("create");
}

#[test]
fn ddl_and_writes_reach_every_replica_and_reads_see_them() {
    let (_m, nodes, api) = cluster(2, 2);
    create_kv(&api);
    // Every node has the table.
    for n in &nodes {
        assert!(
            n.data()
                .expect("data path")
                .engine
                .inner()
                .table(DB, "kv")
                .is_ok()
        );
    }
    let ops: Vec<KeyOp> = (0..200)
        .map(|i| op(OpType::Insert, i, Some(&format!("v{i}"))))
        .collect();
    let c = api.execute(ops).expect("insert");
    assert!(c.gci > 0, "a commit has a GCI");
    for n in &nodes {
        assert_eq!(
            local_rows(&n.data().expect("data path")),
            200,
            "node {} holds every row",
            n.node_id
        );
    }
    let keys: Vec<Vec<Value>> = (0..210).map(|i| vec![Value::Int(i)]).collect();
    let rows = api.read_batch(DB, "kv", &keys, &[]).expect("read");
    for (i, r) in rows.iter().enumerate() {
        if i < 200 {
            assert_eq!(
                r.as_ref().expect("row"),
                &vec![Value::Int(i as i64), Value::Str(format!("v{i}"))]
            );
        } else {
            assert!(r.is_none(), "key {i} was never written");
        }
    }
    // Reads inside a transaction, updates and deletes.
    let c = api
        .execute(vec![
            op(OpType::Update, 1, Some("one")),
            op(OpType::ReadExclusive, 1, None),
            op(OpType::Delete, 2, None),
            op(OpType::ReadCommitted, 2, None),
            op(OpType::Write, 500, Some("w")),
        ])
        .expect("mixed");
    assert_eq!(
        c.results[1],
        Some(vec![Value::Int(1), Value::Str("one".into())])
    );
    assert_eq!(c.results[3], None, "a read of a deleted row finds nothing");
    for n in &nodes {
        assert_eq!(
            local_rows(&n.data().expect("data path")),
            200,
            "node {}: -1 +1",
            n.node_id
        );
        let t = n
            .data()
            .expect("data path")
            .engine
            .inner()
            .table(DB, "kv")
            .expect("kv");
        let ndb = n.data().expect("data path").engine.ndb(DB);
        let got = ndb
            .read_batch(&t, &[vec![Value::Int(1)], vec![Value::Int(2)]], &[1])
            .expect("local read");
        assert_eq!(got[0], Some(vec![Value::Str("one".into())]));
        assert_eq!(got[1], None);
    }
    // SQL that changes rows goes through a TC too (`datapath_sql_tests`); SELECT sees
    // the rows.
    api.sql(DB, "INSERT INTO kv VALUES (9999, 'x')")
        .expect("dml");
    let out = api.sql(DB, "SELECT COUNT(*) FROM kv").expect("select");
    assert!(out.contains("201"), "{out}");
}

#[test]
fn errors_come_back_with_ndb_codes_and_abort_the_whole_transaction() {
    let (_m, nodes, api) = cluster(2, 2);
    create_kv(&api);
    api.execute(vec![op(OpType::Insert, 1, Some("a"))])
        .expect("insert");
    let e = api
        .execute(vec![
            op(OpType::Insert, 2, Some("b")),
            op(OpType::Insert, 3, Some("c")),
            op(OpType::Insert, 1, Some("dup")),
        ])
        .expect_err("duplicate");
    assert_eq!(e.code, 630, "{e}");
    let e = api
        .execute(vec![op(OpType::Update, 77, Some("x"))])
        .expect_err("missing");
    assert_eq!(e.code, 626, "{e}");
    let e = api
        .execute(vec![KeyOp {
            table: "nope".into(),
            ..op(OpType::Insert, 1, Some("a"))
        }])
        .expect_err("no table");
    assert_eq!(e.code, 723, "{e}");
    let e = api
        .execute(vec![KeyOp {
            key: vec![],
            ..op(OpType::Insert, 1, Some("a"))
        }])
        .expect_err("no key");
    assert_eq!(e.code, 4264, "{e}");
    // Nothing of the failed transaction is anywhere.
    for n in &nodes {
        assert_eq!(
            local_rows(&n.data().expect("data path")),
            1,
            "node {}",
            n.node_id
        );
    }
    let rows = api
        .read_batch(DB, "kv", &[vec![Value::Int(2)], vec![Value::Int(3)]], &[])
        .expect("read");
    assert_eq!(rows, vec![None, None]);
    let e = api
        .sql(DB, "CREATE TABLE kv (id INT PRIMARY KEY) ENGINE=NDB")
        .expect_err("exists");
    assert_eq!(e.code, 4118, "{e}");
}

/// key -> (acknowledged value, value that may have committed), and the error codes
/// the writer saw.
pub(super) type WriteModel = (BTreeMap<i64, (u64, Option<u64>)>, Vec<u32>);

/// Reads every key of `model` through the API: each holds its acknowledged value, or a
/// later one whose write got 4012 (outcome unknown).
pub(super) fn check_model(
    api: &RemoteCluster,
    model: &BTreeMap<i64, (u64, Option<u64>)>,
    log_lines: &dyn Fn() -> Vec<String>,
) {
    let keys: Vec<i64> = model.keys().copied().collect();
    let rows = api
        .read_batch(
            DB,
            "kv",
            &keys
                .iter()
                .map(|&k| vec![Value::Int(k)])
                .collect::<Vec<_>>(),
            &[1],
        )
        .expect("read the model's keys");
    for (k, row) in keys.iter().zip(rows) {
        let (acked, maybe) = model[k];
        let got: u64 = match row {
            Some(r) => match &r[0] {
                Value::Str(s) => s.parse().expect("number"),
                other => panic!("{other:?}"),
            },
            None => 0,
        };
        assert!(
            got == acked || maybe.is_some_and(|m| got > acked && got <= m),
            "key {k}: acknowledged {acked}, maybe {maybe:?}, cluster has {got}; log:\n{}",
            log_lines().join("\n")
        );
    }
}

/// A writer loop: each key is written with increasing values; the model keeps what
/// was acknowledged and what may have committed (4012).
pub(super) fn write_load(
    api: Arc<RemoteCluster>,
    stop: Arc<AtomicBool>,
    base: i64,
) -> std::thread::JoinHandle<WriteModel> {
    std::thread::spawn(move || {
        // key -> (acknowledged value, value that may have committed)
        let mut model: BTreeMap<i64, (u64, Option<u64>)> = BTreeMap::new();
        let mut errors = Vec::new();
        let mut round = 0u64;
        while !stop.load(Ordering::Acquire) {
            round += 1;
            let keys: Vec<i64> = (0..20)
                .map(|i| base + ((round as i64 * 7 + i) % 200))
                .collect();
            let ops: Vec<KeyOp> = keys
                .iter()
                .map(|&k| op(OpType::Write, k, Some(&round.to_string())))
                .collect();
            match api.execute(ops) {
                Ok(_) => {
                    for k in keys {
                        model.insert(k, (round, None));
                    }
                }
                Err(e) => {
                    assert!(
                        e.is_temporary() || e.code == 4012 || e.code == 4009,
                        "only temporary errors under a node failure, got {e}"
                    );
                    errors.push(e.code);
                    if e.code == 4012 {
                        for k in keys {
                            let acked = model.get(&k).map_or(0, |m| m.0);
                            model.insert(k, (acked, Some(round)));
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        (model, errors)
    })
}

#[test]
fn a_data_node_killed_under_writes_loses_no_acknowledged_write() {
    let (m, mut nodes, api) = cluster(2, 2);
    create_kv(&api);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = write_load(api.clone(), stop.clone(), 0);
    std::thread::sleep(Duration::from_millis(400));
    let victim = nodes.remove(0);
    victim.kill();
    let survivor = &nodes[0];
    wait_until("the survivor alone in its view", 10, || {
        survivor.status().view.node_ids() == vec![survivor.node_id]
    });
    // Writes go on with the survivor as primary of every partition.
    std::thread::sleep(Duration::from_millis(600));
    stop.store(true, Ordering::Release);
    let (model, errors) = writer.join().expect("writer");
    assert!(
        model.len() > 100,
        "the load wrote most keys: {}",
        model.len()
    );
    check_model(&api, &model, &|| m.log_lines());
    eprintln!("errors seen under the failure: {errors:?}");
}

/// Every row of `kv` in a node's local engine, by key.
pub(super) fn local_table(dp: &DataPath) -> BTreeMap<i64, Value> {
    let t = dp.engine.inner().table(DB, "kv").expect("kv");
    let ndb = dp.engine.ndb(DB);
    let mut tx = ndb.start_transaction().expect("tx");
    let mut scan = tx
        .scan(crate::api::ScanSpec::table(t.clone()))
        .expect("scan");
    let mut out = BTreeMap::new();
    while let Some(r) = tx.scan_next(&mut scan).expect("next") {
        let Value::Int(k) = r[0] else { panic!("{r:?}") };
        out.insert(k, r[1].clone());
    }
    out
}

#[test]
fn a_killed_node_restarts_gets_every_row_by_copy_under_writes_and_serves_again() {
    let (m, mut nodes, api) = cluster(2, 2);
    create_kv(&api);
    // Rows the copy must bring, and some deleted before the restart.
    for chunk in (0..3000).collect::<Vec<i64>>().chunks(500) {
        let ops = chunk
            .iter()
            .map(|&i| op(OpType::Insert, 10_000 + i, Some("old")))
            .collect();
        api.execute(ops).expect("load");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = write_load(api.clone(), stop.clone(), 0);
    // A deleter runs too: deletes during the copy must not come back.
    let (api2, stop2) = (api.clone(), stop.clone());
    let deleter = std::thread::spawn(move || {
        let mut deleted = Vec::new();
        let mut k = 10_000;
        while !stop2.load(Ordering::Acquire) && k < 13_000 {
            match api2.execute(vec![op(OpType::Delete, k, None)]) {
                Ok(_) => deleted.push(k),
                Err(e) => assert!(
                    e.is_temporary() || e.code == 4012,
                    "delete: only temporary errors, got {e}"
                ),
            }
            k += 3;
            std::thread::sleep(Duration::from_millis(2));
        }
        deleted
    });
    std::thread::sleep(Duration::from_millis(300));
    let victim = nodes.remove(1);
    let victim_id = victim.node_id;
    victim.kill();
    let survivor = &nodes[0];
    wait_until("the survivor alone", 10, || {
        survivor.status().view.node_ids() == vec![survivor.node_id]
    });
    std::thread::sleep(Duration::from_millis(300));
    let restarted = data_node(&m, victim_id, false);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !restarted.data().expect("data path").is_ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "the restarted node is not up to date after 30 s; cluster log:\n{}",
            m.log_lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Release);
    let Ok((model, _errors)) = writer.join() else {
        panic!(
            "the writer failed; cluster log:\n{}",
            m.log_lines().join("\n")
        );
    };
    let deleted = deleter.join().expect("deleter");
    assert!(!deleted.is_empty());
    // Quiet now: both replicas hold exactly the same rows once the last commits'
    // messages (acknowledged to the client, possibly still on their way to the other
    // replica) are applied. A replica that lost a row never catches up: the wait
    // fails and so does the comparison below.
    let agreed = (0..250).any(|_| {
        let same = local_table(&survivor.data().expect("data path"))
            == local_table(&restarted.data().expect("data path"));
        if !same {
            std::thread::sleep(Duration::from_millis(20));
        }
        same
    });
    let a = local_table(&survivor.data().expect("data path"));
    let b = local_table(&restarted.data().expect("data path"));
    assert!(agreed || a == b, "the replicas never agreed within 5 s");
    assert_eq!(a.len(), b.len(), "row counts of the two replicas");
    assert!(a == b, "the replicas differ after the copy");
    for k in &deleted {
        assert!(!a.contains_key(k), "deleted key {k} came back");
    }
    for (k, (acked, maybe)) in &model {
        let got: u64 = match a.get(k) {
            Some(Value::Str(s)) => s.parse().expect("number"),
            other => panic!("key {k}: {other:?}"),
        };
        assert!(
            got == *acked || maybe.is_some_and(|m| got > *acked && got <= m),
            "key {k}: acknowledged {acked}, maybe {maybe:?}, cluster has {got}"
        );
    }
    // The restarted node serves reads again.
    let keys: Vec<Vec<Value>> = (10_000..10_010).map(|k| vec![Value::Int(k)]).collect();
    let rows = api.read_batch(DB, "kv", &keys, &[]).expect("read");
    assert_eq!(rows.len(), 10);
    let log = m.log_lines().join("\n");
    assert!(log.contains("Node restart completed"), "{log}");
}

#[test]
fn rolling_restart_of_two_node_groups_under_writes_keeps_every_row() {
    let (m, nodes, api) = cluster(4, 2);
    create_kv(&api);
    for chunk in (0..2000).collect::<Vec<i64>>().chunks(400) {
        let ops = chunk
            .iter()
            .map(|&i| op(OpType::Insert, 10_000 + i, Some("old")))
            .collect();
        api.execute(ops).expect("load");
    }
    let stop = Arc::new(AtomicBool::new(false));
    // Transactions span both node groups (keys of many partitions).
    let writer = write_load(api.clone(), stop.clone(), 0);
    std::thread::sleep(Duration::from_millis(200));
    let mut shell = super::process_tests::shell(&m);
    // The last started node of a group is not stopped. The answer comes when every
    // node has started again.
    let out = shell
        .command("ROLLING RESTART")
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", m.log_lines().join("\n")));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert_eq!(
        lines[0],
        "Rolling restart of the data nodes, one at a time:"
    );
    for (line, id) in lines[1..5].iter().zip(2..) {
        assert!(
            line.starts_with(&format!("Node {id}: restarted in ")),
            "{out}"
        );
    }
    assert_eq!(lines[5], "Rolling restart completed.");
    assert!(
        m.log_lines()
            .iter()
            .any(|l| l.contains("Rolling restart completed")),
        "{:?}",
        m.log_lines()
    );
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Release);
    let Ok((model, errors)) = writer.join() else {
        panic!("the writer failed; log:\n{}", m.log_lines().join("\n"));
    };
    eprintln!("errors during the rolling restart: {errors:?}");
    let log = m.log_lines().join("\n");
    for id in 2..=5 {
        assert!(
            log.contains(&format!("Rolling restart: node {id} started again")),
            "{log}"
        );
        // A node restart, as NDB's: its own checkpoint, then the changes by copy.
        assert!(
            log.contains(&format!("Node {id}: Node restart: restoring GCI")),
            "{log}"
        );
    }
    // Every node runs again (none was declared dead on the way).
    for n in &nodes {
        assert_eq!(
            n.status().state,
            NodeState::Started,
            "node {} after the rolling restart; log:\n{log}",
            n.node_id
        );
    }
    // Within each group the replicas are equal, and hold what was acknowledged.
    let by_id = |id: u32| nodes.iter().find(|n| n.node_id == id).expect("node");
    for (a, b) in [(2, 3), (4, 5)] {
        let (ta, tb) = (
            local_table(&by_id(a).data().expect("data path")),
            local_table(&by_id(b).data().expect("data path")),
        );
        if ta != tb {
            let differ: Vec<String> = ta
                .keys()
                .chain(tb.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter(|k| ta.get(k) != tb.get(k))
                .take(10)
                .map(|k| {
                    format!(
                        "key {k}: node {a} {:?}, node {b} {:?}, model {:?}",
                        ta.get(k),
                        tb.get(k),
                        model.get(k)
                    )
                })
                .collect();
            panic!(
                "nodes {a} and {b} differ ({} / {} rows): {}\nerrors {errors:?}\nlog:\n{}",
                ta.len(),
                tb.len(),
                differ.join("; "),
                m.log_lines().join("\n")
            );
        }
    }
    let keys: Vec<Vec<Value>> = (10_000..12_000).map(|k| vec![Value::Int(k)]).collect();
    let rows = api.read_batch(DB, "kv", &keys, &[1]).expect("read");
    assert!(
        rows.iter()
            .all(|r| r == &Some(vec![Value::Str("old".into())]))
    );
    check_model(&api, &model, &|| m.log_lines());
}
