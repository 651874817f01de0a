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
//!   [`Slab`](super::slab::Slab) of `HashIndex` pages. When a chain continues, the last
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

use super::slab::Slab;
use crate::error::{NdbError, codes};
use crate::storage::RowId;
use crate::storage::pool::{Page, PageKind, PagePool};

const LINE: usize = 64;
const PRIMARY_SLOTS: usize = 8;
const OVF_SLOTS: usize = 4;
const OVF_BYTES: usize = OVF_SLOTS * 8;
const BUCKETS_PER_PAGE: u32 = 512;
const MIN_BUCKETS: u32 = 4;
/// Largest bucket count (keeps `level <= 30`).
const MAX_BUCKETS: u32 = 1 << 31;
const FLAG_MASK: u32 = 3;
const F_ENTRY: u32 = 1;
const F_LINK: u32 = 2;
/// Free overflow containers above which the emptiest overflow page is evacuated.
const EVACUATE_FREE: u64 = 1024 + 256;

/// A container: a bucket's primary line or an overflow container.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cont {
    Primary(u32),
    Overflow(u32),
}

impl Cont {
    #[inline]
    fn slots(self) -> usize {
        match self {
            Cont::Primary(_) => PRIMARY_SLOTS,
            Cont::Overflow(_) => OVF_SLOTS,
        }
    }
}

#[inline]
fn entry_word(hash: u32, row: RowId) -> u64 {
    (u64::from(row.0) << 32) | u64::from((hash & !FLAG_MASK) | F_ENTRY)
}

#[inline]
fn link_word(id: u32) -> u64 {
    (u64::from(id) << 32) | u64::from(F_LINK)
}

#[inline]
fn flag(w: u64) -> u32 {
    (w as u32) & FLAG_MASK
}

#[inline]
fn payload(w: u64) -> u32 {
    (w >> 32) as u32
}

/// The full hash of an entry word stored in bucket `b`.
#[inline]
fn entry_hash(w: u64, b: u32) -> u32 {
    ((w as u32) & !FLAG_MASK) | (b & FLAG_MASK)
}

/// Overflow containers used by a chain of `c` entries.
#[inline]
fn overflow_containers(c: usize) -> usize {
    if c <= PRIMARY_SLOTS {
        0
    } else {
        (c - PRIMARY_SLOTS).div_ceil(OVF_SLOTS - 1)
    }
}

/// The primary-key hash index of one fragment (NDB's DBACC).
pub struct HashIndex {
    /// Directory pages: bucket `b`'s primary container is line `b % 512` of `dir[b / 512]`.
    dir: Vec<Box<Page>>,
    /// Overflow containers.
    ovf: Slab,
    n_buckets: u32,
    /// `floor(log2(n_buckets))`.
    level: u32,
    len: u64,
    /// Reused buffer for the entries of buckets being split or merged.
    scratch: Vec<u64>,
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
    fn bucket_of(&self, hash: u32) -> u32 {
        let b = hash & ((2u32 << self.level) - 1);
        if b < self.n_buckets {
            b
        } else {
            hash & ((1u32 << self.level) - 1)
        }
    }

    #[inline]
    fn line(&self, b: u32) -> &[u8; LINE] {
        let page = &self.dir[(b / BUCKETS_PER_PAGE) as usize];
        let (lines, _) = page.0.as_chunks::<LINE>();
        &lines[(b % BUCKETS_PER_PAGE) as usize]
    }

