//! The LQH role (NDB's DBLQH): a transaction's operations on this node's replicas, in
//! a local transaction of the node's engine that holds their row locks until commit or
//! abort.
//!
//! - As **primary**: run the operations (reads give their rows; with AO_IgnoreError an
//!   operation that fails on its row is listed for the answer and changed nothing),
//!   read back the after-image of every row written (its full values, or "deleted"),
//!   send those to the partitions' live backups, answer the TC once every backup
//!   prepared (with, when there are several node groups, the unique values written,
//!   which the TC checks in the other groups: `unique_check`). At `LqhCommit`: the
//!   backups commit first, then this node; then the TC is answered.
//! - As **backup**: apply after-images (a Write of the whole row, or a delete of the
//!   row if present) and answer the primary; commit when told.
//! - **Rounds** (NDB API's execute(NoCommit)): the TC may send a primary more
//!   operations of a prepared transaction, numbered with the TC's round; they run in
//!   the same local transaction and their after-images go to the backups the same
//!   way. A round at or below the last one run is a duplicate and ignored. A round
//!   that finds the joining set changed since the record's first round (a
//!   node-restart copy marked or unmarked meanwhile) is refused with 4010 and the
//!   transaction aborts: the rows of its earlier rounds never reached the joining
//!   node, so it must not go on writing (`copy_out` waits for records from before a
//!   mark, and asks the TC to end those left open and idle).
//! - **One local transaction per transaction and node**: a node that is primary of
//!   some partitions of a transaction and backup of others holds two records, which
//!   share one local transaction ([`LocalTx`]). So each sees the other's uncommitted
//!   rows and holds its locks as its own, as NDB's operations of one transaction do: a
//!   unique index's hidden row deleted for one partition's row can be written again
//!   for another's. The first commit request of either record commits it; it comes
//!   only after the TC decided, and the node that sent it knows the decision, so a
//!   takeover finds the commit; this node's own takeover of the other record decides
//!   commit at once (`lqh_failure`). The other record's commit then finds it
//!   committed, and an abort of it is refused (a protocol error, logged).
//!   A node not yet ready (joining) keeps its records apart: its refusals stop its
//!   copy, not the transaction.
//! - **Takeover** (the TC failed while this node held the transaction prepared and the
//!   decision is unknown here): ask every live data node what it knows; a node that
//!   committed it means commit, otherwise abort once every node answered. A node asked
//!   about a transaction it holds prepared *freezes* it: messages about it from its TC
//!   are ignored from then on, so its answer cannot be overtaken.

use super::{DataPath, err_parts};
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome, Transaction};
use crate::error::{NdbError, Result, codes};
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::{
    DataMsg, KeyOp, OpFailure, OpResult, OpType, TxnKey, TxnState, UniqueCheck,
};
use crate::txn::lock::LockMode;
use std::collections::{BTreeMap, BTreeSet};

/// How long a prepare waits for room in the node's redo log before it refuses with
/// 410/1221 (temporary). Short: a worker thread is held meanwhile, and the node's loop
/// that hands work to the workers must keep up with heartbeats.
pub const PREPARE_REDO_WAIT_MS: u64 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for the backups' prepare answers.
    PreparingBackups,
    /// Prepared everywhere; the TC decides.
    Prepared,
    /// Told to commit; waiting for the backups' commit answers.
    CommittingBackups,
}

pub(super) enum Role {
    Primary {
        tc: NodeId,
        backups: BTreeSet<NodeId>,
        waiting: BTreeSet<NodeId>,
        phase: Phase,
        reads: Vec<(u32, OpResult)>,
        /// The round's unique values for the TC to check (`unique_check`), sent with
        /// the answer.
        checks: Vec<UniqueCheck>,
        /// The round's operations that failed alone (AO_IgnoreError), sent with the
        /// answer.
        failed: Vec<OpFailure>,
        error: Option<NdbError>,
        /// Who asked for the commit (the TC, or a takeover).
        commit_to: NodeId,
    },
    /// A backup of one or more partitions of the transaction: with three or more
    /// replicas a node can be backup of partitions with different primaries, each
    /// sending its after-images; they share one local transaction. Each primary's
    /// last round applied.
    Backup { primaries: BTreeMap<NodeId, u32> },
}

/// A local transaction of the node's engine, shared by a transaction's records here.
pub(crate) type LocalTx = std::sync::Arc<parking_lot::Mutex<Transaction>>;

