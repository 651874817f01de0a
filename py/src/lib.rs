//! The `rndb` Python module (`rndb._rndb`, re-exported by the `rndb` package).
//!
//! Object model after the NDB API: `Cluster` (an embedded cluster, like
//! Ndb_cluster_connection), `Ndb` (a database handle with batched key reads and inserts,
//! scans and SQL), `Transaction` (NdbTransaction: deferred operations run by `execute`),
//! `Operation` (the result of one operation), `ScanIterator`, `Reader` (a prepared
//! primary-key read of fixed columns).
//!
//! Every pyclass is frozen and Sync: mutable state sits behind a `Mutex`, which is always
//! taken either detached from the interpreter or with `lock_py_attached`, so a thread
//! blocked on a row lock inside the engine never holds the GIL. Engine calls that can
//! block run inside `py.detach` and under [`errors::guard`], which turns a panic into an
//! `NdbError` instead of unwinding into Python. One exception: `Reader.get` of in-memory
//! columns, a single hash lookup, keeps the GIL (reader.rs tells why).

use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use rndb::error::codes;
use rndb::{AbortOption, ExecType, LockMode};
use std::sync::{Mutex, MutexGuard};

mod cluster;
mod convert;
mod ddl;
mod errors;
mod local;
mod mgmclient;
mod ndb;
mod ndb_direct;
mod nodes;
mod nodes_ndb;
mod prepared;
mod reader;
mod remote_scan;
mod remote_txn;
mod scan;
mod sqlglue;
mod transaction;

use errors::R;

/// NdbTransaction::ExecType.
pub const NO_COMMIT: i32 = 1;
pub const COMMIT: i32 = 2;
pub const ROLLBACK: i32 = 3;
/// NdbOperation::LockMode.
pub const LM_READ: i32 = 0;
pub const LM_EXCLUSIVE: i32 = 1;
pub const LM_COMMITTED_READ: i32 = 2;
pub const LM_SIMPLE_READ: i32 = 3;
/// NdbOperation::AbortOption.
pub const ABORT_ON_ERROR: i32 = 0;
pub const AO_IGNORE_ERROR: i32 = 2;

pub(crate) fn lock_mode(v: i32) -> R<LockMode> {
    Ok(match v {
        LM_READ => LockMode::Read,
        LM_EXCLUSIVE => LockMode::Exclusive,
        LM_COMMITTED_READ => LockMode::CommittedRead,
        LM_SIMPLE_READ => LockMode::SimpleRead,
        _ => {
            return Err(codes::bad_argument(format!(
                "lock_mode {v}: use rndb.LM_Read, LM_Exclusive, LM_CommittedRead or LM_SimpleRead"
            )));
        }
    })
}

pub(crate) fn exec_type(v: i32) -> R<ExecType> {
    Ok(match v {
        NO_COMMIT => ExecType::NoCommit,
        COMMIT => ExecType::Commit,
        ROLLBACK => ExecType::Rollback,
        _ => {
            return Err(codes::bad_argument(format!(
                "exec_type {v}: use rndb.NoCommit, rndb.Commit or rndb.Rollback"
            )));
        }
    })
}

pub(crate) fn abort_option(v: i32) -> R<AbortOption> {
    Ok(match v {
        ABORT_ON_ERROR => AbortOption::AbortOnError,
        AO_IGNORE_ERROR => AbortOption::IgnoreError,
        _ => {
            return Err(codes::bad_argument(format!(
                "abort_option {v}: use rndb.AbortOnError or rndb.AO_IgnoreError"
            )));
        }
    })
}

/// Locks a mutex without holding the GIL while waiting (a poisoned lock is taken over:
/// panics are already reported as errors by `errors::guard`).
pub(crate) fn lock<'a, T>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    m.lock_py_attached(py)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Locks a mutex from detached code.
pub(crate) fn lock_detached<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[pymodule(gil_used = false)]
#[allow(non_upper_case_globals)]
mod _rndb {
    use super::*;

    #[pymodule_export]
    use crate::cluster::Cluster;
    #[pymodule_export]
    use crate::errors::{NdbError, PermanentError, TemporaryError, UnknownResultError};
    #[pymodule_export]
    use crate::local::LocalCluster;
    #[pymodule_export]
    use crate::mgmclient::{MgmClient, connect};
    #[pymodule_export]
    use crate::ndb::Ndb;
    #[pymodule_export]
    use crate::reader::Reader;
    #[pymodule_export]
    use crate::remote_scan::RemoteScanIterator;
    #[pymodule_export]
    use crate::remote_txn::RemoteTransaction;
    #[pymodule_export]
    use crate::scan::ScanIterator;
    #[pymodule_export]
    use crate::transaction::{Operation, Transaction};

    #[pymodule_export]
    const NoCommit: i32 = NO_COMMIT;
    #[pymodule_export]
    const Commit: i32 = COMMIT;
    #[pymodule_export]
    const Rollback: i32 = ROLLBACK;
    #[pymodule_export]
    const LM_Read: i32 = LM_READ;
    #[pymodule_export]
    const LM_Exclusive: i32 = LM_EXCLUSIVE;
    #[pymodule_export]
    const LM_CommittedRead: i32 = LM_COMMITTED_READ;
    #[pymodule_export]
    const LM_SimpleRead: i32 = LM_SIMPLE_READ;
    #[pymodule_export]
    const AbortOnError: i32 = ABORT_ON_ERROR;
    #[pymodule_export]
    const AO_IgnoreError: i32 = AO_IGNORE_ERROR;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        crate::errors::init_defaults(m.py())?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        Ok(())
    }
}
