//! Counters of the page cache, named and counted as NDB's `ndbinfo.diskpagebuffer`
//! (one row per PGMAN instance; here one row per [`super::PageCache`]).
//!
//! What each column counts (from NDB's `pgman.cpp`, `NdbinfoTables.cpp`):
//!
//! | column | NDB's description | counted here when |
//! |---|---|---|
//! | `pages_written` | Pages written to disk | a dirty page is written by the cleaner ([`super::PageCache::clean_step`]) or because its frame is reused (eviction, shrink); not by a checkpoint |
//! | `pages_written_lcp` | Pages written by local checkpoint | a dirty page is written by [`super::PageCache::flush_all`] (disjoint from `pages_written`, as in NDB's `fswriteconf`) |
//! | `pages_read` | Pages read from disk | a page is read and verified (a read that fails does not count) |
//! | `log_waits` | Page writes waiting for log to be written to disk | a write had to call `WalSync::sync_to(L)` with `L` above the highest LSN known durable |
//! | `page_requests_direct_return` | Page in buffer and no requests waiting for it | `get` found the page resident and usable at once |
//! | `page_requests_wait_queue` | Page in buffer, but some requests are already waiting for it | `get` waited for another thread's I/O on the page (read in flight, write-back in flight for a `Write`/`Format` intent, eviction write) or for a free frame, and then did no read itself |
//! | `page_requests_wait_io` | Page not in buffer, waiting to be read from disk | `get` missed and did the page-in itself (a read, or zeroing for `Intent::Format`, which NDB also queues as a non-mapped request), whether or not the read succeeded |
//!
//! Every `get` call that reaches the cache (a known file) counts exactly one of the three
//! request columns, so `direct_return + wait_queue + wait_io == requests`. Hit ratio as
//! the NDB manual computes it: `100 × direct_return / (direct_return + wait_io)`.

use std::sync::atomic::{AtomicU64, Ordering};

/// The `ndbinfo.diskpagebuffer` row plus sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageCacheStats {
    pub pages_written: u64,
    pub pages_written_lcp: u64,
    pub pages_read: u64,
    pub log_waits: u64,
    pub page_requests_direct_return: u64,
    pub page_requests_wait_queue: u64,
    pub page_requests_wait_io: u64,
    /// Pages holding a frame with valid contents (resident, being written or evicted).
    pub resident_pages: usize,
    /// Resident pages changed since they were last written.
    pub dirty_pages: usize,
    /// DiskPageBufferMemory in pages.
    pub capacity_pages: usize,
    /// Frames allocated (above `capacity_pages` after a shrink while pages are pinned).
    pub frames_allocated: usize,
    /// Failed page reads (I/O error or a page that did not verify).
    pub read_errors: u64,
    /// Failed page writes (the page stayed dirty).
    pub write_errors: u64,
    /// Failed steps of the background cleaner (also counted in `write_errors`).
    pub cleaner_errors: u64,
}

impl PageCacheStats {
    /// All page requests.
    pub fn page_requests(&self) -> u64 {
        self.page_requests_direct_return
            + self.page_requests_wait_queue
            + self.page_requests_wait_io
    }

    /// NDB's hit ratio in percent (0 before any request).
    pub fn hit_ratio_pct(&self) -> f64 {
        let n = self.page_requests_direct_return + self.page_requests_wait_io;
        if n == 0 {
            0.0
        } else {
            100.0 * self.page_requests_direct_return as f64 / n as f64
        }
    }
}

/// Counters updated under the cache lock (the request classification).
#[derive(Clone, Debug, Default)]
pub(super) struct LockedCounters {
    pub direct_return: u64,
    pub wait_queue: u64,
    pub wait_io: u64,
    pub pages_read: u64,
    pub read_errors: u64,
}

/// Counters updated outside the cache lock (writes happen outside it).
#[derive(Debug, Default)]
pub(super) struct IoCounters {
    pub pages_written: AtomicU64,
    pub pages_written_lcp: AtomicU64,
    pub log_waits: AtomicU64,
    pub write_errors: AtomicU64,
    pub cleaner_errors: AtomicU64,
}

impl IoCounters {
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
