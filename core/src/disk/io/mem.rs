//! [`MemFileSystem`]: files in memory that simulate a disk behind a page cache, with
//! injected faults and power-loss images. The crash model is in the parent module's
//! doc ("Crash model of MemFileSystem"); this file implements it.
//!
//! Invariants of a [`FileData`]: `durable.len() <= current.len()`; applying the
//! unsynced writes to `durable` in order, then (on success) setting the length to
//! `current.len()`, is exactly what a successful sync does; `unsynced_bytes` is the sum
//! of the unsynced writes' lengths and stays within the caps below (checked after every
//! write). Space accounting: a file counts its length, a sparse file (from
//! `create_sparse`, until `extend_to`) counts its written chunks of `CHUNK_BYTES`.
//!
//! Lock order: the state mutex, then one file's mutex; every mutation holds both.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::faults::{FaultPlan, Faults, Injector, IoOp, MemStats, SplitMix64};
use super::pages::{Pages, SECTOR_BYTES};
use super::{DiskFile, FileSystem, eio};

/// Largest simulated file (64 GiB); beyond, EFBIG.
pub const MAX_MEM_FILE_BYTES: u64 = 1 << 36;
/// Unsynced writes kept per file; beyond, the oldest is written back (made durable).
pub const MAX_UNSYNCED_WRITES: usize = 1024;
/// Unsynced bytes kept per file; beyond, the oldest writes are written back.
pub const MAX_UNSYNCED_BYTES: usize = 8 << 20;

struct UnsyncedWrite {
    offset: u64,
    bytes: Vec<u8>,
}

/// One simulated file: what reads see, what survives a power loss, and the writes in
/// between.
struct FileData {
    current: Pages,
    durable: Pages,
    unsynced: VecDeque<UnsyncedWrite>,
    unsynced_bytes: usize,
    sparse: bool,
}

impl FileData {
    fn new(content: Pages, sparse: bool) -> FileData {
        FileData {
            current: content.clone(),
            durable: content,
            unsynced: VecDeque::new(),
            unsynced_bytes: 0,
            sparse,
        }
    }

    fn used_bytes(&self) -> u64 {
        if self.sparse {
            self.current.allocated_bytes().min(self.current.len())
        } else {
            self.current.len()
        }
    }

    /// Bytes a write of `offset..end` allocates.
    fn extra_for_write(&self, offset: u64, end: u64) -> u64 {
        if end <= offset {
            0
        } else if self.sparse {
            self.current.unallocated_bytes_in(offset, end)
        } else {
            end.saturating_sub(self.current.len())
        }
    }

    /// Apply a write; returns how many older writes were written back by the caps.
    fn write(&mut self, offset: u64, buf: &[u8]) -> u64 {
        if buf.is_empty() {
            return 0; // like pwrite: an empty write does not extend the file
        }
        self.current.write(offset, buf);
        match self.unsynced.back_mut() {
            Some(last) if last.offset == offset && last.bytes.len() == buf.len() => {
                last.bytes.copy_from_slice(buf);
            }
            _ => {
                self.unsynced.push_back(UnsyncedWrite {
                    offset,
                    bytes: buf.to_vec(),
                });
                self.unsynced_bytes += buf.len();
            }
        }
        let mut written_back = 0;
        while self.unsynced.len() > MAX_UNSYNCED_WRITES || self.unsynced_bytes > MAX_UNSYNCED_BYTES
        {
            let Some(w) = self.unsynced.pop_front() else {
                break;
            };
            self.unsynced_bytes -= w.bytes.len();
            self.durable.write(w.offset, &w.bytes);
            written_back += 1;
        }
        assert!(self.durable.len() <= self.current.len());
        written_back
    }

    fn sync_ok(&mut self) {
        for w in self.unsynced.drain(..) {
            self.durable.write(w.offset, &w.bytes);
        }
        self.unsynced_bytes = 0;
        self.durable.set_len(self.current.len());
    }

    /// A failed sync: the unsynced writes will never be durable. Returns their count.
    fn sync_failed(&mut self) -> u64 {
        let lost = self.unsynced.len() as u64;
        self.unsynced.clear();
        self.unsynced_bytes = 0;
        lost
    }

