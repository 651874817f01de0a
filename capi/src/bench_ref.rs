//! Benchmark-only (cargo feature `bench-reference`, not in `include/rndb.h`): the
//! reference side of flexAsynch's same-run A/B (`benches/flexasynch/ab.sh`).
//!
//! The C++ flexAsynch program in `-ab` mode alternates, in one process, on the same
//! threads, table and keys, a slice through its NdbRecord path over the C ABI with a
//! slice through these functions, which run exactly the Rust API batches of
//! `capi/benches/flexasynch_rust.rs`: reads through one `Ndb::read_batch_visit` per
//! batch with each row's columns copied out one by one (`RowLayout::col_bytes`), writes
//! as one engine `Transaction` per operation (`define_by_pos` + `execute(Commit)`). No
//! handle table, no per-transaction object: a call costs one C call per batch, which is
//! what the comparison leaves out of the reference on purpose.
//!
//! The context is a plain boxed pointer (not a checked handle, unlike the rest of the
//! ABI): NULL is refused, anything else must come from `rndb_bench_reference_create` and
//! not be freed yet. Panics are caught as in every entry point.

use crate::error::guard;
use crate::ndb::ndb_mut;
use crate::{rndb_ndb, rndb_table};
use rndb_core::api::{Ndb, TableRuntime};
use rndb_core::error::{Result, codes};
use rndb_core::schema::{ColumnType, Value};
use rndb_core::{AbortOption, ExecType, OpKind};
use std::ffi::c_int;
use std::sync::Arc;

/// The reference context of one thread (opaque): the engine `Ndb`, the table, and the
/// buffers `flexasynch_rust.rs` keeps across batches.
pub struct rndb_bench_reference {
    ndb: Ndb,
    table: Arc<TableRuntime>,
    /// Non-key columns 1..=attrs, each a 4-byte unsigned integer.
    attrs: usize,
    keys: Vec<Value>,
}

/// The most attribute columns a reference context takes (TAB0 has 24).
const MAX_ATTRS: usize = 32;

fn context<'a>(r: *mut rndb_bench_reference) -> Result<&'a mut rndb_bench_reference> {
    if r.is_null() {
        return Err(codes::bad_argument("NULL rndb_bench_reference"));
    }
    // SAFETY: the caller's promise (see the module notes).
    Ok(unsafe { &mut *r })
}

/// Benchmark-only (feature `bench-reference`). A reference context for `table` (column
/// 0 an integer primary key, then at most 32 columns of Uint32, as flexAsynch's TAB0)
/// on the engine of `ndb` (embedded only; its `init` must have succeeded). NULL on
/// failure (rndb_last_error). Free with `rndb_bench_reference_free`.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_bench_reference_create(
    ndb: *mut rndb_ndb,
    table: *const rndb_table,
) -> *mut rndb_bench_reference {
    guard("rndb_bench_reference_create", || {
        let (_, n) = ndb_mut(ndb)?;
        let core = n.core()?.clone();
        let table = crate::dict::table_runtime(table)?;
        let cols = &table.def.columns;
        let attrs = cols.len().saturating_sub(1);
        let key_ok = table.def.primary_key == [0]
            && matches!(cols.first().map(|c| &c.ty), Some(ColumnType::Int { .. }));
        let attrs_ok = attrs <= MAX_ATTRS
            && cols.iter().skip(1).all(|c| {
                matches!(
                    c.ty,
                    ColumnType::Int {
                        bytes: 4,
                        unsigned: true
                    }
                ) && !c.nullable
            });
        if !key_ok || !attrs_ok {
            return Err(codes::bad_argument(
                "a reference table has an integer key in column 0 and at most 32 NOT NULL \
                 Uint32 columns after it",
            ));
        }
        let ctx = rndb_bench_reference {
            ndb: core,
            table,
            attrs,
            keys: Vec::new(),
        };
        Ok(Box::into_raw(Box::new(ctx)))
    })
}

