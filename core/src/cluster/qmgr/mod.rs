//! QMGR: cluster membership of the data nodes — heartbeats, failure detection, the
//! president, view changes and arbitration (`docs/cluster.md` §3–4).
//!
//! A pure state machine: [`Qmgr::on_message`] and [`Qmgr::on_tick`] take the time from
//! the caller and put what to send and what happened into an [`Outbox`]; no clock,
//! socket or randomness here (the simulator drives it from a seed, `rndbd` from the
//! real clock and the TCP transport).
//!
//! Invariants:
//! - a node installs views in increasing id order, and only views it acknowledged or
//!   that a president committed with every member's acknowledgement;
//! - a node acknowledges at most one proposal per view id at a time (its *lock*): a
//!   second proposal for the same id is refused unless it proposes the same members,
//!   or comes from the same proposer with a newer attempt;
//! - only the president of a proposed view (its oldest member) may propose it;
//! - a view that drops members is proposed only if the survivors hold at least one
//!   node of every node group, and either every node of some group (no other side can
//!   hold a copy of every partition) or the arbitrator's consent for this round;
//! - a member that learns it is not in the newest view stops for good.
//!
//! Maps iterated in protocol logic are ordered (`BTreeMap`/`BTreeSet`).

use super::{Event, Outbox};
use crate::mgm::log::Severity;
use crate::transport::{Message, NodeId, View};
use std::collections::{BTreeMap, BTreeSet};

mod view_change;

/// NDB's arbitration result codes (`ArbitCode`), as reported in the cluster log.
pub mod arbit_code {
    /// Another side was chosen.
    pub const LOSE_CHOOSE: u32 = 47;
    /// The arbitrator is not running (or did not answer).
    pub const LOSE_NORUN: u32 = 48;
    /// No arbitrator is configured.
    pub const LOSE_NOCFG: u32 = 49;
    /// This side lacks every node of a node group.
    pub const LOSE_GROUPS: u32 = 44;
}

/// NDB's error for a node declared dead by the others (2315 "Node declared dead").
pub const DECLARED_DEAD: u32 = 2315;
/// A shutdown because arbitration was lost (2305 "Arbitrator shutdown").
pub const ARBITRATION_LOST: u32 = 2305;
/// How often a starting node repeats its join request (at most; the heartbeat
/// interval when shorter).
pub const STARTING_JOIN_INTERVAL_MS: u64 = 250;
/// How long a node that learned from a peer that the whole cluster stops waits for its
/// own stop command before it handles departures as usual again.
pub const CLUSTER_STOP_GRACE_MS: u64 = 10_000;

/// The `Arbitration` parameter of `[ndbd default]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arbitration {
    Default,
    /// No arbitration: a side that may be half of a partition continues (the user
    /// accepts the risk of a split).
    Disabled,
}

/// What QMGR needs from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipConfig {
    /// Every `[ndbd]`: (node id, node group), sorted by node id.
    pub data_nodes: Vec<(NodeId, u32)>,
    /// HeartbeatIntervalDbDb.
    pub heartbeat_interval_ms: u64,
    pub arbitration: Arbitration,
    /// ArbitrationTimeout.
    pub arbitration_timeout_ms: u64,
    /// The management server that arbitrates (ArbitrationRank > 0), if any.
    pub arbitrator: Option<NodeId>,
    /// StartPartialTimeout: how long a starting cluster waits for every data node
    /// before the nodes present start without the others.
    pub start_partial_timeout_ms: u64,
}

