//! ndbinfo.transporters: one row per data node and peer node it has a transporter
//! to, with NDB's columns (node_id, remote_node_id, status, remote_address,
//! bytes_sent, bytes_received, connect_count, overloaded, overload_count, slowdown,
//! slowdown_count).
//!
//! A data node process (`rndbd`) installs a source of its own rows
//! ([`TransporterSource::set`], from `TcpTransport::transporters`); a query over TCP
//! shows every live data node's rows, as every ndbinfo table does (`super`'s notes).
//! The embedded cluster has no transporters: the table is empty there. rndb never slows senders down
//! (a full send buffer refuses new work with 1218 instead), so `slowdown` and
//! `slowdown_count` are always 0.

use super::{VirtualTable, cols, u};
use crate::api::ClusterInner;
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::tcp::TransporterStat;
use parking_lot::Mutex;
use std::sync::Arc;

type RowsFn = Arc<dyn Fn() -> Vec<Vec<Value>> + Send + Sync>;

/// Where a cluster's transporter rows come from (see the module notes).
#[derive(Default)]
pub struct TransporterSource {
    own: Mutex<Option<RowsFn>>,
}

impl TransporterSource {
    /// This process's rows, computed at each query.
    pub fn set(&self, rows: impl Fn() -> Vec<Vec<Value>> + Send + Sync + 'static) {
        *self.own.lock() = Some(Arc::new(rows));
    }

    /// This process's rows now (empty without a source).
    pub fn own_rows(&self) -> Vec<Vec<Value>> {
        let f = self.own.lock().clone();
        f.map(|f| f()).unwrap_or_default()
    }
}

/// Rows of `node`'s transporters.
pub fn transporter_rows(node: NodeId, stats: &[TransporterStat]) -> Vec<Vec<Value>> {
    stats
        .iter()
        .map(|t| {
            vec![
                u(u64::from(node)),
                u(u64::from(t.peer)),
                Value::Str(
                    if t.connected {
                        "CONNECTED"
                    } else {
                        "DISCONNECTED"
                    }
                    .into(),
                ),
                Value::Str(t.remote_address.clone()),
                u(t.bytes_sent),
                u(t.bytes_received),
                u(t.connect_count),
                u(u64::from(t.overloaded)),
                u(t.overload_count),
                u(0),
                u(0),
            ]
        })
        .collect()
}

pub(super) fn transporters(cluster: &ClusterInner) -> VirtualTable {
    let mut rows = cluster.transporters.own_rows();
    // By peer.
    rows.sort_by_key(|r| {
        let n = |v: Option<&Value>| match v {
            Some(Value::UInt(x)) => *x,
            _ => 0,
        };
        (n(r.first()), n(r.get(1)))
    });
    (
        cols(&[
            "node_id",
            "remote_node_id",
            "status",
            "remote_address",
            "bytes_sent",
            "bytes_received",
            "connect_count",
            "overloaded",
            "overload_count",
            "slowdown",
            "slowdown_count",
        ]),
        rows,
    )
}
