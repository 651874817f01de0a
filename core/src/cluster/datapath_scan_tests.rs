//! Scans over TCP on loopback (`datapath/scan.rs`, `remote_scan.rs`): a table scan and
//! ordered-index range scans of a table spread over two node groups return exactly
//! the model's rows (sorted ones in index order, both directions, with bounds), every
//! batch size works, errors come back with NDB's codes, the node's scan limit holds,
//! scans a client drops or leaves behind are closed at the nodes, a scan whose
//! node is killed fails with a temporary error that a new scan gets past, and a scan of
//! a transaction sees its uncommitted changes on whichever replica it reads.

use super::datapath_tests::{DB, cluster};
use super::remote::RemoteCluster;
use super::remote_scan::RemoteScanSpec;
use crate::schema::Value;
use crate::transport::data::{KeyOp, OpType};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const ROWS: i64 = 600;

/// A bound on `g`: value and whether it is included.
type Bound = Option<(i64, bool)>;

fn grp(id: i64) -> i64 {
    (id * 7919) % 37
}

/// `t (id INT PK, g INT, name VARCHAR(16), INDEX ig (g))` with ROWS rows.
fn load(api: &Arc<RemoteCluster>) -> BTreeMap<i64, (i64, String)> {
    api.sql(
        DB,
        "CREATE TABLE t (id INT PRIMARY KEY, g INT NOT NULL, name VARCHAR(16), INDEX ig (g)) ENGINE=NDB",
    )
    .expect("create");
    let mut model = BTreeMap::new();
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(100) {
        let ops = chunk
            .iter()
            .map(|&id| {
                let name = format!("n{id}");
                model.insert(id, (grp(id), name.clone()));
                KeyOp {
                    op: OpType::Insert,
                    database: DB.into(),
                    table: "t".into(),
                    key: vec![Value::Int(id)],
                    values: vec![(1, Value::Int(grp(id))), (2, Value::Str(name))],
                    columns: Vec::new(),
                }
            })
            .collect();
        api.execute(ops).expect("insert");
    }
    model
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an int: {other:?}"),
    }
}

fn index_spec(low: Bound, high: Bound, desc: bool) -> RemoteScanSpec {
    RemoteScanSpec {
        index: Some("ig".into()),
        low: low.map(|(v, inc)| (vec![Value::Int(v)], inc)),
        high: high.map(|(v, inc)| (vec![Value::Int(v)], inc)),
        descending: desc,
        sorted: true,
        columns: vec![0, 1],
        batch_rows: 7,
        ..RemoteScanSpec::table(DB, "t")
    }
}

