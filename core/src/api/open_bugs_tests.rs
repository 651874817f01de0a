//! Open bugs found by the simulated crash test (`sim_crash_tests.rs`), in code that
//! test may not change: each test here fails until its bug is fixed, and is ignored so
//! that the suite stays green (and so that `cargo test sim_crash -- --ignored`, the
//! replay command of a seed, does not run them). Run them with
//! `cargo test -p rndb --lib open_bugs -- --ignored`.

use super::sim_crash_model::{self as model, Row};
use super::sim_crash_tests::config;
use super::*;
use crate::schema::Value;

#[test]
#[ignore]
fn unique_value_reused_in_one_transaction() {
    let c = Cluster::embedded(config()).expect("start");
    let ndb = c.ndb("test");
    let t = ndb.create_table(model::spec(0)).expect("create");
    let row = |u| Row {
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