impl MembershipConfig {
    /// From a cluster's configuration: its `[ndbd]` nodes and groups, the data nodes'
    /// HeartbeatIntervalDbDb, Arbitration, ArbitrationTimeout and StartPartialTimeout
    /// (as `[ndbd default]` gives them: the first data node's values), and the first
    /// `[ndb_mgmd]` with ArbitrationRank > 0 as the arbitrator.
    pub fn from_cluster(cfg: &crate::config::ClusterConfig) -> MembershipConfig {
        let first = cfg.data_nodes.first();
        let param =
            |name: &str, default: u64| first.and_then(|n| n.get_u64(name)).unwrap_or(default);
        let arbitration = match first.and_then(|n| n.get_str("Arbitration")) {
            Some(a) if a.eq_ignore_ascii_case("Disabled") => Arbitration::Disabled,
            _ => Arbitration::Default,
        };
        let mut data_nodes: Vec<(NodeId, u32)> = cfg
            .data_nodes
            .iter()
            .map(|n| (n.node_id, n.node_group))
            .collect();
        data_nodes.sort_unstable();
        MembershipConfig {
            data_nodes,
            heartbeat_interval_ms: param("HeartbeatIntervalDbDb", 5000),
            arbitration,
            arbitration_timeout_ms: param("ArbitrationTimeout", 7500),
            arbitrator: cfg
                .mgm_nodes
                .iter()
                .find(|m| m.arbitration_rank > 0)
                .map(|m| m.node_id),
            start_partial_timeout_ms: param("StartPartialTimeout", 30_000),
        }
    }

    fn group_of(&self, n: NodeId) -> Option<u32> {
        self.data_nodes.iter().find(|d| d.0 == n).map(|d| d.1)
    }

    fn is_data_node(&self, n: NodeId) -> bool {
        self.group_of(n).is_some()
    }

    fn groups(&self) -> BTreeSet<u32> {
        self.data_nodes.iter().map(|d| d.1).collect()
    }

    /// Whether `nodes` hold at least one node of every node group.
    pub fn covers_every_group(&self, nodes: &BTreeSet<NodeId>) -> bool {
        self.groups()
            .iter()
            .all(|g| nodes.iter().any(|&n| self.group_of(n) == Some(*g)))
    }

    /// A node group all of whose nodes are in `nodes`, if any.
    pub fn whole_group_in(&self, nodes: &BTreeSet<NodeId>) -> Option<u32> {
        self.groups().into_iter().find(|&g| {
            self.data_nodes
                .iter()
                .filter(|d| d.1 == g)
                .all(|d| nodes.contains(&d.0))
        })
    }
}

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not a member yet: asking to join, or forming the first view with its peers.
    Starting,
    Member,
    /// Stopped for good (declared dead, arbitration lost); the reason went out as
    /// [`Event::Shutdown`].
    Stopped,
}

/// The proposal this node holds an acknowledgement for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lock {
    proposer: NodeId,
    attempt: u32,
    view: View,
    at_ms: u64,
}

/// This node's own proposal in progress.
#[derive(Debug, Clone)]
struct Proposal {
    view: View,
    failed: Vec<NodeId>,
    attempt: u32,
    /// Who must acknowledge before the view is committed.
    need: BTreeSet<NodeId>,
    acks: BTreeSet<NodeId>,
    /// Who refused (alive, at least): not declared dead when the attempt times out.
    refused: BTreeSet<NodeId>,
    sent_at_ms: u64,
}

/// An arbitration request in flight.
#[derive(Debug, Clone)]
struct ArbitWait {
    view: View,
    failed: Vec<NodeId>,
    asked_at_ms: u64,
}

