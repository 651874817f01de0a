//! The management server and data nodes over TCP on loopback, in this process: the
//! cluster forms, a crashed node is declared dead and rejoins, STOP/RESTART/START from
//! a management client, node id allocation.

use super::client::{ConnectString, MgmConnection};
use super::mgmd::MgmServer;
use super::ndbd::{DataNodeOptions, DataNodeProcess};
use crate::config::ClusterConfig;
use crate::transport::{NodeState, Role};
use std::time::{Duration, Instant};

pub(super) fn config(data_nodes: u32, replicas: u32) -> ClusterConfig {
    config_with(data_nodes, replicas, "")
}

/// [`config`] with more `[ndbd default]` lines (`Name=value\n` each).
pub(super) fn config_with(data_nodes: u32, replicas: u32, extra: &str) -> ClusterConfig {
    let mut text = String::from("[ndbd default]\n");
    text.push_str(extra);
    let dir = fresh_data_dir();
    text.push_str(&format!(
        "NoOfReplicas={replicas}\nHeartbeatIntervalDbDb=100\nArbitrationTimeout=1000\nDataMemory=16M\nDataDir={}\n",
        dir.display()
    ));
    text.push_str("[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\n");
    for i in 0..data_nodes {
        text.push_str(&format!("[ndbd]\nNodeId={}\nHostName=127.0.0.1\n", i + 2));
    }
    text.push_str("[mysqld]\n");
    ClusterConfig::parse(&text, "test.ini").expect("config")
}

