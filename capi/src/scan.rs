//! Scans (NdbScanOperation, NdbIndexScanOperation): readTuples, setBound, nextResult,
//! close, and the current-row operations.

use crate::error::guard;
use crate::handle::{Handle, Kind};
use crate::operation::{lock_mode, ndb_error, op_ref};
use crate::txn::{OpType, TxObj, op_status_error};
use crate::types::from_ndb;
use crate::{cstr, rndb_operation, rndb_scan};
use rndb_core::OpKind;
use rndb_core::error::{Result, codes};
use rndb_core::schema::Value;
use std::ffi::{c_char, c_int, c_void};

/// NdbScanOperation::ScanFlag values (bits of `rndb_scan_read_tuples`' flags).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_scan_flag {
    /// Read rows in tuple order (accepted; table scans always do).
    RNDB_SF_TUP_SCAN = 1 << 16,
    /// Disk order (accepted, no effect).
    RNDB_SF_DISK_SCAN = 2 << 16,
    /// Ordered index scans: rows in index order over all partitions.
    RNDB_SF_ORDER_BY = 1 << 24,
    /// Same as SF_OrderBy.
    RNDB_SF_ORDER_BY_FULL = 16 << 24,
    /// Ordered index scans: descending order.
    RNDB_SF_DESCENDING = 2 << 24,
    /// Not supported (no multi-range scans): refused.
    RNDB_SF_READ_RANGE_NO = 4 << 24,
    /// Not supported: refused.
    RNDB_SF_MULTI_RANGE = 8 << 24,
    /// Key info for updateCurrentTuple/deleteCurrentTuple (always available).
    RNDB_SF_KEY_INFO = 1,
}

/// NdbIndexScanOperation::BoundType, NDB's values. A bound is read "bound `type`
/// column": BoundLE means the value is <= the column, i.e. an inclusive lower bound.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_bound_type {
    /// Lower bound, inclusive (value <= column).
    RNDB_BOUND_LE = 0,
    /// Lower bound, strict (value < column).
    RNDB_BOUND_LT = 1,
    /// Upper bound, inclusive (value >= column).
    RNDB_BOUND_GE = 2,
    /// Upper bound, strict (value > column).
    RNDB_BOUND_GT = 3,
    /// Equality (both bounds, inclusive).
    RNDB_BOUND_EQ = 4,
}

fn scan_body<R: crate::error::FfiDefault>(
    name: &str,
    scan: *const rndb_scan,
    f: impl FnOnce(Handle, &mut TxObj, usize) -> Result<R>,
) -> R {
    guard(name, || {
        let (h, tx, i) = op_ref(scan, &[Kind::Scan])?;
        match f(h, tx, i) {
            Ok(v) => Ok(v),
            Err(e) => Err(tx.fail(Some(i), e)),
        }
    })
}

/// The same scan as an `rndb_operation*`, for `rndb_operation_get_value` and
/// `rndb_operation_get_error` (NdbScanOperation derives from NdbOperation). NULL for a
/// NULL handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_as_operation(scan: *mut rndb_scan) -> *mut rndb_operation {
    scan.cast()
}

/// Defines the scan, NDB's `readTuples(lock_mode, scan_flags, parallel, batch)`:
/// `lock_mode` an `rndb_lock_mode` (LM_Read and LM_Exclusive keep row locks until the
/// transaction ends, LM_CommittedRead takes none), `scan_flags` `rndb_scan_flag` bits,
/// `parallel` ignored (every partition is scanned), `batch` rows per fetch (0 = 256).
/// Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_read_tuples(
    scan: *mut rndb_scan,
    lock_mode_value: c_int,
    scan_flags: u32,
    parallel: u32,
    batch: u32,
) -> c_int {
    let _ = parallel;
    scan_body("rndb_scan_read_tuples", scan, |_, tx, i| {
        tx.check_open()?;
        let mode = lock_mode(lock_mode_value)?;
        if scan_flags & ((4 << 24) | (8 << 24)) != 0 {
            return Err(codes::unsupported(
                "scan flags SF_ReadRangeNo and SF_MultiRange (multi-range scans)",
            ));
        }
        let s = tx.ops[i]
            .scan
            .as_mut()
            .ok_or_else(|| codes::internal("scan without state"))?;
        if s.core.is_some() || s.remote.is_some() {
            return Err(op_status_error("readTuples after the scan was executed"));
        }
        s.defined = true;
        s.mode = mode;
        s.descending = scan_flags & (2 << 24) != 0;
        s.sorted = scan_flags & ((1 << 24) | (16 << 24)) != 0 || s.descending;
        s.batch = batch as usize;
        Ok(0)
    })
}

