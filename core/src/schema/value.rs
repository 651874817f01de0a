//! Values of columns as the API sees them, and their coercion to a column's type.
//!
//! `Value` is what users pass in and get back (from Python, C and SQL). Coercion
//! ([`coerce`]) checks a value against the column type — range, length in characters,
//! character set — and converts between compatible kinds (an integer into a DOUBLE, a
//! string into a DATE), returning NDB's errors for values that do not fit.

use super::types::{Charset, ColumnType};
use crate::error::{NdbError, Result, codes};
use std::cmp::Ordering;
use std::fmt;

/// Fixed-point decimal: `mantissa * 10^-scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decimal {
    pub mantissa: i128,
    pub scale: u8,
}

impl Decimal {
    /// Parses "12.50", "-3", ".5", "1e3" is not accepted.
    pub fn parse(s: &str) -> Option<Decimal> {
        let s = s.trim();
        let (neg, digits) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int_part, frac_part) = match digits.split_once('.') {
            Some((a, b)) => (a, b),
            None => (digits, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        if !int_part.bytes().all(|b| b.is_ascii_digit())
            || !frac_part.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        if int_part.len() + frac_part.len() > 38 {
            return None;
        }
        let mut mantissa: i128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa * 10 + (b - b'0') as i128;
        }
        Some(Decimal {
            mantissa: if neg { -mantissa } else { mantissa },
            scale: frac_part.len() as u8,
        })
    }

    /// Same value at another scale; rounds half away from zero when reducing the scale.
    pub fn rescale(self, scale: u8) -> Option<Decimal> {
        match scale.cmp(&self.scale) {
            Ordering::Equal => Some(self),
            Ordering::Greater => {
                let f = 10i128.checked_pow((scale - self.scale) as u32)?;
                Some(Decimal {
                    mantissa: self.mantissa.checked_mul(f)?,
                    scale,
                })
            }
            Ordering::Less => {
                let f = 10i128.checked_pow((self.scale - scale) as u32)?;
                let q = self.mantissa / f;
                let r = self.mantissa % f;
                let q = if r.abs() * 2 >= f {
                    q + self.mantissa.signum()
                } else {
                    q
                };
                Some(Decimal { mantissa: q, scale })
            }
        }
    }

    pub fn to_f64(self) -> f64 {
        self.mantissa as f64 / 10f64.powi(self.scale as i32)
    }

    pub fn from_f64(v: f64, scale: u8) -> Option<Decimal> {
        if !v.is_finite() {
            return None;
        }
        let m = (v * 10f64.powi(scale as i32)).round();
        if m.abs() >= 1e38 {
            return None;
        }
        Some(Decimal {
            mantissa: m as i128,
            scale,
        })
    }

    /// Number of digits before the decimal point.
    fn int_digits(self) -> u32 {
        let int = (self.mantissa / 10i128.pow(self.scale as u32)).unsigned_abs();
        if int == 0 { 0 } else { int.ilog10() + 1 }
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let neg = self.mantissa < 0;
        let abs = self.mantissa.unsigned_abs().to_string();
        let scale = self.scale as usize;
        let s = if scale == 0 {
            abs
        } else if abs.len() > scale {
            format!(
                "{}.{}",
                &abs[..abs.len() - scale],
                &abs[abs.len() - scale..]
            )
        } else {
            format!("0.{}{}", "0".repeat(scale - abs.len()), abs)
        };
        write!(f, "{}{}", if neg { "-" } else { "" }, s)
    }
}

/// DATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