/// One data node's QMGR.
pub struct Qmgr {
    cfg: MembershipConfig,
    me: NodeId,
    incarnation: u64,
    /// A number from the node's start (the runtime's randomness) that makes this
    /// node's arbitration tickets unique.
    nonce: u64,
    phase: Phase,
    view: View,
    started_at_ms: u64,
    next_heartbeat_ms: u64,
    /// Last time anything arrived from each data node.
    last_heard: BTreeMap<NodeId, u64>,
    /// Members this node has given up on (missed heartbeats, or restarted).
    suspected: BTreeSet<NodeId>,
    /// The whole cluster is stopping (SHUTDOWN, ALL STOP, ALL RESTART): a peer whose
    /// connection closes is stopping too, not failing; the view is left as it is
    /// (nothing to log, nothing to arbitrate: every member stops).
    cluster_stopping: bool,
    /// When `cluster_stopping` was learned from a peer's `Leaving` rather than from this
    /// node's own stop command (which is on its way): if the command does not come
    /// within [`CLUSTER_STOP_GRACE_MS`], the flag is dropped and departures are handled
    /// as usual again.
    cluster_stop_learned_ms: Option<u64>,
    /// Members that said they stop gracefully (`Leaving`): gone from the next view
    /// without arbitration, and their closed connection is no failure.
    leaving: BTreeSet<NodeId>,
    /// Members whose heartbeat arrived since this node installed the view that admitted
    /// them: their life is a member's. A join request from one of them comes from a new
    /// life (a restart); one from a member not heard as such may be its own last
    /// request, sent before it was admitted and still on the wire (`on_join_req`).
    beat_as_member: BTreeSet<NodeId>,
    /// Data nodes that asked to join (president), with when they last asked.
    joiners: BTreeMap<NodeId, u64>,
    /// Starting: peers also starting, with when they were last heard; and when a
    /// running cluster was last heard of.
    starting_peers: BTreeMap<NodeId, u64>,
    running_seen_ms: Option<u64>,
    lock: Option<Lock>,
    proposal: Option<Proposal>,
    next_attempt: u32,
    arbit_wait: Option<ArbitWait>,
    /// The arbitration ticket of the installed view (0 before the first view).
    ticket: u64,
}

impl Qmgr {
    /// QMGR of data node `me` starting at `now_ms`; `incarnation` counts the node
    /// process's starts, `nonce` is random per start.
    pub fn new(
        cfg: MembershipConfig,
        me: NodeId,
        incarnation: u64,
        nonce: u64,
        now_ms: u64,
    ) -> Qmgr {
        debug_assert!(cfg.is_data_node(me), "node {me} is not a data node");
        Qmgr {
            cfg,
            me,
            incarnation,
            nonce,
            phase: Phase::Starting,
            view: View::default(),
            started_at_ms: now_ms,
            next_heartbeat_ms: now_ms,
            last_heard: BTreeMap::new(),
            suspected: BTreeSet::new(),
            cluster_stopping: false,
            cluster_stop_learned_ms: None,
            leaving: BTreeSet::new(),
            beat_as_member: BTreeSet::new(),
            joiners: BTreeMap::new(),
            starting_peers: BTreeMap::new(),
            running_seen_ms: None,
            lock: None,
            proposal: None,
            next_attempt: 1,
            arbit_wait: None,
            ticket: 0,
        }
    }

