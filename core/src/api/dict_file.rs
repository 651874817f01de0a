//! The schema file (DBDICT's `P0.SchemaLog`): one image of the whole dictionary, kept in
//! every data node's file-system directory (`ndb_<id>_fs/D1/DBDICT/P0.SchemaLog`) so that
//! a system restart knows every table with the same ids before the redo log names them.
//!
//! The image holds every table, hidden ones included (id, database, definition with its
//! partition count, logging flag and tablespace; what a hidden table belongs to: the
//! BLOB parts of table T column C, or unique index I of table T), each table's
//! auto-increment counter at write time, the next table id, and the disk objects
//! (logfile group with its undo files, tablespaces with their options and data files,
//! each file with its path on every node) in creation order. Byte layout:
//! `docs/schema-file.md`; tables are encoded by [`crate::schema::codec`]. This module
//! holds the image and its format; `dict_file_store.rs` reads, writes and recreates.
//!
//! Invariants:
//! - Written (with `FileSystem::write_atomic`: old or new image after a crash, never a
//!   mix) after every DDL that changes the dictionary and before the DDL returns
//!   success; only when the cluster has a data directory. A DDL whose write fails
//!   returns the error and leaves the in-memory dictionary as it was (see each DDL), and
//!   the files are rewritten from the unchanged dictionary (best effort).
//! - Table ids are never reused: `next_table_id` is in the file, and TRUNCATE gives the
//!   table (and its hidden tables) new ids, so redo of old rows can never apply.
//! - A decoded image is consistent: ids unique and below `next_table_id`, names unique
//!   per database, every hidden table owned by a live table's BLOB column or unique
//!   index, at most one logfile group, every tablespace on it.
//!
//! Lock order: the dictionary lock, then `disk_dict` (both held while writing).

use super::dict::TableRuntime;
use super::disk::DiskDict;
use crate::error::{NdbError, Result, codes};
use crate::schema::codec::{self, Decoder, Encoder};
use crate::schema::{ColumnType, IndexKind, TableDef};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The schema file, relative to a data node's file-system directory (NDB's name).
pub const SCHEMA_FILE: &str = "D1/DBDICT/P0.SchemaLog";
pub const SCHEMA_MAGIC: [u8; 4] = *b"NDBS";
pub const SCHEMA_FORMAT_VERSION: u16 = 1;
/// Largest extra metadata kept with one table.
pub const MAX_EXTRA_METADATA_BYTES: usize = 1 << 20;

/// What a hidden table belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HiddenOwner {
    /// The parts table of BLOB/TEXT column `column` of table `table_id`.
    BlobParts { table_id: u32, column: u32 },
    /// The hidden table of unique index `index` (position in `def.indexes`).
    UniqueIndex { table_id: u32, index: u32 },
}

impl HiddenOwner {
    pub fn table_id(self) -> u32 {
        match self {
            HiddenOwner::BlobParts { table_id, .. } | HiddenOwner::UniqueIndex { table_id, .. } => {
                table_id
            }
        }
    }
}

/// One table of the image.
#[derive(Debug, Clone)]
pub struct TableImage {
    pub database: String,
    pub def: Arc<TableDef>,
    /// `Some` for a hidden table.
    pub owner: Option<HiddenOwner>,
    /// The auto-increment counter (next value) when the image was written; recovery
    /// must still raise it past the largest key it restores.
    pub auto_increment: u64,
    /// The SQL layer's bytes for the table ([`TableRuntime::extra_metadata`]).
    pub extra_metadata: Arc<[u8]>,
}

/// An undo file or data file: its name in the DDL, size, and path on each data node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileImage {
    pub file_name: String,
    pub size_bytes: u64,
    /// (data node id, path), in data node order.
    pub node_paths: Vec<(u32, PathBuf)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogfileGroupImage {
    pub id: u32,
    pub name: String,
    pub undo_buffer_size_bytes: u64,
    pub undo_files: Vec<FileImage>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablespaceImage {
    pub id: u32,
    pub name: String,
    pub logfile_group: String,
    pub extent_size_bytes: u64,
    /// 0 = no autoextend.
    pub autoextend_size_bytes: u64,
    /// 0 = no maximum.
    pub max_size_bytes: u64,
    pub data_files: Vec<FileImage>,
}

/// A disk-data object, in creation order (by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskObject {
    LogfileGroup(LogfileGroupImage),
    Tablespace(TablespaceImage),
}

