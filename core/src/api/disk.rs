//! Disk-data objects of the cluster (DICT's filegroups and files): the logfile group
//! and the tablespaces, created on every data node (each writes its own copy of every
//! file, as NDB's data nodes do).
//!
//! A statement is applied node by node; when a node fails, the nodes already done are
//! rolled back, so the cluster never holds an object on some nodes only. NDB's rules:
//! one logfile group (1514); all disk objects share one namespace (721); a tablespace
//! names an existing logfile group (789); drop order is tables, data files,
//! tablespace, logfile group (768 / 770 otherwise).
//!
//! Every change is recorded in the schema file (`dict_file`): names, sizes and options
//! of the logfile group, undo files, tablespaces and data files, in creation order.
//!
//! Lock order: the dictionary lock (held for reading, so that the schema file written
//! sees the tables too), then `ClusterInner::disk_dict`, then each node's disk managers.

use super::ClusterInner;
use crate::disk::tsman::TablespaceSpec;
use crate::error::{Result, codes};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// NDB's defaults (sql_tablespace.h, Tablespace_options).
pub const DEFAULT_UNDO_FILE_BYTES: u64 = 128 << 20;
pub const DEFAULT_UNDO_BUFFER_BYTES: u64 = 8 << 20;
pub const DEFAULT_DATA_FILE_BYTES: u64 = 128 << 20;
pub const DEFAULT_EXTENT_BYTES: u64 = 1 << 20;

/// A disk-data DDL operation (what the SQL statements become).
#[derive(Debug, Clone, PartialEq)]
pub enum DiskOp {
    CreateLogfileGroup {
        name: String,
        undo_file: String,
        initial_size: Option<u64>,
        undo_buffer_size: Option<u64>,
    },
    AddUndofile {
        group: String,
        undo_file: String,
        initial_size: Option<u64>,
    },
    DropLogfileGroup {
        name: String,
    },
    CreateTablespace {
        name: String,
        data_file: String,
        logfile_group: String,
        initial_size: Option<u64>,
        extent_size: Option<u64>,
        autoextend_size: Option<u64>,
        max_size: Option<u64>,
    },
    AddDatafile {
        tablespace: String,
        data_file: String,
        initial_size: Option<u64>,
    },
    DropDatafile {
        tablespace: String,
        data_file: String,
    },
    DropTablespace {
        name: String,
    },
}

/// An undo file or data file as the DDL named it (relative names live in each data
/// node's file-system directory), in the order the files were added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDef {
    pub file_name: String,
    pub size_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct LogfileGroupDef {
    pub id: u32,
    pub name: String,
    pub undo_buffer_size: u64,
    pub undo_files: Vec<FileDef>,
}

#[derive(Debug, Clone)]
pub struct TablespaceDef {
    pub id: u32,
    pub name: String,
    pub logfile_group: String,
    /// TSMAN's id of this tablespace on each data node, in `data_nodes` order.
    pub node_ids: Vec<u32>,
    pub extent_size_bytes: u64,
    pub autoextend_size_bytes: u64,
    pub max_size_bytes: u64,
    pub data_files: Vec<FileDef>,
}

/// The cluster's disk objects.
#[derive(Debug, Default, Clone)]
pub struct DiskDict {
    pub logfile_group: Option<LogfileGroupDef>,
    /// By lower-case name.
    pub tablespaces: BTreeMap<String, TablespaceDef>,
    next_id: u32,
}

impl DiskDict {
    fn name_taken(&self, name: &str) -> bool {
        self.logfile_group
            .as_ref()
            .is_some_and(|g| g.name.eq_ignore_ascii_case(name))
            || self.tablespaces.contains_key(&name.to_ascii_lowercase())
    }

    pub fn tablespace(&self, name: &str) -> Option<&TablespaceDef> {
        self.tablespaces.get(&name.to_ascii_lowercase())
    }

    /// The id the next disk object would get minus one (ids are never reused).
    pub fn last_id(&self) -> u32 {
        self.next_id
    }

    /// Restart: ids continue after `id` (the schema file's last disk object id).
    pub(super) fn set_last_id(&mut self, id: u32) {
        self.next_id = id;
    }

