//! The joining side of a node restart that copies changed rows only (NDB's node
//! restart from the node's own checkpoint, then the rows changed since; the protocol
//! is in `copy`, the source's side in `copy_out`).
//!
//! A node that restored checkpoint `g` from its own files offers it in `CopyReq`,
//! with the tables it holds. When `CopySchema` comes, a table whose SHOW CREATE TABLE
//! text is the same here and at the source (and was offered) is *kept* with its rows;
//! every other table is made anew and copied whole, as in an initial node restart.
//! For a kept table:
//!
//! - every local row with ROW_GCI above `g` was written in this copy (after-images
//!   from the primaries after the copy mark, or rows of this copy): it is newer than
//!   anything the source's scan sends, and stays;
//! - a whole row (changed at the source after `g`) replaces a local row with ROW_GCI
//!   at or below `g`, or is inserted;
//! - a key alone (unchanged at the source since `g`) must find its row here, unless a
//!   delete from a primary took it: a missing one means the node's files did not hold
//!   what it offered, and the copy fails (the next attempt copies every row);
//! - after `CopyDone`, every local row with ROW_GCI at or below `g` whose key the
//!   source did not send is gone at the source (deleted while this node was down) and
//!   is deleted here ([`DeltaApply::sweep`]) before the node reports up to date.
//!
//! Keys seen are kept as 128-bit XXH3 hashes of the row key (16 bytes a row; two keys
//! of one table share a hash with probability about n²/2¹²⁹).
//!
//! Lock order: `copy_apply` (the copy thread's), then what `DataPath` documents.

use super::DataPath;
use super::copy::{Applied, Tomb};
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome, ScanSpec};
use crate::error::{Result, codes};
use crate::schema::Value;
use crate::schema::layout::ROW_GCI_COLUMN;
use crate::txn::lock::LockMode;
use std::collections::{BTreeMap, HashSet, VecDeque};

/// Rows read per batch of the sweep's scan.
const SWEEP_SCAN_BATCH: usize = 1024;

/// The offer this node made with its current `CopyReq`.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub attempt: u64,
    pub since_gci: u32,
    pub keep: Vec<(String, String)>,
}

/// A kept table: its database as the dictionary spells it, the keys seen in this
/// copy.
struct Kept {
    database: String,
    seen: HashSet<u128>,
}

/// What a copy of changed rows has kept and seen (module notes).
pub(crate) struct DeltaApply {
    pub attempt: u64,
    pub since_gci: u32,
    /// Kept tables by (lower-case database, table name).
    tables: BTreeMap<(String, String), Kept>,
    /// The rows to delete after `CopyDone` (database, table, key): None until found.
    sweep: Option<VecDeque<(String, String, Vec<Value>)>>,
    pub rows_whole: u64,
    pub rows_kept: u64,
    pub rows_deleted: u64,
}

impl DeltaApply {
    pub fn new(attempt: u64, since_gci: u32) -> DeltaApply {
        DeltaApply {
            attempt,
            since_gci,
            tables: BTreeMap::new(),
            sweep: None,
            rows_whole: 0,
            rows_kept: 0,
            rows_deleted: 0,
        }
    }

    pub fn keep_table(&mut self, database: &str, table: &str) {
        self.tables.insert(
            (database.to_ascii_lowercase(), table.to_string()),
            Kept {
                database: database.to_string(),
                seen: HashSet::new(),
            },
        );
    }

    pub fn kept(&self, database: &str, table: &str) -> bool {
        self.tables
            .contains_key(&(database.to_ascii_lowercase(), table.to_string()))
    }

    pub fn kept_tables(&self) -> usize {
        self.tables.len()
    }

    fn seen_mut(&mut self, database: &str, table: &str) -> Option<&mut HashSet<u128>> {
        self.tables
            .get_mut(&(database.to_ascii_lowercase(), table.to_string()))
            .map(|k| &mut k.seen)
    }
}

fn key_hash(row_key: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(row_key)
}

