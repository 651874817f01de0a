//! Transactions with NDB API semantics (DBTC): operations are defined, then executed
//! together with NoCommit, Commit or Rollback, as `NdbTransaction::execute` does.
//!
//! An operation is prepared on every replica of its partition, primary first (NDB's
//! linear prepare chain; reads go to the primary only). A prepared write holds an
//! exclusive lock on each replica and an after-image; commit applies it on every replica
//! and releases the locks, stamping the rows with the current GCI. A conflicting lock is
//! waited for on the fragment's condition variable for at most
//! TransactionDeadlockDetectionTimeout; then the transaction is aborted with error 266.
//!
//! Errors: with `AbortOption::AbortOnError` (the default) the first failing operation
//! aborts the transaction; with `IgnoreError` operations that fail without side effects
//! (626 not found, 630 duplicate key, a bad value) only record their error. Failures of
//! the follow-up work NDB does with triggers (BLOB parts, unique indexes) always abort.
//!
//! Operations within one execute are run grouped by partition (a stable order, so two
//! operations on the same key keep their order), holding each fragment's mutex once per
//! group: a batch of reads costs one lock round per fragment, not per row.

use super::cluster::ClusterInner;
use super::dict::TableRuntime;
use crate::error::{NdbError, Result, codes};
use crate::log::redo::EncodedRecords;
use crate::schema::layout::index_hash;
use crate::schema::value::coerce;
use crate::schema::{ColumnType, Value};
use crate::storage::RowId;
use crate::txn::fragment::{FragRedo, FragmentCell, Step};
use crate::txn::lock::{LockMode, TxnId};
use parking_lot::MutexGuard;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Error 4009 for an operation on a partition whose node group is down.
fn no_live_replica(table: &TableRuntime, part: usize) -> NdbError {
    codes::node_group_down(format!(
        "partition {part} of table {} has no live replica (its node group is down)",
        table.def.name
    ))
}

/// NdbTransaction::ExecType (NDB's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub enum ExecType {
    NoCommit = 1,
    Commit = 2,
    Rollback = 3,
}

/// NdbOperation::AbortOption (NDB's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub enum AbortOption {
    #[default]
    AbortOnError = 0,
    IgnoreError = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Read(LockMode),
    Insert,
    Update,
    Write,
    Delete,
}

impl OpKind {
    pub fn is_write(self) -> bool {
        !matches!(self, OpKind::Read(_))
    }
}

/// Result of one operation after execute.
#[derive(Debug, Clone, PartialEq)]
pub enum OpOutcome {
    /// Not executed yet.
    Pending,
    /// Write done (prepared; committed with the transaction).
    Done,
    /// Read done: the requested columns in order.
    Row(Vec<Value>),
    Failed(NdbError),
}

/// Handle of an operation within its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId(pub usize);

pub(crate) struct OpRecord {
    pub table: Arc<TableRuntime>,
    pub kind: OpKind,
    /// (column position, value) for every primary-key column.
    pub key: Vec<(usize, Value)>,
    /// (column position, value) to set.
    pub values: Vec<(usize, Value)>,
    /// Columns to read (positions); None = every visible column.
    pub read_columns: Option<Vec<usize>>,
    pub outcome: OpOutcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxState {
    Open,
    Committed,
    Aborted,
    Closed,
}

/// A prepared key operation: key bytes, hash, partition, coerced values.
pub(crate) struct Prepared {
    pub op: usize,
    pub key_values: Vec<Value>,
    pub key_bytes: Vec<u8>,
    pub h32: u32,
    pub partition: usize,
    pub changes: Vec<(usize, Value)>,
    pub full: Vec<Value>,
    pub cols: Vec<usize>,
}

pub struct Transaction {
    pub(crate) cluster: Arc<ClusterInner>,
    id: TxnId,
    state: TxState,
    pub(crate) ops: Vec<OpRecord>,
    executed: usize,
    /// Rows with a lock or pending change: (fragment, row, replica index; 0 = primary).
    touched: Vec<(Arc<FragmentCell>, RowId, u8)>,
    error: Option<NdbError>,
    commit_gci: Option<u64>,
    /// Reused buffer of the redo records a commit appends.
    redo_records: EncodedRecords,
    lock_timeout: Duration,
    /// A write operation has been executed (the transaction may hold uncommitted rows).
    wrote: bool,
    /// [`Transaction::prepare_redo_room`] found room for every row touched so far: the
    /// commit appends its redo without waiting (it may not fail any more).
    redo_room_checked: bool,
    /// The commit appends no redo ([`Transaction::set_unlogged`]).
    unlogged: bool,
    /// `ClusterInner::replica_epoch` when the current group chose its replicas.
    replica_epoch: u64,
    /// Each write operation keeps its whole primary key once prepared (an insert's
    /// comes from its values), for [`Transaction::written_rows`].
    keep_written_keys: bool,
}

impl Transaction {
    pub(crate) fn new(cluster: Arc<ClusterInner>) -> Result<Transaction> {
        cluster.check_open()?;
        cluster.transactions_started.fetch_add(1, Ordering::Relaxed);
        let id = cluster.next_txn_id();
        let lock_timeout = Duration::from_millis(cluster.lock_timeout_ms());
        Ok(Transaction {
            cluster,
            id,
            state: TxState::Open,
            ops: Vec::new(),
            executed: 0,
            touched: Vec::new(),
            error: None,
            commit_gci: None,
            redo_records: EncodedRecords::new(),
            lock_timeout,
            wrote: false,
            redo_room_checked: false,
            unlogged: false,
            replica_epoch: 0,
            keep_written_keys: false,
        })
    }

