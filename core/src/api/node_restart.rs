//! Stopping and restarting one data node of the embedded cluster while the others
//! serve: NDB's `<id> STOP`, `<id> START`, `<id> RESTART [-n] [-i]` and the rolling
//! restart built from them (docs/node-restart.md, which has the roles, the copy's
//! steps and the lock-order argument).
//!
//! Stop: every fragment replica of the node becomes dead (each under its mutex, so no
//! operation is inside it), its memory goes back to the node's DataMemory, and the
//! partitions go on with their other replicas (the next replica in node-group order
//! becomes primary). A transaction that had prepared on the node commits on the
//! others; one whose primary stopped under it gets 4010 (temporary). A node whose stop
//! would leave some partition without a live replica is refused (NDB's "Node shutdown
//! would cause system crash", unless it is the whole cluster's shutdown).
//!
//! Start: the node's replicas become *starting* (fed every commit of their partition
//! from now on) and each is copied from its partition's primary in batches of
//! [`COPY_BATCH_ROWS`] rows (`txn::fragment::replica`); once copied, a replica is
//! joining (a backup only), and a follower of the primary until every transaction that
//! began preparing without it is done; then it is live, and may be primary again.
//! Without a data directory this is an initial node restart's copy (every row). With
//! one, the node first restores its replicas from its own files to its last saved
//! global checkpoint `g` (`node_restart_own`), the copy then sends only the rows
//! changed after `g`, and a sweep deletes the restored rows whose keys the primary no
//! longer holds; a node whose files restore nothing (its previous restart had not
//! completed), and replicas of tables with disk columns, get every row. The restore
//! and the copy run on a thread of its own (the replicas restore on one thread per
//! core while they are still dead, and are copied on half the cores while the cluster
//! serves); `ALL STATUS` shows the node `starting
//! (Last completed phase 1)` while it restores, `(Last completed phase 4)` while it
//! copies, then `started`.
//!
//! Configuration: a node takes the DataMemory its configuration has when it starts
//! (`SET DataMemory=...`, then `<id> RESTART` or `ROLLING RESTART`, as with NDB).
//!
//! Durability (with a data directory; docs/node-restart.md "Node restarts of a durable
//! cluster"): from its stop the node is left out of the set of nodes each saved global
//! checkpoint names as restoring it (its redo misses what commits meanwhile); it saves
//! no checkpoint while stopped, and local checkpoints skip it. The copy is not written
//! to its redo log, so after the copy its replicas are written by the next local
//! checkpoint round, which is asked for at once (the replicas restored from its files
//! continue their chains with what changed; the others are written in full); once its
//! system file holds that round's keep position, the checkpoints name it again. A system restart before then
//! restores the cluster from the other nodes and restarts this one by copy. A round
//! that planned the node before its stop may still scan its replicas while they are
//! discarded and copied again: what it writes for them is superseded by the full round
//! (a discard keeps the replica marked for a full round whatever a scan that began
//! before it does), and a stop or start never waits for a round. A stop saves a global
//! checkpoint that leaves the node out before it discards anything: the node's disk
//! pages are written in place, so a system restart that restores the node from its own
//! files must find them as they were at a checkpoint before the stop. Disk-data
//! columns are copied with their rows; a system restart that finds a node behind gives
//! all of its extents back to their tablespaces before its copy.
//!
//! Lock order: `node_state_change` (a stop's or start's check and state change), then
//! the dictionary's read lock (to list
//! tables and to fix the node's state against a concurrent CREATE TABLE), then a
//! primary's mutex, then the restarting replica's.

use super::cluster::{ClusterInner, DataNode};
use super::node_restart_own::{NodeCell, OwnRestore};
use crate::checkpoint::run_parallel;
use crate::error::{NdbError, Result};
use crate::mgm::log::Severity;
use crate::txn::FragmentCell;
use crate::txn::fragment::{CopyProgress, ReplicaRole};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Rows copied per hold of the two mutexes.
pub const COPY_BATCH_ROWS: usize = 256;

/// Threads a node restart copies its replicas on: half the cores (at least one). The
/// copy runs while the cluster serves, and takes primaries' mutexes batch by batch: on
/// 2 cores, two copy threads raised the longest 100-update transaction of the
/// `node_restart` bench's 10k updates/s from 6 ms to 57 ms (the copy itself went from
/// 1.58 s to 1.30 s at 1 GB), so the other half of the machine stays with the traffic.
fn copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// What a node restart's copy did, summed over the node's replicas.
#[derive(Debug, Clone, Copy, Default)]
struct CopyTotals {
    rows_copied: u64,
    /// Source rows not copied: unchanged since the GCI the replica was restored to.
    rows_unchanged: u64,
    /// Restored rows deleted: gone at the source since that GCI.
    rows_swept: u64,
}

