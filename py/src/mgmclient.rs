//! `rndb.connect("host:1186")`: a management client of a distributed cluster
//! (`rndb_mgmd`), as `ndb_mgm -c host:1186` is — node commands (`SHOW`, `ALL STATUS`,
//! `<id> STOP`, `<id> START`, `<id> RESTART [-n]`, `SHUTDOWN`) sent over TCP, with the
//! server's output returned and its refusals raised as `NdbError`.
//!
//! The same object reaches the data nodes (`rndbd`) for tables and rows
//! (`cluster::remote::RemoteCluster`, opened at the first such call): `sql()` for DDL
//! and SELECT, `read_many()` for batched primary-key reads, `transaction()` for key
//! operations committed together, `start_transaction()` for a transaction in rounds
//! (`remote_txn`), `insert_many()` for loads, `scan()` and
//! `index_scan()` for committed-read scans over every node group.
//!
//! Invariant: one management request at a time per client (the connection sits behind
//! a mutex, taken detached from the interpreter, so a slow server never holds the
//! GIL); data requests run detached too; a closed client refuses every call.

use crate::convert::{
    column_positions, extract_columns, key_values, names, outcome_to_py, py_to_value, row_to_dict,
    sequence_row,
};
use crate::errors::{R, guard, to_pyerr};
use crate::lock_detached;
use crate::remote_scan::{IndexArgs, RemoteScanArgs, RemoteScanIterator};
use crate::sqlglue::SqlOutcome;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use rndb::cluster::client::{ConnectString, MgmConnection};
use rndb::cluster::remote::RemoteCluster;
use rndb::cluster::remote_session::RemoteSession;
use rndb::error::codes;
use rndb::schema::{TableDef, Value};
use rndb::sql::{SessionVars, SqlResult};
use rndb::transport::Role;
use rndb::transport::data::{KeyOp, OpType};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A connection to a management server.
#[pyclass(frozen, module = "rndb")]
pub struct MgmClient {
    connectstring: String,
    server_node_id: u32,
    timeout: Duration,
    conn: Mutex<Option<MgmConnection>>,
    data: Mutex<Option<Arc<RemoteCluster>>>,
    /// The SQL session (an open BEGIN ... COMMIT transaction), once one was begun.
    session: Mutex<Option<RemoteSession>>,
    /// The client of an embedded cluster (`Cluster.embedded`): once closed, calls
    /// raise what the embedded cluster's do (4009) instead of a closed client's error.
    embedded: bool,
}

impl MgmClient {
    /// Runs SQL in this client's session when it needs it (an open transaction,
    /// variables), else on the cluster connection at once; each statement's result.
    fn sql_results(&self, py: Python<'_>, sql: &str, database: &str) -> PyResult<Vec<SqlResult>> {
        py.detach(|| {
            guard(|| {
                let data = self.data()?;
                let mut session = lock_detached(&self.session);
                let s = session.get_or_insert_with(|| RemoteSession::new(data.clone()));
                if s.needs_session(sql) {
                    s.execute_results(database, sql)
                } else {
                    drop(session);
                    data.sql_results_in(database, sql, &mut SessionVars::default())
                }
            })
        })
        .map_err(|e| to_pyerr(py, e))
    }

    /// Opens a client of the management server `connectstring` names; `embedded`: the
    /// client of an embedded cluster (see the field).
    pub(crate) fn open(connectstring: &str, timeout: f64, embedded: bool) -> R<MgmClient> {
        if !(timeout.is_finite() && timeout > 0.0 && timeout <= 3600.0) {
            return Err(codes::bad_argument(format!(
                "timeout {timeout}: give seconds in (0, 3600]"
            )));
        }
        let cs = ConnectString::parse(connectstring)?;
        let conn = MgmConnection::open(&cs, Role::Api, Duration::from_secs_f64(timeout))?;
        Ok(MgmClient {
            connectstring: connectstring.to_string(),
            server_node_id: conn.server_node_id,
            timeout: Duration::from_secs_f64(timeout),
            conn: Mutex::new(Some(conn)),
            data: Mutex::new(None),
            session: Mutex::new(None),
            embedded,
        })
    }

