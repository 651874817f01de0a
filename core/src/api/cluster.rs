//! The embedded cluster: data nodes with their DataMemory, node groups, the dictionary
//! and the transaction id and GCI sources; what `Cluster::embedded` starts.
//!
//! Every data node of the configuration gets its own page pool sized from its
//! DataMemory, allocated at start. Partitions are spread over node groups; each
//! partition has one fragment replica on every node of its group, and writes go to every
//! replica (primary first) before they commit.
//!
//! Closing the cluster ([`Cluster::shutdown`], or dropping the last handle) frees every
//! page; transactions still open fail afterwards with error 4009 (Cluster Failure).
//!
//! Management state the running cluster keeps (used by [`crate::mgm`]):
//! - every `Ndb` holds an API node id from the configuration's `[mysqld]`/`[api]` slots
//!   ([`ApiLease`]): the first free slot, released when the `Ndb` and its clones are
//!   dropped; when every slot is taken, the least-used slot is shared (as several `Ndb`
//!   objects share their cluster connection's node id in NDB);
//! - single user mode ([`ClusterInner::enter_single_user_mode`]): while on, only `Ndb`
//!   objects of the given API node may start transactions, read or change the schema;
//!   the others get error 299. Transactions already open are not aborted;
//! - TransactionDeadlockDetectionTimeout is read from an atomic by every new transaction,
//!   so a `SET` of it ([`ClusterInner::apply_dynamic_params`]) takes effect at once;
//! - the cluster log and event state ([`crate::mgm::MgmState`]).

use super::dict::{Dictionary, TableRuntime, shared_dict};
use crate::config::{ClusterConfig, DataNodeConfig};
use crate::error::{ErrorClassification, NdbError, Result, codes};
use crate::storage::PagePool;
use parking_lot::{Mutex, RwLock};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// One data node (ndbmtd) of the embedded cluster.
pub struct DataNode {
    pub node_id: u32,
    pub node_group: u32,
    pub pool: Arc<PagePool>,
    pub config: DataNodeConfig,
    pub started_at: Instant,
    /// Disk data: logfile group, tablespaces, DiskPageBufferMemory.
    pub disk: Arc<crate::disk::node::NodeDisk>,
    /// Redo log and system file (None when the cluster keeps nothing on disk).
    pub log: Option<Arc<crate::log::node::NodeLog>>,
    /// A `node_restart::NodeRunState`: started, stopped, or restarting.
    pub(crate) run_state: std::sync::atomic::AtomicU8,
    /// The last start phase completed while restarting (`ALL STATUS`).
    pub(crate) start_phase: std::sync::atomic::AtomicU8,
    /// Why the node's last restart failed (None once a restart succeeds).
    pub(crate) restart_failure: parking_lot::Mutex<Option<String>>,
    /// With a data directory: whether the node's own files (checkpoints and redo)
    /// restore it, so that the global checkpoints saved from now on name it
    /// (docs/node-restart.md). False from its stop until its node restart's local
    /// checkpoint is saved, and for a node a system restart found behind.
    pub(crate) files_restorable: AtomicBool,
    /// Whether `files_restorable` held when the node was last stopped: its files then
    /// restore the newest global checkpoint that names it, and its restart begins
    /// from them (`node_restart_own`).
    pub(crate) restorable_at_stop: AtomicBool,
    /// A local checkpoint round that planned this node is under way (from its plan to
    /// the end of its spare files): it may still write in the node's checkpoint
    /// directories, which a restart from the node's own files reads.
    pub(crate) in_lcp_round: AtomicBool,
    /// After a node restart's copy: the first local checkpoint round that counts for
    /// it (u32::MAX: none awaited).
    pub(crate) rejoin_from_lcp: AtomicU32,
    /// The keep position of that round on this node: once the system file holds it,
    /// the node's files restore it again.
    pub(crate) rejoin_keep: parking_lot::Mutex<Option<Vec<u64>>>,
    /// A stop is under way (from before the node reads stopped until its replicas are
    /// discarded): a START waits for it to end.
    pub(crate) stopping: AtomicBool,
}

