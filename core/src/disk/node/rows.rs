//! The row-level operations DBTUP performs on the disk parts of rows: reserve at
//! prepare, write at commit (undo record first, page stamped with its LSN), read,
//! update in place, free (an emptied extent goes back to the tablespace, its cached
//! pages discarded first). See the parent module for the rules they keep.

use super::*;

impl NodeDisk {
    /// Undo bytes to reserve for inserting a record.
    pub fn undo_for_insert() -> u64 {
        undo_len(&UndoRecord::TupleAlloc {
            file_no: 0,
            page_no: 0,
            slot: 0,
        }) + undo_len(&UndoRecord::ExtentAlloc {
            file_no: 0,
            extent_no: 0,
            table_id: 0,
            fragment_id: 0,
        })
    }

    /// Undo bytes to reserve for freeing (or updating in place) a record of `len`.
    pub fn undo_for_change(len: usize) -> u64 {
        undo_len(&UndoRecord::TupleFree {
            file_no: 0,
            page_no: 0,
            slot: 0,
            before: vec![0; len],
        }) + undo_len(&UndoRecord::ExtentFree {
            file_no: 0,
            extent_no: 0,
            table_id: 0,
            fragment_id: 0,
        })
    }

    /// Prepare of an insert (or of an update that moves the record): room for
    /// `record_len` bytes on a page of the fragment, and the undo for it. A page that
    /// was empty is formatted now (it may hold rows of an earlier owner of its extent).
    pub fn reserve_record(
        &self,
        alloc: &mut FragmentDiskAlloc,
        ts: TablespaceId,
        record_len: usize,
        table_name: &str,
    ) -> Result<DiskReservation> {
        let undo_bytes = self.reserve_undo(Self::undo_for_insert())?;
        let need = rowpage::space_needed(record_len);
        let lsn = self.current_lsn();
        let extents_before = alloc.extent_count();
        let got = match alloc.alloc_page(&self.tsman, ts, need, table_name, lsn) {
            Ok(p) => p,
            Err(e) => {
                self.release_undo(undo_bytes);
                return Err(e);
            }
        };
        let res = DiskReservation {
            page: got.page,
            page_bytes: need as u32,
            undo_bytes,
        };
        if alloc.extent_count() > extents_before
            && let Ok((extent, _)) = self.tsman.locate(got.page)
        {
            let owner = alloc.owner();
            self.log(&UndoRecord::ExtentAlloc {
                file_no: extent.file_no,
                extent_no: extent.extent_no,
                table_id: owner.table_id,
                fragment_id: owner.fragment_id,
            })?;
        }
        self.format_if_empty(alloc, res, got.was_empty)
    }

    /// OPTIMIZE TABLE's reservation for moving a record of `record_len` bytes: as
    /// [`NodeDisk::reserve_record`], but only on a page of an extent the fragment owns
    /// and is not emptying; None when none has room (or the undo log has none).
    pub fn reserve_record_existing(
        &self,
        alloc: &mut FragmentDiskAlloc,
        record_len: usize,
    ) -> Result<Option<DiskReservation>> {
        let Ok(undo_bytes) = self.reserve_undo(Self::undo_for_insert()) else {
            return Ok(None);
        };
        let need = rowpage::space_needed(record_len);
        let Some(got) = alloc.alloc_page_existing(need) else {
            self.release_undo(undo_bytes);
            return Ok(None);
        };
        let res = DiskReservation {
            page: got.page,
            page_bytes: need as u32,
            undo_bytes,
        };
        self.format_if_empty(alloc, res, got.was_empty).map(Some)
    }

    /// OPTIMIZE TABLE: writes `image` (record `r`'s bytes, restamped by the caller) on a
    /// page of an extent the fragment keeps, then frees `r` (both undo-logged, as an
    /// update that moves its record). Ok(None) when no kept page has room or the undo
    /// log is half full ([`NodeDisk::undo_over_half`]): nothing changed. On an error the row still names `r` (a record written
    /// before the error is an orphan, freed by the next restart's relink).
    pub fn move_record(
        &self,
        alloc: &mut FragmentDiskAlloc,
        r: DiskRef,
        image: &[u8],
    ) -> Result<Option<DiskRef>> {
        if self.undo_over_half() {
            return Ok(None);
        }
        let Some(res) = self.reserve_record_existing(alloc, image.len())? else {
            return Ok(None);
        };
        let Ok(free_undo) = self.reserve_undo(Self::undo_for_change(image.len())) else {
            self.cancel_reservation(alloc, res);
            return Ok(None);
        };
        let new_ref = match self.insert_record(alloc, res, image) {
            Ok(n) => n,
            Err(e) => {
                self.release_undo(free_undo);
                return Err(e);
            }
        };
        self.free_record(alloc, r, free_undo)?;
        Ok(Some(new_ref))
    }