/// Each test cluster its own empty DataDir (the data nodes keep their redo and
/// checkpoints there), named by this process's id. A directory of an earlier test
/// process whose id this one reuses would hold its tables (a system restart of them, and
/// "Table 'kv' already exists"): it is removed first, as are those of test processes that
/// have ended (best effort: a crashed or killed run leaves its directories behind).
fn fresh_data_dir() -> std::path::PathBuf {
    const PREFIX: &str = "rndb-proc-";
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = std::env::temp_dir();
    // Whether a process runs is read from /proc (Linux); elsewhere nothing is swept.
    if seq == 0
        && std::path::Path::new("/proc/self").exists()
        && let Ok(entries) = std::fs::read_dir(&tmp)
    {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(PREFIX)
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid
                && (pid == std::process::id()
                    || !std::path::Path::new(&format!("/proc/{pid}")).exists())
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = tmp.join(format!("{PREFIX}{}-{seq}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The network the tests' clusters run on: TCP on loopback, or with
/// `RNDB_TEST_NET=local` a fresh in-process network per cluster (`transport::net`):
/// the same tests then check the node code over the embedded distributed cluster's
/// carrier.
pub(super) fn test_net() -> crate::transport::net::Net {
    use crate::transport::net::{LocalNet, Net};
    match std::env::var("RNDB_TEST_NET").as_deref() {
        Ok("local") => Net::Local(LocalNet::new()),
        _ => Net::Tcp,
    }
}

pub(super) fn mgm(cfg: &ClusterConfig) -> MgmServer {
    MgmServer::start_on(
        test_net(),
        cfg.clone(),
        1,
        Some("127.0.0.1:0".parse().expect("addr")),
        None,
    )
    .expect("mgmd")
}

pub(super) fn data_node(m: &MgmServer, id: u32, nostart: bool) -> DataNodeProcess {
    DataNodeProcess::start(DataNodeOptions {
        connectstring: ConnectString::parse(&m.connectstring()).expect("cs"),
        node_id: Some(id),
        initial: false,
        nostart,
        connect_timeout: Some(Duration::from_secs(10)),
        // RNDB_TEST_ECHO=1 prints the nodes' cluster log lines (a failing test's story).
        echo: std::env::var_os("RNDB_TEST_ECHO").is_some(),
    })
    .expect("data node")
}

pub(super) fn wait_until(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A management client of `m` (as `rndb_mgm -c`).
pub(super) fn shell(m: &MgmServer) -> MgmConnection {
    MgmConnection::open(
        &ConnectString::parse(&m.connectstring()).expect("cs"),
        Role::Api,
        Duration::from_secs(5),
    )
    .expect("client")
}

#[test]
fn two_data_nodes_form_a_cluster_and_the_shell_sees_it() {
    let cfg = config(2, 2);
    let m = mgm(&cfg);
    let a = data_node(&m, 2, false);
    let b = data_node(&m, 3, false);
    wait_until("both started", 10, || {
        a.status().state == NodeState::Started && b.status().state == NodeState::Started
    });
    assert_eq!(a.status().view.node_ids(), vec![2, 3]);
    let mut c = shell(&m);
    wait_until("mgmd sees both started", 5, || {
        c.command("ALL STATUS").expect("status")
            == format!(
                "Node 2: started ({v})\nNode 3: started ({v})",
                v = crate::mgm::VERSION
            )
    });
    let show = c.command("SHOW").expect("show");
    assert!(show.contains("id=2\t@127.0.0.1  (rndb-"), "{show}");
    assert!(
        show.contains("Nodegroup: 0, *)"),
        "the president is marked: {show}"
    );
    assert!(c.command("ALL REPORT MEMORYUSAGE").is_ok());
    assert!(c.command("START BACKUP").is_err());
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("Node 2: Cluster membership: nodes 2, 3 (president 2)"),
        "{log}"
    );
}

#[test]
fn a_crashed_node_is_declared_dead_and_rejoins() {
    let cfg = config(2, 2);
    let m = mgm(&cfg);
    let a = data_node(&m, 2, false);
    let b = data_node(&m, 3, false);
    wait_until("started", 10, || {
        a.status().state == NodeState::Started && b.status().state == NodeState::Started
    });
    let t = Instant::now();
    b.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.status().view.node_ids() != vec![2] {
        assert!(
            Instant::now() < deadline,
            "node 2 never alone: {:?}\n{}",
            a.status(),
            m.log_lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t.elapsed();
    // Its connections close with it: declared dead at once (NDB's DISCONNECT_REP),
    // well before four heartbeat intervals of 100 ms would pass.
    assert!(took < Duration::from_millis(300), "{took:?}");
    let log = m.log_lines().join("\n");
    assert!(
        log.contains("Node 3 declared dead: the connection to it was lost"),
        "{log}"
    );
    assert!(
        log.contains("this side holds node group 0 completely; continuing")
            || log.contains("Arbitration: nodes 2 (president 2) continue"),
        "{log}"
    );
    let b = data_node(&m, 3, false);
    // Node 3 may report started (it installed the view) a moment before node 2's
    // status shows the same view: both are waited for.
    wait_until("rejoined", 10, || {
        b.status().state == NodeState::Started && a.status().view.node_ids() == vec![2, 3]
    });
    assert_eq!(b.status().view.node_ids(), vec![2, 3]);
    let v = a.status().view;
    assert!(
        v.dynamic_id(3) > v.dynamic_id(2),
        "joins as the youngest: {v:?}"
    );
    assert_eq!(v.president(), Some(2));
}

#[test]
fn stop_restart_and_start_from_the_shell() {
    let cfg = config(2, 2);
    let m = mgm(&cfg);
    let a = data_node(&m, 2, false);
    let b = data_node(&m, 3, true);
    let mut c = shell(&m);
    wait_until("node 3 waits for START", 10, || {
        c.command("3 STATUS")
            .expect("status")
            .starts_with("Node 3: not started")
    });
    // Node 2 starts its data path once node 3 reported how it starts (both empty).
    wait_until("node 2 waits for node 3", 10, || {
        a.status().state == NodeState::Starting
    });
    assert_eq!(
        c.command("3 START").expect("start"),
        "Database node 3 is being started."
    );
    wait_until("started", 10, || {
        a.status().state == NodeState::Started && b.status().state == NodeState::Started
    });
    let r = c.command("3 RESTART -n").expect("restart");
    assert!(r.ends_with("Node 3 is being restarted"), "{r}");
    wait_until("node 3 out, waiting", 10, || {
        a.status().view.node_ids() == vec![2] && b.status().state == NodeState::NotStarted
    });
    // The management server must have seen the new life wait for START too (its
    // status may lag the node's own): before that, START answers "already started".
    wait_until("the server sees node 3 wait for START", 10, || {
        c.command("3 STATUS")
            .expect("status")
            .starts_with("Node 3: not started")
    });
    assert_eq!(
        c.command("3 START").expect("start"),
        "Database node 3 is being started."
    );
    wait_until("back", 10, || a.status().view.node_ids() == vec![2, 3]);
    let r = c.command("3 STOP").expect("stop");
    assert!(r.contains("Node 3: Node shutdown initiated"), "{r}");
    assert_eq!(b.wait(), 0, "a graceful stop");
    assert!(c.command("7 STATUS").is_err(), "not a data node");
    drop(a);
}

/// `3 RESTART` shows node 3 stopping at once, never started by a status it sent
/// before the command; a SHUTDOWN in the middle of the restart stops both nodes.
#[test]
fn a_restarting_node_is_not_shown_started_and_a_shutdown_amid_it_stops_it() {
    let cfg = config(2, 2);
    let m = mgm(&cfg);
    let a = data_node(&m, 2, false);
    let b = data_node(&m, 3, false);
    let mut c = shell(&m);
    wait_until("both started", 10, || {
        let s = c.command("ALL STATUS").expect("status");
        s.contains("Node 2: started") && s.contains("Node 3: started")
    });
    let r = c.command("3 RESTART").expect("restart");
    assert!(r.ends_with("Node 3 is being restarted"), "{r}");
    let s = c.command("3 STATUS").expect("status");
    assert!(!s.starts_with("Node 3: started"), "{s}");
    // Restarting node 2 too would leave the group without a started node.
    let e = c
        .command("2 RESTART")
        .expect_err("last started node of the group");
    assert!(
        e.message.contains("Node shutdown would cause system crash"),
        "{}",
        e.message
    );
    // Answered once both nodes have ended, as ndb_mgm prints it.
    let r = c.command("SHUTDOWN").expect("shutdown");
    assert_eq!(
        r,
        "Node 2: Cluster shutdown initiated\nNode 3: Cluster shutdown initiated\n\
         Node 2: Node shutdown completed.\nNode 3: Node shutdown completed.\n\
         3 NDB Cluster node(s) have shutdown.\n\
         Disconnecting to allow management server to shutdown.\nNDB Cluster has shutdown."
    );
    assert!(m.shutdown_requested());
    assert_eq!(a.wait(), 0, "node 2 stops gracefully");
    assert_eq!(b.wait(), 0, "node 3 stops in its restart");
}

#[test]
fn node_ids_are_allocated_once() {
    let cfg = config(2, 2);
    let m = mgm(&cfg);
    let cs = ConnectString::parse(&m.connectstring()).expect("cs");
    let (first, text) =
        super::client::fetch_config(&cs, None, "127.0.0.1", Duration::from_secs(5)).expect("any");
    assert_eq!(first, 2);
    assert!(text.contains("[ndbd]"));
    let (second, _) =
        super::client::fetch_config(&cs, None, "127.0.0.1", Duration::from_secs(5)).expect("any");
    assert_eq!(second, 3);
    let e = super::client::fetch_config(&cs, None, "127.0.0.1", Duration::from_secs(5))
        .expect_err("none left");
    assert_eq!(e.code, super::mgmd::ALLOC_ID_ERROR);
    assert!(
        e.message.contains("No free node id found for ndbd(NDB)."),
        "{}",
        e.message
    );
    let e = super::client::fetch_config(&cs, Some(2), "127.0.0.1", Duration::from_secs(5))
        .expect_err("taken");
    assert!(e.message.contains("already allocated"), "{}", e.message);
    let e =
        super::client::fetch_config(&cs, Some(9), "", Duration::from_secs(5)).expect_err("no such");
    assert!(e.message.contains("NodeId=9"), "{}", e.message);
}