    pub fn node_id(&self) -> NodeId {
        self.me
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The installed view (id 0 before the first).
    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn is_president(&self) -> bool {
        self.phase == Phase::Member && self.view.president() == Some(self.me)
    }

    fn hb(&self) -> u64 {
        self.cfg.heartbeat_interval_ms.max(1)
    }

    /// A member is declared dead after this long without a message from it: three
    /// missed heartbeats (NDB's rule), counted from the end of the interval of the
    /// last one that came, so that a heartbeat late by less than an interval is not a
    /// miss.
    fn dead_after_ms(&self) -> u64 {
        4 * self.hb()
    }

    /// How long a proposal waits for its acknowledgements.
    fn proposal_timeout_ms(&self) -> u64 {
        2 * self.hb()
    }

    fn log(&self, out: &mut Outbox, severity: Severity, text: String) {
        out.events.push(Event::Log {
            node: self.me,
            severity,
            text,
        });
    }

    /// The whole cluster is stopping (see the field): peers that leave are not failures.
    pub fn set_cluster_stopping(&mut self) {
        self.cluster_stopping = true;
        self.cluster_stop_learned_ms = None;
    }

    /// A member of the view has left or is gone (announced, or its connection closed),
    /// whether or not a view without it was installed (while the cluster stops, none
    /// is).
    pub fn peer_departed(&self) -> bool {
        self.phase == Phase::Member && !self.suspected.is_empty()
    }

    /// This node stops gracefully (STOP, RESTART): the other members are told, so that
    /// they take it out of the view as a planned departure (no arbitration, no node
    /// declared dead). Sent before the node's connections close.
    pub fn announce_leaving(&self, out: &mut Outbox) {
        if self.phase != Phase::Member {
            return;
        }
        for n in self.view.node_ids() {
            if n != self.me {
                out.send(
                    n,
                    Message::Leaving {
                        view_id: self.view.id,
                        cluster_stop: self.cluster_stopping,
                    },
                );
            }
        }
    }

    /// The node must stop for a reason outside membership (the data path lost every
    /// up-to-date replica of a node group): as any forced shutdown, logged with `code`.
    pub fn force_stop(&mut self, out: &mut Outbox, code: u32, reason: String) {
        self.stop(out, code, reason);
    }

    fn stop(&mut self, out: &mut Outbox, code: u32, reason: String) {
        if self.phase == Phase::Stopped {
            return;
        }
        self.phase = Phase::Stopped;
        self.proposal = None;
        self.arbit_wait = None;
        self.log(
            out,
            Severity::Alert,
            format!("Forced node shutdown completed. Caused by error {code}: {reason}"),
        );
        out.events.push(Event::Shutdown { code, reason });
    }

    /// A ticket for a view this node proposes: unique per node start (the nonce) and
    /// view id.
    fn new_ticket(&self, view_id: u64) -> u64 {
        let t = self.nonce.rotate_left(17)
            ^ view_id.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ u64::from(self.me);
        t.max(1) // 0: no view
    }

    /// The oldest member this node does not suspect: who acts as president.
    fn acting_president(&self) -> Option<NodeId> {
        self.view
            .members
            .iter()
            .filter(|m| !self.suspected.contains(&m.0))
            .min_by_key(|m| (m.1, m.0))
            .map(|m| m.0)
    }

    pub fn on_tick(&mut self, now_ms: u64, out: &mut Outbox) {
        match self.phase {
            Phase::Stopped => {}
            Phase::Starting => self.tick_starting(now_ms, out),
            Phase::Member => self.tick_member(now_ms, out),
        }
    }

    fn tick_starting(&mut self, now_ms: u64, out: &mut Outbox) {
        if now_ms >= self.next_heartbeat_ms {
            // Asked again often while starting: a request sent before the peer's
            // connection was up is lost, and waiting a whole heartbeat interval
            // (5 s by default) for the next one would delay every cluster start.
            self.next_heartbeat_ms = now_ms + self.hb().min(STARTING_JOIN_INTERVAL_MS);
            for &(n, _) in &self.cfg.data_nodes {
                if n != self.me {
                    out.send(
                        n,
                        Message::JoinReq {
                            incarnation: self.incarnation,
                        },
                    );
                }
            }
        }
        let window = self.dead_after_ms();
        self.starting_peers
            .retain(|_, &mut at| now_ms.saturating_sub(at) < window);
        // A running cluster admits us; nothing to form.
        if self
            .running_seen_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < window)
        {
            return;
        }
        if self.proposal.is_some() || self.arbit_wait.is_some() {
            self.check_proposal_timeout(now_ms, out);
            return;
        }
        let mut present: BTreeSet<NodeId> = self.starting_peers.keys().copied().collect();
        present.insert(self.me);
        if present.first() != Some(&self.me) {
            return; // the lowest node id present forms the first view
        }
        let everyone = present.len() == self.cfg.data_nodes.len();
        let waited = now_ms.saturating_sub(self.started_at_ms) >= self.cfg.start_partial_timeout_ms;
        // A partial start (NDB's StartPartialTimeout): only when the missing nodes
        // cannot be a cluster of their own — the nodes present hold a whole node group
        // and a node of every group. Anything less could be one half of a partition,
        // and NDB's default (StartPartitionedTimeout 0) never starts such a half.
        let partial_ok = waited
            && self.cfg.covers_every_group(&present)
            && self.cfg.whole_group_in(&present).is_some();
        if !everyone && !partial_ok {
            return;
        }
        let view = View {
            id: 1,
            ticket: self.new_ticket(1),
            members: present
                .iter()
                .enumerate()
                .map(|(i, &n)| (n, i as u32 + 1))
                .collect(),
        };
        if !everyone {
            let missing: Vec<NodeId> = self
                .cfg
                .data_nodes
                .iter()
                .map(|d| d.0)
                .filter(|n| !present.contains(n))
                .collect();
            self.log(
                out,
                Severity::Info,
                format!(
                    "Partial start with nodes {} after {} ms without node {}",
                    join(&present),
                    self.cfg.start_partial_timeout_ms,
                    join(&missing)
                ),
            );
        }
        self.propose(view, Vec::new(), now_ms, out);
    }

