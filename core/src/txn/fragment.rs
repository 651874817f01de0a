//! A fragment replica: one partition of one table on one data node (DBLQH + DBTUP +
//! DBACC + DBTUX for that partition).
//!
//! The fragment owns its fixed and var pages, its hash index, its ordered indexes and
//! its lock table. It is driven by the transaction coordinator through
//! [`FragmentCell`], whose mutex makes the fragment single-owner: whoever holds the
//! mutex is the fragment's LDM thread for that moment (work runs on the caller's thread;
//! no per-row thread hand-off). Operations that meet a conflicting lock return
//! [`Step::Blocked`]; the caller waits on the cell's condition variable, which every
//! lock release signals.
//!
//! Invariants:
//! - rows in pages hold committed values, except rows with `ROW_ALLOC` (an uncommitted
//!   insert, visible only to its inserter);
//! - a row has `ROW_LOCKED` iff it has a lock-table entry;
//! - the hash index holds every row of the fragment (committed or being inserted);
//! - each ordered index holds exactly the committed rows (changes apply at commit, with
//!   node space reserved at prepare so that commit never fails);
//! - commit and abort never allocate pages.
//!
//! Lock order: fragment mutex, then the page pool's mutex (leaf).

use super::lock::{LockMode, LockTable, Pending, RowLock, TxnId};
use crate::error::{Result, codes};
use crate::index::{HashIndex, OrderedIndex, ScanDirection, Seek};
use crate::schema::layout::{RowLayout, index_hash, key_hash};
use crate::schema::{IndexKind, TableDef, Value};
use crate::storage::fixed::{ROW_ALLOC, ROW_LOCKED, ROW_VERSION_SHIFT};
use crate::storage::{FixedPages, PAGE_SIZE, PagePool, RowId, VarPages};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

/// Outcome of a step that may meet a lock held by another transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<T> {
    Done(T),
    Blocked,
}

/// A fragment with the mutex and condition variable that serialise access to it.
pub struct FragmentCell {
    pub state: Mutex<Fragment>,
    pub lock_released: Condvar,
    /// Data node holding this replica.
    pub node_id: u32,
}

impl FragmentCell {
    pub fn new(fragment: Fragment, node_id: u32) -> FragmentCell {
        FragmentCell {
            state: Mutex::new(fragment),
            lock_released: Condvar::new(),
            node_id,
        }
    }
}

/// Counters per fragment (ndbinfo.operations_per_fragment).
#[derive(Debug, Default, Clone)]
pub struct FragStats {
    pub key_reads: u64,
    pub key_inserts: u64,
    pub key_updates: u64,
    pub key_writes: u64,
    pub key_deletes: u64,
    pub key_refs: u64,
    pub scans: u64,
    pub scan_rows_returned: u64,
    pub commits: u64,
}

/// Memory use of a fragment (ndbinfo.memory_per_fragment).
#[derive(Debug, Default, Clone)]
pub struct FragMemory {
    pub fixed_pages: u32,
    pub fixed_slot_size: u32,
    pub fixed_rows: u64,
    pub fixed_free_slots: u64,
    pub var_pages: u32,
    pub var_entries: u64,
    pub var_free_bytes: u64,
    pub hash_pages: u32,
    /// (index name, pages, entries) per ordered index.
    pub ordered: Vec<(String, u32, u64)>,
}

/// Read result of a row: where it is and whether a lock was kept for the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRef {
    pub row: RowId,
    pub locked: bool,
}

pub struct Fragment {
    pub table: Arc<TableDef>,
    pub partition: u32,
    pool: Arc<PagePool>,
    fixed: FixedPages,
    var: VarPages,
    hash: HashIndex,
    /// Parallel to `table.indexes`; Some for ordered indexes.
    ordered: Vec<Option<OrderedIndex>>,
    locks: LockTable,
    scratch: Vec<u8>,
    /// Reused by batched reads (no allocation per batch).
    batch_rows: Vec<Option<RowId>>,
    /// Reused row encoding buffers of inserts.
    enc_fixed: Vec<u8>,
    enc_var: Vec<u8>,
    pub stats: FragStats,
}

