//! The data path of a data node process (`rndbd`): its local engine holding the node's
//! fragment replicas, and NDB's TC and LQH roles over the transport (`docs/cluster.md`
//! §6, messages in `transport::data`).
//!
//! - **Local engine**: a one-node [`Cluster`] (NoOfReplicas=1) sized from this node's
//!   `[ndbd]` section, with as many partitions per table as the whole cluster has (one
//!   per LDM per node group), so a key's partition is the same everywhere
//!   (`cluster::layout`). The node's replicas live in it; partitions of other node
//!   groups stay empty.
//! - **TC** (`tc.rs`): a transaction from an API node goes to one data node's TC, which
//!   sends each operation to its partition's primary (by this node's view of the live
//!   nodes), commits once every primary prepared, and answers once every primary
//!   committed.
//! - **LQH** (`lqh.rs`): a primary runs the operations in a local transaction, holding
//!   the locks, and sends the after-images (full rows, or deletes) to the partition's
//!   live backups; it answers the TC when every backup prepared. At commit the
//!   backups commit first, then the primary — so a primary releases a row's lock only
//!   once every replica has the change, and the next change of that row reaches each
//!   backup, over the same connection, after it.
//! - **Failure**: at a view change the TC aborts (4010) what it had not decided, asks
//!   the surviving replicas to commit what it had; a prepared transaction whose TC died
//!   is decided by asking every live node (any committed: commit, else abort).
//! - **Reads**: committed reads of many keys run at the primary, on the node's loop.
//!
//! Threads ([`Threading`]): in a process the node's loop delivers messages
//! ([`DataPath::on_message`]) and ticks ([`DataPath::on_tick`]); reads and table
//! lookups run there; everything of one transaction runs on one of [`WORKERS`]
//! worker threads chosen by its [`TxnKey`], in arrival order, so a transaction's
//! records are never touched by two threads at once; a worker may wait for a row lock
//! (TransactionDeadlockDetectionTimeout bounds the wait). Node-restart copies (both
//! sides) run on one copy thread as state machines stepped by messages and ticks. In
//! the deterministic simulator ([`Threading::Inline`]) every job runs at once on the
//! caller's thread, with the same code; time is the node's tick clock, never the wall
//! clock.
//!
//! Lock order: a copy's own state (`copy`), then `chain_gate`, then `members`, then
//! the `tc` map, then `gcp`, then the `lqh` map, then `recent` and `tombstones`; the `copy_out`
//! map and `copy_in` are leaves (held only to read or swap an entry); no map lock is
//! held while a message is delivered or the engine is called. `files_pending` is a leaf
//! held across the write of the complete-from mark (a file of its own; it reads only the
//! engine's checkpoint counters meanwhile), so that a new join's "not complete" mark and
//! a finished copy's mark never cross.
//!
//! - **Global checkpoints** (`gcp.rs`): the master data node cuts every node's local
//!   engine at the same point (prepare: commit decisions held until no commit is in
//!   flight; commit: the new number; save; durable), so that a system restart of the
//!   whole cluster recovers a consistent cut from the nodes' own files
//!   (`cluster::start_plan`).
//! - **Scans** (`scan.rs`): committed-read table and ordered-index scans of one node
//!   group's partitions, batch by batch, on the node's loop.
//! - **Overload** ([`DataPath::check_send_load`]): new work — a read, a transaction at
//!   its TC, a primary's prepare, a scan's opening — is refused with 1218 while a
//!   connection it would answer or forward over has more than OverloadLimit bytes
//!   unsent (`transport::send_buffer`); work already admitted always goes on.
//!
//! - **SQL DML** (`sql_capture.rs`): an API node's INSERT, REPLACE, UPDATE or DELETE
//!   runs here in a transaction that is rolled back; the rows it would change go back
//!   to the API node, which changes them through a TC (`cluster::remote_sql`).
//!
//! - **Unique indexes with several node groups** (`unique_check.rs`): once every
//!   participant prepared a round, the TC asks the other groups' up-to-date nodes
//!   whether they hold a unique value the round wrote.

mod copy;
mod copy_delta;
mod copy_digest;
mod copy_fold;
mod copy_out;
mod gcp;
pub use gcp::DURABLE_WAITERS_MAX;
mod lease;
mod lqh;
mod lqh_failure;
mod maintenance;
mod ndbinfo;
mod scan;
pub use scan::{MAX_OPEN_SCANS, SCAN_IDLE_MS};
#[cfg(test)]
mod mem_harness;
#[cfg(test)]
mod rounds_tests;
mod schema;
mod sql_capture;
pub use sql_capture::MAX_CAPTURES;
#[cfg(test)]
mod takeover_tests;
mod tc;
mod unique_check;
pub use unique_check::{MAX_UNIQUE_CHECKS, UNIQUE_CHECK_LOCK_WAIT_MS};
#[cfg(test)]
mod view_stamp_tests;

use crate::api::Cluster;
use crate::config::ClusterConfig;
use crate::error::{NdbError, Result, codes};
use crate::schema::Value;
use crate::transport::data::{DataMsg, TxnKey};
use crate::transport::{Message, NodeId, Transport};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Worker threads per data node for transactions.
pub const WORKERS: usize = 8;
/// Jobs waiting per worker, at most (the loop waits for room: back-pressure).
pub const WORKER_QUEUE: usize = 4096;
/// Messages held, per sender, from a data node not yet in this node's view.
pub const EARLY_MAX: usize = 8192;
/// Committed transactions remembered for takeover queries.
pub const RECENT_COMMITTED: usize = 1 << 20;

/// How a data path runs its work (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threading {
    /// Worker threads and a copy thread (a data node process).
    Threads,
    /// Every job at once on the caller's thread (the deterministic simulator).
    Inline,
}

/// A job for a worker.
enum Job {
    Msg(NodeId, DataMsg),
    /// A round of a transaction from an API node.
    Tc(tc::TcRequest),
    /// An API node's connection closed: its open transactions end.
    ApiGone(NodeId),
    /// A copy mark waited too long for this primary record: ask its TC to end the
    /// transaction if it is open (`copy_out`).
    EndOpen(TxnKey),
    /// These data nodes left the view.
    NodesFailed(Vec<NodeId>),
    /// This node left the cluster (an angel restart): forget its transactions.
    Reset,
    /// The copy thread's tick (blocked copy rows, timeouts, lost nodes).
    CopyTick,
    /// A commit decision held by a global checkpoint's prepare is released (`gcp`).
    GcpRelease(TxnKey),
    /// The saver thread: make checkpoint `hi` durable here, then tell `master`.
    GcpSave {
        master: NodeId,
        round: u64,
        hi: u32,
    },
    Stop,
}

