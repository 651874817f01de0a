//! Values read by operations and scans (NdbRecAttr). A rec attr belongs to its
//! transaction: after the transaction is closed its handle is stale (the accessors
//! then return 0 / -1 / NULL and set the thread's last error).
//!
//! The integer accessors read the value's bytes little-endian, zero-extended (`u_*`) or
//! sign-extended (`int*`) from the column's size, so `u_32_value` of a SMALLINT UNSIGNED
//! gives its value.

use crate::error::guard;
use crate::error::handle_error;
use crate::handle::{Handle, HandleError, Kind};
use crate::ndb::tx_by_handle;
use crate::rndb_rec_attr;
use crate::txn::RecAttrObj;
use rndb_core::error::Result;
use std::ffi::{c_char, c_int};

fn ra_ref<'a>(p: *const rndb_rec_attr) -> Result<&'a RecAttrObj> {
    let h = Handle::decode(p, &[Kind::RecAttr]).map_err(|e| handle_error(Kind::RecAttr, e))?;
    let tx = tx_by_handle(h)?;
    tx.ras[..tx.n_ras]
        .get(h.sub as usize)
        .ok_or_else(|| handle_error(Kind::RecAttr, HandleError::Stale))
}

fn raw(r: &RecAttrObj) -> u64 {
    let mut b = [0u8; 8];
    let n = r.data.len().min(8);
    b[..n].copy_from_slice(&r.data[..n]);
    u64::from_le_bytes(b)
}

fn signed(r: &RecAttrObj) -> i64 {
    let n = r.data.len().clamp(1, 8) as u32;
    let shift = 64 - 8 * n;
    ((raw(r) << shift) as i64) >> shift
}

/// NDB's isNULL: 1 the value is NULL, 0 it is not, -1 no value yet (not executed, or
/// the operation failed) or a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_is_null(ra: *const rndb_rec_attr) -> c_int {
    guard("rndb_rec_attr_is_null", || Ok(ra_ref(ra)?.null as c_int))
}

/// The value as a 32-bit unsigned integer (NDB's u_32_value); 0 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_u32(ra: *const rndb_rec_attr) -> u32 {
    guard("rndb_rec_attr_u32", || Ok(raw(ra_ref(ra)?) as u32))
}

/// The value as a 32-bit signed integer (NDB's int32_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_int32(ra: *const rndb_rec_attr) -> i32 {
    guard("rndb_rec_attr_int32", || Ok(signed(ra_ref(ra)?) as i32))
}

/// The value as a 64-bit unsigned integer (NDB's u_64_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_u64(ra: *const rndb_rec_attr) -> u64 {
    guard("rndb_rec_attr_u64", || Ok(raw(ra_ref(ra)?)))
}

/// The value as a 64-bit signed integer (NDB's int64_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_int64(ra: *const rndb_rec_attr) -> i64 {
    guard("rndb_rec_attr_int64", || Ok(signed(ra_ref(ra)?)))
}

/// The value as a 16-bit unsigned integer (NDB's u_short_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_u16(ra: *const rndb_rec_attr) -> u16 {
    guard("rndb_rec_attr_u16", || Ok(raw(ra_ref(ra)?) as u16))
}

/// The value as a 16-bit signed integer (NDB's short_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_int16(ra: *const rndb_rec_attr) -> i16 {
    guard("rndb_rec_attr_int16", || Ok(signed(ra_ref(ra)?) as i16))
}

/// The value as an 8-bit unsigned integer (NDB's u_8_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_u8(ra: *const rndb_rec_attr) -> u8 {
    guard("rndb_rec_attr_u8", || Ok(raw(ra_ref(ra)?) as u8))
}

/// The value as an 8-bit signed integer (NDB's int8_value / char_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_int8(ra: *const rndb_rec_attr) -> i8 {
    guard("rndb_rec_attr_int8", || Ok(signed(ra_ref(ra)?) as i8))
}

/// The value of a FLOAT column (NDB's float_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_float(ra: *const rndb_rec_attr) -> f32 {
    guard("rndb_rec_attr_float", || {
        Ok(f32::from_bits(raw(ra_ref(ra)?) as u32))
    })
}

/// The value of a DOUBLE column (NDB's double_value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_double(ra: *const rndb_rec_attr) -> f64 {
    guard("rndb_rec_attr_double", || {
        Ok(f64::from_bits(raw(ra_ref(ra)?)))
    })
}

static EMPTY: [u8; 8] = [0; 8];

/// The value's bytes in NDB's format (NDB's aRef): VARCHAR with its length prefix,
/// CHAR padded with spaces... Points to the buffer given to getValue when there was
/// one; valid until the next execute/nextResult or the transaction's close. NULL on a
/// bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_aref(ra: *const rndb_rec_attr) -> *const c_char {
    guard("rndb_rec_attr_aref", || {
        let r = ra_ref(ra)?;
        if r.user_buf.is_null() && r.data.is_empty() {
            return Ok(EMPTY.as_ptr().cast());
        }
        Ok(r.aref().cast())
    })
}

/// Bytes of the value in NDB's format (NDB's get_size_in_bytes): the column's size,
/// VARCHAR's prefix plus its data; 0 for NULL, no value yet, or a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_get_size_in_bytes(ra: *const rndb_rec_attr) -> u32 {
    guard("rndb_rec_attr_get_size_in_bytes", || {
        Ok(ra_ref(ra)?.data.len() as u32)
    })
}

/// The attribute id (column position) the rec attr reads; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_rec_attr_get_attr_id(ra: *const rndb_rec_attr) -> c_int {
    guard("rndb_rec_attr_get_attr_id", || Ok(ra_ref(ra)?.col as c_int))
}
