//! Scans through a [`RemoteCluster`] (NDB API's NdbScanOperation and
//! NdbIndexScanOperation with a `host:port` connectstring): committed-read table scans
//! and ordered-index range scans of a table over every node group.
//!
//! Opening sends one `ScanReq` to an up-to-date data node of each node group (the
//! group's nodes in turn, starting at a different one for each scan, so scans spread
//! over the replicas); each answers with its group's first batch. While the caller
//! consumes a batch, the next one is already asked for (one request in flight per
//! group, at most two batches held per group). Unsorted scans return the groups one
//! after the other; sorted index scans merge the groups' streams by the index's
//! columns (each group's node already returns its partitions in index order), as NDB
//! API merges fragments for SF_OrderBy.
//!
//! Errors: opening waits for every group's first batch, so a bad request fails there.
//! A node that answers the opening request with 4035 (starting, or cut off from its
//! group) is skipped and the group is asked at another of its nodes (4035 again when
//! none is left); once rows have been returned, an error ends the scan (a lost node: 4010, temporary — the caller
//! scans again). Dropping or closing a scan closes what is still open at the nodes.

use super::datapath::err_from;
use super::remote::{Pending, RemoteCluster};
use crate::api::scan::cmp_keys;
use crate::error::{NdbError, Result, codes};
use crate::schema::{IndexKind, TableDef, Value};
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, TxnKey};
use crate::transport::data_scan::{MAX_SCAN_BATCH_ROWS, ScanReq, WireBound};
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

/// What to scan.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteScanSpec {
    pub database: String,
    pub table: String,
    /// An ordered index for a range scan; None for a table scan.
    pub index: Option<String>,
    pub low: WireBound,
    pub high: WireBound,
    pub descending: bool,
    /// Merge the node groups in index order (index scans only).
    pub sorted: bool,
    /// Column positions to return; empty returns every visible column.
    pub columns: Vec<u32>,
    /// Rows per batch and node group (1..=992; NDB's BatchSize default is 256).
    pub batch_rows: u32,
    /// A condition the data nodes apply before returning rows (`sql::RowFilter`: a
    /// statement `SELECT * FROM db.t WHERE ...` over the returned columns).
    pub filter: Option<String>,
    /// The transaction the scan is part of ([`RemoteTransaction::txn_key`]): it then
    /// sees the transaction's own uncommitted changes. None: committed rows.
    ///
    /// [`RemoteTransaction::txn_key`]: super::remote_txn::RemoteTransaction::txn_key
    pub txn: Option<TxnKey>,
}

impl RemoteScanSpec {
    /// A table scan of every visible column.
    pub fn table(database: &str, table: &str) -> RemoteScanSpec {
        RemoteScanSpec {
            database: database.into(),
            table: table.into(),
            index: None,
            low: None,
            high: None,
            descending: false,
            sorted: false,
            columns: Vec::new(),
            batch_rows: 256,
            filter: None,
            txn: None,
        }
    }
}

struct GroupCursor {
    /// The group's nodes in the order this scan tries them.
    nodes: Vec<NodeId>,
    node: NodeId,
    buffer: VecDeque<Vec<Value>>,
    /// The node has no more rows (and has closed the scan).
    done: bool,
    /// Rows of this group have been returned (an error can no longer be retried).
    started: bool,
    /// Nodes sent the opening request so far.
    tried: Vec<NodeId>,
    inflight: Option<Pending>,
}

/// An open scan; see the module notes.
pub struct RemoteScan {
    rc: Arc<RemoteCluster>,
    id: u64,
    req: ScanReq,
    groups: Vec<GroupCursor>,
    /// Values returned per row (the fetched rows carry the index columns after them
    /// for a sorted merge).
    ncols: usize,
    current: usize,
    closed: bool,
}

