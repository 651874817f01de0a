//! The disk part of a fragment's rows (DBTUP's disk rows): tables with STORAGE DISK
//! columns keep those columns in one record of a disk row page per row, reached through
//! the node's page cache; the in-memory fixed part holds the record's [`DiskRef`].
//!
//! Life of a disk record, following the rules of [`crate::disk::node`]:
//! - **insert**: prepare encodes the disk image and reserves room on a page of the
//!   fragment's extents plus undo space ([`DiskInsert`] in the lock table); commit
//!   writes the record (undo first) and stores its reference in the row; abort gives
//!   the reservation back.
//! - **update** of disk columns: prepare reads the record; an image not longer than it
//!   is rewritten in place at commit ([`DiskChange::InPlace`], undo reserved for the
//!   before-image), a longer one is written to room reserved at prepare and the old
//!   record freed ([`DiskChange::Move`]). An update of memory columns only leaves the
//!   disk record alone.
//! - **delete**: prepare reserves the undo for freeing the record, commit frees it; an
//!   extent left empty goes back to the tablespace.
//!
//! Nothing on a disk page changes before commit, so an uncommitted image is read from
//! the lock table and a reader never sees another transaction's change.
//!
//! Commit cannot fail for space (everything was reserved at prepare). It can meet an
//! I/O error (a page that must be read back and cannot be): NDB's data node stops on
//! it; here the fragment's disk part becomes *failed* — the error is kept, the
//! in-memory part of the commit completes, and every later disk access of the fragment
//! returns that error (the rows' memory columns stay readable).
//!
//! Invariants: a committed row of a table with disk columns has a disk reference whose
//! record names the row (row id in the image header, checked on every read); an
//! uncommitted insert has none. Lock order: fragment mutex, then the node's disk
//! managers (see `disk::node`).

use super::*;
use crate::disk::node::{DiskReservation, NodeDisk};
use crate::disk::tsman::TablespaceId;
use crate::disk::tsman::alloc::FragmentDiskAlloc;
use crate::error::NdbError;
use crate::schema::layout::DiskRef;
use crate::txn::lock::{DiskChange, DiskInsert};

/// What [`Fragment::disk_relink`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskRelinkStats {
    /// Committed rows of the fragment.
    pub rows: u64,
    pub extents: u64,
    pub pages: u64,
    /// Records given to the row they name.
    pub records_linked: u64,
    /// Records no row claims, freed.
    pub orphans_freed: u64,
}

/// A fragment's disk part: the node's disk managers, the tablespace and the extents
/// the fragment owns.
pub struct FragDisk {
    pub node: Arc<NodeDisk>,
    pub ts: TablespaceId,
    pub alloc: FragmentDiskAlloc,
    /// The error that failed a commit (see the module docs).
    failed: Option<NdbError>,
}

impl std::fmt::Debug for FragDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragDisk")
            .field("node", &self.node.node_id)
            .field("ts", &self.ts)
            .field("failed", &self.failed)
            .finish()
    }
}

impl FragDisk {
    /// The disk part of fragment `partition` of `table` on the node of `node`, or None
    /// when the table has no disk columns. Error 755 when its tablespace is unknown.
    pub fn for_table(
        node: &Arc<NodeDisk>,
        table: &TableDef,
        partition: u32,
    ) -> Result<Option<FragDisk>> {
        if !table.layout.has_disk() {
            return Ok(None);
        }
        let name = table.tablespace.as_deref().unwrap_or("");
        let ts = node
            .tsman
            .lookup(name)
            .ok_or_else(|| codes::invalid_tablespace(name))?;
        Ok(Some(FragDisk {
            node: node.clone(),
            ts,
            alloc: NodeDisk::fragment_alloc(table.id, partition),
            failed: None,
        }))
    }

    fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Reads the committed record `r` of `row` into `f`, checking that it names the row.
    pub fn read_committed<R>(
        &self,
        row: RowId,
        r: Option<DiskRef>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        self.check_failed()?;
        let r =
            r.ok_or_else(|| codes::corrupt_page(format_args!("row {} has no disk record", row.0)))?;
        self.node
            .read_record(r, |img| match RowLayout::disk_header(img) {
                Some((owner, _)) if owner == row.0 => Ok(f(img)),
                other => Err(codes::corrupt_page(format_args!(
                    "disk record {r:?} belongs to row {:?}, not {}",
                    other.map(|h| h.0),
                    row.0
                ))),
            })?
    }

    /// Prepare of an insert: room and undo for `image`.
    fn reserve(&mut self, len: usize, table_name: &str) -> Result<DiskReservation> {
        self.check_failed()?;
        self.node
            .reserve_record(&mut self.alloc, self.ts, len, table_name)
    }

    pub(super) fn fail(&mut self, e: NdbError) {
        if self.failed.is_none() {
            self.failed = Some(e);
        }
    }
}

impl Fragment {
    /// Whether reading `cols` needs the rows' disk images.
    #[inline]
    pub(super) fn needs_disk(&self, cols: &[usize]) -> bool {
        self.disk.is_some()
            && cols
                .iter()
                .any(|&c| c != ROW_GCI_COLUMN && self.table.layout.is_disk(c))
    }

    /// Runs `f` on the disk image of `row` as `txn` sees it: its own pending image, or
    /// the committed record.
    pub(super) fn with_disk_image<R>(
        &self,
        txn: TxnId,
        row: RowId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        let Some(d) = &self.disk else {
            return Ok(f(&[]));
        };
        let pending = self.locks.get(row).and_then(|l| l.pending_of(txn));
        match pending {
            Some(Pending::Insert {
                disk: Some(ins), ..
            }) => Ok(f(&ins.image)),
            Some(Pending::Update {
                disk: Some(change), ..
            }) => Ok(f(change.image())),
            _ => d.read_committed(row, self.table.layout.disk_ref(self.fixed.get(row)), f),
        }
    }

    /// Prepare of an insert of `row` (already allocated in memory): its disk part.
    pub(super) fn disk_prepare_insert(
        &mut self,
        row: RowId,
        values: &[Value],
    ) -> Result<Option<Box<DiskInsert>>> {
        let table = self.table.clone();
        let Some(d) = &mut self.disk else {
            return Ok(None);
        };
        let mut image = Vec::new();
        table.layout.encode_disk(values, row.0, 0, &mut image);
        let res = d.reserve(image.len(), &table.name)?;
        Ok(Some(Box::new(DiskInsert { image, res })))
    }

    /// A new image for the transaction's own pending insert: the reservation is kept
    /// when the image still fits it, otherwise a new one replaces it. On error the old
    /// one is untouched (the caller still owns it).
    pub(super) fn disk_reprepare_insert(
        &mut self,
        row: RowId,
        values: &[Value],
        old: &DiskInsert,
    ) -> Result<Box<DiskInsert>> {
        let table = self.table.clone();
        let mut image = Vec::new();
        table.layout.encode_disk(values, row.0, 0, &mut image);
        let fits = crate::disk::rowpage::space_needed(image.len()) <= old.res.page_bytes as usize;
        let res = match (&mut self.disk, fits) {
            (_, true) => old.res,
            (Some(d), false) => d.reserve(image.len(), &table.name)?,
            (None, false) => return Err(codes::internal("disk image of a memory table")),
        };
        Ok(Box::new(DiskInsert { image, res }))
    }

