//! Tests of the management commands on embedded clusters, and of the engine support they
//! need: API node ids per `Ndb`, single user mode (error 299), the dynamic lock wait
//! timeout, the cluster log.

use super::*;
use crate::api::{AbortOption, Cluster, ExecType, OpKind};
use crate::config::ClusterConfig;
use crate::schema::Value;
use crate::sql::Session;
use std::time::{Duration, Instant};

fn cluster_with(data_memory: &str, dir: Option<&std::path::Path>) -> Cluster {
    let mut cfg = ClusterConfig::embedded_default();
    cfg.set_data_node_param("DataMemory", data_memory)
        .expect("DataMemory");
    match dir {
        Some(d) => Cluster::embedded_in(cfg, d.to_path_buf()).expect("start"),
        None => Cluster::embedded(cfg).expect("start"),
    }
}

fn err(c: &Cluster, cmd: &str) -> NdbError {
    execute(c.inner(), cmd).expect_err(cmd)
}

fn ok(c: &Cluster, cmd: &str) -> String {
    execute(c.inner(), cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

#[test]
fn memory_report_lines() {
    assert_eq!(
        usage_line(2, "Data", 14890, 32768),
        "Node 2: Data usage is 45%(14890 32K pages of total 32768)"
    );
    let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
    let out = ok(&c, "all report mem");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].starts_with("Node 2: Data usage is 0%(0 32K pages of total "),
        "{}",
        lines[0]
    );
    assert!(
        lines[3].starts_with("Node 3: Index usage is 0%(0 32K pages"),
        "{}",
        lines[3]
    );
    assert_eq!(ok(&c, "3 REPORT MemoryUsage").lines().count(), 2);
    assert_eq!(err(&c, "9 REPORT MemoryUsage").code, 5001);
    assert_eq!(err(&c, "ALL REPORT Foo").code, 5001);
    assert_eq!(ok(&c, "ALL STATUS").lines().count(), 2);
}

