//! The SQL subset a MySQL Cluster user runs through mysqld, executed directly on the
//! engine's API: a [`Session`] (like one mysql client connection) runs `;`-separated
//! statements and returns MySQL's results; [`render`] and [`render_error`] print them as
//! the mysql client does.
//!
//! Parsing: SELECT, INSERT, REPLACE, UPDATE, DELETE and SET go through sqlparser
//! (MySqlDialect, [`convert`]); DDL and the other statements through rndb's own parser
//! ([`ddl`]), which knows NDB's syntax. Both produce [`ir`], which [`select`], [`dml`]
//! and [`schema`] execute, reading rows through the access paths of [`plan`].
//!
//! Invariants: nothing panics on any input (the lexer bounds statement size and
//! nesting); an autocommit statement runs in one NDB transaction while it touches at
//! most MaxNoOfConcurrentOperations rows (1000 with `ndb_use_transactions=0`) and
//! commits every that-many rows beyond; inside BEGIN ... COMMIT (or with autocommit=0)
//! every statement uses the session's transaction, and an engine error in a statement
//! that wrote rows rolls the whole transaction back (NDB has no statement rollback).
//! Temporary errors such as 266 are reported, never retried silently.

mod assign;
mod capture;
mod capture_groups;
mod convert;
mod ddl;
mod dml;
mod dml_unique;
mod errors;
mod eval;
mod ir;
mod lexer;
mod meta;
mod plan;
mod render;
mod row_filter;
mod schema;
mod select;
mod select_over;
mod session_vars;

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_capture;
#[cfg(test)]
mod tests_ci;
#[cfg(test)]
mod tests_disk;
#[cfg(test)]
mod tests_disk_rows;
#[cfg(test)]
mod tests_dml;
#[cfg(test)]
mod tests_errors;

pub use capture::{
    CAPTURE_HIDDEN_KEY_BASE, CaptureInputs, CapturedRow, OverlayRow, changes_rows, leading_keyword,
};
pub use capture_groups::{
    GroupCapture, changed_table, group_capture, insert_select, keys_select, pinned_keys,
};
pub use errors::render_error;
pub(crate) use errors::{no_database, too_big};
pub(crate) use plan::Access;

/// `name` as a MySQL quoted identifier (`` `a``b` `` for a``b): how the clients that
/// speak SQL to the data nodes name tables, indexes and files in the statements they
/// make.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Parses one statement.
fn parse_statement(st: &lexer::Statement<'_>) -> Result<Stmt> {
    let Some(first) = st.tokens.first() else {
        return Err(errors::empty_query());
    };
    let is_explain = first.is_kw("EXPLAIN") || first.is_kw("DESCRIBE") || first.is_kw("DESC");
    if is_explain && st.tokens.len() > 1 && convert::handles(&st.tokens[1]) {
        let start = st.tokens[1].start;
        let sub = lexer::Statement {
            text: &st.text[start..],
            tokens: st.tokens[1..]
                .iter()
                .map(|t| lexer::Token {
                    tok: t.tok.clone(),
                    start: t.start - start,
                    end: t.end - start,
                })
                .collect(),
        };
        return Ok(Stmt::Explain(Box::new(convert::parse(&sub)?)));
    }
    if convert::handles(first) {
        convert::parse(st)
    } else {
        match ddl::parse(st)? {
            Some(c) => Ok(Stmt::Command(c)),
            None => Err(lexer::syntax_at(st.text, 0)),
        }
    }
}

/// MySQL's error for the first statement of `sql` that does not parse (1064), else Ok:
/// what a data node answers a statement it would refuse to run, when the statement is
/// not SQL at all.
pub(crate) fn check_syntax(sql: &str) -> Result<()> {
    for st in lexer::statements(sql) {
        parse_statement(&st?)?;
    }
    Ok(())
}

