//! [`LcpFileReader`]: reads an LCP data file record by record, verifying the header,
//! every block's checksum, number and record count, and the footer (counts, the chain
//! checksum over the blocks' checksums, the header's checksum, its place at the very
//! end). Records borrow from the reader's block buffer: one allocation per reader, none
//! per record. Errors name the file and the offset; a file that ends before its footer
//! is reported incomplete (1512), a checksum or format failure as corrupt (896).
//! Layout and the writer: `datafile.rs`, `docs/lcp-files.md`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::datafile::{
    BLOCK_HEADER_BYTES, BLOCK_MAGIC, DELETE_RECORD_BYTES, FOOTER_BYTES, FOOTER_MAGIC, HEADER_BYTES,
    KIND_DELETE_PAGE, KIND_DELETE_ROW, KIND_ROW, ROW_RECORD_HEADER_BYTES, io_err,
};
use super::{
    BLOCK_BYTES, LcpFileHeader, LcpFileSummary, LcpRecord, MAX_ROW_PAYLOAD_BYTES, u32_at, u64_at,
};
use crate::disk::io::{DiskFile, FileSystem};
use crate::error::{NdbError, Result, codes};

/// How far ahead of the block being read the file is asked for (`DiskFile::will_need`):
/// a restore reads its files from the start to the end, and with a cold page cache the
/// disk's latency would otherwise stall it at every read-ahead window the kernel
/// guesses (128 KiB at first).
const READ_AHEAD_BYTES: u64 = 16 << 20;

/// Reads and verifies one LCP data file, record by record.
pub struct LcpFileReader {
    file: Arc<dyn DiskFile>,
    path: PathBuf,
    header: LcpFileHeader,
    header_crc: u32,
    len: u64,
    /// Offset of the next block (or the footer).
    offset: u64,
    /// The current block (header and body); records are parsed from `pos`.
    block: Vec<u8>,
    block_offset: u64,
    pos: usize,
    block_records_left: u32,
    /// The file is asked for up to here (`READ_AHEAD_BYTES` ahead).
    read_ahead_to: u64,
    blocks: u32,
    records: u64,
    rows: u64,
    chain_crc: u32,
    done: bool,
}

impl LcpFileReader {
    /// Open a data file and verify its header.
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<(LcpFileHeader, LcpFileReader)> {
        let file = fs.open(path).map_err(|e| {
            codes::file_read_error(format!("LCP file {}: open: {e}", path.display()))
        })?;
        let len = file.len_bytes().map_err(|e| io_err(path, 0, "length", e))?;
        if len < (HEADER_BYTES + FOOTER_BYTES) as u64 {
            return Err(incomplete(path, len));
        }
        let mut h = [0u8; HEADER_BYTES];
        file.read_at(&mut h, 0).map_err(|e| read_err(path, 0, e))?;
        let header = LcpFileHeader::decode(&h, path)?;
        let reader = LcpFileReader {
            file,
            path: path.to_path_buf(),
            header,
            header_crc: u32_at(&h, 60),
            len,
            offset: HEADER_BYTES as u64,
            block: Vec::with_capacity(BLOCK_BYTES),
            block_offset: 0,
            pos: 0,
            block_records_left: 0,
            read_ahead_to: 0,
            blocks: 0,
            records: 0,
            rows: 0,
            chain_crc: 0,
            done: false,
        };
        Ok((header, reader))
    }

    pub fn header(&self) -> &LcpFileHeader {
        &self.header
    }

    /// What the file holds; Some once `next` returned None (the footer verified).
    pub fn summary(&self) -> Option<LcpFileSummary> {
        self.done.then_some(LcpFileSummary {
            records: self.records,
            rows: self.rows,
            bytes: self.len,
        })
    }