#[inline]
fn var_of<'a>(layout: &RowLayout, var: &'a VarPages, fixed: &[u8]) -> &'a [u8] {
    match layout.var_ref(fixed) {
        Some(r) => var.get(r),
        None => &[],
    }
}

#[inline]
fn header_of(fixed: &[u8]) -> u32 {
    u32::from_le_bytes([fixed[0], fixed[1], fixed[2], fixed[3]])
}

#[inline]
fn set_header(fixed: &mut [u8], h: u32) {
    fixed[0..4].copy_from_slice(&h.to_le_bytes());
}

/// Which view of a row a transaction gets.
enum View {
    /// The committed row in pages (or the transaction's own uncommitted insert).
    Row,
    /// The transaction's own after-image.
    Image,
    /// Deleted by the transaction itself, or an uncommitted insert of another.
    Gone,
}

impl Fragment {
    pub fn new(table: Arc<TableDef>, partition: u32, pool: Arc<PagePool>) -> Fragment {
        let fixed = FixedPages::new(table.layout.fixed_size.max(8));
        let ordered = table
            .indexes
            .iter()
            .map(|i| (i.kind == IndexKind::OrderedIndex).then(OrderedIndex::new))
            .collect();
        Fragment {
            table,
            partition,
            pool,
            fixed,
            var: VarPages::new(),
            hash: HashIndex::new(),
            ordered,
            locks: LockTable::default(),
            scratch: Vec::new(),
            batch_rows: Vec::new(),
            enc_fixed: Vec::new(),
            enc_var: Vec::new(),
            stats: FragStats::default(),
        }
    }

    pub fn rows(&self) -> u64 {
        self.fixed.rows()
    }

    pub fn lock_count(&self) -> usize {
        self.locks.len()
    }

    pub fn memory(&self) -> FragMemory {
        FragMemory {
            fixed_pages: self.fixed.pages(),
            fixed_slot_size: self.fixed.slot_size(),
            fixed_rows: self.fixed.rows(),
            fixed_free_slots: self.fixed.free_slots(),
            var_pages: self.var.pages(),
            var_entries: self.var.entries(),
            var_free_bytes: self.var.free_bytes(),
            hash_pages: self.hash.pages(),
            ordered: self
                .table
                .indexes
                .iter()
                .zip(&self.ordered)
                .filter_map(|(d, o)| o.as_ref().map(|o| (d.name.clone(), o.pages(), o.len())))
                .collect(),
        }
    }

    /// Locates a row by key bytes.
    #[inline]
    pub fn find(&mut self, key: &[u8], h32: u32) -> Option<RowId> {
        let (fixed, var, layout, scratch) = (
            &self.fixed,
            &self.var,
            &self.table.layout,
            &mut self.scratch,
        );
        self.hash.find(h32, |r| {
            let f = fixed.get(r);
            layout.row_key_eq(f, var_of(layout, var, f), key, scratch)
        })
    }

    /// Prefetch hint for a coming lookup of this hash.
    #[inline]
    pub fn prefetch(&self, h32: u32) {
        self.hash.prefetch(h32);
    }

    fn view(&self, txn: TxnId, row: RowId) -> View {
        let f = self.fixed.get(row);
        let h = header_of(f);
        if h & ROW_LOCKED != 0
            && let Some(l) = self.locks.get(row)
        {
            match l.pending_of(txn) {
                Some(Pending::Update { .. }) => return View::Image,
                Some(Pending::Delete) => return View::Gone,
                Some(Pending::Insert { .. }) => return View::Row,
                None => {}
            }
        }
        if h & ROW_ALLOC != 0 {
            View::Gone
        } else {
            View::Row
        }
    }

