//! Behaviour tests of the API: transactions, locks, scans, indexes, memory.

use super::*;
use crate::config::ClusterConfig;
use crate::schema::{Charset, Column, ColumnType, IndexKind, Value};
use crate::txn::lock::LockMode;

fn cluster(data_nodes: u32, replicas: u32, data_memory: &str) -> Cluster {
    let mut cfg = ClusterConfig::embedded(data_nodes, replicas).expect("config");
    cfg.set_data_node_param("DataMemory", data_memory)
        .expect("DataMemory");
    cfg.set_data_node_param("TransactionDeadlockDetectionTimeout", "200")
        .expect("timeout");
    Cluster::embedded(cfg).expect("start")
}

fn t1(ndb: &Ndb) -> std::sync::Arc<TableRuntime> {
    ndb.create_table(
        TableSpec::new(
            "t1",
            vec![
                Column::new(
                    "id",
                    ColumnType::Int {
                        bytes: 8,
                        unsigned: true,
                    },
                )
                .primary_key(),
                Column::new(
                    "a",
                    ColumnType::Int {
                        bytes: 4,
                        unsigned: false,
                    },
                ),
                Column::new(
                    "b",
                    ColumnType::Varchar {
                        len: 32,
                        charset: Charset::Utf8mb4,
                    },
                ),
            ],
        )
        .index("ix_a", IndexKind::OrderedIndex, &["a"]),
    )
    .expect("create")
}

fn insert(
    ndb: &Ndb,
    t: &std::sync::Arc<TableRuntime>,
    id: u64,
    a: i64,
    b: &str,
) -> crate::Result<()> {
    let mut tx = ndb.start_transaction()?;
    tx.define(
        t,
        OpKind::Insert,
        &[],
        &[
            ("id", Value::UInt(id)),
            ("a", Value::Int(a)),
            ("b", Value::Str(b.into())),
        ],
        None,
    )?;
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
}

fn read(ndb: &Ndb, t: &std::sync::Arc<TableRuntime>, id: u64) -> Option<Vec<Value>> {
    let mut tx = ndb.start_transaction().expect("tx");
    let op = tx
        .define(
            t,
            OpKind::Read(LockMode::CommittedRead),
            &[("id", Value::UInt(id))],
            &[],
            None,
        )
        .expect("define");
    match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
        Ok(()) => tx.take_row(op),
        Err(e) => {
            assert_eq!(e.code, 626, "unexpected error {e}");
            None
        }
    }
}

fn check_all(t: &TableRuntime) {
    for cell in t.all_cells() {
        cell.state.lock().check().expect("fragment invariants");
    }
}

