//! The joining node's side of a node restart's digests (`copy_digest`; the rest of
//! the copy of changed rows is in `copy_delta`): its restored rows folded before the
//! copy mark, the rows the primaries' after-images touch during the copy, and the
//! comparison with the source's digest, which asks for the keys of the buckets that
//! differ.
//!
//! Why the touched rows: the source folds a row as unchanged when its scan finds it at
//! or below the offer's checkpoint, and sends it whole otherwise. A row a transaction
//! changes during the copy is either: changed before the source's scan reached it
//! (then it came whole, and is taken out of this node's fold) or after (then the
//! source folded it, and so does this node's fold, from before the copy mark). A row
//! that came whole is taken out only if it was one of the restored rows: still at or
//! below the checkpoint here, or noted as touched while it was.
//!
//! Lock order: `copy_apply` (the copy thread's), then a fragment's mutex (the fold, a
//! batch of rows per hold); `delta_touched` is a leaf.

use super::DataPath;
use super::copy::{Applied, row_key_prefix};
use super::copy_delta::{DeltaApply, Kept, KeySet};
use super::copy_digest::{
    Digest, DigestIn, KeyHasher, MAX_BUCKETS, RESTORED_BUCKETS_FACTOR, ROWS_PER_BUCKET,
    bucket_count, key_hash,
};
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome, TableRuntime, Transaction};
use crate::error::{Result, codes};
use crate::schema::Value;
use crate::schema::layout::ROW_GCI_COLUMN;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, KeyOp};
use crate::txn::lock::LockMode;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Threads that fold the restored tables, at most.
const MAX_FOLD_THREADS: usize = 4;

/// Rows looked at per hold of a fragment's mutex when folding a digest.
const FOLD_BATCH_ROWS: usize = 4096;

/// The rows of kept tables that the primaries' after-images touched during this copy
/// while they were still at or below the offer's checkpoint (their key hashes, per
/// table): restored rows, though no longer at or below it here. A row that comes whole
/// is taken out of the restored fold if it is one of them (module notes); the fold at
/// the digest's arrival (a source table much larger than the restored one) counts them
/// as restored unless they came whole. Without this, every row updated during the copy
/// made its bucket differ and the source scan the table again.
pub(crate) struct Touched {
    attempt: u64,
    since: u64,
    /// By (lower-case database, table).
    tables: BTreeMap<(String, String), KeySet>,
}

impl DeltaApply {
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
}

impl DataPath {
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
            let buckets = bucket_count(rt.row_count())
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
    pub(super) fn was_touched(&self, database: &str, table: &str, hash: u128) -> bool {
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
}
