//! LCP data files: one per LCP of a fragment. [`LcpFileWriter`] appends records into a
//! block buffer and writes whole blocks ([`BLOCK_BYTES`] at most, one CRC-32C per
//! block; each block's write-back is started at once, `DiskFile::start_writeback`, so
//! the final sync has little left to write), then a footer, then fdatasync;
//! [`LcpFileReader`] verifies every block and the
//! footer and hands out records that borrow from its block buffer (no allocation per
//! record; `reader.rs`). Byte layout: `docs/lcp-files.md`.
//!
//! ```text
//! file   = header (64 B) block* footer (48 B)
//! block  = block header (24 B) record+          records never span blocks
//! record = 1 Row: kind u8, row_id u32, len u32, payload | 2 DeleteRow: kind, row_id
//!        | 3 DeletePage: kind, page_no
//! ```
//!
//! Invariants: a file is complete iff its footer is present at the very end, its
//! checksum verifies and its counts (blocks, records, rows, bytes, and the CRC-32C over
//! every block's CRC in order) equal what the reader saw; the writer writes the footer
//! last and syncs before `finish` returns, so a power loss or a failed write can leave
//! only a file the reader rejects (or, if every write happened to reach the disk, the
//! complete file). A writer that failed once refuses every later call.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::blocks::LcpBlocks;
use super::{PartRange, put_u32, put_u64, u32_at, u64_at};
use crate::disk::io::{DiskFile, FileSystem};
use crate::error::{NdbError, Result, codes};

/// Largest block (header + records) the writer emits: the write unit.
pub const BLOCK_BYTES: usize = 256 * 1024;
/// Largest row payload a record may carry (a record never spans blocks).
pub const MAX_ROW_PAYLOAD_BYTES: usize = 128 * 1024;

pub(super) const FILE_MAGIC: &[u8; 8] = b"RNDBLCP1";
pub(super) const FORMAT_VERSION: u32 = 1;
pub(super) const HEADER_BYTES: usize = 64;
pub(super) const BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"LCPB");
pub(super) const BLOCK_HEADER_BYTES: usize = 24;
pub(super) const FOOTER_MAGIC: u32 = u32::from_le_bytes(*b"LCPF");
pub(super) const FOOTER_BYTES: usize = 48;
pub(super) const KIND_ROW: u8 = 1;
pub(super) const KIND_DELETE_ROW: u8 = 2;
pub(super) const KIND_DELETE_PAGE: u8 = 3;
pub(super) const ROW_RECORD_HEADER_BYTES: usize = 9;
pub(super) const DELETE_RECORD_BYTES: usize = 5;

const _: () =
    assert!(BLOCK_HEADER_BYTES + ROW_RECORD_HEADER_BYTES + MAX_ROW_PAYLOAD_BYTES <= BLOCK_BYTES);

/// What an LCP data file is: the header at offset 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcpFileHeader {
    pub table_id: u32,
    pub fragment_id: u32,
    pub lcp_id: u32,
    /// The parts whose every row is in this file; the others hold changes only.
    pub all_parts: PartRange,
    /// Highest row GCI the file may hold (redo replay starts after what it covers).
    pub max_gci: u32,
    /// The table's schema version or fingerprint the row images are encoded for.
    pub schema_version: u64,
}

impl LcpFileHeader {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(FILE_MAGIC);
        put_u32(&mut b, 8, FORMAT_VERSION);
        put_u32(&mut b, 12, self.table_id);
        put_u32(&mut b, 16, self.fragment_id);
        put_u32(&mut b, 20, self.lcp_id);
        put_u32(&mut b, 24, self.all_parts.start);
        put_u32(&mut b, 28, self.all_parts.count);
        put_u32(&mut b, 32, self.max_gci);
        put_u64(&mut b, 40, self.schema_version);
        put_u32(&mut b, 48, BLOCK_BYTES as u32);
        let crc = crc32c::crc32c(&b[..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    pub(super) fn decode(b: &[u8], path: &Path) -> Result<LcpFileHeader> {
        let bad =
            |what: &str| codes::corrupt_page(format!("LCP file {}: header {what}", path.display()));
        if b.len() < HEADER_BYTES || &b[0..8] != FILE_MAGIC {
            return Err(bad("magic"));
        }
        if crc32c::crc32c(&b[..60]) != u32_at(b, 60) {
            return Err(bad("checksum mismatch"));
        }
        if u32_at(b, 8) != FORMAT_VERSION {
            return Err(bad("format version"));
        }
        let all_parts = PartRange {
            start: u32_at(b, 24),
            count: u32_at(b, 28),
        };
        if !all_parts.is_valid() {
            return Err(bad("ALL part range"));
        }
        Ok(LcpFileHeader {
            table_id: u32_at(b, 12),
            fragment_id: u32_at(b, 16),
            lcp_id: u32_at(b, 20),
            all_parts,
            max_gci: u32_at(b, 32),
            schema_version: u64_at(b, 40),
        })
    }
}

/// What a complete data file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LcpFileSummary {
    /// Records of every kind.
    pub records: u64,
    /// Row records.
    pub rows: u64,
    /// File length.
    pub bytes: u64,
}

/// One record of a data file; a row's payload borrows from the reader's block buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LcpRecord<'a> {
    Row { row_id: u32, payload: &'a [u8] },
    DeleteRow { row_id: u32 },
    DeletePage { page_no: u32 },
}

pub(super) fn io_err(path: &Path, offset: u64, what: &str, e: io::Error) -> NdbError {
    codes::file_system_error(format!(
        "LCP file {} at offset {offset}: {what}: {e}",
        path.display()
    ))
}

/// Create an empty data file at `path` (and its directory) ahead of the LCP that will
/// write it ([`LcpFileWriter::start`]): the file and its directory entry are durable on
/// return (`FileSystem::create`). Ok(false) when a file is there already (left as it
/// is). A spare no control file names is an orphan to a restart
/// ([`super::remove_orphans`]), like a data file whose LCP never completed.
pub fn create_spare(fs: &dyn FileSystem, path: &Path) -> Result<bool> {
    if let Some(dir) = path.parent() {
        fs.create_dir_all(dir)
            .map_err(|e| io_err(path, 0, "create directory", e))?;
    }
    match fs.create(path, 0) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err(path, 0, "create spare", e)),
    }
}

