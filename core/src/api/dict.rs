//! The dictionary (DBDICT): tables by database and name, their fragments on the data
//! nodes, auto-increment counters, and the hidden tables NDB uses for BLOB/TEXT parts and
//! unique hash indexes.
//!
//! A table's runtime object holds its definition and, per partition, the fragment
//! replicas (primary first) of its node group. Schema changes (CREATE/DROP INDEX) build a
//! new runtime object over the same fragment cells and swap it in the dictionary; a
//! transaction that already holds the old object keeps working with the same fragments.
//!
//! Every DDL writes the schema file (`dict_file`) before the change becomes visible (the
//! image of the dictionary as it will be); a failed write fails the DDL and leaves the
//! dictionary, `next_table_id` included, as it was. TRUNCATE drops and recreates the
//! table and its hidden tables under new ids, as NDB does.
//!
//! Lock order: dictionary lock, then fragment mutexes, then the page pool.

use super::cluster::ClusterInner;
use crate::error::{ErrorClassification, NdbError, Result, codes};
use crate::schema::layout::key_hash;
use crate::schema::types::Charset;
use crate::schema::{Column, ColumnType, IndexDef, IndexKind, StorageType, TableDef};
use crate::txn::fragment::{FragDisk, Fragment, FragmentCell};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use crate::cluster::layout::HASH_MAP_BUCKETS;
/// Column holding the part number in a BLOB parts table.
pub const BLOB_PART_COLUMN: &str = "NDB$PART";
pub const BLOB_DATA_COLUMN: &str = "NDB$DATA";

pub struct TableRuntime {
    pub def: Arc<TableDef>,
    pub database: String,
    /// [partition][replica]; replica 0 is the primary.
    pub fragments: Vec<Vec<Arc<FragmentCell>>>,
    pub auto_increment: Arc<AtomicU64>,
    /// Per column: the hidden parts table of a BLOB/TEXT column.
    pub blob_tables: Vec<Option<Arc<TableRuntime>>>,
    /// Per index of `def.indexes`: the hidden table of a unique hash index.
    pub unique_tables: Vec<Option<Arc<TableRuntime>>>,
    pub dropped: Arc<AtomicBool>,
    /// Hidden table (blob parts, unique index): not listed by SHOW TABLES.
    pub hidden: bool,
    /// Opaque bytes the SQL layer keeps with the table (NDB's extra metadata, where
    /// mysqld stores its own table definition); persisted in the schema file.
    pub extra_metadata: Arc<[u8]>,
}

impl TableRuntime {
    /// Partition of a key hash.
    #[inline]
    pub fn partition_of(&self, h: u64) -> usize {
        crate::cluster::layout::partition_of_hash(h, self.fragments.len())
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The live replicas of partition `part`, primary first (node-group order): the
    /// replicas of stopped or restarting nodes are left out.
    #[inline]
    pub fn live_replicas(&self, part: usize) -> Vec<Arc<FragmentCell>> {
        let reps = &self.fragments[part];
        if reps.iter().all(|c| c.may_be_primary()) {
            return reps.clone();
        }
        // Joining replicas (a restart's copy just finished) are backups only.
        let mut out: Vec<Arc<FragmentCell>> = reps
            .iter()
            .filter(|c| c.may_be_primary())
            .cloned()
            .collect();
        out.extend(
            reps.iter()
                .filter(|c| c.is_live() && !c.may_be_primary())
                .cloned(),
        );
        out
    }

    /// The primary replica of partition `part`: its first live one (None when every
    /// replica's node is down).
    #[inline]
    pub fn primary(&self, part: usize) -> Option<&Arc<FragmentCell>> {
        let reps = &self.fragments[part];
        reps.iter()
            .find(|c| c.may_be_primary())
            .or_else(|| reps.iter().find(|c| c.is_live()))
    }

    /// [`TableRuntime::primary`], or NDB's error for a partition without a live
    /// replica (4009 Cluster Failure: its whole node group is down).
    pub fn primary_or_err(&self, part: usize) -> Result<&Arc<FragmentCell>> {
        self.primary(part).ok_or_else(|| {
            codes::node_group_down(format!(
                "partition {part} of table {} has no live replica (its node group is down)",
                self.def.name
            ))
        })
    }

    /// Every fragment cell of every replica.
    pub fn all_cells(&self) -> impl Iterator<Item = &Arc<FragmentCell>> {
        self.fragments.iter().flatten()
    }

    /// The definition of a table that lives on data nodes reached over TCP (a client of
    /// `rndb_mgmd`): no fragments here, the data nodes hold them. Such a runtime is
    /// only ever read for its definition (the C ABI's operations name tables by it); it
    /// is never given to the embedded engine, where it would hold no rows.
    pub fn definition_only(def: Arc<TableDef>, database: &str) -> Arc<TableRuntime> {
        let columns = def.columns.len();
        let indexes = def.indexes.len();
        Arc::new(TableRuntime {
            def,
            database: database.to_string(),
            fragments: Vec::new(),
            auto_increment: Arc::new(AtomicU64::new(1)),
            blob_tables: vec![None; columns],
            unique_tables: vec![None; indexes],
            dropped: Arc::new(AtomicBool::new(false)),
            hidden: false,
            extra_metadata: Arc::from(Vec::new()),
        })
    }

    pub fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(codes::no_such_table(&self.def.name));
        }
        Ok(())
    }

    /// Rows in the table (primary replicas).
    pub fn row_count(&self) -> u64 {
        self.fragments
            .iter()
            .filter_map(|reps| reps.iter().find(|c| c.is_live()))
            .map(|c| c.state.lock().rows())
            .sum()
    }

    /// The key hash of primary key values (coerced, key order).
    pub fn key_hash_of(&self, key_values: &[crate::schema::Value], buf: &mut Vec<u8>) -> u64 {
        self.def.layout.key_from_values(key_values, buf);
        key_hash(buf)
    }
}

