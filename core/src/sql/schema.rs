//! Running the statements of [`super::ddl`]: CREATE/DROP/ALTER TABLE and INDEX, CREATE/DROP
//! DATABASE, TRUNCATE, USE, transaction control, OPTIMIZE, and SHOW / DESCRIBE output with
//! mysqld's column names.
//!
//! NDB mapping (what mysqld's ha_ndbcluster does): a PRIMARY KEY is NDB's hash key plus
//! an ordered index named `PRIMARY` (not with `USING HASH`); `UNIQUE KEY u` is a unique
//! hash index `u$unique` plus an ordered index `u` (not with `USING HASH`); `KEY k` is an
//! ordered index `k`. A table without a primary key gets NDB's hidden key, which SHOW and
//! DESCRIBE do not list. `TABLESPACE ts STORAGE DISK` puts every column no index uses
//! on disk (a column's own `STORAGE` wins; an index on a disk column is error 756;
//! STORAGE DISK without a tablespace is error 755). `COMMENT="NDB_TABLE=NOLOGGING=1"` or
//! the session's `ndb_table_no_logging` makes a NoLogging table.
//!
//! Invariants: every DDL statement first commits the session's open transaction (MySQL's
//! implicit commit); a failing CREATE TABLE leaves no table and no SQL metadata behind;
//! SQL metadata ([`super::meta`]) is written only after the engine created the table.

use super::assign::assign;
use super::ddl::{
    AlterAction, ColumnSpec, Command, CreateTable, DefaultSpec, IndexSpec, IndexType, ShowWhat,
    TypeSpec,
};
use super::errors;
use super::eval;
use super::ir::TableName;
use super::meta::{self, TableMeta};
use super::{Session, SqlResult};
use crate::api::optimize::{OptimizeOptions, OptimizeReport};
use crate::api::{TableRuntime, TableSpec};
use crate::error::{Result, codes};
use crate::schema::{
    Charset, Column, ColumnType, IndexKind, StorageType, TableDef, UNIQUE_INDEX_SUFFIX, Value,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub(crate) fn run(s: &mut Session, cmd: Command) -> Result<SqlResult> {
    match cmd {
        Command::Begin => {
            s.txn.commit()?;
            s.txn.explicit = true;
            Ok(SqlResult::ok(0))
        }
        Command::Commit => {
            let r = s.txn.commit();
            s.txn.explicit = false;
            r.map(|_| SqlResult::ok(0))
        }
        Command::Rollback => {
            s.txn.rollback();
            s.txn.explicit = false;
            Ok(SqlResult::ok(0))
        }
        Command::NoOp => Ok(SqlResult::ok(0)),
        Command::Use(db) => {
            if !meta::database_exists(s.ndb.cluster(), &db) {
                return Err(errors::unknown_database(&db));
            }
            let db = if meta::is_virtual(&db) {
                db.to_ascii_lowercase()
            } else {
                db
            };
            s.ndb.set_database(&db);
            s.vars.db = Some(db);
            Ok(SqlResult::ok(0))
        }
        Command::Show { what, like } => show(s, what, like.as_deref()),
        Command::Maintenance(op, tables) => maintenance(s, op, &tables),
        ddl => {
            // DDL commits the open transaction, as in MySQL
            s.txn.commit()?;
            s.txn.explicit = false;
            run_ddl(s, ddl)
        }
    }
}

fn run_ddl(s: &mut Session, cmd: Command) -> Result<SqlResult> {
    match cmd {
        Command::Disk(op) => {
            s.ndb.cluster().disk_ddl(op)?;
            Ok(SqlResult::ok(0))
        }
        Command::CreateTable(ct) => create_table(s, *ct),
        Command::CreateDatabase {
            name,
            if_not_exists,
        } => {
            if meta::database_exists(s.ndb.cluster(), &name) {
                if if_not_exists {
                    return Ok(SqlResult::ok(1));
                }
                return Err(errors::app(
                    1007,
                    format!("Can't create database '{name}'; database exists"),
                ));
            }
            meta::create_database(s.ndb.cluster(), &name);
            Ok(SqlResult::ok(1))
        }
        Command::DropDatabase { name, if_exists } => {
            if meta::is_virtual(&name) {
                return Err(errors::app(
                    1044,
                    format!(
                        "Access denied for user 'root'@'localhost' to database '{}'",
                        name.to_ascii_lowercase()
                    ),
                ));
            }
            if !meta::database_exists(s.ndb.cluster(), &name) {
                if if_exists {
                    return Ok(SqlResult::ok(0));
                }
                return Err(errors::app(
                    1008,
                    format!("Can't drop database '{name}'; database doesn't exist"),
                ));
            }
            let ndb = s.ndb_for(&name);
            let mut dropped = 0;
            for t in ndb.tables() {
                if ndb.drop_table(&t.def.name, true)? {
                    dropped += 1;
                }
            }
            meta::forget_database(s.ndb.cluster(), &name);
            if s.vars
                .db
                .as_deref()
                .is_some_and(|d| d.eq_ignore_ascii_case(&name))
            {
                s.vars.db = None;
            }
            Ok(SqlResult::ok(dropped))
        }
        Command::DropTables { tables, if_exists } => {
            let mut missing = Vec::new();
            for t in &tables {
                let db = s.db_of(t)?;
                if meta::is_virtual(&db) {
                    return Err(errors::app(
                        1044,
                        format!(
                            "Access denied for user 'root'@'localhost' to database '{}'",
                            db.to_ascii_lowercase()
                        ),
                    ));
                }
                let ndb = s.ndb_for(&db);
                if ndb.drop_table(&t.name, true)? {
                    meta::forget_table(s.ndb.cluster(), &db, &t.name);
                } else {
                    missing.push(format!("{db}.{}", t.name));
                }
            }
            if !missing.is_empty() && !if_exists {
                return Err(errors::sql_error(
                    723,
                    crate::error::ErrorClassification::SchemaError,
                    "No such table existed",
                    1051,
                    format!("Unknown table '{}'", missing.join(",")),
                ));
            }
            Ok(SqlResult::ok(0))
        }
        Command::Truncate(t) => {
            let (db, table) = ndb_table(s, &t)?;
            let cluster = s.ndb.cluster().clone();
            let m = meta::table(&cluster, &db, &table.def.name, table.def.id);
            s.ndb_for(&db).truncate_table(&table.def.name)?;
            // TRUNCATE gives the table a new id (NDB: drop + create); its SQL metadata
            // follows it.
            if let Some(mut m) = m {
                m.table_id = s.table(&db, &table.def.name)?.def.id;
                meta::set_table(&cluster, &db, &table.def.name, m)?;
            }
            Ok(SqlResult::ok(0))
        }
        Command::CreateIndex { table, index } => {
            add_index(s, &table, index)?;
            Ok(records0())
        }
        Command::DropIndex { table, name } => {
            drop_index(s, &table, &name)?;
            Ok(records0())
        }
        Command::AlterTable { table, actions } => {
            let (_, rt) = ndb_table(s, &table)?;
            for a in actions {
                match a {
                    AlterAction::AddIndex(ix) => add_index(s, &table, ix)?,
                    AlterAction::DropIndex(n) => drop_index(s, &table, &n)?,
                    AlterAction::Engine(e) => check_engine(&e)?,
                    AlterAction::AutoIncrement(n) => {
                        rt.auto_increment.fetch_max(n.max(1), Ordering::AcqRel);
                    }
                    AlterAction::Nothing => {}
                }
            }
            Ok(records0())
        }
        other => Err(errors::unsupported(format!("{other:?}"))),
    }
}

fn records0() -> SqlResult {
    SqlResult::Affected {
        rows: 0,
        last_insert_id: None,
        info: Some("Records: 0  Duplicates: 0  Warnings: 0".into()),
    }
}

/// An NDB table named in a statement (not virtual).
fn ndb_table(s: &Session, t: &TableName) -> Result<(String, Arc<TableRuntime>)> {
    let db = s.db_of(t)?;
    if meta::is_virtual(&db) {
        return Err(errors::read_only(&t.name));
    }
    let rt = s.table(&db, &t.name)?;
    Ok((db, rt))
}

/// Whether a new table logs: MySQL's `COMMENT="NDB_TABLE=NOLOGGING=1"` table option,
/// else the session's `ndb_table_no_logging`. Other `NDB_TABLE=` options
/// (READ_BACKUP, PARTITION_BALANCE, FULLY_REPLICATED) are refused with MySQL's 1478:
/// rndb does not implement them.
fn table_logging(s: &Session, comment: Option<&str>) -> Result<bool> {
    let from_session = !s
        .vars
        .sys
        .get("ndb_table_no_logging")
        .and_then(eval::truth)
        .unwrap_or(false);
    let Some(options) = comment.and_then(|c| {
        let c = c.trim_start();
        c.get(..10)
            .filter(|head| head.eq_ignore_ascii_case("NDB_TABLE="))
            .map(|_| &c[10..])
    }) else {
        return Ok(from_session);
    };
    let illegal = |what: &str| {
        errors::app(
            1478,
            format!(
                "Table storage engine 'ndbcluster' does not support the create option '{what}'"
            ),
        )
    };
    let mut logging = from_session;
    for option in options.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (name, value) = option
            .split_once('=')
            .ok_or_else(|| illegal("Syntax error in COMMENT modifier"))?;
        let on = match value.trim().to_ascii_uppercase().as_str() {
            "1" | "TRUE" => true,
            "0" | "FALSE" => false,
            _ => return Err(illegal("Syntax error in COMMENT modifier")),
        };
        match name.trim().to_ascii_uppercase().as_str() {
            "NOLOGGING" => logging = !on,
            "READ_BACKUP" | "PARTITION_BALANCE" | "FULLY_REPLICATED" => {
                return Err(illegal(&format!("NDB_TABLE={} (not in rndb)", name.trim())));
            }
            _ => return Err(illegal("Syntax error in COMMENT modifier")),
        }
    }
    Ok(logging)
}

