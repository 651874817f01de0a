//! The shell's node commands against `rndb_mgmd` and two data nodes over TCP, in this
//! process: REPORT and DUMP answered by the data nodes, CLUSTERLOG on the management
//! server's log, SET applied in place or at a data node process's next start
//! (`cluster::mgmd::commands`).

use super::process_tests::{config_with, data_node, mgm, shell, wait_until};
use super::remote::RemoteCluster;
use crate::schema::Value;
use crate::transport::NodeState;
use crate::transport::data::{KeyOp, OpType};
use std::time::Duration;

/// (used, total) of a `Node N: <what> usage is P%(U 32K pages of total T)` line.
fn usage(line: &str, node: u32, what: &str) -> (u64, u64) {
    let prefix = format!("Node {node}: {what} usage is ");
    let rest = line
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{line:?} is not node {node}'s {what} line"));
    let inner = rest
        .split_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .expect("(U 32K pages of total T)");
    let mut words = inner.split(' ');
    let used = words.next().and_then(|w| w.parse().ok()).expect("used");
    let total = words
        .next_back()
        .and_then(|w| w.parse().ok())
        .expect("total");
    (used, total)
}

#[test]
fn report_dump_clusterlog_and_set_against_the_management_server() {
    let cfg = config_with(2, 2, "DiskPageBufferMemory=64M\n");
    let m = mgm(&cfg);
    let n2 = data_node(&m, 2, false);
    let n3 = data_node(&m, 3, false);
    wait_until("both started", 20, || {
        n2.status().state == NodeState::Started && n3.status().state == NodeState::Started
    });
    let mut c = shell(&m);
    wait_until("mgmd sees both started", 10, || {
        c.command("ALL STATUS")
            .expect("status")
            .matches("started")
            .count()
            == 2
    });
    let api = std::sync::Arc::new(
        RemoteCluster::connect(&m.connectstring(), Duration::from_secs(10)).expect("api"),
    );
    wait_until("both data nodes usable", 20, || {
        api.connected_nodes().len() == 2
    });
    api.sql(
        "test",
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=NDB",
    )
    .expect("create");
    let ops: Vec<KeyOp> = (0..2000)
        .map(|id| KeyOp {
            op: OpType::Insert,
            database: "test".into(),
            table: "kv".into(),
            key: vec![Value::Int(id)],
            values: vec![(1, Value::Str("x".repeat(150)))],
            columns: Vec::new(),
        })
        .collect();
    api.execute(ops).expect("insert");

    // REPORT MemoryUsage: each node's own pages, both replicas hold the rows.
    let report = c.command("ALL REPORT MEMORYUSAGE").expect("report");
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 4, "{report}");
    for (i, node) in [2u32, 3].into_iter().enumerate() {
        let (data_used, data_total) = usage(lines[2 * i], node, "Data");
        let (index_used, _) = usage(lines[2 * i + 1], node, "Index");
        assert_eq!(data_total, 16 * 1024 * 1024 / 32768, "{report}");
        assert!(
            data_used >= 10,
            "2000 rows of ~160 B on node {node}: {report}"
        );
        assert!(index_used >= 1, "{report}");
    }
    let one = c.command("3 REPORT MemoryUsage").expect("report 3");
    assert_eq!(one.lines().count(), 2, "{one}");
    assert!(one.lines().all(|l| l.starts_with("Node 3: ")), "{one}");
    assert!(c.command("9 REPORT MemoryUsage").is_err());

    let frag = c
        .command("ALL REPORT Fragmentation")
        .expect("fragmentation");
    for node in [2, 3] {
        assert!(
            frag.lines()
                .any(|l| l.starts_with(&format!("Node {node}: ")) && l.contains("kv")),
            "{frag}"
        );
        assert!(
            frag.contains(&format!(
                "Node {node}: OPTIMIZE TABLE of every table would give back"
            )),
            "{frag}"
        );
    }
    let dpb = c
        .command("ALL REPORT DiskPageBuffer")
        .expect("disk page buffer");
    for node in [2, 3] {
        assert!(
            dpb.contains(&format!("Node {node}: Disk page buffer 64M (2048 pages)")),
            "{dpb}"
        );
    }

    // DUMP 1000: the memory lines, also in the cluster log as the nodes' events.
    let dump = c.command("ALL DUMP 1000").expect("dump");
    assert!(
        dump.starts_with("Sending dump signal with data:\n0x000003e8\nNode 2: Data usage is "),
        "{dump}"
    );
    assert_eq!(dump.lines().count(), 6, "{dump}");
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("Node 3: Data usage is") && log.contains("Node 2: Index usage is"),
        "{log}"
    );
    let e = c.command("ALL DUMP 2000").expect_err("unknown dump code");
    assert!(e.message.contains("DUMP 2000 is not supported"), "{e}");

    // CLUSTERLOG and REPORT EventLog: the management server's own log.
    let info = c.command("CLUSTERLOG INFO").expect("info");
    assert!(info.starts_with("Severities enabled: "), "{info}");
    assert_eq!(
        c.command("CLUSTERLOG OFF").expect("off"),
        "Cluster logging is disabled."
    );
    assert_eq!(
        c.command("CLUSTERLOG INFO").expect("info"),
        "Cluster logging is disabled."
    );
    assert_eq!(
        c.command("CLUSTERLOG ON").expect("on"),
        "Cluster logging is enabled."
    );
    let events = c.command("2 REPORT EventLog").expect("event log");
    assert!(events.contains("Node 2: Started"), "{events}");
    assert!(!events.contains("Node 3: "), "{events}");

    // SET of a parameter applied at once: every running node resizes its page cache.
    let set = c.command("SET DiskPageBufferMemory=128M").expect("set");
    assert_eq!(
        set,
        "DiskPageBufferMemory changed from 64M to 128M for data nodes 2, 3: in effect now: \
         every data node's page cache was resized online (NDB needs a rolling restart for this)",
        "the embedded cluster's words once every node applied it"
    );
    // The checkpoint write speeds reach every running node's configuration.
    let set = c.command("SET MaxDiskWriteSpeed=40M").expect("set");
    assert!(
        set.ends_with(
            "in effect from each data node's next local checkpoint round, no restart needed"
        ),
        "{set}"
    );
    let n2_speed = n2
        .data()
        .expect("data path")
        .engine
        .inner()
        .config
        .read()
        .data_nodes
        .first()
        .and_then(|d| d.get_u64("MaxDiskWriteSpeed"));
    assert_eq!(n2_speed, Some(40 << 20));
    let dpb = c
        .command("ALL REPORT DiskPageBuffer")
        .expect("disk page buffer");
    for node in [2, 3] {
        assert!(
            dpb.contains(&format!("Node {node}: Disk page buffer 128M (4096 pages)")),
            "{dpb}"
        );
    }
    assert!(
        m.log_lines()
            .join("\n")
            .contains("Config change completed! New generation: 1 (DiskPageBufferMemory changed from 64M to 128M"),
        "{:?}",
        m.log_lines()
    );
    // One line per change, the management server's: the data nodes' engines that took
    // the value do not log it again.
    let changes = |what: &str| {
        m.log_lines()
            .iter()
            .filter(|l| l.contains("Config change completed") && l.contains(what))
            .count()
    };
    assert_eq!(changes("DiskPageBufferMemory"), 1, "{:?}", m.log_lines());
    assert_eq!(changes("MaxDiskWriteSpeed"), 1, "{:?}", m.log_lines());
    let e = c.command("SET NoSuchParameter=1").expect_err("unknown");
    assert!(e.message.contains("NoSuchParameter"), "{e}");
    let e = c.command("SET DataMemory=1").expect_err("out of range");
    assert!(e.message.contains("DataMemory"), "{e}");

    // SET of a parameter a node takes at its start: node 3's next life has it, after
    // a RESTART inside its process (its rows restored from its own files).
    let set = c.command("SET DataMemory=32M").expect("set");
    assert!(
        set.starts_with("DataMemory changed from 16M to 32M for data nodes 2, 3: each data node takes it when it next starts"),
        "{set}"
    );
    let r = c.command("3 RESTART").expect("restart");
    assert!(r.ends_with("Node 3 is being restarted"), "{r}");
    wait_until("node 3 restarted with its new DataMemory", 60, || {
        let r = c.command("ALL REPORT MemoryUsage").expect("report");
        let lines: Vec<&str> = r.lines().collect();
        lines.len() == 4
            && usage(lines[0], 2, "Data").1 == 512
            && usage(lines[2], 3, "Data").1 == 1024
            && c.command("3 STATUS")
                .expect("status")
                .starts_with("Node 3: started")
    });
    let local = n3.data().expect("data path");
    let rows = local
        .engine
        .inner()
        .table("test", "kv")
        .expect("kv")
        .row_count();
    assert_eq!(rows, 2000, "node 3's new life holds every row");
    drop(local);
    // An unknown node for a node command.
    let e = c.command("9 DUMP 1000").expect_err("no such node");
    assert!(
        e.message
            .starts_with("Node 9: no such node. Data nodes: 2, 3; management node: 1; API nodes:"),
        "{e}"
    );
    let e = c.command("1 DUMP 1000").expect_err("not a data node");
    assert!(
        e.message
            .starts_with("Node 1: not a data node; this command is for data nodes (2, 3)"),
        "{e}"
    );
    api.close();
    drop(n2);
}

