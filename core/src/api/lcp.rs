//! Local checkpoints of the embedded cluster (DBDIH + BACKUP's LCP), and the restore of
//! fragments from them at a system restart.
//!
//! One LCP round, per data node ([`ClusterInner::run_lcp`]):
//! 1. the node's redo head is taken as the LCP's *keep* position: every commit whose
//!    redo record lies before it is already in memory, so the scans below see it; then
//!    an `LcpStart` undo record marks where a restart brings the disk pages back to
//!    (docs/durability.md §7);
//! 2. every fragment replica of a logged table on the node is scanned in batches of
//!    pages (its mutex held per batch only; I/O outside it) into a new data file: the
//!    parts the partial-LCP rule chooses in full, the others as changes since the
//!    previous LCP (`txn::fragment::lcp`). A fragment without change writes nothing;
//! 3. a global checkpoint covering the highest GCI written makes everything the files
//!    hold durable in the redo log too (a checkpoint never holds a change a restart
//!    would not also replay);
//! 4. the page cache's dirty pages and the extent headers are written and synced (the
//!    disk pages hold every change before the `LcpStart` record); each fragment's
//!    control file is replaced and the data files its chain no longer needs are
//!    removed;
//! 5. the node's system file takes the keep position and the undo keep at the next
//!    global checkpoint, after which the redo and undo before them are released.
//!
//! Checkpoint writes are paced between MinDiskWriteSpeed and MaxDiskWriteSpeed by how
//! full the redo log is. An LCP starts when TimeBetweenLocalCheckpoints' worth of redo
//! (4 × 2^n bytes) was written since the previous one started, and at once when a redo
//! part passes half full (the redo fill hook wakes the driver); the cluster log records
//! each (`Local checkpoint 13 started. Keep GCI = ... oldest restorable GCI = ...`,
//! `Local checkpoint 13 completed`).
//!
//! A round that fails (a data or control file cannot be written) changes nothing a
//! restart reads: the previous control files and keep stay; the fragments it scanned
//! (whose change maps it took) are written in full by their next LCP. The LCP driver
//! stops the cluster on such a failure, as NDB's node would; an explicit
//! [`ClusterInner::run_lcp`] returns the error (an LCP file's failed fdatasync poisons
//! only that file, which nothing will ever read, unlike the redo log's).
//!
//! Lock order: `lcp_lock` (one round at a time), then fragment mutexes one at a time.

use super::cluster::{ClusterInner, DataNode};
use super::dict::TableRuntime;
use crate::checkpoint::{
    ChangeStats, DataFileRef, DiskWritePacer, FragControl, LcpFileWriter, PartialLcpConfig,
    RestoreTarget, begin_lcp, choose_all_parts, lcp_dir, part_of_page, remove_orphans,
    restore_fragment,
};
use crate::error::Result;
use crate::mgm::log::Severity;
use crate::txn::fragment::{Fragment, LcpSink};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pages scanned per hold of a fragment's mutex.
const LCP_BATCH_PAGES: u32 = 8;

/// What one LCP round wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LcpStats {
    pub lcp_id: u32,
    pub fragments: u64,
    pub fragments_idle: u64,
    pub rows: u64,
    pub deletes: u64,
    pub pages_skipped: u64,
    pub bytes: u64,
    pub elapsed_ms: u64,
}

/// A batch of scanned records, copied out under the fragment's mutex and written to
/// the data file after it is released.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
}

const TAG_ROW: u8 = 1;
const TAG_DELETE_ROW: u8 = 2;
const TAG_DELETE_PAGE: u8 = 3;

impl LcpSink for Batch {
    fn row(&mut self, row_id: u32, image: &[u8]) {
        self.bytes.push(TAG_ROW);
        self.bytes.extend_from_slice(&row_id.to_le_bytes());
        self.bytes
            .extend_from_slice(&(image.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(image);
    }
    fn delete_row(&mut self, row_id: u32) {
        self.bytes.push(TAG_DELETE_ROW);
        self.bytes.extend_from_slice(&row_id.to_le_bytes());
    }
    fn delete_page(&mut self, page_no: u32) {
        self.bytes.push(TAG_DELETE_PAGE);
        self.bytes.extend_from_slice(&page_no.to_le_bytes());
    }
}

impl Batch {
    /// Hands the batch to the data file writer.
    fn drain_into(&mut self, w: &mut LcpFileWriter) -> Result<()> {
        let b = &self.bytes;
        let mut at = 0;
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        while at < b.len() {
            let id = u32_at(at + 1);
            match b[at] {
                TAG_ROW => {
                    let len = u32_at(at + 5) as usize;
                    w.put_row(id, &b[at + 9..at + 9 + len])?;
                    at += 9 + len;
                }
                TAG_DELETE_ROW => {
                    w.delete_row(id)?;
                    at += 5;
                }
                _ => {
                    debug_assert_eq!(b[at], TAG_DELETE_PAGE);
                    w.delete_page(id)?;
                    at += 5;
                }
            }
        }
        self.bytes.clear();
        Ok(())
    }
}

/// A fragment being restored: the checkpoint's records go to its own row ids.
struct FragmentRestore<'a>(&'a mut Fragment);

impl RestoreTarget for FragmentRestore<'_> {
    fn put_row(&mut self, row_id: u32, payload: &[u8]) -> Result<()> {
        self.0.restore_put(row_id, payload)
    }
    fn delete_row(&mut self, row_id: u32) -> Result<()> {
        self.0.restore_delete(row_id);
        Ok(())
    }
    fn delete_page(&mut self, page_no: u32) -> Result<()> {
        self.0.restore_delete_page(page_no);
        Ok(())
    }
}

