//! Fixed-size row parts (DBTUP fixed pages) of one fragment.
//!
//! Page layout (32 KB pool page):
//! ```text
//! 0   u32 magic FIXED_PAGE_MAGIC        4   u32 logical page number
//! 8   u32 free slot count               12  u32 first free slot (NONE = none)
//! 16  u32 prev page on the free list    20  u32 next page on the free list
//! 24  u32 1 when on the free list       28  u32 max GCI of rows changed on the page
//! 32  32 bytes change map (one bit per 128 bytes of slots, for partial LCP)
//! 64  slots of `slot_size` bytes
//! ```
//! A free slot has `ROW_FREE` in its first word and the next free slot index in its
//! second word. Pages with at least one free slot form a FIFO list threaded through the
//! page headers (NDB's thFreeFirst); a page that becomes full leaves it, a full page
//! that gets a free slot joins at the tail, and a page that becomes empty is returned to
//! the pool at once (per-page deallocation), its logical number kept for reuse.
//!
//! Word 24 is 0 (off the list), 1 (on the free list) or 2 (being evacuated by OPTIMIZE
//! TABLE: off the list whatever its free count, so that no row is allocated there while
//! its rows move out; `compact.rs`).
//!
//! Invariants (checked by [`FixedPages::check`] in tests): a page that is not being
//! evacuated is on the free list iff it has a free slot; the free-slot chain of a page
//! has exactly `free count` entries; `rows` equals the number of used slots.

mod compact;
mod lcp;
pub use lcp::{CHANGE_MAP_BITS, PageSlots};

use super::page_map::PageMap;
use super::pool::{PAGE_SIZE, Page, PageKind, PagePool};
use super::row_id::{MAX_SLOTS_PER_PAGE, RowId};

pub const FIXED_PAGE_MAGIC: u32 = 0x5455_5046; // "FPUT"
pub const PAGE_HEADER_SIZE: usize = 64;
const NONE: u32 = u32::MAX;
const OFF_MAGIC: usize = 0;
const OFF_LOGICAL: usize = 4;
const OFF_FREE_COUNT: usize = 8;
const OFF_FIRST_FREE: usize = 12;
const OFF_PREV: usize = 16;
const OFF_NEXT: usize = 20;
const OFF_ON_LIST: usize = 24;
/// Word 24 of a page being evacuated (see the module docs).
const EVACUATING: u32 = 2;
const OFF_MAX_GCI: usize = 28;
const OFF_CHANGE_MAP: usize = 32;
const CHANGE_MAP_BYTES: usize = 32;
/// Bytes of slots per change-map bit: 256 bits cover a whole page.
const CHANGE_BIT_BYTES: usize = 128;
const _: () = assert!(OFF_CHANGE_MAP + CHANGE_MAP_BYTES <= PAGE_HEADER_SIZE);
const _: () = assert!(CHANGE_MAP_BYTES * 8 * CHANGE_BIT_BYTES >= PAGE_SIZE - PAGE_HEADER_SIZE);

/// Row header bits (first word of every fixed part).
pub const ROW_FREE: u32 = 1 << 0;
/// Inserted by a transaction that has not committed yet.
pub const ROW_ALLOC: u32 = 1 << 1;
/// The row has an entry in the fragment's lock table.
pub const ROW_LOCKED: u32 = 1 << 2;
/// Tuple version (bumped on every committed change) in the high 16 bits.
pub const ROW_VERSION_SHIFT: u32 = 16;

pub struct FixedPages {
    slot_size: u32,
    slots_per_page: u32,
    pages: PageMap,
    list_head: u32,
    list_tail: u32,
    rows: u64,
}

impl FixedPages {
    pub fn new(slot_size: u32) -> FixedPages {
        assert!(
            slot_size >= 8 && slot_size.is_multiple_of(4),
            "fixed slot size {slot_size} must be a multiple of 4, >= 8"
        );
        let slots_per_page =
            ((PAGE_SIZE - PAGE_HEADER_SIZE) as u32 / slot_size).min(MAX_SLOTS_PER_PAGE - 1);
        assert!(
            slots_per_page >= 1,
            "fixed slot size {slot_size} does not fit a page"
        );
        FixedPages {
            slot_size,
            slots_per_page,
            pages: PageMap::new(PageKind::Fixed),
            list_head: NONE,
            list_tail: NONE,
            rows: 0,
        }
    }

