//! Scans for API nodes at a data node (NDB's SCAN_TABREQ / SCAN_NEXTREQ at DBTC and
//! DBLQH, committed read only): `docs/cluster.md` §6 "Scans".
//!
//! Every node of a node group holds a replica of every partition of the group, so an
//! API node scans a table by asking one up-to-date node of each node group; that node
//! scans its local engine (its group's partitions; the other groups' are empty
//! there). A commit is acknowledged only once every live replica has it, so a scan
//! begun after an acknowledged write sees it on whichever replica it reads.
//!
//! An open scan is a local committed-read transaction with its [`Scan`], keyed by the
//! API node and the API's scan id. A scan of a transaction (`ScanReq::txn`) reads in
//! that transaction's local transaction instead when this node holds one (`lqh`'s
//! [`LocalTx`], shared by reference and locked for each batch), so it sees the
//! transaction's uncommitted rows; every live replica of a partition the transaction
//! wrote holds them once its round was answered. Once that transaction ends, its open
//! scans end with the engine's 4604 (the transaction is closed), as NDB closes a
//! transaction's scans with it. It runs on the node's loop, one bounded batch per
//! request ([`MAX_SCAN_BATCH_ROWS`] rows, about [`MAX_SCAN_BATCH_BYTES`]), so a scan
//! never holds a fragment's mutex for longer than a batch.
//!
//! Invariants: a node serves a batch only while it is up to date and holds its read
//! leases (`lease`), checked at every batch — a node cut off from its group stops
//! serving scans as it stops serving reads. A scan ends (and is forgotten) at its last
//! batch, at its first error, when the API closes it or disconnects, when this node
//! leaves the cluster, and after [`SCAN_IDLE_MS`] without a fetch (the node's tick
//! clock, not the wall clock).
//!
//! A scan may carry a pushed condition (`ScanReq::filter`, `sql::RowFilter`): only the
//! rows it holds true for are returned, and a batch also ends after
//! [`MAX_EXAMINED_PER_BATCH`] rows examined, so it may hold none before the last.
//!
//! Limits: at most [`MAX_OPEN_SCANS`] open scans per data node (NDB's
//! MaxNoOfConcurrentScans default; more is 488 "Too many active scans", temporary).
//! Lock order: the scan map's lock is a leaf, never held while the engine is called;
//! the LQH map's lock is held only to clone a [`LocalTx`]; a [`LocalTx`]'s lock is
//! held for one batch and taken before the engine's (as LQH takes it).

use super::lqh::LocalTx;
use super::{DataPath, err_parts, not_ready};
use crate::api::{Scan, ScanSpec, Transaction};
use crate::error::{Result, codes};
use crate::schema::{IndexKind, Value};
use crate::sql::RowFilter;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, TxnKey};
use crate::transport::data_scan::{
    MAX_SCAN_BATCH_BYTES, MAX_SCAN_BATCH_ROWS, ScanConf, ScanReq, value_bytes,
};
use crate::txn::lock::LockMode;
use std::collections::BTreeMap;

/// Open scans per data node, at most (NDB's MaxNoOfConcurrentScans default).
pub const MAX_OPEN_SCANS: usize = 256;
/// A scan the API has not fetched from for this long is closed.
pub const SCAN_IDLE_MS: u64 = 60_000;
/// Rows a batch examines at most (a pushed condition may keep few of them), so that a
/// batch holds the node's loop for a bounded time.
pub const MAX_EXAMINED_PER_BATCH: usize = 8 * MAX_SCAN_BATCH_ROWS as usize;

/// The local transaction a scan reads in.
enum ScanTx {
    /// Its own committed-read transaction.
    Own(Transaction),
    /// A transaction's local transaction here (`ScanReq::txn`).
    Shared(LocalTx),
}

impl ScanTx {
    fn scan(&mut self, spec: ScanSpec) -> Result<Scan> {
        match self {
            ScanTx::Own(tx) => tx.scan(spec),
            ScanTx::Shared(tx) => tx.lock().scan(spec),
        }
    }
}

struct OpenScan {
    tx: ScanTx,
    scan: Scan,
    ncols: u32,
    batch_rows: usize,
    /// The pushed condition, if any (`ScanReq::filter`).
    filter: Option<RowFilter>,
    /// The node's clock at the last fetch.
    last_ms: u64,
}

