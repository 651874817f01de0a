//! Expression evaluation with MySQL's rules: NULL propagation and three-valued logic,
//! integer arithmetic that fails on BIGINT overflow (error 1690), `/` giving a DECIMAL
//! (exact, with MySQL's extra internal digits) or a DOUBLE, `DIV` and `MOD` returning
//! NULL on division by zero, strings converted to numbers by their numeric prefix when
//! compared with or combined with numbers, and the functions of the SQL subset.
//!
//! Invariants: evaluation never panics; [`Expr::Chain`] is folded left to right without
//! recursion (AND/OR short-circuit); a DECIMAL never exceeds 38 digits (on overflow the
//! computation falls back to DOUBLE); string comparison is binary with trailing spaces
//! ignored (rndb's collation), so `=` here agrees with the engine's key lookups.
//!
//! Collations: the string columns of information_schema and ndbinfo tables have a `_ci`
//! collation in MySQL ([`Env::ci_columns`], set by [`super::meta::ci_columns`]). A
//! comparison (`=`, `<>`, `<`..., `<=>`, IN, BETWEEN, LIKE, CASE x WHEN, NULLIF,
//! GREATEST/LEAST) with an operand that reads such a column compares two strings
//! case-insensitively (Unicode upper case, trailing spaces ignored), as MySQL's collation
//! coercibility makes the column's collation win over a literal's. Values that are not
//! both strings compare as before; grouping, DISTINCT and ORDER BY stay binary. NDB tables
//! flag no column, so their comparisons are unchanged.

use super::errors;
use super::ir::{BinOp, CastTo, Expr, Func};
use crate::error::Result;
use crate::schema::{Date, Datetime, Decimal, Value};
use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::HashMap;

/// Version reported by VERSION() and @@version.
pub(crate) const VERSION: &str = "8.0.41-cluster";
/// Largest scale of a computed DECIMAL (MySQL's DECIMAL_MAX_SCALE).
const MAX_SCALE: u8 = 30;

/// Session state an expression can see.
pub(crate) struct Env<'s> {
    pub user_vars: &'s HashMap<String, Value>,
    pub sys_vars: &'s HashMap<String, Value>,
    /// Statement start time (UTC).
    pub now: Datetime,
    pub last_insert_id: u64,
    pub database: Option<&'s str>,
    pub connection_id: u64,
    pub rng: &'s Cell<u64>,
    /// Per column of the source row (`Expr::Col`): compared case-insensitively (a `_ci`
    /// collation). Empty for NDB tables: their strings compare binary.
    pub ci_columns: &'s [bool],
}

/// What an expression is evaluated against.
pub(crate) struct Ctx<'a> {
    pub row: &'a [Value],
    pub aggs: &'a [Value],
    pub out: &'a [Value],
    pub new_row: &'a [Value],
    pub env: &'a Env<'a>,
}

impl<'a> Ctx<'a> {
    pub fn new(env: &'a Env<'a>, row: &'a [Value]) -> Ctx<'a> {
        Ctx {
            row,
            aggs: &[],
            out: &[],
            new_row: &[],
            env,
        }
    }
}

/// A number in one of MySQL's arithmetic kinds.
#[derive(Debug, Clone, Copy)]
enum Num {
    I(i128, bool),
    D(Decimal),
    F(f64),
}

/// Numeric prefix of a string, as MySQL converts strings to numbers: (value, whether the
/// whole string was a number).
pub(crate) fn parse_prefix(s: &str) -> (f64, bool) {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r']);
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let ds = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == ds || (i == ds + 1 && b[ds] == b'.') {
        return (0.0, t.trim().is_empty() && !s.is_empty());
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let v = t[..i].parse::<f64>().unwrap_or(0.0);
    (v, t[i..].trim().is_empty())
}

fn num(v: &Value) -> Option<Num> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => Num::I(*i as i128, false),
        Value::UInt(u) => Num::I(*u as i128, true),
        Value::Decimal(d) => Num::D(*d),
        Value::Float(f) => Num::F(*f as f64),
        Value::Double(f) => Num::F(*f),
        Value::Str(s) => Num::F(parse_prefix(s).0),
        Value::Bytes(b) => Num::F(parse_prefix(&String::from_utf8_lossy(b)).0),
        Value::Date(d) => Num::I(
            d.year as i128 * 10000 + d.month as i128 * 100 + d.day as i128,
            false,
        ),
        Value::Datetime(d) => Num::I(d.pack() as i128, false),
        Value::Time(t) => {
            let a = t.unsigned_abs() as i128;
            let v = a / 3600 * 10000 + a / 60 % 60 * 100 + a % 60;
            Num::I(if *t < 0 { -v } else { v }, false)
        }
    })
}

fn num_f64(n: Num) -> f64 {
    match n {
        Num::I(i, _) => i as f64,
        Num::D(d) => d.to_f64(),
        Num::F(f) => f,
    }
}

/// A value as a double (NULL: None).
pub(crate) fn to_f64(v: &Value) -> Option<f64> {
    num(v).map(num_f64)
}

/// A value as an integer, rounding as MySQL does (NULL: None).
pub(crate) fn to_i128(v: &Value) -> Option<i128> {
    Some(match num(v)? {
        Num::I(i, _) => i,
        Num::D(d) => d.rescale(0).map(|d| d.mantissa).unwrap_or(0),
        Num::F(f) => {
            let r = f.round();
            if r.is_finite() {
                r.clamp(i128::MIN as f64, i128::MAX as f64) as i128
            } else {
                0
            }
        }
    })
}

/// SQL truth of a value: None for NULL.
pub(crate) fn truth(v: &Value) -> Option<bool> {
    match num(v)? {
        Num::I(i, _) => Some(i != 0),
        Num::D(d) => Some(d.mantissa != 0),
        Num::F(f) => Some(f != 0.0),
    }
}

fn bool_val(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => Value::Int(b as i64),
    }
}

fn int_value(i: i128, unsigned: bool, what: &str) -> Result<Value> {
    if unsigned && i >= 0 && i <= u64::MAX as i128 {
        return Ok(Value::UInt(i as u64));
    }
    if !unsigned && i >= i64::MIN as i128 && i <= i64::MAX as i128 {
        return Ok(Value::Int(i as i64));
    }
    let kind = if unsigned {
        "BIGINT UNSIGNED"
    } else {
        "BIGINT"
    };
    Err(errors::value_out_of_range(kind, what))
}

