//! A versioned little-endian binary codec for table definitions (what DBDICT keeps in
//! its schema file): [`encode_table_def`] / [`decode_table_def`] over an [`Encoder`] /
//! [`Decoder`], and the file frame ([`seal_file`] / [`open_file`]) with a magic, a
//! format version and a CRC-32C over the whole file. Byte layout: `docs/schema-file.md`.
//!
//! Invariants:
//! - `decode(encode(def))` is `def` exactly: every field of every column (type with its
//!   lengths, charset, precision; default value bit for bit; flags; storage), the key,
//!   the indexes, logging and tablespace; the row layout is recomputed from them.
//! - Decoding never panics and never trusts a length: every read is bounds-checked, every
//!   enum tag and size is validated, and a decoded table is rebuilt through
//!   [`TableDef::new`] (which validates it) and must come out identical to what was read
//!   (a definition `TableDef::new` would change is not canonical and is rejected).
//!   Every failure is error 2316 (`codes::corrupt_schema_file`).

use super::table::{Column, IndexDef, IndexKind, StorageType, TableDef};
use super::types::{BlobKind, Charset, ColumnType};
use super::value::{Date, Datetime, Decimal, Value};
use crate::error::{NdbError, Result, codes};

/// Bytes before the body: magic (4), version (2), reserved (2), body length (8).
pub const FILE_HEADER_BYTES: usize = 16;
/// Bytes after the body: CRC-32C of everything before it.
pub const FILE_TRAILER_BYTES: usize = 4;
/// Largest length a CHAR/VARCHAR/BINARY/VARBINARY column may declare in a decoded
/// definition (MySQL's row limit; keeps size arithmetic far from overflow).
pub const MAX_DECODED_COLUMN_LEN: u32 = 65_535;

fn corrupt(what: impl std::fmt::Display) -> NdbError {
    codes::corrupt_schema_file(what)
}

/// Appends little-endian fields to a buffer.
#[derive(Default)]
pub struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder::default()
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
    /// Bytes appended so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// Forgets what was appended (the buffer is kept for reuse).
    pub fn clear(&mut self) {
        self.buf.clear();
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn bool(&mut self, v: bool) {
        self.u8(v as u8);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i128(&mut self, v: i128) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A count or position that must fit in u16 (columns ≤ 512, indexes ≤ 64).
    pub fn len16(&mut self, n: usize) {
        assert!(
            n <= u16::MAX as usize,
            "count {n} does not fit the schema format"
        );
        self.u16(n as u16);
    }
    /// u32 length then the bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        assert!(
            b.len() <= u32::MAX as usize,
            "blob too long for the schema format"
        );
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
    }
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
            None => self.u8(0),
        }
    }
}

/// Reads little-endian fields, every read bounds-checked (error 2316 past the end).
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder { buf, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Error unless every byte was read.
    pub fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(corrupt(format_args!(
                "{} unread bytes after the last field",
                self.remaining()
            )));
        }
        Ok(())
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(corrupt(format_args!(
                "truncated: {n} bytes wanted at offset {}, {} left",
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(corrupt(format_args!("boolean byte {v}"))),
        }
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i128(&mut self) -> Result<i128> {
        Ok(i128::from_le_bytes(self.array()?))
    }
    pub fn len16(&mut self) -> Result<usize> {
        Ok(self.u16()? as usize)
    }
    pub fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    pub fn str(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| corrupt("string is not UTF-8"))
    }
    pub fn opt_str(&mut self) -> Result<Option<String>> {
        Ok(if self.bool()? {
            Some(self.str()?)
        } else {
            None
        })
    }
}