/// How a data node process starts its data path (`cluster::start_plan`); the
/// default keeps everything in memory (tests of the protocols).
#[derive(Debug, Clone, Default)]
pub struct DataPathStart {
    /// The node's DataDir: its local engine keeps redo, checkpoints and its system
    /// file under `DataDir/ndb_<id>_fs` (None: in memory only).
    pub data_dir: Option<std::path::PathBuf>,
    /// Remove what the node's file system holds first (a node that copies from a
    /// peer, or `--initial`).
    pub initial: bool,
    /// A system restart, or a node restart from the node's own files: recover to
    /// this checkpoint.
    pub restore_cap: Option<u32>,
    /// A node restart that restored checkpoint `g` from the node's own files: the copy
    /// from a peer sends only the rows changed since `g` (`copy`).
    pub delta_since: Option<u32>,
    /// The lineage of the cluster history the node's files hold
    /// (`cluster::start_plan`; 0: none).
    pub lineage: u64,
    /// A node that restored checkpoint `R` of lineage `L` at a system restart (which
    /// began a new lineage): `(L, R)`. A joining node of lineage `L` that offers a
    /// checkpoint at or below `R` holds a prefix of this node's history.
    pub prior_lineage: Option<(u64, u32)>,
    /// At the cluster's first view, the nodes up to date (None: every member, as at
    /// a fresh start); a node left out copies from them.
    pub first_view_ready: Option<BTreeSet<NodeId>>,
}

/// Ids of recently committed transactions (bounded, oldest forgotten first).
#[derive(Default)]
struct Recent {
    order: VecDeque<TxnKey>,
    set: BTreeSet<TxnKey>,
}

