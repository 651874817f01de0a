//! Column types and their storage sizes (DBDICT/DBTUP attribute descriptors).
//!
//! A column is stored in the row's fixed-size part when its size is fixed (integers,
//! floats, DECIMAL, CHAR, BINARY, temporal types) and in the var-size part when it is
//! VARCHAR, VARBINARY or the inline head of a TEXT/BLOB, as DBTUP does.
//! Strings are kept in the column's character set: latin1 columns store one byte per
//! character, utf8mb3/utf8mb4 store UTF-8 (at most 3 or 4 bytes per character), so the
//! maximum byte size of CHAR(n) and VARCHAR(n) is `n * max_bytes_per_char`.
//! Comparison is binary on the stored bytes, with CHAR's trailing spaces ignored (PAD
//! SPACE); rndb has no case-insensitive collations.

use std::fmt;

/// Character set of a string column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Charset {
    Latin1,
    Utf8mb3,
    Utf8mb4,
}

impl Charset {
    pub fn max_bytes_per_char(self) -> u32 {
        match self {
            Charset::Latin1 => 1,
            Charset::Utf8mb3 => 3,
            Charset::Utf8mb4 => 4,
        }
    }
    pub fn parse(name: &str) -> Option<Charset> {
        match name.to_ascii_lowercase().as_str() {
            "latin1" => Some(Charset::Latin1),
            "utf8" | "utf8mb3" => Some(Charset::Utf8mb3),
            "utf8mb4" => Some(Charset::Utf8mb4),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Charset::Latin1 => "latin1",
            Charset::Utf8mb3 => "utf8mb3",
            Charset::Utf8mb4 => "utf8mb4",
        }
    }
}

/// Kind of TEXT/BLOB column; decides the inline size and part size as NDB does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlobKind {
    Tiny,
    Regular,
    Medium,
    Long,
}

impl BlobKind {
    /// Bytes kept inline in the row (NDB: 256; TINYBLOB keeps everything inline).
    pub fn inline_size(self) -> u32 {
        match self {
            BlobKind::Tiny => 255,
            _ => 256,
        }
    }
    /// Bytes per row of the hidden parts table (NDB: 2000 for BLOB/TEXT, 4000 for MEDIUM/LONG).
    pub fn part_size(self) -> u32 {
        match self {
            BlobKind::Tiny => 0,
            BlobKind::Regular => 2000,
            BlobKind::Medium | BlobKind::Long => 4000,
        }
    }
    pub fn max_length(self) -> u64 {
        match self {
            BlobKind::Tiny => 255,
            BlobKind::Regular => 65535,
            BlobKind::Medium => 16_777_215,
            BlobKind::Long => 4_294_967_295,
        }
    }
}

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// TINYINT (1), SMALLINT (2), MEDIUMINT (3), INT (4), BIGINT (8) bytes.
    Int {
        bytes: u8,
        unsigned: bool,
    },
    Float,
    Double,
    /// DECIMAL(precision, scale), precision 1..=38.
    Decimal {
        precision: u8,
        scale: u8,
    },
    Char {
        len: u32,
        charset: Charset,
    },
    Varchar {
        len: u32,
        charset: Charset,
    },
    Binary {
        len: u32,
    },
    Varbinary {
        len: u32,
    },
    Date,
    Datetime,
    Timestamp,
    Time,
    /// TEXT (charset given) or BLOB (no charset).
    Blob {
        kind: BlobKind,
        charset: Option<Charset>,
    },
}

impl ColumnType {
    /// Bytes the column takes in the fixed-size part (0 for var-size columns).
    pub fn fixed_size(&self) -> u32 {
        match *self {
            ColumnType::Int { bytes, .. } => {
                if bytes == 3 {
                    4
                } else {
                    bytes as u32
                }
            }
            ColumnType::Float => 4,
            ColumnType::Double => 8,
            ColumnType::Decimal { precision, .. } => {
                if precision <= 18 {
                    8
                } else {
                    16
                }
            }
            ColumnType::Char { len, charset } => len * charset.max_bytes_per_char(),
            ColumnType::Binary { len } => len,
            ColumnType::Date | ColumnType::Timestamp | ColumnType::Time => 4,
            ColumnType::Datetime => 8,
            ColumnType::Varchar { .. } | ColumnType::Varbinary { .. } | ColumnType::Blob { .. } => {
                0
            }
        }
    }

    /// Stored in the var-size part.
    pub fn is_var(&self) -> bool {
        matches!(
            self,
            ColumnType::Varchar { .. } | ColumnType::Varbinary { .. } | ColumnType::Blob { .. }
        )
    }

    pub fn is_blob(&self) -> bool {
        matches!(self, ColumnType::Blob { .. })
    }

    pub fn is_integer(&self) -> bool {
        matches!(self, ColumnType::Int { .. })
    }

    pub fn is_string(&self) -> bool {
        matches!(
            self,
            ColumnType::Char { .. }
                | ColumnType::Varchar { .. }
                | ColumnType::Blob {
                    charset: Some(_),
                    ..
                }
        )
    }

