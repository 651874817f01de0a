//! DBTUX: an ordered index of one fragment — a B+tree of row ids whose keys are read
//! from the rows through caller-supplied comparison closures.
//!
//! Order: entries are ordered by `(index key, row id)`; `cmp(a, b)` compares the index
//! keys of rows `a` and `b`, ties are broken here by row id, so the order is total and a
//! scan can resume strictly after any `(key, row)` it returned.
//!
//! Layout: nodes are 512-byte slots (64 per 32 KB `PageKind::OrderedIndex` page) from a
//! [`Slab`]. A node is an 8-byte header — magic `0xB7`, level (0 = leaf), `u16` count —
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

use super::slab::{NIL, Slab};
use crate::error::{NdbError, codes};
use crate::storage::RowId;
use crate::storage::pool::{PageKind, PagePool};
use std::cmp::Ordering;

pub(crate) const NODE_BYTES: usize = 512;
const HDR: usize = 8;
pub(crate) const WORDS: usize = (NODE_BYTES - HDR) / 4;
/// Entries of a leaf.
pub(crate) const LEAF_CAP: usize = WORDS;
/// Keys of an internal node (children: one more).
pub(crate) const INT_KEYS: usize = (WORDS - 1) / 2;
const CHILD_BASE: usize = INT_KEYS;
pub(crate) const MAX_HEIGHT: usize = 24;
const MAGIC: u8 = 0xB7;

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
    fn new(level: usize) -> Node {
        Node {
            level: level as u8,
            count: 0,
            w: [0; WORDS],
        }
    }
    #[inline]
    fn set_child(&mut self, i: usize, c: u32) {
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

    // ---- node access -------------------------------------------------------------

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
    fn set_word(&mut self, id: u32, i: usize, v: u32) {
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

    fn store(&mut self, id: u32, n: &Node) {
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
    fn take_node(&mut self, level: usize) -> u32 {
        let id = self
            .slab
            .alloc()
            .expect("ordered index: node stock was ensured");
        self.level_nodes[level] += 1;
        id
    }

    fn drop_node(&mut self, id: u32, level: usize) {
        assert_eq!(
            self.hdr(id).0,
            level,
            "ordered index: freeing node {id:#x} at the wrong level"
        );
        self.level_nodes[level] -= 1;
        self.slab.free(id);
    }

    // ---- navigation --------------------------------------------------------------

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
    fn set_leaf_min(&mut self, p: &Path, v: u32) {
        for l in 1..self.height {
            if p.idx[l] > 0 {
                self.set_word(p.node[l], p.idx[l] - 1, v);
                return;
            }
        }
    }

    // ---- insert ------------------------------------------------------------------

    /// Inserts `row`. Consumes one reserved insert if any is outstanding; an insert covered
    /// by a reservation does not fail. On `Err(902)` the index is unchanged.
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
        self.reserved = self.reserved.saturating_sub(1);
        self.settle(pool);
        Ok(())
    }

    /// Nodes an insert at `p` allocates: one per full node from the leaf up, plus a new
    /// root when the root is full too.
    fn split_need(&self, p: &Path) -> u64 {
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

    fn ensure_free(&mut self, pool: &PagePool, need: u64) -> bool {
        while self.slab.free_slots() < need {
            if !self.slab.grow(pool) {
                return false;
            }
        }
        true
    }

    /// Inserts entry `v` at the leaf position of `p`, splitting up the path as needed
    /// (the stock holds the nodes: see `split_need`).
    fn insert_at(&mut self, p: &Path, v: u32) {
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
            (c + 1) / 2
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
    fn insert_into_internal(
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

    // ---- remove ------------------------------------------------------------------

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

    fn remove_entry(&mut self, row: RowId, cmp: &mut KeyCmp<'_>) -> bool {
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

    /// Restores the fill invariant from the leaf of `p` upward after a removal (merges
    /// free nodes into the stock; nothing is allocated).
    fn rebalance(&mut self, p: &Path) {
        for lvl in 0..self.height {
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
    fn remove_from_internal(&mut self, id: u32, k: usize) {
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

    // ---- relocate ----------------------------------------------------------------

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
            let id = self
                .slab
                .alloc()
                .expect("ordered index: the freed root is in the stock");
            self.level_nodes[0] += 1;
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
            let toward_right = gt(cmp, old, new);
            self.carry_insert(p, new.0, toward_right);
        }
        self.len += 1;
        true
    }

    /// Inserts `v` at the full leaf position `p`, pushing the overflowing entry into the
    /// next (or previous) leaf, and so on until a leaf has room.
    fn carry_insert(&mut self, mut p: Path, mut v: u32, toward_right: bool) {
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

    // ---- reservations and the node stock ----------------------------------------

    /// Makes sure the next `n_inserts` inserts cannot fail for lack of pages: allocates
    /// pages to the node stock now. `Err(902)` (nothing reserved) if the pool cannot.
    pub fn reserve(&mut self, pool: &PagePool, n_inserts: usize) -> Result<(), NdbError> {
        let total = self.reserved + n_inserts as u64;
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

    /// Gives back reserved inserts that will not happen; the stock shrinks at the next
    /// operation that holds the pool.
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

    fn target_for(&self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.nodes_for(n) + self.height as u64 + 2
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
                    2 * (first + s / g)
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
            total += splits;
            s = splits;
        }
        total
    }

    /// Tops the stock up to the reservation target (best effort) and returns the pages
    /// beyond it whose nodes are all free.
    fn settle(&mut self, pool: &PagePool) {
        let t = self.reservation_target();
        while self.slab.free_slots() < t && self.slab.grow(pool) {}
        self.slab.release_empty(pool, t);
    }

    /// Moves every node of the emptiest page elsewhere so that the page becomes free.
    fn evacuate_one(&mut self, cmp: &mut KeyCmp<'_>) {
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
