//! NdbRecord: a row layout (which columns, at which offsets, with which NULL bits) so that
//! one call defines a whole primary-key operation from a row buffer, and a read writes
//! its result into a row buffer; NDB's fast interface (flexAsynch -ndbrecord).

use crate::dict::{dict_mut, with_table_runtime};
use crate::error::{guard, handle_error};
use crate::handle::{Handle, Kind, Registry};
use crate::ndb::ndb_by_handle;
use crate::operation::{lock_mode, ndb_error};
use crate::transaction::{tx_ref, tx_ref_raw};
use crate::txn::{OpType, TxObj};
use crate::types::{fixed_size, from_ndb, to_ndb, var_size};
use crate::{
    rndb_column, rndb_dictionary, rndb_operation, rndb_record, rndb_table, rndb_transaction,
};
use rndb_core::api::TableRuntime;
use rndb_core::error::{Result, codes};
use rndb_core::schema::layout::{ColPlace, StoredRow};
use rndb_core::schema::{ColumnType, RowLayout, Value};
use rndb_core::{LockMode, OpKind};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uchar};
use std::sync::Arc;

/// One column of a record, NDB's `NdbDictionary::RecordSpecification`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rndb_record_spec {
    /// The column (from `rndb_table_get_column` or by name from any column object).
    pub column: *const rndb_column,
    /// Byte offset of the value in a row (NDB's format, see the notes at the top).
    pub offset: u32,
    /// Byte of the row holding the column's NULL bit (nullable columns).
    pub nullbit_byte_offset: u32,
    /// Bit (0..7) of that byte: set = NULL.
    pub nullbit_bit_in_byte: u32,
    /// NDB's column_flags: 0.
    pub column_flags: u32,
}

pub(crate) struct RecCol {
    pub col: usize,
    pub ty: ColumnType,
    pub offset: usize,
    pub null: Option<(usize, u8)>,
}

pub(crate) struct RecordDef {
    pub table: Arc<TableRuntime>,
    pub cols: Vec<RecCol>,
    /// Per table column: its index in `cols`.
    pub by_col: Vec<Option<usize>>,
    /// The table column of each of `cols`.
    pub all_cols: Vec<usize>,
    /// When every column is NOT NULL, fixed-size and stored in NDB's format: the copies
    /// (offset in the stored fixed part, offset in the row, length) that write a whole
    /// result row, adjacent columns merged.
    pub copy_plan: Option<Vec<(usize, usize, usize)>>,
    /// When the record has every primary-key column: (table column, index in `cols`)
    /// per key column, in primary-key order (a key read without the `by_col` detour).
    pub key_plan: Option<Vec<(usize, usize)>>,
    /// How to read the key for a compact single read, when the key qualifies (see the
    /// `single` module).
    pub single_key: Option<crate::single::SingleKey>,
    /// When every non-key column of the record is a NOT NULL integer of 1, 2, 4 or 8
    /// bytes: (table column, offset in the row, bytes, unsigned) per non-key column, in
    /// record order — the values of a write without a mask, read without looking at
    /// column types.
    pub int_values: Option<Vec<(u32, u32, u8, bool)>>,
}

/// The `int_values` plan of `cols` (see `RecordDef::int_values`).
fn int_values_plan(cols: &[RecCol], pk: &[usize]) -> Option<Vec<(u32, u32, u8, bool)>> {
    let mut plan = Vec::with_capacity(cols.len());
    for rc in cols {
        if pk.contains(&rc.col) {
            continue;
        }
        let ColumnType::Int { bytes, unsigned } = rc.ty else {
            return None;
        };
        if rc.null.is_some() || !matches!(bytes, 1 | 2 | 4 | 8) {
            return None;
        }
        plan.push((
            u32::try_from(rc.col).ok()?,
            u32::try_from(rc.offset).ok()?,
            bytes,
            unsigned,
        ));
    }
    Some(plan)
}

