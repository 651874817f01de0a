//! Unit tests of `copy_delta` and `copy_fold`: the key hashes both sides fold.

use super::*;
use crate::api::ScanSpec;
use crate::cluster::datapath::copy::row_key_prefix;
use std::collections::BTreeSet;

/// A one-node embedded cluster with table `Test.t` (a composite key with a string).
fn table_t() -> (crate::api::Cluster, crate::api::Ndb, crate::sql::Session) {
    let c = crate::api::Cluster::embedded(
        crate::config::ClusterConfig::embedded(1, 1).expect("config"),
    )
    .expect("cluster");
    let ndb = c.ndb("Test");
    let mut s = crate::sql::Session::new(ndb.clone());
    s.execute("CREATE TABLE t (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)) ENGINE=NDB")
        .expect("create");
    (c, ndb, s)
}

/// One hasher over many keys (its buffers reused) gives the hash of each key's own
/// `row_key` bytes (tombstones are hashed from those), for keys that need coercion
/// too, and tells keys apart.
#[test]
fn the_key_hasher_hashes_the_row_key_bytes() {
    let (_c, ndb, _s) = table_t();
    let rt = ndb.table("t").expect("table");
    let mut h = KeyHasher::new(&rt, "Test");
    for key in [
        vec![Value::Int(1), Value::Str("x".into())],
        vec![Value::UInt(7), Value::Str("y".into())],
        vec![Value::Str("12".into()), Value::Str("".into())],
    ] {
        let bytes = DataPath::row_key_of(&rt, "Test", &key).expect("row key");
        assert!(bytes.starts_with(b"test\0t\0"));
        assert_eq!(h.hash(&key).expect("hash"), key_hash(&bytes), "{key:?}");
    }
    assert_ne!(
        h.hash(&[Value::Int(1), Value::Str("x".into())])
            .expect("hash"),
        h.hash(&[Value::Int(1), Value::Str("y".into())])
            .expect("hash")
    );
}

/// The digest's fold from the fragments (stored key bytes, ROW_GCI from the row
/// header) gives the hashes the key hasher gives from the scanned key values, for
/// the rows at or below a GCI only, an uncommitted insert left out.
#[test]
fn the_fragment_fold_hashes_as_the_key_hasher_does() {
    let (_c, ndb, mut s) = table_t();
    for i in 0..300 {
        s.execute(&format!("INSERT INTO t VALUES ({i}, 'k{}', {i})", i % 7))
            .expect("insert");
    }
    let rt = ndb.table("t").expect("table");
    let scan = |cols: Vec<usize>| -> Vec<Vec<Value>> {
        let mut tx = ndb.start_transaction().expect("tx");
        let mut spec = ScanSpec::table(rt.clone());
        spec.columns = Some(cols);
        let mut sc = tx.scan(spec).expect("scan");
        let mut out = Vec::new();
        loop {
            let b = tx.scan_next_batch(&mut sc, 100).expect("batch");
            if b.is_empty() {
                break;
            }
            out.extend(b);
        }
        out
    };
    let rows = scan(vec![0, 1, ROW_GCI_COLUMN]);
    let gcis: BTreeSet<u64> = rows
        .iter()
        .map(|r| match r[2] {
            Value::UInt(g) => g,
            ref v => panic!("ROW_GCI {v:?}"),
        })
        .collect();
    // A GCI in the middle, if the inserts spread over several.
    let cut = *gcis.iter().nth(gcis.len() / 2).expect("a GCI");
    let mut hasher = KeyHasher::new(&rt, "Test");
    let want: BTreeSet<u128> = rows
        .iter()
        .filter(|r| matches!(r[2], Value::UInt(g) if g <= cut))
        .map(|r| hasher.hash(&r[..2]).expect("hash"))
        .collect();
    // An insert left uncommitted is not a row of the fold.
    let mut open = ndb.start_transaction().expect("tx");
    open.define_by_pos(
        &rt,
        OpKind::Insert,
        Vec::new(),
        vec![
            (0, Value::Int(-1)),
            (1, Value::Str("open".into())),
            (2, Value::Int(0)),
        ],
        None,
    )
    .expect("define");
    open.execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .expect("prepare");
    let mut got = BTreeSet::new();
    let mut bytes = row_key_prefix("Test", "t");
    let prefix = bytes.len();
    for cell in rt.fragments.iter().flatten() {
        let mut from = Some(0);
        while let Some(at) = from {
            from = cell.state.lock().committed_keys_at_or_below(
                at,
                17,
                u32::try_from(cut).expect("gci"),
                &mut |key| {
                    bytes.truncate(prefix);
                    bytes.extend_from_slice(key);
                    assert!(got.insert(key_hash(&bytes)), "a row twice");
                },
            );
        }
    }
    open.close();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}
