//! An API node's connection to a cluster of `rndbd` processes (NDB API's
//! `Ndb_cluster_connection` with a `host:port` connectstring).
//!
//! Connecting asks the management server for an API node id (`ApiRegReq`: the first
//! free `[api]`/`[mysqld]` slot, or the connectstring's `nodeid=`; the management
//! connection stays open while the client runs, and the id is free again when it
//! closes), for the configuration and where each data node listens, then opens a
//! transporter connection to every data node under that id (an anonymous API peer
//! when no slot was free: such a client is refused in single user mode). Requests carry an id; the connection's reader thread hands each answer to
//! its waiter (the transport's handler, [`TcpTransport::with_handler`]: no thread between
//! the socket and the waiting caller). Routing follows `cluster::layout`: a key's reads go to its partition's
//! primary (the first replica in layout order that is connected and not known to be
//! starting), a transaction to the primary of its first key's partition (NDB's
//! startTransaction hint); the data node's TC routes the rest.
//!
//! Errors: a data node lost under a request fails it with 4010 (prepare not known to
//! have committed) or 4012 (the transaction's commit may have happened: read back
//! before retrying); no answer within the connection's timeout is 4012 too. A node
//! answering 4035 (starting) is skipped for reads for [`NOT_READY_BACKOFF`].
//!
//! Views: every data node reports each view it installs (`ViewRep`, before anything
//! commits in it) and its current view when the client connects. The client keeps
//! the newest and sends nothing to a node it leaves out, even while its connection
//! stays up (a hung or SIGSTOPped node declared dead by the others): what was sent to
//! it fails at once (4010 for a read, 4012 for a transaction), and it is not in
//! [`RemoteCluster::connected_nodes`]. Since a data node reports a view before it
//! commits anything in it, and one connection's answers arrive in order, a read that
//! begins after a commit made without a node never goes to that node. When no member
//! of the newest view is connected any more (the whole cluster restarted, its view
//! ids from 1 again), the client forgets it.
//!
//! A data node that restarts listens on a new port: while some data node of the
//! configuration is not connected, a refresher thread asks the management server
//! where the data nodes listen every [`ADDRESS_REFRESH`] and dials the new addresses.
//!
//! Limits: at most [`MAX_PENDING`] requests outstanding per connection (more wait).

use super::client::{ConnectString, MgmConnection};
use super::datapath::{err_from, sql_err_from};
use super::layout::{partition_of_hash, replica_nodes};
use crate::config::ClusterConfig;
use crate::error::{NdbError, Result, codes};
use crate::schema::layout::key_hash;
use crate::schema::{TableDef, Value};
use crate::sql::{SessionVars, SqlResult};
use crate::transport::data::{DataMsg, KeyOp, OpFailure, OpResult, TcExec};
use crate::transport::tcp::TcpTransport;
use crate::transport::{Incoming, Message, NodeId, Role, Transport, View};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Requests outstanding at once, at most.
pub const MAX_PENDING: usize = 65_536;
/// How often missing data nodes are looked up at the management server.
pub const ADDRESS_REFRESH: Duration = Duration::from_millis(250);
/// How long a node that said "starting" is skipped for reads.
pub const NOT_READY_BACKOFF: Duration = Duration::from_millis(500);

struct Waiter {
    node: NodeId,
    /// A transaction (its loss is 4012, outcome unknown) rather than a read.
    commit: bool,
    tx: SyncSender<Result<DataMsg>>,
}

#[derive(Default)]
struct Shared {
    pending: Mutex<BTreeMap<u64, Waiter>>,
    room: Condvar,
    connected: Mutex<BTreeSet<NodeId>>,
    not_ready: Mutex<BTreeMap<NodeId, Instant>>,
    /// The newest view a data node reported (module notes; id 0: none).
    view: Mutex<View>,
    closed: AtomicBool,
}

impl Shared {
    /// Whether the newest known view leaves data node `n` out.
    fn excluded(&self, n: NodeId) -> bool {
        let v = self.view.lock();
        v.id > 0 && !v.contains(n)
    }