    /// The next record, or None at the verified footer. Every error names the file and
    /// the offset; a file without its footer is reported incomplete.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<LcpRecord<'_>>> {
        while self.pos >= self.block.len() {
            if !self.load_block()? {
                return Ok(None);
            }
        }
        let at = self.pos;
        let b = &self.block;
        let corrupt = |what: &str| {
            codes::corrupt_page(format!(
                "LCP file {} at offset {}: {what}",
                self.path.display(),
                self.block_offset + at as u64
            ))
        };
        if self.block_records_left == 0 || at + DELETE_RECORD_BYTES > b.len() {
            return Err(corrupt("record beyond the block's count or end"));
        }
        let id = u32_at(b, at + 1);
        self.block_records_left -= 1;
        self.records += 1;
        match b[at] {
            KIND_ROW => {
                if at + ROW_RECORD_HEADER_BYTES > b.len() {
                    return Err(corrupt("row record beyond the block"));
                }
                let n = u32_at(b, at + 5) as usize;
                let start = at + ROW_RECORD_HEADER_BYTES;
                if n > MAX_ROW_PAYLOAD_BYTES || start + n > b.len() {
                    return Err(corrupt("row payload beyond the block"));
                }
                self.pos = start + n;
                self.rows += 1;
                Ok(Some(LcpRecord::Row {
                    row_id: id,
                    payload: &self.block[start..start + n],
                }))
            }
            KIND_DELETE_ROW => {
                self.pos = at + DELETE_RECORD_BYTES;
                Ok(Some(LcpRecord::DeleteRow { row_id: id }))
            }
            KIND_DELETE_PAGE => {
                self.pos = at + DELETE_RECORD_BYTES;
                Ok(Some(LcpRecord::DeletePage { page_no: id }))
            }
            k => Err(corrupt(&format!("unknown record kind {k}"))),
        }
    }

    /// Load the next block; false at the verified footer.
    fn load_block(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        if self.block_records_left != 0 {
            return Err(self.corrupt(
                self.block_offset,
                "block holds fewer records than its header says",
            ));
        }
        let at = self.offset;
        if at + BLOCK_HEADER_BYTES as u64 > self.len {
            return Err(incomplete(&self.path, at));
        }
        if at + READ_AHEAD_BYTES / 2 >= self.read_ahead_to && self.read_ahead_to < self.len {
            let to = (at + READ_AHEAD_BYTES).min(self.len);
            let from = self.read_ahead_to.max(at);
            self.file.will_need(from, to - from);
            self.read_ahead_to = to;
        }
        let mut h = [0u8; BLOCK_HEADER_BYTES];
        self.file
            .read_at(&mut h, at)
            .map_err(|e| read_err(&self.path, at, e))?;
        match u32_at(&h, 0) {
            BLOCK_MAGIC => {}
            FOOTER_MAGIC => {
                self.read_footer(at)?;
                return Ok(false);
            }
            _ => {
                return Err(
                    self.corrupt(at, "no block or footer here (incomplete or corrupt file)")
                );
            }
        }
        let body = u32_at(&h, 12) as usize;
        if body == 0 || BLOCK_HEADER_BYTES + body > BLOCK_BYTES {
            return Err(self.corrupt(at, "block length out of range"));
        }
        let end = at + (BLOCK_HEADER_BYTES + body) as u64;
        if end > self.len {
            return Err(incomplete(&self.path, at));
        }
        self.block.clear();
        self.block.extend_from_slice(&h);
        self.block.resize(BLOCK_HEADER_BYTES + body, 0);
        self.file
            .read_at(
                &mut self.block[BLOCK_HEADER_BYTES..],
                at + BLOCK_HEADER_BYTES as u64,
            )
            .map_err(|e| read_err(&self.path, at, e))?;
        let crc = crc32c::crc32c(&self.block[8..]);
        if crc != u32_at(&h, 4) {
            return Err(self.corrupt(at, "block checksum mismatch"));
        }
        if u32_at(&h, 8) != self.blocks || u32_at(&h, 20) != self.header.lcp_id {
            return Err(self.corrupt(at, "block number or LCP id out of sequence"));
        }
        self.block_records_left = u32_at(&h, 16);
        self.chain_crc = crc32c::crc32c_append(self.chain_crc, &crc.to_le_bytes());
        self.blocks += 1;
        self.block_offset = at;
        self.pos = BLOCK_HEADER_BYTES;
        self.offset = end;
        Ok(true)
    }

    fn read_footer(&mut self, at: u64) -> Result<()> {
        if at + FOOTER_BYTES as u64 != self.len {
            return Err(self.corrupt(at, "footer not at the end of the file"));
        }
        let mut f = [0u8; FOOTER_BYTES];
        self.file
            .read_at(&mut f, at)
            .map_err(|e| read_err(&self.path, at, e))?;
        if crc32c::crc32c(&f[8..]) != u32_at(&f, 4) {
            return Err(self.corrupt(at, "footer checksum mismatch"));
        }
        let ok = u32_at(&f, 8) == self.blocks
            && u32_at(&f, 12) == self.header.lcp_id
            && u64_at(&f, 16) == self.records
            && u64_at(&f, 24) == self.rows
            && u64_at(&f, 32) == at
            && u32_at(&f, 40) == self.chain_crc
            && u32_at(&f, 44) == self.header_crc;
        if !ok {
            return Err(self.corrupt(at, "footer counts differ from the file's blocks"));
        }
        self.done = true;
        self.block.clear();
        self.pos = 0;
        Ok(())
    }

    fn corrupt(&self, offset: u64, what: &str) -> NdbError {
        codes::corrupt_page(format!(
            "LCP file {} at offset {offset}: {what}",
            self.path.display()
        ))
    }
}

fn incomplete(path: &Path, offset: u64) -> NdbError {
    codes::file_read_error(format!(
        "LCP file {} incomplete: no footer (ends at or before offset {offset})",
        path.display()
    ))
}

fn read_err(path: &Path, offset: u64, e: io::Error) -> NdbError {
    codes::file_read_error(format!(
        "LCP file {} at offset {offset}: {e}",
        path.display()
    ))
}

/// Read a whole data file and verify it: Ok only for a complete file.
pub fn verify_file(fs: &dyn FileSystem, path: &Path) -> Result<(LcpFileHeader, LcpFileSummary)> {
    let (header, mut reader) = LcpFileReader::open(fs, path)?;
    while reader.next()?.is_some() {}
    let summary = reader
        .summary()
        .ok_or_else(|| incomplete(path, reader.offset))?;
    Ok((header, summary))
}
