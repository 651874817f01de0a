//! The compact single read: `readTuple(record)` as the first operation of a fresh
//! transaction, reading a whole NdbRecord by an integer key (the key-value lookup, and
//! every transaction of flexAsynch's read phase), kept in the transaction object itself
//! instead of an operation object.
//!
//! What is kept ([`SingleRead`]): the record, the key values (read from the key row at
//! definition, as for any record operation), the lock mode and the result row. The
//! operation object costs more than the read itself on this path: its fields, its key
//! vector and its record output are several cache lines per transaction, touched by the
//! definition, the batch and the completion.
//!
//! Invariant: while `single_active` is set, the transaction has exactly this one
//! operation and `n_ops` is 0 (its `ops` are stale leftovers of earlier transactions).
//! Only the hot path sees that state: `readTuple(record)` (which makes it),
//! `executeAsynchPrepare` (which does not look at operations), the record batch of
//! `sendPollNdb` (`batch::run_record_batch`, which completes it) and
//! `closeTransaction`. Every other access to a transaction goes through
//! `ndb::tx_by_handle`, which first turns the single read into operation 0
//! ([`TxObj::materialize_single`]), so the rest of the C ABI never sees it: an operation
//! handle used afterwards (getNdbError, getValue...), a second operation, a synchronous
//! execute, a rollback or a batch that does not qualify all work as before.

use crate::record::{RecOut, RecordDef};
use crate::txn::{OpType, TxObj, TxStatus};
use rndb_core::schema::{ColumnType, Value};
use rndb_core::{ExecType, LockMode, OpKind};
use std::sync::Arc;

/// At most this many key columns for a compact read (more take the operation object).
pub(crate) const SINGLE_KEY_MAX: usize = 2;

/// How a record's key is read for a compact read: every primary-key column is in the
/// record, NOT NULL, an integer of 1, 2, 4 or 8 bytes; at most [`SINGLE_KEY_MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SingleKey {
    pub n: u8,
    /// Per key column, in primary-key order: (table column, offset in the row, bytes,
    /// unsigned).
    pub cols: [(u32, u32, u8, bool); SINGLE_KEY_MAX],
}

impl SingleKey {
    /// The plan of a record whose key plan is `key_plan` (table column, record column
    /// types and offsets in `cols`), if it qualifies.
    pub fn of(key_plan: &[(usize, usize)], cols: &[crate::record::RecCol]) -> Option<SingleKey> {
        if key_plan.is_empty() || key_plan.len() > SINGLE_KEY_MAX {
            return None;
        }
        let mut k = SingleKey {
            n: key_plan.len() as u8,
            cols: [(0, 0, 0, false); SINGLE_KEY_MAX],
        };
        for (slot, &(p, ci)) in k.cols.iter_mut().zip(key_plan) {
            let rc = &cols[ci];
            let ColumnType::Int { bytes, unsigned } = rc.ty else {
                return None;
            };
            if rc.null.is_some() || !matches!(bytes, 1 | 2 | 4 | 8) {
                return None;
            }
            *slot = (
                u32::try_from(p).ok()?,
                u32::try_from(rc.offset).ok()?,
                bytes,
                unsigned,
            );
        }
        Some(k)
    }

    /// Reads the key of `row` as raw 64-bit values (sign-extended for signed columns).
    ///
    /// # Safety
    /// `row` holds the record's layout (NDB's contract for a key row).
    #[inline(always)]
    pub unsafe fn read(&self, row: *const u8, out: &mut [u64; SINGLE_KEY_MAX]) {
        for (o, &(_, offset, bytes, unsigned)) in out.iter_mut().zip(&self.cols[..self.n as usize])
        {
            // SAFETY: `bytes` readable bytes at the offset (the caller's row).
            let raw = unsafe {
                let p = row.add(offset as usize);
                match bytes {
                    8 => (p as *const u64).read_unaligned().to_le(),
                    4 => (p as *const u32).read_unaligned().to_le() as u64,
                    2 => (p as *const u16).read_unaligned().to_le() as u64,
                    _ => *p as u64,
                }
            };
            *o = if unsigned || bytes == 8 {
                raw
            } else {
                let shift = 64 - 8 * bytes as u32;
                (((raw << shift) as i64) >> shift) as u64
            };
        }
    }

    /// The engine value of key column `k` whose raw value is `raw`.
    #[inline(always)]
    pub fn value(&self, k: usize, raw: u64) -> Value {
        if self.cols[k].3 {
            Value::UInt(raw)
        } else {
            Value::Int(raw as i64)
        }
    }
}