/// DATETIME / TIMESTAMP (second precision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Datetime {
    pub date: Date,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl Date {
    pub fn new(year: u16, month: u8, day: u8) -> Option<Date> {
        if year > 9999 || month > 12 || day > 31 {
            return None;
        }
        if month != 0 && day > days_in_month(year, month) {
            return None;
        }
        Some(Date { year, month, day })
    }
    /// Packed as NDB's Date: `day | month << 5 | year << 9`.
    pub fn pack(self) -> u32 {
        self.day as u32 | (self.month as u32) << 5 | (self.year as u32) << 9
    }
    pub fn unpack(v: u32) -> Date {
        Date {
            day: (v & 31) as u8,
            month: ((v >> 5) & 15) as u8,
            year: (v >> 9) as u16,
        }
    }
    /// Days since 1970-01-01 (proleptic Gregorian).
    pub fn days_from_epoch(self) -> i64 {
        let (y, m, d) = (
            self.year as i64,
            self.month.max(1) as i64,
            self.day.max(1) as i64,
        );
        let y = if m <= 2 { y - 1 } else { y };
        let era = if y >= 0 { y } else { y - 399 } / 400;
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146097 + doe - 719468
    }
    pub fn from_days(z: i64) -> Date {
        let z = z + 719468;
        let era = if z >= 0 { z } else { z - 146096 } / 146097;
        let doe = z - era * 146097;
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        let y = yoe + era * 400;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        Date {
            year: (if m <= 2 { y + 1 } else { y }) as u16,
            month: m as u8,
            day: d as u8,
        }
    }
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => {
            if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) {
                29
            } else {
                28
            }
        }
    }
}

impl Datetime {
    /// Packed as `yyyymmddhhmmss` in a u64 (sortable).
    pub fn pack(self) -> u64 {
        let d = self.date;
        (((d.year as u64 * 100 + d.month as u64) * 100 + d.day as u64) * 100 + self.hour as u64)
            * 10000
            + self.minute as u64 * 100
            + self.second as u64
    }
    pub fn unpack(v: u64) -> Datetime {
        let second = (v % 100) as u8;
        let minute = (v / 100 % 100) as u8;
        let hour = (v / 10000 % 100) as u8;
        let day = (v / 1_000_000 % 100) as u8;
        let month = (v / 100_000_000 % 100) as u8;
        let year = (v / 10_000_000_000) as u16;
        Datetime {
            date: Date { year, month, day },
            hour,
            minute,
            second,
        }
    }
    pub fn epoch_seconds(self) -> i64 {
        self.date.days_from_epoch() * 86400
            + self.hour as i64 * 3600
            + self.minute as i64 * 60
            + self.second as i64
    }
    pub fn from_epoch_seconds(s: i64) -> Datetime {
        let days = s.div_euclid(86400);
        let rem = s.rem_euclid(86400);
        Datetime {
            date: Date::from_days(days),
            hour: (rem / 3600) as u8,
            minute: (rem / 60 % 60) as u8,
            second: (rem % 60) as u8,
        }
    }
    /// Parses "YYYY-MM-DD HH:MM:SS" (also with 'T', and a bare date).
    pub fn parse(s: &str) -> Option<Datetime> {
        let s = s.trim();
        let (d, t) = match s.split_once([' ', 'T']) {
            Some((d, t)) => (d, Some(t)),
            None => (s, None),
        };
        let date = parse_date(d)?;
        let (hour, minute, second) = match t {
            None => (0, 0, 0),
            Some(t) => {
                let t = t.split('.').next()?;
                let mut it = t.split(':');
                let h: u8 = it.next()?.parse().ok()?;
                let m: u8 = it.next().unwrap_or("0").parse().ok()?;
                let sec: u8 = it.next().unwrap_or("0").parse().ok()?;
                if h > 23 || m > 59 || sec > 59 {
                    return None;
                }
                (h, m, sec)
            }
        };
        Some(Datetime {
            date,
            hour,
            minute,
            second,
        })
    }
}

fn parse_date(s: &str) -> Option<Date> {
    let mut it = s.split('-');
    let y: u16 = it.next()?.parse().ok()?;
    let m: u8 = it.next()?.parse().ok()?;
    let d: u8 = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Date::new(y, m, d)
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl fmt::Display for Datetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:02}:{:02}:{:02}",
            self.date, self.hour, self.minute, self.second
        )
    }
}

type Dt = Datetime;

