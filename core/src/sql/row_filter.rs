//! Conditions pushed to the data nodes (NDB's pushed conditions, "Using pushed
//! condition" in mysqld's EXPLAIN): an API node that runs a SELECT over TCP
//! (`cluster/remote_select.rs`) sends its WHERE clause with each scan, and the data
//! node returns only the rows it holds true for, so non-matching rows never cross the
//! network.
//!
//! The condition travels as SQL text, a statement `SELECT * FROM db.t [AS a] WHERE
//! <condition>` ([`pushed_condition`]); the data node binds it to the columns the
//! scan returns ([`RowFilter::compile`]) and evaluates it with the same evaluator
//! the API node uses. Only conditions whose value depends on the row alone are
//! pushed: no user or system variables, no RAND(), NOW() or other function of the
//! session or the clock; and only when the text parses back to the very same
//! expression. The API node evaluates the whole WHERE again on every row it gets, so a
//! filter can only save work, never change a result.

use super::eval::{self, Ctx};
use super::ir::{Expr, Func, Select};
use super::select::{Binder, Names, Scope, column_ty};
use super::{Vars, now_utc};
use crate::error::{Result, codes};
use crate::schema::{Datetime, TableDef, Value};

/// Whether `e`'s value depends on the row alone (no variable, clock, randomness or
/// session).
fn row_local(e: &Expr) -> bool {
    let mut ok = true;
    e.walk(&mut |x| match x {
        Expr::UserVar(_)
        | Expr::SysVar(_)
        | Expr::Out(_)
        | Expr::Agg(_)
        | Expr::AggCall(..)
        | Expr::Default
        | Expr::ValuesOf(_)
        | Expr::NewCol(_) => ok = false,
        Expr::Func(f, _) => {
            if matches!(
                f,
                Func::Rand
                    | Func::Now
                    | Func::CurDate
                    | Func::CurTime
                    | Func::UtcTimestamp
                    | Func::UnixTimestamp
                    | Func::LastInsertId
                    | Func::Database
                    | Func::Version
                    | Func::User
                    | Func::ConnectionId
            ) {
                ok = false;
            }
        }
        _ => {}
    });
    ok
}

/// The condition of `sel` (a SELECT of `db`.`table`) to push to the data nodes, as the
/// statement [`RowFilter::compile`] takes; None when it has none or may not be pushed.
pub(crate) fn pushed_condition(sel: &Select, db: &str, table: &str) -> Option<String> {
    let (w, text) = (sel.where_.as_ref()?, sel.where_sql.as_ref()?);
    if !row_local(w) {
        return None;
    }
    let quote = |s: &str| format!("`{}`", s.replace('`', "``"));
    let alias = sel
        .from
        .as_ref()
        .and_then(|f| f.alias.as_deref())
        .map(|a| format!(" AS {}", quote(a)))
        .unwrap_or_default();
    let statement = format!(
        "SELECT * FROM {}.{}{alias} WHERE {text}",
        quote(db),
        quote(table)
    );
    // Pushed only if it reads back as the same condition.
    let back = super::table_select(&statement, db)?;
    (back.where_expr() == Some(w)).then_some(statement)
}

/// A pushed condition bound to the columns a scan returns.
pub struct RowFilter {
    condition: Expr,
    vars: Vars,
    now: Datetime,
}

impl RowFilter {
    /// Binds `statement` (from [`pushed_condition`]) to rows holding `columns` of
    /// `def`, in that order. A condition naming another column, or anything but a
    /// SELECT of this table, is refused (4003).
    pub fn compile(statement: &str, def: &TableDef, columns: &[usize]) -> Result<RowFilter> {
        let refused =
            |why: &str| codes::unsupported(format!("pushed condition '{statement}': {why}"));
        let q =
            super::table_select(statement, "").ok_or_else(|| refused("not a SELECT of a table"))?;
        if !q.table.eq_ignore_ascii_case(&def.name) {
            return Err(refused("another table"));
        }
        let w = q.where_expr().ok_or_else(|| refused("no condition"))?;
        if !row_local(w) {
            return Err(refused("it depends on more than the row"));
        }
        let mut names = Vec::with_capacity(columns.len());
        let mut types = Vec::with_capacity(columns.len());
        for &c in columns {
            let col = def
                .columns
                .get(c)
                .ok_or_else(|| refused("a column the table does not have"))?;
            names.push(col.name.clone());
            types.push(column_ty(&col.ty));
        }
        let scope = Scope {
            hidden: vec![false; names.len()],
            names,
            types,
            table: Some(def.name.clone()),
            alias: q.alias(),
            db: Some(q.database()?.to_string()),
        };
        let condition =
            Binder::new(&scope).bind(w.clone(), "where clause", Names::Columns, false)?;
        Ok(RowFilter {
            condition,
            vars: Vars::standalone(None),
            now: now_utc(),
        })
    }

