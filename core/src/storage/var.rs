//! Var-size row parts (DBTUP var pages) of one fragment.
//!
//! Slotted page layout (32 KB pool page):
//! ```text
//! 0   u32 magic VAR_PAGE_MAGIC           4   u32 logical page number
//! 8   u32 free bytes (holes included, directory excluded)
//! 12  u32 insert position (end of the packed data area)
//! 16  u32 directory entries (used + free)  20  u32 first free directory entry (NONE)
//! 24  u32 free-space list the page is on (NONE)   28 u32 prev   32 u32 next
//! 36  u32 used entries
//! 64  entry data, packed upwards from here, each entry rounded up to 4 bytes
//!  .. directory growing down from the page end: entry i at PAGE_SIZE - 4*(i+1):
//!     bit 31 FREE | bits 16..30 length in bytes | bits 0..15 position
//!     (a free entry keeps the next free entry index in bits 0..15)
//! ```
//! A var reference is `logical_page << 13 | directory index`; compaction moves entry
//! data inside a page but never changes directory indexes, so references are stable.
//!
//! Pages are kept on free-space lists by free bytes, as DBTUP's free_var_page_array:
//! list 1: 128..511, list 2: 512..2047, list 3: 2048..8191, list 4: >= 8192 bytes; a page
//! with less than 128 bytes free is "full" and on no list. An allocation first looks at
//! up to 16 pages of the list its size falls in (fuller pages first, less waste), then
//! takes the head of the next lists up, then a new page. A page whose last entry is freed
//! goes back to the pool at once. A page being evacuated by OPTIMIZE TABLE has word 24
//! set to `EVACUATING` and is on no list whatever its free bytes, so that nothing new is
//! placed on it while its entries move out (`var/compact.rs`).

mod compact;

use super::page_map::PageMap;
use super::pool::{PAGE_SIZE, Page, PageKind, PagePool};
use super::row_id::ROW_ID_SLOT_BITS;

pub const VAR_PAGE_MAGIC: u32 = 0x5241_5654; // "TVAR"
const HEADER: usize = 64;
const NONE: u32 = u32::MAX;
const OFF_MAGIC: usize = 0;
const OFF_LOGICAL: usize = 4;
const OFF_FREE: usize = 8;
const OFF_INSERT: usize = 12;
const OFF_DIR_COUNT: usize = 16;
const OFF_FIRST_FREE_DIR: usize = 20;
const OFF_LIST: usize = 24;
const OFF_PREV: usize = 28;
const OFF_NEXT: usize = 32;
const OFF_USED: usize = 36;
const DIR_FREE: u32 = 1 << 31;
/// Word 24 of a page being evacuated (see the module docs).
const EVACUATING: u32 = 0xFFFF_FFFE;
const LISTS: usize = 5;
const LIST_MIN: [u32; LISTS] = [0, 128, 512, 2048, 8192];
const MAX_SCAN: u32 = 16;
/// Largest var entry (15-bit length field; also bounded by the page).
pub const MAX_VAR_ENTRY: usize = 30000;
const MAX_DIR: u32 = (1 << ROW_ID_SLOT_BITS) - 1;

#[inline]
fn round4(n: usize) -> usize {
    (n.max(1) + 3) & !3
}

fn list_of(free: u32) -> usize {
    (1..LISTS).rev().find(|&l| free >= LIST_MIN[l]).unwrap_or(0)
}

pub struct VarPages {
    pages: PageMap,
    heads: [u32; LISTS],
    entries: u64,
    bytes_used: u64,
}

impl Default for VarPages {
    fn default() -> Self {
        Self::new()
    }
}

impl VarPages {
    pub fn new() -> VarPages {
        VarPages {
            pages: PageMap::new(PageKind::Var),
            heads: [NONE; LISTS],
            entries: 0,
            bytes_used: 0,
        }
    }

    pub fn pages(&self) -> u32 {
        self.pages.held()
    }
    pub fn entries(&self) -> u64 {
        self.entries
    }
    /// Bytes taken by entries (rounded sizes), without directory entries.
    pub fn bytes_used(&self) -> u64 {
        self.bytes_used
    }
    /// Free bytes on held pages.
    pub fn free_bytes(&self) -> u64 {
        self.pages
            .iter()
            .map(|(_, p)| p.u32_at(OFF_FREE) as u64)
            .sum()
    }

    /// Stores `data` in a new entry. None when no page can be had from the pool.
    pub fn alloc(&mut self, pool: &PagePool, data: &[u8]) -> Option<u32> {
        assert!(
            data.len() <= MAX_VAR_ENTRY,
            "var entry of {} bytes exceeds the maximum",
            data.len()
        );
        let need = round4(data.len()) as u32 + 4;
        let lp = match self.find_page(need) {
            Some(lp) => lp,
            None => self.add_page(pool)?,
        };
        let idx = self.place(lp, data);
        self.entries += 1;
        self.bytes_used += round4(data.len()) as u64;
        self.relist(lp);
        Some(lp << ROW_ID_SLOT_BITS | idx)
    }

