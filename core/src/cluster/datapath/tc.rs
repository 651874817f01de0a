//! The TC role (NDB's DBTC): one record per transaction this node coordinates.
//!
//! A transaction runs in rounds (NDB API's `execute(NoCommit)`, then `Commit` or
//! `Rollback`). A round is `Preparing`: an `LqhPrepare` numbered with the round sent
//! to each participant of the round — the primary of each operation's partition —
//! waiting for every `LqhPrepared` of that round. Then either `Open` (NoCommit: the
//! API hears the round's results and the transaction id, the participants keep their
//! locks) until the API's next round, or `Committing` (an `LqhCommit` to every
//! participant of every round, waiting for every `LqhCommitted`), then the answer to
//! the API node and the record is gone. Any refusal in a round aborts at every
//! replica of the transaction's partitions; so does `Rollback`. A round sent with
//! AO_IgnoreError (`ignore_errors`) tells its primaries so: an operation that fails on
//! its row fails alone there (`lqh::run_ops`), and the answer lists it (a unique value
//! found taken in another node group still refuses the round). With several node
//! groups, a round whose participants wrote unique values then checks them in the
//! other groups (`UniqueCheckReq` to their up-to-date nodes, still `Preparing`) before
//! it ends (`unique_check`); a node lost meanwhile aborts it as a participant would.
//!
//! Failures (a view without some nodes): a participant lost while `Preparing` or
//! `Open` aborts the transaction (4010, temporary: the API retries; an open one hears
//! it at its next round); a participant lost while `Committing` — the decision is
//! made — is replaced by the partitions' surviving replicas, which hold the prepared
//! after-images and commit them. The API node's connection closing aborts its open
//! transactions (and those whose round is under way, once it ends). A participant
//! may end an open transaction on its own (a node-restart copy waited for it: `copy_out`);
//! it says so with an `LqhPrepared` refusal of the round already answered.
//!
//! Limits: at most MaxNoOfConcurrentTransactions records (4006 beyond); the
//! transactions ended under an idle API ([`ENDED_MAX`]) are remembered with their
//! error for its next round.

use super::{DataPath, err_parts};
use crate::error::{NdbError, Result, codes};
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, KeyOp, OpFailure, OpResult, TcExec, TxnKey, UniqueCheck};
use std::collections::{BTreeMap, BTreeSet};

/// Transactions ended while their API node waited for nothing, remembered (oldest
/// forgotten first) so that its next round hears why.
pub const ENDED_MAX: usize = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Preparing,
    /// A NoCommit round ended; the API decides what comes next.
    Open,
    Committing,
}

pub(crate) struct TcTxn {
    api: NodeId,
    /// The API's request of the round under way (answered at its end).
    req: u64,
    phase: Phase,
    /// The rounds so far (the one under way included).
    round: u32,
    /// What the API asked for once the round's operations ran.
    exec: TcExec,
    /// Participant (primary) -> its operations' partitions, over every round.
    partitions: BTreeMap<NodeId, BTreeSet<usize>>,
    waiting: BTreeSet<NodeId>,
    /// The round's unique values to check in the other node groups, with the
    /// participant that wrote each (`unique_check`).
    checks: Vec<(NodeId, UniqueCheck)>,
    /// Nodes asked about them, with their answers still to come (a node's checks go
    /// in messages of at most `MAX_UNIQUE_CHECKS`); the round is still `Preparing`.
    checking: BTreeMap<NodeId, usize>,
    /// The round's results.
    results: Vec<OpResult>,
    /// The round runs with AO_IgnoreError; its operations that failed alone.
    ignore_errors: bool,
    failed: Vec<OpFailure>,
    error: Option<NdbError>,
    gci: u64,
    /// A surviving replica asked to commit for a lost participant knew nothing of
    /// the transaction: the outcome is unknown (4012).
    unknown: bool,
    /// The API node's connection closed: abort instead of staying open.
    api_gone: bool,
    /// Committing, but the decision is held by a global checkpoint's prepare
    /// (`gcp.rs`): no `LqhCommit` sent yet.
    held: bool,
    /// The checkpoint number the commit was sent in (the participants' commits carry
    /// it).
    gci_hi: u32,
}