/// A column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    Decimal(Decimal),
    Str(String),
    Bytes(Vec<u8>),
    Date(Date),
    Datetime(Datetime),
    /// TIME as signed seconds.
    Time(i32),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Name of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) | Value::UInt(_) => "integer",
            Value::Float(_) | Value::Double(_) => "float",
            Value::Decimal(_) => "decimal",
            Value::Str(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Date(_) => "date",
            Value::Datetime(_) => "datetime",
            Value::Time(_) => "time",
        }
    }

    /// As a 128-bit integer when the value is integral.
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Value::Int(v) => Some(v as i128),
            Value::UInt(v) => Some(v as i128),
            Value::Decimal(d) if d.scale == 0 => Some(d.mantissa),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(v) => Some(v as f64),
            Value::UInt(v) => Some(v as f64),
            Value::Float(v) => Some(v as f64),
            Value::Double(v) => Some(v),
            Value::Decimal(d) => Some(d.to_f64()),
            _ => None,
        }
    }

    /// Total order used by ORDER BY and comparisons between values of compatible kinds;
    /// NULL sorts first. Values of unrelated kinds compare by kind.
    pub fn sql_cmp(&self, other: &Value) -> Ordering {
        use Value::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Str(a), Str(b)) => a.trim_end_matches(' ').cmp(b.trim_end_matches(' ')),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Str(a), Bytes(b)) => a.as_bytes().cmp(b.as_slice()),
            (Bytes(a), Str(b)) => a.as_slice().cmp(b.as_bytes()),
            (Date(a), Date(b)) => a.cmp(b),
            (Datetime(a), Datetime(b)) => a.cmp(b),
            (Date(a), Datetime(b)) => Dt {
                date: *a,
                hour: 0,
                minute: 0,
                second: 0,
            }
            .cmp(b),
            (Datetime(a), Date(b)) => a.cmp(&Dt {
                date: *b,
                hour: 0,
                minute: 0,
                second: 0,
            }),
            (Time(a), Time(b)) => a.cmp(b),
            (Str(s), d @ (Date(_) | Datetime(_))) => match Dt::parse(s) {
                Some(p) => Value::Datetime(p).sql_cmp(d),
                None => Ordering::Less,
            },
            (d @ (Date(_) | Datetime(_)), Str(s)) => match Dt::parse(s) {
                Some(p) => d.sql_cmp(&Value::Datetime(p)),
                None => Ordering::Greater,
            },
            (a, b) => {
                if let (Some(x), Some(y)) = (a.as_i128(), b.as_i128()) {
                    return x.cmp(&y);
                }
                if let (Decimal(x), Decimal(y)) = (a, b) {
                    let s = x.scale.max(y.scale);
                    if let (Some(x), Some(y)) = (x.rescale(s), y.rescale(s)) {
                        return x.mantissa.cmp(&y.mantissa);
                    }
                }
                match (a.as_f64(), b.as_f64()) {
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    (Some(x), None) => match b {
                        Str(s) => x.total_cmp(&s.trim().parse::<f64>().unwrap_or(0.0)),
                        _ => Ordering::Less,
                    },
                    (None, Some(y)) => match a {
                        Str(s) => s.trim().parse::<f64>().unwrap_or(0.0).total_cmp(&y),
                        _ => Ordering::Greater,
                    },
                    (None, None) => a.kind().cmp(b.kind()),
                }
            }
        }
    }
}

impl fmt::Display for Value {
    /// As the mysql client prints it (NULL for NULL).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "NULL"),
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Double(v) => write!(f, "{v}"),
            Value::Decimal(d) => write!(f, "{d}"),
            Value::Str(s) => write!(f, "{s}"),
            Value::Bytes(b) => write!(f, "{}", String::from_utf8_lossy(b)),
            Value::Date(d) => write!(f, "{d}"),
            Value::Datetime(d) => write!(f, "{d}"),
            Value::Time(s) => {
                let a = s.unsigned_abs();
                write!(
                    f,
                    "{}{:02}:{:02}:{:02}",
                    if *s < 0 { "-" } else { "" },
                    a / 3600,
                    a / 60 % 60,
                    a % 60
                )
            }
        }
    }
}

