//! SQL sessions over TCP (`remote_session.rs`): BEGIN ... COMMIT / ROLLBACK against
//! in-process `rndbd`s on loopback, with one and with two node groups. A transaction's
//! statements must give what the embedded cluster's session gives for the same
//! statements, see their own changes, stay invisible to others until COMMIT, and a
//! COMMIT after another transaction changed one of its rows must change nothing.

use super::datapath_sql_groups_tests::untimed;
use super::datapath_tests::{DB, cluster};
use super::remote_session::RemoteSession;

const CREATE: &str =
    "CREATE TABLE t (id INT PRIMARY KEY, v INT, w VARCHAR(20), KEY iv (v)) ENGINE=NDB";

fn same_as_embedded(data_nodes: u32) {
    let (_m, _nodes, api) = cluster(data_nodes, 2);
    let mut session = RemoteSession::new(api.clone());
    let c = crate::sql::tests::cluster(2, 2, "64M");
    let mut local = crate::sql::tests::session(&c);
    let script = [
        CREATE,
        "INSERT INTO t VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c'), (7, 70, 'g')",
        // The session's variables go with every statement.
        "SET @k = 7, @v = 100, @name = 'seven'",
        "SELECT @k, @v, @name, @missing",
        "UPDATE t SET v = @v, w = @name WHERE id = @k",
        "SELECT * FROM t WHERE id = @k",
        "INSERT INTO t VALUES (@k + 10, @v + 1, CONCAT(@name, '+'))",
        "SELECT id, v, w FROM t WHERE v > @v - 1 ORDER BY id",
        "SET ndb_use_exact_count = 1, @v = @v * 2",
        "SELECT @@ndb_use_exact_count, @v",
        "DELETE FROM t WHERE id = @k + 10",
        "BEGIN",
        "UPDATE t SET v = @v + 1 WHERE id = @k",
        "SELECT v FROM t WHERE id = @k",
        "SET @k = 3",
        "SELECT v FROM t WHERE id = @k",
        "COMMIT",
        "SELECT id, v FROM t WHERE id IN (3, 7) ORDER BY id",
        "SET @k = NULL, ndb_use_exact_count = DEFAULT",
        "SELECT @k, @@ndb_use_exact_count",
        "BEGIN",
        "UPDATE t SET v = v + 1 WHERE id = 1",
        "INSERT INTO t VALUES (4, 40, 'd'), (5, 50, 'e')",
        "DELETE FROM t WHERE id = 2",
        "UPDATE t SET v = v * 2, w = CONCAT(w, '!') WHERE v > 25",
        "SELECT * FROM t ORDER BY id",
        "SELECT v FROM t WHERE id = 2",
        "SELECT id, v FROM t WHERE id IN (4, 1, 9, 2) ORDER BY id",
        "SELECT id FROM t WHERE v > 55 ORDER BY v DESC",
        "SELECT COUNT(*), SUM(v) FROM t",
        "DELETE FROM t WHERE id = 4",
        "INSERT INTO t VALUES (4, 44, 'again')",
        "REPLACE INTO t VALUES (5, 55, 'replaced')",
        "UPDATE t SET w = 'lim' ORDER BY v DESC, id LIMIT 2",
        "DELETE FROM t WHERE v < 50 AND id > 1 ORDER BY v LIMIT 1",
        "SELECT * FROM t ORDER BY id",
        "COMMIT",
        "SELECT * FROM t ORDER BY id",
        "START TRANSACTION",
        "DELETE FROM t WHERE id > 3",
        "SELECT COUNT(*) FROM t",
        "ROLLBACK",
        "SELECT * FROM t ORDER BY id",
        "BEGIN",
        "INSERT INTO t VALUES (8, 80, 'h')",
        "CREATE TABLE u (id INT PRIMARY KEY) ENGINE=NDB",
        "ROLLBACK",
        "SELECT id FROM t WHERE id = 8",
        "SET autocommit = 0",
        "INSERT INTO t VALUES (9, 90, 'i')",
        "SELECT COUNT(*) FROM t",
        "ROLLBACK",
        "SELECT COUNT(*) FROM t",
        "INSERT INTO t VALUES (9, 91, 'j')",
        "UPDATE t SET v = v + 1 WHERE id = 9",
        "COMMIT",
        "DELETE FROM t WHERE id = 9",
        "SET autocommit = 1",
        "ROLLBACK",
        "SELECT * FROM t ORDER BY id",
    ];
    for q in script {
        let expected = local
            .execute(q)
            .unwrap_or_else(|e| panic!("{q} (embedded): {e}"));
        // The values themselves (types included), not only how they print.
        let got = session
            .execute_results(DB, q)
            .unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(got, expected, "{data_nodes} data nodes: {q}");
        assert_eq!(
            untimed(&crate::sql::render_all(&got, std::time::Duration::ZERO)),
            untimed(&crate::sql::render(&expected[0], std::time::Duration::ZERO)),
            "{data_nodes} data nodes: {q}"
        );
    }
    // The rendered form of the same session.
    let got = session
        .execute(DB, "SELECT id, v, w FROM t WHERE id < 3 ORDER BY id")
        .expect("rendered");
    assert_eq!(
        untimed(&got),
        untimed(
            &local
                .execute("SELECT id, v, w FROM t WHERE id < 3 ORDER BY id")
                .map(|r| crate::sql::render(&r[0], std::time::Duration::ZERO))
                .expect("embedded")
        )
    );
    // A statement's own error leaves the transaction open and changes nothing.
    session.execute(DB, "BEGIN").expect("begin");
    session
        .execute(DB, "UPDATE t SET v = 0 WHERE id = 1")
        .expect("update");
    let e = session
        .execute(DB, "INSERT INTO t VALUES (3, 0, 'dup')")
        .expect_err("duplicate");
    assert_eq!(e.code, 630, "{e}");
    assert!(session.in_transaction());
    // Others see nothing of it before COMMIT.
    let outside = api
        .sql(DB, "SELECT v FROM t WHERE id = 1")
        .expect("outside");
    assert!(outside.contains("| 11 |"), "{outside}");
    session.execute(DB, "COMMIT").expect("commit");
    let after = api.sql(DB, "SELECT v FROM t WHERE id = 1").expect("after");
    assert!(after.contains("| 0 |"), "{after}");
}

