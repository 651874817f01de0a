//! Tests of the SQL layer on embedded clusters: DDL and SHOW output, SELECT (plans,
//! expressions, aggregates, ordering), virtual tables, and the seeds' statements.
//! Shared helpers for the other test files live here.

use super::*;
use crate::api::Cluster;
use crate::config::ClusterConfig;

pub(crate) fn cluster(nodes: u32, replicas: u32, data_memory: &str) -> Cluster {
    let mut cfg = ClusterConfig::embedded(nodes, replicas).expect("config");
    cfg.set_data_node_param("DataMemory", data_memory)
        .expect("DataMemory");
    cfg.set_data_node_param("TransactionDeadlockDetectionTimeout", "300")
        .expect("timeout");
    Cluster::embedded(cfg).expect("start")
}

pub(crate) fn session(c: &Cluster) -> Session {
    Session::new(c.ndb("test"))
}

/// Runs statements, panicking on error; the last result.
pub(crate) fn run(s: &mut Session, sql: &str) -> SqlResult {
    match s.execute(sql) {
        Ok(mut v) => v.pop().expect("a result"),
        Err(e) => panic!("{sql}: {}", render_error(&e)),
    }
}

/// The rows of a query as text (NULL as "NULL").
pub(crate) fn rows(s: &mut Session, sql: &str) -> Vec<Vec<String>> {
    match run(s, sql) {
        SqlResult::Rows { rows, .. } => rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| match v {
                        Value::Null => "NULL".to_string(),
                        v => eval::to_text(v).unwrap_or_default(),
                    })
                    .collect()
            })
            .collect(),
        other => panic!("{sql}: not a result set: {other:?}"),
    }
}

/// Column names of a query.
pub(crate) fn columns(s: &mut Session, sql: &str) -> Vec<String> {
    match run(s, sql) {
        SqlResult::Rows { columns, .. } => columns,
        other => panic!("{sql}: not a result set: {other:?}"),
    }
}

/// One value of a query.
pub(crate) fn one(s: &mut Session, sql: &str) -> String {
    let r = rows(s, sql);
    assert_eq!(r.len(), 1, "{sql}: {r:?}");
    r[0][0].clone()
}

/// Rows affected by a statement.
pub(crate) fn affected(s: &mut Session, sql: &str) -> u64 {
    match run(s, sql) {
        SqlResult::Affected { rows, .. } => rows,
        other => panic!("{sql}: not a row count: {other:?}"),
    }
}

/// The mysql client's error line for a failing statement.
pub(crate) fn error(s: &mut Session, sql: &str) -> String {
    match s.execute(sql) {
        Ok(r) => panic!("{sql}: expected an error, got {r:?}"),
        Err(e) => render_error(&e),
    }
}

pub(crate) fn strs(v: &[&[&str]]) -> Vec<Vec<String>> {
    v.iter()
        .map(|r| r.iter().map(|x| x.to_string()).collect())
        .collect()
}

/// Scans started on every fragment of a table (primary and backup replicas).
pub(crate) fn scans(s: &Session, table: &str) -> u64 {
    let t = s.ndb.table(table).expect("table");
    t.all_cells().map(|c| c.state.lock().stats.scans).sum()
}

