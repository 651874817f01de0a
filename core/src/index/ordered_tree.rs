//! Structural changes of the ordered index's B+tree (layout and invariants: see
//! `ordered.rs`): splits on insert, merges and redistribution on removal.
//!
//! Insert: a full leaf splits 50/50, except that an insert past the end of the rightmost
//! leaf (or before the start of the leftmost) moves only the new entry to the new node,
//! so ascending and descending loads leave full leaves behind. The new right node's
//! first entry becomes the separator pushed into the parent; a full internal node splits
//! around its middle key, which moves up; a root split adds a level. The caller has put
//! every node this needs in the stock (`split_need`).
//!
//! Removal: a node below half full (leaves: `leaf_cap / 2` entries, internal nodes:
//! `int_keys / 2` keys) is merged with a sibling under the same parent when the two fit
//! in one node with room to spare (leaves: fewer than `leaf_cap` entries), otherwise the
//! two share their entries evenly and the separator between them is rewritten; a merge
//! removes a separator from the parent, which may cascade; an internal root left with a
//! single child is replaced by it. Nothing is allocated; freed nodes go to the stock.

use super::ordered::{CHILD_BASE, INT_KEYS, MAX_HEIGHT, Node, OrderedIndex, Path, WORDS};
use super::slab::NIL;

impl OrderedIndex {
    /// Inserts entry `v` at the leaf position of `p`, splitting up the path as needed
    /// (the stock holds the nodes: see `split_need`).
    pub(super) fn insert_at(&mut self, p: &Path, v: u32) {
        let leaf = p.node[0];
        let j = p.idx[0];
        let mut n = self.load(leaf);
        assert!(j <= n.count);
        if n.count < self.leaf_cap {
            n.w.copy_within(j..n.count, j + 1);
            n.w[j] = v;
            n.count += 1;
            self.store(leaf, &n);
            return;
        }
        let c = n.count;
        let mut all = [0u32; WORDS + 1];
        all[..j].copy_from_slice(&n.w[..j]);
        all[j] = v;
        all[j + 1..=c].copy_from_slice(&n.w[j..c]);
        let rightmost = (1..self.height).all(|l| p.idx[l] == self.hdr(p.node[l]).1);
        let leftmost = (1..self.height).all(|l| p.idx[l] == 0);
        let keep = if rightmost && j == c {
            c
        } else if leftmost && j == 0 {
            1
        } else {
            c.div_ceil(2)
        };
        n.w[..keep].copy_from_slice(&all[..keep]);
        n.count = keep;
        self.store(leaf, &n);
        let rid = self.take_node(0);
        let mut r = Node::new(0);
        r.count = c + 1 - keep;
        r.w[..r.count].copy_from_slice(&all[keep..=c]);
        self.store(rid, &r);
        let mut carry = Some((r.w[0], rid));
        for lvl in 1..self.height {
            let Some((sep, right)) = carry else { break };
            carry = self.insert_into_internal(p.node[lvl], lvl, p.idx[lvl], sep, right);
        }
        if let Some((sep, right)) = carry {
            assert!(self.height < MAX_HEIGHT, "ordered index: tree too tall");
            let id = self.take_node(self.height);
            let mut r = Node::new(self.height);
            r.count = 1;
            r.w[0] = sep;
            r.set_child(0, self.root);
            r.set_child(1, right);
            self.store(id, &r);
            self.root = id;
            self.height += 1;
        }
    }

    /// Inserts separator `sep` at `pos` and child `right` at `pos + 1` of internal node
    /// `id`; returns the (middle key, new right node) to push up if it split.
    pub(super) fn insert_into_internal(
        &mut self,
        id: u32,
        lvl: usize,
        pos: usize,
        sep: u32,
        right: u32,
    ) -> Option<(u32, u32)> {
        let mut n = self.load(id);
        let k = n.count;
        assert!(pos <= k && n.level as usize == lvl);
        let mut keys = [0u32; INT_KEYS + 1];
        let mut kids = [0u32; INT_KEYS + 2];
        keys[..pos].copy_from_slice(&n.w[..pos]);
        keys[pos] = sep;
        keys[pos + 1..=k].copy_from_slice(&n.w[pos..k]);
        kids[..=pos].copy_from_slice(&n.w[CHILD_BASE..=CHILD_BASE + pos]);
        kids[pos + 1] = right;
        kids[pos + 2..=k + 1].copy_from_slice(&n.w[CHILD_BASE + pos + 1..=CHILD_BASE + k]);
        if k < self.int_keys {
            n.count = k + 1;
            n.w[..=k].copy_from_slice(&keys[..=k]);
            n.w[CHILD_BASE..=CHILD_BASE + k + 1].copy_from_slice(&kids[..=k + 1]);
            self.store(id, &n);
            return None;
        }
        let t = k + 1;
        let nl = t / 2;
        n.count = nl;
        n.w[..nl].copy_from_slice(&keys[..nl]);
        n.w[CHILD_BASE..=CHILD_BASE + nl].copy_from_slice(&kids[..=nl]);
        self.store(id, &n);
        let rid = self.take_node(lvl);
        let mut r = Node::new(lvl);
        r.count = t - nl - 1;
        r.w[..r.count].copy_from_slice(&keys[nl + 1..t]);
        r.w[CHILD_BASE..=CHILD_BASE + r.count].copy_from_slice(&kids[nl + 1..=t]);
        self.store(rid, &r);
        Some((keys[nl], rid))
    }

