//! One data file of a tablespace: the zero page, the extent-header pages and the
//! extents of data pages (byte layout in `docs/disk-data-files.md`).
//!
//! ```text
//! page 0                  zero page (PageKind::ZeroPage)
//! pages 1 ..= H           extent-header pages (PageKind::ExtentHeaders), one entry per
//!                         extent for the file's whole reserved capacity
//! page 1 + H + e*P + i    page i of extent e (PageKind::Data, see disk::rowpage)
//! ```
//!
//! Invariants: `extents.len() == zero.extent_count <= zero.extent_capacity`; the file is
//! at least `file_bytes(extent_count)` long; every extent-header page on disk is sealed
//! (entries beyond `extent_count` are written as free at creation, so growing the file
//! only rewrites the zero page); an extent is free iff its owner is `None`, and a free
//! extent's pages are all empty (class [`EMPTY_CLASS`]).
//!
//! A `DataFile` has no lock of its own: the tablespace manager's mutex guards it.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::disk::io::{DiskFile, FileSystem};
use crate::disk::page::{
    self, DISK_PAGE_SIZE, PAGE_BODY_BYTES, PAGE_HEADER_BYTES, PageHeader, PageKind,
};
use crate::disk::rowpage::EMPTY_PAGE_FREE_BYTES;
use crate::disk::{Lsn, WalSync};
use crate::error::{Result, codes};

use super::ExtentOwner;

/// Magic at the start of a data file's zero page body.
pub const DATAFILE_MAGIC: [u8; 8] = *b"RNDBDATA";
/// Format version of the zero page and extent-header layout.
pub const DATAFILE_FORMAT_VERSION: u32 = 1;
/// `file_type` of a data file (NDB: 1 Datafile, 2 Undofile).
pub const FILE_TYPE_DATAFILE: u32 = 1;
/// `fragment_id` of a free extent's header.
pub const FREE_FRAGMENT: u32 = u32::MAX;
/// Largest extent: 1 GiB (an extent header must fit one header page).
pub const MAX_EXTENT_PAGES: u32 = 32 * 1024;
/// With AUTOEXTEND_SIZE > 0 and MAX_SIZE 0, header space is reserved for this many
/// times the initial number of extents.
pub const UNBOUNDED_GROWTH_FACTOR: u64 = 16;
/// Cap on the reserved extents of one file (1M extents = 1 TiB at 1 MB extents).
pub const MAX_EXTENTS_PER_FILE: u64 = 1 << 20;
/// Largest data file in pages (page numbers are u32; 64 TiB).
pub const MAX_FILE_PAGES: u64 = 1 << 31;
/// Free-space class of an empty page (4 bits per page in the extent header).
pub const EMPTY_CLASS: u8 = 15;

const PAGE: u64 = DISK_PAGE_SIZE as u64;

// Zero page body offsets.
const Z_MAGIC: usize = PAGE_HEADER_BYTES;
const Z_VERSION: usize = Z_MAGIC + 8;
const Z_NODE: usize = Z_VERSION + 4;
const Z_TYPE: usize = Z_NODE + 4;
const Z_FILE_NO: usize = Z_TYPE + 4;
const Z_TS: usize = Z_FILE_NO + 4;
const Z_PAGE_SIZE: usize = Z_TS + 4;
const Z_EXTENT_PAGES: usize = Z_PAGE_SIZE + 4;
const Z_EXTENT_COUNT: usize = Z_EXTENT_PAGES + 4;
const Z_HEADER_PAGES: usize = Z_EXTENT_COUNT + 4;
const Z_CAPACITY: usize = Z_HEADER_PAGES + 4;
const Z_ENTRY_BYTES: usize = Z_CAPACITY + 4;
const Z_INITIAL: usize = Z_ENTRY_BYTES + 4;
const Z_CREATED: usize = Z_INITIAL + 8;