    /// The error of a call after `close()`.
    fn closed(&self) -> rndb::NdbError {
        if self.embedded {
            codes::cluster_closed()
        } else {
            codes::bad_argument("the management client is closed")
        }
    }

    /// Sends a management command; the server's output.
    pub(crate) fn command(&self, command: &str) -> R<String> {
        let mut g = lock_detached(&self.conn);
        let c = g.as_mut().ok_or_else(|| self.closed())?;
        c.command(command)
    }

    /// The data nodes' connection if it is open (None: not used yet, or closed).
    pub(crate) fn open_data(&self) -> Option<Arc<RemoteCluster>> {
        lock_detached(&self.data).clone()
    }

    /// The data nodes' connection, opened at the first use.
    pub(crate) fn data(&self) -> R<Arc<RemoteCluster>> {
        if lock_detached(&self.conn).is_none() {
            return Err(self.closed());
        }
        let mut g = lock_detached(&self.data);
        if let Some(d) = g.as_ref() {
            return Ok(d.clone());
        }
        let d = Arc::new(RemoteCluster::connect(&self.connectstring, self.timeout)?);
        *g = Some(d.clone());
        Ok(d)
    }

    pub(crate) fn table_def(
        &self,
        py: Python<'_>,
        database: &str,
        table: &str,
    ) -> PyResult<(Arc<RemoteCluster>, Arc<TableDef>)> {
        py.detach(|| {
            guard(|| {
                let d = self.data()?;
                let t = d.table(database, table)?;
                Ok((d, t))
            })
        })
        .map_err(|e| to_pyerr(py, e))
    }
}

/// A row dict's values as (position, value) pairs of `def`.
pub(crate) fn row_values(def: &TableDef, row: &Bound<'_, PyAny>) -> R<Vec<(u32, Value)>> {
    let d = row
        .cast::<PyDict>()
        .map_err(|_| codes::bad_argument("a row is a dict of column name to value"))?;
    let mut out = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let name: String = k
            .extract()
            .map_err(|_| codes::bad_argument("column names are str"))?;
        let (pos, _) = def.column(&name)?;
        out.push((pos as u32, py_to_value(&v, &name)?));
    }
    Ok(out)
}

/// What a write of `op` sets: the row's non-key values (none for a delete).
pub(crate) fn set_values(
    def: &TableDef,
    op: OpType,
    values: Vec<(u32, Value)>,
) -> Vec<(u32, Value)> {
    if op == OpType::Delete {
        return Vec::new();
    }
    values
        .into_iter()
        .filter(|(c, _)| !def.primary_key.contains(&(*c as usize)))
        .collect()
}

/// The key of a row dict (its primary-key columns).
pub(crate) fn key_of(def: &TableDef, values: &[(u32, Value)]) -> R<Vec<Value>> {
    def.primary_key
        .iter()
        .map(|&p| {
            values
                .iter()
                .find(|(c, _)| *c as usize == p)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| {
                    codes::key_not_complete(format!(
                        "primary-key column {} missing",
                        def.columns[p].name
                    ))
                })
        })
        .collect()
}

/// The key of a row dict for an operation `op`: an insert or write into a table
/// without a primary key that names no hidden key gets a new one from the data nodes'
/// tuple-id service (which may ask them: the GIL is released meanwhile).
pub(crate) fn key_for(
    py: Python<'_>,
    d: &Arc<RemoteCluster>,
    def: &TableDef,
    values: &[(u32, Value)],
    op: OpType,
) -> R<Vec<Value>> {
    let hidden_key_missing = def.has_hidden_pk()
        && !values
            .iter()
            .any(|(c, _)| *c as usize == def.primary_key[0]);
    if hidden_key_missing && matches!(op, OpType::Insert | OpType::Write) {
        return py
            .detach(|| guard(|| d.next_hidden_key(def)))
            .map(|k| vec![k]);
    }
    key_of(def, values)
}

