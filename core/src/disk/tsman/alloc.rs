//! The disk allocator of one fragment: the extents it owns and each page's free bytes.
//!
//! [`FragmentDiskAlloc::alloc`] picks the page for a new disk row part: the fullest
//! page of the fragment's extents that still fits (smallest free bytes >= the need,
//! ties to the lowest page address), as NDB's free-class lists prefer; only when none
//! fits does it take one new extent from the tablespace (NDB's rule: one at a time).
//! The chosen page's free bytes drop by the request at once (a reservation, so that
//! two allocations before the row layer reports do not overbook the page);
//! [`FragmentDiskAlloc::page_free_changed`] then sets the exact value the row page
//! reports and forwards it to the tablespace manager's accounting. If the insert
//! fails anyway (free bytes rebuilt from the 4-bit classes after a restart are lower
//! bounds, but a class written before a crash may be stale), the caller reports the
//! page's real free bytes and allocates again.
//!
//! Extent return (NDB never does it): when every page of an extent is empty again and
//! the fragment owns another extent, `page_free_changed` names the extent; the caller
//! undo-logs the free, drops the extent's pages from the page cache and calls
//! [`FragmentDiskAlloc::return_extent`]. The fragment's last extent is kept (no
//! allocate/free churn for a fragment hovering around one extent) until
//! [`FragmentDiskAlloc::release_all`] (DROP TABLE, TRUNCATE).
//!
//! OPTIMIZE TABLE empties the least used extents (`alloc/compact.rs`): an extent being
//! evacuated takes no allocation (its pages leave `by_free`) until it is empty and
//! returned, or its evacuation ends.
//!
//! Invariants: `by_free` holds exactly one `(free, page)` per page of every owned
//! extent not being evacuated, equal to `extents[..].free[i]`; `evacuating` holds only
//! owned extents; every owned extent is owned by `owner` in the tablespace manager. The fragment's own lock (the caller's) guards this object;
//! it takes the tablespace manager's mutex inside its calls.

use std::collections::{BTreeMap, BTreeSet};

use crate::disk::Lsn;
use crate::disk::rowpage::EMPTY_PAGE_FREE_BYTES;
use crate::error::{Result, codes};

use super::{ExtentId, ExtentOwner, PageAddr, TablespaceId, TablespaceManager};

mod compact;

const EMPTY: u32 = EMPTY_PAGE_FREE_BYTES as u32;

struct ExtentPages {
    first: PageAddr,
    free: Vec<u32>,
}

impl ExtentPages {
    fn all_empty(&self) -> bool {
        self.free.iter().all(|&f| f == EMPTY)
    }
}

/// The page [`FragmentDiskAlloc::alloc_page`] chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocatedPage {
    pub page: PageAddr,
    /// The page held no record: format it before inserting.
    pub was_empty: bool,
}

/// Per-fragment disk allocator.
pub struct FragmentDiskAlloc {
    owner: ExtentOwner,
    extents: BTreeMap<ExtentId, ExtentPages>,
    /// First page of each extent -> extent (to find a page's extent).
    by_first_page: BTreeMap<PageAddr, ExtentId>,
    /// (free bytes, page) of every page of the owned extents not being evacuated.
    by_free: BTreeSet<(u32, PageAddr)>,
    /// Extents OPTIMIZE TABLE is emptying.
    evacuating: BTreeSet<ExtentId>,
}

impl FragmentDiskAlloc {
    /// A fragment without extents.
    pub fn new(owner: ExtentOwner) -> FragmentDiskAlloc {
        FragmentDiskAlloc {
            owner,
            extents: BTreeMap::new(),
            by_first_page: BTreeMap::new(),
            by_free: BTreeSet::new(),
            evacuating: BTreeSet::new(),
        }
    }

    /// Rebuild after a restart from the extent headers (page free bytes are the
    /// class lower bounds until the row layer reports exact values).
    pub fn from_tablespace(
        tsman: &TablespaceManager,
        owner: ExtentOwner,
    ) -> Result<FragmentDiskAlloc> {
        let mut a = FragmentDiskAlloc::new(owner);
        for (extent, free) in tsman.extents_of(owner) {
            let first = tsman.extent_page(extent, 0)?;
            a.add_extent(extent, first, free);
        }
        Ok(a)
    }