    /// Decodes the columns `cols` of the row as `txn` sees it into `out`.
    fn decode(&self, txn: TxnId, row: RowId, cols: &[usize], out: &mut Vec<Value>) -> bool {
        let layout = &self.table.layout;
        match self.view(txn, row) {
            View::Gone => false,
            View::Row => {
                let f = self.fixed.get(row);
                let v = var_of(layout, &self.var, f);
                out.extend(cols.iter().map(|&c| layout.get(c, f, v)));
                true
            }
            View::Image => {
                let Some(Some(Pending::Update { fixed, var, .. })) =
                    self.locks.get(row).map(|l| l.pending.as_ref())
                else {
                    return false;
                };
                out.extend(cols.iter().map(|&c| layout.get(c, fixed, var)));
                true
            }
        }
    }

    /// Decodes the committed view (for committed reads outside any transaction).
    fn decode_into(&self, row: RowId, cols: &[usize], out: &mut [Value]) -> bool {
        let f = self.fixed.get(row);
        if header_of(f) & ROW_ALLOC != 0 {
            return false;
        }
        let layout = &self.table.layout;
        let v = var_of(layout, &self.var, f);
        for (o, &c) in out.iter_mut().zip(cols) {
            layout.get_into(c, f, v, o);
        }
        true
    }

    /// Tries to take a lock; `None` when it conflicts.
    fn try_lock(&mut self, txn: TxnId, row: RowId, exclusive: bool) -> bool {
        let entry = self.locks.entry(row);
        if !entry.compatible(txn, exclusive) {
            return false;
        }
        entry.grant(txn, exclusive);
        let f = self.fixed.get_mut(row);
        let h = header_of(f);
        set_header(f, h | ROW_LOCKED);
        true
    }

    /// Whether `txn` could read the row with a shared lock now (for SimpleRead).
    fn shared_ok(&self, txn: TxnId, row: RowId) -> bool {
        self.locks.get(row).is_none_or(|l| l.compatible(txn, false))
    }

