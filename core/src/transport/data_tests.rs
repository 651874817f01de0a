//! Round trips and damage checks of every data-path message (`transport::data`).

use super::*;

fn op(t: OpType) -> KeyOp {
    KeyOp {
        op: t,
        database: "test".into(),
        table: "t1".into(),
        key: vec![Value::Int(7)],
        values: vec![(1, Value::Str("x".into())), (2, Value::Null)],
        columns: vec![0, 1],
    }
}

/// A session's variables: a user variable and a changed system variable.
fn vars() -> crate::sql::SessionVars {
    crate::sql::SessionVars::from_pairs(vec![
        ("@x".into(), Value::Int(7)),
        ("ndb_table_no_logging".into(), Value::Int(1)),
    ])
    .expect("valid variables")
}

pub(crate) fn every_data_message() -> Vec<DataMsg> {
    let txn = TxnKey { tc: 2, id: 99 };
    vec![
        DataMsg::ClusterReq,
        DataMsg::ClusterConf {
            config_text: "[ndbd]\n".into(),
            nodes: vec![(2, "127.0.0.1:1".into())],
        },
        DataMsg::SqlReq {
            req: 1,
            database: "test".into(),
            sql: "CREATE TABLE t (a INT PRIMARY KEY)".into(),
            vars: vars(),
        },
        DataMsg::SqlConf {
            req: 1,
            code: 0,
            class: 0,
            text: String::new(),
            mysql_code: 0,
            vars: Some(vars()),
            results: vec![
                crate::sql::SqlResult::Rows {
                    columns: vec!["id".into(), "b".into()],
                    rows: vec![
                        vec![Value::UInt(1), Value::Null],
                        vec![Value::UInt(2), Value::Str("x".into())],
                    ],
                },
                crate::sql::SqlResult::Affected {
                    rows: 3,
                    last_insert_id: Some(7),
                    info: Some("Records: 3  Duplicates: 0  Warnings: 0".into()),
                },
                crate::sql::SqlResult::Affected {
                    rows: 0,
                    last_insert_id: None,
                    info: None,
                },
            ],
        },
        DataMsg::SqlConf {
            req: 2,
            code: 1146,
            class: 1,
            text: "no such table".into(),
            mysql_code: 1146,
            vars: None,
            results: Vec::new(),
        },
        DataMsg::SchemaReq {
            req: 1,
            database: "test".into(),
            sql: "DROP TABLE t".into(),
            vars: Default::default(),
        },
        DataMsg::SqlCaptureReq {
            req: 2,
            database: "test".into(),
            sql: "UPDATE t SET b = 'y' WHERE a < 3".into(),
            auto_increment_floor: 0,
            overlay: Vec::new(),
            given_rows: Some(vec![vec![Value::Int(1)], vec![Value::Int(2)]]),
            vars: vars(),
        },
        DataMsg::SqlCaptureReq {
            req: 4,
            database: "test".into(),
            sql: "INSERT INTO t (b) VALUES ('x')".into(),
            auto_increment_floor: 1 << 40,
            overlay: vec![
                RowChange {
                    database: "test".into(),
                    table: "t".into(),
                    key: vec![Value::Int(9)],
                    before: None,
                    after: Some(vec![Value::Int(9), Value::Str("s".into())]),
                },
                RowChange {
                    database: "test".into(),
                    table: "t".into(),
                    key: vec![Value::Int(8)],
                    before: None,
                    after: None,
                },
            ],
            given_rows: None,
            vars: Default::default(),
        },
        DataMsg::SqlCaptureConf {
            req: 2,
            code: 0,
            class: 0,
            text: "Query OK, 2 rows affected".into(),
            changes: vec![
                RowChange {
                    database: "test".into(),
                    table: "t".into(),
                    key: vec![Value::Int(1)],
                    before: Some(vec![Value::Int(1), Value::Str("x".into())]),
                    after: Some(vec![Value::Int(1), Value::Str("y".into())]),
                },
                RowChange {
                    database: "test".into(),
                    table: "t".into(),
                    key: vec![Value::Int(2)],
                    before: None,
                    after: Some(vec![Value::Int(2), Value::Null]),
                },
            ],
            affected: 2,
            info: "Rows matched: 2  Changed: 2  Warnings: 0".into(),
            last_insert_id: 0,
            mysql_code: 0,
        },
        DataMsg::SqlCaptureConf {
            req: 2,
            code: 1062,
            class: 3,
            text: "Duplicate entry '1' for key 'PRIMARY'".into(),
            changes: Vec::new(),
            affected: 0,
            info: String::new(),
            last_insert_id: 7,
            mysql_code: 1062,
        },
        DataMsg::TableReq {
            req: 3,
            database: "test".into(),
            table: "t".into(),
        },
        DataMsg::TableConf {
            req: 3,
            code: 723,
            class: 1,
            message: "No such table existed".into(),
            def: None,
        },
        DataMsg::TcKeyReq {
            req: 4,
            txn: 0,
            exec: TcExec::Commit,
            ops: vec![op(OpType::Insert), op(OpType::ReadCommitted)],
            ignore_errors: false,
        },
        DataMsg::TcKeyReq {
            req: 5,
            txn: 12,
            exec: TcExec::NoCommit,
            ops: vec![op(OpType::ReadExclusive)],
            ignore_errors: true,
        },
        DataMsg::TcKeyReq {
            req: 6,
            txn: 12,
            exec: TcExec::Rollback,
            ops: Vec::new(),
            ignore_errors: false,
        },
        DataMsg::TcKeyConf {
            req: 4,
            txn: 12,
            gci: 17,
            results: vec![None, Some(vec![Value::UInt(3), Value::Double(1.5)])],
            failed: Vec::new(),
        },
        DataMsg::TcKeyConf {
            req: 5,
            txn: 12,
            gci: 0,
            results: vec![None, None],
            failed: vec![crate::transport::data::OpFailure {
                op: 1,
                code: 630,
                class: 1,
                message: "Tuple already existed when attempting to insert".into(),
            }],
        },
        DataMsg::TcKeyRef {
            req: 4,
            code: 630,
            class: 1,
            message: "Tuple already existed when attempting to insert".into(),
        },
        DataMsg::ReadReq {
            req: 5,
            database: "test".into(),
            table: "t".into(),
            columns: vec![1],
            keys: vec![Value::Int(1), Value::Int(2)],
        },
        DataMsg::ReadConf {
            req: 5,
            code: 0,
            class: 0,
            message: String::new(),
            found: vec![true, false],
            values: vec![Value::Bytes(vec![1, 2]), Value::Null],
        },
        DataMsg::ScanReq(Box::new(ScanReq {
            req: 6,
            scan: 11,
            database: "test".into(),
            table: "t".into(),
            index: "ix".into(),
            columns: vec![0, 2],
            low: Some((vec![Value::Int(3)], true)),
            high: Some((vec![Value::Int(9), Value::Str("z".into())], false)),
            descending: true,
            sorted: true,
            batch_rows: 64,
            filter: "SELECT * FROM `test`.`t` WHERE b LIKE 'z%'".into(),
            txn: Some(TxnKey {
                tc: 3,
                id: 7 << 32 | 5,
            }),
        })),
        DataMsg::ScanReq(Box::new(ScanReq {
            req: 7,
            scan: 12,
            database: "test".into(),
            table: "t".into(),
            index: String::new(),
            columns: Vec::new(),
            low: None,
            high: None,
            descending: false,
            sorted: false,
            batch_rows: 992,
            filter: String::new(),
            txn: None,
        })),
        DataMsg::ScanNextReq { req: 8, scan: 11 },
        DataMsg::ScanConf(Box::new(ScanConf {
            req: 8,
            scan: 11,
            code: 0,
            class: 0,
            message: String::new(),
            ncols: 2,
            values: vec![
                Value::Int(1),
                Value::Null,
                Value::Int(2),
                Value::Str("b".into()),
            ],
            done: false,
        })),
        DataMsg::ScanConf(Box::new(ScanConf {
            req: 9,
            scan: 12,
            code: 488,
            class: 4,
            message: "Too many active scans".into(),
            ncols: 0,
            values: Vec::new(),
            done: true,
        })),
        DataMsg::ScanCloseReq { scan: 11 },
        DataMsg::NdbinfoReq {
            req: 12,
            tables: vec![
                "ndbinfo.transporters".into(),
                "information_schema.files".into(),
            ],
        },
        DataMsg::NdbinfoConf {
            req: 12,
            tables: vec![
                (
                    "ndbinfo.transporters".into(),
                    vec![
                        vec![Value::UInt(2), Value::Str("CONNECTED".into())],
                        Vec::new(),
                    ],
                ),
                ("information_schema.files".into(), Vec::new()),
            ],
            truncated: true,
        },
        DataMsg::LqhPrepare {
            txn,
            backup: true,
            round: 3,
            ops: vec![(3, op(OpType::Write))],
            ignore_errors: true,
        },
        DataMsg::LqhPrepared {
            txn,
            backup: false,
            round: 2,
            code: 0,
            class: 0,
            message: String::new(),
            reads: vec![(0, None), (1, Some(vec![Value::Int(-1)]))],
            checks: vec![crate::transport::data::UniqueCheck {
                database: "db".into(),
                table: "t".into(),
                index: 0,
                values: vec![Value::Int(9)],
            }],
            failed: vec![crate::transport::data::OpFailure {
                op: 4,
                code: 626,
                class: 2,
                message: "Tuple did not exist".into(),
            }],
        },
        DataMsg::LqhCommit {
            txn,
            backup: true,
            gci_hi: 41,
        },
        DataMsg::LqhCommitted {
            txn,
            backup: true,
            gci: 5,
        },
        DataMsg::LqhAbort { txn },
        DataMsg::TxnStateReq { txn },
        DataMsg::TxnStateConf {
            txn,
            state: TxnState::Committed,
        },
        DataMsg::UniqueCheckReq {
            txn,
            round: 3,
            checks: vec![crate::transport::data::UniqueCheck {
                database: "db".into(),
                table: "t".into(),
                index: 1,
                values: vec![Value::Str("a@b".into()), Value::Int(-4)],
            }],
        },
        DataMsg::UniqueCheckConf {
            txn,
            round: 3,
            code: 893,
            class: 2,
            message: "Constraint violation".into(),
        },
        DataMsg::ReadyQuery,
        DataMsg::ReadySet {
            ready: vec![(2, 0), (3, 7)],
        },
        DataMsg::CopyReq {
            attempt: 2,
            since_gci: 0,
            lineage: 0,
            keep: Vec::new(),
        },
        DataMsg::CopyReq {
            attempt: 3,
            since_gci: 41,
            lineage: u64::MAX - 5,
            keep: vec![("test".into(), "CREATE TABLE `t` (...)".into())],
        },
        DataMsg::CopyMark {
            node: 3,
            mark: true,
        },
        DataMsg::CopyMarked {
            node: 3,
            mark: false,
        },
        DataMsg::CopySchema {
            attempt: 2,
            statements: vec![("test".into(), "CREATE DATABASE test".into())],
        },
        DataMsg::CopyAck {
            attempt: 2,
            code: 0,
            class: 0,
            message: String::new(),
        },
        DataMsg::CopyRows {
            attempt: 2,
            database: "test".into(),
            table: "t".into(),
            full_rows: 1,
            rows: vec![vec![Value::Int(1), Value::Null], vec![Value::Int(2)]],
        },
        DataMsg::CopyDigest {
            attempt: 2,
            database: "test".into(),
            table: "t".into(),
            buckets: 64,
            first: 62,
            entries: vec![(0, 0), (17, u128::MAX - 3)],
        },
        DataMsg::CopyRecheck {
            attempt: 2,
            database: "test".into(),
            table: "t".into(),
            buckets: vec![0, 5, 63],
        },
        DataMsg::CopyDone {
            attempt: 2,
            seq: 9,
            lineage: 77,
        },
        DataMsg::CopyAbort {
            attempt: 2,
            reason: "source lost".into(),
        },
        DataMsg::NodeReady { node: 3, seq: 9 },
        DataMsg::LeasePing { seq: 17 },
        DataMsg::LeasePong { seq: u64::MAX },
        DataMsg::GcpPrepare { round: 5 },
        DataMsg::GcpPrepared {
            round: 5,
            current_hi: 12,
        },
        DataMsg::GcpCommit {
            round: 5,
            new_hi: 13,
        },
        DataMsg::GcpCommitted { round: 5 },
        DataMsg::GcpSave {
            round: 5,
            gci_hi: 12,
        },
        DataMsg::GcpSaved {
            round: 5,
            gci_hi: 12,
        },
        DataMsg::GcpDurable { gci_hi: 12 },
        DataMsg::DurableReq {
            req: 4,
            gci: 12 << 32 | 3,
        },
        DataMsg::DurableConf {
            req: 4,
            code: 4008,
            class: 7,
            message: "timed out".into(),
            durable_hi: 0,
        },
        DataMsg::DurableConf {
            req: 5,
            code: 0,
            class: 0,
            message: String::new(),
            durable_hi: 13,
        },
    ]
}

