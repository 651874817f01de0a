//! Storing a value into a column, as MySQL's INSERT and UPDATE do: the value is converted
//! to the column's type (numbers rounded, strings parsed by their numeric prefix, dates
//! parsed), then checked. In strict mode (the default) a value that does not fit is an
//! error naming the column and the row — 1406 data too long, 1264 out of range, 1366 /
//! 1292 incorrect value, 1265 data truncated, 1048 NULL into NOT NULL; with INSERT IGNORE
//! it is adjusted instead (clamped, truncated, implicit default), as MySQL does.
//!
//! Invariant: the result is a canonical value of the column type (what the engine's
//! `coerce` accepts unchanged), so engine-side coercion cannot fail on it; CHAR values
//! are stored without trailing spaces and BINARY(n) values are padded with NUL bytes.

use super::errors;
use super::eval;
use crate::error::{NdbError, Result};
use crate::schema::value::coerce;
use crate::schema::{Charset, Column, ColumnType, Date, Datetime, Decimal, Value};

/// The value a NOT NULL column gets implicitly (non-strict mode).
pub(crate) fn implicit_default(ty: &ColumnType) -> Value {
    match ty {
        ColumnType::Int { unsigned: true, .. } => Value::UInt(0),
        ColumnType::Int { .. } => Value::Int(0),
        ColumnType::Float => Value::Float(0.0),
        ColumnType::Double => Value::Double(0.0),
        ColumnType::Decimal { scale, .. } => Value::Decimal(Decimal {
            mantissa: 0,
            scale: *scale,
        }),
        ColumnType::Char { .. } | ColumnType::Varchar { .. } => Value::Str(String::new()),
        ColumnType::Blob {
            charset: Some(_), ..
        } => Value::Str(String::new()),
        ColumnType::Binary { len } => Value::Bytes(vec![0; *len as usize]),
        ColumnType::Varbinary { .. } | ColumnType::Blob { .. } => Value::Bytes(Vec::new()),
        ColumnType::Date => Value::Date(Date {
            year: 0,
            month: 0,
            day: 0,
        }),
        ColumnType::Datetime => Value::Datetime(Datetime {
            date: Date {
                year: 0,
                month: 0,
                day: 0,
            },
            hour: 0,
            minute: 0,
            second: 0,
        }),
        ColumnType::Timestamp => Value::Datetime(Datetime::from_epoch_seconds(1)),
        ColumnType::Time => Value::Time(0),
    }
}

fn type_word(ty: &ColumnType) -> &'static str {
    match ty {
        ColumnType::Int { .. } => "integer",
        ColumnType::Decimal { .. } => "decimal",
        ColumnType::Float | ColumnType::Double => "double",
        ColumnType::Date => "date",
        ColumnType::Datetime => "datetime",
        ColumnType::Timestamp => "datetime",
        ColumnType::Time => "time",
        _ => "string",
    }
}

