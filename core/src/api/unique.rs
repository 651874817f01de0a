//! What NDB does with triggers inside a transaction: BLOB/TEXT parts and unique hash
//! indexes, both kept in hidden tables.
//!
//! A BLOB/TEXT value keeps its first bytes inline in the row (the head: u64 total length
//! and up to 256 bytes) and the rest in `NDB$BLOB_<table>_<column>`, one row per part of
//! 2000 (BLOB/TEXT) or 4000 (MEDIUM/LONG) bytes keyed by the main row's key and the part
//! number. A unique hash index is a hidden table keyed by the unique columns whose rows
//! hold the main row's key; a row whose unique columns contain NULL has no entry (SQL
//! allows many NULLs). A duplicate in it is error 893.
//!
//! Every write of a table with such columns runs here, on its own: it reads the old row
//! (exclusive lock) when the old values are needed, writes the main row, then the hidden
//! rows. A failure after the main row was written aborts the transaction.

use super::cluster::ClusterInner;
use super::dict::TableRuntime;
use super::transaction::{OpKind, OpOutcome, Transaction, blob_parts};
use crate::error::{Result, codes};
use crate::schema::layout::{blob_bytes, blob_head, decode_blob};
use crate::schema::{ColumnType, Value};
use crate::txn::lock::LockMode;
use std::sync::Arc;

