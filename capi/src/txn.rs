//! Transactions as the C ABI keeps them: operations and rec attrs defined through
//! handles, then executed on the engine's `Transaction`.
//!
//! A transaction object is recycled through its Ndb's free list (with its operation and
//! rec attr vectors, so a steady flow of transactions allocates little). Operations and
//! rec attrs are named by sub-handles of their transaction's handle: once the
//! transaction is closed, they are stale too.
//!
//! Execution: transactions that only do committed reads by primary key (the common
//! key-value lookup, and flexAsynch's read phase) run through the engine's batched read
//! path, `Ndb::read_batch_visit`, one call for every transaction of a batch that reads
//! the same columns of the same table, each row written from its stored form into the rec
//! attrs and NdbRecord rows (`Ndb::read_batch_into` when BLOB/TEXT columns are read); this
//! is what a committed read is (no lock, the latest committed row), so nothing observable
//! changes (the batch module runs them). Every other transaction runs its operations
//! on its own engine `Transaction`, created at its first execute.

use crate::error::ErrorStore;
use crate::handle::{Handle, Kind, MAX_SUB, Registry};
use crate::types::to_ndb;
use crate::{rndb_asynch_callback, rndb_transaction};
use rndb_core::api::{Ndb, OpOutcome, Scan, ScanSpec, TableRuntime, TxState};
use rndb_core::cluster::remote_scan::RemoteScan;
use rndb_core::cluster::remote_txn::RemoteTransaction;
use rndb_core::error::{ErrorClassification, NdbError, Result, codes};
use rndb_core::schema::layout::StoredRow;
use rndb_core::schema::{ColumnType, RowLayout, Value};
use rndb_core::{AbortOption, ExecType, LockMode, OpId, OpKind, Transaction};
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

pub(crate) static TXS: Registry<TxObj> = Registry::new(Kind::Transaction);

/// What an operation does (set by readTuple/insertTuple/... or by a scan getter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpType {
    Undefined,
    Key(OpKind),
    Scan,
}

pub(crate) struct RecAttrObj {
    pub col: usize,
    pub ty: ColumnType,
    /// The caller's buffer from getValue(attr, buf), or NULL.
    pub user_buf: *mut u8,
    /// The value in NDB's format.
    pub data: Vec<u8>,
    /// -1 no value yet, 1 NULL, 0 a value.
    pub null: i8,
}

// `user_buf` is the caller's memory, written only by the thread using the transaction.
unsafe impl Send for RecAttrObj {}

impl RecAttrObj {
    pub fn fill(&mut self, v: &Value) {
        self.data.clear();
        if v.is_null() {
            self.null = 1;
            return;
        }
        // Integers (the common case): no generic encoding, no memcpy call.
        if let ColumnType::Int { bytes, .. } = self.ty {
            let x = match *v {
                Value::UInt(x) => Some(x),
                Value::Int(x) => Some(x as u64),
                _ => None,
            };
            if let Some(x) = x {
                let n = (bytes as usize).min(8);
                self.data.reserve(8);
                // SAFETY: capacity >= 8 >= n; the caller's buffer holds the column's size.
                unsafe {
                    crate::record::write_le(self.data.as_mut_ptr(), x, bytes);
                    self.data.set_len(n);
                    if !self.user_buf.is_null() {
                        crate::record::write_le(self.user_buf, x, bytes);
                    }
                }
                self.null = 0;
                return;
            }
        }
        to_ndb(&self.ty, v, &mut self.data);
        self.null = 0;
        if !self.user_buf.is_null() {
            // SAFETY: NDB's contract: the buffer given to getValue holds the column's
            // largest value; `data` is at most that.
            unsafe {
                std::ptr::copy_nonoverlapping(self.data.as_ptr(), self.user_buf, self.data.len())
            };
        }
    }

    /// Fills the rec attr from a row in stored form (see `RecOut::write_stored`).
    #[inline]
    pub fn fill_stored(&mut self, layout: &RowLayout, stored: StoredRow<'_>) {
        match layout.stored_bytes_of(self.col, stored) {
            None => {
                self.data.clear();
                self.null = 1;
            }
            Some(b) if crate::record::stored_is_ndb_format(&self.ty) => {
                // 1 to 8 bytes: copied without a call to memcpy.
                self.data.clear();
                if b.len() <= 8 {
                    self.data.reserve(8);
                    // SAFETY: capacity >= 8 >= b.len().
                    unsafe {
                        crate::record::copy_small(b, self.data.as_mut_ptr());
                        self.data.set_len(b.len());
                    }
                } else {
                    self.data.extend_from_slice(b);
                }
                self.null = 0;
                if !self.user_buf.is_null() {
                    // SAFETY: the buffer given to getValue holds the column's value.
                    unsafe { crate::record::copy_small(b, self.user_buf) };
                }
            }
            Some(_) => self.fill(&layout.value(self.col, stored)),
        }
    }

