//! DBTUX: an ordered index of one fragment — a B+tree of row ids whose keys are read
//! from the rows through caller-supplied comparison closures.
//!
//! Order: entries are ordered by `(index key, row id)`; `cmp(a, b)` compares the index
//! keys of rows `a` and `b`, ties are broken here by row id, so the order is total and a
//! scan can resume strictly after any `(key, row)` it returned.
//!
//! Layout: nodes are 512-byte slots (64 per 32 KB `PageKind::OrderedIndex` page) from a
//! `Slab` (`slab.rs`). A node is an 8-byte header — magic `0xB7`, level (0 = leaf), `u16` count —
//! followed by 126 little-endian `u32` words. A leaf holds up to 126 row ids. An internal
//! node holds up to 62 separator row ids in words `0..62` and `count + 1` child node ids
//! in words `62..125`. No key is stored; no leaf links (scans move through a root-to-leaf
//! path), no parent pointers.
//!
//! Invariants (asserted on write and read; `check` verifies them all):
//! - all leaves are at level 0, the root at level `height - 1`; entries strictly
//!   increase in `(key, row id)` order along the leaves;
//! - separator `i` of an internal node is the smallest entry of child `i + 1`'s subtree,
//!   so every separator is a row that is in the index (its key can be read);
//! - fill: every non-root internal node has at least 31 keys; every non-root leaf has at
//!   least 63 entries except the leftmost and the rightmost leaf (at least 1), which may be
//!   thinner because an insert past the end (or before the start) of a full edge leaf
//!   splits off just the new entry, so ascending (or descending) loads fill leaves
//!   completely; other splits are 50/50;
//! - the free slots of the slab are the node stock: at every operation holding the pool
//!   it is topped up to `reservation_target()` (a worst-case bound on the nodes the
//!   reserved inserts can need) and pages whose nodes are all free are returned beyond
//!   that; when more than a page and a quarter of nodes are free, the emptiest page is
//!   evacuated (nodes moved, parent pointers found by descending to the node's smallest
//!   entry) so it can be returned.
//!
//! Every loop is bounded by the tree height, a node's count or the number of leaves;
//! recursion (only in `check`) is bounded by the height.
//!
//! This file: types, node access, navigation, insert and remove. Splits, merges and
//! redistribution: `ordered_tree.rs`; scans and `check`: `ordered_scan.rs`; reservations,
//! the node stock, relocation and evacuation: `ordered_stock.rs`; OPTIMIZE TABLE's leaf
//! packing: `ordered_pack.rs`.

use super::slab::{NIL, Slab};
use crate::error::{NdbError, codes};
use crate::storage::RowId;
use crate::storage::pool::{PageKind, PagePool};
use std::cmp::Ordering;

pub(crate) const NODE_BYTES: usize = 512;
pub(crate) const HDR: usize = 8;
pub(crate) const WORDS: usize = (NODE_BYTES - HDR) / 4;
/// Entries of a leaf.
pub(crate) const LEAF_CAP: usize = WORDS;
/// Keys of an internal node (children: one more).
pub(crate) const INT_KEYS: usize = (WORDS - 1) / 2;
pub(crate) const CHILD_BASE: usize = INT_KEYS;
pub(crate) const MAX_HEIGHT: usize = 24;
pub(crate) const MAGIC: u8 = 0xB7;

/// Compares the index keys of two rows.
pub type KeyCmp<'a> = dyn FnMut(RowId, RowId) -> Ordering + 'a;

/// Scan direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanDirection {
    Ascending,
    Descending,
}

/// Where a scan starts. `cmp(row)` compares the row's index key with a bound key
/// (row key vs bound); it may look at a prefix of the index columns only.
pub enum Seek<'a> {
    /// From the first entry in scan direction.
    Start,
    /// Ascending: first entry with key > bound (key >= bound if inclusive). Descending:
    /// last entry with key < bound (<= if inclusive).
    Bound {
        cmp: &'a mut dyn FnMut(RowId) -> Ordering,
        inclusive: bool,
    },
    /// Resume strictly after the entry `(key, last)` returned before, in scan direction,
    /// even if the index was modified in between. `cmp(row)` compares the row key with the
    /// key of `last` as it was when returned.
    After {
        cmp: &'a mut dyn FnMut(RowId) -> Ordering,
        last: RowId,
    },
}