#[test]
fn scans_over_two_node_groups_return_the_models_rows() {
    let (_m, nodes, api) = cluster(4, 2);
    let model = load(&api);
    // Both node groups hold rows (else the test would not cover the merge).
    for n in &nodes {
        let t = n
            .data()
            .expect("data path")
            .engine
            .inner()
            .table(DB, "t")
            .expect("t");
        assert!(t.row_count() > 0, "node {} holds rows", n.node_id);
    }

    // Table scans, every column, at several batch sizes.
    for batch in [1, 7, 256, 992] {
        let got = scanned(
            &api,
            RemoteScanSpec {
                batch_rows: batch,
                ..RemoteScanSpec::table(DB, "t")
            },
        );
        assert_eq!(got.len(), ROWS as usize, "batch {batch}");
        assert_eq!(got, model, "batch {batch}");
    }

    // Sorted index scans: the model's rows in (g) order, within the bounds.
    let cases: [(Bound, Bound); 5] = [
        (None, None),
        (Some((5, true)), Some((20, true))),
        (Some((5, false)), Some((20, false))),
        (Some((30, true)), None),
        (Some((40, true)), None),
    ];
    for (low, high) in cases {
        for desc in [false, true] {
            let rows = api
                .scan_all(index_spec(low, high, desc))
                .expect("index scan");
            let mut want: Vec<(i64, i64)> = model
                .iter()
                .map(|(&id, (g, _))| (*g, id))
                .filter(|&(g, _)| {
                    low.is_none_or(|(v, inc)| if inc { g >= v } else { g > v })
                        && high.is_none_or(|(v, inc)| if inc { g <= v } else { g < v })
                })
                .collect();
            let gs: Vec<i64> = rows.iter().map(|r| int(&r[1])).collect();
            let mut sorted_gs = gs.clone();
            sorted_gs.sort_unstable();
            if desc {
                sorted_gs.reverse();
            }
            assert_eq!(
                gs, sorted_gs,
                "{low:?}..{high:?} desc {desc}: in index order"
            );
            assert!(rows.iter().all(|r| r.len() == 2), "the columns asked for");
            let mut got: Vec<(i64, i64)> = rows.iter().map(|r| (int(&r[1]), int(&r[0]))).collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "{low:?}..{high:?} desc {desc}");
        }
    }

    // An unsorted index scan returns the same set.
    let mut spec = index_spec(Some((10, true)), Some((12, true)), false);
    spec.sorted = false;
    let mut got: Vec<i64> = api
        .scan_all(spec)
        .expect("unsorted")
        .iter()
        .map(|r| int(&r[0]))
        .collect();
    got.sort_unstable();
    let want: Vec<i64> = model
        .iter()
        .filter(|(_, (g, _))| (10..=12).contains(g))
        .map(|(&id, _)| id)
        .collect();
    assert_eq!(got, want);

    // A scan sees a delete acknowledged before it began.
    api.execute(vec![KeyOp {
        op: OpType::Delete,
        database: DB.into(),
        table: "t".into(),
        key: vec![Value::Int(3)],
        values: Vec::new(),
        columns: Vec::new(),
    }])
    .expect("delete");
    let rows = api.scan_all(RemoteScanSpec::table(DB, "t")).expect("scan");
    assert_eq!(rows.len(), ROWS as usize - 1);
    assert!(rows.iter().all(|r| int(&r[0]) != 3));

    // Nothing stays open at the nodes.
    std::thread::sleep(Duration::from_millis(100));
    for n in &nodes {
        assert_eq!(
            n.data().expect("data path").open_scans(),
            0,
            "node {}",
            n.node_id
        );
    }
}

