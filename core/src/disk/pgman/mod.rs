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
//! Concurrency: one cache-wide mutex over [`frame::State`] (map, slots, policy, dirty
//! list, files) and one `RwLock` per frame over its bytes. I/O (reads, WAL syncs,
//! writes) is done without the cache mutex. Lock order: a frame's data lock, then the
//! cache mutex — never a frame lock while holding the cache mutex (so a `get` from
//! inside a `read`/`write` closure is allowed). Threads wait for another thread's I/O or
//! for a free frame on one condition variable.
//!
//! A hit takes the cache mutex once (map probe, policy access, pin = `Arc` clone); the
//! unpin of a `Read` pin takes no lock (an `Arc` drop plus a check for frame waiters).

mod cleaner;
mod frame;
pub mod stats;

#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::disk::io::DiskFile;
use crate::disk::page::{DISK_PAGE_SIZE, verify};
use crate::disk::policy::{Access, PageCachePolicy, PageId, PolicyConfig, PolicyStats, page_id};
use crate::disk::{Lsn, WalSync};
use crate::error::{NdbError, Result, codes};

use cleaner::{CleanerThread, WriteKind};
use frame::{Frame, PENDING, Slot, State, Status, clean_evictable, unpinned_idle};
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
    frame: Arc<Frame>,
    // Declared after `frame`: runs after the pin (`Arc`) is released.
    unpin: Unpin<'a>,
}

struct Unpin<'a> {
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
        let state = State::new(PageCachePolicy::with_config(policy), frames);
        Ok(PageCache {
            inner: Arc::new(Inner {
                id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
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
        self.unpin.addr
    }

    /// Reads the page (header included) under the frame's shared lock.
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.frame.data.read())
    }

    /// Modifies the page under the frame's exclusive lock. Only for `Write`/`Format`
    /// pins. Bytes 0..32 are the header, sealed by the cache on write-back (the kind and
    /// kind-specific word written there are kept).
    pub fn write<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        assert_ne!(self.unpin.intent, Intent::Read, "write through a Read pin");
        f(&mut self.frame.data.write())
    }

    /// Marks the page dirty with the LSN of the undo record of the change (the page's
    /// LSN becomes the highest one given). Only for `Write`/`Format` pins.
    pub fn set_lsn_dirty(&self, lsn: Lsn) {
        assert_ne!(
            self.unpin.intent,
            Intent::Read,
            "set_lsn_dirty through a Read pin"
        );
        self.unpin.inner.state.lock().mark_dirty(self.unpin.i, lsn);
    }
}

impl Drop for Unpin<'_> {
    fn drop(&mut self) {
        let inner = self.inner;
        if self.intent != Intent::Read {
            let mut st = inner.state.lock();
            let s = &mut st.slots[self.i as usize];
            assert!(s.write_pins > 0, "write pin count out of step");
            s.write_pins -= 1;
            drop(st);
            inner.cond.notify_all();
            return;
        }
        // The pin (`Arc`) is already released; pairs with the fence in `wait_for_frame`.
        fence(Ordering::SeqCst);
        if inner.frame_waiters.load(Ordering::Relaxed) > 0 {
            let _st = inner.state.lock();
            inner.cond.notify_all();
        }
    }
}

fn read_error(addr: PageAddr, e: std::io::Error) -> NdbError {
    codes::file_read_error(format_args!(
        "disk file {} page {}: {e}",
        addr.file_no, addr.page_no
    ))
}

