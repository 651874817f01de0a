//! Undo files: page 0 is the zero page (file header), pages 1.. are undo pages. Byte
//! layout in `docs/undo-log.md`.
//!
//! Zero page body (after the 32-byte page header, kind `ZeroPage`):
//! ```text
//! body off size field
//!        0    8 magic "RNDBUNDO"
//!        8    4 format version (1)
//!       12    4 node_id
//!       16    4 file type (2 = undo file, as NDB)
//!       20    4 file_no
//!       24    4 logfile group id
//!       28    4 reserved (0)
//!       32    8 undo pages (pages after the zero page)
//!       40    8 INITIAL_SIZE as requested, bytes
//! ```
//! Undo page (kind `Undo`): header lsn = LSN of the first record starting in the page
//! ([`NO_RECORD_START`] if none), header extra = data bytes used; body = 8-byte log
//! position of the page's first data byte, 8-byte tail position of the log when the page
//! was written, 8-byte generation (how many times the log was opened before the page
//! was written), 8-byte durable position (the log was durable up to it when the page
//! was written), then [`UNDO_DATA_BYTES`] of record bytes.
//!
//! Invariants: every page written is sealed (`disk::page::seal`) and every page read
//! is verified (checksum, address, kind, and for undo pages the position and the bytes
//! used). An undo page is written once and never rewritten (see `mod.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::disk::io::{DiskFile, FileSystem};
use crate::disk::page::{self, DISK_PAGE_SIZE, PAGE_HEADER_BYTES, PageHeader, PageKind};
use crate::error::{NdbError, Result, codes};

/// Bytes of the undo page preamble (page position, tail position, generation, durable
/// position).
const UNDO_PREAMBLE_BYTES: usize = 32;
/// Bytes of record data in one undo page.
pub const UNDO_DATA_BYTES: usize = page::PAGE_BODY_BYTES - UNDO_PREAMBLE_BYTES;
/// Header lsn of an undo page in which no record starts.
pub const NO_RECORD_START: u64 = u64::MAX;
/// Smallest number of undo pages in a file (smaller files: error 1516).
pub const MIN_UNDO_PAGES: u64 = 2;
/// NDB's default INITIAL_SIZE of an undo file.
pub const DEFAULT_UNDO_FILE_BYTES: u64 = 128 * 1024 * 1024;
const MAGIC: &[u8; 8] = b"RNDBUNDO";
/// 2: undo pages carry the durable position (version 1 files are refused).
const ZERO_PAGE_VERSION: u32 = 2;
const FILE_TYPE_UNDO: u32 = 2;

/// An open undo file.
pub struct UndoFile {
    pub path: PathBuf,
    pub file_no: u32,
    pub node_id: u32,
    pub logfile_group_id: u32,
    /// Pages after the zero page.
    pub undo_pages: u64,
    /// INITIAL_SIZE as given at CREATE / ADD UNDOFILE.
    pub initial_size_bytes: u64,
    pub(crate) file: Arc<dyn DiskFile>,
}

impl std::fmt::Debug for UndoFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UndoFile")
            .field("path", &self.path)
            .field("file_no", &self.file_no)
            .field("undo_pages", &self.undo_pages)
            .finish()
    }
}

fn io_err(path: &Path, what: &str, e: io::Error) -> NdbError {
    codes::file_system_error(format_args!("{what} {}: {e}", path.display()))
}