    /// A reserved page that was empty is formatted (it may hold rows of an earlier
    /// owner of its extent); on error the reservation goes back.
    fn format_if_empty(
        &self,
        alloc: &mut FragmentDiskAlloc,
        res: DiskReservation,
        was_empty: bool,
    ) -> Result<DiskReservation> {
        if was_empty {
            let r = self
                .pgman
                .get(cache_addr(res.page), Intent::Format)
                .map(|p| {
                    p.write(rowpage::init);
                    p.set_lsn_dirty(self.current_lsn());
                });
            if let Err(e) = r {
                self.cancel_reservation(alloc, res);
                return Err(e);
            }
        }
        Ok(res)
    }

    /// Abort of a prepared insert: the page room and the undo go back.
    pub fn cancel_reservation(&self, alloc: &mut FragmentDiskAlloc, res: DiskReservation) {
        self.release_undo(res.undo_bytes);
        // An error here means the page left the fragment, which reservations prevent.
        let _ = self.adjust_free(alloc, res.page, res.page_bytes as i64);
    }

    /// The allocator's view of a page (actual free bytes less reservations) changes
    /// by `delta`; TSMAN's accounting follows. Returns an extent left empty.
    fn adjust_free(
        &self,
        alloc: &mut FragmentDiskAlloc,
        page: PageAddr,
        delta: i64,
    ) -> Result<Option<crate::disk::tsman::ExtentId>> {
        let cur = alloc.page_free_bytes(page).unwrap_or(0) as i64;
        let new = (cur + delta).max(0) as u32;
        alloc.page_free_changed(&self.tsman, page, new, self.current_lsn())
    }

    /// Commit of an insert: writes `image` into the reserved page. Never fails for
    /// space; an I/O error reading the page is returned.
    pub fn insert_record(
        &self,
        alloc: &mut FragmentDiskAlloc,
        res: DiskReservation,
        image: &[u8],
    ) -> Result<DiskRef> {
        let page = match self.pgman.get(cache_addr(res.page), Intent::Write) {
            Ok(p) => p,
            Err(e) => {
                self.cancel_reservation(alloc, res);
                return Err(e);
            }
        };
        let (slot, used) = page.write(|b| {
            let before = rowpage::free_bytes(b);
            let slot = rowpage::insert(b, image);
            (slot, before - rowpage::free_bytes(b))
        });
        let Some(slot) = slot else {
            drop(page);
            self.cancel_reservation(alloc, res);
            return Err(codes::internal(format_args!(
                "reserved room for {} bytes missing on disk page {:?}",
                image.len(),
                res.page
            )));
        };
        let lsn = self.log(&UndoRecord::TupleAlloc {
            file_no: res.page.file_no,
            page_no: res.page.page_no,
            slot: slot as u32,
        });
        if let Ok(l) = lsn {
            page.set_lsn_dirty(l);
        }
        // Unpinned before the undo gate: a disk checkpoint holding the gate waits for
        // pages pinned for writing.
        drop(page);
        self.release_undo(res.undo_bytes);
        lsn?;
        // The reservation becomes the record (which may take a little less: a slot
        // entry reused).
        self.adjust_free(alloc, res.page, res.page_bytes as i64 - used as i64)?;
        disk_ref(res.page, slot)
    }

    /// Reads a record; `f` gets its image.
    pub fn read_record<R>(&self, r: DiskRef, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let page = self.pgman.get(cache_addr(page_of(r)), Intent::Read)?;
        page.read(|b| match rowpage::get(b, r.slot) {
            Some(img) => Ok(f(img)),
            None => Err(codes::corrupt_page(format_args!(
                "disk record {r:?} missing on its page"
            ))),
        })
    }

