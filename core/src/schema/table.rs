//! Table, column and index definitions (DBDICT's view of a table).
//!
//! Invariants established by [`TableDef::new`]:
//! - column names are unique (case-insensitively), at most 512 columns (MAX_ATTRIBUTES_IN_TABLE);
//! - the primary key is non-empty (a table without one gets NDB's hidden `$PK`
//!   BIGINT UNSIGNED column, filled from an auto-increment counter), its columns are
//!   NOT NULL and not BLOB/TEXT;
//! - every index names existing, non-BLOB columns, at most 32 (MAX_ATTRIBUTES_IN_INDEX);
//! - `layout` is the row layout computed from the columns.

use super::layout::RowLayout;
use super::types::ColumnType;
use super::value::{Value, coerce};
use crate::error::{ErrorClassification, NdbError, Result, codes};

/// Name NDB gives the hidden primary key of a table created without one.
pub const HIDDEN_PK_NAME: &str = "$PK";
pub const MAX_ATTRIBUTES_IN_TABLE: usize = 512;
pub const MAX_ATTRIBUTES_IN_INDEX: usize = 32;

/// Where a column's data lives (NdbDictionary::Column::StorageType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StorageType {
    #[default]
    Memory,
    Disk,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    pub primary_key: bool,
    pub auto_increment: bool,
    /// Default value, already coerced to the column type.
    pub default: Option<Value>,
    pub storage: StorageType,
    /// NDB's hidden primary key: not shown by SELECT * or DESCRIBE.
    pub hidden: bool,
}

impl Column {
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: true,
            primary_key: false,
            auto_increment: false,
            default: None,
            storage: StorageType::Memory,
            hidden: false,
        }
    }
    pub fn not_null(mut self) -> Column {
        self.nullable = false;
        self
    }
    pub fn primary_key(mut self) -> Column {
        self.primary_key = true;
        self.nullable = false;
        self
    }
    pub fn auto_increment(mut self) -> Column {
        self.auto_increment = true;
        self
    }
    pub fn default_value(mut self, v: Value) -> Column {
        self.default = Some(v);
        self
    }
}

/// What mysqld appends to the name of the unique hash index of a UNIQUE KEY (NDB's
/// `NAME$unique`), and rndb's SQL with it.
pub const UNIQUE_INDEX_SUFFIX: &str = "$unique";

/// Kind of a secondary index (NdbDictionary::Index::Type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    OrderedIndex,
    UniqueHashIndex,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IndexDef {
    pub name: String,
    pub kind: IndexKind,
    /// Column positions in the table, in index order.
    pub columns: Vec<usize>,
}

/// A table definition with its computed row layout.
#[derive(Debug, Clone)]
pub struct TableDef {
    pub id: u32,
    pub name: String,
    pub columns: Vec<Column>,
    /// Column positions of the primary key, in key order.
    pub primary_key: Vec<usize>,
    pub indexes: Vec<IndexDef>,
    /// Number of partitions (fragments per replica set).
    pub partitions: u32,
    /// false for NDB's NoLogging (temporary) tables.
    pub logging: bool,
    /// Tablespace holding the disk columns (None for in-memory tables).
    pub tablespace: Option<String>,
    pub layout: RowLayout,
}

