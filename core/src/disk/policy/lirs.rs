//! The LIRS replacement core of the page cache, I/O-free: one instance is the real
//! cache's bookkeeping, others are the miniature simulations of the tuner and the advisor.
//!
//! Structure (as in NDB's PGMAN, `pgman.hpp`): every known page has one `Entry` in a
//! slab, found through a hash map. Entries are *hot* (LIR) or *cold* (HIR); hot pages are
//! always resident. Three intrusive doubly linked lists thread the slab:
//! - the **stack** (top = most recent): all hot entries plus the cold entries referenced
//!   since the least recent hot one (resident or not);
//! - the **queue** (front = next victim): every resident cold entry;
//! - the **ghost FIFO** (front = oldest): every non-resident entry (all of them are on the
//!   stack), so the non-resident metadata is bounded in O(1) by dropping its front.
//!
//! Differences from textbook LIRS, all reducing to it with `hot_limit = capacity - Lhirs`
//! (checked against Song Jiang's `lirs.c` numbers):
//! - the hot limit `L` is a parameter that may change at run time (the race moves it).
//!   `L = 0` is exactly LRU, in an "LRU layout": resident pages live on the queue only
//!   (one list move per hit, as a LIRS hot hit), and evicted pages are pushed on the
//!   stack as ghosts, newest on top, so the stack keeps the recency history;
//! - raising `L` promotes resident cold pages from the queue front (oldest first, onto
//!   the stack top) until the hot part is full: after an LRU phase the hot part is
//!   filled at once with pages already paid for, which is what keeps a loop's pages when
//!   the cache switches from LRU to LIRS in the middle of the loop; lowering `L` demotes
//!   stack-bottom pages. Both at most `budget` moves per call (O(1) per access);
//! - while fewer than `L` pages are hot (warm-up, after a hot page had to be evicted or
//!   was removed), any re-referenced page is promoted and the stack is not pruned;
//! - correlated references (NDB's `CORR_REQ`, or the same page twice in a row) of a
//!   resident page change no state, and a correlated miss loads the page cold without
//!   touching the stack;
//! - non-resident entries are bounded (`nonres_limit`, NDB's `DiskPageBufferEntries`
//!   times the capacity): the oldest ghost is dropped first;
//! - victims must satisfy the caller's `evictable` predicate: the queue is scanned from
//!   its front, then hot pages from the stack bottom, [`VICTIM_SCAN`] entries each.
//!
//! Invariants (verified by [`Lirs::check`]): `hot <= resident`, `resident <= capacity`
//! unless no evictable victim existed, hot entries are resident and on the stack, queue
//! entries are exactly the resident cold ones, ghost entries are exactly the non-resident
//! ones and are all on the stack, `nonresident <= nonresident_limit`, and when
//! `0 < L <= hot` the stack bottom is hot.
//!
//! Complexity: O(1) per access (amortised: pruning removes entries that were inserted
//! once; a demotion is at most one per promotion); the victim scan is bounded by
//! [`VICTIM_SCAN`]. No allocation per access once the slab and map reached their bounded
//! size (`capacity + nonresident_limit` entries).

use super::index::PageIndex;

/// Page id: `file_no << 32 | page_no`.
pub type PageId = u64;

const NIL: u32 = u32::MAX;

const HOT: u8 = 1;
const RESIDENT: u8 = 2;
const ON_STACK: u8 = 4;
const ON_QUEUE: u8 = 8;
const ON_GHOST: u8 = 16;

/// Longest scan over non-evictable pages when choosing a victim (per list). NDB's
/// PGMAN bounds its loops by `m_max_loop_count = 256` the same way.
pub const VICTIM_SCAN: usize = 256;

/// Link slot 0 threads the stack, slot 1 the queue or the ghost FIFO (an entry is on at
/// most one of those two).
#[derive(Clone, Copy)]
struct Entry {
    page: PageId,
    prev: [u32; 2],
    next: [u32; 2],
    flags: u8,
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
    len: 0,
};

const STACK: usize = 0;
const QUEUE: usize = 1;
const GHOST: usize = 2;

/// Result of one reference in the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Hit,
    Miss { evicted: Option<PageId> },
}