    /// Where aRef points: the caller's buffer when one was given.
    pub fn aref(&self) -> *const u8 {
        if !self.user_buf.is_null() {
            self.user_buf
        } else {
            self.data.as_ptr()
        }
    }
}

/// Bounds of an index scan, per index column: (value, inclusive).
pub(crate) type Bound = Option<(Value, bool)>;

pub(crate) struct ScanState {
    /// Position of the ordered index in the table, for index scans.
    pub index: Option<usize>,
    pub index_name: String,
    pub defined: bool,
    pub mode: LockMode,
    pub sorted: bool,
    pub descending: bool,
    pub batch: usize,
    pub low: Vec<Bound>,
    pub high: Vec<Bound>,
    pub core: Option<Scan>,
    /// The scan over TCP of a remote cluster (instead of `core`).
    pub remote: Option<Box<RemoteScan>>,
    pub buffer: VecDeque<Vec<Value>>,
    pub ended: bool,
    pub closed: bool,
    /// Primary-key values of the row last returned (for updateCurrentTuple...).
    pub current_key: Vec<(usize, Value)>,
}

impl ScanState {
    pub fn new(index: Option<usize>, index_name: &str, index_columns: usize) -> ScanState {
        ScanState {
            index,
            index_name: index_name.to_string(),
            defined: false,
            mode: LockMode::Read,
            sorted: false,
            descending: false,
            batch: 0,
            low: vec![None; index_columns],
            high: vec![None; index_columns],
            core: None,
            remote: None,
            buffer: VecDeque::new(),
            ended: false,
            closed: false,
            current_key: Vec::new(),
        }
    }
}

pub(crate) struct OpObj {
    pub table: Option<Arc<TableRuntime>>,
    pub table_name: std::ffi::CString,
    pub ty: OpType,
    pub key: Vec<(usize, Value)>,
    /// Every value of `key` is an integer (set by a record's key read): clearing the
    /// key needs no drop, so a recycled operation does not read its old key (a cache
    /// miss on a batch's every operation). Whatever else writes `key` clears the flag.
    pub key_plain: bool,
    pub values: Vec<(usize, Value)>,
    /// Columns read, in getValue order; rec attr i of `ras` reads `reads[i]`. Empty
    /// while `whole_record` is set (see [`OpObj::read_cols`]).
    pub reads: Vec<usize>,
    /// An NdbRecord read of every column of its result record (`rec_out`): the columns
    /// read are `rec_out.def.all_cols`, not copied into `reads` (a batch of such reads
    /// is grouped by comparing records, not column lists).
    pub whole_record: bool,
    pub ras: Vec<u32>,
    pub core_id: Option<OpId>,
    pub error: ErrorStore,
    pub scan: Option<Box<ScanState>>,
    /// Where an NdbRecord read writes its row.
    pub rec_out: Option<crate::record::RecOut>,
}

impl OpObj {
    fn new() -> OpObj {
        OpObj {
            table: None,
            table_name: std::ffi::CString::default(),
            ty: OpType::Undefined,
            key: Vec::new(),
            key_plain: false,
            values: Vec::new(),
            reads: Vec::new(),
            ras: Vec::new(),
            whole_record: false,
            core_id: None,
            error: ErrorStore::new(),
            scan: None,
            rec_out: None,
        }
    }

    /// The columns this operation reads, in the order of its result row.
    #[inline]
    pub fn read_cols(&self) -> &[usize] {
        match &self.rec_out {
            Some(r) if self.whole_record => &r.def.all_cols,
            _ => &self.reads,
        }
    }

    /// Whether two operations read the same columns of the same table (one batch group).
    #[inline]
    pub(crate) fn same_reads(&self, other: &OpObj) -> bool {
        let same_table = match (&self.table, &other.table) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if !same_table {
            return false;
        }
        if self.whole_record
            && other.whole_record
            && let (Some(a), Some(b)) = (&self.rec_out, &other.rec_out)
            && Arc::ptr_eq(&a.def, &b.def)
        {
            return true;
        }
        self.read_cols() == other.read_cols()
    }

