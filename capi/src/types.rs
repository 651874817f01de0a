//! NDB's column types (NdbDictionary::Column::Type) and values in NDB's byte formats.
//!
//! What `equal`, `setValue`, `setBound` take and what `NdbRecAttr::aRef` gives are the
//! bytes NDB uses: little-endian integers of the column's size (3 bytes for MEDIUMINT),
//! IEEE floats, CHAR padded with spaces to its length in bytes, BINARY padded with zero
//! bytes, VARCHAR/VARBINARY with a 1-byte length prefix (2 bytes for Longvarchar /
//! Longvarbinary, columns longer than 255 bytes), DECIMAL in MySQL's binary format, Date
//! as 3 bytes (`day | month << 5 | year << 9`), Datetime as the 8-byte integer
//! YYYYMMDDhhmmss, Time as the 3-byte signed integer hhmmss, Timestamp as 4-byte Unix
//! seconds. BLOB/TEXT values are passed whole, without a prefix (NDB uses NdbBlob).

use rndb_core::error::{NdbError, Result, codes};
use rndb_core::schema::table::StorageType;
use rndb_core::schema::{BlobKind, Charset, Column, ColumnType, Date, Datetime, Decimal, Value};

/// NdbDictionary::Column::Type, NDB's values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_column_type {
    RNDB_TYPE_UNDEFINED = 0,
    RNDB_TYPE_TINYINT = 1,
    RNDB_TYPE_TINYUNSIGNED = 2,
    RNDB_TYPE_SMALLINT = 3,
    RNDB_TYPE_SMALLUNSIGNED = 4,
    RNDB_TYPE_MEDIUMINT = 5,
    RNDB_TYPE_MEDIUMUNSIGNED = 6,
    RNDB_TYPE_INT = 7,
    RNDB_TYPE_UNSIGNED = 8,
    RNDB_TYPE_BIGINT = 9,
    RNDB_TYPE_BIGUNSIGNED = 10,
    RNDB_TYPE_FLOAT = 11,
    RNDB_TYPE_DOUBLE = 12,
    RNDB_TYPE_OLDDECIMAL = 13,
    RNDB_TYPE_OLDDECIMALUNSIGNED = 14,
    RNDB_TYPE_DECIMAL = 15,
    RNDB_TYPE_DECIMALUNSIGNED = 16,
    RNDB_TYPE_CHAR = 17,
    RNDB_TYPE_VARCHAR = 18,
    RNDB_TYPE_BINARY = 19,
    RNDB_TYPE_VARBINARY = 20,
    RNDB_TYPE_DATETIME = 21,
    RNDB_TYPE_DATE = 22,
    RNDB_TYPE_BLOB = 23,
    RNDB_TYPE_TEXT = 24,
    RNDB_TYPE_BIT = 25,
    RNDB_TYPE_LONGVARCHAR = 26,
    RNDB_TYPE_LONGVARBINARY = 27,
    RNDB_TYPE_TIME = 28,
    RNDB_TYPE_YEAR = 29,
    RNDB_TYPE_TIMESTAMP = 30,
}

pub const TYPE_NAMES: [&str; 31] = [
    "Undefined",
    "Tinyint",
    "Tinyunsigned",
    "Smallint",
    "Smallunsigned",
    "Mediumint",
    "Mediumunsigned",
    "Int",
    "Unsigned",
    "Bigint",
    "Bigunsigned",
    "Float",
    "Double",
    "Olddecimal",
    "Olddecimalunsigned",
    "Decimal",
    "Decimalunsigned",
    "Char",
    "Varchar",
    "Binary",
    "Varbinary",
    "Datetime",
    "Date",
    "Blob",
    "Text",
    "Bit",
    "Longvarchar",
    "Longvarbinary",
    "Time",
    "Year",
    "Timestamp",
];

