//! How a data node process starts: what its file system holds, and the management
//! server's decision for the whole cluster (`docs/cluster.md` §6, "System restart").
//!
//! Before it starts its local engine, `rndbd` reports the checkpoints its system file
//! has saved and the checkpoint from which its rows are complete (its *complete-from*
//! mark, below) to `rndb_mgmd` (`StartPlanReq`). While a data node of the cluster is
//! started, the answer is a **node restart**: the node restores its own newest
//! complete checkpoint (when its mark names a lineage) and copies from a peer what
//! changed since, or starts empty and copies every row. Otherwise it is a **system restart**: the management server waits until every
//! data node reported (or StartPartialTimeout passed with every node group
//! represented) and picks the restore point `R` — the newest checkpoint that, in every
//! node group, some node has saved with complete rows. The nodes that hold `R` restore
//! it (a node that saved a newer one too stops at `R`: the newer one is not saved in
//! every group) and are up to date at the cluster's first view; the others start empty
//! and copy from them. Nothing saved anywhere is a **fresh start**.
//!
//! The complete-from mark (`D1/DBDIH/complete_from` in the node's file-system
//! directory, 24 bytes: magic `RNDBCF2\0`, u32 checkpoint LE, u64 lineage LE, CRC-32C
//! of the first 20 bytes LE; the 16-byte `RNDBCF1\0` form of earlier builds, without a
//! lineage, reads as lineage 0): u32::MAX from the moment a copy from a peer begins
//! until the first local checkpoint after its end has completed (the copy applies its
//! rows without redo, `datapath::copy`), then the checkpoint current at that moment;
//! 0 after a fresh start. A checkpoint below the mark is not restorable
//! on this node: its saved checkpoints of the copy's time hold a part of the rows only.
//!
//! The *lineage* names the cluster's history the files belong to: the management
//! server draws a new one at every fresh start and every system restart (GCI numbers
//! are reused after a system restart, so a GCI alone does not name a state), and a
//! node that copies from a peer takes its source's. A node restart copies only the
//! rows changed since the node's own last checkpoint when the node's lineage is its
//! source's (`datapath::copy`); lineage 0 is no lineage, and means a full copy.
//!
//! Invariants: the decision is a pure function of the reports ([`decide`]); a node is
//! told to restore only a checkpoint its own system file holds.

use crate::disk::io::FileSystem;
use crate::error::{Result, codes};
use crate::transport::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAGIC_V1: &[u8; 8] = b"RNDBCF1\0";
const MAGIC: &[u8; 8] = b"RNDBCF2\0";
/// The mark of a node whose copy from a peer has not finished.
pub const NOT_COMPLETE: u32 = u32::MAX;

/// What a data node's file system holds: its saved checkpoints and its mark.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocalState {
    pub saved: Vec<u32>,
    pub complete_from: u32,
    /// The history the files belong to (0: none known).
    pub lineage: u64,
}

impl LocalState {
    /// Whether this node can restore checkpoint `gci`.
    pub fn restores(&self, gci: u32) -> bool {
        self.complete_from <= gci && self.saved.contains(&gci)
    }

