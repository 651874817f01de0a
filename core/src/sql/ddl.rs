//! rndb's own parser for the statements it does not give to sqlparser: CREATE/DROP/ALTER
//! TABLE and INDEX, CREATE/DROP DATABASE, TRUNCATE, USE, SHOW, DESCRIBE, BEGIN/COMMIT/
//! ROLLBACK, OPTIMIZE. It knows NDB's syntax (`TABLESPACE ts STORAGE DISK`, column
//! `STORAGE DISK|MEMORY`, `COLUMN_FORMAT`, `PRIMARY KEY ... USING HASH`) and MySQL's
//! column attributes (`CHARSET x` on a column, display widths, `ZEROFILL`, ...).
//!
//! Invariants: parsing only builds a [`Command`], it never touches the cluster; every
//! syntax error names the position of the offending token (line and column of the
//! statement, MySQL's "near '...'" text); column types are kept unresolved
//! ([`TypeSpec`]) until the table's default character set is known.

use super::errors;
use super::ir::TableName;
use super::lexer::{self, Statement, Tok, Token};
use crate::error::{NdbError, Result};
use crate::schema::{BlobKind, Charset, ColumnType, Decimal, StorageType, Value};

mod disk;
use crate::api::disk::DiskOp;

/// A column type before the table's default character set is applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TypeSpec {
    /// A type without a character set.
    Plain(ColumnType),
    Char(u32),
    Varchar(u32),
    Text(BlobKind),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DefaultSpec {
    Value(Value),
    /// CURRENT_TIMESTAMP / NOW().
    Now,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnSpec {
    pub name: String,
    pub ty: TypeSpec,
    pub charset: Option<Charset>,
    /// Some(false) for NOT NULL, Some(true) for NULL, None when not said.
    pub nullable: Option<bool>,
    pub default: Option<DefaultSpec>,
    pub auto_increment: bool,
    pub primary_key: bool,
    pub unique: bool,
    pub comment: Option<String>,
    pub storage: Option<StorageType>,
    pub on_update_now: bool,
    /// `PRIMARY KEY USING HASH` in the column definition.
    pub pk_using_hash: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexType {
    Primary,
    Unique,
    Key,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexSpec {
    pub name: Option<String>,
    pub kind: IndexType,
    pub columns: Vec<String>,
    /// USING HASH: no ordered index beside the hash index.
    pub using_hash: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CreateTable {
    pub table: TableName,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnSpec>,
    pub indexes: Vec<IndexSpec>,
    pub engine: Option<String>,
    pub charset: Option<Charset>,
    pub comment: Option<String>,
    pub auto_increment: Option<u64>,
    pub tablespace: Option<String>,
    pub storage: Option<StorageType>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AlterAction {
    AddIndex(IndexSpec),
    DropIndex(String),
    Engine(String),
    AutoIncrement(u64),
    /// Accepted options without effect (ALGORITHM=, LOCK=, COMMENT=, ...).
    Nothing,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ShowWhat {
    Tables { db: Option<String>, full: bool },
    Databases,
    Columns { table: TableName, full: bool },
    CreateTable(TableName),
    CreateDatabase(String),
    Index(TableName),
    Variables,
    Status,
    Warnings,
    Engines,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    CreateTable(Box<CreateTable>),
    CreateDatabase {
        name: String,
        if_not_exists: bool,
    },
    DropDatabase {
        name: String,
        if_exists: bool,
    },
    DropTables {
        tables: Vec<TableName>,
        if_exists: bool,
    },
    Truncate(TableName),
    CreateIndex {
        table: TableName,
        index: IndexSpec,
    },
    DropIndex {
        table: TableName,
        name: String,
    },
    AlterTable {
        table: TableName,
        actions: Vec<AlterAction>,
    },
    Use(String),
    Show {
        what: ShowWhat,
        like: Option<String>,
    },
    Begin,
    Commit,
    Rollback,
    /// OPTIMIZE / ANALYZE TABLE (operation name, tables).
    Maintenance(&'static str, Vec<TableName>),
    /// Accepted for compatibility, nothing to do (LOCK/UNLOCK TABLES, FLUSH).
    NoOp,
    /// CREATE/ALTER/DROP LOGFILE GROUP or TABLESPACE.
    Disk(DiskOp),
}

struct P<'a> {
    st: &'a Statement<'a>,
    i: usize,
}

/// Parses a statement that sqlparser does not get; `Ok(None)` when the first word is
/// not one this parser knows (the caller reports the syntax error).
pub(crate) fn parse(st: &Statement<'_>) -> Result<Option<Command>> {
    let mut p = P { st, i: 0 };
    let Some(first) = p.peek().and_then(Token::kw) else {
        return Ok(None);
    };
    p.i = 1;
    let cmd = match first.as_str() {
        "CREATE" => p.create()?,
        "DROP" => p.drop()?,
        "ALTER" => p.alter()?,
        "TRUNCATE" => {
            p.eat_kw("TABLE");
            Command::Truncate(p.table_name()?)
        }
        "USE" => Command::Use(p.ident()?),
        "SHOW" => p.show()?,
        "DESCRIBE" | "DESC" | "EXPLAIN" => {
            let table = p.table_name()?;
            let like = match p.peek().map(|t| &t.tok) {
                Some(Tok::Word(w)) | Some(Tok::Quoted(w)) | Some(Tok::Str(w)) => {
                    let w = w.clone();
                    p.i += 1;
                    Some(w)
                }
                _ => None,
            };
            Command::Show {
                what: ShowWhat::Columns { table, full: false },
                like,
            }
        }
        "BEGIN" => {
            p.eat_kw("WORK");
            Command::Begin
        }
        "START" => {
            p.expect_kw("TRANSACTION")?;
            while p.peek().is_some() {
                // WITH CONSISTENT SNAPSHOT, READ ONLY, READ WRITE
                if !(p.eat_kw("WITH")
                    || p.eat_kw("CONSISTENT")
                    || p.eat_kw("SNAPSHOT")
                    || p.eat_kw("READ")
                    || p.eat_kw("ONLY")
                    || p.eat_kw("WRITE")
                    || p.eat_sym(","))
                {
                    return Err(p.err());
                }
            }
            Command::Begin
        }
        "COMMIT" => {
            p.eat_kw("WORK");
            p.chain_release()?;
            Command::Commit
        }
        "ROLLBACK" => {
            p.eat_kw("WORK");
            if p.peek_kw("TO") {
                return Err(errors::unsupported("SAVEPOINT"));
            }
            p.chain_release()?;
            Command::Rollback
        }
        "OPTIMIZE" | "ANALYZE" => {
            let op = if first == "OPTIMIZE" {
                "optimize"
            } else {
                "analyze"
            };
            if !p.eat_kw("NO_WRITE_TO_BINLOG") {
                p.eat_kw("LOCAL");
            }
            if !p.eat_kw("TABLE") {
                p.expect_kw("TABLES")?;
            }
            let mut tables = vec![p.table_name()?];
            while p.eat_sym(",") {
                tables.push(p.table_name()?);
            }
            Command::Maintenance(op, tables)
        }
        "LOCK" | "UNLOCK" | "FLUSH" => {
            p.i = st.tokens.len();
            Command::NoOp
        }
        _ => return Ok(None),
    };
    p.end()?;
    Ok(Some(cmd))
}

impl<'a> P<'a> {
    fn peek(&self) -> Option<&'a Token> {
        self.st.tokens.get(self.i)
    }
    fn peek_at(&self, off: usize) -> Option<&'a Token> {
        self.st.tokens.get(self.i + off)
    }
    fn peek_kw(&self, kw: &str) -> bool {
        self.peek().is_some_and(|t| t.is_kw(kw))
    }
    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.peek_kw(kw) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect_kw(&mut self, kw: &str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.err())
        }
    }
    fn eat_sym(&mut self, s: &str) -> bool {
        if self.peek().is_some_and(|t| t.is_sym(s)) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect_sym(&mut self, s: &str) -> Result<()> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(self.err())
        }
    }
    /// Syntax error at the current token (or at the end).
    fn err(&self) -> NdbError {
        let pos = self.peek().map(|t| t.start).unwrap_or(self.st.text.len());
        lexer::syntax_at(self.st.text, pos)
    }
    fn err_at(&self, i: usize) -> NdbError {
        let pos = self
            .st
            .tokens
            .get(i)
            .map(|t| t.start)
            .unwrap_or(self.st.text.len());
        lexer::syntax_at(self.st.text, pos)
    }
    fn end(&self) -> Result<()> {
        if self.peek().is_some() {
            Err(self.err())
        } else {
            Ok(())
        }
    }
    fn chain_release(&mut self) -> Result<()> {
        if self.eat_kw("AND") {
            self.eat_kw("NO");
            self.expect_kw("CHAIN")?;
        }
        if self.eat_kw("NO") {
            self.expect_kw("RELEASE")?;
        }
        Ok(())
    }
    fn ident(&mut self) -> Result<String> {
        match self.peek().map(|t| &t.tok) {
            Some(Tok::Word(w)) | Some(Tok::Quoted(w)) => {
                let w = w.clone();
                self.i += 1;
                Ok(w)
            }
            _ => Err(self.err()),
        }
    }
    /// An identifier or a quoted string (names in SHOW ... LIKE, charsets, engines).
    fn name_or_string(&mut self) -> Result<String> {
        if let Some(Tok::Str(s)) = self.peek().map(|t| &t.tok) {
            let s = s.clone();
            self.i += 1;
            return Ok(s);
        }
        self.ident()
    }
    fn table_name(&mut self) -> Result<TableName> {
        let first = self.ident()?;
        if self.eat_sym(".") {
            let name = self.ident()?;
            return Ok(TableName {
                db: Some(first),
                name,
                alias: None,
            });
        }
        Ok(TableName {
            db: None,
            name: first,
            alias: None,
        })
    }
    /// A string literal; adjacent literals are concatenated, as MySQL does.
    fn string(&mut self) -> Result<String> {
        let mut out = match self.peek().map(|t| &t.tok) {
            Some(Tok::Str(s)) => s.clone(),
            _ => return Err(self.err()),
        };
        self.i += 1;
        while let Some(Tok::Str(s)) = self.peek().map(|t| &t.tok) {
            out.push_str(s);
            self.i += 1;
        }
        Ok(out)
    }
    fn number(&mut self) -> Result<u64> {
        match self.peek().map(|t| &t.tok) {
            Some(Tok::Num(n)) => {
                let v = n.parse::<u64>().map_err(|_| self.err())?;
                self.i += 1;
                Ok(v)
            }
            _ => Err(self.err()),
        }
    }
    fn opt_eq(&mut self) {
        self.eat_sym("=");
    }
    fn like(&mut self) -> Result<Option<String>> {
        if self.eat_kw("LIKE") {
            return Ok(Some(self.string()?));
        }
        if self.peek_kw("WHERE") {
            return Err(errors::unsupported("SHOW ... WHERE"));
        }
        Ok(None)
    }

    fn create(&mut self) -> Result<Command> {
        if self.eat_kw("DATABASE") || self.eat_kw("SCHEMA") {
            let if_not_exists = self.if_not_exists()?;
            let name = self.ident()?;
            while self.peek().is_some() {
                self.eat_kw("DEFAULT");
                if self.eat_kw("CHARSET") || (self.eat_kw("CHARACTER") && self.eat_kw("SET")) {
                    self.opt_eq();
                    self.charset_name()?;
                } else if self.eat_kw("COLLATE") {
                    self.opt_eq();
                    self.collation()?;
                } else if self.eat_kw("ENCRYPTION") {
                    self.opt_eq();
                    self.string()?;
                } else {
                    return Err(self.err());
                }
            }
            return Ok(Command::CreateDatabase {
                name,
                if_not_exists,
            });
        }
        if self.eat_kw("TEMPORARY") {
            return Err(errors::app(
                1478,
                "Table storage engine 'ndbcluster' does not support the create option 'TEMPORARY'",
            ));
        }
        if self.eat_kw("TABLE") {
            return self.create_table();
        }
        let unique = self.eat_kw("UNIQUE");
        if self.eat_kw("INDEX") {
            let name = self.ident()?;
            let mut using_hash = self.using()?;
            self.expect_kw("ON")?;
            let table = self.table_name()?;
            let columns = self.key_columns()?;
            using_hash |= self.using()?;
            self.index_tail()?;
            let kind = if unique {
                IndexType::Unique
            } else {
                IndexType::Key
            };
            return Ok(Command::CreateIndex {
                table,
                index: IndexSpec {
                    name: Some(name),
                    kind,
                    columns,
                    using_hash,
                },
            });
        }
        if !unique
            && (self.peek_kw("TABLESPACE") || self.peek_kw("LOGFILE") || self.peek_kw("UNDO"))
        {
            return self.create_disk();
        }
        Err(self.err())
    }

    fn if_not_exists(&mut self) -> Result<bool> {
        if self.eat_kw("IF") {
            self.expect_kw("NOT")?;
            self.expect_kw("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn if_exists(&mut self) -> Result<bool> {
        if self.eat_kw("IF") {
            self.expect_kw("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }

    /// USING {BTREE|HASH}: true for HASH.
    fn using(&mut self) -> Result<bool> {
        if self.eat_kw("USING") {
            if self.eat_kw("HASH") {
                return Ok(true);
            }
            self.expect_kw("BTREE")?;
        }
        Ok(false)
    }

    /// Index options after the column list: COMMENT, ALGORITHM=, LOCK=, VISIBLE...
    fn index_tail(&mut self) -> Result<()> {
        loop {
            if self.eat_kw("COMMENT") {
                self.string()?;
            } else if self.eat_kw("ALGORITHM") || self.eat_kw("LOCK") {
                self.opt_eq();
                self.ident()?;
            } else if self.eat_kw("VISIBLE") || self.eat_kw("INVISIBLE") {
            } else if self.eat_kw("KEY_BLOCK_SIZE") {
                self.opt_eq();
                self.number()?;
            } else {
                return Ok(());
            }
        }
    }

    /// `(a, b DESC, ...)`.
    fn key_columns(&mut self) -> Result<Vec<String>> {
        self.expect_sym("(")?;
        let mut cols = Vec::new();
        loop {
            cols.push(self.ident()?);
            if self.peek().is_some_and(|t| t.is_sym("(")) {
                return Err(errors::unsupported("index prefix lengths"));
            }
            if !self.eat_kw("ASC") {
                self.eat_kw("DESC");
            }
            if self.eat_sym(")") {
                return Ok(cols);
            }
            self.expect_sym(",")?;
        }
    }

    fn charset_name(&mut self) -> Result<Charset> {
        let name = self.name_or_string()?;
        if name.eq_ignore_ascii_case("binary") {
            return Err(errors::unsupported("CHARACTER SET binary"));
        }
        Charset::parse(&name)
            .ok_or_else(|| errors::app(1115, format!("Unknown character set: '{name}'")))
    }

    fn collation(&mut self) -> Result<Charset> {
        let name = self.name_or_string()?;
        let cs = name.split('_').next().unwrap_or("");
        Charset::parse(cs).ok_or_else(|| errors::app(1273, format!("Unknown collation: '{name}'")))
    }

    fn create_table(&mut self) -> Result<Command> {
        let if_not_exists = self.if_not_exists()?;
        let table = self.table_name()?;
        if self.peek_kw("LIKE") || self.peek_kw("AS") || self.peek_kw("SELECT") {
            return Err(errors::unsupported("CREATE TABLE ... LIKE / AS SELECT"));
        }
        self.expect_sym("(")?;
        let mut ct = CreateTable {
            table,
            if_not_exists,
            columns: Vec::new(),
            indexes: Vec::new(),
            engine: None,
            charset: None,
            comment: None,
            auto_increment: None,
            tablespace: None,
            storage: None,
        };
        loop {
            self.table_element(&mut ct)?;
            if self.eat_sym(")") {
                break;
            }
            self.expect_sym(",")?;
        }
        self.table_options(&mut ct)?;
        Ok(Command::CreateTable(Box::new(ct)))
    }

    fn table_element(&mut self, ct: &mut CreateTable) -> Result<()> {
        if self.eat_kw("CONSTRAINT")
            && !(self.peek_kw("PRIMARY")
                || self.peek_kw("UNIQUE")
                || self.peek_kw("FOREIGN")
                || self.peek_kw("CHECK"))
        {
            self.ident()?;
        }
        if self.eat_kw("PRIMARY") {
            self.expect_kw("KEY")?;
            let mut using_hash = self.using()?;
            let columns = self.key_columns()?;
            using_hash |= self.using()?;
            self.index_tail()?;
            ct.indexes.push(IndexSpec {
                name: None,
                kind: IndexType::Primary,
                columns,
                using_hash,
            });
            return Ok(());
        }
        if self.eat_kw("UNIQUE") {
            if !self.eat_kw("KEY") {
                self.eat_kw("INDEX");
            }
            return self.index_def(ct, IndexType::Unique);
        }
        if self.eat_kw("KEY") || self.eat_kw("INDEX") {
            return self.index_def(ct, IndexType::Key);
        }
        if self.peek_kw("FULLTEXT") || self.peek_kw("SPATIAL") {
            return Err(errors::unsupported("FULLTEXT and SPATIAL indexes"));
        }
        if self.peek_kw("FOREIGN") {
            return Err(errors::unsupported("foreign keys"));
        }
        if self.eat_kw("CHECK") {
            self.skip_parens()?;
            return Ok(());
        }
        let col = self.column_def()?;
        ct.columns.push(col);
        Ok(())
    }

    fn skip_parens(&mut self) -> Result<()> {
        self.expect_sym("(")?;
        let mut depth = 1;
        while depth > 0 {
            let Some(t) = self.peek() else {
                return Err(self.err());
            };
            if t.is_sym("(") {
                depth += 1;
            } else if t.is_sym(")") {
                depth -= 1;
            }
            self.i += 1;
        }
        Ok(())
    }

    fn index_def(&mut self, ct: &mut CreateTable, kind: IndexType) -> Result<()> {
        let name = if self.peek().is_some_and(|t| t.is_sym("(")) || self.peek_kw("USING") {
            None
        } else {
            Some(self.ident()?)
        };
        let mut using_hash = self.using()?;
        let columns = self.key_columns()?;
        using_hash |= self.using()?;
        self.index_tail()?;
        ct.indexes.push(IndexSpec {
            name,
            kind,
            columns,
            using_hash,
        });
        Ok(())
    }

    fn column_def(&mut self) -> Result<ColumnSpec> {
        let name = self.ident()?;
        let (ty, mut charset) = self.column_type()?;
        let mut c = ColumnSpec {
            name,
            ty,
            charset: None,
            nullable: None,
            default: None,
            auto_increment: false,
            primary_key: false,
            unique: false,
            comment: None,
            storage: None,
            on_update_now: false,
            pk_using_hash: false,
        };
        loop {
            if self.eat_kw("NOT") {
                self.expect_kw("NULL")?;
                c.nullable = Some(false);
            } else if self.eat_kw("NULL") {
                c.nullable = Some(true);
            } else if self.eat_kw("DEFAULT") {
                c.default = Some(self.default_value()?);
            } else if self.eat_kw("AUTO_INCREMENT") {
                c.auto_increment = true;
            } else if self.eat_kw("PRIMARY") {
                self.expect_kw("KEY")?;
                c.primary_key = true;
                c.pk_using_hash |= self.using()?;
            } else if self.eat_kw("KEY") {
                c.primary_key = true;
            } else if self.eat_kw("UNIQUE") {
                self.eat_kw("KEY");
                c.unique = true;
            } else if self.eat_kw("COMMENT") {
                c.comment = Some(self.string()?);
            } else if self.eat_kw("CHARSET") {
                charset = Some(self.charset_name()?);
            } else if self.peek_kw("CHARACTER") && self.peek_at(1).is_some_and(|t| t.is_kw("SET")) {
                self.i += 2;
                charset = Some(self.charset_name()?);
            } else if self.eat_kw("COLLATE") {
                let cs = self.collation()?;
                if charset.is_none() {
                    charset = Some(cs);
                }
            } else if self.eat_kw("STORAGE") {
                c.storage = Some(self.storage_kind()?);
            } else if self.eat_kw("COLUMN_FORMAT") {
                if !(self.eat_kw("FIXED") || self.eat_kw("DYNAMIC")) {
                    self.expect_kw("DEFAULT")?;
                }
            } else if self.eat_kw("ON") {
                self.expect_kw("UPDATE")?;
                self.now_keyword()?;
                c.on_update_now = true;
            } else if self.eat_kw("VISIBLE") || self.eat_kw("INVISIBLE") {
            } else if self.eat_kw("BINARY") {
                // CHAR(n) BINARY: a binary collation; rndb compares bytes anyway
            } else if self.eat_kw("CHECK") {
                self.skip_parens()?;
            } else if self.peek_kw("REFERENCES") {
                return Err(errors::unsupported("foreign keys"));
            } else if self.peek_kw("GENERATED") || self.peek_kw("AS") {
                return Err(errors::unsupported("generated columns"));
            } else if self.peek_kw("SERIAL") {
                return Err(errors::unsupported("SERIAL DEFAULT VALUE"));
            } else {
                break;
            }
        }
        c.charset = charset;
        Ok(c)
    }

    fn storage_kind(&mut self) -> Result<StorageType> {
        if self.eat_kw("DISK") {
            Ok(StorageType::Disk)
        } else if self.eat_kw("MEMORY") || self.eat_kw("DEFAULT") {
            Ok(StorageType::Memory)
        } else {
            Err(self.err())
        }
    }

    /// CURRENT_TIMESTAMP[(n)], NOW(), LOCALTIME[()], LOCALTIMESTAMP[()].
    fn now_keyword(&mut self) -> Result<()> {
        let at = self.i;
        let w = self.peek().and_then(Token::kw).unwrap_or_default();
        if !matches!(
            w.as_str(),
            "CURRENT_TIMESTAMP" | "NOW" | "LOCALTIME" | "LOCALTIMESTAMP"
        ) {
            return Err(self.err());
        }
        self.i += 1;
        if self.eat_sym("(") {
            if matches!(self.peek().map(|t| &t.tok), Some(Tok::Num(_))) {
                self.i += 1;
            }
            if !self.eat_sym(")") {
                return Err(self.err());
            }
        } else if w == "NOW" {
            return Err(self.err_at(at + 1));
        }
        Ok(())
    }

    fn default_value(&mut self) -> Result<DefaultSpec> {
        let Some(t) = self.peek() else {
            return Err(self.err());
        };
        let v = match &t.tok {
            Tok::Word(w) => match w.to_ascii_uppercase().as_str() {
                "NULL" => Value::Null,
                "TRUE" => Value::Int(1),
                "FALSE" => Value::Int(0),
                "CURRENT_TIMESTAMP" | "NOW" | "LOCALTIME" | "LOCALTIMESTAMP" => {
                    self.now_keyword()?;
                    return Ok(DefaultSpec::Now);
                }
                _ => return Err(self.err()),
            },
            Tok::Str(_) => {
                return Ok(DefaultSpec::Value(Value::Str(self.string()?)));
            }
            Tok::Num(n) => number(n).ok_or_else(|| self.err())?,
            Tok::Hex(b) => Value::Bytes(b.clone()),
            Tok::Sym("-") | Tok::Sym("+") => {
                let neg = t.is_sym("-");
                self.i += 1;
                let Some(Tok::Num(n)) = self.peek().map(|t| &t.tok) else {
                    return Err(self.err());
                };
                let text = if neg { format!("-{n}") } else { n.clone() };
                number(&text).ok_or_else(|| self.err())?
            }
            Tok::Sym("(") => return Err(errors::unsupported("expression defaults")),
            _ => return Err(self.err()),
        };
        self.i += 1;
        Ok(DefaultSpec::Value(v))
    }

    /// `(n)` or `(m, d)`, optional.
    fn type_args(&mut self) -> Result<(Option<u64>, Option<u64>)> {
        if !self.eat_sym("(") {
            return Ok((None, None));
        }
        let a = self.number()?;
        let b = if self.eat_sym(",") {
            Some(self.number()?)
        } else {
            None
        };
        self.expect_sym(")")?;
        Ok((Some(a), b))
    }

    fn column_type(&mut self) -> Result<(TypeSpec, Option<Charset>)> {
        let at = self.i;
        let Some(word) = self.peek().and_then(Token::kw) else {
            return Err(self.err());
        };
        self.i += 1;
        let mut charset = None;
        let int = |p: &mut Self, bytes: u8| -> Result<TypeSpec> {
            p.type_args()?;
            Ok(TypeSpec::Plain(ColumnType::Int {
                bytes,
                unsigned: false,
            }))
        };
        let ty = match word.as_str() {
            "TINYINT" | "INT1" => int(self, 1)?,
            "BOOL" | "BOOLEAN" => return Ok((int(self, 1)?, None)),
            "SMALLINT" | "INT2" => int(self, 2)?,
            "MEDIUMINT" | "INT3" | "MIDDLEINT" => int(self, 3)?,
            "INT" | "INTEGER" | "INT4" => int(self, 4)?,
            "BIGINT" | "INT8" => int(self, 8)?,
            "FLOAT" => {
                let (p, d) = self.type_args()?;
                if d.is_none() && p.is_some_and(|p| p > 24) {
                    TypeSpec::Plain(ColumnType::Double)
                } else {
                    TypeSpec::Plain(ColumnType::Float)
                }
            }
            "DOUBLE" | "REAL" => {
                if word == "DOUBLE" {
                    self.eat_kw("PRECISION");
                }
                self.type_args()?;
                TypeSpec::Plain(ColumnType::Double)
            }
            "DECIMAL" | "DEC" | "NUMERIC" | "FIXED" => {
                let (p, s) = self.type_args()?;
                let p = p.unwrap_or(10);
                let p = if p == 0 { 10 } else { p };
                let s = s.unwrap_or(0);
                if p > 65 {
                    return Err(errors::app(
                        1426,
                        format!("Too-big precision {p} specified for 'column'. Maximum is 65."),
                    ));
                }
                if s > 30 || s > p {
                    return Err(errors::app(
                        1427,
                        "For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column 'column').",
                    ));
                }
                if p > 38 {
                    return Err(errors::unsupported("DECIMAL precision above 38"));
                }
                TypeSpec::Plain(ColumnType::Decimal {
                    precision: p as u8,
                    scale: s as u8,
                })
            }
            "CHAR" | "CHARACTER" | "NCHAR" | "NATIONAL" => {
                if word == "NATIONAL" && !self.eat_kw("CHAR") {
                    self.expect_kw("CHARACTER")?;
                }
                if word == "NCHAR" || word == "NATIONAL" {
                    charset = Some(Charset::Utf8mb3);
                }
                if self.eat_kw("VARYING") {
                    let (n, _) = self.type_args()?;
                    TypeSpec::Varchar(self.len_arg(n, at)?)
                } else {
                    let (n, _) = self.type_args()?;
                    TypeSpec::Char(n.unwrap_or(1).min(u32::MAX as u64) as u32)
                }
            }
            "VARCHAR" | "NVARCHAR" => {
                if word == "NVARCHAR" {
                    charset = Some(Charset::Utf8mb3);
                }
                let (n, _) = self.type_args()?;
                TypeSpec::Varchar(self.len_arg(n, at)?)
            }
            "BINARY" => {
                let (n, _) = self.type_args()?;
                let n = n.unwrap_or(1);
                if n > 255 {
                    return Err(too_long_col("column", 255));
                }
                TypeSpec::Plain(ColumnType::Binary { len: n as u32 })
            }
            "VARBINARY" => {
                let (n, _) = self.type_args()?;
                let n = self.len_arg(n, at)?;
                if n > 65535 {
                    return Err(too_long_col("column", 65535));
                }
                TypeSpec::Plain(ColumnType::Varbinary { len: n })
            }
            "TINYTEXT" => TypeSpec::Text(BlobKind::Tiny),
            "TEXT" => {
                let (n, _) = self.type_args()?;
                TypeSpec::Text(blob_kind_for(n))
            }
            "MEDIUMTEXT" => TypeSpec::Text(BlobKind::Medium),
            "LONGTEXT" => TypeSpec::Text(BlobKind::Long),
            "TINYBLOB" => blob(BlobKind::Tiny),
            "BLOB" => {
                let (n, _) = self.type_args()?;
                blob(blob_kind_for(n))
            }
            "MEDIUMBLOB" => blob(BlobKind::Medium),
            "LONGBLOB" => blob(BlobKind::Long),
            "LONG" => {
                if self.eat_kw("VARBINARY") {
                    blob(BlobKind::Medium)
                } else {
                    self.eat_kw("VARCHAR");
                    TypeSpec::Text(BlobKind::Medium)
                }
            }
            "DATE" => TypeSpec::Plain(ColumnType::Date),
            "DATETIME" | "TIMESTAMP" | "TIME" => {
                self.type_args()?;
                TypeSpec::Plain(match word.as_str() {
                    "DATETIME" => ColumnType::Datetime,
                    "TIMESTAMP" => ColumnType::Timestamp,
                    _ => ColumnType::Time,
                })
            }
            "YEAR" | "ENUM" | "SET" | "JSON" | "BIT" | "GEOMETRY" | "POINT" | "SERIAL" => {
                return Err(errors::unsupported(format!(
                    "column type {}",
                    word.to_lowercase()
                )));
            }
            _ => return Err(self.err_at(at)),
        };
        // numeric attributes
        loop {
            if self.eat_kw("UNSIGNED") || self.eat_kw("ZEROFILL") {
                if let TypeSpec::Plain(ColumnType::Int { bytes, .. }) = ty {
                    return self.after_unsigned(bytes, charset);
                }
            } else if !self.eat_kw("SIGNED") {
                break;
            }
        }
        Ok((ty, charset))
    }

    fn after_unsigned(
        &mut self,
        bytes: u8,
        charset: Option<Charset>,
    ) -> Result<(TypeSpec, Option<Charset>)> {
        while self.eat_kw("UNSIGNED") || self.eat_kw("ZEROFILL") || self.eat_kw("SIGNED") {}
        Ok((
            TypeSpec::Plain(ColumnType::Int {
                bytes,
                unsigned: true,
            }),
            charset,
        ))
    }

    fn len_arg(&self, n: Option<u64>, at: usize) -> Result<u32> {
        match n {
            Some(n) => Ok(n.min(u32::MAX as u64) as u32),
            None => Err(self.err_at(at + 1)),
        }
    }

    fn table_options(&mut self, ct: &mut CreateTable) -> Result<()> {
        loop {
            if self.peek().is_none() {
                return Ok(());
            }
            if self.eat_sym(",") {
                continue;
            }
            if self.eat_kw("ENGINE") || self.eat_kw("TYPE") {
                self.opt_eq();
                ct.engine = Some(self.name_or_string()?);
            } else if self.eat_kw("DEFAULT") {
                if self.eat_kw("CHARSET") || (self.eat_kw("CHARACTER") && self.eat_kw("SET")) {
                    self.opt_eq();
                    ct.charset = Some(self.charset_name()?);
                } else if self.eat_kw("COLLATE") {
                    self.opt_eq();
                    let cs = self.collation()?;
                    ct.charset.get_or_insert(cs);
                } else {
                    return Err(self.err());
                }
            } else if self.eat_kw("CHARSET") {
                self.opt_eq();
                ct.charset = Some(self.charset_name()?);
            } else if self.peek_kw("CHARACTER") {
                self.i += 1;
                self.expect_kw("SET")?;
                self.opt_eq();
                ct.charset = Some(self.charset_name()?);
            } else if self.eat_kw("COLLATE") {
                self.opt_eq();
                let cs = self.collation()?;
                ct.charset.get_or_insert(cs);
            } else if self.eat_kw("COMMENT") {
                self.opt_eq();
                ct.comment = Some(self.string()?);
            } else if self.eat_kw("AUTO_INCREMENT") {
                self.opt_eq();
                ct.auto_increment = Some(self.number()?);
            } else if self.eat_kw("TABLESPACE") {
                self.opt_eq();
                ct.tablespace = Some(self.ident()?);
                if self.eat_kw("STORAGE") {
                    ct.storage = Some(self.storage_kind()?);
                }
            } else if self.eat_kw("STORAGE") {
                ct.storage = Some(self.storage_kind()?);
            } else if self.peek_kw("PARTITION") {
                return Err(errors::unsupported("PARTITION BY"));
            } else if self.peek().and_then(Token::kw).is_some_and(|k| {
                matches!(
                    k.as_str(),
                    "ROW_FORMAT"
                        | "MAX_ROWS"
                        | "MIN_ROWS"
                        | "AVG_ROW_LENGTH"
                        | "KEY_BLOCK_SIZE"
                        | "PACK_KEYS"
                        | "CHECKSUM"
                        | "DELAY_KEY_WRITE"
                        | "STATS_PERSISTENT"
                        | "STATS_AUTO_RECALC"
                        | "STATS_SAMPLE_PAGES"
                        | "COMPRESSION"
                        | "ENCRYPTION"
                        | "INSERT_METHOD"
                )
            }) {
                self.i += 1;
                self.opt_eq();
                match self.peek().map(|t| &t.tok) {
                    Some(Tok::Word(_)) | Some(Tok::Num(_)) | Some(Tok::Str(_))
                    | Some(Tok::Quoted(_)) => self.i += 1,
                    _ => return Err(self.err()),
                }
            } else {
                return Err(self.err());
            }
        }
    }

    fn drop(&mut self) -> Result<Command> {
        if self.eat_kw("DATABASE") || self.eat_kw("SCHEMA") {
            let if_exists = self.if_exists()?;
            let name = self.ident()?;
            return Ok(Command::DropDatabase { name, if_exists });
        }
        self.eat_kw("TEMPORARY");
        if self.eat_kw("TABLE") || self.eat_kw("TABLES") {
            let if_exists = self.if_exists()?;
            let mut tables = vec![self.table_name()?];
            while self.eat_sym(",") {
                tables.push(self.table_name()?);
            }
            if !self.eat_kw("RESTRICT") {
                self.eat_kw("CASCADE");
            }
            return Ok(Command::DropTables { tables, if_exists });
        }
        if self.eat_kw("INDEX") {
            let name = self.ident()?;
            self.expect_kw("ON")?;
            let table = self.table_name()?;
            self.index_tail()?;
            return Ok(Command::DropIndex { table, name });
        }
        if self.peek_kw("TABLESPACE") || self.peek_kw("LOGFILE") || self.peek_kw("UNDO") {
            return self.drop_disk();
        }
        Err(self.err())
    }

    fn alter(&mut self) -> Result<Command> {
        if self.peek_kw("TABLESPACE") || self.peek_kw("LOGFILE") || self.peek_kw("UNDO") {
            return self.alter_disk();
        }
        self.eat_kw("ONLINE");
        self.eat_kw("OFFLINE");
        self.expect_kw("TABLE")?;
        let table = self.table_name()?;
        let mut actions = Vec::new();
        loop {
            actions.push(self.alter_action()?);
            if !self.eat_sym(",") {
                break;
            }
        }
        Ok(Command::AlterTable { table, actions })
    }

    fn alter_action(&mut self) -> Result<AlterAction> {
        if self.eat_kw("ADD") {
            if self.eat_kw("CONSTRAINT") && !self.peek_kw("UNIQUE") && !self.peek_kw("PRIMARY") {
                self.ident()?;
            }
            let kind = if self.eat_kw("UNIQUE") {
                if !self.eat_kw("INDEX") {
                    self.eat_kw("KEY");
                }
                IndexType::Unique
            } else if self.eat_kw("INDEX") || self.eat_kw("KEY") {
                IndexType::Key
            } else if self.peek_kw("PRIMARY") {
                return Err(errors::unsupported("ALTER TABLE ... ADD PRIMARY KEY"));
            } else {
                return Err(errors::unsupported("ALTER TABLE ... ADD COLUMN"));
            };
            let name = if self.peek().is_some_and(|t| t.is_sym("(")) || self.peek_kw("USING") {
                None
            } else {
                Some(self.ident()?)
            };
            let mut using_hash = self.using()?;
            let columns = self.key_columns()?;
            using_hash |= self.using()?;
            self.index_tail()?;
            return Ok(AlterAction::AddIndex(IndexSpec {
                name,
                kind,
                columns,
                using_hash,
            }));
        }
        if self.eat_kw("DROP") {
            if self.eat_kw("INDEX") || self.eat_kw("KEY") {
                return Ok(AlterAction::DropIndex(self.ident()?));
            }
            if self.peek_kw("PRIMARY") {
                return Err(errors::unsupported("ALTER TABLE ... DROP PRIMARY KEY"));
            }
            return Err(errors::unsupported("ALTER TABLE ... DROP COLUMN"));
        }
        if self.eat_kw("ENGINE") {
            self.opt_eq();
            return Ok(AlterAction::Engine(self.name_or_string()?));
        }
        if self.eat_kw("AUTO_INCREMENT") {
            self.opt_eq();
            return Ok(AlterAction::AutoIncrement(self.number()?));
        }
        if self.eat_kw("ALGORITHM") || self.eat_kw("LOCK") {
            self.opt_eq();
            self.ident()?;
            return Ok(AlterAction::Nothing);
        }
        if self.eat_kw("COMMENT") {
            self.opt_eq();
            self.string()?;
            return Ok(AlterAction::Nothing);
        }
        if self.peek().is_none() {
            return Err(self.err());
        }
        let what = self
            .peek()
            .and_then(Token::kw)
            .unwrap_or_else(|| "this".into());
        Err(errors::unsupported(format!("ALTER TABLE ... {what}")))
    }

    fn show(&mut self) -> Result<Command> {
        let full = self.eat_kw("FULL");
        let scope_global = self.eat_kw("GLOBAL");
        if !scope_global {
            self.eat_kw("SESSION");
        }
        let what = if self.eat_kw("TABLES") {
            let db = if self.eat_kw("FROM") || self.eat_kw("IN") {
                Some(self.ident()?)
            } else {
                None
            };
            ShowWhat::Tables { db, full }
        } else if self.eat_kw("DATABASES") || self.eat_kw("SCHEMAS") {
            ShowWhat::Databases
        } else if self.eat_kw("COLUMNS") || self.eat_kw("FIELDS") {
            if !self.eat_kw("FROM") {
                self.expect_kw("IN")?;
            }
            let mut table = self.table_name()?;
            if self.eat_kw("FROM") || self.eat_kw("IN") {
                table.db = Some(self.ident()?);
            }
            ShowWhat::Columns { table, full }
        } else if self.eat_kw("INDEX") || self.eat_kw("INDEXES") || self.eat_kw("KEYS") {
            if !self.eat_kw("FROM") {
                self.expect_kw("IN")?;
            }
            let mut table = self.table_name()?;
            if self.eat_kw("FROM") || self.eat_kw("IN") {
                table.db = Some(self.ident()?);
            }
            ShowWhat::Index(table)
        } else if self.eat_kw("CREATE") {
            if self.eat_kw("TABLE") {
                ShowWhat::CreateTable(self.table_name()?)
            } else if self.eat_kw("DATABASE") || self.eat_kw("SCHEMA") {
                self.if_not_exists()?;
                ShowWhat::CreateDatabase(self.ident()?)
            } else {
                return Err(self.err());
            }
        } else if self.eat_kw("VARIABLES") {
            ShowWhat::Variables
        } else if self.eat_kw("STATUS") {
            ShowWhat::Status
        } else if self.eat_kw("WARNINGS") || self.eat_kw("ERRORS") {
            if self.eat_kw("LIMIT") {
                self.number()?;
            }
            ShowWhat::Warnings
        } else if self.eat_kw("ENGINES") || (self.eat_kw("STORAGE") && self.eat_kw("ENGINES")) {
            ShowWhat::Engines
        } else {
            let what = self.peek().and_then(Token::kw).unwrap_or_default();
            if what.is_empty() {
                return Err(self.err());
            }
            return Err(errors::unsupported(format!("SHOW {what}")));
        };
        let like = self.like()?;
        Ok(Command::Show { what, like })
    }
}

fn blob(kind: BlobKind) -> TypeSpec {
    TypeSpec::Plain(ColumnType::Blob {
        kind,
        charset: None,
    })
}

/// TEXT(n) / BLOB(n): the smallest kind holding n bytes, as MySQL picks.
fn blob_kind_for(n: Option<u64>) -> BlobKind {
    match n {
        Some(n) if n <= 255 => BlobKind::Tiny,
        Some(n) if n <= 65535 => BlobKind::Regular,
        Some(n) if n <= 16_777_215 => BlobKind::Medium,
        Some(_) => BlobKind::Long,
        None => BlobKind::Regular,
    }
}

pub(crate) fn too_long_col(column: &str, max: u64) -> NdbError {
    errors::app(
        1074,
        format!(
            "Column length too big for column '{column}' (max = {max}); use BLOB or TEXT instead"
        ),
    )
}

fn number(n: &str) -> Option<Value> {
    if n.contains(['e', 'E']) {
        return n.parse::<f64>().ok().map(Value::Double);
    }
    if n.contains('.') {
        return Decimal::parse(n).map(Value::Decimal);
    }
    n.parse::<i64>()
        .ok()
        .map(Value::Int)
        .or_else(|| n.parse::<u64>().ok().map(Value::UInt))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Result<Option<Command>> {
        let v = lexer::statements(s);
        let st = v.into_iter().next().expect("one")?;
        parse(&st)
    }

    #[test]
    fn parses_create_table_with_ndb_options() {
        let c = cmd("CREATE TABLE `t1` (`id` bigint(20) NOT NULL AUTO_INCREMENT, `data1` varchar(512) DEFAULT NULL, b int storage disk, PRIMARY KEY (`id`) USING HASH) ENGINE=ndbcluster TABLESPACE ts_1 STORAGE DISK ENGINE=ndbcluster")
            .expect("parses")
            .expect("known");
        let Command::CreateTable(ct) = c else {
            panic!("not a create table: {c:?}");
        };
        assert_eq!(ct.table.name, "t1");
        assert_eq!(ct.columns.len(), 3);
        assert!(ct.columns[0].auto_increment);
        assert_eq!(ct.columns[0].nullable, Some(false));
        assert_eq!(
            ct.columns[0].ty,
            TypeSpec::Plain(ColumnType::Int {
                bytes: 8,
                unsigned: false
            })
        );
        assert_eq!(ct.columns[1].ty, TypeSpec::Varchar(512));
        assert_eq!(ct.columns[1].default, Some(DefaultSpec::Value(Value::Null)));
        assert_eq!(ct.columns[2].storage, Some(StorageType::Disk));
        assert_eq!(ct.indexes[0].kind, IndexType::Primary);
        assert!(ct.indexes[0].using_hash);
        assert_eq!(ct.tablespace.as_deref(), Some("ts_1"));
        assert_eq!(ct.storage, Some(StorageType::Disk));
        assert_eq!(ct.engine.as_deref(), Some("ndbcluster"));
    }

    #[test]
    fn syntax_errors_name_the_position() {
        let e = cmd("CREATE TABLE t (a int,\n  b varchar)").expect_err("no length");
        assert!(e.message.contains("near ')' at line 2 column 12"), "{e}");
        let e = cmd("DROP TABLE").expect_err("no name");
        assert!(e.message.contains("near '' at line 1 column 11"), "{e}");
        assert_eq!(cmd("FROB x").ok(), Some(None));
    }
}
