//! The system file of a data node (DBDIH's P0.sysfile): which global checkpoints this
//! node has saved and where in each redo log part they end, and from where a restart
//! must replay.
//!
//! Two copies, written in turn (NDB keeps two too): each global checkpoint overwrites
//! the older slot in place and fdatasyncs it, so a torn write can only damage the copy
//! being written while the other still holds the previous state; a restart takes the
//! valid copy with the higher generation. (One fdatasync per save, where an atomic
//! replace costs a file sync, a rename and a directory sync.) A copy that does not exist
//! yet is created whole with an atomic replace, so a crash never leaves a torn copy
//! without a valid twin. Byte format in
//! docs/durability.md §3.
//!
//! Invariants: saved GCIs strictly increase; each entry has one end LSN per redo part,
//! never below the previous entry's nor below `keep`; at most [`MAX_SAVED`] entries
//! (the oldest are dropped). Each entry names the data nodes whose files restore the
//! cluster at that checkpoint (NDB's DIH keeps the same per fragment replica): a node
//! that was stopped, or whose node restart has not yet written a local checkpoint of
//! its own, is left out. A restart recovers to the newest GCI every node of that set
//! has saved, which is at most one checkpoint behind the newest (a checkpoint starts
//! only when the previous one is saved everywhere), so a short history suffices.

use crate::disk::io::FileSystem;
use crate::error::{Result, codes};
use crate::log::redo::Lsn;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"RNDBSYS\0";
const FORMAT_VERSION: u32 = 4;
/// The version before each saved checkpoint named its nodes (read as every node).
const FORMAT_VERSION_3: u32 = 3;
/// The version before the undo keep LSN was added (read as undo keep 0, every node).
const FORMAT_VERSION_2: u32 = 2;
/// Size of each slot file; a system file is at most 32 + 32 × 8 + 8 + 16 × (8 + 24 + 32
/// × 8) + 4 bytes.
const SLOT_BYTES: usize = 8192;
/// Saved checkpoints kept in the file.
pub const MAX_SAVED: usize = 16;

/// Highest data node id a [`NodeBitmask`] holds (NDB's data node ids are 1..=144).
pub const MAX_DATA_NODE_ID: u32 = 191;

/// A set of data node ids (NDB's NodeBitmask): bit `id` of the little-endian words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeBitmask(pub [u64; 3]);

impl NodeBitmask {
    /// Every node: what a system file written before nodes were named in it means.
    pub const ALL: NodeBitmask = NodeBitmask([u64::MAX; 3]);

    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> NodeBitmask {
        let mut m = NodeBitmask::default();
        for id in ids {
            m.set(id);
        }
        m
    }

    pub fn set(&mut self, id: u32) {
        assert!(id <= MAX_DATA_NODE_ID, "data node id {id} out of range");
        self.0[(id / 64) as usize] |= 1 << (id % 64);
    }

    pub fn contains(&self, id: u32) -> bool {
        id <= MAX_DATA_NODE_ID && self.0[(id / 64) as usize] & (1 << (id % 64)) != 0
    }

    /// The ids in the set, ascending (at most [`MAX_DATA_NODE_ID`]).
    pub fn ids(&self) -> Vec<u32> {
        (0..=MAX_DATA_NODE_ID)
            .filter(|&id| self.contains(id))
            .collect()
    }
}

/// One saved global checkpoint: its number, where it ends in every redo part, and the
/// data nodes whose files restore it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedGci {
    pub gci_hi: u32,
    pub end: Vec<Lsn>,
    pub nodes: NodeBitmask,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysfile {
    pub node_id: u32,
    /// Stores so far: the copy with the higher generation is the current one.
    pub generation: u64,
    /// Per redo part: the oldest LSN a restart needs (replay starts here).
    pub keep: Vec<Lsn>,
    /// Undo log (disk data): a restart brings the disk pages back to this LSN, the
    /// `LcpStart` record of the local checkpoint `keep` belongs to (0: back to the
    /// start of the log — no checkpoint has completed since the logfile group began).
    pub undo_keep_lsn: u64,
    /// Saved checkpoints, oldest first.
    pub saved: Vec<SavedGci>,
}

