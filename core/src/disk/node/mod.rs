//! One data node's disk data: its logfile group (LGMAN), tablespaces (TSMAN) and page
//! cache (PGMAN), and the row-level operations DBTUP performs on disk parts of rows.
//!
//! Rules the row operations keep:
//! - **Nothing on a disk page changes before commit.** Prepare reserves what commit
//!   needs — bytes on a page ([`FragmentDiskAlloc`] reserves them) and undo log space
//!   ([`NodeDisk::reserve_undo`]) — so that commit cannot fail for space and abort only
//!   gives reservations back. An uncommitted after-image lives in the lock table.
//! - **Write-ahead logging.** Every change of a page appends its undo record first and
//!   stamps the page with the record's LSN; the page cache writes a page only after
//!   the undo log is durable up to that LSN (through [`WalProxy`]).
//! - **Undo space is made, not refused.** When a reservation would take the undo log
//!   past half full, a node that keeps no files runs a disk checkpoint (every dirty
//!   page written, the undo log released up to where the checkpoint began); a node
//!   whose restart needs the log from its undo keep starts a local checkpoint instead
//!   (`recovery`); 1501 "Out of undo space" only when the log is still too full.
//! - **Files created are remembered** in `disk_files.list` in the node's file-system
//!   directory, so that an initial start removes them (NDB leaves them behind).
//!
//! Lock order: fragment mutex, then `undo_gate`, then the managers' own locks (TSMAN,
//! PGMAN, LGMAN are internally synchronised; PGMAN may call LGMAN through the WAL).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::io::FileSystem;
use super::lgman::{LogfileGroup, LogfileGroupConfig, UndoRecord};
use super::pgman::{Intent, PageAddr as CacheAddr, PageCache, PageCacheConfig};
use super::rowpage;
use super::shared_memory::SharedGlobalMemory;
use super::tsman::alloc::FragmentDiskAlloc;
use super::tsman::{ExtentOwner, PageAddr, TablespaceId, TablespaceManager, TablespaceSpec};
use super::{Lsn, WalSync};
use crate::error::{Result, codes};
use crate::schema::layout::DiskRef;

/// Name of the list of files this node created, in its file-system directory.
pub const MANIFEST_NAME: &str = "disk_files.list";

/// Undo bytes an operation reserves beyond its records' encoded size (page headers,
/// records straddling pages).
const UNDO_SLACK_BYTES: u64 = 64;

/// The WAL the page cache and TSMAN call: the logfile group once it exists.
#[derive(Default)]
pub struct WalProxy {
    group: RwLock<Option<Arc<LogfileGroup>>>,
}

impl WalSync for WalProxy {
    fn sync_to(&self, lsn: Lsn) -> Result<()> {
        match &*self.group.read() {
            Some(g) => g.sync_to(lsn),
            None => Ok(()),
        }
    }
}

/// Undo space promised to prepared operations and not yet appended.
#[derive(Default)]
struct UndoGate {
    reserved_bytes: u64,
    checkpoints: u64,
}

/// A page where prepare reserved room for a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskReservation {
    pub page: PageAddr,
    /// Bytes reserved on the page (record + slot entry).
    pub page_bytes: u32,
    /// Undo bytes reserved.
    pub undo_bytes: u64,
}

/// One data node's disk data.
pub struct NodeDisk {
    pub node_id: u32,
    fs: Arc<dyn FileSystem>,
    /// What data files are created and opened through: `fs`, or `fs` behind the
    /// doublewrite journal when the node keeps its files across restarts.
    data_fs: Arc<dyn FileSystem>,
    fs_dir: PathBuf,
    shared_global: SharedGlobalMemory,
    wal: Arc<WalProxy>,
    pub tsman: TablespaceManager,
    pub pgman: PageCache,
    undo_gate: Mutex<UndoGate>,
    /// The undo keep of the node's system file on disk: a restart rolls the pages back
    /// to it, so the log is not released before it. None: the node keeps no files.
    undo_keep: Mutex<Option<Lsn>>,
    /// Wakes the LCP driver when the kept undo log passes half full.
    undo_pressure: Mutex<Option<UndoPressureHook>>,
}