/// What a participant's `LqhPrepared` brings besides its error: the reads' results
/// by operation index and the unique values to check (`unique_check`).
pub(super) struct RoundAnswer {
    pub reads: Vec<(u32, OpResult)>,
    pub checks: Vec<UniqueCheck>,
    pub failed: Vec<OpFailure>,
}

/// A round of a transaction from an API node, as the loop hands it to a worker.
pub(crate) struct TcRequest {
    pub api: NodeId,
    pub txn: TxnKey,
    /// Its first round (the id was just made).
    pub new: bool,
    pub req: u64,
    pub exec: TcExec,
    pub ops: Vec<KeyOp>,
    /// AO_IgnoreError for the round (`TcKeyReq::ignore_errors`).
    pub ignore_errors: bool,
}

/// Transactions ended under an idle API, with the error its next round gets.
#[derive(Default)]
pub(crate) struct Ended {
    order: std::collections::VecDeque<TxnKey>,
    errors: BTreeMap<TxnKey, NdbError>,
}

impl Ended {
    fn insert(&mut self, txn: TxnKey, e: NdbError) {
        if self.errors.insert(txn, e).is_none() {
            self.order.push_back(txn);
            if self.order.len() > ENDED_MAX
                && let Some(old) = self.order.pop_front()
            {
                self.errors.remove(&old);
            }
        }
    }

    fn take(&mut self, txn: &TxnKey) -> Option<NdbError> {
        // Its place in `order` is dropped with the oldest, later.
        self.errors.remove(txn)
    }
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

    /// TCKEYREQ: a new transaction (`new`: its id just made here) or the next round
    /// of an open one.
    pub(super) fn tc_request(&self, worker: usize, r: TcRequest) {
        let TcRequest {
            api,
            txn,
            new,
            req,
            exec,
            ops,
            ignore_errors,
        } = r;
        if new {
            // A node whose replicas are not up to date may lack the schema too: its
            // API nodes go to another replica (4035 is temporary).
            if !self.is_ready() {
                return self.refuse(worker, api, req, &super::not_ready(self.me));
            }
            if let Err(e) = self.check_api_access(api) {
                return self.refuse(worker, api, req, &e);
            }
            if let Err(e) = self.check_send_load([api]) {
                return self.refuse(worker, api, req, &e);
            }
            if exec == TcExec::Rollback {
                return self.tc_conf(worker, api, req, 0, 0, Vec::new(), Vec::new());
            }
            let mut map = self.tc.lock();
            if map.len() >= self.max_transactions {
                drop(map);
                let e = codes::out_of_transactions(format!(
                    "data node {} coordinates {} transactions already",
                    self.me, self.max_transactions
                ));
                return self.refuse(worker, api, req, &e);
            }
            map.insert(
                txn,
                TcTxn {
                    api,
                    req,
                    phase: Phase::Open,
                    round: 0,
                    exec,
                    partitions: BTreeMap::new(),
                    waiting: BTreeSet::new(),
                    checks: Vec::new(),
                    checking: BTreeMap::new(),
                    results: Vec::new(),
                    ignore_errors,
                    failed: Vec::new(),
                    error: None,
                    gci: 0,
                    unknown: false,
                    api_gone: false,
                    held: false,
                    gci_hi: 0,
                },
            );
        } else {
            let mut map = self.tc.lock();
            let state = map.get(&txn).map(|t| (t.api, t.phase));
            match state {
                Some((owner, Phase::Open)) if owner == api => {}
                Some((owner, _)) => {
                    drop(map);
                    let e = codes::bad_argument(if owner == api {
                        format!(
                            "transaction {} at data node {} has a round under way (one execute at a time)",
                            txn.id, self.me
                        )
                    } else {
                        format!(
                            "transaction {} at data node {} belongs to another API node",
                            txn.id, self.me
                        )
                    });
                    return self.refuse(worker, api, req, &e);
                }
                None => {
                    let ended = self.tc_ended.lock().take(&txn);
                    drop(map);
                    let e = ended.unwrap_or_else(|| {
                        codes::node_failure_abort().detail(format!(
                            "transaction {} is not open at data node {} (it restarted, or ended the transaction)",
                            txn.id, self.me
                        ))
                    });
                    return self.refuse(worker, api, req, &e);
                }
            }
            if exec == TcExec::Rollback {
                let Some(t) = map.remove(&txn) else { return };
                drop(map);
                self.tc_abort(worker, txn, &t, None, false);
                return self.tc_conf(worker, api, req, txn.id, 0, Vec::new(), Vec::new());
            }
            if let Some(t) = map.get_mut(&txn) {
                t.req = req;
                t.exec = exec;
                t.ignore_errors = ignore_errors;
            }
        }
        self.tc_round(worker, txn, ops);
    }