pub(crate) struct LqhTxn {
    pub(super) tx: LocalTx,
    pub(super) role: Role,
    /// A primary's last round (the TC's numbering; the one under way included).
    pub(super) round: u32,
    /// A primary's view of the joining nodes at its first round (see the notes).
    joining_at_start: BTreeSet<NodeId>,
    /// A takeover's unanswered queries (None: no takeover running).
    pub(super) takeover: Option<BTreeSet<NodeId>>,
    pub(super) frozen: bool,
    /// Keys this (joining) backup deletes: settled at commit or abort.
    tombs: Vec<Vec<u8>>,
}

/// Rolls a record's local transaction back, unless it already ended (the other record
/// of the transaction here rolled it back).
pub(super) fn rollback_local(tx: &LocalTx) {
    let mut tx = tx.lock();
    if tx.state() == crate::api::TxState::Open {
        let _ = tx.execute(ExecType::Rollback, AbortOption::AbortOnError);
    }
}

/// What a run of operations gives: the reads' results by op index, and the operations
/// that failed alone.
type RunOps = (Vec<(u32, OpResult)>, Vec<OpFailure>);

/// Whether an error of an operation under AO_IgnoreError fails that operation alone:
/// an error of its row (no such row, a duplicate key or unique value), which leaves
/// the row as it was; any other (a full log or memory, a bad value) fails the round.
fn fails_alone(e: &NdbError) -> bool {
    use crate::error::ErrorClassification::{ConstraintViolation, NoDataFound};
    matches!(e.classification, NoDataFound | ConstraintViolation)
}

fn op_kind(t: OpType) -> OpKind {
    match t {
        OpType::ReadCommitted => OpKind::Read(LockMode::CommittedRead),
        OpType::ReadShared => OpKind::Read(LockMode::Read),
        OpType::ReadExclusive => OpKind::Read(LockMode::Exclusive),
        OpType::Insert => OpKind::Insert,
        OpType::Update => OpKind::Update,
        OpType::Write => OpKind::Write,
        OpType::Delete => OpKind::Delete,
    }
}

impl DataPath {
    /// Defines `op` in `tx`.
    fn define(&self, tx: &mut Transaction, op: &KeyOp) -> Result<()> {
        let rt = self.engine.inner().table(&op.database, &op.table)?;
        let def = &rt.def;
        if op.key.len() != def.primary_key.len() {
            return Err(codes::key_not_complete(format!(
                "{} key values for {} primary-key columns",
                op.key.len(),
                def.primary_key.len()
            )));
        }
        let key: Vec<(usize, Value)> = def
            .primary_key
            .iter()
            .copied()
            .zip(op.key.iter().cloned())
            .collect();
        let mut values = Vec::with_capacity(op.values.len());
        for (c, v) in &op.values {
            let c = *c as usize;
            if c >= def.columns.len() {
                return Err(codes::no_such_column(&format!("#{c}")));
            }
            values.push((c, v.clone()));
        }
        let cols = if op.columns.is_empty() {
            None
        } else {
            let cols: Vec<usize> = op.columns.iter().map(|&c| c as usize).collect();
            if let Some(&c) = cols.iter().find(|&&c| c >= def.columns.len()) {
                return Err(codes::no_such_column(&format!("#{c}")));
            }
            Some(cols)
        };
        tx.define_by_pos(&rt, op_kind(op.op), key, values, cols)?;
        Ok(())
    }

    /// Runs `ops` in `tx` (NoCommit): the reads' results, or the first failure (a read
    /// or a backup's delete of a missing row is not one, a full redo log is: 410/1221
    /// after RedoOverCommitLimit, see `Transaction::prepare_redo_room`). With
    /// `ignore_errors` (AO_IgnoreError, a primary's) a write that fails on its row
    /// (no such row, duplicate key: it changed nothing) is listed instead, and the
    /// others go on.
    fn run_ops(
        &self,
        tx: &mut Transaction,
        ops: &[(u32, KeyOp)],
        backup: bool,
        ignore_errors: bool,
    ) -> Result<RunOps> {
        let first = tx.op_count();
        for (_, op) in ops {
            self.define(tx, op)?;
        }
        tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
        let mut reads = Vec::new();
        let mut failed = Vec::new();
        for (k, (i, op)) in ops.iter().enumerate() {
            match tx.outcome(OpId(first + k)) {
                Some(OpOutcome::Row(vals)) => reads.push((*i, Some(vals.clone()))),
                Some(OpOutcome::Failed(e)) if e.code == 626 && op.op.is_read() => {
                    reads.push((*i, None))
                }
                Some(OpOutcome::Failed(e)) if e.code == 626 && backup => {}
                Some(OpOutcome::Failed(e)) if ignore_errors && !backup && fails_alone(e) => {
                    let (code, class, message) = err_parts(e);
                    failed.push(OpFailure {
                        op: *i,
                        code,
                        class,
                        message,
                    });
                }
                Some(OpOutcome::Failed(e)) => return Err(e.clone()),
                _ => {}
            }
        }
        // Room in the redo log now, before this replica says prepared: its commit
        // cannot refuse later (the others may have committed by then). A worker waits
        // briefly only: the node's loop hands it work, and a loop held up misses
        // heartbeats; the client gets 410 (temporary) and retries.
        tx.prepare_redo_room(PREPARE_REDO_WAIT_MS)?;
        Ok((reads, failed))
    }

