//! Disk-data DDL through SQL: logfile group, tablespaces, data files on every data
//! node, information_schema.FILES and the ndbinfo disk tables, NDB's errors, and the
//! initial start that removes the files.

use super::tests::{cluster, error, one, rows, run, session};
use crate::api::Cluster;
use crate::config::ClusterConfig;
use std::path::Path;

fn cluster_in(dir: &Path, initial: bool) -> Cluster {
    let cfg = crate::config::small_disk_test_config(2, 2, "16M");
    if initial {
        Cluster::embedded_initial(cfg, dir.to_path_buf()).expect("start")
    } else {
        Cluster::embedded_in(cfg, dir.to_path_buf()).expect("start")
    }
}

const LG: &str = "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=2M UNDO_BUFFER_SIZE=1M ENGINE=NDB";
const TS: &str = "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=5M EXTENT_SIZE=1M ENGINE=NDB";
// The seed's spelling: information_schema compares case-insensitively, as MySQL's.
const FREE: &str =
    "select free_extents, total_extents from information_schema.files where file_type='datafile'";

#[test]
fn the_seeds_objects_are_created_on_every_node_and_shown_in_files() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cluster_in(tmp.path(), false);
    let mut s = session(&c);
    run(&mut s, LG);
    run(&mut s, TS);
    for node in c.data_node_ids() {
        let fs = tmp.path().join(format!("ndb_{node}_fs"));
        assert!(fs.join("undo1.dat").is_file(), "node {node} undo file");
        let data = fs.join("data1.dat");
        assert!(data.is_file(), "node {node} data file");
        // INITIAL_SIZE rounded down to whole extents after the header pages.
        let len = std::fs::metadata(&data).unwrap().len();
        assert!((4 << 20..=5 << 20).contains(&len), "{len}");
    }
    // The seed's query: one row per data node.
    let r = rows(&mut s, FREE);
    assert!(r.len() == 2 && r[0][1] == r[1][1], "{r:?}");
    let total: u64 = r[0][1].parse().unwrap();
    assert!((4..=5).contains(&total), "5M with its header pages: {r:?}");
    run(
        &mut s,
        "ALTER TABLESPACE ts_1 ADD DATAFILE 'data_2.dat' INITIAL_SIZE 3M ENGINE NDBCLUSTER",
    );
    let r = rows(&mut s, FREE);
    assert_eq!(r.len(), 4, "{r:?}");
    assert_eq!(
        one(
            &mut s,
            "select count(*) from information_schema.files where file_type='UNDO LOG' and logfile_group_name='lg'"
        ),
        "2"
    );
    assert_eq!(
        rows(
            &mut s,
            "select node_id, log_type, log_part, total > 0, used <= total from ndbinfo.logspaces where log_type = 'DD-UNDO' order by node_id"
        ),
        c.data_node_ids()
            .iter()
            .map(|n| vec![
                n.to_string(),
                "DD-UNDO".into(),
                "0".into(),
                "1".into(),
                "1".into()
            ])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        one(
            &mut s,
            "select count(*) from ndbinfo.logbuffers where total = 1048576"
        ),
        "2"
    );
    assert_eq!(
        one(
            &mut s,
            "select count(*) from ndbinfo.files where type = 'Data file'"
        ),
        "2"
    );
    // diskpagebuffer with NDB's columns; the seed's hit-ratio query runs as written.
    run(&mut s, "USE ndbinfo");
    assert_eq!(
        rows(
            &mut s,
            "SELECT node_id, 100*(sum(page_requests_direct_return)/(sum(page_requests_direct_return)+sum(page_requests_wait_io))) as hit_ratio_pct FROM diskpagebuffer GROUP BY node_id"
        )
        .len(),
        2
    );
    assert_eq!(
        one(
            &mut s,
            &format!(
                "select count(*) from diskpagebuffer_advice where node_id = {}",
                c.data_node_ids()[0]
            )
        ),
        crate::ndbinfo::ADVICE_SIZES_MB.len().to_string()
    );
    run(&mut s, "USE test");
    // Drop order: the logfile group is in use by the tablespace.
    assert!(
        error(&mut s, "DROP LOGFILE GROUP lg ENGINE NDB").contains("768"),
        "drop order"
    );
    run(
        &mut s,
        "ALTER TABLESPACE ts_1 DROP DATAFILE 'data_2.dat' ENGINE NDB",
    );
    run(
        &mut s,
        "ALTER TABLESPACE ts_1 DROP DATAFILE 'data1.dat' ENGINE NDB",
    );
    run(&mut s, "DROP TABLESPACE ts_1 ENGINE NDB");
    run(&mut s, "DROP LOGFILE GROUP lg ENGINE NDB");
    for node in c.data_node_ids() {
        let fs = tmp.path().join(format!("ndb_{node}_fs"));
        assert!(!fs.join("undo1.dat").exists());
        assert!(!fs.join("data1.dat").exists());
        assert!(!fs.join("data_2.dat").exists());
    }
    assert_eq!(rows(&mut s, FREE).len(), 0);
}

