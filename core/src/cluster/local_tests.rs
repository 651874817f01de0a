//! The embedded distributed cluster (`cluster::local`): the node code over the
//! in-process network — NDB's default configuration with no TCP, a node killed under
//! writes and restarted, a graceful shutdown and a system restart from the data
//! directory, and two clusters of one process kept apart.

use super::datapath_tests::{DB, check_model, create_kv, local_table, write_load};
use super::local::LocalCluster;
use super::process_tests::{config, wait_until};
use super::remote::RemoteCluster;
use crate::config::ClusterConfig;
use crate::schema::Value;
use crate::transport::data::{KeyOp, OpType, TcExec};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rndb-local-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn insert(id: i64, v: &str) -> KeyOp {
    KeyOp {
        op: OpType::Insert,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(id)],
        values: vec![(1, Value::Str(v.into()))],
        columns: Vec::new(),
    }
}

fn connect(c: &LocalCluster) -> Arc<RemoteCluster> {
    let api = Arc::new(c.connect(Duration::from_secs(10)).expect("api"));
    let n = c.running_nodes().len();
    wait_until("every data node usable by the client", 20, || {
        api.connected_nodes().len() == n
    });
    api
}

fn read_values(api: &RemoteCluster, ids: &[i64]) -> Vec<Option<String>> {
    let keys: Vec<Vec<Value>> = ids.iter().map(|&i| vec![Value::Int(i)]).collect();
    api.read_batch(DB, "kv", &keys, &[1])
        .expect("read")
        .into_iter()
        .map(|r| {
            r.map(|r| match &r[0] {
                Value::Str(s) => s.clone(),
                other => panic!("{other:?}"),
            })
        })
        .collect()
}

#[test]
fn the_default_configuration_runs_the_node_code_in_process_without_tcp() {
    // No data directory and none configured: a scratch one, gone with the cluster.
    let c = LocalCluster::start(ClusterConfig::embedded_default(), None, false).expect("start");
    let dir = c.data_dir().expect("a scratch directory").to_path_buf();
    assert!(dir.join("ndb_2_fs").is_dir(), "{}", dir.display());
    let cs = c.connectstring();
    assert!(
        cs.starts_with(&format!("local={},", c.net_number())),
        "{cs}"
    );
    assert_eq!(c.running_nodes(), vec![2, 3]);
    let api = connect(&c);
    assert_eq!(api.node_groups(), &[vec![2, 3]]);
    create_kv(&api);
    for chunk in (0..500).collect::<Vec<i64>>().chunks(100) {
        api.execute(chunk.iter().map(|&i| insert(i, &format!("v{i}"))).collect())
            .expect("insert");
    }
    let got = read_values(&api, &[0, 250, 499, 500]);
    assert_eq!(
        got,
        vec![
            Some("v0".into()),
            Some("v250".into()),
            Some("v499".into()),
            None
        ]
    );
    // NoOfReplicas=2 in one node group: both nodes hold every row, written by the
    // TC's prepare chain over the in-process network.
    for id in [2, 3] {
        let rows = local_table(&c.node(id).expect("node").data().expect("data path"));
        assert_eq!(rows.len(), 500, "node {id}");
    }
    // The management server answers as it does over TCP; its transporters run
    // over socket pairs, which ndbinfo shows as in-process.
    let mut mgm = c.mgm_client(Duration::from_secs(5)).expect("mgm");
    let show = mgm.command("SHOW").expect("show");
    assert!(show.contains("id=2") && show.contains("id=3"), "{show}");
    let st = mgm.command("ALL STATUS").expect("status");
    assert!(
        st.contains("Node 2: started") && st.contains("Node 3: started"),
        "{st}"
    );
    let t = api
        .sql(
            DB,
            "SELECT node_id, remote_node_id, remote_address FROM ndbinfo.transporters WHERE remote_node_id = 3 AND node_id = 2",
        )
        .expect("ndbinfo");
    assert!(t.contains("in-process"), "{t}");
    drop(api);
    let codes = c.shutdown().expect("shutdown");
    assert_eq!(codes.values().copied().collect::<Vec<_>>(), vec![0, 0]);
    assert!(!dir.exists(), "the scratch directory is removed");
}

