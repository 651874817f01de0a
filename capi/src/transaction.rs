//! Transactions (NdbTransaction): operations and scans, execute, asynchronous prepare.

use crate::batch::run_fast_reads;
use crate::dict::{index_target, with_table_runtime};
use crate::error::{guard, handle_error, rndb_error};
use crate::handle::{Handle, Kind};
use crate::ndb::{close_tx, ndb_by_handle, tx_by_handle, tx_by_handle_raw};
use crate::operation::ndb_error;
use crate::txn::{Asynch, OpType, ScanState, TXS, TxObj, TxStatus};
use crate::{
    cstr, rndb_asynch_callback, rndb_index, rndb_operation, rndb_scan, rndb_table, rndb_transaction,
};
use rndb_core::api::TableRuntime;
use rndb_core::error::{Result, codes};
use rndb_core::{AbortOption, ExecType};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

/// NdbTransaction::ExecType, NDB's values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_exec_type {
    /// Execute the operations, keep the transaction open (locks held).
    RNDB_NO_COMMIT = 1,
    /// Execute the operations and commit.
    RNDB_COMMIT = 2,
    /// Roll back everything.
    RNDB_ROLLBACK = 3,
}

/// NdbTransaction::CommitStatusType, NDB's values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_commit_status {
    RNDB_NOT_STARTED = 0,
    RNDB_STARTED = 1,
    RNDB_COMMITTED = 2,
    RNDB_ABORTED = 3,
    RNDB_NEED_ABORT = 4,
}

pub(crate) fn release_registries() {
    TXS.release_all_memory();
}

#[inline(always)]
pub(crate) fn exec_type(e: c_int) -> Result<ExecType> {
    Ok(match e {
        0 | 1 => ExecType::NoCommit,
        2 => ExecType::Commit,
        3 => ExecType::Rollback,
        _ => {
            return Err(codes::bad_argument(format!(
                "exec type {e}: use NoCommit (1), Commit (2) or Rollback (3)"
            )));
        }
    })
}

#[inline(always)]
pub(crate) fn abort_option(a: c_int) -> Result<AbortOption> {
    Ok(match a {
        -1 | 0 => AbortOption::AbortOnError,
        2 => AbortOption::IgnoreError,
        _ => {
            return Err(ndb_error(
                4296,
                "Invalid AbortOption",
                format!("{a}: use AbortOnError (0) or AO_IgnoreError (2)"),
            ));
        }
    })
}

/// The transaction a handle names.
#[inline(always)]
pub(crate) fn tx_ref<'a>(p: *const rndb_transaction) -> Result<(Handle, &'a mut TxObj)> {
    let h =
        Handle::decode(p, &[Kind::Transaction]).map_err(|e| handle_error(Kind::Transaction, e))?;
    Ok((h, tx_by_handle(h)?))
}

/// The transaction a handle names, a compact single read left as it is (see the
/// `single` module: only for its hot-path calls).
#[inline(always)]
pub(crate) fn tx_ref_raw<'a>(p: *const rndb_transaction) -> Result<(Handle, &'a mut TxObj)> {
    let h =
        Handle::decode(p, &[Kind::Transaction]).map_err(|e| handle_error(Kind::Transaction, e))?;
    Ok((h, tx_by_handle_raw(h)?))
}

fn new_op(
    th: Handle,
    tx: &mut TxObj,
    table: &Arc<TableRuntime>,
    ty: OpType,
    scan: Option<ScanState>,
    kind: Kind,
) -> Result<Handle> {
    tx.check_open()?;
    let i = tx.add_op()?;
    let o = &mut tx.ops[i];
    // A recycled operation often held this table already: no reference count traffic.
    if !o.table.as_ref().is_some_and(|t| Arc::ptr_eq(t, table)) {
        o.table = Some(table.clone());
    }
    o.ty = ty;
    if scan.is_some() {
        tx.close_work = true;
    }
    let o = &mut tx.ops[i];
    o.scan = scan.map(Box::new);
    Ok(th.with(kind, i as u32))
}

