//! The calls into the core's SQL, management and ndbinfo modules.

use crate::errors::R;
use rndb::Value;
use rndb::api::ClusterInner;
use rndb::sql::SqlResult;
use std::sync::Arc;

/// One SQL session per Python `Ndb` (USE, SET @x, BEGIN/COMMIT persist across calls).
pub struct Session {
    inner: rndb::sql::Session,
}

/// Result of the last statement: rows or an affected-row count.
pub enum SqlOutcome {
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    },
    Affected(u64),
    Nothing,
}

impl SqlOutcome {
    /// The outcome of the last of several statements' results (what `execute` returns).
    pub fn of_last(results: Vec<SqlResult>) -> SqlOutcome {
        match results.into_iter().last() {
            Some(SqlResult::Rows { columns, rows }) => SqlOutcome::Rows { columns, rows },
            Some(SqlResult::Affected { rows, .. }) => SqlOutcome::Affected(rows),
            None => SqlOutcome::Nothing,
        }
    }
}

impl Session {
    pub fn new(ndb: rndb::Ndb) -> Session {
        Session {
            inner: rndb::sql::Session::new(ndb),
        }
    }

    /// Runs `;`-separated statements; the outcome of the last one.
    pub fn execute(&mut self, sql: &str) -> R<SqlOutcome> {
        Ok(SqlOutcome::of_last(self.inner.execute(sql)?))
    }

    /// The access path of a statement (EXPLAIN's one-line form).
    pub fn explain(&mut self, sql: &str) -> R<String> {
        self.inner.explain(sql)
    }

    /// The session's current database (changed by USE).
    pub fn database(&self) -> &str {
        self.inner.database()
    }

    pub fn in_transaction(&self) -> bool {
        self.inner.in_transaction()
    }
}

pub fn mgm(cluster: &Arc<ClusterInner>, command: &str) -> R<String> {
    rndb::mgm::execute(cluster, command)
}

pub fn ndbinfo(cluster: &Arc<ClusterInner>, table: &str) -> R<(Vec<String>, Vec<Vec<Value>>)> {
    rndb::ndbinfo::lookup(cluster, "ndbinfo", table)
        .unwrap_or_else(|| Err(rndb::ndbinfo::no_such_table("ndbinfo", table)))
}