    /// The after-images of the rows `ops` wrote, per backup node; and, with several
    /// node groups, each written row of a table with a unique index with its last
    /// operation (for `unique_checks_of`).
    #[allow(clippy::type_complexity)]
    fn after_images(
        &self,
        tx: &mut Transaction,
        ops: &[(u32, KeyOp)],
    ) -> Result<(BTreeMap<NodeId, Vec<(u32, KeyOp)>>, Vec<(KeyOp, KeyOp)>)> {
        // The last write of each row decides its image.
        let mut rows: Vec<(u32, &KeyOp, usize)> = Vec::new();
        let mut seen: BTreeSet<(String, String, Vec<u8>)> = BTreeSet::new();
        for (i, op) in ops.iter().rev() {
            if op.op.is_read() {
                continue;
            }
            let mut e = crate::schema::codec::Encoder::new();
            for v in &op.key {
                crate::schema::codec::encode_value(&mut e, v);
            }
            let k = e.into_bytes();
            if seen.insert((op.database.clone(), op.table.clone(), k)) {
                let part = self.partition_of_op(op)?;
                rows.push((*i, op, part));
            }
        }
        rows.reverse();
        let mut out: BTreeMap<NodeId, Vec<(u32, KeyOp)>> = BTreeMap::new();
        let mut unique_rows = Vec::new();
        if rows.is_empty() {
            return Ok((out, unique_rows));
        }
        let groups = self.groups.len();
        let first = tx.op_count();
        let mut reads = Vec::with_capacity(rows.len());
        for (i, op, _) in &rows {
            let rt = self.engine.inner().table(&op.database, &op.table)?;
            let all: Vec<u32> = (0..rt.def.columns.len() as u32).collect();
            let read = KeyOp {
                op: OpType::ReadExclusive,
                database: op.database.clone(),
                table: op.table.clone(),
                key: op.key.clone(),
                values: Vec::new(),
                columns: all,
            };
            self.define(tx, &read)?;
            reads.push((*i, read));
        }
        tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
        for (k, ((i, op, part), (_, read))) in rows.iter().zip(reads).enumerate() {
            let image = match tx.outcome(OpId(first + k)) {
                Some(OpOutcome::Row(vals)) => KeyOp {
                    op: OpType::Write,
                    values: vals
                        .iter()
                        .cloned()
                        .enumerate()
                        .map(|(c, v)| (c as u32, v))
                        .collect(),
                    columns: Vec::new(),
                    ..read
                },
                Some(OpOutcome::Failed(e)) if e.code == 626 => KeyOp {
                    op: OpType::Delete,
                    columns: Vec::new(),
                    ..read
                },
                Some(OpOutcome::Failed(e)) => return Err(e.clone()),
                _ => return Err(codes::internal("after-image read did not run")),
            };
            if groups > 1
                && self
                    .engine
                    .inner()
                    .table(&op.database, &op.table)?
                    .unique_tables
                    .iter()
                    .any(Option::is_some)
            {
                unique_rows.push(((*op).clone(), image.clone()));
            }
            for b in self.live_replicas(*part) {
                if b != self.me {
                    out.entry(b).or_default().push((*i, image.clone()));
                }
            }
        }
        Ok((out, unique_rows))
    }

    fn prepared_msg(
        txn: TxnKey,
        backup: bool,
        round: u32,
        r: &Result<Vec<(u32, OpResult)>>,
    ) -> DataMsg {
        match r {
            Ok(reads) => {
                Self::prepared_with(txn, backup, round, reads.clone(), Vec::new(), Vec::new())
            }
            Err(e) => {
                let (code, class, message) = err_parts(e);
                DataMsg::LqhPrepared {
                    txn,
                    backup,
                    round,
                    code,
                    class,
                    message,
                    reads: Vec::new(),
                    checks: Vec::new(),
                    failed: Vec::new(),
                }
            }
        }
    }

