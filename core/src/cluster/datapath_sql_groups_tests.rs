//! SQL over TCP in a cluster of two node groups (4 data nodes, NoOfReplicas=2): each
//! data node holds one group's partitions, so a SELECT of a table is run by the API
//! node over every group (`remote_select.rs`), and a statement that changes rows is
//! captured on every group (`remote_sql_groups.rs`). Every statement's rendered result
//! and the rows it leaves must equal the embedded cluster's.

use super::datapath::DataPath;
use super::datapath_tests::{DB, cluster};
use super::remote::RemoteCluster;
use crate::schema::Value;
use crate::transport::data::{KeyOp, OpType};
use std::sync::Arc;

const ROWS: i64 = 240;
const CREATE: &str = "CREATE TABLE t (id INT PRIMARY KEY, g VARCHAR(10) NOT NULL, n INT, \
                      body TEXT, KEY ix_n (n)) ENGINE=NDB";

/// Row `id`: (g, n, body).
fn row(id: i64) -> (String, Option<i64>, String) {
    let n = (id % 17 != 0).then_some((id * 37) % 101);
    let body = if id % 50 == 0 {
        (0..3000)
            .map(|i| char::from(b'a' + ((i + id) % 26) as u8))
            .collect()
    } else {
        format!("b{id}")
    };
    (format!("g{}", id % 5), n, body)
}

fn local_rows(dp: &DataPath, table: &str) -> u64 {
    dp.engine
        .inner()
        .table(DB, table)
        .map(|t| t.row_count())
        .unwrap_or(0)
}