/// A copy of one node, for modification.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) level: u8,
    pub(crate) count: usize,
    pub(crate) w: [u32; WORDS],
}

impl Node {
    pub(super) fn new(level: usize) -> Node {
        Node {
            level: level as u8,
            count: 0,
            w: [0; WORDS],
        }
    }
    #[inline]
    pub(super) fn set_child(&mut self, i: usize, c: u32) {
        self.w[CHILD_BASE + i] = c;
    }
}

/// A root-to-leaf path: `node[l]` is the node at level `l`, `idx[l]` the child taken (or,
/// at the leaf, the entry position).
#[derive(Clone, Copy)]
pub(crate) struct Path {
    pub(crate) node: [u32; MAX_HEIGHT],
    pub(crate) idx: [usize; MAX_HEIGHT],
}

/// `(key(a), a) > (key(b), b)`.
#[inline]
pub(crate) fn gt(cmp: &mut KeyCmp<'_>, a: RowId, b: RowId) -> bool {
    match cmp(a, b) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => a > b,
    }
}

#[cfg(test)]
thread_local! {
    pub(super) static CARRIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static TAKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static DROPPED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Entries shifted between leaves by relocations on this thread (tests).
#[cfg(test)]
pub(crate) fn carries() -> u64 {
    CARRIES.with(|c| c.get())
}

/// (nodes taken from the stock, nodes given back) on this thread (tests).
#[cfg(test)]
pub(crate) fn node_traffic() -> (u64, u64) {
    (TAKEN.with(|c| c.get()), DROPPED.with(|c| c.get()))
}

/// An ordered index of one fragment (NDB's DBTUX).
pub struct OrderedIndex {
    pub(crate) slab: Slab,
    pub(crate) root: u32,
    /// Levels; 0 when empty.
    pub(crate) height: usize,
    pub(crate) len: u64,
    /// Nodes per level.
    pub(crate) level_nodes: [u64; MAX_HEIGHT],
    /// Outstanding reserved inserts.
    pub(crate) reserved: u64,
    pub(crate) leaf_cap: usize,
    pub(crate) int_keys: usize,
}

impl Default for OrderedIndex {
    fn default() -> Self {
        OrderedIndex::new()
    }
}

impl OrderedIndex {
    pub fn new() -> OrderedIndex {
        OrderedIndex::with_caps(LEAF_CAP, INT_KEYS)
    }

    /// An index whose nodes use only part of their room (tests build deep trees).
    pub(crate) fn with_caps(leaf_cap: usize, int_keys: usize) -> OrderedIndex {
        assert!((3..=LEAF_CAP).contains(&leaf_cap) && (2..=INT_KEYS).contains(&int_keys));
        OrderedIndex {
            slab: Slab::new(PageKind::OrderedIndex, NODE_BYTES),
            root: NIL,
            height: 0,
            len: 0,
            level_nodes: [0; MAX_HEIGHT],
            reserved: 0,
            leaf_cap,
            int_keys,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pages currently held (tree nodes and the node stock).
    pub fn pages(&self) -> u32 {
        self.slab.pages_held()
    }

    /// Levels of the tree (0 when empty).
    pub fn height(&self) -> usize {
        self.height
    }

    /// Level and count of node `id`, asserting the header.
    #[inline]
    pub(crate) fn hdr(&self, id: u32) -> (usize, usize) {
        let s = self.slab.slot(id);
        assert_eq!(
            s[0], MAGIC,
            "ordered index: node {id:#x} has no node header"
        );
        (s[1] as usize, u16::from_le_bytes([s[2], s[3]]) as usize)
    }

    #[inline]
    pub(crate) fn word(&self, id: u32, i: usize) -> u32 {
        let s = self.slab.slot(id);
        let o = HDR + 4 * i;
        u32::from_le_bytes([s[o], s[o + 1], s[o + 2], s[o + 3]])
    }

    #[inline]
    pub(crate) fn child(&self, id: u32, i: usize) -> u32 {
        self.word(id, CHILD_BASE + i)
    }

    #[inline]
    pub(super) fn set_word(&mut self, id: u32, i: usize, v: u32) {
        let o = HDR + 4 * i;
        self.slab.slot_mut(id)[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn load(&self, id: u32) -> Node {
        let (level, count) = self.hdr(id);
        let s = self.slab.slot(id);
        let mut n = Node {
            level: level as u8,
            count,
            w: [0; WORDS],
        };
        for (w, c) in n.w.iter_mut().zip(s[HDR..].as_chunks::<4>().0) {
            *w = u32::from_le_bytes(*c);
        }
        n
    }

    pub(super) fn store(&mut self, id: u32, n: &Node) {
        let cap = if n.level == 0 {
            self.leaf_cap
        } else {
            self.int_keys
        };
        assert!(
            n.count <= cap,
            "ordered index: node overfull ({} > {cap})",
            n.count
        );
        let s = self.slab.slot_mut(id);
        s[0] = MAGIC;
        s[1] = n.level;
        s[2..4].copy_from_slice(&(n.count as u16).to_le_bytes());
        s[4..8].fill(0);
        for (c, w) in s[HDR..].as_chunks_mut::<4>().0.iter_mut().zip(n.w.iter()) {
            *c = w.to_le_bytes();
        }
    }

    /// Takes a node from the stock (which the caller has ensured).
    pub(super) fn take_node(&mut self, level: usize) -> u32 {
        let id = self
            .slab
            .alloc()
            .expect("ordered index: node stock was ensured");
        self.level_nodes[level] += 1;
        #[cfg(test)]
        TAKEN.with(|c| c.set(c.get() + 1));
        id
    }

    pub(super) fn drop_node(&mut self, id: u32, level: usize) {
        assert_eq!(
            self.hdr(id).0,
            level,
            "ordered index: freeing node {id:#x} at the wrong level"
        );
        self.level_nodes[level] -= 1;
        self.slab.free(id);
        #[cfg(test)]
        DROPPED.with(|c| c.set(c.get() + 1));
    }

    /// Descends from the root to level `stop`, taking at each node the first position
    /// whose key satisfies `pred` (`pred` is false then true along the order). At an
    /// internal node that position is the child to follow.
    pub(crate) fn descend_to(&self, pred: &mut dyn FnMut(RowId) -> bool, stop: usize) -> Path {
        assert!(self.height > 0 && stop < self.height);
        let mut p = Path {
            node: [NIL; MAX_HEIGHT],
            idx: [0; MAX_HEIGHT],
        };
        let mut id = self.root;
        for lvl in (stop..self.height).rev() {
            let (level, n) = self.hdr(id);
            assert_eq!(
                level, lvl,
                "ordered index: node {id:#x} at level {level}, expected {lvl}"
            );
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if pred(RowId(self.word(id, mid))) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            p.node[lvl] = id;
            p.idx[lvl] = lo;
            if lvl > stop {
                id = self.child(id, lo);
            }
        }
        p
    }

    pub(crate) fn descend(&self, pred: &mut dyn FnMut(RowId) -> bool) -> Path {
        self.descend_to(pred, 0)
    }

    /// Moves the path to the first entry of the next leaf. False at the last leaf.
    pub(crate) fn next_leaf(&self, p: &mut Path) -> bool {
        for lvl in 1..self.height {
            if p.idx[lvl] < self.hdr(p.node[lvl]).1 {
                p.idx[lvl] += 1;
                for l in (0..lvl).rev() {
                    p.node[l] = self.child(p.node[l + 1], p.idx[l + 1]);
                    p.idx[l] = 0;
                }
                return true;
            }
        }
        false
    }

    /// Moves the path past the last entry of the previous leaf. False at the first leaf.
    pub(crate) fn prev_leaf(&self, p: &mut Path) -> bool {
        for lvl in 1..self.height {
            if p.idx[lvl] > 0 {
                p.idx[lvl] -= 1;
                for l in (0..lvl).rev() {
                    p.node[l] = self.child(p.node[l + 1], p.idx[l + 1]);
                    p.idx[l] = self.hdr(p.node[l]).1;
                }
                return true;
            }
        }
        false
    }

    /// The leaf of `p` has a new smallest entry `v`: rewrite the separator that names it
    /// (in the lowest ancestor where the path is not on the first child). None for the
    /// leftmost leaf.
    pub(super) fn set_leaf_min(&mut self, p: &Path, v: u32) {
        for l in 1..self.height {
            if p.idx[l] > 0 {
                self.set_word(p.node[l], p.idx[l] - 1, v);
                return;
            }
        }
    }

    /// Inserts `row`. Does not fail while a reservation covers it (see `reserve`); on
    /// `Err(902)` the index is unchanged.
    pub fn insert(
        &mut self,
        pool: &PagePool,
        row: RowId,
        cmp: &mut KeyCmp<'_>,
    ) -> Result<(), NdbError> {
        if self.height == 0 {
            if !self.ensure_free(pool, 1) {
                self.settle(pool);
                return Err(codes::out_of_ordered_index_memory());
            }
            let id = self.take_node(0);
            let mut n = Node::new(0);
            n.w[0] = row.0;
            n.count = 1;
            self.store(id, &n);
            self.root = id;
            self.height = 1;
        } else {
            let p = self.descend(&mut |e| gt(cmp, e, row));
            let (leaf, j) = (p.node[0], p.idx[0]);
            if j > 0 && self.word(leaf, j - 1) == row.0 {
                debug_assert!(false, "ordered index: row {row:?} inserted twice");
                return Ok(());
            }
            let need = self.split_need(&p);
            if need > 0 && !self.ensure_free(pool, need) {
                self.settle(pool);
                return Err(codes::out_of_ordered_index_memory());
            }
            self.insert_at(&p, row.0);
        }
        self.len += 1;
        self.settle(pool);
        Ok(())
    }

    /// Nodes an insert at `p` allocates: one per full node from the leaf up, plus a new
    /// root when the root is full too.
    pub(super) fn split_need(&self, p: &Path) -> u64 {
        if self.hdr(p.node[0]).1 < self.leaf_cap {
            return 0;
        }
        let mut need = 1;
        for lvl in 1..self.height {
            if self.hdr(p.node[lvl]).1 < self.int_keys {
                return need;
            }
            need += 1;
        }
        need + 1
    }

    /// Nodes inserting `row` now would allocate (tests look for the worst spot).
    #[cfg(test)]
    pub(crate) fn insert_need(&self, row: RowId, cmp: &mut KeyCmp<'_>) -> u64 {
        if self.height == 0 {
            return 1;
        }
        let p = self.descend(&mut |e| gt(cmp, e, row));
        self.split_need(&p)
    }

    pub(super) fn ensure_free(&mut self, pool: &PagePool, need: u64) -> bool {
        while self.slab.free_slots() < need {
            if !self.slab.grow(pool) {
                return false;
            }
        }
        true
    }

    /// Removes `row`; false when it is not in the index. Never allocates.
    pub fn remove(&mut self, pool: &PagePool, row: RowId, cmp: &mut KeyCmp<'_>) -> bool {
        let found = self.remove_entry(row, cmp);
        if found {
            self.settle(pool);
            let t = self.reservation_target();
            let per = u64::from(self.slab.slots_per_page());
            if self.slab.free_slots() >= t + per + per / 4 && !self.slab.has_empty_page() {
                self.evacuate_one(cmp);
                self.slab.release_empty(pool, t);
            }
        }
        found
    }

    pub(super) fn remove_entry(&mut self, row: RowId, cmp: &mut KeyCmp<'_>) -> bool {
        if self.height == 0 {
            return false;
        }
        let mut p = self.descend(&mut |e| gt(cmp, e, row));
        let leaf = p.node[0];
        if p.idx[0] == 0 || self.word(leaf, p.idx[0] - 1) != row.0 {
            return false;
        }
        let j = p.idx[0] - 1;
        p.idx[0] = j;
        let mut n = self.load(leaf);
        if j == 0 {
            // `row` may be a separator: name its successor instead. Without successor
            // (last entry of the rightmost leaf) the rebalance below removes it.
            let succ = if n.count >= 2 {
                Some(n.w[1])
            } else {
                let mut q = p;
                if self.next_leaf(&mut q) {
                    Some(self.word(q.node[0], 0))
                } else {
                    None
                }
            };
            if let Some(s) = succ {
                self.set_leaf_min(&p, s);
            }
        }
        n.w.copy_within(j + 1..n.count, j);
        n.count -= 1;
        self.store(leaf, &n);
        self.len -= 1;
        self.rebalance(&p);
        true
    }
}
