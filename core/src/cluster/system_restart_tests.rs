//! Data node processes keep their rows on disk: global checkpoints across the nodes,
//! a system restart of the whole cluster (after a crash of every node, and after a
//! graceful stop), a node whose file system was removed copying from the others at a
//! system restart, and durability waits over TCP (`cluster/datapath/gcp.rs`,
//! `cluster/start_plan.rs`).

use super::datapath_tests::DB;
use super::mgmd::MgmServer;
use super::ndbd::{DataNodeOptions, DataNodeProcess};
use super::process_tests::{config, config_with, mgm, wait_until};
use super::remote::RemoteCluster;
use crate::config::ClusterConfig;
use crate::schema::Value;
use crate::transport::NodeState;
use crate::transport::data::{KeyOp, OpType};
use std::time::Duration;

fn node(m: &MgmServer, id: u32, initial: bool) -> DataNodeProcess {
    DataNodeProcess::start(DataNodeOptions {
        connectstring: super::client::ConnectString::parse(&m.connectstring()).expect("cs"),
        node_id: Some(id),
        initial,
        nostart: false,
        connect_timeout: Some(Duration::from_secs(20)),
        echo: std::env::var_os("RNDB_TEST_ECHO").is_some(),
    })
    .expect("data node")
}

fn start_all(m: &MgmServer, ids: &[(u32, bool)]) -> Vec<DataNodeProcess> {
    let nodes: Vec<DataNodeProcess> = ids.iter().map(|&(id, i)| node(m, id, i)).collect();
    wait_until("data nodes started", 30, || {
        nodes.iter().all(|n| n.status().state == NodeState::Started)
    });
    nodes
}

fn client(m: &MgmServer, n: usize) -> std::sync::Arc<RemoteCluster> {
    let api = std::sync::Arc::new(
        RemoteCluster::connect(&m.connectstring(), Duration::from_secs(10)).expect("api"),
    );
    wait_until("every data node usable", 20, || {
        api.connected_nodes().len() == n
    });
    api
}

/// Inserts the rows in one transaction, retried on a temporary error that aborted it
/// (a node starting, a read lease that lapsed on a loaded machine: 4035), as a client
/// must; not on 4012, whose outcome is unknown.
fn insert(api: &RemoteCluster, ids: std::ops::Range<i64>) -> u64 {
    let ops: Vec<KeyOp> = ids
        .map(|id| KeyOp {
            op: OpType::Insert,
            database: DB.into(),
            table: "kv".into(),
            key: vec![Value::Int(id)],
            values: vec![(1, Value::Str(format!("v{id}")))],
            columns: Vec::new(),
        })
        .collect();
    let mut tries = 0;
    loop {
        match api.execute(ops.clone()) {
            Ok(c) => return c.gci,
            Err(e) if e.is_temporary() && e.code != 4012 && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("insert: {e}"),
        }
    }
}

/// The value of each id, None where there is no row.
fn read(api: &RemoteCluster, ids: std::ops::Range<i64>) -> Vec<Option<String>> {
    let keys: Vec<Vec<Value>> = ids.map(|id| vec![Value::Int(id)]).collect();
    let mut tries = 0;
    let rows = loop {
        match api.read_batch(DB, "kv", &keys, &[1]) {
            Ok(r) => break r,
            Err(e) if e.is_temporary() && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("read: {e}"),
        }
    };
    rows.into_iter()
        .map(|r| {
            r.map(|v| match &v[0] {
                Value::Str(s) => s.clone(),
                other => format!("{other:?}"),
            })
        })
        .collect()
}

fn local_rows(n: &DataNodeProcess) -> u64 {
    n.data()
        .expect("data path")
        .engine
        .inner()
        .table(DB, "kv")
        .map(|t| t.row_count())
        .unwrap_or(0)
}

/// The `kv` table the tests write (`insert`, `read`).
fn create_kv(api: &std::sync::Arc<RemoteCluster>) {
    api.sql(DB, KV).expect("create");
}

const KV: &str = "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=NDB";

