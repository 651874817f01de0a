//! `rndb.RemoteTransaction`: a transaction over TCP in rounds, from
//! `MgmClient.start_transaction()` — the embedded `rndb.Transaction`'s surface
//! (insert/update/write/delete/read define operations, `execute(NoCommit|Commit|
//! Rollback, abort_option)` runs those defined since the last execute), on
//! `rndb::cluster::remote_txn::RemoteTransaction`.
//!
//! Semantics over TCP: the TC on a data node keeps the transaction open between
//! rounds with its row locks held. With AbortOnError (the default) a failed operation
//! (630 duplicate key, 626 no such row) aborts the whole transaction and every
//! operation of that round carries the error. With AO_IgnoreError an operation that
//! fails on its row fails alone — its `error` is set, it changed nothing — and the
//! round's other operations go on (the TC's `ignore_errors`); other errors still
//! abort. LM_SimpleRead takes a shared lock held to the end of the
//! transaction (as LM_Read). A node failure under the transaction is 4010
//! (temporary: run it again); 4012 means the commit's outcome is unknown.
//!
//! Invariant: one round at a time (the state sits behind a mutex taken detached from
//! the interpreter; the round runs without the GIL).

use crate::convert::{extract_columns, key_values, names};
use crate::errors::{err, guard, to_pyerr};
use crate::lock_detached;
use crate::mgmclient::{MgmClient, key_for, row_values, set_values};
use crate::remote_scan::RemoteScanIterator;
use crate::transaction::{Operation, Outcome};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use rndb::api::OpKind;
use rndb::cluster::remote_txn::RemoteTransaction as CoreTxn;
use rndb::error::codes;
use rndb::transport::data::{KeyOp, OpType, TcExec};
use rndb::{AbortOption, ExecType, LockMode};
use std::sync::Mutex;

struct Inner {
    tx: CoreTxn,
    /// Operations defined since the last execute (a write without its full primary
    /// key is kept with its error, raised at execute as NDB API does).
    pending: Vec<(Result<KeyOp, rndb::NdbError>, Py<Operation>)>,
    gci: Option<u64>,
    /// "Open", "Committed", "Aborted" or "Closed".
    state: &'static str,
    error: Option<rndb::NdbError>,
}

/// See the module notes.
#[pyclass(frozen, module = "rndb")]
pub struct RemoteTransaction {
    /// The client it came from (table definitions).
    client: Py<MgmClient>,
    database: String,
    /// This process's number for the transaction (`id`), given at its start as NDB
    /// API gives transaction ids on the API side.
    id: u64,
    inner: Mutex<Inner>,
}

