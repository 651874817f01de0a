//! `rndb.Ndb`: a database handle, as NDB API's `Ndb` — transactions, batched key reads
//! and inserts, prepared readers, scans, and SQL through one session per object.
//!
//! One class for both engines a `Cluster` can run: the embedded default's data nodes
//! (`nodes_ndb.rs`: the node code of `rndbd` in this process, reached as a client of a
//! cluster of processes is) and the direct engines on the caller's threads
//! (`ndb_direct.rs`, `Cluster.direct`). Each call is documented here and dispatched;
//! where the two differ, the call's note says so.

use crate::convert::extract_columns;
use crate::errors::{bad_argument, err};
use crate::ndb_direct::DirectNdb;
use crate::nodes_ndb::NodesNdb;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rndb::api::TableSpec;

/// The engine an `Ndb` works on.
pub(crate) enum Engine {
    Direct(Box<DirectNdb>),
    Nodes(NodesNdb),
}

#[pyclass(frozen, module = "rndb")]
pub struct Ndb {
    engine: Engine,
}

impl Ndb {
    pub(crate) fn new(engine: Engine) -> Ndb {
        Ndb { engine }
    }
}

/// Runs `$call` on whichever engine the `Ndb` has.
macro_rules! on_engine {
    ($self:ident, $e:ident => $call:expr) => {
        match &$self.engine {
            Engine::Direct($e) => $call,
            Engine::Nodes($e) => $call,
        }
    };
}

/// The `TableSpec` of `Ndb.create_table`'s arguments.
#[allow(clippy::too_many_arguments)]
fn table_spec(
    name: &str,
    columns: &Bound<'_, PyAny>,
    primary_key: Option<&Bound<'_, PyAny>>,
    indexes: Option<&Bound<'_, PyDict>>,
    unique_indexes: Option<&Bound<'_, PyDict>>,
    if_not_exists: bool,
    logging: bool,
    tablespace: Option<String>,
    storage: Option<&str>,
) -> PyResult<TableSpec> {
    let table_disk = match storage.map(str::to_ascii_lowercase).as_deref() {
        None | Some("memory") => false,
        Some("disk") => true,
        Some(other) => {
            return Err(err(rndb::error::codes::bad_argument(format!(
                "storage must be 'disk' or 'memory', not '{other}'"
            ))));
        }
    };
    let pairs: Vec<(String, String)> = if let Ok(d) = columns.cast::<PyDict>() {
        d.iter()
            .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
            .collect::<PyResult<_>>()?
    } else {
        columns
            .try_iter()?
            .map(|item| item?.extract::<(String, String)>())
            .collect::<PyResult<_>>()?
    };
    let mut cols = Vec::with_capacity(pairs.len());
    let mut explicit = Vec::with_capacity(pairs.len());
    for (n, decl) in &pairs {
        let (c, st) = crate::ddl::column(n, decl).map_err(err)?;
        cols.push(c);
        explicit.push(st);
    }
    let name_list = |o: &Bound<'_, PyAny>| -> PyResult<Vec<String>> {
        if let Ok(s) = o.extract::<String>() {
            Ok(vec![s])
        } else {
            extract_columns(Some(o))
                .map_err(err)
                .map(|c| c.unwrap_or_default())
        }
    };
    let pk = match primary_key {
        Some(p) if !p.is_none() => name_list(p)?,
        _ => Vec::new(),
    };
    let mut idx = Vec::new();
    for (dict, kind) in [
        (indexes, rndb::schema::IndexKind::OrderedIndex),
        (unique_indexes, rndb::schema::IndexKind::UniqueHashIndex),
    ] {
        if let Some(d) = dict {
            for (k, v) in d.iter() {
                idx.push((k.extract::<String>()?, kind, name_list(&v)?));
            }
        }
    }
    let mut spec = TableSpec {
        name: name.to_string(),
        columns: cols,
        primary_key: pk,
        indexes: idx,
        logging,
        if_not_exists,
        tablespace,
    };
    spec.place_columns(&explicit, table_disk).map_err(err)?;
    Ok(spec)
}