/// A column as the NDB API defines it (NdbDictionary::Column's attributes).
#[derive(Debug, Clone, PartialEq)]
pub struct ColDef {
    pub name: String,
    pub ty: i32,
    /// Array length: bytes for CHAR/VARCHAR/BINARY/VARBINARY, 1 otherwise.
    pub length: u32,
    pub precision: u32,
    pub scale: u32,
    pub primary_key: bool,
    pub nullable: bool,
    pub partition_key: bool,
    pub auto_increment: bool,
    pub disk: bool,
    /// Character set of a string column (API-created columns: latin1, as NDB).
    pub charset: Charset,
}

impl ColDef {
    pub fn new(name: &str) -> ColDef {
        ColDef {
            name: name.to_string(),
            ty: rndb_column_type::RNDB_TYPE_UNSIGNED as i32,
            length: 1,
            precision: 10,
            scale: 0,
            primary_key: false,
            nullable: false,
            partition_key: false,
            auto_increment: false,
            disk: false,
            charset: Charset::Latin1,
        }
    }

    /// The engine column this definition creates.
    pub fn to_core(&self) -> Result<Column> {
        let int = |bytes: u8, unsigned: bool| ColumnType::Int { bytes, unsigned };
        let ty = match self.ty {
            1 => int(1, false),
            2 => int(1, true),
            3 => int(2, false),
            4 => int(2, true),
            5 => int(3, false),
            6 => int(3, true),
            7 => int(4, false),
            8 => int(4, true),
            9 => int(8, false),
            10 => int(8, true),
            11 => ColumnType::Float,
            12 => ColumnType::Double,
            15 | 16 => {
                if !(1..=38).contains(&self.precision) || self.scale > self.precision {
                    return Err(codes::bad_argument(format!(
                        "column '{}': DECIMAL precision {} and scale {} (precision 1..38, scale <= precision)",
                        self.name, self.precision, self.scale
                    )));
                }
                ColumnType::Decimal {
                    precision: self.precision as u8,
                    scale: self.scale as u8,
                }
            }
            17 => ColumnType::Char {
                len: self.string_len()?,
                charset: self.charset,
            },
            18 | 26 => ColumnType::Varchar {
                len: self.string_len()?,
                charset: self.charset,
            },
            19 => ColumnType::Binary {
                len: self.byte_len(255)?,
            },
            20 | 27 => ColumnType::Varbinary {
                len: self.byte_len(65535)?,
            },
            21 => ColumnType::Datetime,
            22 => ColumnType::Date,
            23 => ColumnType::Blob {
                kind: BlobKind::Long,
                charset: None,
            },
            24 => ColumnType::Blob {
                kind: BlobKind::Long,
                charset: Some(self.charset),
            },
            28 => ColumnType::Time,
            30 => ColumnType::Timestamp,
            t => {
                let name = TYPE_NAMES.get(t as usize).copied().unwrap_or("unknown");
                return Err(codes::unsupported(format!(
                    "column '{}': type {name} ({t}) is not supported by rndb",
                    self.name
                )));
            }
        };
        let mut c = Column::new(self.name.clone(), ty);
        c.nullable = self.nullable && !self.primary_key;
        c.primary_key = self.primary_key;
        c.auto_increment = self.auto_increment;
        c.storage = if self.disk {
            StorageType::Disk
        } else {
            StorageType::Memory
        };
        Ok(c)
    }

    fn byte_len(&self, max: u32) -> Result<u32> {
        if self.length == 0 || self.length > max {
            return Err(codes::bad_argument(format!(
                "column '{}': length {} out of range 1..{max}",
                self.name, self.length
            )));
        }
        Ok(self.length)
    }

    /// Characters of a string column from its length in bytes.
    fn string_len(&self) -> Result<u32> {
        let bytes = self.byte_len(if self.ty == 17 { 255 } else { 65535 })?;
        Ok((bytes / self.charset.max_bytes_per_char()).max(1))
    }

