//! The embedded default's `rndb.Ndb` (`Cluster.embedded`): the data nodes of `rndbd`,
//! running in this process (`nodes.rs`), reached as a client of a cluster of processes
//! reaches them — through the cluster's `MgmClient` and its `RemoteCluster`: SQL in a
//! session (`RemoteSession`), DDL as SQL (`TableSpec::create_statement`), batched key
//! reads and inserts through the TCs, transactions in rounds (`RemoteTransaction`),
//! scans over every node group (`RemoteScanIterator`).
//!
//! Where this differs from the direct engines (`ndb_direct.rs`): `transaction()` is a
//! `RemoteTransaction` (the same calls; its failed write aborts the whole transaction,
//! as over TCP); an SQL transaction (BEGIN ... COMMIT) is checked at COMMIT instead of
//! holding row locks (`cluster::remote_session`); a scan outside a transaction reads
//! committed rows whatever its lock mode.
//!
//! Invariant: every call that reaches the nodes runs detached from the interpreter;
//! once the cluster is closed every call raises 4009 (the client's closed error).

use crate::convert::{column_positions, key_values, names, outcome_to_py};
use crate::errors::{R, err, guard, to_pyerr};
use crate::lock_detached;
use crate::mgmclient::{MgmClient, insert_rows, read_rows};
use crate::reader::{Reader, row_to_py};
use crate::remote_scan::{IndexArgs, RemoteScanIterator};
use crate::remote_txn::RemoteTransaction;
use crate::sqlglue::SqlOutcome;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use rndb::api::TableSpec;
use rndb::cluster::remote::RemoteCluster;
use rndb::cluster::remote_session::RemoteSession;
use rndb::schema::{TableDef, Value};
use rndb::sql::{SessionVars, SqlResult, quote_ident as ident};
use std::sync::{Arc, Mutex};

/// Keys per request of `Reader.get_many`.
const CHUNK_KEYS: usize = 32_768;

/// See the module notes.
pub(crate) struct NodesNdb {
    client: Py<MgmClient>,
    database: String,
    /// This object's SQL session (USE, variables, BEGIN ... COMMIT).
    session: Mutex<Option<RemoteSession>>,
}

impl NodesNdb {
    pub(crate) fn new(client: Py<MgmClient>, database: &str) -> NodesNdb {
        NodesNdb {
            client,
            database: database.to_string(),
            session: Mutex::new(None),
        }
    }

