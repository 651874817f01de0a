//! The distributed cluster as real processes on loopback: `rndb_mgmd` and `rndbd`
//! started from their binaries, managed with `rndb_mgm -c`. A data node killed with
//! SIGKILL is declared dead and rejoins; a data node frozen with SIGSTOP (its traffic
//! stops: a partition of one) is declared dead, and when it runs again it learns it is
//! out and stops; SHUTDOWN ends every process.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MGM: &str = env!("CARGO_BIN_EXE_rndb_mgm");
const MGMD: &str = env!("CARGO_BIN_EXE_rndb_mgmd");
const NDBD: &str = env!("CARGO_BIN_EXE_rndbd");

/// Processes killed when the test ends, whatever happened.
struct Procs(Vec<(String, Child)>);

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            // SAFETY: signalling a child of this process (it may already be gone).
            unsafe {
                libc::kill(c.id() as i32, libc::SIGCONT);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Procs {
    fn spawn(&mut self, name: &str, dir: &Path, bin: &str, args: &[&str]) {
        let out = std::fs::File::create(dir.join(format!("{name}.out"))).expect("out");
        let err = out.try_clone().expect("err");
        let c = Command::new(bin)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("spawn");
        self.0.push((name.to_string(), c));
    }

    fn child(&mut self, name: &str) -> &mut Child {
        &mut self
            .0
            .iter_mut()
            .find(|(n, _)| n == name)
            .expect("process")
            .1
    }

    fn signal(&mut self, name: &str, sig: i32) {
        let pid = self.child(name).id() as i32;
        // SAFETY: signalling a child of this process.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// Waits for a process to end; its exit status.
    fn wait_exit(&mut self, name: &str, secs: u64) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(s) = self.child(name).try_wait().expect("try_wait") {
                return s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "{name} did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn write_config(dir: &Path, port: u16, data_nodes: u32, replicas: u32) -> PathBuf {
    let mut t = format!(
        "[ndbd default]\nNoOfReplicas={replicas}\nDataMemory=16M\nHeartbeatIntervalDbDb=100\nArbitrationTimeout=2000\nDataDir={d}\n\
         [ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={port}\nDataDir={d}\n",
        d = dir.display()
    );
    for i in 0..data_nodes {
        t.push_str(&format!("[ndbd]\nNodeId={}\nHostName=127.0.0.1\n", i + 2));
    }
    t.push_str("[mysqld]\n");
    let p = dir.join("config.ini");
    std::fs::write(&p, t).expect("config");
    p
}

/// `rndb_mgm -c` running `commands`: (exit status, stdout + stderr).
fn mgm(port: u16, commands: &str) -> (i32, String) {
    let out = Command::new(MGM)
        .args(["-c", &format!("127.0.0.1:{port}"), "-e", commands])
        .output()
        .expect("rndb_mgm");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn cluster_log(dir: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(dir.join("ndb_1_cluster.log")) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

fn wait_for(what: &str, secs: u64, dir: &Path, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n--- cluster log ---\n{}",
            cluster_log(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn status_is(port: u16, expected: &[&str]) -> bool {
    let (code, text) = mgm(port, "ALL STATUS");
    code == 0
        && expected
            .iter()
            .all(|e| text.lines().any(|l| l.starts_with(e)))
}

#[test]
fn kill_a_data_node_and_restart_it() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let port = free_port();
    let cfg = write_config(d, port, 2, 2);
    let mut p = Procs(Vec::new());
    p.spawn("mgmd", d, MGMD, &["-f", cfg.to_str().expect("path")]);
    let cs = format!("127.0.0.1:{port}");
    p.spawn("n2", d, NDBD, &["-c", &cs, "--ndb-nodeid=2"]);
    p.spawn("n3", d, NDBD, &["-c", &cs, "--ndb-nodeid=3"]);
    wait_for("both started", 20, d, || {
        status_is(port, &["Node 2: started", "Node 3: started"])
    });
    let (_, show) = mgm(port, "SHOW");
    assert!(show.contains("id=2\t@127.0.0.1  (rndb-"), "{show}");
    assert!(show.contains("Nodegroup: 0, *)"), "{show}");
    // SQL goes to the data nodes: DDL on every one, rows changed through a TC.
    let (code, text) = mgm(
        port,
        "CREATE TABLE t (a INT PRIMARY KEY, b INT) ENGINE=NDB; SHOW TABLES;",
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Query OK") && text.contains("| t "), "{text}");
    let (code, text) = mgm(
        port,
        "INSERT INTO t VALUES (1, 2), (3, 4); UPDATE t SET b = b * 10 WHERE a = 3; SELECT b FROM t ORDER BY a;",
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("2 rows affected"), "{text}");
    assert!(text.contains("|  2 |") && text.contains("| 40 |"), "{text}");
    let (code, text) = mgm(port, "INSERT INTO t VALUES (1, 5);");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("Duplicate entry"), "{text}");
    // A transaction in the shell's session: its statements see its own rows, ROLLBACK
    // leaves nothing, COMMIT applies them all.
    let (code, text) = mgm(
        port,
        "CREATE TABLE s (a INT PRIMARY KEY, b INT) ENGINE=NDB; INSERT INTO s VALUES (1, 1); \
         BEGIN; UPDATE s SET b = 70 WHERE a = 1; INSERT INTO s VALUES (2, 80); \
         SELECT SUM(b) AS inside FROM s; ROLLBACK; SELECT SUM(b) AS rolled_back FROM s; \
         START TRANSACTION; DELETE FROM s WHERE a = 1; INSERT INTO s VALUES (3, 9); COMMIT; \
         SELECT a, b FROM s ORDER BY a;",
    );
    assert_eq!(code, 0, "{text}");
    let squeezed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(squeezed.contains("| inside | +--------+ | 150 |"), "{text}");
    assert!(
        squeezed.contains("| rolled_back | +-------------+ | 1 |"),
        "{text}"
    );
    assert!(
        squeezed.contains("| 3 | 9 |") && !squeezed.contains("| 1 | 1 |"),
        "{text}"
    );
    // Node commands the data nodes answer, and a SET they apply in place.
    let (code, text) = mgm(port, "ALL REPORT MemoryUsage");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("Node 2: Data usage is") && text.contains("Node 3: Index usage is"),
        "{text}"
    );
    let (code, text) = mgm(port, "SET DiskPageBufferMemory=128M");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("in effect now: every data node's page cache was resized online"),
        "{text}"
    );
    let (code, text) = mgm(port, "3 REPORT DiskPageBuffer");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Node 3: Disk page buffer 128M"), "{text}");

    p.signal("n3", libc::SIGKILL);
    assert_eq!(p.wait_exit("n3", 5), -1, "killed by a signal");
    wait_for("node 2 alone", 20, d, || {
        cluster_log(d).contains("Node 2: Cluster membership: nodes 2 (president 2), view 2")
    });
    assert!(status_is(
        port,
        &["Node 2: started", "Node 3: not connected"]
    ));
    let (_, text) = mgm(port, "ALL REPORT MemoryUsage");
    assert!(
        text.contains("Node 2: Data usage is") && text.contains("Node 3: not connected"),
        "{text}"
    );
    let log = cluster_log(d);
    assert!(
        log.contains("Node 3 declared dead: the connection to it was lost"),
        "{log}"
    );
    assert!(log.contains("asking the arbitrator (node 1)"), "{log}");
    assert!(
        log.contains("Arbitrator (node 1) decided: this side wins"),
        "{log}"
    );

    p.0.retain(|(n, _)| n != "n3");
    p.spawn("n3", d, NDBD, &["-c", &cs, "--ndb-nodeid=3"]);
    wait_for("node 3 back", 20, d, || {
        status_is(port, &["Node 2: started", "Node 3: started"])
    });
    assert!(cluster_log(d).contains("node 3 joined"));
    // The restarted node got the schema by its copy.
    assert!(
        cluster_log(d).contains("Node 3: Node restart completed"),
        "{}",
        cluster_log(d)
    );
    let (code, text) = mgm(port, "DESCRIBE t;");
    assert_eq!(code, 0, "{text}");

    let (code, text) = mgm(port, "SHUTDOWN");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("3 NDB Cluster node(s) have shutdown."),
        "{text}"
    );
    assert_eq!(p.wait_exit("n2", 10), 0);
    assert_eq!(p.wait_exit("n3", 10), 0);
    assert_eq!(p.wait_exit("mgmd", 10), 0);
}

#[test]
fn a_frozen_node_is_declared_dead_and_stops_when_it_wakes() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let port = free_port();
    // Two node groups: {2, 3} and {4, 5}.
    let cfg = write_config(d, port, 4, 2);
    let mut p = Procs(Vec::new());
    p.spawn("mgmd", d, MGMD, &["-f", cfg.to_str().expect("path")]);
    let cs = format!("127.0.0.1:{port}");
    for n in 2..=5 {
        p.spawn(
            &format!("n{n}"),
            d,
            NDBD,
            &["-c", &cs, &format!("--ndb-nodeid={n}")],
        );
    }
    wait_for("all started", 30, d, || {
        status_is(
            port,
            &[
                "Node 2: started",
                "Node 3: started",
                "Node 4: started",
                "Node 5: started",
            ],
        )
    });
    // Node 5 stops answering (its process is frozen): the others lose it, and keep a
    // whole node group ({2, 3}), so they continue without asking the arbitrator.
    p.signal("n5", libc::SIGSTOP);
    wait_for("node 5 out", 20, d, || {
        cluster_log(d).contains("Node 2: Cluster membership: nodes 2, 3, 4 (president 2)")
    });
    assert!(cluster_log(d).contains("this side holds node group 0 completely; continuing"));
    p.signal("n5", libc::SIGCONT);
    assert_eq!(p.wait_exit("n5", 20), 1, "a forced shutdown");
    let out = std::fs::read_to_string(d.join("n5.out")).unwrap_or_default();
    assert!(out.contains("Forced node shutdown completed"), "{out}");
    assert!(out.contains("2315") || out.contains("2305"), "{out}");
    let (code, _) = mgm(port, "SHUTDOWN");
    assert_eq!(code, 0);
    for n in 2..=4 {
        assert_eq!(p.wait_exit(&format!("n{n}"), 10), 0, "node {n}");
    }
    assert_eq!(p.wait_exit("mgmd", 10), 0);
}

#[test]
fn a_management_client_without_a_server_says_so() {
    let port = free_port();
    let (code, text) = mgm(port, "SHOW");
    assert_eq!(code, 1);
    assert!(
        text.contains("Unable to connect with connect string"),
        "{text}"
    );
    // SQL over -c needs running data nodes: without any, the reason.
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let port = free_port();
    let cfg = write_config(d, port, 2, 2);
    let mut p = Procs(Vec::new());
    p.spawn("mgmd", d, MGMD, &["-f", cfg.to_str().expect("path")]);
    wait_for("mgmd up", 10, d, || mgm(port, "SHOW").0 == 0);
    let (code, text) = mgm(port, "SELECT 1;");
    assert_eq!(code, 1);
    assert!(
        text.contains("4009") && text.contains("knows no running data node"),
        "{text}"
    );
    let (code, text) = mgm(port, "9 STATUS");
    assert_eq!(code, 1, "{text}");
    let (_, text) = mgm(port, "ALL STATUS");
    assert!(text.contains("Node 2: not connected"), "{text}");
    mgm(port, "SHUTDOWN");
    assert_eq!(p.wait_exit("mgmd", 10), 0);
}
