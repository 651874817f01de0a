//! OPTIMIZE TABLE's disk phase on one fragment: disk records moved out of the least used
//! extents, so that those extents empty and go back to the tablespace, where any table
//! (or a new data file's worth of data) can use them. NDB's OPTIMIZE has no effect on
//! disk data.
//!
//! The plan is the allocator's ([`FragmentDiskAlloc::begin_evacuation`]); a pass over
//! the rows in row-id order moves each committed, unlocked row's record found in an
//! extent being emptied ([`NodeDisk::move_record`]: written on a kept page, then the old
//! one freed, both undo-logged like an update that moves its record) and rewrites the
//! row's disk reference. The row is stamped with the current GCI and marked changed, as
//! an update is, so the next partial LCP writes its new reference; a crash before that
//! LCP restores the old reference together with the disk pages as the undo log leaves
//! them at the LCP, so both agree. Row ids do not change: this runs whatever else is
//! open. An I/O error fails the fragment's disk part, as one at commit does.

use super::*;
use crate::disk::node::{NodeDisk, page_of};
use crate::disk::tsman::ExtentId;

/// What moving one row's record did.
pub(super) enum DiskMove {
    Moved,
    /// No kept page had room: the pass ends.
    NoRoom,
    /// The row has no record in an extent being emptied.
    Skipped,
}

impl Fragment {
    /// Whether the table has disk columns (its rows have disk records).
    pub fn has_disk_part(&self) -> bool {
        self.disk.is_some()
    }

    /// Rewrites the owner row id in the disk record of a row that moves from `old` to
    /// `new` (in place, undo-logged); false when the undo log has no room (the row then
    /// stays). An I/O error fails the disk part, as at commit.
    pub(super) fn disk_rename_owner(&mut self, old: RowId, new: RowId) -> bool {
        let layout = &self.table.layout;
        let Some(d) = &mut self.disk else {
            return true;
        };
        let Some(r) = layout.disk_ref(self.fixed.get(old)) else {
            return true;
        };
        if d.node.undo_over_half() {
            return false;
        }
        let image = match d.read_committed(old, Some(r), |img| img.to_vec()) {
            Ok(mut img) => {
                img[0..4].copy_from_slice(&new.0.to_le_bytes());
                img
            }
            Err(e) => {
                d.fail(e);
                return false;
            }
        };
        let Ok(undo) = d.node.reserve_undo(NodeDisk::undo_for_change(image.len())) else {
            return false;
        };
        // update_record gives the undo reservation back, on error too.
        match d.node.update_record(&mut d.alloc, r, &image, undo) {
            Ok(()) => true,
            Err(e) => {
                d.fail(e);
                false
            }
        }
    }

    /// Extents the fragment's disk part owns (0 for memory tables).
    pub fn disk_extents(&self) -> u32 {
        self.disk
            .as_ref()
            .map_or(0, |d| d.alloc.extent_count() as u32)
    }

    /// Bytes of one extent of the fragment's tablespace (0 for memory tables).
    pub fn extent_bytes(&self) -> u64 {
        self.disk.as_ref().map_or(0, |d| {
            d.node.tsman.extent_pages(d.ts).map_or(0, |p| {
                u64::from(p) * crate::disk::page::DISK_PAGE_SIZE as u64
            })
        })
    }

    /// Extents an OPTIMIZE would give back now.
    pub(super) fn reclaimable_extents(&self) -> u32 {
        self.disk
            .as_ref()
            .map_or(0, |d| d.alloc.reclaimable_extents())
    }

    /// Starts the disk phase: the extents to empty (none for memory tables).
    pub(super) fn begin_disk_evacuation(&mut self) -> Vec<ExtentId> {
        self.disk
            .as_mut()
            .map_or_else(Vec::new, |d| d.alloc.begin_evacuation())
    }

    /// Ends the disk phase: the extents still owned take records again.
    pub(super) fn end_disk_evacuation(&mut self, extents: Vec<ExtentId>) {
        if let Some(d) = &mut self.disk {
            for e in extents {
                d.alloc.end_evacuation(e);
            }
        }
    }

    /// Whether `row` has a disk record in an extent being emptied.
    pub(super) fn disk_record_evacuating(&self, row: RowId) -> bool {
        let Some(d) = &self.disk else {
            return false;
        };
        self.table
            .layout
            .disk_ref(self.fixed.get(row))
            .is_some_and(|r| d.alloc.is_evacuating(page_of(r)))
    }

    /// Moves `row`'s disk record if it lies in an extent being emptied.
    pub(super) fn move_disk(&mut self, row: RowId, gci: u32) -> Result<DiskMove> {
        let layout = &self.table.layout;
        let Some(r) = layout.disk_ref(self.fixed.get(row)) else {
            return Ok(DiskMove::Skipped);
        };
        let Some(d) = &mut self.disk else {
            return Ok(DiskMove::Skipped);
        };
        if !d.alloc.is_evacuating(page_of(r)) {
            return Ok(DiskMove::Skipped);
        }
        let moved = d
            .read_committed(row, Some(r), |img| img.to_vec())
            .and_then(|mut image| {
                image[4..8].copy_from_slice(&gci.to_le_bytes());
                d.node.move_record(&mut d.alloc, r, &image)
            });
        let new_ref = match moved {
            Ok(Some(n)) => n,
            Ok(None) => return Ok(DiskMove::NoRoom),
            Err(e) => {
                d.fail(e.clone());
                return Err(e);
            }
        };
        let f = self.fixed.get_mut(row);
        layout.set_disk_ref(f, Some(new_ref));
        f[4..8].copy_from_slice(&gci.to_le_bytes());
        self.fixed.mark_changed(row, gci);
        self.lcp_counts.updated += 1;
        Ok(DiskMove::Moved)
    }
}
