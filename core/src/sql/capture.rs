//! A DML statement run on this engine's replicas without changing them: what it would
//! change is captured and the transaction rolled back. A data node process does this
//! for SQL from an API node (`SqlCaptureReq`); the API node then makes the same change
//! through a TC, which replicates it and locks the rows on their primaries
//! (`cluster::remote_sql`). Only the statement's own tables are captured: the rows of
//! hidden tables (BLOB/TEXT parts, unique-index entries) follow from them wherever the
//! change is applied.
//!
//! Each captured row carries its committed image before the statement (read with a
//! committed read, which the statement's locks do not block) and the statement's image
//! of it (read in the statement's transaction), every column. The statement runs as
//! in an explicit transaction (BEGIN ... ROLLBACK), so its rows count against
//! MaxNoOfConcurrentOperations (233 beyond it) and are never committed here; it waits
//! for a row lock at most [`CAPTURE_LOCK_WAIT`].

use super::ir::Stmt;
use super::{Session, SqlResult, lexer};
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome, TableRuntime, Transaction};
use crate::error::{Result, codes};
use crate::schema::Value;
use crate::txn::LockMode;
use std::sync::Arc;

/// The longest a captured statement waits for a row lock (then 266, which its client
/// retries after a pause): a capture never holds up for long the transactions that
/// change the same rows for real, and a lock cycle between it and one of them (each
/// waiting for a row the other locked) ends at once.
pub(crate) const CAPTURE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// The hidden keys a capture gives the rows an INSERT adds to a table without a primary
/// key start here: stand-ins the API node replaces by values of the tuple-id service
/// (`cluster::tuple_id`), which stays below this. A stand-in never meets a committed
/// row, whatever the node's own counter for the table says.
pub const CAPTURE_HIDDEN_KEY_BASE: u64 = 1 << 63;

/// Reads defined per execute while the images are read.
const IMAGE_READS_PER_EXECUTE: usize = 256;

/// A statement's first keyword, in upper case ("" when it starts with none).
pub fn leading_keyword(sql: &str) -> String {
    sql.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase()
}

/// Whether `sql` is a statement that changes rows (INSERT, REPLACE, UPDATE, DELETE):
/// over the transport it is captured ([`Session::capture`]), not run.
pub fn changes_rows(sql: &str) -> bool {
    matches!(
        leading_keyword(sql).as_str(),
        "INSERT" | "REPLACE" | "UPDATE" | "DELETE"
    )
}

/// One row a captured statement changed.
#[derive(Clone)]
pub struct CapturedRow {
    pub table: Arc<TableRuntime>,
    /// Primary-key values, in primary-key order.
    pub key: Vec<Value>,
    /// Every column as committed before the statement (None: no row).
    pub before: Option<Vec<Value>>,
    /// Every column as the statement left it (None: no row).
    pub after: Option<Vec<Value>>,
}

/// A row an API node's session transaction has written but not committed
/// (`cluster/remote_session.rs`): a capture writes it first, in the transaction it rolls
/// back, so that the statement sees the session's own changes.
#[derive(Debug, Clone, PartialEq)]
pub struct OverlayRow {
    pub database: String,
    pub table: String,
    /// Primary-key values, in primary-key order.
    pub key: Vec<Value>,
    /// Every column as the session left it; None: deleted.
    pub row: Option<Vec<Value>>,
}

/// What a capture is given besides its statement (all empty by default).
#[derive(Debug, Default)]
pub struct CaptureInputs<'a> {
    /// An INSERT's table hands out AUTO_INCREMENT values from at least this one (0:
    /// as it stands).
    pub auto_increment_floor: u64,
    /// Rows written first (a session transaction's own changes over TCP); they are
    /// among the captured rows (the statement may change them further) but not in the
    /// statement's result.
    pub overlay: &'a [OverlayRow],
    /// Rows the statement is given instead of finding them: the keys an UPDATE or
    /// DELETE considers (each read again under lock and checked against its WHERE), or
    /// the rows an INSERT ... SELECT inserts (its SELECT run by the API node).
    pub given_rows: Option<Vec<Vec<Value>>>,
}

