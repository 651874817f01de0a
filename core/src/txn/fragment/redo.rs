//! Redo records of a fragment (DBLQH's fragment log records): what a commit appends
//! and what a system restart replays.
//!
//! Records are logical and idempotent, so that replaying them over a fuzzy checkpoint
//! (which may already hold some of their effects) gives the committed state:
//! - [`REDO_WRITE`]: the whole row after the change (insert, update of disk columns,
//!   write): payload `fixed_len u32, fixed part, var_len u32, var part, disk_len u32,
//!   disk image` — the row's stored parts, the in-memory references in the fixed part
//!   meaningless on replay. Replay replaces the row with this key, or inserts it; a
//!   row that already is this image (a checkpoint whose scan came after the commit)
//!   is left alone and its page not marked changed for the next LCP.
//! - [`REDO_WRITE_MEMORY`]: an update that left the disk columns alone: the same
//!   payload with no disk image; replay keeps the row's current disk columns (the row
//!   must exist then: it is in the checkpoint or inserted by an earlier record).
//! - [`REDO_DELETE`]: payload the key bytes; replay deletes the row if present.
//!
//! Record kinds and the row image: docs/durability.md §4; the framing around them:
//! docs/redo-log.md.
//!
//! A fragment logs only when its table is logged (NDB's NoLogging tables are not) and
//! its node keeps a redo log. The records of one fragment all go to one redo part, in
//! commit order: they are appended while the fragment's mutex is held.

use super::*;
use crate::log::gcp::gci_hi;
use crate::log::redo::{EncodedRecords, RecordHeader, RedoLog};

pub const REDO_WRITE: u8 = 1;
pub const REDO_WRITE_MEMORY: u8 = 2;
pub const REDO_DELETE: u8 = 3;

/// Where a fragment's redo records go.
#[derive(Clone)]
pub struct FragRedo {
    pub log: Arc<RedoLog>,
    pub part: u32,
    /// Upper bound of one row's redo record (the back-pressure wait before a commit
    /// asks the log for this much per row).
    pub row_bytes_bound: usize,
}

impl FragRedo {
    pub fn new(log: Arc<RedoLog>, part: u32, table: &TableDef) -> FragRedo {
        let layout = &table.layout;
        let row = 64
            + 3 * 4
            + layout.fixed_size as usize
            + layout.max_var_bytes() as usize
            + if layout.has_disk() { 8 * 1024 } else { 0 };
        FragRedo {
            log,
            part,
            row_bytes_bound: row.min(64 * 1024),
        }
    }
}

impl Fragment {
    pub fn set_redo(&mut self, redo: Option<FragRedo>) {
        self.redo = redo;
    }

    pub fn redo(&self) -> Option<&FragRedo> {
        self.redo.as_ref()
    }

    /// [`Fragment::commit_row`], appending the change's redo record to `out` when the
    /// fragment logs (and the transaction changed the row).
    pub fn commit_row_logged(
        &mut self,
        txn: TxnId,
        row: RowId,
        gci: u64,
        out: &mut EncodedRecords,
    ) {
        self.commit_row_records(txn, row, gci, out, false);
    }

    /// [`Fragment::commit_row_logged`], with the record made even when the fragment
    /// does not log (`always`: the commit feeds followers, `replica` module).
    pub fn commit_row_records(
        &mut self,
        txn: TxnId,
        row: RowId,
        gci: u64,
        out: &mut EncodedRecords,
        always: bool,
    ) {
        if self.redo.is_none() && !always {
            self.commit_row(txn, row, gci_hi(gci));
            return;
        }
        let kind = match self.locks.get(row).and_then(|l| l.pending_of(txn)) {
            None => {
                self.commit_row(txn, row, gci_hi(gci));
                return;
            }
            Some(Pending::Delete { .. }) => {
                let mut key = std::mem::take(&mut self.redo_payload);
                self.row_key_of(row, &mut key);
                self.commit_row(txn, row, gci_hi(gci));
                self.push_redo(out, gci, REDO_DELETE, &key);
                self.redo_payload = key;
                return;
            }
            Some(Pending::Insert { disk, .. }) => {
                self.redo_disk.clear();
                if let Some(ins) = disk {
                    self.redo_disk.extend_from_slice(&ins.image);
                }
                REDO_WRITE
            }
            Some(Pending::Update {
                disk: Some(change), ..
            }) => {
                self.redo_disk.clear();
                self.redo_disk.extend_from_slice(change.image());
                REDO_WRITE
            }
            Some(Pending::Update { disk: None, .. }) => {
                self.redo_disk.clear();
                if self.disk.is_some() {
                    REDO_WRITE_MEMORY
                } else {
                    REDO_WRITE
                }
            }
        };
        self.commit_row(txn, row, gci_hi(gci));
        self.log_row(row, gci, kind, out);
    }

