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

/// Bytes of `SqlConf`'s frame left for its results: the rest (request, error,
/// variables: a variable is at most 64 KiB, and few are set) stays far below this.
pub const MAX_SQL_RESULTS_BYTES: usize = super::frame::MAX_PAYLOAD_BYTES - (1 << 20);

/// The bytes `results` take on the wire, or None past [`MAX_SQL_RESULTS_BYTES`]
/// (counted row by row, in a scratch buffer of one row; it stops there).
pub fn sql_results_wire_bytes(results: &[SqlResult]) -> Option<usize> {
    let mut e = Encoder::new();
    let mut total = 4usize;
    for r in results {
        match r {
            SqlResult::Rows { columns, rows } => {
                total += 1 + 4 + 4;
                total += columns.iter().map(|c| 4 + c.len()).sum::<usize>();
                for row in rows {
                    enc_values(&mut e, row);
                    total += e.len();
                    e.clear();
                    if total > MAX_SQL_RESULTS_BYTES {
                        return None;
                    }
                }
            }
            SqlResult::Affected { .. } => {
                enc_sql_results(&mut e, std::slice::from_ref(r));
                total += e.len() - 4;
                e.clear();
            }
        }
        if total > MAX_SQL_RESULTS_BYTES {
            return None;
        }
    }
    Some(total)
}

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
                let last_insert_id = if d.bool().map_err(bad)? {
                    Some(d.u64().map_err(bad)?)
                } else {
                    None
                };
                let info = if d.bool().map_err(bad)? {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Value;

    fn encoded(results: &[SqlResult]) -> Vec<u8> {
        let mut e = Encoder::new();
        enc_sql_results(&mut e, results);
        e.into_bytes()
    }

    #[test]
    fn the_counted_size_is_the_encoded_size_and_stops_past_the_limit() {
        let results = vec![
            SqlResult::Rows {
                columns: vec!["id".into(), "name".into()],
                rows: (0..50)
                    .map(|i| vec![Value::Int(i), Value::Str(format!("row {i}"))])
                    .collect(),
            },
            SqlResult::Affected {
                rows: 2,
                last_insert_id: Some(9),
                info: Some("Rows matched: 2  Changed: 2  Warnings: 0".into()),
            },
            SqlResult::Rows {
                columns: vec!["x".into()],
                rows: Vec::new(),
            },
        ];
        let bytes = encoded(&results);
        assert_eq!(sql_results_wire_bytes(&results), Some(bytes.len()));
        let mut d = Decoder::new(&bytes);
        assert_eq!(dec_sql_results(&mut d).expect("decode"), results);
        assert_eq!(d.remaining(), 0);
        assert_eq!(sql_results_wire_bytes(&[]), Some(encoded(&[]).len()));
        // 17 rows of 1 MiB: past what one answer carries.
        let big = vec![SqlResult::Rows {
            columns: vec!["v".into()],
            rows: (0..17)
                .map(|_| vec![Value::Str("x".repeat(1 << 20))])
                .collect(),
        }];
        assert_eq!(sql_results_wire_bytes(&big), None);
    }

    #[test]
    fn a_bad_tag_or_flag_is_refused() {
        let mut bytes = encoded(&[SqlResult::Affected {
            rows: 1,
            last_insert_id: None,
            info: None,
        }]);
        bytes[4] = 7;
        assert!(dec_sql_results(&mut Decoder::new(&bytes)).is_err());
        bytes[4] = AFFECTED;
        bytes[13] = 2;
        assert!(dec_sql_results(&mut Decoder::new(&bytes)).is_err());
        // Truncated.
        assert!(dec_sql_results(&mut Decoder::new(&bytes[..10])).is_err());
    }
}
