//! Primary-key operations (NdbOperation): readTuple/insertTuple/updateTuple/
//! writeTuple/deleteTuple, equal, setValue, getValue.

use crate::error::{guard, handle_error, rndb_error};
use crate::handle::{Handle, Kind};
use crate::ndb::tx_by_handle;
use crate::txn::{OpType, TxObj, op_status_error};
use crate::types::from_ndb;
use crate::{cstr, rndb_operation, rndb_rec_attr, rndb_transaction};
use rndb_core::error::{ErrorClassification, NdbError, Result, codes};
use rndb_core::schema::Value;
use rndb_core::{LockMode, OpKind};
use std::ffi::{c_char, c_int, c_void};

/// NdbOperation::LockMode, NDB's values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_lock_mode {
    /// Shared lock held until the transaction ends.
    RNDB_LM_READ = 0,
    /// Exclusive lock held until the transaction ends.
    RNDB_LM_EXCLUSIVE = 1,
    /// No lock: the latest committed row (LM_Dirty).
    RNDB_LM_COMMITTED_READ = 2,
    /// Shared lock released once the row is read.
    RNDB_LM_SIMPLE_READ = 3,
}

/// NdbOperation::AbortOption, NDB's values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_abort_option {
    /// AbortOnError.
    RNDB_DEFAULT_ABORT_OPTION = -1,
    /// The first failing operation aborts the transaction.
    RNDB_ABORT_ON_ERROR = 0,
    /// Operations that fail without side effects (626, 630...) only record their error.
    RNDB_AO_IGNORE_ERROR = 2,
}

#[inline(always)]
pub(crate) fn lock_mode(m: c_int) -> Result<LockMode> {
    Ok(match m {
        0 => LockMode::Read,
        1 => LockMode::Exclusive,
        2 => LockMode::CommittedRead,
        3 => LockMode::SimpleRead,
        _ => {
            return Err(codes::bad_argument(format!(
                "lock mode {m}: use LM_Read (0), LM_Exclusive (1), LM_CommittedRead (2) or LM_SimpleRead (3)"
            )));
        }
    })
}

pub(crate) fn ndb_error(code: u32, message: &str, detail: impl std::fmt::Display) -> NdbError {
    NdbError::new(
        code,
        ErrorClassification::ApplicationError,
        message.to_string(),
    )
    .detail(detail)
}

/// The transaction and operation index an operation (or scan) handle names.
#[inline(always)]
pub(crate) fn op_ref<'a, P>(p: *const P, kinds: &[Kind]) -> Result<(Handle, &'a mut TxObj, usize)> {
    let h = Handle::decode(p, kinds).map_err(|e| handle_error(kinds[0], e))?;
    let tx = tx_by_handle(h)?;
    let i = h.sub as usize;
    if i >= tx.n_ops {
        return Err(handle_error(kinds[0], crate::handle::HandleError::Stale));
    }
    Ok((h, tx, i))
}

/// Runs a define-phase body: a failure is recorded on the operation and the
/// transaction (which then fails at execute, as NDB's setErrorCodeAbort does).
fn define<R: crate::error::FfiDefault>(
    name: &str,
    op: *const rndb_operation,
    f: impl FnOnce(&mut TxObj, usize) -> Result<R>,
) -> R {
    guard(name, || {
        let (_, tx, i) = op_ref(op, &[Kind::Operation, Kind::Scan])?;
        tx.check_open()?;
        match f(tx, i) {
            Ok(v) => Ok(v),
            Err(e) => Err(tx.define_failed(Some(i), e)),
        }
    })
}

fn set_kind(name: &str, op: *mut rndb_operation, kind: OpKind) -> c_int {
    define(name, op, |tx, i| {
        let o = &mut tx.ops[i];
        match o.ty {
            OpType::Scan => Err(op_status_error(
                "readTuple/insertTuple/... on a scan operation: use readTuples",
            )),
            _ => {
                o.ty = OpType::Key(kind);
                Ok(0)
            }
        }
    })
}

