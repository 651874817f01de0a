//! `rndb.LocalCluster`: the embedded distributed cluster (`cluster::local`) — the
//! management server and the data nodes of `rndb_mgmd` and `rndbd`, running in this
//! process over an in-process network, with heartbeats, arbitration, the TC's prepare
//! chain, failover and node restarts. Clients reach it as they reach a cluster of
//! processes: `cluster.connect()` (or `rndb.connect(cluster.connectstring)`) gives the
//! same `MgmClient`.
//!
//! Invariant: every call runs detached from the interpreter (starts and restarts take
//! seconds); the core cluster sits behind a mutex; a closed cluster refuses every call.

use crate::cluster::Layout;
use crate::errors::{R, guard, to_pyerr};
use crate::lock_detached;
use crate::mgmclient::MgmClient;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use rndb::cluster::local::LocalCluster as CoreLocal;
use rndb::error::codes;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

#[pyclass(frozen, module = "rndb")]
pub struct LocalCluster {
    inner: Mutex<Option<CoreLocal>>,
    connectstring: String,
}

fn closed() -> rndb::error::NdbError {
    codes::cluster_closed()
}

fn seconds(what: &str, s: f64) -> R<Duration> {
    if s.is_finite() && s > 0.0 && s <= 3600.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(codes::bad_argument(format!(
            "{what} {s}: give seconds in (0, 3600]"
        )))
    }
}

impl LocalCluster {
    /// Runs `f` on the open cluster, detached from the interpreter.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreLocal) -> R<T> + Send,
    ) -> PyResult<T> {
        let r = py.detach(|| {
            guard(|| {
                let mut g = lock_detached(&self.inner);
                let c = g.as_mut().ok_or_else(closed)?;
                f(c)
            })
        });
        r.map_err(|e| to_pyerr(py, e))
    }
}

#[pymethods]
impl LocalCluster {
    /// Starts the management server and every data node of the configuration in this
    /// process (NDB's default when neither `config_file` nor a layout is given: two
    /// data nodes, NoOfReplicas=2); waits until every data node is started. Keyword
    /// data-node parameters and `data_dir`/`initial` as for `Cluster.embedded`.
    #[staticmethod]
    #[pyo3(signature = (*, data_dir=None, config_file=None, data_nodes=None, no_of_replicas=None, initial=false, **params))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        py: Python<'_>,
        data_dir: Option<PathBuf>,
        config_file: Option<PathBuf>,
        data_nodes: Option<u32>,
        no_of_replicas: Option<u32>,
        initial: bool,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<LocalCluster> {
        let layout = Layout::from_args(
            config_file,
            data_nodes,
            no_of_replicas,
            initial,
            &data_dir,
            params,
        )?;
        let r = py
            .detach(|| guard(|| CoreLocal::start(layout.config()?, data_dir.as_deref(), initial)));
        let c = r.map_err(|e| to_pyerr(py, e))?;
        Ok(LocalCluster {
            connectstring: c.connectstring(),
            inner: Mutex::new(Some(c)),
        })
    }

    /// The connectstring that reaches this cluster from this process
    /// (`local=N,127.0.0.1:1186`).
    #[getter]
    fn connectstring(&self) -> &str {
        &self.connectstring
    }

    /// The directory holding the nodes' files (None: each node's configured DataDir).
    #[getter]
    fn data_dir(&self, py: Python<'_>) -> PyResult<Option<PathBuf>> {
        self.with(py, |c| Ok(c.data_dir().map(PathBuf::from)))
    }

    /// A client of this cluster: the same `MgmClient` as `rndb.connect` gives.
    #[pyo3(signature = (timeout=5.0))]
    fn connect(&self, py: Python<'_>, timeout: f64) -> PyResult<MgmClient> {
        if lock_detached(&self.inner).is_none() {
            return Err(crate::errors::err(closed()));
        }
        crate::mgmclient::connect(py, &self.connectstring, timeout)
    }

    /// Ids of the data nodes whose process runs.
    fn running_nodes(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        self.with(py, |c| Ok(c.running_nodes()))
    }

    /// Ends data node `node_id` at once, telling nobody (as kill -9 of its rndbd).
    fn kill_node(&self, py: Python<'_>, node_id: u32) -> PyResult<()> {
        self.with(py, |c| c.kill_node(node_id))
    }

    /// Starts data node `node_id` again: a node restart from its own files, or with
    /// `initial=True` from its peers. Does not wait (see `wait_started`).
    #[pyo3(signature = (node_id, initial=false))]
    fn start_node(&self, py: Python<'_>, node_id: u32, initial: bool) -> PyResult<()> {
        self.with(py, |c| c.start_node(node_id, initial))
    }

    /// Waits until the data nodes `node_ids` (default: every running one) are
    /// started; raises when one stops or `timeout` seconds pass.
    #[pyo3(signature = (node_ids=None, timeout=60.0))]
    fn wait_started(
        &self,
        py: Python<'_>,
        node_ids: Option<Vec<u32>>,
        timeout: f64,
    ) -> PyResult<()> {
        let t = seconds("timeout", timeout).map_err(|e| to_pyerr(py, e))?;
        self.with(py, |c| {
            let ids = node_ids.unwrap_or_else(|| c.running_nodes());
            c.wait_started(&ids, t)
        })
    }

    /// The management server's cluster log lines, oldest first.
    fn log_lines(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with(py, |c| Ok(c.log_lines()))
    }

    /// Stops the cluster gracefully (SHUTDOWN: every node saves a last global
    /// checkpoint first); returns each data node's exit status by node id.
    fn shutdown(&self, py: Python<'_>) -> PyResult<BTreeMap<u32, i32>> {
        let r = py.detach(|| {
            guard(|| {
                let c = lock_detached(&self.inner).take().ok_or_else(closed)?;
                c.shutdown()
            })
        });
        r.map_err(|e| to_pyerr(py, e))
    }

    /// Ends the cluster at once (its nodes as if killed: what they made durable is
    /// kept in the data directory). Closing twice is allowed.
    fn close(&self, py: Python<'_>) {
        let c = lock_detached(&self.inner).take();
        py.detach(move || drop(c));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        let c = lock_detached(&self.inner).take();
        if let Some(c) = c {
            // A graceful stop; a failure to ask for it still ends every node.
            let _ = py.detach(move || c.shutdown());
        }
        false
    }

    fn __repr__(&self) -> String {
        let open = lock_detached(&self.inner).is_some();
        format!(
            "<rndb.LocalCluster {} {}>",
            self.connectstring,
            if open { "running" } else { "closed" }
        )
    }
}