pub struct ClusterInner {
    pub config: RwLock<ClusterConfig>,
    pub data_nodes: Vec<Arc<DataNode>>,
    pub node_groups: Vec<Vec<Arc<DataNode>>>,
    pub ldm_per_node: u32,
    pub dict: RwLock<Dictionary>,
    pub data_dir: Option<PathBuf>,
    /// Disk-data objects (logfile group, tablespaces).
    pub disk_dict: Mutex<super::disk::DiskDict>,
    /// ndbinfo.transporters of a data node process (`rndbd` sets it; the embedded
    /// cluster has no transporters): `ndbinfo::transporters`.
    pub transporters: crate::ndbinfo::TransporterSource,
    /// Every live data node's ndbinfo rows while a query over TCP runs
    /// (`ndbinfo::GatheredRows`; empty otherwise).
    pub ndbinfo_gathered: crate::ndbinfo::GatheredRows,
    /// A private directory holding the data nodes' files when no data directory was
    /// given; removed at shutdown.
    scratch_dir: Option<PathBuf>,
    /// Files an initial start removed (reported once by the shell and the cluster log).
    pub initial_removed: Vec<PathBuf>,
    next_txn: AtomicU64,
    closed: AtomicBool,
    started_at: Instant,
    /// Global checkpoints: the GCI of commits, durability waits.
    pub gcp: crate::log::gcp::GlobalCheckpoint,
    /// Where the data nodes' files live.
    pub fs: Arc<dyn crate::disk::io::FileSystem>,
    /// What the last system restart did (None after a fresh start).
    pub restart: Mutex<Option<super::durability::RestartStats>>,
    gcp_driver: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// One local checkpoint round at a time ([`ClusterInner::run_lcp`]).
    pub(crate) lcp_lock: Mutex<()>,
    /// The id of the next local checkpoint.
    pub(crate) lcp_next_id: AtomicU32,
    /// Held while a node stop or start checks the node group and changes the node's
    /// state (`api::node_restart`): two stops in one group cannot both pass the check.
    pub(crate) node_state_change: Mutex<()>,
    /// One more than the id of the newest local checkpoint completed (0: none yet).
    pub(crate) lcp_completed_next: AtomicU32,
    /// A local checkpoint was asked for ([`ClusterInner::request_lcp`]): the LCP driver
    /// starts one at its next look.
    pub(crate) lcp_requested: std::sync::atomic::AtomicBool,
    /// The first LCP round that is part of this node's own restart (paced at
    /// MaxDiskWriteSpeedOwnRestart), u32::MAX for none: set by
    /// [`ClusterInner::request_lcp`], cleared when such a round completes.
    pub(crate) lcp_own_restart_from: AtomicU32,
    /// What the last local checkpoint wrote.
    pub last_lcp: Mutex<Option<super::lcp::LcpStats>>,
    lcp_driver: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Wakes the LCP driver (redo filling up, shutdown).
    pub(crate) lcp_wakeup: Arc<super::durability::Wakeup>,
    /// Dropped tables whose checkpoint files the next LCP round removes.
    pub(crate) dropped_lcp_tables: Mutex<Vec<u32>>,
    /// TransactionDeadlockDetectionTimeout, dynamic (see [`ClusterInner::apply_dynamic_params`]).
    lock_timeout_ms: AtomicU64,
    max_operations: usize,
    pub transactions_started: AtomicU64,
    pub transactions_committed: AtomicU64,
    pub transactions_aborted: AtomicU64,
    /// API node id allowed in single user mode; 0 = single user mode off.
    single_user: AtomicU32,
    api_slots: Arc<ApiSlots>,
    /// Cluster log and management event state.
    pub mgm: crate::mgm::MgmState,
    /// This cluster's own handle, for the threads it starts (a node restart's copy).
    me: std::sync::OnceLock<std::sync::Weak<ClusterInner>>,
    /// Bumped at every change of a fragment replica's role (node stop, restart):
    /// a transaction that chose a partition's replicas under an older value chooses
    /// again (`node_restart`).
    pub(crate) replica_epoch: AtomicU64,
    /// Partitions of a new table when set (non-zero): a data node process's local
    /// engine holds its replicas of a cluster with more node groups than itself
    /// ([`ClusterInner::set_default_partitions`]).
    partitions_override: AtomicU32,
}