/// Runs `f` with the engine table of `table` for transaction `tx`.
fn on_table<R>(
    tx: &mut TxObj,
    table: *const rndb_table,
    f: impl FnOnce(&mut TxObj, &Arc<TableRuntime>) -> Result<R>,
) -> Result<R> {
    let (_, n) = ndb_by_handle(tx.ndb)?;
    with_table_runtime(table, Some(n), |rt| f(tx, rt))
}

/// A primary-key operation on a table, NDB's `getNdbOperation(table)`; define it with
/// `rndb_operation_read_tuple` and friends. The table comes from `rndb_dict_get_table`
/// (a definition made by the application is looked up by name). NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_get_operation(
    tx: *mut rndb_transaction,
    table: *const rndb_table,
) -> *mut rndb_operation {
    guard("rndb_transaction_get_operation", || {
        let (th, t) = tx_ref(tx)?;
        let r = on_table(t, table, |t, rt| {
            new_op(th, t, rt, OpType::Undefined, None, Kind::Operation)
        });
        match r {
            Ok(h) => Ok(h.ptr()),
            Err(e) => Err(t.fail(None, e)),
        }
    })
}

/// NDB's `getNdbOperation(tableName)`: the same by table name in the Ndb's database.
/// NULL with error 723 when there is no such table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_transaction_get_operation_by_name(
    tx: *mut rndb_transaction,
    table_name: *const c_char,
) -> *mut rndb_operation {
    guard("rndb_transaction_get_operation_by_name", || {
        let (th, t) = tx_ref(tx)?;
        // SAFETY: a NUL-terminated string from the caller.
        let name = unsafe { cstr(table_name, "table name") }?;
        let rt = {
            let (_, n) = ndb_by_handle(t.ndb)?;
            n.table(name)
        };
        let r = rt.and_then(|rt| new_op(th, t, &rt, OpType::Undefined, None, Kind::Operation));
        match r {
            Ok(h) => Ok(h.ptr()),
            Err(e) => Err(t.fail(None, e)),
        }
    })
}

/// A full-table scan, NDB's `getNdbScanOperation(table)`: call `rndb_scan_read_tuples`,
/// ask for columns with `rndb_operation_get_value(rndb_scan_as_operation(scan), ...)`,
/// execute the transaction (NoCommit), then `rndb_scan_next_result`. NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_get_scan_operation(
    tx: *mut rndb_transaction,
    table: *const rndb_table,
) -> *mut rndb_scan {
    guard("rndb_transaction_get_scan_operation", || {
        let (th, t) = tx_ref(tx)?;
        let r = on_table(t, table, |t, rt| {
            new_op(
                th,
                t,
                rt,
                OpType::Scan,
                Some(ScanState::new(None, "", 0)),
                Kind::Scan,
            )
        });
        match r {
            Ok(h) => Ok(h.ptr()),
            Err(e) => Err(t.fail(None, e)),
        }
    })
}

/// An ordered-index range scan, NDB's `getNdbIndexScanOperation(index)` with an index
/// from `rndb_dict_get_index`: set bounds with `rndb_scan_set_bound`. NULL on failure
/// (a unique hash index cannot be scanned).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_get_index_scan_operation(
    tx: *mut rndb_transaction,
    index: *const rndb_index,
) -> *mut rndb_scan {
    guard("rndb_transaction_get_index_scan_operation", || {
        let (th, t) = tx_ref(tx)?;
        let target = {
            let (_, n) = ndb_by_handle(t.ndb)?;
            index_target(index, n)
        };
        let r = target.and_then(|(rt, pos, name)| {
            let ncols = rt.def.indexes[pos].columns.len();
            new_op(
                th,
                t,
                &rt,
                OpType::Scan,
                Some(ScanState::new(Some(pos), &name, ncols)),
                Kind::Scan,
            )
        });
        match r {
            Ok(h) => Ok(h.ptr()),
            Err(e) => Err(t.fail(None, e)),
        }
    })
}

