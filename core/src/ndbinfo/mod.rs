//! ndbinfo: monitoring tables with NDB's table and column names, materialised from the
//! engine's live state on every query (so they are exact at that moment).
//!
//! Tables: `memoryusage` (per node: Data memory, Index memory), `memory_per_fragment`
//! (per fragment replica and per ordered index, NDB 7.6's view columns, then what
//! OPTIMIZE TABLE would give back: `reclaimable_fixed_bytes` — for an ordered index row
//! its node pages — `reclaimable_var_bytes`, `disk_extents`,
//! `reclaimable_disk_extents`), `nodes`, and
//! `transporters` (a data node process's connections, [`transporters`]),
//! the disk-data tables of [`disk`] (diskpagebuffer, diskpagebuffer_advice, logspaces,
//! logbuffers, files, and information_schema.FILES).
//! SQL SELECTs over them run in the `sql` module on the rows returned here.
//!
//! Every table holds per-node rows: those of the data nodes of this engine (all of
//! them for the embedded cluster, its own for an `rndbd`'s local engine). A query over
//! TCP shows every live data node's rows: the data node that runs it gathers the
//! others' rows of the tables the query names (`cluster::datapath::ndbinfo`) and runs
//! it with them installed ([`GatheredRows::with`]), at most [`MAX_GATHERED_ROWS`] rows
//! per node.

use crate::api::ClusterInner;
use crate::error::{NdbError, Result};
use crate::schema::{IndexKind, Value};
use crate::storage::PAGE_SIZE;

/// Names of the ndbinfo tables, for SHOW TABLES and completion.
pub fn table_names() -> Vec<&'static str> {
    vec![
        "diskpagebuffer",
        "diskpagebuffer_advice",
        "files",
        "logbuffers",
        "logspaces",
        "memory_per_fragment",
        "memoryusage",
        "nodes",
        "restart_info",
        "transporters",
    ]
}

mod disk;
mod restart;
mod transporters;
pub use disk::ADVICE_SIZES_MB;
pub use transporters::{TransporterSource, transporter_rows};

/// A materialised virtual table: column names and rows.
pub type VirtualTable = (Vec<String>, Vec<Vec<Value>>);

/// Rows one data node sends for one gathered query, at most (over all its tables).
#[cfg(not(test))]
pub const MAX_GATHERED_ROWS: usize = 50_000;
/// Small in the unit tests, so that they reach it.
#[cfg(test)]
pub const MAX_GATHERED_ROWS: usize = 100;

/// The key of a table in a gather: `ndbinfo.<name>` or `information_schema.files`.
fn gather_key(schema: &str, name: &str) -> String {
    format!(
        "{}.{}",
        schema.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    )
}

/// Every live data node's rows of some tables, installed for the query running now
/// (see the module notes).
#[derive(Default)]
pub struct GatheredRows {
    rows: parking_lot::Mutex<Option<std::collections::BTreeMap<String, Vec<Vec<Value>>>>>,
}

impl GatheredRows {
    /// Runs `f` with `rows` (by gather key, every node's rows in node order) as the
    /// tables' rows. The caller runs such queries one at a time.
    pub fn with<T>(
        &self,
        rows: std::collections::BTreeMap<String, Vec<Vec<Value>>>,
        f: impl FnOnce() -> T,
    ) -> T {
        *self.rows.lock() = Some(rows);
        let r = f();
        *self.rows.lock() = None;
        r
    }

    fn get(&self, key: &str) -> Option<Vec<Vec<Value>>> {
        self.rows.lock().as_ref().and_then(|m| m.get(key).cloned())
    }
}

/// The gather keys of the tables `sql`, run in `database`, may read: each table name
/// that appears in it as a word, when the statement names its schema or runs in it
/// (an extra table gathered is only rows not used).
pub fn tables_named_in(database: &str, sql: &str) -> Vec<String> {
    let lower = sql.to_ascii_lowercase();
    let is_word = |name: &str| {
        lower.match_indices(name).any(|(at, _)| {
            let ok = |c: Option<char>| c.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
            ok(lower[..at].chars().next_back()) && ok(lower[at + name.len()..].chars().next())
        })
    };
    let in_schema = |schema: &str| database.eq_ignore_ascii_case(schema) || is_word(schema);
    let mut keys: Vec<String> = if in_schema("ndbinfo") {
        table_names()
            .into_iter()
            .filter(|n| is_word(n))
            .map(|n| gather_key("ndbinfo", n))
            .collect()
    } else {
        Vec::new()
    };
    if is_word("files") && in_schema("information_schema") {
        keys.push(gather_key("information_schema", "files"));
    }
    keys
}

