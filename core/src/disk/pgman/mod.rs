//! PGMAN: the DiskPageBufferMemory page cache of disk-data pages (NDB's `pgman.cpp`).
//!
//! A fixed set of 32 KB frames (`DiskPageBufferMemory / 32 KB`, allocated at start and
//! on an online grow) holds pages of the registered data files. The replacement policy
//! is [`crate::disk::policy::PageCachePolicy`] (LIRS racing LRU); this module does the
//! rest: the page → frame map, pins, page-in with verification, write-back under the
//! write-ahead-logging rule, the cleaner, checkpoints, online resize and the
//! `ndbinfo.diskpagebuffer` counters ([`stats`]). Design notes: `docs/page-cache.md`.
//!
//! ```text
//! let cache = PageCache::new(PageCacheConfig::default(), wal)?;
//! cache.register_file(7, file);
//! let p = cache.get(PageAddr { file_no: 7, page_no: 3 }, Intent::Write)?;
//! p.write(|b| b[PAGE_HEADER_BYTES] = 1);
//! p.set_lsn_dirty(lsn_of_the_undo_record);
//! drop(p);                       // unpin
//! cache.clean_step(64)?;         // or start_cleaner(interval)
//! let lsn = cache.flush_all()?;  // checkpoint
//! ```
//!
//! Invariants:
//! - A pinned frame (a live [`PageRef`]) is never evicted, reused or dropped.
//! - A dirty page with LSN `L` reaches its file only after `WalSync::sync_to(L)`
//!   returned, sealed (checksum, address, LSN) — and only while no `Write`/`Format`
//!   pin is held on it (NDB's BUSY state: a change and its `set_lsn_dirty` are one
//!   step for the writer).
//! - A page that fails to read or verify is never cached; a page whose write fails stays
//!   dirty with its contents (the write is retried by a later cleaner step or flush).
//!
//! Concurrency: one cache-wide mutex over `frame::State` (map, slots, policy, dirty
//! list, files) and one `RwLock` per frame over its bytes. I/O (reads, WAL syncs,
//! writes) is done without the cache mutex. Lock order: a frame's data lock, then the
//! cache mutex — never a frame lock while holding the cache mutex (so a `get` from
//! inside a `read`/`write` closure is allowed). Threads wait for another thread's I/O or
//! for a free frame on one condition variable.
//!
//! A hit takes the cache mutex once (map probe, policy access, pin = a plain increment
//! of the frame's pins-taken counter under the lock); the unpin of a `Read` pin takes
//! no lock (one atomic increment of the frame's pins-released counter plus a check for
//! frame waiters; the ordering argument is on `frame::Frame`).
//!
//! Files: `frame` (frames, slots, the state under the mutex and its invariants),
//! `access` (the request path), `cleaner` (write-back, cleaner, checkpoint), `admin`
//! (drop_file, resize), [`stats`] (the ndbinfo counters and what each one counts).

mod access;
mod admin;
mod cleaner;
mod frame;
pub mod stats;

#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::disk::io::DiskFile;
use crate::disk::page::DISK_PAGE_SIZE;
use crate::disk::policy::{PageCachePolicy, PageId, PolicyConfig, PolicyStats, page_id};
use crate::disk::{Lsn, WalSync};
use crate::error::{Result, codes};

use cleaner::CleanerThread;
use frame::{Frame, FrameArena, State};
use stats::IoCounters;
pub use stats::PageCacheStats;

/// NDB's default DiskPageBufferMemory.
pub const DEFAULT_CAPACITY_BYTES: u64 = 64 << 20;
/// NDB's minimum DiskPageBufferMemory.
pub const MIN_CAPACITY_BYTES: u64 = 4 << 20;
/// NDB's maximum DiskPageBufferMemory.
pub const MAX_CAPACITY_BYTES: u64 = 1 << 40;
/// Dirty pages the background cleaner writes per round.
pub const CLEANER_BATCH_PAGES: usize = 64;

/// Configuration of the page cache.
#[derive(Clone, Debug)]
pub struct PageCacheConfig {
    /// DiskPageBufferMemory (default 64M, at least 4M); rounded down to whole pages.
    pub capacity_bytes: u64,
    /// DiskPageBufferEntries: non-resident policy entries per cache page (default 10).
    pub entries_per_page: usize,
}