    /// The disk dictionary after a successful drop `op` (None for other operations
    /// or when the object does not exist: the drop then fails without a change).
    fn after_drop(&self, op: &DiskOp) -> Option<DiskDict> {
        let mut after = self.clone();
        match op {
            DiskOp::DropLogfileGroup { name } => {
                check_group(self, name).ok()?;
                if !self.tablespaces.is_empty() {
                    return None; // in use: the drop fails (error 768) without a write
                }
                after.logfile_group = None;
            }
            DiskOp::DropTablespace { name } => {
                after.tablespaces.remove(&name.to_ascii_lowercase())?;
            }
            DiskOp::DropDatafile {
                tablespace,
                data_file,
            } => {
                let ts = after
                    .tablespaces
                    .get_mut(&tablespace.to_ascii_lowercase())?;
                let pos = ts
                    .data_files
                    .iter()
                    .position(|f| f.file_name == *data_file)?;
                ts.data_files.remove(pos);
            }
            _ => return None,
        }
        Some(after)
    }
}

/// What undoes a create when the schema file cannot be written.
enum UndoCreate {
    LogfileGroup,
    Tablespace(String, String),
    Datafile(String, String),
    Nothing,
}

impl ClusterInner {
    /// Runs a disk-data DDL operation on every data node and records the result in the
    /// schema file (see `dict_file`). A drop writes the schema file first (a failed
    /// write changes nothing); a create writes it after and is undone on every node when
    /// the write fails. ADD UNDOFILE cannot be undone: when the write fails the file
    /// stays in the logfile group and the error is returned.
    pub fn disk_ddl(&self, op: DiskOp) -> Result<()> {
        self.check_open()?;
        if matches!(op, DiskOp::CreateLogfileGroup { .. }) {
            self.reset_undo_keep()?;
        }
        // Lock order as CREATE TABLE: dictionary, then disk dictionary.
        let dict = self.dict.read();
        let mut dd = self.disk_dict.lock();
        if let Some(after) = dd.after_drop(&op) {
            if let Err(e) = self.write_schema_file(&dict, &after) {
                self.restore_schema_file(&dict, &dd);
                return Err(e);
            }
            let r = self.apply_disk_op(&mut dd, op);
            if r.is_err() {
                self.restore_schema_file(&dict, &dd);
            }
            return r;
        }
        let undo = match &op {
            DiskOp::CreateLogfileGroup { .. } => UndoCreate::LogfileGroup,
            DiskOp::CreateTablespace {
                name, data_file, ..
            } => UndoCreate::Tablespace(name.clone(), data_file.clone()),
            DiskOp::AddDatafile {
                tablespace,
                data_file,
                ..
            } => UndoCreate::Datafile(tablespace.clone(), data_file.clone()),
            _ => UndoCreate::Nothing,
        };
        self.apply_disk_op(&mut dd, op)?;
        if let Err(e) = self.write_schema_file(&dict, &dd) {
            self.undo_create(&mut dd, undo);
            self.restore_schema_file(&dict, &dd);
            return Err(e);
        }
        Ok(())
    }

    /// Before CREATE LOGFILE GROUP: the system files' undo keep goes back to 0 (the
    /// new log's LSNs start again) and is on disk before the log exists. Under the LCP
    /// lock, so that no checkpoint round of the old log saves its keep afterwards.
    fn reset_undo_keep(&self) -> Result<()> {
        let _one = self.lcp_turn()?;
        let mut any = false;
        for n in &self.data_nodes {
            if let Some(log) = &n.log {
                log.set_undo_keep(0);
                any = true;
            }
        }
        if any {
            self.force_gcp()?;
        }
        Ok(())
    }

