//! Access paths: how the rows a statement needs are read from the engine.
//!
//! From the WHERE clause (bound to column positions) the planner picks, in order of
//! preference: primary-key reads when every primary-key column is fixed by `=` or `IN`
//! with constants (batched: [`Ndb::read_batch`] outside a transaction, one execute of
//! read operations inside one); an ordered-index scan with bounds when equalities fix a
//! prefix of an ordered index's columns and/or a range limits the next one (sorted, and
//! descending when ORDER BY follows the index, so LIMIT can stop early); otherwise a full
//! table scan.
//!
//! Invariants: a plan only narrows the rows read — every caller re-checks the complete
//! WHERE on each row a plan produces, so a bound that is too wide is harmless and a key
//! value that cannot be compared exactly (a string against an integer column, ...) just
//! makes the planner fall back to a scan; rows are delivered full-width (one value per
//! column of the table, NULL for columns not fetched); key lists are deduplicated.

use super::eval::{self, Ctx, Env};
use super::ir::{BinOp, Expr};
use crate::api::{AbortOption, ExecType, Ndb, OpKind, ScanSpec, TableRuntime, Transaction};
use crate::error::Result;
use crate::schema::value::coerce;
use crate::schema::{Column, ColumnType, IndexKind, TableDef, Value};
use crate::txn::LockMode;
use std::collections::HashSet;
use std::sync::Arc;

/// Most primary keys one statement reads by key (larger IN lists scan instead).
const MAX_KEYS: usize = 100_000;
/// Rows per scan batch and key reads per execute.
pub(crate) const BATCH: usize = 1000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Access {
    /// The WHERE clause can match no row.
    Empty,
    /// Primary-key reads (values in primary-key order, coerced to the column types).
    Keys(Vec<Vec<Value>>),
    /// Ordered-index scan.
    Range {
        index: usize,
        low: Option<(Vec<Value>, bool)>,
        high: Option<(Vec<Value>, bool)>,
        descending: bool,
        sorted: bool,
    },
    Full,
}

#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub access: Access,
    /// Rows arrive in the ORDER BY order: no sort needed.
    pub ordered: bool,
}

impl Plan {
    /// The access path as EXPLAIN shows it: (type, key, description).
    pub fn describe(&self, def: &TableDef) -> (&'static str, Option<String>, String) {
        match &self.access {
            Access::Empty => ("NULL", None, "Impossible WHERE".into()),
            Access::Keys(k) => (
                if k.len() == 1 { "const" } else { "range" },
                Some("PRIMARY".into()),
                format!("primary key lookup ({} key{})", k.len(), plural(k.len())),
            ),
            Access::Range {
                index,
                low,
                high,
                descending,
                sorted,
            } => {
                let name = def
                    .indexes
                    .get(*index)
                    .map(|i| i.name.clone())
                    .unwrap_or_default();
                let bounded = low.is_some() || high.is_some();
                (
                    if bounded { "range" } else { "index" },
                    Some(name.clone()),
                    format!(
                        "ordered index scan on {name}{}{}{}",
                        if bounded { " with bounds" } else { "" },
                        if *sorted { ", sorted" } else { "" },
                        if *descending { ", descending" } else { "" }
                    ),
                )
            }
            Access::Full => ("ALL", None, "full table scan".into()),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A constraint found on one column.
#[derive(Debug, Clone)]
enum Cond {
    Eq(Value),
    In(Vec<Value>),
    Cmp(BinOp, Value),
}

/// The AND-ed parts of a condition.
pub(crate) fn conjuncts(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Chain(first, rest) if rest.iter().all(|(op, _)| *op == BinOp::And) => {
                for (_, x) in rest.iter().rev() {
                    stack.push(x);
                }
                stack.push(first);
            }
            other => out.push(other),
        }
    }
    out
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        o => o,
    }
}