    /// Prepare of an update: the disk change, None when no disk column changes.
    pub(super) fn disk_prepare_change(
        &mut self,
        row: RowId,
        values: &[Value],
    ) -> Result<Option<Box<DiskChange>>> {
        let table = self.table.clone();
        let layout = &table.layout;
        let Some(d) = &mut self.disk else {
            return Ok(None);
        };
        let mut image = Vec::new();
        layout.encode_disk(values, row.0, 0, &mut image);
        let (same, old_len) =
            d.read_committed(row, layout.disk_ref(self.fixed.get(row)), |old| {
                (old.get(8..) == image.get(8..), old.len())
            })?;
        if same {
            return Ok(None);
        }
        let undo_bytes = d.node.reserve_undo(NodeDisk::undo_for_change(old_len))?;
        if image.len() <= old_len {
            return Ok(Some(Box::new(DiskChange::InPlace { image, undo_bytes })));
        }
        match d.reserve(image.len(), &table.name) {
            Ok(res) => Ok(Some(Box::new(DiskChange::Move {
                image,
                res,
                free_undo_bytes: undo_bytes,
            }))),
            Err(e) => {
                d.node.release_undo(undo_bytes);
                Err(e)
            }
        }
    }

    /// Prepare of a delete: the undo space for freeing the disk record.
    pub(super) fn disk_prepare_delete(&mut self, row: RowId) -> Result<u64> {
        let Some(d) = &self.disk else {
            return Ok(0);
        };
        let r = self.table.layout.disk_ref(self.fixed.get(row));
        let len = d.read_committed(row, r, |img| img.len())?;
        d.node.reserve_undo(NodeDisk::undo_for_change(len))
    }

    /// Abort (or replacement) of a pending insert's disk part.
    pub(super) fn disk_cancel_insert(&mut self, ins: Option<Box<DiskInsert>>) {
        if let (Some(d), Some(ins)) = (&mut self.disk, ins) {
            d.node.cancel_reservation(&mut d.alloc, ins.res);
        }
    }

    /// Abort (or replacement) of a pending update's disk change.
    pub(super) fn disk_cancel_change(&mut self, change: Option<Box<DiskChange>>) {
        let (Some(d), Some(change)) = (&mut self.disk, change) else {
            return;
        };
        match *change {
            DiskChange::InPlace { undo_bytes, .. } => d.node.release_undo(undo_bytes),
            DiskChange::Move {
                res,
                free_undo_bytes,
                ..
            } => {
                d.node.cancel_reservation(&mut d.alloc, res);
                d.node.release_undo(free_undo_bytes);
            }
        }
    }

    /// Abort of a pending delete's undo reservation.
    pub(super) fn disk_cancel_delete(&mut self, undo_bytes: u64) {
        if let Some(d) = &self.disk {
            d.node.release_undo(undo_bytes);
        }
    }

    /// Commit of an insert: writes the record and stores its reference in the row.
    pub(super) fn disk_commit_insert(
        &mut self,
        row: RowId,
        ins: Option<Box<DiskInsert>>,
        gci: u32,
    ) {
        let (Some(d), Some(mut ins)) = (&mut self.disk, ins) else {
            return;
        };
        ins.image[4..8].copy_from_slice(&gci.to_le_bytes());
        match d.node.insert_record(&mut d.alloc, ins.res, &ins.image) {
            Ok(r) => {
                let f = self.fixed.get_mut(row);
                self.table.layout.set_disk_ref(f, Some(r));
            }
            Err(e) => d.fail(e),
        }
    }

    /// Commit of an update's disk change; `old` is the row's reference before it.
    /// Returns the row's reference after it.
    pub(super) fn disk_commit_change(
        &mut self,
        old: Option<DiskRef>,
        change: Option<Box<DiskChange>>,
        gci: u32,
    ) -> Option<DiskRef> {
        let (true, Some(change)) = (self.disk.is_some(), change) else {
            return old;
        };
        let Some(old_ref) = old else {
            // Prepare read the record, so the row has one; keep the accounts straight.
            self.disk_cancel_change(Some(change));
            return None;
        };
        let Some(d) = &mut self.disk else {
            return Some(old_ref);
        };
        let r = match *change {
            DiskChange::InPlace {
                mut image,
                undo_bytes,
            } => {
                image[4..8].copy_from_slice(&gci.to_le_bytes());
                d.node
                    .update_record(&mut d.alloc, old_ref, &image, undo_bytes)
                    .map(|()| old_ref)
            }
            DiskChange::Move {
                mut image,
                res,
                free_undo_bytes,
            } => {
                image[4..8].copy_from_slice(&gci.to_le_bytes());
                match d.node.insert_record(&mut d.alloc, res, &image) {
                    Ok(new_ref) => d
                        .node
                        .free_record(&mut d.alloc, old_ref, free_undo_bytes)
                        .map(|()| new_ref),
                    Err(e) => {
                        d.node.release_undo(free_undo_bytes);
                        Err(e)
                    }
                }
            }
        };
        match r {
            Ok(r) => Some(r),
            Err(e) => {
                d.fail(e);
                old
            }
        }
    }