/// The copy plan of `cols` in `layout` (see `RecordDef::copy_plan`).
fn copy_plan(layout: &RowLayout, cols: &[RecCol]) -> Option<Vec<(usize, usize, usize)>> {
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    for rc in cols {
        let cl = layout.cols.get(rc.col)?;
        if rc.null.is_some() || cl.null_bit.is_some() || !stored_is_ndb_format(&rc.ty) {
            return None;
        }
        let ColPlace::Fixed { offset, size } = cl.place else {
            return None;
        };
        let (src, len) = (offset as usize, size as usize);
        match plan.last_mut() {
            Some(last) if last.0 + last.2 == src && last.1 + last.2 == rc.offset => last.2 += len,
            _ => plan.push((src, rc.offset, len)),
        }
    }
    Some(plan)
}

pub(crate) struct RecordObj {
    pub def: Arc<RecordDef>,
    pub dict: Handle,
}

pub(crate) static RECORDS: Registry<RecordObj> = Registry::new(Kind::Record);

pub(crate) fn release_registries() {
    RECORDS.release_all_memory();
}

#[inline(always)]
fn record_obj<'a>(p: *const rndb_record) -> Result<&'a RecordObj> {
    let h = Handle::decode(p, &[Kind::Record]).map_err(|e| handle_error(Kind::Record, e))?;
    let o = RECORDS.get(h).map_err(|e| handle_error(Kind::Record, e))?;
    // SAFETY: live record object; records are immutable until released.
    Ok(unsafe { &*o })
}

/// Reads an integer column's value without going through `from_ndb` (the common case,
/// kept free of large `Result` moves).
#[inline(always)]
unsafe fn read_int(rc: &RecCol, row: *const u8) -> Option<IntRead> {
    let ColumnType::Int { bytes, unsigned } = rc.ty else {
        return None;
    };
    if let Some((byte, bit)) = rc.null {
        // SAFETY: the row holds the record's layout.
        if unsafe { *row.add(byte) } & (1 << bit) != 0 {
            return Some(IntRead::Null);
        }
    }
    // SAFETY: as above: `bytes` readable bytes at the offset.
    let raw = unsafe {
        let p = row.add(rc.offset);
        match bytes {
            4 => (p as *const u32).read_unaligned().to_le() as u64,
            8 => (p as *const u64).read_unaligned().to_le(),
            2 => (p as *const u16).read_unaligned().to_le() as u64,
            n => {
                let mut v = 0u64;
                for i in 0..n.min(8) as usize {
                    v |= (*p.add(i) as u64) << (8 * i);
                }
                v
            }
        }
    };
    Some(if unsigned {
        IntRead::UInt(raw)
    } else {
        let shift = 64 - 8 * bytes.min(8) as u32;
        IntRead::Int(((raw << shift) as i64) >> shift)
    })
}

/// An integer column's value as `read_int` reads it (small: returned in registers, and
/// turned into a `Value` where it is stored).
#[derive(Clone, Copy)]
enum IntRead {
    Null,
    UInt(u64),
    Int(i64),
}

impl RecordDef {
    /// Reads column `rc` of a row.
    unsafe fn read(&self, rc: &RecCol, row: *const u8) -> Result<Value> {
        if let Some((byte, bit)) = rc.null {
            // SAFETY: the row holds the record's layout.
            if unsafe { *row.add(byte) } & (1 << bit) != 0 {
                return Ok(Value::Null);
            }
        }
        let name = &self.table.def.columns[rc.col].name;
        // SAFETY: as above.
        unsafe { from_ndb(&rc.ty, name, row.add(rc.offset), 0) }
    }
}