    /// NDB's view of an engine column.
    pub fn from_core(c: &Column) -> ColDef {
        let (ty, length, precision, scale, charset) = match c.ty {
            ColumnType::Int { bytes, unsigned } => {
                let base = match bytes {
                    1 => 1,
                    2 => 3,
                    3 => 5,
                    4 => 7,
                    _ => 9,
                };
                (base + unsigned as i32, 1, 0, 0, Charset::Latin1)
            }
            ColumnType::Float => (11, 1, 0, 0, Charset::Latin1),
            ColumnType::Double => (12, 1, 0, 0, Charset::Latin1),
            ColumnType::Decimal { precision, scale } => {
                (15, 1, precision as u32, scale as u32, Charset::Latin1)
            }
            ColumnType::Char { len, charset } => {
                (17, len * charset.max_bytes_per_char(), 0, 0, charset)
            }
            ColumnType::Varchar { len, charset } => {
                let bytes = len * charset.max_bytes_per_char();
                (if bytes > 255 { 26 } else { 18 }, bytes, 0, 0, charset)
            }
            ColumnType::Binary { len } => (19, len, 0, 0, Charset::Latin1),
            ColumnType::Varbinary { len } => {
                (if len > 255 { 27 } else { 20 }, len, 0, 0, Charset::Latin1)
            }
            ColumnType::Date => (22, 1, 0, 0, Charset::Latin1),
            ColumnType::Datetime => (21, 1, 0, 0, Charset::Latin1),
            ColumnType::Timestamp => (30, 1, 0, 0, Charset::Latin1),
            ColumnType::Time => (28, 1, 0, 0, Charset::Latin1),
            ColumnType::Blob { charset, .. } => match charset {
                Some(cs) => (24, 1, 0, 0, cs),
                None => (23, 1, 0, 0, Charset::Latin1),
            },
        };
        ColDef {
            name: c.name.clone(),
            ty,
            length,
            precision,
            scale,
            primary_key: c.primary_key,
            nullable: c.nullable,
            partition_key: c.primary_key,
            auto_increment: c.auto_increment,
            disk: c.storage == StorageType::Disk,
            charset,
        }
    }
}

/// Bytes of a fixed-size value in NDB's format; None for var-size and BLOB columns.
pub fn fixed_size(ty: &ColumnType) -> Option<usize> {
    Some(match *ty {
        ColumnType::Int { bytes, .. } => bytes as usize,
        ColumnType::Float => 4,
        ColumnType::Double => 8,
        ColumnType::Decimal { precision, scale } => decimal_bin_size(precision, scale),
        ColumnType::Char { len, charset } => (len * charset.max_bytes_per_char()) as usize,
        ColumnType::Binary { len } => len as usize,
        ColumnType::Date | ColumnType::Time => 3,
        ColumnType::Datetime => 8,
        ColumnType::Timestamp => 4,
        ColumnType::Varchar { .. } | ColumnType::Varbinary { .. } | ColumnType::Blob { .. } => {
            return None;
        }
    })
}

/// Maximum data bytes of a var-size column and its length-prefix size.
pub fn var_size(ty: &ColumnType) -> Option<(usize, usize)> {
    let max = match *ty {
        ColumnType::Varchar { len, charset } => (len * charset.max_bytes_per_char()) as usize,
        ColumnType::Varbinary { len } => len as usize,
        _ => return None,
    };
    Some((max, if max > 255 { 2 } else { 1 }))
}

/// NDB's getSizeInBytes: the largest value in NDB's format.
pub fn size_in_bytes(ty: &ColumnType) -> usize {
    if let Some(n) = fixed_size(ty) {
        return n;
    }
    if let Some((max, prefix)) = var_size(ty) {
        return max + prefix;
    }
    // BLOB/TEXT: NDB's head (8 bytes) plus the inline part.
    8 + 256
}

fn wrong_size(column: &str, ty: &ColumnType, expected: usize, got: usize) -> NdbError {
    codes::value_too_large(format!(
        "column '{column}' of type {ty} takes {expected} bytes, the value has {got}"
    ))
}

