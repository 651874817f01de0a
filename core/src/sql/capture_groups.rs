//! How a statement that changes rows is captured in a cluster of several node groups,
//! where a data node holds (and a capture there sees) only its own group's partitions
//! (`cluster/remote_sql_groups.rs` runs it): which groups capture it, what the API
//! node works out first (the keys of an UPDATE/DELETE ... LIMIT, the rows of an
//! INSERT ... SELECT), and which of every group's captured rows are kept.

use super::convert;
use super::ir::{Expr, Insert, InsertSource, Lock, SelItem, Select, Stmt};
use super::lexer;
use super::plan::{self, Access};
use super::select::{Binder, Names, Scope};
use crate::error::{Result, codes};
use crate::schema::{TableDef, Value};

/// A statement's capture over several node groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupCapture {
    /// UPDATE, DELETE: each group changes the rows it holds, so every group's changes
    /// are kept (a row whose key an UPDATE changes may move to another group).
    EachGroupsRows,
    /// INSERT, REPLACE with VALUES: every group runs the statement (rows owned by
    /// other groups land in partitions that are empty there); a row is kept from the
    /// group that owns its key, whose capture saw the row it collides with or
    /// replaces. `ignore`: INSERT IGNORE, whose duplicates are the rows not inserted.
    /// `select_first`: INSERT ... SELECT of an NDB table, whose SELECT the API node runs
    /// over every group first ([`insert_select`]), each group being given its rows.
    RowsByOwner { ignore: bool, select_first: bool },
    /// UPDATE, DELETE with LIMIT: the API node first chooses the keys over every
    /// group ([`keys_select`]: WHERE, ORDER BY, LIMIT), then each group changes those
    /// of its keys that still match the WHERE; every group's changes are kept.
    KeysFirst,
}

/// The capture of `sql` (one INSERT, REPLACE, UPDATE or DELETE) over several node
/// groups; an error for several statements, another statement or a syntax error.
pub fn group_capture(sql: &str) -> Result<GroupCapture> {
    let mut statements = lexer::statements(sql);
    if statements.len() != 1 {
        return Err(codes::unsupported(
            "statements that change rows are sent one at a time",
        ));
    }
    let st = statements.remove(0)?;
    match convert::parse(&st)? {
        Stmt::Insert(i) => Ok(GroupCapture::RowsByOwner {
            ignore: i.ignore && i.on_dup.is_empty() && !i.replace,
            select_first: matches!(&i.source, InsertSource::Select(sel) if sel.from.is_some()),
        }),
        Stmt::Update(u) if u.limit.is_some() => Ok(GroupCapture::KeysFirst),
        Stmt::Delete(d) if d.limit.is_some() => Ok(GroupCapture::KeysFirst),
        Stmt::Update(_) | Stmt::Delete(_) => Ok(GroupCapture::EachGroupsRows),
        _ => Err(codes::bad_argument(
            "only INSERT, REPLACE, UPDATE and DELETE are captured",
        )),
    }
}

/// The table an INSERT, REPLACE, UPDATE or DELETE changes: (database, name); None for
/// anything else (or no database).
pub fn changed_table(sql: &str, database: &str) -> Option<(String, String)> {
    let t = match parse_one(sql)? {
        Stmt::Update(u) => u.table,
        Stmt::Delete(d) => d.table,
        Stmt::Insert(i) => i.table,
        _ => return None,
    };
    let db = t.db.clone().unwrap_or_else(|| database.to_string());
    (!db.is_empty()).then_some((db, t.name))
}

/// The primary keys a statement of `def` can change, when they are known before it
/// runs, so that only the node groups holding them need capture it: an UPDATE or
/// DELETE whose WHERE pins the whole primary key (`id = 5`, `id IN (1, 2)`; the plan's
/// key reads), an INSERT or REPLACE whose VALUES give every key column as a literal
/// (no AUTO_INCREMENT value to generate). None when it may change any row.
pub fn pinned_keys(
    sql: &str,
    database: &str,
    def: &TableDef,
    session: &super::SessionVars,
) -> Option<Vec<Vec<Value>>> {
    let (t, where_) = match parse_one(sql)? {
        Stmt::Update(u) => (u.table, u.where_),
        Stmt::Delete(d) => (d.table, d.where_),
        Stmt::Insert(i) => return inserted_keys(&i, def),
        _ => return None,
    };
    let db = t.db.clone().unwrap_or_else(|| database.to_string());
    let scope = Scope::of_table(&db, def, t.alias.clone());
    let w = Binder::new(&scope)
        .bind(where_?, "where clause", Names::Columns, false)
        .ok()?;
    let mut vars = super::Vars::standalone(Some(db));
    vars.import(session);
    let env = vars.env(super::now_utc());
    match plan::plan(def, Some(&w), &env, &[], false).ok()?.access {
        Access::Keys(keys) => Some(keys),
        Access::Empty => Some(Vec::new()),
        _ => None,
    }
}