/// See [`NodeDisk::set_undo_pressure_hook`].
pub type UndoPressureHook = Box<dyn Fn() + Send + Sync>;

fn cache_addr(p: PageAddr) -> CacheAddr {
    CacheAddr {
        file_no: p.file_no,
        page_no: p.page_no,
    }
}

fn disk_ref(page: PageAddr, slot: u16) -> Result<DiskRef> {
    let file_no = u16::try_from(page.file_no)
        .map_err(|_| codes::internal(format_args!("data file number {} > 65535", page.file_no)))?;
    Ok(DiskRef {
        file_no,
        page_no: page.page_no,
        slot,
    })
}

pub(crate) fn page_of(r: DiskRef) -> PageAddr {
    PageAddr {
        file_no: r.file_no as u32,
        page_no: r.page_no,
    }
}

fn undo_len(rec: &UndoRecord) -> u64 {
    rec.encoded_len() as u64 + UNDO_SLACK_BYTES
}

impl NodeDisk {
    pub fn new(
        node_id: u32,
        fs: Arc<dyn FileSystem>,
        fs_dir: PathBuf,
        cache_bytes: u64,
        entries_per_page: usize,
        shared_global_bytes: u64,
    ) -> Result<NodeDisk> {
        Self::with_doublewrite(
            node_id,
            fs,
            fs_dir,
            cache_bytes,
            entries_per_page,
            shared_global_bytes,
            false,
        )
    }

    /// As [`NodeDisk::new`]; with `doublewrite`, data-file page writes go through the
    /// doublewrite journal (a node whose files a restart reads).
    pub fn with_doublewrite(
        node_id: u32,
        fs: Arc<dyn FileSystem>,
        fs_dir: PathBuf,
        cache_bytes: u64,
        entries_per_page: usize,
        shared_global_bytes: u64,
        doublewrite: bool,
    ) -> Result<NodeDisk> {
        let wal = Arc::new(WalProxy::default());
        let data_fs: Arc<dyn FileSystem> = if doublewrite {
            Arc::new(super::doublewrite::DoublewriteFs::new(fs.clone(), &fs_dir))
        } else {
            fs.clone()
        };
        let pgman = PageCache::new(
            PageCacheConfig {
                capacity_bytes: cache_bytes,
                entries_per_page,
            },
            wal.clone(),
        )?;
        Ok(NodeDisk {
            node_id,
            tsman: TablespaceManager::new(data_fs.clone(), fs_dir.clone(), wal.clone(), node_id),
            data_fs,
            fs,
            fs_dir,
            shared_global: SharedGlobalMemory::new(shared_global_bytes),
            wal,
            pgman,
            undo_gate: Mutex::new(UndoGate::default()),
            undo_keep: Mutex::new(None),
            undo_pressure: Mutex::new(None),
        })
    }

    pub fn fs_dir(&self) -> &Path {
        &self.fs_dir
    }

    /// The file system this node's files live on.
    pub fn fs(&self) -> &Arc<dyn FileSystem> {
        &self.fs
    }

    pub fn shared_global(&self) -> &SharedGlobalMemory {
        &self.shared_global
    }

    /// The logfile group, if one was created.
    pub fn logfile_group(&self) -> Option<Arc<LogfileGroup>> {
        self.wal.group.read().clone()
    }

    /// The node holds disk data: a logfile group or a tablespace data file (what an
    /// LCP's [`NodeDisk::lcp_flush`] has to write).
    pub fn has_disk_data(&self) -> bool {
        self.logfile_group().is_some() || self.tsman.has_files()
    }