    /// The redo record of a row inserted as committed at once (bulk load, replay's own
    /// inserts are not logged).
    pub fn log_committed_insert(&mut self, row: RowId, gci: u64, out: &mut EncodedRecords) {
        if self.redo.is_none() {
            return;
        }
        self.redo_disk.clear();
        if let Some(d) = &self.disk {
            let r = self.table.layout.disk_ref(self.fixed.get(row));
            let mut image = std::mem::take(&mut self.redo_disk);
            match d.read_committed(row, r, |img| image.extend_from_slice(img)) {
                Ok(()) => {}
                // The disk part failed; the record still carries the memory part and
                // replay finds the fragment's error again.
                Err(_) => image.clear(),
            }
            self.redo_disk = image;
        }
        self.log_row(row, gci, REDO_WRITE, out);
    }

    fn log_row(&mut self, row: RowId, gci: u64, kind: u8, out: &mut EncodedRecords) {
        let mut payload = std::mem::take(&mut self.redo_payload);
        payload.clear();
        let layout = &self.table.layout;
        let fixed = self.fixed.get(row);
        push_row_image(
            &mut payload,
            fixed,
            var_of(layout, &self.var, fixed),
            &self.redo_disk,
        );
        self.push_redo(out, gci, kind, &payload);
        self.redo_payload = payload;
    }

    fn push_redo(&self, out: &mut EncodedRecords, gci: u64, kind: u8, payload: &[u8]) {
        out.push(
            &RecordHeader {
                gci,
                table_id: self.table.id,
                fragment_id: self.partition,
                kind,
            },
            payload,
        );
    }

    fn row_key_of(&self, row: RowId, out: &mut Vec<u8>) {
        let layout = &self.table.layout;
        let f = self.fixed.get(row);
        layout.row_key(f, var_of(layout, &self.var, f), out);
    }

    /// Replays one redo record of this fragment (system restart; no transaction runs).
    pub fn apply_redo(&mut self, kind: u8, payload: &[u8], gci: u64) -> Result<()> {
        let (table_id, partition) = (self.table.id, self.partition);
        let bad = move |what: &str| {
            codes::corrupt_page(format!(
                "redo record of table {table_id} fragment {partition}: {what}"
            ))
        };
        if kind == REDO_DELETE {
            let h32 = index_hash(key_hash(payload));
            if let Some(row) = self.find(payload, h32) {
                self.remove_committed(row, h32, gci_hi(gci));
            }
            return Ok(());
        }
        if kind != REDO_WRITE && kind != REDO_WRITE_MEMORY {
            return Err(bad(&format!("unknown record kind {kind}")));
        }
        let (fixed, var, disk) = split_payload(payload).ok_or_else(|| bad("truncated payload"))?;
        let table = self.table.clone();
        let layout = &table.layout;
        if fixed.len() != self.fixed.slot_size() as usize {
            return Err(bad("fixed part of the wrong size"));
        }
        let mut key = Vec::new();
        layout.row_key(fixed, var, &mut key);
        let h32 = index_hash(key_hash(&key));
        let existing = self.find(&key, h32);
        if let Some(row) = existing
            && self.disk.is_none()
        {
            if self.holds_image(row, fixed, var, gci_hi(gci)) {
                // Replay over a checkpoint that already holds this change (its scan
                // came after the commit), or a copy of an unchanged row: nothing
                // changes, and the change map stays clear (the next LCP need not
                // write the row again).
                return Ok(());
            }
            // The common case (an update of a row the replay already holds): rewrite it
            // in place, without freeing and allocating its parts again.
            return self.rewrite_committed(row, fixed, var, gci_hi(gci));
        }
        // The stored parts go back as they are (a BLOB column holds only its head and
        // parts-table reference: decoding and encoding it again would not round-trip).
        let mut disk_image = std::mem::take(&mut self.redo_disk);
        disk_image.clear();
        if kind == REDO_WRITE_MEMORY && self.disk.is_some() {
            // Replay may start before the checkpoint the fragment was restored from
            // (its keep position moves after the checkpoint completes): a row that
            // checkpoint already shows deleted has a later delete record coming.
            let Some(row) = existing else {
                self.redo_disk = disk_image;
                return Ok(());
            };
            let d = self.disk.as_ref().ok_or_else(|| bad("no disk part"))?;
            let Some(r) = layout.disk_ref(self.fixed.get(row)) else {
                // The row the checkpoint holds got its disk record after the undo keep
                // (the undo pass removed it): it is a later life of this key — deleted
                // and inserted again after this record — whose insert, a full write
                // with its disk image, comes later in the replay (its undo is after
                // the undo keep, so its redo is after the redo keep) and supersedes
                // this change. Found by the SIGKILL crash loop (error 896 at restart).
                self.redo_disk = disk_image;
                return Ok(());
            };
            d.read_committed(row, Some(r), |img| disk_image.extend_from_slice(img))?;
        } else {
            disk_image.extend_from_slice(disk);
        }
        if let Some(row) = existing {
            self.remove_committed(row, h32, gci_hi(gci));
        }
        let r = self.insert_committed_image(&key, h32, fixed, var, &disk_image, gci_hi(gci));
        self.redo_disk = disk_image;
        r.map(|_| ())
    }

