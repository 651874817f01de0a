//! The direct engines' `rndb.Ndb` (`Cluster.direct`): transactions, batched key reads
//! and inserts, scans and SQL on the data nodes' engines, on the caller's threads.
//! `ndb.rs` documents each call and dispatches to this or to `nodes_ndb.rs`.

use crate::convert::{
    column_positions, extract_columns, key_values_into, outcome_to_py, py_to_value, value_to_py,
};
use crate::errors::{R, bad_argument, err, guard, py_result, to_pyerr};
use crate::lock_detached;
use crate::prepared::{ColumnCache, Prepared};
use crate::reader::Reader;
use crate::scan::{Owner, ScanArgs, ScanIterator};
use crate::sqlglue::Session;
use crate::transaction::Transaction;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use rndb::Value;
use rndb::api::{TableRuntime, TableSpec};
use std::sync::{Arc, Mutex};

/// Rows converted per trip into the engine by `insert_many` and keys by `read_many`:
/// the GIL is released for the engine work of each chunk, and memory stays bounded
/// however long the input is.
const CHUNK_ROWS: usize = 32_768;

/// An `Ndb` on the direct engines: the engine's handle, the object's SQL session, and
/// its resolved column lists.
pub(crate) struct DirectNdb {
    pub(crate) ndb: rndb::Ndb,
    session: Mutex<Option<Session>>,
    /// Resolved column lists of `read_many` and `reader`, per (table, column names).
    columns: ColumnCache,
}

impl DirectNdb {
    pub(crate) fn new(ndb: rndb::Ndb) -> DirectNdb {
        DirectNdb {
            ndb,
            session: Mutex::new(None),
            columns: ColumnCache::default(),
        }
    }

    fn table(&self, name: &str) -> PyResult<Arc<TableRuntime>> {
        py_result(self.ndb.table(name))
    }
}

/// Rows of one column set, waiting to be inserted.
struct Segment {
    cols: Vec<usize>,
    rows: Vec<Vec<Value>>,
}

/// Inserts segments in transactions of `batch_size` rows; returns the rows inserted.
fn insert_segments(
    ndb: &rndb::Ndb,
    table: &Arc<TableRuntime>,
    segments: Vec<Segment>,
    batch_size: usize,
) -> R<u64> {
    let mut done = 0;
    for seg in segments {
        let mut rows = seg.rows.into_iter().peekable();
        while rows.peek().is_some() {
            let batch: Vec<Vec<Value>> = rows.by_ref().take(batch_size).collect();
            done += ndb.insert_batch(table, &seg.cols, batch)?;
        }
    }
    Ok(done)
}

impl DirectNdb {
    pub(crate) fn database(&self) -> &str {
        self.ndb.database()
    }

    pub(crate) fn transaction(&self) -> PyResult<Transaction> {
        Transaction::start(self.ndb.clone())
    }

    pub(crate) fn tables(&self) -> PyResult<Vec<String>> {
        py_result(self.ndb.cluster().check_open())?;
        Ok(self
            .ndb
            .tables()
            .iter()
            .map(|t| t.def.name.clone())
            .collect())
    }

    pub(crate) fn create_table(&self, py: Python<'_>, spec: TableSpec) -> PyResult<()> {
        let ndb = &self.ndb;
        py_result(py.detach(|| guard(|| ndb.create_table(spec).map(|_| ()))))
    }

    pub(crate) fn drop_table(&self, py: Python<'_>, name: &str, if_exists: bool) -> PyResult<bool> {
        let ndb = &self.ndb;
        py_result(py.detach(|| guard(|| ndb.drop_table(name, if_exists))))
    }

    pub(crate) fn truncate_table(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let ndb = &self.ndb;
        py_result(py.detach(|| guard(|| ndb.truncate_table(name))))
    }

    pub(crate) fn columns(&self, table: &str) -> PyResult<Vec<String>> {
        let t = self.table(table)?;
        Ok(t.def
            .visible_columns()
            .map(|(_, c)| c.name.clone())
            .collect())
    }

