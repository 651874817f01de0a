//! The records of an LCP data file, encoded into checksummed blocks in memory (no
//! I/O): what [`super::LcpFileWriter`] writes. The LCP scan encodes rows straight into
//! it while it holds the fragment's mutex, and the writer writes the sealed blocks once
//! the mutex is released; before the file exists (it is created while the scan runs)
//! the scan fills one of its own, which the writer then adopts
//! ([`super::LcpFileWriter::adopt`]). One copy of each row, from the fragment's pages
//! into its block.
//!
//! Invariants: blocks are numbered and chained (the CRC-32C over every block's CRC) in
//! the order they are sealed, which is the order the writer writes them; a sealed
//! block holds at least one record and at most [`BLOCK_BYTES`]; records never span
//! blocks. A row larger than [`MAX_ROW_PAYLOAD_BYTES`] is not encoded and fails the
//! file ([`LcpBlocks::check`]). Byte layout: `docs/lcp-files.md`.

use super::datafile::{
    BLOCK_BYTES, BLOCK_HEADER_BYTES, BLOCK_MAGIC, DELETE_RECORD_BYTES, KIND_DELETE_PAGE,
    KIND_DELETE_ROW, KIND_ROW, MAX_ROW_PAYLOAD_BYTES, ROW_RECORD_HEADER_BYTES,
};
use super::put_u32;
use crate::error::{Result, codes};

/// Block buffers kept for reuse once written (a scan batch seals one or two).
const MAX_FREE_BUFFERS: usize = 4;

/// Records encoded into blocks, the sealed ones waiting to be written.
#[derive(Debug)]
pub struct LcpBlocks {
    lcp_id: u32,
    /// The block being filled: a zeroed header, then records (empty, without a
    /// buffer, until a record comes).
    block: Vec<u8>,
    block_records: u32,
    /// Sealed blocks, oldest first, not yet taken by the writer.
    sealed: Vec<Vec<u8>>,
    sealed_bytes: usize,
    /// Written blocks' buffers, for the next blocks.
    free: Vec<Vec<u8>>,
    blocks: u32,
    records: u64,
    rows: u64,
    /// Bytes of records encoded so far (block headers not counted).
    encoded_bytes: u64,
    chain_crc: u32,
    /// The size of a row too large for a record, if one was offered.
    oversize: Option<usize>,
}

impl LcpBlocks {
    /// An empty encoder for the data file of LCP `lcp_id`.
    pub fn new(lcp_id: u32) -> LcpBlocks {
        LcpBlocks {
            lcp_id,
            block: Vec::new(),
            block_records: 0,
            sealed: Vec::new(),
            sealed_bytes: 0,
            free: Vec::new(),
            blocks: 0,
            records: 0,
            rows: 0,
            encoded_bytes: 0,
            chain_crc: 0,
            oversize: None,
        }
    }

    pub fn lcp_id(&self) -> u32 {
        self.lcp_id
    }

    /// A row whose payload, `payload_len` bytes, `fill` appends to the buffer it is
    /// given (the caller's row image; opaque here). A payload over
    /// [`MAX_ROW_PAYLOAD_BYTES`] is not encoded and fails the file.
    pub fn put_row_with(
        &mut self,
        row_id: u32,
        payload_len: usize,
        fill: impl FnOnce(&mut Vec<u8>),
    ) {
        if payload_len > MAX_ROW_PAYLOAD_BYTES {
            self.oversize.get_or_insert(payload_len);
            return;
        }
        self.room_for(ROW_RECORD_HEADER_BYTES + payload_len);
        self.block.push(KIND_ROW);
        self.block.extend_from_slice(&row_id.to_le_bytes());
        self.block
            .extend_from_slice(&(payload_len as u32).to_le_bytes());
        let start = self.block.len();
        fill(&mut self.block);
        assert_eq!(
            self.block.len() - start,
            payload_len,
            "LCP row {row_id}: the image is not the length announced"
        );
        self.block_records += 1;
        self.records += 1;
        self.rows += 1;
        self.encoded_bytes += (ROW_RECORD_HEADER_BYTES + payload_len) as u64;
    }

    /// A row whose payload is `payload`.
    pub fn put_row(&mut self, row_id: u32, payload: &[u8]) {
        self.put_row_with(row_id, payload.len(), |out| out.extend_from_slice(payload));
    }

    /// The row at `row_id` is gone (CHANGE parts).
    pub fn delete_row(&mut self, row_id: u32) {
        self.put_marker(KIND_DELETE_ROW, row_id);
    }

    /// Every row of page `page_no` is gone (CHANGE parts).
    pub fn delete_page(&mut self, page_no: u32) {
        self.put_marker(KIND_DELETE_PAGE, page_no);
    }

    fn put_marker(&mut self, kind: u8, id: u32) {
        self.room_for(DELETE_RECORD_BYTES);
        self.block.push(kind);
        self.block.extend_from_slice(&id.to_le_bytes());
        self.block_records += 1;
        self.records += 1;
        self.encoded_bytes += DELETE_RECORD_BYTES as u64;
    }