    /// The transporter lost its connection to `peer` (closed or broken: NDB's
    /// DISCONNECT_REP). A member is declared dead at once, as NDB does, rather than
    /// after missed heartbeats; the view change follows at the next tick.
    pub fn on_disconnect(&mut self, _now_ms: u64, peer: NodeId, reason: &str, out: &mut Outbox) {
        if self.phase != Phase::Member
            || peer == self.me
            || !self.view.contains(peer)
            || !self.suspected.insert(peer)
            || self.cluster_stopping
        {
            return;
        }
        self.log(
            out,
            Severity::Warning,
            format!("Node {peer} declared dead: the connection to it was lost ({reason})"),
        );
    }

    fn tick_member(&mut self, now_ms: u64, out: &mut Outbox) {
        if let Some(at) = self.cluster_stop_learned_ms
            && now_ms.saturating_sub(at) >= CLUSTER_STOP_GRACE_MS
        {
            // A peer said the cluster stops, but this node was not told: go on.
            self.cluster_stopping = false;
            self.cluster_stop_learned_ms = None;
            self.log(
                out,
                Severity::Warning,
                format!(
                    "A peer stopped with the whole cluster, but this node got no stop command within {CLUSTER_STOP_GRACE_MS} ms; continuing"
                ),
            );
        }
        if now_ms >= self.next_heartbeat_ms {
            self.next_heartbeat_ms = now_ms + self.hb();
            for &(n, _) in &self.view.members {
                if n != self.me {
                    out.send(
                        n,
                        Message::Heartbeat {
                            view_id: self.view.id,
                        },
                    );
                }
            }
        }
        if self.cluster_stopping {
            // Every member stops: no failure to detect, no view to change.
            return;
        }
        let dead_after = self.dead_after_ms();
        let newly: Vec<NodeId> = self
            .view
            .members
            .iter()
            .map(|m| m.0)
            .filter(|&n| n != self.me && !self.suspected.contains(&n))
            .filter(|n| {
                self.last_heard
                    .get(n)
                    .is_none_or(|&at| now_ms.saturating_sub(at) >= dead_after)
            })
            .collect();
        for n in newly {
            self.suspected.insert(n);
            self.log(
                out,
                Severity::Warning,
                format!("Node {n} declared dead due to missed heartbeats (no contact for {dead_after} ms)"),
            );
        }
        let window = dead_after;
        self.joiners
            .retain(|_, &mut at| now_ms.saturating_sub(at) < window);
        if self.acting_president() != Some(self.me) {
            return;
        }
        if self.proposal.is_some() || self.arbit_wait.is_some() {
            self.check_proposal_timeout(now_ms, out);
            return;
        }
        let failed: Vec<NodeId> = self
            .view
            .members
            .iter()
            .map(|m| m.0)
            .filter(|n| self.suspected.contains(n))
            .collect();
        let joining: Vec<NodeId> = self
            .joiners
            .keys()
            .copied()
            .filter(|n| !self.view.contains(*n))
            .collect();
        if failed.is_empty() && joining.is_empty() {
            return;
        }
        // Survivors keep their dynamic ids; joiners come after the youngest.
        let first_dynamic = self.view.members.iter().map(|m| m.1).max().unwrap_or(0) + 1;
        let mut members: Vec<(NodeId, u32)> = self
            .view
            .members
            .iter()
            .copied()
            .filter(|m| !self.suspected.contains(&m.0))
            .collect();
        members.extend(joining.into_iter().zip(first_dynamic..));
        members.sort_unstable();
        let view = View {
            id: self.view.id + 1,
            ticket: self.new_ticket(self.view.id + 1),
            members,
        };
        if failed.is_empty() {
            self.propose(view, failed, now_ms, out);
            return;
        }
        let survivors: BTreeSet<NodeId> = self
            .view
            .members
            .iter()
            .map(|m| m.0)
            .filter(|n| !self.suspected.contains(n))
            .collect();
        let lost = join(&failed);
        // Only planned departures: no side can be running without us, nothing to
        // arbitrate (a graceful stop that would leave a node group empty is refused
        // before it begins; if one happens anyway, the checks below stop this side).
        if failed.iter().all(|n| self.leaving.contains(n))
            && self.cfg.covers_every_group(&survivors)
        {
            self.log(
                out,
                Severity::Info,
                format!("Node {lost} left the cluster (a graceful stop); continuing"),
            );
            self.propose(view, failed, now_ms, out);
            return;
        }
        if !self.cfg.covers_every_group(&survivors) {
            let missing: Vec<u32> = self
                .cfg
                .groups()
                .into_iter()
                .filter(|g| !survivors.iter().any(|&n| self.cfg.group_of(n) == Some(*g)))
                .collect();
            self.log(
                out,
                Severity::Alert,
                format!(
                    "Lost contact with node {lost}; this side has no node of node group {}; shutting down",
                    join(&missing)
                ),
            );
            self.stop(
                out,
                ARBITRATION_LOST,
                format!(
                    "Arbitrator shutdown, arbitration code {}: this side lacks node group {}",
                    arbit_code::LOSE_GROUPS,
                    join(&missing)
                ),
            );
            return;
        }
        if let Some(g) = self.cfg.whole_group_in(&survivors) {
            self.log(
                out,
                Severity::Info,
                format!(
                    "Lost contact with node {lost}; this side holds node group {g} completely; continuing"
                ),
            );
            self.propose(view, failed, now_ms, out);
            return;
        }
        match (self.cfg.arbitration, self.cfg.arbitrator) {
            (Arbitration::Disabled, _) => {
                self.log(
                    out,
                    Severity::Warning,
                    format!(
                        "Lost contact with node {lost}; the other side may be running too (Arbitration=Disabled); continuing"
                    ),
                );
                self.propose(view, failed, now_ms, out);
            }
            (Arbitration::Default, None) => {
                self.log(
                    out,
                    Severity::Alert,
                    format!(
                        "Lost contact with node {lost}; the other side may be running and no arbitrator is configured; shutting down"
                    ),
                );
                self.stop(
                    out,
                    ARBITRATION_LOST,
                    format!(
                        "Arbitrator shutdown, arbitration code {}: no arbitrator configured",
                        arbit_code::LOSE_NOCFG
                    ),
                );
            }
            (Arbitration::Default, Some(a)) => {
                self.log(
                    out,
                    Severity::Info,
                    format!(
                        "Lost contact with node {lost}; the other side may be running too; asking the arbitrator (node {a})"
                    ),
                );
                self.ask_arbitrator(view, failed, now_ms, out);
            }
        }
    }