/// A fingerprint of a table's stored row format (the LCP files' schema version).
fn schema_version(t: &TableRuntime) -> u64 {
    let l = &t.def.layout;
    (u64::from(t.def.id) << 40) ^ (u64::from(l.fixed_size) << 20) ^ t.def.columns.len() as u64
}

/// One fragment scanned into its data file, waiting for the durable GCP.
struct Written {
    ctl: FragControl,
    file: DataFileRef,
    max_gci: u32,
}

/// One node's part of an LCP round, waiting for the durable GCP.
struct NodeRound {
    node: Arc<DataNode>,
    /// The redo keep position (per part) taken at the round's start.
    keep: Vec<u64>,
    /// The LSN of the round's `LcpStart` undo record (None without a logfile group).
    undo_start: Option<u64>,
    written: Vec<Written>,
}

impl ClusterInner {
    /// The logged tables' fragment replicas on `node`, by table id.
    fn lcp_fragments(
        &self,
        node: &DataNode,
    ) -> Vec<(Arc<TableRuntime>, u32, Arc<crate::txn::FragmentCell>)> {
        let mut tables = self.dict.read().all();
        tables.sort_by_key(|t| t.def.id);
        let mut out = Vec::new();
        for t in tables.into_iter().filter(|t| t.def.logging) {
            for (p, reps) in t.fragments.iter().enumerate() {
                if let Some(c) = reps.iter().find(|c| c.node_id == node.node_id) {
                    out.push((t.clone(), p as u32, c.clone()));
                }
            }
        }
        out
    }

    /// Runs one local checkpoint on every data node that keeps files (see the module
    /// doc); returns what it wrote. A no-op (zero stats) on a cluster without files.
    pub fn run_lcp(&self) -> Result<LcpStats> {
        let _one = self.lcp_lock.lock();
        self.check_open()?;
        self.remove_dropped_checkpoints()?;
        let mut scanned = Vec::new();
        let r = self.run_lcp_locked(&mut scanned);
        if r.is_err() {
            // Their change maps and counts were taken by a scan whose file never
            // became part of a chain: their next LCP writes them in full.
            for cell in scanned {
                cell.state.lock().lcp_failed();
            }
        }
        r
    }

