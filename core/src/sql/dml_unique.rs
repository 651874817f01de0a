//! INSERT IGNORE, INSERT ... ON DUPLICATE KEY UPDATE and REPLACE on a table with unique
//! indexes: MySQL's handling of a row whose unique-index value another row holds.
//!
//! The engine finds a unique conflict only after it wrote the main row, and then
//! aborts the transaction (`api::unique`, as NDB's trigger does). So before each row
//! the statement looks up every unique index's entry for the row's values, through
//! its transaction with an exclusive lock (the entry stays locked until the
//! transaction ends), and learns which other rows hold them ([`unique_holders`]):
//! - IGNORE skips the row (counted as a duplicate, as a primary-key conflict is);
//! - ON DUPLICATE KEY UPDATE updates the conflicting row: the row with the same
//!   primary key when there is one (MySQL checks PRIMARY first), else the first
//!   holder in index order;
//! - REPLACE deletes every holder (each counted as an affected row, as MySQL counts
//!   them), then writes the row.
//!
//! Rows go one at a time, each seeing the rows the statement wrote before it.
//!
//! Limits:
//! - a concurrent transaction that takes a value after the lookup (its entry did not
//!   exist, so there was nothing to lock) makes the statement fail with 893;
//! - over TCP the statement is captured at a data node with these rules and the rows
//!   it changes are then applied through a TC (`cluster::remote_sql`, its deletes in
//!   a round before its other writes): with one node group all three behave as here;
//!   with several, a holder in another group is not seen by the capture and is found
//!   only at commit (893).

use crate::api::{ExecType, OpKind, TableRuntime, Transaction};
use crate::error::Result;
use crate::schema::Value;
use crate::txn::LockMode;
use std::sync::Arc;

/// Whether `table` has a unique hash index (the statement then goes row by row).
pub(super) fn has_unique_index(table: &TableRuntime) -> bool {
    table.unique_tables.iter().any(Option::is_some)
}

/// The primary keys of the rows other than the one keyed `own_key` that hold one of
/// `new_row`'s unique-index values (full-width row), in index order, each once.
pub(super) fn unique_holders(
    tx: &mut Transaction,
    table: &Arc<TableRuntime>,
    new_row: &[Value],
    own_key: &[Value],
) -> Result<Vec<Vec<Value>>> {
    let def = &table.def;
    let mut holders: Vec<Vec<Value>> = Vec::new();
    for (i, u) in table.unique_tables.iter().enumerate() {
        let Some(u) = u else { continue };
        let key: Vec<Value> = def.indexes[i]
            .columns
            .iter()
            .map(|&c| new_row.get(c).cloned().unwrap_or(Value::Null))
            .collect();
        // A NULL in the unique columns has no entry (SQL allows many).
        if key.iter().any(Value::is_null) {
            continue;
        }
        // The hidden table: the unique columns, then the main row's primary key.
        let n = key.len();
        let cols: Vec<usize> = (n..n + def.primary_key.len()).collect();
        let found = super::plan::read_keys_in(tx, u, &[key], &cols, LockMode::Exclusive)?;
        if let Some(Some(holder)) = found.into_iter().next()
            && holder != own_key
            && !holders.contains(&holder)
        {
            holders.push(holder);
        }
    }
    Ok(holders)
}

/// Whether the row keyed `key` exists (read through `tx`, exclusive lock).
pub(super) fn row_exists(
    tx: &mut Transaction,
    table: &Arc<TableRuntime>,
    key: &[Value],
) -> Result<bool> {
    let pk0 = table.def.primary_key.first().copied().unwrap_or(0);
    let found = super::plan::read_keys_in(tx, table, &[key.to_vec()], &[pk0], LockMode::Exclusive)?;
    Ok(matches!(found.first(), Some(Some(_))))
}

/// Deletes the row keyed `key` (a REPLACE's holder).
pub(super) fn delete_row(
    tx: &mut Transaction,
    table: &Arc<TableRuntime>,
    key: &[Value],
) -> Result<()> {
    let key: Vec<(usize, Value)> = table
        .def
        .primary_key
        .iter()
        .copied()
        .zip(key.iter().cloned())
        .collect();
    tx.define_by_pos(table, OpKind::Delete, key, Vec::new(), None)?;
    tx.execute(ExecType::NoCommit, crate::api::AbortOption::AbortOnError)
}
