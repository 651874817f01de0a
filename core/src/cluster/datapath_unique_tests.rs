//! Unique hash indexes over two node groups (`datapath::unique_check`): a value held by
//! a row of one group is refused (893) to a row of the other, by key operations, by
//! SQL, and under concurrent writers; NULLs repeat; a freed value can be taken again.

use super::datapath_tests::{DB, cluster};
use super::layout::node_group_of;
use super::remote::RemoteCluster;
use crate::schema::Value;
use crate::transport::data::{KeyOp, OpType};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

fn op(t: OpType, id: i64, email: Option<&str>) -> KeyOp {
    KeyOp {
        op: t,
        database: DB.into(),
        table: "u".into(),
        key: vec![Value::Int(id)],
        values: match (t, email) {
            (OpType::Delete, _) => Vec::new(),
            (_, Some(e)) => vec![(1, Value::Str(e.to_string()))],
            (_, None) => vec![(1, Value::Null)],
        },
        columns: Vec::new(),
    }
}

/// The first `n` keys from 1 whose rows live in node group `group` (of two).
fn keys_of_group(api: &RemoteCluster, group: usize, n: usize) -> Vec<i64> {
    let def = api.table(DB, "u").expect("table");
    (1..)
        .filter(|&k| {
            let p = RemoteCluster::partition_of(&def, &[Value::Int(k)]).expect("partition");
            node_group_of(p, 2) == group
        })
        .take(n)
        .collect()
}

fn create(api: &Arc<RemoteCluster>) {
    api.sql(
        DB,
        "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(40), n INT, \
         UNIQUE KEY ue (email)) ENGINE=NDB",
    )
    .expect("create");
}

