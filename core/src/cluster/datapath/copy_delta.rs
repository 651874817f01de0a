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
//!   was, [`Touched`]). A row a transaction changes during the copy thus counts on
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
use super::copy::{Applied, Tomb, row_key_prefix};
use super::copy_digest::{
    Digest, DigestIn, KeyHasher, MAX_BUCKETS, RESTORED_BUCKETS_FACTOR, ROWS_PER_BUCKET,
    bucket_count, bucket_of, key_hash,
};
use crate::api::TableRuntime;
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome, ScanSpec, Transaction};
use crate::error::{Result, codes};
use crate::schema::Value;
use crate::schema::layout::ROW_GCI_COLUMN;
use crate::transport::NodeId;
use crate::transport::data::DataMsg;
use crate::transport::data::KeyOp;
use crate::txn::lock::LockMode;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Threads that fold the restored tables, at most.
const MAX_FOLD_THREADS: usize = 4;

/// Rows looked at per hold of a fragment's mutex when folding a digest.
const FOLD_BATCH_ROWS: usize = 4096;

/// Rows read per batch of the sweep's scan.
const SWEEP_SCAN_BATCH: usize = 1024;

/// Hashes a key hash by taking its low 64 bits: the set's members are XXH3-128
/// hashes already, and hashing them again (the default SipHash) cost 3.5 s per 10M
/// keys inserted and removed where this costs 1.0 s (a node restart sees every row's
/// key once and looks each up once).
#[derive(Default)]
struct KeyHashHasher(u64);

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
type KeySet = HashSet<u128, BuildHasherDefault<KeyHashHasher>>;

/// The rows of kept tables that the primaries' after-images touched during this copy
/// while they were still at or below the offer's checkpoint (their key hashes, per
/// table). The source's digest counts such a row as unchanged when its scan came
/// before the change (else the row came whole): the fold counts it so too, unless it
/// came whole, instead of as the row it is now. Without this, every row updated during
/// the copy made its bucket differ and the source scan the table again.
pub(crate) struct Touched {
    attempt: u64,
    since: u64,
    /// By (lower-case database, table).
    tables: BTreeMap<(String, String), KeySet>,
}

/// The offer this node made with its current `CopyReq`.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub attempt: u64,
    pub since_gci: u32,
    pub keep: Vec<(String, String)>,
}

/// A kept table: its database as the dictionary spells it, the source's digest, and
/// the keys seen in this copy.
struct Kept {
    database: String,
    /// The source's digest of its unchanged rows, as its parts come.
    digest_in: Option<DigestIn>,
    /// Once the digest was compared: per bucket, whether it differed (and its keys
    /// were asked for).
    differing: Option<Vec<bool>>,
    /// Keys the source sent for the differing buckets.
    seen: KeySet,
    /// Keys of the rows that came whole.
    whole: KeySet,
    /// This node's rows as restored (folded before the copy mark, so no transaction
    /// had touched them), less those that came whole: what the source's digest should
    /// hold, in more buckets than it will have (`copy_digest::RESTORED_BUCKETS_FACTOR`).
    restored: Option<Digest>,
    /// Keys taken out of `restored` (a row retried after a lock wait is taken once).
    taken_out: KeySet,
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

    /// An empty record of touched rows for the kept tables.
    pub fn touched(&self) -> Touched {
        Touched {
            attempt: self.attempt,
            since: u64::from(self.since_gci),
            tables: self
                .tables
                .keys()
                .map(|k| (k.clone(), KeySet::default()))
                .collect(),
        }
    }

    /// A row that came whole leaves the restored rows' digest (once).
    fn take_out_restored(&mut self, database: &str, table: &str, hash: u128) {
        if let Some(kept) = self.kept_mut(database, table)
            && kept.taken_out.insert(hash)
            && let Some(r) = kept.restored.as_mut()
        {
            r.remove(hash);
        }
    }