unsafe fn set_bound_impl(
    tx: &mut TxObj,
    i: usize,
    name: *const c_char,
    id: u32,
    ty: c_int,
    value: *const c_void,
    len: u32,
) -> Result<c_int> {
    let o = &mut tx.ops[i];
    let table = o.table()?.clone();
    let s = o
        .scan
        .as_mut()
        .ok_or_else(|| codes::internal("scan without state"))?;
    let Some(ix) = s.index else {
        return Err(ndb_error(
            4514,
            "Can only call setBound/equal() for an NdbIndexScanOperation",
            "this is a table scan",
        ));
    };
    if s.core.is_some() || s.remote.is_some() {
        return Err(op_status_error("setBound after the scan was executed"));
    }
    let icols = &table.def.indexes[ix].columns;
    let k = if name.is_null() {
        let k = id as usize;
        if k >= icols.len() {
            return Err(ndb_error(
                4535,
                "Attempt to set bound on non key column",
                format!(
                    "index column #{k} (index '{}' has {})",
                    s.index_name,
                    icols.len()
                ),
            ));
        }
        k
    } else {
        // SAFETY: a NUL-terminated string from the caller.
        let n = unsafe { cstr(name, "attribute name") }?;
        let col = table.def.column_index(n).ok_or_else(|| {
            codes::no_such_column(&format!("'{n}' in table '{}'", table.def.name))
        })?;
        icols.iter().position(|&c| c == col).ok_or_else(|| {
            ndb_error(
                4535,
                "Attempt to set bound on non key column",
                format!("column '{n}' is not in index '{}'", s.index_name),
            )
        })?
    };
    let c = &table.def.columns[icols[k]];
    let v = if value.is_null() {
        Value::Null
    } else {
        // SAFETY: NDB's contract on the value buffer.
        unsafe { from_ndb(&c.ty, &c.name, value.cast(), len) }?
    };
    let (low, high) = match ty {
        0 => (Some(true), None),
        1 => (Some(false), None),
        2 => (None, Some(true)),
        3 => (None, Some(false)),
        4 => (Some(true), Some(true)),
        _ => {
            return Err(codes::bad_argument(format!(
                "bound type {ty}: BoundLE 0, BoundLT 1, BoundGE 2, BoundGT 3, BoundEQ 4"
            )));
        }
    };
    let twice = || {
        ndb_error(
            4522,
            "setBound() called twice for same key",
            format!("column '{}'", c.name),
        )
    };
    if (low.is_some() && s.low[k].is_some()) || (high.is_some() && s.high[k].is_some()) {
        return Err(twice());
    }
    if let Some(incl) = low {
        s.low[k] = Some((v.clone(), incl));
    }
    if let Some(incl) = high {
        s.high[k] = Some((v, incl));
    }
    Ok(0)
}

/// Sets a bound of an index scan, NDB's `setBound(attrName, type, value)`: `type` an
/// `rndb_bound_type` (BoundLE = the value is <= the column: inclusive lower bound),
/// `value` in NDB's format (NULL for a NULL bound), `len` its size or 0. Bounds go on a
/// prefix of the index columns (10 <= k < 20: BoundLE 10 and BoundGT 20 on k). Returns
/// 0 or -1 (4514 not an index scan, 4535 not an index column, 4209 wrong size).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_scan_set_bound(
    scan: *mut rndb_scan,
    attr_name: *const c_char,
    bound_type: c_int,
    value: *const c_void,
    len: u32,
) -> c_int {
    scan_body("rndb_scan_set_bound", scan, |_, tx, i| {
        if attr_name.is_null() {
            return Err(codes::bad_argument("NULL attribute name"));
        }
        // SAFETY: strings and buffers from the caller.
        unsafe { set_bound_impl(tx, i, attr_name, 0, bound_type, value, len) }
    })
}