    /// Fails every request waiting on a node for which `lost` holds.
    fn fail_pending(&self, lost: impl Fn(NodeId) -> bool, why: &str) {
        let gone: Vec<(NodeId, Waiter)> = {
            let mut p = self.pending.lock();
            let ids: Vec<u64> = p
                .iter()
                .filter(|(_, w)| lost(w.node))
                .map(|(&k, _)| k)
                .collect();
            ids.iter()
                .filter_map(|k| p.remove(k))
                .map(|w| (w.node, w))
                .collect()
        };
        self.room.notify_all();
        for (node, w) in gone {
            let e = if w.commit {
                codes::request_timeout(format!(
                    "data node {node} was lost with the transaction ({why}); it may have committed"
                ))
            } else {
                codes::node_failure_abort().detail(format!("data node {node} was lost ({why})"))
            };
            let _ = w.tx.try_send(Err(e));
        }
    }

    /// A data node's view (module notes): a newer one replaces the known one, and
    /// what waits on a node it leaves out fails.
    fn on_view(&self, from: NodeId, view: View) {
        let id = view.id;
        {
            let mut v = self.view.lock();
            if id <= v.id {
                return;
            }
            *v = view.clone();
        }
        self.fail_pending(
            |n| !view.contains(n),
            &format!("left out of view {id} reported by node {from}"),
        );
    }

    /// After a lost connection: forgets the view when none of its members is
    /// connected any more.
    fn forget_view_if_gone(&self) {
        let connected = self.connected.lock().clone();
        let mut v = self.view.lock();
        if v.id > 0 && !v.node_ids().iter().any(|n| connected.contains(n)) {
            *v = View::default();
        }
    }
}

/// An answer to come.
pub struct Pending {
    rx: Receiver<Result<DataMsg>>,
    req: u64,
    deadline: Instant,
    shared: Arc<Shared>,
}

impl Pending {
    /// Waits for the answer (4012 after the connection's timeout).
    pub fn wait(self) -> Result<DataMsg> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(r) => r,
            Err(_) => {
                self.shared.pending.lock().remove(&self.req);
                self.shared.room.notify_one();
                Err(codes::request_timeout(format!(
                    "no answer to request {} within the timeout",
                    self.req
                )))
            }
        }
    }
}

/// Reads of one table in flight: one request per data node.
pub struct ReadPending {
    parts: Vec<(Vec<usize>, Pending)>,
    n: usize,
    ncols: usize,
}

impl ReadPending {
    /// The rows in key order (None: no row with that key).
    pub fn wait(self) -> Result<Vec<Option<Vec<Value>>>> {
        let mut out: Vec<Option<Vec<Value>>> = vec![None; self.n];
        for (slots, p) in self.parts {
            match p.wait()? {
                DataMsg::ReadConf {
                    code: 0,
                    found,
                    values,
                    ..
                } => {
                    if found.len() != slots.len() || values.len() != slots.len() * self.ncols {
                        return Err(codes::internal("read answer does not match its request"));
                    }
                    let mut it = values.into_iter();
                    for (&slot, f) in slots.iter().zip(found) {
                        let row: Vec<Value> = it.by_ref().take(self.ncols).collect();
                        out[slot] = f.then_some(row);
                    }
                }
                DataMsg::ReadConf {
                    code,
                    class,
                    message,
                    ..
                } => return Err(err_from(code, class, &message)),
                _ => return Err(codes::internal("unexpected answer to a read")),
            }
        }
        Ok(out)
    }
}

/// A committed transaction (or a NoCommit round of one: GCI 0): its GCI and one
/// result per operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub gci: u64,
    pub results: Vec<OpResult>,
    /// Operations of a round run with AO_IgnoreError that failed alone, by their index
    /// in the round (their results are None).
    pub failed: Vec<(usize, NdbError)>,
}

impl Committed {
    /// The answer of a round: its results, and its failed operations' errors.
    pub(crate) fn of(gci: u64, results: Vec<OpResult>, failed: Vec<OpFailure>) -> Committed {
        Committed {
            gci,
            results,
            failed: failed
                .into_iter()
                .map(|f| (f.op as usize, err_from(f.code, f.class, &f.message)))
                .collect(),
        }
    }
}