/// `sql` parsed, when it is one statement.
fn parse_one(sql: &str) -> Option<Stmt> {
    let statements = lexer::statements(sql);
    let [Ok(st)] = statements.as_slice() else {
        return None;
    };
    convert::parse(st).ok()
}

/// The keys of an INSERT's VALUES rows, when each gives every primary-key column as a
/// literal (an AUTO_INCREMENT column given NULL or 0 is generated: None).
fn inserted_keys(i: &Insert, def: &TableDef) -> Option<Vec<Vec<Value>>> {
    let InsertSource::Values(rows) = &i.source else {
        return None;
    };
    let targets: Vec<usize> = if i.columns.is_empty() {
        def.visible_columns().map(|(c, _)| c).collect()
    } else {
        i.columns
            .iter()
            .map(|n| {
                def.columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(n))
            })
            .collect::<Option<_>>()?
    };
    let at: Vec<usize> = def
        .primary_key
        .iter()
        .map(|p| targets.iter().position(|t| t == p))
        .collect::<Option<_>>()?;
    // An AUTO_INCREMENT column (key or not) given no value of its own is generated:
    // every group then takes part in agreeing on the values (`remote_sql_groups.rs`).
    let auto = match def.auto_increment_column() {
        Some(c) => Some(targets.iter().position(|&t| t == c)?),
        None => None,
    };
    let mut keys = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(j) = auto {
            match row.get(j)? {
                Expr::Lit(v) if !v.is_null() && v.as_i128() != Some(0) => {}
                _ => return None,
            }
        }
        let mut key = Vec::with_capacity(at.len());
        for &j in &at {
            let v = match row.get(j)? {
                Expr::Lit(v) => v.clone(),
                Expr::Neg(e) => match e.as_ref() {
                    Expr::Lit(Value::Int(n)) => Value::Int(n.checked_neg()?),
                    _ => return None,
                },
                _ => return None,
            };
            key.push(v);
        }
        keys.push(key);
    }
    Some(keys)
}

/// For an INSERT ... SELECT: its SELECT, which the API node runs over every node group
/// (None for any other statement, or a SELECT of no NDB table, which a data node runs).
pub fn insert_select(sql: &str, database: &str) -> Option<super::TableSelect> {
    match parse_one(sql)? {
        Stmt::Insert(Insert {
            source: InsertSource::Select(sel),
            ..
        }) => super::select_over::TableSelect::of_select(*sel, database),
        _ => None,
    }
}

