//! Scans of a fragment (full scan by row id, ordered-index range scans, fetched in
//! batches under the fragment mutex) and building or dropping an ordered index.
use super::*;

impl Fragment {
    /// One batch of a full-fragment scan in row-id order, from `from`. Rows visible to
    /// `txn` are decoded (`cols`) into `out`. Returns the position to resume at (None at
    /// the end) or Blocked with the position of the row that must be waited for. A disk
    /// read error ends the batch with the error; the rows already in `out` (and their
    /// locks) stay the caller's.
    pub fn scan_batch(
        &mut self,
        txn: TxnId,
        mode: LockMode,
        from: RowId,
        max_rows: usize,
        cols: &[usize],
        out: &mut Vec<(RowRef, Vec<Value>)>,
    ) -> Result<Step<Option<RowId>>> {
        self.stats.scans += 1;
        let mut cur = from;
        let mut n = 0;
        while n < max_rows {
            let Some(row) = self.fixed.next_row(cur) else {
                return Ok(Step::Done(None));
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
                    let visible_committed = header_of(self.fixed.get(row)) & ROW_ALLOC == 0;
                    let own = self.locks.get(row).is_some_and(|l| l.holds(txn));
                    if visible_committed || own {
                        if !self.try_lock(txn, row, mode == LockMode::Exclusive) {
                            self.tidy_lock(row);
                            return Ok(Step::Blocked);
                        }
                        true
                    } else {
                        false
                    }
                }
            };
            let mut vals = Vec::with_capacity(cols.len());
            match self.decode(txn, row, cols, &mut vals) {
                Ok(true) => {
                    out.push((RowRef { row, locked }, vals));
                    n += 1;
                }
                Ok(false) => {}
                Err(e) => {
                    if locked {
                        self.undo_new_lock(txn, row, held_before);
                    }
                    return Err(e);
                }
            }
            // A locked row that decodes to nothing is the transaction's own pending
            // delete: its lock was taken before, nothing to return.
            cur = RowId(row.0 + 1);
        }
        self.stats.scan_rows_returned += n as u64;
        Ok(Step::Done(self.fixed.next_row(cur)))
    }

    /// One batch of an ordered-index scan. `low`/`high` are bounds as stored bytes of a
    /// prefix of the index columns with their inclusiveness; `resume` is the last row
    /// returned and its index key. Returns whether the scan reached its end. Disk read
    /// errors as in [`Fragment::scan_batch`].
    #[allow(clippy::too_many_arguments)]
    pub fn index_scan_batch(
        &mut self,
        txn: TxnId,
        mode: LockMode,
        index_pos: usize,
        low: Option<&(Vec<Option<Vec<u8>>>, bool)>,
        high: Option<&(Vec<Option<Vec<u8>>>, bool)>,
        descending: bool,
        resume: Option<&(RowId, Vec<Option<Vec<u8>>>)>,
        max_rows: usize,
        cols: &[usize],
        out: &mut Vec<(RowRef, Vec<Value>)>,
    ) -> Result<Step<bool>> {
        self.stats.scans += 1;
        let mut ids = Vec::with_capacity(max_rows.min(4096));
        let reached_end = {
            let Fragment {
                table,
                fixed,
                var,
                ordered,
                ..
            } = &*self;
            let layout = &table.layout;
            let icols = &table.indexes[index_pos].columns;
            let Some(Some(idx)) = ordered.get(index_pos) else {
                return Ok(Step::Done(true));
            };
            let row_of = |r: RowId| {
                let f = fixed.get(r);
                (f, var_of(layout, var, f))
            };
            let (first, last) = if descending { (high, low) } else { (low, high) };
            let start_key: Option<&Vec<Option<Vec<u8>>>> = match (resume, first) {
                (Some((_, key)), _) => Some(key),
                (None, Some((b, _))) => Some(b),
                (None, None) => None,
            };
            let mut start_cmp = |r: RowId| match start_key {
                Some(k) => layout.cmp_row_bound(icols, row_of(r), k),
                None => std::cmp::Ordering::Equal,
            };
            let start = match (resume, first) {
                (Some((last_row, _)), _) => Seek::After {
                    cmp: &mut start_cmp,
                    last: *last_row,
                },
                (None, Some((_, incl))) => Seek::Bound {
                    cmp: &mut start_cmp,
                    inclusive: *incl,
                },
                (None, None) => Seek::Start,
            };
            let mut stop = |r: RowId| match last {
                None => false,
                Some((b, incl)) => {
                    let o = layout.cmp_row_bound(icols, row_of(r), b);
                    if descending {
                        o == std::cmp::Ordering::Less || (o == std::cmp::Ordering::Equal && !incl)
                    } else {
                        o == std::cmp::Ordering::Greater
                            || (o == std::cmp::Ordering::Equal && !incl)
                    }
                }
            };
            let dir = if descending {
                ScanDirection::Descending
            } else {
                ScanDirection::Ascending
            };
            idx.collect(dir, start, max_rows, &mut stop, &mut ids)
        };
        for row in ids.iter().copied() {
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
            let mut vals = Vec::with_capacity(cols.len());
            match self.decode(txn, row, cols, &mut vals) {
                Ok(true) => out.push((RowRef { row, locked }, vals)),
                Ok(false) => {}
                Err(e) => {
                    if locked {
                        self.undo_new_lock(txn, row, held_before);
                    }
                    return Err(e);
                }
            }
        }
        self.stats.scan_rows_returned += ids.len() as u64;
        Ok(Step::Done(reached_end))
    }

    /// Stored bytes of the index columns of a row (the resume key of index scans).
    pub fn index_key_of(&self, index_pos: usize, row: RowId) -> Vec<Option<Vec<u8>>> {
        let layout = &self.table.layout;
        let f = self.fixed.get(row);
        let v = var_of(layout, &self.var, f);
        self.table.indexes[index_pos]
            .columns
            .iter()
            .map(|&c| layout.col_bytes(c, f, v).map(|b| b.to_vec()))
            .collect()
    }
}