/// Writes one LCP data file. Not durable, and not complete, until [`Self::finish`]
/// returns Ok.
pub struct LcpFileWriter {
    file: Arc<dyn DiskFile>,
    path: PathBuf,
    header: LcpFileHeader,
    /// The header's max GCI was changed after it was written: rewrite it at `finish`.
    header_changed: bool,
    /// The records, in blocks; the sealed ones are written by `write_sealed`.
    enc: LcpBlocks,
    /// Where the next block goes.
    offset: u64,
    failed: bool,
    /// fdatasync after this many bytes since the last one (0: only at `finish`).
    sync_every_bytes: u64,
    synced_to: u64,
}

impl LcpFileWriter {
    /// Create the file (and its directory); fails if it exists (a leftover of an LCP that
    /// never completed: see [`super::remove_orphans`]).
    pub fn create(
        fs: &dyn FileSystem,
        path: &Path,
        header: &LcpFileHeader,
    ) -> Result<LcpFileWriter> {
        assert!(
            header.all_parts.is_valid(),
            "bad ALL range {:?}",
            header.all_parts
        );
        if let Some(dir) = path.parent() {
            fs.create_dir_all(dir)
                .map_err(|e| io_err(path, 0, "create directory", e))?;
        }
        let file = fs.create(path, 0).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                codes::file_exists(path.display())
            } else {
                io_err(path, 0, "create", e)
            }
        })?;
        Self::on_empty_file(file, path, header)
    }

    /// Write into the spare at `path` when there is one (an empty file made ahead by
    /// [`create_spare`], so that the LCP pays no file creation: its name and its
    /// empty length are durable already, and the `finish` fdatasync makes the content
    /// and the length durable as it does for a file just created); else
    /// [`Self::create`]. A file at `path` that is not empty is a leftover and an error,
    /// as for `create`.
    pub fn start(
        fs: &dyn FileSystem,
        path: &Path,
        header: &LcpFileHeader,
    ) -> Result<LcpFileWriter> {
        assert!(
            header.all_parts.is_valid(),
            "bad ALL range {:?}",
            header.all_parts
        );
        let file = match fs.open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Self::create(fs, path, header);
            }
            Err(e) => return Err(io_err(path, 0, "open spare", e)),
        };
        // Length 0 now means no write to it ever succeeded (nothing shrinks an LCP
        // file), so its durable content is empty too: as good as a new file.
        match file.len_bytes() {
            Ok(0) => Self::on_empty_file(file, path, header),
            Ok(_) => Err(codes::file_exists(path.display())),
            Err(e) => Err(io_err(path, 0, "length of spare", e)),
        }
    }

    fn on_empty_file(
        file: Arc<dyn DiskFile>,
        path: &Path,
        header: &LcpFileHeader,
    ) -> Result<LcpFileWriter> {
        file.write_at(&header.encode(), 0)
            .map_err(|e| io_err(path, 0, "write header", e))?;
        Ok(LcpFileWriter {
            file,
            path: path.to_path_buf(),
            header: *header,
            header_changed: false,
            enc: LcpBlocks::new(header.lcp_id),
            offset: HEADER_BYTES as u64,
            failed: false,
            sync_every_bytes: 0,
            synced_to: 0,
        })
    }

    /// Also fdatasync every `bytes` written (NDB's `DiskSyncSize`, default 4 MB), so
    /// that a checkpoint never leaves a large amount of dirty data for the kernel to
    /// flush at once; 0 (the default) syncs only at `finish`. Durability still comes
    /// only from `finish`.
    pub fn set_sync_every_bytes(&mut self, bytes: u64) {
        self.sync_every_bytes = bytes;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &LcpFileHeader {
        &self.header
    }

    /// Set the header's max GCI (known only when the scan ends); the header is
    /// rewritten by `finish`, and the footer holds the header's checksum, so a file with
    /// the old header and the new footer is not complete.
    pub fn set_max_gci(&mut self, max_gci: u32) {
        if max_gci != self.header.max_gci {
            self.header.max_gci = max_gci;
            self.header_changed = true;
        }
    }

    /// Bytes handed to the file system so far (for write pacing).
    pub fn bytes_written(&self) -> u64 {
        self.offset
    }

    fn check(&self) -> Result<()> {
        if self.failed {
            return Err(codes::file_system_error(format!(
                "LCP file {}: an earlier write failed",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// A row, every column (the caller's row image, opaque here).
    /// A row over [`MAX_ROW_PAYLOAD_BYTES`] is refused (the file goes on without it).
    pub fn put_row(&mut self, row_id: u32, payload: &[u8]) -> Result<()> {
        self.check()?;
        if payload.len() > MAX_ROW_PAYLOAD_BYTES {
            return Err(codes::internal(format!(
                "LCP row image of {} bytes, at most {MAX_ROW_PAYLOAD_BYTES}",
                payload.len()
            )));
        }
        self.enc.put_row(row_id, payload);
        self.write_sealed()
    }

    /// The row at `row_id` is gone (CHANGE parts).
    pub fn delete_row(&mut self, row_id: u32) -> Result<()> {
        self.check()?;
        self.enc.delete_row(row_id);
        self.write_sealed()
    }

    /// Every row of page `page_no` is gone (CHANGE parts).
    pub fn delete_page(&mut self, page_no: u32) -> Result<()> {
        self.check()?;
        self.enc.delete_page(page_no);
        self.write_sealed()
    }

    /// The encoder, for records put in memory now (no I/O) and written by the next
    /// [`Self::write_sealed`].
    pub fn blocks(&mut self) -> &mut LcpBlocks {
        &mut self.enc
    }

    /// Takes over the records put into `enc` before the file existed; nothing may have
    /// been put into this writer yet.
    pub fn adopt(&mut self, enc: LcpBlocks) -> Result<()> {
        assert!(
            self.enc.is_empty(),
            "adopting records into a writer with records"
        );
        assert_eq!(enc.lcp_id(), self.header.lcp_id, "records of another LCP");
        self.enc = enc;
        self.write_sealed()
    }

    /// Writes the sealed blocks, in order; each block's write-back is started at once
    /// (`finish`'s fdatasync then waits for the last block and the file's metadata, not
    /// for the whole file).
    pub fn write_sealed(&mut self) -> Result<()> {
        self.check()?;
        if let Err(e) = self.enc.check() {
            self.failed = true;
            return Err(e);
        }
        let mut sealed = self.enc.take_sealed().into_iter();
        while let Some(block) = sealed.next() {
            let at = self.offset;
            if let Err(e) = self.write(&block, "write block") {
                // The blocks after it are dropped with the writer: it refuses every
                // later call.
                sealed.for_each(drop);
                return Err(e);
            }
            self.file.start_writeback(at, block.len() as u64);
            self.enc.recycle(block);
            if self.sync_every_bytes > 0 && self.offset - self.synced_to >= self.sync_every_bytes {
                self.sync()?;
            }
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8], what: &str) -> Result<()> {
        let r = self.file.write_at(bytes, self.offset);
        if let Err(e) = r {
            self.failed = true;
            return Err(io_err(&self.path, self.offset, what, e));
        }
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if let Err(e) = self.file.sync_data() {
            self.failed = true;
            return Err(io_err(&self.path, self.offset, "fdatasync", e));
        }
        self.synced_to = self.offset;
        Ok(())
    }

    /// Write the last block and the footer, fdatasync, and return what the file holds.
    /// Only after Ok may a control file name this file.
    pub fn finish(mut self) -> Result<LcpFileSummary> {
        self.check()?;
        self.enc.seal();
        self.write_sealed()?;
        let (blocks, records, rows, chain_crc) = self.enc.totals();
        let header = self.header.encode();
        if self.header_changed
            && let Err(e) = self.file.write_at(&header, 0)
        {
            self.failed = true;
            return Err(io_err(&self.path, 0, "rewrite header", e));
        }
        let mut f = [0u8; FOOTER_BYTES];
        put_u32(&mut f, 0, FOOTER_MAGIC);
        put_u32(&mut f, 8, blocks);
        put_u32(&mut f, 12, self.header.lcp_id);
        put_u64(&mut f, 16, records);
        put_u64(&mut f, 24, rows);
        put_u64(&mut f, 32, self.offset);
        put_u32(&mut f, 40, chain_crc);
        put_u32(&mut f, 44, u32_at(&header, 60));
        let crc = crc32c::crc32c(&f[8..]);
        put_u32(&mut f, 4, crc);
        self.write(&f, "write footer")?;
        self.sync()?;
        Ok(LcpFileSummary {
            records,
            rows,
            bytes: self.offset,
        })
    }

    /// Give up on the file: remove it.
    pub fn abandon(self, fs: &dyn FileSystem) -> Result<()> {
        match fs.remove(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&self.path, 0, "remove", e)),
        }
    }
}
