//! File I/O for everything the data node keeps on disk (data files, undo files, redo
//! log, checkpoints), behind a trait so that tests and the simulator can inject ENOSPC,
//! EIO, fsync failures, torn writes and power losses into the real code.
//!
//! - [`FileSystem`] creates, opens, lists, renames and removes files; [`DiskFile`]
//!   reads and writes whole buffers at offsets (positional I/O, no shared cursor, so
//!   one file is usable from several threads at once).
//! - [`OsFileSystem`] (`os.rs`): std::fs with `pread`/`pwrite`, preallocation with
//!   `posix_fallocate` (so that a full disk is reported at CREATE / ADD DATAFILE time,
//!   not at the first page write), sparse files with `set_len`, `fdatasync`, and a
//!   directory fsync after every create, remove and rename.
//! - [`MemFileSystem`] (`mem.rs`): files in memory that simulate a disk with a page
//!   cache: a byte budget (ENOSPC beyond it), switchable and seeded random EIO on
//!   reads, writes and syncs ([`Faults`], [`FaultPlan`], [`MemFileSystem::fail_nth`]),
//!   and [`MemFileSystem::crash_image`], the disk as a power loss would leave it.
//!   Every failure is counted in [`MemStats`] and logged ([`MemFileSystem::fault_log`]).
//!
//! Invariants of both implementations: `read_at` and `write_at` transfer the whole
//! buffer or fail; a short read (beyond the end of the file) is an error, never
//! zero-filled. `create` and `create_sparse` never overwrite an existing file. A failed
//! operation changes nothing (an injected EIO on `write_at` writes nothing).
//!
//! # Durability contract (what callers may rely on, on both implementations)
//!
//! - **Namespace operations are durable when they return Ok**: `create`,
//!   `create_sparse`, `remove`, `remove_dir_all`, `rename` and `write_atomic` (the file's existence, name,
//!   length, and for `create`/`create_sparse`/`write_atomic` its content).
//!   [`OsFileSystem`] gets this by syncing the file and then its directory (both
//!   directories for a rename across directories). `create_dir_all` is not synced on
//!   `OsFileSystem`; create a file in the directory to make both durable.
//! - `extend_to` makes the new length (zero-filled) durable on return. It promises
//!   nothing about earlier `write_at`s (the OS implementation happens to sync them, the
//!   simulator does not: do not rely on it).
//! - `write_at` is **not** durable until a later `sync_data` of the same file returns
//!   Ok. Until then a power loss may drop it, keep it, or tear it at 512-byte sector
//!   granularity, independently of every other unsynced write; unsynced writes may also
//!   become durable at any moment by themselves (background writeback).
//! - A `sync_data` that **fails** (EIO) means the writes made since the previous
//!   successful sync may never become durable: Linux marks the dirty pages clean after a
//!   failed writeback, and a later fsync returns Ok without writing them. Reads still
//!   return the new data (the page cache holds it) while the disk holds the old.
//!   Retrying the sync is therefore useless; the rule of the callers is "an fsync
//!   failure stops the node" (NDB does the same), and recovery starts from what was
//!   durable before.
//!
//! # Crash model of MemFileSystem
//!
//! Each simulated file holds its *current* content (what reads return), its *durable*
//! content and length (what survives a power loss), and the list of writes made since
//! the last successful `sync_data`, in order ("unsynced writes").
//!
//! - `write_at`: applied to the current content at once (one memcpy) and appended to the
//!   unsynced list (a second copy). A write to exactly the same offset and length as the
//!   previous unsynced write replaces it (the page cache would have merged them too).
//!   At most [`MAX_UNSYNCED_WRITES`] writes and [`MAX_UNSYNCED_BYTES`] bytes stay
//!   unsynced per file; beyond, the oldest is written back (becomes durable), as the
//!   kernel's background writeback would. Counted in `MemStats::written_back`.
//! - `sync_data` Ok: the unsynced writes are applied to the durable content in order,
//!   and the durable length becomes the current length (fdatasync persists the size).
//! - `sync_data` failed (injected EIO): the unsynced writes are discarded from the list
//!   and never reach the durable content (counted in `MemStats::lost_writes`); the
//!   current content keeps them. A later successful sync makes only later writes and
//!   the length durable (the lost bytes read back as the old durable bytes or zeros).
//! - `extend_to`: current and durable length grow at once (zero-filled).
//! - `create`, `create_sparse`, `write_atomic`: durable content = current content at
//!   once. `remove`, `remove_dir_all` and `rename` change the durable namespace at once; a renamed file
//!   keeps its unsynced writes (rename does not sync data). Handles opened before a
//!   `remove` or a replacing `rename` keep working on the orphaned file.
//! - [`MemFileSystem::crash_image`]`(seed)`: a new, independent MemFileSystem holding
//!   what the disk holds after a power loss at this instant: the durable content of
//!   every file, then, for every unsynced write in order, a choice drawn from `seed`:
//!   dropped, applied, or torn (each 512-byte file sector it touches applied or not,
//!   independently). A file whose current length exceeds its durable length keeps the
//!   growth (zero-filled where no applied write covers it) or loses it (truncated back
//!   to the durable length), again drawn from the seed. Same state and seed, same image.
//!   The image has no faults armed, zero stats and no unsynced writes; directories are
//!   kept as they are.
//! - [`MemFileSystem::crash_at`]`(op, n, seed)`: a power loss just before the n-th
//!   operation of a kind: the crash image is captured at that instant
//!   ([`MemFileSystem::take_crash_image`]) and that operation and all later ones fail
//!   with EIO, so nothing after the crash point can be acknowledged as durable. This is
//!   how a simulated crash test cuts a running workload at a seeded point.
//!
//! Determinism: the simulator has no clock and no hash-order iteration; seeded faults
//! and crash images depend only on the seed and on the sequence of calls (which is
//! deterministic when one thread drives the I/O).
//!
//! Lock order (MemFileSystem): the file-system state mutex, then one file's mutex. Every
//! mutation of a file happens while holding both, so holding the state lock alone keeps
//! every file's length stable.

