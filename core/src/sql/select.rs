//! SELECT: name binding, row production through the planner, WHERE, GROUP BY with
//! aggregates, HAVING, DISTINCT, ORDER BY and LIMIT — over an NDB table, a virtual
//! table (ndbinfo / information_schema rows) or no table at all.
//!
//! Invariants: every row a plan produces is re-checked against the full WHERE; rows are
//! evaluated full-width (expressions address columns by table position); aggregate
//! queries without GROUP BY produce exactly one row; a DECIMAL result column is rounded
//! to the scale MySQL declares for its expression (e.g. `/` adds 4 digits) only when the
//! result set is produced, so intermediate values keep their precision.

use super::Session;
use super::errors;
use super::eval::{self, Ctx, Env};
use super::ir::{AggKind, BinOp, Expr, Func, Lock, SelItem, Select, TableName};
use super::meta;
use super::plan::{self, Plan};
use crate::api::TableRuntime;
use crate::error::Result;
use crate::schema::{ColumnType, Decimal, TableDef, Value};
use crate::txn::LockMode;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Where a query's rows come from.
pub(crate) enum Source {
    /// No FROM clause (or FROM DUAL): one empty row.
    Dual,
    Virtual {
        db: String,
        name: String,
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    },
    Table {
        db: String,
        table: Arc<TableRuntime>,
    },
}

/// Resolves a FROM table: an NDB table or a virtual table.
pub(crate) fn resolve(s: &Session, from: Option<&TableName>) -> Result<Source> {
    let Some(t) = from else {
        return Ok(Source::Dual);
    };
    let db = s.db_of(t)?;
    if meta::is_virtual(&db) {
        let db = db.to_ascii_lowercase();
        return match crate::ndbinfo::lookup(s.ndb.cluster(), &db, &t.name) {
            None => Err(errors::no_such_table(&db, &t.name)),
            Some(Err(e)) => Err(e),
            Some(Ok((columns, rows))) => Ok(Source::Virtual {
                db,
                name: t.name.to_ascii_lowercase(),
                columns,
                rows,
            }),
        };
    }
    let table = s.table(&db, &t.name)?;
    Ok(Source::Table { db, table })
}

/// Static kind of an expression's values, for the scale of DECIMAL results.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Ty {
    Int,
    Dec(u8),
    Float,
    Other,
}

/// The columns names can refer to.
pub(crate) struct Scope {
    pub names: Vec<String>,
    pub hidden: Vec<bool>,
    pub types: Vec<Ty>,
    pub table: Option<String>,
    pub alias: Option<String>,
    pub db: Option<String>,
}

impl Scope {
    pub fn of(source: &Source, from: Option<&TableName>) -> Scope {
        let alias = from.and_then(|f| f.alias.clone());
        match source {
            Source::Dual => Scope {
                names: Vec::new(),
                hidden: Vec::new(),
                types: Vec::new(),
                table: None,
                alias: None,
                db: None,
            },
            Source::Virtual {
                db,
                name,
                columns,
                rows,
            } => Scope {
                names: columns.clone(),
                hidden: vec![false; columns.len()],
                types: (0..columns.len())
                    .map(|i| {
                        rows.iter()
                            .map(|r| r.get(i).unwrap_or(&Value::Null))
                            .find(|v| !v.is_null())
                            .map(value_ty)
                            .unwrap_or(Ty::Other)
                    })
                    .collect(),
                table: Some(name.clone()),
                alias,
                db: Some(db.clone()),
            },
            Source::Table { db, table } => Scope::of_table(db, &table.def, alias),
        }
    }

    /// The columns of an NDB table.
    pub fn of_table(db: &str, def: &TableDef, alias: Option<String>) -> Scope {
        Scope {
            names: def.columns.iter().map(|c| c.name.clone()).collect(),
            hidden: def.columns.iter().map(|c| c.hidden).collect(),
            types: def.columns.iter().map(|c| column_ty(&c.ty)).collect(),
            table: Some(def.name.clone()),
            alias,
            db: Some(db.to_string()),
        }
    }

