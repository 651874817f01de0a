//! Frames and the cache-wide state: which page each frame holds, its status, dirtiness
//! and LSN, the free list, the dirty list in cleaning order, and the registered files.
//!
//! Invariants (checked by [`State::check`]):
//! - `map[page] == i` ⇔ `slots[i].page == page` and `slots[i].status != Free`; a page
//!   waiting for a frame maps to [`PENDING`] and has no slot.
//! - Pages in the policy = `Loading` + `Resident` slots + pending pages. `Evicting`
//!   slots (a dirty victim being written before its frame is reused) are no longer in
//!   the policy but still in `map`, so requests for them wait.
//! - `dirty[seq] == i` ⇔ `slots[i].dirty_seq == Some(seq)`.
//! - Frame headers live in a [`FrameArena`] owned by the cache and are never freed
//!   before it (a frame index names the same header for the cache's life); a frame
//!   index `i` has a page buffer ⇔ `allocated[i]`. A frame is pinned while
//!   [`Frame::pins`] is non-zero: pins are taken only under the cache lock, so a frame
//!   with no pin under the lock cannot get one until the lock is released, and nobody
//!   holds its data lock (every data access is made through a pin or a write claim,
//!   which is a pin too).
//! - The free list is non-empty only while `frames_allocated <= target_frames` (a frame
//!   freed above the target after a shrink gives its buffer back and becomes vacant).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

use super::PageAddr;
use crate::disk::Lsn;
use crate::disk::io::DiskFile;
use crate::disk::page::DISK_PAGE_SIZE;
use crate::disk::policy::{PageCachePolicy, PageId};

use super::stats::LockedCounters;

/// `map` value of a page accepted by the policy that waits for a free frame.
pub(super) const PENDING: u32 = u32::MAX;

/// One 32 KB page frame. The data lock is taken only without the cache lock held (lock
/// order: frame data, then cache state), except `try_write` on a frame without pins
/// (never contended, see the module invariants) to install or give back its buffer.
///
/// Pin counting (the hit path's only atomic besides the cache mutex): `taken` counts
/// the pins ever taken and is changed only under the cache lock (a plain load and
/// store, no read-modify-write: the lock orders its writers); `released` counts the
/// pins ever released, one `fetch_add` per unpin, made without the cache lock. Pins
/// held = `taken - released` (wrapping), read under the cache lock.
///
/// Memory ordering: the page bytes are only accessed under `data`, so the RwLock orders
/// a reader's last access before any later writer (a reused frame); the counters carry
/// no data. The one ordering they carry is the unpin/wait handshake with
/// `Inner::frame_waiters` (a store-load pattern: the unpin's `released` increment then
/// its load of `frame_waiters`, against the waiter's increment of `frame_waiters` then
/// its load of `released`). All four are `SeqCst` operations, so they lie in one total
/// order: if the unpin's load misses the waiter's increment, it precedes it, hence the
/// unpin's increment precedes the waiter's load of `released`, which then sees the pin
/// gone. No fence is needed on either side (on x86-64 a `SeqCst` load is a plain load
/// and the increment one locked instruction: the old `Arc` pin took two locked
/// instructions and a fence).
pub(super) struct Frame {
    pub data: RwLock<Box<[u8]>>,
    taken: AtomicU32,
    released: AtomicU32,
}

impl Frame {
    fn empty() -> Frame {
        Frame {
            data: RwLock::new(Box::default()),
            taken: AtomicU32::new(0),
            released: AtomicU32::new(0),
        }
    }

    /// Takes a pin. Only under the cache lock.
    #[inline]
    pub fn pin_locked(&self) {
        let t = self.taken.load(Ordering::Relaxed);
        self.taken.store(t.wrapping_add(1), Ordering::Relaxed);
    }

    /// Gives back a pin taken by [`Frame::pin_locked`] that was never handed out. Only
    /// under the cache lock.
    pub fn unpin_locked(&self) {
        let t = self.taken.load(Ordering::Relaxed);
        self.taken.store(t.wrapping_sub(1), Ordering::Relaxed);
    }

    /// Releases a pin (no lock needed). See the type's docs for the ordering.
    #[inline]
    pub fn unpin(&self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }

    /// Pins held. Exact only under the cache lock (no pin can be taken meanwhile).
    #[inline]
    pub fn pins(&self) -> u32 {
        self.taken
            .load(Ordering::Relaxed)
            .wrapping_sub(self.released.load(Ordering::SeqCst))
    }
}

/// Frames in the first chunk of the arena; chunk `j` holds `ARENA_FIRST << j` frames.
const ARENA_FIRST: usize = 128;
/// Chunks: room for `ARENA_FIRST * (2^32 - 1)` frames, more than any frame index.
const ARENA_CHUNKS: usize = 32;

/// The frame headers, in chunks of doubling size allocated on demand and never freed
/// before the arena: a `&Frame` taken from it is valid as long as the arena, which
/// lets a pin be a plain reference (no reference count). Page buffers come and go
/// inside the headers (a shrink gives them back). Headers lie side by side (32 bytes
/// each), so a hit touches no page buffer and, on caches of up to some 10^5 pages, no
/// cold cache line for the pin. Chunks are allocated whole: at most twice the headers
/// in use (0.2% of the frames' bytes; 1 GB of headers at the 1 TB maximum).
pub(super) struct FrameArena {
    chunks: Box<[OnceLock<Box<[Frame]>>]>,
}

/// (chunk, offset) of frame index `i`.
#[inline]
fn locate(i: u32) -> (usize, usize) {
    let q = i as usize / ARENA_FIRST + 1;
    let j = (usize::BITS - 1 - q.leading_zeros()) as usize;
    (j, i as usize - ARENA_FIRST * ((1 << j) - 1))
}