/// The `[mysqld]`/`[api]` node ids of the configuration and how many `Ndb` objects hold
/// each.
struct ApiSlots {
    ids: Vec<u32>,
    users: Mutex<Vec<usize>>,
}

/// An API node id held by an `Ndb` (shared by its clones); the slot is released on drop.
/// `node_id` is 0 when the configuration has no API slot.
pub struct ApiLease {
    slots: Arc<ApiSlots>,
    index: Option<usize>,
    pub node_id: u32,
}

impl Drop for ApiLease {
    fn drop(&mut self) {
        if let Some(i) = self.index {
            let mut users = self.slots.users.lock();
            users[i] = users[i].saturating_sub(1);
        }
    }
}

/// NDB error 299.
pub fn single_user_mode_error() -> NdbError {
    NdbError::new(
        299,
        ErrorClassification::ApplicationError,
        "Operation not allowed due to single user mode",
    )
}

/// LDM instances per data node from MaxNoOfExecutionThreads, as ndbmtd divides its
/// threads (0 = our default of 2, one per core of the reference machine).
pub fn ldm_threads(max_no_of_execution_threads: u32) -> u32 {
    match max_no_of_execution_threads {
        0 => 2,
        1..=3 => 1,
        4..=6 => 2,
        7..=10 => 4,
        11..=18 => 6,
        19..=24 => 8,
        25..=36 => 12,
        _ => 16,
    }
}

impl ClusterInner {
    pub fn start(config: ClusterConfig, data_dir: Option<PathBuf>) -> Result<Arc<ClusterInner>> {
        Self::start_with(config, data_dir, false)
    }

    /// Starts the cluster; `initial` (ndbd --initial) first removes the disk-data files
    /// an earlier run of the data nodes created in their file-system directories.
    pub fn start_with(
        config: ClusterConfig,
        data_dir: Option<PathBuf>,
        initial: bool,
    ) -> Result<Arc<ClusterInner>> {
        Self::start_on(
            config,
            data_dir,
            initial,
            Arc::new(crate::disk::io::OsFileSystem),
        )
    }

    /// [`ClusterInner::start_with`] on the file system `fs` (the crash and fault tests
    /// run the real disk-data code on an in-memory file system that injects ENOSPC and
    /// EIO).
    pub fn start_on(
        config: ClusterConfig,
        data_dir: Option<PathBuf>,
        initial: bool,
        fs: Arc<dyn crate::disk::io::FileSystem>,
    ) -> Result<Arc<ClusterInner>> {
        Self::start_reporting(config, data_dir, initial, fs, &|_| {})
    }

    /// [`ClusterInner::start_on`], handing each progress line of a system restart
    /// (also written to the cluster log) to `progress` as it happens.
    pub fn start_reporting(
        config: ClusterConfig,
        data_dir: Option<PathBuf>,
        initial: bool,
        fs: Arc<dyn crate::disk::io::FileSystem>,
        progress: &dyn Fn(&str),
    ) -> Result<Arc<ClusterInner>> {
        Self::start_full(
            config,
            data_dir,
            initial,
            fs,
            progress,
            &LocalEngineStart::default(),
        )
    }