impl Recent {
    fn insert(&mut self, t: TxnKey) {
        if self.set.insert(t) {
            self.order.push_back(t);
            if self.order.len() > RECENT_COMMITTED
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }
}

/// The node's view of the cluster's data nodes.
#[derive(Default)]
struct Membership {
    /// Data nodes in the current view (this node included once it is a member).
    live: BTreeSet<NodeId>,
    /// Nodes whose replicas are up to date, with the order they became so (0: since
    /// the cluster started). A partition's primary is its live ready replica that has
    /// been ready longest (then layout order), so a restarted node never takes a
    /// primary role from a node holding locks.
    ready: BTreeMap<NodeId, u64>,
    /// Nodes being copied to: backups that get every after-image but serve nothing.
    joining: BTreeSet<NodeId>,
    /// Whether this node installed a view since it (re)started.
    in_cluster: bool,
    /// Whether `ready` is known (the cluster's first view, or a `ReadySet`).
    ready_known: bool,
    /// This node left the cluster and has not installed a view since: what data nodes
    /// send it now was meant for its earlier life (an in-place restart keeps the
    /// connections), so it is not held for a later view.
    left: bool,
    /// The installed view's id (0: none).
    view_id: u64,
    /// The id of the first view this life installed (the one that admitted it): what a
    /// data node sent in an older view was meant for an earlier life of this node.
    first_view_id: u64,
}

/// See the module notes.
pub struct DataPath {
    pub(crate) me: NodeId,
    /// Where cluster log lines go (the management server).
    mgm_id: NodeId,
    pub(crate) engine: Cluster,
    out: Arc<dyn Transport>,
    /// The cluster's node groups (data node ids in config order).
    pub(crate) groups: Vec<Vec<NodeId>>,
    members: RwLock<Membership>,
    next_txn: AtomicU64,
    /// The id of the first view this node installed since it (re)started: the high
    /// half of its transaction ids, so that an id is never reused by a later life of
    /// the node (another node may remember the earlier one as committed, and a
    /// takeover would commit the new one by that).
    txn_epoch: AtomicU64,
    next_req: AtomicU64,
    tc: Mutex<BTreeMap<TxnKey, tc::TcTxn>>,
    /// MaxNoOfConcurrentTransactions: the most `tc` records.
    max_transactions: usize,
    /// Open transactions ended while their API waited for nothing (a leaf lock).
    tc_ended: Mutex<tc::Ended>,
    /// By transaction and role (true: backup): a node may be primary of some of a
    /// transaction's partitions and backup of others.
    lqh: Mutex<BTreeMap<(TxnKey, bool), lqh::LqhTxn>>,
    recent: Mutex<Recent>,
    schema_waits: Mutex<BTreeMap<u64, schema::SchemaWait>>,
    /// ndbinfo queries gathering other nodes' rows (`ndbinfo`, a leaf lock).
    gathers: Mutex<BTreeMap<u64, ndbinfo::Gather>>,
    /// Node restart: this node's copy (joining side) and what it still has to apply,
    /// the copies to joining nodes (source side, by joining node), copy marks waiting
    /// for transactions to end, deletes seen while joining.
    copy_in: Mutex<copy::CopyIn>,
    copy_apply: Mutex<copy::ApplyQueue>,
    copy_out: Mutex<BTreeMap<NodeId, Arc<copy_out::CopyOutSlot>>>,
    copy_marks: Mutex<Vec<copy_out::PendingMark>>,
    /// Open scans of API nodes (`scan`, a leaf lock).
    scans: Mutex<scan::Scans>,
    /// Read leases from the node's group, fences after silent failures (`lease`).
    leases: Mutex<lease::Leases>,
    /// HeartbeatIntervalDbDb: the read lease's length.
    lease_ms: u64,
    /// Messages from data nodes not yet in this node's view, by sender (a leaf lock).
    early: Mutex<BTreeMap<NodeId, VecDeque<(u64, DataMsg)>>>,
    tombstones: Mutex<BTreeMap<Vec<u8>, copy::Tomb>>,
    /// A copy of changed rows only: the rows of kept tables the primaries' after-images
    /// touched while they were still at or below the offer's checkpoint (`copy_delta`;
    /// a leaf lock).
    delta_touched: Mutex<Option<copy_fold::Touched>>,
    /// Held (shared) by a primary from choosing its backups to storing its record,
    /// (exclusive) by a copy's mark: see `copy`.
    chain_gate: RwLock<()>,
    /// The copy thread (both sides of node-restart copies; None: inline).
    copy_worker: Option<SyncSender<Job>>,
    /// A `CopyTick` is queued for the copy thread (one at a time).
    copy_tick_queued: AtomicBool,
    /// The joining side's copy attempts so far.
    join_attempt: AtomicU64,
    /// A finished copy whose rows (applied without redo) wait for a local checkpoint
    /// before this node's files count again (`copy`); taken by the tick that writes
    /// the complete-from mark, cleared by a new join.
    files_pending: Mutex<Option<copy::FilesPending>>,
    /// Single user mode: the API node allowed (0: off; `set_single_user`).
    single_user: std::sync::atomic::AtomicU32,
    /// The checkpoint this node restored from its own files, offered to the next copy
    /// source until a copy's schema is applied (`copy_delta`).
    delta_offer: Mutex<Option<u32>>,
    /// The lineage of the history this node's rows belong to (`cluster::start_plan`).
    lineage: AtomicU64,
    /// Global checkpoints across the data nodes (`gcp`): this node's part, and its
    /// commit gate (true: closed, commit decisions are held).
    gcp: Mutex<gcp::GcpNode>,
    gcp_gate: AtomicBool,
    gcp_interval_ms: u64,
    /// The saver thread (None: inline).
    gcp_saver: Option<SyncSender<Job>>,
    threading: Threading,
    /// A failure that must stop the node (a checkpoint that could not be saved).
    fatal: Mutex<Option<String>>,
    /// How this node started (its file system, the first view's up-to-date nodes).
    start: DataPathStart,
    /// The node's clock (ms), as of its last tick: copy deadlines.
    clock_ms: AtomicU64,
    /// Worker threads (empty: inline).
    workers: Vec<SyncSender<Job>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    me_weak: Mutex<std::sync::Weak<DataPath>>,
    /// SQL statements being captured (`sql_capture`), at most `MAX_CAPTURES`.
    captures_running: AtomicUsize,
    /// Hands a statement to a capture thread waiting for one (`sql_capture`).
    capture_threads: sql_capture::CaptureThreads,
    /// Table maintenance statements running (`maintenance`), at most
    /// `MAX_MAINTENANCE`.
    maintenance_running: AtomicUsize,
}

/// A data node's local engine configuration: this node alone, one replica.
pub fn local_config(cfg: &ClusterConfig, me: NodeId) -> Result<ClusterConfig> {
    let node = cfg
        .data_node(me)
        .ok_or_else(|| codes::bad_config(format!("node {me} is not a data node")))?
        .clone();
    let mut local = cfg.clone();
    let mut node = node;
    node.no_of_replicas = 1;
    node.node_group = 0;
    // The stored parameters say so too, so that the local configuration validates when
    // one of its parameters changes (`SET` from the management server).
    node.set_stored("NoOfReplicas", crate::config::ParamValue::Int(1));
    if node.get("NodeGroup").is_some() {
        node.set_stored("NodeGroup", crate::config::ParamValue::Int(0));
    }
    local.data_nodes = vec![node];
    Ok(local)
}

/// 4035 from a node whose replicas are not up to date (starting, or restarting).
pub(crate) fn not_ready(me: NodeId) -> NdbError {
    NdbError::new(
        4035,
        crate::error::ErrorClassification::TemporaryResourceError,
        "Cluster temporary unavailable",
    )
    .detail(format!(
        "data node {me} is starting (its replicas are not up to date)"
    ))
}

/// (code, classification, message) of an error, for a data message.
pub(crate) fn err_parts(e: &NdbError) -> (u32, u8, String) {
    (e.code, e.classification as u8, e.message.clone())
}

/// The error an SQL answer carried (`SqlConf`, `SqlCaptureConf`): NDB's, with the MySQL
/// error number the SQL layer shows for it.
pub fn sql_err_from(code: u32, class: u8, message: &str, mysql_code: u32) -> NdbError {
    err_from(code, class, message).with_mysql_code(mysql_code)
}

/// The error a data message carried, with the MySQL error number mysqld reports for
/// its code (`error::mysql_code_of`).
pub fn err_from(code: u32, class: u8, message: &str) -> NdbError {
    NdbError::new(
        code,
        crate::error::ErrorClassification::from_u8(class),
        message.to_string(),
    )
    .with_mysql_code(crate::error::mysql_code_of(code))
}

impl DataPath {
    /// Starts the local engine and the workers. `out` sends to other nodes.
    pub fn start(
        cfg: &ClusterConfig,
        me: NodeId,
        mgm_id: NodeId,
        out: Arc<dyn Transport>,
    ) -> Result<Arc<Self>> {
        Self::start_with(cfg, me, mgm_id, out, Threading::Threads)
    }

    /// [`DataPath::start`] of a data node process with its file system.
    pub fn start_in(
        cfg: &ClusterConfig,
        me: NodeId,
        mgm_id: NodeId,
        out: Arc<dyn Transport>,
        start: DataPathStart,
    ) -> Result<Arc<Self>> {
        Self::start_full(cfg, me, mgm_id, out, Threading::Threads, start)
    }

    /// Starts the local engine, with worker threads or inline (the simulator).
    pub fn start_with(
        cfg: &ClusterConfig,
        me: NodeId,
        mgm_id: NodeId,
        out: Arc<dyn Transport>,
        threading: Threading,
    ) -> Result<Arc<Self>> {
        Self::start_full(cfg, me, mgm_id, out, threading, DataPathStart::default())
    }

