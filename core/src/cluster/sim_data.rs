//! The data path in the deterministic simulator: every data node's [`DataPath`]
//! (TC, LQH, node-restart copy, its local engine) run inline on the simulator's
//! thread, an API node issuing transactions and reads against a model, and the
//! invariants of `docs/cluster.md` §7.
//!
//! **Network.** Data messages travel as over TCP: in order per link, never lost or
//! duplicated while both ends live; a link cut by a partition holds its messages until
//! it heals (TCP retransmits), and a message between incarnations that no longer run
//! (a node crashed or restarted: the connection broke) is lost. Membership messages
//! keep the simulator's harsher network (drops, duplicates, reordering).
//!
//! **Client** (API node [`API_NODE`]): transactions of one or two keys (writes of
//! unique values, deletes, reads) sent to any running data node's TC, and committed
//! reads sent to the node a data node names as the key's primary. At most one
//! request per key at a time, so single-row linearizability reduces to: a read returns
//! the value of the last acknowledged write of its key, or of a write whose outcome
//! the client never learned (4012, or the node it went to failed) — and once a read
//! returned such a value, never an older one.
//!
//! **Invariants**: at every tick, at most one primary per partition among ready data
//! nodes that see each other; every read checked against the model; at the end (the
//! network healed, every node restarted and up to date), the replicas of every
//! partition identical, and every key's row what the model allows; with contested
//! values (`Workload::contested_per_mille`, a unique index on the value), no committed
//! write takes a value another key surely holds, and no two keys end with one value.
//! A loss of a whole
//! node group (the cluster shuts down; data nodes keep rows in memory only) starts a
//! new cluster generation: the model starts empty again.
//!
//! Maps iterated here are ordered; the only randomness is the seeded [`Rng`].

#[path = "sim_data_scan.rs"]
mod scan;

use super::datapath::{DataPath, Threading};
use crate::config::ClusterConfig;
use crate::disk::policy::sim::Rng;
use crate::schema::Value;
use crate::sql::{Session, SqlResult};
use crate::transport::data::{DataMsg, KeyOp, OpType, TcExec};
use crate::transport::{Message, NodeId, Transport, View};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// The simulated API node.
pub const API_NODE: NodeId = 100;
/// The database and table of the workload.
pub const DB: &str = "sim";
const TABLE: &str = "kv";
const CREATE: &str = "CREATE TABLE IF NOT EXISTS kv (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=NDB";
/// The table with a unique index on its value (`Workload::contested_per_mille`).
const CREATE_UNIQUE: &str = "CREATE TABLE IF NOT EXISTS kv (id INT PRIMARY KEY, v VARCHAR(40), \
                             UNIQUE KEY uv (v)) ENGINE=NDB";
/// The values writes contend for (`Workload::contested_per_mille`).
const CONTESTED_VALUES: u64 = 4;

/// What the client does.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Keys 0..keys.
    pub keys: i64,
    /// Requests outstanding at most.
    pub max_in_flight: usize,
    /// Chance per tick and free slot of a new request, per mille.
    pub start_per_mille: u64,
    /// Chance per tick, per 10,000, of an OPTIMIZE TABLE on a random ready data node
    /// (run inline: it moves that node's rows, var parts and index entries while copies
    /// and transactions go on around it). 0: never (the random stream is then the
    /// same as without it).
    pub optimize_per_10k: u64,
    /// Chance per tick, per mille, of a table scan of one node group's partitions at
    /// one of its ready nodes, begun when nothing else is in flight and holding every
    /// key until it ends (`sim_data/scan.rs`). 0: never (the random stream is then the
    /// same as without it).
    pub scan_per_mille: u64,
    /// Chance per transaction, per mille, that it runs in two rounds: a NoCommit round
    /// with its first operations, then — some ticks later, the transaction open with
    /// its locks held — a Commit round with the rest, or a Rollback. 0: never (the
    /// random stream is then the same as without it).
    pub rounds_per_mille: u64,
    /// Chance per write, per mille, that it writes one of [`CONTESTED_VALUES`] values
    /// (`c0`, `c1`, ...) instead of a new one; the table then has a unique index on its
    /// value, so that such a write is refused (893) while another key holds the value,
    /// whatever node group holds that key. 0: never, and no index (the random stream is
    /// then the same as without it).
    pub contested_per_mille: u64,
    /// Chance per transaction, per mille, that it runs in one round with NDB API's
    /// AO_IgnoreError: its deletes may then name keys without a row, and such a delete,
    /// or a write of a contested value another key holds, fails alone (626, 893)
    /// while the transaction's other operations commit. 0: never (the random stream is
    /// then the same as without it).
    pub ignore_errors_per_mille: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            keys: 24,
            max_in_flight: 6,
            start_per_mille: 400,
            optimize_per_10k: 0,
            scan_per_mille: 0,
            rounds_per_mille: 0,
            contested_per_mille: 0,
            ignore_errors_per_mille: 0,
        }
    }
}

/// A data node's outgoing messages, collected for the simulator.
#[derive(Default)]
struct SimOut {
    sent: Mutex<Vec<(NodeId, Message)>>,
}

impl Transport for SimOut {
    fn send(&self, to: NodeId, msg: &Message) -> bool {
        self.sent.lock().push((to, msg.clone()));
        true
    }
}

