//! The batched committed-read path of `sendPollNdb` / `execute`: prepared transactions
//! that only do committed primary-key reads are run through `Ndb::read_batch_visit`
//! (or `Ndb::read_batch_into` when BLOB/TEXT columns are read), one engine call per
//! batch (per group of transactions reading the same columns of the same table), each
//! row written from its stored form into the rec attrs and NdbRecord rows.
//!
//! Three levels, tried in order: `run_record_batch` (every transaction one committed
//! read of a whole NdbRecord with an integer key: two passes around one engine call),
//! `run_single_reads` (every transaction one read of the same columns), and the general
//! grouping of `run_fast_reads`. Invariants: the transactions of a batch are distinct
//! live transactions of the calling Ndb's thread (a handle is prepared at most once);
//! no callback runs here (completions are queued for `pollNdb`). No locks are taken
//! here (the engine takes its fragment mutexes inside the call).

use crate::handle::Handle;
use crate::txn::{Completion, OpObj, OpType, RecAttrObj, TxObj, TxStatus};
use rndb_core::api::{Ndb, TableRuntime};
use rndb_core::error::codes;
use rndb_core::schema::layout::StoredRow;
use rndb_core::schema::{RowLayout, Value};
use rndb_core::{ExecType, LockMode, OpKind};
use std::sync::Arc;

/// Appends the primary-key values of `key` (pairs of column and value) in primary-key
/// order.
#[inline]
fn push_key(keys: &mut Vec<Value>, key: &[(usize, Value)], pk: &[usize]) {
    // Keys from a record are in primary-key order; equal() may give any order.
    if key.len() == pk.len() && key.iter().zip(pk).all(|((c, _), p)| c == p) {
        keys.reserve(key.len());
        for (_, v) in key {
            match v {
                // Integers (the usual key) own nothing: copied bitwise into the slot. A
                // clone or a rebuilt value goes through a stack temporary that is read
                // back with a store-forwarding stall.
                Value::UInt(_) | Value::Int(_) => {
                    let len = keys.len();
                    // SAFETY: capacity > len (reserved above); a bitwise copy of a value
                    // without heap data is a valid clone; the slot is written before the
                    // length covers it.
                    unsafe {
                        std::ptr::copy_nonoverlapping(v, keys.as_mut_ptr().add(len), 1);
                        keys.set_len(len + 1);
                    }
                }
                other => keys.push(other.clone()),
            }
        }
    } else {
        for p in pk {
            if let Some((_, v)) = key.iter().find(|(c, _)| c == p) {
                keys.push(v.clone());
            }
        }
    }
}

/// The common batch (flexAsynch, any batch of key lookups through one NdbRecord): every
/// transaction does one read of the same columns of the same table, without BLOB/TEXT
/// columns. Runs it through `Ndb::read_batch_visit` without the grouping of
/// `run_fast_reads`, transaction i reading key i. Returns false, having done nothing,
/// for any other batch.
fn run_single_reads(ndb: &Ndb, txs: &mut [&mut TxObj], sc: &mut Scratch) -> bool {
    let Some(first) = txs.first() else {
        return false;
    };
    if first.n_ops != 1 {
        return false;
    }
    let head = &first.ops[0];
    let Some(table) = head.table.clone() else {
        return false;
    };
    if !txs[1..]
        .iter()
        .all(|t| t.n_ops == 1 && head.same_reads(&t.ops[0]))
    {
        return false;
    }
    // NdbRecord refuses BLOB/TEXT columns, so a whole-record read has none.
    if !head.whole_record
        && head
            .read_cols()
            .iter()
            .any(|&c| table.def.columns[c].ty.is_blob())
    {
        return false;
    }
    let pk = &table.def.primary_key;
    clear_keys(&mut sc.keys, &mut sc.keys_plain);
    for t in txs.iter() {
        push_key(&mut sc.keys, &t.ops[0].key, pk);
    }
    sc.found.clear();
    sc.found.resize(txs.len(), false);
    let layout = &table.def.layout;
    let found = &mut sc.found;
    let txs_v = &mut *txs;
    let r = ndb.read_batch_visit(&table, &sc.keys, &mut |slot, row| {
        let TxObj { ops, ras, .. } = &mut *txs_v[slot];
        deliver(&ops[0], ras, layout, row);
        found[slot] = true;
    });
    for (k, t) in txs.iter_mut().enumerate() {
        if r.is_err() {
            sc.served[k] = false;
        } else if !sc.found[k] {
            t.ops[0].error.set(&codes::tuple_not_found());
        }
    }
    true
}

