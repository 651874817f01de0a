//! Scans (NdbScanOperation, NdbIndexScanOperation): full-table scans and ordered-index
//! range scans, fetched from each partition's primary replica in batches.
//!
//! A batch is read under the fragment's mutex, which is released between batches, so a
//! long scan never blocks writers for longer than one batch. A table scan resumes by row
//! id; an index scan resumes after the last returned entry by its key (the index may
//! change in between). Scans with `sorted` merge the partitions in index order (NDB's
//! SF_OrderBy); others return partition by partition. Locking scans (LM_Read,
//! LM_Exclusive) keep their locks until the transaction ends, like NDB's scans with
//! lock take-over.

use super::dict::TableRuntime;
use super::transaction::Transaction;
use crate::error::{Result, codes};
use crate::schema::Value;
use crate::schema::layout::ROW_GCI_COLUMN;
use crate::schema::value::coerce;
use crate::storage::RowId;
use crate::txn::fragment::{RowRef, ScanCursor, Step};
use crate::txn::lock::LockMode;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// Default rows per batch and fragment (NDB's BatchSize is 256).
pub const DEFAULT_SCAN_BATCH: usize = 256;
/// Upper bound on a batch (MAX_PARALLEL_OP_PER_SCAN is 992; we allow larger in-process).
pub const MAX_SCAN_BATCH: usize = 8192;

/// What to scan.
#[derive(Clone)]
pub struct ScanSpec {
    pub table: Arc<TableRuntime>,
    /// Ordered index (position in the table's indexes) for a range scan.
    pub index: Option<usize>,
    /// Bounds on a prefix of the index columns, with inclusiveness.
    pub low: Option<(Vec<Value>, bool)>,
    pub high: Option<(Vec<Value>, bool)>,
    pub descending: bool,
    /// Merge partitions in index order (index scans only).
    pub sorted: bool,
    pub mode: LockMode,
    /// Columns to return (positions); None = every visible column.
    pub columns: Option<Vec<usize>>,
    pub batch_size: usize,
}

impl ScanSpec {
    pub fn table(table: Arc<TableRuntime>) -> ScanSpec {
        ScanSpec {
            table,
            index: None,
            low: None,
            high: None,
            descending: false,
            sorted: false,
            mode: LockMode::CommittedRead,
            columns: None,
            batch_size: DEFAULT_SCAN_BATCH,
        }
    }
}

type StoredBound = (Vec<Option<Vec<u8>>>, bool);

struct PartCursor {
    next_row: Option<RowId>,
    resume: Option<(RowId, Vec<Option<Vec<u8>>>)>,
    ended: bool,
    buffer: VecDeque<Vec<Value>>,
    /// The data node whose replica the scan reads this partition from (0: none yet).
    node: u32,
    /// Open from the first batch until the partition ends: OPTIMIZE moves no row of
    /// the replica meanwhile (the position is a row id, or an index key and row id).
    position: Option<ScanCursor>,
}

/// An open scan; rows come from [`Transaction::scan_next`].
pub struct Scan {
    spec: ScanSpec,
    /// Requested columns.
    cols: Vec<usize>,
    /// Fetched columns: requested, then the key (for BLOB parts), then the index
    /// columns (for sorted merges).
    fetch: Vec<usize>,
    key_at: usize,
    index_at: usize,
    low: Option<StoredBound>,
    high: Option<StoredBound>,
    parts: Vec<PartCursor>,
    current: usize,
    closed: bool,
    has_blobs: bool,
}

impl Scan {
    pub fn columns(&self) -> &[usize] {
        &self.cols
    }
    pub fn is_closed(&self) -> bool {
        self.closed
    }
    pub fn close(&mut self) {
        self.closed = true;
        self.parts.clear();
    }
}

fn to_stored(
    table: &TableRuntime,
    index: usize,
    bound: &(Vec<Value>, bool),
) -> Result<StoredBound> {
    let def = &table.def;
    let icols = &def.indexes[index].columns;
    if bound.0.len() > icols.len() {
        return Err(codes::bad_argument(format!(
            "bound has {} values, index '{}' has {} columns",
            bound.0.len(),
            def.indexes[index].name,
            icols.len()
        )));
    }
    let mut out = Vec::with_capacity(bound.0.len());
    for (v, &c) in bound.0.iter().zip(icols) {
        let col = &def.columns[c];
        let v = coerce(v.clone(), &col.ty, &col.name)?;
        out.push(def.layout.stored_bytes(c, &v));
    }
    Ok((out, bound.1))
}

