//! The deterministic cluster simulator: every data node's QMGR and the management
//! server's arbitrator in one thread, a virtual clock, and a network that delays,
//! drops, duplicates and reorders messages, cuts links (both ways or one way), crashes
//! and restarts nodes — all drawn from one seed, so a failing seed replays exactly.
//!
//! After every step the invariants of `docs/cluster.md` are checked ([`Sim::check`]):
//! - each node installs views in increasing id order;
//! - every installed view holds at least one node of every node group;
//! - two members at the same view id that each hold the other in their view have the
//!   same view;
//! - once a partition has lasted long enough for failure detection and arbitration
//!   to finish, no two members are on different sides of it (one side runs, at most).
//!
//! At the end, after the network heals and every stopped node is restarted (as NDB's
//! angel process does), every data node is a member of one common view.
//!
//! With a data layer ([`Sim::with_data`], `sim_data`), every data node also runs its
//! data path (TC, LQH, node-restart copy, local engine) inline, an API node runs a
//! workload against a model, and the data invariants are checked as well.
//!
//! Maps iterated here are ordered, and the only randomness is the seeded [`Rng`].

use super::Event;
use super::Outbox;
use super::arbit::Arbitrator;
use super::qmgr::{Arbitration, MembershipConfig, Phase, Qmgr};
use super::sim_data::{DataLayer, Workload};
use crate::disk::policy::sim::Rng;
use crate::transport::{Message, NodeId, View};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

/// Lines of trace kept for a failure report.
const TRACE_LINES: usize = 600;
/// With the data layer (a report then greps the trace).
const DATA_TRACE_LINES: usize = 100_000;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// (node id, node group) of every data node.
    pub data_nodes: Vec<(NodeId, u32)>,
    /// The management server (the arbitrator).
    pub mgm_node: NodeId,
    pub heartbeat_ms: u64,
    pub arbitration: Arbitration,
    pub arbitration_timeout_ms: u64,
    pub start_partial_timeout_ms: u64,
    pub tick_ms: u64,
    pub min_delay_ms: u64,
    pub max_delay_ms: u64,
    pub drop_per_mille: u64,
    pub duplicate_per_mille: u64,
    /// How long faults are injected (crashes, restarts, partitions).
    pub faulty_ms: u64,
    /// How long the healed cluster then runs before the final check.
    pub quiet_ms: u64,
    /// Per tick while faulty, out of 10,000: a crash, a partition, the arbitrator
    /// going down or coming back.
    pub crash_per_10k: u64,
    pub partition_per_10k: u64,
    pub arbitrator_flip_per_10k: u64,
    /// Whether a crash may close the node's connections at once (the peers hear
    /// DISCONNECT_REP, as after kill -9) instead of going silent (a hang).
    pub disconnect_on_crash: bool,
}

impl SimConfig {
    /// `groups` node groups of `replicas` nodes, node ids from 2 (1 is the management
    /// server), NDB's timers scaled down (heartbeats every 100 ms).
    pub fn new(seed: u64, groups: u32, replicas: u32) -> SimConfig {
        let mut data_nodes = Vec::new();
        let mut id = 2;
        for g in 0..groups {
            for _ in 0..replicas {
                data_nodes.push((id, g));
                id += 1;
            }
        }
        SimConfig {
            seed,
            data_nodes,
            mgm_node: 1,
            heartbeat_ms: 100,
            arbitration: Arbitration::Default,
            arbitration_timeout_ms: 750,
            start_partial_timeout_ms: 3_000,
            tick_ms: 10,
            min_delay_ms: 1,
            max_delay_ms: 20,
            drop_per_mille: 10,
            duplicate_per_mille: 10,
            faulty_ms: 20_000,
            quiet_ms: 15_000,
            crash_per_10k: 8,
            partition_per_10k: 6,
            arbitrator_flip_per_10k: 2,
            disconnect_on_crash: false,
        }
    }

    fn membership(&self) -> MembershipConfig {
        MembershipConfig {
            data_nodes: self.data_nodes.clone(),
            heartbeat_interval_ms: self.heartbeat_ms,
            arbitration: self.arbitration,
            arbitration_timeout_ms: self.arbitration_timeout_ms,
            arbitrator: Some(self.mgm_node),
            start_partial_timeout_ms: self.start_partial_timeout_ms,
        }
    }