/// The node's open scans, by (API node, scan id).
#[derive(Default)]
pub(crate) struct Scans {
    open: BTreeMap<(NodeId, u64), OpenScan>,
    /// `ScanNextReq`s answered (a scan is out of `open` while its batch is read).
    next_answered: u64,
}

impl Scans {
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }
}

fn error_conf(req: u64, scan: u64, e: &crate::error::NdbError) -> DataMsg {
    let (code, class, message) = err_parts(e);
    DataMsg::ScanConf(Box::new(ScanConf {
        req,
        scan,
        code,
        class,
        message,
        ncols: 0,
        values: Vec::new(),
        done: true,
    }))
}

impl DataPath {
    /// `ScanReq` from an API node: opens the scan and answers with its first batch.
    pub(super) fn scan_open(&self, api: NodeId, r: ScanReq) {
        let (req, id) = (r.req, r.scan);
        let reply = match self.scan_start(api, r) {
            Ok(c) => DataMsg::ScanConf(Box::new(c)),
            Err(e) => error_conf(req, id, &e),
        };
        self.send(api, reply);
    }

    /// `ScanNextReq`: the next batch of an open scan.
    pub(super) fn scan_next(&self, api: NodeId, req: u64, id: u64) {
        let taken = self.scans.lock().open.remove(&(api, id));
        let reply = match taken {
            None => error_conf(
                req,
                id,
                &codes::scan_timed_out(format!(
                    "scan {id} is not open at data node {} (it ended, or was closed after {} s without a fetch)",
                    self.me,
                    SCAN_IDLE_MS / 1000
                )),
            ),
            Some(mut open) => match self.scan_batch(&mut open, req, id) {
                Ok(c) => {
                    if !c.done {
                        self.scans.lock().open.insert((api, id), open);
                    }
                    DataMsg::ScanConf(Box::new(c))
                }
                Err(e) => error_conf(req, id, &e),
            },
        };
        self.scans.lock().next_answered += 1;
        self.send(api, reply);
    }

    /// `ScanCloseReq`: the API is done with the scan.
    pub(super) fn scan_close(&self, api: NodeId, id: u64) {
        self.scans.lock().open.remove(&(api, id));
    }

    /// The API node disconnected: its scans end.
    pub fn api_disconnected(&self, api: NodeId) {
        self.scans.lock().open.retain(|&(a, _), _| a != api);
    }

    /// Closes scans idle for [`SCAN_IDLE_MS`] (the node's tick).
    pub(crate) fn scan_expire(&self, now_ms: u64) {
        self.scans
            .lock()
            .open
            .retain(|_, s| now_ms.saturating_sub(s.last_ms) < SCAN_IDLE_MS);
    }

    /// This node left the cluster: every scan ends.
    pub(super) fn scans_reset(&self) {
        self.scans.lock().open.clear();
    }

    /// Open scans at this node.
    pub fn open_scans(&self) -> usize {
        self.scans.lock().len()
    }

    /// `ScanNextReq`s this node has answered (a scan it reads a batch of is not in
    /// [`Self::open_scans`] meanwhile: tests wait for the answer to a prefetch).
    pub fn scan_next_answered(&self) -> u64 {
        self.scans.lock().next_answered
    }