    fn run_lcp_locked(&self, scanned: &mut Vec<Arc<crate::txn::FragmentCell>>) -> Result<LcpStats> {
        let t0 = Instant::now();
        let lcp_id = self
            .lcp_next_id
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let mut stats = LcpStats {
            lcp_id,
            ..LcpStats::default()
        };
        let cfg = self.partial_lcp_config();
        let (min_speed, max_speed) = self.disk_write_speeds();
        let mut pending: Vec<NodeRound> = Vec::new();
        let mut max_gci = 0u32;
        for node in &self.data_nodes {
            let Some(log) = &node.log else { continue };
            let keep = log.redo.head();
            // After the keep: every change its undo record follows has its redo after
            // the keep too (a commit logs undo before redo), so a restart that rolls
            // the disk pages back to this record replays it (docs/durability.md §7).
            let undo_start = node.disk.lcp_start(lcp_id)?;
            self.mgm.log.event(
                Severity::Info,
                node.node_id,
                &format!(
                    "Local checkpoint {lcp_id} started. Keep GCI = {} oldest restorable GCI = {}",
                    self.gcp.durable_hi(),
                    self.restored_gci()
                ),
            );
            let mut pacer = DiskWritePacer::new(min_speed, max_speed);
            pacer.set_redo_fill_percent(log.redo_fill_percent());
            let paced_from = Instant::now();
            let mut paced_bytes = 0u64;
            let mut written = Vec::new();
            for (table, part, cell) in self.lcp_fragments(node) {
                let dir = lcp_dir(log.fs_dir(), table.def.id, part);
                let ctl = FragControl::load(&*self.fs, &dir)?
                    .unwrap_or_else(|| FragControl::new(table.def.id, part));
                let change = {
                    let f = cell.state.lock();
                    let full = ctl.files.is_empty() || f.lcp_needs_full();
                    if !full && !f.changed_since_lcp() {
                        None
                    } else {
                        let c = f.lcp_change_counts();
                        let m = f.memory();
                        Some(ChangeStats {
                            row_count: f.rows(),
                            rows_inserted: c.inserted,
                            rows_updated: c.updated,
                            rows_deleted: c.deleted,
                            memory_used_bytes: u64::from(m.fixed_pages + m.var_pages)
                                * crate::storage::PAGE_SIZE as u64,
                            ldm_memory_used_bytes: 0,
                            page_count: m.fixed_pages,
                            first_lcp: full,
                        })
                    }
                };
                let Some(change) = change else {
                    stats.fragments_idle += 1;
                    continue;
                };
                let parts = choose_all_parts(&change, &cfg);
                let mut writer = begin_lcp(
                    &*self.fs,
                    log.fs_dir(),
                    &ctl,
                    lcp_id,
                    parts,
                    0,
                    schema_version(&table),
                )?;
                let all = writer.header().all_parts;
                let all_part = move |page: u32| all.contains(part_of_page(page));
                scanned.push(cell.clone());
                let start_gci = crate::log::gcp::gci_hi(self.gcp.current());
                let mut scan = cell.state.lock().lcp_begin(all.is_full(), start_gci);
                let mut batch = Batch::default();
                loop {
                    let done = {
                        let mut f = cell.state.lock();
                        f.lcp_scan_batch(&mut scan, LCP_BATCH_PAGES, &all_part, &mut batch)
                    };
                    paced_bytes += batch.bytes.len() as u64;
                    batch.drain_into(&mut writer)?;
                    if done {
                        break;
                    }
                    let wait = pacer.delay_for(paced_bytes, paced_from.elapsed());
                    if !wait.is_zero() {
                        std::thread::sleep(wait.min(Duration::from_millis(100)));
                    }
                }
                writer.set_max_gci(scan.max_gci);
                let header = *writer.header();
                let summary = writer.finish()?;
                stats.fragments += 1;
                stats.rows += scan.rows_written;
                stats.deletes += scan.deletes_written;
                stats.pages_skipped += scan.pages_skipped;
                stats.bytes += summary.bytes;
                max_gci = max_gci.max(scan.max_gci);
                written.push(Written {
                    ctl,
                    file: DataFileRef::new(&header, &summary),
                    max_gci: scan.max_gci,
                });
            }
            pending.push(NodeRound {
                node: node.clone(),
                keep,
                undo_start,
                written,
            });
        }
        if pending.is_empty() {
            return Ok(stats);
        }
        // Everything the files hold must be restorable through the redo log too: the
        // rows they hold carry GCIs up to `max_gci`, but their delete markers name no
        // GCI, so the checkpoint closes the GCI current now (every change a scan saw
        // has a GCI at most that).
        if stats.fragments > 0 || max_gci > self.gcp.durable_hi() {
            self.force_gcp()?;
        }
        for NodeRound {
            node,
            keep,
            undo_start,
            written,
        } in pending
        {
            let Some(log) = &node.log else { continue };
            // The disk pages and extent headers as of the LCP's start are on disk
            // before any control file names this LCP.
            node.disk.lcp_flush(undo_start)?;
            for w in written {
                let (next, dropped) = w.ctl.after_lcp(w.file, w.max_gci)?;
                let dir = lcp_dir(log.fs_dir(), next.table_id, next.fragment_id);
                next.store(&*self.fs, &dir)?;
                FragControl::remove_dropped(&*self.fs, &dir, &dropped)?;
            }
            // Saved with the next global checkpoint; the redo before it is released
            // once that system file is on disk.
            log.set_keep(keep);
            log.set_undo_keep(undo_start.unwrap_or(0));
            self.mgm.log.event(
                Severity::Info,
                node.node_id,
                &format!("Local checkpoint {lcp_id} completed"),
            );
        }
        stats.elapsed_ms = t0.elapsed().as_millis() as u64;
        *self.last_lcp.lock() = Some(stats.clone());
        Ok(stats)
    }

