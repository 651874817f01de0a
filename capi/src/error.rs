//! Errors as C sees them (`rndb_error`, NDB's `NdbError` layout), where they are kept,
//! and the guard that every entry point runs its body in.

use crate::handle::{HandleError, Kind};
use rndb_core::error::{ErrorClassification, ErrorStatus, NdbError, codes};
use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// NdbError::Status: whether an error is temporary (retry the transaction), permanent,
/// or leaves the outcome unknown. NDB's values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_error_status {
    RNDB_STATUS_SUCCESS = 0,
    RNDB_STATUS_TEMPORARY_ERROR = 1,
    RNDB_STATUS_PERMANENT_ERROR = 2,
    RNDB_STATUS_UNKNOWN_RESULT = 3,
}

/// NdbError::Classification, NDB's values (as in NdbError.hpp).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_error_classification {
    RNDB_CL_NO_ERROR = 0,
    RNDB_CL_APPLICATION_ERROR = 1,
    RNDB_CL_NO_DATA_FOUND = 2,
    RNDB_CL_CONSTRAINT_VIOLATION = 3,
    RNDB_CL_SCHEMA_ERROR = 4,
    RNDB_CL_USER_DEFINED_ERROR = 5,
    RNDB_CL_INSUFFICIENT_SPACE = 6,
    RNDB_CL_TEMPORARY_RESOURCE_ERROR = 7,
    RNDB_CL_NODE_RECOVERY_ERROR = 8,
    RNDB_CL_OVERLOAD_ERROR = 9,
    RNDB_CL_TIMEOUT_EXPIRED = 10,
    RNDB_CL_UNKNOWN_RESULT_ERROR = 11,
    RNDB_CL_INTERNAL_ERROR = 12,
    RNDB_CL_FUNCTION_NOT_IMPLEMENTED = 13,
    RNDB_CL_UNKNOWN_ERROR_CODE = 14,
    RNDB_CL_NODE_SHUTDOWN = 15,
    RNDB_CL_SCHEMA_OBJECT_EXISTS = 17,
    RNDB_CL_INTERNAL_TEMPORARY = 18,
}

/// An error, laid out as NDB's `struct NdbError` (status, classification, code,
/// mysql_code, message, details) so that C++ can view it as one.
///
/// `code` is NDB's error number (626 tuple not found, 630 duplicate key, 266 lock wait
/// timeout, 4xxx API errors...), 0 when there is no error. `message` is never NULL; it
/// names the problem (the column, table, handle or value concerned) and stays valid
/// until the object that holds the error records another one or is freed (for
/// `rndb_last_error`: until the next failing call on the same thread).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rndb_error {
    /// Temporary, permanent, unknown result (a function of the classification).
    pub status: rndb_error_status,
    /// NDB's classification of the error.
    pub classification: rndb_error_classification,
    /// NDB error code; 0 = no error.
    pub code: c_int,
    /// The MySQL server error the SQL layer would report (1062 duplicate key...), or 0.
    pub mysql_code: c_int,
    /// What went wrong, NUL-terminated, never NULL.
    pub message: *const c_char,
    /// Always NULL (NDB's deprecated `details`).
    pub details: *const c_char,
}

fn status_of(s: ErrorStatus) -> rndb_error_status {
    match s {
        ErrorStatus::Success => rndb_error_status::RNDB_STATUS_SUCCESS,
        ErrorStatus::TemporaryError => rndb_error_status::RNDB_STATUS_TEMPORARY_ERROR,
        ErrorStatus::PermanentError => rndb_error_status::RNDB_STATUS_PERMANENT_ERROR,
        ErrorStatus::UnknownResult => rndb_error_status::RNDB_STATUS_UNKNOWN_RESULT,
    }
}

fn classification_of(c: ErrorClassification) -> rndb_error_classification {
    use ErrorClassification as E;
    use rndb_error_classification as C;
    match c {
        E::NoError => C::RNDB_CL_NO_ERROR,
        E::ApplicationError => C::RNDB_CL_APPLICATION_ERROR,
        E::NoDataFound => C::RNDB_CL_NO_DATA_FOUND,
        E::ConstraintViolation => C::RNDB_CL_CONSTRAINT_VIOLATION,
        E::SchemaError => C::RNDB_CL_SCHEMA_ERROR,
        E::UserDefinedError => C::RNDB_CL_USER_DEFINED_ERROR,
        E::InsufficientSpace => C::RNDB_CL_INSUFFICIENT_SPACE,
        E::TemporaryResourceError => C::RNDB_CL_TEMPORARY_RESOURCE_ERROR,
        E::NodeRecoveryError => C::RNDB_CL_NODE_RECOVERY_ERROR,
        E::OverloadError => C::RNDB_CL_OVERLOAD_ERROR,
        E::TimeoutExpired => C::RNDB_CL_TIMEOUT_EXPIRED,
        E::UnknownResultError => C::RNDB_CL_UNKNOWN_RESULT_ERROR,
        E::InternalError => C::RNDB_CL_INTERNAL_ERROR,
        E::FunctionNotImplemented => C::RNDB_CL_FUNCTION_NOT_IMPLEMENTED,
        E::UnknownErrorCode => C::RNDB_CL_UNKNOWN_ERROR_CODE,
        E::NodeShutdown => C::RNDB_CL_NODE_SHUTDOWN,
        E::SchemaObjectExists => C::RNDB_CL_SCHEMA_OBJECT_EXISTS,
        E::InternalTemporary => C::RNDB_CL_INTERNAL_TEMPORARY,
    }
}