struct DataNode {
    dp: Arc<DataPath>,
    out: Arc<SimOut>,
    incarnation: u64,
}

struct LinkMsg {
    at_ms: u64,
    from_inc: u64,
    to_inc: u64,
    /// The sender's view (`Message::DataInView`); None: a plain `Message::Data`.
    view_id: Option<u64>,
    msg: DataMsg,
}

/// What a key may hold: the last acknowledged value (None: no row), then the values
/// of writes whose outcome is unknown, oldest first.
#[derive(Debug, Clone, Default)]
struct KeyModel {
    base: Option<String>,
    maybe: Vec<Option<String>>,
}

impl KeyModel {
    fn allows(&self, v: &Option<String>) -> bool {
        self.base == *v || self.maybe.contains(v)
    }

    /// A read saw `v` (allowed): an unknown write it shows happened; older ones are
    /// settled (they held the row's lock before it).
    fn observe(&mut self, v: &Option<String>) {
        if self.base == *v {
            return;
        }
        if let Some(i) = self.maybe.iter().position(|m| m == v) {
            self.base = v.clone();
            self.maybe.drain(..=i);
        }
    }
}

enum ReqKind {
    /// (key, what it does: Some(Some(v)) write v, Some(None) delete, None read).
    Txn(Vec<(i64, Option<Option<String>>)>),
    Read(Vec<i64>),
    Sql,
    Scan(scan::ScanState),
}

struct Req {
    node: NodeId,
    kind: ReqKind,
    /// A transaction in rounds: what follows this request.
    next: Option<Next>,
}

/// The rounds of a transaction (`Workload::rounds_per_mille`).
enum Next {
    /// This request is the NoCommit round; then these operations commit, or the
    /// transaction rolls back.
    Continue { ops: Vec<KeyOp>, rollback: bool },
    /// This request ends the transaction; the first round's results come first.
    Final {
        prefix: Vec<Option<Vec<Value>>>,
        rollback: bool,
    },
}

/// A transaction between its rounds (open at its TC, its keys busy).
struct OpenTxn {
    node: NodeId,
    txn: u64,
    plan: Vec<(i64, Option<Option<String>>)>,
    ops: Vec<KeyOp>,
    rollback: bool,
    prefix: Vec<Option<Vec<Value>>>,
    /// Not continued before this time (some transactions stay open past a copy
    /// mark's grace).
    hold_until_ms: u64,
}

/// Counts for the report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DataStats {
    pub committed: u64,
    pub refused: u64,
    pub unknown: u64,
    pub reads_checked: u64,
    pub generations: u64,
    /// Node restarts whose copy finished, and transactions decided by a takeover.
    pub copies_done: u64,
    pub takeovers: u64,
    /// OPTIMIZE TABLE runs, and the rows, var parts and index leaves they moved.
    pub optimizes: u64,
    pub optimize_moves: u64,
    /// Scans that returned every row of their node group, and the rows they checked.
    pub scans: u64,
    pub scan_rows: u64,
    /// Transactions in two rounds that committed, and that rolled back.
    pub rounds_committed: u64,
    pub rounds_rolled_back: u64,
    /// Operations of AO_IgnoreError transactions that failed alone.
    pub failed_alone: u64,
    pub errors: BTreeMap<u32, u64>,
}

impl DataStats {
    /// Adds another run's counts.
    pub fn add(&mut self, o: &DataStats) {
        self.committed += o.committed;
        self.refused += o.refused;
        self.unknown += o.unknown;
        self.reads_checked += o.reads_checked;
        self.generations += o.generations;
        self.copies_done += o.copies_done;
        self.takeovers += o.takeovers;
        self.optimizes += o.optimizes;
        self.optimize_moves += o.optimize_moves;
        self.scans += o.scans;
        self.scan_rows += o.scan_rows;
        self.rounds_committed += o.rounds_committed;
        self.rounds_rolled_back += o.rounds_rolled_back;
        self.failed_alone += o.failed_alone;
        for (k, v) in &o.errors {
            *self.errors.entry(*k).or_default() += v;
        }
    }
}

/// The data nodes' data paths, the links between them and the client.
pub struct DataLayer {
    cfg: ClusterConfig,
    groups: Vec<Vec<NodeId>>,
    nodes: BTreeMap<NodeId, DataNode>,
    links: BTreeMap<(NodeId, NodeId), VecDeque<LinkMsg>>,
    rng: Rng,
    workload: Workload,
    next_req: u64,
    reqs: BTreeMap<u64, Req>,
    /// Transactions between rounds, in the order their first round ended.
    open: Vec<OpenTxn>,
    busy: BTreeSet<i64>,
    model: BTreeMap<i64, KeyModel>,
    table_ready: bool,
    /// The ticket of the first view of the running cluster generation.
    generation: Option<u64>,
    next_write: u64,
    /// The client issues no new requests (the end of a run).
    pub quiesce: bool,
    pub stats: DataStats,
    /// Trace lines for the simulator's trace.
    pub lines: Vec<String>,
    /// The first invariant broken.
    violation: Option<String>,
    min_delay_ms: u64,
    max_delay_ms: u64,
}