    fn start_full(
        cfg: &ClusterConfig,
        me: NodeId,
        mgm_id: NodeId,
        out: Arc<dyn Transport>,
        threading: Threading,
        start: DataPathStart,
    ) -> Result<Arc<Self>> {
        let local = local_config(cfg, me)?;
        let gcp_interval_ms = local
            .data_nodes
            .first()
            .map_or(2000, |n| n.time_between_global_checkpoints_ms.max(1));
        let engine = Cluster {
            inner: crate::api::ClusterInner::start_full(
                local,
                start.data_dir.clone(),
                start.initial,
                Arc::new(crate::disk::io::OsFileSystem),
                &|_| {},
                &crate::api::LocalEngineStart {
                    restore_cap: start.restore_cap,
                    external_gcp: threading == Threading::Threads,
                    data_node_engine: true,
                },
            )?,
        };
        let groups: Vec<Vec<NodeId>> = cfg.node_groups();
        let ldm = engine.inner().ldm_per_node;
        engine
            .inner()
            .set_default_partitions(ldm * groups.len().max(1) as u32);
        let threads = threading == Threading::Threads;
        let mut senders = Vec::with_capacity(WORKERS);
        let mut receivers = Vec::with_capacity(WORKERS);
        for _ in 0..if threads { WORKERS } else { 0 } {
            let (tx, rx) = sync_channel::<Job>(WORKER_QUEUE);
            senders.push(tx);
            receivers.push(rx);
        }
        let (copy_tx, copy_rx) = if threads {
            let (tx, rx) = sync_channel::<Job>(copy::COPY_QUEUE);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        // One save at a time is asked for (a master runs one round at a time).
        let (saver_tx, saver_rx) = if threads {
            let (tx, rx) = sync_channel::<Job>(4);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let dp = Arc::new(DataPath {
            copy_in: Mutex::new(copy::CopyIn::Idle),
            copy_apply: Mutex::new(copy::ApplyQueue::default()),
            copy_out: Mutex::new(BTreeMap::new()),
            copy_marks: Mutex::new(Vec::new()),
            early: Mutex::new(BTreeMap::new()),
            scans: Mutex::new(scan::Scans::default()),
            leases: Mutex::new(lease::Leases::default()),
            lease_ms: super::qmgr::MembershipConfig::from_cluster(cfg).heartbeat_interval_ms,
            tombstones: Mutex::new(BTreeMap::new()),
            delta_touched: Mutex::new(None),
            chain_gate: RwLock::new(()),
            copy_worker: copy_tx,
            copy_tick_queued: AtomicBool::new(false),
            files_pending: Mutex::new(None),
            single_user: std::sync::atomic::AtomicU32::new(0),
            join_attempt: AtomicU64::new(0),
            delta_offer: Mutex::new(start.delta_since),
            lineage: AtomicU64::new(start.lineage),
            clock_ms: AtomicU64::new(0),
            gcp: Mutex::new(gcp::GcpNode::default()),
            gcp_gate: AtomicBool::new(false),
            gcp_interval_ms,
            gcp_saver: saver_tx,
            threading,
            fatal: Mutex::new(None),
            start,
            me,
            mgm_id,
            engine,
            out,
            groups,
            members: RwLock::new(Membership::default()),
            next_txn: AtomicU64::new(1),
            txn_epoch: AtomicU64::new(0),
            next_req: AtomicU64::new(1),
            tc: Mutex::new(BTreeMap::new()),
            max_transactions: cfg
                .data_node(me)
                .and_then(|n| n.get_u64("MaxNoOfConcurrentTransactions"))
                .unwrap_or(4096) as usize,
            tc_ended: Mutex::new(tc::Ended::default()),
            lqh: Mutex::new(BTreeMap::new()),
            recent: Mutex::new(Recent::default()),
            schema_waits: Mutex::new(BTreeMap::new()),
            gathers: Mutex::new(BTreeMap::new()),
            workers: senders,
            threads: Mutex::new(Vec::new()),
            me_weak: Mutex::new(std::sync::Weak::new()),
            captures_running: AtomicUsize::new(0),
            capture_threads: sql_capture::CaptureThreads::new(),
            maintenance_running: AtomicUsize::new(0),
        });
        *dp.me_weak.lock() = Arc::downgrade(&dp);
        for (i, rx) in receivers.into_iter().enumerate() {
            let weak = Arc::downgrade(&dp);
            let t = std::thread::Builder::new()
                .name(format!("rndbd-{me}-w{i}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        let Some(dp) = weak.upgrade() else { return };
                        if matches!(job, Job::Stop) {
                            return;
                        }
                        dp.run_job(i, job);
                    }
                })
                .map_err(|e| codes::internal(format!("data path worker: {e}")))?;
            dp.threads.lock().push(t);
        }
        if let Some(copy_rx) = copy_rx {
            let weak = Arc::downgrade(&dp);
            let t = std::thread::Builder::new()
                .name(format!("rndbd-{me}-copy"))
                .spawn(move || {
                    while let Ok(job) = copy_rx.recv() {
                        let Some(dp) = weak.upgrade() else { return };
                        if matches!(job, Job::Stop) {
                            return;
                        }
                        dp.run_copy_job(job);
                    }
                })
                .map_err(|e| codes::internal(format!("copy thread: {e}")))?;
            dp.threads.lock().push(t);
        }
        if let Some(saver_rx) = saver_rx {
            let weak = Arc::downgrade(&dp);
            let t = std::thread::Builder::new()
                .name(format!("rndbd-{me}-gcp"))
                .spawn(move || {
                    while let Ok(job) = saver_rx.recv() {
                        let Some(dp) = weak.upgrade() else { return };
                        match job {
                            Job::GcpSave { master, round, hi } => {
                                dp.run_gcp_save(master, round, hi)
                            }
                            _ => return,
                        }
                    }
                })
                .map_err(|e| codes::internal(format!("checkpoint saver thread: {e}")))?;
            dp.threads.lock().push(t);
        }
        Ok(dp)
    }

    /// Runs a worker's job (on worker `worker`'s thread, or inline).
    fn run_job(&self, worker: usize, job: Job) {
        match job {
            Job::Msg(from, m) => self.handle(worker, from, m),
            Job::Tc(r) => self.tc_request(worker, r),
            Job::ApiGone(api) => self.tc_api_gone(worker, api),
            Job::EndOpen(txn) => self.lqh_ask_end_open(worker, txn),
            Job::NodesFailed(nodes) => self.nodes_failed(worker, &nodes),
            Job::Reset => self.reset_worker(worker),
            Job::GcpRelease(txn) => self.tc_release(worker, txn),
            Job::GcpSave { master, round, hi } => self.run_gcp_save(master, round, hi),
            Job::CopyTick | Job::Stop => {}
        }
    }

    /// Gives worker `worker` a job (inline: runs it now). A full queue waits (the
    /// loop's back-pressure).
    fn dispatch(&self, worker: usize, job: Job) {
        match self.workers.get(worker) {
            Some(w) => {
                let _ = w.send(job);
            }
            None => self.run_job(worker, job),
        }
    }

    /// Gives the copy thread a job (inline: runs it now).
    fn dispatch_copy(&self, job: Job) {
        match &self.copy_worker {
            Some(w) => {
                let _ = w.send(job);
            }
            None => self.run_copy_job(job),
        }
    }

    /// The node's clock as of its last tick.
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock_ms.load(Ordering::Acquire)
    }