fn check_engine(e: &str) -> Result<()> {
    if matches!(e.to_ascii_lowercase().as_str(), "ndb" | "ndbcluster") {
        Ok(())
    } else {
        Err(errors::app(1286, format!("Unknown storage engine '{e}'")))
    }
}

/// The collation MySQL shows for a character set.
pub(crate) fn collation(cs: Charset) -> &'static str {
    match cs {
        Charset::Latin1 => "latin1_swedish_ci",
        Charset::Utf8mb3 => "utf8mb3_general_ci",
        Charset::Utf8mb4 => "utf8mb4_0900_ai_ci",
    }
}

fn resolve_type(c: &ColumnSpec, table_cs: Charset) -> Result<ColumnType> {
    let cs = c.charset.unwrap_or(table_cs);
    Ok(match c.ty {
        TypeSpec::Plain(t) => t,
        TypeSpec::Char(n) => {
            if n > 255 {
                return Err(super::ddl::too_long_col(&c.name, 255));
            }
            ColumnType::Char {
                len: n,
                charset: cs,
            }
        }
        TypeSpec::Varchar(n) => {
            let max = 65535 / cs.max_bytes_per_char();
            if n > max {
                return Err(super::ddl::too_long_col(&c.name, max as u64));
            }
            ColumnType::Varchar {
                len: n,
                charset: cs,
            }
        }
        TypeSpec::Text(kind) => ColumnType::Blob {
            kind,
            charset: Some(cs),
        },
    })
}

fn find<'c>(cols: &'c [Column], name: &str) -> Option<(usize, &'c Column)> {
    cols.iter()
        .enumerate()
        .find(|(_, c)| c.name.eq_ignore_ascii_case(name))
}