/// Benchmark-only. Frees a reference context; NULL is ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_bench_reference_free(r: *mut rndb_bench_reference) {
    if !r.is_null() {
        // SAFETY: made by rndb_bench_reference_create (the caller's promise).
        drop(unsafe { Box::from_raw(r) });
    }
}

/// Benchmark-only. Committed reads of `n` keys in one `Ndb::read_batch_visit`, as
/// `flexasynch_rust.rs` does them: the columns of the row of key i copied one by one,
/// under the fragment's mutex, to `out + i * stride_bytes` (the table's attribute
/// columns as Uint32, in column order; rows not found are left as they are). Returns
/// how many rows were found, -1 on error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_bench_reference_read(
    r: *mut rndb_bench_reference,
    keys: *const u64,
    n: usize,
    out: *mut u32,
    stride_bytes: usize,
) -> c_int {
    guard("rndb_bench_reference_read", || {
        let c = context(r)?;
        if n == 0 {
            return Ok(0);
        }
        if keys.is_null() || out.is_null() {
            return Err(codes::bad_argument("NULL keys or rows"));
        }
        // SAFETY: the caller passes n keys.
        let ks = unsafe { std::slice::from_raw_parts(keys, n) };
        c.keys.clear();
        c.keys.extend(ks.iter().map(|&k| Value::UInt(k)));
        let layout = &c.table.def.layout;
        let attrs = c.attrs;
        let mut hits = 0;
        c.ndb
            .read_batch_visit(&c.table, &c.keys, &mut |slot, stored| {
                // SAFETY: the caller's rows: n rows of `stride_bytes`, each with room for the
                // table's attributes (`slot` < n); unaligned writes, any stride works.
                let row = unsafe { out.cast::<u8>().add(slot * stride_bytes).cast::<u32>() };
                for a in 0..attrs {
                    if let Some(b) = layout.col_bytes(a + 1, stored.fixed, stored.var) {
                        let x = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                        // SAFETY: as above.
                        unsafe { row.add(a).write_unaligned(x) };
                    }
                }
                hits += 1;
            })?;
        Ok(hits)
    })
}

/// Benchmark-only. `n` single-operation write transactions, as `flexasynch_rust.rs`
/// runs them: `kind` 0 insert, 1 update, 2 delete of key `keys[i]`, attribute column
/// `a` (1-based) set to `(Uint32)key + a + delta`; each its own engine `Transaction`
/// (`define_by_pos`, `execute(Commit, AbortOnError)`, `close`). Returns how many
/// committed, -1 on an engine error outside the transactions.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_bench_reference_write(
    r: *mut rndb_bench_reference,
    kind: c_int,
    keys: *const u64,
    n: usize,
    delta: u32,
) -> c_int {
    guard("rndb_bench_reference_write", || {
        let c = context(r)?;
        let kind = match kind {
            0 => OpKind::Insert,
            1 => OpKind::Update,
            2 => OpKind::Delete,
            _ => return Err(codes::bad_argument("kind is 0, 1 or 2")),
        };
        if n == 0 {
            return Ok(0);
        }
        if keys.is_null() {
            return Err(codes::bad_argument("NULL keys"));
        }
        // SAFETY: the caller passes n keys.
        let ks = unsafe { std::slice::from_raw_parts(keys, n) };
        let mut ok = 0;
        for &k in ks {
            let key = vec![(0, Value::UInt(k))];
            let values = if kind == OpKind::Delete {
                Vec::new()
            } else {
                (1..=c.attrs)
                    .map(|a| {
                        (
                            a,
                            Value::UInt((k as u32).wrapping_add(a as u32 + delta) as u64),
                        )
                    })
                    .collect()
            };
            let mut tx = c.ndb.start_transaction()?;
            let op = tx.define_by_pos(&c.table, kind, key, values, None)?;
            if tx
                .execute(ExecType::Commit, AbortOption::AbortOnError)
                .is_ok()
            {
                ok += 1;
            }
            std::hint::black_box(tx.take_row(op));
            tx.close();
        }
        Ok(ok)
    })
}
