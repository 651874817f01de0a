//! Property test of transactions against a `BTreeMap` model: random transactions of
//! inserts, updates, writes, deletes and reads on a small key space, each committed or
//! rolled back, with IgnoreError so expected failures (630, 626) stay in the
//! transaction. After every transaction the table's rows (by a full scan and by an
//! ordered-index scan) equal the model, and every fragment's invariants hold.

use super::*;
use crate::config::ClusterConfig;
use crate::schema::{Charset, Column, ColumnType, IndexKind, Value};
use crate::txn::lock::LockMode;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, i16, u8),
    Update(u8, i16),
    Write(u8, i16, u8),
    Delete(u8),
    Read(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..24, any::<i16>(), 0u8..40).prop_map(|(k, a, l)| Op::Insert(k, a, l)),
        (0u8..24, any::<i16>()).prop_map(|(k, a)| Op::Update(k, a)),
        (0u8..24, any::<i16>(), 0u8..40).prop_map(|(k, a, l)| Op::Write(k, a, l)),
        (0u8..24).prop_map(Op::Delete),
        (0u8..24).prop_map(Op::Read),
    ]
}

fn text(k: u8, len: u8) -> String {
    std::iter::repeat_n((b'a' + k % 26) as char, len as usize).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn transactions_match_a_model(txns in proptest::collection::vec((proptest::collection::vec(op(), 1..6), any::<bool>()), 1..25)) {
        let mut cfg = ClusterConfig::embedded(2, 2).expect("config");
        cfg.set_data_node_param("DataMemory", "8M").expect("DataMemory");
        let c = Cluster::embedded(cfg).expect("start");
        let ndb = c.ndb("test");
        let t = ndb
            .create_table(
                TableSpec::new(
                    "m",
                    vec![
                        Column::new("k", ColumnType::Int { bytes: 4, unsigned: true }).primary_key(),
                        Column::new("a", ColumnType::Int { bytes: 2, unsigned: false }),
                        Column::new("b", ColumnType::Varchar { len: 40, charset: Charset::Latin1 }),
                    ],
                )
                .index("ix_a", IndexKind::OrderedIndex, &["a"]),
            )
            .expect("create");
        let mut model: BTreeMap<u64, (i64, String)> = BTreeMap::new();
        for (ops, commit) in txns {
            let mut tx = ndb.start_transaction().expect("tx");
            let mut view = model.clone();
            for o in &ops {
                let (kind, key, vals): (OpKind, u64, Vec<(&str, Value)>) = match o {
                    Op::Insert(k, a, l) => (OpKind::Insert, *k as u64, vec![("a", Value::Int(*a as i64)), ("b", Value::Str(text(*k, *l)))]),
                    Op::Update(k, a) => (OpKind::Update, *k as u64, vec![("a", Value::Int(*a as i64))]),
                    Op::Write(k, a, l) => (OpKind::Write, *k as u64, vec![("a", Value::Int(*a as i64)), ("b", Value::Str(text(*k, *l)))]),
                    Op::Delete(k) => (OpKind::Delete, *k as u64, vec![]),
                    Op::Read(k) => (OpKind::Read(LockMode::Read), *k as u64, vec![]),
                };
                let id = tx.define(&t, kind, &[("k", Value::UInt(key))], &vals, None).expect("define");
                tx.execute(ExecType::NoCommit, AbortOption::IgnoreError).expect("execute");
                let outcome = tx.outcome(id).cloned();
                // what the model says
                let expected_ok = match o {
                    Op::Insert(k, a, l) => {
                        match view.entry(*k as u64) { std::collections::btree_map::Entry::Vacant(e) => { e.insert((*a as i64, text(*k, *l))); true } std::collections::btree_map::Entry::Occupied(_) => false }
                    }
                    Op::Update(k, a) => match view.get_mut(&(*k as u64)) { Some(r) => { r.0 = *a as i64; true } None => false },
                    Op::Write(k, a, l) => { view.insert(*k as u64, (*a as i64, text(*k, *l))); true }
                    Op::Delete(k) => view.remove(&(*k as u64)).is_some(),
                    Op::Read(k) => view.contains_key(&(*k as u64)),
                };
                match (&outcome, expected_ok) {
                    (Some(OpOutcome::Failed(e)), false) => prop_assert!(matches!(e.code, 626 | 630), "unexpected error {e}"),
                    (Some(OpOutcome::Failed(e)), true) => prop_assert!(false, "{o:?} failed: {e}"),
                    (Some(OpOutcome::Row(r)), true) => {
                        let (a, b) = &view[&key];
                        prop_assert_eq!(r, &vec![Value::UInt(key), Value::Int(*a), Value::Str(b.clone())]);
                    }
                    (_, true) => {}
                    (other, false) => prop_assert!(false, "{o:?} should fail, got {other:?}"),
                }
            }
            if commit {
                tx.execute(ExecType::Commit, AbortOption::AbortOnError).expect("commit");
                model = view;
            } else {
                tx.execute(ExecType::Rollback, AbortOption::AbortOnError).expect("rollback");
            }
            // the table equals the model, by a full scan and through the ordered index
            let mut r = ndb.start_transaction().expect("tx");
            let mut s = r.scan(ScanSpec::table(t.clone())).expect("scan");
            let mut rows = BTreeMap::new();
            while let Some(row) = r.scan_next(&mut s).expect("next") {
                if let [Value::UInt(k), Value::Int(a), Value::Str(b)] = &row[..] {
                    rows.insert(*k, (*a, b.clone()));
                }
            }
            prop_assert_eq!(&rows, &model);
            let mut spec = ScanSpec::table(t.clone());
            spec.index = Some(0);
            spec.sorted = true;
            let mut s = r.scan(spec).expect("index scan");
            let mut by_index = Vec::new();
            while let Some(row) = r.scan_next(&mut s).expect("next") {
                by_index.push(row[1].clone());
            }
            let mut expected: Vec<Value> = model.values().map(|(a, _)| Value::Int(*a)).collect();
            expected.sort_by(|x, y| x.sql_cmp(y));
            prop_assert_eq!(by_index, expected);
            for cell in t.all_cells() {
                cell.state.lock().check().map_err(TestCaseError::fail)?;
            }
        }
    }
}