fn key_columns_check(cols: &[Column], names: &[String]) -> Result<()> {
    for n in names {
        let Some((_, c)) = find(cols, n) else {
            return Err(errors::app(
                1072,
                format!("Key column '{n}' doesn't exist in table"),
            ));
        };
        if c.ty.is_blob() {
            return Err(errors::app(
                1170,
                format!(
                    "BLOB/TEXT column '{}' used in key specification without a key length",
                    c.name
                ),
            ));
        }
    }
    Ok(())
}

/// A free index name: `base`, else `base_2`, `base_3`... (MySQL's default naming).
fn free_name(base: &str, taken: &[String]) -> String {
    let used = |n: &str| taken.iter().any(|t| t.eq_ignore_ascii_case(n));
    if !used(base) {
        return base.to_string();
    }
    (2..)
        .map(|i| format!("{base}_{i}"))
        .find(|n| !used(n))
        .unwrap_or_else(|| base.to_string())
}

fn create_table(s: &mut Session, ct: CreateTable) -> Result<SqlResult> {
    let db = s.db_of(&ct.table)?;
    if meta::is_virtual(&db) {
        return Err(errors::app(
            1044,
            format!(
                "Access denied for user 'root'@'localhost' to database '{}'",
                db.to_ascii_lowercase()
            ),
        ));
    }
    if !meta::database_exists(s.ndb.cluster(), &db) {
        return Err(errors::unknown_database(&db));
    }
    if let Some(e) = &ct.engine {
        check_engine(e)?;
    }
    let table_disk = ct.storage == Some(StorageType::Disk);
    let explicit_disk = ct
        .columns
        .iter()
        .any(|c| c.storage == Some(StorageType::Disk));
    if (table_disk || explicit_disk) && ct.tablespace.is_none() {
        return Err(errors::invalid_tablespace(
            "STORAGE DISK needs a tablespace (TABLESPACE ts STORAGE DISK)",
        ));
    }
    let name = ct.table.name.clone();
    if name.is_empty() || name.len() > 64 {
        return Err(errors::app(1103, format!("Incorrect table name '{name}'")));
    }
    if s.table(&db, &name).is_ok() {
        if ct.if_not_exists {
            return Ok(SqlResult::ok(0));
        }
        return Err(errors::schema(
            1050,
            format!("Table '{name}' already exists"),
        ));
    }
    if ct.columns.is_empty() {
        return Err(errors::app(1113, "A table must have at least 1 column"));
    }
    let logging = table_logging(s, ct.comment.as_deref())?;
    let table_cs = ct.charset.unwrap_or(crate::api::dict::DEFAULT_CHARSET);
    let mut meta = TableMeta {
        charset: Some(table_cs),
        comment: ct.comment.clone(),
        ..TableMeta::default()
    };
    let mut columns: Vec<Column> = Vec::with_capacity(ct.columns.len());
    let mut indexes: Vec<IndexSpec> = Vec::new();
    for c in &ct.columns {
        if find(&columns, &c.name).is_some() {
            return Err(errors::app(
                1060,
                format!("Duplicate column name '{}'", c.name),
            ));
        }
        if c.name.is_empty() || c.name.len() > 64 || c.name.ends_with(' ') {
            return Err(errors::app(
                1166,
                format!("Incorrect column name '{}'", c.name),
            ));
        }
        let ty = resolve_type(c, table_cs)?;
        let mut col = Column::new(c.name.clone(), ty);
        col.nullable = c.nullable.unwrap_or(true) && !c.primary_key;
        col.auto_increment = c.auto_increment;
        if c.auto_increment {
            if !ty.is_integer() {
                return Err(errors::app(
                    1063,
                    format!("Incorrect column specifier for column '{}'", c.name),
                ));
            }
            col.nullable = false;
        }
        match &c.default {
            None => {}
            Some(DefaultSpec::Now) => {
                if !matches!(ty, ColumnType::Datetime | ColumnType::Timestamp) {
                    return Err(errors::app(
                        1067,
                        format!("Invalid default value for '{}'", c.name),
                    ));
                }
                meta.default_now.push(c.name.to_ascii_lowercase());
            }
            Some(DefaultSpec::Value(v)) => {
                if v.is_null() {
                    if c.nullable == Some(false) || c.primary_key {
                        return Err(errors::app(
                            1067,
                            format!("Invalid default value for '{}'", c.name),
                        ));
                    }
                } else {
                    if ty.is_blob() {
                        return Err(errors::app(
                            1101,
                            format!(
                                "BLOB, TEXT, GEOMETRY or JSON column '{}' can't have a default value",
                                c.name
                            ),
                        ));
                    }
                    if c.auto_increment {
                        return Err(errors::app(
                            1067,
                            format!("Invalid default value for '{}'", c.name),
                        ));
                    }
                    let d = assign(v.clone(), &col, 1, true).map_err(|_| {
                        errors::app(1067, format!("Invalid default value for '{}'", c.name))
                    })?;
                    col.default = Some(d);
                }
            }
        }
        if c.on_update_now {
            if !matches!(ty, ColumnType::Datetime | ColumnType::Timestamp) {
                return Err(errors::app(
                    1294,
                    format!("Invalid ON UPDATE clause for '{}' column", c.name),
                ));
            }
            meta.on_update_now.push(c.name.to_ascii_lowercase());
        }
        if let Some(cm) = &c.comment {
            meta.column_comments
                .insert(c.name.to_ascii_lowercase(), cm.clone());
        }
        if c.primary_key {
            indexes.push(IndexSpec {
                name: None,
                kind: IndexType::Primary,
                columns: vec![c.name.clone()],
                using_hash: c.pk_using_hash,
            });
        }
        if c.unique {
            indexes.push(IndexSpec {
                name: None,
                kind: IndexType::Unique,
                columns: vec![c.name.clone()],
                using_hash: false,
            });
        }
        columns.push(col);
    }
    if columns.iter().filter(|c| c.auto_increment).count() > 1 {
        return Err(errors::app(
            1075,
            "Incorrect table definition; there can be only one auto column and it must be defined as a key",
        ));
    }
    indexes.extend(ct.indexes.iter().cloned());
    let pks: Vec<&IndexSpec> = indexes
        .iter()
        .filter(|i| i.kind == IndexType::Primary)
        .collect();
    if pks.len() > 1 {
        return Err(errors::app(1068, "Multiple primary key defined"));
    }
    let pk: Vec<String> = pks.first().map(|p| p.columns.clone()).unwrap_or_default();
    let pk_hash_only = pks.first().is_some_and(|p| p.using_hash);
    key_columns_check(&columns, &pk)?;
    for p in &pk {
        if let Some((i, _)) = find(&columns, p) {
            columns[i].nullable = false;
            if columns[i].default.as_ref().is_some_and(|d| d.is_null()) {
                columns[i].default = None;
            }
        }
    }
    let mut engine_indexes: Vec<(String, IndexKind, Vec<String>)> = Vec::new();
    let mut sql_names: Vec<String> = vec!["PRIMARY".into()];
    if !pk.is_empty() && !pk_hash_only {
        engine_indexes.push(("PRIMARY".into(), IndexKind::OrderedIndex, pk.clone()));
    }
    for ix in indexes.iter().filter(|i| i.kind != IndexType::Primary) {
        key_columns_check(&columns, &ix.columns)?;
        let name = match &ix.name {
            Some(n) => {
                if n.eq_ignore_ascii_case("PRIMARY") {
                    return Err(errors::app(1280, format!("Incorrect index name '{n}'")));
                }
                if sql_names.iter().any(|x| x.eq_ignore_ascii_case(n)) {
                    return Err(errors::app(1061, format!("Duplicate key name '{n}'")));
                }
                n.clone()
            }
            None => free_name(&ix.columns[0], &sql_names),
        };
        sql_names.push(name.clone());
        match ix.kind {
            IndexType::Unique => {
                engine_indexes.push((
                    format!("{name}{UNIQUE_INDEX_SUFFIX}"),
                    IndexKind::UniqueHashIndex,
                    ix.columns.clone(),
                ));
                if !ix.using_hash {
                    engine_indexes.push((name, IndexKind::OrderedIndex, ix.columns.clone()));
                }
            }
            _ => {
                if ix.using_hash {
                    return Err(errors::unsupported(
                        "non-unique hash indexes (KEY ... USING HASH)",
                    ));
                }
                engine_indexes.push((name, IndexKind::OrderedIndex, ix.columns.clone()));
            }
        }
    }
    if let Some(ai) = columns.iter().find(|c| c.auto_increment) {
        let first_of_key = pk.first().is_some_and(|p| p.eq_ignore_ascii_case(&ai.name))
            || engine_indexes
                .iter()
                .any(|(_, _, cols)| cols[0].eq_ignore_ascii_case(&ai.name));
        if !first_of_key {
            return Err(errors::app(
                1075,
                "Incorrect table definition; there can be only one auto column and it must be defined as a key",
            ));
        }
    }
    meta.pk_hash_only = pk_hash_only;
    let mut spec = TableSpec {
        name: name.clone(),
        columns,
        primary_key: pk,
        indexes: engine_indexes,
        logging,
        if_not_exists: false,
        tablespace: ct.tablespace.clone(),
    };
    let explicit: Vec<Option<StorageType>> = ct.columns.iter().map(|c| c.storage).collect();
    spec.place_columns(&explicit, table_disk)?;
    let rt = s.ndb_for(&db).create_table(spec).map_err(|e| {
        if e.code == 721 {
            errors::schema(1050, format!("Table '{name}' already exists"))
        } else {
            e
        }
    })?;
    if let Some(n) = ct.auto_increment {
        rt.auto_increment.store(n.max(1), Ordering::Release);
    }
    meta.table_id = rt.def.id;
    meta::set_table(s.ndb.cluster(), &db, &rt.def.name, meta)?;
    Ok(SqlResult::ok(0))
}

