//! Node restarts of an embedded cluster with a data directory from the node's own
//! files (`node_restart_own`): the node restores its checkpoint chains and redo to its
//! last saved global checkpoint, the copy sends only what changed since and deletes
//! what was deleted since, and the local checkpoint after it continues the chains.

use super::durable_node_restart_tests::{
    apply, cluster_log, contents, create_t, insert_range, mgm, open, replica_rows,
    wait_restart_complete,
};
use crate::checkpoint::{FragControl, lcp_dir};
use std::collections::BTreeMap;

/// The numbers of the log line `Node restart copy: C rows changed since GCI G copied,
/// U unchanged rows kept, S rows gone at the source deleted` of node `id`.
fn copy_counts(log: &str, id: u32) -> (u64, u64, u64) {
    let prefix = format!("Node {id}: Node restart copy: ");
    let line = log
        .lines()
        .rev()
        .find_map(|l| l.split_once(&prefix).map(|(_, rest)| rest.to_string()))
        .unwrap_or_else(|| panic!("no copy line for node {id}:\n{log}"));
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    // copied, GCI, unchanged, swept
    assert_eq!(nums.len(), 4, "{line}");
    (nums[0], nums[2], nums[3])
}

/// The control files of `t`'s fragments on node `id`.
fn controls(c: &super::Cluster, dir: &std::path::Path, id: u32) -> Vec<FragControl> {
    let t = c.ndb("test").table("t").expect("t");
    let fs = crate::disk::io::OsFileSystem;
    let node_dir = super::durability::node_fs_dir(dir, id);
    (0..t.fragments.len() as u32)
        .filter_map(|p| FragControl::load(&fs, &lcp_dir(&node_dir, t.def.id, p)).expect("ctl"))
        .collect()
}

/// `t` with ids 0..40000: several pages per replica (a one-page fragment's checkpoint
/// is always full).
fn load_pages(c: &super::Cluster, model: &mut BTreeMap<i64, i64>) {
    for from in (0..40_000).step_by(4000) {
        insert_range(c, model, from, from + 4000);
    }
}

/// The cluster log shows node `id`'s last restart restored from its own files.
fn assert_restored_own_files(log: &str, id: u32) {
    assert!(
        log.contains(&format!(
            "Node {id}: Node restart from its own files: restored GCI"
        )),
        "{log}"
    );
}

#[test]
fn a_node_restart_restores_its_own_files_and_copies_only_the_changes() {
    let dir = tempfile::tempdir().expect("dir");
    let mut model = BTreeMap::new();
    {
        let c = open(dir.path());
        create_t(&c);
        load_pages(&c, &mut model);
        c.inner().run_lcp().expect("lcp");
        // After the checkpoint: in node 2's redo only.
        apply(&c, &mut model, "UPDATE t SET v = v + 7 WHERE id >= 39500");
        c.inner().force_gcp().expect("gcp");
        mgm(&c, "2 STOP");
        insert_range(&c, &mut model, 40_000, 40_100);
        apply(&c, &mut model, "DELETE FROM t WHERE id < 50");
        apply(&c, &mut model, "UPDATE t SET v = v + 1 WHERE id >= 39900");
        mgm(&c, "2 START");
        wait_restart_complete(&c, 2);
        let log = cluster_log(&c);
        assert_restored_own_files(&log, 2);
        // 200 rows changed while node 2 was down (40000..40100 inserted,
        // 39900..40100 updated), 50 deleted, the other 39850 unchanged.
        assert_eq!(copy_counts(&log, 2), (200, 39_850, 50), "{log}");
        assert_eq!(replica_rows(&c, 2), model.len() as u64);
        // The checkpoint after the copy continued node 2's chains: partial files on
        // top of the ones it had before its stop, not a full checkpoint.
        for ctl in controls(&c, dir.path(), 2) {
            assert!(ctl.files.len() >= 2, "{ctl:?}");
            assert!(
                !ctl.files.last().expect("file").all_parts.is_full(),
                "{ctl:?}"
            );
        }
        // Node 2 alone serves every row, as the model has them.
        mgm(&c, "3 STOP");
        assert_eq!(contents(&c), model);
        apply(&c, &mut model, "UPDATE t SET v = v - 2 WHERE id >= 30000");
        c.shutdown();
    }
    // A system restart from node 2's files (node 3 stopped) has every row.
    let c = open(dir.path());
    assert_eq!(contents(&c), model);
    wait_restart_complete(&c, 3);
    c.shutdown();
}

/// A local checkpoint round that scans a replica while its node's stop discards it
/// stores nothing in that replica's chain (its file is half rows, half nothing): the
/// node's restart from its own files restores the chain from before the stop.
#[test]
fn a_round_scanning_a_replica_while_its_node_stops_leaves_its_chain_alone() {
    let dir = tempfile::tempdir().expect("dir");
    let mut cfg = super::durability_tests::config();
    // Slow rounds: the stop below lands while node 2's replicas are being scanned.
    cfg.set_data_node_param("MinDiskWriteSpeed", "1M")
        .expect("min");
    cfg.set_data_node_param("MaxDiskWriteSpeed", "1M")
        .expect("max");
    // No round but the test's own.
    cfg.set_data_node_param("TimeBetweenLocalCheckpoints", "31")
        .expect("tblcp");
    let c = super::Cluster::embedded_in(cfg, dir.path().to_path_buf()).expect("start");
    let mut model = BTreeMap::new();
    create_t(&c);
    load_pages(&c, &mut model);
    let first = c.inner().run_lcp().expect("lcp").lcp_id;
    apply(&c, &mut model, "UPDATE t SET v = v + 5 WHERE id >= 0");
    let before: Vec<u32> = controls(&c, dir.path(), 2)
        .iter()
        .map(|x| x.lcp_id)
        .collect();
    assert!(before.iter().all(|&id| id >= first), "{before:?}");
    let round = std::thread::scope(|scope| {
        let round = scope.spawn(|| c.inner().run_lcp());
        // Wait until the round has begun scanning, then stop node 2 under it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let busy = c.inner().lcp_lock.try_lock().is_none();
            let started = cluster_log(&c)
                .lines()
                .filter(|l| l.contains("Node 2: Local checkpoint") && l.contains("started"))
                .count()
                >= 2;
            if busy && started {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "round did not start");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        std::thread::sleep(std::time::Duration::from_millis(150));
        mgm(&c, "2 STOP");
        round.join().expect("round thread")
    });
    let stats = round.expect("round");
    let after: Vec<u32> = controls(&c, dir.path(), 2)
        .iter()
        .map(|x| x.lcp_id)
        .collect();
    // The stop landed while node 2's replicas were scanned (one at a time, paced): a
    // replica scanned to its end before the discard may have a new chain; the one the
    // discard met, or that the round reached after it, keeps its old one.
    assert!(
        after.iter().zip(&before).any(|(a, b)| a == b),
        "every chain of node 2 changed by a round that met its discard: {before:?} -> {after:?}"
    );
    let node3: Vec<u32> = controls(&c, dir.path(), 3)
        .iter()
        .map(|x| x.lcp_id)
        .collect();
    assert!(
        node3.iter().all(|&id| id == stats.lcp_id),
        "{node3:?} {}",
        stats.lcp_id
    );
    apply(&c, &mut model, "DELETE FROM t WHERE id < 100");
    mgm(&c, "2 START");
    wait_restart_complete(&c, 2);
    let log = cluster_log(&c);
    assert_restored_own_files(&log, 2);
    mgm(&c, "3 STOP");
    assert_eq!(contents(&c), model);
    c.shutdown();
}
