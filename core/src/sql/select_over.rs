//! A SELECT of an NDB table run by a client that reads the rows itself: an API node of
//! a cluster of several node groups over TCP (`cluster/remote_select.rs`), where no data
//! node holds every partition. The statement is parsed, bound and planned here exactly
//! as a session does it ([`select::run_table`]); the caller reads the plan's access path
//! from the data nodes (key reads, table and ordered-index scans of every node group);
//! WHERE, grouping, aggregates, DISTINCT, ORDER BY and LIMIT run here over those rows.
//!
//! A statement qualifies when it is one SELECT whose FROM names a table outside the
//! virtual databases (ndbinfo, information_schema); everything else runs at a data node.
//! The session is the client's variables ([`TableSelect::with_vars`]: user variables
//! and changed system variables) and the connection's own database.

use super::convert;
use super::errors;
use super::ir::{Select, Stmt};
use super::lexer;
use super::meta;
use super::select::{self, ReadRows, Scope};
use super::{SessionVars, SqlResult, Vars};
use crate::error::{NdbError, Result};
use crate::schema::TableDef;

/// One SELECT of an NDB table, parsed.
pub struct TableSelect {
    sel: Select,
    /// The table's database ("" when none is named or selected) and name.
    db: String,
    pub table: String,
    /// The client session's variables, which the statement reads.
    vars: SessionVars,
}

/// The SELECT of an NDB table that `st` is, if it is one.
fn of_statement(st: &lexer::Statement<'_>, database: &str) -> Option<TableSelect> {
    let first = st.tokens.first()?;
    if !first.is_kw("SELECT") || !convert::handles(first) {
        return None;
    }
    let Ok(Stmt::Select(sel)) = convert::parse(st) else {
        return None;
    };
    let from = sel.from.as_ref()?;
    // No database: "" here, 1046 when it runs ([`TableSelect::database`]).
    let db = from.db.clone().unwrap_or_else(|| database.to_string());
    if meta::is_virtual(&db) {
        return None;
    }
    let table = from.name.clone();
    Some(TableSelect {
        sel,
        db,
        table,
        vars: SessionVars::default(),
    })
}

impl TableSelect {
    /// A SELECT built by the SQL layer (not parsed from text): None when it reads no
    /// NDB table.
    pub(crate) fn of_select(sel: Select, database: &str) -> Option<TableSelect> {
        let from = sel.from.as_ref()?;
        let db = from.db.clone().unwrap_or_else(|| database.to_string());
        if meta::is_virtual(&db) {
            return None;
        }
        let table = from.name.clone();
        Some(TableSelect {
            sel,
            db,
            table,
            vars: SessionVars::default(),
        })
    }

    /// The same SELECT in a session of these variables.
    pub fn with_vars(mut self, vars: &SessionVars) -> TableSelect {
        self.vars = vars.clone();
        self
    }
}

/// `sql` as one SELECT of an NDB table; None for anything else (several statements,
/// another statement, a syntax error, no table, a virtual table).
pub fn table_select(sql: &str, database: &str) -> Option<TableSelect> {
    let sts = lexer::statements(sql);
    match sts.as_slice() {
        [Ok(st)] => of_statement(st, database),
        _ => None,
    }
}

/// Whether a statement of `sql` is a SELECT of an NDB table (which a data node of a
/// cluster of several node groups cannot answer alone).
pub fn selects_ndb_table(sql: &str, database: &str) -> bool {
    lexer::statements(sql)
        .iter()
        .flatten()
        .any(|st| of_statement(st, database).is_some())
}

impl TableSelect {
    /// Whether it reads with a lock (FOR UPDATE, LOCK IN SHARE MODE).
    pub(crate) fn locks(&self) -> bool {
        self.sel.lock != super::ir::Lock::None
    }

    /// The WHERE clause, unbound.
    pub(crate) fn where_expr(&self) -> Option<&super::ir::Expr> {
        self.sel.where_.as_ref()
    }

    /// The FROM table's alias.
    pub(crate) fn alias(&self) -> Option<String> {
        self.sel.from.as_ref().and_then(|f| f.alias.clone())
    }

    /// The condition to push to the data nodes' scans (`row_filter.rs`), if any.
    pub(crate) fn pushed_condition(&self) -> Option<String> {
        super::row_filter::pushed_condition(&self.sel, &self.db, &self.table)
    }

    /// The table's database; 1046 "No database selected" when there is none.
    pub(crate) fn database(&self) -> Result<&str> {
        if self.db.is_empty() {
            Err(errors::no_database())
        } else {
            Ok(&self.db)
        }
    }

    /// A failure to find this table's definition as a session reports it (1146 for
    /// NDB's 723 "No such table existed").
    pub(crate) fn lookup_error(&self, e: NdbError) -> NdbError {
        if e.code == 723 {
            errors::no_such_table(&self.db, &self.table)
        } else {
            e
        }
    }

    /// Runs the SELECT over `def` (this table's definition) with the rows `read`
    /// produces; the result set. `wrote`: the reader adds a transaction's own rows
    /// after the others, so the plan must not rely on index order.
    pub(crate) fn run(
        &self,
        def: &TableDef,
        wrote: bool,
        read: &mut ReadRows<'_>,
    ) -> Result<SqlResult> {
        if !def.name.eq_ignore_ascii_case(&self.table) {
            return Err(errors::no_such_table(&self.db, &self.table));
        }
        self.database()?;
        let alias = self.sel.from.as_ref().and_then(|f| f.alias.clone());
        let scope = Scope::of_table(&self.db, def, alias);
        let b = select::bind_select(&self.sel, &scope)?;
        let mut vars = Vars::standalone(Some(self.db.clone()));
        vars.import(&self.vars);
        let env = vars.env(super::now_utc());
        let rows = select::run_table(&self.sel, &b, def, &env, wrote, read)?;
        Ok(SqlResult::Rows {
            columns: b.names,
            rows,
        })
    }
}