impl DataPath {
    /// Applies, from row `start` on, a `CopyRows` of a kept table: the first
    /// `full_rows` whole, the rest keys (module notes).
    pub(super) fn apply_delta_rows(
        &self,
        d: &mut DeltaApply,
        database: &str,
        table: &str,
        full_rows: usize,
        rows: &[Vec<Value>],
        start: usize,
    ) -> Result<Applied> {
        let rt = self.engine.inner().table(database, table)?;
        let pk = rt.def.primary_key.clone();
        let ndb = self.engine.ndb(database);
        let since = u64::from(d.since_gci);
        for (n, row) in rows
            .iter()
            .enumerate()
            .skip(start)
            .take(full_rows.saturating_sub(start))
        {
            if row.len() != rt.def.columns.len() {
                return Err(codes::internal("copied row has the wrong column count"));
            }
            let key: Vec<Value> = pk.iter().map(|&p| row[p].clone()).collect();
            let k = self.row_key(database, table, &key)?;
            match self.tombstones.lock().get(&k) {
                Some(Tomb::Pending(_)) => return Ok(Applied::Blocked(n)),
                Some(Tomb::Committed) => continue,
                None => {}
            }
            let key_pos: Vec<(usize, Value)> = pk.iter().copied().zip(key).collect();
            let mut tx = ndb.start_transaction()?;
            tx.define_by_pos(
                &rt,
                OpKind::Read(LockMode::Exclusive),
                key_pos.clone(),
                Vec::new(),
                Some(vec![ROW_GCI_COLUMN]),
            )?;
            let r = tx.execute(ExecType::NoCommit, AbortOption::IgnoreError);
            let locked = matches!(tx.outcome(OpId(0)), Some(OpOutcome::Failed(e)) if e.code == 266)
                || r.as_ref().is_err_and(|e| e.code == 266);
            if locked {
                tx.close();
                return Ok(Applied::Blocked(n));
            }
            r?;
            let kind = match tx.outcome(OpId(0)) {
                Some(OpOutcome::Row(v)) => match v.first() {
                    // Written in this copy: newer than the source's scan.
                    Some(Value::UInt(g)) if *g > since => None,
                    Some(Value::UInt(_)) => Some(OpKind::Write),
                    other => {
                        return Err(codes::internal(format!("ROW_GCI read as {other:?}")));
                    }
                },
                Some(OpOutcome::Failed(e)) if e.code == 626 => Some(OpKind::Insert),
                Some(OpOutcome::Failed(e)) => return Err(e.clone()),
                _ => return Err(codes::internal("copy: the row's read did not run")),
            };
            if let Some(kind) = kind {
                let values: Vec<(usize, Value)> = row.iter().cloned().enumerate().collect();
                let key = if kind == OpKind::Write {
                    key_pos
                } else {
                    Vec::new()
                };
                tx.define_by_pos(&rt, kind, key, values, None)?;
                match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
                    Ok(()) => d.rows_whole += 1,
                    Err(e) if e.code == 266 => return Ok(Applied::Blocked(n)),
                    Err(e) => return Err(e),
                }
            } else {
                tx.close();
            }
            if let Some(seen) = d.seen_mut(database, table) {
                seen.insert(key_hash(&k));
            }
        }
        let from = start.max(full_rows);
        if from < rows.len() {
            return self.check_kept_keys(d, database, table, &rows[from..], from);
        }
        Ok(Applied::Done)
    }

    /// Keys of rows unchanged at the source: each must be here (one committed-read
    /// batch), or deleted by a primary since the copy began.
    fn check_kept_keys(
        &self,
        d: &mut DeltaApply,
        database: &str,
        table: &str,
        keys: &[Vec<Value>],
        offset: usize,
    ) -> Result<Applied> {
        let rt = self.engine.inner().table(database, table)?;
        let pk = rt.def.primary_key.clone();
        let mut tx = self.engine.ndb(database).start_transaction()?;
        for key in keys {
            if key.len() != pk.len() {
                return Err(codes::internal("copied key has the wrong column count"));
            }
            let key_pos: Vec<(usize, Value)> =
                pk.iter().copied().zip(key.iter().cloned()).collect();
            tx.define_by_pos(
                &rt,
                OpKind::Read(LockMode::CommittedRead),
                key_pos,
                Vec::new(),
                Some(vec![ROW_GCI_COLUMN]),
            )?;
        }
        tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
        let mut found = Vec::with_capacity(keys.len());
        for i in 0..keys.len() {
            found.push(match tx.outcome(OpId(i)) {
                Some(OpOutcome::Row(_)) => true,
                Some(OpOutcome::Failed(e)) if e.code == 626 => false,
                Some(OpOutcome::Failed(e)) => return Err(e.clone()),
                _ => return Err(codes::internal("copy: a key's read did not run")),
            });
        }
        tx.close();
        for (i, (key, here)) in keys.iter().zip(found).enumerate() {
            let k = self.row_key(database, table, key)?;
            if !here {
                match self.tombstones.lock().get(&k) {
                    Some(Tomb::Pending(_)) => return Ok(Applied::Blocked(offset + i)),
                    Some(Tomb::Committed) => continue,
                    None => {
                        return Err(codes::internal(format!(
                            "copy: a row of {database}.{table} unchanged at the source since \
                             GCI {} is not in this node's restored checkpoint",
                            d.since_gci
                        )));
                    }
                }
            }
            d.rows_kept += 1;
            if let Some(seen) = d.seen_mut(database, table) {
                seen.insert(key_hash(&k));
            }
        }
        Ok(Applied::Done)
    }

    /// After `CopyDone`: deletes every row of a kept table that is at or below the
    /// offer's checkpoint and that the source did not send (module notes). Blocked
    /// while a transaction holds such a row.
    pub(super) fn sweep_delta(&self, d: &mut DeltaApply) -> Result<Applied> {
        if d.sweep.is_none() {
            let mut doomed = VecDeque::new();
            let since = u64::from(d.since_gci);
            let kept: Vec<(String, String, String)> = d
                .tables
                .iter()
                .map(|((lower, t), k)| (lower.clone(), k.database.clone(), t.clone()))
                .collect();
            for (lower, db, table) in kept {
                let rt = self.engine.inner().table(&db, &table)?;
                let pk = rt.def.primary_key.clone();
                let mut tx = self.engine.ndb(&db).start_transaction()?;
                let mut spec = ScanSpec::table(rt.clone());
                let mut cols = pk.clone();
                cols.push(ROW_GCI_COLUMN);
                spec.columns = Some(cols);
                spec.batch_size = SWEEP_SCAN_BATCH;
                let mut s = tx.scan(spec)?;
                while !s.is_closed() {
                    let rows = tx.scan_next_batch(&mut s, SWEEP_SCAN_BATCH)?;
                    if rows.is_empty() {
                        break;
                    }
                    for mut r in rows {
                        let old = matches!(r.pop(), Some(Value::UInt(g)) if g <= since);
                        if !old {
                            continue;
                        }
                        let h = key_hash(&self.row_key(&db, &table, &r)?);
                        let seen = d.tables.get(&(lower.clone(), table.clone()));
                        if !seen.is_some_and(|k| k.seen.contains(&h)) {
                            doomed.push_back((db.clone(), table.clone(), r));
                        }
                    }
                }
                tx.close();
            }
            d.sweep = Some(doomed);
        }
        let since = u64::from(d.since_gci);
        while let Some((db, table, key)) = d.sweep.as_mut().and_then(|q| q.front().cloned()) {
            let rt = self.engine.inner().table(&db, &table)?;
            let key_pos: Vec<(usize, Value)> =
                rt.def.primary_key.iter().copied().zip(key).collect();
            let mut tx = self.engine.ndb(&db).start_transaction()?;
            tx.define_by_pos(
                &rt,
                OpKind::Read(LockMode::Exclusive),
                key_pos.clone(),
                Vec::new(),
                Some(vec![ROW_GCI_COLUMN]),
            )?;
            let r = tx.execute(ExecType::NoCommit, AbortOption::IgnoreError);
            let locked = matches!(tx.outcome(OpId(0)), Some(OpOutcome::Failed(e)) if e.code == 266)
                || r.as_ref().is_err_and(|e| e.code == 266);
            if locked {
                tx.close();
                return Ok(Applied::Blocked(0));
            }
            r?;
            // Still the old row (no primary wrote it since the scan): delete it.
            if matches!(tx.outcome(OpId(0)), Some(OpOutcome::Row(v)) if matches!(v.first(), Some(Value::UInt(g)) if *g <= since))
            {
                tx.define_by_pos(&rt, OpKind::Delete, key_pos, Vec::new(), None)?;
                match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
                    Ok(()) => d.rows_deleted += 1,
                    Err(e) if e.code == 266 => return Ok(Applied::Blocked(0)),
                    Err(e) => return Err(e),
                }
            } else {
                tx.close();
            }
            if let Some(q) = d.sweep.as_mut() {
                q.pop_front();
            }
        }
        Ok(Applied::Done)
    }
}