    /// The write-ahead sequence of changing an existing record: pins its page, takes
    /// its before-image into the undo record `undo` makes, appends it, applies
    /// `change` and stamps the page with the record's LSN, unpinning before returning
    /// (a disk checkpoint holding the undo gate waits for pages pinned for writing).
    /// Returns the page's gain in free bytes. On error the undo reservation is given
    /// back; on success it is the caller's to give back.
    fn change_record(
        &self,
        r: DiskRef,
        undo_bytes: u64,
        undo: impl FnOnce(Vec<u8>) -> UndoRecord,
        change: impl FnOnce(&mut [u8]),
    ) -> Result<i64> {
        let fail = |e| {
            self.release_undo(undo_bytes);
            Err(e)
        };
        let page = match self.pgman.get(cache_addr(page_of(r)), Intent::Write) {
            Ok(p) => p,
            Err(e) => return fail(e),
        };
        let Some(before) = page.read(|b| rowpage::get(b, r.slot).map(|x| x.to_vec())) else {
            drop(page);
            return fail(codes::corrupt_page(format_args!(
                "disk record {r:?} missing"
            )));
        };
        let lsn = match self.log(&undo(before)) {
            Ok(l) => l,
            Err(e) => {
                drop(page);
                return fail(e);
            }
        };
        let gained = page.write(|b| {
            let before = rowpage::free_bytes(b);
            change(b);
            rowpage::free_bytes(b) as i64 - before as i64
        });
        page.set_lsn_dirty(lsn);
        drop(page);
        Ok(gained)
    }

    /// Commit of an update whose image is not longer than the record: in place.
    pub fn update_record(
        &self,
        alloc: &mut FragmentDiskAlloc,
        r: DiskRef,
        image: &[u8],
        undo_bytes: u64,
    ) -> Result<()> {
        let gained = self.change_record(
            r,
            undo_bytes,
            |before| UndoRecord::TupleUpdate {
                file_no: r.file_no as u32,
                page_no: r.page_no,
                slot: r.slot as u32,
                before,
            },
            |b| {
                let ok = rowpage::update(b, r.slot, image);
                assert!(ok, "a disk image no longer than the record fits in place");
            },
        )?;
        self.release_undo(undo_bytes);
        self.adjust_free(alloc, page_of(r), gained).map(|_| ())
    }

    /// Commit of a delete (or the old copy of a moved record): frees the record; an
    /// extent left empty goes back to the tablespace (undo-logged first).
    pub fn free_record(
        &self,
        alloc: &mut FragmentDiskAlloc,
        r: DiskRef,
        undo_bytes: u64,
    ) -> Result<()> {
        let page_addr = page_of(r);
        let gained = self.change_record(
            r,
            undo_bytes,
            |before| UndoRecord::TupleFree {
                file_no: r.file_no as u32,
                page_no: r.page_no,
                slot: r.slot as u32,
                before,
            },
            |b| {
                rowpage::delete(b, r.slot);
            },
        )?;
        let empty_extent = self.adjust_free(alloc, page_addr, gained);
        let result = match empty_extent {
            Ok(Some(extent)) => {
                let owner = alloc.owner();
                let l = self.log(&UndoRecord::ExtentFree {
                    file_no: extent.file_no,
                    extent_no: extent.extent_no,
                    table_id: owner.table_id,
                    fragment_id: owner.fragment_id,
                });
                // Its cached pages go while the extent is still ours: once free,
                // another fragment may take it and format them.
                l.and_then(|l| {
                    self.discard_extent_pages(extent)?;
                    alloc.return_extent(&self.tsman, extent, l)
                })
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        self.release_undo(undo_bytes);
        result
    }

    /// DROP TABLE / TRUNCATE of a fragment: all its extents go back.
    pub fn release_fragment(&self, alloc: &mut FragmentDiskAlloc) -> Result<()> {
        for extent in alloc.extents() {
            self.discard_extent_pages(extent)?;
        }
        let lsn = self.current_lsn();
        alloc.release_all(&self.tsman, lsn).map(|_| ())
    }

    /// Drops the cached pages of an extent leaving its fragment, dirty or not: nothing
    /// on them is needed again (they are formatted before their next use), so they
    /// neither hold frames nor cost writes.
    pub(super) fn discard_extent_pages(&self, extent: crate::disk::tsman::ExtentId) -> Result<()> {
        let pages: Vec<CacheAddr> = self
            .tsman
            .extent_pages_of(extent)?
            .into_iter()
            .map(cache_addr)
            .collect();
        self.pgman.discard_pages(&pages).map(|_| ())
    }

    /// A fragment's allocator.
    pub fn fragment_alloc(table_id: u32, fragment_id: u32) -> FragmentDiskAlloc {
        FragmentDiskAlloc::new(ExtentOwner {
            table_id,
            fragment_id,
        })
    }
}