    #[allow(clippy::too_many_arguments)]
    fn tc_conf(
        &self,
        worker: usize,
        api: NodeId,
        req: u64,
        txn: u64,
        gci: u64,
        results: Vec<OpResult>,
        failed: Vec<OpFailure>,
    ) {
        self.send_from(
            worker,
            api,
            DataMsg::TcKeyConf {
                req,
                txn,
                gci,
                results,
                failed,
            },
        );
    }

    /// Routes a round's operations to their partitions' primaries (none: the round
    /// ends at once).
    fn tc_round(&self, worker: usize, txn: TxnKey, ops: Vec<KeyOp>) {
        let mut per_node: BTreeMap<NodeId, Vec<(u32, KeyOp)>> = BTreeMap::new();
        let mut partitions: BTreeMap<NodeId, BTreeSet<usize>> = BTreeMap::new();
        let n = ops.len();
        let mut failed = None;
        for (i, op) in ops.into_iter().enumerate() {
            let part = match self.partition_of_op(&op) {
                Ok(p) => p,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            let Some(&primary) = self.live_replicas(part).first() else {
                failed = Some(codes::node_group_down(format!(
                    "partition {part} of table {} has no live replica",
                    op.table
                )));
                break;
            };
            per_node.entry(primary).or_default().push((i as u32, op));
            partitions.entry(primary).or_default().insert(part);
        }
        let (round, ignore_errors) = {
            let mut map = self.tc.lock();
            let Some(t) = map.get_mut(&txn) else { return };
            if let Some(e) = failed {
                // A bad operation aborts the transaction, as any refusal does.
                let Some(t) = map.remove(&txn) else { return };
                drop(map);
                return self.tc_abort(worker, txn, &t, Some(e), true);
            }
            t.round += 1;
            t.phase = Phase::Preparing;
            t.waiting = per_node.keys().copied().collect();
            t.checks.clear();
            t.checking.clear();
            t.results = vec![None; n];
            t.failed.clear();
            for (node, parts) in partitions {
                t.partitions.entry(node).or_default().extend(parts);
            }
            (t.round, t.ignore_errors)
        };
        if per_node.is_empty() {
            return self.tc_round_done(worker, txn);
        }
        for (node, ops) in per_node {
            self.send_from(
                worker,
                node,
                DataMsg::LqhPrepare {
                    txn,
                    backup: false,
                    round,
                    ops,
                    ignore_errors,
                },
            );
        }
    }

    /// A round's every participant answered: abort on a refusal; else answer and stay
    /// open (NoCommit), or commit.
    fn tc_round_done(&self, worker: usize, txn: TxnKey) {
        let mut map = self.tc.lock();
        let Some(t) = map.get_mut(&txn) else { return };
        if t.error.is_some() || (t.api_gone && t.exec != TcExec::Commit) {
            let Some(t) = map.remove(&txn) else { return };
            drop(map);
            return self.tc_abort(worker, txn, &t, None, !t.api_gone);
        }
        // With several node groups: the round's unique values are checked in the
        // other groups first, every participant's rows (and backups') being in place.
        if !t.checks.is_empty() {
            let checks = std::mem::take(&mut t.checks);
            let asks = self.unique_check_requests(&checks);
            if !asks.is_empty() {
                let max = super::MAX_UNIQUE_CHECKS;
                t.checking = asks
                    .iter()
                    .map(|(n, c)| (*n, c.len().div_ceil(max)))
                    .collect();
                let round = t.round;
                drop(map);
                for (n, checks) in asks {
                    for part in checks.chunks(max) {
                        let checks = part.to_vec();
                        self.send_from(worker, n, DataMsg::UniqueCheckReq { txn, round, checks });
                    }
                }
                return;
            }
        }
        if t.exec == TcExec::NoCommit {
            t.phase = Phase::Open;
            let (api, req) = (t.api, t.req);
            let (results, failed) = (
                std::mem::take(&mut t.results),
                std::mem::take(&mut t.failed),
            );
            drop(map);
            return self.tc_conf(worker, api, req, txn.id, 0, results, failed);
        }
        t.phase = Phase::Committing;
        t.waiting = t.partitions.keys().copied().collect();
        if t.waiting.is_empty() {
            let Some(t) = map.remove(&txn) else { return };
            drop(map);
            return self.tc_answer(worker, txn, t);
        }
        // A global checkpoint being cut holds the decision (checked under the TC map
        // lock: see `gcp.rs`).
        if self.gcp_hold(txn) {
            t.held = true;
            return;
        }
        t.gci_hi = self.gcp_current_hi();
        let (sends, gci_hi) = (t.waiting.clone(), t.gci_hi);
        drop(map);
        for n in sends {
            self.send_from(
                worker,
                n,
                DataMsg::LqhCommit {
                    txn,
                    backup: false,
                    gci_hi,
                },
            );
        }
    }

    /// A commit held by a global checkpoint is released: send it, in the checkpoint
    /// now current.
    pub(super) fn tc_release(&self, worker: usize, txn: TxnKey) {
        let mut map = self.tc.lock();
        let Some(t) = map.get_mut(&txn) else { return };
        if t.phase != Phase::Committing || !t.held {
            return;
        }
        t.held = false;
        t.gci_hi = self.gcp_current_hi();
        let (sends, gci_hi) = (t.waiting.clone(), t.gci_hi);
        drop(map);
        for n in sends {
            self.send_from(
                worker,
                n,
                DataMsg::LqhCommit {
                    txn,
                    backup: false,
                    gci_hi,
                },
            );
        }
    }

    /// Whether a commit this node decided is under way (sent, not every participant
    /// answered): a global checkpoint's prepare waits until none is.
    pub(super) fn tc_commits_in_flight(&self) -> bool {
        self.tc
            .lock()
            .values()
            .any(|t| t.phase == Phase::Committing && !t.held)
    }

    /// Every live replica of the transaction's partitions.
    fn replicas_of(&self, t: &TcTxn) -> BTreeSet<NodeId> {
        t.partitions
            .values()
            .flatten()
            .flat_map(|&p| self.live_replicas(p))
            .collect()
    }

    /// LQHKEYCONF / LQHKEYREF from a participant, for round `round`.
    pub(super) fn tc_prepared(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        round: u32,
        err: Option<NdbError>,
        answer: RoundAnswer,
    ) {
        let RoundAnswer {
            reads,
            checks,
            failed,
        } = answer;
        {
            let mut map = self.tc.lock();
            let Some(t) = map.get_mut(&txn) else { return };
            if t.phase == Phase::Open {
                // A participant asks to end the open transaction (its last round may
                // be older than the TC's).
                let Some(e) = err else { return };
                if round > t.round || !t.partitions.contains_key(&from) {
                    return;
                }
                let Some(t) = map.remove(&txn) else { return };
                drop(map);
                self.tc_abort(worker, txn, &t, None, false);
                self.tc_ended.lock().insert(txn, e);
                return;
            }
            if t.round != round || t.phase != Phase::Preparing || !t.waiting.remove(&from) {
                return;
            }
            for (i, r) in reads {
                if let Some(slot) = t.results.get_mut(i as usize) {
                    *slot = r;
                }
            }
            t.checks.extend(checks.into_iter().map(|c| (from, c)));
            t.failed.extend(failed);
            if let Some(e) = err {
                // A participant aborted by another's refusal says 4350: the refusal
                // itself is the transaction's error, whichever arrives first.
                match &t.error {
                    Some(prev) if prev.code != 4350 || e.code == 4350 => {}
                    _ => t.error = Some(e),
                }
            }
            if !t.waiting.is_empty() {
                return;
            }
        }
        self.tc_round_done(worker, txn);
    }

    /// A checked node's answer to the TC: once every one answered, the round goes on
    /// (`tc_round_done`), or aborts with the first refusal.
    pub(super) fn tc_unique_checked(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        round: u32,
        err: Option<NdbError>,
    ) {
        {
            let mut map = self.tc.lock();
            let Some(t) = map.get_mut(&txn) else { return };
            if t.round != round || !t.waiting.is_empty() {
                return;
            }
            match t.checking.get_mut(&from) {
                Some(left) if *left > 1 => *left -= 1,
                Some(_) => {
                    t.checking.remove(&from);
                }
                None => return,
            }
            if let Some(e) = err {
                t.error.get_or_insert(e);
            }
            if !t.checking.is_empty() {
                return;
            }
        }
        self.tc_round_done(worker, txn);
    }

    /// Aborts at every live replica; with `answer`, the API hears the transaction's
    /// error (or `err`).
    fn tc_abort(&self, worker: usize, txn: TxnKey, t: &TcTxn, err: Option<NdbError>, answer: bool) {
        for n in self.replicas_of(t) {
            self.send_from(worker, n, DataMsg::LqhAbort { txn });
        }
        if answer {
            let e = err
                .or_else(|| t.error.clone())
                .unwrap_or_else(codes::transaction_aborted);
            self.refuse(worker, t.api, t.req, &e);
        }
    }

    /// The API node's connection closed: its open transactions abort now, those with
    /// a round under way when it ends (a commit under way goes on).
    pub(super) fn tc_api_gone(&self, worker: usize, api: NodeId) {
        let open: Vec<(TxnKey, TcTxn)> = {
            let mut map = self.tc.lock();
            let keys: Vec<TxnKey> = map
                .iter()
                .filter(|(k, t)| Self::worker_of(k) == worker && t.api == api)
                .map(|(k, _)| *k)
                .collect();
            let mut open = Vec::new();
            for k in keys {
                let is_open = map.get(&k).is_some_and(|t| t.phase == Phase::Open);
                if is_open {
                    if let Some(t) = map.remove(&k) {
                        open.push((k, t));
                    }
                } else if let Some(t) = map.get_mut(&k) {
                    t.api_gone = true;
                }
            }
            open
        };
        for (k, t) in open {
            self.tc_abort(worker, k, &t, None, false);
        }
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
            self.tc_answer(worker, txn, t);
        }
    }

