//! Round trips of every column type, default kind and table shape; damaged and random
//! input is an error 2316, never a panic.

use super::*;
use crate::schema::HIDDEN_PK_NAME;

const MAGIC: [u8; 4] = *b"TEST";

fn int(bytes: u8, unsigned: bool) -> ColumnType {
    ColumnType::Int { bytes, unsigned }
}

fn utf8(len: u32) -> ColumnType {
    ColumnType::Varchar {
        len,
        charset: Charset::Utf8mb4,
    }
}

/// A table using every column type, a default of every value kind, auto-increment,
/// a composite key, ordered and unique indexes, a disk column and a tablespace.
pub(crate) fn every_type_table() -> TableDef {
    let d = |y, m, dd| Date::new(y, m, dd).expect("date");
    let cols = vec![
        Column::new("k1", int(4, false))
            .primary_key()
            .auto_increment(),
        Column::new(
            "k2",
            ColumnType::Char {
                len: 10,
                charset: Charset::Latin1,
            },
        )
        .primary_key(),
        Column::new("ti", int(1, false)).default_value(Value::Int(-7)),
        Column::new("su", int(2, true)).default_value(Value::UInt(65535)),
        Column::new("mi", int(3, false)),
        Column::new("bu", int(8, true)).default_value(Value::UInt(u64::MAX)),
        Column::new("bs", int(8, false)).default_value(Value::Int(i64::MIN)),
        Column::new("f", ColumnType::Float).default_value(Value::Float(-1.5e-7)),
        Column::new("db", ColumnType::Double).default_value(Value::Double(std::f64::consts::PI)),
        Column::new(
            "dec",
            ColumnType::Decimal {
                precision: 30,
                scale: 4,
            },
        )
        .default_value(Value::Decimal(Decimal {
            mantissa: -123_456_789_012_345_678_901_234_567,
            scale: 4,
        })),
        Column::new(
            "c3",
            ColumnType::Char {
                len: 3,
                charset: Charset::Utf8mb3,
            },
        )
        .default_value(Value::Str("é€x".into())),
        Column::new("vc", utf8(300))
            .not_null()
            .default_value(Value::Str(String::new())),
        Column::new("bin", ColumnType::Binary { len: 4 })
            .default_value(Value::Bytes(vec![0, 255, 1, 2])),
        Column::new("vb", ColumnType::Varbinary { len: 700 }).default_value(Value::Null),
        Column::new("dt", ColumnType::Date).default_value(Value::Date(d(2024, 2, 29))),
        Column::new("dtt", ColumnType::Datetime).default_value(Value::Datetime(Datetime {
            date: d(1999, 12, 31),
            hour: 23,
            minute: 59,
            second: 58,
        })),
        Column::new("ts", ColumnType::Timestamp).default_value(Value::Datetime(Datetime {
            date: d(2020, 1, 1),
            hour: 0,
            minute: 0,
            second: 1,
        })),
        Column::new("tm", ColumnType::Time).default_value(Value::Time(-3600 * 838)),
        Column::new(
            "tb",
            ColumnType::Blob {
                kind: BlobKind::Tiny,
                charset: None,
            },
        ),
        Column::new(
            "bl",
            ColumnType::Blob {
                kind: BlobKind::Regular,
                charset: None,
            },
        )
        .default_value(Value::Bytes(vec![1, 2])),
        Column::new(
            "mt",
            ColumnType::Blob {
                kind: BlobKind::Medium,
                charset: Some(Charset::Utf8mb4),
            },
        )
        .default_value(Value::Str("ü".into())),
        Column::new(
            "lt",
            ColumnType::Blob {
                kind: BlobKind::Long,
                charset: Some(Charset::Latin1),
            },
        ),
        {
            let mut c = Column::new("on_disk", utf8(100));
            c.storage = StorageType::Disk;
            c
        },
    ];
    let mut t = TableDef::new(
        42,
        "every_type",
        cols,
        &["k2".into(), "k1".into()],
        vec![
            (
                "ix_f".into(),
                IndexKind::OrderedIndex,
                vec!["f".into(), "db".into()],
            ),
            (
                "ux_vc".into(),
                IndexKind::UniqueHashIndex,
                vec!["vc".into()],
            ),
        ],
        8,
    )
    .expect("valid table");
    t.tablespace = Some("ts_1".into());
    t
}

/// No key (NDB's hidden `$PK`), not logged.
pub(crate) fn hidden_pk_table() -> TableDef {
    let mut t = TableDef::new(
        7,
        "nokey",
        vec![Column::new("a", utf8(20)), Column::new("b", int(4, true))],
        &[],
        vec![("ib".into(), IndexKind::OrderedIndex, vec!["b".into()])],
        1,
    )
    .expect("valid");
    t.logging = false;
    t
}

fn encoded(t: &TableDef) -> Vec<u8> {
    let mut e = Encoder::new();
    encode_table_def(&mut e, t);
    e.into_bytes()
}