fn two_nodes() -> (ClusterConfig, MgmServer) {
    let cfg = config(2, 2);
    let m = mgm(&cfg);
    (cfg, m)
}

#[test]
fn a_cluster_whose_every_node_crashed_restarts_with_every_durable_commit() {
    let (_cfg, m) = two_nodes();
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    create_kv(&api);
    let mut durable_to = 0;
    for batch in 0..5 {
        let gci = insert(&api, batch * 100..(batch + 1) * 100);
        if batch == 2 {
            // Everything up to here is on disk on both nodes once this returns.
            api.wait_durable(gci, Duration::from_secs(10))
                .expect("durable");
            durable_to = (batch + 1) * 100;
        }
    }
    api.close();
    // A crash of every data node (no last checkpoint).
    for n in nodes {
        n.kill();
    }
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    let rows = read(&api, 0..500);
    for (id, r) in rows.iter().enumerate().take(durable_to as usize) {
        assert_eq!(
            r.as_deref(),
            Some(format!("v{id}").as_str()),
            "durable row {id}"
        );
    }
    // What survived beyond the durable point is whole batches (transactions are
    // atomic across the restart), each with its values.
    let present = rows.iter().filter(|r| r.is_some()).count();
    assert_eq!(present % 100, 0, "whole transactions only: {present} rows");
    for (id, r) in rows.iter().enumerate() {
        if let Some(v) = r {
            assert_eq!(v, &format!("v{id}"));
        }
    }
    // Both replicas hold the same rows, and writes go on.
    assert_eq!(local_rows(&nodes[0]), present as u64);
    assert_eq!(local_rows(&nodes[1]), present as u64);
    insert(&api, 1000..1010);
    assert_eq!(read(&api, 1000..1010).iter().flatten().count(), 10);
}

#[test]
fn a_graceful_stop_of_every_node_keeps_every_commit_and_a_wiped_node_copies() {
    let (_cfg, m) = two_nodes();
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    create_kv(&api);
    for batch in 0..3 {
        insert(&api, batch * 50..(batch + 1) * 50);
    }
    api.close();
    // Stopped one after the other, without waiting for durability: the stop's last
    // checkpoint keeps every commit.
    for n in nodes {
        assert_eq!(n.stop(), 0);
    }
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    assert_eq!(read(&api, 0..150).iter().flatten().count(), 150);
    api.close();
    for n in nodes {
        assert_eq!(n.stop(), 0);
    }
    // Node 3's file system is removed (--initial): the system restart restores node
    // 2's checkpoint and node 3 copies every row from it.
    let nodes = start_all(&m, &[(2, false), (3, true)]);
    wait_until("node 3 copied", 30, || local_rows(&nodes[1]) == 150);
    let api = client(&m, 2);
    assert_eq!(read(&api, 0..150).iter().flatten().count(), 150);
    assert_eq!(local_rows(&nodes[0]), 150);
}

/// Local checkpoints all the time (one after every few bytes of redo): each stop
/// stays prompt and the restart restores the rows from checkpoint files plus the
/// redo after them. (The hang this guards against, a checkpoint waiting 60 s for a
/// global checkpoint round during stop, is timing dependent; this test catches it
/// only when a stop lands in that window.)
#[test]
fn nodes_checkpointing_all_the_time_stop_promptly_and_restore_from_their_checkpoints() {
    let cfg = config_with(2, 2, "TimeBetweenLocalCheckpoints=0\n");
    let m = mgm(&cfg);
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    create_kv(&api);
    for batch in 0..20 {
        insert(&api, batch * 20..(batch + 1) * 20);
    }
    api.close();
    for n in nodes {
        let t = std::time::Instant::now();
        assert_eq!(n.stop(), 0);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "stop took {:?}",
            t.elapsed()
        );
    }
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    let rows = read(&api, 0..400);
    assert_eq!(rows.iter().flatten().count(), 400);
    assert_eq!(rows[399].as_deref(), Some("v399"));
    assert_eq!(local_rows(&nodes[0]), 400);
}

