//! How a statement that changes rows is captured in a cluster of several node groups,
//! where a data node holds (and a capture there sees) only its own group's partitions
//! (`cluster/remote_sql_groups.rs` runs it): which of every group's captured rows are
//! kept, and which statements cannot be captured that way (refused with the reason).

use super::convert;
use super::ir::{InsertSource, Stmt};
use super::lexer;
use crate::error::{Result, codes};

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