    /// The start of every constructor above, with what a data node process adds
    /// ([`LocalEngineStart`]).
    pub fn start_full(
        config: ClusterConfig,
        data_dir: Option<PathBuf>,
        initial: bool,
        fs: Arc<dyn crate::disk::io::FileSystem>,
        progress: &dyn Fn(&str),
        local: &LocalEngineStart,
    ) -> Result<Arc<ClusterInner>> {
        use crate::disk::node::NodeDisk;
        if config.data_nodes.is_empty() {
            return Err(codes::bad_config(
                "the configuration has no data node ([ndbd] section)",
            ));
        }
        let started_at = Instant::now();
        // The created-files manifest records paths under the data directory: an
        // absolute one keeps a later initial start from another working directory
        // finding them.
        let data_dir = match data_dir {
            Some(d) if d.is_relative() => {
                Some(std::env::current_dir().map(|cwd| cwd.join(&d)).unwrap_or(d))
            }
            other => other,
        };
        let scratch_dir = match &data_dir {
            Some(_) => None,
            None => Some(scratch_dir_path("rndb")),
        };
        let base = data_dir
            .clone()
            .or_else(|| scratch_dir.clone())
            .unwrap_or_default();
        let mut initial_removed = Vec::new();
        if initial {
            for dn in &config.data_nodes {
                let fs_dir = super::durability::node_fs_dir(&base, dn.node_id);
                initial_removed.extend(NodeDisk::remove_created_files(&*fs, &fs_dir)?);
                // The node's own file system (redo, system file, checkpoints) goes too,
                // as NDB's --initial clears it; only the disk-data files above are
                // listed: those are what NDB leaves behind.
                super::durability::remove_node_logs(&*fs, &fs_dir)?;
            }
        }
        let diskless = config
            .data_nodes
            .first()
            .and_then(|d| d.get_bool("Diskless"))
            .unwrap_or(false);
        let plan = super::durability::plan_start(
            &config,
            &fs,
            &base,
            data_dir.is_some() && !diskless,
            local.restore_cap,
        )?;
        let mut data_nodes: Vec<Arc<DataNode>> = Vec::with_capacity(config.data_nodes.len());
        for (dn, log) in config.data_nodes.iter().zip(&plan.logs) {
            let fs_dir = super::durability::node_fs_dir(&base, dn.node_id);
            let disk = Arc::new(NodeDisk::with_doublewrite(
                dn.node_id,
                fs.clone(),
                fs_dir,
                dn.disk_page_buffer_memory,
                dn.get_u64("DiskPageBufferEntries").unwrap_or(10) as usize,
                dn.shared_global_memory,
                log.is_some(),
            )?);
            // Dirty pages go to disk in the background (undo log first), so that disk
            // checkpoints find little left to write.
            disk.pgman
                .start_cleaner(std::time::Duration::from_millis(PAGE_CLEANER_INTERVAL_MS))?;
            // DataMemory is reserved at start, as NDB allocates it; a size the address
            // space cannot hold is a start failure with the OS's reason, not a crash.
            let pool = PagePool::try_with_bytes(dn.data_memory).map_err(|e| {
                NdbError::new(
                    4000,
                    crate::error::ErrorClassification::InsufficientSpace,
                    "Out of memory allocating DataMemory at node start",
                )
                .detail(format!(
                    "node {}: DataMemory={} bytes: {e}",
                    dn.node_id, dn.data_memory
                ))
            })?;
            if let Some(log) = log {
                // A restart rolls the disk pages back to the system file's undo keep:
                // the undo log before it is reused only once a later keep is on disk.
                disk.enable_undo_keep(log.undo_keep_lsn());
                let weak = Arc::downgrade(&disk);
                log.set_undo_keep_hook(Box::new(move |lsn| {
                    if let Some(d) = weak.upgrade() {
                        d.note_undo_keep_durable(lsn);
                    }
                }));
            }
            data_nodes.push(Arc::new(DataNode {
                node_id: dn.node_id,
                node_group: dn.node_group,
                pool: Arc::new(pool),
                config: dn.clone(),
                started_at,
                disk,
                log: log.clone(),
                // A node whose files are behind comes up stopped (its replicas dead)
                // and restarts once the others serve.
                run_state: std::sync::atomic::AtomicU8::new(
                    if plan.excluded.contains(&dn.node_id) {
                        super::node_restart::NodeRunState::Stopped as u8
                    } else {
                        super::node_restart::NodeRunState::Started as u8
                    },
                ),
                start_phase: std::sync::atomic::AtomicU8::new(0),
                restart_failure: parking_lot::Mutex::new(None),
                files_restorable: AtomicBool::new(!plan.excluded.contains(&dn.node_id)),
                restorable_at_stop: AtomicBool::new(false),
                in_lcp_round: AtomicBool::new(false),
                rejoin_from_lcp: AtomicU32::new(u32::MAX),
                rejoin_keep: parking_lot::Mutex::new(None),
                stopping: AtomicBool::new(false),
            }));
        }
        let mut node_groups: Vec<Vec<Arc<DataNode>>> = Vec::new();
        for ids in config.node_groups() {
            let group: Vec<Arc<DataNode>> = ids
                .iter()
                .filter_map(|id| data_nodes.iter().find(|n| n.node_id == *id).cloned())
                .collect();
            if group.is_empty() {
                return Err(codes::bad_config("a node group has no data node"));
            }
            node_groups.push(group);
        }
        let first = &config.data_nodes[0];
        let ldm_per_node = ldm_threads(first.max_no_of_execution_threads);
        let gcp_interval_ms = first.time_between_global_checkpoints_ms.max(1);
        let epoch_interval_ms = first.get_u64("TimeBetweenEpochs").unwrap_or(100);
        let lock_timeout_ms = first.transaction_deadlock_detection_timeout_ms;
        let max_operations = first
            .get_u64("MaxNoOfConcurrentOperations")
            .unwrap_or(32768)
            .max(1024) as usize;
        let api_ids: Vec<u32> = config.api_nodes.iter().map(|a| a.node_id).collect();
        let log_dir = data_dir.as_deref().filter(|_| !local.data_node_engine);
        let mgm = crate::mgm::MgmState::new(&config, log_dir);
        if local.data_node_engine {
            mgm.log.start_forwarding();
        }
        let inner = Arc::new(ClusterInner {
            config: RwLock::new(config),
            data_nodes,
            node_groups,
            ldm_per_node,
            dict: shared_dict(),
            data_dir,
            disk_dict: Mutex::new(super::disk::DiskDict::default()),
            transporters: crate::ndbinfo::TransporterSource::default(),
            ndbinfo_gathered: crate::ndbinfo::GatheredRows::default(),
            scratch_dir,
            initial_removed,
            next_txn: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            started_at,
            gcp: crate::log::gcp::GlobalCheckpoint::new(
                plan.first_gci_hi,
                epoch_interval_ms,
                gcp_interval_ms,
            ),
            fs,
            restart: Mutex::new(None),
            gcp_driver: Mutex::new(None),
            lcp_lock: Mutex::new(()),
            lcp_next_id: AtomicU32::new(1),
            node_state_change: Mutex::new(()),
            lcp_completed_next: AtomicU32::new(0),
            lcp_requested: std::sync::atomic::AtomicBool::new(false),
            lcp_own_restart_from: AtomicU32::new(u32::MAX),
            partitions_override: AtomicU32::new(0),
            last_lcp: Mutex::new(None),
            lcp_driver: Mutex::new(None),
            lcp_wakeup: Arc::default(),
            dropped_lcp_tables: Mutex::new(Vec::new()),
            lock_timeout_ms: AtomicU64::new(lock_timeout_ms),
            max_operations,
            transactions_started: AtomicU64::new(0),
            transactions_committed: AtomicU64::new(0),
            transactions_aborted: AtomicU64::new(0),
            single_user: AtomicU32::new(0),
            api_slots: Arc::new(ApiSlots {
                users: Mutex::new(vec![0; api_ids.len()]),
                ids: api_ids,
            }),
            mgm,
            me: std::sync::OnceLock::new(),
            replica_epoch: AtomicU64::new(0),
        });
        let _ = inner.me.set(Arc::downgrade(&inner));
        if local.external_gcp {
            inner.gcp.set_external();
        }
        if let Some(point) = &plan.restore {
            let stats = inner.recover(point, progress)?;
            *inner.restart.lock() = Some(stats);
            if !plan.excluded.is_empty() {
                // Their schema files went with their other files.
                inner.save_schema()?;
            }
        }
        *inner.gcp_driver.lock() = Some(super::durability::spawn_gcp_driver(&inner)?);
        if inner.durable() {
            *inner.lcp_driver.lock() = Some(super::durability::spawn_lcp_driver(&inner)?);
        }
        if !local.data_node_engine {
            crate::mgm::on_cluster_start(&inner);
        }
        // NDB's system restart ends with a node restart of each node that could not
        // take part in it.
        for id in &plan.excluded {
            inner.start_node(*id)?;
        }
        Ok(inner)
    }

