//! DBACC: the primary-key hash index of one fragment — linear hashing (Litwin) over
//! 64-byte bucket containers in DataMemory pages.
//!
//! Entries are `(hash, row)`; the key itself lives in the row, so lookups take a closure
//! that checks a candidate row's key. The hash is already well mixed, so its bits are
//! used directly.
//!
//! Layout
//! - Buckets `0..n_buckets` (`n_buckets >= MIN_BUCKETS`). Bucket `b`'s primary container
//!   is cache line `b % 512` of directory page `dir[b / 512]` (`PageKind::HashIndex`).
//! - A container slot is one little-endian `u64`: low 32 bits = tag, high 32 = payload.
//!   Tag bits 0..2 are a flag — `00` empty, `01` entry, `10` link — and bits 2..32 are the
//!   entry's hash bits 2..32. The hash's bits 0..2 are not stored: with at least 4 buckets
//!   every entry of bucket `b` has `hash & 3 == b & 3`. The payload is the row id of an
//!   entry, or the overflow container id of a link.
//! - Primary container: 8 slots. Overflow container: 32 bytes, 4 slots, from a
//!   `Slab` (`slab.rs`) of `HashIndex` pages. When a chain continues, the last
//!   slot of a container is a link to the next container.
//!
//! Invariants (asserted on write and on read, verified in full by `check`)
//! - Address: with `level = floor(log2 n_buckets)`, `b = hash mod 2^(level+1)`, or
//!   `hash mod 2^level` when that is `>= n_buckets`. Splitting bucket `n_buckets - 2^level`
//!   moves the entries whose hash has bit `level` set to the new bucket `n_buckets`.
//! - A chain of `c` entries has a fixed shape: entries are packed from the first slot;
//!   every container but the last is full (primary: 7 entries + link, overflow: 3 + link);
//!   the last overflow container holds 2..=4 entries (a lone entry is folded back into
//!   its predecessor's link slot). So a chain of `c` entries uses
//!   `overflow_containers(c) = max(0, ceil((c - 8) / 3))` overflow containers.
//! - Load: `n_buckets` follows `len` one split (or merge) at a time, keeping
//!   `6 <= len / n_buckets <= 6.4` (75–80 % of the 8 primary slots) — no stop-the-world
//!   rehash. Merges that would need a new page are deferred (`remove` never allocates);
//!   splits that cannot get a directory page are deferred too.
//! - Pages: no page while empty; directory pages are exactly `ceil(n_buckets / 512)`;
//!   overflow pages are returned the moment they hold no container, and when the free
//!   overflow containers exceed a page and a quarter the emptiest overflow page is
//!   evacuated (containers moved, links rewritten) so it can be returned.
//!
//! This file: layout, lookup, insert, remove, relocate. Splits, merges, evacuation and
//! `check`: `hash_grow.rs`.

use super::slab::Slab;
use crate::error::{NdbError, codes};
use crate::storage::RowId;
use crate::storage::pool::{PageBox, PageKind, PagePool};

pub(super) const LINE: usize = 64;
pub(super) const PRIMARY_SLOTS: usize = 8;
pub(super) const OVF_SLOTS: usize = 4;
pub(super) const OVF_BYTES: usize = OVF_SLOTS * 8;
pub(super) const BUCKETS_PER_PAGE: u32 = 512;
pub(super) const MIN_BUCKETS: u32 = 4;
/// Largest bucket count (keeps `level <= 30`).
pub(super) const MAX_BUCKETS: u32 = 1 << 31;
pub(super) const FLAG_MASK: u32 = 3;
pub(super) const F_ENTRY: u32 = 1;
pub(super) const F_LINK: u32 = 2;
/// Free overflow containers above which the emptiest overflow page is evacuated.
pub(super) const EVACUATE_FREE: u64 = 1024 + 256;

/// A container: a bucket's primary line or an overflow container.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Cont {
    Primary(u32),
    Overflow(u32),
}

impl Cont {
    #[inline]
    pub(super) fn slots(self) -> usize {
        match self {
            Cont::Primary(_) => PRIMARY_SLOTS,
            Cont::Overflow(_) => OVF_SLOTS,
        }
    }
}

#[inline]
pub(super) fn entry_word(hash: u32, row: RowId) -> u64 {
    (u64::from(row.0) << 32) | u64::from((hash & !FLAG_MASK) | F_ENTRY)
}

