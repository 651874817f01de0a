//! Rows of disk-data tables through SQL: the seed's `t1 ... STORAGE DISK`, inserts,
//! reads, updates that grow and shrink the disk record, deletes that give extents back,
//! rollback, the tablespace full (1601 → ERROR 1114) and made room by ADD DATAFILE,
//! BLOB parts on disk, replicas writing their own records, and DROP order.

use super::tests::{error, one, rows, run, session};
use crate::api::Cluster;
use crate::config::ClusterConfig;
use crate::sql::Session;

fn disk_cluster(replicas: u32) -> Cluster {
    let mut cfg = crate::config::small_disk_test_config(2, replicas, "32M");
    cfg.set_data_node_param("TransactionDeadlockDetectionTimeout", "300")
        .expect("timeout");
    Cluster::embedded(cfg).expect("start")
}

const LG: &str = "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=4M UNDO_BUFFER_SIZE=1M ENGINE=NDB";
const T1: &str = "CREATE TABLE t1 (id BIGINT AUTO_INCREMENT PRIMARY KEY, data1 VARCHAR(512), data2 VARCHAR(512)) TABLESPACE ts_1 STORAGE DISK ENGINE=NDB";

fn setup(s: &mut Session, data_size: &str) {
    run(s, LG);
    run(
        s,
        &format!(
            "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE={data_size} EXTENT_SIZE=256K ENGINE=NDB"
        ),
    );
}

/// (free extents, total extents) summed over the data files of every node.
fn extents(s: &mut Session) -> (u64, u64) {
    rows(
        s,
        "select free_extents, total_extents from information_schema.files where file_type='DATAFILE'",
    )
    .iter()
    .fold((0, 0), |(f, t), r| {
        (f + r[0].parse::<u64>().unwrap(), t + r[1].parse::<u64>().unwrap())
    })
}

fn check_fragments(c: &Cluster, table: &str) {
    let ndb = c.ndb("test");
    let t = ndb.table(table).expect("table");
    for cell in t.all_cells() {
        cell.state.lock().check().expect("fragment check");
    }
}

#[test]
fn the_seeds_disk_table_stores_reads_updates_and_deletes_rows() {
    let c = disk_cluster(2);
    let mut s = session(&c);
    setup(&mut s, "8M");
    let (free0, total) = extents(&mut s);
    run(&mut s, T1);
    for i in 0..300 {
        run(
            &mut s,
            &format!(
                "insert into t1 (data1, data2) values ('{}', '{}')",
                "a".repeat(i % 97),
                "b".repeat(300 + i % 200)
            ),
        );
    }
    assert_eq!(one(&mut s, "select count(*) from t1"), "300");
    assert_eq!(
        rows(
            &mut s,
            "select length(data1), length(data2) from t1 where id = 98"
        ),
        vec![vec!["0".to_string(), "397".to_string()]]
    );
    let (free1, _) = extents(&mut s);
    assert!(free1 < free0, "rows took extents: {free0} -> {free1}");
    // Variable-size columns take their actual size: 300 rows of ~0.5 KB fit in far
    // fewer extents than 300 rows of the maximum (1 KB + 2 KB in utf8mb4).
    assert!(free0 - free1 <= 2 * 2, "{free0} -> {free1}");
    // Update that grows (moves the record) and one that shrinks (in place).
    run(
        &mut s,
        &format!("update t1 set data1 = '{}' where id = 5", "x".repeat(500)),
    );
    run(&mut s, "update t1 set data2 = 'short' where id = 6");
    assert_eq!(
        rows(
            &mut s,
            "select length(data1), data2 from t1 where id in (5, 6) order by id"
        ),
        vec![
            vec!["500".to_string(), "b".repeat(304)],
            vec!["5".to_string(), "short".to_string()]
        ]
    );
    // A memory-column-only predicate scan reads disk columns too.
    assert_eq!(
        one(&mut s, "select count(*) from t1 where data2 = 'short'"),
        "1"
    );
    check_fragments(&c, "t1");
    // Delete everything: the extents go back to the tablespace (one kept per fragment).
    run(&mut s, "delete from t1");
    assert_eq!(one(&mut s, "select count(*) from t1"), "0");
    let (free2, total2) = extents(&mut s);
    assert_eq!(total2, total);
    let fragments = c.ndb("test").table("t1").unwrap().all_cells().count() as u64;
    assert!(
        free2 >= free0 - fragments,
        "emptied extents returned: {free0} -> {free2} ({fragments} fragment replicas)"
    );
    check_fragments(&c, "t1");
    // The data file still holds the extents the fragments keep: 770.
    let e = error(&mut s, "ALTER TABLESPACE ts_1 DROP DATAFILE 'data1.dat'");
    assert!(e.contains("770"), "{e}");
    run(&mut s, "truncate table t1");
    assert_eq!(
        extents(&mut s),
        (free0, total),
        "TRUNCATE returns every extent"
    );
    run(
        &mut s,
        "insert into t1 (data1, data2) values ('after', 'truncate')",
    );
    assert_eq!(one(&mut s, "select data2 from t1"), "truncate");
}