/// Free-space class (0..=15) of a page with `free_bytes` free: 15 = empty, otherwise
/// `floor(15 * free / EMPTY_PAGE_FREE_BYTES)` capped at 14.
pub fn free_class(free_bytes: u32) -> u8 {
    let empty = EMPTY_PAGE_FREE_BYTES as u64;
    if free_bytes as u64 >= empty {
        return EMPTY_CLASS;
    }
    ((free_bytes as u64 * 15 / empty) as u8).min(EMPTY_CLASS - 1)
}

/// Smallest free bytes a page of `class` can have (the estimate after a restart).
pub fn class_min_free_bytes(class: u8) -> u32 {
    let empty = EMPTY_PAGE_FREE_BYTES as u64;
    if class >= EMPTY_CLASS {
        return empty as u32;
    }
    (class as u64 * empty).div_ceil(15) as u32
}

/// The contents of page 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZeroPage {
    pub node_id: u32,
    pub file_no: u32,
    pub tablespace_id: u32,
    pub extent_pages: u32,
    pub extent_count: u32,
    pub header_pages: u32,
    /// Extents the header pages can describe (the file's growth limit).
    pub extent_capacity: u32,
    /// File size at creation, after rounding.
    pub initial_size_bytes: u64,
    pub created_at: u64,
}

impl ZeroPage {
    /// Bytes of one extent-header entry: owner (8) + 4 bits per page, padded to 4.
    pub fn entry_bytes(&self) -> usize {
        entry_bytes(self.extent_pages)
    }
    pub fn entries_per_page(&self) -> usize {
        PAGE_BODY_BYTES / self.entry_bytes()
    }
    pub fn first_data_page(&self) -> u64 {
        1 + self.header_pages as u64
    }
    /// File size holding `extent_count` extents.
    pub fn file_bytes(&self, extent_count: u32) -> u64 {
        (self.first_data_page() + extent_count as u64 * self.extent_pages as u64) * PAGE
    }
    pub fn extent_size_bytes(&self) -> u64 {
        self.extent_pages as u64 * PAGE
    }
    /// Page number of page `i` of extent `e`.
    pub fn page_no(&self, extent_no: u32, i: u32) -> u32 {
        (self.first_data_page() + extent_no as u64 * self.extent_pages as u64 + i as u64) as u32
    }
    /// (extent, page index) of a data page of the file's current extents.
    pub fn locate(&self, page_no: u32) -> Option<(u32, u32)> {
        let rel = (page_no as u64).checked_sub(self.first_data_page())?;
        let e = rel / self.extent_pages as u64;
        (e < self.extent_count as u64)
            .then_some((e as u32, (rel % self.extent_pages as u64) as u32))
    }