fn dec(n: Num) -> Option<Decimal> {
    match n {
        Num::I(i, _) => Some(Decimal {
            mantissa: i,
            scale: 0,
        }),
        Num::D(d) => Some(d),
        Num::F(_) => None,
    }
}

fn align(a: Decimal, b: Decimal) -> Option<(i128, i128, u8)> {
    let s = a.scale.max(b.scale);
    Some((a.rescale(s)?.mantissa, b.rescale(s)?.mantissa, s))
}

fn fits(d: Decimal) -> Option<Decimal> {
    (d.mantissa.unsigned_abs() < 10u128.pow(38)).then_some(d)
}

fn dec_add(a: Decimal, b: Decimal, sub: bool) -> Option<Decimal> {
    let (x, y, s) = align(a, b)?;
    let m = if sub {
        x.checked_sub(y)?
    } else {
        x.checked_add(y)?
    };
    fits(Decimal {
        mantissa: m,
        scale: s,
    })
}

fn dec_mul(a: Decimal, b: Decimal) -> Option<Decimal> {
    let m = a.mantissa.checked_mul(b.mantissa)?;
    let d = Decimal {
        mantissa: m,
        scale: a.scale + b.scale,
    };
    let d = if d.scale > MAX_SCALE {
        d.rescale(MAX_SCALE)?
    } else {
        d
    };
    fits(d)
}

/// a / b with MySQL's internal precision: the scale of `a` plus div_precision_increment
/// (4), rounded up to whole 9-digit words.
fn dec_div(a: Decimal, b: Decimal) -> Option<Decimal> {
    if b.mantissa == 0 {
        return None;
    }
    let target = (((a.scale as u32 + 4).div_ceil(9)) * 9).min(MAX_SCALE as u32) as u8;
    // a.m * 10^(target - a.s + b.s) / b.m
    let shift = target as i32 - a.scale as i32 + b.scale as i32;
    let (num, den) = if shift >= 0 {
        (
            a.mantissa.checked_mul(10i128.checked_pow(shift as u32)?)?,
            b.mantissa,
        )
    } else {
        (
            a.mantissa,
            b.mantissa
                .checked_mul(10i128.checked_pow((-shift) as u32)?)?,
        )
    };
    let q = num / den;
    let r = num % den;
    let q = if r.unsigned_abs() * 2 >= den.unsigned_abs() {
        q + if (num < 0) != (den < 0) { -1 } else { 1 }
    } else {
        q
    };
    fits(Decimal {
        mantissa: q,
        scale: target,
    })
}

fn arith(op: BinOp, a: &Value, b: &Value) -> Result<Value> {
    let (Some(x), Some(y)) = (num(a), num(b)) else {
        return Ok(Value::Null);
    };
    let what = || format!("({a} {} {b})", op_text(op));
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul => {
            if let (Num::I(i, ua), Num::I(j, ub)) = (x, y) {
                let r = match op {
                    BinOp::Add => i.checked_add(j),
                    BinOp::Sub => i.checked_sub(j),
                    _ => i.checked_mul(j),
                };
                return match r {
                    Some(r) => int_value(r, ua || ub, &what()),
                    None => Err(errors::value_out_of_range("BIGINT", &what())),
                };
            }
            if let (Some(p), Some(q)) = (dec(x), dec(y)) {
                let r = match op {
                    BinOp::Add => dec_add(p, q, false),
                    BinOp::Sub => dec_add(p, q, true),
                    _ => dec_mul(p, q),
                };
                if let Some(r) = r {
                    return Ok(Value::Decimal(r));
                }
            }
            let (p, q) = (num_f64(x), num_f64(y));
            let r = match op {
                BinOp::Add => p + q,
                BinOp::Sub => p - q,
                _ => p * q,
            };
            if !r.is_finite() {
                return Err(errors::value_out_of_range("DOUBLE", &what()));
            }
            Ok(Value::Double(r))
        }
        BinOp::Div => {
            if let (Some(p), Some(q)) = (dec(x), dec(y)) {
                if q.mantissa == 0 {
                    return Ok(Value::Null);
                }
                if let Some(r) = dec_div(p, q) {
                    return Ok(Value::Decimal(r));
                }
            }
            let q = num_f64(y);
            if q == 0.0 {
                return Ok(Value::Null);
            }
            let r = num_f64(x) / q;
            if !r.is_finite() {
                return Err(errors::value_out_of_range("DOUBLE", &what()));
            }
            Ok(Value::Double(r))
        }
        BinOp::IntDiv => {
            if let (Num::I(i, ua), Num::I(j, ub)) = (x, y) {
                if j == 0 {
                    return Ok(Value::Null);
                }
                return int_value(i / j, ua || ub, &what());
            }
            let q = num_f64(y);
            if q == 0.0 {
                return Ok(Value::Null);
            }
            let r = (num_f64(x) / q).trunc();
            if !r.is_finite() || r.abs() > 9.3e18 {
                return Err(errors::value_out_of_range("BIGINT", &what()));
            }
            Ok(Value::Int(r as i64))
        }
        BinOp::Mod => {
            if let (Num::I(i, ua), Num::I(j, _)) = (x, y) {
                if j == 0 {
                    return Ok(Value::Null);
                }
                return int_value(i % j, ua && i >= 0, &what());
            }
            if let (Some(p), Some(q)) = (dec(x), dec(y)) {
                if q.mantissa == 0 {
                    return Ok(Value::Null);
                }
                if let Some((m, n, s)) = align(p, q) {
                    return Ok(Value::Decimal(Decimal {
                        mantissa: m % n,
                        scale: s,
                    }));
                }
            }
            let q = num_f64(y);
            if q == 0.0 {
                return Ok(Value::Null);
            }
            Ok(Value::Double(num_f64(x) % q))
        }
        BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
            let p = to_u64_bits(x);
            let q = to_u64_bits(y);
            Ok(Value::UInt(match op {
                BinOp::BitAnd => p & q,
                BinOp::BitOr => p | q,
                BinOp::BitXor => p ^ q,
                BinOp::Shl => p.checked_shl(q.min(64) as u32).unwrap_or(0),
                _ => p.checked_shr(q.min(64) as u32).unwrap_or(0),
            }))
        }
        _ => Err(errors::unsupported("this operator")),
    }
}

