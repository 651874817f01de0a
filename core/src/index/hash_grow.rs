//! Growth, shrinkage and upkeep of the hash index (layout and invariants: see `hash.rs`):
//! linear-hashing splits and merges, overflow-page evacuation, and the full check.
//!
//! A split drains bucket `p = n_buckets - 2^level` into a scratch buffer, partitions the
//! entries on hash bit `level` and rewrites the chains of `p` and of the new bucket
//! `n_buckets`. Since `overflow_containers` is superadditive, the containers the drain
//! freed always suffice; only a directory page may be needed (every 512th split), and
//! without one the split is deferred. A merge is the inverse: the last bucket's chain
//! joins its buddy's; when the joined chain would need more overflow containers than the
//! two chains had plus the free ones, it is deferred (`remove` never allocates), and a
//! directory page is returned when its first bucket goes.

use super::hash::{
    BUCKETS_PER_PAGE, Cont, EVACUATE_FREE, F_ENTRY, F_LINK, FLAG_MASK, HashIndex, MAX_BUCKETS,
    MIN_BUCKETS, OVF_BYTES, OVF_SLOTS, PRIMARY_SLOTS, entry_hash, flag, link_word,
    overflow_containers, payload,
};
use crate::storage::pool::{PageKind, PagePool};

impl HashIndex {
    /// Moves every entry of bucket `b` into `scratch` (appending), frees its overflow
    /// containers (their pages stay held) and clears its primary container.
    pub(super) fn drain(&mut self, b: u32) {
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
    pub(super) fn write_chain(&mut self, b: u32, from: usize, to: usize) {
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
    pub(super) fn split(&mut self, pool: &PagePool) -> bool {
        if self.n_buckets >= MAX_BUCKETS {
            return false;
        }
        let half = 1u32 << self.level;
        let p = self.n_buckets - half;
        let q = self.n_buckets;
        if q.is_multiple_of(BUCKETS_PER_PAGE) {
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
    pub(super) fn merge(&mut self, pool: &PagePool) -> bool {
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
        if q.is_multiple_of(BUCKETS_PER_PAGE) {
            let page = self
                .dir
                .pop()
                .expect("hash index: directory page of the merged bucket");
            pool.free(PageKind::HashIndex, page);
        }
        true
    }

    pub(super) fn chain_len(&self, b: u32) -> usize {
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
    pub(super) fn release_pages(&mut self, pool: &PagePool) {
        if self.ovf.free_slots() >= EVACUATE_FREE && !self.ovf.has_empty_page() {
            self.evacuate_one();
        }
        self.ovf.release_empty(pool, 0);
    }

    /// OPTIMIZE TABLE: merges buckets down to the load at which an insert splits (6.4
    /// entries a bucket; removals merge only below 6, so a shrunk index keeps up to 7%
    /// more buckets than one built afresh), at most `max_merges`; then evacuates overflow
    /// pages while a whole page's worth of containers is free (the upkeep after a removal
    /// waits for [`EVACUATE_FREE`]), at most `max_pages`, and returns the empty ones.
    /// Returns the pages given back.
    pub fn compact(&mut self, pool: &PagePool, max_merges: u32, max_pages: u32) -> u32 {
        let before = self.pages();
        for _ in 0..max_merges {
            let fewer = u64::from(self.n_buckets.saturating_sub(1));
            if self.n_buckets <= MIN_BUCKETS || self.len * 5 > fewer * 32 || !self.merge(pool) {
                break;
            }
        }
        let per = u64::from(self.ovf.slots_per_page());
        for _ in 0..max_pages {
            self.ovf.release_empty(pool, 0);
            if self.ovf.free_slots() < per || self.ovf.has_empty_page() {
                break;
            }
            self.evacuate_one();
        }
        self.ovf.release_empty(pool, 0);
        before.saturating_sub(self.pages())
    }

    /// Moves every container of the emptiest overflow page elsewhere (rewriting the link
    /// that points to it) so that the page becomes empty.
    pub(super) fn evacuate_one(&mut self) {
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
    pub(super) fn link_to(&self, b: u32, id: u32) -> Option<Cont> {
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

    /// (overflow pages held, overflow containers in use).
    #[cfg(test)]
    pub(super) fn overflow_stats(&self) -> (u32, u64) {
        (self.ovf.pages_held(), self.ovf.used_slots())
    }

    /// Entries stored in primary containers (found by a lookup touching one line).
    #[cfg(test)]
    pub(super) fn entries_in_primary(&self) -> u64 {
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