    pub fn slot_size(&self) -> u32 {
        self.slot_size
    }
    pub fn slots_per_page(&self) -> u32 {
        self.slots_per_page
    }
    pub fn rows(&self) -> u64 {
        self.rows
    }
    pub fn pages(&self) -> u32 {
        self.pages.held()
    }
    /// Logical page numbers in use are below this (scan bound).
    pub fn logical_pages(&self) -> u32 {
        self.pages.logical_len()
    }
    /// Free slots on held pages.
    pub fn free_slots(&self) -> u64 {
        self.pages.held() as u64 * self.slots_per_page as u64 - self.rows
    }

    #[inline]
    fn slot_off(&self, slot: u32) -> usize {
        PAGE_HEADER_SIZE + (slot * self.slot_size) as usize
    }

    /// Allocates a slot; the slot's bytes are zeroed except the header word, which is
    /// set to `header`. None when the pool has no page (the caller returns 827).
    pub fn alloc(&mut self, pool: &PagePool, header: u32) -> Option<RowId> {
        assert!(
            header & ROW_FREE == 0,
            "allocating a row with the FREE bit set"
        );
        if self.list_head == NONE {
            self.add_page(pool)?;
        }
        Some(self.alloc_from_list(header))
    }

    /// Takes the first free slot of the first page on the free list (which must exist).
    #[inline]
    fn alloc_from_list(&mut self, header: u32) -> RowId {
        let lp = self.list_head;
        let slot_size = self.slot_size as usize;
        let (slot, now_full) = {
            let page = self.page_mut(lp);
            let slot = page.u32_at(OFF_FIRST_FREE);
            assert!(slot != NONE, "page {lp} on the free list has no free slot");
            let off = PAGE_HEADER_SIZE + slot as usize * slot_size;
            assert!(
                page.u32_at(off) & ROW_FREE != 0,
                "free slot {slot} on page {lp} is not marked free"
            );
            let next = page.u32_at(off + 4);
            page.set_u32_at(OFF_FIRST_FREE, next);
            let free = page.u32_at(OFF_FREE_COUNT) - 1;
            page.set_u32_at(OFF_FREE_COUNT, free);
            page.bytes_mut()[off..off + slot_size].fill(0);
            page.set_u32_at(off, header);
            (slot, free == 0)
        };
        if now_full {
            self.list_remove(lp);
        }
        self.rows += 1;
        RowId::new(lp, slot)
    }

    /// Frees a slot; returns the page to the pool when it becomes empty.
    pub fn free(&mut self, pool: &PagePool, row: RowId) {
        let (lp, slot) = (row.page(), row.slot());
        let off = self.slot_off(slot);
        let spp = self.slots_per_page;
        let (was_full, now_empty, evacuating) = {
            let page = self.page_mut(lp);
            assert!(
                page.u32_at(off) & ROW_FREE == 0,
                "double free of row {row:?}"
            );
            let first = page.u32_at(OFF_FIRST_FREE);
            page.set_u32_at(off, ROW_FREE);
            page.set_u32_at(off + 4, first);
            page.set_u32_at(OFF_FIRST_FREE, slot);
            let free = page.u32_at(OFF_FREE_COUNT) + 1;
            page.set_u32_at(OFF_FREE_COUNT, free);
            (
                free == 1,
                free == spp,
                page.u32_at(OFF_ON_LIST) == EVACUATING,
            )
        };
        self.rows -= 1;
        if now_empty {
            if !was_full && !evacuating {
                self.list_remove(lp);
            }
            self.release_page(pool, lp);
        } else if was_full && !evacuating {
            self.list_push_tail(lp);
        }
    }