    fn encode(&self) -> Vec<u8> {
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        p[Z_MAGIC..Z_MAGIC + 8].copy_from_slice(&DATAFILE_MAGIC);
        put32(&mut p, Z_VERSION, DATAFILE_FORMAT_VERSION);
        put32(&mut p, Z_NODE, self.node_id);
        put32(&mut p, Z_TYPE, FILE_TYPE_DATAFILE);
        put32(&mut p, Z_FILE_NO, self.file_no);
        put32(&mut p, Z_TS, self.tablespace_id);
        put32(&mut p, Z_PAGE_SIZE, DISK_PAGE_SIZE as u32);
        put32(&mut p, Z_EXTENT_PAGES, self.extent_pages);
        put32(&mut p, Z_EXTENT_COUNT, self.extent_count);
        put32(&mut p, Z_HEADER_PAGES, self.header_pages);
        put32(&mut p, Z_CAPACITY, self.extent_capacity);
        put32(&mut p, Z_ENTRY_BYTES, self.entry_bytes() as u32);
        p[Z_INITIAL..Z_INITIAL + 8].copy_from_slice(&self.initial_size_bytes.to_le_bytes());
        p[Z_CREATED..Z_CREATED + 8].copy_from_slice(&self.created_at.to_le_bytes());
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

    fn decode(p: &[u8], file_no: u32, path: &Path) -> Result<ZeroPage> {
        let bad = |what: &str| codes::corrupt_page(format_args!("{}: {what}", path.display()));
        let hdr = page::verify(p, file_no, 0)?;
        if hdr.kind != PageKind::ZeroPage || p[Z_MAGIC..Z_MAGIC + 8] != DATAFILE_MAGIC {
            return Err(bad("not a data file (zero page)"));
        }
        if get32(p, Z_VERSION) != DATAFILE_FORMAT_VERSION
            || get32(p, Z_TYPE) != FILE_TYPE_DATAFILE
            || get32(p, Z_PAGE_SIZE) != DISK_PAGE_SIZE as u32
        {
            return Err(bad("unsupported data file version, type or page size"));
        }
        let z = ZeroPage {
            node_id: get32(p, Z_NODE),
            file_no: get32(p, Z_FILE_NO),
            tablespace_id: get32(p, Z_TS),
            extent_pages: get32(p, Z_EXTENT_PAGES),
            extent_count: get32(p, Z_EXTENT_COUNT),
            header_pages: get32(p, Z_HEADER_PAGES),
            extent_capacity: get32(p, Z_CAPACITY),
            initial_size_bytes: get64(p, Z_INITIAL),
            created_at: get64(p, Z_CREATED),
        };
        if z.file_no != file_no
            || z.extent_pages == 0
            || z.extent_pages > MAX_EXTENT_PAGES
            || get32(p, Z_ENTRY_BYTES) as usize != z.entry_bytes()
            || z.extent_count > z.extent_capacity
            || (z.extent_capacity as usize).div_ceil(z.entries_per_page())
                != z.header_pages as usize
        {
            return Err(bad("inconsistent extent geometry in the zero page"));
        }
        Ok(z)
    }
}

fn entry_bytes(extent_pages: u32) -> usize {
    (8 + (extent_pages as usize).div_ceil(2)).next_multiple_of(4)
}

fn put32(p: &mut [u8], o: usize, v: u32) {
    p[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
fn get32(p: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]])
}
fn get64(p: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&p[o..o + 8]);
    u64::from_le_bytes(a)
}

/// In-memory state of one extent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtentState {
    pub owner: Option<ExtentOwner>,
    /// Free-space class per page (what the header stores).
    pub page_class: Vec<u8>,
    /// Free bytes per page: exact when reported since open, else the class's minimum.
    pub page_free_bytes: Vec<u32>,
}

impl ExtentState {
    fn free(pages: u32) -> ExtentState {
        ExtentState {
            owner: None,
            page_class: vec![EMPTY_CLASS; pages as usize],
            page_free_bytes: vec![EMPTY_PAGE_FREE_BYTES as u32; pages as usize],
        }
    }
}

/// Sizes of a new data file, computed by [`plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub extent_count: u32,
    pub header_pages: u32,
    pub extent_capacity: u32,
}

