//! A SQL session over TCP: what `rndb_mgm -c`, Python's `MgmClient.sql` and the C API's
//! remote `rndb_execute_sql` keep between statements — an open transaction (BEGIN or
//! START TRANSACTION ... COMMIT or ROLLBACK).
//!
//! The transaction is kept at the API node, optimistically: each statement that
//! changes rows is captured on the data nodes over the rows the transaction has
//! written so far (sent with it as an overlay, written first in the capture's
//! rolled-back transaction, `sql::OverlayRow`), and the rows it changes are merged into
//! the transaction's rows — each with its committed image when the transaction first
//! wrote it and its image now. A SELECT of a table in the transaction is run by the API
//! node (`remote_select.rs`) over the committed rows with the transaction's own rows in
//! their place, so it sees its own changes. COMMIT applies every changed row in one
//! transaction through a TC, as a single statement's change is applied
//! (`remote_sql.rs`): the rows that existed are read with exclusive locks and compared
//! with their images when first written; a difference (another transaction changed
//! one meanwhile) rolls the whole transaction back with 266 (temporary: run it again).
//! Nothing is written to the data nodes before COMMIT, so ROLLBACK, a lost connection
//! or a dropped session leave no trace.
//!
//! Isolation: reads are committed reads (NDB's for a SELECT without a lock clause);
//! rows the transaction wrote are checked at COMMIT (first-committer-wins), where NDB's
//! row locks would have made the later writer wait. A locking read (FOR UPDATE, LOCK IN
//! SHARE MODE) adds the committed rows it read, every column, to the rows COMMIT checks
//! (unchanged ones are checked and not written). As in MySQL, BEGIN inside a
//! transaction and DDL commit the open transaction first.
//!
//! `SET autocommit = 0` puts every statement in a transaction (the next one begins at
//! the first statement after COMMIT or ROLLBACK); `SET autocommit = 1` commits what is
//! open, as in MySQL.
//!
//! The session's variables (`SET @x = 7`, `SET ndb_table_no_logging = 1`:
//! `sql::SessionVars`) are kept here too and go with every statement; a data node runs
//! each statement in a session that starts from them, and a SET's (or SELECT's) answer
//! brings back what it assigned.
//!
//! Limits: at most [`MAX_SESSION_ROWS`] rows written per transaction (NDB's
//! MaxNoOfConcurrentOperations default; 233 beyond, and the transaction is rolled back)
//! and their images at most [`MAX_SESSION_BYTES`] (they travel with every capture).

use super::remote::RemoteCluster;
use super::remote_txn::Rounds;
use crate::error::{NdbError, Result, codes};
use crate::sql::{SessionVars, SqlResult};
use crate::transport::data::RowChange;
use crate::transport::data_scan::value_bytes;
use std::collections::HashMap;
use std::sync::Arc;

/// Rows one session transaction may write (NDB's MaxNoOfConcurrentOperations default).
pub const MAX_SESSION_ROWS: usize = 32_768;
/// Bytes of row images one session transaction may hold: they go with each capture,
/// and come back in its answer with their committed images (a frame is 16 MiB).
pub const MAX_SESSION_BYTES: usize = 4 << 20;

/// A row's identity: database, table (lower case) and its key in the table's key
/// encoding.
type RowId = (String, String, Vec<u8>);

/// The rows an open session transaction wrote or read with a lock, first taken first:
/// each with its committed image when first taken and its image now.
#[derive(Default)]
pub(super) struct SessionRows {
    rows: Vec<RowChange>,
    at: HashMap<RowId, usize>,
    bytes: usize,
}

impl SessionRows {
    fn row_id(
        rc: &RemoteCluster,
        database: &str,
        table: &str,
        key: &[crate::schema::Value],
    ) -> Result<RowId> {
        let def = rc.table(database, table)?;
        Ok((
            database.to_string(),
            table.to_ascii_lowercase(),
            RemoteCluster::key_bytes(&def, key)?,
        ))
    }

