//! LGMAN: the logfile group and its undo log, the write-ahead log of disk-data pages.
//!
//! A logfile group (`CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=..
//! UNDO_BUFFER_SIZE=..`; NDB allows one per cluster, error 1514 for a second, which the
//! dictionary enforces) is a set of undo files used as one circular log plus an undo
//! buffer taken from SharedGlobalMemory (error 1504 when it does not fit).
//!
//! - [`LogfileGroup::append`] encodes an [`UndoRecord`] (with a CRC-32C; records may
//!   span pages) into the undo buffer and returns its LSN, the record's byte position
//!   in the unbounded log. A full buffer is written out by `append` itself
//!   (back-pressure, counted in `buffer_waits`). A full log is error 1501 (temporary);
//!   nothing is appended then. The last page of the log is reserved for
//!   `LcpStart`/`End` records so that a checkpoint can always start and free space.
//! - [`WalSync::sync_to`] writes the buffered pages and fdatasyncs every file touched:
//!   one sync covers every record appended before it (group commit). A page written by
//!   a sync is closed: it is never rewritten, the next record starts on the next page
//!   (a crash during a later write cannot tear records that were already durable).
//! - [`LogfileGroup::release_to`] makes the log before an LSN reusable (after a
//!   checkpoint wrote every page dirtied before it).
//! - [`LogfileGroup::open`] reopens existing files, verifying every page and record,
//!   and [`LogfileGroup::read_backwards`] returns records newest first (recovery).
//!
//! Files and ring: see `buffer.rs`. A file added online ([`LogfileGroup::add_undofile`])
//! joins the ring at once when the live log does not cross the ring's end, otherwise
//! as soon as the head reaches the end of the ring.
//!
//! Monitoring: [`LogfileGroup::log_space`] feeds `ndbinfo.logspaces` and
//! [`LogfileGroup::log_buffer`] feeds `ndbinfo.logbuffers`. Both base tables
//! (`ndb$logspaces`, `ndb$logbuffers`, NdbinfoTables.cpp) have the columns `node_id`,
//! `log_type` (0 = REDO, 1 = DD-UNDO; the views show the string 'DD-UNDO'), `log_id`
//! (the logfile group id), `log_part` (0 for the undo log), `total`, `used`, `high`
//! (bytes; the views show node_id, log_type, log_id, log_part, total, used).
//! [`LogfileGroup::files_info`] feeds information_schema.FILES (FILE_TYPE 'UNDO LOG',
//! EXTRA `UNDO_BUFFER_SIZE=<bytes>`).
//!
//! Locking. Lock order: `io` -> `state` -> `sticky`. `state` (log positions, the
//! buffer, the ring, the file list) is held only for memory work, never across I/O.
//! `io` serializes page writes, syncs and file creation; whoever writes pages holds it,
//! copies the pages to write under `state`, writes them without `state`, and then drops
//! them from the buffer under `state` again. An I/O error is sticky: it is stored in
//! `sticky` and every later call returns it.

mod buffer;
pub mod file;
mod read;
pub mod record;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::disk::io::FileSystem;
use crate::disk::page::DISK_PAGE_SIZE;
use crate::disk::shared_memory::{Reservation, SharedGlobalMemory};
use crate::disk::{Lsn, WalSync};
use crate::error::{NdbError, Result, codes};

use buffer::{DATA, Ring, UndoBuffer};
pub use file::{DEFAULT_UNDO_FILE_BYTES, UNDO_DATA_BYTES, UndoFile};
pub use read::UndoIter;
pub use record::{RecordType, UndoRecord};

/// NDB's default UNDO_BUFFER_SIZE (8M).
pub const DEFAULT_UNDO_BUFFER_BYTES: u64 = 8 * 1024 * 1024;
/// Smallest undo buffer: two pages.
pub const MIN_UNDO_BUFFER_BYTES: u64 = 2 * DISK_PAGE_SIZE as u64;
/// Largest encoded record (one page of data; a record spans at most two pages).
pub const MAX_RECORD_BYTES: usize = UNDO_DATA_BYTES;
/// Log pages only `LcpStart` and `End` records may use.
const LCP_RESERVE_PAGES: u64 = 1;