fn write_ops(op: OpType, ids: std::ops::Range<i64>, tag: &str) -> Vec<KeyOp> {
    ids.map(|id| KeyOp {
        op,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(id)],
        values: if op == OpType::Delete {
            Vec::new()
        } else {
            vec![(1, Value::Str(format!("{tag}{id}")))]
        },
        columns: Vec::new(),
    })
    .collect()
}

/// Inserts of rows of INT columns into `table`: (key, the other columns).
fn int_rows(table: &str, rows: &[(i64, &[i64])]) -> Vec<KeyOp> {
    rows.iter()
        .map(|(id, vals)| KeyOp {
            op: OpType::Insert,
            database: DB.into(),
            table: table.into(),
            key: vec![Value::Int(*id)],
            values: vals
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u32 + 1, Value::Int(*v)))
                .collect(),
            columns: Vec::new(),
        })
        .collect()
}

/// Every row of table `table` in node `n`'s own engine, by key, as (id, v) text.
fn local_table(n: &DataNodeProcess, table: &str) -> std::collections::BTreeMap<i64, String> {
    let dp = n.data().expect("data path");
    let ndb = dp.engine.ndb(DB);
    let t = ndb.table(table).expect("table");
    let mut tx = ndb.start_transaction().expect("tx");
    let mut s = tx
        .scan(crate::api::ScanSpec::table(t.clone()))
        .expect("scan");
    let mut out = std::collections::BTreeMap::new();
    while !s.is_closed() {
        let rows = tx.scan_next_batch(&mut s, 1000).expect("batch");
        if rows.is_empty() {
            break;
        }
        for r in rows {
            let Value::Int(id) = r[0] else {
                panic!("key {:?}", r[0])
            };
            out.insert(id, format!("{:?}", &r[1..]));
        }
    }
    out
}

/// Once `gci` is durable: a system restart of nodes 2 and 3 (the lineage it begins is
/// in both nodes' files, so node 3's offer is taken later), then node 3 killed. Node 2
/// and a client connected to it.
fn system_restart_then_kill_node_3(
    m: &MgmServer,
    nodes: Vec<DataNodeProcess>,
    api: std::sync::Arc<RemoteCluster>,
    gci: u64,
) -> (Vec<DataNodeProcess>, std::sync::Arc<RemoteCluster>) {
    api.wait_durable(gci, Duration::from_secs(10))
        .expect("durable");
    api.close();
    for n in nodes {
        assert_eq!(n.stop(), 0);
    }
    let mut nodes = start_all(m, &[(2, false), (3, false)]);
    let api = client(m, 2);
    nodes.pop().expect("node 3").kill();
    wait_until("node 3 gone", 20, || api.connected_nodes().len() == 1);
    (nodes, api)
}

