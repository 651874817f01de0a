//! Error texts as the mysql client prints them, and robustness: random and mutated
//! statements, huge statements and deep nesting never panic.

use super::tests::*;
use super::*;

#[test]
fn syntax_errors_name_line_and_column() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    assert_eq!(
        error(&mut s, "SELECT * FRM t1"),
        "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'FRM t1' at line 1 column 10"
    );
    assert_eq!(
        error(&mut s, "selec 1"),
        "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'selec 1' at line 1 column 1"
    );
    assert_eq!(
        error(&mut s, "create table t (\n  a int,\n  b varchar\n)"),
        "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near ')' at line 4 column 1"
    );
    assert_eq!(
        error(&mut s, "select 'abc"),
        "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near ''abc' at line 1 column 8"
    );
    let e = error(&mut s, "insert into t values (1,");
    assert!(
        e.starts_with("ERROR 1064 (42000): You have an error in your SQL syntax;"),
        "{e}"
    );
    assert!(e.ends_with("at line 1 column 25"), "{e}");
    // statements before the error ran; the error stops the rest
    let r = s.execute("create table ok1 (a int primary key); insert into ok1 values (1); selec 2; insert into ok1 values (2)");
    assert!(r.is_err());
    assert_eq!(one(&mut s, "select count(*) from ok1"), "1");
}

#[test]
fn engine_errors_in_mysql_terms() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    assert_eq!(
        error(&mut s, "select * from t9"),
        "ERROR 1146 (42S02): Table 'test.t9' doesn't exist"
    );
    assert_eq!(
        error(&mut s, "insert into t9 values (1)"),
        "ERROR 1146 (42S02): Table 'test.t9' doesn't exist"
    );
    assert_eq!(
        error(&mut s, "select * from nodb.t9"),
        "ERROR 1146 (42S02): Table 'nodb.t9' doesn't exist"
    );
    // the NDB code stays visible to API users
    let e = s.execute("select * from t9").expect_err("missing");
    assert_eq!((e.code, e.mysql_code), (723, 1146));
    run(&mut s, "create table t (a int primary key, b char(3))");
    let e = s.execute("select x from t").expect_err("unknown column");
    assert_eq!((e.code, e.mysql_code), (4004, 1054));
    run(&mut s, "insert into t values (1, 'a')");
    let e = s.execute("insert into t values (1, 'b')").expect_err("dup");
    assert_eq!((e.code, e.mysql_code), (630, 1062));
    assert_eq!(
        error(&mut s, "select unknown_fn(1)"),
        "ERROR 1305 (42000): FUNCTION unknown_fn does not exist"
    );
    assert_eq!(
        error(&mut s, "select left('a')"),
        "ERROR 1582 (42000): Incorrect parameter count in the call to native function 'LEFT'"
    );
    assert_eq!(
        error(&mut s, "select 1 union select 2"),
        "ERROR 1235 (42000): This version of MySQL doesn't yet support 'UNION'"
    );
    assert_eq!(
        error(&mut s, "select (select 1)"),
        "ERROR 1235 (42000): This version of MySQL doesn't yet support 'subqueries'"
    );
    assert_eq!(
        error(&mut s, "create temporary table x (a int)"),
        "ERROR 1478 (HY000): Table storage engine 'ndbcluster' does not support the create option 'TEMPORARY'"
    );
    assert_eq!(
        error(&mut s, "create table x (a int) partition by key(a)"),
        "ERROR 1235 (42000): This version of MySQL doesn't yet support 'PARTITION BY'"
    );
    assert!(s.execute(";").expect("empty statement").is_empty());
    assert!(s.execute("").expect("empty input").is_empty());
    assert!(
        s.execute("  -- just a comment\n")
            .expect("comment")
            .is_empty()
    );
}

