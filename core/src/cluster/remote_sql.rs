//! SQL that changes rows (INSERT, REPLACE, UPDATE, DELETE) from an API node: a data
//! node runs the statement on its replicas in a transaction it rolls back and answers
//! the rows it would change, each with its committed image before and its image after
//! (`SqlCaptureReq`, `datapath::sql_capture`); this side then makes exactly that change
//! through a TC, as one transaction:
//!
//! 1. every row that existed is read under an exclusive lock on its primary, and must
//!    still be as the statement saw it;
//! 2. the rows are written — inserted (a row that appeared meanwhile fails the insert
//!    with 630), updated or deleted — and the transaction commits; every replica has
//!    the change, and the rows' hidden-table rows (BLOB/TEXT parts, unique-index
//!    entries) follow where it is applied.
//!
//! A row changed by someone else between the capture and step 1 (or a lock wait that
//! timed out, a node failure before the commit) ends the attempt, and the statement is
//! captured and applied again, at most [`MAX_ATTEMPTS`] times; the last error (a
//! temporary one) is the caller's then. A temporary error of the capture (a lock wait
//! there, a node lost) is retried the same way; its permanent errors (a bad value, an
//! unknown column) end the statement at once. A commit whose outcome is unknown (4012)
//! is not retried: the statement may have taken effect.
//!
//! The answer is the statement's own result as the data node rendered it (the row
//! counts of the capture, which the applied transaction made true).

use super::remote::RemoteCluster;
use super::remote_txn::Rounds;
use crate::error::{NdbError, Result, codes};
use crate::transport::data::{DataMsg, KeyOp, OpType, RowChange, TcExec};
use std::time::Duration;

/// Captures and applications of one statement before its last error is returned.
pub const MAX_ATTEMPTS: u32 = 10;

/// Pause before attempt `n` (1-based): 5 ms, 10 ms, ... at most 100 ms.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(u64::from(n * 5).min(100))
}

/// Whether `sql` changes rows (sent as `SqlCaptureReq`).
pub(super) fn changes_rows(sql: &str) -> bool {
    let word: String = sql
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    matches!(word.as_str(), "INSERT" | "REPLACE" | "UPDATE" | "DELETE")
}

/// A failure applying captured rows that another attempt may not meet: a temporary
/// error (a lock wait, a node failure, a lost race), or a row that appeared (630) or
/// went (626) since the capture.
fn retryable(e: &NdbError) -> bool {
    e.code != 4012 && (e.is_temporary() || matches!(e.code, 626 | 630))
}

impl RemoteCluster {
    /// Runs one statement that changes rows (see the module notes); its rendered
    /// result.
    pub(super) fn sql_change(&self, database: &str, sql: &str) -> Result<String> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= MAX_ATTEMPTS;
            let (text, changes) = match self.capture(database, sql) {
                Ok(c) => c,
                Err(e) if e.is_temporary() && e.code != 4012 && !last => {
                    std::thread::sleep(backoff(attempt));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if changes.is_empty() {
                return Ok(text);
            }
            let mut rounds = Rounds::default();
            let applied = self.apply_changes(&mut rounds, &changes);
            rounds.abandon(self);
            match applied {
                Ok(()) => return Ok(text),
                Err(e) if retryable(&e) && !last => std::thread::sleep(backoff(attempt)),
                Err(e) => return Err(e),
            }
        }
    }

    /// The statement's result and the rows it would change, from a data node.
    fn capture(&self, database: &str, sql: &str) -> Result<(String, Vec<RowChange>)> {
        let node = self.any_node()?;
        let p = self.submit(node, false, |req| DataMsg::SqlCaptureReq {
            req,
            database: database.into(),
            sql: sql.into(),
        })?;
        match p.wait()? {
            DataMsg::SqlCaptureConf {
                code: 0,
                text,
                changes,
                ..
            } => Ok((text, changes)),
            DataMsg::SqlCaptureConf {
                code, class, text, ..
            } => Err(super::datapath::err_from(code, class, &text)),
            _ => Err(codes::internal("unexpected answer to a captured statement")),
        }
    }

    /// Steps 1 and 2 of the module notes, in `rounds`.
    fn apply_changes(&self, rounds: &mut Rounds, changes: &[RowChange]) -> Result<()> {
        let existed: Vec<&RowChange> = changes.iter().filter(|c| c.before.is_some()).collect();
        if !existed.is_empty() {
            let reads = existed
                .iter()
                .map(|c| {
                    let every = c.before.as_ref().map_or(0, |b| b.len()) as u32;
                    KeyOp {
                        op: OpType::ReadExclusive,
                        database: c.database.clone(),
                        table: c.table.clone(),
                        key: c.key.clone(),
                        values: Vec::new(),
                        columns: (0..every).collect(),
                    }
                })
                .collect();
            let locked = rounds.execute(self, reads, TcExec::NoCommit)?;
            for (c, now) in existed.iter().zip(&locked.results) {
                if now.as_ref() != c.before.as_ref() {
                    return Err(codes::deadlock_timeout().detail(format!(
                        "a row of {}.{} changed after the statement read it",
                        c.database, c.table
                    )));
                }
            }
        }
        let writes: Vec<KeyOp> = changes.iter().filter_map(write_of).collect();
        if writes.is_empty() {
            rounds.execute(self, Vec::new(), TcExec::Rollback)?;
            return Ok(());
        }
        rounds.execute(self, writes, TcExec::Commit)?;
        Ok(())
    }
}

/// The operation that makes a row what the statement left it.
fn write_of(c: &RowChange) -> Option<KeyOp> {
    let every = |row: &[crate::schema::Value]| {
        row.iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (i as u32, v))
            .collect()
    };
    let (op, values) = match (&c.before, &c.after) {
        (None, None) => return None,
        (None, Some(after)) => (OpType::Insert, every(after)),
        // The row is locked (step 1): a write of every column is its update.
        (Some(_), Some(after)) => (OpType::Write, every(after)),
        (Some(_), None) => (OpType::Delete, Vec::new()),
    };
    Some(KeyOp {
        op,
        database: c.database.clone(),
        table: c.table.clone(),
        key: c.key.clone(),
        values,
        columns: Vec::new(),
    })
}