#[test]
fn a_node_killed_under_writes_fails_over_and_comes_back_from_its_files() {
    let dir = scratch("kill");
    let mut c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
    let api = connect(&c);
    create_kv(&api);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = write_load(api.clone(), stop.clone(), 0);
    std::thread::sleep(Duration::from_millis(400));
    c.kill_node(3).expect("kill");
    let survivor = c.node(2).expect("node 2");
    wait_until("the survivor alone in its view", 10, || {
        survivor.status().view.node_ids() == vec![2]
    });
    std::thread::sleep(Duration::from_millis(300));
    // A node restart from its own checkpoint and redo, under the same writes.
    c.start_node(3, false).expect("restart");
    c.wait_started(&[3], Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", c.log_lines().join("\n")));
    wait_until("the client uses node 3 again", 20, || {
        api.connected_nodes().len() == 2
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Release);
    let (model, errors) = writer.join().expect("writer");
    assert!(
        model.len() > 100,
        "the load wrote most keys: {}",
        model.len()
    );
    check_model(&api, &model, &|| c.log_lines());
    let rows: Vec<_> = [2, 3]
        .iter()
        .map(|&id| local_table(&c.node(id).expect("node").data().expect("data")))
        .collect();
    assert_eq!(rows[0], rows[1], "the replicas agree after the restart");
    let log = c.log_lines().join("\n");
    assert!(log.contains("Node 3: Node restart: restoring GCI"), "{log}");
    assert!(log.contains("Node 3: Node restart completed"), "{log}");
    eprintln!("errors seen: {errors:?}");
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cluster_shut_down_starts_again_from_its_data_directory() {
    let dir = scratch("restart");
    {
        let c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
        let api = connect(&c);
        create_kv(&api);
        api.execute((0..50).map(|i| insert(i, "kept")).collect())
            .expect("insert");
        drop(api);
        c.shutdown().expect("shutdown");
    }
    let c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("system restart");
    let api = connect(&c);
    let got = read_values(&api, &(0..50).collect::<Vec<_>>());
    assert!(got.iter().all(|v| v.as_deref() == Some("kept")), "{got:?}");
    drop(api);
    drop(c);
    // --initial: the files are gone, so is the table.
    let c = LocalCluster::start(config(2, 2), Some(&dir), true).expect("initial start");
    let api = connect(&c);
    let e = api
        .table(DB, "kv")
        .expect_err("an initial start has no tables");
    assert_eq!(e.code, 723, "{e}");
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_clusters_of_one_process_are_apart_and_an_unknown_network_is_refused() {
    let (da, db) = (scratch("apart-a"), scratch("apart-b"));
    // The same configuration, so the same addresses: each on its own network.
    let a = LocalCluster::start(config(2, 2), Some(&da), false).expect("a");
    let b = LocalCluster::start(config(2, 2), Some(&db), false).expect("b");
    assert_ne!(a.net_number(), b.net_number());
    let (api_a, api_b) = (connect(&a), connect(&b));
    create_kv(&api_a);
    assert_eq!(api_b.table(DB, "kv").expect_err("only in a").code, 723);
    create_kv(&api_b);
    api_a.execute(vec![insert(1, "a")]).expect("a");
    api_b.execute(vec![insert(1, "b")]).expect("b");
    assert_eq!(read_values(&api_a, &[1]), vec![Some("a".into())]);
    assert_eq!(read_values(&api_b, &[1]), vec![Some("b".into())]);
    let e = RemoteCluster::connect("local=999999999,127.0.0.1:1186", Duration::from_secs(1))
        .err()
        .expect("no such network");
    assert_eq!(e.code, 4009, "{e}");
    assert!(e.message.contains("no in-process network"), "{}", e.message);
    drop((api_a, api_b, a, b));
    let _ = std::fs::remove_dir_all(&da);
    let _ = std::fs::remove_dir_all(&db);
}

fn table_rows(api: &Arc<RemoteCluster>, sql: &str) -> Vec<Vec<String>> {
    let text = api.sql(DB, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    text.lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|v| v.trim().to_string())
                .collect()
        })
        .collect()
}

/// ndbinfo over the transport shows every live data node's rows, not only those of
/// the node that runs the query; a node that is gone is left out; a query whose
/// rows pass the per-node limit fails with 4011 instead of showing part of them.
#[test]
fn ndbinfo_over_the_transport_shows_every_data_nodes_rows() {
    let dir = scratch("ndbinfo");
    let mut c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
    let api = connect(&c);
    create_kv(&api);
    let mem = table_rows(
        &api,
        "SELECT node_id, memory_type FROM ndbinfo.memoryusage ORDER BY node_id, memory_type",
    );
    let want: Vec<Vec<String>> = [2, 3]
        .iter()
        .flat_map(|n| ["Data memory", "Index memory"].map(|t| vec![n.to_string(), t.to_string()]))
        .collect();
    assert_eq!(mem, want);
    // Without ORDER BY the rows come in node order, as NDB lists them.
    let nodes = table_rows(&api, "SELECT node_id FROM ndbinfo.nodes");
    assert_eq!(nodes, vec![vec!["2".to_string()], vec!["3".to_string()]]);
    let frag_nodes: std::collections::BTreeSet<String> = table_rows(
        &api,
        "SELECT node_id FROM ndbinfo.memory_per_fragment WHERE fq_name LIKE '%kv%'",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    assert_eq!(frag_nodes, ["2", "3"].map(String::from).into());
    // Disk data: each node's undo file in information_schema.FILES.
    api.sql(
        DB,
        "CREATE LOGFILE GROUP lg ADD UNDOFILE 'u.dat' INITIAL_SIZE 4M ENGINE=NDB",
    )
    .expect("logfile group");
    let files = table_rows(
        &api,
        "SELECT FILE_NAME, EXTRA FROM INFORMATION_SCHEMA.FILES WHERE FILE_TYPE = 'UNDO LOG'",
    );
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files[0][1].contains("CLUSTER_NODE=2") && files[1][1].contains("CLUSTER_NODE=3"));
    // More rows than a node may send (the unit tests' limit is 100): 4011.
    for i in 0..30 {
        api.sql(
            DB,
            &format!("CREATE TABLE t{i} (id INT PRIMARY KEY) ENGINE=NDB"),
        )
        .expect("create");
    }
    let e = api
        .sql(DB, "SELECT COUNT(*) FROM ndbinfo.memory_per_fragment")
        .expect_err("over the limit");
    assert_eq!(e.code, 4011, "{e}");
    assert!(e.message.contains("WHERE on node_id"), "{}", e.message);
    // A node gone: the survivor's rows only.
    c.kill_node(3).expect("kill");
    let survivor = c.node(2).expect("node 2");
    wait_until("the survivor alone", 10, || {
        survivor.status().view.node_ids() == vec![2]
    });
    let mem = table_rows(&api, "SELECT DISTINCT node_id FROM ndbinfo.memoryusage");
    assert_eq!(mem, vec![vec!["2".to_string()]]);
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// OPTIMIZE TABLE over the transport runs on every data node's replicas and answers
/// each node's note with one status; the rows are all there afterwards, equal on
/// both replicas.
#[test]
fn optimize_table_runs_on_every_data_node() {
    let dir = scratch("optimize");
    let c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
    let api = connect(&c);
    create_kv(&api);
    for chunk in (0..3000).collect::<Vec<i64>>().chunks(500) {
        api.execute(
            chunk
                .iter()
                .map(|&i| insert(i, "some value here"))
                .collect(),
        )
        .expect("insert");
    }
    // Free most rows, scattered, so that the kept ones are worth moving.
    let dels: Vec<KeyOp> = (0..3000)
        .filter(|i| i % 10 != 0)
        .map(|i| KeyOp {
            op: OpType::Delete,
            database: DB.into(),
            table: "kv".into(),
            key: vec![Value::Int(i)],
            values: Vec::new(),
            columns: Vec::new(),
        })
        .collect();
    for chunk in dels.chunks(500) {
        api.execute(chunk.to_vec()).expect("delete");
    }
    let rows = table_rows(&api, "OPTIMIZE TABLE kv");
    let notes: Vec<&Vec<String>> = rows.iter().filter(|r| r[2] == "note").collect();
    assert_eq!(notes.len(), 2, "{rows:?}");
    assert!(notes[0][3].starts_with("Node 2: ") && notes[1][3].starts_with("Node 3: "));
    assert!(notes.iter().all(|r| r[3].contains("rows and")), "{rows:?}");
    assert_eq!(rows.last().map(|r| r[3].as_str()), Some("OK"), "{rows:?}");
    let given_back: u64 = notes
        .iter()
        .map(|r| {
            let before = r[3]
                .split(" DataMemory pages given back")
                .next()
                .unwrap_or("");
            before
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum();
    assert!(given_back > 0, "pages given back: {rows:?}");
    let want: Vec<i64> = (0..3000).filter(|i| i % 10 == 0).collect();
    let got = read_values(&api, &want);
    assert!(got.iter().all(|v| v.as_deref() == Some("some value here")));
    let local: Vec<_> = [2, 3]
        .iter()
        .map(|&id| local_table(&c.node(id).expect("node").data().expect("data")))
        .collect();
    assert_eq!(local[0].len(), 300);
    assert_eq!(local[0], local[1]);
    // A table that does not exist: each node's error, and a failed status.
    let rows = table_rows(&api, "OPTIMIZE TABLE nope");
    assert_eq!(rows.last().map(|r| r[3].as_str()), Some("Operation failed"));
    assert_eq!(
        rows.iter().filter(|r| r[2] == "Error").count(),
        2,
        "{rows:?}"
    );
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// MySQL's IGNORE, ON DUPLICATE KEY UPDATE and REPLACE on a unique-index conflict
/// over the transport with one node group (the statement is captured at a data node
/// with the embedded SQL layer's rules, `sql::dml_unique`, and applied with its deletes
/// first), and both replicas agree.
#[test]
fn unique_conflicts_resolve_as_mysql_does_over_the_transport() {
    let dir = scratch("unique");
    let c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
    let api = connect(&c);
    api.sql(
        DB,
        "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(20), n INT, UNIQUE KEY ue (email)) ENGINE=NDB",
    )
    .expect("create");
    api.sql(DB, "INSERT INTO u VALUES (1, 'a', 0), (2, 'b', 0)")
        .expect("insert");
    let out = api
        .sql(DB, "INSERT IGNORE INTO u VALUES (3, 'a', 1), (4, 'c', 1)")
        .expect("ignore");
    assert!(
        out.contains("1 row affected") && out.contains("Duplicates: 1"),
        "{out}"
    );
    let out = api
        .sql(
            DB,
            "INSERT INTO u VALUES (5, 'b', 9) ON DUPLICATE KEY UPDATE n = 10",
        )
        .expect("upsert");
    assert!(out.contains("2 rows affected"), "{out}");
    let out = api
        .sql(DB, "REPLACE INTO u VALUES (6, 'c', 5)")
        .expect("replace over another row's value");
    assert!(out.contains("2 rows affected"), "{out}");
    let got = table_rows(&api, "SELECT id, email, n FROM u ORDER BY id");
    let want: Vec<Vec<String>> = [["1", "a", "0"], ["2", "b", "10"], ["6", "c", "5"]]
        .iter()
        .map(|r| r.iter().map(|v| v.to_string()).collect())
        .collect();
    assert_eq!(got, want);
    let ids = |id: u32| {
        let dp = c.node(id).expect("node").data().expect("data");
        let t = dp.engine.inner().table(DB, "u").expect("u");
        t.row_count()
    };
    assert_eq!((ids(2), ids(3)), (3, 3), "both replicas");
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Moving a unique value from one row to another in one transaction (delete the
/// holder in a NoCommit round, insert the new row and commit), with one node group:
/// the two rows' primaries are often different nodes, each also backup of the other's
/// row; the records of the transaction on a node share one local transaction
/// (`datapath::lqh`), so the insert sees the delete's hidden-row change. Before that
/// change 14 of these 20 moves failed with 893 or 266.
#[test]
fn moving_a_unique_value_between_rows_in_one_transaction() {
    let dir = scratch("move");
    let c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
    let api = connect(&c);
    api.sql(
        DB,
        "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(20), n INT, UNIQUE KEY ue (email)) ENGINE=NDB",
    )
    .expect("create");
    let op = |t: OpType, id: i64, email: Option<&str>| KeyOp {
        op: t,
        database: DB.into(),
        table: "u".into(),
        key: vec![Value::Int(id)],
        values: email
            .map(|e| vec![(1, Value::Str(e.into())), (2, Value::Int(1))])
            .unwrap_or_default(),
        columns: vec![],
    };
    for i in 0..20i64 {
        let (a, b, v) = (i * 2, i * 2 + 1, format!("v{i}"));
        api.execute(vec![op(OpType::Insert, a, Some(&v))])
            .expect("insert the holder");
        let mut tx = api.transaction();
        tx.execute(vec![op(OpType::Delete, a, None)], TcExec::NoCommit)
            .unwrap_or_else(|e| panic!("move {i}, delete: {e}"));
        tx.execute(vec![op(OpType::Insert, b, Some(&v))], TcExec::Commit)
            .unwrap_or_else(|e| panic!("move {i}, insert: {e}"));
    }
    let got = table_rows(&api, "SELECT COUNT(*), MIN(id % 2) FROM u");
    assert_eq!(got, vec![vec!["20".to_string(), "1".to_string()]]);
    // Every value found by its index, on the moved row.
    for i in [0i64, 7, 19] {
        assert_eq!(
            table_rows(&api, &format!("SELECT id FROM u WHERE email = 'v{i}'")),
            vec![vec![(i * 2 + 1).to_string()]]
        );
    }
    let rows: Vec<_> = [2, 3]
        .iter()
        .map(|&id| {
            let dp = c.node(id).expect("node").data().expect("data");
            dp.engine.inner().table(DB, "u").expect("u").row_count()
        })
        .collect();
    assert_eq!(rows, vec![20, 20], "both replicas");
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A config.ini written for several hosts starts here as it is: every node is on this
/// host, and the host names need not resolve.
#[test]
fn a_configuration_for_other_hosts_runs_in_this_process() {
    let dir = scratch("hosts");
    let cfg = ClusterConfig::parse(
        "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\n\
         [ndb_mgmd]\nNodeId=1\nHostName=mgm.example.invalid\n\
         [ndbd]\nNodeId=2\nHostName=db1.example.invalid\n\
         [ndbd]\nNodeId=3\nHostName=db2.example.invalid\n\
         [mysqld]\nHostName=app.example.invalid\n",
        "hosts.ini",
    )
    .expect("config");
    let c = LocalCluster::start(cfg, Some(&dir), false).expect("start");
    assert_eq!(c.running_nodes(), vec![2, 3]);
    let api = connect(&c);
    create_kv(&api);
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A NoLogging table (`COMMENT="NDB_TABLE=NOLOGGING=1"`, the C API's
/// `setLogging(false)`) on the distributed nodes: unlogged on every node; a node
/// restart copies its rows from the live node (nothing of it is in the restarting
/// node's own files); after a system restart the table is there, empty, as in NDB.
#[test]
fn a_nologging_table_survives_a_node_restart_and_is_empty_after_a_system_restart() {
    let dir = scratch("nologging");
    let count = |api: &Arc<RemoteCluster>| table_rows(api, "SELECT COUNT(*) FROM nl");
    {
        let mut c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
        let api = connect(&c);
        api.sql(
            DB,
            "CREATE TABLE nl (id INT PRIMARY KEY, v INT) COMMENT=\"NDB_TABLE=NOLOGGING=1\"",
        )
        .expect("create");
        for id in [2, 3] {
            let node = c.node(id).expect("node");
            let data = node.data().expect("data");
            let t = data.engine.ndb(DB).table("nl").expect("nl on every node");
            assert!(!t.def.logging, "node {id}: unlogged");
        }
        api.sql(DB, "INSERT INTO nl VALUES (1,1),(2,2),(3,3)")
            .expect("insert");
        c.kill_node(3).expect("kill");
        api.sql(DB, "INSERT INTO nl VALUES (4,4)")
            .expect("insert alone");
        c.start_node(3, false).expect("restart");
        c.wait_started(&[3], Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}; log:\n{}", c.log_lines().join("\n")));
        c.kill_node(2).expect("kill the other");
        wait_until("node 3 alone serves", 20, || {
            api.sql(DB, "SELECT COUNT(*) FROM nl").is_ok()
        });
        assert_eq!(
            count(&api),
            [["4"]],
            "node 3 holds every row after its restart"
        );
        drop(api);
        c.start_node(2, false).expect("restart 2");
        c.wait_started(&[2], Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}; log:\n{}", c.log_lines().join("\n")));
        c.shutdown().expect("shutdown");
    }
    let c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("system restart");
    let api = connect(&c);
    assert_eq!(count(&api), [["0"]], "empty after a system restart");
    api.sql(DB, "INSERT INTO nl VALUES (9,9)").expect("usable");
    assert_eq!(count(&api), [["1"]]);
    drop(api);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An initial start of the distributed nodes removes every disk-data file an earlier
/// run created, also one CREATE TABLESPACE put outside the node's file system (NDB
/// leaves those behind), and says so in the cluster log. One data node: two on one
/// host cannot share an absolute path, as with NDB.
#[test]
fn an_initial_start_removes_the_disk_data_files_of_the_earlier_run() {
    let dir = scratch("initial-files");
    let elsewhere = scratch("initial-files-elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("dir");
    let datafile = elsewhere.join("ts_data.dat");
    {
        let c = LocalCluster::start(config(1, 1), Some(&dir), false).expect("start");
        let api = connect(&c);
        api.sql(
            DB,
            "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE 4M ENGINE NDB",
        )
        .expect("logfile group");
        api.sql(
            DB,
            &format!(
                "CREATE TABLESPACE ts ADD DATAFILE '{}' USE LOGFILE GROUP lg INITIAL_SIZE 4M ENGINE NDB",
                datafile.display()
            ),
        )
        .expect("tablespace");
        assert!(datafile.exists(), "the data file where it was asked for");
        drop(api);
        c.shutdown().expect("shutdown");
    }
    let c = LocalCluster::start(config(1, 1), Some(&dir), true).expect("initial start");
    assert!(
        !datafile.exists(),
        "the data file outside the node's directory is gone"
    );
    // The node's event reaches the management server's log shortly after the start.
    let removed = |log: &str| {
        log.contains("Initial start: removed 2 files created by an earlier run:")
            && log.contains(&datafile.display().to_string())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut log = c.log_lines().join("\n");
    while !removed(&log) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        log = c.log_lines().join("\n");
    }
    assert!(removed(&log), "{log}");
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&elsewhere);
}

/// The cluster log file in the data directory is the management server's alone: the
/// data nodes' engines, whose files share the directory, write none of their own into
/// it (their lines used to be appended to the same file); a SET is logged once; a
/// SHUTDOWN's lines are there once each.
#[test]
fn the_cluster_log_file_is_the_management_servers_alone() {
    let dir = scratch("one-log");
    let c = LocalCluster::start(config(2, 2), Some(&dir), false).expect("start");
    let mut mgm = c.mgm_client(Duration::from_secs(5)).expect("mgm");
    mgm.command("SET MaxDiskWriteSpeed=40M").expect("set");
    let text = std::fs::read_to_string(dir.join("ndb_1_cluster.log")).expect("log file");
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("Config change completed"), 1, "{text}");
    // The engine's own start lines ("Started (version ...)" from node 1, its
    // management node) are not there; the node's are, once.
    assert_eq!(count("Node 2: Start initiated (version"), 1, "{text}");
    assert_eq!(count("Node 2: Started (version"), 1, "{text}");
    assert_eq!(count("Node 1: Started"), 0, "{text}");
    drop(mgm);
    // SHUTDOWN stops the whole cluster: no node takes another's departure for a
    // failure (each is told `STOP CLUSTER`), and the answer came once both had ended.
    c.shutdown().expect("shutdown");
    let text = std::fs::read_to_string(dir.join("ndb_1_cluster.log")).expect("log file");
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("declared dead"), 0, "{text}");
    assert_eq!(count("Node shutdown completed."), 2, "{text}");
    assert_eq!(count("Management server shutdown completed."), 1, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node restarted on a command leaves as a planned departure (`Leaving`): its peer
/// takes it out without declaring it dead or asking the arbitrator, and the restart
/// completes; a node killed is a failure, arbitrated.
#[test]
fn a_graceful_restart_is_no_failure_and_a_kill_is() {
    let mut c = LocalCluster::start(config(2, 2), None, false).expect("start");
    let mut mgm = c.mgm_client(Duration::from_secs(5)).expect("mgm");
    mgm.command("2 RESTART").expect("restart");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while count_now(&c, "Node 2: Node restart completed") == 0 {
        assert!(std::time::Instant::now() < deadline, "{:#?}", c.log_lines());
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_started(&[2, 3], Duration::from_secs(60))
        .expect("restarted");
    let lines = c.log_lines();
    let count = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(
        count("Node 3: Node 2 left the cluster (a graceful stop); continuing"),
        1,
        "{lines:#?}"
    );
    for failure in ["declared dead", "Lost contact", "Arbitration", "Arbitrator"] {
        assert_eq!(count(failure), 0, "{failure}: {lines:#?}");
    }
    c.kill_node(2).expect("kill");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while count_now(&c, "Node 3: Node 2 declared dead") == 0 {
        assert!(std::time::Instant::now() < deadline, "{:#?}", c.log_lines());
        std::thread::sleep(Duration::from_millis(20));
    }
    while count_now(&c, "Arbitration: nodes 3") == 0 {
        assert!(std::time::Instant::now() < deadline, "{:#?}", c.log_lines());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn count_now(c: &LocalCluster, what: &str) -> usize {
    c.log_lines().iter().filter(|l| l.contains(what)).count()
}
