//! Queries and DML through sqlparser (MySqlDialect): SELECT, INSERT, REPLACE, UPDATE,
//! DELETE and SET are parsed by sqlparser and converted here into [`super::ir`].
//!
//! Invariants: the statement is checked by [`lexer::check_complexity`] before sqlparser
//! sees it, so sqlparser's left-deep operator chains are bounded; conversion consumes
//! the sqlparser tree by value and unboxes binary-operator chains iteratively (into
//! [`Expr::Chain`]), so neither conversion nor dropping the tree recurses deeply.
//! Everything sqlparser accepts that rndb does not run (joins, subqueries, UNION, window
//! functions, ...) becomes a clear "not supported" error, never a panic.

use super::errors;
use super::ir::*;
use super::lexer::{self, Tok};
use crate::error::{NdbError, Result};
use crate::schema::{Decimal, Value};
use sqlparser::ast as sp;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::{Parser, ParserError};

/// Parses a statement sqlparser handles (SELECT, INSERT, REPLACE, UPDATE, DELETE, SET).
pub(crate) fn parse(st: &lexer::Statement<'_>) -> Result<Stmt> {
    lexer::check_complexity(st)?;
    let (text, share_lock) = lexer::rewrite_for_sqlparser(st);
    let mut stmts = match Parser::parse_sql(&MySqlDialect {}, &text) {
        Ok(s) => s,
        Err(e) => return Err(parser_error(st.text, e)),
    };
    if stmts.len() != 1 {
        return Err(lexer::syntax_at(st.text, 0));
    }
    let names = st
        .tokens
        .iter()
        .position(|t| t.is_kw("SELECT"))
        .map(|i| lexer::select_item_texts(st, i))
        .unwrap_or_default();
    let stmt = stmts.pop().ok_or_else(|| lexer::syntax_at(st.text, 0))?;
    let mut out = statement(stmt, &names)?;
    if share_lock && let Stmt::Select(s) = &mut out {
        s.lock = Lock::Shared;
    }
    Ok(out)
}

/// sqlparser's error as MySQL's syntax error, at the position it names.
fn parser_error(text: &str, e: ParserError) -> NdbError {
    let msg = match e {
        ParserError::RecursionLimitExceeded => return errors::too_deep(),
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
    };
    let pos = (|| {
        let l = msg.rfind("Line: ")?;
        let rest = &msg[l + 6..];
        let comma = rest.find(',')?;
        let line: usize = rest[..comma].trim().parse().ok()?;
        let c = rest.find("Column: ")?;
        let col: usize = rest[c + 8..]
            .trim()
            .trim_end_matches(|ch: char| !ch.is_ascii_digit())
            .parse()
            .ok()?;
        Some((line, col))
    })();
    match pos {
        Some((line, col)) => {
            // byte offset of (line, col)
            let mut off = 0usize;
            for (i, l) in text.split('\n').enumerate() {
                if i + 1 == line {
                    let c = l
                        .char_indices()
                        .nth(col.saturating_sub(1))
                        .map(|(b, _)| b)
                        .unwrap_or(l.len());
                    off += c;
                    break;
                }
                off += l.len() + 1;
            }
            lexer::syntax_at(text, off.min(text.len()))
        }
        None => lexer::syntax_at(text, text.len()),
    }
}

