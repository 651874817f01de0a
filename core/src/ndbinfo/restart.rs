//! `ndbinfo.restart_info`: per data node, the seconds each phase of its last restart
//! took, with NDB's columns. Phases this embedded cluster does not have (node-failure
//! handling, heartbeat inclusion, copying from a live node: node restarts arrive with
//! the cluster issue) are 0. Without a restart since the process started the table is
//! empty, as NDB's is before any restart.

use super::{VirtualTable, cols};
use crate::api::ClusterInner;
use crate::schema::Value;

/// NDB's `node_restart_status_int` for "Restart completed".
const RESTART_COMPLETED: u64 = 15;

pub(super) fn restart_info(cluster: &ClusterInner) -> VirtualTable {
    let columns = cols(&[
        "node_id",
        "node_restart_status",
        "node_restart_status_int",
        "secs_to_complete_node_failure",
        "secs_to_allocate_node_id",
        "secs_to_include_in_heartbeat_protocol",
        "secs_until_wait_for_ndbcntr_master",
        "secs_wait_for_ndbcntr_master",
        "secs_to_get_start_permitted",
        "secs_to_wait_for_lcp_for_copy_meta_data",
        "secs_to_copy_meta_data",
        "secs_to_include_node",
        "secs_starting_node_to_request_local_recovery",
        "secs_for_local_recovery",
        "secs_restore_fragments",
        "secs_undo_disk_data",
        "secs_exec_redo_log",
        "secs_index_rebuild",
        "secs_to_synchronize_starting_node",
        "secs_wait_lcp_for_restart",
        "secs_wait_subscription_handover",
        "total_restart_secs",
    ]);
    let Some(stats) = cluster.restart.lock().clone() else {
        return (columns, Vec::new());
    };
    // ndbinfo reports whole seconds (rounded up so that a phase that ran shows).
    let secs = |s: f64| Value::UInt(s.ceil() as u64);
    let rows = stats
        .nodes
        .iter()
        .map(|n| {
            let local = n.secs_restore_fragments
                + n.secs_undo_disk_data
                + n.secs_exec_redo_log
                + n.secs_index_rebuild;
            let mut row = vec![
                Value::UInt(u64::from(n.node_id)),
                Value::Str("Restart completed".into()),
                Value::UInt(RESTART_COMPLETED),
            ];
            // node failure .. request of local recovery: no such phases here
            row.extend((0..9).map(|_| Value::UInt(0)));
            row.push(Value::UInt(0)); // secs_starting_node_to_request_local_recovery
            row.extend([
                secs(local),
                secs(n.secs_restore_fragments),
                secs(n.secs_undo_disk_data),
                secs(n.secs_exec_redo_log),
                secs(n.secs_index_rebuild),
                Value::UInt(0),
                Value::UInt(0),
                Value::UInt(0),
                secs(stats.total_secs),
            ]);
            row
        })
        .collect();
    (columns, rows)
}