/// See the module notes.
pub struct RemoteCluster {
    pub connectstring: ConnectString,
    pub config: ClusterConfig,
    groups: Vec<Vec<NodeId>>,
    transport: TcpTransport,
    shared: Arc<Shared>,
    refresher: Mutex<Option<JoinHandle<()>>>,
    tables: Mutex<BTreeMap<(String, String), Arc<TableDef>>>,
    next_req: AtomicU64,
    timeout: Duration,
    /// The API node id the management server gave (None: every slot was taken).
    node_id: Option<NodeId>,
    /// The management connection that holds the node id (closed by `close`).
    mgm_session: Mutex<Option<MgmConnection>>,
    /// Hidden-key values this connection holds, per table (`tuple_id.rs`).
    pub(super) tuple_ids: Mutex<super::tuple_id::TupleIds>,
    /// Held while this connection takes values from `SYSTAB_0`.
    pub(super) tuple_id_fetch: Mutex<()>,
    /// `SYSTAB_0` is known to be there.
    pub(super) systab_ready: AtomicBool,
}

fn answer_req(m: &DataMsg) -> Option<u64> {
    match m {
        DataMsg::SqlConf { req, .. }
        | DataMsg::SqlCaptureConf { req, .. }
        | DataMsg::TableConf { req, .. }
        | DataMsg::TcKeyConf { req, .. }
        | DataMsg::TcKeyRef { req, .. }
        | DataMsg::ReadConf { req, .. }
        | DataMsg::DurableConf { req, .. } => Some(*req),
        DataMsg::ScanConf(c) => Some(c.req),
        _ => None,
    }
}

/// One event of the transport, on the thread of the connection it came from (a
/// connection's events in order; see [`TcpTransport::with_handler`]). Takes only
/// `Shared`'s leaf locks, and never waits.
fn receive(shared: &Shared, ev: Incoming) {
    match ev {
        Incoming::Message {
            msg: Message::Data(d),
            ..
        } => {
            let Some(req) = answer_req(&d) else { return };
            let w = shared.pending.lock().remove(&req);
            shared.room.notify_one();
            if let Some(w) = w {
                let _ = w.tx.try_send(Ok(d));
            }
        }
        Incoming::Message {
            from,
            msg: Message::ViewRep { view },
        } => shared.on_view(from, view),
        Incoming::Connected { peer, .. } => {
            shared.connected.lock().insert(peer);
        }
        Incoming::Disconnected { peer, reason } => {
            shared.connected.lock().remove(&peer);
            shared.fail_pending(|n| n == peer, &reason);
            shared.forget_view_if_gone();
        }
        _ => {}
    }
}