    /// Undoes a create whose schema file write failed, on every node.
    fn undo_create(&self, dd: &mut DiskDict, undo: UndoCreate) {
        match undo {
            UndoCreate::LogfileGroup => {
                for n in &self.data_nodes {
                    let _ = n.disk.drop_logfile_group();
                }
                dd.logfile_group = None;
            }
            UndoCreate::Tablespace(name, data_file) => {
                for n in &self.data_nodes {
                    let _ = n.disk.drop_datafile_of(&name, &data_file);
                    let _ = n.disk.drop_tablespace(&name);
                }
                dd.tablespaces.remove(&name.to_ascii_lowercase());
            }
            UndoCreate::Datafile(ts, data_file) => {
                for n in &self.data_nodes {
                    let _ = n.disk.drop_datafile_of(&ts, &data_file);
                }
                if let Some(t) = dd.tablespaces.get_mut(&ts.to_ascii_lowercase()) {
                    t.data_files.retain(|f| f.file_name != data_file);
                }
            }
            UndoCreate::Nothing => {}
        }
    }

    fn apply_disk_op(&self, dd: &mut DiskDict, op: DiskOp) -> Result<()> {
        match op {
            DiskOp::CreateLogfileGroup {
                name,
                undo_file,
                initial_size,
                undo_buffer_size,
            } => {
                if dd.logfile_group.is_some() {
                    return Err(codes::one_logfile_group_only());
                }
                if dd.name_taken(&name) {
                    return Err(codes::filegroup_exists(&name));
                }
                dd.next_id += 1;
                let id = dd.next_id;
                let size = initial_size.unwrap_or(DEFAULT_UNDO_FILE_BYTES);
                let buffer = undo_buffer_size.unwrap_or(DEFAULT_UNDO_BUFFER_BYTES);
                self.on_all_nodes(
                    |n| {
                        n.disk
                            .create_logfile_group(id, &name, &undo_file, size, buffer)
                    },
                    |n| n.disk.drop_logfile_group().map(|_| ()),
                )?;
                dd.logfile_group = Some(LogfileGroupDef {
                    id,
                    name,
                    undo_buffer_size: buffer,
                    undo_files: vec![FileDef {
                        file_name: undo_file,
                        size_bytes: size,
                    }],
                });
                Ok(())
            }
            DiskOp::AddUndofile {
                group,
                undo_file,
                initial_size,
            } => {
                check_group(dd, &group)?;
                let size = initial_size.unwrap_or(DEFAULT_UNDO_FILE_BYTES);
                // Undo files cannot be dropped alone (NDB: 769); a failure on a later
                // node leaves the file on the earlier ones, where it is part of the log.
                let mut result = Ok(());
                let mut added_on = 0;
                for n in &self.data_nodes {
                    result = n.disk.add_undofile(&undo_file, size);
                    if result.is_err() {
                        break;
                    }
                    added_on += 1;
                }
                // Recorded even after a partial failure: the file is in the log of the
                // nodes that added it.
                if added_on > 0
                    && let Some(g) = dd.logfile_group.as_mut()
                {
                    g.undo_files.push(FileDef {
                        file_name: undo_file,
                        size_bytes: size,
                    });
                }
                result
            }
            DiskOp::DropLogfileGroup { name } => {
                check_group(dd, &name)?;
                if let Some(ts) = dd.tablespaces.values().next() {
                    return Err(codes::filegroup_in_use(format_args!(
                        "logfile group {name} is used by tablespace {}",
                        ts.name
                    )));
                }
                for n in &self.data_nodes {
                    n.disk.drop_logfile_group()?;
                }
                dd.logfile_group = None;
                Ok(())
            }
            DiskOp::CreateTablespace {
                name,
                data_file,
                logfile_group,
                initial_size,
                extent_size,
                autoextend_size,
                max_size,
            } => {
                if dd.name_taken(&name) {
                    return Err(codes::filegroup_exists(&name));
                }
                let lg = dd
                    .logfile_group
                    .as_ref()
                    .filter(|g| g.name.eq_ignore_ascii_case(&logfile_group))
                    .ok_or_else(|| codes::logfile_group_not_found(&logfile_group))?
                    .name
                    .clone();
                let spec = TablespaceSpec {
                    name: name.clone(),
                    logfile_group: lg.clone(),
                    extent_size_bytes: extent_size.unwrap_or(DEFAULT_EXTENT_BYTES),
                    autoextend_size_bytes: autoextend_size.unwrap_or(0),
                    max_size_bytes: max_size.unwrap_or(0),
                };
                let options = spec.clone();
                let size = initial_size.unwrap_or(DEFAULT_DATA_FILE_BYTES);
                let mut node_ids = Vec::new();
                self.on_all_nodes(
                    |n| {
                        let id = n.disk.create_tablespace(spec.clone(), &data_file, size)?;
                        node_ids.push(id);
                        Ok(())
                    },
                    |n| {
                        let _ = n.disk.drop_datafile_of(&name, &data_file);
                        n.disk.drop_tablespace(&name)
                    },
                )?;
                dd.next_id += 1;
                let id = dd.next_id;
                dd.tablespaces.insert(
                    name.to_ascii_lowercase(),
                    TablespaceDef {
                        id,
                        name,
                        logfile_group: lg,
                        node_ids,
                        extent_size_bytes: options.extent_size_bytes,
                        autoextend_size_bytes: options.autoextend_size_bytes,
                        max_size_bytes: options.max_size_bytes,
                        data_files: vec![FileDef {
                            file_name: data_file,
                            size_bytes: size,
                        }],
                    },
                );
                Ok(())
            }
            DiskOp::AddDatafile {
                tablespace,
                data_file,
                initial_size,
            } => {
                let ts = dd
                    .tablespace(&tablespace)
                    .ok_or_else(|| codes::invalid_tablespace(&tablespace))?
                    .clone();
                let size = initial_size.unwrap_or(DEFAULT_DATA_FILE_BYTES);
                let mut i = 0;
                self.on_all_nodes(
                    |n| {
                        let r = n.disk.add_datafile(ts.node_ids[i], &data_file, size);
                        i += 1;
                        r
                    },
                    |n| n.disk.drop_datafile_of(&ts.name, &data_file),
                )?;
                if let Some(t) = dd.tablespaces.get_mut(&tablespace.to_ascii_lowercase()) {
                    t.data_files.push(FileDef {
                        file_name: data_file,
                        size_bytes: size,
                    });
                }
                Ok(())
            }
            DiskOp::DropDatafile {
                tablespace,
                data_file,
            } => {
                let ts = dd
                    .tablespace(&tablespace)
                    .ok_or_else(|| codes::invalid_tablespace(&tablespace))?
                    .clone();
                for n in &self.data_nodes {
                    n.disk.drop_datafile_of(&ts.name, &data_file)?;
                }
                if let Some(t) = dd.tablespaces.get_mut(&tablespace.to_ascii_lowercase()) {
                    t.data_files.retain(|f| f.file_name != data_file);
                }
                Ok(())
            }
            DiskOp::DropTablespace { name } => {
                let ts = dd
                    .tablespace(&name)
                    .ok_or_else(|| codes::no_such_filegroup(&name))?
                    .clone();
                for n in &self.data_nodes {
                    n.disk.drop_tablespace(&ts.name)?;
                }
                dd.tablespaces.remove(&name.to_ascii_lowercase());
                Ok(())
            }
        }
    }

    /// Applies `f` on every data node in order; on a failure, `undo` runs on the nodes
    /// already done (newest first) and the error is returned.
    fn on_all_nodes(
        &self,
        mut f: impl FnMut(&super::cluster::DataNode) -> Result<()>,
        mut undo: impl FnMut(&super::cluster::DataNode) -> Result<()>,
    ) -> Result<()> {
        for (i, n) in self.data_nodes.iter().enumerate() {
            if let Err(e) = f(n) {
                for done in self.data_nodes[..i].iter().rev() {
                    let _ = undo(done);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Every disk-data file of every data node (for messages and tests).
    pub fn disk_files(&self) -> Vec<PathBuf> {
        self.data_nodes
            .iter()
            .flat_map(|n| n.disk.created_files())
            .collect()
    }
}

fn check_group(dd: &DiskDict, name: &str) -> Result<()> {
    match &dd.logfile_group {
        Some(g) if g.name.eq_ignore_ascii_case(name) => Ok(()),
        _ => Err(codes::logfile_group_not_found(name)),
    }
}