    fn ask_arbitrator(&mut self, view: View, failed: Vec<NodeId>, now_ms: u64, out: &mut Outbox) {
        let Some(a) = self.cfg.arbitrator else {
            self.stop(
                out,
                ARBITRATION_LOST,
                format!(
                    "Arbitrator shutdown, arbitration code {}: no arbitrator configured",
                    arbit_code::LOSE_NOCFG
                ),
            );
            return;
        };
        out.send(
            a,
            Message::ArbitReq {
                ticket: self.ticket,
                view_id: view.id,
                members: view.node_ids(),
            },
        );
        self.arbit_wait = Some(ArbitWait {
            view,
            failed,
            asked_at_ms: now_ms,
        });
    }

    fn install(&mut self, view: View, now_ms: u64, out: &mut Outbox) {
        debug_assert!(view.id > self.view.id, "views go forward");
        let was_member = self.phase == Phase::Member;
        let old = std::mem::replace(&mut self.view, view);
        self.phase = Phase::Member;
        self.lock = None;
        self.proposal = None;
        self.arbit_wait = None;
        self.suspected.retain(|n| self.view.contains(*n));
        self.leaving.retain(|n| self.view.contains(*n));
        self.joiners.retain(|n, _| !self.view.contains(*n));
        for m in self.view.node_ids() {
            // A member gets a full interval of grace from the moment of the change.
            let at = self.last_heard.entry(m).or_insert(now_ms);
            *at = (*at).max(now_ms);
        }
        let joined: Vec<NodeId> = self
            .view
            .node_ids()
            .into_iter()
            .filter(|n| !old.contains(*n))
            .collect();
        let left: Vec<NodeId> = old
            .node_ids()
            .into_iter()
            .filter(|n| !self.view.contains(*n))
            .collect();
        // A member's life is known as a member's only from its heartbeats in this view.
        self.beat_as_member
            .retain(|n| old.contains(*n) && self.view.contains(*n));
        let president = self.view.president().unwrap_or(0);
        let mut text = format!(
            "Cluster membership: nodes {} (president {president}), view {}",
            join(self.view.node_ids()),
            self.view.id
        );
        if was_member && !left.is_empty() {
            text.push_str(&format!("; node {} left", join(&left)));
        }
        if was_member && !joined.is_empty() {
            text.push_str(&format!("; node {} joined", join(&joined)));
        }
        self.log(out, Severity::Info, text);
        out.events.push(Event::ViewInstalled(self.view.clone()));
        // The view opens a new arbitration round: the sides of a split of this view
        // present its ticket, and the arbitrator chooses one of them.
        self.ticket = self.view.ticket;
    }