    /// Restores every fragment replica of `node` from its checkpoint chain (system
    /// restart, before the redo is replayed). Returns (fragments, rows, highest LCP
    /// id of their control files).
    pub(crate) fn restore_node_fragments(&self, node: &DataNode) -> Result<(u64, u64, u32)> {
        let Some(log) = &node.log else {
            return Ok((0, 0, 0));
        };
        let (mut fragments, mut rows, mut max_lcp_id) = (0u64, 0u64, 0u32);
        for (table, part, cell) in self.lcp_fragments(node) {
            let dir = lcp_dir(log.fs_dir(), table.def.id, part);
            let ctl = FragControl::load(&*self.fs, &dir)?;
            remove_orphans(&*self.fs, &dir, ctl.as_ref())?;
            let Some(ctl) = ctl else { continue };
            max_lcp_id = max_lcp_id.max(ctl.lcp_id);
            let mut f = cell.state.lock();
            let r = restore_fragment(&*self.fs, log.fs_dir(), &ctl, &mut FragmentRestore(&mut f))?;
            f.restore_finish()?;
            fragments += 1;
            rows += r.rows;
        }
        Ok((fragments, rows, max_lcp_id))
    }

    /// Tables dropped (or truncated: their old ids): their checkpoint files go at the
    /// start of the next LCP round, under the round's lock, so that a round that still
    /// holds them finishes first.
    pub(crate) fn forget_checkpoints_of(&self, table_ids: &[u32]) {
        self.dropped_lcp_tables.lock().extend_from_slice(table_ids);
    }

    /// Removes the checkpoint files of the tables queued by
    /// [`ClusterInner::forget_checkpoints_of`]. Call with `lcp_lock` held.
    fn remove_dropped_checkpoints(&self) -> Result<()> {
        let ids = std::mem::take(&mut *self.dropped_lcp_tables.lock());
        for id in ids {
            self.remove_checkpoint_files(id)?;
        }
        Ok(())
    }

    /// Removes every checkpoint file of table `table_id` on every node (fragment
    /// directories are numbered from 0 without gaps).
    pub(crate) fn remove_checkpoint_files(&self, table_id: u32) -> Result<()> {
        for node in &self.data_nodes {
            let Some(log) = &node.log else { continue };
            for fragment in 0.. {
                let dir = lcp_dir(log.fs_dir(), table_id, fragment);
                let files = match self.fs.list_dir(&dir) {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) => {
                        return Err(crate::error::codes::file_system_error(format!(
                            "{}: {e}",
                            dir.display()
                        )));
                    }
                };
                for f in files {
                    self.fs.remove(&f).map_err(|e| {
                        crate::error::codes::file_system_error(format!("{}: {e}", f.display()))
                    })?;
                }
            }
        }
        Ok(())
    }

    /// System restart: checkpoint files of tables the dictionary no longer has (dropped
    /// before a crash let the next LCP remove them).
    pub(crate) fn remove_orphan_checkpoints(&self) -> Result<()> {
        let (next_id, live): (u32, std::collections::BTreeSet<u32>) = {
            let dict = self.dict.read();
            (
                dict.next_table_id(),
                dict.all().iter().map(|t| t.def.id).collect(),
            )
        };
        for id in (1..=next_id).filter(|id| !live.contains(id)) {
            self.remove_checkpoint_files(id)?;
        }
        Ok(())
    }

    fn partial_lcp_config(&self) -> PartialLcpConfig {
        let config = self.config.read();
        let Some(dn) = config.data_nodes.first() else {
            return PartialLcpConfig::default();
        };
        let d = PartialLcpConfig::default();
        PartialLcpConfig {
            enable_partial_lcp: dn
                .get_bool("EnablePartialLcp")
                .unwrap_or(d.enable_partial_lcp),
            recovery_work_pct: dn
                .get_u64("RecoveryWork")
                .map_or(d.recovery_work_pct, |v| v as u32),
            insert_recovery_work_pct: dn
                .get_u64("InsertRecoveryWork")
                .map_or(d.insert_recovery_work_pct, |v| v as u32),
        }
    }

    fn disk_write_speeds(&self) -> (u64, u64) {
        let config = self.config.read();
        let dn = config.data_nodes.first();
        let get = |name: &str, default: u64| dn.and_then(|d| d.get_u64(name)).unwrap_or(default);
        (
            get("MinDiskWriteSpeed", 10 << 20),
            get("MaxDiskWriteSpeed", 20 << 20),
        )
    }

    /// The GCI the last system restart recovered to (0 after a fresh start).
    pub fn restored_gci(&self) -> u32 {
        self.restart.lock().as_ref().map_or(0, |s| s.restored_gci)
    }

    /// Redo bytes (all nodes) after which a local checkpoint starts
    /// (TimeBetweenLocalCheckpoints: 4 × 2^n bytes).
    pub(crate) fn lcp_trigger_bytes(&self) -> u64 {
        let config = self.config.read();
        let n = config
            .data_nodes
            .first()
            .and_then(|d| d.get_u64("TimeBetweenLocalCheckpoints"))
            .unwrap_or(20)
            .min(31);
        4u64 << n
    }
}
