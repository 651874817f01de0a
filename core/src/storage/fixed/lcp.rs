//! What local checkpoints need from fixed pages: the per-page change map and max GCI
//! (so an LCP skips unchanged pages and unchanged 128-byte regions, the fix of seed
//! 003), and a restore that puts rows back at their row ids.
//!
//! Change map: one bit per 128 bytes of slots ([`CHANGE_BIT_BYTES`]), set by [`FixedPages::mark_changed`] for
//! the bit holding the slot's first byte, so each slot belongs to exactly one bit
//! ([`FixedPages::slots_of_change_bit`]). A new page has every bit set (its first LCP
//! writes it whole); [`FixedPages::take_change_map`] reads and clears it.
//!
//! Restore: [`FixedPages::restore_put`] / [`FixedPages::restore_free`] address slots
//! directly and leave the free chains, the free-page list and empty pages alone;
//! [`FixedPages::finish_restore`] rebuilds them in one pass and returns empty pages to
//! the pool. Nothing else may use the pages in between.

use super::*;
use std::ops::Range;

/// Bits in a page's change map.
pub const CHANGE_MAP_BITS: u32 = (CHANGE_MAP_BYTES * 8) as u32;

impl FixedPages {
    /// Whether logical page `lp` is held.
    pub fn is_held(&self, lp: u32) -> bool {
        self.pages.get(lp).is_some()
    }

    /// Whether the page changed since its change map was last taken.
    pub fn page_changed(&self, lp: u32) -> bool {
        self.pages.get(lp).is_some_and(|p| {
            p.bytes()[OFF_CHANGE_MAP..OFF_CHANGE_MAP + CHANGE_MAP_BYTES]
                .iter()
                .any(|&b| b != 0)
        })
    }

    /// Prefetch hint for the page's change map (the next page of an LCP scan).
    #[inline]
    pub fn prefetch_change_map(&self, lp: u32) {
        if let Some(p) = self.pages.get(lp) {
            super::super::prefetch(&p.bytes()[OFF_CHANGE_MAP..OFF_CHANGE_MAP + 1]);
        }
    }

    /// Prefetch hints for the first line of every region page `lp`'s change map marks
    /// (the next page of an LCP scan; the map itself was prefetched before).
    #[inline]
    pub fn prefetch_changed_regions(&self, lp: u32) {
        let Some(p) = self.pages.get(lp) else { return };
        let map = &p.bytes()[OFF_CHANGE_MAP..OFF_CHANGE_MAP + CHANGE_MAP_BYTES];
        for (i, &byte) in map.iter().enumerate() {
            let mut bits = byte;
            while bits != 0 {
                let bit = (i * 8) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                let first = self.slots_of_change_bit(bit).start;
                if first < self.slots_per_page {
                    let off = PAGE_HEADER_SIZE + (first * self.slot_size) as usize;
                    super::super::prefetch(&p.bytes()[off..off + 1]);
                }
            }
        }
    }

    /// The page's change map, cleared; None when the page is not held.
    pub fn take_change_map(&mut self, lp: u32) -> Option<[u8; CHANGE_MAP_BYTES]> {
        if !self.is_held(lp) {
            return None;
        }
        let page = self.page_mut(lp);
        let mut map = [0u8; CHANGE_MAP_BYTES];
        map.copy_from_slice(&page.bytes()[OFF_CHANGE_MAP..OFF_CHANGE_MAP + CHANGE_MAP_BYTES]);
        page.bytes_mut()[OFF_CHANGE_MAP..OFF_CHANGE_MAP + CHANGE_MAP_BYTES].fill(0);
        Some(map)
    }