thread_local! {
    static ENCODED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Writes a value into a row (NDB's format at the column's offset, its NULL bit).
pub(crate) unsafe fn write_col(rc: &RecCol, v: &Value, row: *mut u8) {
    // SAFETY (whole function): the row holds the record's layout, as NDB requires.
    unsafe {
        if let Some((byte, bit)) = rc.null {
            let b = row.add(byte);
            if v.is_null() {
                *b |= 1 << bit;
                return;
            }
            *b &= !(1 << bit);
        } else if v.is_null() {
            return;
        }
        let dst = row.add(rc.offset);
        match (rc.ty, v) {
            (ColumnType::Int { bytes, .. }, Value::UInt(x)) => write_le(dst, *x, bytes),
            (ColumnType::Int { bytes, .. }, Value::Int(x)) => write_le(dst, *x as u64, bytes),
            _ => ENCODED.with(|e| {
                let mut e = e.borrow_mut();
                e.clear();
                to_ndb(&rc.ty, v, &mut e);
                std::ptr::copy_nonoverlapping(e.as_ptr(), dst, e.len());
            }),
        }
    }
}

/// Writes the low `n` bytes of `x`, little-endian (no call to memcpy for 1..8 bytes).
#[inline]
pub(crate) unsafe fn write_le(dst: *mut u8, x: u64, n: u8) {
    // SAFETY: `dst` has room for `n` bytes (the column's size).
    unsafe {
        match n {
            4 => (dst as *mut u32).write_unaligned((x as u32).to_le()),
            8 => (dst as *mut u64).write_unaligned(x.to_le()),
            2 => (dst as *mut u16).write_unaligned((x as u16).to_le()),
            _ => {
                for i in 0..n.min(8) as usize {
                    *dst.add(i) = (x >> (8 * i)) as u8;
                }
            }
        }
    }
}

/// Where a record operation's result goes.
pub(crate) struct RecOut {
    pub def: Arc<RecordDef>,
    /// The caller's result row; NULL when the operation is not a record read.
    pub row: *mut u8,
    /// Index in `def.cols` of each column read, in `reads` order; empty = all, in order.
    pub cols: Vec<u32>,
}

// `row` is the caller's memory, written by the thread using the transaction.
unsafe impl Send for RecOut {}

impl RecOut {
    pub fn write(&self, values: &[Value]) {
        if self.row.is_null() {
            return;
        }
        if self.cols.is_empty() {
            for (v, rc) in values.iter().zip(&self.def.cols) {
                // The common case first: a NOT NULL integer column.
                if let (ColumnType::Int { bytes, .. }, None, Value::UInt(x)) = (rc.ty, rc.null, v) {
                    // SAFETY: NDB's contract: the result row outlives the execution and
                    // holds the record's layout.
                    unsafe { write_le(self.row.add(rc.offset), *x, bytes) };
                    continue;
                }
                // SAFETY: as above.
                unsafe { write_col(rc, v, self.row) };
            }
        } else {
            for (v, &ci) in values.iter().zip(&self.cols) {
                // SAFETY: as above.
                unsafe { write_col(&self.def.cols[ci as usize], v, self.row) };
            }
        }
    }
}

impl RecOut {
    /// Writes a row found by the batched read path straight from its stored form
    /// (`stored`): integers of 1, 2, 4 or 8 bytes, FLOAT and DOUBLE are stored in NDB's
    /// format and copied; other types are decoded and encoded.
    #[inline]
    pub fn write_stored(&self, layout: &RowLayout, stored: StoredRow<'_>) {
        write_stored_row(&self.def, self.row, &self.cols, layout, stored);
    }
}

/// Writes a row found by the batched read path into result row `row` of record `def`:
/// the record's columns `cols` (indexes in `def.cols`; empty = all). See
/// [`RecOut::write_stored`].
#[inline]
pub(crate) fn write_stored_row(
    def: &RecordDef,
    row: *mut u8,
    cols: &[u32],
    layout: &RowLayout,
    stored: StoredRow<'_>,
) {
    let fixed = stored.fixed;
    if row.is_null() {
        return;
    }
    if cols.is_empty() {
        if let Some(plan) = &def.copy_plan
            && std::ptr::eq(&def.table.def.layout, layout)
        {
            for &(src, dst, len) in plan {
                // SAFETY: as below; `src..src + len` is in the fixed part, as the plan
                // was made from this layout.
                unsafe { copy_bytes(fixed[src..src + len].as_ptr(), row.add(dst), len) };
            }
            return;
        }
        for rc in &def.cols {
            // SAFETY: NDB's contract: the result row outlives the execution and holds the
            // record's layout.
            unsafe { write_stored_col(rc, layout, stored, row) };
        }
    } else {
        for &ci in cols {
            // SAFETY: as above.
            unsafe { write_stored_col(&def.cols[ci as usize], layout, stored, row) };
        }
    }
}

/// Whether a column's stored bytes are its value in NDB's format.
#[inline(always)]
pub(crate) fn stored_is_ndb_format(ty: &ColumnType) -> bool {
    matches!(
        ty,
        ColumnType::Int {
            bytes: 1 | 2 | 4 | 8,
            ..
        } | ColumnType::Float
            | ColumnType::Double
    )
}

/// Copies `len` bytes; runs of up to 256 bytes by words, inline (a call to memcpy costs
/// more than the copy for the short runs of a copy plan).
#[inline(always)]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller gives `len` readable bytes at `src`, writable at `dst`, not
    // overlapping.
    unsafe {
        if len > 256 {
            std::ptr::copy_nonoverlapping(src, dst, len);
            return;
        }
        let mut i = 0;
        while i + 8 <= len {
            (dst.add(i) as *mut u64).write_unaligned((src.add(i) as *const u64).read_unaligned());
            i += 8;
        }
        if i + 4 <= len {
            (dst.add(i) as *mut u32).write_unaligned((src.add(i) as *const u32).read_unaligned());
            i += 4;
        }
        while i < len {
            *dst.add(i) = *src.add(i);
            i += 1;
        }
    }
}