/// A node restart with the node's files: node 3 is killed, rows are updated, deleted
/// and inserted while it is down, a table is dropped and another made anew with
/// another shape; node 3 restores its own checkpoint and gets only what changed (the
/// source says how many rows it compared by digest and how few keys it sent), deletes
/// the rows gone meanwhile, and then holds exactly what node 2 holds.
#[test]
fn a_node_restart_with_its_files_copies_only_what_changed_while_it_was_down() {
    let (_cfg, m) = two_nodes();
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    for sql in [
        KV,
        "CREATE TABLE gone (id INT PRIMARY KEY, v INT) ENGINE=NDB",
        "CREATE TABLE reshaped (id INT PRIMARY KEY, v INT) ENGINE=NDB",
        "CREATE TABLE docs (id INT PRIMARY KEY, body TEXT) ENGINE=NDB",
        "CREATE TABLE grown (id INT PRIMARY KEY, v INT) ENGINE=NDB",
    ] {
        api.sql(DB, sql).expect(sql);
    }
    // `grown` has 10 rows at node 3's checkpoint and 6,000 more at the source: the
    // source's digest has more buckets than node 3's restored fold, which then folds
    // its rows again at the digest.
    let grown_rows: Vec<(i64, i64)> = (0..10).map(|i| (i, i)).collect();
    let grown_ops = |rows: &[(i64, i64)]| {
        let vals: Vec<[i64; 1]> = rows.iter().map(|&(_, v)| [v]).collect();
        let pairs: Vec<(i64, &[i64])> = rows
            .iter()
            .zip(&vals)
            .map(|(&(id, _), v)| (id, &v[..]))
            .collect();
        int_rows("grown", &pairs)
    };
    api.execute(grown_ops(&grown_rows)).expect("grown");
    let doc = |op: OpType, id: i64, body: Option<String>| KeyOp {
        op,
        database: DB.into(),
        table: "docs".into(),
        key: vec![Value::Int(id)],
        values: body.map(|b| vec![(1, Value::Str(b))]).unwrap_or_default(),
        columns: Vec::new(),
    };
    // Bodies longer than a BLOB's inline part: they live in its parts table.
    let long = |tag: &str, id: i64| format!("{tag}{id}-").repeat(200);
    api.execute(
        (0..3)
            .map(|id| doc(OpType::Insert, id, Some(long("d", id))))
            .collect(),
    )
    .expect("docs");
    for table in ["gone", "reshaped"] {
        api.execute(int_rows(table, &[(1, &[1]), (2, &[2])]))
            .expect("insert");
    }
    let mut gci = 0;
    for batch in 0..6 {
        gci = insert(&api, batch * 100..(batch + 1) * 100);
    }
    let (mut nodes, api) = system_restart_then_kill_node_3(&m, nodes, api, gci);
    let retry = |ops: Vec<KeyOp>| {
        for _ in 0..50 {
            match api.execute(ops.clone()) {
                Ok(_) => return,
                Err(e) if e.is_temporary() => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => panic!("write: {e}"),
            }
        }
        panic!("write kept failing");
    };
    retry(write_ops(OpType::Write, 0..50, "u"));
    retry(write_ops(OpType::Delete, 50..100, ""));
    retry(write_ops(OpType::Insert, 600..700, "n"));
    let more: Vec<(i64, i64)> = (10..6010).map(|i| (i, i * 2)).collect();
    for chunk in more.chunks(500) {
        retry(grown_ops(chunk));
    }
    // One of the 10 rows node 3 restored is gone at the source.
    retry(vec![KeyOp {
        op: OpType::Delete,
        database: DB.into(),
        table: "grown".into(),
        key: vec![Value::Int(3)],
        values: Vec::new(),
        columns: Vec::new(),
    }]);
    retry(vec![
        doc(OpType::Write, 1, Some(long("changed", 1))),
        doc(OpType::Delete, 2, None),
    ]);
    for sql in [
        "DROP TABLE gone",
        "DROP TABLE reshaped",
        "CREATE TABLE reshaped (id INT PRIMARY KEY, v INT, w INT) ENGINE=NDB",
    ] {
        api.sql(DB, sql).expect(sql);
    }
    retry(int_rows("reshaped", &[(3, &[3, 3])]));
    nodes.push(node(&m, 3, false));
    wait_until("node 3 started", 30, || {
        nodes[1].status().state == NodeState::Started
    });
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("Node restart: restoring GCI"),
        "node 3 restores its own files:\n{log}"
    );
    let copied = log
        .lines()
        .find(|l| l.contains("Copied") && l.contains("to node 3 for its restart"))
        .unwrap_or_else(|| panic!("no copy line:\n{log}"));
    // Rows 100..600 did not change while node 3 was down: keys only.
    let keys_only: u64 = copied
        .split(" whole, ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("keys-only count in {copied:?}"));
    assert!(keys_only >= 500, "{copied}");
    // Compared by digest: only the buckets holding a row deleted while node 3 was
    // down (50 of kv, 1 of docs, 1 of grown; no traffic during the copy) are asked for
    // again, and only their keys are sent.
    let number_before = |marker: &str| -> u64 {
        let head = copied
            .split(marker)
            .next()
            .unwrap_or_else(|| panic!("{marker:?} in {copied:?}"));
        head.rsplit(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a number before {marker:?} in {copied:?}"))
    };
    let (asked, keys) = (
        number_before(" buckets asked for again"),
        number_before(" keys sent"),
    );
    assert!((1..=52).contains(&asked), "{copied}");
    assert!(keys < keys_only, "{copied}");
    assert!(
        log.contains("52 rows gone at the source deleted"),
        "the deleted rows go on node 3 too:\n{log}"
    );
    let grown = local_table(&nodes[1], "grown");
    assert_eq!(grown, local_table(&nodes[0], "grown"));
    assert_eq!(grown.len(), 6009);
    assert!(!grown.contains_key(&3));
    assert_eq!(grown[&5000], format!("{:?}", [Value::Int(10_000)]));
    // Both replicas hold the same rows: the model's.
    let mut want = std::collections::BTreeMap::new();
    for id in (0..50).chain(100..700) {
        let v = if id < 50 {
            format!("u{id}")
        } else if id >= 600 {
            format!("n{id}")
        } else {
            format!("v{id}")
        };
        want.insert(id, format!("{:?}", [Value::Str(v)]));
    }
    assert_eq!(local_table(&nodes[0], "kv"), want);
    assert_eq!(local_table(&nodes[1], "kv"), want);
    let docs = local_table(&nodes[1], "docs");
    assert_eq!(docs, local_table(&nodes[0], "docs"));
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[&1], format!("{:?}", [Value::Str(long("changed", 1))]));
    let reshaped = local_table(&nodes[1], "reshaped");
    assert_eq!(reshaped.len(), 1, "{reshaped:?}");
    assert_eq!(
        reshaped[&3],
        format!("{:?}", [Value::Int(3), Value::Int(3)])
    );
    let dp3 = nodes[1].data().expect("data path");
    assert!(dp3.engine.ndb(DB).table("gone").is_err(), "gone is gone");
    // Node 3 alone serves every row.
    let n2 = nodes.remove(0);
    assert_eq!(n2.stop(), 0);
    wait_until("node 2 gone", 20, || api.connected_nodes().len() == 1);
    let rows = read(&api, 0..700);
    assert_eq!(rows.iter().flatten().count(), 650);
    assert_eq!(rows[0].as_deref(), Some("u0"));
    assert_eq!(rows[699].as_deref(), Some("n699"));
}

