//! The C ABI against data nodes over TCP: a `host:port` connectstring names a
//! management server (`rndb_mgmd`), and the connection is a `RemoteCluster` (NDB
//! API's transporter to the data nodes, `rndb_core::cluster::remote`).
//!
//! What runs where:
//! - the dictionary: tables and indexes are read from a data node (`TableReq`) and
//!   kept as definition-only runtimes (`TableRuntime::definition_only`), so that the
//!   operation, record and scan objects of the C ABI name them as they name embedded
//!   tables; `createTable`, `createIndex` and the drops travel as SQL, rendered from
//!   the same spec the embedded dictionary takes (`TableSpec::create_statement`);
//! - key operations: each `execute` is one round of a `RemoteTransaction` at the TC of
//!   the first operation's primary (NoCommit keeps it open with its row locks;
//!   Commit and Rollback end it). AbortOnError with reads runs the round as NoCommit
//!   and commits only when every read found its row (as embedded, nothing commits that
//!   the missing row aborted). A refused round has aborted the whole transaction;
//!   the error goes to the transaction, and to the operation when the round had one.
//!   AO_IgnoreError: a read that finds no row fails only its operation; a write that
//!   fails (626 no row, 630 duplicate key) fails only its operation when it was the
//!   transaction's only work so far (the TC aborted nothing else), and otherwise
//!   aborts the transaction (the TC does not go on past a failed write);
//! - `sendPollNdb`: the prepared transactions that commit in one round (no scans, not
//!   yet executed, no reads that AbortOnError would make wait for a second round) are
//!   all sent first and then waited for in order, so a batch costs about one round
//!   trip; those that only do committed key reads skip the TC: the batch's reads of
//!   one table go in one request per data node, to the primaries (as
//!   `Ndb::read_batch_visit` serves them embedded); the others run one after the
//!   other;
//! - scans: committed-read scans of the table or of an ordered index over every node
//!   group (`RemoteScan`). An LM_Exclusive scan locks each batch it returns in the
//!   transaction (one NoCommit round of exclusive key reads of the batch's rows,
//!   whose values, read under the lock, are the ones returned; a row deleted since the
//!   scan saw it is skipped), so `updateCurrentTuple` and `deleteCurrentTuple` change
//!   rows the transaction holds, as NDB's scan takeover does; the locks are held to
//!   the transaction's end. LM_Read and LM_SimpleRead scans read committed rows (NDB
//!   releases their shared lock when the scan moves on).
//!
//! Invariants: a transaction's `remote` is set only while `close_work` is (so
//! `close_core` drops it, rolling back an open transaction); a remote table runtime
//! is never handed to the embedded engine.

use crate::ndb::NdbObj;
use crate::txn::{OpType, TxObj, TxStatus, op_status_error};
use rndb_core::api::TableRuntime;
use rndb_core::api::dict::TableSpec;
use rndb_core::api::spec_sql::UNIQUE_SUFFIX;
use rndb_core::cluster::remote::{Committed, Pending, RemoteCluster};
use rndb_core::cluster::remote_scan::RemoteScanSpec;
use rndb_core::cluster::remote_txn::RemoteTransaction;
use rndb_core::error::{ErrorClassification, NdbError, Result, codes};
use rndb_core::schema::IndexKind;
use rndb_core::schema::Value;
use rndb_core::transport::data::{KeyOp, OpType as WireOp, TcExec};
use rndb_core::transport::data_scan::MAX_SCAN_BATCH_ROWS;
use rndb_core::{AbortOption, ExecType, LockMode, OpKind};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// What an Ndb object keeps of a remote cluster.
pub(crate) struct RemoteNdb {
    pub cluster: Arc<RemoteCluster>,
    /// Definition-only runtimes by (database, lowercased name), remade when the
    /// cluster's definition changed.
    tables: HashMap<(String, String), Arc<TableRuntime>>,
}

fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

impl RemoteNdb {
    pub fn new(cluster: Arc<RemoteCluster>) -> RemoteNdb {
        RemoteNdb {
            cluster,
            tables: HashMap::new(),
        }
    }

