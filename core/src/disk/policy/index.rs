//! Hash index from page id to slab slot for the LIRS core: open addressing with linear
//! probing over one flat array of `(page id, slot)` pairs, so that a lookup usually
//! touches a single cache line (a general-purpose map keeps control bytes and values
//! apart: two cache misses per lookup on a large cache, which is most of a hit's cost).
//!
//! Invariants: the table length is a power of two and at least twice the number of
//! keys (load <= 1/2); every key sits in the probe run starting at its home slot with no
//! empty slot in between (deletion shifts later entries back instead of leaving
//! tombstones, so probe runs stay short and nothing needs periodic rebuilding).
//! Complexity: expected O(1) per operation; growth doubles the table (amortised O(1),
//! never in steady state since the number of entries is bounded by the cache).

use super::lirs::PageId;

const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    key: PageId,
    val: u32,
}

const FREE: Slot = Slot { key: 0, val: EMPTY };

#[derive(Clone)]
pub struct PageIndex {
    slots: Vec<Slot>,
    shift: u32,
    len: usize,
}

#[inline(always)]
fn mix(key: PageId) -> u64 {
    (key ^ (key >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Default for PageIndex {
    fn default() -> Self {
        PageIndex::new()
    }
}

impl PageIndex {
    pub fn new() -> PageIndex {
        PageIndex {
            slots: vec![FREE; 16],
            shift: 64 - 4,
            len: 0,
        }
    }

    #[inline(always)]
    fn home(&self, key: PageId) -> usize {
        (mix(key) >> self.shift) as usize
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }

    #[inline(always)]
    pub fn get(&self, key: PageId) -> Option<u32> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.val == EMPTY {
                return None;
            }
            if s.key == key {
                return Some(s.val);
            }
            i = (i + 1) & mask;
        }
    }

    /// Replaces the value of `key` if present; returns the old one (`None`: absent,
    /// nothing inserted).
    #[inline(always)]
    pub fn replace(&mut self, key: PageId, val: u32) -> Option<u32> {
        debug_assert!(val != EMPTY);
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.val == EMPTY {
                return None;
            }
            if s.key == key {
                self.slots[i].val = val;
                return Some(s.val);
            }
            i = (i + 1) & mask;
        }
    }

    /// Inserts a key that is not present.
    pub fn insert(&mut self, key: PageId, val: u32) {
        debug_assert!(val != EMPTY);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(key);
        while self.slots[i].val != EMPTY {
            debug_assert!(self.slots[i].key != key, "duplicate key");
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot { key, val };
        self.len += 1;
    }

    /// Removes a key; returns its value.
    pub fn remove(&mut self, key: PageId) -> Option<u32> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.val == EMPTY {
                return None;
            }
            if s.key == key {
                break;
            }
            i = (i + 1) & mask;
        }
        let val = self.slots[i].val;
        // Backward-shift deletion: move later members of the run into the hole when
        // their home slot is not strictly after the hole (cyclically).
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.val == EMPTY {
                break;
            }
            let h = self.home(s.key);
            let dist_home = j.wrapping_sub(h) & mask;
            let dist_hole = j.wrapping_sub(hole) & mask;
            if dist_home >= dist_hole {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        Some(val)
    }

    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![FREE; n]);
        self.shift -= 1;
        self.len = 0;
        for s in old {
            if s.val != EMPTY {
                self.insert(s.key, s.val);
            }
        }
    }

    /// All `(key, value)` pairs, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (PageId, u32)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.val != EMPTY)
            .map(|s| (s.key, s.val))
    }

    /// Verifies the probing invariant (every key reachable from its home slot).
    pub fn check(&self) {
        let mut n = 0;
        for (i, s) in self.slots.iter().enumerate() {
            if s.val == EMPTY {
                continue;
            }
            n += 1;
            assert_eq!(
                self.get(s.key),
                Some(s.val),
                "index: key at {i} unreachable"
            );
        }
        assert_eq!(n, self.len, "index: length");
        assert!(self.len * 2 <= self.slots.len(), "index: load above 1/2");
    }
}