impl Transaction {
    /// Opens a scan.
    pub fn scan(&mut self, spec: ScanSpec) -> Result<Scan> {
        self.usable()?;
        spec.table.check_live()?;
        let def = spec.table.def.clone();
        if let Some(i) = spec.index {
            if i >= def.indexes.len()
                || def.indexes[i].kind != crate::schema::IndexKind::OrderedIndex
            {
                return Err(codes::bad_argument("range scans need an ordered index"));
            }
        } else if spec.low.is_some() || spec.high.is_some() || spec.sorted {
            return Err(codes::bad_argument(
                "bounds and sorting need an ordered index",
            ));
        }
        let cols: Vec<usize> = match &spec.columns {
            Some(c) => c.clone(),
            None => def.visible_columns().map(|(i, _)| i).collect(),
        };
        let has_blobs = cols
            .iter()
            .any(|&c| c != ROW_GCI_COLUMN && def.columns[c].ty.is_blob());
        let mut fetch = cols.clone();
        let key_at = fetch.len();
        if has_blobs {
            fetch.extend(def.primary_key.iter().copied());
        }
        let index_at = fetch.len();
        if let (Some(i), true) = (spec.index, spec.sorted) {
            fetch.extend(def.indexes[i].columns.iter().copied());
        }
        let (low, high) = match spec.index {
            Some(i) => (
                spec.low
                    .as_ref()
                    .map(|b| to_stored(&spec.table, i, b))
                    .transpose()?,
                spec.high
                    .as_ref()
                    .map(|b| to_stored(&spec.table, i, b))
                    .transpose()?,
            ),
            None => (None, None),
        };
        let parts = (0..spec.table.fragments.len())
            .map(|_| PartCursor {
                next_row: Some(RowId(0)),
                resume: None,
                ended: false,
                buffer: VecDeque::new(),
                node: 0,
                position: None,
            })
            .collect();
        let mut spec = spec;
        spec.batch_size = spec.batch_size.clamp(1, MAX_SCAN_BATCH);
        Ok(Scan {
            spec,
            cols,
            fetch,
            key_at,
            index_at,
            low,
            high,
            parts,
            current: 0,
            closed: false,
            has_blobs,
        })
    }

    /// The next row of the scan (requested columns), or None at the end.
    pub fn scan_next(&mut self, scan: &mut Scan) -> Result<Option<Vec<Value>>> {
        if scan.closed {
            return Err(codes::scan_closed());
        }
        self.usable()?;
        if scan.spec.sorted {
            return self.next_sorted(scan);
        }
        loop {
            if scan.current >= scan.parts.len() {
                scan.closed = true;
                return Ok(None);
            }
            let p = scan.current;
            if let Some(row) = scan.parts[p].buffer.pop_front() {
                return self.finish_row(scan, row).map(Some);
            }
            if scan.parts[p].ended {
                scan.parts[p].position = None;
                scan.current += 1;
                continue;
            }
            self.fetch_batch(scan, p)?;
        }
    }

