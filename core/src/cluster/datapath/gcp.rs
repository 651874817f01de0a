//! Global checkpoints across data node processes: NDB's GCP protocol (DBDIH's
//! GCP_PREPARE, GCP_COMMIT, GCP_SAVEREQ, COPY_GCIREQ) over the transport, so that a
//! checkpoint number means the same set of transactions on every node and a system
//! restart of the whole cluster recovers a consistent cut (`docs/cluster.md` §6,
//! "Global checkpoints").
//!
//! Each node's local engine stamps commits with its own checkpoint number, cut from
//! outside (`log::gcp`, external mode). The **master** — the live data node with the
//! lowest id in this node's view — runs one round every TimeBetweenGlobalCheckpoints, or
//! at once when a node asks (a client waiting for durability, a local checkpoint):
//!
//! 1. `GcpPrepare` to every live data node: each closes its commit gate (a TC that
//!    decides to commit now holds the decision, `tc.rs`) and answers `GcpPrepared`
//!    with its current number once no commit it decided is under way. When every node
//!    answered, no commit is in flight anywhere.
//! 2. `GcpCommit{new}`, `new` above every answer: each node cuts its engine to `new`,
//!    opens its gate and sends the held commits, stamped `new`. A commit carries its
//!    number (`LqhCommit::gci_hi`); a node that gets one ahead of its own cuts first —
//!    so a commit sent by a node already past the cut never lands below it elsewhere.
//! 3. `GcpSave{new - 1}`: each node makes its redo durable up to there and records it
//!    in its system file (on the saver thread: an fsync never blocks the loop).
//! 4. Once every node saved, `GcpDurable` to all: clients waiting for durability
//!    (`DurableReq`) are answered.
//!
//! Invariants: a node answers only its view's master; a round's waiting sets shrink
//! with the view; a new master starts a round at once, and a gate closed by a lost
//! master stays closed until the new master's round opens it (an early reopening
//! could let a commit land on both sides of a cut). A save that fails stops the node
//! (the fsync is never retried). Commits finished by a takeover after a TC's failure
//! take the number current at each replica.
//!
//! Lock order: the TC map, then `gcp` (a TC decision checks the gate and queues itself
//! under both); `gcp` is otherwise a leaf: no message is sent and no engine call made
//! while it is held.

use super::{DataPath, Job, Threading};
use crate::error::{Result, codes};
use crate::log::gcp::gci_hi;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, TxnKey};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

/// API requests waiting for durability, per data node, at most.
pub const DURABLE_WAITERS_MAX: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Prepare,
    Commit,
    Save,
}

/// The master's round under way.
struct Round {
    id: u64,
    step: Step,
    members: BTreeSet<NodeId>,
    waiting: BTreeSet<NodeId>,
    max_hi: u32,
    new_hi: u32,
}

/// This node's part of the protocol (both roles).
#[derive(Default)]
pub(crate) struct GcpNode {
    /// Participant: the master and round whose prepare waits for this node's commits
    /// under way to finish.
    pending_prepare: Option<(NodeId, u64)>,
    /// Commit decisions held while the gate is closed.
    held: Vec<TxnKey>,
    /// The highest checkpoint saved on every node of a round.
    durable_hi: u32,
    /// API requests waiting for durability: (API node, request, checkpoint).
    waiters: Vec<(NodeId, u64, u32)>,
    /// Master: the round under way, the next round's counter, when the last ended.
    round: Option<Round>,
    rounds: u64,
    last_round_ms: u64,
    /// A checkpoint was asked for (a waiter, here or at another node).
    wanted: bool,
    /// Whether this node was master at the last view.
    was_master: bool,
    /// The node is stopping gracefully: as master it runs only rounds asked for (a
    /// round of its own after the others left would be a checkpoint they lack).
    stopping: bool,
}

impl DataPath {
    /// The master of this node's view: its live data node with the lowest id.
    fn gcp_master(&self) -> Option<NodeId> {
        self.members.read().live.iter().next().copied()
    }

    fn gcp_enabled(&self) -> bool {
        self.threading == Threading::Threads
    }

    /// The local engine's current checkpoint number (what a TC stamps on a commit).
    pub(super) fn gcp_current_hi(&self) -> u32 {
        gci_hi(self.engine.inner().current_gci())
    }

    /// A commit sent in checkpoint `hi`: this node moves on to it first if behind.
    pub(super) fn gcp_raise(&self, hi: u32) {
        if hi > 0 && self.gcp_enabled() {
            self.engine.inner().gcp_cut_to(hi);
        }
    }