/// Lay out a new file: INITIAL_SIZE rounded down to 32K pages, minus the zero page and
/// the header pages, rounded down to whole extents. Header pages are reserved for the
/// growth AUTOEXTEND may do: up to MAX_SIZE, or `UNBOUNDED_GROWTH_FACTOR` x the initial
/// extents when MAX_SIZE is 0, never beyond `MAX_EXTENTS_PER_FILE`; none without
/// AUTOEXTEND.
pub fn plan(
    extent_pages: u32,
    initial_size_bytes: u64,
    max_size_bytes: u64,
    autoextend_size_bytes: u64,
) -> Result<Plan> {
    assert!(extent_pages > 0 && extent_pages <= MAX_EXTENT_PAGES);
    let ep = extent_pages as u64;
    let initial_pages = initial_size_bytes / PAGE;
    if initial_pages < ep {
        return Err(codes::invalid_extent_size(format_args!(
            "extent of {} bytes larger than the data file ({initial_size_bytes} bytes)",
            ep * PAGE
        )));
    }
    let per_page = (PAGE_BODY_BYTES / entry_bytes(extent_pages)) as u64;
    // Page numbers are u32: keep every file below 2^31 pages (64 TiB).
    let max_extents = MAX_FILE_PAGES / ep;
    if initial_pages > MAX_FILE_PAGES {
        return Err(codes::file_system_error(format_args!(
            "data file of {initial_size_bytes} bytes: larger than {} bytes",
            MAX_FILE_PAGES * PAGE
        )));
    }
    let cap_for = |n: u64| -> u64 {
        let grown = if autoextend_size_bytes == 0 {
            n
        } else if max_size_bytes > 0 {
            let max_pages = max_size_bytes / PAGE;
            let h_max = (max_pages.saturating_sub(1) / ep).div_ceil(per_page).max(1);
            max_pages.saturating_sub(1 + h_max) / ep
        } else {
            n.saturating_mul(UNBOUNDED_GROWTH_FACTOR)
        };
        grown.min(MAX_EXTENTS_PER_FILE).max(n).min(max_extents)
    };
    // Upper bound on extents (one header page), header pages for its capacity, then
    // the real extent count; capacity(n) <= capacity(n0) so the header pages suffice.
    let n0 = initial_pages.saturating_sub(2) / ep;
    let header_pages = cap_for(n0).max(1).div_ceil(per_page);
    let n = initial_pages.saturating_sub(1 + header_pages) / ep;
    if n == 0 {
        return Err(codes::file_too_small(format_args!(
            "{initial_size_bytes} bytes hold no extent of {} bytes after {} header pages",
            ep * PAGE,
            1 + header_pages
        )));
    }
    let cap = cap_for(n);
    assert!(cap.div_ceil(per_page) <= header_pages);
    let too_big = || {
        codes::file_too_small(format_args!(
            "data file of {initial_size_bytes} bytes too large"
        ))
    };
    Ok(Plan {
        extent_count: u32::try_from(n).map_err(|_| too_big())?,
        header_pages: u32::try_from(header_pages).map_err(|_| too_big())?,
        extent_capacity: u32::try_from(cap).map_err(|_| too_big())?,
    })
}

/// The error for a failed write, extend or sync of `path`.
pub fn fs_error(path: &Path, what: &str, e: &io::Error) -> crate::error::NdbError {
    codes::file_system_error(format_args!("{what} {}: {e}", path.display()))
}

/// An open data file.
pub struct DataFile {
    /// The name as given to ADD DATAFILE.
    pub name: String,
    pub path: PathBuf,
    file: Arc<dyn DiskFile>,
    pub zero: ZeroPage,
    /// One per extent of the file. Owners change only through `set_owner` (which
    /// keeps `free` in step); page classes and free bytes may be set directly.
    pub(super) extents: Vec<ExtentState>,
    /// The free extents (for lowest-first allocation in O(log n)).
    free: BTreeSet<u32>,
    /// Highest LSN of a change per header page (WAL before writing it).
    header_lsn: Vec<Lsn>,
    /// Header pages changed in memory but not yet written.
    dirty_headers: BTreeSet<u32>,
}