    pub fn id(&self) -> TxnId {
        self.id
    }

    pub fn state(&self) -> TxState {
        self.state
    }

    /// The error that failed the transaction or its last execute, if any.
    pub fn error(&self) -> Option<&NdbError> {
        self.error.as_ref()
    }

    /// GCI of the commit (after a successful Commit).
    pub fn gci(&self) -> Option<u64> {
        self.commit_gci
    }

    pub fn outcome(&self, op: OpId) -> Option<&OpOutcome> {
        self.ops.get(op.0).map(|o| &o.outcome)
    }

    /// Takes the row of an executed read, leaving `Done` behind.
    pub fn take_row(&mut self, op: OpId) -> Option<Vec<Value>> {
        let rec = self.ops.get_mut(op.0)?;
        match std::mem::replace(&mut rec.outcome, OpOutcome::Done) {
            OpOutcome::Row(r) => Some(r),
            other => {
                rec.outcome = other;
                None
            }
        }
    }

    /// Whether a write operation was executed in this transaction.
    pub fn has_written(&self) -> bool {
        self.wrote
    }

    /// Write operations from now on keep their whole primary key once prepared (for
    /// [`Transaction::written_rows`]; an insert's key is otherwise not kept).
    pub(crate) fn keep_written_keys(&mut self) {
        self.keep_written_keys = true;
    }

    /// The rows this transaction's write operations named on tables that are not
    /// hidden (blob parts and unique-index entries follow from them), each once, in
    /// the order first written: (table, primary-key values in primary-key order). An
    /// operation that failed is left out. Needs [`Transaction::keep_written_keys`] from
    /// the start (an insert's hidden key, of a table without a primary key, is the
    /// value it was given).
    pub(crate) fn written_rows(&self) -> Result<Vec<(Arc<TableRuntime>, Vec<Value>)>> {
        let mut out: Vec<(Arc<TableRuntime>, Vec<Value>)> = Vec::new();
        let mut seen: std::collections::BTreeSet<(u32, Vec<u8>)> = Default::default();
        for op in &self.ops {
            if !op.kind.is_write()
                || op.table.hidden
                || matches!(op.outcome, OpOutcome::Failed(_) | OpOutcome::Pending)
            {
                continue;
            }
            let def = &op.table.def;
            let mut key = Vec::with_capacity(def.primary_key.len());
            for &p in &def.primary_key {
                let Some((_, v)) = op.key.iter().find(|(c, _)| *c == p) else {
                    return Err(codes::internal(format!(
                        "a write of table '{}' kept no value of its key column {p}",
                        def.name
                    )));
                };
                key.push(v.clone());
            }
            let mut e = crate::schema::codec::Encoder::new();
            for v in &key {
                crate::schema::codec::encode_value(&mut e, v);
            }
            if seen.insert((def.id, e.into_bytes())) {
                out.push((op.table.clone(), key));
            }
        }
        Ok(out)
    }

    /// A data node's prepare (NDB's check of the REDO log at LQHKEYREQ): waits until
    /// every redo part this transaction's commit will append to has room for its rows,
    /// at most `max_wait_ms` (a worker thread of the node is held meanwhile), then
    /// 410/1221 (temporary: the transaction aborts on every replica and the client
    /// retries). Once it passed, the commit appends without waiting: when one replica
    /// commits the others must too, so a commit may not fail for lack of log space
    /// (the appends may use the part's reserve beyond the tail). Called after every
    /// round of operations; a later round checks every row again.
    pub(crate) fn prepare_redo_room(&mut self, max_wait_ms: u64) -> Result<()> {
        self.redo_room_checked = false;
        if self.wrote {
            wait_for_redo_room_within(self.touched.iter().map(|(c, _, _)| &**c), max_wait_ms)?;
        }
        self.redo_room_checked = true;
        Ok(())
    }