/// SQL-level indexes of a table: (name, unique, columns, using hash).
pub(crate) fn sql_indexes(
    def: &TableDef,
    pk_hash_only: bool,
) -> Vec<(String, bool, Vec<usize>, bool)> {
    let mut out = Vec::new();
    if !def.has_hidden_pk() {
        let ordered = def.index("PRIMARY").is_some();
        out.push((
            "PRIMARY".to_string(),
            true,
            def.primary_key.clone(),
            pk_hash_only || !ordered,
        ));
    }
    for ix in &def.indexes {
        if ix.name.eq_ignore_ascii_case("PRIMARY") {
            continue;
        }
        if let Some(base) = ix.name.strip_suffix(UNIQUE_INDEX_SUFFIX) {
            let ordered = def.index(base).is_some();
            out.push((base.to_string(), true, ix.columns.clone(), !ordered));
        } else if ix.kind == IndexKind::OrderedIndex {
            let has_unique = def
                .index(&format!("{}{UNIQUE_INDEX_SUFFIX}", ix.name))
                .is_some();
            if !has_unique {
                out.push((ix.name.clone(), false, ix.columns.clone(), false));
            }
        }
    }
    out
}

fn add_index(s: &mut Session, t: &TableName, ix: IndexSpec) -> Result<()> {
    let (db, rt) = ndb_table(s, t)?;
    let def = rt.def.clone();
    if ix.kind == IndexType::Primary {
        return Err(errors::unsupported("adding a PRIMARY KEY"));
    }
    let cols = def
        .columns
        .iter()
        .filter(|c| !c.hidden)
        .cloned()
        .collect::<Vec<_>>();
    key_columns_check(&cols, &ix.columns)?;
    let meta_row = meta::table(s.ndb.cluster(), &db, &def.name, def.id);
    let taken: Vec<String> = sql_indexes(&def, meta_row.is_some_and(|m| m.pk_hash_only))
        .into_iter()
        .map(|(n, ..)| n)
        .collect();
    let name = match &ix.name {
        Some(n) => {
            if n.eq_ignore_ascii_case("PRIMARY") {
                return Err(errors::app(1280, format!("Incorrect index name '{n}'")));
            }
            if taken.iter().any(|x| x.eq_ignore_ascii_case(n)) || def.index(n).is_some() {
                return Err(errors::app(1061, format!("Duplicate key name '{n}'")));
            }
            n.clone()
        }
        None => free_name(&ix.columns[0], &taken),
    };
    let ndb = s.ndb_for(&db);
    let full = |e: crate::error::NdbError| {
        if matches!(e.code, 827 | 625 | 902) {
            errors::table_full(e, &def.name)
        } else {
            e
        }
    };
    match ix.kind {
        IndexType::Unique => {
            let uname = format!("{name}{UNIQUE_INDEX_SUFFIX}");
            ndb.create_index(&def.name, &uname, IndexKind::UniqueHashIndex, &ix.columns)
                .map_err(|e| {
                    if e.code == 893 {
                        errors::duplicate_entry(e, "", &name)
                    } else {
                        full(e)
                    }
                })?;
            if !ix.using_hash
                && let Err(e) =
                    ndb.create_index(&def.name, &name, IndexKind::OrderedIndex, &ix.columns)
            {
                let _ = ndb.drop_index(&def.name, &uname);
                return Err(full(e));
            }
        }
        _ => {
            if ix.using_hash {
                return Err(errors::unsupported(
                    "non-unique hash indexes (KEY ... USING HASH)",
                ));
            }
            ndb.create_index(&def.name, &name, IndexKind::OrderedIndex, &ix.columns)
                .map_err(full)?;
        }
    }
    Ok(())
}

