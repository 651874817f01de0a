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
        connectstring: super::client::ConnectString::parse(&m.addr().to_string()).expect("cs"),
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

fn client(m: &MgmServer, n: usize) -> RemoteCluster {
    let api = RemoteCluster::connect(&m.addr().to_string(), Duration::from_secs(10)).expect("api");
    wait_until("every data node usable", 20, || {
        api.connected_nodes().len() == n
    });
    api
}

fn insert(api: &RemoteCluster, ids: std::ops::Range<i64>) -> u64 {
    let ops = ids
        .map(|id| KeyOp {
            op: OpType::Insert,
            database: DB.into(),
            table: "kv".into(),
            key: vec![Value::Int(id)],
            values: vec![(1, Value::Str(format!("v{id}")))],
            columns: Vec::new(),
        })
        .collect();
    api.execute(ops).expect("insert").gci
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
    api.sql(
        DB,
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=NDB",
    )
    .expect("create");
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
    api.sql(
        DB,
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=NDB",
    )
    .expect("create");
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
    api.sql(
        DB,
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=NDB",
    )
    .expect("create");
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
