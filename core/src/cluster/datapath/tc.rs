//! The TC role (NDB's DBTC): one record per transaction this node coordinates.
//!
//! Life of a record: `Preparing` (an `LqhPrepare` sent to each participant — the
//! primary of each operation's partition — waiting for every `LqhPrepared`), then
//! `Committing` (an `LqhCommit` to each participant, waiting for every
//! `LqhCommitted`), then the answer to the API node and the record is gone. Any refusal
//! in `Preparing` aborts at every replica of the transaction's partitions.
//!
//! Failures (a view without some nodes): a participant lost while `Preparing` aborts
//! the transaction (4010, temporary: the API retries); a participant lost while
//! `Committing` — the decision is made — is replaced by the partitions' surviving
//! replicas, which hold the prepared after-images and commit them.

use super::{DataPath, err_parts};
use crate::error::{NdbError, Result, codes};
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, KeyOp, OpResult, TxnKey};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Preparing,
    Committing,
}

pub(crate) struct TcTxn {
    api: NodeId,
    req: u64,
    phase: Phase,
    /// Participant (primary) -> its operations' partitions.
    partitions: BTreeMap<NodeId, BTreeSet<usize>>,
    waiting: BTreeSet<NodeId>,
    results: Vec<OpResult>,
    error: Option<NdbError>,
    gci: u64,
    /// A surviving replica asked to commit for a lost participant knew nothing of
    /// the transaction: the outcome is unknown (4012).
    unknown: bool,
}

impl DataPath {
    /// The partition of an operation's key in its table.
    pub(crate) fn partition_of_op(&self, op: &KeyOp) -> Result<usize> {
        let rt = self.engine.inner().table(&op.database, &op.table)?;
        let def = &rt.def;
        if op.key.len() != def.primary_key.len() {
            return Err(codes::key_not_complete(format!(
                "{} key values for the {} primary-key columns of {}",
                op.key.len(),
                def.primary_key.len(),
                def.name
            )));
        }
        let key: Vec<crate::schema::Value> = op
            .key
            .iter()
            .zip(&def.primary_key)
            .map(|(v, &p)| {
                let c = &def.columns[p];
                crate::schema::value::coerce(v.clone(), &c.ty, &c.name)
            })
            .collect::<Result<_>>()?;
        let mut buf = Vec::new();
        Ok(rt.partition_of(rt.key_hash_of(&key, &mut buf)))
    }

    fn refuse(&self, worker: usize, api: NodeId, req: u64, e: &NdbError) {
        let (code, class, message) = err_parts(e);
        self.send_from(
            worker,
            api,
            DataMsg::TcKeyRef {
                req,
                code,
                class,
                message,
            },
        );
    }

    /// TCKEYREQ: route every operation to its partition's primary.
    pub(super) fn tc_begin(
        &self,
        worker: usize,
        api: NodeId,
        txn: TxnKey,
        req: u64,
        ops: Vec<KeyOp>,
    ) {
        // A node whose replicas are not up to date may lack the schema too: its API
        // nodes go to another replica (4035 is temporary).
        if !self.is_ready() {
            return self.refuse(worker, api, req, &super::not_ready(self.me));
        }
        if let Err(e) = self.check_send_load([api]) {
            return self.refuse(worker, api, req, &e);
        }
        let mut per_node: BTreeMap<NodeId, Vec<(u32, KeyOp)>> = BTreeMap::new();
        let mut partitions: BTreeMap<NodeId, BTreeSet<usize>> = BTreeMap::new();
        let n = ops.len();
        for (i, op) in ops.into_iter().enumerate() {
            let part = match self.partition_of_op(&op) {
                Ok(p) => p,
                Err(e) => return self.refuse(worker, api, req, &e),
            };
            let Some(&primary) = self.live_replicas(part).first() else {
                let e = codes::node_group_down(format!(
                    "partition {part} of table {} has no live replica",
                    op.table
                ));
                return self.refuse(worker, api, req, &e);
            };
            per_node.entry(primary).or_default().push((i as u32, op));
            partitions.entry(primary).or_default().insert(part);
        }
        if per_node.is_empty() {
            self.send_from(
                worker,
                api,
                DataMsg::TcKeyConf {
                    req,
                    gci: 0,
                    results: Vec::new(),
                },
            );
            return;
        }
        self.tc.lock().insert(
            txn,
            TcTxn {
                api,
                req,
                phase: Phase::Preparing,
                waiting: per_node.keys().copied().collect(),
                partitions,
                results: vec![None; n],
                error: None,
                gci: 0,
                unknown: false,
            },
        );
        for (node, ops) in per_node {
            self.send_from(
                worker,
                node,
                DataMsg::LqhPrepare {
                    txn,
                    backup: false,
                    ops,
                },
            );
        }
    }