    fn resolve(&self, file_name: &str) -> PathBuf {
        let p = Path::new(file_name);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.fs_dir.join(p)
        }
    }

    fn ensure_dir(&self) -> Result<()> {
        self.fs
            .create_dir_all(&self.fs_dir)
            .map_err(|e| codes::file_system_error(format_args!("{}: {e}", self.fs_dir.display())))
    }

    // ---- DDL -------------------------------------------------------------------

    pub fn create_logfile_group(
        &self,
        id: u32,
        name: &str,
        undo_file: &str,
        initial_size_bytes: u64,
        undo_buffer_size_bytes: u64,
    ) -> Result<()> {
        if self.logfile_group().is_some() {
            return Err(codes::one_logfile_group_only());
        }
        self.ensure_dir()?;
        // Listed before it exists (the manifest reads the group: not under its lock).
        self.write_manifest_with(Some(&self.resolve(undo_file)))?;
        let mut slot = self.wal.group.write();
        if slot.is_some() {
            return Err(codes::one_logfile_group_only());
        }
        let g = LogfileGroup::create(
            self.fs.clone(),
            &self.shared_global,
            LogfileGroupConfig {
                name: name.to_string(),
                id,
                node_id: self.node_id,
                undo_buffer_size_bytes,
            },
            &[(self.resolve(undo_file), initial_size_bytes)],
        )?;
        *slot = Some(Arc::new(g));
        drop(slot);
        // A new log's LSNs start again: a restart needs all of it until an LCP ends.
        if let Some(keep) = self.undo_keep.lock().as_mut() {
            *keep = 0;
        }
        self.write_manifest()
    }

    pub fn add_undofile(&self, undo_file: &str, initial_size_bytes: u64) -> Result<()> {
        let g = self
            .logfile_group()
            .ok_or_else(|| codes::logfile_group_not_found("(none)"))?;
        self.write_manifest_with(Some(&self.resolve(undo_file)))?;
        g.add_undofile(&self.resolve(undo_file), initial_size_bytes)?;
        self.write_manifest()
    }

    /// DROP LOGFILE GROUP: its files are removed. The caller checked that no
    /// tablespace uses it.
    pub fn drop_logfile_group(&self) -> Result<Vec<PathBuf>> {
        let Some(g) = self.wal.group.write().take() else {
            return Ok(Vec::new());
        };
        let removed = match Arc::try_unwrap(g) {
            Ok(g) => g.drop_group()?,
            Err(g) => {
                let paths = g.paths();
                LogfileGroup::remove_files(&*self.fs, &paths)?
            }
        };
        self.write_manifest()?;
        Ok(removed)
    }

    pub fn create_tablespace(
        &self,
        spec: TablespaceSpec,
        data_file: &str,
        initial_size_bytes: u64,
    ) -> Result<TablespaceId> {
        self.ensure_dir()?;
        let name = spec.name.clone();
        let ts = self.tsman.create_tablespace(spec)?;
        if let Err(e) = self.add_datafile(ts, data_file, initial_size_bytes) {
            let _ = self.tsman.drop_tablespace(&name);
            return Err(e);
        }
        Ok(ts)
    }

    pub fn add_datafile(
        &self,
        ts: TablespaceId,
        data_file: &str,
        initial_size_bytes: u64,
    ) -> Result<()> {
        self.ensure_dir()?;
        self.write_manifest_with(Some(&self.resolve(data_file)))?;
        let lsn = self.current_lsn();
        let file_no = self
            .tsman
            .add_datafile(ts, data_file, initial_size_bytes, 0, lsn)?;
        let path = self.resolve(data_file);
        let file = self
            .data_fs
            .open(&path)
            .map_err(|e| codes::file_system_error(format_args!("{}: {e}", path.display())))?;
        self.pgman.register_file(file_no, file);
        self.write_manifest()
    }

    pub fn drop_datafile(&self, ts: TablespaceId, data_file: &str) -> Result<()> {
        let file_no = self
            .tsman
            .files_info()
            .into_iter()
            .find(|f| f.tablespace_id == ts && f.file_name == data_file)
            .map(|f| f.file_no)
            .ok_or_else(|| codes::no_such_file(data_file))?;
        self.tsman.drop_datafile(ts, data_file)?;
        self.pgman.drop_file(file_no)?;
        self.write_manifest()
    }

    /// DROP DATAFILE by tablespace name (rollback paths).
    pub fn drop_datafile_of(&self, tablespace: &str, data_file: &str) -> Result<()> {
        let ts = self
            .tsman
            .lookup(tablespace)
            .ok_or_else(|| codes::invalid_tablespace(tablespace))?;
        self.drop_datafile(ts, data_file)
    }

    pub fn drop_tablespace(&self, name: &str) -> Result<()> {
        self.tsman.drop_tablespace(name)?;
        self.write_manifest()
    }

    /// Every file this node created and still has: data files, then undo files.
    pub fn created_files(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .tsman
            .files_info()
            .into_iter()
            .map(|f| f.path)
            .collect();
        if let Some(g) = self.logfile_group() {
            out.extend(g.paths());
        }
        out
    }

    pub(super) fn write_manifest(&self) -> Result<()> {
        self.write_manifest_with(None)
    }

    /// The manifest of the files in use plus `creating` — written before a file is
    /// created, so that a crash between the two leaves no file the manifest does not
    /// name (a restart removes what no object uses).
    fn write_manifest_with(&self, creating: Option<&Path>) -> Result<()> {
        let mut text = String::new();
        let files = self.created_files();
        // A path that exists already is not ours to list (the create fails with 760).
        let extra = creating.filter(|p| !files.iter().any(|f| f == p) && !self.fs.exists(p));
        for p in files.iter().map(PathBuf::as_path).chain(extra) {
            text.push_str(&p.to_string_lossy());
            text.push('\n');
        }
        let path = self.fs_dir.join(MANIFEST_NAME);
        self.fs
            .write_atomic(&path, text.as_bytes())
            .map_err(|e| codes::file_system_error(format_args!("{}: {e}", path.display())))
    }

    /// Initial start: removes every file listed in `fs_dir`'s manifest (the data and
    /// undo files an earlier run created) and the manifest; returns what was removed.
    pub fn remove_created_files(fs: &dyn FileSystem, fs_dir: &Path) -> Result<Vec<PathBuf>> {
        // The doublewrite journal is the node's own, like its redo log: removed, not
        // listed.
        let journal = fs_dir.join(super::doublewrite::JOURNAL_NAME);
        if fs.exists(&journal) {
            fs.remove(&journal).map_err(|e| {
                codes::file_system_error(format_args!("{}: {e}", journal.display()))
            })?;
        }
        let manifest = fs_dir.join(MANIFEST_NAME);
        let Some(removed) = Self::remove_listed_files(fs, fs_dir, &[])? else {
            return Ok(Vec::new());
        };
        fs.remove(&manifest)
            .map_err(|e| codes::file_system_error(format_args!("{}: {e}", manifest.display())))?;
        Ok(removed)
    }

    /// Removes every file the manifest in `fs_dir` lists that exists and is not in
    /// `keep`; the files removed, or None without a manifest. The manifest stays.
    fn remove_listed_files(
        fs: &dyn FileSystem,
        fs_dir: &Path,
        keep: &[PathBuf],
    ) -> Result<Option<Vec<PathBuf>>> {
        let manifest = fs_dir.join(MANIFEST_NAME);
        let Some(text) = fs
            .read_all(&manifest)
            .map_err(|e| codes::file_system_error(format_args!("{}: {e}", manifest.display())))?
        else {
            return Ok(None);
        };
        let mut removed = Vec::new();
        for line in String::from_utf8_lossy(&text).lines() {
            let p = PathBuf::from(line);
            if line.is_empty() || keep.contains(&p) || !fs.exists(&p) {
                continue;
            }
            fs.remove(&p)
                .map_err(|e| codes::file_system_error(format_args!("{}: {e}", p.display())))?;
            removed.push(p);
        }
        Ok(Some(removed))
    }

    // ---- undo ------------------------------------------------------------------

    fn group(&self) -> Result<Arc<LogfileGroup>> {
        self.logfile_group()
            .ok_or_else(|| codes::logfile_group_not_found("(no logfile group)"))
    }

    /// The LSN the next record will get (0 without a logfile group).
    pub fn current_lsn(&self) -> Lsn {
        self.logfile_group().map_or(0, |g| g.next_lsn())
    }

    /// Reserve undo space for records of `bytes` (prepare). When the log would pass
    /// half full: a node that keeps no files runs a disk checkpoint (every dirty page
    /// written, the log released up to where it began); a node whose restart needs the
    /// log from its undo keep wakes the LCP driver, whose checkpoint moves the keep.
    /// 1501 (temporary) when the log is still too full.
    pub fn reserve_undo(&self, bytes: u64) -> Result<u64> {
        let g = self.group()?;
        let mut gate = self.undo_gate.lock();
        let fits = |gate: &UndoGate| {
            let s = g.log_space();
            let free = s
                .total_bytes
                .saturating_sub(s.used_bytes + gate.reserved_bytes);
            (
                free >= bytes,
                s.used_bytes + gate.reserved_bytes + bytes > s.total_bytes / 2,
            )
        };
        let (ok, over_half) = fits(&gate);
        if over_half && self.undo_kept() {
            self.fire_undo_pressure();
            if !ok {
                g.release_to(self.undo_release_point(g.next_lsn()));
                if !fits(&gate).0 {
                    return Err(codes::out_of_undo_space());
                }
            }
        } else if !ok || over_half {
            // Make room: every dirty page to disk, then the undo before it is free.
            let start = g.next_lsn();
            self.pgman.flush_all()?;
            g.release_to(self.undo_release_point(start));
            gate.checkpoints += 1;
            if !fits(&gate).0 {
                return Err(codes::out_of_undo_space());
            }
        }
        gate.reserved_bytes += bytes;
        Ok(bytes)
    }

    /// Whether the undo log is more than half full (used and reserved): OPTIMIZE TABLE
    /// stops moving disk records then, leaving the room to transactions and restarts
    /// until a checkpoint releases the log.
    pub fn undo_over_half(&self) -> bool {
        let Ok(g) = self.group() else {
            return true;
        };
        let gate = self.undo_gate.lock();
        let s = g.log_space();
        s.used_bytes + gate.reserved_bytes > s.total_bytes / 2
    }

    /// Give back an undo reservation (abort, or after the records were appended).
    pub fn release_undo(&self, bytes: u64) {
        let mut gate = self.undo_gate.lock();
        debug_assert!(gate.reserved_bytes >= bytes, "undo reservation underflow");
        gate.reserved_bytes = gate.reserved_bytes.saturating_sub(bytes);
    }

    /// Disk checkpoints run to make undo space.
    pub fn undo_checkpoints(&self) -> u64 {
        self.undo_gate.lock().checkpoints
    }

    fn log(&self, rec: &UndoRecord) -> Result<Lsn> {
        self.group()?.append(rec)
    }
}