/// Converts `v` for storing in `col`; `row` is the 1-based row number for messages.
pub(crate) fn assign(v: Value, col: &Column, row: u64, strict: bool) -> Result<Value> {
    if v.is_null() {
        if col.nullable || col.auto_increment {
            return Ok(Value::Null);
        }
        if strict {
            return Err(errors::cannot_be_null(&col.name));
        }
        return Ok(implicit_default(&col.ty));
    }
    let shown = eval::to_text(&v).unwrap_or_default();
    let bad = |e: NdbError| -> Result<Value> {
        if strict {
            Err(e)
        } else {
            Ok(implicit_default(&col.ty))
        }
    };
    let ty = col.ty;
    let converted: Value = match ty {
        ColumnType::Int { .. } => {
            let n: i128 = match &v {
                Value::Int(i) => *i as i128,
                Value::UInt(u) => *u as i128,
                Value::Decimal(d) => d.rescale(0).map(|d| d.mantissa).unwrap_or(i128::MAX),
                Value::Double(f) => round_f(*f),
                Value::Float(f) => round_f(*f as f64),
                Value::Str(_) | Value::Bytes(_) => {
                    let s = shown.trim();
                    match s.parse::<i128>() {
                        Ok(n) => n,
                        Err(_) => {
                            let (f, whole) = eval::parse_prefix(s);
                            let has_prefix = f != 0.0 || s.starts_with(['0', '.', '-', '+']);
                            if !whole {
                                if !has_prefix || s.is_empty() {
                                    return bad(errors::incorrect_value(
                                        "integer", &shown, &col.name, row,
                                    ));
                                }
                                if strict {
                                    return Err(errors::truncated(&col.name, row));
                                }
                            }
                            round_f(f)
                        }
                    }
                }
                other => eval::to_i128(other).unwrap_or(0),
            };
            let (lo, hi) = ty
                .int_range()
                .unwrap_or((i64::MIN as i128, u64::MAX as i128));
            let n = if n < lo || n > hi {
                if strict {
                    return Err(errors::out_of_range(&col.name, row));
                }
                n.clamp(lo, hi)
            } else {
                n
            };
            if matches!(ty, ColumnType::Int { unsigned: true, .. }) {
                Value::UInt(n as u64)
            } else {
                Value::Int(n as i64)
            }
        }
        ColumnType::Float | ColumnType::Double => {
            let f = match &v {
                Value::Str(_) | Value::Bytes(_) => {
                    let (f, whole) = eval::parse_prefix(&shown);
                    if !whole {
                        if shown.trim().is_empty()
                            || (f == 0.0 && !shown.trim().starts_with(['0', '.']))
                        {
                            return bad(errors::incorrect_value("double", &shown, &col.name, row));
                        }
                        if strict {
                            return Err(errors::truncated(&col.name, row));
                        }
                    }
                    f
                }
                other => eval::to_f64(other).unwrap_or(0.0),
            };
            if ty == ColumnType::Float {
                if f.is_finite() && f.abs() > f32::MAX as f64 {
                    if strict {
                        return Err(errors::out_of_range(&col.name, row));
                    }
                    Value::Float(f.signum() as f32 * f32::MAX)
                } else {
                    Value::Float(f as f32)
                }
            } else {
                Value::Double(f)
            }
        }
        ColumnType::Decimal { precision, scale } => {
            let d = match &v {
                Value::Int(i) => Some(Decimal {
                    mantissa: *i as i128,
                    scale: 0,
                }),
                Value::UInt(u) => Some(Decimal {
                    mantissa: *u as i128,
                    scale: 0,
                }),
                Value::Decimal(d) => Some(*d),
                Value::Double(f) => Decimal::from_f64(*f, (scale + 2).min(30)),
                Value::Float(f) => Decimal::from_f64(*f as f64, (scale + 2).min(30)),
                _ => match Decimal::parse(shown.trim()) {
                    Some(d) => Some(d),
                    None => {
                        let (f, whole) = eval::parse_prefix(&shown);
                        if !whole {
                            return bad(errors::incorrect_value("decimal", &shown, &col.name, row));
                        }
                        Decimal::from_f64(f, scale)
                    }
                },
            };
            let max = 10i128.pow(precision as u32) - 1;
            match d.and_then(|d| d.rescale(scale)) {
                Some(d) if d.mantissa.abs() <= max => Value::Decimal(d),
                other => {
                    if strict {
                        return Err(errors::out_of_range(&col.name, row));
                    }
                    let neg = other.is_some_and(|d| d.mantissa < 0);
                    Value::Decimal(Decimal {
                        mantissa: if neg { -max } else { max },
                        scale,
                    })
                }
            }
        }
        ColumnType::Char { len, charset } | ColumnType::Varchar { len, charset } => {
            let mut s = match v {
                Value::Str(s) => s,
                Value::Bytes(b) => match String::from_utf8(b) {
                    Ok(s) => s,
                    Err(e) => {
                        let b = e.into_bytes();
                        return bad(errors::incorrect_value(
                            "string",
                            &hex_escape(&b),
                            &col.name,
                            row,
                        ));
                    }
                },
                other => shown_of(&other),
            };
            if let Some(c) = bad_char(&s, charset) {
                return bad(errors::incorrect_value(
                    "string",
                    &hex_escape(c.to_string().as_bytes()),
                    &col.name,
                    row,
                ));
            }
            if matches!(ty, ColumnType::Char { .. }) {
                let t = s.trim_end_matches(' ').len();
                s.truncate(t);
            }
            let n = s.chars().count();
            if n > len as usize {
                if strict {
                    return Err(errors::data_too_long(&col.name, row));
                }
                s = s.chars().take(len as usize).collect();
            }
            Value::Str(s)
        }
        ColumnType::Blob {
            kind,
            charset: Some(cs),
        } => {
            let mut s = match v {
                Value::Str(s) => s,
                Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                other => shown_of(&other),
            };
            if let Some(c) = bad_char(&s, cs) {
                return bad(errors::incorrect_value(
                    "string",
                    &hex_escape(c.to_string().as_bytes()),
                    &col.name,
                    row,
                ));
            }
            if s.len() as u64 > kind.max_length() {
                if strict {
                    return Err(errors::data_too_long(&col.name, row));
                }
                let mut cut = kind.max_length() as usize;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                s.truncate(cut);
            }
            Value::Str(s)
        }
        ColumnType::Binary { len } | ColumnType::Varbinary { len } => {
            let mut b = bytes_of(v);
            if b.len() > len as usize {
                if strict {
                    return Err(errors::data_too_long(&col.name, row));
                }
                b.truncate(len as usize);
            }
            if let ColumnType::Binary { len } = ty {
                b.resize(len as usize, 0);
            }
            Value::Bytes(b)
        }
        ColumnType::Blob { kind, .. } => {
            let mut b = bytes_of(v);
            if b.len() as u64 > kind.max_length() {
                if strict {
                    return Err(errors::data_too_long(&col.name, row));
                }
                b.truncate(kind.max_length() as usize);
            }
            Value::Bytes(b)
        }
        ColumnType::Date | ColumnType::Datetime | ColumnType::Timestamp => {
            let d = match &v {
                Value::Datetime(d) => Some(*d),
                Value::Date(d) => Some(Datetime {
                    date: *d,
                    hour: 0,
                    minute: 0,
                    second: 0,
                }),
                other => eval::as_datetime(other),
            };
            let Some(d) = d else {
                return bad(errors::incorrect_value(
                    type_word(&ty),
                    &shown,
                    &col.name,
                    row,
                ));
            };
            if ty == ColumnType::Timestamp {
                let s = d.epoch_seconds();
                if !(1..=i32::MAX as i64).contains(&s) {
                    return bad(errors::incorrect_value("datetime", &shown, &col.name, row));
                }
            }
            if ty == ColumnType::Date {
                Value::Date(d.date)
            } else {
                Value::Datetime(d)
            }
        }
        ColumnType::Time => match coerce(
            match &v {
                Value::Int(_) | Value::UInt(_) => Value::Str(int_time_text(&v)),
                other => Value::Str(shown_of(other)),
            },
            &ty,
            &col.name,
        ) {
            Ok(t) => t,
            Err(_) => {
                return bad(errors::incorrect_value("time", &shown, &col.name, row));
            }
        },
    };
    // canonical for the engine; anything left is reported in MySQL's terms
    coerce(converted, &ty, &col.name).map_err(|e| {
        if e.code == 4209 && e.message.contains("out of range") {
            errors::out_of_range(&col.name, row)
        } else if e.code == 4209 {
            errors::data_too_long(&col.name, row)
        } else {
            errors::incorrect_value(type_word(&ty), &shown, &col.name, row)
        }
    })
}

