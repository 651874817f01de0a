//! SQL results on the wire: what a data node answers an API node's `SqlReq` with
//! (`SqlConf`'s list of results), so that the client has the values — Python's
//! `execute` returns them as they are, and the shells render them as the mysql client
//! prints them (`sql::render`). Byte layout: `docs/wire-format.md` "Data path" (kind
//! 103).
//!
//! Limits: the lists obey the data path's list limit (`data::MAX_LIST` entries, and
//! never more than the bytes left); a frame is at most 16 MiB, which bounds a result
//! set. Decoding never panics.

use super::data::{bad, count, dec_values, enc_values};
use super::frame::WireError;
use crate::schema::codec::{Decoder, Encoder};
use crate::sql::SqlResult;

const ROWS: u8 = 0;
const AFFECTED: u8 = 1;

fn enc_opt_u64(e: &mut Encoder, v: Option<u64>) {
    match v {
        None => e.u8(0),
        Some(v) => {
            e.u8(1);
            e.u64(v);
        }
    }
}

/// A list of statement results.
pub(super) fn enc_sql_results(e: &mut Encoder, results: &[SqlResult]) {
    e.u32(results.len() as u32);
    for r in results {
        match r {
            SqlResult::Rows { columns, rows } => {
                e.u8(ROWS);
                e.u32(columns.len() as u32);
                for c in columns {
                    e.str(c);
                }
                e.u32(rows.len() as u32);
                for row in rows {
                    enc_values(e, row);
                }
            }
            SqlResult::Affected {
                rows,
                last_insert_id,
                info,
            } => {
                e.u8(AFFECTED);
                e.u64(*rows);
                enc_opt_u64(e, *last_insert_id);
                match info {
                    None => e.u8(0),
                    Some(i) => {
                        e.u8(1);
                        e.str(i);
                    }
                }
            }
        }
    }
}

fn flag(d: &mut Decoder<'_>, what: &'static str) -> Result<bool, WireError> {
    match d.u8().map_err(bad)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(WireError::BadValue(what)),
    }
}

pub(super) fn dec_sql_results(d: &mut Decoder<'_>) -> Result<Vec<SqlResult>, WireError> {
    let n = count(d, "SQL results")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(match d.u8().map_err(bad)? {
            ROWS => {
                let ncols = count(d, "result columns")?;
                let columns = (0..ncols)
                    .map(|_| d.str().map_err(bad))
                    .collect::<Result<Vec<_>, _>>()?;
                let nrows = count(d, "result rows")?;
                let mut rows = Vec::with_capacity(nrows);
                for _ in 0..nrows {
                    rows.push(dec_values(d)?);
                }
                SqlResult::Rows { columns, rows }
            }
            AFFECTED => {
                let rows = d.u64().map_err(bad)?;
                let last_insert_id = if flag(d, "last insert id flag")? {
                    Some(d.u64().map_err(bad)?)
                } else {
                    None
                };
                let info = if flag(d, "info flag")? {
                    Some(d.str().map_err(bad)?)
                } else {
                    None
                };
                SqlResult::Affected {
                    rows,
                    last_insert_id,
                    info,
                }
            }
            _ => return Err(WireError::BadValue("SQL result tag")),
        });
    }
    Ok(out)
}