    /// The newest checkpoint this node can restore by itself, if any.
    pub fn newest_restorable(&self) -> Option<u32> {
        self.saved
            .iter()
            .copied()
            .filter(|&g| self.restores(g))
            .max()
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
pub fn write_complete_from(
    fs: &dyn FileSystem,
    node_fs_dir: &Path,
    gci: u32,
    lineage: u64,
) -> Result<()> {
    let path = complete_from_path(node_fs_dir);
    let mut bytes = Vec::with_capacity(24);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&gci.to_le_bytes());
    bytes.extend_from_slice(&lineage.to_le_bytes());
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let io = |e: std::io::Error| codes::file_system_error(format!("{}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        fs.create_dir_all(dir).map_err(io)?;
    }
    fs.write_atomic(&path, &bytes).map_err(io)
}

/// Reads the mark: None when there is none; else the checkpoint and the lineage.
pub fn read_complete_from(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<Option<(u32, u64)>> {
    let path = complete_from_path(node_fs_dir);
    let bytes = fs
        .read_all(&path)
        .map_err(|e| codes::file_read_error(format!("{}: {e}", path.display())))?;
    let Some(b) = bytes else { return Ok(None) };
    let body = match (b.len(), b.get(..8)) {
        (24, Some(m)) if m == MAGIC => 20,
        (16, Some(m)) if m == MAGIC_V1 => 12,
        _ => {
            return Err(codes::corrupt_page(format!(
                "{}: not a complete-from mark",
                path.display()
            )));
        }
    };
    let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    if word(body) != crc32c::crc32c(&b[..body]) {
        return Err(codes::corrupt_page(format!(
            "{}: checksum mismatch",
            path.display()
        )));
    }
    let lineage = if body == 20 {
        u64::from(word(12)) | u64::from(word(16)) << 32
    } else {
        0
    };
    Ok(Some((word(8), lineage)))
}

/// A new lineage id (module notes), never 0. Not protocol logic: only equality counts.
pub fn new_lineage() -> u64 {
    random_u64().max(1)
}

/// 64 random bits from the kernel (`getrandom`), mixed with the clock; the clock and
/// the process id alone if the kernel gives none. For identifiers only (a process's
/// incarnation, a lineage), never for protocol decisions.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: `b` is writable for its length; a failure leaves the time-based value.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    if n == 8 {
        u64::from_le_bytes(b) ^ t
    } else {
        t ^ u64::from(std::process::id())
    }
}

/// What node `node_fs_dir`'s file system holds. A system file without a mark (a copy
/// that began before the mark existed cannot be told apart) counts as not complete.
pub fn local_state(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<LocalState> {
    let Some(sys) = crate::log::sysfile::Sysfile::load(fs, node_fs_dir)? else {
        return Ok(LocalState {
            saved: Vec::new(),
            complete_from: NOT_COMPLETE,
            lineage: 0,
        });
    };
    let saved: Vec<u32> = sys.saved.iter().map(|s| s.gci_hi).collect();
    let (complete_from, lineage) =
        read_complete_from(fs, node_fs_dir)?.unwrap_or((NOT_COMPLETE, 0));
    Ok(LocalState {
        saved,
        complete_from,
        lineage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(saved: &[u32], complete_from: u32) -> LocalState {
        LocalState {
            saved: saved.to_vec(),
            complete_from,
            lineage: 0,
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
        let lineage = 0x0102_0304_0506_0708;
        write_complete_from(&fs, dir, 41, lineage).unwrap();
        assert_eq!(read_complete_from(&fs, dir).unwrap(), Some((41, lineage)));
        write_complete_from(&fs, dir, NOT_COMPLETE, 7).unwrap();
        assert_eq!(
            read_complete_from(&fs, dir).unwrap(),
            Some((NOT_COMPLETE, 7))
        );
        let path = complete_from_path(dir);
        let good = fs.read_all(&path).unwrap().unwrap();
        assert_eq!(good.len(), 24);
        for at in [9, 13, 19, 21] {
            let mut b = good.clone();
            b[at] ^= 1;
            fs.write_atomic(&path, &b).unwrap();
            assert!(read_complete_from(&fs, dir).is_err(), "byte {at} flipped");
        }
        // The form of earlier builds: no lineage.
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&12u32.to_le_bytes());
        v1.extend_from_slice(&crc32c::crc32c(&v1).to_le_bytes());
        fs.write_atomic(&path, &v1).unwrap();
        assert_eq!(read_complete_from(&fs, dir).unwrap(), Some((12, 0)));
        assert_ne!(new_lineage(), 0);
        assert_ne!(new_lineage(), new_lineage());
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