/// API clients get node ids from the `[mysqld]`/`[api]` slots (SHOW lists them, a
/// closed client's id is free again); `ENTER SINGLE USER MODE <id>` lets only that API
/// node read, write, scan and run SQL (the others get 299), also on a data node that
/// restarts meanwhile; `EXIT SINGLE USER MODE` lets everyone in again.
#[test]
fn api_node_ids_and_single_user_mode_against_the_management_server() {
    let base = config_with(2, 2, "");
    let text = format!("{}\n[api]\nNodeId=51\n", base.to_ini());
    let cfg = crate::config::ClusterConfig::parse(&text, "test.ini").expect("config");
    let slots: Vec<u32> = cfg.api_nodes.iter().map(|a| a.node_id).collect();
    assert_eq!(slots.len(), 2, "{slots:?}");
    let m = mgm(&cfg);
    let n2 = data_node(&m, 2, false);
    let n3 = data_node(&m, 3, false);
    wait_until("both started", 20, || {
        n2.status().state == NodeState::Started && n3.status().state == NodeState::Started
    });
    let connect = || {
        let api = std::sync::Arc::new(
            RemoteCluster::connect(&m.connectstring(), Duration::from_secs(10)).expect("api"),
        );
        wait_until("both data nodes usable", 20, || {
            api.connected_nodes().len() == 2
        });
        api
    };
    let a = connect();
    let b = connect();
    let extra = connect();
    let (ida, idb) = (a.node_id().expect("a slot"), b.node_id().expect("a slot"));
    assert_ne!(ida, idb);
    assert!(slots.contains(&ida) && slots.contains(&idb));
    assert_eq!(extra.node_id(), None, "every slot is taken");
    let mut c = shell(&m);
    let show = c.command("SHOW").expect("show");
    for id in [ida, idb] {
        assert!(show.contains(&format!("id={id}\t@127.0.0.1")), "{show}");
    }
    a.sql(
        "test",
        "CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=NDB",
    )
    .expect("create");
    let insert = |api: &RemoteCluster, id: i64| {
        api.execute(vec![KeyOp {
            op: OpType::Insert,
            database: "test".into(),
            table: "kv".into(),
            key: vec![Value::Int(id)],
            values: vec![(1, Value::Str(format!("v{id}")))],
            columns: Vec::new(),
        }])
    };
    let read =
        |api: &RemoteCluster, id: i64| api.read_batch("test", "kv", &[vec![Value::Int(id)]], &[]);
    insert(&a, 1).expect("insert");

    let out = c
        .command(&format!("ENTER SINGLE USER MODE {idb}"))
        .expect("enter");
    assert_eq!(
        out,
        format!("Single user mode entered\nAccess is granted for API node {idb} only.")
    );
    // The data nodes hear it over their own connections: wait until both refuse.
    wait_until("a refused on both nodes", 10, || {
        (0..4).all(|_| read(&a, 1).is_err_and(|e| e.code == 299))
    });
    let e = insert(&a, 2).expect_err("a may not write");
    assert_eq!(e.code, 299, "{e}");
    assert!(e.message.contains("single user mode"), "{e}");
    let e = a.sql("test", "SELECT * FROM kv").expect_err("nor run SQL");
    assert_eq!(e.code, 299, "{e}");
    let a_scan = std::sync::Arc::new(connect_scan_client(&m));
    let e = a_scan
        .scan_all(super::remote_scan::RemoteScanSpec::table("test", "kv"))
        .expect_err("nor scan");
    assert_eq!(e.code, 299, "{e}");
    let e = read(&extra, 1).expect_err("a client without a node id is refused too");
    assert_eq!(e.code, 299, "{e}");
    insert(&b, 3).expect("the single user writes");
    assert!(read(&b, 3).expect("and reads")[0].is_some());
    let status = c.command("ALL STATUS").expect("status");
    assert_eq!(status.matches("single user mode").count(), 2, "{status}");
    let show = c.command("SHOW").expect("show");
    assert!(show.contains(", single user mode"), "{show}");
    let e = c
        .command("ENTER SINGLE USER MODE 2")
        .expect_err("2 is a data node");
    assert!(e.message.contains("node 2 is not an API node"), "{e}");
    let e = c
        .command(&format!("ENTER SINGLE USER MODE {ida}"))
        .expect_err("already on for b");
    assert!(
        e.message
            .contains(&format!("already in single user mode for node {idb}")),
        "{e}"
    );
    // A data node that restarts meanwhile refuses the others too.
    c.command("3 RESTART").expect("restart");
    wait_until("node 3 restarted", 60, || {
        c.command("3 STATUS")
            .is_ok_and(|s| s.contains("single user mode"))
            && n3.data().is_some_and(|d| d.single_user() == Some(idb))
    });

    let out = c.command("EXIT SINGLE USER MODE").expect("exit");
    assert!(
        out.starts_with("Exiting single user mode in progress."),
        "{out}"
    );
    wait_until("a reads again", 10, || {
        (0..4).all(|_| read(&a, 3).is_ok_and(|r| r[0].is_some()))
    });
    // A temporary error while node 3's read leases settle after its restart (4035)
    // is retried, as an application does.
    wait_until("a writes again", 10, || match insert(&a, 4) {
        Ok(_) => true,
        Err(e) if e.is_temporary() => false,
        Err(e) => panic!("a writes again: {e}"),
    });
    let e = c
        .command("EXIT SINGLE USER MODE")
        .expect_err("not in single user mode");
    assert!(e.message.contains("not in single user mode"), "{e}");
    // A closed client's id is free again.
    b.close();
    wait_until("b's id free", 10, || {
        c.command("SHOW")
            .is_ok_and(|s| !s.contains(&format!("id={idb}\t@")))
    });
    let d = connect();
    assert_eq!(d.node_id(), Some(idb));
    let log = m.log_lines().join("\n");
    assert!(
        log.contains(&format!(
            "Entered single user mode Node {idb} has exclusive access"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!("Node {idb}: API node disconnected")),
        "{log}"
    );
    for api in [&a, &extra, &d] {
        api.close();
    }
    a_scan.close();
}

/// A client for scans (they take an `Arc`), without a node id (every slot is taken).
fn connect_scan_client(m: &super::mgmd::MgmServer) -> std::sync::Arc<RemoteCluster> {
    let api = std::sync::Arc::new(
        RemoteCluster::connect(&m.connectstring(), Duration::from_secs(10)).expect("api"),
    );
    wait_until("both data nodes usable", 20, || {
        api.connected_nodes().len() == 2
    });
    api
}

/// ROLLING RESTART and SHUTDOWN are answered when done; while one runs, the same
/// command from another client is refused (two rolling restarts could each take a node
/// of one group down), and the first client still gets its answer.
#[test]
fn one_rolling_restart_and_one_shutdown_at_a_time() {
    let cfg = config_with(2, 2, "");
    let m = mgm(&cfg);
    let n2 = data_node(&m, 2, false);
    let n3 = data_node(&m, 3, false);
    wait_until("both started", 20, || {
        n2.status().state == NodeState::Started && n3.status().state == NodeState::Started
    });
    let mut first = shell(&m);
    let rolling = std::thread::spawn(move || first.command("ROLLING RESTART"));
    let mut second = shell(&m);
    wait_until("the rolling restart under way", 20, || {
        m.log_lines()
            .iter()
            .any(|l| l.contains("Rolling restart: restarting node 2"))
    });
    let e = second
        .command("ROLLING RESTART")
        .expect_err("one at a time");
    assert!(e.message.contains("running already"), "{e}");
    let out = rolling
        .join()
        .expect("thread")
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", m.log_lines().join("\n")));
    assert!(out.ends_with("Rolling restart completed."), "{out}");
    // Over: the next one may run.
    let out = second.command("ROLLING RESTART").expect("again");
    assert!(out.ends_with("Rolling restart completed."), "{out}");
    let mut first = shell(&m);
    let down = std::thread::spawn(move || first.command("SHUTDOWN"));
    wait_until("the shutdown under way", 20, || {
        m.log_lines()
            .iter()
            .any(|l| l.contains("Cluster shutdown initiated"))
    });
    // Refused while the first waits, or (if the nodes ended already) by a server that
    // has shut down: never a second shutdown.
    let e = second.command("SHUTDOWN").expect_err("one shutdown");
    assert!(
        e.message.contains("in progress already") || e.message.contains("has shut down"),
        "{e}"
    );
    let out = down.join().expect("thread").expect("shutdown");
    assert!(out.ends_with("NDB Cluster has shutdown."), "{out}");
    assert_eq!(n2.wait(), 0);
    assert_eq!(n3.wait(), 0);
}