#[test]
fn a_transaction_over_tcp_with_one_node_group_gives_what_the_embedded_session_gives() {
    same_as_embedded(2);
}

#[test]
fn a_transaction_over_tcp_with_two_node_groups_gives_what_the_embedded_session_gives() {
    same_as_embedded(4);
}

/// `SET ndb_table_no_logging = 1` in a session over TCP: the next CREATE TABLE makes a
/// NoLogging table on every data node (the variables travel with DDL to the peers); an
/// unknown variable is MySQL's 1193 and changes nothing.
#[test]
fn session_variables_reach_every_data_node_with_ddl() {
    let (_m, nodes, api) = cluster(4, 2);
    let mut session = RemoteSession::new(api.clone());
    session
        .execute(DB, "SET ndb_table_no_logging = 1")
        .expect("set");
    session
        .execute(DB, "CREATE TABLE nl (id INT PRIMARY KEY) ENGINE=NDB")
        .expect("create");
    session
        .execute(DB, "SET ndb_table_no_logging = 0")
        .expect("set back");
    session
        .execute(DB, "CREATE TABLE lg (id INT PRIMARY KEY) ENGINE=NDB")
        .expect("create logged");
    for (i, n) in nodes.iter().enumerate() {
        let data = n.data().expect("data path");
        let ndb = data.engine.ndb(DB);
        let logging = |t: &str| ndb.table(t).expect(t).def.logging;
        assert_eq!(
            (logging("nl"), logging("lg")),
            (false, true),
            "node {}",
            i + 2
        );
    }
    let e = session
        .execute(DB, "SET frob = 1")
        .expect_err("unknown variable");
    assert_eq!(e.mysql_code, 1193, "{e}");
    assert!(session.vars().is_empty(), "{:?}", session.vars());
}