#[inline]
pub(super) fn link_word(id: u32) -> u64 {
    (u64::from(id) << 32) | u64::from(F_LINK)
}

#[inline]
pub(super) fn flag(w: u64) -> u32 {
    (w as u32) & FLAG_MASK
}

#[inline]
pub(super) fn payload(w: u64) -> u32 {
    (w >> 32) as u32
}

/// The full hash of an entry word stored in bucket `b`.
#[inline]
pub(super) fn entry_hash(w: u64, b: u32) -> u32 {
    ((w as u32) & !FLAG_MASK) | (b & FLAG_MASK)
}

/// Overflow containers used by a chain of `c` entries.
#[inline]
pub(super) fn overflow_containers(c: usize) -> usize {
    if c <= PRIMARY_SLOTS {
        0
    } else {
        (c - PRIMARY_SLOTS).div_ceil(OVF_SLOTS - 1)
    }
}

/// The primary-key hash index of one fragment (NDB's DBACC).
pub struct HashIndex {
    /// Directory pages: bucket `b`'s primary container is line `b % 512` of `dir[b / 512]`.
    pub(super) dir: Vec<PageBox>,
    /// Overflow containers.
    pub(super) ovf: Slab,
    pub(super) n_buckets: u32,
    /// `floor(log2(n_buckets))`.
    pub(super) level: u32,
    pub(super) len: u64,
    /// Reused buffer for the entries of buckets being split or merged.
    pub(super) scratch: Vec<u64>,
}

impl Default for HashIndex {
    fn default() -> Self {
        HashIndex::new()
    }
}