#[derive(Default)]
pub struct Dictionary {
    /// (database, lower-case name) -> table.
    tables: BTreeMap<(String, String), Arc<TableRuntime>>,
    next_table_id: u32,
}

fn dict_key(database: &str, name: &str) -> (String, String) {
    (database.to_ascii_lowercase(), name.to_ascii_lowercase())
}

impl Dictionary {
    pub fn get(&self, database: &str, name: &str) -> Option<Arc<TableRuntime>> {
        self.tables.get(&dict_key(database, name)).cloned()
    }

    /// Visible tables of a database, by name.
    pub fn list(&self, database: &str) -> Vec<Arc<TableRuntime>> {
        let db = database.to_ascii_lowercase();
        self.tables
            .iter()
            .filter(|((d, _), t)| *d == db && !t.hidden)
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// All tables including hidden ones (for memory reports).
    pub fn all(&self) -> Vec<Arc<TableRuntime>> {
        self.tables.values().cloned().collect()
    }

    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    /// The last table id handed out (ids are never reused, see `dict_file`).
    pub fn next_table_id(&self) -> u32 {
        self.next_table_id
    }

    pub(super) fn set_next_table_id(&mut self, id: u32) {
        self.next_table_id = id;
    }

    pub(super) fn insert(&mut self, t: Arc<TableRuntime>) {
        self.tables.insert(dict_key(&t.database, &t.def.name), t);
    }
}

/// A table to create: columns, key, indexes.
pub struct TableSpec {
    pub name: String,
    pub columns: Vec<Column>,
    pub primary_key: Vec<String>,
    pub indexes: Vec<(String, IndexKind, Vec<String>)>,
    pub logging: bool,
    pub if_not_exists: bool,
    /// Tablespace of the table's disk columns (NdbDictionary::Table::setTablespaceName).
    pub tablespace: Option<String>,
}

impl TableSpec {
    /// A logged table with these columns; the key is the columns marked primary key
    /// (or NDB's hidden key when none is).
    pub fn new(name: &str, columns: Vec<Column>) -> TableSpec {
        TableSpec {
            name: name.to_string(),
            columns,
            primary_key: Vec::new(),
            indexes: Vec::new(),
            logging: true,
            if_not_exists: false,
            tablespace: None,
        }
    }

    /// Puts the table's disk columns in tablespace `ts`.
    pub fn tablespace(mut self, ts: &str) -> TableSpec {
        self.tablespace = Some(ts.to_string());
        self
    }

