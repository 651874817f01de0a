//! `rndb.Reader`: a prepared committed read by primary key of a fixed column list of one
//! table — `ndb.reader("kv", columns=["v"])`, then `get(key)` and `get_many(keys)`.
//! On the embedded cluster's data nodes it is `nodes_ndb::NodesReader` (a committed
//! read through the data node of the key's primary replica, without the GIL); what
//! follows is the direct engines' reader.
//!
//! What `read_many` does per call is done once here: the table and the column positions
//! are resolved when the reader is made (and again only when the table is dropped,
//! truncated or re-created, which retires its runtime). A `get` converts the key, reads
//! through the engine's batched read path (`Ndb::read_batch_into`) into per-thread
//! buffers that keep their allocations from call to call, and returns the value itself
//! (one column) or a tuple (several) instead of a dict; a key without a row gives None.
//!
//! The GIL: `get_many`, and a `get` that reads a disk or BLOB/TEXT column, release it
//! around the engine call, as every other engine call of the module does. A `get` of
//! in-memory columns keeps it: that read is one hash lookup under a fragment mutex
//! (held by others only for a batch of rows: no row lock, no I/O, no wait for Python),
//! shorter than releasing and taking back the GIL, which costs ~20% of the call alone
//! and, with threads reading side by side, hands the GIL over on every call (two
//! threads then did fewer gets together than one alone). No code that holds a fragment
//! mutex waits for the GIL, so this cannot deadlock.

use crate::convert::{key_values_into, py_to_value, value_ref_to_py};
use crate::errors::{R, bad_argument, guard, to_pyerr};
use crate::lock;
use crate::prepared::Prepared;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PyString, PyTuple};
use rndb::Value;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// Keys per trip into the engine in `get_many` (the GIL is released for each).
const CHUNK_KEYS: usize = 32_768;

/// The buffers of one read: flat key values, the columns read, the found flags.
#[derive(Default)]
struct Scratch {
    keys: Vec<Value>,
    out: Vec<Value>,
    found: Vec<bool>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's buffers, taken out for the call and put back after it,
/// so a nested call (a finalizer reading during a conversion) gets empty buffers of its
/// own instead of a borrow error.
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut s = SCRATCH
        .try_with(|c| c.try_borrow_mut().map(|mut b| std::mem::take(&mut *b)).ok())
        .ok()
        .flatten()
        .unwrap_or_default();
    let r = f(&mut s);
    let _ = SCRATCH.try_with(|c| {
        if let Ok(mut b) = c.try_borrow_mut() {
            *b = s;
        }
    });
    r
}

/// Appends the key values of `key` (a bare value for a one-column key, a tuple or list
/// in key order, or a dict) to `out`.
fn key_into(py: Python<'_>, p: &Prepared, key: &Bound<'_, PyAny>, out: &mut Vec<Value>) -> R<()> {
    let def = &p.table.def;
    if def.primary_key.len() == 1 && key.cast::<PyInt>().is_ok() {
        out.push(py_to_value(key, &def.columns[def.primary_key[0]].name)?);
        return Ok(());
    }
    let pk_names: Vec<Bound<'_, PyString>> =
        p.pk_names.iter().map(|n| n.bind(py).clone()).collect();
    key_values_into(def, &pk_names, key, out)
}

/// The columns of one row as Python: the value for one column, else a tuple.
pub(crate) fn row_to_py<'py>(py: Python<'py>, row: &[Value]) -> PyResult<Bound<'py, PyAny>> {
    if let [v] = row {
        return value_ref_to_py(py, v);
    }
    let items = row
        .iter()
        .map(|v| value_ref_to_py(py, v))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, items)?.into_any())
}

/// A prepared committed read of `columns` of `table` by primary key (`Ndb.reader`), on
/// the data nodes (`nodes_ndb::NodesReader`) or on the direct engines.
#[pyclass(frozen, module = "rndb")]
pub struct Reader {
    engine: Engine,
}

enum Engine {
    Direct(DirectReader),
    Nodes(crate::nodes_ndb::NodesReader),
}

/// The direct engines' reader.
struct DirectReader {
    ndb: rndb::Ndb,
    table: String,
    columns: Option<Vec<String>>,
    prepared: Mutex<Arc<Prepared>>,
}

impl Reader {
    pub(crate) fn direct(
        ndb: rndb::Ndb,
        table: &str,
        columns: Option<Vec<String>>,
        prepared: Arc<Prepared>,
    ) -> Reader {
        Reader {
            engine: Engine::Direct(DirectReader {
                ndb,
                table: table.to_string(),
                columns,
                prepared: Mutex::new(prepared),
            }),
        }
    }

