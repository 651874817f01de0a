//! Disk data (TSMAN, LGMAN, PGMAN): tablespaces of data files and extents, the undo log
//! group, and the DiskPageBufferMemory page cache.
//!
//! - [`io`]: the file I/O trait with a real and a fault-injecting implementation.
//! - [`doublewrite`]: the journal that makes torn data-file page writes repairable.
//! - [`lgman`]: the logfile group and its undo log (WAL of disk pages).
//! - [`page`]: the 32 KB page header with checksum and address, sealed on write and
//!   verified on read.
//! - [`policy`]: the page cache's replacement policy and its hit-ratio advisor.
//! - [`pgman`]: the DiskPageBufferMemory page cache (frames, page-in, write-back under
//!   the WAL rule, cleaner, checkpoint, online resize, ndbinfo counters).
//! - [`tsman`]: tablespaces, data files, extents and the per-fragment disk allocator.
//! - [`rowpage`]: the slotted data page holding the disk parts of rows.
//! - [`shared_memory`]: the SharedGlobalMemory budget (undo buffer and other buffers).
//! - [`node`]: one data node's disk data and the row operations on disk parts.

pub mod doublewrite;
pub mod io;
pub mod lgman;
pub mod node;
pub mod page;
pub mod pgman;
pub mod policy;
pub mod rowpage;
pub mod shared_memory;
pub mod tsman;

/// Log sequence number of the undo log: the byte position of a record in the logfile
/// group's unbounded log (never reused, so it orders every change ever logged).
pub type Lsn = u64;

/// Write-ahead logging: a page whose header carries LSN `l` may be written to its data
/// file only after the undo log is durable up to and including `l`. The undo log
/// (LGMAN) implements this; the page cache and the tablespace manager call it before
/// every page write.
pub trait WalSync: Send + Sync {
    /// Block until the undo log is durable up to `lsn` (returns at once if it is).
    fn sync_to(&self, lsn: Lsn) -> crate::error::Result<()>;
}

/// A [`WalSync`] for files without an undo log (tests of one layer alone).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoWal;

impl WalSync for NoWal {
    fn sync_to(&self, _lsn: Lsn) -> crate::error::Result<()> {
        Ok(())
    }
}
