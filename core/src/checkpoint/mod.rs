//! Partial local checkpoint (LCP) files of a fragment, as NDB 7.6's partial LCP.
//!
//! A fragment's row space is divided into [`LCP_PARTS`] (2048) parts by a hash of the
//! page number: [`part_of_page`]. Each LCP of a fragment writes one data file (`datafile.rs`): for
//! the parts in its ALL range ([`PartRange`]) every row, for the other parts (CHANGE)
//! only the rows changed since the previous LCP of the fragment plus delete markers.
//! How many parts are ALL comes from NDB's algorithm (`parts.rs`); the ALL range
//! rotates, each LCP starting where the previous one's ended. The fragment's control
//! file (`ctl.rs`) names the newest complete LCP and the chain of data files a restore
//! needs (oldest first); `restore.rs` replays that chain into a [`RestoreTarget`].
//! `pace.rs` paces checkpoint writes between MinDiskWriteSpeed and MaxDiskWriteSpeed;
//! `lcp.rs` runs the steps of one fragment LCP in their safe order.
//!
//! Why parts are chosen by page, not by row: the LCP scan of a fragment walks its fixed
//! pages and decides per page (a page's change map tells whether any row on it changed
//! since the previous LCP, so an unchanged page in a CHANGE part is skipped without
//! visiting its rows, the fix of NDB 7.6.7). If parts were per row, every page would
//! hold rows of many parts and no page could be skipped.
//!
//! Invariants:
//! - A data file is complete only when its footer verifies (counts and a checksum over
//!   every block's checksum) and it was fdatasync'ed; a control file names only complete
//!   files, and is replaced atomically (`FileSystem::write_atomic`) after the new data
//!   file is durable. Files dropped from the chain are removed only after the control
//!   file that no longer names them is durable.
//! - Every part has a base in the chain: the newest file whose ALL range contains it.
//!   Files before the oldest base are not needed.
//! - A spare ([`create_spare`]) is an empty data file made ahead under the name of the
//!   LCP that will write it; [`LcpFileWriter::start`] takes it only while it is empty,
//!   so what a crash leaves of the file is what it would leave of a file created by
//!   that LCP. No control file names a spare (to a restart it is an orphan).
//!
//! Lock order: none; nothing here holds a lock (the caller serialises the LCPs of one
//! fragment). Byte layouts: `docs/lcp-files.md`.

mod blocks;
mod ctl;
mod datafile;
mod lcp;
mod pace;
mod parallel;
mod parts;
mod reader;
mod restore;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_chain;

use std::path::{Path, PathBuf};

pub use blocks::LcpBlocks;
pub use ctl::{DataFileRef, FragControl, MAX_CHAIN_FILES, remove_orphans};
pub use datafile::{
    BLOCK_BYTES, LcpFileHeader, LcpFileSummary, LcpFileWriter, LcpRecord, MAX_ROW_PAYLOAD_BYTES,
    create_spare,
};
pub use lcp::{begin_lcp, complete_idle_lcp, complete_lcp, lcp_all_range};
pub use pace::{DiskWritePacer, REDO_FILL_FULL_SPEED_PERCENT, REDO_FILL_SPEEDUP_PERCENT};
pub use parallel::{LCP_IO_THREADS, run_parallel};
pub use parts::{
    ChangeStats, DELETE_RECOVERY_WORK_PCT, PartialLcpConfig, all_parts, choose_all_parts,
    next_all_range,
};
pub use reader::{LcpFileReader, verify_file};
pub use restore::{PartMode, RestoreStats, RestoreTarget, part_modes, restore_fragment};

/// Parts of a fragment's row space (NDB's `BackupFormat::NDB_MAX_LCP_PARTS`).
pub const LCP_PARTS: u32 = 2048;

/// The part a page's rows belong to: a hash of the page number (NDB's
/// `hash_lcp_part`), so that the few parts an LCP writes in full hold a proportional
/// share of any fragment's pages, also of a fragment with fewer than 2048 pages (with
/// `page_no % 2048` their pages would be the parts' first numbers, and a small ALL
/// range starting at 0 would hold all of them). By page because the LCP scan decides
/// per page and a page's change map lets it skip unchanged pages (module doc).
#[inline]
pub fn part_of_page(page_no: u32) -> u32 {
    // Fibonacci hashing: the top 11 bits of the product.
    page_no.wrapping_mul(0x9E37_79B1) >> (32 - LCP_PARTS.trailing_zeros())
}

/// The part of a row id (`page_no << 13 | slot`).
#[inline]
pub fn part_of_row(row_id: u32) -> u32 {
    part_of_page(row_id >> crate::storage::row_id::ROW_ID_SLOT_BITS)
}

/// A range of parts, `count` parts from `start`, wrapping modulo [`LCP_PARTS`].
/// Invariant: `start < LCP_PARTS`, `1 <= count <= LCP_PARTS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartRange {
    pub start: u32,
    pub count: u32,
}

impl PartRange {
    /// Every part (a full LCP).
    pub const ALL: PartRange = PartRange {
        start: 0,
        count: LCP_PARTS,
    };

    /// A range; `start` is taken modulo [`LCP_PARTS`], `count` must be in 1..=2048.
    pub fn new(start: u32, count: u32) -> PartRange {
        assert!(
            (1..=LCP_PARTS).contains(&count),
            "part count {count} out of 1..=2048"
        );
        PartRange {
            start: start % LCP_PARTS,
            count,
        }
    }

    /// True when the fields satisfy the invariant (decoded values are checked with it).
    pub fn is_valid(self) -> bool {
        self.start < LCP_PARTS && (1..=LCP_PARTS).contains(&self.count)
    }

    #[inline]
    pub fn contains(self, part: u32) -> bool {
        (part % LCP_PARTS + LCP_PARTS - self.start) % LCP_PARTS < self.count
    }

    /// Whether the rows of page `page_no` are in this range's parts.
    #[inline]
    pub fn contains_page(self, page_no: u32) -> bool {
        self.contains(part_of_page(page_no))
    }

    /// The part after the last one (where the next ALL range starts).
    pub fn end(self) -> u32 {
        (self.start + self.count) % LCP_PARTS
    }

    pub fn is_full(self) -> bool {
        self.count == LCP_PARTS
    }

    /// The parts in order from `start`.
    pub fn parts(self) -> impl Iterator<Item = u32> {
        (0..self.count).map(move |i| (self.start + i) % LCP_PARTS)
    }
}

/// The directory of a node's checkpoint files: `{node_fs_dir}/LCP` (`node_fs_dir` is
/// the node's `ndb_N_fs`); an initial start removes it whole.
pub fn lcp_root(node_fs_dir: &Path) -> PathBuf {
    node_fs_dir.join("LCP")
}

/// The LCP directory of a fragment: `{node_fs_dir}/LCP/T{table_id}F{fragment_id}`.
pub fn lcp_dir(node_fs_dir: &Path, table_id: u32, fragment_id: u32) -> PathBuf {
    lcp_root(node_fs_dir).join(format!("T{table_id}F{fragment_id}"))
}

/// The data file of LCP `lcp_id` in a fragment's LCP directory: `{lcp_id}.data`.
pub fn data_file_path(dir: &Path, lcp_id: u32) -> PathBuf {
    dir.join(format!("{lcp_id}.data"))
}

/// The control file in a fragment's LCP directory: `ctl`.
pub fn ctl_paths(dir: &Path) -> [PathBuf; 2] {
    [dir.join("ctl0"), dir.join("ctl1")]
}

#[inline]
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

#[inline]
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

#[inline]
fn put_u32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn put_u64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}
