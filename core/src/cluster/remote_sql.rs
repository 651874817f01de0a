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
//!    entries) follow where it is applied. Deletes go in a round of their own before
//!    the other writes when there are both: a row written may take a unique value a
//!    deleted row gave up (REPLACE deleting the holder of its value), and in one
//!    round the write could reach a replica before the delete did (893).
//!
//! A row changed by someone else between the capture and step 1 (or a lock wait that
//! timed out, a node failure before the commit) ends the attempt, and the statement is
//! captured and applied again after a pause that grows and is jittered (so that
//! statements racing for a hot row spread out), until [`RETRY_BUDGET`] has passed since
//! the statement began (or [`MAX_ATTEMPTS`]); the last error (a temporary one) is the
//! caller's then. A temporary error of the capture (a lock wait
//! there, a node lost) is retried the same way; its permanent errors (a bad value, an
//! unknown column) end the statement at once, and so does 233 (the statement changes
//! more rows than one transaction holds: another attempt meets it again). A commit
//! whose outcome is unknown (4012) is not retried: the statement may have taken
//! effect.
//!
//! The answer is the statement's own result as the data node's capture gave it (the
//! row counts of the capture, which the applied transaction made true).

use super::remote::RemoteCluster;
use super::remote_session::SessionRows;
use super::remote_txn::Rounds;
use crate::error::{NdbError, Result, codes};
use crate::sql::{SessionVars, SqlResult};
use crate::transport::data::{DataMsg, KeyOp, OpType, RowChange, TcExec};
use std::sync::Arc;
use std::time::Duration;

/// Captures and applications of one statement before its last error is returned.
pub const MAX_ATTEMPTS: u32 = 500;

/// How long a statement is retried (from its first capture) before its last error is
/// returned: a few times NDB's default TransactionDeadlockDetectionTimeout, the time a
/// locking statement would wait for a hot row.
pub const RETRY_BUDGET: Duration = Duration::from_secs(5);

/// Pause after failed attempt `n` (1-based) of the statement with `salt`: 1 ms, 2 ms,
/// ... at most 32 ms, times a factor in [0.5, 1.5) drawn from (salt, n).
pub(super) fn backoff(n: u32, salt: u64) -> Duration {
    let base_us = 1000u64 << n.saturating_sub(1).min(5);
    // splitmix64 of (salt, n): the jitter.
    let mut z = salt ^ u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let factor_per_mille = 500 + z % 1000;
    Duration::from_micros(base_us * factor_per_mille / 1000)
}

/// A capture's statement result from `SqlCaptureConf`'s fields (its info line "" and
/// AUTO_INCREMENT value 0 stand for none).
pub(super) fn captured_result(affected: u64, info: String, last_insert_id: u64) -> SqlResult {
    SqlResult::Affected {
        rows: affected,
        last_insert_id: (last_insert_id != 0).then_some(last_insert_id),
        info: (!info.is_empty()).then_some(info),
    }
}

/// A capture's error that another attempt may not meet: a temporary one, but not an
/// unknown outcome (4012) nor a statement that changes more rows than one transaction
/// or answer holds (233: temporary in NDB's list, yet the same statement meets it
/// again).
fn capture_retryable(e: &NdbError) -> bool {
    e.is_temporary() && !matches!(e.code, 233 | 4012)
}

/// A failure applying captured rows that another attempt may not meet: a temporary
/// error (a lock wait, a node failure, a lost race), or a row that appeared (630) or
/// went (626) since the capture.
fn retryable(e: &NdbError) -> bool {
    e.code != 4012 && (e.is_temporary() || matches!(e.code, 626 | 630))
}