    #[inline]
    pub fn get(&self, r: u32) -> &[u8] {
        let (lp, idx) = split(r);
        let p = self.page(lp);
        let e = p.u32_at(dir_off(idx));
        debug_assert!(e & DIR_FREE == 0, "var entry {r:#x} is free");
        let pos = (e & 0xFFFF) as usize;
        let len = ((e >> 16) & 0x7FFF) as usize;
        &p.bytes()[pos..pos + len]
    }

    #[inline]
    pub fn get_mut(&mut self, r: u32) -> &mut [u8] {
        let (lp, idx) = split(r);
        let p = self.page_mut(lp);
        let e = p.u32_at(dir_off(idx));
        assert!(e & DIR_FREE == 0, "var entry {r:#x} is free");
        let pos = (e & 0xFFFF) as usize;
        let len = ((e >> 16) & 0x7FFF) as usize;
        &mut p.bytes_mut()[pos..pos + len]
    }

    /// Shrinks an entry in place to `new_len` bytes (never allocates).
    pub fn shrink(&mut self, r: u32, new_len: usize) {
        let (lp, idx) = split(r);
        let freed = {
            let p = self.page_mut(lp);
            let e = p.u32_at(dir_off(idx));
            assert!(e & DIR_FREE == 0, "shrinking a free var entry");
            let len = ((e >> 16) & 0x7FFF) as usize;
            assert!(
                new_len <= len,
                "shrink cannot grow an entry ({len} -> {new_len})"
            );
            let freed = round4(len) - round4(new_len);
            p.set_u32_at(dir_off(idx), (e & 0xFFFF) | (new_len as u32) << 16);
            let f = p.u32_at(OFF_FREE) + freed as u32;
            p.set_u32_at(OFF_FREE, f);
            freed
        };
        self.bytes_used -= freed as u64;
        self.relist(lp);
    }

    pub fn free(&mut self, pool: &PagePool, r: u32) {
        let (lp, idx) = split(r);
        let (size, used) = {
            let p = self.page_mut(lp);
            let off = dir_off(idx);
            let e = p.u32_at(off);
            assert!(e & DIR_FREE == 0, "double free of var entry {r:#x}");
            let size = round4(((e >> 16) & 0x7FFF) as usize);
            let first = p.u32_at(OFF_FIRST_FREE_DIR);
            p.set_u32_at(off, DIR_FREE | (first & 0xFFFF));
            p.set_u32_at(OFF_FIRST_FREE_DIR, idx);
            let f = p.u32_at(OFF_FREE) + size as u32;
            p.set_u32_at(OFF_FREE, f);
            let used = p.u32_at(OFF_USED) - 1;
            p.set_u32_at(OFF_USED, used);
            (size, used)
        };
        self.entries -= 1;
        self.bytes_used -= size as u64;
        if used == 0 {
            self.unlist(lp);
            self.release_page(pool, lp);
        } else {
            self.relist(lp);
        }
    }

    pub fn free_all(&mut self, pool: &PagePool) {
        self.pages.free_all(pool);
        *self = VarPages::new();
    }

    fn find_page(&self, need: u32) -> Option<u32> {
        let l = list_of(need);
        if l > 0 {
            let mut lp = self.heads[l];
            let mut n = 0;
            while lp != NONE && n < MAX_SCAN {
                let p = self.page(lp);
                if p.u32_at(OFF_FREE) >= need {
                    return Some(lp);
                }
                lp = p.u32_at(OFF_NEXT);
                n += 1;
            }
        }
        ((l + 1)..LISTS).map(|l| self.heads[l]).find(|&h| h != NONE)
    }

    /// Writes `data` into page `lp`, which has room (compacting it if needed).
    fn place(&mut self, lp: u32, data: &[u8]) -> u32 {
        let size = round4(data.len());
        let p = self.page_mut(lp);
        let free_dir = p.u32_at(OFF_FIRST_FREE_DIR);
        let dir_count = p.u32_at(OFF_DIR_COUNT);
        let dir_growth = if free_dir == NONE { 4 } else { 0 };
        assert!(
            p.u32_at(OFF_FREE) as usize >= size + dir_growth,
            "page {lp} chosen without room"
        );
        let dir_start = PAGE_SIZE - 4 * dir_count as usize;
        if p.u32_at(OFF_INSERT) as usize + size + dir_growth > dir_start {
            compact(p);
        }
        let pos = p.u32_at(OFF_INSERT) as usize;
        p.bytes_mut()[pos..pos + data.len()].copy_from_slice(data);
        p.set_u32_at(OFF_INSERT, (pos + size) as u32);
        let idx = if free_dir != NONE {
            let next = p.u32_at(dir_off(free_dir)) & 0xFFFF;
            p.set_u32_at(OFF_FIRST_FREE_DIR, if next == 0xFFFF { NONE } else { next });
            free_dir
        } else {
            assert!(dir_count < MAX_DIR, "var page directory full");
            p.set_u32_at(OFF_DIR_COUNT, dir_count + 1);
            dir_count
        };
        p.set_u32_at(dir_off(idx), pos as u32 | (data.len() as u32) << 16);
        let f = p.u32_at(OFF_FREE) - (size + dir_growth) as u32;
        p.set_u32_at(OFF_FREE, f);
        let u = p.u32_at(OFF_USED) + 1;
        p.set_u32_at(OFF_USED, u);
        idx
    }