/// Executes the operations defined since the last execute, NDB's
/// `execute(exec_type, abort_option, force)`: `exec_type` an `rndb_exec_type`,
/// `abort_option` an `rndb_abort_option` (-1 default = AbortOnError). Returns 0, or -1
/// with the error in `rndb_transaction_get_error` (and the failing operation in
/// `rndb_transaction_get_error_operation`): 626 a read or update found no row, 630
/// duplicate key, 266 lock wait timeout (temporary: retry), 4604 execute after the
/// transaction was committed... With a scan defined, Commit executes like NoCommit (the
/// scan needs the transaction open): execute(Commit) again after the scan.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_execute(
    tx: *mut rndb_transaction,
    exec_type_value: c_int,
    abort_option_value: c_int,
    force: c_int,
) -> c_int {
    let _ = force;
    guard("rndb_transaction_execute", || {
        let (_, t) = tx_ref(tx)?;
        let r = (|| {
            let exec = exec_type(exec_type_value)?;
            let abort = abort_option(abort_option_value)?;
            if t.asynch.is_some() {
                return Err(ndb_error(
                    4233,
                    "Calling execute (synchronous) when already prepared asynchronous transaction exists",
                    "send it with rndb_ndb_send_poll first",
                ));
            }
            execute_now(t, exec, abort)
        })();
        match r {
            Ok(()) => Ok(0),
            Err(e) => {
                if t.error.code() != e.code {
                    t.fail(None, e.clone());
                }
                Err(e)
            }
        }
    })
}

/// Executes a transaction synchronously (batched read path when it qualifies).
pub(crate) fn execute_now(t: &mut TxObj, exec: ExecType, abort: AbortOption) -> Result<()> {
    let (_, n) = ndb_by_handle(t.ndb)?;
    if n.core.is_none() {
        let db = n.db().to_string();
        if let Some(r) = n.remote_engine()? {
            return t.execute_remote(r, &db, exec, abort);
        }
    }
    let crate::ndb::NdbObj { core, scratch, .. } = n;
    let core = core.as_ref().ok_or_else(crate::conn::not_connected)?;
    if t.fast_reads_eligible(exec) {
        let mut one = [&mut *t];
        run_fast_reads(core, &mut one, scratch);
        if scratch.served[0] {
            if t.finish_fast(exec, abort) {
                return Ok(());
            }
            return Err(t.error.last.clone().unwrap_or_else(codes::tuple_not_found));
        }
    }
    t.execute_slow(core, exec, abort)
}

/// Prepares the transaction for asynchronous execution, NDB's
/// `executeAsynchPrepare(exec_type, callback, arg, abort_option)`: nothing runs until
/// `rndb_ndb_send_poll` (or `rndb_ndb_send_prepared_transactions` + `rndb_ndb_poll`),
/// which executes it and calls `callback(result, tx, arg)`. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_execute_asynch_prepare(
    tx: *mut rndb_transaction,
    exec_type_value: c_int,
    callback: rndb_asynch_callback,
    arg: *mut c_void,
    abort_option_value: c_int,
) -> c_int {
    guard("rndb_transaction_execute_asynch_prepare", || {
        // A compact single read stays one: nothing here looks at operations.
        let (th, t) = tx_ref_raw(tx)?;
        let r = (|| {
            let exec = exec_type(exec_type_value)?;
            let abort = abort_option(abort_option_value)?;
            if t.asynch.is_some() {
                return Err(codes::bad_argument(
                    "the transaction is already prepared for asynchronous execution",
                ));
            }
            if t.status == TxStatus::Committed {
                return Err(codes::transaction_closed()
                    .detail("executeAsynchPrepare after the transaction was committed"));
            }
            let n = if t.ndb_obj.0.is_null() {
                ndb_by_handle(t.ndb)?.1
            } else {
                // SAFETY: see `NdbPtr`: the transaction is open, so its Ndb is live.
                unsafe { &mut *t.ndb_obj.0 }
            };
            t.asynch = Some(Asynch {
                exec,
                abort,
                cb: callback,
                arg,
            });
            n.prepared.push(th);
            Ok(())
        })();
        match r {
            Ok(()) => Ok(0),
            Err(e) => Err(t.fail(None, e)),
        }
    })
}