/// Reads a value in NDB's format for a column. `len` is the byte length the caller
/// gave (0 = the column's own size, or the length prefix's).
///
/// # Safety
/// `p` must point to at least the number of bytes the format implies (as in NDB).
pub unsafe fn from_ndb(ty: &ColumnType, column: &str, p: *const u8, len: u32) -> Result<Value> {
    let len = len as usize;
    if let Some(size) = fixed_size(ty) {
        if len != 0 && len != size {
            return Err(wrong_size(column, ty, size, len));
        }
        // SAFETY: the caller guarantees `size` readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, size) };
        return decode_fixed(ty, column, b);
    }
    if let Some((max, prefix)) = var_size(ty) {
        // SAFETY: the caller guarantees the prefix and the bytes it announces.
        let head = unsafe { std::slice::from_raw_parts(p, prefix) };
        let n = if prefix == 1 {
            head[0] as usize
        } else {
            u16::from_le_bytes([head[0], head[1]]) as usize
        };
        if len != 0 && len != n + prefix && len != n {
            return Err(codes::value_too_large(format!(
                "column '{column}' of type {ty}: the length prefix says {n} bytes, the length given is {len}"
            )));
        }
        if n > max {
            return Err(codes::value_too_large(format!(
                "column '{column}' of type {ty} holds at most {max} bytes, the value has {n}"
            )));
        }
        // SAFETY: as above.
        let b = unsafe { std::slice::from_raw_parts(p.add(prefix), n) };
        return Ok(match ty {
            ColumnType::Varchar { charset, .. } => Value::Str(decode_text(b, *charset, column)?),
            _ => Value::Bytes(b.to_vec()),
        });
    }
    // BLOB/TEXT: the whole value, `len` bytes (0 = NUL-terminated).
    let n = if len == 0 {
        // SAFETY: the caller passes a NUL-terminated string when len is 0.
        unsafe { std::ffi::CStr::from_ptr(p.cast()) }
            .to_bytes()
            .len()
    } else {
        len
    };
    // SAFETY: `n` readable bytes.
    let b = unsafe { std::slice::from_raw_parts(p, n) };
    Ok(match ty {
        ColumnType::Blob {
            charset: Some(cs), ..
        } => Value::Str(decode_text(b, *cs, column)?),
        _ => Value::Bytes(b.to_vec()),
    })
}

fn decode_text(b: &[u8], cs: Charset, column: &str) -> Result<String> {
    match cs {
        Charset::Latin1 => Ok(b.iter().map(|&c| c as char).collect()),
        _ => String::from_utf8(b.to_vec()).map_err(|_| {
            codes::wrong_type(format!("column '{column}': the bytes are not valid UTF-8"))
        }),
    }
}

fn le_u64(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(v)
}

