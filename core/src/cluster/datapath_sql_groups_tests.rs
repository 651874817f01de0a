//! SQL over TCP in a cluster of two node groups (4 data nodes, NoOfReplicas=2): each
//! data node holds one group's partitions, so a SELECT of a table is run by the API
//! node over every group (`remote_select.rs`). Every statement's rendered result must
//! equal the embedded cluster's for the same rows.

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
fn untimed(text: &str) -> String {
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
