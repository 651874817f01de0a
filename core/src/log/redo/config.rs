//! REDO log configuration (NoOfFragmentLogParts, NoOfFragmentLogFiles,
//! FragmentLogFileSize, RedoBuffer, InitFragmentLogFiles, RedoOverCommitLimit), the
//! geometry derived from it, and where the files live.
//!
//! Files: NDB's layout under the node's file system directory (`ndb_<node>_fs`): part
//! `p` in `D<8+p>/DBLQH/`, file `f` of the part named `S<f>.FragLog`. Block 0 of every
//! file is the file header; blocks 1.. hold log blocks. The data blocks of the part's
//! files, in file order, form the part's ring: log block `k` (LSN `k x PAYLOAD` ..) is
//! at ring index `k mod ring_blocks`.

use std::path::{Path, PathBuf};

use super::format::{BLOCK_BYTES, PAYLOAD};
use crate::config::DataNodeConfig;
use crate::error::{Result, codes};

/// NDB's largest NoOfFragmentLogParts.
pub const MAX_LOG_PARTS: u32 = 32;
/// Smallest buffer of one part, in blocks.
pub const MIN_BUFFER_BLOCKS_PER_PART: usize = 4;

/// What the REDO log is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedoConfig {
    /// NoOfFragmentLogParts.
    pub parts: u32,
    /// NoOfFragmentLogFiles (per part).
    pub files_per_part: u32,
    /// FragmentLogFileSize (rounded down to whole 4 KB blocks).
    pub file_size_bytes: u64,
    /// RedoBuffer, split equally over the parts.
    pub buffer_bytes: u64,
    /// InitFragmentLogFiles=full (files fully allocated at initial start).
    pub init_full: bool,
    /// RedoOverCommitLimit in ms: how long a commit waits for log space before 1221/410.
    pub overload_limit_ms: u64,
}

impl RedoConfig {
    /// The data node's REDO parameters (NDB defaults where a value is missing).
    pub fn from_node(node: &DataNodeConfig) -> RedoConfig {
        let or = |v: u64, d: u64| if v == 0 { d } else { v };
        RedoConfig {
            parts: if node.no_of_fragment_log_parts == 0 {
                4
            } else {
                node.no_of_fragment_log_parts
            },
            files_per_part: u32::try_from(or(node.no_of_fragment_log_files, 16))
                .unwrap_or(u32::MAX),
            file_size_bytes: or(node.fragment_log_file_size, 16 << 20),
            buffer_bytes: or(node.redo_buffer, 32 << 20),
            init_full: node.get_str("InitFragmentLogFiles") == Some("full"),
            overload_limit_ms: node
                .get_u64("RedoOverCommitLimit")
                .unwrap_or(20)
                .saturating_mul(1000),
        }
    }

    /// Check the values and derive the geometry (5000 for impossible values).
    pub(crate) fn geometry(&self) -> Result<Geometry> {
        if self.parts == 0 || self.parts > MAX_LOG_PARTS {
            return Err(codes::bad_config(format_args!(
                "NoOfFragmentLogParts={} (1..={MAX_LOG_PARTS})",
                self.parts
            )));
        }
        if self.files_per_part == 0 {
            return Err(codes::bad_config("NoOfFragmentLogFiles=0"));
        }
        let file_blocks = self.file_size_bytes / BLOCK_BYTES as u64;
        if file_blocks < 2 || file_blocks > u64::from(u32::MAX) {
            return Err(codes::bad_config(format_args!(
                "FragmentLogFileSize={} (at least two 4K blocks)",
                self.file_size_bytes
            )));
        }
        let blocks_per_file = file_blocks - 1;
        let ring_blocks = blocks_per_file * u64::from(self.files_per_part);
        let reserve_blocks = (ring_blocks / 64).max(2);
        if ring_blocks < reserve_blocks + 2 {
            return Err(codes::bad_config(format_args!(
                "REDO log part of {ring_blocks} blocks is too small"
            )));
        }
        let per_part = self.buffer_bytes / u64::from(self.parts) / BLOCK_BYTES as u64;
        let buffer_blocks = usize::try_from(per_part)
            .unwrap_or(usize::MAX)
            .max(MIN_BUFFER_BLOCKS_PER_PART);
        Ok(Geometry {
            parts: self.parts,
            files_per_part: self.files_per_part,
            file_size_bytes: file_blocks * BLOCK_BYTES as u64,
            blocks_per_file,
            ring_blocks,
            reserve_blocks,
            buffer_blocks,
        })
    }
}

/// Sizes derived from a [`RedoConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub parts: u32,
    pub files_per_part: u32,
    /// File size actually used (whole blocks).
    pub file_size_bytes: u64,
    /// Log blocks per file (the file header block excluded).
    pub blocks_per_file: u64,
    /// Log blocks of one part's ring.
    pub ring_blocks: u64,
    /// Blocks `wait_for_room` keeps free (seal padding, concurrent overshoot).
    pub reserve_blocks: u64,
    /// Buffer blocks of one part.
    pub buffer_blocks: usize,
}

impl Geometry {
    /// Record bytes one part's files hold.
    pub fn capacity_bytes(&self) -> u64 {
        self.ring_blocks * PAYLOAD
    }

    /// (file_no, page_no) of log block `block_no`.
    pub fn location(&self, block_no: u64) -> (u32, u32) {
        let idx = block_no % self.ring_blocks;
        (
            (idx / self.blocks_per_file) as u32,
            (1 + idx % self.blocks_per_file) as u32,
        )
    }
}

/// Directory of part `part`'s files: `<dir>/D<8+part>/DBLQH`.
pub fn part_dir(dir: &Path, part: u32) -> PathBuf {
    dir.join(format!("D{}", 8 + part)).join("DBLQH")
}

/// Path of file `file_no` of part `part`: `<dir>/D<8+part>/DBLQH/S<file_no>.FragLog`.
pub fn file_path(dir: &Path, part: u32, file_no: u32) -> PathBuf {
    part_dir(dir, part).join(format!("S{file_no}.FragLog"))
}

/// A file's name relative to the log directory, for messages.
pub(crate) fn file_name(part: u32, file_no: u32) -> String {
    format!("D{}/DBLQH/S{file_no}.FragLog", 8 + part)
}
