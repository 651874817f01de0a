//! Disk data across local checkpoints and system restarts (NDB's LGMAN/TSMAN/PGMAN
//! part of an LCP, and the undo pass of a restart). Design: docs/durability.md §7.
//!
//! **At an LCP** ([`NodeDisk::lcp_start`], [`NodeDisk::lcp_flush`]): an `LcpStart`
//! undo record is appended right after the LCP takes its redo keep position; before
//! the LCP completes, every page dirty in the page cache and every changed extent
//! header is written and synced. The record's LSN becomes the node's *undo keep*,
//! saved in the system file with the next global checkpoint; only then may the undo
//! log before it be reused ([`NodeDisk::note_undo_keep_durable`]).
//!
//! **At a restart** ([`NodeDisk::undo_to_keep`]): torn pages were first repaired
//! from the doublewrite journal (`disk::doublewrite`), so every page verifies. The undo
//! records after the keep are applied newest first, bringing every disk page back to
//! its state at the LCP's start: a record is applied only when the page holds its
//! change (page LSN at or above the record's — a lost write leaves an older page), and
//! the page's LSN then becomes the record's minus one, so a pass cut short by a crash
//! is resumed, never repeated on a page. The operations are absolute ("slot k holds
//! these bytes", "slot k is free"). An extent's owner at the keep is the one before the oldest
//! extent record after it (free before an `ExtentAlloc`, its fragment's before an
//! `ExtentFree`), else the one its header on disk shows. The pages and headers are
//! then written and synced and an `LcpStart` record with [`UNDO_PASS_MARK`] marks that
//! the disk stands at the keep's state: it becomes the keep, and a later pass stops at
//! the newest such mark, so a crash later in the restart undoes only the changes made
//! after it.
//!
//! Invariant kept with the commit path: a commit's undo records are appended before
//! its redo records, and the LCP reads its redo keep before appending `LcpStart`; so
//! every change undone here has its redo after the keep and is replayed.
//!
//! Lock order: as the parent module (no fragment mutex is held here).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;
use crate::disk::lgman::LogfileGroupConfig;
use crate::disk::tsman::datafile::DataFile;
use crate::disk::tsman::{ExtentId, ExtentOwner};

/// What an undo pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndoPassStats {
    /// Records read (from the log's end down to the keep).
    pub records: u64,
    /// Row records applied to pages.
    pub tuple_records: u64,
    /// Extents whose owner changed back.
    pub extents_restored: u64,
    /// The LSN the pass rolled back to, and the LSN of the record marking it done.
    pub keep_lsn: Lsn,
    pub marker_lsn: Lsn,
}

/// What a local checkpoint noted of a node's disk data when it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcpDiskStart {
    /// LSN of its `LcpStart` undo record (None without a logfile group).
    pub undo_lsn: Option<Lsn>,
    /// The page cache's dirty mark then: pages dirty before it are written.
    pub dirty_mark: u64,
}

/// A record found on a disk page at a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRecord {
    pub slot: u16,
    /// The row id its header names.
    pub row_id: u32,
    pub len: usize,
}

/// `lcp_id` of the `LcpStart` record that marks a finished undo pass.
pub const UNDO_PASS_MARK: u64 = u64::MAX;

impl NodeDisk {
    // ---- undo keep -------------------------------------------------------------

    /// The node keeps files: the undo log before `lsn` (the undo keep of its system
    /// file) is needed by a restart and is not reused until a later keep is durable.
    pub fn enable_undo_keep(&self, lsn: Lsn) {
        *self.undo_keep.lock() = Some(lsn);
    }

    /// A system file holding undo keep `lsn` is on disk: the log before it is free.
    pub fn note_undo_keep_durable(&self, lsn: Lsn) {
        *self.undo_keep.lock() = Some(lsn);
        if let Some(g) = self.logfile_group() {
            g.release_to(lsn);
        }
    }

    /// Where the undo log may be released to now: `start` (a checkpoint wrote every
    /// page dirtied before it) unless a restart needs it from the durable keep.
    pub(super) fn undo_release_point(&self, start: Lsn) -> Lsn {
        match *self.undo_keep.lock() {
            Some(keep) => keep.min(start),
            None => start,
        }
    }

    /// Whether a restart depends on the undo log (then a full log is made room in by
    /// a local checkpoint, not by releasing it).
    pub(super) fn undo_kept(&self) -> bool {
        self.undo_keep.lock().is_some()
    }

