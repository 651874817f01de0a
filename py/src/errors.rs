//! The exception tree (`rndb.NdbError` and one subclass per NDB error status) and the
//! conversion of the engine's errors; the panic guard around every engine call.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyType;
use rndb::error::codes;
use rndb::{ErrorStatus, NdbError as CoreError};
use std::panic::{AssertUnwindSafe, catch_unwind};

pyo3::create_exception!(
    rndb,
    NdbError,
    PyException,
    "An NDB error: .code, .status, .classification, .message, .mysql_code."
);
pyo3::create_exception!(
    rndb,
    TemporaryError,
    NdbError,
    "An NDB error with status TemporaryError: retrying the transaction may succeed."
);
pyo3::create_exception!(
    rndb,
    PermanentError,
    NdbError,
    "An NDB error with status PermanentError."
);
pyo3::create_exception!(
    rndb,
    UnknownResultError,
    NdbError,
    "An NDB error with status UnknownResult: the outcome of the transaction is unknown."
);

/// Result of engine work done without the GIL.
pub type R<T> = Result<T, CoreError>;

/// NDB's status name, as `NdbError::Status`.
pub fn status_name(s: ErrorStatus) -> &'static str {
    match s {
        ErrorStatus::Success => "Success",
        ErrorStatus::TemporaryError => "TemporaryError",
        ErrorStatus::PermanentError => "PermanentError",
        ErrorStatus::UnknownResult => "UnknownResult",
    }
}

/// Builds the Python exception (instance of the status' subclass) for an engine error.
pub fn to_pyerr(py: Python<'_>, e: CoreError) -> PyErr {
    let ty: Bound<'_, PyType> = match e.status {
        ErrorStatus::TemporaryError => py.get_type::<TemporaryError>(),
        ErrorStatus::UnknownResult => py.get_type::<UnknownResultError>(),
        ErrorStatus::PermanentError => py.get_type::<PermanentError>(),
        ErrorStatus::Success => py.get_type::<NdbError>(),
    };
    let make = || -> PyResult<PyErr> {
        let inst = ty.call1((e.to_string(),))?;
        inst.setattr("code", e.code)?;
        inst.setattr("status", status_name(e.status))?;
        inst.setattr("classification", format!("{:?}", e.classification))?;
        inst.setattr("message", e.message.as_str())?;
        inst.setattr("mysql_code", e.mysql_code)?;
        Ok(PyErr::from_value(inst))
    };
    make().unwrap_or_else(|err| err)
}

/// Converts an engine error where a `Python` token is not at hand.
pub fn err(e: CoreError) -> PyErr {
    Python::attach(|py| to_pyerr(py, e))
}

/// Engine result to Python result.
pub fn py_result<T>(r: R<T>) -> PyResult<T> {
    r.map_err(err)
}

/// Runs engine code, turning a panic into NDB error 4000 (internal error) so that
/// nothing unwinds into Python.
pub fn guard<T>(f: impl FnOnce() -> R<T>) -> R<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(codes::internal(format!("panic in the engine: {msg}")))
        }
    }
}

/// Parameter error (4118) raised by the Python layer itself.
pub fn bad_argument(detail: impl std::fmt::Display) -> PyErr {
    err(codes::bad_argument(detail))
}

/// Sets the class-level defaults of the attributes, so that an `NdbError` raised by user
/// code has them too.
pub fn init_defaults(py: Python<'_>) -> PyResult<()> {
    let t = py.get_type::<NdbError>();
    t.setattr("code", 0u32)?;
    t.setattr("status", "PermanentError")?;
    t.setattr("classification", "UserDefinedError")?;
    t.setattr("message", "")?;
    t.setattr("mysql_code", 0u32)?;
    Ok(())
}