    /// Commit of a delete: frees the row's disk record.
    pub(super) fn disk_commit_delete(&mut self, row: RowId, undo_bytes: u64) {
        let r = self.table.layout.disk_ref(self.fixed.get(row));
        let Some(d) = &mut self.disk else {
            return;
        };
        let res = match r {
            Some(r) => d.node.free_record(&mut d.alloc, r, undo_bytes),
            None => {
                d.node.release_undo(undo_bytes);
                Ok(())
            }
        };
        if let Err(e) = res {
            d.fail(e);
        }
    }

    /// A row inserted as committed at once (bulk load, redo replay): writes its disk
    /// record `image` (row id and GCI already in its header). Nothing without disk
    /// columns.
    pub(super) fn disk_insert_image(&mut self, row: RowId, image: &[u8]) -> Result<()> {
        let table = self.table.clone();
        let Some(d) = &mut self.disk else {
            return Ok(());
        };
        // insert_record gives the reservation back when it fails.
        let r = d
            .reserve(image.len(), &table.name)
            .and_then(|res| d.node.insert_record(&mut d.alloc, res, image))?;
        let f = self.fixed.get_mut(row);
        table.layout.set_disk_ref(f, Some(r));
        Ok(())
    }

    /// Frees the disk record of a row (a failed bulk-load batch, before anyone saw it).
    pub(super) fn disk_free_now(&mut self, row: RowId) {
        let r = self.table.layout.disk_ref(self.fixed.get(row));
        let (Some(d), Some(r)) = (&mut self.disk, r) else {
            return;
        };
        let len = d.read_committed(row, Some(r), |img| img.len()).unwrap_or(0);
        // The log has room for this record unless it is full to the last byte; the
        // free is logged either way (the reservation only keeps accounts).
        let undo = d
            .node
            .reserve_undo(NodeDisk::undo_for_change(len))
            .unwrap_or(0);
        if let Err(e) = d.node.free_record(&mut d.alloc, r, undo) {
            d.fail(e);
        }
        let f = self.fixed.get_mut(row);
        self.table.layout.set_disk_ref(f, None);
    }

    /// DROP TABLE / TRUNCATE: every extent of the fragment back to the tablespace.
    pub(super) fn disk_release_all(&mut self) {
        if let Some(d) = &mut self.disk
            && let Err(e) = d.node.release_fragment(&mut d.alloc)
        {
            d.fail(e);
        }
    }