    /// Called when the undo log passes half full while a restart depends on it (the
    /// LCP driver starts a local checkpoint).
    pub fn set_undo_pressure_hook(&self, hook: Box<dyn Fn() + Send + Sync>) {
        *self.undo_pressure.lock() = Some(hook);
    }

    pub(super) fn fire_undo_pressure(&self) {
        if let Some(h) = &*self.undo_pressure.lock() {
            h();
        }
    }

    /// How full the undo log is, in percent (0 without a logfile group).
    pub fn undo_fill_percent(&self) -> u32 {
        self.logfile_group().map_or(0, |g| {
            let s = g.log_space();
            (s.used_bytes * 100 / s.total_bytes.max(1)) as u32
        })
    }

    // ---- local checkpoint ------------------------------------------------------

    /// Start of a local checkpoint: appends its `LcpStart` record and notes which
    /// cached pages are dirty now. The record's LSN is the undo keep once the LCP
    /// completes (None without a logfile group: a restart then rolls back to the start
    /// of any later log).
    pub fn lcp_start(&self, lcp_id: u32) -> Result<LcpDiskStart> {
        let Some(g) = self.logfile_group() else {
            return Ok(LcpDiskStart {
                undo_lsn: None,
                dirty_mark: self.pgman.dirty_mark(),
            });
        };
        let undo_lsn = g.append(&UndoRecord::LcpStart {
            lcp_id: u64::from(lcp_id),
        })?;
        Ok(LcpDiskStart {
            undo_lsn: Some(undo_lsn),
            dirty_mark: self.pgman.dirty_mark(),
        })
    }

    /// Before a local checkpoint completes: its `LcpStart` record, every page dirty
    /// when it started (later changes need not be: a restart undoes them) and every
    /// changed extent header are on disk; every data file is synced (pages the cleaner
    /// wrote meanwhile included).
    pub fn lcp_flush(&self, start: &LcpDiskStart) -> Result<()> {
        if let (Some(g), Some(lsn)) = (self.logfile_group(), start.undo_lsn) {
            g.sync_to(lsn)?;
        }
        self.pgman.flush_dirty_before(start.dirty_mark)?;
        self.tsman.flush()
    }

    // ---- restart ---------------------------------------------------------------

    /// Restart: the logfile group's existing undo files, opened (head and tail found,
    /// every record verified).
    pub fn open_logfile_group(
        &self,
        id: u32,
        name: &str,
        undo_buffer_size_bytes: u64,
        undo_files: &[PathBuf],
    ) -> Result<()> {
        let mut slot = self.wal.group.write();
        if slot.is_some() {
            return Err(codes::one_logfile_group_only());
        }
        let g = LogfileGroup::open(
            self.fs.clone(),
            &self.shared_global,
            LogfileGroupConfig {
                name: name.to_string(),
                id,
                node_id: self.node_id,
                undo_buffer_size_bytes,
            },
            undo_files,
        )?;
        *slot = Some(Arc::new(g));
        Ok(())
    }

    /// Restart, before any data file is opened: pages torn by a power loss are
    /// repaired from the doublewrite journal. Returns how many.
    pub fn repair_torn_pages(&self) -> Result<usize> {
        super::super::doublewrite::repair_torn_pages(&*self.fs, &self.fs_dir).map(|r| r.len())
    }

    /// Restart: a tablespace and its existing data files (`(file name, path)` in the
    /// order they were added), under the ids their zero pages record.
    pub fn open_tablespace(&self, spec: TablespaceSpec, files: &[(String, PathBuf)]) -> Result<()> {
        let mut ts_id = None;
        let mut opened = Vec::with_capacity(files.len());
        for (name, path) in files {
            let (file_no, ts) = DataFile::read_ids(&*self.fs, path)?;
            match ts_id {
                None => {
                    self.tsman.restore_tablespace(ts, spec.clone())?;
                    ts_id = Some(ts);
                }
                Some(t) if t != ts => {
                    return Err(codes::corrupt_page(format_args!(
                        "{}: belongs to tablespace {ts}, its tablespace's first file to {t}",
                        path.display()
                    )));
                }
                Some(_) => {}
            }
            self.tsman.open_datafile(ts, name, file_no)?;
            opened.push((file_no, path));
        }
        if ts_id.is_none() {
            self.tsman.create_tablespace(spec)?;
        }
        for (file_no, path) in opened {
            let file = self
                .data_fs
                .open(path)
                .map_err(|e| codes::file_system_error(format_args!("{}: {e}", path.display())))?;
            self.pgman.register_file(file_no, file);
        }
        Ok(())
    }