    /// Position of a column reference; error 1054 naming the clause.
    pub fn column(&self, qual: &[String], name: &str, clause: &str) -> Result<usize> {
        let qual_ok = match qual {
            [] => true,
            [t] => match &self.alias {
                Some(a) => a.eq_ignore_ascii_case(t),
                None => self
                    .table
                    .as_ref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(t)),
            },
            [d, t] => {
                self.alias.is_none()
                    && self.db.as_ref().is_some_and(|x| x.eq_ignore_ascii_case(d))
                    && self
                        .table
                        .as_ref()
                        .is_some_and(|n| n.eq_ignore_ascii_case(t))
            }
            _ => false,
        };
        if qual_ok
            && let Some(i) = self
                .names
                .iter()
                .zip(&self.hidden)
                .position(|(n, h)| !h && n.eq_ignore_ascii_case(name))
        {
            return Ok(i);
        }
        let full = if qual.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", qual.join("."))
        };
        Err(errors::unknown_column(&full, clause))
    }

    pub fn visible(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.names.len()).filter(|i| !self.hidden[*i])
    }
}

pub(crate) fn column_ty(t: &ColumnType) -> Ty {
    match t {
        ColumnType::Int { .. } => Ty::Int,
        ColumnType::Decimal { scale, .. } => Ty::Dec(*scale),
        ColumnType::Float | ColumnType::Double => Ty::Float,
        _ => Ty::Other,
    }
}

fn value_ty(v: &Value) -> Ty {
    match v {
        Value::Int(_) | Value::UInt(_) => Ty::Int,
        Value::Decimal(d) => Ty::Dec(d.scale),
        Value::Float(_) | Value::Double(_) => Ty::Float,
        _ => Ty::Other,
    }
}

/// An aggregate call after binding.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AggCall {
    pub kind: AggKind,
    pub distinct: bool,
    pub arg: Option<Expr>,
}

/// How names resolve in a clause.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Names {
    /// Columns only.
    Columns,
    /// Select-list aliases first, then columns (ORDER BY, HAVING).
    AliasFirst,
    /// Columns first, then aliases replaced by their expressions (GROUP BY).
    ColumnsThenAliasExpr,
}

pub(crate) struct Binder<'a> {
    pub scope: &'a Scope,
    pub aggs: Vec<AggCall>,
    /// (alias, bound expression) of the select list.
    pub items: Vec<(String, Expr)>,
}

