//! OPTIMIZE TABLE on one fragment replica: rows and var parts moved so that whole pages
//! empty and go back to DataMemory, where any table can use them.
//!
//! NDB's OPTIMIZE moves only var-size parts; here both parts and the disk records move
//! and the ordered indexes are packed, in four phases, each
//! run in bounded steps under the fragment's mutex (the caller releases it and waits
//! between steps, as ndb_optimization_delay):
//! 1. **Fixed parts.** The least used fixed pages beyond `ceil(rows / slots_per_page)`
//!    are evacuated ([`FixedPages::begin_evacuation`]): each committed, unlocked row on
//!    them is copied to a free slot of a staying page, its hash index entry and ordered
//!    index entries relocated, both slots marked changed at the current GCI (the next
//!    partial LCP writes a delete marker for the old row id and the row at the new one,
//!    as for a delete and an insert), and the old slot freed; a page goes back to the
//!    pool when its last row leaves. This changes row ids, so it only happens while
//!    nothing holds a position in the fragment by row id: the caller passes
//!    `may_move_rows` = no open [`ScanCursor`] (scans, LCP scans, node-restart copies),
//!    checked under the mutex. Rows locked by a transaction (pending changes, locking
//!    reads, uncommitted inserts) stay where they are. A row with a disk record has the
//!    record's owner row id rewritten in place (undo-logged) as it moves; the LCP holds
//!    a position on every disk-data replica of its node from before its `LcpStart`
//!    record to its end, so such a move never falls between the disk pages'
//!    checkpoint point and the fragment's scan.
//! 2. **Var parts.** The emptiest var pages are evacuated ([`VarPages::begin_evacuation`]):
//!    a pass over the rows in row-id order moves each var part found on them to another
//!    page and rewrites the row's reference. Row ids do not change, so this runs
//!    whatever else is open (NDB's `move_var_part`). Checkpoints are not marked: an LCP
//!    image holds the var part's bytes, not its reference.
//! 3. **Disk records** (tables with disk columns): moved out of the least used extents,
//!    which go back to the tablespace (`optimize_disk.rs`). Row ids do not change.
//! 4. **Ordered indexes.** Each index's leaves are packed full, one leaf group per work
//!    item, resuming by key (`optimize_index.rs`); emptied node pages go back to the
//!    pool. Row ids do not change, so this too runs whatever else is open.
//!
//! No phase writes redo (disk record moves are undo-logged as the disk pages need): a
//! move changes no value, and recovery rebuilds rows from
//! checkpoint images and logical redo records (by key), and indexes from the rows. The
//! hash index shrinks as entries go (linear hashing merges buckets with the row count);
//! at the end its buckets are merged down to the load a fresh build has and its
//! overflow pages evacuated while a page's worth of containers is free (the upkeep
//! after deletes waits for more), and the empty pages given back.
//!
//! Invariant: between steps, the pages an unfinished cursor evacuates take no new rows;
//! a cursor that stops early must be ended with [`Fragment::optimize_abandon`], which
//! puts them back.

use super::optimize_disk::DiskMove;
use super::optimize_index::PackResume;
use super::*;
use crate::disk::tsman::ExtentId;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Work units of one step: a row looked at costs 1, a move [`MOVE_COST`], a leaf group
/// packed [`GROUP_COST`] plus one per 8 entries.
pub const STEP_BUDGET: u32 = 8192;
const MOVE_COST: u32 = 16;
const GROUP_COST: u32 = 256;
/// Passes of the disk phase at most (records are not all of one size, so one pass's plan
/// may leave an extent that a second can empty).
const MAX_DISK_PASSES: u32 = 3;
/// Hash index bucket merges and overflow pages evacuated at most (at the end of the
/// last step).
const HASH_MERGES_PER_STEP: u32 = 1 << 16;
const HASH_PAGES_PER_STEP: u32 = 64;

