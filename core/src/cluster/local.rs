//! The embedded distributed cluster: the management server and every data node of a
//! configuration, each on its own threads inside this process, talking over an
//! in-process network (`transport::net::LocalNet`) — the node code of `rndb_mgmd` and
//! `rndbd` as it is, with QMGR, heartbeats, arbitration, the TC's prepare chain, node
//! failure handling and node restarts; only the carrier differs (socket pairs, no port).
//!
//! Clients reach it with its connectstring (`local=N,127.0.0.1:1186`), through the same
//! code as over TCP: [`RemoteCluster`], the management client, the Python module's
//! `rndb.connect`, the C API's connection. The connectstring names a network of this
//! process only.
//!
//! Each data node's DataDir is the cluster's data directory when it is given one, which
//! then holds every node's files (`ndb_<id>_fs`, as rndbd lays them out) and the
//! cluster log; else the configuration's DataDir where the configuration sets one; else
//! a fresh scratch directory, removed when the cluster ends. Starting again on a
//! directory with files is a system restart; a node killed and started again is a node
//! restart from its own files (`--initial`: from its peer).
//!
//! Every node runs on this host: each HostName of the configuration that is not this
//! host's (`localhost`, `127.0.0.1`) is taken as 127.0.0.1 (a config.ini written for
//! several hosts starts here as it is, and its host names need not resolve).
//!
//! Ownership: the cluster owns its nodes and its management server; dropping it kills
//! the nodes (as a crash: committed data is in their redo and checkpoints) and stops
//! the server. [`LocalCluster::shutdown`] stops it gracefully (SHUTDOWN: every node
//! saves a last global checkpoint first).

use super::client::{ConnectString, MgmConnection};
use super::mgmd::{MgmServer, mgm_listen_addr};
use super::ndbd::{DataNodeOptions, DataNodeProcess};
use super::remote::RemoteCluster;
use crate::config::ClusterConfig;
use crate::error::{Result, codes};
use crate::transport::net::{LocalNet, Net};
use crate::transport::{NodeId, NodeState, Role};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long [`LocalCluster::start`] waits for every data node to be started.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a data node keeps trying to reach the management server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A running embedded distributed cluster (see the module notes).
pub struct LocalCluster {
    net: Arc<LocalNet>,
    config: ClusterConfig,
    mgm: Option<MgmServer>,
    nodes: BTreeMap<NodeId, DataNodeProcess>,
    echo: bool,
    /// The data directory every node's files are in (None: each node's configured
    /// DataDir).
    data_dir: Option<PathBuf>,
    /// A scratch data directory this cluster made, removed when it ends.
    scratch_dir: Option<PathBuf>,
}

/// `config` with every HostName of another host 127.0.0.1 (see the module notes), and
/// a management server when it names none: on this host, with the lowest node id no
/// other node uses (as the embedded cluster's takes).
fn on_this_host(config: &ClusterConfig) -> Result<ClusterConfig> {
    let mut text: Vec<String> = config
        .to_ini()
        .lines()
        .map(|l| match l.split_once('=') {
            Some((k, v))
                if k.trim().eq_ignore_ascii_case("HostName")
                    && !matches!(v.trim(), "localhost" | "127.0.0.1" | "") =>
            {
                "HostName=127.0.0.1".to_string()
            }
            _ => l.to_string(),
        })
        .collect();
    if config.mgm_nodes.is_empty() {
        let used = |id: u32| {
            config.data_nodes.iter().any(|n| n.node_id == id)
                || config.api_nodes.iter().any(|n| n.node_id == id)
        };
        let id = (1..=255).find(|&id| !used(id)).unwrap_or(255);
        text.push(format!("[ndb_mgmd]\nNodeId={id}\nHostName=localhost"));
    }
    ClusterConfig::parse(&text.join("\n"), "<local cluster>")
        .map_err(|e| codes::bad_config(e.to_string()))
}