    /// Every live replica of the transaction's partitions.
    fn replicas_of(&self, t: &TcTxn) -> BTreeSet<NodeId> {
        t.partitions
            .values()
            .flatten()
            .flat_map(|&p| self.live_replicas(p))
            .collect()
    }

    /// LQHKEYCONF / LQHKEYREF from a participant.
    pub(super) fn tc_prepared(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        err: Option<NdbError>,
        reads: Vec<(u32, OpResult)>,
    ) {
        let sends = {
            let mut map = self.tc.lock();
            let Some(t) = map.get_mut(&txn) else { return };
            if t.phase != Phase::Preparing || !t.waiting.remove(&from) {
                return;
            }
            for (i, r) in reads {
                if let Some(slot) = t.results.get_mut(i as usize) {
                    *slot = r;
                }
            }
            if let Some(e) = err {
                t.error.get_or_insert(e);
            }
            if !t.waiting.is_empty() {
                return;
            }
            if t.error.is_some() {
                let Some(t) = map.remove(&txn) else { return };
                drop(map);
                return self.tc_abort(worker, txn, &t, None);
            }
            t.phase = Phase::Committing;
            t.waiting = t.partitions.keys().copied().collect();
            t.waiting.clone()
        };
        for n in sends {
            self.send_from(worker, n, DataMsg::LqhCommit { txn, backup: false });
        }
    }

    /// Aborts at every live replica and answers the API with the transaction's error
    /// (or `err`).
    fn tc_abort(&self, worker: usize, txn: TxnKey, t: &TcTxn, err: Option<NdbError>) {
        for n in self.replicas_of(t) {
            self.send_from(worker, n, DataMsg::LqhAbort { txn });
        }
        let e = err
            .or_else(|| t.error.clone())
            .unwrap_or_else(codes::transaction_aborted);
        self.refuse(worker, t.api, t.req, &e);
    }

    /// COMMITTED from a participant.
    pub(super) fn tc_committed(&self, worker: usize, from: NodeId, txn: TxnKey, gci: u64) {
        let done = {
            let mut map = self.tc.lock();
            let Some(t) = map.get_mut(&txn) else { return };
            if t.phase != Phase::Committing || !t.waiting.remove(&from) {
                return;
            }
            t.gci = t.gci.max(gci);
            if !t.waiting.is_empty() {
                return;
            }
            map.remove(&txn)
        };
        if let Some(t) = done {
            self.tc_answer(worker, t);
        }
    }

    fn tc_answer(&self, worker: usize, t: TcTxn) {
        if t.unknown {
            let e = codes::request_timeout(
                "a data node was lost during the commit and no surviving replica knew the transaction",
            );
            return self.refuse(worker, t.api, t.req, &e);
        }
        self.send_from(
            worker,
            t.api,
            DataMsg::TcKeyConf {
                req: t.req,
                gci: t.gci,
                results: t.results,
            },
        );
    }