    pub fn on_message(&mut self, now_ms: u64, from: NodeId, msg: Message, out: &mut Outbox) {
        if self.phase == Phase::Stopped {
            return;
        }
        // A join request says nothing of a member's life: from a member it is either
        // a stale one of its own or a new life's, whose old life must still be missed.
        if self.cfg.is_data_node(from) && !matches!(msg, Message::JoinReq { .. }) {
            self.last_heard.insert(from, now_ms);
        }
        match msg {
            Message::Heartbeat { view_id } => self.on_heartbeat(now_ms, from, view_id, out),
            Message::JoinReq { .. } => self.on_join_req(now_ms, from, out),
            Message::ViewPrepare {
                view,
                failed,
                attempt,
            } => self.on_prepare(now_ms, from, view, failed, attempt, out),
            Message::ViewAck {
                view_id,
                proposer,
                attempt,
            } => {
                if let Some(p) = &mut self.proposal
                    && proposer == self.me
                    && p.view.id == view_id
                    && p.attempt == attempt
                {
                    p.acks.insert(from);
                }
                self.maybe_commit(now_ms, out);
            }
            Message::ViewNack {
                view_id,
                proposer,
                attempt,
                reason,
                other,
                ..
            } => self.on_nack(from, (view_id, proposer, attempt), reason, other, out),
            Message::ViewAbort {
                view_id,
                proposer,
                attempt,
            } if self.lock.as_ref().is_some_and(|l| {
                l.proposer == proposer && l.attempt == attempt && l.view.id == view_id
            }) =>
            {
                self.lock = None;
            }
            Message::ViewCommit { view } => self.on_commit(now_ms, from, view, out),
            Message::LockQuery { view_id, attempt } => {
                let running = self
                    .proposal
                    .as_ref()
                    .is_some_and(|p| p.view.id == view_id && p.attempt == attempt);
                if self.phase == Phase::Member && self.view.id >= view_id {
                    // Decided already (the proposal committed, or a later view did):
                    // the asker missed the commit. Never an abort here: it would free
                    // a lock on a view that other members installed.
                    out.send(
                        from,
                        Message::ViewCommit {
                            view: self.view.clone(),
                        },
                    );
                } else if !running {
                    out.send(
                        from,
                        Message::ViewAbort {
                            view_id,
                            proposer: self.me,
                            attempt,
                        },
                    );
                }
            }
            // A member stopping gracefully: out at the next view change (see
            // `tick_member`). One stopping with the whole cluster: this node's stop is
            // on its way, and nothing changes meanwhile (the view stays, no log line),
            // whichever of the two stops arrives first here.
            Message::Leaving { cluster_stop, .. }
                if self.phase == Phase::Member && self.view.contains(from) && from != self.me =>
            {
                self.leaving.insert(from);
                self.suspected.insert(from);
                if cluster_stop && !self.cluster_stopping {
                    self.cluster_stopping = true;
                    self.cluster_stop_learned_ms = Some(now_ms);
                }
            }
            Message::NotMember { view_id }
                if self.phase == Phase::Member && view_id > self.view.id =>
            {
                self.stop(
                    out,
                    DECLARED_DEAD,
                    format!(
                        "Node declared dead by node {from} (view {view_id} does not hold node {})",
                        self.me
                    ),
                );
            }
            Message::ArbitConf { ticket, view_id } => {
                if let Some(w) = &self.arbit_wait
                    && w.view.id == view_id
                    && ticket == self.ticket
                {
                    let w = self.arbit_wait.take().expect("checked");
                    self.log(
                        out,
                        Severity::Info,
                        format!("Arbitrator (node {from}) decided: this side wins; continuing with nodes {}", join(w.view.node_ids())),
                    );
                    self.propose(w.view, w.failed, now_ms, out);
                }
            }
            Message::ArbitRef {
                ticket,
                view_id,
                code,
            } if self
                .arbit_wait
                .as_ref()
                .is_some_and(|w| w.view.id == view_id && ticket == self.ticket) =>
            {
                self.log(
                        out,
                        Severity::Alert,
                        format!("Arbitrator (node {from}) decided: this side loses (arbitration code {code}); shutting down"),
                    );
                self.stop(
                    out,
                    ARBITRATION_LOST,
                    format!(
                        "Arbitrator shutdown, arbitration code {code}: another side was chosen"
                    ),
                );
            }
            _ => {}
        }
    }