    /// Stops the workers and the local engine.
    pub fn stop(&self) {
        for w in self
            .workers
            .iter()
            .chain(self.copy_worker.as_ref())
            .chain(self.gcp_saver.as_ref())
        {
            let _ = w.send(Job::Stop);
        }
        let threads: Vec<JoinHandle<()>> = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        self.engine.shutdown();
    }

    fn worker_of(txn: &TxnKey) -> usize {
        ((txn.id ^ (u64::from(txn.tc) << 40)) % WORKERS as u64) as usize
    }

    /// The live data nodes of the view other than this one.
    pub(super) fn other_live_nodes(&self) -> BTreeSet<NodeId> {
        let m = self.members.read();
        m.live.iter().copied().filter(|&n| n != self.me).collect()
    }

    pub(crate) fn is_live(&self, n: NodeId) -> bool {
        self.members.read().live.contains(&n)
    }

    /// Single user mode from the management server (`SINGLE USER <id>` / `OFF`).
    pub fn set_single_user(&self, api: Option<NodeId>) {
        self.single_user.store(api.unwrap_or(0), Ordering::Release);
    }

    /// The API node that has exclusive access, if single user mode is on.
    pub fn single_user(&self) -> Option<NodeId> {
        match self.single_user.load(Ordering::Acquire) {
            0 => None,
            n => Some(n),
        }
    }

    /// 299 for an API node other than the single user while single user mode is on.
    pub(crate) fn check_api_access(&self, api: NodeId) -> Result<()> {
        match self.single_user() {
            Some(n) if n != api => Err(crate::api::cluster::single_user_mode_error().detail(
                format!("data node {} serves only API node {n} now", self.me),
            )),
            _ => Ok(()),
        }
    }

    /// Whether this node's replicas are up to date (it may serve reads and be primary).
    pub fn is_ready(&self) -> bool {
        let m = self.members.read();
        m.live.contains(&self.me) && m.ready.contains_key(&self.me)
    }

    /// The live replicas of `partition` to write: the ready ones, primary first, then
    /// the joining ones.
    pub(crate) fn live_replicas(&self, partition: usize) -> Vec<NodeId> {
        let m = self.members.read();
        let layout = super::layout::replica_nodes(partition, &self.groups);
        let mut ready: Vec<(u64, usize, NodeId)> = layout
            .iter()
            .enumerate()
            .filter(|(_, n)| m.live.contains(n))
            .filter_map(|(i, n)| m.ready.get(n).map(|&seq| (seq, i, *n)))
            .collect();
        ready.sort_unstable();
        let mut out: Vec<NodeId> = ready.into_iter().map(|(_, _, n)| n).collect();
        let joining: Vec<NodeId> = layout
            .iter()
            .filter(|n| m.live.contains(n) && m.joining.contains(n) && !out.contains(n))
            .copied()
            .collect();
        out.extend(joining);
        out
    }

    /// A new view (empty: this node left the cluster, e.g. an angel restart).
    pub fn on_view(&self, view: &crate::transport::View) {
        let (failed, joined_running, source_lost, first_view_id) = {
            let mut m = self.members.write();
            let new: BTreeSet<NodeId> = view.members.iter().map(|&(n, _)| n).collect();
            let failed: Vec<NodeId> = m.live.difference(&new).copied().collect();
            let mut joined_running = false;
            if new.is_empty() {
                *m = Membership {
                    left: true,
                    ..Membership::default()
                };
            } else if !m.in_cluster {
                m.left = false;
                m.first_view_id = view.id;
                // This node's first view: at the cluster's first view every node starts
                // empty, so every member is up to date; joining a running cluster, this
                // node learns who is (`ReadySet`) and gets its rows by copy.
                m.in_cluster = true;
                self.txn_epoch.store(view.id, Ordering::Release);
                if view.id == 1 {
                    // A system restart names the nodes that restored the cluster's
                    // checkpoint; the others copy from them.
                    let ready_at_start = |n: &NodeId| {
                        self.start
                            .first_view_ready
                            .as_ref()
                            .is_none_or(|r| r.contains(n))
                    };
                    m.ready = new
                        .iter()
                        .filter(|n| ready_at_start(n))
                        .map(|&n| (n, 0))
                        .collect();
                    m.ready_known = true;
                    joined_running = !ready_at_start(&self.me);
                } else {
                    joined_running = true;
                }
                m.live = new;
            } else {
                // Nodes that join now are not up to date; nodes gone are not either.
                let joined: Vec<NodeId> = new.difference(&m.live).copied().collect();
                for n in joined.iter().chain(&failed) {
                    m.ready.remove(n);
                    m.joining.remove(n);
                }
                m.live = new;
            }
            if !view.members.is_empty() {
                m.view_id = view.id;
            }
            let source_lost = matches!(*self.copy_in.lock(), copy::CopyIn::Copying { source, .. } if failed.contains(&source));
            (failed, joined_running, source_lost, m.first_view_id)
        };
        // What failed nodes sent before this view is of a life that ended; what nodes
        // now in the view sent up to this view is theirs: deliver it, in order, except
        // what was sent before this life's first view (meant for an earlier life of
        // this node); what was sent in a newer view waits for it.
        let early: Vec<(NodeId, Vec<DataMsg>)> = {
            let mut e = self.early.lock();
            if view.members.is_empty() {
                e.clear();
            }
            for n in &failed {
                e.remove(n);
            }
            // A sender outside this view that sent in a view up to this one was dropped
            // by a view since: what it sent then is of a life that ended.
            let in_view = |n: &NodeId| view.members.iter().any(|m| m.0 == *n);
            for (n, q) in e.iter_mut() {
                if !in_view(n) {
                    q.retain(|(stamp, _)| *stamp == 0 || *stamp > view.id);
                }
            }
            e.retain(|_, q| !q.is_empty());
            let mut due = Vec::new();
            for &(n, _) in &view.members {
                let Some(q) = e.get_mut(&n) else { continue };
                let mut msgs = Vec::new();
                while q.front().is_some_and(|(stamp, _)| *stamp <= view.id) {
                    let Some((stamp, msg)) = q.pop_front() else {
                        break;
                    };
                    if stamp == 0 || stamp >= first_view_id {
                        msgs.push(msg);
                    }
                }
                if q.is_empty() {
                    e.remove(&n);
                }
                if !msgs.is_empty() {
                    due.push((n, msgs));
                }
            }
            due
        };
        self.lease_view(&failed, view.members.is_empty());
        self.gcp_on_view();
        if let Some(me) = self.me_arc() {
            for (n, q) in early {
                for m in q {
                    me.on_message(n, m);
                }
            }
        }
        if view.members.is_empty() {
            // Leaving the cluster is a crash for the data: nothing of this life is
            // sent to the other nodes (they already treat it as failed).
            *self.copy_in.lock() = copy::CopyIn::Idle;
            self.copy_out.lock().clear();
            self.copy_marks.lock().clear();
            self.tombstones.lock().clear();
            *self.delta_touched.lock() = None;
            self.scans_reset();
            for w in 0..WORKERS {
                self.dispatch(w, Job::Reset);
            }
            return;
        }
        if joined_running {
            self.begin_join();
        }
        if source_lost {
            self.restart_join("the copy source failed", None);
        }
        if !failed.is_empty() {
            for w in 0..WORKERS {
                self.dispatch(w, Job::NodesFailed(failed.clone()));
            }
            self.schema_nodes_failed(&failed);
            self.gather_nodes_failed(&failed);
        }
    }