fn decoded(bytes: &[u8]) -> Result<TableDef> {
    let mut d = Decoder::new(bytes);
    let t = decode_table_def(&mut d)?;
    d.finish()?;
    Ok(t)
}

/// Exact equality: every field, the recomputed layout included (TableDef has no
/// PartialEq because RowLayout has none).
pub(crate) fn same_def(a: &TableDef, b: &TableDef) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[test]
fn every_table_shape_round_trips_exactly() {
    for t in [every_type_table(), hidden_pk_table()] {
        let bytes = encoded(&t);
        let back = decoded(&bytes).expect("decodes");
        assert!(same_def(&t, &back), "{t:?}\n!=\n{back:?}");
        assert_eq!(encoded(&back), bytes);
    }
    let h = decoded(&encoded(&hidden_pk_table())).unwrap();
    assert!(h.has_hidden_pk());
    assert_eq!(h.columns[h.primary_key[0]].name, HIDDEN_PK_NAME);
    assert!(!h.logging);
    let e = decoded(&encoded(&every_type_table())).unwrap();
    assert_eq!(e.primary_key, vec![1, 0]);
    assert_eq!(e.tablespace.as_deref(), Some("ts_1"));
    assert_eq!(e.partitions, 8);
    assert_eq!(e.columns[7].default, Some(Value::Float(-1.5e-7)));
}

#[test]
fn every_value_kind_round_trips_bit_for_bit() {
    let values = [
        Value::Null,
        Value::Int(-1),
        Value::UInt(u64::MAX),
        Value::Float(f32::from_bits(0x7fc0_0001)),
        Value::Double(-0.0),
        Value::Decimal(Decimal {
            mantissa: i128::MIN,
            scale: 30,
        }),
        Value::Str("ñ".into()),
        Value::Bytes(vec![]),
        Value::Date(Date {
            year: 1,
            month: 1,
            day: 1,
        }),
        Value::Time(i32::MIN),
    ];
    for v in values {
        let mut e = Encoder::new();
        encode_value(&mut e, &v);
        let b = e.into_bytes();
        let mut d = Decoder::new(&b);
        let back = decode_value(&mut d).unwrap();
        d.finish().unwrap();
        let mut e2 = Encoder::new();
        encode_value(&mut e2, &back);
        assert_eq!(e2.into_bytes(), b, "{v:?}");
    }
}

#[test]
fn framed_file_verifies_magic_version_length_and_checksum() {
    let body = encoded(&every_type_table());
    let file = seal_file(MAGIC, 3, &body);
    assert_eq!(open_file(&file, MAGIC, 3).unwrap(), &body[..]);
    assert_eq!(open_file(&file, *b"XXXX", 3).unwrap_err().code, 2316);
    assert_eq!(open_file(&file, MAGIC, 4).unwrap_err().code, 2316);
    // Every single-bit flip and every truncation is detected.
    for i in 0..file.len() {
        let mut f = file.clone();
        f[i] ^= 1 << (i % 8);
        assert_eq!(
            open_file(&f, MAGIC, 3).unwrap_err().code,
            2316,
            "flip at {i}"
        );
        assert_eq!(
            open_file(&file[..i], MAGIC, 3).unwrap_err().code,
            2316,
            "cut at {i}"
        );
    }
}

#[test]
fn garbage_bodies_are_errors_not_panics() {
    let body = encoded(&every_type_table());
    // Truncated bodies.
    for i in 0..body.len() {
        assert_eq!(decoded(&body[..i]).unwrap_err().code, 2316, "cut at {i}");
    }
    // Flipped bytes (no CRC here: the decoder's own checks), and pseudo-random bodies.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..body.len() {
        let mut b = body.clone();
        b[i] ^= (next() as u8) | 1;
        if let Err(e) = decoded(&b) {
            assert_eq!(e.code, 2316);
        }
    }
    for len in 0..400 {
        let b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if let Err(e) = decoded(&b) {
            assert_eq!(e.code, 2316);
        }
        let _ = open_file(&b, MAGIC, 1);
    }
}

#[test]
fn a_definition_table_def_new_would_change_is_rejected() {
    let mut t = hidden_pk_table();
    // A nullable key column: TableDef::new would make it NOT NULL.
    t.columns[t.primary_key[0]].nullable = true;
    assert_eq!(decoded(&encoded(&t)).unwrap_err().code, 2316);
    // A default of another kind than TableDef::new leaves (a string for an integer).
    let mut t = hidden_pk_table();
    t.columns[1].default = Some(Value::Str("12".into()));
    assert_eq!(decoded(&encoded(&t)).unwrap_err().code, 2316);
    let mut t = hidden_pk_table();
    t.indexes[0].columns = vec![99];
    assert_eq!(decoded(&encoded(&t)).unwrap_err().code, 2316);
}