    /// NDB's placement of columns for a table-level `STORAGE DISK|MEMORY`:
    /// `explicit[i]` is column i's own `STORAGE`, which wins; otherwise `table_disk`
    /// puts every column that neither the primary key nor an index uses on disk
    /// (indexed columns always stay in memory). An explicit disk column that is indexed
    /// is error 756.
    pub fn place_columns(
        &mut self,
        explicit: &[Option<StorageType>],
        table_disk: bool,
    ) -> Result<()> {
        for (i, col) in self.columns.iter_mut().enumerate() {
            let named = |n: &String| n.eq_ignore_ascii_case(&col.name);
            let indexed = col.primary_key
                || self.primary_key.iter().any(named)
                || self.indexes.iter().any(|(_, _, cs)| cs.iter().any(named));
            col.storage = match explicit.get(i).copied().flatten() {
                Some(StorageType::Disk) if indexed => {
                    return Err(codes::index_on_disk_column(&col.name));
                }
                Some(st) => st,
                None if table_disk && !indexed => StorageType::Disk,
                None => StorageType::Memory,
            };
        }
        Ok(())
    }

    /// Adds an index on `columns`.
    pub fn index(mut self, name: &str, kind: IndexKind, columns: &[&str]) -> TableSpec {
        self.indexes.push((
            name.to_string(),
            kind,
            columns.iter().map(|c| c.to_string()).collect(),
        ));
        self
    }
}

impl ClusterInner {
    /// CREATE TABLE. Allocates the fragments on every node of each node group.
    pub fn create_table(&self, database: &str, mut spec: TableSpec) -> Result<Arc<TableRuntime>> {
        let mut dict = self.dict.write();
        let id_before = dict.next_table_id;
        if let Some(t) = dict.get(database, &spec.name) {
            if spec.if_not_exists {
                return Ok(t);
            }
            return Err(codes::table_exists(&spec.name));
        }
        let max_tables = self
            .data_nodes
            .first()
            .map(|n| n.config.max_no_of_tables)
            .unwrap_or(128) as usize;
        let hidden_needed = spec.columns.iter().filter(|c| c.ty.is_blob()).count()
            + spec
                .indexes
                .iter()
                .filter(|i| i.1 == IndexKind::UniqueHashIndex)
                .count();
        if dict.table_count() + 1 + hidden_needed > max_tables {
            return Err(codes::too_many_tables());
        }
        if let Some(ts) = &spec.tablespace {
            self.check_tablespace_for_table(ts)?;
        }
        // A disk BLOB/TEXT keeps its head (the first 256 bytes) in memory and its parts
        // on disk, as NDB does.
        let disk_blob: Vec<bool> = spec
            .columns
            .iter()
            .map(|c| c.ty.is_blob() && c.storage == StorageType::Disk)
            .collect();
        for c in spec.columns.iter_mut() {
            if c.ty.is_blob() {
                c.storage = StorageType::Memory;
            }
        }
        if spec.tablespace.is_none()
            && (disk_blob.contains(&true)
                || spec.columns.iter().any(|c| c.storage == StorageType::Disk))
        {
            return Err(codes::invalid_tablespace(
                "(none: STORAGE DISK columns need a TABLESPACE)",
            ));
        }
        let partitions = self.default_partitions();
        dict.next_table_id += 1;
        let id = dict.next_table_id;
        let mut def = TableDef::new(
            id,
            &spec.name,
            spec.columns,
            &spec.primary_key,
            spec.indexes,
            partitions,
        )?;
        def.logging = spec.logging;
        def.tablespace = spec.tablespace.clone();
        let def = Arc::new(def);
        // The hidden tables, then the table: in the dictionary only once the schema file
        // has them.
        let mut new_tables: Vec<Arc<TableRuntime>> = Vec::new();
        let mut blob_tables = Vec::with_capacity(def.columns.len());
        for (i, c) in def.columns.iter().enumerate() {
            blob_tables.push(match c.ty {
                ColumnType::Blob { kind, .. } if kind.part_size() > 0 => {
                    dict.next_table_id += 1;
                    let t =
                        self.make_blob_table(&def, i, dict.next_table_id, database, disk_blob[i])?;
                    new_tables.push(t.clone());
                    Some(t)
                }
                _ => None,
            });
        }
        let mut unique_tables = Vec::with_capacity(def.indexes.len());
        for idx in &def.indexes {
            unique_tables.push(if idx.kind == IndexKind::UniqueHashIndex {
                dict.next_table_id += 1;
                let t = self.make_unique_table(&def, idx, dict.next_table_id, database)?;
                new_tables.push(t.clone());
                Some(t)
            } else {
                None
            });
        }
        let rt = Arc::new(TableRuntime {
            fragments: self.make_fragments(&def)?,
            def,
            database: database.to_string(),
            auto_increment: Arc::new(AtomicU64::new(1)),
            blob_tables,
            unique_tables,
            dropped: Arc::new(AtomicBool::new(false)),
            hidden: false,
            extra_metadata: Arc::from(&[][..]),
        });
        if let Some(ts) = &rt.def.tablespace {
            self.count_tablespace_user(ts, true)?;
        }
        new_tables.push(rt.clone());
        if let Err(e) = self.write_schema_with(&mut dict, id_before, &[], &new_tables) {
            if let Some(ts) = &rt.def.tablespace {
                let _ = self.count_tablespace_user(ts, false);
            }
            return Err(e);
        }
        for t in new_tables {
            dict.insert(t);
        }
        Ok(rt)
    }