    /// Keeps a message from a data node outside this node's view until a view with it
    /// (bounded: a sender past [`EARLY_MAX`] loses what it sent, and says so in the
    /// log); after this node left the cluster and until its next view, drops it.
    fn hold_early(&self, from: NodeId, view_id: u64, msg: DataMsg) {
        if self.members.read().left {
            return;
        }
        let overflow = {
            let mut e = self.early.lock();
            let q = e.entry(from).or_default();
            q.push_back((view_id, msg));
            if q.len() > EARLY_MAX {
                e.remove(&from);
                true
            } else {
                false
            }
        };
        if overflow {
            self.log(
                crate::mgm::log::Severity::Warning,
                &format!(
                    "more than {EARLY_MAX} messages from node {from}, which is not in this node's view: dropped"
                ),
            );
        }
    }

    /// The transporter to `peer` closed: what it sent and this node has not heard yet
    /// belongs to a process that ended.
    pub fn on_disconnect(&self, peer: NodeId) {
        self.early.lock().remove(&peer);
        self.lease_closed(peer);
        if !self.is_data_node(peer) {
            // An API node: the transactions it left open end (NDB's API failure
            // handling in DBTC).
            for w in 0..WORKERS {
                self.dispatch(w, Job::ApiGone(peer));
            }
        }
    }

    /// Some(why) when a node group has no live up-to-date replica left: its rows are
    /// gone (a node still copying holds only part of them), so the cluster cannot go
    /// on — every node shuts down and the cluster starts again (NDB's cluster failure
    /// on a lost node group).
    pub fn lost_node_group(&self) -> Option<String> {
        let m = self.members.read();
        if !m.in_cluster || !m.ready_known || m.live.is_empty() {
            return None;
        }
        let (g, group) = self.groups.iter().enumerate().find(|(_, group)| {
            !group
                .iter()
                .any(|n| m.live.contains(n) && m.ready.contains_key(n))
        })?;
        let copying: Vec<String> = group
            .iter()
            .filter(|n| m.live.contains(n))
            .map(|n| n.to_string())
            .collect();
        Some(if copying.is_empty() {
            format!("node group {g} has no node left")
        } else {
            format!(
                "node group {g} has no up-to-date replica left (node {} had not finished its copy)",
                copying.join(", ")
            )
        })
    }

    /// Whether a node restart is under way (schema changes wait, as NDB's 711).
    pub(crate) fn restart_in_progress(&self) -> bool {
        let members_restarting = {
            let m = self.members.read();
            !m.joining.is_empty() || m.live.iter().any(|n| !m.ready.contains_key(n))
        };
        members_restarting || !self.copy_out.lock().is_empty()
    }

    /// Whether `n` is one of the cluster's data nodes (API nodes are anonymous peers).
    fn is_data_node(&self, n: NodeId) -> bool {
        self.groups.iter().flatten().any(|&d| d == n)
    }

    /// A message from data node `from`, sent in its view `view_id` (the node's loop
    /// calls this): dropped when it was meant for an earlier life of this node (sent
    /// in a view older than the one that admitted this life) or comes from a life of
    /// `from` that a view up to this node's dropped; held while `from`'s view is newer
    /// than this node's (it is delivered when this node installs that view, so nothing
    /// is handled against an older view of the members than its sender's).
    pub fn on_message_in_view(self: &Arc<Self>, from: NodeId, view_id: u64, msg: DataMsg) {
        if from == self.me || view_id == 0 || !self.is_data_node(from) {
            return self.on_message(from, msg);
        }
        enum Verdict {
            Drop,
            Hold,
            Deliver,
        }
        let verdict = {
            let m = self.members.read();
            if m.left || (m.in_cluster && view_id < m.first_view_id) {
                Verdict::Drop
            } else if !m.in_cluster || view_id > m.view_id {
                Verdict::Hold
            } else if !m.live.contains(&from) {
                Verdict::Drop
            } else {
                Verdict::Deliver
            }
        };
        match verdict {
            Verdict::Drop => {}
            Verdict::Hold => self.hold_early(from, view_id, msg),
            Verdict::Deliver => self.on_message(from, msg),
        }
    }