    /// A surviving replica asked to commit for a lost participant answered that it
    /// knows nothing of the transaction.
    pub(super) fn tc_taker_unknown(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        state: crate::transport::data::TxnState,
    ) {
        if txn.tc != self.me || state != crate::transport::data::TxnState::Unknown {
            return;
        }
        let done = {
            let mut map = self.tc.lock();
            let Some(t) = map.get_mut(&txn) else { return };
            if t.phase != Phase::Committing || !t.waiting.remove(&from) {
                return;
            }
            t.unknown = true;
            if !t.waiting.is_empty() {
                return;
            }
            map.remove(&txn)
        };
        if let Some(t) = done {
            self.tc_answer(worker, t);
        }
    }

    /// This node left the cluster: its transactions end here; the API nodes hear
    /// 4010 (not committed) or 4012 (the commit was under way).
    pub(super) fn tc_reset(&self, worker: usize) {
        let mine: Vec<TcTxn> = {
            let mut map = self.tc.lock();
            let keys: Vec<TxnKey> = map
                .keys()
                .filter(|k| Self::worker_of(k) == worker)
                .copied()
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for t in mine {
            let e = match t.phase {
                Phase::Preparing => {
                    codes::node_failure_abort().detail(format!("data node {} restarted", self.me))
                }
                Phase::Committing => codes::request_timeout(format!(
                    "data node {} restarted during the commit",
                    self.me
                )),
            };
            self.refuse(worker, t.api, t.req, &e);
        }
    }

    /// A view change left `nodes` out: see the module notes.
    pub(super) fn tc_nodes_failed(&self, worker: usize, nodes: &[NodeId]) {
        let mine: Vec<TxnKey> = self
            .tc
            .lock()
            .keys()
            .filter(|k| Self::worker_of(k) == worker)
            .copied()
            .collect();
        for txn in mine {
            let mut map = self.tc.lock();
            let Some(t) = map.get_mut(&txn) else { continue };
            // Preparing, every participant counts (one that already prepared is lost
            // with its locks and its answer is void: the decision is not made, so
            // abort); committing, only those that have not committed yet.
            let counted: Vec<NodeId> = match t.phase {
                Phase::Preparing => t.partitions.keys().copied().collect(),
                Phase::Committing => t.waiting.iter().copied().collect(),
            };
            let lost: Vec<NodeId> = counted.into_iter().filter(|n| nodes.contains(n)).collect();
            if lost.is_empty() {
                continue;
            }
            match t.phase {
                Phase::Preparing => {
                    let Some(t) = map.remove(&txn) else { continue };
                    drop(map);
                    let e = codes::node_failure_abort()
                        .detail(format!("data node {} failed during prepare", lost[0]));
                    self.tc_abort(worker, txn, &t, Some(e));
                }
                Phase::Committing => {
                    // The surviving replicas of the lost participant's partitions hold
                    // its after-images prepared: they commit them.
                    let mut takers = BTreeSet::new();
                    for n in &lost {
                        t.waiting.remove(n);
                        for &p in t.partitions.get(n).into_iter().flatten() {
                            takers.extend(self.live_replicas(p));
                        }
                    }
                    for n in &takers {
                        if let Some(parts) = lost.iter().find_map(|l| t.partitions.get(l)).cloned()
                        {
                            t.partitions.entry(*n).or_default().extend(parts);
                        }
                    }
                    t.waiting.extend(takers.iter().copied());
                    let empty = t.waiting.is_empty();
                    drop(map);
                    if empty {
                        // No replica left of a partition: the cluster is going down.
                        if let Some(t) = self.tc.lock().remove(&txn) {
                            let e = codes::node_group_down(
                                "every replica of a partition failed during commit",
                            );
                            self.refuse(worker, t.api, t.req, &e);
                        }
                        continue;
                    }
                    for n in takers {
                        self.send_from(worker, n, DataMsg::LqhCommit { txn, backup: false });
                    }
                }
            }
        }
    }
}