fn to_u64_bits(n: Num) -> u64 {
    match n {
        Num::I(i, _) => i as u64,
        Num::D(d) => d.rescale(0).map(|d| d.mantissa as u64).unwrap_or(0),
        Num::F(f) => f.round() as i64 as u64,
    }
}

fn op_text(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::IntDiv => "DIV",
        BinOp::Mod => "%",
        _ => "?",
    }
}

fn is_text(v: &Value) -> bool {
    matches!(v, Value::Str(_) | Value::Bytes(_))
}

fn is_temporal(v: &Value) -> bool {
    matches!(v, Value::Date(_) | Value::Datetime(_) | Value::Time(_))
}

/// MySQL comparison of two values; None when either is NULL.
pub(crate) fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    if is_text(a) && is_text(b) {
        return Some(a.sql_cmp(b));
    }
    if (is_temporal(a) && (is_text(b) || is_temporal(b))) || (is_text(a) && is_temporal(b)) {
        if let (Value::Time(x), Value::Time(y)) = (a, b) {
            return Some(x.cmp(y));
        }
        let (x, y) = (as_datetime(a), as_datetime(b));
        if let (Some(x), Some(y)) = (x, y) {
            return Some(x.cmp(&y));
        }
        return Some(a.to_string().cmp(&b.to_string()));
    }
    let (x, y) = (num(a)?, num(b)?);
    Some(num_cmp(x, y))
}

fn num_cmp(x: Num, y: Num) -> Ordering {
    match (x, y) {
        (Num::I(i, _), Num::I(j, _)) => i.cmp(&j),
        _ => {
            if let (Some(p), Some(q)) = (dec(x), dec(y))
                && let Some((m, n, _)) = align(p, q)
            {
                return m.cmp(&n);
            }
            num_f64(x).total_cmp(&num_f64(y))
        }
    }
}

/// [`compare`] under a collation: `ci` compares two strings case-insensitively (trailing
/// spaces ignored, as [`compare`]); anything else exactly as [`compare`].
pub(crate) fn compare_as(a: &Value, b: &Value, ci: bool) -> Option<Ordering> {
    if ci && let (Value::Str(x), Value::Str(y)) = (a, b) {
        let fold = |s: &str| {
            s.trim_end_matches(' ')
                .chars()
                .flat_map(char::to_uppercase)
                .collect::<Vec<char>>()
        };
        return Some(fold(x).cmp(&fold(y)));
    }
    compare(a, b)
}

/// Whether an operand takes a case-insensitive collation: it reads a column flagged in
/// [`Env::ci_columns`] (directly or through a function, as MySQL derives collations).
fn ci_operand(e: &Expr, c: &Ctx<'_>) -> bool {
    let ci = c.env.ci_columns;
    if ci.is_empty() {
        return false;
    }
    let mut found = false;
    e.walk(&mut |x| {
        if let Expr::Col(i) = x
            && ci.get(*i).copied().unwrap_or(false)
        {
            found = true;
        }
    });
    found
}

fn ci_any(es: &[Expr], c: &Ctx<'_>) -> bool {
    !c.env.ci_columns.is_empty() && es.iter().any(|e| ci_operand(e, c))
}

/// Total order for ORDER BY, GROUP BY and DISTINCT: NULL first, then [`compare`].
pub(crate) fn sort_cmp(a: &Value, b: &Value) -> Ordering {
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => compare(a, b).unwrap_or(Ordering::Equal),
    }
}