    /// A message from the transport (the node's loop calls this; data nodes' come
    /// through [`DataPath::on_message_in_view`]).
    pub fn on_message(self: &Arc<Self>, from: NodeId, msg: DataMsg) {
        // Data nodes outside the view are not heard (a node declared dead may still
        // have frames in flight); API nodes are anonymous peers above every data node id.
        // A data node this node has not seen in a view yet (its view may be newer) is
        // heard once this node installs that view (`on_view`).
        let from_data_node = self.is_data_node(from);
        if from_data_node && !self.is_live(from) {
            self.hold_early(from, 0, msg);
            return;
        }
        match msg {
            DataMsg::ReadReq {
                req,
                database,
                table,
                columns,
                keys,
            } => {
                let reply = self.read(from, req, &database, &table, &columns, &keys);
                self.send(from, reply);
            }
            DataMsg::TableReq {
                req,
                database,
                table,
            } => {
                let reply = self.table_def(req, &database, &table);
                self.send(from, reply);
            }
            DataMsg::ScanReq(r) => self.scan_open(from, *r),
            DataMsg::ScanNextReq { req, scan } => self.scan_next(from, req, scan),
            DataMsg::ScanCloseReq { scan } => self.scan_close(from, scan),
            DataMsg::SqlConf {
                req,
                code,
                class,
                text,
                ..
            } => self.schema_answer(from, req, code, class, text),
            DataMsg::LeasePing { seq } => self.on_lease_ping(from, seq),
            DataMsg::LeasePong { seq } => self.on_lease_pong(from, seq),
            DataMsg::NdbinfoReq { req, tables } => {
                let (tables, truncated) = self.own_ndbinfo_rows(&tables);
                self.send(
                    from,
                    DataMsg::NdbinfoConf {
                        req,
                        tables,
                        truncated,
                    },
                );
            }
            m @ DataMsg::NdbinfoConf { .. } => self.dispatch(0, Job::Msg(from, m)),
            DataMsg::ReadyQuery => {
                if self.is_ready() {
                    let ready = self.ready_map();
                    self.send(from, DataMsg::ReadySet { ready });
                }
            }
            DataMsg::ReadySet { ready } => self.on_ready_set(from, ready),
            DataMsg::CopyMark { node, mark } => self.on_copy_mark(from, node, mark),
            m @ (DataMsg::CopyReq { .. }
            | DataMsg::CopyMarked { .. }
            | DataMsg::CopyAck { .. }
            | DataMsg::CopySchema { .. }
            | DataMsg::CopyRows { .. }
            | DataMsg::CopyDigest { .. }
            | DataMsg::CopyRecheck { .. }
            | DataMsg::CopyDone { .. }) => self.dispatch_copy(Job::Msg(from, m)),
            DataMsg::CopyAbort { attempt, reason } => {
                self.restart_join(&reason, (attempt != u64::MAX).then_some(attempt))
            }
            DataMsg::NodeReady { node, seq } => self.on_node_ready(node, seq),
            m @ (DataMsg::GcpPrepare { .. }
            | DataMsg::GcpPrepared { .. }
            | DataMsg::GcpCommit { .. }
            | DataMsg::GcpCommitted { .. }
            | DataMsg::GcpSave { .. }
            | DataMsg::GcpSaved { .. }
            | DataMsg::GcpDurable { .. }
            | DataMsg::GcpAsk) => self.on_gcp_message(from, m),
            DataMsg::DurableReq { req, gci } => self.on_durable_req(from, req, gci),
            m @ (DataMsg::SqlReq { .. } | DataMsg::SchemaReq { .. }) => {
                self.dispatch(0, Job::Msg(from, m));
            }
            DataMsg::SqlCaptureReq {
                req,
                database,
                sql,
                auto_increment_floor,
                overlay,
                given_rows,
                vars,
            } => {
                let overlay = overlay
                    .into_iter()
                    .map(|r| crate::sql::OverlayRow {
                        database: r.database,
                        table: r.table,
                        key: r.key,
                        row: r.after,
                    })
                    .collect();
                let inputs = sql_capture::CaptureRequest {
                    auto_increment_floor,
                    overlay,
                    given_rows,
                    vars,
                };
                self.on_sql_capture(from, req, database, sql, inputs)
            }
            DataMsg::TcKeyReq {
                req,
                txn,
                exec,
                ops,
                ignore_errors,
            } => {
                let new = txn == 0;
                let txn = TxnKey {
                    tc: self.me,
                    id: if new {
                        let n = self.next_txn.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff;
                        (self.txn_epoch.load(Ordering::Acquire) << 32) | n
                    } else {
                        txn
                    },
                };
                let job = Job::Tc(tc::TcRequest {
                    api: from,
                    txn,
                    new,
                    req,
                    exec,
                    ops,
                    ignore_errors,
                });
                self.dispatch(Self::worker_of(&txn), job);
            }
            m => {
                let txn = match &m {
                    DataMsg::LqhPrepare { txn, .. }
                    | DataMsg::LqhPrepared { txn, .. }
                    | DataMsg::LqhCommit { txn, .. }
                    | DataMsg::LqhCommitted { txn, .. }
                    | DataMsg::LqhAbort { txn }
                    | DataMsg::TxnStateReq { txn }
                    | DataMsg::TxnStateConf { txn, .. }
                    | DataMsg::UniqueCheckReq { txn, .. }
                    | DataMsg::UniqueCheckConf { txn, .. } => *txn,
                    _ => return,
                };
                self.dispatch(Self::worker_of(&txn), Job::Msg(from, m));
            }
        }
    }

    /// New work that would answer or forward over the connection to any of `peers`
    /// is refused while that connection is overloaded (1218, temporary: NDB's LQH
    /// and TC check the same); this node itself is never overloaded.
    pub(crate) fn check_send_load(&self, peers: impl IntoIterator<Item = NodeId>) -> Result<()> {
        match peers
            .into_iter()
            .find(|&p| p != self.me && self.out.overloaded(p))
        {
            Some(p) => Err(codes::send_buffers_overloaded(format!(
                "data node {} has more than OverloadLimit bytes unsent to node {p}",
                self.me
            ))),
            None => Ok(()),
        }
    }

    /// Sends to another node, or handles a message to this node at once (on the
    /// calling worker: a transaction's messages to itself stay on its worker).
    pub(crate) fn send(&self, to: NodeId, msg: DataMsg) {
        self.send_from(usize::MAX, to, msg);
    }

    pub(crate) fn send_from(&self, worker: usize, to: NodeId, msg: DataMsg) {
        if to == self.me {
            match msg {
                // Messages the loop handles (copy protocol) go through it.
                // Inline, they go round through the transport: the copy code that sends
                // them holds its copy's state.
                m @ (DataMsg::CopyMark { .. }
                | DataMsg::CopyMarked { .. }
                | DataMsg::CopyAck { .. }
                | DataMsg::CopyReq { .. }
                | DataMsg::NodeReady { .. }) => {
                    if self.workers.is_empty() {
                        self.out.send(self.me, &Message::Data(m));
                    } else if let Some(me) = self.me_arc() {
                        me.on_message(self.me, m);
                    }
                }
                m => self.handle(worker, to, m),
            }
        } else if self.is_data_node(to) {
            let view_id = self.members.read().view_id;
            self.out.send(to, &Message::DataInView { view_id, msg });
        } else {
            self.out.send(to, &Message::Data(msg));
        }
    }

