//! File I/O for disk data (data files, undo files), behind a trait so that tests and the
//! simulator can inject ENOSPC, EIO and fsync failures into the real code.
//!
//! - [`FileSystem`] creates, opens and removes files; [`DiskFile`] reads and writes
//!   whole buffers at offsets (positional I/O, no shared cursor, so one file is usable
//!   from several threads at once).
//! - [`OsFileSystem`]: std::fs with `pread`/`pwrite`, preallocation with
//!   `posix_fallocate` (so that a full disk is reported at CREATE / ADD DATAFILE time,
//!   not at the first page write), `fdatasync`, and a directory fsync after creating or
//!   removing a file.
//! - [`MemFileSystem`]: files in memory with a byte budget (ENOSPC beyond it) and
//!   switchable EIO on reads, writes and syncs. Every failure is counted.
//!
//! Invariants: `read_at` and `write_at` transfer the whole buffer or fail; a short read
//! (beyond the end of the file) is an error, never zero-filled. `create` never
//! overwrites an existing file.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// A file opened for positional reads and writes.
pub trait DiskFile: Send + Sync {
    /// Read exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Write all of `buf` at `offset` (within the preallocated size or beyond it).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Make written data durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Current size in bytes.
    fn len_bytes(&self) -> io::Result<u64>;
    /// Grow the file to `len` bytes, allocating the space (ENOSPC when the disk is full).
    fn extend_to(&self, len: u64) -> io::Result<()>;
}

/// Where files are created.
pub trait FileSystem: Send + Sync {
    /// Create a new file of `size_bytes` (allocated, zero-filled). Fails with
    /// `AlreadyExists` if the path exists.
    fn create(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>>;
    /// Open an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn DiskFile>>;
    /// Remove a file (and make the removal durable).
    fn remove(&self, path: &Path) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    /// Create a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Replace a small file's content atomically (write aside, sync, rename, sync the
    /// directory): after a crash it holds the old or the new content, never a mix.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// A small file's whole content; `None` when it does not exist.
    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
}

// ---------------------------------------------------------------------------------
// Real files

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

struct OsFile {
    file: File,
}

fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}

fn fallocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "file size out of range",
        ));
    };
    // SAFETY: the descriptor is open for writing for the lifetime of `file`.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), off, n) };
    match rc {
        0 => Ok(()),
        // File systems without fallocate support: fall back to set_len (sparse).
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(offset + len),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

impl FileSystem for OsFileSystem {
    fn create(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        if let Err(e) = fallocate(&file, 0, size_bytes).and_then(|_| file.sync_all()) {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        sync_parent_dir(path)?;
        Ok(Arc::new(OsFile { file }))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn DiskFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(OsFile { file }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)?;
        sync_parent_dir(path)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        sync_parent_dir(path)
    }

    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl DiskFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn extend_to(&self, len: u64) -> io::Result<()> {
        let cur = self.len_bytes()?;
        if len <= cur {
            return Ok(());
        }
        fallocate(&self.file, cur, len - cur)?;
        self.file.sync_all()
    }
}

// ---------------------------------------------------------------------------------
// Files in memory with injected faults

/// Faults a [`MemFileSystem`] injects; change them at any time through
/// [`MemFileSystem::set_faults`].
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Total bytes the "disk" holds (`None`: unlimited). Allocation beyond: ENOSPC.
    pub capacity_bytes: Option<u64>,
    /// Reads fail with EIO.
    pub fail_reads: bool,
    /// Writes fail with EIO.
    pub fail_writes: bool,
    /// fdatasync fails with EIO.
    pub fail_syncs: bool,
}

/// Counters of a [`MemFileSystem`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    pub reads: u64,
    pub writes: u64,
    pub syncs: u64,
    pub injected_failures: u64,
}

#[derive(Default)]
struct MemState {
    files: BTreeMap<PathBuf, Arc<Mutex<Vec<u8>>>>,
    dirs: std::collections::BTreeSet<PathBuf>,
    faults: Faults,
    stats: MemStats,
}

impl MemState {
    fn used_bytes(&self) -> u64 {
        self.files.values().map(|f| f.lock().len() as u64).sum()
    }
    /// Check the budget for growing by `extra` bytes.
    fn reserve(&mut self, extra: u64) -> io::Result<()> {
        if let Some(cap) = self.faults.capacity_bytes
            && self.used_bytes() + extra > cap
        {
            self.stats.injected_failures += 1;
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}

/// Files in memory, for tests and the simulator. Cloning shares the same "disk".
#[derive(Clone, Default)]
pub struct MemFileSystem {
    state: Arc<Mutex<MemState>>,
}

impl MemFileSystem {
    pub fn new() -> MemFileSystem {
        MemFileSystem::default()
    }
    pub fn set_faults(&self, faults: Faults) {
        self.state.lock().faults = faults;
    }
    pub fn faults(&self) -> Faults {
        self.state.lock().faults.clone()
    }
    pub fn stats(&self) -> MemStats {
        self.state.lock().stats.clone()
    }
    /// Bytes held by all files.
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used_bytes()
    }
    /// The paths of all files, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.state.lock().files.keys().cloned().collect()
    }
    /// Flip one byte of a file (corruption tests).
    pub fn corrupt_byte(&self, path: &Path, offset: u64) -> bool {
        let st = self.state.lock();
        let Some(f) = st.files.get(path) else {
            return false;
        };
        let mut data = f.lock();
        match data.get_mut(offset as usize) {
            Some(b) => {
                *b ^= 0x5a;
                true
            }
            None => false,
        }
    }
}

