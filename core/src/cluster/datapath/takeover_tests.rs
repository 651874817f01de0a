//! The data path's failure handling with the network in the test's hands: data paths
//! of four nodes (two node groups) joined by an in-memory transport that can cut a
//! node off at a chosen message, then a view without it. A TC that dies after some
//! participants were told to commit must leave every replica committed; one that dies
//! before any was told, every replica aborted; a participant lost during the commit is
//! replaced by its backup. New work over an overloaded connection is refused with
//! 1218 and changes nothing.

use super::mem_harness::*;
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, KeyOp};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

fn begin(h: &Harness, tc: NodeId, ops: Vec<KeyOp>) {
    h.node(tc).on_message(
        API,
        DataMsg::TcKeyReq {
            req: 7,
            txn: 0,
            exec: crate::transport::data::TcExec::Commit,
            ops,
            ignore_errors: false,
        },
    );
}

fn setup() -> (Harness, i64, i64) {
    let h = Harness::new();
    h.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=NDB");
    let (a, b) = h.keys_of_both_groups();
    begin(&h, 2, vec![write(a, "v0"), write(b, "v0")]);
    assert!(matches!(h.answer(), DataMsg::TcKeyConf { .. }));
    (h, a, b)
}

/// A node that is the primary of neither key (both participants are remote to it).
fn outsider(h: &Harness, a: i64, b: i64) -> NodeId {
    let (pa, pb) = (h.replicas(a)[0], h.replicas(b)[0]);
    [2, 3, 4, 5]
        .into_iter()
        .find(|&n| n != pa && n != pb)
        .expect("four nodes, two primaries")
}

