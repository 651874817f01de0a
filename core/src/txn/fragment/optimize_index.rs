//! OPTIMIZE TABLE's last phase on one fragment: the leaves of each ordered index packed,
//! one leaf group per call ([`OrderedIndex::pack_group`]), resuming by key.
//!
//! The position between calls is the last entry of the previous group with a copy of its
//! index key (as index scans resume), so it stays exact whatever changes in between: the
//! next group is the one holding the first entry after `(key, row id)`, read from the
//! copy even if that row has been deleted meanwhile. Row ids do not change, so this runs
//! while scans, LCP scans and node-restart copies are open.

use super::*;
use crate::index::PackStep;

/// Where the packing of one index resumes: after this entry, whose index key was this.
pub(super) type PackResume = (RowId, Vec<Option<Vec<u8>>>);

impl Fragment {
    /// Pages packing would give back, per ordered index, in the order of
    /// [`Fragment::memory`]'s `ordered`.
    pub fn ordered_reclaimable_pages(&self) -> Vec<u32> {
        self.ordered
            .iter()
            .flatten()
            .map(OrderedIndex::reclaimable_pages)
            .collect()
    }

    /// Ordered index pages held by the fragment.
    pub(super) fn ordered_pages(&self) -> u32 {
        self.ordered.iter().flatten().map(OrderedIndex::pages).sum()
    }

    /// Packs the next leaf group of ordered index `pos` after `after` (from the start
    /// when None); returns the step and the resume point for the next call (None: the
    /// index is done).
    pub(super) fn pack_index_group(
        &mut self,
        pos: usize,
        after: Option<&PackResume>,
        buf: &mut Vec<u32>,
    ) -> (PackStep, Option<PackResume>) {
        let step = {
            let Fragment {
                table,
                fixed,
                var,
                ordered,
                pool,
                ..
            } = &mut *self;
            let done = PackStep {
                last: None,
                leaves_freed: 0,
                entries: 0,
            };
            let Some(Some(o)) = ordered.get_mut(pos) else {
                return (done, None);
            };
            let layout = &table.layout;
            let cols = &table.indexes[pos].columns;
            let (fixed, var) = (&*fixed, &*var);
            let row_of = |r: RowId| {
                let f = fixed.get(r);
                (f, var_of(layout, var, f))
            };
            let mut past = |e: RowId| match after {
                None => true,
                Some((last, key)) => match layout.cmp_row_bound(cols, row_of(e), key) {
                    std::cmp::Ordering::Greater => true,
                    std::cmp::Ordering::Less => false,
                    std::cmp::Ordering::Equal => e > *last,
                },
            };
            let mut cmp = |a: RowId, b: RowId| layout.cmp_rows(cols, row_of(a), row_of(b));
            o.pack_group(pool, &mut past, &mut cmp, buf)
        };
        let resume = step.last.map(|last| (last, self.index_key_of(pos, last)));
        (step, resume)
    }
}
