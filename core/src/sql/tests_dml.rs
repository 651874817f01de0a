//! Tests of INSERT / REPLACE / UPDATE / DELETE, transactions, statement batching and the
//! seeds' DML (the 000 growth loop until the table is full, the 001 batched deletes).

use super::tests::*;
use super::*;
use crate::config::ClusterConfig;

#[test]
fn insert_variants_and_counts() {
    let c = cluster(1, 1, "32M");
    let mut s = session(&c);
    run(
        &mut s,
        "create table t (id int not null auto_increment primary key, n int not null default 0, b varchar(4), d datetime, unique key ub (b))",
    );
    match run(&mut s, "insert into t (n, b) values (1, 'a')") {
        SqlResult::Affected {
            rows,
            last_insert_id,
            info,
        } => {
            assert_eq!((rows, last_insert_id, info), (1, Some(1), None));
        }
        other => panic!("{other:?}"),
    }
    match run(
        &mut s,
        "insert into t (n, b) values (2, 'b'), (3, 'c'), (4, NULL)",
    ) {
        SqlResult::Affected {
            rows,
            last_insert_id,
            info,
        } => {
            assert_eq!(rows, 3);
            assert_eq!(last_insert_id, Some(2));
            assert_eq!(
                info.as_deref(),
                Some("Records: 3  Duplicates: 0  Warnings: 0")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(one(&mut s, "select last_insert_id()"), "2");
    assert_eq!(
        rows(&mut s, "select * from t order by id"),
        strs(&[
            &["1", "1", "a", "NULL"],
            &["2", "2", "b", "NULL"],
            &["3", "3", "c", "NULL"],
            &["4", "4", "NULL", "NULL"]
        ])
    );
    // explicit auto-increment values move the counter
    affected(
        &mut s,
        "insert into t values (10, 5, 'x', '2020-01-02 03:04:05')",
    );
    affected(&mut s, "insert into t (n) values (6)");
    assert_eq!(one(&mut s, "select max(id) from t"), "11");
    assert_eq!(
        one(&mut s, "select d from t where id = 10"),
        "2020-01-02 03:04:05"
    );
    // DEFAULT and omitted columns
    affected(&mut s, "insert into t (id, n) values (20, default)");
    assert_eq!(one(&mut s, "select n from t where id = 20"), "0");
    // duplicates
    assert_eq!(
        error(&mut s, "insert into t (id, n) values (1, 1)"),
        "ERROR 1062 (23000): Duplicate entry '1' for key 'PRIMARY'"
    );
    assert_eq!(
        error(&mut s, "insert into t (n, b) values (9, 'a')"),
        "ERROR 1062 (23000): Duplicate entry 'a' for key 'ub'"
    );
    // the failing multi-row statement left nothing behind
    assert_eq!(
        error(
            &mut s,
            "insert into t (id, n) values (30, 1), (31, 1), (1, 1)"
        ),
        "ERROR 1062 (23000): Duplicate entry '1' for key 'PRIMARY'"
    );
    assert_eq!(one(&mut s, "select count(*) from t where id >= 30"), "0");
    // INSERT IGNORE
    match run(
        &mut s,
        "insert ignore into t (id, n) values (1, 1), (32, 1), (33, 1)",
    ) {
        SqlResult::Affected { rows, info, .. } => {
            assert_eq!(rows, 2);
            assert_eq!(
                info.as_deref(),
                Some("Records: 3  Duplicates: 1  Warnings: 1")
            );
        }
        other => panic!("{other:?}"),
    }
    affected(
        &mut s,
        "insert ignore into t (id, n, b) values (40, 99999999999, 'toolong')",
    );
    assert_eq!(
        rows(&mut s, "select n, b from t where id = 40"),
        strs(&[&["2147483647", "tool"]])
    );
    // ON DUPLICATE KEY UPDATE
    assert_eq!(
        affected(
            &mut s,
            "insert into t (id, n) values (1, 5) on duplicate key update n = n + values(n)"
        ),
        2
    );
    assert_eq!(one(&mut s, "select n from t where id = 1"), "6");
    assert_eq!(
        affected(
            &mut s,
            "insert into t (id, n) values (1, 6) on duplicate key update n = values(n)"
        ),
        0
    );
    assert_eq!(
        affected(
            &mut s,
            "insert into t (id, n) values (50, 6) on duplicate key update n = 7"
        ),
        1
    );
    // REPLACE: NDB's write (1 per row)
    assert_eq!(
        affected(
            &mut s,
            "replace into t (id, n, b) values (50, 8, 'r'), (51, 9, 's')"
        ),
        2
    );
    assert_eq!(
        rows(&mut s, "select id, n, b from t where id >= 50 order by id"),
        strs(&[&["50", "8", "r"], &["51", "9", "s"]])
    );
    // errors
    assert_eq!(
        error(&mut s, "insert into t (id, nope) values (1, 1)"),
        "ERROR 1054 (42S22): Unknown column 'nope' in 'field list'"
    );
    assert_eq!(
        error(&mut s, "insert into t (id, n) values (1)"),
        "ERROR 1136 (21S01): Column count doesn't match value count at row 1"
    );
    assert_eq!(
        error(&mut s, "insert into t (id, n) values (60, 1), (61, 1, 2)"),
        "ERROR 1136 (21S01): Column count doesn't match value count at row 2"
    );
    assert_eq!(
        error(&mut s, "insert into t (id, n) values (62, 1), (63, null)"),
        "ERROR 1048 (23000): Column 'n' cannot be null"
    );
    assert_eq!(
        error(&mut s, "insert into t (id, b) values (64, 'abcde')"),
        "ERROR 1406 (22001): Data too long for column 'b' at row 1"
    );
    assert_eq!(
        error(
            &mut s,
            "insert into t (id, n) values (64, 1), (65, 3000000000)"
        ),
        "ERROR 1264 (22003): Out of range value for column 'n' at row 2"
    );
    assert_eq!(
        error(&mut s, "insert into t (id, n) values (64, 'abc')"),
        "ERROR 1366 (HY000): Incorrect integer value: 'abc' for column 'n' at row 1"
    );
    assert_eq!(
        error(&mut s, "insert into t (id, d) values (64, 'not a date')"),
        "ERROR 1292 (22007): Incorrect datetime value: 'not a date' for column 'd' at row 1"
    );
    assert_eq!(
        one(&mut s, "select count(*) from t where id between 60 and 65"),
        "0"
    );
    run(
        &mut s,
        "create table req (a int primary key, b int not null)",
    );
    assert_eq!(
        error(&mut s, "insert into req (a) values (1)"),
        "ERROR 1364 (HY000): Field 'b' doesn't have a default value"
    );
    run(&mut s, "insert into req set a = 2, b = 3");
    assert_eq!(one(&mut s, "select b from req where a = 2"), "3");
}

#[test]
fn update_and_delete() {
    let c = cluster(2, 2, "32M");
    let mut s = session(&c);
    run(
        &mut s,
        "create table t (id int primary key, a int, b varchar(10), key ia (a))",
    );
    let values: Vec<String> = (1..=20)
        .map(|i| format!("({i}, {}, 'b{i}')", i % 4))
        .collect();
    run(
        &mut s,
        &format!("insert into t values {}", values.join(",")),
    );
    match run(&mut s, "update t set b = 'x' where id = 1") {
        SqlResult::Affected { rows, info, .. } => {
            assert_eq!(rows, 1);
            assert_eq!(
                info.as_deref(),
                Some("Rows matched: 1  Changed: 1  Warnings: 0")
            );
        }
        other => panic!("{other:?}"),
    }
    match run(&mut s, "update t set b = 'x' where id = 1") {
        SqlResult::Affected { rows, info, .. } => {
            assert_eq!(rows, 0);
            assert_eq!(
                info.as_deref(),
                Some("Rows matched: 1  Changed: 0  Warnings: 0")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(affected(&mut s, "update t set a = a + 10 where a = 1"), 5);
    assert_eq!(one(&mut s, "select count(*) from t where a = 11"), "5");
    assert_eq!(
        affected(
            &mut s,
            "update t set a = 0 where a = 11 order by id desc limit 2"
        ),
        2
    );
    assert_eq!(
        rows(
            &mut s,
            "select id from t where a = 0 and id > 10 order by id"
        ),
        strs(&[&["12"], &["13"], &["16"], &["17"], &["20"]])
    );
    // assignments see earlier ones, as in MySQL
    affected(&mut s, "update t set a = 100, b = a where id = 2");
    assert_eq!(
        rows(&mut s, "select a, b from t where id = 2"),
        strs(&[&["100", "100"]])
    );
    // primary key change: delete + insert
    assert_eq!(
        affected(&mut s, "update t set id = id + 100 where id = 3"),
        1
    );
    assert_eq!(
        rows(&mut s, "select id, b from t where id in (3, 103)"),
        strs(&[&["103", "b3"]])
    );
    assert_eq!(
        error(&mut s, "update t set id = 4 where id = 5"),
        "ERROR 1062 (23000): Duplicate entry '4' for key 'PRIMARY'"
    );
    assert_eq!(one(&mut s, "select count(*) from t where id = 5"), "1");
    assert_eq!(
        error(&mut s, "update t set b = 'way too long' where id = 5"),
        "ERROR 1406 (22001): Data too long for column 'b' at row 1"
    );
    assert_eq!(
        error(&mut s, "update t set nope = 1"),
        "ERROR 1054 (42S22): Unknown column 'nope' in 'field list'"
    );
    // DELETE
    assert_eq!(affected(&mut s, "delete from t where id = 103"), 1);
    assert_eq!(affected(&mut s, "delete from t where id = 103"), 0);
    assert_eq!(
        affected(&mut s, "delete from t where a = 0 order by id limit 2"),
        2
    );
    assert_eq!(
        rows(&mut s, "select id from t where a = 0 order by id"),
        strs(&[&["12"], &["13"], &["16"], &["17"], &["20"]])
    );
    assert_eq!(affected(&mut s, "delete from t limit 3"), 3);
    assert_eq!(one(&mut s, "select count(*) from t"), "14");
    assert_eq!(affected(&mut s, "delete from t"), 14);
    assert_eq!(one(&mut s, "select count(*) from t"), "0");
    // TRUNCATE resets AUTO_INCREMENT
    run(
        &mut s,
        "create table ai (id int auto_increment primary key, v text)",
    );
    run(&mut s, "insert into ai (v) values ('a'), ('b')");
    run(&mut s, "truncate table ai");
    run(&mut s, "insert into ai (v) values (repeat('z', 10000))");
    assert_eq!(
        rows(&mut s, "select id, length(v) from ai"),
        strs(&[&["1", "10000"]])
    );
    run(&mut s, "update ai set v = concat(v, 'y') where id = 1");
    assert_eq!(one(&mut s, "select right(v, 2) from ai"), "zy");
}

#[test]
fn transactions() {
    let c = cluster(2, 2, "32M");
    let mut a = session(&c);
    let mut b = session(&c);
    run(&mut a, "create table t (id int primary key, v int)");
    run(&mut a, "insert into t values (1, 10), (2, 20)");
    run(&mut a, "BEGIN");
    assert!(a.in_transaction());
    run(&mut a, "insert into t values (3, 30)");
    run(&mut a, "update t set v = 11 where id = 1");
    assert_eq!(
        one(&mut a, "select count(*) from t"),
        "3",
        "own writes visible"
    );
    assert_eq!(one(&mut a, "select v from t where id = 1"), "11");
    assert_eq!(
        one(&mut b, "select count(*) from t"),
        "2",
        "others see committed rows"
    );
    assert_eq!(one(&mut b, "select v from t where id = 1"), "10");
    run(&mut a, "ROLLBACK");
    assert!(!a.in_transaction());
    assert_eq!(one(&mut a, "select count(*) from t"), "2");
    assert_eq!(one(&mut a, "select v from t where id = 1"), "10");
    run(
        &mut a,
        "start transaction; delete from t where id = 2; commit",
    );
    assert_eq!(one(&mut b, "select count(*) from t"), "1");
    // autocommit=0
    run(&mut a, "set autocommit = 0");
    run(&mut a, "insert into t values (5, 50)");
    assert_eq!(one(&mut b, "select count(*) from t where id = 5"), "0");
    run(&mut a, "commit");
    assert_eq!(one(&mut b, "select count(*) from t where id = 5"), "1");
    run(&mut a, "set autocommit = 1");
    // an error in a transaction rolls it back (NDB has no statement rollback)
    run(&mut a, "begin");
    run(&mut a, "insert into t values (6, 60)");
    assert_eq!(
        error(&mut a, "insert into t values (6, 61)"),
        "ERROR 1062 (23000): Duplicate entry '6' for key 'PRIMARY'"
    );
    run(&mut a, "commit");
    assert_eq!(one(&mut b, "select count(*) from t where id = 6"), "0");
    // a parse error does not end the transaction
    run(&mut a, "begin");
    run(&mut a, "insert into t values (7, 70)");
    assert!(error(&mut a, "selec 1").starts_with("ERROR 1064 (42000)"));
    run(&mut a, "commit");
    assert_eq!(one(&mut b, "select count(*) from t where id = 7"), "1");
}

#[test]
fn locking_reads_and_lock_timeouts() {
    let c = cluster(1, 1, "16M");
    let mut a = session(&c);
    let mut b = session(&c);
    run(&mut a, "create table t (id int primary key, v int)");
    run(&mut a, "insert into t values (1, 10), (2, 20)");
    run(&mut a, "begin");
    assert_eq!(one(&mut a, "select v from t where id = 1 for update"), "10");
    let start = std::time::Instant::now();
    assert_eq!(
        error(&mut b, "update t set v = 0 where id = 1"),
        "ERROR 1205 (HY000): Lock wait timeout exceeded; try restarting transaction"
    );
    assert!(start.elapsed() >= std::time::Duration::from_millis(300));
    // committed reads do not wait; other rows are free
    assert_eq!(one(&mut b, "select v from t where id = 1"), "10");
    assert_eq!(affected(&mut b, "update t set v = 21 where id = 2"), 1);
    run(&mut a, "commit");
    assert_eq!(affected(&mut b, "update t set v = 11 where id = 1"), 1);
    // shared locks: readers share, writers wait
    run(&mut a, "begin");
    assert_eq!(
        one(&mut a, "select v from t where id = 1 lock in share mode"),
        "11"
    );
    run(&mut b, "begin");
    assert_eq!(
        one(&mut b, "select v from t where id = 1 lock in share mode"),
        "11"
    );
    run(&mut b, "rollback");
    let e = error(&mut b, "delete from t where id = 1");
    assert!(e.starts_with("ERROR 1205"), "{e}");
    run(&mut a, "rollback");
    assert_eq!(affected(&mut b, "delete from t where id = 1"), 1);
}

fn cluster_with_max_ops(max_ops: &str) -> crate::api::Cluster {
    let mut cfg = ClusterConfig::embedded(1, 1).expect("config");
    cfg.set_data_node_param("DataMemory", "32M")
        .expect("DataMemory");
    cfg.set_data_node_param("MaxNoOfConcurrentTransactions", "32")
        .expect("MaxNoOfConcurrentTransactions");
    cfg.set_data_node_param("MaxNoOfConcurrentOperations", max_ops)
        .expect("MaxNoOfConcurrentOperations");
    cfg.set_data_node_param("TransactionDeadlockDetectionTimeout", "300")
        .expect("timeout");
    crate::api::Cluster::embedded(cfg).expect("start")
}

#[test]
fn large_statements_commit_in_batches() {
    let c = cluster_with_max_ops("100");
    let mut s = session(&c);
    assert_eq!(s.max_operations(), 100);
    run(&mut s, "create table t (id int primary key)");
    // at most MaxNoOfConcurrentOperations rows: one transaction, all or nothing
    let mut vals: Vec<String> = (1..=99).map(|i| format!("({i})")).collect();
    vals.push("(50)".into());
    let e = error(&mut s, &format!("insert into t values {}", vals.join(",")));
    assert_eq!(
        e,
        "ERROR 1062 (23000): Duplicate entry '50' for key 'PRIMARY'"
    );
    assert_eq!(one(&mut s, "select count(*) from t"), "0");
    // more rows: committed every 100 rows, like mysqld
    let mut vals: Vec<String> = (1..=250).map(|i| format!("({i})")).collect();
    vals.push("(7)".into());
    assert!(
        error(&mut s, &format!("insert into t values {}", vals.join(",")))
            .starts_with("ERROR 1062")
    );
    assert_eq!(one(&mut s, "select count(*) from t"), "200");
    assert_eq!(affected(&mut s, "delete from t"), 200);
    // with ndb_use_transactions=0 batches are 1000 rows
    run(&mut s, "set ndb_use_transactions=0");
    assert_eq!(s.batch_rows(), 1000);
    let vals: Vec<String> = (1..=2500).map(|i| format!("({i})")).collect();
    assert_eq!(
        affected(&mut s, &format!("insert into t values {}", vals.join(","))),
        2500
    );
    assert_eq!(affected(&mut s, "delete from t limit 1200"), 1200);
    assert_eq!(one(&mut s, "select count(*) from t"), "1300");
    // inside a transaction the limit is an error (NDB's 233), and the transaction ends
    run(&mut s, "set ndb_use_transactions=1");
    run(&mut s, "begin");
    let e = error(&mut s, "delete from t");
    assert!(e.contains("Got error 233"), "{e}");
    assert!(s.in_transaction());
    run(&mut s, "commit");
    assert_eq!(one(&mut s, "select count(*) from t"), "1300");
}

#[test]
fn seed_000_table_full_growth_loop() {
    let c = cluster(1, 1, "24M");
    let mut s = session(&c);
    // the seed's table, in memory until disk data exists
    run(
        &mut s,
        "create table t1(a char(255)) engine=ndb storage memory",
    );
    run(&mut s, "insert into t1(a) values ('a')");
    let mut n: u64 = 1;
    let err = loop {
        match s.execute("insert into t1(a) select a from t1 limit 4096") {
            Ok(r) => {
                let added = n.min(4096);
                assert_eq!(
                    r,
                    vec![SqlResult::Affected {
                        rows: added,
                        last_insert_id: None,
                        info: Some(format!("Records: {added}  Duplicates: 0  Warnings: 0")),
                    }]
                );
                n += added;
            }
            Err(e) => break e,
        }
        assert!(n < 10_000_000, "DataMemory never filled");
    };
    assert_eq!(
        render_error(&err),
        "ERROR 1114 (HY000): The table 't1' is full"
    );
    assert!(n > 4096, "grew past one batch: {n}");
    // the failed statement left nothing behind
    assert_eq!(one(&mut s, "select count(*) from t1"), n.to_string());
    assert_eq!(affected(&mut s, "delete from t1 limit 4096"), 4096);
    let r = run(&mut s, "insert into t1 (a) select a from t1 limit 4096");
    assert_eq!(
        render(&r, std::time::Duration::from_millis(170)),
        "Query OK, 4096 rows affected (0.17 sec)\nRecords: 4096  Duplicates: 0  Warnings: 0"
    );
    assert_eq!(one(&mut s, "select count(*) from t1"), n.to_string());
    // a second table cannot get memory either
    run(&mut s, "create table t2(a char(255)) engine=ndb");
    let mut full = None;
    for _ in 0..1000 {
        if let Err(e) = s.execute("insert into t2 (a) values ('aaaa')") {
            full = Some(e);
            break;
        }
    }
    if let Some(e) = full {
        assert_eq!(
            render_error(&e),
            "ERROR 1114 (HY000): The table 't2' is full"
        );
    }
}

#[test]
fn seed_000_random_primary_key_reads() {
    let c = cluster(2, 2, "64M");
    let mut s = session(&c);
    run(
        &mut s,
        "CREATE TABLE `t1` (
`id` bigint(20) NOT NULL AUTO_INCREMENT,
`data1` varchar(512) DEFAULT NULL,
`data2` varchar(512) DEFAULT NULL,
PRIMARY KEY (`id`)
) ENGINE=ndbcluster STORAGE MEMORY ENGINE=ndbcluster",
    );
    let vals: Vec<String> = (0..2000).map(|i| format!("('d1-{i}', 'd2-{i}')")).collect();
    assert_eq!(
        affected(
            &mut s,
            &format!("insert into t1 (data1, data2) values {}", vals.join(","))
        ),
        2000
    );
    let before = scans(&s, "t1");
    for _ in 0..200 {
        let r = s
            .execute("SET @x=FLOOR(1 + (RAND() * 2000));  SELECT * FROM t1 WHERE id=@x")
            .expect("bencher statements");
        assert_eq!(r.len(), 2);
        let SqlResult::Rows { rows, .. } = &r[1] else {
            panic!("not rows: {r:?}");
        };
        assert_eq!(rows.len(), 1);
        let id = eval::to_text(&rows[0][0]).unwrap_or_default();
        assert_eq!(
            rows[0][1],
            Value::Str(format!("d1-{}", id.parse::<u64>().unwrap_or(0) - 1))
        );
    }
    assert_eq!(
        scans(&s, "t1"),
        before,
        "random reads are primary-key reads"
    );
}

#[test]
fn seed_001_batched_deletes() {
    let c = cluster(2, 2, "64M");
    let mut s = session(&c);
    run(
        &mut s,
        "CREATE TABLE `t5` (
`id` varchar(32) CHARACTER SET utf8 NOT NULL,
`name` varchar(32) NOT NULL DEFAULT '',
`unit` int(11) DEFAULT NULL,
PRIMARY KEY (`id`,`name`)
) ENGINE=ndbcluster DEFAULT CHARSET=latin1",
    );
    run(
        &mut s,
        "CREATE TABLE `t6` ( `id` varchar(32) CHARACTER SET utf8 NOT NULL, `name` varchar(32) NOT NULL DEFAULT '', c0 int unsigned not null, c1 int unsigned not null, data2 varchar(255), `unit` int(11) DEFAULT NULL, PRIMARY KEY (`id`,`name`) ) ENGINE=ndbcluster DEFAULT CHARSET=latin1;",
    );
    for chunk in 0..5 {
        let vals: Vec<String> = (0..1000)
            .map(|i| format!("('id-ü-{chunk}-{i}', 'n{i}', {i})"))
            .collect();
        run(&mut s, &format!("insert into t5 values {}", vals.join(",")));
    }
    assert_eq!(one(&mut s, "select count(*) from t5"), "5000");
    assert_eq!(
        one(
            &mut s,
            "select unit from t5 where id = 'id-ü-3-7' and name = 'n7'"
        ),
        "7"
    );
    run(&mut s, "set ndb_use_transactions=0");
    for left in [4000, 3000, 2000, 1000, 0] {
        let r = run(&mut s, "delete from t5 limit 1000");
        assert_eq!(
            render(&r, std::time::Duration::from_millis(2730)),
            "Query OK, 1000 rows affected (2.73 sec)"
        );
        assert_eq!(one(&mut s, "select count(*) from t5"), left.to_string());
    }
    assert_eq!(affected(&mut s, "delete from t5 limit 1000"), 0);
    let r = rows(&mut s, "optimize table t5");
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        r[1],
        strs(&[&["test.t5", "optimize", "status", "OK"]])[0],
        "{r:?}"
    );
    let r = rows(&mut s, "analyze table t5");
    assert_eq!(
        r,
        strs(&[&[
            "test.t5",
            "analyze",
            "note",
            "The storage engine for the table doesn't support analyze"
        ]])
    );
}

/// Inside a transaction that has written, a range on an ordered index still sees the
/// transaction's own uncommitted inserts (the plan falls back to a table scan), and
/// ORDER BY still sorts.
#[test]
fn own_inserts_visible_to_index_ranges_in_a_transaction() {
    let c = cluster(1, 1, "16M");
    let mut a = session(&c);
    run(
        &mut a,
        "create table r (id int primary key, k int, index ix_k (k))",
    );
    run(&mut a, "insert into r values (1, 10), (2, 20), (3, 30)");
    assert!(
        a.explain("select id from r where k between 15 and 35")
            .expect("explain")
            .contains("ix_k")
    );
    run(&mut a, "BEGIN");
    run(&mut a, "insert into r values (4, 25)");
    run(&mut a, "update r set k = 5 where id = 3");
    assert_eq!(
        rows(
            &mut a,
            "select id, k from r where k between 5 and 26 order by k desc"
        ),
        strs(&[&["4", "25"], &["2", "20"], &["1", "10"], &["3", "5"]])
    );
    assert_eq!(
        affected(&mut a, "delete from r where k between 24 and 26"),
        1
    );
    run(&mut a, "ROLLBACK");
    assert_eq!(
        rows(&mut a, "select id from r where k >= 25 order by k"),
        strs(&[&["3"]])
    );
}

/// IGNORE, ON DUPLICATE KEY UPDATE and REPLACE on a unique-index conflict do what
/// MySQL does: skip the row, update the row holding the value (the primary key's row
/// first), delete the holders; within one statement too; NULLs never conflict.
#[test]
fn ignore_upsert_and_replace_resolve_unique_index_conflicts() {
    let c = cluster(2, 2, "32M");
    let mut s = session(&c);
    run(
        &mut s,
        "create table u (id int primary key, email varchar(20), n int, unique key ue (email))",
    );
    run(&mut s, "insert into u values (1, 'a', 0), (2, 'b', 0)");
    let all = |s: &mut Session| rows(s, "select id, email, n from u order by id");
    // IGNORE: the row holding 'a' stays, the conflicting row is skipped.
    match run(
        &mut s,
        "insert ignore into u values (3, 'a', 1), (4, 'c', 1)",
    ) {
        SqlResult::Affected { rows, info, .. } => {
            assert_eq!(rows, 1);
            assert_eq!(
                info.as_deref(),
                Some("Records: 2  Duplicates: 1  Warnings: 1")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        all(&mut s),
        strs(&[&["1", "a", "0"], &["2", "b", "0"], &["4", "c", "1"]])
    );
    // ON DUPLICATE KEY UPDATE: the holder of 'b' is updated (2 affected, MySQL's count).
    assert_eq!(
        affected(
            &mut s,
            "insert into u values (5, 'b', 9) on duplicate key update n = n + 10"
        ),
        2
    );
    // The primary key's row first, when both conflict.
    assert_eq!(
        affected(
            &mut s,
            "insert into u values (1, 'b', 9) on duplicate key update n = 77"
        ),
        2
    );
    assert_eq!(
        all(&mut s),
        strs(&[&["1", "a", "77"], &["2", "b", "10"], &["4", "c", "1"]])
    );
    // REPLACE: the holder of 'c' (row 4) goes, row 6 comes.
    assert_eq!(affected(&mut s, "replace into u values (6, 'c', 5)"), 2);
    // Row 1 takes 'b' from row 2: row 2 goes, row 1 is rewritten.
    assert_eq!(affected(&mut s, "replace into u values (1, 'b', 3)"), 2);
    assert_eq!(all(&mut s), strs(&[&["1", "b", "3"], &["6", "c", "5"]]));
    // Within one statement, and NULLs (no entry, never a conflict).
    assert_eq!(
        affected(
            &mut s,
            "insert ignore into u values (10, 'z', 0), (11, 'z', 0), (20, NULL, 0), (21, NULL, 0)"
        ),
        3
    );
    assert_eq!(
        rows(&mut s, "select id from u where id >= 10 order by id"),
        strs(&[&["10"], &["20"], &["21"]])
    );
    // In a transaction: a rolled-back REPLACE leaves the holder.
    run(&mut s, "begin");
    assert_eq!(affected(&mut s, "replace into u values (30, 'z', 0)"), 2);
    run(&mut s, "rollback");
    assert_eq!(one(&mut s, "select id from u where email = 'z'"), "10");
    // Without IGNORE a unique conflict is still MySQL's 1062.
    let e = error(&mut s, "insert into u values (31, 'z', 0)");
    assert!(
        e.contains("1062") && e.contains("Duplicate entry 'z'"),
        "{e}"
    );
    // The hidden index agrees with the table: every email found by its index.
    for (id, email) in [("1", "b"), ("6", "c"), ("10", "z")] {
        assert_eq!(
            one(&mut s, &format!("select id from u where email = '{email}'")),
            id
        );
    }
}