/// Column constraints of the conjuncts: (column, condition).
fn column_conds(where_: &Expr, env: &Env<'_>) -> Result<Vec<(usize, Cond)>> {
    let ctx = Ctx::new(env, &[]);
    let mut out = Vec::new();
    for c in conjuncts(where_) {
        match c {
            Expr::Chain(first, rest) if rest.len() == 1 => {
                let (op, right) = (&rest[0].0, &rest[0].1);
                if !op.is_comparison() || *op == BinOp::Ne || *op == BinOp::NullEq {
                    continue;
                }
                let (col, op, k) = match (&**first, right) {
                    (Expr::Col(i), k) if k.is_constant() => (*i, *op, k),
                    (k, Expr::Col(i)) if k.is_constant() => (*i, flip(*op), k),
                    _ => continue,
                };
                let v = eval::eval(k, &ctx)?;
                out.push((
                    col,
                    if op == BinOp::Eq {
                        Cond::Eq(v)
                    } else {
                        Cond::Cmp(op, v)
                    },
                ));
            }
            Expr::In(a, list, false) => {
                if let Expr::Col(i) = &**a
                    && list.iter().all(Expr::is_constant)
                {
                    let vals = list
                        .iter()
                        .map(|x| eval::eval(x, &ctx))
                        .collect::<Result<Vec<_>>>()?;
                    out.push((*i, Cond::In(vals)));
                }
            }
            Expr::Between(a, lo, hi, false) => {
                if let Expr::Col(i) = &**a
                    && lo.is_constant()
                    && hi.is_constant()
                {
                    out.push((*i, Cond::Cmp(BinOp::Ge, eval::eval(lo, &ctx)?)));
                    out.push((*i, Cond::Cmp(BinOp::Le, eval::eval(hi, &ctx)?)));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A constant as a key value of a column.
enum KeyVal {
    /// The coerced value: `col = v` holds exactly when the stored value equals it.
    Val(Value),
    /// `col = v` can hold for no row.
    NoMatch,
    /// The comparison is not an exact key comparison (the planner scans instead).
    Unusable,
}

fn key_value(col: &Column, v: &Value) -> KeyVal {
    if v.is_null() {
        return KeyVal::NoMatch;
    }
    let usable = match col.ty {
        ColumnType::Int { .. } => match v {
            Value::Int(_) | Value::UInt(_) => true,
            Value::Decimal(_) | Value::Double(_) | Value::Float(_) => {
                let f = eval::to_f64(v).unwrap_or(0.5);
                if f.fract() != 0.0 {
                    return KeyVal::NoMatch;
                }
                true
            }
            Value::Str(s) => {
                let (f, whole) = eval::parse_prefix(s);
                whole && f.fract() == 0.0 && f.abs() < 9e15
            }
            _ => false,
        },
        ColumnType::Decimal { .. } => {
            matches!(v, Value::Int(_) | Value::UInt(_) | Value::Decimal(_))
        }
        ColumnType::Char { .. } | ColumnType::Varchar { .. } => matches!(v, Value::Str(_)),
        ColumnType::Varbinary { .. } => matches!(v, Value::Str(_) | Value::Bytes(_)),
        ColumnType::Date | ColumnType::Datetime | ColumnType::Timestamp => {
            matches!(v, Value::Date(_) | Value::Datetime(_))
                || matches!(v, Value::Str(s) if crate::schema::Datetime::parse(s).is_some())
        }
        _ => false,
    };
    if !usable {
        return KeyVal::Unusable;
    }
    let v2 = match v {
        Value::Str(s) if col.ty.is_integer() => Value::Int(eval::parse_prefix(s).0 as i64),
        Value::Double(f) if col.ty.is_integer() => Value::Int(*f as i64),
        Value::Float(f) if col.ty.is_integer() => Value::Int(*f as i64),
        other => other.clone(),
    };
    match coerce(v2, &col.ty, &col.name) {
        Ok(c) => {
            // the coerced value must compare equal to the constant (no rounding)
            if eval::compare(&c, v) == Some(std::cmp::Ordering::Equal) {
                KeyVal::Val(c)
            } else {
                KeyVal::NoMatch
            }
        }
        Err(_) => KeyVal::NoMatch,
    }
}

/// A range bound value for a column: only exact conversions are used.
fn bound_value(col: &Column, v: &Value) -> Option<Value> {
    match key_value(col, v) {
        KeyVal::Val(x) => Some(x),
        _ => None,
    }
}

/// An ordered-index scan does not see a transaction's own uncommitted inserts (index
/// entries are committed rows, see the README); inside a transaction that has written,
/// a range is read by a table scan instead, which sees them.
pub(crate) fn for_writer(mut plan: Plan, wrote: bool) -> Plan {
    if wrote && matches!(plan.access, Access::Range { .. }) {
        plan.access = Access::Full;
        plan.ordered = false;
    }
    plan
}

/// Chooses the access path for a table.
pub(crate) fn plan(
    def: &TableDef,
    where_: Option<&Expr>,
    env: &Env<'_>,
    order_by: &[(Expr, bool)],
    has_limit: bool,
) -> Result<Plan> {
    let conds = match where_ {
        Some(w) => column_conds(w, env)?,
        None => Vec::new(),
    };
    // primary key
    let mut per_col: Vec<Vec<Value>> = Vec::new();
    let mut pk_ok = !def.has_hidden_pk();
    for &p in &def.primary_key {
        if !pk_ok {
            break;
        }
        let col = &def.columns[p];
        let mut best: Option<Vec<Value>> = None;
        for (c, cond) in &conds {
            if *c != p {
                continue;
            }
            let vals: Vec<&Value> = match cond {
                Cond::Eq(v) => vec![v],
                Cond::In(vs) => vs.iter().collect(),
                Cond::Cmp(..) => continue,
            };
            let mut keys = Vec::new();
            let mut usable = true;
            for v in vals {
                match key_value(col, v) {
                    KeyVal::Val(x) => keys.push(x),
                    KeyVal::NoMatch => {}
                    KeyVal::Unusable => usable = false,
                }
            }
            if !usable {
                continue;
            }
            if keys.is_empty() {
                return Ok(Plan {
                    access: Access::Empty,
                    ordered: true,
                });
            }
            if best.as_ref().is_none_or(|b| keys.len() < b.len()) {
                best = Some(keys);
            }
        }
        match best {
            Some(b) => per_col.push(b),
            None => pk_ok = false,
        }
    }
    if pk_ok && !per_col.is_empty() {
        let total = per_col
            .iter()
            .try_fold(1usize, |acc, v| acc.checked_mul(v.len()));
        if let Some(total) = total.filter(|t| *t <= MAX_KEYS) {
            let mut keys: Vec<Vec<Value>> = vec![Vec::new()];
            for vals in &per_col {
                let mut next = Vec::with_capacity(keys.len() * vals.len());
                for k in &keys {
                    for v in vals {
                        let mut k2 = k.clone();
                        k2.push(v.clone());
                        next.push(k2);
                    }
                }
                keys = next;
            }
            debug_assert_eq!(keys.len(), total);
            dedup_keys(&mut keys);
            let ordered = keys.len() <= 1;
            return Ok(Plan {
                access: Access::Keys(keys),
                ordered,
            });
        }
    }
    // ordered indexes
    let mut best: Option<(usize, usize, Access)> = None; // (score, order-ok, access)
    for (ix, idx) in def.indexes.iter().enumerate() {
        if idx.kind != IndexKind::OrderedIndex {
            continue;
        }
        let mut eq: Vec<Value> = Vec::new();
        let mut low: Option<(Value, bool)> = None;
        let mut high: Option<(Value, bool)> = None;
        let mut range_col = None;
        for &c in &idx.columns {
            let col = &def.columns[c];
            let eqv = conds.iter().find_map(|(cc, cond)| {
                if *cc != c {
                    return None;
                }
                let v = match cond {
                    Cond::Eq(v) => v,
                    Cond::In(vs) if vs.len() == 1 => &vs[0],
                    _ => return None,
                };
                match key_value(col, v) {
                    KeyVal::Val(x) => Some(Some(x)),
                    KeyVal::NoMatch => Some(None),
                    KeyVal::Unusable => None,
                }
            });
            match eqv {
                Some(Some(v)) => {
                    eq.push(v);
                    continue;
                }
                Some(None) => {
                    return Ok(Plan {
                        access: Access::Empty,
                        ordered: true,
                    });
                }
                None => {}
            }
            for (cc, cond) in &conds {
                if *cc != c {
                    continue;
                }
                let Cond::Cmp(op, v) = cond else { continue };
                let Some(v) = bound_value(col, v) else {
                    continue;
                };
                match op {
                    BinOp::Gt | BinOp::Ge => {
                        let incl = *op == BinOp::Ge;
                        let tighter = low.as_ref().is_none_or(|(l, _)| {
                            eval::sort_cmp(&v, l) == std::cmp::Ordering::Greater
                        });
                        if tighter {
                            low = Some((v, incl));
                        }
                    }
                    _ => {
                        let incl = *op == BinOp::Le;
                        let tighter = high
                            .as_ref()
                            .is_none_or(|(h, _)| eval::sort_cmp(&v, h) == std::cmp::Ordering::Less);
                        if tighter {
                            high = Some((v, incl));
                        }
                    }
                }
            }
            if low.is_some() || high.is_some() {
                range_col = Some(c);
            }
            break;
        }
        let score = eq.len() * 2 + range_col.is_some() as usize;
        // does ORDER BY follow this index (after the equality prefix)?
        let (order_ok, desc) = order_follows(&idx.columns, eq.len(), order_by);
        let useful = score > 0 || (order_ok && has_limit && !order_by.is_empty());
        if !useful {
            continue;
        }
        let mut lo_vals = eq.clone();
        let lo = match low {
            Some((v, incl)) => {
                lo_vals.push(v);
                Some((lo_vals, incl))
            }
            None => {
                let nullable = range_col.is_some_and(|c| def.columns[c].nullable);
                if high.is_some() && nullable {
                    lo_vals.push(Value::Null);
                    Some((lo_vals, false))
                } else if eq.is_empty() {
                    None
                } else {
                    Some((lo_vals, true))
                }
            }
        };
        let mut hi_vals = eq.clone();
        let hi = match high {
            Some((v, incl)) => {
                hi_vals.push(v);
                Some((hi_vals, incl))
            }
            None if eq.is_empty() => None,
            None => Some((hi_vals, true)),
        };
        let access = Access::Range {
            index: ix,
            low: lo,
            high: hi,
            descending: order_ok && desc,
            sorted: order_ok && !order_by.is_empty(),
        };
        let rank = score * 2 + order_ok as usize;
        if best.as_ref().is_none_or(|(s, _, _)| rank > *s) {
            best = Some((rank, order_ok as usize, access));
        }
    }
    if let Some((_, order_ok, access)) = best {
        return Ok(Plan {
            access,
            ordered: order_ok == 1 && !order_by.is_empty(),
        });
    }
    Ok(Plan {
        access: Access::Full,
        ordered: order_by.is_empty(),
    })
}

/// Whether ORDER BY lists index columns after `skip` equality columns, all in one
/// direction: (follows, descending).
fn order_follows(cols: &[usize], skip: usize, order_by: &[(Expr, bool)]) -> (bool, bool) {
    if order_by.is_empty() {
        return (true, false);
    }
    let desc = order_by[0].1;
    let mut k = 0;
    for (e, d) in order_by {
        if *d != desc {
            return (false, false);
        }
        let Expr::Col(c) = e else {
            return (false, false);
        };
        // equality columns may appear anywhere in ORDER BY
        if cols[..skip.min(cols.len())].contains(c) {
            continue;
        }
        match cols.get(skip + k) {
            Some(ic) if ic == c => k += 1,
            _ => return (false, false),
        }
    }
    (true, desc)
}

fn key_text(k: &[Value]) -> String {
    let mut s = String::new();
    for v in k {
        s.push_str(v.kind());
        s.push('\u{1}');
        s.push_str(&v.to_string());
        s.push('\u{2}');
    }
    s
}

fn dedup_keys(keys: &mut Vec<Vec<Value>>) {
    let mut seen = HashSet::new();
    keys.retain(|k| seen.insert(key_text(k)));
}

/// Reads the rows of an access path and passes each (full width) to `f`, which returns
/// false to stop. `cols` are the columns to fetch. With `tx`, reads go through that
/// transaction (own writes visible; `lock` applies), else committed reads are used.
pub(crate) fn read_rows(
    ndb: &Ndb,
    mut tx: Option<&mut Transaction>,
    table: &Arc<TableRuntime>,
    access: &Access,
    cols: &[usize],
    lock: LockMode,
    f: &mut dyn FnMut(Vec<Value>) -> Result<bool>,
) -> Result<()> {
    let width = table.def.columns.len();
    let widen = |r: Vec<Value>| -> Vec<Value> {
        let mut full = vec![Value::Null; width];
        for (v, &c) in r.into_iter().zip(cols) {
            full[c] = v;
        }
        full
    };
    match access {
        Access::Empty => Ok(()),
        Access::Keys(keys) => {
            for chunk in keys.chunks(BATCH) {
                let rows: Vec<Option<Vec<Value>>> = match tx.as_deref_mut() {
                    None => ndb.read_batch(table, chunk, cols)?,
                    Some(t) => read_keys_in(t, table, chunk, cols, lock)?,
                };
                for r in rows.into_iter().flatten() {
                    if !f(widen(r))? {
                        return Ok(());
                    }
                }
            }
            Ok(())
        }
        Access::Range { .. } | Access::Full => {
            let mut spec = ScanSpec::table(table.clone());
            spec.columns = Some(cols.to_vec());
            spec.mode = lock;
            spec.batch_size = 256;
            if let Access::Range {
                index,
                low,
                high,
                descending,
                sorted,
            } = access
            {
                spec.index = Some(*index);
                spec.low = low.clone();
                spec.high = high.clone();
                spec.descending = *descending;
                spec.sorted = *sorted;
            }
            let mut own;
            let tx: &mut Transaction = match tx {
                Some(t) => t,
                None => {
                    own = ndb.start_transaction()?;
                    &mut own
                }
            };
            let mut scan = tx.scan(spec)?;
            loop {
                let batch = tx.scan_next_batch(&mut scan, BATCH)?;
                if batch.is_empty() {
                    return Ok(());
                }
                for r in batch {
                    if !f(widen(r))? {
                        scan.close();
                        return Ok(());
                    }
                }
                if scan.is_closed() {
                    return Ok(());
                }
            }
        }
    }
}

/// Key reads inside a transaction: one execute, missing rows are None.
pub(crate) fn read_keys_in(
    tx: &mut Transaction,
    table: &Arc<TableRuntime>,
    keys: &[Vec<Value>],
    cols: &[usize],
    lock: LockMode,
) -> Result<Vec<Option<Vec<Value>>>> {
    let pk = &table.def.primary_key;
    let mut ops = Vec::with_capacity(keys.len());
    for k in keys {
        let key: Vec<(usize, Value)> = pk.iter().copied().zip(k.iter().cloned()).collect();
        ops.push(tx.define_by_pos(
            table,
            OpKind::Read(lock),
            key,
            Vec::new(),
            Some(cols.to_vec()),
        )?);
    }
    tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        match tx.take_row(op) {
            Some(r) => out.push(Some(r)),
            None => match tx.outcome(op) {
                Some(crate::api::OpOutcome::Failed(e)) if e.code != 626 => {
                    return Err(e.clone());
                }
                _ => out.push(None),
            },
        }
    }
    Ok(out)
}