    /// This cluster's handle (None while it is being dropped).
    pub(crate) fn arc(&self) -> Option<Arc<ClusterInner>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    /// Makes every new table have `partitions` partitions (0: NDB's default, one per
    /// LDM per node group).
    pub fn set_default_partitions(&self, partitions: u32) {
        self.partitions_override
            .store(partitions, Ordering::Release);
    }

    pub(crate) fn partitions_override(&self) -> u32 {
        self.partitions_override.load(Ordering::Acquire)
    }

    pub fn next_txn_id(&self) -> u64 {
        self.next_txn.fetch_add(1, Ordering::Relaxed)
    }

    /// The GCI a commit entering now gets (checkpoint number << 32 | epoch).
    pub fn current_gci(&self) -> u64 {
        self.gcp.current()
    }

    /// Operations one execute may define (MaxNoOfConcurrentOperations, error 233 beyond).
    pub fn max_operations_per_execute(&self) -> usize {
        self.max_operations
    }

    pub fn lock_timeout_ms(&self) -> u64 {
        self.lock_timeout_ms.load(Ordering::Relaxed)
    }

    /// Applies the parameters the running engine takes without a restart, from the
    /// current configuration: TransactionDeadlockDetectionTimeout (for transactions
    /// started from now on) and DiskPageBufferMemory (each data node's page cache is
    /// resized online; NDB needs a rolling restart for it).
    pub fn apply_dynamic_params(&self) -> Result<()> {
        let config = self.config.read();
        if let Some(first) = config.data_nodes.first() {
            self.lock_timeout_ms.store(
                first.transaction_deadlock_detection_timeout_ms,
                Ordering::Relaxed,
            );
        }
        for dn in &config.data_nodes {
            if let Some(n) = self.node(dn.node_id) {
                n.disk.pgman.resize(dn.disk_page_buffer_memory)?;
            }
        }
        Ok(())
    }

