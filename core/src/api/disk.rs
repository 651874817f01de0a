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
//! Lock order: `ClusterInner::disk_dict`, then each node's disk managers.

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

#[derive(Debug, Clone)]
pub struct LogfileGroupDef {
    pub id: u32,
    pub name: String,
    pub undo_buffer_size: u64,
}

#[derive(Debug, Clone)]
pub struct TablespaceDef {
    pub id: u32,
    pub name: String,
    pub logfile_group: String,
    /// TSMAN's id of this tablespace on each data node, in `data_nodes` order.
    pub node_ids: Vec<u32>,
}

/// The cluster's disk objects.
#[derive(Debug, Default)]
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
}

impl ClusterInner {
    /// Runs a disk-data DDL operation on every data node.
    pub fn disk_ddl(&self, op: DiskOp) -> Result<()> {
        self.check_open()?;
        let mut dd = self.disk_dict.lock();
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
                });
                Ok(())
            }
            DiskOp::AddUndofile {
                group,
                undo_file,
                initial_size,
            } => {
                check_group(&dd, &group)?;
                let size = initial_size.unwrap_or(DEFAULT_UNDO_FILE_BYTES);
                // Undo files cannot be dropped alone (NDB: 769); a failure on a later
                // node leaves the file on the earlier ones, where it is part of the log.
                for n in &self.data_nodes {
                    n.disk.add_undofile(&undo_file, size)?;
                }
                Ok(())
            }
            DiskOp::DropLogfileGroup { name } => {
                check_group(&dd, &name)?;
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
                )
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