/// LIRS bookkeeping for one cache (real or simulated).
#[derive(Clone)]
pub struct Lirs {
    capacity: usize,
    hot_limit: usize,
    nonres_limit: usize,
    hot: usize,
    resident: usize,
    /// Cold pages still to promote after the hot limit was raised.
    fill_pending: usize,
    entries: Vec<Entry>,
    free: u32,
    map: PageIndex,
    lists: [List; 3],
    /// References seen and hits among them (all references, correlated included).
    pub refs: u64,
    pub hits: u64,
}

#[inline(always)]
fn slot(list: usize) -> usize {
    if list == STACK { 0 } else { 1 }
}

impl Lirs {
    /// A cache of `capacity` pages with at most `hot_limit` hot pages and at most
    /// `nonres_limit` non-resident entries.
    pub fn new(capacity: usize, hot_limit: usize, nonres_limit: usize) -> Lirs {
        Lirs {
            capacity,
            hot_limit: hot_limit.min(capacity),
            nonres_limit,
            hot: 0,
            resident: 0,
            fill_pending: 0,
            entries: Vec::new(),
            free: NIL,
            map: PageIndex::new(),
            lists: [EMPTY; 3],
            refs: 0,
            hits: 0,
        }
    }

    /// `lirs.c`'s split: `max(2, frac * capacity)` cold (HIR) pages, the rest hot.
    pub fn hot_limit_for(capacity: usize, hir_fraction: f64) -> usize {
        let hir = ((hir_fraction * capacity as f64) as usize).max(2);
        capacity.saturating_sub(hir)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn hot_limit(&self) -> usize {
        self.hot_limit
    }
    pub fn hot(&self) -> usize {
        self.hot
    }
    pub fn resident(&self) -> usize {
        self.resident
    }
    pub fn nonresident(&self) -> usize {
        self.lists[GHOST].len as usize
    }
    pub fn nonres_limit(&self) -> usize {
        self.nonres_limit
    }
    pub fn entries(&self) -> usize {
        self.map.len()
    }
    pub fn stack_len(&self) -> usize {
        self.lists[STACK].len as usize
    }
    /// Bytes of metadata held (slab + hash map, approximate).
    pub fn memory_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>() + self.map.memory_bytes()
    }

    pub fn is_resident(&self, page: PageId) -> bool {
        self.map
            .get(page)
            .is_some_and(|i| self.entries[i as usize].flags & RESIDENT != 0)
    }
    pub fn is_hot(&self, page: PageId) -> bool {
        self.map
            .get(page)
            .is_some_and(|i| self.entries[i as usize].flags & HOT != 0)
    }
    pub fn is_known(&self, page: PageId) -> bool {
        self.map.get(page).is_some()
    }

    /// Resident pages, hot ones first (stack order), then the queue front to end.
    pub fn resident_pages(&self) -> Vec<PageId> {
        let mut v = Vec::with_capacity(self.resident);
        let mut i = self.lists[STACK].head;
        while i != NIL {
            let e = &self.entries[i as usize];
            if e.flags & HOT != 0 {
                v.push(e.page);
            }
            i = e.next[0];
        }
        let mut i = self.lists[QUEUE].head;
        while i != NIL {
            let e = &self.entries[i as usize];
            v.push(e.page);
            i = e.next[1];
        }
        v
    }

    // ---- intrusive list primitives -------------------------------------------------
    // Forced inline, and their length updates wrap instead of carrying the release
    // profile's overflow checks (a length is bounded by the slab; `check` recounts it):
    // they run several times per sampled reference in each of the advisor's copies.

    #[inline(always)]
    fn unlink(&mut self, list: usize, i: u32) {
        let s = slot(list);
        let (p, n) = {
            let e = &self.entries[i as usize];
            (e.prev[s], e.next[s])
        };
        if p != NIL {
            self.entries[p as usize].next[s] = n;
        } else {
            self.lists[list].head = n;
        }
        if n != NIL {
            self.entries[n as usize].prev[s] = p;
        } else {
            self.lists[list].tail = p;
        }
        debug_assert!(self.lists[list].len > 0, "unlink from an empty list");
        self.lists[list].len = self.lists[list].len.wrapping_sub(1);
    }