impl RemoteCluster {
    /// Connects (see the module notes); waits up to `timeout` for every data node the
    /// management server knows, and fails when none could be reached.
    pub fn connect(connectstring: &str, timeout: Duration) -> Result<RemoteCluster> {
        let cs = ConnectString::parse(connectstring)?;
        let mut mgm = MgmConnection::open(&cs, Role::Api, timeout)?;
        let node_id = match mgm.request(&Message::ApiRegReq {
            node_id: cs.node_id.unwrap_or(0),
            host: mgm.local_host(),
        })? {
            Message::ApiRegConf { node_id } => (node_id != 0).then_some(node_id),
            _ => {
                return Err(codes::internal(
                    "management server: unexpected reply to ApiRegReq",
                ));
            }
        };
        let (config_text, nodes) = match mgm.request(&Message::Data(DataMsg::ClusterReq))? {
            Message::Data(DataMsg::ClusterConf { config_text, nodes }) => (config_text, nodes),
            _ => {
                return Err(codes::internal(
                    "management server: unexpected reply to ClusterReq",
                ));
            }
        };
        let config =
            ClusterConfig::parse(&config_text, "<from the management server>").map_err(|e| {
                codes::bad_config(format!("configuration from the management server: {e}"))
            })?;
        let shared = Arc::new(Shared::default());
        let s2 = shared.clone();
        let transport = TcpTransport::with_handler(
            cs.net()?,
            node_id.unwrap_or(0),
            Role::Api,
            Box::new(move |ev| receive(&s2, ev)),
        );
        transport.set_send_limits(super::ndbd::send_limits_of(&config, node_id.unwrap_or(0)));
        for (n, addr) in &nodes {
            if let Ok(a) = addr.parse() {
                transport
                    .dial(*n, a)
                    .map_err(|e| codes::internal(format!("dialer thread: {e}")))?;
            }
        }
        let rc = RemoteCluster {
            connectstring: cs,
            groups: config.node_groups(),
            config,
            transport,
            shared,
            refresher: Mutex::new(None),
            tables: Mutex::new(BTreeMap::new()),
            next_req: AtomicU64::new(1),
            timeout: timeout.max(Duration::from_secs(1)),
            node_id,
            mgm_session: Mutex::new(Some(mgm)),
            tuple_ids: Mutex::new(BTreeMap::new()),
            tuple_id_fetch: Mutex::new(()),
            systab_ready: AtomicBool::new(false),
        };
        if nodes.is_empty() {
            return Err(NdbError::new(
                4009,
                crate::error::ErrorClassification::UnknownResultError,
                "Cluster Failure",
            )
            .detail(format!(
                "the management server at {connectstring} knows no running data node"
            )));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let up = rc.shared.connected.lock().len();
            if up == nodes.len() && up > 0 {
                break;
            }
            if Instant::now() >= deadline {
                if up > 0 {
                    break;
                }
                return Err(NdbError::new(
                    4009,
                    crate::error::ErrorClassification::UnknownResultError,
                    "Cluster Failure",
                )
                .detail(format!(
                    "no data node reachable through {connectstring} ({} known to the management server)",
                    nodes.len()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let all: BTreeSet<NodeId> = rc.groups.iter().flatten().copied().collect();
        let (shared, transport, cs) = (
            rc.shared.clone(),
            rc.transport.clone(),
            rc.connectstring.clone(),
        );
        let refresher = std::thread::Builder::new()
            .name("rndb-api-addr".into())
            .spawn(move || refresh_addresses(&shared, &transport, &cs, &all))
            .map_err(|e| codes::internal(format!("refresher thread: {e}")))?;
        *rc.refresher.lock() = Some(refresher);
        Ok(rc)
    }

    /// The API node id the management server gave this connection (NDB API's
    /// `Ndb_cluster_connection::node_id()`); None when every `[api]`/`[mysqld]` slot
    /// was taken.
    pub fn node_id(&self) -> Option<NodeId> {
        self.node_id
    }

    /// Data nodes this connection reaches now (connected, and not left out of the
    /// newest view).
    pub fn connected_nodes(&self) -> Vec<NodeId> {
        let c: Vec<NodeId> = self.shared.connected.lock().iter().copied().collect();
        c.into_iter()
            .filter(|&n| !self.shared.excluded(n))
            .collect()
    }

    /// Waits until this connection reaches every node of `nodes`, at most `timeout`:
    /// a node the management server shows started may not have been redialed yet (the
    /// connection dials the nodes it lacks every so often). Whether it does.
    pub fn wait_connected(&self, nodes: &[NodeId], timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let connected = self.connected_nodes();
            if nodes.iter().all(|n| connected.contains(n)) {
                return true;
            }
            if self.is_closed() || Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The data nodes that are connected and that the management server reports
    /// started (`ALL STATUS`: up to date and serving), as NDB API's `wait_until_ready`
    /// counts them.
    pub fn started_nodes(&self, timeout: Duration) -> Result<Vec<NodeId>> {
        let mut mgm = MgmConnection::open(&self.connectstring, Role::Api, timeout)?;
        let status = mgm.command("ALL STATUS")?;
        let connected = self.connected_nodes();
        Ok(super::client::node_states(&status)
            .into_iter()
            .filter(|(n, state)| state == "started" && connected.contains(n))
            .map(|(n, _)| n)
            .collect())
    }

    /// The node groups of the configuration (data node ids, in `[ndbd]` order).
    pub fn node_groups(&self) -> &[Vec<NodeId>] {
        &self.groups
    }

    /// A fresh id (requests and scans share the counter).
    pub(super) fn next_id(&self) -> u64 {
        self.next_req.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a message that has no answer (a lost one changes nothing).
    pub(super) fn send_only(&self, node: NodeId, msg: DataMsg) {
        let _ = self.transport.send(node, &Message::Data(msg));
    }

    /// How long a request may wait for its answer.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub(super) fn submit(
        &self,
        node: NodeId,
        commit: bool,
        make: impl FnOnce(u64) -> DataMsg,
    ) -> Result<Pending> {
        if self.is_closed() {
            return Err(codes::connection_closed());
        }
        let req = self.next_id();
        let (tx, rx) = sync_channel(1);
        {
            let mut p = self.shared.pending.lock();
            while p.len() >= MAX_PENDING {
                self.shared.room.wait_for(&mut p, Duration::from_millis(10));
            }
            p.insert(req, Waiter { node, commit, tx });
        }
        let pending = Pending {
            rx,
            req,
            deadline: Instant::now() + self.timeout,
            shared: self.shared.clone(),
        };
        if !self.transport.send(node, &Message::Data(make(req))) {
            self.shared.pending.lock().remove(&req);
            return Err(
                codes::node_failure_abort().detail(format!("data node {node} is not connected"))
            );
        }
        Ok(pending)
    }

    pub(super) fn usable(&self, n: NodeId) -> bool {
        if !self.shared.connected.lock().contains(&n) || self.shared.excluded(n) {
            return false;
        }
        let mut nr = self.shared.not_ready.lock();
        match nr.get(&n) {
            Some(&until) if Instant::now() < until => false,
            Some(_) => {
                nr.remove(&n);
                true
            }
            None => true,
        }
    }

    /// The node to send a key's partition to: its first usable replica.
    pub(super) fn node_for(&self, partition: usize) -> Result<NodeId> {
        self.first_usable(&replica_nodes(partition, &self.groups))
            .ok_or_else(|| {
                codes::node_group_down(format!(
                    "no data node of partition {partition}'s node group is connected"
                ))
            })
    }

    /// The first of `nodes` that is usable; else the first connected one in the view
    /// (one that said it was starting may be ready again: it answers for itself).
    pub(super) fn first_usable(&self, nodes: &[NodeId]) -> Option<NodeId> {
        nodes.iter().copied().find(|&n| self.usable(n)).or_else(|| {
            let c = self.shared.connected.lock().clone();
            nodes
                .iter()
                .copied()
                .find(|&n| c.contains(&n) && !self.shared.excluded(n))
        })
    }

    /// A connected data node for a request any of them answers: one not known to be
    /// starting, if there is one.
    pub(super) fn any_node(&self) -> Result<NodeId> {
        let nodes = self.connected_nodes();
        nodes
            .iter()
            .copied()
            .find(|&n| self.usable(n))
            .or_else(|| nodes.first().copied())
            .ok_or_else(|| codes::node_group_down("no data node is connected"))
    }

    /// Runs SQL on a data node (DDL reaches every data node; a statement that changes
    /// rows is captured there and applied through a TC, `remote_sql`); the results
    /// rendered as the mysql client prints them. No variables: each statement starts
    /// from the defaults.
    pub fn sql(self: &Arc<Self>, database: &str, sql: &str) -> Result<String> {
        self.sql_in(database, sql, &mut SessionVars::default())
    }

    /// [`RemoteCluster::sql`] in a session of `vars` (user variables and changed
    /// system variables): the statement reads them, and what a SET or SELECT assigns
    /// is kept in them.
    pub fn sql_in(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        vars: &mut SessionVars,
    ) -> Result<String> {
        let t0 = Instant::now();
        let results = self.sql_results_in(database, sql, vars)?;
        Ok(crate::sql::render_all(&results, t0.elapsed()))
    }

    /// [`RemoteCluster::sql_in`]'s results with their values, one per statement.
    pub fn sql_results_in(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        vars: &mut SessionVars,
    ) -> Result<Vec<SqlResult>> {
        if crate::sql::changes_rows(sql) {
            return Ok(vec![self.sql_change(database, sql, vars)?]);
        }
        if self.groups.len() > 1
            && let Some(q) = crate::sql::table_select(sql, database)
        {
            return Ok(vec![self.select_result(&q.with_vars(vars), None, None)?]);
        }
        let upper = sql.trim_start().to_ascii_uppercase();
        if ["DROP", "ALTER", "TRUNCATE", "RENAME", "CREATE"]
            .iter()
            .any(|w| upper.starts_with(w))
        {
            self.tables.lock().clear();
        }
        // A node that is starting answers 4035 (its replicas are not up to date): the
        // next connected node is asked, the last answer stands.
        let nodes = self.connected_nodes();
        if nodes.is_empty() {
            return Err(codes::node_group_down("no data node is connected"));
        }
        let mut last = Err(codes::internal("no answer to SQL"));
        for node in nodes {
            last = self.sql_at(node, database, sql, vars);
            match &last {
                Err(e) if e.code == 4035 => self.note_not_ready(e),
                _ => break,
            }
        }
        // A result larger than one answer (1153): a SELECT of one table is read again
        // here, as with several node groups — its rows come in scan batches and the
        // result is put together at this node, without that bound.
        if let Err(e) = &last
            && e.mysql_code == 1153
            && let Some(q) = crate::sql::table_select(sql, database)
        {
            return Ok(vec![self.select_result(&q.with_vars(vars), None, None)?]);
        }
        last
    }

    /// One SQL statement at data node `node`.
    fn sql_at(
        &self,
        node: NodeId,
        database: &str,
        sql: &str,
        vars: &mut SessionVars,
    ) -> Result<Vec<SqlResult>> {
        let p = self.submit(node, false, |req| DataMsg::SqlReq {
            req,
            database: database.into(),
            sql: sql.into(),
            vars: vars.clone(),
        })?;
        match p.wait()? {
            DataMsg::SqlConf {
                code: 0,
                vars: after,
                results,
                ..
            } => {
                if let Some(after) = after {
                    *vars = after;
                }
                Ok(results)
            }
            DataMsg::SqlConf {
                code,
                class,
                text,
                mysql_code,
                ..
            } => Err(sql_err_from(code, class, &text, mysql_code)),
            _ => Err(codes::internal("unexpected answer to SQL")),
        }
    }

    /// Blocks until the commit with GCI `gci` (a [`Committed`]'s) is durable on every
    /// data node: the data node asked has its master run a global checkpoint at once
    /// (`cluster/datapath/gcp.rs`). 4008 after `timeout`; a data node lost meanwhile
    /// is replaced by another.
    pub fn wait_durable(&self, gci: u64, timeout: Duration) -> Result<()> {
        if gci == 0 {
            return Ok(());
        }
        self.durable(gci, timeout).map(|_| ())
    }

    /// Runs a global checkpoint now: returns once every commit acknowledged before
    /// the call is durable on every data node, with the number of the checkpoint then
    /// saved on every node (NDB's GCI, its high 32 bits). 4008 after `timeout`.
    pub fn checkpoint(&self, timeout: Duration) -> Result<u32> {
        self.durable(0, timeout)
    }

    /// `DurableReq` for `gci` (0: the checkpoint open at the node asked), retried on
    /// another node after a node failure; the checkpoint saved on every node.
    fn durable(&self, gci: u64, timeout: Duration) -> Result<u32> {
        let deadline = Instant::now() + timeout;
        loop {
            let node = self.any_node()?;
            let mut p = self.submit(node, false, |req| DataMsg::DurableReq { req, gci })?;
            p.deadline = deadline;
            let r = match p.wait() {
                Ok(DataMsg::DurableConf {
                    code: 0,
                    durable_hi,
                    ..
                }) => return Ok(durable_hi),
                Ok(DataMsg::DurableConf {
                    code,
                    class,
                    message,
                    ..
                }) => Err(err_from(code, class, &message)),
                Ok(_) => return Err(codes::internal("unexpected answer to a durability wait")),
                Err(e) if e.code == codes::request_timeout("").code => {
                    return Err(codes::durable_wait_timeout(gci, timeout));
                }
                Err(e) => Err(e),
            };
            match r {
                Err(e)
                    if e.code == codes::node_failure_abort().code && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    /// A table's definition (cached until this connection runs DDL).
    pub fn table(&self, database: &str, name: &str) -> Result<Arc<TableDef>> {
        let k = (database.to_string(), name.to_ascii_lowercase());
        if let Some(t) = self.tables.lock().get(&k) {
            return Ok(t.clone());
        }
        let node = self.any_node()?;
        let p = self.submit(node, false, |req| DataMsg::TableReq {
            req,
            database: database.into(),
            table: name.into(),
        })?;
        match p.wait()? {
            DataMsg::TableConf { def: Some(def), .. } => {
                let def: Arc<TableDef> = Arc::from(def.0);
                self.tables.lock().insert(k, def.clone());
                Ok(def)
            }
            DataMsg::TableConf {
                code,
                class,
                message,
                ..
            } => Err(err_from(code, class, &message)),
            _ => Err(codes::internal("unexpected answer to a table request")),
        }
    }

    /// The partition of a key of `def` (values in primary-key order).
    pub fn partition_of(def: &TableDef, key: &[Value]) -> Result<usize> {
        let buf = Self::key_bytes(def, key)?;
        Ok(partition_of_hash(key_hash(&buf), def.partitions as usize))
    }

    /// A key of `def` (values in primary-key order, coerced to the columns' types) in
    /// the table's key encoding: equal for equal keys, whatever the values' types.
    pub fn key_bytes(def: &TableDef, key: &[Value]) -> Result<Vec<u8>> {
        if key.len() != def.primary_key.len() {
            return Err(codes::key_not_complete(format!(
                "{} key values for the {} primary-key columns of {}",
                key.len(),
                def.primary_key.len(),
                def.name
            )));
        }
        let coerced: Vec<Value> = key
            .iter()
            .zip(&def.primary_key)
            .map(|(v, &p)| {
                let c = &def.columns[p];
                crate::schema::value::coerce(v.clone(), &c.ty, &c.name)
            })
            .collect::<Result<_>>()?;
        let mut buf = Vec::new();
        def.layout.key_from_values(&coerced, &mut buf);
        Ok(buf)
    }

    /// Sends committed reads of `keys` (each in primary-key order), one request per data
    /// node; `columns` empty reads every column.
    pub fn read_submit(
        &self,
        database: &str,
        table: &str,
        keys: &[Vec<Value>],
        columns: &[u32],
    ) -> Result<ReadPending> {
        let def = self.table(database, table)?;
        let ncols = if columns.is_empty() {
            def.columns.iter().filter(|c| !c.hidden).count()
        } else {
            columns.len()
        };
        let mut per_node: BTreeMap<NodeId, (Vec<usize>, Vec<Value>)> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            let node = self.node_for(Self::partition_of(&def, k)?)?;
            let e = per_node.entry(node).or_default();
            e.0.push(i);
            e.1.extend(k.iter().cloned());
        }
        let mut parts = Vec::with_capacity(per_node.len());
        for (node, (slots, flat)) in per_node {
            let p = self.submit(node, false, |req| DataMsg::ReadReq {
                req,
                database: database.into(),
                table: table.into(),
                columns: columns.to_vec(),
                keys: flat,
            })?;
            parts.push((slots, p));
        }
        Ok(ReadPending {
            parts,
            n: keys.len(),
            ncols,
        })
    }

    /// Committed reads (see [`RemoteCluster::read_submit`]); a node that answers
    /// "starting" is skipped and its keys are read from another replica.
    pub fn read_batch(
        &self,
        database: &str,
        table: &str,
        keys: &[Vec<Value>],
        columns: &[u32],
    ) -> Result<Vec<Option<Vec<Value>>>> {
        let mut tries = 0;
        loop {
            match self.read_submit(database, table, keys, columns)?.wait() {
                Err(e) if e.code == 4035 && tries < 3 => {
                    tries += 1;
                    self.note_not_ready(&e);
                }
                r => return r,
            }
        }
    }

    pub(super) fn note_not_ready(&self, e: &NdbError) {
        // "data node N is starting": skip N for a while.
        if let Some(n) = e
            .message
            .split("data node ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse::<NodeId>().ok())
        {
            self.shared
                .not_ready
                .lock()
                .insert(n, Instant::now() + NOT_READY_BACKOFF);
        }
    }

    /// Sends one transaction (committed whole, or aborted) to the TC on the primary of
    /// its first operation's partition. Transactions in rounds: `transaction`
    /// (`remote_txn`).
    pub fn execute_submit(&self, ops: Vec<KeyOp>) -> Result<Pending> {
        self.execute_submit_with(ops, false)
    }

    /// [`RemoteCluster::execute_submit`], with NDB API's AO_IgnoreError when
    /// `ignore_errors`: a write that fails on its row fails alone (`Committed::failed`)
    /// and the others commit.
    pub fn execute_submit_with(&self, ops: Vec<KeyOp>, ignore_errors: bool) -> Result<Pending> {
        let first = ops
            .first()
            .ok_or_else(|| codes::bad_argument("a transaction needs at least one operation"))?;
        let def = self.table(&first.database, &first.table)?;
        let node = self.node_for(Self::partition_of(&def, &first.key)?)?;
        self.submit(node, true, move |req| DataMsg::TcKeyReq {
            req,
            txn: 0,
            exec: TcExec::Commit,
            ops,
            ignore_errors,
        })
    }

    /// The answer to [`RemoteCluster::execute_submit`].
    pub fn execute_wait(p: Pending) -> Result<Committed> {
        match p.wait()? {
            DataMsg::TcKeyConf {
                gci,
                results,
                failed,
                ..
            } => Ok(Committed::of(gci, results, failed)),
            DataMsg::TcKeyRef {
                code,
                class,
                message,
                ..
            } => Err(err_from(code, class, &message)),
            _ => Err(codes::internal("unexpected answer to a transaction")),
        }
    }

    /// Runs one transaction and waits for it.
    pub fn execute(&self, ops: Vec<KeyOp>) -> Result<Committed> {
        let r = Self::execute_wait(self.execute_submit(ops)?);
        if let Err(e) = &r
            && e.code == 4035
        {
            self.note_not_ready(e);
        }
        r
    }

    /// Whether [`RemoteCluster::close`] ran: every request is refused with 4009 since.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Closes every connection.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.transport.close();
        // The node id is free again at the management server.
        self.mgm_session.lock().take();
        if let Some(t) = self.refresher.lock().take() {
            let _ = t.join();
        }
    }
}

/// See the module notes: dials data nodes at the addresses the management server
/// knows while some are not connected.
fn refresh_addresses(
    shared: &Shared,
    transport: &TcpTransport,
    cs: &ConnectString,
    all: &BTreeSet<NodeId>,
) {
    let mut mgm: Option<MgmConnection> = None;
    let mut known: BTreeMap<NodeId, String> = BTreeMap::new();
    while !shared.closed.load(Ordering::Acquire) {
        std::thread::sleep(ADDRESS_REFRESH);
        let missing = {
            let c = shared.connected.lock();
            all.iter().any(|n| !c.contains(n))
        };
        if !missing {
            continue;
        }
        if mgm.is_none() {
            mgm = MgmConnection::open(cs, Role::Api, Duration::from_secs(2)).ok();
        }
        let Some(m) = mgm.as_mut() else { continue };
        match m.request(&Message::Data(DataMsg::ClusterReq)) {
            Ok(Message::Data(DataMsg::ClusterConf { nodes, .. })) => {
                for (n, addr) in nodes {
                    if known.get(&n) != Some(&addr)
                        && let Ok(a) = addr.parse()
                    {
                        let _ = transport.dial(n, a);
                        known.insert(n, addr);
                    }
                }
            }
            _ => mgm = None,
        }
    }
}

impl Drop for RemoteCluster {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: u64, nodes: &[NodeId]) -> View {
        View {
            id,
            ticket: 1,
            members: nodes.iter().map(|&n| (n, n)).collect(),
        }
    }

    fn wait_on(shared: &Shared, req: u64, node: NodeId, commit: bool) -> Receiver<Result<DataMsg>> {
        let (tx, rx) = sync_channel(1);
        shared
            .pending
            .lock()
            .insert(req, Waiter { node, commit, tx });
        rx
    }

    #[test]
    fn a_newer_view_without_a_node_fails_what_waits_on_it_and_excludes_it() {
        let shared = Shared::default();
        shared.connected.lock().extend([2, 3]);
        shared.on_view(2, view(1, &[2, 3]));
        assert!(!shared.excluded(3));
        let read = wait_on(&shared, 1, 3, false);
        let txn = wait_on(&shared, 2, 3, true);
        let other = wait_on(&shared, 3, 2, false);
        shared.on_view(2, view(2, &[2]));
        assert!(shared.excluded(3) && !shared.excluded(2));
        let code = |rx: &Receiver<Result<DataMsg>>| match rx.try_recv() {
            Ok(Err(e)) => e.code,
            other => panic!("expected an error, got {other:?}"),
        };
        assert_eq!(code(&read), 4010, "a read: retry");
        assert_eq!(code(&txn), 4012, "a transaction: outcome unknown");
        assert!(other.try_recv().is_err(), "node 2's request still waits");
        // An older view (node 3 resumed, reporting what it knew) changes nothing.
        shared.on_view(3, view(1, &[2, 3]));
        assert!(shared.excluded(3));
        // Node 3 admitted again in a newer view.
        shared.on_view(2, view(3, &[2, 3]));
        assert!(!shared.excluded(3));
    }

    #[test]
    fn the_view_is_forgotten_once_none_of_its_members_is_connected() {
        let shared = Shared::default();
        shared.connected.lock().extend([2, 3]);
        shared.on_view(2, view(7, &[2]));
        shared.connected.lock().remove(&3);
        shared.forget_view_if_gone();
        assert_eq!(shared.view.lock().id, 7, "node 2 is still connected");
        shared.connected.lock().remove(&2);
        shared.forget_view_if_gone();
        assert_eq!(shared.view.lock().id, 0);
        // A cluster started again reports view 1: taken.
        shared.on_view(2, view(1, &[2, 3]));
        assert_eq!(shared.view.lock().id, 1);
    }
}
