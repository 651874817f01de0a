//! A fragment replica's role in its partition, and how a replica that was lost is
//! brought back: the copy of a node restart (NDB's COPY_FRAG) and the commits that
//! reach it while the copy runs.
//!
//! Roles ([`ReplicaRole`]): a *live* replica takes part in every operation of its
//! partition (the first live one, in node-group order, is the primary); a *dead* one
//! (its node stopped) in none; a *starting* one receives committed changes only: every
//! commit on the partition's primary is applied to it as the same full-row image a redo
//! record holds, under the primary's mutex (so no later change of the row can overtake
//! it), while the copy ([`Fragment::copy_rows_to`]) writes every committed row of the
//! primary into it, both mutexes held per batch. A row that an unfinished transaction
//! holds exclusively is left for later: its commit (or abort) is followed by the copy
//! reading it again. When every row is copied the replica becomes live; it stays a
//! *follower* of the primary until no transaction that started preparing without it
//! is left (those commit to it through the follower list, the others through their own
//! operations on it).
//!
//! Invariants: a role changes only with the cell's mutex held (whoever holds the mutex
//! sees a stable role); a starting replica holds no locks (no transaction prepares on
//! it), which is what lets [`Fragment::apply_redo`] write to it.
//!
//! Lock order: the primary's mutex, then the follower's (as a transaction locks the
//! primary, then each backup).

use super::redo::push_row_image;
use super::{Fragment, FragmentCell, ROW_GCI_OFFSET, header_of, index_hash, key_hash, var_of};
use crate::error::Result;
use crate::log::redo::EncodedRecords;
use crate::storage::RowId;
use crate::storage::fixed::ROW_ALLOC;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// What a replica does in its partition now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ReplicaRole {
    Live = 0,
    /// Its node is stopped: not read, not written; its memory is freed.
    Dead = 1,
    /// Its node restarts: receives the partition's commits and the copy.
    Starting = 2,
    /// Copied, taking part in every write as a backup, but not the primary yet: a
    /// transaction that began preparing without it may still be committing to the
    /// primary (which feeds it), and a primary change now would let a new
    /// transaction lock its rows first.
    Joining = 3,
}

impl FragmentCell {
    pub fn role(&self) -> ReplicaRole {
        match self.role.load(Ordering::Acquire) {
            0 => ReplicaRole::Live,
            1 => ReplicaRole::Dead,
            2 => ReplicaRole::Starting,
            _ => ReplicaRole::Joining,
        }
    }

    /// Whether the replica takes part in its partition's operations (live or joining).
    #[inline]
    pub fn is_live(&self) -> bool {
        let r = self.role.load(Ordering::Acquire);
        r == ReplicaRole::Live as u8 || r == ReplicaRole::Joining as u8
    }

    /// Whether the replica may be its partition's primary (live, not joining).
    #[inline]
    pub fn may_be_primary(&self) -> bool {
        self.role.load(Ordering::Acquire) == ReplicaRole::Live as u8
    }

    /// Changes the role; the caller holds this cell's mutex (`_held` proves it).
    pub fn set_role(&self, _held: &mut Fragment, role: ReplicaRole) {
        self.role.store(role as u8, Ordering::Release);
    }

    /// Whether commits on this replica as primary must reach other replicas.
    #[inline]
    pub fn has_followers(&self) -> bool {
        !self.followers.read().is_empty()
    }

    pub fn add_follower(&self, f: &Arc<FragmentCell>) {
        let mut g = self.followers.write();
        if !g.iter().any(|x| Arc::ptr_eq(x, f)) {
            g.push(f.clone());
        }
    }

    pub fn remove_follower(&self, f: &Arc<FragmentCell>) {
        self.followers.write().retain(|x| !Arc::ptr_eq(x, f));
    }

    /// Applies committed records of this replica (`records`, as the primary's commit
    /// encoded them) to every follower not in `skip` (replicas the transaction
    /// prepared on itself). The caller holds this cell's mutex. A follower that cannot
    /// take them (its DataMemory is full) is dropped and marked dead: its node's
    /// restart fails, not the commit.
    pub fn feed_followers(&self, records: &EncodedRecords, skip: &[*const FragmentCell]) {
        let followers = self.followers.read().clone();
        for f in followers {
            if skip.contains(&Arc::as_ptr(&f)) {
                continue;
            }
            let mut g = f.state.lock();
            if f.role() == ReplicaRole::Dead {
                continue;
            }
            let mut failed = None;
            for (kind, gci, payload) in records.records() {
                if let Err(e) = g.apply_redo(kind, payload, gci) {
                    failed = Some(e);
                    break;
                }
            }
            if let Some(e) = failed {
                g.restart_error = Some(e);
                f.set_role(&mut g, ReplicaRole::Dead);
                drop(g);
                self.remove_follower(&f);
            }
        }
    }
}

