//! ndbinfo and information_schema tables of disk data, materialised from the data
//! nodes' disk managers on every query:
//! - `ndbinfo.diskpagebuffer`: NDB's columns exactly (PGMAN's counters per node);
//! - `ndbinfo.diskpagebuffer_advice` (ours): predicted hit ratio at other
//!   DiskPageBufferMemory sizes, from the cache's own history;
//! - `ndbinfo.logspaces` / `ndbinfo.logbuffers`: the redo log parts (log_type `REDO`)
//!   and the undo log (log_type `DD-UNDO`);
//! - `ndbinfo.files` (NDB 8.0.29's columns) and `information_schema.FILES` (one row per
//!   file per data node, as NDB 7.x showed them; EXTRA names the node).

use super::{VirtualTable, cols, u};
use crate::api::ClusterInner;
use crate::schema::Value;

/// Sizes `diskpagebuffer_advice` predicts for, in MB (the seed's question).
pub const ADVICE_SIZES_MB: [u64; 8] = [16, 32, 64, 128, 256, 512, 1024, 2048];

fn s(v: &str) -> Value {
    Value::Str(v.to_string())
}

fn opt(v: Option<u64>) -> Value {
    v.map_or(Value::Null, Value::UInt)
}

pub(super) fn diskpagebuffer(cluster: &ClusterInner) -> VirtualTable {
    let rows = cluster
        .data_nodes
        .iter()
        .map(|n| {
            let st = n.disk.pgman.stats();
            vec![
                u(n.node_id as u64),
                u(0),
                u(st.pages_written),
                u(st.pages_written_lcp),
                u(st.pages_read),
                u(st.log_waits),
                u(st.page_requests_direct_return),
                u(st.page_requests_wait_queue),
                u(st.page_requests_wait_io),
            ]
        })
        .collect();
    (
        cols(&[
            "node_id",
            "block_instance",
            "pages_written",
            "pages_written_lcp",
            "pages_read",
            "log_waits",
            "page_requests_direct_return",
            "page_requests_wait_queue",
            "page_requests_wait_io",
        ]),
        rows,
    )
}

pub(super) fn diskpagebuffer_advice(cluster: &ClusterInner) -> VirtualTable {
    let sizes: Vec<u64> = ADVICE_SIZES_MB.iter().map(|mb| mb << 20).collect();
    let mut rows = Vec::new();
    for n in &cluster.data_nodes {
        for (bytes, pct) in n.disk.pgman.advice(&sizes) {
            rows.push(vec![
                u(n.node_id as u64),
                u(bytes >> 20),
                Value::Double((pct * 100.0).round() / 100.0),
            ]);
        }
    }
    (
        cols(&["node_id", "buffer_mb", "predicted_hit_ratio_pct"]),
        rows,
    )
}

fn log_rows(cluster: &ClusterInner, buffers: bool) -> VirtualTable {
    let mut rows = Vec::new();
    for n in &cluster.data_nodes {
        // The redo log, one row per part (log_id 0, as NDB).
        if let Some(l) = &n.log {
            for p in l.redo.usage() {
                let (total, used, high) = if buffers {
                    (
                        p.buffer_capacity_bytes,
                        p.buffer_used_bytes,
                        p.buffer_high_bytes,
                    )
                } else {
                    (p.total_file_bytes, p.used_file_bytes, p.high_file_bytes)
                };
                rows.push(vec![
                    u(n.node_id as u64),
                    s("REDO"),
                    u(0),
                    u(p.part as u64),
                    u(total),
                    u(used),
                    u(high),
                ]);
            }
        }
        if let Some(g) = n.disk.logfile_group() {
            let x = if buffers {
                g.log_buffer()
            } else {
                g.log_space()
            };
            rows.push(vec![
                u(n.node_id as u64),
                s("DD-UNDO"),
                u(g.config().id as u64),
                u(0),
                u(x.total_bytes),
                u(x.used_bytes),
                u(x.high_bytes),
            ]);
        }
    }
    (
        cols(&[
            "node_id", "log_type", "log_id", "log_part", "total", "used", "high",
        ]),
        rows,
    )
}

pub(super) fn logspaces(cluster: &ClusterInner) -> VirtualTable {
    log_rows(cluster, false)
}

pub(super) fn logbuffers(cluster: &ClusterInner) -> VirtualTable {
    log_rows(cluster, true)
}

