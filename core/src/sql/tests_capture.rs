//! Tests of captured DML (`capture.rs`): the rows a statement would change, with their
//! images before and after, and nothing changed on the engine.

use super::tests::*;
use super::*;

/// (table, key, before, after).
type Images = (String, Vec<Value>, Option<Vec<Value>>, Option<Vec<Value>>);

fn key_and_images(r: &CapturedRow) -> Images {
    (
        r.table.def.name.clone(),
        r.key.clone(),
        r.before.clone(),
        r.after.clone(),
    )
}

fn row(id: i64, v: &str) -> Option<Vec<Value>> {
    Some(vec![Value::Int(id), Value::Str(v.into())])
}

#[test]
fn a_captured_statement_reports_its_rows_and_changes_nothing() {
    let c = cluster(2, 2, "32M");
    let mut s = session(&c);
    run(
        &mut s,
        "create table t (id int primary key, v varchar(10) not null)",
    );
    run(&mut s, "insert into t values (1, 'a'), (2, 'b'), (3, 'c')");
    let before = rows(&mut s, "select id, v from t order by id");

    let (result, changed) = s
        .capture(
            "update t set v = concat(v, '!') where id >= 2",
            CaptureInputs::default(),
        )
        .expect("capture");
    assert!(
        matches!(result, SqlResult::Affected { rows: 2, .. }),
        "{result:?}"
    );
    let got: Vec<_> = changed.iter().map(key_and_images).collect();
    assert_eq!(
        got,
        vec![
            ("t".into(), vec![Value::Int(2)], row(2, "b"), row(2, "b!")),
            ("t".into(), vec![Value::Int(3)], row(3, "c"), row(3, "c!")),
        ]
    );

    let (_, changed) = s
        .capture("insert into t values (4, 'd')", CaptureInputs::default())
        .expect("capture insert");
    let got: Vec<_> = changed.iter().map(key_and_images).collect();
    assert_eq!(
        got,
        vec![("t".into(), vec![Value::Int(4)], None, row(4, "d"))]
    );

    let (_, changed) = s
        .capture("delete from t where id = 1", CaptureInputs::default())
        .expect("delete");
    let got: Vec<_> = changed.iter().map(key_and_images).collect();
    assert_eq!(
        got,
        vec![("t".into(), vec![Value::Int(1)], row(1, "a"), None)]
    );

    let (_, changed) = s
        .capture("replace into t values (2, 'z')", CaptureInputs::default())
        .expect("replace");
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].after, row(2, "z"));

    // An UPDATE that matches nothing changes no row.
    let (result, changed) = s
        .capture(
            "update t set v = 'q' where id = 99",
            CaptureInputs::default(),
        )
        .expect("no match");
    assert!(matches!(result, SqlResult::Affected { rows: 0, .. }));
    assert!(changed.is_empty());

    assert_eq!(rows(&mut s, "select id, v from t order by id"), before);
    // The session is usable as before (no transaction left open).
    run(&mut s, "insert into t values (5, 'e')");
    assert_eq!(
        rows(&mut s, "select count(*) from t"),
        vec![vec!["4".to_string()]]
    );
}

#[test]
fn capture_refuses_what_it_cannot_carry() {
    let c = cluster(1, 1, "32M");
    let mut s = session(&c);
    run(&mut s, "create table t (id int primary key, v int)");
    let e = s
        .capture("select * from t", CaptureInputs::default())
        .err()
        .expect("select");
    assert!(e.to_string().contains("only INSERT"), "{e}");
    let e = s
        .capture(
            "insert into t values (1, 1); insert into t values (2, 2)",
            CaptureInputs::default(),
        )
        .err()
        .expect("two statements");
    assert!(e.to_string().contains("one at a time"), "{e}");
    // A statement error is the statement's (and nothing stays locked or written).
    run(&mut s, "insert into t values (1, 1)");
    let e = s
        .capture("insert into t values (1, 2)", CaptureInputs::default())
        .err()
        .expect("duplicate");
    assert_eq!(e.code, 630, "{e}");
    run(&mut s, "begin");
    let e = s
        .capture("update t set v = 3", CaptureInputs::default())
        .err()
        .expect("in a transaction");
    assert!(
        e.to_string().contains("inside the session's transaction"),
        "{e}"
    );
    run(&mut s, "rollback");
    assert_eq!(rows(&mut s, "select v from t"), vec![vec!["1".to_string()]]);
}

#[test]
fn only_row_changing_statements_are_captured() {
    for sql in [
        "INSERT INTO t VALUES (1)",
        "  replace into t values (1)",
        "update t set a=1",
        "DELETE FROM t",
    ] {
        assert!(changes_rows(sql), "{sql}");
    }
    for sql in [
        "SELECT 1",
        "CREATE TABLE t (a INT)",
        "SHOW TABLES",
        "insertx",
        "",
    ] {
        assert!(!changes_rows(sql), "{sql}");
    }
}

#[test]
fn a_captured_insert_without_primary_key_gives_stand_in_hidden_keys() {
    let c = cluster(2, 2, "32M");
    let mut s = session(&c);
    run(&mut s, "create table h (a int, b int)");
    // Rows already there hold low hidden keys (the engine's own counter here).
    run(&mut s, "insert into h values (1, 1), (2, 2)");
    let (result, changed) = s
        .capture(
            "insert into h values (3, 3), (4, 4)",
            CaptureInputs::default(),
        )
        .expect("capture");
    assert!(
        matches!(
            result,
            SqlResult::Affected {
                rows: 2,
                last_insert_id: None,
                ..
            }
        ),
        "{result:?}"
    );
    let keys: Vec<i128> = changed
        .iter()
        .map(|r| {
            assert!(r.before.is_none(), "a new row");
            let after = r.after.as_ref().expect("after image");
            let pk = r.table.def.primary_key[0];
            assert_eq!(after[pk], r.key[0], "the image holds the key");
            r.key[0].as_i128().expect("a number")
        })
        .collect();
    let base = i128::from(CAPTURE_HIDDEN_KEY_BASE);
    assert_eq!(
        keys,
        vec![base, base + 1],
        "consecutive stand-ins from the base"
    );
    // Nothing was written, and an UPDATE's rows keep their keys.
    assert_eq!(
        rows(&mut s, "select count(*) from h"),
        vec![vec!["2".to_string()]]
    );
    let (_, changed) = s
        .capture("update h set b = 9 where a = 1", CaptureInputs::default())
        .expect("capture update");
    assert_eq!(changed.len(), 1);
    assert!(changed[0].key[0].as_i128().expect("key") < base);
}