/// Converts `v` to the canonical value kind of `ty`, checking range and length.
/// `column` names the column in error messages. NULL passes through (NOT NULL is
/// checked by the caller, who knows about defaults).
pub fn coerce(v: Value, ty: &ColumnType, column: &str) -> Result<Value> {
    if v.is_null() {
        return Ok(v);
    }
    let wrong = |v: &Value| {
        codes::wrong_type(format!(
            "column '{column}' of type {ty} cannot take a {} value",
            v.kind()
        ))
    };
    match *ty {
        ColumnType::Int { unsigned, .. } => {
            let n = match &v {
                Value::Str(s) => s.trim().parse::<i128>().map_err(|_| wrong(&v))?,
                Value::Double(x) if x.fract() == 0.0 && x.is_finite() => *x as i128,
                Value::Float(x) if x.fract() == 0.0 && x.is_finite() => *x as i128,
                Value::Decimal(d) => d.rescale(0).ok_or_else(|| wrong(&v))?.mantissa,
                other => other.as_i128().ok_or_else(|| wrong(other))?,
            };
            let (lo, hi) = ty
                .int_range()
                .unwrap_or((i64::MIN as i128, u64::MAX as i128));
            if n < lo || n > hi {
                return Err(out_of_range(column, ty, &n.to_string()));
            }
            Ok(if unsigned {
                Value::UInt(n as u64)
            } else {
                Value::Int(n as i64)
            })
        }
        ColumnType::Float => {
            let x = to_f64(&v).ok_or_else(|| wrong(&v))?;
            if x.is_finite() && x.abs() > f32::MAX as f64 {
                return Err(out_of_range(column, ty, &x.to_string()));
            }
            Ok(Value::Float(x as f32))
        }
        ColumnType::Double => Ok(Value::Double(to_f64(&v).ok_or_else(|| wrong(&v))?)),
        ColumnType::Decimal { precision, scale } => {
            let d = match &v {
                Value::Decimal(d) => *d,
                Value::Str(s) => Decimal::parse(s).ok_or_else(|| wrong(&v))?,
                Value::Float(_) | Value::Double(_) => {
                    Decimal::from_f64(v.as_f64().unwrap_or(0.0), scale).ok_or_else(|| wrong(&v))?
                }
                other => Decimal {
                    mantissa: other.as_i128().ok_or_else(|| wrong(other))?,
                    scale: 0,
                },
            };
            let d = d
                .rescale(scale)
                .ok_or_else(|| out_of_range(column, ty, &d.to_string()))?;
            if d.int_digits() > (precision - scale) as u32 {
                return Err(out_of_range(column, ty, &d.to_string()));
            }
            Ok(Value::Decimal(d))
        }
        ColumnType::Char { len, charset } | ColumnType::Varchar { len, charset } => {
            let s = match v {
                Value::Str(s) => s,
                Value::Bytes(b) => String::from_utf8(b).map_err(|_| {
                    codes::wrong_type(format!("column '{column}': bytes are not valid UTF-8 text"))
                })?,
                Value::Int(_)
                | Value::UInt(_)
                | Value::Decimal(_)
                | Value::Double(_)
                | Value::Float(_) => v.to_string(),
                Value::Date(_) | Value::Datetime(_) | Value::Time(_) => v.to_string(),
                Value::Null => return Ok(Value::Null),
            };
            check_charset(&s, charset, column)?;
            let chars = s.chars().count();
            if chars > len as usize {
                return Err(codes::value_too_large(format!(
                    "data too long for column '{column}' ({chars} characters, {ty} holds {len})"
                )));
            }
            Ok(Value::Str(s))
        }
        ColumnType::Binary { len } | ColumnType::Varbinary { len } => {
            let b = match v {
                Value::Bytes(b) => b,
                Value::Str(s) => s.into_bytes(),
                other => return Err(wrong(&other)),
            };
            if b.len() > len as usize {
                return Err(codes::value_too_large(format!(
                    "data too long for column '{column}' ({} bytes, {ty} holds {len})",
                    b.len()
                )));
            }
            Ok(Value::Bytes(b))
        }
        ColumnType::Blob { kind, charset } => {
            let out = match (v, charset) {
                (Value::Str(s), Some(cs)) => {
                    check_charset(&s, cs, column)?;
                    Value::Str(s)
                }
                (Value::Bytes(b), Some(_)) => Value::Str(String::from_utf8(b).map_err(|_| {
                    codes::wrong_type(format!("column '{column}': bytes are not valid UTF-8 text"))
                })?),
                (Value::Bytes(b), None) => Value::Bytes(b),
                (Value::Str(s), None) => Value::Bytes(s.into_bytes()),
                (other, _) => return Err(wrong(&other)),
            };
            let n = match &out {
                Value::Str(s) => s.len() as u64,
                Value::Bytes(b) => b.len() as u64,
                _ => 0,
            };
            if n > kind.max_length() {
                return Err(codes::value_too_large(format!(
                    "data too long for column '{column}' ({n} bytes)"
                )));
            }
            Ok(out)
        }
        ColumnType::Date => match v {
            Value::Date(d) => Ok(Value::Date(d)),
            Value::Datetime(d) => Ok(Value::Date(d.date)),
            Value::Str(s) => Datetime::parse(&s)
                .map(|d| Value::Date(d.date))
                .ok_or_else(|| {
                    codes::wrong_type(format!("incorrect date value '{s}' for column '{column}'"))
                }),
            other => Err(wrong(&other)),
        },
        ColumnType::Datetime | ColumnType::Timestamp => match v {
            Value::Datetime(d) => check_timestamp(ty, column, d),
            Value::Date(d) => check_timestamp(
                ty,
                column,
                Datetime {
                    date: d,
                    hour: 0,
                    minute: 0,
                    second: 0,
                },
            ),
            Value::Str(s) => match Datetime::parse(&s) {
                Some(d) => check_timestamp(ty, column, d),
                None => Err(codes::wrong_type(format!(
                    "incorrect datetime value '{s}' for column '{column}'"
                ))),
            },
            other => Err(wrong(&other)),
        },
        ColumnType::Time => match v {
            Value::Time(t) if t.unsigned_abs() <= MAX_TIME_SECONDS => Ok(Value::Time(t)),
            Value::Time(t) => Err(out_of_range(column, ty, &Value::Time(t).to_string())),
            Value::Str(s) => parse_time(&s).map(Value::Time).ok_or_else(|| {
                codes::wrong_type(format!("incorrect time value '{s}' for column '{column}'"))
            }),
            Value::Int(i) if i.unsigned_abs() <= MAX_TIME_SECONDS as u64 => {
                Ok(Value::Time(i as i32))
            }
            other => Err(wrong(&other)),
        },
    }
}