    /// Called by a TC deciding to commit, under the TC map lock: while the gate is
    /// closed the decision is held (true) and sent at the round's commit.
    pub(super) fn gcp_hold(&self, txn: TxnKey) -> bool {
        if !self.gcp_gate.load(Ordering::SeqCst) {
            return false;
        }
        let mut g = self.gcp.lock();
        // Re-checked under `gcp`: the commit step opens the gate under it.
        if !self.gcp_gate.load(Ordering::SeqCst) {
            return false;
        }
        g.held.push(txn);
        true
    }

    /// Sends a GCP message, handling one to this node at once.
    fn gcp_send(&self, to: NodeId, msg: DataMsg) {
        if to == self.me {
            self.on_gcp_message(self.me, msg);
        } else {
            self.send(to, msg);
        }
    }

    /// A GCP message (on the node's loop; a save goes to the saver thread).
    pub(super) fn on_gcp_message(&self, from: NodeId, msg: DataMsg) {
        if !self.gcp_enabled() {
            return;
        }
        match msg {
            DataMsg::GcpAsk => {
                // A client waits: the round starts now, not at the next tick.
                self.gcp.lock().wanted = true;
                return self.master_start(self.now_ms());
            }
            DataMsg::GcpPrepared { round, current_hi } => {
                return self.master_answer(from, round, Step::Prepare, current_hi);
            }
            DataMsg::GcpCommitted { round } => {
                return self.master_answer(from, round, Step::Commit, 0);
            }
            DataMsg::GcpSaved { round, gci_hi } => {
                return self.master_answer(from, round, Step::Save, gci_hi);
            }
            _ => {}
        }
        // The rest comes from a master: only this node's view's is heard.
        if self.gcp_master() != Some(from) {
            return;
        }
        match msg {
            DataMsg::GcpPrepare { round } => {
                self.gcp_gate.store(true, Ordering::SeqCst);
                self.gcp.lock().pending_prepare = Some((from, round));
                self.gcp_check_prepared();
            }
            DataMsg::GcpCommit { round, new_hi } => {
                self.engine.inner().gcp_cut_to(new_hi);
                let held = {
                    let mut g = self.gcp.lock();
                    g.pending_prepare = None;
                    self.gcp_gate.store(false, Ordering::SeqCst);
                    std::mem::take(&mut g.held)
                };
                for txn in held {
                    self.dispatch(Self::worker_of(&txn), Job::GcpRelease(txn));
                }
                self.gcp_send(from, DataMsg::GcpCommitted { round });
            }
            DataMsg::GcpSave { round, gci_hi } => self.gcp_save(from, round, gci_hi),
            DataMsg::GcpDurable { gci_hi } => self.gcp_durable(gci_hi),
            _ => {}
        }
    }

    /// Saves checkpoint `hi` off the loop, then answers the master.
    fn gcp_save(&self, master: NodeId, round: u64, hi: u32) {
        let job = Job::GcpSave { master, round, hi };
        match &self.gcp_saver {
            Some(tx) => {
                if tx.send(job).is_err() {
                    self.log(
                        crate::mgm::log::Severity::Alert,
                        "global checkpoint: the saver thread is gone",
                    );
                }
            }
            None => self.run_gcp_save(master, round, hi),
        }
    }

    /// The saver thread's work (see [`DataPath::gcp_save`]).
    pub(super) fn run_gcp_save(&self, master: NodeId, round: u64, hi: u32) {
        match self.engine.inner().gcp_save(hi) {
            Ok(()) => self.gcp_send(master, DataMsg::GcpSaved { round, gci_hi: hi }),
            Err(e) => {
                // The engine stopped itself; the node goes down with the reason.
                let text = format!(
                    "Forced node shutdown: saving global checkpoint {hi} failed: {} ({})",
                    e.message, e.code
                );
                self.log(crate::mgm::log::Severity::Alert, &text);
                self.fatal.lock().get_or_insert(text);
            }
        }
    }

    /// A participant whose prepare waits answers once no commit it decided is under
    /// way (checked at the prepare and at every tick).
    fn gcp_check_prepared(&self) {
        let Some((master, round)) = self.gcp.lock().pending_prepare else {
            return;
        };
        if self.tc_commits_in_flight() {
            return;
        }
        {
            let mut g = self.gcp.lock();
            if g.pending_prepare != Some((master, round)) {
                return;
            }
            g.pending_prepare = None;
        }
        let current_hi = self.gcp_current_hi();
        self.gcp_send(master, DataMsg::GcpPrepared { round, current_hi });
    }

