//! SQL that changes rows over TCP (`remote_sql`, `datapath::sql_capture`): the change
//! reaches every replica through a TC, the statement's result is its own, concurrent
//! statements on the same row lose no update, and a statement's error changes nothing;
//! several node groups: `datapath_sql_groups_tests.rs`.

use super::datapath::DataPath;
use super::datapath_tests::{DB, cluster};
use crate::schema::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The rows of `table` in a data node's own replicas: id -> every other column as text.
fn replica_rows(dp: &DataPath, table: &str) -> BTreeMap<i64, Vec<String>> {
    let ndb = dp.engine.ndb(DB);
    let mut s = crate::sql::Session::new(ndb);
    let results = s
        .execute(&format!("SELECT * FROM {table} ORDER BY 1"))
        .expect("local select");
    let Some(crate::sql::SqlResult::Rows { rows, .. }) = results.into_iter().last() else {
        panic!("no rows result");
    };
    rows.into_iter()
        .map(|r| {
            let id = r[0].as_i128().expect("int key") as i64;
            let rest = r[1..]
                .iter()
                .map(|v| match v {
                    Value::Null => "NULL".to_string(),
                    Value::Str(s) => s.clone(),
                    v => v
                        .as_i128()
                        .map_or_else(|| format!("{v:?}"), |i| i.to_string()),
                })
                .collect();
            (id, rest)
        })
        .collect()
}

#[test]
fn insert_update_replace_and_delete_over_tcp_reach_every_replica() {
    let (_m, nodes, api) = cluster(2, 2);
    api.sql(
        DB,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL, n INT, \
         UNIQUE KEY uv (v)) ENGINE=NDB",
    )
    .expect("create");
    let out = api
        .sql(
            DB,
            "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)",
        )
        .expect("insert");
    assert!(out.contains("3 rows affected"), "{out}");
    let out = api
        .sql(DB, "UPDATE t SET n = n + 1 WHERE id >= 2")
        .expect("update");
    assert!(out.contains("2 rows affected"), "{out}");
    api.sql(DB, "DELETE FROM t WHERE id = 1").expect("delete");
    api.sql(DB, "REPLACE INTO t VALUES (3, 'z', 99)")
        .expect("replace");
    api.sql(DB, "INSERT INTO t (id, v) VALUES (4, 'd')")
        .expect("default n");
    let want: BTreeMap<i64, Vec<String>> = [
        (2, vec!["b".to_string(), "21".to_string()]),
        (3, vec!["z".to_string(), "99".to_string()]),
        (4, vec!["d".to_string(), "NULL".to_string()]),
    ]
    .into_iter()
    .collect();
    for n in &nodes {
        let dp = n.data().expect("data path");
        assert_eq!(replica_rows(&dp, "t"), want, "node {}", n.node_id);
    }
    // The statement's own errors, with nothing changed: a duplicate key, a duplicate
    // in the unique index, a bad value.
    let e = api
        .sql(DB, "INSERT INTO t VALUES (2, 'q', 1)")
        .expect_err("duplicate key");
    assert_eq!(e.code, 630, "{e}");
    let e = api
        .sql(DB, "UPDATE t SET v = 'b' WHERE id = 4")
        .expect_err("unique");
    assert_eq!(e.code, 893, "{e}");
    let e = api
        .sql(DB, "UPDATE t SET n = 'x' WHERE id = 4")
        .expect_err("bad value");
    assert_ne!(e.code, 0, "{e}");
    let out = api
        .sql(DB, "UPDATE t SET n = 5 WHERE id = 99")
        .expect("no row");
    assert!(out.contains("0 rows affected"), "{out}");
    for n in &nodes {
        let dp = n.data().expect("data path");
        assert_eq!(replica_rows(&dp, "t"), want, "node {}", n.node_id);
    }
    // The unique index follows the rows on every replica: 'z' is taken, 'c' is free.
    let e = api
        .sql(DB, "INSERT INTO t VALUES (5, 'z', 0)")
        .expect_err("z taken");
    assert_eq!(e.code, 893, "{e}");
    api.sql(DB, "INSERT INTO t VALUES (5, 'c', 0)")
        .expect("c is free again");
    // RemoteCluster::sql keeps no session: BEGIN is refused with the reason.
    let e = api.sql(DB, "BEGIN").expect_err("begin");
    assert_eq!(e.code, 4003, "{e}");
    assert!(
        e.to_string().contains("each statement runs on its own"),
        "{e}"
    );
}