    /// The configuration's API node ids (`[mysqld]`/`[api]` slots), in file order.
    pub fn api_node_ids(&self) -> &[u32] {
        &self.api_slots.ids
    }

    /// API node ids held by at least one `Ndb`.
    pub fn connected_api_nodes(&self) -> Vec<u32> {
        let users = self.api_slots.users.lock();
        self.api_slots
            .ids
            .iter()
            .zip(users.iter())
            .filter(|(_, u)| **u > 0)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Takes an API node id for a new `Ndb`: the first free slot, else the least-used one.
    pub fn lease_api_node(&self) -> ApiLease {
        let mut users = self.api_slots.users.lock();
        let pick = users
            .iter()
            .enumerate()
            .min_by_key(|(i, u)| (**u, *i))
            .map(|(i, _)| i);
        if let Some(i) = pick {
            users[i] += 1;
        }
        ApiLease {
            slots: self.api_slots.clone(),
            index: pick,
            node_id: pick.map_or(0, |i| self.api_slots.ids[i]),
        }
    }

    /// Single user mode for API node `node_id` (must be an API slot of the configuration).
    pub fn enter_single_user_mode(&self, node_id: u32) -> Result<()> {
        self.check_open()?;
        if !self.api_slots.ids.contains(&node_id) {
            return Err(codes::bad_argument(crate::mgm::single_user_text::not_api(
                node_id,
            )));
        }
        match self
            .single_user
            .compare_exchange(0, node_id, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(current) if current == node_id => Ok(()),
            Err(current) => Err(codes::bad_argument(crate::mgm::single_user_text::already(
                current,
            ))),
        }
    }

    /// Leaves single user mode; false when it was not on.
    pub fn exit_single_user_mode(&self) -> bool {
        self.single_user.swap(0, Ordering::AcqRel) != 0
    }

    /// The API node that has exclusive access, when single user mode is on.
    pub fn single_user_node(&self) -> Option<u32> {
        match self.single_user.load(Ordering::Acquire) {
            0 => None,
            n => Some(n),
        }
    }

    /// Error 299 when single user mode is on for another API node than `node_id`.
    pub fn check_api_access(&self, node_id: u32) -> Result<()> {
        match self.single_user_node() {
            Some(n) if n != node_id => Err(single_user_mode_error()),
            _ => Ok(()),
        }
    }

    pub fn uptime_secs(&self) -> u64 {
        self.started_at.elapsed().as_secs()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(codes::cluster_closed())
        } else {
            Ok(())
        }
    }