/// Frames `body`: header (magic, version, body length), body, CRC-32C of all before it.
pub fn seal_file(magic: [u8; 4], version: u16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_HEADER_BYTES + body.len() + FILE_TRAILER_BYTES);
    out.extend_from_slice(&magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Verifies a framed file (length, CRC, magic, version) and returns its body.
pub fn open_file(bytes: &[u8], magic: [u8; 4], version: u16) -> Result<&[u8]> {
    if bytes.len() < FILE_HEADER_BYTES + FILE_TRAILER_BYTES {
        return Err(corrupt(format_args!(
            "file of {} bytes is too short",
            bytes.len()
        )));
    }
    let (framed, trailer) = bytes.split_at(bytes.len() - FILE_TRAILER_BYTES);
    let mut t = Decoder::new(trailer);
    let stored_crc = t.u32()?;
    if crc32c::crc32c(framed) != stored_crc {
        return Err(corrupt("checksum mismatch"));
    }
    let mut h = Decoder::new(&framed[..FILE_HEADER_BYTES]);
    if h.array::<4>()? != magic {
        return Err(corrupt("bad magic"));
    }
    let v = h.u16()?;
    if v != version {
        return Err(corrupt(format_args!(
            "format version {v}, this build reads {version}"
        )));
    }
    if h.u16()? != 0 {
        return Err(corrupt("reserved header bytes are not zero"));
    }
    let body_len = h.u64()?;
    let body = &framed[FILE_HEADER_BYTES..];
    if body_len != body.len() as u64 {
        return Err(corrupt(format_args!(
            "header says {body_len} body bytes, file has {}",
            body.len()
        )));
    }
    Ok(body)
}

// ---- column types and values ----------------------------------------------------------

fn charset_code(c: Charset) -> u8 {
    match c {
        Charset::Latin1 => 1,
        Charset::Utf8mb3 => 2,
        Charset::Utf8mb4 => 3,
    }
}

fn charset_of(code: u8) -> Result<Charset> {
    Ok(match code {
        1 => Charset::Latin1,
        2 => Charset::Utf8mb3,
        3 => Charset::Utf8mb4,
        v => return Err(corrupt(format_args!("charset code {v}"))),
    })
}

fn blob_kind_code(k: BlobKind) -> u8 {
    match k {
        BlobKind::Tiny => 1,
        BlobKind::Regular => 2,
        BlobKind::Medium => 3,
        BlobKind::Long => 4,
    }
}

fn blob_kind_of(code: u8) -> Result<BlobKind> {
    Ok(match code {
        1 => BlobKind::Tiny,
        2 => BlobKind::Regular,
        3 => BlobKind::Medium,
        4 => BlobKind::Long,
        v => return Err(corrupt(format_args!("blob kind code {v}"))),
    })
}

pub fn encode_type(e: &mut Encoder, ty: &ColumnType) {
    match *ty {
        ColumnType::Int { bytes, unsigned } => {
            e.u8(1);
            e.u8(bytes);
            e.bool(unsigned);
        }
        ColumnType::Float => e.u8(2),
        ColumnType::Double => e.u8(3),
        ColumnType::Decimal { precision, scale } => {
            e.u8(4);
            e.u8(precision);
            e.u8(scale);
        }
        ColumnType::Char { len, charset } => {
            e.u8(5);
            e.u32(len);
            e.u8(charset_code(charset));
        }
        ColumnType::Varchar { len, charset } => {
            e.u8(6);
            e.u32(len);
            e.u8(charset_code(charset));
        }
        ColumnType::Binary { len } => {
            e.u8(7);
            e.u32(len);
        }
        ColumnType::Varbinary { len } => {
            e.u8(8);
            e.u32(len);
        }
        ColumnType::Date => e.u8(9),
        ColumnType::Datetime => e.u8(10),
        ColumnType::Timestamp => e.u8(11),
        ColumnType::Time => e.u8(12),
        ColumnType::Blob { kind, charset } => {
            e.u8(13);
            e.u8(blob_kind_code(kind));
            e.u8(charset.map_or(0, charset_code));
        }
    }
}

fn column_len(d: &mut Decoder) -> Result<u32> {
    let len = d.u32()?;
    if len > MAX_DECODED_COLUMN_LEN {
        return Err(corrupt(format_args!("column length {len}")));
    }
    Ok(len)
}

pub fn decode_type(d: &mut Decoder) -> Result<ColumnType> {
    Ok(match d.u8()? {
        1 => {
            let bytes = d.u8()?;
            if !matches!(bytes, 1 | 2 | 3 | 4 | 8) {
                return Err(corrupt(format_args!("integer of {bytes} bytes")));
            }
            ColumnType::Int {
                bytes,
                unsigned: d.bool()?,
            }
        }
        2 => ColumnType::Float,
        3 => ColumnType::Double,
        4 => {
            let (precision, scale) = (d.u8()?, d.u8()?);
            if !(1..=38).contains(&precision) || scale > precision {
                return Err(corrupt(format_args!("decimal({precision},{scale})")));
            }
            ColumnType::Decimal { precision, scale }
        }
        5 => ColumnType::Char {
            len: column_len(d)?,
            charset: charset_of(d.u8()?)?,
        },
        6 => ColumnType::Varchar {
            len: column_len(d)?,
            charset: charset_of(d.u8()?)?,
        },
        7 => ColumnType::Binary {
            len: column_len(d)?,
        },
        8 => ColumnType::Varbinary {
            len: column_len(d)?,
        },
        9 => ColumnType::Date,
        10 => ColumnType::Datetime,
        11 => ColumnType::Timestamp,
        12 => ColumnType::Time,
        13 => {
            let kind = blob_kind_of(d.u8()?)?;
            let charset = match d.u8()? {
                0 => None,
                c => Some(charset_of(c)?),
            };
            ColumnType::Blob { kind, charset }
        }
        t => return Err(corrupt(format_args!("column type tag {t}"))),
    })
}

fn encode_date(e: &mut Encoder, d: &Date) {
    e.u16(d.year);
    e.u8(d.month);
    e.u8(d.day);
}

fn decode_date(d: &mut Decoder) -> Result<Date> {
    let (year, month, day) = (d.u16()?, d.u8()?, d.u8()?);
    Date::new(year, month, day).ok_or_else(|| corrupt(format_args!("date {year}-{month}-{day}")))
}

/// A value, bit for bit (floats by their IEEE bits).
pub fn encode_value(e: &mut Encoder, v: &Value) {
    match v {
        Value::Null => e.u8(0),
        Value::Int(i) => {
            e.u8(1);
            e.u64(*i as u64);
        }
        Value::UInt(u) => {
            e.u8(2);
            e.u64(*u);
        }
        Value::Float(f) => {
            e.u8(3);
            e.u32(f.to_bits());
        }
        Value::Double(f) => {
            e.u8(4);
            e.u64(f.to_bits());
        }
        Value::Decimal(d) => {
            e.u8(5);
            e.i128(d.mantissa);
            e.u8(d.scale);
        }
        Value::Str(s) => {
            e.u8(6);
            e.str(s);
        }
        Value::Bytes(b) => {
            e.u8(7);
            e.bytes(b);
        }
        Value::Date(d) => {
            e.u8(8);
            encode_date(e, d);
        }
        Value::Datetime(dt) => {
            e.u8(9);
            encode_date(e, &dt.date);
            e.u8(dt.hour);
            e.u8(dt.minute);
            e.u8(dt.second);
        }
        Value::Time(t) => {
            e.u8(10);
            e.u32(*t as u32);
        }
    }
}

pub fn decode_value(d: &mut Decoder) -> Result<Value> {
    Ok(match d.u8()? {
        0 => Value::Null,
        1 => Value::Int(d.u64()? as i64),
        2 => Value::UInt(d.u64()?),
        3 => Value::Float(f32::from_bits(d.u32()?)),
        4 => Value::Double(f64::from_bits(d.u64()?)),
        5 => {
            let mantissa = d.i128()?;
            Value::Decimal(Decimal {
                mantissa,
                scale: d.u8()?,
            })
        }
        6 => Value::Str(d.str()?),
        7 => Value::Bytes(d.bytes()?),
        8 => Value::Date(decode_date(d)?),
        9 => {
            let date = decode_date(d)?;
            let (hour, minute, second) = (d.u8()?, d.u8()?, d.u8()?);
            if hour > 23 || minute > 59 || second > 59 {
                return Err(corrupt(format_args!("time {hour}:{minute}:{second}")));
            }
            Value::Datetime(Datetime {
                date,
                hour,
                minute,
                second,
            })
        }
        10 => Value::Time(d.u32()? as i32),
        t => return Err(corrupt(format_args!("value tag {t}"))),
    })
}

// ---- table definitions ---------------------------------------------------------------

const FLAG_NULLABLE: u8 = 1;
const FLAG_PRIMARY_KEY: u8 = 2;
const FLAG_AUTO_INCREMENT: u8 = 4;
const FLAG_HIDDEN: u8 = 8;
const FLAG_DISK: u8 = 16;
const FLAG_HAS_DEFAULT: u8 = 32;
const FLAGS_KNOWN: u8 = 63;

fn encode_column(e: &mut Encoder, c: &Column) {
    e.str(&c.name);
    encode_type(e, &c.ty);
    let mut flags = 0;
    for (on, bit) in [
        (c.nullable, FLAG_NULLABLE),
        (c.primary_key, FLAG_PRIMARY_KEY),
        (c.auto_increment, FLAG_AUTO_INCREMENT),
        (c.hidden, FLAG_HIDDEN),
        (c.storage == StorageType::Disk, FLAG_DISK),
        (c.default.is_some(), FLAG_HAS_DEFAULT),
    ] {
        if on {
            flags |= bit;
        }
    }
    e.u8(flags);
    if let Some(v) = &c.default {
        encode_value(e, v);
    }
}

fn decode_column(d: &mut Decoder) -> Result<Column> {
    let name = d.str()?;
    let ty = decode_type(d)?;
    let flags = d.u8()?;
    if flags & !FLAGS_KNOWN != 0 {
        return Err(corrupt(format_args!("column '{name}': flags {flags:#x}")));
    }
    let default = if flags & FLAG_HAS_DEFAULT != 0 {
        let v = decode_value(d)?;
        if !is_canonical_default(&ty, &v) {
            return Err(corrupt(format_args!(
                "column '{name}': a {} default for a {ty} column",
                v.kind()
            )));
        }
        Some(v)
    } else {
        None
    };
    Ok(Column {
        name,
        ty,
        nullable: flags & FLAG_NULLABLE != 0,
        primary_key: flags & FLAG_PRIMARY_KEY != 0,
        auto_increment: flags & FLAG_AUTO_INCREMENT != 0,
        default,
        storage: if flags & FLAG_DISK != 0 {
            StorageType::Disk
        } else {
            StorageType::Memory
        },
        hidden: flags & FLAG_HIDDEN != 0,
    })
}

/// The kind of value `TableDef::new` leaves as a default of a column of type `ty` (so
/// that re-coercing it on decode is the identity and never does arithmetic on garbage).
fn is_canonical_default(ty: &ColumnType, v: &Value) -> bool {
    match (ty, v) {
        (_, Value::Null) => true,
        (ColumnType::Int { unsigned, .. }, Value::UInt(_)) => *unsigned,
        (ColumnType::Int { unsigned, .. }, Value::Int(_)) => !*unsigned,
        (ColumnType::Float, Value::Float(_)) | (ColumnType::Double, Value::Double(_)) => true,
        (ColumnType::Decimal { scale, .. }, Value::Decimal(d)) => d.scale == *scale,
        (ColumnType::Char { .. } | ColumnType::Varchar { .. }, Value::Str(_)) => true,
        (ColumnType::Binary { .. } | ColumnType::Varbinary { .. }, Value::Bytes(_)) => true,
        (ColumnType::Blob { charset, .. }, Value::Str(_)) => charset.is_some(),
        (ColumnType::Blob { charset, .. }, Value::Bytes(_)) => charset.is_none(),
        (ColumnType::Date, Value::Date(_)) => true,
        (ColumnType::Datetime | ColumnType::Timestamp, Value::Datetime(_)) => true,
        (ColumnType::Time, Value::Time(_)) => true,
        _ => false,
    }
}

fn index_kind_code(k: IndexKind) -> u8 {
    match k {
        IndexKind::OrderedIndex => 1,
        IndexKind::UniqueHashIndex => 2,
    }
}

/// A table definition (the layout is not stored: it is computed from the columns).
pub fn encode_table_def(e: &mut Encoder, t: &TableDef) {
    e.u32(t.id);
    e.str(&t.name);
    e.u32(t.partitions);
    e.bool(t.logging);
    e.opt_str(t.tablespace.as_deref());
    e.len16(t.columns.len());
    for c in &t.columns {
        encode_column(e, c);
    }
    e.len16(t.primary_key.len());
    for &p in &t.primary_key {
        e.len16(p);
    }
    e.len16(t.indexes.len());
    for i in &t.indexes {
        e.str(&i.name);
        e.u8(index_kind_code(i.kind));
        e.len16(i.columns.len());
        for &c in &i.columns {
            e.len16(c);
        }
    }
}

/// Column names at `positions`, each checked to be in range.
fn names_at(columns: &[Column], positions: &[usize], what: &str) -> Result<Vec<String>> {
    positions
        .iter()
        .map(|&p| {
            columns
                .get(p)
                .map(|c| c.name.clone())
                .ok_or_else(|| corrupt(format_args!("{what}: column position {p}")))
        })
        .collect()
}

fn decode_positions(d: &mut Decoder) -> Result<Vec<usize>> {
    let n = d.len16()?;
    (0..n).map(|_| d.len16()).collect()
}

/// Decodes and validates a definition (see the module invariants).
pub fn decode_table_def(d: &mut Decoder) -> Result<TableDef> {
    let id = d.u32()?;
    let name = d.str()?;
    let partitions = d.u32()?;
    if partitions == 0 {
        return Err(corrupt(format_args!("table '{name}': 0 partitions")));
    }
    let logging = d.bool()?;
    let tablespace = d.opt_str()?;
    let ncols = d.len16()?;
    let mut columns = Vec::with_capacity(ncols.min(d.remaining()));
    for _ in 0..ncols {
        columns.push(decode_column(d)?);
    }
    let primary_key = decode_positions(d)?;
    let nidx = d.len16()?;
    let mut indexes = Vec::with_capacity(nidx.min(d.remaining()));
    for _ in 0..nidx {
        let iname = d.str()?;
        let kind = match d.u8()? {
            1 => IndexKind::OrderedIndex,
            2 => IndexKind::UniqueHashIndex,
            k => return Err(corrupt(format_args!("index '{iname}': kind {k}"))),
        };
        indexes.push(IndexDef {
            name: iname,
            kind,
            columns: decode_positions(d)?,
        });
    }
    let what = format!("table '{name}' (id {id})");
    if primary_key.is_empty() {
        return Err(corrupt(format_args!("{what}: no primary key")));
    }
    let pk_names = names_at(&columns, &primary_key, &what)?;
    let index_specs = indexes
        .iter()
        .map(|i| {
            Ok((
                i.name.clone(),
                i.kind,
                names_at(&columns, &i.columns, &what)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut def = TableDef::new(
        id,
        &name,
        columns.clone(),
        &pk_names,
        index_specs,
        partitions,
    )
    .map_err(|e| corrupt(format_args!("{what}: {e}")))?;
    def.logging = logging;
    def.tablespace = tablespace;
    if def.columns != columns
        || def.primary_key != primary_key
        || def.indexes != indexes
        || def.partitions != partitions
    {
        return Err(corrupt(format_args!("{what}: definition is not canonical")));
    }
    Ok(def)
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