    /// The commit of this transaction writes no redo (NDB's copy fragment: the rows a
    /// node restart copies are not logged at the starting node). Its changes become
    /// durable only through a local checkpoint that starts after the commit; until one
    /// completes, the caller must not count the node's files as restorable.
    pub(crate) fn set_unlogged(&mut self) {
        self.unlogged = true;
    }

    pub fn op_count(&self) -> usize {
        self.ops.len()
    }

    fn check_usable(&self) -> Result<()> {
        match self.state {
            TxState::Open => self.cluster.check_open(),
            TxState::Aborted => Err(self
                .error
                .clone()
                .unwrap_or_else(codes::transaction_aborted)),
            TxState::Committed | TxState::Closed => Err(codes::transaction_closed()),
        }
    }

    /// Defines an operation by column names; the key must name every primary-key column.
    pub fn define(
        &mut self,
        table: &Arc<TableRuntime>,
        kind: OpKind,
        key: &[(&str, Value)],
        values: &[(&str, Value)],
        read_columns: Option<&[&str]>,
    ) -> Result<OpId> {
        let def = &table.def;
        let mut key_pos = Vec::with_capacity(key.len());
        for (name, v) in key {
            let (pos, _) = def.column(name)?;
            key_pos.push((pos, v.clone()));
        }
        let mut val_pos = Vec::with_capacity(values.len());
        for (name, v) in values {
            let (pos, _) = def.column(name)?;
            val_pos.push((pos, v.clone()));
        }
        let cols = match read_columns {
            None => None,
            Some(names) => Some(
                names
                    .iter()
                    .map(|n| def.column(n).map(|(p, _)| p))
                    .collect::<Result<Vec<_>>>()?,
            ),
        };
        self.define_by_pos(table, kind, key_pos, val_pos, cols)
    }

    /// Defines an operation by column positions.
    pub fn define_by_pos(
        &mut self,
        table: &Arc<TableRuntime>,
        kind: OpKind,
        key: Vec<(usize, Value)>,
        values: Vec<(usize, Value)>,
        read_columns: Option<Vec<usize>>,
    ) -> Result<OpId> {
        self.check_usable()?;
        table.check_live()?;
        if self.ops.len() - self.executed >= self.cluster.max_operations_per_execute() {
            return Err(codes::too_many_operations());
        }
        self.ops.push(OpRecord {
            table: table.clone(),
            kind,
            key,
            values,
            read_columns,
            outcome: OpOutcome::Pending,
        });
        Ok(OpId(self.ops.len() - 1))
    }

    /// Executes the operations defined since the last execute, then commits, keeps the
    /// transaction open (NoCommit) or rolls it back. On error the transaction's error is
    /// set and returned; with AbortOnError the transaction is aborted.
    pub fn execute(&mut self, exec: ExecType, abort: AbortOption) -> Result<()> {
        if exec == ExecType::Rollback {
            if self.state == TxState::Open || self.state == TxState::Aborted {
                self.rollback();
                self.state = TxState::Aborted;
                return Ok(());
            }
            return Err(codes::transaction_closed());
        }
        self.check_usable()?;
        let first_error = self.run_pending(abort);
        if let Some(e) = first_error {
            self.error = Some(e.clone());
            if abort == AbortOption::AbortOnError || self.state == TxState::Aborted {
                self.rollback();
                self.state = TxState::Aborted;
                return Err(e);
            }
        }
        if exec == ExecType::Commit
            && let Err(e) = self.commit()
        {
            self.error = Some(e.clone());
            self.rollback();
            self.state = TxState::Aborted;
            return Err(e);
        }
        Ok(())
    }

    /// Runs every pending operation; returns the first error.
    fn run_pending(&mut self, abort: AbortOption) -> Option<NdbError> {
        let start = self.executed;
        self.executed = self.ops.len();
        if self.ops[start..].iter().any(|o| o.kind.is_write()) {
            self.wrote = true;
        }
        let mut prepared: Vec<Prepared> = Vec::with_capacity(self.ops.len() - start);
        let mut first_error = None;
        for i in start..self.ops.len() {
            match self.prepare_op(i) {
                Ok(p) => prepared.push(p),
                Err(e) => {
                    self.ops[i].outcome = OpOutcome::Failed(e.clone());
                    if first_error.is_none() {
                        first_error = Some(e);
                    }
                    if abort == AbortOption::AbortOnError {
                        return first_error;
                    }
                }
            }
        }
        // Stable grouping by (table, partition): same key => same group, order kept.
        // Writes with follow-ups (unique index rows, BLOB parts) run in definition
        // order: through the hidden tables, operations on different partitions meet
        // (a unique value freed by one row and taken by another in the same batch).
        let follow_ups = prepared.iter().any(|p| {
            let op = &self.ops[p.op];
            op.kind.is_write() && op.table.has_follow_ups()
        });
        if !follow_ups {
            prepared.sort_by_key(|p| (Arc::as_ptr(&self.ops[p.op].table) as usize, p.partition));
        }
        let mut i = 0;
        while i < prepared.len() {
            let table = self.ops[prepared[i].op].table.clone();
            let part = prepared[i].partition;
            let mut j = i;
            while j < prepared.len()
                && prepared[j].partition == part
                && Arc::ptr_eq(&self.ops[prepared[j].op].table, &table)
            {
                j += 1;
            }
            if let Err(e) = self.run_group(&table, part, &mut prepared[i..j], abort) {
                if self.state == TxState::Aborted {
                    // What aborted the transaction, not an earlier error it ignored.
                    return Some(e);
                }
                if first_error.is_none() {
                    first_error = Some(e);
                }
                if abort == AbortOption::AbortOnError {
                    return first_error;
                }
            }
            i = j;
        }
        first_error
    }

