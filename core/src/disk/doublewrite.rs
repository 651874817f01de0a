//! The doublewrite journal of a data node's data files: a torn page write can never
//! leave a page that a restart cannot read.
//!
//! A 32 KB page write is not atomic on real disks (nor in `MemFileSystem`'s crash
//! model, which tears unsynced writes at sector granularity), and the undo log holds
//! only row-level before-images: it can bring a page that verifies back to an older
//! state, but not rebuild a page whose checksum fails. So every page-sized write to a
//! data file made through [`DoublewriteFs`] goes first to a slot of a small journal
//! file, and to its place only at the next *flush*: the journal fdatasynced, every
//! pending page written in place, their files fdatasynced (InnoDB's doublewrite buffer;
//! NDB has none). A flush runs at every `sync_data` of a journaled file and when the
//! journal's slots are all taken, so a batch of up to `SLOTS` pages costs two syncs, not
//! two per page; until then a read of a pending page gets it from memory. At a restart, [`repair_torn_pages`] copies the newest valid
//! journal copy of each page over a page in place that does not verify, syncs the
//! files and removes the journal (each life numbers its writes from 0). A torn journal
//! slot is harmless: its page's in-place write had not begun.
//!
//! Journal file (`rndb_doublewrite.dat` in the node's file-system directory; design note
//! docs/doublewrite.md): `SLOTS`
//! slots of `SLOT_BYTES`, filled from slot 0 after each flush. Slot layout,
//! little-endian:
//!
//! ```text
//! offset size  field
//!      0    8  magic "RNDBDWB1"
//!      8    8  seq (writes journaled before this one)
//!     16    8  offset of the page in its file
//!     24    4  length of the data (32768)
//!     28    4  path length P (at most MAX_PATH_BYTES)
//!     32    4  crc32c of bytes 36..36+P and of the data
//!     36    P  path of the data file (UTF-8)
//!   4096 32768 the page as written in place
//! ```
//!
//! Invariant: a page is written in place only after its journal copy is durable, and
//! slots are reused only after every page they hold is durable in place (a flush). A
//! write in place that fails (EIO) leaves the pages pending, retried by the next flush;
//! a failed fdatasync is sticky: what reached the disk is unknown, so every later write
//! and sync fails (the node stops, as NDB's does; it never retries a sync). Lock order: the
//! journal's mutex is a leaf (held across a flush's I/O, not across reads in place).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::io::{DiskFile, FileSystem};
use super::page::{self, DISK_PAGE_SIZE};
use crate::error::{Result, codes};

/// Name of the journal in the node's file-system directory.
pub const JOURNAL_NAME: &str = "rndb_doublewrite.dat";
/// Slots in the journal.
pub const SLOTS: u64 = 64;
const HEADER_BYTES: usize = 4096;
/// Bytes of one slot.
pub const SLOT_BYTES: usize = HEADER_BYTES + DISK_PAGE_SIZE;
const MAX_PATH_BYTES: usize = HEADER_BYTES - 36;
const MAGIC: &[u8; 8] = b"RNDBDWB1";

/// A page written to the journal whose in-place write waits for the next flush.
struct Pending {
    target: Arc<dyn DiskFile>,
    page: Vec<u8>,
}

struct JournalState {
    file: Option<Arc<dyn DiskFile>>,
    /// Writes journaled so far (repair takes the newest copy of a page by it).
    seq: u64,
    /// The slot the next write takes (back to 0 after each flush).
    next_slot: u64,
    /// By (file id, offset): the pages journaled since the last flush.
    pending: BTreeMap<(u64, u64), Pending>,
    /// A failed sync: every later write and sync fails (the node must stop).
    failed: Option<String>,
}

/// The journal shared by every data file of a node.
struct Journal {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    state: Mutex<JournalState>,
    next_file_id: std::sync::atomic::AtomicU64,
}

impl Journal {
    fn file(&self, st: &mut JournalState) -> io::Result<Arc<dyn DiskFile>> {
        if let Some(f) = &st.file {
            return Ok(f.clone());
        }
        let f = if self.fs.exists(&self.path) {
            self.fs.open(&self.path)?
        } else {
            self.fs.create(&self.path, SLOTS * SLOT_BYTES as u64)?
        };
        st.file = Some(f.clone());
        Ok(f)
    }