/// A value as DATETIME (dates, datetimes, strings that parse).
pub(crate) fn as_datetime(v: &Value) -> Option<Datetime> {
    match v {
        Value::Datetime(d) => Some(*d),
        Value::Date(d) => Some(Datetime {
            date: *d,
            hour: 0,
            minute: 0,
            second: 0,
        }),
        Value::Str(s) => Datetime::parse(s),
        Value::Bytes(b) => Datetime::parse(&String::from_utf8_lossy(b)),
        Value::Int(_) | Value::UInt(_) => {
            let n = to_i128(v)?;
            if (10_000_000..=99_991_231).contains(&n) {
                Date::new((n / 10000) as u16, (n / 100 % 100) as u8, (n % 100) as u8).map(|date| {
                    Datetime {
                        date,
                        hour: 0,
                        minute: 0,
                        second: 0,
                    }
                })
            } else if n >= 10_000_000_000_000 {
                let d = Datetime::unpack(n as u64);
                Date::new(d.date.year, d.date.month, d.date.day)?;
                Some(d)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// MySQL's text for a double: integers without a fraction, exponents for very large
/// or small magnitudes, otherwise the shortest exact decimal text.
pub(crate) fn format_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f == 0.0 {
        return "0".into();
    }
    let a = f.abs();
    if !(1e-15..1e15).contains(&a) {
        let s = format!("{f:e}");
        // Rust: 1e20, 1.5e-7; MySQL: 1e20, 1.5e-7 (same)
        return s;
    }
    if f.fract() == 0.0 {
        return format!("{f:.0}");
    }
    format!("{f}")
}

/// A value as text, as CONCAT and the client show it (NULL: None).
pub(crate) fn to_text(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Double(f) => format_double(*f),
        Value::Float(f) => {
            let d: f64 = format!("{f}").parse().unwrap_or(*f as f64);
            format_double(d)
        }
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    })
}

fn rng_next(rng: &Cell<u64>) -> f64 {
    // xorshift64*
    let mut x = rng.get();
    if x == 0 {
        x = 0x9E37_79B9_7F4A_7C15;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng.set(x);
    let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
    (r >> 11) as f64 / (1u64 << 53) as f64
}

/// LIKE matching on characters with `%`, `_` and an escape character.
pub(crate) fn like(s: &str, pat: &str, esc: char) -> bool {
    like_as(s, pat, esc, false)
}

/// [`like`] under a collation: `ci` matches literal characters case-insensitively.
pub(crate) fn like_as(s: &str, pat: &str, esc: char, ci: bool) -> bool {
    let same = |a: char, b: char| a == b || (ci && a.to_uppercase().eq(b.to_uppercase()));
    let s: Vec<char> = s.chars().collect();
    // pattern items: Some(c) literal, None for '_' ; '%' recorded separately
    #[derive(Clone, Copy, PartialEq)]
    enum P {
        Lit(char),
        One,
        Any,
    }
    let mut p: Vec<P> = Vec::new();
    let mut it = pat.chars().peekable();
    while let Some(c) = it.next() {
        if c == esc {
            match it.next() {
                Some(n) => p.push(P::Lit(n)),
                None => p.push(P::Lit(c)),
            }
        } else if c == '%' {
            if p.last() != Some(&P::Any) {
                p.push(P::Any);
            }
        } else if c == '_' {
            p.push(P::One);
        } else {
            p.push(P::Lit(c));
        }
    }
    let (mut i, mut j) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if j < p.len() && (p[j] == P::One || matches!(p[j], P::Lit(c) if same(c, s[i]))) {
            i += 1;
            j += 1;
        } else if j < p.len() && p[j] == P::Any {
            star = Some((j, i));
            j += 1;
        } else if let Some((sj, si)) = star {
            j = sj + 1;
            i = si + 1;
            star = Some((sj, si + 1));
        } else {
            return false;
        }
    }
    while j < p.len() && p[j] == P::Any {
        j += 1;
    }
    j == p.len()
}

/// Evaluates an expression.
pub(crate) fn eval(e: &Expr, c: &Ctx<'_>) -> Result<Value> {
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Col(i) => c.row.get(*i).cloned().unwrap_or(Value::Null),
        Expr::Out(i) => c.out.get(*i).cloned().unwrap_or(Value::Null),
        Expr::Agg(i) => c.aggs.get(*i).cloned().unwrap_or(Value::Null),
        Expr::NewCol(i) => c.new_row.get(*i).cloned().unwrap_or(Value::Null),
        Expr::UserVar(n) => c.env.user_vars.get(n).cloned().unwrap_or(Value::Null),
        Expr::SysVar(n) => c
            .env
            .sys_vars
            .get(n)
            .cloned()
            .ok_or_else(|| errors::unknown_variable(n))?,
        Expr::Name(q, n) => {
            let full = if q.is_empty() {
                n.clone()
            } else {
                format!("{}.{n}", q.join("."))
            };
            return Err(errors::unknown_column(&full, "field list"));
        }
        Expr::Neg(a) => {
            let v = eval(a, c)?;
            match num(&v) {
                None => Value::Null,
                Some(Num::I(i, _)) => int_value(-i, false, &format!("-({v})"))?,
                Some(Num::D(d)) => Value::Decimal(Decimal {
                    mantissa: -d.mantissa,
                    scale: d.scale,
                }),
                Some(Num::F(f)) => Value::Double(-f),
            }
        }
        Expr::Not(a) => bool_val(truth(&eval(a, c)?).map(|b| !b)),
        Expr::BitNot(a) => match num(&eval(a, c)?) {
            None => Value::Null,
            Some(n) => Value::UInt(!to_u64_bits(n)),
        },
        Expr::Chain(first, rest) => chain(first, rest, c)?,
        Expr::IsNull(a, neg) => Value::Int((eval(a, c)?.is_null() != *neg) as i64),
        Expr::IsBool(a, want, neg) => {
            let t = truth(&eval(a, c)?);
            Value::Int(((t == Some(*want)) != *neg) as i64)
        }
        Expr::In(a, list, neg) => {
            let v = eval(a, c)?;
            if v.is_null() {
                return Ok(Value::Null);
            }
            let mut saw_null = false;
            let mut found = false;
            let ci = ci_operand(a, c) || ci_any(list, c);
            for x in list {
                let x = eval(x, c)?;
                match compare_as(&v, &x, ci) {
                    None => saw_null = true,
                    Some(Ordering::Equal) => {
                        found = true;
                        break;
                    }
                    _ => {}
                }
            }
            if found {
                Value::Int(!*neg as i64)
            } else if saw_null {
                Value::Null
            } else {
                Value::Int(*neg as i64)
            }
        }
        Expr::Between(a, lo, hi, neg) => {
            let v = eval(a, c)?;
            let ci = ci_operand(a, c) || ci_operand(lo, c) || ci_operand(hi, c);
            let l = compare_as(&v, &eval(lo, c)?, ci).map(|o| o != Ordering::Less);
            let h = compare_as(&v, &eval(hi, c)?, ci).map(|o| o != Ordering::Greater);
            let r = and3(l, h);
            bool_val(if *neg { r.map(|b| !b) } else { r })
        }
        Expr::Like(a, p, esc, neg) => {
            let v = eval(a, c)?;
            let pv = eval(p, c)?;
            let (Some(s), Some(pat)) = (to_text(&v), to_text(&pv)) else {
                return Ok(Value::Null);
            };
            let esc = match esc {
                Some(e) => to_text(&eval(e, c)?)
                    .and_then(|s| s.chars().next())
                    .unwrap_or('\\'),
                None => '\\',
            };
            let ci = ci_operand(a, c) || ci_operand(p, c);
            Value::Int((like_as(&s, &pat, esc, ci) != *neg) as i64)
        }
        Expr::Case(op, whens, els) => {
            let base = match op {
                Some(o) => Some(eval(o, c)?),
                None => None,
            };
            let base_ci = op.as_ref().is_some_and(|o| ci_operand(o, c));
            for (w, t) in whens {
                let wv = eval(w, c)?;
                let hit = match &base {
                    Some(b) => {
                        compare_as(b, &wv, base_ci || ci_operand(w, c)) == Some(Ordering::Equal)
                    }
                    None => truth(&wv) == Some(true),
                };
                if hit {
                    return eval(t, c);
                }
            }
            match els {
                Some(e) => eval(e, c)?,
                None => Value::Null,
            }
        }
        Expr::Func(f, args) => func(*f, args, c)?,
        Expr::Cast(a, to) => cast(eval(a, c)?, *to)?,
        Expr::AggCall(..) => return Err(errors::group_function()),
        Expr::Default | Expr::ValuesOf(_) => {
            return Err(errors::unsupported("DEFAULT or VALUES() here"));
        }
    })
}

fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn chain(first: &Expr, rest: &[(BinOp, Expr)], c: &Ctx<'_>) -> Result<Value> {
    let mut acc = eval(first, c)?;
    // the collation of `acc` (only strings are compared under it)
    let mut acc_ci = ci_operand(first, c);
    for (op, e) in rest {
        let ci = acc_ci || ci_operand(e, c);
        acc_ci = ci;
        acc = match op {
            BinOp::And => {
                let l = truth(&acc);
                if l == Some(false) {
                    Value::Int(0)
                } else {
                    bool_val(and3(l, truth(&eval(e, c)?)))
                }
            }
            BinOp::Or => {
                let l = truth(&acc);
                if l == Some(true) {
                    Value::Int(1)
                } else {
                    bool_val(or3(l, truth(&eval(e, c)?)))
                }
            }
            BinOp::Xor => {
                let r = truth(&eval(e, c)?);
                bool_val(match (truth(&acc), r) {
                    (Some(a), Some(b)) => Some(a != b),
                    _ => None,
                })
            }
            BinOp::NullEq => {
                let r = eval(e, c)?;
                Value::Int(match (acc.is_null(), r.is_null()) {
                    (true, true) => 1,
                    (false, false) => (compare_as(&acc, &r, ci) == Some(Ordering::Equal)) as i64,
                    _ => 0,
                })
            }
            op if op.is_comparison() => {
                let r = eval(e, c)?;
                bool_val(compare_as(&acc, &r, ci).map(|o| match op {
                    BinOp::Eq => o == Ordering::Equal,
                    BinOp::Ne => o != Ordering::Equal,
                    BinOp::Lt => o == Ordering::Less,
                    BinOp::Le => o != Ordering::Greater,
                    BinOp::Gt => o == Ordering::Greater,
                    _ => o != Ordering::Less,
                }))
            }
            op => {
                let r = eval(e, c)?;
                arith(*op, &acc, &r)?
            }
        };
    }
    Ok(acc)
}

fn text_arg(args: &[Expr], i: usize, c: &Ctx<'_>) -> Result<Option<String>> {
    match args.get(i) {
        Some(e) => Ok(to_text(&eval(e, c)?)),
        None => Ok(None),
    }
}

fn int_arg(args: &[Expr], i: usize, c: &Ctx<'_>) -> Result<Option<i128>> {
    match args.get(i) {
        Some(e) => Ok(to_i128(&eval(e, c)?)),
        None => Ok(None),
    }
}

fn f64_fn(v: Value, f: impl Fn(f64) -> f64) -> Value {
    match to_f64(&v) {
        None => Value::Null,
        Some(x) => {
            let r = f(x);
            if r.is_finite() {
                Value::Double(r)
            } else {
                Value::Null
            }
        }
    }
}

/// ROUND/TRUNCATE to `d` decimals (negative: to tens, hundreds...).
fn round_to(v: &Value, d: i128, truncate: bool) -> Value {
    let d = d.clamp(-38, 30) as i32;
    let n = match num(v) {
        None => return Value::Null,
        Some(n) => n,
    };
    let (x, is_int) = match n {
        Num::F(f) => {
            let p = 10f64.powi(d);
            let y = f * p;
            let r = if truncate { y.trunc() } else { y.round() } / p;
            return Value::Double(if r.is_finite() { r } else { f });
        }
        Num::I(i, _) => (
            Decimal {
                mantissa: i,
                scale: 0,
            },
            true,
        ),
        Num::D(x) => (x, false),
    };
    let target = d.max(0) as u8;
    let mut r = if x.scale > target {
        if truncate {
            let f = 10i128.pow((x.scale - target) as u32);
            Decimal {
                mantissa: x.mantissa / f,
                scale: target,
            }
        } else {
            x.rescale(target).unwrap_or(x)
        }
    } else {
        x
    };
    if d < 0 {
        let f = 10i128.checked_pow((-d) as u32).unwrap_or(i128::MAX);
        let m = r.rescale(0).map(|x| x.mantissa).unwrap_or(0);
        let q = m / f;
        let rem = m % f;
        let q = if !truncate && rem.unsigned_abs() * 2 >= f.unsigned_abs() {
            q + m.signum()
        } else {
            q
        };
        r = Decimal {
            mantissa: q.saturating_mul(f),
            scale: 0,
        };
    }
    if is_int && r.scale == 0 {
        int_value(r.mantissa, false, "ROUND").unwrap_or(Value::Decimal(r))
    } else {
        Value::Decimal(r)
    }
}

fn floor_ceil(v: Value, ceil: bool) -> Value {
    match num(&v) {
        None => Value::Null,
        Some(Num::I(..)) => v,
        Some(Num::D(d)) => {
            let f = 10i128.pow(d.scale as u32);
            let q = d.mantissa.div_euclid(f);
            let q = if ceil && d.mantissa.rem_euclid(f) != 0 {
                q + 1
            } else {
                q
            };
            int_value(q, false, "FLOOR").unwrap_or(Value::Decimal(Decimal {
                mantissa: q,
                scale: 0,
            }))
        }
        Some(Num::F(x)) => Value::Double(if ceil { x.ceil() } else { x.floor() }),
    }
}

fn chars_of(s: &str) -> Vec<char> {
    s.chars().collect()
}

/// MySQL SUBSTRING(s, pos[, len]) with 1-based, possibly negative positions.
fn substring(s: &str, pos: i128, len: Option<i128>) -> String {
    let cs = chars_of(s);
    let n = cs.len() as i128;
    let start = if pos > 0 {
        pos - 1
    } else if pos < 0 {
        n + pos
    } else {
        return String::new();
    };
    if start < 0 || start >= n {
        return String::new();
    }
    let end = match len {
        Some(l) if l <= 0 => return String::new(),
        Some(l) => (start + l).min(n),
        None => n,
    };
    cs[start as usize..end as usize].iter().collect()
}