#[test]
fn concurrent_increments_over_tcp_lose_no_update() {
    let (_m, nodes, api) = cluster(2, 2);
    api.sql(
        DB,
        "CREATE TABLE c (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=NDB",
    )
    .expect("create");
    api.sql(DB, "INSERT INTO c VALUES (1, 0), (2, 0)")
        .expect("insert");
    const THREADS: i64 = 4;
    const EACH: i64 = 15;
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let api = api.clone();
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    api.sql(DB, "UPDATE c SET n = n + 1 WHERE id IN (1, 2)")
                        .expect("increment");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    let total = (THREADS * EACH).to_string();
    for n in &nodes {
        let dp = n.data().expect("data path");
        let rows = replica_rows(&dp, "c");
        assert_eq!(rows[&1], vec![total.clone()], "node {}", n.node_id);
        assert_eq!(rows[&2], vec![total.clone()], "node {}", n.node_id);
    }
}

#[test]
fn text_columns_and_auto_increment_over_tcp() {
    let (_m, nodes, api) = cluster(2, 2);
    api.sql(
        DB,
        "CREATE TABLE d (id INT AUTO_INCREMENT PRIMARY KEY, body TEXT) ENGINE=NDB",
    )
    .expect("create");
    let long: String = (0..6000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    api.sql(
        DB,
        &format!("INSERT INTO d (body) VALUES ('{long}'), ('short')"),
    )
    .expect("insert");
    api.sql(DB, "INSERT INTO d (body) VALUES ('third')")
        .expect("insert third");
    api.sql(DB, "UPDATE d SET body = CONCAT(body, '!') WHERE id = 1")
        .expect("update text");
    api.sql(DB, "DELETE FROM d WHERE id = 2").expect("delete");
    let want: BTreeMap<i64, Vec<String>> = [
        (1, vec![format!("{long}!")]),
        (3, vec!["third".to_string()]),
    ]
    .into_iter()
    .collect();
    for n in &nodes {
        let dp = n.data().expect("data path");
        assert_eq!(replica_rows(&dp, "d"), want, "node {}", n.node_id);
    }
}

#[test]
fn sql_increments_over_tcp_survive_a_killed_data_node() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (_m, mut nodes, api) = cluster(2, 2);
    api.sql(
        DB,
        "CREATE TABLE c (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=NDB",
    )
    .expect("create");
    api.sql(DB, "INSERT INTO c VALUES (1, 0)").expect("insert");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (api, stop) = (api.clone(), stop.clone());
        std::thread::spawn(move || {
            // (acknowledged increments, increments whose outcome is unknown, errors)
            let (mut acked, mut unknown, mut errors) = (0i64, 0i64, Vec::new());
            while !stop.load(Ordering::Acquire) {
                match api.sql(DB, "UPDATE c SET n = n + 1 WHERE id = 1") {
                    Ok(text) => {
                        assert!(text.contains("1 row affected"), "{text}");
                        acked += 1;
                    }
                    Err(e) => {
                        assert!(
                            e.is_temporary() || e.code == 4012 || e.code == 4009,
                            "only temporary errors under a node failure, got {e}"
                        );
                        if e.code == 4012 {
                            unknown += 1;
                        }
                        errors.push(e.code);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
            }
            (acked, unknown, errors)
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(400));
    let victim = nodes.remove(0);
    victim.kill();
    let survivor = &nodes[0];
    super::process_tests::wait_until("the survivor alone in its view", 10, || {
        survivor.status().view.node_ids() == vec![survivor.node_id]
    });
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Release);
    let (acked, unknown, errors) = writer.join().expect("writer");
    assert!(acked > 20, "the statements went on: {acked} acknowledged");
    let dp = survivor.data().expect("data path");
    let n: i64 = replica_rows(&dp, "c")[&1][0].parse().expect("n");
    assert!(
        (acked..=acked + unknown).contains(&n),
        "n = {n}: {acked} acknowledged, {unknown} unknown; errors {errors:?}"
    );
}
