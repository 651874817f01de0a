//! How a data node process starts: what its file system holds, and the management
//! server's decision for the whole cluster (`docs/cluster.md` §6, "System restart").
//!
//! Before it starts its local engine, `rndbd` reports the checkpoints its system file
//! has saved and the checkpoint from which its rows are complete (its *complete-from*
//! mark, below) to `rndb_mgmd` (`StartPlanReq`). While a data node of the cluster is
//! started, the answer is a **node restart**: the node starts empty and copies from a
//! peer. Otherwise it is a **system restart**: the management server waits until every
//! data node reported (or StartPartialTimeout passed with every node group
//! represented) and picks the restore point `R` — the newest checkpoint that, in every
//! node group, some node has saved with complete rows. The nodes that hold `R` restore
//! it (a node that saved a newer one too stops at `R`: the newer one is not saved in
//! every group) and are up to date at the cluster's first view; the others start empty
//! and copy from them. Nothing saved anywhere is a **fresh start**.
//!
//! The complete-from mark (`D1/DBDIH/complete_from` in the node's file-system
//! directory, 16 bytes: magic `RNDBCF1\0`, u32 checkpoint LE, CRC-32C of the first 12
//! bytes LE): u32::MAX from the moment a copy from a peer begins until it ends, then the
//! checkpoint current at its end (every row copied committed at or below it); 0 after
//! a fresh start. A checkpoint below the mark is not restorable on this node: its
//! saved checkpoints of the copy's time hold a part of the rows only.
//!
//! Invariants: the decision is a pure function of the reports ([`decide`]); a node is
//! told to restore only a checkpoint its own system file holds.

use crate::disk::io::FileSystem;
use crate::error::{Result, codes};
use crate::transport::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"RNDBCF1\0";
/// The mark of a node whose copy from a peer has not finished.
pub const NOT_COMPLETE: u32 = u32::MAX;

/// What a data node's file system holds: its saved checkpoints and its mark.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocalState {
    pub saved: Vec<u32>,
    pub complete_from: u32,
}

impl LocalState {
    /// Whether this node can restore checkpoint `gci`.
    pub fn restores(&self, gci: u32) -> bool {
        self.complete_from <= gci && self.saved.contains(&gci)
    }
}

/// What the management server tells a starting data node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartAction {
    /// Not every node has reported yet: ask again.
    Wait,
    /// Nothing is saved anywhere: every node starts empty and up to date.
    Fresh,
    /// The cluster restores `restore_gci`; `ready` hold it, the others copy.
    SystemRestart {
        restore_gci: u32,
        ready: BTreeSet<NodeId>,
    },
    /// The cluster runs: start empty and copy from a peer.
    NodeRestart,
}

impl StartAction {
    /// The wire form (`Message::StartPlanConf`).
    pub fn to_wire(&self) -> (u8, u32, Vec<u32>) {
        match self {
            StartAction::Wait => (0, 0, Vec::new()),
            StartAction::Fresh => (1, 0, Vec::new()),
            StartAction::SystemRestart { restore_gci, ready } => {
                (2, *restore_gci, ready.iter().copied().collect())
            }
            StartAction::NodeRestart => (3, 0, Vec::new()),
        }
    }

    pub fn from_wire(action: u8, restore_gci: u32, ready: Vec<u32>) -> Result<StartAction> {
        Ok(match action {
            0 => StartAction::Wait,
            1 => StartAction::Fresh,
            2 => StartAction::SystemRestart {
                restore_gci,
                ready: ready.into_iter().collect(),
            },
            3 => StartAction::NodeRestart,
            a => return Err(codes::internal(format!("unknown start action {a}"))),
        })
    }
}

/// The system restart's decision from the reports of the nodes present (see the
/// module notes): `Ok(None)` when no checkpoint is restorable in every node group
/// yet (some node group has not reported enough).
pub fn decide(
    reports: &BTreeMap<NodeId, LocalState>,
    groups: &[Vec<NodeId>],
) -> Result<Option<StartAction>> {
    if reports.values().all(|r| r.saved.is_empty()) {
        return Ok(Some(StartAction::Fresh));
    }
    let mut candidates: BTreeSet<u32> = BTreeSet::new();
    for r in reports.values() {
        candidates.extend(r.saved.iter().copied());
    }
    for &g in candidates.iter().rev() {
        let covered = groups.iter().all(|group| {
            group
                .iter()
                .any(|n| reports.get(n).is_some_and(|r| r.restores(g)))
        });
        if covered {
            let ready = reports
                .iter()
                .filter(|(_, r)| r.restores(g))
                .map(|(&n, _)| n)
                .collect();
            return Ok(Some(StartAction::SystemRestart {
                restore_gci: g,
                ready,
            }));
        }
    }
    Ok(None)
}

/// Where a node's complete-from mark lives.
pub fn complete_from_path(node_fs_dir: &Path) -> PathBuf {
    node_fs_dir.join("D1").join("DBDIH").join("complete_from")
}

