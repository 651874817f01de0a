//! The view change of QMGR: proposals, locks, acknowledgements and commits
//! (`docs/cluster.md` §3; invariants in the parent module's notes).
//!
//! A president proposes a view (`ViewPrepare`) to every member it keeps and every
//! joiner; each locks it and acknowledges, or refuses (`ViewNack`: wrong view id, not
//! its president, locked by another proposal); with every acknowledgement the
//! president commits (`ViewCommit`, also to the members it drops). A proposal that
//! times out is aborted (`ViewAbort`), and the members that never answered are
//! declared dead. A lock whose abort was lost is asked after (`LockQuery`).

use super::{ARBITRATION_LOST, DECLARED_DEAD, Lock, Phase, Proposal, Qmgr, arbit_code};
use crate::cluster::Outbox;
use crate::mgm::log::Severity;
use crate::transport::{Message, NackReason, NodeId, View};
use std::collections::BTreeSet;

impl Qmgr {
    pub(super) fn check_proposal_timeout(&mut self, now_ms: u64, out: &mut Outbox) {
        if let Some(w) = &self.arbit_wait
            && now_ms.saturating_sub(w.asked_at_ms) >= self.cfg.arbitration_timeout_ms
        {
            let a = self.cfg.arbitrator.unwrap_or(0);
            self.log(
                out,
                Severity::Alert,
                format!(
                    "Arbitrator (node {a}) did not answer within {} ms; shutting down rather than risk a split",
                    self.cfg.arbitration_timeout_ms
                ),
            );
            self.stop(
                out,
                ARBITRATION_LOST,
                format!(
                    "Arbitrator shutdown, arbitration code {}: no answer from the arbitrator",
                    arbit_code::LOSE_NORUN
                ),
            );
            return;
        }
        let timeout = self.proposal_timeout_ms();
        if let Some(p) = &self.proposal
            && now_ms.saturating_sub(p.sent_at_ms) >= timeout
        {
            // Give up this attempt; the next tick proposes again with what is known
            // by then. A member that never answered cannot take part in a view
            // change: it is declared dead (a one-way broken link, a node that hangs).
            let p = self.proposal.take().expect("checked");
            if self.phase == Phase::Member {
                let silent: Vec<NodeId> = p
                    .need
                    .iter()
                    .copied()
                    .filter(|n| {
                        !p.acks.contains(n) && !p.refused.contains(n) && self.view.contains(*n)
                    })
                    .collect();
                for n in silent {
                    if self.suspected.insert(n) {
                        self.log(
                            out,
                            Severity::Warning,
                            format!(
                                "Node {n} declared dead: no answer to view change {} within {timeout} ms",
                                p.view.id
                            ),
                        );
                    }
                }
            }
            for &n in &p.acks {
                out.send(
                    n,
                    Message::ViewAbort {
                        view_id: p.view.id,
                        proposer: self.me,
                        attempt: p.attempt,
                    },
                );
            }
            if self.lock.as_ref().is_some_and(|l| l.proposer == self.me) {
                self.lock = None;
            }
            // A starting node that formed nothing waits for its peers again.
            if self.phase == Phase::Starting {
                self.started_at_ms = self.started_at_ms.min(now_ms);
            }
        }
    }

    /// Sends a proposal for `view` (this node is its president).
    pub(super) fn propose(
        &mut self,
        view: View,
        failed: Vec<NodeId>,
        now_ms: u64,
        out: &mut Outbox,
    ) {
        debug_assert_eq!(view.president(), Some(self.me));
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        let need: BTreeSet<NodeId> = view
            .node_ids()
            .into_iter()
            .filter(|&n| n != self.me && !self.suspected.contains(&n))
            .collect();
        self.lock = Some(Lock {
            proposer: self.me,
            attempt,
            view: view.clone(),
            at_ms: now_ms,
        });
        for &n in &need {
            out.send(
                n,
                Message::ViewPrepare {
                    view: view.clone(),
                    failed: failed.clone(),
                    attempt,
                },
            );
        }
        self.proposal = Some(Proposal {
            view,
            failed,
            attempt,
            need,
            acks: BTreeSet::new(),
            refused: BTreeSet::new(),
            sent_at_ms: now_ms,
        });
        self.maybe_commit(now_ms, out);
    }