/// information_schema.FILES (MySQL 8.0's columns).
pub(super) fn information_schema_files(cluster: &ClusterInner) -> VirtualTable {
    let names = [
        "FILE_ID",
        "FILE_NAME",
        "FILE_TYPE",
        "TABLESPACE_NAME",
        "TABLE_CATALOG",
        "TABLE_SCHEMA",
        "TABLE_NAME",
        "LOGFILE_GROUP_NAME",
        "LOGFILE_GROUP_NUMBER",
        "ENGINE",
        "FULLTEXT_KEYS",
        "DELETED_ROWS",
        "UPDATE_COUNT",
        "FREE_EXTENTS",
        "TOTAL_EXTENTS",
        "EXTENT_SIZE",
        "INITIAL_SIZE",
        "MAXIMUM_SIZE",
        "AUTOEXTEND_SIZE",
        "CREATION_TIME",
        "LAST_UPDATE_TIME",
        "LAST_ACCESS_TIME",
        "RECOVER_TIME",
        "TRANSACTION_COUNTER",
        "VERSION",
        "ROW_FORMAT",
        "TABLE_ROWS",
        "AVG_ROW_LENGTH",
        "DATA_LENGTH",
        "MAX_DATA_LENGTH",
        "INDEX_LENGTH",
        "DATA_FREE",
        "CREATE_TIME",
        "UPDATE_TIME",
        "CHECK_TIME",
        "CHECKSUM",
        "STATUS",
        "EXTRA",
    ];
    let null = || Value::Null;
    let mut rows = Vec::new();
    for n in &cluster.data_nodes {
        let group = n.disk.logfile_group();
        let (lg_name, lg_id) = group.as_ref().map_or((Value::Null, Value::Null), |g| {
            (s(&g.config().name), u(g.config().id as u64))
        });
        for f in n.disk.tsman.files_info() {
            let extent = f.extent_size_bytes;
            let free_bytes = f.free_extents * extent + f.free_bytes_in_allocated_extents;
            rows.push(vec![
                u(f.file_no as u64),
                s(&f.file_name),
                s("DATAFILE"),
                s(&f.tablespace_name),
                s("def"),
                null(),
                null(),
                s(&f.logfile_group_name),
                lg_id.clone(),
                s("ndbcluster"),
                null(),
                null(),
                null(),
                u(f.free_extents),
                u(f.total_extents),
                u(extent),
                u(f.initial_size_bytes),
                opt((f.maximum_size_bytes > 0).then_some(f.maximum_size_bytes)),
                u(f.autoextend_size_bytes),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                u(free_bytes),
                null(),
                null(),
                null(),
                null(),
                s("NORMAL"),
                s(&format!("CLUSTER_NODE={}", n.node_id)),
            ]);
        }
        if let Some(g) = &group {
            let space = g.log_space();
            let files = g.files_info();
            let total_pages: u64 = files.iter().map(|f| f.undo_pages).sum::<u64>().max(1);
            for f in files {
                // Free undo space, shared out over the files by size (the log is one ring).
                let free =
                    space.total_bytes.saturating_sub(space.used_bytes) * f.undo_pages / total_pages;
                let name = f
                    .path
                    .strip_prefix(n.disk.fs_dir())
                    .unwrap_or(&f.path)
                    .to_string_lossy()
                    .into_owned();
                rows.push(vec![
                    u(f.file_no as u64),
                    s(&name),
                    s("UNDO LOG"),
                    null(),
                    s("def"),
                    null(),
                    null(),
                    lg_name.clone(),
                    lg_id.clone(),
                    s("ndbcluster"),
                    null(),
                    null(),
                    null(),
                    u(free),
                    u(f.undo_pages * crate::disk::page::DISK_PAGE_SIZE as u64),
                    u(1),
                    u(f.initial_size_bytes),
                    null(),
                    u(0),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    null(),
                    u(free),
                    null(),
                    null(),
                    null(),
                    null(),
                    s("NORMAL"),
                    s(&format!("CLUSTER_NODE={};{}", n.node_id, f.extra)),
                ]);
            }
        }
    }
    (cols(&names), rows)
}

/// ndbinfo.files (NDB 8.0.29+): one row per logfile group, tablespace, undo file and
/// data file of the cluster (the first data node's view; every node has the same).
pub(super) fn files(cluster: &ClusterInner) -> VirtualTable {
    let mut rows = Vec::new();
    if let Some(n) = cluster.data_nodes.first() {
        let dd = cluster.disk_dict.lock();
        if let Some(g) = &dd.logfile_group {
            rows.push(vec![
                u(g.id as u64),
                s("Log file group"),
                s(&g.name),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
        }
        for t in dd.tablespaces.values() {
            rows.push(vec![
                u(t.id as u64),
                s("Tablespace"),
                s(&t.name),
                Value::Null,
                s(&t.logfile_group),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
        }
        if let (Some(g), Some(lg)) = (n.disk.logfile_group(), &dd.logfile_group) {
            for f in g.files_info() {
                rows.push(vec![
                    u(f.file_no as u64),
                    s("Undo file"),
                    s(&f.path.to_string_lossy()),
                    u(lg.id as u64),
                    s(&lg.name),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    u(f.initial_size_bytes),
                    Value::Null,
                    Value::Null,
                ]);
            }
        }
        for f in n.disk.tsman.files_info() {
            let parent = dd.tablespace(&f.tablespace_name).map(|t| t.id as u64);
            rows.push(vec![
                u(f.file_no as u64),
                s("Data file"),
                s(&f.path.to_string_lossy()),
                opt(parent),
                s(&f.tablespace_name),
                u(f.free_extents),
                u(f.total_extents),
                u(f.extent_size_bytes >> 20),
                u(f.initial_size_bytes),
                u(f.maximum_size_bytes),
                u(f.autoextend_size_bytes),
            ]);
        }
    }
    (
        cols(&[
            "id",
            "type",
            "name",
            "parent",
            "parent_name",
            "free_extents",
            "total_extents",
            "extent_size",
            "initial_size",
            "maximum_size",
            "autoextend_size",
        ]),
        rows,
    )
}
