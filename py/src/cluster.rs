//! `rndb.Cluster`: an embedded cluster (Ndb_cluster_connection plus its data nodes).

use crate::convert::row_to_dict;
use crate::errors::{bad_argument, guard, py_result, to_pyerr};
use crate::ndb::Ndb;
use crate::sqlglue;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};
use rndb::config::ClusterConfig;
use rndb::error::codes;
use std::path::PathBuf;

#[pyclass(frozen, module = "rndb")]
pub struct Cluster {
    pub(crate) inner: rndb::Cluster,
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

impl Cluster {
    fn check_open(&self) -> PyResult<()> {
        if self.inner.is_closed() {
            Err(crate::errors::err(codes::cluster_closed()))
        } else {
            Ok(())
        }
    }
}

#[pymethods]
impl Cluster {
    /// Starts an embedded cluster. NDB data-node parameters are keyword arguments
    /// (`DataMemory="256M"`), set on every data node. On a `data_dir` that holds an
    /// earlier run's files this is a system restart that recovers every durable
    /// commit; `initial=True` (ndbd --initial) removes those files first.
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
        Ok(Cluster {
            inner: py_result(r)?,
        })
    }

    /// An `Ndb` object for a database, like `Ndb(&cluster_connection, "test")`.
    #[pyo3(signature = (database="test"))]
    fn ndb(&self, database: &str) -> PyResult<Ndb> {
        self.check_open()?;
        Ok(Ndb::new(self.inner.ndb(database)))
    }

    /// Runs a management-client command (the ndb_mgm language); returns its output.
    fn mgm(&self, py: Python<'_>, command: &str) -> PyResult<String> {
        self.check_open()?;
        let inner = self.inner.inner().clone();
        let r = py.detach(|| guard(|| sqlglue::mgm(&inner, command)));
        r.map_err(|e| to_pyerr(py, e))
    }

    /// The rows of an ndbinfo table (`"memoryusage"` or `"ndbinfo.memoryusage"`).
    fn ndbinfo<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyList>> {
        self.check_open()?;
        let inner = self.inner.inner().clone();
        let table = name
            .strip_prefix("ndbinfo.")
            .or_else(|| name.strip_prefix("NDBINFO."))
            .unwrap_or(name)
            .to_string();
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

    /// Shuts the cluster down: every page of DataMemory is released; later use of the
    /// cluster, its Ndb objects and transactions raises NdbError 4009.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner.clone();
        py_result(py.detach(|| {
            guard(|| {
                inner.shutdown();
                Ok(())
            })
        }))
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
        let inner = self.inner.clone();
        let wait = std::time::Duration::from_secs_f64(timeout.min(1e9));
        py_result(py.detach(|| guard(|| inner.wait_durable(gci, wait))))
    }

    /// Runs a global checkpoint now and returns the GCI (checkpoint number) made
    /// durable on every data node.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<u32> {
        self.check_open()?;
        let inner = self.inner.clone();
        py_result(py.detach(|| guard(|| inner.inner().force_gcp())))
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Node ids of the data nodes.
    #[getter]
    fn data_node_ids(&self) -> Vec<u32> {
        self.inner.data_node_ids()
    }

    /// The configuration in effect, as config.ini text.
    #[getter]
    fn config_ini(&self) -> String {
        self.inner.inner().config.read().to_ini()
    }

    /// The data directory given at start, if any.
    #[getter]
    fn data_dir(&self) -> Option<PathBuf> {
        self.inner.inner().data_dir.clone()
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
            "<rndb.Cluster data_nodes={:?}{}>",
            self.inner.data_node_ids(),
            if self.inner.is_closed() {
                " closed"
            } else {
                ""
            }
        )
    }
}