    pub fn owner(&self) -> ExtentOwner {
        self.owner
    }

    /// How many extents the fragment owns.
    pub fn extent_count(&self) -> usize {
        self.extents.len()
    }

    /// The owned extents in order.
    pub fn extents(&self) -> Vec<ExtentId> {
        self.extents.keys().copied().collect()
    }

    /// Free bytes of a page of the fragment (after reservations).
    pub fn page_free_bytes(&self, page: PageAddr) -> Option<u32> {
        let (e, i) = self.find(page)?;
        self.extents.get(&e).map(|x| x.free[i])
    }

    /// Sum of the free bytes of all the fragment's pages.
    pub fn free_bytes(&self) -> u64 {
        self.extents
            .values()
            .flat_map(|x| x.free.iter())
            .map(|&f| u64::from(f))
            .sum()
    }

    fn add_extent(&mut self, extent: ExtentId, first: PageAddr, free: Vec<u32>) {
        for (i, &f) in free.iter().enumerate() {
            let page = PageAddr {
                file_no: first.file_no,
                page_no: first.page_no + i as u32,
            };
            self.by_free.insert((f, page));
        }
        self.by_first_page.insert(first, extent);
        self.extents.insert(extent, ExtentPages { first, free });
    }

    fn remove_extent(&mut self, extent: ExtentId) {
        let listed = !self.evacuating.remove(&extent);
        if let Some(x) = self.extents.remove(&extent) {
            for (i, &f) in x.free.iter().enumerate().filter(|_| listed) {
                let page = PageAddr {
                    file_no: x.first.file_no,
                    page_no: x.first.page_no + i as u32,
                };
                self.by_free.remove(&(f, page));
            }
            self.by_first_page.remove(&x.first);
        }
    }

    /// The extent holding `page` and the page's index in it.
    fn find(&self, page: PageAddr) -> Option<(ExtentId, usize)> {
        let (first, &e) = self.by_first_page.range(..=page).next_back()?;
        let x = self.extents.get(&e)?;
        let i = page.page_no.checked_sub(first.page_no)? as usize;
        (first.file_no == page.file_no && i < x.free.len()).then_some((e, i))
    }

    fn set_free(&mut self, page: PageAddr, free: u32) -> Option<ExtentId> {
        let (e, i) = self.find(page)?;
        let x = self.extents.get_mut(&e)?;
        let old = std::mem::replace(&mut x.free[i], free);
        if !self.evacuating.contains(&e) {
            let removed = self.by_free.remove(&(old, page));
            debug_assert!(removed, "by_free out of step");
            self.by_free.insert((free, page));
        }
        Some(e)
    }

    /// A page with room for `need_bytes` (a record plus its slot entry:
    /// `rowpage::space_needed`), reserving them. Takes a new extent from `ts` when no
    /// owned page fits (1601 naming `table_name` when the tablespace is full).
    pub fn alloc(
        &mut self,
        tsman: &TablespaceManager,
        ts: TablespaceId,
        need_bytes: usize,
        table_name: &str,
        lsn: Lsn,
    ) -> Result<PageAddr> {
        Ok(self
            .alloc_page(tsman, ts, need_bytes, table_name, lsn)?
            .page)
    }

    /// As [`FragmentDiskAlloc::alloc`], also saying whether the page was empty: an
    /// empty page may be unformatted or hold stale rows of an earlier owner of a
    /// returned extent, so the caller must format it (`rowpage::init`; the page cache
    /// may hand it out without reading it).
    pub fn alloc_page(
        &mut self,
        tsman: &TablespaceManager,
        ts: TablespaceId,
        need_bytes: usize,
        table_name: &str,
        lsn: Lsn,
    ) -> Result<AllocatedPage> {
        let need = u32::try_from(need_bytes)
            .ok()
            .filter(|&n| n <= EMPTY)
            .ok_or_else(|| {
                codes::row_too_big(format_args!(
                    "disk part of {need_bytes} bytes, a disk page holds {EMPTY}"
                ))
            })?;
        let lowest = PageAddr {
            file_no: 0,
            page_no: 0,
        };
        let fit = self.by_free.range((need, lowest)..).next().copied();
        let (free, page) = match fit {
            Some(x) => x,
            None => {
                let extent = tsman.alloc_extent(ts, self.owner, table_name, lsn)?;
                let first = tsman.extent_page(extent, 0)?;
                let pages = tsman.extent_pages(ts)?;
                self.add_extent(extent, first, vec![EMPTY; pages as usize]);
                (EMPTY, first)
            }
        };
        self.set_free(page, free - need);
        Ok(AllocatedPage {
            page,
            was_empty: free == EMPTY,
        })
    }

