//! Write-back: the write-ahead-logging rule, the cleaner (`clean_step` and its
//! background thread) and the checkpoint (`flush_all`).
//!
//! Writing a dirty page is three steps:
//! 1. *claim* (under the cache lock): the page must be resident, dirty, not already
//!    being written and without `Write`/`Format` pins; it is marked `writing`, and its
//!    LSN and change version are taken. While `writing`, new `Write`/`Format` requests
//!    for the page wait (`Read` requests proceed), so the bytes cannot change.
//! 2. *write* (no cache lock): `WalSync::sync_to(lsn)` unless the LSN is known durable
//!    (`log_waits` counts the syncs that had to wait); then, under the frame's exclusive
//!    lock, the header is sealed (kind kept, `Data` for an unformatted page; address and
//!    LSN set; CRC-32C), and under the downgraded shared lock the page is written.
//! 3. *finish* (under the cache lock): `writing` cleared; on success the page is clean
//!    if its version did not move; on failure it stays dirty, bytes intact.
//!
//! Cleaning order: cold pages (LIRS's resident cold queue: the next victims) before hot
//! ones, as NDB's PGMAN cleans near the bottom of the LIRS stack; within each, by the
//! time a page became dirty (its dirty sequence number), oldest first — deterministic,
//! and close to NDB's preference for low LSNs (least undo log to force). Pages busy at the time are skipped by `clean_step` and waited for by
//! `flush_all`, which then syncs (`sync_data`) every file it wrote to: the checkpoint
//! is durable when it returns.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLockWriteGuard};

use super::frame::{Frame, State, Status};
use super::stats::IoCounters;
use super::{Inner, PageAddr};
use crate::disk::Lsn;
use crate::disk::io::DiskFile;
use crate::disk::page::{PageHeader, PageKind, header, seal};
use crate::error::{Result, codes};

/// A page claimed for writing.
pub(super) struct Claim<'a> {
    i: u32,
    /// Pinned until `finish` (the claim counts as a pin, as a `PageRef`).
    frame: &'a Frame,
    file: Arc<dyn DiskFile>,
    addr: PageAddr,
    lsn: Lsn,
    version: u64,
}

/// Why a page is written (which counter, what happens to the frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WriteKind {
    /// The cleaner: `pages_written`.
    Clean,
    /// A checkpoint: `pages_written_lcp`.
    Lcp,
    /// A victim whose frame is reused: `pages_written`, then the frame is freed.
    Evict,
}