/// Copies 1 to 8 bytes (no call to memcpy for the usual sizes).
#[inline(always)]
pub(crate) unsafe fn copy_small(src: &[u8], dst: *mut u8) {
    // SAFETY: `dst` has room for `src.len()` bytes (the column's size).
    unsafe {
        match src.len() {
            4 => (dst as *mut u32).write_unaligned((src.as_ptr() as *const u32).read_unaligned()),
            8 => (dst as *mut u64).write_unaligned((src.as_ptr() as *const u64).read_unaligned()),
            n => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n),
        }
    }
}

/// Writes one column of a stored row into a result row (value and NULL bit).
#[inline(always)]
unsafe fn write_stored_col(rc: &RecCol, layout: &RowLayout, stored: StoredRow<'_>, row: *mut u8) {
    // SAFETY (whole function): the row holds the record's layout, as NDB requires.
    unsafe {
        match layout.stored_bytes_of(rc.col, stored) {
            None => {
                if let Some((byte, bit)) = rc.null {
                    *row.add(byte) |= 1 << bit;
                }
            }
            Some(b) if stored_is_ndb_format(&rc.ty) => {
                if let Some((byte, bit)) = rc.null {
                    *row.add(byte) &= !(1 << bit);
                }
                copy_small(b, row.add(rc.offset));
            }
            Some(_) => write_col(rc, &layout.value(rc.col, stored), row),
        }
    }
}

fn selected(mask: *const c_uchar, col: usize) -> bool {
    // SAFETY: NDB's contract: the mask has a bit per attribute id of the table.
    mask.is_null() || unsafe { *mask.add(col >> 3) } & (1 << (col & 7)) != 0
}