/// A compact single read of a transaction (see the module notes; whether there is one
/// and its lock mode are `TxObj::single_active` and `single_lock`, which fit in the
/// object's first cache lines). The record is kept across the transactions of the
/// object (replaced only by another record), so a steady flow of reads through one
/// record does no reference counting.
pub(crate) struct SingleRead {
    pub def: Option<Arc<RecordDef>>,
    /// The caller's result row.
    pub row: *mut u8,
    /// Raw key values, `def.single_key` says how many and how to read them.
    pub key: [u64; SINGLE_KEY_MAX],
}

// `row` is the caller's memory, written only by the thread using the transaction.
unsafe impl Send for SingleRead {}

impl SingleRead {
    pub fn new() -> SingleRead {
        SingleRead {
            def: None,
            row: std::ptr::null_mut(),
            key: [0; SINGLE_KEY_MAX],
        }
    }
}

impl TxObj {
    /// Whether `readTuple(record)` can make a compact single read: nothing defined,
    /// executed or prepared yet.
    #[inline(always)]
    pub fn fresh(&self) -> bool {
        !self.single_active
            && self.n_ops == 0
            && self.status == TxStatus::Open
            && self.asynch.is_none()
            && self.core.is_none()
    }

    /// Defines the compact single read (the caller checked `fresh` and the arguments).
    ///
    /// # Safety
    /// `key_row` holds the layout of `def` (NDB's contract).
    #[inline(always)]
    pub unsafe fn define_single(
        &mut self,
        def: &Arc<RecordDef>,
        plan: &SingleKey,
        key_row: *const u8,
        row: *mut u8,
        lock: LockMode,
    ) {
        let s = &mut self.single;
        // SAFETY: the caller's promise.
        unsafe { plan.read(key_row, &mut s.key) };
        if !s.def.as_ref().is_some_and(|d| Arc::ptr_eq(d, def)) {
            s.def = Some(def.clone());
        }
        s.row = row;
        self.single_lock = lock;
        self.single_active = true;
    }

    /// Completes a single read run by a record batch that found its row: the transaction
    /// executed its one operation (committed by a Commit).
    #[inline(always)]
    pub fn finish_single(&mut self, exec: ExecType) {
        self.executed = 1;
        if exec == ExecType::Commit {
            self.status = TxStatus::Committed;
        }
    }

    /// Turns the compact single read into operation 0 (see the module notes); the
    /// transaction is then as the operation path would have left it.
    #[cold]
    #[inline(never)]
    pub fn materialize_single(&mut self) {
        self.single_active = false;
        self.dirty = true;
        let Some(def) = self.single.def.clone() else {
            return;
        };
        let Some(plan) = def.single_key else {
            return;
        };
        debug_assert_eq!(self.n_ops, 0, "a single read is the only operation");
        // Operation 0 of a fresh transaction: `add_op` only fails beyond 2^20 operations.
        let Ok(i) = self.add_op() else {
            return;
        };
        let key = self.single.key;
        let (lock, row) = (self.single_lock, self.single.row);
        let o = &mut self.ops[i];
        if !o.table.as_ref().is_some_and(|t| Arc::ptr_eq(t, &def.table)) {
            o.table = Some(def.table.clone());
        }
        o.ty = OpType::Key(OpKind::Read(lock));
        o.key.clear();
        for (k, &raw) in key.iter().enumerate().take(plan.n as usize) {
            o.key.push((plan.cols[k].0 as usize, plan.value(k, raw)));
        }
        o.key_plain = true;
        o.whole_record = true;
        match &mut o.rec_out {
            Some(r) if Arc::ptr_eq(&r.def, &def) => {
                r.row = row;
                r.cols.clear();
            }
            _ => {
                o.rec_out = Some(RecOut {
                    def,
                    row,
                    cols: Vec::new(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::txn::TxObj;
    use std::mem::{offset_of, size_of};

    /// What a compact single read touches of its transaction object, after the slot's
    /// generation (8 bytes with padding), fits in two cache lines.
    #[test]
    fn hot_fields_fit_two_cache_lines() {
        let hot_end = offset_of!(TxObj, single) + size_of::<super::SingleRead>();
        assert!(8 + hot_end <= 128, "hot fields end at {hot_end}");
        // closeTransaction's fields, with the generation, in the first line; the
        // asynch tag is its first field (`Asynch` is repr(C)).
        assert!(8 + offset_of!(TxObj, asynch) < 64);
        assert!(8 + offset_of!(TxObj, single_active) < 64);
        for off in [
            offset_of!(TxObj, ndb),
            offset_of!(TxObj, asynch),
            offset_of!(TxObj, status),
            offset_of!(TxObj, dirty),
            offset_of!(TxObj, single_active),
            offset_of!(TxObj, core),
        ] {
            assert!(off < hot_end);
        }
    }
}