impl Inner {
    /// Step 1: claims frame `i` for writing if it is dirty and idle.
    pub(super) fn claim(&self, st: &mut State, i: u32) -> Option<Claim<'_>> {
        let s = &st.slots[i as usize];
        if s.status != Status::Resident || s.dirty_seq.is_none() || s.writing || s.write_pins > 0 {
            return None;
        }
        let file = st.files.get(&s.addr.file_no)?.clone();
        if !st.allocated[i as usize] {
            return None;
        }
        let frame = self.arena.get(i);
        frame.pin_locked();
        let c = Claim {
            i,
            frame,
            file,
            addr: s.addr,
            lsn: s.lsn,
            version: s.version,
        };
        st.slots[i as usize].writing = true;
        Some(c)
    }

    /// Step 2: WAL, seal, write. No cache lock held.
    pub(super) fn write_claimed(&self, c: &Claim) -> Result<()> {
        if c.lsn > self.durable_lsn.load(Ordering::Acquire) {
            IoCounters::bump(&self.io.log_waits);
            self.wal.sync_to(c.lsn)?;
            self.durable_lsn.fetch_max(c.lsn, Ordering::AcqRel);
        }
        let mut data = c.frame.data.write();
        let extra = u64::from_le_bytes(data[24..32].try_into().unwrap_or([0; 8]));
        let kind = match header(&data) {
            Some(h) if h.kind != PageKind::Unformatted => h.kind,
            _ => PageKind::Data,
        };
        seal(
            &mut data,
            &PageHeader {
                kind,
                file_no: c.addr.file_no,
                page_no: c.addr.page_no,
                lsn: c.lsn,
                extra,
            },
        );
        let data = RwLockWriteGuard::downgrade(data);
        c.file.write_at(&data, c.addr.offset_bytes()).map_err(|e| {
            codes::file_system_error(format_args!(
                "write of disk file {} page {}: {e}",
                c.addr.file_no, c.addr.page_no
            ))
        })
    }

    /// Step 3: records the outcome of a write (and frees an evicted frame).
    pub(super) fn finish(
        &self,
        st: &mut State,
        c: Claim<'_>,
        res: Result<()>,
        kind: WriteKind,
    ) -> Result<()> {
        let i = c.i;
        c.frame.unpin();
        let s = &mut st.slots[i as usize];
        assert!(s.writing, "finishing a write that was not claimed");
        s.writing = false;
        let unchanged = s.version == c.version;
        match &res {
            Ok(()) => {
                if unchanged {
                    st.mark_clean(i);
                }
                let counter = match kind {
                    WriteKind::Lcp => &self.io.pages_written_lcp,
                    WriteKind::Clean | WriteKind::Evict => &self.io.pages_written,
                };
                IoCounters::bump(counter);
            }
            Err(_) => IoCounters::bump(&self.io.write_errors),
        }
        if kind == WriteKind::Evict {
            let page = st.slots[i as usize].page;
            if res.is_ok() && unchanged {
                st.release_frame(i);
            } else {
                // Back into the policy (cold, no eviction), still dirty.
                st.slots[i as usize].status = Status::Resident;
                st.policy.access(page, true, |_| false);
            }
        }
        res
    }

    /// Gives back a claim that was not written.
    fn abandon(&self, st: &mut State, c: Claim) {
        st.slots[c.i as usize].writing = false;
        c.frame.unpin();
    }

    /// Writes the claims in order; on the first error the rest are given back.
    fn write_all(
        &self,
        st: &mut MutexGuard<'_, State>,
        claims: Vec<Claim>,
        kind: WriteKind,
        max_lsn: &mut Lsn,
    ) -> Result<usize> {
        let mut written = 0;
        let mut it = claims.into_iter();
        let mut res = Ok(());
        for c in it.by_ref() {
            let lsn = c.lsn;
            let r = MutexGuard::unlocked(st, || self.write_claimed(&c));
            res = self.finish(st, c, r, kind);
            if res.is_err() {
                break;
            }
            written += 1;
            *max_lsn = (*max_lsn).max(lsn);
        }
        for c in it {
            self.abandon(st, c);
        }
        self.cond.notify_all();
        res.map(|()| written)
    }

    pub(super) fn clean_step(&self, max_pages: usize) -> Result<usize> {
        let mut st = self.state.lock();
        // Cold pages first (the next victims: a dirty victim is skipped by misses and
        // would keep its frame), then hot ones (to let the undo log go); oldest first
        // within each.
        let (cold, hot): (Vec<u32>, Vec<u32>) = st
            .dirty
            .values()
            .copied()
            .partition(|&i| !st.policy.is_hot(st.slots[i as usize].page));
        let mut claims = Vec::new();
        for i in cold.into_iter().chain(hot) {
            if claims.len() >= max_pages {
                break;
            }
            if let Some(c) = self.claim(&mut st, i) {
                claims.push(c);
            }
        }
        let mut max_lsn = 0;
        self.write_all(&mut st, claims, WriteKind::Clean, &mut max_lsn)
    }

    pub(super) fn flush_all(&self) -> Result<Lsn> {
        self.flush_dirty_before(u64::MAX)
    }

    /// Writes (and syncs) every page that became dirty before dirty sequence `mark`
    /// and still is (all dirty pages now when `mark` is later).
    pub(super) fn flush_dirty_before(&self, mark: u64) -> Result<Lsn> {
        let mut st = self.state.lock();
        let end_seq = st.next_dirty_seq.min(mark);
        let mut max_lsn = 0;
        let mut written_files: BTreeMap<u32, Arc<dyn DiskFile>> = BTreeMap::new();
        let mut written: Vec<(u32, PageAddr)> = Vec::new();
        loop {
            let dirty: Vec<u32> = st.dirty.range(..end_seq).map(|(_, &i)| i).collect();
            if dirty.is_empty() {
                break;
            }
            let claims: Vec<Claim> = dirty
                .into_iter()
                .filter_map(|i| self.claim(&mut st, i))
                .collect();
            if claims.is_empty() {
                // Pinned for writing or being written by another thread.
                self.cond.wait(&mut st);
                continue;
            }
            for c in &claims {
                written_files
                    .entry(c.addr.file_no)
                    .or_insert_with(|| c.file.clone());
                written.push((c.i, c.addr));
            }
            self.write_all(&mut st, claims, WriteKind::Lcp, &mut max_lsn)?;
        }
        drop(st);
        // The checkpoint is durable before the undo log is released up to `max_lsn`.
        for (file_no, f) in written_files {
            if let Err(e) = f.sync_data() {
                // The written pages may not be on disk: dirty again those still cached
                // so that the next checkpoint writes them again.
                let mut st = self.state.lock();
                for &(i, addr) in &written {
                    let s = &st.slots[i as usize];
                    if s.status == Status::Resident && s.addr == addr {
                        let lsn = s.lsn;
                        st.mark_dirty(i, lsn);
                    }
                }
                return Err(codes::file_system_error(format_args!(
                    "sync of disk file {file_no}: {e}"
                )));
            }
        }
        Ok(max_lsn)
    }
}

/// The background cleaner thread.
pub(super) struct CleanerThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl CleanerThread {
    pub fn start(inner: Arc<Inner>, interval: Duration, batch: usize) -> Result<CleanerThread> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("pgman-cleaner".into())
            .spawn(move || {
                let (flag, cv) = &*stop2;
                loop {
                    if inner.clean_step(batch).is_err() {
                        IoCounters::bump(&inner.io.cleaner_errors);
                    }
                    let mut stopped = flag.lock();
                    if !*stopped {
                        cv.wait_for(&mut stopped, interval);
                    }
                    if *stopped {
                        return;
                    }
                }
            })
            .map_err(|e| codes::internal(format_args!("cannot start the page cleaner: {e}")))?;
        Ok(CleanerThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops and joins the thread.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for CleanerThread {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