impl RemoteCluster {
    /// Runs one statement that changes rows (see the module notes); its result.
    pub(super) fn sql_change(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        vars: &SessionVars,
    ) -> Result<SqlResult> {
        let began = std::time::Instant::now();
        let spread = self.spread_of(sql)?;
        let mut auto_increment_floor = 0;
        // Unique per statement of this client, and differing between client processes.
        let salt = self.next_id() ^ (u64::from(std::process::id()) << 32);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= MAX_ATTEMPTS || began.elapsed() >= RETRY_BUDGET;
            let captured =
                self.capture_once(database, sql, spread, &mut auto_increment_floor, None, vars);
            let (result, changes) = match captured {
                Ok(c) => c,
                Err(e) if capture_retryable(&e) && !last => {
                    std::thread::sleep(backoff(attempt, salt));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if changes.is_empty() {
                return Ok(result);
            }
            let mut rounds = Rounds::default();
            let applied = self.apply_changes(&mut rounds, &changes);
            rounds.abandon(self);
            match applied {
                Ok(()) => return Ok(result),
                Err(e) if retryable(&e) && !last => std::thread::sleep(backoff(attempt, salt)),
                Err(e) => return Err(e),
            }
        }
    }

    /// How a statement is captured: on one data node (None: one node group), or on
    /// one of each group (`remote_sql_groups.rs`).
    fn spread_of(&self, sql: &str) -> Result<Option<crate::sql::GroupCapture>> {
        if self.node_groups().len() > 1 {
            crate::sql::group_capture(sql).map(Some)
        } else {
            Ok(None)
        }
    }

    /// One capture of a statement over `own` (a session's uncommitted rows), the rows
    /// it adds to tables without a primary key given their hidden keys (`tuple_id.rs`).
    fn capture_once(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        spread: Option<crate::sql::GroupCapture>,
        auto_increment_floor: &mut u64,
        own: Option<&SessionRows>,
        vars: &SessionVars,
    ) -> Result<(SqlResult, Vec<RowChange>)> {
        let (result, mut changes) = match spread {
            None => self.capture(database, sql, own.map_or(&[], |o| o.overlay()), vars),
            Some(how) => self.capture_groups(database, sql, how, auto_increment_floor, own, vars),
        }?;
        self.assign_hidden_keys(&mut changes)?;
        Ok((result, changes))
    }

    /// Captures a statement over `own` without applying it (a session transaction's
    /// statement, `remote_session.rs`): its result and every row the capture
    /// wrote, the transaction's rows included. Temporary errors are retried as
    /// [`RemoteCluster::sql`]'s are.
    pub(super) fn capture_statement(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        own: &SessionRows,
        vars: &SessionVars,
    ) -> Result<(SqlResult, Vec<RowChange>)> {
        let began = std::time::Instant::now();
        let spread = self.spread_of(sql)?;
        let mut auto_increment_floor = 0;
        let salt = self.next_id() ^ (u64::from(std::process::id()) << 32);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= MAX_ATTEMPTS || began.elapsed() >= RETRY_BUDGET;
            let captured = self.capture_once(
                database,
                sql,
                spread,
                &mut auto_increment_floor,
                Some(own),
                vars,
            );
            match captured {
                Err(e) if capture_retryable(&e) && !last => {
                    std::thread::sleep(backoff(attempt, salt));
                }
                r => return r,
            }
        }
    }

    /// The statement's result and the rows it would change, from a data node.
    fn capture(
        &self,
        database: &str,
        sql: &str,
        overlay: &[RowChange],
        vars: &SessionVars,
    ) -> Result<(SqlResult, Vec<RowChange>)> {
        let node = self.any_node()?;
        let p = self.submit(node, false, |req| DataMsg::SqlCaptureReq {
            req,
            database: database.into(),
            sql: sql.into(),
            auto_increment_floor: 0,
            overlay: overlay.to_vec(),
            given_rows: None,
            vars: vars.clone(),
        })?;
        match p.wait()? {
            DataMsg::SqlCaptureConf {
                code: 0,
                changes,
                affected,
                info,
                last_insert_id,
                ..
            } => Ok((captured_result(affected, info, last_insert_id), changes)),
            DataMsg::SqlCaptureConf {
                code,
                class,
                text,
                mysql_code,
                ..
            } => {
                let e = super::datapath::sql_err_from(code, class, &text, mysql_code);
                // A starting node: the retry asks another.
                if e.code == 4035 {
                    self.note_not_ready(&e);
                }
                Err(e)
            }
            _ => Err(codes::internal("unexpected answer to a captured statement")),
        }
    }

    /// Steps 1 and 2 of the module notes, in `rounds`.
    pub(super) fn apply_changes(&self, rounds: &mut Rounds, changes: &[RowChange]) -> Result<()> {
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
            let locked = rounds.execute(self, reads, TcExec::NoCommit, false)?;
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
            rounds.execute(self, Vec::new(), TcExec::Rollback, false)?;
            return Ok(());
        }
        let (deletes, others): (Vec<KeyOp>, Vec<KeyOp>) =
            writes.into_iter().partition(|w| w.op == OpType::Delete);
        if deletes.is_empty() || others.is_empty() {
            let all = if deletes.is_empty() { others } else { deletes };
            rounds.execute(self, all, TcExec::Commit, false)?;
            return Ok(());
        }
        rounds.execute(self, deletes, TcExec::NoCommit, false)?;
        rounds.execute(self, others, TcExec::Commit, false)?;
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
        // Read and checked (step 1), unchanged: nothing to write.
        (Some(before), Some(after)) if before == after => return None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap_and_is_jittered_within_bounds() {
        for salt in [0u64, 1, 99, u64::MAX] {
            for n in 1..20u32 {
                let base = 1000u64 << (n - 1).min(5);
                let us = backoff(n, salt).as_micros() as u64;
                assert!(
                    us >= base / 2 && us < base * 3 / 2,
                    "n {n} salt {salt}: {us}"
                );
            }
        }
        let spread: std::collections::BTreeSet<u128> =
            (0..50u64).map(|s| backoff(6, s).as_micros()).collect();
        assert!(
            spread.len() > 40,
            "statements racing spread out: {spread:?}"
        );
    }
}
