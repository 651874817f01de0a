//! Opening existing log files: verifying the file headers, and finding where a part
//! continues after a restart (`position`, which also records the restart cut, see
//! `restarts.rs` and `docs/redo-log.md` §5).

use std::path::Path;
use std::sync::Arc;

use super::config::{Geometry, file_name, file_path};
use super::format::{
    self, BLOCK_BYTES, BlockAddr, FileHeader, PAYLOAD, check_block, check_file_header,
};
use super::part::PartState;
use super::{Lsn, io_error, restarts};
use crate::disk::io::{DiskFile, FileSystem};
use crate::error::{Result, codes};

/// Open the files of part `p` and verify their header blocks.
pub(crate) fn open_part_files(
    fs: &dyn FileSystem,
    dir: &Path,
    geo: &Geometry,
    p: u32,
) -> Result<Vec<Arc<dyn DiskFile>>> {
    let mut files = Vec::new();
    for f in 0..geo.files_per_part {
        let path = file_path(dir, p, f);
        let file = fs.open(&path).map_err(|e| io_error("open", p, f, e))?;
        let mut b = vec![0u8; BLOCK_BYTES];
        file.read_at(&mut b, 0)
            .map_err(|e| codes::file_read_error(format_args!("{}: {e}", path.display())))?;
        let want = FileHeader {
            part: p,
            file_no: f,
            files_per_part: geo.files_per_part,
            file_size_bytes: geo.file_size_bytes,
        };
        check_file_header(&b, &want)
            .map_err(|what| format::corrupt(p, &file_name(p, f), 0, &what))?;
        files.push(file);
    }
    Ok(files)
}

/// Header and checksum of log block `block_no` if it is there and verifies.
fn read_block(
    files: &[Arc<dyn DiskFile>],
    geo: &Geometry,
    part: u32,
    block_no: u64,
) -> Result<Option<(format::BlockHeader, u32)>> {
    let (file_no, page_no) = geo.location(block_no);
    let mut b = vec![0u8; BLOCK_BYTES];
    files[file_no as usize]
        .read_at(&mut b, u64::from(page_no) * BLOCK_BYTES as u64)
        .map_err(|e| {
            codes::file_read_error(format_args!("redo log {}: {e}", file_name(part, file_no)))
        })?;
    let at = BlockAddr {
        part,
        lsn: block_no * PAYLOAD,
        file_no,
        page_no,
    };
    Ok(check_block(&b, &at).ok())
}

/// Where appending continues after `open` at `head` (docs/redo-log.md §5): after the
/// valid log that follows `head` (blocks written before the crash are never
/// rewritten), and always in a fresh block. The cut `[head, resume)` is recorded in
/// the part's restarts file first, so that replay voids what lies there.
pub(crate) fn position(
    fs: &dyn FileSystem,
    dir: &Path,
    files: &[Arc<dyn DiskFile>],
    geo: &Geometry,
    part: u32,
    tail: Lsn,
    head: Lsn,
) -> Result<(PartState, u32)> {
    let limit = tail / PAYLOAD + geo.ring_blocks;
    let mut k = head / PAYLOAD;
    let mut prev: Option<u32> = None;
    while k < limit {
        match read_block(files, geo, part, k)? {
            Some((h, crc)) if prev.is_none_or(|p| p == h.prev_crc) => {
                prev = Some(crc);
                k += 1;
            }
            _ => break,
        }
    }
    let mut resume_block = k.max(head.div_ceil(PAYLOAD));
    // Earlier cuts: those wholly before `head` stay (unless before the tail); one that
    // holds `head` is merged into the new cut; later ones are inside the new cut.
    let mut cut = head;
    let mut cuts = Vec::new();
    for c in restarts::read(fs, dir, part)? {
        if c.resume < tail {
            continue;
        }
        if c.resume <= head {
            cuts.push(c);
        } else {
            cut = cut.min(c.cut);
            resume_block = resume_block.max(c.resume / PAYLOAD);
        }
    }
    if resume_block > limit {
        return Err(codes::redo_log_files_overloaded(format_args!(
            "part {part}: no room to resume after the restart (tail {tail}, head {head})"
        )));
    }
    let prev_crc = match (prev, resume_block) {
        (Some(c), _) if resume_block == k => c,
        (_, 0) => 0,
        _ => read_block(files, geo, part, resume_block - 1)?.map_or(0, |(_, c)| c),
    };
    let resume = resume_block * PAYLOAD;
    cuts.push(restarts::RestartCut { cut, resume });
    restarts::write(fs, dir, part, &cuts)?;
    Ok((PartState::new(resume, tail, geo.buffer_blocks), prev_crc))
}