#[test]
fn a_commit_after_another_transaction_changed_its_row_changes_nothing() {
    let (_m, _nodes, api) = cluster(4, 2);
    api.sql(DB, CREATE).expect("create");
    api.sql(
        DB,
        "INSERT INTO t VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')",
    )
    .expect("insert");
    let mut mine = RemoteSession::new(api.clone());
    mine.execute(DB, "BEGIN").expect("begin");
    mine.execute(DB, "UPDATE t SET v = v + 100")
        .expect("update all");
    mine.execute(DB, "INSERT INTO t VALUES (9, 90, 'new')")
        .expect("insert");
    // Another client changes row 2 meanwhile (autocommit).
    let mut other = RemoteSession::new(api.clone());
    other
        .execute(DB, "UPDATE t SET v = 21 WHERE id = 2")
        .expect("other update");
    let e = mine.execute(DB, "COMMIT").expect_err("conflict");
    assert_eq!(e.code, 266, "{e}");
    assert!(e.is_temporary(), "{e}");
    assert!(!mine.in_transaction(), "the transaction is over");
    let rows = api
        .sql(DB, "SELECT id, v FROM t ORDER BY id")
        .expect("select");
    let squeezed: String = rows.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        squeezed.contains("| 1 | 10 | | 2 | 21 | | 3 | 30 |") && !squeezed.contains("| 9 |"),
        "{rows}"
    );
    // Run again, it commits.
    for q in ["BEGIN", "UPDATE t SET v = v + 100", "COMMIT"] {
        mine.execute(DB, q).expect(q);
    }
    let rows = api.sql(DB, "SELECT SUM(v) FROM t").expect("sum");
    assert!(rows.contains("361"), "{rows}");
}

#[test]
fn a_transactions_rows_are_bounded_and_counted_once_however_often_rewritten() {
    let (_m, _nodes, api) = cluster(2, 2);
    api.sql(
        DB,
        "CREATE TABLE d (id INT PRIMARY KEY, n INT NOT NULL, body MEDIUMTEXT) ENGINE=NDB",
    )
    .expect("create");
    let mut s = RemoteSession::new(api.clone());
    s.execute(DB, "BEGIN").expect("begin");
    s.execute(DB, "INSERT INTO d VALUES (1, 0, REPEAT('x', 300000))")
        .expect("insert");
    // 30 rewrites of a 300 KB row: 9 MB if each counted again, 300 KB counted once.
    for _ in 0..30 {
        s.execute(DB, "UPDATE d SET n = n + 1 WHERE id = 1")
            .expect("update");
    }
    s.execute(DB, "COMMIT").expect("commit");
    let out = api
        .sql(DB, "SELECT n, LENGTH(body) FROM d")
        .expect("select");
    assert!(out.contains("| 30 |") && out.contains("300000"), "{out}");
    // Past the bound: 233, and the transaction is rolled back.
    s.execute(DB, "BEGIN").expect("begin");
    let mut err = None;
    for id in 2..40 {
        if let Err(e) = s.execute(
            DB,
            &format!("INSERT INTO d VALUES ({id}, 0, REPEAT('y', 300000))"),
        ) {
            err = Some((id, e));
            break;
        }
    }
    let (id, e) = err.expect("the bound");
    assert_eq!(e.code, 233, "{e}");
    assert!((14..=16).contains(&id), "failed at row {id}: {e}");
    assert!(!s.in_transaction());
    let out = api.sql(DB, "SELECT COUNT(*) FROM d").expect("count");
    assert!(
        out.contains("| 1 |") || out.contains("|        1 |"),
        "{out}"
    );
}

#[test]
fn concurrent_transfers_over_two_node_groups_keep_the_total() {
    let (_m, nodes, api) = cluster(4, 2);
    const ACCOUNTS: i64 = 8;
    const THREADS: usize = 4;
    const TRANSFERS: usize = 15;
    api.sql(
        DB,
        "CREATE TABLE acct (id INT PRIMARY KEY, bal INT NOT NULL) ENGINE=NDB",
    )
    .expect("create");
    let values: Vec<String> = (0..ACCOUNTS).map(|i| format!("({i}, 1000)")).collect();
    api.sql(
        DB,
        &format!("INSERT INTO acct VALUES {}", values.join(", ")),
    )
    .expect("insert");
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let api = api.clone();
            std::thread::spawn(move || {
                let mut s = RemoteSession::new(api);
                let (mut committed, mut conflicts) = (0, 0);
                for k in 0..TRANSFERS {
                    let from = (t * 3 + k) as i64 % ACCOUNTS;
                    let to = (from + 1 + (k as i64 % (ACCOUNTS - 1))) % ACCOUNTS;
                    let amount = 1 + (t + k) % 7;
                    loop {
                        let r = [
                            "BEGIN".to_string(),
                            format!("UPDATE acct SET bal = bal - {amount} WHERE id = {from}"),
                            format!("UPDATE acct SET bal = bal + {amount} WHERE id = {to}"),
                            "COMMIT".to_string(),
                        ]
                        .iter()
                        .try_for_each(|q| s.execute(DB, q).map(|_| ()));
                        match r {
                            Ok(()) => {
                                committed += 1;
                                break;
                            }
                            Err(e) if e.is_temporary() => {
                                conflicts += 1;
                                let _ = s.execute(DB, "ROLLBACK");
                            }
                            Err(e) => panic!("transfer: {e}"),
                        }
                    }
                }
                (committed, conflicts)
            })
        })
        .collect();
    let mut conflicts = 0;
    for w in workers {
        let (c, k) = w.join().expect("worker");
        assert_eq!(c, TRANSFERS);
        conflicts += k;
    }
    let out = api
        .sql(DB, "SELECT COUNT(*), SUM(bal) FROM acct")
        .expect("sum");
    let squeezed: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        squeezed.contains(&format!("| {ACCOUNTS} | {} |", ACCOUNTS * 1000)),
        "{out} ({conflicts} conflicts retried)"
    );
    // Both node groups' replicas agree with what the client read.
    let per_node: Vec<Vec<Vec<String>>> = nodes
        .iter()
        .map(|n| {
            let dp = n.data().expect("data path");
            let mut s = crate::sql::Session::new(dp.engine.ndb(DB));
            crate::sql::tests::rows(&mut s, "SELECT * FROM acct ORDER BY 1")
        })
        .collect();
    assert_eq!(per_node[0], per_node[1]);
    assert_eq!(per_node[2], per_node[3]);
    let total: i64 = per_node[0]
        .iter()
        .chain(&per_node[2])
        .map(|r| r[1].parse::<i64>().expect("bal"))
        .sum();
    assert_eq!(total, ACCOUNTS * 1000);
}

