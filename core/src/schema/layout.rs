//! Row format: how a row's values are laid out in its fixed-size and var-size parts.
//!
//! Fixed-size part (one slot on a fixed page, size `fixed_size`, a multiple of 4):
//! ```text
//! offset 0   u32  header bits (owned by storage: FREE, ALLOC, LOCKED, VAR, version)
//! offset 4   u32  GCI of the last change (row GCI, needed by checkpoints and node restart)
//! offset 8   null bitmap, one bit per nullable column, ceil(n/8) bytes
//!            fixed-size columns, packed, little-endian
//!            var-part reference (u32) when the table has var-size columns
//!            padding to a multiple of 4
//! ```
//! A table with disk columns (STORAGE DISK) keeps them out of both parts: the fixed part
//! then holds an 8-byte disk reference (`DiskRef`: file_no u16, page_no u32, slot u16,
//! little-endian, all ones = none) before the var-part reference, and the disk columns
//! form the row's *disk image*, stored in one record of a disk row page: a fixed part and
//! a var part encoded exactly as above by the disk sub-layout (`RowLayout::disk`), the
//! fixed part's 8 header bytes holding the row id of the in-memory part (u32) and the
//! GCI (u32). Var-size disk columns take their actual length, not their maximum.
//!
//! Var-size part (one entry on a var page): `V` little-endian u16 end offsets (one per
//! var-size column, relative to the start of the data area), then the columns' bytes.
//! A NULL var column has length 0 and its null bit set.
//!
//! Stored column encodings: integers LE in their width (MEDIUMINT in 4 bytes); FLOAT and
//! DOUBLE as IEEE bits; DECIMAL as the mantissa at the column's scale (i64 for precision
//! <= 18, else i128); CHAR padded with spaces, BINARY with zero bytes; latin1 strings as
//! one byte per character, other strings as UTF-8; DATE packed `d | m<<5 | y<<9`;
//! DATETIME packed `yyyymmddhhmmss`; TIMESTAMP as epoch seconds; TIME as signed seconds;
//! a TEXT/BLOB head as u64 total length + the first inline bytes (the rest lives in the
//! hidden parts table).
//!
//! Key bytes (for the hash index and equality): per primary-key column, fixed non-string
//! columns as stored; strings as u16 length + bytes with trailing spaces removed
//! (PAD SPACE), so that equal keys have equal bytes and hash alike.

use super::table::Column;
use super::types::{Charset, ColumnType};
use super::value::{Date, Datetime, Decimal, Value};
use crate::error::{Result, codes};
use std::cmp::Ordering;

pub const ROW_HEADER_OFFSET: usize = 0;
pub const ROW_GCI_OFFSET: usize = 4;
/// The pseudo column NDB API calls `NdbDictionary::Column::ROW_GCI`: in a read or
/// scan's column list it gives the GCI (high word) of the row's last committed change
/// as `Value::UInt`. Reads and scans only; no table has a column at this position.
pub const ROW_GCI_COLUMN: usize = usize::MAX;
pub const NULL_BITMAP_OFFSET: usize = 8;
/// Largest fixed part NDB allows (error 851 beyond).
pub const MAX_FIXED_SIZE: u32 = 8052 + 8;
/// Largest var part (bounded by what fits on one var page with its directory entry).
pub const MAX_VAR_SIZE: u32 = 30000;
/// Largest disk image (fixed + var part of the disk columns): one record of a disk row
/// page, which holds 32 KB less the page header and one slot entry.
pub const MAX_DISK_RECORD_BYTES: u32 = 30000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColPlace {
    Fixed {
        offset: u32,
        size: u32,
    },
    /// Index among the var-size columns.
    Var {
        index: u32,
    },
    /// A STORAGE DISK column: column `index` of the disk sub-layout.
    Disk {
        index: u32,
    },
}

/// Where a row's disk part lives: a record (slot) of a disk row page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DiskRef {
    pub file_no: u16,
    pub page_no: u32,
    pub slot: u16,
}

impl DiskRef {
    const NONE: u64 = u64::MAX;

    pub fn to_u64(self) -> u64 {
        (self.file_no as u64) << 48 | (self.page_no as u64) << 16 | self.slot as u64
    }
    pub fn from_u64(v: u64) -> Option<DiskRef> {
        (v != Self::NONE).then_some(DiskRef {
            file_no: (v >> 48) as u16,
            page_no: (v >> 16) as u32,
            slot: v as u16,
        })
    }
}

/// A stored row as the read paths hand it out: its fixed part, its var part and its
/// disk image (empty for tables without disk columns, and when the reader asked for no
/// disk column). Decode columns with [`RowLayout::value`] / [`RowLayout::value_into`].
#[derive(Debug, Clone, Copy)]
pub struct StoredRow<'a> {
    pub fixed: &'a [u8],
    pub var: &'a [u8],
    pub disk: &'a [u8],
}