/// `rndb_scan_set_bound` by index column number (0 = the index's first column).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_scan_set_bound_id(
    scan: *mut rndb_scan,
    index_column: u32,
    bound_type: c_int,
    value: *const c_void,
    len: u32,
) -> c_int {
    scan_body("rndb_scan_set_bound_id", scan, |_, tx, i| {
        // SAFETY: buffers from the caller.
        unsafe {
            set_bound_impl(
                tx,
                i,
                std::ptr::null(),
                index_column,
                bound_type,
                value,
                len,
            )
        }
    })
}

/// The next row, NDB's `nextResult(fetchAllowed, forceSend)`: 0 a row (the scan's rec
/// attrs hold it), 1 no more rows (again 1 if called after that), 2 no more buffered
/// rows and `fetch_allowed` was 0, -1 an error (4120 after `rndb_scan_close`, a lock
/// wait timeout 266 for a locking scan...).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_next_result(
    scan: *mut rndb_scan,
    fetch_allowed: c_int,
    force_send: c_int,
) -> c_int {
    let _ = force_send;
    scan_body("rndb_scan_next_result", scan, |_, tx, i| {
        tx.next_result(i, fetch_allowed != 0)
    })
}

/// Closes the scan, NDB's `close(forceSend, releaseOp)`: no more rows; locks taken by a
/// locking scan stay until the transaction ends. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_close(
    scan: *mut rndb_scan,
    force_send: c_int,
    release_op: c_int,
) -> c_int {
    let _ = (force_send, release_op);
    scan_body("rndb_scan_close", scan, |_, tx, i| {
        if let Some(s) = tx.ops[i].scan.as_mut() {
            if let Some(c) = &mut s.core {
                c.close();
            }
            if let Some(r) = &mut s.remote {
                r.close();
            }
            s.closed = true;
            s.buffer.clear();
        }
        Ok(0)
    })
}

fn current_key(tx: &TxObj, i: usize) -> Result<Vec<(usize, Value)>> {
    let s = tx.ops[i]
        .scan
        .as_ref()
        .ok_or_else(|| codes::internal("scan without state"))?;
    if s.current_key.is_empty() || s.closed {
        return Err(op_status_error(
            "no current row: call nextResult (returning 0) first",
        ));
    }
    Ok(s.current_key.clone())
}

/// NDB's `deleteCurrentTuple()`: defines a delete of the row last returned by
/// nextResult, executed with the transaction's next execute. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_delete_current_tuple(scan: *mut rndb_scan) -> c_int {
    scan_body("rndb_scan_delete_current_tuple", scan, |_, tx, i| {
        tx.check_open()?;
        let key = current_key(tx, i)?;
        let table = tx.ops[i].table()?.clone();
        let j = tx.add_op()?;
        let o = &mut tx.ops[j];
        o.table = Some(table);
        o.ty = OpType::Key(OpKind::Delete);
        o.key = key;
        Ok(0)
    })
}

/// NDB's `updateCurrentTuple()`: an update operation on the row last returned by
/// nextResult (its key already set): add `rndb_operation_set_value` calls; it runs with
/// the transaction's next execute. NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_update_current_tuple(scan: *mut rndb_scan) -> *mut rndb_operation {
    scan_body("rndb_scan_update_current_tuple", scan, |h, tx, i| {
        tx.check_open()?;
        let key = current_key(tx, i)?;
        let table = tx.ops[i].table()?.clone();
        let j = tx.add_op()?;
        let o = &mut tx.ops[j];
        o.table = Some(table);
        o.ty = OpType::Key(OpKind::Update);
        o.key = key;
        Ok(h.with(Kind::Operation, j as u32).ptr())
    })
}

/// 1 when the scan returns rows in index order (SF_OrderBy), 0 otherwise, -1 on a bad
/// handle (NDB's getSorted).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_get_sorted(scan: *const rndb_scan) -> c_int {
    scan_body("rndb_scan_get_sorted", scan, |_, tx, i| {
        Ok(tx.ops[i].scan.as_ref().is_some_and(|s| s.sorted) as c_int)
    })
}

/// 1 for a descending scan (SF_Descending), 0 otherwise, -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_scan_get_descending(scan: *const rndb_scan) -> c_int {
    scan_body("rndb_scan_get_descending", scan, |_, tx, i| {
        Ok(tx.ops[i].scan.as_ref().is_some_and(|s| s.descending) as c_int)
    })
}

#[allow(dead_code)]
fn _enums_are_exported(_: rndb_scan_flag, _: rndb_bound_type) {}
