//! SELECT over TCP in a cluster of several node groups: a data node holds only its own
//! group's partitions, so the API node runs the statement itself
//! (`sql::TableSelect`): it parses, binds and plans it as a session does, reads the
//! plan's access path from every node group — primary-key reads sent to each key's
//! partition ([`RemoteCluster::read_batch`]), table and ordered-index scans of every
//! group ([`RemoteCluster::scan`], merged in index order when the plan needs it) — and
//! evaluates WHERE, grouping, aggregates, ORDER BY and LIMIT over those rows. A WHERE
//! that depends on the row alone is pushed to the scans (`sql::RowFilter`), so the
//! data nodes return only the rows it holds true for.
//!
//! Reads are committed reads, as NDB's for a SELECT without a lock clause: each
//! statement over TCP is its own transaction, so a row lock (FOR UPDATE, LOCK IN SHARE
//! MODE) would be released as the statement ends; those read the latest committed rows
//! too. A scan brings the columns the statement uses, in bounded batches
//! ([`SCAN_BATCH_ROWS`] per group).

use super::remote::RemoteCluster;
use super::remote_scan::RemoteScanSpec;
use super::remote_session::SessionRows;
use super::remote_sql::{RETRY_BUDGET, backoff};
use crate::error::Result;
use crate::schema::{TableDef, Value};
use crate::sql::{Access, SqlResult, TableRead, TableSelect};
use crate::transport::data::RowChange;
use std::sync::Arc;

/// Rows per scan batch and node group.
pub const SCAN_BATCH_ROWS: u32 = 512;
/// Primary keys per read request.
const KEYS_PER_READ: usize = 1000;