    /// Up to `max` rows; an empty vector means the scan ended.
    pub fn scan_next_batch(&mut self, scan: &mut Scan, max: usize) -> Result<Vec<Vec<Value>>> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.scan_next(scan)? {
                Some(r) => out.push(r),
                None => break,
            }
        }
        Ok(out)
    }

    fn next_sorted(&mut self, scan: &mut Scan) -> Result<Option<Vec<Value>>> {
        for p in 0..scan.parts.len() {
            while scan.parts[p].buffer.is_empty() && !scan.parts[p].ended {
                self.fetch_batch(scan, p)?;
            }
        }
        let ia = scan.index_at;
        let desc = scan.spec.descending;
        let mut best: Option<usize> = None;
        for p in 0..scan.parts.len() {
            let Some(head) = scan.parts[p].buffer.front() else {
                continue;
            };
            best = match best {
                None => Some(p),
                Some(b) => {
                    let cur = &scan.parts[b].buffer[0];
                    let o = cmp_keys(&head[ia..], &cur[ia..]);
                    let better = if desc {
                        o == std::cmp::Ordering::Greater
                    } else {
                        o == std::cmp::Ordering::Less
                    };
                    if better { Some(p) } else { Some(b) }
                }
            };
        }
        match best {
            None => {
                scan.closed = true;
                Ok(None)
            }
            Some(p) => {
                let row = scan.parts[p].buffer.pop_front().unwrap_or_default();
                self.finish_row(scan, row).map(Some)
            }
        }
    }

    fn finish_row(&mut self, scan: &Scan, mut row: Vec<Value>) -> Result<Vec<Value>> {
        if scan.has_blobs {
            let key: Vec<Value> =
                row[scan.key_at..scan.key_at + scan.spec.table.def.primary_key.len()].to_vec();
            let n = scan.cols.len();
            let table = scan.spec.table.clone();
            self.finish_blobs(&table, &key, &scan.cols, &mut row[..n])?;
        }
        row.truncate(scan.cols.len());
        Ok(row)
    }

    /// Fetches one batch of partition `p` into its buffer.
    fn fetch_batch(&mut self, scan: &mut Scan, p: usize) -> Result<()> {
        let table = scan.spec.table.clone();
        table.check_live()?;
        // A scan's position is a row id of the replica it started on: it stays there
        // while that replica is live (another one may have become primary since); if
        // its node stopped, the scan cannot go on elsewhere (NDB: the scan fails with
        // the node, a temporary error).
        let started_on = scan.parts[p].node;
        let cell = if started_on == 0 {
            table.primary_or_err(p)?.clone()
        } else {
            match table.fragments[p]
                .iter()
                .find(|c| c.node_id == started_on && c.is_live())
            {
                Some(c) => c.clone(),
                None => {
                    return Err(codes::node_failure_abort().detail(format!(
                        "node {started_on}, which this scan was reading partition {p} from, stopped"
                    )));
                }
            }
        };
        scan.parts[p].node = cell.node_id;
        if scan.parts[p].position.is_none() {
            scan.parts[p].position = Some(cell.open_cursor());
        }
        let txn = self.id();
        let deadline = Instant::now() + self.lock_timeout();
        let mode = scan.spec.mode;
        let mut out: Vec<(RowRef, Vec<Value>)> = Vec::new();
        let mut guard = cell.state.lock();
        loop {
            out.clear();
            let cursor = &mut scan.parts[p];
            let mut failed = None;
            let blocked = match scan.spec.index {
                None => {
                    let Some(from) = cursor.next_row else {
                        cursor.ended = true;
                        return Ok(());
                    };
                    match guard.scan_batch(
                        txn,
                        mode,
                        from,
                        scan.spec.batch_size,
                        &scan.fetch,
                        &mut out,
                    ) {
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                        Ok(Step::Done(next)) => {
                            cursor.next_row = next;
                            if next.is_none() {
                                cursor.ended = true;
                            }
                            false
                        }
                        Ok(Step::Blocked) => {
                            if let Some((last, _)) = out.last() {
                                cursor.next_row = Some(RowId(last.row.0 + 1));
                            }
                            true
                        }
                    }
                }
                Some(i) => {
                    let step = guard.index_scan_batch(
                        txn,
                        mode,
                        i,
                        scan.low.as_ref(),
                        scan.high.as_ref(),
                        scan.spec.descending,
                        cursor.resume.as_ref(),
                        scan.spec.batch_size,
                        &scan.fetch,
                        &mut out,
                    );
                    if let Some((last, _)) = out.last() {
                        cursor.resume = Some((last.row, guard.index_key_of(i, last.row)));
                    }
                    match step {
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                        Ok(Step::Done(end)) => {
                            if end {
                                cursor.ended = true;
                            }
                            false
                        }
                        Ok(Step::Blocked) => true,
                    }
                }
            };
            let got = !out.is_empty();
            for (r, vals) in out.drain(..) {
                if r.locked {
                    self.record_touched(&cell, r.row);
                }
                scan.parts[p].buffer.push_back(vals);
            }
            if let Some(e) = failed {
                // The rows locked so far are the transaction's (released at its end).
                return Err(e);
            }
            if !blocked {
                return Ok(());
            }
            if got {
                // Return what we have; the next fetch resumes at the locked row.
                return Ok(());
            }
            if cell
                .lock_released
                .wait_until(&mut guard, deadline)
                .timed_out()
            {
                drop(guard);
                return Err(self.abort_with(codes::deadlock_timeout()));
            }
        }
    }
}

/// Orders index key values as the ordered index does (column by column).
pub(crate) fn cmp_keys(a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = x.sql_cmp(y);
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// Committed values of `cols` of every row of a table (index builds).
pub(crate) fn collect_committed(
    table: &Arc<TableRuntime>,
    cols: &[usize],
) -> Result<Vec<Vec<Value>>> {
    let mut rows = Vec::new();
    for p in 0..table.fragments.len() {
        let primary = table.primary_or_err(p)?;
        let _position = primary.open_cursor();
        let mut from = Some(RowId(0));
        while let Some(f) = from {
            let mut out = Vec::new();
            let step = primary.state.lock().scan_batch(
                0,
                LockMode::CommittedRead,
                f,
                1024,
                cols,
                &mut out,
            );
            rows.extend(out.into_iter().map(|(_, v)| v));
            from = match step? {
                Step::Done(n) => n,
                Step::Blocked => return Err(codes::internal("committed-read scan blocked")),
            };
        }
    }
    Ok(rows)
}
