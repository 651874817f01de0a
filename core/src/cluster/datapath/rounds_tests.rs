//! Transactions in rounds (NoCommit, then Commit or Rollback) through the data path
//! of four nodes (`mem_harness`): locks held between rounds, every round's writes
//! committed or rolled back together on every replica, a refusal in a later round
//! aborting the earlier ones, duplicates of a round ignored, and the ways an open
//! transaction ends without its client: the API's connection closing, a participant
//! failing, a node-restart copy's mark.

use super::mem_harness::*;
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, KeyOp, OpType, TcExec, TxnKey};

fn setup() -> (Harness, i64, i64) {
    let h = Harness::new();
    h.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=NDB");
    let (a, b) = h.keys_of_both_groups();
    let r = round(
        &h,
        2,
        0,
        TcExec::Commit,
        vec![write(a, "v0"), write(b, "v0")],
    );
    assert!(matches!(r, DataMsg::TcKeyConf { .. }), "{r:?}");
    (h, a, b)
}

/// Sends one round to node `tc` and waits for its answer.
fn round(h: &Harness, tc: NodeId, txn: u64, exec: TcExec, ops: Vec<KeyOp>) -> DataMsg {
    h.node(tc).on_message(
        API,
        DataMsg::TcKeyReq {
            req: 7,
            txn,
            exec,
            ops,
            ignore_errors: false,
        },
    );
    h.answer()
}

/// A NoCommit round that must succeed: the transaction's id.
fn open_round(h: &Harness, tc: NodeId, txn: u64, ops: Vec<KeyOp>) -> u64 {
    match round(h, tc, txn, TcExec::NoCommit, ops) {
        DataMsg::TcKeyConf { txn: id, gci, .. } => {
            assert_eq!(gci, 0, "a NoCommit round commits nothing");
            assert_ne!(id, 0);
            if txn != 0 {
                assert_eq!(id, txn, "a later round keeps the transaction's id");
            }
            id
        }
        other => panic!("NoCommit round: {other:?}"),
    }
}