fn decode_fixed(ty: &ColumnType, column: &str, b: &[u8]) -> Result<Value> {
    Ok(match *ty {
        ColumnType::Int { bytes, unsigned } => {
            let raw = le_u64(b);
            if unsigned {
                Value::UInt(raw)
            } else {
                let shift = 64 - 8 * bytes as u32;
                Value::Int(((raw << shift) as i64) >> shift)
            }
        }
        ColumnType::Float => Value::Float(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ColumnType::Double => {
            Value::Double(f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])))
        }
        ColumnType::Decimal { precision, scale } => {
            Value::Decimal(decimal_from_bin(b, precision, scale).ok_or_else(|| {
                codes::wrong_type(format!("column '{column}': not a DECIMAL in binary format"))
            })?)
        }
        ColumnType::Char { charset, .. } => {
            let end = b.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
            Value::Str(decode_text(&b[..end], charset, column)?)
        }
        ColumnType::Binary { .. } => Value::Bytes(b.to_vec()),
        ColumnType::Date => {
            let d = Date::unpack(le_u64(b) as u32);
            Value::Date(
                Date::new(d.year, d.month, d.day).ok_or_else(|| {
                    codes::wrong_type(format!("column '{column}': invalid Date {d}"))
                })?,
            )
        }
        ColumnType::Datetime => {
            let d = Datetime::unpack(le_u64(b));
            if Date::new(d.date.year, d.date.month, d.date.day).is_none()
                || d.hour > 23
                || d.minute > 59
                || d.second > 59
            {
                return Err(codes::wrong_type(format!(
                    "column '{column}': invalid Datetime {}",
                    le_u64(b)
                )));
            }
            Value::Datetime(d)
        }
        ColumnType::Timestamp => Value::Datetime(Datetime::from_epoch_seconds(le_u64(b) as i64)),
        ColumnType::Time => {
            let raw = le_u64(b) as u32;
            let v = ((raw << 8) as i32) >> 8;
            let a = v.unsigned_abs();
            let (h, m, s) = (a / 10000, a / 100 % 100, a % 100);
            if m > 59 || s > 59 {
                return Err(codes::wrong_type(format!(
                    "column '{column}': invalid Time {v}"
                )));
            }
            let secs = (h * 3600 + m * 60 + s) as i32;
            Value::Time(if v < 0 { -secs } else { secs })
        }
        _ => return Err(codes::internal("decode_fixed on a var-size column")),
    })
}

/// Writes a value (as the engine returns it for the column) in NDB's format.
pub fn to_ndb(ty: &ColumnType, v: &Value, out: &mut Vec<u8>) {
    match *ty {
        ColumnType::Int { bytes, .. } => {
            let n = v.as_i128().unwrap_or(0) as u64;
            out.extend_from_slice(&n.to_le_bytes()[..bytes as usize]);
        }
        ColumnType::Float => {
            out.extend_from_slice(&(v.as_f64().unwrap_or(0.0) as f32).to_le_bytes());
        }
        ColumnType::Double => out.extend_from_slice(&v.as_f64().unwrap_or(0.0).to_le_bytes()),
        ColumnType::Decimal { precision, scale } => {
            let d = match v {
                Value::Decimal(d) => *d,
                other => Decimal::from_f64(other.as_f64().unwrap_or(0.0), scale)
                    .unwrap_or(Decimal { mantissa: 0, scale }),
            };
            decimal_to_bin(d, precision, scale, out);
        }
        ColumnType::Char { len, charset } => {
            let start = out.len();
            encode_text(v, charset, out);
            let size = (len * charset.max_bytes_per_char()) as usize;
            out.truncate(start + size);
            out.resize(start + size, b' ');
        }
        ColumnType::Binary { len } => {
            let start = out.len();
            encode_bytes(v, out);
            out.truncate(start + len as usize);
            out.resize(start + len as usize, 0);
        }
        ColumnType::Varchar { .. } | ColumnType::Varbinary { .. } => {
            let prefix = var_size(ty).map_or(1, |(_, p)| p);
            let start = out.len();
            out.resize(start + prefix, 0);
            match *ty {
                ColumnType::Varchar { charset, .. } => encode_text(v, charset, out),
                _ => encode_bytes(v, out),
            }
            let n = (out.len() - start - prefix) as u16;
            out[start] = n as u8;
            if prefix == 2 {
                out[start + 1] = (n >> 8) as u8;
            }
        }
        ColumnType::Date => {
            let d = match v {
                Value::Date(d) => *d,
                Value::Datetime(d) => d.date,
                _ => Date {
                    year: 0,
                    month: 0,
                    day: 0,
                },
            };
            out.extend_from_slice(&d.pack().to_le_bytes()[..3]);
        }
        ColumnType::Datetime => {
            let n = match v {
                Value::Datetime(d) => d.pack(),
                _ => 0,
            };
            out.extend_from_slice(&n.to_le_bytes());
        }
        ColumnType::Timestamp => {
            let n = match v {
                Value::Datetime(d) => d.epoch_seconds() as u32,
                _ => 0,
            };
            out.extend_from_slice(&n.to_le_bytes());
        }
        ColumnType::Time => {
            let secs = match v {
                Value::Time(t) => *t,
                _ => 0,
            };
            let a = secs.unsigned_abs();
            let hms = (a / 3600 * 10000 + a / 60 % 60 * 100 + a % 60) as i32;
            let n = if secs < 0 { -hms } else { hms };
            out.extend_from_slice(&n.to_le_bytes()[..3]);
        }
        ColumnType::Blob { charset, .. } => match charset {
            Some(cs) => encode_text(v, cs, out),
            None => encode_bytes(v, out),
        },
    }
}