#[test]
fn grammar() {
    let p = |s: &str| parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    assert_eq!(p(""), None);
    assert_eq!(p("  # comment"), None);
    assert_eq!(p("show"), Some(Command::Show));
    assert_eq!(p("SHOW;"), Some(Command::Show));
    assert_eq!(p("all status"), Some(Command::Status(Target::All)));
    assert_eq!(p("2 Status"), Some(Command::Status(Target::Node(2))));
    assert_eq!(
        p("2 report m"),
        Some(Command::Report(Target::Node(2), Report::MemoryUsage))
    );
    assert_eq!(
        p("ALL REPORT eventlog"),
        Some(Command::Report(Target::All, Report::EventLog))
    );
    assert_eq!(
        p("2 DUMP 1000 0x10"),
        Some(Command::Dump(Target::Node(2), vec![1000, 16]))
    );
    assert_eq!(
        p("3 restart -n -I -a -f"),
        Some(Command::Restart(
            Target::Node(3),
            Flags {
                nostart: true,
                initial: true,
                abort: true,
                force: true
            }
        ))
    );
    assert_eq!(
        p("enter single user mode 5"),
        Some(Command::EnterSingleUser(5))
    );
    assert_eq!(p("EXIT SINGLE USER MODE"), Some(Command::ExitSingleUser));
    assert_eq!(p("rolling restart"), Some(Command::RollingRestart));
    assert_eq!(
        p("CLUSTERLOG ON debug"),
        Some(Command::ClusterLog(ClusterLogCmd::Set(
            Some(true),
            vec![Severity::Debug]
        )))
    );
    assert_eq!(
        p("clusterlog info"),
        Some(Command::ClusterLog(ClusterLogCmd::Info))
    );
    assert_eq!(
        p("SET DiskPageBufferMemory = 512M"),
        Some(Command::Set {
            name: "DiskPageBufferMemory".into(),
            value: "512M".into()
        })
    );
    assert_eq!(
        p("help restart"),
        Some(Command::Help(Some("restart".into())))
    );
    let e = |s: &str| parse(s).expect_err(s).message;
    assert_eq!(
        e("SHWO"),
        "Invalid command: SHWO. Did you mean SHOW? Type HELP for help."
    );
    assert_eq!(
        e("all statsu"),
        "Invalid command: all statsu. Did you mean ALL STATUS? Type HELP for help."
    );
    assert_eq!(
        e("2 RESTART -x"),
        "Invalid option: -x for RESTART. Allowed options: -n -i -a -f. Type HELP RESTART for help."
    );
    assert!(e("ALL REPORT Foo").starts_with("Unknown report type: Foo."));
    assert!(e("ROLLING").contains("Did you mean ROLLING RESTART?"));
    assert!(e("exit single").contains("Did you mean EXIT SINGLE USER MODE?"));
    assert!(e("CLUSTERLOG ON LOUD").starts_with("Invalid severity level: LOUD."));
    assert!(e("2 DUMP x").starts_with("Invalid dump argument: x."));
    assert!(
        e("\u{1}\u{2}garbage").contains("\\u{1}"),
        "control characters escaped"
    );
    let long = "x".repeat(1 << 20);
    assert!(e(&long).len() < 200, "long input is shortened");
    // SQL's SET is not a configuration change
    assert!(is_config_set("SET DiskPageBufferMemory=512M"));
    assert!(is_config_set("set diskpagebuffermemory = 512M"));
    assert!(is_config_set("SET NoSuchParam=1"));
    assert!(is_config_set("SET DataMemory"));
    assert!(is_config_set("SET DataMemory 512M"));
    assert!(parse("SET DataMemory").is_err());
    for sql in [
        "SET @x=1",
        "SET autocommit=0",
        "SET AUTOCOMMIT=0",
        "SET ndb_use_transactions=0",
        "SET NAMES utf8mb4",
        "SET SESSION sql_mode=''",
        "SETTINGS=1",
    ] {
        assert!(!is_config_set(sql), "{sql}");
    }
    assert_eq!(suggest("SHUT", &["SHOW", "SHUTDOWN"]), Some("SHUTDOWN"));
    assert_eq!(suggest("zzzzzz", &["SHOW", "SHUTDOWN"]), None);
}

#[test]
fn show_status_and_api_node_ids() {
    let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
    let show = ok(&c, "SHOW");
    assert!(show.contains("[ndbd(NDB)]\t2 node(s)\nid=2\t@127.0.0.1  (rndb-"));
    assert!(show.contains("Nodegroup: 0, *)\nid=3"));
    assert!(show.contains("id=4 (not connected, accepting connect from localhost)"));
    let a = c.ndb("test");
    let b = c.ndb("test");
    let a2 = a.clone();
    assert_eq!((a.node_id(), b.node_id(), a2.node_id()), (4, 5, 4));
    let show = ok(&c, "SHOW");
    assert!(show.contains("id=4\t@127.0.0.1  (rndb-"), "{show}");
    assert!(show.contains("id=6 (not connected"), "{show}");
    assert_eq!(ok(&c, "4 STATUS"), format!("Node 4: connected ({VERSION})"));
    assert_eq!(ok(&c, "6 status"), "Node 6: not connected");
    assert_eq!(ok(&c, "1 STATUS"), format!("Node 1: connected ({VERSION})"));
    assert_eq!(
        err(&c, "9 STATUS").message,
        "Node 9: no such node. Data nodes: 2, 3; management node: 1; API nodes: 4, 5, 6, 7"
    );
    assert!(
        err(&c, "4 REPORT MemoryUsage")
            .message
            .contains("not a data node")
    );
    drop(b);
    assert_eq!(c.ndb("x").node_id(), 5, "a released slot is reused");
    // more Ndb objects than slots share the least used slot
    let many: Vec<_> = (0..6).map(|_| c.ndb("test")).collect();
    assert!(many.iter().all(|n| (4..=7).contains(&n.node_id())));
}