    fn check(st: &JournalState) -> io::Result<()> {
        match &st.failed {
            Some(e) => Err(io::Error::other(format!(
                "doublewrite journal failed earlier: {e}"
            ))),
            None => Ok(()),
        }
    }

    /// Journals `buf` (a page of file `id` at `offset`); its in-place write waits for
    /// the next flush. The journal slot is not synced here.
    fn write(
        &self,
        id: u64,
        path: &Path,
        target: &Arc<dyn DiskFile>,
        buf: &[u8],
        offset: u64,
    ) -> io::Result<()> {
        let path_bytes = path.to_string_lossy().into_owned().into_bytes();
        if path_bytes.len() > MAX_PATH_BYTES {
            return Err(io::Error::other(format!(
                "doublewrite: path of {} bytes, at most {MAX_PATH_BYTES}",
                path_bytes.len()
            )));
        }
        let mut st = self.state.lock();
        Self::check(&st)?;
        if st.next_slot == SLOTS {
            self.flush_locked(&mut st)?;
        }
        let journal = self.file(&mut st)?;
        let seq = st.seq;
        let mut slot = vec![0u8; SLOT_BYTES];
        slot[0..8].copy_from_slice(MAGIC);
        slot[8..16].copy_from_slice(&seq.to_le_bytes());
        slot[16..24].copy_from_slice(&offset.to_le_bytes());
        slot[24..28].copy_from_slice(&(buf.len() as u32).to_le_bytes());
        slot[28..32].copy_from_slice(&(path_bytes.len() as u32).to_le_bytes());
        slot[36..36 + path_bytes.len()].copy_from_slice(&path_bytes);
        slot[HEADER_BYTES..].copy_from_slice(buf);
        let crc = slot_crc(&slot, path_bytes.len());
        slot[32..36].copy_from_slice(&crc.to_le_bytes());
        journal.write_at(&slot, st.next_slot * SLOT_BYTES as u64)?;
        st.next_slot += 1;
        st.seq = seq + 1;
        st.pending.insert(
            (id, offset),
            Pending {
                target: target.clone(),
                page: buf.to_vec(),
            },
        );
        Ok(())
    }

    /// The journal synced, then every pending page written in place and its file
    /// synced: the journal's slots may be reused. A write in place that fails leaves
    /// every page pending (retried by the next flush; their journal copies are
    /// durable); a failed sync is sticky (what reached the disk is unknown).
    fn flush_locked(&self, st: &mut JournalState) -> io::Result<()> {
        Self::check(st)?;
        if st.pending.is_empty() {
            st.next_slot = 0;
            return Ok(());
        }
        let sticky = |st: &mut JournalState, e: io::Error| {
            st.failed = Some(e.to_string());
            e
        };
        let journal = self.file(st)?;
        if let Err(e) = journal.sync_data() {
            return Err(sticky(st, e));
        }
        let mut files: BTreeMap<u64, Arc<dyn DiskFile>> = BTreeMap::new();
        for (&(id, offset), p) in &st.pending {
            p.target.write_at(&p.page, offset)?;
            files.entry(id).or_insert_with(|| p.target.clone());
        }
        for f in files.values() {
            if let Err(e) = f.sync_data() {
                return Err(sticky(st, e));
            }
        }
        st.pending.clear();
        st.next_slot = 0;
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        let mut st = self.state.lock();
        self.flush_locked(&mut st)
    }

    /// The pending page of file `id` at `offset`, if `len` is a whole page; a flush
    /// first when a pending page of the file overlaps another range.
    fn pending_read(&self, id: u64, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        let mut st = self.state.lock();
        if buf.len() == DISK_PAGE_SIZE
            && let Some(p) = st.pending.get(&(id, offset))
        {
            buf.copy_from_slice(&p.page);
            return Ok(true);
        }
        let end = offset + buf.len() as u64;
        let overlaps = st
            .pending
            .range((id, 0)..=(id, u64::MAX))
            .any(|(&(_, o), _)| o < end && o + DISK_PAGE_SIZE as u64 > offset);
        if overlaps {
            self.flush_locked(&mut st)?;
        }
        Ok(false)
    }
}