/// Updates and inserts running while a node restart from the node's own files
/// copies: the joining node's digest still agrees with the source's in every bucket
/// (a row a transaction touches counts on both sides as the source's scan saw it:
/// unchanged, or changed and sent whole), so no bucket is asked for again, and the
/// replicas end equal.
#[test]
fn updates_during_a_node_restarts_copy_leave_every_digest_bucket_equal() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let (_cfg, m) = two_nodes();
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    api.sql(DB, KV).expect("create");
    let mut gci = 0;
    for batch in 0..40 {
        gci = insert(&api, batch * 500..(batch + 1) * 500);
    }
    let (mut nodes, api) = system_restart_then_kill_node_3(&m, nodes, api, gci);
    let write = |ops: Vec<KeyOp>| loop {
        match api.execute(ops.clone()) {
            Ok(_) => return,
            Err(e) if e.is_temporary() => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("write: {e}"),
        }
    };
    // Changed while node 3 is down: sent whole.
    write(write_ops(OpType::Write, 0..200, "down"));
    let stop = AtomicBool::new(false);
    let writes = AtomicU64::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Updates over the whole table and inserts of new keys, until node 3 is
            // started: some meet the copy before the source's scan, some after.
            let mut n: i64 = 0;
            while !stop.load(Ordering::Acquire) {
                // Not the rows changed while node 3 was down (checked below).
                let ids: Vec<i64> = (0..10)
                    .map(|i| 200 + (n * 7919 + i * 1999) % 19_800)
                    .collect();
                let mut ops: Vec<KeyOp> = ids
                    .iter()
                    .flat_map(|&id| write_ops(OpType::Write, id..id + 1, &format!("t{n}-")))
                    .collect();
                ops.extend(write_ops(OpType::Insert, 30_000 + n..30_001 + n, "new"));
                write(ops);
                writes.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
        nodes.push(node(&m, 3, false));
        wait_until("node 3 started", 30, || {
            nodes[1].status().state == NodeState::Started
        });
        // A little more traffic after the copy, then quiet.
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Release);
    });
    assert!(writes.load(Ordering::Relaxed) > 0);
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("Node 3: Node restart: restoring GCI"),
        "node 3 restores its own files:\n{log}"
    );
    let copied = log
        .lines()
        .find(|l| l.contains("Copied") && l.contains("to node 3 for its restart"))
        .unwrap_or_else(|| panic!("no copy line:\n{log}"));
    assert!(copied.contains("unchanged compared by digest"), "{copied}");
    assert!(
        copied.contains("(0 buckets asked for again, 0 keys sent)"),
        "{copied}"
    );
    assert!(log.contains(" 0 rows gone at the source deleted"), "{log}");
    wait_until("the replicas agree", 20, || {
        local_table(&nodes[0], "kv") == local_table(&nodes[1], "kv")
    });
    let rows = local_table(&nodes[1], "kv");
    assert!(rows.len() >= 20_000, "{} rows", rows.len());
    assert_eq!(rows[&100], format!("{:?}", [Value::Str("down100".into())]));
}