fn check_timestamp(ty: &ColumnType, column: &str, d: Datetime) -> Result<Value> {
    if *ty == ColumnType::Timestamp {
        let s = d.epoch_seconds();
        if !(1..=i32::MAX as i64).contains(&s) {
            return Err(out_of_range(column, ty, &d.to_string()));
        }
    }
    Ok(Value::Datetime(d))
}

/// TIME's range: -838:59:59 .. 838:59:59.
const MAX_TIME_SECONDS: u32 = 838 * 3600 + 59 * 60 + 59;

fn parse_time(s: &str) -> Option<i32> {
    let s = s.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let mut it = s.split(':');
    let h: i32 = it.next()?.parse().ok()?;
    let m: i32 = it.next().unwrap_or("0").parse().ok()?;
    let sec: i32 = it.next().unwrap_or("0").split('.').next()?.parse().ok()?;
    if h > 838 || m > 59 || sec > 59 {
        return None;
    }
    let t = h * 3600 + m * 60 + sec;
    Some(if neg { -t } else { t })
}

fn to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Str(s) => s.trim().parse().ok(),
        other => other.as_f64(),
    }
}

fn check_charset(s: &str, charset: Charset, column: &str) -> Result<()> {
    let bad = match charset {
        Charset::Latin1 => s.chars().find(|c| (*c as u32) > 0xFF),
        Charset::Utf8mb3 => s.chars().find(|c| c.len_utf8() > 3),
        Charset::Utf8mb4 => None,
    };
    match bad {
        Some(c) => Err(codes::wrong_type(format!(
            "incorrect string value '{}' for column '{column}' in character set {}",
            c.escape_unicode(),
            charset.name()
        ))),
        None => Ok(()),
    }
}

