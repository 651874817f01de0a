//! The data node process (`rndbd`, NDB's ndbd/ndbmtd): fetches its configuration
//! from the management server, opens its transporter, and runs QMGR — joining the
//! cluster, heartbeats, failure detection, arbitration — reporting its state and its
//! log lines to the management server.
//!
//! One thread runs the node's loop: messages from the TCP transport and a tick every
//! [`TICK`] drive QMGR with the process's monotonic clock; what QMGR decides goes out
//! through the transport, its log lines to the management server (and to standard
//! output when `echo`). Commands from the management server: `START` (a node started
//! with `--nostart`), `STOP` (graceful: the node leaves and the process ends),
//! `RESTART [-n]` (NDB's angel restart inside the process: a new incarnation joins
//! again, or waits for START with `-n`).
//!
//! Data: the node's [`DataPath`] (its local engine, TC and LQH) gets every data
//! message and every installed view; see `cluster::datapath`.
//!
//! API nodes (clients) get every view the node installs (`ViewRep`), sent before the
//! data path learns it — so before anything commits in it: a client that sees a
//! commit made without some node has already heard that the node is out, and stops
//! sending to it (a node declared dead, resumed from SIGSTOP, could otherwise answer
//! a read from replicas that missed the commits of the others). A new API connection
//! gets the current view at once.
//!
//! When the loop ends, the transport closes at once: connections must not outlive
//! the loop that would answer them (the dialers would otherwise reconnect to peers
//! with nobody reading).

use super::client::MgmConnection;
use super::client::{ConnectString, fetch_config_as};
use super::datapath::{DataPath, DataPathStart};
use super::mgmd::resolve;
use super::qmgr::{MembershipConfig, Phase, Qmgr};
use super::{Event, Outbox};
use crate::config::ClusterConfig;
use crate::error::{Result, codes};
use crate::mgm::log::Severity;
use crate::transport::tcp::TcpTransport;
use crate::transport::{
    INBOX_CAPACITY, Incoming, Message, NodeId, NodeState, Role, Transport, View,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the node's loop ticks QMGR.
pub const TICK: Duration = Duration::from_millis(10);
/// How long a graceful stop waits for its last global checkpoint.
pub const STOP_FLUSH_MAX: Duration = Duration::from_secs(3);
/// Pause between asks while the management server waits for the other data nodes of
/// a system restart.
pub const START_PLAN_RETRY: Duration = Duration::from_millis(200);
/// Pause between attempts to reach the management server at start.
pub const CONNECT_RETRY: Duration = Duration::from_millis(500);

/// Each peer's send-buffer limits for node `me`, from the configuration's `[tcp]`
/// sections (`transport::send_buffer`).
pub(crate) fn send_limits_of(
    cfg: &ClusterConfig,
    me: NodeId,
) -> impl Fn(NodeId) -> crate::transport::send_buffer::SendLimits + Send + Sync + 'static {
    let (mut own, default) = (BTreeMap::new(), cfg.send_buffer_of(me, 0));
    for t in &cfg.tcp_connections {
        for (a, b) in [(t.node_id1, t.node_id2), (t.node_id2, t.node_id1)] {
            if a == me {
                own.insert(b, cfg.send_buffer_of(a, b));
            }
        }
    }
    move |peer| {
        let (buffer, overload) = own.get(&peer).copied().unwrap_or(default);
        crate::transport::send_buffer::SendLimits::from_config(buffer, overload)
    }
}

/// How a data node process starts.
#[derive(Debug, Clone)]
pub struct DataNodeOptions {
    pub connectstring: ConnectString,
    /// `--ndb-nodeid` (else the connectstring's `nodeid=`, else any free slot).
    pub node_id: Option<NodeId>,
    /// `--initial`: the node's file system is removed first.
    pub initial: bool,
    /// `--nostart`: connect, then wait for START from the management server.
    pub nostart: bool,
    /// How long to keep trying to reach the management server (None: forever, as
    /// ndbd does).
    pub connect_timeout: Option<Duration>,
    /// Print log lines on standard output too.
    pub echo: bool,
}

/// What the node's owner can see of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    pub state: NodeState,
    pub view: View,
    /// Why the node stopped, when it did.
    pub stop_reason: Option<String>,
}

/// A running data node (see the module notes).
pub struct DataNodeProcess {
    pub node_id: NodeId,
    pub config: ClusterConfig,
    stop: Arc<AtomicBool>,
    kill: Arc<AtomicBool>,
    status: Arc<Mutex<NodeStatus>>,
    thread: Option<JoinHandle<i32>>,
    transport: TcpTransport,
    /// The data path of the node's current life, once its thread has started one.
    data: Arc<Mutex<Option<Arc<DataPath>>>>,
}