impl TableDef {
    /// Validates the definition and computes the layout. `pk_columns` names the primary
    /// key columns in order; empty means "columns marked primary_key in order of
    /// definition", and if there are none the hidden `$PK` is added.
    pub fn new(
        id: u32,
        name: &str,
        mut columns: Vec<Column>,
        pk_columns: &[String],
        indexes: Vec<(String, IndexKind, Vec<String>)>,
        partitions: u32,
    ) -> Result<TableDef> {
        if name.is_empty() || name.len() > 64 {
            return Err(codes::bad_argument(format!("invalid table name '{name}'")));
        }
        if columns.is_empty() {
            return Err(NdbError::new(
                4411,
                ErrorClassification::ApplicationError,
                "A table must have at least one column",
            ));
        }
        for (i, c) in columns.iter().enumerate() {
            if c.name.is_empty()
                || columns[..i]
                    .iter()
                    .any(|o| o.name.eq_ignore_ascii_case(&c.name))
            {
                return Err(NdbError::new(
                    4401,
                    ErrorClassification::ApplicationError,
                    "Duplicate column name",
                )
                .detail(&c.name)
                .with_mysql_code(1060));
            }
        }
        let mut pk: Vec<usize> = Vec::new();
        if pk_columns.is_empty() {
            pk.extend(
                columns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.primary_key)
                    .map(|(i, _)| i),
            );
        } else {
            for name in pk_columns {
                let pos = find_column(&columns, name).ok_or_else(|| codes::no_such_column(name))?;
                if pk.contains(&pos) {
                    return Err(codes::bad_argument(format!(
                        "column '{name}' appears twice in the primary key"
                    )));
                }
                pk.push(pos);
            }
        }
        if pk.is_empty() {
            let mut hidden = Column::new(
                HIDDEN_PK_NAME,
                ColumnType::Int {
                    bytes: 8,
                    unsigned: true,
                },
            )
            .primary_key()
            .auto_increment();
            hidden.hidden = true;
            columns.push(hidden);
            pk.push(columns.len() - 1);
        }
        if columns.len() > MAX_ATTRIBUTES_IN_TABLE {
            return Err(NdbError::new(
                4318,
                ErrorClassification::ApplicationError,
                "Invalid attribute count",
            )
            .detail(format!(
                "{} columns, at most {MAX_ATTRIBUTES_IN_TABLE}",
                columns.len()
            )));
        }
        for &p in &pk {
            let c = &mut columns[p];
            if c.ty.is_blob() {
                return Err(NdbError::new(
                    4335,
                    ErrorClassification::ApplicationError,
                    "BLOB/TEXT column cannot be part of the primary key",
                )
                .detail(&c.name)
                .with_mysql_code(1170));
            }
            c.primary_key = true;
            c.nullable = false;
            c.storage = StorageType::Memory;
        }
        if columns.iter().filter(|c| c.auto_increment).count() > 1 {
            return Err(
                codes::bad_argument("there can be only one AUTO_INCREMENT column")
                    .with_mysql_code(1075),
            );
        }
        for c in &mut columns {
            if c.auto_increment && !c.ty.is_integer() {
                return Err(codes::bad_argument(format!(
                    "AUTO_INCREMENT column '{}' must be an integer",
                    c.name
                )));
            }
            if let Some(d) = c.default.take() {
                let d = coerce(d, &c.ty, &c.name)?;
                if d.is_null() && !c.nullable {
                    return Err(codes::bad_argument(format!(
                        "invalid default value for '{}'",
                        c.name
                    ))
                    .with_mysql_code(1067));
                }
                c.default = Some(d);
            }
        }
        let mut index_defs: Vec<IndexDef> = Vec::new();
        for (iname, kind, cols) in indexes {
            if index_defs
                .iter()
                .any(|i| i.name.eq_ignore_ascii_case(&iname))
            {
                return Err(codes::index_exists(&iname));
            }
            index_defs.push(Self::index_def(&columns, &iname, kind, &cols)?);
        }
        let layout = RowLayout::new(&columns, &pk)?;
        Ok(TableDef {
            id,
            name: name.to_string(),
            columns,
            primary_key: pk,
            indexes: index_defs,
            partitions: partitions.max(1),
            logging: true,
            tablespace: None,
            layout,
        })
    }

    /// Validates one index definition against the columns.
    pub fn index_def(
        columns: &[Column],
        name: &str,
        kind: IndexKind,
        cols: &[String],
    ) -> Result<IndexDef> {
        if cols.is_empty() || cols.len() > MAX_ATTRIBUTES_IN_INDEX {
            return Err(codes::bad_argument(format!(
                "index '{name}' must have 1..{MAX_ATTRIBUTES_IN_INDEX} columns"
            )));
        }
        let mut positions = Vec::with_capacity(cols.len());
        for c in cols {
            let pos = find_column(columns, c).ok_or_else(|| codes::no_such_column(c))?;
            if columns[pos].ty.is_blob() {
                return Err(NdbError::new(
                    743,
                    ErrorClassification::SchemaError,
                    "Unsupported character set in table or index",
                )
                .detail(format!("BLOB/TEXT column '{c}' cannot be indexed"))
                .with_mysql_code(1170));
            }
            if columns[pos].storage == StorageType::Disk {
                return Err(NdbError::new(
                    756,
                    ErrorClassification::SchemaError,
                    "Index on disk column is not supported",
                )
                .detail(c));
            }
            if positions.contains(&pos) {
                return Err(codes::bad_argument(format!(
                    "column '{c}' appears twice in index '{name}'"
                )));
            }
            positions.push(pos);
        }
        Ok(IndexDef {
            name: name.to_string(),
            kind,
            columns: positions,
        })
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        find_column(&self.columns, name)
    }

    pub fn column(&self, name: &str) -> Result<(usize, &Column)> {
        let i = self
            .column_index(name)
            .ok_or_else(|| codes::no_such_column(name))?;
        Ok((i, &self.columns[i]))
    }

    pub fn index(&self, name: &str) -> Option<(usize, &IndexDef)> {
        self.indexes
            .iter()
            .enumerate()
            .find(|(_, i)| i.name.eq_ignore_ascii_case(name))
    }

    /// [`TableDef::index`] by the name an NDB API client gave: SQL names a unique hash
    /// index `NAME$unique` ([`UNIQUE_INDEX_SUFFIX`]), found by `NAME` too.
    pub fn index_by_api_name(&self, name: &str) -> Option<(usize, &IndexDef)> {
        self.index(name).or_else(|| {
            self.index(&format!("{name}{UNIQUE_INDEX_SUFFIX}"))
                .filter(|(_, x)| x.kind == IndexKind::UniqueHashIndex)
        })
    }

    pub fn has_hidden_pk(&self) -> bool {
        self.primary_key.len() == 1 && self.columns[self.primary_key[0]].hidden
    }

    pub fn auto_increment_column(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.auto_increment)
    }

    pub fn has_blobs(&self) -> bool {
        self.columns.iter().any(|c| c.ty.is_blob())
    }

    /// Visible columns (all but the hidden primary key).
    pub fn visible_columns(&self) -> impl Iterator<Item = (usize, &Column)> {
        self.columns.iter().enumerate().filter(|(_, c)| !c.hidden)
    }
}