impl DiskObject {
    pub fn id(&self) -> u32 {
        match self {
            DiskObject::LogfileGroup(g) => g.id,
            DiskObject::Tablespace(t) => t.id,
        }
    }
}

/// The whole dictionary as the schema file holds it.
#[derive(Debug, Clone, Default)]
pub struct SchemaImage {
    /// The last table id handed out; new tables get larger ones.
    pub next_table_id: u32,
    /// Every table, hidden ones included, by id.
    pub tables: Vec<TableImage>,
    /// The last disk object id handed out.
    pub last_disk_object_id: u32,
    disk_objects: Vec<DiskObject>,
}

fn corrupt(what: impl std::fmt::Display) -> NdbError {
    codes::corrupt_schema_file(what)
}

impl SchemaImage {
    /// The disk objects in creation order.
    pub fn disk_objects(&self) -> &[DiskObject] {
        &self.disk_objects
    }

    pub fn table(&self, id: u32) -> Option<&TableImage> {
        self.tables.iter().find(|t| t.def.id == id)
    }

    /// The image of a dictionary: `tables` (every runtime, hidden ones included) and the
    /// disk objects, with each file's path on every node of `nodes` (id, fs dir).
    pub(crate) fn of(
        tables: &[Arc<TableRuntime>],
        next_table_id: u32,
        disk: &DiskDict,
        nodes: &[(u32, PathBuf)],
    ) -> Result<SchemaImage> {
        let mut owners: BTreeMap<u32, HiddenOwner> = BTreeMap::new();
        for t in tables.iter().filter(|t| !t.hidden) {
            let table_id = t.def.id;
            for (c, b) in t.blob_tables.iter().enumerate() {
                if let Some(b) = b {
                    let column = c as u32;
                    owners.insert(b.def.id, HiddenOwner::BlobParts { table_id, column });
                }
            }
            for (i, u) in t.unique_tables.iter().enumerate() {
                if let Some(u) = u {
                    let index = i as u32;
                    owners.insert(u.def.id, HiddenOwner::UniqueIndex { table_id, index });
                }
            }
        }
        let mut images = Vec::with_capacity(tables.len());
        for t in tables {
            let owner = owners.get(&t.def.id).copied();
            if t.hidden != owner.is_some() {
                return Err(codes::internal(format_args!(
                    "hidden table '{}' has no owner",
                    t.def.name
                )));
            }
            images.push(TableImage {
                database: t.database.clone(),
                def: t.def.clone(),
                owner,
                auto_increment: t.auto_increment.load(Ordering::Acquire),
                extra_metadata: t.extra_metadata.clone(),
            });
        }
        images.sort_by_key(|t| t.def.id);
        let files = |files: &[super::disk::FileDef]| -> Vec<FileImage> {
            files
                .iter()
                .map(|f| FileImage {
                    file_name: f.file_name.clone(),
                    size_bytes: f.size_bytes,
                    node_paths: nodes
                        .iter()
                        .map(|(id, dir)| (*id, resolve(dir, &f.file_name)))
                        .collect(),
                })
                .collect()
        };
        let mut disk_objects = Vec::new();
        if let Some(g) = &disk.logfile_group {
            disk_objects.push(DiskObject::LogfileGroup(LogfileGroupImage {
                id: g.id,
                name: g.name.clone(),
                undo_buffer_size_bytes: g.undo_buffer_size,
                undo_files: files(&g.undo_files),
            }));
        }
        for t in disk.tablespaces.values() {
            disk_objects.push(DiskObject::Tablespace(TablespaceImage {
                id: t.id,
                name: t.name.clone(),
                logfile_group: t.logfile_group.clone(),
                extent_size_bytes: t.extent_size_bytes,
                autoextend_size_bytes: t.autoextend_size_bytes,
                max_size_bytes: t.max_size_bytes,
                data_files: files(&t.data_files),
            }));
        }
        disk_objects.sort_by_key(|o| o.id());
        let image = SchemaImage {
            next_table_id,
            tables: images,
            last_disk_object_id: disk.last_id(),
            disk_objects,
        };
        image
            .validate()
            .map_err(|e| codes::internal(e.to_string()))?;
        Ok(image)
    }

