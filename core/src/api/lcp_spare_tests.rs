//! Tests of the LCP round's spare data files (step 6 of `lcp.rs`): made once a round
//! is complete, written by the next round, moved on by an idle round, and gone after a
//! system restart, a DROP TABLE and an initial start.

use super::*;
use crate::config::ClusterConfig;
use crate::disk::io::{FileSystem, MemFileSystem};
use crate::schema::{Column, ColumnType, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DATA_DIR: &str = "/data";

fn config() -> ClusterConfig {
    let mut c = ClusterConfig::embedded(2, 2).expect("config");
    for (k, v) in [
        ("DataMemory", "16M"),
        ("NoOfFragmentLogFiles", "3"),
        ("FragmentLogFileSize", "4M"),
        ("RedoBuffer", "4M"),
        ("TimeBetweenLocalCheckpoints", "31"),
    ] {
        c.set_data_node_param(k, v).expect(k);
    }
    c
}

fn spec(name: &str) -> TableSpec {
    TableSpec::new(
        name,
        vec![
            Column::new(
                "id",
                ColumnType::Int {
                    bytes: 4,
                    unsigned: true,
                },
            )
            .primary_key(),
            Column::new(
                "v",
                ColumnType::Int {
                    bytes: 8,
                    unsigned: false,
                },
            ),
        ],
    )
}

fn start(fs: &MemFileSystem, initial: bool) -> Cluster {
    Cluster {
        inner: ClusterInner::start_on(
            config(),
            Some(DATA_DIR.into()),
            initial,
            Arc::new(fs.clone()),
        )
        .expect("start"),
    }
}

fn insert(c: &Cluster, table: &str, keys: std::ops::Range<u64>, v: i64) {
    let ndb = c.ndb("test");
    let t = ndb.table(table).expect("table");
    let rows = keys.map(|k| vec![Value::UInt(k), Value::Int(v)]).collect();
    ndb.insert_batch(&t, &[0, 1], rows).expect("insert");
}

fn count(c: &Cluster, table: &str) -> usize {
    let ndb = c.ndb("test");
    let t = ndb.table(table).expect("table");
    let mut tx = ndb.start_transaction().expect("tx");
    let mut s = tx.scan(ScanSpec::table(t)).expect("scan");
    let mut n = 0;
    while tx.scan_next(&mut s).expect("next").is_some() {
        n += 1;
    }
    n
}

/// The `.data` files under an LCP directory of table `table_id`, with their lengths.
fn data_files(fs: &MemFileSystem, table_id: u32) -> Vec<(PathBuf, u64)> {
    fs.paths()
        .into_iter()
        .filter(|p| {
            p.to_string_lossy().contains(&format!("/LCP/T{table_id}F"))
                && p.extension().is_some_and(|e| e == "data")
        })
        .map(|p| {
            let len = fs
                .open(&p)
                .and_then(|f| f.len_bytes())
                .expect("length of a data file");
            (p, len)
        })
        .collect()
}

/// The empty `.data` files (spares) of table `table_id`, by LCP id.
fn spare_ids(fs: &MemFileSystem, table_id: u32) -> Vec<u32> {
    let mut ids: Vec<u32> = data_files(fs, table_id)
        .into_iter()
        .filter(|(_, len)| *len == 0)
        .filter_map(|(p, _)| p.file_stem()?.to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn spare_count(fs: &MemFileSystem, table_id: u32) -> usize {
    data_files(fs, table_id)
        .into_iter()
        .filter(|(_, len)| *len == 0)
        .count()
}

#[test]
fn an_lcp_writes_into_the_spares_its_predecessor_made() {
    let fs = MemFileSystem::new();
    let c = start(&fs, false);
    let id = c.ndb("test").create_table(spec("t")).expect("t").def.id;
    insert(&c, "t", 0..2000, 1);
    let full = c.inner().run_lcp().expect("full lcp");
    assert_eq!(full.spares_used, 0, "{full:?}");
    // one spare per fragment replica that wrote, named by the next LCP's id
    assert_eq!(spare_count(&fs, id) as u64, full.fragments, "{full:?}");
    assert_eq!(spare_ids(&fs, id), vec![full.lcp_id + 1]);
    // every fragment changes: each writes into its spare
    insert(&c, "t", 2000..4000, 2);
    let partial = c.inner().run_lcp().expect("partial lcp");
    assert_eq!(partial.lcp_id, full.lcp_id + 1);
    assert!(partial.fragments > 0);
    assert_eq!(partial.spares_used, partial.fragments, "{partial:?}");
    assert_eq!(spare_ids(&fs, id), vec![partial.lcp_id + 1]);
    // an idle round moves the unused spares on to the next id, none is left behind
    let idle = c.inner().run_lcp().expect("idle lcp");
    assert_eq!(idle.fragments, 0, "{idle:?}");
    assert_eq!(spare_ids(&fs, id), vec![idle.lcp_id + 1]);
    assert_eq!(spare_count(&fs, id) as u64, partial.fragments);
    insert(&c, "t", 4000..6000, 3);
    let next = c.inner().run_lcp().expect("lcp after the idle one");
    assert_eq!(next.spares_used, next.fragments, "{next:?}");
    // the spares stay out of every chain: a crash now restores exactly the rows
    let image = fs.crash_image(11);
    drop(c);
    let c = start(&image, false);
    assert_eq!(count(&c, "t"), 6000);
    // a restart removes them as orphans
    assert_eq!(spare_count(&image, id), 0);
    insert(&c, "t", 6000..6100, 4);
    let after = c.inner().run_lcp().expect("lcp after the restart");
    assert_eq!(after.spares_used, 0, "{after:?}");
    c.shutdown();
}

#[test]
fn a_dropped_table_keeps_no_spare() {
    let fs = MemFileSystem::new();
    let c = start(&fs, false);
    let ndb = c.ndb("test");
    let t2 = ndb.create_table(spec("t2")).expect("t2").def.id;
    let t3 = ndb.create_table(spec("t3")).expect("t3").def.id;
    insert(&c, "t2", 0..500, 1);
    insert(&c, "t3", 0..500, 1);
    c.inner().run_lcp().expect("lcp");
    assert!(spare_count(&fs, t2) > 0 && spare_count(&fs, t3) > 0);
    assert!(ndb.drop_table("t2", false).expect("drop"));
    // the next round removes every file of the dropped table, its spares with them,
    // and makes none for it
    insert(&c, "t3", 500..600, 2);
    c.inner().run_lcp().expect("lcp after the drop");
    assert!(data_files(&fs, t2).is_empty(), "{:?}", data_files(&fs, t2));
    assert!(
        !fs.paths()
            .iter()
            .any(|p| p.to_string_lossy().contains(&format!("/LCP/T{t2}F"))),
        "{:?}",
        fs.paths()
    );
    assert!(spare_count(&fs, t3) > 0);
    c.shutdown();
}

#[test]
fn an_initial_start_removes_every_checkpoint_file() {
    let fs = MemFileSystem::new();
    let c = start(&fs, false);
    let id = c.ndb("test").create_table(spec("t")).expect("t").def.id;
    insert(&c, "t", 0..1000, 1);
    c.inner().run_lcp().expect("lcp");
    insert(&c, "t", 1000..1500, 2);
    c.inner().run_lcp().expect("lcp");
    assert!(spare_count(&fs, id) > 0);
    c.shutdown();
    drop(c);
    let c = start(&fs, true);
    let lcp_roots: Vec<PathBuf> = c
        .inner()
        .data_nodes
        .iter()
        .map(|n| {
            crate::checkpoint::lcp_root(&super::durability::node_fs_dir(
                Path::new(DATA_DIR),
                n.node_id,
            ))
        })
        .collect();
    for root in &lcp_roots {
        assert!(
            !fs.exists(root),
            "{} left by an initial start",
            root.display()
        );
    }
    assert!(
        !fs.paths()
            .iter()
            .any(|p| p.to_string_lossy().contains("/LCP/")),
        "{:?}",
        fs.paths()
    );
    // the same table id again: its checkpoints start from nothing (no chain nor data
    // file of the earlier run in the way)
    let id2 = c.ndb("test").create_table(spec("t")).expect("t").def.id;
    assert_eq!(id2, id);
    insert(&c, "t", 0..10, 3);
    let first = c
        .inner()
        .run_lcp()
        .expect("first lcp after the initial start");
    assert_eq!(first.rows, 2 * 10, "{first:?}");
    c.shutdown();
    drop(c);
    let c = start(&fs, false);
    assert_eq!(count(&c, "t"), 10);
    c.shutdown();
}

/// A round asked for by the node's own restart (`request_lcp`: the LCP driver runs it
/// at once) is paced at MaxDiskWriteSpeedOwnRestart; once it has completed, the rounds
/// after it are paced between MinDiskWriteSpeed and MaxDiskWriteSpeed again.
#[test]
fn a_requested_round_runs_at_the_own_restart_speed_then_the_normal_ones_again() {
    let fs = MemFileSystem::new();
    let c = start(&fs, false);
    c.ndb("test").create_table(spec("t")).expect("t");
    insert(&c, "t", 0..100, 1);
    let inner = &c.inner;
    let next = inner.lcp_next_id.load(std::sync::atomic::Ordering::Acquire);
    assert_eq!(inner.own_restart_speed(), None);
    let ticket = inner.request_lcp();
    assert_eq!(ticket, next);
    assert_eq!(inner.own_restart_speed(), Some(200 << 20));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !inner.lcp_completed_since(ticket) {
        assert!(
            std::time::Instant::now() < deadline,
            "the requested LCP did not run"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let later = inner.lcp_next_id.load(std::sync::atomic::Ordering::Acquire);
    assert!(later > ticket);
    assert_eq!(inner.own_restart_speed(), None);
}
