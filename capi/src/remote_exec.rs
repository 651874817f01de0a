//! Execution of a transaction's operations against a remote cluster (the `remote`
//! module's notes): one `execute` as a round of a `RemoteTransaction`, the outcome of
//! a one-round transaction `sendPollNdb` sent, committed reads' outcomes, remote
//! scans and the locks of an LM_Exclusive scan's batches.

use crate::remote::RemoteNdb;
use crate::txn::{OpType, TxObj, TxStatus, op_status_error};
use rndb_core::api::TableRuntime;
use rndb_core::cluster::remote::{Committed, Pending, RemoteCluster};
use rndb_core::cluster::remote_scan::RemoteScanSpec;
use rndb_core::cluster::remote_txn::RemoteTransaction;
use rndb_core::error::{ErrorClassification, NdbError, Result, codes};
use rndb_core::schema::Value;
use rndb_core::transport::data::{KeyOp, OpType as WireOp, TcExec};
use rndb_core::transport::data_scan::MAX_SCAN_BATCH_ROWS;
use rndb_core::{AbortOption, ExecType, LockMode, OpKind};
use std::sync::Arc;

fn wire_op(kind: OpKind) -> WireOp {
    match kind {
        OpKind::Read(LockMode::CommittedRead) => WireOp::ReadCommitted,
        // A simple read's lock is held to the round's end over TCP.
        OpKind::Read(LockMode::Read | LockMode::SimpleRead) => WireOp::ReadShared,
        OpKind::Read(LockMode::Exclusive) => WireOp::ReadExclusive,
        OpKind::Insert => WireOp::Insert,
        OpKind::Update => WireOp::Update,
        OpKind::Write => WireOp::Write,
        OpKind::Delete => WireOp::Delete,
    }
}

/// A round's operations: the key operations to send and the index of each in `ops`,
/// the scans to open.
struct Round {
    ops: Vec<KeyOp>,
    at: Vec<usize>,
    scans: Vec<usize>,
}

impl Round {
    fn has_reads(&self) -> bool {
        self.ops.iter().any(|o| o.op.is_read())
    }
}

fn tc_exec(e: ExecType) -> TcExec {
    match e {
        ExecType::NoCommit => TcExec::NoCommit,
        ExecType::Commit => TcExec::Commit,
        ExecType::Rollback => TcExec::Rollback,
    }
}

/// A one-round transaction sent by `sendPollNdb`, its answer not yet read.
pub(crate) struct Submitted {
    pending: Pending,
    at: Vec<usize>,
    single_op: bool,
}

impl TxObj {
    /// The operations defined since the last execute as a round (the first bad one:
    /// (its index, the error)).
    ///
    /// An insert or write into a table without a primary key that gave no hidden key
    /// gets a new one from the data nodes' tuple-id service (`Ndb::getAutoIncrementValue`
    /// is how an NDB API program would set it).
    fn remote_round(
        &mut self,
        cluster: &Arc<RemoteCluster>,
        database: &str,
    ) -> std::result::Result<Round, (usize, NdbError)> {
        let (start, end) = (self.executed, self.n_ops);
        let mut r = Round {
            ops: Vec::with_capacity(end - start),
            at: Vec::with_capacity(end - start),
            scans: Vec::new(),
        };
        for (i, op) in self.ops.iter_mut().enumerate().take(end).skip(start) {
            let kind = match op.ty {
                OpType::Scan => {
                    r.scans.push(i);
                    continue;
                }
                OpType::Undefined => {
                    return Err((
                        i,
                        op_status_error(
                            "the operation has no type: call readTuple, insertTuple, updateTuple, writeTuple or deleteTuple first",
                        ),
                    ));
                }
                OpType::Key(kind) => kind,
            };
            let table = op.table().map_err(|e| (i, e))?.clone();
            let def = &table.def;
            let mut key = Vec::with_capacity(def.primary_key.len());
            for &p in &def.primary_key {
                match op.key.iter().find(|(c, _)| *c == p) {
                    Some((_, v)) => key.push(v.clone()),
                    None if def.columns[p].hidden
                        && matches!(kind, OpKind::Insert | OpKind::Write) =>
                    {
                        key.push(cluster.next_hidden_key(def).map_err(|e| (i, e))?);
                    }
                    None => {
                        return Err((
                            i,
                            codes::key_not_complete(format!(
                                "primary-key column '{}' of {} has no value (call equal for it)",
                                def.columns[p].name, def.name
                            )),
                        ));
                    }
                }
            }
            let reads = matches!(kind, OpKind::Read(_));
            r.ops.push(KeyOp {
                op: wire_op(kind),
                database: database.to_string(),
                table: def.name.clone(),
                key,
                values: op
                    .values
                    .iter()
                    .map(|(c, v)| (*c as u32, v.clone()))
                    .collect(),
                columns: if reads {
                    op.read_cols().iter().map(|&c| c as u32).collect()
                } else {
                    Vec::new()
                },
            });
            r.at.push(i);
        }
        Ok(r)
    }