#[test]
fn a_tc_that_dies_after_one_commit_leaves_every_replica_committed() {
    let (h, a, b) = setup();
    // The TC (the primary of neither key) is cut off right after its first
    // LqhCommit went out: that participant commits, the other is prepared when the TC
    // is declared dead and must learn the decision by takeover.
    let tc = outsider(&h, a, b);
    let sent = Arc::new(Mutex::new(0u32));
    let s2 = sent.clone();
    *h.router.filter.lock() = Some(Box::new(move |from, _to, m| {
        if from == tc && matches!(m, DataMsg::LqhCommit { backup: false, .. }) {
            let mut n = s2.lock();
            *n += 1;
            if *n == 2 {
                return Verdict::CrashSender;
            }
        }
        Verdict::Deliver
    }));
    begin(&h, tc, vec![write(a, "v1"), write(b, "v1")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.router.crashed.lock().contains(&tc) {
        assert!(
            std::time::Instant::now() < deadline,
            "the TC never committed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let survivors: Vec<NodeId> = [2, 3, 4, 5].into_iter().filter(|&n| n != tc).collect();
    for &n in &survivors {
        // The process died: its connections closed (no read-lease fence).
        h.node(n).on_disconnect(tc);
        h.node(n).on_view(&view(2, &survivors));
    }
    h.wait_value(a, Some("v1"), tc);
    h.wait_value(b, Some("v1"), tc);
    h.stop();
}

#[test]
fn a_tc_that_dies_before_any_commit_leaves_every_replica_aborted() {
    let (h, a, b) = setup();
    let tc = outsider(&h, a, b);
    *h.router.filter.lock() = Some(Box::new(move |from, _to, m| {
        if from == tc && matches!(m, DataMsg::LqhCommit { backup: false, .. }) {
            return Verdict::CrashSender;
        }
        Verdict::Deliver
    }));
    begin(&h, tc, vec![write(a, "v2"), write(b, "v2")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.router.crashed.lock().contains(&tc) {
        assert!(std::time::Instant::now() < deadline, "the TC never decided");
        std::thread::sleep(Duration::from_millis(5));
    }
    let survivors: Vec<NodeId> = [2, 3, 4, 5].into_iter().filter(|&n| n != tc).collect();
    for &n in &survivors {
        // The process died: its connections closed (no read-lease fence).
        h.node(n).on_disconnect(tc);
        h.node(n).on_view(&view(2, &survivors));
    }
    // Prepared everywhere, committed nowhere: the old value stays, and the rows are
    // not left locked (a new transaction commits).
    std::thread::sleep(Duration::from_millis(200));
    h.wait_value(a, Some("v0"), tc);
    h.wait_value(b, Some("v0"), tc);
    *h.router.filter.lock() = None;
    let live_tc = survivors[0];
    begin(&h, live_tc, vec![write(a, "v3"), write(b, "v3")]);
    match h.answer() {
        DataMsg::TcKeyConf { .. } => {}
        other => panic!("{other:?}"),
    }
    h.wait_value(a, Some("v3"), tc);
    h.wait_value(b, Some("v3"), tc);

    h.stop();
}

#[test]
fn a_primary_lost_during_the_commit_is_replaced_by_its_backup() {
    let (h, a, b) = setup();
    // Key a's primary is cut off when it is told to commit (before it tells its
    // backup): the TC has decided, so the backup must commit and the API hear success.
    let pa = h.replicas(a)[0];
    let tc = h
        .replicas(b)
        .into_iter()
        .find(|&n| n != pa)
        .expect("a TC that survives");
    *h.router.filter.lock() = Some(Box::new(move |from, _to, m| {
        if from == pa && matches!(m, DataMsg::LqhCommit { backup: true, .. }) {
            return Verdict::CrashSender;
        }
        Verdict::Deliver
    }));
    begin(&h, tc, vec![write(a, "v4"), write(b, "v4")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.router.crashed.lock().contains(&pa) {
        assert!(
            std::time::Instant::now() < deadline,
            "the primary never committed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let survivors: Vec<NodeId> = [2, 3, 4, 5].into_iter().filter(|&n| n != pa).collect();
    for &n in &survivors {
        // The process died: its connections closed (no read-lease fence).
        h.node(n).on_disconnect(pa);
        h.node(n).on_view(&view(2, &survivors));
    }
    match h.answer() {
        DataMsg::TcKeyConf { .. } => {}
        other => panic!("the API must hear the commit: {other:?}"),
    }
    h.wait_value(a, Some("v4"), pa);
    h.wait_value(b, Some("v4"), pa);
    h.stop();
}

#[test]
fn new_work_over_an_overloaded_connection_gets_1218_and_changes_nothing() {
    let (h, a, b) = setup();
    let tc = outsider(&h, a, b);
    let [primary, backup] = h.replicas(a)[..] else {
        panic!("two replicas")
    };
    let code = |m: DataMsg| match m {
        DataMsg::TcKeyRef { code, class, .. } => {
            assert_eq!(
                class,
                crate::error::ErrorClassification::OverloadError as u8
            );
            code
        }
        DataMsg::ReadConf { code, .. } => code,
        other => panic!("unexpected {other:?}"),
    };
    // The primary's connection to its backup: the primary refuses the prepare and
    // the TC aborts everywhere.
    h.router.overloaded.lock().insert((primary, backup));
    begin(&h, tc, vec![write(a, "v1"), write(b, "v1")]);
    assert_eq!(code(h.answer()), 1218);
    // The TC's connection to the API node: refused before anything runs.
    h.router.overloaded.lock().clear();
    h.router.overloaded.lock().insert((tc, API));
    begin(&h, tc, vec![write(a, "v2")]);
    assert_eq!(code(h.answer()), 1218);
    // A read at the primary whose connection to the API node is overloaded.
    h.router.overloaded.lock().insert((primary, API));
    let read = DataMsg::ReadReq {
        req: 9,
        database: DB.into(),
        table: "kv".into(),
        columns: vec![1],
        keys: vec![Value::Int(a)],
    };
    h.node(primary).on_message(API, read.clone());
    assert_eq!(code(h.answer()), 1218);
    for n in h.replicas(a).into_iter().chain(h.replicas(b)) {
        assert_eq!(
            h.local(n, a).or(h.local(n, b)),
            Some(Value::Str("v0".into()))
        );
    }
    // Once the buffers drained, the same work goes through.
    h.router.overloaded.lock().clear();
    begin(&h, tc, vec![write(a, "v3"), write(b, "v3")]);
    assert!(matches!(h.answer(), DataMsg::TcKeyConf { .. }));
    h.node(primary).on_message(API, read);
    match h.answer() {
        DataMsg::ReadConf {
            code: 0, values, ..
        } => {
            assert_eq!(values, vec![Value::Str("v3".into())])
        }
        other => panic!("unexpected {other:?}"),
    }
    h.wait_value(a, Some("v3"), 0);
    h.wait_value(b, Some("v3"), 0);
    h.stop();
}
