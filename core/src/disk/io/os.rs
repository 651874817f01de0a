//! [`OsFileSystem`]: the real file system (std::fs, positional I/O, `posix_fallocate`,
//! `fdatasync`, directory fsync after every namespace change).
//!
//! Invariant: every `FileSystem` method that changes the namespace (create,
//! create_sparse, remove, rename, write_atomic) syncs the file (when it has content to
//! keep) and then its directory before returning Ok, so the change survives a crash.
//! A create whose preallocation or sync fails removes the half-created file again.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{DiskFile, FileSystem};

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

struct OsFile {
    file: File,
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn sync_parent_dir(path: &Path) -> io::Result<()> {
    File::open(parent_dir(path))?.sync_all()
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

/// Create `path` (never overwriting), size it with `size` and sync it and its
/// directory; on failure remove the half-created file.
fn create_with(
    path: &Path,
    size: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<Arc<dyn DiskFile>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)?;
    if let Err(e) = size(&file).and_then(|_| file.sync_all()) {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    sync_parent_dir(path)?;
    Ok(Arc::new(OsFile { file }))
}

impl FileSystem for OsFileSystem {
    fn create(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        create_with(path, |f| fallocate(f, 0, size_bytes))
    }

    fn create_sparse(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>> {
        create_with(path, |f| f.set_len(size_bytes))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn DiskFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(OsFile { file }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)?;
        sync_parent_dir(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)?;
        sync_parent_dir(to)?;
        if parent_dir(from) != parent_dir(to) {
            sync_parent_dir(from)?;
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                out.push(entry.path());
            }
        }
        out.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        // Once the removal of `dir` from its parent is durable nothing under it can be
        // found again; the entries below were unlinked before it (a directory is
        // removed only when empty), in the same or earlier journal commits.
        std::fs::remove_dir_all(dir)?;
        sync_parent_dir(dir)
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
    #[cfg(target_os = "linux")]
    fn start_writeback(&self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (
            libc::off64_t::try_from(offset),
            libc::off64_t::try_from(len),
        ) else {
            return;
        };
        // SAFETY: a write-back hint on an open descriptor of this file; it changes no
        // data, and an error only means no early write-back (the writer's fdatasync
        // reports a failed write).
        unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    fn will_need(&self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return;
        };
        // SAFETY: advice on an open descriptor of this file; it never changes data, and
        // a failure only means no read-ahead.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::POSIX_FADV_WILLNEED,
            );
        }
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