    /// Runs `f` on the data nodes' connection, detached from the interpreter.
    fn with_data<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Arc<RemoteCluster>) -> R<T> + Send,
    ) -> PyResult<T> {
        let client = self.client.get();
        py.detach(|| guard(|| f(&client.data()?)))
            .map_err(|e| to_pyerr(py, e))
    }

    /// Statements run outside the SQL session (DDL of the NDB API calls).
    fn sql(&self, py: Python<'_>, sql: &str) -> PyResult<Vec<SqlResult>> {
        let db = &self.database;
        self.with_data(py, |d| {
            d.sql_results_in(db, sql, &mut SessionVars::default())
        })
    }

    fn table_def(
        &self,
        py: Python<'_>,
        table: &str,
    ) -> PyResult<(Arc<RemoteCluster>, Arc<TableDef>)> {
        self.client.get().table_def(py, &self.database, table)
    }

    pub(crate) fn database(&self) -> &str {
        &self.database
    }

    pub(crate) fn transaction(&self, py: Python<'_>) -> PyResult<RemoteTransaction> {
        let data = self.with_data(py, |d| Ok(d.clone()))?;
        Ok(RemoteTransaction::start(
            self.client.clone_ref(py),
            data.transaction(),
            &self.database,
        ))
    }

    pub(crate) fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let results = self.sql(py, "SHOW TABLES")?;
        let mut out = Vec::new();
        if let Some(SqlResult::Rows { rows, .. }) = results.into_iter().last() {
            for row in rows {
                if let Some(Value::Str(name)) = row.into_iter().next() {
                    out.push(name);
                }
            }
        }
        Ok(out)
    }

    pub(crate) fn create_table(&self, py: Python<'_>, spec: TableSpec) -> PyResult<()> {
        let stmt = spec.create_statement().map_err(err)?;
        self.sql(py, &stmt).map(|_| ())
    }

    pub(crate) fn drop_table(&self, py: Python<'_>, name: &str, if_exists: bool) -> PyResult<bool> {
        let db = &self.database;
        self.with_data(py, |d| {
            match d.table(db, name) {
                Ok(_) => {}
                Err(e) if if_exists && e.code == rndb::error::codes::no_such_table("").code => {
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
            d.sql_results_in(
                db,
                &format!("DROP TABLE {}", ident(name)),
                &mut SessionVars::default(),
            )?;
            Ok(true)
        })
    }

    pub(crate) fn truncate_table(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.sql(py, &format!("TRUNCATE TABLE {}", ident(name)))
            .map(|_| ())
    }

    pub(crate) fn columns(&self, py: Python<'_>, table: &str) -> PyResult<Vec<String>> {
        let (_, def) = self.table_def(py, table)?;
        Ok(def.visible_columns().map(|(_, c)| c.name.clone()).collect())
    }

    /// Runs `sql` in this object's session.
    fn session_results(&self, py: Python<'_>, sql: &str) -> PyResult<Vec<SqlResult>> {
        let db = &self.database;
        let session = &self.session;
        self.with_data(py, |d| {
            let mut s = lock_detached(session);
            s.get_or_insert_with(|| RemoteSession::new(d.clone()))
                .execute_results(db, sql)
        })
    }

    pub(crate) fn execute<'py>(&self, py: Python<'py>, sql: &str) -> PyResult<Bound<'py, PyAny>> {
        let results = self.session_results(py, sql)?;
        outcome_to_py(py, SqlOutcome::of_last(results))
    }

    /// Each statement's access path from its EXPLAIN row ("t1: full table scan").
    pub(crate) fn explain(&self, py: Python<'_>, sql: &str) -> PyResult<String> {
        let mut lines = Vec::new();
        for st in rndb::sql::statement_texts(sql) {
            let st = st.map_err(err)?;
            let text = if rndb::sql::leading_keyword(st) == "EXPLAIN" {
                st.to_string()
            } else {
                format!("EXPLAIN {st}")
            };
            for r in self.session_results(py, &text)? {
                let SqlResult::Rows { columns, rows } = r else {
                    continue;
                };
                let at = |name: &str| columns.iter().position(|c| c == name);
                let (Some(t), Some(x)) = (at("table"), at("Extra")) else {
                    continue;
                };
                for row in rows {
                    lines.push(match (row.get(t), row.get(x)) {
                        (Some(Value::Str(table)), Some(Value::Str(desc))) => {
                            format!("{table}: {desc}")
                        }
                        (Some(Value::Str(table)), _) => format!("{table}: virtual table"),
                        _ => "no table".to_string(),
                    });
                }
            }
        }
        Ok(lines.join("\n"))
    }

    pub(crate) fn sql_database(&self, py: Python<'_>) -> String {
        crate::lock(py, &self.session)
            .as_ref()
            .and_then(|s| s.database())
            .unwrap_or(&self.database)
            .to_string()
    }

    pub(crate) fn sql_in_transaction(&self, py: Python<'_>) -> bool {
        crate::lock(py, &self.session)
            .as_ref()
            .is_some_and(|s| s.in_transaction())
    }

    pub(crate) fn insert_many(
        &self,
        py: Python<'_>,
        table: &str,
        rows: &Bound<'_, PyAny>,
        columns: Option<&Bound<'_, PyAny>>,
        batch_size: usize,
    ) -> PyResult<u64> {
        let columns = crate::convert::extract_columns(columns).map_err(err)?;
        let (d, def) = self.table_def(py, table)?;
        insert_rows(
            py,
            &d,
            &def,
            &self.database,
            rows,
            columns.as_deref(),
            batch_size,
        )
    }

    pub(crate) fn read_many<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        keys: &Bound<'py, PyAny>,
        columns: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let columns = crate::convert::extract_columns(columns).map_err(err)?;
        let (d, def) = self.table_def(py, table)?;
        read_rows(py, &d, &def, &self.database, keys, columns.as_deref())
    }

    pub(crate) fn reader(
        &self,
        py: Python<'_>,
        table: &str,
        columns: Option<Vec<String>>,
    ) -> PyResult<Reader> {
        let (d, def) = self.table_def(py, table)?;
        let prepared = Resolved::of(py, def, columns.as_deref()).map_err(err)?;
        Ok(Reader::nodes(NodesReader {
            data: d,
            database: self.database.clone(),
            table: table.to_string(),
            columns,
            resolved: Mutex::new(Arc::new(prepared)),
        }))
    }

    pub(crate) fn scan(
        &self,
        py: Python<'_>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
        lock_mode: i32,
        batch_size: usize,
        index: Option<IndexArgs<'_, '_>>,
    ) -> PyResult<RemoteScanIterator> {
        crate::lock_mode(lock_mode).map_err(err)?;
        let columns = crate::convert::extract_columns(columns).map_err(err)?;
        let (d, def) = self.table_def(py, table)?;
        RemoteScanIterator::open(
            py,
            d,
            def,
            &self.database,
            crate::remote_scan::RemoteScanArgs::committed(columns, index, batch_size),
        )
    }
}