    /// Takes in a capture's rows: a row seen before keeps its first committed image.
    fn merge(&mut self, rc: &RemoteCluster, changes: Vec<RowChange>) -> Result<()> {
        for c in changes {
            let id = Self::row_id(rc, &c.database, &c.table, &c.key)?;
            self.bytes += image_bytes(&c.after);
            match self.at.get(&id) {
                Some(&i) => {
                    self.bytes -= image_bytes(&self.rows[i].after);
                    self.rows[i].after = c.after;
                }
                None => {
                    self.at.insert(id, self.rows.len());
                    self.rows.push(c);
                }
            }
        }
        if self.rows.len() > MAX_SESSION_ROWS || self.bytes > MAX_SESSION_BYTES {
            return Err(codes::too_many_operations().detail(format!(
                "a transaction over TCP writes at most {MAX_SESSION_ROWS} rows and \
                 {} MiB of row images; it is rolled back",
                MAX_SESSION_BYTES >> 20
            )));
        }
        Ok(())
    }

    /// Takes in the committed rows a locking read read (FOR UPDATE, LOCK IN SHARE
    /// MODE): COMMIT checks them as it checks the rows written; a row the transaction
    /// wrote already keeps its images.
    fn note_reads(&mut self, rc: &RemoteCluster, reads: Vec<RowChange>) -> Result<()> {
        let fresh: Vec<RowChange> = reads
            .into_iter()
            .map(|r| Ok((Self::row_id(rc, &r.database, &r.table, &r.key)?, r)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .filter(|(id, _)| !self.at.contains_key(id))
            .map(|(_, r)| r)
            .collect();
        self.merge(rc, fresh)
    }

    /// The rows as the overlay of a capture (their images now).
    pub(super) fn overlay(&self) -> &[RowChange] {
        &self.rows
    }

    /// The transaction's image of a row of `database`.`table`: None when it has not
    /// written the row, Some(None) when it deleted it.
    pub(super) fn lookup(
        &self,
        rc: &RemoteCluster,
        database: &str,
        table: &str,
        key: &[crate::schema::Value],
    ) -> Result<Option<Option<&Vec<crate::schema::Value>>>> {
        let id = Self::row_id(rc, database, table, key)?;
        Ok(self.at.get(&id).map(|&i| self.rows[i].after.as_ref()))
    }

    /// The rows of one table the transaction wrote or read with a lock.
    pub(super) fn of_table<'a>(
        &'a self,
        database: &'a str,
        table: &'a str,
    ) -> impl Iterator<Item = &'a RowChange> + 'a {
        self.rows
            .iter()
            .filter(move |r| r.database == database && r.table.eq_ignore_ascii_case(table))
    }
}

/// The database a `USE name` statement names (a virtual one in lower case, as MySQL
/// shows it).
fn use_target(sql: &str) -> String {
    let name = sql
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .trim_matches('`')
        .to_string();
    if crate::sql::is_virtual_database(&name) {
        name.to_ascii_lowercase()
    } else {
        name
    }
}

/// The bytes of a row image (what it adds to each capture's request).
fn image_bytes(row: &Option<Vec<crate::schema::Value>>) -> usize {
    row.as_ref()
        .map_or(0, |r| r.iter().map(value_bytes).sum::<usize>())
}

/// One client's SQL session over TCP (module notes).
pub struct RemoteSession {
    rc: Arc<RemoteCluster>,
    /// The open transaction's rows (None: none open).
    txn: Option<SessionRows>,
    /// `SET autocommit = 0` turns it off: every statement is then in a transaction,
    /// the next one beginning at the first statement after COMMIT or ROLLBACK.
    autocommit: bool,
    /// User variables and changed system variables.
    vars: SessionVars,
    /// The database `USE` selected (None: each call's own).
    database: Option<String>,
}

impl RemoteSession {
    pub fn new(rc: Arc<RemoteCluster>) -> RemoteSession {
        RemoteSession {
            rc,
            txn: None,
            autocommit: true,
            vars: SessionVars::default(),
            database: None,
        }
    }

