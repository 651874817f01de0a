//! The LQH role's failure handling: a view without some nodes, the takeover of a
//! failed TC's transactions, and this node's own angel restart.
//!
//! - **Lost backups**: their answers will not come; the primary goes on without them.
//! - **Takeover** (the TC failed while this node held the transaction prepared and the
//!   decision is unknown here): ask every live data node what it knows; a node that
//!   committed it (or is committing it) means commit, otherwise abort once every node
//!   answered. A node asked about a transaction it holds prepared *freezes* it:
//!   messages about it from its TC are ignored from then on, so its answer cannot be
//!   overtaken. A backup whose primary is alive leaves the decision to its primary; a
//!   backup whose primary failed while the TC lives waits for the TC.
//! - **Reset** (this node left the cluster): local transactions are rolled back and
//!   forgotten without a message to another node.

use super::DataPath;
use super::lqh::{LqhTxn, Phase, Role};
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, TxnKey, TxnState};
use std::collections::BTreeSet;

impl DataPath {
    /// What this node knows of `txn`, for another node's takeover.
    pub(super) fn txn_state(&self, txn: &TxnKey) -> TxnState {
        if self.was_committed(txn) {
            return TxnState::Committed;
        }
        let mut map = self.lqh.lock();
        let mut state = TxnState::Unknown;
        for backup in [false, true] {
            if let Some(rec) = map.get_mut(&(*txn, backup)) {
                if matches!(
                    rec.role,
                    Role::Primary {
                        phase: Phase::CommittingBackups,
                        ..
                    }
                ) {
                    return TxnState::Committed;
                }
                rec.frozen = true;
                state = TxnState::Prepared;
            }
        }
        state
    }

    fn start_takeover(&self, worker: usize, txn: TxnKey) {
        // This node committed the transaction's local transaction (its other record
        // here was told to commit, by a node that had the decision): commit.
        if self.was_committed(&txn) {
            return self.takeover_decide(worker, txn, true);
        }
        let peers = self.other_live_nodes();
        {
            let mut map = self.lqh.lock();
            let mut started = false;
            for backup in [false, true] {
                if let Some(rec) = map.get_mut(&(txn, backup)) {
                    started |= rec.takeover.is_some();
                    rec.frozen = true;
                    rec.takeover = Some(peers.clone());
                }
            }
            if started {
                return;
            }
        }
        if peers.is_empty() {
            return self.takeover_decide(worker, txn, false);
        }
        for p in peers {
            self.send_from(worker, p, DataMsg::TxnStateReq { txn });
        }
    }

    pub(super) fn takeover_answer(&self, worker: usize, from: NodeId, txn: TxnKey, s: TxnState) {
        let decide = {
            let mut map = self.lqh.lock();
            let mut decide = None;
            for backup in [false, true] {
                let Some(rec) = map.get_mut(&(txn, backup)) else {
                    continue;
                };
                let Some(w) = rec.takeover.as_mut() else {
                    continue;
                };
                if !w.remove(&from) {
                    continue;
                }
                if s == TxnState::Committed {
                    decide = Some(true);
                } else if w.is_empty() && decide.is_none() {
                    decide = Some(false);
                }
            }
            decide
        };
        if let Some(commit) = decide {
            self.takeover_decide(worker, txn, commit);
        }
    }

    fn takeover_decide(&self, worker: usize, txn: TxnKey, commit: bool) {
        let mut any = false;
        for backup in [false, true] {
            if let Some(rec) = self.lqh.lock().get_mut(&(txn, backup)) {
                rec.takeover = None;
                rec.frozen = false;
                any = true;
            }
        }
        if !any {
            return;
        }
        self.log(
            crate::mgm::log::Severity::Info,
            &format!(
                "Transaction {}:{} of failed node {} taken over: {}",
                txn.tc,
                txn.id,
                txn.tc,
                if commit { "committed" } else { "aborted" }
            ),
        );
        if commit {
            // As if the TC had said commit (its answer goes nowhere: the TC is gone).
            self.commit_backup_record(txn);
            self.lqh_commit(worker, txn.tc, txn, false, 0);
        } else {
            self.lqh_abort(worker, self.me, txn);
        }
    }

    /// A view change left `nodes` out: see the module notes.
    pub(super) fn lqh_nodes_failed(&self, worker: usize, nodes: &[NodeId]) {
        let mine: Vec<(TxnKey, bool)> = self
            .lqh
            .lock()
            .keys()
            .filter(|(k, _)| Self::worker_of(k) == worker)
            .copied()
            .collect();
        let mut takeovers = BTreeSet::new();
        for key in mine {
            let txn = key.0;
            let (lost_backups, phase, takeover, round) = {
                let mut map = self.lqh.lock();
                let Some(rec) = map.get_mut(&key) else {
                    continue;
                };
                match &mut rec.role {
                    Role::Primary {
                        backups,
                        waiting,
                        phase,
                        tc,
                        ..
                    } => {
                        // Lost backups: their answers will not come.
                        let lost: Vec<NodeId> = waiting
                            .iter()
                            .filter(|n| nodes.contains(n))
                            .copied()
                            .collect();
                        backups.retain(|b| !nodes.contains(b));
                        let takeover = nodes.contains(tc) && *phase != Phase::CommittingBackups;
                        (lost, *phase, takeover, rec.round)
                    }
                    Role::Backup { primaries } => {
                        // The primary drives its backups, the TC drives a backup whose
                        // primary failed; with both gone this node asks the others.
                        let both = primaries.keys().any(|p| nodes.contains(p))
                            && (nodes.contains(&txn.tc) || !self.is_live(txn.tc));
                        (Vec::new(), Phase::Prepared, both, rec.round)
                    }
                }
            };
            for b in lost_backups {
                match phase {
                    Phase::PreparingBackups => {
                        self.lqh_backup_prepared(worker, b, txn, round, None)
                    }
                    Phase::CommittingBackups => self.lqh_backup_committed(worker, b, txn),
                    Phase::Prepared => {}
                }
            }
            if takeover {
                takeovers.insert(txn);
            }
        }
        for txn in takeovers {
            self.start_takeover(worker, txn);
        }
        // Takeovers waiting for answers from nodes now gone.
        let waiting: BTreeSet<TxnKey> = self
            .lqh
            .lock()
            .iter()
            .filter(|((k, _), r)| Self::worker_of(k) == worker && r.takeover.is_some())
            .map(|((k, _), _)| *k)
            .collect();
        for txn in waiting {
            for &n in nodes {
                self.takeover_answer(worker, n, txn, TxnState::Unknown);
            }
        }
    }

    /// This node left the cluster: its local transactions are rolled back and
    /// forgotten, telling nobody (see `DataPath::reset_worker`).
    pub(super) fn lqh_reset(&self, worker: usize) {
        let mine: Vec<LqhTxn> = {
            let mut map = self.lqh.lock();
            let keys: Vec<(TxnKey, bool)> = map
                .keys()
                .filter(|(k, _)| Self::worker_of(k) == worker)
                .copied()
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for rec in mine {
            super::lqh::rollback_local(&rec.tx);
        }
    }
}