    /// A table's definition-only runtime (723 when there is none).
    pub fn table(&mut self, database: &str, name: &str) -> Result<Arc<TableRuntime>> {
        let def = self.cluster.table(database, name)?;
        let k = (database.to_string(), name.to_ascii_lowercase());
        if let Some(rt) = self.tables.get(&k)
            && Arc::ptr_eq(&rt.def, &def)
        {
            return Ok(rt.clone());
        }
        let rt = TableRuntime::definition_only(def, database);
        if let Some(old) = self.tables.insert(k, rt.clone()) {
            // Objects still naming the old definition see it gone.
            old.dropped.store(true, Ordering::Release);
        }
        Ok(rt)
    }

    /// The position of index `name` in `rt` (SQL names a unique hash index
    /// `NAME$unique`: looked up by the NDB API name too).
    pub fn index_of(rt: &TableRuntime, name: &str) -> Option<usize> {
        rt.def.index(name).map(|(i, _)| i).or_else(|| {
            rt.def
                .index(&format!("{name}{UNIQUE_SUFFIX}"))
                .filter(|(_, x)| x.kind == IndexKind::UniqueHashIndex)
                .map(|(i, _)| i)
        })
    }

    fn forget(&mut self, database: &str, name: &str) {
        let k = (database.to_string(), name.to_ascii_lowercase());
        if let Some(old) = self.tables.remove(&k) {
            old.dropped.store(true, Ordering::Release);
        }
    }

    pub fn create_table(&mut self, database: &str, spec: &TableSpec) -> Result<()> {
        self.cluster.sql(database, &spec.create_statement()?)?;
        self.forget(database, &spec.name);
        Ok(())
    }

    pub fn drop_table(&mut self, database: &str, name: &str) -> Result<()> {
        self.cluster
            .sql(database, &format!("DROP TABLE {}", ident(name)))?;
        self.forget(database, name);
        Ok(())
    }

    pub fn create_index(
        &mut self,
        database: &str,
        table: &str,
        name: &str,
        kind: IndexKind,
        columns: &[String],
    ) -> Result<()> {
        let cols: Vec<String> = columns.iter().map(|c| ident(c)).collect();
        let sql = match kind {
            IndexKind::OrderedIndex => format!(
                "CREATE INDEX {} ON {} ({})",
                ident(name),
                ident(table),
                cols.join(",")
            ),
            IndexKind::UniqueHashIndex => format!(
                "CREATE UNIQUE INDEX {} USING HASH ON {} ({})",
                ident(name),
                ident(table),
                cols.join(",")
            ),
        };
        self.cluster.sql(database, &sql)?;
        self.forget(database, table);
        Ok(())
    }

    pub fn drop_index(&mut self, database: &str, table: &str, name: &str) -> Result<()> {
        let rt = self.table(database, table)?;
        let real = Self::index_of(&rt, name)
            .map(|i| rt.def.indexes[i].name.clone())
            .ok_or_else(|| codes::no_such_index(name))?;
        self.cluster.sql(
            database,
            &format!("DROP INDEX {} ON {}", ident(&real), ident(table)),
        )?;
        self.forget(database, table);
        Ok(())
    }

    /// Runs SQL on a data node: (the rendered result, the row count of its last
    /// line: "N rows in set" or "N rows affected").
    pub fn sql(&self, database: &str, text: &str) -> Result<(String, i32)> {
        let out = self.cluster.sql(database, text)?;
        Ok((out.clone(), row_count_of(&out)))
    }
}