    /// Coerces values, builds the full row for inserts and the key bytes.
    fn prepare_op(&mut self, i: usize) -> Result<Prepared> {
        let rec = &self.ops[i];
        let table = rec.table.clone();
        let def = &table.def;
        let kind = rec.kind;
        let mut key_values: Vec<Option<Value>> = vec![None; def.primary_key.len()];
        for (pos, v) in &rec.key {
            let k = def
                .primary_key
                .iter()
                .position(|p| p == pos)
                .ok_or_else(|| {
                    codes::key_not_complete(format!(
                        "column '{}' is not part of the primary key",
                        def.columns[*pos].name
                    ))
                })?;
            key_values[k] = Some(coerce(
                v.clone(),
                &def.columns[*pos].ty,
                &def.columns[*pos].name,
            )?);
        }
        let read_columns = rec.read_columns.clone();
        // The values are consumed: an operation executes once.
        let values = std::mem::take(&mut self.ops[i].values);
        let mut changes: Vec<(usize, Value)> = Vec::with_capacity(values.len());
        for (pos, v) in values {
            let c = &def.columns[pos];
            if c.primary_key && kind == OpKind::Update {
                return Err(codes::pk_update());
            }
            let v = coerce(v, &c.ty, &c.name)?;
            if v.is_null() && !c.nullable {
                return Err(codes::null_in_not_null(&c.name));
            }
            changes.push((pos, v));
        }
        let mut full = Vec::new();
        if matches!(kind, OpKind::Insert | OpKind::Write) {
            if kind == OpKind::Insert {
                let moved = std::mem::take(&mut changes);
                full = self.full_row(&table, &mut key_values, moved)?;
            } else {
                full = self.full_row(&table, &mut key_values, changes.clone())?;
            }
            // key columns given among the values count as the key
            for (k, &p) in def.primary_key.iter().enumerate() {
                if key_values[k].is_none() && !full[p].is_null() {
                    key_values[k] = Some(full[p].clone());
                }
            }
        }
        let missing: Vec<&str> = def
            .primary_key
            .iter()
            .zip(&key_values)
            .filter(|(_, v)| v.as_ref().is_none_or(|v| v.is_null()))
            .map(|(p, _)| def.columns[*p].name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(codes::key_not_complete(format!(
                "no value for key column(s) {}",
                missing.join(", ")
            )));
        }
        let key_values: Vec<Value> = key_values
            .into_iter()
            .map(|v| v.unwrap_or(Value::Null))
            .collect();
        if self.keep_written_keys && kind.is_write() {
            self.ops[i].key = def
                .primary_key
                .iter()
                .copied()
                .zip(key_values.clone())
                .collect();
        }
        let mut key_bytes = Vec::new();
        let h = table.key_hash_of(&key_values, &mut key_bytes);
        if key_bytes.len() > 4092 {
            return Err(codes::max_key_size());
        }
        let cols = match (kind, read_columns) {
            (OpKind::Read(_), Some(c)) => c,
            (OpKind::Read(_), None) => def.visible_columns().map(|(i, _)| i).collect(),
            _ => Vec::new(),
        };
        Ok(Prepared {
            op: i,
            key_values,
            key_bytes,
            h32: index_hash(h),
            partition: table.partition_of(h),
            changes,
            full,
            cols,
        })
    }