    fn extend(&mut self, len: u64) {
        self.current.set_len(len);
        self.durable.set_len(len);
        self.sparse = false;
    }

    /// The file after a power loss now, choices drawn from `rng`.
    fn crash_image(&self, rng: &mut SplitMix64) -> FileData {
        let mut img = self.durable.clone();
        for w in &self.unsynced {
            match rng.below(3) {
                0 => {}
                1 => img.write(w.offset, &w.bytes),
                _ => {
                    let end = w.offset + w.bytes.len() as u64;
                    let mut at = w.offset;
                    while at < end {
                        let sector_end = ((at / SECTOR_BYTES + 1) * SECTOR_BYTES).min(end);
                        if rng.coin() {
                            let from = (at - w.offset) as usize;
                            let to = (sector_end - w.offset) as usize;
                            img.write(at, &w.bytes[from..to]);
                        }
                        at = sector_end;
                    }
                }
            }
        }
        let keep_growth = self.current.len() > self.durable.len() && rng.coin();
        img.set_len(if keep_growth {
            self.current.len()
        } else {
            self.durable.len()
        });
        FileData::new(img, self.sparse)
    }
}

type SharedFile = Arc<Mutex<FileData>>;

/// A power loss armed with [`MemFileSystem::crash_at`].
struct CrashPoint {
    op: IoOp,
    remaining: u64,
    seed: u64,
}

#[derive(Default)]
struct MemState {
    files: BTreeMap<PathBuf, SharedFile>,
    dirs: BTreeSet<PathBuf>,
    inj: Injector,
    crash_point: Option<CrashPoint>,
    /// The image captured when the crash point was reached.
    captured: Option<MemFileSystem>,
    /// The power is off: every operation fails with EIO.
    halted: bool,
}

fn used_bytes(files: &BTreeMap<PathBuf, SharedFile>) -> u64 {
    files.values().map(|f| f.lock().used_bytes()).sum()
}

impl MemState {
    /// Every operation's gate: the power is off, the armed power loss, then the
    /// injected faults. Called with no file lock held (the capture locks every file).
    fn check(&mut self, op: IoOp, path: &Path, offset: u64) -> io::Result<()> {
        self.check_power()?;
        if let Some(cp) = &mut self.crash_point
            && cp.op == op
        {
            cp.remaining -= 1;
            if cp.remaining == 0 {
                let seed = cp.seed;
                self.crash_point = None;
                self.captured = Some(self.image(seed));
                self.halted = true;
                return self.check_power();
            }
        }
        self.inj.check(op, path, offset)
    }

    fn check_power(&mut self) -> io::Result<()> {
        if self.halted {
            self.inj.stats.after_power_loss += 1;
            return Err(eio());
        }
        Ok(())
    }

    fn image(&self, seed: u64) -> MemFileSystem {
        let mut rng = SplitMix64::new(seed);
        let files = self
            .files
            .iter()
            .map(|(path, f)| {
                let img = f.lock().crash_image(&mut rng);
                (path.clone(), Arc::new(Mutex::new(img)))
            })
            .collect();
        MemFileSystem {
            state: Arc::new(Mutex::new(MemState {
                files,
                dirs: self.dirs.clone(),
                ..MemState::default()
            })),
        }
    }

    fn reserve(&mut self, extra: u64, path: &Path, offset: u64) -> io::Result<()> {
        let files = &self.files;
        self.inj.reserve(|| used_bytes(files), extra, path, offset)
    }

    fn parent_exists(&self, path: &Path) -> bool {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => self.dirs.contains(parent),
            _ => true,
        }
    }
}

fn efbig() -> io::Error {
    io::Error::from_raw_os_error(libc::EFBIG)
}

/// Files in memory, for tests and the simulator. Cloning shares the same "disk";
/// [`MemFileSystem::crash_image`] makes an independent one.
#[derive(Clone, Default)]
pub struct MemFileSystem {
    state: Arc<Mutex<MemState>>,
}