    /// `gci_hi` is saved on every node of a round: answer the clients waiting for it.
    fn gcp_durable(&self, hi: u32) {
        let (done, durable): (Vec<(NodeId, u64)>, u32) = {
            let mut g = self.gcp.lock();
            g.durable_hi = g.durable_hi.max(hi);
            let durable = g.durable_hi;
            let (done, wait): (Vec<_>, Vec<_>) =
                g.waiters.drain(..).partition(|&(_, _, h)| h <= durable);
            g.waiters = wait;
            let done = done.into_iter().map(|(api, req, _)| (api, req)).collect();
            (done, durable)
        };
        for (api, req) in done {
            self.send(api, durable_conf(req, Ok(durable)));
        }
    }

    /// `DurableReq` from an API node: answered once the checkpoint holding `gci` is
    /// saved on every node (a checkpoint is asked for at once); GCI 0 means the
    /// checkpoint open here now (commits already acknowledged are in it or earlier).
    pub(super) fn on_durable_req(&self, api: NodeId, req: u64, gci: u64) {
        if !self.gcp_enabled() {
            let e = codes::unsupported(
                "waiting for durability needs the data node processes' checkpoints",
            );
            return self.send(api, durable_conf(req, Err(e)));
        }
        let want = if gci == 0 {
            self.gcp_current_hi()
        } else {
            gci_hi(gci)
        };
        let ask = {
            let mut g = self.gcp.lock();
            if want <= g.durable_hi {
                Some(Ok(g.durable_hi))
            } else if g.waiters.len() >= DURABLE_WAITERS_MAX {
                Some(Err(codes::out_of_transactions(format!(
                    "more than {DURABLE_WAITERS_MAX} requests wait for durability at data node {}",
                    self.me
                ))))
            } else {
                g.waiters.push((api, req, want));
                None
            }
        };
        match ask {
            Some(answer) => self.send(api, durable_conf(req, answer)),
            None => self.gcp_ask(),
        }
    }

    /// Asks the master for a checkpoint now.
    fn gcp_ask(&self) {
        if let Some(m) = self.gcp_master() {
            self.gcp_send(m, DataMsg::GcpAsk);
        }
    }

    /// The loop's tick: a waiting prepare, a local request, the master's timer.
    pub(super) fn gcp_tick(&self, now_ms: u64) {
        if !self.gcp_enabled() || !self.members.read().in_cluster {
            return;
        }
        self.gcp_check_prepared();
        if self.engine.inner().gcp.take_request() {
            self.gcp_ask();
        }
        self.master_start(now_ms);
    }

    /// The master starts a round when one is due or asked for and none runs.
    fn master_start(&self, now_ms: u64) {
        if self.gcp_master() != Some(self.me) || !self.members.read().in_cluster {
            return;
        }
        let start = {
            let mut g = self.gcp.lock();
            let due = !g.stopping && now_ms.saturating_sub(g.last_round_ms) >= self.gcp_interval_ms;
            if g.round.is_some() || !(due || g.wanted) {
                None
            } else {
                g.wanted = false;
                g.rounds += 1;
                let id = (self.txn_epoch.load(Ordering::Acquire) << 32) | (g.rounds & 0xffff_ffff);
                let members = self.members.read().live.clone();
                g.round = Some(Round {
                    id,
                    step: Step::Prepare,
                    waiting: members.clone(),
                    members: members.clone(),
                    max_hi: 0,
                    new_hi: 0,
                });
                Some((id, members))
            }
        };
        if let Some((round, members)) = start {
            for n in members {
                self.gcp_send(n, DataMsg::GcpPrepare { round });
            }
        }
    }

    /// A node answered the master's round; the next step starts once all did.
    fn master_answer(&self, from: NodeId, round: u64, step: Step, hi: u32) {
        {
            let mut g = self.gcp.lock();
            let Some(r) = g.round.as_mut() else { return };
            if r.id != round || r.step != step || !r.waiting.remove(&from) {
                return;
            }
            if step == Step::Prepare {
                r.max_hi = r.max_hi.max(hi);
            }
        }
        self.master_advance();
    }

