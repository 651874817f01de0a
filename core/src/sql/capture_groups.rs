//! How a statement that changes rows is captured in a cluster of several node groups,
//! where a data node holds (and a capture there sees) only its own group's partitions
//! (`cluster/remote_sql_groups.rs` runs it): which of every group's captured rows are
//! kept, and which statements cannot be captured that way (refused with the reason).

use super::convert;
use super::ir::{InsertSource, Stmt};
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
    RowsByOwner { ignore: bool },
}

/// The capture of `sql` (one INSERT, REPLACE, UPDATE or DELETE) over several node
/// groups; 4003 with the reason for a statement whose result depends on rows of
/// several groups at once.
pub fn group_capture(sql: &str) -> Result<GroupCapture> {
    let mut statements = lexer::statements(sql);
    if statements.len() != 1 {
        return Err(codes::unsupported(
            "statements that change rows are sent one at a time",
        ));
    }
    let st = statements.remove(0)?;
    match convert::parse(&st)? {
        Stmt::Insert(i) => match i.source {
            InsertSource::Values(_) => Ok(GroupCapture::RowsByOwner {
                ignore: i.ignore && i.on_dup.is_empty() && !i.replace,
            }),
            InsertSource::Select(_) => Err(codes::unsupported(
                "INSERT ... SELECT over TCP in a cluster of several node groups: its SELECT \
                 would read one node group's rows; run the SELECT, then INSERT its rows",
            )),
        },
        Stmt::Update(u) if u.limit.is_some() => Err(limit_refused("UPDATE")),
        Stmt::Delete(d) if d.limit.is_some() => Err(limit_refused("DELETE")),
        Stmt::Update(_) | Stmt::Delete(_) => Ok(GroupCapture::EachGroupsRows),
        _ => Err(codes::bad_argument(
            "only INSERT, REPLACE, UPDATE and DELETE are captured",
        )),
    }
}

/// The table an UPDATE or DELETE changes: (database, name); None for anything else
/// (or no database).
pub fn changed_table(sql: &str, database: &str) -> Option<(String, String)> {
    let (t, _) = update_or_delete(sql)?;
    let db = t.db.clone().unwrap_or_else(|| database.to_string());
    (!db.is_empty()).then_some((db, t.name))
}

/// The primary keys an UPDATE or DELETE of `def` can change when its WHERE pins the
/// whole primary key (`id = 5`, `id IN (1, 2)`; the plan's key reads), so that only the
/// node groups holding those keys need capture it; None when it may change any row.
pub fn pinned_keys(sql: &str, database: &str, def: &TableDef) -> Option<Vec<Vec<Value>>> {
    let (t, where_) = update_or_delete(sql)?;
    let db = t.db.clone().unwrap_or_else(|| database.to_string());
    let scope = Scope::of_table(&db, def, t.alias.clone());
    let w = Binder::new(&scope)
        .bind(where_?, "where clause", Names::Columns, false)
        .ok()?;
    let vars = super::Vars::standalone(Some(db));
    let env = vars.env(super::now_utc());
    match plan::plan(def, Some(&w), &env, &[], false).ok()?.access {
        Access::Keys(keys) => Some(keys),
        Access::Empty => Some(Vec::new()),
        _ => None,
    }
}

/// An UPDATE's or DELETE's table and WHERE.
fn update_or_delete(sql: &str) -> Option<(super::ir::TableName, Option<super::ir::Expr>)> {
    let statements = lexer::statements(sql);
    let [Ok(st)] = statements.as_slice() else {
        return None;
    };
    match convert::parse(st).ok()? {
        Stmt::Update(u) => Some((u.table, u.where_)),
        Stmt::Delete(d) => Some((d.table, d.where_)),
        _ => None,
    }
}

fn limit_refused(what: &str) -> crate::error::NdbError {
    codes::unsupported(format!(
        "{what} ... LIMIT over TCP in a cluster of several node groups: each node group \
         would apply the LIMIT to its own rows; select the keys first, then change them \
         by key"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_classified_or_refused_with_the_reason() {
        use GroupCapture::*;
        for (sql, want) in [
            ("UPDATE t SET v = 1 WHERE id > 3", EachGroupsRows),
            ("DELETE FROM t ORDER BY id", EachGroupsRows),
            (
                "INSERT INTO t VALUES (1), (2)",
                RowsByOwner { ignore: false },
            ),
            (
                "INSERT IGNORE INTO t VALUES (1)",
                RowsByOwner { ignore: true },
            ),
            (
                "INSERT IGNORE INTO t VALUES (1) ON DUPLICATE KEY UPDATE v = 2",
                RowsByOwner { ignore: false },
            ),
            (
                "REPLACE INTO t VALUES (1, 2)",
                RowsByOwner { ignore: false },
            ),
        ] {
            assert_eq!(group_capture(sql).expect(sql), want, "{sql}");
        }
        for (sql, says) in [
            ("INSERT INTO t SELECT * FROM u", "INSERT ... SELECT"),
            ("UPDATE t SET v = 1 LIMIT 3", "UPDATE ... LIMIT"),
            ("DELETE FROM t ORDER BY id LIMIT 1", "DELETE ... LIMIT"),
        ] {
            let e = group_capture(sql).expect_err(sql);
            assert_eq!(e.code, 4003, "{sql}: {e}");
            assert!(e.to_string().contains(says), "{sql}: {e}");
        }
        assert_eq!(
            group_capture("UPDATE t SET")
                .expect_err("syntax")
                .mysql_code,
            1064
        );
    }
}
