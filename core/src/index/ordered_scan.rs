//! Scans of the ordered index (positioning by [`Seek`], batched collection in either
//! direction) and its full structural check.
//!
//! A scan position is a root-to-leaf [`Path`] whose leaf index names the current entry;
//! moving past a leaf's end climbs the path to the nearest ancestor with a further child
//! and descends its leftmost (or rightmost) branch, so no leaf links are needed. Every
//! positioning is one descent with a monotone predicate (false, then true, along the
//! order): the first entry for which it holds is found by binary search in each node —
//! for an internal node, the number of separators for which it is false is the child to
//! follow, because separator `i` is the smallest entry of child `i + 1`.
//!
//! Bounds compare only the row's key (possibly a prefix of the index columns), so an
//! inclusive ascending bound starts at the first entry equal on the prefix and an
//! inclusive descending bound at the last one; `After` adds the row id to the
//! comparison, which makes resumption exact even among duplicate keys and across
//! modifications made between batches.

use super::ordered::{KeyCmp, MAX_HEIGHT, OrderedIndex, Path, ScanDirection, Seek, gt};
use crate::storage::RowId;
use std::cmp::Ordering;

impl OrderedIndex {
    /// Collects up to `limit` row ids into `out`, in `dir` order, starting at `start`,
    /// stopping early when `stop(row)` returns true (that row is not collected). Returns
    /// true when the end of the index (or the stop condition) was reached, false when
    /// `limit` cut the batch short.
    pub fn collect(
        &self,
        dir: ScanDirection,
        start: Seek<'_>,
        limit: usize,
        stop: &mut dyn FnMut(RowId) -> bool,
        out: &mut Vec<RowId>,
    ) -> bool {
        if self.height == 0 {
            return true;
        }
        let asc = dir == ScanDirection::Ascending;
        // Find the first entry (in index order) satisfying a predicate; descending scans
        // then step back one entry.
        let mut p = match start {
            Seek::Start => {
                if asc {
                    self.descend(&mut |_| true)
                } else {
                    self.descend(&mut |_| false)
                }
            }
            Seek::Bound { cmp, inclusive } => self.descend(&mut |e| {
                let o = cmp(e);
                // asc: first key > bound (>= if inclusive); desc: first key >= bound
                // (> if inclusive), then one back.
                if asc == inclusive {
                    o != Ordering::Less
                } else {
                    o == Ordering::Greater
                }
            }),
            Seek::After { cmp, last } => self.descend(&mut |e| match cmp(e) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => {
                    if asc {
                        e > last
                    } else {
                        e >= last
                    }
                }
            }),
        };
        let mut valid = if asc {
            self.settle_forward(&mut p)
        } else {
            self.step_back(&mut p)
        };
        // Each round either returns or collects one row (`taken` rows so far), so
        // `limit + 1` rounds suffice.
        for taken in 0..=limit {
            if !valid {
                return true;
            }
            let row = RowId(self.word(p.node[0], p.idx[0]));
            if stop(row) {
                return true;
            }
            if taken == limit {
                return false;
            }
            out.push(row);
            valid = if asc {
                p.idx[0] += 1;
                self.settle_forward(&mut p)
            } else {
                self.step_back(&mut p)
            };
        }
        unreachable!("ordered index: collect ran past its limit");
    }

    /// Makes the leaf position of `p` name an entry, moving to the next leaf when it is
    /// past the end. False at the end of the index.
    fn settle_forward(&self, p: &mut Path) -> bool {
        if p.idx[0] < self.hdr(p.node[0]).1 {
            return true;
        }
        // Leaves are never empty, so one move suffices.
        self.next_leaf(p)
    }

    /// Moves `p` to the previous entry. False before the start of the index.
    fn step_back(&self, p: &mut Path) -> bool {
        if p.idx[0] > 0 {
            p.idx[0] -= 1;
            return true;
        }
        if !self.prev_leaf(p) {
            return false;
        }
        assert!(p.idx[0] > 0, "ordered index: empty leaf");
        p.idx[0] -= 1;
        true
    }

    /// Verifies the structural invariants: levels, fill, strict `(key, row id)` order
    /// along the leaves, separators equal to the smallest entry of their right subtree,
    /// entry and node counts, and the slab's bookkeeping.
    pub fn check(&self, cmp: &mut KeyCmp<'_>) -> Result<(), String> {
        self.slab.check()?;
        let mut nodes = [0u64; MAX_HEIGHT];
        let mut entries = 0u64;
        if self.height == 0 {
            if self.len != 0
                || self.level_nodes.iter().any(|&n| n != 0)
                || self.slab.used_slots() != 0
            {
                return Err("ordered index: empty tree with entries or nodes".into());
            }
            return Ok(());
        }
        let mut last: Option<RowId> = None;
        self.check_node(
            self.root,
            self.height - 1,
            (true, true, true),
            cmp,
            &mut nodes,
            &mut entries,
            &mut last,
        )?;
        if entries != self.len {
            return Err(format!(
                "ordered index: {entries} entries, len {}",
                self.len
            ));
        }
        if nodes != self.level_nodes {
            return Err(format!(
                "ordered index: nodes per level {nodes:?}, recorded {:?}",
                self.level_nodes
            ));
        }
        let total: u64 = nodes.iter().sum();
        if total != self.slab.used_slots() {
            return Err(format!(
                "ordered index: {total} nodes reachable, {} allocated",
                self.slab.used_slots()
            ));
        }
        Ok(())
    }

    /// Checks the subtree of `id` (at `level`); returns its smallest entry.
    /// `edge` = (leftmost, rightmost, root).
    #[allow(clippy::too_many_arguments)]
    fn check_node(
        &self,
        id: u32,
        level: usize,
        edge: (bool, bool, bool),
        cmp: &mut KeyCmp<'_>,
        nodes: &mut [u64; MAX_HEIGHT],
        entries: &mut u64,
        last: &mut Option<RowId>,
    ) -> Result<RowId, String> {
        let (lv, count) = self.hdr(id);
        if lv != level {
            return Err(format!(
                "ordered index: node {id:#x} at level {lv}, expected {level}"
            ));
        }
        nodes[level] += 1;
        let (leftmost, rightmost, root) = edge;
        if level == 0 {
            let min = if root || leftmost || rightmost {
                1
            } else {
                self.leaf_cap / 2
            };
            if count < min || count > self.leaf_cap {
                return Err(format!("ordered index: leaf {id:#x} holds {count} entries"));
            }
            for i in 0..count {
                let e = RowId(self.word(id, i));
                if let Some(prev) = *last
                    && !gt(cmp, e, prev)
                {
                    return Err(format!("ordered index: {e:?} does not follow {prev:?}"));
                }
                *last = Some(e);
            }
            *entries += count as u64;
            return Ok(RowId(self.word(id, 0)));
        }
        let min = if root { 1 } else { self.int_keys / 2 };
        if count < min || count > self.int_keys {
            return Err(format!(
                "ordered index: internal node {id:#x} holds {count} keys"
            ));
        }
        let mut smallest = None;
        for i in 0..=count {
            let c = self.child(id, i);
            let edge = (leftmost && i == 0, rightmost && i == count, false);
            let m = self.check_node(c, level - 1, edge, cmp, nodes, entries, last)?;
            if i == 0 {
                smallest = Some(m);
            } else if self.word(id, i - 1) != m.0 {
                return Err(format!(
                    "ordered index: separator {} of node {id:#x} is not the smallest entry {m:?} of its subtree",
                    self.word(id, i - 1)
                ));
            }
        }
        Ok(smallest.expect("internal node has children"))
    }
}