impl RemoteCluster {
    /// Runs a SELECT of an NDB table over every node group; its result set. `own`: an
    /// open session transaction's rows, read in place of the committed ones.
    /// `read_set`: every committed row the statement read is added to it, every column
    /// (a session's FOR UPDATE / LOCK IN SHARE MODE, checked at its COMMIT).
    pub(super) fn select_result(
        self: &Arc<Self>,
        q: &TableSelect,
        own: Option<&SessionRows>,
        mut read_set: Option<&mut Vec<RowChange>>,
    ) -> Result<SqlResult> {
        let t0 = std::time::Instant::now();
        let deadline = t0 + RETRY_BUDGET;
        let mut attempt = 0u32;
        loop {
            let db = q.database()?;
            let def = self.table(db, &q.table).map_err(|e| q.lookup_error(e))?;
            let own = own.filter(|o| o.of_table(db, &def.name).next().is_some());
            if let Some(set) = read_set.as_deref_mut() {
                set.clear();
            }
            let every = read_set.is_some();
            let r = q.run(&def, own.is_some(), &mut |read, sink| {
                let mut took = |row: &[Value]| {
                    if let Some(set) = read_set.as_deref_mut() {
                        set.push(RowChange {
                            database: db.to_string(),
                            table: def.name.clone(),
                            key: def.primary_key.iter().map(|&p| row[p].clone()).collect(),
                            before: Some(row.to_vec()),
                            after: Some(row.to_vec()),
                        });
                    }
                };
                self.read_for_select(
                    db,
                    &def,
                    read,
                    own,
                    q.pushed_condition(),
                    every,
                    &mut took,
                    sink,
                )
            });
            match r {
                Ok(result) => return Ok(result),
                // A node lost or starting mid-scan: the rows already taken cannot be
                // told apart from the rest, so the statement reads again from the start.
                // Temporary errors (4010 a lost node, 4035 a starting one, 488 too many
                // scans, ...) are retried for up to `RETRY_BUDGET`.
                Err(e) if e.is_temporary() && std::time::Instant::now() < deadline => {
                    attempt += 1;
                    if e.code == 4035 {
                        self.note_not_ready(&e);
                    }
                    std::thread::sleep(backoff(attempt, t0.elapsed().as_nanos() as u64));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads `read`'s access path: each row, full width (columns not fetched are NULL),
    /// to `sink` until it returns false. With `own` (a session transaction's rows, some
    /// of this table), its rows replace the committed ones: key reads take them in
    /// place, scans skip the committed rows it wrote and return its rows at the end
    /// (the plan does not rely on order then, `plan::for_writer`).
    ///
    /// `every`: read every column (a locking read whose rows `took` is given, each
    /// committed row read, for the session to check at COMMIT).
    #[allow(clippy::too_many_arguments)]
    fn read_for_select(
        self: &Arc<Self>,
        db: &str,
        def: &TableDef,
        read: TableRead<'_>,
        own: Option<&SessionRows>,
        pushed: Option<String>,
        every: bool,
        took: &mut dyn FnMut(&[Value]),
        sink: &mut dyn FnMut(Vec<Value>) -> Result<bool>,
    ) -> Result<()> {
        // A statement that names no column reads the hidden key of a table without a
        // primary key; any visible column counts its rows as well.
        let mut fetch: Vec<usize> = read
            .cols
            .iter()
            .copied()
            .filter(|&c| !def.columns[c].hidden)
            .collect();
        if fetch.is_empty() {
            fetch.extend(def.visible_columns().map(|(i, _)| i).take(1));
        }
        if own.is_some() {
            // The key of each row read, to know the rows the transaction wrote.
            fetch.extend(def.primary_key.iter().copied());
        }
        if every {
            fetch.extend(def.visible_columns().map(|(i, _)| i));
        }
        fetch.sort_unstable();
        fetch.dedup();
        let key_at: Vec<usize> = def
            .primary_key
            .iter()
            .filter_map(|p| fetch.iter().position(|c| c == p))
            .collect();
        let columns: Vec<u32> = fetch.iter().map(|&c| c as u32).collect();
        let width = def.columns.len();
        let widen = |r: Vec<Value>| -> Vec<Value> {
            let mut full = vec![Value::Null; width];
            for (v, &c) in r.into_iter().zip(&fetch) {
                full[c] = v;
            }
            full
        };
        let mut spec = RemoteScanSpec::table(db, &def.name);
        spec.columns = columns.clone();
        spec.batch_rows = SCAN_BATCH_ROWS;
        spec.filter = pushed;
        match read.access {
            Access::Empty => return Ok(()),
            Access::Keys(keys) => {
                for chunk in keys.chunks(KEYS_PER_READ) {
                    // Each key's row in key order: the transaction's, or read.
                    let mut mine: Vec<Option<Option<Vec<Value>>>> = Vec::with_capacity(chunk.len());
                    for k in chunk {
                        mine.push(match own {
                            Some(o) => o.lookup(self, db, &def.name, k)?.map(|r| r.cloned()),
                            None => None,
                        });
                    }
                    let to_read: Vec<Vec<Value>> = chunk
                        .iter()
                        .zip(&mine)
                        .filter(|(_, m)| m.is_none())
                        .map(|(k, _)| k.clone())
                        .collect();
                    let mut read_rows = if to_read.is_empty() {
                        Vec::new()
                    } else {
                        self.read_batch(db, &def.name, &to_read, &columns)?
                    }
                    .into_iter();
                    for m in mine {
                        let row = match m {
                            Some(Some(full)) => Some(full),
                            Some(None) => None,
                            None => read_rows.next().flatten().map(&widen).inspect(|r| took(r)),
                        };
                        if let Some(row) = row
                            && !sink(row)?
                        {
                            return Ok(());
                        }
                    }
                }
                return Ok(());
            }
            Access::Full => {}
            Access::Range {
                index,
                low,
                high,
                descending,
                sorted,
            } => {
                spec.index = Some(def.indexes[*index].name.clone());
                spec.low = low.clone();
                spec.high = high.clone();
                spec.descending = *descending;
                spec.sorted = *sorted;
            }
        }
        let mut scan = self.scan(spec)?;
        while let Some(r) = scan.next_row()? {
            if let Some(o) = own {
                let key: Vec<Value> = key_at.iter().map(|&i| r[i].clone()).collect();
                if o.lookup(self, db, &def.name, &key)?.is_some() {
                    continue;
                }
            }
            let row = widen(r);
            took(&row);
            if !sink(row)? {
                scan.close();
                return Ok(());
            }
        }
        for r in own.into_iter().flat_map(|o| o.of_table(db, &def.name)) {
            if let Some(full) = &r.after
                && !sink(full.clone())?
            {
                break;
            }
        }
        Ok(())
    }
}
