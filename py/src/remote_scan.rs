//! `rndb.RemoteScanIterator`: rows of a table scan or an ordered-index range scan of a
//! cluster of `rndbd` processes (`MgmClient.scan()`, `MgmClient.index_scan()`),
//! fetched in batches with the interpreter released (`cluster::remote_scan`).
//!
//! A scan from `RemoteTransaction.scan()` with LM_Exclusive locks each batch in that
//! transaction before returning it (`RemoteTransaction::lock_rows` in the core: the
//! values returned are read under the lock); its rows carry the primary key for that,
//! which is dropped again unless asked for.
//!
//! Invariant: the scan is closed at the data nodes once its last row was fetched, at
//! its first error, at `close()` or when the iterator is collected.

use crate::convert::{bound_values, column_positions, names, row_to_dict_unbound};
use crate::errors::{R, guard, to_pyerr};
use crate::lock;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use rndb::Value;
use rndb::cluster::remote::RemoteCluster;
use rndb::cluster::remote_scan::{RemoteScan, RemoteScanSpec};
use rndb::error::codes;
use rndb::schema::{IndexKind, TableDef};
use rndb::transport::data::TxnKey;
use rndb::transport::data_scan::MAX_SCAN_BATCH_ROWS;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// What `index_scan` was asked for.
pub(crate) struct IndexArgs<'a, 'py> {
    pub index: &'a str,
    pub low: Option<&'a Bound<'py, PyAny>>,
    pub high: Option<&'a Bound<'py, PyAny>>,
    pub low_inclusive: bool,
    pub high_inclusive: bool,
    pub descending: bool,
}

struct State {
    scan: Option<RemoteScan>,
    buffer: VecDeque<Vec<Value>>,
}

/// The transaction an LM_Exclusive scan locks its rows in.
pub(crate) struct Locker {
    pub tx: Py<crate::remote_txn::RemoteTransaction>,
    def: Arc<TableDef>,
    /// The columns asked for (the rows fetched carry the primary key after them).
    reads: Vec<u32>,
}

#[pyclass(frozen, module = "rndb")]
pub struct RemoteScanIterator {
    /// The connection (a closed one ends the scan with 4009, buffered rows or not).
    data: Arc<RemoteCluster>,
    names: Vec<Py<PyString>>,
    batch: usize,
    state: Mutex<State>,
    locker: Option<Locker>,
}

/// What a scan asks for besides its table.
pub(crate) struct RemoteScanArgs<'a, 'py> {
    /// The columns to return (None: every visible one).
    pub columns: Option<Vec<String>>,
    /// An ordered index's range, in index order; None: a table scan.
    pub index: Option<IndexArgs<'a, 'py>>,
    pub batch_size: usize,
    /// The transaction an LM_Exclusive scan locks its rows in.
    pub lock_in: Option<Py<crate::remote_txn::RemoteTransaction>>,
    /// The transaction the scan is part of: it sees its uncommitted changes.
    pub txn: Option<TxnKey>,
}

impl<'a, 'py> RemoteScanArgs<'a, 'py> {
    /// A committed-read scan, outside any transaction.
    pub(crate) fn committed(
        columns: Option<Vec<String>>,
        index: Option<IndexArgs<'a, 'py>>,
        batch_size: usize,
    ) -> Self {
        RemoteScanArgs {
            columns,
            index,
            batch_size,
            lock_in: None,
            txn: None,
        }
    }
}

impl RemoteScanIterator {
    /// Checks the arguments and opens the scan.
    pub(crate) fn open(
        py: Python<'_>,
        data: Arc<RemoteCluster>,
        def: Arc<TableDef>,
        database: &str,
        args: RemoteScanArgs<'_, '_>,
    ) -> PyResult<RemoteScanIterator> {
        let RemoteScanArgs {
            columns,
            index,
            batch_size,
            lock_in,
            txn,
        } = args;
        let spec = (|| -> R<(RemoteScanSpec, Vec<usize>)> {
            if batch_size == 0 {
                return Err(codes::bad_argument("batch_size must be at least 1"));
            }
            // As NDB caps a scan's batch at its maximum (MaxScanBatchSize) silently.
            let batch_size = batch_size.min(MAX_SCAN_BATCH_ROWS as usize);
            let cols = column_positions(&def, columns.as_deref())?;
            let mut spec = RemoteScanSpec::table(database, &def.name);
            spec.columns = cols.iter().map(|&c| c as u32).collect();
            spec.batch_rows = batch_size as u32;
            spec.txn = txn;
            if let Some(ix) = index {
                let (_, idx) = def
                    .index_by_api_name(ix.index)
                    .ok_or_else(|| codes::no_such_index(ix.index))?;
                if idx.kind != IndexKind::OrderedIndex {
                    return Err(codes::bad_argument(format!(
                        "index '{}' is a unique hash index: range scans need an ordered index",
                        ix.index
                    )));
                }
                spec.low = bound_values(&def, &idx.columns, ix.low)?.map(|v| (v, ix.low_inclusive));
                spec.high =
                    bound_values(&def, &idx.columns, ix.high)?.map(|v| (v, ix.high_inclusive));
                spec.index = Some(idx.name.clone());
                spec.descending = ix.descending;
                spec.sorted = true;
            }
            Ok((spec, cols))
        })();
        let (mut spec, cols) = spec.map_err(|e| to_pyerr(py, e))?;
        let locker = lock_in.map(|tx| {
            let reads = spec.columns.clone();
            spec.columns
                .extend(def.primary_key.iter().map(|&c| c as u32));
            Locker {
                tx,
                def: def.clone(),
                reads,
            }
        });
        let scan = py
            .detach(|| guard(|| data.scan(spec)))
            .map_err(|e| to_pyerr(py, e))?;
        Ok(RemoteScanIterator {
            data,
            names: names(py, &def, &cols)
                .into_iter()
                .map(|n| n.unbind())
                .collect(),
            batch: batch_size.min(MAX_SCAN_BATCH_ROWS as usize),
            state: Mutex::new(State {
                scan: Some(scan),
                buffer: VecDeque::new(),
            }),
            locker,
        })
    }
}

#[pymethods]
impl RemoteScanIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.data.is_closed() {
            return Err(to_pyerr(py, codes::connection_closed()));
        }
        let mut st = lock(py, &self.state);
        if st.buffer.is_empty()
            && let Some(mut scan) = st.scan.take()
        {
            let n = self.batch;
            let r = py.detach(|| guard(|| scan.next_batch(n).map(|rows| (rows, scan))));
            match r {
                Ok((rows, scan)) => {
                    let ended = rows.len() < n || scan.is_closed();
                    let rows = match &self.locker {
                        Some(l) => {
                            let reads = l.reads.len();
                            let mut locked = l.tx.get().lock_scanned(py, &l.def, &l.reads, rows)?;
                            for r in &mut locked {
                                r.truncate(reads);
                            }
                            locked
                        }
                        None => rows,
                    };
                    st.buffer.extend(rows);
                    if !ended {
                        st.scan = Some(scan);
                    }
                }
                Err(e) => return Err(to_pyerr(py, e)),
            }
            // A locking scan's rows deleted before they were locked: fetch on.
            if st.buffer.is_empty() && st.scan.is_some() {
                drop(st);
                return self.__next__(py);
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

    /// Ends the scan early (closed at the data nodes).
    fn close(&self, py: Python<'_>) {
        let mut st = lock(py, &self.state);
        st.buffer.clear();
        if let Some(mut s) = st.scan.take() {
            py.detach(|| s.close());
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
