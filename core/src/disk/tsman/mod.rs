//! TSMAN: tablespaces, their data files and extents, for one data node.
//!
//! A tablespace (bound to a logfile group) is a set of data files; a data file
//! ([`datafile`]) is cut into extents of EXTENT_SIZE; an extent belongs to one
//! fragment (table_id, fragment_id) or is free. [`TablespaceManager`] creates, opens
//! and drops data files, hands extents to fragments ([`alloc::FragmentDiskAlloc`] is
//! the per-fragment side) and takes them back, keeps the 4-bit free-space class of
//! every page in the extent headers and reports exact usage ([`DataFileInfo`]).
//!
//! Rules (see `docs/disk-data-files.md`):
//! - Allocation is deterministic: the free extent of lowest (file_no, extent_no).
//!   With none free, the tablespace's last data file grows by AUTOEXTEND_SIZE (whole
//!   extents, never past its MAX_SIZE / reserved header capacity), else error 1601.
//! - Unlike NDB, an extent whose pages are all empty goes back to the free list
//!   ([`TablespaceManager::free_extent`]); the caller has undo-logged it.
//! - WAL: before writing an extent-header page whose LSN is L, `wal.sync_to(L)`.
//!   Owner changes (alloc/free) are written at once; page-class changes only mark the
//!   header page dirty and are written by [`TablespaceManager::flush`] (which the
//!   node calls at each LCP and before shutdown), so class changes since the last
//!   flush are lost at a crash — classes are hints, never used for correctness.
//! - MAX_SIZE applies to each data file (the header capacity reserved at creation);
//!   with MAX_SIZE 0 a file may grow to 16x its initial extents.
//! - Free space: `set_page_free_bytes` records a page's exact free bytes (and derives
//!   its class); `files_info` sums them. After a restart, pages not reported again
//!   count as their class's lower bound (exact for empty pages).
//! - A failed write (ENOSPC, EIO) returns error 1509 and leaves the in-memory state as
//!   it was.
//!
//! Ids: tablespaces are numbered 1, 2, ... in creation order, data files 1, 2, ... per
//! node (never reused). At a restart the caller re-creates each tablespace under its
//! id (`restore_tablespace`) and calls `open_datafile` with the file numbers
//! `add_datafile` returned; the zero page must name the same file number and
//! tablespace.
//!
//! Locking: one mutex over all tablespaces and files; it is held across file I/O and
//! `WalSync::sync_to` (LGMAN never calls back into TSMAN). No other lock is taken
//! under it.

pub mod alloc;
pub mod datafile;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::disk::io::FileSystem;
use crate::disk::page::DISK_PAGE_SIZE;
use crate::disk::{Lsn, WalSync};
use crate::error::{NdbError, Result, codes};

use datafile::{DataFile, EMPTY_CLASS, MAX_EXTENT_PAGES, ZeroPage};

/// Id of a tablespace on this node (assigned 1, 2, ... in creation order).
pub type TablespaceId = u32;

/// The fragment owning an extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExtentOwner {
    pub table_id: u32,
    pub fragment_id: u32,
}

/// An extent: its data file and its number inside the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExtentId {
    pub file_no: u32,
    pub extent_no: u32,
}

/// A page of a data file (the page cache's key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageAddr {
    pub file_no: u32,
    pub page_no: u32,
}

impl PageAddr {
    /// The page cache's u64 page id: `file_no << 32 | page_no`.
    pub fn key(self) -> u64 {
        (self.file_no as u64) << 32 | self.page_no as u64
    }
    pub fn from_key(key: u64) -> PageAddr {
        PageAddr {
            file_no: (key >> 32) as u32,
            page_no: key as u32,
        }
    }
}

/// CREATE TABLESPACE options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablespaceSpec {
    pub name: String,
    pub logfile_group: String,
    /// Rounded up to a multiple of 32 KB; 0 or more than 1 GB: error 764.
    pub extent_size_bytes: u64,
    /// 0: data files never grow.
    pub autoextend_size_bytes: u64,
    /// Largest size of each data file when it autoextends; 0 = unbounded (header
    /// space is then reserved for 16x the initial size).
    pub max_size_bytes: u64,
}