#[test]
fn scan_errors_limits_and_closing() {
    let (_m, nodes, api) = cluster(2, 2);
    load(&api);
    let code = |spec: RemoteScanSpec| match api.scan_all(spec) {
        Err(e) => e.code,
        Ok(r) => panic!("scan succeeded with {} rows", r.len()),
    };
    assert_eq!(
        code(RemoteScanSpec::table(DB, "nope")),
        723,
        "no such table"
    );
    let mut s = index_spec(None, None, false);
    s.index = Some("nope".into());
    assert_eq!(code(s), 4243, "no such index");
    let mut s = RemoteScanSpec::table(DB, "t");
    s.columns = vec![9];
    assert_eq!(code(s), 4118, "no such column");
    let mut s = RemoteScanSpec::table(DB, "t");
    s.batch_rows = 0;
    assert_eq!(code(s), 4118, "batch size 0");
    let mut s = RemoteScanSpec::table(DB, "t");
    s.sorted = true;
    assert_eq!(code(s), 4118, "sorting without an index");
    let mut s = index_spec(None, None, false);
    s.low = Some((vec![Value::Int(1), Value::Int(2)], true));
    assert_eq!(code(s), 4118, "a bound longer than the index");
    let mut s = index_spec(None, None, false);
    s.low = Some((vec![Value::Str("not a number".into())], true));
    let e = api
        .scan(s)
        .err()
        .expect("opening fails on a bound of the wrong type");
    assert!(!e.is_temporary(), "{e}");

    // Open scans (one batch read) stay open at the node until dropped.
    let spec = RemoteScanSpec {
        batch_rows: 10,
        ..RemoteScanSpec::table(DB, "t")
    };
    let mut open = Vec::new();
    for _ in 0..5 {
        let mut s = api.scan(spec.clone()).expect("open");
        assert!(s.next_row().expect("row").is_some());
        open.push(s);
    }
    // (A node takes a scan out of its map while it reads the batch asked for ahead.)
    super::process_tests::wait_until("one node holds each scan", 5, || {
        nodes
            .iter()
            .map(|n| n.data().expect("data path").open_scans())
            .sum::<usize>()
            == 5
    });
    drop(open);
    super::process_tests::wait_until("dropped scans closed at the nodes", 5, || {
        nodes
            .iter()
            .all(|n| n.data().expect("data path").open_scans() == 0)
    });

    // The limit: MaxNoOfConcurrentScans per node, then 488 (temporary).
    let max = super::datapath::MAX_OPEN_SCANS;
    let mut open = Vec::new();
    let mut refused = None;
    for _ in 0..(2 * max + 2) {
        match api.scan(spec.clone()) {
            Ok(s) => open.push(s),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("the limit was reached");
    assert_eq!(e.code, 488, "{e}");
    assert!(e.is_temporary());
    super::process_tests::wait_until("a node holds the maximum", 5, || {
        nodes
            .iter()
            .any(|n| n.data().expect("data path").open_scans() == max)
    });
    drop(open);
    super::process_tests::wait_until("the refused round's scans closed", 5, || {
        nodes
            .iter()
            .all(|n| n.data().expect("data path").open_scans() == 0)
    });

    // A scan the API leaves without fetching is closed after SCAN_IDLE_MS of the
    // node's clock; its next fetch says so (296).
    let answered: Vec<u64> = nodes
        .iter()
        .map(|n| n.data().expect("data path").scan_next_answered())
        .collect();
    let mut s = api.scan(spec.clone()).expect("open");
    for _ in 0..10 {
        assert!(s.next_row().expect("row").is_some());
    }
    // Once the batch asked for ahead is read (its ScanNextReq answered: before that the
    // holder may not have taken the scan out yet, or have it out), the holder alone
    // has the scan and nothing else touches it until the next fetch.
    let holder = s_node(&s);
    super::process_tests::wait_until("the holder alone has the scan", 5, || {
        nodes.iter().zip(&answered).all(|(n, before)| {
            let d = n.data().expect("data path");
            if n.node_id == holder {
                d.scan_next_answered() > *before && d.open_scans() == 1
            } else {
                d.open_scans() == 0
            }
        })
    });
    for n in &nodes {
        let d = n.data().expect("data path");
        // The node's clock moves while the test runs: half the idle time later
        // the scan is kept, the full idle time later it is closed.
        d.scan_expire(d.now_ms() + super::datapath::SCAN_IDLE_MS / 2);
        assert_eq!(d.open_scans(), usize::from(holder == n.node_id));
        d.scan_expire(d.now_ms() + super::datapath::SCAN_IDLE_MS);
    }
    assert_eq!(
        nodes
            .iter()
            .map(|n| n.data().expect("data path").open_scans())
            .sum::<usize>(),
        0
    );
    let mut e = None;
    for _ in 0..ROWS {
        match s.next_row() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the scan ended normally"),
            Err(err) => {
                e = Some(err);
                break;
            }
        }
    }
    assert_eq!(e.expect("an error").code, 296);
    assert_eq!(s.next_row().expect_err("closed").code, 4120);
}

fn s_node(s: &super::remote_scan::RemoteScan) -> u32 {
    s.nodes_holding()[0]
}

#[test]
fn a_scan_whose_node_is_killed_fails_temporarily_and_a_new_one_succeeds() {
    let (_m, mut nodes, api) = cluster(2, 2);
    let model = load(&api);
    let spec = RemoteScanSpec {
        batch_rows: 5,
        ..RemoteScanSpec::table(DB, "t")
    };
    let mut s = api.scan(spec.clone()).expect("open");
    assert!(s.next_row().expect("row").is_some());
    let holder_id = s.nodes_holding()[0];
    let holder = nodes
        .iter()
        .position(|n| n.node_id == holder_id)
        .expect("a node holds the scan");
    nodes.remove(holder).kill();
    let mut err = None;
    for _ in 0..ROWS {
        match s.next_row() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let e = err.expect("the scan lost its node");
    assert!(e.is_temporary(), "{e}");
    // Retried: the survivor serves the whole table once it is alone in its view.
    let survivor = &nodes[0];
    super::process_tests::wait_until("the survivor alone in its view", 10, || {
        survivor.status().view.node_ids() == vec![survivor.node_id]
    });
    let mut rows = None;
    for _ in 0..50 {
        match api.scan_all(spec.clone()) {
            Ok(r) => {
                rows = Some(r);
                break;
            }
            Err(e) => {
                assert!(e.is_temporary(), "{e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let rows = rows.expect("a retried scan succeeds");
    let ids: Vec<i64> = rows.iter().map(|r| int(&r[0])).collect();
    assert_eq!(ids.len(), model.len());
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, model.keys().copied().collect::<Vec<_>>());
}

/// The rows of a table scan (id → (g, name)), checked to hold no row twice.
fn scanned(api: &Arc<RemoteCluster>, spec: RemoteScanSpec) -> BTreeMap<i64, (i64, String)> {
    let rows = api.scan_all(spec).expect("scan");
    let got: BTreeMap<i64, (i64, String)> = rows
        .iter()
        .map(|r| {
            let Value::Str(s) = &r[2] else {
                panic!("{r:?}")
            };
            (int(&r[0]), (int(&r[1]), s.clone()))
        })
        .collect();
    assert_eq!(got.len(), rows.len(), "no row twice");
    got
}

#[test]
fn a_scan_of_a_transaction_sees_its_changes_on_every_replica() {
    let (_m, _nodes, api) = cluster(4, 2);
    let committed = load(&api);
    let mut tx = api.transaction();
    let op = |op, id: i64, values: Vec<(u32, Value)>| KeyOp {
        op,
        database: DB.into(),
        table: "t".into(),
        key: vec![Value::Int(id)],
        values,
        columns: Vec::new(),
    };
    let mut mine = committed.clone();
    let mut ops = Vec::new();
    for id in 1000..1012 {
        ops.push(op(
            OpType::Insert,
            id,
            vec![
                (1, Value::Int(grp(id))),
                (2, Value::Str(format!("new{id}"))),
            ],
        ));
        mine.insert(id, (grp(id), format!("new{id}")));
    }
    for id in 0..12 {
        ops.push(op(OpType::Delete, id, Vec::new()));
        mine.remove(&id);
    }
    ops.push(op(OpType::Update, 20, vec![(2, Value::Str("mine".into()))]));
    mine.insert(20, (grp(20), "mine".into()));
    tx.execute(ops, crate::transport::data::TcExec::NoCommit)
        .expect("round");
    let key = tx.txn_key().expect("open after a round");
    // Consecutive scans start at a different node of each group: the primary's and
    // the backup's records of the transaction both answer.
    for batch in [1, 5, 992, 3] {
        let spec = RemoteScanSpec {
            batch_rows: batch,
            txn: Some(key),
            ..RemoteScanSpec::table(DB, "t")
        };
        assert_eq!(
            scanned(&api, spec),
            mine,
            "batch {batch}, in the transaction"
        );
        assert_eq!(
            scanned(&api, RemoteScanSpec::table(DB, "t")),
            committed,
            "batch {batch}, committed rows"
        );
    }
    // A scan of the transaction still open when it commits ends with an error.
    let mut open = api
        .scan(RemoteScanSpec {
            batch_rows: 1,
            txn: Some(key),
            ..RemoteScanSpec::table(DB, "t")
        })
        .expect("open");
    assert!(open.next_row().expect("first row").is_some());
    tx.execute(Vec::new(), crate::transport::data::TcExec::Commit)
        .expect("commit");
    assert_eq!(tx.txn_key(), None, "committed");
    let ended = (0..ROWS).find_map(|_| open.next_row().err());
    let e = ended.expect("the scan ends with its transaction");
    assert_eq!(e.code, 4604, "{e}");
    assert_eq!(scanned(&api, RemoteScanSpec::table(DB, "t")), mine);
}
