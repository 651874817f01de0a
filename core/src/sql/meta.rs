//! SQL-level metadata the engine's dictionary does not hold, shared by every session of
//! a cluster: the known databases (namespaces; `test` exists from the start) and, per
//! table, what SHOW CREATE TABLE and INSERT need beyond the engine's `TableDef` (default
//! character set, comments, `DEFAULT CURRENT_TIMESTAMP` / `ON UPDATE` columns, whether
//! the primary key or a unique key was created `USING HASH`).
//!
//! Table metadata is also kept with the table in the dictionary (NDB's
//! `Table::setExtraMetadata`, written to the schema file): after a system restart it is
//! read back from there the first time a session asks for it.
//!
//! Invariants: entries are keyed by the cluster (held weakly, so a dropped cluster's
//! entry is pruned and never matched by a new cluster at the same address) and, for
//! tables, by (database, lower-case name) together with the engine's table id: metadata
//! of a table that was dropped and re-created outside SQL is ignored, not misapplied.

use crate::api::ClusterInner;
use crate::schema::Charset;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};

/// The virtual schemas: they always exist and hold no NDB tables.
pub(crate) const VIRTUAL_SCHEMAS: [&str; 2] = ["information_schema", "ndbinfo"];

/// Which columns of a table compare strings case-insensitively, for
/// [`super::eval::Env::ci_columns`]. In MySQL the character columns of information_schema
/// (utf8mb3_general_ci) and ndbinfo (a `_ci` collation too) tables compare
/// case-insensitively: `WHERE file_type='datafile'` matches `DATAFILE`. Every column of a
/// virtual schema is flagged (the flag only matters for string values, and only their
/// character columns hold strings); NDB tables (any other schema) flag none, so their
/// comparisons stay binary whatever their character set.
pub(crate) fn ci_columns(db: &str, columns: usize) -> Vec<bool> {
    if is_virtual(db) {
        vec![true; columns]
    } else {
        Vec::new()
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct TableMeta {
    pub table_id: u32,
    pub charset: Option<Charset>,
    pub comment: Option<String>,
    /// Lower-case column name -> comment.
    pub column_comments: HashMap<String, String>,
    /// Columns with DEFAULT CURRENT_TIMESTAMP (lower-case names).
    pub default_now: Vec<String>,
    /// Columns with ON UPDATE CURRENT_TIMESTAMP (lower-case names).
    pub on_update_now: Vec<String>,
    /// Primary key created USING HASH (no ordered index).
    pub pk_hash_only: bool,
}

struct ClusterMeta {
    cluster: Weak<ClusterInner>,
    databases: BTreeSet<String>,
    tables: HashMap<(String, String), TableMeta>,
}

static REGISTRY: Mutex<Vec<ClusterMeta>> = Mutex::new(Vec::new());

fn with<R>(cluster: &Arc<ClusterInner>, f: impl FnOnce(&mut ClusterMeta) -> R) -> R {
    let mut reg = REGISTRY.lock();
    reg.retain(|m| m.cluster.strong_count() > 0);
    let pos = reg.iter().position(|m| {
        m.cluster
            .upgrade()
            .is_some_and(|c| Arc::ptr_eq(&c, cluster))
    });
    let idx = match pos {
        Some(i) => i,
        None => {
            let mut databases = BTreeSet::new();
            databases.insert("test".to_string());
            reg.push(ClusterMeta {
                cluster: Arc::downgrade(cluster),
                databases,
                tables: HashMap::new(),
            });
            reg.len() - 1
        }
    };
    f(&mut reg[idx])
}

fn key(db: &str, table: &str) -> (String, String) {
    (db.to_ascii_lowercase(), table.to_ascii_lowercase())
}

pub(crate) fn is_virtual(db: &str) -> bool {
    VIRTUAL_SCHEMAS.iter().any(|v| v.eq_ignore_ascii_case(db))
}

/// Databases: the registered ones, those holding tables, and the virtual schemas.
pub(crate) fn databases(cluster: &Arc<ClusterInner>) -> Vec<String> {
    let mut all: BTreeSet<String> = with(cluster, |m| m.databases.clone());
    for t in cluster.dict.read().all() {
        if !t.hidden {
            all.insert(t.database.to_ascii_lowercase());
        }
    }
    for v in VIRTUAL_SCHEMAS {
        all.insert(v.to_string());
    }
    all.into_iter().collect()
}

pub(crate) fn database_exists(cluster: &Arc<ClusterInner>, db: &str) -> bool {
    let db = db.to_ascii_lowercase();
    databases(cluster).contains(&db)
}

/// Registers a database; false when it already existed.
pub(crate) fn create_database(cluster: &Arc<ClusterInner>, db: &str) -> bool {
    let exists = database_exists(cluster, db);
    with(cluster, |m| m.databases.insert(db.to_ascii_lowercase()));
    !exists
}

pub(crate) fn forget_database(cluster: &Arc<ClusterInner>, db: &str) {
    let db = db.to_ascii_lowercase();
    with(cluster, |m| {
        m.databases.remove(&db);
        m.tables.retain(|(d, _), _| *d != db);
    });
}

/// Records a table's metadata, in memory and with the table in the dictionary (so it
/// survives a restart). An error when the schema file cannot be written.
pub(crate) fn set_table(
    cluster: &Arc<ClusterInner>,
    db: &str,
    table: &str,
    meta: TableMeta,
) -> crate::error::Result<()> {
    cluster.set_extra_metadata(db, table, &encode(&meta))?;
    with(cluster, |m| {
        m.tables.insert(key(db, table), meta);
    });
    Ok(())
}

/// Format version of the encoded metadata (first byte).
const META_VERSION: u8 = 1;

fn encode(meta: &TableMeta) -> Vec<u8> {
    use crate::schema::codec::Encoder;
    let mut e = Encoder::new();
    e.u8(META_VERSION);
    e.opt_str(meta.charset.map(|c| c.name()));
    e.opt_str(meta.comment.as_deref());
    let mut comments: Vec<(&String, &String)> = meta.column_comments.iter().collect();
    comments.sort();
    e.u32(comments.len() as u32);
    for (c, text) in comments {
        e.str(c);
        e.str(text);
    }
    for list in [&meta.default_now, &meta.on_update_now] {
        e.u32(list.len() as u32);
        for c in list {
            e.str(c);
        }
    }
    e.bool(meta.pk_hash_only);
    e.into_bytes()
}

fn decode(bytes: &[u8], table_id: u32) -> crate::error::Result<TableMeta> {
    use crate::error::codes;
    use crate::schema::codec::Decoder;
    let mut d = Decoder::new(bytes);
    let version = d.u8()?;
    if version != META_VERSION {
        return Err(codes::corrupt_schema_file(format!(
            "SQL metadata of table {table_id}: unknown version {version}"
        )));
    }
    let charset = match d.opt_str()? {
        Some(name) => Some(Charset::parse(&name).ok_or_else(|| {
            codes::corrupt_schema_file(format!("unknown character set '{name}'"))
        })?),
        None => None,
    };
    let comment = d.opt_str()?;
    let mut column_comments = HashMap::new();
    for _ in 0..d.u32()? {
        let c = d.str()?;
        column_comments.insert(c, d.str()?);
    }
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        for _ in 0..d.u32()? {
            list.push(d.str()?);
        }
    }
    let [default_now, on_update_now] = lists;
    let pk_hash_only = d.bool()?;
    d.finish()?;
    Ok(TableMeta {
        table_id,
        charset,
        comment,
        column_comments,
        default_now,
        on_update_now,
        pk_hash_only,
    })
}

/// The metadata of a table, if it belongs to the table with this id.
pub(crate) fn table(
    cluster: &Arc<ClusterInner>,
    db: &str,
    table: &str,
    table_id: u32,
) -> Option<TableMeta> {
    let known = with(cluster, |m| {
        m.tables
            .get(&key(db, table))
            .filter(|t| t.table_id == table_id)
            .cloned()
    });
    if known.is_some() {
        return known;
    }
    // After a restart: the copy kept with the table in the dictionary.
    let rt = cluster
        .dict
        .read()
        .get(db, table)
        .filter(|t| t.def.id == table_id)?;
    if rt.extra_metadata.is_empty() {
        return None;
    }
    let meta = decode(&rt.extra_metadata, table_id).ok()?;
    with(cluster, |m| {
        m.tables.insert(key(db, table), meta.clone());
    });
    Some(meta)
}

pub(crate) fn forget_table(cluster: &Arc<ClusterInner>, db: &str, table: &str) {
    with(cluster, |m| {
        m.tables.remove(&key(db, table));
    });
}
