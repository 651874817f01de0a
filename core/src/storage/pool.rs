//! DataMemory: the node's fixed pool of 32 KB pages.
//!
//! All table data of a data node — fixed-size row parts, var-size row parts, the
//! primary-key hash index and the ordered indexes — lives in pages taken from one
//! [`PagePool`], allocated in full when the node starts (NDB allocates DataMemory at
//! start, never on demand). A page is owned by exactly one structure at a time: it is
//! moved out of the pool by [`PagePool::alloc`] and moved back by [`PagePool::free`], so
//! ownership is checked by the compiler and no page is ever shared.
//!
//! Accounting is exact: every owner tells the pool which [`PageKind`] it takes a page
//! for, and the pool keeps per-kind counts that `REPORT MEMORYUSAGE` and
//! `ndbinfo.memoryusage` read. When no page is free the caller gets `None` and returns
//! NDB's error for its kind (827 table data, 625 hash index, 902 ordered index).
//!
//! Lock order: the pool's mutex is a leaf lock; it is taken while a fragment lock is
//! held and never the other way round.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size of one DataMemory page (NDB's GLOBAL_PAGE_SIZE).
pub const PAGE_SIZE: usize = 32768;

/// One 32 KB page. Aligned to 4096 so that checkpoint files can later be written from
/// page memory with O_DIRECT.
#[repr(C, align(4096))]
pub struct Page(pub [u8; PAGE_SIZE]);

const _: () = assert!(std::mem::size_of::<Page>() == PAGE_SIZE);

