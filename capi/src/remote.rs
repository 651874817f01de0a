//! The C ABI against data nodes over TCP: a `host:port` connectstring names a
//! management server (`rndb_mgmd`), and the connection is a `RemoteCluster` (NDB
//! API's transporter to the data nodes, `rndb_core::cluster::remote`).
//!
//! What runs where:
//! - the dictionary: tables and indexes are read from a data node (`TableReq`) and
//!   kept as definition-only runtimes (`TableRuntime::definition_only`), so that the
//!   operation, record and scan objects of the C ABI name them as they name embedded
//!   tables; `createTable`, `createIndex` and the drops travel as SQL, rendered from
//!   the same spec the embedded dictionary takes (`TableSpec::create_statement`);
//! - key operations: each `execute` is one round of a `RemoteTransaction` at the TC of
//!   the first operation's primary (NoCommit keeps it open with its row locks;
//!   Commit and Rollback end it). AbortOnError with reads runs the round as NoCommit
//!   and commits only when every read found its row (as embedded, nothing commits that
//!   the missing row aborted). A refused round has aborted the whole transaction;
//!   the error goes to the transaction, and to the operation when the round had one.
//!   AO_IgnoreError travels with the round (`execute_ignoring_errors`, and
//!   `execute_submit_with` for `sendPollNdb`): a read that finds no row, and a write
//!   that fails on its row (626 no row, 630 duplicate key, 893 a unique value taken in
//!   its node group), fail only their operation and the others go on. A unique value
//!   found taken in another node group still refuses the round at the TC; when the
//!   round was the transaction's only work so far, that fails only its operation too;
//! - `sendPollNdb`: the prepared transactions that commit in one round (no scans, not
//!   yet executed, no reads that AbortOnError would make wait for a second round) are
//!   all sent first and then waited for in order, so a batch costs about one round
//!   trip; those that only do committed key reads skip the TC: the batch's reads of
//!   one table go in one request per data node, to the primaries (as
//!   `Ndb::read_batch_visit` serves them embedded); the others run one after the
//!   other;
//! - scans: committed-read scans of the table or of an ordered index over every node
//!   group (`RemoteScan`). An LM_Exclusive scan locks each batch it returns in the
//!   transaction (one NoCommit round of exclusive key reads of the batch's rows,
//!   whose values, read under the lock, are the ones returned; a row deleted since the
//!   scan saw it is skipped), so `updateCurrentTuple` and `deleteCurrentTuple` change
//!   rows the transaction holds, as NDB's scan takeover does; the locks are held to
//!   the transaction's end. LM_Read and LM_SimpleRead scans read committed rows (NDB
//!   releases their shared lock when the scan moves on).
//!
//! Files: this one (the connection's dictionary and SQL), `remote_exec` (rounds,
//! outcomes, scans), `remote_batch` (`sendPollNdb`).
//!
//! Invariants: a transaction's `remote` is set only while `close_work` is (so
//! `close_core` drops it, rolling back an open transaction); a remote table runtime
//! is never handed to the embedded engine.

pub(crate) use crate::remote_batch::execute_prepared_remote;
pub(crate) use crate::remote_exec::lock_rows;
use rndb_core::api::TableRuntime;
use rndb_core::api::dict::TableSpec;
use rndb_core::cluster::remote::RemoteCluster;
use rndb_core::cluster::remote_session::RemoteSession;
use rndb_core::error::{Result, codes};
use rndb_core::schema::IndexKind;
use rndb_core::sql::SqlResult;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// What an Ndb object keeps of a remote cluster.
pub(crate) struct RemoteNdb {
    pub cluster: Arc<RemoteCluster>,
    /// Definition-only runtimes by (database, lowercased name), remade when the
    /// cluster's definition changed.
    tables: HashMap<(String, String), Arc<TableRuntime>>,
    /// The Ndb object's SQL session (BEGIN ... COMMIT over TCP), once SQL ran.
    session: Option<RemoteSession>,
}

use rndb_core::sql::quote_ident as ident;

impl RemoteNdb {
    pub fn new(cluster: Arc<RemoteCluster>) -> RemoteNdb {
        RemoteNdb {
            cluster,
            tables: HashMap::new(),
            session: None,
        }
    }

    /// A table's definition-only runtime (723 when there is none).
    pub fn table(&mut self, database: &str, name: &str) -> Result<Arc<TableRuntime>> {
        let def = self.cluster.table(database, name)?;
        let k = (database.to_string(), name.to_ascii_lowercase());
        if let Some(rt) = self.tables.get(&k)
            && Arc::ptr_eq(&rt.def, &def)
        {
            return Ok(rt.clone());
        }
        let rt = TableRuntime::definition_only(def, database);
        if let Some(old) = self.tables.insert(k, rt.clone()) {
            // Objects still naming the old definition see it gone.
            old.dropped.store(true, Ordering::Release);
        }
        Ok(rt)
    }

    /// The position of index `name` in `rt` (SQL names a unique hash index
    /// `NAME$unique`: looked up by the NDB API name too).
    pub fn index_of(rt: &TableRuntime, name: &str) -> Option<usize> {
        rt.def.index_by_api_name(name).map(|(i, _)| i)
    }

    fn forget(&mut self, database: &str, name: &str) {
        let k = (database.to_string(), name.to_ascii_lowercase());
        if let Some(old) = self.tables.remove(&k) {
            old.dropped.store(true, Ordering::Release);
        }
    }

    pub fn create_table(&mut self, database: &str, spec: &TableSpec) -> Result<()> {
        self.cluster.sql(database, &spec.create_statement()?)?;
        self.forget(database, &spec.name);
        Ok(())
    }

    pub fn drop_table(&mut self, database: &str, name: &str) -> Result<()> {
        self.cluster
            .sql(database, &format!("DROP TABLE {}", ident(name)))?;
        self.forget(database, name);
        Ok(())
    }

    pub fn create_index(
        &mut self,
        database: &str,
        table: &str,
        name: &str,
        kind: IndexKind,
        columns: &[String],
    ) -> Result<()> {
        let cols: Vec<String> = columns.iter().map(|c| ident(c)).collect();
        let sql = match kind {
            IndexKind::OrderedIndex => format!(
                "CREATE INDEX {} ON {} ({})",
                ident(name),
                ident(table),
                cols.join(",")
            ),
            IndexKind::UniqueHashIndex => format!(
                "CREATE UNIQUE INDEX {} USING HASH ON {} ({})",
                ident(name),
                ident(table),
                cols.join(",")
            ),
        };
        self.cluster.sql(database, &sql)?;
        self.forget(database, table);
        Ok(())
    }

    pub fn drop_index(&mut self, database: &str, table: &str, name: &str) -> Result<()> {
        let rt = self.table(database, table)?;
        let real = Self::index_of(&rt, name)
            .map(|i| rt.def.indexes[i].name.clone())
            .ok_or_else(|| codes::no_such_index(name))?;
        self.cluster.sql(
            database,
            &format!("DROP INDEX {} ON {}", ident(&real), ident(table)),
        )?;
        self.forget(database, table);
        Ok(())
    }

    /// Runs SQL in the Ndb object's session over the cluster (BEGIN ... COMMIT kept
    /// at this API node): each statement's result.
    pub fn sql(&mut self, database: &str, text: &str) -> Result<Vec<SqlResult>> {
        let session = self
            .session
            .get_or_insert_with(|| RemoteSession::new(self.cluster.clone()));
        session.execute_results(database, text)
    }
}