/// Where a copy of a fragment stands ([`Fragment::copy_rows_to`], then, for a replica
/// restored from its node's own files, [`Fragment::sweep_rows_gone_from`]).
#[derive(Debug, Default, Clone)]
pub struct CopyProgress {
    /// The GCI the replica was restored to from its node's own files (0: it starts
    /// empty and every row is copied). A source row whose last change is at or below it
    /// is in the replica already and is not copied.
    pub since_gci: u32,
    /// The next row id to look at.
    pub next: u32,
    /// Rows an unfinished transaction held: copied again once it is done.
    pub held: Vec<RowId>,
    pub rows_copied: u64,
    /// Source rows left alone: unchanged since `since_gci`.
    pub rows_unchanged: u64,
    /// Every source row copied (or unchanged).
    pub done: bool,
    /// The sweep's next row id of the replica.
    pub sweep_next: u32,
    /// Replica rows deleted by the sweep (gone at the source since `since_gci`).
    pub rows_swept: u64,
    /// The sweep is over (at once when `since_gci` is 0: nothing was restored).
    pub swept: bool,
}

/// Rows an unchanged source row costs against a batch's `max_rows` (a GCI compare,
/// not a row image): a batch looks at up to this many times more of them.
const UNCHANGED_PER_COPIED: usize = 16;

/// The GCI (high word) of a row's last change, from its fixed part.
#[inline]
pub(super) fn row_gci_hi(fixed: &[u8]) -> u32 {
    u32::from_le_bytes([
        fixed[ROW_GCI_OFFSET],
        fixed[ROW_GCI_OFFSET + 1],
        fixed[ROW_GCI_OFFSET + 2],
        fixed[ROW_GCI_OFFSET + 3],
    ])
}

impl Fragment {
    /// Whether an unfinished transaction holds `row` for a change.
    fn held_for_change(&self, row: RowId) -> bool {
        self.locks
            .get(row)
            .is_some_and(|l| l.exclusive.is_some() || l.pending.is_some())
    }

    /// The committed image of `row` as a redo WRITE payload (fixed, var, disk parts).
    pub(super) fn committed_image(&self, row: RowId, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let layout = &self.table.layout;
        let fixed = self.fixed.get(row);
        let var = var_of(layout, &self.var, fixed);
        match &self.disk {
            None => push_row_image(out, fixed, var, &[]),
            Some(d) => {
                let r = layout.disk_ref(fixed);
                let mut image = Vec::new();
                d.read_committed(row, r, |img| image.extend_from_slice(img))?;
                push_row_image(out, fixed, var, &image);
            }
        }
        Ok(())
    }

    /// Copies up to `max_rows` committed rows, from `progress.next` on in row-id order,
    /// into `to` (a starting replica of this partition), both mutexes held by the
    /// caller. Rows held by unfinished transactions go to `progress.held`; with
    /// `progress.next` past the last row, the held rows are tried again (those still
    /// held stay). `progress.done` once nothing is left. With `progress.since_gci` set
    /// (`to` was restored to that GCI from its node's files), a committed row last
    /// changed at or below it is left alone, held or not: `to` has that image, and a
    /// change under way reaches `to` at its commit, as a follower.
    pub fn copy_rows_to(
        &self,
        to: &mut Fragment,
        progress: &mut CopyProgress,
        max_rows: usize,
    ) -> Result<()> {
        let mut payload = Vec::new();
        let mut copied = 0usize;
        let mut unchanged = 0usize;
        let mut cur = RowId(progress.next);
        while copied < max_rows && unchanged < max_rows * UNCHANGED_PER_COPIED {
            let Some(row) = self.fixed.next_row(cur) else {
                progress.next = u32::MAX;
                break;
            };
            cur = RowId(row.0 + 1);
            progress.next = cur.0;
            let f = self.fixed.get(row);
            if header_of(f) & ROW_ALLOC != 0 {
                // An insert not committed yet: its commit reaches `to` as a follower.
                continue;
            }
            if row_gci_hi(f) <= progress.since_gci {
                unchanged += 1;
                continue;
            }
            if self.held_for_change(row) {
                progress.held.push(row);
                continue;
            }
            self.copy_one(row, to, &mut payload)?;
            copied += 1;
        }
        if progress.next == u32::MAX {
            let held = std::mem::take(&mut progress.held);
            for row in held {
                if copied >= max_rows || self.held_for_change(row) {
                    progress.held.push(row);
                    continue;
                }
                // Gone (deleted, its delete already applied to `to` by the commit), or
                // an insert rolled back: nothing to copy.
                if self.fixed.next_row(row) != Some(row)
                    || header_of(self.fixed.get(row)) & ROW_ALLOC != 0
                {
                    continue;
                }
                self.copy_one(row, to, &mut payload)?;
                copied += 1;
            }
            progress.done = progress.held.is_empty();
        }
        progress.rows_copied += copied as u64;
        progress.rows_unchanged += unchanged as u64;
        if progress.since_gci == 0 {
            progress.swept = true;
        }
        Ok(())
    }