/// Writes the mark (atomically; the directory is created if needed).
pub fn write_complete_from(fs: &dyn FileSystem, node_fs_dir: &Path, gci: u32) -> Result<()> {
    let path = complete_from_path(node_fs_dir);
    let mut bytes = Vec::with_capacity(16);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&gci.to_le_bytes());
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let io = |e: std::io::Error| codes::file_system_error(format!("{}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        fs.create_dir_all(dir).map_err(io)?;
    }
    fs.write_atomic(&path, &bytes).map_err(io)
}

/// Reads the mark: None when there is none.
pub fn read_complete_from(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<Option<u32>> {
    let path = complete_from_path(node_fs_dir);
    let bytes = fs
        .read_all(&path)
        .map_err(|e| codes::file_read_error(format!("{}: {e}", path.display())))?;
    let Some(b) = bytes else { return Ok(None) };
    if b.len() != 16 || &b[..8] != MAGIC {
        return Err(codes::corrupt_page(format!(
            "{}: not a complete-from mark",
            path.display()
        )));
    }
    let crc = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
    if crc != crc32c::crc32c(&b[..12]) {
        return Err(codes::corrupt_page(format!(
            "{}: checksum mismatch",
            path.display()
        )));
    }
    Ok(Some(u32::from_le_bytes([b[8], b[9], b[10], b[11]])))
}

/// What node `node_fs_dir`'s file system holds. A system file without a mark (a copy
/// that began before the mark existed cannot be told apart) counts as not complete.
pub fn local_state(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<LocalState> {
    let Some(sys) = crate::log::sysfile::Sysfile::load(fs, node_fs_dir)? else {
        return Ok(LocalState {
            saved: Vec::new(),
            complete_from: NOT_COMPLETE,
        });
    };
    let saved: Vec<u32> = sys.saved.iter().map(|s| s.gci_hi).collect();
    let complete_from = read_complete_from(fs, node_fs_dir)?.unwrap_or(NOT_COMPLETE);
    Ok(LocalState {
        saved,
        complete_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(saved: &[u32], complete_from: u32) -> LocalState {
        LocalState {
            saved: saved.to_vec(),
            complete_from,
        }
    }

    #[test]
    fn the_restore_point_is_the_newest_checkpoint_every_group_holds() {
        let groups = vec![vec![2, 3], vec![4, 5]];
        let mut r = BTreeMap::new();
        // a crash between two nodes' saves of 9: node 4 saved it, group 0 did not
        r.insert(2, st(&[7, 8], 0));
        r.insert(3, st(&[7, 8], 0));
        r.insert(4, st(&[7, 8, 9], 0));
        r.insert(5, st(&[7, 8], 0));
        let want = StartAction::SystemRestart {
            restore_gci: 8,
            ready: [2, 3, 4, 5].into(),
        };
        assert_eq!(decide(&r, &groups).unwrap(), Some(want));
        // one node of each group saved 9: 9, and the others copy
        r.insert(2, st(&[7, 8, 9], 0));
        let want = StartAction::SystemRestart {
            restore_gci: 9,
            ready: [2, 4].into(),
        };
        assert_eq!(decide(&r, &groups).unwrap(), Some(want));
        // a node whose copy never finished restores nothing, even what it saved
        r.insert(2, st(&[7, 8, 9], NOT_COMPLETE));
        r.insert(3, st(&[7, 8], 8));
        let want = StartAction::SystemRestart {
            restore_gci: 8,
            ready: [3, 4, 5].into(),
        };
        assert_eq!(decide(&r, &groups).unwrap(), Some(want));
        // a group with no complete node: nothing yet
        r.insert(3, st(&[7, 8], NOT_COMPLETE));
        assert_eq!(decide(&r, &groups).unwrap(), None);
        // nothing saved anywhere: a fresh start
        let mut fresh = BTreeMap::new();
        fresh.insert(2, st(&[], NOT_COMPLETE));
        fresh.insert(3, st(&[], 0));
        assert_eq!(decide(&fresh, &groups).unwrap(), Some(StartAction::Fresh));
    }

    #[test]
    fn the_mark_round_trips_and_damage_is_found() {
        let fs = crate::disk::io::MemFileSystem::new();
        let dir = Path::new("/n/ndb_2_fs");
        assert_eq!(read_complete_from(&fs, dir).unwrap(), None);
        write_complete_from(&fs, dir, 41).unwrap();
        assert_eq!(read_complete_from(&fs, dir).unwrap(), Some(41));
        write_complete_from(&fs, dir, NOT_COMPLETE).unwrap();
        assert_eq!(read_complete_from(&fs, dir).unwrap(), Some(NOT_COMPLETE));
        let path = complete_from_path(dir);
        let mut b = fs.read_all(&path).unwrap().unwrap();
        b[9] ^= 1;
        fs.write_atomic(&path, &b).unwrap();
        assert!(read_complete_from(&fs, dir).is_err());
        for a in [
            StartAction::Wait,
            StartAction::Fresh,
            StartAction::NodeRestart,
            StartAction::SystemRestart {
                restore_gci: 5,
                ready: [2, 3].into(),
            },
        ] {
            let (x, g, r) = a.to_wire();
            assert_eq!(StartAction::from_wire(x, g, r).unwrap(), a);
        }
    }
}
