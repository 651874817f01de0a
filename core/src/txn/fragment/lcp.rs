//! A fragment's side of a partial local checkpoint: the scan that finds what changed
//! since the previous LCP, and the restore that puts checkpointed rows back at their
//! row ids.
//!
//! **Scan** (fuzzy, in batches of pages, the fragment's mutex held per batch only):
//! parts are by logical page (`crate::checkpoint::part_of_page`). For a page in the
//! LCP's ALL range every committed row is written. For a page in a CHANGE part only the
//! 128-byte regions its change map marks are visited: their committed rows are written
//! and their other slots become delete markers; an unchanged page costs one look at
//! its map and none at its rows (the page-level change tracking of seed 003). A page
//! the previous LCP saw that is gone now is one page-delete marker. Uncommitted inserts
//! are not rows yet; a row with an uncommitted change is written as committed. What
//! changes after a page was scanned is in the redo log from the LCP's start on, which
//! a restart replays on top.
//!
//! **Restore** ([`Fragment::restore_put`] and friends) runs on an empty fragment before
//! it serves: rows go to their own row ids (so the next partial LCP's parts still
//! match the chain on disk), the hash index follows each change, and
//! [`Fragment::restore_finish`] rebuilds free lists and the ordered indexes once.
//!
//! Row images are the redo log's (`redo::push_row_image`): fixed part, var part,
//! disk image (empty for in-memory tables).

use super::redo::split_payload;
use super::*;
use crate::storage::fixed::{CHANGE_MAP_BITS, ROW_FREE};

/// Where an LCP scan sends what it finds.
pub trait LcpSink {
    /// A committed row of an in-memory table: its fixed and var parts (the image is
    /// that of a redo record, [`super::push_row_image`], with an empty disk part).
    fn row(&mut self, row_id: u32, fixed: &[u8], var: &[u8]);
    fn delete_row(&mut self, row_id: u32);
    fn delete_page(&mut self, page_no: u32);
}

/// Changes since the previous LCP of the fragment (for choosing its ALL parts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LcpChangeCounts {
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
}

/// An LCP scan in progress over one fragment.
pub struct LcpScan {
    next_page: u32,
    /// Pages to look at: the larger of the fragment's page count now and at the
    /// previous LCP (pages gone since must become delete markers).
    end_page: u32,
    /// Pages held when this scan passed them (becomes the fragment's `lcp_seen`).
    seen: Vec<bool>,
    pub rows_written: u64,
    pub deletes_written: u64,
    pub pages_skipped: u64,
    /// Highest row GCI written.
    pub max_gci: u32,
    /// Every part is an ALL part in this LCP.
    all_parts: bool,
    /// The fragment's discard count when the scan began.
    discards_at_begin: u64,
    /// In CHANGE parts, rows with an older GCI did not change since the previous LCP.
    min_change_gci: u32,
    /// The slots of the page being written (reused from page to page).
    slots: Vec<u32>,
    /// The committed rows found among `slots`, to be written (reused likewise).
    rows: Vec<FoundRow>,
}

/// A row the slot pass of [`Fragment::lcp_slots`] found to write.
#[derive(Clone, Copy)]
struct FoundRow {
    slot: u32,
    gci: u32,
    /// Its var part's reference.
    var: Option<u32>,
}

/// How many rows ahead the row pass's loads are started: the var parts of the rows
/// lie anywhere in DataMemory, and a scan that waited for each in turn spent three
/// quarters of its time in cache misses.
const LCP_PREFETCH_DISTANCE: usize = 8;

impl LcpScan {
    pub fn done(&self) -> bool {
        self.next_page >= self.end_page
    }
}

impl Fragment {
    /// Changes counted since the previous LCP began.
    pub fn lcp_change_counts(&self) -> LcpChangeCounts {
        self.lcp_counts
    }