/// The two copies of a node's system file, under its file-system directory.
pub fn sysfile_paths(node_fs_dir: &Path) -> [PathBuf; 2] {
    let dir = node_fs_dir.join("D1").join("DBDIH");
    [dir.join("P0.sysfile"), dir.join("P1.sysfile")]
}

impl Sysfile {
    pub fn new(node_id: u32, parts: usize) -> Sysfile {
        Sysfile {
            node_id,
            generation: 0,
            keep: vec![0; parts],
            undo_keep_lsn: 0,
            saved: Vec::new(),
        }
    }

    pub fn parts(&self) -> usize {
        self.keep.len()
    }

    /// The newest checkpoint this node saved.
    pub fn last_saved(&self) -> Option<&SavedGci> {
        self.saved.last()
    }

    /// The entry of checkpoint `gci_hi`, if still in the history.
    pub fn saved_gci(&self, gci_hi: u32) -> Option<&SavedGci> {
        self.saved.iter().find(|s| s.gci_hi == gci_hi)
    }

    /// Records a saved checkpoint that the files of `nodes` restore.
    pub fn push(&mut self, gci_hi: u32, end: Vec<Lsn>, nodes: NodeBitmask) {
        assert_eq!(end.len(), self.parts(), "one end LSN per redo part");
        if let Some(last) = self.saved.last() {
            assert!(gci_hi > last.gci_hi, "saved GCIs must increase");
            assert!(
                end.iter().zip(&last.end).all(|(a, b)| a >= b),
                "redo end went backwards"
            );
        }
        self.saved.push(SavedGci { gci_hi, end, nodes });
        if self.saved.len() > MAX_SAVED {
            self.saved.remove(0);
        }
    }

    /// A local checkpoint moved the oldest redo a restart needs to `keep`; saved
    /// checkpoints ending before it can no longer be restored and are dropped (the
    /// LCP completed at a checkpoint after its start, so that one and later stay).
    pub fn set_keep(&mut self, keep: &[Lsn]) {
        assert_eq!(keep.len(), self.parts(), "one keep LSN per redo part");
        assert!(
            keep.iter().zip(&self.keep).all(|(new, old)| new >= old),
            "the kept redo went backwards"
        );
        self.keep = keep.to_vec();
        self.saved
            .retain(|s| s.end.iter().zip(keep).all(|(e, k)| e >= k));
        assert!(
            !self.saved.is_empty(),
            "no saved checkpoint ends after the new keep position"
        );
    }