    /// The slots of held page `lp`, read in place (the LCP scan looks the page up
    /// once, not once per slot); None when not held.
    #[inline]
    pub fn page_slots(&self, lp: u32) -> Option<PageSlots<'_>> {
        self.pages.get(lp).map(|p| PageSlots {
            bytes: p.bytes(),
            slot_size: self.slot_size as usize,
        })
    }

    /// Highest GCI of a change on the page (0 when never changed); None when not held.
    pub fn page_max_gci(&self, lp: u32) -> Option<u32> {
        self.pages.get(lp).map(|p| p.u32_at(OFF_MAX_GCI))
    }

    /// The slots whose change-map bit is `bit`.
    pub fn slots_of_change_bit(&self, bit: u32) -> Range<u32> {
        let size = self.slot_size;
        let region = CHANGE_BIT_BYTES as u32;
        let first = (bit * region).div_ceil(size).min(self.slots_per_page);
        let end = if bit + 1 >= CHANGE_MAP_BITS {
            self.slots_per_page
        } else {
            ((bit + 1) * region).div_ceil(size).min(self.slots_per_page)
        };
        first..end
    }

    /// Restore: the slot `row` holds `bytes` (its whole fixed part, header word first,
    /// not free). Returns Some(true) when it replaced a row, Some(false) when the slot
    /// was free, None when the pool has no page for it.
    pub fn restore_put(&mut self, pool: &PagePool, row: RowId, bytes: &[u8]) -> Option<bool> {
        assert_eq!(bytes.len(), self.slot_size as usize, "restored row size");
        assert!(
            u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & ROW_FREE == 0,
            "restoring a row with the FREE bit set"
        );
        if row.slot() >= self.slots_per_page {
            return None;
        }
        let lp = row.page();
        if !self.is_held(lp) {
            let (spp, size) = (self.slots_per_page, self.slot_size);
            let page = self.pages.add_at_restoring(pool, lp)?;
            page.bytes_mut()[..PAGE_HEADER_SIZE].fill(0);
            page.set_u32_at(OFF_MAGIC, FIXED_PAGE_MAGIC);
            page.set_u32_at(OFF_LOGICAL, lp);
            page.set_u32_at(OFF_FREE_COUNT, spp);
            page.set_u32_at(OFF_FIRST_FREE, NONE);
            page.set_u32_at(OFF_PREV, NONE);
            page.set_u32_at(OFF_NEXT, NONE);
            for s in 0..spp {
                page.set_u32_at(PAGE_HEADER_SIZE + (s * size) as usize, ROW_FREE);
            }
        }
        let off = self.slot_off(row.slot());
        let size = self.slot_size as usize;
        let page = self.page_mut(lp);
        let replaced = page.u32_at(off) & ROW_FREE == 0;
        page.bytes_mut()[off..off + size].copy_from_slice(bytes);
        if !replaced {
            let free = page.u32_at(OFF_FREE_COUNT) - 1;
            page.set_u32_at(OFF_FREE_COUNT, free);
            self.rows += 1;
        }
        Some(replaced)
    }

    /// Restore: frees the slot `row`; false when it was free already (or not held).
    pub fn restore_free(&mut self, row: RowId) -> bool {
        if !self.is_held(row.page()) || row.slot() >= self.slots_per_page {
            return false;
        }
        let off = self.slot_off(row.slot());
        let page = self.page_mut(row.page());
        if page.u32_at(off) & ROW_FREE != 0 {
            return false;
        }
        page.set_u32_at(off, ROW_FREE);
        let free = page.u32_at(OFF_FREE_COUNT) + 1;
        page.set_u32_at(OFF_FREE_COUNT, free);
        self.rows -= 1;
        true
    }

    /// Ends a restore: free chains and the free-page list rebuilt, empty pages back to
    /// the pool, change maps cleared (the restored state is the checkpoint's).
    pub fn finish_restore(&mut self, pool: &PagePool) {
        let (spp, size) = (self.slots_per_page, self.slot_size);
        let held: Vec<u32> = self.pages.iter().map(|(lp, _)| lp).collect();
        self.list_head = NONE;
        self.list_tail = NONE;
        for lp in held {
            let free = {
                let page = self.page_mut(lp);
                let mut next = NONE;
                let mut free = 0;
                for s in (0..spp).rev() {
                    let off = PAGE_HEADER_SIZE + (s * size) as usize;
                    if page.u32_at(off) & ROW_FREE != 0 {
                        page.set_u32_at(off + 4, next);
                        next = s;
                        free += 1;
                    }
                }
                page.set_u32_at(OFF_FIRST_FREE, next);
                page.set_u32_at(OFF_FREE_COUNT, free);
                page.set_u32_at(OFF_ON_LIST, 0);
                page.bytes_mut()[OFF_CHANGE_MAP..OFF_CHANGE_MAP + CHANGE_MAP_BYTES].fill(0);
                free
            };
            if free == spp {
                self.pages.release(pool, lp);
            } else if free > 0 {
                self.list_push_tail(lp);
            }
        }
        self.pages.finish_restore();
    }
}

/// One held page's slots ([`FixedPages::page_slots`]); a slot number past the page's
/// slots panics (callers take them from [`FixedPages::slots_of_change_bit`] or below
/// [`FixedPages::slots_per_page`]).
#[derive(Clone, Copy)]
pub struct PageSlots<'a> {
    bytes: &'a [u8],
    slot_size: usize,
}