fn out_of_range(column: &str, ty: &ColumnType, v: &str) -> NdbError {
    codes::value_too_large(format!(
        "out of range value {v} for column '{column}' of type {ty}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::types::BlobKind;

    #[test]
    fn decimal_parse_and_format() {
        let d = Decimal::parse("-12.050").expect("parses");
        assert_eq!(
            d,
            Decimal {
                mantissa: -12050,
                scale: 3
            }
        );
        assert_eq!(d.to_string(), "-12.050");
        assert_eq!(
            Decimal::parse("0.5").map(|d| d.to_string()).as_deref(),
            Some("0.5")
        );
        assert_eq!(
            d.rescale(1).map(|d| d.to_string()).as_deref(),
            Some("-12.1")
        );
        assert!(Decimal::parse("1.2.3").is_none());
        assert_eq!(
            Decimal {
                mantissa: 5,
                scale: 3
            }
            .to_string(),
            "0.005"
        );
    }

    #[test]
    fn dates_round_trip() {
        let d = Date::new(2024, 2, 29).expect("leap day");
        assert!(Date::new(2023, 2, 29).is_none());
        assert_eq!(Date::unpack(d.pack()), d);
        assert_eq!(Date::from_days(d.days_from_epoch()), d);
        assert_eq!(Date::new(1970, 1, 1).map(|d| d.days_from_epoch()), Some(0));
        let dt = Datetime::parse("2011-03-04 05:06:07").expect("parses");
        assert_eq!(dt.to_string(), "2011-03-04 05:06:07");
        assert_eq!(Datetime::unpack(dt.pack()), dt);
        assert_eq!(Datetime::from_epoch_seconds(dt.epoch_seconds()), dt);
    }

    #[test]
    fn coercion_checks_ranges_and_lengths() {
        let tiny = ColumnType::Int {
            bytes: 1,
            unsigned: true,
        };
        assert_eq!(coerce(Value::Int(255), &tiny, "a"), Ok(Value::UInt(255)));
        assert_eq!(
            coerce(Value::Int(256), &tiny, "a").map_err(|e| e.code),
            Err(4209)
        );
        assert_eq!(
            coerce(Value::Str("x".into()), &tiny, "a").map_err(|e| e.code),
            Err(4217)
        );
        let vc = ColumnType::Varchar {
            len: 3,
            charset: Charset::Utf8mb4,
        };
        assert_eq!(
            coerce(Value::Str("äöü".into()), &vc, "b"),
            Ok(Value::Str("äöü".into()))
        );
        assert_eq!(
            coerce(Value::Str("abcd".into()), &vc, "b").map_err(|e| e.code),
            Err(4209)
        );
        let l1 = ColumnType::Char {
            len: 3,
            charset: Charset::Latin1,
        };
        assert_eq!(
            coerce(Value::Str("€".into()), &l1, "c").map_err(|e| e.code),
            Err(4217)
        );
        let dec = ColumnType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(
            coerce(Value::Str("123.456".into()), &dec, "d"),
            Ok(Value::Decimal(Decimal {
                mantissa: 12346,
                scale: 2
            }))
        );
        assert_eq!(
            coerce(Value::Int(1000), &dec, "d").map_err(|e| e.code),
            Err(4209)
        );
        let date = ColumnType::Date;
        assert_eq!(
            coerce(Value::Str("2020-01-02".into()), &date, "e"),
            Ok(Value::Date(Date {
                year: 2020,
                month: 1,
                day: 2
            }))
        );
        let blob = ColumnType::Blob {
            kind: BlobKind::Tiny,
            charset: None,
        };
        assert_eq!(
            coerce(Value::Bytes(vec![0; 256]), &blob, "f").map_err(|e| e.code),
            Err(4209)
        );
    }

    #[test]
    fn ordering() {
        assert_eq!(Value::Int(-1).sql_cmp(&Value::UInt(3)), Ordering::Less);
        assert_eq!(Value::Null.sql_cmp(&Value::Int(0)), Ordering::Less);
        assert_eq!(
            Value::Str("ab ".into()).sql_cmp(&Value::Str("ab".into())),
            Ordering::Equal
        );
        assert_eq!(
            Value::Double(1.5).sql_cmp(&Value::Int(1)),
            Ordering::Greater
        );
    }
}