    /// Whether the condition is true for `row` (the scan's columns).
    pub fn matches(&self, row: &[Value]) -> Result<bool> {
        let env = self.vars.env(self.now);
        let v = eval::eval(&self.condition, &Ctx::new(&env, row))?;
        Ok(eval::truth(&v) == Some(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::tests::{cluster, run, session};

    fn select(sql: &str) -> crate::sql::TableSelect {
        crate::sql::table_select(sql, "test").expect("a table SELECT")
    }

    #[test]
    fn only_conditions_of_the_row_alone_are_pushed_and_they_read_back_the_same() {
        for (sql, pushed) in [
            ("SELECT * FROM t WHERE a > 3 AND b LIKE 'x%'", true),
            (
                "SELECT * FROM t AS x WHERE x.a IN (1, 2) OR x.b IS NULL",
                true,
            ),
            (
                "SELECT a FROM t WHERE CASE WHEN a > 1 THEN UPPER(b) ELSE 'n' END = 'Q'",
                true,
            ),
            (
                "SELECT * FROM t WHERE a BETWEEN -2 AND 7.5 AND NOT (b <> 'it''s')",
                true,
            ),
            ("SELECT * FROM t WHERE a > RAND()", false),
            ("SELECT * FROM t WHERE d < NOW()", false),
            ("SELECT * FROM t WHERE a = @v", false),
            (
                "SELECT * FROM t WHERE a = @@auto_increment_increment",
                false,
            ),
            ("SELECT * FROM t WHERE a = CONNECTION_ID()", false),
            ("SELECT * FROM t", false),
        ] {
            let got = select(sql).pushed_condition();
            assert_eq!(got.is_some(), pushed, "{sql}: {got:?}");
            if let Some(statement) = got {
                assert!(
                    statement.starts_with("SELECT * FROM `test`.`t`"),
                    "{statement}"
                );
            }
        }
    }

    #[test]
    fn a_filter_binds_to_the_scans_columns_and_keeps_what_the_where_keeps() {
        let c = cluster(2, 2, "16M");
        let mut s = session(&c);
        run(
            &mut s,
            "CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(10), c INT, d INT) ENGINE=NDB",
        );
        let def = s.ndb.cluster().table("test", "t").expect("t").def.clone();
        let statement = select("SELECT * FROM t AS x WHERE x.c > 5 AND (d IS NULL OR b LIKE 'k%')")
            .pushed_condition()
            .expect("pushed");
        // The scan returns columns d, b, c in that order.
        let f = RowFilter::compile(&statement, &def, &[3, 1, 2]).expect("compile");
        let row = |d: Value, b: &str, c: i64| vec![d, Value::Str(b.into()), Value::Int(c)];
        assert!(f.matches(&row(Value::Null, "z", 6)).expect("eval"));
        assert!(f.matches(&row(Value::Int(1), "kite", 9)).expect("eval"));
        assert!(!f.matches(&row(Value::Int(1), "z", 9)).expect("eval"));
        assert!(!f.matches(&row(Value::Null, "k", 5)).expect("eval"));
        // A column the scan does not return, another table, a clock: refused.
        let e = RowFilter::compile(&statement, &def, &[3, 1])
            .err()
            .expect("no column c");
        assert_eq!(e.code, 4004, "{e}");
        let other = "SELECT * FROM `test`.`u` WHERE a = 1";
        assert_eq!(
            RowFilter::compile(other, &def, &[0]).err().expect("u").code,
            4003
        );
        let clock = "SELECT * FROM `test`.`t` WHERE d < UNIX_TIMESTAMP()";
        assert_eq!(
            RowFilter::compile(clock, &def, &[3])
                .err()
                .expect("clock")
                .code,
            4003
        );
    }
}