/// The rendered result without its timing ("(0.00 sec)").
pub(super) fn untimed(text: &str) -> String {
    text.lines()
        .map(|l| match l.rfind(" (") {
            Some(i) if l.ends_with(" sec)") => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn load_over_tcp(api: &Arc<RemoteCluster>) {
    api.sql(DB, CREATE).expect("create");
    api.sql(DB, "CREATE TABLE nopk (v INT) ENGINE=NDB")
        .expect("create nopk");
    let ids: Vec<i64> = (1..=ROWS).collect();
    for chunk in ids.chunks(60) {
        let ops = chunk
            .iter()
            .map(|&id| {
                let (g, n, body) = row(id);
                KeyOp {
                    op: OpType::Insert,
                    database: DB.into(),
                    table: "t".into(),
                    key: vec![Value::Int(id)],
                    values: vec![
                        (1, Value::Str(g)),
                        (2, n.map_or(Value::Null, Value::Int)),
                        (3, Value::Str(body)),
                    ],
                    columns: Vec::new(),
                }
            })
            .collect();
        api.execute(ops).expect("insert");
    }
}

fn load_embedded() -> (crate::api::Cluster, crate::sql::Session) {
    let c = crate::sql::tests::cluster(2, 2, "64M");
    let mut s = crate::sql::tests::session(&c);
    crate::sql::tests::run(&mut s, CREATE);
    crate::sql::tests::run(&mut s, "CREATE TABLE nopk (v INT) ENGINE=NDB");
    let values: Vec<String> = (1..=ROWS)
        .map(|id| {
            let (g, n, body) = row(id);
            let n = n.map_or("NULL".to_string(), |n| n.to_string());
            format!("({id}, '{g}', {n}, '{body}')")
        })
        .collect();
    crate::sql::tests::run(
        &mut s,
        &format!("INSERT INTO t VALUES {}", values.join(", ")),
    );
    (c, s)
}

#[test]
fn selects_over_two_node_groups_read_every_group_and_match_the_embedded_cluster() {
    let (_m, nodes, api) = cluster(4, 2);
    load_over_tcp(&api);
    // The rows are spread over both groups: a SELECT that read one would differ.
    let by_node: Vec<u64> = nodes
        .iter()
        .map(|n| local_rows(&n.data().expect("data path"), "t"))
        .collect();
    assert!(by_node[0] > 0 && by_node[2] > 0, "{by_node:?}");
    assert_eq!(by_node[0] + by_node[2], ROWS as u64, "{by_node:?}");
    let (_c, mut local) = load_embedded();
    for q in [
        "SELECT * FROM t ORDER BY id",
        "SELECT id, n FROM t WHERE id = 7",
        "SELECT id, g FROM t WHERE id IN (3, 140, 77, 999) ORDER BY id",
        "SELECT id, n FROM t WHERE n BETWEEN 10 AND 30 ORDER BY n, id",
        "SELECT id, n FROM t WHERE n > 90 ORDER BY n DESC, id LIMIT 4",
        "SELECT n FROM t WHERE n IS NOT NULL ORDER BY n LIMIT 3 OFFSET 2",
        "SELECT COUNT(*), SUM(n), MIN(n), MAX(n), AVG(n) FROM t",
        "SELECT g, COUNT(*) AS c, SUM(n) FROM t GROUP BY g HAVING c > 10 ORDER BY g",
        "SELECT DISTINCT g FROM t ORDER BY g DESC",
        "SELECT COUNT(*) FROM t WHERE n IS NULL",
        "SELECT id, LENGTH(body), SUBSTRING(body, 1, 5) FROM t WHERE id % 50 = 0 ORDER BY id",
        "SELECT x.id FROM t AS x WHERE x.g = 'g3' AND x.id < 40 ORDER BY x.id",
        "SELECT COUNT(*) FROM t WHERE id > 1000",
        "SELECT * FROM t WHERE 1 = 0",
        "SELECT COUNT(*) FROM nopk",
        "SELECT id FROM test.t WHERE id < 4 ORDER BY id FOR UPDATE",
        "SELECT id FROM t WHERE g LIKE 'g%' AND n % 7 = 3 ORDER BY id",
        "SELECT id, g FROM t WHERE UPPER(g) = 'G2' AND body LIKE 'b1%' ORDER BY id DESC LIMIT 5",
        "SELECT COUNT(*) FROM t WHERE CASE WHEN n IS NULL THEN 'none' ELSE g END = 'none'",
        "SELECT id FROM t WHERE id < 6 AND RAND() < 2 ORDER BY id",
        "SELECT id, n FROM t WHERE n > 40 AND n < 45 AND g IN ('g1', 'g3') ORDER BY n, id",
    ] {
        let expected = match local.execute(q) {
            Ok(r) => crate::sql::render(&r[0], std::time::Duration::ZERO),
            Err(e) => panic!("{q} (embedded): {e}"),
        };
        let got = api.sql(DB, q).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(untimed(&got), untimed(&expected), "{q}");
    }
    // LIMIT without ORDER BY: any 5 rows, but 5.
    let got = api.sql(DB, "SELECT id FROM t LIMIT 5").expect("limit");
    assert!(got.contains("5 rows in set"), "{got}");
}

#[test]
fn statements_other_than_table_selects_run_at_a_node_and_errors_keep_their_codes() {
    let (_m, _nodes, api) = cluster(4, 2);
    api.sql(DB, CREATE).expect("create");
    let got = api.sql(DB, "SELECT 1 + 1 AS two").expect("no table");
    assert!(got.contains("| two |") && got.contains("|   2 |"), "{got}");
    let got = api.sql(DB, "SHOW TABLES").expect("show");
    assert!(got.contains("| t "), "{got}");
    let got = api
        .sql(DB, "EXPLAIN SELECT * FROM t WHERE id = 1")
        .expect("explain");
    assert!(got.to_ascii_lowercase().contains("primary"), "{got}");
    let got = api
        .sql(DB, "SELECT COUNT(*) AS nodes FROM ndbinfo.nodes")
        .expect("ndbinfo");
    assert!(got.contains("1 row in set"), "{got}");
    // Errors as the embedded cluster's session reports them.
    let (_c, mut local) = load_embedded();
    for (db, q) in [
        (DB, "SELECT * FROM missing"),
        (DB, "SELECT nope FROM t"),
        (DB, "SELECT id FROM t ORDER BY nope"),
        ("", "SELECT * FROM t"),
    ] {
        if db.is_empty() {
            local = crate::sql::Session::new(_c.ndb(""));
        }
        let expected = local.execute(q).expect_err(q);
        let got = api.sql(db, q).expect_err(q);
        assert_eq!(got.code, expected.code, "{q}: {got}");
        assert_eq!(
            crate::sql::render_error(&got),
            crate::sql::render_error(&expected),
            "{q}"
        );
    }
}

/// The rows of `table` on each data node, as text, in id order.
fn node_rows(nodes: &[super::ndbd::DataNodeProcess], table: &str) -> Vec<Vec<Vec<String>>> {
    nodes
        .iter()
        .map(|n| {
            let dp = n.data().expect("data path");
            let mut s = crate::sql::Session::new(dp.engine.ndb(DB));
            crate::sql::tests::rows(&mut s, &format!("SELECT * FROM {table} ORDER BY 1"))
        })
        .collect()
}

#[test]
fn changes_over_two_node_groups_match_the_embedded_cluster_on_every_replica() {
    let (_m, nodes, api) = cluster(4, 2);
    let c = crate::sql::tests::cluster(2, 2, "64M");
    let mut local = crate::sql::tests::session(&c);
    let values: Vec<String> = (1..=40)
        .map(|id| format!("({id}, 'g{}', {}, 'b{id}')", id % 4, id * 3))
        .collect();
    let insert = format!("INSERT INTO t VALUES {}", values.join(", "));
    let statements = [
        CREATE,
        insert.as_str(),
        "UPDATE t SET n = n + 1 WHERE id % 3 = 0",
        "UPDATE t SET g = 'x' WHERE n > 60",
        "UPDATE t SET body = CONCAT(body, '!') WHERE g = 'g1' ORDER BY id",
        "DELETE FROM t WHERE id BETWEEN 10 AND 20",
        "REPLACE INTO t VALUES (1, 'r', 1, 'one'), (200, 'r', 2, 'two'), (2, 'r', 3, 'three')",
        "INSERT IGNORE INTO t (id, g) VALUES (3, 'dup'), (300, 'new'), (4, 'dup'), (301, 'new')",
        "INSERT INTO t (id, g) VALUES (400, 'a') ON DUPLICATE KEY UPDATE g = 'odku'",
        "INSERT INTO t (id, g) VALUES (400, 'a') ON DUPLICATE KEY UPDATE g = 'odku'",
        "UPDATE t SET id = id + 1000 WHERE id IN (5, 6, 7)",
        "DELETE FROM t WHERE id > 100000",
        "UPDATE t SET n = 0 WHERE id = 99999",
        "INSERT INTO t (id, g) VALUES (41, 'single')",
        "UPDATE t SET n = -1 WHERE n > 50 ORDER BY n DESC, id LIMIT 3",
        "DELETE FROM t WHERE g = 'g1' ORDER BY id LIMIT 2",
        "UPDATE t SET n = 7 ORDER BY id LIMIT 0",
        "DELETE FROM t WHERE id > 100000 ORDER BY id LIMIT 5",
        "UPDATE t SET body = 'limited' ORDER BY id DESC LIMIT 4",
        "INSERT INTO t SELECT id + 5000, g, n, body FROM t WHERE id < 30",
        "INSERT IGNORE INTO t (id, g) SELECT id + 5000, 'again' FROM t WHERE id < 40 AND id <> 22",
        "REPLACE INTO t (id, g, n) SELECT id, 'replaced', n * 2 FROM t WHERE id BETWEEN 5001 AND 5004",
        "INSERT INTO t (id, g) SELECT 9000, 'no table'",
    ];
    for q in statements {
        let expected = match local.execute(q) {
            Ok(r) => crate::sql::render(&r[0], std::time::Duration::ZERO),
            Err(e) => panic!("{q} (embedded): {e}"),
        };
        let got = api.sql(DB, q).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(untimed(&got), untimed(&expected), "{q}");
    }
    // A statement's own error, as the embedded cluster reports it; nothing changed.
    for q in [
        "INSERT INTO t (id, g) VALUES (500, 'new'), (41, 'dup')",
        "UPDATE t SET g = NULL WHERE id = 1",
    ] {
        let expected = local.execute(q).expect_err(q);
        let got = api.sql(DB, q).expect_err(q);
        assert_eq!(
            crate::sql::render_error(&got),
            crate::sql::render_error(&expected),
            "{q}"
        );
    }
    let all = "SELECT * FROM t ORDER BY id";
    let want = crate::sql::tests::rows(&mut local, all);
    assert_eq!(
        untimed(&api.sql(DB, all).expect("select")),
        untimed(&crate::sql::render(
            &local.execute(all).expect("select").remove(0),
            std::time::Duration::ZERO
        ))
    );
    // Replicas of a group are identical, and the groups together hold every row once.
    let per_node = node_rows(&nodes, "t");
    assert_eq!(per_node[0], per_node[1], "node group 0's replicas");
    assert_eq!(per_node[2], per_node[3], "node group 1's replicas");
    assert!(!per_node[0].is_empty() && !per_node[2].is_empty());
    let mut union: Vec<Vec<String>> = per_node[0].iter().chain(&per_node[2]).cloned().collect();
    union.sort_by_key(|r| r[0].parse::<i64>().expect("id"));
    assert_eq!(union, want);
    // A statement's error changes nothing: a duplicate from an INSERT ... SELECT.
    let q = "INSERT INTO t (id, g) SELECT id, 'dup' FROM t WHERE id = 1";
    let e = api.sql(DB, q).expect_err(q);
    assert_eq!(e.code, 630, "{q}: {e}");
    assert_eq!(node_rows(&nodes, "t"), per_node);
}

#[test]
fn auto_increment_values_over_two_node_groups_are_unique_and_every_row_lands() {
    let (_m, nodes, api) = cluster(4, 2);
    api.sql(
        DB,
        "CREATE TABLE a (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL) ENGINE=NDB",
    )
    .expect("create");
    const STATEMENTS: i64 = 6;
    const PER: i64 = 7;
    for s in 0..STATEMENTS {
        let values: Vec<String> = (0..PER).map(|i| format!("({})", s * PER + i)).collect();
        let out = api
            .sql(
                DB,
                &format!("INSERT INTO a (v) VALUES {}", values.join(", ")),
            )
            .expect("insert");
        assert!(out.contains(&format!("{PER} rows affected")), "{out}");
        assert!(
            out.contains(&format!("Records: {PER}  Duplicates: 0")),
            "{out}"
        );
    }
    let out = api
        .sql(
            DB,
            "SELECT COUNT(*), COUNT(DISTINCT id), MIN(v), MAX(v), SUM(v) FROM a",
        )
        .expect("count");
    let n = STATEMENTS * PER;
    let want = format!("| {n} | {n} | 0 | {} | {} |", n - 1, n * (n - 1) / 2);
    let squeezed: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(squeezed.contains(&want), "{out}\nwant {want}");
    // Every group holds some of them, and each group's replicas agree.
    let per_node = node_rows(&nodes, "a");
    assert_eq!(per_node[0], per_node[1]);
    assert_eq!(per_node[2], per_node[3]);
    assert_eq!((per_node[0].len() + per_node[2].len()) as i64, n);
    assert!(!per_node[0].is_empty() && !per_node[2].is_empty());
}

#[test]
fn concurrent_increments_over_two_node_groups_lose_no_update() {
    let (_m, nodes, api) = cluster(4, 2);
    api.sql(
        DB,
        "CREATE TABLE c (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=NDB",
    )
    .expect("create");
    api.sql(
        DB,
        "INSERT INTO c VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0)",
    )
    .expect("insert");
    let per_node = node_rows(&nodes, "c");
    assert!(
        !per_node[0].is_empty() && !per_node[2].is_empty(),
        "{per_node:?}"
    );
    const THREADS: usize = 4;
    const EACH: usize = 10;
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let api = api.clone();
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    let out = api.sql(DB, "UPDATE c SET n = n + 1").expect("increment");
                    assert!(out.contains("6 rows affected"), "{out}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let total = (THREADS * EACH).to_string();
    for rows in node_rows(&nodes, "c") {
        for r in rows {
            assert_eq!(r[1], total, "{r:?}");
        }
    }
}

#[test]
fn statements_over_two_node_groups_go_on_through_a_killed_data_node() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (_m, mut nodes, api) = cluster(4, 2);
    api.sql(
        DB,
        "CREATE TABLE c (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=NDB",
    )
    .expect("create");
    api.sql(
        DB,
        "INSERT INTO c VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0)",
    )
    .expect("insert");
    let stop = Arc::new(AtomicBool::new(false));
    let only_temporary = |e: &crate::error::NdbError| {
        assert!(
            e.is_temporary() || e.code == 4012,
            "only temporary errors under a node failure, got {e}"
        );
    };
    let writer = {
        let (api, stop) = (api.clone(), stop.clone());
        std::thread::spawn(move || {
            // (acknowledged increments, increments whose outcome is unknown)
            let (mut acked, mut unknown) = (0i64, 0i64);
            while !stop.load(Ordering::Acquire) {
                match api.sql(DB, "UPDATE c SET n = n + 1") {
                    Ok(text) => {
                        assert!(text.contains("6 rows affected"), "{text}");
                        acked += 1;
                    }
                    Err(e) => {
                        only_temporary(&e);
                        unknown += i64::from(e.code == 4012);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
            }
            (acked, unknown)
        })
    };
    let reader = {
        let (api, stop) = (api.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut answered = 0;
            while !stop.load(Ordering::Acquire) {
                match api.sql(DB, "SELECT COUNT(*) AS rows_seen FROM c WHERE n >= 0") {
                    Ok(text) => {
                        assert!(text.contains("|         6 |"), "{text}");
                        answered += 1;
                    }
                    Err(e) => only_temporary(&e),
                }
            }
            answered
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(400));
    let victim = nodes.remove(0);
    let victim_id = victim.node_id;
    victim.kill();
    super::process_tests::wait_until("the survivors' view without the victim", 10, || {
        nodes
            .iter()
            .all(|n| !n.status().view.node_ids().contains(&victim_id))
    });
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Release);
    let (acked, unknown) = writer.join().expect("writer");
    let answered = reader.join().expect("reader");
    assert!(acked > 10, "the statements went on: {acked} acknowledged");
    assert!(answered > 10, "the SELECTs went on: {answered} answered");
    // Each statement changed the six rows of both groups in one transaction.
    let per_node = node_rows(&nodes, "c");
    let values: Vec<&String> = per_node.iter().flatten().map(|r| &r[1]).collect();
    let n: i64 = values[0].parse().expect("n");
    assert!(values.iter().all(|v| *v == values[0]), "{per_node:?}");
    assert!(
        (acked..=acked + unknown).contains(&n),
        "n = {n}: {acked} acknowledged, {unknown} unknown"
    );
}

#[test]
fn a_pushed_condition_leaves_the_data_nodes_rows_it_holds_true_for_only() {
    use super::remote_scan::RemoteScanSpec;
    let (_m, _nodes, api) = cluster(4, 2);
    load_over_tcp(&api);
    let want: Vec<i64> = (1..=ROWS).filter(|&id| row(id).1 == Some(10)).collect();
    assert!(!want.is_empty());
    let mut spec = RemoteScanSpec::table(DB, "t");
    spec.columns = vec![0, 2];
    spec.batch_rows = 4;
    spec.filter = Some("SELECT * FROM `test`.`t` WHERE n = 10".into());
    let mut got: Vec<i64> = api
        .scan_all(spec.clone())
        .expect("filtered scan")
        .iter()
        .map(|r| {
            assert_eq!(r[1], Value::Int(10), "{r:?}");
            r[0].as_i128().expect("id") as i64
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, want);
    // A condition on a column the scan does not return, or not row-local: refused.
    spec.filter = Some("SELECT * FROM `test`.`t` WHERE g = 'g1'".into());
    let e = api.scan_all(spec.clone()).expect_err("g is not returned");
    assert_eq!(e.code, 4004, "{e}");
    spec.filter = Some("SELECT * FROM `test`.`t` WHERE n < RAND()".into());
    let e = api.scan_all(spec).expect_err("RAND()");
    assert_eq!(e.code, 4003, "{e}");
}
