//! Key operations of a fragment: primary-key reads, insert, update, write, delete at
//! prepare time, and commit and abort of a row's pending change. Commit and abort never
//! allocate pages: whatever a commit needs is allocated or reserved at prepare.
use super::*;

impl Fragment {
    /// Primary-key read.
    pub fn read(
        &mut self,
        txn: TxnId,
        key: &[u8],
        h32: u32,
        mode: LockMode,
        cols: &[usize],
        out: &mut Vec<Value>,
    ) -> Result<Step<RowRef>> {
        self.stats.key_reads += 1;
        let Some(row) = self.find(key, h32) else {
            self.stats.key_refs += 1;
            return Err(codes::tuple_not_found());
        };
        let held_before = self.holds(txn, row);
        let locked = match mode {
            LockMode::CommittedRead => false,
            LockMode::SimpleRead => {
                if !self.shared_ok(txn, row) {
                    return Ok(Step::Blocked);
                }
                false
            }
            LockMode::Read | LockMode::Exclusive => {
                if !self.try_lock(txn, row, mode == LockMode::Exclusive) {
                    self.tidy_lock(row);
                    return Ok(Step::Blocked);
                }
                true
            }
        };
        match self.decode(txn, row, cols, out) {
            Ok(true) => Ok(Step::Done(RowRef { row, locked })),
            r => {
                if locked {
                    self.undo_new_lock(txn, row, held_before);
                }
                r?;
                self.stats.key_refs += 1;
                Err(codes::tuple_not_found())
            }
        }
    }

    /// Every column of the row as `txn` sees it (None: not visible).
    pub(super) fn full_values(&self, txn: TxnId, row: RowId) -> Result<Option<Vec<Value>>> {
        let all: Vec<usize> = (0..self.table.columns.len()).collect();
        let mut v = Vec::with_capacity(all.len());
        Ok(self.decode(txn, row, &all, &mut v)?.then_some(v))
    }

    /// Locks `row` exclusively for a write; Ok(None) when blocked, Ok(Some(held_before)).
    pub(super) fn lock_for_write(&mut self, txn: TxnId, row: RowId) -> Option<bool> {
        let held_before = self.holds(txn, row);
        if !self.try_lock(txn, row, true) {
            self.tidy_lock(row);
            return None;
        }
        Some(held_before)
    }

    /// Inserts a complete row (values coerced, one per column). Error 630 when the key
    /// exists; 827/625/902 when DataMemory is full (nothing is left allocated then).
    pub fn insert(
        &mut self,
        txn: TxnId,
        key: &[u8],
        h32: u32,
        values: &[Value],
    ) -> Result<Step<RowId>> {
        self.stats.key_inserts += 1;
        if let Some(row) = self.find(key, h32) {
            let Some(held_before) = self.lock_for_write(txn, row) else {
                return Ok(Step::Blocked);
            };
            let r = match self.view(txn, row) {
                // Own pending delete: the insert replaces the row (as a full update).
                View::Gone => self.set_pending_image(txn, row, values, &[]),
                _ => Err(codes::tuple_already_exists()),
            };
            return match r {
                Ok(()) => Ok(Step::Done(row)),
                Err(e) => {
                    self.undo_new_lock(txn, row, held_before);
                    Err(e)
                }
            };
        }
        let row = self.alloc_row(values, ROW_ALLOC | ROW_LOCKED)?;
        if let Err(e) = self.hash.insert(&self.pool, h32, row) {
            self.free_row(row);
            return Err(e);
        }
        let reserved = match self.reserve_ordered(u64::MAX) {
            Ok(m) => m,
            Err(e) => {
                self.hash.remove(&self.pool, h32, row);
                self.free_row(row);
                return Err(e);
            }
        };
        let disk = match self.disk_prepare_insert(row, values) {
            Ok(d) => d,
            Err(e) => {
                self.unreserve_ordered(reserved);
                self.hash.remove(&self.pool, h32, row);
                self.free_row(row);
                return Err(e);
            }
        };
        let entry = self.locks.entry(row);
        entry.grant(txn, true);
        entry.pending = Some(Pending::Insert { reserved, disk });
        Ok(Step::Done(row))
    }