    /// Restores the fill invariant from the leaf of `p` upward after a removal (merges
    /// free nodes into the stock; nothing is allocated).
    pub(super) fn rebalance(&mut self, p: &Path) {
        self.rebalance_from(p, 0);
    }

    /// [`OrderedIndex::rebalance`] from level `start` of `p` upward (the nodes of `p`
    /// below `start` are not looked at).
    pub(super) fn rebalance_from(&mut self, p: &Path, start: usize) {
        for lvl in start..self.height {
            let id = p.node[lvl];
            let (_, cnt) = self.hdr(id);
            if lvl + 1 == self.height {
                if cnt == 0 {
                    if lvl == 0 {
                        self.drop_node(id, 0);
                        self.root = NIL;
                        self.height = 0;
                    } else {
                        let c = self.child(id, 0);
                        self.drop_node(id, lvl);
                        self.root = c;
                        self.height -= 1;
                    }
                }
                return;
            }
            let min = if lvl == 0 {
                self.leaf_cap / 2
            } else {
                self.int_keys / 2
            };
            if cnt >= min {
                return;
            }
            let pid = p.node[lvl + 1];
            let pi = p.idx[lvl + 1];
            let li = if pi > 0 { pi - 1 } else { 0 };
            assert!(
                li < self.hdr(pid).1,
                "ordered index: internal node without sibling"
            );
            let (lid, rid) = (self.child(pid, li), self.child(pid, li + 1));
            let mut l = self.load(lid);
            let mut r = self.load(rid);
            if lvl == 0 {
                let t = l.count + r.count;
                if t < self.leaf_cap {
                    l.w[l.count..t].copy_from_slice(&r.w[..r.count]);
                    l.count = t;
                    self.store(lid, &l);
                    self.drop_node(rid, 0);
                    self.remove_from_internal(pid, li);
                    continue;
                }
                let mut all = [0u32; 2 * WORDS];
                all[..l.count].copy_from_slice(&l.w[..l.count]);
                all[l.count..t].copy_from_slice(&r.w[..r.count]);
                let nl = t / 2;
                l.w[..nl].copy_from_slice(&all[..nl]);
                l.count = nl;
                r.w[..t - nl].copy_from_slice(&all[nl..t]);
                r.count = t - nl;
                self.store(lid, &l);
                self.store(rid, &r);
                self.set_word(pid, li, r.w[0]);
                return;
            }
            let sep = self.word(pid, li);
            let t = l.count + 1 + r.count;
            let mut keys = [0u32; 2 * INT_KEYS + 1];
            let mut kids = [0u32; 2 * INT_KEYS + 2];
            keys[..l.count].copy_from_slice(&l.w[..l.count]);
            keys[l.count] = sep;
            keys[l.count + 1..t].copy_from_slice(&r.w[..r.count]);
            kids[..=l.count].copy_from_slice(&l.w[CHILD_BASE..=CHILD_BASE + l.count]);
            kids[l.count + 1..=t].copy_from_slice(&r.w[CHILD_BASE..=CHILD_BASE + r.count]);
            if t <= self.int_keys {
                l.count = t;
                l.w[..t].copy_from_slice(&keys[..t]);
                l.w[CHILD_BASE..=CHILD_BASE + t].copy_from_slice(&kids[..=t]);
                self.store(lid, &l);
                self.drop_node(rid, lvl);
                self.remove_from_internal(pid, li);
                continue;
            }
            let nl = (t - 1) / 2;
            l.count = nl;
            l.w[..nl].copy_from_slice(&keys[..nl]);
            l.w[CHILD_BASE..=CHILD_BASE + nl].copy_from_slice(&kids[..=nl]);
            r.count = t - 1 - nl;
            r.w[..r.count].copy_from_slice(&keys[nl + 1..t]);
            r.w[CHILD_BASE..=CHILD_BASE + r.count].copy_from_slice(&kids[nl + 1..=t]);
            self.store(lid, &l);
            self.store(rid, &r);
            self.set_word(pid, li, keys[nl]);
            return;
        }
    }

    /// Removes key `k` and child `k + 1` of internal node `id`.
    pub(super) fn remove_from_internal(&mut self, id: u32, k: usize) {
        let mut n = self.load(id);
        assert!(k < n.count);
        n.w.copy_within(k + 1..n.count, k);
        n.w.copy_within(
            CHILD_BASE + k + 2..=CHILD_BASE + n.count,
            CHILD_BASE + k + 1,
        );
        n.count -= 1;
        self.store(id, &n);
    }
}