#[test]
fn insert_read_update_delete_on_two_replicas() {
    let c = cluster(2, 2, "32M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    insert(&ndb, &t, 1, 10, "x").expect("insert");
    assert_eq!(
        read(&ndb, &t, 1),
        Some(vec![Value::UInt(1), Value::Int(10), Value::Str("x".into())])
    );
    let e = insert(&ndb, &t, 1, 11, "y").expect_err("duplicate");
    assert_eq!(e.code, 630);
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Update,
        &[("id", Value::UInt(1))],
        &[("b", Value::Str("a much longer value".into()))],
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("update");
    assert!(tx.gci().is_some());
    assert_eq!(
        read(&ndb, &t, 1).map(|r| r[2].clone()),
        Some(Value::Str("a much longer value".into()))
    );
    // both replicas hold the row
    for reps in &t.fragments {
        let rows: Vec<u64> = reps.iter().map(|c| c.state.lock().rows()).collect();
        assert!(
            rows.iter().all(|&r| r == rows[0]),
            "replicas differ: {rows:?}"
        );
    }
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(&t, OpKind::Delete, &[("id", Value::UInt(1))], &[], None)
        .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("delete");
    assert_eq!(read(&ndb, &t, 1), None);
    check_all(&t);
    assert_eq!(
        c.inner()
            .data_nodes
            .iter()
            .map(|n| n.pool.used_pages())
            .sum::<u64>(),
        0,
        "pages returned"
    );
}

#[test]
fn uncommitted_changes_are_invisible_and_roll_back() {
    let c = cluster(1, 1, "16M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    insert(&ndb, &t, 1, 10, "x").expect("insert");
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[],
        &[("id", Value::UInt(2)), ("a", Value::Int(20))],
        None,
    )
    .expect("define");
    tx.define(
        &t,
        OpKind::Update,
        &[("id", Value::UInt(1))],
        &[("a", Value::Int(99))],
        None,
    )
    .expect("define");
    tx.execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .expect("prepare");
    // another reader sees the committed state
    assert_eq!(read(&ndb, &t, 2), None);
    assert_eq!(
        read(&ndb, &t, 1).map(|r| r[1].clone()),
        Some(Value::Int(10))
    );
    // the writer reads its own writes
    let op = tx
        .define(
            &t,
            OpKind::Read(LockMode::Read),
            &[("id", Value::UInt(1))],
            &[],
            None,
        )
        .expect("define");
    tx.execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .expect("read own");
    assert_eq!(tx.take_row(op).map(|r| r[1].clone()), Some(Value::Int(99)));
    tx.execute(ExecType::Rollback, AbortOption::AbortOnError)
        .expect("rollback");
    assert_eq!(
        read(&ndb, &t, 1).map(|r| r[1].clone()),
        Some(Value::Int(10))
    );
    assert_eq!(read(&ndb, &t, 2), None);
    check_all(&t);
}

#[test]
fn lock_conflict_times_out_with_266() {
    let c = cluster(1, 1, "16M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    insert(&ndb, &t, 1, 10, "x").expect("insert");
    let mut holder = ndb.start_transaction().expect("tx");
    holder
        .define(
            &t,
            OpKind::Read(LockMode::Exclusive),
            &[("id", Value::UInt(1))],
            &[],
            None,
        )
        .expect("define");
    holder
        .execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .expect("lock");
    let mut waiter = ndb.start_transaction().expect("tx");
    waiter
        .define(
            &t,
            OpKind::Update,
            &[("id", Value::UInt(1))],
            &[("a", Value::Int(1))],
            None,
        )
        .expect("define");
    let start = std::time::Instant::now();
    let e = waiter
        .execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect_err("times out");
    assert_eq!(e.code, 266);
    assert!(e.is_temporary());
    assert!(start.elapsed() >= std::time::Duration::from_millis(200));
    assert_eq!(waiter.state(), TxState::Aborted);
    // committed reads do not wait
    assert!(read(&ndb, &t, 1).is_some());
    holder
        .execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("commit");
    // after release the update goes through
    let mut w2 = ndb.start_transaction().expect("tx");
    w2.define(
        &t,
        OpKind::Update,
        &[("id", Value::UInt(1))],
        &[("a", Value::Int(5))],
        None,
    )
    .expect("define");
    w2.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("update");
    check_all(&t);
}

#[test]
fn waiter_proceeds_when_lock_released() {
    let c = cluster(1, 1, "16M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    insert(&ndb, &t, 1, 10, "x").expect("insert");
    let mut holder = ndb.start_transaction().expect("tx");
    holder
        .define(
            &t,
            OpKind::Update,
            &[("id", Value::UInt(1))],
            &[("a", Value::Int(1))],
            None,
        )
        .expect("define");
    holder
        .execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .expect("lock");
    let ndb2 = ndb.clone();
    let t2 = t.clone();
    let h = std::thread::spawn(move || {
        let mut w = ndb2.start_transaction().expect("tx");
        let op = w
            .define(
                &t2,
                OpKind::Read(LockMode::Read),
                &[("id", Value::UInt(1))],
                &[],
                None,
            )
            .expect("define");
        w.execute(ExecType::Commit, AbortOption::AbortOnError)
            .map(|_| w.take_row(op))
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    holder
        .execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("commit");
    let row = h.join().expect("thread").expect("read after wait");
    assert_eq!(row.map(|r| r[1].clone()), Some(Value::Int(1)));
}

#[test]
fn scans_and_index_ranges() {
    let c = cluster(2, 1, "32M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    for i in 0..1000u64 {
        insert(&ndb, &t, i, (i % 100) as i64, &format!("v{i}")).expect("insert");
    }
    let mut tx = ndb.start_transaction().expect("tx");
    let mut s = tx.scan(ScanSpec::table(t.clone())).expect("scan");
    let mut n = 0;
    while let Some(r) = tx.scan_next(&mut s).expect("next") {
        assert_eq!(r.len(), 3);
        n += 1;
    }
    assert_eq!(n, 1000);
    let idx = t.def.index("ix_a").expect("index").0;
    let mut spec = ScanSpec::table(t.clone());
    spec.index = Some(idx);
    spec.low = Some((vec![Value::Int(10)], true));
    spec.high = Some((vec![Value::Int(20)], false));
    spec.sorted = true;
    let mut s = tx.scan(spec.clone()).expect("scan");
    let mut got = Vec::new();
    while let Some(r) = tx.scan_next(&mut s).expect("next") {
        got.push(r[1].clone());
    }
    assert_eq!(got.len(), 100);
    assert!(
        got.windows(2)
            .all(|w| w[0].sql_cmp(&w[1]) != std::cmp::Ordering::Greater),
        "sorted"
    );
    assert_eq!(got.first(), Some(&Value::Int(10)));
    assert_eq!(got.last(), Some(&Value::Int(19)));
    spec.descending = true;
    spec.low = Some((vec![Value::Int(95)], false));
    spec.high = None;
    let mut s = tx.scan(spec).expect("scan");
    let first = tx.scan_next(&mut s).expect("next").expect("row");
    assert_eq!(first[1], Value::Int(99));
    check_all(&t);
}

#[test]
fn data_memory_full_gives_827_and_recovers() {
    let c = cluster(1, 1, "1M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    let mut inserted = 0u64;
    let err = loop {
        match insert(&ndb, &t, inserted, 1, "0123456789abcdef") {
            Ok(()) => inserted += 1,
            Err(e) => break e,
        }
        assert!(inserted < 1_000_000, "DataMemory never filled");
    };
    assert!(matches!(err.code, 827 | 625 | 902), "got {err}");
    assert_eq!(err.mysql_code, 1114);
    // still readable, deletable, insertable again
    assert!(read(&ndb, &t, 0).is_some());
    for i in 0..100 {
        let mut tx = ndb.start_transaction().expect("tx");
        tx.define(&t, OpKind::Delete, &[("id", Value::UInt(i))], &[], None)
            .expect("define");
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)
            .expect("delete");
    }
    insert(&ndb, &t, 10_000_000, 1, "x").expect("insert after delete");
    check_all(&t);
    assert_eq!(t.row_count(), inserted - 100 + 1);
}

#[test]
fn hidden_pk_blob_and_unique_index() {
    let c = cluster(2, 2, "32M");
    let ndb = c.ndb("test");
    let t = ndb
        .create_table(
            TableSpec::new(
                "docs",
                vec![
                    Column::new(
                        "name",
                        ColumnType::Varchar {
                            len: 20,
                            charset: Charset::Latin1,
                        },
                    )
                    .not_null(),
                    Column::new(
                        "body",
                        ColumnType::Blob {
                            kind: crate::schema::BlobKind::Regular,
                            charset: None,
                        },
                    ),
                ],
            )
            .index("u_name", IndexKind::UniqueHashIndex, &["name"]),
        )
        .expect("create");
    assert!(t.def.has_hidden_pk());
    let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[],
        &[
            ("name", Value::Str("a".into())),
            ("body", Value::Bytes(body.clone())),
        ],
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("insert");
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[],
        &[("name", Value::Str("a".into()))],
        None,
    )
    .expect("define");
    let e = tx
        .execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect_err("unique");
    assert_eq!(e.code, 893);
    assert_eq!(t.row_count(), 1, "the failed insert was rolled back");
    let mut tx = ndb.start_transaction().expect("tx");
    let mut s = tx.scan(ScanSpec::table(t.clone())).expect("scan");
    let row = tx.scan_next(&mut s).expect("next").expect("row");
    assert_eq!(row, vec![Value::Str("a".into()), Value::Bytes(body)]);
    let parts = t.blob_tables[1].as_ref().expect("parts table").row_count();
    assert_eq!(parts, (10_000 - 256u64).div_ceil(2000));
}

#[test]
fn batched_reads_find_every_key() {
    let c = cluster(2, 2, "64M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    let n = 5000u64;
    let rows: Vec<Vec<Value>> = (0..n)
        .map(|i| {
            vec![
                Value::UInt(i),
                Value::Int(i as i64),
                Value::Str(format!("v{i}")),
            ]
        })
        .collect();
    assert_eq!(ndb.insert_batch(&t, &[0, 1, 2], rows).expect("load"), n);
    let all: Vec<Value> = (0..n + 10).rev().map(Value::UInt).collect();
    let mut out = Vec::new();
    for chunk in all.chunks(1000) {
        out.extend(ndb.read_batch_flat(&t, chunk, &[0, 2]).expect("read"));
    }
    let keys = all;
    for (k, row) in keys.iter().zip(&out) {
        let Value::UInt(k) = k else { unreachable!() };
        if *k < n {
            assert_eq!(
                row.as_deref(),
                Some(&[Value::UInt(*k), Value::Str(format!("v{k}"))][..]),
                "key {k}"
            );
        } else {
            assert!(row.is_none(), "key {k} should be absent");
        }
    }
}

#[test]
fn bulk_insert_batches_are_atomic() {
    let c = cluster(2, 2, "64M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    insert(&ndb, &t, 1500, 1, "x").expect("insert");
    // batch 1: rows 0..1000 fine; batch 2: rows 1000..2000 contains the existing 1500
    let rows: Vec<Vec<Value>> = (0..2000u64)
        .map(|i| {
            vec![
                Value::UInt(i),
                Value::Int(i as i64 % 7),
                Value::Str(format!("r{i}")),
            ]
        })
        .collect();
    let e = ndb
        .insert_batch(&t, &[0, 1, 2], rows)
        .expect_err("duplicate in batch 2");
    assert_eq!(e.code, 630);
    assert_eq!(
        t.row_count(),
        1001,
        "batch 1 committed, batch 2 rolled back entirely"
    );
    assert!(read(&ndb, &t, 999).is_some());
    assert!(read(&ndb, &t, 1000).is_none());
    check_all(&t);
    // ordered index holds exactly the committed rows: a full index scan counts them
    let mut tx = ndb.start_transaction().expect("tx");
    let mut spec = ScanSpec::table(t.clone());
    spec.index = t.def.index("ix_a").map(|(i, _)| i);
    let mut s = tx.scan(spec).expect("scan");
    let mut n = 0;
    while tx.scan_next(&mut s).expect("next").is_some() {
        n += 1;
    }
    assert_eq!(n, 1001);
    // a row locked by an open transaction makes the batch take the transactional path
    let mut holder = ndb.start_transaction().expect("tx");
    holder
        .define(&t, OpKind::Insert, &[], &[("id", Value::UInt(5000))], None)
        .expect("define");
    holder
        .execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .expect("prepare");
    let rows = vec![
        vec![Value::UInt(4999), Value::Int(0), Value::Null],
        vec![Value::UInt(5000), Value::Int(0), Value::Null],
    ];
    let e = ndb
        .insert_batch(&t, &[0, 1, 2], rows)
        .expect_err("waits, then times out");
    assert_eq!(e.code, 266);
    holder
        .execute(ExecType::Rollback, AbortOption::AbortOnError)
        .expect("rollback");
    check_all(&t);
}

/// Concurrent transfers between random accounts: every transaction reads two rows with
/// exclusive locks and moves an amount; lock timeouts (266) are retried. Afterwards the
/// total is unchanged, both replicas hold identical rows, and every fragment's
/// invariants hold.
#[test]
fn concurrent_transfers_keep_the_total() {
    let c = cluster(2, 2, "32M");
    let ndb = c.ndb("test");
    let t = ndb
        .create_table(
            TableSpec::new(
                "acct",
                vec![
                    Column::new(
                        "id",
                        ColumnType::Int {
                            bytes: 4,
                            unsigned: true,
                        },
                    )
                    .primary_key(),
                    Column::new(
                        "balance",
                        ColumnType::Int {
                            bytes: 8,
                            unsigned: false,
                        },
                    )
                    .not_null(),
                    Column::new(
                        "note",
                        ColumnType::Varchar {
                            len: 40,
                            charset: Charset::Latin1,
                        },
                    ),
                ],
            )
            .index("ix_bal", IndexKind::OrderedIndex, &["balance"]),
        )
        .expect("create");
    let accounts = 50u64;
    let rows: Vec<Vec<Value>> = (0..accounts)
        .map(|i| vec![Value::UInt(i), Value::Int(1000), Value::Null])
        .collect();
    ndb.insert_batch(&t, &[0, 1, 2], rows).expect("load");
    let threads: Vec<_> = (0..4u64)
        .map(|tid| {
            let ndb = ndb.clone();
            let t = t.clone();
            std::thread::spawn(move || {
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ tid;
                let mut next = move || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                let mut committed = 0;
                while committed < stress_iterations() {
                    let a = next() % accounts;
                    let b = (a + 1 + next() % (accounts - 1)) % accounts;
                    let amount = (next() % 50) as i64;
                    let mut tx = ndb.start_transaction().expect("tx");
                    let ra = tx
                        .define(
                            &t,
                            OpKind::Read(LockMode::Exclusive),
                            &[("id", Value::UInt(a))],
                            &[],
                            Some(&["balance"]),
                        )
                        .expect("define");
                    let rb = tx
                        .define(
                            &t,
                            OpKind::Read(LockMode::Exclusive),
                            &[("id", Value::UInt(b))],
                            &[],
                            Some(&["balance"]),
                        )
                        .expect("define");
                    match tx.execute(ExecType::NoCommit, AbortOption::AbortOnError) {
                        Err(e) if e.code == 266 => continue,
                        Err(e) => panic!("read failed: {e}"),
                        Ok(()) => {}
                    }
                    let bal = |r: Option<Vec<Value>>| match r.as_deref() {
                        Some([Value::Int(v)]) => *v,
                        other => panic!("bad row {other:?}"),
                    };
                    let (va, vb) = (bal(tx.take_row(ra)), bal(tx.take_row(rb)));
                    let note = Value::Str(format!("t{tid} moved {amount}"));
                    tx.define(
                        &t,
                        OpKind::Update,
                        &[("id", Value::UInt(a))],
                        &[("balance", Value::Int(va - amount)), ("note", note.clone())],
                        None,
                    )
                    .expect("define");
                    tx.define(
                        &t,
                        OpKind::Update,
                        &[("id", Value::UInt(b))],
                        &[("balance", Value::Int(vb + amount))],
                        None,
                    )
                    .expect("define");
                    match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
                        Ok(()) => committed += 1,
                        Err(e) if e.code == 266 => continue,
                        Err(e) => panic!("commit failed: {e}"),
                    }
                }
            })
        })
        .collect();
    for h in threads {
        h.join().expect("worker");
    }
    let mut tx = ndb.start_transaction().expect("tx");
    let mut s = tx.scan(ScanSpec::table(t.clone())).expect("scan");
    let mut total = 0i64;
    let mut n = 0;
    while let Some(r) = tx.scan_next(&mut s).expect("next") {
        if let Value::Int(b) = r[1] {
            total += b;
        }
        n += 1;
    }
    assert_eq!(n, accounts);
    assert_eq!(total, 1000 * accounts as i64);
    check_all(&t);
    for reps in &t.fragments {
        let dump = |cell: &std::sync::Arc<crate::txn::FragmentCell>| {
            let mut rows = Vec::new();
            let mut out = Vec::new();
            let mut from = Some(crate::storage::RowId(0));
            while let Some(f) = from {
                out.clear();
                from = match cell.state.lock().scan_batch(
                    0,
                    LockMode::CommittedRead,
                    f,
                    100,
                    &[0, 1, 2],
                    &mut out,
                ) {
                    Ok(crate::txn::Step::Done(n)) => n,
                    Err(e) => panic!("scan: {e}"),
                    Ok(crate::txn::Step::Blocked) => panic!("blocked"),
                };
                rows.extend(out.drain(..).map(|(_, v)| v));
            }
            rows.sort_by(|a, b| a[0].sql_cmp(&b[0]));
            rows
        };
        assert_eq!(dump(&reps[0]), dump(&reps[1]), "replicas diverged");
    }
}

#[test]
fn write_with_key_among_values_on_a_table_with_a_unique_index() {
    let c = cluster(1, 1, "16M");
    let ndb = c.ndb("test");
    let t = ndb
        .create_table(
            TableSpec::new(
                "u",
                vec![
                    Column::new(
                        "id",
                        ColumnType::Int {
                            bytes: 4,
                            unsigned: true,
                        },
                    )
                    .primary_key(),
                    Column::new(
                        "email",
                        ColumnType::Varchar {
                            len: 40,
                            charset: Charset::Latin1,
                        },
                    ),
                ],
            )
            .index("u_email", IndexKind::UniqueHashIndex, &["email"]),
        )
        .expect("create");
    for email in ["a@x", "b@x"] {
        let mut tx = ndb.start_transaction().expect("tx");
        tx.define(
            &t,
            OpKind::Write,
            &[],
            &[("id", Value::UInt(1)), ("email", Value::Str(email.into()))],
            None,
        )
        .expect("define");
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)
            .expect("write");
    }
    let row = read_u(&ndb, &t, 1);
    assert_eq!(row, Some(vec![Value::UInt(1), Value::Str("b@x".into())]));
    // the old unique entry is gone: another row may take "a@x", none may take "b@x"
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[],
        &[("id", Value::UInt(2)), ("email", Value::Str("a@x".into()))],
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("a@x is free again");
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[],
        &[("id", Value::UInt(3)), ("email", Value::Str("b@x".into()))],
        None,
    )
    .expect("define");
    assert_eq!(
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)
            .map_err(|e| e.code),
        Err(893)
    );
}

fn read_u(ndb: &Ndb, t: &std::sync::Arc<TableRuntime>, id: u64) -> Option<Vec<Value>> {
    let mut tx = ndb.start_transaction().expect("tx");
    let op = tx
        .define(
            t,
            OpKind::Read(LockMode::CommittedRead),
            &[("id", Value::UInt(id))],
            &[],
            None,
        )
        .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .ok()?;
    tx.take_row(op)
}

#[test]
fn batched_reads_reuse_buffers_without_stale_values() {
    let c = cluster(1, 1, "16M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    let rows: Vec<Vec<Value>> = (0..100u64)
        .map(|i| {
            vec![
                Value::UInt(i),
                Value::Int(i as i64),
                Value::Str(format!("value-{i}")),
            ]
        })
        .collect();
    ndb.insert_batch(&t, &[0, 1, 2], rows).expect("load");
    let (mut out, mut found) = (Vec::new(), Vec::new());
    let keys: Vec<Value> = (0..10u64).map(Value::UInt).collect();
    ndb.read_batch_into(&t, &keys, &[2, 1], &mut out, &mut found)
        .expect("read");
    assert!(found.iter().all(|&f| f));
    // second batch: fewer keys, some missing; reused strings must be overwritten
    let keys = vec![Value::UInt(50), Value::UInt(1000), Value::UInt(7)];
    ndb.read_batch_into(&t, &keys, &[2, 1], &mut out, &mut found)
        .expect("read");
    assert_eq!(found, vec![true, false, true]);
    assert_eq!(
        out,
        vec![
            Value::Str("value-50".into()),
            Value::Int(50),
            Value::Null,
            Value::Null,
            Value::Str("value-7".into()),
            Value::Int(7)
        ]
    );
}

#[test]
fn visiting_batched_reads_sees_stored_rows() {
    let c = cluster(2, 2, "16M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    let rows: Vec<Vec<Value>> = (0..50u64)
        .map(|i| {
            vec![
                Value::UInt(i),
                Value::Int(-(i as i64)),
                Value::Str(format!("s{i}")),
            ]
        })
        .collect();
    ndb.insert_batch(&t, &[0, 1, 2], rows).expect("load");
    let keys: Vec<Value> = [3u64, 99, 7].iter().map(|&k| Value::UInt(k)).collect();
    let mut seen = Vec::new();
    let layout = t.def.layout.clone();
    ndb.read_batch_visit(&t, &keys, &mut |i, row| {
        seen.push((i, layout.value(1, row), layout.value(2, row)))
    })
    .expect("visit");
    seen.sort_by_key(|e| e.0);
    assert_eq!(
        seen,
        vec![
            (0, Value::Int(-3), Value::Str("s3".into())),
            (2, Value::Int(-7), Value::Str("s7".into()))
        ]
    );
}

/// Iterations per thread of the concurrency tests: RNDB_STRESS raises it for soak runs.
fn stress_iterations() -> u32 {
    std::env::var("RNDB_STRESS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

/// Regression (found by the simulated crash test): an update of other columns of a
/// row with a BLOB re-encoded the stored BLOB head as a new value of the head's bytes.
#[test]
fn updating_other_columns_keeps_blob_values() {
    use crate::schema::BlobKind;
    let c = Cluster::embedded(crate::config::ClusterConfig::embedded(2, 2).expect("config"))
        .expect("start");
    let ndb = c.ndb("test");
    let t = ndb
        .create_table(
            TableSpec::new(
                "b",
                vec![
                    Column::new(
                        "id",
                        ColumnType::Int {
                            bytes: 4,
                            unsigned: true,
                        },
                    )
                    .primary_key(),
                    Column::new(
                        "u",
                        ColumnType::Int {
                            bytes: 4,
                            unsigned: true,
                        },
                    ),
                    Column::new(
                        "body",
                        ColumnType::Blob {
                            kind: BlobKind::Regular,
                            charset: None,
                        },
                    ),
                ],
            )
            .index("ux", crate::schema::IndexKind::UniqueHashIndex, &["u"]),
        )
        .expect("create");
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[("id", Value::UInt(1))],
        &[("u", Value::UInt(1)), ("body", Value::Bytes(vec![7; 2300]))],
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("commit");
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Update,
        &[("id", Value::UInt(1))],
        &[("u", Value::UInt(2))],
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("commit");
    let mut tx = ndb.start_transaction().expect("tx");
    let op = tx
        .define(
            &t,
            OpKind::Read(crate::txn::LockMode::CommittedRead),
            &[("id", Value::UInt(1))],
            &[],
            None,
        )
        .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("read");
    match tx.outcome(op) {
        Some(OpOutcome::Row(r)) => assert_eq!(r[2], Value::Bytes(vec![7; 2300])),
        other => panic!("{other:?}"),
    }
}

/// Regression (found by the simulated crash test): a unique value freed by one row
/// and taken by another in the same batch failed with 893 when the batch was reordered
/// by partition.
#[test]
fn unique_value_reused_in_one_transaction() {
    let c = Cluster::embedded(super::sim_crash_tests::config()).expect("start");
    let ndb = c.ndb("test");
    let t = ndb
        .create_table(super::sim_crash_model::spec(0))
        .expect("create");
    let row = |u| super::sim_crash_model::Row {
        grp: 1,
        u,
        val: 5,
        data_txn: 5,
        pad_len: 10,
        body_len: None,
    };
    let mut failed = Vec::new();
    for k in 0..10u64 {
        // insert A with u, set A's u to NULL, insert B with u: B must get it
        let mut tx = ndb.start_transaction().expect("tx");
        let a = row(Some(k)).columns(k);
        tx.define(&t, OpKind::Insert, &[("id", Value::UInt(k))], &a, None)
            .expect("define");
        tx.define(
            &t,
            OpKind::Update,
            &[("id", Value::UInt(k))],
            &[("u", Value::Null)],
            None,
        )
        .expect("define");
        let b = row(Some(k)).columns(k + 100);
        tx.define(
            &t,
            OpKind::Insert,
            &[("id", Value::UInt(k + 100))],
            &b,
            None,
        )
        .expect("define");
        if let Err(e) = tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
            failed.push((k, e.code));
        }
    }
    assert_eq!(
        failed,
        vec![],
        "(value, error) of the transactions that failed"
    );
}

/// The ROW_GCI pseudo column gives the GCI of each row's last committed change, in
/// key reads and scans, and moves on an update.
#[test]
fn row_gci_pseudo_column_follows_each_rows_last_commit() {
    use crate::schema::layout::ROW_GCI_COLUMN;
    let c = cluster(1, 1, "32M");
    let ndb = c.ndb("test");
    let t = t1(&ndb);
    let gci_hi = |tx: &Transaction| crate::log::gcp::gci_hi(tx.gci().expect("a commit's GCI"));
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Insert,
        &[],
        &[("id", Value::UInt(1)), ("a", Value::Int(1))],
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("insert");
    let first = gci_hi(&tx);
    let row_gci = |id: u64| {
        let mut tx = ndb.start_transaction().expect("tx");
        let op = tx
            .define_by_pos(
                &t,
                OpKind::Read(LockMode::CommittedRead),
                vec![(0, Value::UInt(id))],
                Vec::new(),
                Some(vec![0, ROW_GCI_COLUMN]),
            )
            .expect("define");
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)
            .expect("read");
        tx.take_row(op).expect("row")
    };
    assert_eq!(row_gci(1), vec![Value::UInt(1), Value::UInt(first.into())]);
    c.inner().force_gcp().expect("next GCI");
    let mut tx = ndb.start_transaction().expect("tx");
    tx.define(
        &t,
        OpKind::Update,
        &[("id", Value::UInt(1))],
        &[("a", Value::Int(2))],
        None,
    )
    .expect("define");
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        .expect("update");
    let second = gci_hi(&tx);
    assert!(second > first, "GCI {second} after {first}");
    assert_eq!(row_gci(1)[1], Value::UInt(second.into()));
    let mut tx = ndb.start_transaction().expect("tx");
    let mut spec = scan::ScanSpec::table(t.clone());
    spec.columns = Some(vec![ROW_GCI_COLUMN, 1]);
    let mut s = tx.scan(spec).expect("scan");
    let rows = tx.scan_next_batch(&mut s, 10).expect("batch");
    assert_eq!(rows, vec![vec![Value::UInt(second.into()), Value::Int(2)]]);
}

/// A read of a missing row of a table with a TEXT column keeps its 626 (the BLOB
/// completion of read rows leaves failed reads alone), also beside a row that is there.
#[test]
fn a_missing_row_of_a_blob_table_reads_as_626() {
    let c = cluster(1, 1, "32M");
    let ndb = c.ndb("test");
    let mut s = crate::sql::Session::new(ndb.clone());
    s.execute("CREATE TABLE docs (id INT PRIMARY KEY, body TEXT) ENGINE=NDB; INSERT INTO docs VALUES (1, 'one')")
        .expect("sql");
    let t = ndb.table("docs").expect("table");
    let mut tx = ndb.start_transaction().expect("tx");
    for id in [1, 2] {
        tx.define_by_pos(
            &t,
            OpKind::Read(LockMode::CommittedRead),
            vec![(0, Value::Int(id))],
            Vec::new(),
            None,
        )
        .expect("define");
    }
    tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)
        .expect("execute");
    assert!(
        matches!(tx.outcome(OpId(0)), Some(OpOutcome::Row(r)) if r[1] == Value::Str("one".into()))
    );
    assert!(
        matches!(tx.outcome(OpId(1)), Some(OpOutcome::Failed(e)) if e.code == 626),
        "{:?}",
        tx.outcome(OpId(1))
    );
}