    /// The complete row an insert stores: given values, defaults, auto-increment.
    fn full_row(
        &self,
        table: &TableRuntime,
        key_values: &mut [Option<Value>],
        changes: Vec<(usize, Value)>,
    ) -> Result<Vec<Value>> {
        let def = &table.def;
        let mut full: Vec<Option<Value>> = vec![None; def.columns.len()];
        for (k, &p) in def.primary_key.iter().enumerate() {
            if let Some(v) = &key_values[k] {
                full[p] = Some(v.clone());
            }
        }
        for (p, v) in changes {
            full[p] = Some(v);
        }
        let mut out = Vec::with_capacity(def.columns.len());
        for (i, c) in def.columns.iter().enumerate() {
            let v = match full[i].take() {
                Some(v) if !(c.auto_increment && (v.is_null() || v.as_i128() == Some(0))) => {
                    if c.auto_increment
                        && let Some(n) = v.as_i128()
                        && n > 0
                    {
                        table
                            .auto_increment
                            .fetch_max(n as u64 + 1, Ordering::AcqRel);
                    }
                    v
                }
                _ if c.auto_increment => {
                    let n = table.auto_increment.fetch_add(1, Ordering::AcqRel);
                    let v = coerce(Value::UInt(n), &c.ty, &c.name)?;
                    if let Some(k) = def.primary_key.iter().position(|&p| p == i) {
                        key_values[k] = Some(v.clone());
                    }
                    v
                }
                _ => match &c.default {
                    Some(d) => d.clone(),
                    None if c.nullable => Value::Null,
                    None => return Err(codes::null_in_not_null(&c.name)),
                },
            };
            out.push(v);
        }
        Ok(out)
    }