    /// Updates the given columns of an existing row (error 626 when absent).
    pub fn update(
        &mut self,
        txn: TxnId,
        key: &[u8],
        h32: u32,
        changes: &[(usize, Value)],
    ) -> Result<Step<RowId>> {
        self.stats.key_updates += 1;
        let Some(row) = self.find(key, h32) else {
            return Err(codes::tuple_not_found());
        };
        let Some(held_before) = self.lock_for_write(txn, row) else {
            return Ok(Step::Blocked);
        };
        let r = match self.full_values(txn, row) {
            Err(e) => Err(e),
            Ok(None) => Err(codes::tuple_not_found()),
            Ok(Some(mut values)) => {
                let heads = self.stored_heads_kept(changes);
                for (c, v) in changes {
                    values[*c] = v.clone();
                }
                self.set_pending_image(txn, row, &values, &heads)
            }
        };
        match r {
            Ok(()) => Ok(Step::Done(row)),
            Err(e) => {
                self.undo_new_lock(txn, row, held_before);
                Err(e)
            }
        }
    }

    /// Insert-or-update (NdbOperation::writeTuple): `changes` are applied to an existing
    /// row, `full` is inserted when there is none.
    pub fn write(
        &mut self,
        txn: TxnId,
        key: &[u8],
        h32: u32,
        changes: &[(usize, Value)],
        full: &[Value],
    ) -> Result<Step<RowId>> {
        self.stats.key_writes += 1;
        let Some(row) = self.find(key, h32) else {
            return self.insert(txn, key, h32, full);
        };
        let Some(held_before) = self.lock_for_write(txn, row) else {
            return Ok(Step::Blocked);
        };
        let r = match self.full_values(txn, row) {
            Err(e) => Err(e),
            Ok(None) => self.set_pending_image(txn, row, full, &[]),
            Ok(Some(mut values)) => {
                let heads = self.stored_heads_kept(changes);
                for (c, v) in changes {
                    values[*c] = v.clone();
                }
                self.set_pending_image(txn, row, &values, &heads)
            }
        };
        match r {
            Ok(()) => Ok(Step::Done(row)),
            Err(e) => {
                self.undo_new_lock(txn, row, held_before);
                Err(e)
            }
        }
    }

    /// Deletes a row at commit (error 626 when absent). Done(None) when the row was the
    /// transaction's own uncommitted insert, which is undone at once.
    pub fn delete(&mut self, txn: TxnId, key: &[u8], h32: u32) -> Result<Step<Option<RowId>>> {
        self.stats.key_deletes += 1;
        let Some(row) = self.find(key, h32) else {
            return Err(codes::tuple_not_found());
        };
        let Some(held_before) = self.lock_for_write(txn, row) else {
            return Ok(Step::Blocked);
        };
        if matches!(self.view(txn, row), View::Gone) {
            self.undo_new_lock(txn, row, held_before);
            return Err(codes::tuple_not_found());
        }
        let own_insert = matches!(
            self.locks.get(row).and_then(|l| l.pending.as_ref()),
            Some(Pending::Insert { .. })
        );
        // The undo for freeing the disk record, before anything changes.
        let disk_undo_bytes = if own_insert {
            0
        } else {
            match self.disk_prepare_delete(row) {
                Ok(u) => u,
                Err(e) => {
                    self.undo_new_lock(txn, row, held_before);
                    return Err(e);
                }
            }
        };
        let pending = self.locks.entry(row).pending.take();
        match pending {
            Some(Pending::Insert { reserved, disk }) => {
                self.unreserve_ordered(reserved);
                self.disk_cancel_insert(disk);
                self.hash.remove(&self.pool, h32, row);
                self.locks.remove(row);
                self.free_row(row);
                return Ok(Step::Done(None));
            }
            Some(Pending::Update {
                new_var,
                reserved,
                disk,
                ..
            }) => {
                if let Some(nv) = new_var {
                    self.var.free(&self.pool, nv);
                }
                self.unreserve_ordered(reserved);
                self.disk_cancel_change(disk);
            }
            Some(Pending::Delete { disk_undo_bytes }) => self.disk_cancel_delete(disk_undo_bytes),
            None => {}
        }
        self.locks.entry(row).pending = Some(Pending::Delete { disk_undo_bytes });
        Ok(Step::Done(Some(row)))
    }

