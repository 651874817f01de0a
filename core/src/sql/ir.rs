//! The SQL layer's own representation of statements and expressions, what both parsers
//! (sqlparser for queries and DML, [`super::ddl`] for the rest) produce and what the
//! executor runs.
//!
//! Invariants: names are unbound ([`Expr::Name`]) until a statement is bound to its
//! table, after which they are [`Expr::Col`] (position in the table's column list, or in
//! a virtual table's columns), [`Expr::Out`] (a select-list item) or [`Expr::Agg`] (an
//! aggregate slot). Left-deep operator chains are kept flat in [`Expr::Chain`] (operators
//! applied left to right), so expressions of any length are walked without deep
//! recursion; other nesting is bounded by the lexer's complexity check.

use super::ddl::Command;
use crate::schema::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    IntDiv,
    Mod,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    NullEq,
    And,
    Or,
    Xor,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::NullEq
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AggKind {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    GroupConcat,
}

/// Scalar functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Rand,
    Floor,
    Ceil,
    Round,
    Truncate,
    Abs,
    Sign,
    Mod,
    Pow,
    Sqrt,
    Exp,
    Ln,
    Log,
    Log10,
    Pi,
    Greatest,
    Least,
    Concat,
    ConcatWs,
    Length,
    CharLength,
    Upper,
    Lower,
    Substring,
    Left,
    Right,
    Trim,
    Ltrim,
    Rtrim,
    Replace,
    Repeat,
    Reverse,
    Lpad,
    Rpad,
    Locate,
    Instr,
    Hex,
    Coalesce,
    IfNull,
    NullIf,
    If,
    Now,
    CurDate,
    CurTime,
    UtcTimestamp,
    UnixTimestamp,
    FromUnixtime,
    Date,
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    LastInsertId,
    Database,
    Version,
    User,
    ConnectionId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CastTo {
    Signed,
    Unsigned,
    Char,
    Binary,
    Decimal(u8, u8),
    Double,
    Date,
    Datetime,
    Time,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Lit(Value),
    /// Unbound column reference: qualifiers ([db,] table) and the name.
    Name(Vec<String>, String),
    /// Bound column: position in the evaluated row.
    Col(usize),
    /// Bound select-list item (ORDER BY / HAVING by alias or position).
    Out(usize),
    /// Bound aggregate slot.
    Agg(usize),
    UserVar(String),
    SysVar(String),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    BitNot(Box<Expr>),
    /// `first op1 e1 op2 e2 ...`, evaluated left to right.
    Chain(Box<Expr>, Vec<(BinOp, Expr)>),
    /// IS [NOT] NULL (bool: negated).
    IsNull(Box<Expr>, bool),
    /// IS [NOT] TRUE/FALSE: (truth tested, negated).
    IsBool(Box<Expr>, bool, bool),
    In(Box<Expr>, Vec<Expr>, bool),
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    Like(Box<Expr>, Box<Expr>, Option<Box<Expr>>, bool),
    Case(Option<Box<Expr>>, Vec<(Expr, Expr)>, Option<Box<Expr>>),
    Func(Func, Vec<Expr>),
    /// Unbound aggregate call (kind, DISTINCT, argument; None for COUNT(*)).
    AggCall(AggKind, bool, Option<Box<Expr>>),
    Cast(Box<Expr>, CastTo),
    /// DEFAULT in INSERT VALUES or UPDATE SET.
    Default,
    /// VALUES(col) in ON DUPLICATE KEY UPDATE, unbound.
    ValuesOf(String),
    /// Bound VALUES(col): position in the row that was to be inserted.
    NewCol(usize),
}

impl Expr {
    pub fn binary(left: Expr, op: BinOp, right: Expr) -> Expr {
        Expr::Chain(Box::new(left), vec![(op, right)])
    }