impl LocalCluster {
    /// Starts `config`'s management server and data nodes on a new in-process
    /// network, every data node's files under `data_dir` when given (see the module
    /// notes for the others); waits until every data node is started (at most
    /// [`START_TIMEOUT`]). `initial`: each node's file system is removed first
    /// (`rndbd --initial`).
    pub fn start(
        config: ClusterConfig,
        data_dir: Option<&Path>,
        initial: bool,
    ) -> Result<LocalCluster> {
        if config.data_nodes.is_empty() {
            return Err(codes::bad_config("the configuration has no [ndbd]"));
        }
        let mut config = on_this_host(&config)?;
        let configured = config.data_nodes.iter().all(|n| n.is_explicit("DataDir"));
        let scratch_dir = (data_dir.is_none() && !configured)
            .then(|| crate::api::cluster::scratch_dir_path("rndb-local"));
        let data_dir = data_dir.or(scratch_dir.as_deref());
        if let Some(dir) = data_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| codes::bad_config(format!("data directory {}: {e}", dir.display())))?;
            let text = dir.to_string_lossy().into_owned();
            config
                .set_data_node_param("DataDir", &text)
                .map_err(|e| codes::bad_config(e.to_string()))?;
        }
        let mgm_id = config
            .mgm_nodes
            .first()
            .map(|m| m.node_id)
            .ok_or_else(|| codes::bad_config("the configuration has no [ndb_mgmd]"))?;
        let net = LocalNet::new();
        let bind = mgm_listen_addr(&config, mgm_id)?;
        let mgm = MgmServer::start_on(
            Net::Local(net.clone()),
            config.clone(),
            mgm_id,
            Some(bind),
            data_dir,
        )?;
        let mut cluster = LocalCluster {
            net,
            config,
            mgm: Some(mgm),
            nodes: BTreeMap::new(),
            echo: false,
            data_dir: data_dir.map(Path::to_path_buf),
            scratch_dir,
        };
        let ids: Vec<NodeId> = cluster
            .config
            .data_nodes
            .iter()
            .map(|n| n.node_id)
            .collect();
        for id in &ids {
            cluster.start_node(*id, initial)?;
        }
        cluster.wait_started(&ids, START_TIMEOUT)?;
        Ok(cluster)
    }

    /// The connectstring that reaches this cluster from this process.
    pub fn connectstring(&self) -> String {
        self.mgm
            .as_ref()
            .map(MgmServer::connectstring)
            .unwrap_or_default()
    }

    /// The number of the in-process network the cluster runs on.
    pub fn net_number(&self) -> u64 {
        self.net.number()
    }

    /// The directory holding every node's files, when the cluster chose it (given, or
    /// scratch); None when each node has its configured DataDir.
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The management server's cluster log lines kept in memory, oldest first.
    pub fn log_lines(&self) -> Vec<String> {
        self.mgm
            .as_ref()
            .map(MgmServer::log_lines)
            .unwrap_or_default()
    }

    /// An API node of this cluster (as `Ndb_cluster_connection::connect`), waiting at
    /// most `timeout` for the data nodes.
    pub fn connect(&self, timeout: Duration) -> Result<RemoteCluster> {
        RemoteCluster::connect(&self.connectstring(), timeout)
    }

    /// A management client (as `rndb_mgm -c`).
    pub fn mgm_client(&self, timeout: Duration) -> Result<MgmConnection> {
        let cs = ConnectString::parse(&self.connectstring())?;
        MgmConnection::open(&cs, Role::Api, timeout)
    }

    /// The data node `id` while its process runs in this cluster.
    pub fn node(&self, id: NodeId) -> Option<&DataNodeProcess> {
        self.nodes.get(&id)
    }

    /// Ids of the data nodes whose process runs.
    pub fn running_nodes(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| !n.has_ended())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Waits until the processes of `ids` have ended (a node the management server
    /// shows gone may still be leaving its loop), at most `timeout`; whether they have.
    pub fn wait_ended(&self, ids: &[NodeId], timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let running = self.running_nodes();
            if !ids.iter().any(|id| running.contains(id)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Ids of the configuration's data nodes whose process does not run: never
    /// started, killed, or ended (STOP, ALL STOP, a forced shutdown).
    pub fn stopped_nodes(&self) -> Vec<NodeId> {
        let running = self.running_nodes();
        self.config
            .data_nodes
            .iter()
            .map(|n| n.node_id)
            .filter(|id| !running.contains(id))
            .collect()
    }

    /// Prints the nodes' log lines on standard output too (for nodes started from now).
    pub fn set_echo(&mut self, echo: bool) {
        self.echo = echo;
    }

    /// Starts data node `id`'s process (a node restart from its own files, or from its
    /// peers with `initial`); does not wait for it to be started.
    pub fn start_node(&mut self, id: NodeId, initial: bool) -> Result<()> {
        if self.config.data_node(id).is_none() {
            return Err(codes::bad_argument(format!("node {id} is not a data node")));
        }
        match self.nodes.get(&id) {
            Some(n) if !n.has_ended() => {
                return Err(codes::bad_argument(format!("node {id} is running already")));
            }
            // A process that ended (STOP): its thread is joined, a new one starts.
            Some(_) => {
                if let Some(ended) = self.nodes.remove(&id) {
                    ended.wait();
                }
            }
            None => {}
        }
        let node = DataNodeProcess::start(DataNodeOptions {
            connectstring: ConnectString::parse(&self.connectstring())?,
            node_id: Some(id),
            initial,
            nostart: false,
            connect_timeout: Some(CONNECT_TIMEOUT),
            echo: self.echo,
        })?;
        self.nodes.insert(id, node);
        Ok(())
    }

    /// Ends data node `id` at once, telling nobody (as kill -9 of its rndbd).
    pub fn kill_node(&mut self, id: NodeId) -> Result<()> {
        let node = self
            .nodes
            .remove(&id)
            .ok_or_else(|| codes::bad_argument(format!("node {id} is not running")))?;
        node.kill();
        Ok(())
    }

    /// Waits until each of `ids` is started, at most `timeout`; a node that stopped
    /// meanwhile is an error with its reason.
    pub fn wait_started(&self, ids: &[NodeId], timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut waiting = Vec::new();
            for id in ids {
                let st = self
                    .nodes
                    .get(id)
                    .map(DataNodeProcess::status)
                    .ok_or_else(|| codes::bad_argument(format!("node {id} is not running")))?;
                match st.state {
                    NodeState::Started => {}
                    NodeState::Stopped => {
                        return Err(codes::internal(format!(
                            "node {id} stopped while starting: {}",
                            st.stop_reason.unwrap_or_default()
                        )));
                    }
                    _ => waiting.push(*id),
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(codes::internal(format!(
                    "data node(s) {waiting:?} not started within {} s",
                    timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the cluster gracefully (SHUTDOWN: each node saves a last global
    /// checkpoint, then ends); returns the nodes' exit statuses.
    pub fn shutdown(mut self) -> Result<BTreeMap<NodeId, i32>> {
        // After a client's SHUTDOWN the management server answers nothing more.
        let already = self.mgm.as_ref().is_some_and(|m| m.shutdown_requested());
        let asked = if already {
            Ok(String::new())
        } else {
            self.mgm_client(Duration::from_secs(5))
                .and_then(|mut c| c.command("SHUTDOWN"))
        };
        let nodes = std::mem::take(&mut self.nodes);
        let codes: BTreeMap<NodeId, i32> = nodes
            .into_iter()
            .map(|(id, n)| (id, if asked.is_ok() { n.wait() } else { n.stop() }))
            .collect();
        if let Some(m) = self.mgm.take() {
            m.stop();
        }
        self.remove_scratch_dir();
        asked.map(|_| codes)
    }
}

impl LocalCluster {
    fn remove_scratch_dir(&mut self) {
        if let Some(d) = self.scratch_dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        // Nodes first: a node outliving its management server would keep dialing it.
        for (_, n) in std::mem::take(&mut self.nodes) {
            n.kill();
        }
        if let Some(m) = self.mgm.take() {
            m.stop();
        }
        self.remove_scratch_dir();
    }
}