#[test]
fn bad_disk_ddl_gets_ndbs_errors_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cluster_in(tmp.path(), false);
    let mut s = session(&c);
    // A tablespace on a missing logfile group.
    assert!(error(&mut s, TS).contains("789"), "{}", error(&mut s, TS));
    // An undo buffer larger than SharedGlobalMemory (20M here).
    let e = error(
        &mut s,
        "CREATE LOGFILE GROUP lg ADD UNDOFILE 'u.dat' INITIAL_SIZE=2M UNDO_BUFFER_SIZE=64M",
    );
    assert!(e.contains("1504"), "{e}");
    assert!(
        !tmp.path()
            .join(format!("ndb_{}_fs/u.dat", c.data_node_ids()[0]))
            .exists()
    );
    run(&mut s, LG);
    let e = error(
        &mut s,
        "CREATE LOGFILE GROUP lg2 ADD UNDOFILE 'u2.dat' INITIAL_SIZE=2M",
    );
    assert!(e.contains("1514"), "{e}");
    // INITIAL_SIZE smaller than one extent: the extent size does not fit the file.
    let e = error(
        &mut s,
        "CREATE TABLESPACE ts ADD DATAFILE 'd.dat' USE LOGFILE GROUP lg INITIAL_SIZE=256K EXTENT_SIZE=1M",
    );
    assert!(e.contains("764"), "{e}");
    let ids = c.data_node_ids();
    let fs = |i: usize, f: &str| tmp.path().join(format!("ndb_{}_fs/{f}", ids[i]));
    assert!(!fs(0, "d.dat").exists());
    assert!(!fs(1, "d.dat").exists());
    // A data file path that exists (on the second node only: the first is rolled back).
    std::fs::write(fs(1, "taken.dat"), b"x").unwrap();
    let e = error(
        &mut s,
        "CREATE TABLESPACE ts ADD DATAFILE 'taken.dat' USE LOGFILE GROUP lg INITIAL_SIZE=2M",
    );
    assert!(e.contains("760"), "{e}");
    assert!(!fs(0, "taken.dat").exists(), "rolled back");
    assert_eq!(std::fs::read(fs(1, "taken.dat")).unwrap(), b"x");
    // Same name as the logfile group: one namespace.
    let e = error(
        &mut s,
        "CREATE TABLESPACE lg ADD DATAFILE 'x.dat' USE LOGFILE GROUP lg INITIAL_SIZE=2M",
    );
    assert!(e.contains("already exists"), "{e}");
    run(&mut s, TS);
    // A table in a tablespace that does not exist.
    let e = error(
        &mut s,
        "create table t1(a int primary key, b char(255)) tablespace nope storage disk",
    );
    assert!(e.contains("755"), "{e}");
    // An index on an explicit disk column.
    let e = error(
        &mut s,
        "create table t2(a int primary key, b int storage disk, key(b)) tablespace ts_1",
    );
    assert!(e.contains("756"), "{e}");
    // A table in the tablespace without disk columns lives in memory.
    run(
        &mut s,
        "create table t3(a int primary key, b int) tablespace ts_1",
    );
    run(&mut s, "insert into t3 values (1, 2)");
    assert_eq!(one(&mut s, "select b from t3 where a = 1"), "2");
    let e = error(&mut s, "DROP TABLESPACE nope");
    assert!(e.contains("767"), "{e}");
    let e = error(&mut s, "ALTER TABLESPACE ts_1 DROP DATAFILE 'nope.dat'");
    assert!(e.contains("766"), "{e}");
    assert_eq!(rows(&mut s, FREE).len(), 2, "nothing changed");
}

#[test]
fn an_initial_start_removes_the_files_an_earlier_run_created() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let c = cluster_in(tmp.path(), false);
        let mut s = session(&c);
        run(&mut s, LG);
        run(&mut s, TS);
        c.shutdown();
    }
    let ids = ClusterConfig::embedded(2, 2)
        .unwrap()
        .data_nodes
        .iter()
        .map(|n| n.node_id)
        .collect::<Vec<_>>();
    let files: Vec<String> = ids
        .iter()
        .flat_map(|n| {
            [
                format!("ndb_{n}_fs/undo1.dat"),
                format!("ndb_{n}_fs/data1.dat"),
            ]
        })
        .collect();
    for f in &files {
        assert!(tmp.path().join(f).exists(), "{f}");
    }
    // A file the user put there is not ours: it stays.
    let mine = tmp.path().join(format!("ndb_{}_fs/mine.txt", ids[0]));
    std::fs::write(&mine, b"keep").unwrap();
    let c = cluster_in(tmp.path(), true);
    let mut removed: Vec<String> = c
        .inner()
        .initial_removed
        .iter()
        .map(|p| {
            p.strip_prefix(tmp.path())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    removed.sort();
    let mut want = files.clone();
    want.sort();
    assert_eq!(removed, want);
    for f in &files {
        assert!(!tmp.path().join(f).exists(), "{f} left behind");
    }
    assert!(mine.exists());
    // And the same statements work again (NDB: "you will get an error").
    let mut s = session(&c);
    run(&mut s, LG);
    run(&mut s, TS);
}

#[test]
fn a_cluster_without_data_directory_keeps_its_files_in_a_private_directory() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    run(&mut s, LG);
    let files = c.inner().disk_files();
    assert_eq!(files.len(), 1);
    assert!(files[0].exists());
    c.shutdown();
    assert!(!files[0].exists(), "removed with the cluster");
}
