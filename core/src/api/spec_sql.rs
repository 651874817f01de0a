//! A [`TableSpec`] as the CREATE TABLE statement that makes the same table, for a
//! client that defines tables with NDB API's dictionary objects but reaches the data
//! nodes over TCP, where DDL travels as SQL (`SqlReq`): the C ABI's `createTable`
//! against `rndb_mgmd`.
//!
//! The statement names every column with its type as DESCRIBE prints it, the
//! character set of string columns, NOT NULL, AUTO_INCREMENT and STORAGE DISK; the
//! primary key (the columns marked primary key, else the spec's key names; none: NDB's
//! hidden key) as a hash index only, and the spec's indexes; the tablespace. SQL names
//! a unique hash index as mysqld does, `NAME$unique` (`schema::UNIQUE_INDEX_SUFFIX`), which a
//! lookup by the NDB API name falls back to. A table that is not logged
//! (`setLogging(false)`, NDB's NoLogging table) gets MySQL's table option
//! `COMMENT="NDB_TABLE=NOLOGGING=1"`.

use super::dict::TableSpec;
use crate::error::{NdbError, codes};
#[cfg(test)]
use crate::schema::UNIQUE_INDEX_SUFFIX;
use crate::schema::{ColumnType, IndexKind, StorageType};

use crate::sql::quote_ident as ident;

fn idents(names: &[String]) -> String {
    names.iter().map(|n| ident(n)).collect::<Vec<_>>().join(",")
}

impl TableSpec {
    /// The CREATE TABLE statement of this spec (see the module notes).
    pub fn create_statement(&self) -> Result<String, NdbError> {
        if self.columns.is_empty() {
            return Err(codes::bad_argument(format!(
                "table '{}' has no columns",
                self.name
            )));
        }
        let mut lines = Vec::with_capacity(self.columns.len() + 1 + self.indexes.len());
        for c in &self.columns {
            let mut l = format!("{} {}", ident(&c.name), c.ty);
            match c.ty {
                ColumnType::Char { charset, .. } | ColumnType::Varchar { charset, .. } => {
                    l.push_str(&format!(" CHARACTER SET {}", charset.name()));
                }
                ColumnType::Blob {
                    charset: Some(cs), ..
                } => l.push_str(&format!(" CHARACTER SET {}", cs.name())),
                _ => {}
            }
            if !c.nullable || c.primary_key {
                l.push_str(" NOT NULL");
            }
            if c.auto_increment {
                l.push_str(" AUTO_INCREMENT");
            }
            if c.storage == StorageType::Disk {
                l.push_str(" STORAGE DISK");
            }
            lines.push(l);
        }
        let marked: Vec<String> = self
            .columns
            .iter()
            .filter(|c| c.primary_key)
            .map(|c| c.name.clone())
            .collect();
        let key = if marked.is_empty() {
            &self.primary_key
        } else {
            &marked
        };
        if !key.is_empty() {
            // USING HASH: the key's hash index only, as NDB API's createTable makes it
            // (mysqld would add an ordered index named PRIMARY).
            lines.push(format!("PRIMARY KEY ({}) USING HASH", idents(key)));
        }
        for (name, kind, cols) in &self.indexes {
            lines.push(match kind {
                IndexKind::OrderedIndex => format!("KEY {} ({})", ident(name), idents(cols)),
                IndexKind::UniqueHashIndex => {
                    format!("UNIQUE KEY {} ({}) USING HASH", ident(name), idents(cols))
                }
            });
        }
        let mut out = format!(
            "CREATE TABLE {}{} (\n  {}\n) ENGINE=NDB",
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            ident(&self.name),
            lines.join(",\n  ")
        );
        if let Some(ts) = &self.tablespace {
            out.push_str(&format!(" TABLESPACE {}", ident(ts)));
            if self.columns.iter().any(|c| c.storage == StorageType::Disk) {
                out.push_str(" STORAGE DISK");
            }
        }
        if !self.logging {
            out.push_str(" COMMENT=\"NDB_TABLE=NOLOGGING=1\"");
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Cluster;
    use crate::config::ClusterConfig;
    use crate::schema::{Charset, Column};
    use crate::sql::Session;

    fn spec() -> TableSpec {
        let mut s = TableSpec::new(
            "t1",
            vec![
                Column::new(
                    "id",
                    ColumnType::Int {
                        bytes: 8,
                        unsigned: true,
                    },
                )
                .primary_key(),
                Column::new(
                    "name",
                    ColumnType::Varchar {
                        len: 20,
                        charset: Charset::Latin1,
                    },
                ),
                Column::new("d", ColumnType::Double).not_null(),
                Column::new("b", ColumnType::Varbinary { len: 300 }),
            ],
        );
        s.indexes.push((
            "ix_name".into(),
            IndexKind::OrderedIndex,
            vec!["name".into()],
        ));
        s.indexes
            .push(("u_d".into(), IndexKind::UniqueHashIndex, vec!["d".into()]));
        s
    }

    #[test]
    fn the_statement_makes_the_table_the_spec_makes() {
        let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("cluster");
        let ndb = c.ndb("test");
        ndb.create_table(spec()).expect("by spec");
        let mut other = spec();
        other.name = "t2".into();
        let sql = other.create_statement().expect("statement");
        let mut s = Session::new(c.ndb("test"));
        s.execute(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let (a, b) = (ndb.table("t1").expect("t1"), ndb.table("t2").expect("t2"));
        assert_eq!(a.def.columns, b.def.columns, "{sql}");
        assert_eq!(a.def.primary_key, b.def.primary_key);
        let kinds = |d: &crate::schema::TableDef| {
            d.indexes
                .iter()
                .map(|i| {
                    let name = i.name.trim_end_matches(UNIQUE_INDEX_SUFFIX).to_string();
                    (name, i.kind, i.columns.clone())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&a.def), kinds(&b.def));
        c.shutdown();
    }

    #[test]
    fn an_unlogged_table_is_made_unlogged() {
        let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("cluster");
        let mut s = spec();
        s.logging = false;
        let sql = s.create_statement().expect("statement");
        assert!(sql.ends_with(" COMMENT=\"NDB_TABLE=NOLOGGING=1\""), "{sql}");
        Session::new(c.ndb("test"))
            .execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert!(!c.ndb("test").table("t1").expect("t1").def.logging);
        c.shutdown();
    }

    #[test]
    fn empty_tables_are_refused() {
        let empty = TableSpec::new("e", vec![]);
        assert!(empty.create_statement().is_err());
        let mut q = spec();
        q.name = "we`ird".into();
        assert!(
            q.create_statement()
                .expect("statement")
                .starts_with("CREATE TABLE `we``ird` (")
        );
    }
}