    fn on_heartbeat(&mut self, now_ms: u64, from: NodeId, view_id: u64, out: &mut Outbox) {
        match self.phase {
            Phase::Starting => {
                if view_id > 0 {
                    self.running_seen_ms = Some(now_ms);
                }
            }
            Phase::Member => {
                if !self.view.contains(from) {
                    out.send(
                        from,
                        Message::NotMember {
                            view_id: self.view.id,
                        },
                    );
                    return;
                }
                // Only a member sends heartbeats: from now on a join request from
                // `from` is a new life's.
                self.beat_as_member.insert(from);
                if view_id < self.view.id && self.is_president() {
                    // It missed a commit: send the view again.
                    out.send(
                        from,
                        Message::ViewCommit {
                            view: self.view.clone(),
                        },
                    );
                }
            }
            Phase::Stopped => {}
        }
    }

    fn on_join_req(&mut self, now_ms: u64, from: NodeId, out: &mut Outbox) {
        if !self.cfg.is_data_node(from) {
            return;
        }
        match self.phase {
            Phase::Starting => {
                self.starting_peers.insert(from, now_ms);
            }
            Phase::Member => {
                if self.view.contains(from) {
                    // A member that asks to join after it beat as a member has
                    // restarted: its earlier life is over, whatever its heartbeats
                    // said. Before its first heartbeat the request is its own, sent
                    // before it was admitted (a connection delivers in order, and a
                    // new life dials new connections): ignored, else the node just
                    // admitted would be declared dead. A restart that soon is found
                    // by the old life's closed connection or its missed heartbeats.
                    if !self.beat_as_member.contains(&from) {
                        // Its own request: nothing to answer either.
                        return;
                    }
                    if self.suspected.insert(from) {
                        self.log(
                            out,
                            Severity::Warning,
                            format!("Node {from} restarted: its earlier life is declared dead"),
                        );
                    }
                } else {
                    self.joiners.insert(from, now_ms);
                }
                // Tell it a cluster is running (it must wait to be admitted).
                out.send(
                    from,
                    Message::Heartbeat {
                        view_id: self.view.id,
                    },
                );
            }
            Phase::Stopped => {}
        }
    }
}

/// "2, 3 and 5" style lists for the log ("2, 3, 5").
pub(crate) fn join<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod join_tests;
#[cfg(test)]
mod leave_tests;