fn drop_index(s: &mut Session, t: &TableName, name: &str) -> Result<()> {
    let (db, rt) = ndb_table(s, t)?;
    if name.eq_ignore_ascii_case("PRIMARY") {
        return Err(errors::unsupported("dropping the PRIMARY KEY"));
    }
    let def = rt.def.clone();
    let mut targets = Vec::new();
    if let Some((_, ix)) = def.index(name) {
        targets.push(ix.name.clone());
    }
    if let Some((_, ix)) = def.index(&format!("{name}{UNIQUE_INDEX_SUFFIX}")) {
        targets.push(ix.name.clone());
    }
    if targets.is_empty() || name.ends_with(UNIQUE_INDEX_SUFFIX) {
        return Err(errors::app(
            1091,
            format!("Can't DROP '{name}'; check that column/key exists"),
        ));
    }
    let ndb = s.ndb_for(&db);
    for n in targets {
        ndb.drop_index(&def.name, &n)?;
    }
    Ok(())
}

fn maintenance(s: &mut Session, op: &str, tables: &[TableName]) -> Result<SqlResult> {
    let mut rows = Vec::new();
    let st = |x: &str| Value::Str(x.to_string());
    for t in tables {
        let db = s.db_of(t)?;
        let full = format!("{db}.{}", t.name);
        match s.table(&db, &t.name) {
            Ok(table) if op == "optimize" => {
                let opts = OptimizeOptions {
                    delay_ms: optimization_delay_ms(s)?,
                    ..OptimizeOptions::default()
                };
                match s.ndb.optimize_table(&table, opts) {
                    Ok(r) => {
                        rows.push(vec![st(&full), st(op), st("note"), st(&optimize_note(&r))]);
                        rows.push(vec![st(&full), st(op), st("status"), st("OK")]);
                    }
                    Err(e) => {
                        rows.push(vec![
                            st(&full),
                            st(op),
                            st("Error"),
                            st(&format!(
                                "Got error {} '{}' from NDBCLUSTER",
                                e.code, e.message
                            )),
                        ]);
                        rows.push(vec![
                            st(&full),
                            st(op),
                            st("status"),
                            st("Operation failed"),
                        ]);
                    }
                }
            }
            // ANALYZE: index statistics are not kept; say so, as MySQL does for an
            // engine without the operation.
            Ok(_) => rows.push(vec![
                st(&full),
                st(op),
                st("note"),
                st(&format!(
                    "The storage engine for the table doesn't support {op}"
                )),
            ]),
            Err(_) => {
                rows.push(vec![
                    st(&full),
                    st(op),
                    st("Error"),
                    st(&format!("Table '{full}' doesn't exist")),
                ]);
                rows.push(vec![
                    st(&full),
                    st(op),
                    st("status"),
                    st("Operation failed"),
                ]);
            }
        }
    }
    Ok(SqlResult::Rows {
        columns: ["Table", "Op", "Msg_type", "Msg_text"]
            .iter()
            .map(|x| x.to_string())
            .collect(),
        rows,
    })
}

/// `ndb_optimization_delay` (ms between OPTIMIZE's batches), clamped to MySQL's range
/// 0..100000 as MySQL clamps the variable.
fn optimization_delay_ms(s: &Session) -> Result<u64> {
    match s.vars.sys.get("ndb_optimization_delay") {
        Some(Value::Int(ms)) => Ok((*ms).clamp(0, 100_000) as u64),
        Some(Value::UInt(ms)) => Ok((*ms).min(100_000)),
        None => Ok(crate::api::optimize::DEFAULT_OPTIMIZATION_DELAY_MS),
        Some(other) => Err(codes::bad_argument(format!(
            "ndb_optimization_delay must be a number of ms (0..100000), not {other:?}"
        ))),
    }
}