    /// How long after a partition starts every side must have settled: in the worst
    /// case the nodes of a side take turns as acting president (each one after the
    /// one before it stopped), each turn a failure detection, an arbitration round
    /// that times out and a proposal.
    fn settle_ms(&self) -> u64 {
        let turn = 4 * self.heartbeat_ms + self.arbitration_timeout_ms + 2 * self.heartbeat_ms;
        self.data_nodes.len() as u64 * turn + 20 * self.heartbeat_ms
    }
}

struct SimNode {
    qmgr: Qmgr,
    up: bool,
    incarnation: u64,
    /// When a crashed or stopped node comes back (the angel's restart).
    restart_at_ms: Option<u64>,
    history: Vec<View>,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at_ms: u64,
    seq: u64,
    from: NodeId,
    to: NodeId,
    /// Index into `Sim::payloads` (messages are not `Ord`).
    payload: usize,
}

/// A cut of the network: messages from a node in `from` to a node in `to` are lost.
#[derive(Debug, Clone)]
struct Partition {
    from: BTreeSet<NodeId>,
    to: BTreeSet<NodeId>,
    both_ways: bool,
    since_ms: u64,
    until_ms: u64,
}

/// One simulated cluster (see the module notes).
pub struct Sim {
    cfg: SimConfig,
    mcfg: MembershipConfig,
    now_ms: u64,
    rng: Rng,
    seq: u64,
    nodes: BTreeMap<NodeId, SimNode>,
    arbit: Arbitrator,
    arbit_up: bool,
    queue: BinaryHeap<Reverse<InFlight>>,
    payloads: Vec<Option<Message>>,
    partition: Option<Partition>,
    trace: VecDeque<String>,
    /// Counts for the report.
    pub stats: SimStats,
    /// Whether a node that stopped is restarted after a while (NDB's angel process).
    pub angel: bool,
    /// The data nodes' data paths and the client (None: membership only).
    pub data: Option<DataLayer>,
    /// Connections closed by a process that died: (when, node that hears, peer).
    disconnects: Vec<(u64, NodeId, NodeId)>,
    /// Trace lines kept (the last ones).
    pub trace_lines: usize,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SimStats {
    pub messages: u64,
    pub dropped: u64,
    pub crashes: u64,
    pub partitions: u64,
    pub views_installed: u64,
    pub shutdowns: u64,
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Sim {
        let mcfg = cfg.membership();
        let mut rng = Rng::new(cfg.seed ^ 0x5151_0007);
        let nodes = cfg
            .data_nodes
            .iter()
            .map(|&(n, _)| {
                let nonce = rng.next_u64();
                (
                    n,
                    SimNode {
                        qmgr: Qmgr::new(mcfg.clone(), n, 1, nonce, 0),
                        up: true,
                        incarnation: 1,
                        restart_at_ms: None,
                        history: Vec::new(),
                    },
                )
            })
            .collect();
        Sim {
            arbit: Arbitrator::new(cfg.mgm_node),
            cfg,
            mcfg,
            now_ms: 0,
            rng,
            seq: 0,
            nodes,
            arbit_up: true,
            queue: BinaryHeap::new(),
            payloads: Vec::new(),
            partition: None,
            trace: VecDeque::new(),
            stats: SimStats::default(),
            angel: true,
            data: None,
            disconnects: Vec::new(),
            trace_lines: TRACE_LINES,
        }
    }

    /// A simulator whose data nodes also run the data path, with a client running
    /// `workload` (see `sim_data`).
    pub fn with_data(cfg: SimConfig, replicas: u32, workload: Workload) -> Result<Sim, String> {
        let data_cfg = super::sim_data::sim_config(&cfg.data_nodes, replicas, cfg.heartbeat_ms);
        let layer = DataLayer::new(
            data_cfg,
            cfg.seed,
            workload,
            (cfg.min_delay_ms, cfg.max_delay_ms),
        )?;
        let mut sim = Sim::new(cfg);
        sim.data = Some(layer);
        sim.trace_lines = DATA_TRACE_LINES;
        Ok(sim)
    }

    /// Moves the data layer's trace lines into the trace.
    fn pull_data_lines(&mut self) {
        let lines = match &mut self.data {
            Some(d) => std::mem::take(&mut d.lines),
            None => return,
        };
        for l in lines {
            self.trace(l);
        }
    }

    /// A data node's process ended (crash or shutdown): its data path goes; with
    /// `closed`, every peer hears its connections close.
    fn process_gone(&mut self, node: NodeId, closed: bool) {
        if let Some(d) = &mut self.data {
            d.stop_node(node);
        }
        self.pull_data_lines();
        if closed {
            let peers: Vec<NodeId> = self.nodes.keys().copied().filter(|&n| n != node).collect();
            for p in peers {
                let at = self.now_ms + self.cfg.min_delay_ms;
                self.disconnects.push((at, p, node));
            }
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn trace(&mut self, line: String) {
        if self.trace.len() >= self.trace_lines {
            self.trace.pop_front();
        }
        self.trace.push_back(format!("{:>7} {line}", self.now_ms));
    }

    /// The last lines of the trace (for a failure report).
    pub fn trace_text(&self) -> String {
        self.trace.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    fn cut(&self, from: NodeId, to: NodeId) -> bool {
        Self::cut_by(&self.partition, from, to)
    }

    /// Whether `partition` cuts messages from `from` to `to` (the API node and the
    /// management server are placed with neither side unless named).
    fn cut_by(partition: &Option<Partition>, from: NodeId, to: NodeId) -> bool {
        partition.as_ref().is_some_and(|p| {
            (p.from.contains(&from) && p.to.contains(&to))
                || (p.both_ways && p.to.contains(&from) && p.from.contains(&to))
        })
    }

    fn send_all(&mut self, from: NodeId, out: Outbox) -> Result<(), String> {
        for (to, msg) in out.sends {
            self.stats.messages += 1;
            if self.rng.below(1000) < self.cfg.drop_per_mille {
                self.stats.dropped += 1;
                continue;
            }
            let copies = if self.rng.below(1000) < self.cfg.duplicate_per_mille {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let span = self.cfg.max_delay_ms - self.cfg.min_delay_ms + 1;
                let at_ms = self.now_ms + self.cfg.min_delay_ms + self.rng.below(span);
                self.seq += 1;
                self.payloads.push(Some(msg.clone()));
                self.queue.push(Reverse(InFlight {
                    at_ms,
                    seq: self.seq,
                    from,
                    to,
                    payload: self.payloads.len() - 1,
                }));
            }
        }
        for e in out.events {
            match e {
                Event::Log { node, text, .. } => self.trace(format!("node {node}: {text}")),
                Event::ViewInstalled(v) => {
                    self.stats.views_installed += 1;
                    let node = self.nodes.get_mut(&from).ok_or("no such node")?;
                    if let Some(last) = node.history.last()
                        && v.id <= last.id
                    {
                        return Err(format!(
                            "node {from} installed view {} after view {}",
                            v.id, last.id
                        ));
                    }
                    node.history.push(v.clone());
                    let members: BTreeSet<NodeId> = v.node_ids().into_iter().collect();
                    if !self.mcfg.covers_every_group(&members) {
                        return Err(format!(
                            "node {from} installed view {} of nodes {members:?}, which lacks a node group",
                            v.id
                        ));
                    }
                    let now = self.now_ms;
                    if let Some(d) = &mut self.data {
                        d.on_view(now, from, &v);
                    }
                    self.pull_data_lines();
                }
                Event::Shutdown { code, reason } => {
                    self.stats.shutdowns += 1;
                    self.trace(format!("node {from}: SHUTDOWN {code}: {reason}"));
                    let restart = self.now_ms + 500 + self.rng.below(2_000);
                    if self.angel
                        && let Some(n) = self.nodes.get_mut(&from)
                    {
                        n.restart_at_ms = Some(restart);
                    }
                    // The process exits: its sockets close.
                    if self.data.is_some() {
                        self.process_gone(from, true);
                    }
                }
            }
        }
        Ok(())
    }

    fn deliver(&mut self, f: InFlight) -> Result<(), String> {
        let Some(msg) = self.payloads[f.payload].take() else {
            return Ok(());
        };
        if self.cut(f.from, f.to) {
            self.stats.dropped += 1;
            return Ok(());
        }
        let mut out = Outbox::default();
        if f.to == self.cfg.mgm_node {
            if !self.arbit_up {
                return Ok(());
            }
            self.trace(format!("{} -> {}: {msg:?}", f.from, f.to));
            self.arbit.on_message(f.from, msg, &mut out);
            return self.send_all(self.cfg.mgm_node, out);
        }
        let now = self.now_ms;
        let Some(n) = self.nodes.get_mut(&f.to) else {
            return Ok(());
        };
        if !n.up {
            return Ok(());
        }
        let line = format!("{} -> {}: {msg:?}", f.from, f.to);
        n.qmgr.on_message(now, f.from, msg, &mut out);
        self.trace(line);
        self.send_all(f.to, out)
    }

    fn tick_nodes(&mut self) -> Result<(), String> {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            let now = self.now_ms;
            let mut out = Outbox::default();
            let nonce = self.rng.next_u64();
            let mut restarted = None;
            {
                let Some(n) = self.nodes.get_mut(&id) else {
                    continue;
                };
                if let Some(at) = n.restart_at_ms
                    && now >= at
                {
                    n.restart_at_ms = None;
                    n.up = true;
                    n.incarnation += 1;
                    n.qmgr = Qmgr::new(self.mcfg.clone(), id, n.incarnation, nonce, now);
                    n.history.clear();
                    restarted = Some(n.incarnation);
                }
                if n.up && n.qmgr.phase() != Phase::Stopped {
                    n.qmgr.on_tick(now, &mut out);
                    if let Some(why) = self.data.as_ref().and_then(|d| d.lost_node_group(id)) {
                        n.qmgr.force_stop(
                            &mut out,
                            super::qmgr::ARBITRATION_LOST,
                            format!("{why}: the cluster cannot go on without its rows"),
                        );
                    }
                }
            }
            if let Some(inc) = restarted {
                self.trace(format!("node {id}: restarted (incarnation {inc})"));
                if let Some(d) = &mut self.data {
                    d.start_node(id, inc)?;
                }
            }
            self.send_all(id, out)?;
        }
        let now = self.now_ms;
        let up: BTreeSet<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.up && n.qmgr.phase() == Phase::Member)
            .map(|(&id, _)| id)
            .collect();
        if let Some(d) = &mut self.data {
            let r = d.tick(now, &up);
            self.pull_data_lines();
            r?;
        }
        Ok(())
    }

    /// Connections closed by dead processes, heard now.
    fn deliver_disconnects(&mut self) -> Result<(), String> {
        let now = self.now_ms;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.disconnects)
            .into_iter()
            .partition(|d| d.0 <= now);
        self.disconnects = later;
        for (_, node, peer) in due {
            let mut out = Outbox::default();
            if let Some(n) = self.nodes.get_mut(&node)
                && n.up
                && n.qmgr.phase() != Phase::Stopped
            {
                n.qmgr
                    .on_disconnect(now, peer, "connection closed", &mut out);
            }
            self.send_all(node, out)?;
        }
        Ok(())
    }

    /// Random faults while `faulty` (one draw per tick).
    fn inject_faults(&mut self) {
        let now = self.now_ms;
        if self.partition.as_ref().is_some_and(|p| now >= p.until_ms) {
            self.partition = None;
            self.trace("network healed".into());
        }
        let r = self.rng.below(10_000);
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        let crash_below = self.cfg.crash_per_10k;
        let partition_below = crash_below + self.cfg.partition_per_10k;
        let flip_below = partition_below + self.cfg.arbitrator_flip_per_10k;
        if r < crash_below {
            // Crash a node that is up; it comes back after a while.
            let up: Vec<NodeId> = ids.iter().copied().filter(|n| self.nodes[n].up).collect();
            if !up.is_empty() {
                let victim = up[self.rng.below(up.len() as u64) as usize];
                let back = now + 300 + self.rng.below(3_000);
                if let Some(n) = self.nodes.get_mut(&victim) {
                    n.up = false;
                    n.restart_at_ms = Some(back);
                }
                self.stats.crashes += 1;
                self.trace(format!("node {victim}: CRASH (back at {back})"));
                if self.data.is_some() {
                    let closed = self.cfg.disconnect_on_crash && self.rng.below(2) == 0;
                    self.process_gone(victim, closed);
                }
            }
        } else if r < partition_below && self.partition.is_none() {
            // Split the data nodes (and place the arbitrator) at random.
            let mut a = BTreeSet::new();
            let mut b = BTreeSet::new();
            for &n in &ids {
                if self.rng.below(2) == 0 {
                    a.insert(n);
                } else {
                    b.insert(n);
                }
            }
            match self.rng.below(3) {
                0 => {
                    a.insert(self.cfg.mgm_node);
                }
                1 => {
                    b.insert(self.cfg.mgm_node);
                }
                _ => {} // the arbitrator reaches both sides
            }
            let both_ways = self.rng.below(4) != 0;
            let until = now + 500 + self.rng.below(6_000);
            self.stats.partitions += 1;
            self.trace(format!(
                "PARTITION {a:?} {} {b:?} until {until}",
                if both_ways { "<-/->" } else { "-/->" }
            ));
            self.partition = Some(Partition {
                from: a,
                to: b,
                both_ways,
                since_ms: now,
                until_ms: until,
            });
        } else if r < flip_below {
            self.arbit_up = !self.arbit_up;
            if self.arbit_up {
                // A restarted management server: a fresh arbitrator.
                self.arbit = Arbitrator::new(self.cfg.mgm_node);
            }
            self.trace(format!(
                "arbitrator {}",
                if self.arbit_up { "restarted" } else { "DOWN" }
            ));
        }
    }

    /// Runs `ms` of virtual time; faults are injected while `faults`.
    pub fn run_for(&mut self, ms: u64, faults: bool) -> Result<(), String> {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            let next_tick = (self.now_ms / self.cfg.tick_ms + 1) * self.cfg.tick_ms;
            loop {
                let membership_at = self.queue.peek().map(|Reverse(f)| f.at_ms);
                let partition = &self.partition;
                let data_due = self
                    .data
                    .as_ref()
                    .and_then(|d| d.next_due(&|a, b| Self::cut_by(partition, a, b)));
                // Membership first at equal times (as before the data layer existed).
                let data_first = match (membership_at, data_due) {
                    (_, None) => false,
                    (None, Some(_)) => true,
                    (Some(m), Some((d, _))) => d < m,
                };
                let at = if data_first {
                    data_due.map(|d| d.0)
                } else {
                    membership_at
                };
                let Some(at) = at.filter(|&t| t <= next_tick) else {
                    break;
                };
                self.now_ms = self.now_ms.max(at);
                if let (true, Some((_, link))) = (data_first, data_due) {
                    let now = self.now_ms;
                    if let Some(d) = &mut self.data {
                        let r = d.deliver(now, link);
                        self.pull_data_lines();
                        r?;
                    }
                } else {
                    let Some(Reverse(f)) = self.queue.pop() else {
                        break;
                    };
                    self.deliver(f)?;
                }
                self.check()?;
            }
            self.now_ms = next_tick;
            self.deliver_disconnects()?;
            if faults {
                self.inject_faults();
            }
            self.tick_nodes()?;
            self.check()?;
        }
        Ok(())
    }