    /// Copies a round's rows into rec attrs and records; marks reads that found no
    /// row with 626. Returns the first of those.
    fn apply_round(
        &mut self,
        at: &[usize],
        results: &[Option<Vec<rndb_core::schema::Value>>],
    ) -> Option<usize> {
        let mut missing = None;
        let TxObj { ops, ras, .. } = self;
        for (k, &i) in at.iter().enumerate() {
            let op = &mut ops[i];
            if !matches!(op.ty, OpType::Key(OpKind::Read(_))) {
                continue;
            }
            match results.get(k) {
                Some(Some(row)) => {
                    for (n, &ra) in op.ras.iter().enumerate() {
                        if let (Some(r), Some(v)) = (ras.get_mut(ra as usize), row.get(n)) {
                            r.fill(v);
                        }
                    }
                    if let Some(out) = &op.rec_out {
                        out.write(row);
                    }
                }
                _ => {
                    op.error.set(&codes::tuple_not_found());
                    missing.get_or_insert(i);
                }
            }
        }
        missing
    }

    /// Whether a refused round's error fails only its operation: AO_IgnoreError, the
    /// round's one operation, nothing done before, and an error of the row. The TC
    /// fails a row's error alone under AO_IgnoreError, but refuses the round for a
    /// unique value found taken in another node group (the `remote` module notes).
    fn only_the_operation_failed(
        abort: AbortOption,
        at: &[usize],
        fresh: bool,
        e: &NdbError,
    ) -> bool {
        abort == AbortOption::IgnoreError
            && at.len() == 1
            && fresh
            && matches!(
                e.classification,
                ErrorClassification::NoDataFound | ErrorClassification::ConstraintViolation
            )
    }

    /// The operation's error under AO_IgnoreError (`only_the_operation_failed`).
    fn ignore_failed_operation(&mut self, i: usize, e: &NdbError) {
        self.ops[i].error.set(e);
        if self.error_op.is_none() {
            self.error_op = Some(i);
        }
    }

    /// A refused round: the transaction is over.
    fn round_failed(&mut self, at: &[usize], e: NdbError) -> NdbError {
        self.status = TxStatus::Aborted;
        self.remote = None;
        let op = (at.len() == 1).then(|| at[0]);
        self.fail(op, e)
    }

