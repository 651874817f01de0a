//! A join request that arrives after its sender was admitted: its own (stale), or a
//! new life's (a restart). Two QMGRs driven by hand, so the order of delivery is the
//! test's.

use super::{Arbitration, MembershipConfig, Phase, Qmgr};
use crate::cluster::{Event, Outbox};
use crate::transport::{Message, NodeId};

pub(super) fn cfg() -> MembershipConfig {
    MembershipConfig {
        data_nodes: vec![(2, 0), (3, 0)],
        heartbeat_interval_ms: 100,
        arbitration: Arbitration::Default,
        arbitration_timeout_ms: 1000,
        arbitrator: Some(1),
        start_partial_timeout_ms: 30_000,
    }
}

/// Delivers every message between the two until none is left, at `now_ms`; the
/// messages of `held` (from, predicate) are kept back and returned.
pub(super) fn pump(
    nodes: &mut [Qmgr; 2],
    mut queue: Vec<(NodeId, NodeId, Message)>,
    now_ms: u64,
    hold: impl Fn(NodeId, &Message) -> bool,
    logs: &mut Vec<String>,
) -> Vec<(NodeId, NodeId, Message)> {
    let mut held = Vec::new();
    let mut steps = 0;
    while let Some((from, to, msg)) = (!queue.is_empty()).then(|| queue.remove(0)) {
        steps += 1;
        assert!(steps < 10_000, "messages never settle");
        if hold(from, &msg) {
            held.push((from, to, msg));
            continue;
        }
        let Some(q) = nodes.iter_mut().find(|q| q.node_id() == to) else {
            continue; // the arbitrator: not in this test
        };
        let mut out = Outbox::default();
        q.on_message(now_ms, from, msg, &mut out);
        collect(to, out, &mut queue, logs);
    }
    held
}

pub(super) fn collect(
    me: NodeId,
    out: Outbox,
    queue: &mut Vec<(NodeId, NodeId, Message)>,
    logs: &mut Vec<String>,
) {
    for e in out.events {
        if let Event::Log { text, .. } = e {
            logs.push(format!("{me}: {text}"));
        }
    }
    queue.extend(out.sends.into_iter().map(|(to, m)| (me, to, m)));
}

pub(super) fn tick(
    nodes: &mut [Qmgr; 2],
    now_ms: u64,
    logs: &mut Vec<String>,
) -> Vec<(NodeId, NodeId, Message)> {
    let mut queue = Vec::new();
    for q in nodes.iter_mut() {
        let mut out = Outbox::default();
        q.on_tick(now_ms, &mut out);
        let me = q.node_id();
        collect(me, out, &mut queue, logs);
    }
    queue
}

#[test]
fn a_join_request_still_on_the_wire_at_admission_is_ignored_a_new_lifes_is_not() {
    let mut nodes = [Qmgr::new(cfg(), 2, 1, 11, 0), Qmgr::new(cfg(), 3, 1, 12, 0)];
    let mut logs = Vec::new();
    // Node 3's first join request is kept on the wire while the two form a view.
    let mut stale = Vec::new();
    let mut now = 0;
    while nodes.iter().any(|q| q.phase() != Phase::Member) {
        assert!(now < 5_000, "no view formed: {logs:?}");
        let queue = tick(&mut nodes, now, &mut logs);
        let keep = stale.is_empty();
        stale.extend(pump(
            &mut nodes,
            queue,
            now,
            |from, m| keep && from == 3 && matches!(m, Message::JoinReq { .. }),
            &mut logs,
        ));
        now += 10;
    }
    assert_eq!(stale.len(), 1, "{logs:?}");
    assert_eq!(nodes[0].view().node_ids(), vec![2, 3]);
    // Delivered after node 2 admitted node 3 and before node 3's first heartbeat: its
    // own request, not a restart.
    pump(&mut nodes, stale, now, |_, _| false, &mut logs);
    let queue = tick(&mut nodes, now, &mut logs);
    pump(&mut nodes, queue, now, |_, _| false, &mut logs);
    assert!(
        !logs.iter().any(|l| l.contains("restarted")),
        "a stale join request declared node 3 dead: {logs:?}"
    );
    // Heartbeats both ways for a while: the view stays.
    for _ in 0..50 {
        now += 10;
        let queue = tick(&mut nodes, now, &mut logs);
        pump(&mut nodes, queue, now, |_, _| false, &mut logs);
    }
    assert_eq!(nodes[0].view().node_ids(), vec![2, 3], "{logs:?}");
    assert_eq!(nodes[1].phase(), Phase::Member);
    // Node 3 has beaten as a member: a join request now is a new life's.
    let mut out = Outbox::default();
    nodes[0].on_message(now, 3, Message::JoinReq { incarnation: 2 }, &mut out);
    collect(2, out, &mut Vec::new(), &mut logs);
    assert!(
        logs.iter()
            .any(|l| l == "2: Node 3 restarted: its earlier life is declared dead"),
        "{logs:?}"
    );
}