    #[inline]
    pub fn get(&self, row: RowId) -> &[u8] {
        let page = self.page(row.page());
        let off = self.slot_off(row.slot());
        &page.bytes()[off..off + self.slot_size as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, row: RowId) -> &mut [u8] {
        let off = self.slot_off(row.slot());
        let size = self.slot_size as usize;
        let page = self.page_mut(row.page());
        &mut page.bytes_mut()[off..off + size]
    }

    /// The row's header word, or None when the id does not name a used slot.
    #[inline]
    pub fn header(&self, row: RowId) -> Option<u32> {
        let page = self.pages.get(row.page())?;
        if row.slot() >= self.slots_per_page {
            return None;
        }
        let h = page.u32_at(self.slot_off(row.slot()));
        if h & ROW_FREE != 0 { None } else { Some(h) }
    }

    /// Marks the row's page changed at `gci` (max GCI and change map, for partial LCP).
    pub fn mark_changed(&mut self, row: RowId, gci: u32) {
        let byte_in_slots = (row.slot() * self.slot_size) as usize;
        let page = self.page_mut(row.page());
        if page.u32_at(OFF_MAX_GCI) < gci {
            page.set_u32_at(OFF_MAX_GCI, gci);
        }
        let bit = (byte_in_slots / CHANGE_BIT_BYTES).min(CHANGE_MAP_BYTES * 8 - 1);
        page.bytes_mut()[OFF_CHANGE_MAP + bit / 8] |= 1 << (bit % 8);
    }

    /// The next used row at or after `from` in row-id order (for scans), or None.
    pub fn next_row(&self, from: RowId) -> Option<RowId> {
        let mut lp = from.page();
        let mut slot = from.slot();
        while lp < self.pages.logical_len() {
            if let Some(page) = self.pages.get(lp) {
                let free = page.u32_at(OFF_FREE_COUNT);
                if free < self.slots_per_page {
                    while slot < self.slots_per_page {
                        if page.u32_at(self.slot_off(slot)) & ROW_FREE == 0 {
                            return Some(RowId::new(lp, slot));
                        }
                        slot += 1;
                    }
                }
            }
            lp += 1;
            slot = 0;
        }
        None
    }

    /// Returns every page to the pool (TRUNCATE, DROP).
    pub fn free_all(&mut self, pool: &PagePool) {
        self.pages.free_all(pool);
        self.list_head = NONE;
        self.list_tail = NONE;
        self.rows = 0;
    }

    fn add_page(&mut self, pool: &PagePool) -> Option<()> {
        let (slots_per_page, slot_size) = (self.slots_per_page, self.slot_size);
        let (lp, page) = self.pages.add(pool)?;
        page.bytes_mut()[..PAGE_HEADER_SIZE].fill(0);
        page.set_u32_at(OFF_MAGIC, FIXED_PAGE_MAGIC);
        page.set_u32_at(OFF_LOGICAL, lp);
        page.set_u32_at(OFF_FREE_COUNT, slots_per_page);
        page.set_u32_at(OFF_FIRST_FREE, 0);
        page.set_u32_at(OFF_PREV, NONE);
        page.set_u32_at(OFF_NEXT, NONE);
        for s in 0..slots_per_page {
            let off = PAGE_HEADER_SIZE + (s * slot_size) as usize;
            page.set_u32_at(off, ROW_FREE);
            page.set_u32_at(off + 4, if s + 1 < slots_per_page { s + 1 } else { NONE });
        }
        // New pages are fully "changed" so that the first checkpoint scans them.
        page.bytes_mut()[OFF_CHANGE_MAP..OFF_CHANGE_MAP + CHANGE_MAP_BYTES].fill(0xFF);
        self.list_push_tail(lp);
        Some(())
    }

    fn release_page(&mut self, pool: &PagePool, lp: u32) {
        assert_eq!(
            self.page(lp).u32_at(OFF_FREE_COUNT),
            self.slots_per_page,
            "releasing a non-empty page"
        );
        self.pages.release(pool, lp);
    }

    #[inline]
    fn page(&self, lp: u32) -> &Page {
        self.pages.page(lp)
    }

    #[inline]
    fn page_mut(&mut self, lp: u32) -> &mut Page {
        self.pages.page_mut(lp)
    }

    fn list_push_tail(&mut self, lp: u32) {
        let tail = self.list_tail;
        {
            let p = self.page_mut(lp);
            assert_eq!(
                p.u32_at(OFF_ON_LIST),
                0,
                "page {lp} already on the free list"
            );
            p.set_u32_at(OFF_ON_LIST, 1);
            p.set_u32_at(OFF_PREV, tail);
            p.set_u32_at(OFF_NEXT, NONE);
        }
        if tail == NONE {
            self.list_head = lp;
        } else {
            self.page_mut(tail).set_u32_at(OFF_NEXT, lp);
        }
        self.list_tail = lp;
    }

    fn list_remove(&mut self, lp: u32) {
        let (prev, next) = {
            let p = self.page_mut(lp);
            assert_eq!(p.u32_at(OFF_ON_LIST), 1, "page {lp} not on the free list");
            p.set_u32_at(OFF_ON_LIST, 0);
            (p.u32_at(OFF_PREV), p.u32_at(OFF_NEXT))
        };
        if prev == NONE {
            self.list_head = next;
        } else {
            self.page_mut(prev).set_u32_at(OFF_NEXT, next);
        }
        if next == NONE {
            self.list_tail = prev;
        } else {
            self.page_mut(next).set_u32_at(OFF_PREV, prev);
        }
    }

    /// Verifies the invariants in the module docs.
    pub fn check(&self) -> Result<(), String> {
        let mut used = 0u64;
        let mut on_list = 0u32;
        for (lp, p) in self.pages.iter() {
            if p.u32_at(OFF_MAGIC) != FIXED_PAGE_MAGIC || p.u32_at(OFF_LOGICAL) != lp {
                return Err(format!("page {lp}: bad magic or logical number"));
            }
            let free = p.u32_at(OFF_FREE_COUNT);
            let mut chain = 0;
            let mut s = p.u32_at(OFF_FIRST_FREE);
            while s != NONE {
                chain += 1;
                if chain > self.slots_per_page {
                    return Err(format!("page {lp}: free chain loops"));
                }
                s = p.u32_at(PAGE_HEADER_SIZE + (s * self.slot_size) as usize + 4);
            }
            if chain != free {
                return Err(format!("page {lp}: free count {free} but chain {chain}"));
            }
            let flag = p.u32_at(OFF_ON_LIST);
            if flag != EVACUATING && (flag == 1) != (free > 0) {
                return Err(format!(
                    "page {lp}: on-list flag disagrees with free count {free}"
                ));
            }
            on_list += u32::from(flag == 1);
            used += (self.slots_per_page - free) as u64;
        }
        let mut walk = 0;
        let mut lp = self.list_head;
        while lp != NONE {
            walk += 1;
            if walk > self.pages.held() {
                return Err("free list loops".into());
            }
            lp = self.page(lp).u32_at(OFF_NEXT);
        }
        if walk != on_list {
            return Err(format!("free list has {walk} pages, {on_list} flagged"));
        }
        if used != self.rows {
            return Err(format!("rows {} but {used} used slots", self.rows));
        }
        Ok(())
    }
}

impl FixedPages {
    /// Prefetch hint for a row's fixed part.
    #[inline]
    pub fn prefetch(&self, row: RowId) {
        if let Some(p) = self.pages.get(row.page()) {
            let off = self.slot_off(row.slot());
            super::prefetch(&p.bytes()[off..off + 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn pages_fill_release_and_reuse() {
        let pool = PagePool::new(8);
        let mut f = FixedPages::new(28);
        let spp = f.slots_per_page();
        assert_eq!(spp, (32768 - 64) / 28);
        let mut rows = Vec::new();
        for _ in 0..(2 * spp + 5) {
            rows.push(f.alloc(&pool, 0).expect("space"));
        }
        assert_eq!(f.pages(), 3);
        assert_eq!(pool.used_pages_of(PageKind::Fixed), 3);
        f.check().expect("consistent");
        // free the whole middle page: it goes back to the pool at once
        for r in rows.iter().filter(|r| r.page() == 1) {
            f.free(&pool, *r);
        }
        assert_eq!(f.pages(), 2);
        assert_eq!(pool.used_pages_of(PageKind::Fixed), 2);
        f.check().expect("consistent");
        // scan sees exactly the remaining rows in order
        let live: BTreeSet<RowId> = rows.iter().copied().filter(|r| r.page() != 1).collect();
        let mut seen = Vec::new();
        let mut cur = RowId(0);
        while let Some(r) = f.next_row(cur) {
            seen.push(r);
            cur = RowId(r.0 + 1);
        }
        assert_eq!(seen, live.iter().copied().collect::<Vec<_>>());
        f.free_all(&pool);
        assert_eq!(pool.used_pages(), 0);
    }

    #[test]
    fn out_of_pages_is_none_and_recoverable() {
        let pool = PagePool::new(1);
        let mut f = FixedPages::new(8000);
        let a: Vec<_> = (0..4).map(|_| f.alloc(&pool, 0).expect("fits")).collect();
        assert!(f.alloc(&pool, 0).is_none());
        f.free(&pool, a[0]);
        assert!(f.alloc(&pool, 0).is_some());
        f.check().expect("consistent");
    }

    #[test]
    fn header_and_data() {
        let pool = PagePool::new(1);
        let mut f = FixedPages::new(16);
        let r = f.alloc(&pool, ROW_ALLOC).expect("space");
        assert_eq!(f.header(r), Some(ROW_ALLOC));
        f.get_mut(r)[8..12].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(&f.get(r)[8..12], &7u32.to_le_bytes());
        f.free(&pool, r);
        assert_eq!(f.header(r), None);
    }
}
