//! Durability of the embedded cluster: each data node's redo log and system file, the
//! global checkpoint driver, and the system restart that recovers a data directory.
//!
//! Redo is written when the cluster has a data directory and `Diskless` is off; a
//! cluster started without one keeps everything in a scratch directory removed at
//! shutdown, so it runs global checkpoints (GCIs advance, `wait_durable` returns at
//! each checkpoint) without writing redo.
//!
//! Start of a data node's log, by what its file-system directory holds:
//! - no system file: a fresh start. Redo files left by a start that crashed before its
//!   system file existed are removed (they hold nothing durable), new ones created, and
//!   an empty system file written before the cluster serves.
//! - a system file: a **system restart**. The cluster recovers to the restorable GCI,
//!   the newest checkpoint every node has saved: it reopens the disk-data objects and
//!   runs each node's undo log back to its undo keep (`disk_restart`), recreates the
//!   dictionary from the schema file, restores each fragment from its checkpoint chain
//!   (relinking rows to their disk records), replays each node's redo from the kept
//!   position to that checkpoint's end, and continues appending there (anything after
//!   it belongs to checkpoints that never completed on every node and is overwritten).
//!   Commits continue with the next GCI.
//! - system files on some nodes only, none holding a saved checkpoint: a first start
//!   that a crash cut (nothing was ever durable); the others get an empty log too.
//!
//! The GCP driver is a thread holding a weak reference to the cluster: it ticks
//! [`GlobalCheckpoint::on_timer`] with the time since start. A failed save stops the
//! cluster (every node is in this process): the reason goes to the cluster log and
//! every later operation fails with it.

use super::cluster::{ClusterInner, DataNode};
use super::node_restart::NodeRunState;
use crate::config::ClusterConfig;
use crate::disk::io::FileSystem;
use crate::error::{NdbError, Result, codes};
use crate::log::gcp::{GcpSaver, make_gci};
use crate::log::node::{NodeLog, NodeSave};
use crate::log::redo::{self, RedoConfig, RedoLog};
use crate::log::sysfile::{NodeBitmask, Sysfile};
use crate::schema::TableDef;
use crate::txn::fragment::FragRedo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long a local checkpoint waits for the checkpoint it needs when checkpoints are
/// driven from outside (a data node process whose master is unreachable this long
/// fails the local checkpoint, which runs again later).
const EXTERNAL_GCP_WAIT: Duration = Duration::from_secs(60);

/// What the data directory says about the start.
pub(crate) struct StartPlan {
    /// Per data node (configuration order): its log, when the cluster writes redo.
    pub logs: Vec<Option<Arc<NodeLog>>>,
    /// The checkpoint a system restart recovers to (None: fresh start).
    pub restore: Option<RestorePoint>,
    /// The first GCI commits get.
    pub first_gci_hi: u32,
    /// Data nodes whose files were behind the restore point (stopped, or their node
    /// restart unfinished, when the cluster stopped): their files were removed; they
    /// come up stopped and restart by copying from their node group.
    pub excluded: Vec<u32>,
}

pub(crate) struct RestorePoint {
    pub gci_hi: u32,
    /// Per node (configuration order): (replay from, replay to) per redo part; None for
    /// a node whose files do not restore this point (`StartPlan::excluded`).
    pub ranges: Vec<Option<(Vec<u64>, Vec<u64>)>>,
}

/// The directory of data node `node_id` under the cluster's base directory.
pub(crate) fn node_fs_dir(base: &Path, node_id: u32) -> PathBuf {
    base.join(format!("ndb_{node_id}_fs"))
}

/// An initial start (`--initial`): removes what the node's log and checkpoints left
/// (the LCP directory with every checkpoint file, spares included, redo files, system
/// file, schema file); returns the paths removed.
pub(crate) fn remove_node_logs(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    // The checkpoints first: a crash after this leaves no chain a later start could
    // take for a new table's (table ids start again from 1), nor a spare data file.
    let lcp = crate::checkpoint::lcp_root(node_fs_dir);
    if fs.exists(&lcp) {
        fs.remove_dir_all(&lcp)
            .map_err(|e| codes::file_system_error(format!("{}: {e}", lcp.display())))?;
        removed.push(lcp);
    }
    removed.extend(RedoLog::remove_files(fs, node_fs_dir)?);
    for sysfile in crate::log::sysfile::sysfile_paths(node_fs_dir) {
        if fs.exists(&sysfile) {
            fs.remove(&sysfile)
                .map_err(|e| codes::file_system_error(format!("{}: {e}", sysfile.display())))?;
            removed.push(sysfile);
        }
    }
    if super::dict_file::remove_schema_file(fs, node_fs_dir)? {
        removed.push(node_fs_dir.join(super::dict_file::SCHEMA_FILE));
    }
    Ok(removed)
}