#[test]
fn single_user_mode_refuses_other_api_nodes() {
    let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
    let mut s4 = Session::new(c.ndb("test"));
    let mut s5 = Session::new(c.ndb("test"));
    s4.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=ndbcluster; INSERT INTO t VALUES (1, 1)",
    )
    .expect("setup");
    let out = ok(&c, "ENTER SINGLE USER MODE 4");
    assert_eq!(
        out,
        "Single user mode entered\nAccess is granted for API node 4 only."
    );
    assert_eq!(
        ok(&c, "ALL STATUS"),
        format!("Node 2: single user mode ({VERSION})\nNode 3: single user mode ({VERSION})")
    );
    assert!(ok(&c, "SHOW").contains(", single user mode, Nodegroup: 0, *)"));
    s4.execute("UPDATE t SET v = 2 WHERE id = 1")
        .expect("node 4 keeps access");
    let e = s5
        .execute("SELECT v FROM t WHERE id = 1")
        .expect_err("node 5 refused");
    assert_eq!(e.code, 299);
    assert_eq!(
        crate::sql::render_error(&e),
        "ERROR 1296 (HY000): Got error 299 'Operation not allowed due to single user mode' from NDBCLUSTER"
    );
    let ndb5 = c.ndb("test");
    assert_eq!(
        ndb5.start_transaction().map(|_| ()).map_err(|e| e.code),
        Err(299)
    );
    let t = c.ndb("test").table("t").expect("table");
    assert_eq!(
        ndb5.read_batch(&t, &[vec![Value::Int(1)]], &[1])
            .map_err(|e| e.code),
        Err(299)
    );
    assert!(
        err(&c, "ENTER SINGLE USER MODE 5")
            .message
            .contains("already in single user mode for node 4")
    );
    assert_eq!(
        err(&c, "ENTER SINGLE USER MODE 2").message,
        "Entering single user mode for node 2 failed: node 2 is not an API node of this cluster"
    );
    assert!(ok(&c, "EXIT SINGLE USER MODE").starts_with("Exiting single user mode in progress."));
    s5.execute("SELECT v FROM t WHERE id = 1")
        .expect("access again");
    assert!(
        err(&c, "EXIT SINGLE USER MODE")
            .message
            .contains("not in single user mode")
    );
    let log = ok(&c, "2 REPORT EventLog");
    assert!(log.contains("Node 2: Entered single user mode Node 4 has exclusive access"));
}

#[test]
fn set_changes_the_configuration() {
    let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
    let out = ok(&c, "SET DiskPageBufferMemory=512M");
    assert!(
        out.starts_with(
            "DiskPageBufferMemory changed from 64M to 512M for data nodes 2, 3: in effect now: every data node's page cache was resized online"
        ),
        "{out}"
    );
    assert_eq!(
        c.inner().config.read().data_nodes[1].disk_page_buffer_memory,
        512 << 20
    );
    for n in &c.inner().data_nodes {
        assert_eq!(
            n.disk.pgman.stats().capacity_pages,
            (512 << 20) / crate::disk::page::DISK_PAGE_SIZE,
            "node {} resized",
            n.node_id
        );
    }
    let out = ok(&c, "SET NoOfFragmentLogFiles=32");
    assert!(out.contains("initial (system) restart is needed"), "{out}");
    let out = ok(&c, "SET MinDiskWriteSpeed=20M");
    assert!(
        out.ends_with(
            "in effect from each data node's next local checkpoint round, no restart needed"
        ),
        "{out}"
    );
    let e = err(&c, "SET DiskPageBufferMemry=1G");
    assert_eq!(e.code, 5000);
    assert!(
        e.message.contains(
            "unknown parameter 'DiskPageBufferMemry' (did you mean DiskPageBufferMemory?)"
        ),
        "{}",
        e.message
    );
    let e = err(&c, "SET DataMemory=5000G");
    assert!(
        e.message.contains("value out of range, allowed 1M..1024G"),
        "{}",
        e.message
    );
    assert_eq!(
        c.inner().config.read().data_nodes[0].data_memory,
        98 << 20,
        "unchanged"
    );
    assert!(
        ok(&c, "2 REPORT EventLog").is_empty() || ok(&c, "ALL REPORT EventLog").contains("Started")
    );
}

