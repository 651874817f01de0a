//! `rndb.Cluster`: an embedded cluster (Ndb_cluster_connection plus its data nodes).
//!
//! `Cluster.embedded` (the default) runs the node code of `rndb_mgmd` and `rndbd` in
//! this process (`nodes.rs`); `Cluster.direct` runs the data nodes' engines on the
//! caller's threads, without the protocols between nodes (what the benchmarks of the
//! engines themselves measure). Both take the same arguments and give the same
//! objects; each call dispatches to the engine the cluster has.

use crate::convert::row_to_dict;
use crate::errors::{bad_argument, guard, py_result, to_pyerr};
use crate::ndb::{Engine as NdbEngine, Ndb};
use crate::ndb_direct::DirectNdb;
use crate::nodes::NodesCluster;
use crate::sqlglue;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};
use rndb::config::ClusterConfig;
use rndb::error::codes;
use std::path::PathBuf;

#[pyclass(frozen, module = "rndb")]
pub struct Cluster {
    engine: Engine,
}

enum Engine {
    Direct(rndb::Cluster),
    Nodes(Box<NodesCluster>),
}

/// A keyword argument value as config.ini text: str, int or bool.
fn param_text(name: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_string());
    }
    if v.cast::<PyInt>().is_ok() {
        return Ok(v.str()?.to_string());
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    Err(bad_argument(format!(
        "parameter {name}: value must be str or int, not {}",
        v.get_type().name()?
    )))
}

/// The configuration a cluster starts from, as the keyword arguments give it:
/// `config_file=`, or the embedded layout (`data_nodes=`, `no_of_replicas=`), and
/// data-node parameters set on every data node. Shared by `Cluster.embedded` and
/// `LocalCluster.start`.
pub(crate) struct Layout {
    config_file: Option<PathBuf>,
    data_nodes: Option<u32>,
    no_of_replicas: Option<u32>,
    settings: Vec<(String, String)>,
}

impl Layout {
    /// Also checks that `initial` comes with a `data_dir`.
    pub(crate) fn from_args(
        config_file: Option<PathBuf>,
        data_nodes: Option<u32>,
        no_of_replicas: Option<u32>,
        initial: bool,
        data_dir: &Option<PathBuf>,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Layout> {
        if initial && data_dir.is_none() {
            return Err(bad_argument(
                "initial=True needs a data_dir (a cluster without one starts empty anyway)",
            ));
        }
        let mut settings: Vec<(String, String)> = Vec::new();
        if let Some(p) = params {
            for (k, v) in p.iter() {
                let k: String = k.extract()?;
                let text = param_text(&k, &v)?;
                settings.push((k, text));
            }
        }
        if config_file.is_some() && (data_nodes.is_some() || no_of_replicas.is_some()) {
            return Err(bad_argument(
                "data_nodes and no_of_replicas describe the embedded layout: \
                 with config_file= the layout comes from the file",
            ));
        }
        Ok(Layout {
            config_file,
            data_nodes,
            no_of_replicas,
            settings,
        })
    }

    /// The configuration (parsed and checked; runs without the interpreter).
    pub(crate) fn config(&self) -> rndb::error::Result<ClusterConfig> {
        let mut config = match (&self.config_file, self.data_nodes, self.no_of_replicas) {
            (Some(path), _, _) => ClusterConfig::from_file(path)?,
            (None, None, None) => ClusterConfig::embedded_default(),
            (None, nodes, replicas) => {
                let nodes = nodes.unwrap_or(2);
                let replicas = replicas.unwrap_or(if nodes == 1 { 1 } else { 2 });
                ClusterConfig::embedded(nodes, replicas)?
            }
        };
        for (k, v) in &self.settings {
            config.set_data_node_param(k, v)?;
        }
        Ok(config)
    }
}

fn closed_err() -> PyErr {
    crate::errors::err(codes::cluster_closed())
}

/// Starts the direct engines of `layout` (module notes).
fn start_direct(
    py: Python<'_>,
    layout: Layout,
    data_dir: Option<PathBuf>,
    initial: bool,
) -> PyResult<rndb::Cluster> {
    let r = py.detach(|| {
        guard(|| {
            let config = layout.config()?;
            match &data_dir {
                Some(dir) => {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        codes::bad_config(format!(
                            "cannot create data directory {}: {e}",
                            dir.display()
                        ))
                    })?;
                    if initial {
                        rndb::Cluster::embedded_initial(config, dir.clone())
                    } else {
                        rndb::Cluster::embedded_in(config, dir.clone())
                    }
                }
                None => rndb::Cluster::embedded(config),
            }
        })
    });
    py_result(r)
}