/// Opens or creates every data node's redo log and system file (see the module doc).
pub(crate) fn plan_start(
    config: &ClusterConfig,
    fs: &Arc<dyn FileSystem>,
    base: &Path,
    durable: bool,
    restore_cap: Option<u32>,
) -> Result<StartPlan> {
    if !durable {
        return Ok(StartPlan {
            logs: vec![None; config.data_nodes.len()],
            restore: None,
            first_gci_hi: 1,
            excluded: Vec::new(),
        });
    }
    let mut sysfiles = Vec::with_capacity(config.data_nodes.len());
    for dn in &config.data_nodes {
        sysfiles.push(Sysfile::load(&**fs, &node_fs_dir(base, dn.node_id))?);
    }
    let any = sysfiles.iter().any(|s| s.is_some());
    let never_saved = sysfiles.iter().flatten().all(|s| s.last_saved().is_none());
    if any && never_saved {
        // A first start cut by a crash before every node had written its (empty)
        // system file: no checkpoint was ever saved anywhere, so nothing was durable;
        // the nodes without one start with an empty log, the others restart to GCI 0.
        for (dn, sf) in config.data_nodes.iter().zip(sysfiles.iter_mut()) {
            if sf.is_some() {
                continue;
            }
            let dir = node_fs_dir(base, dn.node_id);
            let cfg = RedoConfig::from_node(dn);
            RedoLog::remove_files(&**fs, &dir)?;
            RedoLog::create(fs.clone(), &dir, cfg.clone())?.shutdown();
            let mut fresh = Sysfile::new(dn.node_id, cfg.parts as usize);
            fresh.store(&**fs, &dir)?;
            *sf = Some(fresh);
        }
    }
    if any && sysfiles.iter().any(|s| s.is_none()) {
        let missing: Vec<String> = config
            .data_nodes
            .iter()
            .zip(&sysfiles)
            .filter(|(_, s)| s.is_none())
            .map(|(d, _)| d.node_id.to_string())
            .collect();
        return Err(codes::bad_config(format!(
            "system restart: data node(s) {} have no system file in {} (their file system \
             was removed?); start them with --initial",
            missing.join(", "),
            base.display()
        )));
    }
    let mut logs = Vec::with_capacity(config.data_nodes.len());
    if !any {
        for dn in &config.data_nodes {
            logs.push(Some(fresh_node_log(fs, base, dn)?));
        }
        return Ok(StartPlan {
            logs,
            restore: None,
            first_gci_hi: 1,
            excluded: Vec::new(),
        });
    }
    let sysfiles: Vec<Sysfile> = sysfiles.into_iter().flatten().collect();
    let ids: Vec<u32> = config.data_nodes.iter().map(|d| d.node_id).collect();
    let (gci_hi, restoring) =
        choose_restore_point(&ids, &sysfiles, restore_cap.unwrap_or(u32::MAX));
    for group in config.node_groups() {
        if !group.iter().any(|id| restoring.contains(*id)) {
            return Err(codes::bad_config(format!(
                "Unable to restart: no node of node group {{{}}} has files that restore GCI \
                 {gci_hi} (each was stopped, or restarting, when the cluster stopped)",
                group
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let excluded: Vec<u32> = ids
        .iter()
        .copied()
        .filter(|id| !restoring.contains(*id))
        .collect();
    let mut ranges = Vec::with_capacity(sysfiles.len());
    let mut max_gci_seen = 0u64;
    for (dn, mut sf) in config.data_nodes.iter().zip(sysfiles) {
        let dir = node_fs_dir(base, dn.node_id);
        let cfg = RedoConfig::from_node(dn);
        if !restoring.contains(dn.node_id) {
            // Behind the restore point: nothing of it is used; it starts empty, as an
            // initial node restart's files do.
            remove_node_logs(&**fs, &dir)?;
            logs.push(Some(fresh_node_log(fs, base, dn)?));
            ranges.push(None);
            continue;
        }
        if sf.parts() != cfg.parts as usize {
            return Err(codes::bad_config(format!(
                "node {}: NoOfFragmentLogParts is {} but the redo log has {} parts; \
                 changing it needs an initial restart",
                dn.node_id,
                cfg.parts,
                sf.parts()
            )));
        }
        let end = if gci_hi == 0 {
            sf.keep.clone()
        } else {
            sf.saved_gci(gci_hi).map(|s| s.end.clone()).ok_or_else(|| {
                codes::corrupt_page(format!(
                    "node {}: GCI {gci_hi} is restorable on every other node but \
                         not in this node's system file",
                    dn.node_id
                ))
            })?
        };
        // Checkpoints after the restorable one never completed everywhere: forget
        // them.
        sf.saved.retain(|s| s.gci_hi <= gci_hi);
        sf.store(&**fs, &dir)?;
        // Where appending continues: at the first record past the restorable GCI, which
        // may lie inside the last durable block (commits of the next GCI append to the
        // block a checkpoint then seals); the redo log's restart marker voids what
        // follows it. A first pass over the log finds it, and the highest GCI any
        // record carries: new GCIs start above it, so that no record left behind by
        // the crashed run can ever pass for a later, durable one.
        let scan = redo::replay(
            &**fs,
            &dir,
            &cfg,
            &sf.keep,
            &end,
            make_gci(gci_hi, u32::MAX),
            &mut |_, _| Ok(()),
        )?;
        max_gci_seen = scan
            .parts
            .iter()
            .map(|p| p.max_gci_seen)
            .fold(max_gci_seen, u64::max);
        let head = scan.end();
        let log = RedoLog::open(fs.clone(), &dir, cfg, &sf.keep, &head)?;
        ranges.push(Some((sf.keep.clone(), end)));
        logs.push(Some(Arc::new(NodeLog::new(
            dn.node_id,
            fs.clone(),
            &dir,
            log,
            sf,
        ))));
    }
    Ok(StartPlan {
        logs,
        restore: Some(RestorePoint { gci_hi, ranges }),
        first_gci_hi: gci_hi.max(crate::log::gcp::gci_hi(max_gci_seen)) + 1,
        excluded,
    })
}

/// A new, empty redo log and system file for data node `dn` (any left are removed).
fn fresh_node_log(
    fs: &Arc<dyn FileSystem>,
    base: &Path,
    dn: &crate::config::DataNodeConfig,
) -> Result<Arc<NodeLog>> {
    let dir = node_fs_dir(base, dn.node_id);
    let cfg = RedoConfig::from_node(dn);
    RedoLog::remove_files(&**fs, &dir)?;
    let log = RedoLog::create(fs.clone(), &dir, cfg.clone())?;
    let mut sysfile = Sysfile::new(dn.node_id, cfg.parts as usize);
    sysfile.store(&**fs, &dir)?;
    Ok(Arc::new(NodeLog::new(
        dn.node_id,
        fs.clone(),
        &dir,
        log,
        sysfile,
    )))
}

/// The checkpoint a system restart recovers to, and the nodes whose files restore it:
/// the newest checkpoint (at most `cap`) that every node its saved entry names has
/// saved. A crash in the middle of a save leaves some of those nodes one checkpoint
/// behind; the restart then takes the one before, with the nodes that one names. 0
/// with every node when none was ever saved everywhere it had to be. (`ids`: the
/// configured data nodes, in the order of `sysfiles`.)
pub(crate) fn choose_restore_point(
    ids: &[u32],
    sysfiles: &[Sysfile],
    cap: u32,
) -> (u32, NodeBitmask) {
    let all = NodeBitmask::from_ids(ids.iter().copied());
    let mut candidates: Vec<u32> = sysfiles
        .iter()
        .flat_map(|s| s.saved.iter().map(|g| g.gci_hi))
        .filter(|g| *g <= cap)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    for &g in candidates.iter().rev() {
        // Every node that saved g records the same set.
        let Some(named) = sysfiles.iter().find_map(|s| s.saved_gci(g)) else {
            continue;
        };
        let set = NodeBitmask::from_ids(ids.iter().copied().filter(|id| named.nodes.contains(*id)));
        let complete = ids
            .iter()
            .zip(sysfiles)
            .filter(|(id, _)| set.contains(**id))
            .all(|(_, s)| s.saved_gci(g).is_some());
        if complete && set != NodeBitmask::default() {
            return (g, set);
        }
    }
    // None complete (the first save was cut by a crash): nothing was durable.
    (0, all)
}

impl DataNode {
    /// Where a new fragment of `def` on this node logs: None for NoLogging tables and
    /// nodes without redo.
    pub fn redo_for(&self, def: &TableDef) -> Option<FragRedo> {
        let log = self.log.as_ref()?;
        if !def.logging {
            return None;
        }
        Some(FragRedo::new(log.redo.clone(), log.redo.assign_part(), def))
    }
}

/// What a system restart did (ndbinfo.restart_info).
#[derive(Debug, Clone, Default)]
pub struct RestartStats {
    /// The GCI the cluster recovered to.
    pub restored_gci: u32,
    /// Recreating the dictionary from the schema file.
    pub secs_define_tables: f64,
    pub total_secs: f64,
    pub nodes: Vec<NodeRestartStats>,
}

/// One data node's local recovery, in ndbinfo.restart_info's phases.
#[derive(Debug, Clone, Default)]
pub struct NodeRestartStats {
    pub node_id: u32,
    /// Rows put back from local checkpoint files.
    pub restored_rows: u64,
    pub redo_records: u64,
    pub redo_bytes: u64,
    pub secs_restore_fragments: f64,
    /// CPU time of the threads that restored the fragments, summed (they run at once,
    /// one per core: `secs_restore_fragments` is wall time).
    pub secs_restore_cpu: f64,
    /// CPU time of the helper thread that committed DataMemory ahead of the restore
    /// (beside `secs_restore_fragments`, on another core).
    pub secs_populate_memory: f64,
    pub secs_undo_disk_data: f64,
    pub secs_exec_redo_log: f64,
    pub secs_index_rebuild: f64,
}

impl ClusterInner {
    /// System restart: the dictionary from the schema file, then every node's redo.
    pub(crate) fn recover(
        &self,
        point: &RestorePoint,
        progress: &dyn Fn(&str),
    ) -> Result<RestartStats> {
        // Each step goes to the cluster log and to the caller as it happens.
        let report = |node: u32, text: String| {
            self.mgm
                .log
                .event(crate::mgm::log::Severity::Info, node, &text);
            progress(&format!("Node {node}: {text}"));
        };
        let mut stats = RestartStats {
            restored_gci: point.gci_hi,
            ..RestartStats::default()
        };
        let t0 = Instant::now();
        let mut undo_secs: BTreeMap<u32, f64> = BTreeMap::new();
        // The nodes whose files restore the point; the others come up stopped.
        let restoring: Vec<&Arc<DataNode>> = self
            .data_nodes
            .iter()
            .zip(&point.ranges)
            .filter(|(_, r)| r.is_some())
            .map(|(n, _)| n)
            .collect();
        let first = restoring
            .first()
            .and_then(|n| n.log.as_ref())
            .ok_or_else(|| codes::internal("system restart without a node log"))?;
        report(
            first.node_id,
            format!(
                "System restart: recovering to GCI {} (the newest checkpoint every node {}saved)",
                point.gci_hi,
                if restoring.len() < self.data_nodes.len() {
                    "whose files restore it "
                } else {
                    ""
                }
            ),
        );
        for n in self.data_nodes.iter().filter(|n| {
            !n.files_restorable
                .load(std::sync::atomic::Ordering::Acquire)
        }) {
            report(
                n.node_id,
                format!(
                    "Its files are behind GCI {} (the node was stopped, or restarting, when the cluster stopped): they were removed; it restarts by copying from node group {} once the others serve",
                    point.gci_hi, n.node_group
                ),
            );
        }
        if let Some(image) = super::dict_file::load_schema(&*self.fs, first.fs_dir())? {
            // Disk data first: the tables' fragments look their tablespaces up, and
            // the undo pass brings every disk page back to the checkpoint's start (on a
            // node whose files are behind, as far back as its undo log goes: its system
            // file is new; its extents are given back below).
            self.reopen_disk_objects(&image)?;
            for node in &self.data_nodes {
                let t_undo = Instant::now();
                if let Some(u) = self.undo_node_disk(node)? {
                    let secs = t_undo.elapsed().as_secs_f64();
                    undo_secs.insert(node.node_id, secs);
                    report(
                        node.node_id,
                        format!(
                            "Executed UNDO log: {} records ({} row changes undone, {} \
                             extents given back their owner) back to LSN {}, {} millis",
                            u.records,
                            u.tuple_records,
                            u.extents_restored,
                            u.keep_lsn,
                            (secs * 1000.0) as u64
                        ),
                    );
                }
            }
            self.recreate_dictionary(&image)?;
            // A node whose files are behind holds no row until its restart's copy: its
            // extents all go back to their tablespaces (its undo pass above brought its
            // pages to a consistent state first; the copy allocates afresh).
            for n in self
                .data_nodes
                .iter()
                .filter(|n| !n.files_restorable.load(Ordering::Acquire))
            {
                let freed = n.disk.free_extents_not_owned_by(&|_| false)?;
                if freed > 0 {
                    report(
                        n.node_id,
                        format!(
                            "{freed} extents of its stale fragments returned to their tablespaces"
                        ),
                    );
                }
            }
            let freed = self.release_dead_extents()?;
            if freed > 0
                && let Some(n) = self.data_nodes.first()
            {
                report(
                    n.node_id,
                    format!("{freed} extents of dropped tables returned to their tablespaces"),
                );
            }
        } else {
            // No schema file yet: a disk file a crash left is from a statement that
            // never completed.
            for n in &self.data_nodes {
                n.disk.remove_files_not_in_use()?;
            }
        }
        self.remove_orphan_checkpoints()?;
        stats.secs_define_tables = t0.elapsed().as_secs_f64();
        let tables: BTreeMap<u32, Arc<super::dict::TableRuntime>> = self
            .dict
            .read()
            .all()
            .into_iter()
            .map(|t| (t.def.id, t))
            .collect();
        let max_gci = make_gci(point.gci_hi, u32::MAX);
        for (node, range) in self.data_nodes.iter().zip(&point.ranges) {
            let (Some(log), Some((from, to))) = (&node.log, range) else {
                continue;
            };
            let t_restore = Instant::now();
            let restored = self.restore_node_fragments(node)?;
            let (restored_fragments, restored_rows) = (restored.fragments, restored.rows);
            self.lcp_next_id
                .fetch_max(restored.max_lcp_id + 1, std::sync::atomic::Ordering::AcqRel);
            let relinked = self.relink_node_disk(node)?;
            let secs_restore_fragments = t_restore.elapsed().as_secs_f64();
            if relinked.pages > 0 {
                report(
                    node.node_id,
                    format!(
                        "Disk data: {} records linked to their rows, {} orphans freed, {} \
                         pages in {} extents",
                        relinked.records_linked,
                        relinked.orphans_freed,
                        relinked.pages,
                        relinked.extents
                    ),
                );
            }
            report(
                node.node_id,
                format!(
                    "Restored LCP: {} fragments, {restored_rows} rows, {} millis, {} rows/s \
                     (DataMemory committed ahead: {} MB, {} millis of a helper thread)",
                    restored_fragments,
                    (secs_restore_fragments * 1000.0) as u64,
                    (restored_rows as f64 / secs_restore_fragments.max(1e-9)) as u64,
                    (restored.populated_pages * crate::storage::PAGE_SIZE as u64) >> 20,
                    (restored.populate_cpu_secs * 1000.0) as u64
                ),
            );
            let t1 = Instant::now();
            let cfg = RedoConfig::from_node(&node.config);
            let mut visit = |h: &redo::RecordHeader, payload: &[u8]| -> Result<()> {
                let Some(t) = tables.get(&h.table_id) else {
                    return Ok(()); // dropped since
                };
                let cell = t
                    .fragments
                    .get(h.fragment_id as usize)
                    .and_then(|reps| reps.iter().find(|c| c.node_id == node.node_id))
                    .ok_or_else(|| {
                        codes::corrupt_page(format!(
                            "redo of node {} names fragment {} of table {}, which the \
                             node does not hold",
                            node.node_id, h.fragment_id, t.def.name
                        ))
                    })?;
                cell.state.lock().apply_redo(h.kind, payload, h.gci)
            };
            let r = redo::replay(&*self.fs, log.fs_dir(), &cfg, from, to, max_gci, &mut visit)?;
            self.check_node_disk_rows(node)?;
            report(
                node.node_id,
                format!(
                    "Executed REDO log: {} records, {} bytes, {} millis",
                    r.records_applied,
                    r.parts.iter().map(|p| p.payload_bytes_applied).sum::<u64>(),
                    t1.elapsed().as_millis()
                ),
            );
            stats.nodes.push(NodeRestartStats {
                node_id: node.node_id,
                redo_records: r.records_applied,
                redo_bytes: r.parts.iter().map(|p| p.payload_bytes_applied).sum(),
                secs_exec_redo_log: t1.elapsed().as_secs_f64(),
                secs_restore_fragments,
                secs_populate_memory: restored.populate_cpu_secs,
                secs_restore_cpu: restored.restore_cpu_secs,
                secs_undo_disk_data: undo_secs.get(&node.node_id).copied().unwrap_or(0.0),
                restored_rows,
                ..NodeRestartStats::default()
            });
        }
        for t in tables.values() {
            t.restore_auto_increment();
        }
        stats.total_secs = t0.elapsed().as_secs_f64();
        for n in &restoring {
            report(
                n.node_id,
                format!(
                    "Start phase 5 completed (system restart), restored GCI {} in {:.3} s",
                    point.gci_hi, stats.total_secs
                ),
            );
        }
        Ok(stats)
    }

    /// Runs `f` with the savers of a global checkpoint. Which nodes save it and the set
    /// of nodes whose files restore it are decided when the first node saves, after the
    /// checkpoint's GCI is closed ([`ClusterInner::restorable_nodes`]): a node stopped
    /// before then misses some of its commits and is not in the set, and saves nothing
    /// (its redo and system file stay as they were at its stop).
    fn with_gcp_savers<R>(&self, f: impl FnOnce(&[&dyn GcpSaver]) -> R) -> R {
        let decided = std::sync::OnceLock::new();
        let decide = |node_id: u32| {
            let (saving, restoring) = *decided.get_or_init(|| {
                let saving = NodeBitmask::from_ids(
                    self.data_nodes
                        .iter()
                        .filter(|n| n.run_state() != NodeRunState::Stopped)
                        .map(|n| n.node_id),
                );
                (saving, self.restorable_nodes())
            });
            saving.contains(node_id).then_some(restoring)
        };
        let saves: Vec<NodeSave<'_>> = self
            .data_nodes
            .iter()
            .filter_map(|n| n.log.as_deref())
            .map(|log| NodeSave {
                log,
                decide: &decide,
            })
            .collect();
        let savers: Vec<&dyn GcpSaver> = saves.iter().map(|s| s as &dyn GcpSaver).collect();
        f(&savers)
    }

    /// After a local checkpoint that completes a node restart (`rejoin_keep` set):
    /// global checkpoints at once rather than at their interval, until the node's system
    /// file holds that checkpoint's keep and the checkpoints name it again — at most
    /// three (the keep may be applied in two steps, then the set is decided).
    pub(crate) fn complete_rejoins(&self) -> Result<()> {
        for _ in 0..3 {
            if !self
                .data_nodes
                .iter()
                .any(|n| n.rejoin_keep.lock().is_some())
            {
                break;
            }
            self.force_gcp()?;
        }
        Ok(())
    }

    /// The data nodes whose files restore the global checkpoint being saved: started
    /// nodes with redo, less those whose files are behind (stopped since, or restarted
    /// and not yet checkpointed). A restarted node whose local checkpoint after the
    /// copy is complete and whose system file holds that checkpoint's keep position
    /// (no older redo is replayed for it: that redo misses what changed while it was
    /// stopped) is named again from here on.
    fn restorable_nodes(&self) -> NodeBitmask {
        let mut set = NodeBitmask::default();
        for n in &self.data_nodes {
            let Some(log) = &n.log else { continue };
            if n.run_state() != NodeRunState::Started {
                continue;
            }
            if !n.files_restorable.load(Ordering::Acquire) {
                let mut rejoin = n.rejoin_keep.lock();
                let kept = rejoin
                    .as_ref()
                    .is_some_and(|k| log.keep().iter().zip(k).all(|(have, need)| have >= need));
                if !kept {
                    continue;
                }
                *rejoin = None;
                n.files_restorable.store(true, Ordering::Release);
                n.start_phase.store(5, Ordering::Release);
                let log_event = |text: &str| {
                    self.mgm
                        .log
                        .event(crate::mgm::log::Severity::Info, n.node_id, text)
                };
                log_event(
                    "Start phase 5 completed (node restart): the local checkpoint after the copy is saved; the node's own files restore it from this global checkpoint on",
                );
                log_event("Started (node restart)");
            }
            set.set(n.node_id);
        }
        set
    }

    /// Runs a global checkpoint now (graceful shutdown, tests). With checkpoints
    /// driven from outside (a data node process), asks for one and waits until the
    /// checkpoint current now is saved here.
    pub fn force_gcp(&self) -> Result<u32> {
        if self.gcp.is_external() {
            let gci = self.gcp.current();
            self.gcp.wait_durable(gci, EXTERNAL_GCP_WAIT)?;
            return Ok(crate::log::gcp::gci_hi(gci));
        }
        self.with_gcp_savers(|savers| self.gcp.force(savers))
            .inspect_err(|e| self.stop_on(e))
    }

    /// Moves the checkpoint number on to `hi` (external checkpoints: the master data
    /// node's cut, or a commit stamped with a newer one).
    pub fn gcp_cut_to(&self, hi: u32) -> u32 {
        self.gcp.cut_to(hi)
    }

    /// Saves the closed checkpoint `hi` on this engine's nodes (external checkpoints).
    /// A failure stops the engine: an fsync is never retried.
    pub fn gcp_save(&self, hi: u32) -> Result<()> {
        self.with_gcp_savers(|savers| self.gcp.save_closed(hi, savers))
            .inspect_err(|e| self.stop_on(e))
    }

    /// Blocks until the commit with GCI `gci` is on disk on every node.
    pub fn wait_durable(&self, gci: u64, timeout: Duration) -> Result<()> {
        self.gcp.wait_durable(gci, timeout)
    }

    /// A node failed to save: the embedded cluster stops (every node is in here).
    pub(crate) fn stop_on(&self, e: &NdbError) {
        for n in &self.data_nodes {
            self.mgm.log.event(
                crate::mgm::log::Severity::Alert,
                n.node_id,
                &format!(
                    "Forced node shutdown completed. Caused by error {}: '{}'",
                    e.code, e.message
                ),
            );
        }
        self.gcp.fail(e.clone());
        self.shutdown_now();
    }
}

impl super::dict::TableRuntime {
    /// After a restart the auto-increment counter continues above every stored value.
    pub(crate) fn restore_auto_increment(&self) {
        let Some(col) = self.def.auto_increment_column() else {
            return;
        };
        let max = self
            .fragments
            .iter()
            .filter_map(|reps| reps.first())
            .filter_map(|c| c.state.lock().max_positive_int(col))
            .max();
        if let Some(m) = max {
            self.auto_increment
                .fetch_max(m.saturating_add(1), std::sync::atomic::Ordering::AcqRel);
        }
    }
}

/// Starts local checkpoints: when TimeBetweenLocalCheckpoints' worth of redo was
/// written since the last one began, at once when a redo part or the undo log is
/// half full, and at once when asked (`ClusterInner::request_lcp`).
pub(crate) fn spawn_lcp_driver(inner: &Arc<ClusterInner>) -> Result<std::thread::JoinHandle<()>> {
    let weak: Weak<ClusterInner> = Arc::downgrade(inner);
    let wakeup = inner.lcp_wakeup.clone();
    // A redo part or a kept undo log passing half full wakes the driver at once.
    for n in &inner.data_nodes {
        if let Some(l) = &n.log {
            let w = wakeup.clone();
            l.redo.set_fill_hook(Box::new(move |_part, percent| {
                if percent >= LCP_URGENT_FILL_PERCENT {
                    w.notify();
                }
            }));
            let w = wakeup.clone();
            n.disk.set_undo_pressure_hook(Box::new(move || w.notify()));
        }
    }
    std::thread::Builder::new()
        .name("rndb-lcp".into())
        .spawn(move || {
            let mut written_at_last: Option<u64> = None;
            loop {
                let Some(c) = weak.upgrade() else { return };
                if c.is_closed() {
                    return;
                }
                let (written, fill) = c.redo_written_and_fill();
                let last = *written_at_last.get_or_insert(written);
                let requested = c
                    .lcp_requested
                    .swap(false, std::sync::atomic::Ordering::AcqRel);
                if requested
                    || written.saturating_sub(last) >= c.lcp_trigger_bytes()
                    || fill >= LCP_URGENT_FILL_PERCENT
                {
                    written_at_last = Some(written);
                    if let Err(e) = c.run_lcp() {
                        if c.is_closed() {
                            return;
                        }
                        c.mgm.log.event(
                            crate::mgm::log::Severity::Alert,
                            c.mgm.mgm_node_id,
                            &format!("Local checkpoint failed: {e}"),
                        );
                        c.stop_on(&e);
                        return;
                    }
                }
                drop(c);
                // Woken early by a filling redo part or by shutdown.
                wakeup.wait(Duration::from_millis(LCP_POLL_MS));
            }
        })
        .map_err(|e| codes::internal(format!("cannot start the LCP thread: {e}")))
}

/// A flag and a condition variable: wakes a driver thread before its nap ends.
#[derive(Default)]
pub(crate) struct Wakeup {
    set: parking_lot::Mutex<bool>,
    cv: parking_lot::Condvar,
}

impl Wakeup {
    pub(crate) fn notify(&self) {
        *self.set.lock() = true;
        self.cv.notify_all();
    }

    /// Waits up to `max` for a notification (consumed).
    pub(crate) fn wait(&self, max: Duration) {
        let mut set = self.set.lock();
        if !*set {
            self.cv.wait_for(&mut set, max);
        }
        *set = false;
    }
}

/// How often the LCP driver looks at the redo log.
const LCP_POLL_MS: u64 = 50;
/// A redo part this full starts a local checkpoint at once.
const LCP_URGENT_FILL_PERCENT: u32 = 50;

impl ClusterInner {
    /// Redo bytes appended since start on the node that wrote most (each node's own
    /// redo is what TimeBetweenLocalCheckpoints counts, as in NDB), and the fullest
    /// part's fill.
    fn redo_written_and_fill(&self) -> (u64, u32) {
        let mut written = 0;
        let mut fill = 0;
        for n in &self.data_nodes {
            if let Some(l) = &n.log {
                written = written.max(l.redo.head().iter().sum::<u64>());
                fill = fill
                    .max(l.redo_fill_percent())
                    .max(n.disk.undo_fill_percent());
            }
        }
        (written, fill)
    }
}

/// Drives epochs and global checkpoints until the cluster is gone or closed.
pub(crate) fn spawn_gcp_driver(inner: &Arc<ClusterInner>) -> Result<std::thread::JoinHandle<()>> {
    let weak: Weak<ClusterInner> = Arc::downgrade(inner);
    let started = Instant::now();
    std::thread::Builder::new()
        .name("rndb-gcp".into())
        .spawn(move || {
            loop {
                let sleep_ms = match weak.upgrade() {
                    Some(c) if !c.is_closed() => {
                        let now_ms = started.elapsed().as_millis() as u64;
                        if let Err(e) = c.with_gcp_savers(|savers| c.gcp.on_timer(now_ms, savers)) {
                            c.stop_on(&e);
                            return;
                        }
                        c.gcp.next_due_ms(started.elapsed().as_millis() as u64)
                    }
                    _ => return,
                };
                // Short naps so that a closed cluster is noticed quickly; a requested
                // checkpoint ends the nap.
                match weak.upgrade() {
                    Some(c) => c.gcp.nap(Duration::from_millis(sleep_ms.clamp(1, 50))),
                    None => return,
                }
            }
        })
        .map_err(|e| codes::internal(format!("cannot start the GCP thread: {e}")))
}