    /// Drops an empty lock entry (after a failed try that created it).
    fn tidy_lock(&mut self, row: RowId) {
        if self
            .locks
            .get(row)
            .is_some_and(|l| l.exclusive.is_none() && l.shared.is_empty() && l.pending.is_none())
        {
            self.locks.remove(row);
            let f = self.fixed.get_mut(row);
            let h = header_of(f);
            set_header(f, h & !ROW_LOCKED);
        }
    }

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
        if !self.decode(txn, row, cols, out) {
            self.stats.key_refs += 1;
            if locked {
                self.undo_new_lock(txn, row, held_before);
            }
            return Err(codes::tuple_not_found());
        }
        Ok(Step::Done(RowRef { row, locked }))
    }

    fn full_values(&self, txn: TxnId, row: RowId) -> Option<Vec<Value>> {
        let all: Vec<usize> = (0..self.table.columns.len()).collect();
        let mut v = Vec::with_capacity(all.len());
        self.decode(txn, row, &all, &mut v).then_some(v)
    }

    /// Locks `row` exclusively for a write; Ok(None) when blocked, Ok(Some(held_before)).
    fn lock_for_write(&mut self, txn: TxnId, row: RowId) -> Option<bool> {
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
                View::Gone => self.set_pending_image(txn, row, values),
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
        let entry = self.locks.entry(row);
        entry.grant(txn, true);
        entry.pending = Some(Pending::Insert { reserved });
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
            None => Err(codes::tuple_not_found()),
            Some(mut values) => {
                for (c, v) in changes {
                    values[*c] = v.clone();
                }
                self.set_pending_image(txn, row, &values)
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
            None => self.set_pending_image(txn, row, full),
            Some(mut values) => {
                for (c, v) in changes {
                    values[*c] = v.clone();
                }
                self.set_pending_image(txn, row, &values)
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
        let pending = self.locks.entry(row).pending.take();
        match pending {
            Some(Pending::Insert { reserved }) => {
                self.unreserve_ordered(reserved);
                self.hash.remove(&self.pool, h32, row);
                self.locks.remove(row);
                self.free_row(row);
                return Ok(Step::Done(None));
            }
            Some(Pending::Update {
                new_var, reserved, ..
            }) => {
                if let Some(nv) = new_var {
                    self.var.free(&self.pool, nv);
                }
                self.unreserve_ordered(reserved);
            }
            Some(Pending::Delete) | None => {}
        }
        self.locks.entry(row).pending = Some(Pending::Delete);
        Ok(Step::Done(Some(row)))
    }

    /// Makes `values` the pending after-image of a row locked exclusively by `txn`.
    /// On error the row's previous pending state is left exactly as it was.
    fn set_pending_image(&mut self, txn: TxnId, row: RowId, values: &[Value]) -> Result<()> {
        debug_assert!(
            self.locks
                .get(row)
                .is_some_and(|l| l.exclusive == Some(txn))
        );
        let layout = &self.table.layout;
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode_row(values, &mut fixed, &mut var);
        if let Some(Pending::Insert { .. }) = self.locks.get(row).and_then(|l| l.pending.as_ref()) {
            // The row is the transaction's own insert: rewrite it in place.
            return self.rewrite_row(row, &fixed, &var);
        }
        let (old_new_var, old_reserved) = match self.locks.get(row).and_then(|l| l.pending.as_ref())
        {
            Some(Pending::Update {
                new_var, reserved, ..
            }) => (*new_var, *reserved),
            _ => (None, 0),
        };
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
        let newly = self.reserve_ordered(changed & !old_reserved)?;
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
                    return Err(codes::out_of_data_memory());
                }
            }
        } else if !grows && let Some(old) = new_var.take() {
            self.var.free(&self.pool, old);
        }
        self.unreserve_ordered(old_reserved & !changed);
        let reserved = (old_reserved | newly) & changed;
        self.locks.entry(row).pending = Some(Pending::Update {
            fixed,
            var,
            new_var,
            reserved,
        });
        Ok(())
    }

    /// Releases a lock taken by the current operation when the operation fails, unless
    /// the transaction held it before.
    fn undo_new_lock(&mut self, txn: TxnId, row: RowId, held_before: bool) {
        if !held_before {
            self.release_lock(txn, row);
        }
    }

    fn holds(&self, txn: TxnId, row: RowId) -> bool {
        self.locks.get(row).is_some_and(|l| l.holds(txn))
    }

    /// Rewrites an own uncommitted insert with new values.
    fn rewrite_row(&mut self, row: RowId, fixed: &[u8], var: &[u8]) -> Result<()> {
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

    fn alloc_row(&mut self, values: &[Value], header: u32) -> Result<RowId> {
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

    fn store_row(&mut self, fixed: &[u8], var: &[u8], header: u32) -> Result<RowId> {
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

    fn free_row(&mut self, row: RowId) {
        if let Some(v) = self.table.layout.var_ref(self.fixed.get(row)) {
            self.var.free(&self.pool, v);
        }
        self.fixed.free(&self.pool, row);
    }

    /// Reserves one future insert in each ordered index in `mask`; returns the mask
    /// actually reserved. All-or-nothing.
    fn reserve_ordered(&mut self, mask: u64) -> Result<u64> {
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

    fn unreserve_ordered(&mut self, mask: u64) {
        for (i, o) in self.ordered.iter_mut().enumerate() {
            if mask & (1 << i) != 0
                && let Some(o) = o
            {
                o.unreserve(1);
            }
        }
    }

    /// Runs `f` on each ordered index in `mask` with a comparator over this fragment's rows.
    fn with_ordered(
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

    fn all_ordered_mask(&self) -> u64 {
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
            Some(Pending::Insert { reserved }) => {
                {
                    let f = self.fixed.get_mut(row);
                    let h = header_of(f);
                    set_header(f, h & !ROW_ALLOC);
                    f[4..8].copy_from_slice(&gci.to_le_bytes());
                }
                self.fixed.mark_changed(row, gci);
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
            }) => {
                self.with_ordered(reserved, |o, pool, cmp| {
                    let removed = o.remove(pool, row, cmp);
                    assert!(removed, "committed row missing from an ordered index");
                });
                let layout = &self.table.layout;
                let old_var = layout.var_ref(self.fixed.get(row));
                let var_ref = match (old_var, new_var) {
                    (Some(old), Some(nv)) => {
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
                }
                self.fixed.mark_changed(row, gci);
                self.with_ordered(reserved, |o, pool, cmp| {
                    let r = o.insert(pool, row, cmp);
                    assert!(
                        r.is_ok(),
                        "ordered index insert failed at commit despite a reservation"
                    );
                    o.unreserve(1);
                });
            }
            Some(Pending::Delete) => {
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
            Some(Pending::Insert { reserved }) => {
                self.unreserve_ordered(reserved);
                let h32 = self.row_hash(row);
                self.hash.remove(&self.pool, h32, row);
                self.locks.remove(row);
                self.free_row(row);
                return;
            }
            Some(Pending::Update {
                new_var, reserved, ..
            }) => {
                if let Some(nv) = new_var {
                    self.var.free(&self.pool, nv);
                }
                self.unreserve_ordered(reserved);
            }
            Some(Pending::Delete) | None => {}
        }
        self.release_lock(txn, row);
    }

    fn release_lock(&mut self, txn: TxnId, row: RowId) {
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
    pub fn row_hash_pub(&mut self, row: RowId) -> u32 {
        self.row_hash(row)
    }

    fn row_hash(&mut self, row: RowId) -> u32 {
        let layout = &self.table.layout;
        let f = self.fixed.get(row);
        layout.row_key(f, var_of(layout, &self.var, f), &mut self.scratch);
        index_hash(key_hash(&self.scratch))
    }

    /// One batch of a full-fragment scan in row-id order, from `from`. Rows visible to
    /// `txn` are decoded (`cols`) into `out`. Returns the position to resume at (None at
    /// the end) or Blocked with the position of the row that must be waited for.
    pub fn scan_batch(
        &mut self,
        txn: TxnId,
        mode: LockMode,
        from: RowId,
        max_rows: usize,
        cols: &[usize],
        out: &mut Vec<(RowRef, Vec<Value>)>,
    ) -> Step<Option<RowId>> {
        self.stats.scans += 1;
        let mut cur = from;
        let mut n = 0;
        while n < max_rows {
            let Some(row) = self.fixed.next_row(cur) else {
                return Step::Done(None);
            };
            let locked = match mode {
                LockMode::CommittedRead => false,
                LockMode::SimpleRead => {
                    if !self.shared_ok(txn, row) {
                        return Step::Blocked;
                    }
                    false
                }
                LockMode::Read | LockMode::Exclusive => {
                    let visible_committed = header_of(self.fixed.get(row)) & ROW_ALLOC == 0;
                    let own = self.locks.get(row).is_some_and(|l| l.holds(txn));
                    if visible_committed || own {
                        if !self.try_lock(txn, row, mode == LockMode::Exclusive) {
                            self.tidy_lock(row);
                            return Step::Blocked;
                        }
                        true
                    } else {
                        false
                    }
                }
            };
            let mut vals = Vec::with_capacity(cols.len());
            if self.decode(txn, row, cols, &mut vals) {
                out.push((RowRef { row, locked }, vals));
                n += 1;
            } else if locked {
                // Not visible after all (an own pending delete keeps its lock).
            }
            cur = RowId(row.0 + 1);
        }
        self.stats.scan_rows_returned += n as u64;
        Step::Done(self.fixed.next_row(cur))
    }

    /// One batch of an ordered-index scan. `low`/`high` are bounds as stored bytes of a
    /// prefix of the index columns with their inclusiveness; `resume` is the last row
    /// returned and its index key. Returns whether the scan reached its end.
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
    ) -> Step<bool> {
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
                return Step::Done(true);
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
        for (k, row) in ids.iter().copied().enumerate() {
            let locked = match mode {
                LockMode::CommittedRead => false,
                LockMode::SimpleRead => {
                    if !self.shared_ok(txn, row) {
                        let _ = k;
                        return Step::Blocked;
                    }
                    false
                }
                LockMode::Read | LockMode::Exclusive => {
                    if !self.try_lock(txn, row, mode == LockMode::Exclusive) {
                        self.tidy_lock(row);
                        return Step::Blocked;
                    }
                    true
                }
            };
            let mut vals = Vec::with_capacity(cols.len());
            if self.decode(txn, row, cols, &mut vals) {
                out.push((RowRef { row, locked }, vals));
            }
        }
        self.stats.scan_rows_returned += ids.len() as u64;
        Step::Done(reached_end)
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

    /// Every page back to the pool (TRUNCATE, DROP). No transaction may be active.
    pub fn free_all(&mut self) {
        assert!(
            self.locks.is_empty(),
            "freeing a fragment with {} locked rows",
            self.locks.len()
        );
        for o in self.ordered.iter_mut().flatten() {
            o.free_all(&self.pool);
        }
        self.hash.free_all(&self.pool);
        self.var.free_all(&self.pool);
        self.fixed.free_all(&self.pool);
    }

    /// Checks storage and index invariants (tests and DUMP-style checks).
    pub fn check(&mut self) -> std::result::Result<(), String> {
        self.fixed.check()?;
        self.var.check()?;
        if self.hash.len() != self.fixed.rows() {
            return Err(format!(
                "hash index has {} entries for {} rows",
                self.hash.len(),
                self.fixed.rows()
            ));
        }
        let mut committed = 0u64;
        let mut cur = RowId(0);
        while let Some(r) = self.fixed.next_row(cur) {
            let h = header_of(self.fixed.get(r));
            if h & ROW_ALLOC == 0 {
                committed += 1;
            }
            if (h & ROW_LOCKED != 0) != self.locks.get(r).is_some() {
                return Err(format!(
                    "row {r:?}: LOCKED bit disagrees with the lock table"
                ));
            }
            let h32 = self.row_hash(r);
            let found = {
                let (fixed, var, layout) = (&self.fixed, &self.var, &self.table.layout);
                let f = fixed.get(r);
                let mut key = Vec::new();
                layout.row_key(f, var_of(layout, var, f), &mut key);
                key
            };
            if self.find(&found, h32) != Some(r) {
                return Err(format!("row {r:?} not found through the hash index"));
            }
            cur = RowId(r.0 + 1);
        }
        for (i, o) in self.ordered.iter().enumerate() {
            if let Some(o) = o
                && o.len() != committed
            {
                return Err(format!(
                    "ordered index {i} has {} entries for {committed} committed rows",
                    o.len()
                ));
            }
        }
        let _ = PAGE_SIZE;
        Ok(())
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

impl Fragment {
    /// Cluster shutdown: forgets every lock and pending change and frees every page.
    pub fn force_free_all(&mut self) {
        self.locks = LockTable::default();
        for o in self.ordered.iter_mut().flatten() {
            o.free_all(&self.pool);
        }
        self.hash.free_all(&self.pool);
        self.var.free_all(&self.pool);
        self.fixed.free_all(&self.pool);
    }
}

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
    /// decoded, so the cache misses of independent lookups overlap. Found rows are
    /// decoded (`cols`) into `out[slot]`.
    pub fn read_committed_batch(
        &mut self,
        keys: &[BatchKey],
        key_buf: &[u8],
        cols: &[usize],
        out: &mut [Value],
        found: &mut [bool],
    ) {
        let ncols = cols.len();
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
                    let slot = keys[j].slot as usize;
                    found[slot] =
                        self.decode_into(r, cols, &mut out[slot * ncols..(slot + 1) * ncols]);
                } else {
                    self.stats.key_refs += 1;
                }
            }
        }
        self.batch_rows = rows;
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
        if let Some(row) = self.find(key, h32) {
            if header_of(self.fixed.get(row)) & (ROW_LOCKED | ROW_ALLOC) != 0 {
                return Ok(DirectInsert::Conflict);
            }
            return Err(codes::tuple_already_exists());
        }
        let row = self.alloc_row(values, 0)?;
        if let Err(e) = self.hash.insert(&self.pool, h32, row) {
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
            self.hash.remove(&self.pool, h32, row);
            self.free_row(row);
            return Err(e);
        }
        self.fixed.get_mut(row)[4..8].copy_from_slice(&gci.to_le_bytes());
        self.fixed.mark_changed(row, gci);
        self.stats.commits += 1;
        Ok(DirectInsert::Inserted(row))
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
        self.free_row(row);
    }
}