    /// A table in tablespace `ts` keeps it from being dropped (error 768).
    pub(super) fn count_tablespace_user(&self, ts: &str, add: bool) -> Result<()> {
        for n in &self.data_nodes {
            let id = n
                .disk
                .tsman
                .lookup(ts)
                .ok_or_else(|| codes::invalid_tablespace(ts))?;
            if add {
                n.disk.tsman.add_table_user(id)?;
            } else {
                n.disk.tsman.remove_table_user(id)?;
            }
        }
        Ok(())
    }

    pub(super) fn make_fragments(
        &self,
        def: &Arc<TableDef>,
    ) -> Result<Vec<Vec<Arc<FragmentCell>>>> {
        let groups = &self.node_groups;
        (0..def.partitions)
            .map(|p| {
                let group = &groups[p as usize % groups.len()];
                let n = group.len();
                // Rotate the primary over the group's nodes, as NDB spreads primaries.
                (0..n)
                    .map(|r| {
                        let node = &group
                            [crate::cluster::layout::replica_slot(p as usize, r, groups.len(), n)];
                        let mut fragment = Fragment::new(
                            def.clone(),
                            p,
                            node.pool.clone(),
                            FragDisk::for_table(&node.disk, def, p)?,
                        );
                        fragment.set_redo(node.redo_for(def));
                        let cell = FragmentCell::new(fragment, node.node_id);
                        if node.run_state() == super::node_restart::NodeRunState::Stopped {
                            // Its node is stopped: the replica is made when it restarts.
                            let mut f = cell.state.lock();
                            cell.set_role(&mut f, crate::txn::fragment::ReplicaRole::Dead);
                        }
                        Ok(Arc::new(cell))
                    })
                    .collect()
            })
            .collect()
    }

    pub(super) fn hidden_runtime(
        &self,
        def: TableDef,
        database: &str,
    ) -> Result<Arc<TableRuntime>> {
        let def = Arc::new(def);
        Ok(Arc::new(TableRuntime {
            fragments: self.make_fragments(&def)?,
            def,
            database: database.to_string(),
            auto_increment: Arc::new(AtomicU64::new(1)),
            blob_tables: Vec::new(),
            unique_tables: Vec::new(),
            dropped: Arc::new(AtomicBool::new(false)),
            hidden: true,
            extra_metadata: Arc::from(&[][..]),
        }))
    }

    /// NDB$BLOB_<table id>_<column>: main table's key columns + part number + data.
    /// With `on_disk` the data column is a disk column in the main table's tablespace.
    fn make_blob_table(
        &self,
        main: &TableDef,
        col: usize,
        id: u32,
        database: &str,
        on_disk: bool,
    ) -> Result<Arc<TableRuntime>> {
        let ColumnType::Blob { kind, .. } = main.columns[col].ty else {
            return Err(codes::internal("blob table for a non-blob column"));
        };
        let mut cols: Vec<Column> = main
            .primary_key
            .iter()
            .map(|&p| main.columns[p].clone())
            .collect();
        for c in &mut cols {
            c.hidden = false;
            c.auto_increment = false;
            c.default = None;
        }
        cols.push(
            Column::new(
                BLOB_PART_COLUMN,
                ColumnType::Int {
                    bytes: 4,
                    unsigned: true,
                },
            )
            .primary_key(),
        );
        let mut data = Column::new(
            BLOB_DATA_COLUMN,
            ColumnType::Varbinary {
                len: kind.part_size(),
            },
        )
        .not_null();
        if on_disk {
            data.storage = StorageType::Disk;
        }
        cols.push(data);
        let name = format!("NDB$BLOB_{}_{}", main.id, col);
        let pk: Vec<String> = cols
            .iter()
            .filter(|c| c.primary_key)
            .map(|c| c.name.clone())
            .collect();
        let mut def = TableDef::new(id, &name, cols, &pk, vec![], main.partitions)?;
        if on_disk {
            def.tablespace = main.tablespace.clone();
        }
        self.hidden_runtime(def, database)
    }

