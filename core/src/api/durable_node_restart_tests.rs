//! Node stops and restarts of an embedded cluster with a data directory, and the
//! system restarts after them: a stopped node's files are left out of the global
//! checkpoints saved meanwhile, a system restart recovers from the nodes whose files
//! hold the newest checkpoint and restarts the others by copy, and a restarted node's
//! files count again only once the local checkpoint after its copy is saved.

use super::durability_tests::config;
use super::node_restart::NodeRunState;
use super::*;
use crate::log::sysfile::Sysfile;
use crate::schema::Value;
use crate::sql::{Session, SqlResult};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

pub(super) fn open(dir: &Path) -> Cluster {
    Cluster::embedded_in(config(), dir.to_path_buf()).expect("start")
}

pub(super) fn sql(s: &mut Session, q: &str) -> Vec<SqlResult> {
    s.execute(q).unwrap_or_else(|e| panic!("{q}: {e}"))
}

pub(super) fn mgm(c: &Cluster, cmd: &str) -> String {
    crate::mgm::execute(c.inner(), cmd).unwrap_or_else(|e| panic!("{cmd}: {}", e.message))
}

/// `t`'s rows by id.
pub(super) fn contents(c: &Cluster) -> BTreeMap<i64, i64> {
    let mut s = Session::new(c.ndb("test"));
    match sql(&mut s, "SELECT id, v FROM t").pop() {
        Some(SqlResult::Rows { rows, .. }) => rows
            .into_iter()
            .map(|r| match (&r[0], &r[1]) {
                (Value::Int(k), Value::Int(v)) => (*k, *v),
                other => panic!("row {other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

pub(super) fn apply(c: &Cluster, model: &mut BTreeMap<i64, i64>, q: &str) {
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, q);
    // The model follows the three statement shapes the tests use.
    let words: Vec<&str> = q.split_whitespace().collect();
    match words[0] {
        "INSERT" => {
            let body = q.split("VALUES").nth(1).expect("values");
            for tuple in body.split("),") {
                let nums: Vec<i64> = tuple
                    .trim_matches(|ch: char| ch == '(' || ch == ')' || ch.is_whitespace())
                    .split(',')
                    .map(|x| x.trim().parse().expect("number"))
                    .collect();
                model.insert(nums[0], nums[1]);
            }
        }
        "DELETE" => {
            // DELETE FROM t WHERE id < N
            let n: i64 = words[words.len() - 1].parse().expect("bound");
            model.retain(|k, _| *k >= n);
        }
        _ => {
            // UPDATE t SET v = v + D WHERE id >= N (or v - D)
            let magnitude: i64 = words[7].parse().expect("delta");
            let d = if words[6] == "-" {
                -magnitude
            } else {
                magnitude
            };
            let n: i64 = words[words.len() - 1].parse().expect("bound");
            for (_, v) in model.range_mut(n..) {
                *v += d;
            }
        }
    }
}

/// `CREATE TABLE t (id INT PRIMARY KEY, v INT)`, the table of the tests below.
pub(super) fn create_t(c: &Cluster) {
    let mut s = Session::new(c.ndb("test"));
    sql(
        &mut s,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=ndbcluster",
    );
}

pub(super) fn insert_range(c: &Cluster, model: &mut BTreeMap<i64, i64>, from: i64, to: i64) {
    let values: Vec<String> = (from..to).map(|k| format!("({k}, {})", k * 10)).collect();
    apply(
        c,
        model,
        &format!("INSERT INTO t VALUES {}", values.join(", ")),
    );
}

pub(super) fn node(c: &Cluster, id: u32) -> std::sync::Arc<super::cluster::DataNode> {
    c.inner().node(id).expect("node").clone()
}

/// Waits until node `id` has started and its files restore it again.
pub(super) fn wait_restart_complete(c: &Cluster, id: u32) {
    let n = node(c, id);
    let deadline = Instant::now() + Duration::from_secs(60);
    while n.run_state() != NodeRunState::Started || !n.restart_complete() {
        assert_ne!(
            n.run_state(),
            NodeRunState::Stopped,
            "node {id} failed to start"
        );
        assert!(
            Instant::now() < deadline,
            "node {id} did not complete its restart"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Row counts of each of `t`'s replicas on `node_id` (its node's share).
pub(super) fn replica_rows(c: &Cluster, node_id: u32) -> u64 {
    let t = c
        .inner()
        .dict
        .read()
        .all()
        .into_iter()
        .find(|t| t.def.name == "t")
        .expect("t");
    t.fragments
        .iter()
        .flat_map(|reps| reps.iter())
        .filter(|cell| cell.node_id == node_id)
        .map(|cell| cell.state.lock().rows())
        .sum()
}

pub(super) fn sysfile(dir: &Path, id: u32) -> Sysfile {
    let fs = crate::disk::io::OsFileSystem;
    Sysfile::load(&fs, &super::durability::node_fs_dir(dir, id))
        .expect("load")
        .expect("sysfile")
}

pub(super) fn cluster_log(c: &Cluster) -> String {
    c.inner().mgm.log.lines(None).join("\n")
}

/// A node stopped while the others commit is left out of the checkpoints saved
/// meanwhile; the system restart recovers everything from the other node (a restore
/// from the stopped node's own, older files would lose the later rows and bring back
/// deleted ones), then restarts the stopped node by copy; after its local checkpoint
/// the next system restart restores both from their own files.
#[test]
fn a_system_restart_recovers_past_a_stopped_node_and_restarts_it() {
    let dir = tempfile::tempdir().expect("dir");
    let mut model = BTreeMap::new();
    {
        let c = open(dir.path());
        create_t(&c);
        insert_range(&c, &mut model, 0, 200);
        c.inner().run_lcp().expect("lcp");
        c.inner().force_gcp().expect("gcp");
        mgm(&c, "3 STOP");
        // A checkpoint whose savers were chosen before the stop may still be saving
        // on node 3; the next one waits for it and leaves node 3 out.
        c.inner().force_gcp().expect("gcp");
        let frozen = sysfile(dir.path(), 3);
        insert_range(&c, &mut model, 200, 300);
        apply(&c, &mut model, "DELETE FROM t WHERE id < 50");
        apply(&c, &mut model, "UPDATE t SET v = v + 7 WHERE id >= 150");
        c.inner().run_lcp().expect("lcp without node 3");
        let g = c.inner().force_gcp().expect("gcp");
        // Node 3 saved nothing while stopped; node 2's checkpoints name node 2 only.
        assert_eq!(
            sysfile(dir.path(), 3),
            frozen,
            "a stopped node's system file changed"
        );
        let s2 = sysfile(dir.path(), 2);
        assert_eq!(s2.saved_gci(g).expect("g saved").nodes.ids(), vec![2]);
        assert!(frozen.last_saved().expect("3 saved").gci_hi < g);
        assert_eq!(contents(&c), model);
        c.shutdown();
    }
    {
        let c = open(dir.path());
        // Served from node 2 at once; node 3 restarts by copy.
        assert_eq!(contents(&c), model);
        let log = cluster_log(&c);
        assert!(log.contains("Node 3: Its files are behind GCI"), "{log}");
        wait_restart_complete(&c, 3);
        assert_eq!(replica_rows(&c, 3), model.len() as u64);
        assert!(mgm(&c, "ALL STATUS").contains("Node 3: started"));
        // The checkpoint that named node 3 first may still be saving; the next waits.
        c.inner().force_gcp().expect("gcp");
        let s3 = sysfile(dir.path(), 3);
        assert_eq!(s3.last_saved().expect("saved").nodes.ids(), vec![2, 3]);
        apply(&c, &mut model, "UPDATE t SET v = v + 1 WHERE id >= 290");
        c.shutdown();
    }
    let c = open(dir.path());
    let log = cluster_log(&c);
    assert!(!log.contains("Its files are behind"), "{log}");
    assert_eq!(replica_rows(&c, 2), model.len() as u64);
    assert_eq!(replica_rows(&c, 3), model.len() as u64);
    assert_eq!(contents(&c), model);
    c.shutdown();
}

/// A restarted node's own files restore it only from the local checkpoint after its
/// copy (the copy is not in its redo log): until then it shows as starting and the
/// other node of its group cannot stop; afterwards that node stops, and a system
/// restart recovers every row — copied ones included — from the restarted node's
/// files alone.
#[test]
fn a_restarted_node_counts_again_after_its_checkpoint() {
    let dir = tempfile::tempdir().expect("dir");
    let mut model = BTreeMap::new();
    {
        let c = open(dir.path());
        create_t(&c);
        insert_range(&c, &mut model, 0, 300);
        mgm(&c, "2 STOP");
        insert_range(&c, &mut model, 300, 400);
        apply(&c, &mut model, "DELETE FROM t WHERE id < 20");
        // The local checkpoint that completes the restart waits until this test lets
        // it run: the LCP turn is held (a stop and a start never wait for it).
        let turn = c.inner().lcp_turn().expect("turn");
        mgm(&c, "2 START");
        let n2 = node(&c, 2);
        let deadline = Instant::now() + Duration::from_secs(60);
        while n2.run_state() != NodeRunState::Started {
            assert!(Instant::now() < deadline, "copy did not finish");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!n2.restart_complete());
        let status = mgm(&c, "2 STATUS");
        assert!(
            status.contains("Node 2: starting (Last completed phase 4)"),
            "{status}"
        );
        let show = mgm(&c, "SHOW");
        assert!(show.contains("starting, Nodegroup: 0)"), "{show}");
        assert!(
            show.contains("Nodegroup: 0, *)"),
            "node 3 is the master: {show}"
        );
        let e = crate::mgm::execute(c.inner(), "3 STOP").expect_err("refused");
        assert!(
            e.message.contains("Node shutdown would cause system crash"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("node 2 of node group 0 has not yet saved"),
            "{}",
            e.message
        );
        // It serves meanwhile: writes reach it as a backup.
        apply(&c, &mut model, "UPDATE t SET v = v + 3 WHERE id >= 390");
        c.inner().force_gcp().expect("gcp");
        assert_eq!(
            sysfile(dir.path(), 3)
                .last_saved()
                .expect("saved")
                .nodes
                .ids(),
            vec![3]
        );
        drop(turn);
        wait_restart_complete(&c, 2);
        let log = cluster_log(&c);
        assert!(
            log.contains("Node 2: Start phase 5 completed (node restart)"),
            "{log}"
        );
        mgm(&c, "3 STOP");
        apply(&c, &mut model, "UPDATE t SET v = v - 1 WHERE id >= 100");
        c.shutdown();
    }
    let c = open(dir.path());
    assert!(cluster_log(&c).contains("Node 3: Its files are behind GCI"));
    // Node 2's replicas hold every row before node 3 has copied any.
    assert_eq!(replica_rows(&c, 2), model.len() as u64);
    assert_eq!(contents(&c), model);
    wait_restart_complete(&c, 3);
    assert_eq!(replica_rows(&c, 3), model.len() as u64);
    c.shutdown();
}

/// One life on the simulated disk: transactions, local checkpoints, durable waits and
/// node stops and starts at random (the stops and starts the cluster refuses are part
/// of it), then a power loss at a random step. Returns the committed transactions
/// (rows, GCI), the highest GCI confirmed durable before the power loss, and the disk
/// image it left.
fn stop_start_life(
    fs: &crate::disk::io::MemFileSystem,
    seed: u64,
    life: u64,
    disk: bool,
    trace: &mut Vec<String>,
) -> (
    super::durability_tests::Committed,
    u32,
    crate::disk::io::MemFileSystem,
) {
    use super::durability_tests::spec;
    let c = Cluster::embedded_on(config(), "/data".into(), std::sync::Arc::new(fs.clone()))
        .expect("start");
    if c.ndb("test").table("t").is_err() {
        if disk {
            // `v` on disk pages (the table's columns as `spec`'s).
            let mut s = Session::new(c.ndb("test"));
            sql(&mut s, super::disk_restart_tests::LG);
            sql(&mut s, super::disk_restart_tests::TS);
            sql(
                &mut s,
                "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, v BIGINT) TABLESPACE ts_1 STORAGE DISK ENGINE=NDB",
            );
        } else {
            c.ndb("test").create_table(spec()).expect("create");
        }
    }
    let mut next = super::durability_tests::xorshift(seed);
    let mut txns = Vec::new();
    let mut durable = 0;
    let steps = 20 + next() % 40;
    let crash_at = next() % steps;
    let mut image = None;
    for i in 0..steps {
        if i == crash_at {
            image = Some(fs.crash_image(next()));
            trace.push(format!("life {life} step {i}: power loss"));
        }
        match next() % 10 {
            0..=5 => {
                let rows: Vec<(u64, i64)> = (0..1 + next() % 4)
                    .map(|_| (next() % 60, (life * 10_000 + i) as i64))
                    .collect();
                let ndb = c.ndb("test");
                let t = ndb.table("t").expect("t");
                let mut tx = ndb.start_transaction().expect("tx");
                for (k, v) in &rows {
                    tx.define(
                        &t,
                        OpKind::Write,
                        &[("id", Value::UInt(*k))],
                        &[("v", Value::Int(*v))],
                        None,
                    )
                    .expect("define");
                }
                match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
                    Ok(()) => txns.push((rows, tx.gci().expect("gci"))),
                    Err(e) if e.status == crate::error::ErrorStatus::TemporaryError => {
                        trace.push(format!("life {life} step {i}: temporary {}", e.code));
                    }
                    Err(e) => panic!("life {life} step {i}: commit: {e}"),
                }
            }
            6 => c.inner().run_lcp().map(|_| ()).expect("lcp"),
            7 => {
                if let Some((_, gci)) = txns.last() {
                    c.wait_durable(*gci, Duration::from_secs(10))
                        .expect("durable");
                    if image.is_none() {
                        durable = (gci >> 32) as u32;
                    }
                }
            }
            _ => {
                let id = 2 + (next() % 2) as u32;
                let cmd = match node(&c, id).run_state() {
                    NodeRunState::Stopped => format!("{id} START"),
                    _ => format!("{id} STOP"),
                };
                let r = crate::mgm::execute(c.inner(), &cmd);
                trace.push(format!(
                    "life {life} step {i}: {cmd}: {}",
                    r.map_or_else(|e| e.message, |_| "ok".into())
                ));
            }
        }
    }
    let image = image.unwrap_or_else(|| fs.crash_image(next()));
    // The process is gone: nothing it does from here reaches the image.
    c.inner().shutdown_now();
    drop(c);
    (txns, durable, image)
}

/// Power losses at random moments while nodes stop and restart on the simulated disk:
/// every system restart recovers at least every confirmed commit and exactly the
/// transactions up to the GCI it restored, whichever nodes' files it took, and the
/// nodes it restarts by copy end up with every row.
#[test]
fn power_losses_while_nodes_stop_and_restart_keep_every_durable_commit() {
    power_losses_while_nodes_stop_and_restart(false);
}

/// The same with the rows' non-key column on disk pages: a stopped node's extents go
/// back to the tablespace, a node whose files are behind at a system restart gets all
/// of its extents back before its copy, and the undo log of a restarted node is rolled
/// back only to the local checkpoint after its copy.
#[test]
fn power_losses_while_nodes_stop_and_restart_keep_disk_data() {
    power_losses_while_nodes_stop_and_restart(true);
}

fn power_losses_while_nodes_stop_and_restart(disk: bool) {
    let seeds: u64 = std::env::var("RNDB_NR_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    // System restarts that found a node's files behind (it was stopped or restarting
    // at the power loss): the seeds must reach that case.
    let mut restarts_with_a_node_behind = 0;
    for seed in 1..=seeds {
        let mut trace = Vec::new();
        let mut fs = crate::disk::io::MemFileSystem::new();
        let mut model: BTreeMap<u64, i64> = BTreeMap::new();
        for life in 0..3u64 {
            let (txns, durable, image) =
                stop_start_life(&fs, seed * 100 + life, life, disk, &mut trace);
            let fail = |what: String| -> ! {
                panic!("seed {seed} life {life}: {what}\n{}", trace.join("\n"))
            };
            let (c, _) =
                super::durability_tests::restart_and_check(&image, &txns, durable, &mut model)
                    .unwrap_or_else(|e| fail(e));
            if cluster_log(&c).contains("Its files are behind") {
                restarts_with_a_node_behind += 1;
            }
            for id in [2, 3] {
                wait_restart_complete(&c, id);
                if c.ndb("test").table("t").is_ok() && replica_rows(&c, id) != model.len() as u64 {
                    fail(format!("node {id}'s replicas miss rows after its restart"));
                }
            }
            c.shutdown();
            drop(c);
            fs = image;
        }
    }
    assert!(
        restarts_with_a_node_behind > 0,
        "no seed left a node behind at a power loss"
    );
}

/// A local checkpoint scan that began before its replica's rows were discarded (the
/// node stopped mid-round) does not clear the replica's mark for a full checkpoint: the
/// rows copied back later are in no chain, and only a full checkpoint writes them all.
#[test]
fn a_scan_begun_before_a_discard_leaves_the_replica_marked_full() {
    struct Count(u64);
    impl crate::txn::fragment::LcpSink for Count {
        fn row(&mut self, _: u32, _: &[u8], _: &[u8]) {
            self.0 += 1;
        }
        fn delete_row(&mut self, _: u32) {}
        fn delete_page(&mut self, _: u32) {}
    }
    let dir = tempfile::tempdir().expect("dir");
    let c = open(dir.path());
    create_t(&c);
    let mut model = BTreeMap::new();
    // Several pages per replica: the scan below is not done after its first page.
    for from in (0..40_000).step_by(4000) {
        insert_range(&c, &mut model, from, from + 4000);
    }
    let t = c.ndb("test").table("t").expect("t");
    let cell = t.all_cells().next().expect("a replica");
    let mut f = cell.state.lock();
    let full_scan = |f: &mut crate::txn::fragment::Fragment, discard_midway: bool| {
        let mut scan = f.lcp_begin(true, 1);
        let mut sink = Count(0);
        assert!(
            !f.lcp_scan_batch(&mut scan, 1, &|_| true, &mut sink),
            "one page only"
        );
        if discard_midway {
            f.discard_all();
        }
        while !f.lcp_scan_batch(&mut scan, 8, &|_| true, &mut sink) {}
        sink.0
    };
    f.require_full_lcp();
    assert!(full_scan(&mut f, false) > 0);
    assert!(!f.lcp_needs_full(), "a full scan clears the mark");
    f.require_full_lcp();
    full_scan(&mut f, true);
    assert!(
        f.lcp_needs_full(),
        "a scan begun before the discard cleared the mark"
    );
    drop(f);
    c.shutdown();
}

/// `t`'s rows (id, a, d), in id order.
fn disk_contents(c: &Cluster) -> Vec<Vec<Value>> {
    let mut s = Session::new(c.ndb("test"));
    match sql(&mut s, "SELECT id, a, d FROM t ORDER BY id").pop() {
        Some(SqlResult::Rows { rows, .. }) => rows,
        other => panic!("{other:?}"),
    }
}

fn load_disk_table(s: &mut Session) {
    use super::disk_restart_tests::TABLE;
    sql(s, TABLE);
    for from in (0..500).step_by(100) {
        let values: Vec<String> = (from..from + 100)
            .map(|k| format!("({k}, {k}, '{}')", "x".repeat(300)))
            .collect();
        sql(s, &format!("INSERT INTO t VALUES {}", values.join(", ")));
    }
}

/// Without a data directory a node restart copies the rows' disk columns too.
#[test]
fn a_node_restart_copies_disk_columns_without_a_data_directory() {
    use super::disk_restart_tests::{LG, TS};
    let mut cfg = crate::config::ClusterConfig::embedded(2, 2).expect("config");
    cfg.set_data_node_param("DataMemory", "32M").expect("dm");
    let c = Cluster::embedded(cfg).expect("start");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, LG);
    sql(&mut s, TS);
    load_disk_table(&mut s);
    mgm(&c, "3 STOP");
    sql(&mut s, "DELETE FROM t WHERE id < 100");
    sql(&mut s, "UPDATE t SET d = 'changed' WHERE id >= 400");
    let expect = disk_contents(&c);
    assert_eq!(expect.len(), 400);
    mgm(&c, "3 START");
    wait_restart_complete(&c, 3);
    mgm(&c, "2 STOP");
    assert_eq!(disk_contents(&c), expect, "node 3 alone");
    c.shutdown();
}

/// With a data directory: a logfile group and tablespace created while node 3 is
/// stopped, a disk table loaded, node 3 restarted by copy, then read alone; a system
/// restart with node 2 stopped restores from node 3 and restarts node 2 by copy (its
/// extents all given back first); a last system restart restores both from their own
/// files, and each alone holds every row.
#[test]
fn disk_data_survives_node_restarts_and_system_restarts() {
    use super::disk_restart_tests::{LG, TS};
    let dir = tempfile::tempdir().expect("dir");
    let expect;
    {
        let c = open(dir.path());
        let mut s = Session::new(c.ndb("test"));
        mgm(&c, "3 STOP");
        sql(&mut s, LG);
        sql(&mut s, TS);
        load_disk_table(&mut s);
        mgm(&c, "3 START");
        wait_restart_complete(&c, 3);
        c.inner().run_lcp().expect("lcp");
        mgm(&c, "3 STOP");
        sql(&mut s, "DELETE FROM t WHERE id < 100");
        sql(&mut s, "UPDATE t SET d = 'changed' WHERE id >= 400");
        mgm(&c, "3 START");
        wait_restart_complete(&c, 3);
        sql(&mut s, "UPDATE t SET a = a + 1 WHERE id >= 450");
        mgm(&c, "2 STOP");
        assert_eq!(disk_contents(&c).len(), 400);
        sql(&mut s, "UPDATE t SET a = a + 1 WHERE id >= 460");
        expect = disk_contents(&c);
        c.shutdown();
    }
    {
        let c = open(dir.path());
        let log = cluster_log(&c);
        assert!(log.contains("Node 2: Its files are behind"), "{log}");
        assert!(
            log.contains("Node 2: ") && log.contains("extents of its stale fragments returned"),
            "{log}"
        );
        assert_eq!(disk_contents(&c), expect);
        wait_restart_complete(&c, 2);
        mgm(&c, "3 STOP");
        assert_eq!(disk_contents(&c), expect, "node 2 alone");
        mgm(&c, "3 START");
        wait_restart_complete(&c, 3);
        c.shutdown();
    }
    let c = open(dir.path());
    assert!(!cluster_log(&c).contains("Its files are behind"));
    assert_eq!(disk_contents(&c), expect);
    mgm(&c, "2 STOP");
    assert_eq!(disk_contents(&c), expect, "node 3 alone");
    c.shutdown();
}