/// This engine's own rows of the table a gather key names (None: no such table).
pub fn own_rows(cluster: &ClusterInner, key: &str) -> Option<Result<Vec<Vec<Value>>>> {
    let (schema, name) = key.split_once('.')?;
    compute(cluster, schema, name).map(|r| r.map(|(_, rows)| rows))
}

/// Rows of a virtual table: `schema` is "ndbinfo" (or "information_schema"); None when
/// there is no such table.
pub fn lookup(cluster: &ClusterInner, schema: &str, name: &str) -> Option<Result<VirtualTable>> {
    let t = compute(cluster, schema, name)?;
    Some(t.map(|(cols, own)| {
        let rows = cluster
            .ndbinfo_gathered
            .get(&gather_key(schema, name))
            .unwrap_or(own);
        (cols, rows)
    }))
}

/// The table with this engine's own rows.
fn compute(cluster: &ClusterInner, schema: &str, name: &str) -> Option<Result<VirtualTable>> {
    if schema.eq_ignore_ascii_case("information_schema") {
        if !name.eq_ignore_ascii_case("files") {
            return None;
        }
        if let Err(e) = cluster.check_open() {
            return Some(Err(e));
        }
        return Some(Ok(disk::information_schema_files(cluster)));
    }
    if !schema.eq_ignore_ascii_case("ndbinfo") {
        return None;
    }
    if let Err(e) = cluster.check_open() {
        return Some(Err(e));
    }
    let t = match name.to_ascii_lowercase().as_str() {
        "memoryusage" => memoryusage(cluster),
        "memory_per_fragment" => memory_per_fragment(cluster),
        "nodes" => nodes(cluster),
        "restart_info" => restart::restart_info(cluster),
        "transporters" => transporters::transporters(cluster),
        "diskpagebuffer" => disk::diskpagebuffer(cluster),
        "diskpagebuffer_advice" => disk::diskpagebuffer_advice(cluster),
        "logspaces" => disk::logspaces(cluster),
        "logbuffers" => disk::logbuffers(cluster),
        "files" => disk::files(cluster),
        _ => return None,
    };
    Some(Ok(t))
}