/// The simulator's data nodes' configuration: `groups` of `(node id, group)`, rows in
/// memory, lock waits refused at once (one thread cannot wait for itself: a conflict
/// is NDB's 266, temporary, as a wait that timed out).
pub fn sim_config(data_nodes: &[(NodeId, u32)], replicas: u32, heartbeat_ms: u64) -> ClusterConfig {
    let mut text = format!(
        "[ndbd default]\nNoOfReplicas={replicas}\nDataMemory=8M\nHeartbeatIntervalDbDb={heartbeat_ms}\n"
    );
    text.push_str("[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\n");
    for &(n, g) in data_nodes {
        text.push_str(&format!(
            "[ndbd]\nNodeId={n}\nNodeGroup={g}\nHostName=127.0.0.1\n"
        ));
    }
    text.push_str("[mysqld]\n");
    let mut cfg = match ClusterConfig::parse(&text, "sim.ini") {
        Ok(c) => c,
        Err(e) => panic!("the simulator's config.ini: {e}"),
    };
    for n in &mut cfg.data_nodes {
        n.transaction_deadlock_detection_timeout_ms = 0;
    }
    cfg
}

impl DataLayer {
    pub fn new(
        cfg: ClusterConfig,
        seed: u64,
        workload: Workload,
        delay_ms: (u64, u64),
    ) -> Result<DataLayer, String> {
        let groups = cfg.node_groups();
        let mut layer = DataLayer {
            groups,
            nodes: BTreeMap::new(),
            links: BTreeMap::new(),
            rng: Rng::new(seed ^ 0xDA7A_0007),
            model: (0..workload.keys)
                .map(|k| (k, KeyModel::default()))
                .collect(),
            workload,
            next_req: 1,
            reqs: BTreeMap::new(),
            open: Vec::new(),
            busy: BTreeSet::new(),
            table_ready: false,
            generation: None,
            next_write: 1,
            quiesce: false,
            stats: DataStats::default(),
            lines: Vec::new(),
            violation: None,
            min_delay_ms: delay_ms.0,
            max_delay_ms: delay_ms.1,
            cfg,
        };
        let ids: Vec<NodeId> = layer.groups.iter().flatten().copied().collect();
        for n in ids {
            layer.start_node(n, 1)?;
        }
        Ok(layer)
    }

    /// A (re)started data node: a new process, empty.
    pub fn start_node(&mut self, node: NodeId, incarnation: u64) -> Result<(), String> {
        self.stop_node(node);
        let out = Arc::new(SimOut::default());
        let dp = DataPath::start_with(&self.cfg, node, 1, out.clone(), Threading::Inline)
            .map_err(|e| format!("node {node}: data path: {e}"))?;
        self.nodes.insert(
            node,
            DataNode {
                dp,
                out,
                incarnation,
            },
        );
        Ok(())
    }