#[test]
fn rollback_leaves_no_disk_record_and_reads_see_committed_values() {
    let c = disk_cluster(1);
    let mut s = session(&c);
    setup(&mut s, "4M");
    run(&mut s, T1);
    run(&mut s, "insert into t1 values (1, 'one', 'uno')");
    // Every fragment gets its first extent (which it keeps even when empty).
    for id in 100..140 {
        run(&mut s, &format!("insert into t1 values ({id}, 'x', 'y')"));
    }
    run(&mut s, "delete from t1 where id >= 100");
    let before = extents(&mut s);
    run(&mut s, "begin");
    run(&mut s, "insert into t1 values (2, 'two', 'dos')");
    run(
        &mut s,
        "update t1 set data1 = 'ONE, longer than before' where id = 1",
    );
    assert_eq!(
        one(&mut s, "select data1 from t1 where id = 1"),
        "ONE, longer than before",
        "a transaction sees its own change"
    );
    assert_eq!(one(&mut s, "select data2 from t1 where id = 2"), "dos");
    // Another session sees the committed values only.
    let mut other = session(&c);
    assert_eq!(one(&mut other, "select data1 from t1 where id = 1"), "one");
    run(&mut s, "rollback");
    assert_eq!(one(&mut s, "select data1 from t1 where id = 1"), "one");
    assert_eq!(one(&mut s, "select count(*) from t1"), "1");
    assert_eq!(extents(&mut s), before);
    // Own insert updated then deleted in one transaction, then committed.
    run(&mut s, "begin");
    run(&mut s, "insert into t1 values (3, 'three', 'tres')");
    run(
        &mut s,
        &format!("update t1 set data2 = '{}' where id = 3", "t".repeat(400)),
    );
    run(&mut s, "delete from t1 where id = 1");
    run(&mut s, "commit");
    assert_eq!(
        rows(
            &mut s,
            "select id, data1, length(data2) from t1 order by id"
        ),
        vec![vec![
            "3".to_string(),
            "three".to_string(),
            "400".to_string()
        ]]
    );
    check_fragments(&c, "t1");
}

#[test]
fn a_full_tablespace_is_error_1114_and_adding_a_data_file_makes_room_at_once() {
    let c = disk_cluster(1);
    let mut s = session(&c);
    setup(&mut s, "1M");
    run(&mut s, T1);
    let big = "z".repeat(500);
    let mut inserted = 0;
    let err = loop {
        match s.execute(&format!(
            "insert into t1 (data1, data2) values ('{big}', '{big}')"
        )) {
            Ok(_) => inserted += 1,
            Err(e) => break crate::sql::render_error(&e),
        }
        assert!(inserted < 100_000, "the tablespace never filled");
    };
    assert_eq!(err, "ERROR 1114 (HY000): The table 't1' is full");
    assert!(inserted > 100, "{inserted}");
    // Nothing corrupted: every row reads back.
    assert_eq!(
        one(&mut s, "select count(*) from t1 where length(data2) = 500"),
        inserted.to_string()
    );
    run(
        &mut s,
        "ALTER TABLESPACE ts_1 ADD DATAFILE 'data2.dat' INITIAL_SIZE=2M ENGINE=NDB",
    );
    run(
        &mut s,
        &format!("insert into t1 (data1, data2) values ('{big}', '{big}')"),
    );
    assert_eq!(
        one(&mut s, "select count(*) from t1"),
        (inserted + 1).to_string()
    );
    check_fragments(&c, "t1");
}

#[test]
fn blob_parts_of_a_disk_table_live_on_disk() {
    let c = disk_cluster(1);
    let mut s = session(&c);
    setup(&mut s, "4M");
    run(
        &mut s,
        "create table tb (id int primary key, body text, note varchar(20) storage memory) tablespace ts_1 storage disk",
    );
    let (free0, _) = extents(&mut s);
    let body = "0123456789".repeat(3000);
    run(&mut s, &format!("insert into tb values (1, '{body}', 'n')"));
    assert_eq!(
        one(&mut s, "select length(body) from tb where id = 1"),
        "30000"
    );
    assert_eq!(
        one(&mut s, "select substring(body, 29991, 10) from tb"),
        "0123456789"
    );
    let (free1, _) = extents(&mut s);
    assert!(free1 < free0, "the parts went to disk: {free0} -> {free1}");
}