fn encode_text(v: &Value, cs: Charset, out: &mut Vec<u8>) {
    match v {
        Value::Str(s) => match cs {
            Charset::Latin1 => out.extend(s.chars().map(|c| c as u32 as u8)),
            _ => out.extend_from_slice(s.as_bytes()),
        },
        Value::Bytes(b) => out.extend_from_slice(b),
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

fn encode_bytes(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Bytes(b) => out.extend_from_slice(b),
        Value::Str(s) => out.extend_from_slice(s.as_bytes()),
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
const POW10: [u128; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// Bytes of DECIMAL(precision, scale) in MySQL's binary format.
pub fn decimal_bin_size(precision: u8, scale: u8) -> usize {
    let intg = (precision - scale.min(precision)) as usize;
    let scale = scale as usize;
    intg / 9 * 4 + DIG2BYTES[intg % 9] + scale / 9 * 4 + DIG2BYTES[scale % 9]
}

fn put_be(out: &mut Vec<u8>, v: u32, n: usize) {
    out.extend_from_slice(&v.to_be_bytes()[4 - n..]);
}

/// MySQL's decimal2bin: groups of 9 digits in 4 big-endian bytes, shorter leading and
/// trailing groups, negative values with every bit inverted, the sign bit flipped.
pub fn decimal_to_bin(d: Decimal, precision: u8, scale: u8, out: &mut Vec<u8>) {
    let d = d.rescale(scale).unwrap_or(Decimal { mantissa: 0, scale });
    let neg = d.mantissa < 0;
    let abs = d.mantissa.unsigned_abs();
    let s = scale as u32;
    let int_part = abs / 10u128.pow(s);
    let frac_part = abs % 10u128.pow(s);
    let intg = (precision - scale) as usize;
    let (intg0, intg0x) = (intg / 9, intg % 9);
    let (frac0, frac0x) = (scale as usize / 9, scale as usize % 9);
    let start = out.len();
    let g = 1_000_000_000u128;
    if intg0x > 0 {
        let v = (int_part / g.pow(intg0 as u32)) % POW10[intg0x];
        put_be(out, v as u32, DIG2BYTES[intg0x]);
    }
    for i in (0..intg0).rev() {
        put_be(out, ((int_part / g.pow(i as u32)) % g) as u32, 4);
    }
    for i in 0..frac0 {
        let v = (frac_part / 10u128.pow(s - 9 * (i as u32 + 1))) % g;
        put_be(out, v as u32, 4);
    }
    if frac0x > 0 {
        put_be(out, (frac_part % POW10[frac0x]) as u32, DIG2BYTES[frac0x]);
    }
    if neg {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
    if out.len() > start {
        out[start] ^= 0x80;
    }
}

/// MySQL's bin2decimal.
pub fn decimal_from_bin(b: &[u8], precision: u8, scale: u8) -> Option<Decimal> {
    let size = decimal_bin_size(precision, scale);
    if b.len() < size || size == 0 {
        return None;
    }
    let mut buf = b[..size].to_vec();
    buf[0] ^= 0x80;
    let neg = buf[0] & 0x80 != 0;
    if neg {
        for x in &mut buf {
            *x = !*x;
        }
    }
    let intg = (precision - scale) as usize;
    let (intg0, intg0x) = (intg / 9, intg % 9);
    let (frac0, frac0x) = (scale as usize / 9, scale as usize % 9);
    let mut pos = 0;
    let mut take = |n: usize| -> u128 {
        let mut v = 0u128;
        for &x in &buf[pos..pos + n] {
            v = v << 8 | x as u128;
        }
        pos += n;
        v
    };
    let g = 1_000_000_000u128;
    let mut int_part = 0u128;
    if intg0x > 0 {
        int_part = take(DIG2BYTES[intg0x]);
    }
    for _ in 0..intg0 {
        int_part = int_part * g + take(4);
    }
    let mut frac = 0u128;
    for _ in 0..frac0 {
        frac = frac * g + take(4);
    }
    if frac0x > 0 {
        frac = frac * POW10[frac0x] + take(DIG2BYTES[frac0x]);
    }
    let m = int_part.checked_mul(10u128.pow(scale as u32))? + frac;
    let m = i128::try_from(m).ok()?;
    Some(Decimal {
        mantissa: if neg { -m } else { m },
        scale,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(ty: ColumnType, v: Value) {
        let mut out = Vec::new();
        to_ndb(&ty, &v, &mut out);
        // SAFETY: `out` holds the encoded value.
        let back = unsafe { from_ndb(&ty, "c", out.as_ptr(), 0) }.expect("decode");
        assert_eq!(back, v, "{ty}");
    }

    #[test]
    fn values_round_trip_in_ndb_format() {
        round_trip(
            ColumnType::Int {
                bytes: 3,
                unsigned: false,
            },
            Value::Int(-8_000_000),
        );
        round_trip(
            ColumnType::Int {
                bytes: 8,
                unsigned: true,
            },
            Value::UInt(u64::MAX),
        );
        round_trip(ColumnType::Double, Value::Double(-2.5));
        round_trip(
            ColumnType::Varchar {
                len: 300,
                charset: Charset::Latin1,
            },
            Value::Str("héllo".into()),
        );
        round_trip(
            ColumnType::Char {
                len: 10,
                charset: Charset::Latin1,
            },
            Value::Str("abc".into()),
        );
        round_trip(
            ColumnType::Date,
            Value::Date(Date::new(2024, 2, 29).expect("date")),
        );
        round_trip(
            ColumnType::Datetime,
            Value::Datetime(Datetime::parse("2011-03-04 05:06:07").expect("dt")),
        );
        round_trip(ColumnType::Time, Value::Time(-(3600 * 100 + 61)));
        for (p, s, m) in [
            (10u8, 2u8, -12345i128),
            (38, 10, 12345678901234567890123),
            (5, 0, 0),
        ] {
            round_trip(
                ColumnType::Decimal {
                    precision: p,
                    scale: s,
                },
                Value::Decimal(Decimal {
                    mantissa: m,
                    scale: s,
                }),
            );
        }
    }

    #[test]
    fn decimal_binary_matches_mysql() {
        // MySQL's example: DECIMAL(14,4) 1234567890.1234 is 81 0D FB 38 D2 04 D2.
        let mut out = Vec::new();
        decimal_to_bin(
            Decimal {
                mantissa: 12345678901234,
                scale: 4,
            },
            14,
            4,
            &mut out,
        );
        assert_eq!(out, [0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2]);
        out.clear();
        decimal_to_bin(
            Decimal {
                mantissa: -12345678901234,
                scale: 4,
            },
            14,
            4,
            &mut out,
        );
        assert_eq!(out, [0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D]);
    }

    #[test]
    fn wrong_sizes_are_4209() {
        let v = 5u64;
        let ty = ColumnType::Int {
            bytes: 4,
            unsigned: true,
        };
        // SAFETY: 8 readable bytes.
        let e = unsafe { from_ndb(&ty, "id", (&v as *const u64).cast(), 8) }.expect_err("size");
        assert_eq!(e.code, 4209);
        assert!(e.message.contains("'id'"), "{}", e.message);
    }
}