/// Defines a primary-key read, NDB's `readTuple(lock_mode)` (an `rndb_lock_mode`
/// value). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_read_tuple(
    op: *mut rndb_operation,
    lock_mode_value: c_int,
) -> c_int {
    match lock_mode(lock_mode_value) {
        Ok(m) => set_kind("rndb_operation_read_tuple", op, OpKind::Read(m)),
        Err(e) => define("rndb_operation_read_tuple", op, |_, _| Err::<c_int, _>(e)),
    }
}

/// Defines an insert (NDB's insertTuple): fails with 630 if the key exists. Returns 0
/// or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_insert_tuple(op: *mut rndb_operation) -> c_int {
    set_kind("rndb_operation_insert_tuple", op, OpKind::Insert)
}

/// Defines an update (NDB's updateTuple): fails with 626 if the key does not exist.
/// Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_update_tuple(op: *mut rndb_operation) -> c_int {
    set_kind("rndb_operation_update_tuple", op, OpKind::Update)
}

/// Defines a write (NDB's writeTuple): insert, or update when the key exists. Returns
/// 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_write_tuple(op: *mut rndb_operation) -> c_int {
    set_kind("rndb_operation_write_tuple", op, OpKind::Write)
}

/// Defines a delete (NDB's deleteTuple): fails with 626 if the key does not exist.
/// Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_delete_tuple(op: *mut rndb_operation) -> c_int {
    set_kind("rndb_operation_delete_tuple", op, OpKind::Delete)
}

/// Column position of `name` (or `id` when name is NULL) in the operation's table.
#[inline(always)]
unsafe fn column_of(tx: &TxObj, i: usize, name: *const c_char, id: u32) -> Result<usize> {
    let o = &tx.ops[i];
    let def = &o.table()?.def;
    if name.is_null() {
        let id = id as usize;
        if id >= def.columns.len() {
            return Err(codes::no_such_column(&format!(
                "attribute id {id} (table '{}' has {} columns)",
                def.name,
                def.columns.len()
            )));
        }
        return Ok(id);
    }
    // SAFETY: a NUL-terminated string from the caller.
    let n = unsafe { cstr(name, "attribute name") }?;
    def.column_index(n)
        .ok_or_else(|| codes::no_such_column(&format!("'{n}' in table '{}'", def.name)))
}

unsafe fn equal_impl(
    tx: &mut TxObj,
    i: usize,
    col: usize,
    value: *const c_void,
    len: u32,
) -> Result<c_int> {
    let o = &mut tx.ops[i];
    let crate::txn::OpObj {
        table,
        ty,
        key,
        key_plain,
        ..
    } = o;
    let table = table
        .as_ref()
        .ok_or_else(|| codes::internal("operation without a table"))?;
    let c = &table.def.columns[col];
    match ty {
        OpType::Undefined => {
            return Err(op_status_error(
                "equal before readTuple/insertTuple/updateTuple/writeTuple/deleteTuple",
            ));
        }
        OpType::Scan => {
            return Err(ndb_error(
                4514,
                "Can only call setBound/equal() for an NdbIndexScanOperation",
                "equal on a scan: use setBound on an index scan",
            ));
        }
        OpType::Key(_) => {}
    }
    if !c.primary_key {
        return Err(ndb_error(
            4205,
            "No Key attribute used to define tuple",
            format!(
                "equal on column '{}', which is not part of the primary key",
                c.name
            ),
        ));
    }
    if key.iter().any(|(p, _)| *p == col) {
        return Err(ndb_error(
            4206,
            "Not allowed to equal key attribute twice",
            format!("column '{}'", c.name),
        ));
    }
    if value.is_null() {
        return Err(ndb_error(
            4505,
            "NULL value not allowed in primary key search",
            format!("column '{}'", c.name),
        ));
    }
    // SAFETY: NDB's contract on the value buffer.
    let v = unsafe { from_ndb(&c.ty, &c.name, value.cast(), len) }?;
    *key_plain = false;
    key.push((col, v));
    Ok(0)
}

