//! Disk data (TSMAN, LGMAN, PGMAN): tablespaces of data files and extents, the undo log
//! group, and the DiskPageBufferMemory page cache.
//!
//! So far: the page cache's replacement policy and its hit-ratio advisor
//! ([`policy`]); the files, extents, undo log and the cache's buffers come with the rest
//! of the disk-data work.

pub mod policy;
