//! `rndb.Transaction` (NdbTransaction) and `rndb.Operation` (the outcome of one
//! operation): operations are defined, then run together by `execute`.

use crate::convert::{
    column_positions, extract_columns, key_values, names, row_to_dict_unbound, split_row,
};
use crate::errors::{R, err, guard, py_result, to_pyerr};
use crate::scan::{Owner, ScanArgs, ScanIterator};
use crate::{lock, lock_detached};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use rndb::api::{OpId, OpKind, OpOutcome, TxState};
use rndb::error::codes;
use rndb::{AbortOption, ExecType, Value};
use std::sync::Mutex;

pub(crate) struct TxInner {
    pub tx: rndb::Transaction,
    /// Operations defined since the last execute.
    pending: Vec<(OpId, Py<Operation>)>,
}

impl Drop for TxInner {
    /// An open transaction is rolled back when its Python object goes away; a panic
    /// there must not unwind into the interpreter's deallocator.
    fn drop(&mut self) {
        let tx = &mut self.tx;
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tx.close()));
    }
}

#[pyclass(frozen, module = "rndb")]
pub struct Transaction {
    ndb: rndb::Ndb,
    pub(crate) inner: Mutex<TxInner>,
}

/// What `execute` reports for one operation.
pub(crate) enum Outcome {
    Row(Vec<Value>),
    Done,
    Failed(rndb::NdbError),
    NotRun,
}

#[derive(Default)]
struct OpState {
    executed: bool,
    row: Option<Py<PyDict>>,
    error: Option<Py<PyAny>>,
}

/// One operation of a transaction; `.row` and `.error` are filled by `execute`.
#[pyclass(frozen, module = "rndb")]
pub struct Operation {
    table: String,
    kind: &'static str,
    names: Vec<Py<PyString>>,
    state: Mutex<OpState>,
}

impl Operation {
    /// A pending operation on `table`; a read's row dict gets `names` as keys.
    pub(crate) fn pending(table: String, kind: &'static str, names: Vec<Py<PyString>>) -> Self {
        Operation {
            table,
            kind,
            names,
            state: Mutex::new(OpState::default()),
        }
    }

    pub(crate) fn set(&self, py: Python<'_>, o: Outcome) -> PyResult<()> {
        let mut st = lock(py, &self.state);
        match o {
            Outcome::Row(r) => {
                st.executed = true;
                st.row = Some(row_to_dict_unbound(py, &self.names, r)?.unbind());
                st.error = None;
            }
            Outcome::Done => {
                st.executed = true;
                st.error = None;
            }
            Outcome::Failed(e) => {
                st.executed = true;
                st.row = None;
                st.error = Some(to_pyerr(py, e).into_value(py).into_any());
            }
            Outcome::NotRun => {}
        }
        Ok(())
    }
}

#[pymethods]
impl Operation {
    /// The row read (a dict), or None: not found, not a read, or not executed yet.
    #[getter]
    fn row(&self, py: Python<'_>) -> Option<Py<PyDict>> {
        lock(py, &self.state).row.as_ref().map(|r| r.clone_ref(py))
    }

    /// The operation's error after execute (an NdbError), or None.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        lock(py, &self.state)
            .error
            .as_ref()
            .map(|r| r.clone_ref(py))
    }

    /// Whether an execute ran this operation.
    #[getter]
    fn executed(&self, py: Python<'_>) -> bool {
        lock(py, &self.state).executed
    }

    #[getter]
    fn table(&self) -> &str {
        &self.table
    }

    /// "read", "insert", "update", "write" or "delete".
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let st = lock(py, &self.state);
        let what = if !st.executed {
            "pending"
        } else if st.error.is_some() {
            "failed"
        } else {
            "done"
        };
        format!("<rndb.Operation {} {} {what}>", self.kind, self.table)
    }
}

fn kind_name(k: OpKind) -> &'static str {
    match k {
        OpKind::Read(_) => "read",
        OpKind::Insert => "insert",
        OpKind::Update => "update",
        OpKind::Write => "write",
        OpKind::Delete => "delete",
    }
}

fn state_name(s: TxState) -> &'static str {
    match s {
        TxState::Open => "Open",
        TxState::Committed => "Committed",
        TxState::Aborted => "Aborted",
        TxState::Closed => "Closed",
    }
}