    /// The file's bytes (framed, checksummed).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new();
        e.u32(self.next_table_id);
        e.u32(self.tables.len() as u32);
        for t in &self.tables {
            e.str(&t.database);
            match t.owner {
                None => e.u8(0),
                Some(HiddenOwner::BlobParts { table_id, column }) => {
                    e.u8(1);
                    e.u32(table_id);
                    e.u32(column);
                }
                Some(HiddenOwner::UniqueIndex { table_id, index }) => {
                    e.u8(2);
                    e.u32(table_id);
                    e.u32(index);
                }
            }
            e.u64(t.auto_increment);
            e.bytes(&t.extra_metadata);
            codec::encode_table_def(&mut e, &t.def);
        }
        e.u32(self.last_disk_object_id);
        e.u32(self.disk_objects.len() as u32);
        for o in &self.disk_objects {
            match o {
                DiskObject::LogfileGroup(g) => {
                    e.u8(1);
                    e.u32(g.id);
                    e.str(&g.name);
                    e.u64(g.undo_buffer_size_bytes);
                    encode_files(&mut e, &g.undo_files);
                }
                DiskObject::Tablespace(t) => {
                    e.u8(2);
                    e.u32(t.id);
                    e.str(&t.name);
                    e.str(&t.logfile_group);
                    e.u64(t.extent_size_bytes);
                    e.u64(t.autoextend_size_bytes);
                    e.u64(t.max_size_bytes);
                    encode_files(&mut e, &t.data_files);
                }
            }
        }
        codec::seal_file(SCHEMA_MAGIC, SCHEMA_FORMAT_VERSION, &e.into_bytes())
    }

    /// Verifies and decodes a schema file (error 2316 for anything wrong).
    pub fn decode(bytes: &[u8]) -> Result<SchemaImage> {
        let body = codec::open_file(bytes, SCHEMA_MAGIC, SCHEMA_FORMAT_VERSION)?;
        let mut d = Decoder::new(body);
        let next_table_id = d.u32()?;
        let ntables = d.u32()? as usize;
        let mut tables = Vec::with_capacity(ntables.min(d.remaining()));
        for _ in 0..ntables {
            let database = d.str()?;
            let owner = match d.u8()? {
                0 => None,
                1 => Some(HiddenOwner::BlobParts {
                    table_id: d.u32()?,
                    column: d.u32()?,
                }),
                2 => Some(HiddenOwner::UniqueIndex {
                    table_id: d.u32()?,
                    index: d.u32()?,
                }),
                k => return Err(corrupt(format_args!("hidden-table owner kind {k}"))),
            };
            let auto_increment = d.u64()?;
            let extra_metadata = Arc::from(d.bytes()?);
            let def = Arc::new(codec::decode_table_def(&mut d)?);
            tables.push(TableImage {
                database,
                def,
                owner,
                auto_increment,
                extra_metadata,
            });
        }
        let last_disk_object_id = d.u32()?;
        let nobjects = d.u32()? as usize;
        let mut disk_objects = Vec::with_capacity(nobjects.min(d.remaining()));
        for _ in 0..nobjects {
            disk_objects.push(match d.u8()? {
                1 => DiskObject::LogfileGroup(LogfileGroupImage {
                    id: d.u32()?,
                    name: d.str()?,
                    undo_buffer_size_bytes: d.u64()?,
                    undo_files: decode_files(&mut d)?,
                }),
                2 => DiskObject::Tablespace(TablespaceImage {
                    id: d.u32()?,
                    name: d.str()?,
                    logfile_group: d.str()?,
                    extent_size_bytes: d.u64()?,
                    autoextend_size_bytes: d.u64()?,
                    max_size_bytes: d.u64()?,
                    data_files: decode_files(&mut d)?,
                }),
                k => return Err(corrupt(format_args!("disk object kind {k}"))),
            });
        }
        d.finish()?;
        let image = SchemaImage {
            next_table_id,
            tables,
            last_disk_object_id,
            disk_objects,
        };
        image.validate()?;
        Ok(image)
    }

    /// The consistency rules of the module doc (error 2316 when broken).
    pub fn validate(&self) -> Result<()> {
        let mut names = BTreeSet::new();
        let mut prev_id = 0;
        let mut owners = BTreeSet::new();
        for t in &self.tables {
            let (id, name) = (t.def.id, &t.def.name);
            if id == 0 || id <= prev_id || id > self.next_table_id {
                return Err(corrupt(format_args!(
                    "table '{name}': id {id} out of order or beyond {}",
                    self.next_table_id
                )));
            }
            prev_id = id;
            let key = (t.database.to_ascii_lowercase(), name.to_ascii_lowercase());
            if !names.insert(key) {
                return Err(corrupt(format_args!("table '{name}' appears twice")));
            }
            let Some(owner) = t.owner else { continue };
            let main = self
                .table(owner.table_id())
                .filter(|m| m.owner.is_none() && m.database == t.database)
                .ok_or_else(|| corrupt(format_args!("hidden table '{name}' has no owner table")))?;
            let fits = match owner {
                HiddenOwner::BlobParts { column, .. } => {
                    main.def.columns.get(column as usize).is_some_and(
                        |c| matches!(c.ty, ColumnType::Blob { kind, .. } if kind.part_size() > 0),
                    )
                }
                HiddenOwner::UniqueIndex { index, .. } => main
                    .def
                    .indexes
                    .get(index as usize)
                    .is_some_and(|i| i.kind == IndexKind::UniqueHashIndex),
            };
            if !fits || !owners.insert(owner) {
                return Err(corrupt(format_args!(
                    "hidden table '{name}': bad owner {owner:?}"
                )));
            }
        }
        // Every BLOB column with parts and every unique index has its hidden table.
        for t in self.tables.iter().filter(|t| t.owner.is_none()) {
            let table_id = t.def.id;
            let blobs = t.def.columns.iter().enumerate().filter(
                |(_, c)| matches!(c.ty, ColumnType::Blob { kind, .. } if kind.part_size() > 0),
            );
            let uniques = t
                .def
                .indexes
                .iter()
                .enumerate()
                .filter(|(_, i)| i.kind == IndexKind::UniqueHashIndex);
            let missing = blobs
                .map(|(c, _)| HiddenOwner::BlobParts {
                    table_id,
                    column: c as u32,
                })
                .chain(uniques.map(|(i, _)| HiddenOwner::UniqueIndex {
                    table_id,
                    index: i as u32,
                }))
                .find(|o| !owners.contains(o));
            if let Some(o) = missing {
                return Err(corrupt(format_args!(
                    "table '{}': no hidden table for {o:?}",
                    t.def.name
                )));
            }
        }
        let mut groups = Vec::new();
        let mut prev_id = 0;
        for o in &self.disk_objects {
            if o.id() == 0 || o.id() <= prev_id || o.id() > self.last_disk_object_id {
                return Err(corrupt(format_args!(
                    "disk object id {} out of order",
                    o.id()
                )));
            }
            prev_id = o.id();
            match o {
                DiskObject::LogfileGroup(g) => groups.push(g.name.to_ascii_lowercase()),
                DiskObject::Tablespace(t) => {
                    if !groups.contains(&t.logfile_group.to_ascii_lowercase()) {
                        return Err(corrupt(format_args!(
                            "tablespace '{}' on unknown logfile group '{}'",
                            t.name, t.logfile_group
                        )));
                    }
                }
            }
        }
        if groups.len() > 1 {
            return Err(corrupt("more than one logfile group"));
        }
        Ok(())
    }
}

