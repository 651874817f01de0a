//! The calls into the core's SQL, management and ndbinfo modules.

use crate::errors::R;
use rndb::Value;
use rndb::api::ClusterInner;
use rndb::error::codes;
use std::sync::Arc;

/// One SQL session per Python `Ndb` (USE, SET @x, BEGIN/COMMIT persist across calls).
pub struct Session {}

/// Result of the last statement: rows or an affected-row count.
pub enum SqlOutcome {
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    },
    Affected(u64),
    Nothing,
}

impl Session {
    pub fn new(_ndb: rndb::Ndb) -> Session {
        Session {}
    }

    pub fn execute(&mut self, _sql: &str) -> R<SqlOutcome> {
        Err(codes::unsupported("SQL (the core has no sql module yet)"))
    }
}

pub fn mgm(cluster: &Arc<ClusterInner>, command: &str) -> R<String> {
    rndb::mgm::execute(cluster, command)
}

pub fn ndbinfo(cluster: &Arc<ClusterInner>, table: &str) -> R<(Vec<String>, Vec<Vec<Value>>)> {
    rndb::ndbinfo::lookup(cluster, "ndbinfo", table)
        .unwrap_or_else(|| Err(rndb::ndbinfo::no_such_table("ndbinfo", table)))
}
