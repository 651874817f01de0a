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
//! - A frame is pinned while a [`super::PageRef`] holds a clone of its `Arc`: clones are
//!   made only under the cache lock, so a frame whose strong count is 1 under the lock
//!   has no pin and cannot get one until the lock is released.
//! - The free list is non-empty only while `frames_allocated <= target_frames` (a frame
//!   freed above the target after a shrink is dropped, not listed).

use std::collections::BTreeMap;
use std::sync::Arc;

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
/// order: frame data, then cache state).
pub(super) struct Frame {
    pub data: RwLock<Box<[u8]>>,
}

impl Frame {
    /// `n` zeroed frames. The page buffers are allocated first and the `Arc` headers
    /// (reference counts, the only part of a frame a hit touches: the pin) after them,
    /// so that the headers lie side by side instead of one per 32 KB: a hit then costs
    /// no TLB miss and, on caches of up to some 10^5 pages, no cache miss for the pin.
    pub fn many(n: usize) -> Vec<Arc<Frame>> {
        let buffers: Vec<Box<[u8]>> = (0..n)
            .map(|_| vec![0u8; DISK_PAGE_SIZE].into_boxed_slice())
            .collect();
        buffers
            .into_iter()
            .map(|b| {
                Arc::new(Frame {
                    data: RwLock::new(b),
                })
            })
            .collect()
    }
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
    /// `None`: a frame index whose frame was given back by a shrink.
    pub frames: Vec<Option<Arc<Frame>>>,
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
pub(super) fn clean_evictable(frames: &[Option<Arc<Frame>>], slots: &[Slot], i: u32) -> bool {
    unpinned_idle(frames, slots, i) && slots[i as usize].dirty_seq.is_none()
}

/// Whether frame `i` may be reused after writing its page if dirty: resident, no pin,
/// no I/O in flight.
pub(super) fn unpinned_idle(frames: &[Option<Arc<Frame>>], slots: &[Slot], i: u32) -> bool {
    let s = &slots[i as usize];
    s.status == Status::Resident
        && !s.writing
        && s.write_pins == 0
        && frames[i as usize]
            .as_ref()
            .is_some_and(|f| Arc::strong_count(f) == 1)
}

impl State {
    pub fn new(policy: PageCachePolicy, frames: usize) -> State {
        State {
            policy,
            frames: Frame::many(frames).into_iter().map(Some).collect(),
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
            self.frames[i as usize] = None;
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
            self.frames[i as usize] = None;
            self.frames_allocated -= 1;
            self.vacant.push(i);
        }
    }

    /// Adds `new` frames (allocated by the caller outside the lock) to the free list.
    pub fn add_frames(&mut self, new: Vec<Arc<Frame>>) {
        for f in new {
            let i = match self.vacant.pop() {
                Some(i) => {
                    self.frames[i as usize] = Some(f);
                    i
                }
                None => {
                    self.frames.push(Some(f));
                    self.slots.push(Slot::free());
                    (self.frames.len() - 1) as u32
                }
            };
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
        assert_eq!(self.frames.len(), self.slots.len());
        let allocated = self.frames.iter().filter(|f| f.is_some()).count();
        assert_eq!(allocated, self.frames_allocated);
        assert!(self.free.is_empty() || self.frames_allocated <= self.target_frames);
        for &i in &self.free {
            assert_eq!(self.slots[i as usize].status, Status::Free);
            assert!(self.frames[i as usize].is_some());
        }
        for &i in &self.vacant {
            assert!(self.frames[i as usize].is_none());
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