/// An object's error: the C view plus the message it points to.
pub struct ErrorStore {
    c: rndb_error,
    msg: CString,
    pub last: Option<NdbError>,
}

// The raw pointer in `c` points into `msg`, owned by the store.
unsafe impl Send for ErrorStore {}

impl Default for ErrorStore {
    fn default() -> Self {
        ErrorStore::new()
    }
}

impl ErrorStore {
    pub fn new() -> ErrorStore {
        let msg = CString::default();
        ErrorStore {
            c: rndb_error {
                status: rndb_error_status::RNDB_STATUS_SUCCESS,
                classification: rndb_error_classification::RNDB_CL_NO_ERROR,
                code: 0,
                mysql_code: 0,
                message: msg.as_ptr(),
                details: std::ptr::null(),
            },
            msg,
            last: None,
        }
    }

    pub fn set(&mut self, e: &NdbError) {
        self.msg = c_string(&e.message);
        self.c = rndb_error {
            status: status_of(e.status),
            classification: classification_of(e.classification),
            code: e.code as c_int,
            mysql_code: e.mysql_code as c_int,
            message: self.msg.as_ptr(),
            details: std::ptr::null(),
        };
        self.last = Some(e.clone());
    }

    #[inline(always)]
    pub fn clear(&mut self) {
        if self.last.is_some() {
            self.reset();
        }
    }

    #[cold]
    #[inline(never)]
    fn reset(&mut self) {
        *self = ErrorStore::new();
    }

    #[inline(always)]
    pub fn code(&self) -> u32 {
        self.c.code as u32
    }

    pub fn ptr(&self) -> *const rndb_error {
        &self.c
    }
}

/// A C string of `s` (interior NULs become spaces).
pub fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

thread_local! {
    static LAST: RefCell<ErrorStore> = RefCell::new(ErrorStore::new());
}

/// Records the calling thread's last error.
pub fn set_last(e: &NdbError) {
    LAST.with(|l| l.borrow_mut().set(e));
}

/// The calling thread's last error (valid until its next failing call).
pub fn last_ptr() -> *const rndb_error {
    LAST.with(|l| l.borrow().ptr())
}

/// The error for a refused handle.
#[cold]
#[inline(never)]
pub fn handle_error(kind: Kind, e: HandleError) -> NdbError {
    match e {
        HandleError::Null => codes::bad_argument(format!("NULL {} handle", kind.c_name())),
        HandleError::WrongKind { expected, found } => codes::bad_argument(match found {
            Some(f) => format!(
                "an {} handle was passed where an {} handle is expected",
                f.c_name(),
                expected.c_name()
            ),
            None => format!("not an {} handle", expected.c_name()),
        }),
        HandleError::Stale => match kind {
            Kind::Transaction | Kind::Operation | Kind::Scan | Kind::RecAttr => {
                codes::transaction_closed().detail(format!(
                    "the {} handle belongs to a transaction that was closed",
                    kind.c_name()
                ))
            }
            _ => codes::bad_argument(format!(
                "the {} handle was freed (used after free)",
                kind.c_name()
            )),
        },
    }
}

/// What an entry point returns when it fails.
pub trait FfiDefault {
    fn failed() -> Self;
}

impl FfiDefault for c_int {
    fn failed() -> Self {
        -1
    }
}
impl FfiDefault for u32 {
    fn failed() -> Self {
        0
    }
}
impl FfiDefault for u64 {
    fn failed() -> Self {
        0
    }
}
impl FfiDefault for i64 {
    fn failed() -> Self {
        0
    }
}
impl FfiDefault for u8 {
    fn failed() -> Self {
        0
    }
}
impl FfiDefault for i8 {
    fn failed() -> Self {
        0
    }
}
impl FfiDefault for u16 {
    fn failed() -> Self {
        0
    }
}
impl FfiDefault for i16 {
    fn failed() -> Self {
        0
    }
}
impl FfiDefault for f32 {
    fn failed() -> Self {
        0.0
    }
}
impl FfiDefault for f64 {
    fn failed() -> Self {
        0.0
    }
}
impl FfiDefault for () {
    fn failed() -> Self {}
}
impl<T> FfiDefault for *mut T {
    fn failed() -> Self {
        std::ptr::null_mut()
    }
}
impl<T> FfiDefault for *const T {
    fn failed() -> Self {
        std::ptr::null()
    }
}

/// Runs the body of an entry point: a returned error is recorded as the thread's last
/// error and turned into the failure value (-1, NULL, 0); a panic is caught and reported
/// as error 4000 (internal error), so no unwinding crosses into C. Inlined into each
/// entry point: one stack frame per call from C, not two.
#[inline(always)]
pub fn guard<R: FfiDefault>(name: &str, f: impl FnOnce() -> Result<R, NdbError>) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            failed(e);
            R::failed()
        }
        Err(p) => {
            panicked(name, p);
            R::failed()
        }
    }
}

/// A failed call: its error becomes the thread's last error (out of line: the success
/// path of every entry point stays small).
#[cold]
#[inline(never)]
fn failed(e: NdbError) {
    set_last(&e);
}

/// A caught panic, reported as error 4000.
#[cold]
#[inline(never)]
fn panicked(name: &str, p: Box<dyn std::any::Any + Send>) {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    set_last(&codes::internal(format!("{name}: {what}")));
}