    /// The session's user variables and changed system variables.
    pub fn vars(&self) -> &SessionVars {
        &self.vars
    }

    /// The cluster connection.
    pub fn cluster(&self) -> &Arc<RemoteCluster> {
        &self.rc
    }

    /// The database `USE` selected, if a statement did.
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// Whether a transaction is open.
    pub fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }

    /// Whether `sql` needs this session: a transaction is open, the session has
    /// variables or a database, or a statement of it begins or ends a transaction, sets
    /// a variable or selects a database.
    /// Other statements may run on the cluster connection at once
    /// ([`RemoteCluster::sql`]), concurrently with others.
    pub fn needs_session(&self, sql: &str) -> bool {
        self.in_transaction()
            || !self.autocommit
            || !self.vars.is_empty()
            || self.database.is_some()
            || crate::sql::statement_texts(sql).iter().flatten().any(|st| {
                let w = crate::sql::leading_keyword(st);
                matches!(
                    w.as_str(),
                    "BEGIN" | "START" | "COMMIT" | "ROLLBACK" | "SET" | "USE"
                ) || st.contains(":=")
            })
    }

    /// Runs `;`-separated statements in `database` (or the one `USE` selected); the
    /// results rendered as the mysql client prints them, one per statement, stopping at
    /// the first error.
    pub fn execute(&mut self, database: &str, sql: &str) -> Result<String> {
        let mut out = Vec::new();
        for st in crate::sql::statement_texts(sql) {
            let t0 = std::time::Instant::now();
            let db = self
                .database
                .clone()
                .unwrap_or_else(|| database.to_string());
            let results = self.statement(&db, st?)?;
            out.push(crate::sql::render_all(&results, t0.elapsed()));
        }
        Ok(out.join("\n"))
    }

    /// [`RemoteSession::execute`]'s results with their values, one per statement.
    pub fn execute_results(&mut self, database: &str, sql: &str) -> Result<Vec<SqlResult>> {
        let mut out = Vec::new();
        for st in crate::sql::statement_texts(sql) {
            let db = self
                .database
                .clone()
                .unwrap_or_else(|| database.to_string());
            out.extend(self.statement(&db, st?)?);
        }
        Ok(out)
    }

    fn statement(&mut self, database: &str, sql: &str) -> Result<Vec<SqlResult>> {
        let word = crate::sql::leading_keyword(sql);
        let upper = sql.trim().to_ascii_uppercase();
        let ok = || vec![SqlResult::ok(0)];
        match word.as_str() {
            "BEGIN" => {
                self.commit()?;
                self.txn = Some(SessionRows::default());
                return Ok(ok());
            }
            "START" if upper.split_whitespace().nth(1) == Some("TRANSACTION") => {
                self.commit()?;
                self.txn = Some(SessionRows::default());
                return Ok(ok());
            }
            "COMMIT" => {
                self.commit()?;
                return Ok(ok());
            }
            "ROLLBACK" => {
                self.txn = None;
                return Ok(ok());
            }
            "SET" => {
                if let Some(on) = autocommit_setting(sql) {
                    if on {
                        // As in MySQL, turning autocommit on commits what is open.
                        self.commit()?;
                    }
                    self.autocommit = on;
                    return Ok(ok());
                }
            }
            "CREATE" | "DROP" | "ALTER" | "TRUNCATE" | "RENAME" => {
                // DDL commits the open transaction first, as in MySQL.
                self.commit()?;
            }
            "USE" => {
                // A data node checks that the database exists (1049 if not).
                self.rc.sql_results_in(database, sql, &mut self.vars)?;
                self.database = Some(use_target(sql));
                return Ok(ok());
            }
            _ => {}
        }
        if self.txn.is_none() && !self.autocommit {
            self.txn = Some(SessionRows::default());
        }
        let Some(rows) = self.txn.as_mut() else {
            return self.rc.sql_results_in(database, sql, &mut self.vars);
        };
        if crate::sql::changes_rows(sql) {
            let captured = self.rc.capture_statement(database, sql, rows, &self.vars);
            let merged = captured.and_then(|(result, changes)| {
                rows.merge(&self.rc, changes)?;
                Ok(vec![result])
            });
            if merged.as_ref().is_err_and(ends_transaction) {
                self.txn = None;
            }
            return merged;
        }
        if let Some(q) = crate::sql::table_select(sql, database) {
            let q = q.with_vars(&self.vars);
            if !q.locks() {
                return Ok(vec![self.rc.select_result(&q, Some(rows), None)?]);
            }
            // A locking read: the rows it read are checked at COMMIT.
            let mut read = Vec::new();
            let out = vec![self.rc.select_result(&q, Some(rows), Some(&mut read))?];
            if let Err(e) = rows.note_reads(&self.rc, read) {
                self.txn = None;
                return Err(e);
            }
            return Ok(out);
        }
        self.rc.sql_results_in(database, sql, &mut self.vars)
    }