#[test]
fn select_without_table() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    assert_eq!(one(&mut s, "SELECT 1+1"), "2");
    assert_eq!(
        rows(
            &mut s,
            "select 1/3, 10/4, 7 div 2, 7 mod 3, -7 % 3, 1/0, 2.50*2, 1.5e3"
        ),
        strs(&[&["0.3333", "2.5000", "3", "1", "-1", "NULL", "5.00", "1500"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select 'a''b', \"dq\", 'x\\ty', X'4142', 0x43, TRUE, FALSE, NULL, 'abc' = 'ABC'"
        ),
        strs(&[&["a'b", "dq", "x\ty", "AB", "C", "1", "0", "NULL", "0"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select 1 = 1, 1 <> 1, 1 != 2, NULL = NULL, NULL <=> NULL, 1 < '2', '10' > 9, 2 between 1 and 3, 5 not between 1 and 3"
        ),
        strs(&[&["1", "0", "1", "NULL", "1", "1", "1", "1", "1"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select NULL and 0, NULL or 1, NULL and 1, not NULL, 1 xor 1, 1 in (1,2), 3 in (1,NULL), 3 not in (1,2), null is null, 1 is not null"
        ),
        strs(&[&["0", "1", "NULL", "NULL", "0", "1", "NULL", "1", "1", "1"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select 'abc' like 'a%', 'abc' like '_b_', 'abc' not like 'b%', 'a%c' like 'a\\%c', case when 1 > 2 then 'x' when 2 > 1 then 'y' else 'z' end, case 3 when 1 then 'one' else 'other' end"
        ),
        strs(&[&["1", "1", "1", "1", "y", "other"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select concat('a', 1, 2.5), length('äb'), char_length('äb'), upper('ab'), lower('AB'), substring('abcdef', 2, 3), substr('abcdef', -2), coalesce(NULL, NULL, 3), ifnull(NULL, 'd'), if(1 > 0, 'y', 'n'), abs(-3), floor(2.7), ceil(2.1), ceiling(-2.1), round(2.567, 2), round(2.5), mod(10, 4)"
        ),
        strs(&[&[
            "a12.5", "3", "2", "AB", "ab", "bcd", "ef", "3", "d", "y", "3", "2", "3", "-2", "2.57",
            "3", "2"
        ]])
    );
    assert_eq!(
        columns(&mut s, "select 1+1, 1 + 1 AS two, 'lit', @x"),
        vec!["1+1", "two", "lit", "@x"]
    );
    let r = one(&mut s, "select rand()");
    let f: f64 = r.parse().expect("a number");
    assert!((0.0..1.0).contains(&f));
    let now = one(&mut s, "select now()");
    assert_eq!(now.len(), 19, "{now}");
    assert_eq!(one(&mut s, "select curdate()").len(), 10);
    let ts: i64 = one(&mut s, "select unix_timestamp()").parse().expect("int");
    assert!(ts > 1_600_000_000);
    assert_eq!(
        one(&mut s, "select unix_timestamp('1970-01-02 00:00:00')"),
        "86400"
    );
    assert_eq!(one(&mut s, "select database()"), "test");
    assert_eq!(one(&mut s, "select @@autocommit"), "1");
    assert_eq!(
        one(&mut s, "select 9223372036854775807 + 0"),
        "9223372036854775807"
    );
    assert_eq!(
        error(&mut s, "select 9223372036854775807 + 1"),
        "ERROR 1690 (22003): BIGINT value is out of range in '(9223372036854775807 + 1)'"
    );
}

#[test]
fn user_variables_and_set() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    run(&mut s, "SET @x = 5, @y = 'str'");
    assert_eq!(
        rows(&mut s, "SELECT @x, @X + 1, @y, @nope"),
        strs(&[&["5", "6", "str", "NULL"]])
    );
    run(&mut s, "SET @x=FLOOR(1 + (RAND() * 650000))");
    let x: f64 = one(&mut s, "select @x").parse().expect("number");
    assert!((1.0..=650000.0).contains(&x));
    run(&mut s, "set @d = 1/3");
    // a user variable keeps the division's internal precision, as in MySQL
    assert_eq!(one(&mut s, "select @d"), "0.333333333");
    assert_eq!(one(&mut s, "select @d * 3"), "0.999999999");
    run(&mut s, "set ndb_use_transactions=0");
    assert_eq!(one(&mut s, "select @@ndb_use_transactions"), "0");
    run(&mut s, "SET SESSION ndb_use_transactions = ON");
    assert_eq!(one(&mut s, "select @@session.ndb_use_transactions"), "1");
    assert_eq!(
        error(&mut s, "set no_such_var = 1"),
        "ERROR 1193 (HY000): Unknown system variable 'no_such_var'"
    );
    assert_eq!(
        error(&mut s, "set autocommit = 'maybe'"),
        "ERROR 1231 (42000): Variable 'autocommit' can't be set to the value of 'maybe'"
    );
    assert_eq!(
        error(&mut s, "set @z = a"),
        "ERROR 1054 (42S22): Unknown column 'a' in 'field list'"
    );
    run(&mut s, "SET NAMES utf8mb4");
    let v = rows(&mut s, "show variables like 'ndb_use%'");
    assert_eq!(
        v,
        strs(&[
            &["ndb_use_exact_count", "0"],
            &["ndb_use_transactions", "ON"]
        ])
    );
}

#[test]
fn ddl_describe_show() {
    let c = cluster(1, 1, "16M");
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
    assert_eq!(
        rows(&mut s, "describe t5"),
        strs(&[
            &["id", "varchar(32)", "NO", "PRI", "NULL", ""],
            &["name", "varchar(32)", "NO", "PRI", "", ""],
            &["unit", "int", "YES", "", "NULL", ""],
        ])
    );
    assert_eq!(
        columns(&mut s, "show columns from t5"),
        vec!["Field", "Type", "Null", "Key", "Default", "Extra"]
    );
    assert_eq!(
        one(&mut s, "show create table t5").len(),
        "t5".len(),
        "first column is the table name"
    );
    let create = rows(&mut s, "show create table t5")[0][1].clone();
    assert_eq!(
        create,
        "CREATE TABLE `t5` (\n  `id` varchar(32) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci NOT NULL,\n  `name` varchar(32) NOT NULL DEFAULT '',\n  `unit` int DEFAULT NULL,\n  PRIMARY KEY (`id`,`name`)\n) ENGINE=ndbcluster DEFAULT CHARSET=latin1"
    );
    run(
        &mut s,
        "create table t2 (a int not null auto_increment primary key, b varchar(10) unique, c bigint unsigned default 7 comment 'cc', d decimal(10,2), e text, f datetime default current_timestamp on update current_timestamp, key (c), index ix_d (d)) engine=ndb comment='tbl'",
    );
    assert_eq!(
        rows(&mut s, "show full columns from t2 like 'c'"),
        strs(&[&[
            "c",
            "bigint unsigned",
            "NULL",
            "YES",
            "MUL",
            "7",
            "",
            "select,insert,update,references",
            "cc"
        ]])
    );
    assert_eq!(
        rows(&mut s, "desc t2")
            .iter()
            .map(|r| format!("{}|{}|{}|{}|{}", r[0], r[1], r[3], r[4], r[5]))
            .collect::<Vec<_>>(),
        vec![
            "a|int|PRI|NULL|auto_increment",
            "b|varchar(10)|UNI|NULL|",
            "c|bigint unsigned|MUL|7|",
            "d|decimal(10,2)|MUL|NULL|",
            "e|text||NULL|",
            "f|datetime||CURRENT_TIMESTAMP|DEFAULT_GENERATED on update CURRENT_TIMESTAMP",
        ]
    );
    let idx = rows(&mut s, "show index from t2");
    let summary: Vec<String> = idx
        .iter()
        .map(|r| format!("{} {} {} {} {}", r[2], r[1], r[3], r[4], r[10]))
        .collect();
    assert_eq!(
        summary,
        vec![
            "PRIMARY 0 1 a BTREE",
            "b 0 1 b BTREE",
            "c 1 1 c BTREE",
            "ix_d 1 1 d BTREE"
        ]
    );
    assert_eq!(rows(&mut s, "show tables"), strs(&[&["t2"], &["t5"]]));
    assert_eq!(columns(&mut s, "show tables"), vec!["Tables_in_test"]);
    assert_eq!(rows(&mut s, "show tables like 't5'"), strs(&[&["t5"]]));
    // indexes after creation
    run(&mut s, "create unique index u_unit on t5 (unit)");
    run(
        &mut s,
        "alter table t5 add index ix_name (name), add key (unit)",
    );
    let names: Vec<String> = rows(&mut s, "show index from t5")
        .into_iter()
        .map(|r| r[2].clone())
        .collect();
    assert_eq!(
        names,
        vec!["PRIMARY", "PRIMARY", "u_unit", "ix_name", "unit"]
    );
    assert_eq!(
        error(&mut s, "create index ix_name on t5 (unit)"),
        "ERROR 1061 (42000): Duplicate key name 'ix_name'"
    );
    run(&mut s, "drop index u_unit on t5");
    run(&mut s, "alter table t5 drop index ix_name");
    assert_eq!(
        error(&mut s, "drop index nope on t5"),
        "ERROR 1091 (42000): Can't DROP 'nope'; check that column/key exists"
    );
    let names: Vec<String> = rows(&mut s, "show index from t5")
        .into_iter()
        .map(|r| r[2].clone())
        .collect();
    assert_eq!(names, vec!["PRIMARY", "PRIMARY", "unit"]);
    // table without a primary key: the hidden key is not shown
    run(&mut s, "create table nopk (a char(10) storage memory)");
    assert_eq!(rows(&mut s, "desc nopk").len(), 1);
    assert!(rows(&mut s, "show index from nopk").is_empty());
    assert_eq!(
        rows(&mut s, "select * from nopk"),
        Vec::<Vec<String>>::new()
    );
    // IF [NOT] EXISTS, DROP of several tables
    run(&mut s, "create table if not exists nopk (x int)");
    assert_eq!(
        error(&mut s, "create table nopk (x int)"),
        "ERROR 1050 (42S01): Table 'nopk' already exists"
    );
    assert_eq!(
        error(&mut s, "drop table nopk, nope"),
        "ERROR 1051 (42S02): Unknown table 'test.nope'"
    );
    run(&mut s, "drop table if exists nopk, nope");
    assert_eq!(rows(&mut s, "show tables"), strs(&[&["t2"], &["t5"]]));
    assert_eq!(
        error(&mut s, "create table x (a int) engine=innodb"),
        "ERROR 1286 (42000): Unknown storage engine 'innodb'"
    );
    assert_eq!(
        error(
            &mut s,
            "create table x (a int, b int, primary key (a), primary key (b))"
        ),
        "ERROR 1068 (42000): Multiple primary key defined"
    );
    assert_eq!(
        error(&mut s, "create table x (a int auto_increment, b int)"),
        "ERROR 1075 (42000): Incorrect table definition; there can be only one auto column and it must be defined as a key"
    );
    assert_eq!(
        error(&mut s, "create table x (a text primary key)"),
        "ERROR 1170 (42000): BLOB/TEXT column 'a' used in key specification without a key length"
    );
    assert_eq!(
        error(&mut s, "create table x (a varchar(20000))"),
        "ERROR 1074 (42000): Column length too big for column 'a' (max = 16383); use BLOB or TEXT instead"
    );
    assert_eq!(
        error(&mut s, "create table x (a int default 'abc')"),
        "ERROR 1067 (42000): Invalid default value for 'a'"
    );
    assert_eq!(
        error(&mut s, "create table x (a int, a int)"),
        "ERROR 1060 (42S21): Duplicate column name 'a'"
    );
}

#[test]
fn disk_data_needs_an_existing_tablespace() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    let seed = "CREATE TABLE `t1` (
`id` bigint(20) NOT NULL AUTO_INCREMENT,
`data1` varchar(512) DEFAULT NULL,
`data2` varchar(512) DEFAULT NULL,
PRIMARY KEY (`id`)
) ENGINE=ndbcluster TABLESPACE ts_1 STORAGE DISK  ENGINE=ndbcluster ";
    assert_eq!(
        error(&mut s, seed),
        "ERROR 1296 (HY000): Got error 755 'Invalid tablespace: ts_1' from NDBCLUSTER"
    );
    assert_eq!(
        error(
            &mut s,
            "create table t1(a char(255)) engine=ndb tablespace ts1 storage disk"
        ),
        "ERROR 1296 (HY000): Got error 755 'Invalid tablespace: ts1' from NDBCLUSTER"
    );
    let e = error(
        &mut s,
        "create table t1 (a int primary key, b int storage disk)",
    );
    assert!(
        e.starts_with("ERROR 1296 (HY000): Got error 755 'Invalid tablespace"),
        "{e}"
    );
    assert!(
        rows(&mut s, "show tables").is_empty(),
        "nothing was created"
    );
    // PRIMARY KEY USING HASH: NDB's hash key only, no ordered index
    run(
        &mut s,
        "create table h (a int primary key using hash, b int) engine=ndb",
    );
    run(
        &mut s,
        "create table h2 (a int, b int, primary key using hash (a, b))",
    );
    assert_eq!(
        rows(&mut s, "show index from h")
            .iter()
            .map(|r| r[10].clone())
            .collect::<Vec<_>>(),
        vec!["HASH"]
    );
    assert!(
        rows(&mut s, "show create table h2")[0][1].contains("PRIMARY KEY (`a`,`b`) USING HASH")
    );
    assert_eq!(
        s.explain("select * from h where a > 1").expect("plan"),
        "h: full table scan"
    );
    run(&mut s, "drop table h, h2");
    // in memory it works
    run(
        &mut s,
        &seed.replace("TABLESPACE ts_1 STORAGE DISK", "STORAGE MEMORY"),
    );
    run(
        &mut s,
        "create table t2(a char(255) storage memory) engine=ndb",
    );
    assert_eq!(rows(&mut s, "show tables"), strs(&[&["t1"], &["t2"]]));
}

#[test]
fn databases_and_use() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    assert_eq!(
        rows(&mut s, "show databases"),
        strs(&[&["information_schema"], &["ndbinfo"], &["test"]])
    );
    run(&mut s, "create database db2");
    assert_eq!(
        error(&mut s, "create database db2"),
        "ERROR 1007 (HY000): Can't create database 'db2'; database exists"
    );
    run(&mut s, "create database if not exists db2");
    run(&mut s, "create table db2.t (a int primary key)");
    run(&mut s, "insert into db2.t values (1), (2)");
    assert_eq!(one(&mut s, "select count(*) from db2.t"), "2");
    assert_eq!(
        error(&mut s, "select * from t"),
        "ERROR 1146 (42S02): Table 'test.t' doesn't exist"
    );
    run(&mut s, "use db2");
    assert_eq!(s.database(), "db2");
    assert_eq!(one(&mut s, "select sum(a) from t"), "3");
    assert_eq!(rows(&mut s, "show tables"), strs(&[&["t"]]));
    // another session sees the database
    let mut s2 = session(&c);
    assert_eq!(
        rows(&mut s2, "show databases"),
        strs(&[&["db2"], &["information_schema"], &["ndbinfo"], &["test"]])
    );
    assert_eq!(
        error(&mut s, "use nope"),
        "ERROR 1049 (42000): Unknown database 'nope'"
    );
    assert_eq!(affected(&mut s, "drop database db2"), 1);
    assert_eq!(s.database(), "");
    assert_eq!(
        error(&mut s, "select * from t"),
        "ERROR 1046 (3D000): No database selected"
    );
    assert_eq!(
        rows(&mut s2, "show databases"),
        strs(&[&["information_schema"], &["ndbinfo"], &["test"]])
    );
    assert_eq!(
        error(&mut s, "drop database db2"),
        "ERROR 1008 (HY000): Can't drop database 'db2'; database doesn't exist"
    );
    run(&mut s, "use test");
    assert_eq!(one(&mut s, "select database()"), "test");
}

fn load_t1(s: &mut Session, n: u64) {
    run(
        s,
        "create table t1 (id bigint not null auto_increment primary key, a int, b varchar(20), c decimal(8,2), key ix_a (a))",
    );
    let mut sql = String::from("insert into t1 (a, b, c) values ");
    for i in 1..=n {
        if i > 1 {
            sql.push(',');
        }
        sql.push_str(&format!("({}, 'v{}', {}.{:02})", i % 10, i, i, i % 100));
    }
    assert_eq!(affected(s, &sql), n);
}

#[test]
fn select_clauses() {
    let c = cluster(2, 2, "32M");
    let mut s = session(&c);
    load_t1(&mut s, 100);
    assert_eq!(one(&mut s, "select count(*) from t1"), "100");
    assert_eq!(
        rows(&mut s, "select id, a, b, c from t1 where id = 42"),
        strs(&[&["42", "2", "v42", "42.42"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select * from t1 where id in (3, 1, 2, 1) order by id"
        ),
        strs(&[
            &["1", "1", "v1", "1.01"],
            &["2", "2", "v2", "2.02"],
            &["3", "3", "v3", "3.03"]
        ])
    );
    assert_eq!(
        rows(
            &mut s,
            "select id from t1 where a = 3 order by id desc limit 3"
        ),
        strs(&[&["93"], &["83"], &["73"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select id from t1 where id between 10 and 20 and b like '%5' order by id"
        ),
        strs(&[&["15"]])
    );
    assert_eq!(
        rows(&mut s, "select id from t1 order by id limit 2 offset 5"),
        strs(&[&["6"], &["7"]])
    );
    assert_eq!(
        rows(&mut s, "select id from t1 order by id limit 5, 2"),
        strs(&[&["6"], &["7"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select a, count(*) as n, sum(c), min(id), max(b), avg(id) from t1 group by a having n >= 10 and a < 3 order by a"
        ),
        strs(&[
            &["0", "10", "554.50", "10", "v90", "55.0000"],
            &["1", "10", "464.60", "1", "v91", "46.0000"],
            &["2", "10", "474.70", "2", "v92", "47.0000"]
        ])
    );
    assert_eq!(
        rows(
            &mut s,
            "select count(*), count(distinct a), sum(a), avg(a) from t1 where id > 1000"
        ),
        strs(&[&["0", "0", "NULL", "NULL"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select distinct a from t1 where a < 3 order by a desc"
        ),
        strs(&[&["2"], &["1"], &["0"]])
    );
    assert_eq!(
        error(&mut s, "select t1.id, x.b from t1 join t1 x"),
        "ERROR 1235 (42000): This version of MySQL doesn't yet support 'joins'"
    );
    assert_eq!(
        error(&mut s, "select nope from t1"),
        "ERROR 1054 (42S22): Unknown column 'nope' in 'field list'"
    );
    assert_eq!(
        error(&mut s, "select id from t1 where t2.id = 1"),
        "ERROR 1054 (42S22): Unknown column 't2.id' in 'where clause'"
    );
    assert_eq!(
        error(&mut s, "select id from t1 order by nope"),
        "ERROR 1054 (42S22): Unknown column 'nope' in 'order clause'"
    );
    assert_eq!(
        error(&mut s, "select id from t1 where count(*) > 1"),
        "ERROR 1111 (HY000): Invalid use of group function"
    );
    // aliases, qualified names, expressions over aggregates
    assert_eq!(
        rows(&mut s, "select x.id as k, x.b from t1 x where x.id = 3"),
        strs(&[&["3", "v3"]])
    );
    assert_eq!(
        columns(&mut s, "select x.id as k, x.b from t1 x where x.id = 3"),
        vec!["k", "b"]
    );
    assert_eq!(
        one(&mut s, "select test.t1.b from test.t1 where t1.id = 4"),
        "v4"
    );
    assert_eq!(
        rows(
            &mut s,
            "select a, count(*)*2 as c2, max(id) - min(id) from t1 group by a order by c2 desc, a limit 1"
        ),
        strs(&[&["0", "20", "90"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select id, a as x from t1 having x = 3 and id < 20 order by id"
        ),
        strs(&[&["3", "3"], &["13", "3"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select a from t1 group by 1 having sum(id) > 520 order by 1"
        ),
        strs(&[&["0"], &["8"], &["9"]])
    );
}

#[test]
fn plans_use_keys_and_indexes() {
    let c = cluster(2, 1, "32M");
    let mut s = session(&c);
    load_t1(&mut s, 200);
    let before = scans(&s, "t1");
    assert_eq!(one(&mut s, "select b from t1 where id = 7"), "v7");
    run(&mut s, "set @x = 8");
    assert_eq!(one(&mut s, "SELECT b FROM t1 WHERE id=@x"), "v8");
    run(&mut s, "SET @x=FLOOR(1 + (RAND() * 200))");
    assert_eq!(rows(&mut s, "SELECT * FROM t1 WHERE id=@x").len(), 1);
    assert_eq!(
        rows(&mut s, "select * from t1 where id in (1, 2, 500)").len(),
        2
    );
    assert_eq!(rows(&mut s, "select * from t1 where id = '9'").len(), 1);
    assert_eq!(rows(&mut s, "select * from t1 where id = 9.5").len(), 0);
    assert_eq!(scans(&s, "t1"), before, "primary-key reads do not scan");
    assert_eq!(
        s.explain("select * from t1 where id = 5").expect("explain"),
        "t1: primary key lookup (1 key)"
    );
    assert_eq!(
        s.explain("select * from t1 where a = 5 and b = 'v5'")
            .expect("explain"),
        "t1: ordered index scan on ix_a with bounds"
    );
    assert_eq!(
        s.explain("select * from t1 where id > 100 order by id limit 3")
            .expect("explain"),
        "t1: ordered index scan on PRIMARY with bounds, sorted"
    );
    assert_eq!(
        s.explain("select * from t1 order by id desc limit 3")
            .expect("explain"),
        "t1: ordered index scan on PRIMARY, sorted, descending"
    );
    assert_eq!(
        s.explain("select * from t1 where b = 'v5'")
            .expect("explain"),
        "t1: full table scan"
    );
    assert_eq!(
        s.explain("delete from t1 where id in (1,2)")
            .expect("explain"),
        "t1: primary key lookup (2 keys)"
    );
    assert_eq!(
        rows(
            &mut s,
            "select id from t1 where id > 100 order by id limit 3"
        ),
        strs(&[&["101"], &["102"], &["103"]])
    );
    assert_eq!(
        rows(&mut s, "select id from t1 order by id desc limit 3"),
        strs(&[&["200"], &["199"], &["198"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select id from t1 where a >= 8 and a < 9 and id < 30 order by id"
        ),
        strs(&[&["8"], &["18"], &["28"]])
    );
    let r = rows(&mut s, "explain select * from t1 where id = 5");
    assert_eq!(r[0][3], "const");
    assert_eq!(r[0][4], "PRIMARY");
}

#[test]
fn virtual_tables() {
    let c = cluster(2, 2, "32M");
    let mut s = session(&c);
    let names = rows(&mut s, "show tables from ndbinfo");
    assert!(!names.is_empty());
    let mem = rows(
        &mut s,
        "select node_id, memory_type from ndbinfo.memoryusage order by node_id, memory_type",
    );
    assert_eq!(mem.len(), 4, "{mem:?}");
    assert_eq!(mem[0], vec!["2", "Data memory"]);
    run(&mut s, "use ndbinfo");
    let r = rows(
        &mut s,
        "select node_id, count(*), 100*(sum(used)/(sum(used)+sum(total))) > 0 as x from memoryusage group by node_id",
    );
    assert_eq!(r.len(), 2);
    assert_eq!(
        error(&mut s, "select * from nope"),
        "ERROR 1146 (42S02): Table 'ndbinfo.nope' doesn't exist"
    );
    assert_eq!(
        error(&mut s, "delete from memoryusage"),
        "ERROR 1036 (HY000): Table 'memoryusage' is read only"
    );
    run(&mut s, "use test");
    assert_eq!(
        error(&mut s, "select * from information_schema.nope"),
        "ERROR 1146 (42S02): Table 'information_schema.nope' doesn't exist"
    );
}

#[test]
fn aggregate_expressions_over_rows() {
    // the seed's hit-ratio query, over rows like ndbinfo.diskpagebuffer's
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    run(
        &mut s,
        "create table dpb (node_id int unsigned, page_requests_direct_return bigint unsigned, page_requests_wait_io bigint unsigned)",
    );
    run(
        &mut s,
        "insert into dpb values (3, 933577, 66423), (4, 500000, 20000), (4, 436565, 43435)",
    );
    let r = rows(
        &mut s,
        "SELECT
node_id,
100*(sum(page_requests_direct_return)/
(sum(page_requests_direct_return)+sum(page_requests_wait_io))) as hit_ratio_pct
FROM dpb GROUP BY node_id ORDER BY node_id",
    );
    assert_eq!(r, strs(&[&["3", "93.3577"], &["4", "93.6565"]]));
    let out = render(
        &run(
            &mut s,
            "SELECT node_id, 100*(sum(page_requests_direct_return)/(sum(page_requests_direct_return)+sum(page_requests_wait_io))) as hit_ratio_pct FROM dpb GROUP BY node_id ORDER BY node_id",
        ),
        std::time::Duration::from_millis(10),
    );
    assert_eq!(
        out,
        "+---------+---------------+\n| node_id | hit_ratio_pct |\n+---------+---------------+\n|       3 |       93.3577 |\n|       4 |       93.6565 |\n+---------+---------------+\n2 rows in set (0.01 sec)"
    );
}

#[test]
fn session_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Session>();
    assert_send::<SqlResult>();
}

#[test]
fn column_types_round_trip() {
    let c = cluster(1, 1, "16M");
    let mut s = session(&c);
    run(
        &mut s,
        "create table ty (id varchar(10) primary key, ti tinyint, si smallint unsigned, mi mediumint, bi bigint unsigned, f float, d double, n numeric(6,3), ch char(4), vb varbinary(8), bn binary(2), dt date, tm time, ts timestamp null, txt tinytext, bl blob)",
    );
    run(
        &mut s,
        "insert into ty values ('k1', -128, 65535, -8388608, 18446744073709551615, 1.5, 2.25e10, 123.4565, 'ab  ', X'00ff', 'z', '2024-02-29', '-12:30:05', '2001-02-03 04:05:06', 'tiny', 'blob bytes')",
    );
    assert_eq!(
        rows(&mut s, "select * from ty"),
        strs(&[&[
            "k1",
            "-128",
            "65535",
            "-8388608",
            "18446744073709551615",
            "1.5",
            "22500000000",
            "123.457",
            "ab",
            "\0\u{fffd}",
            "z\0",
            "2024-02-29",
            "-12:30:05",
            "2001-02-03 04:05:06",
            "tiny",
            "blob bytes"
        ]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select hex(vb), length(bn), year(dt), month(dt), day(dt), hour(ts), n * 2, ti + 1, bi - 1 from ty where id in ('k1', 'k2')"
        ),
        strs(&[&[
            "00FF",
            "2",
            "2024",
            "2",
            "29",
            "4",
            "246.914",
            "-127",
            "18446744073709551614"
        ]])
    );
    assert_eq!(
        s.explain("select * from ty where id in ('k1', 'k2')")
            .expect("plan"),
        "ty: primary key lookup (2 keys)"
    );
    assert_eq!(
        error(&mut s, "insert into ty (id, ti) values ('k2', 128)"),
        "ERROR 1264 (22003): Out of range value for column 'ti' at row 1"
    );
    assert_eq!(
        error(
            &mut s,
            "insert into ty (id, dt) values ('k2', '2023-02-29')"
        ),
        "ERROR 1292 (22007): Incorrect date value: '2023-02-29' for column 'dt' at row 1"
    );
    run(&mut s, "insert into ty (id) values ('k0'), ('k3')");
    assert_eq!(
        rows(&mut s, "select id, ti from ty order by ti, id desc"),
        strs(&[&["k3", "NULL"], &["k0", "NULL"], &["k1", "-128"]])
    );
    assert_eq!(
        rows(
            &mut s,
            "select id from ty where txt like 't%' or ti is null order by id"
        ),
        strs(&[&["k0"], &["k1"], &["k3"]])
    );
    let r = rows(
        &mut s,
        "select count(ti), count(*), count(distinct txt), group_concat(id) from ty",
    );
    assert_eq!(r[0][..3], ["1", "3", "1"]);
    let mut ids: Vec<&str> = r[0][3].split(',').collect();
    ids.sort_unstable();
    assert_eq!(ids, ["k0", "k1", "k3"], "scan order is not defined");
}

#[test]
fn seed_004_statements() {
    let c = cluster(2, 2, "16M");
    let mut s = session(&c);
    assert_eq!(
        error(
            &mut s,
            "CREATE TABLE clusterdb.simples (id INT NOT NULL PRIMARY KEY) ENGINE=NDBCLUSTER;"
        ),
        "ERROR 1049 (42000): Unknown database 'clusterdb'"
    );
    run(&mut s, "create database clusterdb");
    run(
        &mut s,
        "CREATE TABLE clusterdb.simples (id INT NOT NULL PRIMARY KEY) ENGINE=NDBCLUSTER;",
    );
    run(
        &mut s,
        "CREATE TABLE clusterdb.existing (id INT NOT NULL PRIMARY KEY) ENGINE=NDBCLUSTER;",
    );
    run(&mut s, "ALTER TABLE clusterdb.existing ENGINE=NDBCLUSTER;");
    assert_eq!(
        error(&mut s, "ALTER TABLE clusterdb.existing ENGINE=InnoDB"),
        "ERROR 1286 (42000): Unknown storage engine 'InnoDB'"
    );
    let engines = rows(&mut s, "SHOW ENGINES");
    assert_eq!(engines[0][..2], ["ndbcluster", "DEFAULT"]);
    assert_eq!(
        rows(&mut s, "show tables from clusterdb"),
        strs(&[&["existing"], &["simples"]])
    );
}