/// A data node's state in its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum NodeRunState {
    Started = 0,
    Stopped = 1,
    /// Restarting: its replicas are being copied.
    Starting = 2,
}

impl DataNode {
    pub fn run_state(&self) -> NodeRunState {
        Self::decode_run_state(self.run_state.load(Ordering::Acquire))
    }

    /// The state, read SeqCst (paired with `DataNode::in_lcp_round`).
    pub(crate) fn run_state_seq_cst(&self) -> NodeRunState {
        Self::decode_run_state(self.run_state.load(Ordering::SeqCst))
    }

    fn decode_run_state(v: u8) -> NodeRunState {
        match v {
            0 => NodeRunState::Started,
            1 => NodeRunState::Stopped,
            _ => NodeRunState::Starting,
        }
    }

    /// The node's state after its cluster was closed (`mgm::all_data_nodes_down`).
    pub(crate) fn mark_stopped(&self) {
        self.set_run_state(NodeRunState::Stopped);
    }

    fn set_run_state(&self, s: NodeRunState) {
        self.run_state.store(s as u8, Ordering::Release);
    }

    /// The last start phase completed (NDB's numbers: 4 while the copy runs).
    pub fn start_phase(&self) -> u8 {
        self.start_phase.load(Ordering::Acquire)
    }

    /// Whether the node's own files restore it: always true without redo; with a data
    /// directory, false from its stop until the local checkpoint after its node
    /// restart's copy is saved.
    pub fn restart_complete(&self) -> bool {
        self.log.is_none() || self.files_restorable.load(Ordering::Acquire)
    }
}

fn mgm_error(text: String) -> NdbError {
    crate::mgm::mgm_error(text)
}

/// Every fragment replica the node holds, with its partition's replicas.
fn node_cells(
    cluster: &ClusterInner,
    node_id: u32,
) -> Vec<(Arc<super::dict::TableRuntime>, usize, Arc<FragmentCell>)> {
    let mut out = Vec::new();
    let mut tables = cluster.dict.read().all();
    tables.sort_by_key(|t| t.def.id);
    for t in tables {
        for (p, reps) in t.fragments.iter().enumerate() {
            if let Some(c) = reps.iter().find(|c| c.node_id == node_id) {
                out.push((t.clone(), p, c.clone()));
            }
        }
    }
    out
}