/// A node whose files are of another cluster history (the cluster was started anew
/// with `--initial` without it) offers its checkpoint in vain: the source sends every
/// row whole, the node overwrites what it restored and deletes what the source does
/// not have, and ends with the source's rows and lineage. Two node groups, so that
/// the cluster can start without node 3 (node group 1 is whole).
#[test]
fn a_node_from_another_cluster_history_gets_every_row() {
    let cfg = config_with(4, 2, "StartPartialTimeout=500\n");
    let m = mgm(&cfg);
    let create = KV;
    let nodes = start_all(&m, &[(2, false), (3, false), (4, false), (5, false)]);
    let api = client(&m, 4);
    api.sql(DB, create).expect("create");
    insert(&api, 0..400);
    api.close();
    let before = local_table(&nodes[1], "kv");
    assert!(!before.is_empty());
    // Node 3 first; the others' stops end with a forced shutdown once a node group
    // is gone.
    let mut nodes = nodes;
    assert_eq!(nodes.remove(1).stop(), 0);
    for n in nodes {
        n.stop();
    }
    // Without node 3, an initial start: a new history with other rows.
    let mut nodes = start_all(&m, &[(2, true), (4, true), (5, true)]);
    let api = client(&m, 3);
    api.sql(DB, create).expect("create again");
    for _ in 0..50 {
        match api.execute(write_ops(OpType::Insert, 200..300, "x")) {
            Ok(_) => break,
            Err(e) if e.is_temporary() => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("insert: {e}"),
        }
    }
    nodes.insert(1, node(&m, 3, false));
    wait_until("node 3 started", 30, || {
        nodes[1].status().state == NodeState::Started
    });
    let want = local_table(&nodes[0], "kv");
    assert!(want.values().all(|v| v.contains('x')), "{want:?}");
    assert_eq!(local_table(&nodes[1], "kv"), want);
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("of another cluster history"),
        "the source refuses the offer:\n{log}"
    );
    assert!(
        log.contains(&format!(
            "Copied {} rows to node 3 for its restart",
            want.len()
        )),
        "every row whole:\n{log}"
    );
    let gone = before.keys().filter(|k| !want.contains_key(k)).count();
    assert!(gone > 0);
    assert!(
        log.contains(&format!(" {gone} rows gone at the source deleted")),
        "{gone} rows deleted on node 3:\n{log}"
    );
    let dp2 = nodes[0].data().expect("dp");
    let dp3 = nodes[1].data().expect("dp");
    assert_eq!(
        dp3.lineage(),
        dp2.lineage(),
        "node 3 takes the source's lineage"
    );
    assert_ne!(dp3.lineage(), 0);
}

