//! Bulk paths of a fragment: software-pipelined committed reads of many keys, and
//! committed inserts for bulk loads that hold every written fragment's mutex.

use super::*;

/// Receives `(slot, stored row)` of each committed row a batch finds.
pub type RowSink<'a> = dyn FnMut(u32, StoredRow<'_>) + 'a;

/// One key of a batched committed read: hash, key bytes range in the batch's key
/// buffer, and the output slot.
#[derive(Debug, Clone, Copy)]
pub struct BatchKey {
    pub h32: u32,
    pub key_start: u32,
    pub key_len: u32,
    pub slot: u32,
}

impl Fragment {
    /// Committed reads of many keys, software-pipelined: the hash bucket of key i+2D,
    /// the fixed part of key i+D and the var part of key i are loaded while key i is
    /// handed to `sink(slot, stored row)` in its stored form (callers decode the columns
    /// they want, or copy them in their own format). With `with_disk` the rows of a
    /// table with disk columns come with their disk images (read through the page
    /// cache); the first disk read error is returned after the batch (the rows that
    /// failed are not visited).
    pub fn visit_committed_batch(
        &mut self,
        keys: &[BatchKey],
        key_buf: &[u8],
        with_disk: bool,
        sink: &mut RowSink<'_>,
    ) -> Result<()> {
        const D: usize = 8;
        let n = keys.len();
        self.stats.key_reads += n as u64;
        let mut rows = std::mem::take(&mut self.batch_rows);
        rows.clear();
        rows.resize(n, None);
        let table = self.table.clone();
        let layout = &table.layout;
        let has_var = layout.has_var();
        let key_of =
            |k: &BatchKey| &key_buf[k.key_start as usize..(k.key_start + k.key_len) as usize];
        let mut failed = None;
        // Five stages, D keys apart: bucket, row, var directory word, var data, decode.
        for i in 0..n + 4 * D {
            if i < n {
                self.hash.prefetch(keys[i].h32);
            }
            if i >= D && i - D < n {
                // First candidate with an equal hash; start loading its row.
                let j = i - D;
                let mut cand = None;
                self.hash.find(keys[j].h32, |r| {
                    cand = Some(r);
                    true
                });
                if let Some(r) = cand {
                    self.fixed.prefetch(r);
                }
                rows[j] = cand;
            }
            if i >= 2 * D && i - 2 * D < n {
                // Verify the key (a hash collision falls back to a full find); start
                // loading the var part's directory word.
                let j = i - 2 * D;
                if let Some(r) = rows[j] {
                    let key = key_of(&keys[j]);
                    let f = self.fixed.get(r);
                    let ok = match layout.pk_fixed_slice {
                        Some((off, size)) => crate::schema::layout::fixed_key_eq(
                            &f[off as usize..(off + size) as usize],
                            key,
                        ),
                        None => layout.row_key_eq(
                            f,
                            var_of(layout, &self.var, f),
                            key,
                            &mut self.scratch,
                        ),
                    };
                    rows[j] = if ok {
                        Some(r)
                    } else {
                        self.find(key, keys[j].h32)
                    };
                    if let (true, Some(r)) = (has_var, rows[j])
                        && let Some(v) = layout.var_ref(self.fixed.get(r))
                    {
                        self.var.prefetch_dir(v);
                    }
                }
            }
            if has_var
                && i >= 3 * D
                && i - 3 * D < n
                && let Some(r) = rows[i - 3 * D]
                && let Some(v) = layout.var_ref(self.fixed.get(r))
            {
                self.var.prefetch(v);
            }
            if i >= 4 * D {
                let j = i - 4 * D;
                if let Some(r) = rows[j] {
                    let f = self.fixed.get(r);
                    if header_of(f) & ROW_ALLOC == 0 {
                        let v = var_of(layout, &self.var, f);
                        match (&self.disk, with_disk) {
                            (Some(d), true) => {
                                let read = d.read_committed(r, layout.disk_ref(f), |disk| {
                                    sink(
                                        keys[j].slot,
                                        StoredRow {
                                            fixed: f,
                                            var: v,
                                            disk,
                                        },
                                    )
                                });
                                if let Err(e) = read {
                                    failed.get_or_insert(e);
                                }
                            }
                            _ => sink(keys[j].slot, StoredRow::memory(f, v)),
                        }
                    }
                } else {
                    self.stats.key_refs += 1;
                }
            }
        }
        self.batch_rows = rows;
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Result of [`Fragment::insert_committed`].
#[derive(Debug, PartialEq, Eq)]
pub enum DirectInsert {
    Inserted(RowId),
    /// The key belongs to a row another transaction has locked: use the locking path.
    Conflict,
}

impl Fragment {
    /// Inserts a row as committed at once, for bulk loads that hold the mutexes of every
    /// fragment they write (so no other transaction can see a partial batch). Error 630
    /// when the key exists; DataMemory errors leave nothing allocated.
    pub fn insert_committed(
        &mut self,
        key: &[u8],
        h32: u32,
        values: &[Value],
        gci: u32,
    ) -> Result<DirectInsert> {
        self.stats.key_inserts += 1;
        if let Some(conflict) = self.existing_for_insert(key, h32)? {
            return Ok(conflict);
        }
        let row = self.alloc_row(values, 0)?;
        let mut image = std::mem::take(&mut self.enc_disk);
        let table = self.table.clone();
        table.layout.encode_disk(values, row.0, gci, &mut image);
        let r = self.complete_committed_insert(row, h32, &image, gci);
        self.enc_disk = image;
        r.map(|()| DirectInsert::Inserted(row))
    }

    /// Inserts a row as committed from its stored image (redo replay: the parts as a
    /// commit stored them, so nothing is decoded and encoded again — a BLOB column's
    /// head stays a head). The key must not exist.
    pub(super) fn insert_committed_image(
        &mut self,
        key: &[u8],
        h32: u32,
        fixed: &[u8],
        var: &[u8],
        disk: &[u8],
        gci: u32,
    ) -> Result<RowId> {
        if self.existing_for_insert(key, h32)?.is_some() {
            return Err(codes::internal("redo replay: the replayed row is locked"));
        }
        let row = self.store_row(fixed, var, 0)?;
        let mut image = std::mem::take(&mut self.enc_disk);
        image.clear();
        if self.disk.is_some() {
            image.extend_from_slice(disk);
            if image.len() < 8 {
                self.free_row(row);
                self.enc_disk = image;
                return Err(codes::corrupt_page(
                    "redo replay: a disk image without header",
                ));
            }
            image[0..4].copy_from_slice(&row.0.to_le_bytes());
            image[4..8].copy_from_slice(&gci.to_le_bytes());
        }
        let r = self.complete_committed_insert(row, h32, &image, gci);
        self.enc_disk = image;
        r.map(|()| row)
    }

    /// None when `key` is free; a conflict (a locked row) or error 630 otherwise.
    fn existing_for_insert(&mut self, key: &[u8], h32: u32) -> Result<Option<DirectInsert>> {
        match self.find(key, h32) {
            None => Ok(None),
            Some(row) if header_of(self.fixed.get(row)) & (ROW_LOCKED | ROW_ALLOC) != 0 => {
                Ok(Some(DirectInsert::Conflict))
            }
            Some(_) => Err(codes::tuple_already_exists()),
        }
    }

    /// The rest of a committed insert of the allocated `row`: hash index, disk record
    /// (`disk_image`, with the row id and GCI in its header; empty without disk
    /// columns), ordered indexes, GCI stamp. On error the row is gone again.
    fn complete_committed_insert(
        &mut self,
        row: RowId,
        h32: u32,
        disk_image: &[u8],
        gci: u32,
    ) -> Result<()> {
        if let Err(e) = self.hash.insert(&self.pool, h32, row) {
            self.free_row(row);
            return Err(e);
        }
        if let Err(e) = self.disk_insert_image(row, disk_image) {
            self.hash.remove(&self.pool, h32, row);
            self.free_row(row);
            return Err(e);
        }
        let mask = self.all_ordered_mask();
        let mut failed = None;
        let mut done = 0u64;
        {
            let Fragment {
                table,
                fixed,
                var,
                ordered,
                pool,
                ..
            } = &mut *self;
            let layout = &table.layout;
            for (i, o) in ordered.iter_mut().enumerate() {
                let Some(o) = o else { continue };
                if mask & (1 << i) == 0 {
                    continue;
                }
                let cols = &table.indexes[i].columns;
                let mut cmp = |a: RowId, b: RowId| {
                    let fa = fixed.get(a);
                    let fb = fixed.get(b);
                    layout.cmp_rows(
                        cols,
                        (fa, var_of(layout, var, fa)),
                        (fb, var_of(layout, var, fb)),
                    )
                };
                // Reserve first: the stock reserved by other transactions' pending
                // inserts must stay theirs.
                let r = o.reserve(pool, 1).and_then(|()| {
                    let r = o.insert(pool, row, &mut cmp);
                    o.unreserve(1);
                    r
                });
                if let Err(e) = r {
                    failed = Some(e);
                    break;
                }
                done |= 1 << i;
            }
        }
        if let Some(e) = failed {
            self.with_ordered(done, |o, pool, cmp| {
                o.remove(pool, row, cmp);
            });
            self.disk_free_now(row);
            self.hash.remove(&self.pool, h32, row);
            self.free_row(row);
            return Err(e);
        }
        self.fixed.get_mut(row)[4..8].copy_from_slice(&gci.to_le_bytes());
        self.fixed.mark_changed(row, gci);
        self.lcp_counts.inserted += 1;
        self.stats.commits += 1;
        Ok(())
    }

    /// Removes a row inserted by [`Fragment::insert_committed`] in a batch that failed
    /// later (the batch still holds the fragment's mutex, so nobody saw it).
    pub fn undo_insert_committed(&mut self, row: RowId, h32: u32) {
        let mask = self.all_ordered_mask();
        self.with_ordered(mask, |o, pool, cmp| {
            let removed = o.remove(pool, row, cmp);
            assert!(removed, "undone row missing from an ordered index");
        });
        let removed = self.hash.remove(&self.pool, h32, row);
        assert!(removed, "undone row missing from the hash index");
        self.disk_free_now(row);
        self.free_row(row);
    }
}