    /// The largest positive integer value of column `col` among committed rows (the
    /// auto-increment counter after a restart continues above it).
    pub fn max_positive_int(&self, col: usize) -> Option<u64> {
        let layout = &self.table.layout;
        let mut best: Option<u64> = None;
        let mut cur = RowId(0);
        while let Some(r) = self.fixed.next_row(cur) {
            let f = self.fixed.get(r);
            if header_of(f) & ROW_ALLOC == 0
                && let Some(v) = layout.get(col, f, var_of(layout, &self.var, f)).as_i128()
                && v > 0
            {
                let v = u64::try_from(v).unwrap_or(u64::MAX);
                best = Some(best.map_or(v, |b| b.max(v)));
            }
            cur = RowId(r.0 + 1);
        }
        best
    }

    /// Whether committed `row` is already this stored image: the same GCI, tuple
    /// version and column bytes (the var part's in-memory reference aside), and the
    /// same var part.
    fn holds_image(&mut self, row: RowId, fixed: &[u8], var: &[u8], gci: u32) -> bool {
        let layout = &self.table.layout;
        let cur = self.fixed.get(row);
        if cur.len() != fixed.len()
            || cur[ROW_GCI_OFFSET..ROW_GCI_OFFSET + 4] != gci.to_le_bytes()
            || (header_of(cur) >> ROW_VERSION_SHIFT) != (header_of(fixed) >> ROW_VERSION_SHIFT)
            || var_of(layout, &self.var, cur) != var
        {
            return false;
        }
        const BODY: usize = ROW_GCI_OFFSET + 4;
        if !layout.has_var() {
            return cur[BODY..] == fixed[BODY..];
        }
        let mut scratch = std::mem::take(&mut self.enc_fixed);
        scratch.clear();
        scratch.extend_from_slice(cur);
        layout.set_var_ref(&mut scratch, layout.var_ref(fixed).unwrap_or(0));
        let same = scratch[BODY..] == fixed[BODY..];
        self.enc_fixed = scratch;
        same
    }

    /// Replaces a committed, unlocked row's parts with a stored image of the same key
    /// (redo replay), keeping its row id; ordered indexes follow.
    fn rewrite_committed(&mut self, row: RowId, fixed: &[u8], var: &[u8], gci: u32) -> Result<()> {
        let mask = self.all_ordered_mask();
        self.with_ordered(mask, |o, pool, cmp| {
            let removed = o.remove(pool, row, cmp);
            assert!(removed, "replayed row missing from an ordered index");
        });
        let r = self.rewrite_row(row, fixed, var);
        {
            let f = self.fixed.get_mut(row);
            f[4..8].copy_from_slice(&gci.to_le_bytes());
        }
        self.fixed.mark_changed(row, gci);
        self.lcp_counts.updated += 1;
        let mut failed = None;
        self.with_ordered(mask, |o, pool, cmp| {
            let r = o.reserve(pool, 1).and_then(|()| {
                let r = o.insert(pool, row, cmp);
                o.unreserve(1);
                r
            });
            if let Err(e) = r {
                failed.get_or_insert(e);
            }
        });
        match (r, failed) {
            (Err(e), _) | (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        }
    }

    /// Removes a committed, unlocked row with everything that points at it (its index
    /// entries, its disk record), as the undo of a bulk insert does; the page's change
    /// map records it (the next LCP writes the delete).
    pub(super) fn remove_committed(&mut self, row: RowId, h32: u32, gci: u32) {
        self.fixed.mark_changed(row, gci);
        self.lcp_counts.deleted += 1;
        self.undo_insert_committed(row, h32);
    }
}

/// Appends a row image (a write record's payload, a checkpoint row): each of the
/// fixed part, the var part and the disk image as `len u32` + bytes.
pub fn push_row_image(out: &mut Vec<u8>, fixed: &[u8], var: &[u8], disk: &[u8]) {
    for part in [fixed, var, disk] {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
}

/// The (fixed, var, disk) parts of a row image.
pub(super) fn split_payload(p: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let mut rest = p;
    let mut take = || -> Option<&[u8]> {
        let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let part = rest.get(4..4 + len)?;
        rest = &rest[4 + len..];
        Some(part)
    };
    let fixed = take()?;
    let var = take()?;
    let disk = take()?;
    (rest.is_empty()).then_some((fixed, var, disk))
}