    fn scan_start(&self, api: NodeId, r: ScanReq) -> Result<ScanConf> {
        self.check_api_access(api)?;
        self.check_scan_serving()?;
        self.check_send_load([api])?;
        {
            let s = self.scans.lock();
            if s.open.len() >= MAX_OPEN_SCANS {
                return Err(codes::too_many_scans(format!(
                    "data node {} has {MAX_OPEN_SCANS} scans open",
                    self.me
                )));
            }
            if s.open.contains_key(&(api, r.scan)) {
                return Err(codes::bad_argument(format!(
                    "scan id {} is already open at data node {}",
                    r.scan, self.me
                )));
            }
        }
        let rt = self.engine.inner().table(&r.database, &r.table)?;
        if rt.hidden {
            return Err(codes::no_such_table(&r.table));
        }
        let def = rt.def.clone();
        let index = if r.index.is_empty() {
            None
        } else {
            let (pos, idx) = def
                .index(&r.index)
                .ok_or_else(|| codes::no_such_index(&r.index))?;
            if idx.kind != IndexKind::OrderedIndex {
                return Err(codes::bad_argument(format!(
                    "index '{}' is a unique hash index: range scans need an ordered index",
                    r.index
                )));
            }
            Some(pos)
        };
        let columns: Vec<usize> = if r.columns.is_empty() {
            def.visible_columns().map(|(i, _)| i).collect()
        } else {
            r.columns
                .iter()
                .map(|&c| {
                    let c = c as usize;
                    match def.columns.get(c) {
                        Some(col) if !col.hidden => Ok(c),
                        _ => Err(codes::bad_argument(format!(
                            "table '{}' has no column {c}",
                            def.name
                        ))),
                    }
                })
                .collect::<Result<_>>()?
        };
        let ncols = columns.len() as u32;
        let filter = if r.filter.is_empty() {
            None
        } else {
            Some(RowFilter::compile(&r.filter, &def, &columns)?)
        };
        let batch_rows = r.batch_rows.clamp(1, MAX_SCAN_BATCH_ROWS) as usize;
        let mut spec = ScanSpec::table(rt);
        spec.index = index;
        spec.low = r.low;
        spec.high = r.high;
        spec.descending = r.descending;
        spec.sorted = r.sorted;
        spec.mode = LockMode::CommittedRead;
        spec.columns = Some(columns);
        spec.batch_size = batch_rows;
        let mut tx = match r.txn.and_then(|key| self.local_tx_of(key)) {
            Some(shared) => ScanTx::Shared(shared),
            None => ScanTx::Own(self.engine.ndb(&r.database).start_transaction()?),
        };
        let scan = tx.scan(spec)?;
        let mut open = OpenScan {
            tx,
            scan,
            ncols,
            batch_rows,
            filter,
            last_ms: self.now_ms(),
        };
        let conf = self.scan_batch(&mut open, r.req, r.scan)?;
        if !conf.done {
            let mut s = self.scans.lock();
            // Checked again: the map may have filled while the batch was read.
            if s.open.len() >= MAX_OPEN_SCANS {
                return Err(codes::too_many_scans(format!(
                    "data node {} has {MAX_OPEN_SCANS} scans open",
                    self.me
                )));
            }
            s.open.insert((api, r.scan), open);
        }
        Ok(conf)
    }

    /// The local transaction this node holds for transaction `key`, if any (either of
    /// its records here: they share one).
    fn local_tx_of(&self, key: TxnKey) -> Option<LocalTx> {
        let lqh = self.lqh.lock();
        [true, false]
            .iter()
            .find_map(|&primary| lqh.get(&(key, primary)).map(|r| r.tx.clone()))
    }

    /// Up to date and holding its read leases (a scan's every batch).
    fn check_scan_serving(&self) -> Result<()> {
        if !self.is_ready() {
            return Err(not_ready(self.me));
        }
        self.check_serving()
    }

    fn scan_batch(&self, open: &mut OpenScan, req: u64, id: u64) -> Result<ScanConf> {
        self.check_scan_serving()?;
        open.last_ms = self.now_ms();
        let mut values: Vec<Value> = Vec::new();
        let (mut rows, mut bytes, mut done) = (0usize, 0usize, false);
        // With a pushed condition a batch also ends after this many rows examined
        // (it may then hold none: the API asks for the next one).
        let mut examined = 0usize;
        let mut shared_guard;
        let tx: &mut Transaction = match &mut open.tx {
            ScanTx::Own(tx) => tx,
            ScanTx::Shared(shared) => {
                shared_guard = shared.lock();
                &mut shared_guard
            }
        };
        while rows < open.batch_rows
            && bytes < MAX_SCAN_BATCH_BYTES
            && examined < MAX_EXAMINED_PER_BATCH
        {
            match tx.scan_next(&mut open.scan)? {
                Some(row) => {
                    debug_assert_eq!(row.len(), open.ncols as usize);
                    if row.len() != open.ncols as usize {
                        return Err(codes::internal("a scan row has the wrong column count"));
                    }
                    examined += 1;
                    if let Some(f) = &open.filter
                        && !f.matches(&row)?
                    {
                        continue;
                    }
                    bytes += row.iter().map(value_bytes).sum::<usize>();
                    values.extend(row);
                    rows += 1;
                }
                None => {
                    done = true;
                    break;
                }
            }
        }
        Ok(ScanConf {
            req,
            scan: id,
            code: 0,
            class: 0,
            message: String::new(),
            ncols: open.ncols,
            values,
            done,
        })
    }
}