impl ClusterInner {
    fn bump_replica_epoch(&self) {
        self.replica_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether the data nodes write redo and checkpoints (a data directory, not
    /// Diskless).
    pub(crate) fn durable(&self) -> bool {
        self.data_nodes.iter().any(|n| n.log.is_some())
    }

    /// Whether `<id> STOP` may stop `node` now: it is started, and another node of its
    /// group is started and (with a data directory) has completed its restart, so that
    /// its files can restore the group. Returns the node's group.
    fn check_stop(&self, node: &DataNode) -> Result<Vec<Arc<DataNode>>> {
        let id = node.node_id;
        match node.run_state() {
            NodeRunState::Stopped => {
                return Err(mgm_error(format!("Node {id}: already stopped")));
            }
            NodeRunState::Starting => {
                return Err(mgm_error(format!(
                    "Node {id}: is starting; stop it once it has started"
                )));
            }
            NodeRunState::Started => {}
        }
        let group = self
            .node_groups
            .iter()
            .find(|g| g.iter().any(|n| n.node_id == id))
            .cloned()
            .unwrap_or_default();
        let others: Vec<&Arc<DataNode>> = group
            .iter()
            .filter(|n| n.node_id != id && n.run_state() == NodeRunState::Started)
            .collect();
        let Some(first_other) = others.first() else {
            return Err(mgm_error(format!(
                "Shutdown of node {id} failed: Node shutdown would cause system crash (node {id} holds the last live replica of node group {}); use SHUTDOWN to stop the cluster",
                node.node_group
            )));
        };
        if !others.iter().any(|n| n.restart_complete()) {
            return Err(mgm_error(format!(
                "Shutdown of node {id} failed: Node shutdown would cause system crash (node {} of node group {} has not yet saved the local checkpoint that completes its node restart, so node {id}'s files are the group's only restorable copy); try again once ALL STATUS shows it started",
                first_other.node_id, node.node_group
            )));
        }
        Ok(group)
    }

    /// `<id> STOP` (see the module notes). Returns once the node's replicas are dead
    /// and its memory freed.
    pub fn stop_node(&self, id: u32) -> Result<()> {
        self.check_open()?;
        let node = self
            .node(id)
            .cloned()
            .ok_or_else(|| mgm_error(format!("Node {id}: not a data node")))?;
        self.check_stop(&node)?;
        // Fixed against CREATE TABLE: a table created from now on gives this node a
        // dead replica.
        let (cells, group) = {
            let _change = self.node_state_change.lock();
            let _dict = self.dict.read();
            // Again under the lock: another stop may have run meanwhile.
            let group = self.check_stop(&node)?;
            // Before the state reads stopped: a START that sees it stopped sees this
            // too until the replicas are discarded below.
            node.stopping.store(true, Ordering::SeqCst);
            node.set_run_state(NodeRunState::Stopped);
            node.start_phase.store(0, Ordering::Release);
            // Its files no longer restore it: the checkpoints saved from now on leave
            // it out (its redo misses what commits from here on).
            node.restorable_at_stop.store(
                node.files_restorable.swap(false, Ordering::AcqRel),
                Ordering::Release,
            );
            node.rejoin_from_lcp.store(u32::MAX, Ordering::Release);
            *node.rejoin_keep.lock() = None;
            drop(_dict);
            (node_cells(self, id), group)
        };
        for (_, _, cell) in &cells {
            let mut f = cell.state.lock();
            cell.set_role(&mut f, ReplicaRole::Dead);
            self.bump_replica_epoch();
            drop(f);
            cell.lock_released.notify_all();
        }
        let saved = if self.durable() {
            // A global checkpoint that leaves the node out is saved before anything of
            // its is discarded: a system restart can then restore the node from its own
            // files only to a checkpoint before its stop, and its disk pages (written
            // in place, unlike its redo and checkpoint files) are as they were then.
            self.force_gcp().map(|_| ())
        } else {
            Ok(())
        };
        if saved.is_ok() {
            for (_, _, cell) in &cells {
                let mut f = cell.state.lock();
                f.discard_all();
                drop(f);
                cell.lock_released.notify_all();
            }
        }
        node.stopping.store(false, Ordering::SeqCst);
        saved?;
        for (t, p, cell) in &cells {
            for other in &t.fragments[*p] {
                other.remove_follower(cell);
            }
        }
        self.mgm
            .log
            .event(Severity::Alert, id, "Node shutdown completed.");
        if let Some(p) = group
            .iter()
            .find(|n| n.run_state() == NodeRunState::Started)
        {
            self.mgm.log.event(
                Severity::Info,
                p.node_id,
                &format!(
                    "Node {id} left the cluster; node group {} continues with node {}",
                    node.node_group, p.node_id
                ),
            );
        }
        Ok(())
    }

    /// `<id> START` of a stopped node: its replicas are copied from the live ones on a
    /// thread of its own (see the module notes); returns once the copy has begun.
    pub fn start_node(&self, id: u32) -> Result<()> {
        self.check_open()?;
        let me = self.arc().ok_or_else(crate::error::codes::cluster_closed)?;
        let node = self
            .node(id)
            .cloned()
            .ok_or_else(|| mgm_error(format!("Node {id}: not a data node")))?;
        let state = node.run_state();
        if state == NodeRunState::Stopped && node.stopping.load(Ordering::SeqCst) {
            return Err(mgm_error(format!(
                "Start failed: node {id} is still stopping; start it once it has stopped"
            )));
        }
        if state != NodeRunState::Stopped {
            return Err(mgm_error(format!(
                "Start failed: node {id} is already {}",
                if node.run_state() == NodeRunState::Started {
                    "started"
                } else {
                    "starting"
                }
            )));
        }
        self.apply_node_data_memory(&node)?;
        let cells = {
            let _change = self.node_state_change.lock();
            let _dict = self.dict.read();
            // One START wins (another may have passed the checks above meanwhile).
            if node
                .run_state
                .compare_exchange(
                    NodeRunState::Stopped as u8,
                    NodeRunState::Starting as u8,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_err()
            {
                return Err(mgm_error(format!(
                    "Start failed: node {id} is already starting"
                )));
            }
            node.start_phase.store(1, Ordering::Release);
            node_cells(self, id)
        };
        let cluster = me;
        std::thread::Builder::new()
            .name(format!("rndb-node-restart-{id}"))
            .spawn(move || {
                let t0 = Instant::now();
                let own = cluster.restore_for_node_restart(&node, &cells);
                cluster.begin_node_copy(&cells);
                node.start_phase.store(4, Ordering::Release);
                cluster.mgm.log.event(
                    Severity::Info,
                    id,
                    &match &own {
                        Some(o) => format!(
                            "Start phase 4 completed (node restart): copying to {} fragment replicas what changed since GCI {} ({} replicas restored from the node's own files, {} copied whole)",
                            cells.len(),
                            o.gci_hi,
                            o.restored.iter().filter(|r| **r).count(),
                            o.restored.iter().filter(|r| !**r).count()
                        ),
                        None => format!(
                            "Start phase 4 completed (node restart): copying {} fragment replicas from the live nodes",
                            cells.len()
                        ),
                    },
                );
                match cluster.copy_node(&node, &cells, own.as_ref()) {
                    Ok(copy) => {
                        let rows = copy.rows_copied;
                        *node.restart_failure.lock() = None;
                        // What the copy wrote is in no checkpoint chain and not in the
                        // redo log: the first round that starts once the node is
                        // started writes it (rounds skip the node until then). A
                        // replica restored from the node's files continues its chain
                        // (the copy and the sweep marked what they changed); the
                        // others are written in full (the stop's discard marked them,
                        // and a round that began scanning them before the stop cannot
                        // clear that mark).
                        for (i, (_, _, cell)) in cells.iter().enumerate() {
                            if !own.as_ref().is_some_and(|o| o.restored[i]) {
                                cell.state.lock().require_full_lcp();
                            }
                        }
                        if let Some(o) = &own {
                            cluster.mgm.log.event(
                                Severity::Info,
                                id,
                                &format!(
                                    "Node restart copy: {} rows changed since GCI {} copied, {} unchanged rows kept, {} rows gone at the source deleted",
                                    copy.rows_copied, o.gci_hi, copy.rows_unchanged, copy.rows_swept
                                ),
                            );
                        }
                        if !cluster.durable() {
                            node.start_phase.store(5, Ordering::Release);
                            node.set_run_state(NodeRunState::Started);
                            cluster.mgm.log.event(
                                Severity::Info,
                                id,
                                &format!(
                                    "Start phase 5 completed (node restart): {rows} rows copied in {} ms",
                                    t0.elapsed().as_millis()
                                ),
                            );
                            cluster.mgm.log.event(Severity::Info, id, "Started (node restart)");
                            return;
                        }
                        // With a data directory the restart completes with the local
                        // checkpoint after the copy (`restorable_nodes` logs it); the
                        // node serves meanwhile.
                        node.rejoin_from_lcp.store(
                            cluster.lcp_next_id.load(Ordering::Acquire),
                            Ordering::Release,
                        );
                        node.set_run_state(NodeRunState::Started);
                        cluster.request_lcp();
                        cluster.mgm.log.event(
                            Severity::Info,
                            id,
                            &format!(
                                "Node restart: {rows} rows copied in {} ms; the node serves, and its restart completes with the local checkpoint asked for now",
                                t0.elapsed().as_millis()
                            ),
                        );
                    }
                    Err(e) => {
                        for (_, _, cell) in &cells {
                            let mut f = cell.state.lock();
                            cell.set_role(&mut f, ReplicaRole::Dead);
                            cluster.bump_replica_epoch();
                            f.discard_all();
                        }
                        for (t, p, cell) in &cells {
                            for other in &t.fragments[*p] {
                                other.remove_follower(cell);
                            }
                        }
                        *node.restart_failure.lock() = Some(e.message.clone());
                        node.set_run_state(NodeRunState::Stopped);
                        node.start_phase.store(0, Ordering::Release);
                        cluster.mgm.log.event(
                            Severity::Alert,
                            id,
                            &format!("Node restart failed: {}; the node is stopped again", e.message),
                        );
                    }
                }
            })
            .map_err(|e| crate::error::codes::internal(format!("node restart thread: {e}")))?;
        Ok(())
    }

    /// A stopped node takes the DataMemory its configuration has now (`SET DataMemory`
    /// since it started): its pool, empty while the node is stopped, is mapped again at
    /// the new size. NDB reads DataMemory only when a node starts, so a rolling restart
    /// is how it changes; here too.
    fn apply_node_data_memory(&self, node: &DataNode) -> Result<()> {
        let id = node.node_id;
        let Some(bytes) = self.config.read().data_node(id).map(|d| d.data_memory) else {
            return Ok(());
        };
        let pages = (bytes / crate::storage::PAGE_SIZE as u64) as u32;
        let before = node.pool.total_pages();
        if pages == before {
            return Ok(());
        }
        node.pool.resize(pages).map_err(|e| {
            mgm_error(format!(
                "Start of node {id} failed: DataMemory cannot change to {} MB: {e}",
                bytes >> 20
            ))
        })?;
        self.mgm.log.event(
            Severity::Info,
            id,
            &format!(
                "DataMemory changed from {} MB to {} MB ({before} to {pages} pages of 32 KB) at the node restart",
                (u64::from(before) * crate::storage::PAGE_SIZE as u64) >> 20,
                bytes >> 20
            ),
        );
        Ok(())
    }

    /// Every replica of the node takes its partition's commits from now on (as a
    /// follower of the partition's replicas).
    fn begin_node_copy(&self, cells: &[NodeCell]) {
        for (t, p, cell) in cells {
            let mut f = cell.state.lock();
            f.restart_error = None;
            cell.set_role(&mut f, ReplicaRole::Starting);
            self.bump_replica_epoch();
            drop(f);
            for other in &t.fragments[*p] {
                if !Arc::ptr_eq(other, cell) {
                    let _g = other.state.lock();
                    other.add_follower(cell);
                }
            }
        }
    }

    /// The restore of a durable node restart from the node's own files
    /// (`node_restart_own`), logged; None when it copies every row (no data
    /// directory, files that restore nothing, or a restore that failed: logged, and
    /// the replicas are empty again).
    fn restore_for_node_restart(&self, node: &DataNode, cells: &[NodeCell]) -> Option<OwnRestore> {
        let id = node.node_id;
        match self.restore_node_from_own_files(node, cells) {
            Ok(Some(o)) => {
                self.mgm.log.event(
                    Severity::Info,
                    id,
                    &format!(
                        "Node restart from its own files: restored GCI {} ({} fragments, {} rows from local checkpoints in {} ms; {} redo records, {} bytes in {} ms)",
                        o.gci_hi,
                        o.fragments,
                        o.rows,
                        (o.secs_restore * 1000.0) as u64,
                        o.redo_records,
                        o.redo_bytes,
                        (o.secs_redo * 1000.0) as u64
                    ),
                );
                Some(o)
            }
            Ok(None) => None,
            Err(e) => {
                self.mgm.log.event(
                    Severity::Warning,
                    id,
                    &format!(
                        "Node restart from its own files failed: {}; every row is copied instead",
                        e.message
                    ),
                );
                None
            }
        }
    }

    /// Copies one replica (`cell`, partition `p` of `t`) from its partition's
    /// primary, then sweeps it when it was restored (`since_gci` > 0), until it is
    /// joining; returns what it did and the transaction id from which transactions
    /// see it joining. None when it stopped early because another replica's copy
    /// failed (`failed`: that copy's error is the restart's).
    fn copy_replica(
        &self,
        t: &Arc<super::dict::TableRuntime>,
        p: usize,
        cell: &Arc<FragmentCell>,
        since_gci: u32,
        failed: &std::sync::atomic::AtomicBool,
    ) -> Result<Option<(CopyProgress, u64)>> {
        let mut progress = CopyProgress {
            since_gci,
            ..CopyProgress::default()
        };
        let mut source_node = 0u32;
        // The copy's position is a row id of its source: OPTIMIZE moves no row of
        // the source while it is open (opened before the source's mutex is taken).
        let mut position: Option<crate::txn::fragment::ScanCursor> = None;
        while !(progress.done && progress.swept) {
            self.check_open()?;
            if failed.load(Ordering::Acquire) {
                return Ok(None);
            }
            if t.dropped.load(Ordering::Acquire) {
                break;
            }
            let primary = t.primary_or_err(p)?.clone();
            if position.as_ref().map(|c| c.node_id) != Some(primary.node_id) {
                position = Some(primary.open_cursor());
            }
            let mut src = primary.state.lock();
            if !primary.is_live() {
                continue;
            }
            if source_node != primary.node_id {
                // The copy's position is a row id of its source: a new source (the
                // old one stopped) is copied from its start (the rows are the same,
                // and writing a row again changes nothing), and swept again.
                progress = CopyProgress {
                    since_gci,
                    rows_copied: progress.rows_copied,
                    rows_swept: progress.rows_swept,
                    ..CopyProgress::default()
                };
                source_node = primary.node_id;
            }
            let mut dst = cell.state.lock();
            if let Some(e) = dst.restart_error.take() {
                return Err(e);
            }
            if !progress.done {
                src.copy_rows_to(&mut dst, &mut progress, COPY_BATCH_ROWS)?;
            } else {
                let gci_hi = crate::log::gcp::gci_hi(self.gcp.current());
                self.gcp.note_change(gci_hi);
                dst.sweep_rows_gone_from(&mut src, &mut progress, COPY_BATCH_ROWS, gci_hi)?;
            }
            if progress.done && progress.swept {
                // New transactions write to it from now on (as a backup); those
                // already preparing without it reach it as a follower.
                cell.set_role(&mut dst, ReplicaRole::Joining);
                // Before any primary's mutex is free again: a transaction that chose
                // the partition's replicas without it sees the change when it locks
                // the primary, and chooses again.
                self.bump_replica_epoch();
            }
            drop(dst);
            drop(src);
            if !progress.done && progress.next == u32::MAX {
                // Only rows held by unfinished transactions are left.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(Some((progress, self.next_txn_id())))
    }

    /// The copy of a node restart (only what changed since `own.gci_hi` into the
    /// replicas `own` restored, every row into the others). The replicas are copied on
    /// [`copy_threads`] threads (each copies one replica at a time: distinct
    /// partitions, so no two threads ever hold the same mutex).
    fn copy_node(
        &self,
        node: &DataNode,
        cells: &[NodeCell],
        own: Option<&OwnRestore>,
    ) -> Result<CopyTotals> {
        let failed = std::sync::atomic::AtomicBool::new(false);
        let work: Vec<usize> = (0..cells.len()).collect();
        let results = run_parallel(work, copy_threads(), |_, i| {
            let since_gci = own.filter(|o| o.restored[i]).map_or(0, |o| o.gci_hi);
            let (t, p, cell) = &cells[i];
            let r = self.copy_replica(t, *p, cell, since_gci, &failed);
            if r.is_err() {
                failed.store(true, Ordering::Release);
            }
            r
        });
        let mut total = CopyTotals::default();
        let mut copied: Vec<(
            Arc<super::dict::TableRuntime>,
            usize,
            Arc<FragmentCell>,
            u64,
        )> = Vec::with_capacity(cells.len());
        // The first real error (the copies that stopped because of it return None).
        let results: Vec<Option<(CopyProgress, u64)>> =
            results.into_iter().collect::<Result<_>>()?;
        for ((t, p, cell), r) in cells.iter().zip(results) {
            let Some((progress, live_from)) = r else {
                return Err(crate::error::codes::internal(
                    "node restart copy: a replica's copy stopped without an error",
                ));
            };
            total.rows_copied += progress.rows_copied;
            total.rows_unchanged += progress.rows_unchanged;
            total.rows_swept += progress.rows_swept;
            copied.push((t.clone(), *p, cell.clone(), live_from));
        }
        // A transaction that began before a replica went live may still commit without
        // it: it stays a follower until no such transaction is left on its partition.
        for (t, p, cell, live_from) in copied {
            loop {
                self.check_open()?;
                let busy = t.fragments[p]
                    .iter()
                    .filter(|c| !Arc::ptr_eq(c, &cell) && c.is_live())
                    .any(|c| c.state.lock().has_lock_older_than(live_from));
                if !busy {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            for other in &t.fragments[p] {
                let _g = other.state.lock();
                other.remove_follower(&cell);
            }
            // Live again, maybe the primary: a transaction holds a primary's mutex
            // while it locks the backups, so the order changes only with every replica
            // of the partition locked, in the order transactions take them now (the
            // primary first); a transaction that chose the old order sees the new epoch
            // when it next locks a primary.
            let order = t.live_replicas(p);
            let mut guards: Vec<_> = order.iter().map(|c| c.state.lock()).collect();
            if let Some(k) = order.iter().position(|c| Arc::ptr_eq(c, &cell))
                && cell.role() == ReplicaRole::Joining
            {
                cell.set_role(&mut guards[k], ReplicaRole::Live);
                self.bump_replica_epoch();
            }
            drop(guards);
        }
        let _ = node;
        Ok(total)
    }
}