    /// <index>$unique: the unique columns as key, the main table's key columns as data.
    fn make_unique_table(
        &self,
        main: &TableDef,
        idx: &IndexDef,
        id: u32,
        database: &str,
    ) -> Result<Arc<TableRuntime>> {
        let mut cols: Vec<Column> = Vec::new();
        for &c in &idx.columns {
            let mut col = main.columns[c].clone();
            col.primary_key = true;
            col.nullable = false;
            col.auto_increment = false;
            col.default = None;
            col.hidden = false;
            cols.push(col);
        }
        for &p in &main.primary_key {
            let mut col = main.columns[p].clone();
            col.name = format!("NDB$PK_{}", col.name);
            col.primary_key = false;
            col.auto_increment = false;
            col.hidden = false;
            col.default = None;
            col.nullable = false;
            cols.push(col);
        }
        let name = format!(
            "{}${}{}",
            main.name,
            idx.name,
            crate::schema::UNIQUE_INDEX_SUFFIX
        );
        let pk: Vec<String> = idx
            .columns
            .iter()
            .map(|&c| main.columns[c].name.clone())
            .collect();
        let def = TableDef::new(id, &name, cols, &pk, vec![], main.partitions)?;
        self.hidden_runtime(def, database)
    }

    /// A table may be created in tablespace `ts` only when it exists (error 755).
    fn check_tablespace_for_table(&self, ts: &str) -> Result<()> {
        match self.disk_dict.lock().tablespace(ts) {
            Some(_) => Ok(()),
            None => Err(codes::invalid_tablespace(ts)),
        }
    }

    /// Partitions of a new table: one per LDM per node group (NDB's default).
    pub fn default_partitions(&self) -> u32 {
        let set = self.partitions_override();
        if set != 0 {
            return set;
        }
        self.node_groups.len() as u32 * self.ldm_per_node
    }

    /// DROP TABLE: frees every page of every fragment (including hidden tables).
    pub fn drop_table(&self, database: &str, name: &str, if_exists: bool) -> Result<bool> {
        let mut dict = self.dict.write();
        let id_before = dict.next_table_id;
        let Some(rt) = dict.get(database, name).filter(|t| !t.hidden) else {
            if if_exists {
                return Ok(false);
            }
            return Err(codes::no_such_table(name));
        };
        wait_no_locks(&rt, self.lock_timeout_ms())?;
        let hidden: Vec<Arc<TableRuntime>> = rt
            .blob_tables
            .iter()
            .chain(rt.unique_tables.iter())
            .flatten()
            .cloned()
            .collect();
        for t in std::iter::once(&rt).chain(hidden.iter()) {
            wait_no_locks(t, self.lock_timeout_ms())?;
        }
        let ids: Vec<u32> = std::iter::once(&rt)
            .chain(hidden.iter())
            .map(|t| t.def.id)
            .collect();
        self.write_schema_with(&mut dict, id_before, &ids, &[])?;
        self.forget_checkpoints_of(&ids);
        for t in std::iter::once(&rt).chain(hidden.iter()) {
            t.dropped.store(true, Ordering::Release);
            for cell in t.all_cells() {
                cell.state.lock().free_all();
            }
            dict.tables.remove(&dict_key(database, &t.def.name));
        }
        if let Some(ts) = &rt.def.tablespace {
            self.count_tablespace_user(ts, false)?;
        }
        Ok(true)
    }