    /// The invariants that hold at every step (see the module notes).
    pub fn check(&self) -> Result<(), String> {
        let members: Vec<(NodeId, &View)> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.up && n.qmgr.phase() == Phase::Member)
            .map(|(&id, n)| (id, n.qmgr.view()))
            .collect();
        for (i, &(a, va)) in members.iter().enumerate() {
            for &(b, vb) in &members[i + 1..] {
                if va.id == vb.id && va.contains(b) && vb.contains(a) && va != vb {
                    return Err(format!(
                        "nodes {a} and {b} are both at view {} with different members: {:?} vs {:?}",
                        va.id, va.members, vb.members
                    ));
                }
            }
        }
        if let Some(p) = &self.partition
            && self.now_ms.saturating_sub(p.since_ms) >= self.cfg.settle_ms()
        {
            for (i, &(a, _)) in members.iter().enumerate() {
                for &(b, _) in &members[i + 1..] {
                    if self.cut(a, b) || self.cut(b, a) {
                        return Err(format!(
                            "nodes {a} and {b} both run as members {} ms into a partition that separates them",
                            self.now_ms - p.since_ms
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The final state: every data node a member of one common view of all.
    pub fn check_converged(&self) -> Result<View, String> {
        let mut view: Option<&View> = None;
        for (&id, n) in &self.nodes {
            if !n.up || n.qmgr.phase() != Phase::Member {
                return Err(format!(
                    "node {id} is {:?} (up {}) at the end",
                    n.qmgr.phase(),
                    n.up
                ));
            }
            match view {
                None => view = Some(n.qmgr.view()),
                Some(v) if v == n.qmgr.view() => {}
                Some(v) => {
                    return Err(format!(
                        "node {id} is at view {:?}, another node at {:?}",
                        n.qmgr.view(),
                        v
                    ));
                }
            }
        }
        let v = view.ok_or("no data nodes")?.clone();
        if v.members.len() != self.nodes.len() {
            return Err(format!("the final view {:?} lacks nodes", v.members));
        }
        Ok(v)
    }

    /// One whole run: start, the faulty period, healing (every stopped or crashed node
    /// restarted, the arbitrator up), the quiet period, the final check.
    pub fn run(&mut self) -> Result<View, String> {
        self.run_for(self.cfg.faulty_ms, true)?;
        self.arbit_up = true;
        self.partition = None;
        self.trace("FAULTS END: network healed, arbitrator up".into());
        let now = self.now_ms;
        for n in self.nodes.values_mut() {
            if !n.up || n.qmgr.phase() == Phase::Stopped {
                n.restart_at_ms = Some(n.restart_at_ms.map_or(now, |t| t.min(now + 2_000)));
            }
        }
        // The quiet period's network is perfect: what is checked at its end is that
        // the protocol converges, not luck with lost heartbeats.
        self.cfg.drop_per_mille = 0;
        self.cfg.duplicate_per_mille = 0;
        let quiet = self.cfg.quiet_ms;
        self.run_for(quiet, false)?;
        let view = self.check_converged()?;
        if self.data.is_some() {
            self.finish_data()?;
        }
        Ok(view)
    }

    /// The data layer's end: the client stops, every request is answered and every
    /// node up to date (within a bound), then the replicas and the model are compared.
    fn finish_data(&mut self) -> Result<(), String> {
        if let Some(d) = &mut self.data {
            d.quiesce = true;
        }
        let mut waited_ms = 0;
        while waited_ms < 30_000 {
            let done = self
                .data
                .as_ref()
                .is_some_and(|d| d.in_flight() == 0 && d.all_ready());
            if done {
                break;
            }
            self.run_for(100, false)?;
            waited_ms += 100;
        }
        let Some(d) = &mut self.data else {
            return Ok(());
        };
        if d.in_flight() != 0 || !d.all_ready() {
            return Err(format!(
                "30 s after the faults: requests unanswered (id, node): {:?}, every node up to date: {}",
                d.in_flight_ids(),
                d.all_ready()
            ));
        }
        let r = d.check_final();
        self.pull_data_lines();
        r
    }

    /// Test hooks: crash a node now / cut the network now.
    pub fn crash(&mut self, node: NodeId, back_in_ms: Option<u64>) {
        let now = self.now_ms;
        if let Some(n) = self.nodes.get_mut(&node) {
            n.up = false;
            n.restart_at_ms = back_in_ms.map(|d| now + d);
        }
        self.trace(format!("node {node}: CRASH"));
        if self.data.is_some() {
            // kill -9: the process and its connections are gone.
            self.process_gone(node, self.cfg.disconnect_on_crash);
        }
    }

    pub fn partition(&mut self, a: &[NodeId], b: &[NodeId], both_ways: bool, for_ms: u64) {
        self.partition = Some(Partition {
            from: a.iter().copied().collect(),
            to: b.iter().copied().collect(),
            both_ways,
            since_ms: self.now_ms,
            until_ms: self.now_ms + for_ms,
        });
        self.trace(format!("PARTITION {a:?} / {b:?}"));
    }

    pub fn heal(&mut self) {
        self.partition = None;
    }

    pub fn set_arbitrator_up(&mut self, up: bool) {
        self.arbit_up = up;
    }

    /// (phase, view) of a node.
    pub fn node(&self, id: NodeId) -> Option<(Phase, View, bool)> {
        self.nodes
            .get(&id)
            .map(|n| (n.qmgr.phase(), n.qmgr.view().clone(), n.up))
    }

    /// Disables the angel's automatic restarts of stopped nodes (for scripted tests).
    pub fn no_restarts(&mut self) {
        for n in self.nodes.values_mut() {
            n.restart_at_ms = None;
        }
    }
}
