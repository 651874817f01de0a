//! Disk data at a system restart (docs/durability.md §7): the logfile group and the
//! tablespaces of the schema file reopened on every data node, the undo pass that
//! brings each node's disk pages back to its undo keep, and the relinking of restored
//! rows to their disk records.
//!
//! Order inside [`ClusterInner::recover`]: [`ClusterInner::reopen_disk_objects`]
//! (before the tables, whose fragments look their tablespace up), the dictionary,
//! [`ClusterInner::release_dead_extents`], then per node the memory restore,
//! [`ClusterInner::relink_node_disk`], the redo replay and
//! [`ClusterInner::check_node_disk_rows`].
//!
//! Lock order: `disk_dict`, then each node's disk managers; fragment mutexes one at a
//! time, never with `disk_dict` held.

use super::ClusterInner;
use super::cluster::DataNode;
use super::dict_file::{DiskObject, SchemaImage};
use super::disk::{DiskDict, FileDef, LogfileGroupDef, TablespaceDef};
use crate::disk::node::UndoPassStats;
use crate::disk::tsman::{ExtentOwner, TablespaceSpec};
use crate::error::{Result, codes};
use crate::txn::fragment::DiskRelinkStats;
use std::path::PathBuf;

/// The path of a file of `files` on data node `node_id`.
fn node_path(f: &super::dict_file::FileImage, node_id: u32) -> Result<PathBuf> {
    f.node_paths
        .iter()
        .find(|(id, _)| *id == node_id)
        .map(|(_, p)| p.clone())
        .ok_or_else(|| {
            codes::corrupt_schema_file(format!(
                "file '{}' has no path on data node {node_id}",
                f.file_name
            ))
        })
}

fn defs(files: &[super::dict_file::FileImage]) -> Vec<FileDef> {
    files
        .iter()
        .map(|f| FileDef {
            file_name: f.file_name.clone(),
            size_bytes: f.size_bytes,
        })
        .collect()
}

impl ClusterInner {
    /// Opens the logfile group's undo files and every tablespace's data files on every
    /// data node, as the schema file lists them, and rebuilds the disk dictionary.
    pub(crate) fn reopen_disk_objects(&self, image: &SchemaImage) -> Result<()> {
        let mut dd = DiskDict::default();
        for n in &self.data_nodes {
            let repaired = n.disk.repair_torn_pages()?;
            if repaired > 0 {
                self.mgm.log.event(
                    crate::mgm::log::Severity::Info,
                    n.node_id,
                    &format!(
                        "{repaired} torn data file pages repaired from the doublewrite journal"
                    ),
                );
            }
        }
        for obj in image.disk_objects() {
            match obj {
                DiskObject::LogfileGroup(g) => {
                    for n in &self.data_nodes {
                        let paths = g
                            .undo_files
                            .iter()
                            .map(|f| node_path(f, n.node_id))
                            .collect::<Result<Vec<_>>>()?;
                        n.disk.open_logfile_group(
                            g.id,
                            &g.name,
                            g.undo_buffer_size_bytes,
                            &paths,
                        )?;
                    }
                    dd.logfile_group = Some(LogfileGroupDef {
                        id: g.id,
                        name: g.name.clone(),
                        undo_buffer_size: g.undo_buffer_size_bytes,
                        undo_files: defs(&g.undo_files),
                    });
                }
                DiskObject::Tablespace(t) => {
                    let spec = TablespaceSpec {
                        name: t.name.clone(),
                        logfile_group: t.logfile_group.clone(),
                        extent_size_bytes: t.extent_size_bytes,
                        autoextend_size_bytes: t.autoextend_size_bytes,
                        max_size_bytes: t.max_size_bytes,
                    };
                    let mut node_ids = Vec::with_capacity(self.data_nodes.len());
                    for n in &self.data_nodes {
                        let files = t
                            .data_files
                            .iter()
                            .map(|f| Ok((f.file_name.clone(), node_path(f, n.node_id)?)))
                            .collect::<Result<Vec<_>>>()?;
                        n.disk.open_tablespace(spec.clone(), &files)?;
                        let id = n.disk.tsman.lookup(&t.name).ok_or_else(|| {
                            codes::internal(format!("tablespace '{}' not reopened", t.name))
                        })?;
                        node_ids.push(id);
                    }
                    dd.tablespaces.insert(
                        t.name.to_ascii_lowercase(),
                        TablespaceDef {
                            id: t.id,
                            name: t.name.clone(),
                            logfile_group: t.logfile_group.clone(),
                            node_ids,
                            extent_size_bytes: t.extent_size_bytes,
                            autoextend_size_bytes: t.autoextend_size_bytes,
                            max_size_bytes: t.max_size_bytes,
                            data_files: defs(&t.data_files),
                        },
                    );
                }
            }
        }
        dd.set_last_id(image.last_disk_object_id);
        *self.disk_dict.lock() = dd;
        for n in &self.data_nodes {
            for p in n.disk.remove_files_not_in_use()? {
                self.mgm.log.event(
                    crate::mgm::log::Severity::Info,
                    n.node_id,
                    &format!(
                        "Removed {}: created by a statement the crash cut before it was \
                         recorded in the schema file",
                        p.display()
                    ),
                );
            }
        }
        Ok(())
    }