/// The texts of `sql`'s `;`-separated statements (empty ones skipped); a lexing error
/// in place of the statement where it occurs.
pub fn statement_texts(sql: &str) -> Vec<std::result::Result<&str, NdbError>> {
    lexer::statements(sql)
        .into_iter()
        .map(|st| st.map(|st| st.text))
        .collect()
}
pub use render::{render, render_all};
pub use row_filter::RowFilter;
pub(crate) use select::TableRead;
pub(crate) use select_over::{TableSelect, selects_ndb_table, table_select};
pub use session_vars::{MAX_SESSION_VARS, SessionVars};

/// Whether `db` is one of the virtual databases (ndbinfo, information_schema), whose
/// tables no data node stores.
pub fn is_virtual_database(db: &str) -> bool {
    meta::is_virtual(db)
}

use crate::api::{AbortOption, ExecType, Ndb, TableRuntime, Transaction, TxState};
use crate::error::{NdbError, Result};
use crate::schema::{Datetime, Value};
use ir::{SetTarget, Stmt, TableName};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The result of one statement.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlResult {
    /// A result set.
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    },
    /// DML and DDL (DDL: rows 0). `info` is MySQL's extra line, e.g.
    /// "Records: 3  Duplicates: 0  Warnings: 0".
    Affected {
        rows: u64,
        last_insert_id: Option<u64>,
        info: Option<String>,
    },
}

impl SqlResult {
    pub(crate) fn ok(rows: u64) -> SqlResult {
        SqlResult::Affected {
            rows,
            last_insert_id: None,
            info: None,
        }
    }
}

static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// Session variables, user variables and the current database.
pub(crate) struct Vars {
    pub db: Option<String>,
    pub user: HashMap<String, Value>,
    pub sys: HashMap<String, Value>,
    pub last_insert_id: u64,
    pub rng: Cell<u64>,
    pub connection_id: u64,
}

impl Vars {
    pub fn env(&self, now: Datetime) -> eval::Env<'_> {
        eval::Env {
            user_vars: &self.user,
            sys_vars: &self.sys,
            now,
            last_insert_id: self.last_insert_id,
            database: self.db.as_deref(),
            connection_id: self.connection_id,
            rng: &self.rng,
            ci_columns: &[],
        }
    }

    /// A new connection's variables: no user variables, the system variables' defaults.
    pub fn standalone(db: Option<String>) -> Vars {
        let connection_id = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            ^ connection_id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Vars {
            db,
            user: HashMap::new(),
            sys: sys_var_defaults().clone(),
            last_insert_id: 0,
            rng: Cell::new(seed | 1),
            connection_id,
        }
    }

    fn flag(&self, name: &str) -> bool {
        self.sys.get(name).and_then(eval::truth).unwrap_or(true)
    }
}

/// The session's open transaction (BEGIN ... COMMIT, or autocommit=0).
pub(crate) struct TxnState {
    tx: Option<Transaction>,
    /// BEGIN / START TRANSACTION was issued.
    pub explicit: bool,
    pub autocommit: bool,
    /// Rows touched by the open transaction.
    pub rows: usize,
    /// The running statement executed write operations in the session's transaction.
    pub stmt_wrote: bool,
    /// Transactions started keep their written rows' keys (`capture.rs`).
    pub capture: bool,
    /// Rows a captured statement is given by the API node (several node groups): the
    /// keys an UPDATE or DELETE considers (its ORDER BY ... LIMIT), or the rows an
    /// INSERT ... SELECT inserts. None: it finds them itself.
    pub given_rows: Option<Vec<Vec<Value>>>,
}

impl TxnState {
    /// Statements run in the session's transaction (not autocommit).
    pub fn active(&self) -> bool {
        self.explicit || !self.autocommit
    }

    /// The open transaction has written rows (its own uncommitted inserts are not in the
    /// ordered indexes yet, so its reads must not use ordered-index scans).
    pub fn has_written(&self) -> bool {
        self.tx
            .as_ref()
            .is_some_and(|t| t.state() == TxState::Open && t.has_written())
    }