impl UndoFile {
    /// Create `path` of `size_bytes` (rounded down to whole pages) and write its zero
    /// page durably. 760 if it exists, 1516 if too small, 1509 for other failures.
    pub fn create(
        fs: &dyn FileSystem,
        path: &Path,
        size_bytes: u64,
        file_no: u32,
        node_id: u32,
        logfile_group_id: u32,
    ) -> Result<UndoFile> {
        let pages = size_bytes / DISK_PAGE_SIZE as u64;
        if pages < 1 + MIN_UNDO_PAGES {
            return Err(codes::file_too_small(format_args!(
                "undo file {} of {size_bytes} bytes, at least {} bytes needed",
                path.display(),
                (1 + MIN_UNDO_PAGES) * DISK_PAGE_SIZE as u64
            )));
        }
        if pages - 1 > u64::from(u32::MAX) {
            return Err(codes::bad_argument(format_args!(
                "undo file {} of {size_bytes} bytes: too many pages",
                path.display()
            )));
        }
        let file = match fs.create(path, pages * DISK_PAGE_SIZE as u64) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(codes::file_exists(path.display()));
            }
            Err(e) => return Err(io_err(path, "create", e)),
        };
        let uf = UndoFile {
            path: path.to_path_buf(),
            file_no,
            node_id,
            logfile_group_id,
            undo_pages: pages - 1,
            initial_size_bytes: size_bytes,
            file,
        };
        let zero = uf.zero_page();
        let written = uf.file.write_at(&zero, 0).and_then(|_| uf.file.sync_data());
        if let Err(e) = written {
            let _ = fs.remove(path);
            return Err(io_err(path, "write zero page of", e));
        }
        Ok(uf)
    }

    /// Open an existing undo file and verify its zero page.
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<UndoFile> {
        let file = fs.open(path).map_err(|e| io_err(path, "open", e))?;
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        file.read_at(&mut p, 0)
            .map_err(|e| codes::file_read_error(format_args!("{}: {e}", path.display())))?;
        let bad = |what: &str| codes::corrupt_page(format_args!("{}: {what}", path.display()));
        let Some(h) = page::header(&p) else {
            return Err(bad("zero page of unknown kind"));
        };
        let h = page::verify(&p, h.file_no, 0)?;
        if h.kind != PageKind::ZeroPage {
            return Err(bad("page 0 is not a zero page"));
        }
        let b = &p[PAGE_HEADER_BYTES..];
        if &b[0..8] != MAGIC || u32_at(b, 8) != ZERO_PAGE_VERSION {
            return Err(bad("not an undo file of this format"));
        }
        if u32_at(b, 16) != FILE_TYPE_UNDO || u32_at(b, 20) != h.file_no {
            return Err(bad("zero page: wrong file type or file_no"));
        }
        let undo_pages = u64_at(b, 32);
        let len = file
            .len_bytes()
            .map_err(|e| codes::file_read_error(format_args!("{}: {e}", path.display())))?;
        let needed = undo_pages
            .checked_add(1)
            .and_then(|p| p.checked_mul(DISK_PAGE_SIZE as u64));
        if undo_pages < MIN_UNDO_PAGES
            || undo_pages > u64::from(u32::MAX)
            || needed.is_none_or(|n| n > len)
        {
            return Err(bad(
                "zero page: undo page count does not match the file size",
            ));
        }
        Ok(UndoFile {
            path: path.to_path_buf(),
            file_no: h.file_no,
            node_id: u32_at(b, 12),
            logfile_group_id: u32_at(b, 24),
            undo_pages,
            initial_size_bytes: u64_at(b, 40),
            file,
        })
    }

    fn zero_page(&self) -> Vec<u8> {
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        let b = &mut p[PAGE_HEADER_BYTES..];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&ZERO_PAGE_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.node_id.to_le_bytes());
        b[16..20].copy_from_slice(&FILE_TYPE_UNDO.to_le_bytes());
        b[20..24].copy_from_slice(&self.file_no.to_le_bytes());
        b[24..28].copy_from_slice(&self.logfile_group_id.to_le_bytes());
        b[32..40].copy_from_slice(&self.undo_pages.to_le_bytes());
        b[40..48].copy_from_slice(&self.initial_size_bytes.to_le_bytes());
        page::seal(
            &mut p,
            &PageHeader {
                kind: PageKind::ZeroPage,
                file_no: self.file_no,
                page_no: 0,
                lsn: 0,
                extra: 0,
            },
        );
        p
    }

    /// Seal and write undo page `page_no` (1-based) holding `data` (bytes used) of the
    /// log page whose first data byte is at log position `page_pos`; `tail_pos` is the
    /// log's tail when the page is written, `generation` the log's open count,
    /// `durable_pos` the position the log was durable up to.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_undo_page(
        &self,
        page_no: u32,
        page_pos: u64,
        tail_pos: u64,
        generation: u64,
        durable_pos: u64,
        first_record_lsn: u64,
        data: &[u8],
    ) -> io::Result<()> {
        assert!(page_no >= 1 && u64::from(page_no) <= self.undo_pages);
        assert!(!data.is_empty() && data.len() <= UNDO_DATA_BYTES);
        assert_eq!(page_pos % UNDO_DATA_BYTES as u64, 0);
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        let body = &mut p[PAGE_HEADER_BYTES..];
        body[0..8].copy_from_slice(&page_pos.to_le_bytes());
        body[8..16].copy_from_slice(&tail_pos.to_le_bytes());
        body[16..24].copy_from_slice(&generation.to_le_bytes());
        body[24..32].copy_from_slice(&durable_pos.to_le_bytes());
        body[UNDO_PREAMBLE_BYTES..UNDO_PREAMBLE_BYTES + data.len()].copy_from_slice(data);
        page::seal(
            &mut p,
            &PageHeader {
                kind: PageKind::Undo,
                file_no: self.file_no,
                page_no,
                lsn: first_record_lsn,
                extra: data.len() as u64,
            },
        );
        self.file
            .write_at(&p, u64::from(page_no) * DISK_PAGE_SIZE as u64)
    }

    /// Read and verify page `page_no` (1-based). `Ok(None)` for a page never written.
    pub(crate) fn read_undo_page(&self, page_no: u32) -> Result<Option<UndoPage>> {
        assert!(page_no >= 1 && u64::from(page_no) <= self.undo_pages);
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        self.file
            .read_at(&mut p, u64::from(page_no) * DISK_PAGE_SIZE as u64)
            .map_err(|e| codes::file_read_error(format_args!("{}: {e}", self.path.display())))?;
        let h = page::verify(&p, self.file_no, page_no)?;
        match h.kind {
            PageKind::Unformatted => return Ok(None),
            PageKind::Undo => {}
            k => {
                return Err(self.bad_page(page_no, format_args!("page of kind {k:?}")));
            }
        }
        let body = &p[PAGE_HEADER_BYTES..];
        let pos = u64_at(body, 0);
        let tail_pos = u64_at(body, 8);
        let generation = u64_at(body, 16);
        let durable_pos = u64_at(body, 24);
        let used = h.extra as usize;
        if !pos.is_multiple_of(UNDO_DATA_BYTES as u64) || used == 0 || used > UNDO_DATA_BYTES {
            return Err(self.bad_page(page_no, "bad undo page position or bytes used"));
        }
        if tail_pos > pos + used as u64 {
            return Err(self.bad_page(page_no, "tail position after the page"));
        }
        if durable_pos > pos {
            return Err(self.bad_page(page_no, "durable position after the page's start"));
        }
        if h.lsn != NO_RECORD_START && !(pos..pos + used as u64).contains(&h.lsn) {
            return Err(self.bad_page(page_no, "first record LSN outside the page"));
        }
        p.drain(..PAGE_HEADER_BYTES + UNDO_PREAMBLE_BYTES);
        p.truncate(used);
        Ok(Some(UndoPage {
            page_pos: pos,
            tail_pos,
            generation,
            durable_pos,
            first_record_lsn: h.lsn,
            data: p,
        }))
    }

    fn bad_page(&self, page_no: u32, what: impl std::fmt::Display) -> NdbError {
        codes::corrupt_page(format_args!(
            "undo file {} page {page_no}: {what}",
            self.path.display()
        ))
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// A verified undo page read from a file.
#[derive(Clone, Debug)]
pub(crate) struct UndoPage {
    /// Log position of `data[0]`.
    pub page_pos: u64,
    /// The log's tail when the page was written.
    pub tail_pos: u64,
    /// How many times the log had been opened when the page was written.
    pub generation: u64,
    /// The log was durable up to this position when the page was written.
    pub durable_pos: u64,
    /// LSN of the first record starting in the page, or [`NO_RECORD_START`].
    pub first_record_lsn: u64,
    /// The bytes used.
    pub data: Vec<u8>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}