    /// Visits every sub-expression (pre-order), iteratively.
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        let mut stack: Vec<&Expr> = vec![self];
        while let Some(e) = stack.pop() {
            f(e);
            e.children(&mut |c| stack.push(c));
        }
    }

    fn children<'a>(&'a self, push: &mut dyn FnMut(&'a Expr)) {
        match self {
            Expr::Neg(a) | Expr::Not(a) | Expr::BitNot(a) | Expr::Cast(a, _) => push(a),
            Expr::IsNull(a, _) | Expr::IsBool(a, _, _) => push(a),
            Expr::Chain(a, rest) => {
                push(a);
                for (_, e) in rest {
                    push(e);
                }
            }
            Expr::In(a, list, _) => {
                push(a);
                for e in list {
                    push(e);
                }
            }
            Expr::Between(a, b, c, _) => {
                push(a);
                push(b);
                push(c);
            }
            Expr::Like(a, b, c, _) => {
                push(a);
                push(b);
                if let Some(c) = c {
                    push(c);
                }
            }
            Expr::Case(op, whens, els) => {
                if let Some(o) = op {
                    push(o);
                }
                for (w, t) in whens {
                    push(w);
                    push(t);
                }
                if let Some(e) = els {
                    push(e);
                }
            }
            Expr::Func(_, args) => {
                for a in args {
                    push(a);
                }
            }
            Expr::AggCall(_, _, Some(a)) => push(a),
            _ => {}
        }
    }

    /// Rewrites every sub-expression bottom-up with `f` (children first).
    pub fn rewrite(
        self,
        f: &mut dyn FnMut(Expr) -> crate::error::Result<Expr>,
    ) -> crate::error::Result<Expr> {
        let b = |e: Box<Expr>, f: &mut dyn FnMut(Expr) -> crate::error::Result<Expr>| {
            e.rewrite(f).map(Box::new)
        };
        let e = match self {
            Expr::Neg(a) => Expr::Neg(b(a, f)?),
            Expr::Not(a) => Expr::Not(b(a, f)?),
            Expr::BitNot(a) => Expr::BitNot(b(a, f)?),
            Expr::Cast(a, t) => Expr::Cast(b(a, f)?, t),
            Expr::IsNull(a, n) => Expr::IsNull(b(a, f)?, n),
            Expr::IsBool(a, v, n) => Expr::IsBool(b(a, f)?, v, n),
            Expr::Chain(a, rest) => {
                let a = b(a, f)?;
                let mut out = Vec::with_capacity(rest.len());
                for (op, e) in rest {
                    out.push((op, e.rewrite(f)?));
                }
                Expr::Chain(a, out)
            }
            Expr::In(a, list, n) => {
                let a = b(a, f)?;
                let list = list
                    .into_iter()
                    .map(|e| e.rewrite(f))
                    .collect::<crate::error::Result<Vec<_>>>()?;
                Expr::In(a, list, n)
            }
            Expr::Between(a, lo, hi, n) => Expr::Between(b(a, f)?, b(lo, f)?, b(hi, f)?, n),
            Expr::Like(a, p, esc, n) => {
                let esc = match esc {
                    Some(e) => Some(b(e, f)?),
                    None => None,
                };
                Expr::Like(b(a, f)?, b(p, f)?, esc, n)
            }
            Expr::Case(op, whens, els) => {
                let op = match op {
                    Some(o) => Some(b(o, f)?),
                    None => None,
                };
                let mut ws = Vec::with_capacity(whens.len());
                for (w, t) in whens {
                    ws.push((w.rewrite(f)?, t.rewrite(f)?));
                }
                let els = match els {
                    Some(e) => Some(b(e, f)?),
                    None => None,
                };
                Expr::Case(op, ws, els)
            }
            Expr::Func(func, args) => Expr::Func(
                func,
                args.into_iter()
                    .map(|e| e.rewrite(f))
                    .collect::<crate::error::Result<Vec<_>>>()?,
            ),
            Expr::AggCall(k, d, Some(a)) => Expr::AggCall(k, d, Some(b(a, f)?)),
            other => other,
        };
        f(e)
    }

    pub fn any(&self, pred: &mut dyn FnMut(&Expr) -> bool) -> bool {
        let mut found = false;
        self.walk(&mut |e| {
            if !found && pred(e) {
                found = true;
            }
        });
        found
    }

    pub fn has_aggregate(&self) -> bool {
        self.any(&mut |e| matches!(e, Expr::AggCall(..) | Expr::Agg(_)))
    }

    /// No column, aggregate or select-list reference and no RAND(): the value is the
    /// same for every row.
    pub fn is_constant(&self) -> bool {
        !self.any(&mut |e| {
            matches!(
                e,
                Expr::Name(..)
                    | Expr::Col(_)
                    | Expr::Out(_)
                    | Expr::Agg(_)
                    | Expr::AggCall(..)
                    | Expr::NewCol(_)
                    | Expr::ValuesOf(_)
                    | Expr::Default
                    | Expr::Func(Func::Rand, _)
            )
        })
    }
}

/// A table reference: optional database, name, optional alias.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TableName {
    pub db: Option<String>,
    pub name: String,
    pub alias: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SelItem {
    /// `*` or `t.*`.
    Star(Option<String>),
    /// An expression and its column name (alias, or the text as written).
    Expr(Expr, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    None,
    Shared,
    Exclusive,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Select {
    pub distinct: bool,
    pub items: Vec<SelItem>,
    pub from: Option<TableName>,
    pub where_: Option<Expr>,
    /// The WHERE clause as SQL text (to push it to the data nodes as a condition).
    pub where_sql: Option<String>,
    pub group_by: Vec<Expr>,
    pub having: Option<Expr>,
    /// (expression, descending)
    pub order_by: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
    pub lock: Lock,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InsertSource {
    Values(Vec<Vec<Expr>>),
    Select(Box<Select>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Insert {
    pub table: TableName,
    pub columns: Vec<String>,
    pub source: InsertSource,
    pub ignore: bool,
    pub replace: bool,
    pub on_dup: Vec<(String, Expr)>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Update {
    pub table: TableName,
    pub sets: Vec<(String, Expr)>,
    pub where_: Option<Expr>,
    pub order_by: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Delete {
    pub table: TableName,
    pub where_: Option<Expr>,
    pub order_by: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SetTarget {
    User(String),
    /// A system variable (lower-cased name, scope dropped); bool: GLOBAL.
    System(String, bool),
    /// SET NAMES / SET CHARACTER SET: accepted, nothing to do.
    Names,
    /// SET TRANSACTION ...: accepted.
    Transaction,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stmt {
    Select(Select),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Set(Vec<(SetTarget, Expr)>),
    /// EXPLAIN of a query or DML statement.
    Explain(Box<Stmt>),
    Command(Command),
}