/// The note OPTIMIZE TABLE prints before its status: what moved and what came back.
fn optimize_note(r: &OptimizeReport) -> String {
    let st = &r.stats;
    let mut note = format!(
        "{} rows and {} var parts moved, {} index leaves packed away in {}.{:02} sec; {} DataMemory pages given back (fixed {} -> {}, var {} -> {}, ordered index {} -> {}, hash index {})",
        st.rows_moved,
        st.var_parts_moved,
        st.index_leaves_freed,
        r.elapsed_ms / 1000,
        r.elapsed_ms % 1000 / 10,
        r.pages_freed(),
        st.fixed_pages_before,
        st.fixed_pages_after,
        st.var_pages_before,
        st.var_pages_after,
        st.ordered_pages_before,
        st.ordered_pages_after,
        st.hash_pages_freed,
    );
    if st.extents_before > 0 {
        note.push_str(&format!(
            "; {} disk records moved, {} extents given back to the tablespace ({} -> {})",
            st.disk_records_moved,
            st.extents_before.saturating_sub(st.extents_after),
            st.extents_before,
            st.extents_after
        ));
    }
    if st.rows_locked > 0 {
        note.push_str(&format!(
            "; {} rows held by transactions stayed",
            st.rows_locked
        ));
    }
    if r.replicas_busy > 0 {
        note.push_str(&format!(
            "; {} fragment replicas kept their rows in place (scans were open): run OPTIMIZE TABLE again",
            r.replicas_busy
        ));
    }
    note
}

fn like_ok(name: &str, like: Option<&str>) -> bool {
    like.is_none_or(|p| eval::like(&name.to_lowercase(), &p.to_lowercase(), '\\'))
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn show(s: &mut Session, what: ShowWhat, like: Option<&str>) -> Result<SqlResult> {
    let st = |x: &str| Value::Str(x.to_string());
    let (columns, rows): (Vec<String>, Vec<Vec<Value>>) = match what {
        ShowWhat::Tables { db, full } => {
            let db = match db {
                Some(d) => d,
                None => s.vars.db.clone().ok_or_else(errors::no_database)?,
            };
            if !meta::database_exists(s.ndb.cluster(), &db) {
                return Err(errors::unknown_database(&db));
            }
            let (names, kind): (Vec<String>, &str) = if meta::is_virtual(&db) {
                let mut n: Vec<String> = if db.eq_ignore_ascii_case("ndbinfo") {
                    crate::ndbinfo::table_names()
                        .into_iter()
                        .map(|x| x.to_string())
                        .collect()
                } else {
                    ["engines", "files", "schemata", "tables", "columns"]
                        .iter()
                        .filter(|t| {
                            crate::ndbinfo::lookup(s.ndb.cluster(), "information_schema", t)
                                .is_some()
                        })
                        .map(|x| x.to_uppercase())
                        .collect()
                };
                n.sort();
                (n, "SYSTEM VIEW")
            } else {
                let mut n: Vec<String> = s
                    .ndb_for(&db)
                    .tables()
                    .into_iter()
                    .map(|t| t.def.name.clone())
                    .collect();
                n.sort();
                (n, "BASE TABLE")
            };
            let mut header = format!("Tables_in_{db}");
            if let Some(p) = like {
                header.push_str(&format!(" ({p})"));
            }
            let mut cols = vec![header];
            if full {
                cols.push("Table_type".into());
            }
            let rows = names
                .into_iter()
                .filter(|n| like_ok(n, like))
                .map(|n| {
                    let mut r = vec![Value::Str(n)];
                    if full {
                        r.push(st(kind));
                    }
                    r
                })
                .collect();
            (cols, rows)
        }
        ShowWhat::Databases => {
            let header = match like {
                Some(p) => format!("Database ({p})"),
                None => "Database".into(),
            };
            let rows = meta::databases(s.ndb.cluster())
                .into_iter()
                .filter(|d| like_ok(d, like))
                .map(|d| vec![Value::Str(d)])
                .collect();
            (vec![header], rows)
        }
        ShowWhat::Columns { table, full } => show_columns(s, &table, full, like)?,
        ShowWhat::CreateTable(t) => {
            let (db, rt) = ndb_table(s, &t)?;
            let m = meta::table(s.ndb.cluster(), &db, &rt.def.name, rt.def.id);
            (
                strs(&["Table", "Create Table"]),
                vec![vec![
                    st(&rt.def.name),
                    Value::Str(show_create(&rt, m.as_ref())),
                ]],
            )
        }
        ShowWhat::CreateDatabase(db) => {
            if !meta::database_exists(s.ndb.cluster(), &db) {
                return Err(errors::unknown_database(&db));
            }
            (
                strs(&["Database", "Create Database"]),
                vec![vec![
                    st(&db),
                    Value::Str(format!(
                        "CREATE DATABASE `{db}` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci */ /*!80016 DEFAULT ENCRYPTION='N' */"
                    )),
                ]],
            )
        }
        ShowWhat::Index(t) => {
            let (db, rt) = ndb_table(s, &t)?;
            let def = &rt.def;
            let m = meta::table(s.ndb.cluster(), &db, &def.name, def.id);
            let count = rt.row_count();
            let mut rows = Vec::new();
            for (name, unique, cols, hash) in sql_indexes(def, m.is_some_and(|m| m.pk_hash_only)) {
                for (seq, &c) in cols.iter().enumerate() {
                    let col = &def.columns[c];
                    rows.push(vec![
                        st(&def.name),
                        Value::Int(!unique as i64),
                        st(&name),
                        Value::Int(seq as i64 + 1),
                        st(&col.name),
                        if hash { Value::Null } else { st("A") },
                        if unique {
                            Value::UInt(count)
                        } else {
                            Value::Null
                        },
                        Value::Null,
                        Value::Null,
                        st(if col.nullable { "YES" } else { "" }),
                        st(if hash { "HASH" } else { "BTREE" }),
                        st(""),
                        st(""),
                        st("YES"),
                        Value::Null,
                    ]);
                }
            }
            (
                strs(&[
                    "Table",
                    "Non_unique",
                    "Key_name",
                    "Seq_in_index",
                    "Column_name",
                    "Collation",
                    "Cardinality",
                    "Sub_part",
                    "Packed",
                    "Null",
                    "Index_type",
                    "Comment",
                    "Index_comment",
                    "Visible",
                    "Expression",
                ]),
                rows,
            )
        }
        ShowWhat::Variables => {
            let mut names: Vec<(&String, &Value)> = s.vars.sys.iter().collect();
            names.sort_by(|a, b| a.0.cmp(b.0));
            let rows = names
                .into_iter()
                .filter(|(n, _)| like_ok(n, like))
                .map(|(n, v)| {
                    vec![
                        Value::Str(n.clone()),
                        Value::Str(match (n.as_str(), v) {
                            (_, Value::Int(1))
                                if matches!(
                                    n.as_str(),
                                    "autocommit"
                                        | "ndb_use_transactions"
                                        | "foreign_key_checks"
                                        | "unique_checks"
                                        | "sql_log_bin"
                                ) =>
                            {
                                "ON".into()
                            }
                            (_, Value::Int(0))
                                if matches!(
                                    n.as_str(),
                                    "autocommit"
                                        | "ndb_use_transactions"
                                        | "foreign_key_checks"
                                        | "unique_checks"
                                        | "sql_log_bin"
                                ) =>
                            {
                                "OFF".into()
                            }
                            _ => eval::to_text(v).unwrap_or_default(),
                        }),
                    ]
                })
                .collect();
            (strs(&["Variable_name", "Value"]), rows)
        }
        ShowWhat::Status => {
            let c = s.ndb.cluster();
            let vals: Vec<(&str, Value)> = vec![
                ("Ndb_cluster_connection_pool", Value::UInt(1)),
                (
                    "Ndb_number_of_data_nodes",
                    Value::UInt(c.data_nodes.len() as u64),
                ),
                (
                    "Ndb_api_trans_start_count",
                    Value::UInt(c.transactions_started.load(Ordering::Relaxed)),
                ),
                (
                    "Ndb_api_trans_commit_count",
                    Value::UInt(c.transactions_committed.load(Ordering::Relaxed)),
                ),
                (
                    "Ndb_api_trans_abort_count",
                    Value::UInt(c.transactions_aborted.load(Ordering::Relaxed)),
                ),
                ("Threads_connected", Value::UInt(1)),
                ("Uptime", Value::UInt(c.uptime_secs())),
            ];
            let rows = vals
                .into_iter()
                .filter(|(n, _)| like_ok(n, like))
                .map(|(n, v)| vec![st(n), Value::Str(v.to_string())])
                .collect();
            (strs(&["Variable_name", "Value"]), rows)
        }
        ShowWhat::Warnings => (strs(&["Level", "Code", "Message"]), Vec::new()),
        ShowWhat::Engines => (
            strs(&[
                "Engine",
                "Support",
                "Comment",
                "Transactions",
                "XA",
                "Savepoints",
            ]),
            vec![
                vec![
                    st("ndbcluster"),
                    st("DEFAULT"),
                    st("Clustered, fault-tolerant tables"),
                    st("YES"),
                    st("NO"),
                    st("NO"),
                ],
                vec![
                    st("ndbinfo"),
                    st("YES"),
                    st("MySQL Cluster system information storage engine"),
                    st("NO"),
                    st("NO"),
                    st("NO"),
                ],
            ],
        ),
    };
    Ok(SqlResult::Rows { columns, rows })
}

fn key_flag(def: &TableDef, c: usize, pk_hash_only: bool) -> &'static str {
    if def.columns[c].primary_key && !def.columns[c].hidden {
        return "PRI";
    }
    let ix = sql_indexes(def, pk_hash_only);
    if ix
        .iter()
        .any(|(_, unique, cols, _)| *unique && cols.len() == 1 && cols[0] == c)
    {
        return "UNI";
    }
    if ix.iter().any(|(_, _, cols, _)| cols[0] == c) {
        return "MUL";
    }
    ""
}

