//! Transactions in rounds over TCP (NDB API's `execute(NoCommit)` … then `Commit` or
//! `Rollback`): one data node's TC keeps the transaction open between rounds, its
//! participants holding the row locks (`datapath::tc`).
//!
//! The first round goes to the primary of its first operation's partition (NDB's
//! startTransaction hint); the TC's answer names the transaction, and every later
//! round goes to that node with that id. A round's error (TcKeyRef) has aborted the
//! whole transaction at the TC: the transaction is over, as it is after Commit or
//! Rollback. The TC's node lost while the transaction is open ends it too (4010 at
//! the next round; a commit under way: 4012, outcome unknown). Dropping an open
//! transaction rolls it back (without waiting for the answer).
//!
//! Scans of a transaction (`RemoteScanSpec::txn`, [`RemoteTransaction::txn_key`]) read
//! in its local transaction at each node group's node, so they see its uncommitted
//! changes of the rounds run before (every live replica of a partition holds them
//! once a round is answered). They take no locks; an
//! LM_Exclusive scan inside a transaction locks each batch it returns with
//! [`RemoteTransaction::lock_rows`] — one NoCommit round of exclusive key reads of the
//! batch's rows, whose values, read under the lock, are the ones returned (a row
//! deleted since the scan saw it is left out). The transaction then holds every row
//! the scan returned until it ends, as NDB's scan takeover does, so updates and
//! deletes by their keys change rows nobody else changed in between.

use super::remote::{Committed, RemoteCluster};
use crate::error::{Result, codes};
use crate::schema::{TableDef, Value};
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, KeyOp, OpType, TcExec, TxnKey};
use std::sync::Arc;

/// See the module notes.
pub struct RemoteTransaction {
    cluster: Arc<RemoteCluster>,
    rounds: Rounds,
}

/// Where a transaction stands at its TC, for rounds run by a caller that holds the
/// cluster (a [`RemoteTransaction`] holds both).
#[derive(Default)]
pub(crate) struct Rounds {
    /// The TC's node and the transaction's id there, once a round was answered.
    at: Option<(NodeId, u64)>,
    /// Committed, rolled back, or aborted by an error: no more rounds.
    ended: bool,
}

impl RemoteCluster {
    /// A transaction to run in rounds (nothing is sent before its first round).
    pub fn transaction(self: &Arc<Self>) -> RemoteTransaction {
        RemoteTransaction {
            cluster: self.clone(),
            rounds: Rounds::default(),
        }
    }
}

impl RemoteTransaction {
    /// Whether a round may still run (not committed, rolled back or aborted).
    pub fn is_open(&self) -> bool {
        !self.rounds.ended
    }

    /// The TC's node, once the first round ran.
    pub fn tc_node(&self) -> Option<NodeId> {
        self.rounds.at.map(|(n, _)| n)
    }

    /// The transaction at its TC while it is open after a round: what a scan of it
    /// carries (`RemoteScanSpec::txn`) to see its uncommitted changes.
    pub fn txn_key(&self) -> Option<TxnKey> {
        match self.rounds.at {
            Some((tc, id)) if !self.rounds.ended => Some(TxnKey { tc, id }),
            _ => None,
        }
    }

    /// Runs `ops` as one round, then keeps the transaction open (NoCommit), commits it
    /// (Commit: the GCI is in the answer) or rolls it back (Rollback, with no
    /// operations). One result per operation of the round.
    pub fn execute(&mut self, ops: Vec<KeyOp>, exec: TcExec) -> Result<Committed> {
        self.rounds.execute(&self.cluster, ops, exec, false)
    }

    /// [`RemoteTransaction::execute`] with NDB API's AO_IgnoreError: a write that fails
    /// on its row (626 no such row, 630 duplicate key, 893 duplicate unique value)
    /// changes nothing and fails alone (`Committed::failed`); the round's other
    /// operations go on and the transaction stays as the round's `exec` says.
    pub fn execute_ignoring_errors(&mut self, ops: Vec<KeyOp>, exec: TcExec) -> Result<Committed> {
        self.rounds.execute(&self.cluster, ops, exec, true)
    }
}

