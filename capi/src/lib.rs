//! librndb: the C ABI of rndb, shaped after MySQL Cluster's NDB API.
//!
//! `include/rndb.h` is generated from this crate by cbindgen (a test regenerates it and
//! fails when the committed header differs; `UPDATE_HEADER=1 cargo test -p rndb-capi`
//! rewrites it). `include/NdbApi.hpp` is the header-only C++ layer with NDB API's class
//! names, signatures and enum values over these functions.
//!
//! Conventions of every function:
//! - objects are opaque handles (`rndb_ndb*`, `rndb_transaction*`...) created and freed
//!   in pairs (`rndb_X_create`/`rndb_X_free`; transactions by `rndb_ndb_start_transaction`
//!   /`rndb_ndb_close_transaction`); a handle is a checked number, not an address, so a
//!   NULL, freed or closed handle, or one of the wrong type, is reported as an error and
//!   never dereferenced;
//! - functions returning `int` give 0 (or a count) on success and -1 on failure,
//!   functions returning a pointer give NULL on failure; the error is then in the object
//!   (`rndb_X_get_error`, as NDB's getNdbError) and in `rndb_last_error()`;
//! - no panic crosses into C: one is reported as error 4000 (internal error);
//! - strings are UTF-8 and NUL-terminated; strings returned stay valid as long as the
//!   object that returned them;
//! - an `rndb_ndb` and everything obtained from it (dictionary, tables, transactions,
//!   operations, scans, rec attrs) is used by one thread at a time, as NDB requires of an
//!   Ndb object; a cluster connection can be shared between threads.
#![allow(non_camel_case_types, clippy::missing_safety_doc)]

#[cfg(not(target_pointer_width = "64"))]
compile_error!("librndb's handles need 64-bit pointers");

mod batch;
#[cfg(feature = "bench-reference")]
mod bench_ref;
mod conn;
mod dict;
mod error;
mod handle;
mod ndb;
mod operation;
mod recattr;
mod record;
mod remote;
mod remote_batch;
mod remote_exec;
mod scan;
mod single;
mod sql;
mod transaction;
mod txn;
mod types;

#[cfg(feature = "bench-reference")]
pub use bench_ref::*;
pub use conn::*;
pub use dict::*;
pub use error::{rndb_error, rndb_error_classification, rndb_error_status};
pub use ndb::*;
pub use operation::*;
pub use recattr::*;
pub use record::*;
pub use scan::*;
pub use sql::*;
pub use transaction::*;
pub use types::rndb_column_type;

use rndb_core::error::{Result, codes};
use std::ffi::{CStr, c_char, c_int, c_void};

/// A connection to a cluster, NDB's `Ndb_cluster_connection`.
pub struct rndb_cluster_connection {
    _private: [u8; 0],
}

/// A database handle, NDB's `Ndb`: transactions, the dictionary, asynchronous polling.
pub struct rndb_ndb {
    _private: [u8; 0],
}

/// The dictionary of an `rndb_ndb`, NDB's `NdbDictionary::Dictionary`.
pub struct rndb_dictionary {
    _private: [u8; 0],
}

/// A table definition (`NdbDictionary::Table`): made by `rndb_table_create`, or owned by
/// the dictionary when returned by `rndb_dict_get_table`.
pub struct rndb_table {
    _private: [u8; 0],
}

/// A column definition (`NdbDictionary::Column`).
pub struct rndb_column {
    _private: [u8; 0],
}

/// An index definition (`NdbDictionary::Index`).
pub struct rndb_index {
    _private: [u8; 0],
}

/// A transaction, NDB's `NdbTransaction`.
pub struct rndb_transaction {
    _private: [u8; 0],
}

/// A primary-key operation of a transaction, NDB's `NdbOperation`.
pub struct rndb_operation {
    _private: [u8; 0],
}

/// A scan of a transaction, NDB's `NdbScanOperation` / `NdbIndexScanOperation`.
pub struct rndb_scan {
    _private: [u8; 0],
}

/// A row layout for one-call operations, NDB's `NdbRecord`.
pub struct rndb_record {
    _private: [u8; 0],
}

/// A value read by an operation or scan, NDB's `NdbRecAttr`.
pub struct rndb_rec_attr {
    _private: [u8; 0],
}

/// Completion callback of `rndb_transaction_execute_asynch_prepare`, NDB's
/// `NdbAsynchCallback`: `result` is 0 on success and -1 when the transaction failed
/// (its error is in `rndb_transaction_get_error(tx)`). It runs inside
/// `rndb_ndb_send_poll` / `rndb_ndb_poll`, on the polling thread; it may close the
/// transaction. It must not unwind (a C++ exception thrown through it aborts).
pub type rndb_asynch_callback =
    Option<unsafe extern "C" fn(result: c_int, tx: *mut rndb_transaction, arg: *mut c_void)>;

/// A C string argument as `&str`; NULL and invalid UTF-8 are errors naming `what`.
pub(crate) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(codes::bad_argument(format!("NULL {what}")));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| codes::bad_argument(format!("{what} is not valid UTF-8")))
}

/// Initialises the library, NDB's `ndb_init()`. Returns 0. Optional: every function
/// works without it.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_init() -> c_int {
    0
}

/// Ends the library, NDB's `ndb_end(int)`: when every object has been freed, releases
/// the memory the handle tables use. Handles must not be used afterwards.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_end(_flags: c_int) {
    error::guard("rndb_end", || {
        record::release_registries();
        transaction::release_registries();
        dict::release_registries();
        ndb::release_registries();
        conn::release_registries();
        Ok(())
    })
}

/// The calling thread's last error: set by every call that fails (including those
/// whose handle was NULL or stale). Never NULL; valid until the thread's next failure.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_last_error() -> *const rndb_error {
    error::last_ptr()
}

/// Frees a string returned by librndb (e.g. the output of `rndb_execute_sql`). NULL is
/// ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: strings handed out by librndb come from CString::into_raw.
        drop(unsafe { std::ffi::CString::from_raw(s) });
    }
}

/// The library's version, e.g. "0.1.0".
#[unsafe(no_mangle)]
pub extern "C" fn rndb_version() -> *const c_char {
    static V: &CStr = c"0.1.0";
    V.as_ptr()
}