impl Default for PageCacheConfig {
    fn default() -> Self {
        PageCacheConfig {
            capacity_bytes: DEFAULT_CAPACITY_BYTES,
            entries_per_page: crate::disk::policy::DEFAULT_ENTRIES_PER_PAGE,
        }
    }
}

/// A page of a data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageAddr {
    pub file_no: u32,
    pub page_no: u32,
}

impl PageAddr {
    fn id(self) -> PageId {
        page_id(self.file_no, self.page_no)
    }
    fn offset_bytes(self) -> u64 {
        self.page_no as u64 * DISK_PAGE_SIZE as u64
    }
}

/// What the caller will do with a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Read only.
    Read,
    /// Modify (then `set_lsn_dirty`). Blocks write-back of the page while pinned.
    Write,
    /// A freshly allocated page: not read from disk, the frame is zeroed. Like `Write`.
    Format,
}

/// Number of frames for `capacity_bytes`, or the configuration error.
fn frames_for(capacity_bytes: u64) -> Result<usize> {
    if capacity_bytes < MIN_CAPACITY_BYTES {
        return Err(codes::bad_config(format_args!(
            "DiskPageBufferMemory {capacity_bytes} is below the minimum {MIN_CAPACITY_BYTES} (4M)"
        )));
    }
    if capacity_bytes > MAX_CAPACITY_BYTES {
        return Err(codes::bad_config(format_args!(
            "DiskPageBufferMemory {capacity_bytes} is above the maximum {MAX_CAPACITY_BYTES} (1024G)"
        )));
    }
    Ok((capacity_bytes / DISK_PAGE_SIZE as u64) as usize)
}

static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// (cache id, page id) of this thread's last `get`.
    static LAST_GET: Cell<(u64, PageId)> = const { Cell::new((0, 0)) };
}

/// The shared part of the cache (also owned by the cleaner thread).
pub(super) struct Inner {
    id: u64,
    /// The frame headers (also in `State`): a pin refers into it without the lock.
    arena: Arc<FrameArena>,
    state: Mutex<State>,
    /// Signalled when a page-in or write-back ends, a write pin is released, a frame is
    /// freed or a pin dropped while someone waits for a frame.
    cond: Condvar,
    wal: Arc<dyn WalSync>,
    /// Highest LSN known durable in the undo log.
    durable_lsn: AtomicU64,
    /// Threads waiting for a free frame (an unpin then wakes them).
    frame_waiters: AtomicUsize,
    io: IoCounters,
    resize_lock: Mutex<()>,
}

/// The DiskPageBufferMemory page cache. See the module docs.
pub struct PageCache {
    inner: Arc<Inner>,
    cleaner: Mutex<Option<CleanerThread>>,
}

/// A pinned page. The frame stays assigned to this page until it is dropped.
pub struct PageRef<'a> {
    frame: &'a Frame,
    inner: &'a Inner,
    i: u32,
    addr: PageAddr,
    intent: Intent,
}

impl PageCache {
    /// A cache of `cfg.capacity_bytes` with NDB's LIRS policy racing LRU, with the
    /// hit-ratio advisor.
    pub fn new(cfg: PageCacheConfig, wal: Arc<dyn WalSync>) -> Result<PageCache> {
        let frames = frames_for(cfg.capacity_bytes)?;
        let mut pc = PolicyConfig::new(frames);
        pc.entries_per_page = cfg.entries_per_page.max(1);
        PageCache::with_policy(cfg, pc, wal)
    }

    /// A cache with an explicit policy configuration (its capacity and entries per page
    /// are taken from `cfg`).
    pub fn with_policy(
        cfg: PageCacheConfig,
        mut policy: PolicyConfig,
        wal: Arc<dyn WalSync>,
    ) -> Result<PageCache> {
        let frames = frames_for(cfg.capacity_bytes)?;
        policy.capacity = frames;
        policy.entries_per_page = cfg.entries_per_page.max(1);
        let arena = Arc::new(FrameArena::new());
        let state = State::new(PageCachePolicy::with_config(policy), arena.clone(), frames);
        Ok(PageCache {
            inner: Arc::new(Inner {
                id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
                arena,
                state: Mutex::new(state),
                cond: Condvar::new(),
                wal,
                durable_lsn: AtomicU64::new(0),
                frame_waiters: AtomicUsize::new(0),
                io: IoCounters::default(),
                resize_lock: Mutex::new(()),
            }),
            cleaner: Mutex::new(None),
        })
    }