    pub fn pool_of(&self, node_id: u32) -> Arc<PagePool> {
        self.data_nodes
            .iter()
            .find(|n| n.node_id == node_id)
            .map(|n| n.pool.clone())
            .expect("fragment on a data node of this cluster")
    }

    pub fn node(&self, node_id: u32) -> Option<&Arc<DataNode>> {
        self.data_nodes.iter().find(|n| n.node_id == node_id)
    }

    /// Looks up a table; error 723 when it does not exist.
    pub fn table(&self, database: &str, name: &str) -> Result<Arc<TableRuntime>> {
        self.check_open()?;
        self.dict
            .read()
            .get(database, name)
            .filter(|t| !t.hidden)
            .ok_or_else(|| codes::no_such_table(name))
    }

    /// A graceful shutdown: a last global checkpoint makes every commit durable, then
    /// [`ClusterInner::shutdown_now`]. With checkpoints driven from outside, the data
    /// path has asked its master for that last checkpoint before (a local one would
    /// be a cut the other nodes never made).
    pub fn shutdown(&self) {
        if !self.is_closed() && self.gcp.failure().is_none() && !self.gcp.is_external() {
            // A failure is logged and stops the cluster by itself.
            let _ = self.force_gcp();
        }
        self.shutdown_now();
    }