impl MemFileSystem {
    pub fn new() -> MemFileSystem {
        MemFileSystem::default()
    }
    pub fn set_faults(&self, faults: Faults) {
        self.state.lock().inj.faults = faults;
    }
    pub fn faults(&self) -> Faults {
        self.state.lock().inj.faults.clone()
    }
    /// Arm seeded random faults (`None` disarms); the generator restarts from the seed.
    pub fn set_fault_plan(&self, plan: Option<FaultPlan>) {
        self.state.lock().inj.set_plan(plan);
    }
    pub fn fault_plan(&self) -> Option<FaultPlan> {
        self.state.lock().inj.plan.as_ref().map(|p| p.plan.clone())
    }
    /// Fail the `n`-th operation of kind `op` from now with EIO (1 = the next one), once;
    /// `n = 0` disarms. See `faults.rs` for which calls count as which kind.
    pub fn fail_nth(&self, op: IoOp, n: u64) {
        self.state.lock().inj.arm(op, n);
    }
    pub fn stats(&self) -> MemStats {
        self.state.lock().inj.stats.clone()
    }
    /// The injected failures so far (the first `FAULT_LOG_MAX`), in order: kind, path,
    /// offset and the thread that got it. For the failure messages of tests.
    pub fn fault_log(&self) -> Vec<String> {
        self.state.lock().inj.log.clone()
    }
    /// Bytes held by all files (sparse files: their written chunks).
    pub fn used_bytes(&self) -> u64 {
        used_bytes(&self.state.lock().files)
    }
    /// The paths of all files, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.state.lock().files.keys().cloned().collect()
    }
    /// Writes not yet durable, over all files.
    pub fn unsynced_writes(&self) -> u64 {
        let st = self.state.lock();
        st.files
            .values()
            .map(|f| f.lock().unsynced.len() as u64)
            .sum()
    }
    /// Flip one byte of a file, in what reads see and in what survives a crash
    /// (corruption tests). False when the file or the byte does not exist.
    pub fn corrupt_byte(&self, path: &Path, offset: u64) -> bool {
        let st = self.state.lock();
        let Some(f) = st.files.get(path) else {
            return false;
        };
        let mut f = f.lock();
        f.durable.flip_byte(offset);
        f.current.flip_byte(offset)
    }

    /// The disk after a power loss at this instant (see "Crash model of
    /// MemFileSystem"): durable content plus a seeded choice for every unsynced write.
    /// The image is independent of `self`, has no faults armed and zero stats.
    pub fn crash_image(&self, seed: u64) -> MemFileSystem {
        self.state.lock().image(seed)
    }

    /// Arm a power loss just before the `n`-th operation of kind `op` from now (1 = the
    /// next; `n = 0` disarms): at that instant the crash image for `seed` is captured
    /// (fetch it with [`MemFileSystem::take_crash_image`]), and that operation and every
    /// later one (remove included) fail with EIO, so that nothing after the power loss
    /// can be acknowledged as durable. Counted in `MemStats::after_power_loss`.
    pub fn crash_at(&self, op: IoOp, n: u64, seed: u64) {
        self.state.lock().crash_point = (n > 0).then_some(CrashPoint {
            op,
            remaining: n,
            seed,
        });
    }

    /// The image captured by the power loss armed with [`MemFileSystem::crash_at`], once.
    pub fn take_crash_image(&self) -> Option<MemFileSystem> {
        self.state.lock().captured.take()
    }

    /// True after an armed power loss happened (every operation fails).
    pub fn powered_off(&self) -> bool {
        self.state.lock().halted
    }

    fn create_file(&self, path: &Path, size_bytes: u64, sparse: bool) -> io::Result<MemFile> {
        let mut st = self.state.lock();
        if st.files.contains_key(path) || st.dirs.contains(path) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        if !st.parent_exists(path) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        if size_bytes > MAX_MEM_FILE_BYTES {
            return Err(efbig());
        }
        st.check(IoOp::Write, path, 0)?;
        st.reserve(if sparse { 0 } else { size_bytes }, path, 0)?;
        let data = Arc::new(Mutex::new(FileData::new(Pages::zeroed(size_bytes), sparse)));
        st.files.insert(path.to_path_buf(), data.clone());
        Ok(MemFile {
            data,
            fs: self.state.clone(),
            path: path.to_path_buf(),
        })
    }
}