    /// TRUNCATE TABLE, as NDB does it: the table and its hidden tables are dropped and
    /// created again empty, under new table ids (redo of the old rows names the old ids,
    /// so it can never apply to the new table); the auto-increment counter restarts.
    /// The schema file is written before anything changes: a failed write leaves the
    /// table as it was.
    pub fn truncate_table(&self, database: &str, name: &str) -> Result<()> {
        let mut dict = self.dict.write();
        let id_before = dict.next_table_id;
        let rt = dict
            .get(database, name)
            .filter(|t| !t.hidden)
            .ok_or_else(|| codes::no_such_table(name))?;
        let hidden: Vec<Arc<TableRuntime>> = rt
            .blob_tables
            .iter()
            .chain(rt.unique_tables.iter())
            .flatten()
            .cloned()
            .collect();
        for t in std::iter::once(&rt).chain(hidden.iter()) {
            wait_no_locks(t, self.lock_timeout_ms())?;
        }
        let new_rt = self.renumbered(&mut dict, &rt)?;
        let new_hidden: Vec<Arc<TableRuntime>> = new_rt
            .blob_tables
            .iter()
            .chain(new_rt.unique_tables.iter())
            .flatten()
            .cloned()
            .collect();
        let old_ids: Vec<u32> = std::iter::once(&rt)
            .chain(hidden.iter())
            .map(|t| t.def.id)
            .collect();
        let mut new_tables = new_hidden;
        new_tables.push(new_rt);
        self.write_schema_with(&mut dict, id_before, &old_ids, &new_tables)?;
        self.forget_checkpoints_of(&old_ids);
        for t in std::iter::once(&rt).chain(hidden.iter()) {
            t.dropped.store(true, Ordering::Release);
            for cell in t.all_cells() {
                cell.state.lock().free_all();
            }
            dict.tables.remove(&dict_key(database, &t.def.name));
        }
        for t in new_tables {
            dict.insert(t);
        }
        Ok(())
    }

    /// A copy of `rt` and its hidden tables under new ids, with empty fragments.
    fn renumbered(&self, dict: &mut Dictionary, rt: &TableRuntime) -> Result<Arc<TableRuntime>> {
        dict.next_table_id += 1;
        let mut def = (*rt.def).clone();
        def.id = dict.next_table_id;
        let def = Arc::new(def);
        let mut blob_tables = Vec::with_capacity(rt.blob_tables.len());
        for (col, b) in rt.blob_tables.iter().enumerate() {
            blob_tables.push(match b {
                Some(b) => {
                    dict.next_table_id += 1;
                    let mut d = (*b.def).clone();
                    d.id = dict.next_table_id;
                    d.name = format!("NDB$BLOB_{}_{}", def.id, col);
                    Some(self.hidden_runtime(d, &rt.database)?)
                }
                None => None,
            });
        }
        let mut unique_tables = Vec::with_capacity(rt.unique_tables.len());
        for u in &rt.unique_tables {
            unique_tables.push(match u {
                Some(u) => {
                    dict.next_table_id += 1;
                    let mut d = (*u.def).clone();
                    d.id = dict.next_table_id;
                    Some(self.hidden_runtime(d, &rt.database)?)
                }
                None => None,
            });
        }
        Ok(Arc::new(TableRuntime {
            fragments: self.make_fragments(&def)?,
            def,
            database: rt.database.clone(),
            auto_increment: Arc::new(AtomicU64::new(1)),
            blob_tables,
            unique_tables,
            dropped: Arc::new(AtomicBool::new(false)),
            hidden: false,
            extra_metadata: rt.extra_metadata.clone(),
        }))
    }