impl Inner {
    fn get(
        &self,
        page: PageId,
        addr: PageAddr,
        intent: Intent,
        correlated: bool,
    ) -> Result<PageRef<'_>> {
        let mut st = self.state.lock();
        let mut waited = false;
        while let Some(&i) = st.map.get(&page) {
            if i != PENDING {
                let s = &st.slots[i as usize];
                if s.status == Status::Resident && !(s.writing && intent != Intent::Read) {
                    if st.policy.access(page, correlated, |_| false) != Access::Hit {
                        return Err(codes::internal(
                            "page cache: resident page missed in the policy",
                        ));
                    }
                    if waited {
                        st.counters.wait_queue += 1;
                    } else {
                        st.counters.direct_return += 1;
                    }
                    let r = self.pin(&mut st, i, addr, intent);
                    drop(st);
                    if intent == Intent::Format {
                        r.frame.data.write().fill(0);
                    }
                    return Ok(r);
                }
            }
            waited = true;
            self.cond.wait(&mut st);
        }
        self.miss(st, page, addr, intent, correlated, waited)
    }

    fn pin(&self, st: &mut State, i: u32, addr: PageAddr, intent: Intent) -> PageRef<'_> {
        let Some(frame) = st.frames[i as usize].clone() else {
            unreachable!("a mapped page has a frame");
        };
        if intent != Intent::Read {
            st.slots[i as usize].write_pins += 1;
        }
        PageRef {
            frame,
            unpin: Unpin {
                inner: self,
                i,
                addr,
                intent,
            },
        }
    }

    fn miss<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        page: PageId,
        addr: PageAddr,
        intent: Intent,
        correlated: bool,
        mut waited: bool,
    ) -> Result<PageRef<'a>> {
        let Some(file) = st.files.get(&addr.file_no).cloned() else {
            return Err(codes::bad_argument(format_args!(
                "disk file {} is not registered in the page cache",
                addr.file_no
            )));
        };
        let out = {
            let State {
                policy,
                frames,
                slots,
                map,
                ..
            } = &mut *st;
            policy.access(page, correlated, |v| {
                map.get(&v)
                    .is_some_and(|&i| i != PENDING && clean_evictable(frames, slots, i))
            })
        };
        let Access::Miss { evict } = out else {
            return Err(codes::internal(
                "page cache: unmapped page hit in the policy",
            ));
        };
        if let Some(v) = evict {
            let Some(vi) = st.frame_of(v) else {
                return Err(codes::internal(
                    "page cache: the policy evicted an unmapped page",
                ));
            };
            st.release_frame(vi);
        }
        let i = match st.free.pop() {
            Some(i) => i,
            None => {
                st.map.insert(page, PENDING);
                match self.wait_for_frame(&mut st, &mut waited) {
                    Ok(i) => i,
                    Err(e) => {
                        st.map.remove(&page);
                        st.policy.remove(page);
                        if waited {
                            st.counters.wait_queue += 1;
                        } else {
                            st.counters.wait_io += 1;
                        }
                        drop(st);
                        self.cond.notify_all();
                        return Err(e);
                    }
                }
            }
        };
        st.slots[i as usize] = Slot {
            page,
            addr,
            status: Status::Loading,
            ..Slot::free()
        };
        st.map.insert(page, i);
        if waited {
            st.counters.wait_queue += 1;
        } else {
            st.counters.wait_io += 1;
        }
        let r = self.pin(&mut st, i, addr, intent);
        drop(st);

        let loaded = if intent == Intent::Format {
            r.frame.data.write().fill(0);
            Ok(0)
        } else {
            let mut data = r.frame.data.write();
            file.read_at(&mut data, addr.offset_bytes())
                .map_err(|e| read_error(addr, e))
                .and_then(|()| verify(&data, addr.file_no, addr.page_no))
                .map(|h| h.lsn)
        };

        let mut st = self.state.lock();
        let res = match loaded {
            Ok(lsn) => {
                let s = &mut st.slots[i as usize];
                s.status = Status::Resident;
                s.lsn = lsn;
                if intent != Intent::Format {
                    st.counters.pages_read += 1;
                }
                Ok(r)
            }
            Err(e) => {
                st.counters.read_errors += 1;
                st.policy.remove(page);
                // Unpin without the guard (it would take the lock again), then free.
                let PageRef { frame, unpin } = r;
                drop(frame);
                std::mem::forget(unpin);
                st.slots[i as usize].write_pins = 0;
                st.release_frame(i);
                Err(e)
            }
        };
        drop(st);
        self.cond.notify_all();
        res
    }

    /// Takes a free frame, evicting (and writing if dirty) pages while the policy is over
    /// capacity, or waits for one. Called with the page pending in `map`.
    fn wait_for_frame(&self, st: &mut MutexGuard<'_, State>, waited: &mut bool) -> Result<u32> {
        self.frame_waiters.fetch_add(1, Ordering::SeqCst);
        let r = loop {
            // Pairs with the fence in `Unpin::drop`: either that unpin is visible to
            // the evictability check below, or its thread sees us waiting.
            fence(Ordering::SeqCst);
            if let Some(i) = st.free.pop() {
                break Ok(i);
            }
            let victims = {
                let State {
                    policy,
                    frames,
                    slots,
                    map,
                    ..
                } = &mut **st;
                policy.evict_excess(|v| {
                    map.get(&v)
                        .is_some_and(|&i| i != PENDING && unpinned_idle(frames, slots, i))
                })
            };
            if victims.is_empty() {
                *waited = true;
                // The timeout is only a safety net; wake-ups come from unpins and frees.
                self.cond.wait_for(st, Duration::from_millis(50));
                continue;
            }
            if let Err(e) = self.evict_pages(st, &victims) {
                break Err(e);
            }
        };
        self.frame_waiters.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Frees the frames of `victims` (just evicted from the policy): clean ones at once,
    /// dirty ones after writing them (without the lock). A victim whose write fails
    /// returns to the policy, dirty; the first error is returned.
    fn evict_pages(&self, st: &mut MutexGuard<'_, State>, victims: &[PageId]) -> Result<()> {
        let mut claims = Vec::new();
        for &v in victims {
            let Some(i) = st.frame_of(v) else {
                return Err(codes::internal("page cache: evicted page is not mapped"));
            };
            if st.slots[i as usize].dirty_seq.is_none() {
                st.release_frame(i);
            } else {
                match self.claim(st, i) {
                    Some(c) => {
                        st.slots[i as usize].status = Status::Evicting;
                        claims.push(c);
                    }
                    None => {
                        // No file to write to (cannot happen: drop_file discards pages
                        // before unregistering). Keep the page.
                        st.policy.access(v, true, |_| false);
                    }
                }
            }
        }
        let mut first_err = None;
        for c in claims {
            let res = MutexGuard::unlocked(st, || self.write_claimed(&c));
            if let Err(e) = self.finish(st, c, res, WriteKind::Evict) {
                first_err.get_or_insert(e);
            }
        }
        self.cond.notify_all();
        first_err.map_or(Ok(()), Err)
    }

    fn drop_file(&self, file_no: u32) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            let mut busy = false;
            let mut mine = Vec::new();
            for (i, s) in st.slots.iter().enumerate() {
                if s.status == Status::Free || s.addr.file_no != file_no {
                    continue;
                }
                if s.status != Status::Resident || s.writing {
                    busy = true;
                } else if s.write_pins > 0
                    || st.frames[i]
                        .as_ref()
                        .is_some_and(|f| Arc::strong_count(f) > 1)
                {
                    return Err(codes::file_in_use(format_args!(
                        "disk file {file_no}: page {} is in use",
                        s.addr.page_no
                    )));
                }
                mine.push(i as u32);
            }
            busy |= st
                .map
                .iter()
                .any(|(&p, &i)| i == PENDING && (p >> 32) as u32 == file_no);
            if busy {
                self.cond.wait(&mut st);
                continue;
            }
            for i in mine {
                let page = st.slots[i as usize].page;
                st.policy.remove(page);
                st.release_frame(i);
            }
            st.files.remove(&file_no);
            drop(st);
            self.cond.notify_all();
            return Ok(());
        }
    }

    fn resize(&self, new_capacity_bytes: u64) -> Result<()> {
        let target = frames_for(new_capacity_bytes)?;
        let _serial = self.resize_lock.lock();
        let to_add = {
            let st = self.state.lock();
            target.saturating_sub(st.frames_allocated)
        };
        let fresh: Vec<Arc<Frame>> = (0..to_add).map(|_| Frame::new()).collect();
        let mut st = self.state.lock();
        st.target_frames = target;
        st.add_frames(fresh);
        let victims = {
            let State {
                policy,
                frames,
                slots,
                map,
                ..
            } = &mut *st;
            policy.resize(target, |v| {
                map.get(&v)
                    .is_some_and(|&i| i != PENDING && clean_evictable(frames, slots, i))
            })
        };
        let mut res = self.evict_pages(&mut st, &victims);
        st.trim_free();
        // Write and evict dirty pages while above the new size.
        while res.is_ok() && st.policy.len() > st.policy.capacity() {
            let victims = {
                let State {
                    policy,
                    frames,
                    slots,
                    map,
                    ..
                } = &mut *st;
                policy.evict_excess(|v| {
                    map.get(&v)
                        .is_some_and(|&i| i != PENDING && unpinned_idle(frames, slots, i))
                })
            };
            if victims.is_empty() {
                break; // pinned or in flight: reclaimed when evicted later
            }
            res = self.evict_pages(&mut st, &victims);
        }
        st.trim_free();
        drop(st);
        self.cond.notify_all();
        res
    }
}