/// Asks the management server how this node starts (`cluster::start_plan`) and
/// prepares its file system for it; returns the data path's start and a log line.
fn data_path_start(
    opts: &DataNodeOptions,
    node_id: NodeId,
    me: &crate::config::DataNodeConfig,
    begin: Instant,
    aborted: &dyn Fn() -> bool,
) -> Result<(DataPathStart, String)> {
    use super::start_plan::{NOT_COMPLETE, StartAction, local_state, write_complete_from};
    let fs = crate::disk::io::OsFileSystem;
    let diskless = me.get_bool("Diskless").unwrap_or(false);
    let fs_dir = me.data_dir.join(format!("ndb_{node_id}_fs"));
    let state = if diskless {
        super::start_plan::LocalState::default()
    } else {
        local_state(&fs, &fs_dir)?
    };
    let (action, lineage) = loop {
        let answer = MgmConnection::open(&opts.connectstring, Role::DataNode, CONNECT_RETRY * 4)
            .and_then(|mut c| {
                c.request(&Message::StartPlanReq {
                    node_id,
                    saved: state.saved.clone(),
                    complete_from: state.complete_from,
                })
            });
        match answer {
            Ok(Message::StartPlanConf {
                action,
                restore_gci,
                ready,
                lineage,
            }) => match StartAction::from_wire(action, restore_gci, ready)? {
                StartAction::Wait => {}
                a => break (a, lineage),
            },
            Ok(_) => {
                return Err(codes::internal(
                    "management server: unexpected reply to StartPlanReq",
                ));
            }
            Err(e) if opts.connect_timeout.is_some_and(|t| begin.elapsed() >= t) => return Err(e),
            Err(_) => {}
        }
        if aborted() {
            return Err(codes::internal("stopped while waiting for the start plan"));
        }
        if opts.connect_timeout.is_some_and(|t| begin.elapsed() >= t) {
            return Err(codes::request_timeout(
                "system restart: the other data nodes did not report in time",
            ));
        }
        std::thread::sleep(START_PLAN_RETRY);
    };
    let data_dir = (!diskless).then(|| me.data_dir.clone());
    let mut start = DataPathStart {
        data_dir,
        ..DataPathStart::default()
    };
    let copy = |start: &mut DataPathStart| -> Result<()> {
        // Until the copy ends, this node's checkpoints restore nothing.
        if start.data_dir.is_some() {
            write_complete_from(&fs, &fs_dir, NOT_COMPLETE, 0)?;
        }
        start.initial = true;
        Ok(())
    };
    let text = match action {
        StartAction::Fresh => {
            if start.data_dir.is_some() {
                write_complete_from(&fs, &fs_dir, 0, lineage)?;
            }
            start.initial = true;
            start.lineage = lineage;
            "Initial start of the cluster (no global checkpoint saved anywhere)".to_string()
        }
        StartAction::NodeRestart => match state.newest_restorable() {
            Some(g) if start.data_dir.is_some() && state.lineage != 0 => {
                start.restore_cap = Some(g);
                start.delta_since = Some(g);
                start.lineage = state.lineage;
                format!(
                    "Node restart: restoring GCI {g} from this node's checkpoints and redo, \
                     then copying from a peer the rows changed since"
                )
            }
            _ => {
                copy(&mut start)?;
                "Node restart: the cluster runs; copying every row from a peer".to_string()
            }
        },
        StartAction::SystemRestart { restore_gci, ready } => {
            start.lineage = lineage;
            // A checkpoint of this node's own at or below the restore point, of a known
            // history: a prefix of what the restore point's holders restore.
            let own = state
                .saved
                .iter()
                .copied()
                .filter(|&g| g <= restore_gci && state.restores(g))
                .max()
                .filter(|_| state.lineage != 0 && start.data_dir.is_some());
            let text = if ready.contains(&node_id) {
                // The files now belong to the history this restart begins.
                if start.data_dir.is_some() {
                    write_complete_from(&fs, &fs_dir, state.complete_from, lineage)?;
                }
                start.restore_cap = Some(restore_gci);
                if state.lineage != 0 {
                    start.prior_lineage = Some((state.lineage, restore_gci));
                }
                format!(
                    "System restart: restoring GCI {restore_gci} from this node's checkpoints and redo"
                )
            } else if let Some(g) = own {
                start.restore_cap = Some(g);
                start.delta_since = Some(g);
                // Offered as of the history the files hold; the copy's source tells.
                start.lineage = state.lineage;
                format!(
                    "System restart to GCI {restore_gci}: this node holds GCI {g}; restoring it, \
                     then copying the rows changed since from node(s) {}",
                    ready
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                copy(&mut start)?;
                format!(
                    "System restart to GCI {restore_gci}: this node does not hold it completely; copying from node(s) {}",
                    ready
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            start.first_view_ready = Some(ready);
            text
        }
        StartAction::Wait => {
            return Err(codes::internal("start plan: the loop ended waiting"));
        }
    };
    Ok((start, text))
}

/// `--initial` (and `RESTART -i`): the node's file system goes first, and with it every
/// disk-data file an earlier run created, wherever CREATE TABLESPACE / LOGFILE GROUP
/// put it (NDB leaves those behind); the cluster log line naming them, if any.
fn remove_file_system(
    me: &crate::config::DataNodeConfig,
    node_id: NodeId,
) -> Result<Option<String>> {
    let fs = me.data_dir.join(format!("ndb_{node_id}_fs"));
    let mut removed = Vec::new();
    if fs.exists() {
        removed =
            crate::disk::node::NodeDisk::remove_created_files(&crate::disk::io::OsFileSystem, &fs)?;
        std::fs::remove_dir_all(&fs).map_err(|e| {
            codes::file_read_error(format!("--initial: removing {}: {e}", fs.display()))
        })?;
    }
    Ok(crate::mgm::initial_removed_event(&removed))
}

/// The configuration from the management server, again (a restart inside the process
/// takes the values a `SET` changed since, as a new process would).
fn refetch_config(
    opts: &DataNodeOptions,
    node_id: NodeId,
    token: u64,
) -> Result<(ClusterConfig, crate::config::DataNodeConfig)> {
    let (_, text) = fetch_config_as(
        &opts.connectstring,
        Some(node_id),
        "",
        opts.connect_timeout.unwrap_or(Duration::from_secs(30)),
        token,
    )?;
    parse_config(&text, node_id)
}

/// The configuration text the management server sent, and node `node_id`'s section.
fn parse_config(
    text: &str,
    node_id: NodeId,
) -> Result<(ClusterConfig, crate::config::DataNodeConfig)> {
    let cfg = ClusterConfig::parse(text, "<from the management server>")
        .map_err(|e| codes::bad_config(format!("configuration from the management server: {e}")))?;
    let me = cfg
        .data_node(node_id)
        .ok_or_else(|| codes::bad_config(format!("node {node_id} is not a data node")))?
        .clone();
    Ok((cfg, me))
}

/// How the node's loop ended.
enum LoopEnd {
    /// The process ends with this status.
    Exit(i32),
    /// `RESTART [-n] [-i]` from the management server: the node left the cluster; a
    /// new life of it starts in this process (NDB's angel restarting ndbd).
    Restart { initial: bool, nostart: bool },
}

impl DataNodeProcess {
    /// Fetches the configuration (retrying every [`CONNECT_RETRY`] within the
    /// options' timeout), opens the transporter and starts the node's loop.
    pub fn start(opts: DataNodeOptions) -> Result<DataNodeProcess> {
        let begin = Instant::now();
        // Says that a later configuration fetch (a restart inside the process) is this
        // process's, while its connection holds the node id.
        let token = super::start_plan::random_u64() | 1;
        let (node_id, text) = loop {
            match fetch_config_as(
                &opts.connectstring,
                opts.node_id,
                "localhost",
                Duration::from_secs(5),
                token,
            ) {
                Ok(r) => break r,
                Err(e) if e.code == super::mgmd::ALLOC_ID_ERROR => return Err(e),
                Err(e) => {
                    if opts.connect_timeout.is_some_and(|t| begin.elapsed() >= t) {
                        return Err(e);
                    }
                    std::thread::sleep(CONNECT_RETRY);
                }
            }
        };
        let (cfg, me) = parse_config(&text, node_id)?;
        let mut removed_note = if opts.initial {
            remove_file_system(&me, node_id)?
        } else {
            None
        };
        let mgm = cfg
            .mgm_nodes
            .first()
            .ok_or_else(|| codes::bad_config("the configuration has no [ndb_mgmd]"))?;
        let mgm_id = mgm.node_id;
        let (mgm_host, mgm_port) = opts.connectstring.hosts[0].clone();
        let mgm_addr = resolve(&mgm_host, mgm_port)?;
        let port = me.get_u64("ServerPort").unwrap_or(0) as u16;
        let listen_on = resolve(&me.host_name, port)?;
        let (tx, rx) = sync_channel(INBOX_CAPACITY);
        let transport = TcpTransport::on(opts.connectstring.net()?, node_id, Role::DataNode, tx);
        transport.set_send_limits(send_limits_of(&cfg, node_id));
        let listen = transport.listen(listen_on).map_err(|e| {
            codes::bad_config(format!("node {node_id}: cannot listen on {listen_on}: {e}"))
        })?;
        transport
            .dial(mgm_id, mgm_addr)
            .map_err(|e| codes::internal(format!("dialer thread: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let kill = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(NodeStatus {
            state: NodeState::NotStarted,
            view: View::default(),
            stop_reason: None,
        }));
        let data_cell: Arc<Mutex<Option<Arc<DataPath>>>> = Arc::default();
        let (stop2, kill2, transport2) = (stop.clone(), kill.clone(), transport.clone());
        let (cfg2, status2, cell2) = (cfg.clone(), status.clone(), data_cell.clone());
        // The node's thread first learns how to start (a system restart waits for the
        // other data nodes: `cluster::start_plan`), then starts the data path and runs
        // the loop; the caller gets the process at once.
        let thread = std::thread::Builder::new()
            .name(format!("rndbd-{node_id}"))
            .spawn(move || {
                let aborted = || stop2.load(Ordering::Acquire) || kill2.load(Ordering::Acquire);
                let (mut opts, mut cfg, mut me, mut begin) = (opts, cfg2, me, begin);
                // Kept over the lives of the node: the clock its incarnations count from.
                let t0 = Instant::now();
                let mut incarnation = 0;
                // Connection events seen while a restart emptied the inbox.
                let mut carry: Vec<Incoming> = Vec::new();
                let opts_echo = opts.echo;
                let fail = |text: String| {
                    if opts_echo {
                        eprintln!("{text}");
                    }
                    // Asked to stop (a STOP or SHUTDOWN during a restart, whose start
                    // then fails as the management server goes): a graceful end.
                    let asked = stop2.load(Ordering::Acquire) && !kill2.load(Ordering::Acquire);
                    let mut st = status2.lock();
                    st.state = NodeState::Stopped;
                    st.stop_reason = (!asked).then_some(text);
                    drop(st);
                    transport2.shut();
                    transport2.close();
                    if asked { 0 } else { 1 }
                };
                let code = loop {
                    let started = data_path_start(&opts, node_id, &me, begin, &aborted).and_then(
                        |(start, text)| {
                            let data = DataPath::start_in(
                                &cfg,
                                node_id,
                                mgm_id,
                                Arc::new(transport2.clone()),
                                start,
                            )?;
                            Ok((data, text))
                        },
                    );
                    let (data, start_text) = match started {
                        Ok(x) => x,
                        Err(e) => {
                            drop(rx);
                            return fail(format!("Node {node_id}: start failed: {e}"));
                        }
                    };
                    {
                        let t = transport2.clone();
                        data.engine.inner().transporters.set(move || {
                            crate::ndbinfo::transporter_rows(node_id, &t.transporters())
                        });
                    }
                    *cell2.lock() = Some(data.clone());
                    let mut node = NodeLoop {
                        data,
                        me: node_id,
                        node_group: me.node_group,
                        mgm_id,
                        listen,
                        qmgr: None,
                        mcfg: MembershipConfig::from_cluster(&cfg),
                        transport: transport2.clone(),
                        t0,
                        next_status_ms: 0,
                        sent_state: None,
                        dialed: BTreeMap::new(),
                        status: status2.clone(),
                        echo: opts.echo,
                        incarnation,
                        started_incarnation: 0,
                        api_peers: BTreeSet::new(),
                        restart: None,
                    };
                    if incarnation == 0 {
                        node.log(
                            Severity::Info,
                            &format!(
                                "Angel connected to the management server at {mgm_host}:{mgm_port}; node {node_id} listening on {listen}"
                            ),
                        );
                    }
                    node.log(Severity::Info, &start_text);
                    if let Some(note) = removed_note.take() {
                        node.log(Severity::Info, &note);
                    }
                    if !opts.nostart {
                        node.begin();
                    }
                    for ev in carry.drain(..) {
                        node.on_incoming(ev, &stop2);
                    }
                    let end = node.run(&rx, &stop2, &kill2);
                    incarnation = node.incarnation;
                    let (initial, nostart) = match end {
                        LoopEnd::Restart { initial, nostart } if !aborted() => (initial, nostart),
                        LoopEnd::Restart { .. } => {
                            node.data.stop();
                            break 0;
                        }
                        LoopEnd::Exit(code) => break code,
                    };
                    // The old life's engine closes its files before the new one opens
                    // them; its rows go with it (the new life restores them).
                    node.data.stop();
                    node.report_starting();
                    drop(node);
                    // Its connections end with it: peers and clients see the life end
                    // as a process's, and what they sent to it never reaches the next
                    // life (a prepare of the old life would hold a row lock forever).
                    transport2.disconnect_all_but(mgm_id);
                    carry.clear();
                    while let Ok(ev) = rx.try_recv() {
                        match ev {
                            // A STOP (or SHUTDOWN) sent while the old life ended stops
                            // the process: it must not be lost with the old life's
                            // messages.
                            Incoming::Message {
                                from,
                                msg: Message::MgmCommand { ref text },
                            } if from == mgm_id && (text == "STOP" || text == "STOP CLUSTER") => {
                                stop2.store(true, Ordering::Release);
                            }
                            Incoming::Message { .. } => {}
                            ev => carry.push(ev),
                        }
                    }
                    if aborted() {
                        break if kill2.load(Ordering::Acquire) { 137 } else { 0 };
                    }
                    match refetch_config(&opts, node_id, token) {
                        Ok((c, m)) => (cfg, me) = (c, m),
                        Err(e) => {
                            drop(rx);
                            return fail(format!("Node {node_id}: restart failed: {e}"));
                        }
                    }
                    if initial {
                        match remove_file_system(&me, node_id) {
                            Ok(note) => removed_note = note,
                            Err(e) => {
                                drop(rx);
                                return fail(format!("Node {node_id}: restart failed: {e}"));
                            }
                        }
                    }
                    opts.initial = initial;
                    opts.nostart = nostart;
                    begin = Instant::now();
                };
                // No new connection from now (a dialer would reconnect at once to
                // a peer whose reader just ended), then the inbox: a reader waiting
                // for room in it ends, and the close can join it (module notes).
                transport2.shut();
                drop(rx);
                transport2.close();
                code
            })
            .map_err(|e| codes::internal(format!("node thread: {e}")))?;
        Ok(DataNodeProcess {
            node_id,
            config: cfg,
            stop,
            kill,
            status,
            thread: Some(thread),
            transport,
            data: data_cell,
        })
    }

    pub fn status(&self) -> NodeStatus {
        self.status.lock().clone()
    }

    /// Whether the node's process has ended (STOP, SHUTDOWN, a forced shutdown).
    pub fn has_ended(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// The node's data path (its local engine holds the node's replicas), once the
    /// node has started it: waits for that (a system restart waits for the other data
    /// nodes), None if the node ended first.
    pub fn data(&self) -> Option<Arc<DataPath>> {
        loop {
            if let Some(d) = self.data.lock().clone() {
                return Some(d);
            }
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                return self.data.lock().clone();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the node to end (STOP, SHUTDOWN, or a forced shutdown); its exit
    /// status: 0 after a graceful stop, 1 after a forced one.
    pub fn wait(mut self) -> i32 {
        let code = self.thread.take().map_or(0, |t| t.join().unwrap_or(2));
        self.transport.close();
        if let Some(d) = self.data.lock().take() {
            d.stop();
        }
        code
    }

    /// Stops the node gracefully (as STOP from the management server).
    pub fn stop(self) -> i32 {
        self.stop.store(true, Ordering::Release);
        self.wait()
    }

    /// Ends the node at once, saying nothing to anybody (a crash, for tests).
    pub fn kill(mut self) {
        self.kill.store(true, Ordering::Release);
        self.transport.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for DataNodeProcess {
    fn drop(&mut self) {
        self.kill.store(true, Ordering::Release);
        self.transport.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(d) = self.data.lock().take() {
            d.stop();
        }
    }
}

/// The node's loop state (owned by its thread).
struct NodeLoop {
    data: Arc<DataPath>,
    me: NodeId,
    node_group: u32,
    mgm_id: NodeId,
    listen: SocketAddr,
    qmgr: Option<Qmgr>,
    mcfg: MembershipConfig,
    transport: TcpTransport,
    t0: Instant,
    next_status_ms: u64,
    /// The state the management server was told last (a change is told at once).
    sent_state: Option<NodeState>,
    dialed: BTreeMap<NodeId, String>,
    status: Arc<Mutex<NodeStatus>>,
    echo: bool,
    incarnation: u64,
    /// The incarnation that has been reported started (see `state`).
    started_incarnation: u64,
    /// API nodes connected now (they get every installed view).
    api_peers: BTreeSet<NodeId>,
    /// `RESTART` asked for (initial, nostart): the node leaves as for STOP, then a new
    /// life begins (`LoopEnd::Restart`).
    restart: Option<(bool, bool)>,
}

impl NodeLoop {
    fn now_ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    fn log(&self, severity: Severity, text: &str) {
        if self.echo {
            println!(
                "{} [ndbd] {:<8} -- Node {}: {text}",
                crate::mgm::log::local_timestamp(),
                severity.name(),
                self.me
            );
        }
        self.transport.send(
            self.mgm_id,
            &Message::Event {
                severity: severity as u8,
                text: text.to_string(),
            },
        );
    }

    /// Starts (or starts again) the node's membership: a new incarnation of QMGR.
    fn begin(&mut self) {
        self.incarnation += 1;
        let now = self.now_ms();
        self.qmgr = Some(Qmgr::new(
            self.mcfg.clone(),
            self.me,
            self.t0.elapsed().as_micros() as u64 + self.incarnation,
            super::start_plan::random_u64(),
            now,
        ));
        self.log(
            Severity::Info,
            &format!("Start initiated (version {})", crate::mgm::VERSION),
        );
        self.next_status_ms = 0;
    }

    fn state(&mut self) -> NodeState {
        match self.qmgr.as_ref().map(|q| q.phase()) {
            None => NodeState::NotStarted,
            Some(Phase::Starting) => NodeState::Starting,
            // A member whose replicas are still being copied is starting (NDB's
            // copy runs in start phase 5: "Last completed phase 4").
            Some(Phase::Member) if !self.data.is_ready() => NodeState::Starting,
            // Up to date, and serving once it holds its read leases: from then on it
            // is started (a lease that lapses later makes it refuse reads for a while
            // with 4035, it does not make it a starting node again).
            Some(Phase::Member)
                if self.started_incarnation != self.incarnation
                    && self.data.check_serving().is_err() =>
            {
                NodeState::Starting
            }
            Some(Phase::Member) => {
                self.started_incarnation = self.incarnation;
                NodeState::Started
            }
            Some(Phase::Stopped) => NodeState::Stopped,
        }
    }

    fn send_status(&mut self) {
        let view = self
            .qmgr
            .as_ref()
            .map(|q| q.view().clone())
            .unwrap_or_default();
        let state = self.state();
        self.sent_state = Some(state);
        {
            let mut s = self.status.lock();
            s.state = state;
            s.view = view.clone();
        }
        self.transport.send(
            self.mgm_id,
            &Message::NodeStatus {
                state,
                start_phase: match (state, self.qmgr.as_ref().map(|q| q.phase())) {
                    (NodeState::Starting, Some(Phase::Member)) => 4,
                    (NodeState::Starting, _) => 1,
                    _ => 0,
                },
                node_group: self.node_group,
                listen: self.listen.to_string(),
                view,
            },
        );
        self.next_status_ms = self.now_ms() + self.mcfg.heartbeat_interval_ms.clamp(50, 1000);
    }

    /// Sends what QMGR decided; Some(exit status) when it stopped the node.
    fn flush(&mut self, out: Outbox) -> Option<i32> {
        // Log lines first: the management server then logs a decision before the
        // arbitration request it led to.
        let mut stopped = None;
        for e in out.events {
            match e {
                Event::Log { severity, text, .. } => self.log(severity, &text),
                Event::ViewInstalled(view) => {
                    self.next_status_ms = 0;
                    // The clients first: see the module notes.
                    self.report_view(&view);
                    self.data.on_view(&view);
                }
                Event::Shutdown { code, reason } => {
                    self.status.lock().stop_reason = Some(format!("error {code}: {reason}"));
                    stopped = Some(1);
                }
            }
        }
        for (to, m) in out.sends {
            self.transport.send(to, &m);
        }
        stopped
    }

    /// Sends `view` to every connected API node.
    fn report_view(&self, view: &View) {
        let m = Message::ViewRep { view: view.clone() };
        for &a in &self.api_peers {
            self.transport.send(a, &m);
        }
    }

    /// The management server sees the node starting again (start phase 1) while a
    /// restart inside the process restores its files.
    fn report_starting(&mut self) {
        self.status.lock().state = NodeState::Starting;
        self.sent_state = Some(NodeState::Starting);
        self.transport.send(
            self.mgm_id,
            &Message::NodeStatus {
                state: NodeState::Starting,
                start_phase: 1,
                node_group: self.node_group,
                listen: self.listen.to_string(),
                view: View::default(),
            },
        );
    }

    /// Runs the node's loop until it ends: the process's end, or a restart.
    fn run(
        &mut self,
        rx: &std::sync::mpsc::Receiver<Incoming>,
        stop: &AtomicBool,
        kill: &AtomicBool,
    ) -> LoopEnd {
        let code = self.run_life(rx, stop, kill);
        match self.restart {
            Some((initial, nostart)) if code == 0 => LoopEnd::Restart { initial, nostart },
            _ => LoopEnd::Exit(code),
        }
    }

    fn run_life(
        &mut self,
        rx: &std::sync::mpsc::Receiver<Incoming>,
        stop: &AtomicBool,
        kill: &AtomicBool,
    ) -> i32 {
        let mut next_tick = Instant::now();
        // A graceful stop first has the checkpoint current then saved on every node
        // (so that a shutdown of the whole cluster keeps every commit), up to a bound.
        let mut flush: Option<(u32, Instant)> = None;
        let mut flush_members = 0;
        loop {
            if kill.load(Ordering::Acquire) {
                return 137;
            }
            if stop.load(Ordering::Acquire) || self.restart.is_some() {
                match flush {
                    None => match self.data.begin_flush() {
                        Some(want) => {
                            flush = Some((want, Instant::now() + STOP_FLUSH_MAX));
                            flush_members = self.data.live_count();
                        }
                        None => return self.leave("Node shutdown completed."),
                    },
                    Some((want, deadline)) => {
                        // A peer gone meanwhile (it stopped first) ends the wait: the
                        // checkpoint cannot include it any more. While the whole
                        // cluster stops the view keeps it, so the membership says.
                        let peer_gone = self.data.live_count() < flush_members
                            || self.qmgr.as_ref().is_some_and(|q| q.peer_departed());
                        if self.data.flushed(want) || peer_gone {
                            return self.leave("Node shutdown completed.");
                        }
                        if Instant::now() >= deadline {
                            return self.leave(&format!(
                                "Node shutdown completed (global checkpoint {want} not saved on every node within {} ms).",
                                STOP_FLUSH_MAX.as_millis()
                            ));
                        }
                    }
                }
            }
            let wait = next_tick.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(ev) => {
                    if let Some(code) = self.on_incoming(ev, stop) {
                        return code;
                    }
                    // A steady stream of messages must not starve the tick (heartbeats).
                    if Instant::now() < next_tick {
                        continue;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return 1,
            }
            next_tick = Instant::now() + TICK;
            let now = self.now_ms();
            let mut out = Outbox::default();
            if let Some(q) = &mut self.qmgr {
                q.on_tick(now, &mut out);
            }
            self.data.on_tick(now);
            // The engine's events (checkpoints, restart steps) go to the cluster log.
            for (severity, text) in self.data.engine.inner().mgm.log.take_forwarded() {
                self.log(severity, &text);
            }
            if let (Some(q), Some(why)) = (&mut self.qmgr, self.data.fatal_error()) {
                q.force_stop(&mut out, super::qmgr::ARBITRATION_LOST, why);
            }
            if let (Some(q), Some(why)) = (&mut self.qmgr, self.data.lost_node_group()) {
                q.force_stop(
                    &mut out,
                    super::qmgr::ARBITRATION_LOST,
                    format!("{why}: the cluster cannot go on without its rows"),
                );
            }
            if let Some(code) = self.flush(out) {
                if flush.is_some() {
                    // Stopping anyway: peers that stop first (a cluster shutdown)
                    // are no failure of this node.
                    return self.leave("Node shutdown completed.");
                }
                self.send_status();
                return code;
            }
            // A change of state (started, say) is told at once; the rest periodically.
            let state = self.state();
            if now >= self.next_status_ms || self.sent_state != Some(state) {
                self.send_status();
            }
        }
    }

    /// A graceful end: the state goes to the management server, then the transport
    /// closes.
    fn leave(&mut self, text: &str) -> i32 {
        if let Some(q) = &self.qmgr
            && q.phase() == Phase::Member
        {
            self.status.lock().state = NodeState::Stopping;
            // The peers take this node out as a planned departure (its connections
            // close after this goes out).
            let mut out = Outbox::default();
            q.announce_leaving(&mut out);
            let _ = self.flush(out);
        }
        self.log(Severity::Info, text);
        self.qmgr = None;
        self.status.lock().state = NodeState::Stopped;
        0
    }

    fn on_incoming(&mut self, ev: Incoming, stop: &AtomicBool) -> Option<i32> {
        match ev {
            Incoming::Connected { peer, .. } if peer == self.mgm_id => self.send_status(),
            Incoming::Connected {
                peer,
                role: Role::Api,
            } => {
                self.api_peers.insert(peer);
                if let Some(q) = &self.qmgr
                    && q.phase() == Phase::Member
                {
                    self.transport.send(
                        peer,
                        &Message::ViewRep {
                            view: q.view().clone(),
                        },
                    );
                }
            }
            Incoming::Disconnected { peer, .. } if self.api_peers.remove(&peer) => {
                self.data.api_disconnected(peer);
            }
            Incoming::Message { from, msg } if from == self.mgm_id => match msg {
                Message::NodeAddresses { nodes } => {
                    for (n, addr) in nodes {
                        // The lower node id dials.
                        if n > self.me
                            && self.dialed.get(&n) != Some(&addr)
                            && let Ok(a) = addr.parse::<SocketAddr>()
                        {
                            let _ = self.transport.dial(n, a);
                            self.dialed.insert(n, addr);
                        }
                    }
                }
                Message::MgmCommand { text } => match text.as_str() {
                    "START" if self.qmgr.is_none() => {
                        self.begin();
                        self.send_status();
                    }
                    "STOP" => stop.store(true, Ordering::Release),
                    // SHUTDOWN, ALL STOP: every node stops; the peers leaving are not
                    // failures.
                    "STOP CLUSTER" => {
                        if let Some(q) = &mut self.qmgr {
                            q.set_cluster_stopping();
                        }
                        stop.store(true, Ordering::Release);
                    }
                    t if t.starts_with("SINGLE USER ") => {
                        let _ = self.apply_single_user(&t["SINGLE USER ".len()..]);
                    }
                    t if t == "RESTART" || t.starts_with("RESTART ") => {
                        let flags: Vec<&str> = t.split_whitespace().skip(1).collect();
                        let (initial, nostart) = (flags.contains(&"-i"), flags.contains(&"-n"));
                        // ALL RESTART: every node restarts; the peers leaving are not
                        // failures, as for ALL STOP.
                        if flags.contains(&"CLUSTER")
                            && let Some(q) = &mut self.qmgr
                        {
                            q.set_cluster_stopping();
                        }
                        self.log(
                            Severity::Info,
                            if initial {
                                "Node restart initiated (initial: its file system is removed)"
                            } else {
                                "Node restart initiated"
                            },
                        );
                        // Leaves as for STOP (the last global checkpoint saved first),
                        // then a new life restores the node's files (`LoopEnd`).
                        self.restart.get_or_insert((initial, nostart));
                    }
                    _ => {}
                },
                Message::NodeCommand { req, text } => self.node_command(req, text),
                // Arbitration answers.
                other => return self.deliver_to_qmgr(from, other),
            },
            Incoming::Message {
                from,
                msg: Message::Data(d),
            } => self.data.on_message(from, d),
            Incoming::Message {
                from,
                msg: Message::DataInView { view_id, msg },
            } => self.data.on_message_in_view(from, view_id, msg),
            Incoming::Message { from, msg } => return self.deliver_to_qmgr(from, msg),
            Incoming::Disconnected { peer, reason } if peer != self.mgm_id => {
                self.data.on_disconnect(peer);
                let now = self.now_ms();
                let mut out = Outbox::default();
                if let Some(q) = &mut self.qmgr {
                    q.on_disconnect(now, peer, &reason, &mut out);
                }
                if let Some(code) = self.flush(out) {
                    self.send_status();
                    return Some(code);
                }
            }
            _ => {}
        }
        None
    }

    /// `SINGLE USER <api id>` / `SINGLE USER OFF` (`mode`: what follows `SINGLE USER `).
    fn apply_single_user(&self, mode: &str) -> std::result::Result<(), String> {
        match mode.trim() {
            "OFF" => self.data.set_single_user(None),
            id => match id.parse::<NodeId>() {
                Ok(api) => self.data.set_single_user(Some(api)),
                Err(_) => return Err(format!("bad single user mode: {mode}")),
            },
        }
        Ok(())
    }

    /// A management command for this node's own replicas (`REPORT ...`, `DUMP 1000`,
    /// `SET`: `mgm::run_on_data_node`), run on a thread of its own so that a long
    /// report never holds up heartbeats; the answer goes back to the management server.
    fn node_command(&self, req: u64, text: String) {
        // Single user mode is applied here, at once, and answered after: the management
        // server answers its client once every node has it in force.
        if let Some(mode) = text.strip_prefix("SINGLE USER ") {
            let (ok, why) = match self.apply_single_user(mode) {
                Ok(()) => (true, String::new()),
                Err(why) => (false, why),
            };
            self.transport.send(
                self.mgm_id,
                &Message::NodeCommandReply { req, ok, text: why },
            );
            return;
        }
        let (data, transport, mgm) = (self.data.clone(), self.transport.clone(), self.mgm_id);
        let reply = move |r: Result<String>| {
            let (ok, text) = match r {
                Ok(t) => (true, t),
                Err(e) => (false, e.message),
            };
            transport.send(mgm, &Message::NodeCommandReply { req, ok, text });
        };
        let reply2 = reply.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("rndbd-{}-mgm", self.me))
            .spawn(move || reply(crate::mgm::run_on_data_node(data.engine.inner(), &text)));
        if let Err(e) = spawned {
            reply2(Err(codes::internal(format!(
                "management command thread: {e}"
            ))));
        }
    }

    fn deliver_to_qmgr(&mut self, from: NodeId, msg: Message) -> Option<i32> {
        let now = self.now_ms();
        let mut out = Outbox::default();
        if let Some(q) = &mut self.qmgr {
            q.on_message(now, from, msg, &mut out);
        }
        if let Some(code) = self.flush(out) {
            self.send_status();
            return Some(code);
        }
        None
    }
}