unsafe fn set_value_impl(
    tx: &mut TxObj,
    i: usize,
    col: usize,
    value: *const c_void,
    len: u32,
) -> Result<c_int> {
    let o = &mut tx.ops[i];
    let crate::txn::OpObj {
        table,
        ty,
        key,
        key_plain,
        values,
        ..
    } = o;
    let table = table
        .as_ref()
        .ok_or_else(|| codes::internal("operation without a table"))?;
    let c = &table.def.columns[col];
    match *ty {
        OpType::Key(OpKind::Insert | OpKind::Update | OpKind::Write) => {}
        OpType::Key(OpKind::Read(_)) => {
            return Err(ndb_error(
                4504,
                "SetValue not allowed in Read operation",
                format!("column '{}'", c.name),
            ));
        }
        _ => {
            return Err(ndb_error(
                4234,
                "Illegal to call setValue in this state",
                format!(
                    "column '{}': setValue needs insertTuple, updateTuple or writeTuple",
                    c.name
                ),
            ));
        }
    }
    let v = if value.is_null() {
        if !c.nullable {
            return Err(ndb_error(
                4203,
                "Trying to set a NOT NULL attribute to NULL",
                format!("column '{}'", c.name),
            ));
        }
        Value::Null
    } else {
        // SAFETY: NDB's contract on the value buffer.
        unsafe { from_ndb(&c.ty, &c.name, value.cast(), len) }?
    };
    if c.primary_key {
        // NDB accepts key columns through setValue for inserts and writes.
        if matches!(*ty, OpType::Key(OpKind::Update)) {
            return Err(codes::pk_update().detail(format!("column '{}'", c.name)));
        }
        *key_plain = false;
        key.retain(|(p, _)| *p != col);
        key.push((col, v));
        return Ok(0);
    }
    // A column set twice: the engine applies the values in order, the last one wins.
    if values.capacity() == 0 {
        values.reserve(table.def.columns.len());
    }
    values.push((col, v));
    Ok(0)
}

#[inline(always)]
unsafe fn get_value_impl(
    th: Handle,
    tx: &mut TxObj,
    i: usize,
    col: usize,
    buf: *mut c_char,
) -> Result<*mut rndb_rec_attr> {
    let o = &tx.ops[i];
    let def = &o.table()?.def;
    match o.ty {
        OpType::Key(OpKind::Read(_)) | OpType::Scan => {}
        _ => {
            return Err(ndb_error(
                4230,
                "Illegal state when calling getValue, probably not a read",
                format!(
                    "getValue('{}') needs readTuple (or a scan)",
                    def.columns[col].name
                ),
            ));
        }
    }
    let ty = def.columns[col].ty;
    let ra = tx.add_rec_attr(i, col, ty, buf.cast())?;
    Ok(th.with(Kind::RecAttr, ra as u32).ptr())
}

/// Sets a primary-key column by name, NDB's `equal(attrName, value, len)`. `value` is
/// in NDB's format (see the header's notes on value formats); `len` is its size in bytes
/// or 0 for the column's own size (VARCHAR: read from the length prefix). A size that
/// does not match the column gives error 4209 naming the column and both sizes; a
/// non-key column 4205; an unknown name 4004. Returns 0 or -1 (the error also fails the
/// transaction's next execute).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_operation_equal(
    op: *mut rndb_operation,
    attr_name: *const c_char,
    value: *const c_void,
    len: u32,
) -> c_int {
    define("rndb_operation_equal", op, |tx, i| {
        if attr_name.is_null() {
            return Err(codes::bad_argument("NULL attribute name"));
        }
        // SAFETY: strings and buffers from the caller, per NDB's contract.
        unsafe {
            let col = column_of(tx, i, attr_name, 0)?;
            equal_impl(tx, i, col, value, len)
        }
    })
}

/// `rndb_operation_equal` by attribute id (the column's position in its table).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_operation_equal_id(
    op: *mut rndb_operation,
    attr_id: u32,
    value: *const c_void,
    len: u32,
) -> c_int {
    define("rndb_operation_equal_id", op, |tx, i| {
        // SAFETY: buffers from the caller, per NDB's contract.
        unsafe {
            let col = column_of(tx, i, std::ptr::null(), attr_id)?;
            equal_impl(tx, i, col, value, len)
        }
    })
}