/// A node that stopped before the others misses the last global checkpoint: at the
/// system restart it restores its own older one and copies only what changed since
/// from a node that holds the restore point.
#[test]
fn a_node_behind_at_a_system_restart_restores_its_own_checkpoint_and_copies_changes() {
    let (_cfg, m) = two_nodes();
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    create_kv(&api);
    let gci = insert(&api, 0..300);
    api.wait_durable(gci, Duration::from_secs(10))
        .expect("durable");
    let mut nodes = nodes;
    let n2 = nodes.remove(0);
    assert_eq!(n2.stop(), 0);
    // Node 3 alone goes on: node 2's files are behind.
    wait_until("node 2 gone", 20, || api.connected_nodes().len() == 1);
    for _ in 0..50 {
        match api.execute(write_ops(OpType::Write, 0..10, "late")) {
            Ok(r) => {
                api.wait_durable(r.gci, Duration::from_secs(10))
                    .expect("durable");
                break;
            }
            Err(e) if e.is_temporary() => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("write: {e}"),
        }
    }
    api.close();
    for n in nodes {
        assert_eq!(n.stop(), 0);
    }
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("this node holds GCI") && log.contains("then copying the rows changed since"),
        "node 2 restores its own checkpoint:\n{log}"
    );
    let copied = log
        .lines()
        .find(|l| l.contains("Copied") && l.contains("to node 2 for its restart"))
        .unwrap_or_else(|| panic!("no copy to node 2:\n{log}"));
    assert!(
        copied.contains("10 changed since GCI") && copied.contains("290 unchanged"),
        "{copied}"
    );
    assert_eq!(local_table(&nodes[0], "kv"), local_table(&nodes[1], "kv"));
    let api = client(&m, 2);
    let rows = read(&api, 0..300);
    assert_eq!(rows[0].as_deref(), Some("late0"));
    assert_eq!(rows[299].as_deref(), Some("v299"));
}

/// A node that restarted empty (`--initial`) copies every row without logging it (NDB's
/// copy fragment: the copy does not fill the starting node's redo log), asks for a
/// local checkpoint at once, and counts its files as restorable only from that
/// checkpoint on (its complete-from mark). Then it checkpoints as usual: the cluster
/// restarts from node 3's files alone (node 2 wiped) with every row, the copied ones
/// included.
#[test]
fn a_node_restarted_empty_checkpoints_again_and_its_files_alone_restore_the_cluster() {
    let cfg = config_with(2, 2, "TimeBetweenLocalCheckpoints=6\n");
    let m = mgm(&cfg);
    let mut nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    create_kv(&api);
    for batch in 0..4 {
        insert(&api, batch * 50..(batch + 1) * 50);
    }
    let n3 = nodes.pop().expect("node 3");
    n3.kill();
    wait_until("node 3 gone", 20, || api.connected_nodes().len() == 1);
    for _ in 0..50 {
        match api.execute(write_ops(OpType::Insert, 200..300, "v")) {
            Ok(_) => break,
            Err(e) if e.is_temporary() => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("insert: {e}"),
        }
    }
    nodes.push(node(&m, 3, true));
    wait_until("node 3 started", 30, || {
        nodes[1].status().state == NodeState::Started
    });
    // Node 3's local engine logs to its own cluster log (rndbd writes it to a file).
    let node_log = |n: &DataNodeProcess, what: &str| -> Vec<String> {
        let data = n.data().expect("data path");
        data.engine
            .inner()
            .mgm
            .log
            .lines(None)
            .into_iter()
            .filter(|l| l.contains(what))
            .collect()
    };
    // The 300 rows copied are not in node 3's redo log (nothing else ran meanwhile).
    {
        let data = nodes[1].data().expect("data path");
        let inner = data.engine.inner();
        let log = inner.data_nodes[0]
            .log
            .as_ref()
            .expect("node 3 keeps a redo log");
        let records = log.redo.counters().records;
        assert!(
            records < 100,
            "node 3 logged {records} redo records for the copy"
        );
    }
    // The checkpoint the copy asked for completes, and then the mark names the GCI
    // from which node 3's files restore it.
    let files_line = || {
        m.log_lines()
            .into_iter()
            .find(|l| l.contains("Node 3: the local checkpoint after the copy completed"))
    };
    wait_until("node 3's files count again", 60, || files_line().is_some());
    let line = files_line().expect("the line");
    let from: u32 = line
        .rsplit("from GCI ")
        .next()
        .and_then(|g| g.trim().parse().ok())
        .unwrap_or_else(|| panic!("no GCI in {line:?}"));
    let fs_dir = nodes[1]
        .data()
        .and_then(|d| d.fs_dir())
        .expect("node 3 keeps files");
    let (mark, _) =
        crate::cluster::start_plan::read_complete_from(&crate::disk::io::OsFileSystem, &fs_dir)
            .expect("read the mark")
            .expect("node 3 has a mark");
    assert_eq!(mark, from, "{line}");
    assert!(!node_log(&nodes[1], "Local checkpoint").is_empty());
    // Enough redo for local checkpoints to start on their own (2^6 words of 4 bytes).
    let mut gci = 0;
    for batch in 3..12 {
        gci = insert(&api, batch * 100..(batch + 1) * 100);
    }
    api.wait_durable(gci, Duration::from_secs(10))
        .expect("durable");
    api.close();
    for n in nodes {
        assert_eq!(n.stop(), 0);
    }
    // Node 2's files are removed: only node 3's can restore the cluster.
    let nodes = start_all(&m, &[(3, false), (2, true)]);
    let api = client(&m, 2);
    let rows = read(&api, 0..1200);
    assert_eq!(rows.iter().flatten().count(), 1200);
    assert_eq!(rows[0].as_deref(), Some("v0"));
    assert_eq!(rows[1199].as_deref(), Some("v1199"));
    assert_eq!(local_rows(&nodes[0]), 1200);
    let log = m.log_lines().join("\n");
    assert!(log.contains("System restart: restoring GCI"), "{log}");
}