impl Transaction {
    pub(crate) fn start(ndb: rndb::Ndb) -> PyResult<Transaction> {
        let tx = py_result(ndb.start_transaction())?;
        Ok(Transaction {
            ndb,
            inner: Mutex::new(TxInner {
                tx,
                pending: Vec::new(),
            }),
        })
    }

    fn define(
        &self,
        py: Python<'_>,
        kind: OpKind,
        table: &str,
        data: &Bound<'_, PyAny>,
        columns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Operation>> {
        let t = py_result(self.ndb.table(table))?;
        let def = t.def.clone();
        let mut read_cols = None;
        let mut op_names = Vec::new();
        let (key, values) = match kind {
            OpKind::Read(_) => {
                let pk_names = names(py, &def, &def.primary_key);
                let kv = key_values(&def, &pk_names, data).map_err(err)?;
                let wanted = extract_columns(columns).map_err(err)?;
                let cols = column_positions(&def, wanted.as_deref()).map_err(err)?;
                op_names = names(py, &def, &cols)
                    .into_iter()
                    .map(|n| n.unbind())
                    .collect();
                read_cols = Some(cols);
                (
                    def.primary_key.iter().copied().zip(kv).collect(),
                    Vec::new(),
                )
            }
            _ => {
                let (key, values) = split_row(&def, data).map_err(err)?;
                if kind != OpKind::Insert {
                    let missing: Vec<&str> = def
                        .primary_key
                        .iter()
                        .filter(|p| !key.iter().any(|(k, _)| k == *p))
                        .map(|&p| def.columns[p].name.as_str())
                        .collect();
                    if !missing.is_empty() {
                        return Err(err(codes::key_not_complete(format!(
                            "{} needs the full primary key: no value for key column(s) {}",
                            kind_name(kind),
                            missing.join(", ")
                        ))));
                    }
                }
                if kind == OpKind::Delete {
                    (key, Vec::new())
                } else {
                    (key, values)
                }
            }
        };
        let op = Py::new(
            py,
            Operation {
                table: def.name.clone(),
                kind: kind_name(kind),
                names: op_names,
                state: Mutex::new(OpState::default()),
            },
        )?;
        let mut g = lock(py, &self.inner);
        let id = guard(|| g.tx.define_by_pos(&t, kind, key, values, read_cols))
            .map_err(|e| to_pyerr(py, e))?;
        g.pending.push((id, op.clone_ref(py)));
        Ok(op)
    }

    /// Executes in the engine without the GIL, then fills in the operations.
    fn run(&self, py: Python<'_>, exec: ExecType, ao: AbortOption) -> PyResult<()> {
        let (r, outcomes) = py.detach(|| {
            let mut g = lock_detached(&self.inner);
            let g = &mut *g;
            let r = guard(|| g.tx.execute(exec, ao));
            let pending = std::mem::take(&mut g.pending);
            let outcomes: Vec<(Py<Operation>, Outcome)> = pending
                .into_iter()
                .map(|(id, op)| {
                    let o = match g.tx.outcome(id) {
                        Some(OpOutcome::Row(_)) => match g.tx.take_row(id) {
                            Some(row) => Outcome::Row(row),
                            None => Outcome::Done,
                        },
                        Some(OpOutcome::Done) => Outcome::Done,
                        Some(OpOutcome::Failed(e)) => Outcome::Failed(e.clone()),
                        Some(OpOutcome::Pending) | None => Outcome::NotRun,
                    };
                    (op, o)
                })
                .collect();
            (r, outcomes)
        });
        for (op, o) in outcomes {
            op.get().set(py, o)?;
        }
        r.map_err(|e| to_pyerr(py, e))
    }

    fn close_inner(&self, py: Python<'_>) -> R<()> {
        py.detach(|| {
            let mut g = lock_detached(&self.inner);
            g.pending.clear();
            guard(|| {
                g.tx.close();
                Ok(())
            })
        })
    }

    fn current_state(&self, py: Python<'_>) -> TxState {
        lock(py, &self.inner).tx.state()
    }
}

#[pymethods]
impl Transaction {
    /// Defines an insert of a row (dict). Returns its Operation.
    fn insert(
        &self,
        py: Python<'_>,
        table: &str,
        row: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Operation>> {
        self.define(py, OpKind::Insert, table, row, None)
    }

    /// Defines an update: the dict holds the full primary key and the columns to set.
    fn update(
        &self,
        py: Python<'_>,
        table: &str,
        row: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Operation>> {
        self.define(py, OpKind::Update, table, row, None)
    }

    /// Defines a write (insert or overwrite): the dict holds the full primary key.
    fn write(
        &self,
        py: Python<'_>,
        table: &str,
        row: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Operation>> {
        self.define(py, OpKind::Write, table, row, None)
    }

    /// Defines a delete by primary key (other columns of the dict are ignored).
    fn delete(
        &self,
        py: Python<'_>,
        table: &str,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Operation>> {
        self.define(py, OpKind::Delete, table, key, None)
    }

    /// Defines a primary-key read (like readTuple); the row is in `.row` after execute.
    #[pyo3(signature = (table, key, columns=None, lock_mode=0))]
    fn read(
        &self,
        py: Python<'_>,
        table: &str,
        key: &Bound<'_, PyAny>,
        columns: Option<&Bound<'_, PyAny>>,
        lock_mode: i32,
    ) -> PyResult<Py<Operation>> {
        let mode = crate::lock_mode(lock_mode).map_err(err)?;
        self.define(py, OpKind::Read(mode), table, key, columns)
    }

    /// Runs the operations defined since the last execute, then keeps the transaction
    /// open (NoCommit), commits (Commit) or rolls back (Rollback).
    #[pyo3(signature = (exec_type=1, abort_option=0))]
    fn execute(&self, py: Python<'_>, exec_type: i32, abort_option: i32) -> PyResult<()> {
        let exec = crate::exec_type(exec_type).map_err(err)?;
        let ao = crate::abort_option(abort_option).map_err(err)?;
        self.run(py, exec, ao)
    }

    /// execute(Commit).
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, ExecType::Commit, AbortOption::AbortOnError)
    }

    /// execute(Rollback).
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, ExecType::Rollback, AbortOption::AbortOnError)
    }