impl<'a> Binder<'a> {
    pub fn new(scope: &'a Scope) -> Binder<'a> {
        Binder {
            scope,
            aggs: Vec::new(),
            items: Vec::new(),
        }
    }

    /// Binds names and aggregates of an expression.
    pub fn bind(
        &mut self,
        e: Expr,
        clause: &'static str,
        names: Names,
        allow_agg: bool,
    ) -> Result<Expr> {
        let scope = self.scope;
        let items = &self.items;
        let aggs = &mut self.aggs;
        e.rewrite(&mut |x| match x {
            Expr::Name(q, n) => {
                let alias = || {
                    if !q.is_empty() {
                        return None;
                    }
                    items.iter().position(|(a, _)| a.eq_ignore_ascii_case(&n))
                };
                match names {
                    Names::AliasFirst => {
                        if let Some(i) = alias() {
                            return Ok(Expr::Out(i));
                        }
                        scope.column(&q, &n, clause).map(Expr::Col)
                    }
                    Names::ColumnsThenAliasExpr => match scope.column(&q, &n, clause) {
                        Ok(c) => Ok(Expr::Col(c)),
                        Err(e) => match alias() {
                            Some(i) if !items[i].1.has_aggregate() => Ok(items[i].1.clone()),
                            _ => Err(e),
                        },
                    },
                    Names::Columns => scope.column(&q, &n, clause).map(Expr::Col),
                }
            }
            Expr::AggCall(kind, distinct, arg) => {
                if !allow_agg {
                    return Err(errors::group_function());
                }
                if arg.as_ref().is_some_and(|a| a.has_aggregate()) {
                    return Err(errors::group_function());
                }
                let call = AggCall {
                    kind,
                    distinct,
                    arg: arg.map(|a| *a),
                };
                let i = match aggs.iter().position(|a| *a == call) {
                    Some(i) => i,
                    None => {
                        aggs.push(call);
                        aggs.len() - 1
                    }
                };
                Ok(Expr::Agg(i))
            }
            other => Ok(other),
        })
    }
}

/// The static kind of a bound expression's values.
pub(crate) fn infer(e: &Expr, scope: &Scope, aggs: &[AggCall], items: &[Ty]) -> Ty {
    match e {
        Expr::Lit(v) => value_ty(v),
        Expr::Col(i) => scope.types.get(*i).copied().unwrap_or(Ty::Other),
        Expr::Out(i) => items.get(*i).copied().unwrap_or(Ty::Other),
        Expr::Agg(i) => {
            let Some(a) = aggs.get(*i) else {
                return Ty::Other;
            };
            let arg = a
                .arg
                .as_ref()
                .map(|x| infer(x, scope, aggs, items))
                .unwrap_or(Ty::Int);
            match a.kind {
                AggKind::Count | AggKind::CountStar => Ty::Int,
                AggKind::Sum => match arg {
                    Ty::Int => Ty::Dec(0),
                    Ty::Dec(s) => Ty::Dec(s),
                    _ => Ty::Float,
                },
                AggKind::Avg => match arg {
                    Ty::Int => Ty::Dec(4),
                    Ty::Dec(s) => Ty::Dec((s + 4).min(30)),
                    _ => Ty::Float,
                },
                AggKind::Min | AggKind::Max => arg,
                AggKind::GroupConcat => Ty::Other,
            }
        }
        Expr::Neg(a) => infer(a, scope, aggs, items),
        Expr::Chain(first, rest) => {
            let mut acc = infer(first, scope, aggs, items);
            for (op, x) in rest {
                let r = infer(x, scope, aggs, items);
                acc = arith_ty(*op, acc, r);
            }
            acc
        }
        Expr::Func(Func::Round | Func::Truncate, args) => {
            let a = args
                .first()
                .map(|x| infer(x, scope, aggs, items))
                .unwrap_or(Ty::Other);
            let d = match args.get(1) {
                Some(Expr::Lit(v)) => eval::to_i128(v).unwrap_or(0),
                Some(_) => return Ty::Other,
                None => 0,
            };
            match a {
                Ty::Int => Ty::Int,
                Ty::Dec(_) => Ty::Dec(d.clamp(0, 30) as u8),
                t => t,
            }
        }
        Expr::Func(Func::Floor | Func::Ceil, args) => match args.first() {
            Some(x) => match infer(x, scope, aggs, items) {
                Ty::Dec(_) => Ty::Int,
                t => t,
            },
            None => Ty::Other,
        },
        Expr::Func(Func::Abs, args) => args
            .first()
            .map(|x| infer(x, scope, aggs, items))
            .unwrap_or(Ty::Other),
        _ => Ty::Other,
    }
}

fn arith_ty(op: BinOp, a: Ty, b: Ty) -> Ty {
    let num = |t: Ty| match t {
        Ty::Other => Ty::Float,
        t => t,
    };
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mod => match (num(a), num(b)) {
            (Ty::Int, Ty::Int) => Ty::Int,
            (Ty::Float, _) | (_, Ty::Float) => Ty::Float,
            (Ty::Dec(x), Ty::Dec(y)) => Ty::Dec(x.max(y)),
            (Ty::Dec(x), _) | (_, Ty::Dec(x)) => Ty::Dec(x),
            _ => Ty::Other,
        },
        BinOp::Mul => match (num(a), num(b)) {
            (Ty::Int, Ty::Int) => Ty::Int,
            (Ty::Float, _) | (_, Ty::Float) => Ty::Float,
            (Ty::Dec(x), Ty::Dec(y)) => Ty::Dec((x + y).min(30)),
            (Ty::Dec(x), _) | (_, Ty::Dec(x)) => Ty::Dec(x),
            _ => Ty::Other,
        },
        BinOp::Div => match (num(a), num(b)) {
            (Ty::Float, _) | (_, Ty::Float) => Ty::Float,
            (Ty::Int, _) => Ty::Dec(4),
            (Ty::Dec(x), _) => Ty::Dec((x + 4).min(30)),
            _ => Ty::Other,
        },
        BinOp::IntDiv => Ty::Int,
        _ => Ty::Int,
    }
}

/// Rounds DECIMAL values to the declared scale of their column.
pub(crate) fn finish_value(v: Value, ty: Ty) -> Value {
    match (v, ty) {
        (Value::Decimal(d), Ty::Dec(s)) if d.scale != s => {
            Value::Decimal(d.rescale(s).unwrap_or(d))
        }
        (Value::Decimal(d), Ty::Int) if d.scale == 0 => match i64::try_from(d.mantissa) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Decimal(d),
        },
        (v, _) => v,
    }
}