impl Cluster {
    fn check_open(&self) -> PyResult<()> {
        if self.closed() {
            Err(closed_err())
        } else {
            Ok(())
        }
    }
}

#[pymethods]
impl Cluster {
    /// Starts an embedded cluster: the management server and the data nodes of
    /// `rndb_mgmd` and `rndbd` in this process (heartbeats, the TCs' prepare chain
    /// over the replicas, global and local checkpoints), NDB's default layout of two
    /// data nodes with NoOfReplicas=2 unless `data_nodes`/`no_of_replicas` or a
    /// `config_file` say otherwise. NDB data-node parameters are keyword arguments
    /// (`DataMemory="256M"`), set on every data node. On a `data_dir` that holds an
    /// earlier run's files this is a system restart that recovers every durable
    /// commit; `initial=True` (ndbd --initial) removes those files first. Without a
    /// `data_dir` the nodes' files go to a scratch directory removed at `close()`.
    #[staticmethod]
    #[pyo3(signature = (*, data_dir=None, config_file=None, data_nodes=None, no_of_replicas=None, initial=false, **params))]
    #[allow(clippy::too_many_arguments)]
    fn embedded(
        py: Python<'_>,
        data_dir: Option<PathBuf>,
        config_file: Option<PathBuf>,
        data_nodes: Option<u32>,
        no_of_replicas: Option<u32>,
        initial: bool,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Cluster> {
        let layout = Layout::from_args(
            config_file,
            data_nodes,
            no_of_replicas,
            initial,
            &data_dir,
            params,
        )?;
        let nodes = NodesCluster::start(py, &layout, data_dir, initial)?;
        Ok(Cluster {
            engine: Engine::Nodes(Box::new(nodes)),
        })
    }

    /// The data nodes' engines on the caller's threads (same arguments as
    /// `embedded`): each write applied to every replica in the caller's call, no
    /// messages between nodes, no heartbeats or node failures. What the engines'
    /// own benchmarks measure; `embedded` is the cluster.
    #[staticmethod]
    #[pyo3(signature = (*, data_dir=None, config_file=None, data_nodes=None, no_of_replicas=None, initial=false, **params))]
    #[allow(clippy::too_many_arguments)]
    fn direct(
        py: Python<'_>,
        data_dir: Option<PathBuf>,
        config_file: Option<PathBuf>,
        data_nodes: Option<u32>,
        no_of_replicas: Option<u32>,
        initial: bool,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Cluster> {
        let layout = Layout::from_args(
            config_file,
            data_nodes,
            no_of_replicas,
            initial,
            &data_dir,
            params,
        )?;
        Ok(Cluster {
            engine: Engine::Direct(start_direct(py, layout, data_dir, initial)?),
        })
    }

    /// An `Ndb` object for a database, like `Ndb(&cluster_connection, "test")`.
    #[pyo3(signature = (database="test"))]
    fn ndb(&self, py: Python<'_>, database: &str) -> PyResult<Ndb> {
        self.check_open()?;
        Ok(Ndb::new(match &self.engine {
            Engine::Direct(c) => NdbEngine::Direct(Box::new(DirectNdb::new(c.ndb(database)))),
            Engine::Nodes(n) => NdbEngine::Nodes(n.ndb(py, database)?),
        }))
    }

    /// Runs a management-client command (the ndb_mgm language); returns its output.
    fn mgm(&self, py: Python<'_>, command: &str) -> PyResult<String> {
        self.check_open()?;
        match &self.engine {
            Engine::Direct(c) => {
                let inner = c.inner().clone();
                let r = py.detach(|| guard(|| sqlglue::mgm(&inner, command)));
                r.map_err(|e| to_pyerr(py, e))
            }
            Engine::Nodes(n) => n.mgm(py, command),
        }
    }

    /// The rows of an ndbinfo table (`"memoryusage"` or `"ndbinfo.memoryusage"`).
    fn ndbinfo<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyList>> {
        self.check_open()?;
        let table = name
            .strip_prefix("ndbinfo.")
            .or_else(|| name.strip_prefix("NDBINFO."))
            .unwrap_or(name)
            .to_string();
        let c = match &self.engine {
            Engine::Direct(c) => c,
            Engine::Nodes(n) => return n.ndbinfo(py, &table),
        };
        let inner = c.inner().clone();
        let r = py.detach(|| guard(|| sqlglue::ndbinfo(&inner, &table)));
        let (columns, rows) = r.map_err(|e| to_pyerr(py, e))?;
        let names: Vec<Bound<'py, PyString>> =
            columns.iter().map(|c| PyString::intern(py, c)).collect();
        let out = PyList::empty(py);
        for row in rows {
            out.append(row_to_dict(py, &names, row)?)?;
        }
        Ok(out)
    }

    /// Shuts the cluster down (the data nodes first save a last global checkpoint);
    /// later use of the cluster, its Ndb objects and transactions raises NdbError
    /// 4009. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match &self.engine {
            Engine::Direct(c) => {
                let inner = c.clone();
                py_result(py.detach(|| {
                    guard(|| {
                        inner.shutdown();
                        Ok(())
                    })
                }))
            }
            Engine::Nodes(n) => n.close(py),
        }
    }