fn cols(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn u(v: u64) -> Value {
    Value::UInt(v)
}

/// Pages (used, total) per node as REPORT MEMORYUSAGE counts them: Data = fixed + var +
/// ordered index pages, Index = hash index pages; both out of DataMemory.
pub fn node_memory(cluster: &ClusterInner) -> Vec<(u32, u64, u64, u64)> {
    cluster
        .data_nodes
        .iter()
        .map(|n| {
            (
                n.node_id,
                n.pool.data_pages(),
                n.pool.index_pages(),
                n.pool.total_pages() as u64,
            )
        })
        .collect()
}

fn memoryusage(cluster: &ClusterInner) -> VirtualTable {
    let mut rows = Vec::new();
    for (node, data, index, total) in node_memory(cluster) {
        let page = PAGE_SIZE as u64;
        rows.push(vec![
            u(node as u64),
            Value::Str("Data memory".into()),
            u(data * page),
            u(data),
            u(total * page),
            u(total),
        ]);
        rows.push(vec![
            u(node as u64),
            Value::Str("Index memory".into()),
            u(index * page),
            u(index),
            u(total * page),
            u(total),
        ]);
    }
    (
        cols(&[
            "node_id",
            "memory_type",
            "used",
            "used_pages",
            "total",
            "total_pages",
        ]),
        rows,
    )
}

fn memory_per_fragment(cluster: &ClusterInner) -> VirtualTable {
    let names = [
        "fq_name",
        "parent_fq_name",
        "type",
        "table_id",
        "node_id",
        "block_instance",
        "fragment_num",
        "fixed_elem_alloc_bytes",
        "fixed_elem_free_bytes",
        "fixed_elem_size_bytes",
        "fixed_elem_count",
        "fixed_elem_free_count",
        "var_elem_alloc_bytes",
        "var_elem_free_bytes",
        "var_elem_count",
        "hash_index_alloc_bytes",
        // Not NDB's: what OPTIMIZE TABLE would give back now (chkfrag).
        "reclaimable_fixed_bytes",
        "reclaimable_var_bytes",
        "disk_extents",
        "reclaimable_disk_extents",
    ];
    let page = PAGE_SIZE as u64;
    let mut rows = Vec::new();
    let tables = cluster.dict.read().all();
    let ldm = cluster.ldm_per_node.max(1) as u64;
    for t in tables {
        let def = &t.def;
        let fq = format!("{}/def/{}", t.database, def.name);
        let (ty, parent) = if !t.hidden {
            ("User table", Value::Null)
        } else if def.name.ends_with(crate::schema::UNIQUE_INDEX_SUFFIX) {
            ("Unique hash index", parent_of(&t.database, &def.name))
        } else {
            ("User table", parent_of(&t.database, &def.name))
        };
        for reps in &t.fragments {
            for cell in reps {
                let (m, part, rec, ordered_rec, extents) = {
                    let f = cell.state.lock();
                    (
                        f.memory(),
                        f.partition,
                        f.reclaimable(),
                        f.ordered_reclaimable_pages(),
                        f.disk_extents(),
                    )
                };
                let instance = u(1 + part as u64 % ldm);
                let slot = m.fixed_slot_size as u64;
                rows.push(vec![
                    Value::Str(fq.clone()),
                    parent.clone(),
                    Value::Str(ty.into()),
                    u(def.id as u64),
                    u(cell.node_id as u64),
                    instance.clone(),
                    u(part as u64),
                    u(m.fixed_pages as u64 * page),
                    u(m.fixed_free_slots * slot),
                    u(slot),
                    u(m.fixed_rows),
                    u(m.fixed_free_slots),
                    u(m.var_pages as u64 * page),
                    u(m.var_free_bytes),
                    u(m.var_entries),
                    u(m.hash_pages as u64 * page),
                    u(rec.fixed_pages as u64 * page),
                    u(rec.var_pages as u64 * page),
                    u(extents as u64),
                    u(rec.extents as u64),
                ]);
                for ((iname, pages, entries), idx_rec) in m.ordered.iter().zip(&ordered_rec) {
                    let idx_id = def
                        .indexes
                        .iter()
                        .position(|i| &i.name == iname && i.kind == IndexKind::OrderedIndex);
                    rows.push(vec![
                        Value::Str(format!("sys/def/{}/{}", def.id, iname)),
                        Value::Str(fq.clone()),
                        Value::Str("Ordered index".into()),
                        u(idx_id.map(|i| i as u64).unwrap_or(0)),
                        u(cell.node_id as u64),
                        instance.clone(),
                        u(part as u64),
                        u(*pages as u64 * page),
                        u(0),
                        u(0),
                        u(*entries),
                        u(0),
                        u(0),
                        u(0),
                        u(0),
                        u(0),
                        u(*idx_rec as u64 * page),
                        u(0),
                        u(0),
                        u(0),
                    ]);
                }
            }
        }
    }
    (cols(&names), rows)
}

fn parent_of(db: &str, hidden_name: &str) -> Value {
    // NDB$BLOB_<id>_<col> and <table>$<index>$unique name their parent.
    let parent = hidden_name.split('$').next().unwrap_or(hidden_name);
    if parent.is_empty() || parent == "NDB" {
        Value::Null
    } else {
        Value::Str(format!("{db}/def/{parent}"))
    }
}

fn nodes(cluster: &ClusterInner) -> VirtualTable {
    let rows = cluster
        .data_nodes
        .iter()
        .map(|n| {
            vec![
                u(n.node_id as u64),
                u(n.started_at.elapsed().as_secs()),
                Value::Str(
                    if cluster.is_closed() {
                        "NOTHING"
                    } else {
                        "STARTED"
                    }
                    .into(),
                ),
                u(0),
                u(1),
            ]
        })
        .collect();
    (
        cols(&[
            "node_id",
            "uptime",
            "status",
            "start_phase",
            "config_generation",
        ]),
        rows,
    )
}

/// Error for an unknown ndbinfo table, as MySQL reports it.
pub fn no_such_table(schema: &str, name: &str) -> NdbError {
    crate::error::codes::no_such_table(&format!("{schema}.{name}"))
}

#[cfg(test)]
mod gather_tests {
    use super::tables_named_in;

    #[test]
    fn a_query_gathers_the_tables_it_names_in_their_schema() {
        assert_eq!(
            tables_named_in(
                "test",
                "SELECT * FROM ndbinfo.memoryusage WHERE node_id = 2"
            ),
            vec!["ndbinfo.memoryusage"]
        );
        assert_eq!(
            tables_named_in("ndbinfo", "select m.node_id from memoryusage m, nodes n"),
            vec!["ndbinfo.memoryusage", "ndbinfo.nodes"]
        );
        assert_eq!(
            tables_named_in("test", "SELECT FILE_NAME FROM INFORMATION_SCHEMA.FILES"),
            vec!["information_schema.files"]
        );
        // A word inside another, or a user table of that name elsewhere: nothing.
        assert!(tables_named_in("test", "SELECT * FROM ndbinfo.memoryusage_x").is_empty());
        assert!(tables_named_in("test", "SELECT * FROM nodes").is_empty());
        assert!(tables_named_in("test", "SELECT * FROM files").is_empty());
    }
}