mod faults;
mod mem;
mod os;
mod pages;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_crash;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use faults::{FaultPlan, Faults, IoOp, MemStats};
pub use mem::{MAX_MEM_FILE_BYTES, MAX_UNSYNCED_BYTES, MAX_UNSYNCED_WRITES, MemFileSystem};
pub use os::OsFileSystem;
pub use pages::{CHUNK_BYTES, SECTOR_BYTES};

/// A file opened for positional reads and writes.
pub trait DiskFile: Send + Sync {
    /// Read exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Write all of `buf` at `offset` (within the preallocated size or beyond it). Not
    /// durable until a later `sync_data` returns Ok (see the module's crash model).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Make written data durable (fdatasync). On error the writes since the last
    /// successful sync may be lost for good: callers must not retry and carry on.
    fn sync_data(&self) -> io::Result<()>;
    /// Current size in bytes.
    fn len_bytes(&self) -> io::Result<u64>;
    /// Grow the file to `len` bytes, allocating the space (ENOSPC when the disk is
    /// full). The new length is durable on return.
    fn extend_to(&self, len: u64) -> io::Result<()>;
    /// A hint that `len` bytes at `offset` will be read soon (`POSIX_FADV_WILLNEED`:
    /// the kernel starts reading them in the background). Changes nothing a read
    /// returns; the default does nothing.
    fn will_need(&self, _offset: u64, _len: u64) {}
    /// A hint that the `len` written bytes at `offset` will be synced soon
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`: the kernel starts writing them back
    /// without waiting), so that the later `sync_data` finds less to write. Makes
    /// nothing durable and reports nothing: a failed write-back is `sync_data`'s error.
    /// The default does nothing.
    fn start_writeback(&self, _offset: u64, _len: u64) {}
}

/// Where files are created. Every namespace change (create, remove, rename,
/// write_atomic) is durable when it returns Ok.
pub trait FileSystem: Send + Sync {
    /// Create a new file of `size_bytes` (allocated, zero-filled). Fails with
    /// `AlreadyExists` if the path exists.
    fn create(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>>;
    /// Create a new file of `size_bytes` without allocating its blocks (`set_len`; NDB's
    /// `InitFragmentLogFiles=sparse`): reads return zeros, and ENOSPC may come at a
    /// later write. Fails with `AlreadyExists` if the path exists.
    fn create_sparse(&self, path: &Path, size_bytes: u64) -> io::Result<Arc<dyn DiskFile>>;
    /// Open an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn DiskFile>>;
    /// Remove a file (and make the removal durable).
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Rename `from` to `to`, atomically replacing an existing file `to`, and make the
    /// rename durable (directory fsync) before returning. Does not sync the file's data.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// The regular files directly in `dir` (no subdirectories, no recursion), as full
    /// paths (`dir.join(name)`), sorted by name. An empty directory gives an empty Vec;
    /// a missing directory is a `NotFound` error.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    fn exists(&self, path: &Path) -> bool;
    /// Create a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Remove directory `dir` and everything under it, and make the removal durable
    /// (its parent directory synced): after a crash nothing under `dir` is there.
    /// `NotFound` when `dir` does not exist.
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Replace a small file's content atomically (write aside, sync, rename, sync the
    /// directory): after a crash it holds the old or the new content, never a mix. The
    /// parent directory must exist.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// A small file's whole content; `None` when it does not exist.
    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}