impl Page {
    #[inline]
    pub fn bytes(&self) -> &[u8; PAGE_SIZE] {
        &self.0
    }
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut [u8; PAGE_SIZE] {
        &mut self.0
    }
    #[inline]
    pub fn u32_at(&self, off: usize) -> u32 {
        u32::from_le_bytes([
            self.0[off],
            self.0[off + 1],
            self.0[off + 2],
            self.0[off + 3],
        ])
    }
    #[inline]
    pub fn set_u32_at(&mut self, off: usize, v: u32) {
        self.0[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u16_at(&self, off: usize) -> u16 {
        u16::from_le_bytes([self.0[off], self.0[off + 1]])
    }
    #[inline]
    pub fn set_u16_at(&mut self, off: usize, v: u16) {
        self.0[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u64_at(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[off..off + 8]);
        u64::from_le_bytes(b)
    }
    #[inline]
    pub fn set_u64_at(&mut self, off: usize, v: u64) {
        self.0[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// What a page is used for; the pool counts pages per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    /// Fixed-size row parts (DBTUP fixed pages).
    Fixed = 0,
    /// Var-size row parts (DBTUP var pages).
    Var = 1,
    /// Primary-key and unique hash index (DBACC).
    HashIndex = 2,
    /// Ordered index nodes (DBTUX).
    OrderedIndex = 3,
}

const KINDS: usize = 4;

/// The node's DataMemory.
pub struct PagePool {
    free: Mutex<Vec<Box<Page>>>,
    total_pages: u32,
    used_by_kind: [AtomicU64; KINDS],
    high_water_pages: AtomicU64,
}

impl PagePool {
    /// Allocates `total_pages` pages now. The memory is obtained zeroed from the
    /// allocator, so the OS commits it only when a page is first written.
    pub fn new(total_pages: u32) -> PagePool {
        let mut free = Vec::with_capacity(total_pages as usize);
        for _ in 0..total_pages {
            free.push(new_zeroed_page());
        }
        PagePool {
            free: Mutex::new(free),
            total_pages,
            used_by_kind: Default::default(),
            high_water_pages: AtomicU64::new(0),
        }
    }

    /// Pool sized from a byte count (DataMemory), rounded down to whole pages.
    pub fn with_bytes(data_memory_bytes: u64) -> PagePool {
        PagePool::new((data_memory_bytes / PAGE_SIZE as u64) as u32)
    }

    /// Takes one page for `kind`, or `None` when DataMemory is exhausted.
    /// The page's content is unspecified: the new owner initialises it.
    pub fn alloc(&self, kind: PageKind) -> Option<Box<Page>> {
        let page = self.free.lock().pop()?;
        let used = self.used_by_kind[kind as usize].fetch_add(1, Ordering::Relaxed) + 1;
        let _ = used;
        let total_used = self.used_pages();
        self.high_water_pages
            .fetch_max(total_used, Ordering::Relaxed);
        Some(page)
    }

    /// Returns a page taken for `kind`.
    pub fn free(&self, kind: PageKind, page: Box<Page>) {
        let prev = self.used_by_kind[kind as usize].fetch_sub(1, Ordering::Relaxed);
        assert!(
            prev > 0,
            "page pool: free of a {kind:?} page that was never allocated"
        );
        let mut free = self.free.lock();
        assert!(
            free.len() < self.total_pages as usize,
            "page pool: more pages freed than exist"
        );
        free.push(page);
    }

    pub fn total_pages(&self) -> u32 {
        self.total_pages
    }

    pub fn free_pages(&self) -> u32 {
        self.free.lock().len() as u32
    }

    pub fn used_pages_of(&self, kind: PageKind) -> u64 {
        self.used_by_kind[kind as usize].load(Ordering::Relaxed)
    }

    /// Pages in use by all kinds.
    pub fn used_pages(&self) -> u64 {
        self.used_by_kind
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Pages counted as "Data" by REPORT MEMORYUSAGE: everything but the hash index.
    pub fn data_pages(&self) -> u64 {
        self.used_pages_of(PageKind::Fixed)
            + self.used_pages_of(PageKind::Var)
            + self.used_pages_of(PageKind::OrderedIndex)
    }

    /// Pages counted as "Index" by REPORT MEMORYUSAGE: the hash index (DBACC).
    pub fn index_pages(&self) -> u64 {
        self.used_pages_of(PageKind::HashIndex)
    }

    /// Gives the free pages' memory back to the allocator (cluster shutdown); later
    /// allocations fail. Pages still held are released when their owners drop them.
    pub fn release_memory(&self) {
        let mut free = self.free.lock();
        free.clear();
        free.shrink_to_fit();
    }

    pub fn high_water_pages(&self) -> u64 {
        self.high_water_pages.load(Ordering::Relaxed)
    }
}

fn new_zeroed_page() -> Box<Page> {
    // SAFETY: `Page` is a byte array, for which all-zero bytes are a valid value.
    unsafe { Box::<Page>::new_zeroed().assume_init() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_until_full_then_free() {
        let pool = PagePool::new(3);
        let a = pool.alloc(PageKind::Fixed).expect("page");
        let b = pool.alloc(PageKind::HashIndex).expect("page");
        let c = pool.alloc(PageKind::Var).expect("page");
        assert!(pool.alloc(PageKind::Fixed).is_none());
        assert_eq!(pool.used_pages(), 3);
        assert_eq!(pool.data_pages(), 2);
        assert_eq!(pool.index_pages(), 1);
        pool.free(PageKind::Fixed, a);
        assert_eq!(pool.free_pages(), 1);
        assert!(pool.alloc(PageKind::OrderedIndex).is_some_and(|p| {
            pool.free(PageKind::OrderedIndex, p);
            true
        }));
        pool.free(PageKind::HashIndex, b);
        pool.free(PageKind::Var, c);
        assert_eq!(pool.used_pages(), 0);
        assert_eq!(pool.high_water_pages(), 3);
    }

    #[test]
    #[should_panic(expected = "never allocated")]
    fn double_free_is_caught() {
        let pool = PagePool::new(1);
        let a = pool.alloc(PageKind::Fixed).expect("page");
        pool.free(PageKind::Var, a);
    }
}