fn statement(s: sp::Statement, names: &[String]) -> Result<Stmt> {
    match s {
        sp::Statement::Query(q) => Ok(Stmt::Select(query(*q, names)?)),
        sp::Statement::Insert(i) => insert(i),
        sp::Statement::Update(u) => update(u),
        sp::Statement::Delete(d) => delete(d),
        sp::Statement::Set(s) => set(s),
        other => Err(errors::unsupported(first_words(&other.to_string()))),
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

fn unsupported<T>(what: &str) -> Result<T> {
    Err(errors::unsupported(what))
}

fn query(q: sp::Query, names: &[String]) -> Result<Select> {
    if q.with.is_some() {
        return unsupported("WITH");
    }
    if q.fetch.is_some() || q.for_clause.is_some() || !q.pipe_operators.is_empty() {
        return unsupported("this query syntax");
    }
    let mut sel = match *q.body {
        sp::SetExpr::Select(s) => select(*s, names)?,
        sp::SetExpr::Query(inner) => query(*inner, names)?,
        sp::SetExpr::SetOperation { .. } => return unsupported("UNION"),
        sp::SetExpr::Values(_) => return unsupported("VALUES statement"),
        _ => return unsupported("this query syntax"),
    };
    if let Some(ob) = q.order_by {
        match ob.kind {
            sp::OrderByKind::Expressions(list) => {
                if !list.is_empty() {
                    sel.order_by = order_list(list)?;
                }
            }
            sp::OrderByKind::All(_) => return unsupported("ORDER BY ALL"),
        }
    }
    if let Some(l) = q.limit_clause {
        match l {
            sp::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            } => {
                if !limit_by.is_empty() {
                    return unsupported("LIMIT BY");
                }
                if let Some(l) = limit {
                    sel.limit = Some(expr(l)?);
                }
                if let Some(o) = offset {
                    sel.offset = Some(expr(o.value)?);
                }
            }
            sp::LimitClause::OffsetCommaLimit { offset, limit } => {
                sel.offset = Some(expr(offset)?);
                sel.limit = Some(expr(limit)?);
            }
        }
    }
    for l in q.locks {
        sel.lock = match l.lock_type {
            sp::LockType::Update => Lock::Exclusive,
            sp::LockType::Share => {
                if sel.lock == Lock::Exclusive {
                    Lock::Exclusive
                } else {
                    Lock::Shared
                }
            }
        };
    }
    Ok(sel)
}

fn order_list(list: Vec<sp::OrderByExpr>) -> Result<Vec<(Expr, bool)>> {
    list.into_iter()
        .map(|o| {
            let desc = matches!(o.options.sort, Some(sp::OrderBySort::Desc));
            Ok((expr(o.expr)?, desc))
        })
        .collect()
}

fn object_parts(name: sp::ObjectName) -> Result<Vec<sp::Ident>> {
    name.0
        .into_iter()
        .map(|p| match p {
            sp::ObjectNamePart::Identifier(i) => Ok(i),
            _ => Err(errors::unsupported("this object name")),
        })
        .collect()
}

fn table_name(name: sp::ObjectName, alias: Option<String>) -> Result<TableName> {
    let mut parts = object_parts(name)?;
    let name = parts.pop().map(|i| i.value).unwrap_or_default();
    let db = match parts.len() {
        0 => None,
        1 => parts.pop().map(|i| i.value),
        _ => return unsupported("catalog-qualified names"),
    };
    Ok(TableName { db, name, alias })
}

fn table_with_joins(t: sp::TableWithJoins) -> Result<TableName> {
    if !t.joins.is_empty() {
        return unsupported("joins");
    }
    match t.relation {
        sp::TableFactor::Table {
            name, alias, args, ..
        } => {
            if args.is_some() {
                return unsupported("table functions");
            }
            table_name(name, alias.map(|a| a.name.value))
        }
        sp::TableFactor::Derived { .. } => unsupported("subqueries in FROM"),
        _ => unsupported("this FROM clause"),
    }
}

fn select(s: sp::Select, names: &[String]) -> Result<Select> {
    let distinct = match s.distinct {
        None | Some(sp::Distinct::All) => false,
        Some(sp::Distinct::Distinct) => true,
        Some(sp::Distinct::On(_)) => return unsupported("DISTINCT ON"),
    };
    if s.top.is_some() || s.into.is_some() {
        return unsupported("SELECT ... INTO");
    }
    let mut from = s.from;
    let from = match from.len() {
        0 => None,
        1 => {
            let t = table_with_joins(from.remove(0))?;
            if t.db.is_none() && t.name.eq_ignore_ascii_case("dual") {
                None
            } else {
                Some(t)
            }
        }
        _ => return unsupported("joins"),
    };
    let n_items = s.projection.len();
    let mut items = Vec::with_capacity(n_items);
    for (i, it) in s.projection.into_iter().enumerate() {
        let text = if names.len() == n_items {
            names.get(i).cloned()
        } else {
            None
        };
        items.push(match it {
            sp::SelectItem::Wildcard(_) => SelItem::Star(None),
            sp::SelectItem::QualifiedWildcard(kind, _) => match kind {
                sp::SelectItemQualifiedWildcardKind::ObjectName(n) => {
                    let mut parts = object_parts(n)?;
                    SelItem::Star(parts.pop().map(|i| i.value))
                }
                _ => return unsupported("this wildcard"),
            },
            sp::SelectItem::ExprWithAlias { expr: e, alias } => {
                SelItem::Expr(expr(e)?, alias.value)
            }
            sp::SelectItem::UnnamedExpr(e) => {
                let fallback = e.to_string();
                let e = expr(e)?;
                let name = match &e {
                    Expr::Name(_, n) => n.clone(),
                    Expr::Lit(Value::Str(s)) => s.clone(),
                    _ => text.unwrap_or(fallback),
                };
                SelItem::Expr(e, name)
            }
            _ => return unsupported("this select item"),
        });
    }
    let where_sql = s.selection.as_ref().map(|e| e.to_string());
    let where_ = s.selection.map(expr).transpose()?;
    let group_by = match s.group_by {
        sp::GroupByExpr::Expressions(list, mods) => {
            if !mods.is_empty() {
                return unsupported("GROUP BY modifiers");
            }
            list.into_iter().map(expr).collect::<Result<Vec<_>>>()?
        }
        sp::GroupByExpr::All(_) => return unsupported("GROUP BY ALL"),
    };
    let having = s.having.map(expr).transpose()?;
    Ok(Select {
        distinct,
        items,
        from,
        where_,
        where_sql,
        group_by,
        having,
        order_by: Vec::new(),
        limit: None,
        offset: None,
        lock: Lock::None,
    })
}

fn insert(i: sp::Insert) -> Result<Stmt> {
    if i.returning.is_some() || i.insert_alias.is_some() || i.partitioned.is_some() {
        return unsupported("this INSERT syntax");
    }
    let table = match i.table {
        sp::TableObject::TableName(n) => table_name(n, None)?,
        _ => return unsupported("INSERT into a table function"),
    };
    let mut columns: Vec<String> = Vec::with_capacity(i.columns.len());
    for c in i.columns {
        let mut parts = object_parts(c)?;
        columns.push(parts.pop().map(|p| p.value).unwrap_or_default());
    }
    let source = match i.source {
        Some(q) => {
            let q = *q;
            match *q.body {
                sp::SetExpr::Values(v) if q.order_by.is_none() && q.limit_clause.is_none() => {
                    let mut rows = Vec::with_capacity(v.rows.len());
                    for r in v.rows {
                        rows.push(
                            r.content
                                .into_iter()
                                .map(expr)
                                .collect::<Result<Vec<_>>>()?,
                        );
                    }
                    InsertSource::Values(rows)
                }
                body => {
                    let q = sp::Query {
                        body: Box::new(body),
                        ..q
                    };
                    InsertSource::Select(Box::new(query(q, &[])?))
                }
            }
        }
        None => {
            // INSERT ... SET a=1, b=2
            if i.assignments.is_empty() {
                return unsupported("this INSERT syntax");
            }
            let mut row = Vec::new();
            for a in i.assignments {
                columns.push(assignment_target(a.target)?);
                row.push(expr(a.value)?);
            }
            InsertSource::Values(vec![row])
        }
    };
    let mut on_dup = Vec::new();
    match i.on {
        None => {}
        Some(sp::OnInsert::DuplicateKeyUpdate(list)) => {
            for a in list {
                on_dup.push((assignment_target(a.target)?, expr(a.value)?));
            }
        }
        Some(_) => return unsupported("ON CONFLICT"),
    }
    Ok(Stmt::Insert(Insert {
        table,
        columns,
        source,
        ignore: i.ignore,
        replace: i.replace_into,
        on_dup,
    }))
}

fn assignment_target(t: sp::AssignmentTarget) -> Result<String> {
    match t {
        sp::AssignmentTarget::ColumnName(n) => {
            let mut parts = object_parts(n)?;
            Ok(parts.pop().map(|p| p.value).unwrap_or_default())
        }
        sp::AssignmentTarget::Tuple(_) => unsupported("tuple assignment"),
    }
}

fn update(u: sp::Update) -> Result<Stmt> {
    if u.from.is_some() || u.returning.is_some() {
        return unsupported("multi-table UPDATE");
    }
    let table = table_with_joins(u.table)?;
    let mut sets = Vec::with_capacity(u.assignments.len());
    for a in u.assignments {
        sets.push((assignment_target(a.target)?, expr(a.value)?));
    }
    Ok(Stmt::Update(Update {
        table,
        sets,
        where_: u.selection.map(expr).transpose()?,
        order_by: order_list(u.order_by)?,
        limit: u.limit.map(expr).transpose()?,
    }))
}

fn delete(d: sp::Delete) -> Result<Stmt> {
    if !d.tables.is_empty() || d.using.is_some() || d.returning.is_some() {
        return unsupported("multi-table DELETE");
    }
    let mut from = match d.from {
        sp::FromTable::WithFromKeyword(v) | sp::FromTable::WithoutKeyword(v) => v,
    };
    if from.len() != 1 {
        return unsupported("multi-table DELETE");
    }
    let table = table_with_joins(from.remove(0))?;
    Ok(Stmt::Delete(Delete {
        table,
        where_: d.selection.map(expr).transpose()?,
        order_by: order_list(d.order_by)?,
        limit: d.limit.map(expr).transpose()?,
    }))
}

fn set_target(name: sp::ObjectName, scope: Option<sp::ContextModifier>) -> Result<SetTarget> {
    let parts: Vec<String> = object_parts(name)?.into_iter().map(|i| i.value).collect();
    let global = matches!(scope, Some(sp::ContextModifier::Global));
    match parts.as_slice() {
        [one] if one.starts_with("@@") => Ok(SetTarget::System(sys_name(&one[2..]), global)),
        [one] if one.starts_with('@') => Ok(SetTarget::User(one[1..].to_lowercase())),
        [one] => Ok(SetTarget::System(one.to_lowercase(), global)),
        [scope, name] if scope.starts_with("@@") => {
            let g = scope.eq_ignore_ascii_case("@@global");
            Ok(SetTarget::System(name.to_lowercase(), g || global))
        }
        [scope, name]
            if scope.eq_ignore_ascii_case("session")
                || scope.eq_ignore_ascii_case("global")
                || scope.eq_ignore_ascii_case("local") =>
        {
            Ok(SetTarget::System(
                name.to_lowercase(),
                scope.eq_ignore_ascii_case("global"),
            ))
        }
        _ => unsupported("this SET target"),
    }
}

/// A system variable's name without its scope prefix, lower-cased.
pub(crate) fn sys_name(s: &str) -> String {
    let s = s.to_lowercase();
    for p in ["session.", "global.", "local."] {
        if let Some(r) = s.strip_prefix(p) {
            return r.to_string();
        }
    }
    s
}

fn set_value(target: &SetTarget, e: sp::Expr) -> Result<Expr> {
    if let SetTarget::System(..) = target {
        // SET autocommit = ON: a bare word is the value; DEFAULT is the default.
        if let sp::Expr::Identifier(i) = &e
            && i.quote_style.is_none()
            && !i.value.starts_with('@')
        {
            if i.value.eq_ignore_ascii_case("DEFAULT") {
                return Ok(Expr::Default);
            }
            return Ok(Expr::Lit(Value::Str(i.value.clone())));
        }
    }
    expr(e)
}

fn set(s: sp::Set) -> Result<Stmt> {
    let mut out = Vec::new();
    match s {
        sp::Set::SingleAssignment {
            scope,
            variable,
            mut values,
            ..
        } => {
            if values.len() != 1 {
                return unsupported("this SET syntax");
            }
            let t = set_target(variable, scope)?;
            let v = set_value(&t, values.remove(0))?;
            out.push((t, v));
        }
        sp::Set::MultipleAssignments { assignments } => {
            for a in assignments {
                let t = set_target(a.name, a.scope)?;
                let v = set_value(&t, a.value)?;
                out.push((t, v));
            }
        }
        sp::Set::SetNames { .. } | sp::Set::SetNamesDefault {} => {
            out.push((SetTarget::Names, Expr::Lit(Value::Null)))
        }
        sp::Set::SetTransaction { .. } => {
            out.push((SetTarget::Transaction, Expr::Lit(Value::Null)))
        }
        _ => return unsupported("this SET syntax"),
    }
    Ok(Stmt::Set(out))
}

/// A numeric literal as MySQL types it: integer, DECIMAL or DOUBLE (with an exponent).
pub(crate) fn number(s: &str) -> Option<Value> {
    if s.contains(['e', 'E']) {
        return s.parse::<f64>().ok().map(Value::Double);
    }
    if s.contains('.') {
        return match Decimal::parse(s) {
            Some(d) => Some(Value::Decimal(d)),
            None => s.parse::<f64>().ok().map(Value::Double),
        };
    }
    if let Ok(i) = s.parse::<i64>() {
        return Some(Value::Int(i));
    }
    if let Ok(u) = s.parse::<u64>() {
        return Some(Value::UInt(u));
    }
    match Decimal::parse(s) {
        Some(d) => Some(Value::Decimal(d)),
        None => s.parse::<f64>().ok().map(Value::Double),
    }
}

fn hex(h: &str) -> Result<Vec<u8>> {
    let h = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_string()
    };
    (0..h.len())
        .step_by(2)
        .map(|i| {
            h.get(i..i + 2)
                .and_then(|x| u8::from_str_radix(x, 16).ok())
                .ok_or_else(|| errors::unsupported("this hex literal"))
        })
        .collect()
}