    /// The row layer changed `page`: its exact free bytes are now `free_bytes`.
    /// Returns the page's extent when all its pages are empty and the fragment owns
    /// another extent: the caller should undo-log and `return_extent` it.
    pub fn page_free_changed(
        &mut self,
        tsman: &TablespaceManager,
        page: PageAddr,
        free_bytes: u32,
        lsn: Lsn,
    ) -> Result<Option<ExtentId>> {
        let free_bytes = free_bytes.min(EMPTY);
        if self.find(page).is_none() {
            return Err(codes::internal(format_args!(
                "page {page:?} is not in an extent of fragment {:?}",
                self.owner
            )));
        }
        tsman.set_page_free_bytes(page, free_bytes, lsn)?;
        let Some(e) = self.set_free(page, free_bytes) else {
            return Ok(None);
        };
        let empty = self.extents.get(&e).is_some_and(ExtentPages::all_empty);
        Ok((empty && self.extents.len() > 1).then_some(e))
    }

    /// Give an empty extent back to the tablespace (undo-logged by the caller at
    /// `lsn`). Error if a page of it is not empty.
    pub fn return_extent(
        &mut self,
        tsman: &TablespaceManager,
        extent: ExtentId,
        lsn: Lsn,
    ) -> Result<()> {
        let Some(x) = self.extents.get(&extent) else {
            return Err(codes::internal(format_args!(
                "extent {extent:?} is not owned by {:?}",
                self.owner
            )));
        };
        if !x.all_empty() {
            return Err(codes::internal(format_args!(
                "extent {extent:?} still holds rows"
            )));
        }
        tsman.free_extent(extent, lsn)?;
        self.remove_extent(extent);
        Ok(())
    }

    /// DROP TABLE / TRUNCATE: every extent goes back to the tablespace. Returns them
    /// (to drop their pages from the page cache). On an error the extents not yet
    /// returned stay owned.
    pub fn release_all(&mut self, tsman: &TablespaceManager, lsn: Lsn) -> Result<Vec<ExtentId>> {
        let mut out = Vec::new();
        for e in self.extents() {
            tsman.free_extent(e, lsn)?;
            self.remove_extent(e);
            out.push(e);
        }
        Ok(out)
    }

    /// Check the invariants against the tablespace manager (tests, debug).
    pub fn check(&self, tsman: &TablespaceManager) -> Result<()> {
        let pages: usize = self
            .extents
            .iter()
            .filter(|(e, _)| !self.evacuating.contains(e))
            .map(|(_, x)| x.free.len())
            .sum();
        if pages != self.by_free.len()
            || self.by_first_page.len() != self.extents.len()
            || self
                .evacuating
                .iter()
                .any(|e| !self.extents.contains_key(e))
        {
            return Err(codes::internal("fragment allocator indexes out of step"));
        }
        for (&e, x) in &self.extents {
            if self.evacuating.contains(&e) {
                if tsman.extent_owner(e)? != Some(self.owner) {
                    return Err(codes::internal(format_args!("extent {e:?} not ours")));
                }
                continue;
            }
            if tsman.extent_owner(e)? != Some(self.owner) {
                return Err(codes::internal(format_args!("extent {e:?} not ours")));
            }
            for (i, &f) in x.free.iter().enumerate() {
                let page = PageAddr {
                    file_no: x.first.file_no,
                    page_no: x.first.page_no + i as u32,
                };
                if !self.by_free.contains(&(f, page)) {
                    return Err(codes::internal(format_args!("page {page:?} not indexed")));
                }
            }
        }
        Ok(())
    }
}