/// What CREATE LOGFILE GROUP says about the group.
#[derive(Clone, Debug)]
pub struct LogfileGroupConfig {
    pub name: String,
    /// Logfile group id (ndbinfo log_id, information_schema LOGFILE_GROUP_NUMBER).
    pub id: u32,
    pub node_id: u32,
    /// UNDO_BUFFER_SIZE in bytes (rounded down to whole pages).
    pub undo_buffer_size_bytes: u64,
}

/// Total, used and high-water bytes (ndbinfo logspaces / logbuffers rows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogUsage {
    pub total_bytes: u64,
    pub used_bytes: u64,
    pub high_bytes: u64,
}

/// Counters since the group was created or opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    pub records: u64,
    pub bytes: u64,
    /// Syncs that wrote and fdatasynced (a sync_to already covered counts nothing).
    pub syncs: u64,
    pub pages_written: u64,
    /// Appends that had to write the buffer out first.
    pub buffer_waits: u64,
    /// Appends refused with 1501.
    pub out_of_space: u64,
}

/// One undo file, for information_schema.FILES.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoFileInfo {
    pub path: PathBuf,
    pub file_no: u32,
    pub initial_size_bytes: u64,
    pub undo_pages: u64,
    /// Whether the file is part of the circular log yet (see `add_undofile`).
    pub in_ring: bool,
    /// information_schema.FILES EXTRA.
    pub extra: String,
}

struct LogState {
    /// All files, in file_no order.
    files: Vec<Arc<UndoFile>>,
    ring: Ring,
    /// Files added online, not yet in the ring (indexes into `files`).
    pending: Vec<usize>,
    /// Position of the next byte to append.
    append_pos: u64,
    /// Everything before is released (reusable).
    tail_pos: u64,
    last_record_lsn: Option<Lsn>,
    /// Log pages ending in an incomplete record that never became durable (found by
    /// open): page -> where its last complete record ends.
    abandoned: BTreeMap<u64, u64>,
    /// Written into every page: how many times the log was opened (see read.rs).
    generation: u64,
    buffer: UndoBuffer,
    high_used_bytes: u64,
    counters: LogCounters,
}

struct IoState {
    /// Files written since their last fdatasync.
    unsynced: BTreeSet<usize>,
}

/// A page copied out of the buffer to be written.
struct OutPage {
    tail_pos: u64,
    generation: u64,
    file: Arc<UndoFile>,
    file_index: usize,
    page_no: u32,
    lp: u64,
    first_record_lsn: u64,
    data: Vec<u8>,
}

/// A logfile group: undo files, undo buffer, the circular undo log.
pub struct LogfileGroup {
    config: LogfileGroupConfig,
    fs: Arc<dyn FileSystem>,
    io: Mutex<IoState>,
    state: Mutex<LogState>,
    sticky: Mutex<Option<NdbError>>,
    /// Records with an LSN below are durable.
    durable_end: AtomicU64,
    _memory: Reservation,
}

fn buffer_pages(config: &LogfileGroupConfig) -> Result<usize> {
    let bytes = config.undo_buffer_size_bytes;
    if bytes < MIN_UNDO_BUFFER_BYTES {
        return Err(codes::invalid_undo_buffer_size(format_args!(
            "{bytes} bytes, at least {MIN_UNDO_BUFFER_BYTES}"
        )));
    }
    usize::try_from(bytes / DISK_PAGE_SIZE as u64)
        .map_err(|_| codes::invalid_undo_buffer_size(bytes))
}