#[test]
fn data_messages_round_trip_and_reject_damage() {
    for m in every_data_message() {
        let body = m.encode_body();
        assert_eq!(DataMsg::decode(m.kind(), &body).expect("decode"), m);
        for cut in 0..body.len() {
            assert!(
                DataMsg::decode(m.kind(), &body[..cut]).is_err(),
                "{m:?} cut at {cut} decoded"
            );
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(DataMsg::decode(m.kind(), &longer).is_err());
    }
}

#[test]
fn a_scan_batch_of_broken_rows_or_flags_is_refused() {
    let conf = ScanConf {
        req: 1,
        scan: 2,
        code: 0,
        class: 0,
        message: String::new(),
        ncols: 2,
        values: vec![Value::Int(1), Value::Int(2), Value::Int(3)],
        done: true,
    };
    let body = DataMsg::ScanConf(Box::new(conf.clone())).encode_body();
    assert!(matches!(
        DataMsg::decode(kind::SCAN_CONF, &body),
        Err(WireError::BadValue(_))
    ));
    let rows = ScanConf {
        values: vec![Value::Int(1), Value::Int(2), Value::Int(3), Value::Null],
        ..conf
    }
    .rows();
    assert_eq!(
        rows,
        vec![
            vec![Value::Int(1), Value::Int(2)],
            vec![Value::Int(3), Value::Null]
        ]
    );
    let req = DataMsg::ScanReq(Box::new(ScanReq {
        req: 1,
        scan: 1,
        database: "d".into(),
        table: "t".into(),
        index: String::new(),
        columns: Vec::new(),
        low: None,
        high: None,
        descending: false,
        sorted: false,
        batch_rows: 1,
        filter: String::new(),
        txn: None,
    }));
    let mut body = req.encode_body();
    // flags, batch_rows (u32), filter (u32 length, empty)
    let flags_at = body.len() - 9;
    body[flags_at] = 8;
    assert!(DataMsg::decode(kind::SCAN_REQ, &body).is_err());
    // "in a transaction" without the transaction that follows it
    body[flags_at] = 4;
    assert!(DataMsg::decode(kind::SCAN_REQ, &body).is_err());
}

#[test]
fn huge_counts_are_refused_without_allocating() {
    let mut e = Encoder::new();
    e.u64(1);
    e.u64(0);
    e.u8(TcExec::Commit as u8);
    e.u32(u32::MAX);
    let body = e.into_bytes();
    assert!(matches!(
        DataMsg::decode(kind::TC_KEY_REQ, &body),
        Err(WireError::BadValue(_))
    ));
}

#[test]
fn an_unknown_execute_type_is_refused() {
    let mut body = DataMsg::TcKeyReq {
        req: 1,
        txn: 9,
        exec: TcExec::NoCommit,
        ops: Vec::new(),
        ignore_errors: false,
    }
    .encode_body();
    // u64 request, u64 transaction, then the execute type.
    assert_eq!(body[16], 0);
    body[16] = 3;
    assert!(matches!(
        DataMsg::decode(kind::TC_KEY_REQ, &body),
        Err(WireError::BadValue("execute type"))
    ));
}