impl Session {
    /// Runs one INSERT, REPLACE, UPDATE or DELETE in a transaction of its own and
    /// rolls it back: its result (row counts as if it had committed) and the rows it
    /// changed, first changed first. Refused inside the session's own transaction.
    /// `inputs`: see [`CaptureInputs`].
    pub fn capture(
        &mut self,
        sql: &str,
        inputs: CaptureInputs<'_>,
    ) -> Result<(SqlResult, Vec<CapturedRow>)> {
        let CaptureInputs {
            auto_increment_floor,
            overlay,
            given_rows,
        } = inputs;
        let mut statements = lexer::statements(sql);
        if statements.len() != 1 {
            return Err(codes::unsupported(
                "statements that change rows are sent one at a time",
            ));
        }
        let st = statements.remove(0)?;
        let stmt = self.parse(&st)?;
        if !matches!(stmt, Stmt::Insert(_) | Stmt::Update(_) | Stmt::Delete(_)) {
            return Err(codes::bad_argument(
                "only INSERT, REPLACE, UPDATE and DELETE are captured",
            ));
        }
        if self.txn.active() {
            return Err(codes::bad_argument(
                "a statement is not captured inside the session's transaction",
            ));
        }
        // (A table that is not there: the statement says so when it runs.)
        if let Stmt::Insert(i) = &stmt
            && let Ok(table) = self
                .db_of(&i.table)
                .and_then(|db| self.table(&db, &i.table.name))
        {
            let floor = if table.def.has_hidden_pk() {
                CAPTURE_HIDDEN_KEY_BASE
            } else {
                auto_increment_floor
            };
            table
                .auto_increment
                .fetch_max(floor, std::sync::atomic::Ordering::AcqRel);
        }
        self.txn.explicit = true;
        self.txn.capture = true;
        self.txn.stmt_wrote = false;
        self.txn.given_rows = given_rows;
        let r = self
            .apply_overlay(overlay)
            .and_then(|()| self.exec(stmt))
            .and_then(|result| self.captured_rows().map(|rows| (result, rows)));
        self.txn.rollback();
        self.txn.explicit = false;
        self.txn.capture = false;
        self.txn.given_rows = None;
        r
    }

    /// Writes `overlay` in the capture's transaction: whole rows, deletes of rows that
    /// are there (a row the session inserted and deleted again is no row either way).
    fn apply_overlay(&mut self, overlay: &[OverlayRow]) -> Result<()> {
        let ndb = self.ndb.clone();
        let mut tables: Vec<Arc<TableRuntime>> = Vec::with_capacity(overlay.len());
        for r in overlay {
            tables.push(self.table(&r.database, &r.table)?);
        }
        for (rows, tables) in overlay
            .chunks(IMAGE_READS_PER_EXECUTE)
            .zip(tables.chunks(IMAGE_READS_PER_EXECUTE))
        {
            let tx = self.txn.tx(&ndb)?;
            let first = tx.op_count();
            for (r, table) in rows.iter().zip(tables) {
                let def = &table.def;
                if r.key.len() != def.primary_key.len()
                    || r.row.as_ref().is_some_and(|v| v.len() != def.columns.len())
                {
                    return Err(codes::bad_argument(format!(
                        "a session row of {}.{} does not fit the table",
                        r.database, r.table
                    )));
                }
                let key: Vec<(usize, Value)> = def
                    .primary_key
                    .iter()
                    .copied()
                    .zip(r.key.iter().cloned())
                    .collect();
                match &r.row {
                    Some(values) => {
                        let rest = values
                            .iter()
                            .cloned()
                            .enumerate()
                            .filter(|(c, _)| !def.columns[*c].primary_key)
                            .collect();
                        tx.define_by_pos(table, OpKind::Write, key, rest, None)?
                    }
                    None => tx.define_by_pos(table, OpKind::Delete, key, Vec::new(), None)?,
                };
            }
            tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
            for k in 0..rows.len() {
                match tx.outcome(OpId(first + k)) {
                    Some(OpOutcome::Failed(e)) if e.code != 626 => return Err(e.clone()),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The rows the open transaction wrote, with their images before and after.
    fn captured_rows(&mut self) -> Result<Vec<CapturedRow>> {
        let ndb = self.ndb.clone();
        let Some(tx) = self.txn.open_tx() else {
            return Ok(Vec::new());
        };
        let written = tx.written_rows()?;
        if written.is_empty() {
            return Ok(Vec::new());
        }
        let after = read_images(tx, &written, LockMode::Exclusive)?;
        let mut committed = ndb.start_transaction()?;
        let before = read_images(&mut committed, &written, LockMode::CommittedRead);
        committed.close();
        Ok(written
            .into_iter()
            .zip(before?)
            .zip(after)
            .map(|(((table, key), before), after)| CapturedRow {
                table,
                key,
                before,
                after,
            })
            .collect())
    }
}

/// Every column of each row (None: no row), read by key in `tx`.
fn read_images(
    tx: &mut Transaction,
    rows: &[(Arc<TableRuntime>, Vec<Value>)],
    lock: LockMode,
) -> Result<Vec<Option<Vec<Value>>>> {
    let mut out = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(IMAGE_READS_PER_EXECUTE) {
        let first = tx.op_count();
        for (table, key) in chunk {
            let def = &table.def;
            let key = def.primary_key.iter().copied().zip(key.iter().cloned());
            let every: Vec<usize> = (0..def.columns.len()).collect();
            tx.define_by_pos(
                table,
                OpKind::Read(lock),
                key.collect(),
                Vec::new(),
                Some(every),
            )?;
        }
        tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
        for k in 0..chunk.len() {
            out.push(match tx.outcome(OpId(first + k)) {
                Some(OpOutcome::Row(values)) => Some(values.clone()),
                Some(OpOutcome::Failed(e)) if e.code == 626 => None,
                Some(OpOutcome::Failed(e)) => return Err(e.clone()),
                _ => return Err(codes::internal("a captured row's read did not run")),
            });
        }
    }
    Ok(out)
}