/// The next transaction's `id`.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl RemoteTransaction {
    pub(crate) fn start(client: Py<MgmClient>, tx: CoreTxn, database: &str) -> RemoteTransaction {
        RemoteTransaction {
            client,
            database: database.to_string(),
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            inner: Mutex::new(Inner {
                tx,
                pending: Vec::new(),
                gci: None,
                state: "Open",
                error: None,
            }),
        }
    }

    fn define(
        &self,
        py: Python<'_>,
        kind: OpKind,
        table: &str,
        data: &Bound<'_, PyAny>,
        columns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Operation>> {
        let (d, def) = self.client.get().table_def(py, &self.database, table)?;
        let (op, key, values, cols, op_names) = match kind {
            OpKind::Read(mode) => {
                let pk_names = names(py, &def, &def.primary_key);
                let key = key_values(&def, &pk_names, data).map_err(err)?;
                let wanted = extract_columns(columns).map_err(err)?;
                let cols =
                    crate::convert::column_positions(&def, wanted.as_deref()).map_err(err)?;
                let op_names = names(py, &def, &cols)
                    .into_iter()
                    .map(|n| n.unbind())
                    .collect::<Vec<Py<PyString>>>();
                let op = match mode {
                    LockMode::CommittedRead => OpType::ReadCommitted,
                    LockMode::Exclusive => OpType::ReadExclusive,
                    LockMode::Read | LockMode::SimpleRead => OpType::ReadShared,
                };
                let cols = cols.iter().map(|&c| c as u32).collect();
                (op, Ok(key), Vec::new(), cols, op_names)
            }
            _ => {
                let values = row_values(&def, data).map_err(err)?;
                // An insert without its full key fails at execute (the key may be
                // given by other means in NDB API); other writes at once.
                let op = match kind {
                    OpKind::Insert => OpType::Insert,
                    OpKind::Update => OpType::Update,
                    OpKind::Write => OpType::Write,
                    _ => OpType::Delete,
                };
                let key = match key_for(py, &d, &def, &values, op) {
                    Err(e) if kind != OpKind::Insert => return Err(err(e)),
                    key => key,
                };
                (
                    op,
                    key,
                    set_values(&def, op, values),
                    Vec::new(),
                    Vec::new(),
                )
            }
        };
        let kind_name = match kind {
            OpKind::Read(_) => "read",
            OpKind::Insert => "insert",
            OpKind::Update => "update",
            OpKind::Write => "write",
            OpKind::Delete => "delete",
        };
        let handle = Py::new(
            py,
            Operation::pending(def.name.clone(), kind_name, op_names),
        )?;
        let mut g = lock_detached(&self.inner);
        if g.state != "Open" {
            return Err(to_pyerr(py, codes::transaction_closed()));
        }
        let database = self.database.clone();
        let table = def.name.clone();
        g.pending.push((
            key.map(|key| KeyOp {
                op,
                database,
                table,
                key,
                values,
                columns: cols,
            }),
            handle.clone_ref(py),
        ));
        Ok(handle)
    }

    fn run(&self, py: Python<'_>, exec: ExecType, ao: AbortOption) -> PyResult<()> {
        let exec = match exec {
            ExecType::NoCommit => TcExec::NoCommit,
            ExecType::Commit => TcExec::Commit,
            ExecType::Rollback => TcExec::Rollback,
        };
        let client = self.client.get();
        let (r, handles) = py.detach(|| {
            let mut g = lock_detached(&self.inner);
            if g.state != "Open" {
                return (Err(codes::transaction_closed()), Vec::new());
            }
            // A closed client's error (4009 for an embedded cluster's) before any round.
            if let Err(e) = client.data() {
                return (Err(e), Vec::new());
            }
            let pending = std::mem::take(&mut g.pending);
            let (ops, handles): (Vec<_>, Vec<Py<Operation>>) = if exec == TcExec::Rollback {
                (Vec::new(), Vec::new())
            } else {
                pending.into_iter().unzip()
            };
            let ops: Result<Vec<KeyOp>, rndb::NdbError> = ops.into_iter().collect();
            let r = match ops {
                Ok(ops) => {
                    let reads: Vec<bool> = ops.iter().map(|o| o.op.is_read()).collect();
                    let abort = ao == AbortOption::AbortOnError;
                    guard(|| g.tx.execute_checked(ops, exec, abort)).map(|c| (c, reads))
                }
                Err(e) => {
                    // The round is refused before it is sent: the transaction is rolled
                    // back, as a refused round is at the TC.
                    if g.tx.is_open() {
                        let _ = guard(|| g.tx.execute(Vec::new(), TcExec::Rollback));
                    }
                    Err(e)
                }
            };
            match &r {
                Ok((c, _)) => {
                    if exec == TcExec::Commit {
                        g.state = "Committed";
                        g.gci = Some(c.gci);
                    } else if exec == TcExec::Rollback {
                        g.state = "Aborted";
                    }
                }
                Err(e) => {
                    g.state = "Aborted";
                    g.error = Some(e.clone());
                }
            }
            (r.map(|(c, reads)| (c.results, c.failed, reads)), handles)
        });
        match r {
            Ok((results, mut failed, reads)) => {
                for (i, ((res, is_read), h)) in
                    results.into_iter().zip(reads).zip(&handles).enumerate()
                {
                    // AO_IgnoreError: a write that failed alone carries its error.
                    let alone = failed.iter().position(|(k, _)| *k == i);
                    let o = match (res, is_read, alone) {
                        (_, _, Some(at)) => Outcome::Failed(failed.swap_remove(at).1),
                        (Some(row), true, None) => Outcome::Row(row),
                        (None, true, None) => Outcome::Failed(codes::tuple_not_found()),
                        _ => Outcome::Done,
                    };
                    h.get().set(py, o)?;
                }
                Ok(())
            }
            Err(e) => {
                for h in &handles {
                    h.get().set(py, Outcome::Failed(e.clone()))?;
                }
                Err(to_pyerr(py, e))
            }
        }
    }

    /// Locks the rows of a scan's batch in this transaction (an LM_Exclusive scan from
    /// `scan`/`index_scan`); a refusal aborts it, as any failed round does.
    pub(crate) fn lock_scanned(
        &self,
        py: Python<'_>,
        def: &rndb::schema::TableDef,
        reads: &[u32],
        rows: Vec<Vec<rndb::Value>>,
    ) -> PyResult<Vec<Vec<rndb::Value>>> {
        py.detach(|| {
            let mut g = lock_detached(&self.inner);
            if g.state != "Open" {
                return Err(codes::transaction_closed());
            }
            let r = guard(|| g.tx.lock_rows(&self.database, def, reads, rows));
            if let Err(e) = &r {
                g.state = "Aborted";
                g.error = Some(e.clone());
            }
            r
        })
        .map_err(|e| to_pyerr(py, e))
    }

    /// A scan for `scan`/`index_scan`: it sees this transaction's changes of the rounds
    /// executed before, and reads committed rows otherwise; locked in this transaction
    /// for LM_Exclusive.
    fn open_scan(
        slf: &Bound<'_, Self>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
        index: Option<crate::remote_scan::IndexArgs<'_, '_>>,
        lock_mode: i32,
        batch_size: usize,
    ) -> PyResult<RemoteScanIterator> {
        let py = slf.py();
        let me = slf.get();
        let mode = crate::lock_mode(lock_mode).map_err(err)?;
        let txn = {
            let g = lock_detached(&me.inner);
            if g.state != "Open" {
                return Err(to_pyerr(py, codes::transaction_closed()));
            }
            g.tx.txn_key()
        };
        let columns = extract_columns(columns).map_err(err)?;
        let (d, def) = me.client.get().table_def(py, &me.database, table)?;
        let locker = (mode == LockMode::Exclusive).then(|| slf.clone().unbind());
        let args = crate::remote_scan::RemoteScanArgs {
            columns,
            index,
            batch_size,
            lock_in: locker,
            txn,
        };
        RemoteScanIterator::open(py, d, def, &me.database, args)
    }

    fn close_inner(&self, py: Python<'_>) {
        py.detach(|| {
            let mut g = lock_detached(&self.inner);
            g.pending.clear();
            if g.state == "Open" && g.tx.is_open() {
                let _ = guard(|| g.tx.execute(Vec::new(), TcExec::Rollback));
            }
            g.state = "Closed";
        })
    }
}