    /// Makes `values` the pending after-image of a row locked exclusively by `txn`.
    /// On error the row's previous pending state is left exactly as it was.
    /// The BLOB/TEXT columns an update that sets `changes` keeps: their values read
    /// back from the row are stored heads (see `RowLayout::encode_row_keeping_heads`).
    /// Empty for a table without such columns.
    fn stored_heads_kept(&self, changes: &[(usize, Value)]) -> Vec<bool> {
        let cols = &self.table.columns;
        if !cols.iter().any(|c| c.ty.is_blob()) {
            return Vec::new();
        }
        let mut kept: Vec<bool> = cols.iter().map(|c| c.ty.is_blob()).collect();
        for (c, _) in changes {
            kept[*c] = false;
        }
        kept
    }

    /// `stored_heads`: see [`RowLayout::encode_row_keeping_heads`].
    pub(super) fn set_pending_image(
        &mut self,
        txn: TxnId,
        row: RowId,
        values: &[Value],
        stored_heads: &[bool],
    ) -> Result<()> {
        debug_assert!(
            self.locks
                .get(row)
                .is_some_and(|l| l.exclusive == Some(txn))
        );
        let table = self.table.clone();
        let layout = &table.layout;
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode_row_keeping_heads(values, stored_heads, &mut fixed, &mut var);
        if let Some(Pending::Insert { disk, .. }) =
            self.locks.get_mut(row).and_then(|l| l.pending.as_mut())
        {
            // The row is the transaction's own insert: rewrite it in place.
            let old_disk = disk.take();
            let new_disk = match &old_disk {
                Some(old) => match self.disk_reprepare_insert(row, values, old) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        self.put_insert_disk(row, old_disk);
                        return Err(e);
                    }
                },
                None => None,
            };
            if let Err(e) = self.rewrite_row(row, &fixed, &var) {
                match (old_disk, new_disk) {
                    (Some(old), Some(new)) if old.res != new.res => {
                        self.disk_cancel_insert(Some(new));
                        self.put_insert_disk(row, Some(old));
                    }
                    (old, _) => self.put_insert_disk(row, old),
                }
                return Err(e);
            }
            if let (Some(old), Some(new)) = (&old_disk, &new_disk)
                && old.res != new.res
            {
                self.disk_cancel_insert(old_disk);
            }
            self.put_insert_disk(row, new_disk);
            return Ok(());
        }
        let (old_new_var, old_reserved) = match self.locks.get(row).and_then(|l| l.pending.as_ref())
        {
            Some(Pending::Update {
                new_var, reserved, ..
            }) => (*new_var, *reserved),
            _ => (None, 0),
        };
        let new_disk = self.disk_prepare_change(row, values)?;
        // Which ordered indexes change key: compare with the committed row.
        let committed = self.fixed.get(row);
        let committed_var = var_of(layout, &self.var, committed);
        let mut changed = 0u64;
        for (i, d) in self.table.indexes.iter().enumerate() {
            if d.kind == IndexKind::OrderedIndex
                && layout.cmp_rows(&d.columns, (committed, committed_var), (&fixed, &var))
                    != std::cmp::Ordering::Equal
            {
                changed |= 1 << i;
            }
        }
        let grows = layout.has_var() && var.len() > committed_var.len();
        let newly = match self.reserve_ordered(changed & !old_reserved) {
            Ok(m) => m,
            Err(e) => {
                self.disk_cancel_change(new_disk);
                return Err(e);
            }
        };
        let mut new_var = old_new_var;
        if grows && new_var.is_none_or(|nv| self.var.get(nv).len() < var.len()) {
            match self.var.alloc(&self.pool, &var) {
                Some(nv) => {
                    if let Some(old) = new_var.replace(nv) {
                        self.var.free(&self.pool, old);
                    }
                }
                None => {
                    self.unreserve_ordered(newly);
                    self.disk_cancel_change(new_disk);
                    return Err(codes::out_of_data_memory());
                }
            }
        } else if !grows && let Some(old) = new_var.take() {
            self.var.free(&self.pool, old);
        }
        self.unreserve_ordered(old_reserved & !changed);
        let reserved = (old_reserved | newly) & changed;
        // The previous pending change's disk part gives way to the new one.
        match self.locks.entry(row).pending.take() {
            Some(Pending::Update { disk, .. }) => self.disk_cancel_change(disk),
            Some(Pending::Delete { disk_undo_bytes }) => self.disk_cancel_delete(disk_undo_bytes),
            Some(Pending::Insert { .. }) | None => {}
        }
        self.locks.entry(row).pending = Some(Pending::Update {
            fixed,
            var,
            new_var,
            reserved,
            disk: new_disk,
        });
        Ok(())
    }

    /// Puts the disk part back into the transaction's pending insert of `row`.
    fn put_insert_disk(&mut self, row: RowId, d: Option<Box<crate::txn::lock::DiskInsert>>) {
        if let Some(Some(Pending::Insert { disk, .. })) =
            self.locks.get_mut(row).map(|l| l.pending.as_mut())
        {
            *disk = d;
        }
    }

    /// Releases a lock taken by the current operation when the operation fails, unless
    /// the transaction held it before.
    pub(super) fn undo_new_lock(&mut self, txn: TxnId, row: RowId, held_before: bool) {
        if !held_before {
            self.release_lock(txn, row);
        }
    }

    pub(super) fn holds(&self, txn: TxnId, row: RowId) -> bool {
        self.locks.get(row).is_some_and(|l| l.holds(txn))
    }

    /// Rewrites an own uncommitted insert with new values.
    pub(super) fn rewrite_row(&mut self, row: RowId, fixed: &[u8], var: &[u8]) -> Result<()> {
        let layout = &self.table.layout;
        if layout.has_var() {
            let old = layout.var_ref(self.fixed.get(row)).unwrap_or(0);
            let r = if self.var.get(old).len() >= var.len() {
                self.var.shrink(old, var.len());
                self.var.get_mut(old).copy_from_slice(var);
                old
            } else {
                let nv = self
                    .var
                    .alloc(&self.pool, var)
                    .ok_or_else(codes::out_of_data_memory)?;
                self.var.free(&self.pool, old);
                nv
            };
            let f = self.fixed.get_mut(row);
            let h = header_of(f);
            f[4..].copy_from_slice(&fixed[4..]);
            set_header(f, h);
            layout.set_var_ref(f, r);
        } else {
            let f = self.fixed.get_mut(row);
            let h = header_of(f);
            f[4..].copy_from_slice(&fixed[4..]);
            set_header(f, h);
        }
        Ok(())
    }

    pub(super) fn alloc_row(&mut self, values: &[Value], header: u32) -> Result<RowId> {
        let layout = &self.table.layout;
        let (mut fixed, mut var) = (
            std::mem::take(&mut self.enc_fixed),
            std::mem::take(&mut self.enc_var),
        );
        layout.encode_row(values, &mut fixed, &mut var);
        let r = self.store_row(&fixed, &var, header);
        (self.enc_fixed, self.enc_var) = (fixed, var);
        r
    }

    pub(super) fn store_row(&mut self, fixed: &[u8], var: &[u8], header: u32) -> Result<RowId> {
        let layout = &self.table.layout;
        let vref = if layout.has_var() {
            Some(
                self.var
                    .alloc(&self.pool, var)
                    .ok_or_else(codes::out_of_data_memory)?,
            )
        } else {
            None
        };
        let Some(row) = self.fixed.alloc(&self.pool, header) else {
            if let Some(v) = vref {
                self.var.free(&self.pool, v);
            }
            return Err(codes::out_of_data_memory());
        };
        let f = self.fixed.get_mut(row);
        f[4..].copy_from_slice(&fixed[4..]);
        if let Some(v) = vref {
            layout.set_var_ref(f, v);
        }
        Ok(row)
    }

    pub(super) fn free_row(&mut self, row: RowId) {
        if let Some(v) = self.table.layout.var_ref(self.fixed.get(row)) {
            self.var.free(&self.pool, v);
        }
        self.fixed.free(&self.pool, row);
    }

    /// Reserves one future insert in each ordered index in `mask`; returns the mask
    /// actually reserved. All-or-nothing.
    pub(super) fn reserve_ordered(&mut self, mask: u64) -> Result<u64> {
        let mut done = 0u64;
        for (i, o) in self.ordered.iter_mut().enumerate() {
            if mask & (1 << i) == 0 {
                continue;
            }
            if let Some(o) = o {
                if let Err(e) = o.reserve(&self.pool, 1) {
                    for (j, o2) in self.ordered.iter_mut().enumerate() {
                        if done & (1 << j) != 0
                            && let Some(o2) = o2
                        {
                            o2.unreserve(1);
                        }
                    }
                    return Err(e);
                }
                done |= 1 << i;
            }
        }
        Ok(done)
    }

    pub(super) fn unreserve_ordered(&mut self, mask: u64) {
        for (i, o) in self.ordered.iter_mut().enumerate() {
            if mask & (1 << i) != 0
                && let Some(o) = o
            {
                o.unreserve(1);
            }
        }
    }

    /// Runs `f` on each ordered index in `mask` with a comparator over this fragment's rows.
    pub(super) fn with_ordered(
        &mut self,
        mask: u64,
        mut f: impl FnMut(
            &mut OrderedIndex,
            &PagePool,
            &mut dyn FnMut(RowId, RowId) -> std::cmp::Ordering,
        ),
    ) {
        let Fragment {
            table,
            fixed,
            var,
            ordered,
            pool,
            ..
        } = self;
        let layout = &table.layout;
        for (i, o) in ordered.iter_mut().enumerate() {
            if mask & (1 << i) == 0 {
                continue;
            }
            let Some(o) = o else { continue };
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
            f(o, pool, &mut cmp);
        }
    }

    pub(super) fn all_ordered_mask(&self) -> u64 {
        self.ordered
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_some())
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Commits `txn`'s change of `row` and releases its locks on it. Never allocates.
    pub fn commit_row(&mut self, txn: TxnId, row: RowId, gci: u32) {
        let Some(entry) = self.locks.get_mut(row) else {
            return;
        };
        let pending = if entry.exclusive == Some(txn) {
            entry.pending.take()
        } else {
            None
        };
        match pending {
            None => {}
            Some(Pending::Insert { reserved, disk }) => {
                {
                    let f = self.fixed.get_mut(row);
                    let h = header_of(f);
                    set_header(f, h & !ROW_ALLOC);
                    f[4..8].copy_from_slice(&gci.to_le_bytes());
                }
                self.disk_commit_insert(row, disk, gci);
                self.fixed.mark_changed(row, gci);
                self.lcp_counts.inserted += 1;
                self.with_ordered(reserved, |o, pool, cmp| {
                    let r = o.insert(pool, row, cmp);
                    assert!(
                        r.is_ok(),
                        "ordered index insert failed at commit despite a reservation"
                    );
                    o.unreserve(1);
                });
            }
            Some(Pending::Update {
                fixed,
                var,
                new_var,
                reserved,
                disk,
            }) => {
                self.with_ordered(reserved, |o, pool, cmp| {
                    let removed = o.remove(pool, row, cmp);
                    assert!(removed, "committed row missing from an ordered index");
                });
                let old_disk_ref = self.table.layout.disk_ref(self.fixed.get(row));
                let disk_ref = self.disk_commit_change(old_disk_ref, disk, gci);
                let layout = &self.table.layout;
                let old_var = layout.var_ref(self.fixed.get(row));
                let var_ref = match (old_var, new_var) {
                    (Some(old), Some(nv)) => {
                        // The entry may have been allocated for a larger image of an
                        // earlier operation of this transaction.
                        self.var.shrink(nv, var.len());
                        self.var.get_mut(nv).copy_from_slice(&var);
                        self.var.free(&self.pool, old);
                        Some(nv)
                    }
                    (Some(old), None) => {
                        self.var.shrink(old, var.len());
                        self.var.get_mut(old).copy_from_slice(&var);
                        Some(old)
                    }
                    _ => None,
                };
                {
                    let f = self.fixed.get_mut(row);
                    let h = header_of(f);
                    f[8..].copy_from_slice(&fixed[8..]);
                    f[4..8].copy_from_slice(&gci.to_le_bytes());
                    let version = (h >> ROW_VERSION_SHIFT).wrapping_add(1) & 0xFFFF;
                    set_header(
                        f,
                        (h & ((1 << ROW_VERSION_SHIFT) - 1)) | version << ROW_VERSION_SHIFT,
                    );
                    if let Some(r) = var_ref {
                        layout.set_var_ref(f, r);
                    }
                    // The after-image carries no disk reference: the row keeps its own.
                    layout.set_disk_ref(f, disk_ref);
                }
                self.fixed.mark_changed(row, gci);
                self.lcp_counts.updated += 1;
                self.with_ordered(reserved, |o, pool, cmp| {
                    let r = o.insert(pool, row, cmp);
                    assert!(
                        r.is_ok(),
                        "ordered index insert failed at commit despite a reservation"
                    );
                    o.unreserve(1);
                });
            }
            Some(Pending::Delete { disk_undo_bytes }) => {
                self.disk_commit_delete(row, disk_undo_bytes);
                let mask = self.all_ordered_mask();
                self.with_ordered(mask, |o, pool, cmp| {
                    let removed = o.remove(pool, row, cmp);
                    assert!(removed, "deleted row missing from an ordered index");
                });
                let h32 = self.row_hash(row);
                let removed = self.hash.remove(&self.pool, h32, row);
                assert!(removed, "deleted row missing from the hash index");
                self.locks.remove(row);
                self.fixed.mark_changed(row, gci);
                self.lcp_counts.deleted += 1;
                self.free_row(row);
                self.stats.commits += 1;
                return;
            }
        }
        self.stats.commits += 1;
        self.release_lock(txn, row);
    }

    /// Rolls back `txn`'s change of `row` and releases its locks on it.
    pub fn abort_row(&mut self, txn: TxnId, row: RowId) {
        let Some(entry) = self.locks.get_mut(row) else {
            return;
        };
        let pending = if entry.exclusive == Some(txn) {
            entry.pending.take()
        } else {
            None
        };
        match pending {
            Some(Pending::Insert { reserved, disk }) => {
                self.unreserve_ordered(reserved);
                self.disk_cancel_insert(disk);
                let h32 = self.row_hash(row);
                self.hash.remove(&self.pool, h32, row);
                self.locks.remove(row);
                self.free_row(row);
                return;
            }
            Some(Pending::Update {
                new_var,
                reserved,
                disk,
                ..
            }) => {
                if let Some(nv) = new_var {
                    self.var.free(&self.pool, nv);
                }
                self.unreserve_ordered(reserved);
                self.disk_cancel_change(disk);
            }
            Some(Pending::Delete { disk_undo_bytes }) => self.disk_cancel_delete(disk_undo_bytes),
            None => {}
        }
        self.release_lock(txn, row);
    }

    pub(super) fn release_lock(&mut self, txn: TxnId, row: RowId) {
        let empty = self
            .locks
            .get_mut(row)
            .is_none_or(|l: &mut RowLock| l.release(txn));
        if empty {
            self.locks.remove(row);
            let f = self.fixed.get_mut(row);
            let h = header_of(f);
            set_header(f, h & !ROW_LOCKED);
        }
    }

    /// Hash-index bits of a row's key.
    pub fn row_hash(&mut self, row: RowId) -> u32 {
        let layout = &self.table.layout;
        let f = self.fixed.get(row);
        layout.row_key(f, var_of(layout, &self.var, f), &mut self.scratch);
        index_hash(key_hash(&self.scratch))
    }
}