fn refused(m: DataMsg) -> (u32, String) {
    match m {
        DataMsg::TcKeyRef { code, message, .. } => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn op(kind: OpType, k: i64, v: Option<&str>) -> KeyOp {
    KeyOp {
        op: kind,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(k)],
        values: v
            .map(|v| vec![(1, Value::Str(v.into()))])
            .unwrap_or_default(),
        columns: if kind.is_read() { vec![1] } else { Vec::new() },
    }
}

/// Every replica of `k` holds `want` now (no waiting: answers come after the
/// replicas changed).
fn assert_everywhere(h: &Harness, k: i64, want: Option<&str>) {
    let want = want.map(|s| Value::Str(s.into()));
    for n in h.replicas(k) {
        assert_eq!(h.local(n, k), want, "node {n}, key {k}");
    }
}

#[test]
fn rounds_hold_their_locks_and_commit_together_on_every_replica() {
    let (h, a, b) = setup();
    let t = open_round(&h, 2, 0, vec![write(a, "r1")]);
    // Round 2 reads its own write and locks b.
    let r = round(
        &h,
        2,
        t,
        TcExec::NoCommit,
        vec![
            op(OpType::ReadExclusive, a, None),
            op(OpType::ReadShared, b, None),
        ],
    );
    match r {
        DataMsg::TcKeyConf { results, .. } => assert_eq!(
            results,
            vec![
                Some(vec![Value::Str("r1".into())]),
                Some(vec![Value::Str("v0".into())])
            ]
        ),
        other => panic!("{other:?}"),
    }
    // Nothing is committed yet, anywhere.
    assert_everywhere(&h, a, Some("v0"));
    // Another transaction wants a's lock: it waits, then times out (266).
    let (code, _) = refused(round(&h, 3, 0, TcExec::Commit, vec![write(a, "other")]));
    assert_eq!(code, 266, "a's row lock is held between rounds");
    let r = round(&h, 2, t, TcExec::Commit, vec![write(b, "r3")]);
    let DataMsg::TcKeyConf { gci, txn, .. } = r else {
        panic!("commit: {r:?}")
    };
    assert!(gci > 0, "a commit has a GCI");
    assert_eq!(txn, t);
    assert_everywhere(&h, a, Some("r1"));
    assert_everywhere(&h, b, Some("r3"));
    // The transaction is over: another round is refused, and the locks are free.
    let (code, message) = refused(round(&h, 2, t, TcExec::NoCommit, vec![write(a, "x")]));
    assert_eq!(code, 4010, "{message}");
    let r = round(&h, 3, 0, TcExec::Commit, vec![write(a, "after")]);
    assert!(matches!(r, DataMsg::TcKeyConf { .. }), "{r:?}");
    assert_everywhere(&h, a, Some("after"));
    h.stop();
}

#[test]
fn rollback_undoes_every_round_and_frees_the_locks() {
    let (h, a, b) = setup();
    let t = open_round(&h, 2, 0, vec![write(a, "r1")]);
    open_round(&h, 2, t, vec![op(OpType::Delete, b, None)]);
    let r = round(&h, 2, t, TcExec::Rollback, Vec::new());
    assert!(
        matches!(r, DataMsg::TcKeyConf { gci: 0, ref results, .. } if results.is_empty()),
        "{r:?}"
    );
    assert_everywhere(&h, a, Some("v0"));
    assert_everywhere(&h, b, Some("v0"));
    let r = round(&h, 4, 0, TcExec::Commit, vec![write(a, "w"), write(b, "w")]);
    assert!(matches!(r, DataMsg::TcKeyConf { .. }), "{r:?}");
    assert_everywhere(&h, b, Some("w"));
    h.stop();
}

#[test]
fn a_refusal_in_a_later_round_aborts_the_earlier_rounds() {
    let (h, a, b) = setup();
    let t = open_round(&h, 2, 0, vec![write(a, "r1")]);
    let (code, _) = refused(round(
        &h,
        2,
        t,
        TcExec::NoCommit,
        vec![op(OpType::Insert, b, Some("dup"))],
    ));
    assert_eq!(code, 630, "b exists");
    assert_everywhere(&h, a, Some("v0"));
    let (code, _) = refused(round(&h, 2, t, TcExec::Commit, Vec::new()));
    assert_eq!(code, 4010, "the transaction ended with the refusal");
    let r = round(&h, 3, 0, TcExec::Commit, vec![write(a, "free")]);
    assert!(
        matches!(r, DataMsg::TcKeyConf { .. }),
        "a's lock was released: {r:?}"
    );
    h.stop();
}

#[test]
fn a_duplicate_round_at_a_primary_is_ignored() {
    let (h, a, _) = setup();
    let primary = h.replicas(a)[0];
    // The TC is another node, so that the primary's answer crosses the transport.
    let tc = [2, 3, 4, 5]
        .into_iter()
        .find(|&n| n != primary)
        .expect("another node");
    let txn = TxnKey { tc, id: 999_999 };
    let prepare = |k: i64, round: u32| DataMsg::LqhPrepare {
        txn,
        backup: false,
        round,
        ops: vec![(0, op(OpType::Insert, k, Some("ins")))],
        ignore_errors: false,
    };
    let fresh = (1000..)
        .find(|&k| h.replicas(k)[0] == primary)
        .expect("a key of the same primary");
    let answers = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = answers.clone();
    *h.router.filter.lock() = Some(Box::new(move |_from, to, m| {
        if let DataMsg::LqhPrepared {
            backup: false,
            code,
            ..
        } = m
            && to == tc
        {
            seen.lock().push(*code);
        }
        Verdict::Deliver
    }));
    h.node(primary).on_message(tc, prepare(fresh, 1));
    // The same round again (a network that duplicates): an insert run twice would
    // fail with 630 and abort the record.
    h.node(primary).on_message(tc, prepare(fresh, 1));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // As a TC does, commit once the round is prepared (backups included).
    while answers.lock().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no prepare answer");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    h.node(primary).on_message(
        tc,
        DataMsg::LqhCommit {
            txn,
            backup: false,
            gci_hi: 0,
        },
    );
    for n in h.replicas(fresh) {
        while h.local(n, fresh) != Some(Value::Str("ins".into())) {
            assert!(
                std::time::Instant::now() < deadline,
                "node {n} lacks the row"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    assert_eq!(*answers.lock(), vec![0], "one answer, a success");
    h.stop();
}

#[test]
fn the_api_leaving_ends_its_open_transaction() {
    let (h, a, _) = setup();
    let _t = open_round(&h, 2, 0, vec![write(a, "r1")]);
    h.node(2).on_disconnect(API);
    // The abort runs on the transaction's worker: a's lock comes free.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match round(&h, 3, 0, TcExec::Commit, vec![write(a, "next")]) {
            DataMsg::TcKeyConf { .. } => break,
            DataMsg::TcKeyRef { code: 266, .. } => {
                assert!(std::time::Instant::now() < deadline, "a stayed locked")
            }
            other => panic!("{other:?}"),
        }
    }
    assert_everywhere(&h, a, Some("next"));
    h.stop();
}

#[test]
fn a_participant_lost_while_open_aborts_and_the_next_round_hears_4010() {
    let (h, a, b) = setup();
    let (pa, pb) = (h.replicas(a)[0], h.replicas(b)[0]);
    let tc = pa;
    let t = open_round(&h, tc, 0, vec![write(a, "r1"), write(b, "r1")]);
    h.router.crashed.lock().insert(pb);
    let survivors: Vec<NodeId> = [2, 3, 4, 5].into_iter().filter(|&n| n != pb).collect();
    for &n in &survivors {
        h.node(n).on_view(&view(2, &survivors));
    }
    let (code, message) = refused(round(&h, tc, t, TcExec::Commit, Vec::new()));
    assert_eq!(code, 4010, "{message}");
    assert!(message.contains(&format!("data node {pb}")), "{message}");
    for n in h.replicas(a) {
        assert_eq!(h.local(n, a), Some(Value::Str("v0".into())), "node {n}");
    }
    h.stop();
}

#[test]
fn a_copy_mark_ends_an_idle_open_transaction_and_refuses_a_straddling_round() {
    let (h, a, b) = setup();
    let (pa, pb) = (h.replicas(a)[0], h.replicas(b)[0]);
    // Transaction 1 stays idle after its first round; transaction 2 tries another
    // round after the mark.
    let t1 = open_round(&h, pa, 0, vec![write(a, "t1")]);
    let t2 = open_round(&h, pb, 0, vec![write(b, "t2")]);
    let joiner = h.replicas(b)[1];
    for n in [pa, pb] {
        h.node(n).on_copy_mark(joiner, joiner, true);
    }
    let (code, message) = refused(round(&h, pb, t2, TcExec::NoCommit, vec![write(b, "again")]));
    assert_eq!(code, 4010, "{message}");
    assert!(message.contains("node restart copy"), "{message}");
    // Past the grace the mark asks t1's TC to end it.
    let grace = super::copy_out::MARK_OPEN_GRACE_MS;
    h.node(pa).on_tick(2 + grace);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while h.node(pa).primary_records().iter().any(|(t, _)| t.id == t1) {
        assert!(std::time::Instant::now() < deadline, "t1 still open");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (code, message) = refused(round(&h, pa, t1, TcExec::Commit, Vec::new()));
    assert_eq!(code, 4010, "{message}");
    assert!(message.contains("waited for this transaction"), "{message}");
    assert_everywhere(&h, a, Some("v0"));
    assert_everywhere(&h, b, Some("v0"));
    h.stop();
}

/// A round with AO_IgnoreError (`TcKeyReq::ignore_errors`): a duplicate insert and an
/// update of a missing row fail alone, reported by their index in the round; the
/// round's other writes, in both node groups, commit on every replica; the failed
/// operations change nothing. Without the option the same duplicate aborts the whole
/// transaction.
#[test]
fn ignore_errors_fails_the_operations_alone_and_commits_the_others() {
    let (h, a, b) = setup();
    let fresh = (1000..)
        .find(|&k| h.replicas(k) == h.replicas(a))
        .expect("a key of a's group");
    let ops = vec![
        op(OpType::Insert, a, Some("dup")),
        op(OpType::Update, b, Some("b1")),
        op(OpType::Update, 777_777, Some("none")),
        op(OpType::Insert, fresh, Some("new")),
    ];
    let send = |h: &Harness, txn: u64, exec: TcExec, ops: Vec<KeyOp>, ignore_errors: bool| {
        h.node(2).on_message(
            API,
            DataMsg::TcKeyReq {
                req: 8,
                txn,
                exec,
                ops,
                ignore_errors,
            },
        );
        h.answer()
    };
    // A NoCommit round first: the failures are reported, the transaction stays open.
    let r = send(&h, 0, TcExec::NoCommit, ops, true);
    let DataMsg::TcKeyConf { txn, failed, .. } = r else {
        panic!("{r:?}")
    };
    let mut failed: Vec<(u32, u32)> = failed.iter().map(|f| (f.op, f.code)).collect();
    failed.sort_unstable();
    assert_eq!(failed, vec![(0, 630), (2, 626)]);
    assert_everywhere(&h, b, Some("v0"));
    let r = send(&h, txn, TcExec::Commit, Vec::new(), true);
    let DataMsg::TcKeyConf { gci, failed, .. } = r else {
        panic!("{r:?}")
    };
    assert!(gci > 0 && failed.is_empty(), "{failed:?}");
    assert_everywhere(&h, a, Some("v0"));
    assert_everywhere(&h, b, Some("b1"));
    assert_everywhere(&h, fresh, Some("new"));
    assert_everywhere(&h, 777_777, None);
    // Without AO_IgnoreError the duplicate refuses the round and nothing of it stays.
    let other = fresh + 1_000_000;
    let r = send(
        &h,
        0,
        TcExec::Commit,
        vec![
            op(OpType::Insert, other, Some("x")),
            op(OpType::Insert, a, Some("dup")),
        ],
        false,
    );
    assert_eq!(refused(r).0, 630);
    assert_everywhere(&h, other, None);
}