fn pad(s: &str, len: i128, with: &str, left: bool) -> Option<String> {
    if len < 0 {
        return None;
    }
    let cs = chars_of(s);
    let len = len.min(1 << 24) as usize;
    if cs.len() >= len {
        return Some(cs[..len].iter().collect());
    }
    let fill: Vec<char> = with.chars().collect();
    if fill.is_empty() {
        return None;
    }
    let need = len - cs.len();
    let padding: String = fill.iter().cycle().take(need).collect();
    Some(if left {
        format!("{padding}{s}")
    } else {
        format!("{s}{padding}")
    })
}

fn datetime_arg(v: &Value) -> Option<Datetime> {
    as_datetime(v)
}

fn func(f: Func, args: &[Expr], c: &Ctx<'_>) -> Result<Value> {
    let arg = |i: usize| -> Result<Value> {
        match args.get(i) {
            Some(e) => eval(e, c),
            None => Ok(Value::Null),
        }
    };
    let text = |i: usize| text_arg(args, i, c);
    let int = |i: usize| int_arg(args, i, c);
    let s_or_null = |o: Option<String>| o.map(Value::Str).unwrap_or(Value::Null);
    Ok(match f {
        Func::Rand => match args.first() {
            None => Value::Double(rng_next(c.env.rng)),
            Some(e) => match to_i128(&eval(e, c)?) {
                Some(seed) => {
                    let cell = Cell::new((seed as u64) ^ 0x5DEE_CE66_D1CE_4E5B);
                    Value::Double(rng_next(&cell))
                }
                None => Value::Double(rng_next(c.env.rng)),
            },
        },
        Func::Floor => floor_ceil(arg(0)?, false),
        Func::Ceil => floor_ceil(arg(0)?, true),
        Func::Round | Func::Truncate => {
            let v = arg(0)?;
            let d = if args.len() > 1 { int(1)? } else { Some(0) };
            match d {
                None => Value::Null,
                Some(d) => round_to(&v, d, f == Func::Truncate),
            }
        }
        Func::Abs => {
            let v = arg(0)?;
            match num(&v) {
                None => Value::Null,
                Some(Num::I(i, u)) => int_value(i.abs(), u, &format!("abs({v})"))?,
                Some(Num::D(d)) => Value::Decimal(Decimal {
                    mantissa: d.mantissa.abs(),
                    scale: d.scale,
                }),
                Some(Num::F(x)) => Value::Double(x.abs()),
            }
        }
        Func::Sign => match to_f64(&arg(0)?) {
            None => Value::Null,
            Some(x) => Value::Int(if x > 0.0 {
                1
            } else if x < 0.0 {
                -1
            } else {
                0
            }),
        },
        Func::Mod => arith(BinOp::Mod, &arg(0)?, &arg(1)?)?,
        Func::Pow => {
            let (a, b) = (to_f64(&arg(0)?), to_f64(&arg(1)?));
            match (a, b) {
                (Some(a), Some(b)) => {
                    let r = a.powf(b);
                    if !r.is_finite() {
                        return Err(errors::value_out_of_range(
                            "DOUBLE",
                            &format!("pow({a},{b})"),
                        ));
                    }
                    Value::Double(r)
                }
                _ => Value::Null,
            }
        }
        Func::Sqrt => f64_fn(arg(0)?, |x| if x < 0.0 { f64::NAN } else { x.sqrt() }),
        Func::Exp => f64_fn(arg(0)?, f64::exp),
        Func::Ln => f64_fn(arg(0)?, |x| if x <= 0.0 { f64::NAN } else { x.ln() }),
        Func::Log10 => f64_fn(arg(0)?, |x| if x <= 0.0 { f64::NAN } else { x.log10() }),
        Func::Log => {
            if args.len() == 2 {
                match (to_f64(&arg(0)?), to_f64(&arg(1)?)) {
                    (Some(b), Some(x)) if b > 0.0 && b != 1.0 && x > 0.0 => {
                        Value::Double(x.ln() / b.ln())
                    }
                    _ => Value::Null,
                }
            } else {
                f64_fn(arg(0)?, |x| if x <= 0.0 { f64::NAN } else { x.ln() })
            }
        }
        Func::Pi => Value::Double(std::f64::consts::PI),
        Func::Greatest | Func::Least => {
            let ci = ci_any(args, c);
            let mut best: Option<Value> = None;
            for e in args {
                let v = eval(e, c)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let o = compare_as(&v, &b, ci).unwrap_or(Ordering::Equal);
                        let take = if f == Func::Greatest {
                            o == Ordering::Greater
                        } else {
                            o == Ordering::Less
                        };
                        if take { v } else { b }
                    }
                });
            }
            best.unwrap_or(Value::Null)
        }
        Func::Concat => {
            let mut out = String::new();
            for e in args {
                match to_text(&eval(e, c)?) {
                    Some(s) => out.push_str(&s),
                    None => return Ok(Value::Null),
                }
            }
            Value::Str(out)
        }
        Func::ConcatWs => {
            let Some(sep) = text(0)? else {
                return Ok(Value::Null);
            };
            let mut parts = Vec::new();
            for e in &args[1..] {
                if let Some(s) = to_text(&eval(e, c)?) {
                    parts.push(s);
                }
            }
            Value::Str(parts.join(&sep))
        }
        Func::Length => match arg(0)? {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Int(b.len() as i64),
            v => Value::Int(to_text(&v).map(|s| s.len()).unwrap_or(0) as i64),
        },
        Func::CharLength => match text(0)? {
            None => Value::Null,
            Some(s) => Value::Int(s.chars().count() as i64),
        },
        Func::Upper => s_or_null(text(0)?.map(|s| s.to_uppercase())),
        Func::Lower => s_or_null(text(0)?.map(|s| s.to_lowercase())),
        Func::Substring => {
            let (Some(s), Some(p)) = (text(0)?, int(1)?) else {
                return Ok(Value::Null);
            };
            let len = if args.len() > 2 {
                match int(2)? {
                    Some(l) => Some(l),
                    None => return Ok(Value::Null),
                }
            } else {
                None
            };
            Value::Str(substring(&s, p, len))
        }
        Func::Left | Func::Right => {
            let (Some(s), Some(n)) = (text(0)?, int(1)?) else {
                return Ok(Value::Null);
            };
            let cs = chars_of(&s);
            let n = n.clamp(0, cs.len() as i128) as usize;
            Value::Str(if f == Func::Left {
                cs[..n].iter().collect()
            } else {
                cs[cs.len() - n..].iter().collect()
            })
        }
        Func::Trim | Func::Ltrim | Func::Rtrim => {
            let Some(s) = text(0)? else {
                return Ok(Value::Null);
            };
            let what = if args.len() > 1 {
                match text(1)? {
                    Some(w) => w,
                    None => return Ok(Value::Null),
                }
            } else {
                " ".to_string()
            };
            if what.is_empty() {
                return Ok(Value::Str(s));
            }
            let mut t: &str = &s;
            if f != Func::Rtrim {
                while let Some(r) = t.strip_prefix(what.as_str()) {
                    t = r;
                }
            }
            if f != Func::Ltrim {
                while let Some(r) = t.strip_suffix(what.as_str()) {
                    t = r;
                }
            }
            Value::Str(t.to_string())
        }
        Func::Replace => {
            let (Some(s), Some(from), Some(to)) = (text(0)?, text(1)?, text(2)?) else {
                return Ok(Value::Null);
            };
            if from.is_empty() {
                Value::Str(s)
            } else {
                Value::Str(s.replace(&from, &to))
            }
        }
        Func::Repeat => {
            let (Some(s), Some(n)) = (text(0)?, int(1)?) else {
                return Ok(Value::Null);
            };
            let n = n.max(0) as usize;
            if s.len().saturating_mul(n) > 64 << 20 {
                return Ok(Value::Null);
            }
            Value::Str(s.repeat(n))
        }
        Func::Reverse => s_or_null(text(0)?.map(|s| s.chars().rev().collect())),
        Func::Lpad | Func::Rpad => {
            let (Some(s), Some(n), Some(w)) = (text(0)?, int(1)?, text(2)?) else {
                return Ok(Value::Null);
            };
            s_or_null(pad(&s, n, &w, f == Func::Lpad))
        }
        Func::Locate | Func::Instr => {
            let (needle, hay) = if f == Func::Instr {
                (text(1)?, text(0)?)
            } else {
                (text(0)?, text(1)?)
            };
            let (Some(needle), Some(hay)) = (needle, hay) else {
                return Ok(Value::Null);
            };
            let start = if f == Func::Locate && args.len() > 2 {
                int(2)?.unwrap_or(1).max(1) as usize - 1
            } else {
                0
            };
            let hc = chars_of(&hay);
            let nc = chars_of(&needle);
            let mut pos = 0;
            if start <= hc.len() {
                for i in start..=hc.len().saturating_sub(nc.len()) {
                    if i + nc.len() <= hc.len() && hc[i..i + nc.len()] == nc[..] {
                        pos = i + 1;
                        break;
                    }
                }
            }
            Value::Int(pos as i64)
        }
        Func::Hex => match arg(0)? {
            Value::Null => Value::Null,
            Value::Int(i) => Value::Str(format!("{:X}", i as u64)),
            Value::UInt(u) => Value::Str(format!("{u:X}")),
            Value::Bytes(b) => Value::Str(b.iter().map(|x| format!("{x:02X}")).collect()),
            v => match to_text(&v) {
                Some(s) => Value::Str(s.bytes().map(|x| format!("{x:02X}")).collect()),
                None => Value::Null,
            },
        },
        Func::Coalesce => {
            for e in args {
                let v = eval(e, c)?;
                if !v.is_null() {
                    return Ok(v);
                }
            }
            Value::Null
        }
        Func::IfNull => {
            let v = arg(0)?;
            if v.is_null() { arg(1)? } else { v }
        }
        Func::NullIf => {
            let a = arg(0)?;
            let b = arg(1)?;
            if compare_as(&a, &b, ci_any(args, c)) == Some(Ordering::Equal) {
                Value::Null
            } else {
                a
            }
        }
        Func::If => {
            if truth(&arg(0)?) == Some(true) {
                arg(1)?
            } else {
                arg(2)?
            }
        }
        Func::Now | Func::UtcTimestamp => Value::Datetime(c.env.now),
        Func::CurDate => Value::Date(c.env.now.date),
        Func::CurTime => {
            let n = c.env.now;
            Value::Time(n.hour as i32 * 3600 + n.minute as i32 * 60 + n.second as i32)
        }
        Func::UnixTimestamp => {
            if args.is_empty() {
                Value::Int(c.env.now.epoch_seconds())
            } else {
                match datetime_arg(&arg(0)?) {
                    Some(d) => Value::Int(d.epoch_seconds().max(0)),
                    None => Value::Null,
                }
            }
        }
        Func::FromUnixtime => match int(0)? {
            Some(n) if (0..(1i128 << 40)).contains(&n) => {
                Value::Datetime(Datetime::from_epoch_seconds(n as i64))
            }
            _ => Value::Null,
        },
        Func::Date => match datetime_arg(&arg(0)?) {
            Some(d) => Value::Date(d.date),
            None => Value::Null,
        },
        Func::Year | Func::Month | Func::Day => match datetime_arg(&arg(0)?) {
            Some(d) => Value::Int(match f {
                Func::Year => d.date.year as i64,
                Func::Month => d.date.month as i64,
                _ => d.date.day as i64,
            }),
            None => Value::Null,
        },
        Func::Hour | Func::Minute | Func::Second => {
            let v = arg(0)?;
            let secs = match &v {
                Value::Time(t) => Some(t.unsigned_abs() as i64),
                other => datetime_arg(other)
                    .map(|d| d.hour as i64 * 3600 + d.minute as i64 * 60 + d.second as i64),
            };
            match secs {
                Some(s) => Value::Int(match f {
                    Func::Hour => s / 3600,
                    Func::Minute => s / 60 % 60,
                    _ => s % 60,
                }),
                None => Value::Null,
            }
        }
        Func::LastInsertId => {
            if args.is_empty() {
                Value::UInt(c.env.last_insert_id)
            } else {
                arg(0)?
            }
        }
        Func::Database => match c.env.database {
            Some(d) => Value::Str(d.to_string()),
            None => Value::Null,
        },
        Func::Version => Value::Str(VERSION.to_string()),
        Func::User => Value::Str("root@localhost".to_string()),
        Func::ConnectionId => Value::UInt(c.env.connection_id),
    })
}