/// The batch of flexAsynch's read phase, and of any batch of key lookups through one
/// NdbRecord: every prepared transaction (`list`) does one committed read of a whole
/// record, with a key of integers. Runs it in two passes over the transactions (check
/// them and collect their keys; complete them) around one `Ndb::read_batch_visit`, and
/// queues their completions in `done`. Returns false, having completed nothing, for any
/// other batch or when the engine call fails (the general path then runs the batch).
pub(crate) fn run_record_batch(
    ndb: &Ndb,
    list: &[Handle],
    txs: &mut Vec<*mut TxObj>,
    sc: &mut Scratch,
    done: &mut Vec<Completion>,
) -> bool {
    txs.clear();
    clear_keys(&mut sc.keys, &mut sc.keys_plain);
    // Only integer keys are written below (and nothing else until the next clear).
    sc.keys_plain = true;
    // The table and record of the first transaction (compared by address).
    let mut head: Option<(*const TableRuntime, *const crate::record::RecordDef)> = None;
    for &h in list {
        // A compact single read stays one here (see the `single` module); the general
        // path, if this returns false, turns it into an operation.
        let Ok(tx) = crate::ndb::tx_by_handle_raw(h) else {
            return false;
        };
        let Some(a) = &tx.asynch else {
            return false;
        };
        if tx.single_active {
            let s = &tx.single;
            let (Some(def), Some(plan)) = (&s.def, &s.def.as_ref().and_then(|d| d.single_key))
            else {
                return false;
            };
            if tx.single_lock != LockMode::CommittedRead
                || a.exec == ExecType::Rollback
                || tx.status != TxStatus::Open
            {
                return false;
            }
            let this = (Arc::as_ptr(&def.table), Arc::as_ptr(def));
            match head {
                None => head = Some(this),
                Some(first) if first == this => {}
                Some(_) => return false,
            }
            let n = plan.n as usize;
            sc.keys.reserve(n);
            for (k, &raw) in s.key.iter().enumerate().take(n) {
                let len = sc.keys.len();
                // SAFETY: capacity > len (reserved above); the slot is written before
                // the length covers it (straight into the vector: no stack temporary).
                unsafe {
                    sc.keys.as_mut_ptr().add(len).write(plan.value(k, raw));
                    sc.keys.set_len(len + 1);
                }
            }
            txs.push(tx as *mut TxObj);
            continue;
        }
        if tx.status != TxStatus::Open
            || tx.core.is_some()
            || tx.executed != 0
            || tx.define_error.is_some()
            || tx.n_ops != 1
            || a.exec == ExecType::Rollback
        {
            return false;
        }
        let op = &tx.ops[0];
        // `key_plain`: the key came from a record, complete and in primary-key order,
        // integers only (equal/setValue clear it).
        if op.ty != OpType::Key(OpKind::Read(LockMode::CommittedRead))
            || !op.whole_record
            || !op.key_plain
            || !op.values.is_empty()
        {
            return false;
        }
        let (Some(table), Some(out)) = (&op.table, &op.rec_out) else {
            return false;
        };
        let this = (Arc::as_ptr(table), Arc::as_ptr(&out.def));
        match head {
            None => head = Some(this),
            Some(first) if first == this => {}
            Some(_) => return false,
        }
        sc.keys.reserve(op.key.len());
        for (_, v) in &op.key {
            let len = sc.keys.len();
            // SAFETY: capacity > len (reserved above); the values of a `key_plain` key
            // own no heap memory, so a bitwise copy is a clone; the slot is written
            // before the length covers it.
            unsafe {
                std::ptr::copy_nonoverlapping(v, sc.keys.as_mut_ptr().add(len), 1);
                sc.keys.set_len(len + 1);
            }
        }
        txs.push(tx as *mut TxObj);
    }
    let Some(&first) = txs.first() else {
        return false;
    };
    // SAFETY: a live transaction of this thread (checked above). The visitor below
    // only reads the transactions, so this shared borrow stays valid.
    let first = unsafe { &*first };
    let table = if first.single_active {
        first.single.def.as_ref().map(|d| &d.table)
    } else {
        first.ops[0].table.as_ref()
    };
    let Some(table) = table else {
        return false;
    };
    sc.found.clear();
    sc.found.resize(txs.len(), false);
    let layout = &table.def.layout;
    let found = &mut sc.found;
    let ptrs: &[*mut TxObj] = txs;
    let r = ndb.read_batch_visit(table, &sc.keys, &mut |slot, row| {
        let p = ptrs[slot];
        // SAFETY: live transactions of the calling Ndb's thread; only read here (the
        // result row written is the caller's memory, through a raw pointer).
        let tx = unsafe { &*p };
        if tx.single_active {
            if let Some(def) = &tx.single.def {
                crate::record::write_stored_row(def, tx.single.row, &[], layout, row);
            }
        } else if let Some(out) = &tx.ops[0].rec_out {
            out.write_stored(layout, row);
        }
        found[slot] = true;
    });
    if r.is_err() {
        return false;
    }
    for ((&p, &h), &hit) in txs.iter().zip(list).zip(sc.found.iter()) {
        // SAFETY: as above.
        let tx = unsafe { &mut *p };
        let Some(a) = tx.asynch.take() else {
            continue;
        };
        let ok = if tx.single_active && hit {
            tx.finish_single(a.exec);
            true
        } else {
            if tx.single_active {
                // The error goes on the operation: make it (rare).
                tx.materialize_single();
            }
            if !hit {
                tx.ops[0].error.set(&codes::tuple_not_found());
            }
            tx.finish_fast(a.exec, a.abort)
        };
        done.push(Completion {
            tx: h,
            result: if ok { 0 } else { -1 },
            cb: a.cb,
            arg: a.arg,
        });
    }
    true
}