    pub(super) fn maybe_commit(&mut self, now_ms: u64, out: &mut Outbox) {
        let Some(p) = &self.proposal else { return };
        if !p.need.is_subset(&p.acks) {
            return;
        }
        let p = self.proposal.take().expect("checked");
        let mut to: BTreeSet<NodeId> = p.view.node_ids().into_iter().collect();
        to.extend(p.failed.iter().copied());
        to.extend(self.view.node_ids());
        to.remove(&self.me);
        for n in to {
            out.send(
                n,
                Message::ViewCommit {
                    view: p.view.clone(),
                },
            );
        }
        self.install(p.view, now_ms, out);
    }

    pub(super) fn nack(
        &self,
        to: NodeId,
        view: &View,
        attempt: u32,
        reason: NackReason,
        out: &mut Outbox,
    ) {
        let (other, locked) = match &self.lock {
            Some(l) if reason == NackReason::Locked => (l.proposer, l.view.clone()),
            _ => (0, View::default()),
        };
        out.send(
            to,
            Message::ViewNack {
                view_id: view.id,
                proposer: to,
                attempt,
                reason,
                other,
                locked,
            },
        );
    }

    pub(super) fn on_prepare(
        &mut self,
        now_ms: u64,
        from: NodeId,
        view: View,
        failed: Vec<NodeId>,
        attempt: u32,
        out: &mut Outbox,
    ) {
        if !view.contains(self.me) || view.president() != Some(from) {
            self.nack(from, &view, attempt, NackReason::NotMember, out);
            return;
        }
        if self.phase == Phase::Member
            && self.suspected.contains(&from)
            && view.id == self.view.id + 1
        {
            // The node this one gave up on proposes a view with this node in it: it is
            // alive and older (a proposer is its view's oldest member). Yield: drop the
            // suspicion and any proposal of our own for this id, so that two live
            // proposers do not lock each other out.
            self.suspected.remove(&from);
            self.log(
                out,
                Severity::Info,
                format!(
                    "Node {from} is alive after all (it proposes view {})",
                    view.id
                ),
            );
            if let Some(p) = self.proposal.take() {
                for &n in &p.acks {
                    out.send(
                        n,
                        Message::ViewAbort {
                            view_id: p.view.id,
                            proposer: self.me,
                            attempt: p.attempt,
                        },
                    );
                }
            }
            if self.lock.as_ref().is_some_and(|l| l.proposer == self.me) {
                self.lock = None;
            }
        }
        match self.phase {
            Phase::Member => {
                if view.id != self.view.id + 1 {
                    self.nack(from, &view, attempt, NackReason::WrongViewId, out);
                    if view.id <= self.view.id {
                        // The proposer is behind: it missed commits. Our view brings it
                        // up to date (or tells it that it is out).
                        out.send(
                            from,
                            Message::ViewCommit {
                                view: self.view.clone(),
                            },
                        );
                    }
                    return;
                }
                // Old members may only be dropped as `failed`; the proposer must be
                // the oldest of the members it keeps, and may not have been passed
                // over by someone this node still hears and who is older.
                let kept_ok = self
                    .view
                    .members
                    .iter()
                    .all(|m| view.members.contains(m) || failed.contains(&m.0));
                let new_ok = view
                    .members
                    .iter()
                    .all(|m| self.view.members.contains(m) || !self.view.contains(m.0));
                if !kept_ok || !new_ok {
                    self.nack(from, &view, attempt, NackReason::NotMember, out);
                    return;
                }
                if let Some(p) = self.acting_president()
                    && p != from
                    && self.view.dynamic_id(p) < self.view.dynamic_id(from)
                    && !failed.contains(&p)
                {
                    self.nack(from, &view, attempt, NackReason::NotPresident, out);
                    return;
                }
            }
            Phase::Starting => {
                if view.id == 1 {
                    // Formation: dynamic ids in node id order from 1.
                    let ordered = view
                        .members
                        .iter()
                        .enumerate()
                        .all(|(i, m)| m.1 == i as u32 + 1);
                    if !ordered {
                        self.nack(from, &view, attempt, NackReason::NotMember, out);
                        return;
                    }
                }
            }
            Phase::Stopped => return,
        }
        match &self.lock {
            Some(l) if l.view.id == view.id => {
                let same_proposer_newer = l.proposer == from && attempt >= l.attempt;
                let same_members = l.view == view;
                // A proposal that drops the lock's holder as failed replaces it when
                // this node has lost the holder too (a holder that died before its
                // commit or abort would hold the lock forever). If the holder did
                // commit its view anywhere, the nodes that installed it refuse this
                // proposal (an id they passed), so it commits only without them, they
                // get its commit as failed nodes, and the group rule keeps at most one
                // side. A holder this node still hears keeps its lock: two live
                // proposers race, and the first to lock every member wins.
                let holder_dropped =
                    failed.contains(&l.proposer) && self.suspected.contains(&l.proposer);
                // A starting node's lock lapses: nothing is served before the first
                // view, and a formation may die with its proposer.
                let lapsed = self.phase == Phase::Starting
                    && now_ms.saturating_sub(l.at_ms) >= 2 * self.proposal_timeout_ms();
                if !same_proposer_newer && !same_members && !holder_dropped && !lapsed {
                    self.nack(from, &view, attempt, NackReason::Locked, out);
                    if l.proposer != self.me {
                        // Its abort may have been lost: ask whether it still runs.
                        out.send(
                            l.proposer,
                            Message::LockQuery {
                                view_id: l.view.id,
                                attempt: l.attempt,
                            },
                        );
                    }
                    return;
                }
            }
            _ => {}
        }
        self.lock = Some(Lock {
            proposer: from,
            attempt,
            view: view.clone(),
            at_ms: now_ms,
        });
        // A proposal of our own for the same id loses to the one we just accepted.
        if self.proposal.as_ref().is_some_and(|p| p.view.id == view.id) {
            self.proposal = None;
        }
        out.send(
            from,
            Message::ViewAck {
                view_id: view.id,
                proposer: from,
                attempt,
            },
        );
    }