fn int_time_text(v: &Value) -> String {
    // 123456 -> 12:34:56
    let n = eval::to_i128(v).unwrap_or(0);
    let a = n.unsigned_abs();
    format!(
        "{}{}:{:02}:{:02}",
        if n < 0 { "-" } else { "" },
        a / 10000,
        a / 100 % 100,
        a % 100
    )
}

fn round_f(f: f64) -> i128 {
    if !f.is_finite() {
        return if f > 0.0 { i128::MAX } else { i128::MIN };
    }
    f.round_ties_even().clamp(-1.7e38, 1.7e38) as i128
}

fn shown_of(v: &Value) -> String {
    eval::to_text(v).unwrap_or_default()
}

fn bytes_of(v: Value) -> Vec<u8> {
    match v {
        Value::Bytes(b) => b,
        Value::Str(s) => s.into_bytes(),
        other => shown_of(&other).into_bytes(),
    }
}

fn bad_char(s: &str, cs: Charset) -> Option<char> {
    match cs {
        Charset::Latin1 => s.chars().find(|c| (*c as u32) > 0xFF),
        Charset::Utf8mb3 => s.chars().find(|c| c.len_utf8() > 3),
        Charset::Utf8mb4 => None,
    }
}

fn hex_escape(b: &[u8]) -> String {
    b.iter().take(8).map(|x| format!("\\x{x:02X}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(ty: ColumnType) -> Column {
        Column::new("c", ty).not_null()
    }

    #[test]
    fn strict_assignment() {
        let int = col(ColumnType::Int {
            bytes: 1,
            unsigned: false,
        });
        assert_eq!(
            assign(Value::Str(" 12 ".into()), &int, 1, true),
            Ok(Value::Int(12))
        );
        assert_eq!(
            assign(
                Value::Decimal(Decimal {
                    mantissa: 25,
                    scale: 1
                }),
                &int,
                1,
                true
            ),
            Ok(Value::Int(3))
        );
        assert_eq!(assign(Value::Double(2.5), &int, 1, true), Ok(Value::Int(2)));
        let e = assign(Value::Int(200), &int, 3, true).expect_err("range");
        assert_eq!(
            errors::render_error(&e),
            "ERROR 1264 (22003): Out of range value for column 'c' at row 3"
        );
        assert_eq!(assign(Value::Int(200), &int, 3, false), Ok(Value::Int(127)));
        let e = assign(Value::Str("abc".into()), &int, 1, true).expect_err("text");
        assert_eq!(e.mysql_code, 1366);
        let e = assign(Value::Str("12abc".into()), &int, 1, true).expect_err("truncated");
        assert_eq!(e.mysql_code, 1265);
        let e = assign(Value::Null, &int, 1, true).expect_err("null");
        assert_eq!(
            errors::render_error(&e),
            "ERROR 1048 (23000): Column 'c' cannot be null"
        );
        let vc = col(ColumnType::Varchar {
            len: 3,
            charset: Charset::Latin1,
        });
        let e = assign(Value::Str("abcd".into()), &vc, 2, true).expect_err("long");
        assert_eq!(
            errors::render_error(&e),
            "ERROR 1406 (22001): Data too long for column 'c' at row 2"
        );
        assert_eq!(
            assign(Value::Int(5), &vc, 1, true),
            Ok(Value::Str("5".into()))
        );
        let e = assign(Value::Str("€".into()), &vc, 1, true).expect_err("latin1");
        assert_eq!(e.mysql_code, 1366);
        let ch = col(ColumnType::Char {
            len: 4,
            charset: Charset::Utf8mb4,
        });
        assert_eq!(
            assign(Value::Str("ab  ".into()), &ch, 1, true),
            Ok(Value::Str("ab".into()))
        );
        let bin = col(ColumnType::Binary { len: 3 });
        assert_eq!(
            assign(Value::Str("a".into()), &bin, 1, true),
            Ok(Value::Bytes(vec![b'a', 0, 0]))
        );
        let dec = col(ColumnType::Decimal {
            precision: 5,
            scale: 2,
        });
        assert_eq!(
            assign(Value::Str("1.005".into()), &dec, 1, true),
            Ok(Value::Decimal(Decimal {
                mantissa: 101,
                scale: 2
            }))
        );
        assert_eq!(
            assign(Value::Int(1000), &dec, 1, true).map_err(|e| e.mysql_code),
            Err(1264)
        );
        let date = col(ColumnType::Date);
        assert_eq!(
            assign(Value::Str("2020-02-30".into()), &date, 1, true).map_err(|e| e.mysql_code),
            Err(1292)
        );
    }
}