impl Fragment {
    /// Adds the last index of `def` (the table's new definition) and builds it from the
    /// committed rows. On error nothing changes.
    pub fn add_index(&mut self, def: Arc<TableDef>) -> Result<()> {
        let pos = def.indexes.len() - 1;
        assert_eq!(
            pos,
            self.ordered.len(),
            "add_index expects exactly one new index"
        );
        let mut built = None;
        if def.indexes[pos].kind == IndexKind::OrderedIndex {
            let mut o = OrderedIndex::new();
            let layout = &def.layout;
            let cols = &def.indexes[pos].columns;
            let (fixed, var) = (&self.fixed, &self.var);
            let mut cmp = |a: RowId, b: RowId| {
                let fa = fixed.get(a);
                let fb = fixed.get(b);
                layout.cmp_rows(
                    cols,
                    (fa, var_of(layout, var, fa)),
                    (fb, var_of(layout, var, fb)),
                )
            };
            let mut cur = RowId(0);
            while let Some(r) = fixed.next_row(cur) {
                if header_of(fixed.get(r)) & ROW_ALLOC == 0
                    && let Err(e) = o.insert(&self.pool, r, &mut cmp)
                {
                    o.free_all(&self.pool);
                    return Err(e);
                }
                cur = RowId(r.0 + 1);
            }
            built = Some(o);
        }
        self.ordered.push(built);
        self.table = def;
        Ok(())
    }

    /// Undoes a successful [`Fragment::add_index`] (when another fragment failed).
    pub fn remove_last_index(&mut self, old_def: Arc<TableDef>) {
        if self.ordered.len() > old_def.indexes.len()
            && let Some(Some(mut o)) = self.ordered.pop()
        {
            o.free_all(&self.pool);
        }
        self.table = old_def;
    }

    /// Drops index `pos`; `def` is the table's definition without it.
    pub fn drop_index(&mut self, pos: usize, def: Arc<TableDef>) {
        if pos < self.ordered.len()
            && let Some(mut o) = self.ordered.remove(pos)
        {
            o.free_all(&self.pool);
        }
        self.table = def;
    }
}