    fn kept_mut(&mut self, database: &str, table: &str) -> Option<&mut Kept> {
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

    /// Folds each kept table's rows as restored into a digest (module notes), before
    /// the copy mark: no transaction has touched them yet. The tables are folded on
    /// up to one thread per core (the source waits for this node's schema answer).
    pub(super) fn fold_restored(&self, d: &mut DeltaApply) -> Result<()> {
        let since = u64::from(d.since_gci);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_FOLD_THREADS);
        let queue = parking_lot::Mutex::new(d.tables.iter_mut().map(|((_, t), k)| (t, k)));
        let fold_one = |table: &str, kept: &mut Kept| -> Result<()> {
            let rt = self.engine.inner().table(&kept.database, table)?;
            let rows: u64 = rt
                .fragments
                .iter()
                .flatten()
                .map(|c| c.state.lock().rows())
                .sum();
            let buckets = bucket_count(rows)
                .saturating_mul(RESTORED_BUCKETS_FACTOR)
                .min(MAX_BUCKETS);
            let mut digest = Digest::new(buckets)?;
            self.fold_rows(&rt, &kept.database, since, &KeySet::default(), &mut digest)?;
            kept.restored = Some(digest);
            Ok(())
        };
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        loop {
                            let next = queue.lock().next();
                            match next {
                                Some((table, kept)) => fold_one(table, kept)?,
                                None => return Ok(()),
                            }
                        }
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(codes::internal("copy: a digest fold panicked")))
            })
        })
    }

    /// Folds the table's committed rows at or below `since` into `digest`, but for
    /// `skip`: straight from this node's fragments, a batch of rows per hold of a
    /// fragment's mutex, their row keys as the row's stored key bytes (the bytes
    /// [`KeyHasher`] makes from key values).
    fn fold_rows(
        &self,
        rt: &Arc<TableRuntime>,
        database: &str,
        since: u64,
        skip: &KeySet,
        digest: &mut Digest,
    ) -> Result<()> {
        let since = u32::try_from(since).unwrap_or(u32::MAX);
        let mut bytes = row_key_prefix(database, &rt.def.name);
        let prefix = bytes.len();
        let mut fold = |key: &[u8]| {
            bytes.truncate(prefix);
            bytes.extend_from_slice(key);
            let h = key_hash(&bytes);
            if !skip.contains(&h) {
                digest.add(h);
            }
        };
        // This node's engine holds one replica of each of its partitions.
        for cell in rt.fragments.iter().flatten() {
            let mut from = Some(0);
            while let Some(at) = from {
                from = cell.state.lock().committed_keys_at_or_below(
                    at,
                    FOLD_BATCH_ROWS,
                    since,
                    &mut fold,
                );
            }
        }
        Ok(())
    }

    /// Whether an after-image touched the row while it was at or below the offer's
    /// checkpoint ([`Touched`]).
    fn was_touched(&self, database: &str, table: &str, hash: u128) -> bool {
        self.delta_touched
            .lock()
            .as_ref()
            .and_then(|t| {
                t.tables
                    .get(&(database.to_ascii_lowercase(), table.to_string()))
            })
            .is_some_and(|set| set.contains(&hash))
    }

    /// Before a primary's after-images run here during a copy of changed rows: notes
    /// the rows of kept tables they write that are still at or below the offer's
    /// checkpoint ([`Touched`]), reading their ROW_GCI in the same transaction (which
    /// then holds their locks).
    pub(super) fn note_touched(&self, tx: &mut Transaction, ops: &[(u32, KeyOp)]) -> Result<()> {
        let (since, writes): (u64, Vec<&KeyOp>) = {
            let g = self.delta_touched.lock();
            let Some(t) = g.as_ref() else {
                return Ok(());
            };
            let writes = ops
                .iter()
                .map(|(_, op)| op)
                .filter(|op| !op.op.is_read())
                .filter(|op| {
                    t.tables
                        .contains_key(&(op.database.to_ascii_lowercase(), op.table.clone()))
                })
                .collect();
            (t.since, writes)
        };
        if writes.is_empty() {
            return Ok(());
        }
        let first = tx.op_count();
        let mut tables = Vec::with_capacity(writes.len());
        for op in &writes {
            let rt = self.engine.inner().table(&op.database, &op.table)?;
            let key: Vec<(usize, Value)> = rt
                .def
                .primary_key
                .iter()
                .copied()
                .zip(op.key.iter().cloned())
                .collect();
            tx.define_by_pos(
                &rt,
                OpKind::Read(LockMode::Exclusive),
                key,
                Vec::new(),
                Some(vec![ROW_GCI_COLUMN]),
            )?;
            tables.push(rt);
        }
        tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
        let mut old = Vec::new();
        for (i, (op, rt)) in writes.iter().zip(&tables).enumerate() {
            match tx.outcome(OpId(first + i)) {
                Some(OpOutcome::Row(v)) if matches!(v.first(), Some(Value::UInt(g)) if *g <= since) =>
                {
                    let h = KeyHasher::new(rt, &op.database).hash(&op.key)?;
                    old.push(((op.database.to_ascii_lowercase(), op.table.clone()), h));
                }
                Some(OpOutcome::Failed(e)) if e.code != 626 => return Err(e.clone()),
                _ => {}
            }
        }
        if let Some(t) = self.delta_touched.lock().as_mut() {
            for (table, h) in old {
                if let Some(set) = t.tables.get_mut(&table) {
                    set.insert(h);
                }
            }
        }
        Ok(())
    }

    /// A part of the source's digest of a kept table (module notes). Once complete:
    /// this node's rows at or below the offer's checkpoint are folded the same way,
    /// and the buckets that differ are asked for (`CopyRecheck` to `source`, sent
    /// before this part's acknowledgement, so the source has it when the window
    /// empties).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_digest(
        &self,
        d: &mut DeltaApply,
        source: NodeId,
        database: &str,
        table: &str,
        buckets: u32,
        first: u32,
        entries: &[(u32, u128)],
    ) -> Result<Applied> {
        let (since, attempt) = (u64::from(d.since_gci), d.attempt);
        let Some(kept) = d.kept_mut(database, table) else {
            return Err(codes::internal(format!(
                "copy: a digest of {database}.{table}, which this node does not keep"
            )));
        };
        if kept.differing.is_some() {
            return Err(codes::internal(format!(
                "copy: a second digest of {database}.{table}"
            )));
        }
        let digest_in = match &mut kept.digest_in {
            Some(din) => din,
            slot => slot.insert(DigestIn::new(buckets)?),
        };
        if !digest_in.put(buckets, first, entries)? {
            return Ok(Applied::Done);
        }
        let local = match kept.restored.take() {
            Some(restored) if restored.buckets() >= buckets => restored.folded_to(buckets)?,
            // The source's table is much larger than this node's: fold the rows as
            // they are now, counting the touched ones as they were (a row touched
            // after this set is taken is folded as the scan finds it).
            _ => {
                let touched: KeySet = self
                    .delta_touched
                    .lock()
                    .as_ref()
                    .filter(|t| t.attempt == attempt)
                    .and_then(|t| {
                        t.tables
                            .get(&(database.to_ascii_lowercase(), table.to_string()))
                    })
                    .cloned()
                    .unwrap_or_default();
                let db = kept.database.clone();
                let rt = self.engine.inner().table(&db, table)?;
                let mut local = Digest::new(buckets)?;
                self.fold_rows(&rt, &db, since, &touched, &mut local)?;
                for &h in &touched {
                    if !kept.whole.contains(&h) {
                        local.add(h);
                    }
                }
                local
            }
        };
        let source_digest = &digest_in.digest;
        let differ = source_digest.differing(&local)?;
        let unchanged_rows = source_digest.rows();
        let mut flags = vec![false; buckets as usize];
        for &b in &differ {
            flags[b as usize] = true;
        }
        kept.seen
            .reserve(differ.len().saturating_mul(ROWS_PER_BUCKET as usize));
        kept.differing = Some(flags);
        kept.digest_in = None;
        d.rows_kept += unchanged_rows;
        d.buckets_compared += u64::from(buckets);
        d.buckets_differing += differ.len() as u64;
        if !differ.is_empty() {
            self.send(
                source,
                DataMsg::CopyRecheck {
                    attempt,
                    database: database.to_string(),
                    table: table.to_string(),
                    buckets: differ,
                },
            );
        }
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
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// One hasher over many keys (its buffers reused) gives the hash of each key's own
    /// `row_key` bytes (tombstones are hashed from those), for keys that need coercion
    /// too, and tells keys apart.
    #[test]
    fn the_key_hasher_hashes_the_row_key_bytes() {
        let c = crate::api::Cluster::embedded(
            crate::config::ClusterConfig::embedded(1, 1).expect("config"),
        )
        .expect("cluster");
        let ndb = c.ndb("Test");
        let mut s = crate::sql::Session::new(ndb.clone());
        s.execute("CREATE TABLE t (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)) ENGINE=NDB")
            .expect("create");
        let rt = ndb.table("t").expect("table");
        let mut h = KeyHasher::new(&rt, "Test");
        for key in [
            vec![Value::Int(1), Value::Str("x".into())],
            vec![Value::UInt(7), Value::Str("y".into())],
            vec![Value::Str("12".into()), Value::Str("".into())],
        ] {
            let bytes = DataPath::row_key_of(&rt, "Test", &key).expect("row key");
            assert!(bytes.starts_with(b"test\0t\0"));
            assert_eq!(h.hash(&key).expect("hash"), key_hash(&bytes), "{key:?}");
        }
        assert_ne!(
            h.hash(&[Value::Int(1), Value::Str("x".into())])
                .expect("hash"),
            h.hash(&[Value::Int(1), Value::Str("y".into())])
                .expect("hash")
        );
    }

    /// The digest's fold from the fragments (stored key bytes, ROW_GCI from the row
    /// header) gives the hashes the key hasher gives from the scanned key values, for
    /// the rows at or below a GCI only, an uncommitted insert left out.
    #[test]
    fn the_fragment_fold_hashes_as_the_key_hasher_does() {
        let c = crate::api::Cluster::embedded(
            crate::config::ClusterConfig::embedded(1, 1).expect("config"),
        )
        .expect("cluster");
        let ndb = c.ndb("Test");
        let mut s = crate::sql::Session::new(ndb.clone());
        s.execute("CREATE TABLE t (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)) ENGINE=NDB")
            .expect("create");
        for i in 0..300 {
            s.execute(&format!("INSERT INTO t VALUES ({i}, 'k{}', {i})", i % 7))
                .expect("insert");
        }
        let rt = ndb.table("t").expect("table");
        let scan = |cols: Vec<usize>| -> Vec<Vec<Value>> {
            let mut tx = ndb.start_transaction().expect("tx");
            let mut spec = ScanSpec::table(rt.clone());
            spec.columns = Some(cols);
            let mut sc = tx.scan(spec).expect("scan");
            let mut out = Vec::new();
            loop {
                let b = tx.scan_next_batch(&mut sc, 100).expect("batch");
                if b.is_empty() {
                    break;
                }
                out.extend(b);
            }
            out
        };
        let rows = scan(vec![0, 1, ROW_GCI_COLUMN]);
        let gcis: BTreeSet<u64> = rows
            .iter()
            .map(|r| match r[2] {
                Value::UInt(g) => g,
                ref v => panic!("ROW_GCI {v:?}"),
            })
            .collect();
        // A GCI in the middle, if the inserts spread over several.
        let cut = *gcis.iter().nth(gcis.len() / 2).expect("a GCI");
        let mut hasher = KeyHasher::new(&rt, "Test");
        let want: BTreeSet<u128> = rows
            .iter()
            .filter(|r| matches!(r[2], Value::UInt(g) if g <= cut))
            .map(|r| hasher.hash(&r[..2]).expect("hash"))
            .collect();
        // An insert left uncommitted is not a row of the fold.
        let mut open = ndb.start_transaction().expect("tx");
        open.define_by_pos(
            &rt,
            OpKind::Insert,
            Vec::new(),
            vec![
                (0, Value::Int(-1)),
                (1, Value::Str("open".into())),
                (2, Value::Int(0)),
            ],
            None,
        )
        .expect("define");
        open.execute(ExecType::NoCommit, AbortOption::AbortOnError)
            .expect("prepare");
        let mut got = BTreeSet::new();
        let mut bytes = row_key_prefix("Test", "t");
        let prefix = bytes.len();
        for cell in rt.fragments.iter().flatten() {
            let mut from = Some(0);
            while let Some(at) = from {
                from = cell.state.lock().committed_keys_at_or_below(
                    at,
                    17,
                    u32::try_from(cut).expect("gci"),
                    &mut |key| {
                        bytes.truncate(prefix);
                        bytes.extend_from_slice(key);
                        assert!(got.insert(key_hash(&bytes)), "a row twice");
                    },
                );
            }
        }
        open.close();
        assert!(!want.is_empty());
        assert_eq!(got, want);
    }
}
