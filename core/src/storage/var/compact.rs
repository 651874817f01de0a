//! What OPTIMIZE TABLE needs from var pages: which pages can be emptied, keeping them
//! from new entries while their entries move out, and an allocation that never takes a
//! page.
//!
//! Plan: pages sorted emptiest first; the first `k` of them are evacuated, for the
//! largest `k` whose live bytes (entries rounded to 4 bytes, plus a 4-byte directory
//! word each) fit in `FILL_TARGET` of the room of the pages that stay — their free bytes
//! plus 4 per free directory word (an entry placed there needs no new word), less the
//! `LIST_MIN[1]` bytes a page keeps because small entries only go to pages with at least
//! that much free. The remaining slack covers what the allocator cannot use (it looks at
//! a bounded number of pages per list). The owner of the entries (the fragment) moves each one with
//! [`VarPages::alloc_existing`] and [`VarPages::free`], rewriting the reference in its
//! row; a page goes back to the pool when its last entry leaves. A page left with
//! entries that could not move is put back with [`VarPages::end_evacuation`].

use super::*;

/// Share of the staying pages' room a plan may fill.
const FILL_TARGET: f64 = 0.98;

/// One held page as the plan sees it.
struct PageUse {
    lp: u32,
    /// What the page can take: free bytes plus free directory words, less what the
    /// allocator leaves (module docs).
    free: u64,
    live: u64,
}

impl VarPages {
    fn page_uses(&self) -> Vec<PageUse> {
        let mut v: Vec<PageUse> = self
            .pages
            .iter()
            .filter(|(_, p)| p.u32_at(OFF_LIST) != EVACUATING)
            .map(|(lp, p)| {
                let free = u64::from(p.u32_at(OFF_FREE));
                let used_entries = u64::from(p.u32_at(OFF_USED));
                let dir = u64::from(p.u32_at(OFF_DIR_COUNT));
                let data = (PAGE_SIZE - HEADER) as u64 - 4 * dir - free;
                let room = (free + 4 * (dir - used_entries)).saturating_sub(u64::from(LIST_MIN[1]));
                PageUse {
                    lp,
                    free: room,
                    live: data + 4 * used_entries,
                }
            })
            .collect();
        // Emptiest first; among equals the highest logical number first.
        v.sort_unstable_by(|a, b| b.free.cmp(&a.free).then(b.lp.cmp(&a.lp)));
        v
    }

    /// The largest number of the emptiest pages whose entries fit in the others.
    fn plan_len(uses: &[PageUse]) -> usize {
        let mut free_kept: u64 = uses.iter().map(|u| u.free).sum();
        let mut live_moved = 0u64;
        let mut k = 0;
        for (i, u) in uses.iter().enumerate() {
            free_kept -= u.free;
            live_moved += u.live;
            if (live_moved as f64) <= free_kept as f64 * FILL_TARGET {
                k = i + 1;
            }
        }
        k
    }

    /// Pages an evacuation would give back (module docs).
    pub fn reclaimable_pages(&self) -> u32 {
        Self::plan_len(&self.page_uses()) as u32
    }

    /// Picks the pages to empty, takes them off the free-space lists and returns them in
    /// ascending logical order. Empty when nothing can be reclaimed.
    pub fn begin_evacuation(&mut self) -> Vec<u32> {
        let uses = self.page_uses();
        let k = Self::plan_len(&uses);
        let mut chosen: Vec<u32> = uses[..k].iter().map(|u| u.lp).collect();
        chosen.sort_unstable();
        for &lp in &chosen {
            self.unlist(lp);
            self.page_mut(lp).set_u32_at(OFF_LIST, EVACUATING);
        }
        chosen
    }

    /// Whether the page of var reference `r` is held and being evacuated.
    #[inline]
    pub fn is_evacuating_ref(&self, r: u32) -> bool {
        self.is_evacuating(split(r).0)
    }

    /// Whether logical page `lp` is held and being evacuated.
    pub fn is_evacuating(&self, lp: u32) -> bool {
        self.pages
            .get(lp)
            .is_some_and(|p| p.u32_at(OFF_LIST) == EVACUATING)
    }

    /// Ends the evacuation of page `lp` if it is still held: it takes entries again.
    pub fn end_evacuation(&mut self, lp: u32) {
        if self.is_evacuating(lp) {
            self.page_mut(lp).set_u32_at(OFF_LIST, NONE);
            self.relist(lp);
        }
    }

    /// Stores `data` like [`VarPages::alloc`], but only on a page already held and not
    /// being evacuated; None when none has room the allocator finds.
    pub fn alloc_existing(&mut self, data: &[u8]) -> Option<u32> {
        assert!(
            data.len() <= MAX_VAR_ENTRY,
            "var entry of {} bytes exceeds the maximum",
            data.len()
        );
        let need = round4(data.len()) as u32 + 4;
        let lp = self.find_page(need)?;
        let idx = self.place(lp, data);
        self.entries += 1;
        self.bytes_used += round4(data.len()) as u64;
        self.relist(lp);
        Some(lp << ROW_ID_SLOT_BITS | idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evacuation_moves_entries_out_of_the_emptiest_pages() {
        let pool = PagePool::new(32);
        let mut v = VarPages::new();
        let data = [7u8; 1000];
        let refs: Vec<u32> = (0..160)
            .map(|_| v.alloc(&pool, &data).expect("room"))
            .collect();
        let pages = v.pages();
        assert!(pages >= 5, "{pages} pages");
        // Free two of every three entries: most pages are two thirds empty.
        let mut live = Vec::new();
        for (i, r) in refs.iter().enumerate() {
            if i % 3 == 0 {
                live.push(*r);
            } else {
                v.free(&pool, *r);
            }
        }
        let k = v.reclaimable_pages();
        assert!(k >= 2, "{k} reclaimable of {}", v.pages());
        let chosen = v.begin_evacuation();
        assert_eq!(chosen.len() as u32, k);
        v.check().expect("consistent while evacuating");
        let before = v.pages();
        let mut moved = 0;
        for r in live.iter_mut() {
            if v.is_evacuating_ref(*r) {
                let d = v.get(*r).to_vec();
                let n = v.alloc_existing(&d).expect("room in the staying pages");
                assert!(!v.is_evacuating_ref(n));
                v.free(&pool, *r);
                *r = n;
                moved += 1;
            }
        }
        assert!(moved > 0);
        assert_eq!(v.pages(), before - k, "every evacuated page went back");
        for lp in chosen {
            v.end_evacuation(lp);
        }
        v.check().expect("consistent after");
        for r in &live {
            assert_eq!(v.get(*r), &data[..]);
        }
        assert_eq!(v.entries(), live.len() as u64);
        v.free_all(&pool);
        assert_eq!(pool.used_pages(), 0);
    }
}