fn value(v: sp::Value) -> Result<Value> {
    Ok(match v {
        sp::Value::Number(s, _) => {
            number(&s).ok_or_else(|| errors::unsupported(format!("number {s}")))?
        }
        sp::Value::SingleQuotedString(s)
        | sp::Value::DoubleQuotedString(s)
        | sp::Value::NationalStringLiteral(s)
        | sp::Value::EscapedStringLiteral(s)
        | sp::Value::TripleSingleQuotedString(s)
        | sp::Value::TripleDoubleQuotedString(s) => Value::Str(s),
        sp::Value::HexStringLiteral(h) => Value::Bytes(hex(&h)?),
        sp::Value::SingleQuotedByteStringLiteral(b)
        | sp::Value::DoubleQuotedByteStringLiteral(b) => {
            if b.len() > 64 || !b.bytes().all(|c| c == b'0' || c == b'1') {
                return unsupported("this bit literal");
            }
            Value::UInt(b.bytes().fold(0u64, |a, c| (a << 1) | (c - b'0') as u64))
        }
        sp::Value::Boolean(b) => Value::Int(b as i64),
        sp::Value::Null => Value::Null,
        _ => return unsupported("this literal"),
    })
}

fn binop(op: sp::BinaryOperator) -> Result<BinOp> {
    use sp::BinaryOperator as B;
    Ok(match op {
        B::Plus => BinOp::Add,
        B::Minus => BinOp::Sub,
        B::Multiply => BinOp::Mul,
        B::Divide => BinOp::Div,
        B::Modulo => BinOp::Mod,
        B::MyIntegerDivide | B::DuckIntegerDivide => BinOp::IntDiv,
        B::Eq => BinOp::Eq,
        B::NotEq => BinOp::Ne,
        B::Lt => BinOp::Lt,
        B::LtEq => BinOp::Le,
        B::Gt => BinOp::Gt,
        B::GtEq => BinOp::Ge,
        B::Spaceship => BinOp::NullEq,
        B::And => BinOp::And,
        // MySQL's default sql_mode: || is OR
        B::Or | B::StringConcat => BinOp::Or,
        B::Xor => BinOp::Xor,
        B::BitwiseAnd => BinOp::BitAnd,
        B::BitwiseOr => BinOp::BitOr,
        B::BitwiseXor | B::PGBitwiseXor => BinOp::BitXor,
        B::PGBitwiseShiftLeft => BinOp::Shl,
        B::PGBitwiseShiftRight => BinOp::Shr,
        other => return Err(errors::unsupported(format!("operator {other}"))),
    })
}