    /// After-images from a primary for a transaction this node is already a backup
    /// of: another primary's, or the next round of one it has (a round at or below
    /// the last one applied is a duplicate). They join its local transaction.
    fn lqh_prepare_more(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        round: u32,
        mut rec: LqhTxn,
        ops: Vec<(u32, KeyOp)>,
    ) {
        let Role::Backup { primaries } = &mut rec.role else {
            self.lqh.lock().insert((txn, true), rec);
            return;
        };
        if primaries.get(&from).is_some_and(|&last| last >= round) {
            self.lqh.lock().insert((txn, true), rec);
            return;
        }
        primaries.insert(from, round);
        let r = if self.is_ready() {
            Ok(())
        } else {
            self.note_touched(&mut rec.tx.lock(), &ops)
        }
        .and_then(|()| self.run_ops(&mut rec.tx.lock(), &ops, true, false));
        if r.is_ok() && !self.is_ready() {
            rec.tombs.extend(
                ops.iter()
                    .filter(|(_, op)| op.op == OpType::Delete)
                    .filter_map(|(_, op)| self.row_key(&op.database, &op.table, &op.key).ok()),
            );
            self.note_tombstones(txn, &rec.tombs);
        }
        let answer = r.map(|_| Vec::new());
        // A refusal aborts the transaction (its primary tells the TC); the record
        // stays until the abort comes.
        self.lqh.lock().insert((txn, true), rec);
        self.send_from(worker, from, Self::prepared_msg(txn, true, round, &answer));
    }