impl<'a> StoredRow<'a> {
    /// A row without a disk image.
    #[inline]
    pub fn memory(fixed: &'a [u8], var: &'a [u8]) -> StoredRow<'a> {
        StoredRow {
            fixed,
            var,
            disk: &[],
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColLayout {
    pub ty: ColumnType,
    pub null_bit: Option<u32>,
    pub place: ColPlace,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RowLayout {
    pub cols: Vec<ColLayout>,
    pub fixed_size: u32,
    pub null_bytes: u32,
    pub var_ref_offset: Option<u32>,
    pub var_cols: u32,
    pub pk: Vec<usize>,
    /// Fast path: the key is one fixed, non-string column stored at (offset, size).
    pub pk_fixed_slice: Option<(u32, u32)>,
    /// Offset of the 8-byte disk reference in the fixed part (tables with disk columns).
    pub disk_ref_offset: Option<u32>,
    /// Layout of the disk image (the disk columns, in table order).
    pub disk: Option<Box<RowLayout>>,
    /// Table column positions of the disk columns, in disk-layout order.
    pub disk_cols: Vec<usize>,
}

impl RowLayout {
    pub fn new(columns: &[Column], pk: &[usize]) -> Result<RowLayout> {
        use super::table::StorageType;
        let on_disk = |c: &Column| c.storage == StorageType::Disk;
        let nullable = columns.iter().filter(|c| c.nullable && !on_disk(c)).count() as u32;
        let null_bytes = nullable.div_ceil(8);
        let mut offset = NULL_BITMAP_OFFSET as u32 + null_bytes;
        let mut next_null = 0;
        let mut var_index = 0;
        let mut cols = Vec::with_capacity(columns.len());
        let mut disk_columns = Vec::new();
        let mut disk_cols = Vec::new();
        for (pos, c) in columns.iter().enumerate() {
            if on_disk(c) {
                cols.push(ColLayout {
                    ty: c.ty,
                    null_bit: None,
                    place: ColPlace::Disk {
                        index: disk_cols.len() as u32,
                    },
                });
                let mut m = c.clone();
                m.storage = StorageType::Memory;
                disk_columns.push(m);
                disk_cols.push(pos);
                continue;
            }
            let null_bit = if c.nullable {
                next_null += 1;
                Some(next_null - 1)
            } else {
                None
            };
            let place = if c.ty.is_var() {
                var_index += 1;
                ColPlace::Var {
                    index: var_index - 1,
                }
            } else {
                let size = c.ty.fixed_size();
                let p = ColPlace::Fixed { offset, size };
                offset += size;
                p
            };
            cols.push(ColLayout {
                ty: c.ty,
                null_bit,
                place,
            });
        }
        let (disk, disk_ref_offset) = if disk_columns.is_empty() {
            (None, None)
        } else {
            offset = offset.div_ceil(4) * 4;
            offset += 8;
            let sub = RowLayout::new(&disk_columns, &[])?;
            if sub.fixed_size + sub.max_var_bytes() > MAX_DISK_RECORD_BYTES {
                return Err(codes::row_too_big(format!(
                    "the disk part can reach {} bytes, at most {MAX_DISK_RECORD_BYTES} fit a disk page",
                    sub.fixed_size + sub.max_var_bytes()
                )));
            }
            (Some(Box::new(sub)), Some(offset - 8))
        };
        let var_ref_offset = if var_index > 0 {
            offset += 4;
            Some(offset - 4)
        } else {
            None
        };
        let fixed_size = offset.div_ceil(4) * 4;
        if fixed_size > MAX_FIXED_SIZE {
            return Err(codes::row_too_big(format!(
                "the fixed-size part is {fixed_size} bytes"
            )));
        }
        let max_var: u32 = columns
            .iter()
            .filter(|c| !on_disk(c))
            .map(|c| c.ty.max_var_bytes())
            .sum::<u32>()
            + 2 * var_index;
        if max_var > MAX_VAR_SIZE {
            return Err(codes::row_too_big(format!(
                "the var-size part can reach {max_var} bytes, at most {MAX_VAR_SIZE} are supported"
            )));
        }
        let pk_fixed_slice = match pk {
            [p] => match (cols[*p].place, cols[*p].ty) {
                (_, ColumnType::Char { .. }) => None,
                (ColPlace::Fixed { offset, size }, _) => Some((offset, size)),
                _ => None,
            },
            _ => None,
        };
        Ok(RowLayout {
            cols,
            fixed_size,
            null_bytes,
            var_ref_offset,
            var_cols: var_index,
            pk: pk.to_vec(),
            pk_fixed_slice,
            disk_ref_offset,
            disk,
            disk_cols,
        })
    }

    pub fn has_var(&self) -> bool {
        self.var_cols > 0
    }

    /// Largest var part a row can have.
    pub fn max_var_bytes(&self) -> u32 {
        self.cols
            .iter()
            .filter(|c| matches!(c.place, ColPlace::Var { .. }))
            .map(|c| c.ty.max_var_bytes())
            .sum::<u32>()
            + 2 * self.var_cols
    }

    /// Whether the table has STORAGE DISK columns.
    #[inline]
    pub fn has_disk(&self) -> bool {
        self.disk.is_some()
    }

    #[inline]
    pub fn is_disk(&self, col: usize) -> bool {
        matches!(self.cols[col].place, ColPlace::Disk { .. })
    }

    /// The disk reference stored in a fixed part (None: no disk record).
    #[inline]
    pub fn disk_ref(&self, fixed: &[u8]) -> Option<DiskRef> {
        let o = self.disk_ref_offset? as usize;
        let mut b = [0u8; 8];
        b.copy_from_slice(&fixed[o..o + 8]);
        DiskRef::from_u64(u64::from_le_bytes(b))
    }

    #[inline]
    pub fn set_disk_ref(&self, fixed: &mut [u8], r: Option<DiskRef>) {
        if let Some(o) = self.disk_ref_offset {
            let v = r.map_or(DiskRef::NONE, DiskRef::to_u64);
            fixed[o as usize..o as usize + 8].copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Encodes the disk columns of a full row (one value per table column) into a disk
    /// image, with `row` (the in-memory row id) and `gci` in its header.
    pub fn encode_disk(&self, values: &[Value], row: u32, gci: u32, out: &mut Vec<u8>) {
        out.clear();
        let Some(sub) = &self.disk else {
            return;
        };
        let proj: Vec<Value> = self.disk_cols.iter().map(|&c| values[c].clone()).collect();
        let mut var = Vec::new();
        sub.encode_row(&proj, out, &mut var);
        out[ROW_HEADER_OFFSET..ROW_HEADER_OFFSET + 4].copy_from_slice(&row.to_le_bytes());
        out[ROW_GCI_OFFSET..ROW_GCI_OFFSET + 4].copy_from_slice(&gci.to_le_bytes());
        out.extend_from_slice(&var);
    }

    /// Splits a disk image into its sub-layout's fixed and var parts (None when the image
    /// is shorter than the fixed part: a corrupt record).
    #[inline]
    pub fn split_disk<'a>(&self, image: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
        let sub = self.disk.as_ref()?;
        (image.len() >= sub.fixed_size as usize).then(|| image.split_at(sub.fixed_size as usize))
    }

    /// Row id and GCI from a disk image's header.
    pub fn disk_header(image: &[u8]) -> Option<(u32, u32)> {
        (image.len() >= 8).then(|| {
            (
                u32::from_le_bytes(fixed_4(image, 0)),
                u32::from_le_bytes(fixed_4(image, 4)),
            )
        })
    }

    #[inline]
    pub fn is_null(&self, col: usize, fixed: &[u8]) -> bool {
        match self.cols[col].null_bit {
            Some(bit) => fixed[NULL_BITMAP_OFFSET + (bit / 8) as usize] & (1 << (bit % 8)) != 0,
            None => false,
        }
    }

    /// The stored bytes of a column, or None when NULL. `var` is the row's var part.
    #[inline]
    pub fn col_bytes<'a>(&self, col: usize, fixed: &'a [u8], var: &'a [u8]) -> Option<&'a [u8]> {
        if self.is_null(col, fixed) {
            return None;
        }
        match self.cols[col].place {
            ColPlace::Fixed { offset, size } => {
                Some(&fixed[offset as usize..(offset + size) as usize])
            }
            ColPlace::Var { index } => Some(var_slice(var, self.var_cols, index)),
            ColPlace::Disk { .. } => {
                debug_assert!(false, "col_bytes of disk column {col}: read the disk image");
                None
            }
        }
    }

    /// The stored bytes of any column of a stored row (disk columns from its disk
    /// image), or None when NULL. A disk column of a row without a disk image reads as
    /// NULL (debug builds assert: the reader must fetch the image of disk columns).
    #[inline]
    pub fn stored_bytes_of<'a>(&self, col: usize, row: StoredRow<'a>) -> Option<&'a [u8]> {
        match (self.cols[col].place, &self.disk) {
            (ColPlace::Disk { index }, Some(sub)) => {
                debug_assert!(
                    !row.disk.is_empty(),
                    "disk column {col} read without its image"
                );
                let (f, v) = self.split_disk(row.disk)?;
                sub.col_bytes(index as usize, f, v)
            }
            _ => self.col_bytes(col, row.fixed, row.var),
        }
    }

    /// Decodes one column of a stored row.
    #[inline]
    pub fn value(&self, col: usize, row: StoredRow<'_>) -> Value {
        match self.stored_bytes_of(col, row) {
            None => Value::Null,
            Some(b) => decode_value(&self.cols[col].ty, b),
        }
    }

    /// Decodes one column of a stored row into `out`, reusing the allocation of a string
    /// `out` already holds (batched reads decode into the same buffers batch after batch).
    #[inline]
    pub fn value_into(&self, col: usize, row: StoredRow<'_>, out: &mut Value) {
        decode_into(&self.cols[col].ty, self.stored_bytes_of(col, row), out);
    }

    /// Decodes one in-memory column.
    pub fn get(&self, col: usize, fixed: &[u8], var: &[u8]) -> Value {
        match self.col_bytes(col, fixed, var) {
            None => Value::Null,
            Some(b) => decode_value(&self.cols[col].ty, b),
        }
    }

    /// Decodes one in-memory column into `out` (see [`RowLayout::value_into`]).
    #[inline]
    pub fn get_into(&self, col: usize, fixed: &[u8], var: &[u8], out: &mut Value) {
        decode_into(&self.cols[col].ty, self.col_bytes(col, fixed, var), out);
    }

    /// Builds the fixed part (header and GCI zero, var ref zero) and the var part from
    /// coerced values, one per column. NULL for a NOT NULL column is the caller's check.
    pub fn encode_row(&self, values: &[Value], fixed: &mut Vec<u8>, var: &mut Vec<u8>) {
        self.encode_row_keeping_heads(values, &[], fixed, var);
    }

    /// [`RowLayout::encode_row`] where `stored_heads[c]` marks BLOB/TEXT columns whose
    /// value is the stored head read back from a row (`decode_value` of a BLOB gives
    /// the head, not the value): those are kept as they are rather than encoded as a
    /// new value of the head's bytes. Empty: no such column.
    pub fn encode_row_keeping_heads(
        &self,
        values: &[Value],
        stored_heads: &[bool],
        fixed: &mut Vec<u8>,
        var: &mut Vec<u8>,
    ) {
        assert_eq!(
            values.len(),
            self.cols.len(),
            "encode_row needs one value per column"
        );
        fixed.clear();
        fixed.resize(self.fixed_size as usize, 0);
        var.clear();
        if self.var_cols > 0 {
            var.resize(2 * self.var_cols as usize, 0);
        }
        // No disk record yet: the row's disk reference is "none" until its insert
        // commits (callers that copy a fixed part keep the row's own reference).
        self.set_disk_ref(fixed, None);
        let data_start = 2 * self.var_cols as usize;
        for (i, (c, v)) in self.cols.iter().zip(values).enumerate() {
            if v.is_null()
                && let Some(bit) = c.null_bit
            {
                fixed[NULL_BITMAP_OFFSET + (bit / 8) as usize] |= 1 << (bit % 8);
            }
            match c.place {
                ColPlace::Fixed { offset, size } => {
                    if !v.is_null() {
                        let dst = &mut fixed[offset as usize..(offset + size) as usize];
                        encode_fixed(&c.ty, v, dst);
                    }
                }
                ColPlace::Var { index } => {
                    match v {
                        Value::Null => {}
                        Value::Bytes(head) if stored_heads.get(i) == Some(&true) => {
                            var.extend_from_slice(head)
                        }
                        _ => encode_var(&c.ty, v, var),
                    }
                    let end = (var.len() - data_start) as u16;
                    var[2 * index as usize..2 * index as usize + 2]
                        .copy_from_slice(&end.to_le_bytes());
                }
                // Encoded separately into the disk image (encode_disk).
                ColPlace::Disk { .. } => {}
            }
        }
    }

    /// Decodes every column.
    pub fn decode_row(&self, fixed: &[u8], var: &[u8]) -> Vec<Value> {
        (0..self.cols.len())
            .map(|c| self.get(c, fixed, var))
            .collect()
    }

    /// Key bytes of a row's primary key (see the module docs).
    pub fn row_key(&self, fixed: &[u8], var: &[u8], out: &mut Vec<u8>) {
        out.clear();
        for &c in &self.pk {
            let b = self.col_bytes(c, fixed, var).unwrap_or(&[]);
            push_key_part(&self.cols[c].ty, b, out);
        }
    }

    /// True when the row's primary key equals `key` (key bytes).
    #[inline]
    pub fn row_key_eq(&self, fixed: &[u8], var: &[u8], key: &[u8], scratch: &mut Vec<u8>) -> bool {
        if let Some((off, size)) = self.pk_fixed_slice {
            return fixed_key_eq(&fixed[off as usize..(off + size) as usize], key);
        }
        self.row_key(fixed, var, scratch);
        scratch.as_slice() == key
    }

    /// Key bytes from the primary key values (coerced, in key order).
    pub fn key_from_values(&self, values: &[Value], out: &mut Vec<u8>) {
        out.clear();
        for (&c, v) in self.pk.iter().zip(values) {
            let ty = &self.cols[c].ty;
            match ty {
                ColumnType::Char { .. }
                | ColumnType::Varchar { .. }
                | ColumnType::Varbinary { .. } => {
                    let mut buf = Vec::new();
                    encode_stored(ty, v, &mut buf);
                    push_key_part(ty, &buf, out);
                }
                // Fixed, non-string: the stored bytes are the key part.
                _ => encode_stored(ty, v, out),
            }
        }
    }

    /// Compares two rows on the given columns (ordered-index order: NULL first).
    pub fn cmp_rows(&self, cols: &[usize], a: (&[u8], &[u8]), b: (&[u8], &[u8])) -> Ordering {
        for &c in cols {
            let x = self.col_bytes(c, a.0, a.1);
            let y = self.col_bytes(c, b.0, b.1);
            let o = cmp_opt(&self.cols[c].ty, x, y);
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Compares a row's columns with a bound given as stored bytes per column (None =
    /// NULL); only the first `bound.len()` columns are compared (prefix bounds).
    pub fn cmp_row_bound(
        &self,
        cols: &[usize],
        row: (&[u8], &[u8]),
        bound: &[Option<Vec<u8>>],
    ) -> Ordering {
        for (&c, bv) in cols.iter().zip(bound) {
            let x = self.col_bytes(c, row.0, row.1);
            let o = cmp_opt(&self.cols[c].ty, x, bv.as_deref());
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Stored bytes for a value of column `col` (for bounds).
    pub fn stored_bytes(&self, col: usize, v: &Value) -> Option<Vec<u8>> {
        if v.is_null() {
            return None;
        }
        let mut b = Vec::new();
        encode_stored(&self.cols[col].ty, v, &mut b);
        Some(b)
    }

    #[inline]
    pub fn var_ref(&self, fixed: &[u8]) -> Option<u32> {
        self.var_ref_offset
            .map(|o| u32::from_le_bytes(fixed_4(fixed, o as usize)))
    }

    #[inline]
    pub fn set_var_ref(&self, fixed: &mut [u8], r: u32) {
        if let Some(o) = self.var_ref_offset {
            fixed[o as usize..o as usize + 4].copy_from_slice(&r.to_le_bytes());
        }
    }
}

/// Decodes stored bytes (None = NULL) into `out`, reusing a string allocation.
#[inline]
fn decode_into(ty: &ColumnType, bytes: Option<&[u8]>, out: &mut Value) {
    match (bytes, ty, &mut *out) {
        (Some(b), ColumnType::Varchar { charset, .. }, Value::Str(s))
            if *charset != Charset::Latin1 =>
        {
            if let Ok(text) = std::str::from_utf8(b) {
                s.clear();
                s.push_str(text);
                return;
            }
            *out = decode_value(ty, b);
        }
        (Some(b), _, _) => *out = decode_value(ty, b),
        (None, _, _) => *out = Value::Null,
    }
}

/// Equality of a fixed key slice with key bytes; 4- and 8-byte keys compare as integers
/// (no memcmp call on the hot path).
#[inline(always)]
pub fn fixed_key_eq(a: &[u8], b: &[u8]) -> bool {
    match (a.len(), b.len()) {
        (8, 8) => {
            u64::from_ne_bytes(a.try_into().unwrap_or([0; 8]))
                == u64::from_ne_bytes(b.try_into().unwrap_or([1; 8]))
        }
        (4, 4) => {
            u32::from_ne_bytes(a.try_into().unwrap_or([0; 4]))
                == u32::from_ne_bytes(b.try_into().unwrap_or([1; 4]))
        }
        _ => a == b,
    }
}

#[inline]
fn fixed_4(b: &[u8], o: usize) -> [u8; 4] {
    [b[o], b[o + 1], b[o + 2], b[o + 3]]
}

#[inline]
fn var_slice(var: &[u8], var_cols: u32, index: u32) -> &[u8] {
    let data_start = 2 * var_cols as usize;
    let end = u16::from_le_bytes([var[2 * index as usize], var[2 * index as usize + 1]]) as usize;
    let start = if index == 0 {
        0
    } else {
        u16::from_le_bytes([var[2 * index as usize - 2], var[2 * index as usize - 1]]) as usize
    };
    &var[data_start + start..data_start + end]
}

fn cmp_opt(ty: &ColumnType, x: Option<&[u8]>, y: Option<&[u8]>) -> Ordering {
    match (x, y) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => cmp_stored(ty, a, b),
    }
}

fn push_key_part(ty: &ColumnType, stored: &[u8], out: &mut Vec<u8>) {
    match ty {
        ColumnType::Char { .. } | ColumnType::Varchar { .. } | ColumnType::Varbinary { .. } => {
            let b = if matches!(ty, ColumnType::Varbinary { .. }) {
                stored
            } else {
                trim_spaces(stored)
            };
            out.extend_from_slice(&(b.len() as u16).to_le_bytes());
            out.extend_from_slice(b);
        }
        _ => out.extend_from_slice(stored),
    }
}

#[inline]
fn trim_spaces(b: &[u8]) -> &[u8] {
    let mut n = b.len();
    while n > 0 && b[n - 1] == b' ' {
        n -= 1;
    }
    &b[..n]
}

fn le_i64(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    let v = i64::from_le_bytes(a);
    // sign-extend narrower encodings
    let bits = 8 * b.len().min(8) as u32;
    if bits < 64 {
        (v << (64 - bits)) >> (64 - bits)
    } else {
        v
    }
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(a)
}

fn le_i128(b: &[u8]) -> i128 {
    if b.len() == 16 {
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        i128::from_le_bytes(a)
    } else {
        le_i64(b) as i128
    }
}

/// Typed comparison of two stored encodings of the same column type.
pub fn cmp_stored(ty: &ColumnType, a: &[u8], b: &[u8]) -> Ordering {
    match *ty {
        ColumnType::Int { unsigned: true, .. } => le_u64(a).cmp(&le_u64(b)),
        ColumnType::Int {
            unsigned: false, ..
        }
        | ColumnType::Time => le_i64(a).cmp(&le_i64(b)),
        ColumnType::Float => {
            f32::from_bits(le_u64(a) as u32).total_cmp(&f32::from_bits(le_u64(b) as u32))
        }
        ColumnType::Double => f64::from_bits(le_u64(a)).total_cmp(&f64::from_bits(le_u64(b))),
        ColumnType::Decimal { .. } => le_i128(a).cmp(&le_i128(b)),
        ColumnType::Date | ColumnType::Datetime | ColumnType::Timestamp => {
            le_u64(a).cmp(&le_u64(b))
        }
        ColumnType::Char { .. } | ColumnType::Varchar { .. } => trim_spaces(a).cmp(trim_spaces(b)),
        ColumnType::Binary { .. } | ColumnType::Varbinary { .. } | ColumnType::Blob { .. } => {
            a.cmp(b)
        }
    }
}

fn string_bytes(v: &Value, charset: Charset) -> Vec<u8> {
    let s: std::borrow::Cow<'_, str> = match v {
        Value::Str(s) => s.as_str().into(),
        Value::Bytes(b) => String::from_utf8_lossy(b),
        other => other.to_string().into(),
    };
    match charset {
        Charset::Latin1 => s.chars().map(|c| c as u32 as u8).collect(),
        _ => s.as_bytes().to_vec(),
    }
}

fn decode_string(b: &[u8], charset: Charset) -> String {
    match charset {
        Charset::Latin1 => b.iter().map(|&c| c as char).collect(),
        _ => match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        },
    }
}

/// Encodes a (coerced) value in its stored form, appending to `out`. For fixed types the
/// result has exactly the column's fixed size; strings are not padded here.
pub fn encode_stored(ty: &ColumnType, v: &Value, out: &mut Vec<u8>) {
    match *ty {
        ColumnType::Char { charset, .. } | ColumnType::Varchar { charset, .. } => {
            out.extend(string_bytes(v, charset))
        }
        ColumnType::Binary { .. } | ColumnType::Varbinary { .. } => match v {
            Value::Bytes(b) => out.extend_from_slice(b),
            Value::Str(s) => out.extend_from_slice(s.as_bytes()),
            _ => {}
        },
        ColumnType::Blob { charset, .. } => {
            let bytes = match (v, charset) {
                (_, Some(cs)) => string_bytes(v, cs),
                (Value::Bytes(b), None) => b.clone(),
                (Value::Str(s), None) => s.as_bytes().to_vec(),
                _ => Vec::new(),
            };
            out.extend_from_slice(&bytes);
        }
        _ => {
            let start = out.len();
            out.resize(start + ty.fixed_size() as usize, 0);
            encode_fixed(ty, v, &mut out[start..]);
        }
    }
}

fn encode_fixed(ty: &ColumnType, v: &Value, dst: &mut [u8]) {
    match *ty {
        ColumnType::Int { .. } => {
            let n = v.as_i128().unwrap_or(0);
            let b = (n as i64).to_le_bytes();
            let len = dst.len();
            dst.copy_from_slice(&b[..len]);
        }
        ColumnType::Float => {
            dst.copy_from_slice(&(v.as_f64().unwrap_or(0.0) as f32).to_bits().to_le_bytes())
        }
        ColumnType::Double => {
            dst.copy_from_slice(&v.as_f64().unwrap_or(0.0).to_bits().to_le_bytes())
        }
        ColumnType::Decimal { .. } => {
            let m = match v {
                Value::Decimal(d) => d.mantissa,
                _ => 0,
            };
            let b = m.to_le_bytes();
            let len = dst.len();
            dst.copy_from_slice(&b[..len]);
        }
        ColumnType::Char { charset, .. } => {
            let b = string_bytes(v, charset);
            let n = b.len().min(dst.len());
            dst[..n].copy_from_slice(&b[..n]);
            dst[n..].fill(b' ');
        }
        ColumnType::Binary { .. } => {
            let b: &[u8] = match v {
                Value::Bytes(b) => b,
                Value::Str(s) => s.as_bytes(),
                _ => &[],
            };
            let n = b.len().min(dst.len());
            dst[..n].copy_from_slice(&b[..n]);
            dst[n..].fill(0);
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
            dst.copy_from_slice(&d.pack().to_le_bytes());
        }
        ColumnType::Datetime => {
            let p = match v {
                Value::Datetime(d) => d.pack(),
                _ => 0,
            };
            dst.copy_from_slice(&p.to_le_bytes());
        }
        ColumnType::Timestamp => {
            let s = match v {
                Value::Datetime(d) => d.epoch_seconds() as u32,
                _ => 0,
            };
            dst.copy_from_slice(&s.to_le_bytes());
        }
        ColumnType::Time => {
            let s = match v {
                Value::Time(t) => *t,
                _ => 0,
            };
            dst.copy_from_slice(&s.to_le_bytes());
        }
        ColumnType::Varchar { .. } | ColumnType::Varbinary { .. } | ColumnType::Blob { .. } => {}
    }
}

fn encode_var(ty: &ColumnType, v: &Value, var: &mut Vec<u8>) {
    match *ty {
        ColumnType::Blob { kind, .. } => {
            let mut all = Vec::new();
            encode_stored(ty, v, &mut all);
            var.extend_from_slice(&(all.len() as u64).to_le_bytes());
            let inline = all.len().min(kind.inline_size() as usize);
            var.extend_from_slice(&all[..inline]);
        }
        _ => encode_stored(ty, v, var),
    }
}

/// Decodes a stored encoding. For a BLOB/TEXT column this returns the stored head as
/// bytes; see [`blob_head`].
pub fn decode_value(ty: &ColumnType, b: &[u8]) -> Value {
    match *ty {
        ColumnType::Int { unsigned: true, .. } => Value::UInt(le_u64(b)),
        ColumnType::Int {
            unsigned: false, ..
        } => Value::Int(le_i64(b)),
        ColumnType::Float => Value::Float(f32::from_bits(le_u64(b) as u32)),
        ColumnType::Double => Value::Double(f64::from_bits(le_u64(b))),
        ColumnType::Decimal { scale, .. } => Value::Decimal(Decimal {
            mantissa: le_i128(b),
            scale,
        }),
        ColumnType::Char { charset, .. } => Value::Str(decode_string(trim_spaces(b), charset)),
        ColumnType::Varchar { charset, .. } => Value::Str(decode_string(b, charset)),
        ColumnType::Binary { .. } | ColumnType::Varbinary { .. } => Value::Bytes(b.to_vec()),
        ColumnType::Date => Value::Date(Date::unpack(le_u64(b) as u32)),
        ColumnType::Datetime => Value::Datetime(Datetime::unpack(le_u64(b))),
        ColumnType::Timestamp => Value::Datetime(Datetime::from_epoch_seconds(le_u64(b) as i64)),
        ColumnType::Time => Value::Time(le_i64(b) as i32),
        // The stored head (u64 total length + inline bytes); the API completes it from
        // the parts table with `blob_head` and `decode_blob`.
        ColumnType::Blob { .. } => Value::Bytes(b.to_vec()),
    }
}

/// Splits a stored BLOB/TEXT head into (total length, inline bytes).
pub fn blob_head(b: &[u8]) -> (u64, &[u8]) {
    if b.len() < 8 {
        return (0, &[]);
    }
    (le_u64(&b[..8]), &b[8..])
}

/// Decodes the full bytes of a TEXT/BLOB value assembled from head and parts.
pub fn decode_blob(ty: &ColumnType, all: Vec<u8>) -> Value {
    match ty {
        ColumnType::Blob {
            charset: Some(cs), ..
        } => Value::Str(decode_string(&all, *cs)),
        _ => Value::Bytes(all),
    }
}

/// Encodes a TEXT/BLOB value to its full byte string (for splitting into parts).
pub fn blob_bytes(ty: &ColumnType, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_stored(ty, v, &mut out);
    out
}

/// Seed of the stable key hash. Never change it: partition placement and the hash
/// index depend on it (a stored or replicated row must hash alike on every node and run).
pub const KEY_HASH_SEED: u64 = 0x4e44_425f_5244_4231; // "NDB_RDB1"

/// Stable 64-bit hash of key bytes (xxh3). The low bits choose the partition, the high
/// 32 bits address the hash index inside the fragment.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, KEY_HASH_SEED)
}

/// Hash-index bits of a key hash.
#[inline]
pub fn index_hash(h: u64) -> u32 {
    (h >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::types::BlobKind;

    fn cols() -> Vec<Column> {
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
                "a",
                ColumnType::Int {
                    bytes: 4,
                    unsigned: false,
                },
            ),
            Column::new(
                "b",
                ColumnType::Varchar {
                    len: 32,
                    charset: Charset::Utf8mb4,
                },
            ),
            Column::new(
                "c",
                ColumnType::Char {
                    len: 4,
                    charset: Charset::Latin1,
                },
            ),
            Column::new(
                "d",
                ColumnType::Blob {
                    kind: BlobKind::Regular,
                    charset: None,
                },
            ),
        ]
    }

    #[test]
    fn bench_table_fixed_part_is_small() {
        let c = &cols()[..3];
        let l = RowLayout::new(c, &[0]).expect("layout");
        // header 4 + gci 4 + null bitmap 1 + id 8 + a 4 + var ref 4 = 25 -> 28
        assert_eq!(l.fixed_size, 28);
        assert_eq!(l.pk_fixed_slice, Some((9, 8)));
    }

    #[test]
    fn encode_decode_round_trip() {
        let c = cols();
        let l = RowLayout::new(&c, &[0]).expect("layout");
        let vals = vec![
            Value::UInt(7),
            Value::Null,
            Value::Str("héllo".into()),
            Value::Str("ab".into()),
            Value::Bytes(vec![9; 300]),
        ];
        let (mut f, mut v) = (Vec::new(), Vec::new());
        l.encode_row(&vals, &mut f, &mut v);
        assert_eq!(f.len(), l.fixed_size as usize);
        let back = l.decode_row(&f, &v);
        assert_eq!(back[0], Value::UInt(7));
        assert_eq!(back[1], Value::Null);
        assert_eq!(back[2], Value::Str("héllo".into()));
        assert_eq!(back[3], Value::Str("ab".into()));
        let Value::Bytes(head) = &back[4] else {
            panic!("blob head is bytes")
        };
        assert_eq!(blob_head(head), (300, &[9u8; 256][..]));
        let head = l.col_bytes(4, &f, &v).map(blob_head);
        assert_eq!(head.map(|h| h.0), Some(300));
        let mut key = Vec::new();
        l.key_from_values(&[Value::UInt(7)], &mut key);
        let mut scratch = Vec::new();
        assert!(l.row_key_eq(&f, &v, &key, &mut scratch));
    }

    #[test]
    fn typed_comparison() {
        let i = ColumnType::Int {
            bytes: 4,
            unsigned: false,
        };
        let mut a = Vec::new();
        let mut b = Vec::new();
        encode_stored(&i, &Value::Int(-5), &mut a);
        encode_stored(&i, &Value::Int(3), &mut b);
        assert_eq!(cmp_stored(&i, &a, &b), Ordering::Less);
        let c = ColumnType::Char {
            len: 4,
            charset: Charset::Latin1,
        };
        assert_eq!(cmp_stored(&c, b"ab  ", b"ab"), Ordering::Equal);
        let d = ColumnType::Date;
        let (mut x, mut y) = (Vec::new(), Vec::new());
        encode_stored(
            &d,
            &Value::Date(Date {
                year: 2020,
                month: 12,
                day: 31,
            }),
            &mut x,
        );
        encode_stored(
            &d,
            &Value::Date(Date {
                year: 2021,
                month: 1,
                day: 1,
            }),
            &mut y,
        );
        assert_eq!(cmp_stored(&d, &x, &y), Ordering::Less);
    }

    #[test]
    fn composite_string_key_ignores_trailing_spaces() {
        let c = vec![
            Column::new(
                "id",
                ColumnType::Varchar {
                    len: 32,
                    charset: Charset::Utf8mb3,
                },
            )
            .primary_key(),
            Column::new(
                "name",
                ColumnType::Varchar {
                    len: 32,
                    charset: Charset::Latin1,
                },
            )
            .primary_key(),
        ];
        let l = RowLayout::new(&c, &[0, 1]).expect("layout");
        let (mut k1, mut k2) = (Vec::new(), Vec::new());
        l.key_from_values(&[Value::Str("a".into()), Value::Str("b ".into())], &mut k1);
        l.key_from_values(&[Value::Str("a".into()), Value::Str("b".into())], &mut k2);
        assert_eq!(k1, k2);
        let (mut f, mut v) = (Vec::new(), Vec::new());
        l.encode_row(
            &[Value::Str("a".into()), Value::Str("b".into())],
            &mut f,
            &mut v,
        );
        let mut s = Vec::new();
        assert!(l.row_key_eq(&f, &v, &k1, &mut s));
    }
}
