//! INSERT (also IGNORE, ... SELECT, ON DUPLICATE KEY UPDATE), REPLACE (NDB's writeTuple),
//! UPDATE and DELETE (with WHERE, ORDER BY, LIMIT), with MySQL's row counts.
//!
//! IGNORE, ON DUPLICATE KEY UPDATE and REPLACE resolve a conflict on the primary key
//! and, as MySQL does, on a unique index: the row is skipped, the other row updated,
//! or the other row deleted (`dml_unique`: on a table with unique indexes these go row
//! by row, each looking its unique values up first).
//!
//! UPDATE and DELETE first collect the primary keys of the matching rows with committed
//! reads (inside a transaction: through it, so its own writes count), then, batch by
//! batch, re-read those rows with exclusive locks, re-check the WHERE on the locked row
//! and write. So a row changed concurrently between the two steps is judged on its
//! current value, and an index scan never sees the statement's own updates.
//!
//! Invariants: an autocommit statement commits every `Session::batch_rows` rows (one
//! transaction when it touches at most that many); inside a session transaction the
//! rows of the transaction are counted and more than MaxNoOfConcurrentOperations fail
//! with NDB's 233; all rows of an INSERT are converted before any is written, so a bad
//! value fails the statement before it changes anything; engine errors are reported in
//! MySQL's terms (duplicate entry with the key's values, table full with its name).

use super::assign::{assign, implicit_default};
use super::errors;
use super::eval::{self, Ctx, Env};
use super::ir::{Delete, Expr, Insert, InsertSource, TableName, Update};
use super::meta::{self, TableMeta};
use super::plan::{self, Plan};
use super::select::{self, Binder, Names, Scope, Source};
use super::{Session, SqlResult, TxnState};
use crate::api::{
    AbortOption, ExecType, Ndb, OpId, OpKind, OpOutcome, TableRuntime, Transaction, TxState,
};
use crate::error::{NdbError, Result, codes};
use crate::schema::value::coerce;
use crate::schema::{Column, Datetime, TableDef, Value};
use crate::txn::LockMode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Where a statement's writes go: the session's transaction, or its own transactions
/// committed every `batch` rows.
pub(crate) struct Writer<'a> {
    ndb: Ndb,
    txn: &'a mut TxnState,
    own: Option<Transaction>,
    batch: usize,
    max_ops: usize,
    in_tx: usize,
}