/// `ALL RESTART` from the management server: every node restarts inside its process at
/// once, and the new lives make a system restart from their own files with every
/// durable row; then `3 RESTART -i` removes node 3's files, and it copies every row.
#[test]
fn all_restart_and_an_initial_node_restart_from_the_management_server() {
    let (_cfg, m) = two_nodes();
    let nodes = start_all(&m, &[(2, false), (3, false)]);
    let api = client(&m, 2);
    create_kv(&api);
    let mut gci = 0;
    for batch in 0..3 {
        gci = insert(&api, batch * 100..(batch + 1) * 100);
    }
    api.wait_durable(gci, Duration::from_secs(10))
        .expect("durable");
    api.close();
    let mut shell = super::process_tests::shell(&m);
    let started = |shell: &mut super::client::MgmConnection| {
        shell
            .command("ALL STATUS")
            .expect("status")
            .lines()
            .filter(|l| l.contains(": started"))
            .count()
            == 2
    };
    let out = shell.command("ALL RESTART").expect("all restart");
    assert_eq!(
        out,
        "Executing RESTART on all nodes.\nStarting shutdown. This may take a while. Please wait...\nAll DB nodes are being restarted."
    );
    wait_until("the system restart", 60, || {
        m.log_lines()
            .iter()
            .any(|l| l.contains("System restart: restoring GCI"))
            && started(&mut shell)
    });
    let api = client(&m, 2);
    let rows = read(&api, 0..300);
    assert_eq!(rows.iter().flatten().count(), 300);
    assert_eq!(rows[299].as_deref(), Some("v299"));
    api.close();

    let out = shell.command("3 RESTART -i").expect("initial node restart");
    assert!(out.ends_with("Node 3 is being restarted"), "{out}");
    wait_until("node 3 copied every row", 60, || {
        m.log_lines()
            .iter()
            .any(|l| l.contains("Node 3: Node restart: the cluster runs; copying every row"))
            && started(&mut shell)
    });
    assert_eq!(local_rows(&nodes[1]), 300);
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("Node 3: Node restart initiated (initial: its file system is removed)"),
        "{log}"
    );
}