    /// Makes `file` the data file `file_no` (replaces an earlier registration).
    pub fn register_file(&self, file_no: u32, file: Arc<dyn DiskFile>) {
        self.inner.state.lock().files.insert(file_no, file);
    }

    /// Discards every page of `file_no`, dirty or not, and unregisters it. Waits for
    /// I/O in flight on its pages; fails with 770 if one of its pages is pinned.
    pub fn drop_file(&self, file_no: u32) -> Result<()> {
        self.inner.drop_file(file_no)
    }

    /// Forgets the cached pages among `pages`, dirty or not, without writing them (the
    /// pages of an extent returned to its tablespace). Returns how many were cached.
    pub fn discard_pages(&self, pages: &[PageAddr]) -> Result<usize> {
        self.inner.discard_pages(pages)
    }

    /// Pins `addr` for `intent`, reading it on a miss. Correlated reference rule: the
    /// request is correlated (no LIRS promotion) when this thread's previous `get` on
    /// this cache was for the same page.
    pub fn get(&self, addr: PageAddr, intent: Intent) -> Result<PageRef<'_>> {
        let page = addr.id();
        let key = (self.inner.id, page);
        let correlated = LAST_GET.with(|c| c.replace(key)) == key;
        self.inner.get(page, addr, intent, correlated)
    }

    /// [`PageCache::get`] with the caller saying whether the reference is correlated
    /// (e.g. the commit-time touch of a page the operation read at prepare).
    pub fn get_with(
        &self,
        addr: PageAddr,
        intent: Intent,
        correlated: bool,
    ) -> Result<PageRef<'_>> {
        let page = addr.id();
        LAST_GET.with(|c| c.set((self.inner.id, page)));
        self.inner.get(page, addr, intent, correlated)
    }

    /// Writes up to `max_pages` dirty pages, those dirty the longest first (pages pinned
    /// for writing or already being written are skipped). Returns the pages written.
    pub fn clean_step(&self, max_pages: usize) -> Result<usize> {
        self.inner.clean_step(max_pages)
    }

    /// Writes every page that is dirty now (a checkpoint), waiting for pages pinned for
    /// writing to be released (do not call it while holding a `Write` pin). Returns the
    /// highest LSN among the pages it wrote (0 if none).
    pub fn flush_all(&self) -> Result<Lsn> {
        self.inner.flush_all()
    }

    /// The dirty sequence number the next page to become dirty gets: a later
    /// [`PageCache::flush_dirty_before`] with it writes the pages dirty now.
    pub fn dirty_mark(&self) -> u64 {
        self.inner.state.lock().next_dirty_seq
    }

    /// Writes and syncs the pages that became dirty before `mark` (see
    /// [`PageCache::dirty_mark`]) and still are; pages first dirtied after it are left
    /// to the cleaner (a local checkpoint needs only the changes before its start).
    pub fn flush_dirty_before(&self, mark: u64) -> Result<Lsn> {
        self.inner.flush_dirty_before(mark)
    }

    /// Runs [`PageCache::clean_step`] of [`CLEANER_BATCH_PAGES`] every `interval` on a
    /// background thread (restarts it if running). Errors are counted in
    /// `cleaner_errors`; the pages stay dirty.
    pub fn start_cleaner(&self, interval: Duration) -> Result<()> {
        let mut c = self.cleaner.lock();
        if let Some(old) = c.take() {
            old.stop();
        }
        *c = Some(CleanerThread::start(
            self.inner.clone(),
            interval,
            CLEANER_BATCH_PAGES,
        )?);
        Ok(())
    }

    /// Stops and joins the background cleaner (no-op if not running).
    pub fn stop_cleaner(&self) {
        if let Some(c) = self.cleaner.lock().take() {
            c.stop();
        }
    }

    /// Tells the cache the undo log is durable up to `lsn` (writes of pages at or below
    /// it skip `sync_to`).
    pub fn note_durable_lsn(&self, lsn: Lsn) {
        self.inner.durable_lsn.fetch_max(lsn, Ordering::AcqRel);
    }

    /// Changes DiskPageBufferMemory without a restart. Growing adds frames; shrinking
    /// evicts pages (writing dirty ones first). Pinned pages stay; their frames are
    /// given back when they are released and evicted.
    pub fn resize(&self, new_capacity_bytes: u64) -> Result<()> {
        self.inner.resize(new_capacity_bytes)
    }

    /// `(size in bytes, predicted hit ratio in percent)` per size asked, from the
    /// policy's advisor.
    pub fn advice(&self, sizes_bytes: &[u64]) -> Vec<(u64, f64)> {
        let pages: Vec<usize> = sizes_bytes
            .iter()
            .map(|&b| (b / DISK_PAGE_SIZE as u64) as usize)
            .collect();
        let st = self.inner.state.lock();
        st.policy
            .advice(&pages)
            .into_iter()
            .zip(sizes_bytes)
            .map(|((_, pct), &b)| (b, pct))
            .collect()
    }

    /// The `ndbinfo.diskpagebuffer` counters and sizes.
    pub fn stats(&self) -> PageCacheStats {
        let st = self.inner.state.lock();
        let io = &self.inner.io;
        PageCacheStats {
            pages_written: IoCounters::get(&io.pages_written),
            pages_written_lcp: IoCounters::get(&io.pages_written_lcp),
            pages_read: st.counters.pages_read,
            log_waits: IoCounters::get(&io.log_waits),
            page_requests_direct_return: st.counters.direct_return,
            page_requests_wait_queue: st.counters.wait_queue,
            page_requests_wait_io: st.counters.wait_io,
            resident_pages: st.resident_pages(),
            dirty_pages: st.dirty.len(),
            capacity_pages: st.target_frames,
            frames_allocated: st.frames_allocated,
            read_errors: st.counters.read_errors,
            write_errors: IoCounters::get(&io.write_errors),
            cleaner_errors: IoCounters::get(&io.cleaner_errors),
        }
    }

    /// The replacement policy's own counters.
    pub fn policy_stats(&self) -> PolicyStats {
        self.inner.state.lock().policy.stats()
    }

    /// Verifies the cache's invariants and the policy's (O(frames); tests, debugging).
    pub fn check(&self) {
        let st = self.inner.state.lock();
        st.check();
        st.policy.check();
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        self.stop_cleaner();
    }
}