impl HashIndex {
    /// An empty index; it holds no page until the first insert.
    pub fn new() -> HashIndex {
        HashIndex {
            dir: Vec::new(),
            ovf: Slab::new(PageKind::HashIndex, OVF_BYTES),
            n_buckets: 0,
            level: 0,
            len: 0,
            scratch: Vec::new(),
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pages currently held (directory + overflow).
    pub fn pages(&self) -> u32 {
        self.dir.len() as u32 + self.ovf.pages_held()
    }

    /// Current number of buckets (0 while no page is held).
    pub fn buckets(&self) -> u32 {
        self.n_buckets
    }

    #[inline]
    pub(super) fn bucket_of(&self, hash: u32) -> u32 {
        let b = hash & ((2u32 << self.level) - 1);
        if b < self.n_buckets {
            b
        } else {
            hash & ((1u32 << self.level) - 1)
        }
    }

    #[inline]
    pub(super) fn line(&self, b: u32) -> &[u8; LINE] {
        let page = &self.dir[(b / BUCKETS_PER_PAGE) as usize];
        let (lines, _) = page.0.as_chunks::<LINE>();
        &lines[(b % BUCKETS_PER_PAGE) as usize]
    }

    #[inline]
    pub(super) fn word(&self, c: Cont, s: usize) -> u64 {
        debug_assert!(s < c.slots());
        let bytes: &[u8] = match c {
            Cont::Primary(b) => &self.line(b)[s * 8..s * 8 + 8],
            Cont::Overflow(id) => &self.ovf.slot(id)[s * 8..s * 8 + 8],
        };
        let mut a = [0u8; 8];
        a.copy_from_slice(bytes);
        u64::from_le_bytes(a)
    }

    #[inline]
    pub(super) fn set_word(&mut self, c: Cont, s: usize, w: u64) {
        assert!(s < c.slots(), "hash index: slot {s} out of container {c:?}");
        assert!(
            flag(w) != FLAG_MASK,
            "hash index: invalid slot flag in {w:#x}"
        );
        let bytes: &mut [u8] = match c {
            Cont::Primary(b) => {
                let page = &mut self.dir[(b / BUCKETS_PER_PAGE) as usize];
                let off = (b % BUCKETS_PER_PAGE) as usize * LINE + s * 8;
                &mut page.0[off..off + 8]
            }
            Cont::Overflow(id) => &mut self.ovf.slot_mut(id)[s * 8..s * 8 + 8],
        };
        bytes.copy_from_slice(&w.to_le_bytes());
    }

    /// The container a link slot points to (asserting the link is sane).
    #[inline]
    pub(super) fn follow(&self, w: u64) -> Cont {
        assert!(w as u32 == F_LINK, "hash index: corrupt link {w:#x}");
        Cont::Overflow(payload(w))
    }

    /// Upper bound on the containers of any chain (guards every chain walk).
    #[inline]
    pub(super) fn max_chain(&self) -> u64 {
        self.len / 2 + 2
    }

    /// The first row with this hash for which `is_match` returns true.
    #[inline]
    pub fn find(&self, hash: u32, mut is_match: impl FnMut(RowId) -> bool) -> Option<RowId> {
        if self.n_buckets == 0 {
            return None;
        }
        let tag = u64::from((hash & !FLAG_MASK) | F_ENTRY);
        let b = self.bucket_of(hash);
        let line = self.line(b);
        let mut words = [0u64; PRIMARY_SLOTS];
        for (w, chunk) in words.iter_mut().zip(line.as_chunks::<8>().0) {
            *w = u64::from_le_bytes(*chunk);
        }
        for &w in &words {
            if w & 0xFFFF_FFFF == tag && is_match(RowId(payload(w))) {
                return Some(RowId(payload(w)));
            }
        }
        let last = words[PRIMARY_SLOTS - 1];
        if flag(last) != F_LINK {
            return None;
        }
        let mut c = self.follow(last);
        for _ in 0..self.max_chain() {
            for s in 0..OVF_SLOTS {
                let w = self.word(c, s);
                if w & 0xFFFF_FFFF == tag {
                    if is_match(RowId(payload(w))) {
                        return Some(RowId(payload(w)));
                    }
                } else if flag(w) == F_LINK {
                    c = self.follow(w);
                    break;
                } else if flag(w) != F_ENTRY {
                    return None;
                }
                if s == OVF_SLOTS - 1 {
                    return None;
                }
            }
        }
        panic!("hash index: chain of bucket {b} longer than the index");
    }

    /// Hint that `find(hash, ..)` follows soon: starts loading the bucket's cache line.
    #[inline]
    pub fn prefetch(&self, hash: u32) {
        if self.n_buckets == 0 {
            return;
        }
        let ptr = self.line(self.bucket_of(hash)).as_ptr();
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is only a hint; `ptr` points into a live page, and a
        // prefetch never faults nor reads memory on the program's behalf.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                ptr as *const i8,
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = ptr;
    }

    /// Adds `(hash, row)`. The caller has checked that no row with an equal key exists.
    /// On `Err(625)` (no page for an overflow container or the first directory page) the
    /// index is unchanged.
    pub fn insert(&mut self, pool: &PagePool, hash: u32, row: RowId) -> Result<(), NdbError> {
        if self.n_buckets == 0 {
            let mut page = pool
                .alloc(PageKind::HashIndex)
                .ok_or_else(codes::out_of_hash_index_memory)?;
            page.0.fill(0);
            self.dir.push(page);
            self.n_buckets = MIN_BUCKETS;
            self.level = MIN_BUCKETS.trailing_zeros();
        }
        let b = self.bucket_of(hash);
        if !self.append(pool, b, entry_word(hash, row)) {
            self.release_pages(pool);
            return Err(codes::out_of_hash_index_memory());
        }
        self.len += 1;
        // Catch up at most two steps per insert (splits deferred for lack of pages).
        for _ in 0..2 {
            if self.len * 5 <= u64::from(self.n_buckets) * 32 || !self.split(pool) {
                break;
            }
        }
        self.release_pages(pool);
        Ok(())
    }

    /// Appends an entry word at the end of bucket `b`'s chain. False (and no change) when
    /// a needed overflow container cannot be allocated.
    pub(super) fn append(&mut self, pool: &PagePool, b: u32, w: u64) -> bool {
        let mut c = Cont::Primary(b);
        for _ in 0..=self.max_chain() {
            let n = c.slots();
            let last = self.word(c, n - 1);
            if flag(last) == F_LINK {
                c = self.follow(last);
                continue;
            }
            if let Some(s) = (0..n).find(|&s| self.word(c, s) == 0) {
                self.set_word(c, s, w);
                return true;
            }
            let Some(id) = self.alloc_container(pool) else {
                return false;
            };
            let x = Cont::Overflow(id);
            self.set_word(x, 0, last);
            self.set_word(x, 1, w);
            self.set_word(x, 2, 0);
            self.set_word(x, 3, 0);
            self.set_word(c, n - 1, link_word(id));
            return true;
        }
        panic!("hash index: chain of bucket {b} longer than the index");
    }

    pub(super) fn alloc_container(&mut self, pool: &PagePool) -> Option<u32> {
        if let Some(id) = self.ovf.alloc() {
            return Some(id);
        }
        if self.ovf.grow(pool) {
            self.ovf.alloc()
        } else {
            None
        }
    }

    /// Removes `(hash, row)`; false when absent. Never allocates.
    pub fn remove(&mut self, pool: &PagePool, hash: u32, row: RowId) -> bool {
        if self.n_buckets == 0 {
            return false;
        }
        let b = self.bucket_of(hash);
        let target = entry_word(hash, row);
        // Walk the whole chain: the slot of the entry, the last entry, and the container
        // before the last one.
        let mut found = None;
        let (mut prev, mut c) = (None, Cont::Primary(b));
        let mut last_slot = None;
        'walk: for _ in 0..=self.max_chain() {
            for s in 0..c.slots() {
                let w = self.word(c, s);
                match flag(w) {
                    F_ENTRY => {
                        if w == target {
                            found = Some((c, s));
                        }
                        last_slot = Some(s);
                    }
                    F_LINK => {
                        assert_eq!(
                            s,
                            c.slots() - 1,
                            "hash index: link in the middle of a container"
                        );
                        prev = Some(c);
                        c = self.follow(w);
                        continue 'walk;
                    }
                    _ => break,
                }
            }
            break;
        }
        let Some((fc, fs)) = found else { return false };
        let ls = last_slot.expect("hash index: entry found in a chain without entries");
        let moved = self.word(c, ls);
        if (fc, fs) != (c, ls) {
            self.set_word(fc, fs, moved);
        }
        self.set_word(c, ls, 0);
        if let Cont::Overflow(id) = c {
            assert!(
                ls >= 1,
                "hash index: overflow container held a single entry"
            );
            if ls == 1 {
                // One entry left: fold it into the predecessor's link slot.
                let p = prev.expect("hash index: overflow container without predecessor");
                let lone = self.word(c, 0);
                self.set_word(p, p.slots() - 1, lone);
                self.ovf.free(id);
            }
        }
        self.len -= 1;
        if self.len == 0 {
            self.free_all(pool);
            return true;
        }
        for _ in 0..2 {
            if self.len >= u64::from(self.n_buckets) * 6 || !self.merge(pool) {
                break;
            }
        }
        self.release_pages(pool);
        true
    }

    /// Replaces `(hash, old)` by `(hash, new)` in place (the row moved). False when absent.
    pub fn relocate(&mut self, hash: u32, old: RowId, new: RowId) -> bool {
        if self.n_buckets == 0 {
            return false;
        }
        let target = entry_word(hash, old);
        let mut c = Cont::Primary(self.bucket_of(hash));
        for _ in 0..=self.max_chain() {
            let mut next = None;
            for s in 0..c.slots() {
                let w = self.word(c, s);
                if w == target {
                    self.set_word(c, s, entry_word(hash, new));
                    return true;
                }
                match flag(w) {
                    F_ENTRY => {}
                    F_LINK => next = Some(self.follow(w)),
                    _ => break,
                }
            }
            match next {
                Some(n) => c = n,
                None => return false,
            }
        }
        panic!("hash index: chain longer than the index");
    }

    /// TRUNCATE/DROP: every page back to the pool.
    pub fn free_all(&mut self, pool: &PagePool) {
        for page in self.dir.drain(..) {
            pool.free(PageKind::HashIndex, page);
        }
        self.ovf.free_all(pool);
        self.n_buckets = 0;
        self.level = 0;
        self.len = 0;
        self.scratch = Vec::new();
    }

    /// Calls `f(hash, row)` for every entry.
    pub fn for_each(&self, mut f: impl FnMut(u32, RowId)) {
        for b in 0..self.n_buckets {
            let mut c = Cont::Primary(b);
            for _ in 0..=self.max_chain() {
                let mut next = None;
                for s in 0..c.slots() {
                    let w = self.word(c, s);
                    match flag(w) {
                        F_ENTRY => f(entry_hash(w, b), RowId(payload(w))),
                        F_LINK => next = Some(self.follow(w)),
                        _ => break,
                    }
                }
                match next {
                    Some(x) => c = x,
                    None => break,
                }
            }
        }
    }
}
