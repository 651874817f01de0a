//! The management server (`rndb_mgmd`, NDB's ndb_mgmd): serves the configuration to
//! data nodes, keeps the cluster log, arbitrates, and answers management clients.
//!
//! One thread runs the server's loop over its TCP transport: data nodes connect with
//! their node ids and report their state (`NodeStatus`) and log lines (`Event`); a
//! configuration fetch or a shell connects as an anonymous peer (`Hello` with id 0)
//! and gets one answer per request. The node table and the cluster log are shared
//! with the owner of the [`MgmServer`] handle (tests, the binary), read under their
//! locks.
//!
//! Node ids: a `ConfigReq` for a given id gets it unless a data node with that id is
//! connected or the id was handed out within the last [`RESERVE_MS`]; id 0 gets the
//! first free `[ndbd]` whose HostName matches the asker's host (NDB's allocation).
//!
//! A STOP or RESTART shows the node as stopping at once: a status it sent before the
//! command arrived does not show it started again (a client that waits for it to be
//! started again after `3 RESTART` waits for the restart). SHUTDOWN is answered once
//! the data nodes have ended (`shutdown`); from then on the loop keeps reading its
//! inbox, without acting on it (a client's command is answered with that reason), until
//! the owner stops the server: a reader whose inbox is gone closes its connection,
//! which would lose a STOP still queued behind it.
//!
//! Lock order: `nodes` and the cluster log's lock are leaves (never held together).

mod api_nodes;
mod commands;
mod shutdown;

use super::Outbox;
use super::arbit::Arbitrator;
use crate::config::ClusterConfig;
use crate::error::{Result, codes};
use crate::mgm::log::{ClusterLog, Severity};
use crate::mgm::parse::{Command, Target};
use crate::transport::net::Net;
use crate::transport::tcp::{ANONYMOUS_PEER_BASE, TcpTransport};
use crate::transport::{
    INBOX_CAPACITY, Incoming, Message, NodeId, NodeState, Role, Transport, View,
};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a node id handed out by a configuration fetch stays reserved for the node
/// that fetched it (until it connects with that id).
pub const RESERVE_MS: u64 = 10_000;
/// NDB's error for a node id that cannot be given (MGM API's NDB_MGM_ALLOCID_ERROR).
pub const ALLOC_ID_ERROR: u32 = 1709;

/// What the management server knows of a data node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeEntry {
    pub node_group: u32,
    pub host: String,
    pub connected: bool,
    /// From its last `NodeStatus` (None: no report since it connected).
    pub state: Option<NodeState>,
    pub start_phase: u8,
    pub listen: String,
    pub view: View,
    reserved_until_ms: u64,
    /// A STOP or RESTART was sent and the node has not yet reported a state other
    /// than started: a `NodeStatus` it sent before the command is stale and shows
    /// the node as stopping instead (see [`send_going_down`]).
    going_down: bool,
    /// The token of the process the id was last given to (`ConfigReq`).
    token: u64,
}

struct Shared {
    log: ClusterLog,
    nodes: Mutex<BTreeMap<NodeId, NodeEntry>>,
    shutdown: AtomicBool,
    /// A ROLLING RESTART is running (one at a time: two could each take a node of the
    /// same group down, each seeing the other node started).
    rolling: AtomicBool,
}

/// A running management server (see the module notes).
pub struct MgmServer {
    pub node_id: NodeId,
    addr: SocketAddr,
    /// The in-process network the server is on (None: TCP).
    local_net: Option<u64>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    transport: TcpTransport,
}

/// Where a management server listens: `bind` when given (tests: port 0), else its
/// `[ndb_mgmd]` HostName and PortNumber.
pub fn mgm_listen_addr(cfg: &ClusterConfig, node_id: NodeId) -> Result<SocketAddr> {
    let m = cfg
        .mgm_nodes
        .iter()
        .find(|m| m.node_id == node_id)
        .ok_or_else(|| codes::bad_config(format!("no [ndb_mgmd] with NodeId={node_id}")))?;
    resolve(&m.host_name, m.port_number)
}

pub(crate) fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let host = if host.is_empty() { "localhost" } else { host };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| codes::bad_config(format!("host {host}: {e}")))?
        .find(|a| a.is_ipv4())
        .ok_or_else(|| codes::bad_config(format!("host {host} has no IPv4 address")))
}

impl MgmServer {
    /// Starts management server `node_id` of `cfg`, listening on `bind` or on its
    /// configured HostName:PortNumber; the cluster log goes to `log_dir` when given.
    pub fn start(
        cfg: ClusterConfig,
        node_id: NodeId,
        bind: Option<SocketAddr>,
        log_dir: Option<&std::path::Path>,
    ) -> Result<MgmServer> {
        MgmServer::start_on(Net::Tcp, cfg, node_id, bind, log_dir)
    }