    fn tc_answer(&self, worker: usize, txn: TxnKey, t: TcTxn) {
        if t.unknown {
            let e = codes::request_timeout(
                "a data node was lost during the commit and no surviving replica knew the transaction",
            );
            return self.refuse(worker, t.api, t.req, &e);
        }
        self.tc_conf(worker, t.api, t.req, txn.id, t.gci, t.results, t.failed);
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
            self.tc_answer(worker, txn, t);
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
                // Nobody waits: the API's next round hears that the transaction is
                // not open here.
                Phase::Open => continue,
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
            // abort), and every node checking unique values (its answer will not
            // come); committing, only those that have not committed yet.
            let counted: Vec<NodeId> = match t.phase {
                Phase::Preparing => t
                    .partitions
                    .keys()
                    .chain(t.checking.keys())
                    .copied()
                    .collect(),
                Phase::Open => t.partitions.keys().copied().collect(),
                Phase::Committing => t.waiting.iter().copied().collect(),
            };
            let lost: Vec<NodeId> = counted.into_iter().filter(|n| nodes.contains(n)).collect();
            if lost.is_empty() {
                continue;
            }
            match t.phase {
                Phase::Preparing | Phase::Open => {
                    let Some(t) = map.remove(&txn) else { continue };
                    drop(map);
                    let e = codes::node_failure_abort().detail(format!(
                        "data node {} failed during the transaction",
                        lost[0]
                    ));
                    if t.phase == Phase::Open {
                        self.tc_abort(worker, txn, &t, None, false);
                        self.tc_ended.lock().insert(txn, e);
                    } else {
                        self.tc_abort(worker, txn, &t, Some(e), true);
                    }
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
                    // A held commit goes to the new participants when released.
                    let (held, gci_hi) = (t.held, t.gci_hi);
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
                    if held {
                        continue;
                    }
                    for n in takers {
                        self.send_from(
                            worker,
                            n,
                            DataMsg::LqhCommit {
                                txn,
                                backup: false,
                                gci_hi,
                            },
                        );
                    }
                }
            }
        }
    }
}