    /// Commits the open transaction (nothing when none is open). It is over either
    /// way: committed, or rolled back with the error.
    pub fn commit(&mut self) -> Result<()> {
        let Some(rows) = self.txn.take() else {
            return Ok(());
        };
        let changes: Vec<RowChange> = rows
            .rows
            .into_iter()
            .filter(|c| c.before != c.after)
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        let mut rounds = Rounds::default();
        let applied = self.rc.apply_changes(&mut rounds, &changes);
        rounds.abandon(&self.rc);
        applied.map_err(|e| match e.code {
            626 | 630 => codes::deadlock_timeout().detail(format!(
                "{}; a row this transaction wrote was changed by another one before COMMIT: \
                 it is rolled back, run it again",
                e.message
            )),
            _ if e.is_temporary() => e.detail("the transaction is rolled back: run it again"),
            _ => e,
        })
    }
}

/// `SET [SESSION | @@session. | @@]autocommit = 0 | 1 | OFF | ON`: the setting; None
/// for any other statement.
fn autocommit_setting(sql: &str) -> Option<bool> {
    let t: String = sql
        .trim()
        .trim_end_matches(';')
        .to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let rest = t.strip_prefix("set ")?;
    let rest = rest
        .strip_prefix("session ")
        .or_else(|| rest.strip_prefix("local "))
        .unwrap_or(rest);
    let rest = rest
        .strip_prefix("@@session.")
        .or_else(|| rest.strip_prefix("@@local."))
        .or_else(|| rest.strip_prefix("@@"))
        .unwrap_or(rest);
    let value = rest
        .strip_prefix("autocommit")?
        .trim_start()
        .strip_prefix('=')?
        .trim();
    match value {
        "0" | "off" | "false" => Some(false),
        "1" | "on" | "true" => Some(true),
        _ => None,
    }
}

/// An error after which a statement's transaction is over: the limit (233) or an
/// outcome the session cannot know (4012). A statement's own error (a duplicate key, a
/// bad value, a lock wait) leaves the transaction open, as in MySQL with NDB.
fn ends_transaction(e: &NdbError) -> bool {
    matches!(e.code, 233 | 4012)
}

#[cfg(test)]
mod tests {
    use super::autocommit_setting;

    #[test]
    fn autocommit_settings_are_read_in_each_spelling() {
        for (sql, want) in [
            ("SET autocommit=0", Some(false)),
            ("set AUTOCOMMIT = 1;", Some(true)),
            ("SET SESSION autocommit = OFF", Some(false)),
            ("SET @@session.autocommit=on", Some(true)),
            ("SET @@autocommit = 0", Some(false)),
            ("SET LOCAL autocommit = TRUE", Some(true)),
            ("SET autocommit = 2", None),
            ("SET autocommit_x = 0", None),
            ("SET @x = 0", None),
            ("SET autocommit = 0, @x = 1", None),
            ("SELECT 1", None),
        ] {
            assert_eq!(autocommit_setting(sql), want, "{sql}");
        }
    }
}
