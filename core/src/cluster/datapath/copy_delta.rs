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
//! - the source's digest of its rows unchanged since `g` (`copy_digest`) is compared,
//!   bucket by bucket, with this node's: its rows as restored, folded when the schema
//!   is applied (before the copy mark, so no transaction has touched them yet), less
//!   the rows that came whole (each was changed at the source, and is taken out if
//!   it is still at or below `g` here or a primary's after-image touched it while it
//!   was, `copy_fold`). A row a transaction changes during the copy thus counts on
//!   both sides as long as the source's scan saw it unchanged, and on neither once
//!   the scan sent it whole. The buckets that differ are asked for (`CopyRecheck`,
//!   sent before the digest's acknowledgement), and their keys come as keys alone,
//!   noted as seen;
//! - after `CopyDone` one scan of each kept table with differing buckets (every
//!   bucket when no digest came: the source took no offer and sent every row whole)
//!   ([`DataPath::sweep_delta`]) deletes every local row in those buckets with ROW_GCI
//!   at or below `g` whose key the source did not send (it is gone at the source:
//!   deleted while this node was down), and checks that every key the source sent has
//!   its row here or a delete from a primary: one missing means the node's files did
//!   not hold what it offered, and the copy fails (the next attempt copies every row).
//!   Only then does the node report up to date.
//!
//! Keys seen are kept as 128-bit XXH3 hashes of the row key (16 bytes a row; two keys
//! of one table share a hash with probability about n²/2¹²⁹).
//!
//! Lock order: `copy_apply` (the copy thread's), then what `DataPath` documents.

use super::DataPath;
use super::copy::{Applied, Tomb};
use super::copy_digest::{Digest, DigestIn, KeyHasher, bucket_of, key_hash};
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome, ScanSpec};
use crate::error::{Result, codes};
use crate::schema::Value;
use crate::schema::layout::ROW_GCI_COLUMN;
use crate::txn::lock::LockMode;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Rows read per batch of the sweep's scan.
const SWEEP_SCAN_BATCH: usize = 1024;

/// Hashes a key hash by taking its low 64 bits: the set's members are XXH3-128
/// hashes already, and hashing them again (the default SipHash) cost 3.5 s per 10M
/// keys inserted and removed where this costs 1.0 s (a node restart sees every row's
/// key once and looks each up once).
#[derive(Default)]
pub(super) struct KeyHashHasher(u64);

impl Hasher for KeyHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u128(&mut self, v: u128) {
        self.0 = v as u64;
    }

    /// Not used by `u128` keys; folds any other input in, so the hasher stays a hasher.
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }
}

/// A set of key hashes ([`key_hash`]).
pub(super) type KeySet = HashSet<u128, BuildHasherDefault<KeyHashHasher>>;

/// The offer this node made with its current `CopyReq`.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub attempt: u64,
    pub since_gci: u32,
    pub keep: Vec<(String, String)>,
}

/// A kept table: its database as the dictionary spells it, the source's digest, and
/// the keys seen in this copy.
pub(super) struct Kept {
    pub(super) database: String,
    /// The source's digest of its unchanged rows, as its parts come.
    pub(super) digest_in: Option<DigestIn>,
    /// Once the digest was compared: per bucket, whether it differed (and its keys
    /// were asked for).
    pub(super) differing: Option<Vec<bool>>,
    /// Keys the source sent for the differing buckets.
    pub(super) seen: KeySet,
    /// Keys of the rows that came whole.
    pub(super) whole: KeySet,
    /// This node's rows as restored (folded before the copy mark, so no transaction
    /// had touched them), less those that came whole: what the source's digest should
    /// hold, in more buckets than it will have (`copy_digest::RESTORED_BUCKETS_FACTOR`).
    pub(super) restored: Option<Digest>,
    /// Keys taken out of `restored` (a row retried after a lock wait is taken once).
    pub(super) taken_out: KeySet,
}