fn slot_crc(slot: &[u8], path_len: usize) -> u32 {
    let c = crc32c::crc32c(&slot[36..36 + path_len]);
    crc32c::crc32c_append(c, &slot[HEADER_BYTES..])
}

/// A data file whose page writes go through the journal.
struct JournaledFile {
    id: u64,
    inner: Arc<dyn DiskFile>,
    path: PathBuf,
    journal: Arc<Journal>,
}

impl DiskFile for JournaledFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.journal.pending_read(self.id, buf, offset)? {
            return Ok(());
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if buf.len() != DISK_PAGE_SIZE {
            self.journal.flush()?;
            return self.inner.write_at(buf, offset);
        }
        self.journal
            .write(self.id, &self.path, &self.inner, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.journal.flush()?;
        self.inner.sync_data()
    }
    fn len_bytes(&self) -> io::Result<u64> {
        self.journal.flush()?;
        self.inner.len_bytes()
    }
    fn extend_to(&self, len: u64) -> io::Result<()> {
        self.journal.flush()?;
        self.inner.extend_to(len)
    }
}

/// A file system whose files' page writes are journaled (use it for data files only).
pub struct DoublewriteFs {
    inner: Arc<dyn FileSystem>,
    journal: Arc<Journal>,
}

impl DoublewriteFs {
    /// Journal at `fs_dir`/[`JOURNAL_NAME`] (created at the first page write).
    pub fn new(inner: Arc<dyn FileSystem>, fs_dir: &Path) -> DoublewriteFs {
        DoublewriteFs {
            journal: Arc::new(Journal {
                fs: inner.clone(),
                path: fs_dir.join(JOURNAL_NAME),
                state: Mutex::new(JournalState {
                    file: None,
                    seq: 0,
                    next_slot: 0,
                    pending: BTreeMap::new(),
                    failed: None,
                }),
                next_file_id: std::sync::atomic::AtomicU64::new(0),
            }),
            inner,
        }
    }

    fn wrap(&self, path: &Path, f: Arc<dyn DiskFile>) -> Arc<dyn DiskFile> {
        let id = self
            .journal
            .next_file_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(JournaledFile {
            id,
            inner: f,
            path: path.to_path_buf(),
            journal: self.journal.clone(),
        })
    }
}

impl FileSystem for DoublewriteFs {
    fn create(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        let f = self.inner.create(path, size_bytes)?;
        Ok(self.wrap(path, f))
    }
    fn create_sparse(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        let f = self.inner.create_sparse(path, size_bytes)?;
        Ok(self.wrap(path, f))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn DiskFile>> {
        let f = self.inner.open(path)?;
        Ok(self.wrap(path, f))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(dir)
    }
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_atomic(path, bytes)
    }
    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        self.inner.read_all(path)
    }
}