/// MySQL's precedence groups of binary operators.
fn op_group(op: &sp::BinaryOperator) -> u8 {
    use sp::BinaryOperator as B;
    match op {
        B::Or | B::StringConcat => 1,
        B::Xor => 2,
        B::And => 3,
        B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship => 4,
        B::BitwiseOr => 5,
        B::BitwiseAnd => 6,
        B::PGBitwiseShiftLeft | B::PGBitwiseShiftRight => 7,
        B::Plus | B::Minus => 8,
        B::Multiply | B::Divide | B::Modulo | B::MyIntegerDivide | B::DuckIntegerDivide => 9,
        B::BitwiseXor | B::PGBitwiseXor => 10,
        _ => 11,
    }
}

fn bx(e: sp::Expr) -> Result<Box<Expr>> {
    expr(e).map(Box::new)
}

/// Converts an expression, consuming sqlparser's tree.
pub(crate) fn expr(e: sp::Expr) -> Result<Expr> {
    use sp::Expr as E;
    Ok(match e {
        E::BinaryOp { .. } => {
            // Flatten the left spine of operators of one precedence group (iteratively:
            // a long `a + b + c ...` is a deep left spine); other groups nest, which
            // precedence bounds to a few levels.
            let E::BinaryOp { op: top, .. } = &e else {
                return unsupported("operator");
            };
            let group = op_group(top);
            let mut pairs: Vec<(sp::BinaryOperator, sp::Expr)> = Vec::new();
            let mut cur = e;
            let base = loop {
                match cur {
                    E::BinaryOp { left, op, right } if op_group(&op) == group => {
                        pairs.push((op, *right));
                        cur = *left;
                    }
                    other => break other,
                }
            };
            let first = expr(base)?;
            let mut rest = Vec::with_capacity(pairs.len());
            while let Some((op, r)) = pairs.pop() {
                rest.push((binop(op)?, expr(r)?));
            }
            Expr::Chain(Box::new(first), rest)
        }
        E::Nested(inner) => expr(*inner)?,
        E::Identifier(i) => ident(i),
        E::CompoundIdentifier(mut parts) => {
            if parts.len() == 2 && parts[0].value.starts_with("@@") {
                return Ok(Expr::SysVar(parts[1].value.to_lowercase()));
            }
            let name = parts.pop().map(|i| i.value).unwrap_or_default();
            if parts.len() > 2 {
                return unsupported("catalog-qualified names");
            }
            Expr::Name(parts.into_iter().map(|i| i.value).collect(), name)
        }
        E::Value(v) => Expr::Lit(value(v.value)?),
        E::Prefixed { value: v, .. } => expr(*v)?,
        E::TypedString(t) => {
            let lit = Expr::Lit(value(t.value.value)?);
            match t.data_type {
                sp::DataType::Date => Expr::Cast(Box::new(lit), CastTo::Date),
                sp::DataType::Time(..) => Expr::Cast(Box::new(lit), CastTo::Time),
                sp::DataType::Timestamp(..) | sp::DataType::Datetime(_) => {
                    Expr::Cast(Box::new(lit), CastTo::Datetime)
                }
                _ => lit,
            }
        }
        E::UnaryOp { op, expr: inner } => match op {
            sp::UnaryOperator::Minus => match *inner {
                E::Value(sp::ValueWithSpan {
                    value: sp::Value::Number(s, _),
                    ..
                }) => Expr::Lit(
                    number(&format!("-{s}"))
                        .ok_or_else(|| errors::unsupported(format!("number -{s}")))?,
                ),
                other => Expr::Neg(bx(other)?),
            },
            sp::UnaryOperator::Plus => expr(*inner)?,
            sp::UnaryOperator::Not | sp::UnaryOperator::BangNot => Expr::Not(bx(*inner)?),
            sp::UnaryOperator::BitwiseNot => Expr::BitNot(bx(*inner)?),
            other => return Err(errors::unsupported(format!("operator {other}"))),
        },
        E::IsNull(a) | E::IsUnknown(a) => Expr::IsNull(bx(*a)?, false),
        E::IsNotNull(a) | E::IsNotUnknown(a) => Expr::IsNull(bx(*a)?, true),
        E::IsTrue(a) => Expr::IsBool(bx(*a)?, true, false),
        E::IsNotTrue(a) => Expr::IsBool(bx(*a)?, true, true),
        E::IsFalse(a) => Expr::IsBool(bx(*a)?, false, false),
        E::IsNotFalse(a) => Expr::IsBool(bx(*a)?, false, true),
        E::IsDistinctFrom(a, b) => {
            Expr::Not(Box::new(Expr::binary(expr(*a)?, BinOp::NullEq, expr(*b)?)))
        }
        E::IsNotDistinctFrom(a, b) => Expr::binary(expr(*a)?, BinOp::NullEq, expr(*b)?),
        E::In {
            expr: a,
            target,
            negated,
            ..
        } => match target {
            sp::InTarget::List(list) => Expr::In(
                bx(*a)?,
                list.into_iter().map(expr).collect::<Result<Vec<_>>>()?,
                negated,
            ),
            _ => return unsupported("subqueries"),
        },
        E::Between {
            expr: a,
            negated,
            low,
            high,
        } => Expr::Between(bx(*a)?, bx(*low)?, bx(*high)?, negated),
        E::Like {
            negated,
            any,
            expr: a,
            pattern,
            escape_char,
        } => {
            if any {
                return unsupported("LIKE ANY");
            }
            let esc = escape_char.map(|e| bx(*e)).transpose()?;
            Expr::Like(bx(*a)?, bx(*pattern)?, esc, negated)
        }
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let operand = operand.map(|o| bx(*o)).transpose()?;
            let mut whens = Vec::with_capacity(conditions.len());
            for w in conditions {
                whens.push((expr(w.condition)?, expr(w.result)?));
            }
            let els = else_result.map(|e| bx(*e)).transpose()?;
            Expr::Case(operand, whens, els)
        }
        E::Function(f) => function(f)?,
        E::Ceil { expr: a, field } => ceil_floor(Func::Ceil, a, field)?,
        E::Floor { expr: a, field } => ceil_floor(Func::Floor, a, field)?,
        E::Substring {
            expr: a,
            substring_from,
            substring_for,
            ..
        } => {
            let mut args = vec![expr(*a)?];
            match substring_from {
                Some(f) => args.push(expr(*f)?),
                None => args.push(Expr::Lit(Value::Int(1))),
            }
            if let Some(f) = substring_for {
                args.push(expr(*f)?);
            }
            Expr::Func(Func::Substring, args)
        }
        E::Trim {
            trim_where,
            trim_what,
            expr: a,
            trim_characters,
        } => {
            if trim_characters.is_some() {
                return unsupported("this TRIM syntax");
            }
            let f = match trim_where {
                Some(sp::TrimWhereField::Leading) => Func::Ltrim,
                Some(sp::TrimWhereField::Trailing) => Func::Rtrim,
                _ => Func::Trim,
            };
            let mut args = vec![expr(*a)?];
            if let Some(w) = trim_what {
                args.push(expr(*w)?);
            }
            Expr::Func(f, args)
        }
        E::Cast {
            expr: a, data_type, ..
        } => Expr::Cast(bx(*a)?, cast_to(data_type)?),
        E::Convert {
            expr: a,
            data_type,
            charset,
            ..
        } => match (data_type, charset) {
            (Some(t), _) => Expr::Cast(bx(*a)?, cast_to(t)?),
            (None, _) => expr(*a)?,
        },
        E::Collate { expr: a, .. } => expr(*a)?,
        E::Subquery(_) | E::Exists { .. } => return unsupported("subqueries"),
        E::Tuple(_) => return unsupported("row constructors"),
        E::Interval(_) => return unsupported("INTERVAL"),
        E::Wildcard(_) | E::QualifiedWildcard(..) => {
            return unsupported("'*' in an expression");
        }
        other => return Err(errors::unsupported(first_words(&other.to_string()))),
    })
}