#[pymethods]
impl RemoteTransaction {
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

    /// Defines a primary-key read; LM_Read and LM_Exclusive hold the row's lock until
    /// the transaction ends. The row is in `.row` after execute.
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

    /// A scan of every row of a table, inside this transaction: with LM_Exclusive each
    /// batch is locked in the transaction before its rows are returned (their values
    /// read under the lock), so updates and deletes by their keys change rows nobody
    /// changed in between; the locks are held until the transaction ends. Other lock
    /// modes read committed rows (NDB releases an LM_Read scan's lock as it moves on).
    #[pyo3(signature = (table, columns=None, lock_mode=2, batch_size=256))]
    fn scan(
        slf: &Bound<'_, Self>,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
        lock_mode: i32,
        batch_size: usize,
    ) -> PyResult<RemoteScanIterator> {
        Self::open_scan(slf, table, columns, None, lock_mode, batch_size)
    }

    /// An ordered-index range scan inside this transaction, in index order; locks as
    /// `scan` does.
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
    ) -> PyResult<RemoteScanIterator> {
        let ix = crate::remote_scan::IndexArgs {
            index,
            low,
            high,
            low_inclusive,
            high_inclusive,
            descending,
        };
        Self::open_scan(slf, table, columns, Some(ix), lock_mode, batch_size)
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
    fn close(&self, py: Python<'_>) {
        self.close_inner(py);
    }

    /// "Open", "Committed", "Aborted" or "Closed".
    #[getter]
    fn state(&self) -> &'static str {
        lock_detached(&self.inner).state
    }

    /// The global checkpoint of the commit (None before a successful commit).
    #[getter]
    fn gci(&self) -> Option<u64> {
        lock_detached(&self.inner).gci
    }

    /// The error that failed the transaction, if any.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        let e = lock_detached(&self.inner).error.clone();
        e.map(|e| to_pyerr(py, e).into_value(py).into_any())
    }

    /// This process's number for the transaction (unique among its transactions).
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }

    /// The data node coordinating the transaction (None before its first round).
    #[getter]
    fn tc_node(&self) -> Option<u32> {
        lock_detached(&self.inner).tx.tc_node()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits when the block ends normally (unless already committed or rolled back),
    /// rolls back when it raises; closes the transaction either way.
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let raised = exc.len() > 0 && !exc.get_item(0)?.is_none();
        let r = if !raised && self.state() == "Open" {
            self.run(py, ExecType::Commit, AbortOption::AbortOnError)
        } else {
            Ok(())
        };
        self.close_inner(py);
        r.map(|()| false)
    }

    fn __repr__(&self) -> String {
        let g = lock_detached(&self.inner);
        match g.tx.tc_node() {
            Some(n) => format!(
                "<rndb.RemoteTransaction id={} at node {n} {}>",
                self.id, g.state
            ),
            None => format!("<rndb.RemoteTransaction id={} {}>", self.id, g.state),
        }
    }
}