    /// Closes the transaction; an open one is rolled back. Later use raises 4604.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.close_inner(py).map_err(|e| to_pyerr(py, e))
    }

    /// A scan inside this transaction (locking scans keep their locks until it ends).
    #[pyo3(signature = (table, columns=None, lock_mode=2, batch_size=256))]
    fn scan(
        slf: &Bound<'_, Self>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
        lock_mode: i32,
        batch_size: usize,
    ) -> PyResult<ScanIterator> {
        let py = slf.py();
        let me = slf.get();
        let args = ScanArgs {
            table: py_result(me.ndb.table(table))?,
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
        ScanIterator::open(py, Owner::Shared(slf.clone().unbind()), args)
    }

    /// An ordered-index range scan inside this transaction, in index order.
    #[pyo3(signature = (table, index, low=None, high=None, low_inclusive=true, high_inclusive=true, descending=false, columns=None, lock_mode=2, batch_size=256))]
    #[allow(clippy::too_many_arguments)]
    fn index_scan(
        slf: &Bound<'_, Self>,
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
        let py = slf.py();
        let me = slf.get();
        let t = py_result(me.ndb.table(table))?;
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
        ScanIterator::open(py, Owner::Shared(slf.clone().unbind()), args)
    }

    /// "Open", "Committed", "Aborted" or "Closed".
    #[getter]
    fn state(&self, py: Python<'_>) -> &'static str {
        state_name(self.current_state(py))
    }

    /// The global checkpoint of the commit (None before a successful commit).
    #[getter]
    fn gci(&self, py: Python<'_>) -> Option<u64> {
        lock(py, &self.inner).tx.gci()
    }

    /// The error that failed the transaction or its last execute, if any.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        let e = lock(py, &self.inner).tx.error().cloned();
        e.map(|e| to_pyerr(py, e).into_value(py).into_any())
    }

    /// The transaction id.
    #[getter]
    fn id(&self, py: Python<'_>) -> u64 {
        lock(py, &self.inner).tx.id()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits when the block ends normally (unless already committed or rolled back),
    /// rolls back when it raises; closes the transaction either way.
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let raised = exc.len() > 0 && !exc.get_item(0)?.is_none();
        if !raised && self.current_state(py) == TxState::Open {
            let r = self.run(py, ExecType::Commit, AbortOption::AbortOnError);
            self.close(py)?;
            r?;
        } else {
            self.close(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let g = lock(py, &self.inner);
        format!(
            "<rndb.Transaction id={} {}>",
            g.tx.id(),
            state_name(g.tx.state())
        )
    }
}