    /// For a node restart's digest of unchanged rows (`cluster::datapath::copy_digest`):
    /// the row-key bytes of every committed row from row `from` on whose ROW_GCI is at
    /// or below `gci_hi` go to `f`, with at most `max_rows` rows looked at. Returns
    /// the row to go on from, None at the end. As a committed read: an uncommitted
    /// insert is not a row yet, a row with an uncommitted change is its committed image.
    pub fn committed_keys_at_or_below(
        &self,
        from: u32,
        max_rows: usize,
        gci_hi: u32,
        f: &mut dyn FnMut(&[u8]),
    ) -> Option<u32> {
        let layout = &self.table.layout;
        let mut key = Vec::new();
        let mut cur = RowId(from);
        for _ in 0..max_rows {
            let row = self.fixed.next_row(cur)?;
            cur = RowId(row.0 + 1);
            let fixed = self.fixed.get(row);
            if header_of(fixed) & ROW_ALLOC != 0 {
                continue;
            }
            let gci = u32::from_le_bytes([
                fixed[ROW_GCI_OFFSET],
                fixed[ROW_GCI_OFFSET + 1],
                fixed[ROW_GCI_OFFSET + 2],
                fixed[ROW_GCI_OFFSET + 3],
            ]);
            if gci <= gci_hi {
                layout.row_key(fixed, var_of(layout, &self.var, fixed), &mut key);
                f(&key);
            }
        }
        Some(cur.0)
    }

    /// After the copy into a replica restored from its node's files (this fragment,
    /// starting, `progress.since_gci` set): looks at up to `16 * max_rows` of its rows
    /// and deletes those whose key `source` (the partition's primary) no longer holds
    /// committed — deleted there while this node was down. Every row is looked at,
    /// whatever its GCI: a chain may hold a row written after `since_gci` (a round
    /// that completed while the node was stopping) that was deleted since. A row the
    /// copy or a commit wrote is at the source (both mutexes are held by the caller,
    /// the source's first, and the source feeds every commit to this replica under
    /// its own). A row the source inserts and has not committed counts as gone: its
    /// commit reaches this replica as a follower (or its abort leaves nothing).
    /// `progress.swept` once every row was looked at. `gci_hi` is the GCI the deletes
    /// are marked with in the change maps.
    pub fn sweep_rows_gone_from(
        &mut self,
        source: &mut Fragment,
        progress: &mut CopyProgress,
        max_rows: usize,
        gci_hi: u32,
    ) -> Result<()> {
        debug_assert!(progress.done, "the sweep follows the copy");
        let layout = self.table.layout.clone();
        let mut key = Vec::new();
        let mut looked = 0usize;
        let mut cur = RowId(progress.sweep_next);
        while looked < max_rows * UNCHANGED_PER_COPIED {
            let Some(row) = self.fixed.next_row(cur) else {
                progress.sweep_next = u32::MAX;
                progress.swept = true;
                return Ok(());
            };
            cur = RowId(row.0 + 1);
            progress.sweep_next = cur.0;
            looked += 1;
            let fixed = self.fixed.get(row);
            // A starting replica holds no locks and no uncommitted insert.
            assert_eq!(
                header_of(fixed) & ROW_ALLOC,
                0,
                "an uncommitted row in a starting replica"
            );
            layout.row_key(fixed, var_of(&layout, &self.var, fixed), &mut key);
            let h32 = index_hash(key_hash(&key));
            let at_source = source
                .find(&key, h32)
                .is_some_and(|r| header_of(source.fixed.get(r)) & ROW_ALLOC == 0);
            if !at_source {
                self.remove_committed(row, h32, gci_hi);
                progress.rows_swept += 1;
            }
        }
        Ok(())
    }

    fn copy_one(&self, row: RowId, to: &mut Fragment, payload: &mut Vec<u8>) -> Result<()> {
        self.committed_image(row, payload)?;
        let gci = u64::from(row_gci_hi(self.fixed.get(row))) << 32;
        to.apply_redo(super::REDO_WRITE, payload, gci)
    }

    /// Whether a transaction with an id below `txn` holds a row of this replica for a
    /// change (it began before a restarting replica of the partition went live).
    pub fn has_lock_older_than(&self, txn: crate::txn::TxnId) -> bool {
        self.locks.any_owner(|owner| owner < txn)
    }

    /// A dead replica's memory back to its pool, whatever transactions held (they
    /// skip dead replicas): rows, indexes, locks, the disk part's extents.
    pub fn discard_all(&mut self) {
        self.locks = super::LockTable::default();
        for o in self.ordered.iter_mut().flatten() {
            o.free_all(&self.pool);
        }
        self.hash.free_all(&self.pool);
        self.var.free_all(&self.pool);
        self.fixed.free_all(&self.pool);
        self.disk_release_all();
        // Its next checkpoint (after the restart's copy) writes every part, whatever
        // a scan that began before does (a local checkpoint round may still be running).
        self.lcp_force_full = true;
        self.discards += 1;
    }
}