    pub(crate) fn execute<'py>(&self, py: Python<'py>, sql: &str) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| {
            guard(|| {
                self.ndb.cluster().check_open()?;
                let mut s = lock_detached(&self.session);
                let session = s.get_or_insert_with(|| Session::new(self.ndb.clone()));
                session.execute(sql)
            })
        });
        outcome_to_py(py, r.map_err(|e| to_pyerr(py, e))?)
    }

    pub(crate) fn explain(&self, py: Python<'_>, sql: &str) -> PyResult<String> {
        py_result(py.detach(|| {
            guard(|| {
                self.ndb.cluster().check_open()?;
                let mut s = lock_detached(&self.session);
                s.get_or_insert_with(|| Session::new(self.ndb.clone()))
                    .explain(sql)
            })
        }))
    }

    pub(crate) fn sql_database(&self, py: Python<'_>) -> String {
        let s = crate::lock(py, &self.session);
        match s.as_ref() {
            Some(s) => s.database().to_string(),
            None => self.ndb.database().to_string(),
        }
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
        let t = self.table(table)?;
        let def = t.def.clone();
        let seq_cols = match extract_columns(columns).map_err(err)? {
            Some(c) => Some(column_positions(&def, Some(&c)).map_err(err)?),
            None => None,
        };
        let chunk = CHUNK_ROWS.div_ceil(batch_size).max(1) * batch_size;
        let mut segments: Vec<Segment> = Vec::new();
        let mut pending = 0usize;
        let mut total = 0u64;
        // the key objects of the current dict segment (looked up in each following row)
        let mut dict_keys: Vec<Bound<'_, PyAny>> = Vec::new();
        let mut in_dict_segment = false;
        let iter = rows
            .try_iter()
            .map_err(|_| bad_argument("rows must be an iterable of dicts or sequences"))?;
        for item in iter {
            let item = item?;
            let mut values: Vec<Value>;
            if let Ok(d) = item.cast::<PyDict>() {
                let mut same = in_dict_segment && d.len() == dict_keys.len();
                values = Vec::with_capacity(d.len());
                if same {
                    let cols = &segments.last().map(|s| &s.cols[..]).unwrap_or(&[]);
                    for (k, &c) in dict_keys.iter().zip(cols.iter()) {
                        match d.get_item(k)? {
                            Some(v) => {
                                values.push(py_to_value(&v, &def.columns[c].name).map_err(err)?)
                            }
                            None => {
                                same = false;
                                break;
                            }
                        }
                    }
                }
                if !same {
                    values.clear();
                    dict_keys.clear();
                    let mut cols = Vec::with_capacity(d.len());
                    for (k, v) in d.iter() {
                        let c = crate::convert::check_column_name(&def, &k).map_err(err)?;
                        values.push(py_to_value(&v, &def.columns[c].name).map_err(err)?);
                        cols.push(c);
                        dict_keys.push(k);
                    }
                    segments.push(Segment {
                        cols,
                        rows: Vec::new(),
                    });
                    in_dict_segment = true;
                }
            } else {
                values =
                    crate::convert::sequence_row(&def, seq_cols.as_deref(), &item).map_err(err)?;
                // (sequence_row refused the row when no columns were given)
                if let Some(cols) = &seq_cols
                    && (in_dict_segment || segments.is_empty())
                {
                    segments.push(Segment {
                        cols: cols.clone(),
                        rows: Vec::new(),
                    });
                    in_dict_segment = false;
                }
            }
            if let Some(s) = segments.last_mut() {
                s.rows.push(values);
            }
            pending += 1;
            if pending >= chunk {
                let segs = std::mem::take(&mut segments);
                in_dict_segment = false;
                pending = 0;
                let ndb = &self.ndb;
                let r = py.detach(|| guard(|| insert_segments(ndb, &t, segs, batch_size)));
                total += r.map_err(|e| to_pyerr(py, e))?;
            }
        }
        if !segments.is_empty() {
            let ndb = &self.ndb;
            let r = py.detach(|| guard(|| insert_segments(ndb, &t, segments, batch_size)));
            total += r.map_err(|e| to_pyerr(py, e))?;
        }
        Ok(total)
    }

    pub(crate) fn read_many<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        keys: &Bound<'py, PyAny>,
        columns: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let p = self.columns.get(py, &self.ndb, table, columns)?;
        let (t, cols) = (&p.table, &p.cols);
        let def = &t.def;
        let col_names: Vec<&Bound<'py, PyString>> = p.names.iter().map(|n| n.bind(py)).collect();
        let pk_names: Vec<Bound<'py, PyString>> =
            p.pk_names.iter().map(|n| n.bind(py).clone()).collect();
        let npk = def.primary_key.len();
        let ncols = cols.len();
        let hint = keys.len().unwrap_or(0);
        let mut out: Vec<Bound<'py, PyAny>> = Vec::with_capacity(hint);
        let mut flat_keys: Vec<Value> = Vec::with_capacity(hint.min(CHUNK_ROWS) * npk);
        let mut values: Vec<Value> = Vec::new();
        let mut found: Vec<bool> = Vec::new();
        let none = py.None().into_bound(py);
        let iter = keys
            .try_iter()
            .map_err(|_| bad_argument("keys must be an iterable"))?;
        let mut flush = |flat_keys: &mut Vec<Value>, out: &mut Vec<Bound<'py, PyAny>>| {
            let ndb = &self.ndb;
            let (k, c) = (&*flat_keys, cols);
            let (v, f) = (&mut values, &mut found);
            let res = py.detach(|| guard(|| ndb.read_batch_into(t, k, c, v, f)));
            flat_keys.clear();
            res.map_err(|e| to_pyerr(py, e))?;
            let mut vals = values.drain(..);
            for &f in found.iter() {
                if f {
                    let d = PyDict::new(py);
                    for (n, v) in col_names.iter().zip(vals.by_ref().take(ncols)) {
                        d.set_item(n, value_to_py(py, v)?)?;
                    }
                    out.push(d.into_any());
                } else {
                    vals.by_ref().take(ncols).for_each(drop);
                    out.push(none.clone());
                }
            }
            PyResult::Ok(())
        };
        for key in iter {
            let key = key?;
            key_values_into(def, &pk_names, &key, &mut flat_keys).map_err(err)?;
            if flat_keys.len() >= CHUNK_ROWS * npk {
                flush(&mut flat_keys, &mut out)?;
            }
        }
        if !flat_keys.is_empty() {
            flush(&mut flat_keys, &mut out)?;
        }
        PyList::new(py, out)
    }

    pub(crate) fn reader(
        &self,
        py: Python<'_>,
        table: &str,
        wanted: Option<Vec<String>>,
    ) -> PyResult<Reader> {
        let p = Prepared::resolve(py, &self.ndb, table, wanted.as_deref()).map_err(err)?;
        Ok(Reader::direct(self.ndb.clone(), table, wanted, Arc::new(p)))
    }

    pub(crate) fn scan(
        &self,
        py: Python<'_>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
        lock_mode: i32,
        batch_size: usize,
    ) -> PyResult<ScanIterator> {
        let args = ScanArgs {
            table: self.table(table)?,
            index: None,
            low: None,
            high: None,
            low_inclusive: true,
            high_inclusive: true,
            descending: false,
            columns: extract_columns(columns).map_err(err)?,
            lock_mode,
            batch_size,
        };
        let tx = py_result(self.ndb.start_transaction())?;
        ScanIterator::open(py, Owner::Own(Box::new(tx)), args)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn index_scan(
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
    ) -> PyResult<ScanIterator> {
        let t = self.table(table)?;
        let args = ScanArgs::index(
            t,
            index,
            low,
            high,
            low_inclusive,
            high_inclusive,
            descending,
            extract_columns(columns).map_err(err)?,
            lock_mode,
            batch_size,
        )
        .map_err(err)?;
        let tx = py_result(self.ndb.start_transaction())?;
        ScanIterator::open(py, Owner::Own(Box::new(tx)), args)
    }
}