/// One row of `information_schema.FILES` / `ndbinfo.files` for a data file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataFileInfo {
    pub file_no: u32,
    pub file_name: String,
    pub path: PathBuf,
    pub tablespace_id: TablespaceId,
    pub tablespace_name: String,
    pub logfile_group_name: String,
    pub free_extents: u64,
    pub total_extents: u64,
    pub extent_size_bytes: u64,
    /// Current size of the file.
    pub size_bytes: u64,
    pub initial_size_bytes: u64,
    /// Size the file may grow to by autoextension (= initial size without it).
    pub maximum_size_bytes: u64,
    pub autoextend_size_bytes: u64,
    /// Free bytes of the pages of allocated extents, as reported through
    /// `set_page_free_bytes` (after a restart, until reported again: the lower bound
    /// of each page's free-space class; exact for empty pages).
    pub free_bytes_in_allocated_extents: u64,
}

struct Tablespace {
    spec: TablespaceSpec,
    extent_pages: u32,
    /// Data files in creation order (ascending file_no).
    files: Vec<u32>,
    /// Tables using the tablespace (DROP TABLESPACE refuses while > 0).
    table_users: u32,
}

#[derive(Default)]
struct Inner {
    tablespaces: BTreeMap<TablespaceId, Tablespace>,
    files: BTreeMap<u32, DataFile>,
    next_ts_id: TablespaceId,
    next_file_no: u32,
}

/// The tablespace manager of one data node.
pub struct TablespaceManager {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    wal: Arc<dyn WalSync>,
    node_id: u32,
    inner: Mutex<Inner>,
}

fn no_ts(ts: TablespaceId) -> NdbError {
    codes::invalid_tablespace(&format!("tablespace id {ts}"))
}

fn no_extent(extent: ExtentId) -> NdbError {
    codes::internal(format_args!(
        "no extent {} in data file {}",
        extent.extent_no, extent.file_no
    ))
}

impl Inner {
    fn ts(&self, ts: TablespaceId) -> Result<&Tablespace> {
        self.tablespaces.get(&ts).ok_or_else(|| no_ts(ts))
    }

    /// The data file and extent index of `page`, if the page is a data page.
    fn locate(&mut self, page: PageAddr) -> Result<(&mut DataFile, u32, u32)> {
        let df = self
            .files
            .get_mut(&page.file_no)
            .ok_or_else(|| codes::internal(format_args!("no data file {}", page.file_no)))?;
        let (e, i) = df.zero.locate(page.page_no).ok_or_else(|| {
            codes::internal(format_args!(
                "page {} of data file {} is not a data page",
                page.page_no, page.file_no
            ))
        })?;
        Ok((df, e, i))
    }
}