    /// Restart: brings every disk page and extent back to the state at undo keep
    /// `keep_lsn` (0: the start of the log), then marks the log (see the module doc).
    pub fn undo_to_keep(&self, keep_lsn: Lsn) -> Result<UndoPassStats> {
        let mut stats = UndoPassStats {
            keep_lsn,
            ..UndoPassStats::default()
        };
        let Some(g) = self.logfile_group() else {
            return Ok(stats);
        };
        let tail = g.tail_lsn();
        let floor = keep_lsn.max(tail);
        if keep_lsn != 0 && keep_lsn < tail {
            return Err(codes::corrupt_page(format_args!(
                "undo log of node {}: the checkpoint start LSN {keep_lsn} was released \
                 (the log starts at {tail})",
                self.node_id
            )));
        }
        let mut extent_at_keep: BTreeMap<ExtentId, Option<ExtentOwner>> = BTreeMap::new();
        // Records of a data file dropped since (ALTER TABLESPACE DROP DATAFILE after its
        // extents were freed) have nothing left to restore.
        let files: std::collections::BTreeSet<u32> =
            self.tsman.files_info().iter().map(|f| f.file_no).collect();
        if let Some(last) = g.last_lsn().filter(|&l| l >= floor) {
            let mut found_keep = keep_lsn == 0;
            for item in g.read_backwards(last, floor)? {
                let (lsn, rec) = item?;
                stats.records += 1;
                if matches!(rec, UndoRecord::LcpStart { lcp_id } if lcp_id == UNDO_PASS_MARK) {
                    // An earlier restart's pass got the pages to the keep's state and
                    // flushed them before writing this mark: nothing older to undo.
                    found_keep = true;
                    break;
                }
                if lsn == keep_lsn && keep_lsn != 0 {
                    if !matches!(rec, UndoRecord::LcpStart { .. }) {
                        return Err(codes::corrupt_page(format_args!(
                            "undo log of node {}: LSN {keep_lsn} holds {:?}, not the \
                             checkpoint start the system file names",
                            self.node_id,
                            rec.record_type()
                        )));
                    }
                    found_keep = true;
                    break;
                }
                self.undo_one(lsn, rec, &files, &mut extent_at_keep, &mut stats)?;
            }
            if !found_keep {
                return Err(codes::corrupt_page(format_args!(
                    "undo log of node {}: no checkpoint start record at LSN {keep_lsn}",
                    self.node_id
                )));
            }
        } else if keep_lsn != 0 && g.last_lsn() != Some(keep_lsn) {
            return Err(codes::corrupt_page(format_args!(
                "undo log of node {}: it ends before the checkpoint start LSN {keep_lsn}",
                self.node_id
            )));
        }
        let lsn = g.next_lsn();
        for (extent, owner) in extent_at_keep {
            if !files.contains(&extent.file_no) {
                continue;
            }
            if self.tsman.extent_owner(extent)? != owner {
                self.discard_extent_pages(extent)?;
                self.tsman.restore_extent_owner(extent, owner, lsn)?;
                stats.extents_restored += 1;
            }
        }
        self.pgman.flush_all()?;
        self.tsman.flush()?;
        let marker = g.append(&UndoRecord::LcpStart {
            lcp_id: UNDO_PASS_MARK,
        })?;
        g.sync_to(marker)?;
        stats.marker_lsn = marker;
        Ok(stats)
    }

