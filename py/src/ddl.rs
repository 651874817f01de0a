//! Column declarations for `Ndb.create_table` (the dictionary call, like
//! NdbDictionary::Dictionary::createTable): MySQL type text such as
//! `"BIGINT UNSIGNED NOT NULL"`, `"VARCHAR(32) CHARACTER SET latin1"`, `"DECIMAL(10,2)"`.

use crate::errors::R;
use rndb::Value;
use rndb::error::codes;
use rndb::schema::{BlobKind, Charset, Column, ColumnType, Decimal, StorageType};

fn bad(decl: &str, why: impl std::fmt::Display) -> rndb::NdbError {
    codes::bad_argument(format!("column type '{decl}': {why}")).with_mysql_code(1064)
}

/// Splits `decl` into words, keeping `( ... )` groups and quoted strings whole.
fn words(decl: &str) -> R<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = decl.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '(' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                let mut group = String::from("(");
                loop {
                    match chars.next() {
                        Some(')') => break,
                        Some(c) => group.push(c),
                        None => return Err(bad(decl, "unbalanced parenthesis")),
                    }
                }
                group.push(')');
                out.push(group);
            }
            '\'' | '"' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                let mut s = String::from("'");
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(ch) => s.push(ch),
                        None => return Err(bad(decl, "unterminated string")),
                    }
                }
                out.push(s);
            }
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

fn args(decl: &str, group: Option<&String>) -> R<Vec<u32>> {
    let Some(g) = group.filter(|g| g.starts_with('(')) else {
        return Ok(Vec::new());
    };
    g[1..g.len() - 1]
        .split(',')
        .map(|a| {
            a.trim()
                .parse::<u32>()
                .map_err(|_| bad(decl, format!("bad length or precision '{}'", a.trim())))
        })
        .collect()
}

/// A column from its name and declaration.
/// A column from its declaration, and its explicit `STORAGE DISK|MEMORY` if any.
pub fn column(name: &str, decl: &str) -> R<(Column, Option<StorageType>)> {
    let w = words(decl)?;
    let Some(base) = w.first() else {
        return Err(bad(decl, "no type"));
    };
    let base = base.to_ascii_uppercase();
    let has_args = w.get(1).is_some_and(|g| g.starts_with('('));
    let a = args(decl, w.get(1))?;
    let mut rest: Vec<String> = w[if has_args { 2 } else { 1 }..].to_vec();
    let upper: Vec<String> = rest.iter().map(|s| s.to_ascii_uppercase()).collect();
    let unsigned = upper.iter().any(|s| s == "UNSIGNED");
    let charset = match upper
        .iter()
        .position(|s| s == "CHARSET" || s == "SET")
        .and_then(|i| rest.get(i + 1))
    {
        Some(cs) => Some(
            Charset::parse(cs).ok_or_else(|| bad(decl, format!("unknown character set {cs}")))?,
        ),
        None => None,
    };
    let len = |default: u32| -> R<u32> {
        match a.as_slice() {
            [] => Ok(default),
            [n] => Ok(*n),
            _ => Err(bad(decl, "one length expected")),
        }
    };
    let cs = charset.unwrap_or(Charset::Utf8mb4);
    let int = |bytes: u8| ColumnType::Int { bytes, unsigned };
    let ty = match base.as_str() {
        "TINYINT" | "BOOL" | "BOOLEAN" => int(1),
        "SMALLINT" => int(2),
        "MEDIUMINT" => int(3),
        "INT" | "INTEGER" => int(4),
        "BIGINT" => int(8),
        "FLOAT" => ColumnType::Float,
        "DOUBLE" | "REAL" => ColumnType::Double,
        "DECIMAL" | "NUMERIC" | "DEC" => {
            let (precision, scale) = match a.as_slice() {
                [] => (10, 0),
                [p] => (*p, 0),
                [p, s] => (*p, *s),
                _ => return Err(bad(decl, "DECIMAL(precision, scale)")),
            };
            if !(1..=38).contains(&precision) || scale > precision {
                return Err(bad(decl, "precision 1..38, scale at most the precision"));
            }
            ColumnType::Decimal {
                precision: precision as u8,
                scale: scale as u8,
            }
        }
        "CHAR" => ColumnType::Char {
            len: len(1)?,
            charset: cs,
        },
        "VARCHAR" => {
            if a.is_empty() {
                return Err(bad(decl, "VARCHAR needs a length"));
            }
            ColumnType::Varchar {
                len: len(0)?,
                charset: cs,
            }
        }
        "BINARY" => ColumnType::Binary { len: len(1)? },
        "VARBINARY" => {
            if a.is_empty() {
                return Err(bad(decl, "VARBINARY needs a length"));
            }
            ColumnType::Varbinary { len: len(0)? }
        }
        "DATE" => ColumnType::Date,
        "DATETIME" => ColumnType::Datetime,
        "TIMESTAMP" => ColumnType::Timestamp,
        "TIME" => ColumnType::Time,
        "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB" | "TINYTEXT" | "TEXT" | "MEDIUMTEXT"
        | "LONGTEXT" => {
            let kind = match &base[..base.len() - 4] {
                "TINY" => BlobKind::Tiny,
                "" => BlobKind::Regular,
                "MEDIUM" => BlobKind::Medium,
                _ => BlobKind::Long,
            };
            ColumnType::Blob {
                kind,
                charset: base.ends_with("TEXT").then_some(cs),
            }
        }
        other => return Err(bad(decl, format!("unknown type {other}"))),
    };
    let mut col = Column::new(name, ty);
    let mut storage = None;
    let mut i = 0;
    while i < upper.len() {
        match upper[i].as_str() {
            "NOT" if upper.get(i + 1).map(String::as_str) == Some("NULL") => {
                col = col.not_null();
                i += 1;
            }
            "NULL" => col.nullable = true,
            "AUTO_INCREMENT" => col = col.auto_increment(),
            "PRIMARY" if upper.get(i + 1).map(String::as_str) == Some("KEY") => {
                col = col.primary_key();
                i += 1;
            }
            "KEY" => col = col.primary_key(),
            "DEFAULT" => {
                let Some(v) = rest.get_mut(i + 1) else {
                    return Err(bad(decl, "DEFAULT needs a value"));
                };
                col = col.default_value(literal(std::mem::take(v)));
                i += 1;
            }
            "UNSIGNED" | "SIGNED" | "ZEROFILL" => {}
            "CHARACTER" | "CHARSET" | "SET" => {
                if upper[i] != "CHARACTER" {
                    i += 1;
                }
            }
            "COLLATE" => i += 1,
            "STORAGE" => {
                storage = Some(match upper.get(i + 1).map(String::as_str) {
                    Some("DISK") => StorageType::Disk,
                    Some("MEMORY") => StorageType::Memory,
                    _ => return Err(bad(decl, "STORAGE DISK or STORAGE MEMORY")),
                });
                i += 1;
            }
            other => return Err(bad(decl, format!("unexpected '{other}'"))),
        }
        i += 1;
    }
    if let Some(st) = storage {
        col.storage = st;
    }
    Ok((col, storage))
}

fn literal(text: String) -> Value {
    if let Some(s) = text.strip_prefix('\'') {
        return Value::Str(s.to_string());
    }
    if text.eq_ignore_ascii_case("NULL") {
        return Value::Null;
    }
    if let Ok(i) = text.parse::<i64>() {
        return Value::Int(i);
    }
    if let Ok(u) = text.parse::<u64>() {
        return Value::UInt(u);
    }
    if let Some(d) = Decimal::parse(&text) {
        return Value::Decimal(d);
    }
    Value::Str(text)
}