/// Creates a record, NDB's `Dictionary::createRecord(table, specs, n, sizeof(spec))`:
/// the listed columns at the given offsets of a row. `spec_size` must be
/// `sizeof(rndb_record_spec)` (else error 4289). BLOB/TEXT columns are refused. NULL on
/// failure (error in `rndb_dict_get_error`). Freed by `rndb_dict_release_record` or with
/// the dictionary.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_dict_create_record(
    dict: *mut rndb_dictionary,
    table: *const rndb_table,
    specs: *const rndb_record_spec,
    n: u32,
    spec_size: u32,
) -> *const rndb_record {
    guard("rndb_dict_create_record", || {
        let (dh, d) = dict_mut(dict)?;
        let r = (|| {
            if spec_size as usize != std::mem::size_of::<rndb_record_spec>() {
                return Err(ndb_error(
                    4289,
                    "API version mismatch or wrong sizeof(NdbDictionary::RecordSpecification)",
                    format!(
                        "{spec_size} given, {} expected",
                        std::mem::size_of::<rndb_record_spec>()
                    ),
                ));
            }
            if specs.is_null() && n > 0 {
                return Err(codes::bad_argument("NULL record specification array"));
            }
            let (_, ndb) = ndb_by_handle(d.ndb)?;
            let rt = with_table_runtime(table, Some(ndb), |rt| Ok(rt.clone()))?;
            let def = &rt.def;
            let mut cols = Vec::with_capacity(n as usize);
            let mut by_col = vec![None; def.columns.len()];
            for i in 0..n as usize {
                // SAFETY: `n` specifications from the caller.
                let s = unsafe { *specs.add(i) };
                let (_, c) = crate::dict::column_mut(s.column)?;
                let name = c.def.name.clone();
                let col = def.column_index(&name).ok_or_else(|| {
                    codes::no_such_column(&format!("'{name}' in table '{}'", def.name))
                })?;
                let column = &def.columns[col];
                if column.ty.is_blob() {
                    return Err(codes::unsupported(format!(
                        "BLOB/TEXT column '{name}' in an NdbRecord (use getValue/setValue)"
                    )));
                }
                if by_col[col].is_some() {
                    return Err(ndb_error(
                        4291,
                        "Duplicate column specification in NdbDictionary::RecordSpecification",
                        format!("column '{name}'"),
                    ));
                }
                if fixed_size(&column.ty).is_none() && var_size(&column.ty).is_none() {
                    return Err(codes::unsupported(format!(
                        "column '{name}' in an NdbRecord"
                    )));
                }
                by_col[col] = Some(cols.len());
                cols.push(RecCol {
                    col,
                    ty: column.ty,
                    offset: s.offset as usize,
                    null: column.nullable.then_some((
                        s.nullbit_byte_offset as usize,
                        (s.nullbit_bit_in_byte & 7) as u8,
                    )),
                });
            }
            let key_plan = def
                .primary_key
                .iter()
                .map(|&p| by_col[p].map(|ci| (p, ci)))
                .collect::<Option<Vec<_>>>();
            let single_key = key_plan
                .as_deref()
                .and_then(|k| crate::single::SingleKey::of(k, &cols));
            let int_values = int_values_plan(&cols, &def.primary_key);
            let obj = RecordObj {
                def: Arc::new(RecordDef {
                    key_plan,
                    single_key,
                    int_values,
                    copy_plan: copy_plan(&rt.def.layout, &cols),
                    table: rt.clone(),
                    all_cols: cols.iter().map(|c: &RecCol| c.col).collect(),
                    cols,
                    by_col,
                }),
                dict: dh,
            };
            let h = RECORDS
                .insert(obj)
                .map_err(|_| codes::bad_argument("too many records"))?;
            d.records.push(h);
            Ok(h.ptr::<rndb_record>() as *const rndb_record)
        })();
        r.inspect_err(|e| d.error.set(e))
    })
}

/// Frees a record (NDB's releaseRecord). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_dict_release_record(
    dict: *mut rndb_dictionary,
    record: *const rndb_record,
) -> c_int {
    guard("rndb_dict_release_record", || {
        let (dh, d) = dict_mut(dict)?;
        let h =
            Handle::decode(record, &[Kind::Record]).map_err(|e| handle_error(Kind::Record, e))?;
        let o = RECORDS.get(h).map_err(|e| handle_error(Kind::Record, e))?;
        // SAFETY: live record object.
        if unsafe { &*o }.dict != dh {
            return Err(codes::bad_argument(
                "the record was created by another dictionary",
            ));
        }
        RECORDS
            .remove(h)
            .map_err(|e| handle_error(Kind::Record, e))?;
        d.records.retain(|r| *r != h);
        Ok(0)
    })
}

/// Frees the records of a dictionary.
pub(crate) fn free_records(list: Vec<Handle>) {
    for h in list {
        let _ = RECORDS.remove(h);
    }
}

/// Pushes `(col, v)`, writing the two fields straight into the vector's memory (a
/// `push` of the pair goes through a stack copy that stalls on store forwarding).
#[inline(always)]
fn push_pair(list: &mut Vec<(usize, Value)>, col: usize, v: IntRead) {
    list.reserve(1);
    let len = list.len();
    // SAFETY: capacity > len after the reserve; both fields are written before the
    // length covers the slot.
    unsafe {
        let slot = list.as_mut_ptr().add(len);
        std::ptr::addr_of_mut!((*slot).0).write(col);
        let value = std::ptr::addr_of_mut!((*slot).1);
        match v {
            IntRead::Null => value.write(Value::Null),
            IntRead::UInt(x) => value.write(Value::UInt(x)),
            IntRead::Int(x) => value.write(Value::Int(x)),
        }
        list.set_len(len + 1);
    }
}

