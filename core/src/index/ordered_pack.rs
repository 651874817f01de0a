//! OPTIMIZE TABLE for an ordered index: leaves packed full, one leaf group (the leaves
//! of one level-1 node) per call, and the node pages this empties given back.
//!
//! Deletes leave leaves between half full and full, and the 50/50 splits of random
//! inserts (or of a node restart's copy in row-id order) leave them about 70% full. A
//! pack gathers the entries of all leaves under one level-1 node — in order, since the
//! leaves are consecutive — and spreads them evenly over `ceil(entries / leaf_cap)` of
//! those leaves, the leftmost ones, so no entry leaves its group and the separators
//! above the group stay right (the group's smallest entry stays in its first leaf). The
//! emptied leaves go to the node stock, the level-1 node's separators are rewritten (the
//! first entry of each leaf after the first), and a level-1 node left below its minimum
//! is merged or redistributed upward as after a removal (`rebalance_from`). Nothing is
//! allocated; row ids do not change, so open scans (which resume by key and row id) and
//! checkpoints are unaffected.
//!
//! Fill after a pack: every leaf of a repacked group holds at least `leaf_cap / 2`
//! entries when the group keeps two or more leaves (the entries exceed `(k - 1) *
//! leaf_cap` for `k` leaves); a group that fits in one leaf only occurs under the root,
//! which then becomes that leaf.
//!
//! Then the stock is settled: pages whose nodes are all free go back to the pool beyond
//! the reservation target, and while more than a page of nodes beyond it is free, the
//! emptiest page is evacuated (nodes moved, `evacuate_one`) so that it can go too.

use super::ordered::{KeyCmp, Node, OrderedIndex};
use crate::storage::RowId;
use crate::storage::pool::PagePool;

/// What one [`OrderedIndex::pack_group`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackStep {
    /// The last entry of the group looked at; None when no entry is past the start.
    pub last: Option<RowId>,
    /// Leaves the pack freed in this group.
    pub leaves_freed: u32,
    /// Entries looked at (the call's cost).
    pub entries: u32,
}

/// Node pages evacuated per call at most (each costs a descent per node moved).
const MAX_PAGE_EVACUATIONS: u32 = 2;

impl OrderedIndex {
    /// Packs the leaf group holding the first entry `e` with `past(e)` (a predicate false
    /// then true along the order: "after the last entry of the previous group"), then
    /// settles the node stock. `cmp` compares two rows' keys (page evacuation descends
    /// by key).
    pub fn pack_group(
        &mut self,
        pool: &PagePool,
        past: &mut dyn FnMut(RowId) -> bool,
        cmp: &mut KeyCmp<'_>,
        buf: &mut Vec<u32>,
    ) -> PackStep {
        let mut step = PackStep {
            last: None,
            leaves_freed: 0,
            entries: 0,
        };
        if self.height == 0 {
            return step;
        }
        let mut p = self.descend(past);
        if p.idx[0] == self.hdr(p.node[0]).1 && !self.next_leaf(&mut p) {
            return step;
        }
        if self.height == 1 {
            // A root leaf: nothing to pack; its last entry ends the pass.
            let (_, n) = self.hdr(self.root);
            step.last = Some(RowId(self.word(self.root, n - 1)));
            step.entries = n as u32;
            return step;
        }
        let parent = p.node[1];
        let children = self.hdr(parent).1 + 1;
        buf.clear();
        for i in 0..children {
            let c = self.load(self.child(parent, i));
            assert_eq!(
                c.level, 0,
                "ordered index: level-1 node {parent:#x} over a non-leaf"
            );
            buf.extend_from_slice(&c.w[..c.count]);
        }
        let total = buf.len();
        assert!(
            total > 0,
            "ordered index: empty leaf group under {parent:#x}"
        );
        step.entries = total as u32;
        step.last = Some(RowId(buf[total - 1]));
        let keep = total.div_ceil(self.leaf_cap);
        if keep < children {
            let ids: Vec<u32> = (0..children).map(|i| self.child(parent, i)).collect();
            let (base, extra) = (total / keep, total % keep);
            let mut at = 0;
            let mut par = self.load(parent);
            for (i, &id) in ids[..keep].iter().enumerate() {
                let len = base + usize::from(i < extra);
                let mut n = Node::new(0);
                n.count = len;
                n.w[..len].copy_from_slice(&buf[at..at + len]);
                self.store(id, &n);
                if i > 0 {
                    par.w[i - 1] = buf[at];
                }
                par.set_child(i, id);
                at += len;
            }
            assert_eq!(at, total);
            for &id in &ids[keep..] {
                self.drop_node(id, 0);
            }
            par.count = keep - 1;
            self.store(parent, &par);
            step.leaves_freed = (children - keep) as u32;
            self.rebalance_from(&p, 1);
        }
        self.settle(pool);
        let t = self.reservation_target();
        let per = u64::from(self.slab.slots_per_page());
        for _ in 0..MAX_PAGE_EVACUATIONS {
            if self.slab.free_slots() < t + per + per / 4 || self.slab.has_empty_page() {
                break;
            }
            let before = self.slab.free_slots();
            self.evacuate_one(cmp);
            self.slab.release_empty(pool, t);
            if self.slab.free_slots() == before {
                break;
            }
        }
        step
    }

    /// Pages a full pass of [`OrderedIndex::pack_group`] would give back now, at least:
    /// the pages held less those that full leaves, today's internal nodes and the most
    /// free nodes the stock keeps (the reservation target and up to a page and a
    /// quarter more, below which no page is evacuated) need.
    pub fn reclaimable_pages(&self) -> u32 {
        let per = u64::from(self.slab.slots_per_page());
        let leaves = self.len.div_ceil(self.leaf_cap as u64);
        let internal: u64 = self.level_nodes[1..].iter().sum();
        let nodes = leaves + internal + self.reservation_target() + per + per / 4;
        let need = nodes.div_ceil(per);
        u64::from(self.pages()).saturating_sub(need) as u32
    }

    /// Entries of each leaf, left to right (tests).
    #[cfg(test)]
    pub(crate) fn leaf_fill(&self) -> Vec<usize> {
        let mut out = Vec::new();
        if self.height == 0 {
            return out;
        }
        let mut p = self.descend(&mut |_| true);
        loop {
            out.push(self.hdr(p.node[0]).1);
            if !self.next_leaf(&mut p) {
                return out;
            }
        }
    }
}
