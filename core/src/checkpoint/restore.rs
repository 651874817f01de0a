//! Restore a fragment from its LCP chain (NDB's RESTORE block for partial LCPs).
//!
//! The chain named by the control file is read oldest to newest. For each file and
//! part ([`part_modes`], NDB's IGNORE_PART / ALL_PART / CHANGE_PART):
//! - IGNORE: the part's base (the newest file whose ALL range contains it) is a newer
//!   file; its records here are skipped.
//! - ALL: this file is the part's base; its rows are put. The target starts empty and no
//!   older file put anything in this part, so nothing needs clearing; delete markers in
//!   an ALL part are skipped.
//! - CHANGE: a file after the base; rows replace, deletes delete (row, or whole page).
//!
//! The target must accept a delete of a row or page it does not hold (a row inserted
//! and deleted between two LCPs is deleted without ever having been put), and a put of
//! a row it holds (replace). Every file is verified as it is read (block checksums, the
//! footer, header and counts against the control file); an error stops the restore and
//! leaves the target partly restored (the caller discards it).

use std::path::Path;

use super::ctl::bases;
use super::{
    FragControl, LCP_PARTS, LcpFileReader, LcpRecord, data_file_path, lcp_dir, part_of_page,
    part_of_row,
};
use crate::disk::io::FileSystem;
use crate::error::{Result, codes};

/// Where restored rows go (the lead's fragment: rows put back at their row ids).
pub trait RestoreTarget {
    /// Put (insert or replace) the row at `row_id`.
    fn put_row(&mut self, row_id: u32, payload: &[u8]) -> Result<()>;
    /// Remove the row at `row_id` if present.
    fn delete_row(&mut self, row_id: u32) -> Result<()>;
    /// Remove every row of page `page_no` if any.
    fn delete_page(&mut self, page_no: u32) -> Result<()>;
}

/// What a restore did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// Data files read.
    pub files: u64,
    /// Rows put.
    pub rows: u64,
    /// Row and page deletes applied.
    pub deletes: u64,
    /// Bytes of data files read.
    pub bytes: u64,
    /// Records skipped (IGNORE parts, deletes in ALL parts).
    pub skipped: u64,
}

/// How a file of the chain treats a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartMode {
    Ignore,
    All,
    Change,
}

/// For file `index` of `ctl.files`, the mode of every part (2048 entries); None when
/// some part has no base.
pub fn part_modes(ctl: &FragControl, index: usize) -> Option<Vec<PartMode>> {
    let base = bases(&ctl.files)?;
    Some(base.iter().map(|&b| mode(b, index)).collect())
}

#[inline]
fn mode(base: u32, index: usize) -> PartMode {
    match (base as usize).cmp(&index) {
        std::cmp::Ordering::Greater => PartMode::Ignore,
        std::cmp::Ordering::Equal => PartMode::All,
        std::cmp::Ordering::Less => PartMode::Change,
    }
}

/// Restore the fragment of `ctl` from its chain under `node_fs_dir` into `target`.
pub fn restore_fragment(
    fs: &dyn FileSystem,
    node_fs_dir: &Path,
    ctl: &FragControl,
    target: &mut dyn RestoreTarget,
) -> Result<RestoreStats> {
    let mut stats = RestoreStats::default();
    if ctl.files.is_empty() {
        return Ok(stats);
    }
    let Some(base) = bases(&ctl.files) else {
        return Err(codes::corrupt_page(format!(
            "LCP chain of T{}F{} leaves a part without a full copy",
            ctl.table_id, ctl.fragment_id
        )));
    };
    let dir = lcp_dir(node_fs_dir, ctl.table_id, ctl.fragment_id);
    let mut modes = vec![PartMode::Ignore; LCP_PARTS as usize];
    for (index, fref) in ctl.files.iter().enumerate() {
        for (m, &b) in modes.iter_mut().zip(&base) {
            *m = mode(b, index);
        }
        let path = data_file_path(&dir, fref.lcp_id);
        let (header, mut reader) = LcpFileReader::open(fs, &path)?;
        if header.table_id != ctl.table_id
            || header.fragment_id != ctl.fragment_id
            || header.lcp_id != fref.lcp_id
            || header.all_parts != fref.all_parts
        {
            return Err(codes::corrupt_page(format!(
                "LCP file {}: header {header:?} is not the control file's {fref:?}",
                path.display()
            )));
        }
        while let Some(rec) = reader.next()? {
            match rec {
                LcpRecord::Row { row_id, payload } => match modes[part_of_row(row_id) as usize] {
                    PartMode::Ignore => stats.skipped += 1,
                    PartMode::All | PartMode::Change => {
                        target.put_row(row_id, payload)?;
                        stats.rows += 1;
                    }
                },
                LcpRecord::DeleteRow { row_id } => match modes[part_of_row(row_id) as usize] {
                    PartMode::Change => {
                        target.delete_row(row_id)?;
                        stats.deletes += 1;
                    }
                    PartMode::Ignore | PartMode::All => stats.skipped += 1,
                },
                LcpRecord::DeletePage { page_no } => match modes[part_of_page(page_no) as usize] {
                    PartMode::Change => {
                        target.delete_page(page_no)?;
                        stats.deletes += 1;
                    }
                    PartMode::Ignore | PartMode::All => stats.skipped += 1,
                },
            }
        }
        let summary = reader.summary().unwrap_or_default();
        if summary.records != fref.records || summary.bytes != fref.bytes {
            return Err(codes::corrupt_page(format!(
                "LCP file {}: {} records in {} bytes, the control file says {} in {}",
                path.display(),
                summary.records,
                summary.bytes,
                fref.records,
                fref.bytes
            )));
        }
        stats.files += 1;
        stats.bytes += summary.bytes;
    }
    Ok(stats)
}