impl Transaction {
    /// Runs a write (insert, update, write, delete) of a table with BLOB/TEXT columns or
    /// unique indexes, including the hidden-table work.
    pub(super) fn run_write_with_follow_ups(
        &mut self,
        table: &Arc<TableRuntime>,
        p: &mut super::transaction::Prepared,
    ) -> Result<()> {
        let kind = self.ops[p.op].kind;
        let def = table.def.clone();
        let key: Vec<(usize, Value)> = def
            .primary_key
            .iter()
            .copied()
            .zip(p.key_values.iter().cloned())
            .collect();
        let all: Vec<usize> = (0..def.columns.len()).collect();
        let needs_old = kind != OpKind::Insert;
        let old = if needs_old {
            match self.run_single(
                table,
                OpKind::Read(LockMode::Exclusive),
                key.clone(),
                vec![],
                Some(all.clone()),
            ) {
                Ok(r) => r,
                Err(e) if e.code == 626 && kind == OpKind::Write => None,
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let effective = match (kind, &old) {
            (OpKind::Write, None) => OpKind::Insert,
            (OpKind::Write, Some(_)) => OpKind::Update,
            (k, _) => k,
        };
        // The main row.
        let main_values: Vec<(usize, Value)> = match effective {
            OpKind::Insert => p.full.iter().cloned().enumerate().collect(),
            // A write that became an update: the key columns among its values are the
            // key itself, not changes.
            _ => p
                .changes
                .iter()
                .filter(|(c, _)| !def.columns[*c].primary_key)
                .cloned()
                .collect(),
        };
        let main_key = key.clone();
        let main_kind = if effective == OpKind::Insert {
            OpKind::Insert
        } else {
            effective
        };
        self.run_single(
            table,
            main_kind,
            main_key,
            if main_kind == OpKind::Delete {
                vec![]
            } else {
                main_values
            },
            None,
        )?;
        // From here on a failure leaves the main row changed: abort the transaction.
        let r = self.follow_ups(table, effective, &key, old.as_deref(), p);
        if let Err(e) = r {
            return Err(self.abort_with(e));
        }
        self.ops[p.op].outcome = OpOutcome::Done;
        Ok(())
    }

    fn follow_ups(
        &mut self,
        table: &Arc<TableRuntime>,
        kind: OpKind,
        key: &[(usize, Value)],
        old: Option<&[Value]>,
        p: &super::transaction::Prepared,
    ) -> Result<()> {
        let def = table.def.clone();
        let new_row: Option<Vec<Value>> = match kind {
            OpKind::Insert => Some(p.full.clone()),
            OpKind::Update => old.map(|o| {
                let mut v = o.to_vec();
                for (c, x) in &p.changes {
                    v[*c] = x.clone();
                }
                v
            }),
            _ => None,
        };
        // Unique indexes.
        for (i, u) in table.unique_tables.iter().enumerate() {
            let Some(u) = u else { continue };
            let cols = &def.indexes[i].columns;
            let key_of = |row: &[Value]| -> Option<Vec<Value>> {
                let k: Vec<Value> = cols.iter().map(|&c| row[c].clone()).collect();
                (!k.iter().any(|v| v.is_null())).then_some(k)
            };
            let old_key = old.and_then(key_of);
            let new_key = new_row.as_deref().and_then(key_of);
            if old_key == new_key {
                continue;
            }
            if let Some(k) = old_key {
                let ukey: Vec<(usize, Value)> = k.into_iter().enumerate().collect();
                self.run_single(u, OpKind::Delete, ukey, vec![], None)?;
            }
            if let Some(k) = new_key {
                let n = k.len();
                let ukey: Vec<(usize, Value)> = k.into_iter().enumerate().collect();
                let vals: Vec<(usize, Value)> = key
                    .iter()
                    .enumerate()
                    .map(|(j, (_, v))| (n + j, v.clone()))
                    .collect();
                match self.run_single(u, OpKind::Insert, ukey, vals, None) {
                    Err(e) if e.code == 630 => {
                        return Err(codes::unique_violation()
                            .detail(format!("index '{}'", def.indexes[i].name)));
                    }
                    r => {
                        r?;
                    }
                }
            }
        }
        // BLOB/TEXT parts.
        for (c, bt) in table.blob_tables.iter().enumerate() {
            let Some(bt) = bt else { continue };
            let ty = def.columns[c].ty;
            let new_value = match kind {
                OpKind::Insert => p.full.get(c).cloned(),
                OpKind::Update => p
                    .changes
                    .iter()
                    .find(|(x, _)| *x == c)
                    .map(|(_, v)| v.clone()),
                _ => None,
            };
            let replacing = kind == OpKind::Delete || new_value.is_some();
            if !replacing {
                continue;
            }
            if let Some(old) = old {
                let n_old = match &old[c] {
                    Value::Bytes(head) => blob_parts(&ty, blob_head(head).0),
                    _ => 0,
                };
                for part in 0..n_old {
                    self.run_single(bt, OpKind::Delete, part_key(key, part), vec![], None)?;
                }
            }
            if let Some(v) = new_value.filter(|v| !v.is_null()) {
                let bytes = blob_bytes(&ty, &v);
                let ColumnType::Blob { kind: bk, .. } = ty else {
                    continue;
                };
                let inline = bk.inline_size() as usize;
                let part_size = bk.part_size() as usize;
                if bytes.len() > inline {
                    let data_col = key.len() + 1;
                    for (part, chunk) in bytes[inline..].chunks(part_size).enumerate() {
                        self.run_single(
                            bt,
                            OpKind::Insert,
                            part_key(key, part as u32),
                            vec![(data_col, Value::Bytes(chunk.to_vec()))],
                            None,
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Replaces the stored heads of BLOB/TEXT columns in a read row by their full values.
    /// `key` are the row's primary key values (key order), `cols` the row's columns.
    pub(crate) fn finish_blobs(
        &mut self,
        table: &Arc<TableRuntime>,
        key: &[Value],
        cols: &[usize],
        row: &mut [Value],
    ) -> Result<()> {
        let def = table.def.clone();
        let pk: Vec<(usize, Value)> = def
            .primary_key
            .iter()
            .copied()
            .zip(key.iter().cloned())
            .collect();
        for (k, &c) in cols.iter().enumerate() {
            // A pseudo column (ROW_GCI) is no column of the table.
            let Some(col) = def.columns.get(c) else {
                continue;
            };
            let ty = col.ty;
            if !ty.is_blob() {
                continue;
            }
            let Value::Bytes(head) = &row[k] else {
                continue;
            };
            let (total, inline) = blob_head(head);
            let mut all = inline.to_vec();
            if let Some(bt) = &table.blob_tables[c] {
                let n = blob_parts(&ty, total);
                let data_col = pk.len() + 1;
                for part in 0..n {
                    let r = self.run_single(
                        bt,
                        OpKind::Read(LockMode::CommittedRead),
                        part_key(&pk, part),
                        vec![],
                        Some(vec![data_col]),
                    )?;
                    if let Some(Value::Bytes(b)) = r.and_then(|mut r| r.pop()) {
                        all.extend_from_slice(&b);
                    }
                }
            }
            if all.len() as u64 != total {
                return Err(codes::internal(format!(
                    "BLOB column '{}' of the row with key {:?} has {} of {total} bytes",
                    def.columns[c].name,
                    key,
                    all.len()
                )));
            }
            row[k] = decode_blob(&ty, all);
        }
        Ok(())
    }
}

fn part_key(key: &[(usize, Value)], part: u32) -> Vec<(usize, Value)> {
    let mut k: Vec<(usize, Value)> = key
        .iter()
        .enumerate()
        .map(|(i, (_, v))| (i, v.clone()))
        .collect();
    k.push((key.len(), Value::UInt(part as u64)));
    k
}

/// Fills a new unique index from the committed rows of its table (CREATE UNIQUE INDEX).
pub(crate) fn build_unique_index(
    cluster: &Arc<ClusterInner>,
    table: &Arc<TableRuntime>,
    index_pos: usize,
    unique: &Arc<TableRuntime>,
) -> Result<()> {
    let def = table.def.clone();
    let cols = def.indexes[index_pos].columns.clone();
    let pk = def.primary_key.clone();
    let mut wanted = cols.clone();
    wanted.extend(pk.iter().copied());
    // Scan each primary fragment, insert index rows in one transaction per batch.
    let rows = super::scan::collect_committed(table, &wanted)?;
    let mut tx = Transaction::new(cluster.clone())?;
    for row in rows {
        let (k, p) = row.split_at(cols.len());
        if k.iter().any(|v| v.is_null()) {
            continue;
        }
        let n = k.len();
        let ukey: Vec<(usize, Value)> = k.iter().cloned().enumerate().collect();
        let vals: Vec<(usize, Value)> = p
            .iter()
            .cloned()
            .enumerate()
            .map(|(j, v)| (n + j, v))
            .collect();
        match tx.run_single(unique, OpKind::Insert, ukey, vals, None) {
            Err(e) if e.code == 630 => {
                return Err(codes::unique_violation()
                    .detail(format!("index '{}'", def.indexes[index_pos].name)));
            }
            r => {
                r?;
            }
        }
    }
    tx.execute(
        super::transaction::ExecType::Commit,
        super::transaction::AbortOption::AbortOnError,
    )
}