fn check_spec(def: &TableDef, spec: &RemoteScanSpec) -> Result<(Vec<u32>, usize)> {
    let mut cols: Vec<u32> = if spec.columns.is_empty() {
        def.visible_columns().map(|(i, _)| i as u32).collect()
    } else {
        for &c in &spec.columns {
            match def.columns.get(c as usize) {
                Some(col) if !col.hidden => {}
                _ => {
                    return Err(codes::bad_argument(format!(
                        "table '{}' has no column {c}",
                        def.name
                    )));
                }
            }
        }
        spec.columns.clone()
    };
    let ncols = cols.len();
    match &spec.index {
        None => {
            if spec.low.is_some() || spec.high.is_some() || spec.sorted || spec.descending {
                return Err(codes::bad_argument(
                    "bounds, sorting and descending order need an ordered index",
                ));
            }
        }
        Some(name) => {
            let (_, idx) = def.index(name).ok_or_else(|| codes::no_such_index(name))?;
            if idx.kind != IndexKind::OrderedIndex {
                return Err(codes::bad_argument(format!(
                    "index '{name}' is a unique hash index: range scans need an ordered index"
                )));
            }
            for b in [&spec.low, &spec.high].into_iter().flatten() {
                if b.0.len() > idx.columns.len() {
                    return Err(codes::bad_argument(format!(
                        "bound has {} values, index '{name}' has {} columns",
                        b.0.len(),
                        idx.columns.len()
                    )));
                }
            }
            if spec.sorted {
                cols.extend(idx.columns.iter().map(|&c| c as u32));
            }
        }
    }
    if spec.batch_rows == 0 || spec.batch_rows > MAX_SCAN_BATCH_ROWS {
        return Err(codes::bad_argument(format!(
            "batch size {} is outside 1..={MAX_SCAN_BATCH_ROWS}",
            spec.batch_rows
        )));
    }
    Ok((cols, ncols))
}

impl RemoteCluster {
    /// Opens a scan (module notes); its rows come from [`RemoteScan::next_row`].
    pub fn scan(self: &Arc<Self>, spec: RemoteScanSpec) -> Result<RemoteScan> {
        let def = self.table(&spec.database, &spec.table)?;
        let (columns, ncols) = check_spec(&def, &spec)?;
        let id = self.next_id();
        let req = ScanReq {
            req: 0,
            scan: id,
            database: spec.database,
            table: spec.table,
            index: spec.index.unwrap_or_default(),
            columns,
            low: spec.low,
            high: spec.high,
            descending: spec.descending,
            sorted: spec.sorted,
            batch_rows: spec.batch_rows,
            filter: spec.filter.unwrap_or_default(),
            txn: spec.txn,
        };
        let groups = self
            .node_groups()
            .iter()
            .map(|g| {
                let mut nodes = g.clone();
                let n = nodes.len() as u64;
                if n > 0 {
                    nodes.rotate_left((id % n) as usize);
                }
                GroupCursor {
                    nodes,
                    node: 0,
                    buffer: VecDeque::new(),
                    done: false,
                    started: false,
                    tried: Vec::new(),
                    inflight: None,
                }
            })
            .collect();
        let mut s = RemoteScan {
            rc: self.clone(),
            id,
            req,
            groups,
            ncols,
            current: 0,
            closed: false,
        };
        // Every group's opening request goes out, then each first batch is awaited, so
        // that errors of the request (an unknown index, a bound of the wrong type) come
        // from here.
        let opened = (0..s.groups.len())
            .try_for_each(|g| s.open_group(g, None))
            .and_then(|()| (0..s.groups.len()).try_for_each(|g| s.fill(g)));
        match opened {
            Ok(()) => Ok(s),
            Err(e) => {
                s.close();
                Err(e)
            }
        }
    }

    /// Every row of a scan.
    pub fn scan_all(self: &Arc<Self>, spec: RemoteScanSpec) -> Result<Vec<Vec<Value>>> {
        let mut s = self.scan(spec)?;
        let mut out = Vec::new();
        while let Some(r) = s.next_row()? {
            out.push(r);
        }
        Ok(out)
    }
}

impl RemoteScan {
    /// Sends the opening request of group `g` to a node not tried yet: a usable one
    /// first, else any connected one. With none left, the error of the last node
    /// tried (`last`), or 4009 when no node of the group is connected.
    fn open_group(&mut self, g: usize, last: Option<NdbError>) -> Result<()> {
        let c = &self.groups[g];
        let untried: Vec<NodeId> = c
            .nodes
            .iter()
            .copied()
            .filter(|n| !c.tried.contains(n))
            .collect();
        let connected = self.rc.connected_nodes();
        let node = untried
            .iter()
            .copied()
            .find(|&n| self.rc.usable(n))
            .or_else(|| untried.iter().copied().find(|n| connected.contains(n)));
        let Some(node) = node else {
            return Err(last.unwrap_or_else(|| {
                codes::node_group_down(format!(
                    "no data node of node group {g} is connected for the scan"
                ))
            }));
        };
        let mut req = self.req.clone();
        let p = self.rc.submit(node, false, |r| {
            req.req = r;
            DataMsg::ScanReq(Box::new(req))
        })?;
        let c = &mut self.groups[g];
        c.tried.push(node);
        c.node = node;
        c.inflight = Some(p);
        Ok(())
    }