    fn undo_one(
        &self,
        lsn: Lsn,
        rec: UndoRecord,
        files: &std::collections::BTreeSet<u32>,
        extent_at_keep: &mut BTreeMap<ExtentId, Option<ExtentOwner>>,
        stats: &mut UndoPassStats,
    ) -> Result<()> {
        let (file_no, page_no, slot, before) = match rec {
            UndoRecord::TupleAlloc {
                file_no,
                page_no,
                slot,
            } => (file_no, page_no, slot, None),
            UndoRecord::TupleUpdate {
                file_no,
                page_no,
                slot,
                before,
            }
            | UndoRecord::TupleFree {
                file_no,
                page_no,
                slot,
                before,
            } => (file_no, page_no, slot, Some(before)),
            // Walking backwards, the last one seen is the oldest after the keep.
            UndoRecord::ExtentAlloc {
                file_no, extent_no, ..
            } => {
                extent_at_keep.insert(ExtentId { file_no, extent_no }, None);
                return Ok(());
            }
            UndoRecord::ExtentFree {
                file_no,
                extent_no,
                table_id,
                fragment_id,
            } => {
                let owner = ExtentOwner {
                    table_id,
                    fragment_id,
                };
                extent_at_keep.insert(ExtentId { file_no, extent_no }, Some(owner));
                return Ok(());
            }
            UndoRecord::LcpStart { .. } | UndoRecord::End => return Ok(()),
        };
        if !files.contains(&file_no) {
            return Ok(());
        }
        let slot = u16::try_from(slot).map_err(|_| {
            codes::corrupt_page(format_args!("undo record at LSN {lsn}: slot {slot}"))
        })?;
        let page = self
            .pgman
            .get(CacheAddr { file_no, page_no }, Intent::Write)?;
        // A change the page on disk does not hold (its write was lost, or came after
        // the version on disk) is not undone: the page is exactly at its LSN's state,
        // and undoing a record leaves it exactly before it.
        if page.lsn() < lsn {
            return Ok(());
        }
        let ok = page.write(|b| match &before {
            None => {
                rowpage::delete(b, slot);
                true
            }
            Some(img) => rowpage::put_at(b, slot, img),
        });
        if ok {
            page.set_lsn_undone(lsn - 1);
        }
        drop(page);
        if !ok {
            return Err(codes::corrupt_page(format_args!(
                "undo record at LSN {lsn}: {} bytes do not fit slot {slot} of disk page \
                 {file_no}/{page_no}",
                before.map_or(0, |b| b.len())
            )));
        }
        stats.tuple_records += 1;
        Ok(())
    }

    /// Restart: the records on disk page `page` and the page's free bytes (an
    /// unformatted page is empty).
    pub fn page_records(&self, page: PageAddr) -> Result<(u32, Vec<PageRecord>)> {
        let p = self.pgman.get(cache_addr(page), Intent::Read)?;
        Ok(p.read(|b| {
            if !rowpage::formatted(b) {
                return (rowpage::EMPTY_PAGE_FREE_BYTES as u32, Vec::new());
            }
            let recs = rowpage::records(b)
                .into_iter()
                .map(|(slot, img)| {
                    let owner = crate::schema::layout::RowLayout::disk_header(img)
                        .map_or(u32::MAX, |h| h.0);
                    PageRecord {
                        slot,
                        row_id: owner,
                        len: img.len(),
                    }
                })
                .collect();
            (rowpage::free_bytes(b) as u32, recs)
        }))
    }

    /// Restart: the allocator's and TSMAN's free bytes of `page` become the page's
    /// actual ones (no extent is returned here: the caller visits every page first).
    pub fn set_page_free_exact(
        &self,
        alloc: &mut FragmentDiskAlloc,
        page: PageAddr,
        free_bytes: u32,
    ) -> Result<()> {
        alloc
            .page_free_changed(&self.tsman, page, free_bytes, self.current_lsn())
            .map(|_| ())
    }

    /// The disk reference of record `slot` of `page`.
    pub fn record_ref(page: PageAddr, slot: u16) -> Result<DiskRef> {
        disk_ref(page, slot)
    }

    /// Restart, once the schema file's disk objects are open: the files this node
    /// created that none of them uses (a CREATE whose schema file write never happened
    /// before a crash) are removed — the statement did not happen — and the list of
    /// created files is rewritten. Returns the files removed.
    pub fn remove_files_not_in_use(&self) -> Result<Vec<PathBuf>> {
        let in_use = self.created_files();
        let Some(removed) = Self::remove_listed_files(&*self.fs, &self.fs_dir, &in_use)? else {
            return Ok(Vec::new());
        };
        self.write_manifest()?;
        Ok(removed)
    }

    /// Restart: gives back every extent whose owner `live` does not know (a table
    /// dropped or truncated before the crash). Returns how many.
    pub fn free_extents_not_owned_by(&self, live: &dyn Fn(ExtentOwner) -> bool) -> Result<u64> {
        let lsn = self.current_lsn();
        let mut n = 0;
        for (extent, owner) in self.tsman.owned_extents() {
            if live(owner) {
                continue;
            }
            self.discard_extent_pages(extent)?;
            self.tsman.restore_extent_owner(extent, None, lsn)?;
            n += 1;
        }
        Ok(n)
    }
}
