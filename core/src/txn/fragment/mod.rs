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
use crate::schema::layout::{
    ROW_GCI_COLUMN, ROW_GCI_OFFSET, RowLayout, StoredRow, index_hash, key_hash,
};
use crate::schema::{IndexKind, TableDef, Value};
use crate::storage::fixed::{ROW_ALLOC, ROW_LOCKED, ROW_VERSION_SHIFT};
use crate::storage::{FixedPages, PagePool, RowId, VarPages};
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
    /// The fragment's redo target (fixed for its life; readable without the mutex).
    pub redo: Option<FragRedo>,
    /// A [`ReplicaRole`], changed with `state` locked (`replica` module).
    role: std::sync::atomic::AtomicU8,
    /// Replicas of the partition a node restart is bringing up to date: commits on
    /// this replica as the partition's primary reach them too (`replica` module).
    pub followers: parking_lot::RwLock<Vec<Arc<FragmentCell>>>,
    /// Open row-id positions and the running OPTIMIZE (`optimize` module).
    gate: optimize::OptimizeGate,
}

impl FragmentCell {
    pub fn new(fragment: Fragment, node_id: u32) -> FragmentCell {
        FragmentCell {
            redo: fragment.redo().cloned(),
            state: Mutex::new(fragment),
            lock_released: Condvar::new(),
            node_id,
            role: std::sync::atomic::AtomicU8::new(ReplicaRole::Live as u8),
            followers: parking_lot::RwLock::new(Vec::new()),
            gate: optimize::OptimizeGate::default(),
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
    enc_disk: Vec<u8>,
    /// The disk part of rows (tables with STORAGE DISK columns).
    disk: Option<FragDisk>,
    /// Where committed changes are logged (logged tables on nodes with a redo log).
    redo: Option<FragRedo>,
    /// Reused buffers of redo records.
    redo_payload: Vec<u8>,
    redo_disk: Vec<u8>,
    /// Pages held when the previous LCP scanned them (gone ones become page deletes).
    lcp_seen: Vec<bool>,
    /// Changes since the previous LCP began.
    lcp_counts: LcpChangeCounts,
    /// The next LCP writes every part (an LCP that scanned the fragment failed, or its
    /// rows were discarded and copied again by a node restart).
    lcp_force_full: bool,
    /// Times the replica's rows were discarded (its node stopped): an LCP scan that
    /// began before one of them does not clear `lcp_force_full`.
    discards: u64,
    /// The GCI current when the last LCP scan of the fragment began (0: none since
    /// the fragment was created or restored).
    lcp_start_gci: u32,
    pub stats: FragStats,
    /// Why this replica, a follower of a node restart, could not take a commit (the
    /// restart then fails).
    pub restart_error: Option<crate::error::NdbError>,
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
    /// A fragment; `disk` is its disk part when the table has disk columns
    /// ([`FragDisk::for_table`]).
    pub fn new(
        table: Arc<TableDef>,
        partition: u32,
        pool: Arc<PagePool>,
        disk: Option<FragDisk>,
    ) -> Fragment {
        assert_eq!(
            table.layout.has_disk(),
            disk.is_some(),
            "a fragment has a disk part iff its table has disk columns"
        );
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
            enc_disk: Vec::new(),
            disk,
            redo: None,
            redo_payload: Vec::new(),
            redo_disk: Vec::new(),
            lcp_seen: Vec::new(),
            lcp_counts: LcpChangeCounts::default(),
            lcp_force_full: false,
            discards: 0,
            lcp_start_gci: 0,
            stats: FragStats::default(),
            restart_error: None,
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
                Some(Pending::Delete { .. }) => return View::Gone,
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

    /// Decodes the columns `cols` of the row as `txn` sees it into `out`; false when the
    /// row is not visible to `txn`. Disk columns are read through the page cache (an
    /// I/O error or a corrupt record is returned, `out` unchanged).
    fn decode(&self, txn: TxnId, row: RowId, cols: &[usize], out: &mut Vec<Value>) -> Result<bool> {
        let layout = &self.table.layout;
        let (fixed, var) = match self.view(txn, row) {
            View::Gone => return Ok(false),
            View::Row => {
                let f = self.fixed.get(row);
                (f, var_of(layout, &self.var, f))
            }
            View::Image => {
                let Some(Some(Pending::Update { fixed, var, .. })) =
                    self.locks.get(row).map(|l| l.pending.as_ref())
                else {
                    return Ok(false);
                };
                (fixed.as_slice(), var.as_slice())
            }
        };
        let gci_of = |fixed: &[u8]| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&fixed[ROW_GCI_OFFSET..ROW_GCI_OFFSET + 4]);
            Value::UInt(u64::from(u32::from_le_bytes(w)))
        };
        if self.needs_disk(cols) {
            self.with_disk_image(txn, row, |disk| {
                let stored = StoredRow { fixed, var, disk };
                out.extend(cols.iter().map(|&c| match c {
                    ROW_GCI_COLUMN => gci_of(fixed),
                    c => layout.value(c, stored),
                }));
            })?;
        } else {
            out.extend(cols.iter().map(|&c| match c {
                ROW_GCI_COLUMN => gci_of(fixed),
                c => layout.get(c, fixed, var),
            }));
        }
        Ok(true)
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
        self.disk_release_all();
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
        self.hash.check()?;
        let mut tree_error = None;
        self.with_ordered(self.all_ordered_mask(), |o, _pool, cmp| {
            if tree_error.is_none() {
                tree_error = o.check(cmp).err();
            }
        });
        if let Some(e) = tree_error {
            return Err(format!("ordered index: {e}"));
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
        self.check_disk()
    }
}

impl Fragment {
    /// Cluster shutdown: forgets every lock and pending change and frees every page.
    /// The disk files stay as they are: the node's disk managers close with the node.
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

mod batch;
mod disk;
mod lcp;
mod optimize;
mod optimize_disk;
mod optimize_index;
mod redo;
mod replica;
mod scan;
mod write;

pub use batch::{BatchKey, DirectInsert, RowSink};
pub use disk::{DiskRelinkStats, FragDisk};
pub use lcp::{LcpChangeCounts, LcpScan, LcpSink};
pub use optimize::{
    OptimizeClaim, OptimizeCursor, OptimizeStats, OptimizeStep, Reclaimable, STEP_BUDGET,
    ScanCursor,
};
pub use redo::push_row_image;
pub use redo::{FragRedo, REDO_DELETE, REDO_WRITE, REDO_WRITE_MEMORY};
pub use replica::{CopyProgress, ReplicaRole};

#[cfg(test)]
mod replica_tests;
