//! `rndb.connect("host:1186")`: a management client of a distributed cluster
//! (`rndb_mgmd`), as `ndb_mgm -c host:1186` is — node commands (`SHOW`, `ALL STATUS`,
//! `<id> STOP`, `<id> START`, `<id> RESTART [-n]`, `SHUTDOWN`) sent over TCP, with the
//! server's output returned and its refusals raised as `NdbError`.
//!
//! Invariant: one request at a time per client (the connection sits behind a mutex,
//! taken detached from the interpreter, so a slow server never holds the GIL); a
//! closed client refuses every call.

use crate::errors::{R, guard, to_pyerr};
use crate::lock_detached;
use pyo3::prelude::*;
use rndb::cluster::client::{ConnectString, MgmConnection};
use rndb::error::codes;
use rndb::transport::Role;
use std::sync::Mutex;
use std::time::Duration;

/// A connection to a management server.
#[pyclass(frozen, module = "rndb")]
pub struct MgmClient {
    connectstring: String,
    server_node_id: u32,
    conn: Mutex<Option<MgmConnection>>,
}

fn closed() -> rndb::NdbError {
    codes::bad_argument("the management client is closed")
}

#[pymethods]
impl MgmClient {
    /// The management server's node id.
    #[getter]
    fn server_node_id(&self) -> u32 {
        self.server_node_id
    }

    /// The connectstring it was opened with.
    #[getter]
    fn connectstring(&self) -> &str {
        &self.connectstring
    }

    /// Runs a management command on the server; returns its output. A command the
    /// server refuses raises `NdbError` with the server's reason.
    fn mgm(&self, py: Python<'_>, command: &str) -> PyResult<String> {
        let r = py.detach(|| {
            guard(|| {
                let mut g = lock_detached(&self.conn);
                let c = g.as_mut().ok_or_else(closed)?;
                c.command(command)
            })
        });
        r.map_err(|e| to_pyerr(py, e))
    }

    /// Closes the connection (later calls raise); closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        py.detach(|| lock_detached(&self.conn).take());
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "<rndb.MgmClient {} (management node {})>",
            self.connectstring, self.server_node_id
        )
    }
}

/// `rndb.connect(connectstring, timeout=5.0)`: connects to the management server named
/// by an NDB connectstring (`host:1186`, `host1:1186,host2:1186`, `nodeid=N,host:port`).
#[pyfunction]
#[pyo3(signature = (connectstring, timeout=5.0))]
pub fn connect(py: Python<'_>, connectstring: &str, timeout: f64) -> PyResult<MgmClient> {
    let r: R<MgmClient> = py.detach(|| {
        guard(|| {
            if !(timeout.is_finite() && timeout > 0.0 && timeout <= 3600.0) {
                return Err(codes::bad_argument(format!(
                    "timeout {timeout}: give seconds in (0, 3600]"
                )));
            }
            let cs = ConnectString::parse(connectstring)?;
            let conn = MgmConnection::open(&cs, Role::Api, Duration::from_secs_f64(timeout))?;
            Ok(MgmClient {
                connectstring: connectstring.to_string(),
                server_node_id: conn.server_node_id,
                conn: Mutex::new(Some(conn)),
            })
        })
    });
    r.map_err(|e| to_pyerr(py, e))
}