mod recovery;
mod rows;

pub use recovery::{LcpDiskStart, PageRecord, UNDO_PASS_MARK, UndoPassStats};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::io::MemFileSystem;

    fn node() -> (NodeDisk, TablespaceId) {
        let fs = Arc::new(MemFileSystem::new());
        let n = NodeDisk::new(2, fs, PathBuf::from("/fs"), 4 << 20, 10, 32 << 20).unwrap();
        n.create_logfile_group(1, "lg", "undo.dat", 2 << 20, 1 << 20)
            .unwrap();
        let spec = TablespaceSpec {
            name: "ts".into(),
            logfile_group: "lg".into(),
            extent_size_bytes: 1 << 20,
            autoextend_size_bytes: 0,
            max_size_bytes: 0,
        };
        let ts = n.create_tablespace(spec, "data.dat", 4 << 20).unwrap();
        (n, ts)
    }

    fn free_extents(n: &NodeDisk) -> u64 {
        n.tsman.files_info().iter().map(|f| f.free_extents).sum()
    }

    #[test]
    fn records_are_written_at_commit_read_updated_freed_and_extents_return() {
        let (n, ts) = node();
        let all = free_extents(&n);
        let mut alloc = NodeDisk::fragment_alloc(7, 0);
        // Prepare then abort: nothing written, nothing kept.
        let r = n.reserve_record(&mut alloc, ts, 100, "t").unwrap();
        assert_eq!(free_extents(&n), all - 1, "one extent taken at prepare");
        n.cancel_reservation(&mut alloc, r);
        assert_eq!(n.undo_gate.lock().reserved_bytes, 0);
        // Commit writes the record, undo first.
        let lsn_before = n.current_lsn();
        let r = n.reserve_record(&mut alloc, ts, 5, "t").unwrap();
        let dref = n.insert_record(&mut alloc, r, b"hello").unwrap();
        assert!(n.current_lsn() > lsn_before, "TupleAlloc logged");
        assert_eq!(n.read_record(dref, |b| b.to_vec()).unwrap(), b"hello");
        // In place, shorter.
        let undo = n.reserve_undo(NodeDisk::undo_for_change(5)).unwrap();
        n.update_record(&mut alloc, dref, b"hey", undo).unwrap();
        assert_eq!(n.read_record(dref, |b| b.to_vec()).unwrap(), b"hey");
        // A second record on another extent, then free both: the emptied extents go
        // back to the tablespace except the one the fragment keeps.
        let big = vec![7u8; 30_000];
        let mut refs = vec![dref];
        for _ in 0..40 {
            let r = n.reserve_record(&mut alloc, ts, big.len(), "t").unwrap();
            refs.push(n.insert_record(&mut alloc, r, &big).unwrap());
        }
        assert!(free_extents(&n) <= all - 2, "rows spread over extents");
        let cached_before = n.pgman.stats().resident_pages;
        let written_before = n.pgman.stats().pages_written;
        for d in refs {
            let undo = n.reserve_undo(NodeDisk::undo_for_change(30_000)).unwrap();
            n.free_record(&mut alloc, d, undo).unwrap();
        }
        assert_eq!(free_extents(&n), all - 1, "empty extents returned");
        // The returned extents' pages left the cache unwritten: only the kept extent's
        // pages remain (at most one extent of 32 pages).
        let s = n.pgman.stats();
        assert!(
            s.resident_pages <= 32 && s.resident_pages < cached_before,
            "{cached_before} -> {}",
            s.resident_pages
        );
        assert_eq!(s.pages_written, written_before, "discarded, not written");
        assert_eq!(n.undo_gate.lock().reserved_bytes, 0);
        alloc.check(&n.tsman).unwrap();
        n.release_fragment(&mut alloc).unwrap();
        assert_eq!(free_extents(&n), all);
        assert_eq!(
            n.pgman.stats().resident_pages,
            0,
            "DROP leaves no page cached"
        );
    }

    #[test]
    fn the_undo_log_is_checkpointed_before_1501() {
        let (n, ts) = node();
        let mut alloc = NodeDisk::fragment_alloc(7, 0);
        let r = n.reserve_record(&mut alloc, ts, 1000, "t").unwrap();
        let dref = n.insert_record(&mut alloc, r, &[1u8; 1000]).unwrap();
        // 2 MB of undo, each update logging a 1000-byte before-image: far more than
        // the log holds, and no 1501 because checkpoints release it.
        for i in 0..5_000u32 {
            let undo = n.reserve_undo(NodeDisk::undo_for_change(1000)).unwrap();
            n.update_record(&mut alloc, dref, &[(i % 251) as u8; 1000], undo)
                .unwrap();
        }
        assert!(n.undo_checkpoints() > 0);
        assert_eq!(n.read_record(dref, |b| b[0]).unwrap(), (4_999 % 251) as u8);
        // A reservation larger than the whole log: 1501, nothing reserved.
        assert_eq!(n.reserve_undo(4 << 20).unwrap_err().code, 1501);
        assert_eq!(n.undo_gate.lock().reserved_bytes, 0);
    }
}