impl LogfileGroup {
    /// CREATE LOGFILE GROUP: reserve the undo buffer (1504), create the undo files
    /// `(path, INITIAL_SIZE)` (760 / 1509 / 1516; files already created are removed
    /// again on failure).
    pub fn create(
        fs: Arc<dyn FileSystem>,
        memory: &SharedGlobalMemory,
        config: LogfileGroupConfig,
        files: &[(PathBuf, u64)],
    ) -> Result<LogfileGroup> {
        let pages = buffer_pages(&config)?;
        if files.is_empty() {
            return Err(codes::bad_argument("a logfile group needs an undo file"));
        }
        let reservation = memory.try_reserve((pages * DISK_PAGE_SIZE) as u64)?;
        let mut created: Vec<Arc<UndoFile>> = Vec::new();
        for (i, (path, size)) in files.iter().enumerate() {
            match UndoFile::create(&*fs, path, *size, i as u32, config.node_id, config.id) {
                Ok(f) => created.push(Arc::new(f)),
                Err(e) => {
                    for f in &created {
                        let _ = fs.remove(&f.path);
                    }
                    return Err(e);
                }
            }
        }
        let ring = Ring::new(
            created
                .iter()
                .enumerate()
                .map(|(i, f)| (i, f.undo_pages))
                .collect(),
            1,
            0,
        );
        Ok(LogfileGroup::assemble(
            fs,
            config,
            reservation,
            pages,
            created,
            ring,
            Vec::new(),
            DATA,
            DATA,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        fs: Arc<dyn FileSystem>,
        config: LogfileGroupConfig,
        memory: Reservation,
        buffer_pages: usize,
        files: Vec<Arc<UndoFile>>,
        ring: Ring,
        pending: Vec<usize>,
        tail_pos: u64,
        append_pos: u64,
    ) -> LogfileGroup {
        assert!(tail_pos <= append_pos);
        LogfileGroup {
            config,
            fs,
            io: Mutex::new(IoState {
                unsynced: BTreeSet::new(),
            }),
            state: Mutex::new(LogState {
                files,
                ring,
                pending,
                append_pos,
                tail_pos,
                last_record_lsn: None,
                abandoned: BTreeMap::new(),
                generation: 0,
                buffer: UndoBuffer::new(buffer_pages),
                high_used_bytes: append_pos - tail_pos,
                counters: LogCounters::default(),
            }),
            sticky: Mutex::new(None),
            durable_end: AtomicU64::new(append_pos),
            _memory: memory,
        }
    }

    pub fn config(&self) -> &LogfileGroupConfig {
        &self.config
    }

    fn check_sticky(&self) -> Result<()> {
        match &*self.sticky.lock() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn fail(&self, what: &str, e: std::io::Error) -> NdbError {
        let err = codes::file_system_error(format_args!("undo log {what}: {e}"));
        let mut s = self.sticky.lock();
        s.get_or_insert(err).clone()
    }

    /// Append one record; returns its LSN. 1501 when the log is full (nothing
    /// appended); an earlier I/O error is returned again.
    pub fn append(&self, rec: &UndoRecord) -> Result<Lsn> {
        let bytes = rec.encode();
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(codes::bad_argument(format_args!(
                "undo record of {} bytes, at most {MAX_RECORD_BYTES}",
                bytes.len()
            )));
        }
        let lcp = matches!(rec, UndoRecord::LcpStart { .. } | UndoRecord::End);
        loop {
            self.check_sticky()?;
            let mut st = self.state.lock();
            st.maybe_join();
            let start = st.append_pos;
            let end = start + bytes.len() as u64;
            let end_lp = (end - 1) / DATA;
            let tail_lp = st.tail_pos.min(start) / DATA;
            let reserve = if lcp { 0 } else { LCP_RESERVE_PAGES };
            if end_lp - tail_lp + 1 + reserve > st.ring.total_pages {
                st.counters.out_of_space += 1;
                return Err(codes::out_of_undo_space());
            }
            let first_lp = st.buffer.front_lp().unwrap_or(start / DATA);
            if end_lp - first_lp + 1 > st.buffer.capacity_pages as u64 {
                st.counters.buffer_waits += 1;
                drop(st);
                self.write_full_pages()?;
                continue;
            }
            st.buffer.write(start, &bytes);
            st.append_pos = end;
            st.last_record_lsn = Some(start);
            st.counters.records += 1;
            st.counters.bytes += bytes.len() as u64;
            let used = end - st.tail_pos;
            st.high_used_bytes = st.high_used_bytes.max(used);
            return Ok(start);
        }
    }

    /// Write the buffered pages that are complete (back-pressure; no sync).
    fn write_full_pages(&self) -> Result<()> {
        let mut io = self.io.lock();
        self.check_sticky()?;
        let pages = {
            let st = self.state.lock();
            let head_lp = st.append_pos / DATA;
            st.copy_out(|lp| lp < head_lp)
        };
        self.write_pages(&mut io, pages)
    }

    fn write_pages(&self, io: &mut IoState, pages: Vec<OutPage>) -> Result<()> {
        let Some(last_lp) = pages.last().map(|p| p.lp) else {
            return Ok(());
        };
        // Every page carries how far the log was durable when it was written: a torn
        // page at open is a power loss's only if no page proves it durable.
        let durable = self.durable_lsn();
        for p in &pages {
            let pos = p.lp * DATA;
            if let Err(e) = p.file.write_undo_page(
                p.page_no,
                pos,
                p.tail_pos,
                p.generation,
                durable.min(pos),
                p.first_record_lsn,
                &p.data,
            ) {
                return Err(self.fail(&format!("write {}", p.file.path.display()), e));
            }
            io.unsynced.insert(p.file_index);
        }
        let mut st = self.state.lock();
        st.buffer.pop_through(last_lp);
        st.counters.pages_written += pages.len() as u64;
        Ok(())
    }

    /// LSN below which every record is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_end.load(Ordering::Acquire)
    }

    /// LSN the next record will get (if it fits in the current page).
    pub fn next_lsn(&self) -> Lsn {
        self.state.lock().append_pos
    }

    /// LSN of the last record appended since create/open (or found by open).
    pub fn last_lsn(&self) -> Option<Lsn> {
        self.state.lock().last_record_lsn
    }

    /// Everything before this LSN has been released.
    pub fn tail_lsn(&self) -> Lsn {
        self.state.lock().tail_pos
    }

    /// The log before `lsn` is no longer needed (a checkpoint wrote every page dirtied
    /// before it): its space is reused. Never moves backwards, never past the head.
    pub fn release_to(&self, lsn: Lsn) {
        let mut st = self.state.lock();
        let to = lsn.min(st.append_pos);
        if to > st.tail_pos {
            st.tail_pos = to;
        }
        st.maybe_join();
    }

    /// ALTER LOGFILE GROUP ADD UNDOFILE (online).
    pub fn add_undofile(&self, path: &Path, size_bytes: u64) -> Result<UndoFileInfo> {
        let _io = self.io.lock();
        self.check_sticky()?;
        let file_no = {
            let st = self.state.lock();
            st.files.last().map_or(0, |f| f.file_no + 1)
        };
        let f = Arc::new(UndoFile::create(
            &*self.fs,
            path,
            size_bytes,
            file_no,
            self.config.node_id,
            self.config.id,
        )?);
        let mut st = self.state.lock();
        st.files.push(f);
        let idx = st.files.len() - 1;
        st.pending.push(idx);
        st.maybe_join();
        Ok(st.file_info(idx, &self.config))
    }

    /// Per-file rows for information_schema.FILES.
    pub fn files_info(&self) -> Vec<UndoFileInfo> {
        let st = self.state.lock();
        (0..st.files.len())
            .map(|i| st.file_info(i, &self.config))
            .collect()
    }

    /// ndbinfo.logspaces (DD-UNDO): bytes of record space in all undo files, bytes
    /// between the tail and the head, high-water mark of `used`.
    pub fn log_space(&self) -> LogUsage {
        let st = self.state.lock();
        LogUsage {
            total_bytes: st.files.iter().map(|f| f.undo_pages * DATA).sum(),
            used_bytes: st.append_pos - st.tail_pos,
            high_bytes: st.high_used_bytes,
        }
    }

    /// ndbinfo.logbuffers (DD-UNDO): the undo buffer's bytes, in whole pages.
    pub fn log_buffer(&self) -> LogUsage {
        let st = self.state.lock();
        let page = DISK_PAGE_SIZE as u64;
        LogUsage {
            total_bytes: st.buffer.capacity_pages as u64 * page,
            used_bytes: st.buffer.pages.len() as u64 * page,
            high_bytes: st.buffer.high_pages as u64 * page,
        }
    }

    pub fn counters(&self) -> LogCounters {
        self.state.lock().counters
    }

    /// The paths of the undo files, in file_no order.
    pub fn paths(&self) -> Vec<PathBuf> {
        let st = self.state.lock();
        st.files.iter().map(|f| f.path.clone()).collect()
    }

    /// DROP LOGFILE GROUP: remove every undo file and give the buffer back to
    /// SharedGlobalMemory. Returns the removed paths.
    pub fn drop_group(self) -> Result<Vec<PathBuf>> {
        let fs = self.fs.clone();
        let paths = self.paths();
        drop(self);
        for p in &paths {
            fs.remove(p).map_err(|e| {
                codes::file_system_error(format_args!("remove {}: {e}", p.display()))
            })?;
        }
        Ok(paths)
    }

    /// Initial start: remove the undo files (those already gone are skipped). Returns
    /// the paths removed.
    pub fn remove_files(fs: &dyn FileSystem, paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        for p in paths {
            match fs.remove(p) {
                Ok(()) => removed.push(p.clone()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(codes::file_system_error(format_args!(
                        "remove {}: {e}",
                        p.display()
                    )));
                }
            }
        }
        Ok(removed)
    }
}

impl WalSync for LogfileGroup {
    /// Write the buffer and fdatasync the files touched, unless `lsn` is durable
    /// already. Covers every record appended before the call (group commit).
    fn sync_to(&self, lsn: Lsn) -> Result<()> {
        self.check_sticky()?;
        if lsn < self.durable_lsn() {
            return Ok(());
        }
        let mut io = self.io.lock();
        self.check_sticky()?;
        if lsn < self.durable_lsn() {
            return Ok(());
        }
        let (pages, end) = {
            let mut st = self.state.lock();
            let end = st.append_pos;
            if !end.is_multiple_of(DATA) {
                // Close the head page: it is written now and never again.
                st.append_pos = (end / DATA + 1) * DATA;
            }
            (st.copy_out(|_| true), end)
        };
        let n = pages.len();
        self.write_pages(&mut io, pages)?;
        let touched = std::mem::take(&mut io.unsynced);
        let files: Vec<Arc<UndoFile>> = {
            let st = self.state.lock();
            touched.iter().map(|&i| st.files[i].clone()).collect()
        };
        for f in &files {
            if let Err(e) = f.sync() {
                return Err(self.fail(&format!("fdatasync {}", f.path.display()), e));
            }
        }
        if n > 0 || !files.is_empty() {
            self.state.lock().counters.syncs += 1;
        }
        self.durable_end.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }
}

impl LogState {
    /// Join pending files to the ring if the live log does not cross the ring's end.
    fn maybe_join(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let last_lp = (self.append_pos - 1) / DATA;
        if self.tail_pos < self.append_pos {
            let t = self.ring.idx(self.tail_pos / DATA);
            if t > self.ring.idx(last_lp) {
                return;
            }
        }
        let add: Vec<(usize, u64)> = self
            .pending
            .drain(..)
            .map(|i| (i, self.files[i].undo_pages))
            .collect();
        self.ring.join(&add, last_lp);
    }

    /// Copy the buffered pages selected by `which` (a prefix of the buffer).
    fn copy_out(&self, which: impl Fn(u64) -> bool) -> Vec<OutPage> {
        let mut out = Vec::new();
        for p in self.buffer.pages.iter().take_while(|p| which(p.lp)) {
            if p.data.is_empty() {
                break;
            }
            let (file_index, page_no) = self.ring.location(self.ring.idx(p.lp));
            out.push(OutPage {
                tail_pos: self.tail_pos.min(p.lp * DATA + p.data.len() as u64),
                generation: self.generation,
                file: self.files[file_index].clone(),
                file_index,
                page_no,
                lp: p.lp,
                first_record_lsn: p.first_record_lsn,
                data: p.data.clone(),
            });
        }
        out
    }

    fn file_info(&self, i: usize, config: &LogfileGroupConfig) -> UndoFileInfo {
        let f = &self.files[i];
        UndoFileInfo {
            path: f.path.clone(),
            file_no: f.file_no,
            initial_size_bytes: f.initial_size_bytes,
            undo_pages: f.undo_pages,
            in_ring: !self.pending.contains(&i),
            extra: format!("UNDO_BUFFER_SIZE={}", config.undo_buffer_size_bytes),
        }
    }
}