    /// System restart, after the node's undo pass (disk pages at the undo keep's
    /// state) and the restore of the memory part from its checkpoint: links each row to
    /// the record on disk that names it. The allocator is rebuilt from the extent
    /// headers with every page's actual free bytes; every row's reference is cleared,
    /// then each record on the fragment's pages is given to the committed row its
    /// header names (if that row has none yet) or freed (undo-logged) as an orphan — a
    /// row deleted, or a record moved, after the keep. A row left without a record was
    /// inserted or moved after the keep: its redo record (replayed next) writes it.
    pub fn disk_relink(&mut self) -> Result<DiskRelinkStats> {
        let mut stats = DiskRelinkStats::default();
        let Fragment {
            table, fixed, disk, ..
        } = self;
        let layout = &table.layout;
        let Some(d) = disk else {
            return Ok(stats);
        };
        d.failed = None;
        d.alloc = FragmentDiskAlloc::from_tablespace(&d.node.tsman, d.alloc.owner())?;
        let mut cur = RowId(0);
        while let Some(r) = fixed.next_row(cur) {
            let f = fixed.get_mut(r);
            if header_of(f) & ROW_ALLOC == 0 {
                layout.set_disk_ref(f, None);
                stats.rows += 1;
            }
            cur = RowId(r.0 + 1);
        }
        // Every page first (exact free bytes), so that no extent looks empty early.
        let mut found = Vec::new();
        for extent in d.alloc.extents() {
            stats.extents += 1;
            for page in d.node.tsman.extent_pages_of(extent)? {
                let (free, recs) = d.node.page_records(page)?;
                d.node.set_page_free_exact(&mut d.alloc, page, free)?;
                stats.pages += 1;
                found.extend(recs.into_iter().map(|r| (page, r)));
            }
        }
        for (page, rec) in found {
            let r = NodeDisk::record_ref(page, rec.slot)?;
            let row = RowId(rec.row_id);
            let linkable = fixed
                .header(row)
                .is_some_and(|h| h & ROW_ALLOC == 0 && layout.disk_ref(fixed.get(row)).is_none());
            if linkable {
                layout.set_disk_ref(fixed.get_mut(row), Some(r));
                stats.records_linked += 1;
            } else {
                let undo = d.node.reserve_undo(NodeDisk::undo_for_change(rec.len))?;
                d.node.free_record(&mut d.alloc, r, undo)?;
                stats.orphans_freed += 1;
            }
        }
        Ok(stats)
    }

    /// Committed rows of a table with disk columns that have no disk record (after a
    /// system restart's redo replay there must be none).
    pub fn disk_rows_without_record(&self) -> u64 {
        if self.disk.is_none() {
            return 0;
        }
        let layout = &self.table.layout;
        let mut n = 0;
        let mut cur = RowId(0);
        while let Some(r) = self.fixed.next_row(cur) {
            let f = self.fixed.get(r);
            if header_of(f) & ROW_ALLOC == 0 && layout.disk_ref(f).is_none() {
                n += 1;
            }
            cur = RowId(r.0 + 1);
        }
        n
    }

    /// Checks the disk part: every committed row's record exists and names the row,
    /// and the allocator agrees with the tablespace.
    pub(super) fn check_disk(&self) -> std::result::Result<(), String> {
        let Some(d) = &self.disk else {
            return Ok(());
        };
        d.alloc.check(&d.node.tsman).map_err(|e| e.to_string())?;
        let mut cur = RowId(0);
        while let Some(r) = self.fixed.next_row(cur) {
            let f = self.fixed.get(r);
            if header_of(f) & ROW_ALLOC == 0 {
                d.read_committed(r, self.table.layout.disk_ref(f), |_| ())
                    .map_err(|e| format!("row {r:?}: {e}"))?;
            }
            cur = RowId(r.0 + 1);
        }
        // And the other way: every record on the fragment's pages is its row's.
        for extent in d.alloc.extents() {
            let pages = d
                .node
                .tsman
                .extent_pages_of(extent)
                .map_err(|e| e.to_string())?;
            for page in pages {
                let (_, recs) = d.node.page_records(page).map_err(|e| e.to_string())?;
                for rec in recs {
                    let row = RowId(rec.row_id);
                    let want = NodeDisk::record_ref(page, rec.slot).map_err(|e| e.to_string())?;
                    let owned = self.fixed.header(row).is_some_and(|h| {
                        h & ROW_ALLOC == 0
                            && self.table.layout.disk_ref(self.fixed.get(row)) == Some(want)
                    });
                    if !owned {
                        return Err(format!(
                            "disk record {want:?} names row {}, which does not own it",
                            rec.row_id
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