/// Sets a column of an insert/update/write, NDB's `setValue(attrName, value, len)`:
/// `value` in NDB's format, NULL for SQL NULL (4203 on a NOT NULL column); `len` as
/// for `rndb_operation_equal`. Returns 0 or -1 (4004 unknown column, 4209 wrong size,
/// 4504 on a read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_operation_set_value(
    op: *mut rndb_operation,
    attr_name: *const c_char,
    value: *const c_void,
    len: u32,
) -> c_int {
    define("rndb_operation_set_value", op, |tx, i| {
        if attr_name.is_null() {
            return Err(codes::bad_argument("NULL attribute name"));
        }
        // SAFETY: strings and buffers from the caller, per NDB's contract.
        unsafe {
            let col = column_of(tx, i, attr_name, 0)?;
            set_value_impl(tx, i, col, value, len)
        }
    })
}

/// `rndb_operation_set_value` by attribute id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_operation_set_value_id(
    op: *mut rndb_operation,
    attr_id: u32,
    value: *const c_void,
    len: u32,
) -> c_int {
    define("rndb_operation_set_value_id", op, |tx, i| {
        // SAFETY: buffers from the caller, per NDB's contract.
        unsafe {
            let col = column_of(tx, i, std::ptr::null(), attr_id)?;
            set_value_impl(tx, i, col, value, len)
        }
    })
}

/// Asks for a column's value, NDB's `getValue(attrName, buf)`: returns a rec attr whose
/// value is defined after the transaction (or the scan's nextResult) executed. If `buf`
/// is not NULL the value is also copied there in NDB's format (the buffer must hold
/// `rndb_column_get_size_in_bytes` bytes). Works on reads and scans (accepts an
/// `rndb_scan*` cast with `rndb_scan_as_operation`). NULL with error 4004 for an unknown
/// column, 4230 on a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_operation_get_value(
    op: *mut rndb_operation,
    attr_name: *const c_char,
    buf: *mut c_char,
) -> *mut rndb_rec_attr {
    let th = Handle::decode(op, &[Kind::Operation, Kind::Scan]).ok();
    define("rndb_operation_get_value", op, |tx, i| {
        if attr_name.is_null() {
            return Err(codes::bad_argument("NULL attribute name"));
        }
        let th = th.ok_or_else(|| codes::internal("handle"))?;
        // SAFETY: strings from the caller.
        unsafe {
            let col = column_of(tx, i, attr_name, 0)?;
            get_value_impl(th, tx, i, col, buf)
        }
    })
}

/// `rndb_operation_get_value` by attribute id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_operation_get_value_id(
    op: *mut rndb_operation,
    attr_id: u32,
    buf: *mut c_char,
) -> *mut rndb_rec_attr {
    let th = Handle::decode(op, &[Kind::Operation, Kind::Scan]).ok();
    define("rndb_operation_get_value_id", op, |tx, i| {
        let th = th.ok_or_else(|| codes::internal("handle"))?;
        // SAFETY: no strings; the buffer is only stored.
        unsafe {
            let col = column_of(tx, i, std::ptr::null(), attr_id)?;
            get_value_impl(th, tx, i, col, buf)
        }
    })
}

/// The operation's error (NDB's NdbOperation::getNdbError): code 0 when it succeeded.
/// Never NULL: for a bad handle, the thread's last error.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_get_error(op: *const rndb_operation) -> *const rndb_error {
    match op_ref(op, &[Kind::Operation, Kind::Scan]) {
        Ok((_, tx, i)) => tx.ops[i].error.ptr(),
        Err(e) => {
            crate::error::set_last(&e);
            crate::error::last_ptr()
        }
    }
}

/// Name of the operation's table (NDB's getTableName); NULL on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_get_table_name(op: *const rndb_operation) -> *const c_char {
    guard("rndb_operation_get_table_name", || {
        let (_, tx, i) = op_ref(op, &[Kind::Operation, Kind::Scan])?;
        let o = &mut tx.ops[i];
        let name = crate::error::c_string(o.table()?.name());
        o.table_name = name;
        Ok(o.table_name.as_ptr())
    })
}

/// The transaction of an operation (NDB's getNdbTransaction); NULL on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_operation_get_transaction(
    op: *const rndb_operation,
) -> *mut rndb_transaction {
    guard("rndb_operation_get_transaction", || {
        let (h, _, _) = op_ref(op, &[Kind::Operation, Kind::Scan])?;
        Ok(h.with(Kind::Transaction, 0).ptr())
    })
}

#[allow(dead_code)]
fn _enums_are_exported(_: rndb_lock_mode, _: rndb_abort_option) {}