#[test]
fn deadlock_timeout_is_dynamic() {
    let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
    let mut s = Session::new(c.ndb("test"));
    s.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=ndbcluster; INSERT INTO t VALUES (1, 1)",
    )
    .expect("setup");
    assert_eq!(c.inner().lock_timeout_ms(), 1200);
    let out = ok(&c, "SET TransactionDeadlockDetectionTimeout=100");
    assert!(out.ends_with(": in effect now, no restart needed"), "{out}");
    assert_eq!(c.inner().lock_timeout_ms(), 100);
    let ndb = c.ndb("test");
    let t = ndb.table("t").expect("t");
    let mut holder = ndb.start_transaction().expect("tx");
    holder
        .define(
            &t,
            OpKind::Update,
            &[("id", Value::Int(1))],
            &[("v", Value::Int(2))],
            None,
        )
        .expect("define");
    holder
        .execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .expect("lock");
    let mut waiter = ndb.start_transaction().expect("tx");
    waiter
        .define(
            &t,
            OpKind::Update,
            &[("id", Value::Int(1))],
            &[("v", Value::Int(3))],
            None,
        )
        .expect("define");
    let start = Instant::now();
    let r = waiter.execute(ExecType::Commit, AbortOption::AbortOnError);
    assert_eq!(r.map_err(|e| e.code), Err(266));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(90) && waited < Duration::from_millis(1000),
        "waited {waited:?}, the new timeout is 100 ms"
    );
}

#[test]
fn cluster_log_file_and_events() {
    let dir = tempfile::tempdir().expect("tmp");
    let c = cluster_with("4M", Some(dir.path()));
    let path = dir.path().join("ndb_1_cluster.log");
    let text = || std::fs::read_to_string(&path).expect("log file");
    let first = text();
    let line = first.lines().next().expect("a line");
    // 2024-05-02 10:11:12 [MgmtSrvr] INFO     -- Node 2: Start initiated (version rndb-0.1.0)
    assert_eq!(
        line.len(),
        19 + " [MgmtSrvr] INFO     -- ".len()
            + "Node 2: Start initiated (version ".len()
            + VERSION.len()
            + 1,
        "{line}"
    );
    assert!(
        line[19..].starts_with(" [MgmtSrvr] INFO     -- Node 2: Start initiated (version rndb-"),
        "{line}"
    );
    assert!(first.contains("-- Node 3: Started (version rndb-"));
    assert_eq!(
        ok(&c, "CLUSTERLOG INFO"),
        format!(
            "Severities enabled: INFO WARNING ERROR CRITICAL ALERT\nLog file: {}",
            path.display()
        )
    );
    let out = ok(&c, "2 DUMP 1000");
    assert!(out.starts_with("Sending dump signal with data:\n0x000003e8\nNode 2: Data usage is 0%(0 32K pages of total 128)\nNode 2: Index usage is 0%"), "{out}");
    assert!(text().contains("-- Node 2: Data usage is 0%(0 32K pages of total 128)"));
    // fill DataMemory past 80 and 90 percent
    let mut s = Session::new(c.ndb("test"));
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, b VARCHAR(2000)) ENGINE=ndbcluster")
        .expect("create");
    let mut i = 0;
    loop {
        let r = s.execute(&format!("INSERT INTO t VALUES ({i}, REPEAT('x', 2000))"));
        i += 1;
        if let Err(e) = r {
            assert_eq!(e.code, 827, "{e}");
            break;
        }
        assert!(i < 5000, "DataMemory never filled");
    }
    sample_events(c.inner());
    let log = text();
    assert!(
        log.contains("-- Node 2: Data usage increased to 9"),
        "{log}"
    );
    assert!(
        log.contains("-- Node 3: Data usage increased to 9"),
        "{log}"
    );
    s.execute("DELETE FROM t").expect("delete");
    assert_eq!(ok(&c, "CLUSTERLOG OFF"), "Cluster logging is disabled.");
    assert_eq!(ok(&c, "CLUSTERLOG INFO"), "Cluster logging is disabled.");
    ok(&c, "2 DUMP 1000");
    let after_off = text();
    assert!(
        after_off.contains("Data usage decreased to 0%"),
        "sampled before the command ran"
    );
    assert!(!after_off.ends_with("-- Node 2: Index usage is 0%(0 32K pages of total 128)\n"));
    assert_eq!(ok(&c, "CLUSTERLOG ON"), "Cluster logging is enabled.");
    assert_eq!(ok(&c, "CLUSTERLOG TOGGLE DEBUG"), "DEBUG enabled");
    assert_eq!(
        ok(&c, "CLUSTERLOG OFF DEBUG INFO"),
        "DEBUG disabled\nINFO disabled"
    );
    assert_eq!(
        ok(&c, "CLUSTERLOG INFO").lines().next(),
        Some("Severities enabled: WARNING ERROR CRITICAL ALERT")
    );
    // the ring keeps every event, whatever the filter
    assert!(ok(&c, "2 REPORT EventLog").contains("Node 2: Data usage is 0%"));
}

