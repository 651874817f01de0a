//! A node restart of the embedded cluster from the node's own files (NDB's node restart,
//! as opposed to the initial one): before the copy, the restarting node's replicas
//! are restored from its own checkpoint chains and redo log to the newest global
//! checkpoint its files restore; the copy then sends only the rows changed since
//! (`CopyProgress::since_gci`) and sweeps out the rows deleted since
//! (`Fragment::sweep_rows_gone_from`). docs/node-restart.md "From the node's own files".
//!
//! When: the cluster has a data directory and the node's files restored it when it
//! stopped (not so for a node whose previous restart had not yet completed); it then
//! restores the newest global checkpoint its system file names it in (a checkpoint
//! still saving at the stop may have left it out). Which replicas: those of logged
//! tables without disk columns (a stopped node's extents go back to their tablespaces,
//! so disk columns are copied whole, as before); the others start empty and get every
//! row.
//!
//! The replay starts at the node's saved keep position: a round's keep is saved only
//! if the round stored the chains of all the node's replicas it planned (one that met
//! the node's stop does not move it, `api::lcp` step 5).
//!
//! Why the copy may skip a source row last changed at or below the restored GCI `g`:
//! that change is in the replica's chain, or after its checkpoint's keep position and
//! so replayed from the redo. A chain may hold changes after `g` (a round completed
//! while the node was stopping); those rows are newer than `g` at the source too and
//! are copied, or were deleted there and are swept out. A round that scanned a replica
//! while its stop discarded it stores nothing in its chain (`api::lcp`, step 4).
//!
//! Lock order: one fragment replica's mutex at a time; the node's replicas are dead
//! throughout (no transaction and no feed reaches them). Before reading anything the
//! restart waits until no round that planned the node before its stop is under way
//! (`DataNode::in_lcp_round`); later rounds skip the node until it has started.

use super::cluster::{ClusterInner, DataNode};
use super::dict::TableRuntime;
use super::lcp::restore_threads;
use crate::checkpoint::run_parallel;
use crate::error::Result;
use crate::log::gcp::make_gci;
use crate::log::redo::{self, RedoConfig};
use crate::txn::FragmentCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A node's replica with its table and partition, as a node restart lists them.
pub(crate) type NodeCell = (Arc<TableRuntime>, usize, Arc<FragmentCell>);

/// What the restore from the node's own files did.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnRestore {
    /// The GCI the replicas were restored to.
    pub gci_hi: u32,
    /// Per cell of the restart (in its order): restored (copy from `gci_hi`) or not
    /// (empty: every row copied).
    pub restored: Vec<bool>,
    pub fragments: u64,
    pub rows: u64,
    pub redo_records: u64,
    pub redo_bytes: u64,
    pub secs_restore: f64,
    pub secs_redo: f64,
}

/// Whether a replica of `t` can be restored from its node's files (a table dropped
/// meanwhile is not: the next round removes its files, and the copy skips it).
fn restorable_table(t: &TableRuntime) -> bool {
    t.def.logging && !t.def.layout.has_disk() && !t.dropped.load(Ordering::Acquire)
}

impl ClusterInner {
    /// Restores `node`'s replicas (`cells`, all dead and empty) from the node's own
    /// files; None when its files restore no checkpoint (module notes). On an error
    /// the replicas restored so far are discarded again, and the caller copies every
    /// row.
    pub(crate) fn restore_node_from_own_files(
        &self,
        node: &DataNode,
        cells: &[NodeCell],
    ) -> Result<Option<OwnRestore>> {
        let Some(log) = &node.log else {
            return Ok(None);
        };
        if !node.restorable_at_stop.load(Ordering::Acquire) {
            return Ok(None); // its previous restart had not completed
        }
        let Some((gci_hi, keep, end)) = log.own_restore_point() else {
            return Ok(None);
        };
        if !cells.iter().any(|(t, _, _)| restorable_table(t)) {
            return Ok(None);
        }
        // A round that planned this node before its stop may still be writing in its
        // directories: let it finish. Rounds that start later skip the node (not
        // started), so no round is waited for otherwise.
        while node.in_lcp_round.load(Ordering::SeqCst) {
            self.check_open()?;
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let r = self.restore_own(node, log, cells, gci_hi, &keep, &end);
        if r.is_err() {
            for (_, _, cell) in cells {
                cell.state.lock().discard_all();
            }
        }
        r.map(Some)
    }

    fn restore_own(
        &self,
        node: &DataNode,
        log: &crate::log::node::NodeLog,
        cells: &[NodeCell],
        gci_hi: u32,
        keep: &[crate::log::redo::Lsn],
        end: &[crate::log::redo::Lsn],
    ) -> Result<OwnRestore> {
        let mut out = OwnRestore {
            gci_hi,
            restored: vec![false; cells.len()],
            ..OwnRestore::default()
        };
        let t0 = Instant::now();
        // The replicas restore in parallel, as at a system restart.
        let work: Vec<usize> = (0..cells.len())
            .filter(|&i| restorable_table(&cells[i].0))
            .collect();
        let results = run_parallel(work.clone(), restore_threads(), |_, i| {
            let (t, part, cell) = &cells[i];
            let mut f = cell.state.lock();
            // Empty since the stop's discard (unless the stop's global checkpoint
            // failed before it): the restore starts from nothing.
            f.discard_all();
            let restored = self.restore_replica(log.fs_dir(), t, *part as u32, &mut f)?;
            f.continue_chain_after_restore();
            Ok(restored)
        });
        let mut max_lcp_id = 0u32;
        for (i, r) in work.into_iter().zip(results) {
            let (lcp_id, rows) = r?;
            if lcp_id > 0 {
                out.fragments += 1;
            }
            max_lcp_id = max_lcp_id.max(lcp_id);
            out.rows += rows;
            out.restored[i] = true;
        }
        self.lcp_next_id
            .fetch_max(max_lcp_id.saturating_add(1), Ordering::AcqRel);
        out.secs_restore = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        // The node's redo from its keep position to the end of checkpoint `gci_hi`,
        // into the replicas restored above (records of the others are skipped: those
        // are copied whole).
        let cfg = RedoConfig::from_node(&node.config);
        let restored: BTreeMap<(u32, u32), &Arc<FragmentCell>> = cells
            .iter()
            .zip(&out.restored)
            .filter(|(_, r)| **r)
            .map(|((t, p, cell), _)| ((t.def.id, *p as u32), cell))
            .collect();
        let mut visit = |h: &redo::RecordHeader, payload: &[u8]| -> Result<()> {
            match restored.get(&(h.table_id, h.fragment_id)) {
                Some(cell) => cell.state.lock().apply_redo(h.kind, payload, h.gci),
                // A table dropped since, or one whose replicas are copied whole.
                None => Ok(()),
            }
        };
        let r = redo::replay(
            &*self.fs,
            log.fs_dir(),
            &cfg,
            keep,
            end,
            make_gci(gci_hi, u32::MAX),
            &mut visit,
        )?;
        out.redo_records = r.records_applied;
        out.redo_bytes = r.parts.iter().map(|p| p.payload_bytes_applied).sum();
        out.secs_redo = t1.elapsed().as_secs_f64();
        Ok(out)
    }
}