    /// Largest number of bytes the column's value can take in a var part.
    pub fn max_var_bytes(&self) -> u32 {
        match *self {
            ColumnType::Varchar { len, charset } => len * charset.max_bytes_per_char(),
            ColumnType::Varbinary { len } => len,
            ColumnType::Blob { kind, .. } => 8 + kind.inline_size(),
            _ => 0,
        }
    }

    /// Integer range of an integer column.
    pub fn int_range(&self) -> Option<(i128, i128)> {
        match *self {
            ColumnType::Int { bytes, unsigned } => {
                let bits = bytes as u32 * 8;
                Some(if unsigned {
                    (0, (1i128 << bits) - 1)
                } else {
                    (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
                })
            }
            _ => None,
        }
    }

    /// NDB API type name (NdbDictionary::Column::Type) for DESCRIBE-like output.
    pub fn ndb_type_name(&self) -> &'static str {
        match *self {
            ColumnType::Int {
                bytes: 1,
                unsigned: false,
            } => "Tinyint",
            ColumnType::Int {
                bytes: 1,
                unsigned: true,
            } => "Tinyunsigned",
            ColumnType::Int {
                bytes: 2,
                unsigned: false,
            } => "Smallint",
            ColumnType::Int {
                bytes: 2,
                unsigned: true,
            } => "Smallunsigned",
            ColumnType::Int {
                bytes: 3,
                unsigned: false,
            } => "Mediumint",
            ColumnType::Int {
                bytes: 3,
                unsigned: true,
            } => "Mediumunsigned",
            ColumnType::Int {
                bytes: 4,
                unsigned: false,
            } => "Int",
            ColumnType::Int {
                bytes: 4,
                unsigned: true,
            } => "Unsigned",
            ColumnType::Int {
                unsigned: false, ..
            } => "Bigint",
            ColumnType::Int { unsigned: true, .. } => "Bigunsigned",
            ColumnType::Float => "Float",
            ColumnType::Double => "Double",
            ColumnType::Decimal { .. } => "Decimal",
            ColumnType::Char { .. } => "Char",
            ColumnType::Varchar { .. } => "Varchar",
            ColumnType::Binary { .. } => "Binary",
            ColumnType::Varbinary { .. } => "Varbinary",
            ColumnType::Date => "Date",
            ColumnType::Datetime => "Datetime",
            ColumnType::Timestamp => "Timestamp",
            ColumnType::Time => "Time",
            ColumnType::Blob {
                charset: Some(_), ..
            } => "Text",
            ColumnType::Blob { charset: None, .. } => "Blob",
        }
    }
}

impl fmt::Display for ColumnType {
    /// The type as MySQL's DESCRIBE shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ColumnType::Int { bytes, unsigned } => {
                let name = match bytes {
                    1 => "tinyint",
                    2 => "smallint",
                    3 => "mediumint",
                    4 => "int",
                    _ => "bigint",
                };
                write!(f, "{name}{}", if unsigned { " unsigned" } else { "" })
            }
            ColumnType::Float => write!(f, "float"),
            ColumnType::Double => write!(f, "double"),
            ColumnType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            ColumnType::Char { len, .. } => write!(f, "char({len})"),
            ColumnType::Varchar { len, .. } => write!(f, "varchar({len})"),
            ColumnType::Binary { len } => write!(f, "binary({len})"),
            ColumnType::Varbinary { len } => write!(f, "varbinary({len})"),
            ColumnType::Date => write!(f, "date"),
            ColumnType::Datetime => write!(f, "datetime"),
            ColumnType::Timestamp => write!(f, "timestamp"),
            ColumnType::Time => write!(f, "time"),
            ColumnType::Blob { kind, charset } => {
                let prefix = match kind {
                    BlobKind::Tiny => "tiny",
                    BlobKind::Regular => "",
                    BlobKind::Medium => "medium",
                    BlobKind::Long => "long",
                };
                write!(
                    f,
                    "{prefix}{}",
                    if charset.is_some() { "text" } else { "blob" }
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(
            ColumnType::Int {
                bytes: 8,
                unsigned: true
            }
            .fixed_size(),
            8
        );
        assert_eq!(
            ColumnType::Char {
                len: 255,
                charset: Charset::Latin1
            }
            .fixed_size(),
            255
        );
        assert_eq!(
            ColumnType::Char {
                len: 10,
                charset: Charset::Utf8mb4
            }
            .fixed_size(),
            40
        );
        assert!(
            ColumnType::Varchar {
                len: 32,
                charset: Charset::Utf8mb4
            }
            .is_var()
        );
        assert_eq!(
            ColumnType::Int {
                bytes: 1,
                unsigned: false
            }
            .int_range(),
            Some((-128, 127))
        );
        assert_eq!(
            ColumnType::Int {
                bytes: 8,
                unsigned: true
            }
            .int_range(),
            Some((0, u64::MAX as i128))
        );
        assert_eq!(
            ColumnType::Blob {
                kind: BlobKind::Medium,
                charset: None
            }
            .to_string(),
            "mediumblob"
        );
    }
}