/// A non-negative integer LIMIT/OFFSET value.
pub(crate) fn limit_value(e: Option<&Expr>, env: &Env<'_>) -> Result<Option<u64>> {
    let Some(e) = e else {
        return Ok(None);
    };
    if !e.is_constant() {
        return Err(errors::app(1210, "Incorrect arguments to LIMIT"));
    }
    let v = eval::eval(e, &Ctx::new(env, &[]))?;
    match v {
        Value::Int(i) if i >= 0 => Ok(Some(i as u64)),
        Value::UInt(u) => Ok(Some(u)),
        _ => Err(errors::app(1210, "Incorrect arguments to LIMIT")),
    }
}

/// Encodes values as a hash key with SQL equality (1 = 1.0, 'a' = 'a ').
pub(crate) fn group_key(vals: &[Value], out: &mut Vec<u8>) {
    out.clear();
    for v in vals {
        match v {
            Value::Null => out.push(0),
            Value::Str(s) => {
                out.push(4);
                let t = s.trim_end_matches(' ');
                out.extend_from_slice(&(t.len() as u32).to_le_bytes());
                out.extend_from_slice(t.as_bytes());
            }
            Value::Bytes(b) => {
                out.push(5);
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
            Value::Date(_) | Value::Datetime(_) => {
                out.push(6);
                let d = eval::as_datetime(v).map(|d| d.pack()).unwrap_or(0);
                out.extend_from_slice(&d.to_le_bytes());
            }
            Value::Time(t) => {
                out.push(7);
                out.extend_from_slice(&t.to_le_bytes());
            }
            Value::Decimal(d) => {
                let mut d = *d;
                while d.scale > 0 && d.mantissa % 10 == 0 {
                    d = Decimal {
                        mantissa: d.mantissa / 10,
                        scale: d.scale - 1,
                    };
                }
                if d.scale == 0 {
                    out.push(1);
                    out.extend_from_slice(&d.mantissa.to_le_bytes());
                } else {
                    out.push(2);
                    out.extend_from_slice(&d.mantissa.to_le_bytes());
                    out.push(d.scale);
                }
            }
            other => {
                let f = eval::to_f64(other).unwrap_or(0.0);
                match eval::to_i128(other) {
                    Some(i) if (i as f64) == f => {
                        out.push(1);
                        out.extend_from_slice(&i.to_le_bytes());
                    }
                    _ => {
                        out.push(3);
                        out.extend_from_slice(&f.to_bits().to_le_bytes());
                    }
                }
            }
        }
    }
}

/// Running state of an aggregate.
pub(crate) struct AggState {
    call: AggCall,
    count: u64,
    acc: Value,
    texts: Vec<String>,
    seen: Option<HashSet<Vec<u8>>>,
}

impl AggState {
    pub fn new(call: &AggCall) -> AggState {
        AggState {
            call: call.clone(),
            count: 0,
            acc: Value::Null,
            texts: Vec::new(),
            seen: call.distinct.then(HashSet::new),
        }
    }

    pub fn add(&mut self, ctx: &Ctx<'_>, key_buf: &mut Vec<u8>) -> Result<()> {
        if self.call.kind == AggKind::CountStar {
            self.count += 1;
            return Ok(());
        }
        let v = match &self.call.arg {
            Some(a) => eval::eval(a, ctx)?,
            None => Value::Null,
        };
        if v.is_null() {
            return Ok(());
        }
        if let Some(seen) = &mut self.seen {
            group_key(std::slice::from_ref(&v), key_buf);
            if !seen.insert(key_buf.clone()) {
                return Ok(());
            }
        }
        self.count += 1;
        match self.call.kind {
            AggKind::Sum | AggKind::Avg => {
                let v = match v {
                    Value::Int(i) => Value::Decimal(Decimal {
                        mantissa: i as i128,
                        scale: 0,
                    }),
                    Value::UInt(u) => Value::Decimal(Decimal {
                        mantissa: u as i128,
                        scale: 0,
                    }),
                    Value::Decimal(d) => Value::Decimal(d),
                    other => Value::Double(eval::to_f64(&other).unwrap_or(0.0)),
                };
                self.acc = if self.acc.is_null() {
                    v
                } else {
                    let e = Expr::Chain(
                        Box::new(Expr::Lit(std::mem::replace(&mut self.acc, Value::Null))),
                        vec![(BinOp::Add, Expr::Lit(v))],
                    );
                    eval::eval(&e, ctx)?
                };
            }
            AggKind::Min | AggKind::Max => {
                let better = self.acc.is_null() || {
                    let o = eval::sort_cmp(&v, &self.acc);
                    if self.call.kind == AggKind::Min {
                        o == std::cmp::Ordering::Less
                    } else {
                        o == std::cmp::Ordering::Greater
                    }
                };
                if better {
                    self.acc = v;
                }
            }
            AggKind::GroupConcat => {
                if let Some(t) = eval::to_text(&v) {
                    self.texts.push(t);
                }
            }
            AggKind::Count | AggKind::CountStar => {}
        }
        Ok(())
    }

    pub fn finish(&self, env: &Env<'_>) -> Result<Value> {
        Ok(match self.call.kind {
            AggKind::Count | AggKind::CountStar => Value::Int(self.count as i64),
            AggKind::Sum | AggKind::Min | AggKind::Max => self.acc.clone(),
            AggKind::Avg => {
                if self.count == 0 {
                    Value::Null
                } else {
                    let e = Expr::Chain(
                        Box::new(Expr::Lit(self.acc.clone())),
                        vec![(BinOp::Div, Expr::Lit(Value::Int(self.count as i64)))],
                    );
                    eval::eval(&e, &Ctx::new(env, &[]))?
                }
            }
            AggKind::GroupConcat => {
                if self.count == 0 {
                    Value::Null
                } else {
                    Value::Str(self.texts.join(","))
                }
            }
        })
    }
}

/// A SELECT bound to its source, ready to run.
pub(crate) struct Bound {
    pub names: Vec<String>,
    pub items: Vec<Expr>,
    pub item_tys: Vec<Ty>,
    pub where_: Option<Expr>,
    pub group_by: Vec<Expr>,
    pub having: Option<Expr>,
    pub order_by: Vec<(Expr, bool)>,
    pub aggs: Vec<AggCall>,
    pub aggregate: bool,
}

pub(crate) fn bind_select(sel: &Select, scope: &Scope) -> Result<Bound> {
    let mut b = Binder::new(scope);
    let mut names = Vec::new();
    let mut items = Vec::new();
    for it in &sel.items {
        match it {
            SelItem::Star(q) => {
                if let Some(q) = q {
                    let ok = match &scope.alias {
                        Some(a) => a.eq_ignore_ascii_case(q),
                        None => scope
                            .table
                            .as_ref()
                            .is_some_and(|t| t.eq_ignore_ascii_case(q)),
                    };
                    if !ok {
                        return Err(errors::app(1051, format!("Unknown table '{q}'")));
                    }
                }
                if scope.table.is_none() {
                    return Err(errors::app(1096, "No tables used"));
                }
                for i in scope.visible() {
                    names.push(scope.names[i].clone());
                    items.push(Expr::Col(i));
                }
            }
            SelItem::Expr(e, name) => {
                let e = b.bind(e.clone(), "field list", Names::Columns, true)?;
                names.push(name.clone());
                items.push(e);
            }
        }
    }
    b.items = names.iter().cloned().zip(items.iter().cloned()).collect();
    let where_ = match &sel.where_ {
        Some(w) => Some(b.bind(w.clone(), "where clause", Names::Columns, false)?),
        None => None,
    };
    let mut group_by = Vec::new();
    for g in &sel.group_by {
        let e = match g {
            Expr::Lit(Value::Int(n)) => {
                let i = *n as usize;
                if *n < 1 || i > items.len() {
                    return Err(errors::unknown_column(&n.to_string(), "group statement"));
                }
                if items[i - 1].has_aggregate() {
                    return Err(errors::app(
                        1056,
                        format!("Can't group on '{}'", names[i - 1]),
                    ));
                }
                items[i - 1].clone()
            }
            other => b.bind(
                other.clone(),
                "group statement",
                Names::ColumnsThenAliasExpr,
                false,
            )?,
        };
        group_by.push(e);
    }
    let having = match &sel.having {
        Some(h) => Some(b.bind(h.clone(), "having clause", Names::AliasFirst, true)?),
        None => None,
    };
    let mut order_by = Vec::new();
    for (o, desc) in &sel.order_by {
        let e = match o {
            Expr::Lit(Value::Int(n)) => {
                if *n < 1 || *n as usize > items.len() {
                    return Err(errors::unknown_column(&n.to_string(), "order clause"));
                }
                Expr::Out(*n as usize - 1)
            }
            other => b.bind(other.clone(), "order clause", Names::AliasFirst, true)?,
        };
        // a select item that is a plain column orders by that column (plans can use it)
        let e = match e {
            Expr::Out(i) => match items.get(i) {
                Some(Expr::Col(c)) => Expr::Col(*c),
                _ => Expr::Out(i),
            },
            other => other,
        };
        order_by.push((e, *desc));
    }
    let aggregate = !b.aggs.is_empty() || !group_by.is_empty();
    if !aggregate && sel.having.is_some() {
        // HAVING without aggregation works like WHERE on the result
    }
    let mut item_tys = Vec::with_capacity(items.len());
    for e in &items {
        let t = infer(e, scope, &b.aggs, &item_tys);
        item_tys.push(t);
    }
    Ok(Bound {
        names,
        items,
        item_tys,
        where_,
        group_by,
        having,
        order_by,
        aggs: b.aggs,
        aggregate,
    })
}

/// Columns an expression list reads.
pub(crate) fn used_columns<'e>(exprs: impl Iterator<Item = &'e Expr>, out: &mut Vec<usize>) {
    for e in exprs {
        e.walk(&mut |x| {
            if let Expr::Col(i) = x
                && !out.contains(i)
            {
                out.push(*i);
            }
        });
    }
}