    /// `execute` against the remote cluster (see the module notes).
    pub fn execute_remote(
        &mut self,
        rn: &mut RemoteNdb,
        database: &str,
        exec: ExecType,
        abort: AbortOption,
    ) -> Result<()> {
        self.dirty = true;
        if exec == ExecType::Rollback {
            if self.status == TxStatus::Committed {
                return Err(codes::transaction_closed()
                    .detail("execute(Rollback) after the transaction was committed"));
            }
            let r = match self.remote.as_mut() {
                Some(t) if t.is_open() => t.execute(Vec::new(), TcExec::Rollback).map(|_| ()),
                _ => Ok(()),
            };
            self.remote = None;
            self.executed = self.n_ops;
            self.status = TxStatus::Aborted;
            return r;
        }
        self.check_executable()?;
        let round = match self.remote_round(&rn.cluster, database) {
            Ok(r) => r,
            Err((i, e)) => {
                self.executed = self.n_ops;
                self.status = TxStatus::Aborted;
                self.remote = None;
                return Err(self.fail(Some(i), e));
            }
        };
        self.executed = self.n_ops;
        // Scans need the transaction open: with scans, Commit executes like NoCommit.
        let exec_now = if round.scans.is_empty() {
            exec
        } else {
            ExecType::NoCommit
        };
        let check = abort == AbortOption::AbortOnError && round.has_reads();
        let first = if check {
            TcExec::NoCommit
        } else {
            tc_exec(exec_now)
        };
        self.close_work = true;
        let txn = self
            .remote
            .get_or_insert_with(|| Box::new(rn.cluster.transaction()));
        let fresh = txn.tc_node().is_none();
        let Round { ops, at, scans } = round;
        // AO_IgnoreError: a write that fails on its row fails alone at the TC.
        let sent = if abort == AbortOption::IgnoreError {
            txn.execute_ignoring_errors(ops, first)
        } else {
            txn.execute(ops, first)
        };
        let answer = match sent {
            Ok(c) => c,
            Err(e) if Self::only_the_operation_failed(abort, &at, fresh, &e) => {
                self.ignore_failed_operation(at[0], &e);
                // Nothing was done: a new transaction takes the next rounds.
                self.remote = Some(Box::new(rn.cluster.transaction()));
                Committed {
                    gci: 0,
                    results: vec![None],
                    failed: Vec::new(),
                }
            }
            Err(e) => return Err(self.round_failed(&at, e)),
        };
        for (k, e) in &answer.failed {
            if let Some(&i) = at.get(*k) {
                self.ignore_failed_operation(i, e);
            }
        }
        let missing = self.apply_round(&at, &answer.results);
        let mut gci = answer.gci;
        if let Some(i) = missing {
            if check {
                if let Some(t) = self.remote.as_mut() {
                    let _ = t.execute(Vec::new(), TcExec::Rollback);
                }
                self.remote = None;
                self.status = TxStatus::Aborted;
                return Err(self.fail(Some(i), codes::tuple_not_found()));
            }
            if self.error_op.is_none() {
                self.error_op = Some(i);
            }
        }
        if check && exec_now == ExecType::Commit {
            let done = match self.remote.as_mut() {
                Some(t) => t.execute(Vec::new(), TcExec::Commit),
                None => Err(codes::internal("no remote transaction")),
            };
            match done {
                Ok(c) => gci = c.gci,
                Err(e) => return Err(self.round_failed(&[], e)),
            }
        }
        for i in scans {
            if let Err(e) = self.start_remote_scan(rn, database, i) {
                return Err(self.fail(Some(i), e));
            }
        }
        if exec_now == ExecType::Commit {
            self.status = TxStatus::Committed;
            self.gci = gci;
            self.remote = None;
        }
        Ok(())
    }

    /// Whether `sendPollNdb` can send this prepared transaction with the others and
    /// read its answer later (see the module notes).
    pub fn one_round(&self, exec: ExecType, abort: AbortOption) -> bool {
        if exec != ExecType::Commit
            || self.status != TxStatus::Open
            || self.executed != 0
            || self.remote.is_some()
            || self.define_error.is_some()
            || self.n_ops == 0
        {
            return false;
        }
        let ops = &self.ops[..self.n_ops];
        let reads = ops
            .iter()
            .any(|o| matches!(o.ty, OpType::Key(OpKind::Read(_))));
        let writes = ops
            .iter()
            .any(|o| matches!(o.ty, OpType::Key(k) if k.is_write()));
        ops.iter().all(|o| matches!(o.ty, OpType::Key(_)))
            && !(reads && writes && abort == AbortOption::AbortOnError)
    }

    /// Sends a `one_round` transaction; its answer is read by `finish_submitted`. With
    /// AO_IgnoreError a write that fails on its row fails alone at the TC.
    pub fn submit_remote(
        &mut self,
        rn: &RemoteNdb,
        database: &str,
        abort: AbortOption,
    ) -> Result<Submitted> {
        self.dirty = true;
        let round = match self.remote_round(&rn.cluster, database) {
            Ok(r) => r,
            Err((i, e)) => {
                self.executed = self.n_ops;
                self.status = TxStatus::Aborted;
                return Err(self.fail(Some(i), e));
            }
        };
        debug_assert!(
            round.scans.is_empty(),
            "one_round admits key operations only"
        );
        self.executed = self.n_ops;
        let single_op = round.at.len() == 1;
        match rn
            .cluster
            .execute_submit_with(round.ops, abort == AbortOption::IgnoreError)
        {
            Ok(pending) => Ok(Submitted {
                pending,
                at: round.at,
                single_op,
            }),
            Err(e) => {
                self.status = TxStatus::Aborted;
                Err(self.fail(single_op.then_some(0), e))
            }
        }
    }