    /// The session's transaction, started on first use.
    pub fn tx(&mut self, ndb: &Ndb) -> Result<&mut Transaction> {
        if self.tx.as_ref().is_some_and(|t| t.state() != TxState::Open) {
            self.tx = None;
        }
        match &mut self.tx {
            Some(t) => Ok(t),
            slot => {
                let mut t = ndb.start_transaction()?;
                if self.capture {
                    t.keep_written_keys();
                    t.set_lock_timeout(capture::CAPTURE_LOCK_WAIT);
                }
                self.rows = 0;
                Ok(slot.insert(t))
            }
        }
    }

    pub fn commit(&mut self) -> Result<()> {
        self.rows = 0;
        if let Some(mut t) = self.tx.take()
            && t.state() == TxState::Open
        {
            t.execute(ExecType::Commit, AbortOption::AbortOnError)?;
        }
        Ok(())
    }

    /// The open transaction, if there is one.
    pub fn open_tx(&mut self) -> Option<&mut Transaction> {
        self.tx.as_mut().filter(|t| t.state() == TxState::Open)
    }

    pub fn rollback(&mut self) {
        self.rows = 0;
        if let Some(mut t) = self.tx.take() {
            t.close();
        }
    }

    fn aborted(&self) -> bool {
        self.tx
            .as_ref()
            .is_some_and(|t| t.state() == TxState::Aborted)
    }
}

/// One client connection: current database, variables, optional open transaction.
pub struct Session {
    pub(crate) ndb: Ndb,
    pub(crate) vars: Vars,
    pub(crate) txn: TxnState,
    cache: HashMap<String, Stmt>,
}

/// Statements cached per session (parsed form), and the longest text cached.
const CACHE_ENTRIES: usize = 256;
const CACHE_MAX_TEXT: usize = 4096;

/// [`default_sys_vars`], built once: every session starts from a copy, and a client's
/// variables are compared with it on every statement a data node runs for it.
pub(crate) fn sys_var_defaults() -> &'static HashMap<String, Value> {
    static DEFAULTS: std::sync::OnceLock<HashMap<String, Value>> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(default_sys_vars)
}