    #[inline(always)]
    fn push_head(&mut self, list: usize, i: u32) {
        let s = slot(list);
        let h = self.lists[list].head;
        {
            let e = &mut self.entries[i as usize];
            e.prev[s] = NIL;
            e.next[s] = h;
        }
        if h != NIL {
            self.entries[h as usize].prev[s] = i;
        } else {
            self.lists[list].tail = i;
        }
        self.lists[list].head = i;
        self.lists[list].len = self.lists[list].len.wrapping_add(1);
    }

    #[inline(always)]
    fn push_tail(&mut self, list: usize, i: u32) {
        let s = slot(list);
        let t = self.lists[list].tail;
        {
            let e = &mut self.entries[i as usize];
            e.next[s] = NIL;
            e.prev[s] = t;
        }
        if t != NIL {
            self.entries[t as usize].next[s] = i;
        } else {
            self.lists[list].head = i;
        }
        self.lists[list].tail = i;
        self.lists[list].len = self.lists[list].len.wrapping_add(1);
    }

    /// Moves (or pushes) entry `i` to the stack top.
    #[inline(always)]
    fn stack_to_top(&mut self, i: u32) {
        let e = &mut self.entries[i as usize];
        if e.flags & ON_STACK != 0 {
            if self.lists[STACK].head == i {
                return;
            }
            self.unlink(STACK, i);
        } else {
            e.flags |= ON_STACK;
        }
        self.push_head(STACK, i);
    }

    /// Takes entry `i` off the stack (LRU layout keeps resident pages off it).
    #[inline(always)]
    fn leave_stack(&mut self, i: u32) {
        if self.entries[i as usize].flags & ON_STACK != 0 {
            self.unlink(STACK, i);
            self.entries[i as usize].flags &= !ON_STACK;
        }
    }

    #[inline(always)]
    fn queue_to_end(&mut self, i: u32) {
        let e = &mut self.entries[i as usize];
        if e.flags & ON_QUEUE != 0 {
            if self.lists[QUEUE].tail == i {
                return;
            }
            self.unlink(QUEUE, i);
        } else {
            e.flags |= ON_QUEUE;
        }
        self.push_tail(QUEUE, i);
    }

