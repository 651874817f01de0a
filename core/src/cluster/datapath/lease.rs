//! Read leases: what keeps a data node cut off from its node group from serving rows
//! the rest of the cluster has already changed (NDB has no such guard: its committed
//! reads may be stale while a partition is being detected).
//!
//! - Every `lease_ms / 4` a node sends `LeasePing{seq}` to the other live, up-to-date
//!   nodes of its group; a node answers `LeasePong{seq}` while the pinging node is in
//!   its view. A pong gives a lease until *the ping's send time* + `lease_ms` (on the
//!   pinging node's clock: a late answer never stretches it).
//! - A node serves reads and prepares as a primary ([`DataPath::check_serving`]) only
//!   while it holds a lease from every such peer; else 4035 (temporary: the client
//!   retries, at another replica).
//! - A node whose view drops a peer it answered pongs to, and that did not close its
//!   connection (a hang or a partition, not a dead process), *fences* that peer's
//!   group: it serves none of its partitions until the last pong it sent that peer +
//!   `lease_ms` + [`CLOCK_SLACK_MS`] — by then the peer's lease has run out. A peer
//!   whose connection closed (the process died: kill -9, a crash) is not waited for.
//!
//! `lease_ms` is HeartbeatIntervalDbDb: a failure detected by missed heartbeats costs
//! one more interval; one detected by a closed connection costs nothing. The rule
//! assumes clocks that advance at about the same rate (not synchronised clocks), and a
//! closed connection seen by both ends; a half-open TCP connection could leave a
//! window of one interval.
//!
//! Lock order: `leases` is a leaf.

use super::DataPath;
use crate::error::{NdbError, Result};
use crate::transport::NodeId;
use crate::transport::data::DataMsg;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Pings remembered for their send times.
pub const PINGS_KEPT: usize = 64;
/// How far a node's tick clock may lag the moment it sends (one tick, and some).
pub const CLOCK_SLACK_MS: u64 = 20;

/// The lease state of one data node.
#[derive(Default)]
pub(crate) struct Leases {
    next_ping_ms: u64,
    next_seq: u64,
    /// (seq, sent at) of recent pings, oldest first.
    pings: VecDeque<(u64, u64)>,
    /// A lease from each peer runs until (this node's clock).
    granted_until_ms: BTreeMap<NodeId, u64>,
    /// When this node last answered each peer's ping.
    last_pong_ms: BTreeMap<NodeId, u64>,
    /// Failed peers whose group is fenced, until when.
    fences_ms: BTreeMap<NodeId, u64>,
    /// Peers whose connection closed since the last view.
    closed: BTreeSet<NodeId>,
}

impl DataPath {
    /// The other live, up-to-date nodes of this node's group.
    fn lease_peers(&self) -> Vec<NodeId> {
        let m = self.members.read();
        self.groups
            .iter()
            .find(|g| g.contains(&self.me))
            .map(|g| {
                g.iter()
                    .copied()
                    .filter(|&n| n != self.me && m.live.contains(&n) && m.ready.contains_key(&n))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The tick's part: pings when due, fences that ended.
    pub(super) fn lease_tick(&self, now_ms: u64) {
        // The membership is read before the lease lock is taken (a leaf).
        let peers = self.lease_peers();
        let seq = {
            let mut l = self.leases.lock();
            l.fences_ms.retain(|_, &mut until| until > now_ms);
            if now_ms < l.next_ping_ms {
                return;
            }
            l.next_ping_ms = now_ms + (self.lease_ms / 4).max(1);
            l.next_seq += 1;
            let seq = l.next_seq;
            l.pings.push_back((seq, now_ms));
            if l.pings.len() > PINGS_KEPT {
                l.pings.pop_front();
            }
            seq
        };
        for p in peers {
            self.send(p, DataMsg::LeasePing { seq });
        }
    }

    pub(super) fn on_lease_ping(&self, from: NodeId, seq: u64) {
        if !self.is_live(from) {
            return;
        }
        self.leases.lock().last_pong_ms.insert(from, self.now_ms());
        self.send(from, DataMsg::LeasePong { seq });
    }

    pub(super) fn on_lease_pong(&self, from: NodeId, seq: u64) {
        let lease = self.lease_ms;
        let mut l = self.leases.lock();
        if let Some(&(_, sent)) = l.pings.iter().find(|(s, _)| *s == seq) {
            let until = l.granted_until_ms.entry(from).or_insert(0);
            *until = (*until).max(sent + lease);
        }
    }

    /// A view change: fence the groups of peers that failed silently; an empty view
    /// (this node left) forgets everything.
    pub(super) fn lease_view(&self, failed: &[NodeId], left: bool) {
        let now = self.now_ms();
        let lease = self.lease_ms;
        let mut l = self.leases.lock();
        if left {
            *l = Leases::default();
            return;
        }
        // New peers want a lease at once: ping at the next tick.
        l.next_ping_ms = 0;
        for f in failed {
            l.granted_until_ms.remove(f);
            let pong = l.last_pong_ms.remove(f);
            if l.closed.remove(f) {
                continue;
            }
            if let Some(t) = pong {
                let until = t + lease + CLOCK_SLACK_MS;
                if until > now {
                    l.fences_ms.insert(*f, until);
                }
            }
        }
    }

    /// The connection to `peer` closed (its process ended, or the link broke: then
    /// this node's lease from it is void as well).
    pub(super) fn lease_closed(&self, peer: NodeId) {
        let mut l = self.leases.lock();
        l.closed.insert(peer);
        l.granted_until_ms.remove(&peer);
    }

    /// Ok when this node may serve its replicas' rows now (see the module notes).
    pub(crate) fn check_serving(&self) -> Result<()> {
        let now = self.now_ms();
        let peers = self.lease_peers();
        let l = self.leases.lock();
        for p in peers {
            if l.granted_until_ms.get(&p).is_none_or(|&u| u <= now) {
                return Err(self.not_serving(format!(
                    "data node {} holds no read lease from node {p} of its group",
                    self.me
                )));
            }
        }
        let my_group = self.groups.iter().find(|g| g.contains(&self.me));
        if let Some((f, until)) = l
            .fences_ms
            .iter()
            .find(|(f, until)| **until > now && my_group.is_some_and(|g| g.contains(f)))
        {
            return Err(self.not_serving(format!(
                "data node {} takes over from node {f}, which failed silently: it waits until node {f}'s read lease has run out ({} ms)",
                self.me,
                until - now
            )));
        }
        Ok(())
    }

    fn not_serving(&self, why: String) -> NdbError {
        super::not_ready(self.me).detail(why)
    }
}