    /// Waits for group `g`'s batch in flight and asks for the one after it.
    fn receive(&mut self, g: usize) -> Result<()> {
        let Some(p) = self.groups[g].inflight.take() else {
            return Ok(());
        };
        let conf = match p.wait()? {
            DataMsg::ScanConf(c) => *c,
            _ => return Err(codes::internal("unexpected answer to a scan request")),
        };
        if conf.code != 0 {
            self.groups[g].done = true;
            let e = err_from(conf.code, conf.class, &conf.message);
            if e.code == 4035 && !self.groups[g].started {
                // Not up to date or cut off: another node of the group.
                self.rc.note_not_ready(&e);
                self.groups[g].done = false;
                return self.open_group(g, Some(e));
            }
            return Err(e);
        }
        let done = conf.done;
        let expected = self.req.columns.len();
        if conf.ncols as usize != expected && !(conf.values.is_empty() && done) {
            return Err(codes::internal(format!(
                "scan batch has {} columns, {expected} were asked for",
                conf.ncols
            )));
        }
        let rows = conf.rows();
        let c = &mut self.groups[g];
        c.buffer.extend(rows);
        c.done = done;
        if !done {
            let (node, scan) = (c.node, self.id);
            let p = self
                .rc
                .submit(node, false, |req| DataMsg::ScanNextReq { req, scan })?;
            self.groups[g].inflight = Some(p);
        }
        Ok(())
    }

    /// Fills group `g`'s buffer unless it has ended.
    fn fill(&mut self, g: usize) -> Result<()> {
        while self.groups[g].buffer.is_empty() && !self.groups[g].done {
            if self.groups[g].inflight.is_none() {
                return Err(codes::internal("scan group waits without a request"));
            }
            self.receive(g)?;
        }
        Ok(())
    }

    /// The next row (the requested columns), or None once every group ended.
    pub fn next_row(&mut self) -> Result<Option<Vec<Value>>> {
        if self.closed {
            return Err(codes::scan_closed());
        }
        let r = if self.req.sorted {
            self.next_sorted()
        } else {
            self.next_unsorted()
        };
        match r {
            Ok(Some(mut row)) => {
                row.truncate(self.ncols);
                Ok(Some(row))
            }
            Ok(None) => {
                self.close();
                Ok(None)
            }
            Err(e) => {
                self.close();
                Err(e)
            }
        }
    }

    /// Up to `max` rows; an empty vector means the scan ended.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<Vec<Value>>> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.next_row()? {
                Some(r) => out.push(r),
                None => break,
            }
        }
        Ok(out)
    }

    fn next_unsorted(&mut self) -> Result<Option<Vec<Value>>> {
        while self.current < self.groups.len() {
            let g = self.current;
            self.fill(g)?;
            if let Some(row) = self.groups[g].buffer.pop_front() {
                self.groups[g].started = true;
                return Ok(Some(row));
            }
            self.current += 1;
        }
        Ok(None)
    }

    fn next_sorted(&mut self) -> Result<Option<Vec<Value>>> {
        for g in 0..self.groups.len() {
            self.fill(g)?;
        }
        let at = self.ncols;
        let mut best: Option<usize> = None;
        for g in 0..self.groups.len() {
            let Some(head) = self.groups[g].buffer.front() else {
                continue;
            };
            best = match best {
                None => Some(g),
                Some(b) => {
                    let o = cmp_keys(&head[at..], &self.groups[b].buffer[0][at..]);
                    let better = if self.req.descending {
                        o == Ordering::Greater
                    } else {
                        o == Ordering::Less
                    };
                    Some(if better { g } else { b })
                }
            };
        }
        Ok(best.and_then(|g| {
            self.groups[g].started = true;
            self.groups[g].buffer.pop_front()
        }))
    }

    /// The data nodes the scan reads from (one per node group; 0 before it is sent).
    pub fn nodes_holding(&self) -> Vec<NodeId> {
        self.groups.iter().map(|c| c.node).collect()
    }

    /// Whether the scan has ended or was closed.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Closes the scan at every node that still holds it.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        for c in &mut self.groups {
            c.buffer.clear();
            if !c.done && c.node != 0 {
                self.rc
                    .send_only(c.node, DataMsg::ScanCloseReq { scan: self.id });
            }
            c.done = true;
            c.inflight = None;
        }
    }
}

impl Drop for RemoteScan {
    fn drop(&mut self) {
        self.close();
    }
}