#[test]
fn a_locking_read_in_a_transaction_is_checked_at_commit() {
    let (_m, _nodes, api) = cluster(4, 2);
    api.sql(DB, CREATE).expect("create");
    api.sql(
        DB,
        "INSERT INTO t VALUES (1, 100, 'a'), (2, 200, 'b'), (3, 300, 'c')",
    )
    .expect("insert");
    let mut mine = RemoteSession::new(api.clone());
    let mut other = RemoteSession::new(api.clone());
    // Read-modify-write by the application: read under FOR UPDATE, write a literal.
    for (lock, by_key) in [
        ("FOR UPDATE", true),
        ("LOCK IN SHARE MODE", false),
        ("FOR UPDATE", false),
    ] {
        mine.execute(DB, "BEGIN").expect("begin");
        let q = if by_key {
            format!("SELECT v FROM t WHERE id = 1 {lock}")
        } else {
            format!("SELECT v FROM t WHERE w = 'a' {lock}")
        };
        let read = mine.execute(DB, &q).expect("locking read");
        let v: i64 = read
            .lines()
            .filter(|l| l.starts_with('|'))
            .nth(1)
            .and_then(|l| l.trim_matches('|').trim().parse().ok())
            .unwrap_or_else(|| panic!("{read}"));
        // Another client changes the row in between (NDB's lock would make it wait).
        other
            .execute(DB, "UPDATE t SET v = v + 1 WHERE id = 1")
            .expect("other");
        mine.execute(DB, &format!("UPDATE t SET v = {} WHERE id = 1", v - 30))
            .expect("write");
        let e = mine.execute(DB, "COMMIT").expect_err(&q);
        assert_eq!(e.code, 266, "{q}: {e}");
    }
    let out = api.sql(DB, "SELECT v FROM t WHERE id = 1").expect("select");
    assert!(
        out.contains("| 103 |"),
        "the other client's three increments stay: {out}"
    );
    // Without a concurrent change it commits, and a row only read is not written.
    mine.execute(DB, "BEGIN").expect("begin");
    mine.execute(DB, "SELECT * FROM t WHERE id IN (2, 3) FOR UPDATE")
        .expect("read");
    mine.execute(DB, "UPDATE t SET v = 0 WHERE id = 3")
        .expect("write");
    mine.execute(DB, "COMMIT").expect("commit");
    let out = api
        .sql(DB, "SELECT id, v FROM t ORDER BY id")
        .expect("select");
    let squeezed: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(squeezed.contains("| 2 | 200 | | 3 | 0 |"), "{out}");
    // A plain read is read committed: not checked.
    mine.execute(DB, "BEGIN").expect("begin");
    mine.execute(DB, "SELECT v FROM t WHERE id = 2")
        .expect("read");
    other
        .execute(DB, "UPDATE t SET v = 201 WHERE id = 2")
        .expect("other");
    mine.execute(DB, "UPDATE t SET w = 'z' WHERE id = 3")
        .expect("write");
    mine.execute(DB, "COMMIT").expect("commit");
}