    fn add_page(&mut self, pool: &PagePool) -> Option<u32> {
        let (lp, p) = self.pages.add(pool)?;
        p.bytes_mut()[..HEADER].fill(0);
        p.set_u32_at(OFF_MAGIC, VAR_PAGE_MAGIC);
        p.set_u32_at(OFF_LOGICAL, lp);
        p.set_u32_at(OFF_FREE, (PAGE_SIZE - HEADER) as u32);
        p.set_u32_at(OFF_INSERT, HEADER as u32);
        p.set_u32_at(OFF_FIRST_FREE_DIR, NONE);
        p.set_u32_at(OFF_LIST, NONE);
        p.set_u32_at(OFF_PREV, NONE);
        p.set_u32_at(OFF_NEXT, NONE);
        self.relist(lp);
        Some(lp)
    }

    fn release_page(&mut self, pool: &PagePool, lp: u32) {
        self.pages.release(pool, lp);
    }

    /// Puts the page on the list matching its free bytes.
    fn relist(&mut self, lp: u32) {
        let (cur, free) = {
            let p = self.page(lp);
            (p.u32_at(OFF_LIST), p.u32_at(OFF_FREE))
        };
        let want = list_of(free);
        let want_id = if want == 0 { NONE } else { want as u32 };
        if cur == want_id || cur == EVACUATING {
            return;
        }
        self.unlist(lp);
        if want_id != NONE {
            let head = self.heads[want];
            {
                let p = self.page_mut(lp);
                p.set_u32_at(OFF_LIST, want_id);
                p.set_u32_at(OFF_PREV, NONE);
                p.set_u32_at(OFF_NEXT, head);
            }
            if head != NONE {
                self.page_mut(head).set_u32_at(OFF_PREV, lp);
            }
            self.heads[want] = lp;
        }
    }

    fn unlist(&mut self, lp: u32) {
        let (cur, prev, next) = {
            let p = self.page(lp);
            (p.u32_at(OFF_LIST), p.u32_at(OFF_PREV), p.u32_at(OFF_NEXT))
        };
        if cur == NONE || cur == EVACUATING {
            return;
        }
        if prev == NONE {
            self.heads[cur as usize] = next;
        } else {
            self.page_mut(prev).set_u32_at(OFF_NEXT, next);
        }
        if next != NONE {
            self.page_mut(next).set_u32_at(OFF_PREV, prev);
        }
        self.page_mut(lp).set_u32_at(OFF_LIST, NONE);
    }

    #[inline]
    fn page(&self, lp: u32) -> &Page {
        self.pages.page(lp)
    }

    #[inline]
    fn page_mut(&mut self, lp: u32) -> &mut Page {
        self.pages.page_mut(lp)
    }

    /// Verifies page accounting and list membership.
    pub fn check(&self) -> Result<(), String> {
        let mut entries = 0u64;
        for (lp, p) in self.pages.iter() {
            if p.u32_at(OFF_MAGIC) != VAR_PAGE_MAGIC || p.u32_at(OFF_LOGICAL) != lp {
                return Err(format!("var page {lp}: bad magic or logical number"));
            }
            let dir = p.u32_at(OFF_DIR_COUNT);
            let mut used_bytes = 0usize;
            let mut used = 0;
            for i in 0..dir {
                let e = p.u32_at(dir_off(i));
                if e & DIR_FREE == 0 {
                    used += 1;
                    used_bytes += round4(((e >> 16) & 0x7FFF) as usize);
                    let pos = (e & 0xFFFF) as usize;
                    if pos < HEADER
                        || pos + ((e >> 16) & 0x7FFF) as usize > PAGE_SIZE - 4 * dir as usize
                    {
                        return Err(format!("var page {lp}: entry {i} out of the data area"));
                    }
                }
            }
            let expect_free = PAGE_SIZE - HEADER - 4 * dir as usize - used_bytes;
            if p.u32_at(OFF_FREE) as usize != expect_free || p.u32_at(OFF_USED) != used {
                return Err(format!(
                    "var page {lp}: free {} expected {expect_free}",
                    p.u32_at(OFF_FREE)
                ));
            }
            let want = list_of(p.u32_at(OFF_FREE));
            let on = p.u32_at(OFF_LIST);
            if on != EVACUATING && ((want == 0 && on != NONE) || (want != 0 && on != want as u32)) {
                return Err(format!("var page {lp}: on list {on}, should be {want}"));
            }
            entries += used as u64;
        }
        if entries != self.entries {
            return Err(format!("entries {} counted {entries}", self.entries));
        }
        Ok(())
    }
}

