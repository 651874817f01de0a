//! What OPTIMIZE TABLE needs from a fragment's disk allocator: which extents can be
//! emptied, keeping them from new records while their records move out, and an
//! allocation that never takes a new extent.
//!
//! Plan: extents sorted by used bytes, least used first (ties: the highest extent
//! first); the first `k` of them are evacuated, for the largest `k` whose used bytes fit
//! in `FILL_TARGET` of the free bytes of the extents that stay (records do not span
//! pages: the slack covers the room a page keeps below the next record's size). At least
//! one extent stays. The owner of the records (the fragment) moves each one with
//! [`FragmentDiskAlloc::alloc_page_existing`] and frees the old one; an extent goes back
//! to the tablespace when its last record leaves (`page_free_changed`). One that still
//! holds records at the end is put back with [`FragmentDiskAlloc::end_evacuation`].

use super::*;

/// Share of the staying extents' free bytes a plan may fill.
const FILL_TARGET: f64 = 0.99;

impl FragmentDiskAlloc {
    /// (used bytes, extent) of the owned extents not being evacuated, least used first.
    fn extent_uses(&self) -> Vec<(u64, u64, ExtentId)> {
        let mut v: Vec<(u64, u64, ExtentId)> = self
            .extents
            .iter()
            .filter(|(e, _)| !self.evacuating.contains(e))
            .map(|(&e, x)| {
                let free: u64 = x.free.iter().map(|&f| u64::from(f)).sum();
                let used = x.free.len() as u64 * u64::from(EMPTY) - free;
                (used, free, e)
            })
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)));
        v
    }

    fn plan_len(uses: &[(u64, u64, ExtentId)]) -> usize {
        let mut free_kept: u64 = uses.iter().map(|u| u.1).sum();
        let mut used_moved = 0u64;
        let mut k = 0;
        for (i, u) in uses.iter().enumerate().take(uses.len().saturating_sub(1)) {
            free_kept -= u.1;
            used_moved += u.0;
            if used_moved as f64 <= free_kept as f64 * FILL_TARGET {
                k = i + 1;
            }
        }
        k
    }

    /// Extents an evacuation would give back to the tablespace now.
    pub fn reclaimable_extents(&self) -> u32 {
        Self::plan_len(&self.extent_uses()) as u32
    }

    /// Picks the extents to empty and takes their pages out of allocation. Returns them
    /// in order; empty when nothing can be reclaimed.
    pub fn begin_evacuation(&mut self) -> Vec<ExtentId> {
        let uses = self.extent_uses();
        let k = Self::plan_len(&uses);
        let mut chosen: Vec<ExtentId> = uses[..k].iter().map(|u| u.2).collect();
        chosen.sort_unstable();
        for &e in &chosen {
            let x = &self.extents[&e];
            for (i, &f) in x.free.iter().enumerate() {
                let page = PageAddr {
                    file_no: x.first.file_no,
                    page_no: x.first.page_no + i as u32,
                };
                let removed = self.by_free.remove(&(f, page));
                debug_assert!(removed, "by_free out of step");
            }
            self.evacuating.insert(e);
        }
        chosen
    }

    /// Whether `page` lies in an extent being evacuated.
    pub fn is_evacuating(&self, page: PageAddr) -> bool {
        self.find(page)
            .is_some_and(|(e, _)| self.evacuating.contains(&e))
    }

    /// Ends the evacuation of `extent` if the fragment still owns it: it takes records
    /// again.
    pub fn end_evacuation(&mut self, extent: ExtentId) {
        if !self.evacuating.remove(&extent) {
            return;
        }
        if let Some(x) = self.extents.get(&extent) {
            for (i, &f) in x.free.iter().enumerate() {
                let page = PageAddr {
                    file_no: x.first.file_no,
                    page_no: x.first.page_no + i as u32,
                };
                self.by_free.insert((f, page));
            }
        }
    }

    /// As [`FragmentDiskAlloc::alloc_page`], but only on a page of an extent already
    /// owned and not being evacuated; None when none has room.
    pub fn alloc_page_existing(&mut self, need_bytes: usize) -> Option<AllocatedPage> {
        let need = u32::try_from(need_bytes).ok().filter(|&n| n <= EMPTY)?;
        let lowest = PageAddr {
            file_no: 0,
            page_no: 0,
        };
        let (free, page) = self.by_free.range((need, lowest)..).next().copied()?;
        self.set_free(page, free - need);
        Some(AllocatedPage {
            page,
            was_empty: free == EMPTY,
        })
    }
}