impl Rounds {
    /// [`RemoteTransaction::execute`] on `cluster`.
    pub(crate) fn execute(
        &mut self,
        cluster: &RemoteCluster,
        ops: Vec<KeyOp>,
        exec: TcExec,
        ignore_errors: bool,
    ) -> Result<Committed> {
        if self.ended {
            return Err(codes::transaction_closed());
        }
        if exec == TcExec::Rollback && !ops.is_empty() {
            return Err(codes::bad_argument(
                "a Rollback round carries no operations",
            ));
        }
        let (node, txn) = match self.at {
            Some(at) => at,
            None if ops.is_empty() => {
                // Nothing was done: committing or rolling back is a no-op.
                self.ended = exec != TcExec::NoCommit;
                return Ok(Committed::of(0, Vec::new(), Vec::new()));
            }
            None => {
                let first = &ops[0];
                let def = cluster.table(&first.database, &first.table)?;
                let part = RemoteCluster::partition_of(&def, &first.key)?;
                (cluster.node_for(part)?, 0)
            }
        };
        let commit = exec == TcExec::Commit;
        let sent = cluster.submit(node, commit, move |req| DataMsg::TcKeyReq {
            req,
            txn,
            exec,
            ops,
            ignore_errors,
        });
        let answer = sent.and_then(|p| p.wait());
        match answer {
            Ok(DataMsg::TcKeyConf {
                txn,
                gci,
                results,
                failed,
                ..
            }) => {
                if exec == TcExec::NoCommit {
                    self.at = Some((node, txn));
                } else {
                    self.ended = true;
                }
                Ok(Committed::of(gci, results, failed))
            }
            Ok(DataMsg::TcKeyRef {
                code,
                class,
                message,
                ..
            }) => {
                self.ended = true;
                let e = super::datapath::err_from(code, class, &message);
                if e.code == 4035 {
                    cluster.note_not_ready(&e);
                }
                Err(e)
            }
            Ok(_) => {
                self.ended = true;
                Err(codes::internal("unexpected answer to a transaction round"))
            }
            Err(e) => {
                self.ended = true;
                Err(e)
            }
        }
    }
}

impl RemoteTransaction {
    /// [`RemoteTransaction::execute`] with NDB API's abort option. AbortOnError
    /// (`abort_on_error`): a read that finds no row fails the transaction with 626
    /// and rolls it back (a Commit round with reads then runs as NoCommit first and
    /// commits only when every read found its row, so nothing commits that the caller
    /// would have aborted), and so does any failed write. AO_IgnoreError: a missing row
    /// is a None result, a write that fails on its row fails alone
    /// ([`RemoteTransaction::execute_ignoring_errors`]), and the round goes on.
    pub fn execute_checked(
        &mut self,
        ops: Vec<KeyOp>,
        exec: TcExec,
        abort_on_error: bool,
    ) -> Result<Committed> {
        let reads: Vec<bool> = ops.iter().map(|o| o.op.is_read()).collect();
        if !abort_on_error {
            return self.execute_ignoring_errors(ops, exec);
        }
        if !reads.contains(&true) {
            return self.execute(ops, exec);
        }
        let first = self.execute(ops, TcExec::NoCommit)?;
        let missing = first
            .results
            .iter()
            .zip(&reads)
            .any(|(r, &is_read)| is_read && r.is_none());
        if missing {
            // The rollback ends the transaction, answered or not.
            let _ = self.execute(Vec::new(), TcExec::Rollback);
            return Err(codes::tuple_not_found());
        }
        match exec {
            TcExec::NoCommit => Ok(first),
            _ => {
                let done = self.execute(Vec::new(), exec)?;
                Ok(Committed {
                    gci: done.gci,
                    results: first.results,
                    failed: Vec::new(),
                })
            }
        }
    }
}

impl RemoteTransaction {
    /// Locks rows a committed-read scan of `def` returned (see the module notes): each
    /// row holds the values of columns `reads` followed by the primary key. Returns
    /// the rows as read under an exclusive lock (the same columns), without those
    /// deleted meanwhile. A refusal (266 after a lock wait, 4010...) has aborted the
    /// transaction.
    pub fn lock_rows(
        &mut self,
        database: &str,
        def: &TableDef,
        reads: &[u32],
        rows: Vec<Vec<Value>>,
    ) -> Result<Vec<Vec<Value>>> {
        if rows.is_empty() {
            return Ok(rows);
        }
        let columns: Vec<u32> = reads
            .iter()
            .copied()
            .chain(def.primary_key.iter().map(|&c| c as u32))
            .collect();
        let mut ops = Vec::with_capacity(rows.len());
        for row in &rows {
            if row.len() != columns.len() {
                return Err(codes::internal(format!(
                    "a scanned row of {} has {} values, {} expected (its columns, then its key)",
                    def.name,
                    row.len(),
                    columns.len()
                )));
            }
            ops.push(KeyOp {
                op: OpType::ReadExclusive,
                database: database.to_string(),
                table: def.name.clone(),
                key: row[reads.len()..].to_vec(),
                values: Vec::new(),
                columns: columns.clone(),
            });
        }
        let locked = self.execute(ops, TcExec::NoCommit)?;
        Ok(locked.results.into_iter().flatten().collect())
    }
}

impl Rounds {
    /// Rolls an open transaction back without waiting for the answer (the waiter goes
    /// when it comes, or at the connection's loss); nothing when it ended.
    pub(crate) fn abandon(&mut self, cluster: &RemoteCluster) {
        if let (false, Some((node, txn))) = (self.ended, self.at) {
            let _ = cluster.submit(node, false, move |req| DataMsg::TcKeyReq {
                req,
                txn,
                exec: TcExec::Rollback,
                ops: Vec::new(),
                ignore_errors: false,
            });
        }
        self.ended = true;
    }
}

impl Drop for RemoteTransaction {
    fn drop(&mut self) {
        self.rounds.abandon(&self.cluster);
    }
}
