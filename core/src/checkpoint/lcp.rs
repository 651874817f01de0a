//! The steps of one fragment LCP in their only safe order, for the caller that scans
//! the fragment:
//!
//! 1. [`begin_lcp`]: the ALL range (rotating on from the control's last one; full for
//!    the first LCP) and a data file writer: into the spare made for this LCP id
//!    ([`super::create_spare`]) after the previous LCP, or a new file.
//! 2. The caller's scan puts rows and delete markers into the writer (ALL parts: every
//!    row; CHANGE parts: rows changed since the previous LCP, deleted rows, dropped
//!    pages), and may set the file's max GCI when the scan ends.
//! 3. [`complete_lcp`]: finish the data file (fdatasync), store the new control file
//!    (atomic, durable), then remove the data files the chain no longer needs.
//!
//! A fragment with no change since its previous LCP skips 1-3 and calls
//! [`complete_idle_lcp`] (control file only, NDB's idle LCP). A crash at any point
//! leaves the previous control file and its chain, or the new ones; files no control
//! names are removed by [`super::remove_orphans`] at restart.

use std::path::Path;

use super::{
    DataFileRef, FragControl, LCP_PARTS, LcpFileHeader, LcpFileSummary, LcpFileWriter, PartRange,
    data_file_path, lcp_dir, next_all_range,
};
use crate::disk::io::FileSystem;
use crate::error::Result;

/// The ALL range of the next LCP of the fragment of `ctl` with `all_parts_count` ALL
/// parts: the one [`begin_lcp`] writes in its header (full for the first LCP), so that a
/// scan may start before its file exists.
pub fn lcp_all_range(ctl: &FragControl, all_parts_count: u32) -> PartRange {
    let count = if ctl.files.is_empty() {
        LCP_PARTS
    } else {
        all_parts_count
    };
    next_all_range(ctl.last_all_range(), count)
}

/// Start LCP `lcp_id` of the fragment of `ctl` with `all_parts_count` ALL parts
/// (ignored for the first LCP, which is full). `max_gci` may be raised later with
/// [`LcpFileWriter::set_max_gci`].
pub fn begin_lcp(
    fs: &dyn FileSystem,
    node_fs_dir: &Path,
    ctl: &FragControl,
    lcp_id: u32,
    all_parts_count: u32,
    max_gci: u32,
    schema_version: u64,
) -> Result<LcpFileWriter> {
    let header = LcpFileHeader {
        table_id: ctl.table_id,
        fragment_id: ctl.fragment_id,
        lcp_id,
        all_parts: lcp_all_range(ctl, all_parts_count),
        max_gci,
        schema_version,
    };
    let dir = lcp_dir(node_fs_dir, ctl.table_id, ctl.fragment_id);
    LcpFileWriter::start(fs, &data_file_path(&dir, lcp_id), &header)
}

/// Finish the data file, store the new control file, remove the files it dropped.
/// Returns the new control and what the data file holds.
pub fn complete_lcp(
    fs: &dyn FileSystem,
    node_fs_dir: &Path,
    ctl: &FragControl,
    writer: LcpFileWriter,
) -> Result<(FragControl, LcpFileSummary)> {
    let header = *writer.header();
    let summary = writer.finish()?;
    let (next, dropped) = ctl.after_lcp(DataFileRef::new(&header, &summary), header.max_gci)?;
    let dir = lcp_dir(node_fs_dir, ctl.table_id, ctl.fragment_id);
    next.store(fs, &dir)?;
    FragControl::remove_dropped(fs, &dir, &dropped)?;
    Ok((next, summary))
}

/// An LCP of a fragment without change since its previous LCP: only a new control file
/// (new LCP id and max GCI, same chain).
pub fn complete_idle_lcp(
    fs: &dyn FileSystem,
    node_fs_dir: &Path,
    ctl: &FragControl,
    lcp_id: u32,
    max_gci: u32,
) -> Result<FragControl> {
    let next = ctl.after_idle_lcp(lcp_id, max_gci)?;
    next.store(fs, &lcp_dir(node_fs_dir, ctl.table_id, ctl.fragment_id))?;
    Ok(next)
}