/// xorshift64 for reproducible fuzzing.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "SELECT",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "LIKE",
    "IS",
    "NULL",
    "ORDER",
    "BY",
    "GROUP",
    "HAVING",
    "LIMIT",
    "CREATE",
    "TABLE",
    "DROP",
    "INDEX",
    "ON",
    "PRIMARY",
    "KEY",
    "UNIQUE",
    "int",
    "varchar(3)",
    "char",
    "text",
    "decimal(5,2)",
    "SHOW",
    "TABLES",
    "DESCRIBE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "REPLACE",
    "IGNORE",
    "DUPLICATE",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "COUNT(*)",
    "SUM",
    "MAX",
    "t",
    "f",
    "a",
    "b",
    "@x",
    "@@autocommit",
    "(",
    ")",
    ",",
    ";",
    "'",
    "\"",
    "`",
    "*",
    "+",
    "-",
    "/",
    "%",
    "=",
    "<",
    ">",
    "<=>",
    "!=",
    "1",
    "0",
    "-1",
    "2.5",
    "1e308",
    "18446744073709551616",
    "'str'",
    "'ü€😀'",
    "X'41'",
    "0x",
    "/*",
    "*/",
    "--",
    "#",
    "\\",
    "\n",
    " ",
    "DIV",
    "MOD",
    "DEFAULT",
    "AUTO_INCREMENT",
    "STORAGE",
    "DISK",
    "TABLESPACE",
    "ENGINE=ndb",
    "USE",
    "test",
    "ndbinfo.nodes",
    "FOR UPDATE",
    "LOCK IN SHARE MODE",
    "EXPLAIN",
    "TRUNCATE",
    "ALTER",
    "ADD",
    "DATABASE",
    "CAST(",
    "AS",
    "SIGNED",
    "9223372036854775807",
    "RAND()",
    "FLOOR(",
    "CONCAT(",
    "DISTINCT",
];

#[test]
fn random_statements_never_panic() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    run(
        &mut s,
        "create table t (a int primary key, b varchar(3), f double, key (b))",
    );
    run(&mut s, "create table f (a int, b text)");
    run(&mut s, "insert into t values (1, 'x', 1.5), (2, 'y', NULL)");
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..3000 {
        let n = 1 + rng.below(14);
        let mut sql = String::new();
        for _ in 0..n {
            sql.push_str(PIECES[rng.below(PIECES.len())]);
            if rng.below(3) > 0 {
                sql.push(' ');
            }
        }
        let _ = s.execute(&sql);
    }
    // mutations of valid statements reach deeper into the parsers
    let valid = [
        "select a, b, count(*) from t where a in (1, 2) and b like 'x%' group by a, b having count(*) > 0 order by a desc limit 1, 2",
        "insert into t (a, b, f) values (3, 'z', 2.5) on duplicate key update f = values(f) + 1",
        "update t set f = f * 2, b = concat(b, 'q') where a between 1 and 2 order by a limit 1",
        "create table u (a bigint(20) unsigned not null auto_increment primary key, b varchar(10) character set latin1 default 'x' comment 'c', unique key (b)) engine=ndbcluster default charset=utf8",
        "delete from t where a = 3 or b is null",
        "select case when a > 1 then 'big' else 'small' end as size, floor(rand() * 10), @x := 1 from t",
    ];
    for _ in 0..3000 {
        let base = valid[rng.below(valid.len())];
        let mut chars: Vec<char> = base.chars().collect();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(chars.len());
            match rng.below(3) {
                0 => {
                    chars.remove(i);
                }
                1 => chars.insert(
                    i,
                    "()',;*%\\`\"@x0 ".chars().nth(rng.below(15)).unwrap_or(' '),
                ),
                _ => {
                    let j = rng.below(chars.len());
                    chars.swap(i, j)
                }
            }
            if chars.is_empty() {
                break;
            }
        }
        let sql: String = chars.into_iter().collect();
        let _ = s.execute(&sql);
        let _ = s.execute("rollback");
    }
    // random bytes (as the shell would pass them after a lossy decode)
    for _ in 0..500 {
        let bytes: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
        let sql = String::from_utf8_lossy(&bytes).into_owned();
        let _ = s.execute(&sql);
    }
    // the session still works
    let _ = s.execute("rollback");
    assert_eq!(one(&mut s, "select 1+1"), "2");
}