#[test]
fn refused_commands_and_shutdown() {
    let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
    assert!(err(&c, "ALL RESTART").message.contains("system restart"));
    assert!(
        err(&c, "9 RESTART")
            .message
            .starts_with("Node 9: no such node")
    );
    assert!(err(&c, "2 START").message.contains("already started"));
    // A node restart copies the node's data from its peer; the peer alone cannot stop.
    assert_eq!(
        ok(&c, "3 STOP"),
        "Node 3: Node shutdown initiated\nNode 3 has shutdown."
    );
    assert!(
        err(&c, "2 STOP")
            .message
            .contains("Node shutdown would cause system crash")
    );
    assert!(
        err(&c, "ROLLING RESTART")
            .message
            .contains("node 3 is not started")
    );
    assert_eq!(ok(&c, "3 START"), "Database node 3 is being started.");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ok(&c, "3 STATUS").starts_with("Node 3: started") {
        assert!(std::time::Instant::now() < deadline, "node 3 did not start");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(err(&c, "START BACKUP").message.contains("not implemented"));
    assert_eq!(ok(&c, "PURGE STALE SESSIONS"), "No sessions purged");
    assert!(ok(&c, "HELP").contains("ENTER SINGLE USER MODE <id>"));
    assert!(ok(&c, "help restart").starts_with("<id> RESTART [-n] [-i] [-a] [-f]"));
    assert!(
        err(&c, "HELP FROB")
            .message
            .starts_with("No help for FROB.")
    );
    let out = ok(&c, "SHUTDOWN");
    assert_eq!(
        out,
        "Node 2: Cluster shutdown initiated\nNode 3: Cluster shutdown initiated\n\
         Node 2: Node shutdown completed.\nNode 3: Node shutdown completed.\n\
         3 NDB Cluster node(s) have shutdown.\n\
         Disconnecting to allow management server to shutdown.\nNDB Cluster has shutdown."
    );
    assert!(c.is_closed());
    assert_eq!(err(&c, "SHOW").code, 4009);
    assert!(
        ok(&c, "HELP").contains("SHUTDOWN"),
        "HELP works on a closed cluster"
    );
}
