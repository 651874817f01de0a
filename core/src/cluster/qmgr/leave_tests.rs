//! A graceful stop (`Leaving`) against a crash: a member that says it stops leaves the
//! view without arbitration and without being declared dead, so the survivor goes on
//! even with no arbitrator; the same departure unannounced is a failure to arbitrate
//! over. Two QMGRs driven by hand.

use super::join_tests::{cfg, collect, pump, tick};
use super::{MembershipConfig, Phase, Qmgr};
use crate::cluster::Outbox;
use crate::transport::Message;

/// Nodes 2 and 3 in one view, at the returned time.
fn formed(cfg: MembershipConfig, logs: &mut Vec<String>) -> ([Qmgr; 2], u64) {
    let mut nodes = [
        Qmgr::new(cfg.clone(), 2, 1, 11, 0),
        Qmgr::new(cfg, 3, 1, 12, 0),
    ];
    let mut now = 0;
    while nodes.iter().any(|q| q.phase() != Phase::Member) {
        assert!(now < 5_000, "no view formed: {logs:?}");
        let queue = tick(&mut nodes, now, logs);
        pump(&mut nodes, queue, now, |_, _| false, logs);
        now += 10;
    }
    (nodes, now)
}

/// Node 3 goes away (announced or not, then its connection closes); node 2 runs on
/// for a while. Returns node 2's phase and view, and the arbitration requests sent.
fn node_3_goes(
    cfg: MembershipConfig,
    announced: bool,
    logs: &mut Vec<String>,
) -> (Phase, Vec<u32>, usize) {
    let (mut nodes, mut now) = formed(cfg, logs);
    let mut queue = Vec::new();
    if announced {
        let mut out = Outbox::default();
        nodes[1].announce_leaving(&mut out);
        collect(3, out, &mut queue, logs);
    }
    assert_eq!(
        queue.len(),
        usize::from(announced),
        "one Leaving, to node 2"
    );
    let [two, _] = &mut nodes;
    for (from, to, msg) in queue {
        assert_eq!((from, to), (3, 2));
        let mut out = Outbox::default();
        two.on_message(now, from, msg, &mut out);
        collect(2, out, &mut Vec::new(), logs);
    }
    let mut out = Outbox::default();
    two.on_disconnect(now, 3, "closed", &mut out);
    collect(2, out, &mut Vec::new(), logs);
    let mut arbitration_requests = 0;
    for _ in 0..100 {
        now += 10;
        let mut out = Outbox::default();
        two.on_tick(now, &mut out);
        let mut sent = Vec::new();
        collect(2, out, &mut sent, logs);
        for (_, to, msg) in sent {
            match msg {
                Message::ArbitReq { .. } => arbitration_requests += 1,
                // The departed node hears nothing more; node 2's own view change
                // needs no one else.
                other => assert_ne!(to, 2, "{other:?}"),
            }
        }
    }
    (two.phase(), two.view().node_ids(), arbitration_requests)
}

#[test]
fn a_graceful_stop_leaves_the_view_without_arbitration_or_a_death() {
    let mut logs = Vec::new();
    let (phase, view, asked) = node_3_goes(cfg(), true, &mut logs);
    assert_eq!(
        (phase, view, asked),
        (Phase::Member, vec![2], 0),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|l| l == "2: Node 3 left the cluster (a graceful stop); continuing"),
        "{logs:?}"
    );
    assert!(
        !logs
            .iter()
            .any(|l| l.contains("declared dead") || l.contains("Lost contact")),
        "{logs:?}"
    );
    // Unannounced, the same departure is a failure: arbitration is asked for.
    let mut logs = Vec::new();
    let (_, _, asked) = node_3_goes(cfg(), false, &mut logs);
    assert_eq!(asked, 1, "{logs:?}");
    assert!(
        logs.iter()
            .any(|l| l == "2: Node 3 declared dead: the connection to it was lost (closed)"),
        "{logs:?}"
    );
}

#[test]
fn with_no_arbitrator_a_graceful_stop_leaves_the_survivor_running_and_a_crash_does_not() {
    let no_arbitrator = MembershipConfig {
        arbitrator: None,
        ..cfg()
    };
    let mut logs = Vec::new();
    let (phase, view, _) = node_3_goes(no_arbitrator.clone(), true, &mut logs);
    assert_eq!((phase, view), (Phase::Member, vec![2]), "{logs:?}");
    let mut logs = Vec::new();
    let (phase, _, _) = node_3_goes(no_arbitrator, false, &mut logs);
    assert_eq!(phase, Phase::Stopped, "{logs:?}");
    assert!(
        logs.iter()
            .any(|l| l.contains("no arbitrator is configured; shutting down")),
        "{logs:?}"
    );
}

#[test]
fn a_peer_stopping_with_the_cluster_changes_nothing_until_the_grace_ends() {
    let mut logs = Vec::new();
    let (mut nodes, mut now) = formed(cfg(), &mut logs);
    // Node 3 got ALL STOP (or SHUTDOWN, ALL RESTART) first; node 2's command is late.
    nodes[1].set_cluster_stopping();
    let mut out = Outbox::default();
    nodes[1].announce_leaving(&mut out);
    let mut queue = Vec::new();
    collect(3, out, &mut queue, &mut logs);
    assert!(
        matches!(
            queue.as_slice(),
            [(
                3,
                2,
                Message::Leaving {
                    cluster_stop: true,
                    ..
                }
            )]
        ),
        "{queue:?}"
    );
    let [two, _] = &mut nodes;
    for (from, _, msg) in queue {
        let mut out = Outbox::default();
        two.on_message(now, from, msg, &mut out);
        collect(2, out, &mut Vec::new(), &mut logs);
    }
    let mut out = Outbox::default();
    two.on_disconnect(now, 3, "closed", &mut out);
    collect(2, out, &mut Vec::new(), &mut logs);
    assert!(two.peer_departed(), "the stop's flush wait ends on it");
    let quiet_from = logs.len();
    let tick_for = |two: &mut Qmgr, until: u64, now: &mut u64, logs: &mut Vec<String>| {
        let mut asked = 0;
        while *now < until {
            *now += 10;
            let mut out = Outbox::default();
            two.on_tick(*now, &mut out);
            let mut sent = Vec::new();
            collect(2, out, &mut sent, logs);
            asked += sent
                .iter()
                .filter(|(_, _, m)| matches!(m, Message::ArbitReq { .. }))
                .count();
        }
        asked
    };
    // Within the grace: the view stays, nothing is logged or arbitrated.
    let asked = tick_for(
        two,
        now + super::CLUSTER_STOP_GRACE_MS - 100,
        &mut now,
        &mut logs,
    );
    assert_eq!(asked, 0);
    assert_eq!(two.view().node_ids(), vec![2, 3]);
    assert_eq!(two.phase(), Phase::Member);
    assert!(logs[quiet_from..].is_empty(), "{:?}", &logs[quiet_from..]);
    // No stop command came: the departure is handled, as a graceful one.
    let asked = tick_for(two, now + 1_000, &mut now, &mut logs);
    assert_eq!(asked, 0, "{logs:?}");
    assert_eq!(two.view().node_ids(), vec![2], "{logs:?}");
    assert!(
        logs.iter().any(|l| l.contains("got no stop command")),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|l| l == "2: Node 3 left the cluster (a graceful stop); continuing"),
        "{logs:?}"
    );
}