impl<'a> Writer<'a> {
    pub fn new(ndb: Ndb, txn: &'a mut TxnState, batch: usize, max_ops: usize) -> Writer<'a> {
        Writer {
            ndb,
            txn,
            own: None,
            batch: batch.max(1),
            max_ops,
            in_tx: 0,
        }
    }

    pub fn tx(&mut self) -> Result<&mut Transaction> {
        if self.txn.active() {
            return self.txn.tx(&self.ndb);
        }
        if self
            .own
            .as_ref()
            .is_some_and(|t| t.state() != TxState::Open)
        {
            self.own = None;
        }
        match &mut self.own {
            Some(t) => Ok(t),
            slot => Ok(slot.insert(self.ndb.start_transaction()?)),
        }
    }

    /// Rows the next batch may hold.
    pub fn room(&self) -> usize {
        if self.txn.active() {
            plan::BATCH
        } else {
            self.batch.saturating_sub(self.in_tx).clamp(1, plan::BATCH)
        }
    }

    /// Called before write operations are executed.
    pub fn writing(&mut self) {
        if self.txn.active() {
            self.txn.stmt_wrote = true;
        }
    }

    /// Accounts rows touched; commits a full batch in autocommit mode.
    pub fn done(&mut self, rows: usize) -> Result<()> {
        if self.txn.active() {
            self.txn.rows += rows;
            if self.txn.rows > self.max_ops {
                return Err(codes::too_many_operations().detail(format!(
                    "the transaction touches more than MaxNoOfConcurrentOperations ({}) rows",
                    self.max_ops
                )));
            }
            return Ok(());
        }
        self.in_tx += rows;
        if self.in_tx >= self.batch {
            self.commit_own()?;
        }
        Ok(())
    }

    fn commit_own(&mut self) -> Result<()> {
        self.in_tx = 0;
        if let Some(mut t) = self.own.take()
            && t.state() == TxState::Open
        {
            t.execute(ExecType::Commit, AbortOption::AbortOnError)?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<()> {
        if !self.txn.active() {
            self.commit_own()?;
        }
        Ok(())
    }
}

/// The NDB table a DML statement writes (virtual tables are read-only).
fn target(s: &Session, t: &TableName) -> Result<(String, Arc<TableRuntime>)> {
    let db = s.db_of(t)?;
    if meta::is_virtual(&db) {
        return Err(errors::read_only(&t.name));
    }
    let table = s.table(&db, &t.name)?;
    Ok((db, table))
}

fn entry_text(vals: &[&Value]) -> String {
    vals.iter()
        .map(|v| eval::to_text(v).unwrap_or_else(|| "NULL".into()))
        .collect::<Vec<_>>()
        .join("-")
}

/// An engine error of a write, in MySQL's terms; `row` is the row written (full width).
pub(crate) fn write_error(e: NdbError, def: &TableDef, row: Option<&[Value]>) -> NdbError {
    match e.code {
        630 => {
            let entry = row
                .map(|r| {
                    entry_text(
                        &def.primary_key
                            .iter()
                            .map(|&p| r.get(p).unwrap_or(&Value::Null))
                            .collect::<Vec<_>>(),
                    )
                })
                .unwrap_or_default();
            errors::duplicate_entry(e, &entry, "PRIMARY")
        }
        893 => {
            let idx_name = e
                .message
                .split("index '")
                .nth(1)
                .and_then(|r| r.split('\'').next())
                .unwrap_or("")
                .to_string();
            let key = idx_name
                .trim_end_matches(crate::schema::UNIQUE_INDEX_SUFFIX)
                .to_string();
            let entry = match (def.index(&idx_name), row) {
                (Some((_, idx)), Some(r)) => entry_text(
                    &idx.columns
                        .iter()
                        .map(|&c| r.get(c).unwrap_or(&Value::Null))
                        .collect::<Vec<_>>(),
                ),
                _ => String::new(),
            };
            errors::duplicate_entry(e, &entry, &key)
        }
        827 | 625 | 902 | 1601 => errors::table_full(e, &def.name),
        _ => e,
    }
}

/// The first failed operation among `ops`, with its index.
fn failed_op(tx: &Transaction, ops: &[OpId]) -> Option<(usize, NdbError)> {
    ops.iter()
        .enumerate()
        .find_map(|(i, op)| match tx.outcome(*op) {
            Some(OpOutcome::Failed(e)) => Some((i, e.clone())),
            _ => None,
        })
}

fn widen(def: &TableDef, vals: &[(usize, Value)]) -> Vec<Value> {
    let mut row = vec![Value::Null; def.columns.len()];
    for (c, v) in vals {
        if let Some(x) = row.get_mut(*c) {
            *x = v.clone();
        }
    }
    row
}

fn now_value(col: &Column, now: Datetime) -> Value {
    coerce(Value::Datetime(now), &col.ty, &col.name).unwrap_or(Value::Datetime(now))
}

/// The value DEFAULT stands for in a column.
fn default_of(col: &Column, meta: &TableMeta, now: Datetime, strict: bool) -> Result<Value> {
    if meta
        .default_now
        .iter()
        .any(|n| n.eq_ignore_ascii_case(&col.name))
    {
        return Ok(now_value(col, now));
    }
    if let Some(d) = &col.default {
        return Ok(d.clone());
    }
    if col.nullable || col.auto_increment {
        return Ok(Value::Null);
    }
    if strict {
        return Err(errors::no_default(&col.name));
    }
    Ok(implicit_default(&col.ty))
}

/// The first of `n` consecutive AUTO_INCREMENT values taken for one statement (as
/// MySQL's "consecutive" lock mode gives a simple INSERT): a statement captured on
/// several node groups generates the same values on each when they start alike.
fn next_auto_block(table: &TableRuntime, n: u64) -> u64 {
    table.auto_increment.fetch_add(n, Ordering::AcqRel)
}

fn is_zero(v: &Value) -> bool {
    eval::to_f64(v) == Some(0.0) && !matches!(v, Value::Str(s) if !s.trim().starts_with('0'))
}

pub(crate) fn insert(s: &mut Session, ins: &Insert) -> Result<SqlResult> {
    let (db, table) = target(s, &ins.table)?;
    let def = table.def.clone();
    let meta = meta::table(s.ndb.cluster(), &db, &def.name, def.id).unwrap_or_default();
    let source = Source::Table {
        db: db.clone(),
        table: table.clone(),
    };
    let scope = Scope::of(&source, Some(&ins.table));
    let mut targets: Vec<usize> = Vec::new();
    if ins.columns.is_empty() {
        targets.extend(def.visible_columns().map(|(i, _)| i));
    } else {
        for c in &ins.columns {
            let i = scope.column(&[], c, "field list")?;
            if targets.contains(&i) {
                return Err(errors::app(1110, format!("Column '{c}' specified twice")));
            }
            targets.push(i);
        }
    }
    // ON DUPLICATE KEY UPDATE assignments
    let mut on_dup: Vec<(usize, Option<Expr>)> = Vec::new();
    {
        let mut b = Binder::new(&scope);
        for (name, e) in &ins.on_dup {
            let c = scope.column(&[], name, "field list")?;
            let e = match e {
                Expr::Default => None,
                e => {
                    let bound = b.bind(e.clone(), "field list", Names::Columns, false)?;
                    Some(bound.rewrite(&mut |x| match x {
                        Expr::ValuesOf(n) => scope.column(&[], &n, "field list").map(Expr::NewCol),
                        other => Ok(other),
                    })?)
                }
            };
            on_dup.push((c, e));
        }
    }
    let now = s.now();
    let strict = !ins.ignore;
    // the rows to insert: None = DEFAULT
    let source_rows: Vec<Vec<Option<Value>>> = match &ins.source {
        InsertSource::Values(rows) => {
            let env = s.vars.env(now);
            let ctx = Ctx::new(&env, &[]);
            let mut out = Vec::with_capacity(rows.len());
            for (r, row) in rows.iter().enumerate() {
                if row.is_empty() && ins.columns.is_empty() {
                    out.push(vec![None; targets.len()]);
                    continue;
                }
                if row.len() != targets.len() {
                    return Err(errors::column_count(r as u64 + 1));
                }
                let mut vals = Vec::with_capacity(row.len());
                for e in row {
                    vals.push(match e {
                        Expr::Default => None,
                        e => Some(eval::eval(e, &ctx)?),
                    });
                }
                out.push(vals);
            }
            out
        }
        InsertSource::Select(sel) => {
            // Given by the API node (a capture over several node groups, which ran
            // the SELECT over every group), or run here.
            let rows = match s.txn.given_rows.take() {
                Some(rows) => rows,
                None => select::run(s, sel)?.1,
            };
            if rows.first().is_some_and(|r| r.len() != targets.len()) {
                return Err(errors::column_count(1));
            }
            rows.into_iter()
                .map(|r| r.into_iter().map(Some).collect())
                .collect()
        }
    };
    let from_select = matches!(ins.source, InsertSource::Select(_));
    let records = source_rows.len() as u64;
    // convert every row before writing any
    let auto = def
        .auto_increment_column()
        .filter(|&c| !def.columns[c].hidden);
    let mut first_id: Option<u64> = None;
    // (row, position in its values) of the AUTO_INCREMENT values to generate.
    let mut generated: Vec<(usize, usize)> = Vec::new();
    let mut prepared: Vec<Vec<(usize, Value)>> = Vec::with_capacity(source_rows.len());
    for (r, src) in source_rows.into_iter().enumerate() {
        let rowno = r as u64 + 1;
        let mut vals: Vec<(usize, Value)> = Vec::with_capacity(def.columns.len());
        let mut given = vec![false; def.columns.len()];
        for (&c, v) in targets.iter().zip(src) {
            given[c] = true;
            let col = &def.columns[c];
            let v = match v {
                None => default_of(col, &meta, now, strict)?,
                Some(v) => v,
            };
            if Some(c) == auto && (v.is_null() || is_zero(&v)) {
                generated.push((prepared.len(), vals.len()));
                vals.push((c, Value::Null));
                continue;
            }
            vals.push((c, assign(v, col, rowno, strict)?));
        }
        for (c, col) in def.columns.iter().enumerate() {
            if given[c] || col.hidden {
                continue;
            }
            if Some(c) == auto {
                generated.push((prepared.len(), vals.len()));
                vals.push((c, Value::Null));
            } else if meta
                .default_now
                .iter()
                .any(|n| n.eq_ignore_ascii_case(&col.name))
            {
                vals.push((c, now_value(col, now)));
            } else if col.default.is_none() && !col.nullable {
                if strict {
                    return Err(errors::no_default(&col.name));
                }
                vals.push((c, implicit_default(&col.ty)));
            } else if ins.replace {
                // REPLACE sets every column: an existing row gets defaults too
                vals.push((c, col.default.clone().unwrap_or(Value::Null)));
            }
        }
        prepared.push(vals);
    }
    if let Some(c) = auto
        && !generated.is_empty()
    {
        let base = next_auto_block(&table, generated.len() as u64);
        first_id = Some(base);
        let col = &def.columns[c];
        for (i, &(row, at)) in generated.iter().enumerate() {
            prepared[row][at].1 = coerce(Value::UInt(base + i as u64), &col.ty, &col.name)
                .map_err(|_| errors::out_of_range(&col.name, row as u64 + 1))?;
        }
    }
    let batch = s.batch_rows();
    let max_ops = s.max_operations();
    let ndb = s.ndb.clone();
    let kind = if ins.replace {
        OpKind::Write
    } else {
        OpKind::Insert
    };
    let mut affected = 0u64;
    let mut dups = 0u64;
    {
        let env = s.vars.env(now);
        let mut w = Writer::new(ndb, &mut s.txn, batch, max_ops);
        let unique = super::dml_unique::has_unique_index(&table);
        let by_row = !on_dup.is_empty() || ((ins.ignore || ins.replace) && unique);
        if !by_row {
            let mut i = 0;
            while i < prepared.len() {
                let n = w.room().min(prepared.len() - i);
                let chunk = &prepared[i..i + n];
                w.writing();
                let tx = w.tx()?;
                let mut ops = Vec::with_capacity(n);
                for vals in chunk {
                    let (key, values) = if kind == OpKind::Write {
                        // a write names its row by the key (NDB writeTuple)
                        vals.iter()
                            .cloned()
                            .partition(|(c, _)| def.columns[*c].primary_key)
                    } else {
                        (Vec::new(), vals.clone())
                    };
                    ops.push(tx.define_by_pos(&table, kind, key, values, None)?);
                }
                let abort = if ins.ignore {
                    AbortOption::IgnoreError
                } else {
                    AbortOption::AbortOnError
                };
                if let Err(e) = tx.execute(ExecType::NoCommit, abort) {
                    let row = failed_op(tx, &ops).map(|(k, _)| widen(&def, &chunk[k]));
                    return Err(write_error(e, &def, row.as_deref()));
                }
                for (k, op) in ops.iter().enumerate() {
                    match tx.outcome(*op) {
                        Some(OpOutcome::Failed(e)) if ins.ignore && e.code == 630 => dups += 1,
                        Some(OpOutcome::Failed(e)) => {
                            let row = widen(&def, &chunk[k]);
                            return Err(write_error(e.clone(), &def, Some(&row)));
                        }
                        _ => affected += 1,
                    }
                }
                w.done(n)?;
                i += n;
            }
        } else {
            use super::dml_unique::{delete_row, row_exists, unique_holders};
            for (r, vals) in prepared.iter().enumerate() {
                w.writing();
                let tx = w.tx()?;
                let new_row = widen(&def, vals);
                let own_key: Vec<Value> = def
                    .primary_key
                    .iter()
                    .map(|&p| new_row[p].clone())
                    .collect();
                let holders = if unique {
                    unique_holders(tx, &table, &new_row, &own_key)?
                } else {
                    Vec::new()
                };
                if ins.replace {
                    // MySQL's REPLACE: every row holding one of its unique values goes
                    // first, then the row is written by its primary key.
                    for h in &holders {
                        delete_row(tx, &table, h)?;
                        affected += 1;
                    }
                    let (key, values): (Vec<_>, Vec<_>) = vals
                        .iter()
                        .cloned()
                        .partition(|(c, _)| def.columns[*c].primary_key);
                    tx.define_by_pos(&table, OpKind::Write, key, values, None)?;
                    tx.execute(ExecType::NoCommit, AbortOption::AbortOnError)
                        .map_err(|e| write_error(e, &def, Some(&new_row)))?;
                    affected += 1;
                    w.done(1)?;
                    continue;
                }
                if let Some(holder) = holders.first() {
                    dups += 1;
                    if !on_dup.is_empty() {
                        // PRIMARY is checked first, as MySQL does.
                        let target = if row_exists(tx, &table, &own_key)? {
                            own_key.clone()
                        } else {
                            holder.clone()
                        };
                        let rowno = r as u64 + 1;
                        if upsert(tx, &table, &target, &new_row, &on_dup, &meta, &env, rowno)? {
                            affected += 2;
                        }
                    }
                    w.done(1)?;
                    continue;
                }
                let op =
                    tx.define_by_pos(&table, OpKind::Insert, Vec::new(), vals.clone(), None)?;
                tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
                match tx.outcome(op) {
                    Some(OpOutcome::Failed(e)) if e.code == 630 && on_dup.is_empty() => {
                        // INSERT IGNORE
                        dups += 1;
                    }
                    Some(OpOutcome::Failed(e)) if e.code == 630 => {
                        dups += 1;
                        let rowno = r as u64 + 1;
                        if upsert(tx, &table, &own_key, &new_row, &on_dup, &meta, &env, rowno)? {
                            affected += 2;
                        }
                    }
                    Some(OpOutcome::Failed(e)) => {
                        let row = widen(&def, vals);
                        return Err(write_error(e.clone(), &def, Some(&row)));
                    }
                    _ => affected += 1,
                }
                w.done(1)?;
            }
        }
        w.finish()?;
    }
    if let Some(id) = first_id {
        s.vars.last_insert_id = id;
    }
    let info = (from_select || records > 1).then(|| {
        format!(
            "Records: {records}  Duplicates: {dups}  Warnings: {}",
            if ins.ignore { dups } else { 0 }
        )
    });
    Ok(SqlResult::Affected {
        rows: affected,
        last_insert_id: first_id,
        info,
    })
}

/// ON DUPLICATE KEY UPDATE of the row keyed `key`, the one `new_row` conflicts with:
/// true when the row changed.
#[allow(clippy::too_many_arguments)]
fn upsert(
    tx: &mut Transaction,
    table: &Arc<TableRuntime>,
    key: &[Value],
    new_row: &[Value],
    sets: &[(usize, Option<Expr>)],
    meta: &TableMeta,
    env: &Env<'_>,
    rowno: u64,
) -> Result<bool> {
    let def = &table.def;
    let key: Vec<Value> = key.to_vec();
    let cols: Vec<usize> = (0..def.columns.len()).collect();
    let old = plan::read_keys_in(
        tx,
        table,
        std::slice::from_ref(&key),
        &cols,
        LockMode::Exclusive,
    )?
    .pop()
    .flatten()
    .ok_or_else(codes::tuple_not_found)?;
    let mut row = old.clone();
    for (c, e) in sets {
        let col = &def.columns[*c];
        let v = match e {
            None => default_of(col, meta, env.now, true)?,
            Some(e) => {
                let ctx = Ctx {
                    row: &row,
                    aggs: &[],
                    out: &[],
                    new_row,
                    env,
                };
                eval::eval(e, &ctx)?
            }
        };
        row[*c] = assign(v, col, rowno, true)?;
    }
    let changed: Vec<(usize, Value)> = (0..row.len())
        .filter(|&c| row[c] != old[c])
        .map(|c| (c, row[c].clone()))
        .collect();
    if changed.is_empty() {
        return Ok(false);
    }
    if changed.iter().any(|(c, _)| def.columns[*c].primary_key) {
        return Err(errors::unsupported(
            "changing the primary key in ON DUPLICATE KEY UPDATE",
        ));
    }
    let key: Vec<(usize, Value)> = def.primary_key.iter().copied().zip(key).collect();
    tx.define_by_pos(table, OpKind::Update, key, changed, None)?;
    tx.execute(ExecType::NoCommit, AbortOption::AbortOnError)
        .map_err(|e| write_error(e, def, Some(&row)))?;
    Ok(true)
}

/// UPDATE/DELETE bound to their table.
struct Target {
    table: Arc<TableRuntime>,
    where_: Option<Expr>,
    order: Vec<(Expr, bool)>,
    limit: Option<u64>,
    plan: Plan,
}

fn bind_target(
    s: &Session,
    t: &TableName,
    where_: Option<&Expr>,
    order_by: &[(Expr, bool)],
    limit: Option<&Expr>,
    scope_out: &mut Option<Scope>,
) -> Result<Target> {
    let (db, table) = target(s, t)?;
    let source = Source::Table {
        db,
        table: table.clone(),
    };
    let scope = scope_out.insert(Scope::of(&source, Some(t)));
    let mut b = Binder::new(scope);
    let where_ = match where_ {
        Some(w) => Some(b.bind(w.clone(), "where clause", Names::Columns, false)?),
        None => None,
    };
    let mut order = Vec::with_capacity(order_by.len());
    for (e, d) in order_by {
        order.push((
            b.bind(e.clone(), "order clause", Names::Columns, false)?,
            *d,
        ));
    }
    let env = s.vars.env(s.now());
    let limit = select::limit_value(limit, &env)?;
    let plan = plan::plan(&table.def, where_.as_ref(), &env, &order, limit.is_some())?;
    let plan = plan::for_writer(plan, s.txn.has_written());
    Ok(Target {
        table,
        where_,
        order,
        limit,
        plan,
    })
}

/// Primary keys of the rows matching a target's WHERE (committed values; in a session
/// transaction its own writes count), in ORDER BY order, at most LIMIT.
fn candidates(s: &mut Session, t: &Target, now: Datetime) -> Result<Vec<Vec<Value>>> {
    // Chosen by the API node (a capture over several node groups): each is read again
    // under lock and checked against the WHERE, as those found here are.
    if let Some(keys) = s.txn.given_rows.take() {
        return Ok(keys);
    }
    let def = &t.table.def;
    let mut cols: Vec<usize> = def.primary_key.clone();
    select::used_columns(
        t.where_.iter().chain(t.order.iter().map(|(e, _)| e)),
        &mut cols,
    );
    cols.sort_unstable();
    let stop_at = if t.order.is_empty() || t.plan.ordered {
        t.limit
    } else {
        None
    };
    let mut found: Vec<(Vec<Value>, Vec<Value>)> = Vec::new();
    let ndb = s.ndb.clone();
    let env = s.vars.env(now);
    let mut f = |row: Vec<Value>| -> Result<bool> {
        let ctx = Ctx::new(&env, &row);
        if let Some(w) = &t.where_
            && eval::truth(&eval::eval(w, &ctx)?) != Some(true)
        {
            return Ok(true);
        }
        let key = def.primary_key.iter().map(|&p| row[p].clone()).collect();
        let sk = t
            .order
            .iter()
            .map(|(e, _)| eval::eval(e, &ctx))
            .collect::<Result<Vec<_>>>()?;
        found.push((key, sk));
        Ok(stop_at.is_none_or(|l| (found.len() as u64) < l))
    };
    if stop_at == Some(0) {
        return Ok(Vec::new());
    }
    if s.txn.active() {
        let tx = s.txn.tx(&ndb)?;
        plan::read_rows(
            &ndb,
            Some(tx),
            &t.table,
            &t.plan.access,
            &cols,
            LockMode::CommittedRead,
            &mut f,
        )?;
    } else {
        plan::read_rows(
            &ndb,
            None,
            &t.table,
            &t.plan.access,
            &cols,
            LockMode::CommittedRead,
            &mut f,
        )?;
    }
    if !t.order.is_empty() && !t.plan.ordered {
        found.sort_by(|(_, a), (_, b)| {
            for (i, (_, desc)) in t.order.iter().enumerate() {
                let o = eval::sort_cmp(&a[i], &b[i]);
                let o = if *desc { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
    }
    if let Some(l) = t.limit {
        found.truncate(l.min(usize::MAX as u64) as usize);
    }
    Ok(found.into_iter().map(|(k, _)| k).collect())
}

fn widen_cols(width: usize, cols: &[usize], r: Vec<Value>) -> Vec<Value> {
    let mut full = vec![Value::Null; width];
    for (v, &c) in r.into_iter().zip(cols) {
        full[c] = v;
    }
    full
}

pub(crate) fn update(s: &mut Session, up: &Update) -> Result<SqlResult> {
    let mut scope = None;
    let t = bind_target(
        s,
        &up.table,
        up.where_.as_ref(),
        &up.order_by,
        up.limit.as_ref(),
        &mut scope,
    )?;
    let scope = scope.ok_or_else(|| codes::internal("no scope"))?;
    let def = t.table.def.clone();
    let db = s.db_of(&up.table)?;
    let meta = meta::table(s.ndb.cluster(), &db, &def.name, def.id).unwrap_or_default();
    let mut sets: Vec<(usize, Option<Expr>)> = Vec::with_capacity(up.sets.len());
    {
        let mut b = Binder::new(&scope);
        for (name, e) in &up.sets {
            let c = scope.column(&[], name, "field list")?;
            let e = match e {
                Expr::Default => None,
                e => Some(b.bind(e.clone(), "field list", Names::Columns, false)?),
            };
            sets.push((c, e));
        }
    }
    let now = s.now();
    let cands = candidates(s, &t, now)?;
    let pk_change = sets.iter().any(|(c, _)| def.columns[*c].primary_key);
    let on_update: Vec<usize> = def
        .columns
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            meta.on_update_now
                .iter()
                .any(|n| n.eq_ignore_ascii_case(&c.name))
                && !sets.iter().any(|(x, _)| x == i)
        })
        .map(|(i, _)| i)
        .collect();
    let fetch: Vec<usize> = if pk_change {
        (0..def.columns.len()).collect()
    } else {
        let mut cols = def.primary_key.clone();
        select::used_columns(
            t.where_
                .iter()
                .chain(sets.iter().filter_map(|(_, e)| e.as_ref())),
            &mut cols,
        );
        for (c, _) in &sets {
            if !cols.contains(c) {
                cols.push(*c);
            }
        }
        cols.extend(
            on_update
                .iter()
                .copied()
                .filter(|c| !def.primary_key.contains(c)),
        );
        cols.sort_unstable();
        cols.dedup();
        cols
    };
    let batch = s.batch_rows();
    let max_ops = s.max_operations();
    let ndb = s.ndb.clone();
    let env = s.vars.env(now);
    let mut w = Writer::new(ndb, &mut s.txn, batch, max_ops);
    let (mut matched, mut changed) = (0u64, 0u64);
    let mut i = 0;
    while i < cands.len() && t.limit.is_none_or(|l| matched < l) {
        // a key change is two operations per row: keep a batch under the engine's limit
        let room = if pk_change {
            w.room().min(plan::BATCH / 2)
        } else {
            w.room()
        };
        let n = room.min(cands.len() - i);
        let chunk = &cands[i..i + n];
        w.writing();
        let tx = w.tx()?;
        let rows = plan::read_keys_in(tx, &t.table, chunk, &fetch, LockMode::Exclusive)?;
        let mut ops: Vec<(OpId, Vec<Value>)> = Vec::new();
        for r in rows.into_iter().flatten() {
            if t.limit.is_some_and(|l| matched >= l) {
                break;
            }
            let old = widen_cols(def.columns.len(), &fetch, r);
            if let Some(wh) = &t.where_
                && eval::truth(&eval::eval(wh, &Ctx::new(&env, &old))?) != Some(true)
            {
                continue;
            }
            matched += 1;
            let mut new = old.clone();
            for (c, e) in &sets {
                let col = &def.columns[*c];
                let v = match e {
                    None => default_of(col, &meta, now, true)?,
                    Some(e) => eval::eval(e, &Ctx::new(&env, &new))?,
                };
                new[*c] = assign(v, col, matched, true)?;
            }
            let mut diff: Vec<(usize, Value)> = sets
                .iter()
                .map(|(c, _)| *c)
                .filter(|&c| new[c] != old[c])
                .map(|c| (c, new[c].clone()))
                .collect();
            diff.dedup_by_key(|(c, _)| *c);
            if diff.is_empty() {
                continue;
            }
            for &c in &on_update {
                let v = now_value(&def.columns[c], now);
                new[c] = v.clone();
                diff.push((c, v));
            }
            changed += 1;
            let key: Vec<(usize, Value)> = def
                .primary_key
                .iter()
                .map(|&p| (p, old[p].clone()))
                .collect();
            if pk_change && diff.iter().any(|(c, _)| def.columns[*c].primary_key) {
                // NDB cannot update a key: delete the row and insert it with the new key
                tx.define_by_pos(&t.table, OpKind::Delete, key, Vec::new(), None)?;
                let vals: Vec<(usize, Value)> = def
                    .columns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| !c.hidden)
                    .map(|(i, _)| (i, new[i].clone()))
                    .collect();
                let op = tx.define_by_pos(&t.table, OpKind::Insert, Vec::new(), vals, None)?;
                ops.push((op, new));
            } else {
                let op = tx.define_by_pos(&t.table, OpKind::Update, key, diff, None)?;
                ops.push((op, new));
            }
        }
        if let Err(e) = tx.execute(ExecType::NoCommit, AbortOption::AbortOnError) {
            let ids: Vec<OpId> = ops.iter().map(|(o, _)| *o).collect();
            let row = failed_op(tx, &ids).map(|(k, _)| ops[k].1.clone());
            return Err(write_error(e, &def, row.as_deref()));
        }
        w.done(n)?;
        i += n;
    }
    w.finish()?;
    Ok(SqlResult::Affected {
        rows: changed,
        last_insert_id: None,
        info: Some(format!(
            "Rows matched: {matched}  Changed: {changed}  Warnings: 0"
        )),
    })
}

pub(crate) fn delete(s: &mut Session, d: &Delete) -> Result<SqlResult> {
    let mut scope = None;
    let t = bind_target(
        s,
        &d.table,
        d.where_.as_ref(),
        &d.order_by,
        d.limit.as_ref(),
        &mut scope,
    )?;
    let def = t.table.def.clone();
    let now = s.now();
    let cands = candidates(s, &t, now)?;
    let mut fetch = def.primary_key.clone();
    select::used_columns(t.where_.iter(), &mut fetch);
    fetch.sort_unstable();
    let batch = s.batch_rows();
    let max_ops = s.max_operations();
    let ndb = s.ndb.clone();
    let env = s.vars.env(now);
    let mut w = Writer::new(ndb, &mut s.txn, batch, max_ops);
    let mut deleted = 0u64;
    let mut i = 0;
    while i < cands.len() {
        let n = w.room().min(cands.len() - i);
        let chunk = &cands[i..i + n];
        w.writing();
        let tx = w.tx()?;
        let keys: Vec<&Vec<Value>> = match &t.where_ {
            None => chunk.iter().collect(),
            Some(wh) => {
                let rows = plan::read_keys_in(tx, &t.table, chunk, &fetch, LockMode::Exclusive)?;
                let mut keep = Vec::with_capacity(chunk.len());
                for (k, r) in chunk.iter().zip(rows) {
                    let Some(r) = r else { continue };
                    let row = widen_cols(def.columns.len(), &fetch, r);
                    if eval::truth(&eval::eval(wh, &Ctx::new(&env, &row))?) == Some(true) {
                        keep.push(k);
                    }
                }
                keep
            }
        };
        let mut ops = Vec::with_capacity(keys.len());
        for k in keys {
            let key: Vec<(usize, Value)> = def
                .primary_key
                .iter()
                .copied()
                .zip(k.iter().cloned())
                .collect();
            ops.push(tx.define_by_pos(&t.table, OpKind::Delete, key, Vec::new(), None)?);
        }
        tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)
            .map_err(|e| write_error(e, &def, None))?;
        for op in &ops {
            match tx.outcome(*op) {
                Some(OpOutcome::Failed(e)) if e.code == 626 => {}
                Some(OpOutcome::Failed(e)) => return Err(write_error(e.clone(), &def, None)),
                _ => deleted += 1,
            }
        }
        w.done(n)?;
        i += n;
    }
    w.finish()?;
    Ok(SqlResult::ok(deleted))
}

type Explained = (String, Option<Plan>, Option<Arc<TableRuntime>>);

pub(crate) fn explain_update(s: &Session, up: &Update) -> Result<Explained> {
    let mut scope = None;
    let t = bind_target(
        s,
        &up.table,
        up.where_.as_ref(),
        &up.order_by,
        up.limit.as_ref(),
        &mut scope,
    )?;
    Ok((t.table.def.name.clone(), Some(t.plan), Some(t.table)))
}

pub(crate) fn explain_delete(s: &Session, d: &Delete) -> Result<Explained> {
    let mut scope = None;
    let t = bind_target(
        s,
        &d.table,
        d.where_.as_ref(),
        &d.order_by,
        d.limit.as_ref(),
        &mut scope,
    )?;
    Ok((t.table.def.name.clone(), Some(t.plan), Some(t.table)))
}