/// A file name as a node opens it: absolute as given, else in the node's directory.
fn resolve(fs_dir: &Path, file_name: &str) -> PathBuf {
    let p = Path::new(file_name);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        fs_dir.join(p)
    }
}

fn encode_files(e: &mut Encoder, files: &[FileImage]) {
    e.u32(files.len() as u32);
    for f in files {
        e.str(&f.file_name);
        e.u64(f.size_bytes);
        e.u32(f.node_paths.len() as u32);
        for (node, path) in &f.node_paths {
            e.u32(*node);
            e.bytes(path.as_os_str().as_bytes());
        }
    }
}

fn decode_files(d: &mut Decoder) -> Result<Vec<FileImage>> {
    let n = d.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(d.remaining()));
    for _ in 0..n {
        let file_name = d.str()?;
        let size_bytes = d.u64()?;
        let nodes = d.u32()? as usize;
        let mut node_paths = Vec::with_capacity(nodes.min(d.remaining()));
        for _ in 0..nodes {
            let node = d.u32()?;
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(&d.bytes()?));
            node_paths.push((node, path));
        }
        out.push(FileImage {
            file_name,
            size_bytes,
            node_paths,
        });
    }
    Ok(out)
}

#[path = "dict_file_store.rs"]
mod store;
pub use store::{load_schema, remove_schema_file};

#[cfg(test)]
#[path = "dict_file_tests.rs"]
mod tests;