fn find_column(columns: &[Column], name: &str) -> Option<usize> {
    columns
        .iter()
        .position(|c| c.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::types::Charset;

    fn int() -> ColumnType {
        ColumnType::Int {
            bytes: 4,
            unsigned: false,
        }
    }

    #[test]
    fn hidden_pk_is_added() {
        let t = TableDef::new(
            1,
            "t1",
            vec![Column::new(
                "a",
                ColumnType::Char {
                    len: 255,
                    charset: Charset::Latin1,
                },
            )],
            &[],
            vec![],
            2,
        )
        .expect("valid");
        assert!(t.has_hidden_pk());
        assert_eq!(t.visible_columns().count(), 1);
        assert_eq!(t.columns[t.primary_key[0]].name, HIDDEN_PK_NAME);
    }

    #[test]
    fn rejects_bad_definitions() {
        let dup = TableDef::new(
            1,
            "t",
            vec![Column::new("a", int()), Column::new("A", int())],
            &[],
            vec![],
            1,
        );
        assert_eq!(dup.map(|_| ()).map_err(|e| e.code), Err(4401));
        let bad_pk = TableDef::new(
            1,
            "t",
            vec![Column::new("a", int())],
            &["b".into()],
            vec![],
            1,
        );
        assert_eq!(bad_pk.map(|_| ()).map_err(|e| e.code), Err(4004));
        let bad_idx = TableDef::new(
            1,
            "t",
            vec![Column::new("a", int()).primary_key()],
            &[],
            vec![("ix".into(), IndexKind::OrderedIndex, vec!["zz".into()])],
            1,
        );
        assert_eq!(bad_idx.map(|_| ()).map_err(|e| e.code), Err(4004));
        let bad_default = TableDef::new(
            1,
            "t",
            vec![
                Column::new("a", int()).primary_key(),
                Column::new("b", int()).default_value(Value::Str("x".into())),
            ],
            &[],
            vec![],
            1,
        );
        assert_eq!(bad_default.map(|_| ()).map_err(|e| e.code), Err(4217));
    }
}