/// CAST(v AS to).
pub(crate) fn cast(v: Value, to: CastTo) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    Ok(match to {
        CastTo::Signed => match num(&v) {
            Some(Num::I(i, _)) => Value::Int(i as i64),
            Some(_) => {
                let i = to_i128(&v).unwrap_or(0);
                Value::Int(i.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
            }
            None => Value::Null,
        },
        CastTo::Unsigned => match num(&v) {
            Some(Num::I(i, _)) => Value::UInt(i as u64),
            Some(_) => {
                let i = to_i128(&v).unwrap_or(0);
                Value::UInt(i.clamp(i64::MIN as i128, u64::MAX as i128) as u64)
            }
            None => Value::Null,
        },
        CastTo::Char => to_text(&v).map(Value::Str).unwrap_or(Value::Null),
        CastTo::Binary => match v {
            Value::Bytes(b) => Value::Bytes(b),
            other => to_text(&other)
                .map(|s| Value::Bytes(s.into_bytes()))
                .unwrap_or(Value::Null),
        },
        CastTo::Decimal(p, s) => {
            let d = match num(&v) {
                Some(Num::I(i, _)) => Some(Decimal {
                    mantissa: i,
                    scale: 0,
                }),
                Some(Num::D(d)) => Some(d),
                Some(Num::F(f)) => Decimal::from_f64(f, s),
                None => None,
            };
            match d.and_then(|d| d.rescale(s)) {
                Some(d) => {
                    let max = 10i128.pow(p as u32) - 1;
                    Value::Decimal(Decimal {
                        mantissa: d.mantissa.clamp(-max, max),
                        scale: s,
                    })
                }
                None => Value::Null,
            }
        }
        CastTo::Double => to_f64(&v).map(Value::Double).unwrap_or(Value::Null),
        CastTo::Date => as_datetime(&v)
            .map(|d| Value::Date(d.date))
            .unwrap_or(Value::Null),
        CastTo::Datetime => as_datetime(&v).map(Value::Datetime).unwrap_or(Value::Null),
        CastTo::Time => match &v {
            Value::Time(_) => v,
            Value::Datetime(d) => {
                Value::Time(d.hour as i32 * 3600 + d.minute as i32 * 60 + d.second as i32)
            }
            other => match to_text(other) {
                Some(s) => crate::schema::value::coerce(
                    Value::Str(s),
                    &crate::schema::ColumnType::Time,
                    "CAST",
                )
                .unwrap_or(Value::Null),
                None => Value::Null,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Value {
        Value::Decimal(Decimal::parse(s).expect("decimal"))
    }

    #[test]
    fn arithmetic_types() {
        assert_eq!(
            arith(BinOp::Div, &Value::Int(1), &Value::Int(3)).map(|v| v.to_string()),
            Ok("0.333333333".to_string())
        );
        assert_eq!(
            arith(BinOp::Div, &Value::Int(1), &Value::Int(0)),
            Ok(Value::Null)
        );
        assert_eq!(
            arith(BinOp::IntDiv, &Value::Int(7), &Value::Int(2)),
            Ok(Value::Int(3))
        );
        assert_eq!(
            arith(BinOp::Mod, &Value::Int(-7), &Value::Int(3)),
            Ok(Value::Int(-1))
        );
        assert_eq!(arith(BinOp::Add, &d("1.5"), &Value::Int(2)), Ok(d("3.5")));
        assert_eq!(
            arith(BinOp::Add, &Value::Str("2abc".into()), &Value::Int(1)),
            Ok(Value::Double(3.0))
        );
        let e = arith(BinOp::Add, &Value::Int(i64::MAX), &Value::Int(1)).expect_err("overflow");
        assert_eq!(e.mysql_code, 1690);
        assert_eq!(
            arith(BinOp::Sub, &Value::UInt(3), &Value::Int(1)),
            Ok(Value::UInt(2))
        );
    }

    #[test]
    fn comparisons_convert() {
        assert_eq!(
            compare(&Value::Str("10".into()), &Value::Int(9)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            compare(&Value::Str("abc".into()), &Value::Str("abc  ".into())),
            Some(Ordering::Equal)
        );
        assert_eq!(compare(&Value::Null, &Value::Int(1)), None);
        assert_eq!(compare(&d("1.10"), &d("1.1")), Some(Ordering::Equal));
        assert_eq!(
            compare(&Value::Int(2), &Value::Double(1.5)),
            Some(Ordering::Greater)
        );
    }

    #[test]
    fn like_patterns() {
        assert!(like("abc", "a%", '\\'));
        assert!(like("abc", "_b_", '\\'));
        assert!(!like("abc", "a_", '\\'));
        assert!(like("a%c", "a\\%c", '\\'));
        assert!(!like("abc", "a\\%c", '\\'));
        assert!(like("", "%", '\\'));
        assert!(like("mississippi", "%iss%ppi", '\\'));
        assert!(!like("mississippi", "%iss%ppx", '\\'));
    }

    #[test]
    fn rounding_and_text() {
        assert_eq!(round_to(&d("2.5"), 0, false), d("3"));
        assert_eq!(round_to(&d("-2.5"), 0, false), d("-3"));
        assert_eq!(round_to(&d("1.2345"), 2, false), d("1.23"));
        assert_eq!(round_to(&Value::Int(1234), -2, false), Value::Int(1200));
        assert_eq!(round_to(&d("1.239"), 2, true), d("1.23"));
        assert_eq!(format_double(1500.0), "1500");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(1e20), "1e20");
        assert_eq!(floor_ceil(d("-1.5"), false), Value::Int(-2));
        assert_eq!(floor_ceil(d("1.2"), true), Value::Int(2));
        assert_eq!(substring("abcdef", -2, None), "ef");
        assert_eq!(substring("abcdef", 2, Some(3)), "bcd");
        assert_eq!(parse_prefix(" 12.5abc"), (12.5, false));
        assert_eq!(parse_prefix("1e3"), (1000.0, true));
    }
}