#[test]
fn a_value_of_one_group_is_refused_to_the_other() {
    let (_m, _nodes, api) = cluster(4, 2);
    create(&api);
    let a = keys_of_group(&api, 0, 3);
    let b = keys_of_group(&api, 1, 3);
    api.execute(vec![op(OpType::Insert, a[0], Some("x@e"))])
        .expect("insert in group 0");
    // Insert, write and update in group 1 with group 0's value.
    for o in [
        op(OpType::Insert, b[0], Some("x@e")),
        op(OpType::Write, b[0], Some("x@e")),
    ] {
        let e = api.execute(vec![o]).expect_err("duplicate across groups");
        assert_eq!(e.code, 893, "{e}");
    }
    api.execute(vec![op(OpType::Insert, b[1], Some("y@e"))])
        .expect("another value");
    let e = api
        .execute(vec![op(OpType::Update, b[1], Some("x@e"))])
        .expect_err("update to a value of the other group");
    assert_eq!(e.code, 893, "{e}");
    // The failed transaction changed nothing, in either group.
    let rows = api
        .read_batch(
            DB,
            "u",
            &[vec![Value::Int(b[0])], vec![Value::Int(b[1])]],
            &[],
        )
        .expect("read");
    assert!(rows[0].is_none(), "{rows:?}");
    assert_eq!(
        rows[1].as_ref().map(|r| r[1].clone()),
        Some(Value::Str("y@e".into()))
    );
    // An update of another column leaves the value where it is.
    api.execute(vec![KeyOp {
        values: vec![(2, Value::Int(5))],
        ..op(OpType::Update, a[0], None)
    }])
    .expect("update n");
    // NULLs repeat in every group.
    api.execute(vec![
        op(OpType::Insert, a[1], None),
        op(OpType::Insert, b[2], None),
    ])
    .expect("NULLs");
    // A value freed in one group is taken in the other: moved, then deleted.
    api.execute(vec![op(OpType::Update, a[0], Some("z@e"))])
        .expect("move the value away");
    api.execute(vec![op(OpType::Insert, b[0], Some("x@e"))])
        .expect("x@e is free");
    api.execute(vec![op(OpType::Delete, b[0], None)])
        .expect("delete");
    api.execute(vec![op(OpType::Update, a[1], Some("x@e"))])
        .expect("x@e is free again");
    // SQL: its statement's error, and nothing changed.
    let e = api
        .sql(DB, &format!("INSERT INTO u VALUES ({}, 'x@e', 1)", b[0]))
        .expect_err("duplicate by SQL");
    assert_eq!(e.code, 893, "{e}");
    // The statements that resolve a conflict do not see a holder in another node
    // group (a[1] holds x@e there; the statement is captured in b5's group only): the
    // unique check at commit fails them with 893, and nothing changes.
    let b5 = keys_of_group(&api, 1, 6)[5];
    for sql in [
        format!("INSERT IGNORE INTO u VALUES ({b5}, 'x@e', 3)"),
        format!("INSERT INTO u VALUES ({b5}, 'x@e', 4) ON DUPLICATE KEY UPDATE n = 40"),
        format!("REPLACE INTO u VALUES ({b5}, 'x@e', 2)"),
    ] {
        let e = api.sql(DB, &sql).expect_err(&sql);
        assert_eq!(e.code, 893, "{sql}: {e}");
    }
    let rows = api
        .read_batch(
            DB,
            "u",
            &[vec![Value::Int(b5)], vec![Value::Int(a[1])]],
            &[],
        )
        .expect("read");
    assert!(rows[0].is_none(), "{rows:?}");
    assert_eq!(
        rows[1].as_ref().map(|r| (r[1].clone(), r[2].clone())),
        Some((Value::Str("x@e".into()), Value::Null))
    );
    let out = api
        .sql(
            DB,
            "SELECT email, COUNT(*) FROM u GROUP BY email ORDER BY email",
        )
        .expect("select");
    let cells: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(|l| {
            l.split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        cells,
        vec![
            vec!["NULL", "1"],
            vec!["x@e", "1"],
            vec!["y@e", "1"],
            vec!["z@e", "1"]
        ],
        "{out}"
    );
    // One transaction writing the same new value in both groups: each group's check
    // finds the transaction's own entry in the other (not a wait for itself).
    let b3 = keys_of_group(&api, 1, 4)[3];
    let e = api
        .execute(vec![
            op(OpType::Insert, a[2], Some("w@e")),
            op(OpType::Insert, b3, Some("w@e")),
        ])
        .expect_err("the same new value in both groups");
    assert_eq!(e.code, 893, "{e}");
    let rows = api
        .read_batch(DB, "u", &[vec![Value::Int(a[2])]], &[])
        .expect("read");
    assert!(rows[0].is_none(), "{rows:?}");
}

#[test]
fn concurrent_writers_never_place_a_value_twice() {
    let (_m, nodes, api) = cluster(4, 2);
    create(&api);
    let keys: Vec<i64> = {
        let mut k = keys_of_group(&api, 0, 40);
        k.extend(keys_of_group(&api, 1, 40));
        k
    };
    let keys = Arc::new(keys);
    // 4 writers set random rows to one of 6 values; each acknowledged write is the
    // value's new holder unless a later write moved or took it.
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let api = api.clone();
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut rng = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let (mut ok, mut dup) = (0u32, 0u32);
                for _ in 0..150 {
                    let k = keys[(next() % keys.len() as u64) as usize];
                    let v = format!("v{}@e", next() % 6);
                    match api.execute(vec![op(OpType::Write, k, Some(&v))]) {
                        Ok(_) => ok += 1,
                        Err(e) if e.code == 893 => dup += 1,
                        Err(e) if e.is_temporary() => {}
                        Err(e) => panic!("writer {t}: {e}"),
                    }
                }
                (ok, dup)
            })
        })
        .collect();
    let (mut ok, mut dup) = (0, 0);
    for t in threads {
        let (o, d) = t.join().expect("writer");
        ok += o;
        dup += d;
    }
    assert!(ok >= 6 && dup > 0, "{ok} written, {dup} refused");
    // Every value at most once over the cluster, and every replica of a group alike.
    let out = api
        .sql(
            DB,
            "SELECT email FROM u WHERE email IS NOT NULL ORDER BY email",
        )
        .expect("select");
    let values: Vec<&str> = out.lines().filter(|l| l.contains("@e")).collect();
    let distinct: BTreeSet<&&str> = values.iter().collect();
    assert_eq!(values.len(), distinct.len(), "a value placed twice:\n{out}");
    let mut by_group: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let dp = n.data().expect("data path");
        let mut s = crate::sql::Session::new(dp.engine.ndb(DB));
        let r = s
            .execute("SELECT id, email FROM u ORDER BY id")
            .expect("local select");
        let text = format!("{:?}", r.last());
        let group = i / 2;
        match by_group.get(&group) {
            Some(first) => assert_eq!(first, &vec![text], "node {} differs", n.node_id),
            None => {
                by_group.insert(group, vec![text]);
            }
        }
    }
}