/// What a fragment's OPTIMIZE did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OptimizeStats {
    pub rows_moved: u64,
    pub var_parts_moved: u64,
    /// Rows left in place because a transaction held them.
    pub rows_locked: u64,
    pub fixed_pages_before: u32,
    pub fixed_pages_after: u32,
    pub var_pages_before: u32,
    pub var_pages_after: u32,
    pub ordered_pages_before: u32,
    pub ordered_pages_after: u32,
    pub disk_records_moved: u64,
    pub extents_before: u32,
    pub extents_after: u32,
    /// Ordered index leaves emptied by packing.
    pub index_leaves_freed: u64,
    /// Hash index (IndexMemory) pages given back.
    pub hash_pages_freed: u64,
}

/// What one step reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptimizeStep {
    /// More to do: call again (after the pause).
    More,
    /// Rows must move but a row-id position is open: call again later.
    Busy,
    Done,
}

#[derive(Debug)]
enum Phase {
    Start,
    Fixed {
        pages: Vec<u32>,
        at: usize,
        slot: u32,
    },
    Var {
        pages: Vec<u32>,
        next: RowId,
    },
    Disk {
        extents: Vec<ExtentId>,
        next: RowId,
        /// Passes begun (a pass that ends with extents still reclaimable starts
        /// another, up to [`MAX_DISK_PASSES`]).
        pass: u32,
    },
    Indexes {
        pos: usize,
        after: Option<PackResume>,
    },
    Done,
}

/// An OPTIMIZE of one fragment in progress (held by the caller between steps).
#[derive(Debug)]
pub struct OptimizeCursor {
    phase: Phase,
    pub stats: OptimizeStats,
    /// Scratch for one leaf group's entries.
    pack_buf: Vec<u32>,
}

impl Default for OptimizeCursor {
    fn default() -> Self {
        OptimizeCursor {
            phase: Phase::Start,
            stats: OptimizeStats::default(),
            pack_buf: Vec::new(),
        }
    }
}

impl OptimizeCursor {
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }
}

/// Pages OPTIMIZE TABLE would give back from a fragment now (its estimate is its plan).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reclaimable {
    pub fixed_pages: u32,
    pub var_pages: u32,
    /// Ordered index pages (an estimate: [`OrderedIndex::reclaimable_pages`]).
    pub ordered_pages: u32,
    /// Extents of the tablespace (disk-data tables).
    pub extents: u32,
}

impl Reclaimable {
    /// DataMemory pages (extents are counted apart).
    pub fn pages(&self) -> u32 {
        self.fixed_pages + self.var_pages + self.ordered_pages
    }
}

/// An open position in a fragment by row id (or by index key and row id): while any
/// is open, OPTIMIZE moves no row of the fragment. Dropping it closes it.
pub struct ScanCursor {
    cell: Arc<FragmentCell>,
}