    pub(crate) fn nodes(r: crate::nodes_ndb::NodesReader) -> Reader {
        Reader {
            engine: Engine::Nodes(r),
        }
    }
}

impl DirectReader {
    /// The resolved table and columns, resolved again by name when the table's runtime
    /// was retired (drop, truncate, re-create; or the cluster closed).
    fn current(&self, py: Python<'_>) -> PyResult<Arc<Prepared>> {
        let mut p = lock(py, &self.prepared);
        if !p.live() {
            let fresh = Prepared::resolve(py, &self.ndb, &self.table, self.columns.as_deref())
                .map_err(|e| to_pyerr(py, e))?;
            *p = Arc::new(fresh);
        }
        Ok(p.clone())
    }

    /// Reads the keys of `s.keys` into `s.out` / `s.found`; without the GIL when
    /// `detach`.
    fn read(&self, py: Python<'_>, p: &Prepared, s: &mut Scratch, detach: bool) -> PyResult<()> {
        let ndb = &self.ndb;
        let Scratch { keys, out, found } = s;
        let mut run = || guard(|| ndb.read_batch_into(&p.table, keys, &p.cols, out, found));
        let r = if detach { py.detach(run) } else { run() };
        keys.clear();
        r.map_err(|e| to_pyerr(py, e))
    }

    fn get<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let p = self.current(py)?;
        with_scratch(|s| {
            s.keys.clear();
            key_into(py, &p, key, &mut s.keys).map_err(|e| to_pyerr(py, e))?;
            self.read(py, &p, s, !p.in_memory)?;
            let n = p.cols.len();
            match (s.found.first(), s.out.get(..n)) {
                (Some(true), Some(row)) => row_to_py(py, row),
                _ => Ok(py.None().into_bound(py)),
            }
        })
    }

    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let p = self.current(py)?;
        let npk = p.table.def.primary_key.len().max(1);
        let n = p.cols.len();
        let iter = keys
            .try_iter()
            .map_err(|_| bad_argument("keys must be an iterable"))?;
        let mut res: Vec<Bound<'py, PyAny>> = Vec::with_capacity(keys.len().unwrap_or(0));
        with_scratch(|s| {
            s.keys.clear();
            let flush = |s: &mut Scratch, res: &mut Vec<Bound<'py, PyAny>>| {
                self.read(py, &p, s, true)?;
                for (i, &f) in s.found.iter().enumerate() {
                    res.push(match s.out.get(i * n..(i + 1) * n) {
                        Some(row) if f => row_to_py(py, row)?,
                        _ => py.None().into_bound(py),
                    });
                }
                PyResult::Ok(())
            };
            for key in iter {
                key_into(py, &p, &key?, &mut s.keys).map_err(|e| to_pyerr(py, e))?;
                if s.keys.len() >= CHUNK_KEYS * npk {
                    flush(s, &mut res)?;
                }
            }
            if !s.keys.is_empty() {
                flush(s, &mut res)?;
            }
            PyResult::Ok(())
        })?;
        PyList::new(py, res)
    }

    fn columns(&self, py: Python<'_>) -> PyResult<Vec<Py<PyString>>> {
        let p = self.current(py)?;
        Ok(p.names.iter().map(|n| n.clone_ref(py)).collect())
    }
}

#[pymethods]
impl Reader {
    /// The row of `key` (a bare value for a one-column primary key, a tuple in key order
    /// or a dict): the value of the one column read, a tuple of the columns read, or
    /// None when no row has that key.
    fn get<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match &self.engine {
            Engine::Direct(d) => d.get(py, key),
            Engine::Nodes(n) => n.get(py, key),
        }
    }

    /// `get` for every key of an iterable, in one engine call per 32,768 keys (on the
    /// data nodes: one request per node per 32,768 keys): a list with one entry per
    /// key (value, tuple or None).
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        match &self.engine {
            Engine::Direct(d) => d.get_many(py, keys),
            Engine::Nodes(n) => n.get_many(py, keys),
        }
    }

    /// The table read.
    #[getter]
    fn table(&self) -> &str {
        match &self.engine {
            Engine::Direct(d) => &d.table,
            Engine::Nodes(n) => n.table(),
        }
    }

    /// The columns read, as the table names them.
    #[getter]
    fn columns(&self, py: Python<'_>) -> PyResult<Vec<Py<PyString>>> {
        match &self.engine {
            Engine::Direct(d) => d.columns(py),
            Engine::Nodes(n) => Ok(n.columns(py)),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let cols = self
            .columns(py)?
            .iter()
            .map(|n| n.bind(py).to_string())
            .collect::<Vec<_>>();
        Ok(format!(
            "<rndb.Reader table={:?} columns={:?}>",
            self.table(),
            cols
        ))
    }
}