#[pymethods]
impl Ndb {
    /// The database this object works in.
    #[getter]
    fn database(&self) -> &str {
        on_engine!(self, e => e.database())
    }

    /// Starts a transaction (usable as a context manager): `Transaction` on the direct
    /// engines, `RemoteTransaction` (the same calls) on the data nodes.
    fn transaction(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.engine {
            Engine::Direct(d) => Ok(Py::new(py, d.transaction()?)?.into_any()),
            Engine::Nodes(n) => Ok(Py::new(py, n.transaction(py)?)?.into_any()),
        }
    }

    /// Names of the tables of this database.
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        match &self.engine {
            Engine::Direct(d) => d.tables(),
            Engine::Nodes(n) => n.tables(py),
        }
    }

    /// Creates a table (NdbDictionary createTable). `columns` maps names to MySQL type
    /// declarations (`{"id": "BIGINT UNSIGNED NOT NULL", "b": "VARCHAR(32)"}`, or a
    /// list of (name, declaration) pairs); `primary_key` names the key columns (default:
    /// the columns declared PRIMARY KEY, else NDB's hidden key); `indexes` and
    /// `unique_indexes` map index names to their columns. Disk data: `tablespace` names
    /// the tablespace and `storage="disk"` puts every column no index uses on disk (as
    /// `TABLESPACE ts STORAGE DISK`); a declaration's own `STORAGE DISK|MEMORY` wins.
    /// `logging=False` is NDB's NoLogging table (no redo, no checkpoint: empty after a
    /// system restart).
    #[pyo3(signature = (name, columns, primary_key=None, indexes=None, unique_indexes=None, if_not_exists=false, logging=true, tablespace=None, storage=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_table(
        &self,
        py: Python<'_>,
        name: &str,
        columns: &Bound<'_, PyAny>,
        primary_key: Option<&Bound<'_, PyAny>>,
        indexes: Option<&Bound<'_, PyDict>>,
        unique_indexes: Option<&Bound<'_, PyDict>>,
        if_not_exists: bool,
        logging: bool,
        tablespace: Option<String>,
        storage: Option<&str>,
    ) -> PyResult<()> {
        let spec = table_spec(
            name,
            columns,
            primary_key,
            indexes,
            unique_indexes,
            if_not_exists,
            logging,
            tablespace,
            storage,
        )?;
        on_engine!(self, e => e.create_table(py, spec))
    }

    /// Drops a table; returns whether it existed (error 723 without `if_exists`).
    #[pyo3(signature = (name, if_exists=false))]
    fn drop_table(&self, py: Python<'_>, name: &str, if_exists: bool) -> PyResult<bool> {
        on_engine!(self, e => e.drop_table(py, name, if_exists))
    }

    /// Deletes every row of a table (pages go back to DataMemory).
    fn truncate_table(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        on_engine!(self, e => e.truncate_table(py, name))
    }

    /// Column names of a table (visible columns, in table order).
    fn columns(&self, py: Python<'_>, table: &str) -> PyResult<Vec<String>> {
        match &self.engine {
            Engine::Direct(d) => d.columns(table),
            Engine::Nodes(n) => n.columns(py, table),
        }
    }

    /// Runs SQL. Returns the rows of the last statement as a list of dicts, or the
    /// number of affected rows for DML/DDL (None when the statement returns neither).
    fn execute<'py>(&self, py: Python<'py>, sql: &str) -> PyResult<Bound<'py, PyAny>> {
        on_engine!(self, e => e.execute(py, sql))
    }

    /// The access path SQL would use for a statement, e.g. "t1: primary key lookup
    /// (1 key)".
    fn explain(&self, py: Python<'_>, sql: &str) -> PyResult<String> {
        on_engine!(self, e => e.explain(py, sql))
    }

    /// The SQL session's current database (what USE selected; the NDB API calls of
    /// this object keep working in `database`).
    #[getter]
    fn sql_database(&self, py: Python<'_>) -> String {
        on_engine!(self, e => e.sql_database(py))
    }

    /// Whether the SQL session has an open transaction (BEGIN, or autocommit=0).
    #[getter]
    fn sql_in_transaction(&self, py: Python<'_>) -> bool {
        on_engine!(self, e => e.sql_in_transaction(py))
    }

    /// Inserts rows (dicts, or sequences in the order of `columns`), committing every
    /// `batch_size` rows. Returns the number of rows inserted. On error the failing
    /// batch is rolled back; earlier batches stay committed.
    #[pyo3(signature = (table, rows, columns=None, batch_size=1000))]
    fn insert_many(
        &self,
        py: Python<'_>,
        table: &str,
        rows: &Bound<'_, PyAny>,
        columns: Option<&Bound<'_, PyAny>>,
        batch_size: usize,
    ) -> PyResult<u64> {
        if batch_size == 0 {
            return Err(bad_argument("batch_size must be at least 1"));
        }
        on_engine!(self, e => e.insert_many(py, table, rows, columns, batch_size))
    }

    /// Committed reads of many primary keys (scalars for a one-column key, tuples in key
    /// order, or dicts). One entry per key: the row as a dict, or None.
    #[pyo3(signature = (table, keys, columns=None))]
    fn read_many<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        keys: &Bound<'py, PyAny>,
        columns: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        on_engine!(self, e => e.read_many(py, table, keys, columns))
    }

    /// A prepared committed read by primary key of `columns` (default: every column)
    /// of `table`: `get(key)` returns the value (one column) or a tuple (several), or
    /// None for a key without a row; `get_many(keys)` a list of those. The table and
    /// columns are resolved now (unknown ones raise) and again only when the table is
    /// dropped, truncated or re-created.
    #[pyo3(signature = (table, columns=None))]
    fn reader(
        &self,
        py: Python<'_>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::reader::Reader> {
        let wanted = extract_columns(columns).map_err(err)?;
        on_engine!(self, e => e.reader(py, table, wanted))
    }

    /// A full-table scan: an iterator of dicts. On the data nodes a scan outside a
    /// transaction reads committed rows whatever `lock_mode` (a scan that locks is
    /// `transaction().scan(..., lock_mode=rndb.LM_Exclusive)`).
    #[pyo3(signature = (table, columns=None, lock_mode=2, batch_size=256))]
    fn scan(
        &self,
        py: Python<'_>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
        lock_mode: i32,
        batch_size: usize,
    ) -> PyResult<Py<PyAny>> {
        match &self.engine {
            Engine::Direct(d) => {
                Ok(Py::new(py, d.scan(py, table, columns, lock_mode, batch_size)?)?.into_any())
            }
            Engine::Nodes(n) => Ok(Py::new(
                py,
                n.scan(py, table, columns, lock_mode, batch_size, None)?,
            )?
            .into_any()),
        }
    }

    /// An ordered-index range scan, in index order: an iterator of dicts. Bounds are
    /// values (or tuples for a prefix of a multi-column index).
    #[pyo3(signature = (table, index, low=None, high=None, low_inclusive=true, high_inclusive=true, descending=false, columns=None, lock_mode=2, batch_size=256))]
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
        lock_mode: i32,
        batch_size: usize,
    ) -> PyResult<Py<PyAny>> {
        match &self.engine {
            Engine::Direct(d) => {
                let it = d.index_scan(
                    py,
                    table,
                    index,
                    low,
                    high,
                    low_inclusive,
                    high_inclusive,
                    descending,
                    columns,
                    lock_mode,
                    batch_size,
                )?;
                Ok(Py::new(py, it)?.into_any())
            }
            Engine::Nodes(n) => {
                let ix = crate::remote_scan::IndexArgs {
                    index,
                    low,
                    high,
                    low_inclusive,
                    high_inclusive,
                    descending,
                };
                let it = n.scan(py, table, columns, lock_mode, batch_size, Some(ix))?;
                Ok(Py::new(py, it)?.into_any())
            }
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<rndb.Ndb database={:?}>",
            on_engine!(self, e => e.database())
        )
    }
}