#[test]
fn a_checked_node_killed_under_writes_costs_only_temporary_errors() {
    let (_m, mut nodes, api) = cluster(4, 2);
    create(&api);
    let b = keys_of_group(&api, 1, 1)[0];
    api.execute(vec![op(OpType::Insert, b, Some("held@e"))])
        .expect("a value held by group 1");
    let a_keys = keys_of_group(&api, 0, 400);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let written = Arc::new(std::sync::atomic::AtomicU32::new(0));
    // Inserts of new values into group 0's rows: each is checked in group 1.
    let writer = {
        let (api, stop, written) = (api.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let (mut ok, mut errors) = (0u32, Vec::new());
            for (i, &k) in a_keys.iter().cycle().enumerate() {
                if stop.load(std::sync::atomic::Ordering::Acquire) {
                    break;
                }
                let mut attempt = 0;
                loop {
                    let email = format!("{k}-{i}@e");
                    match api.execute(vec![op(OpType::Write, k, Some(&email))]) {
                        Ok(_) => {
                            ok += 1;
                            written.fetch_add(1, std::sync::atomic::Ordering::Release);
                            break;
                        }
                        Err(e) => {
                            assert!(
                                e.is_temporary() || e.code == 4012,
                                "only temporary errors under a node failure, got {e}"
                            );
                            errors.push(e.code);
                            attempt += 1;
                            assert!(attempt < 400, "key {k} never written: {errors:?}");
                            std::thread::sleep(std::time::Duration::from_millis(5));
                        }
                    }
                }
            }
            (ok, errors)
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Node 4: the first node of group 1, checked by every write.
    let victim = nodes.remove(2);
    assert_eq!(victim.node_id, 4);
    victim.kill();
    super::process_tests::wait_until("node 4 out of the survivors' views", 10, || {
        nodes
            .iter()
            .all(|n| !n.status().view.node_ids().contains(&4))
    });
    let at_view = written.load(std::sync::atomic::Ordering::Acquire);
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Release);
    let (ok, errors) = writer.join().expect("writer");
    assert!(
        at_view > 0 && ok > at_view,
        "{at_view} writes before the view without node 4, {ok} in all; errors {errors:?}"
    );
    eprintln!("{ok} writes; errors under the failure: {errors:?}");
    // Group 1's surviving node still answers the checks.
    let a = keys_of_group(&api, 0, 401)[400]; // not written by the load
    let e = api
        .execute(vec![op(OpType::Insert, a, Some("held@e"))])
        .expect_err("held by group 1's surviving replica");
    assert_eq!(e.code, 893, "{e}");
    api.execute(vec![op(OpType::Insert, a, Some("free@e"))])
        .expect("a free value");
}

#[test]
fn one_transaction_moves_a_value_from_one_group_to_the_other() {
    let (_m, _nodes, api) = cluster(4, 2);
    create(&api);
    let a = keys_of_group(&api, 0, 2);
    let b = keys_of_group(&api, 1, 2);
    api.execute(vec![
        op(OpType::Insert, a[0], Some("m@e")),
        op(OpType::Insert, a[1], Some("n@e")),
    ])
    .expect("values in group 0");
    // Freed by a delete in group 0 and taken in group 1, in one round: the check runs
    // once every participant (and backup) holds the round's rows, so group 0's nodes
    // see the transaction's own delete. Repeated: each round's timing differs.
    for i in 0..20 {
        let (from, to) = if i % 2 == 0 {
            (a[0], b[0])
        } else {
            (b[0], a[0])
        };
        api.execute(vec![
            op(OpType::Delete, from, None),
            op(OpType::Insert, to, Some("m@e")),
        ])
        .unwrap_or_else(|e| panic!("move {i}: {e}"));
    }
    // Freed by an update in group 0 and taken in group 1, in either order.
    api.execute(vec![
        op(OpType::Insert, b[1], Some("n@e")),
        op(OpType::Update, a[1], Some("o@e")),
    ])
    .expect("update frees the value the insert takes");
    let rows = api
        .read_batch(
            DB,
            "u",
            &[
                vec![Value::Int(a[0])],
                vec![Value::Int(b[0])],
                vec![Value::Int(a[1])],
                vec![Value::Int(b[1])],
            ],
            &[],
        )
        .expect("read");
    let emails: Vec<Option<Value>> = rows
        .iter()
        .map(|r| r.as_ref().map(|r| r[1].clone()))
        .collect();
    assert_eq!(
        emails,
        vec![
            Some(Value::Str("m@e".into())),
            None,
            Some(Value::Str("o@e".into())),
            Some(Value::Str("n@e".into())),
        ]
    );
}

#[test]
fn a_round_of_hundreds_of_values_is_checked_in_several_messages() {
    let (_m, _nodes, api) = cluster(4, 2);
    create(&api);
    let keys: Vec<i64> = (1..=600).collect();
    let b = keys_of_group(&api, 1, 1)[0];
    // 200 rows of each group and more, one transaction: more checks per node than a
    // message carries in the unit tests (`MAX_UNIQUE_CHECKS`).
    let ops: Vec<KeyOp> = keys
        .iter()
        .filter(|&&k| k != b)
        .map(|&k| op(OpType::Insert, k, Some(&format!("{k}@e"))))
        .collect();
    assert!(ops.len() > 4 * super::datapath::MAX_UNIQUE_CHECKS);
    api.execute(ops).expect("600 distinct values");
    // The same, with one value held by a row of the other group among them.
    let a = keys_of_group(&api, 0, 1)[0];
    let ops: Vec<KeyOp> = (1000..1300)
        .map(|k| op(OpType::Insert, k, Some(&format!("new{k}@e"))))
        .chain(std::iter::once(op(
            OpType::Insert,
            b,
            Some(&format!("{a}@e")),
        )))
        .collect();
    let e = api.execute(ops).expect_err("held by group 0");
    assert_eq!(e.code, 893, "{e}");
    let rows = api
        .read_batch(DB, "u", &[vec![Value::Int(1000)], vec![Value::Int(b)]], &[])
        .expect("read");
    assert_eq!(rows, vec![None, None], "the failed round changed nothing");
}