/// Reusable buffers of the batched read path.
#[derive(Default)]
pub(crate) struct Scratch {
    keys: Vec<Value>,
    /// Every value of `keys` is an integer (`run_record_batch` writes only those): they
    /// own nothing, and clearing them needs no drop of each.
    keys_plain: bool,
    out: Vec<Value>,
    found: Vec<bool>,
    members: Vec<(usize, usize)>,
    groups: Vec<usize>,
    assigned: Vec<usize>,
    /// (transaction, operation) of each key of a batch.
    slot_member: Vec<(usize, usize)>,
    /// Columns read by the current group.
    cols: Vec<usize>,
    /// Per transaction of the last `run_fast_reads`: served (false: run it on the slow
    /// path).
    pub served: Vec<bool>,
}

/// Empties a scratch key list `keys` (`plain`: see `Scratch::keys_plain`), leaving it
/// not known to be integers.
#[inline(always)]
fn clear_keys(keys: &mut Vec<Value>, plain: &mut bool) {
    if *plain {
        // SAFETY: integers own nothing: forgetting them is dropping them.
        unsafe { keys.set_len(0) };
        *plain = false;
    } else {
        keys.clear();
    }
}

/// Runs the committed reads of `txs` (all eligible) through `Ndb::read_batch_visit` (or
/// `Ndb::read_batch_into` when BLOB/TEXT columns are read), one call per (table, columns)
/// group. `sc.served` says, per transaction, whether it was served (false: run it on
/// the slow path).
pub(crate) fn run_fast_reads(ndb: &Ndb, txs: &mut [&mut TxObj], sc: &mut Scratch) {
    sc.served.clear();
    sc.served.resize(txs.len(), true);
    if run_single_reads(ndb, txs, sc) {
        return;
    }
    let served = &mut sc.served;
    // Group members (transaction, operation) by the first member with the same table and
    // columns.
    sc.members.clear();
    sc.groups.clear();
    for (t, tx) in txs.iter().enumerate() {
        for o in 0..tx.n_ops {
            sc.members.push((t, o));
        }
    }
    if sc.members.is_empty() {
        return;
    }
    let assigned = &mut sc.assigned;
    assigned.clear();
    // The common case: every member reads the same columns of the same table.
    let (t0, o0) = sc.members[0];
    let head = &txs[t0].ops[o0];
    let one_group = sc
        .members
        .iter()
        .all(|&(t, o)| head.same_reads(&txs[t].ops[o]));
    if one_group {
        assigned.resize(sc.members.len(), 0);
        sc.groups.push(0);
    } else {
        assigned.resize(sc.members.len(), usize::MAX);
    }
    for m in 0..sc.members.len() {
        if assigned[m] != usize::MAX {
            continue;
        }
        let (t, o) = sc.members[m];
        let head = &txs[t].ops[o];
        let g = sc.groups.len();
        sc.groups.push(m);
        for (slot, &(t2, o2)) in assigned[m..].iter_mut().zip(&sc.members[m..]) {
            if *slot != usize::MAX {
                continue;
            }
            if head.same_reads(&txs[t2].ops[o2]) {
                *slot = g;
            }
        }
    }
    for g in 0..sc.groups.len() {
        let first = sc.groups[g];
        let (t0, o0) = sc.members[first];
        let Some(table) = txs[t0].ops[o0].table.clone() else {
            continue;
        };
        sc.cols.clear();
        sc.cols.extend_from_slice(txs[t0].ops[o0].read_cols());
        let cols = &sc.cols;
        clear_keys(&mut sc.keys, &mut sc.keys_plain);
        let mut n = 0;
        for (m, &(t, o)) in sc.members.iter().enumerate() {
            if assigned[m] != g {
                continue;
            }
            push_key(&mut sc.keys, &txs[t].ops[o].key, &table.def.primary_key);
            n += 1;
        }
        // Rows are written straight from their stored form (no Value per column), except
        // when a BLOB/TEXT column is read: its parts are read by `read_batch_into`.
        if !cols.iter().any(|&c| table.def.columns[c].ty.is_blob()) {
            sc.slot_member.clear();
            for (m, &(t, o)) in sc.members.iter().enumerate() {
                if assigned[m] == g {
                    sc.slot_member.push((t, o));
                }
            }
            sc.found.clear();
            sc.found.resize(n, false);
            let layout = &table.def.layout;
            let slot_member = &sc.slot_member;
            let found = &mut sc.found;
            let txs_v = &mut *txs;
            let r = ndb.read_batch_visit(&table, &sc.keys, &mut |slot, row| {
                let (t, o) = slot_member[slot];
                let TxObj { ops, ras, .. } = &mut *txs_v[t];
                deliver(&ops[o], ras, layout, row);
                found[slot] = true;
            });
            for (k, &(t, o)) in sc.slot_member.iter().enumerate() {
                if r.is_err() {
                    served[t] = false;
                } else if !sc.found[k] {
                    txs[t].ops[o].error.set(&codes::tuple_not_found());
                }
            }
            continue;
        }
        let r = ndb.read_batch_into(&table, &sc.keys, cols, &mut sc.out, &mut sc.found);
        let c = cols.len();
        let mut k = 0;
        for (m, &(t, o)) in sc.members.iter().enumerate() {
            if assigned[m] != g {
                continue;
            }
            if r.is_err() {
                served[t] = false;
                continue;
            }
            let tx = &mut *txs[t];
            let TxObj { ops, ras, .. } = tx;
            let op = &mut ops[o];
            if sc.found.get(k).copied().unwrap_or(false) {
                let row = &sc.out[k * c..(k + 1) * c];
                for (i, &ra) in op.ras.iter().enumerate() {
                    if let Some(r) = ras.get_mut(ra as usize) {
                        r.fill(&row[i]);
                    }
                }
                if let Some(out) = &op.rec_out {
                    out.write(row);
                }
            } else {
                op.error.set(&codes::tuple_not_found());
            }
            k += 1;
        }
        debug_assert!(r.is_err() || k == n);
    }
}

/// Copies a row found by a batched read into an operation's outputs: its rec attrs and
/// its NdbRecord result row.
#[inline]
fn deliver(op: &OpObj, ras: &mut [RecAttrObj], layout: &RowLayout, row: StoredRow<'_>) {
    for &ra in &op.ras {
        if let Some(r) = ras.get_mut(ra as usize) {
            r.fill_stored(layout, row);
        }
    }
    if let Some(out) = &op.rec_out {
        out.write_stored(layout, row);
    }
}