    /// The undo pass of `node` (its disk pages and extents back to the undo keep of its
    /// system file); the point the pass marked becomes the keep saved next.
    pub(crate) fn undo_node_disk(&self, node: &DataNode) -> Result<Option<UndoPassStats>> {
        let Some(log) = &node.log else {
            return Ok(None);
        };
        if node.disk.logfile_group().is_none() {
            return Ok(None);
        }
        let stats = node.disk.undo_to_keep(log.undo_keep_lsn())?;
        log.set_undo_keep(stats.marker_lsn);
        Ok(Some(stats))
    }

    /// Extents owned by fragments the dictionary no longer has (tables dropped or
    /// truncated before the crash) go back to their tablespaces on every node.
    pub(crate) fn release_dead_extents(&self) -> Result<u64> {
        let live: std::collections::BTreeSet<(u32, u32)> = self
            .dict
            .read()
            .all()
            .iter()
            .filter(|t| t.def.layout.has_disk())
            .flat_map(|t| (0..t.fragments.len() as u32).map(move |p| (t.def.id, p)))
            .collect();
        let mut n = 0;
        for node in &self.data_nodes {
            n += node.disk.free_extents_not_owned_by(&|o: ExtentOwner| {
                live.contains(&(o.table_id, o.fragment_id))
            })?;
        }
        Ok(n)
    }

    /// After `node`'s fragments were restored from their checkpoints: each fragment
    /// with disk columns links its rows to the records on disk.
    pub(crate) fn relink_node_disk(&self, node: &DataNode) -> Result<DiskRelinkStats> {
        let mut total = DiskRelinkStats::default();
        for cell in self.node_disk_fragments(node) {
            let s = cell.state.lock().disk_relink()?;
            total.rows += s.rows;
            total.extents += s.extents;
            total.pages += s.pages;
            total.records_linked += s.records_linked;
            total.orphans_freed += s.orphans_freed;
        }
        Ok(total)
    }

    /// After the redo replay: every row of a table with disk columns has its record.
    pub(crate) fn check_node_disk_rows(&self, node: &DataNode) -> Result<()> {
        let tables = self.dict.read().all();
        for t in tables.iter().filter(|t| t.def.layout.has_disk()) {
            for (p, reps) in t.fragments.iter().enumerate() {
                for c in reps.iter().filter(|c| c.node_id == node.node_id) {
                    let missing = c.state.lock().disk_rows_without_record();
                    if missing > 0 {
                        return Err(codes::corrupt_page(format!(
                            "system restart: {missing} rows of table '{}' fragment {p} on \
                             node {} have no disk record after the redo log was applied",
                            t.def.name, node.node_id
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn node_disk_fragments(
        &self,
        node: &DataNode,
    ) -> Vec<std::sync::Arc<crate::txn::FragmentCell>> {
        let mut tables = self.dict.read().all();
        tables.sort_by_key(|t| t.def.id);
        tables
            .iter()
            .filter(|t| t.def.layout.has_disk())
            .flat_map(|t| t.fragments.iter())
            .flat_map(|reps| reps.iter().filter(|c| c.node_id == node.node_id).cloned())
            .collect()
    }
}