    /// Marks the cluster closed and returns every page of every table to the pools.
    pub fn shutdown_now(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let tables = self.dict.read().all();
        for t in &tables {
            t.dropped.store(true, Ordering::Release);
        }
        // No page is handed out any more: an operation still running cannot allocate
        // a page that the release below would zero under it.
        for n in &self.data_nodes {
            n.pool.close();
        }
        for t in &tables {
            for cell in t.all_cells() {
                cell.state.lock().force_free_all();
                cell.lock_released.notify_all();
            }
        }
        for n in &self.data_nodes {
            n.pool.release_memory();
            n.disk.pgman.stop_cleaner();
            if let Some(l) = &n.log {
                l.redo.shutdown();
            }
        }
        self.lcp_wakeup.notify();
        if self.gcp.is_external() {
            // A local checkpoint waiting for a checkpoint round that will not come
            // now (the data path stopped) ends with an error instead.
            self.gcp.fail(codes::cluster_closed());
        }
        self.gcp.wake_driver();
        for driver in [&self.gcp_driver, &self.lcp_driver] {
            if let Some(h) = driver.lock().take()
                && h.thread().id() != std::thread::current().id()
            {
                let _ = h.join();
            }
        }
        if let Some(d) = &self.scratch_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Drop for ClusterInner {
    fn drop(&mut self) {
        if let Some(d) = &self.scratch_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// What a data node process (`rndbd`) asks of its local engine at start
/// (`cluster/datapath`): the default is the embedded cluster's own start.
#[derive(Debug, Clone, Default)]
pub struct LocalEngineStart {
    /// A system restart recovers to at most this checkpoint (the one the whole cluster
    /// agreed on), not to the newest this node saved.
    pub restore_cap: Option<u32>,
    /// Checkpoints are cut and saved by the data path's global checkpoint protocol,
    /// not by the engine's timer (`log::gcp`, external mode).
    pub external_gcp: bool,
    /// A data node's local engine (`rndbd`): its management server keeps the cluster
    /// log. The engine writes no `ndb_<id>_cluster.log` of its own into the data
    /// directory (which the management server's may share) and logs no start of its
    /// own (the node does); its events (checkpoints, restart steps) are kept for the
    /// node to send to the management server (`ClusterLog::take_forwarded`).
    pub data_node_engine: bool,
}

/// How often the page cleaner of each data node writes a batch of dirty pages.
pub const PAGE_CLEANER_INTERVAL_MS: u64 = 100;

/// A fresh private directory for a cluster started without a data directory
/// (`<temp>/<prefix>-<pid>-<n>`).
pub(crate) fn scratch_dir_path(prefix: &str) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Handle to a running cluster (cheap to clone).
#[derive(Clone)]
pub struct Cluster {
    pub(crate) inner: Arc<ClusterInner>,
}

impl Cluster {
    /// Starts the embedded cluster described by `config` inside this process.
    pub fn embedded(config: ClusterConfig) -> Result<Cluster> {
        Ok(Cluster {
            inner: ClusterInner::start(config, None)?,
        })
    }

    /// Same, remembering a data directory (file-system path of the data nodes).
    pub fn embedded_in(config: ClusterConfig, data_dir: PathBuf) -> Result<Cluster> {
        Ok(Cluster {
            inner: ClusterInner::start(config, Some(data_dir))?,
        })
    }

    /// An initial start in `data_dir` (ndbd --initial): the disk-data files an earlier
    /// run created there are removed first ([`ClusterInner::initial_removed`]).
    pub fn embedded_initial(config: ClusterConfig, data_dir: PathBuf) -> Result<Cluster> {
        Ok(Cluster {
            inner: ClusterInner::start_with(config, Some(data_dir), true)?,
        })
    }

    /// An embedded cluster whose data nodes keep their files on `fs` under `data_dir`
    /// (fault-injection tests use [`crate::disk::io::MemFileSystem`]).
    pub fn embedded_on(
        config: ClusterConfig,
        data_dir: PathBuf,
        fs: Arc<dyn crate::disk::io::FileSystem>,
    ) -> Result<Cluster> {
        Ok(Cluster {
            inner: ClusterInner::start_on(config, Some(data_dir), false, fs)?,
        })
    }

    /// An embedded cluster on `data_dir` (a system restart when it holds an earlier
    /// run's files; `initial` removes them first) that reports each step of a restart
    /// to `progress` while it runs (the shell prints them).
    pub fn embedded_reporting(
        config: ClusterConfig,
        data_dir: PathBuf,
        initial: bool,
        progress: &dyn Fn(&str),
    ) -> Result<Cluster> {
        Ok(Cluster {
            inner: ClusterInner::start_reporting(
                config,
                Some(data_dir),
                initial,
                Arc::new(crate::disk::io::OsFileSystem),
                progress,
            )?,
        })
    }

    /// Cluster with NDB's default configuration (two data nodes, NoOfReplicas=2).
    pub fn embedded_default() -> Result<Cluster> {
        Cluster::embedded(ClusterConfig::embedded_default())
    }

    pub fn inner(&self) -> &Arc<ClusterInner> {
        &self.inner
    }

    /// An `Ndb` object for a database, like `Ndb(&cluster_connection, "test")`.
    pub fn ndb(&self, database: &str) -> super::Ndb {
        super::Ndb::new(self.inner.clone(), database)
    }

    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Blocks until the commit with GCI `gci` ([`super::Transaction::gci`]) is on disk
    /// on every data node. NDB API has no such call: there a commit is durable "at the
    /// next global checkpoint" and the application cannot tell when that happened.
    pub fn wait_durable(&self, gci: u64, timeout: std::time::Duration) -> Result<()> {
        self.inner.check_open()?;
        self.inner.wait_durable(gci, timeout)
    }

    pub fn data_node_ids(&self) -> Vec<u32> {
        self.inner.data_nodes.iter().map(|n| n.node_id).collect()
    }
}