    /// The outcome of a transaction sent by `submit_remote`.
    pub fn finish_submitted(&mut self, s: Submitted, abort: AbortOption) -> Result<()> {
        let answer: Committed = match RemoteCluster::execute_wait(s.pending) {
            Ok(c) => c,
            Err(e) => {
                self.status = TxStatus::Aborted;
                return Err(self.fail(s.single_op.then(|| s.at[0]), e));
            }
        };
        for (k, e) in &answer.failed {
            if let Some(&i) = s.at.get(*k) {
                self.ignore_failed_operation(i, e);
            }
        }
        let missing = self.apply_round(&s.at, &answer.results);
        if let Some(i) = missing {
            if abort == AbortOption::AbortOnError {
                // Reads only (`one_round`): nothing was written.
                self.status = TxStatus::Aborted;
                return Err(self.fail(Some(i), codes::tuple_not_found()));
            }
            if self.error_op.is_none() {
                self.error_op = Some(i);
            }
        }
        self.status = TxStatus::Committed;
        self.gci = answer.gci;
        Ok(())
    }

    /// The outcome of a transaction of committed reads run by `run_committed_reads`:
    /// `rows` by operation, or the error of its request.
    pub(crate) fn finish_committed_reads(
        &mut self,
        rows: Vec<Option<Vec<Value>>>,
        err: Option<NdbError>,
        abort: AbortOption,
        exec: ExecType,
    ) -> Result<()> {
        self.dirty = true;
        self.executed = self.n_ops;
        if let Some(e) = err {
            self.status = TxStatus::Aborted;
            return Err(self.fail(None, e));
        }
        let at: Vec<usize> = (0..self.n_ops).collect();
        if let Some(i) = self.apply_round(&at, &rows) {
            if abort == AbortOption::AbortOnError {
                self.status = TxStatus::Aborted;
                return Err(self.fail(Some(i), codes::tuple_not_found()));
            }
            if self.error_op.is_none() {
                self.error_op = Some(i);
            }
        }
        if exec == ExecType::Commit {
            self.status = TxStatus::Committed;
        }
        Ok(())
    }

    /// Opens the remote scan of scan operation `i`: in the transaction once a round of
    /// it ran (it then sees the rows that round and the earlier ones wrote).
    fn start_remote_scan(&mut self, rn: &RemoteNdb, database: &str, i: usize) -> Result<()> {
        let txn = self.remote.as_ref().and_then(|t| t.txn_key());
        let op = &mut self.ops[i];
        let table = op.table()?.clone();
        let s = op
            .scan
            .as_mut()
            .ok_or_else(|| codes::internal("scan operation without scan state"))?;
        if !s.defined {
            return Err(op_status_error(
                "call readTuples on the scan operation before executing the transaction",
            ));
        }
        let mut columns: Vec<u32> = op.reads.iter().map(|&c| c as u32).collect();
        columns.extend(table.def.primary_key.iter().map(|&c| c as u32));
        let (low, high) = match s.index {
            Some(_) => (
                crate::txn::bound_of(&s.low, &s.index_name)?,
                crate::txn::bound_of(&s.high, &s.index_name)?,
            ),
            None => (None, None),
        };
        let index = s.index.map(|pos| table.def.indexes[pos].name.clone());
        let spec = RemoteScanSpec {
            database: database.to_string(),
            table: table.def.name.clone(),
            sorted: s.sorted && index.is_some(),
            index,
            low,
            high,
            descending: s.descending,
            columns,
            batch_rows: match s.batch {
                0 => 256,
                b => (b as u32).min(MAX_SCAN_BATCH_ROWS),
            },
            filter: None,
            txn,
        };
        s.remote = Some(Box::new(rn.cluster.scan(spec)?));
        s.buffer.clear();
        s.ended = false;
        Ok(())
    }
}

/// Locks the rows a batch of an LM_Exclusive remote scan returned, in the scan's
/// transaction (`RemoteTransaction::lock_rows`): each row is the values of columns
/// `reads`, then the primary key.
pub(crate) fn lock_rows(
    remote: &mut Option<Box<RemoteTransaction>>,
    table: &TableRuntime,
    reads: &[usize],
    rows: Vec<Vec<Value>>,
) -> Result<Vec<Vec<Value>>> {
    let txn = remote
        .as_mut()
        .ok_or_else(|| codes::internal("a remote scan without its transaction"))?;
    let reads: Vec<u32> = reads.iter().map(|&c| c as u32).collect();
    txn.lock_rows(&table.database, &table.def, &reads, rows)
}