    fn alloc(&mut self, page: PageId) -> u32 {
        let e = Entry {
            page,
            prev: [NIL; 2],
            next: [NIL; 2],
            flags: 0,
        };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.entries[i as usize].next[0];
            self.entries[i as usize] = e;
            i
        } else {
            assert!(self.entries.len() < NIL as usize, "page entry slab full");
            self.entries.push(e);
            (self.entries.len() - 1) as u32
        };
        self.map.insert(page, i);
        i
    }

    /// Frees an entry that is on no list.
    fn dealloc(&mut self, i: u32) {
        let e = &mut self.entries[i as usize];
        debug_assert_eq!(e.flags & (ON_STACK | ON_QUEUE | ON_GHOST), 0);
        let page = e.page;
        e.flags = 0;
        e.next[0] = self.free;
        self.free = i;
        self.map.remove(page);
    }

    // ---- LIRS rules --------------------------------------------------------------

    /// Removes cold entries from the stack bottom until a hot entry is there. Only done
    /// while the hot part is full (`0 < L <= hot`): below that, cold history is kept.
    fn prune(&mut self) {
        if self.hot == 0 || self.hot < self.hot_limit {
            return;
        }
        self.prune_force();
    }

    fn prune_force(&mut self) {
        loop {
            let b = self.lists[STACK].tail;
            if b == NIL {
                return;
            }
            let f = self.entries[b as usize].flags;
            if f & HOT != 0 {
                return;
            }
            self.unlink(STACK, b);
            self.entries[b as usize].flags &= !ON_STACK;
            if f & RESIDENT == 0 {
                self.unlink(GHOST, b);
                self.entries[b as usize].flags &= !ON_GHOST;
                self.dealloc(b);
            }
        }
    }

    /// Demotes the hot entry at the stack bottom to the queue end.
    fn demote_bottom(&mut self) {
        self.prune_force();
        let b = self.lists[STACK].tail;
        debug_assert!(b != NIL && self.entries[b as usize].flags & HOT != 0);
        self.unlink(STACK, b);
        let e = &mut self.entries[b as usize];
        e.flags &= !(HOT | ON_STACK);
        self.hot -= 1;
        self.queue_to_end(b);
    }

    /// Moves the hot part towards its limit by at most `budget` steps: demotes hot pages
    /// from the stack bottom while above it, promotes resident cold pages from the queue
    /// front while below it (resident pages are already paid for: filling the hot part
    /// with them, rather than with pages still to be read, is what lets a switch from
    /// LRU to LIRS keep the pages a loop will come back to). Then prunes.
    fn settle(&mut self, budget: usize) {
        let mut n = 0;
        while self.hot > self.hot_limit && n < budget {
            self.demote_bottom();
            n += 1;
        }
        while self.hot < self.hot_limit && self.fill_pending > 0 && n < budget {
            let f = self.lists[QUEUE].head;
            if f == NIL {
                self.fill_pending = 0;
                break;
            }
            self.fill_pending -= 1;
            self.unlink(QUEUE, f);
            let e = &mut self.entries[f as usize];
            e.flags = (e.flags & !ON_QUEUE) | HOT;
            self.hot += 1;
            if e.flags & ON_STACK == 0 {
                // After an LRU phase the resident pages are off the stack and newer than
                // every entry on it (the evicted history): they join at the top, oldest
                // first, which keeps the stack in recency order.
                e.flags |= ON_STACK;
                self.push_head(STACK, f);
            }
            n += 1;
        }
        self.prune();
    }

    /// Makes a resident cold entry hot and puts it on the stack top.
    fn promote(&mut self, i: u32) {
        let f = self.entries[i as usize].flags;
        if f & ON_QUEUE != 0 {
            self.unlink(QUEUE, i);
        }
        self.entries[i as usize].flags = (f & !ON_QUEUE) | HOT;
        self.hot += 1;
        self.stack_to_top(i);
    }

    /// Drops non-resident entries beyond the limit, oldest first.
    fn bound_ghosts(&mut self) {
        while self.lists[GHOST].len as usize > self.nonres_limit {
            let g = self.lists[GHOST].head;
            self.unlink(GHOST, g);
            self.unlink(STACK, g);
            self.entries[g as usize].flags &= !(ON_GHOST | ON_STACK);
            self.dealloc(g);
        }
    }

    /// Chooses the victim: the first evictable queue entry from the front, else the
    /// first evictable hot entry from the stack bottom.
    fn select_victim<F: FnMut(PageId) -> bool>(&mut self, evictable: &mut F) -> Option<u32> {
        let mut i = self.lists[QUEUE].head;
        let mut n = 0;
        while i != NIL && n < VICTIM_SCAN {
            let e = &self.entries[i as usize];
            if evictable(e.page) {
                return Some(i);
            }
            i = e.next[1];
            n += 1;
        }
        let mut i = self.lists[STACK].tail;
        n = 0;
        while i != NIL && n < VICTIM_SCAN {
            let e = &self.entries[i as usize];
            if e.flags & HOT != 0 {
                if evictable(e.page) {
                    return Some(i);
                }
                n += 1;
            }
            i = e.prev[0];
        }
        None
    }

    /// Makes entry `i` non-resident (kept as a ghost while on the stack).
    fn evict(&mut self, i: u32) -> PageId {
        let f = self.entries[i as usize].flags;
        debug_assert!(f & RESIDENT != 0);
        self.resident -= 1;
        if f & HOT != 0 {
            self.hot -= 1;
        }
        if f & ON_QUEUE != 0 {
            self.unlink(QUEUE, i);
        }
        let page = self.entries[i as usize].page;
        if f & ON_STACK != 0 {
            self.entries[i as usize].flags = ON_STACK | ON_GHOST;
            self.push_tail(GHOST, i);
            if f & HOT != 0 {
                self.prune();
            }
        } else if self.hot_limit == 0 {
            // LRU layout: evicted pages become the history, newest on top (LRU evicts
            // in recency order, so the stack stays in recency order).
            self.entries[i as usize].flags = ON_STACK | ON_GHOST;
            self.push_head(STACK, i);
            self.push_tail(GHOST, i);
        } else {
            self.entries[i as usize].flags = 0;
            self.dealloc(i);
        }
        page
    }

    /// Frees one page frame if the cache is full.
    fn make_room<F: FnMut(PageId) -> bool>(&mut self, evictable: &mut F) -> Option<PageId> {
        if self.resident < self.capacity {
            return None;
        }
        let v = self.select_victim(evictable)?;
        Some(self.evict(v))
    }

    /// One reference to `page`. `correlated` references of a resident page are hits that
    /// change no state; on a miss the page becomes resident and the victim (if the cache
    /// was full) is returned.
    pub fn access<F: FnMut(PageId) -> bool>(
        &mut self,
        page: PageId,
        correlated: bool,
        evictable: &mut F,
    ) -> Outcome {
        self.refs += 1;
        let found = self.map.get(page);
        let Some(i) = found else {
            // New page.
            let evicted = self.make_room(evictable);
            let i = self.alloc(page);
            self.resident += 1;
            let e = &mut self.entries[i as usize];
            e.flags = RESIDENT;
            if correlated {
                self.queue_to_end(i);
            } else if self.hot < self.hot_limit
                && evicted.is_none()
                && self.resident <= self.capacity
            {
                // Warm-up: free frames and room in the hot part (lirs.c).
                self.entries[i as usize].flags |= HOT;
                self.hot += 1;
                self.stack_to_top(i);
                self.prune();
            } else if self.hot_limit == 0 {
                // LRU layout: resident pages live on the queue only.
                self.queue_to_end(i);
            } else {
                self.stack_to_top(i);
                self.queue_to_end(i);
            }
            self.bound_ghosts();
            return Outcome::Miss { evicted };
        };
        let f = self.entries[i as usize].flags;
        if f & RESIDENT != 0 {
            self.hits += 1;
            if correlated {
                return Outcome::Hit;
            }
            if f & HOT != 0 {
                let was_bottom = self.lists[STACK].tail == i;
                self.stack_to_top(i);
                if was_bottom {
                    self.prune();
                }
            } else if self.hot_limit == 0 {
                self.leave_stack(i);
                self.queue_to_end(i);
            } else if f & ON_STACK != 0 || self.hot < self.hot_limit {
                self.promote(i);
                self.settle(usize::MAX);
            } else {
                self.stack_to_top(i);
                self.queue_to_end(i);
            }
            return Outcome::Hit;
        }
        // Non-resident entry (a ghost on the stack): becomes resident before room is
        // made, so that pruning during the eviction cannot free it.
        self.unlink(GHOST, i);
        self.entries[i as usize].flags = (f & !ON_GHOST) | RESIDENT;
        let evicted = self.make_room(evictable);
        self.resident += 1;
        if self.hot_limit == 0 {
            self.leave_stack(i);
            self.queue_to_end(i);
        } else if correlated {
            self.queue_to_end(i);
        } else {
            self.promote(i);
            self.settle(usize::MAX);
        }
        self.bound_ghosts();
        Outcome::Miss { evicted }
    }

    /// Changes the hot limit; hot pages above it are demoted at most `budget` at a time
    /// (the rest on later calls to [`Lirs::settle_step`]).
    pub fn set_hot_limit(&mut self, hot_limit: usize, budget: usize) {
        self.set_limit(hot_limit);
        self.settle(budget);
    }

    /// A raised limit is filled once with resident cold pages (queue front first); a
    /// lowered one is reached by demotions.
    fn set_limit(&mut self, hot_limit: usize) {
        self.hot_limit = hot_limit.min(self.capacity);
        self.fill_pending = self.hot_limit.saturating_sub(self.hot);
    }

    /// Continues moving the hot part to its limit by at most `budget` steps.
    #[inline]
    pub fn settle_step(&mut self, budget: usize) {
        if self.hot > self.hot_limit || (self.fill_pending > 0 && self.hot < self.hot_limit) {
            self.settle(budget);
        }
    }

    /// Changes capacity and limits; returns the pages evicted to fit (as many as
    /// `evictable` allows, the rest stays over capacity until [`Lirs::evict_excess`]).
    pub fn resize<F: FnMut(PageId) -> bool>(
        &mut self,
        capacity: usize,
        hot_limit: usize,
        nonres_limit: usize,
        evictable: &mut F,
    ) -> Vec<PageId> {
        self.capacity = capacity;
        self.set_limit(hot_limit);
        self.nonres_limit = nonres_limit;
        let v = self.evict_excess(evictable);
        self.settle(usize::MAX);
        self.bound_ghosts();
        v
    }

    /// Evicts pages while more than `capacity` are resident.
    pub fn evict_excess<F: FnMut(PageId) -> bool>(&mut self, evictable: &mut F) -> Vec<PageId> {
        let mut v = Vec::new();
        while self.resident > self.capacity {
            match self.select_victim(evictable) {
                Some(i) => v.push(self.evict(i)),
                None => break,
            }
        }
        self.bound_ghosts();
        v
    }

    /// Forgets `page` (extent freed, file dropped). Returns whether it was resident.
    pub fn remove(&mut self, page: PageId) -> bool {
        let Some(i) = self.map.get(page) else {
            return false;
        };
        let f = self.entries[i as usize].flags;
        if f & ON_STACK != 0 {
            self.unlink(STACK, i);
        }
        if f & ON_QUEUE != 0 {
            self.unlink(QUEUE, i);
        }
        if f & ON_GHOST != 0 {
            self.unlink(GHOST, i);
        }
        if f & RESIDENT != 0 {
            self.resident -= 1;
        }
        if f & HOT != 0 {
            self.hot -= 1;
        }
        self.entries[i as usize].flags = 0;
        self.dealloc(i);
        self.prune();
        f & RESIDENT != 0
    }

    /// Forgets every page for which `keep` is false (a change of sampling rate).
    pub fn retain<F: FnMut(PageId) -> bool>(&mut self, mut keep: F) {
        let gone: Vec<PageId> = self
            .map
            .iter()
            .map(|(p, _)| p)
            .filter(|&p| !keep(p))
            .collect();
        for p in gone {
            self.remove(p);
        }
    }

    /// Verifies every invariant by walking all lists; O(entries). Panics with a
    /// description on the first violation.
    pub fn check(&self) {
        let mut seen = [0usize; 3];
        let mut hot = 0;
        let mut resident = 0;
        for (list, s) in [(STACK, 0usize), (QUEUE, 1), (GHOST, 1)] {
            let l = self.lists[list];
            let mut i = l.head;
            let mut prev = NIL;
            let mut n = 0usize;
            while i != NIL {
                let e = &self.entries[i as usize];
                assert_eq!(e.prev[s], prev, "list {list}: broken prev link");
                let flag = [ON_STACK, ON_QUEUE, ON_GHOST][list];
                assert!(e.flags & flag != 0, "list {list}: entry without its flag");
                assert_eq!(
                    self.map.get(e.page),
                    Some(i),
                    "list {list}: entry not in map"
                );
                prev = i;
                i = e.next[s];
                n += 1;
                assert!(n <= self.entries.len(), "list {list}: cycle");
            }
            assert_eq!(l.tail, prev, "list {list}: tail");
            assert_eq!(l.len as usize, n, "list {list}: length");
            seen[list] = n;
        }
        let mut on = [0usize; 3];
        self.map.check();
        for (page, i) in self.map.iter() {
            let e = &self.entries[i as usize];
            assert_eq!(e.page, page, "map points at another entry");
            let f = e.flags;
            if f & ON_STACK != 0 {
                on[STACK] += 1;
            }
            if f & ON_QUEUE != 0 {
                on[QUEUE] += 1;
            }
            if f & ON_GHOST != 0 {
                on[GHOST] += 1;
            }
            if f & HOT != 0 {
                hot += 1;
                assert!(f & RESIDENT != 0, "hot entry not resident");
                assert!(f & ON_STACK != 0, "hot entry not on the stack");
                assert!(f & ON_QUEUE == 0, "hot entry on the queue");
            }
            if f & RESIDENT != 0 {
                resident += 1;
                assert!(f & ON_GHOST == 0, "resident entry on the ghost list");
                if f & HOT == 0 {
                    assert!(f & ON_QUEUE != 0, "resident cold entry not on the queue");
                }
            } else {
                assert!(
                    f & ON_GHOST != 0,
                    "non-resident entry not on the ghost list"
                );
                assert!(f & ON_STACK != 0, "non-resident entry not on the stack");
            }
        }
        assert_eq!(on, seen, "flags and lists disagree");
        assert_eq!(hot, self.hot, "hot count");
        assert_eq!(resident, self.resident, "resident count");
        assert!(self.hot <= self.resident);
        assert!(
            seen[GHOST] <= self.nonres_limit,
            "non-resident entries above the limit"
        );
        if self.hot > 0 && self.hot >= self.hot_limit {
            let b = self.lists[STACK].tail;
            assert!(
                self.entries[b as usize].flags & HOT != 0,
                "stack bottom is cold while the hot part is full"
            );
        }
    }
}