/// System variables a session knows, with their defaults.
fn default_sys_vars() -> HashMap<String, Value> {
    let s = |v: &str| Value::Str(v.to_string());
    let i = Value::Int;
    let vars: Vec<(&str, Value)> = vec![
        ("autocommit", i(1)),
        ("ndb_use_transactions", i(1)),
        ("ndb_use_exact_count", i(0)),
        ("ndb_force_send", i(1)),
        ("ndb_batch_size", i(32768)),
        ("ndb_autoincrement_prefetch_sz", i(512)),
        ("ndb_table_no_logging", i(0)),
        ("ndb_table_temporary", i(0)),
        ("ndb_index_stat_enable", i(1)),
        ("ndb_join_pushdown", i(1)),
        ("ndb_deferred_constraints", i(0)),
        ("ndb_blob_read_batch_bytes", i(65536)),
        ("ndb_blob_write_batch_bytes", i(65536)),
        ("ndb_optimized_node_selection", i(3)),
        (
            "ndb_optimization_delay",
            i(crate::api::optimize::DEFAULT_OPTIMIZATION_DELAY_MS as i64),
        ),
        ("ndb_read_backup", i(1)),
        ("ndb_log_bin", i(0)),
        ("ndb_default_column_format", s("FIXED")),
        (
            "sql_mode",
            s(
                "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION",
            ),
        ),
        ("character_set_client", s("utf8mb4")),
        ("character_set_connection", s("utf8mb4")),
        ("character_set_results", s("utf8mb4")),
        ("character_set_server", s("utf8mb4")),
        ("collation_connection", s("utf8mb4_0900_ai_ci")),
        ("time_zone", s("SYSTEM")),
        ("transaction_isolation", s("READ-COMMITTED")),
        ("tx_isolation", s("READ-COMMITTED")),
        ("transaction_read_only", i(0)),
        ("default_storage_engine", s("ndbcluster")),
        ("storage_engine", s("ndbcluster")),
        ("version", s(eval::VERSION)),
        (
            "version_comment",
            s("rndb: MySQL Cluster data nodes in Rust"),
        ),
        ("sql_log_bin", i(1)),
        ("foreign_key_checks", i(1)),
        ("unique_checks", i(1)),
        ("sql_safe_updates", i(0)),
        ("sql_select_limit", Value::UInt(u64::MAX)),
        ("max_execution_time", i(0)),
        ("wait_timeout", i(28800)),
        ("interactive_timeout", i(28800)),
        ("net_read_timeout", i(30)),
        ("net_write_timeout", i(60)),
        ("max_allowed_packet", i(67_108_864)),
        ("lock_wait_timeout", i(31_536_000)),
        ("innodb_lock_wait_timeout", i(50)),
        ("group_concat_max_len", i(1024)),
        ("big_tables", i(0)),
        ("auto_increment_increment", i(1)),
        ("auto_increment_offset", i(1)),
        ("sql_notes", i(1)),
        ("sql_warnings", i(0)),
        ("sql_auto_is_null", i(0)),
        ("sql_big_selects", i(1)),
        ("sql_quote_show_create", i(1)),
        ("profiling", i(0)),
        ("div_precision_increment", i(4)),
        ("names", s("utf8mb4")),
        ("optimizer_switch", s("")),
        ("session_track_schema", i(1)),
        ("session_track_state_change", i(0)),
        (
            "session_track_system_variables",
            s(
                "time_zone,autocommit,character_set_client,character_set_results,character_set_connection",
            ),
        ),
        ("session_track_transaction_info", s("OFF")),
        ("explicit_defaults_for_timestamp", i(1)),
        ("have_ndbcluster", s("YES")),
        ("port", i(3306)),
        ("hostname", s("localhost")),
        ("server_id", i(1)),
        ("lower_case_table_names", i(0)),
        ("max_connections", i(151)),
    ];
    vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn now_utc() -> Datetime {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Datetime::from_epoch_seconds(secs)
}

impl Session {
    pub fn new(ndb: Ndb) -> Session {
        let db = ndb.database().to_string();
        if !db.is_empty() && !meta::is_virtual(&db) {
            meta::create_database(ndb.cluster(), &db);
        }
        Session {
            vars: Vars::standalone((!db.is_empty()).then_some(db)),
            ndb,
            txn: TxnState {
                tx: None,
                explicit: false,
                autocommit: true,
                rows: 0,
                stmt_wrote: false,
                capture: false,
                given_rows: None,
            },
            cache: HashMap::new(),
        }
    }

    /// The current database ("" when none is selected).
    pub fn database(&self) -> &str {
        self.vars.db.as_deref().unwrap_or("")
    }

    /// Whether a transaction is open (BEGIN issued, or autocommit off).
    pub fn in_transaction(&self) -> bool {
        self.txn.active()
    }

    /// Runs one or more `;`-separated statements; returns one result per statement,
    /// stopping at the first error.
    pub fn execute(&mut self, sql: &str) -> std::result::Result<Vec<SqlResult>, NdbError> {
        let mut out = Vec::new();
        for st in lexer::statements(sql) {
            let st = st?;
            out.push(self.run(&st)?);
        }
        Ok(out)
    }

    /// The access path a SELECT, UPDATE or DELETE would use, e.g.
    /// "t1: primary key lookup (1 key)", "t1: full table scan".
    pub fn explain(&mut self, sql: &str) -> std::result::Result<String, NdbError> {
        let mut lines = Vec::new();
        for st in lexer::statements(sql) {
            let st = st?;
            let stmt = self.parse(&st)?;
            let stmt = match stmt {
                Stmt::Explain(s) => *s,
                s => s,
            };
            let (table, plan, rt) = self.plan_of(&stmt)?;
            lines.push(match (plan, rt) {
                (Some(p), Some(rt)) => format!("{table}: {}", p.describe(&rt.def).2),
                _ if table == "NULL" => "no table".to_string(),
                _ => format!("{table}: virtual table"),
            });
        }
        Ok(lines.join("\n"))
    }

    fn plan_of(
        &mut self,
        stmt: &Stmt,
    ) -> Result<(String, Option<plan::Plan>, Option<Arc<TableRuntime>>)> {
        match stmt {
            Stmt::Select(sel) => select::explain(self, sel),
            Stmt::Update(u) => dml::explain_update(self, u),
            Stmt::Delete(d) => dml::explain_delete(self, d),
            Stmt::Insert(i) => match &i.source {
                ir::InsertSource::Select(sel) => select::explain(self, sel),
                ir::InsertSource::Values(_) => Ok((i.table.name.clone(), None, None)),
            },
            _ => Err(errors::unsupported("EXPLAIN of this statement")),
        }
    }

    pub(crate) fn now(&self) -> Datetime {
        now_utc()
    }

    /// Parses one statement (with the per-session cache of parsed statements).
    fn parse(&mut self, st: &lexer::Statement<'_>) -> Result<Stmt> {
        if let Some(s) = self.cache.get(st.text) {
            return Ok(s.clone());
        }
        let stmt = parse_statement(st)?;
        if st.text.len() <= CACHE_MAX_TEXT && !matches!(stmt, Stmt::Command(_)) {
            if self.cache.len() >= CACHE_ENTRIES {
                self.cache.clear();
            }
            self.cache.insert(st.text.to_string(), stmt.clone());
        }
        Ok(stmt)
    }

    fn run(&mut self, st: &lexer::Statement<'_>) -> Result<SqlResult> {
        let stmt = self.parse(st)?;
        self.txn.stmt_wrote = false;
        let r = self.exec(stmt);
        if r.is_err() && self.txn.active() && (self.txn.aborted() || self.txn.stmt_wrote) {
            // NDB has no statement rollback: an engine error that aborted the
            // transaction, or an error after the statement wrote rows, ends it.
            self.txn.rollback();
        }
        r
    }

    fn exec(&mut self, stmt: Stmt) -> Result<SqlResult> {
        match stmt {
            Stmt::Select(sel) => {
                let (columns, rows) = select::run(self, &sel)?;
                Ok(SqlResult::Rows { columns, rows })
            }
            Stmt::Insert(i) => dml::insert(self, &i),
            Stmt::Update(u) => dml::update(self, &u),
            Stmt::Delete(d) => dml::delete(self, &d),
            Stmt::Set(items) => self.set(items),
            Stmt::Explain(s) => self.explain_rows(&s),
            Stmt::Command(c) => schema::run(self, c),
        }
    }

    fn explain_rows(&mut self, stmt: &Stmt) -> Result<SqlResult> {
        let (table, plan, rt) = self.plan_of(stmt)?;
        let columns = ["id", "select_type", "table", "type", "key", "rows", "Extra"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let kind = match stmt {
            Stmt::Update(_) => "UPDATE",
            Stmt::Delete(_) => "DELETE",
            Stmt::Insert(_) => "INSERT",
            _ => "SIMPLE",
        };
        let s = |x: &str| Value::Str(x.to_string());
        let row = match (plan, rt) {
            (Some(p), Some(rt)) => {
                let (ty, key, desc) = p.describe(&rt.def);
                let rows = match &p.access {
                    plan::Access::Keys(k) => k.len() as u64,
                    plan::Access::Empty => 0,
                    _ => rt.row_count(),
                };
                vec![
                    Value::Int(1),
                    s(kind),
                    s(&table),
                    s(ty),
                    key.map(Value::Str).unwrap_or(Value::Null),
                    Value::UInt(rows),
                    s(&desc),
                ]
            }
            _ => vec![
                Value::Int(1),
                s(kind),
                if table == "NULL" {
                    Value::Null
                } else {
                    s(&table)
                },
                Value::Null,
                Value::Null,
                Value::Null,
                s(if table == "NULL" {
                    "No tables used"
                } else {
                    "virtual table"
                }),
            ],
        };
        Ok(SqlResult::Rows {
            columns,
            rows: vec![row],
        })
    }

    /// SET @x = ..., SET var = ... (known session variables only).
    fn set(&mut self, items: Vec<(SetTarget, ir::Expr)>) -> Result<SqlResult> {
        let now = self.now();
        let mut values = Vec::with_capacity(items.len());
        {
            let env = self.vars.env(now);
            for (t, e) in &items {
                let v = match e {
                    ir::Expr::Default => Value::Null,
                    e => eval::eval(e, &eval::Ctx::new(&env, &[]))?,
                };
                values.push((t.clone(), v, matches!(e, ir::Expr::Default)));
            }
        }
        for (t, v, is_default) in values {
            match t {
                SetTarget::User(n) => {
                    self.vars.user.insert(n, v);
                }
                SetTarget::System(n, _global) => self.set_sys(&n, v, is_default)?,
                SetTarget::Names | SetTarget::Transaction => {}
            }
        }
        Ok(SqlResult::ok(0))
    }

    fn set_sys(&mut self, name: &str, v: Value, is_default: bool) -> Result<()> {
        let defaults = sys_var_defaults();
        let Some(default) = defaults.get(name) else {
            return Err(errors::unknown_variable(name));
        };
        let v = if is_default { default.clone() } else { v };
        let text = eval::to_text(&v).unwrap_or_else(|| "NULL".into());
        let v = match default {
            Value::Int(_) => match &v {
                Value::Str(s) => match s.to_ascii_uppercase().as_str() {
                    "ON" | "TRUE" => Value::Int(1),
                    "OFF" | "FALSE" => Value::Int(0),
                    _ => match s.parse::<i64>() {
                        Ok(i) => Value::Int(i),
                        Err(_) => return Err(errors::bad_variable_value(name, &text)),
                    },
                },
                Value::Null => return Err(errors::bad_variable_value(name, "NULL")),
                other => match eval::to_i128(other) {
                    Some(i) => Value::Int(i.clamp(i64::MIN as i128, i64::MAX as i128) as i64),
                    None => return Err(errors::bad_variable_value(name, &text)),
                },
            },
            _ => v,
        };
        if matches!(name, "autocommit" | "ndb_use_transactions") {
            let b = eval::truth(&v).unwrap_or(false);
            if !matches!(v, Value::Int(0) | Value::Int(1)) {
                return Err(errors::bad_variable_value(name, &text));
            }
            if name == "autocommit" {
                if b && !self.txn.autocommit {
                    // turning autocommit on commits the open transaction
                    self.txn.commit()?;
                    self.txn.explicit = false;
                }
                self.txn.autocommit = b;
            }
        }
        self.vars.sys.insert(name.to_string(), v);
        Ok(())
    }

    /// Rows per transaction of an autocommit statement.
    pub(crate) fn batch_rows(&self) -> usize {
        if self.vars.flag("ndb_use_transactions") {
            self.max_operations()
        } else {
            1000
        }
    }

    /// MaxNoOfConcurrentOperations of the data nodes.
    pub(crate) fn max_operations(&self) -> usize {
        self.ndb
            .cluster()
            .data_nodes
            .first()
            .and_then(|n| n.config.get_u64("MaxNoOfConcurrentOperations"))
            .unwrap_or(32768)
            .max(1) as usize
    }

    /// The database a table name refers to (1046 when none).
    pub(crate) fn db_of(&self, t: &TableName) -> Result<String> {
        match &t.db {
            Some(d) => Ok(d.clone()),
            None => self.vars.db.clone().ok_or_else(errors::no_database),
        }
    }

    /// An Ndb object for another database.
    pub(crate) fn ndb_for(&self, db: &str) -> Ndb {
        let mut n = self.ndb.clone();
        n.set_database(db);
        n
    }

    /// An NDB table (1146 with the database in the text when missing).
    pub(crate) fn table(&self, db: &str, name: &str) -> Result<Arc<TableRuntime>> {
        self.ndb.cluster().table(db, name).map_err(|e| {
            if e.code == 723 {
                errors::no_such_table(db, name)
            } else {
                e
            }
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.txn.rollback();
    }
}