/// Committed reads of `keys` of a table, one request per data node: a dict per key
/// (of `columns`, default every visible column), None where no row has that key.
pub(crate) fn read_rows<'py>(
    py: Python<'py>,
    d: &RemoteCluster,
    def: &TableDef,
    database: &str,
    keys: &Bound<'py, PyAny>,
    columns: Option<&[String]>,
) -> PyResult<Bound<'py, PyList>> {
    let pk = names(py, def, &def.primary_key);
    let mut ks = Vec::new();
    for k in keys.try_iter()? {
        ks.push(key_values(def, &pk, &k?).map_err(|e| to_pyerr(py, e))?);
    }
    let cols = column_positions(def, columns).map_err(|e| to_pyerr(py, e))?;
    let wire = read_columns(def, &cols);
    let rows = py
        .detach(|| guard(|| d.read_batch(database, &def.name, &ks, &wire)))
        .map_err(|e| to_pyerr(py, e))?;
    let col_names = names(py, def, &cols);
    let out = PyList::empty(py);
    for r in rows {
        match r {
            Some(vals) => out.append(row_to_dict(py, &col_names, vals)?)?,
            None => out.append(py.None())?,
        }
    }
    Ok(out)
}

/// The columns a read of `cols` asks the data nodes for: `cols`, or the primary key
/// when none (an empty list on the wire means every column; the row's existence is
/// what is asked, and the values read are dropped).
pub(crate) fn read_columns(def: &TableDef, cols: &[usize]) -> Vec<u32> {
    let cols = if cols.is_empty() {
        &def.primary_key[..]
    } else {
        cols
    };
    cols.iter().map(|&c| c as u32).collect()
}

/// Inserts rows (dicts, or sequences of the values of `columns` in order) in
/// transactions of `batch_size` rows through a TC; returns the count. A failing batch
/// is rolled back; the earlier ones stay committed.
pub(crate) fn insert_rows(
    py: Python<'_>,
    d: &Arc<RemoteCluster>,
    def: &TableDef,
    database: &str,
    rows: &Bound<'_, PyAny>,
    columns: Option<&[String]>,
    batch_size: usize,
) -> PyResult<u64> {
    if batch_size == 0 {
        return Err(to_pyerr(
            py,
            codes::bad_argument("batch_size must be at least 1"),
        ));
    }
    let seq_cols = match columns {
        Some(c) => Some(column_positions(def, Some(c)).map_err(|e| to_pyerr(py, e))?),
        None => None,
    };
    let mut batch = Vec::with_capacity(batch_size.min(4096));
    let mut n = 0u64;
    let flush = |batch: &mut Vec<KeyOp>| -> PyResult<u64> {
        let ops = std::mem::take(batch);
        let k = ops.len() as u64;
        py.detach(|| guard(|| d.execute(ops)))
            .map_err(|e| to_pyerr(py, e))?;
        Ok(k)
    };
    let iter = rows.try_iter().map_err(|_| {
        to_pyerr(
            py,
            codes::bad_argument("rows must be an iterable of dicts or sequences"),
        )
    })?;
    for row in iter {
        let row = row?;
        let values = if row.cast::<PyDict>().is_ok() {
            row_values(def, &row)
        } else {
            seq_values(def, seq_cols.as_deref(), &row)
        }
        .map_err(|e| to_pyerr(py, e))?;
        let key = key_for(py, d, def, &values, OpType::Insert).map_err(|e| to_pyerr(py, e))?;
        let values = values
            .into_iter()
            .filter(|(c, _)| !def.primary_key.contains(&(*c as usize)))
            .collect();
        batch.push(KeyOp {
            op: OpType::Insert,
            database: database.to_string(),
            table: def.name.clone(),
            key,
            values,
            columns: Vec::new(),
        });
        if batch.len() >= batch_size {
            n += flush(&mut batch)?;
        }
    }
    if !batch.is_empty() {
        n += flush(&mut batch)?;
    }
    Ok(n)
}