    /// Whether anything changed since the previous LCP began (else the LCP writes no
    /// data file for this fragment).
    pub fn changed_since_lcp(&self) -> bool {
        self.lcp_counts != LcpChangeCounts::default()
            || self.lcp_seen.len() as u32 != self.fixed.logical_pages()
            || (0..self.fixed.logical_pages()).any(|lp| self.fixed.page_changed(lp))
    }

    /// Whether the next LCP must write every part (an earlier LCP scanned the fragment,
    /// clearing its change maps, and then failed before its file was part of a chain).
    pub fn lcp_needs_full(&self) -> bool {
        self.lcp_force_full
    }

    /// The next LCP writes every part: one that scanned this fragment failed, or the
    /// fragment was copied again by a node restart (its chain holds none of it).
    pub fn require_full_lcp(&mut self) {
        self.lcp_force_full = true;
    }

    /// The replica was restored from its node's own checkpoint chain by a node restart
    /// (no LCP round is scanning it): its next LCP continues that chain, writing only
    /// what changed since (the restore left its change maps clear; redo replay, the
    /// copy and new commits mark them). Every row of a changed region is written then:
    /// a scan that began before the node's stop moved the start GCI past rows the
    /// chain does not hold.
    pub fn continue_chain_after_restore(&mut self) {
        self.lcp_force_full = false;
        self.lcp_start_gci = 0;
    }

    /// How many times the replica's rows were discarded (its node stopped): an LCP
    /// round that planned the replica compares it at the end of its scan, and stores
    /// nothing of a replica discarded since (its file would hold the rows before the
    /// discard, or nothing, or some of each).
    pub fn discards(&self) -> u64 {
        self.discards
    }

