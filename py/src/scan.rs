//! `rndb.ScanIterator`: rows of a table scan or an ordered-index range scan, fetched
//! from the engine in batches with the GIL released.

use crate::convert::{bound_values, column_positions, names, row_to_dict_unbound};
use crate::errors::{R, guard, to_pyerr};
use crate::transaction::Transaction;
use crate::{lock, lock_detached, lock_mode};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use rndb::Value;
use rndb::api::{Scan, ScanSpec, TableRuntime};
use rndb::error::codes;
use rndb::schema::IndexKind;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// What a scan was asked for, checked and converted.
pub(crate) struct ScanArgs {
    pub table: Arc<TableRuntime>,
    /// (index position, bound values)
    pub index: Option<usize>,
    pub low: Option<Vec<Value>>,
    pub high: Option<Vec<Value>>,
    pub low_inclusive: bool,
    pub high_inclusive: bool,
    pub descending: bool,
    pub columns: Option<Vec<String>>,
    pub lock_mode: i32,
    pub batch_size: usize,
}

impl ScanArgs {
    #[allow(clippy::too_many_arguments)]
    pub fn index(
        table: Arc<TableRuntime>,
        index: &str,
        low: Option<&Bound<'_, PyAny>>,
        high: Option<&Bound<'_, PyAny>>,
        low_inclusive: bool,
        high_inclusive: bool,
        descending: bool,
        columns: Option<Vec<String>>,
        lock_mode: i32,
        batch_size: usize,
    ) -> R<ScanArgs> {
        let def = table.def.clone();
        let (pos, idx) = def
            .index(index)
            .ok_or_else(|| codes::no_such_index(index))?;
        if idx.kind != IndexKind::OrderedIndex {
            return Err(codes::bad_argument(format!(
                "index '{index}' is a unique hash index: range scans need an ordered index"
            )));
        }
        let low = bound_values(&def, &idx.columns, low)?;
        let high = bound_values(&def, &idx.columns, high)?;
        Ok(ScanArgs {
            table,
            index: Some(pos),
            low,
            high,
            low_inclusive,
            high_inclusive,
            descending,
            columns,
            lock_mode,
            batch_size,
        })
    }

    /// The engine's scan description and the returned column positions.
    fn spec(self) -> R<(ScanSpec, Vec<usize>)> {
        let cols = column_positions(&self.table.def, self.columns.as_deref())?;
        if self.batch_size == 0 {
            return Err(codes::bad_argument("batch_size must be at least 1"));
        }
        let mut spec = ScanSpec::table(self.table);
        spec.index = self.index;
        spec.low = self.low.map(|v| (v, self.low_inclusive));
        spec.high = self.high.map(|v| (v, self.high_inclusive));
        spec.descending = self.descending;
        spec.sorted = self.index.is_some();
        spec.mode = lock_mode(self.lock_mode)?;
        spec.columns = Some(cols.clone());
        spec.batch_size = self.batch_size;
        Ok((spec, cols))
    }
}

/// The transaction a scan runs in: its own (closed when the scan ends) or a user's.
pub(crate) enum Owner {
    Own(Box<rndb::Transaction>),
    Shared(Py<Transaction>),
}

struct ScanState {
    scan: Scan,
    owner: Owner,
    buffer: VecDeque<Vec<Value>>,
    done: bool,
}

impl ScanState {
    fn fetch(&mut self, n: usize) -> R<Vec<Vec<Value>>> {
        match &mut self.owner {
            Owner::Own(tx) => tx.scan_next_batch(&mut self.scan, n),
            Owner::Shared(t) => {
                let mut g = lock_detached(&t.get().inner);
                g.tx.scan_next_batch(&mut self.scan, n)
            }
        }
    }

    /// Ends the scan; an own transaction is closed (releasing the scan's locks).
    fn finish(&mut self) {
        self.done = true;
        self.buffer.clear();
        self.scan.close();
        if let Owner::Own(tx) = &mut self.owner {
            tx.close();
        }
    }
}

impl Drop for ScanState {
    /// An abandoned scan's own transaction is rolled back (releasing its locks); a panic
    /// there must not unwind into the interpreter's deallocator.
    fn drop(&mut self) {
        if let Owner::Own(tx) = &mut self.owner {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tx.close()));
        }
    }
}

#[pyclass(frozen, module = "rndb")]
pub struct ScanIterator {
    names: Vec<Py<PyString>>,
    batch: usize,
    state: Mutex<ScanState>,
}

impl ScanIterator {
    pub(crate) fn open(py: Python<'_>, mut owner: Owner, args: ScanArgs) -> PyResult<ScanIterator> {
        let batch = args.batch_size.clamp(1, rndb::api::scan::MAX_SCAN_BATCH);
        let r = guard(|| {
            let (spec, cols) = args.spec()?;
            let def = spec.table.def.clone();
            let scan = match &mut owner {
                Owner::Own(tx) => tx.scan(spec)?,
                Owner::Shared(t) => lock(py, &t.get().inner).tx.scan(spec)?,
            };
            Ok((scan, def, cols))
        });
        let (scan, def, cols) = r.map_err(|e| to_pyerr(py, e))?;
        Ok(ScanIterator {
            names: names(py, &def, &cols)
                .into_iter()
                .map(|n| n.unbind())
                .collect(),
            batch,
            state: Mutex::new(ScanState {
                scan,
                owner,
                buffer: VecDeque::new(),
                done: false,
            }),
        })
    }
}

#[pymethods]
impl ScanIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut st = lock(py, &self.state);
        if st.buffer.is_empty() && !st.done {
            let n = self.batch;
            let s: &mut ScanState = &mut st;
            let r = py.detach(|| guard(|| s.fetch(n)));
            match r {
                Ok(rows) => {
                    let ended = rows.len() < n;
                    st.buffer.extend(rows);
                    if ended {
                        // keep the buffered rows, release the transaction now
                        let rows = std::mem::take(&mut st.buffer);
                        st.finish();
                        st.buffer = rows;
                    }
                }
                Err(e) => {
                    st.finish();
                    return Err(to_pyerr(py, e));
                }
            }
        }
        match st.buffer.pop_front() {
            Some(row) => {
                drop(st);
                Ok(Some(row_to_dict_unbound(py, &self.names, row)?))
            }
            None => Ok(None),
        }
    }

    /// Column names of the returned rows.
    #[getter]
    fn columns(&self, py: Python<'_>) -> Vec<Py<PyString>> {
        self.names.iter().map(|n| n.clone_ref(py)).collect()
    }

    /// Ends the scan early (its own transaction, if any, is closed).
    fn close(&self, py: Python<'_>) {
        let mut st = lock(py, &self.state);
        if !st.done {
            st.finish();
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
}
