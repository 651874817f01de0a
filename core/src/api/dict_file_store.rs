//! The schema file on the data nodes: reading it ([`load_schema`]), removing it at an
//! initial start, writing it from the dictionary (every DDL calls
//! `ClusterInner::write_schema_with` before its change becomes visible), and rebuilding
//! the dictionary of a restarted cluster from it (`ClusterInner::recreate_dictionary`).
//! Format and rules: the parent module and `docs/schema-file.md`.
//!
//! Lock order: the dictionary lock, then `disk_dict` (both held while writing).

use super::{HiddenOwner, MAX_EXTRA_METADATA_BYTES, SCHEMA_FILE, SchemaImage, TableImage};
use crate::api::cluster::ClusterInner;
use crate::api::dict::{Dictionary, TableRuntime};
use crate::api::disk::DiskDict;
use crate::disk::io::FileSystem;
use crate::error::{Result, codes};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// Reads the schema file of the data node whose file-system directory is
/// `node_fs_dir`; `None` when there is none (an initial start).
pub fn load_schema(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<Option<SchemaImage>> {
    let path = node_fs_dir.join(SCHEMA_FILE);
    let bytes = fs
        .read_all(&path)
        .map_err(|e| codes::file_read_error(format_args!("{}: {e}", path.display())))?;
    match bytes {
        None => Ok(None),
        Some(b) => SchemaImage::decode(&b).map(Some).map_err(|mut e| {
            e.message = format!("{} (in {})", e.message, path.display());
            e
        }),
    }
}

/// An initial start: removes the schema file of the node at `node_fs_dir`; whether
/// there was one.
pub fn remove_schema_file(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<bool> {
    let path = node_fs_dir.join(SCHEMA_FILE);
    if !fs.exists(&path) {
        return Ok(false);
    }
    fs.remove(&path)
        .map_err(|e| codes::file_system_error(format_args!("{}: {e}", path.display())))?;
    Ok(true)
}

impl ClusterInner {
    fn node_dirs(&self) -> Vec<(u32, PathBuf)> {
        self.data_nodes
            .iter()
            .map(|n| (n.node_id, n.disk.fs_dir().to_path_buf()))
            .collect()
    }

    /// The image of `tables` with the disk objects of `disk`.
    pub(crate) fn schema_image_of(
        &self,
        tables: &[Arc<TableRuntime>],
        next_table_id: u32,
        disk: &DiskDict,
    ) -> Result<SchemaImage> {
        SchemaImage::of(tables, next_table_id, disk, &self.node_dirs())
    }

    /// The image of the dictionary as it is now.
    pub fn schema_image(&self) -> Result<SchemaImage> {
        let dict = self.dict.read();
        let disk = self.disk_dict.lock();
        self.schema_image_of(&dict.all(), dict.next_table_id(), &disk)
    }

    /// Writes `image` to every data node's schema file (nothing without a data
    /// directory). Stops at the first failure (error 1509).
    pub(crate) fn write_schema_image(&self, image: &SchemaImage) -> Result<()> {
        if self.data_dir.is_none() {
            return Ok(());
        }
        let bytes = image.encode();
        for n in &self.data_nodes {
            let path = n.disk.fs_dir().join(SCHEMA_FILE);
            let fs = n.disk.fs();
            let dir = path.parent().unwrap_or(Path::new(""));
            fs.create_dir_all(dir)
                .and_then(|_| fs.write_atomic(&path, &bytes))
                .map_err(|e| codes::file_system_error(format_args!("{}: {e}", path.display())))?;
        }
        Ok(())
    }

    /// Writes the image of `dict` and `disk` (see [`Self::write_schema_image`]).
    pub(crate) fn write_schema_file(&self, dict: &Dictionary, disk: &DiskDict) -> Result<()> {
        if self.data_dir.is_none() {
            return Ok(());
        }
        self.write_schema_image(&self.schema_image_of(&dict.all(), dict.next_table_id(), disk)?)
    }

    /// Writes the image of the dictionary `dict` becomes when the tables with ids in
    /// `remove` are replaced by `add` (a DDL about to change it). On a failure the ids
    /// the DDL took are given back (`next_table_id` = `id_before`), the files are put
    /// back to the image of `dict` as it is, and the error returned: the caller then
    /// leaves `dict` unchanged.
    pub(crate) fn write_schema_with(
        &self,
        dict: &mut Dictionary,
        id_before: u32,
        remove: &[u32],
        add: &[Arc<TableRuntime>],
    ) -> Result<()> {
        if self.data_dir.is_none() {
            return Ok(());
        }
        let mut tables: Vec<Arc<TableRuntime>> = dict
            .all()
            .into_iter()
            .filter(|t| !remove.contains(&t.def.id))
            .collect();
        tables.extend(add.iter().cloned());
        let disk = self.disk_dict.lock();
        let image = self.schema_image_of(&tables, dict.next_table_id(), &disk)?;
        if let Err(e) = self.write_schema_image(&image) {
            dict.set_next_table_id(id_before);
            self.restore_schema_file(dict, &disk);
            return Err(e);
        }
        Ok(())
    }

    /// After a failed write: puts the image of the (unchanged) dictionary back on the
    /// nodes that took the new one. Best effort; the DDL reports the first error.
    pub(crate) fn restore_schema_file(&self, dict: &Dictionary, disk: &DiskDict) {
        let _ = self.write_schema_file(dict, disk);
    }

    /// Writes the schema file of the dictionary as it is now (e.g. after a restart).
    pub fn save_schema(&self) -> Result<()> {
        let dict = self.dict.read();
        let disk = self.disk_dict.lock();
        self.write_schema_file(&dict, &disk)
    }

    /// Replaces the SQL layer's bytes kept with a table ([`TableRuntime::extra_metadata`],
    /// NDB's `Table::setExtraMetadata`) and writes the schema file; a failed write leaves
    /// the old bytes. At most [`MAX_EXTRA_METADATA_BYTES`].
    pub fn set_extra_metadata(&self, database: &str, table: &str, bytes: &[u8]) -> Result<()> {
        if bytes.len() > MAX_EXTRA_METADATA_BYTES {
            return Err(codes::bad_argument(format_args!(
                "extra metadata of {} bytes, at most {MAX_EXTRA_METADATA_BYTES}",
                bytes.len()
            )));
        }
        let mut dict = self.dict.write();
        let id_before = dict.next_table_id();
        let rt = dict
            .get(database, table)
            .filter(|t| !t.hidden)
            .ok_or_else(|| codes::no_such_table(table))?;
        let new_rt = Arc::new(TableRuntime {
            def: rt.def.clone(),
            database: rt.database.clone(),
            fragments: rt.fragments.clone(),
            auto_increment: rt.auto_increment.clone(),
            blob_tables: rt.blob_tables.clone(),
            unique_tables: rt.unique_tables.clone(),
            dropped: rt.dropped.clone(),
            hidden: false,
            extra_metadata: Arc::from(bytes),
        });
        self.write_schema_with(
            &mut dict,
            id_before,
            &[rt.def.id],
            std::slice::from_ref(&new_rt),
        )?;
        dict.insert(new_rt);
        Ok(())
    }

    /// Rebuilds the dictionary of a freshly started cluster from `image`: every table
    /// with its id, database, definition, partitions and hidden tables, with empty
    /// fragments (recovery fills them), its auto-increment counter, and the next table
    /// id. The tablespaces the tables use must exist on the data nodes already (the
    /// disk objects are the caller's: [`SchemaImage::disk_objects`]). Error when the
    /// dictionary is not empty; on an error nothing is added.
    pub fn recreate_dictionary(&self, image: &SchemaImage) -> Result<()> {
        image.validate()?;
        let mut dict = self.dict.write();
        if dict.table_count() != 0 {
            return Err(codes::bad_argument(
                "recreate_dictionary needs an empty dictionary",
            ));
        }
        let max_tables = self
            .data_nodes
            .first()
            .map(|n| n.config.max_no_of_tables)
            .unwrap_or(128) as usize;
        if image.tables.len() > max_tables {
            return Err(codes::too_many_tables());
        }
        let runtime = |t: &TableImage,
                       blob_tables: Vec<Option<Arc<TableRuntime>>>,
                       unique_tables: Vec<Option<Arc<TableRuntime>>>|
         -> Result<Arc<TableRuntime>> {
            Ok(Arc::new(TableRuntime {
                fragments: self.make_fragments(&t.def)?,
                def: t.def.clone(),
                database: t.database.clone(),
                auto_increment: Arc::new(AtomicU64::new(t.auto_increment)),
                blob_tables,
                unique_tables,
                dropped: Arc::new(AtomicBool::new(false)),
                hidden: t.owner.is_some(),
                extra_metadata: t.extra_metadata.clone(),
            }))
        };
        let mut hidden: BTreeMap<HiddenOwner, Arc<TableRuntime>> = BTreeMap::new();
        for t in image.tables.iter() {
            if let Some(owner) = t.owner {
                hidden.insert(owner, runtime(t, Vec::new(), Vec::new())?);
            }
        }
        let mut all: Vec<Arc<TableRuntime>> = hidden.values().cloned().collect();
        for t in image.tables.iter().filter(|t| t.owner.is_none()) {
            let table_id = t.def.id;
            let blob_tables = (0..t.def.columns.len() as u32)
                .map(|column| {
                    hidden
                        .get(&HiddenOwner::BlobParts { table_id, column })
                        .cloned()
                })
                .collect();
            let unique_tables = (0..t.def.indexes.len() as u32)
                .map(|index| {
                    hidden
                        .get(&HiddenOwner::UniqueIndex { table_id, index })
                        .cloned()
                })
                .collect();
            all.push(runtime(t, blob_tables, unique_tables)?);
        }
        let mut counted: Vec<&str> = Vec::new();
        for t in all.iter().filter(|t| !t.hidden) {
            if let Some(ts) = &t.def.tablespace {
                if let Err(e) = self.count_tablespace_user(ts, true) {
                    for done in counted {
                        let _ = self.count_tablespace_user(done, false);
                    }
                    return Err(e);
                }
                counted.push(ts);
            }
        }
        for t in all {
            dict.insert(t);
        }
        dict.set_next_table_id(image.next_table_id);
        Ok(())
    }
}