impl Drop for ScanCursor {
    fn drop(&mut self) {
        self.cell.gate.scan_cursors.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Marks a fragment replica as being optimized (one OPTIMIZE at a time per replica).
pub struct OptimizeClaim {
    cell: Arc<FragmentCell>,
}

impl Drop for OptimizeClaim {
    fn drop(&mut self) {
        self.cell.gate.optimizing.store(false, Ordering::SeqCst);
    }
}

/// The per-replica counters OPTIMIZE coordinates through (fields of [`FragmentCell`]).
#[derive(Default)]
pub struct OptimizeGate {
    scan_cursors: AtomicU32,
    optimizing: AtomicBool,
}

impl FragmentCell {
    /// Opens a row-id position on this replica (before its first batch is read).
    pub fn open_cursor(self: &Arc<Self>) -> ScanCursor {
        self.gate.scan_cursors.fetch_add(1, Ordering::SeqCst);
        ScanCursor { cell: self.clone() }
    }

    /// Whether rows may move now; call with the fragment's mutex held (a cursor is
    /// opened before its first batch takes the mutex, so none can begin meanwhile).
    pub fn no_open_cursors(&self) -> bool {
        self.gate.scan_cursors.load(Ordering::SeqCst) == 0
    }

    /// Claims the replica for an OPTIMIZE; None when one is running already.
    pub fn claim_optimize(self: &Arc<Self>) -> Option<OptimizeClaim> {
        self.gate
            .optimizing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()?;
        Some(OptimizeClaim { cell: self.clone() })
    }
}

impl std::ops::Deref for ScanCursor {
    type Target = FragmentCell;
    fn deref(&self) -> &FragmentCell {
        &self.cell
    }
}

impl Fragment {
    /// Pages an OPTIMIZE would give back now.
    pub fn reclaimable(&self) -> Reclaimable {
        Reclaimable {
            fixed_pages: self.fixed.reclaimable_pages(),
            var_pages: self.var.reclaimable_pages(),
            ordered_pages: self
                .ordered
                .iter()
                .flatten()
                .map(OrderedIndex::reclaimable_pages)
                .sum(),
            extents: self.reclaimable_extents(),
        }
    }

    /// One bounded step of an OPTIMIZE (module docs). `gci` is the current GCI (moved
    /// rows are stamped with it for the next partial LCP). An error (a disk I/O error
    /// while moving a disk record) ends the cursor.
    pub fn optimize_step(
        &mut self,
        cur: &mut OptimizeCursor,
        may_move_rows: bool,
        gci: u32,
    ) -> Result<OptimizeStep> {
        let mut budget = STEP_BUDGET;
        loop {
            match &mut cur.phase {
                Phase::Start => {
                    self.note_pages_before(cur);
                    if self.fixed.reclaimable_pages() > 0 {
                        if !may_move_rows {
                            return Ok(OptimizeStep::Busy);
                        }
                        let pages = self.fixed.begin_evacuation();
                        cur.phase = Phase::Fixed {
                            pages,
                            at: 0,
                            slot: 0,
                        };
                    } else {
                        self.begin_var_phase(cur);
                    }
                }
                Phase::Fixed { .. } if !may_move_rows => return Ok(OptimizeStep::Busy),
                Phase::Fixed { pages, at, slot } => {
                    let Some(&lp) = pages.get(*at) else {
                        self.begin_var_phase(cur);
                        continue;
                    };
                    for s in self.fixed.used_slots_from(lp, *slot) {
                        if budget < MOVE_COST {
                            *slot = s;
                            return Ok(OptimizeStep::More);
                        }
                        budget -= MOVE_COST;
                        let row = RowId::new(lp, s);
                        let h = header_of(self.fixed.get(row));
                        if h & (ROW_ALLOC | ROW_LOCKED) != 0 {
                            cur.stats.rows_locked += 1;
                            continue;
                        }
                        if !self.move_fixed(row, gci) {
                            // No free slot left on the staying pages (inserts took
                            // them meanwhile): what is left stays.
                            let rest = std::mem::take(pages);
                            for lp in rest {
                                self.fixed.end_evacuation(lp);
                            }
                            self.begin_var_phase(cur);
                            break;
                        }
                        cur.stats.rows_moved += 1;
                    }
                    if let Phase::Fixed { at, slot, .. } = &mut cur.phase {
                        self.fixed.end_evacuation(lp);
                        *at += 1;
                        *slot = 0;
                    }
                }
                Phase::Var { pages, next } => {
                    if pages.is_empty() {
                        cur.phase = Phase::Disk {
                            extents: self.begin_disk_evacuation(),
                            next: RowId(0),
                            pass: 1,
                        };
                        continue;
                    }
                    let mut from = *next;
                    loop {
                        let Some(row) = self.fixed.next_row(from) else {
                            for lp in std::mem::take(pages) {
                                self.var.end_evacuation(lp);
                            }
                            break;
                        };
                        if budget < MOVE_COST {
                            *next = row;
                            return Ok(OptimizeStep::More);
                        }
                        budget -= 1;
                        from = RowId(row.0 + 1);
                        let f = self.fixed.get(row);
                        let Some(v) = self.table.layout.var_ref(f) else {
                            continue;
                        };
                        if !self.var.is_evacuating_ref(v) {
                            continue;
                        }
                        if header_of(f) & (ROW_ALLOC | ROW_LOCKED) != 0 {
                            cur.stats.rows_locked += 1;
                            continue;
                        }
                        budget -= MOVE_COST - 1;
                        if self.move_var(row, v) {
                            cur.stats.var_parts_moved += 1;
                        }
                    }
                }
                Phase::Disk {
                    extents,
                    next,
                    pass,
                } => {
                    if extents.is_empty()
                        && *pass < MAX_DISK_PASSES
                        && self.reclaimable_extents() > 0
                    {
                        *extents = self.begin_disk_evacuation();
                        *next = RowId(0);
                        *pass += 1;
                        continue;
                    }
                    if extents.is_empty() {
                        cur.phase = Phase::Indexes {
                            pos: 0,
                            after: None,
                        };
                        continue;
                    }
                    let mut from = *next;
                    loop {
                        let row = match self.fixed.next_row(from) {
                            Some(row) if budget >= MOVE_COST => row,
                            Some(row) => {
                                *next = row;
                                return Ok(OptimizeStep::More);
                            }
                            None => {
                                let rest = std::mem::take(extents);
                                self.end_disk_evacuation(rest);
                                break;
                            }
                        };
                        budget -= 1;
                        from = RowId(row.0 + 1);
                        if !self.disk_record_evacuating(row) {
                            continue;
                        }
                        if header_of(self.fixed.get(row)) & (ROW_ALLOC | ROW_LOCKED) != 0 {
                            cur.stats.rows_locked += 1;
                            continue;
                        }
                        let moved = match self.move_disk(row, gci) {
                            Ok(m) => m,
                            Err(e) => {
                                self.end_phase(cur);
                                self.finish(cur);
                                return Err(e);
                            }
                        };
                        match moved {
                            DiskMove::Moved => {
                                budget -= MOVE_COST - 1;
                                cur.stats.disk_records_moved += 1;
                            }
                            DiskMove::Skipped => {}
                            DiskMove::NoRoom => {
                                // The kept extents are full (inserts took the room
                                // meanwhile): what is left stays.
                                let rest = std::mem::take(extents);
                                self.end_disk_evacuation(rest);
                                *pass = MAX_DISK_PASSES;
                                break;
                            }
                        }
                    }
                }
                Phase::Indexes { pos, after } => {
                    if *pos >= self.ordered.len() {
                        // Last, the hash index's overflow pages (a step's worth).
                        cur.stats.hash_pages_freed += u64::from(self.hash.compact(
                            &self.pool,
                            HASH_MERGES_PER_STEP,
                            HASH_PAGES_PER_STEP,
                        ));
                        self.finish(cur);
                        return Ok(OptimizeStep::Done);
                    }
                    if budget < GROUP_COST {
                        return Ok(OptimizeStep::More);
                    }
                    let (step, resume) =
                        self.pack_index_group(*pos, after.as_ref(), &mut cur.pack_buf);
                    budget = budget.saturating_sub(GROUP_COST + step.entries / 8);
                    cur.stats.index_leaves_freed += u64::from(step.leaves_freed);
                    *after = resume;
                    if after.is_none() {
                        *pos += 1;
                    }
                }
                Phase::Done => return Ok(OptimizeStep::Done),
            }
        }
    }

    fn note_pages_before(&self, cur: &mut OptimizeCursor) {
        cur.stats.fixed_pages_before = self.fixed.pages();
        cur.stats.var_pages_before = self.var.pages();
        cur.stats.ordered_pages_before = self.ordered_pages();
        cur.stats.extents_before = self.disk_extents();
    }

    /// Ends an unfinished OPTIMIZE of this fragment: the pages it was emptying take
    /// rows again.
    pub fn optimize_abandon(&mut self, cur: &mut OptimizeCursor) {
        if matches!(cur.phase, Phase::Start) {
            self.note_pages_before(cur);
        }
        self.end_phase(cur);
        self.finish(cur);
    }

    /// Leaves the rows where they are (open positions did not close in time): the
    /// pages being emptied take rows again and the var phase begins.
    pub fn optimize_skip_rows(&mut self, cur: &mut OptimizeCursor) {
        if matches!(cur.phase, Phase::Start | Phase::Fixed { .. }) {
            if matches!(cur.phase, Phase::Start) {
                self.note_pages_before(cur);
            }
            self.end_phase(cur);
            self.begin_var_phase(cur);
        }
    }

    fn end_phase(&mut self, cur: &mut OptimizeCursor) {
        match std::mem::replace(&mut cur.phase, Phase::Done) {
            Phase::Fixed { pages, .. } => {
                for lp in pages {
                    self.fixed.end_evacuation(lp);
                }
            }
            Phase::Var { pages, .. } => {
                for lp in pages {
                    self.var.end_evacuation(lp);
                }
            }
            Phase::Disk { extents, .. } => self.end_disk_evacuation(extents),
            Phase::Start | Phase::Indexes { .. } | Phase::Done => {}
        }
    }

    fn begin_var_phase(&mut self, cur: &mut OptimizeCursor) {
        let pages = if self.table.layout.has_var() {
            self.var.begin_evacuation()
        } else {
            Vec::new()
        };
        cur.phase = Phase::Var {
            pages,
            next: RowId(0),
        };
    }

    fn finish(&mut self, cur: &mut OptimizeCursor) {
        cur.phase = Phase::Done;
        cur.stats.fixed_pages_after = self.fixed.pages();
        cur.stats.var_pages_after = self.var.pages();
        cur.stats.ordered_pages_after = self.ordered_pages();
        cur.stats.extents_after = self.disk_extents();
    }

    /// Moves a committed, unlocked row to a free slot of a staying page; false when
    /// there is none.
    fn move_fixed(&mut self, old: RowId, gci: u32) -> bool {
        let h = header_of(self.fixed.get(old));
        let Some(new) = self.fixed.alloc_existing(h) else {
            return false;
        };
        if !self.disk_rename_owner(old, new) {
            self.fixed.free(&self.pool, new);
            return false;
        }
        let mut bytes = std::mem::take(&mut self.enc_fixed);
        bytes.clear();
        bytes.extend_from_slice(self.fixed.get(old));
        bytes[4..8].copy_from_slice(&gci.to_le_bytes());
        self.fixed.get_mut(new).copy_from_slice(&bytes);
        self.enc_fixed = bytes;
        let h32 = self.row_hash(old);
        let relocated = self.hash.relocate(h32, old, new);
        assert!(relocated, "moved row {old:?} missing from the hash index");
        let mask = self.all_ordered_mask();
        self.with_ordered(mask, |o, _pool, cmp| {
            let relocated = o.relocate(old, new, cmp);
            assert!(relocated, "moved row {old:?} missing from an ordered index");
        });
        self.fixed.mark_changed(old, gci);
        self.fixed.mark_changed(new, gci);
        self.lcp_counts.deleted += 1;
        self.lcp_counts.inserted += 1;
        // The var part now belongs to the new slot: only the fixed slot is freed.
        self.fixed.free(&self.pool, old);
        true
    }

    /// Moves a row's var part off an evacuated page; false when no staying page has
    /// room for it.
    fn move_var(&mut self, row: RowId, v: u32) -> bool {
        let mut bytes = std::mem::take(&mut self.enc_var);
        bytes.clear();
        bytes.extend_from_slice(self.var.get(v));
        let moved = self.var.alloc_existing(&bytes);
        self.enc_var = bytes;
        let Some(nv) = moved else {
            return false;
        };
        let layout = &self.table.layout;
        layout.set_var_ref(self.fixed.get_mut(row), nv);
        self.var.free(&self.pool, v);
        true
    }
}