#[inline]
fn split(r: u32) -> (u32, u32) {
    (r >> ROW_ID_SLOT_BITS, r & ((1 << ROW_ID_SLOT_BITS) - 1))
}

#[inline]
fn dir_off(idx: u32) -> usize {
    PAGE_SIZE - 4 * (idx as usize + 1)
}

/// Moves every used entry down to close the holes; directory indexes stay.
fn compact(p: &mut Page) {
    let dir = p.u32_at(OFF_DIR_COUNT);
    let mut live: Vec<(u32, usize, usize)> = (0..dir)
        .filter_map(|i| {
            let e = p.u32_at(dir_off(i));
            (e & DIR_FREE == 0).then_some((i, (e & 0xFFFF) as usize, ((e >> 16) & 0x7FFF) as usize))
        })
        .collect();
    live.sort_by_key(|&(_, pos, _)| pos);
    let mut insert = HEADER;
    for (i, pos, len) in live {
        if pos != insert {
            p.bytes_mut().copy_within(pos..pos + len, insert);
            p.set_u32_at(dir_off(i), insert as u32 | (len as u32) << 16);
        }
        insert += round4(len);
    }
    p.set_u32_at(OFF_INSERT, insert as u32);
}

impl VarPages {
    /// Prefetch hint for a var entry's directory word (no memory read).
    #[inline]
    pub fn prefetch_dir(&self, r: u32) {
        let (lp, idx) = split(r);
        if let Some(p) = self.pages.get(lp) {
            let off = dir_off(idx);
            super::prefetch(&p.bytes()[off..off + 1]);
        }
    }

    /// Prefetch hint for a var entry's data (reads its directory word).
    #[inline]
    pub fn prefetch(&self, r: u32) {
        let (lp, idx) = split(r);
        if let Some(p) = self.pages.get(lp) {
            let e = p.u32_at(dir_off(idx));
            if e & DIR_FREE == 0 {
                let pos = (e & 0xFFFF) as usize;
                super::prefetch(&p.bytes()[pos..pos + 1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn small_entries_pack_densely() {
        let pool = PagePool::new(64);
        let mut v = VarPages::new();
        let mut refs = Vec::new();
        for i in 0..20_000u32 {
            refs.push(v.alloc(&pool, &[i as u8; 18]).expect("space"));
        }
        // 20 bytes data + 4 directory per entry: ~1365 per page
        assert!(v.pages() <= 15, "pages {}", v.pages());
        v.check().expect("consistent");
        for (i, r) in refs.iter().enumerate() {
            assert_eq!(v.get(*r), &[i as u8; 18]);
        }
        for r in refs {
            v.free(&pool, r);
        }
        assert_eq!(v.pages(), 0);
        assert_eq!(pool.used_pages(), 0);
    }

    proptest! {
        #[test]
        fn matches_model(ops in proptest::collection::vec((0u8..3, 0usize..3000, any::<u8>()), 1..400)) {
            let pool = PagePool::new(40);
            let mut v = VarPages::new();
            let mut model: HashMap<u32, Vec<u8>> = HashMap::new();
            let mut keys: Vec<u32> = Vec::new();
            for (op, len, byte) in ops {
                match op {
                    0 | 1 => {
                        let data = vec![byte; len];
                        if let Some(r) = v.alloc(&pool, &data) {
                            prop_assert!(model.insert(r, data).is_none());
                            keys.push(r);
                        }
                    }
                    _ => {
                        if !keys.is_empty() {
                            let r = keys.swap_remove(len % keys.len());
                            if byte % 2 == 0 {
                                v.free(&pool, r);
                                model.remove(&r);
                            } else {
                                let n = model[&r].len() / 2;
                                v.shrink(r, n);
                                if let Some(d) = model.get_mut(&r) {
                                    d.truncate(n);
                                }
                                keys.push(r);
                            }
                        }
                    }
                }
                for (r, d) in &model {
                    prop_assert_eq!(v.get(*r), d.as_slice());
                }
                v.check().map_err(TestCaseError::fail)?;
            }
            for r in keys { v.free(&pool, r); }
            prop_assert_eq!(pool.used_pages(), 0);
        }
    }
}