#[test]
fn replicas_write_their_own_disk_records_and_drop_frees_everything() {
    let c = disk_cluster(2);
    let mut s = session(&c);
    setup(&mut s, "4M");
    let (free0, _) = extents(&mut s);
    run(&mut s, T1);
    run(
        &mut s,
        "insert into t1 (data1, data2) values ('a', 'b'), ('c', 'd')",
    );
    let per_node = rows(
        &mut s,
        "select free_extents from information_schema.files where file_type='DATAFILE' order by 1",
    );
    assert_eq!(per_node.len(), 2);
    assert_eq!(per_node[0], per_node[1], "both replicas hold the rows");
    let e = error(&mut s, "DROP TABLESPACE ts_1");
    assert!(e.contains("768"), "{e}");
    run(&mut s, "drop table t1");
    assert_eq!(extents(&mut s).0, free0, "DROP TABLE returns every extent");
    run(&mut s, "ALTER TABLESPACE ts_1 DROP DATAFILE 'data1.dat'");
    run(&mut s, "DROP TABLESPACE ts_1");
}

#[test]
fn disk_columns_without_a_tablespace_are_refused() {
    let c = disk_cluster(1);
    let mut s = session(&c);
    let e = error(
        &mut s,
        "create table t (a int primary key, b int storage disk)",
    );
    assert!(e.contains("755"), "{e}");
}

#[test]
fn a_disk_full_underneath_the_data_file_is_a_clear_error_and_loses_nothing() {
    use crate::disk::io::{Faults, MemFileSystem};
    let dir = tempfile::tempdir().unwrap();
    let fs = MemFileSystem::new();
    let mut cfg = ClusterConfig::embedded(1, 1).expect("config");
    // Only the data file may grow into the last megabyte: the redo log is allocated
    // at start (InitFragmentLogFiles=full) and no local checkpoint writes files.
    for (k, v) in [
        ("DiskPageBufferMemory", "4M"),
        ("InitFragmentLogFiles", "full"),
        ("NoOfFragmentLogFiles", "3"),
        ("FragmentLogFileSize", "4M"),
        ("TimeBetweenLocalCheckpoints", "31"),
    ] {
        cfg.set_data_node_param(k, v).expect(k);
    }
    let c = Cluster::embedded_on(
        cfg,
        dir.path().to_path_buf(),
        std::sync::Arc::new(fs.clone()),
    )
    .expect("start");
    let mut s = session(&c);
    run(&mut s, LG);
    run(
        &mut s,
        "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=1M EXTENT_SIZE=256K AUTOEXTEND_SIZE=256K ENGINE=NDB",
    );
    run(&mut s, T1);
    // The disk holds what exists now plus 1 MB: the data file autoextends until the
    // disk is full.
    fs.set_faults(Faults {
        capacity_bytes: Some(fs.used_bytes() + (1 << 20)),
        ..Faults::default()
    });
    let big = "q".repeat(400);
    let mut inserted = 0u64;
    let err = loop {
        match s.execute(&format!(
            "insert into t1 (data1, data2) values ('{big}', '{big}')"
        )) {
            Ok(_) => inserted += 1,
            Err(e) => break e,
        }
        assert!(inserted < 100_000, "the disk never filled");
    };
    assert_eq!(err.code, 1601, "{err}");
    assert!(
        err.message.contains("no space left on device"),
        "the reason is told: {err}"
    );
    assert_eq!(
        crate::sql::render_error(&err),
        "ERROR 1114 (HY000): The table 't1' is full"
    );
    assert!(
        inserted > 50,
        "the autoextended extents were used: {inserted}"
    );
    assert_eq!(one(&mut s, "select count(*) from t1"), inserted.to_string());
    assert_eq!(
        one(&mut s, "select count(*) from t1 where data1 = data2"),
        inserted.to_string()
    );
    check_fragments(&c, "t1");
    // Writes failing underneath (EIO): the cleaner's write-backs fail in the background
    // (the pages stay dirty in the cache), statements go on, committed rows stay
    // readable, and once the disk is back everything proceeds.
    fs.set_faults(Faults {
        fail_writes: true,
        ..Faults::default()
    });
    run(&mut s, "delete from t1 where id = 1");
    assert_eq!(
        one(&mut s, "select count(*) from t1"),
        (inserted - 1).to_string()
    );
    fs.set_faults(Faults::default());
    run(&mut s, "delete from t1 where id <= 10");
    assert_eq!(
        one(&mut s, "select count(*) from t1"),
        (inserted - 10).to_string()
    );
    check_fragments(&c, "t1");
}