    /// CREATE INDEX on an existing table: builds the index from the committed rows.
    pub fn create_index(
        self: &Arc<Self>,
        database: &str,
        table: &str,
        name: &str,
        kind: IndexKind,
        cols: &[String],
    ) -> Result<()> {
        let mut dict = self.dict.write();
        let id_before = dict.next_table_id;
        let rt = dict
            .get(database, table)
            .filter(|t| !t.hidden)
            .ok_or_else(|| codes::no_such_table(table))?;
        if rt.def.index(name).is_some() {
            return Err(codes::index_exists(name));
        }
        if rt.def.indexes.len() >= 64 {
            return Err(NdbError::new(
                4243,
                ErrorClassification::ApplicationError,
                "Too many indexes on one table (at most 64)",
            ));
        }
        wait_no_locks(&rt, self.lock_timeout_ms())?;
        let idx = TableDef::index_def(&rt.def.columns, name, kind, cols)?;
        let mut def = (*rt.def).clone();
        def.indexes.push(idx.clone());
        let def = Arc::new(def);
        let mut unique_tables = rt.unique_tables.clone();
        let unique = if kind == IndexKind::UniqueHashIndex {
            dict.next_table_id += 1;
            let t = self.make_unique_table(&def, &idx, dict.next_table_id, database)?;
            Some(t)
        } else {
            None
        };
        unique_tables.push(unique.clone());
        let new_rt = Arc::new(TableRuntime {
            def: def.clone(),
            database: rt.database.clone(),
            fragments: rt.fragments.clone(),
            auto_increment: rt.auto_increment.clone(),
            blob_tables: rt.blob_tables.clone(),
            unique_tables,
            dropped: rt.dropped.clone(),
            hidden: false,
            extra_metadata: rt.extra_metadata.clone(),
        });
        if let Some(u) = &unique {
            // Fill the unique index from the existing rows; a duplicate fails the build.
            if let Err(e) =
                super::unique::build_unique_index(self, &new_rt, def.indexes.len() - 1, u)
            {
                for cell in u.all_cells() {
                    cell.state.lock().free_all();
                }
                return Err(e);
            }
        }
        let mut failed = None;
        for cell in rt.all_cells() {
            if let Err(e) = cell.state.lock().add_index(def.clone()) {
                failed = Some(e);
                break;
            }
        }
        let mut new_tables = vec![new_rt];
        new_tables.extend(unique.iter().cloned());
        if failed.is_none() {
            failed = self
                .write_schema_with(&mut dict, id_before, &[rt.def.id], &new_tables)
                .err();
        }
        if let Some(e) = failed {
            // Undo the index on every fragment that has it, and its unique table.
            for c2 in rt.all_cells() {
                c2.state.lock().remove_last_index(rt.def.clone());
            }
            if let Some(u) = &unique {
                for c in u.all_cells() {
                    c.state.lock().free_all();
                }
            }
            return Err(e);
        }
        for t in new_tables {
            dict.insert(t);
        }
        Ok(())
    }

    /// DROP INDEX.
    pub fn drop_index(&self, database: &str, table: &str, name: &str) -> Result<()> {
        let mut dict = self.dict.write();
        let id_before = dict.next_table_id;
        let rt = dict
            .get(database, table)
            .filter(|t| !t.hidden)
            .ok_or_else(|| codes::no_such_table(table))?;
        let (pos, _) = rt
            .def
            .index(name)
            .ok_or_else(|| codes::no_such_index(name))?;
        wait_no_locks(&rt, self.lock_timeout_ms())?;
        let mut def = (*rt.def).clone();
        def.indexes.remove(pos);
        let def = Arc::new(def);
        let mut unique_tables = rt.unique_tables.clone();
        let unique = unique_tables.remove(pos);
        let new_rt = Arc::new(TableRuntime {
            def: def.clone(),
            database: rt.database.clone(),
            fragments: rt.fragments.clone(),
            auto_increment: rt.auto_increment.clone(),
            blob_tables: rt.blob_tables.clone(),
            unique_tables,
            dropped: rt.dropped.clone(),
            hidden: false,
            extra_metadata: rt.extra_metadata.clone(),
        });
        // The schema file first: a failed write leaves the index in place.
        let mut gone = vec![rt.def.id];
        gone.extend(unique.iter().map(|u| u.def.id));
        self.write_schema_with(&mut dict, id_before, &gone, std::slice::from_ref(&new_rt))?;
        if let Some(u) = unique {
            u.dropped.store(true, Ordering::Release);
            for cell in u.all_cells() {
                cell.state.lock().free_all();
            }
            dict.tables.remove(&dict_key(database, &u.def.name));
        }
        for cell in rt.all_cells() {
            cell.state.lock().drop_index(pos, def.clone());
        }
        dict.insert(new_rt);
        Ok(())
    }
}

/// Schema changes need the table quiet: waits until no fragment has a locked row.
fn wait_no_locks(rt: &TableRuntime, timeout_ms: u64) -> Result<()> {
    let deadline =
        std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms.max(1) * 4);
    loop {
        let busy = rt.all_cells().any(|c| c.state.lock().lock_count() > 0);
        if !busy {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(NdbError::new(
                785,
                ErrorClassification::TemporaryResourceError,
                "Schema object is busy with another schema transaction",
            )
            .detail(format!(
                "table '{}' has rows locked by open transactions",
                rt.def.name
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Default charset of string columns created without one (MySQL 8's utf8mb4).
pub const DEFAULT_CHARSET: Charset = Charset::Utf8mb4;

pub(crate) fn shared_dict() -> RwLock<Dictionary> {
    RwLock::new(Dictionary::default())
}