impl Bound {
    fn all_exprs(&self) -> Vec<&Expr> {
        let mut v: Vec<&Expr> = self.items.iter().collect();
        v.extend(self.where_.iter());
        v.extend(self.group_by.iter());
        v.extend(self.having.iter());
        v.extend(self.order_by.iter().map(|(e, _)| e));
        v.extend(self.aggs.iter().filter_map(|a| a.arg.as_ref()));
        v
    }
}

/// What a SELECT of an NDB table reads: the plan's access path, the columns to fetch
/// (table positions, ascending) and the lock.
pub(crate) struct TableRead<'a> {
    pub access: &'a plan::Access,
    pub cols: &'a [usize],
    pub lock: LockMode,
}

/// Reads a [`TableRead`] and passes each row (full width) to the sink, which returns
/// false when no more rows are needed.
pub(crate) type ReadRows<'r> =
    dyn FnMut(TableRead<'_>, &mut dyn FnMut(Vec<Value>) -> Result<bool>) -> Result<()> + 'r;

/// Runs a SELECT: (column names, rows).
pub(crate) fn run(s: &mut Session, sel: &Select) -> Result<(Vec<String>, Vec<Vec<Value>>)> {
    let source = resolve(s, sel.from.as_ref())?;
    let scope = Scope::of(&source, sel.from.as_ref());
    let b = bind_select(sel, &scope)?;
    let now = s.now();
    if let Source::Table { table, .. } = &source {
        let wrote = s.txn.has_written();
        let in_txn = s.txn.active();
        let ndb = s.ndb.clone();
        let (vars, txn) = (&s.vars, &mut s.txn);
        let env = vars.env(now);
        let rows = run_table(sel, &b, &table.def, &env, wrote, &mut |read, sink| {
            if in_txn {
                let tx = txn.tx(&ndb)?;
                plan::read_rows(
                    &ndb,
                    Some(tx),
                    table,
                    read.access,
                    read.cols,
                    read.lock,
                    sink,
                )
            } else if read.lock != LockMode::CommittedRead {
                let mut tx = ndb.start_transaction()?;
                plan::read_rows(
                    &ndb,
                    Some(&mut tx),
                    table,
                    read.access,
                    read.cols,
                    read.lock,
                    sink,
                )?;
                tx.execute(
                    crate::api::ExecType::Commit,
                    crate::api::AbortOption::AbortOnError,
                )
                .map(|_| ())
            } else {
                plan::read_rows(&ndb, None, table, read.access, read.cols, read.lock, sink)
            }
        })?;
        return Ok((b.names, rows));
    }
    let ci = match &source {
        Source::Virtual { db, columns, .. } => meta::ci_columns(db, columns.len()),
        _ => Vec::new(),
    };
    let mut env = s.vars.env(now);
    env.ci_columns = &ci;
    let limit = limit_value(sel.limit.as_ref(), &env)?;
    let offset = limit_value(sel.offset.as_ref(), &env)?.unwrap_or(0);
    let mut out = Output::new(&b, wanted(sel, limit, offset));
    if limit == Some(0) {
        return Ok((b.names, Vec::new()));
    }
    match &source {
        Source::Dual => {
            out.add_row(&[], &env)?;
        }
        Source::Virtual { rows, .. } => {
            for r in rows {
                if !out.add_row(r, &env)? {
                    break;
                }
            }
        }
        Source::Table { .. } => unreachable!("table SELECTs returned above"),
    }
    let rows = out.finish(&env, sel.distinct, offset, limit)?;
    Ok((b.names, rows))
}

/// Result rows after which the source need not be read further (no DISTINCT).
fn wanted(sel: &Select, limit: Option<u64>, offset: u64) -> Option<u64> {
    if sel.distinct {
        None
    } else {
        limit.map(|l| l.saturating_add(offset))
    }
}

/// Runs a bound SELECT of an NDB table whose rows `read` produces: plans the access
/// path, then WHERE, grouping, ordering and LIMIT over what it reads. `wrote`: the
/// transaction wrote rows, so an unsorted plan must not rely on index order.
pub(crate) fn run_table(
    sel: &Select,
    b: &Bound,
    def: &TableDef,
    env: &Env<'_>,
    wrote: bool,
    read: &mut ReadRows<'_>,
) -> Result<Vec<Vec<Value>>> {
    let limit = limit_value(sel.limit.as_ref(), env)?;
    let offset = limit_value(sel.offset.as_ref(), env)?.unwrap_or(0);
    let mut out = Output::new(b, wanted(sel, limit, offset));
    if limit == Some(0) {
        return Ok(Vec::new());
    }
    let plan = plan::plan(
        def,
        b.where_.as_ref(),
        env,
        if b.aggregate || sel.distinct {
            &[]
        } else {
            &b.order_by
        },
        limit.is_some(),
    )?;
    let plan = plan::for_writer(plan, wrote);
    out.ordered = if b.aggregate || sel.distinct {
        b.order_by.is_empty()
    } else {
        plan.ordered
    };
    let mut cols = Vec::new();
    used_columns(b.all_exprs().into_iter(), &mut cols);
    if cols.is_empty() {
        cols.push(def.primary_key[0]);
    }
    cols.sort_unstable();
    let lock = match sel.lock {
        Lock::None => LockMode::CommittedRead,
        Lock::Shared => LockMode::Read,
        Lock::Exclusive => LockMode::Exclusive,
    };
    read(
        TableRead {
            access: &plan.access,
            cols: &cols,
            lock,
        },
        &mut |r| out.add_row(&r, env),
    )?;
    out.finish(env, sel.distinct, offset, limit)
}

/// Plans a SELECT without running it (EXPLAIN).
pub(crate) fn explain(
    s: &Session,
    sel: &Select,
) -> Result<(String, Option<Plan>, Option<Arc<TableRuntime>>)> {
    let source = resolve(s, sel.from.as_ref())?;
    let scope = Scope::of(&source, sel.from.as_ref());
    let b = bind_select(sel, &scope)?;
    let env = s.vars.env(s.now());
    let limit = limit_value(sel.limit.as_ref(), &env)?;
    Ok(match source {
        Source::Dual => ("NULL".into(), None, None),
        Source::Virtual { db, name, .. } => (format!("{db}.{name}"), None, None),
        Source::Table { table, .. } => {
            let plan = plan::plan(
                &table.def,
                b.where_.as_ref(),
                &env,
                if b.aggregate || sel.distinct {
                    &[]
                } else {
                    &b.order_by
                },
                limit.is_some(),
            )?;
            (table.def.name.clone(), Some(plan), Some(table))
        }
    })
}

struct Group {
    first: Vec<Value>,
    states: Vec<AggState>,
}

/// Accumulates result rows.
struct Output<'b> {
    b: &'b Bound,
    /// Stop after this many rows (no sort, no grouping, no DISTINCT needed).
    want: Option<u64>,
    ordered: bool,
    rows: Vec<(Vec<Value>, Vec<Value>)>,
    groups: Vec<Group>,
    group_ix: HashMap<Vec<u8>, usize>,
    key: Vec<u8>,
}