/// Four writers on their own key ranges sharing fragments, pages and the undo log; a
/// small undo log forces disk checkpoints while others hold pages, a small page cache
/// forces evictions. Must neither deadlock nor lose a row.
#[test]
fn concurrent_writers_with_checkpoints_and_evictions() {
    let mut cfg = ClusterConfig::embedded(2, 2).expect("config");
    cfg.set_data_node_param("DiskPageBufferMemory", "4M")
        .expect("dpb");
    cfg.set_data_node_param("TransactionDeadlockDetectionTimeout", "5000")
        .expect("timeout");
    let c = Cluster::embedded(cfg).expect("start");
    let mut s = session(&c);
    run(
        &mut s,
        "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=1M UNDO_BUFFER_SIZE=256K",
    );
    run(
        &mut s,
        "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=24M EXTENT_SIZE=256K",
    );
    run(&mut s, T1);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let mut s = session(&c);
            let done_tx = done_tx.clone();
            std::thread::spawn(move || {
                let base = 1 + w * 10_000;
                let mut live = std::collections::BTreeSet::new();
                for i in 0..6000u64 {
                    let id = base + i % 4000;
                    let text = "w".repeat(((i * 37 + w * 11) % 500) as usize);
                    let sql = if live.contains(&id) && i % 3 == 0 {
                        live.remove(&id);
                        format!("delete from t1 where id = {id}")
                    } else if live.contains(&id) {
                        format!("update t1 set data2 = '{text}' where id = {id}")
                    } else {
                        live.insert(id);
                        format!("insert into t1 values ({id}, '{text}', '{text}')")
                    };
                    if let Err(e) = s.execute(&sql) {
                        panic!("{sql}: {e}");
                    }
                }
                let _ = done_tx.send(w);
                live.len() as u64
            })
        })
        .collect();
    drop(done_tx);
    for _ in 0..4 {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("a writer is stuck: deadlock");
    }
    let expected: u64 = workers.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(one(&mut s, "select count(*) from t1"), expected.to_string());
    let checkpoints: u64 = c
        .inner()
        .data_nodes
        .iter()
        .map(|n| n.disk.undo_checkpoints())
        .sum();
    assert!(checkpoints > 0, "the small undo log was checkpointed");
    let evicted: u64 = c
        .inner()
        .data_nodes
        .iter()
        .map(|n| n.disk.pgman.stats().pages_read)
        .sum();
    assert!(evicted > 0, "pages were evicted and read back");
    check_fragments(&c, "t1");
}

#[test]
fn show_create_table_prints_the_disk_options_and_runs_again() {
    let c = disk_cluster(1);
    let mut s = session(&c);
    setup(&mut s, "4M");
    run(
        &mut s,
        "CREATE TABLE t1 (id BIGINT AUTO_INCREMENT PRIMARY KEY, data1 VARCHAR(512), data2 VARCHAR(512) STORAGE MEMORY, body TEXT) TABLESPACE ts_1 STORAGE DISK ENGINE=NDB",
    );
    let show = |s: &mut Session| rows(s, "SHOW CREATE TABLE t1")[0][1].clone();
    let text = show(&mut s);
    assert_eq!(
        text,
        "CREATE TABLE `t1` (\n  `id` bigint NOT NULL AUTO_INCREMENT,\n  `data1` varchar(512) DEFAULT NULL,\n  `data2` varchar(512) /*!50120 STORAGE MEMORY */ DEFAULT NULL,\n  `body` text,\n  PRIMARY KEY (`id`)\n) /*!50100 TABLESPACE `ts_1` STORAGE DISK */ ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
    );
    run(&mut s, "DROP TABLE t1");
    run(&mut s, &text);
    assert_eq!(show(&mut s), text, "the statement round-trips");
    let t = c.ndb("test").table("t1").unwrap();
    let disk: Vec<bool> = (0..t.def.columns.len())
        .map(|i| t.def.layout.is_disk(i))
        .collect();
    assert_eq!(
        disk,
        vec![false, true, false, false],
        "id, data1, data2, body head"
    );
    assert!(
        t.blob_tables[3]
            .as_ref()
            .is_some_and(|p| p.def.layout.has_disk()),
        "the TEXT parts on disk"
    );
}