    /// Copies the columns of a whole-record read into `reads`, before a getValue adds to
    /// them.
    fn materialize_reads(&mut self) {
        if self.whole_record {
            if let Some(r) = &self.rec_out {
                self.reads.clear();
                self.reads.extend_from_slice(&r.def.all_cols);
            }
            self.whole_record = false;
        }
    }

    /// Clears a recycled operation; the table reference is kept (and replaced only if
    /// the next use is on another table).
    #[inline(always)]
    fn reset(&mut self) {
        self.ty = OpType::Undefined;
        if self.key_plain {
            // SAFETY: integers own nothing: forgetting them is dropping them.
            unsafe { self.key.set_len(0) };
            self.key_plain = false;
        } else {
            self.key.clear();
        }
        self.values.clear();
        self.reads.clear();
        self.ras.clear();
        self.whole_record = false;
        self.core_id = None;
        self.error.clear();
        if self.scan.is_some() {
            self.scan = None;
        }
        if let Some(r) = &mut self.rec_out {
            r.row = std::ptr::null_mut();
        }
    }

    pub fn table(&self) -> Result<&Arc<TableRuntime>> {
        self.table
            .as_ref()
            .ok_or_else(|| codes::internal("operation without a table"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxStatus {
    Open,
    Committed,
    Aborted,
}

/// In declaration order: the exec type (whose niche is the `Option` tag) first, in the
/// transaction object's first cache line (see `TxObj`).
#[repr(C)]
pub(crate) struct Asynch {
    pub exec: ExecType,
    pub abort: AbortOption,
    pub cb: rndb_asynch_callback,
    pub arg: *mut c_void,
}

// `arg` is the caller's pointer, handed back to the callback on the polling thread.
unsafe impl Send for Asynch {}

/// A finished asynchronous transaction whose callback is due.
pub(crate) struct Completion {
    pub tx: Handle,
    pub result: c_int,
    pub cb: rndb_asynch_callback,
    pub arg: *mut c_void,
}

unsafe impl Send for Completion {}

impl Completion {
    /// Runs the callback (no registry borrow may be held).
    pub fn call(&self) {
        if let Some(cb) = self.cb {
            let tx: *mut rndb_transaction = self.tx.ptr();
            // SAFETY: the caller's callback, called as NDB calls NdbAsynchCallback.
            unsafe { cb(self.result, tx, self.arg) };
        }
    }
}

/// The Ndb object of an open transaction, for the calls that need it without being given
/// it (executeAsynchPrepare). Valid while the transaction is open: an Ndb's slot value
/// does not move, and `rndb_ndb_free` closes every open transaction of the Ndb before
/// freeing it; a closed transaction is reached by no call (its handle is stale).
#[derive(Clone, Copy)]
pub(crate) struct NdbPtr(pub *mut crate::ndb::NdbObj);

// Used only by the thread using the transaction and its Ndb.
unsafe impl Send for NdbPtr {}

/// A transaction object. Laid out in declaration order (`repr(C)`): the fields a
/// compact single read touches from startTransaction to closeTransaction come first, in
/// the first two cache lines of its registry slot (see `handle::Slot` and the test in
/// `single`), those closeTransaction reads (with the slot's generation) in the first;
/// the rest is touched only by other transactions, which mark the object `dirty` so
/// that the next `reset` clears it too.
#[repr(C)]
pub(crate) struct TxObj {
    pub ndb: Handle,
    pub ndb_obj: NdbPtr,
    /// The engine transaction, boxed: most transactions (batched reads) never make one,
    /// and a small object keeps a batch's transactions in fewer cache lines.
    pub core: Option<Box<Transaction>>,
    pub status: TxStatus,
    /// Whether a scan operation was defined or the transaction ran on a remote
    /// cluster: `close_core` has scans and a remote transaction to end.
    pub close_work: bool,
    /// Set by every access outside the single-read hot path (`ndb::tx_by_handle`, `fail`):
    /// the fields below may differ from a new object's, and `reset` must clear them.
    pub dirty: bool,
    /// A compact single read is defined, in place of operation 0 (see the `single`
    /// module): `single` and `single_lock`.
    pub single_active: bool,
    pub single_lock: LockMode,
    pub asynch: Option<Asynch>,
    pub n_ops: usize,
    /// Operations [0, executed) have been executed.
    pub executed: usize,
    pub id: u64,
    pub single: crate::single::SingleRead,
    // Cold: not touched by a compact single read.
    pub n_ras: usize,
    pub error_op: Option<usize>,
    pub gci: u64,
    /// An error from defining an operation: the next execute fails with it.
    pub define_error: Option<NdbError>,
    pub error: ErrorStore,
    pub ops: Vec<OpObj>,
    pub ras: Vec<RecAttrObj>,
    /// The allocation of the last engine transaction, reused by the next one (no
    /// allocation per write transaction).
    pub spare_core: Option<Box<std::mem::MaybeUninit<Transaction>>>,
    /// The transaction at a remote cluster's TC (rounds of `execute`), while open.
    pub remote: Option<Box<RemoteTransaction>>,
}

impl TxObj {
    pub fn new() -> TxObj {
        TxObj {
            ndb: Handle::new(Kind::Ndb, 0, 0, 0),
            ndb_obj: NdbPtr(std::ptr::null_mut()),
            id: 0,
            core: None,
            spare_core: None,
            ops: Vec::new(),
            n_ops: 0,
            ras: Vec::new(),
            n_ras: 0,
            executed: 0,
            status: TxStatus::Open,
            error: ErrorStore::new(),
            error_op: None,
            define_error: None,
            asynch: None,
            gci: 0,
            close_work: false,
            remote: None,
            dirty: false,
            single_active: false,
            single_lock: LockMode::Read,
            single: crate::single::SingleRead::new(),
        }
    }

    /// Prepares a recycled object for a new transaction.
    #[inline(always)]
    pub fn reset(&mut self, ndb: Handle, ndb_obj: NdbPtr, id: u64) {
        self.ndb = ndb;
        self.ndb_obj = ndb_obj;
        self.id = id;
        self.n_ops = 0;
        self.executed = 0;
        self.status = TxStatus::Open;
        self.asynch = None;
        self.single_active = false;
        if self.dirty {
            self.reset_cold();
        }
        debug_assert!(self.core.is_none() && !self.close_work && self.error.code() == 0);
    }

    /// The rest of `reset`, for an object that was used outside the single-read path.
    #[inline(never)]
    fn reset_cold(&mut self) {
        if self.core.is_some() || self.close_work {
            self.close_core();
        }
        self.n_ras = 0;
        self.error.clear();
        self.error_op = None;
        self.define_error = None;
        self.gci = 0;
        self.close_work = false;
        self.dirty = false;
    }

    /// Ends the engine transaction (rolled back if still open) and drops open scans.
    #[inline(always)]
    pub fn close_core(&mut self) {
        if self.close_work || self.core.is_some() {
            self.close_core_slow();
        }
    }

    #[inline(never)]
    fn close_core_slow(&mut self) {
        let scans = if self.close_work { self.n_ops } else { 0 };
        for op in &mut self.ops[..scans] {
            if let Some(s) = &mut op.scan {
                if let Some(c) = &mut s.core {
                    c.close();
                }
                s.core = None;
                if let Some(r) = &mut s.remote {
                    r.close();
                }
                s.remote = None;
            }
        }
        // Dropping an open remote transaction rolls it back.
        self.remote = None;
        self.close_work = false;
        if let Some(mut c) = self.core.take() {
            c.close();
            // Keep the allocation for the next engine transaction of this object.
            let raw = Box::into_raw(c);
            // SAFETY: `raw` is a valid, owned Transaction; after dropping it in place the
            // allocation holds no value, which `MaybeUninit` expresses.
            self.spare_core = Some(unsafe {
                std::ptr::drop_in_place(raw);
                Box::from_raw(raw.cast::<std::mem::MaybeUninit<Transaction>>())
            });
        }
    }

    /// Adds an operation; returns its index.
    #[inline(always)]
    pub fn add_op(&mut self) -> Result<usize> {
        if self.n_ops >= MAX_SUB {
            return Err(codes::too_many_operations().detail("at most 1048575 per transaction"));
        }
        if self.n_ops == self.ops.len() {
            self.ops.push(OpObj::new());
        } else {
            self.ops[self.n_ops].reset();
        }
        self.n_ops += 1;
        Ok(self.n_ops - 1)
    }

    /// Adds a rec attr for operation `op`; returns its index.
    #[inline(always)]
    pub fn add_rec_attr(
        &mut self,
        op: usize,
        col: usize,
        ty: ColumnType,
        buf: *mut u8,
    ) -> Result<usize> {
        if self.n_ras >= MAX_SUB {
            return Err(codes::bad_argument(
                "too many getValue calls in one transaction (at most 1048575)",
            ));
        }
        let i = self.n_ras;
        if let Some(slot) = self.ras.get_mut(i) {
            // A recycled rec attr keeps its value buffer.
            slot.col = col;
            slot.ty = ty;
            slot.user_buf = buf;
            slot.null = -1;
            slot.data.clear();
        } else {
            self.ras.push(RecAttrObj {
                col,
                ty,
                user_buf: buf,
                data: Vec::new(),
                null: -1,
            });
        }
        self.n_ras = i + 1;
        let o = &mut self.ops[op];
        o.materialize_reads();
        if o.ras.capacity() == 0 {
            o.ras.reserve(8);
            o.reads.reserve(8);
        }
        o.ras.push(i as u32);
        o.reads.push(col);
        Ok(i)
    }

    /// Records a transaction-level error (and, for an operation, the operation's).
    pub fn fail(&mut self, op: Option<usize>, e: NdbError) -> NdbError {
        self.dirty = true;
        if let Some(i) = op {
            if let Some(o) = self.ops.get_mut(i) {
                o.error.set(&e);
            }
            if self.error_op.is_none() {
                self.error_op = Some(i);
            }
        }
        self.error.set(&e);
        e
    }

    /// An error while defining an operation: recorded, and the next execute fails.
    pub fn define_failed(&mut self, op: Option<usize>, e: NdbError) -> NdbError {
        let e = self.fail(op, e);
        if self.define_error.is_none() {
            self.define_error = Some(e.clone());
        }
        e
    }

    /// Whether the transaction can take new operations.
    #[inline(always)]
    pub fn check_open(&self) -> Result<()> {
        match self.status {
            TxStatus::Open => Ok(()),
            TxStatus::Committed => Err(codes::transaction_closed()
                .detail("the transaction was committed; start a new one")),
            TxStatus::Aborted => Err(self
                .error
                .last
                .clone()
                .unwrap_or_else(codes::transaction_aborted)),
        }
    }

    /// Can this execute use the batched committed-read path?
    #[inline(always)]
    pub fn fast_reads_eligible(&self, exec: ExecType) -> bool {
        if self.status != TxStatus::Open
            || self.core.is_some()
            || self.executed != 0
            || self.define_error.is_some()
            || self.n_ops == 0
            || exec == ExecType::Rollback
        {
            return false;
        }
        self.ops[..self.n_ops].iter().all(|o| {
            o.ty == OpType::Key(OpKind::Read(LockMode::CommittedRead))
                && o.values.is_empty()
                && match &o.table {
                    Some(t) => {
                        let pk = &t.def.primary_key;
                        o.key.len() == pk.len()
                            // In primary-key order (a record's key), or each column once.
                            && (o.key.iter().zip(pk).all(|((c, _), p)| c == p)
                                || pk
                                    .iter()
                                    .all(|p| o.key.iter().filter(|(c, _)| c == p).count() == 1))
                    }
                    None => false,
                }
        })
    }

    /// The outcome of a transaction after its fast-path reads: sets status and error;
    /// returns whether the execute succeeded (false: the error is in `self.error`).
    #[inline(always)]
    pub fn finish_fast(&mut self, exec: ExecType, abort: AbortOption) -> bool {
        self.executed = self.n_ops;
        if self.ops[..self.n_ops].iter().any(|o| o.error.code() != 0) {
            return self.finish_fast_failed(exec, abort);
        }
        if exec == ExecType::Commit {
            self.status = TxStatus::Committed;
        }
        true
    }

    #[cold]
    #[inline(never)]
    fn finish_fast_failed(&mut self, exec: ExecType, abort: AbortOption) -> bool {
        let Some(i) = (0..self.n_ops).find(|&i| self.ops[i].error.code() != 0) else {
            return true;
        };
        let e = self.ops[i]
            .error
            .last
            .clone()
            .unwrap_or_else(codes::tuple_not_found);
        self.fail(Some(i), e);
        if abort == AbortOption::AbortOnError {
            self.status = TxStatus::Aborted;
            return false;
        }
        if exec == ExecType::Commit {
            self.status = TxStatus::Committed;
        }
        true
    }

    /// Whether the transaction is one write (insert, update, write, delete) not yet
    /// executed, on a fresh engine transaction, to commit: what `execute_single_write`
    /// runs (each transaction of flexAsynch's write phases, any autocommitted write).
    #[inline(always)]
    fn single_write(&self, exec: ExecType) -> bool {
        exec == ExecType::Commit
            && self.n_ops == 1
            && self.executed == 0
            && self.status == TxStatus::Open
            && self.core.is_none()
            && self.define_error.is_none()
            && matches!(
                self.ops[0].ty,
                OpType::Key(OpKind::Insert | OpKind::Update | OpKind::Write | OpKind::Delete)
            )
    }

    /// Runs a single write (`single_write`) on an engine transaction that is closed again
    /// at once (its allocation kept for the next), without the general path's scan and
    /// outcome bookkeeping. The outcome is the general path's: on failure, the error of
    /// the operation and of the transaction, the transaction aborted (a single write has
    /// nothing to commit without its operation).
    fn execute_single_write(&mut self, ndb: &Ndb, abort: AbortOption) -> Result<()> {
        let t = match ndb.start_transaction() {
            Ok(t) => t,
            Err(e) => return Err(self.fail(None, e)),
        };
        let mut core = match self.spare_core.take() {
            Some(b) => Box::write(b, t),
            None => Box::new(t),
        };
        self.executed = 1;
        let op = &mut self.ops[0];
        let (OpType::Key(kind), Some(table)) = (op.ty, op.table.as_ref()) else {
            return Err(codes::internal("single write without its table"));
        };
        let key = std::mem::take(&mut op.key);
        let values = std::mem::take(&mut op.values);
        // (error, whether it is the operation's)
        let mut failed: Option<(NdbError, bool)> = None;
        match core.define_by_pos(table, kind, key, values, None) {
            Ok(id) => {
                op.core_id = Some(id);
                let r = core.execute(ExecType::Commit, abort);
                let op_error = match core.outcome(id) {
                    Some(OpOutcome::Failed(e)) => Some(e.clone()),
                    _ => None,
                };
                match (r, op_error) {
                    (Ok(()), None) => {}
                    // AO_IgnoreError: committed without the operation; the operation
                    // keeps its error (as `collect_outcomes` records it).
                    (Ok(()), Some(e)) => {
                        op.error.set(&e);
                        self.error_op = Some(0);
                    }
                    (Err(e), op_error) => {
                        if let Some(oe) = &op_error {
                            op.error.set(oe);
                        }
                        failed = Some((e, op_error.is_some()));
                    }
                }
            }
            Err(e) => failed = Some((e, true)),
        }
        let gci = core.gci().unwrap_or(0);
        core.close();
        // Keep the allocation for the next engine transaction of this object.
        let raw = Box::into_raw(core);
        // SAFETY: `raw` is a valid, owned Transaction; after dropping it in place the
        // allocation holds no value, which `MaybeUninit` expresses.
        self.spare_core = Some(unsafe {
            std::ptr::drop_in_place(raw);
            Box::from_raw(raw.cast::<std::mem::MaybeUninit<Transaction>>())
        });
        match failed {
            None => {
                self.status = TxStatus::Committed;
                self.gci = gci;
                Ok(())
            }
            Some((e, of_op)) => {
                // A failed commit aborts; the engine transaction is closed.
                self.status = TxStatus::Aborted;
                Err(self.fail(of_op.then_some(0), e))
            }
        }
    }

    /// What every execute but a rollback checks first, on either engine: not committed,
    /// no operation failed to define (that aborts the transaction, its engine or
    /// remote transaction closed), not aborted.
    pub(crate) fn check_executable(&mut self) -> Result<()> {
        if self.status == TxStatus::Committed {
            return Err(self.fail(
                None,
                codes::transaction_closed()
                    .detail("execute called again after the transaction was committed"),
            ));
        }
        if let Some(e) = self.define_error.take() {
            self.close_core();
            self.status = TxStatus::Aborted;
            self.executed = self.n_ops;
            return Err(self.fail(None, e));
        }
        if self.status == TxStatus::Aborted {
            return Err(self
                .error
                .last
                .clone()
                .unwrap_or_else(codes::transaction_aborted));
        }
        Ok(())
    }

    /// Executes the operations defined since the last execute on the engine transaction.
    pub fn execute_slow(&mut self, ndb: &Ndb, exec: ExecType, abort: AbortOption) -> Result<()> {
        if self.single_write(exec) {
            return self.execute_single_write(ndb, abort);
        }
        if exec == ExecType::Rollback {
            if self.status == TxStatus::Committed {
                return Err(codes::transaction_closed()
                    .detail("execute(Rollback) after the transaction was committed"));
            }
            if let Some(c) = &mut self.core {
                c.execute(ExecType::Rollback, abort)?;
            }
            self.executed = self.n_ops;
            self.status = TxStatus::Aborted;
            return Ok(());
        }
        self.check_executable()?;
        if self.core.is_none() {
            match ndb.start_transaction() {
                Ok(t) => {
                    self.core = Some(match self.spare_core.take() {
                        Some(b) => Box::write(b, t),
                        None => Box::new(t),
                    })
                }
                Err(e) => return Err(self.fail(None, e)),
            }
        }
        let start = self.executed;
        let end = self.n_ops;
        self.executed = end;
        let mut new_scans = Vec::new();
        let TxObj { core, ops, .. } = self;
        let core = core
            .as_mut()
            .ok_or_else(|| codes::internal("no engine transaction"))?;
        let mut failure: Option<(Option<usize>, NdbError)> = None;
        for (i, op) in ops.iter_mut().enumerate().take(end).skip(start) {
            match op.ty {
                OpType::Scan => new_scans.push(i),
                OpType::Undefined => {
                    failure = Some((
                        Some(i),
                        op_status_error(
                            "the operation has no type: call readTuple, insertTuple, updateTuple, writeTuple or deleteTuple first",
                        ),
                    ));
                    break;
                }
                OpType::Key(kind) => {
                    let Some(table) = op.table.clone() else {
                        continue;
                    };
                    let key = std::mem::take(&mut op.key);
                    let values = std::mem::take(&mut op.values);
                    let reads = match kind {
                        OpKind::Read(_) => Some(op.read_cols().to_vec()),
                        _ => None,
                    };
                    match core.define_by_pos(&table, kind, key, values, reads) {
                        Ok(id) => op.core_id = Some(id),
                        Err(e) => {
                            failure = Some((Some(i), e));
                            break;
                        }
                    }
                }
            }
        }
        if let Some((op, e)) = failure {
            if let Some(c) = &mut self.core {
                let _ = c.execute(ExecType::Rollback, AbortOption::AbortOnError);
            }
            self.status = TxStatus::Aborted;
            return Err(self.fail(op, e));
        }
        // Scans need the transaction open: with scans, Commit executes like NoCommit.
        let exec_now = if new_scans.is_empty() {
            exec
        } else {
            ExecType::NoCommit
        };
        let result = match &mut self.core {
            Some(c) => c.execute(exec_now, abort),
            None => Ok(()),
        };
        self.collect_outcomes(start, end);
        if let Err(e) = result {
            if self
                .core
                .as_ref()
                .is_some_and(|c| c.state() != TxState::Open)
            {
                self.status = TxStatus::Aborted;
            }
            let op = self.error_op;
            return Err(self.fail(op, e));
        }
        for i in new_scans {
            if let Err(e) = self.start_scan(i) {
                return Err(self.fail(Some(i), e));
            }
        }
        if exec_now == ExecType::Commit {
            self.status = TxStatus::Committed;
            self.gci = self.core.as_ref().and_then(|c| c.gci()).unwrap_or(0);
        }
        Ok(())
    }

    /// Copies rows of executed reads into their rec attrs and errors into operations.
    fn collect_outcomes(&mut self, start: usize, end: usize) {
        let TxObj {
            core,
            ops,
            ras,
            error_op,
            ..
        } = self;
        let Some(core) = core.as_mut() else {
            return;
        };
        for (i, op) in ops.iter_mut().enumerate().take(end).skip(start) {
            let Some(id) = op.core_id else {
                continue;
            };
            match core.outcome(id) {
                Some(OpOutcome::Row(_)) => {
                    if let Some(row) = core.take_row(id) {
                        for (k, &ra) in op.ras.iter().enumerate() {
                            if let (Some(r), Some(v)) = (ras.get_mut(ra as usize), row.get(k)) {
                                r.fill(v);
                            }
                        }
                        if let Some(out) = &op.rec_out {
                            out.write(&row);
                        }
                    }
                }
                Some(OpOutcome::Failed(e)) => {
                    op.error.set(e);
                    if error_op.is_none() {
                        *error_op = Some(i);
                    }
                }
                _ => {}
            }
        }
    }

    /// Opens the engine scan of scan operation `i`.
    fn start_scan(&mut self, i: usize) -> Result<()> {
        let TxObj { core, ops, .. } = self;
        let core = core
            .as_mut()
            .ok_or_else(|| codes::internal("no engine transaction"))?;
        let op = &mut ops[i];
        let table = op.table()?.clone();
        let s = op
            .scan
            .as_mut()
            .ok_or_else(|| codes::internal("scan operation without scan state"))?;
        if !s.defined {
            return Err(op_status_error(
                "call readTuples on the scan operation before executing the transaction",
            ));
        }
        let mut columns = op.reads.clone();
        columns.extend(table.def.primary_key.iter().copied());
        let (low, high) = match s.index {
            Some(_) => (
                bound_of(&s.low, &s.index_name)?,
                bound_of(&s.high, &s.index_name)?,
            ),
            None => (None, None),
        };
        let spec = ScanSpec {
            table: table.clone(),
            index: s.index,
            low,
            high,
            descending: s.descending,
            sorted: s.sorted && s.index.is_some(),
            mode: s.mode,
            columns: Some(columns),
            batch_size: if s.batch == 0 {
                rndb_core::api::scan::DEFAULT_SCAN_BATCH
            } else {
                s.batch
            },
        };
        s.core = Some(core.scan(spec)?);
        s.buffer.clear();
        s.ended = false;
        Ok(())
    }

    /// NdbScanOperation::nextResult for scan operation `i`.
    pub fn next_result(&mut self, i: usize, fetch_allowed: bool) -> Result<c_int> {
        let TxObj {
            core,
            ops,
            ras,
            remote,
            ..
        } = self;
        let op = &mut ops[i];
        let table = op.table()?.clone();
        let reads = &op.reads;
        let s = op
            .scan
            .as_mut()
            .ok_or_else(|| codes::bad_argument("not a scan operation"))?;
        if s.closed {
            return Err(codes::scan_closed().detail("the scan was closed"));
        }
        if s.core.is_none() && s.remote.is_none() {
            return Err(op_status_error(
                "the scan has not been executed: call execute(NoCommit) before nextResult",
            ));
        }
        if s.buffer.is_empty() {
            if s.ended {
                return Ok(1);
            }
            if !fetch_allowed {
                return Ok(2);
            }
            let batch = if s.batch == 0 { 256 } else { s.batch };
            if let Some(rs) = s.remote.as_mut() {
                // Rows a locking scan finds deleted when it locks them are skipped.
                while s.buffer.is_empty() && !s.ended {
                    let mut rows = rs.next_batch(batch)?;
                    // A scan that returned its last row has closed itself.
                    if rows.is_empty() || rs.is_closed() {
                        s.ended = true;
                    }
                    if s.mode == LockMode::Exclusive && !rows.is_empty() {
                        rows = crate::remote::lock_rows(remote, &table, reads, rows)?;
                    }
                    s.buffer.extend(rows);
                }
            } else if let Some(cs) = s.core.as_mut() {
                let core = core
                    .as_mut()
                    .ok_or_else(|| codes::internal("no engine transaction"))?;
                while s.buffer.len() < batch {
                    match core.scan_next(cs)? {
                        Some(row) => s.buffer.push_back(row),
                        None => {
                            s.ended = true;
                            break;
                        }
                    }
                }
            }
            if s.buffer.is_empty() {
                return Ok(1);
            }
        }
        let Some(row) = s.buffer.pop_front() else {
            return Ok(1);
        };
        for (k, &ra) in op.ras.iter().enumerate() {
            if let (Some(r), Some(v)) = (ras.get_mut(ra as usize), row.get(k)) {
                r.fill(v);
            }
        }
        let key_at = op.reads.len();
        s.current_key.clear();
        for (k, &p) in table.def.primary_key.iter().enumerate() {
            if let Some(v) = row.get(key_at + k) {
                s.current_key.push((p, v.clone()));
            }
        }
        Ok(0)
    }
}

impl Default for TxObj {
    fn default() -> Self {
        TxObj::new()
    }
}

/// NDB's error 4200 for an operation used out of order.
pub(crate) fn op_status_error(detail: &str) -> NdbError {
    NdbError::new(
        4200,
        ErrorClassification::ApplicationError,
        "Status Error when defining an operation",
    )
    .detail(detail)
}

/// The engine bound of per-column bounds: the defined prefix, inclusive as its last
/// column says.
pub(crate) fn bound_of(b: &[Bound], index: &str) -> Result<Option<(Vec<Value>, bool)>> {
    let n = b.iter().take_while(|x| x.is_some()).count();
    if b[n..].iter().any(|x| x.is_some()) {
        return Err(NdbError::new(
            4259,
            ErrorClassification::ApplicationError,
            "Invalid set of range scan bounds",
        )
        .detail(format!(
            "bounds of index '{index}' must be set on a prefix of its columns"
        )));
    }
    if n == 0 {
        return Ok(None);
    }
    let incl = b[n - 1].as_ref().is_none_or(|x| x.1);
    Ok(Some((
        b[..n].iter().flatten().map(|x| x.0.clone()).collect(),
        incl,
    )))
}