fn default_text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => eval::to_text(other).unwrap_or_default(),
    }
}

fn show_columns(
    s: &Session,
    t: &TableName,
    full: bool,
    like: Option<&str>,
) -> Result<(Vec<String>, Vec<Vec<Value>>)> {
    let st = |x: &str| Value::Str(x.to_string());
    let mut cols = vec!["Field", "Type"];
    if full {
        cols.push("Collation");
    }
    cols.extend(["Null", "Key", "Default", "Extra"]);
    if full {
        cols.extend(["Privileges", "Comment"]);
    }
    let db = s.db_of(t)?;
    if meta::is_virtual(&db) {
        let src = super::select::resolve(s, Some(t))?;
        let super::select::Source::Virtual { columns, rows, .. } = src else {
            return Err(errors::no_such_table(&db, &t.name));
        };
        let mut out = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            if !like_ok(c, like) {
                continue;
            }
            let ty = match rows
                .iter()
                .map(|r| r.get(i))
                .find(|v| v.is_some_and(|v| !v.is_null()))
            {
                Some(Some(Value::UInt(_))) => "bigint unsigned",
                Some(Some(Value::Int(_))) => "bigint",
                Some(Some(Value::Double(_))) | Some(Some(Value::Float(_))) => "double",
                Some(Some(Value::Decimal(_))) => "decimal(65,30)",
                _ => "varchar(512)",
            };
            let mut r = vec![st(c), st(ty)];
            if full {
                r.push(Value::Null);
            }
            r.extend([st("YES"), st(""), Value::Null, st("")]);
            if full {
                r.extend([st("select"), st("")]);
            }
            out.push(r);
        }
        return Ok((strs(&cols), out));
    }
    let rt = s.table(&db, &t.name)?;
    let def = &rt.def;
    let m = meta::table(s.ndb.cluster(), &db, &def.name, def.id).unwrap_or_default();
    let mut out = Vec::new();
    for (i, c) in def.visible_columns() {
        if !like_ok(&c.name, like) {
            continue;
        }
        let lname = c.name.to_ascii_lowercase();
        let now_default = m.default_now.contains(&lname);
        let on_update = m.on_update_now.contains(&lname);
        let default = if now_default {
            st("CURRENT_TIMESTAMP")
        } else {
            match &c.default {
                Some(v) if !v.is_null() => Value::Str(default_text(v)),
                _ => Value::Null,
            }
        };
        let mut extra = Vec::new();
        if c.auto_increment {
            extra.push("auto_increment");
        }
        if now_default {
            extra.push("DEFAULT_GENERATED");
        }
        if on_update {
            extra.push("on update CURRENT_TIMESTAMP");
        }
        let mut r = vec![st(&c.name), Value::Str(c.ty.to_string())];
        if full {
            r.push(match charset_of(&c.ty) {
                Some(cs) => st(collation(cs)),
                None => Value::Null,
            });
        }
        r.extend([
            st(if c.nullable { "YES" } else { "NO" }),
            st(key_flag(def, i, m.pk_hash_only)),
            default,
            Value::Str(extra.join(" ")),
        ]);
        if full {
            r.push(st("select,insert,update,references"));
            r.push(Value::Str(
                m.column_comments.get(&lname).cloned().unwrap_or_default(),
            ));
        }
        out.push(r);
    }
    Ok((strs(&cols), out))
}