    /// A data node crashed or stopped: its process is gone, and the requests the
    /// client sent it have an unknown outcome.
    pub fn stop_node(&mut self, node: NodeId) {
        if let Some(n) = self.nodes.remove(&node) {
            n.dp.stop();
        }
        // Its connections close: the peers drop what they held from it.
        for n in self.nodes.values() {
            n.dp.on_disconnect(node);
        }
        let lost: Vec<u64> = self
            .reqs
            .iter()
            .filter(|(_, r)| r.node == node)
            .map(|(&id, _)| id)
            .collect();
        for id in lost {
            self.settle(id, Outcome::Unknown);
        }
        // Transactions open at it ended with it: nothing of them committed.
        let (gone, kept): (Vec<OpenTxn>, Vec<OpenTxn>) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|o| o.node == node);
        self.open = kept;
        for o in gone {
            self.stats.refused += 1;
            for (k, _) in &o.plan {
                self.busy.remove(k);
            }
        }
    }

    fn incarnation(&self, node: NodeId) -> Option<u64> {
        if node == API_NODE {
            return Some(1);
        }
        self.nodes.get(&node).map(|n| n.incarnation)
    }

    fn push(&mut self, now_ms: u64, from: NodeId, to: NodeId, view_id: Option<u64>, msg: DataMsg) {
        let (Some(from_inc), Some(to_inc)) = (self.incarnation(from), self.incarnation(to)) else {
            return;
        };
        let span = self.max_delay_ms - self.min_delay_ms + 1;
        let delay = self.min_delay_ms + self.rng.below(span);
        let q = self.links.entry((from, to)).or_default();
        let at_ms = q.back().map_or(0, |m| m.at_ms).max(now_ms + delay);
        q.push_back(LinkMsg {
            at_ms,
            from_inc,
            to_inc,
            view_id,
            msg,
        });
    }

    /// Moves what a data node sent into the links (and its log lines into the trace).
    fn drain(&mut self, now_ms: u64, node: NodeId) {
        let Some(out) = self.nodes.get(&node).map(|n| n.out.clone()) else {
            return;
        };
        loop {
            let sent = std::mem::take(&mut *out.sent.lock());
            if sent.is_empty() {
                return;
            }
            for (to, m) in sent {
                match m {
                    Message::Data(d) => self.push(now_ms, node, to, None, d),
                    Message::DataInView { view_id, msg } => {
                        self.push(now_ms, node, to, Some(view_id), msg)
                    }
                    Message::Event { text, .. } => {
                        if text.starts_with("Node restart completed") {
                            self.stats.copies_done += 1;
                        }
                        if text.contains("taken over") {
                            self.stats.takeovers += 1;
                        }
                        self.lines.push(format!("node {node} log: {text}"));
                    }
                    other => self
                        .lines
                        .push(format!("node {node} sent {other:?} to {to}")),
                }
            }
        }
    }

    /// The link whose first message is due first, among links not cut: (when, link).
    pub fn next_due(
        &self,
        cut: &dyn Fn(NodeId, NodeId) -> bool,
    ) -> Option<(u64, (NodeId, NodeId))> {
        self.links
            .iter()
            .filter(|((f, t), _)| !cut(*f, *t))
            .filter_map(|(&k, q)| q.front().map(|m| (m.at_ms, k)))
            .min()
    }

    /// Delivers the first message of `link` (from [`DataLayer::next_due`]).
    pub fn deliver(&mut self, now_ms: u64, link: (NodeId, NodeId)) -> Result<(), String> {
        let (from, to) = link;
        let Some(m) = self.links.get_mut(&link).and_then(|q| q.pop_front()) else {
            return Ok(());
        };
        let at = m.at_ms;
        // A broken connection: one of its ends is not the incarnation it was.
        if self.incarnation(from) != Some(m.from_inc) || self.incarnation(to) != Some(m.to_inc) {
            return Ok(());
        }
        let now = now_ms.max(at);
        let quiet = matches!(m.msg, DataMsg::LeasePing { .. } | DataMsg::LeasePong { .. });
        let mut line = if quiet {
            String::new()
        } else {
            format!("{from} => {to}: {:?}", m.msg)
        };
        if line.len() > 240 {
            let mut cut = 240;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push_str("...");
        }
        if !quiet {
            self.lines.push(line);
        }
        if to == API_NODE {
            self.on_reply(now, from, m.msg)?;
        } else if let Some(n) = self.nodes.get(&to) {
            match m.view_id {
                Some(v) => n.dp.on_message_in_view(from, v, m.msg),
                None => n.dp.on_message(from, m.msg),
            }
            self.drain(now, to);
        }
        Ok(())
    }

    /// A data node installed a view (empty: it left the cluster).
    pub fn on_view(&mut self, now_ms: u64, node: NodeId, view: &View) {
        if view.id == 1 && self.generation != Some(view.ticket) {
            // The cluster started (again): every node starts empty.
            self.generation = Some(view.ticket);
            self.stats.generations += 1;
            for m in self.model.values_mut() {
                *m = KeyModel::default();
            }
            self.table_ready = false;
            self.lines
                .push("DATA: a new cluster generation: the model starts empty".into());
        }
        if let Some(n) = self.nodes.get(&node) {
            n.dp.on_view(view);
        }
        self.drain(now_ms, node);
    }

    /// Every node's tick, then the client's.
    pub fn tick(&mut self, now_ms: u64, up: &BTreeSet<NodeId>) -> Result<(), String> {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for n in ids {
            if let Some(d) = self.nodes.get(&n) {
                d.dp.on_tick(now_ms);
            }
            self.drain(now_ms, n);
        }
        self.client_tick(now_ms, up);
        self.optimize_tick(up);
        self.check_primaries()
    }

    /// Now and then an OPTIMIZE TABLE on one ready node (see [`Workload`]).
    fn optimize_tick(&mut self, up: &BTreeSet<NodeId>) {
        if self.workload.optimize_per_10k == 0
            || self.rng.below(10_000) >= self.workload.optimize_per_10k
        {
            return;
        }
        let ready = self.ready_nodes(up);
        if ready.is_empty() {
            return;
        }
        let node = ready[self.rng.below(ready.len() as u64) as usize];
        let Some(d) = self.nodes.get(&node) else {
            return;
        };
        let ndb = d.dp.engine.ndb(DB);
        let Ok(t) = ndb.table(TABLE) else {
            return;
        };
        // No waiting for open scans (a copy's): the rows then stay, deterministically.
        let opts = crate::api::optimize::OptimizeOptions {
            delay_ms: 0,
            busy_timeout_ms: 0,
        };
        match ndb.optimize_table(&t, opts) {
            Ok(r) => {
                self.stats.optimizes += 1;
                self.stats.optimize_moves +=
                    r.stats.rows_moved + r.stats.var_parts_moved + r.stats.index_leaves_freed;
                self.lines.push(format!(
                    "node {node}: OPTIMIZE TABLE moved {} rows, {} var parts, packed away {} index leaves, gave back {} pages",
                    r.stats.rows_moved,
                    r.stats.var_parts_moved,
                    r.stats.index_leaves_freed,
                    r.pages_freed()
                ));
            }
            Err(e) => self.lines.push(format!("node {node}: OPTIMIZE TABLE: {e}")),
        }
    }

    /// At most one primary per partition among ready nodes that see each other.
    fn check_primaries(&self) -> Result<(), String> {
        let Some(partitions) = self.partitions() else {
            return Ok(());
        };
        for p in 0..partitions {
            let primaries: Vec<NodeId> = self
                .nodes
                .iter()
                .filter(|(_, n)| n.dp.is_ready())
                .filter(|(id, n)| n.dp.live_replicas(p).first() == Some(*id))
                .map(|(&id, _)| id)
                .collect();
            for (i, &a) in primaries.iter().enumerate() {
                for &b in &primaries[i + 1..] {
                    if self.nodes[&a].dp.is_live(b) && self.nodes[&b].dp.is_live(a) {
                        return Err(format!(
                            "nodes {a} and {b} are both primary of partition {p} and see each other"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn partitions(&self) -> Option<usize> {
        self.nodes.values().find_map(|n| {
            n.dp.engine
                .inner()
                .table(DB, TABLE)
                .ok()
                .map(|t| t.def.partitions as usize)
        })
    }

    fn ready_nodes(&self, up: &BTreeSet<NodeId>) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(id, n)| up.contains(id) && n.dp.is_ready())
            .map(|(&id, _)| id)
            .collect()
    }

    fn new_req(&mut self, now_ms: u64, node: NodeId, kind: ReqKind, msg: DataMsg) {
        self.new_req_then(now_ms, node, kind, msg, None);
    }

    fn new_req_then(
        &mut self,
        now_ms: u64,
        node: NodeId,
        kind: ReqKind,
        msg: DataMsg,
        next: Option<Next>,
    ) {
        let id = match &msg {
            DataMsg::TcKeyReq { req, .. }
            | DataMsg::ReadReq { req, .. }
            | DataMsg::SqlReq { req, .. } => *req,
            DataMsg::ScanReq(r) => r.req,
            _ => return,
        };
        if let ReqKind::Txn(ops) = &kind {
            self.busy.extend(ops.iter().map(|o| o.0));
        }
        if let ReqKind::Read(keys) = &kind {
            self.busy.extend(keys.iter().copied());
        }
        if let ReqKind::Scan(_) = &kind {
            self.busy.extend(0..self.workload.keys);
        }
        self.reqs.insert(id, Req { node, kind, next });
        self.push(now_ms, API_NODE, node, None, msg);
    }

    fn key_op(t: OpType, k: i64, v: Option<&str>) -> KeyOp {
        KeyOp {
            op: t,
            database: DB.into(),
            table: TABLE.into(),
            key: vec![Value::Int(k)],
            values: v
                .map(|v| vec![(1, Value::Str(v.to_string()))])
                .unwrap_or_default(),
            columns: Vec::new(),
        }
    }

    fn client_tick(&mut self, now_ms: u64, up: &BTreeSet<NodeId>) {
        // Open transactions go on even when quiescing (they hold their keys).
        self.continue_open(now_ms);
        if self.quiesce {
            return;
        }
        let ready = self.ready_nodes(up);
        if ready.is_empty() {
            return;
        }
        if !self.table_ready {
            if self.reqs.values().all(|r| !matches!(r.kind, ReqKind::Sql)) {
                let node = ready[self.rng.below(ready.len() as u64) as usize];
                let req = self.next_req;
                self.next_req += 1;
                let msg = DataMsg::SqlReq {
                    req,
                    database: DB.into(),
                    sql: if self.workload.contested_per_mille > 0 {
                        CREATE_UNIQUE.into()
                    } else {
                        CREATE.into()
                    },
                    vars: Default::default(),
                };
                self.new_req(now_ms, node, ReqKind::Sql, msg);
            }
            return;
        }
        if self.workload.scan_per_mille > 0
            && self.reqs.is_empty()
            && self.open.is_empty()
            && self.rng.below(1000) < self.workload.scan_per_mille
        {
            self.start_scan(now_ms, &ready);
            return;
        }
        while self.reqs.len() < self.workload.max_in_flight
            && self.rng.below(1000) < self.workload.start_per_mille
        {
            let free: Vec<i64> = (0..self.workload.keys)
                .filter(|k| !self.busy.contains(k))
                .collect();
            if free.is_empty() {
                return;
            }
            let k1 = free[self.rng.below(free.len() as u64) as usize];
            let node = ready[self.rng.below(ready.len() as u64) as usize];
            let req = self.next_req;
            self.next_req += 1;
            match self.rng.below(10) {
                0..=2 => {
                    // Committed reads at the primary a data node names.
                    let mut keys = vec![k1];
                    if free.len() > 1 && self.rng.below(2) == 0 {
                        let k2 = free[self.rng.below(free.len() as u64) as usize];
                        if k2 != k1 {
                            keys.push(k2);
                        }
                    }
                    let Some(target) = self.primary_of(node, keys[0]) else {
                        return;
                    };
                    // Every key of one request must have that primary.
                    keys.retain(|&k| self.primary_of(node, k) == Some(target));
                    let msg = DataMsg::ReadReq {
                        req,
                        database: DB.into(),
                        table: TABLE.into(),
                        columns: Vec::new(),
                        keys: keys.iter().map(|&k| Value::Int(k)).collect(),
                    };
                    self.new_req(now_ms, target, ReqKind::Read(keys), msg);
                }
                _ => {
                    let mut keys = vec![k1];
                    if free.len() > 1 && self.rng.below(3) == 0 {
                        let k2 = free[self.rng.below(free.len() as u64) as usize];
                        if k2 != k1 {
                            keys.push(k2);
                        }
                    }
                    let mut ops = Vec::new();
                    let mut plan = Vec::new();
                    let ignore_errors = self.workload.ignore_errors_per_mille > 0
                        && self.rng.below(1000) < self.workload.ignore_errors_per_mille;
                    for k in keys {
                        match self.rng.below(10) {
                            0..=5 => {
                                let contested = self.workload.contested_per_mille;
                                let v = if contested > 0 && self.rng.below(1000) < contested {
                                    format!("c{}", self.rng.below(CONTESTED_VALUES))
                                } else {
                                    self.next_write += 1;
                                    format!("w{}", self.next_write - 1)
                                };
                                ops.push(Self::key_op(OpType::Write, k, Some(&v)));
                                plan.push((k, Some(Some(v))));
                            }
                            // Deletes of keys that have a row (else 626 refuses it; with
                            // AO_IgnoreError the delete fails alone).
                            6..=7
                                if ignore_errors
                                    || self.model.get(&k).is_some_and(|m| m.base.is_some()) =>
                            {
                                ops.push(Self::key_op(OpType::Delete, k, None));
                                plan.push((k, Some(None)));
                            }
                            _ => {
                                let t = if self.rng.below(2) == 0 {
                                    OpType::ReadCommitted
                                } else {
                                    OpType::ReadExclusive
                                };
                                ops.push(Self::key_op(t, k, None));
                                plan.push((k, None));
                            }
                        }
                    }
                    let mut next = None;
                    let mut exec = TcExec::Commit;
                    if !ignore_errors
                        && self.workload.rounds_per_mille > 0
                        && self.rng.below(1000) < self.workload.rounds_per_mille
                    {
                        // The first half (at least one operation) NoCommit; the rest
                        // (maybe none) at the commit, or a rollback one time in five.
                        let rest = ops.split_off(ops.len().div_ceil(2));
                        let rollback = self.rng.below(5) == 0;
                        next = Some(Next::Continue {
                            ops: rest,
                            rollback,
                        });
                        exec = TcExec::NoCommit;
                    }
                    let msg = DataMsg::TcKeyReq {
                        req,
                        txn: 0,
                        exec,
                        ops,
                        ignore_errors,
                    };
                    self.new_req_then(now_ms, node, ReqKind::Txn(plan), msg, next);
                }
            }
        }
    }

    /// Sends the last round of some open transactions (each, per tick, one time in
    /// two once its hold is over: a transaction stays open, its locks held, for a
    /// while).
    fn continue_open(&mut self, now_ms: u64) {
        let mut i = 0;
        while i < self.open.len() {
            if now_ms < self.open[i].hold_until_ms || self.rng.below(2) == 0 {
                i += 1;
                continue;
            }
            let o = self.open.remove(i);
            let req = self.next_req;
            self.next_req += 1;
            let (exec, ops) = if o.rollback {
                (TcExec::Rollback, Vec::new())
            } else {
                (TcExec::Commit, o.ops)
            };
            let msg = DataMsg::TcKeyReq {
                req,
                txn: o.txn,
                exec,
                ops,
                ignore_errors: false,
            };
            let next = Next::Final {
                prefix: o.prefix,
                rollback: o.rollback,
            };
            // The keys stay busy: they were never released.
            self.reqs.insert(
                req,
                Req {
                    node: o.node,
                    kind: ReqKind::Txn(o.plan),
                    next: Some(next),
                },
            );
            self.push(now_ms, API_NODE, o.node, None, msg);
        }
    }

    /// A NoCommit round answered: the transaction is open until `continue_open`.
    fn on_first_round(
        &mut self,
        now_ms: u64,
        req: u64,
        txn: u64,
        results: Vec<Option<Vec<Value>>>,
    ) -> bool {
        let Some(r) = self.reqs.get(&req) else {
            return false;
        };
        if !matches!(r.next, Some(Next::Continue { .. })) {
            return false;
        }
        let Some(r) = self.reqs.remove(&req) else {
            return false;
        };
        let (ReqKind::Txn(plan), Some(Next::Continue { ops, rollback })) = (r.kind, r.next) else {
            return false;
        };
        // One in ten stays open for 1.5 to 3 s (past `MARK_OPEN_GRACE_MS`).
        let hold_until_ms = if self.rng.below(10) == 0 {
            now_ms + 1_500 + self.rng.below(1_500)
        } else {
            0
        };
        self.open.push(OpenTxn {
            node: r.node,
            txn,
            plan,
            ops,
            rollback,
            prefix: results,
            hold_until_ms,
        });
        true
    }

    /// The primary of key `k` in `node`'s view.
    fn primary_of(&self, node: NodeId, k: i64) -> Option<NodeId> {
        let n = self.nodes.get(&node)?;
        let rt = n.dp.engine.inner().table(DB, TABLE).ok()?;
        let p = super::remote::RemoteCluster::partition_of(&rt.def, &[Value::Int(k)]).ok()?;
        n.dp.live_replicas(p).first().copied()
    }

    fn on_reply(&mut self, now_ms: u64, from: NodeId, msg: DataMsg) -> Result<(), String> {
        match msg {
            DataMsg::TcKeyConf {
                req,
                txn,
                mut results,
                failed,
                ..
            } => {
                if !failed.is_empty() {
                    self.drop_failed(req, &failed, &mut results)?;
                }
                if !self.on_first_round(now_ms, req, txn, results.clone()) {
                    self.settle(req, Outcome::Committed(results));
                }
            }
            DataMsg::TcKeyRef { req, code, .. } => {
                *self.stats.errors.entry(code).or_default() += 1;
                // 4012: the commit may have happened; anything else: it did not.
                let o = if code == 4012 {
                    Outcome::Unknown
                } else {
                    Outcome::Refused
                };
                self.settle(req, o);
            }
            DataMsg::ReadConf {
                req,
                code,
                found,
                values,
                ..
            } => {
                if code != 0 {
                    *self.stats.errors.entry(code).or_default() += 1;
                    self.settle(req, Outcome::Refused);
                } else {
                    let rows: Vec<Option<Vec<Value>>> = found
                        .iter()
                        .enumerate()
                        .map(|(i, &f)| {
                            f.then(|| values.get(i * 2..i * 2 + 2).unwrap_or_default().to_vec())
                        })
                        .collect();
                    self.settle(req, Outcome::Committed(rows));
                }
            }
            DataMsg::ScanConf(c) => self.on_scan_conf(now_ms, from, *c),
            DataMsg::SqlConf {
                req, code, text, ..
            } => {
                if code == 0 {
                    self.table_ready = true;
                } else {
                    *self.stats.errors.entry(code).or_default() += 1;
                    self.lines
                        .push(format!("DATA: CREATE TABLE at node {from}: {code} {text}"));
                }
                self.reqs.remove(&req);
            }
            other => self
                .lines
                .push(format!("DATA: client got {other:?} from {from}")),
        }
        self.check_violation()
    }

    /// The operations of an AO_IgnoreError transaction that failed alone changed
    /// nothing: they leave its plan (their keys freed) and its results. Only an error
    /// of the row may fail alone, and only in such a transaction (one round).
    fn drop_failed(
        &mut self,
        req: u64,
        failed: &[crate::transport::data::OpFailure],
        results: &mut Vec<Option<Vec<Value>>>,
    ) -> Result<(), String> {
        let Some(Req {
            kind: ReqKind::Txn(plan),
            next: None,
            ..
        }) = self.reqs.get_mut(&req)
        else {
            return Err(format!(
                "request {req}: operations failed alone outside a one-round transaction"
            ));
        };
        let mut at: Vec<usize> = failed.iter().map(|f| f.op as usize).collect();
        at.sort_unstable();
        at.dedup();
        for f in failed {
            if f.code != 626 && f.code != 893 {
                return Err(format!(
                    "request {req}: operation {} failed alone with {} {}",
                    f.op, f.code, f.message
                ));
            }
        }
        for &i in at.iter().rev() {
            if i >= plan.len() || i >= results.len() {
                return Err(format!("request {req}: failed operation {i} out of range"));
            }
            let (k, _) = plan.remove(i);
            results.remove(i);
            self.busy.remove(&k);
            self.stats.failed_alone += 1;
        }
        Ok(())
    }

    fn settle(&mut self, req: u64, outcome: Outcome) {
        let Some(r) = self.reqs.remove(&req) else {
            return;
        };
        match r.kind {
            ReqKind::Sql => {}
            ReqKind::Scan(st) => {
                for k in 0..self.workload.keys {
                    self.busy.remove(&k);
                }
                if let Outcome::Committed(_) = outcome {
                    self.check_scan(req, r.node, st);
                }
            }
            ReqKind::Read(keys) => {
                for k in &keys {
                    self.busy.remove(k);
                }
                if let Outcome::Committed(rows) = outcome {
                    for (k, row) in keys.iter().zip(rows) {
                        self.check_read(
                            *k,
                            &row,
                            &format!("read request {req} at node {}", r.node),
                        );
                    }
                }
            }
            ReqKind::Txn(plan) => {
                for (k, _) in &plan {
                    self.busy.remove(k);
                }
                let outcome = match (r.next, outcome) {
                    // Nothing commits in a NoCommit round: its loss is no commit.
                    (Some(Next::Continue { .. }), Outcome::Unknown) => Outcome::Refused,
                    (
                        Some(Next::Final {
                            mut prefix,
                            rollback,
                        }),
                        Outcome::Committed(rest),
                    ) => {
                        prefix.extend(rest);
                        if rollback {
                            self.stats.rounds_rolled_back += 1;
                            Outcome::RolledBack(prefix)
                        } else {
                            self.stats.rounds_committed += 1;
                            Outcome::Committed(prefix)
                        }
                    }
                    // A lost rollback leaves nothing committed either.
                    (Some(Next::Final { rollback: true, .. }), Outcome::Unknown) => {
                        Outcome::Refused
                    }
                    (_, o) => o,
                };
                match outcome {
                    Outcome::Committed(results) => {
                        self.stats.committed += 1;
                        for ((k, what), row) in plan.iter().zip(results) {
                            match what {
                                Some(v) => {
                                    let m = self.model.entry(*k).or_default();
                                    m.base = v.clone();
                                    m.maybe.clear();
                                }
                                None => self.check_read(
                                    *k,
                                    &row,
                                    &format!("transaction {req} via node {}", r.node),
                                ),
                            }
                        }
                        // Once the whole transaction is in the model (it may have
                        // moved the value away from another of its keys).
                        for (k, what) in &plan {
                            if let Some(Some(c)) = what
                                && c.starts_with('c')
                            {
                                self.check_unique(*k, c, req);
                            }
                        }
                    }
                    Outcome::Refused => self.stats.refused += 1,
                    Outcome::RolledBack(results) => {
                        self.stats.refused += 1;
                        for ((k, what), row) in plan.iter().zip(results) {
                            if what.is_none() {
                                self.check_read(
                                    *k,
                                    &row,
                                    &format!("rolled-back transaction {req} via node {}", r.node),
                                );
                            }
                        }
                    }
                    Outcome::Unknown => {
                        self.stats.unknown += 1;
                        for (k, what) in plan {
                            if let Some(v) = what {
                                self.model.entry(k).or_default().maybe.push(v);
                            }
                        }
                    }
                }
            }
        }
    }

    fn check_read(&mut self, k: i64, row: &Option<Vec<Value>>, what: &str) {
        let v = match row {
            None => None,
            Some(r) => match r.get(1) {
                Some(Value::Str(s)) => Some(s.clone()),
                other => Some(format!("{other:?}")),
            },
        };
        self.stats.reads_checked += 1;
        let m = self.model.entry(k).or_default();
        if m.allows(&v) {
            m.observe(&v);
        } else {
            let text = format!(
                "VIOLATION: {what}: key {k} read {v:?}, the model allows {:?} or one of {:?}",
                m.base, m.maybe
            );
            self.lines.push(text.clone());
            self.violation.get_or_insert(text);
        }
    }

    /// A write of contested value `c` to `k` committed: no other key may hold `c` for
    /// certain — acknowledged, with no write of unknown outcome and no request in
    /// flight on it.
    fn check_unique(&mut self, k: i64, c: &str, req: u64) {
        let holder = self.model.iter().find(|(k2, m)| {
            **k2 != k
                && !self.busy.contains(k2)
                && m.maybe.is_empty()
                && m.base.as_deref() == Some(c)
        });
        if let Some((k2, _)) = holder {
            let text = format!(
                "VIOLATION: transaction {req} wrote unique value {c} to key {k} while key {k2} held it"
            );
            self.lines.push(text.clone());
            self.violation.get_or_insert(text);
        }
    }

    fn check_violation(&self) -> Result<(), String> {
        match &self.violation {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }

    /// Whether `node`'s data path lost a node group (see `DataPath::lost_node_group`).
    pub fn lost_node_group(&self, node: NodeId) -> Option<String> {
        self.nodes.get(&node).and_then(|n| n.dp.lost_node_group())
    }

    /// Requests still outstanding.
    pub fn in_flight(&self) -> usize {
        self.reqs.len() + self.open.len()
    }

    /// The outstanding requests: (request id, node sent to), for a failure report.
    pub fn in_flight_ids(&self) -> Vec<(u64, NodeId)> {
        self.reqs.iter().map(|(&id, r)| (id, r.node)).collect()
    }

    /// Whether every data node is up to date.
    pub fn all_ready(&self) -> bool {
        self.nodes.len() == self.groups.iter().flatten().count()
            && self.nodes.values().all(|n| n.dp.is_ready())
    }

    /// The final check (quiet, every node ready): the replicas of each node group
    /// hold the same rows, and every key's row is what the model allows.
    pub fn check_final(&mut self) -> Result<(), String> {
        self.check_violation()?;
        if !self.table_ready {
            return Ok(());
        }
        let mut by_node = BTreeMap::new();
        for &n in self.nodes.keys() {
            by_node.insert(n, self.rows_of(n)?);
        }
        for group in &self.groups {
            let mut first: Option<(NodeId, &BTreeMap<i64, String>)> = None;
            for n in group {
                let rows = by_node
                    .get(n)
                    .ok_or_else(|| format!("node {n} is not running"))?;
                match first {
                    None => first = Some((*n, rows)),
                    Some((a, ra)) if ra != rows => {
                        return Err(format!(
                            "replicas differ: node {a} holds {ra:?}, node {n} holds {rows:?}"
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        let all: BTreeMap<i64, String> = by_node.into_values().flatten().collect();
        let mut holders: BTreeMap<&str, i64> = BTreeMap::new();
        for (k, v) in &all {
            if let Some(k2) = holders.insert(v, *k) {
                return Err(format!("keys {k2} and {k} both hold the value {v}"));
            }
        }
        for k in 0..self.workload.keys {
            let row = all
                .get(&k)
                .map(|v| vec![Value::Int(k), Value::Str(v.clone())]);
            self.check_read(k, &row, "final read of every replica");
        }
        self.check_violation()
    }

    /// Every row of the workload's table in a node's local engine.
    fn rows_of(&self, node: NodeId) -> Result<BTreeMap<i64, String>, String> {
        let n = self
            .nodes
            .get(&node)
            .ok_or_else(|| format!("node {node} is not running"))?;
        let mut s = Session::new(n.dp.engine.ndb(DB));
        let r = s
            .execute("SELECT id, v FROM kv")
            .map_err(|e| format!("node {node}: {e}"))?;
        let mut out = BTreeMap::new();
        if let Some(SqlResult::Rows { rows, .. }) = r.first() {
            for row in rows {
                if let (Some(Value::Int(k)), Some(Value::Str(v))) = (row.first(), row.get(1)) {
                    out.insert(*k, v.clone());
                }
            }
        }
        Ok(out)
    }
}

enum Outcome {
    Committed(Vec<Option<Vec<Value>>>),
    /// Every round ran and the transaction was rolled back: reads to check, nothing
    /// written.
    RolledBack(Vec<Option<Vec<Value>>>),
    Refused,
    Unknown,
}