    #[inline]
    fn word(&self, c: Cont, s: usize) -> u64 {
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
    fn set_word(&mut self, c: Cont, s: usize, w: u64) {
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
    fn follow(&self, w: u64) -> Cont {
        assert!(w as u32 == F_LINK, "hash index: corrupt link {w:#x}");
        Cont::Overflow(payload(w))
    }

    /// Upper bound on the containers of any chain (guards every chain walk).
    #[inline]
    fn max_chain(&self) -> u64 {
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
    fn append(&mut self, pool: &PagePool, b: u32, w: u64) -> bool {
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

    fn alloc_container(&mut self, pool: &PagePool) -> Option<u32> {
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

    /// Moves every entry of bucket `b` into `scratch` (appending), frees its overflow
    /// containers (their pages stay held) and clears its primary container.
    fn drain(&mut self, b: u32) {
        let mut c = Cont::Primary(b);
        for _ in 0..=self.max_chain() {
            let mut next = None;
            for s in 0..c.slots() {
                let w = self.word(c, s);
                match flag(w) {
                    F_ENTRY => {
                        debug_assert_eq!(self.bucket_of(entry_hash(w, b)), b);
                        self.scratch.push(w);
                    }
                    F_LINK => next = Some(self.follow(w)),
                    _ => break,
                }
            }
            match c {
                Cont::Primary(_) => (0..PRIMARY_SLOTS).for_each(|s| self.set_word(c, s, 0)),
                Cont::Overflow(id) => self.ovf.free(id),
            }
            match next {
                Some(n) => c = n,
                None => return,
            }
        }
        panic!("hash index: chain of bucket {b} longer than the index");
    }

    /// Writes `scratch[from..to]` as the chain of the (empty) bucket `b`. The overflow
    /// containers must be available in pages already held.
    fn write_chain(&mut self, b: u32, from: usize, to: usize) {
        let n = to - from;
        let mut c = Cont::Primary(b);
        if n <= PRIMARY_SLOTS {
            for i in 0..n {
                self.set_word(c, i, self.scratch[from + i]);
            }
            return;
        }
        let mut i = from;
        for s in 0..PRIMARY_SLOTS - 1 {
            self.set_word(c, s, self.scratch[i]);
            i += 1;
        }
        for _ in 0..n {
            let id = self
                .ovf
                .alloc()
                .expect("hash index: overflow containers were counted");
            self.set_word(c, c.slots() - 1, link_word(id));
            c = Cont::Overflow(id);
            let rest = to - i;
            let take = if rest > OVF_SLOTS {
                OVF_SLOTS - 1
            } else {
                rest
            };
            for s in 0..OVF_SLOTS {
                let w = if s < take { self.scratch[i + s] } else { 0 };
                self.set_word(c, s, w);
            }
            i += take;
            if i == to {
                return;
            }
        }
        unreachable!("hash index: chain writer did not terminate");
    }

    /// One linear-hashing split: bucket `n_buckets - 2^level` into itself and the new
    /// bucket `n_buckets`. False (and no change) when it cannot be done now.
    fn split(&mut self, pool: &PagePool) -> bool {
        if self.n_buckets >= MAX_BUCKETS {
            return false;
        }
        let half = 1u32 << self.level;
        let p = self.n_buckets - half;
        let q = self.n_buckets;
        if q % BUCKETS_PER_PAGE == 0 {
            let Some(mut page) = pool.alloc(PageKind::HashIndex) else {
                return false;
            };
            page.0.fill(0);
            self.dir.push(page);
        }
        assert_eq!(
            self.dir.len() as u32,
            q / BUCKETS_PER_PAGE + 1,
            "hash index: directory size"
        );
        (0..PRIMARY_SLOTS).for_each(|s| self.set_word(Cont::Primary(q), s, 0));
        self.scratch.clear();
        self.drain(p);
        // Partition: entries staying in p first, then those moving to q.
        let bit = u64::from(half);
        let mut k = 0;
        for i in 0..self.scratch.len() {
            if self.scratch[i] & bit == 0 {
                self.scratch.swap(i, k);
                k += 1;
            }
        }
        let n = self.scratch.len();
        // overflow_containers is superadditive, so the containers drained suffice.
        self.write_chain(p, 0, k);
        self.write_chain(q, k, n);
        self.n_buckets += 1;
        if self.n_buckets == 2 * half {
            self.level += 1;
        }
        true
    }

    /// One linear-hashing merge: the last bucket back into its buddy. False (and no
    /// change) when it would need an overflow page that is not held.
    fn merge(&mut self, pool: &PagePool) -> bool {
        if self.n_buckets <= MIN_BUCKETS {
            return false;
        }
        let q = self.n_buckets - 1;
        let new_level = 31 - q.leading_zeros();
        let p = q - (1u32 << new_level);
        let (a, c) = (self.chain_len(p), self.chain_len(q));
        let extra = overflow_containers(a + c) as u64;
        let have = (overflow_containers(a) + overflow_containers(c)) as u64 + self.ovf.free_slots();
        if extra > have {
            return false;
        }
        self.scratch.clear();
        self.drain(p);
        self.drain(q);
        let n = self.scratch.len();
        self.write_chain(p, 0, n);
        self.n_buckets = q;
        self.level = new_level;
        if q % BUCKETS_PER_PAGE == 0 {
            let page = self
                .dir
                .pop()
                .expect("hash index: directory page of the merged bucket");
            pool.free(PageKind::HashIndex, page);
        }
        true
    }

    fn chain_len(&self, b: u32) -> usize {
        let mut n = 0;
        let mut c = Cont::Primary(b);
        for _ in 0..=self.max_chain() {
            let mut next = None;
            for s in 0..c.slots() {
                let w = self.word(c, s);
                match flag(w) {
                    F_ENTRY => n += 1,
                    F_LINK => next = Some(self.follow(w)),
                    _ => break,
                }
            }
            match next {
                Some(x) => c = x,
                None => return n,
            }
        }
        panic!("hash index: chain of bucket {b} longer than the index");
    }

    /// Returns empty overflow pages; evacuates the emptiest one when too many
    /// containers are free.
    fn release_pages(&mut self, pool: &PagePool) {
        if self.ovf.free_slots() >= EVACUATE_FREE && !self.ovf.has_empty_page() {
            self.evacuate_one();
        }
        self.ovf.release_empty(pool, 0);
    }

    /// Moves every container of the emptiest overflow page elsewhere (rewriting the link
    /// that points to it) so that the page becomes empty.
    fn evacuate_one(&mut self) {
        let Some(pi) = self.ovf.emptiest_page() else {
            return;
        };
        let used = self.ovf.begin_evacuation(pi);
        let free_here = u64::from(self.ovf.slots_per_page()) - used.len() as u64;
        assert!(
            self.ovf.free_slots() - free_here >= used.len() as u64,
            "hash index: no room to evacuate"
        );
        for id in used {
            // Slot 0 of an overflow container is always an entry; its bucket is one of
            // the four sharing the stored hash bits.
            let w0 = self.word(Cont::Overflow(id), 0);
            assert_eq!(
                flag(w0),
                F_ENTRY,
                "hash index: overflow container {id:#x} without entry"
            );
            let mut pred = None;
            for low in 0..4u32 {
                let b = self.bucket_of(((w0 as u32) & !FLAG_MASK) | low);
                if let Some(p) = self.link_to(b, id) {
                    pred = Some(p);
                    break;
                }
            }
            let pred = pred.expect("hash index: overflow container not linked from its bucket");
            let to = self
                .ovf
                .alloc()
                .expect("hash index: free container counted");
            let mut copy = [0u8; OVF_BYTES];
            copy.copy_from_slice(self.ovf.slot(id));
            self.ovf.slot_mut(to).copy_from_slice(&copy);
            self.set_word(pred, pred.slots() - 1, link_word(to));
            self.ovf.free(id);
        }
        self.ovf.end_evacuation(pi);
    }

    /// The container of bucket `b`'s chain whose link points to overflow container `id`.
    fn link_to(&self, b: u32, id: u32) -> Option<Cont> {
        let mut c = Cont::Primary(b);
        for _ in 0..=self.max_chain() {
            let w = self.word(c, c.slots() - 1);
            if flag(w) != F_LINK {
                return None;
            }
            if payload(w) == id {
                return Some(c);
            }
            c = self.follow(w);
        }
        None
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

    /// Entries stored in primary containers (found by a lookup touching one line).
    #[cfg(test)]
    pub(crate) fn entries_in_primary(&self) -> u64 {
        (0..self.n_buckets)
            .map(|b| {
                (0..PRIMARY_SLOTS)
                    .filter(|&s| flag(self.word(Cont::Primary(b), s)) == F_ENTRY)
                    .count() as u64
            })
            .sum()
    }

    /// Verifies every structural invariant (chain shapes, addressing, counts, pages).
    pub fn check(&self) -> Result<(), String> {
        self.ovf.check()?;
        if self.n_buckets == 0 {
            return if self.len == 0 && self.dir.is_empty() && self.ovf.pages_held() == 0 {
                Ok(())
            } else {
                Err("hash index: pages or entries without buckets".into())
            };
        }
        if self.n_buckets < MIN_BUCKETS || 31 - self.n_buckets.leading_zeros() != self.level {
            return Err(format!(
                "hash index: {} buckets at level {}",
                self.n_buckets, self.level
            ));
        }
        if self.dir.len() as u32 != self.n_buckets.div_ceil(BUCKETS_PER_PAGE) {
            return Err(format!(
                "hash index: {} directory pages for {} buckets",
                self.dir.len(),
                self.n_buckets
            ));
        }
        let (mut entries, mut containers) = (0u64, 0u64);
        for b in 0..self.n_buckets {
            let mut c = Cont::Primary(b);
            let mut chain = Vec::new();
            loop {
                let n = c.slots();
                let mut k = 0;
                let mut link = None;
                for s in 0..n {
                    let w = self.word(c, s);
                    match flag(w) {
                        F_ENTRY if k == s => {
                            if self.bucket_of(entry_hash(w, b)) != b {
                                return Err(format!(
                                    "hash index: entry {w:#x} in wrong bucket {b}"
                                ));
                            }
                            k += 1;
                        }
                        F_LINK if s == n - 1 && k == n - 1 => link = Some(payload(w)),
                        0 if w == 0 => {}
                        _ => {
                            return Err(format!(
                                "hash index: bucket {b} {c:?} slot {s} bad word {w:#x}"
                            ));
                        }
                    }
                }
                entries += k as u64;
                chain.push((c, k, link.is_some()));
                match link {
                    Some(id) => {
                        containers += 1;
                        if chain.len() as u64 > self.max_chain() {
                            return Err(format!("hash index: bucket {b} chain loops"));
                        }
                        c = Cont::Overflow(id);
                    }
                    None => break,
                }
            }
            if let Some(&(Cont::Overflow(_), k, _)) = chain.last()
                && k < 2
            {
                return Err(format!(
                    "hash index: bucket {b} ends in an overflow container with {k} entries"
                ));
            }
        }
        if entries != self.len {
            return Err(format!("hash index: {entries} entries, len {}", self.len));
        }
        if containers != self.ovf.used_slots() {
            return Err(format!(
                "hash index: {containers} linked containers, {} allocated",
                self.ovf.used_slots()
            ));
        }
        Ok(())
    }
}
