//! The embedded default (ARCHITECTURE decision 5): `rndb.Cluster.embedded` runs the
//! management server and the data nodes of `rndb_mgmd` and `rndbd` in this process
//! over an in-process network (`cluster::local`), and reaches them through one
//! `MgmClient`, as a program reaches a cluster of processes: management commands go to
//! the management server, `ndbinfo` is a SELECT on a data node, `wait_durable` and
//! `checkpoint` ask the data nodes' global checkpoint protocol. Its `Ndb` objects are
//! `nodes_ndb::NodesNdb`.
//!
//! Closing shuts the nodes down gracefully (SHUTDOWN: each saves a last global
//! checkpoint), so the next `Cluster.embedded` on the same `data_dir` is a system
//! restart that finds every commit; without a `data_dir` the nodes' files were in a
//! scratch directory, removed then.
//!
//! Invariant: the core cluster sits behind a mutex, taken detached from the
//! interpreter; None once closed, and then every call raises 4009.

use crate::cluster::Layout;
use crate::convert::outcome_to_py;
use crate::errors::{R, guard, to_pyerr};
use crate::lock_detached;
use crate::mgmclient::MgmClient;
use crate::nodes_ndb::NodesNdb;
use crate::sqlglue::SqlOutcome;
use pyo3::prelude::*;
use pyo3::types::PyList;
use rndb::cluster::local::LocalCluster;
use rndb::cluster::node_commands;
use rndb::error::codes;
use rndb::sql::SessionVars;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// How long the embedded cluster's client waits for the management server.
const CLIENT_TIMEOUT_S: f64 = 30.0;

/// How long a node command waits for its effect.
const NODE_WAIT_TIMEOUT: Duration = Duration::from_secs(600);

/// How long `checkpoint()` waits for the global checkpoint.
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(60);

/// See the module notes.
pub(crate) struct NodesCluster {
    local: Mutex<Option<LocalCluster>>,
    client: Py<MgmClient>,
    config_ini: String,
    data_dir: Option<PathBuf>,
    data_node_ids: Vec<u32>,
}

impl NodesCluster {
    /// Starts the nodes of `layout` (files in `data_dir`, else a scratch directory)
    /// and waits until every data node is started; then connects the client.
    pub(crate) fn start(
        py: Python<'_>,
        layout: &Layout,
        data_dir: Option<PathBuf>,
        initial: bool,
    ) -> PyResult<NodesCluster> {
        let r = py.detach(|| {
            guard(|| {
                let config = layout.config()?;
                let local = LocalCluster::start(config, data_dir.as_deref(), initial)?;
                let client = MgmClient::open(&local.connectstring(), CLIENT_TIMEOUT_S, true)?;
                Ok((local, client))
            })
        });
        let (local, client) = r.map_err(|e| to_pyerr(py, e))?;
        Ok(NodesCluster {
            config_ini: local.config().to_ini(),
            data_node_ids: local
                .config()
                .data_nodes
                .iter()
                .map(|n| n.node_id)
                .collect(),
            data_dir,
            client: Py::new(py, client)?,
            local: Mutex::new(Some(local)),
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock_detached(&self.local).is_none()
    }

    fn check_open(&self) -> R<()> {
        if self.is_closed() {
            Err(codes::cluster_closed())
        } else {
            Ok(())
        }
    }

    pub(crate) fn ndb(&self, py: Python<'_>, database: &str) -> PyResult<NodesNdb> {
        self.check_open().map_err(|e| to_pyerr(py, e))?;
        Ok(NodesNdb::new(self.client.clone_ref(py), database))
    }

    /// A management command, waited for as `rndb_mgm` waits (`cluster::node_commands`:
    /// STOP returns once the nodes are gone, START once they are started, and START of
    /// a node whose process ended starts it in this process again).
    pub(crate) fn mgm(&self, py: Python<'_>, command: &str) -> PyResult<String> {
        let client = self.client.get();
        py.detach(|| {
            guard(|| {
                let mut g = lock_detached(&self.local);
                let local = g.as_mut().ok_or_else(codes::cluster_closed)?;
                let mut out = Vec::new();
                let data = client.open_data();
                node_commands::run(
                    command,
                    Some(local),
                    data.as_deref(),
                    NODE_WAIT_TIMEOUT,
                    &mut |c| client.command(c),
                    &mut |o| out.push(o.to_string()),
                )?;
                Ok(out.join("\n"))
            })
        })
        .map_err(|e| to_pyerr(py, e))
    }

    /// The rows of `SELECT * FROM ndbinfo.<table>`, answered by a data node.
    pub(crate) fn ndbinfo<'py>(
        &self,
        py: Python<'py>,
        table: &str,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check_open().map_err(|e| to_pyerr(py, e))?;
        let sql = format!("SELECT * FROM ndbinfo.{}", rndb::sql::quote_ident(table));
        let client = self.client.get();
        let results = py
            .detach(|| {
                guard(|| {
                    client
                        .data()?
                        .sql_results_in("ndbinfo", &sql, &mut SessionVars::default())
                })
            })
            .map_err(|e| to_pyerr(py, e))?;
        let rows = outcome_to_py(py, SqlOutcome::of_last(results))?;
        Ok(rows.cast_into::<PyList>()?)
    }

    /// Shuts the nodes down gracefully; closing twice does nothing.
    pub(crate) fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.client.get().close(py);
        let local = lock_detached(&self.local).take();
        let Some(local) = local else {
            return Ok(());
        };
        py.detach(|| guard(|| local.shutdown().map(|_| ())))
            .map_err(|e| to_pyerr(py, e))
    }

    pub(crate) fn wait_durable(&self, py: Python<'_>, gci: u64, wait: Duration) -> PyResult<()> {
        self.check_open().map_err(|e| to_pyerr(py, e))?;
        let client = self.client.get();
        py.detach(|| guard(|| client.data()?.wait_durable(gci, wait)))
            .map_err(|e| to_pyerr(py, e))
    }

    pub(crate) fn checkpoint(&self, py: Python<'_>) -> PyResult<u32> {
        self.check_open().map_err(|e| to_pyerr(py, e))?;
        let client = self.client.get();
        py.detach(|| guard(|| client.data()?.checkpoint(CHECKPOINT_TIMEOUT)))
            .map_err(|e| to_pyerr(py, e))
    }

    pub(crate) fn connectstring(&self) -> &str {
        self.client.get().connectstring()
    }

    pub(crate) fn data_node_ids(&self) -> Vec<u32> {
        self.data_node_ids.clone()
    }

    pub(crate) fn config_ini(&self) -> String {
        self.config_ini.clone()
    }

    pub(crate) fn data_dir(&self) -> Option<PathBuf> {
        self.data_dir.clone()
    }
}
