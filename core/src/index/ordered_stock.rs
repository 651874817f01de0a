//! The ordered index's node stock and the operations that must not allocate: reservations,
//! relocation of a moved row, page return and page evacuation, TRUNCATE.
//!
//! The stock is the set of free node slots in the pages the index holds. Inserts at
//! transaction commit must not fail, so a transaction reserves its inserts beforehand
//! and releases each reservation explicitly (`unreserve`) once its insert is done or
//! abandoned — `insert` itself never touches the count. The stock is kept at
//! `reservation_target()` — `nodes_for(reserved)`, a worst-case bound on the nodes any
//! `reserved` inserts into the current tree allocate, plus a margin of `height + 2` — by
//! every operation that holds the pool (best effort; only `reserve` reports failure), so
//! the reserved inserts succeed even when the pool has run dry meanwhile. An insert made
//! without a reservation while others are held can use that stock too (it cannot tell):
//! every insert that must not fail needs its own reservation. Pages whose nodes are all
//! free are returned beyond the target.
//! When more than a page and a quarter of nodes are free without any page being empty,
//! the emptiest page is evacuated: each of its nodes is copied to a free slot elsewhere
//! and its parent, found by descending toward the node's smallest entry, is rewritten.
//!
//! `relocate` (no pool at hand) removes the old entry and inserts the new one; if that
//! needs a split and the stock has no node beyond the reservation target, it shifts one
//! entry per leaf toward the slot the removal freed instead, so it never allocates.

use super::ordered::{CHILD_BASE, KeyCmp, MAX_HEIGHT, NODE_BYTES, Node, OrderedIndex, Path, gt};
use super::slab::NIL;
use crate::error::{NdbError, codes};
use crate::storage::RowId;
use crate::storage::pool::PagePool;

impl OrderedIndex {
    /// The row `old` moved to `new` (same key; OPTIMIZE TABLE). `cmp` must be able to
    /// read both rows' keys. Never allocates and never fails: when the new position's
    /// leaf is full and the node stock has no node beyond what reservations need, entries
    /// are shifted leaf to leaf toward the freed slot instead of splitting (the leaves in
    /// between hold only entries with that same key). False when `old` is absent.
    pub fn relocate(&mut self, old: RowId, new: RowId, cmp: &mut KeyCmp<'_>) -> bool {
        if !self.remove_entry(old, cmp) {
            return false;
        }
        if self.height == 0 {
            // The root leaf just freed is still in the stock.
            let id = self.take_node(0);
            let mut n = Node::new(0);
            n.w[0] = new.0;
            n.count = 1;
            self.store(id, &n);
            self.root = id;
            self.height = 1;
            self.len += 1;
            return true;
        }
        let p = self.descend(&mut |e| gt(cmp, e, new));
        let need = self.split_need(&p);
        if need == 0 || self.slab.free_slots() >= need + self.reservation_target() {
            self.insert_at(&p, new.0);
        } else {
            // The freed slot lies toward `old`'s old position — except that a gap at the
            // end of a leaf is also the gap at the start of the next one, where `old` may
            // have been the first entry: then that leaf has the room.
            let mut q = p;
            if p.idx[0] == self.hdr(p.node[0]).1
                && self.next_leaf(&mut q)
                && self.hdr(q.node[0]).1 < self.leaf_cap
            {
                self.carry_insert(q, new.0, true);
            } else {
                let toward_right = gt(cmp, old, new);
                self.carry_insert(p, new.0, toward_right);
            }
        }
        self.len += 1;
        true
    }

    /// Inserts `v` at the full leaf position `p`, pushing the overflowing entry into the
    /// next (or previous) leaf, and so on until a leaf has room.
    pub(super) fn carry_insert(&mut self, mut p: Path, mut v: u32, toward_right: bool) {
        let mut pos = p.idx[0];
        for _ in 0..=self.level_nodes[0] {
            let id = p.node[0];
            let mut n = self.load(id);
            let old_min = n.w[0];
            let c = n.count;
            let out;
            if c < self.leaf_cap {
                n.w.copy_within(pos..c, pos + 1);
                n.w[pos] = v;
                n.count += 1;
                out = None;
            } else if toward_right {
                if pos == c {
                    out = Some(v);
                } else {
                    out = Some(n.w[c - 1]);
                    n.w.copy_within(pos..c - 1, pos + 1);
                    n.w[pos] = v;
                }
            } else if pos == 0 {
                out = Some(v);
            } else {
                out = Some(n.w[0]);
                n.w.copy_within(1..pos, 0);
                n.w[pos - 1] = v;
            }
            self.store(id, &n);
            if n.w[0] != old_min || c == 0 {
                self.set_leaf_min(&p, n.w[0]);
            }
            let Some(o) = out else { return };
            #[cfg(test)]
            super::ordered::CARRIES.with(|c| c.set(c.get() + 1));
            v = o;
            if toward_right {
                assert!(
                    self.next_leaf(&mut p),
                    "ordered index: no room to the right"
                );
                pos = 0;
            } else {
                assert!(self.prev_leaf(&mut p), "ordered index: no room to the left");
                pos = p.idx[0];
            }
        }
        panic!("ordered index: carry through more leaves than exist");
    }