    /// Moves the master's round on when nobody is left to answer its step.
    fn master_advance(&self) {
        let now_ms = self.now_ms();
        let (sends, durable): (Vec<(NodeId, DataMsg)>, Option<u32>) = {
            let mut g = self.gcp.lock();
            let Some(r) = g.round.as_mut() else { return };
            if !r.waiting.is_empty() {
                return;
            }
            r.waiting = r.members.clone();
            match r.step {
                Step::Prepare => {
                    r.step = Step::Commit;
                    r.new_hi = r.max_hi.max(self.gcp_current_hi()) + 1;
                    let m = DataMsg::GcpCommit {
                        round: r.id,
                        new_hi: r.new_hi,
                    };
                    (r.members.iter().map(|&n| (n, m.clone())).collect(), None)
                }
                Step::Commit => {
                    r.step = Step::Save;
                    let m = DataMsg::GcpSave {
                        round: r.id,
                        gci_hi: r.new_hi - 1,
                    };
                    (r.members.iter().map(|&n| (n, m.clone())).collect(), None)
                }
                Step::Save => {
                    let hi = r.new_hi - 1;
                    let members = std::mem::take(&mut r.members);
                    g.round = None;
                    g.last_round_ms = now_ms;
                    let m = DataMsg::GcpDurable { gci_hi: hi };
                    (
                        members.into_iter().map(|n| (n, m.clone())).collect(),
                        Some(hi),
                    )
                }
            }
        };
        if sends.is_empty() {
            // Every member of the round left: the round ends with nothing saved.
            if durable.is_none() {
                self.gcp.lock().round = None;
            }
            return;
        }
        for (n, m) in sends {
            self.gcp_send(n, m);
        }
    }

    /// A new view: the master's round forgets nodes that left (and ends if this node
    /// is no longer master); a node that becomes master starts a round at once.
    pub(super) fn gcp_on_view(&self) {
        if !self.gcp_enabled() {
            return;
        }
        let (live, in_cluster) = {
            let m = self.members.read();
            (m.live.clone(), m.in_cluster)
        };
        let waiters: Vec<(NodeId, u64)> = {
            let mut g = self.gcp.lock();
            let master = live.iter().next().copied() == Some(self.me);
            if !master {
                g.round = None;
            } else if !g.was_master && !g.stopping {
                g.wanted = true;
            }
            g.was_master = master;
            if let Some(r) = g.round.as_mut() {
                r.members.retain(|n| live.contains(n));
                r.waiting.retain(|n| live.contains(n));
            }
            if let Some((m, _)) = g.pending_prepare
                && !live.contains(&m)
            {
                // The gate stays closed until the new master's round (module notes).
                g.pending_prepare = None;
            }
            if live.is_empty() || !in_cluster {
                // Out of the cluster: this life's transactions are gone (Job::Reset).
                g.pending_prepare = None;
                g.held.clear();
                g.round = None;
                self.gcp_gate.store(false, Ordering::SeqCst);
                g.waiters.drain(..).map(|(a, r, _)| (a, r)).collect()
            } else {
                Vec::new()
            }
        };
        for (api, req) in waiters {
            let e = codes::node_failure_abort()
                .detail(format!("data node {} left the cluster", self.me));
            self.send(api, durable_conf(req, Err(e)));
        }
        self.master_advance();
    }

    /// A graceful stop, first step: asks the master for a checkpoint; returns the
    /// checkpoint that must be saved on every node before this node leaves, so that a
    /// shutdown of the whole cluster keeps every commit (None: nothing to wait for).
    /// The node's loop keeps running meanwhile and polls [`DataPath::flushed`].
    pub fn begin_flush(&self) -> Option<u32> {
        if !self.gcp_enabled() || !self.members.read().in_cluster {
            return None;
        }
        let want = self.gcp_current_hi();
        self.gcp.lock().stopping = true;
        self.gcp_ask();
        Some(want)
    }

    /// Data nodes in this node's view.
    pub fn live_count(&self) -> usize {
        self.members.read().live.len()
    }

    /// Whether checkpoint `want` is saved on every node.
    pub fn flushed(&self, want: u32) -> bool {
        self.gcp.lock().durable_hi >= want
    }

    /// A failure that must stop this node (the node's loop leaves with it).
    pub fn fatal_error(&self) -> Option<String> {
        self.fatal.lock().clone()
    }

    /// The highest checkpoint known saved on every node (ndbinfo, tests).
    pub fn durable_gci_hi(&self) -> u32 {
        self.gcp.lock().durable_hi
    }
}

/// The answer to a `DurableReq`: the checkpoint saved on every node, or the error.
fn durable_conf(req: u64, r: Result<u32>) -> DataMsg {
    match r {
        Ok(durable_hi) => DataMsg::DurableConf {
            req,
            code: 0,
            class: 0,
            message: String::new(),
            durable_hi,
        },
        Err(e) => {
            let (code, class, message) = super::err_parts(&e);
            DataMsg::DurableConf {
                req,
                code,
                class,
                message,
                durable_hi: 0,
            }
        }
    }
}