/// A row given as a sequence: its values as (position, value) pairs of `cols`.
fn seq_values(
    def: &TableDef,
    cols: Option<&[usize]>,
    row: &Bound<'_, PyAny>,
) -> R<Vec<(u32, Value)>> {
    let values = sequence_row(def, cols, row)?;
    Ok(cols
        .unwrap_or(&[])
        .iter()
        .map(|&c| c as u32)
        .zip(values)
        .collect())
}

#[pymethods]
impl MgmClient {
    /// The management server's node id.
    #[getter]
    fn server_node_id(&self) -> u32 {
        self.server_node_id
    }

    /// This client's API node id (NDB API's `Ndb_cluster_connection::node_id()`): the
    /// `[api]`/`[mysqld]` slot the management server gave its connection to the data
    /// nodes (opened now if not yet), held until `close()`; None when every slot was
    /// taken.
    #[getter]
    fn node_id(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        py.detach(|| guard(|| Ok(self.data()?.node_id())))
            .map_err(|e| to_pyerr(py, e))
    }

    /// The connectstring it was opened with.
    #[getter]
    pub(crate) fn connectstring(&self) -> &str {
        &self.connectstring
    }

    /// Runs a management command on the server; returns its output. A command the
    /// server refuses raises `NdbError` with the server's reason.
    pub(crate) fn mgm(&self, py: Python<'_>, command: &str) -> PyResult<String> {
        py.detach(|| guard(|| self.command(command)))
            .map_err(|e| to_pyerr(py, e))
    }

    /// Closes the connections (later calls raise); closing twice does nothing.
    pub(crate) fn close(&self, py: Python<'_>) {
        py.detach(|| {
            lock_detached(&self.conn).take();
            lock_detached(&self.session).take();
            if let Some(d) = lock_detached(&self.data).take() {
                d.close();
            }
        });
    }

    /// Runs SQL on a data node: DDL reaches every data node; SELECT/SHOW return the
    /// rendered result as the mysql client prints it. INSERT, REPLACE, UPDATE and
    /// DELETE (one statement per call) are captured on a data node and applied through
    /// a TC, retried when they lose a race (docs/cluster.md, "SQL that changes rows").
    /// BEGIN (or START TRANSACTION) opens this client's transaction, which holds every
    /// statement until COMMIT or ROLLBACK; its COMMIT fails with 266 (temporary) when
    /// another transaction changed one of its rows meanwhile (docs/cluster.md, "SQL
    /// sessions").
    #[pyo3(signature = (sql, database="test"))]
    fn sql(&self, py: Python<'_>, sql: &str, database: &str) -> PyResult<String> {
        let t0 = std::time::Instant::now();
        let results = self.sql_results(py, sql, database)?;
        Ok(rndb::sql::render_all(&results, t0.elapsed()))
    }