/// Restart, before any data file is opened: every page in place that does not verify
/// gets the newest valid journal copy of it. Returns the pages repaired (path, page
/// number).
pub fn repair_torn_pages(fs: &dyn FileSystem, fs_dir: &Path) -> Result<Vec<(PathBuf, u32)>> {
    let path = fs_dir.join(JOURNAL_NAME);
    let Some(bytes) = fs
        .read_all(&path)
        .map_err(|e| codes::file_read_error(format_args!("{}: {e}", path.display())))?
    else {
        return Ok(Vec::new());
    };
    // Newest valid copy of each (path, offset).
    let mut newest: BTreeMap<(PathBuf, u64), (u64, usize)> = BTreeMap::new();
    for (k, slot) in bytes.chunks_exact(SLOT_BYTES).enumerate() {
        if &slot[0..8] != MAGIC {
            continue;
        }
        let u32_at =
            |o: usize| u32::from_le_bytes([slot[o], slot[o + 1], slot[o + 2], slot[o + 3]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&slot[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let (seq, offset, len, path_len) = (u64_at(8), u64_at(16), u32_at(24), u32_at(28));
        if len as usize != DISK_PAGE_SIZE
            || path_len as usize > MAX_PATH_BYTES
            || slot_crc(slot, path_len as usize) != u32_at(32)
        {
            continue; // torn: its in-place write never began
        }
        let target =
            PathBuf::from(String::from_utf8_lossy(&slot[36..36 + path_len as usize]).into_owned());
        let e = newest.entry((target, offset)).or_insert((seq, k));
        if seq >= e.0 {
            *e = (seq, k);
        }
    }
    let mut repaired = Vec::new();
    let targets: std::collections::BTreeSet<PathBuf> =
        newest.keys().map(|(t, _)| t.clone()).collect();
    for ((target, offset), (_, k)) in newest {
        let copy = &bytes[k * SLOT_BYTES + HEADER_BYTES..(k + 1) * SLOT_BYTES];
        let Some(h) = page::header(copy) else {
            continue;
        };
        if !fs.exists(&target) {
            continue; // dropped since
        }
        let f = fs
            .open(&target)
            .map_err(|e| codes::file_system_error(format_args!("{}: {e}", target.display())))?;
        let len = f
            .len_bytes()
            .map_err(|e| codes::file_read_error(format_args!("{}: {e}", target.display())))?;
        if offset + DISK_PAGE_SIZE as u64 > len {
            continue;
        }
        let mut in_place = vec![0u8; DISK_PAGE_SIZE];
        f.read_at(&mut in_place, offset)
            .map_err(|e| codes::file_read_error(format_args!("{}: {e}", target.display())))?;
        if page::verify(&in_place, h.file_no, h.page_no).is_ok() {
            continue;
        }
        let io_err =
            |e: io::Error| codes::file_system_error(format_args!("{}: {e}", target.display()));
        f.write_at(copy, offset).map_err(io_err)?;
        f.sync_data().map_err(io_err)?;
        repaired.push((target, h.page_no));
    }
    // Every page the journal covers is now whole and durable in place (the writes a
    // killed process left in the OS's cache included): the journal is dropped, and the
    // next life numbers its writes from 0 without older copies to confuse them with.
    for target in targets.iter().filter(|t| fs.exists(t)) {
        let io_err =
            |e: io::Error| codes::file_system_error(format_args!("{}: {e}", target.display()));
        fs.open(target)
            .and_then(|f| f.sync_data())
            .map_err(io_err)?;
    }
    fs.remove(&path)
        .map_err(|e| codes::file_system_error(format_args!("{}: {e}", path.display())))?;
    Ok(repaired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::io::MemFileSystem;
    use crate::disk::page::{PageHeader, PageKind};

    fn sealed(file_no: u32, page_no: u32, fill: u8) -> Vec<u8> {
        let mut p = vec![fill; DISK_PAGE_SIZE];
        page::seal(
            &mut p,
            &PageHeader {
                kind: PageKind::Data,
                file_no,
                page_no,
                lsn: 7,
                extra: 0,
            },
        );
        p
    }

    #[test]
    fn torn_pages_are_repaired_from_the_journal_and_whole_ones_left_alone() {
        let mem = MemFileSystem::new();
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        let dir = Path::new("/n");
        fs.create_dir_all(dir).unwrap();
        let dw = DoublewriteFs::new(fs.clone(), dir);
        let data = dir.join("data.dat");
        let f = dw.create(&data, 8 * DISK_PAGE_SIZE as u64).unwrap();
        f.sync_data().unwrap();
        // More writes than slots: the journal wraps (and syncs the data file).
        for round in 0..3u8 {
            for p in 0..40u32 {
                f.write_at(
                    &sealed(1, p % 8, round),
                    (p % 8) as u64 * DISK_PAGE_SIZE as u64,
                )
                .unwrap();
            }
        }
        // A torn page in place (as a power loss mid-write leaves it).
        let raw = fs.open(&data).unwrap();
        let mut torn = sealed(1, 5, 9);
        torn[100..5000].fill(0xEE);
        raw.write_at(&torn[..8192], 5 * DISK_PAGE_SIZE as u64)
            .unwrap();
        let repaired = repair_torn_pages(&*fs, dir).unwrap();
        assert_eq!(repaired, vec![(data.clone(), 5)]);
        let mut back = vec![0u8; DISK_PAGE_SIZE];
        raw.read_at(&mut back, 5 * DISK_PAGE_SIZE as u64).unwrap();
        assert_eq!(back, sealed(1, 5, 2), "the newest copy");
        assert!(
            !fs.exists(&dir.join(JOURNAL_NAME)),
            "the journal is dropped"
        );
        assert!(
            repair_torn_pages(&*fs, dir).unwrap().is_empty(),
            "nothing left"
        );
        // Without a journal there is nothing to do.
        assert!(
            repair_torn_pages(&*fs, Path::new("/other"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn pending_pages_read_back_and_a_failed_flush_is_sticky() {
        let mem = MemFileSystem::new();
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        let dir = Path::new("/n");
        fs.create_dir_all(dir).unwrap();
        let dw = DoublewriteFs::new(fs.clone(), dir);
        let data = dir.join("data.dat");
        let f = dw.create(&data, 4 * DISK_PAGE_SIZE as u64).unwrap();
        f.write_at(&sealed(1, 2, 5), 2 * DISK_PAGE_SIZE as u64)
            .unwrap();
        // Not in place yet, but read back whole.
        let raw = fs.open(&data).unwrap();
        let mut b = vec![0u8; DISK_PAGE_SIZE];
        raw.read_at(&mut b, 2 * DISK_PAGE_SIZE as u64).unwrap();
        assert!(b.iter().all(|&x| x == 0), "in place only at the next flush");
        f.read_at(&mut b, 2 * DISK_PAGE_SIZE as u64).unwrap();
        assert_eq!(b, sealed(1, 2, 5));
        // A read overlapping it in part flushes first.
        let mut small = vec![0u8; 64];
        f.read_at(&mut small, 2 * DISK_PAGE_SIZE as u64 + 100)
            .unwrap();
        raw.read_at(&mut b, 2 * DISK_PAGE_SIZE as u64).unwrap();
        assert_eq!(b, sealed(1, 2, 5), "flushed in place");
        // A write in place that fails (EIO): the page stays pending, retried later.
        f.write_at(&sealed(1, 3, 6), 3 * DISK_PAGE_SIZE as u64)
            .unwrap();
        let faults = |writes: bool, syncs: bool| crate::disk::io::Faults {
            fail_writes: writes,
            fail_syncs: syncs,
            only_paths_containing: Some("data.dat".into()),
            ..Default::default()
        };
        mem.set_faults(faults(true, false));
        assert!(f.sync_data().is_err());
        mem.set_faults(crate::disk::io::Faults::default());
        f.read_at(&mut b, 3 * DISK_PAGE_SIZE as u64).unwrap();
        assert_eq!(b, sealed(1, 3, 6), "still pending");
        f.sync_data().unwrap();
        raw.read_at(&mut b, 3 * DISK_PAGE_SIZE as u64).unwrap();
        assert_eq!(b, sealed(1, 3, 6), "written by the retry");
        // A failed fdatasync is sticky: every later write and sync fails.
        f.write_at(&sealed(1, 1, 7), DISK_PAGE_SIZE as u64).unwrap();
        mem.set_faults(faults(false, true));
        assert!(f.sync_data().is_err());
        mem.set_faults(crate::disk::io::Faults::default());
        assert!(f.sync_data().is_err(), "sticky");
        assert!(f.write_at(&sealed(1, 1, 8), DISK_PAGE_SIZE as u64).is_err());
    }

    #[test]
    fn power_loss_never_leaves_an_unreadable_page() {
        for seed in 0..20u64 {
            let mem = MemFileSystem::new();
            let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
            let dir = Path::new("/n");
            fs.create_dir_all(dir).unwrap();
            let dw = DoublewriteFs::new(fs.clone(), dir);
            let data = dir.join("data.dat");
            let f = dw.create(&data, 4 * DISK_PAGE_SIZE as u64).unwrap();
            f.sync_data().unwrap();
            for i in 0..10u32 {
                f.write_at(
                    &sealed(1, i % 4, i as u8),
                    (i % 4) as u64 * DISK_PAGE_SIZE as u64,
                )
                .unwrap();
            }
            let image = mem.crash_image(seed);
            repair_torn_pages(&image, dir).unwrap();
            let raw = image.open(&data).unwrap();
            for p in 0..4u32 {
                let mut b = vec![0u8; DISK_PAGE_SIZE];
                raw.read_at(&mut b, p as u64 * DISK_PAGE_SIZE as u64)
                    .unwrap();
                page::verify(&b, 1, p).unwrap_or_else(|e| panic!("seed {seed} page {p}: {e}"));
            }
        }
    }
}