    fn room_for(&mut self, bytes: usize) {
        if self.block.len() + bytes > BLOCK_BYTES {
            self.seal();
        }
        if self.block.is_empty() {
            self.block = new_block(self.free.pop().unwrap_or_default());
        }
    }

    /// Closes the block being filled (if it holds a record): numbered, checksummed,
    /// chained, queued for the writer.
    pub fn seal(&mut self) {
        if self.block_records == 0 {
            return;
        }
        let body = (self.block.len() - BLOCK_HEADER_BYTES) as u32;
        let mut block = std::mem::take(&mut self.block);
        put_u32(&mut block, 0, BLOCK_MAGIC);
        put_u32(&mut block, 8, self.blocks);
        put_u32(&mut block, 12, body);
        put_u32(&mut block, 16, self.block_records);
        put_u32(&mut block, 20, self.lcp_id);
        let crc = crc32c::crc32c(&block[8..]);
        put_u32(&mut block, 4, crc);
        self.chain_crc = crc32c::crc32c_append(self.chain_crc, &crc.to_le_bytes());
        self.blocks += 1;
        self.block_records = 0;
        self.sealed_bytes += block.len();
        self.sealed.push(block);
    }

    /// Fails when a row could not be encoded (the file would miss it).
    pub fn check(&self) -> Result<()> {
        match self.oversize {
            Some(len) => Err(codes::internal(format!(
                "LCP row image of {len} bytes, at most {MAX_ROW_PAYLOAD_BYTES}"
            ))),
            None => Ok(()),
        }
    }

    /// Nothing encoded yet.
    pub fn is_empty(&self) -> bool {
        self.records == 0 && self.oversize.is_none()
    }

    /// Bytes held in memory: the sealed blocks and the block being filled.
    pub fn pending_bytes(&self) -> usize {
        self.sealed_bytes + self.block.len()
    }

    /// Bytes of records encoded so far (for write pacing).
    pub fn encoded_bytes(&self) -> u64 {
        self.encoded_bytes
    }

    /// The sealed blocks, oldest first (the writer hands each buffer back through
    /// [`Self::recycle`] once written).
    pub(super) fn take_sealed(&mut self) -> Vec<Vec<u8>> {
        self.sealed_bytes = 0;
        std::mem::take(&mut self.sealed)
    }

    pub(super) fn recycle(&mut self, buffer: Vec<u8>) {
        if self.free.len() < MAX_FREE_BUFFERS {
            self.free.push(buffer);
        }
    }

    /// (blocks, records, rows, chain CRC) for the footer; every block sealed.
    pub(super) fn totals(&self) -> (u32, u64, u64, u32) {
        debug_assert_eq!(self.block_records, 0, "totals with a block not sealed");
        (self.blocks, self.records, self.rows, self.chain_crc)
    }
}

/// A block buffer with room for a whole block and a zeroed header.
fn new_block(mut buffer: Vec<u8>) -> Vec<u8> {
    buffer.clear();
    buffer.reserve(BLOCK_BYTES);
    buffer.resize(BLOCK_HEADER_BYTES, 0);
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::u32_at;

    #[test]
    fn blocks_are_numbered_chained_and_never_split_a_record() {
        let mut b = LcpBlocks::new(7);
        let payload = vec![5u8; 100_000];
        for id in 0..6 {
            b.put_row(id, &payload);
        }
        b.delete_row(9);
        b.seal();
        let sealed = b.take_sealed();
        // 2 rows of 100,009 bytes fit a 256 KiB block, a third does not.
        assert_eq!(sealed.len(), 3);
        let mut chain = 0;
        for (i, block) in sealed.iter().enumerate() {
            assert!(block.len() <= BLOCK_BYTES);
            assert_eq!(u32_at(block, 0), BLOCK_MAGIC);
            assert_eq!(u32_at(block, 8), i as u32);
            assert_eq!(u32_at(block, 12) as usize, block.len() - BLOCK_HEADER_BYTES);
            assert_eq!(u32_at(block, 20), 7);
            let crc = crc32c::crc32c(&block[8..]);
            assert_eq!(u32_at(block, 4), crc);
            chain = crc32c::crc32c_append(chain, &crc.to_le_bytes());
        }
        assert_eq!(u32_at(&sealed[2], 16), 3, "2 rows and the delete marker");
        assert_eq!(b.totals(), (3, 7, 6, chain));
        assert_eq!(b.pending_bytes(), 0);
    }

    #[test]
    fn an_oversized_row_fails_the_file_and_is_not_encoded() {
        let mut b = LcpBlocks::new(1);
        b.put_row(1, &[1, 2, 3]);
        assert!(b.check().is_ok());
        b.put_row_with(2, MAX_ROW_PAYLOAD_BYTES + 1, |_| unreachable!());
        let e = b.check().expect_err("oversized row");
        assert!(e.to_string().contains("at most"), "{e}");
        b.seal();
        assert_eq!(b.totals().1, 1, "only the first row was encoded");
    }

    #[test]
    #[should_panic(expected = "not the length announced")]
    fn a_fill_of_the_wrong_length_is_caught() {
        let mut b = LcpBlocks::new(1);
        b.put_row_with(1, 4, |out| out.extend_from_slice(&[1, 2, 3]));
    }
}