    /// Blocks until the commit with GCI `gci` (`Transaction.gci`) is on disk on every
    /// data node (its global checkpoint completed). Raises NdbError 4008 (unknown
    /// result) after `timeout` seconds.
    #[pyo3(signature = (gci, timeout=60.0))]
    fn wait_durable(&self, py: Python<'_>, gci: u64, timeout: f64) -> PyResult<()> {
        self.check_open()?;
        if !timeout.is_finite() || timeout < 0.0 {
            return Err(bad_argument(
                "timeout must be a non-negative number of seconds",
            ));
        }
        let wait = std::time::Duration::from_secs_f64(timeout.min(1e9));
        match &self.engine {
            Engine::Direct(c) => {
                let inner = c.clone();
                py_result(py.detach(|| guard(|| inner.wait_durable(gci, wait))))
            }
            Engine::Nodes(n) => n.wait_durable(py, gci, wait),
        }
    }

    /// Runs a global checkpoint now and returns the GCI (checkpoint number) made
    /// durable on every data node.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<u32> {
        self.check_open()?;
        match &self.engine {
            Engine::Direct(c) => {
                let inner = c.clone();
                py_result(py.detach(|| guard(|| inner.inner().force_gcp())))
            }
            Engine::Nodes(n) => n.checkpoint(py),
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        match &self.engine {
            Engine::Direct(c) => c.is_closed(),
            Engine::Nodes(n) => n.is_closed(),
        }
    }

    /// Node ids of the data nodes.
    #[getter]
    fn data_node_ids(&self) -> Vec<u32> {
        match &self.engine {
            Engine::Direct(c) => c.data_node_ids(),
            Engine::Nodes(n) => n.data_node_ids(),
        }
    }

    /// The configuration in effect, as config.ini text.
    #[getter]
    fn config_ini(&self) -> String {
        match &self.engine {
            Engine::Direct(c) => c.inner().config.read().to_ini(),
            Engine::Nodes(n) => n.config_ini(),
        }
    }

    /// The data directory given at start, if any.
    #[getter]
    fn data_dir(&self) -> Option<PathBuf> {
        match &self.engine {
            Engine::Direct(c) => c.inner().data_dir.clone(),
            Engine::Nodes(n) => n.data_dir(),
        }
    }

    /// The connectstring that reaches this cluster's management server from this
    /// process (`rndb.connect(cluster.connectstring)`); None for `direct`, which has
    /// none.
    #[getter]
    fn connectstring(&self) -> Option<String> {
        match &self.engine {
            Engine::Direct(_) => None,
            Engine::Nodes(n) => Some(n.connectstring().to_string()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<rndb.Cluster {}data_nodes={:?}{}>",
            match &self.engine {
                Engine::Direct(_) => "direct ",
                Engine::Nodes(_) => "",
            },
            self.data_node_ids(),
            if self.closed() { " closed" } else { "" }
        )
    }
}