/// What a copy of changed rows has kept and seen (module notes).
pub(crate) struct DeltaApply {
    pub attempt: u64,
    pub since_gci: u32,
    /// Kept tables by (lower-case database, table name).
    pub(super) tables: BTreeMap<(String, String), Kept>,
    /// The rows to delete after `CopyDone` (database, table, key): None until found.
    sweep: Option<VecDeque<(String, String, Vec<Value>)>>,
    pub rows_whole: u64,
    /// Rows unchanged at the source since `since_gci` (its digests' count).
    pub rows_kept: u64,
    pub rows_deleted: u64,
    /// Digest buckets compared, and of them those that differed.
    pub buckets_compared: u64,
    pub buckets_differing: u64,
    /// Keys the source sent for the differing buckets.
    pub keys_received: u64,
    /// When its schema was applied (node clock).
    pub started_ms: u64,
}

impl DeltaApply {
    pub fn new(attempt: u64, since_gci: u32, started_ms: u64) -> DeltaApply {
        DeltaApply {
            started_ms,
            attempt,
            since_gci,
            tables: BTreeMap::new(),
            sweep: None,
            rows_whole: 0,
            rows_kept: 0,
            rows_deleted: 0,
            buckets_compared: 0,
            buckets_differing: 0,
            keys_received: 0,
        }
    }