struct MemFile {
    data: Arc<Mutex<Vec<u8>>>,
    fs: Arc<Mutex<MemState>>,
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl FileSystem for MemFileSystem {
    fn create(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        let mut st = self.state.lock();
        if st.files.contains_key(path) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
            && !st.dirs.contains(parent)
        {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        if st.faults.fail_writes {
            st.stats.injected_failures += 1;
            return Err(eio());
        }
        st.reserve(size_bytes)?;
        let data = Arc::new(Mutex::new(vec![0u8; size_bytes as usize]));
        st.files.insert(path.to_path_buf(), data.clone());
        Ok(Arc::new(MemFile {
            data,
            fs: self.state.clone(),
        }))
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
        }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.files.contains_key(path) || st.dirs.contains(path)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        if st.faults.fail_writes {
            st.stats.injected_failures += 1;
            return Err(eio());
        }
        let old = st.files.get(path).map_or(0, |f| f.lock().len() as u64);
        st.reserve((bytes.len() as u64).saturating_sub(old))?;
        st.stats.writes += 1;
        st.files
            .insert(path.to_path_buf(), Arc::new(Mutex::new(bytes.to_vec())));
        Ok(())
    }

    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        let st = self.state.lock();
        Ok(st.files.get(path).map(|f| f.lock().clone()))
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

impl DiskFile for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        {
            let mut st = self.fs.lock();
            st.stats.reads += 1;
            if st.faults.fail_reads {
                st.stats.injected_failures += 1;
                return Err(eio());
            }
        }
        let data = self.data.lock();
        let start = usize::try_from(offset).map_err(|_| eio())?;
        let end = start.checked_add(buf.len()).ok_or_else(eio)?;
        if end > data.len() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        buf.copy_from_slice(&data[start..end]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| eio())?;
        let end = start.checked_add(buf.len()).ok_or_else(eio)?;
        {
            let mut st = self.fs.lock();
            st.stats.writes += 1;
            if st.faults.fail_writes {
                st.stats.injected_failures += 1;
                return Err(eio());
            }
            let cur = self.data.lock().len();
            if end > cur {
                st.reserve((end - cur) as u64)?;
            }
        }
        let mut data = self.data.lock();
        if end > data.len() {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(buf);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.stats.syncs += 1;
        if st.faults.fail_syncs {
            st.stats.injected_failures += 1;
            return Err(eio());
        }
        Ok(())
    }

    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.data.lock().len() as u64)
    }

    fn extend_to(&self, len: u64) -> io::Result<()> {
        let cur = self.data.lock().len() as u64;
        if len <= cur {
            return Ok(());
        }
        {
            let mut st = self.fs.lock();
            if st.faults.fail_writes {
                st.stats.injected_failures += 1;
                return Err(eio());
            }
            st.reserve(len - cur)?;
        }
        self.data.lock().resize(len as usize, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(fs: &dyn FileSystem, dir: &Path) {
        fs.create_dir_all(dir).unwrap();
        let p = dir.join("a.dat");
        let f = fs.create(&p, 8192).unwrap();
        assert!(fs.create(&p, 10).is_err(), "create must not overwrite");
        assert_eq!(f.len_bytes().unwrap(), 8192);
        f.write_at(b"hello", 100).unwrap();
        let mut b = [0u8; 5];
        f.read_at(&mut b, 100).unwrap();
        assert_eq!(&b, b"hello");
        assert!(f.read_at(&mut b, 8190).is_err(), "short read is an error");
        f.extend_to(16384).unwrap();
        assert_eq!(f.len_bytes().unwrap(), 16384);
        f.sync_data().unwrap();
        let g = fs.open(&p).unwrap();
        g.read_at(&mut b, 100).unwrap();
        assert_eq!(&b, b"hello");
        fs.remove(&p).unwrap();
        assert!(!fs.exists(&p));
    }

    #[test]
    fn os_and_mem_behave_alike() {
        let tmp = tempfile::tempdir().unwrap();
        roundtrip(&OsFileSystem, &tmp.path().join("x"));
        roundtrip(&MemFileSystem::new(), Path::new("/m/x"));
    }

    #[test]
    fn mem_injects_enospc_and_eio() {
        let fs = MemFileSystem::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        fs.set_faults(Faults {
            capacity_bytes: Some(10_000),
            ..Faults::default()
        });
        let f = fs.create(Path::new("/d/a"), 8_000).unwrap();
        let e = fs.create(Path::new("/d/b"), 8_000).err().unwrap();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(
            f.extend_to(12_000).err().unwrap().raw_os_error(),
            Some(libc::ENOSPC)
        );
        fs.set_faults(Faults {
            fail_syncs: true,
            ..Faults::default()
        });
        assert_eq!(f.sync_data().err().unwrap().raw_os_error(), Some(libc::EIO));
        assert_eq!(fs.stats().injected_failures, 3);
    }
}