    /// A `ViewNack` from `from`, answering proposal (`view_id`, `attempt`).
    pub(super) fn on_nack(
        &mut self,
        from: NodeId,
        (view_id, proposer, attempt): (u64, NodeId, u32),
        reason: NackReason,
        other: NodeId,
        out: &mut Outbox,
    ) {
        let Some(p) = &mut self.proposal else { return };
        if proposer != self.me || p.view.id != view_id || p.attempt != attempt {
            return;
        }
        p.refused.insert(from);
        if reason == NackReason::Locked && other != self.me {
            // Another proposal holds that node: wait for it to commit or abort, or for
            // the proposal timeout, which retries with what is known by then.
            return;
        }
        // Refused for good: drop the proposal; the next tick decides anew.
        let p = self.proposal.take().expect("checked");
        for &n in &p.acks {
            out.send(
                n,
                Message::ViewAbort {
                    view_id: p.view.id,
                    proposer: self.me,
                    attempt: p.attempt,
                },
            );
        }
        if self.lock.as_ref().is_some_and(|l| l.proposer == self.me) {
            self.lock = None;
        }
    }

    pub(super) fn on_commit(&mut self, now_ms: u64, from: NodeId, view: View, out: &mut Outbox) {
        if view.id <= self.view.id {
            return;
        }
        if view.contains(self.me) {
            self.install(view, now_ms, out);
        } else if self.phase == Phase::Member {
            self.stop(
                out,
                DECLARED_DEAD,
                format!(
                    "Node declared dead: view {} of node {from} does not hold node {}",
                    view.id, self.me
                ),
            );
        }
    }
}