impl DataFile {
    /// Create and format a new file (zero page, all header pages, synced). On failure
    /// the file is removed again.
    pub fn create(
        fs: &dyn FileSystem,
        wal: &dyn WalSync,
        name: &str,
        path: &Path,
        zero: ZeroPage,
        lsn: Lsn,
    ) -> Result<DataFile> {
        let size = zero.file_bytes(zero.extent_count);
        let file = fs.create(path, size).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                codes::file_exists(path.display())
            } else {
                fs_error(path, "create", &e)
            }
        })?;
        let mut df = DataFile {
            name: name.to_string(),
            path: path.to_path_buf(),
            file,
            extents: (0..zero.extent_count)
                .map(|_| ExtentState::free(zero.extent_pages))
                .collect(),
            header_lsn: vec![lsn; zero.header_pages as usize],
            dirty_headers: BTreeSet::new(),
            free: (0..zero.extent_count).collect(),
            zero,
        };
        let formatted = (|| -> Result<()> {
            df.write_zero_page()?;
            for hp in 0..df.zero.header_pages {
                df.write_header_page(wal, hp)?;
            }
            df.file
                .sync_data()
                .map_err(|e| fs_error(&df.path, "sync", &e))
        })();
        if let Err(e) = formatted {
            let _ = fs.remove(path);
            return Err(e);
        }
        Ok(df)
    }

    /// The (file_no, tablespace id) a data file's zero page records (restart, before
    /// [`DataFile::open`]); the page is verified against the file_no it names.
    pub fn read_ids(fs: &dyn FileSystem, path: &Path) -> Result<(u32, u32)> {
        let file = fs.open(path).map_err(|e| fs_error(path, "open", &e))?;
        let mut buf = vec![0u8; DISK_PAGE_SIZE];
        file.read_at(&mut buf, 0)
            .map_err(|e| codes::file_read_error(format_args!("{}: {e}", path.display())))?;
        let file_no = get32(&buf, Z_FILE_NO);
        let zero = ZeroPage::decode(&buf, file_no, path)?;
        Ok((zero.file_no, zero.tablespace_id))
    }

    /// Open an existing file: verify the zero page and every header page, rebuild the
    /// extents' owners and page classes.
    pub fn open(fs: &dyn FileSystem, name: &str, path: &Path, file_no: u32) -> Result<DataFile> {
        let file = fs.open(path).map_err(|e| fs_error(path, "open", &e))?;
        let read_err =
            |e: io::Error| codes::file_read_error(format_args!("{}: {e}", path.display()));
        let mut buf = vec![0u8; DISK_PAGE_SIZE];
        file.read_at(&mut buf, 0).map_err(read_err)?;
        let zero = ZeroPage::decode(&buf, file_no, path)?;
        let len = file.len_bytes().map_err(read_err)?;
        if len < zero.file_bytes(zero.extent_count) {
            return Err(codes::corrupt_page(format_args!(
                "{}: {len} bytes, zero page says {}",
                path.display(),
                zero.file_bytes(zero.extent_count)
            )));
        }
        let per = zero.entries_per_page();
        let eb = zero.entry_bytes();
        let mut extents = Vec::with_capacity(zero.extent_count as usize);
        let mut header_lsn = Vec::with_capacity(zero.header_pages as usize);
        for hp in 0..zero.header_pages {
            let page_no = 1 + hp;
            file.read_at(&mut buf, page_no as u64 * PAGE)
                .map_err(read_err)?;
            let hdr = page::verify(&buf, file_no, page_no)?;
            let first = hp as u64 * per as u64;
            if hdr.kind != PageKind::ExtentHeaders || hdr.extra != first {
                return Err(codes::corrupt_page(format_args!(
                    "{}: page {page_no} is not extent-header page {hp}",
                    path.display()
                )));
            }
            header_lsn.push(hdr.lsn);
            for k in 0..per as u64 {
                let e = first + k;
                if e >= zero.extent_capacity as u64 {
                    break;
                }
                let at = PAGE_HEADER_BYTES + k as usize * eb;
                let mut st = decode_entry(&buf[at..at + eb], zero.extent_pages);
                if st.owner.is_none() {
                    st = ExtentState::free(zero.extent_pages); // free => empty pages
                }
                if e >= zero.extent_count as u64 {
                    if st.owner.is_some() {
                        return Err(codes::corrupt_page(format_args!(
                            "{}: reserved extent {e} has an owner",
                            path.display()
                        )));
                    }
                } else {
                    extents.push(st);
                }
            }
        }
        let free = (0..extents.len() as u32)
            .filter(|&e| extents[e as usize].owner.is_none())
            .collect();
        Ok(DataFile {
            name: name.to_string(),
            path: path.to_path_buf(),
            file,
            zero,
            extents,
            free,
            header_lsn,
            dirty_headers: BTreeSet::new(),
        })
    }

    /// Header page holding extent `e`'s entry.
    pub fn header_page_of(&self, extent_no: u32) -> u32 {
        extent_no / self.zero.entries_per_page() as u32
    }

    /// Note a change of extent `e`'s entry at `lsn` (written later or at once).
    pub fn mark_dirty(&mut self, extent_no: u32, lsn: Lsn) {
        let hp = self.header_page_of(extent_no);
        let l = &mut self.header_lsn[hp as usize];
        *l = (*l).max(lsn);
        self.dirty_headers.insert(hp);
    }

    fn write_zero_page(&self) -> Result<()> {
        self.file
            .write_at(&self.zero.encode(), 0)
            .map_err(|e| fs_error(&self.path, "write zero page of", &e))
    }

    fn encode_header_page(&self, hp: u32) -> Vec<u8> {
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        let per = self.zero.entries_per_page();
        let eb = self.zero.entry_bytes();
        let free = ExtentState::free(self.zero.extent_pages);
        let first = hp as usize * per;
        for k in 0..per {
            let e = first + k;
            if e >= self.zero.extent_capacity as usize {
                break;
            }
            let st = self.extents.get(e).unwrap_or(&free);
            let at = PAGE_HEADER_BYTES + k * eb;
            encode_entry(&mut p[at..at + eb], st);
        }
        page::seal(
            &mut p,
            &PageHeader {
                kind: PageKind::ExtentHeaders,
                file_no: self.zero.file_no,
                page_no: 1 + hp,
                lsn: self.header_lsn[hp as usize],
                extra: first as u64,
            },
        );
        p
    }

    /// Write header page `hp` from the in-memory state (WAL first).
    pub fn write_header_page(&mut self, wal: &dyn WalSync, hp: u32) -> Result<()> {
        wal.sync_to(self.header_lsn[hp as usize])?;
        let p = self.encode_header_page(hp);
        self.file
            .write_at(&p, (1 + hp as u64) * PAGE)
            .map_err(|e| fs_error(&self.path, "write extent header of", &e))?;
        self.dirty_headers.remove(&hp);
        Ok(())
    }

    /// Write every dirty header page, then fdatasync.
    pub fn flush(&mut self, wal: &dyn WalSync) -> Result<()> {
        let dirty: Vec<u32> = self.dirty_headers.iter().copied().collect();
        for hp in dirty {
            self.write_header_page(wal, hp)?;
        }
        self.file
            .sync_data()
            .map_err(|e| fs_error(&self.path, "sync", &e))
    }

    /// Grow the file by `add` free extents (within the reserved capacity): extend,
    /// rewrite the zero page, sync. On error nothing changes in memory.
    pub fn grow(&mut self, add: u32) -> Result<()> {
        let new_count = self.zero.extent_count + add;
        assert!(add > 0 && new_count <= self.zero.extent_capacity);
        self.file
            .extend_to(self.zero.file_bytes(new_count))
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ENOSPC) {
                    // The caller names the table (1601, "tablespace full").
                    codes::out_of_extents(&format!(
                        "{} cannot grow: no space left on device",
                        self.path.display()
                    ))
                } else {
                    fs_error(&self.path, "extend", &e)
                }
            })?;
        let mut zero = self.zero.clone();
        zero.extent_count = new_count;
        self.file
            .write_at(&zero.encode(), 0)
            .and_then(|_| self.file.sync_data())
            .map_err(|e| fs_error(&self.path, "write zero page of", &e))?;
        self.zero = zero;
        self.free.extend(new_count - add..new_count);
        self.extents.resize(
            new_count as usize,
            ExtentState::free(self.zero.extent_pages),
        );
        Ok(())
    }

    /// Current size in bytes (as the zero page describes it).
    pub fn size_bytes(&self) -> u64 {
        self.zero.file_bytes(self.zero.extent_count)
    }

    /// Size the file may grow to (its reserved header capacity).
    pub fn maximum_size_bytes(&self) -> u64 {
        self.zero.file_bytes(self.zero.extent_capacity)
    }

    pub fn free_extents(&self) -> usize {
        self.free.len()
    }

    /// The free extent with the lowest number.
    pub fn first_free(&self) -> Option<u32> {
        self.free.first().copied()
    }

    /// Give extent `e` to `owner` (`None`: free it) with all pages empty, marking its
    /// header page dirty at `lsn`. Returns the previous state for [`Self::restore`].
    pub fn set_owner(
        &mut self,
        extent_no: u32,
        owner: Option<ExtentOwner>,
        lsn: Lsn,
    ) -> ExtentState {
        let e = extent_no as usize;
        let mut st = ExtentState::free(self.zero.extent_pages);
        st.owner = owner;
        let prev = std::mem::replace(&mut self.extents[e], st);
        if owner.is_some() {
            self.free.remove(&extent_no);
        } else {
            self.free.insert(extent_no);
        }
        self.mark_dirty(extent_no, lsn);
        prev
    }

    /// Check the invariants of the in-memory state (tests, debug).
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.extents.len() != self.zero.extent_count as usize
            || self.zero.extent_count > self.zero.extent_capacity
        {
            return Err(format!("{}: extent count out of step", self.path.display()));
        }
        for (e, st) in self.extents.iter().enumerate() {
            let pages = self.zero.extent_pages as usize;
            if st.page_class.len() != pages || st.page_free_bytes.len() != pages {
                return Err(format!("extent {e}: wrong page count"));
            }
            if st.owner.is_none() != self.free.contains(&(e as u32)) {
                return Err(format!("extent {e}: free set out of step"));
            }
            if st.owner.is_none() && *st != ExtentState::free(self.zero.extent_pages) {
                return Err(format!("free extent {e} has non-empty pages"));
            }
        }
        if self
            .free
            .last()
            .is_some_and(|&e| e >= self.zero.extent_count)
        {
            return Err("free set beyond the extent count".into());
        }
        Ok(())
    }

    /// Undo a `set_owner` whose header write failed.
    pub fn restore(&mut self, extent_no: u32, prev: ExtentState) {
        if prev.owner.is_some() {
            self.free.remove(&extent_no);
        } else {
            self.free.insert(extent_no);
        }
        self.extents[extent_no as usize] = prev;
    }
}