impl FrameArena {
    pub fn new() -> FrameArena {
        FrameArena {
            chunks: (0..ARENA_CHUNKS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The header of frame `i` (allocating its chunk on first use).
    #[inline]
    pub fn get(&self, i: u32) -> &Frame {
        let (j, k) = locate(i);
        match self.chunks[j].get() {
            Some(c) => &c[k],
            None => &self.init_chunk(j)[k],
        }
    }

    #[cold]
    fn init_chunk(&self, j: usize) -> &[Frame] {
        self.chunks[j].get_or_init(|| (0..ARENA_FIRST << j).map(|_| Frame::empty()).collect())
    }

    /// Installs `buffer` in frame `i`, which has no pin and no buffer.
    pub fn install(&self, i: u32, buffer: Box<[u8]>) {
        let f = self.get(i);
        assert_eq!(f.pins(), 0, "installing a buffer in a pinned frame");
        let Some(mut d) = f.data.try_write() else {
            panic!("frame {i} without pins is locked");
        };
        assert!(d.is_empty(), "frame {i} already has a buffer");
        *d = buffer;
    }

    /// Takes the buffer of frame `i` (no pin) back, to be freed.
    pub fn take_buffer(&self, i: u32) -> Box<[u8]> {
        let f = self.get(i);
        assert_eq!(f.pins(), 0, "freeing the buffer of a pinned frame");
        let Some(mut d) = f.data.try_write() else {
            panic!("frame {i} without pins is locked");
        };
        std::mem::take(&mut *d)
    }
}

/// `n` zeroed page buffers (allocated without the cache lock).
pub(super) fn buffers(n: usize) -> Vec<Box<[u8]>> {
    (0..n)
        .map(|_| vec![0u8; DISK_PAGE_SIZE].into_boxed_slice())
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
    /// On the free list or without a frame.
    Free,
    /// Being read (or zeroed) by the thread that missed.
    Loading,
    /// Valid contents.
    Resident,
    /// A dirty victim being written before its frame is reused (not in the policy).
    Evicting,
}

/// Per-frame metadata, under the cache lock.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub page: PageId,
    pub addr: PageAddr,
    pub status: Status,
    /// `Some(seq)`: dirty since dirty sequence number `seq` (its key in `State::dirty`).
    pub dirty_seq: Option<u64>,
    /// LSN of the last change (from the header on read, raised by `set_lsn_dirty`).
    pub lsn: Lsn,
    /// Bumped by every `set_lsn_dirty`: a write-back clears the dirty flag only if the
    /// page did not change while it was written.
    pub version: u64,
    /// A write-back of this frame is in flight.
    pub writing: bool,
    /// Pins with intent Write or Format (NDB's BUSY): no write-back while non-zero.
    pub write_pins: u32,
}

impl Slot {
    pub fn free() -> Slot {
        Slot {
            page: 0,
            addr: PageAddr {
                file_no: 0,
                page_no: 0,
            },
            status: Status::Free,
            dirty_seq: None,
            lsn: 0,
            version: 0,
            writing: false,
            write_pins: 0,
        }
    }
}

/// Everything under the cache-wide lock.
pub(super) struct State {
    pub policy: PageCachePolicy,
    /// The frame headers (shared with `Inner`, which pins without the lock).
    pub arena: Arc<FrameArena>,
    /// `false`: a frame index whose buffer was given back by a shrink.
    pub allocated: Vec<bool>,
    pub slots: Vec<Slot>,
    pub map: hashbrown::HashMap<PageId, u32>,
    pub free: Vec<u32>,
    /// Frame indexes without a frame (reused when growing).
    pub vacant: Vec<u32>,
    pub frames_allocated: usize,
    /// DiskPageBufferMemory in frames.
    pub target_frames: usize,
    /// Dirty frames by the order in which they became dirty (cleaning order).
    pub dirty: BTreeMap<u64, u32>,
    pub next_dirty_seq: u64,
    pub files: BTreeMap<u32, Arc<dyn DiskFile>>,
    pub counters: LockedCounters,
    /// Slots `Resident` or `Evicting` (kept up to date by `set_resident` and
    /// `release_frame`).
    resident: usize,
}

/// Whether the page in frame `i` may be dropped now without a write: clean, no pin, no
/// I/O in flight.
pub(super) fn clean_evictable(frames: &FrameArena, slots: &[Slot], i: u32) -> bool {
    unpinned_idle(frames, slots, i) && slots[i as usize].dirty_seq.is_none()
}

/// Whether frame `i` may be reused after writing its page if dirty: resident, no pin,
/// no I/O in flight.
pub(super) fn unpinned_idle(frames: &FrameArena, slots: &[Slot], i: u32) -> bool {
    let s = &slots[i as usize];
    s.status == Status::Resident && !s.writing && s.write_pins == 0 && frames.get(i).pins() == 0
}

impl State {
    /// A state over `arena` (empty) with `frames` frames.
    pub fn new(policy: PageCachePolicy, arena: Arc<FrameArena>, frames: usize) -> State {
        for (i, b) in buffers(frames).into_iter().enumerate() {
            arena.install(i as u32, b);
        }
        State {
            policy,
            arena,
            allocated: vec![true; frames],
            slots: vec![Slot::free(); frames],
            map: hashbrown::HashMap::with_capacity(frames),
            free: (0..frames as u32).rev().collect(),
            vacant: Vec::new(),
            frames_allocated: frames,
            target_frames: frames,
            dirty: BTreeMap::new(),
            next_dirty_seq: 0,
            files: BTreeMap::new(),
            counters: LockedCounters::default(),
            resident: 0,
        }
    }

    /// The frame index of a mapped page (not pending).
    pub fn frame_of(&self, page: PageId) -> Option<u32> {
        self.map.get(&page).copied().filter(|&i| i != PENDING)
    }

    /// Marks frame `i` dirty (if clean) and records the change's LSN.
    pub fn mark_dirty(&mut self, i: u32, lsn: Lsn) {
        let seq = self.next_dirty_seq;
        let s = &mut self.slots[i as usize];
        assert_eq!(
            s.status,
            Status::Resident,
            "dirtying a page that is not resident"
        );
        s.lsn = s.lsn.max(lsn);
        s.version += 1;
        if s.dirty_seq.is_none() {
            s.dirty_seq = Some(seq);
            self.dirty.insert(seq, i);
            self.next_dirty_seq += 1;
        }
    }

    /// Restart undo: frame `i` is dirty with exactly LSN `lsn` (lower than before: the
    /// page is back at its state before a change).
    pub fn mark_dirty_lsn_exact(&mut self, i: u32, lsn: Lsn) {
        self.mark_dirty(i, lsn);
        self.slots[i as usize].lsn = lsn;
    }

    /// Clears the dirty flag of frame `i`.
    pub fn mark_clean(&mut self, i: u32) {
        if let Some(seq) = self.slots[i as usize].dirty_seq.take() {
            let was = self.dirty.remove(&seq);
            assert_eq!(was, Some(i), "dirty list out of step");
        }
    }

    /// Unmaps the page of frame `i` (already out of the policy) and frees the frame:
    /// back to the free list, or given back if the cache is above its target size.
    pub fn release_frame(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        if matches!(s.status, Status::Resident | Status::Evicting) {
            self.resident -= 1;
        }
        if s.status != Status::Free {
            let page = s.page;
            let was = self.map.remove(&page);
            assert_eq!(was, Some(i), "page map out of step");
        }
        self.mark_clean(i);
        self.slots[i as usize] = Slot::free();
        if self.frames_allocated > self.target_frames {
            drop(self.arena.take_buffer(i));
            self.allocated[i as usize] = false;
            self.frames_allocated -= 1;
            self.vacant.push(i);
        } else {
            self.free.push(i);
        }
    }

    /// Gives back free frames while above the target size.
    pub fn trim_free(&mut self) {
        while self.frames_allocated > self.target_frames {
            let Some(i) = self.free.pop() else { break };
            drop(self.arena.take_buffer(i));
            self.allocated[i as usize] = false;
            self.frames_allocated -= 1;
            self.vacant.push(i);
        }
    }

    /// Adds frames with the page buffers `new` (allocated by the caller outside the
    /// lock) to the free list.
    pub fn add_frames(&mut self, new: Vec<Box<[u8]>>) {
        for b in new {
            let i = match self.vacant.pop() {
                Some(i) => i,
                None => {
                    self.allocated.push(false);
                    self.slots.push(Slot::free());
                    (self.slots.len() - 1) as u32
                }
            };
            self.arena.install(i, b);
            self.allocated[i as usize] = true;
            self.frames_allocated += 1;
            self.free.push(i);
        }
    }

    /// A page read (or zeroed) into frame `i` is now valid, with LSN `lsn`.
    pub fn set_resident(&mut self, i: u32, lsn: Lsn) {
        let s = &mut self.slots[i as usize];
        assert_eq!(s.status, Status::Loading, "page-in of a slot not loading");
        s.status = Status::Resident;
        s.lsn = lsn;
        self.resident += 1;
    }

    /// Resident (or evicting) pages.
    pub fn resident_pages(&self) -> usize {
        self.resident
    }

    /// Verifies the invariants above (O(frames); tests).
    pub fn check(&self) {
        assert_eq!(self.allocated.len(), self.slots.len());
        let allocated = self.allocated.iter().filter(|&&a| a).count();
        assert_eq!(allocated, self.frames_allocated);
        assert!(self.free.is_empty() || self.frames_allocated <= self.target_frames);
        for &i in &self.free {
            assert_eq!(self.slots[i as usize].status, Status::Free);
            assert!(self.allocated[i as usize]);
            assert_eq!(self.arena.get(i).pins(), 0, "a free frame is pinned");
        }
        for &i in &self.vacant {
            assert!(!self.allocated[i as usize]);
            let empty = self.arena.get(i).data.try_read().map(|d| d.is_empty());
            assert_eq!(empty, Some(true), "a vacant frame keeps a buffer");
        }
        let mut in_policy = 0;
        for (i, s) in self.slots.iter().enumerate() {
            if s.status == Status::Free {
                assert!(s.dirty_seq.is_none());
                continue;
            }
            assert_eq!(self.map.get(&s.page), Some(&(i as u32)));
            if let Some(seq) = s.dirty_seq {
                assert_eq!(self.dirty.get(&seq), Some(&(i as u32)));
            }
            if s.status != Status::Evicting {
                in_policy += 1;
                assert!(
                    self.policy.contains(s.page),
                    "resident page unknown to the policy"
                );
            }
        }
        let resident = self
            .slots
            .iter()
            .filter(|s| matches!(s.status, Status::Resident | Status::Evicting))
            .count();
        assert_eq!(resident, self.resident, "resident count out of step");
        let pending = self.map.values().filter(|&&i| i == PENDING).count();
        assert_eq!(self.policy.len(), in_policy + pending);
        assert_eq!(
            self.dirty.len(),
            self.slots.iter().filter(|s| s.dirty_seq.is_some()).count()
        );
    }
}