impl<'b> Output<'b> {
    fn new(b: &'b Bound, want: Option<u64>) -> Output<'b> {
        Output {
            b,
            want,
            ordered: b.order_by.is_empty(),
            rows: Vec::new(),
            groups: Vec::new(),
            group_ix: HashMap::new(),
            key: Vec::new(),
        }
    }

    /// Adds a source row; false when no more rows are needed.
    fn add_row(&mut self, row: &[Value], env: &Env<'_>) -> Result<bool> {
        let ctx = Ctx::new(env, row);
        if let Some(w) = &self.b.where_
            && eval::truth(&eval::eval(w, &ctx)?) != Some(true)
        {
            return Ok(true);
        }
        if self.b.aggregate {
            let gvals = self
                .b
                .group_by
                .iter()
                .map(|g| eval::eval(g, &ctx))
                .collect::<Result<Vec<_>>>()?;
            let mut key = std::mem::take(&mut self.key);
            group_key(&gvals, &mut key);
            let gi = match self.group_ix.get(&key) {
                Some(&i) => i,
                None => {
                    self.groups.push(Group {
                        first: row.to_vec(),
                        states: self.b.aggs.iter().map(AggState::new).collect(),
                    });
                    self.group_ix.insert(key.clone(), self.groups.len() - 1);
                    self.groups.len() - 1
                }
            };
            for st in &mut self.groups[gi].states {
                st.add(&ctx, &mut key)?;
            }
            self.key = key;
            return Ok(true);
        }
        let out = self
            .b
            .items
            .iter()
            .map(|e| eval::eval(e, &ctx))
            .collect::<Result<Vec<_>>>()?;
        if let Some(h) = &self.b.having {
            let hctx = Ctx {
                row,
                aggs: &[],
                out: &out,
                new_row: &[],
                env,
            };
            if eval::truth(&eval::eval(h, &hctx)?) != Some(true) {
                return Ok(true);
            }
        }
        let keys = self.order_keys(row, &[], &out, env)?;
        self.rows.push((out, keys));
        if self.ordered
            && let Some(w) = self.want
            && self.rows.len() as u64 >= w
        {
            return Ok(false);
        }
        Ok(true)
    }

    fn order_keys(
        &self,
        row: &[Value],
        aggs: &[Value],
        out: &[Value],
        env: &Env<'_>,
    ) -> Result<Vec<Value>> {
        let ctx = Ctx {
            row,
            aggs,
            out,
            new_row: &[],
            env,
        };
        self.b
            .order_by
            .iter()
            .map(|(e, _)| eval::eval(e, &ctx))
            .collect()
    }

    fn finish(
        mut self,
        env: &Env<'_>,
        distinct: bool,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<Vec<Vec<Value>>> {
        if self.b.aggregate {
            if self.groups.is_empty() && self.b.group_by.is_empty() {
                self.groups.push(Group {
                    first: Vec::new(),
                    states: self.b.aggs.iter().map(AggState::new).collect(),
                });
            }
            let groups = std::mem::take(&mut self.groups);
            for g in groups {
                let aggs = g
                    .states
                    .iter()
                    .map(|s| s.finish(env))
                    .collect::<Result<Vec<_>>>()?;
                let ctx = Ctx {
                    row: &g.first,
                    aggs: &aggs,
                    out: &[],
                    new_row: &[],
                    env,
                };
                let out = self
                    .b
                    .items
                    .iter()
                    .map(|e| eval::eval(e, &ctx))
                    .collect::<Result<Vec<_>>>()?;
                if let Some(h) = &self.b.having {
                    let hctx = Ctx {
                        row: &g.first,
                        aggs: &aggs,
                        out: &out,
                        new_row: &[],
                        env,
                    };
                    if eval::truth(&eval::eval(h, &hctx)?) != Some(true) {
                        continue;
                    }
                }
                let keys = self.order_keys(&g.first, &aggs, &out, env)?;
                self.rows.push((out, keys));
            }
        }
        let mut rows = self.rows;
        if distinct {
            let mut seen = HashSet::new();
            let mut key = Vec::new();
            rows.retain(|(out, _)| {
                group_key(out, &mut key);
                seen.insert(key.clone())
            });
        }
        if !self.ordered || self.b.aggregate {
            let order = &self.b.order_by;
            if !order.is_empty() {
                rows.sort_by(|(_, a), (_, b)| {
                    for (i, (_, desc)) in order.iter().enumerate() {
                        let o = eval::sort_cmp(&a[i], &b[i]);
                        let o = if *desc { o.reverse() } else { o };
                        if o != std::cmp::Ordering::Equal {
                            return o;
                        }
                    }
                    std::cmp::Ordering::Equal
                });
            }
        }
        let start = (offset as usize).min(rows.len());
        let end = match limit {
            Some(l) => start.saturating_add(l as usize).min(rows.len()),
            None => rows.len(),
        };
        let tys = &self.b.item_tys;
        Ok(rows
            .drain(start..end)
            .map(|(out, _)| {
                out.into_iter()
                    .zip(tys)
                    .map(|(v, t)| finish_value(v, *t))
                    .collect()
            })
            .collect())
    }
}