/// The primary key of a row laid out by `rec`, into `key`.
#[inline(always)]
unsafe fn key_into(
    rec: &RecordDef,
    row: *const c_char,
    key: &mut Vec<(usize, Value)>,
) -> Result<bool> {
    if row.is_null() {
        return Err(codes::bad_argument("NULL key row"));
    }
    key.clear();
    let mut plain = true;
    if let Some(plan) = &rec.key_plan {
        for &(p, ci) in plan {
            // SAFETY: the row holds the record's layout.
            plain &= unsafe { push_key_col(rec, ci, p, row, key) }?;
        }
        return Ok(plain);
    }
    let def = &rec.table.def;
    for &p in &def.primary_key {
        let ci = rec.by_col[p].ok_or_else(|| {
            ndb_error(
                4292,
                "NdbRecord for tuple access is not an index key NdbRecord",
                format!("the key record has no column '{}'", def.columns[p].name),
            )
        })?;
        // SAFETY: as above.
        plain &= unsafe { push_key_col(rec, ci, p, row, key) }?;
    }
    Ok(plain)
}

/// Appends key column `p` (record column `ci`) of a row; true when its value is an
/// integer or NULL (owns no heap memory).
#[inline(always)]
unsafe fn push_key_col(
    rec: &RecordDef,
    ci: usize,
    p: usize,
    row: *const c_char,
    key: &mut Vec<(usize, Value)>,
) -> Result<bool> {
    let rc = &rec.cols[ci];
    // SAFETY: the row holds the record's layout.
    match unsafe { read_int(rc, row.cast()) } {
        Some(v) => {
            push_pair(key, p, v);
            Ok(true)
        }
        None => {
            // SAFETY: as above.
            key.push((p, unsafe { rec.read(rc, row.cast()) }?));
            Ok(false)
        }
    }
}

#[inline(always)]
fn same_table(a: &RecordDef, b: &RecordDef) -> Result<()> {
    if !Arc::ptr_eq(&a.table, &b.table) && a.table.def.id != b.table.def.id {
        return Err(ndb_error(
            4287,
            "The key_record and attribute_record in primary key operation do not belong to the same table",
            format!("'{}' and '{}'", a.table.def.name, b.table.def.name),
        ));
    }
    Ok(())
}

/// Adds a record operation to a transaction: key from `key_rec`'s row, values from
/// `attr` (record, row, mask), result into `out` (record, row, mask).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn add_record_op(
    th: Handle,
    tx: &mut TxObj,
    kind: OpKind,
    key_rec: &RecordObj,
    key_row: *const c_char,
    attr: Option<(&RecordObj, *const c_char, *const c_uchar)>,
    out: Option<(&RecordObj, *mut u8, *const c_uchar)>,
) -> Result<*const rndb_operation> {
    tx.check_open()?;
    let i = tx.add_op()?;
    let o = &mut tx.ops[i];
    let table = &key_rec.def.table;
    if !o.table.as_ref().is_some_and(|t| Arc::ptr_eq(t, table)) {
        o.table = Some(table.clone());
    }
    o.ty = OpType::Key(kind);
    // SAFETY: rows per NDB's contract (callers checked them against their records).
    o.key_plain = unsafe { key_into(&key_rec.def, key_row, &mut o.key) }?;
    if let Some((rec, row, mask)) = attr {
        // SAFETY: as above.
        unsafe { values_into(&rec.def, row, mask, &mut o.values) }?;
    }
    match out {
        Some((rec, row, mask)) => {
            let def = &rec.def;
            let keep = o.rec_out.as_ref().is_some_and(|r| Arc::ptr_eq(&r.def, def));
            if !keep {
                o.rec_out = Some(RecOut {
                    def: def.clone(),
                    row: std::ptr::null_mut(),
                    cols: Vec::new(),
                });
            }
            let Some(ro) = o.rec_out.as_mut() else {
                return Err(codes::internal("record output"));
            };
            ro.row = row;
            ro.cols.clear();
            if mask.is_null() {
                // The record's columns, without copying them (see OpObj::read_cols).
                o.whole_record = true;
            } else {
                for (ci, rc) in def.cols.iter().enumerate() {
                    if selected(mask, rc.col) {
                        o.reads.push(rc.col);
                        ro.cols.push(ci as u32);
                    }
                }
            }
        }
        None => {
            if let Some(ro) = o.rec_out.as_mut() {
                ro.row = std::ptr::null_mut();
            }
        }
    }
    Ok(th.with(Kind::Operation, i as u32).ptr::<rndb_operation>() as *const rndb_operation)
}