    pub fn keep_table(&mut self, database: &str, table: &str) {
        self.tables.insert(
            (database.to_ascii_lowercase(), table.to_string()),
            Kept {
                database: database.to_string(),
                digest_in: None,
                differing: None,
                seen: KeySet::default(),
                whole: KeySet::default(),
                restored: None,
                taken_out: KeySet::default(),
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

    /// A row that came whole leaves the restored rows' digest (once).
    pub(super) fn take_out_restored(&mut self, database: &str, table: &str, hash: u128) {
        if let Some(kept) = self.kept_mut(database, table)
            && kept.taken_out.insert(hash)
            && let Some(r) = kept.restored.as_mut()
        {
            r.remove(hash);
        }
    }

    pub(super) fn kept_mut(&mut self, database: &str, table: &str) -> Option<&mut Kept> {
        self.tables
            .get_mut(&(database.to_ascii_lowercase(), table.to_string()))
    }

    fn seen_mut(&mut self, database: &str, table: &str) -> Option<&mut KeySet> {
        self.kept_mut(database, table).map(|k| &mut k.seen)
    }
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
            let k = Self::row_key_of(&rt, database, &key)?;
            let h = key_hash(&k);
            if let Some(kept) = d.kept_mut(database, table) {
                kept.whole.insert(h);
            }
            match self.tombstones.lock().get(&k) {
                Some(Tomb::Pending(_)) => return Ok(Applied::Blocked(n)),
                Some(Tomb::Committed) => {
                    if self.was_touched(database, table, h) {
                        d.take_out_restored(database, table, h);
                    }
                    continue;
                }
                None => {}
            }
            let key_pos: Vec<(usize, Value)> = pk.iter().copied().zip(key).collect();
            let mut tx = self.copy_transaction(database)?;
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
            // The source counted this row changed (it came whole): out of the
            // restored rows' digest if it was one of them, that is, still at or below
            // `g` here, or touched by a transaction since it was.
            let restored_here = match tx.outcome(OpId(0)) {
                Some(OpOutcome::Row(v)) => matches!(v.first(), Some(Value::UInt(g)) if *g <= since),
                _ => false,
            };
            if restored_here || self.was_touched(database, table, h) {
                d.take_out_restored(database, table, h);
            }
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
            // No note in `seen`: the row is now above `g` here, which the sweep leaves.
        }
        let from = start.max(full_rows);
        let Some(seen) = d.seen_mut(database, table) else {
            return Err(codes::internal("copy: keys for a table not kept"));
        };

        let mut hasher = KeyHasher::new(&rt, database);
        for key in &rows[from.min(rows.len())..] {
            if key.len() != pk.len() {
                return Err(codes::internal("copied key has the wrong column count"));
            }
            seen.insert(hasher.hash(key)?);
        }
        d.keys_received += rows.len().saturating_sub(from) as u64;
        Ok(Applied::Done)
    }

    /// After `CopyDone`: deletes every row of a kept table that is at or below the
    /// offer's checkpoint and that the source did not send, after checking that every
    /// key sent is here (module notes). Blocked while a transaction holds such a row.
    pub(super) fn sweep_delta(&self, d: &mut DeltaApply) -> Result<Applied> {
        if d.sweep.is_none() {
            let mut doomed = VecDeque::new();
            let since = u64::from(d.since_gci);
            // Keys deleted here by primaries during the copy (pending or committed).
            let tombs: KeySet = self.tombstones.lock().keys().map(|k| key_hash(k)).collect();
            let mut kept: Vec<(String, String, String, Vec<bool>)> = Vec::new();
            for ((lower, t), k) in &d.tables {
                if k.digest_in.is_some() {
                    return Err(codes::internal(format!(
                        "copy: the digest of {}.{t} was not complete at the copy's end",
                        k.database
                    )));
                }
                match &k.differing {
                    // A table whose digest agreed everywhere holds what the source holds.
                    Some(differing) if !differing.iter().any(|&b| b) => {}
                    Some(differing) => kept.push((
                        lower.clone(),
                        k.database.clone(),
                        t.clone(),
                        differing.clone(),
                    )),
                    // No digest: the source took no offer (another cluster history) and
                    // sent every row whole; what it did not send is gone there.
                    None => kept.push((lower.clone(), k.database.clone(), t.clone(), vec![true])),
                }
            }
            for (lower, db, table, differing) in kept {
                let buckets = differing.len() as u32;
                let rt = self.engine.inner().table(&db, &table)?;
                let pk = rt.def.primary_key.clone();
                let mut tx = self.engine.ndb(&db).start_transaction()?;
                let mut spec = ScanSpec::table(rt.clone());
                let mut cols = pk.clone();
                cols.push(ROW_GCI_COLUMN);
                spec.columns = Some(cols);
                spec.batch_size = SWEEP_SCAN_BATCH;
                let mut s = tx.scan(spec)?;
                let mut hasher = KeyHasher::new(&rt, &db);
                // What is left of it once every local row is found: keys not here.
                let mut unmatched = d
                    .tables
                    .get_mut(&(lower.clone(), table.clone()))
                    .map(|k| std::mem::take(&mut k.seen))
                    .unwrap_or_default();
                while !s.is_closed() {
                    let rows = tx.scan_next_batch(&mut s, SWEEP_SCAN_BATCH)?;
                    if rows.is_empty() {
                        break;
                    }
                    for mut r in rows {
                        let old = matches!(r.pop(), Some(Value::UInt(g)) if g <= since);
                        let h = hasher.hash(&r)?;
                        if !differing[bucket_of(h, buckets) as usize] {
                            continue;
                        }
                        if !unmatched.remove(&h) && old {
                            doomed.push_back((db.clone(), table.clone(), r));
                        }
                    }
                }
                tx.close();
                let missing = unmatched.iter().filter(|h| !tombs.contains(h)).count();
                if missing > 0 {
                    return Err(codes::internal(format!(
                        "copy: {missing} rows of {db}.{table} unchanged at the source since GCI \
                         {} are not in this node's restored checkpoint",
                        d.since_gci
                    )));
                }
            }
            d.sweep = Some(doomed);
        }
        let since = u64::from(d.since_gci);
        while let Some((db, table, key)) = d.sweep.as_mut().and_then(|q| q.front().cloned()) {
            let rt = self.engine.inner().table(&db, &table)?;
            let key_pos: Vec<(usize, Value)> =
                rt.def.primary_key.iter().copied().zip(key).collect();
            let mut tx = self.copy_transaction(&db)?;
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

#[cfg(test)]
#[path = "copy_delta_tests.rs"]
mod tests;