/// A reader's table definition with its columns resolved.
struct Resolved {
    def: Arc<TableDef>,
    /// The columns asked for, and those read (`mgmclient::read_columns`).
    ncols: usize,
    wire: Vec<u32>,
    names: Vec<Py<PyString>>,
    pk_names: Vec<Py<PyString>>,
}

impl Resolved {
    fn of(py: Python<'_>, def: Arc<TableDef>, columns: Option<&[String]>) -> R<Resolved> {
        let cols = column_positions(&def, columns)?;
        Ok(Resolved {
            ncols: cols.len(),
            wire: crate::mgmclient::read_columns(&def, &cols),
            names: names(py, &def, &cols)
                .into_iter()
                .map(Bound::unbind)
                .collect(),
            pk_names: names(py, &def, &def.primary_key)
                .into_iter()
                .map(Bound::unbind)
                .collect(),
            def,
        })
    }
}

/// `Ndb.reader` on the data nodes: each `get` is one committed read through the data
/// node holding the key's primary replica; the table is looked up again in the
/// connection's cache on every call, and the columns resolved again when its definition
/// changed (a drop and re-create).
pub(crate) struct NodesReader {
    data: Arc<RemoteCluster>,
    database: String,
    table: String,
    columns: Option<Vec<String>>,
    resolved: Mutex<Arc<Resolved>>,
}

impl NodesReader {
    fn current(&self, py: Python<'_>) -> PyResult<Arc<Resolved>> {
        let (d, db, t) = (&self.data, &self.database, &self.table);
        let def = py
            .detach(|| guard(|| d.table(db, t)))
            .map_err(|e| to_pyerr(py, e))?;
        let mut g = crate::lock(py, &self.resolved);
        if !Arc::ptr_eq(&g.def, &def) {
            *g = Arc::new(Resolved::of(py, def, self.columns.as_deref()).map_err(err)?);
        }
        Ok(g.clone())
    }

    fn read<'py>(
        &self,
        py: Python<'py>,
        r: &Resolved,
        keys: &[Vec<Value>],
        out: &mut Vec<Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let (d, db, t) = (&self.data, &self.database, &self.table);
        let rows = py
            .detach(|| guard(|| d.read_batch(db, t, keys, &r.wire)))
            .map_err(|e| to_pyerr(py, e))?;
        for row in rows {
            out.push(match row {
                Some(vals) => row_to_py(py, vals.get(..r.ncols).unwrap_or(&[]))?,
                None => py.None().into_bound(py),
            });
        }
        Ok(())
    }

    fn key(&self, py: Python<'_>, r: &Resolved, key: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
        let pk: Vec<Bound<'_, PyString>> = r.pk_names.iter().map(|n| n.bind(py).clone()).collect();
        key_values(&r.def, &pk, key).map_err(err)
    }

    pub(crate) fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = self.current(py)?;
        let k = self.key(py, &r, key)?;
        let mut out = Vec::with_capacity(1);
        self.read(py, &r, &[k], &mut out)?;
        Ok(out.pop().unwrap_or_else(|| py.None().into_bound(py)))
    }

    pub(crate) fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let r = self.current(py)?;
        let mut out = Vec::with_capacity(keys.len().unwrap_or(0));
        let mut batch = Vec::new();
        let iter = keys
            .try_iter()
            .map_err(|_| crate::errors::bad_argument("keys must be an iterable"))?;
        for key in iter {
            batch.push(self.key(py, &r, &key?)?);
            if batch.len() >= CHUNK_KEYS {
                self.read(py, &r, &std::mem::take(&mut batch), &mut out)?;
            }
        }
        if !batch.is_empty() {
            self.read(py, &r, &batch, &mut out)?;
        }
        PyList::new(py, out)
    }

    pub(crate) fn table(&self) -> &str {
        &self.table
    }

    pub(crate) fn columns(&self, py: Python<'_>) -> Vec<Py<PyString>> {
        crate::lock(py, &self.resolved)
            .names
            .iter()
            .map(|n| n.clone_ref(py))
            .collect()
    }
}