#[derive(Debug, Clone)]
enum BlobOp {
    Insert(u8, u16),
    Update(u8, u16),
    Delete(u8),
}

fn blob_op() -> impl Strategy<Value = BlobOp> {
    prop_oneof![
        (0u8..8, 0u16..5000).prop_map(|(k, l)| BlobOp::Insert(k, l)),
        (0u8..8, 0u16..5000).prop_map(|(k, l)| BlobOp::Update(k, l)),
        (0u8..8).prop_map(BlobOp::Delete),
    ]
}

fn blob_text(k: u8, len: u16) -> String {
    (0..len)
        .map(|i| (b'a' + ((i as u8).wrapping_add(k)) % 26) as char)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    /// TEXT values crossing the inline size and several parts, changed and rolled back:
    /// the assembled values and the parts table match the model.
    #[test]
    fn text_columns_match_a_model(txns in proptest::collection::vec((proptest::collection::vec(blob_op(), 1..4), any::<bool>()), 1..12)) {
        let mut cfg = ClusterConfig::embedded(2, 2).expect("config");
        cfg.set_data_node_param("DataMemory", "16M").expect("DataMemory");
        let c = Cluster::embedded(cfg).expect("start");
        let ndb = c.ndb("test");
        let t = ndb
            .create_table(TableSpec::new(
                "d",
                vec![
                    Column::new("k", ColumnType::Int { bytes: 4, unsigned: true }).primary_key(),
                    Column::new("body", ColumnType::Blob { kind: crate::schema::BlobKind::Regular, charset: Some(Charset::Utf8mb4) }),
                ],
            ))
            .expect("create");
        let mut model: BTreeMap<u64, String> = BTreeMap::new();
        for (ops, commit) in txns {
            let mut tx = ndb.start_transaction().expect("tx");
            let mut view = model.clone();
            for o in &ops {
                let (kind, k, vals, ok) = match o {
                    BlobOp::Insert(k, l) => {
                        let ok = !view.contains_key(&(*k as u64));
                        if ok { view.insert(*k as u64, blob_text(*k, *l)); }
                        (OpKind::Insert, *k, vec![("body", Value::Str(blob_text(*k, *l)))], ok)
                    }
                    BlobOp::Update(k, l) => {
                        let ok = view.contains_key(&(*k as u64));
                        if ok { view.insert(*k as u64, blob_text(*k, *l)); }
                        (OpKind::Update, *k, vec![("body", Value::Str(blob_text(*k, *l)))], ok)
                    }
                    BlobOp::Delete(k) => (OpKind::Delete, *k, vec![], view.remove(&(*k as u64)).is_some()),
                };
                let id = tx.define(&t, kind, &[("k", Value::UInt(k as u64))], &vals, None).expect("define");
                tx.execute(ExecType::NoCommit, AbortOption::IgnoreError).expect("execute");
                let failed = matches!(tx.outcome(id), Some(OpOutcome::Failed(_)));
                prop_assert_eq!(failed, !ok, "{:?}: {:?}", o, tx.outcome(id));
            }
            if commit {
                tx.execute(ExecType::Commit, AbortOption::AbortOnError).expect("commit");
                model = view;
            } else {
                tx.execute(ExecType::Rollback, AbortOption::AbortOnError).expect("rollback");
            }
            let mut r = ndb.start_transaction().expect("tx");
            let mut s = r.scan(ScanSpec::table(t.clone())).expect("scan");
            let mut rows = BTreeMap::new();
            while let Some(row) = r.scan_next(&mut s).expect("next") {
                if let [Value::UInt(k), Value::Str(b)] = &row[..] {
                    rows.insert(*k, b.clone());
                }
            }
            prop_assert_eq!(&rows, &model);
            let parts_expected: u64 = model.values().map(|b| (b.len() as u64).saturating_sub(256).div_ceil(2000)).sum();
            let parts = t.blob_tables[1].as_ref().expect("parts table").row_count();
            prop_assert_eq!(parts, parts_expected, "parts table rows");
        }
    }
}