fn record_op<F>(name: &str, tx: *mut rndb_transaction, f: F) -> *const rndb_operation
where
    F: FnOnce(Handle, &mut TxObj) -> Result<*const rndb_operation>,
{
    guard(name, || {
        let (th, t) = tx_ref(tx)?;
        match f(th, t) {
            Ok(p) => Ok(p),
            Err(e) => Err(t.fail(None, e)),
        }
    })
}

/// A primary-key read defined by records, NDB's `NdbTransaction::readTuple(key_rec,
/// key_row, result_rec, result_row, lock_mode, result_mask)`: the key is taken from
/// `key_row` now; after execute, the columns of `result_rec` selected by `result_mask`
/// (a bit per attribute id; NULL = all) are written into `result_row` (values at their
/// offsets, NULL bits set or cleared). NULL on failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_transaction_read_tuple(
    tx: *mut rndb_transaction,
    key_rec: *const rndb_record,
    key_row: *const c_char,
    result_rec: *const rndb_record,
    result_row: *mut c_char,
    lock_mode_value: c_int,
    result_mask: *const c_uchar,
) -> *const rndb_operation {
    // The compact single read (see the `single` module): the first operation of a fresh
    // transaction, one record for key and result, every column, an integer key.
    if std::ptr::eq(key_rec, result_rec)
        && result_mask.is_null()
        && !key_row.is_null()
        && !result_row.is_null()
        && let Ok(lm) = lock_mode(lock_mode_value)
    {
        let p = guard("rndb_transaction_read_tuple", || {
            let (th, t) = tx_ref_raw(tx)?;
            if t.fresh()
                && let Ok(kr) = record_obj(key_rec)
                && let Some(plan) = &kr.def.single_key
            {
                // SAFETY: the key row holds the record's layout (NDB's contract).
                unsafe { t.define_single(&kr.def, plan, key_row.cast(), result_row.cast(), lm) };
                return Ok(
                    th.with(Kind::Operation, 0).ptr::<rndb_operation>() as *const rndb_operation
                );
            }
            Ok(std::ptr::null())
        });
        if !p.is_null() {
            return p;
        }
    }
    record_op("rndb_transaction_read_tuple", tx, |th, t| {
        let kr = record_obj(key_rec)?;
        // One record for key and result (the usual case): checked once.
        let rr = if std::ptr::eq(key_rec, result_rec) {
            kr
        } else {
            let rr = record_obj(result_rec)?;
            same_table(&kr.def, &rr.def)?;
            rr
        };
        let lm: LockMode = lock_mode(lock_mode_value)?;
        if result_row.is_null() {
            return Err(codes::bad_argument("NULL result row"));
        }
        // SAFETY: rows per NDB's contract.
        unsafe {
            add_record_op(
                th,
                t,
                OpKind::Read(lm),
                kr,
                key_row,
                None,
                Some((rr, result_row.cast(), result_mask)),
            )
        }
    })
}

