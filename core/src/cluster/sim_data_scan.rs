//! Scans in the data simulator (`Workload::scan_per_mille`): the client scans the
//! workload's table at one ready node of a node group (`ScanReq`, then `ScanNextReq`
//! per batch of 1–8 rows, as `RemoteScan` does), while nodes crash, restart by copy and
//! are cut off.
//!
//! A scan begins only when nothing else is in flight and holds every key until it
//! ends, so the rows it returns must be exactly the model's: every key of the group's
//! partitions once, with a value the model allows (no key missing, none stale — a node
//! cut off from its group must refuse, by its read lease), and no key of another
//! group. An error (a node starting, cut off, or lost) ends the scan without a check.

use super::{DataLayer, Outcome, Req, ReqKind, TABLE};
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::DataMsg;
use crate::transport::data_scan::{ScanConf, ScanReq};
use std::collections::BTreeMap;

/// A scan under way.
pub(super) struct ScanState {
    scan: u64,
    /// The group's nodes (a key belongs to the group when its replicas are these).
    group: Vec<NodeId>,
    /// Rows so far, by key; a key seen twice is recorded.
    rows: BTreeMap<i64, Option<String>>,
    twice: Vec<i64>,
}

impl DataLayer {
    /// Starts a scan of a random node group at one of its ready nodes.
    pub(super) fn start_scan(&mut self, now_ms: u64, ready: &[NodeId]) {
        let g = self.rng.below(self.groups.len() as u64) as usize;
        let group = self.groups[g].clone();
        let at: Vec<NodeId> = ready
            .iter()
            .copied()
            .filter(|n| group.contains(n))
            .collect();
        if at.is_empty() {
            return;
        }
        let node = at[self.rng.below(at.len() as u64) as usize];
        let req = self.next_req;
        self.next_req += 1;
        let batch_rows = 1 + self.rng.below(8) as u32;
        let msg = DataMsg::ScanReq(Box::new(ScanReq {
            req,
            scan: req,
            database: super::DB.into(),
            table: TABLE.into(),
            index: String::new(),
            columns: Vec::new(),
            low: None,
            high: None,
            descending: false,
            sorted: false,
            batch_rows,
            filter: String::new(),
            txn: None,
        }));
        let st = ScanState {
            scan: req,
            group,
            rows: BTreeMap::new(),
            twice: Vec::new(),
        };
        self.new_req(now_ms, node, ReqKind::Scan(st), msg);
    }

    /// A batch (or the error) of a scan.
    pub(super) fn on_scan_conf(&mut self, now_ms: u64, from: NodeId, c: ScanConf) {
        if c.code != 0 {
            *self.stats.errors.entry(c.code).or_default() += 1;
            self.settle(c.req, Outcome::Refused);
            return;
        }
        let Some(mut r) = self.reqs.remove(&c.req) else {
            return;
        };
        let (done, scan, id) = (c.done, c.scan, c.req);
        if let ReqKind::Scan(st) = &mut r.kind {
            for row in c.rows() {
                let (Some(Value::Int(k)), v) = (row.first(), row.get(1)) else {
                    continue;
                };
                let v = match v {
                    Some(Value::Str(s)) => Some(s.clone()),
                    other => other.map(|o| format!("{o:?}")),
                };
                if st.rows.insert(*k, v).is_some() {
                    st.twice.push(*k);
                }
            }
        }
        if done {
            // Settled as one request: reinserted under its id so `settle` finds it.
            self.reqs.insert(id, r);
            self.settle(id, Outcome::Committed(Vec::new()));
            return;
        }
        // The next batch: a new request id for the same scan, over the same link.
        let req = self.next_req;
        self.next_req += 1;
        self.reqs.insert(req, Req { node: from, ..r });
        self.push(
            now_ms,
            super::API_NODE,
            from,
            None,
            DataMsg::ScanNextReq { req, scan },
        );
    }

    /// A scan ended: its rows against the model.
    pub(super) fn check_scan(&mut self, req: u64, node: NodeId, st: ScanState) {
        let what = format!("scan {} at node {node}", st.scan);
        if let Some(k) = st.twice.first() {
            let text = format!("VIOLATION: {what} returned key {k} twice");
            self.lines.push(text.clone());
            self.violation.get_or_insert(text);
            return;
        }
        let Some(rt) = self
            .nodes
            .get(&node)
            .and_then(|n| n.dp.engine.inner().table(super::DB, TABLE).ok())
        else {
            return;
        };
        let mut checked = 0u64;
        for k in 0..self.workload.keys {
            let Ok(p) =
                super::super::remote::RemoteCluster::partition_of(&rt.def, &[Value::Int(k)])
            else {
                continue;
            };
            let mine = super::super::layout::replica_nodes(p, &self.groups)
                .iter()
                .all(|n| st.group.contains(n));
            let got = st.rows.get(&k);
            if !mine {
                if got.is_some() {
                    let text = format!("VIOLATION: {what} returned key {k} of another node group");
                    self.lines.push(text.clone());
                    self.violation.get_or_insert(text);
                }
                continue;
            }
            let row = got
                .cloned()
                .flatten()
                .map(|v| vec![Value::Int(k), Value::Str(v)]);
            self.check_read(k, &row, &format!("{what} (request {req})"));
            checked += 1;
        }
        self.stats.scans += 1;
        self.stats.scan_rows += checked;
    }
}