    /// Runs a group of operations on one partition.
    fn run_group(
        &mut self,
        table: &Arc<TableRuntime>,
        part: usize,
        group: &mut [Prepared],
        abort: AbortOption,
    ) -> Result<()> {
        let mut epoch = self.cluster.replica_epoch.load(Ordering::Acquire);
        let mut replicas = table.live_replicas(part);
        let mut first_error: Option<NdbError> = None;
        let needs_follow_up = table.has_follow_ups();
        {
            // The primary is the first live replica; replicas chosen before a node
            // stopped or a restarting one joined are chosen again under the
            // primary's lock (`node_restart`).
            let mut guard = loop {
                let primary = replicas
                    .first()
                    .ok_or_else(|| no_live_replica(table, part))?;
                let guard = primary.state.lock();
                let now = self.cluster.replica_epoch.load(Ordering::Acquire);
                if primary.is_live() && now == epoch {
                    break guard;
                }
                drop(guard);
                epoch = now;
                replicas = table.live_replicas(part);
            };
            self.replica_epoch = epoch;
            let primary = &replicas[0];
            for p in group.iter() {
                guard.prefetch(p.h32);
            }
            for p in group.iter_mut() {
                let kind = self.ops[p.op].kind;
                if needs_follow_up && kind.is_write() {
                    // BLOB parts and unique indexes need reads and writes of other tables:
                    // run this operation on its own, outside the group's lock.
                    drop(guard);
                    let r = self.run_write_with_follow_ups(table, p);
                    guard = primary.state.lock();
                    // The replicas may have changed order meanwhile (a restarted node
                    // became primary): this group's order would now lock them the other
                    // way round.
                    self.check_replicas_unchanged()?;
                    if let Err(e) = r {
                        self.ops[p.op].outcome = OpOutcome::Failed(e.clone());
                        if first_error.is_none() {
                            first_error = Some(e);
                        }
                        if abort == AbortOption::AbortOnError || self.state == TxState::Aborted {
                            return Err(
                                first_error.unwrap_or_else(|| codes::internal("lost error"))
                            );
                        }
                    }
                    continue;
                }
                let r = self.run_on_replicas(primary, &mut guard, &replicas, p);
                match r {
                    Ok(outcome) => self.ops[p.op].outcome = outcome,
                    Err(e) => {
                        self.ops[p.op].outcome = OpOutcome::Failed(e.clone());
                        if first_error.is_none() {
                            first_error = Some(e.clone());
                        }
                        if abort == AbortOption::AbortOnError
                            || self.state == TxState::Aborted
                            || !is_clean_error(&e)
                        {
                            if !is_clean_error(&e) {
                                self.state = TxState::Aborted;
                            }
                            return Err(e);
                        }
                    }
                }
            }
        }
        // BLOB/TEXT columns of reads are completed from the parts tables afterwards.
        if table.def.has_blobs() {
            for p in group.iter() {
                // Only a row is completed: a failed read keeps its error.
                if !matches!(self.ops[p.op].kind, OpKind::Read(_))
                    || !matches!(self.ops[p.op].outcome, OpOutcome::Row(_))
                {
                    continue;
                }
                let OpOutcome::Row(mut row) =
                    std::mem::replace(&mut self.ops[p.op].outcome, OpOutcome::Done)
                else {
                    continue;
                };
                if let Err(e) = self.finish_blobs(table, &p.key_values, &p.cols, &mut row) {
                    self.state = TxState::Aborted;
                    return Err(e);
                }
                self.ops[p.op].outcome = OpOutcome::Row(row);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// After a lock wait: the replicas this operation was started on are still the
    /// partition's (a node stopped or a restarting one joined: 4010, retry).
    fn check_replicas_unchanged(&mut self) -> Result<()> {
        if self.cluster.replica_epoch.load(Ordering::Acquire) != self.replica_epoch {
            self.state = TxState::Aborted;
            return Err(codes::node_failure_abort()
                .detail("a data node stopped or joined while the operation waited for a lock"));
        }
        Ok(())
    }

    /// Runs one operation on the primary (whose guard is held) and, for writes, on every
    /// backup replica.
    fn run_on_replicas(
        &mut self,
        primary: &Arc<FragmentCell>,
        guard: &mut MutexGuard<'_, crate::txn::fragment::Fragment>,
        replicas: &[Arc<FragmentCell>],
        p: &Prepared,
    ) -> Result<OpOutcome> {
        let kind = self.ops[p.op].kind;
        let deadline = Instant::now() + self.lock_timeout;
        let txn = self.id;
        if !primary.is_live() {
            // Its node stopped while this transaction ran (after the guard was taken
            // again around follow-up work).
            self.state = TxState::Aborted;
            return Err(codes::node_failure_abort().detail(format!(
                "the primary replica's node {} stopped during the transaction",
                primary.node_id
            )));
        }
        // primary
        let mut out_row = Vec::new();
        loop {
            let step = match kind {
                OpKind::Read(mode) => {
                    out_row.clear();
                    guard
                        .read(txn, &p.key_bytes, p.h32, mode, &p.cols, &mut out_row)
                        .map(|s| match s {
                            Step::Done(r) => Step::Done(r.locked.then_some(r.row)),
                            Step::Blocked => Step::Blocked,
                        })
                }
                OpKind::Insert => guard
                    .insert(txn, &p.key_bytes, p.h32, &p.full)
                    .map(map_some),
                OpKind::Update => guard
                    .update(txn, &p.key_bytes, p.h32, &p.changes)
                    .map(map_some),
                OpKind::Write => guard
                    .write(txn, &p.key_bytes, p.h32, &p.changes, &p.full)
                    .map(map_some),
                OpKind::Delete => guard.delete(txn, &p.key_bytes, p.h32),
            }?;
            match step {
                Step::Done(row) => {
                    if let Some(row) = row {
                        self.touched.push((primary.clone(), row, 0));
                    }
                    break;
                }
                Step::Blocked => {
                    if primary
                        .lock_released
                        .wait_until(guard, deadline)
                        .timed_out()
                    {
                        self.state = TxState::Aborted;
                        return Err(codes::deadlock_timeout());
                    }
                    self.cluster.check_open()?;
                    self.check_replicas_unchanged()?;
                }
            }
        }
        if let OpKind::Read(_) = kind {
            return Ok(OpOutcome::Row(out_row));
        }
        for (rank, backup) in replicas.iter().enumerate().skip(1) {
            let mut g = backup.state.lock();
            if !backup.is_live() {
                // Its node stopped: the partition goes on with the others.
                continue;
            }
            loop {
                let step = match kind {
                    OpKind::Insert => g.insert(txn, &p.key_bytes, p.h32, &p.full).map(map_some),
                    OpKind::Update => g.update(txn, &p.key_bytes, p.h32, &p.changes).map(map_some),
                    OpKind::Write => g
                        .write(txn, &p.key_bytes, p.h32, &p.changes, &p.full)
                        .map(map_some),
                    OpKind::Delete => g.delete(txn, &p.key_bytes, p.h32),
                    OpKind::Read(_) => Ok(Step::Done(None)),
                };
                match step {
                    Ok(Step::Done(Some(row))) => {
                        self.touched.push((backup.clone(), row, rank as u8));
                        break;
                    }
                    Ok(Step::Done(None)) => break,
                    Ok(Step::Blocked) => {
                        // The primary's lock serialises writers and backups are released
                        // before primaries, so this wait is short; bounded all the same.
                        if backup
                            .lock_released
                            .wait_until(&mut g, deadline)
                            .timed_out()
                        {
                            self.state = TxState::Aborted;
                            return Err(codes::deadlock_timeout());
                        }
                        self.check_replicas_unchanged()?;
                    }
                    Err(e) => {
                        // The primary succeeded: the replicas would diverge. Abort.
                        self.state = TxState::Aborted;
                        return Err(e);
                    }
                }
            }
        }
        Ok(OpOutcome::Done)
    }

    /// Coerces and completes one insert without running it (bulk loads).
    pub(crate) fn prepare_insert(
        &mut self,
        table: &Arc<TableRuntime>,
        values: Vec<(usize, Value)>,
    ) -> Result<Prepared> {
        self.ops.push(OpRecord {
            table: table.clone(),
            kind: OpKind::Insert,
            key: Vec::new(),
            values,
            read_columns: None,
            outcome: OpOutcome::Pending,
        });
        let i = self.ops.len() - 1;
        let p = self.prepare_op(i);
        self.ops.pop();
        p
    }

    /// Executes a key operation on its own (used by follow-up work: blob parts, unique
    /// index rows). Returns the read row for reads.
    pub(crate) fn run_single(
        &mut self,
        table: &Arc<TableRuntime>,
        kind: OpKind,
        key: Vec<(usize, Value)>,
        values: Vec<(usize, Value)>,
        cols: Option<Vec<usize>>,
    ) -> Result<Option<Vec<Value>>> {
        self.ops.push(OpRecord {
            table: table.clone(),
            kind,
            key,
            values,
            read_columns: cols,
            outcome: OpOutcome::Pending,
        });
        let i = self.ops.len() - 1;
        self.executed = self.ops.len();
        let p = self.prepare_op(i);
        let result = match p {
            Err(e) => Err(e),
            Ok(p) => loop {
                let epoch = self.cluster.replica_epoch.load(Ordering::Acquire);
                let replicas = table.live_replicas(p.partition);
                let Some(primary) = replicas.first() else {
                    break Err(no_live_replica(table, p.partition));
                };
                let mut guard = primary.state.lock();
                if self.cluster.replica_epoch.load(Ordering::Acquire) != epoch {
                    continue;
                }
                self.replica_epoch = epoch;
                break self.run_on_replicas(primary, &mut guard, &replicas, &p);
            },
        };
        // follow-up operations are not user-visible
        self.ops.pop();
        self.executed = self.ops.len();
        match result? {
            OpOutcome::Row(r) => Ok(Some(r)),
            _ => Ok(None),
        }
    }

    /// Commits every prepared change on every replica and appends the redo records of
    /// each fragment's changes (in the fragment's commit order: under its mutex). The
    /// commit holds the GCP's commit gate, so its GCI's checkpoint cannot close before
    /// every record is appended. It fails, before changing anything, only when the redo
    /// log cannot take it within RedoOverCommitLimit (1221, 410: temporary errors).
    fn commit(&mut self) -> Result<()> {
        let mut touched = std::mem::take(&mut self.touched);
        // Backups first, primaries last: whoever gets a primary's lock next finds the
        // backups of that row already released (the order NDB's commit chain gives).
        touched.sort_by_key(|(c, _, rank)| (std::cmp::Reverse(*rank), Arc::as_ptr(c) as usize));
        // Back-pressure outside the commit gate and every fragment mutex (a transaction
        // that only read appends nothing and never waits).
        if self.wrote
            && !self.redo_room_checked
            && !self.unlogged
            && let Err(e) = wait_for_redo_room(touched.iter().map(|(c, _, _)| &**c))
        {
            self.touched = touched;
            return Err(e);
        }
        let ticket = self.cluster.gcp.enter_commit();
        let gci = ticket.gci;
        let records = &mut self.redo_records;
        let mut i = 0;
        // Replicas this commit applied its changes to, so far (backups come before
        // their primary): a follower among them has them; the others get them from
        // the primary's commit. A replica the transaction prepared on that has been
        // restarted since lost those changes, and is fed like any other follower.
        let mut committed_to: Vec<*const FragmentCell> = Vec::new();
        while i < touched.len() {
            let cell = touched[i].0.clone();
            {
                let mut f = cell.state.lock();
                if !cell.is_live() {
                    // Its node stopped: the other replicas commit; it is rebuilt when
                    // the node starts again.
                    while i < touched.len() && Arc::ptr_eq(&touched[i].0, &cell) {
                        i += 1;
                    }
                    continue;
                }
                let feeds = touched[i].2 == 0 && cell.has_followers();
                while i < touched.len() && Arc::ptr_eq(&touched[i].0, &cell) {
                    if self.unlogged && !feeds {
                        f.commit_row(self.id, touched[i].1, crate::log::gcp::gci_hi(gci));
                    } else {
                        f.commit_row_records(self.id, touched[i].1, gci, records, feeds);
                    }
                    i += 1;
                }
                committed_to.push(Arc::as_ptr(&cell));
                if feeds {
                    cell.feed_followers(records, &committed_to);
                }
                if let Some(r) = &cell.redo
                    && !records.is_empty()
                    && !self.unlogged
                {
                    r.log.append(r.part, records);
                }
                records.clear();
            }
            cell.lock_released.notify_all();
        }
        drop(ticket);
        self.commit_gci = Some(gci);
        self.state = TxState::Committed;
        self.cluster
            .transactions_committed
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Rolls back every prepared change and releases every lock.
    fn rollback(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        // Undo in reverse order of preparation within each fragment, backups before
        // primaries (as in commit).
        touched.reverse();
        touched.sort_by_key(|(c, _, rank)| (std::cmp::Reverse(*rank), Arc::as_ptr(c) as usize));
        let mut i = 0;
        while i < touched.len() {
            let cell = touched[i].0.clone();
            {
                let mut f = cell.state.lock();
                let live = cell.is_live();
                while i < touched.len() && Arc::ptr_eq(&touched[i].0, &cell) {
                    // A stopped node's replica was emptied: nothing to undo there.
                    if live {
                        f.abort_row(self.id, touched[i].1);
                    }
                    i += 1;
                }
            }
            cell.lock_released.notify_all();
        }
        if self.state == TxState::Open {
            self.cluster
                .transactions_aborted
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Closes a transaction that never executed anything (bulk-load preparation).
    pub(crate) fn discard(&mut self) {
        assert!(
            self.touched.is_empty(),
            "discarding a transaction that holds rows"
        );
        self.state = TxState::Closed;
    }

    /// Closes the transaction; an open one is rolled back (NdbTransaction::close).
    pub fn close(&mut self) {
        if matches!(self.state, TxState::Open | TxState::Aborted) {
            self.rollback();
        }
        self.state = TxState::Closed;
    }

    /// Records a lock or pending change taken by a scan.
    pub(crate) fn record_touched(&mut self, cell: &Arc<FragmentCell>, row: RowId) {
        self.touched.push((cell.clone(), row, 0));
    }

    pub(crate) fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// Waits for a row lock at most `timeout` from now on (266 after it), instead of
    /// TransactionDeadlockDetectionTimeout.
    pub(crate) fn set_lock_timeout(&mut self, timeout: Duration) {
        self.lock_timeout = timeout;
    }

    pub(crate) fn abort_with(&mut self, e: NdbError) -> NdbError {
        self.state = TxState::Aborted;
        self.error = Some(e.clone());
        self.rollback();
        e
    }

    pub(crate) fn usable(&self) -> Result<()> {
        self.check_usable()
    }
}

/// Waits until every redo part a commit appends to has room for it: `rows` names the
/// fragment replica of each row the commit writes (a bound: one record per row).
pub(crate) fn wait_for_redo_room<'a>(
    rows: impl IntoIterator<Item = &'a FragmentCell>,
) -> Result<()> {
    wait_for_redo_room_within(rows, u64::MAX)
}

/// [`wait_for_redo_room`] waiting at most `max_wait_ms` in all parts.
pub(crate) fn wait_for_redo_room_within<'a>(
    rows: impl IntoIterator<Item = &'a FragmentCell>,
    max_wait_ms: u64,
) -> Result<()> {
    let mut need: Vec<(&FragRedo, usize)> = Vec::new();
    for cell in rows {
        let Some(r) = &cell.redo else { continue };
        match need
            .iter_mut()
            .find(|(n, _)| Arc::ptr_eq(&n.log, &r.log) && n.part == r.part)
        {
            Some((_, bytes)) => *bytes += r.row_bytes_bound,
            None => need.push((r, r.row_bytes_bound)),
        }
    }
    for (r, bytes) in need {
        r.log.wait_for_room_within(r.part, bytes, max_wait_ms)?;
    }
    Ok(())
}

fn map_some(s: Step<RowId>) -> Step<Option<RowId>> {
    match s {
        Step::Done(r) => Step::Done(Some(r)),
        Step::Blocked => Step::Blocked,
    }
}

/// Errors after which the transaction's state is as if the operation never ran.
fn is_clean_error(e: &NdbError) -> bool {
    matches!(
        e.code,
        626 | 630 | 4209 | 4217 | 839 | 4264 | 4202 | 827 | 625 | 902 | 4004
    )
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if matches!(self.state, TxState::Open | TxState::Aborted) {
            self.rollback();
            self.state = TxState::Closed;
        }
    }
}

impl TableRuntime {
    /// Writes on this table need follow-up work (BLOB parts or unique index rows).
    pub fn has_follow_ups(&self) -> bool {
        self.blob_tables.iter().any(|b| b.is_some())
            || self.unique_tables.iter().any(|u| u.is_some())
    }
}

/// Column value lengths for blobs: the number of parts of a value.
pub(crate) fn blob_parts(ty: &ColumnType, total_len: u64) -> u32 {
    match ty {
        ColumnType::Blob { kind, .. } if kind.part_size() > 0 => {
            let inline = kind.inline_size() as u64;
            if total_len <= inline {
                0
            } else {
                (total_len - inline).div_ceil(kind.part_size() as u64) as u32
            }
        }
        _ => 0,
    }
}