    /// Makes sure `n_inserts` inserts cannot fail for lack of pages: allocates pages to
    /// the node stock now. `Err(902)` (nothing reserved) if the pool cannot.
    ///
    /// Reservations are released explicitly, never by `insert`: the owner gives each one
    /// back with `unreserve` once its insert is done or abandoned (commit: `insert` then
    /// `unreserve(1)`; abort: `unreserve(1)`). While `r` reservations are held, any `r`
    /// inserts succeed, whatever other inserts (unreserved, which may fail) and removals
    /// happen in between.
    pub fn reserve(&mut self, pool: &PagePool, n_inserts: usize) -> Result<(), NdbError> {
        let total = self.reserved.saturating_add(n_inserts as u64);
        let want = self.target_for(total);
        while self.slab.free_slots() < want {
            if !self.slab.grow(pool) {
                let keep = self.reservation_target();
                self.slab.release_empty(pool, keep);
                return Err(codes::out_of_ordered_index_memory());
            }
        }
        self.reserved = total;
        Ok(())
    }

    /// Gives back reservations (their inserts are done or will not happen); the stock
    /// shrinks at the next operation that holds the pool.
    pub fn unreserve(&mut self, n_inserts: usize) {
        self.reserved = self.reserved.saturating_sub(n_inserts as u64);
    }

    /// Outstanding reserved inserts.
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Free nodes to keep for the outstanding reservations.
    pub(crate) fn reservation_target(&self) -> u64 {
        self.target_for(self.reserved)
    }

    pub(super) fn target_for(&self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.nodes_for(n).saturating_add(self.height as u64 + 2)
        }
    }

    /// Upper bound on the nodes any `n` inserts into the current tree allocate.
    ///
    /// Per level, `s` inserts (separators pushed up for the level above) cause at most
    /// `min(s, nodes, ...)` first splits of existing nodes plus one split per `g` further
    /// inserts, `g` being the least room a node has after a 50/50 split; edge splits of
    /// leaves (which leave one half full) can at most double the leaf count. A level above
    /// the root costs a new root first.
    pub(crate) fn nodes_for(&self, n: u64) -> u64 {
        let mut total = 0u64;
        let mut s = n;
        for lvl in 0..64 {
            if s == 0 {
                break;
            }
            let g = if lvl == 0 {
                (self.leaf_cap as u64).div_ceil(2)
            } else {
                self.int_keys as u64 / 2 + 1
            };
            let splits = if lvl < self.height {
                let first = self.level_nodes[lvl].min(s);
                let k = if lvl == 0 {
                    (2 * first).saturating_add(2 * (s / g))
                } else {
                    first + s / g
                };
                k.min(s)
            } else {
                total += 1;
                if lvl == 0 {
                    (2 * (s / g)).min(s)
                } else {
                    s / g
                }
            };
            total = total.saturating_add(splits);
            s = splits;
        }
        total
    }

    /// Tops the stock up to the reservation target (best effort) and returns the pages
    /// beyond it whose nodes are all free.
    pub(super) fn settle(&mut self, pool: &PagePool) {
        let t = self.reservation_target();
        while self.slab.free_slots() < t && self.slab.grow(pool) {}
        self.slab.release_empty(pool, t);
    }

    /// Moves every node of the emptiest page elsewhere so that the page becomes free.
    pub(super) fn evacuate_one(&mut self, cmp: &mut KeyCmp<'_>) {
        let Some(pi) = self.slab.emptiest_page() else {
            return;
        };
        let used = self.slab.begin_evacuation(pi);
        let free_here = u64::from(self.slab.slots_per_page()) - used.len() as u64;
        if self.slab.free_slots() - free_here < used.len() as u64 {
            self.slab.end_evacuation(pi);
            return;
        }
        for id in used {
            let (level, _) = self.hdr(id);
            let mut x = id;
            for _ in 0..level {
                x = self.child(x, 0);
            }
            let m = RowId(self.word(x, 0));
            let to = self.slab.alloc().expect("ordered index: free node counted");
            let mut copy = [0u8; NODE_BYTES];
            copy.copy_from_slice(self.slab.slot(id));
            self.slab.slot_mut(to).copy_from_slice(&copy);
            if id == self.root {
                self.root = to;
            } else {
                let p = self.descend_to(&mut |e| gt(cmp, e, m), level + 1);
                let (parent, ci) = (p.node[level + 1], p.idx[level + 1]);
                assert_eq!(
                    self.child(parent, ci),
                    id,
                    "ordered index: parent search missed node {id:#x}"
                );
                self.set_word(parent, CHILD_BASE + ci, to);
            }
            self.slab.free(id);
        }
        self.slab.end_evacuation(pi);
    }

    /// TRUNCATE/DROP: every page back to the pool; outstanding reservations are dropped.
    pub fn free_all(&mut self, pool: &PagePool) {
        self.slab.free_all(pool);
        self.root = NIL;
        self.height = 0;
        self.len = 0;
        self.level_nodes = [0; MAX_HEIGHT];
        self.reserved = 0;
    }
}