/// For an UPDATE or DELETE of `def` with LIMIT: the SELECT of the primary keys it
/// would change (its WHERE, ORDER BY and LIMIT), which the API node runs over every
/// node group. None for any other statement.
pub fn keys_select(sql: &str, database: &str, def: &TableDef) -> Option<super::TableSelect> {
    let (table, where_, order_by, limit) = match parse_one(sql)? {
        Stmt::Update(u) => (u.table, u.where_, u.order_by, u.limit),
        Stmt::Delete(d) => (d.table, d.where_, d.order_by, d.limit),
        _ => return None,
    };
    limit.as_ref()?;
    let items = def
        .primary_key
        .iter()
        .map(|&p| {
            let name = def.columns[p].name.clone();
            SelItem::Expr(Expr::Name(Vec::new(), name.clone()), name)
        })
        .collect();
    let sel = Select {
        distinct: false,
        items,
        from: Some(table),
        where_,
        where_sql: None,
        group_by: Vec::new(),
        having: None,
        order_by,
        limit,
        offset: None,
        lock: Lock::None,
    };
    super::select_over::TableSelect::of_select(sel, database)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_classified() {
        use GroupCapture::*;
        for (sql, want) in [
            ("UPDATE t SET v = 1 WHERE id > 3", EachGroupsRows),
            ("DELETE FROM t ORDER BY id", EachGroupsRows),
            (
                "INSERT INTO t VALUES (1), (2)",
                RowsByOwner {
                    ignore: false,
                    select_first: false,
                },
            ),
            (
                "INSERT IGNORE INTO t VALUES (1)",
                RowsByOwner {
                    ignore: true,
                    select_first: false,
                },
            ),
            (
                "INSERT IGNORE INTO t VALUES (1) ON DUPLICATE KEY UPDATE v = 2",
                RowsByOwner {
                    ignore: false,
                    select_first: false,
                },
            ),
            (
                "REPLACE INTO t VALUES (1, 2)",
                RowsByOwner {
                    ignore: false,
                    select_first: false,
                },
            ),
            (
                "INSERT IGNORE INTO t SELECT * FROM u",
                RowsByOwner {
                    ignore: true,
                    select_first: true,
                },
            ),
            (
                "INSERT INTO t SELECT 1, 2",
                RowsByOwner {
                    ignore: false,
                    select_first: false,
                },
            ),
        ] {
            assert_eq!(group_capture(sql).expect(sql), want, "{sql}");
        }
        for (sql, want) in [
            ("UPDATE t SET v = 1 LIMIT 3", KeysFirst),
            ("DELETE FROM t ORDER BY id LIMIT 1", KeysFirst),
        ] {
            assert_eq!(group_capture(sql).expect(sql), want, "{sql}");
        }
        let e = group_capture("SELECT 1").expect_err("not captured");
        assert_eq!(e.code, 4118, "{e}");
        assert_eq!(
            group_capture("UPDATE t SET")
                .expect_err("syntax")
                .mysql_code,
            1064
        );
    }

    #[test]
    fn the_keys_a_statement_can_change_are_known_when_pinned() {
        let c = crate::sql::tests::cluster(2, 2, "16M");
        let mut s = crate::sql::tests::session(&c);
        crate::sql::tests::run(
            &mut s,
            "CREATE TABLE t (a INT, b INT, v INT, PRIMARY KEY (a, b)) ENGINE=NDB",
        );
        let def = s.ndb.cluster().table("test", "t").expect("t").def.clone();
        let k = |a: i64, b: i64| vec![Value::Int(a), Value::Int(b)];
        let none = crate::sql::SessionVars::default();
        // The client's user variables pin keys as literals do; unknown ones are NULL.
        crate::sql::tests::run(&mut s, "SET @a = 4, @b = 7");
        let vars = s.session_vars();
        let by_vars = "DELETE FROM t WHERE a = @a AND b = @b";
        assert_eq!(
            pinned_keys(by_vars, "test", &def, &vars),
            Some(vec![k(4, 7)])
        );
        assert_eq!(pinned_keys(by_vars, "test", &def, &none), Some(vec![]));
        for (sql, want) in [
            (
                "UPDATE t SET v = 1 WHERE a = 1 AND b = 2",
                Some(vec![k(1, 2)]),
            ),
            (
                "DELETE FROM test.t WHERE b = 3 AND a IN (2, 1)",
                Some(vec![k(2, 3), k(1, 3)]),
            ),
            (
                "UPDATE t AS x SET v = 0 WHERE x.a = 1 AND x.b = 2 AND v > 3",
                Some(vec![k(1, 2)]),
            ),
            // The plan's keys: the WHERE is checked on each row it reads.
            (
                "DELETE FROM t WHERE a = 1 AND a = 2 AND b = 1",
                Some(vec![k(1, 1)]),
            ),
            ("UPDATE t SET v = 1 WHERE a = 1", None),
            ("DELETE FROM t WHERE a = 1 OR b = 2", None),
            ("DELETE FROM t", None),
            (
                "INSERT INTO t VALUES (1, 2, 3), (-4, 5, 6)",
                Some(vec![k(1, 2), k(-4, 5)]),
            ),
            (
                "REPLACE INTO t (v, b, a) VALUES (0, 7, 8)",
                Some(vec![k(8, 7)]),
            ),
            ("INSERT INTO t (a, v) VALUES (1, 2)", None),
            ("INSERT INTO t VALUES (1 + 1, 2, 3)", None),
            ("INSERT INTO t SELECT * FROM t", None),
            ("SELECT * FROM t WHERE a = 1 AND b = 2", None),
        ] {
            assert_eq!(pinned_keys(sql, "test", &def, &none), want, "{sql}");
        }
        assert_eq!(
            changed_table("DELETE FROM d2.t WHERE a = 1", "test"),
            Some(("d2".to_string(), "t".to_string()))
        );
        assert_eq!(
            changed_table("INSERT INTO t VALUES (1)", "test"),
            Some(("test".to_string(), "t".to_string()))
        );
        assert_eq!(changed_table("UPDATE t SET v = 1", ""), None);
        crate::sql::tests::run(
            &mut s,
            "CREATE TABLE g (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=NDB",
        );
        let g = s.ndb.cluster().table("test", "g").expect("g").def.clone();
        for sql in [
            "INSERT INTO g (v) VALUES (1)",
            "INSERT INTO g VALUES (NULL, 1)",
            "INSERT INTO g VALUES (0, 1)",
            "INSERT INTO g VALUES (9, 1), (NULL, 2)",
            "INSERT INTO g VALUES (DEFAULT, 2)",
        ] {
            assert_eq!(pinned_keys(sql, "test", &g, &none), None, "{sql}");
        }
        assert_eq!(
            pinned_keys("INSERT INTO g VALUES (9, 1)", "test", &g, &none),
            Some(vec![vec![Value::Int(9)]])
        );
        crate::sql::tests::run(
            &mut s,
            "CREATE TABLE h (id INT PRIMARY KEY, n INT AUTO_INCREMENT, KEY (n)) ENGINE=NDB",
        );
        let h = s.ndb.cluster().table("test", "h").expect("h").def.clone();
        assert_eq!(
            pinned_keys("INSERT INTO h (id) VALUES (1)", "test", &h, &none),
            None
        );
        assert_eq!(
            pinned_keys("INSERT INTO h VALUES (1, 5)", "test", &h, &none),
            Some(vec![vec![Value::Int(1)]])
        );
    }
}