    /// LQHKEYREQ: see the module notes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lqh_prepare(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        backup: bool,
        round: u32,
        ops: Vec<(u32, KeyOp)>,
        ignore_errors: bool,
    ) {
        if backup {
            let existing = self.lqh.lock().remove(&(txn, true));
            return match existing {
                Some(rec) => self.lqh_prepare_more(worker, from, txn, round, rec, ops),
                None => self.lqh_prepare_backup(worker, from, txn, round, ops),
            };
        }
        let existing = self.lqh.lock().remove(&(txn, false));
        let mut rec = match existing {
            Some(rec) => {
                let duplicate = rec.round >= round || (rec.frozen && from == txn.tc);
                let idle = matches!(
                    rec.role,
                    Role::Primary { phase: Phase::Prepared, tc, .. } if tc == from
                );
                if duplicate || !idle {
                    self.lqh.lock().insert((txn, false), rec);
                    if !duplicate {
                        let e = codes::internal(format!(
                            "transaction {}:{} got round {round} on node {} while another ran",
                            txn.tc, txn.id, self.me
                        ));
                        self.send_from(
                            worker,
                            from,
                            Self::prepared_msg(txn, false, round, &Err(e)),
                        );
                    }
                    return;
                }
                rec
            }
            None => {
                let tx = match self.local_tx_for(txn, false) {
                    Ok(t) => t,
                    Err(e) => {
                        let m = Self::prepared_msg(txn, false, round, &Err(e));
                        return self.send_from(worker, from, m);
                    }
                };
                LqhTxn {
                    tx,
                    role: Role::Primary {
                        tc: from,
                        backups: BTreeSet::new(),
                        waiting: BTreeSet::new(),
                        phase: Phase::Prepared,
                        reads: Vec::new(),
                        checks: Vec::new(),
                        failed: Vec::new(),
                        error: None,
                        commit_to: from,
                    },
                    round: 0,
                    joining_at_start: BTreeSet::new(),
                    takeover: None,
                    frozen: false,
                    tombs: Vec::new(),
                }
            }
        };
        let first_round = rec.round == 0;
        rec.round = round;
        let r = self
            .primary_admits(from, &ops)
            .and_then(|()| self.run_ops(&mut rec.tx.lock(), &ops, false, ignore_errors));
        // From choosing the backups to holding the record: a copy's mark either sees
        // this transaction's record or this transaction sees the mark (`copy`).
        let gate = self.chain_gate.read();
        let images = r.and_then(|(reads, failed)| {
            let joining = self.members.read().joining.clone();
            if first_round {
                rec.joining_at_start = joining;
            } else if rec.joining_at_start != joining {
                return Err(codes::node_failure_abort().detail(format!(
                    "a node restart copy began on node {} during the transaction; its earlier rows did not reach the restarting node",
                    self.me
                )));
            }
            // An operation that failed alone changed nothing: no after-image of it.
            let written: Vec<(u32, KeyOp)> = ops
                .into_iter()
                .filter(|(i, _)| !failed.iter().any(|f| f.op == *i))
                .collect();
            let (images, unique_rows) = self.after_images(&mut rec.tx.lock(), &written)?;
            let checks = self.unique_checks_of(&unique_rows)?;
            Ok((reads, images, checks, failed))
        });
        let (reads, images, checks, failed) = match images {
            Ok(v) => v,
            Err(e) => {
                drop(gate);
                self.abort_record(worker, txn, &mut rec);
                self.send_from(worker, from, Self::prepared_msg(txn, false, round, &Err(e)));
                return;
            }
        };
        let round_backups: BTreeSet<NodeId> = images.keys().copied().collect();
        let done = round_backups.is_empty();
        if let Role::Primary {
            backups,
            waiting,
            phase,
            reads: pending_reads,
            checks: pending_checks,
            failed: pending_failed,
            error,
            commit_to,
            ..
        } = &mut rec.role
        {
            backups.extend(round_backups.iter().copied());
            *waiting = round_backups;
            *phase = if done {
                Phase::Prepared
            } else {
                Phase::PreparingBackups
            };
            *pending_reads = if done { Vec::new() } else { reads.clone() };
            *pending_checks = if done { Vec::new() } else { checks.clone() };
            *pending_failed = if done { Vec::new() } else { failed.clone() };
            *error = None;
            *commit_to = from;
        }
        self.lqh.lock().insert((txn, false), rec);
        drop(gate);
        if done {
            self.send_from(
                worker,
                from,
                Self::prepared_with(txn, false, round, reads, checks, failed),
            );
            return;
        }
        for (b, ops) in images {
            self.send_from(
                worker,
                b,
                DataMsg::LqhPrepare {
                    txn,
                    backup: true,
                    round,
                    ops,
                    ignore_errors: false,
                },
            );
        }
    }

    /// The round prepared, with the reads' results and (a primary's answer to its
    /// TC) the unique values to check and the operations that failed alone.
    fn prepared_with(
        txn: TxnKey,
        backup: bool,
        round: u32,
        reads: Vec<(u32, OpResult)>,
        checks: Vec<UniqueCheck>,
        failed: Vec<OpFailure>,
    ) -> DataMsg {
        DataMsg::LqhPrepared {
            txn,
            backup,
            round,
            code: 0,
            class: 0,
            message: String::new(),
            reads,
            checks,
            failed,
        }
    }

    /// Whether this node, as primary, takes these operations from `tc` now: under its
    /// read lease, as the primary of each operation's partition in its view, with
    /// room to answer and forward.
    fn primary_admits(&self, tc: NodeId, ops: &[(u32, KeyOp)]) -> Result<()> {
        // A primary serves only under its read lease (`lease`).
        self.check_serving()?;
        for (_, op) in ops {
            let replicas = self
                .partition_of_op(op)
                .map(|p| self.live_replicas(p))
                .unwrap_or_default();
            // New work here answers the TC and forwards to the backups.
            self.check_send_load(replicas.iter().copied().chain([tc]))?;
            let not_primary = match self.partition_of_op(op) {
                Ok(_) => replicas.first() != Some(&self.me),
                Err(_) => false,
            };
            if not_primary {
                return Err(codes::node_failure_abort().detail(format!(
                    "node {} is not the primary of a partition of {} (a view change is under way)",
                    self.me, op.table
                )));
            }
        }
        Ok(())
    }

    /// The first after-images of a transaction from a primary: a backup record.
    fn lqh_prepare_backup(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        round: u32,
        ops: Vec<(u32, KeyOp)>,
    ) {
        let tx = match self.local_tx_for(txn, true) {
            Ok(t) => t,
            Err(e) => {
                let m = Self::prepared_msg(txn, true, round, &Err(e));
                return self.send_from(worker, from, m);
            }
        };
        let touched = if self.is_ready() {
            Ok(())
        } else {
            self.note_touched(&mut tx.lock(), &ops)
        };
        if let Err(e) = touched.and_then(|()| self.run_ops(&mut tx.lock(), &ops, true, false)) {
            // A local transaction shared with this node's primary record stays: the
            // refusal aborts the transaction, and that record's abort rolls it back.
            if std::sync::Arc::strong_count(&tx) == 1 {
                let _ = tx
                    .lock()
                    .execute(ExecType::Rollback, AbortOption::AbortOnError);
            }
            let m = Self::prepared_msg(txn, true, round, &Err(e));
            return self.send_from(worker, from, m);
        }
        // A joining node remembers the deletes it prepares (`copy`).
        let tombs: Vec<Vec<u8>> = if self.is_ready() {
            Vec::new()
        } else {
            ops.iter()
                .filter(|(_, op)| op.op == OpType::Delete)
                .filter_map(|(_, op)| self.row_key(&op.database, &op.table, &op.key).ok())
                .collect()
        };
        self.note_tombstones(txn, &tombs);
        self.lqh.lock().insert(
            (txn, true),
            LqhTxn {
                tx,
                role: Role::Backup {
                    primaries: BTreeMap::from([(from, round)]),
                },
                round,
                joining_at_start: BTreeSet::new(),
                takeover: None,
                frozen: false,
                tombs,
            },
        );
        self.send_from(
            worker,
            from,
            Self::prepared_msg(txn, true, round, &Ok(Vec::new())),
        );
    }

    /// A backup's prepare answer (or its loss: `from` left the view).
    pub(super) fn lqh_backup_prepared(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        round: u32,
        err: Option<NdbError>,
    ) {
        // (Read before the records: lock order.) A joining node's refusal stops its
        // copy, not the transaction.
        let joining = err.is_some() && self.members.read().joining.contains(&from);
        {
            let mut map = self.lqh.lock();
            let Some(rec) = map.get_mut(&(txn, false)) else {
                return;
            };
            let Role::Primary {
                backups,
                waiting,
                phase,
                error,
                ..
            } = &mut rec.role
            else {
                return;
            };
            if rec.round != round || *phase != Phase::PreparingBackups || !waiting.remove(&from) {
                return;
            }
            if let Some(e) = &err {
                backups.remove(&from);
                if !joining {
                    error.get_or_insert_with(|| e.clone());
                }
            }
        }
        if let (true, Some(e)) = (joining, err) {
            self.members.write().joining.remove(&from);
            self.send_from(
                worker,
                from,
                DataMsg::CopyAbort {
                    // Whatever attempt runs: the joining node starts another.
                    attempt: u64::MAX,
                    reason: format!("an after-image failed there: {e}"),
                },
            );
        }
        self.lqh_backup_prepared_check(worker, txn);
    }

    /// The local transaction for a new record of `txn` (`backup`: a backup record):
    /// the one of its other record here, if any and this node is ready, else a new
    /// one (see the module notes).
    fn local_tx_for(&self, txn: TxnKey, backup: bool) -> Result<LocalTx> {
        // (The map's lock is let go before a transaction's: never both held.)
        let other = if self.is_ready() {
            self.lqh.lock().get(&(txn, !backup)).map(|r| r.tx.clone())
        } else {
            None
        };
        if let Some(tx) = other
            && tx.lock().state() == crate::api::TxState::Open
        {
            return Ok(tx);
        }
        let tx = self.engine.ndb("rndb").start_transaction()?;
        Ok(std::sync::Arc::new(parking_lot::Mutex::new(tx)))
    }

    /// Commits the local transaction of a record taken out of the map (already
    /// committed when the other record of the transaction here committed it).
    fn commit_local(&self, txn: TxnKey, rec: &mut LqhTxn) -> u64 {
        let mut tx = rec.tx.lock();
        let r = match tx.state() {
            crate::api::TxState::Committed => Ok(()),
            _ => tx.execute(ExecType::Commit, AbortOption::AbortOnError),
        };
        if let Err(e) = r {
            // The other replicas committed: this one cannot refuse now. NDB would
            // shut the node down; the log says which transaction diverged.
            self.log(
                crate::mgm::log::Severity::Alert,
                &format!(
                    "commit of transaction {}:{} failed on this replica: {e}",
                    txn.tc, txn.id
                ),
            );
        }
        self.note_committed(txn);
        tx.gci().unwrap_or(0)
    }

    /// Commits a backup record now (its primary told it, or the primary is gone and
    /// the TC or a takeover decided); the GCI, None when there is no such record.
    pub(super) fn commit_backup_record(&self, txn: TxnKey) -> Option<u64> {
        let mut rec = self.lqh.lock().remove(&(txn, true))?;
        let gci = self.commit_local(txn, &mut rec);
        self.settle_tombstones(&rec.tombs, true);
        Some(gci)
    }

    /// COMMIT (see [`DataMsg::LqhCommit`]): `backup` from a primary to its backup
    /// record; else from the TC (or a takeover) to the primary record, and to a backup
    /// record whose primary failed.
    pub(super) fn lqh_commit(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        backup: bool,
        gci_hi: u32,
    ) {
        // No commit straddles a global cut: a commit sent in a newer checkpoint than
        // this node's moves it on first (`gcp.rs`).
        self.gcp_raise(gci_hi);
        let frozen_from_tc = |r: &LqhTxn| r.frozen && from == txn.tc;
        if backup {
            if self
                .lqh
                .lock()
                .get(&(txn, true))
                .is_some_and(frozen_from_tc)
            {
                return;
            }
            // No record and not committed would be a protocol error; the primary is
            // answered anyway so that it never waits for nothing.
            let gci = self.commit_backup_record(txn).unwrap_or(0);
            self.send_from(worker, from, DataMsg::LqhCommitted { txn, backup, gci });
            return;
        }
        // The TC decided: a backup record of this transaction here commits with the
        // decision, whether or not its primary still lives in this node's view — the
        // TC may have seen the primary fail first and asks this node to take over
        // before this node installs that view (the primary's own commit request
        // later finds it committed and is answered).
        let orphan = self
            .lqh
            .lock()
            .get(&(txn, true))
            .is_some_and(|r| matches!(r.role, Role::Backup { .. }) && !frozen_from_tc(r));
        let orphan_gci = if orphan {
            self.commit_backup_record(txn)
        } else {
            None
        };
        let key = (txn, false);
        let mut map = self.lqh.lock();
        let Some(rec) = map.get_mut(&key) else {
            drop(map);
            // Committed here (now, or before with its answer lost): say so. Knowing
            // nothing of it, say that: the TC must not count this as a commit.
            if orphan_gci.is_some() || self.was_committed(&txn) {
                let gci = orphan_gci.unwrap_or(0);
                self.send_from(worker, from, DataMsg::LqhCommitted { txn, backup, gci });
            } else {
                self.send_from(
                    worker,
                    from,
                    DataMsg::TxnStateConf {
                        txn,
                        state: TxnState::Unknown,
                    },
                );
            }
            return;
        };
        if frozen_from_tc(rec) {
            return;
        }
        match &mut rec.role {
            Role::Primary {
                backups,
                waiting,
                phase,
                commit_to,
                ..
            } if *phase == Phase::Prepared && !backups.is_empty() => {
                *phase = Phase::CommittingBackups;
                *commit_to = from;
                *waiting = backups.clone();
                let to: Vec<NodeId> = backups.iter().copied().collect();
                drop(map);
                for b in to {
                    self.send_from(
                        worker,
                        b,
                        DataMsg::LqhCommit {
                            txn,
                            backup: true,
                            gci_hi,
                        },
                    );
                }
            }
            Role::Primary { phase, .. } if *phase == Phase::CommittingBackups => {}
            _ => {
                let Some(mut rec) = map.remove(&key) else {
                    return;
                };
                drop(map);
                let gci = self.commit_local(txn, &mut rec);
                self.send_from(worker, from, DataMsg::LqhCommitted { txn, backup, gci });
            }
        }
    }

    /// A backup committed (or left the view).
    pub(super) fn lqh_backup_committed(&self, worker: usize, from: NodeId, txn: TxnKey) {
        let key = (txn, false);
        let mut map = self.lqh.lock();
        let Some(rec) = map.get_mut(&key) else { return };
        let Role::Primary {
            waiting,
            phase,
            commit_to,
            ..
        } = &mut rec.role
        else {
            return;
        };
        if *phase != Phase::CommittingBackups || !waiting.remove(&from) || !waiting.is_empty() {
            return;
        }
        let to = *commit_to;
        let Some(mut rec) = map.remove(&key) else {
            return;
        };
        drop(map);
        let gci = self.commit_local(txn, &mut rec);
        self.send_from(
            worker,
            to,
            DataMsg::LqhCommitted {
                txn,
                backup: false,
                gci,
            },
        );
    }

    /// ABORT: both of this node's records of `txn` (a primary's backups are told).
    pub(super) fn lqh_abort(&self, worker: usize, from: NodeId, txn: TxnKey) {
        for backup in [false, true] {
            let rec = {
                let mut map = self.lqh.lock();
                if map
                    .get(&(txn, backup))
                    .is_some_and(|r| r.frozen && from == txn.tc)
                {
                    continue;
                }
                map.remove(&(txn, backup))
            };
            if let Some(mut rec) = rec {
                self.abort_record(worker, txn, &mut rec);
                // Another participant's primary refused its part and aborted at its
                // backups, this node among them, while this node's own part of the
                // round was still waiting (for its backups or unique checks): its TC
                // waits for every participant, so it hears the round end here.
                if let Role::Primary {
                    tc,
                    phase: Phase::PreparingBackups,
                    ..
                } = rec.role
                {
                    let e = codes::transaction_aborted().detail(format!(
                        "node {from} aborted the transaction at data node {} during its prepare",
                        self.me
                    ));
                    let m = Self::prepared_msg(txn, false, rec.round, &Err(e));
                    self.send_from(worker, tc, m);
                }
            }
        }
    }

    pub(super) fn abort_record(&self, worker: usize, txn: TxnKey, rec: &mut LqhTxn) {
        if rec.tx.lock().state() == crate::api::TxState::Committed {
            // Its other record here committed it, on a request sent only once the
            // commit was decided: an abort now would be a protocol error.
            debug_assert!(false, "abort of committed transaction {txn:?}");
            self.log(
                crate::mgm::log::Severity::Alert,
                &format!(
                    "abort of transaction {}:{}, which this node committed, ignored",
                    txn.tc, txn.id
                ),
            );
            return;
        }
        rollback_local(&rec.tx);
        self.settle_tombstones(&rec.tombs, false);
        if let Role::Primary { backups, .. } = &rec.role {
            for &b in backups {
                self.send_from(worker, b, DataMsg::LqhAbort { txn });
            }
        }
    }

    /// Once every backup answered: the TC hears the reads, or the first refusal (the
    /// record is then aborted everywhere).
    fn lqh_backup_prepared_check(&self, worker: usize, txn: TxnKey) {
        let key = (txn, false);
        let (tc, round, reads, checks, failed) = {
            let mut map = self.lqh.lock();
            let Some(rec) = map.get_mut(&key) else { return };
            let Role::Primary {
                tc,
                waiting,
                phase,
                reads,
                checks,
                failed,
                error,
                ..
            } = &mut rec.role
            else {
                return;
            };
            if *phase != Phase::PreparingBackups || !waiting.is_empty() {
                return;
            }
            if let Some(e) = error.take() {
                let tc = *tc;
                let Some(mut rec) = map.remove(&key) else {
                    return;
                };
                drop(map);
                self.abort_record(worker, txn, &mut rec);
                let m = Self::prepared_msg(txn, false, rec.round, &Err(e));
                self.send_from(worker, tc, m);
                return;
            }
            *phase = Phase::Prepared;
            (
                *tc,
                rec.round,
                std::mem::take(reads),
                std::mem::take(checks),
                std::mem::take(failed),
            )
        };
        self.send_from(
            worker,
            tc,
            Self::prepared_with(txn, false, round, reads, checks, failed),
        );
    }

    /// Asks the TC of a prepared primary record to end its transaction if it is open
    /// between rounds (the TC ignores it otherwise: the record is never aborted here,
    /// since the TC may have decided to commit).
    pub(super) fn lqh_ask_end_open(&self, worker: usize, txn: TxnKey) {
        let ask = {
            let map = self.lqh.lock();
            match map.get(&(txn, false)) {
                Some(LqhTxn {
                    role:
                        Role::Primary {
                            tc,
                            phase: Phase::Prepared,
                            ..
                        },
                    round,
                    frozen: false,
                    ..
                }) => Some((*tc, *round)),
                _ => None,
            }
        };
        if let Some((tc, round)) = ask {
            let e = codes::node_failure_abort().detail(format!(
                "a node restart copy on node {} waited for this transaction while it was open",
                self.me
            ));
            self.send_from(worker, tc, Self::prepared_msg(txn, false, round, &Err(e)));
        }
    }

    /// Keys of the records where this node is primary.
    pub(super) fn primary_records(&self) -> BTreeSet<(TxnKey, bool)> {
        self.lqh
            .lock()
            .iter()
            .filter(|(_, r)| matches!(r.role, Role::Primary { .. }))
            .map(|(k, _)| *k)
            .collect()
    }

    /// Whether a transaction this node is primary of still has `node` as a backup.
    pub(super) fn has_backup_in_chain(&self, node: NodeId) -> bool {
        self.lqh.lock().values().any(|r| match &r.role {
            Role::Primary { backups, .. } => backups.contains(&node),
            Role::Backup { .. } => false,
        })
    }
}
