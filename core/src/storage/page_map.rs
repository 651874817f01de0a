//! A fragment's page map (DBTUP's logical-to-physical page map): logical page numbers
//! naming the pool pages a fragment holds for one kind of part.
//!
//! Row ids and var references carry logical page numbers, so a page can be found from
//! them without a search, and a freed logical number is reused by the next page added
//! (trailing free numbers are trimmed so scans stop early).
//!
//! Invariants: `held` equals the number of `Some` entries; every number in
//! `free_logical` is below `pages.len()` and names a `None` entry; the last entry of
//! `pages` is `Some` (or `pages` is empty).

use super::pool::{Page, PageBox, PageKind, PagePool};
use super::row_id::MAX_LOGICAL_PAGES;

pub struct PageMap {
    kind: PageKind,
    pages: Vec<Option<PageBox>>,
    free_logical: Vec<u32>,
    held: u32,
}

impl PageMap {
    pub fn new(kind: PageKind) -> PageMap {
        PageMap {
            kind,
            pages: Vec::new(),
            free_logical: Vec::new(),
            held: 0,
        }
    }

    /// Pages held.
    pub fn held(&self) -> u32 {
        self.held
    }

    /// Logical page numbers in use are below this.
    pub fn logical_len(&self) -> u32 {
        self.pages.len() as u32
    }

    /// Takes a page from the pool under a free logical number; None when the pool is
    /// empty or the fragment has used every logical number. The page's content is
    /// unspecified: the caller initialises it.
    pub fn add(&mut self, pool: &PagePool) -> Option<(u32, &mut Page)> {
        let lp = match self.free_logical.pop() {
            Some(lp) => lp,
            None => {
                if self.pages.len() as u32 >= MAX_LOGICAL_PAGES {
                    return None;
                }
                self.pages.push(None);
                self.pages.len() as u32 - 1
            }
        };
        let Some(page) = pool.alloc(self.kind) else {
            self.give_back_number(lp);
            return None;
        };
        self.held += 1;
        let slot = &mut self.pages[lp as usize];
        assert!(slot.is_none(), "logical page {lp} handed out twice");
        Some((lp, &mut **slot.insert(page)))
    }

    /// Returns page `lp` to the pool.
    pub fn release(&mut self, pool: &PagePool, lp: u32) {
        let page = self.pages.get_mut(lp as usize).and_then(Option::take);
        let page = page
            .unwrap_or_else(|| panic!("releasing {:?} page {lp}, which is not held", self.kind));
        pool.free(self.kind, page);
        self.held -= 1;
        self.give_back_number(lp);
    }

    fn give_back_number(&mut self, lp: u32) {
        if lp as usize + 1 == self.pages.len() {
            while matches!(self.pages.last(), Some(None)) {
                self.pages.pop();
            }
            let len = self.pages.len() as u32;
            self.free_logical.retain(|&l| l < len);
        } else {
            self.free_logical.push(lp);
        }
    }

    /// Restore: takes a pool page for logical number `lp`, which must not be held
    /// (the caller initialises it). The free-number list is not maintained until
    /// [`PageMap::finish_restore`]: restore adds pages in any order, often millions.
    pub fn add_at_restoring(&mut self, pool: &PagePool, lp: u32) -> Option<&mut Page> {
        if lp >= MAX_LOGICAL_PAGES {
            return None;
        }
        if self.pages.len() <= lp as usize {
            self.pages.resize_with(lp as usize + 1, || None);
        }
        assert!(
            self.pages[lp as usize].is_none(),
            "restoring logical page {lp} twice"
        );
        let page = pool.alloc(self.kind)?;
        self.held += 1;
        Some(&mut **self.pages[lp as usize].insert(page))
    }

    /// Ends a restore: trailing free numbers trimmed, the free-number list rebuilt.
    pub fn finish_restore(&mut self) {
        while matches!(self.pages.last(), Some(None)) {
            self.pages.pop();
        }
        self.free_logical = self
            .pages
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, p)| p.is_none())
            .map(|(lp, _)| lp as u32)
            .collect();
    }

    #[inline]
    pub fn get(&self, lp: u32) -> Option<&Page> {
        self.pages.get(lp as usize).and_then(|p| p.as_deref())
    }

    /// The held page `lp`; a logical number that is not held is an engine bug.
    #[inline]
    pub fn page(&self, lp: u32) -> &Page {
        match self.pages.get(lp as usize) {
            Some(Some(p)) => p,
            _ => panic!("{:?} page {lp} is not held by this fragment", self.kind),
        }
    }

    #[inline]
    pub fn page_mut(&mut self, lp: u32) -> &mut Page {
        let kind = self.kind;
        match self.pages.get_mut(lp as usize) {
            Some(Some(p)) => p,
            _ => panic!("{kind:?} page {lp} is not held by this fragment"),
        }
    }

    /// Held pages with their logical numbers, in logical order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Page)> {
        self.pages
            .iter()
            .enumerate()
            .filter_map(|(lp, p)| p.as_deref().map(|p| (lp as u32, p)))
    }

    /// Every page back to the pool.
    pub fn free_all(&mut self, pool: &PagePool) {
        for p in self.pages.drain(..).flatten() {
            pool.free(self.kind, p);
        }
        self.free_logical.clear();
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_reused_and_trailing_ones_trimmed() {
        let pool = PagePool::new(4);
        let mut m = PageMap::new(PageKind::Var);
        let a = m.add(&pool).map(|(lp, _)| lp);
        let b = m.add(&pool).map(|(lp, _)| lp);
        let c = m.add(&pool).map(|(lp, _)| lp);
        assert_eq!((a, b, c), (Some(0), Some(1), Some(2)));
        m.release(&pool, 1);
        assert_eq!(
            m.add(&pool).map(|(lp, _)| lp),
            Some(1),
            "freed number reused"
        );
        m.release(&pool, 2);
        m.release(&pool, 1);
        assert_eq!(m.logical_len(), 1, "trailing free numbers trimmed");
        assert_eq!(m.held(), 1);
        assert_eq!(pool.used_pages(), 1);
        m.free_all(&pool);
        assert_eq!(pool.used_pages(), 0);
        assert!(m.get(0).is_none());
    }

    #[test]
    fn pool_exhaustion_keeps_the_map_consistent() {
        let pool = PagePool::new(1);
        let mut m = PageMap::new(PageKind::Fixed);
        assert!(m.add(&pool).is_some());
        assert!(m.add(&pool).is_none());
        assert_eq!((m.held(), m.logical_len()), (1, 1));
        m.release(&pool, 0);
        assert_eq!((m.held(), m.logical_len()), (0, 0));
    }
}