fn encode_entry(out: &mut [u8], st: &ExtentState) {
    let (t, f) = match st.owner {
        Some(o) => (o.table_id, o.fragment_id),
        None => (0, FREE_FRAGMENT),
    };
    out[0..4].copy_from_slice(&t.to_le_bytes());
    out[4..8].copy_from_slice(&f.to_le_bytes());
    for (i, &c) in st.page_class.iter().enumerate() {
        let b = &mut out[8 + i / 2];
        if i % 2 == 0 {
            *b = (*b & 0xF0) | (c & 0x0F);
        } else {
            *b = (*b & 0x0F) | ((c & 0x0F) << 4);
        }
    }
}

fn decode_entry(b: &[u8], extent_pages: u32) -> ExtentState {
    let t = get32(b, 0);
    let f = get32(b, 4);
    let owner = (f != FREE_FRAGMENT).then_some(ExtentOwner {
        table_id: t,
        fragment_id: f,
    });
    let page_class: Vec<u8> = (0..extent_pages as usize)
        .map(|i| (b[8 + i / 2] >> (4 * (i % 2))) & 0x0F)
        .collect();
    let page_free_bytes = page_class
        .iter()
        .map(|&c| class_min_free_bytes(c))
        .collect();
    ExtentState {
        owner,
        page_class,
        page_free_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_trip_as_lower_bounds() {
        assert_eq!(free_class(EMPTY_PAGE_FREE_BYTES as u32), EMPTY_CLASS);
        assert_eq!(free_class(EMPTY_PAGE_FREE_BYTES as u32 - 1), 14);
        assert_eq!(free_class(0), 0);
        for f in (0..=EMPTY_PAGE_FREE_BYTES as u32).step_by(97) {
            let c = free_class(f);
            assert!(class_min_free_bytes(c) <= f, "free {f} class {c}");
            if c < 14 {
                assert!(class_min_free_bytes(c + 1) > f);
            }
        }
    }

    #[test]
    fn plan_rounds_and_reserves() {
        // 32 MB, 1 MB extents, no autoextend: 1 header page, 31 extents (1 page short).
        let p = plan(32, 32 << 20, 0, 0).unwrap();
        assert_eq!(
            p,
            Plan {
                extent_count: 31,
                header_pages: 1,
                extent_capacity: 31
            }
        );
        // Unbounded autoextend: 16x reserved.
        let p = plan(32, 32 << 20, 0, 1 << 20).unwrap();
        assert_eq!(p.extent_capacity, 31 * 16);
        // MAX_SIZE 64 MB: capacity of a 64 MB file.
        let p = plan(32, 32 << 20, 64 << 20, 1 << 20).unwrap();
        assert_eq!(p.extent_capacity, 63);
        // Too small after the header pages / extent larger than the file.
        assert_eq!(plan(32, 1 << 20, 0, 0).unwrap_err().code, 1516);
        assert_eq!(plan(32, (1 << 20) - 1, 0, 0).unwrap_err().code, 764);
        assert_eq!(
            plan(32, (1 << 20) + 2 * PAGE + 100, 0, 0)
                .unwrap()
                .extent_count,
            1
        );
    }

    #[test]
    fn zero_page_golden_layout() {
        let z = ZeroPage {
            node_id: 3,
            file_no: 9,
            tablespace_id: 2,
            extent_pages: 32,
            extent_count: 31,
            header_pages: 1,
            extent_capacity: 496,
            initial_size_bytes: 33_619_968,
            created_at: 0x1122_3344_5566_7788,
        };
        let p = z.encode();
        assert_eq!(&p[32..40], b"RNDBDATA");
        let words: Vec<u32> = (40..84).step_by(4).map(|o| get32(&p, o)).collect();
        assert_eq!(words, vec![1, 3, 1, 9, 2, 32768, 32, 31, 1, 496, 24]);
        assert_eq!(get64(&p, 84), 33_619_968);
        assert_eq!(get64(&p, 92), 0x1122_3344_5566_7788);
        assert!(p[100..].iter().all(|&b| b == 0));
        assert_eq!(z.entries_per_page(), 1364);
        assert_eq!(ZeroPage::decode(&p, 9, Path::new("x")).unwrap(), z);
        assert_eq!(
            ZeroPage::decode(&p, 8, Path::new("x")).unwrap_err().code,
            896
        );
    }

    #[test]
    fn entry_golden_layout() {
        let mut st = ExtentState::free(3);
        st.page_class = vec![0x1, 0x2, 0xF];
        st.owner = Some(ExtentOwner {
            table_id: 0x0A0B_0C0D,
            fragment_id: 5,
        });
        let mut b = vec![0u8; entry_bytes(3)];
        encode_entry(&mut b, &st);
        assert_eq!(
            b,
            vec![0x0D, 0x0C, 0x0B, 0x0A, 5, 0, 0, 0, 0x21, 0x0F, 0, 0]
        );
        encode_entry(&mut b, &ExtentState::free(3));
        assert_eq!(&b[..10], &[0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
    }

    #[test]
    fn entry_round_trip() {
        let mut st = ExtentState::free(5);
        st.owner = Some(ExtentOwner {
            table_id: 7,
            fragment_id: 2,
        });
        st.page_class = vec![0, 15, 3, 9, 14];
        let mut b = vec![0u8; entry_bytes(5)];
        encode_entry(&mut b, &st);
        let d = decode_entry(&b, 5);
        assert_eq!(d.owner, st.owner);
        assert_eq!(d.page_class, st.page_class);
    }
}
