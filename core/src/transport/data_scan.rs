//! Scan messages of the data path (NDB's SCAN_TABREQ / SCAN_NEXTREQ / SCAN_TABCONF):
//! an API node opens a committed-read scan of one table on one data node of each node
//! group, and fetches its rows batch by batch. A scan of a transaction (`ScanReq::txn`)
//! reads in that transaction's local transaction where the node holds one, so it sees
//! the transaction's own uncommitted changes. Byte layout: `docs/wire-format.md`
//! "Data path" (kinds 115–118).
//!
//! Limits: a batch is at most [`MAX_SCAN_BATCH_ROWS`] rows (NDB's
//! MAX_PARALLEL_OP_PER_SCAN); the answering node also stops a batch once it holds
//! [`MAX_SCAN_BATCH_BYTES`] of values, so a batch of wide rows stays far below a
//! frame's 16 MiB. Decoding never panics.

use super::data::TxnKey;
use super::frame::WireError;
use crate::schema::Value;
use crate::schema::codec::{Decoder, Encoder};

/// Rows per scan batch, at most (NDB's MAX_PARALLEL_OP_PER_SCAN).
pub const MAX_SCAN_BATCH_ROWS: u32 = 992;
/// Bytes of values per scan batch, about at most (NDB's BatchByteSize is 256 KiB per
/// fragment; one node answers for all the fragments of its group here).
pub const MAX_SCAN_BATCH_BYTES: usize = 1 << 20;

/// A bound of an ordered-index range scan: values of a prefix of the index's columns,
/// and whether the bound itself is included.
pub type WireBound = Option<(Vec<Value>, bool)>;

/// API → data node: open a scan and return its first batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanReq {
    pub req: u64,
    /// The API node's id for the scan (its later messages name it).
    pub scan: u64,
    pub database: String,
    pub table: String,
    /// An ordered index's name for a range scan; empty for a table scan.
    pub index: String,
    /// Column positions to return; empty returns every visible column.
    pub columns: Vec<u32>,
    pub low: WireBound,
    pub high: WireBound,
    pub descending: bool,
    /// In index order across the node's partitions (index scans only).
    pub sorted: bool,
    /// Rows per batch (clamped to `1..=MAX_SCAN_BATCH_ROWS`).
    pub batch_rows: u32,
    /// A pushed condition (NDB's pushed condition / NdbScanFilter): a statement
    /// `SELECT * FROM t [AS a] WHERE <condition>` over the requested columns; only
    /// rows for which it is true are returned. Empty: every row.
    pub filter: String,
    /// The transaction the scan is part of (its TC node and id there): the node reads
    /// in that transaction's local transaction when it holds one, seeing its
    /// uncommitted rows. None: committed rows only.
    pub txn: Option<TxnKey>,
}

/// Data node → API: a batch of a scan, or its error (the scan is then closed).
#[derive(Debug, Clone, PartialEq)]
pub struct ScanConf {
    pub req: u64,
    pub scan: u64,
    pub code: u32,
    /// The error's `ErrorClassification` (0 with code 0).
    pub class: u8,
    pub message: String,
    /// Values per row.
    pub ncols: u32,
    /// The batch's rows, flattened (`ncols` values each).
    pub values: Vec<Value>,
    /// No row follows: the data node has closed the scan.
    pub done: bool,
}

fn enc_bound(e: &mut Encoder, b: &WireBound) {
    match b {
        None => e.u8(0),
        Some((vs, inclusive)) => {
            e.u8(if *inclusive { 2 } else { 1 });
            super::data::enc_values(e, vs);
        }
    }
}

fn dec_bound(d: &mut Decoder<'_>) -> Result<WireBound, WireError> {
    match d.u8().map_err(super::data::bad)? {
        0 => Ok(None),
        1 => Ok(Some((super::data::dec_values(d)?, false))),
        2 => Ok(Some((super::data::dec_values(d)?, true))),
        _ => Err(WireError::BadValue("bound tag")),
    }
}

impl ScanReq {
    pub(super) fn encode(&self, e: &mut Encoder) {
        e.u64(self.req);
        e.u64(self.scan);
        e.str(&self.database);
        e.str(&self.table);
        e.str(&self.index);
        super::data::enc_u32s(e, &self.columns);
        enc_bound(e, &self.low);
        enc_bound(e, &self.high);
        e.u8(u8::from(self.descending)
            | (u8::from(self.sorted) << 1)
            | (u8::from(self.txn.is_some()) << 2));
        e.u32(self.batch_rows);
        e.str(&self.filter);
        if let Some(t) = &self.txn {
            super::data::enc_txn(e, t);
        }
    }

    pub(super) fn decode(d: &mut Decoder<'_>) -> Result<ScanReq, WireError> {
        let bad = super::data::bad;
        let (req, scan) = (d.u64().map_err(bad)?, d.u64().map_err(bad)?);
        let database = d.str().map_err(bad)?;
        let table = d.str().map_err(bad)?;
        let index = d.str().map_err(bad)?;
        let columns = super::data::dec_u32s(d)?;
        let low = dec_bound(d)?;
        let high = dec_bound(d)?;
        let flags = d.u8().map_err(bad)?;
        if flags > 7 {
            return Err(WireError::BadValue("scan flags"));
        }
        let batch_rows = d.u32().map_err(bad)?;
        let filter = d.str().map_err(bad)?;
        let txn = if flags & 4 != 0 {
            Some(super::data::dec_txn(d)?)
        } else {
            None
        };
        Ok(ScanReq {
            req,
            scan,
            database,
            table,
            index,
            columns,
            low,
            high,
            descending: flags & 1 != 0,
            sorted: flags & 2 != 0,
            batch_rows,
            filter,
            txn,
        })
    }
}

impl ScanConf {
    pub(super) fn encode(&self, e: &mut Encoder) {
        e.u64(self.req);
        e.u64(self.scan);
        e.u32(self.code);
        e.u8(self.class);
        e.str(&self.message);
        e.u32(self.ncols);
        super::data::enc_values(e, &self.values);
        e.bool(self.done);
    }

    pub(super) fn decode(d: &mut Decoder<'_>) -> Result<ScanConf, WireError> {
        let bad = super::data::bad;
        let (req, scan) = (d.u64().map_err(bad)?, d.u64().map_err(bad)?);
        let (code, class, message) = (
            d.u32().map_err(bad)?,
            d.u8().map_err(bad)?,
            d.str().map_err(bad)?,
        );
        let ncols = d.u32().map_err(bad)?;
        let values = super::data::dec_values(d)?;
        // Paired with the node's check: whole rows only.
        if (ncols == 0 && !values.is_empty()) || (ncols > 0 && values.len() % ncols as usize != 0) {
            return Err(WireError::BadValue("scan batch is not whole rows"));
        }
        Ok(ScanConf {
            req,
            scan,
            code,
            class,
            message,
            ncols,
            values,
            done: d.bool().map_err(bad)?,
        })
    }

    /// The batch's rows.
    pub fn rows(self) -> Vec<Vec<Value>> {
        let n = self.ncols as usize;
        if n == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(self.values.len() / n);
        let mut it = self.values.into_iter();
        loop {
            let row: Vec<Value> = it.by_ref().take(n).collect();
            if row.is_empty() {
                return out;
            }
            out.push(row);
        }
    }
}

/// Bytes a value takes in a batch, about (for [`MAX_SCAN_BATCH_BYTES`]): its
/// variable part plus a word.
pub fn value_bytes(v: &Value) -> usize {
    8 + match v {
        Value::Str(s) => s.len(),
        Value::Bytes(b) => b.len(),
        _ => 8,
    }
}