    pub fn encode(&self) -> Vec<u8> {
        let parts = self.parts();
        let mut out = Vec::with_capacity(32 + parts * 8 * (1 + self.saved.len()));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&self.node_id.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&(parts as u32).to_le_bytes());
        out.extend_from_slice(&(self.saved.len() as u32).to_le_bytes());
        for k in &self.keep {
            out.extend_from_slice(&k.to_le_bytes());
        }
        out.extend_from_slice(&self.undo_keep_lsn.to_le_bytes());
        for s in &self.saved {
            out.extend_from_slice(&s.gci_hi.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            for w in s.nodes.0 {
                out.extend_from_slice(&w.to_le_bytes());
            }
            for e in &s.end {
                out.extend_from_slice(&e.to_le_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Sysfile> {
        let bad = |what: &str| codes::corrupt_page(format!("system file: {what}"));
        if bytes.len() < 36 {
            return Err(bad("too short"));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32c::crc32c(body) != crc {
            return Err(bad("checksum mismatch"));
        }
        if &body[..8] != MAGIC {
            return Err(bad("bad magic"));
        }
        let u32_at =
            |o: usize| u32::from_le_bytes([body[o], body[o + 1], body[o + 2], body[o + 3]]);
        let version = u32_at(8);
        if ![FORMAT_VERSION, FORMAT_VERSION_3, FORMAT_VERSION_2].contains(&version) {
            return Err(bad(&format!("unknown format version {version}")));
        }
        let undo_bytes = if version == FORMAT_VERSION_2 { 0 } else { 8 };
        let mask_bytes = if version == FORMAT_VERSION { 24 } else { 0 };
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&body[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let node_id = u32_at(12);
        let generation = u64_at(16);
        let parts = u32_at(24) as usize;
        let count = u32_at(28) as usize;
        if parts == 0 || parts > 32 || count > MAX_SAVED {
            return Err(bad("bad counts"));
        }
        if body.len() != 32 + parts * 8 + undo_bytes + count * (8 + mask_bytes + parts * 8) {
            return Err(bad("length does not match its counts"));
        }
        let mut at = 32;
        let keep: Vec<Lsn> = (0..parts).map(|i| u64_at(at + i * 8)).collect();
        at += parts * 8;
        let undo_keep_lsn = if undo_bytes > 0 { u64_at(at) } else { 0 };
        at += undo_bytes;
        let mut file = Sysfile {
            node_id,
            generation,
            keep,
            undo_keep_lsn,
            saved: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let gci_hi = u32_at(at);
            at += 8;
            let nodes = if mask_bytes == 0 {
                NodeBitmask::ALL
            } else {
                let m = NodeBitmask([u64_at(at), u64_at(at + 8), u64_at(at + 16)]);
                at += mask_bytes;
                m
            };
            let end: Vec<Lsn> = (0..parts).map(|i| u64_at(at + i * 8)).collect();
            at += parts * 8;
            if let Some(last) = file.saved.last()
                && (gci_hi <= last.gci_hi || end.iter().zip(&last.end).any(|(a, b)| a < b))
            {
                return Err(bad("saved checkpoints out of order"));
            }
            if end.iter().zip(&file.keep).any(|(e, k)| e < k) {
                return Err(bad("checkpoint ends before the kept redo"));
            }
            file.saved.push(SavedGci { gci_hi, end, nodes });
        }
        Ok(file)
    }

    /// Writes the next generation into the older copy, in place, and fdatasyncs it.
    pub fn store(&mut self, fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<()> {
        self.generation += 1;
        let bytes = self.encode();
        assert!(
            bytes.len() + 4 <= SLOT_BYTES,
            "system file exceeds its slot"
        );
        let mut slot = vec![0u8; SLOT_BYTES];
        slot[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        slot[4..4 + bytes.len()].copy_from_slice(&bytes);
        let path = &sysfile_paths(node_fs_dir)[(self.generation % 2) as usize];
        let err = |e: std::io::Error| codes::file_system_error(format!("{}: {e}", path.display()));
        if !fs.exists(path) {
            // A copy appears whole (write aside, rename): a crash before it is durable
            // leaves no copy, never a torn one without a valid twin.
            if let Some(dir) = path.parent() {
                fs.create_dir_all(dir).map_err(err)?;
            }
            return fs.write_atomic(path, &slot).map_err(err);
        }
        let file = fs.open(path).map_err(err)?;
        file.write_at(&slot, 0).map_err(err)?;
        file.sync_data().map_err(err)
    }

    /// Reads the node's system file: the valid copy with the higher generation; `None`
    /// when there is none. An error when copies exist but none verifies.
    pub fn load(fs: &dyn FileSystem, node_fs_dir: &Path) -> Result<Option<Sysfile>> {
        let mut best: Option<Sysfile> = None;
        let mut damage = None;
        for path in sysfile_paths(node_fs_dir) {
            let bytes = match fs.read_all(&path) {
                Ok(None) => continue,
                Ok(Some(b)) => b,
                Err(e) => {
                    return Err(codes::file_read_error(format!("{}: {e}", path.display())));
                }
            };
            let len = bytes
                .get(..4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            let parsed = match len {
                Some(n) if 4 + n <= bytes.len() => Sysfile::decode(&bytes[4..4 + n]),
                _ => Err(codes::corrupt_page("system file: bad length")),
            };
            match parsed {
                Ok(f) if best.as_ref().is_none_or(|b| f.generation > b.generation) => {
                    best = Some(f)
                }
                Ok(_) => {}
                Err(e) => damage = Some(e.detail(path.display())),
            }
        }
        match (best, damage) {
            (Some(f), _) => Ok(Some(f)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::io::MemFileSystem;

    fn sample() -> Sysfile {
        let mut s = Sysfile::new(3, 4);
        s.keep = vec![0, 4096, 0, 8192];
        s.undo_keep_lsn = 1_234_567;
        s.push(
            5,
            vec![4096, 8192, 0, 8192],
            NodeBitmask::from_ids([2, 3, 144]),
        );
        s.push(6, vec![8192, 8192, 4096, 12288], NodeBitmask::from_ids([3]));
        s
    }

    #[test]
    fn round_trip_and_storage() {
        let mut s = sample();
        assert_eq!(Sysfile::decode(&s.encode()).unwrap(), s);
        let fs = MemFileSystem::new();
        let dir = Path::new("/d/ndb_3_fs");
        assert_eq!(Sysfile::load(&fs, dir).unwrap(), None);
        s.store(&fs, dir).unwrap();
        assert_eq!(s.generation, 1);
        assert_eq!(Sysfile::load(&fs, dir).unwrap(), Some(s.clone()));
        // the next store goes to the other copy; the newer one wins
        s.push(7, vec![20_000; 4], NodeBitmask::from_ids([2, 3]));
        s.store(&fs, dir).unwrap();
        assert_eq!(Sysfile::load(&fs, dir).unwrap(), Some(s.clone()));
        assert_eq!(s.last_saved().map(|x| x.gci_hi), Some(7));
        assert_eq!(s.saved_gci(5).map(|x| x.end[0]), Some(4096));
    }

    #[test]
    fn a_damaged_newest_copy_falls_back_to_the_other() {
        let fs = MemFileSystem::new();
        let dir = Path::new("/d/ndb_2_fs");
        let mut s = sample();
        s.store(&fs, dir).unwrap();
        let older = s.clone();
        s.push(7, vec![20_000; 4], NodeBitmask::from_ids([2, 3]));
        s.store(&fs, dir).unwrap();
        // generation 2 is in P0 (2 % 2): damage it
        let [p0, p1] = sysfile_paths(dir);
        assert!(fs.corrupt_byte(&p0, 40));
        assert_eq!(Sysfile::load(&fs, dir).unwrap(), Some(older));
        assert!(fs.corrupt_byte(&p1, 40));
        assert!(Sysfile::load(&fs, dir).is_err(), "both copies damaged");
    }

    /// A version 3 file (before saved checkpoints named their nodes) reads with every
    /// node in each entry; the bitmask keeps ids up to 191.
    #[test]
    fn version_3_reads_as_every_node() {
        let s = sample();
        let v4 = s.encode();
        let parts = s.parts();
        let mut v3 = v4[..32 + parts * 8 + 8].to_vec();
        v3[8..12].copy_from_slice(&3u32.to_le_bytes());
        let mut at = v3.len();
        for _ in &s.saved {
            v3.extend_from_slice(&v4[at..at + 8]);
            v3.extend_from_slice(&v4[at + 32..at + 32 + parts * 8]);
            at += 32 + parts * 8;
        }
        let crc = crc32c::crc32c(&v3);
        v3.extend_from_slice(&crc.to_le_bytes());
        let old = Sysfile::decode(&v3).expect("version 3");
        assert_eq!(old.saved.len(), 2);
        for (o, n) in old.saved.iter().zip(&s.saved) {
            assert_eq!((o.gci_hi, &o.end), (n.gci_hi, &n.end));
            assert_eq!(o.nodes, NodeBitmask::ALL);
        }
        assert_eq!(s.saved[0].nodes.ids(), vec![2, 3, 144]);
        assert!(!s.saved[1].nodes.contains(2) && s.saved[1].nodes.contains(3));
        assert!(!NodeBitmask::ALL.contains(MAX_DATA_NODE_ID + 1));
    }

    #[test]
    fn history_is_bounded() {
        let mut s = Sysfile::new(1, 4);
        for g in 1..=40u32 {
            s.push(g, vec![g as u64 * 10; 4], NodeBitmask::from_ids([1, 2]));
        }
        assert_eq!(s.saved.len(), MAX_SAVED);
        assert_eq!(s.saved[0].gci_hi, 40 - MAX_SAVED as u32 + 1);
        assert_eq!(Sysfile::decode(&s.encode()).unwrap(), s);
    }

    #[test]
    fn every_flipped_byte_and_truncation_is_detected() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(Sysfile::decode(&b).is_err(), "flip at {i} not detected");
        }
        for n in 0..bytes.len() {
            assert!(Sysfile::decode(&bytes[..n]).is_err());
        }
    }
}