#[test]
fn huge_and_deep_statements() {
    let c = cluster(1, 1, "64M");
    let mut s = session(&c);
    let ten_mb = 10 << 20;
    // a 10 MB string literal is a value like any other
    let big = format!("SELECT LENGTH('{}')", "a".repeat(ten_mb));
    assert_eq!(one(&mut s, &big), ten_mb.to_string());
    // 10 MB of garbage is a syntax error
    let e = error(&mut s, &"x".repeat(ten_mb));
    assert!(e.starts_with("ERROR 1064"), "{}", &e[..80.min(e.len())]);
    // 10 MB of operators is refused before parsing
    let e = error(&mut s, &format!("SELECT {}1", "1+".repeat(ten_mb / 2)));
    assert!(
        e.starts_with("ERROR 1436") || e.starts_with("ERROR 1153"),
        "{e}"
    );
    let e = error(&mut s, &"(".repeat(ten_mb));
    assert!(
        e.starts_with("ERROR 1436") || e.starts_with("ERROR 1153"),
        "{e}"
    );
    // a long but legal chain works (parsed and evaluated without deep recursion)
    let chain = format!("SELECT {}1", "1+".repeat(lexer::MAX_CHAIN - 1));
    assert_eq!(one(&mut s, &chain), lexer::MAX_CHAIN.to_string());
    let ors = (0..2000)
        .map(|i| format!("a = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    run(&mut s, "create table t (a int primary key)");
    run(&mut s, "insert into t values (5), (1999), (3000)");
    assert_eq!(
        one(&mut s, &format!("select count(*) from t where {ors}")),
        "2"
    );
    // nesting beyond the limits is an error, not a crash
    let deep = format!("SELECT {}1{}", "(".repeat(300), ")".repeat(300));
    assert!(error(&mut s, &deep).starts_with("ERROR 1436"));
    // (MySQL's own parser reports too deep nesting as a 1064 "memory exhausted")
    let nots = format!("SELECT {}1", "NOT ".repeat(3000));
    let e = error(&mut s, &nots);
    assert!(
        e.starts_with("ERROR 1436") || e.starts_with("ERROR 1064"),
        "{e}"
    );
    let minus = format!("SELECT {}1", "- ".repeat(3000));
    let e = error(&mut s, &minus);
    assert!(e.starts_with("ERROR 1436"), "{e}");
    let is_null = format!("SELECT 1{}", " IS NULL".repeat(500));
    assert!(error(&mut s, &is_null).starts_with("ERROR 1436"));
    // a big multi-row INSERT (about 10 MB)
    run(
        &mut s,
        "create table big (id int primary key, v varchar(100))",
    );
    let pad = "p".repeat(90);
    let rows: Vec<String> = (0..100_000).map(|i| format!("({i},'{pad}')")).collect();
    let sql = format!("insert into big values {}", rows.join(","));
    assert!(sql.len() > 9 << 20);
    assert_eq!(affected(&mut s, &sql), 100_000);
    assert_eq!(one(&mut s, "select count(*) from big"), "100000");
}

/// NDB's NoLogging tables from SQL: MySQL's `COMMENT="NDB_TABLE=NOLOGGING=1"` and the
/// session's `ndb_table_no_logging`; the other NDB_TABLE options are refused with 1478.
#[test]
fn nologging_tables_from_the_comment_and_the_session_variable() {
    let c = cluster(2, 2, "16M");
    let mut s = session(&c);
    let logged = |c: &crate::api::Cluster, t: &str| c.ndb("test").table(t).expect(t).def.logging;
    run(
        &mut s,
        "create table a (id int primary key) comment=\"NDB_TABLE=NOLOGGING=1\"",
    );
    run(
        &mut s,
        "create table b (id int primary key) comment 'a plain comment'",
    );
    run(
        &mut s,
        "create table c (id int primary key) comment='ndb_table=nologging=0'",
    );
    run(&mut s, "set ndb_table_no_logging = 1");
    run(&mut s, "create table d (id int primary key)");
    run(
        &mut s,
        "create table e (id int primary key) comment='NDB_TABLE=NOLOGGING=FALSE'",
    );
    run(&mut s, "set ndb_table_no_logging = 0");
    run(&mut s, "create table f (id int primary key)");
    let got: Vec<bool> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|t| logged(&c, t))
        .collect();
    assert_eq!(got, [false, true, true, false, true, true]);
    // The unlogged table works as any other.
    run(&mut s, "insert into a values (1), (2)");
    assert_eq!(rows(&mut s, "select count(*) from a"), [["2"]]);
    for (comment, what) in [
        (
            "NDB_TABLE=READ_BACKUP=1",
            "NDB_TABLE=READ_BACKUP (not in rndb)",
        ),
        ("NDB_TABLE=NOLOGGING=2", "Syntax error in COMMENT modifier"),
        ("NDB_TABLE=NOLOGGING", "Syntax error in COMMENT modifier"),
        ("NDB_TABLE=FROB=1", "Syntax error in COMMENT modifier"),
    ] {
        assert_eq!(
            error(
                &mut s,
                &format!("create table g (id int primary key) comment='{comment}'")
            ),
            format!(
                "ERROR 1478 (HY000): Table storage engine 'ndbcluster' does not support the create option '{what}'"
            ),
            "{comment}"
        );
    }
    assert!(c.ndb("test").table("g").is_err(), "nothing created");
    c.shutdown();
}