fn charset_of(ty: &ColumnType) -> Option<Charset> {
    match ty {
        ColumnType::Char { charset, .. } | ColumnType::Varchar { charset, .. } => Some(*charset),
        ColumnType::Blob { charset, .. } => *charset,
        _ => None,
    }
}

fn quote_sql(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\'', "''")
}

/// SHOW CREATE TABLE text, as MySQL 8 prints it for an NDB table.
pub(crate) fn show_create(rt: &TableRuntime, m: Option<&TableMeta>) -> String {
    let def = &rt.def;
    let table_cs = m.and_then(|m| m.charset).unwrap_or_else(|| {
        def.columns
            .iter()
            .find_map(|c| charset_of(&c.ty))
            .unwrap_or(Charset::Utf8mb4)
    });
    // Disk data as mysqld prints it: the table's STORAGE DISK, and STORAGE MEMORY on the
    // columns of a disk table that stay in memory though no index needs them. A BLOB's
    // storage is that of its parts.
    let on_disk = |i: usize| {
        def.columns[i].storage == StorageType::Disk
            || rt
                .blob_tables
                .get(i)
                .and_then(|t| t.as_ref())
                .is_some_and(|t| t.def.layout.has_disk())
    };
    let table_disk = (0..def.columns.len()).any(on_disk);
    let indexed = |i: usize| {
        def.primary_key.contains(&i) || def.indexes.iter().any(|x| x.columns.contains(&i))
    };
    let mut lines = Vec::new();
    for (i, c) in def.columns.iter().enumerate().filter(|(_, c)| !c.hidden) {
        let lname = c.name.to_ascii_lowercase();
        let mut l = format!("  `{}` {}", c.name, c.ty);
        if let Some(cs) = charset_of(&c.ty)
            && cs != table_cs
        {
            l.push_str(&format!(
                " CHARACTER SET {} COLLATE {}",
                cs.name(),
                collation(cs)
            ));
        }
        if table_disk && !on_disk(i) && !indexed(i) {
            l.push_str(" /*!50120 STORAGE MEMORY */");
        }
        if !c.nullable {
            l.push_str(" NOT NULL");
        }
        let now_default = m.is_some_and(|m| m.default_now.contains(&lname));
        if now_default {
            l.push_str(" DEFAULT CURRENT_TIMESTAMP");
        } else {
            match &c.default {
                Some(v) if !v.is_null() => {
                    l.push_str(&format!(" DEFAULT '{}'", quote_sql(&default_text(v))))
                }
                _ if c.nullable && !c.ty.is_blob() => l.push_str(" DEFAULT NULL"),
                _ => {}
            }
        }
        if m.is_some_and(|m| m.on_update_now.contains(&lname)) {
            l.push_str(" ON UPDATE CURRENT_TIMESTAMP");
        }
        if c.auto_increment {
            l.push_str(" AUTO_INCREMENT");
        }
        if let Some(cm) = m.and_then(|m| m.column_comments.get(&lname)) {
            l.push_str(&format!(" COMMENT '{}'", quote_sql(cm)));
        }
        lines.push(l);
    }
    let names = |cols: &[usize]| {
        cols.iter()
            .map(|&c| format!("`{}`", def.columns[c].name))
            .collect::<Vec<_>>()
            .join(",")
    };
    for (name, unique, cols, hash) in sql_indexes(def, m.is_some_and(|m| m.pk_hash_only)) {
        let using = if hash { " USING HASH" } else { "" };
        lines.push(if name == "PRIMARY" {
            format!("  PRIMARY KEY ({}){using}", names(&cols))
        } else if unique {
            format!("  UNIQUE KEY `{name}` ({}){using}", names(&cols))
        } else {
            format!("  KEY `{name}` ({})", names(&cols))
        });
    }
    let disk_options = match (&def.tablespace, table_disk) {
        (Some(ts), true) => format!(" /*!50100 TABLESPACE `{ts}` STORAGE DISK */"),
        (Some(ts), false) => format!(" /*!50100 TABLESPACE `{ts}` */"),
        (None, _) => String::new(),
    };
    let mut out = format!(
        "CREATE TABLE `{}` (\n{}\n){disk_options} ENGINE=ndbcluster",
        def.name,
        lines.join(",\n")
    );
    let next = rt.auto_increment.load(Ordering::Acquire);
    if def
        .auto_increment_column()
        .is_some_and(|c| !def.columns[c].hidden)
        && next > 1
    {
        out.push_str(&format!(" AUTO_INCREMENT={next}"));
    }
    out.push_str(&format!(" DEFAULT CHARSET={}", table_cs.name()));
    if table_cs == Charset::Utf8mb4 {
        out.push_str(&format!(" COLLATE={}", collation(table_cs)));
    }
    if let Some(cm) = m.and_then(|m| m.comment.as_ref()) {
        out.push_str(&format!(" COMMENT='{}'", quote_sql(cm)));
    }
    out
}