    /// [`MgmServer::start`] on `net` (an in-process network: `cluster::local`).
    pub fn start_on(
        net: Net,
        cfg: ClusterConfig,
        node_id: NodeId,
        bind: Option<SocketAddr>,
        log_dir: Option<&std::path::Path>,
    ) -> Result<MgmServer> {
        let local_net = net.local_number();
        let addr = match bind {
            Some(a) => a,
            None => mgm_listen_addr(&cfg, node_id)?,
        };
        let nodes: BTreeMap<NodeId, NodeEntry> = cfg
            .data_nodes
            .iter()
            .map(|n| {
                (
                    n.node_id,
                    NodeEntry {
                        node_group: n.node_group,
                        host: n.host_name.clone(),
                        ..NodeEntry::default()
                    },
                )
            })
            .collect();
        let shared = Arc::new(Shared {
            log: ClusterLog::new(log_dir, node_id),
            nodes: Mutex::new(nodes),
            shutdown: AtomicBool::new(false),
            rolling: AtomicBool::new(false),
        });
        let (tx, rx) = sync_channel(INBOX_CAPACITY);
        let transport = TcpTransport::on(net, node_id, Role::Management, tx);
        transport.set_send_limits(super::ndbd::send_limits_of(&cfg, node_id));
        let addr = transport.listen(addr).map_err(|e| {
            codes::bad_config(format!(
                "management server {node_id}: cannot listen on {addr}: {e}"
            ))
        })?;
        shared.log.event(
            Severity::Info,
            node_id,
            &format!("Management server started, listening on {addr}"),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = Server {
            me: node_id,
            config_text: cfg.to_ini(),
            cfg,
            shared: shared.clone(),
            transport: transport.clone(),
            arbitrator: Arbitrator::new(node_id),
            started: Instant::now(),
            restart: RestartPlanning::default(),
            commands: commands::NodeCommands::default(),
            api: api_nodes::ApiSessions::default(),
            shutting_down: None,
        };
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rndb-mgmd-{node_id}"))
            .spawn(move || {
                while !stop2.load(Ordering::Acquire) {
                    match rx.recv_timeout(Duration::from_millis(50)) {
                        // After SHUTDOWN only drained (see the module notes); a
                        // client's command gets the reason at once rather than no
                        // answer.
                        Ok(Incoming::Message {
                            from,
                            msg: Message::MgmCommand { .. },
                        }) if server.shared.shutdown.load(Ordering::Acquire) => {
                            server.transport.send(
                                from,
                                &Message::MgmReply {
                                    ok: false,
                                    text: "The management server has shut down (SHUTDOWN)".into(),
                                },
                            );
                        }
                        Ok(_) if server.shared.shutdown.load(Ordering::Acquire) => {}
                        Ok(ev) => server.on_incoming(ev),
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                    server.expire_node_commands();
                    server.shutdown_progress();
                }
            })
            .map_err(|e| codes::internal(format!("management server thread: {e}")))?;
        Ok(MgmServer {
            node_id,
            addr,
            local_net,
            shared,
            stop,
            thread: Some(thread),
            transport,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connectstring that reaches the server from this process (`local=N,` first
    /// when it is on an in-process network).
    pub fn connectstring(&self) -> String {
        match self.local_net {
            Some(n) => format!("local={n},{}", self.addr),
            None => self.addr.to_string(),
        }
    }

    /// The data nodes as the server knows them.
    pub fn nodes(&self) -> BTreeMap<NodeId, NodeEntry> {
        self.shared.nodes.lock().clone()
    }

    /// The cluster log lines kept in memory, oldest first.
    pub fn log_lines(&self) -> Vec<String> {
        self.shared.log.lines(None)
    }

    /// Whether a client asked for SHUTDOWN.
    pub fn shutdown_requested(&self) -> bool {
        self.shared.shutdown.load(Ordering::Acquire)
    }

    /// Runs until a client's SHUTDOWN (or `stop`), then closes the transport.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.transport.close();
    }

    /// Stops the server now.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.transport.close();
    }
}

impl Drop for MgmServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.transport.close();
    }
}

/// The server's loop state (owned by its thread).
struct Server {
    me: NodeId,
    cfg: ClusterConfig,
    config_text: String,
    shared: Arc<Shared>,
    transport: TcpTransport,
    arbitrator: Arbitrator,
    started: Instant,
    /// A system restart being decided (`cluster::start_plan`).
    restart: RestartPlanning,
    /// Commands waiting for the data nodes' answers (`commands`).
    commands: commands::NodeCommands,
    /// API nodes connected, and single user mode (`api_nodes`).
    api: api_nodes::ApiSessions,
    /// A SHUTDOWN waiting for the data nodes to end (`shutdown`).
    shutting_down: Option<shutdown::ShutdownWait>,
}

/// The data nodes' start reports while no data node is started, and the decision once
/// made (kept until a data node is started, so every node asking hears the same).
#[derive(Default)]
struct RestartPlanning {
    reports: BTreeMap<NodeId, super::start_plan::LocalState>,
    first_report: Option<Instant>,
    decided: Option<super::start_plan::StartAction>,
    /// The "impossible" alert was logged (once per planning).
    impossible_logged: bool,
    /// The new lineage of a fresh start or system restart, drawn with the decision.
    lineage: u64,
}

impl Server {
    /// How data node `node` starts (`cluster::start_plan`): a node restart while a
    /// data node is started; else the system restart's decision, once every data node
    /// reported or StartPartialTimeout passed with every node group represented.
    fn start_plan(
        &mut self,
        node: NodeId,
        state: super::start_plan::LocalState,
    ) -> super::start_plan::StartAction {
        use super::start_plan::{StartAction, decide};
        let running = self
            .shared
            .nodes
            .lock()
            .iter()
            .any(|(&n, e)| n != node && e.connected && e.state == Some(NodeState::Started));
        if running {
            return StartAction::NodeRestart;
        }
        if let Some(d) = &self.restart.decided {
            return d.clone();
        }
        self.restart.reports.insert(node, state);
        let first = *self.restart.first_report.get_or_insert_with(Instant::now);
        let all: Vec<NodeId> = self.cfg.data_nodes.iter().map(|d| d.node_id).collect();
        let everyone = all.iter().all(|n| self.restart.reports.contains_key(n));
        let partial_ms = self
            .cfg
            .data_nodes
            .first()
            .and_then(|d| d.get_u64("StartPartialTimeout"))
            .unwrap_or(30_000);
        if !everyone && (partial_ms == 0 || first.elapsed().as_millis() < u128::from(partial_ms)) {
            return StartAction::Wait;
        }
        let groups = self.cfg.node_groups();
        match decide(&self.restart.reports, &groups) {
            Ok(Some(d)) => {
                let text = match &d {
                    StartAction::SystemRestart { restore_gci, ready } => format!(
                        "System restart: restoring GCI {restore_gci} from node(s) {}; {}",
                        ready
                            .iter()
                            .map(|n| n.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        if ready.len() == all.len() {
                            "every data node holds it".to_string()
                        } else {
                            "the other data nodes copy from them".to_string()
                        }
                    ),
                    StartAction::Fresh => {
                        "Initial start: no data node holds a saved global checkpoint".into()
                    }
                    _ => String::new(),
                };
                self.log(Severity::Info, self.me, &text);
                self.restart.lineage = super::start_plan::new_lineage();
                self.restart.decided = Some(d.clone());
                d
            }
            Ok(None) => {
                if everyone && !self.restart.impossible_logged {
                    self.restart.impossible_logged = true;
                    // Every node reported and some node group holds no complete copy
                    // of any checkpoint the others hold: nothing consistent to restore.
                    let text = "System restart impossible: no global checkpoint is held completely by a node of every node group; start the data nodes with --initial";
                    self.log(Severity::Alert, self.me, text);
                }
                StartAction::Wait
            }
            Err(e) => {
                self.log(Severity::Alert, self.me, &e.message);
                StartAction::Wait
            }
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn log(&self, severity: Severity, node: NodeId, text: &str) {
        self.shared.log.event(severity, node, text);
    }

    fn on_incoming(&mut self, ev: Incoming) {
        match ev {
            Incoming::Connected { peer, role } => {
                if role == Role::DataNode && peer < ANONYMOUS_PEER_BASE {
                    let known = {
                        let mut nodes = self.shared.nodes.lock();
                        match nodes.get_mut(&peer) {
                            Some(e) => {
                                e.connected = true;
                                e.state = None;
                                e.going_down = false;
                                // Taken by the connection now; free again when it ends.
                                e.reserved_until_ms = 0;
                                true
                            }
                            None => false,
                        }
                    };
                    if known {
                        self.log(Severity::Info, self.me, &format!("Node {peer} Connected"));
                        self.send_addresses(Some(peer));
                    } else {
                        self.transport.disconnect(peer);
                    }
                }
            }
            Incoming::Disconnected { peer, .. } => {
                if peer < ANONYMOUS_PEER_BASE {
                    let was = {
                        let mut nodes = self.shared.nodes.lock();
                        nodes.get_mut(&peer).map(|e| {
                            let was = e.connected;
                            e.connected = false;
                            e.state = None;
                            e.going_down = false;
                            e.view = View::default();
                            was
                        })
                    };
                    if was == Some(true) {
                        self.log(
                            Severity::Alert,
                            self.me,
                            &format!("Node {peer} Disconnected"),
                        );
                        self.on_node_gone(peer);
                    }
                } else {
                    self.on_api_conn_gone(peer);
                }
            }
            Incoming::Message { from, msg } => self.on_message(from, msg),
        }
    }

    fn on_message(&mut self, from: NodeId, msg: Message) {
        match msg {
            Message::ApiRegReq { node_id, host } => self.on_api_reg(from, node_id, &host),
            Message::ConfigReq {
                node_id,
                host,
                token,
            } => {
                let reply = match self.allocate(node_id, &host, token) {
                    Ok(id) => {
                        self.log(
                            Severity::Info,
                            self.me,
                            &format!("Node {id}: configuration sent (node id allocated to a data node at {})", if host.is_empty() { "an unnamed host" } else { &host }),
                        );
                        Message::ConfigConf {
                            node_id: id,
                            config_text: self.config_text.clone(),
                        }
                    }
                    Err(message) => Message::ConfigRef {
                        code: ALLOC_ID_ERROR,
                        message,
                    },
                };
                self.transport.send(from, &reply);
            }
            Message::NodeStatus {
                state,
                start_phase,
                node_group,
                listen,
                view,
            } => {
                let (changed_addr, changed_state) = {
                    let mut nodes = self.shared.nodes.lock();
                    let Some(e) = nodes.get_mut(&from) else {
                        return;
                    };
                    let changed_addr = e.listen != listen;
                    // Sent before the STOP or RESTART reached it (see the module notes).
                    let state = if e.going_down && state == NodeState::Started {
                        NodeState::Stopping
                    } else {
                        e.going_down = false;
                        state
                    };
                    let changed_state = e.state != Some(state);
                    e.state = Some(state);
                    e.start_phase = start_phase;
                    e.node_group = node_group;
                    e.listen = listen;
                    e.view = view;
                    (changed_addr, changed_state)
                };
                if changed_addr {
                    self.send_addresses(None);
                }
                // Every state change: a node that connects (its state unknown until
                // this report) and one that restarted inside its process (it kept its
                // connection) hear the mode.
                if changed_state && self.api.single_user.is_some() {
                    self.send_single_user(from);
                }
                if changed_state && state == NodeState::Started {
                    self.log(
                        Severity::Info,
                        from,
                        &format!("Started (version {})", crate::mgm::VERSION),
                    );
                    // The cluster runs: a node starting from now on copies.
                    self.restart = RestartPlanning::default();
                }
            }
            Message::StartPlanReq {
                node_id,
                saved,
                complete_from,
            } => {
                let action = self.start_plan(
                    node_id,
                    super::start_plan::LocalState {
                        saved,
                        complete_from,
                        lineage: 0,
                    },
                );
                let lineage = match action {
                    super::start_plan::StartAction::Fresh
                    | super::start_plan::StartAction::SystemRestart { .. } => self.restart.lineage,
                    _ => 0,
                };
                let (action, restore_gci, ready) = action.to_wire();
                self.transport.send(
                    from,
                    &Message::StartPlanConf {
                        action,
                        restore_gci,
                        ready,
                        lineage,
                    },
                );
            }
            Message::Event { severity, text } => {
                let sev = Severity::ALL
                    .get(severity as usize)
                    .copied()
                    .unwrap_or(Severity::Info);
                self.log(sev, from, &text);
            }
            Message::ArbitReq { .. } => {
                let mut out = Outbox::default();
                self.arbitrator.on_message(from, msg, &mut out);
                for (to, m) in out.sends {
                    self.transport.send(to, &m);
                }
                for e in out.events {
                    if let super::Event::Log { severity, text, .. } = e {
                        self.log(severity, self.me, &text);
                    }
                }
            }
            Message::Data(crate::transport::data::DataMsg::ClusterReq) => {
                let nodes: Vec<(NodeId, String)> = self
                    .shared
                    .nodes
                    .lock()
                    .iter()
                    .filter(|(_, e)| e.connected && !e.listen.is_empty())
                    .map(|(&n, e)| (n, e.listen.clone()))
                    .collect();
                self.transport.send(
                    from,
                    &Message::Data(crate::transport::data::DataMsg::ClusterConf {
                        config_text: self.config_text.clone(),
                        nodes,
                    }),
                );
            }
            Message::MgmCommand { text } => {
                let reply = match self.command(from, &text) {
                    Ok(Some(t)) => Message::MgmReply { ok: true, text: t },
                    // Answered when the data nodes have (`commands`).
                    Ok(None) => return,
                    Err(e) => Message::MgmReply {
                        ok: false,
                        text: e.message,
                    },
                };
                self.transport.send(from, &reply);
            }
            Message::NodeCommandReply { req, ok, text } => self.on_node_reply(from, req, ok, text),
            _ => {}
        }
    }

    /// Node id allocation for a configuration fetch (see the module notes).
    fn allocate(
        &self,
        wanted: NodeId,
        host: &str,
        token: u64,
    ) -> std::result::Result<NodeId, String> {
        let now = self.now_ms();
        let mut nodes = self.shared.nodes.lock();
        let free = |e: &NodeEntry| !e.connected && e.reserved_until_ms <= now;
        let id = if wanted != 0 {
            match nodes.get(&wanted) {
                None => {
                    return Err(format!(
                        "Could not alloc node id at {}: no [ndbd] with NodeId={wanted} in the configuration",
                        self.transport.node_id()
                    ));
                }
                // The process that holds the id asks again (a restart inside it).
                Some(e) if token != 0 && e.token == token => wanted,
                Some(e) if !free(e) => {
                    return Err(format!(
                        "Could not alloc node id {wanted}: Id {wanted} already allocated by another node."
                    ));
                }
                Some(_) => wanted,
            }
        } else {
            let host_ok = |e: &NodeEntry| host_matches(&e.host, host);
            match nodes.iter().find(|(_, e)| free(e) && host_ok(e)) {
                Some((&id, _)) => id,
                None => return Err("No free node id found for ndbd(NDB).".to_string()),
            }
        };
        if let Some(e) = nodes.get_mut(&id) {
            // Held until the node connects; a node connected already (a restart inside
            // its process asks again) holds it by its connection, and a reservation
            // would outlive that connection, refusing the next process for a while.
            if !e.connected {
                e.reserved_until_ms = now + RESERVE_MS;
            }
            e.token = token;
        }
        Ok(id)
    }

    /// Tells data nodes (one, or every connected one) where each data node listens.
    fn send_addresses(&self, only: Option<NodeId>) {
        let (list, targets): (Vec<(NodeId, String)>, Vec<NodeId>) = {
            let nodes = self.shared.nodes.lock();
            (
                nodes
                    .iter()
                    .filter(|(_, e)| e.connected && !e.listen.is_empty())
                    .map(|(&n, e)| (n, e.listen.clone()))
                    .collect(),
                nodes
                    .iter()
                    .filter(|(_, e)| e.connected)
                    .map(|(&n, _)| n)
                    .collect(),
            )
        };
        let msg = Message::NodeAddresses { nodes: list };
        for n in targets {
            if only.is_none_or(|o| o == n) {
                self.transport.send(n, &msg);
            }
        }
    }

    /// Runs a client's command; None when the answer follows once the data nodes have
    /// answered (`commands`).
    fn command(&mut self, from: NodeId, text: &str) -> Result<Option<String>> {
        let Some(cmd) = crate::mgm::parse::parse(text)? else {
            return Ok(Some(String::new()));
        };
        let nodes = self.shared.nodes.lock().clone();
        let data_targets = |t: Target| data_targets(&self.cfg, &nodes, t);
        match cmd {
            Command::Report(t, what) => self.report(from, data_targets(t)?, what, &nodes),
            Command::Dump(t, codes) => self.dump(from, data_targets(t)?, &codes, &nodes),
            Command::Set { name, value } => self.set_param(from, &name, &value, &nodes),
            Command::ClusterLog(c) => Ok(Some(crate::mgm::clusterlog(&self.shared.log, &c))),
            Command::RollingRestart => self.rolling_restart_start(from, &nodes).map(|()| None),
            Command::EnterSingleUser(id) => self.enter_single_user(from, id, &nodes),
            Command::ExitSingleUser => self.exit_single_user(from, &nodes),
            Command::Shutdown => self.shutdown_start(from, &nodes).map(|()| None),
            other => self.command_now(other, nodes).map(Some),
        }
    }

    /// ROLLING RESTART: one data node at a time, on a thread of its own; `from` gets
    /// the answer when every node has started again (or the restart stopped), a line
    /// per node as the embedded cluster prints them. A client waits up to
    /// `client::LONG_COMMAND_REPLY_TIMEOUT` for it.
    fn rolling_restart_start(
        &mut self,
        from: NodeId,
        nodes: &BTreeMap<NodeId, NodeEntry>,
    ) -> Result<()> {
        if self.api.single_user.is_some() {
            return Err(crate::mgm::mgm_error(
                "Cannot restart nodes: single user mode",
            ));
        }
        let ids = connected_ids(nodes);
        if !nodes
            .values()
            .any(|e| e.connected && e.state == Some(NodeState::Started))
        {
            return Err(crate::mgm::mgm_error(
                "Every data node is stopped (ALL STOP or ALL RESTART -n); start them with ALL START",
            ));
        }
        if self.shared.rolling.swap(true, Ordering::AcqRel) {
            return Err(crate::mgm::mgm_error(
                "A rolling restart is running already; its client gets the answer when it is done",
            ));
        }
        let (shared, transport, me) = (self.shared.clone(), self.transport.clone(), self.me);
        let spawned = std::thread::Builder::new()
            .name("rndb-mgmd-rolling".into())
            .spawn(move || {
                let (ok, text) = match rolling_restart(&shared, &transport, me, &ids) {
                    Ok(lines) => (true, lines.join("\n")),
                    Err(text) => (false, text),
                };
                shared.rolling.store(false, Ordering::Release);
                transport.send(from, &Message::MgmReply { ok, text });
            });
        if let Err(e) = spawned {
            self.shared.rolling.store(false, Ordering::Release);
            return Err(codes::internal(format!("rolling restart thread: {e}")));
        }
        Ok(())
    }

    /// ALL RESTART: on a thread of its own, waits until every node of `ids` is back
    /// and waiting for START (its new life, `RESTART CLUSTER -n`), then starts them all
    /// at once, as ALL START does: a system restart. Gives up after
    /// [`ALL_RESTART_TIMEOUT`] (the nodes then wait for ALL START; the log says so).
    fn start_when_all_wait(&self, ids: Vec<NodeId>) -> Result<()> {
        let (shared, transport, me) = (self.shared.clone(), self.transport.clone(), self.me);
        std::thread::Builder::new()
            .name("rndb-mgmd-all-restart".into())
            .spawn(move || {
                let deadline = Instant::now() + ALL_RESTART_TIMEOUT;
                loop {
                    let all_wait = {
                        let nodes = shared.nodes.lock();
                        ids.iter().all(|id| {
                            nodes.get(id).is_some_and(|e| {
                                e.connected && e.state == Some(NodeState::NotStarted)
                            })
                        })
                    };
                    if all_wait {
                        break;
                    }
                    if Instant::now() >= deadline || shared.shutdown.load(Ordering::Acquire) {
                        shared.log.event(
                            Severity::Alert,
                            me,
                            &format!(
                                "ALL RESTART: not every data node was back within {} s; \
                                 those that are wait for ALL START",
                                ALL_RESTART_TIMEOUT.as_secs()
                            ),
                        );
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                for &id in &ids {
                    transport.send(
                        id,
                        &Message::MgmCommand {
                            text: "START".into(),
                        },
                    );
                }
            })
            .map(|_| ())
            .map_err(|e| codes::internal(format!("all-restart thread: {e}")))
    }

    /// The commands the server answers from what it knows.
    fn command_now(&mut self, cmd: Command, nodes: BTreeMap<NodeId, NodeEntry>) -> Result<String> {
        let data_targets = |t: Target| data_targets(&self.cfg, &nodes, t);
        match cmd {
            Command::Show => Ok(self.show(&nodes)),
            Command::Status(Target::Node(id)) if id == self.me => {
                Ok(format!("Node {id}: connected ({})", crate::mgm::VERSION))
            }
            // An API node: connected while a client holds its id (as ndb_mgm shows it).
            Command::Status(Target::Node(id))
                if self.cfg.api_nodes.iter().any(|a| a.node_id == id) =>
            {
                Ok(if self.api.connected().contains_key(&id) {
                    format!("Node {id}: connected ({})", crate::mgm::VERSION)
                } else {
                    format!("Node {id}: not connected")
                })
            }
            Command::Status(t) => Ok(data_targets(t)?
                .into_iter()
                .map(|id| status_line(id, &nodes[&id], self.api.single_user.is_some()))
                .collect::<Vec<_>>()
                .join("\n")),
            Command::Start(t) => {
                let ids = data_targets(t)?;
                if let Some(id) = ids.iter().find(|id| !nodes[*id].connected) {
                    return Err(crate::mgm::mgm_error(format!(
                        "Start failed: node {id} is not connected"
                    )));
                }
                let waiting: Vec<NodeId> = ids
                    .iter()
                    .copied()
                    .filter(|id| nodes[id].state == Some(NodeState::NotStarted))
                    .collect();
                if waiting.is_empty() {
                    return Err(crate::mgm::mgm_error(format!(
                        "Start failed: data node(s) {} already started",
                        super::qmgr::join(&ids)
                    )));
                }
                let mut out = Vec::new();
                for &id in &waiting {
                    self.transport.send(
                        id,
                        &Message::MgmCommand {
                            text: "START".into(),
                        },
                    );
                    if t != Target::All {
                        out.push(format!("Database node {id} is being started."));
                    }
                }
                if t == Target::All {
                    out.push("NDB Cluster is being started.".into());
                }
                Ok(out.join("\n"))
            }
            Command::Stop(t, _) => {
                let ids = data_targets(t)?;
                if let Target::Node(id) = t {
                    refuse_last_of_group(&nodes, id, "Shutdown")?;
                } else if self.api.single_user.is_some() {
                    return Err(crate::mgm::mgm_error("Cannot stop nodes: single user mode"));
                }
                if let Target::Node(id) = t
                    && !nodes[&id].connected
                {
                    return Err(crate::mgm::mgm_error(format!("Node {id}: already stopped")));
                }
                let mut out = Vec::new();
                // ALL STOP stops the whole cluster: the nodes do not take each other
                // for failed.
                let verb = if t == Target::All {
                    out.push("Executing STOP on all nodes.".to_string());
                    "STOP CLUSTER"
                } else {
                    "STOP"
                };
                for id in &ids {
                    if nodes[id].connected {
                        send_going_down(&self.shared, &self.transport, *id, verb);
                        if t != Target::All {
                            out.push(format!("Node {id}: Node shutdown initiated"));
                        }
                    }
                }
                if t == Target::All {
                    out.push("NDB Cluster has shutdown.".into());
                } else {
                    out.push(format!("Node {} has shutdown.", super::qmgr::join(&ids)));
                }
                Ok(out.join("\n"))
            }
            Command::Restart(t, flags) => {
                let ids = data_targets(t)?;
                // ALL RESTART is a system restart: every node stops as for ALL STOP
                // (the peers leaving are no failures) and waits; once all wait, they
                // are started together (`start_when_all_wait`), unless -n.
                let verb = match (t == Target::All, flags.nostart, flags.initial) {
                    (false, false, false) => "RESTART",
                    (false, true, false) => "RESTART -n",
                    (false, false, true) => "RESTART -i",
                    (false, true, true) => "RESTART -n -i",
                    (true, _, false) => "RESTART CLUSTER -n",
                    (true, _, true) => "RESTART CLUSTER -n -i",
                };
                let mut out = Vec::new();
                for id in &ids {
                    if !nodes[id].connected {
                        return Err(crate::mgm::mgm_error(format!(
                            "Node {id}: restart failed: node not connected"
                        )));
                    }
                }
                if let Target::Node(id) = t {
                    refuse_last_of_group(&nodes, id, "Restart")?;
                } else if self.api.single_user.is_some() {
                    return Err(crate::mgm::mgm_error(
                        "Cannot restart nodes: single user mode",
                    ));
                }
                if t == Target::All {
                    // NDB's words for a restart of every data node (a system restart).
                    out.push("Executing RESTART on all nodes.".to_string());
                    out.push(
                        "Starting shutdown. This may take a while. Please wait...".to_string(),
                    );
                }
                for id in &ids {
                    send_going_down(&self.shared, &self.transport, *id, verb);
                    if t != Target::All {
                        out.push(format!("Node {id}: Node shutdown initiated"));
                    }
                }
                if t == Target::All {
                    if !flags.nostart {
                        self.start_when_all_wait(ids.clone())?;
                    }
                    out.push(if flags.nostart {
                        "All DB nodes are being restarted; they wait for ALL START.".to_string()
                    } else {
                        "All DB nodes are being restarted.".to_string()
                    });
                } else {
                    out.push(format!(
                        "Node {} is being restarted",
                        super::qmgr::join(&ids)
                    ));
                }
                Ok(out.join("\n"))
            }
            Command::Help(topic) => Ok(match topic.as_deref().and_then(crate::mgm::help::topic) {
                Some(t) => t.to_string(),
                None => REMOTE_HELP.to_string(),
            }),
            Command::Backup(ref text) | Command::NodeGroup(ref text) => {
                Err(crate::mgm::mgm_error(crate::mgm::not_in_rndb(&cmd, text)))
            }
            other => Err(crate::mgm::mgm_error(format!(
                "{}: not available against a management server (SHOW, STATUS, START, STOP, RESTART, ROLLING RESTART, REPORT, DUMP 1000, CLUSTERLOG, SET, ENTER/EXIT SINGLE USER MODE and SHUTDOWN are; tables and rows go through an API connection to the data nodes)",
                command_name(&other)
            ))),
        }
    }

    fn show(&self, nodes: &BTreeMap<NodeId, NodeEntry>) -> String {
        let version = crate::mgm::VERSION;
        let mut out = vec![
            "Cluster Configuration".to_string(),
            "---------------------".to_string(),
            format!("[ndbd(NDB)]\t{} node(s)", nodes.len()),
        ];
        let president = nodes
            .values()
            .find(|e| e.connected && e.view.id > 0)
            .and_then(|e| e.view.president());
        for (id, e) in nodes {
            if !e.connected || e.state.is_none() {
                out.push(format!(
                    "id={id} (not connected, accepting connect from {})",
                    if e.host.is_empty() {
                        "any host"
                    } else {
                        &e.host
                    }
                ));
                continue;
            }
            let host = e.listen.rsplit_once(':').map_or("", |h| h.0);
            let state = match e.state {
                Some(NodeState::Started) if self.api.single_user.is_some() => {
                    ", single user mode".into()
                }
                Some(NodeState::Started) => String::new(),
                Some(NodeState::NotStarted) => ", not started".into(),
                Some(NodeState::Starting) => ", starting".into(),
                Some(NodeState::Stopping) => ", stopping".into(),
                Some(NodeState::Stopped) | None => ", stopped".into(),
            };
            let master = if president == Some(*id) { ", *" } else { "" };
            out.push(format!(
                "id={id}\t@{host}  ({version}{state}, Nodegroup: {}{master})",
                e.node_group
            ));
        }
        out.push(format!(
            "\n[ndb_mgmd(MGM)]\t{} node(s)",
            self.cfg.mgm_nodes.len().max(1)
        ));
        for m in &self.cfg.mgm_nodes {
            if m.node_id == self.me {
                out.push(format!(
                    "id={}\t@{}  ({version})",
                    m.node_id,
                    self.transport_host()
                ));
            } else {
                out.push(format!(
                    "id={} (not connected, accepting connect from {})",
                    m.node_id, m.host_name
                ));
            }
        }
        out.push(format!(
            "\n[mysqld(API)]\t{} node(s)",
            self.cfg.api_nodes.len()
        ));
        let connected = self.api.connected();
        for a in &self.cfg.api_nodes {
            if let Some(host) = connected.get(&a.node_id) {
                out.push(format!("id={}\t@{host}  ({version})", a.node_id));
                continue;
            }
            out.push(format!(
                "id={} (not connected, accepting connect from {})",
                a.node_id,
                if a.host_name.is_empty() {
                    "any host"
                } else {
                    &a.host_name
                }
            ));
        }
        out.join("\n")
    }

    /// This server's host as SHOW prints it: its HostName's address (NDB's form,
    /// `@127.0.0.1` for localhost), else the name as configured.
    fn transport_host(&self) -> String {
        let name = self
            .cfg
            .mgm_nodes
            .iter()
            .find(|m| m.node_id == self.me)
            .map(|m| m.host_name.clone())
            .unwrap_or_default();
        resolve(&name, 0).map_or(name, |a| a.ip().to_string())
    }
}

/// The data nodes `t` names; when it names another node, the embedded cluster's error
/// (`mgm::node_error`: naming the nodes there are).
fn data_targets(
    cfg: &ClusterConfig,
    nodes: &BTreeMap<NodeId, NodeEntry>,
    t: Target,
) -> Result<Vec<NodeId>> {
    match t {
        Target::All => Ok(nodes.keys().copied().collect()),
        Target::Node(id) if nodes.contains_key(&id) => Ok(vec![id]),
        Target::Node(id) => {
            let data: Vec<u32> = nodes.keys().copied().collect();
            let mgm: Vec<u32> = cfg.mgm_nodes.iter().map(|m| m.node_id).collect();
            let api: Vec<u32> = cfg.api_nodes.iter().map(|a| a.node_id).collect();
            Err(crate::mgm::node_error(id, &data, &mgm, &api))
        }
    }
}

fn is_local(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1" | "")
}

/// Whether a slot's HostName admits a process at `asker` (NDB's allocation: an empty
/// HostName or an unnamed asker matches anything; loopback names match each other).
fn host_matches(slot: &str, asker: &str) -> bool {
    asker.is_empty()
        || slot.is_empty()
        || slot.eq_ignore_ascii_case(asker)
        || (is_local(asker) && is_local(slot))
}

/// `Node 2: started (rndb-0.1.0)` as ndb_mgm prints it.
fn status_line(id: NodeId, e: &NodeEntry, single_user: bool) -> String {
    let version = crate::mgm::VERSION;
    if !e.connected {
        return format!("Node {id}: not connected");
    }
    match e.state {
        Some(NodeState::Started) if single_user => {
            format!("Node {id}: single user mode ({version})")
        }
        Some(NodeState::Started) => format!("Node {id}: started ({version})"),
        Some(NodeState::Starting) => format!(
            "Node {id}: starting (Last completed phase {}) ({version})",
            e.start_phase
        ),
        Some(NodeState::NotStarted) => format!("Node {id}: not started ({version})"),
        Some(NodeState::Stopping) => format!("Node {id}: stopping ({version})"),
        Some(NodeState::Stopped) => format!("Node {id}: stopped ({version})"),
        None => format!("Node {id}: connected, no status yet"),
    }
}

/// The name of a command the management server does not run (the others are
/// answered in `command` and `command_now`).
fn command_name(c: &Command) -> &'static str {
    match c {
        Command::PurgeStaleSessions => "PURGE STALE SESSIONS",
        _ => "this command",
    }
}

/// The data nodes that are connected, in id order.
fn connected_ids(nodes: &BTreeMap<NodeId, NodeEntry>) -> Vec<NodeId> {
    nodes
        .iter()
        .filter(|(_, e)| e.connected)
        .map(|(&n, _)| n)
        .collect()
}

const REMOTE_HELP: &str =
    "---------------------------------------------------------------------------
 rndb -- Management Client -- Help (connected to rndb_mgmd)
---------------------------------------------------------------------------
HELP                                   Print help text
SHOW                                   Print information about cluster
<id> START                             Start data node (started with -n)
<id> STOP [-a] [-f]                    Stop data node
<id> RESTART [-n] [-i]                 Restart data node (-n: wait for START, -i: initial)
<id> STATUS                            Print status
<id> REPORT MemoryUsage|DiskPageBuffer|Fragmentation|EventLog
                                       Report from the data node(s)
<id> DUMP 1000                         Memory usage, also to the cluster log
CLUSTERLOG ON|OFF|TOGGLE [<severity>]  Enable/disable cluster log severities
CLUSTERLOG INFO                        Print cluster log information
SET <Parameter>=<value>                Change a data node parameter
ROLLING RESTART                        Restart every data node, one at a time
ENTER SINGLE USER MODE <api node id>   Only that API node may use the cluster
EXIT SINGLE USER MODE                  Every API node may use the cluster again
SHUTDOWN                               Shutdown all data and management nodes
<SQL statement>;                       DDL on every data node; SELECT/SHOW on one

<id> = ALL | Any database node id";

/// NDB's refusal to stop the last started node of a node group (its rows would be
/// gone: the data nodes of a distributed cluster keep them in memory).
/// Sends STOP or RESTART (`verb`) to data node `id` and shows it as stopping until it
/// reports the command's effect (see the module notes).
fn send_going_down(shared: &Shared, transport: &TcpTransport, id: NodeId, verb: &str) {
    let sent = transport.send(id, &Message::MgmCommand { text: verb.into() });
    if let Some(e) = shared.nodes.lock().get_mut(&id)
        && sent
        && e.connected
    {
        e.going_down = true;
        if e.state == Some(NodeState::Started) {
            e.state = Some(NodeState::Stopping);
        }
    }
}

fn refuse_last_of_group(nodes: &BTreeMap<NodeId, NodeEntry>, id: NodeId, what: &str) -> Result<()> {
    let Some(me) = nodes.get(&id) else {
        return Ok(());
    };
    let other_started = nodes.iter().any(|(&n, e)| {
        n != id
            && e.connected
            && e.node_group == me.node_group
            && e.state == Some(NodeState::Started)
    });
    if other_started || me.state != Some(NodeState::Started) {
        return Ok(());
    }
    Err(crate::mgm::mgm_error(format!(
        "{what} of node {id} failed: Node shutdown would cause system crash (node {id} holds the last started replica of node group {}); use SHUTDOWN to stop the cluster",
        me.node_group
    )))
}

/// How long ALL RESTART waits for every data node to be back before starting them.
const ALL_RESTART_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a rolling restart waits for one node to be started again.
const ROLLING_NODE_TIMEOUT: Duration = Duration::from_secs(600);

/// ROLLING RESTART against a management server: each node in turn is restarted once
/// another node of its group is started, and the next waits until it is started again
/// (its copy done) in a newer view.
/// Restarts `ids` one at a time, each once another node of its group is started; the
/// lines for the client (a line per node), or why it stopped.
fn rolling_restart(
    shared: &Shared,
    transport: &TcpTransport,
    me: NodeId,
    ids: &[NodeId],
) -> std::result::Result<Vec<String>, String> {
    let log = |sev: Severity, text: &str| shared.log.event(sev, me, text);
    let t0 = Instant::now();
    let mut lines = vec!["Rolling restart of the data nodes, one at a time:".to_string()];
    for &id in ids {
        let deadline = Instant::now() + ROLLING_NODE_TIMEOUT;
        // Another node of its group must be started first.
        loop {
            let ok = {
                let nodes = shared.nodes.lock();
                refuse_last_of_group(&nodes, id, "Restart").is_ok()
            };
            if ok {
                break;
            }
            if Instant::now() >= deadline {
                let why = format!(
                    "Rolling restart stopped: node {id} is the last started node of its group"
                );
                log(Severity::Alert, &why);
                return Err(why);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let before = shared.nodes.lock().get(&id).map_or(0, |e| e.view.id);
        let t = Instant::now();
        log(
            Severity::Info,
            &format!("Rolling restart: restarting node {id}"),
        );
        send_going_down(shared, transport, id, "RESTART");
        loop {
            let done = shared.nodes.lock().get(&id).is_some_and(|e| {
                e.connected && e.state == Some(NodeState::Started) && e.view.id > before
            });
            if done {
                break;
            }
            if Instant::now() >= deadline || shared.shutdown.load(Ordering::Acquire) {
                let why = format!("Rolling restart stopped: node {id} did not start again");
                log(Severity::Alert, &why);
                return Err(why);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        log(
            Severity::Info,
            &format!(
                "Rolling restart: node {id} started again in {:.1} s",
                t.elapsed().as_secs_f64()
            ),
        );
        lines.push(format!(
            "Node {id}: restarted in {} ms",
            t.elapsed().as_millis()
        ));
    }
    log(
        Severity::Info,
        &format!(
            "Rolling restart completed in {:.1} s",
            t0.elapsed().as_secs_f64()
        ),
    );
    lines.push("Rolling restart completed.".to_string());
    Ok(lines)
}