    /// Starts an LCP scan (`all_parts`: this LCP writes every part in full) at global
    /// checkpoint `start_gci_hi`; the change counts start again from zero.
    pub fn lcp_begin(&mut self, all_parts: bool, start_gci_hi: u32) -> LcpScan {
        self.lcp_counts = LcpChangeCounts::default();
        // A row changed since the previous scan began carries a GCI at least that
        // scan's start GCI: in a changed region, older rows are skipped.
        let min_change_gci = std::mem::replace(&mut self.lcp_start_gci, start_gci_hi);
        let end_page = self.fixed.logical_pages().max(self.lcp_seen.len() as u32);
        LcpScan {
            next_page: 0,
            end_page,
            seen: vec![false; end_page as usize],
            rows_written: 0,
            deletes_written: 0,
            pages_skipped: 0,
            max_gci: 0,
            all_parts,
            discards_at_begin: self.discards,
            min_change_gci,
            slots: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Scans up to `max_pages` pages; `all_part(page)` says whether the page is in an
    /// ALL part of this LCP. Returns true when the scan is complete (the fragment then
    /// remembers which pages it saw).
    pub fn lcp_scan_batch(
        &mut self,
        scan: &mut LcpScan,
        max_pages: u32,
        all_part: &dyn Fn(u32) -> bool,
        sink: &mut dyn LcpSink,
    ) -> bool {
        let stop = scan.end_page.min(scan.next_page.saturating_add(max_pages));
        while scan.next_page < stop {
            let lp = scan.next_page;
            scan.next_page += 1;
            // Two pages ahead the change map is loaded; one page ahead the changed
            // regions (of a page the previous LCP saw, in a CHANGE part), so that
            // their cache misses overlap this page's work.
            if lp + 2 < scan.end_page {
                self.fixed.prefetch_change_map(lp + 2);
            }
            let next = lp + 1;
            if next < scan.end_page
                && !all_part(next)
                && self.lcp_seen.get(next as usize).copied().unwrap_or(false)
            {
                self.fixed.prefetch_changed_regions(next);
            }
            let was_seen = self.lcp_seen.get(lp as usize).copied().unwrap_or(false);
            let all = all_part(lp);
            if !self.fixed.is_held(lp) {
                if !all && was_seen {
                    sink.delete_page(lp);
                    scan.deletes_written += 1;
                }
                continue;
            }
            scan.seen[lp as usize] = true;
            let Some(map) = self.fixed.take_change_map(lp) else {
                continue;
            };
            let mut slots = std::mem::take(&mut scan.slots);
            slots.clear();
            if all || !was_seen {
                // ALL part, or a page new since the previous LCP: every slot.
                slots.extend(0..self.fixed.slots_per_page());
                self.lcp_slots(scan, lp, &slots, !all, 0, sink);
            } else if map.iter().all(|&b| b == 0) {
                scan.pages_skipped += 1;
            } else {
                for bit in 0..CHANGE_MAP_BITS {
                    if map[(bit / 8) as usize] & (1 << (bit % 8)) != 0 {
                        slots.extend(self.fixed.slots_of_change_bit(bit));
                    }
                }
                let min_gci = scan.min_change_gci;
                self.lcp_slots(scan, lp, &slots, true, min_gci, sink);
            }
            scan.slots = slots;
        }
        if scan.done() {
            if scan.all_parts && self.discards == scan.discards_at_begin {
                // A full LCP leaves nothing behind that a failed one missed (unless
                // the rows it began with were discarded meanwhile).
                self.lcp_force_full = false;
            }
            self.lcp_seen = std::mem::take(&mut scan.seen);
            while self.lcp_seen.last() == Some(&false) {
                self.lcp_seen.pop();
            }
            true
        } else {
            false
        }
    }

    /// Writes the committed rows among `slots` (ascending) of page `lp` whose GCI is at
    /// least `min_gci`; with `deletes`, free slots become delete markers (written as
    /// they are found, before the rows: each names its own slot, so the order does not
    /// matter to a restore). Two passes: the page's slots are decided in order (the
    /// page is looked up once; the hardware prefetcher runs ahead of a run of slots),
    /// then the rows found are written with their var parts' cache misses overlapped,
    /// [`LCP_PREFETCH_DISTANCE`] rows apart: the directory word is loaded, then the
    /// var part, then the row is written.
    fn lcp_slots(
        &mut self,
        scan: &mut LcpScan,
        lp: u32,
        slots: &[u32],
        deletes: bool,
        min_gci: u32,
        sink: &mut dyn LcpSink,
    ) {
        const D: usize = LCP_PREFETCH_DISTANCE;
        let Some(page) = self.fixed.page_slots(lp) else {
            return;
        };
        let layout = &self.table.layout;
        let var_pages = &self.var;
        let mut rows = std::mem::take(&mut scan.rows);
        rows.clear();
        for &slot in slots {
            match page.header(slot) {
                Some(h) if h & ROW_ALLOC == 0 => {
                    let f = page.get(slot);
                    let gci = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
                    if gci >= min_gci {
                        rows.push(FoundRow {
                            slot,
                            gci,
                            var: layout.var_ref(f),
                        });
                    }
                }
                _ if deletes => {
                    sink.delete_row(RowId::new(lp, slot).0);
                    scan.deletes_written += 1;
                }
                _ => {}
            }
        }
        let n = rows.len();
        for i in 0..n + 2 * D {
            if i < n
                && let Some(v) = rows[i].var
            {
                var_pages.prefetch_dir(v);
            }
            if i >= D
                && i - D < n
                && let Some(v) = rows[i - D].var
            {
                var_pages.prefetch(v);
            }
            if i >= 2 * D {
                let r = rows[i - 2 * D];
                scan.max_gci = scan.max_gci.max(r.gci);
                let var: &[u8] = r.var.map_or(&[], |v| var_pages.get(v));
                sink.row(RowId::new(lp, r.slot).0, page.get(r.slot), var);
                scan.rows_written += 1;
            }
        }
        scan.rows = rows;
    }

    /// Restore: row `row_id` holds this image (replacing what the slot held).
    pub fn restore_put(&mut self, row_id: u32, image: &[u8]) -> Result<()> {
        let row = RowId(row_id);
        let (fixed, var, disk) = split_payload(image).ok_or_else(|| {
            codes::corrupt_page(format!(
                "checkpoint row {row_id} of table {}: truncated image",
                self.table.id
            ))
        })?;
        if fixed.len() != self.fixed.slot_size() as usize || !disk.is_empty() {
            return Err(codes::corrupt_page(format!(
                "checkpoint row {row_id} of table {}: image does not fit the table",
                self.table.id
            )));
        }
        if self.fixed.header(row).is_some() {
            self.restore_remove(row);
        }
        let table = self.table.clone();
        let layout = &table.layout;
        let mut bytes = std::mem::take(&mut self.enc_fixed);
        bytes.clear();
        bytes.extend_from_slice(fixed);
        let h = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        // Lock bits belong to the past run; the tuple version stays.
        set_header(&mut bytes, h & !(ROW_LOCKED | ROW_ALLOC | ROW_FREE));
        let mut var_ref = None;
        if layout.has_var() {
            let Some(v) = self.var.alloc(&self.pool, var) else {
                self.enc_fixed = bytes;
                return Err(codes::out_of_data_memory());
            };
            layout.set_var_ref(&mut bytes, v);
            var_ref = Some(v);
        }
        let put = self.fixed.restore_put(&self.pool, row, &bytes);
        self.enc_fixed = bytes;
        if put.is_none() {
            if let Some(v) = var_ref {
                self.var.free(&self.pool, v);
            }
            return Err(codes::out_of_data_memory());
        }
        let h32 = self.row_hash(row);
        self.hash.insert(&self.pool, h32, row)
    }

    /// Restore: the row at `row_id` is gone (if it was there).
    pub fn restore_delete(&mut self, row_id: u32) {
        let row = RowId(row_id);
        if self.fixed.header(row).is_some() {
            self.restore_remove(row);
        }
    }

    /// Restore: every row of page `page_no` is gone.
    pub fn restore_delete_page(&mut self, page_no: u32) {
        if !self.fixed.is_held(page_no) {
            return;
        }
        for slot in 0..self.fixed.slots_per_page() {
            self.restore_delete(RowId::new(page_no, slot).0);
        }
    }

    fn restore_remove(&mut self, row: RowId) {
        let h32 = self.row_hash(row);
        let removed = self.hash.remove(&self.pool, h32, row);
        assert!(removed, "restored row missing from the hash index");
        if let Some(v) = self.table.layout.var_ref(self.fixed.get(row)) {
            self.var.free(&self.pool, v);
        }
        self.fixed.restore_free(row);
    }

    /// Ends a restore: free lists rebuilt, empty pages back to the pool, ordered
    /// indexes built from the rows, and the pages restored remembered as "seen by the
    /// previous LCP" (the next LCP continues the chain on disk).
    pub fn restore_finish(&mut self) -> Result<()> {
        self.fixed.finish_restore(&self.pool);
        self.lcp_seen = (0..self.fixed.logical_pages())
            .map(|lp| self.fixed.is_held(lp))
            .collect();
        self.rebuild_ordered_indexes()
    }

    /// Builds every ordered index again from the committed rows.
    pub fn rebuild_ordered_indexes(&mut self) -> Result<()> {
        let Fragment {
            table,
            fixed,
            var,
            ordered,
            pool,
            ..
        } = self;
        let layout = &table.layout;
        for (i, o) in ordered.iter_mut().enumerate() {
            let Some(o) = o else { continue };
            o.free_all(pool);
            let cols = &table.indexes[i].columns;
            let mut cmp = |a: RowId, b: RowId| {
                let fa = fixed.get(a);
                let fb = fixed.get(b);
                layout.cmp_rows(
                    cols,
                    (fa, var_of(layout, var, fa)),
                    (fb, var_of(layout, var, fb)),
                )
            };
            let mut cur = RowId(0);
            while let Some(r) = fixed.next_row(cur) {
                if header_of(fixed.get(r)) & ROW_ALLOC == 0 {
                    o.insert(pool, r, &mut cmp)?;
                }
                cur = RowId(r.0 + 1);
            }
        }
        Ok(())
    }
}