    fn handle(&self, worker: usize, from: NodeId, msg: DataMsg) {
        match msg {
            DataMsg::LqhPrepare {
                txn,
                backup,
                round,
                ops,
                ignore_errors,
            } => self.lqh_prepare(worker, from, txn, backup, round, ops, ignore_errors),
            DataMsg::LqhPrepared {
                txn,
                backup,
                round,
                code,
                class,
                message,
                reads,
                checks,
                failed,
            } => {
                let err = (code != 0).then(|| err_from(code, class, &message));
                if backup {
                    self.lqh_backup_prepared(worker, from, txn, round, err);
                } else {
                    let answer = tc::RoundAnswer {
                        reads,
                        checks,
                        failed,
                    };
                    self.tc_prepared(worker, from, txn, round, err, answer);
                }
            }
            DataMsg::LqhCommit {
                txn,
                backup,
                gci_hi,
            } => self.lqh_commit(worker, from, txn, backup, gci_hi),
            DataMsg::LqhCommitted { txn, backup, gci } => {
                if backup {
                    self.lqh_backup_committed(worker, from, txn);
                } else {
                    self.tc_committed(worker, from, txn, gci);
                }
            }
            DataMsg::LqhAbort { txn } => self.lqh_abort(worker, from, txn),
            DataMsg::TxnStateReq { txn } => {
                let state = self.txn_state(&txn);
                self.send_from(worker, from, DataMsg::TxnStateConf { txn, state });
            }
            DataMsg::TxnStateConf { txn, state } => {
                self.tc_taker_unknown(worker, from, txn, state);
                self.takeover_answer(worker, from, txn, state)
            }
            DataMsg::UniqueCheckReq { txn, round, checks } => {
                self.unique_check(worker, from, txn, round, &checks)
            }
            DataMsg::UniqueCheckConf {
                txn,
                round,
                code,
                class,
                message,
            } => {
                let err = (code != 0).then(|| err_from(code, class, &message));
                self.tc_unique_checked(worker, from, txn, round, err);
            }
            DataMsg::SqlReq {
                req,
                database,
                sql,
                vars,
            } => self.sql(from, req, &database, &sql, &vars),
            DataMsg::NdbinfoConf {
                req,
                tables,
                truncated,
            } => self.gather_answer(from, req, tables, truncated),
            DataMsg::SchemaReq {
                req,
                database,
                sql,
                vars,
            } => self.schema_apply(from, req, &database, &sql, &vars),
            _ => {}
        }
    }

    /// Drops the records this worker owns without a message to another data node
    /// (API nodes are told: 4010, or 4012 for a commit under way).
    fn reset_worker(&self, worker: usize) {
        self.tc_reset(worker);
        self.lqh_reset(worker);
    }

    fn nodes_failed(&self, worker: usize, nodes: &[NodeId]) {
        self.tc_nodes_failed(worker, nodes);
        self.lqh_nodes_failed(worker, nodes);
    }

    /// A cluster log line of this node.
    pub(crate) fn log(&self, severity: crate::mgm::log::Severity, text: &str) {
        self.out.send(
            self.mgm_id,
            &Message::Event {
                severity: severity as u8,
                text: text.to_string(),
            },
        );
    }

    /// This data path as an `Arc` (for threads it starts).
    fn me_arc(&self) -> Option<Arc<DataPath>> {
        self.me_weak.lock().upgrade()
    }

    pub(crate) fn note_committed(&self, txn: TxnKey) {
        self.recent.lock().insert(txn);
    }

    pub(crate) fn was_committed(&self, txn: &TxnKey) -> bool {
        self.recent.lock().set.contains(txn)
    }

    pub(crate) fn next_req(&self) -> u64 {
        self.next_req.fetch_add(1, Ordering::Relaxed)
    }

    /// Committed reads of many keys (this node must hold their partitions).
    fn read(
        &self,
        api: NodeId,
        req: u64,
        database: &str,
        table: &str,
        columns: &[u32],
        keys: &[Value],
    ) -> DataMsg {
        let r = (|| -> Result<(Vec<bool>, Vec<Value>)> {
            if !self.is_ready() {
                return Err(not_ready(self.me));
            }
            self.check_api_access(api)?;
            self.check_serving()?;
            self.check_send_load([api])?;
            let rt = self.engine.inner().table(database, table)?;
            let cols: Vec<usize> = if columns.is_empty() {
                (0..rt.def.columns.len())
                    .filter(|&c| !rt.def.columns[c].hidden)
                    .collect()
            } else {
                columns.iter().map(|&c| c as usize).collect()
            };
            let ndb = self.engine.ndb(database);
            let (mut out, mut found) = (Vec::new(), Vec::new());
            ndb.read_batch_into(&rt, keys, &cols, &mut out, &mut found)?;
            Ok((found, out))
        })();
        match r {
            Ok((found, values)) => DataMsg::ReadConf {
                req,
                code: 0,
                class: 0,
                message: String::new(),
                found,
                values,
            },
            Err(e) => {
                let (code, class, message) = err_parts(&e);
                DataMsg::ReadConf {
                    req,
                    code,
                    class,
                    message,
                    found: Vec::new(),
                    values: Vec::new(),
                }
            }
        }
    }

    fn table_def(&self, req: u64, database: &str, table: &str) -> DataMsg {
        match self.engine.inner().table(database, table) {
            Ok(rt) if !rt.hidden => DataMsg::TableConf {
                req,
                code: 0,
                class: 0,
                message: String::new(),
                def: Some(crate::transport::data::WireTableDef(Box::new(
                    (*rt.def).clone(),
                ))),
            },
            Ok(_) | Err(_) => {
                let (code, class, message) = err_parts(&codes::no_such_table(table));
                DataMsg::TableConf {
                    req,
                    code,
                    class,
                    message,
                    def: None,
                }
            }
        }
    }
}