impl<'a> PageSlots<'a> {
    /// The slot's fixed part, header word first.
    #[inline]
    pub fn get(&self, slot: u32) -> &'a [u8] {
        let off = PAGE_HEADER_SIZE + slot as usize * self.slot_size;
        &self.bytes[off..off + self.slot_size]
    }

    /// The slot's header word; None when the slot is free.
    #[inline]
    pub fn header(&self, slot: u32) -> Option<u32> {
        let off = PAGE_HEADER_SIZE + slot as usize * self.slot_size;
        let h = u32::from_le_bytes([
            self.bytes[off],
            self.bytes[off + 1],
            self.bytes[off + 2],
            self.bytes[off + 3],
        ]);
        if h & ROW_FREE != 0 { None } else { Some(h) }
    }

    /// Prefetch hint for the slot.
    #[inline]
    pub fn prefetch(&self, slot: u32) {
        let off = PAGE_HEADER_SIZE + slot as usize * self.slot_size;
        super::super::prefetch(&self.bytes[off..off + 1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_bits_partition_the_slots() {
        for size in [8u32, 12, 28, 100, 256, 300, 4000] {
            let f = FixedPages::new(size);
            let mut next = 0;
            for bit in 0..CHANGE_MAP_BITS {
                let r = f.slots_of_change_bit(bit);
                assert_eq!(
                    r.start,
                    next.min(r.start.max(next)),
                    "size {size} bit {bit}"
                );
                for s in r.clone() {
                    let b = ((s * size) as usize / CHANGE_BIT_BYTES).min(CHANGE_MAP_BYTES * 8 - 1)
                        as u32;
                    assert_eq!(b, bit, "slot {s} of size {size}");
                }
                next = r.end.max(next);
            }
            assert_eq!(
                next,
                f.slots_per_page(),
                "every slot has a bit (size {size})"
            );
        }
    }

    #[test]
    fn change_map_is_taken_and_cleared() {
        let pool = PagePool::new(4);
        let mut f = FixedPages::new(40);
        let r = f.alloc(&pool, 0).expect("space");
        assert!(f.page_changed(0), "a new page is changed");
        assert_eq!(f.take_change_map(0), Some([0xFF; CHANGE_MAP_BYTES]));
        assert!(!f.page_changed(0));
        let r2 = RowId::new(0, 100);
        f.mark_changed(r2, 9);
        let map = f.take_change_map(0).expect("held");
        let bit = (100 * 40) / CHANGE_BIT_BYTES;
        assert_eq!(map[bit / 8], 1 << (bit % 8));
        assert!(f.slots_of_change_bit(bit as u32).contains(&100));
        assert_eq!(f.page_max_gci(0), Some(9));
        f.free(&pool, r);
        assert_eq!(f.take_change_map(0), None, "released page");
    }

    #[test]
    fn restore_puts_rows_at_their_ids_and_rebuilds_lists() {
        let pool = PagePool::new(8);
        let mut f = FixedPages::new(16);
        let spp = f.slots_per_page();
        let row = |page, slot, v: u32| {
            let mut b = vec![0u8; 16];
            b[8..12].copy_from_slice(&v.to_le_bytes());
            (RowId::new(page, slot), b)
        };
        // out of order, with a gap page (1) and a page that ends up empty (3)
        for (r, b) in [
            row(2, 5, 1),
            row(0, 0, 2),
            row(0, 7, 3),
            row(3, 1, 4),
            row(2, spp - 1, 5),
        ] {
            assert_eq!(f.restore_put(&pool, r, &b), Some(false));
        }
        assert_eq!(
            f.restore_put(&pool, row(0, 7, 33).0, &row(0, 7, 33).1),
            Some(true)
        );
        assert!(f.restore_free(RowId::new(3, 1)));
        assert!(!f.restore_free(RowId::new(3, 1)));
        assert!(!f.restore_free(RowId::new(1, 0)));
        f.finish_restore(&pool);
        f.check().expect("consistent after restore");
        assert_eq!(f.rows(), 4);
        assert_eq!(f.pages(), 2, "empty page 3 released");
        assert_eq!(pool.used_pages_of(PageKind::Fixed), 2);
        assert_eq!(&f.get(RowId::new(0, 7))[8..12], &33u32.to_le_bytes());
        assert!(!f.page_changed(0));
        // normal allocation continues in the restored pages' free slots, then new pages
        let mut got = Vec::new();
        for _ in 0..(2 * spp - 4 + 1) {
            got.push(f.alloc(&pool, 0).expect("space"));
        }
        assert!(
            got.iter()
                .all(|r| r.page() == 0 || r.page() == 2 || r.page() == 1 || r.page() == 3)
        );
        f.check().expect("consistent");
        assert_eq!(f.rows(), 4 + got.len() as u64);
    }
}