/// The count a mysql client prints last ("3 rows in set", "Query OK, 1 row affected").
fn row_count_of(text: &str) -> i32 {
    for line in text.lines().rev() {
        let l = line.trim_start_matches("Query OK, ");
        for tail in [
            " rows in set",
            " row in set",
            " rows affected",
            " row affected",
        ] {
            if let Some(at) = l.find(tail)
                && let Ok(n) = l[..at].trim().parse::<i32>()
            {
                return n;
            }
        }
        if line.contains("Empty set") {
            return 0;
        }
    }
    0
}

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
    fn remote_round(&mut self, database: &str) -> std::result::Result<Round, (usize, NdbError)> {
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
    /// round's one operation, nothing done before, and an error of the row (see the
    /// module notes).
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
        if self.status == TxStatus::Committed {
            return Err(self.fail(
                None,
                codes::transaction_closed()
                    .detail("execute called again after the transaction was committed"),
            ));
        }
        if let Some(e) = self.define_error.take() {
            self.remote = None;
            self.status = TxStatus::Aborted;
            self.executed = self.n_ops;
            return Err(self.fail(None, e));
        }
        if self.status == TxStatus::Aborted {
            return Err(self
                .error
                .last
                .clone()
                .unwrap_or_else(codes::transaction_aborted));
        }
        let round = match self.remote_round(database) {
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
        let answer = match txn.execute(ops, first) {
            Ok(c) => c,
            Err(e) if Self::only_the_operation_failed(abort, &at, fresh, &e) => {
                self.ignore_failed_operation(at[0], &e);
                // Nothing was done: a new transaction takes the next rounds.
                self.remote = Some(Box::new(rn.cluster.transaction()));
                Committed {
                    gci: 0,
                    results: vec![None],
                }
            }
            Err(e) => return Err(self.round_failed(&at, e)),
        };
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

    /// Sends a `one_round` transaction; its answer is read by `finish_submitted`.
    pub fn submit_remote(&mut self, rn: &RemoteNdb, database: &str) -> Result<Submitted> {
        self.dirty = true;
        let round = match self.remote_round(database) {
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
        match rn.cluster.execute_submit(round.ops) {
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
            Err(e) if Self::only_the_operation_failed(abort, &s.at, true, &e) => {
                self.ignore_failed_operation(s.at[0], &e);
                self.status = TxStatus::Committed;
                return Ok(());
            }
            Err(e) => {
                self.status = TxStatus::Aborted;
                return Err(self.fail(s.single_op.then(|| s.at[0]), e));
            }
        };
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
    fn finish_committed_reads(
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

    /// Opens the remote scan of scan operation `i`.
    fn start_remote_scan(&mut self, rn: &RemoteNdb, database: &str, i: usize) -> Result<()> {
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
        };
        s.remote = Some(Box::new(rn.cluster.scan(spec)?));
        s.buffer.clear();
        s.ended = false;
        Ok(())
    }
}

/// Locks the rows a batch of an LM_Exclusive remote scan returned (see the module
/// notes): each row is the values of columns `reads`, then the primary key. Returns
/// the rows as read under the lock (the same columns), without those deleted
/// meanwhile.
pub(crate) fn lock_rows(
    remote: &mut Option<Box<RemoteTransaction>>,
    table: &TableRuntime,
    reads: &[usize],
    rows: Vec<Vec<Value>>,
) -> Result<Vec<Vec<Value>>> {
    let txn = remote
        .as_mut()
        .ok_or_else(|| codes::internal("a remote scan without its transaction"))?;
    let def = &table.def;
    let columns: Vec<u32> = reads
        .iter()
        .chain(&def.primary_key)
        .map(|&c| c as u32)
        .collect();
    let ops: Vec<KeyOp> = rows
        .iter()
        .map(|row| KeyOp {
            op: WireOp::ReadExclusive,
            database: table.database.clone(),
            table: def.name.clone(),
            key: row.get(reads.len()..).unwrap_or_default().to_vec(),
            values: Vec::new(),
            columns: columns.clone(),
        })
        .collect();
    let locked = txn.execute(ops, TcExec::NoCommit)?;
    Ok(locked.results.into_iter().flatten().collect())
}

/// The prepared transactions `reads` (each only committed key reads, `list` positions
/// with their abort option and exec type), all at once: the reads of one table and
/// columns go in one request per data node (`RemoteCluster::read_submit`), no TC
/// involved, every request sent before the first answer is waited for.
fn run_committed_reads(
    rn: &RemoteNdb,
    db: &str,
    reads: &mut Vec<(usize, AbortOption, ExecType)>,
    list: &[crate::handle::Handle],
    results: &mut [Option<bool>],
) {
    if reads.is_empty() {
        return;
    }
    struct Group {
        table: Arc<TableRuntime>,
        columns: Vec<u32>,
        keys: Vec<Vec<Value>>,
        /// (position in `reads`, operation) of each key.
        at: Vec<(usize, usize)>,
    }
    let mut groups: Vec<Group> = Vec::new();
    for (r, &(k, _, _)) in reads.iter().enumerate() {
        let Ok(tx) = crate::ndb::tx_by_handle(list[k]) else {
            continue;
        };
        for (i, op) in tx.ops[..tx.n_ops].iter().enumerate() {
            let Some(table) = &op.table else { continue };
            let columns: Vec<u32> = op.read_cols().iter().map(|&c| c as u32).collect();
            let key: Vec<Value> = table
                .def
                .primary_key
                .iter()
                .filter_map(|p| op.key.iter().find(|(c, _)| c == p).map(|(_, v)| v.clone()))
                .collect();
            let g = match groups
                .iter_mut()
                .position(|g| Arc::ptr_eq(&g.table, table) && g.columns == columns)
            {
                Some(g) => &mut groups[g],
                None => {
                    groups.push(Group {
                        table: table.clone(),
                        columns,
                        keys: Vec::new(),
                        at: Vec::new(),
                    });
                    groups.last_mut().expect("just pushed")
                }
            };
            g.keys.push(key);
            g.at.push((r, i));
        }
    }
    let sent: Vec<_> = groups
        .iter()
        .map(|g| {
            rn.cluster
                .read_submit(db, &g.table.def.name, &g.keys, &g.columns)
        })
        .collect();
    // (rows, error) per read transaction, by operation.
    let mut rows: Vec<Vec<Option<Vec<Value>>>> = reads
        .iter()
        .map(|&(k, _, _)| {
            let n = crate::ndb::tx_by_handle(list[k]).map_or(0, |t| t.n_ops);
            vec![None; n]
        })
        .collect();
    let mut failed: Vec<Option<NdbError>> = vec![None; reads.len()];
    for (g, s) in groups.iter().zip(sent) {
        let answer = match s.and_then(|p| p.wait()) {
            // A node that is starting: read from another replica, one request at a time.
            Err(e) if e.code == 4035 => {
                rn.cluster
                    .read_batch(db, &g.table.def.name, &g.keys, &g.columns)
            }
            other => other,
        };
        match answer {
            Ok(found) => {
                for (&(r, i), row) in g.at.iter().zip(found) {
                    rows[r][i] = row;
                }
            }
            Err(e) => {
                for &(r, _) in &g.at {
                    failed[r].get_or_insert_with(|| e.clone());
                }
            }
        }
    }
    for (((k, abort, exec), got), err) in reads.drain(..).zip(rows).zip(failed) {
        let Ok(tx) = crate::ndb::tx_by_handle(list[k]) else {
            continue;
        };
        results[k] = Some(tx.finish_committed_reads(got, err, abort, exec).is_ok());
    }
}

/// Hashes of the rows a prepared transaction's operations name (table and key): two
/// transactions whose sets meet may touch the same row.
fn row_hashes(tx: &TxObj) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    tx.ops[..tx.n_ops]
        .iter()
        .filter_map(|o| {
            let t = o.table.as_ref()?;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            t.def.name.hash(&mut h);
            for (c, v) in &o.key {
                c.hash(&mut h);
                // A key given as signed or unsigned names the same row; values with
                // floats (no Hash) hash their debug text. A collision only costs a wait.
                match v {
                    Value::Int(i) => i128::from(*i).hash(&mut h),
                    Value::UInt(u) => i128::from(*u).hash(&mut h),
                    Value::Str(s) => s.hash(&mut h),
                    Value::Bytes(b) => b.hash(&mut h),
                    other => format!("{other:?}").hash(&mut h),
                }
            }
            Some(h.finish())
        })
        .collect()
}

/// `sendPollNdb` against a remote cluster (see the module notes): one-round
/// transactions are sent together and their answers read afterwards, committed reads
/// together at the next drain, except that a transaction naming a row that one in
/// flight names waits for those in flight to end first (a write waits for the reads
/// gathered before it), and the others run alone, in turn: each transaction sees what
/// the ones prepared before it did, as on the embedded cluster. Completions go to
/// `n.completed` in `list` order.
pub(crate) fn execute_prepared_remote(n: &mut NdbObj, list: &[crate::handle::Handle]) {
    let NdbObj {
        remote,
        database,
        completed: done,
        ..
    } = n;
    let db = database.to_str().unwrap_or("def").to_string();
    let Some(rn) = remote.as_mut() else {
        return;
    };
    struct InFlight {
        at: usize,
        sent: Submitted,
        abort: AbortOption,
    }
    fn drain(
        rn: &RemoteNdb,
        db: &str,
        inflight: &mut Vec<InFlight>,
        reads: &mut Vec<(usize, AbortOption, ExecType)>,
        rows: &mut std::collections::HashSet<u64>,
        list: &[crate::handle::Handle],
        results: &mut [Option<bool>],
    ) {
        run_committed_reads(rn, db, reads, list, results);
        for f in inflight.drain(..) {
            if let Ok(tx) = crate::ndb::tx_by_handle(list[f.at]) {
                results[f.at] = Some(tx.finish_submitted(f.sent, f.abort).is_ok());
            }
        }
        rows.clear();
    }
    let mut results: Vec<Option<bool>> = vec![None; list.len()];
    let mut asynchs = Vec::with_capacity(list.len());
    let mut inflight: Vec<InFlight> = Vec::new();
    let mut reads: Vec<(usize, AbortOption, ExecType)> = Vec::new();
    let mut rows = std::collections::HashSet::new();
    for (k, &h) in list.iter().enumerate() {
        let Ok(tx) = crate::ndb::tx_by_handle(h) else {
            asynchs.push(None);
            continue;
        };
        let Some(a) = tx.asynch.take() else {
            asynchs.push(None);
            continue;
        };
        if tx.fast_reads_eligible(a.exec) {
            // Committed key reads: sent with the others of the batch (`run_committed_reads`),
            // after the writes in flight to the rows they read.
            if !rows.is_empty() && row_hashes(tx).iter().any(|r| rows.contains(r)) {
                drain(
                    rn,
                    &db,
                    &mut inflight,
                    &mut reads,
                    &mut rows,
                    list,
                    &mut results,
                );
            }
            reads.push((k, a.abort, a.exec));
        } else if tx.one_round(a.exec, a.abort) {
            let mine = row_hashes(tx);
            if !reads.is_empty() || mine.iter().any(|r| rows.contains(r)) {
                drain(
                    rn,
                    &db,
                    &mut inflight,
                    &mut reads,
                    &mut rows,
                    list,
                    &mut results,
                );
            }
            let tx = match crate::ndb::tx_by_handle(h) {
                Ok(tx) => tx,
                Err(_) => {
                    asynchs.push(Some(a));
                    continue;
                }
            };
            match tx.submit_remote(rn, &db) {
                Ok(sent) => {
                    rows.extend(mine);
                    inflight.push(InFlight {
                        at: k,
                        sent,
                        abort: a.abort,
                    });
                }
                Err(_) => results[k] = Some(false),
            }
        } else {
            drain(
                rn,
                &db,
                &mut inflight,
                &mut reads,
                &mut rows,
                list,
                &mut results,
            );
            if let Ok(tx) = crate::ndb::tx_by_handle(h) {
                results[k] = Some(tx.execute_remote(rn, &db, a.exec, a.abort).is_ok());
            }
        }
        asynchs.push(Some(a));
    }
    drain(
        rn,
        &db,
        &mut inflight,
        &mut reads,
        &mut rows,
        list,
        &mut results,
    );
    for ((&h, a), ok) in list.iter().zip(asynchs).zip(results) {
        let Some(a) = a else { continue };
        done.push(crate::txn::Completion {
            tx: h,
            result: if ok == Some(true) { 0 } else { -1 },
            cb: a.cb,
            arg: a.arg,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_counts_as_the_mysql_client_prints_them() {
        assert_eq!(
            row_count_of("+----+\n| id |\n+----+\n| 1  |\n+----+\n1 row in set (0.00 sec)"),
            1
        );
        assert_eq!(row_count_of("Query OK, 3 rows affected (0.01 sec)"), 3);
        assert_eq!(row_count_of("Empty set (0.00 sec)"), 0);
        assert_eq!(row_count_of("Query OK, 0 rows affected"), 0);
    }
}
