//! What OPTIMIZE TABLE needs from fixed pages: which pages can be emptied, keeping them
//! from new rows while their rows move out, and an allocation that never takes a page.
//!
//! A fragment with `rows` rows needs `ceil(rows / slots_per_page)` pages; the pages it
//! holds beyond that are reclaimable. [`FixedPages::begin_evacuation`] picks that many of
//! the least used pages (ties: the highest logical number, so the scan range shrinks)
//! and takes them off the free list (word 24 = `EVACUATING`); the caller moves their
//! rows into free slots of the other pages with [`FixedPages::alloc_existing`], and each
//! page goes back to the pool the moment its last row leaves (as any page that empties).
//! A page whose rows could not all move (rows locked by a transaction) is put back with
//! [`FixedPages::end_evacuation`]. Nothing here knows about indexes: moving a row (its
//! hash entry, ordered index entries, LCP change marks) is the fragment's business.

use super::*;

impl FixedPages {
    /// Pages beyond those the rows need (what evacuation could give back).
    pub fn reclaimable_pages(&self) -> u32 {
        let need = self.rows.div_ceil(u64::from(self.slots_per_page));
        self.pages.held().saturating_sub(need as u32)
    }

    /// Picks the pages to empty (module docs), takes them off the free list and returns
    /// them in ascending logical order. Empty when nothing can be reclaimed.
    pub fn begin_evacuation(&mut self) -> Vec<u32> {
        let k = self.reclaimable_pages() as usize;
        if k == 0 {
            return Vec::new();
        }
        let mut by_use: Vec<(u32, u32)> = self
            .pages
            .iter()
            .filter(|(_, p)| p.u32_at(OFF_ON_LIST) != EVACUATING)
            .map(|(lp, p)| (self.slots_per_page - p.u32_at(OFF_FREE_COUNT), lp))
            .collect();
        // Least used first; among equals the highest logical number first.
        by_use.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut chosen: Vec<u32> = by_use.iter().take(k).map(|&(_, lp)| lp).collect();
        chosen.sort_unstable();
        for &lp in &chosen {
            if self.page(lp).u32_at(OFF_ON_LIST) == 1 {
                self.list_remove(lp);
            }
            self.page_mut(lp).set_u32_at(OFF_ON_LIST, EVACUATING);
        }
        chosen
    }

    /// Whether logical page `lp` is held and being evacuated.
    pub fn is_evacuating(&self, lp: u32) -> bool {
        self.pages
            .get(lp)
            .is_some_and(|p| p.u32_at(OFF_ON_LIST) == EVACUATING)
    }

    /// Ends the evacuation of page `lp` if it is still held (rows that could not
    /// move): it takes new rows again.
    pub fn end_evacuation(&mut self, lp: u32) {
        if !self.is_evacuating(lp) {
            return;
        }
        let free = {
            let p = self.page_mut(lp);
            p.set_u32_at(OFF_ON_LIST, 0);
            p.u32_at(OFF_FREE_COUNT)
        };
        if free > 0 {
            self.list_push_tail(lp);
        }
    }

    /// The used slots of held page `lp`, from slot `from` on (empty when not held).
    pub fn used_slots_from(&self, lp: u32, from: u32) -> Vec<u32> {
        let Some(p) = self.pages.get(lp) else {
            return Vec::new();
        };
        (from..self.slots_per_page)
            .filter(|&s| p.u32_at(self.slot_off(s)) & ROW_FREE == 0)
            .collect()
    }

    /// Allocates a slot like [`FixedPages::alloc`], but only on a page already held and
    /// not being evacuated; None when there is no such free slot.
    pub fn alloc_existing(&mut self, header: u32) -> Option<RowId> {
        assert!(
            header & ROW_FREE == 0,
            "allocating a row with the FREE bit set"
        );
        (self.list_head != NONE).then(|| self.alloc_from_list(header))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evacuation_empties_the_least_used_pages() {
        let pool = PagePool::new(16);
        let mut f = FixedPages::new(3200);
        let spp = f.slots_per_page();
        let rows: Vec<RowId> = (0..4 * spp)
            .map(|_| f.alloc(&pool, 0).expect("room"))
            .collect();
        assert_eq!(f.pages(), 4);
        // Leave pages 0 and 2 half full, page 1 with one row, page 3 full.
        for r in &rows {
            let keep = match r.page() {
                0 | 2 => r.slot() < spp / 2,
                1 => r.slot() == 0,
                _ => true,
            };
            if !keep {
                f.free(&pool, *r);
            }
        }
        assert_eq!(f.reclaimable_pages(), 1, "{} rows fit on 3 pages", f.rows());
        let chosen = f.begin_evacuation();
        assert_eq!(chosen, vec![1]);
        assert!(f.is_evacuating(1));
        f.check().expect("consistent while evacuating");
        // New rows never land on the evacuated page.
        let mut placed = Vec::new();
        while let Some(r) = f.alloc_existing(0) {
            assert_ne!(r.page(), 1);
            placed.push(r);
        }
        assert_eq!(placed.len() as u32, 2 * (spp - spp / 2));
        for r in placed {
            f.free(&pool, r);
        }
        // Its last row leaves: the page goes back to the pool.
        let used = f.used_slots_from(1, 0);
        assert_eq!(used, vec![0]);
        let to = f.alloc_existing(0).expect("room elsewhere");
        f.free(&pool, RowId::new(1, 0));
        assert_eq!(f.pages(), 3);
        assert!(!f.is_evacuating(1));
        f.check().expect("consistent after");
        f.free(&pool, to);
        f.free_all(&pool);
    }

    #[test]
    fn an_evacuation_ended_early_takes_rows_again() {
        let pool = PagePool::new(4);
        let mut f = FixedPages::new(8176);
        assert_eq!(f.slots_per_page(), 4);
        let rows: Vec<RowId> = (0..12).map(|_| f.alloc(&pool, 0).expect("room")).collect();
        for r in &rows[0..3] {
            f.free(&pool, *r);
        }
        f.free(&pool, rows[4]);
        f.free(&pool, rows[5]);
        assert_eq!(f.begin_evacuation(), vec![0]);
        assert_eq!(f.alloc_existing(0).map(|r| r.page()), Some(1));
        assert_eq!(f.alloc_existing(0).map(|r| r.page()), Some(1));
        assert!(
            f.alloc_existing(0).is_none(),
            "pages 1, 2 full, page 0 evacuating"
        );
        f.end_evacuation(0);
        assert!(!f.is_evacuating(0));
        assert_eq!(f.alloc_existing(0).map(|r| r.page()), Some(0));
        f.check().expect("consistent");
        f.free_all(&pool);
    }
}