impl PageRef<'_> {
    /// The page's address.
    pub fn addr(&self) -> PageAddr {
        self.addr
    }

    /// Reads the page (header included) under the frame's shared lock.
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.frame.data.read())
    }

    /// Modifies the page under the frame's exclusive lock. Only for `Write`/`Format`
    /// pins. Bytes 0..32 are the header, sealed by the cache on write-back (the kind and
    /// kind-specific word written there are kept).
    pub fn write<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        assert_ne!(self.intent, Intent::Read, "write through a Read pin");
        f(&mut self.frame.data.write())
    }

    /// Marks the page dirty with the LSN of the undo record of the change (the page's
    /// LSN becomes the highest one given). Only for `Write`/`Format` pins.
    pub fn set_lsn_dirty(&self, lsn: Lsn) {
        assert_ne!(
            self.intent,
            Intent::Read,
            "set_lsn_dirty through a Read pin"
        );
        self.inner.state.lock().mark_dirty(self.i, lsn);
    }
}

impl PageRef<'_> {
    /// The page's LSN: its header's when read, raised by `set_lsn_dirty`.
    pub fn lsn(&self) -> Lsn {
        self.inner.state.lock().slots[self.i as usize].lsn
    }

    /// Restart undo: the page is back at its state before the change logged at
    /// `lsn + 1` and after: its LSN becomes exactly `lsn` (lowered), and it is dirty.
    /// Only for `Write` pins.
    pub fn set_lsn_undone(&self, lsn: Lsn) {
        assert_eq!(
            self.intent,
            Intent::Write,
            "set_lsn_undone without a Write pin"
        );
        self.inner.state.lock().mark_dirty_lsn_exact(self.i, lsn);
    }
}

impl Drop for PageRef<'_> {
    fn drop(&mut self) {
        let inner = self.inner;
        if self.intent != Intent::Read {
            let mut st = inner.state.lock();
            let s = &mut st.slots[self.i as usize];
            assert!(s.write_pins > 0, "write pin count out of step");
            s.write_pins -= 1;
            self.frame.unpin();
            drop(st);
            inner.cond.notify_all();
            return;
        }
        // `SeqCst` increment then `SeqCst` load: pairs with `wait_for_frame` (the
        // argument is on `frame::Frame`).
        self.frame.unpin();
        if inner.frame_waiters.load(Ordering::SeqCst) > 0 {
            let _st = inner.state.lock();
            inner.cond.notify_all();
        }
    }
}