    /// Runs SQL as `sql` does, and returns the last statement's result as `Ndb.execute`
    /// does: its rows as a list of dicts (values as Python types), or the number of
    /// rows affected (None when the statements returned neither).
    #[pyo3(signature = (sql, database="test"))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: &str,
        database: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let results = self.sql_results(py, sql, database)?;
        outcome_to_py(py, SqlOutcome::of_last(results))
    }

    /// Blocks until the commit with GCI `gci` (`RemoteTransaction.gci`) is on disk on
    /// every data node: the data nodes run a global checkpoint at once. 4008 after
    /// `timeout` seconds.
    #[pyo3(signature = (gci, timeout=60.0))]
    pub(crate) fn wait_durable(&self, py: Python<'_>, gci: u64, timeout: f64) -> PyResult<()> {
        if !timeout.is_finite() || timeout < 0.0 {
            return Err(crate::errors::bad_argument(
                "timeout must be a non-negative number of seconds",
            ));
        }
        let wait = std::time::Duration::from_secs_f64(timeout.min(1e9));
        py.detach(|| guard(|| self.data()?.wait_durable(gci, wait)))
            .map_err(|e| to_pyerr(py, e))
    }

    /// Committed reads of many primary keys (a dict, a tuple in key order or a bare
    /// value each), one request per data node: a dict per key, None where no row has
    /// that key.
    #[pyo3(signature = (table, keys, columns=None, database="test"))]
    fn read_many<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        keys: &Bound<'py, PyAny>,
        columns: Option<Vec<String>>,
        database: &str,
    ) -> PyResult<Bound<'py, PyList>> {
        let (d, def) = self.table_def(py, database, table)?;
        read_rows(py, &d, &def, database, keys, columns.as_deref())
    }

    /// Key operations committed together (or not at all): each a tuple
    /// `(kind, table, row)` with kind `"insert"`, `"update"`, `"write"`, `"delete"` or
    /// `"read"` (`row` a dict; for delete and read only its key columns count).
    /// Returns one entry per operation: the row dict for a read (None: no row), None
    /// for a write. Errors are `NdbError` with NDB's codes (630 duplicate key, 626 no
    /// row, 4010 node failure: retry; 4012: outcome unknown).
    #[pyo3(signature = (ops, database="test"))]
    fn transaction<'py>(
        &self,
        py: Python<'py>,
        ops: &Bound<'py, PyAny>,
        database: &str,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut wire = Vec::new();
        let mut read_names = Vec::new();
        for item in ops.try_iter()? {
            let item = item?;
            let t = item.cast::<PyTuple>().map_err(|_| {
                to_pyerr(
                    py,
                    codes::bad_argument("an operation is a tuple (kind, table, row)"),
                )
            })?;
            if t.len() != 3 {
                return Err(to_pyerr(
                    py,
                    codes::bad_argument("an operation is a tuple (kind, table, row)"),
                ));
            }
            let kind: String = t.get_item(0)?.extract()?;
            let table: String = t.get_item(1)?.extract()?;
            let (d, def) = self.table_def(py, database, &table)?;
            let values = row_values(&def, &t.get_item(2)?).map_err(|e| to_pyerr(py, e))?;
            let op = match kind.as_str() {
                "insert" => OpType::Insert,
                "update" => OpType::Update,
                "write" => OpType::Write,
                "delete" => OpType::Delete,
                "read" => OpType::ReadCommitted,
                other => {
                    return Err(to_pyerr(
                        py,
                        codes::bad_argument(format!(
                            "operation kind '{other}': one of insert, update, write, delete, read"
                        )),
                    ));
                }
            };
            let key = key_for(py, &d, &def, &values, op).map_err(|e| to_pyerr(py, e))?;
            let (values, columns) = if op.is_read() {
                let cols: Vec<usize> = def.visible_columns().map(|(i, _)| i).collect();
                read_names.push(Some(names(py, &def, &cols)));
                (Vec::new(), cols.iter().map(|&c| c as u32).collect())
            } else {
                read_names.push(None);
                (set_values(&def, op, values), Vec::new())
            };
            wire.push(KeyOp {
                op,
                database: database.to_string(),
                table,
                key,
                values,
                columns,
            });
        }
        let r = py
            .detach(|| guard(|| self.data()?.execute(wire)))
            .map_err(|e| to_pyerr(py, e))?;
        let out = PyList::empty(py);
        for (res, n) in r.results.into_iter().zip(read_names) {
            match (res, n) {
                (Some(vals), Some(n)) => out.append(row_to_dict(py, &n, vals)?)?,
                _ => out.append(py.None())?,
            }
        }
        Ok(out)
    }

    /// A transaction in rounds (`rndb.RemoteTransaction`: define operations, then
    /// `execute(rndb.NoCommit)` as often as needed, then `commit()` or `rollback()`;
    /// row locks are held between rounds). A `with` block commits at its end, or
    /// rolls back when it raises.
    #[pyo3(signature = (database="test"))]
    fn start_transaction(
        slf: &Bound<'_, Self>,
        database: &str,
    ) -> PyResult<crate::remote_txn::RemoteTransaction> {
        let py = slf.py();
        let me = slf.get();
        let data = py
            .detach(|| guard(|| me.data()))
            .map_err(|e| to_pyerr(py, e))?;
        Ok(crate::remote_txn::RemoteTransaction::start(
            slf.clone().unbind(),
            data.transaction(),
            database,
        ))
    }

    /// Inserts rows (dicts, or sequences in the order of `columns`) in transactions of
    /// `batch_size` rows; returns the count.
    #[pyo3(signature = (table, rows, database="test", batch_size=500, columns=None))]
    fn insert_many(
        &self,
        py: Python<'_>,
        table: &str,
        rows: &Bound<'_, PyAny>,
        database: &str,
        batch_size: usize,
        columns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let columns = extract_columns(columns).map_err(|e| to_pyerr(py, e))?;
        let (d, def) = self.table_def(py, database, table)?;
        insert_rows(py, &d, &def, database, rows, columns.as_deref(), batch_size)
    }

    /// A committed-read scan of every row of a table, over every node group: an
    /// iterator of dicts (`RemoteScanIterator`), fetched `batch_size` rows at a time.
    #[pyo3(signature = (table, columns=None, database="test", batch_size=256))]
    fn scan(
        &self,
        py: Python<'_>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
        database: &str,
        batch_size: usize,
    ) -> PyResult<RemoteScanIterator> {
        let columns = extract_columns(columns).map_err(|e| to_pyerr(py, e))?;
        let (d, def) = self.table_def(py, database, table)?;
        RemoteScanIterator::open(
            py,
            d,
            def,
            database,
            RemoteScanArgs::committed(columns, None, batch_size),
        )
    }

    /// A committed-read range scan of an ordered index, in index order across every
    /// node group: an iterator of dicts. Bounds are values (or tuples for a prefix of
    /// a multi-column index).
    #[pyo3(signature = (table, index, low=None, high=None, low_inclusive=true, high_inclusive=true, descending=false, columns=None, database="test", batch_size=256))]
    #[allow(clippy::too_many_arguments)]
    fn index_scan(
        &self,
        py: Python<'_>,
        table: &str,
        index: &str,
        low: Option<&Bound<'_, PyAny>>,
        high: Option<&Bound<'_, PyAny>>,
        low_inclusive: bool,
        high_inclusive: bool,
        descending: bool,
        columns: Option<&Bound<'_, PyAny>>,
        database: &str,
        batch_size: usize,
    ) -> PyResult<RemoteScanIterator> {
        let columns = extract_columns(columns).map_err(|e| to_pyerr(py, e))?;
        let (d, def) = self.table_def(py, database, table)?;
        let ix = IndexArgs {
            index,
            low,
            high,
            low_inclusive,
            high_inclusive,
            descending,
        };
        RemoteScanIterator::open(
            py,
            d,
            def,
            database,
            RemoteScanArgs::committed(columns, Some(ix), batch_size),
        )
    }

    /// The data nodes this client reaches.
    fn data_nodes(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        py.detach(|| guard(|| Ok(self.data()?.connected_nodes())))
            .map_err(|e| to_pyerr(py, e))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "<rndb.MgmClient {} (management node {})>",
            self.connectstring, self.server_node_id
        )
    }
}

/// `rndb.connect(connectstring, timeout=5.0)`: connects to the management server named
/// by an NDB connectstring (`host:1186`, `host1:1186,host2:1186`, `nodeid=N,host:port`).
#[pyfunction]
#[pyo3(signature = (connectstring, timeout=5.0))]
pub fn connect(py: Python<'_>, connectstring: &str, timeout: f64) -> PyResult<MgmClient> {
    let r: R<MgmClient> = py.detach(|| guard(|| MgmClient::open(connectstring, timeout, false)));
    r.map_err(|e| to_pyerr(py, e))
}