/// The values of the columns of `rec` selected by `mask`, except the key's, into
/// `values`.
unsafe fn values_into(
    rec: &RecordDef,
    row: *const c_char,
    mask: *const c_uchar,
    values: &mut Vec<(usize, Value)>,
) -> Result<()> {
    if row.is_null() {
        return Err(codes::bad_argument("NULL attribute row"));
    }
    values.clear();
    if mask.is_null()
        && let Some(plan) = &rec.int_values
    {
        values.reserve(plan.len());
        for &(col, offset, bytes, unsigned) in plan {
            // SAFETY: the row holds the record's layout: `bytes` readable bytes at the
            // offset.
            let raw = unsafe {
                let p = row.cast::<u8>().add(offset as usize);
                match bytes {
                    4 => (p as *const u32).read_unaligned().to_le() as u64,
                    8 => (p as *const u64).read_unaligned().to_le(),
                    2 => (p as *const u16).read_unaligned().to_le() as u64,
                    _ => *p as u64,
                }
            };
            let v = if unsigned {
                IntRead::UInt(raw)
            } else {
                let shift = 64 - 8 * bytes as u32;
                IntRead::Int(((raw << shift) as i64) >> shift)
            };
            push_pair(values, col as usize, v);
        }
        return Ok(());
    }
    let pk = &rec.table.def.primary_key;
    values.reserve(rec.cols.len());
    for rc in &rec.cols {
        if pk.contains(&rc.col) || !selected(mask, rc.col) {
            continue;
        }
        // SAFETY: the row holds the record's layout.
        match unsafe { read_int(rc, row.cast()) } {
            Some(v) => push_pair(values, rc.col, v),
            // SAFETY: as above.
            None => values.push((rc.col, unsafe { rec.read(rc, row.cast()) }?)),
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
unsafe fn write_op(
    name: &str,
    tx: *mut rndb_transaction,
    kind: OpKind,
    key_rec: *const rndb_record,
    key_row: *const c_char,
    attr_rec: *const rndb_record,
    attr_row: *const c_char,
    mask: *const c_uchar,
) -> *const rndb_operation {
    record_op(name, tx, |th, t| {
        let ar = record_obj(attr_rec)?;
        let (kr, krow) = if key_rec.is_null() {
            (ar, attr_row)
        } else {
            (record_obj(key_rec)?, key_row)
        };
        same_table(&kr.def, &ar.def)?;
        // SAFETY: rows per NDB's contract.
        unsafe { add_record_op(th, t, kind, kr, krow, Some((ar, attr_row, mask)), None) }
    })
}

/// An insert defined by records, NDB's `insertTuple(key_rec, key_row, attr_rec,
/// attr_row, mask)`; `key_rec` NULL takes the key from `attr_row` (NDB's
/// `insertTuple(attr_rec, attr_row, mask)`). Values are copied now. NULL on failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_transaction_insert_tuple(
    tx: *mut rndb_transaction,
    key_rec: *const rndb_record,
    key_row: *const c_char,
    attr_rec: *const rndb_record,
    attr_row: *const c_char,
    mask: *const c_uchar,
) -> *const rndb_operation {
    // SAFETY: rows per NDB's contract.
    unsafe {
        write_op(
            "rndb_transaction_insert_tuple",
            tx,
            OpKind::Insert,
            key_rec,
            key_row,
            attr_rec,
            attr_row,
            mask,
        )
    }
}

/// An update defined by records, NDB's `updateTuple(key_rec, key_row, attr_rec,
/// attr_row, mask)`: the non-key columns of `attr_rec` selected by `mask`. NULL on
/// failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_transaction_update_tuple(
    tx: *mut rndb_transaction,
    key_rec: *const rndb_record,
    key_row: *const c_char,
    attr_rec: *const rndb_record,
    attr_row: *const c_char,
    mask: *const c_uchar,
) -> *const rndb_operation {
    // SAFETY: rows per NDB's contract.
    unsafe {
        write_op(
            "rndb_transaction_update_tuple",
            tx,
            OpKind::Update,
            key_rec,
            key_row,
            attr_rec,
            attr_row,
            mask,
        )
    }
}

/// A write (insert or update) defined by records, NDB's `writeTuple(key_rec, key_row,
/// attr_rec, attr_row, mask)`. NULL on failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_transaction_write_tuple(
    tx: *mut rndb_transaction,
    key_rec: *const rndb_record,
    key_row: *const c_char,
    attr_rec: *const rndb_record,
    attr_row: *const c_char,
    mask: *const c_uchar,
) -> *const rndb_operation {
    // SAFETY: rows per NDB's contract.
    unsafe {
        write_op(
            "rndb_transaction_write_tuple",
            tx,
            OpKind::Write,
            key_rec,
            key_row,
            attr_rec,
            attr_row,
            mask,
        )
    }
}

/// A delete defined by a key record, NDB's `deleteTuple(key_rec, key_row)`. NULL on
/// failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_transaction_delete_tuple(
    tx: *mut rndb_transaction,
    key_rec: *const rndb_record,
    key_row: *const c_char,
) -> *const rndb_operation {
    record_op("rndb_transaction_delete_tuple", tx, |th, t| {
        let kr = record_obj(key_rec)?;
        // SAFETY: the row holds the key record's layout.
        unsafe { add_record_op(th, t, OpKind::Delete, kr, key_row, None, None) }
    })
}