/// NDB's `executeAsynch(...)`: prepares and sends at once; the callback runs at the next
/// `rndb_ndb_poll`. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_execute_asynch(
    tx: *mut rndb_transaction,
    exec_type_value: c_int,
    callback: rndb_asynch_callback,
    arg: *mut c_void,
    abort_option_value: c_int,
    force_send: c_int,
) -> c_int {
    let r = rndb_transaction_execute_asynch_prepare(
        tx,
        exec_type_value,
        callback,
        arg,
        abort_option_value,
    );
    if r != 0 {
        return r;
    }
    guard("rndb_transaction_execute_asynch", || {
        let (_, t) = tx_ref(tx)?;
        let nh = t.ndb;
        let (_, n) = ndb_by_handle(nh)?;
        crate::ndb::send_prepared(n);
        let _ = force_send;
        Ok(0)
    })
}

/// The transaction's error (NDB's getNdbError): code 0 when none. Never NULL: for a
/// NULL or closed handle, the thread's last error (which then names that problem).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_get_error(tx: *const rndb_transaction) -> *const rndb_error {
    match tx_ref(tx) {
        Ok((_, t)) => t.error.ptr(),
        Err(e) => {
            crate::error::set_last(&e);
            crate::error::last_ptr()
        }
    }
}

/// The operation that failed the last execute (NDB's getNdbErrorOperation), or NULL.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_get_error_operation(
    tx: *const rndb_transaction,
) -> *const rndb_operation {
    guard("rndb_transaction_get_error_operation", || {
        let (th, t) = tx_ref(tx)?;
        Ok(match t.error_op {
            Some(i) => {
                let kind = if t.ops[i].ty == OpType::Scan {
                    Kind::Scan
                } else {
                    Kind::Operation
                };
                th.with(kind, i as u32).ptr::<rndb_operation>() as *const rndb_operation
            }
            None => std::ptr::null(),
        })
    })
}

/// Closes the transaction, NDB's `NdbTransaction::close()` (same as
/// `rndb_ndb_close_transaction` with its Ndb). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_close(tx: *mut rndb_transaction) -> c_int {
    guard("rndb_transaction_close", || {
        let (th, t) = tx_ref(tx)?;
        let nh = t.ndb;
        let (_, n) = ndb_by_handle(nh)?;
        close_tx(nh, n, th)?;
        Ok(0)
    })
}

/// The transaction id (NDB's getTransactionId); 0 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_get_transaction_id(tx: *const rndb_transaction) -> u64 {
    guard("rndb_transaction_get_transaction_id", || {
        Ok(tx_ref(tx)?.1.id)
    })
}

/// NDB's commitStatus: an `rndb_commit_status` value; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_transaction_commit_status(tx: *const rndb_transaction) -> c_int {
    guard("rndb_transaction_commit_status", || {
        let (_, t) = tx_ref(tx)?;
        Ok(match t.status {
            TxStatus::Open if t.executed == 0 => rndb_commit_status::RNDB_NOT_STARTED,
            TxStatus::Open => rndb_commit_status::RNDB_STARTED,
            TxStatus::Committed => rndb_commit_status::RNDB_COMMITTED,
            TxStatus::Aborted => rndb_commit_status::RNDB_ABORTED,
        } as c_int)
    })
}

/// NDB's getGCI: the global checkpoint of the commit into `*gci`. Returns 0, or -1 when
/// the transaction did not commit (or a bad handle / NULL `gci`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_transaction_get_gci(
    tx: *const rndb_transaction,
    gci: *mut u64,
) -> c_int {
    guard("rndb_transaction_get_gci", || {
        let (_, t) = tx_ref(tx)?;
        if gci.is_null() {
            return Err(codes::bad_argument("NULL gci pointer"));
        }
        if t.status != TxStatus::Committed {
            return Err(codes::bad_argument("the transaction has not committed"));
        }
        // SAFETY: a writable u64 from the caller.
        unsafe { *gci = t.gci };
        Ok(0)
    })
}

#[allow(dead_code)]
fn _enums_are_exported(_: rndb_exec_type, _: rndb_commit_status) {}