fn ceil_floor(f: Func, a: Box<sp::Expr>, field: sp::CeilFloorKind) -> Result<Expr> {
    match field {
        sp::CeilFloorKind::DateTimeField(sp::DateTimeField::NoDateTime) => {
            Ok(Expr::Func(f, vec![expr(*a)?]))
        }
        _ => unsupported("CEIL/FLOOR with a unit"),
    }
}

fn ident(i: sp::Ident) -> Expr {
    if i.quote_style.is_none() {
        if let Some(s) = i.value.strip_prefix("@@") {
            return Expr::SysVar(sys_name(s));
        }
        if let Some(s) = i.value.strip_prefix('@') {
            return Expr::UserVar(s.to_lowercase());
        }
        if i.value.eq_ignore_ascii_case("default") {
            return Expr::Default;
        }
    }
    Expr::Name(Vec::new(), i.value)
}

fn cast_to(t: sp::DataType) -> Result<CastTo> {
    use sp::DataType as D;
    Ok(match t {
        D::Signed | D::SignedInteger | D::Int(_) | D::Integer(_) | D::BigInt(_) => CastTo::Signed,
        D::Unsigned | D::UnsignedInteger | D::IntUnsigned(_) | D::BigIntUnsigned(_) => {
            CastTo::Unsigned
        }
        D::Char(_) | D::Varchar(_) | D::Text | D::Character(_) | D::Nvarchar(_) => CastTo::Char,
        D::Binary(_) | D::Varbinary(_) | D::Blob(_) => CastTo::Binary,
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => {
            let (p, s) = match info {
                sp::ExactNumberInfo::None => (10, 0),
                sp::ExactNumberInfo::Precision(p) => (p, 0),
                sp::ExactNumberInfo::PrecisionAndScale(p, s) => (p, s.max(0) as u64),
            };
            if p > 65 || s > 30 || s > p {
                return unsupported("this DECIMAL precision");
            }
            CastTo::Decimal(p as u8, s as u8)
        }
        D::Double(_) | D::Float(_) | D::Real | D::DoublePrecision => CastTo::Double,
        D::Date => CastTo::Date,
        D::Datetime(_) | D::Timestamp(..) => CastTo::Datetime,
        D::Time(..) => CastTo::Time,
        other => return Err(errors::unsupported(format!("CAST to {other}"))),
    })
}