impl FileSystem for MemFileSystem {
    fn create(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        Ok(Arc::new(self.create_file(path, size_bytes, false)?))
    }

    fn create_sparse(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        Ok(Arc::new(self.create_file(path, size_bytes, true)?))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn DiskFile>> {
        let st = self.state.lock();
        let data = st
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(Arc::new(MemFile {
            data,
            fs: self.state.clone(),
            path: path.to_path_buf(),
        }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check_power()?;
        st.files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        if !st.files.contains_key(from) || !st.parent_exists(to) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        if st.dirs.contains(to) {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        st.check(IoOp::Write, to, 0)?;
        if from != to
            && let Some(f) = st.files.remove(from)
        {
            st.files.insert(to.to_path_buf(), f);
        }
        Ok(())
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check_power()?;
        if !st.dirs.contains(dir) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        // `starts_with` compares whole components: `/a/LCP` does not hold `/a/LCP2`.
        st.files.retain(|p, _| !p.starts_with(dir));
        st.dirs.retain(|d| !d.starts_with(dir));
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let st = self.state.lock();
        if !st.dirs.contains(dir) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        Ok(st
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.files.contains_key(path) || st.dirs.contains(path)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        if !st.parent_exists(path) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        if bytes.len() as u64 > MAX_MEM_FILE_BYTES {
            return Err(efbig());
        }
        st.inj.stats.writes += 1;
        st.check(IoOp::Write, path, 0)?;
        let old = st.files.get(path).map_or(0, |f| f.lock().used_bytes());
        st.reserve((bytes.len() as u64).saturating_sub(old), path, 0)?;
        let data = FileData::new(Pages::from_bytes(bytes), false);
        st.files
            .insert(path.to_path_buf(), Arc::new(Mutex::new(data)));
        Ok(())
    }

    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        let mut st = self.state.lock();
        let Some(f) = st.files.get(path).cloned() else {
            return Ok(None);
        };
        st.inj.stats.reads += 1;
        st.check(IoOp::Read, path, 0)?;
        Ok(Some(f.lock().current.to_vec()))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let mut p = Some(path);
        while let Some(dir) = p {
            if dir.as_os_str().is_empty() {
                break;
            }
            st.dirs.insert(dir.to_path_buf());
            p = dir.parent();
        }
        Ok(())
    }
}

struct MemFile {
    data: SharedFile,
    fs: Arc<Mutex<MemState>>,
    /// Where it was opened (path-scoped faults).
    path: PathBuf,
}

impl DiskFile for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.inj.stats.reads += 1;
        st.check(IoOp::Read, &self.path, offset)?;
        let f = self.data.lock();
        let end = offset.checked_add(buf.len() as u64).ok_or_else(eio)?;
        if buf.is_empty() {
            return Ok(());
        }
        if end > f.current.len() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        f.current.read(offset, buf);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64).ok_or_else(efbig)?;
        if end > MAX_MEM_FILE_BYTES {
            return Err(efbig());
        }
        let mut st = self.fs.lock();
        st.inj.stats.writes += 1;
        st.check(IoOp::Write, &self.path, offset)?;
        // The state lock keeps the file unchanged between these two file locks.
        let extra = self.data.lock().extra_for_write(offset, end);
        st.reserve(extra, &self.path, offset)?;
        let written_back = self.data.lock().write(offset, buf);
        st.inj.stats.written_back += written_back;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.inj.stats.syncs += 1;
        if let Err(e) = st.check(IoOp::Sync, &self.path, 0) {
            st.inj.stats.lost_writes += self.data.lock().sync_failed();
            return Err(e);
        }
        self.data.lock().sync_ok();
        Ok(())
    }

    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.data.lock().current.len())
    }

    fn extend_to(&self, len: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        let (cur, used) = {
            let f = self.data.lock();
            (f.current.len(), f.used_bytes())
        };
        if len <= cur {
            return Ok(());
        }
        if len > MAX_MEM_FILE_BYTES {
            return Err(efbig());
        }
        st.check(IoOp::Write, &self.path, len)?;
        st.reserve(len.saturating_sub(used), &self.path, len)?;
        self.data.lock().extend(len);
        Ok(())
    }
}