impl TablespaceManager {
    /// `dir` is the node's file-system directory: relative data file names resolve
    /// there.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: impl Into<PathBuf>,
        wal: Arc<dyn WalSync>,
        node_id: u32,
    ) -> TablespaceManager {
        TablespaceManager {
            fs,
            dir: dir.into(),
            wal,
            node_id,
            inner: Mutex::new(Inner {
                next_ts_id: 1,
                next_file_no: 1,
                ..Inner::default()
            }),
        }
    }

    fn resolve(&self, file_name: &str) -> PathBuf {
        let p = Path::new(file_name);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    /// CREATE TABLESPACE (without its first data file: call `add_datafile`).
    pub fn create_tablespace(&self, spec: TablespaceSpec) -> Result<TablespaceId> {
        self.insert_tablespace(None, spec)
    }

    /// Re-create a tablespace under the id it had (restart, from the dictionary).
    pub fn restore_tablespace(&self, id: TablespaceId, spec: TablespaceSpec) -> Result<()> {
        self.insert_tablespace(Some(id), spec).map(|_| ())
    }

    fn insert_tablespace(
        &self,
        id: Option<TablespaceId>,
        spec: TablespaceSpec,
    ) -> Result<TablespaceId> {
        let mut g = self.inner.lock();
        if g.tablespaces.values().any(|t| t.spec.name == spec.name) {
            return Err(codes::filegroup_exists(&spec.name));
        }
        if let Some(id) = id
            && (id == 0 || g.tablespaces.contains_key(&id))
        {
            return Err(codes::filegroup_exists(&format!("tablespace id {id}")));
        }
        let pages = spec.extent_size_bytes.div_ceil(DISK_PAGE_SIZE as u64);
        if pages == 0 || pages > MAX_EXTENT_PAGES as u64 {
            return Err(codes::invalid_extent_size(format_args!(
                "{} bytes (1 byte .. {} bytes)",
                spec.extent_size_bytes,
                MAX_EXTENT_PAGES as u64 * DISK_PAGE_SIZE as u64
            )));
        }
        let id = id.unwrap_or(g.next_ts_id);
        g.next_ts_id = g.next_ts_id.max(id + 1);
        let mut spec = spec;
        spec.extent_size_bytes = pages * DISK_PAGE_SIZE as u64;
        g.tablespaces.insert(
            id,
            Tablespace {
                spec,
                extent_pages: pages as u32,
                files: Vec::new(),
                table_users: 0,
            },
        );
        Ok(id)
    }

    /// The tablespace called `name`.
    pub fn lookup(&self, name: &str) -> Option<TablespaceId> {
        let g = self.inner.lock();
        g.tablespaces
            .iter()
            .find(|(_, t)| t.spec.name == name)
            .map(|(&id, _)| id)
    }

    /// The spec of a tablespace (extent size rounded).
    pub fn spec(&self, ts: TablespaceId) -> Result<TablespaceSpec> {
        Ok(self.inner.lock().ts(ts)?.spec.clone())
    }

    /// Pages per extent of a tablespace.
    pub fn extent_pages(&self, ts: TablespaceId) -> Result<u32> {
        Ok(self.inner.lock().ts(ts)?.extent_pages)
    }

    /// A table starts using the tablespace (CREATE TABLE ... TABLESPACE).
    pub fn add_table_user(&self, ts: TablespaceId) -> Result<()> {
        let mut g = self.inner.lock();
        let t = g.tablespaces.get_mut(&ts).ok_or_else(|| no_ts(ts))?;
        t.table_users += 1;
        Ok(())
    }

    /// A table stops using the tablespace (DROP TABLE).
    pub fn remove_table_user(&self, ts: TablespaceId) -> Result<()> {
        let mut g = self.inner.lock();
        let t = g.tablespaces.get_mut(&ts).ok_or_else(|| no_ts(ts))?;
        t.table_users = t.table_users.saturating_sub(1);
        Ok(())
    }

    /// DROP TABLESPACE: 767 if unknown, 768 while it has data files or tables.
    pub fn drop_tablespace(&self, name: &str) -> Result<()> {
        let mut g = self.inner.lock();
        let Some((&id, t)) = g.tablespaces.iter().find(|(_, t)| t.spec.name == name) else {
            return Err(codes::no_such_filegroup(name));
        };
        if !t.files.is_empty() {
            return Err(codes::filegroup_in_use(format_args!(
                "{name} has {} data files",
                t.files.len()
            )));
        }
        if t.table_users > 0 {
            return Err(codes::filegroup_in_use(format_args!(
                "{name} is used by {} tables",
                t.table_users
            )));
        }
        g.tablespaces.remove(&id);
        Ok(())
    }

    /// ADD DATAFILE: create, preallocate and format a data file; its extents are free
    /// for allocation at once. `created_at` is stored in the zero page.
    pub fn add_datafile(
        &self,
        ts: TablespaceId,
        file_name: &str,
        initial_size_bytes: u64,
        created_at: u64,
        lsn: Lsn,
    ) -> Result<u32> {
        let path = self.resolve(file_name);
        let mut g = self.inner.lock();
        let t = g.ts(ts)?;
        if g.files.values().any(|f| f.path == path) {
            return Err(codes::file_exists(path.display()));
        }
        let plan = datafile::plan(
            t.extent_pages,
            initial_size_bytes,
            t.spec.max_size_bytes,
            t.spec.autoextend_size_bytes,
        )?;
        let file_no = g.next_file_no;
        let zero = ZeroPage {
            node_id: self.node_id,
            file_no,
            tablespace_id: ts,
            extent_pages: t.extent_pages,
            extent_count: plan.extent_count,
            header_pages: plan.header_pages,
            extent_capacity: plan.extent_capacity,
            initial_size_bytes: 0,
            created_at,
        };
        let zero = ZeroPage {
            initial_size_bytes: zero.file_bytes(plan.extent_count),
            ..zero
        };
        let df = DataFile::create(&*self.fs, &*self.wal, file_name, &path, zero, lsn)?;
        g.next_file_no += 1;
        g.files.insert(file_no, df);
        if let Some(t) = g.tablespaces.get_mut(&ts) {
            t.files.push(file_no);
        }
        Ok(file_no)
    }

    /// Open an existing data file of `ts` at a restart (file_no as `add_datafile`
    /// returned it): zero page and every extent-header page are verified.
    pub fn open_datafile(&self, ts: TablespaceId, file_name: &str, file_no: u32) -> Result<()> {
        let path = self.resolve(file_name);
        let mut g = self.inner.lock();
        let t = g.ts(ts)?;
        if g.files.contains_key(&file_no) || g.files.values().any(|f| f.path == path) {
            return Err(codes::file_exists(path.display()));
        }
        let df = DataFile::open(&*self.fs, file_name, &path, file_no)?;
        if df.zero.tablespace_id != ts || df.zero.extent_pages != t.extent_pages {
            return Err(codes::corrupt_page(format_args!(
                "{}: belongs to tablespace {} with extents of {} pages, expected {ts} / {}",
                path.display(),
                df.zero.tablespace_id,
                df.zero.extent_pages,
                t.extent_pages
            )));
        }
        g.next_file_no = g.next_file_no.max(file_no + 1);
        g.files.insert(file_no, df);
        if let Some(t) = g.tablespaces.get_mut(&ts) {
            t.files.push(file_no);
            t.files.sort_unstable();
        }
        Ok(())
    }

    /// ALTER TABLESPACE DROP DATAFILE: 766 if not in `ts`, 770 while any extent of it
    /// is allocated; removes the file.
    pub fn drop_datafile(&self, ts: TablespaceId, file_name: &str) -> Result<()> {
        let mut g = self.inner.lock();
        let t = g.ts(ts)?;
        let Some(&file_no) = t
            .files
            .iter()
            .find(|&&f| g.files.get(&f).is_some_and(|d| d.name == file_name))
        else {
            return Err(codes::no_such_file(file_name));
        };
        let Some(df) = g.files.get(&file_no) else {
            return Err(codes::no_such_file(file_name));
        };
        let used = df.extents.len() - df.free_extents();
        if used > 0 {
            return Err(codes::file_in_use(format_args!(
                "{file_name}: {used} extents allocated"
            )));
        }
        self.fs
            .remove(&df.path)
            .map_err(|e| datafile::fs_error(&df.path, "remove", &e))?;
        g.files.remove(&file_no);
        if let Some(t) = g.tablespaces.get_mut(&ts) {
            t.files.retain(|&f| f != file_no);
        }
        Ok(())
    }

    /// Give a free extent of `ts` to `owner` (lowest file_no/extent first), growing
    /// the last data file by AUTOEXTEND_SIZE if none is free. 1601 (naming
    /// `table_name`) when the tablespace is full, 1602 without data files.
    pub fn alloc_extent(
        &self,
        ts: TablespaceId,
        owner: ExtentOwner,
        table_name: &str,
        lsn: Lsn,
    ) -> Result<ExtentId> {
        if owner.fragment_id == datafile::FREE_FRAGMENT {
            return Err(codes::internal(format_args!(
                "fragment id {:#x} is reserved for free extents",
                owner.fragment_id
            )));
        }
        let mut g = self.inner.lock();
        let t = g.ts(ts)?;
        if t.files.is_empty() {
            return Err(codes::no_datafile_in_tablespace(&t.spec.name));
        }
        let files = t.files.clone();
        let auto = t.spec.autoextend_size_bytes;
        let extent_bytes = t.spec.extent_size_bytes;
        let first_free = |g: &Inner| {
            files.iter().find_map(|f| {
                let e = g.files.get(f)?.first_free()?;
                Some((*f, e))
            })
        };
        let found = match first_free(&g) {
            Some(x) => x,
            None => {
                let last = *files.last().ok_or_else(|| no_ts(ts))?;
                let df = g.files.get_mut(&last).ok_or_else(|| no_ts(ts))?;
                let room = df.zero.extent_capacity - df.zero.extent_count;
                let want = auto.div_ceil(extent_bytes).min(room as u64) as u32;
                if want == 0 {
                    return Err(codes::out_of_extents(table_name));
                }
                let path = df.path.clone();
                df.grow(want).map_err(|e| {
                    // A disk full underneath the tablespace is the tablespace full.
                    if e.code == codes::out_of_extents("").code {
                        codes::out_of_extents(table_name).detail(format_args!(
                            "{} cannot grow: no space left on device",
                            path.display()
                        ))
                    } else {
                        e
                    }
                })?;
                first_free(&g).ok_or_else(|| codes::out_of_extents(table_name))?
            }
        };
        let (file_no, extent_no) = found;
        let df = g.files.get_mut(&file_no).ok_or_else(|| no_ts(ts))?;
        let before = df.set_owner(extent_no, Some(owner), lsn);
        let hp = df.header_page_of(extent_no);
        if let Err(e) = df.write_header_page(&*self.wal, hp) {
            df.restore(extent_no, before);
            return Err(e);
        }
        Ok(ExtentId { file_no, extent_no })
    }

    /// Return an extent to its tablespace's free list (owner cleared, pages empty).
    /// The caller has undo-logged the change at `lsn`.
    pub fn free_extent(&self, extent: ExtentId, lsn: Lsn) -> Result<()> {
        let mut g = self.inner.lock();
        let df = g
            .files
            .get_mut(&extent.file_no)
            .ok_or_else(|| no_extent(extent))?;
        let Some(st) = df.extents.get(extent.extent_no as usize) else {
            return Err(no_extent(extent));
        };
        if st.owner.is_none() {
            return Err(codes::internal(format_args!(
                "extent {extent:?} is already free"
            )));
        }
        let before = df.set_owner(extent.extent_no, None, lsn);
        let hp = df.header_page_of(extent.extent_no);
        if let Err(e) = df.write_header_page(&*self.wal, hp) {
            df.restore(extent.extent_no, before);
            return Err(e);
        }
        Ok(())
    }

    /// Restart (undo pass): extent `extent` belongs to `owner` again (`None`: free),
    /// with its pages' free space unknown until the row layer reports it (empty), its
    /// header page written now.
    pub fn restore_extent_owner(
        &self,
        extent: ExtentId,
        owner: Option<ExtentOwner>,
        lsn: Lsn,
    ) -> Result<()> {
        let mut g = self.inner.lock();
        let df = g
            .files
            .get_mut(&extent.file_no)
            .ok_or_else(|| no_extent(extent))?;
        if extent.extent_no as usize >= df.extents.len() {
            return Err(no_extent(extent));
        }
        let before = df.set_owner(extent.extent_no, owner, lsn);
        let hp = df.header_page_of(extent.extent_no);
        if let Err(e) = df.write_header_page(&*self.wal, hp) {
            df.restore(extent.extent_no, before);
            return Err(e);
        }
        Ok(())
    }

    /// Every extent with an owner, in (file_no, extent_no) order.
    pub fn owned_extents(&self) -> Vec<(ExtentId, ExtentOwner)> {
        let g = self.inner.lock();
        let mut out = Vec::new();
        for (&file_no, df) in &g.files {
            for (e, st) in df.extents.iter().enumerate() {
                if let Some(owner) = st.owner {
                    let extent_no = e as u32;
                    out.push((ExtentId { file_no, extent_no }, owner));
                }
            }
        }
        out
    }

    /// The owner of an extent (`None`: free).
    pub fn extent_owner(&self, extent: ExtentId) -> Result<Option<ExtentOwner>> {
        let g = self.inner.lock();
        let df = g
            .files
            .get(&extent.file_no)
            .ok_or_else(|| no_extent(extent))?;
        let st = df
            .extents
            .get(extent.extent_no as usize)
            .ok_or_else(|| no_extent(extent))?;
        Ok(st.owner)
    }

    /// Page `i` of an extent.
    pub fn extent_page(&self, extent: ExtentId, i: u32) -> Result<PageAddr> {
        let g = self.inner.lock();
        let df = g
            .files
            .get(&extent.file_no)
            .ok_or_else(|| no_extent(extent))?;
        if extent.extent_no >= df.zero.extent_count || i >= df.zero.extent_pages {
            return Err(no_extent(extent));
        }
        Ok(PageAddr {
            file_no: extent.file_no,
            page_no: df.zero.page_no(extent.extent_no, i),
        })
    }

    /// Every page of an extent, in order (e.g. to drop them from the page cache when
    /// the extent is freed).
    pub fn extent_pages_of(&self, extent: ExtentId) -> Result<Vec<PageAddr>> {
        let g = self.inner.lock();
        let df = g
            .files
            .get(&extent.file_no)
            .ok_or_else(|| no_extent(extent))?;
        if extent.extent_no >= df.zero.extent_count {
            return Err(no_extent(extent));
        }
        Ok((0..df.zero.extent_pages)
            .map(|i| PageAddr {
                file_no: extent.file_no,
                page_no: df.zero.page_no(extent.extent_no, i),
            })
            .collect())
    }

    /// The extent holding a data page and the page's index in it.
    pub fn locate(&self, page: PageAddr) -> Result<(ExtentId, u32)> {
        let mut g = self.inner.lock();
        let (_, e, i) = g.locate(page)?;
        Ok((
            ExtentId {
                file_no: page.file_no,
                extent_no: e,
            },
            i,
        ))
    }

    /// Set a page's 4-bit free-space class (its free bytes become the class's lower
    /// bound). Lazy: written by `flush` or the next owner change of the extent.
    pub fn set_page_free_class(&self, page: PageAddr, class: u8, lsn: Lsn) -> Result<()> {
        let class = class.min(EMPTY_CLASS);
        self.update_page(page, lsn, |c, b| {
            *c = class;
            *b = datafile::class_min_free_bytes(class);
        })
    }

    /// Report a page's exact free bytes (`rowpage::free_bytes`); its class follows.
    pub fn set_page_free_bytes(&self, page: PageAddr, free_bytes: u32, lsn: Lsn) -> Result<()> {
        let free_bytes = free_bytes.min(crate::disk::rowpage::EMPTY_PAGE_FREE_BYTES as u32);
        self.update_page(page, lsn, |c, b| {
            *c = datafile::free_class(free_bytes);
            *b = free_bytes;
        })
    }

    fn update_page(
        &self,
        page: PageAddr,
        lsn: Lsn,
        f: impl FnOnce(&mut u8, &mut u32),
    ) -> Result<()> {
        let mut g = self.inner.lock();
        let (df, e, i) = g.locate(page)?;
        let st = &mut df.extents[e as usize];
        if st.owner.is_none() {
            return Err(codes::internal(format_args!(
                "page {page:?} of a free extent"
            )));
        }
        let old = st.page_class[i as usize];
        f(
            &mut st.page_class[i as usize],
            &mut st.page_free_bytes[i as usize],
        );
        if st.page_class[i as usize] != old {
            df.mark_dirty(e, lsn);
        }
        Ok(())
    }

    /// The extents `owner` holds with each page's free bytes (to rebuild a fragment's
    /// allocator after a restart), in (file_no, extent_no) order.
    pub fn extents_of(&self, owner: ExtentOwner) -> Vec<(ExtentId, Vec<u32>)> {
        let g = self.inner.lock();
        let mut out = Vec::new();
        for (&file_no, df) in &g.files {
            for (e, st) in df.extents.iter().enumerate() {
                if st.owner == Some(owner) {
                    let id = ExtentId {
                        file_no,
                        extent_no: e as u32,
                    };
                    out.push((id, st.page_free_bytes.clone()));
                }
            }
        }
        out
    }

    /// Some data file is open.
    pub fn has_files(&self) -> bool {
        !self.inner.lock().files.is_empty()
    }

    /// Write every changed extent-header page (WAL first) and fdatasync every file.
    pub fn flush(&self) -> Result<()> {
        let mut g = self.inner.lock();
        for df in g.files.values_mut() {
            df.flush(&*self.wal)?;
        }
        Ok(())
    }

    /// Check the invariants of every data file and tablespace (tests, debug).
    pub fn check(&self) -> Result<()> {
        let g = self.inner.lock();
        for (&file_no, df) in &g.files {
            df.check().map_err(codes::internal)?;
            let in_ts = g
                .tablespaces
                .get(&df.zero.tablespace_id)
                .is_some_and(|t| t.files.contains(&file_no));
            if !in_ts || df.zero.file_no != file_no {
                return Err(codes::internal(format_args!(
                    "data file {file_no} not listed by its tablespace"
                )));
            }
        }
        for t in g.tablespaces.values() {
            if t.files.iter().any(|f| !g.files.contains_key(f)) || !t.files.is_sorted() {
                return Err(codes::internal(format_args!(
                    "tablespace {} lists unknown data files",
                    t.spec.name
                )));
            }
        }
        Ok(())
    }

    /// One row per data file, in file_no order.
    pub fn files_info(&self) -> Vec<DataFileInfo> {
        let g = self.inner.lock();
        g.files
            .iter()
            .filter_map(|(&file_no, df)| {
                let t = g.tablespaces.get(&df.zero.tablespace_id)?;
                let free_bytes = df
                    .extents
                    .iter()
                    .filter(|e| e.owner.is_some())
                    .flat_map(|e| e.page_free_bytes.iter())
                    .map(|&b| b as u64)
                    .sum();
                Some(DataFileInfo {
                    file_no,
                    file_name: df.name.clone(),
                    path: df.path.clone(),
                    tablespace_id: df.zero.tablespace_id,
                    tablespace_name: t.spec.name.clone(),
                    logfile_group_name: t.spec.logfile_group.clone(),
                    free_extents: df.free_extents() as u64,
                    total_extents: df.extents.len() as u64,
                    extent_size_bytes: df.zero.extent_size_bytes(),
                    size_bytes: df.size_bytes(),
                    initial_size_bytes: df.zero.initial_size_bytes,
                    maximum_size_bytes: df.maximum_size_bytes(),
                    autoextend_size_bytes: t.spec.autoextend_size_bytes,
                    free_bytes_in_allocated_extents: free_bytes,
                })
            })
            .collect()
    }

    /// Initial start: delete every data file this manager knows (created or opened)
    /// and forget all tablespaces. Returns the removed paths in file_no order.
    pub fn remove_all_files(&self) -> Result<Vec<PathBuf>> {
        let mut g = self.inner.lock();
        let mut removed = Vec::new();
        while let Some((&file_no, df)) = g.files.iter().next() {
            self.fs
                .remove(&df.path)
                .map_err(|e| datafile::fs_error(&df.path, "remove", &e))?;
            removed.push(df.path.clone());
            g.files.remove(&file_no);
            for t in g.tablespaces.values_mut() {
                t.files.retain(|&f| f != file_no);
            }
        }
        g.tablespaces.clear();
        Ok(removed)
    }
}