fn function(f: sp::Function) -> Result<Expr> {
    if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
        return unsupported("window functions");
    }
    let mut parts = object_parts(f.name)?;
    let name = parts.pop().map(|i| i.value).unwrap_or_default();
    if !parts.is_empty() {
        return unsupported("stored functions");
    }
    let upper = name.to_ascii_uppercase();
    let (distinct, raw_args) = match f.args {
        sp::FunctionArguments::None => (false, Vec::new()),
        sp::FunctionArguments::List(l) => {
            if !l.clauses.is_empty() && upper != "GROUP_CONCAT" {
                return unsupported(&format!("this {upper} syntax"));
            }
            (
                matches!(
                    l.duplicate_treatment,
                    Some(sp::DuplicateTreatment::Distinct)
                ),
                l.args,
            )
        }
        sp::FunctionArguments::Subquery(_) => return unsupported("subqueries"),
    };
    let mut star = false;
    let mut args = Vec::with_capacity(raw_args.len());
    for a in raw_args {
        match a {
            sp::FunctionArg::Unnamed(sp::FunctionArgExpr::Expr(e)) => args.push(expr(e)?),
            sp::FunctionArg::Unnamed(sp::FunctionArgExpr::Wildcard) => star = true,
            _ => return unsupported("named function arguments"),
        }
    }
    let agg = match upper.as_str() {
        "COUNT" => Some(AggKind::Count),
        "SUM" => Some(AggKind::Sum),
        "AVG" => Some(AggKind::Avg),
        "MIN" => Some(AggKind::Min),
        "MAX" => Some(AggKind::Max),
        "GROUP_CONCAT" => Some(AggKind::GroupConcat),
        _ => None,
    };
    if let Some(kind) = agg {
        if star && kind == AggKind::Count && args.is_empty() && !distinct {
            return Ok(Expr::AggCall(AggKind::CountStar, false, None));
        }
        if star || args.len() != 1 {
            if kind == AggKind::GroupConcat && !args.is_empty() && !star {
                // GROUP_CONCAT(a, b): concatenation of the arguments
                return Ok(Expr::AggCall(
                    kind,
                    distinct,
                    Some(Box::new(Expr::Func(Func::Concat, args))),
                ));
            }
            return Err(arg_count(&upper));
        }
        return Ok(Expr::AggCall(
            kind,
            distinct,
            Some(Box::new(args.remove(0))),
        ));
    }
    if star || distinct {
        return Err(arg_count(&upper));
    }
    if upper == "VALUES" {
        return match args.as_slice() {
            [Expr::Name(_, n)] => Ok(Expr::ValuesOf(n.clone())),
            _ => Err(arg_count(&upper)),
        };
    }
    let (func, min, max) = match upper.as_str() {
        "RAND" => (Func::Rand, 0, 1),
        "FLOOR" => (Func::Floor, 1, 1),
        "CEIL" | "CEILING" => (Func::Ceil, 1, 1),
        "ROUND" => (Func::Round, 1, 2),
        "TRUNCATE" => (Func::Truncate, 2, 2),
        "ABS" => (Func::Abs, 1, 1),
        "SIGN" => (Func::Sign, 1, 1),
        "MOD" => (Func::Mod, 2, 2),
        "POW" | "POWER" => (Func::Pow, 2, 2),
        "SQRT" => (Func::Sqrt, 1, 1),
        "EXP" => (Func::Exp, 1, 1),
        "LN" => (Func::Ln, 1, 1),
        "LOG" => (Func::Log, 1, 2),
        "LOG10" => (Func::Log10, 1, 1),
        "PI" => (Func::Pi, 0, 0),
        "GREATEST" => (Func::Greatest, 2, usize::MAX),
        "LEAST" => (Func::Least, 2, usize::MAX),
        "CONCAT" => (Func::Concat, 1, usize::MAX),
        "CONCAT_WS" => (Func::ConcatWs, 2, usize::MAX),
        "LENGTH" | "OCTET_LENGTH" => (Func::Length, 1, 1),
        "CHAR_LENGTH" | "CHARACTER_LENGTH" => (Func::CharLength, 1, 1),
        "UPPER" | "UCASE" => (Func::Upper, 1, 1),
        "LOWER" | "LCASE" => (Func::Lower, 1, 1),
        "SUBSTRING" | "SUBSTR" | "MID" => (Func::Substring, 2, 3),
        "LEFT" => (Func::Left, 2, 2),
        "RIGHT" => (Func::Right, 2, 2),
        "TRIM" => (Func::Trim, 1, 1),
        "LTRIM" => (Func::Ltrim, 1, 1),
        "RTRIM" => (Func::Rtrim, 1, 1),
        "REPLACE" => (Func::Replace, 3, 3),
        "REPEAT" => (Func::Repeat, 2, 2),
        "REVERSE" => (Func::Reverse, 1, 1),
        "LPAD" => (Func::Lpad, 3, 3),
        "RPAD" => (Func::Rpad, 3, 3),
        "LOCATE" => (Func::Locate, 2, 3),
        "INSTR" => (Func::Instr, 2, 2),
        "HEX" => (Func::Hex, 1, 1),
        "COALESCE" => (Func::Coalesce, 1, usize::MAX),
        "IFNULL" => (Func::IfNull, 2, 2),
        "NULLIF" => (Func::NullIf, 2, 2),
        "IF" => (Func::If, 3, 3),
        "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" | "SYSDATE" => {
            (Func::Now, 0, 1)
        }
        "CURDATE" | "CURRENT_DATE" => (Func::CurDate, 0, 0),
        "CURTIME" | "CURRENT_TIME" => (Func::CurTime, 0, 1),
        "UTC_TIMESTAMP" => (Func::UtcTimestamp, 0, 1),
        "UNIX_TIMESTAMP" => (Func::UnixTimestamp, 0, 1),
        "FROM_UNIXTIME" => (Func::FromUnixtime, 1, 1),
        "DATE" => (Func::Date, 1, 1),
        "YEAR" => (Func::Year, 1, 1),
        "MONTH" => (Func::Month, 1, 1),
        "DAY" | "DAYOFMONTH" => (Func::Day, 1, 1),
        "HOUR" => (Func::Hour, 1, 1),
        "MINUTE" => (Func::Minute, 1, 1),
        "SECOND" => (Func::Second, 1, 1),
        "LAST_INSERT_ID" => (Func::LastInsertId, 0, 1),
        "DATABASE" | "SCHEMA" => (Func::Database, 0, 0),
        "VERSION" => (Func::Version, 0, 0),
        "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => (Func::User, 0, 0),
        "CONNECTION_ID" => (Func::ConnectionId, 0, 0),
        _ => {
            return Err(errors::app(1305, format!("FUNCTION {name} does not exist")));
        }
    };
    if args.len() < min || args.len() > max {
        return Err(arg_count(&upper));
    }
    Ok(Expr::Func(func, args))
}

fn arg_count(name: &str) -> NdbError {
    errors::app(
        1582,
        format!("Incorrect parameter count in the call to native function '{name}'"),
    )
}

/// Whether the first token starts a statement sqlparser handles.
pub(crate) fn handles(first: &lexer::Token) -> bool {
    match &first.tok {
        Tok::Word(w) => matches!(
            w.to_ascii_uppercase().as_str(),
            "SELECT" | "INSERT" | "REPLACE" | "UPDATE" | "DELETE" | "SET" | "WITH"
        ),
        Tok::Sym("(") => true,
        _ => false,
    }
}
